"""The real kube-scheduler accepts every scheduler profile gpucluster accepts (a differential).

Each case goes through gpucluster as a cluster file would (``parse_clusters`` with
``schedulerProfiles``, then the ``SchedulerConfiguration``'s ``spec.rawConfig`` as the runtime
plan renders it), is overlaid on a default configuration the way AKS describes its overlay (the
base ``KubeSchedulerConfiguration`` with its ``default-scheduler`` profile; the user's profiles
replace a base profile of the same name and are appended otherwise; docs/scheduler-profiles.md),
and is given to the real ``kube-scheduler`` binary (v1.34) with ``--write-config-to``: the
scheduler decodes the file strictly, defaults and validates it and builds every profile's plugins
(their args checked), then writes the completed configuration and exits 0 -- or exits non-zero
naming what it refuses. It starts no server (``--secure-port=0``), and its kubeconfig points at a
127.0.0.1 port this test holds bound but never listens on; it dials nothing else.

* every built-in preset, alone and together (the real plan's chart text);
* a Hypothesis sample of written-out profiles (several per configuration, presets among them):
  gpucluster accepts them, so the scheduler must;
* a Hypothesis sample of broken profiles (tests/scheduler_profile_cases.py): gpucluster refuses
  each; where the mutation breaks one of kube-scheduler's own rules the scheduler must refuse it
  too, where it breaks only gpucluster's stricter rules the scheduler's answer is counted.

The binary is found in the folder ``GPUCLUSTER_RIG_BIN`` names (``kube-scheduler``); without it
the tests skip with the reason.
"""

from __future__ import annotations

import collections
import copy
import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from scheduler_profile_cases import MUTATIONS, broken_profiles, valid_profiles

from gpucluster import pipeline
from gpucluster.charts.manifests import dump_documents
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import scheduler_profiles as sp
from gpucluster.inputs.config import parse_clusters

ENV_BIN = "GPUCLUSTER_RIG_BIN"
CRITERIA = {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}
TIMEOUT = 60
"""Seconds one scheduler run may take (it takes about 0.1 s; a hang fails the case)."""
SAMPLE = int(os.environ.get("GPUCLUSTER_SCHEDULER_SAMPLE", "40"))
"""Hypothesis examples of accepted configurations; a quarter of it (at least 3) per mutation."""


def _binary() -> Path:
    folder = os.environ.get(ENV_BIN)
    if not folder:
        pytest.skip(f"{ENV_BIN} is not set (the folder holding the kube-scheduler binary)")
    path = Path(folder) / "kube-scheduler"
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.skip(f"no executable kube-scheduler in {ENV_BIN}={folder}")
    return path


class Scheduler:
    """Runs ``kube-scheduler --write-config-to`` on configurations (see the module docstring)."""

    def __init__(self, binary: Path, folder: Path) -> None:
        self.binary = binary
        self.folder = folder
        self.port = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.port.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused
        host, port = self.port.getsockname()
        self.kubeconfig = folder / "kubeconfig"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "none", "cluster": {"server": f"https://{host}:{port}"}}],
                    "users": [{"name": "none", "user": {"token": "unused"}}],
                    "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
                    "current-context": "none",
                }
            )
        )
        self.runs = 0

    def settings(self) -> str:
        """The base configuration's other top-level keys (this test's client and no leader election)."""
        return (
            f"clientConnection:\n  kubeconfig: '{self.kubeconfig}'\n"
            "leaderElection:\n  leaderElect: false\n"
        )

    def base(self) -> str:
        """The default configuration AKS overlays onto: one ``default-scheduler`` profile."""
        return (
            f"apiVersion: {sp.CONFIG_API_VERSION}\nkind: {sp.CONFIG_KIND}\nprofiles:\n"
            f"- schedulerName: {sp.DEFAULT_SCHEDULER}\n{self.settings()}"
        )

    def overlay(self, raw_config: str) -> tuple[str, list[str]]:
        """``(configuration text, scheduler names in it)``: ``raw_config`` overlaid on :meth:`base`
        -- its profiles, then the base's ``default-scheduler`` unless one of them replaces it.

        The text of ``raw_config`` is kept byte for byte (the scheduler reads exactly what the
        plan renders; re-serializing it here could hide a quoting fault): the base's profile and
        keys are appended after it, which the YAML allows because ``profiles`` is its last key and
        its list items start at column 0 (checked)."""
        user = yaml.safe_load(raw_config)
        assert list(user) == ["apiVersion", "kind", "profiles"], list(user)
        assert user["apiVersion"] == sp.CONFIG_API_VERSION and user["kind"] == sp.CONFIG_KIND
        lines = raw_config.splitlines()
        start = lines.index("profiles:")
        assert all(line.startswith(("- ", "  ")) for line in lines[start + 1 :])
        names = [p["schedulerName"] for p in user["profiles"]]
        text = raw_config if raw_config.endswith("\n") else raw_config + "\n"
        if sp.DEFAULT_SCHEDULER not in names:
            text += f"- schedulerName: {sp.DEFAULT_SCHEDULER}\n"
            names = [*names, sp.DEFAULT_SCHEDULER]
        return text + self.settings(), names

    def accepts(self, config: tuple[str, list[str]]) -> tuple[bool, str]:
        """``(accepted, last lines of its output)`` for ``(text, scheduler names)``: exit 0 with the
        completed configuration written, its profiles the names given."""
        text, names = config
        self.runs += 1
        path = self.folder / f"config-{self.runs}.yaml"
        out = self.folder / f"written-{self.runs}.yaml"
        path.write_text(text)
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.folder)}
        proc = subprocess.run(
            [
                str(self.binary),
                f"--config={path}",
                "--secure-port=0",
                f"--write-config-to={out}",
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-3:])
        accepted = proc.returncode == 0 and out.is_file() and out.stat().st_size > 0
        if not accepted:  # what a refusal (or a run that died: a signal, no output) looked like
            written = f"{out.stat().st_size} bytes" if out.is_file() else "not written"
            tail = f"exit {proc.returncode}, --write-config-to {written}; {tail}"
        if accepted:
            written = yaml.safe_load(out.read_text())
            assert sorted(str(p["schedulerName"]) for p in written["profiles"]) == sorted(names), (
                tail
            )
        return accepted, tail

    def close(self) -> None:
        self.port.close()


@pytest.fixture(scope="module")
def scheduler():
    binary = _binary()
    with tempfile.TemporaryDirectory(prefix="gpucluster-scheduler-") as folder:
        run = Scheduler(binary, Path(folder))
        ok, tail = run.accepts((run.base(), [sp.DEFAULT_SCHEDULER]))  # the base alone works
        assert ok, f"kube-scheduler refuses the base configuration: {tail}"
        yield run
        run.close()


def _spec(profiles: list[dict[str, Any]]):
    doc = {"name": "c", "criteria": dict(CRITERIA), "schedulerProfiles": profiles}
    (spec,) = parse_clusters({"clusters": [doc]}, source="gpucluster.yaml", root=Path("."))
    return spec


def _unchecked(profile: dict[str, Any]) -> dict[str, Any]:
    """``profile`` rendered as gpucluster renders an accepted one, without its checks: a preset
    expanded, the args given their ``apiVersion`` / ``kind``."""
    if "preset" in profile:
        return {
            "schedulerName": profile["schedulerName"],
            **copy.deepcopy(sp.PRESETS[profile["preset"]]),
        }
    out = copy.deepcopy(profile)
    for item in out.get("pluginConfig", []):
        if isinstance(item.get("args"), dict):
            item["args"] = {
                "apiVersion": sp.CONFIG_API_VERSION,
                "kind": f"{item['name']}Args",
                **item["args"],
            }
    return out


def _raw_config(spec) -> str:
    return sp.scheduler_configuration_object(spec.scheduler_profiles)["spec"]["rawConfig"]


def test_presets_from_the_plan(scheduler):
    presets = [
        {"schedulerName": f"{name}-scheduler", "preset": name} for name in sorted(sp.PRESETS)
    ]
    cases = [[p] for p in presets] + [presets]
    # names a YAML 1.1 reader takes for booleans or numbers unless quoted
    cases.append(
        [
            {"schedulerName": n, "preset": "gpu-binpacking"}
            for n in ("n", "y", "on", "no", "1", "0x1f", "1e3")
        ]
    )
    for profiles in cases:
        plan = pipeline.build_plan(_spec(profiles))
        chart = plan.node(sp.NODE_ID).local_chart
        (text,) = [t for path, t in chart.files.items() if path.startswith("templates/")]
        raw = yaml.safe_load(text)["spec"]["rawConfig"]
        ok, tail = scheduler.accepts(scheduler.overlay(raw))
        assert ok, f"kube-scheduler refuses {profiles}: {tail}"


def test_scheduler_accepts_every_profile_gpucluster_accepts(scheduler):
    stats: collections.Counter[str] = collections.Counter()
    disagreements: list[str] = []

    @settings(
        max_examples=SAMPLE,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(valid_profiles())
    def case(profiles):
        spec = _spec(profiles)  # gpucluster accepts it (raises otherwise)
        ok, tail = scheduler.accepts(scheduler.overlay(_raw_config(spec)))
        stats["configurations"] += 1
        stats["profiles"] += len(profiles)
        if not ok:
            disagreements.append(f"{profiles}: {tail}")
        assert ok, f"gpucluster accepts, kube-scheduler refuses {profiles}: {tail}"

    case()
    print(
        f"\naccepted by gpucluster: {dict(stats)}; refused by kube-scheduler: {len(disagreements)}"
    )
    assert disagreements == []


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_scheduler_refuses_what_breaks_its_rules(scheduler, mutation):
    stats: collections.Counter[str] = collections.Counter()
    disagreements: list[str] = []

    @settings(
        max_examples=max(3, SAMPLE // 4),
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(broken_profiles(mutation))
    def case(broken):
        profiles, what, scheduler_refuses = broken
        with pytest.raises(GpuclusterError):  # gpucluster refuses every broken profile
            _spec(profiles)
        # what the scheduler is given: the profiles rendered as gpucluster would if it accepted them
        raw = dump_documents(
            [
                {
                    "apiVersion": sp.CONFIG_API_VERSION,
                    "kind": sp.CONFIG_KIND,
                    "profiles": [_unchecked(p) for p in profiles],
                }
            ]
        ).removeprefix("---\n")
        ok, tail = scheduler.accepts(scheduler.overlay(raw))
        stats[f"{'accepted' if ok else 'refused'} by kube-scheduler"] += 1
        if scheduler_refuses and ok:
            disagreements.append(f"{what} {profiles}")
        assert not (scheduler_refuses and ok), (
            f"gpucluster refuses {what} as a scheduler rule, kube-scheduler accepts {profiles}"
        )

    case()
    print(
        f"\nrefused by gpucluster, {mutation}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
    )
    assert disagreements == []
