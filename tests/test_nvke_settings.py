"""NVKE settings parsing (pure): defaults from the seed, and every input refusal."""

from __future__ import annotations

import pytest

from gpucluster.sdk import GpuclusterError
from gpucluster_nvke.settings import (
    default_rail_subnet,
    parse_settings,
    version_less,
    version_tuple,
)

ROOTS = ["0000:03:00.0", "0002:03:00.0", "0010:03:00.0", "0012:03:00.0"]


def rails(names=("mlx5_0", "mlx5_1", "mlx5_3", "mlx5_4")):
    return [{"name": n, "rootDevice": r} for n, r in zip(names, ROOTS, strict=False)]


def err(raw) -> GpuclusterError:
    with pytest.raises(GpuclusterError) as exc:
        parse_settings(raw, file="clusters.yaml", cluster="nvke-a")
    return exc.value


def test_default_rail_addresses_and_names():
    s = parse_settings({"rails": rails()}, file="f", cluster="c")
    assert [r.name for r in s.rails] == ["mlx5_0", "mlx5_1", "mlx5_3", "mlx5_4"]
    assert [r.subnet for r in s.rails] == [
        "10.255.0.0/22",
        "10.255.4.0/22",
        "10.255.8.0/22",
        "10.255.12.0/22",
    ]
    assert [r.gateway for r in s.rails] == ["10.255.0.1", "10.255.4.1", "10.255.8.1", "10.255.12.1"]
    assert [r.resource_name for r in s.rails] == [f"sriov_resource_rail_{i}" for i in range(4)]
    assert [r.network_name for r in s.rails] == [f"sriov-network-rail-{i}" for i in range(4)]
    assert (s.firmware_num_vfs, s.num_vfs, s.pod_network) == (16, 16, "192.168.0.0/16")
    assert s.network_namespace == "default"
    assert s.sriov_node_selector == {"feature.node.kubernetes.io/rdma.available": "true"}
    assert s.rdma_modules_enabled is True and s.rdma_modules_auto_taint is None


def test_default_rail_names_need_root_devices():
    e = err(None)
    text = str(e)
    assert "key=settings.rails[0].rootDevice" in text
    assert "file=clusters.yaml" in text and "cluster=nvke-a" in text
    assert "rail 0 (mlx5_0) has no rootDevice" in text
    assert "/sys/class/infiniband/mlx5_0/device" in text


def test_pf_name_alone_selects_a_rail():
    s = parse_settings({"rails": [{"name": "mlx5_0", "pfName": "ibp3s0"}]})
    assert s.rails[0].root_device is None and s.rails[0].pf_name == "ibp3s0"


@pytest.mark.parametrize(
    "raw, key, fragment",
    [
        ({"rails": []}, "settings.rails", "non-empty list"),
        (
            {"rails": [{"name": "mlx5_0", "rootDevice": "03:00.0"}]},
            "settings.rails[0].rootDevice",
            "is not a PCI address",
        ),
        (
            {"rails": [{"name": "mlx5_0", "rootDevice": "0000:03:00.0", "pci": 1}]},
            "settings.rails[0].pci",
            "unknown key",
        ),
        (
            {"rails": [{"name": "mlx5 0", "rootDevice": "0000:03:00.0"}]},
            "settings.rails[0].name",
            "not an RDMA device name",
        ),
        (
            {
                "rails": [
                    {"name": "mlx5_0", "rootDevice": "0000:03:00.0", "subnet": "10.255.0.1/22"}
                ]
            },
            "settings.rails[0].subnet",
            "not a network CIDR",
        ),
        ({"rails": rails()[:1] + rails()[:1]}, "settings.rails", "rail name given twice: mlx5_0"),
        ({"rails": rails(), "numVfs": "16"}, "settings.numVfs", "must be an integer"),
        ({"rails": rails(), "numVfs": 0}, "settings.numVfs", "at least 1"),
        (
            {"rails": rails(), "firmwareNumVfs": True},
            "settings.firmwareNumVfs",
            "must be an integer",
        ),
        (
            {"rails": rails(), "podNetwork": "192.168.0.0/33"},
            "settings.podNetwork",
            "not a network CIDR",
        ),
        (
            {"rails": rails(), "networkNamespace": "Default"},
            "settings.networkNamespace",
            "not a namespace name",
        ),
        (
            {"rails": rails(), "sriovNodeSelector": {}},
            "settings.sriovNodeSelector",
            "must not be empty",
        ),
        (
            {"rails": rails(), "rdmaModules": {"enabled": "no"}},
            "settings.rdmaModules.enabled",
            "true or false",
        ),
        (
            {"rails": rails(), "rdmaModules": {"taint": True}},
            "settings.rdmaModules.taint",
            "unknown key",
        ),
        (
            {"rails": rails(), "rdmaModules": {"tolerations": [{"operator": "In"}]}},
            "settings.rdmaModules.tolerations[0].operator",
            "unknown operator",
        ),
        (
            {"rails": rails(), "teardown": {"timeoutSeconds": 5}},
            "settings.teardown.timeoutSeconds",
            "at least 60",
        ),
        (
            {"rails": rails(), "nicClusterPolicy": []},
            "settings.nicClusterPolicy",
            "must be a mapping",
        ),
    ],
)
def test_refusals_name_file_cluster_and_key(raw, key, fragment):
    text = str(err(raw))
    assert f"key={key}:" in text, text
    assert fragment in text, text
    assert "file=clusters.yaml" in text and "cluster=nvke-a" in text


def test_unknown_top_level_settings_are_refused_by_the_core():
    """Top-level keys are checked once, by the core, against ``Platform.settings``."""
    from gpucluster.sdk import ClusterSpec, Criteria
    from gpucluster.sdk.testing import registered
    from gpucluster_nvke.settings import SETTINGS_KEYS

    spec = ClusterSpec(
        name="nvke-a",
        criteria=Criteria(service="nvke", accelerator="gb200", os="ubuntu", intent="training"),
        source="clusters.yaml",
        settings={"railz": [], "rails": rails()},
    )
    with registered() as kit, pytest.raises(GpuclusterError) as exc:
        kit.prepare(spec)
    text = str(exc.value)
    assert (
        "file=clusters.yaml cluster=nvke-a key=settings.railz: unknown setting 'railz' for service nvke"
        in text
    )
    assert f"(allowed: {', '.join(SETTINGS_KEYS)}, gateImage, validate)" in text


def test_settings_must_be_a_mapping():
    assert "must be a mapping" in str(err(["rails"]))


def test_explicit_subnets_and_selector():
    s = parse_settings(
        {
            "rails": [{"name": "mlx5_0", "rootDevice": "0000:03:00.0", "subnet": "172.30.0.0/24"}],
            "sriovNodeSelector": {"example.com/ib": True},
            "perNodeBlockSize": 32,
        }
    )
    assert s.rails[0].subnet == "172.30.0.0/24" and s.rails[0].gateway == "172.30.0.1"
    assert s.sriov_node_selector == {"example.com/ib": "true"}
    assert s.per_node_block_size == 32


def test_default_rail_subnet_bounds():
    assert default_rail_subnet(0) == "10.255.0.0/22"
    assert default_rail_subnet(63) == "10.255.252.0/22"
    with pytest.raises(ValueError):
        default_rail_subnet(64)


def test_versions():
    assert version_tuple("v0.5.1") == (0, 5, 1)
    assert version_tuple("0.5.1-rc.1") == (0, 5, 1)
    assert version_less("0.5.0", "0.5.1") and version_less("v0.4.9", "0.5.1")
    assert not version_less("0.5.1", "0.5.1") and not version_less("0.10.0", "0.5.1")
    assert version_less("1.33", "1.34") and not version_less("1.34", "1.34.0")
    with pytest.raises(ValueError):
        version_tuple("latest")
