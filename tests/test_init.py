"""``gpucluster init``: a project folder the user owns, valid for every choice, never overwriting.

Every service x intent (the platform's) x backend x CI provider is created and its cluster file
planned; the CI workflows are checked against the GitHub Actions and Azure Pipelines schemas
(check-jsonschema's vendored SchemaStore schemas); every ``gpucluster`` command the README and
the workflows name parses.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from packaging.requirements import Requirement

import gpucluster
from gpucluster import cli
from gpucluster import init as init_mod
from gpucluster.errors import GpuclusterError
from gpucluster.inputs.config import CLUSTER_NAME, CLUSTER_NAME_MAX, load_config
from gpucluster.pipeline import build_plans
from gpucluster.plugins import platforms

BASE_FILES = ["cdktf.json", "gpucluster.yaml", "requirements.txt", ".gitignore", "README.md"]


def combinations():
    for service in init_mod.SERVICES:
        for intent in platforms()[service].intents:
            for backend, ci in itertools.product(init_mod.BACKENDS, init_mod.CI_PROVIDERS):
                yield init_mod.InitOptions(service=service, intent=intent, backend=backend, ci=ci)


COMBINATIONS = list(combinations())


def run_init(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["init", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def listing(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>")
        for p in sorted(root.rglob("*"))
    }


def test_every_choice_is_offered():
    assert len(COMBINATIONS) == (2 + 1 + 2) * len(init_mod.BACKENDS) * len(init_mod.CI_PROVIDERS)
    assert set(init_mod.SERVICES) == {"aks", "nvke", "oke"} and {"local", "cloud"} <= set(
        init_mod.BACKENDS
    )
    assert set(init_mod.CI_PROVIDERS) == {"none", "github", "azure-pipelines"}


@pytest.mark.parametrize(
    "options",
    COMBINATIONS,
    ids=[f"{o.service}-{o.intent}-{o.backend}-{o.ci}" for o in COMBINATIONS],
)
def test_every_combination_plans(options, tmp_path, monkeypatch):
    written = init_mod.init_project(tmp_path / "proj", options)
    ci = init_mod.CI_PROVIDERS[options.ci]
    assert [str(p.relative_to(tmp_path / "proj")) for p in written] == BASE_FILES + (
        [ci.path] if ci.path else []
    )
    monkeypatch.chdir(tmp_path / "proj")
    clusters, fleet = load_config(env={})
    [plan] = build_plans(clusters)
    assert fleet is None and plan.cluster.name == f"{options.service}-{options.intent}"
    assert (plan.cluster.criteria.service, plan.cluster.criteria.intent) == (
        options.service,
        options.intent,
    )
    assert plan.cluster.source == "gpucluster.yaml"
    assert (plan.cluster.backend or {"type": "local"})["type"] == options.backend
    assert not [f for f in plan.findings if f.severity == "error"]


def test_the_project_runs_the_installed_app(tmp_path):
    init_mod.init_project(tmp_path, init_mod.InitOptions())
    config = json.loads((tmp_path / "cdktf.json").read_text())
    assert (
        config["app"] == "python -m gpucluster_cdk"
        and config["output"] == "cdktf.out"
        and config["language"] == "python"
    )
    assert config["terraformProviders"] == [] and config["context"] == {}
    assert (Path(__import__("gpucluster_cdk").__file__).parent / "__main__.py").is_file()
    [requirement] = [
        Requirement(line)
        for line in (tmp_path / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert requirement.name == "gpucluster" and requirement.extras == {"cdk", "render", "validate"}
    assert str(requirement.specifier) == f"=={gpucluster.__version__}"
    ignored = (tmp_path / ".gitignore").read_text().splitlines()
    assert {"cdktf.out/", ".terraform/", "terraform.*.tfstate", ".venv/", "node_modules/"} <= set(
        ignored
    )
    readme = " ".join((tmp_path / "README.md").read_text().split())
    assert "export TF_CLI_CONFIG_FILE=/dev/null" in readme
    assert "No module named gpucluster_cdk" in readme  # cdktf synth runs the python on PATH


@pytest.mark.synth
def test_an_azurerm_project_synthesizes_stacks_with_the_azurerm_backend(tmp_path, monkeypatch):
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans
    from gpucluster_cdk import stacks

    code, out, err = run_init(str(tmp_path / "proj"), "--backend", "azurerm", "--name", "lab")
    assert (code, err) == (0, "")
    monkeypatch.chdir(tmp_path / "proj")
    clusters, _ = load_config(env={})
    assert stacks.synth(build_plans(clusters), tmp_path / "out") == ["lab-cluster", "lab-runtime"]
    for stack in ("lab-cluster", "lab-runtime"):
        doc = json.loads((tmp_path / "out" / "stacks" / stack / "cdk.tf.json").read_text())
        assert doc["terraform"]["backend"] == {
            "azurerm": {
                "storage_account_name": "tfstate0example",
                "container_name": "tfstate",
                "resource_group_name": "rg-tfstate",
                "use_azuread_auth": True,
                "key": f"gpucluster/{stack}.tfstate",
            }
        }
        text = json.dumps(doc).lower()
        assert not re.search(r"access_key|sas_token|client_secret|accountkey=", text)


def test_the_cli_names_the_files_and_the_next_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_init("proj", "--ci", "github")
    assert (code, err) == (0, "")
    assert out == (
        f"created {tmp_path / 'proj'}: {', '.join(BASE_FILES)}, .github/workflows/gpucluster.yml\n"
        "next: cd proj && gpucluster plan   (README.md: set up, lint, synth, deploy)\n"
    )
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    code, out, _ = run_init("--service", "oke", "--intent", "inference")
    assert code == 0 and out == (
        f"created {tmp_path / 'here'}: {', '.join(BASE_FILES)}\n"
        "next: gpucluster plan   (README.md: set up, lint, synth, deploy)\n"
    )


@pytest.mark.parametrize("existing", ["gpucluster.yaml", ".gitignore", "README.md"])
def test_an_existing_file_is_never_overwritten_and_nothing_is_written(existing, tmp_path):
    (tmp_path / existing).write_text("mine\n")
    (tmp_path / "notes.txt").write_text("precious\n")
    before = listing(tmp_path)
    code, out, err = run_init(str(tmp_path), "--ci", "azure-pipelines")
    assert (code, out) == (2, "")
    assert err == (
        f"error[init.exists] file={tmp_path / existing}: {existing} already exists in {tmp_path}; gpucluster "
        "init never overwrites a file, so it wrote nothing fix: run gpucluster init in a new or empty folder "
        "(gpucluster init DIR), or move those files away first\n"
    )
    assert listing(tmp_path) == before


def test_every_existing_target_is_named_in_one_line(tmp_path):
    init_mod.init_project(tmp_path, init_mod.InitOptions())
    (tmp_path / "azure-pipelines.yml").symlink_to(
        tmp_path / "nowhere"
    )  # a dangling link counts as existing
    before = listing(tmp_path)
    code, _, err = run_init(str(tmp_path), "--ci", "azure-pipelines")
    assert code == 2 and len(err.splitlines()) == 1
    assert f": {', '.join(BASE_FILES)}, azure-pipelines.yml already exist in {tmp_path};" in err
    assert listing(tmp_path) == before and not (tmp_path / "nowhere").exists()


def test_a_write_that_fails_half_way_leaves_nothing_behind(tmp_path):
    (tmp_path / ".github").write_text("a file where the workflow folder would go\n")
    code, out, err = run_init(str(tmp_path), "--ci", "github")
    assert (code, out) == (2, "")
    workflows = tmp_path / ".github" / "workflows"
    assert err == (
        f"error[output] file={workflows} key=DIR: could not write {workflows}: Not a directory; gpucluster init "
        "removed what it had written fix: make the folder writable (or free space), or choose another folder\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == [".github"]


@pytest.mark.parametrize(
    "argv, key, allowed",
    [
        (["--service", "nvke", "--intent", "inference"], "--intent", "training"),
        (["--service", "eks"], "--service", "aks, nvke, oke"),
        (["--backend", "s3"], "--backend", ", ".join(init_mod.BACKENDS)),
        (["--ci", "jenkins"], "--ci", "none, github, azure-pipelines"),
        (["--name", "Bad_Name"], "--name", None),
        (["--name", "a" * 41], "--name", None),
    ],
)
def test_bad_choices_are_one_line_and_write_nothing(argv, key, allowed, tmp_path):
    code, out, err = run_init(str(tmp_path / "proj"), *argv)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1
    assert err.startswith("error[input] ") and f" key={key}: " in err and " fix: " in err
    if allowed:
        assert f"(allowed: {allowed})" in err
    assert not (tmp_path / "proj").exists()


def test_a_file_as_the_folder_is_refused(tmp_path):
    (tmp_path / "proj").write_text("x")
    code, _, err = run_init(str(tmp_path / "proj"))
    assert code == 2 and err.startswith(f"error[init.folder] file={tmp_path / 'proj'} key=DIR: ")


def test_the_same_choices_give_the_same_files(tmp_path):
    for n in (1, 2):
        init_mod.init_project(
            tmp_path / str(n) / "proj",
            init_mod.InitOptions(ci="github", backend="cloud", name="lab"),
        )
    assert listing(tmp_path / "1" / "proj") == listing(tmp_path / "2" / "proj")


def _commands(lines) -> list[list[str]]:
    """The arguments of every ``gpucluster ...`` command among ``lines`` (shell lines), comments cut."""
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if words[:1] == ["gpucluster"]:
            found.append(words[1:])
    return found


def _bash_lines(markdown: str) -> list[str]:
    return [
        line
        for block in re.findall(r"^```bash\n(.*?)^```", markdown, re.S | re.M)
        for line in block.splitlines()
    ]


@pytest.mark.parametrize("ci", [c for c in init_mod.CI_PROVIDERS if init_mod.CI_PROVIDERS[c].path])
def test_workflows_run_plan_lint_and_synth_and_keep_the_output(ci, tmp_path):
    for backend in init_mod.BACKENDS:
        root = tmp_path / backend
        init_mod.init_project(root, init_mod.InitOptions(ci=ci, backend=backend))
        text = (root / init_mod.CI_PROVIDERS[ci].path).read_text()
        doc = yaml.safe_load(text)
        steps = doc["jobs"]["synth"]["steps"] if ci == "github" else doc["steps"]
        scripts = [s.get("run") or s.get("script") or "" for s in steps]
        commands = _commands(line for script in scripts for line in script.splitlines())
        assert [c[0] for c in commands] == ["plan", "charts", "lint", "synth"]
        for argv in commands:
            cli.build_parser(argv[0]).parse_args(argv)
        assert "pip install -r requirements.txt" in scripts
        artifact = steps[-1]["with"] if ci == "github" else steps[-1]["inputs"]
        assert artifact.get("path", artifact.get("targetPath")) == "cdktf.out"
        installs_terraform = (
            "hashicorp/setup-terraform" in text or "apt-get install -y terraform" in text
        )
        assert installs_terraform == init_mod.BACKENDS[backend].synth_needs_terraform


def test_workflows_match_the_ci_systems_schemas(tmp_path):
    """check-jsonschema's vendored SchemaStore schemas of GitHub workflows and Azure Pipelines."""
    check = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    if check is None:
        pytest.fail(
            "check-jsonschema is missing: it is in the test extra (pip install -e '.[test]')"
        )
    files: dict[str, list[str]] = {"vendor.github-workflows": [], "vendor.azure-pipelines": []}
    for backend in init_mod.BACKENDS:
        for ci, schema in (
            ("github", "vendor.github-workflows"),
            ("azure-pipelines", "vendor.azure-pipelines"),
        ):
            root = tmp_path / f"{backend}-{ci}"
            init_mod.init_project(root, init_mod.InitOptions(ci=ci, backend=backend))
            files[schema].append(str(root / init_mod.CI_PROVIDERS[ci].path))
    for schema, paths in files.items():
        proc = subprocess.run(
            [check, "--regex-variant", "python", "--builtin-schema", schema, *paths],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "NO_COLOR": "1"},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_schema_check_fails_a_broken_workflow(tmp_path):
    check = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    if check is None:
        pytest.fail(
            "check-jsonschema is missing: it is in the test extra (pip install -e '.[test]')"
        )
    init_mod.init_project(tmp_path, init_mod.InitOptions(ci="github"))
    path = tmp_path / ".github" / "workflows" / "gpucluster.yml"
    path.write_text(path.read_text().replace("runs-on:", "runs_on:"))
    proc = subprocess.run(
        [check, "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1


@pytest.mark.parametrize("service", list(init_mod.SERVICES))
def test_the_readme_commands_parse(service, tmp_path):
    init_mod.init_project(tmp_path, init_mod.InitOptions(service=service, ci="github"))
    text = (tmp_path / "README.md").read_text()
    commands = _commands(_bash_lines(text))
    assert [c[0] for c in commands] == ["plan", "charts", "lint", "synth"]
    for argv in commands:
        cli.build_parser(argv[0]).parse_args(argv)
    assert (
        "CHECKPOINT_DISABLE=1" in text
        and "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20" in text
    )
    assert ".github/workflows/gpucluster.yml" in text
    stacks = (
        [f"{service}-training-cluster", f"{service}-training-runtime"]
        if service == "aks"
        else [f"{service}-training-runtime"]
    )
    assert all(f"`{s}`" in text or f"stacks/{s} " in text for s in stacks)


VALID_NAME_LENGTHS = st.integers(min_value=1, max_value=CLUSTER_NAME_MAX)
LETTERS, DIGITS = "abcdefghijklmnopqrstuvwxyz", "0123456789"


@st.composite
def valid_names(draw) -> str:
    """A name the cluster-name rule accepts, of every allowed length (1..40): a letter, then
    letters/digits/'-', ending in a letter or digit."""
    length = draw(VALID_NAME_LENGTHS)
    first = draw(st.sampled_from(LETTERS))
    if length == 1:
        return first
    middle = draw(
        st.text(alphabet=LETTERS + DIGITS + "-", min_size=length - 2, max_size=length - 2)
    )
    return first + middle + draw(st.sampled_from(LETTERS + DIGITS))


@settings(max_examples=40, deadline=None, database=None)
@given(name=valid_names(), service=st.sampled_from(sorted(init_mod.SERVICES)))
def test_every_valid_name_gives_a_project_that_plans_with_that_name(name, service):
    assert CLUSTER_NAME.fullmatch(name) and len(name) <= CLUSTER_NAME_MAX
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "proj"
        code, _, err = run_init(str(project), "--service", service, "--name", name)
        assert (code, err) == (0, "")
        out, err_io = io.StringIO(), io.StringIO()
        code = cli.main(
            ["plan", "--config", str(project / "gpucluster.yaml"), "--format", "json"],
            stdout=out,
            stderr=err_io,
        )
        assert code == 0, err_io.getvalue()
        assert [entry["cluster"] for entry in json.loads(out.getvalue())] == [name]


@pytest.mark.parametrize("length", [31, 39, 40])
def test_names_of_31_to_40_characters_plan(length, tmp_path):
    name = "a" * length
    code, _, err = run_init(str(tmp_path / "proj"), "--name", name)
    assert (code, err) == (0, "")
    [entry] = yaml.safe_load((tmp_path / "proj" / "gpucluster.yaml").read_text())["clusters"]
    assert entry["name"] == name


@settings(max_examples=40, deadline=None, database=None)
@given(
    name=st.one_of(
        st.text(min_size=1, max_size=60).filter(
            lambda n: not (CLUSTER_NAME.fullmatch(n) and len(n) <= CLUSTER_NAME_MAX)
        ),
        valid_names().map(lambda n: n + "a" * (CLUSTER_NAME_MAX + 1 - len(n))),
    )
)
def test_an_invalid_name_is_one_line_exit_2_and_nothing_written(name):
    assume("\x00" not in name and not name.startswith("-"))
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "proj"
        code, out, err = run_init(str(project), "--name", name)
        assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
        assert err.startswith("error[input] key=--name: ")
        assert not project.exists()


@pytest.mark.parametrize("link", [".github", ".github/workflows"])
def test_a_linked_folder_inside_the_project_is_refused_and_nothing_is_written(link, tmp_path):
    project, outside = tmp_path / "proj", tmp_path / "outside"
    outside.mkdir()
    (project / link).parent.mkdir(parents=True, exist_ok=True)
    (project / link).symlink_to(outside, target_is_directory=True)
    before = listing(tmp_path)
    code, out, err = run_init(str(project), "--ci", "github")
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith(f"error[init.folder] file={project / link} ") and "symbolic link" in err
    assert listing(tmp_path) == before and not list(outside.iterdir())


def test_a_symlink_loop_is_one_folder_line(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for folder in (tmp_path / "loop", tmp_path / "loop" / "x"):
        code, out, err = run_init(str(folder))
        assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
        assert err.startswith(f"error[init.folder] file={folder} key=DIR: ") and "loop" in err


def test_a_folder_name_of_256_bytes_is_one_folder_line(tmp_path):
    folder = tmp_path / ("a" * 256)
    code, out, err = run_init(str(folder))
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith("error[init.folder] file=") and "File name too long" in err
    assert list(tmp_path.iterdir()) == []


def test_control_characters_in_the_folder_name_are_escaped_when_printed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = "x\x1b[31mred\u202e"
    code, out, err = run_init(name)
    assert (code, err) == (0, "") and (tmp_path / name / "gpucluster.yaml").is_file()
    assert "\x1b" not in out and "\u202e" not in out and len(out.splitlines()) == 2
    assert f"created {tmp_path}/x\\x1b[31mred\\u202e: " in out
    assert "next: cd x\\x1b[31mred\\u202e && gpucluster plan" in out


@pytest.mark.parametrize(
    ("backend", "key", "mine"),
    [("azurerm", "storageAccountName", "contosotfstate"), ("cloud", "organization", "contoso")],
)
def test_the_example_backend_names_init_writes_are_warned_at_plan_until_replaced(
    backend, key, mine, tmp_path
):
    import io

    from gpucluster import cli

    init_mod.init_project(tmp_path, init_mod.InitOptions(backend=backend))
    config = tmp_path / "gpucluster.yaml"
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["plan", "--config", str(config)], stdout=out, stderr=err) == 0
    [line] = [x for x in err.getvalue().splitlines() if "BACKEND-PLACEHOLDER" in x]
    assert line.startswith(f"warning[BACKEND-PLACEHOLDER] file={config} cluster=aks-training ")
    assert f"key=backend.{key}:" in line and "fix: set backend." in line
    text = config.read_text()
    from gpucluster.inputs.backends import PLACEHOLDERS

    config.write_text(text.replace(PLACEHOLDERS[(backend, key)], mine))
    err = io.StringIO()
    assert cli.main(["plan", "--config", str(config)], stdout=io.StringIO(), stderr=err) == 0
    assert "BACKEND-PLACEHOLDER" not in err.getvalue()


@pytest.mark.parametrize(
    "service, intent, backend",
    [
        (s, i, b)
        for s in init_mod.SERVICES
        for i in ("training", "inference")
        for b in init_mod.BACKENDS
    ],
)
def test_every_warning_of_a_scaffolds_first_plan_is_named_in_its_cluster_file(
    service, intent, backend, tmp_path
):
    """What `gpucluster init` writes plans; each warning the first plan prints is one the
    written gpucluster.yaml names, with what to do, before the user runs it."""
    try:
        init_mod.init_project(
            tmp_path, init_mod.InitOptions(service=service, intent=intent, backend=backend)
        )
    except GpuclusterError:
        pytest.skip(f"{service} has no {intent} recipes")
    config = tmp_path / "gpucluster.yaml"
    err = io.StringIO()
    assert cli.main(["plan", "--config", str(config)], stdout=io.StringIO(), stderr=err) == 0
    warned = set(re.findall(r"^warning\[([A-Za-z0-9._-]+)\]", err.getvalue(), re.M))
    text = config.read_text()
    assert [w for w in sorted(warned) if w not in text] == []


def test_the_oke_training_scaffold_says_how_to_clear_its_one_warning(tmp_path, monkeypatch):
    """The OKE GB200 training scaffold's first plan warns OKE-KERNEL-MODULE-PARAMS (the image's
    driver parameters are a fact gpucluster cannot see); the scaffold carries the commented
    statement that clears it, and un-commenting it gives a plan without warnings."""
    code, _, err = run_init(str(tmp_path / "proj"), "--service", "oke", "--intent", "training")
    assert (code, err) == (0, "")
    monkeypatch.chdir(tmp_path / "proj")
    first = io.StringIO()
    second = io.StringIO()
    assert cli.main(["plan"], stdout=io.StringIO(), stderr=first) == 0
    assert "warning[OKE-KERNEL-MODULE-PARAMS]" in first.getvalue()
    path = Path("gpucluster.yaml")
    text = path.read_text()
    stated = text.replace("    # settings:", "    settings:  ").replace(
        "    #   imageDriverParams:", "      imageDriverParams:"
    )
    assert stated != text
    path.write_text(stated)
    assert cli.main(["plan"], stdout=io.StringIO(), stderr=second) == 0
    assert "warning[" not in second.getvalue(), second.getvalue()


def test_lint_counts_the_plan_warnings_it_prints(tmp_path, monkeypatch):
    """lint prints the plan's policy findings first; its count includes them and says so (it said
    ``0 warning(s)`` under a printed warning)."""
    code, _, err = run_init(str(tmp_path / "proj"), "--service", "oke", "--intent", "training")
    assert (code, err) == (0, "")
    monkeypatch.chdir(tmp_path / "proj")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # no chart at hand
    out, err_ = io.StringIO(), io.StringIO()
    cli.main(["lint"], stdout=out, stderr=err_)
    assert "warning[OKE-KERNEL-MODULE-PARAMS]" in err_.getvalue()
    summary = out.getvalue().splitlines()[0]
    printed = err_.getvalue().count("warning[")
    assert summary.startswith(
        f"0 error(s), {printed} warning(s) (1 of them from the plan's policy checks)"
    ), (summary, printed)
