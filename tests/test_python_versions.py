"""The supported Pythons (``requires-python``, README "Requirements"): the wheel installs with
``[cdk,render]`` into a fresh virtual environment of CPython 3.12 and 3.13, and there
``gpucluster init``, ``plan`` and ``synth`` (in a folder outside the checkout) write the stacks
byte for byte as this environment's Python 3.11 does, and the plugin test kit's own tests pass
(the example plugin's, tests/test_testing_kit.py with docs/testing.md).

Each interpreter's environment is made once per module: the wheel built once
(tests/test_distribution.py), its dependencies repacked from this environment's installs at the
same versions (tests/_wheelhouse.py), except the few whose wheels are built for one CPython ABI
(MarkupSafe, PyYAML, rpds-py): those, at the same versions, the interpreter's own pip downloads
(``pip download --only-binary :all:``, kept in the pip cache). The install itself is offline
(``--no-index``). A missing interpreter skips with how to add one.

There too, ``gpucluster charts pull`` fetches every chart from a repository served by that Python's
own ``python -m http.server`` on 127.0.0.1 (HTTP/1.0: the server closes the connection after
each answer), and over HTTPS from that Python's ``http.server`` behind TLS.
"""

from __future__ import annotations

import email
import glob
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from _support import tree
from _wheelhouse import closure, interpreter_environment, portable, repack, requirements_of
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from test_chart_pull import self_signed, small_repository, tls_files
from test_distribution import ROOT, build_distribution, user_env

from gpucluster.inputs.config import EMBEDDED_DEFAULT

SUPPORTED = tuple(
    f"3.{minor}"
    for minor in range(30)
    if SpecifierSet(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    ).contains(f"3.{minor}.0")
)
"""The supported minor versions, from pyproject.toml ``requires-python``."""
THIS_PYTHON = "{}.{}".format(*sys.version_info[:2])
OTHER_PYTHONS = tuple(v for v in SUPPORTED if v != THIS_PYTHON)
"""Checked against this environment's Python (3.11 under ``make test``)."""

ADD_ONE = 'pyenv install {v} (README.md "Requirements"), or put python{v} on PATH'


def find_python(version: str) -> str | None:
    """An interpreter of CPython ``version`` (``3.12``): pyenv's ``~/.pyenv/versions/<version>.*``
    first, then ``python<version>`` on PATH; only one that runs and reports that version."""
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    candidates = sorted(glob.glob(str(pyenv / f"{version}.*" / "bin" / f"python{version}")))
    candidates += [p for p in [shutil.which(f"python{version}")] if p]
    for candidate in candidates:
        proc = subprocess.run(
            [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode == 0 and proc.stdout.strip() == version:
            return candidate
    return None


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, **kwargs)
    assert proc.returncode == 0, f"{argv}: {proc.stdout[-4000:]}{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """The gpucluster wheel, built once (this environment's setuptools)."""
    out = tmp_path_factory.mktemp("dist")
    wheel, _ = build_distribution(out)
    return wheel


def init_plan_synth(where: Path, env: dict[str, str]) -> Path:
    """``gpucluster init proj``, then ``plan`` and ``synth`` in it; returns its ``cdktf.out``."""
    where.mkdir(parents=True)
    run(["gpucluster", "init", "proj"], cwd=where, env=env)
    project = where / "proj"
    plan = run(["gpucluster", "plan"], cwd=project, env=env)
    assert plan.stdout.startswith("cluster aks-training: recipe h100-aks-ubuntu-training")
    synth = run(["gpucluster", "synth"], cwd=project, env=env)
    assert synth.stdout == (
        "synthesized 2 stacks into cdktf.out: aks-training-cluster, aks-training-runtime\n"
    )
    return project / "cdktf.out"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, bytes]:
    """The stacks this environment's Python (3.11 under ``make test``) writes for ``gpucluster init``'s project."""
    assert THIS_PYTHON in SUPPORTED
    home = tmp_path_factory.mktemp("home-3.11")
    return tree(init_plan_synth(home / "work", user_env(home, Path(sys.prefix))))


@pytest.fixture(scope="module", params=OTHER_PYTHONS, ids=[f"python{v}" for v in OTHER_PYTHONS])
def installed(request, wheels, tmp_path_factory) -> tuple[str, Path, Path]:
    """(version, HOME, venv): a fresh virtual environment of that Python with the wheel
    ``[cdk,render]`` and pytest installed, by the interpreter's own pip."""
    version = request.param
    python = find_python(version)
    if python is None:
        pytest.skip(f"CPython {version} not found: {ADD_ONE.format(v=version)}")
    home = tmp_path_factory.mktemp(f"home-{version}")
    venv = home / "venv"
    run([python, "-m", "venv", str(venv)])
    vpython = str(venv / "bin" / "python")
    markers = interpreter_environment(vpython)
    with zipfile.ZipFile(wheels) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(archive.read(name))
    roots = requirements_of(meta, {"cdk", "render"}, markers) + [Requirement("pytest")]
    dists = closure(roots, markers)
    house = home / "wheels"
    house.mkdir()
    pins = []
    for dist in dists:
        if portable(dist):
            repack(dist, house)
        else:
            pins.append(f"{dist.metadata['Name']}=={dist.version}")
    pip = [vpython, "-m", "pip", "--disable-pip-version-check"]
    pip_env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    if pins:
        run(
            [
                *pip,
                "download",
                "-q",
                "--only-binary",
                ":all:",
                "--no-deps",
                "-d",
                str(house),
                *pins,
            ],
            env=pip_env,
        )
    run(
        [
            *pip,
            "install",
            "-q",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(house),
            f"{wheels}[cdk,render]",
            "pytest",
        ],
        env=pip_env,
    )
    return version, home, venv


def test_the_stacks_are_the_bytes_python_3_11_writes(installed, reference):
    version, home, venv = installed
    env = user_env(home, venv)
    where = run(
        ["python", "-c", "import sys, gpucluster; print(sys.version); print(gpucluster.__file__)"],
        cwd=home,
        env=env,
    )
    assert where.stdout.startswith(version + ".") and Path(where.stdout.split()[-1]).is_relative_to(
        venv
    )
    out = tree(init_plan_synth(home / "work", env))
    assert sorted(out) == sorted(reference)
    assert [p for p in out if out[p] != reference[p]] == []


def test_charts_pull_from_python_m_http_server(installed):
    """``python -m http.server`` (the interpreter's own, on 127.0.0.1) serving a chart repository
    for every pin of the default stack; ``charts pull`` through it as the cluster file's
    ``charts.mirror`` pulls them all, exit 0, nothing on stderr."""
    version, home, venv = installed
    work = home / "pull"
    pins = small_repository(work / "site")
    env = user_env(home, venv)
    server = subprocess.Popen(
        ["python", "-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", "site"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        banner = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N (http://...) ..."
        assert banner.startswith("Serving HTTP on 127.0.0.1 port "), banner
        mirror = f"http://127.0.0.1:{int(banner.split(' port ')[1].split()[0])}"
        (work / "gpucluster.yaml").write_text(
            f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text()
        )
        pull = subprocess.run(
            ["gpucluster", "charts", "pull", "--cache", str(work / "cache")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        server.terminate()
        server.wait(timeout=60)
    assert (pull.returncode, pull.stderr) == (0, ""), pull.stdout + pull.stderr
    for chart, chart_version in pins:
        assert f"pulled  {chart} {chart_version} from {mirror}\n" in pull.stdout, pull.stdout


def test_charts_pull_over_https_from_a_closing_server(installed):
    """The same repository served over TLS by that Python's ``http.server`` (HTTP/1.0, closing
    after each answer), the self-signed certificate trusted through ``SSL_CERT_FILE``."""
    version, home, venv = installed
    work = home / "pull-https"
    pins = small_repository(work / "site")
    cert, key = self_signed(work)
    env = {
        k: v
        for k, v in user_env(home, venv).items()
        if k.lower() not in ("https_proxy", "all_proxy")
    }
    env["SSL_CERT_FILE"] = str(cert)
    with tls_files(str(venv / "bin" / "python"), work / "site", cert, key, env) as mirror:
        (work / "gpucluster.yaml").write_text(
            f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text()
        )
        pull = subprocess.run(
            ["gpucluster", "charts", "pull", "--cache", str(work / "cache")],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert (pull.returncode, pull.stderr) == (0, ""), pull.stdout + pull.stderr
    for chart, chart_version in pins:
        assert f"pulled  {chart} {chart_version} from {mirror}\n" in pull.stdout, pull.stdout


def test_the_plugin_test_kit_tests_pass(installed):
    """The example plugin's tests and tests/test_testing_kit.py (which runs docs/testing.md's
    examples), copied outside the checkout, run by that Python's pytest."""
    version, home, venv = installed
    kit = home / "kit"
    shutil.copytree(
        ROOT / "examples" / "example_plugin",
        kit / "example_plugin",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
    )
    (kit / "tests").mkdir()
    shutil.copy2(ROOT / "tests" / "test_testing_kit.py", kit / "tests")
    (kit / "docs").mkdir()
    shutil.copy2(ROOT / "docs" / "testing.md", kit / "docs")
    proc = run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "example_plugin", "tests"],
        cwd=kit,
        env=user_env(home, venv),
    )
    passed = [line for line in proc.stdout.splitlines() if " passed" in line]
    assert passed and " failed" not in proc.stdout and " error" not in proc.stdout, proc.stdout
    collected = run(
        [
            "python",
            "-m",
            "pytest",
            "-q",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            "example_plugin",
            "tests",
        ],
        cwd=kit,
        env=user_env(home, venv),
    )
    count = int(passed[-1].split(" passed")[0].split()[-1])
    assert count == len([line for line in collected.stdout.splitlines() if "::" in line]) >= 10


def test_the_supported_pythons_are_3_11_to_3_13():
    assert SUPPORTED == ("3.11", "3.12", "3.13") and THIS_PYTHON in SUPPORTED


def test_only_an_interpreter_of_that_version_is_found(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    other = "3.12" if THIS_PYTHON != "3.12" else "3.13"
    (bin_dir / f"python{other}").symlink_to(sys.executable)  # named so, but not that version
    (bin_dir / f"python{THIS_PYTHON}").symlink_to(sys.executable)
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("PATH", str(bin_dir))
    assert find_python(other) is None and find_python("3.99") is None
    assert find_python(THIS_PYTHON) == str(bin_dir / f"python{THIS_PYTHON}")
