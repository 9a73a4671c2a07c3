"""HelmComponent / LocalChartRelease: synthesized helm_release JSON, assets, validation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from plan_factory import local_chart

import gpucluster_cdk.constructs_lib.helm as helm_module
from gpucluster.charts.manifests import content_hash
from gpucluster.model import scalar_type
from gpucluster_cdk.constructs_lib.cdk import (
    HELM_PROVIDER_VERSION,
    App,
    AssetType,
    Construct,
    TerraformAsset,
    TerraformStack,
)
from gpucluster_cdk.constructs_lib.cdk import Testing as CdkTesting
from gpucluster_cdk.constructs_lib.helm import (
    ASSET_ID,
    HelmComponent,
    HelmComponentProps,
    LocalChartRelease,
    LocalChartReleaseProps,
    chart_files_key,
    chart_source,
    unique_id,
    values_document,
)
from gpucluster_cdk.stacks.runtime import values_props, values_text


def synth(build, *, validate: bool = True) -> dict:
    stack = TerraformStack(CdkTesting.app(), "stack")
    build(stack)
    return json.loads(CdkTesting.synth(stack, validate))


def releases(doc: dict) -> dict:
    return doc["resource"]["helm_release"]


def test_chart_source_oci_and_https():
    assert chart_source("oci://ghcr.io/nvidia/", "nvsentinel") == (
        "oci://ghcr.io/nvidia",
        "nvsentinel",
    )
    assert chart_source(
        "", "oci://registry.k8s.io/dra-driver-nvidia/charts/nvidia-dra-driver-gpu"
    ) == (
        "oci://registry.k8s.io/dra-driver-nvidia/charts",
        "nvidia-dra-driver-gpu",
    )
    assert chart_source("https://helm.ngc.nvidia.com/nvidia", "gpu-operator") == (
        "https://helm.ngc.nvidia.com/nvidia",
        "gpu-operator",
    )


def test_values_document_is_one_sorted_yaml_doc_with_terraform_escapes():
    values = {"b": {"z": 1, "a": [3, 1]}, "a": "${HOME}", "c": "%{ if x }"}
    text = values_document(values_text(values))
    assert text == values_document(values_text(dict(reversed(list(values.items())))))
    assert text.index("a:") < text.index("b:") < text.index("c:")
    assert "$${HOME}" in text and "%%{ if x }" in text
    # Terraform turns $${ / %%{ back into literals: undo that and it is the YAML of the values
    assert yaml.safe_load(text.replace("$${", "${").replace("%%{", "%{")) == values


def test_remote_chart_release_properties_and_dependencies():
    def build(stack):
        crds = HelmComponent(
            stack,
            "crds",
            HelmComponentProps(
                release_name="prometheus-operator-crds",
                namespace="monitoring",
                chart="prometheus-operator-crds",
                repository="https://prometheus-community.github.io/helm-charts",
                version="24.0.1",
            ),
        )
        HelmComponent(
            stack,
            "dra",
            HelmComponentProps(
                release_name="nvidia-dra-driver-gpu",
                namespace="nvidia-dra-driver",
                repository="oci://registry.k8s.io/dra-driver-nvidia/charts",
                chart="nvidia-dra-driver-gpu",
                version="26.4.1",
                **values_props(
                    {"resources": {"gpus": {"enabled": False}}, "nvidiaDriverRoot": "/"}
                ),
                depends_on=[crds],
                timeout_seconds=1200,
            ),
        )

    doc = synth(build)
    assert doc["terraform"]["required_providers"] == {
        "helm": {"source": "helm", "version": HELM_PROVIDER_VERSION}
    }
    rel = releases(doc)
    assert set(rel) == {"prometheus-operator-crds", "nvidia-dra-driver-gpu"}
    dra = rel["nvidia-dra-driver-gpu"]
    assert dra["name"] == "nvidia-dra-driver-gpu"
    assert dra["repository"] == "oci://registry.k8s.io/dra-driver-nvidia/charts"
    assert dra["chart"] == "nvidia-dra-driver-gpu"
    assert dra["version"] == "26.4.1"
    assert dra["namespace"] == "nvidia-dra-driver" and dra["create_namespace"] is True
    assert dra["wait"] is True and dra["wait_for_jobs"] is False and dra["timeout"] == 1200
    assert dra["values"] == ["nvidiaDriverRoot: /\nresources:\n  gpus:\n    enabled: false\n"]
    assert dra["depends_on"] == ["helm_release.prometheus-operator-crds"]
    assert "depends_on" not in rel["prometheus-operator-crds"]


def test_terraform_variable_binding_becomes_variable_and_set_entry():
    def build(stack):
        for rid, values in (
            ("a", {"driver": {"version": "580.126.09"}}),
            ("b", {"driver": {"version": "580.126.09"}}),
        ):
            HelmComponent(
                stack,
                rid,
                HelmComponentProps(
                    release_name=f"gpu-operator-{rid}",
                    namespace="gpu-operator",
                    chart="gpu-operator",
                    repository="https://helm.ngc.nvidia.com/nvidia",
                    version="v26.7.1",
                    **values_props(
                        values,
                        {"driver.version": "gpu_driver_version", "dcgm.enabled": "dcgm_enabled"},
                    ),
                ),
            )

    doc = synth(build)
    assert doc["variable"]["gpu_driver_version"]["default"] == "580.126.09"
    assert doc["variable"]["gpu_driver_version"]["type"] == "string"
    assert "default" not in doc["variable"]["dcgm_enabled"]  # no value at that path: required
    for rel in releases(doc).values():
        assert rel["set"] == [
            {"name": "dcgm.enabled", "type": "string", "value": "${var.dcgm_enabled}"},
            {"name": "driver.version", "type": "string", "value": "${var.gpu_driver_version}"},
        ]


@pytest.mark.parametrize(
    "props, message",
    [
        (dict(version="^1.2.0"), "must be one exact version"),
        (dict(version=""), "must be one exact version"),
        (
            dict(repository="git://example.com/charts"),
            "must start with https://, http:// or oci://",
        ),
        (dict(release_name="Bad_Name"), "release name 'Bad_Name' must be lowercase"),
        (dict(release_name="x" * 54), "at most 53 characters"),
        (dict(namespace="Gpu Operator"), "must be a DNS-1123 label"),
        (values_props({"driver": {"version": "580"}}, {"driver": "drv"}), "holds a list/map"),
        (
            values_props({"driver": {"version": "580"}}, {"driver.version": "count"}),
            "must be an identifier",
        ),
        (values_props({"driver": None}, {"driver": "drv"}), "holds a list/map"),
    ],
)
def test_release_validation_fails_synth_with_construct_path(props, message):
    base = dict(
        release_name="gpu-operator",
        namespace="gpu-operator",
        chart="gpu-operator",
        repository="https://helm.ngc.nvidia.com/nvidia",
        version="v26.7.1",
        **values_props({"driver": {"version": "580"}}),
    )
    base.update(props)
    with pytest.raises(Exception) as info:
        synth(lambda stack: HelmComponent(stack, "gpu-operator", HelmComponentProps(**base)))
    assert "[stack/gpu-operator]" in str(info.value)
    assert message in str(info.value)


def test_local_chart_release_ships_chart_as_relative_asset(tmp_path, request):
    chart = local_chart(
        "nic-cluster-policy", "apiVersion: mellanox.com/v1alpha1\nkind: NicClusterPolicy\n"
    )
    stack = TerraformStack(
        CdkTesting.app(context={"gpucluster:stagingDir": str(tmp_path / "staging")}), "stack"
    )
    LocalChartRelease(
        stack,
        "network-operator-manifests",
        LocalChartReleaseProps(
            release_name="network-operator-manifests",
            namespace="nvidia-network-operator",
            chart=chart,
            **values_props({"contentHash": chart.content_hash}),
            wait_for_jobs=True,
            timeout_seconds=300,
        ),
    )
    outdir = Path(CdkTesting.full_synth(stack))
    request.addfinalizer(lambda: shutil.rmtree(outdir, ignore_errors=True))
    doc = json.loads((outdir / "stacks" / "stack" / "cdk.tf.json").read_text())
    rel = doc["resource"]["helm_release"]["network-operator-manifests"]
    digest = content_hash(chart.files)[:32]
    assert rel["chart"].startswith("./assets/") and rel["chart"].endswith("/" + digest)
    assert "repository" not in rel and "version" not in rel
    assert rel["wait_for_jobs"] is True and rel["timeout"] == 300
    assert rel["values"] == [f"contentHash: {chart.content_hash}\n"]
    shipped = outdir / "stacks" / "stack" / rel["chart"]
    assert {
        str(p.relative_to(shipped)): p.read_text() for p in shipped.rglob("*") if p.is_file()
    } == chart.files
    # staged under <staging>/<release>/<key of the files>, outside the output folder
    assert (
        tmp_path
        / "staging"
        / "network-operator-manifests"
        / chart_files_key(chart.files)
        / "Chart.yaml"
    ).is_file()


def test_identical_local_charts_are_staged_once_and_shipped_into_every_stack(tmp_path):
    """A fleet's clusters ship the same generated charts: each distinct chart is written to the
    staging folder once (not once per stack), and every stack still gets its own copy."""
    chart = local_chart("c", "kind: A\n")
    other = local_chart("c", "kind: B\n")
    outdir = tmp_path / "out"
    app = App(outdir=str(outdir), context={"gpucluster:stagingDir": str(tmp_path / "staging")})
    stacks = [TerraformStack(app, name) for name in ("one", "two", "three")]
    for stack, each in zip(stacks, (chart, chart, other), strict=True):
        LocalChartRelease(
            stack, "c", LocalChartReleaseProps(release_name="c", namespace="default", chart=each)
        )
    staged = sorted(p.parent.name for p in (tmp_path / "staging").rglob("Chart.yaml"))
    assert staged == sorted({chart_files_key(chart.files), chart_files_key(other.files)})
    app.synth()
    for name, each in (("one", chart), ("two", chart), ("three", other)):
        doc = json.loads((outdir / "stacks" / name / "cdk.tf.json").read_text())
        shipped = outdir / "stacks" / name / doc["resource"]["helm_release"]["c"]["chart"]
        assert {
            str(p.relative_to(shipped)): p.read_text() for p in shipped.rglob("*") if p.is_file()
        } == each.files


def test_local_chart_asset_path_depends_on_content_only():
    def chart_path(manifest: str) -> str:
        chart = local_chart("c", manifest)
        doc = synth(
            lambda stack: LocalChartRelease(
                stack,
                "c",
                LocalChartReleaseProps(release_name="c", namespace="default", chart=chart),
            )
        )
        return releases(doc)["c"]["chart"]

    assert chart_path("kind: A\n") == chart_path("kind: A\n")
    assert chart_path("kind: A\n") != chart_path("kind: B\n")


@pytest.mark.parametrize(
    "files, message",
    [
        ({"templates/a.yaml": "kind: A\n"}, "has no Chart.yaml"),
        (
            {"Chart.yaml": "name: c\n", "../evil.yaml": "x"},
            "file '../evil.yaml' must be a relative path",
        ),
        (
            {"Chart.yaml": "name: c\n", "/etc/passwd": "x"},
            "file '/etc/passwd' must be a relative path",
        ),
    ],
)
def test_local_chart_validation(files, message):
    from gpucluster.model import LocalChart

    chart = LocalChart(name="c", version="0.1.0", files=files, content_hash="0" * 64)
    with pytest.raises(Exception) as info:
        synth(
            lambda stack: LocalChartRelease(
                stack,
                "c",
                LocalChartReleaseProps(release_name="c", namespace="default", chart=chart),
            )
        )
    assert "[stack/c]" in str(info.value) and message in str(info.value)


def test_two_apps_in_one_process_do_not_share_staged_charts(request):
    built = []
    for kind in ("A", "B"):  # construct both before synthesizing either
        chart = local_chart("c", f"kind: {kind}\n")
        stack = TerraformStack(CdkTesting.app(), "stack")
        LocalChartRelease(
            stack, "c", LocalChartReleaseProps(release_name="c", namespace="default", chart=chart)
        )
        built.append((stack, chart))
    for stack, chart in built:
        outdir = Path(CdkTesting.full_synth(stack))
        request.addfinalizer(lambda d=outdir: shutil.rmtree(d, ignore_errors=True))
        rel = json.loads((outdir / "stacks" / "stack" / "cdk.tf.json").read_text())["resource"][
            "helm_release"
        ]["c"]
        shipped = outdir / "stacks" / "stack" / rel["chart"]
        assert (shipped / "templates" / "000-object.yaml").read_text() == chart.files[
            "templates/000-object.yaml"
        ]


def test_provider_versions_are_pinned_and_documented():
    """The provider version is whatever the installed binding pins: the bindings must be pinned
    exactly, or a fresh install synthesizes another provider version than docs/synth.md says.
    Both distributions' pins (extras ``cdk`` and ``cdktn``) match gpucluster_cdk/constructs_lib/cdk.py and the docs."""
    import tomllib

    from gpucluster_cdk.constructs_lib import cdk

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    synth_md = (root / "docs" / "synth.md").read_text()
    for dist in cdk.DISTRIBUTIONS.values():
        pins = {d.split("==")[0]: d.split("==")[1] for d in extras[dist.extra] if "==" in d}
        for binding, version, source in (
            (dist.azurerm_binding, dist.azurerm_version, "hashicorp/azurerm"),
            (dist.helm_binding, dist.helm_version, "hashicorp/helm"),
        ):
            name, pinned = binding.split(" ")
            assert pins[name] == pinned, (dist.name, binding)
            assert f"| `{source}` | {version} | {binding} |" in synth_md, (dist.name, binding)
    assert (cdk.AZURERM_PROVIDER_VERSION, HELM_PROVIDER_VERSION) == (
        cdk.DIST.azurerm_version,
        cdk.DIST.helm_version,
    )


def test_invalid_release_name_never_writes_outside_the_staging_folder(tmp_path):
    chart = local_chart("c", "kind: A\n")
    staging = tmp_path / "run" / "staging"
    stack = TerraformStack(CdkTesting.app(context={"gpucluster:stagingDir": str(staging)}), "stack")
    with pytest.raises(Exception) as info:
        LocalChartRelease(
            stack,
            "c",
            LocalChartReleaseProps(release_name="../../escaped", namespace="default", chart=chart),
        )
        CdkTesting.synth(stack, True)
    assert "release name '../../escaped' must be lowercase letters" in str(info.value)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("Chart.yaml"))
    assert written and all(w.startswith("run/staging/invalid-") for w in written), written


@pytest.mark.parametrize(
    "value, expected",
    [
        (True, "bool"),
        (False, "bool"),
        (0, "number"),
        (3, "number"),
        (2.5, "number"),
        ("", "string"),
        ("x", "string"),
        (None, None),
        ([1], None),
        ({"a": 1}, None),
        ((), None),
    ],
)
def test_scalar_type_is_terraforms_variable_type(value, expected):
    """One rule (gpucluster.model.scalar_type) types both the core's set entries and the constructs'
    variables; a bool is not a number although Python says so."""
    assert scalar_type(value) == expected


ODD_IDS = [
    "gpu-operator-manifests",
    "my-chart",
    "chart",
    "Resource",
    "Default",
    "a.b c/d",
    "x" * 300,
    "ünï-cødé",
    "DefaultResource",
    "teardown_chart",
]


@pytest.mark.parametrize("construct_id", ODD_IDS)
def test_unique_id_is_the_kernels_logical_id_of_an_asset(tmp_path, construct_id):
    """The Python port of cdktf's makeUniqueId gives the logical id the kernel allocates (a binding
    or framework upgrade that changes the rule fails here), so asset paths need no round trip."""
    (tmp_path / "Chart.yaml").write_text("name: c\n")
    stack = TerraformStack(CdkTesting.app(), "stack")
    parent = Construct(stack, construct_id)
    asset = TerraformAsset(
        parent, ASSET_ID, path=str(tmp_path), type=AssetType.DIRECTORY, asset_hash="0123abcd"
    )
    assert (
        asset.path == f"assets/{unique_id([parent.node.id, ASSET_ID])}/0123abcd"
    )  # node.id: '/' becomes '--'


def test_local_chart_path_is_the_kernels_asset_path(monkeypatch):
    """chart_path computed in Python equals the kernel's TerraformAsset.path, for the first asset of
    the process (the one checked against the kernel) and the ones after; and when the check failed,
    every path is asked of the kernel."""
    stack = TerraformStack(CdkTesting.app(), "stack")
    for name in ("a-manifests", "b-teardown", "c-chart"):
        release = LocalChartRelease(
            stack,
            name,
            LocalChartReleaseProps(
                release_name=name, namespace="default", chart=local_chart(name, "kind: A\n")
            ),
        )
        assert release.chart_path == "./" + release.asset.path.rstrip("/")
    monkeypatch.setattr(helm_module, "_ASSET_PATH_RULE", [False])
    monkeypatch.setattr(helm_module, "unique_id", lambda components: "wrong")
    release = LocalChartRelease(
        stack,
        "d",
        LocalChartReleaseProps(
            release_name="d", namespace="default", chart=local_chart("d", "kind: A\n")
        ),
    )
    assert (
        release.chart_path == "./" + release.asset.path.rstrip("/")
        and "wrong" not in release.chart_path
    )
