"""The live path: ``gpucluster snapshot`` and ``gpucluster validate --kubeconfig`` against a local
API stand-in on 127.0.0.1 (tests/validate_server.py) serving the healthy default snapshot, with
the official kubernetes client (token and exec-plugin kubeconfigs); ``--wait`` re-reads until the
checks converge; and the read-only ClusterRole covers every read of every built-in plan."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from validate_server import TOKEN, FakeApi
from validate_support import HEALTHY_DEFAULT, ROOT, items_of, mutate, plan_of

from gpucluster.cli import main
from gpucluster.live import validate as validate_mod
from gpucluster.live.checks import read_plan
from gpucluster.live.snapshot import BUILTIN_KINDS, read_live

RBAC = ROOT / "gpucluster" / "live" / "rbac" / "validate-reader.yaml"


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(args), stdout=out, stderr=err), out.getvalue(), err.getvalue()


HTTP_WARNING = "warning[validate.cluster] "


def without_http_warning(err: str) -> str:
    """``err`` less its first line when that is the plain-``http://`` token warning (the stand-in
    serves http://127.0.0.1 with a bearer token); the warning is asserted on where it is tested."""
    first, _, rest = err.partition("\n")
    if first.startswith(HTTP_WARNING) and "over plain http://" in first:
        return rest
    return err


@pytest.fixture
def healthy_items():
    return items_of(HEALTHY_DEFAULT.read_text(encoding="utf-8"))


@pytest.fixture
def api(healthy_items):
    state = {"items": healthy_items}
    server = FakeApi(lambda: state["items"])
    server.state = state
    yield server
    server.close()


def test_snapshot_reads_the_cluster_read_only(tmp_path, api):
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    out = tmp_path / "snap.json"
    code, stdout, err = cli("snapshot", "--kubeconfig", str(kubeconfig), "--out", str(out))
    # the token travels over plain http:// to the stand-in: one warning line on stderr, stdout
    # untouched, the snapshot written whole
    assert (code, stdout) == (0, "") and err.count("\n") == 1, err
    assert err.startswith(HTTP_WARNING) and api.url in err and TOKEN not in err, err
    assert out.read_text() == HEALTHY_DEFAULT.read_text(), (
        "the snapshot of the served cluster is the served snapshot"
    )
    assert {m for m, _ in api.requests} == {"GET"}
    assert not [p for _, p in api.requests if "/secrets" in p or "/configmaps" in p]
    namespaced = [p for _, p in api.requests if "/namespaces/" in p and p.count("/") > 5]
    planned = set(read_plan(plan_of(None)).namespaces)
    assert namespaced and all(
        p.split("/namespaces/")[1].split("/")[0] in planned for p in namespaced
    )


def test_validate_live_passes_then_fails(tmp_path, api, healthy_items):
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig")
    code, out, err = cli("validate", "--kubeconfig", str(kubeconfig), "--context", "other")
    assert code == 0 and without_http_warning(err) == "" and "PASSED" in out and "kubeconfig" in out
    api.state["items"] = mutate(
        healthy_items,
        "ClusterPolicy",
        "cluster-policy",
        lambda o: o["status"].update(state="notReady"),
    )
    code, out, _ = cli("validate", "--kubeconfig", str(kubeconfig), "--format", "json")
    doc = json.loads(out)
    assert code == 1 and any(
        c["object"] == "nvidia.com/v1/ClusterPolicy/cluster-policy" and c["verdict"] == "fail"
        for c in doc["checks"]
    )
    code, out, _ = cli(
        "validate", "--kubeconfig", str(kubeconfig), "--wait", "1s"
    )  # bounded: one reading fits in 1 s
    assert code == 1 and "FAILED" in out


def test_wait_rereads_until_the_checks_converge(api, healthy_items):
    """The cluster converges after the first reading; the second reading passes (no timing asserted)."""
    broken = mutate(
        healthy_items,
        "DaemonSet",
        "nvidia-dra-driver-gpu-kubelet-plugin",
        lambda o: o["status"].update(numberReady=0, numberAvailable=0),
    )
    readings = []

    def read():
        api.state["items"] = broken if not readings else healthy_items
        snap = read_live(str(api.kubeconfig_path), None, read_plan(plan))
        readings.append(snap)
        return snap

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        api.kubeconfig_path = api.kubeconfig(Path(tmp) / "kubeconfig")
        plan = plan_of(None)
        sleeps = []
        report = validate_mod.validate_until(
            plan, read, wait_seconds=600, poll_seconds=10, sleep=sleeps.append
        )
    assert report.passed and report.attempts == 2 and len(readings) == 2 and sleeps == [10]
    clock = iter(range(0, 10**6, 100))
    report = validate_mod.validate_until(
        plan,
        lambda: _broken(broken),
        wait_seconds=250,
        poll_seconds=100,
        clock=lambda: next(clock),
        sleep=lambda s: None,
    )
    assert not report.passed and report.attempts <= 3  # bounded by the wait, never endless


def _broken(items):
    from gpucluster.live.snapshot import Snapshot

    return Snapshot(items=items, source="broken")


def test_exec_credential_plugin(tmp_path, api):
    plugin = tmp_path / "cred.py"
    plugin.write_text(
        "import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', "
        f"'kind': 'ExecCredential', 'status': {{'token': '{TOKEN}'}}}}))\n"
    )
    kubeconfig = api.kubeconfig(tmp_path / "kubeconfig", exec_command=[sys.executable, str(plugin)])
    code, out, err = cli("validate", "--kubeconfig", str(kubeconfig))
    assert code == 0, err


@pytest.mark.parametrize(
    "case", ["no-token", "forbidden", "unreachable", "bad-context", "not-a-kubeconfig"]
)
def test_live_errors_are_one_line_exit_2(tmp_path, healthy_items, case):
    server = FakeApi(
        lambda: healthy_items, forbidden=("/api/v1/nodes",) if case == "forbidden" else ()
    )
    try:
        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        doc = json.loads(kubeconfig.read_text())
        args = ["validate", "--kubeconfig", str(kubeconfig)]
        if case == "no-token":
            doc["users"][0]["user"] = {"token": "wrong"}
        if case == "unreachable":
            doc["clusters"][0]["cluster"]["server"] = "http://127.0.0.1:9"
        if case == "bad-context":
            args += ["--context", "nope"]
        kubeconfig.write_text(json.dumps(doc) if case != "not-a-kubeconfig" else "::: not yaml [")
        code, out, err = cli(*args)
    finally:
        server.close()
    err = without_http_warning(err)
    assert (
        code == 2
        and out == ""
        and err.count("\n") == 1
        and err.startswith("error[validate.")
        and " fix: " in err
    ), err
    if case == "forbidden":
        assert "/api/v1/nodes" in err and "ClusterRole" in err


def test_clusterrole_is_valid_and_least_privilege():
    role = yaml.safe_load(RBAC.read_text(encoding="utf-8"))
    kubernetes_validate.validate(role, "1.34.0", strict=True)
    assert role["kind"] == "ClusterRole"
    for rule in role["rules"]:
        assert (
            rule["verbs"] == ["get", "list"]
            and "*" not in rule["resources"]
            and "*" not in rule["apiGroups"]
        )
        assert not {"secrets", "configmaps"} & set(rule["resources"])


def test_clusterrole_covers_every_read_of_every_built_in_plan(tmp_path):
    from k8s_schema import crd_index
    from render_cases import base_cases, cluster_doc

    from gpucluster import pipeline
    from gpucluster.inputs.config import parse_clusters

    role = yaml.safe_load(RBAC.read_text(encoding="utf-8"))
    granted = {
        (g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }
    plurals = {(f"{g}/{v}", k): e["plural"] for (g, v, k), e in crd_index().items()}
    plurals.update(
        {
            ("monitoring.coreos.com/v1", "Prometheus"): "prometheuses",
            ("monitoring.coreos.com/v1", "Alertmanager"): "alertmanagers",
            ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"): "clustertrainingruntimes",
            ("aks.azure.com/v1alpha1", "SchedulerConfiguration"): "schedulerconfigurations",
        }
    )
    needed = {(av.rpartition("/")[0], plural) for (av, _k), (plural, _s) in BUILTIN_KINDS.items()}
    for platform, leaf, profile in base_cases():
        (spec,) = parse_clusters(
            {"clusters": [cluster_doc(platform, leaf, profile, "plain")]},
            source="x.yaml",
            root=tmp_path,
        )
        for api_version, kind in read_plan(pipeline.build_plan(spec)).custom:
            needed.add((api_version.rpartition("/")[0], plurals[(api_version, kind)]))
    platform, leaf, profile = base_cases()[
        0
    ]  # an AKS case, with scheduler profiles (docs/scheduler-profiles.md)
    doc = cluster_doc(platform, leaf, profile, "plain")
    doc["schedulerProfiles"] = [
        {"schedulerName": "gpu-binpacking-scheduler", "preset": "gpu-binpacking"}
    ]
    (spec,) = parse_clusters(
        {"clusters": [doc]},
        source="x.yaml",
        root=tmp_path,
    )
    for api_version, kind in read_plan(pipeline.build_plan(spec)).custom:
        needed.add((api_version.rpartition("/")[0], plurals[(api_version, kind)]))
    assert needed <= granted, sorted(needed - granted)
    assert granted == needed, f"grants nothing a snapshot reads: {sorted(granted - needed)}"
