"""The CRD step (issue 11, item 2): on install and on every chart version change, the owner's CRDs
of the new version are applied server-side and Established before the operator upgrades.

* the release graph: ``<c>-crds`` before every release of ``<c>``, after ``<c>``'s dependencies;
* the synthesized ``helm_template`` data source and ``set`` entries follow the chart version;
* real ``terraform`` (no provider) evaluates the bundle/hash/precondition expressions;
* real Helm (helm-python-sdk) renders the step chart with a real CRD bundle;
* the Job script applies server-side with ``--force-conflicts`` and waits for Established,
  failing naming the CRD (fake kubectl, tests/gate_harness.py)."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from _support import ancestors
from gate_harness import SHELLS, run_script

from gpucluster import pipeline
from gpucluster.charts import crds, graph
from gpucluster.inputs import config
from gpucluster.inputs.config import parse_clusters
from gpucluster_cdk import stacks

DRA = "nvidia-dra-driver-gpu"
STEP = DRA + "-crds"
CD = ["computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"]


def existing_plan(tmp_path: Path, sets=()):
    doc = {
        "clusters": [
            {
                "name": "lab",
                "criteria": {"service": "aks", "accelerator": "h100", "intent": "training"},
                "existing": {"kubeconfig": "~/.kube/config"},
                "scheduling": {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}},
                "overrides": {"set": list(sets)},
            }
        ]
    }
    (spec,) = parse_clusters(doc, source="c.yaml", root=tmp_path)
    return pipeline.build_plan(spec)


@pytest.fixture(scope="module")
def plan():
    return pipeline.build_plan(config.load_clusters()[0])


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("synth")
    out = tmp / "out"
    stacks.synth([existing_plan(tmp)], out)
    return json.loads((out / "stacks" / "lab-runtime" / "cdk.tf.json").read_text())


# --------------------------------------------------------------------------- graph


def test_steps_exist_exactly_for_crds_only_owners(plan):
    steps = {n.component: n for n in plan.nodes if n.kind == "crds"}
    assert set(steps) == {"nfd", DRA}  # kubeflow-trainer is not in the default recipe
    assert steps[DRA].crd_source.names == tuple(CD)
    assert steps["nfd"].crd_source.names == (
        "nodefeaturegroups.nfd.k8s-sigs.io",
        "nodefeaturerules.nfd.k8s-sigs.io",
        "nodefeatures.nfd.k8s-sigs.io",
    )
    # chart hooks / templates upgrade the others: no step for them
    assert not {"gpu-operator", "network-operator", "cert-manager", "kai-scheduler"} & set(steps)


def test_step_runs_before_the_operator_and_after_its_dependencies(plan):
    step, chart = plan.node(STEP), plan.node(DRA)
    assert STEP in chart.depends_on
    assert step.depends_on == [
        "gpu-operator-clusterpolicy-ready"
    ]  # the DRA driver's own dependency handle
    assert step.wait_for_jobs and step.crd_source.version == chart.version
    layers = graph.topological_layers(plan.nodes)
    order = [n for layer in layers for n in layer]
    assert order.index(STEP) < order.index(DRA)
    # destroy runs in reverse: the operator goes first, its CRD step (which never deletes CRDs) after it
    destroy = list(reversed(order))
    assert destroy.index(DRA) < destroy.index(STEP)


def test_custom_resources_of_a_component_wait_for_its_crd_step(plan):
    """The network-operator's NodeFeatureRule (an NFD CRD) applies after nfd's CRD step."""
    assert "nfd-crds" in ancestors(plan, "network-operator-manifests")


def test_a_chart_version_bump_changes_the_step(tmp_path):
    old = existing_plan(tmp_path)
    new = existing_plan(tmp_path)
    ref = new.components[DRA].ref
    bumped = dataclasses.replace(new.components[DRA], ref=dataclasses.replace(ref, version="0.5.1"))
    comps = {**new.components, DRA: bumped}
    steps = crds.crd_steps(new.cluster, comps)
    chart, source = steps[DRA]
    before_chart, before_source = crds.crd_steps(old.cluster, old.components)[DRA]
    assert source.version == "0.5.1" != before_source.version
    assert (
        chart.content_hash != before_chart.content_hash
    )  # values.yaml / Chart.yaml appVersion carry the version
    manifests = {
        (n.component, "pre" if n.kind == "pre-manifests" else "post"): n.local_chart
        for n in new.nodes
        if n.kind in ("pre-manifests", "manifests")
    }
    nodes = graph.build_nodes("lab", new.recipe, comps, manifests, [], steps)
    step = next(n for n in nodes if n.id == STEP)
    assert step.values["chartVersion"] == "0.5.1"


# --------------------------------------------------------------------------- synthesized Terraform


def test_synthesized_data_source_and_sets(runtime):
    data = runtime["data"]["helm_template"][STEP]
    assert (
        data["chart"],
        data["repository"],
        data["version"],
        data["include_crds"],
        data["skip_tests"],
    ) == (
        "dra-driver-nvidia-gpu",
        "oci://registry.k8s.io/dra-driver-nvidia/charts",
        "0.5.0",
        True,
        True,
    )
    rel = runtime["resource"]["helm_release"][STEP]
    sets = {s["name"]: s["value"] for s in rel["set"]}
    assert sets["crdsGz"] == f'${{base64gzip(join("\\n---\\n", data.helm_template.{STEP}.crds))}}'
    assert sets["crdsHash"].startswith("${sha256(join(")
    assert rel["wait_for_jobs"] is True
    assert f"helm_release.{STEP}" in runtime["resource"]["helm_release"][DRA]["depends_on"]
    assert "<= 700000" in rel["lifecycle"]["precondition"][0]["condition"]


def _bundle(reference_charts: Path) -> list[str]:
    folder = reference_charts / "dra-driver-nvidia-gpu" / "crds"
    return [p.read_text() for p in sorted(folder.glob("*.yaml"))]


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform CLI not installed")
def test_terraform_evaluates_the_bundle_expressions(runtime, reference_charts, tmp_path):
    rel = runtime["resource"]["helm_release"][STEP]
    sets = {s["name"]: s["value"] for s in rel["set"]}
    ref = f"data.helm_template.{STEP}.crds"
    outputs = {
        "gz": sets["crdsGz"],
        "hash": sets["crdsHash"],
        "fits": rel["lifecycle"]["precondition"][0]["condition"],
    }
    config_doc = {
        "variable": {"crds": {"type": "list(string)"}},
        "output": {k: {"value": v.replace(ref, "var.crds")} for k, v in outputs.items()},
    }
    (tmp_path / "main.tf.json").write_text(json.dumps(config_doc))
    env = dict(
        os.environ, TF_CLI_CONFIG_FILE="/dev/null", CHECKPOINT_DISABLE="1", TF_IN_AUTOMATION="1"
    )

    def plan(crd_texts):
        (tmp_path / "crds.auto.tfvars.json").write_text(json.dumps({"crds": crd_texts}))
        for args in (["init", "-input=false"], ["plan", "-input=false", "-out=tfplan"]):
            proc = subprocess.run(
                ["terraform", *args, "-no-color"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, proc.stdout + proc.stderr
        shown = subprocess.run(
            ["terraform", "show", "-json", "tfplan"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return {
            k: v["value"] for k, v in json.loads(shown.stdout)["planned_values"]["outputs"].items()
        }

    texts = _bundle(reference_charts)
    out = plan(texts)
    assert gzip.decompress(base64.b64decode(out["gz"])).decode() == "\n---\n".join(texts)
    assert out["fits"] is True
    changed = plan(
        [texts[0].replace("v1beta1", "v1beta2", 1), *texts[1:]]
    )  # what a new chart version brings
    assert changed["hash"] != out["hash"] and changed["gz"] != out["gz"]


# --------------------------------------------------------------------------- the chart (real Helm) and the Job


def test_real_helm_renders_the_step_chart(plan, reference_charts, tmp_path):
    helm_python = pytest.importorskip("helm_python")
    node = plan.node(STEP)
    for rel, text in node.local_chart.files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    raw = "\n---\n".join(_bundle(reference_charts)).encode()
    values = {
        **node.values,
        "crdsGz": base64.b64encode(gzip.compress(raw)).decode(),
        "crdsHash": "abc",
    }
    out = helm_python.Chart.load(str(tmp_path)).render(
        values, name=STEP, namespace=node.namespace, is_install=True
    )
    docs = [
        d
        for text in (out.values() if isinstance(out, dict) else [out])
        for d in yaml.safe_load_all(text)
        if d
    ]
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Job",
        "NetworkPolicy",
    }
    # the Job's own pods may reach only the API server (a plain template: it exists before the post-install hook runs)
    policy = kinds["NetworkPolicy"]
    assert "helm.sh/hook" not in policy["metadata"].get("annotations", {})
    assert policy["spec"]["podSelector"]["matchLabels"] == {
        k: v
        for k, v in kinds["Job"]["spec"]["template"]["metadata"]["labels"].items()
        if k in policy["spec"]["podSelector"]["matchLabels"]
    }
    assert policy["spec"]["ingress"] == [] and policy["spec"]["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    ]
    assert (
        gzip.decompress(base64.b64decode(kinds["ConfigMap"]["binaryData"]["crds.yaml.gz"])) == raw
    )
    job = kinds["Job"]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CHART_VERSION"] == "0.5.0"
    rules = kinds["ClusterRole"]["rules"]
    assert rules == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": CD,
            "verbs": ["get", "patch"],
        },
    ]


def _script_env(tmp_path: Path, texts: list[str]) -> str:
    d = tmp_path / "crds"
    d.mkdir(parents=True, exist_ok=True)
    (d / "crds.yaml.gz").write_bytes(gzip.compress("\n---\n".join(texts).encode()))
    return f"export CRDS_DIR={d} CHART_VERSION=0.5.0\n"


@pytest.mark.parametrize("shell", SHELLS)
def test_job_applies_server_side_and_waits_for_established(reference_charts, tmp_path, shell):
    script = _script_env(tmp_path, _bundle(reference_charts)) + crds.crd_step_script(DRA, CD)
    run = run_script(
        script,
        [("applied", "", 0), ("", "", 0), ("True", "", 0), ("True", "", 0)],
        tmp_path,
        shell=shell,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    apply = run.calls[0]
    assert (
        apply[:3] == ["apply", "--server-side", "--force-conflicts"]
        and "--field-manager=gpucluster-crds" in apply
    )
    assert [c[2] for c in run.calls[1:]] == [
        CD[0],
        CD[0],
        CD[1],
    ]  # waited for each (first poll not yet Established)
    assert run.lines[-1].startswith(
        "crds nvidia-dra-driver-gpu-crds: ready: 2 CRD(s) of chart version 0.5.0"
    )


@pytest.mark.parametrize("shell", SHELLS)
def test_job_fails_naming_the_crd(reference_charts, tmp_path, shell):
    texts = _bundle(reference_charts)
    never = run_script(
        _script_env(tmp_path / "a", texts) + crds.crd_step_script(DRA, CD, timeout=30),
        [("applied", "", 0), ("False", "", 0)],
        tmp_path / "a",
        shell=shell,
        clock_step=20,
    )
    assert (
        never.returncode == 1
        and f"CRD {CD[0]} is not Established within 30s (Established=False)" in never.lines[-1]
    )
    missing = run_script(
        _script_env(tmp_path / "b", texts[:1]) + crds.crd_step_script(DRA, CD),
        [("", "", 0)],
        tmp_path / "b",
        shell=shell,
    )
    assert missing.returncode == 1 and missing.calls == []
    assert (
        "CRD computedomains.resource.nvidia.com is not in the CRDs of chart version 0.5.0"
        in missing.lines[-1]
    )
    refused = run_script(
        _script_env(tmp_path / "c", texts) + crds.crd_step_script(DRA, CD),
        [("", "error: conflict", 1)],
        tmp_path / "c",
        shell=shell,
    )
    assert (
        refused.returncode == 1 and "kubectl apply --server-side was refused" in refused.lines[-1]
    )


def test_a_custom_resource_that_does_not_wait_for_its_crd_owner_is_refused():
    from gpucluster.charts.manifests import dump_documents, make_chart
    from gpucluster.errors import GpuclusterError
    from gpucluster.model import PlanNode

    skyhook = {
        "apiVersion": "skyhook.nvidia.com/v1alpha1",
        "kind": "Skyhook",
        "metadata": {"name": "tuning"},
    }
    chart = make_chart("x-manifests", "x", [("skyhook", dump_documents([skyhook]))])
    owners = {"skyhooks.skyhook.nvidia.com": "nodewright-operator"}
    operator = PlanNode(
        id="nodewright-operator",
        kind="chart",
        component="nodewright-operator",
        namespace="nodewright",
    )
    alone = PlanNode(
        id="x-manifests", kind="manifests", component="x", namespace="x", local_chart=chart
    )
    with pytest.raises(GpuclusterError) as exc:
        crds.check_custom_resource_order("lab", [operator, alone], owners)
    assert (
        "release 'x-manifests' applies Skyhook 'tuning' (skyhook.nvidia.com) but does not wait for 'nodewright-operator'"
        in str(exc.value)
    )
    waits = dataclasses.replace(alone, depends_on=["nodewright-operator"])
    crds.check_custom_resource_order("lab", [operator, waits], owners)  # accepted
    # an operator's own pre-manifests would apply before its CRDs (no CRD step): refused
    pre = PlanNode(
        id="nodewright-operator-pre",
        kind="pre-manifests",
        component="nodewright-operator",
        namespace="nodewright",
        local_chart=chart,
    )
    with pytest.raises(GpuclusterError):
        crds.check_custom_resource_order("lab", [operator, pre], owners)
