"""Shared pytest fixtures.

``shared_dir`` / ``reference_dir``: the read-only ``../shared`` folder laid beside the checkout
(CI always has it; a user's fresh clone does not). Tests that need it skip with the reason
instead of failing obscurely. ``GPUCLUSTER_SHARED`` points elsewhere.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _shared() -> Path:
    return Path(os.environ.get("GPUCLUSTER_SHARED") or REPO.parent / "shared")


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` (or ``$GPUCLUSTER_SHARED``); skips the test when it is absent."""
    path = _shared()
    if not (path / "reference").is_dir():
        pytest.skip(
            f"needs the shared reference data at {path} (absent; CI lays it beside the checkout)"
        )
    return path


@pytest.fixture(scope="session")
def reference_charts(shared_dir: Path) -> Path:
    """``../shared/reference/charts``: the upstream charts, unpacked (SOURCES.md says which)."""
    path = shared_dir / "reference" / "charts"
    if not path.is_dir():
        pytest.skip(f"needs the unpacked upstream charts at {path}")
    return path


@pytest.fixture(autouse=True)
def _gpucluster_environment_kept():
    """Fails a test that leaves a ``GPUCLUSTER_*`` variable of this process set, changed or removed
    (then puts it back): under ``--dist loadfile`` a leak reaches whichever test file the same
    worker runs next. ``rig_main.main(["rehearse", "--binaries", FAKE, ...])`` called in-process
    once set ``GPUCLUSTER_RIG_BIN`` to a folder of ``exit 1`` stand-ins, and the real
    kube-scheduler tests later in that worker ran one of them ("exit 1, no output")."""
    before = {k: v for k, v in os.environ.items() if k.startswith("GPUCLUSTER_")}
    yield
    after = {k: v for k, v in os.environ.items() if k.startswith("GPUCLUSTER_")}
    if after != before:
        for name in after.keys() - before.keys():
            del os.environ[name]
        os.environ.update(before)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        pytest.fail(f"the test left the process environment changed: {', '.join(changed)}")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@pytest.fixture(autouse=True)
def _signal_handlers_kept():
    """Fails a test that leaves this process's SIGINT, SIGTERM or SIGHUP handler changed (then
    puts it back): an in-process ``main()`` that installs its stop handlers must restore them,
    or a later test in the same worker is stopped (or not) by a handler that is not its own."""
    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    yield
    changed = [s for s in STOP_SIGNALS if signal.getsignal(s) is not before[s]]
    for s in changed:
        if before[s] is not None:
            signal.signal(s, before[s])
    if changed:
        names = ", ".join(signal.Signals(s).name for s in changed)
        pytest.fail(f"the test left this process's {names} handler changed")


SLOW_FILES_FIRST = (
    "test_synth_signals.py",
    "test_checkov_aks.py",
    "test_distribution.py",
    "test_python_versions.py",
    "test_render_lint.py",
    "test_synth_e2e.py",
    "test_cdk_bindings.py",
    "test_plan_memo.py",
    "test_crd_ownership.py",
    "test_synth_findings.py",
)
"""Test files started first (the longest, by ``pytest --durations``): under ``make test`` pytest-xdist
hands out whole files (``--dist loadfile``) in collection order, so a long file collected last
would run alone at the end while the other worker idles. Only the order changes."""


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(
        key=lambda item: rank.get(item.path.name, len(rank))
    )  # stable: each file's tests keep their order
