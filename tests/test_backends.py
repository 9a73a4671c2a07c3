"""Cluster-file ``backend`` key (gpucluster/inputs/backends.py): accepted forms and every refusal.

Pure Python: no cdktf. The stacks side (cloud block, cross-stack remote state) is in
tests/test_backend_stacks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError
from gpucluster.inputs import backends, config

CLUSTER = "  - name: {name}\n    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}\n"
CLOUD = "{type: cloud, organization: acme, workspacePrefix: gpu-}"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "gpucluster.yaml"
    path.write_text(text)
    return str(path)


def load(tmp_path: Path, text: str):
    return config.load_clusters(write(tmp_path, text), env={})


def error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(GpuclusterError) as info:
        config.load_clusters(path, env={})
    rendered = info.value.render()
    assert rendered.startswith(f"error[input] file={path} ")
    return rendered


def test_no_backend_and_explicit_local_give_the_same_spec(tmp_path):
    (plain,) = load(tmp_path, "clusters:\n" + CLUSTER.format(name="a"))
    (local_top,) = load(tmp_path, "backend: {type: local}\nclusters:\n" + CLUSTER.format(name="a"))
    (local_cluster,) = load(
        tmp_path, "clusters:\n" + CLUSTER.format(name="a") + "    backend: {type: local}\n"
    )
    assert plain.backend is None
    assert plain == local_top == local_cluster  # so the stacks are exactly today's local ones


def test_top_level_cloud_default_applies_to_every_cluster(tmp_path):
    specs = load(
        tmp_path,
        f"backend: {CLOUD}\nclusters:\n" + CLUSTER.format(name="a") + CLUSTER.format(name="b"),
    )
    expected = {
        "type": "cloud",
        "organization": "acme",
        "workspacePrefix": "gpu-",
        "hostname": "app.terraform.io",
        "project": None,
    }
    assert [s.backend for s in specs] == [expected, expected]
    assert backends.workspace_names(specs[1].backend, "b") == ["gpu-b-cluster", "gpu-b-runtime"]


def test_cluster_backend_replaces_the_default(tmp_path):
    text = (
        f"backend: {CLOUD}\nclusters:\n"
        + CLUSTER.format(name="a")
        + "    backend: {type: local}\n"
        + CLUSTER.format(name="b")
        + "    backend:\n      type: cloud\n      organization: other.org\n      workspacePrefix: ''\n"
        + "      hostname: tfe.example.com:8443\n      project: GPU Platform\n"
        + CLUSTER.format(name="c")
    )
    a, b, c = load(tmp_path, text)
    assert a.backend is None
    assert b.backend == {
        "type": "cloud",
        "organization": "other.org",
        "workspacePrefix": "",
        "hostname": "tfe.example.com:8443",
        "project": "GPU Platform",
    }
    assert c.backend["organization"] == "acme" and c.backend["workspacePrefix"] == "gpu-"


def test_longest_allowed_workspace_name(tmp_path):
    name = "a" * 40  # the longest cluster name
    prefix = "p" * (90 - 40 - len("-cluster"))
    (spec,) = load(
        tmp_path,
        f"backend: {{type: cloud, organization: acme, workspacePrefix: {prefix}}}\nclusters:\n"
        + CLUSTER.format(name=name),
    )
    assert [len(n) for n in backends.workspace_names(spec.backend, name)] == [90, 90]


PER_CLUSTER = [
    ("[cloud]", "key=clusters[0].backend: 'clusters[0].backend' must be a mapping, not a list"),
    (
        "{organization: acme}",
        "key=clusters[0].backend.type: missing key 'clusters[0].backend.type' (allowed: local, cloud, azurerm)",
    ),
    (
        "{type: remote, organization: acme}",
        "key=clusters[0].backend.type: unknown backend type 'remote' (allowed: local, cloud, azurerm)",
    ),
    (
        "{type: local, path: x.tfstate}",
        "key=clusters[0].backend.path: unknown key 'path' for backend type 'local' (allowed: type)",
    ),
    (
        "{type: cloud, workspacePrefix: gpu-}",
        "key=clusters[0].backend.organization: missing key 'clusters[0].backend.organization' (required for backend type 'cloud')",
    ),
    (
        "{type: cloud, organization: acme}",
        "key=clusters[0].backend.workspacePrefix: missing key 'clusters[0].backend.workspacePrefix' (required for backend type 'cloud')",
    ),
    (
        "{type: cloud, organization: 42, workspacePrefix: gpu-}",
        "key=clusters[0].backend.organization: 'clusters[0].backend.organization' must be a non-empty string, not an integer",
    ),
    (
        "{type: cloud, organization: 'acme corp', workspacePrefix: gpu-}",
        "key=clusters[0].backend.organization: invalid organization name 'acme corp' (allowed: letters, digits, '-', '_' and '.')",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu/}",
        "key=clusters[0].backend.workspacePrefix: invalid workspacePrefix 'gpu/': workspace names are <workspacePrefix><stack name> "
        "(allowed: letters, digits, '-' and '_' (HCP Terraform workspace names))",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: 'gpu.'}",
        "invalid workspacePrefix 'gpu.'",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu-, hostname: 'https://app.terraform.io'}",
        "key=clusters[0].backend.hostname: invalid hostname 'https://app.terraform.io' (allowed: a host name with an optional :port",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu-, project: ' x'}",
        "key=clusters[0].backend.project: invalid project name ' x' (allowed: 3 to 40 characters",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu-, project: " + "p" * 41 + "}",
        "invalid project name 'ppp",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu-, project: [a]}",
        "'clusters[0].backend.project' must be a non-empty string, not a list",
    ),
    (
        "{type: cloud, organization: acme, workspacePrefix: gpu-, workspaces: {name: x}}",
        "key=clusters[0].backend.workspaces: unknown key 'workspaces' for backend type 'cloud' "
        "(allowed: type, organization, workspacePrefix, hostname, project)",
    ),
]


@pytest.mark.parametrize("backend, expected", PER_CLUSTER, ids=[p[0][:40] for p in PER_CLUSTER])
def test_per_cluster_refusals_name_file_cluster_and_key(tmp_path, backend, expected):
    text = error(
        tmp_path, "clusters:\n" + CLUSTER.format(name="train") + f"    backend: {backend}\n"
    )
    assert " cluster=train " in text
    assert expected in text


def test_token_in_the_file_is_refused_with_where_credentials_come_from(tmp_path):
    text = error(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="train")
        + "    backend: {type: cloud, organization: acme, workspacePrefix: g-, token: abc.atlasv1.xyz}\n",
    )
    assert (
        "cluster=train key=clusters[0].backend.token: 'clusters[0].backend.token': credentials do not belong in the cluster file"
        in text
    )
    assert "terraform login" in text and "TF_TOKEN_app_terraform_io" in text
    assert "abc.atlasv1" not in text  # the secret is not echoed


def test_top_level_refusal_names_the_top_level_key(tmp_path):
    text = error(tmp_path, "backend: {type: s3}\nclusters:\n" + CLUSTER.format(name="a"))
    assert "key=backend.type: unknown backend type 's3' (allowed: local, cloud, azurerm)" in text
    text = error(tmp_path, "backend: cloud\nclusters:\n" + CLUSTER.format(name="a"))
    assert "key=backend: 'backend' must be a mapping, not a string" in text


def test_too_long_workspace_name_names_the_cluster(tmp_path):
    name = "a" * 40
    prefix = "p" * (90 - 40 - len("-cluster") + 1)
    text = error(
        tmp_path,
        f"backend: {{type: cloud, organization: acme, workspacePrefix: {prefix}}}\nclusters:\n"
        + CLUSTER.format(name="short")
        + CLUSTER.format(name=name),
    )
    assert (
        f"cluster={name} key=backend.workspacePrefix: workspace name '{prefix}{name}-cluster' is 91 characters; "
        "HCP Terraform allows at most 90" in text
    )
    assert "fix: shorten workspacePrefix or the cluster name" in text


def test_colliding_workspaces_are_refused(tmp_path):
    text = error(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="a-b")
        + "    backend: {type: cloud, organization: acme, workspacePrefix: ''}\n"
        + CLUSTER.format(name="b")
        + "    backend: {type: cloud, organization: acme, workspacePrefix: a-}\n",
    )
    assert (
        "cluster=b key=clusters[1].backend.workspacePrefix: workspace 'a-b-cluster' of organization 'acme' "
        "is used by cluster 'a-b' too"
    ) in text


def test_same_workspace_names_in_other_organizations_are_fine(tmp_path):
    specs = load(
        tmp_path,
        "clusters:\n"
        + CLUSTER.format(name="a-b")
        + "    backend: {type: cloud, organization: one, workspacePrefix: ''}\n"
        + CLUSTER.format(name="b")
        + "    backend: {type: cloud, organization: two, workspacePrefix: a-}\n",
    )
    assert [s.backend["organization"] for s in specs] == ["one", "two"]


def test_main_exits_2_on_a_bad_backend_and_writes_nothing(tmp_path, monkeypatch, capsys):
    import main

    bad = write(
        tmp_path,
        "backend: {type: cloud, workspacePrefix: gpu-}\nclusters:\n" + CLUSTER.format(name="a"),
    )
    out = tmp_path / "cdktf.out"
    monkeypatch.setenv("GPUCLUSTER_CONFIG", bad)
    monkeypatch.setenv("CDKTF_OUTDIR", str(out))
    assert main.main([]) == EXIT_INVALID_INPUT == 2
    err = capsys.readouterr().err
    assert (
        f"error[input] file={bad} key=backend.organization: missing key 'backend.organization'"
        in err
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpucluster.yaml"]
