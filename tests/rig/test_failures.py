"""Failures that must stop the apply, each surfaced as ONE ``error[rig.release]`` line in the
server's or the gate's own words, within its budget; then the same apply with the fault removed
completes; and a teardown a finalizer holds fails with its guard's ``STUCK`` line, then succeeds.

All on ONE kept rig (:class:`gpucluster_rig.rehearse.Rehearsal`): the built-in AKS training
cluster's runtime stack, synthesized once ("base"), applied clean, then for each fault a copy of
the base with the fault applied, and the base again:

1. the ClusterPolicy stand-in reports ``notReady`` and the gate's wait is cut to
   :data:`GATE_WAIT` s -> the gate fails at its deadline naming ``cluster-policy`` and the state it saw;
2. the gate's Role lacks ``get`` -> the gate fails with the server's ``forbidden`` line at once;
3. the NicClusterPolicy's ``nicFirmwareStorage.availableStorageSize`` changed -> the API server's
   CEL rule (``x-kubernetes-validations``, ``self == oldSelf``) refuses it, its message in the line;
4. kai-scheduler at a version the chart mirror does not serve -> Helm's ``not found``; the mirror
   hanging (accepts, never answers) -> the release fails at its timeout (:data:`HANG_TIMEOUT` s);
5. destroy while the stand-in holds a finalizer on the NicClusterPolicy -> the network-operator
   teardown guard (its wait cut to :data:`GUARD_WAIT` s) fails with its ``STUCK`` line, nothing
   of network-operator is uninstalled; the finalizer removed, destroy removes everything, each
   guard before its operator and every custom resource before its CRD.

The chart copies are made the way synth makes charts: a new content folder, its path in
``cdk.tf.json`` (so the engine's state sees a changed release).
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster_rig import rehearse
from gpucluster_rig.engine import STOP_SECONDS
from gpucluster_rig.rehearse import Rehearsal

GATE = "gpu-operator-clusterpolicy-ready"
GUARD = "network-operator-teardown"
NIC_RELEASE = "network-operator-manifests"
UNSERVED = "kai-scheduler"
GATE_WAIT = 10
"""Seconds the ClusterPolicy gate waits in the test copy (the AKS plugin's is 1800)."""
GUARD_WAIT = 15
"""Seconds the network-operator teardown guard waits in the test copy (the core's is 600)."""
HANG_TIMEOUT = 20
"""The kai-scheduler release's timeout while the mirror hangs."""
FINALIZER = "gpucluster.rig/stand-in-cleanup"

NIC_CONFIGURATION = """\
  nicConfigurationOperator:
    operator:
      repository: nvcr.io/nvidia/mellanox
      image: nic-configuration-operator
      version: network-operator-v26.4.1
    configurationDaemon:
      repository: nvcr.io/nvidia/mellanox
      image: nic-configuration-operator-daemon
      version: network-operator-v26.4.1
    nicFirmwareStorage:
      availableStorageSize: {size}
"""
"""The NIC configuration operator section of a NicClusterPolicy (network-operator's CRD,
``spec.nicConfigurationOperator``): ``availableStorageSize`` carries the CEL rule ``self == oldSelf``."""


# ----------------------------------------------------------------------------- stack copies


def _doc(stack: Path) -> dict[str, Any]:
    return dict(json.loads((stack / "cdk.tf.json").read_text(encoding="utf-8")))


def _write(stack: Path, doc: dict[str, Any]) -> None:
    (stack / "cdk.tf.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")


def copy_stack(base: Path, name: str) -> Path:
    """A copy of the stack folder ``base`` beside it (chart paths are relative: they still hold)."""
    dest = base.parent / name
    shutil.copytree(base, dest)
    return dest


def set_release(stack: Path, rid: str, **fields: Any) -> None:
    doc = _doc(stack)
    doc["resource"]["helm_release"][rid].update(fields)
    _write(stack, doc)


def edit_chart(stack: Path, rid: str, edit: Callable[[Path], None]) -> None:
    """Copy ``helm_release.<rid>``'s local chart to a new folder, ``edit`` it there, and point the
    release at it (a changed chart gets a new path, as synth's content-addressed assets do)."""
    doc = _doc(stack)
    cfg = doc["resource"]["helm_release"][rid]
    old = (stack / cfg["chart"]).resolve()
    new = old.parent / (old.name + "-edited")
    n = 1
    while new.exists():
        n += 1
        new = old.parent / f"{old.name}-edited{n}"
    shutil.copytree(old, new)
    edit(new)
    cfg["chart"] = str(Path(cfg["chart"]).parent / new.name)
    _write(stack, doc)


def cut_wait(stack: Path, rid: str, old: int, new: int) -> None:
    """The Job of ``rid``'s chart waits ``new`` s instead of ``old``; its ``activeDeadlineSeconds``
    and the release's timeout shrink by the same amount (their margins kept)."""

    def edit(chart: Path) -> None:
        job = chart / "templates" / "002-job.yaml"
        text = job.read_text(encoding="utf-8")
        text, count = re.subn(rf"(?<![0-9]){old}(?![0-9])", str(new), text)
        assert count >= 2, f"{rid}: the wait of {old} s is not in its script any more"
        m = re.search(r"activeDeadlineSeconds: (\d+)", text)
        assert m is not None
        text = text.replace(m.group(0), f"activeDeadlineSeconds: {int(m.group(1)) - old + new}")
        job.write_text(text, encoding="utf-8")

    edit_chart(stack, rid, edit)
    timeout = int(_doc(stack)["resource"]["helm_release"][rid]["timeout"])
    set_release(stack, rid, timeout=timeout - old + new)


def nic_storage(stack: Path, size: str) -> None:
    """The NicClusterPolicy of ``network-operator-manifests`` with a NIC firmware storage of ``size``."""

    def edit(chart: Path) -> None:
        (policy,) = [
            p
            for p in (chart / "templates").glob("*.yaml")
            if "kind: NicClusterPolicy" in p.read_text()
        ]
        text = policy.read_text(encoding="utf-8")
        if "availableStorageSize:" in text:  # a copy of the base: change the size it has
            text, count = re.subn(
                r"availableStorageSize: \S+", f"availableStorageSize: {size}", text
            )
            assert count == 1
        else:
            assert "\nspec:\n" in text
            text = text.replace("\nspec:\n", "\nspec:\n" + NIC_CONFIGURATION.format(size=size), 1)
        policy.write_text(text, encoding="utf-8")

    edit_chart(stack, NIC_RELEASE, edit)


def drop_get_verb(stack: Path) -> None:
    def edit(chart: Path) -> None:
        rbac = chart / "templates" / "001-rbac.yaml"
        text = rbac.read_text(encoding="utf-8")
        assert "  verbs:\n  - get\n" in text
        rbac.write_text(text.replace("  verbs:\n  - get\n", "  verbs:\n  - list\n"))

    edit_chart(stack, GATE, edit)


def bump_version(stack: Path, rid: str) -> str:
    version = str(_doc(stack)["resource"]["helm_release"][rid]["version"])
    bumped = version + "-unserved" if "-" not in version else version + ".1"
    set_release(stack, rid, version=bumped)
    return bumped


# ----------------------------------------------------------------------------- the scenario


def _step(report: dict[str, Any], rid: str, phase: str = "apply") -> dict[str, Any]:
    return next(r for r in report[phase]["releases"] if r["release"] == rid)


def _manifests(r: Rehearsal, stack: Path) -> dict[str, list[dict[str, Any]]]:
    """Release id -> the objects Helm applied for it (``helm get manifest``)."""
    from gpucluster_rig.engine import Stack

    out = {}
    for rid, cfg in Stack.load(stack).releases.items():
        proc = r.engine.helm_run(
            "get", "manifest", cfg["name"], "--namespace", cfg["namespace"], timeout=120
        )
        out[rid] = [
            d
            for d in yaml.load_all(proc.stdout or "", Loader=rehearse._ManifestLoader)
            if isinstance(d, dict)
        ]
    return out


def _wait_for(what: str, probe: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not probe():
        assert time.monotonic() < deadline, f"not seen within {seconds} s: {what}"
        time.sleep(1)


@pytest.fixture(scope="module")
def scenario(
    rig_bin: Path, shared: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Every apply and destroy of the module docstring, in order, on one rig: name -> report
    (with ``wall_seconds``, the call's duration)."""
    work = tmp_path_factory.mktemp("failures")
    out: dict[str, Any] = {}

    def run(name: str, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        t = time.monotonic()
        report = call()
        report["wall_seconds"] = round(time.monotonic() - t, 1)
        out[name] = report
        print(f"--- {name} ({report['wall_seconds']} s)")
        for line in rehearse.error_lines(report):
            print("   ", line)
        return report

    with Rehearsal.open(
        binaries=rig_bin,
        folder=work,
        charts=shared / "charts",
        crds=shared / "crds",
        delay=1.0,
        name="rig-failures",
    ) as r:
        synthesized = r.synth(None)
        base = copy_stack(synthesized, "base")
        r.specs[base] = r.specs[synthesized]
        nic_storage(base, "1Gi")
        cut_wait(base, GUARD, 600, GUARD_WAIT)
        spec = r.specs[base]

        def apply(stack: Path) -> Callable[[], dict[str, Any]]:
            return lambda: r.apply(stack, spec)

        run("clean", apply(base))

        # 1: the operator never reports ready; the gate's wait cut short
        r.standins.states["ClusterPolicy"] = "notReady"
        _wait_for(
            "cluster-policy notReady",
            lambda: r.cluster.kubectl(
                "get", "clusterpolicies.nvidia.com", "cluster-policy",
                "-o", "jsonpath={.status.state}", check=False,
            ) == "notReady",
        )  # fmt: skip
        stuck = copy_stack(base, "clusterpolicy-not-ready")
        cut_wait(stuck, GATE, 1800, GATE_WAIT)
        out["gate_budget"] = GATE_WAIT
        out["gate_release_timeout"] = _doc(stuck)["resource"]["helm_release"][GATE]["timeout"]
        run("not-ready", apply(stuck))
        r.standins.states.pop("ClusterPolicy")
        run("not-ready-removed", apply(base))

        # 2: the gate's Role lacks get
        forbidden = copy_stack(base, "role-without-get")
        drop_get_verb(forbidden)
        run("forbidden", apply(forbidden))
        run("forbidden-removed", apply(base))

        # 3: a CEL rule refuses the changed NicClusterPolicy
        cel = copy_stack(base, "immutable-storage")
        nic_storage(cel, "2Gi")
        run("cel", apply(cel))
        run("cel-removed", apply(base))

        # 4a: a chart version the mirror does not serve
        unserved = copy_stack(base, "unserved-chart")
        out["unserved_version"] = bump_version(unserved, UNSERVED)
        r.repo.withhold(UNSERVED)
        run("unserved", apply(unserved))
        r.repo.withhold(UNSERVED, False)
        run("unserved-removed", apply(base))

        # 4b: the mirror hangs
        hanging = copy_stack(base, "hanging-mirror")
        bump_version(hanging, UNSERVED)
        set_release(hanging, UNSERVED, timeout=HANG_TIMEOUT)
        r.repo.hang = True
        try:
            run("hang", apply(hanging))
        finally:
            r.repo.hang = False
        out["held_requests"] = r.repo.held
        run("hang-removed", apply(base))

        # 5: teardown held by a finalizer, then released
        out["manifests"] = _manifests(r, base)
        r.standins.finalizers["NicClusterPolicy"] = FINALIZER

        def held() -> bool:
            got = r.cluster.kubectl(
                "get", "nicclusterpolicies.mellanox.com", "nic-cluster-policy",
                "-o", "jsonpath={.metadata.finalizers}", check=False,
            )  # fmt: skip
            return FINALIZER in got

        _wait_for("the stand-in's finalizer on nic-cluster-policy", held)
        run("destroy-held", lambda: r.destroy(base))
        r.standins.finalizers.clear()
        r.cluster.kubectl(
            "patch", "nicclusterpolicies.mellanox.com", "nic-cluster-policy", "--type=merge",
            "-p", '{"metadata":{"finalizers":null}}',
        )  # fmt: skip
        run("destroy-released", lambda: r.destroy(base))
        out["stack"] = base
    (work / "scenario.json").write_text(
        json.dumps({k: v for k, v in out.items() if k not in ("stack",)}, indent=1, default=str)
    )
    yield out


def _one_error(report: dict[str, Any], rid: str, *words: str) -> str:
    lines = rehearse.error_lines(report)
    assert len(lines) == 1, lines
    assert lines[0].startswith("error[rig.release]") and f"release={rid}" in lines[0], lines
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


def _recovered(report: dict[str, Any], rid: str) -> None:
    step = _step(report, rid)
    assert step["ok"] is True and step["action"] == "update", step
    assert report["ok"] is True, rehearse.error_lines(report)


def test_the_base_stack_applies(scenario: dict[str, Any]) -> None:
    assert scenario["clean"]["ok"] is True, rehearse.error_lines(scenario["clean"])


def test_a_clusterpolicy_never_ready_fails_its_gate_at_the_deadline_naming_it_and_its_state(
    scenario: dict[str, Any],
) -> None:
    report = scenario["not-ready"]
    line = _one_error(
        report,
        GATE,
        "FAILED: ClusterPolicy cluster-policy",
        f"not reached within {GATE_WAIT}s",
        "last seen: cluster-policy=notReady",
    )
    assert "forbidden" not in line
    job = next(j for j in report["jobs"] if j["job"] == GATE)
    assert GATE_WAIT <= job["seconds"], job  # it waited its whole budget
    assert _step(report, GATE)["seconds"] <= scenario["gate_release_timeout"]
    assert _step(report, "kai-scheduler")["message"].startswith("not started:")


def test_a_gate_without_its_verb_fails_with_the_servers_forbidden_line(
    scenario: dict[str, Any],
) -> None:
    report = scenario["forbidden"]
    _one_error(report, GATE, "forbidden", "refused the gate's ServiceAccount")
    job = next(j for j in report["jobs"] if j["job"] == GATE)
    assert job["exitCode"] == 1 and job["seconds"] < 60, job  # at once, not at the 1800 s deadline
    assert _step(report, "kai-scheduler")["message"].startswith("not started:")


def test_a_custom_resource_a_cel_rule_refuses_fails_with_the_servers_message(
    scenario: dict[str, Any],
) -> None:
    _one_error(
        scenario["cel"],
        NIC_RELEASE,
        "NicClusterPolicy",
        "availableStorageSize is immutable once set",
    )
    assert _step(scenario["cel"], "network-operator-nicclusterpolicy-ready")["ok"] is None


def test_a_chart_the_mirror_does_not_serve_fails_with_helms_not_found(
    scenario: dict[str, Any],
) -> None:
    _one_error(
        scenario["unserved"], UNSERVED, f'version "{scenario["unserved_version"]}" not found'
    )


def test_a_hanging_mirror_fails_the_release_at_its_timeout(scenario: dict[str, Any]) -> None:
    report = scenario["hang"]
    _one_error(report, UNSERVED, f"within the release's timeout ({HANG_TIMEOUT} s)", "127.0.0.1")
    assert scenario["held_requests"] >= 1
    assert _step(report, UNSERVED)["seconds"] <= HANG_TIMEOUT + STOP_SECONDS + 5


@pytest.mark.parametrize(
    ("fault", "rid"),
    [
        ("not-ready", GATE),
        ("forbidden", GATE),
        ("cel", NIC_RELEASE),
        ("unserved", UNSERVED),
        ("hang", UNSERVED),
    ],
)
def test_the_next_apply_completes_once_the_fault_is_removed(
    scenario: dict[str, Any], fault: str, rid: str
) -> None:
    assert _step(scenario[fault], rid)["ok"] is False
    _recovered(scenario[f"{fault}-removed"], rid)


def test_a_finalizer_left_on_the_nicclusterpolicy_fails_destroy_with_the_guards_stuck_line(
    scenario: dict[str, Any],
) -> None:
    report = scenario["destroy-held"]
    assert report["ok"] is False
    _one_error(
        report,
        GUARD,
        "STUCK NicClusterPolicy nic-cluster-policy",
        FINALIZER,
    )
    guard = _step(report, GUARD, "destroy")
    budget = int(_doc(scenario["stack"])["resource"]["helm_release"][GUARD]["timeout"])
    assert guard["seconds"] <= budget, guard
    job = next(j for j in report["jobs"] if j["job"] == GUARD)
    assert job["exitCode"] == 1 and job["seconds"] >= GUARD_WAIT, job
    for rid in ("network-operator", NIC_RELEASE):  # the operator stays while its CRs are stuck
        assert _step(report, rid, "destroy")["ok"] is None
    assert {"network-operator"} <= set(report["left_after_destroy"]["releases"])


def test_destroy_succeeds_once_the_finalizer_is_removed(scenario: dict[str, Any]) -> None:
    report = scenario["destroy-released"]
    assert report["ok"] is True, rehearse.error_lines(report)
    assert report["left_after_destroy"]["releases"] == []
    guard = next(j for j in report["jobs"] if j["job"] == GUARD)
    assert guard["exitCode"] == 0


def _timeline(scenario: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Release id -> (start, end) of its uninstall, over both destroys (the second after the first).

    ``end`` is the engine's own (each instant rounded to 0.1 s on its own, so one step ending
    before another starts never reads the other way round); ``start`` + ``seconds`` could read
    0.1 s late (two roundings: kube-prometheus-stack "ending" at 5.1 after
    prometheus-operator-crds started at 5.0)."""
    out = {}
    offset = 0.0
    for name in ("destroy-held", "destroy-released"):
        steps = scenario[name]["destroy"]["releases"]
        for s in steps:
            if s["ok"]:
                out[s["release"]] = (offset + s["start"], offset + s["end"])
        ends = [
            s["start"] if s["end"] is None else s["end"] for s in steps if s["start"] is not None
        ]
        offset += 1 + max(ends, default=0)
    return out


def test_destroy_runs_each_teardown_guard_before_its_operator_is_uninstalled(
    scenario: dict[str, Any],
) -> None:
    from gpucluster_rig.engine import Stack

    stack = Stack.load(scenario["stack"])
    when = _timeline(scenario)
    guards = [rid for rid in stack.releases if rid.endswith("-teardown")]
    assert len(guards) >= 3, guards
    ran = {
        j["job"]
        for name in ("destroy-held", "destroy-released")
        for j in scenario[name]["jobs"]
        if j["exitCode"] == 0
    }
    for guard in guards:
        assert guard in ran, guard
        for operator in stack.deps(guard):
            assert when[guard][1] <= when[operator][0], (guard, operator, when)


def test_destroy_removes_custom_resources_before_their_crds(scenario: dict[str, Any]) -> None:
    manifests = scenario["manifests"]
    crd_owner = {}
    for rid, docs in manifests.items():
        for d in docs:
            if d.get("kind") == "CustomResourceDefinition":
                crd_owner[(d["spec"]["group"], d["spec"]["names"]["kind"])] = rid
    when = _timeline(scenario)
    pairs = set()
    for rid, docs in manifests.items():
        for d in docs:
            group = str(d.get("apiVersion", "")).rpartition("/")[0]
            owner = crd_owner.get((group, d.get("kind")))
            if owner and owner != rid:
                pairs.add((rid, owner))
    assert pairs, "no release renders custom resources of a CRD another release renders"
    for cr_release, crd_release in sorted(pairs):
        assert when[cr_release][1] <= when[crd_release][0], (cr_release, crd_release, when)
