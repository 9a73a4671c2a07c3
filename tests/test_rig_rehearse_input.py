"""Which cluster file `gpucluster rehearse` rehearses, and the fixes its report lines name.

These need no control plane: `rehearse.run` is stopped right after its synth (the ``mutate``
hook), so the tests see the stack it would apply. (The rehearsal itself: tests/rig/.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpucluster_rig import rehearse

CLUSTER_FILE = """\
clusters:
  - name: mine
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    region: westus3
"""


class _Stop(Exception):
    pass


def _one_chart(tmp_path: Path) -> Path:
    """A --charts folder with one unpacked chart (every other chart a stub)."""
    folder = tmp_path / "charts"
    (folder / "example").mkdir(parents=True, exist_ok=True)
    (folder / "example" / "Chart.yaml").write_text(
        "apiVersion: v2\nname: example\nversion: 1.0.0\n"
    )
    return folder


def _synthesized(tmp_path: Path, config: Path | None) -> tuple[str, list[str]]:
    """The cluster name run() rehearses and the stack folders its synth wrote."""
    seen: list[Path] = []

    def stop(stack: Path) -> None:
        seen.append(stack)
        raise _Stop

    with pytest.raises(_Stop):
        rehearse.run(
            config=config,
            cluster_name=None,
            folder=tmp_path / "work",
            binaries=tmp_path / "no-binaries",
            charts=_one_chart(tmp_path),
            crds=None,
            mutate=stop,
        )
    (stack,) = seen
    return stack.name, sorted(p.name for p in stack.parent.iterdir())


def test_without_config_the_working_folders_file_is_rehearsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/rehearse.md: `gpucluster rehearse` rehearses every cluster of ./gpucluster.yaml: the
    stack it applies is that file's, not the built-in example's."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "gpucluster.yaml").write_text(CLUSTER_FILE, encoding="utf-8")
    monkeypatch.chdir(project)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    name, stacks = _synthesized(tmp_path, None)
    assert name == "mine-runtime"
    assert stacks == ["mine-cluster", "mine-runtime"]


def test_without_config_gpucluster_config_is_rehearsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPUCLUSTER_CONFIG names the file, as for every other command (docs/cluster-file.md)."""
    (tmp_path / "elsewhere.yaml").write_text(CLUSTER_FILE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPUCLUSTER_CONFIG", os.fspath(tmp_path / "elsewhere.yaml"))
    name, stacks = _synthesized(tmp_path, None)
    assert (name, stacks) == ("mine-runtime", ["mine-cluster", "mine-runtime"])


def test_a_cluster_file_with_values_files_is_rehearsed(tmp_path: Path) -> None:
    """overrides.values[].file is relative to the cluster file (and must stay in its folder):
    the copy rehearse synthesizes in its work folder lacked it, so synth failed
    ('values file not found: values/gpu-operator.yaml', error[rig.synth])."""
    project = tmp_path / "project"
    (project / "values").mkdir(parents=True)
    (project / "values" / "gpu-operator.yaml").write_text(
        "dcgmExporter: {serviceMonitor: {interval: 61s}}\n", encoding="utf-8"
    )
    config = project / "gpucluster.yaml"
    config.write_text(
        CLUSTER_FILE
        + "    overrides:\n      values:\n"
        + "        - {component: gpu-operator, file: values/gpu-operator.yaml}\n",
        encoding="utf-8",
    )
    name, stacks = _synthesized(tmp_path, config)
    assert name == "mine-runtime"
    stack = tmp_path / "work" / "mine" / "cdktf.out" / "stacks" / "mine-runtime" / "cdk.tf.json"
    assert "61s" in stack.read_text(encoding="utf-8")


def test_placement_fix_names_keys_the_cluster_file_has() -> None:
    """The rig.placement warning's fix names the cluster file's keys (docs/overrides.md:
    scheduling.system.nodeSelector, scheduling.system.tolerations)."""
    (line,) = rehearse.placement_findings(
        [
            {
                "namespace": "kai-scheduler",
                "kind": "Deployment",
                "name": "kai-operator",
                "pools": {"gpu": 1},
                "toleratesEveryTaint": True,
            }
        ],
        {"gpu"},
    )
    assert "scheduling.system.nodeSelector" in line
    assert "scheduling.system.tolerations" in line
    assert "systemNodeSelector" not in line


def test_a_controller_on_a_gpu_node_is_a_finding_with_its_cause() -> None:
    """Each Deployment/StatefulSet with pods on a GPU pool is one rig.placement line naming it and
    why it could land there; a DaemonSet or Job there (node agents, gates) and a controller on the
    system pool are not findings."""

    def owner(kind: str, name: str, pools: dict[str, int], wildcard: bool) -> dict[str, object]:
        return {
            "namespace": "ns",
            "kind": kind,
            "name": name,
            "pools": pools,
            "toleratesEveryTaint": wildcard,
        }

    lines = rehearse.placement_findings(
        [
            owner("Deployment", "wild", {"gpu": 1, "system": 1}, True),
            owner("StatefulSet", "keyed", {"gpu2": 2}, False),
            owner("Deployment", "home", {"system": 1}, True),
            owner("DaemonSet", "agent", {"gpu": 4}, True),
            owner("Job", "gate", {"gpu": 1}, False),
        ],
        {"gpu", "gpu2"},
    )
    assert [line.split(":")[0] for line in lines] == ["warning[rig.placement]"] * 2
    assert (
        "Deployment ns/wild has pods on GPU nodes (gpu): its pods tolerate every taint" in lines[0]
    )
    assert (
        "StatefulSet ns/keyed has pods on GPU nodes (gpu2): it tolerates the GPU taint" in lines[1]
    )


def _run_error(tmp_path: Path, **kwargs: object) -> str:
    """The one line run() stops with, before it synthesizes anything."""
    synthesized: list[Path] = []
    args: dict[str, object] = {
        "config": None,
        "cluster_name": None,
        "folder": tmp_path / "work",
        "binaries": tmp_path / "no-binaries",
        "charts": _one_chart(tmp_path),
        "crds": None,
        "mutate": synthesized.append,
    }
    args.update(kwargs)
    with pytest.raises(Exception) as caught:
        rehearse.run(**args)  # type: ignore[arg-type]
    assert synthesized == []
    (line,) = str(caught.value).splitlines()
    return line


def test_an_unknown_cluster_names_the_file_and_its_clusters(tmp_path: Path) -> None:
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    line = _run_error(tmp_path, config=config, cluster_name="nope")
    assert line.startswith(f"error[rig.input] file={config} key=--cluster: ")
    assert "'nope'" in line
    assert "(allowed: mine)" in line


@pytest.mark.parametrize("option", ["charts", "crds"])
def test_a_charts_or_crds_folder_that_is_not_one_is_one_line(tmp_path: Path, option: str) -> None:
    """A mistyped --charts would otherwise serve every chart as an empty stub, and a mistyped
    --crds would leave the IPPool CRD out: both refused before anything starts."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    missing = tmp_path / "typo"
    line = _run_error(tmp_path, config=config, **{option: missing})
    assert line.startswith(f"error[rig.input] key=--{option}: ")
    assert str(missing) in line and " fix: " in line


def test_without_charts_a_stack_whose_charts_own_crds_is_refused_up_front(tmp_path: Path) -> None:
    """Without --charts every chart is an empty stub: the default AKS stack's rehearsal failed
    after ~25 s (nfd-crds: 'CRD nodefeaturegroups.nfd.k8s-sigs.io is not in the CRDs of chart
    version 0.19.0'; a Skyhook 'no matches for kind'; 17 releases not started). Refused before
    anything starts, naming the charts whose CRDs the stack needs and how to get them."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    line = _run_error(tmp_path, config=config, charts=None)
    assert line.startswith("error[rig.input] cluster=mine key=--charts: "), line
    assert "node-feature-discovery 0.19.0" in line, line
    fix = line.split(" fix: ", 1)[1]
    assert "gpucluster images --format json" in fix and "helm pull" in fix, line


def test_a_charts_folder_without_unpacked_charts_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "gpu-operator-v26.7.1.tgz").write_bytes(b"")
    line = _run_error(tmp_path, config=config, charts=packed)
    assert line.startswith("error[rig.input] key=--charts: ")
    assert "Chart.yaml" in line and "tar" in line


def test_a_work_folder_holding_a_kept_rig_is_one_line(tmp_path: Path) -> None:
    """A second `rehearse --keep --work W` while the first one's rig still runs (or after it was
    killed) made kwokctl "continue" that cluster from a new network namespace: 4 minutes, then
    error[rig.internal]. Refused before anything starts, with the kept rig's stop command."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    kept = tmp_path / "work" / "mine" / "rig" / "kwok" / "clusters" / "rig-mine"
    kept.mkdir(parents=True)
    line = _run_error(tmp_path, config=config)
    assert line.startswith("error[rig.input] key=--work: "), line
    assert "rig-mine" in line and " delete cluster" in line and " fix: " in line, line


@pytest.mark.parametrize(
    "text, why",
    [("name: [unclosed\n", "is not YAML"), ("apiVersion: v2\nname: x\n", "names no version")],
)
def test_a_chart_whose_chart_yaml_cannot_be_read_is_one_line(
    tmp_path: Path, text: str, why: str
) -> None:
    """One unreadable Chart.yaml in --charts was error[rig.internal] (exit 70, 'a gpucluster
    bug') spread over several lines of PyYAML's message."""
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE, encoding="utf-8")
    charts = tmp_path / "charts"
    (charts / "broken").mkdir(parents=True)
    (charts / "broken" / "Chart.yaml").write_text(text, encoding="utf-8")
    line = _run_error(tmp_path, config=config, charts=charts)
    assert line.startswith("error[rig.input] key=--charts: "), line
    assert f"{charts / 'broken' / 'Chart.yaml'} {why}" in line and " fix: " in line, line


def _failed_release_line(
    jobs: list[dict[str, object]], charts: list[dict[str, str]] | None = None
) -> str:
    report = {
        "cluster": "nvke-training",
        "ok": False,
        "apply": {
            "makespan_seconds": 1.0,
            "releases": [
                {
                    "release": "rdma-modules-manifests",
                    "namespace": "nodewright",
                    "ok": False,
                    "message": "ensure CRDs are installed first",
                }
            ],
        },
        "jobs": jobs,
        "charts": charts or [],
    }
    (line,) = [ln for ln in rehearse.render_text(report).splitlines() if "error[rig.release]" in ln]
    return line


def test_a_release_refused_without_a_job_is_not_told_to_read_its_job() -> None:
    """A manifests or chart release the server refused has no Job: the fix points at what the
    rehearsal served (the report's charts line: stubs and re-versioned charts) and the values."""
    line = _failed_release_line([])
    assert "job" not in line.split(" fix: ", 1)[1]
    assert "charts" in line.split(" fix: ", 1)[1]


def test_a_failed_gate_is_told_to_read_its_job() -> None:
    line = _failed_release_line(
        [
            {
                "job": "rdma-modules-manifests",
                "namespace": "nodewright",
                "serviceAccount": "rdma-modules-manifests",
                "seconds": 2.0,
                "exitCode": 1,
                "lastLines": ["timed out waiting for the condition"],
            }
        ]
    )
    assert "timed out waiting for the condition (Helm: ensure CRDs" in line
    assert "job" in line.split(" fix: ", 1)[1]


def test_a_failed_job_beside_stub_charts_is_told_they_were_stubs() -> None:
    """Without --charts every chart is an empty stub, and a CRD step that reads its chart's CRDs
    fails (`gpucluster rehearse` of the default AKS cluster: nfd-crds, 'CRD ... is not in the
    CRDs of chart version 0.19.0'); the fix said only "read the release's job and values"."""
    job = {
        "job": "rdma-modules-manifests",
        "namespace": "nodewright",
        "serviceAccount": "rdma-modules-manifests",
        "seconds": 0.5,
        "exitCode": 1,
        "lastLines": ["FAILED: CRD x.example.com is not in the CRDs of chart version 0.19.0"],
    }
    stubs = [
        {"chart": "node-feature-discovery", "version": "0.19.0", "how": "stub", "source": ""},
        {"chart": "nvsentinel", "version": "v1.25.0", "how": "stub", "source": ""},
        {"chart": "gpu-operator", "version": "v26.7.1", "how": "exact", "source": "gpu-operator"},
    ]
    fix = _failed_release_line([job], stubs).split(" fix: ", 1)[1]
    assert "job" in fix
    assert "2 charts were empty stubs (node-feature-discovery 0.19.0, nvsentinel v1.25.0)" in fix
    assert "--charts" in fix
    assert "stub" not in _failed_release_line([job], stubs[2:]).split(" fix: ", 1)[1]


def _gpu_taints(tmp_path: Path, doc: str) -> set[tuple[str, str, str]]:
    """The taints of the rig's GPU nodes for the one cluster of ``doc`` (prepared as rehearse does)."""
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import prepare_cluster
    from gpucluster_rig.nodes import nodes_for

    path = tmp_path / "gpucluster.yaml"
    path.write_text(doc, encoding="utf-8")
    (spec,) = [prepare_cluster(c) for c in load_clusters(str(path))]
    return {
        (t["key"], t.get("value", ""), t["effect"])
        for n in nodes_for(spec)
        if n["metadata"]["labels"]["gpucluster.rig/pool"] == "gpu"
        for t in n["spec"].get("taints", [])
    }


@pytest.mark.parametrize("service", ["nvke", "oke"])
def test_gpu_nodes_of_an_existing_cluster_carry_the_platforms_gpu_taint(
    tmp_path: Path, service: str
) -> None:
    """An existing NVKE or OKE cluster without keyed accelerated tolerations: the rig's GPU nodes
    carry the platform's GPU-node taint (Platform.gpu_taints, nvidia.com/gpu:NoSchedule, what
    ``gpucluster lint`` assumes), so a controller that tolerates it lands there and is reported;
    with a keyed toleration given, its taint."""
    from gpucluster.init import InitOptions, render_project

    files = render_project(InitOptions(service=service, intent="training"), "taints")
    assert _gpu_taints(tmp_path, files["gpucluster.yaml"]) == {("nvidia.com/gpu", "", "NoSchedule")}
    if service == "oke":
        keyed = files["gpucluster.yaml"].replace(
            "    kubernetesVersion:",
            "    scheduling: {accelerated: {tolerations: [example.com/gpu=yes:NoSchedule]}}\n"
            "    kubernetesVersion:",
            1,
        )
        assert keyed != files["gpucluster.yaml"]
        assert _gpu_taints(tmp_path, keyed) == {("example.com/gpu", "yes", "NoSchedule")}


def test_keep_stops_the_rigs_it_kept_when_a_later_cluster_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`rehearse --keep` of two clusters whose second cannot start: the error line is all the
    user sees (no report, no stop command), so the first cluster's kept rig must not stay up
    (it kept running, its temporary work folder then removed under it)."""
    from gpucluster_rig.build import RigError

    stopped: list[str] = []

    class FakeRig:
        def __init__(self, binaries: Path, folder: Path, name: str) -> None:
            self.name, self.kubeconfig, self.workdir = name, folder / "kubeconfig", folder

        def env(self) -> dict[str, str]:
            return {}

        def start(self) -> None:
            if self.name == "rig-two":
                raise RigError("cluster", "kwokctl create cluster failed", "read its log")

        def stop(self) -> None:
            stopped.append(self.name)

    class FakeRepo:
        url = "http://127.0.0.1:9"

        def __init__(self, *_: object) -> None:
            pass

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    monkeypatch.setattr(rehearse, "Cluster", FakeRig)
    monkeypatch.setattr(rehearse, "ChartRepo", FakeRepo)
    monkeypatch.setattr(rehearse, "synth", lambda *a, **k: None)
    monkeypatch.setattr(rehearse, "rehearse_cluster", lambda *a, **k: {"ok": True})
    config = tmp_path / "gpucluster.yaml"
    config.write_text(CLUSTER_FILE + CLUSTER_FILE.split("clusters:\n", 1)[1].replace("mine", "two"))
    with pytest.raises(RigError):
        rehearse.run(
            config=config,
            cluster_name=None,
            folder=tmp_path / "work",
            binaries=tmp_path / "bin",
            charts=_one_chart(tmp_path),
            crds=None,
            keep=True,
        )
    assert sorted(stopped) == ["rig-mine", "rig-two"]
