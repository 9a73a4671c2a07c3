"""The distribution: ``python -m build`` of a clean clone's files makes a wheel and an sdist with
everything gpucluster needs at run time and nothing else (no tests, no generic top-level module).

The build runs once per module (``python -m build --no-isolation``: this environment's setuptools,
no download) on a copy of the checkout's tracked files, as a fresh clone has them.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import gpucluster
from gpucluster import cli
from gpucluster import sdk

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {"gpucluster", "gpucluster_cdk", "gpucluster_aks", "gpucluster_nvke", "gpucluster_oke"}
"""The wheel's importable top-level names: all gpucluster's own, none a project folder could hold."""
PACKAGE_ROOTS = {"gpucluster": "gpucluster", "gpucluster_cdk": "gpucluster_cdk", "plugins/gpucluster_aks": "gpucluster_aks",
                 "plugins/gpucluster_nvke": "gpucluster_nvke", "plugins/gpucluster_oke": "gpucluster_oke"}
"""Source folder -> where its files land in the wheel."""


def tracked_files() -> list[str]:
    """The checkout's files as a clone has them (tracked, plus new files not ignored), or skip."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout of gpucluster (the files of a clone)")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    return sorted({f for f in listed if f and (ROOT / f).is_file() and not (ROOT / f).is_symlink()})


def build_distribution(out: Path) -> tuple[Path, Path]:
    """``python -m build --no-isolation`` of a copy of :func:`tracked_files` into ``out``;
    returns (wheel, sdist)."""
    src = out / "src"
    for rel in tracked_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out / "dist"), str(src)],
                          capture_output=True, text=True, timeout=600)
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
                found[target + rel[len(folder):]] = rel
    return found


def test_the_wheel_holds_every_runtime_file_and_nothing_else(dist):
    wheel, _ = dist
    names = zipfile.ZipFile(wheel).namelist()
    info = f"gpucluster-{gpucluster.__version__}.dist-info"
    payload = {n for n in names if not n.startswith(info + "/")}
    expected = runtime_files()
    assert payload == set(expected)
    for required in ("gpucluster/catalog/registry.yaml", "gpucluster/default_cluster.yaml", "gpucluster_aks/gpu_vm_sizes.yaml",
                     "gpucluster_cdk/constructs_lib/lazy_bindings.cjs", "gpucluster_cdk/__main__.py"):
        assert required in payload
    assert any(n.endswith(".yaml.j2") for n in payload)  # the catalog's manifest templates
    assert {n.split("/")[0] for n in payload} == TOP_LEVEL
    assert not [n for n in names if n.startswith(("tests/", "examples/", "tools/")) or n in ("main.py", "cdktf.json")]


def test_the_wheel_metadata(dist):
    wheel, _ = dist
    archive = zipfile.ZipFile(wheel)
    info = f"gpucluster-{gpucluster.__version__}.dist-info"
    meta = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert meta["Name"] == "gpucluster" and meta["Version"] == gpucluster.__version__
    assert meta["License-Expression"] == "Apache-2.0" and f"{info}/licenses/NOTICE" in archive.namelist()
    requires = meta.get_all("Requires-Dist")
    assert 'cdktf==0.21.0; extra == "cdk"' in requires and any(r.startswith("pluggy") for r in requires)
    entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert "gpucluster = gpucluster.cli:main" in entry_points
    assert "[gpucluster]\naks = gpucluster_aks\nnvke = gpucluster_nvke\noke = gpucluster_oke\n" in entry_points


def test_the_sdist_has_the_sources_and_no_tests(dist):
    _, sdist = dist
    top = f"gpucluster-{gpucluster.__version__}/"
    names = {n[len(top):] for n in tarfile.open(sdist).getnames() if n.startswith(top)}
    assert {"pyproject.toml", "README.md", "NOTICE", "CHANGELOG.md", "MANIFEST.in"} <= names
    assert {src for src in runtime_files().values()} <= names
    assert not [n for n in names if n.split("/")[0] in ("tests", "tools", "examples", "node_modules")]
    assert not {"main.py", "cdktf.json", "Makefile", "package.json"} & names


def test_version_names_the_tool_and_the_sdk_api(capsys):
    assert cli.main(["--version"]) == 0  # main returns argparse's exit code (usage errors are error[usage] lines)
    assert capsys.readouterr().out == f"gpucluster {gpucluster.__version__} (plugin SDK API {sdk.API_VERSION})\n"
    assert sdk.API_VERSION == gpucluster.SDK_API_VERSION and len(sdk.API_VERSION.split(".")) == 3
