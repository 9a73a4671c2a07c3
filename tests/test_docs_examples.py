"""Every complete cluster file in the docs (a ```yaml block with ``clusters:``) is accepted.

The blocks of README.md and docs/*.md run through ``load_clusters`` + ``build_plans`` in a scratch
folder, with the files they reference created there (RecipeResults through
:mod:`gpucluster.recipes.recipe_result`, values files as empty mappings), so the docs cannot drift from
what gpucluster accepts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster import yamlsafe
from gpucluster.errors import GpuclusterError
from gpucluster.model import Criteria

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.S | re.M)


def cluster_file_blocks() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in BLOCK.finditer(text):
            if re.search(r"^clusters:", m.group(1), re.M):
                line = text[: m.start()].count("\n") + 1
                out.append((f"{doc.relative_to(ROOT)}:{line}", m.group(1)))
    return out


BLOCKS = cluster_file_blocks()


def test_the_docs_have_complete_cluster_files():
    where = {w.split(":")[0] for w, _ in BLOCKS}
    assert {"README.md", "docs/cluster-file.md", "docs/nvke.md", "docs/oke.md"} <= where


def _recipe_criteria(path: str) -> Criteria:
    """Criteria from a RecipeResult file name ``<accelerator>-<service>-<intent>.yaml``."""
    accelerator, service, intent = Path(path).stem.split("-")
    return Criteria(service=service, accelerator=accelerator, os="ubuntu", intent=intent)


def _write_referenced_files(data: dict, folder: Path) -> None:
    from gpucluster.recipes import layering, recipe_result_writer
    from gpucluster.recipes import recipe as recipe_mod
    from gpucluster.recipes.catalog import load_catalog

    for cluster in data["clusters"]:
        if "recipe" in cluster:
            catalog = load_catalog()
            recipe = recipe_mod.resolve(
                _recipe_criteria(cluster["recipe"]), catalog, profile={}, file="test"
            )
            doc = recipe_result_writer.to_document(
                recipe, layering.effective_components(recipe, catalog)
            )
            target = folder / cluster["recipe"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(recipe_result_writer.dump_yaml(doc))
        for entry in (cluster.get("overrides") or {}).get("values") or []:
            if "file" in entry:
                target = folder / entry["file"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("{}\n")


@pytest.mark.parametrize("where, text", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_cluster_file_in_the_docs_is_accepted(where, text, tmp_path, monkeypatch):
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import build_plans

    path = tmp_path / "gpucluster.yaml"
    path.write_text(text)
    _write_referenced_files(yamlsafe.load_yaml_file(path, display="gpucluster.yaml"), tmp_path)
    monkeypatch.chdir(tmp_path)
    try:
        plans = build_plans(load_clusters("gpucluster.yaml", env={}))
    except GpuclusterError as err:
        pytest.fail(f"{where}: the documented cluster file is refused:\n{err.render()}")
    assert [p.cluster.name for p in plans] == [
        c["name"] for c in yamlsafe.load_yaml_file(path, display="x")["clusters"]
    ]


def readme_user_path() -> list[str]:
    """The command lines of README.md's first code block under "Use gpucluster from your own
    repository" (comments cut), in order."""
    import shlex

    text = (ROOT / "README.md").read_text()
    section = text.split("## Use gpucluster from your own repository", 1)[1]
    block = re.search(r"^```bash\n(.*?)^```", section, re.S | re.M).group(1)
    return [
        " ".join(shlex.split(line, comments=True))
        for line in block.splitlines()
        if shlex.split(line, comments=True)
    ]


def test_the_readme_user_path_commands_exist():
    """Every gpucluster command of the user's path parses with the CLI (tests/test_distribution.py
    runs them in a fresh environment outside the clone)."""
    import shlex

    from gpucluster import __version__
    from gpucluster.cli import build_parser

    lines = readme_user_path()
    commands = [shlex.split(line)[1:] for line in lines if line.startswith("gpucluster ")]
    assert [c[0] for c in commands] == ["--version", "init", "plan", "charts", "lint", "synth"]
    for argv in commands[1:]:
        build_parser(argv[0]).parse_args(argv)
    assert f"dist/gpucluster-{__version__}-py3-none-any.whl[cdk,render,validate]" in " ".join(lines)


def test_the_readme_install_line_has_every_extra_its_commands_need():
    """The README's ``pip install`` of the wheel and ``gpucluster init``'s requirements.txt give
    the extras of every command the README shows: cdk (synth), render (render, lint, charts
    pull), validate (snapshot, validate: the kubernetes client)."""
    import tempfile

    from packaging.requirements import Requirement

    from gpucluster import init as init_mod

    text = (ROOT / "README.md").read_text()
    needed = {"cdk", "render"} | ({"validate"} if "gpucluster validate" in text else set())
    [install] = [line for line in readme_user_path() if line.startswith("pip install ")]
    assert Requirement("gpucluster" + install.split(".whl", 1)[1]).extras == needed
    with tempfile.TemporaryDirectory() as tmp:
        init_mod.init_project(tmp, init_mod.InitOptions())
        [line] = [
            line
            for line in (Path(tmp) / "requirements.txt").read_text().splitlines()
            if line and not line.startswith("#")
        ]
    assert Requirement(line).extras == needed


def test_every_output_format_the_readme_names_is_the_flag_the_cli_takes():
    """Each ``gpucluster CMD ... --format A|B`` of the README parses with CMD, and every output
    of validate (each --format choice and --junit) is named in the README by its flag."""
    from gpucluster.cli import build_parser

    text = (ROOT / "README.md").read_text()
    lines = [
        line for line in text.splitlines() if re.search(r"gpucluster [a-z-]+ .*--format", line)
    ]
    assert len(lines) >= 3
    for line in lines:
        command = re.search(r"gpucluster ([a-z-]+)", line).group(1)
        for choice in re.search(r"--format ([\w|]+)", line).group(1).split("|"):
            build_parser(command).parse_args([command, "--format", choice])
    parser = build_parser("validate")
    [sub] = [a for a in parser._actions if a.dest == "command"]
    [fmt] = [a for a in sub.choices["validate"]._actions if a.dest == "format"]
    for choice in fmt.choices:
        assert f"--format {choice}" in text, choice
    assert "--junit FILE" in text
