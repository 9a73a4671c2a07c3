"""``backend: {type: azurerm}``: an Azure Storage account holds each stack's state blob.

* the cluster file: accepted forms, the normalized mapping, and every refusal as one line with
  exit 2 from ``gpucluster plan`` (credentials are never accepted);
* the stacks: each stack's ``terraform.backend.azurerm`` block with its own key, the runtime
  stack reading the cluster stack's outputs through ``terraform_remote_state`` with backend
  ``azurerm``, deterministic output, no secret anywhere;
* Terraform itself accepts the synthesized keys: ``terraform init`` of the backend block alone
  (no provider is needed) gets past the configuration check and stops only at signing in, and
  ``terraform validate`` of the remote-state data source alone (the built-in ``terraform``
  provider, nothing downloaded) passes; a key Terraform does not know fails both (the control).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from _support import AKS_CLUSTER, load_cluster_text, tree, write_cluster_file
from plan_factory import make_plan

from gpucluster.cli import main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import backends
from gpucluster_cdk import stacks

CLUSTER = AKS_CLUSTER
AZ = "{type: azurerm, storageAccountName: gpustate01, containerName: tfstate}"
SUB = "0b1f6471-1bf0-4dda-aec3-111122223333"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


write = write_cluster_file
load = load_cluster_text


# --------------------------------------------------------------------------- the cluster file


def test_minimal_azurerm_backend_defaults_to_entra_id_auth(tmp_path):
    a, b = load(
        tmp_path,
        f"backend: {AZ}\nclusters:\n" + CLUSTER.format(name="a") + CLUSTER.format(name="b"),
    )
    assert (
        a.backend
        == b.backend
        == {
            "type": "azurerm",
            "storageAccountName": "gpustate01",
            "containerName": "tfstate",
            "keyPrefix": "",
            "useAzureadAuth": True,
            "resourceGroupName": None,
            "subscriptionId": None,
            "tenantId": None,
            "useOidc": None,
        }
    )
    assert [backends.state_key(b.backend, f"b{s}") for s in backends.STACK_SUFFIXES] == [
        "b-cluster.tfstate",
        "b-runtime.tfstate",
    ]


def test_every_optional_key(tmp_path):
    (spec,) = load(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="a")
        + (
            "    backend:\n      type: azurerm\n      storageAccountName: gpustate01\n      containerName: tf-state-2\n"
            "      keyPrefix: gpucluster/prod/\n      resourceGroupName: rg-tf.state(1)\n"
            f"      subscriptionId: {SUB}\n      tenantId: {TENANT}\n      useOidc: true\n      useAzureadAuth: false\n"
        ),
    )
    assert spec.backend == {
        "type": "azurerm",
        "storageAccountName": "gpustate01",
        "containerName": "tf-state-2",
        "keyPrefix": "gpucluster/prod/",
        "useAzureadAuth": False,
        "resourceGroupName": "rg-tf.state(1)",
        "subscriptionId": SUB,
        "tenantId": TENANT,
        "useOidc": True,
    }
    assert backends.state_key(spec.backend, "a-runtime") == "gpucluster/prod/a-runtime.tfstate"


def az(extra: str) -> str:
    return "{type: azurerm, storageAccountName: gpustate01, containerName: tfstate, " + extra + "}"


REFUSALS = [
    (
        "{type: azurerm, containerName: tfstate}",
        "key=clusters[0].backend.storageAccountName: missing key 'clusters[0].backend.storageAccountName' "
        "(required for backend type 'azurerm')",
    ),
    (
        "{type: azurerm, storageAccountName: gpustate01}",
        "key=clusters[0].backend.containerName: missing key 'clusters[0].backend.containerName' (required for backend type 'azurerm')",
    ),
    (
        "{type: azurerm, storageAccountName: GpuState, containerName: tfstate}",
        "key=clusters[0].backend.storageAccountName: invalid storageAccountName 'GpuState' (allowed: 3 to 24 lowercase letters and digits",
    ),
    (
        "{type: azurerm, storageAccountName: ab, containerName: tfstate}",
        "invalid storageAccountName 'ab'",
    ),
    (
        "{type: azurerm, storageAccountName: " + "a" * 25 + ", containerName: tfstate}",
        "invalid storageAccountName 'aaaa",
    ),
    (
        "{type: azurerm, storageAccountName: gpu-state, containerName: tfstate}",
        "invalid storageAccountName 'gpu-state'",
    ),
    (
        "{type: azurerm, storageAccountName: gpustate01, containerName: tf--state}",
        "key=clusters[0].backend.containerName: invalid containerName 'tf--state' (allowed: 3 to 63 lowercase letters, digits and '-'",
    ),
    (
        "{type: azurerm, storageAccountName: gpustate01, containerName: -tfstate}",
        "invalid containerName '-tfstate'",
    ),
    (
        "{type: azurerm, storageAccountName: gpustate01, containerName: TFState}",
        "invalid containerName 'TFState'",
    ),
    (
        "{type: azurerm, storageAccountName: gpustate01, containerName: " + "c" * 64 + "}",
        "invalid containerName 'cccc",
    ),
    (
        '{type: azurerm, storageAccountName: gpustate01, containerName: "tfstate\\n"}',
        "invalid containerName 'tfstate\\n'",
    ),
    (
        az("keyPrefix: /abs/"),
        "key=clusters[0].backend.keyPrefix: invalid keyPrefix '/abs/' (allowed: letters, digits",
    ),
    (az("keyPrefix: 'a//b'"), "invalid keyPrefix 'a//b'"),
    (az("keyPrefix: a/../b/"), "invalid keyPrefix 'a/../b/'"),
    (az("keyPrefix: 'a b'"), "invalid keyPrefix 'a b'"),
    (
        az("resourceGroupName: rg."),
        "key=clusters[0].backend.resourceGroupName: invalid resourceGroupName 'rg.'",
    ),
    (
        az("subscriptionId: my-sub"),
        "key=clusters[0].backend.subscriptionId: invalid subscriptionId 'my-sub' (allowed: a GUID",
    ),
    (
        az("tenantId: 42"),
        "'clusters[0].backend.tenantId' must be a non-empty string, not an integer",
    ),
    (
        az("useOidc: 'yes'"),
        "key=clusters[0].backend.useOidc: 'clusters[0].backend.useOidc' must be true or false, not a string",
    ),
    (
        az("useAzureadAuth: 1"),
        "'clusters[0].backend.useAzureadAuth' must be true or false, not an integer",
    ),
    (
        az("key: state.tfstate"),
        "key=clusters[0].backend.key: unknown key 'key' for backend type 'azurerm' (allowed: type, "
        "storageAccountName, containerName, keyPrefix, resourceGroupName, subscriptionId, tenantId, "
        "useAzureadAuth, useOidc)",
    ),
    (az("organization: acme"), "unknown key 'organization' for backend type 'azurerm'"),
]


@pytest.mark.parametrize(
    "backend, expected", REFUSALS, ids=[r[1].split(": ", 1)[-1][:50] for r in REFUSALS]
)
def test_plan_refuses_with_one_line_and_exit_2(tmp_path, capsys, backend, expected):
    path = write(
        tmp_path, "clusters:\n" + CLUSTER.format(name="train") + f"    backend: {backend}\n"
    )
    assert main(["plan", "--config", str(path)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error[input] file={path} cluster=train "), (
        captured.err
    )
    assert expected in lines[0], lines[0]
    assert captured.out == ""


@pytest.mark.parametrize(
    "secret",
    [
        "accessKey",
        "sasToken",
        "clientSecret",
        "access_key",
        "sas_token",
        "oidcToken",
        "clientCertificatePassword",
        "password",
    ],
)
def test_credentials_are_refused_pointing_at_the_environment_and_oidc(tmp_path, capsys, secret):
    path = write(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="train")
        + f"    backend: {az(secret + ': s3cr3tValue==')}\n",
    )
    assert main(["plan", "--config", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        f"key=clusters[0].backend.{secret}: 'clusters[0].backend.{secret}': credentials do not belong in the cluster file"
        in line
    )
    assert (
        "ARM_ACCESS_KEY" in line
        and "ARM_SAS_TOKEN" in line
        and "useOidc: true" in line
        and "az login" in line
    )
    assert "s3cr3t" not in line  # the secret is not echoed


def test_top_level_refusal_names_the_top_level_key(tmp_path):
    with pytest.raises(GpuclusterError) as info:
        load(
            tmp_path,
            "backend: {type: azurerm, storageAccountName: x, containerName: tfstate}\nclusters:\n"
            + CLUSTER.format(name="a"),
        )
    assert " key=backend.storageAccountName: invalid storageAccountName 'x'" in info.value.render()
    assert " cluster=" not in info.value.render()


def test_colliding_state_blobs_are_refused_and_other_containers_are_fine(tmp_path):
    with pytest.raises(GpuclusterError) as info:
        load(
            tmp_path,
            "clusters:\n"
            + CLUSTER.format(name="a-b")
            + f"    backend: {az('keyPrefix: x/')}\n"
            + CLUSTER.format(name="b")
            + f"    backend: {az('keyPrefix: x/a-')}\n",
        )
    assert (
        "cluster=b key=clusters[1].backend.keyPrefix: state blob 'x/a-b-cluster.tfstate' in container 'tfstate' of "
        "storage account 'gpustate01' is used by cluster 'a-b' too"
    ) in info.value.render()
    specs = load(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="a-b")
        + f"    backend: {az('keyPrefix: x/')}\n"
        + CLUSTER.format(name="b")
        + "    backend: {type: azurerm, storageAccountName: gpustate01, "
        "containerName: other, keyPrefix: x/a-}\n",
    )
    assert [s.backend["containerName"] for s in specs] == ["tfstate", "other"]


def test_too_long_blob_name_names_the_cluster(tmp_path):
    prefix = "p/" * 496  # 992 characters + 'a-cluster.tfstate' (17) + 16 = 1025
    with pytest.raises(GpuclusterError) as info:
        load(
            tmp_path,
            f"backend: {az('keyPrefix: ' + prefix + 'q' * 16)}\nclusters:\n"
            + CLUSTER.format(name="a"),
        )
    assert "cluster=a key=backend.keyPrefix: state blob name 'p/p/" in info.value.render()
    assert (
        "is 1025 characters; Azure allows at most 1024 fix: shorten keyPrefix"
        in info.value.render()
    )


# --------------------------------------------------------------------------- the stacks


STATE = backends.parse_backend(
    {
        "type": "azurerm",
        "storageAccountName": "gpustate01",
        "containerName": "tfstate",
        "keyPrefix": "gpucluster/",
        "resourceGroupName": "rg-tfstate",
        "subscriptionId": SUB,
    },
    file="t",
    cluster=None,
    key="backend",
)
OIDC = backends.parse_backend(
    {
        "type": "azurerm",
        "storageAccountName": "edgestate",
        "containerName": "state",
        "tenantId": TENANT,
        "useOidc": True,
    },
    file="t",
    cluster=None,
    key="backend",
)


def azurerm_plans():
    lab = make_plan("lab")
    lab.cluster.backend = STATE
    edge = make_plan("edge")
    edge.cluster.backend = OIDC
    return [lab, edge]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("azurerm") / "cdktf.out"
    assert stacks.synth(azurerm_plans(), out) == [
        "edge-cluster",
        "edge-runtime",
        "lab-cluster",
        "lab-runtime",
    ]
    return out


def stack_json(outdir: Path, stack: str) -> dict:
    return json.loads((outdir / "stacks" / stack / "cdk.tf.json").read_text())


LAB = {
    "storage_account_name": "gpustate01",
    "container_name": "tfstate",
    "use_azuread_auth": True,
    "resource_group_name": "rg-tfstate",
    "subscription_id": SUB,
}
EDGE = {
    "storage_account_name": "edgestate",
    "container_name": "state",
    "use_azuread_auth": True,
    "tenant_id": TENANT,
    "use_oidc": True,
}


def test_each_stack_has_its_own_state_blob(outdir):
    for stack in ("lab-cluster", "lab-runtime"):
        terraform = stack_json(outdir, stack)["terraform"]
        assert terraform["backend"] == {"azurerm": {**LAB, "key": f"gpucluster/{stack}.tfstate"}}
        assert "cloud" not in terraform and terraform["required_version"] == ">= 1.4"
    assert stack_json(outdir, "edge-cluster")["terraform"]["backend"] == {
        "azurerm": {**EDGE, "key": "edge-cluster.tfstate"}
    }


def test_runtime_reads_cluster_outputs_through_azurerm_remote_state(outdir):
    runtime = stack_json(outdir, "lab-runtime")
    assert runtime["data"]["terraform_remote_state"] == {
        "cross-stack-reference-input-lab-cluster": {
            "backend": "azurerm",
            "config": {**LAB, "key": "gpucluster/lab-cluster.tfstate"},
            "workspace": "${terraform.workspace}",
        }
    }
    (provider,) = runtime["provider"]["helm"]
    source = "data.terraform_remote_state.cross-stack-reference-input-lab-cluster.outputs.cross-stack-output-"
    assert provider["kubernetes"]["host"].startswith("${" + source)
    assert (
        provider["kubernetes"]["exec"]["command"] == "kubelogin"
    )  # Entra ID: no credential among the outputs read
    outputs = stack_json(outdir, "lab-cluster")["output"]
    read = {
        provider["kubernetes"][k].split(".outputs.", 1)[1].rstrip("})")
        for k in ("host", "cluster_ca_certificate")
    }
    assert read <= set(outputs)  # outputs only: nothing else of the cluster state is read
    assert json.loads((outdir / "manifest.json").read_text())["stacks"]["lab-runtime"][
        "dependencies"
    ] == ["lab-cluster"]


def test_no_credential_key_in_the_output(outdir):
    for rel, data in tree(outdir).items():
        for word in (
            b'"access_key"',
            b'"sas_token"',
            b'"client_secret"',
            b'"oidc_token"',
            b'"token"',
        ):
            assert word not in data, (rel, word)


def test_output_is_deterministic(outdir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    node = shutil.which("node")
    assert node is not None and not (Path(node).parent / "terraform").exists()
    monkeypatch.setenv(  # no Terraform CLI is needed to synthesize azurerm (unlike cloud); Node.js is
        "PATH", f"{tmp_path}{os.pathsep}{Path(node).parent}"
    )
    stacks.synth(azurerm_plans(), "again/cdktf.out")
    assert tree(tmp_path / "again" / "cdktf.out") == tree(outdir)


# --------------------------------------------------------------------------- Terraform accepts the keys

TERRAFORM = shutil.which("terraform")
CONFIG_ERRORS = (
    "Extraneous JSON object property",
    "Unsupported argument",
    "Invalid backend configuration",
    "unexpected attribute",
    "Missing required argument",
)


def terraform(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARM_", "TF_", "AZURE_"))}
    env.update(
        TF_CLI_CONFIG_FILE=os.devnull,
        CHECKPOINT_DISABLE="1",
        TF_IN_AUTOMATION="1",
        PATH="/usr/bin:/bin:" + str(Path(TERRAFORM).parent),
        HOME=str(folder),
    )
    return subprocess.run(
        [TERRAFORM, *args, "-no-color"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def backend_only(folder: Path, block: dict) -> subprocess.CompletedProcess:
    folder.mkdir()
    (folder / "main.tf.json").write_text(json.dumps({"terraform": {"backend": block}}))
    return terraform(folder, "init", "-input=false")


@pytest.mark.skipif(TERRAFORM is None, reason="needs the Terraform CLI on PATH")
def test_terraform_init_accepts_the_backend_block_and_stops_only_at_signing_in(outdir, tmp_path):
    block = stack_json(outdir, "lab-runtime")["terraform"]["backend"]
    run = backend_only(tmp_path / "ok", block)
    text = run.stdout + run.stderr
    assert run.returncode != 0 and "Initializing the backend..." in text
    assert not [e for e in CONFIG_ERRORS if e in text], text
    assert "authorizer" in text or "Azure CLI" in text or "credentials" in text.lower(), (
        text
    )  # past the key check
    control = backend_only(
        tmp_path / "control", {"azurerm": {**block["azurerm"], "access_key_name": "x"}}
    )
    assert (
        "Extraneous JSON object property" in control.stdout + control.stderr
    )  # the check that the first run passed


@pytest.mark.skipif(TERRAFORM is None, reason="needs the Terraform CLI on PATH")
def test_terraform_validate_accepts_the_remote_state_data_source(outdir, tmp_path):
    data = stack_json(outdir, "lab-runtime")["data"]

    def validate(folder: Path, doc: dict) -> subprocess.CompletedProcess:
        folder.mkdir()
        (folder / "main.tf.json").write_text(
            json.dumps(
                {
                    "data": doc,
                    "output": {
                        "o": {
                            "value": "${data.terraform_remote_state.cross-stack-reference-input-lab-cluster.outputs}"
                        }
                    },
                }
            )
        )
        init = terraform(folder, "init", "-backend=false", "-input=false")
        assert init.returncode == 0, init.stdout + init.stderr
        return terraform(folder, "validate")

    run = validate(tmp_path / "ok", data)
    assert run.returncode == 0 and "The configuration is valid" in run.stdout, (
        run.stdout + run.stderr
    )
    (name,) = data["terraform_remote_state"]
    bad = json.loads(json.dumps(data))
    bad["terraform_remote_state"][name]["config"]["use_microsoft_graph"] = (
        True  # a key Terraform 1.3+ removed
    )
    control = validate(tmp_path / "control", bad)
    assert control.returncode != 0 and 'unexpected attribute "use_microsoft_graph"' in " ".join(
        (control.stdout + control.stderr).split()
    )
