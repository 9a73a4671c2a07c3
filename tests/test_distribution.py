"""The distribution: ``python -m build`` of a clean clone's files makes a wheel and an sdist with
everything gpucluster needs at run time and nothing else (no tests, no generic top-level module).

The build runs once per module (``python -m build --no-isolation``: this environment's setuptools,
no download) on a copy of the checkout's tracked files, as a fresh clone has them.
"""

from __future__ import annotations

import email
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from _support import tree

import gpucluster
from gpucluster import cli, sdk

ROOT = Path(__file__).resolve().parents[1]
CDKTF = ROOT / "node_modules" / ".bin" / "cdktf"
TOP_LEVEL = {
    "gpucluster",
    "gpucluster_cdk",
    "gpucluster_aks",
    "gpucluster_nvke",
    "gpucluster_oke",
    "gpucluster_rig",
}
"""The wheel's importable top-level names: all gpucluster's own, none a project folder could hold."""
PACKAGE_ROOTS = {
    "gpucluster": "gpucluster",
    "gpucluster_cdk": "gpucluster_cdk",
    "docs": "gpucluster/docs",  # the docs the messages name: `gpucluster docs NAME`
    "plugins/gpucluster_aks": "gpucluster_aks",
    "plugins/gpucluster_nvke": "gpucluster_nvke",
    "plugins/gpucluster_oke": "gpucluster_oke",
    "gpucluster_rig": "gpucluster_rig",
}
"""Source folder -> where its files land in the wheel."""


def tracked_files() -> list[str]:
    """The checkout's files as a clone has them (tracked, plus new files not ignored), or skip."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout of gpucluster (the files of a clone)")
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    return sorted({f for f in listed if f and (ROOT / f).is_file() and not (ROOT / f).is_symlink()})


def build_distribution(out: Path) -> tuple[Path, Path]:
    """``python -m build --no-isolation`` of a copy of :func:`tracked_files` into ``out``;
    returns (wheel, sdist)."""
    src = out / "src"
    for rel in tracked_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    [wheel] = (out / "dist").glob("gpucluster-*-py3-none-any.whl")
    [sdist] = (out / "dist").glob("gpucluster-*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> tuple[Path, Path]:
    return build_distribution(tmp_path_factory.mktemp("build"))


def runtime_files() -> dict[str, str]:
    """Every tracked file of the packages (not bytecode): ``{path in the wheel: source path}``."""
    found = {}
    for rel in tracked_files():
        for folder, target in PACKAGE_ROOTS.items():
            if rel.startswith(folder + "/") and "__pycache__" not in rel:
                found[target + rel[len(folder) :]] = rel
    return found


def test_the_wheel_holds_every_runtime_file_and_nothing_else(dist):
    wheel, _ = dist
    names = zipfile.ZipFile(wheel).namelist()
    info = f"gpucluster-{gpucluster.__version__}.dist-info"
    payload = {n for n in names if not n.startswith(info + "/")}
    expected = runtime_files()
    assert payload == set(expected)
    for required in (
        "gpucluster/catalog/registry.yaml",
        "gpucluster/default_cluster.yaml",
        "gpucluster_aks/gpu_vm_sizes.yaml",
        "gpucluster_cdk/constructs_lib/lazy_bindings.cjs",
        "gpucluster_cdk/__main__.py",
        "gpucluster/docs/cluster-file.md",
    ):
        assert required in payload
    assert any(n.endswith(".yaml.j2") for n in payload)  # the catalog's manifest templates
    assert {n.split("/")[0] for n in payload} == TOP_LEVEL
    assert not [
        n
        for n in names
        if n.startswith(("tests/", "examples/", "tools/")) or n in ("main.py", "cdktf.json")
    ]


def test_the_wheel_metadata(dist):
    wheel, _ = dist
    archive = zipfile.ZipFile(wheel)
    info = f"gpucluster-{gpucluster.__version__}.dist-info"
    meta = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert meta["Name"] == "gpucluster" and meta["Version"] == gpucluster.__version__
    assert (
        meta["License-Expression"] == "Apache-2.0"
        and f"{info}/licenses/NOTICE" in archive.namelist()
    )
    requires = meta.get_all("Requires-Dist")
    assert 'cdktf==0.21.0; extra == "cdk"' in requires and any(
        r.startswith("pluggy") for r in requires
    )
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "gpucluster = gpucluster.cli:main" in entry_points
    assert (
        "[gpucluster]\naks = gpucluster_aks\nnvke = gpucluster_nvke\noke = gpucluster_oke\n"
        in entry_points
    )


def test_the_sdist_has_the_sources_and_no_tests(dist):
    _, sdist = dist
    top = f"gpucluster-{gpucluster.__version__}/"
    names = {n[len(top) :] for n in tarfile.open(sdist).getnames() if n.startswith(top)}
    assert {"pyproject.toml", "README.md", "NOTICE", "CHANGELOG.md", "MANIFEST.in"} <= names
    assert {src for src in runtime_files().values()} <= names
    assert not [
        n for n in names if n.split("/")[0] in ("tests", "tools", "examples", "node_modules")
    ]
    assert not {"main.py", "cdktf.json", "Makefile", "package.json"} & names


def test_version_names_the_tool_and_the_sdk_api(capsys):
    assert (
        cli.main(["--version"]) == 0
    )  # main returns argparse's exit code (usage errors are error[usage] lines)
    assert (
        capsys.readouterr().out
        == f"gpucluster {gpucluster.__version__} (plugin SDK API {sdk.API_VERSION})\n"
    )
    assert sdk.API_VERSION == gpucluster.SDK_API_VERSION and len(sdk.API_VERSION.split(".")) == 3


# --------------------------------------------------------------------------- the user's path, for real

PUBLIC_WORDING = re.compile(
    r"\bseed(?:s|'s)?\b|\bissues? #?\d+|\bsessions? \d+|\b(?:this|other|a) sessions?\b", re.I
)
"""Words of how gpucluster was made, which a user cannot follow ("seed aks-gpu-setup", "issue 13",
"session 5"): every fact cites what a user can open instead (docs/catalog-sources.md)."""


UPSTREAM_COPIES = ("gpucluster/live/aicr_checks/",)
"""AICR's own files, shipped unchanged (NOTICE): their "issue #N" are NVIDIA/aicr's, public."""


def test_the_distribution_speaks_of_public_sources_only(dist):
    wheel, sdist = dist
    found = []
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.startswith(UPSTREAM_COPIES):
                continue
            text = archive.read(name).decode("utf-8", errors="replace")
            found += [
                f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
                for m in PUBLIC_WORDING.finditer(text)
            ]
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            if member.isfile() and member.name.endswith((".md", ".txt")):
                text = archive.extractfile(member).read().decode("utf-8", errors="replace")
                found += [f"{member.name}: {m.group()}" for m in PUBLIC_WORDING.finditer(text)]
    assert found == []


def test_the_wording_check_finds_project_history():
    for text in (
        "(seed aks-gpu-setup)",
        "the seed's overlay",
        "issue 13",
        "Issue #14 item 2",
        "session 5",
        "while other sessions ran",
    ):
        assert PUBLIC_WORDING.search(text), text
    for text in (
        "sha256 of the hash's static part",
        "the TLS session initiated by the client",
        "NVIDIA/aicr#1327",
    ):
        assert not PUBLIC_WORDING.search(text), text


def user_env(home: Path, venv: Path) -> dict[str, str]:
    """A user's shell with the virtual environment activated: this process's environment without
    gpucluster's, cdktf's, jsii's, the checkpoint and Python path settings, ``HOME`` (so the
    per-user caches and ``~`` are the test's), ``VIRTUAL_ENV`` and its ``bin`` first on PATH. A
    ``TF_CLI_CONFIG_FILE`` naming a missing file (this machine's, not a user's) is dropped."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUCLUSTER_", "CDKTF_", "JSII_", "PYTHON", "XDG_", "VIRTUAL_ENV"))
        and k != "CHECKPOINT_DISABLE"
        or k == "GPUCLUSTER_CDK"
    }
    if env.get("TF_CLI_CONFIG_FILE") and not Path(env["TF_CLI_CONFIG_FILE"]).exists():
        del env["TF_CLI_CONFIG_FILE"]
    env.update(
        HOME=str(home),
        VIRTUAL_ENV=str(venv),
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def pip_install(venv: Path, *args: str) -> None:
    """This environment's pip installing into ``venv`` (made without pip), offline."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-index",
            "--no-compile",
            "--disable-pip-version-check",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_docs_the_messages_name_are_readable_from_the_installed_wheel(dist, tmp_path):
    """The wheel alone (no extras) in a fresh virtual environment, run outside the checkout:
    ``gpucluster docs`` lists the docs it installed and prints the one an error names."""
    from _wheelhouse import wheelhouse

    wheel, _ = dist
    home = tmp_path / "home"
    venv = home / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    wheels = tmp_path / "wheels"
    wheelhouse(wheel, set(), wheels)
    pip_install(venv, "--find-links", str(wheels), str(wheel))
    env = user_env(home, venv)

    def run(*argv: str) -> str:
        proc = subprocess.run(
            ["gpucluster", *argv], cwd=home, env=env, capture_output=True, text=True, timeout=120
        )
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        return proc.stdout

    listing = run("docs")
    where = listing.splitlines()[-1].split(" docs in ")[1].split(";")[0]
    assert Path(where).is_relative_to(venv)
    assert [line.split()[0] for line in listing.splitlines()[:-2]] == sorted(
        p.stem for p in (ROOT / "docs").glob("*.md")
    )
    assert run("docs", "docs/cluster-file.md") == (ROOT / "docs" / "cluster-file.md").read_text(
        encoding="utf-8"
    )


def test_the_user_path_from_a_fresh_virtual_environment(dist, tmp_path):
    """README.md "Use gpucluster from your own repository", outside the clone, in a new virtual
    environment: install the wheel with the cdk extra (its dependencies as wheels of this
    environment's own installs: offline), a third-party plugin that depends on gpucluster
    through --find-links, then the README's gpucluster lines (--version, init, plan, synth; not
    charts pull and lint, which need the chart registries and the render extra) and cdktf synth
    in the project, which also holds folders named like the modules a cdktf project has."""
    from _wheelhouse import wheelhouse
    from test_docs_examples import readme_user_path

    wheel, _ = dist
    home = tmp_path / "home"
    venv = home / "venvs" / "gpucluster"  # the README's path
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    wheels = tmp_path / "wheels"
    wheelhouse(wheel, {"cdk"}, wheels)
    pip_install(venv, "--find-links", str(wheels), f"{wheel}[cdk]")

    plugin_src = tmp_path / "plugin"
    shutil.copytree(
        ROOT / "examples" / "example_plugin",
        plugin_src,
        ignore=shutil.ignore_patterns("__pycache__", "tests"),
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--no-isolation",
            "--wheel",
            "--outdir",
            str(wheel.parent),
            str(plugin_src),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pip_install(
        venv, "--find-links", str(wheel.parent), "--find-links", str(wheels), "gpucluster-example"
    )

    env = user_env(home, venv)
    cwd = tmp_path  # the README's first lines run in the clone; the build is the fixture's

    def run(line: str) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, f"{line}: {proc.stdout}{proc.stderr}"
        return proc

    outputs = {}
    for line in readme_user_path():
        words = line.split()
        if words[0] == "cd":
            cwd = Path(words[1].replace("~", str(home), 1))
        elif words[0] == "gpucluster" and words[1] in ("--version", "init", "plan", "synth"):
            outputs[words[1]] = run(line)
    assert (
        outputs["--version"].stdout
        == f"gpucluster {gpucluster.__version__} (plugin SDK API {sdk.API_VERSION})\n"
    )
    project = home / "src" / "gpu-clusters"
    assert cwd == project and (project / ".github" / "workflows" / "gpucluster.yml").is_file()
    assert outputs["plan"].stdout.startswith(
        "cluster aks-training: recipe h100-aks-ubuntu-training"
    )
    assert (
        outputs["synth"].stdout
        == "synthesized 2 stacks into cdktf.out: aks-training-cluster, aks-training-runtime\n"
    )

    where = run(
        "python -c 'import gpucluster, gpucluster_cdk, importlib.metadata as m; "
        'print(gpucluster.__file__); print(gpucluster_cdk.__file__); print(m.distribution("gpucluster").locate_file(""))\''
    )
    assert all(
        Path(p).is_relative_to(venv) for p in where.stdout.split()
    )  # the installed tool, not the clone

    for stack in (
        "aks-training-cluster",
        "aks-training-runtime",
    ):  # every state path is the project's, and ignored
        doc = json.loads((project / "cdktf.out" / "stacks" / stack / "cdk.tf.json").read_text())
        state = (
            project / "cdktf.out" / "stacks" / stack / doc["terraform"]["backend"]["local"]["path"]
        ).resolve()
        assert state.parent == project.resolve() and state.name == f"terraform.{stack}.tfstate"
        assert any(
            fnmatch.fnmatch(state.name, pattern)
            for pattern in (project / ".gitignore").read_text().splitlines()
        )

    for shadow in (
        "stacks",
        "constructs_lib",
    ):  # a cdktf project's own modules shadow nothing of gpucluster's
        (project / shadow).mkdir()
        (project / shadow / "__init__.py").write_text(
            "raise ImportError('the project folder shadowed an installed module')\n"
        )
    (project / "main.py").write_text(
        "raise SystemExit('the project folder shadowed an installed module')\n"
    )
    if not CDKTF.exists():
        pytest.fail(f"{CDKTF} missing: run `make setup` (npm ci installs the pinned cdktf-cli)")
    cli_run = run(f"CHECKPOINT_DISABLE=1 {CDKTF} synth --output by-cdktf")
    assert "[ERROR]" not in cli_run.stdout + cli_run.stderr
    assert tree(project / "by-cdktf") == tree(project / "cdktf.out")

    plugins = run("gpucluster plugins")
    assert (
        "example: module gpucluster_example (gpucluster-example 0.1.0)\n  platform example-k8s: "
        in plugins.stdout
    )
    assert f"aks: module gpucluster_aks (gpucluster {gpucluster.__version__})" in plugins.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    cwd = empty
    notice = run("gpucluster plan")
    [info] = [line for line in notice.stderr.splitlines() if line.startswith("info[")]
    assert (
        info.startswith(f"info[input.default] file=<embedded default>: no cluster file in {empty} ")
        and "`gpucluster init`" in info
    )
    assert notice.stderr.splitlines()[0] == info and sorted(p.name for p in empty.iterdir()) == []
