"""gpucluster render / lint (gpucluster.lint.render, gpucluster.lint.lint).

* Every built-in recipe x profile (tests/render_cases.py), plain, with ``scheduling.system`` and
  with one extra GPU-pool taint, rendered with Helm's engine against ../shared/reference/charts and
  linted: no error finding (charts the reference folder does not carry are allowed by name).
* Each check fails on a broken input (a misspelt key, a missing toleration, a pinned agent, ...),
  on small hand-made charts and objects, so the checks are tested without ../shared.
* Chart sources: cache keys, exact / nearest matching, Helm's document splitting, set entries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _support
import pytest
from render_cases import UNAVAILABLE, VARIANTS, base_cases, cluster_doc, stand_in_names

from gpucluster.cli import main
from gpucluster.inputs.config import parse_clusters
from gpucluster.lint import lint
from gpucluster.lint.render import (
    ChartSources,
    RenderedRelease,
    Renderer,
    RenderResult,
    cache_key,
    helm_values,
    render_plans,
    split_documents,
    unverified,
)
from gpucluster.model import (
    ClusterSpec,
    Criteria,
    NodePool,
    NodeScheduling,
    Override,
    PlanNode,
    Recipe,
    RuntimePlan,
    Taint,
    Toleration,
)

# --------------------------------------------------------------------------- helpers


def write_chart(
    root: Path,
    name: str,
    version: str,
    values: str,
    templates: dict[str, str],
    app_version: str = "",
) -> Path:
    folder = root / f"{name}-{version}"
    (folder / "templates").mkdir(parents=True)
    (folder / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: {name}\nversion: {version}\n"
        + (f"appVersion: {app_version}\n" if app_version else "")
    )
    (folder / "values.yaml").write_text(values)
    for rel, text in templates.items():
        (folder / "templates" / rel).write_text(text)
    return folder


def aks_cluster(*, taints=(), system: dict[str, str] | None = None, overrides=()) -> ClusterSpec:
    return ClusterSpec(
        name="unit",
        criteria=Criteria(service="aks", accelerator="h100", os="ubuntu", intent="training"),
        pools=[
            NodePool(name="system", vm_size="Standard_D8s_v5", gpu=False),
            NodePool(
                name="gpu",
                vm_size="Standard_ND96isr_H100_v5",
                gpu=True,
                labels={"nvidia.com/gpu.present": "true"},
                taints=[Taint("nvidia.com/gpu", "present", "NoSchedule"), *taints],
            ),
        ],
        scheduling=NodeScheduling(
            system_node_selector=dict(system or {}),
            system_tolerations=[Toleration("CriticalAddonsOnly", "Exists", None, "NoSchedule")]
            if system
            else [],
        ),
        overrides=list(overrides),
        source="unit.yaml",
    )


def plan_of(cluster: ClusterSpec, nodes: list[PlanNode] = ()) -> RuntimePlan:
    recipe = Recipe(
        criteria=cluster.criteria, applied_overlays=["base"], constraints=[], component_refs=[]
    )
    return RuntimePlan(cluster=cluster, recipe=recipe, components={}, nodes=list(nodes))


def release_of(
    objects: list[dict[str, Any]],
    *,
    name: str = "unit",
    component: str = "gpu-operator",
    values=None,
) -> RenderedRelease:
    node = PlanNode(
        id=name, kind="manifests", component=component, namespace="unit", values=values or {}
    )
    return RenderedRelease(
        "unit", node, None, objects=[(f"{name}/templates/x.yaml", o) for o in objects]
    )


def lint_objects(
    cluster: ClusterSpec, objects: list[dict[str, Any]], **kw
) -> list[lint.LintFinding]:
    result = RenderResult(
        releases=[release_of(objects, **kw)], findings=[], plans=[plan_of(cluster)]
    )
    return [f for f in lint.lint_result(result) if f.severity != "info"]


def ids(findings) -> list[str]:
    return sorted(f.id for f in findings if f.severity == "error")


def daemonset(name: str, tolerations=None, node_selector=None) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.example/agent:1.0"}]}
    if tolerations is not None:
        pod["tolerations"] = tolerations
    if node_selector is not None:
        pod["nodeSelector"] = node_selector
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "unit"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
        },
    }


def deployment(
    name: str, node_selector=None, tolerations=None, image="registry.example/app:1.0"
) -> dict[str, Any]:
    doc = daemonset(name, tolerations, node_selector)
    doc["kind"] = "Deployment"
    doc["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return doc


GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SYSTEM = {"kubernetes.azure.com/mode": "system"}
CRITICAL = {"key": "CriticalAddonsOnly", "operator": "Exists", "effect": "NoSchedule"}


# --------------------------------------------------------------------------- chart sources


def test_cache_key_is_repository_chart_version_and_never_leaves_the_cache():
    assert cache_key(
        "oci://registry.k8s.io/nfd/charts", "node-feature-discovery", "0.19.0"
    ) == Path("oci/registry.k8s.io/nfd/charts/node-feature-discovery/0.19.0")
    assert cache_key("https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.1") == Path(
        "https/helm.ngc.nvidia.com/nvidia/gpu-operator/v26.7.1"
    )
    hostile = cache_key("https://h/../../etc", "..", "../x y")
    assert ".." not in hostile.parts and not hostile.is_absolute()
    assert cache_key("https://a/b", "c", "1") != cache_key("oci://a/b", "c", "1")


def test_sources_match_name_and_version_and_report_a_substitute(tmp_path):
    write_chart(tmp_path, "foo", "1.2.0", "{}", {})
    write_chart(tmp_path, "foo", "1.4.0", "{}", {})
    write_chart(tmp_path, "bar", "0.2.1", "{}", {}, app_version="v0.19.0")
    src = ChartSources([tmp_path], cache_dir=tmp_path / "cache")
    exact = src.locate("https://x", "foo", "v1.4.0")
    assert exact.how == "exact" and exact.chart.version == "1.4.0" and not exact.note
    near = src.locate("https://x", "foo", "1.2.5")
    assert (
        near.how == "nearest"
        and near.chart.version == "1.2.0"
        and "stands in for foo 1.2.5" in near.note
    )
    app = src.locate("https://x", "bar", "0.19.0")
    assert app.how == "app-version" and "appVersion v0.19.0" in app.note
    assert src.locate("https://x", "missing", "1.0.0").chart is None


def test_pulled_chart_is_read_from_its_cache_folder(tmp_path):
    """The online pull itself needs the network (not available here); the cache layout it
    writes, <cache>/<cache_key>/<chart>/, is what later runs read."""
    cache = tmp_path / "cache"
    folder = cache / cache_key("oci://ghcr.io/nvidia", "nvsentinel", "v1.25.0")
    write_chart(folder, "nvsentinel", "v1.25.0", "{}", {}).rename(folder / "nvsentinel")
    found = ChartSources([], cache_dir=cache).locate(
        "oci://ghcr.io/nvidia", "nvsentinel", "v1.25.0"
    )
    assert found.how == "cached" and found.chart.path == folder / "nvsentinel"


def test_documents_split_like_helm():
    text = "a: 1\n---# comment\nb: 2\n---\n\n---\nc: 3\n"
    assert [d.strip() for d in split_documents(text)] == ["a: 1", "# comment\nb: 2", "c: 3"]


def test_helm_values_apply_set_entries_like_terraform():
    node = PlanNode(
        id="r",
        kind="chart",
        component="gpu-operator",
        namespace="n",
        values={"driver": {"version": "580.1", "enabled": True}, "x": "${HOME}"},
        terraform_variables={"driver.version": "v", "driver.enabled": "e", "missing.path": "m"},
    )
    values, findings = helm_values(node)
    assert values == {"driver": {"version": "580.1", "enabled": True}, "x": "${HOME}"}
    assert [f.id for f in findings] == ["render.variable-required"]


def test_missing_chart_is_reported_with_how_to_get_it_and_required_only_on_request(tmp_path):
    """A chart that cannot be had is a warning naming it, what was not checked and how to get it;
    with require_charts an error, unless allowed by name."""
    node = PlanNode(
        id="nvsentinel",
        kind="chart",
        component="nvsentinel",
        namespace="n",
        repository="oci://ghcr.io/nvidia",
        chart="nvsentinel",
        version="v1.25.0",
    )
    plan = plan_of(aks_cluster(), [node])
    src = ChartSources([tmp_path], cache_dir=tmp_path / "cache")
    with Renderer(src) as r:
        result = render_plans([plan], src, renderer=r)
    (f,) = result.findings
    assert (
        f.severity == "warning"
        and f.id == "render.chart-unavailable"
        and "nvsentinel v1.25.0" in f.message
    )
    assert (
        "not checked" in f.message
        and "gpucluster charts pull" in f.fix
        and "charts.mirror" in f.fix
        and "--charts" in f.fix
    )
    assert unverified(result) == ["unit/nvsentinel"]
    with Renderer(src, require_charts=True) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "error"
    assert (
        "never rendered with a real chart of any version (unverified" in f.message
    )  # no chartVersions: said out loud
    with Renderer(src, require_charts=True, allow_missing=["nvsentinel"]) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "warning"


# --------------------------------------------------------------------------- dead values (real Helm, small chart)


DEAD_CHART_VALUES = (
    "image: {tag: '1.0'}\nupgrade: {policy: {maxParallel: 1}}\nnodeSelector: {}\nextra: {}\n"
)
DEAD_CHART_TEMPLATES = {
    "cm.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\n"
        "data:\n  parallel: {{ .Values.upgrade.policy.maxParallel | quote }}\n  tag: {{ .Values.image.tag | quote }}\n"
        "  selector: {{ toJson .Values.nodeSelector | quote }}\n"
        "  wholesale: {{ toJson .Values.extra | quote }}\n"
        '  direct: {{ .Values.notDeclared | default "" | quote }}\n'
    ),
}


def _dead(tmp_path, values: dict[str, Any], overrides=()) -> list[lint.LintFinding]:
    write_chart(tmp_path, "cert-manager", "v1.0.0", DEAD_CHART_VALUES, DEAD_CHART_TEMPLATES)
    node = PlanNode(
        id="cert-manager",
        kind="chart",
        component="cert-manager",
        namespace="n",
        repository="https://x",
        chart="cert-manager",
        version="v1.0.0",
        values=values,
    )
    plan = plan_of(aks_cluster(overrides=overrides), [node])
    src = ChartSources([tmp_path], cache_dir=tmp_path / "cache")
    with Renderer(src) as r:
        result = render_plans([plan], src, renderer=r)
        ctx = lint._Ctx(plan=plan, releases=result.releases, placement=lint.placement_of(plan))
        lint.check_dead_values(ctx)
    return ctx.findings


def test_dead_value_misplaced_key_is_an_error(tmp_path):
    findings = _dead(
        tmp_path,
        {
            "upgrade": {"maxParallel": 5, "policy": {"maxParallel": 2}},
            "nodeSelector": {"a": "b"},
            "extra": {"free": 1},
            "notDeclared": "x",
        },
    )
    assert [(f.severity, f.key) for f in findings] == [("error", "upgrade.maxParallel")]
    assert "neither in the defaults of chart cert-manager v1.0.0" in findings[0].message


def test_dead_value_from_a_user_override_is_a_warning_naming_the_closest_key(tmp_path):
    override = Override(
        component="cert-manager",
        kind="set",
        path="upgrade.policy.maxParalel",
        value=3,
        source="unit.yaml",
        key="overrides.set[0]",
    )
    findings = _dead(tmp_path, {"upgrade": {"policy": {"maxParalel": 3}}}, overrides=[override])
    assert [(f.severity, f.key) for f in findings] == [("warning", "upgrade.policy.maxParalel")]
    assert "closest existing key: upgrade.policy.maxParallel" in findings[0].message


# --------------------------------------------------------------------------- placement


def test_agent_without_the_extra_gpu_taint_toleration_is_an_error():
    cluster = aks_cluster(taints=[Taint("dedicated", "ml", "NoSchedule")])
    assert ids(lint_objects(cluster, [daemonset("agent", [GPU_TOL])])) == ["lint.placement-gpu"]
    extra = {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}
    assert ids(lint_objects(cluster, [daemonset("agent", [GPU_TOL, extra])])) == []
    assert ids(lint_objects(cluster, [daemonset("agent", [{"operator": "Exists"}])])) == []


def oke_cluster(system_tolerations=()) -> ClusterSpec:
    """An OKE cluster entry without pools or accelerated tolerations (the platform's GPU taint applies)."""
    return ClusterSpec(
        name="unit",
        criteria=Criteria(service="oke", accelerator="gb200", os="ubuntu", intent="training"),
        scheduling=NodeScheduling(system_tolerations=list(system_tolerations)),
        source="unit.yaml",
    )


def test_agent_on_a_platform_without_pools_must_tolerate_the_platforms_gpu_taint():
    """No pools and no accelerated tolerations: the GPU taints are the platform's
    (Platform.gpu_taints, OKE nvidia.com/gpu:NoSchedule), so an agent tolerating only the system
    taint is refused."""
    cluster = oke_cluster([Toleration("CriticalAddonsOnly", "Exists", None, "NoSchedule")])
    findings = lint_objects(cluster, [daemonset("nfd-worker", [CRITICAL])])
    assert ids(findings) == ["lint.placement-gpu"]
    assert "nvidia.com/gpu:NoSchedule" in findings[0].message
    assert ids(lint_objects(cluster, [daemonset("nfd-worker", [GPU_TOL, CRITICAL])])) == []
    assert lint.placement_of(plan_of(cluster)).gpu_taints == [("nvidia.com/gpu", "", "NoSchedule")]


def test_operator_resources_that_become_daemonsets_must_tolerate_gpu_taints():
    ncp = {
        "apiVersion": "mellanox.com/v1alpha1",
        "kind": "NicClusterPolicy",
        "metadata": {"name": "nic-cluster-policy"},
        "spec": {},
    }
    assert ids(lint_objects(aks_cluster(), [ncp])) == ["lint.placement-gpu"]
    ncp["spec"]["tolerations"] = [GPU_TOL]
    assert ids(lint_objects(aks_cluster(), [ncp])) == []


def test_agent_selecting_labels_gpu_nodes_lack_is_an_error():
    agent = daemonset("agent", [GPU_TOL], {"nvidia.com/gpu.present": "false"})
    assert ids(lint_objects(aks_cluster(), [agent])) == ["lint.placement-gpu"]


def test_agent_pinned_to_system_nodes_is_an_error():
    cluster = aks_cluster(system=SYSTEM)
    pinned = daemonset("node-exporter", [GPU_TOL, CRITICAL], dict(SYSTEM))
    assert ids(lint_objects(cluster, [pinned])) == ["lint.placement-pinned"]
    assert ids(lint_objects(cluster, [daemonset("node-exporter", [GPU_TOL, CRITICAL])])) == []


def test_with_scheduling_system_every_deployment_lands_on_system_nodes():
    cluster = aks_cluster(system=SYSTEM)
    assert ids(lint_objects(cluster, [deployment("op")])) == ["lint.placement-system"]
    assert ids(lint_objects(cluster, [deployment("op", dict(SYSTEM))])) == [
        "lint.placement-system"
    ]  # taint not tolerated
    assert ids(lint_objects(cluster, [deployment("op", dict(SYSTEM), [CRITICAL])])) == []
    assert ids(lint_objects(aks_cluster(), [deployment("op")])) == []


# --------------------------------------------------------------------------- references, images, credentials, schemas


def _cluster_policy(runtime_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {
            "operator": {"runtimeClass": runtime_class},
            "daemonsets": {"tolerations": [GPU_TOL]},
        },
    }


def test_runtime_class_must_exist_in_the_stack():
    pod = deployment("gpu-app")
    pod["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    found = lint_objects(aks_cluster(), [_cluster_policy("nvidia-container-runtime"), pod])
    assert ids(found) == ["lint.runtimeclass"] and "RuntimeClass 'nvidia'" in found[0].message
    assert ids(lint_objects(aks_cluster(), [_cluster_policy("nvidia"), pod])) == []


def test_runtime_class_in_operator_config_carried_by_a_configmap():
    """KAI's admission configuration reaches the operator as YAML inside a ConfigMap."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kai-config", "namespace": "unit"},
        "data": {"config.yaml": 'spec:\n  admission:\n    gpuFractionRuntimeClassName: "nvidia"\n'},
    }
    found = lint_objects(aks_cluster(), [_cluster_policy("nvidia-container-runtime"), cm])
    assert ids(found) == ["lint.runtimeclass"] and "gpuFractionRuntimeClassName" in found[0].key


def test_a_runtime_class_a_release_not_rendered_may_provide_is_not_decided():
    """The RuntimeClass is missing, but a chart release of the cluster was not rendered: an
    ``info`` finding of the same id that names it, never an error."""
    pod = deployment("gpu-app")
    pod["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    missing = PlanNode(
        id="gpu-operator",
        kind="chart",
        component="gpu-operator",
        namespace="n",
        repository="https://x",
        chart="gpu-operator",
        version="v1.0.0",
    )
    result = RenderResult(
        releases=[
            release_of([pod], component="kai-scheduler"),
            RenderedRelease("unit", missing, None),
        ],
        findings=[],
        plans=[plan_of(aks_cluster())],
    )
    (found,) = [f for f in lint.lint_result(result) if f.id == "lint.runtimeclass"]
    assert found.severity == "info" and found.undecided == ("gpu-operator",)
    assert found.message.startswith("not decided: Deployment/gpu-app") and found.message.endswith(
        "a release not rendered may provide it: gpu-operator"
    )


def lint_cli(argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    code = main(["lint", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_lint_with_no_chart_at_hand_does_not_pass(tmp_path, monkeypatch, capsys):
    """No chart could be had: every chart release is listed as not checked, a line says that
    nothing was checked, exit 4 (EXIT_NOTHING_CHECKED), not 0."""
    (tmp_path / "charts").mkdir()
    code, out, err = lint_cli(
        ["--charts", str(tmp_path / "charts"), "--cache", str(tmp_path / "cache")],
        monkeypatch,
        capsys,
    )
    assert code == lint.EXIT_NOTHING_CHECKED == 4, out + err
    assert "error[" not in err
    lines = out.splitlines()
    assert lines[0].startswith("0 error(s), ")
    (not_checked,) = [
        line for line in lines if line.startswith("not checked (chart unavailable): ")
    ]
    assert (
        "gpu-training/gpu-operator" in not_checked and "gpu-training/kai-scheduler" in not_checked
    )
    assert lines[-1].startswith("nothing checked: no chart of the stacks could be had")


def test_lint_with_some_charts_leaves_what_depends_on_the_others_undecided(
    reference_charts, tmp_path, monkeypatch, capsys
):
    """The reference charts without gpu-operator's: kai-scheduler's RuntimeClass, which the GPU
    Operator creates, is not decided (listed after the releases not checked), not an error; the
    run exits 0 (something was checked, nothing found wrong)."""
    some = tmp_path / "charts"
    some.mkdir()
    for folder in reference_charts.iterdir():
        if folder.is_dir() and not folder.name.startswith("gpu-operator"):
            (some / folder.name).symlink_to(folder)
    code, out, err = lint_cli(
        ["--charts", str(some), "--cache", str(tmp_path / "cache")], monkeypatch, capsys
    )
    assert code == 0, out + err
    assert "error[lint.runtimeclass]" not in err
    assert "info[lint.runtimeclass] cluster=gpu-training component=kai-scheduler " in err
    lines = out.splitlines()
    assert lines[0].startswith("0 error(s), ") and lines[0].endswith(", 1 not decided")
    assert lines[1].startswith("not checked (chart unavailable): gpu-training/gpu-operator")
    assert lines[2] == (
        "not decided (depends on a release not checked): gpu-training/kai-scheduler lint.runtimeclass"
    )
    assert not [line for line in lines if line.startswith("nothing checked")]


@pytest.mark.parametrize("command", ["lint", "render"])
def test_a_chart_helm_cannot_load_is_one_error_not_internal(command, tmp_path, monkeypatch, capsys):
    """A gpu-operator chart whose values.yaml is an alias bomb: Helm's loader refuses it
    (excessive aliasing); that is one ``error[render.chart-unreadable]`` naming the chart, its
    release listed as not checked, exit 2 (was ``error[internal]`` HelmChartLoadError, exit 70)."""
    from test_plan_unread_overrides import ALIAS_BOMB

    chart = tmp_path / "charts" / "gpu-operator"
    chart.mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: gpu-operator\nversion: v26.7.1\n")
    (chart / "values.yaml").write_text(ALIAS_BOMB)
    extra = ["--out", str(tmp_path / "out")] if command == "render" else []
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    code = main(
        [command, "--charts", str(tmp_path / "charts"), "--cache", str(tmp_path / "cache"), *extra]
    )
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("error[")]
    assert code == 2 and len(errors) == 1, captured.err
    assert errors[0].startswith(
        "error[render.chart-unreadable] cluster=gpu-training component=gpu-operator "
        "release=gpu-operator: Helm cannot load chart gpu-operator v26.7.1 ("
    )
    assert "excessive aliasing" in errors[0] and "gpu-training/gpu-operator" in captured.out


@pytest.mark.parametrize(
    "image,ok",
    [
        ("nginx", False),
        ("nginx:latest", False),
        ("registry:5000/nginx", False),
        ("nginx:1.27", True),
        ("nginx@sha256:" + "a" * 64, True),
    ],
)
def test_images_must_be_pinned(image, ok):
    assert ids(lint_objects(aks_cluster(), [deployment("app", image=image)])) == (
        [] if ok else ["lint.image-unpinned"]
    )


def test_no_literal_credentials_in_values():
    values = {
        "grafana": {
            "adminPassword": "admin",
            "admin": {"existingSecret": "", "passwordKey": "admin-password"},
        }
    }
    found = lint_objects(aks_cluster(), [], values=values)
    assert ids(found) == ["lint.credential"] and found[0].key == "grafana.adminPassword"
    assert (
        ids(lint_objects(aks_cluster(), [], values={"grafana": {"admin": {"existingSecret": "s"}}}))
        == []
    )


def test_schema_check_refuses_unknown_fields_and_wrong_types():
    bad = deployment("app")
    bad["spec"]["replica"] = 2  # misspelt
    assert ids(lint_objects(aks_cluster(), [bad])) == ["lint.schema"]
    crd = _support.crd("Thing", {"type": "object", "properties": {"size": {"type": "integer"}}})
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"size": "big"},
    }
    found = lint_objects(aks_cluster(), [crd, thing])
    assert ids(found) == ["lint.schema"] and "spec.size" in found[0].message
    thing["spec"]["size"] = 3
    assert ids(lint_objects(aks_cluster(), [crd, thing])) == []


def test_schema_check_reads_objects_as_the_api_server_stores_them():
    """A null in a non-nullable field is pruned (a lint.schema-null warning), a required field
    with a schema default is filled (no finding): Kubernetes docs, "Defaulting and Nullable".
    AICR's storageSpec.emptyDir: null renders spec.storage.emptyDir: null into the Prometheus CR;
    gpu-operator v25.10's ClusterPolicy CRD requires operator.defaultRuntime (default docker)."""
    spec = {
        "type": "object",
        "required": ["runtime"],
        "properties": {
            "runtime": {"type": "string", "default": "docker"},
            "emptyDir": {"type": "object"},
            "keep": {"type": "object", "nullable": True},
        },
    }
    crd = _support.crd("Thing", spec)
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"emptyDir": None, "keep": None},
    }
    found = lint_objects(aks_cluster(), [crd, thing])
    assert ids(found) == [] and [(f.id, f.severity, f.key) for f in found] == [
        ("lint.schema-null", "warning", "Thing/t.spec.emptyDir")
    ]
    del thing["spec"]["emptyDir"]
    assert lint_objects(aks_cluster(), [crd, thing]) == []
    spec["properties"]["runtime"].pop("default")
    crd["metadata"]["name"] = (
        "things.example.com"  # same CRD, no default now: the required field is missing
    )
    assert ids(lint_objects(aks_cluster(), [crd, thing])) == ["lint.schema"]


def test_a_null_server_side_apply_refuses_is_one_warning_per_field_with_its_fix():
    """A null in a field its CRD does not make nullable and gives no default: one
    lint.schema-null warning per field, naming the object, the field path and the fix (remove the
    key; {} / [] for objects / lists). Not for a nullable field, a field with a default, a
    preserve-unknown-fields value; a null in an undeclared field is a lint.schema
    error (the API server refuses the unknown field on create and server-side apply). The rig's
    API server says the same (tests/rig/test_lint_server.py)."""
    spec = {
        "type": "object",
        "properties": {
            "emptyDir": {"type": "object", "properties": {"medium": {"type": "string"}}},
            "keep": {"type": "object", "nullable": True},
            "name": {"type": "string"},
            "nameN": {"type": "string", "nullable": True},
            "count": {"type": "integer"},
            "args": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "runtime": {"type": "string", "default": "docker"},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    nulls = ("emptyDir", "keep", "name", "nameN", "count", "args", "runtime")
    thing = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {
            **dict.fromkeys(nulls),
            "labels": {"a": None},
            "free": {"x": None},
        },
    }
    found = lint_objects(aks_cluster(), [_support.crd("Thing", spec), thing])
    assert ids(found) == []
    refused = {f.key: f for f in found if f.id == "lint.schema-null"}
    assert sorted(refused) == [
        f"Thing/t.spec.{p}" for p in ("args", "count", "emptyDir", "labels.a", "name")
    ]
    assert {f.severity for f in refused.values()} == {"warning"}
    empty = refused["Thing/t.spec.emptyDir"]
    assert "Thing/t" in empty.message and "spec.emptyDir" in empty.message
    assert "server-side apply" in empty.message and "must be of type object" in empty.message
    assert "remove the key" in empty.fix and "{}" in empty.fix
    assert "[]" in refused["Thing/t.spec.args"].fix and "{}" not in refused["Thing/t.spec.name"].fix
    assert [f.id for f in found if f.id != "lint.schema-null"] == []
    thing["spec"] = {"unknown": None}
    found = lint_objects(aks_cluster(), [_support.crd("Thing", spec), thing])
    assert ids(found) == ["lint.schema"] and "unknown" in found[0].message


# --------------------------------------------------------------------------- every built-in recipe, real charts


CASES = [(p, leaf, prof, v) for p, leaf, prof in base_cases() for v in VARIANTS]


@pytest.fixture(scope="module")
def stack(reference_charts, shared_dir):
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    crds = lint.load_crd_folders([shared_dir / "reference" / "crds"])
    with Renderer(
        sources,
        allow_missing=UNAVAILABLE,
        require_charts=True,
        allow_nearest=stand_in_names(reference_charts),
    ) as renderer:  # only those may be missing, or there only at another version
        yield sources, renderer, crds


@pytest.mark.parametrize(
    "platform,leaf,profile,variant",
    CASES,
    ids=[f"{c[1]}-{c[2] or 'default'}-{c[3]}" for c in CASES],
)
def test_every_builtin_recipe_renders_and_lints_clean(
    stack, tmp_path, platform, leaf, profile, variant
):
    from gpucluster import pipeline

    sources, renderer, crds = stack
    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, profile, variant)]},
        source="lint.yaml",
        root=tmp_path,
    )
    plan = pipeline.build_plan(spec)
    result = render_plans([plan], sources, renderer=renderer)
    findings = lint.lint_result(result, extra_crds=crds)
    errors = [f.render() for f in findings if f.severity == "error"]
    assert not errors, "\n".join(errors)
    rendered = {r.name for r in result.releases if r.manifests}
    missing = {r.name for r in result.releases if r.chart is None}
    assert missing <= set(UNAVAILABLE) and rendered | missing == {n.id for n in plan.nodes}
    assert any(o.get("kind") == "ClusterPolicy" for r in result.releases for _, o in r.objects)
    for r in result.releases:
        if r.name == "kube-prometheus-stack":  # rendered with its real subcharts, linted above
            kinds = {(o.get("kind"), o.get("metadata", {}).get("name")) for _, o in r.objects}
            assert {
                ("Deployment", "grafana"),
                ("Deployment", "kube-state-metrics"),
                ("DaemonSet", "prometheus-node-exporter"),
            } <= kinds


def _nfd_daemonsets(stack, tmp_path, platform, leaf, tolerations=None):
    """The NFD DaemonSets of one built-in case with ``scheduling.system`` (real nfd chart) and the
    lint findings of its nfd release; ``tolerations`` forces worker/topologyUpdater tolerations."""
    import dataclasses

    from gpucluster import pipeline

    sources, renderer, crds = stack
    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, "", "system")]},
        source="lint.yaml",
        root=tmp_path,
    )
    plan = pipeline.build_plan(spec)
    nodes = [n for n in plan.nodes if n.id == "nfd"]
    if tolerations is not None:
        values = dict(nodes[0].values)
        for part in ("worker", "topologyUpdater"):
            values[part] = {**values[part], "tolerations": tolerations}
        nodes = [dataclasses.replace(nodes[0], values=values)]
    plan = dataclasses.replace(plan, nodes=nodes)
    result = render_plans([plan], sources, renderer=renderer)
    daemonsets = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"].get("tolerations")
        for r in result.releases
        for _, o in r.objects
        if o.get("kind") == "DaemonSet"
    }
    findings = [f for f in lint.lint_result(result, extra_crds=crds) if f.severity == "error"]
    return daemonsets, findings


NFD_WORKER = "nfd-node-feature-discovery-worker"
NFD_TOPOLOGY = "nfd-node-feature-discovery-topology-updater"


@pytest.mark.parametrize(
    "platform,leaf,names",
    [
        ("oke", "gb200-oke-ubuntu-training", {NFD_WORKER, NFD_TOPOLOGY}),
        ("nvke", "gb200-nvke-ubuntu-training", {NFD_WORKER}),
    ],
)
def test_nfd_with_system_tolerations_keeps_the_gpu_toleration_and_lint_refuses_losing_it(
    stack, tmp_path, platform, leaf, names
):
    """The real nfd 0.19.0 chart: with scheduling.system.tolerations and no accelerated block the
    worker and topology updater DaemonSets tolerate nvidia.com/gpu:NoSchedule and lint is clean;
    the former values (CriticalAddonsOnly only) are two lint.placement-gpu errors."""
    daemonsets, findings = _nfd_daemonsets(stack, tmp_path, platform, leaf)
    assert set(daemonsets) == names
    for name in names:
        assert GPU_TOL in daemonsets[name] and CRITICAL in daemonsets[name], name
    assert not findings, "\n".join(f.render() for f in findings)
    daemonsets, findings = _nfd_daemonsets(stack, tmp_path, platform, leaf, [CRITICAL])
    assert all(daemonsets[n] == [CRITICAL] for n in names)
    assert sorted((f.id, f.key) for f in findings) == [
        ("lint.placement-gpu", f"DaemonSet/{n}") for n in sorted(names)
    ]


def test_cli_render_writes_one_folder_per_release_and_lint_reports_a_misspelt_override(
    reference_charts, shared_dir, tmp_path, capsys
):
    out = tmp_path / "out"
    allow = ["--require-charts", *(a for name in UNAVAILABLE for a in ("--allow-missing", name))]
    allow += [a for name in stand_in_names(reference_charts) for a in ("--allow-nearest", name)]
    code = main(["render", "--charts", str(reference_charts), "--out", str(out), *allow])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    head, _, listed = captured.out.splitlines()[-1].partition(": ")
    assert head == "checked against another version" and sorted(listed.split("; ")) == [
        "gpu-training/gpu-operator (gpu-operator v26.7.0 for v26.7.1)",
        "gpu-training/nfd (node-feature-discovery 0.2.1, appVersion v0.19.0, for 0.19.0)",
        "gpu-training/nodewright-operator (skyhook-operator v0.15.1 for v0.19.1)",
    ], captured.out
    folders = sorted(p.name for p in (out / "gpu-training").iterdir())
    assert "gpu-operator" in folders and "gpu-operator-clusterpolicy-ready" in folders
    values = (out / "gpu-training" / "gpu-operator" / "values.yaml").read_text()
    assert "\ncdi:\n  enabled: true\n" in values and "maxParallelUpgrades: 1" in values
    assert (
        out / "gpu-training" / "gpu-operator" / "gpu-operator" / "templates" / "clusterpolicy.yaml"
    ).is_file()
    assert "warning[render.chart-unavailable]" in captured.err and "nvsentinel" in captured.err
    code = main(
        [
            "lint",
            "--charts",
            str(reference_charts),
            "--crds",
            str(shared_dir / "reference" / "crds"),
            *allow,
            "--set",
            "gpuoperator:driver.upgradePolicy.maxParalelUpgrades=3",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert (
        "warning[lint.dead-value]" in err
        and "closest existing key: driver.upgradePolicy.maxParallelUpgrades" in err
    )


def test_render_uses_the_target_clusters_capabilities(tmp_path):
    """Kubernetes 1.34's version and API versions (prometheus-adapter renders a v1 APIService on
    1.34; Helm's defaults gave v1beta1), and the CRDs of the releases a release depends on."""
    write_chart(
        tmp_path,
        "caps",
        "1.0.0",
        "{}",
        {
            "cm.yaml": (
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caps}\ndata:\n"
                "  kube: {{ .Capabilities.KubeVersion.GitVersion | quote }}\n"
                '  aggregator: {{ .Capabilities.APIVersions.Has "apiregistration.k8s.io/v1" | quote }}\n'
                '  dra: {{ .Capabilities.APIVersions.Has "resource.k8s.io/v1/DeviceClass" | quote }}\n'
                '  thing: {{ .Capabilities.APIVersions.Has "example.com/v1/Thing" | quote }}\n'
            )
        },
    )
    write_chart(
        tmp_path,
        "thing-crds",
        "1.0.0",
        "{}",
        {
            "crd.yaml": (
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: things.example.com}\n"
                "spec: {group: example.com, scope: Cluster, names: {kind: Thing, plural: things},\n"
                "  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}\n"
            )
        },
    )
    crds = PlanNode(
        id="thing-crds",
        kind="chart",
        component="cert-manager",
        namespace="n",
        repository="https://x",
        chart="thing-crds",
        version="1.0.0",
    )
    user = PlanNode(
        id="caps",
        kind="chart",
        component="cert-manager",
        namespace="n",
        repository="https://x",
        chart="caps",
        version="1.0.0",
        depends_on=["thing-crds"],
    )
    alone = PlanNode(
        id="alone",
        kind="chart",
        component="cert-manager",
        namespace="n",
        repository="https://x",
        chart="caps",
        version="1.0.0",
    )
    src = ChartSources([tmp_path], cache_dir=tmp_path / "cache")
    with Renderer(src) as r:
        result = render_plans([plan_of(aks_cluster(), [user, crds, alone])], src, renderer=r)
    data = {
        rel.name: next(o for _, o in rel.objects if o.get("kind") == "ConfigMap")["data"]
        for rel in result.releases
        if rel.name != "thing-crds"
    }
    assert data["caps"] == {"kube": "v1.34.0", "aggregator": "true", "dra": "true", "thing": "true"}
    assert data["alone"]["thing"] == "false"  # the CRD's release is not installed before it


def test_prometheus_adapter_renders_the_api_service_a_134_cluster_serves(reference_charts):
    from gpucluster import pipeline
    from gpucluster.inputs.config import load_clusters

    (plan,) = [pipeline.build_plan(c) for c in load_clusters(env={})]
    sources = ChartSources([reference_charts], cache_dir=Path("/nonexistent-gpucluster-cache"))
    with Renderer(sources, allow_missing=UNAVAILABLE) as r:
        result = render_plans([plan], sources, renderer=r)
    services = [
        o
        for rel in result.releases
        if rel.node.component == "prometheus-adapter"
        for _, o in rel.objects
        if o.get("kind") == "APIService"
    ]
    assert services and {o["apiVersion"] for o in services} == {"apiregistration.k8s.io/v1"}


def _without_default_notice(stderr: str) -> list[str]:
    """The lines of ``stderr`` but the ``info[input.default]`` notice (these run where there is
    no cluster file: the built-in example, announced first)."""
    lines = stderr.strip().splitlines()
    if lines and lines[0].startswith("info[input.default] "):
        lines = lines[1:]
    return lines


def test_cli_render_unknown_chart_folder_is_one_error_line(tmp_path, capsys):
    assert main(["render", "--charts", str(tmp_path / "nope")]) == 2
    err = _without_default_notice(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("error[input] key=--charts") and "fix:" in err[0]


def test_node_feature_rule_on_a_hidden_feature_can_never_match():
    worker = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nfd-worker-conf", "namespace": "unit"},
        "data": {"nfd-worker.conf": "core:\n  noPublishFeatures:\n  - cpu.*\n  - pci.*\n"},
    }
    rule = {
        "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
        "kind": "NodeFeatureRule",
        "metadata": {"name": "nics"},
        "spec": {
            "rules": [
                {
                    "name": "mellanox",
                    "labels": {"x": "true"},
                    "matchFeatures": [
                        {
                            "feature": "pci.device",
                            "matchExpressions": {"vendor": {"op": "In", "value": ["15b3"]}},
                        }
                    ],
                }
            ]
        },
    }
    found = [
        f
        for f in lint_objects(aks_cluster(), [worker, rule])
        if f.id == "lint.nfd-rule-unmatchable"
    ]
    assert len(found) == 1 and "pci.device" in found[0].message
    worker["data"]["nfd-worker.conf"] = "core:\n  noPublishFeatures:\n  - cpu.*\n"
    assert not [
        f
        for f in lint_objects(aks_cluster(), [worker, rule])
        if f.id == "lint.nfd-rule-unmatchable"
    ]


def test_pull_into_a_cache_that_is_a_file_is_a_note_not_a_traceback(tmp_path):
    """`render --pull --cache FILE` ended in NotADirectoryError (the cache mkdir ran outside the
    pull's error handling); the pull failure is reported on the release like any other."""
    cache = tmp_path / "cache"
    cache.write_text("not a folder\n")
    found = ChartSources([], cache_dir=cache, pull=True).locate(
        "https://charts.jetstack.io", "cert-manager", "v1.17.2"
    )
    assert (
        found.chart is None
        and "pull of cert-manager v1.17.2" in found.note
        and "failed" in found.note
    )


def test_cli_cache_or_charts_that_are_files_are_one_error_line(tmp_path, capsys):
    """A --cache or --charts that exists but is a file: one error[input] line naming the flag, exit 2."""
    a_file = tmp_path / "f.txt"
    a_file.write_text("x\n")
    for flag in ("--cache", "--charts"):
        argv = ["render", "--pull", flag, str(a_file)] + (
            ["--charts", str(tmp_path)] if flag == "--cache" else []
        )
        assert main(argv) == 2
        err = _without_default_notice(capsys.readouterr().err)
        assert len(err) == 1 and err[0].startswith("error[input] ") and f"key={flag}:" in err[0], (
            err
        )
        assert "is a file, not a folder" in err[0] and " fix: " in err[0], err


@pytest.mark.parametrize(
    "command", [["charts", "pull"], ["render", "--pull"], ["lint", "--pull"], ["images", "--pull"]]
)
def test_a_cache_that_cannot_be_made_is_one_error_line(tmp_path, capsys, command):
    """A --cache below a file cannot be created: one error[input] key=--cache line before any
    chart is fetched (charts pull printed one charts.unavailable line per chart, each with the fix
    for a repository that lacks the chart)."""
    a_file = tmp_path / "f.txt"
    a_file.write_text("x\n")
    config = tmp_path / "gpucluster.yaml"
    config.write_text(  # a mirror nobody listens on: nothing may be fetched from anywhere
        "charts: {mirror: 'http://127.0.0.1:9/charts'}\n"
        "clusters:\n  - name: c\n"
        "    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        "    region: eastus\n",
        encoding="utf-8",
    )
    code = main([*command, "--config", str(config), "--cache", str(a_file / "charts")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]
    assert code == 2
    assert len(err) == 1 and err[0].startswith("error[input] ") and "key=--cache:" in err[0], err
    assert f"{a_file} is a file" in err[0] and " fix: " in err[0], err


def _crd_with_rules(rules: list[dict[str, Any]], status: bool = False) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {
                        "type": "object",
                        "properties": {
                            "strategy": {
                                "type": "object",
                                "properties": {
                                    "type": {"type": "string", "default": "Rolling"},
                                    "rolling": {"type": "object"},
                                    "address": {"type": "string", "format": "ipv4"},
                                },
                                "x-kubernetes-validations": rules,
                            }
                        },
                    },
                    "status": {"type": "object", "properties": {"n": {"type": "integer"}}},
                },
            }
        },
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"kind": "Thing", "plural": "things"},
            "versions": [version],
        },
    }


def _thing(strategy: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "t"},
        "spec": {"strategy": strategy},
        **extra,
    }


RULE = {
    "rule": "!(self.type != 'Rolling' && has(self.rolling))",
    "message": "rolling requires type Rolling",
}


def test_cel_rule_of_the_crd_rejects_at_the_node_that_declares_it():
    """The rule is evaluated on the defaulted object (type defaults to Rolling), at
    spec.strategy, with the rule's message; messageExpression and fieldPath as the server has them."""
    crd = _crd_with_rules([RULE])
    assert lint_objects(aks_cluster(), [crd, _thing({"rolling": {}})]) == []
    found = lint_objects(aks_cluster(), [crd, _thing({"type": "OnDelete", "rolling": {}})])
    assert ids(found) == ["lint.cel"]
    assert "at spec.strategy: rolling requires type Rolling" in found[0].message
    assert found[0].key == "Thing/t.spec.strategy"
    crd = _crd_with_rules(
        [{**RULE, "messageExpression": "'type is ' + self.type", "fieldPath": ".type"}]
    )
    found = lint_objects(aks_cluster(), [crd, _thing({"type": "OnDelete", "rolling": {}})])
    assert "at spec.strategy.type: type is OnDelete" in found[0].message


def test_cel_rule_reading_an_absent_field_rejects_like_the_server():
    """The API server answers "no such key" and refuses the object."""
    crd = _crd_with_rules([{"rule": "size(self.rolling) > 0 || self.type == 'x'"}])
    found = lint_objects(aks_cluster(), [crd, _thing({"type": "OnDelete"})])
    assert ids(found) == ["lint.cel"] and "no such member" in found[0].message


@pytest.mark.parametrize(
    "rule,why",
    [
        ("self == oldSelf", "transition rule"),
        ("self.type.lowerAscii() == 'rolling'", "lint cannot evaluate it"),
        ("self.type ==", "lint cannot evaluate it"),
    ],
)
def test_cel_rule_lint_cannot_evaluate_is_not_checked_never_passed(rule, why):
    from gpucluster.lint import lint_cel

    crd = _crd_with_rules([{"rule": rule}])
    result = RenderResult(
        releases=[release_of([crd, _thing({"type": "OnDelete"})])],
        findings=[],
        plans=[plan_of(aks_cluster())],
    )
    found = [f for f in lint.lint_result(result) if f.id == "lint.cel"]
    assert [f.severity for f in found] == ["info"]
    assert found[0].message.startswith("not checked:") and why in found[0].message
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    (outcome,) = lint_cel.evaluate_rules(_thing({"type": "OnDelete"}), schema)
    assert outcome.verdict == "not checked"


def test_schema_formats_and_status_are_read_as_the_api_server_reads_them():
    """``format: ipv4`` is checked; ``status`` of a CRD with the status subresource is dropped on
    create (not checked), and checked without it."""
    crd = _crd_with_rules([])
    assert ids(lint_objects(aks_cluster(), [crd, _thing({"address": "10.0.0.1"})])) == []
    assert ids(lint_objects(aks_cluster(), [crd, _thing({"address": "x"})])) == ["lint.schema"]
    bad_status = _thing({}, status={"n": "x"})
    assert ids(lint_objects(aks_cluster(), [crd, bad_status])) == ["lint.schema"]
    crd = _crd_with_rules([], status=True)
    assert ids(lint_objects(aks_cluster(), [crd, bad_status])) == []


CONTROLLER_CASES = [
    ("aks", "h100-aks-ubuntu-training", "azure-managed"),
    ("nvke", "gb200-nvke-ubuntu-training", ""),
    ("oke", "gb200-oke-ubuntu-training", ""),
]
"""One built-in recipe per platform that installs both kai-scheduler and network-operator."""


def _wildcard(tolerations) -> bool:
    return any(not t.get("key") and t.get("operator") == "Exists" for t in tolerations or [])


def _controller_placement(stack, tmp_path, platform, leaf, profile, variant):
    """``{(release, kind, name): pod-ish dict}`` of the kai-scheduler and network-operator
    releases of one built-in case: each Deployment's pod spec, the KAI ``Config`` CR's ``global``
    (the placement of the services the KAI operator deploys) from the kai-config-deployer hook."""
    from gpucluster import pipeline

    sources, renderer, _ = stack
    (spec,) = parse_clusters(
        {"clusters": [cluster_doc(platform, leaf, profile, variant)]},
        source="lint.yaml",
        root=tmp_path,
    )
    plan = pipeline.build_plan(spec)
    result = render_plans([plan], sources, renderer=renderer)
    import yaml

    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in result.releases:
        if r.name not in ("kai-scheduler", "network-operator", "network-operator-manifests"):
            continue
        for _, o in r.objects:
            kind, name = o.get("kind"), o.get("metadata", {}).get("name")
            if kind in ("Deployment", "DaemonSet", "Job"):
                out[(r.name, kind, name)] = o["spec"]["template"]["spec"]
            elif kind == "ConfigMap" and "kai-config.yaml" in (o.get("data") or {}):
                config = yaml.safe_load(o["data"]["kai-config.yaml"])
                out[(r.name, "Config", config["metadata"]["name"])] = config["spec"]["global"]
            elif kind == "NicClusterPolicy":
                out[(r.name, kind, name)] = {"tolerations": o["spec"].get("tolerations")}
    return out


@pytest.mark.parametrize("platform,leaf,profile", CONTROLLER_CASES)
def test_kai_and_network_operator_controllers_stay_off_gpu_nodes_their_agents_do_not(
    stack, tmp_path, platform, leaf, profile
):
    """The real kai-scheduler v0.16.9 and network-operator 26.4.1 charts: the KAI operator, the
    services its ``Config`` places (``global.tolerations``: "tolerations for KAI operators &
    services", CRD kai.scheduler_configs) and the network-operator Deployment tolerate no wildcard
    (AICR's recipe gives them ``operator: Exists``, which puts them on GPU nodes), and with
    ``scheduling.system`` they select and tolerate the system nodes; the GPU-node agents keep
    their own tolerations (the NicClusterPolicy's, and AKS's peermem reloader DaemonSet)."""
    plain = _controller_placement(stack, tmp_path / "plain", platform, leaf, profile, "plain")
    controllers = {k: v for k, v in plain.items() if k[1] in ("Deployment", "Config", "Job")}
    assert ("kai-scheduler", "Deployment", "kai-operator") in controllers, sorted(plain)
    assert ("kai-scheduler", "Config", "kai-config") in controllers, sorted(plain)
    assert ("network-operator", "Deployment", "network-operator") in controllers, sorted(plain)
    wild = sorted(k for k, v in controllers.items() if _wildcard(v.get("tolerations")))
    assert wild == [], wild
    agents = {k: v for k, v in plain.items() if k[1] in ("NicClusterPolicy", "DaemonSet")}
    assert ("network-operator-manifests", "NicClusterPolicy", "nic-cluster-policy") in agents
    for key, spec in agents.items():
        assert lint.tolerates(spec["tolerations"], "nvidia.com/gpu", "present", "NoSchedule"), key
    system = _controller_placement(stack, tmp_path / "system", platform, leaf, profile, "system")
    for key in (
        ("kai-scheduler", "Deployment", "kai-operator"),
        ("kai-scheduler", "Config", "kai-config"),
        ("network-operator", "Deployment", "network-operator"),
    ):
        spec = system[key]
        assert spec.get("nodeSelector") == {"kubernetes.azure.com/mode": "system"}, (key, spec)
        assert lint.tolerates(spec.get("tolerations"), "CriticalAddonsOnly", "", "NoSchedule"), key
        assert not _wildcard(spec.get("tolerations")), key


def test_aicr_recipe_emptydir_null_is_the_one_schema_null_warning(stack, tmp_path):
    """AICR v0.11.1's H100 AKS training RecipeResult (tests/data/aicr) keeps its
    ``prometheus.prometheusSpec.storageSpec.emptyDir: null`` override: rendered with the real
    kube-prometheus-stack chart it is lint.schema-null on the Prometheus resource's
    spec.storage.emptyDir, the field server-side apply refuses (docs/rehearse.md), and the stack
    has no other."""
    import shutil

    from gpucluster import pipeline

    sources, renderer, crds = stack
    recipe = (
        Path(__file__).parent / "data" / "aicr" / "v0.11.1" / "h100-aks-ubuntu-training.recipe.yaml"
    )
    shutil.copy(recipe, tmp_path / recipe.name)
    (spec,) = parse_clusters(
        {"clusters": [{"name": "aicr", "recipe": recipe.name, "kubernetesVersion": "1.34"}]},
        source=str(tmp_path / "gpucluster.yaml"),
        root=tmp_path,
    )
    result = render_plans([pipeline.build_plan(spec)], sources, renderer=renderer)
    nulls = [f for f in lint.lint_result(result, extra_crds=crds) if f.id == "lint.schema-null"]
    assert [(f.release, f.key) for f in nulls] == [
        ("kube-prometheus-stack", "Prometheus/kube-prometheus-prometheus.spec.storage.emptyDir")
    ]
    assert nulls[0].fix.endswith("or set it to {}")


# --------------------------------------------------------------------------- stand-ins at another version


def _one_chart_plan(tmp_path, chart: str, version: str, component: str = "gpu-operator"):
    node = PlanNode(
        id=component,
        kind="chart",
        component=component,
        namespace="n",
        repository="https://x",
        chart=chart,
        version=version,
    )
    return plan_of(aks_cluster(), [node]), ChartSources([tmp_path], cache_dir=tmp_path / "cache")


CM = {"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}


@pytest.mark.parametrize(
    "chart_version,app_version,how",
    [("v26.7.0", "v26.7.0", "nearest"), ("0.2.1", "v26.7.1", "app-version")],
)
def test_a_chart_at_another_version_fails_require_charts_unless_allowed(
    tmp_path, chart_version, app_version, how
):
    """A chart found only at another version than the pinned one (the nearest version, or a
    chart version that differs while its appVersion is the pin) is rendered as a stand-in: a
    finding as before without require_charts; with it an error (the pinned version was never
    checked), unless the component is allowed by name (allow_nearest, or allow_missing: a chart
    that may be absent may also stand in at another version). The stand-in is listed."""
    from gpucluster.lint.render import stand_ins

    write_chart(tmp_path, "gpu-operator", chart_version, "{}", CM, app_version=app_version)
    plan, src = _one_chart_plan(tmp_path, "gpu-operator", "v26.7.1")
    assert src.locate("https://x", "gpu-operator", "v26.7.1").how == how
    before = "info" if how == "app-version" else "warning"
    with Renderer(src) as r:
        result = render_plans([plan], src, renderer=r)
    assert [(f.id, f.severity) for f in result.findings] == [("render.chart-nearest", before)]
    assert stand_ins(result) == [
        f"unit/gpu-operator (gpu-operator {chart_version}"
        + (f", appVersion {app_version}," if how == "app-version" else "")
        + " for v26.7.1)"
    ]
    with Renderer(src, require_charts=True) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert (f.id, f.severity, f.component) == ("render.chart-nearest", "error", "gpu-operator")
    assert "--allow-nearest gpu-operator" in f.fix
    for allowed in ({"allow_nearest": ["gpu-operator"]}, {"allow_missing": ["gpu-operator"]}):
        with Renderer(src, require_charts=True, **allowed) as r:
            (f,) = render_plans([plan], src, renderer=r).findings
        assert (f.id, f.severity) == ("render.chart-nearest", before)
    with Renderer(src, require_charts=True, allow_nearest=["nfd"]) as r:  # another name
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "error"


def test_a_folder_named_for_the_pinned_version_is_a_stand_in(tmp_path):
    """A folder ``<chart>-<version>`` whose Chart.yaml says another version is only claimed to
    be the pin by its name (a placeholder version of a source checkout, or another release
    renamed): info and listed, an error with require_charts unless allowed by name (it passed
    ``--require-charts`` in silence, even with a real release renamed)."""
    from gpucluster.lint.render import stand_ins

    folder = write_chart(tmp_path, "agentgateway", "0.0.2", "{}", CM)
    folder.rename(tmp_path / "agentgateway-v1.3.1")
    plan, src = _one_chart_plan(tmp_path, "agentgateway", "v1.3.1", component="agentgateway")
    with Renderer(src) as r:
        result = render_plans([plan], src, renderer=r)
    assert [(f.id, f.severity) for f in result.findings] == [("render.chart-nearest", "info")]
    assert stand_ins(result) == [
        "unit/agentgateway (agentgateway 0.0.2, folder agentgateway-v1.3.1, for v1.3.1)"
    ]
    with Renderer(src, require_charts=True) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "error" and "--allow-nearest agentgateway" in f.fix
    with Renderer(src, require_charts=True, allow_nearest=["agentgateway"]) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "info"


def test_a_subchart_outside_its_range_is_a_stand_in(tmp_path):
    """A dependency the chart does not carry, found in the chart sources only at a version its
    range does not admit, stands in for it: a warning naming both versions (it was silent
    before), an error with require_charts unless its alias is allowed; one inside the range is
    no finding."""
    from gpucluster.lint.render import stand_ins

    parent = write_chart(tmp_path, "parent", "1.0.0", "{}", CM)
    (parent / "Chart.yaml").write_text(
        "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n"
        "- {name: sub, version: '0.12.*', repository: 'https://x', alias: mysub}\n"
    )
    write_chart(tmp_path, "sub", "0.13.0", "{}", CM)
    plan, src = _one_chart_plan(tmp_path, "parent", "1.0.0", component="parent")
    with Renderer(src) as r:
        result = render_plans([plan], src, renderer=r)
    (f,) = result.findings
    assert (f.id, f.severity) == ("render.chart-nearest", "warning")
    assert "sub 0.13.0" in f.message and "0.12.*" in f.message
    assert stand_ins(result) == ["unit/parent subchart mysub (sub 0.13.0 for 0.12.*)"]
    with Renderer(src, require_charts=True) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "error" and "--allow-nearest mysub" in f.fix
    with Renderer(src, require_charts=True, allow_nearest=["mysub"]) as r:
        (f,) = render_plans([plan], src, renderer=r).findings
    assert f.severity == "warning"
    write_chart(tmp_path, "sub", "0.12.3", "{}", CM)
    src = ChartSources([tmp_path], cache_dir=tmp_path / "cache")
    with Renderer(src, require_charts=True) as r:
        result = render_plans([plan], src, renderer=r)
    assert result.findings == [] and stand_ins(result) == []


def _default_chart_components() -> set[str]:
    from gpucluster.cli import _plans

    return {n.component for p in _plans(None, []) for n in p.nodes if n.kind == "chart"}


def test_cli_require_charts_fails_on_a_stand_in_unless_allowed(tmp_path, monkeypatch, capsys):
    """``render --require-charts`` with gpu-operator only at another version: one
    ``error[render.chart-nearest]`` line, exit 2; named with ``--allow-nearest`` a warning,
    exit 0, and the last line lists the stand-in; without --require-charts unchanged (warning,
    exit 0). Every other chart of the default cluster file is absent and allowed by name."""
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    charts = tmp_path / "charts"
    charts.mkdir()
    write_chart(charts, "gpu-operator", "v26.7.0", "{}", CM, app_version="v26.7.0")
    others = sorted(_default_chart_components() - {"gpu-operator"})
    common = ["render", "--charts", str(charts), "--cache", str(tmp_path / "cache")]
    common += [a for name in others for a in ("--allow-missing", name)]

    def run(*extra: str) -> tuple[int, list[str], list[str]]:
        code = main([*common, "--out", str(tmp_path / "out"), *extra])
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err.splitlines()

    code, out, err = run("--require-charts")
    assert code == 2, err
    (line,) = [x for x in err if x.startswith("error[")]
    assert line.startswith(
        "error[render.chart-nearest] cluster=gpu-training component=gpu-operator release=gpu-operator: "
        "chart gpu-operator v26.7.0 stands in for gpu-operator v26.7.1"
    )
    assert "fix: " in line and "--allow-nearest gpu-operator" in line
    expected = "checked against another version: gpu-training/gpu-operator (gpu-operator v26.7.0 for v26.7.1)"
    for extra in (("--require-charts", "--allow-nearest", "gpu-operator"), ()):
        code, out, err = run(*extra)
        assert code == 0, err
        assert not [x for x in err if x.startswith("error[")]
        assert [x for x in err if "[render.chart-nearest]" in x][0].startswith(
            "warning[render.chart-nearest] cluster=gpu-training component=gpu-operator "
        )
        assert out[-1] == expected, out
