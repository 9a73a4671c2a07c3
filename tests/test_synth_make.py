"""The Makefile's choice of the Python that creates .venv (no venv is created: ``make -n``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_python_versions import ADD_ONE, find_python

ROOT = Path(__file__).resolve().parents[1]


def dry_run_venv(tmp_path: Path, bin_dir: Path) -> subprocess.CompletedProcess:
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is required (README: requirements)")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHON_BOOTSTRAP", "MAKEFLAGS", "MAKELEVEL")
    }
    env["PATH"] = str(bin_dir)
    return subprocess.run(
        [
            make,
            "-n",
            "--no-print-directory",
            f"VENV={tmp_path / 'venv'}",
            str(tmp_path / "venv" / "bin" / "python"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_python3_that_is_311_is_used_when_python311_is_not_on_path(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)  # the test runs on 3.11 (requires-python)
    result = dry_run_venv(tmp_path, bin_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"python3 -m venv {tmp_path / 'venv'}"


def test_python311_is_preferred(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.11").symlink_to(sys.executable)
    (bin_dir / "python3").symlink_to(sys.executable)
    assert (
        dry_run_venv(tmp_path, bin_dir).stdout.strip() == f"python3.11 -m venv {tmp_path / 'venv'}"
    )


def test_no_supported_python_is_a_clear_error(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    other = bin_dir / "python3"  # some other Python: not 3.11-3.13
    other.write_text("#!/bin/sh\nexit 1\n")
    other.chmod(0o755)
    result = dry_run_venv(tmp_path, bin_dir)
    assert result.returncode != 0
    assert (
        "Python 3.11, 3.12 or 3.13 not found (tried python3.11 python3.12 python3.13 python3); "
        "set PYTHON_BOOTSTRAP=/path/to/python3" in result.stderr
    )


def _real(version: str) -> str:
    python = find_python(version)
    if python is None:
        pytest.skip(f"CPython {version} not found: {ADD_ONE.format(v=version)}")
    return python


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_a_newer_supported_python_first_on_path_is_used(version, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(_real(version))
    result = dry_run_venv(tmp_path, bin_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"python3 -m venv {tmp_path / 'venv'}"


def test_311_is_preferred_over_a_newer_one_and_an_older_one_is_refused(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.12").symlink_to(_real("3.12"))
    (bin_dir / "python3.11").symlink_to(sys.executable)
    assert (
        dry_run_venv(tmp_path, bin_dir).stdout.strip() == f"python3.11 -m venv {tmp_path / 'venv'}"
    )
    (bin_dir / "python3.11").unlink()
    (bin_dir / "python3.12").unlink()
    (bin_dir / "python3").symlink_to(_real("3.10"))
    assert dry_run_venv(tmp_path, bin_dir).returncode != 0


def test_make_synth_intends_the_embedded_default(tmp_path):
    """This repository's make synth runs cdktf synth with GPUCLUSTER_EMBEDDED_DEFAULT=1: without a
    cluster file, the embedded default is what it is for, so no info[input.default] notice
    (tests/test_fuzz_cases.py: the variable drops the notice and nothing else)."""
    make = shutil.which("make")
    if make is None:
        pytest.fail("make is required (README: requirements)")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    result = subprocess.run(
        [make, "-n", "-o", "setup", "--no-print-directory", "synth"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "GPUCLUSTER_EMBEDDED_DEFAULT=1 node_modules/.bin/cdktf synth"
