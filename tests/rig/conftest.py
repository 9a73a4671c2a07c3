"""Fixtures of the rig's tests: the rig's programs, a started rig cluster.

These tests run in a private network namespace with only loopback (``make test-rig``, part of
``make test``): anywhere else they skip, so nothing they start can reach past 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpucluster_rig import build, rehearse
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.day2 import KeptRig

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "reference"


def _why_not() -> str | None:
    if not rehearse.in_private_network():
        return "the rig's tests run in a private network namespace with only loopback: `make test-rig` (part of `make test`)"
    if os.environ.get(build.BIN_ENV) is None and shutil.which("go") is None:
        return "no Go toolchain to build the rig (and GPUCLUSTER_RIG_BIN is not set)"
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: the rig runs gpucluster's Jobs in it"
    return None


@pytest.fixture(scope="session")
def rig_bin() -> Path:
    why = _why_not()
    if why:
        pytest.skip(why)
    return build.binaries()


@pytest.fixture(scope="session")
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(
            f"{SHARED} is absent (the reference charts and CRDs live beside the repository)"
        )
    return SHARED


@pytest.fixture(scope="module")
def rig(rig_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(rig_bin, tmp_path_factory.mktemp("rig"), name="rig-test")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def keep_rig(rig_bin: Path, shared: Path) -> Callable[[Path, str], KeptRig]:
    """``keep_rig(folder, cluster)``: a :class:`KeptRig` on the reference charts and CRDs, stand-ins
    answering after 1 s; ``with keep_rig(...) as kept:`` starts it and stops it."""

    def make(folder: Path, cluster: str) -> KeptRig:
        return KeptRig(
            rig_bin,
            folder,
            cluster=cluster,
            charts=shared / "charts",
            crds=shared / "crds",
            delay=1.0,
        )

    return make
