"""The runtime stack's Helm provider block for each ClusterConnection auth shape
(gpucluster_cdk.stacks.runtime.connect_helm_provider): exec (kubelogin), token, client certificate."""

from __future__ import annotations

import json

import pytest

from gpucluster.sdk import ClusterConnection, ExecAuth

EXEC = ExecAuth(
    command="kubelogin", args=("get-token", "--login", "azurecli"), env={"B": "2", "A": "1"}
)


@pytest.mark.parametrize(
    "connection, expected",
    [
        (
            ClusterConnection(host="h", cluster_ca_certificate="ca", exec=EXEC),
            {
                "host": "h",
                "cluster_ca_certificate": "ca",
                "exec": {
                    "api_version": "client.authentication.k8s.io/v1beta1",
                    "command": "kubelogin",
                    "args": ["get-token", "--login", "azurecli"],
                    "env": {"A": "1", "B": "2"},
                },
            },
        ),
        (
            ClusterConnection(host="h", cluster_ca_certificate="ca", token="tok"),
            {"host": "h", "cluster_ca_certificate": "ca", "token": "tok"},
        ),
        (
            ClusterConnection(
                host="h", cluster_ca_certificate="ca", client_certificate="c", client_key="k"
            ),
            {
                "host": "h",
                "cluster_ca_certificate": "ca",
                "client_certificate": "c",
                "client_key": "k",
            },
        ),
    ],
)
def test_helm_provider_renders_each_auth_shape(connection, expected):
    from gpucluster_cdk.constructs_lib.cdk import TerraformStack, Testing
    from gpucluster_cdk.stacks.runtime import connect_helm_provider

    stack = TerraformStack(Testing.app(), "s")
    connect_helm_provider(stack, connection)
    (provider,) = json.loads(Testing.synth(stack))["provider"]["helm"]
    assert provider["kubernetes"] == expected
