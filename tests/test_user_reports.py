"""Problems a new user reported after following the README (messages, fixes, CLI behaviour)."""

from __future__ import annotations

import pytest

from gpucluster.errors import GpuclusterError
from gpucluster.model import ClusterSpec, Criteria, ExistingCluster, NodePool
from gpucluster.pipeline import build_plan
from gpucluster.scheduling import parse_scheduling


def spec(**kw) -> ClusterSpec:
    kw.setdefault("criteria", Criteria("aks", "h100", "ubuntu", "training"))
    return ClusterSpec(name="c1", source="g.yaml", **kw)


def refusal(cluster: ClusterSpec) -> GpuclusterError:
    with pytest.raises(GpuclusterError) as exc:
        build_plan(cluster)
    return exc.value


# --------------------------------------------------------------------------- AKS-WILDCARD-TOLERATION fix text


def test_wildcard_toleration_fix_for_an_existing_cluster_names_the_gpu_nodes_taint():
    err = refusal(spec(existing=ExistingCluster(kubeconfig_path="k")))
    (p,) = [p for p in err.problems if p.id == "AKS-WILDCARD-TOLERATION"]
    assert "derived from the GPU pools" not in p.fix  # an existing cluster has no pools to derive from
    assert "keyed toleration matching the taint of the GPU nodes" in p.fix
    assert "scheduling.accelerated.tolerations: ['nvidia.com/gpu:NoSchedule']" in p.fix


def test_wildcard_toleration_fix_with_pools_points_at_the_pool_default():
    wildcard = parse_scheduling({"accelerated": {"tolerations": [{"operator": "Exists"}]}}, file="g.yaml", cluster="c1")
    err = refusal(spec(scheduling=wildcard))
    (p,) = [p for p in err.problems if p.id == "AKS-WILDCARD-TOLERATION"]
    assert "remove scheduling.accelerated.tolerations to use the default derived from the GPU pool taints" in p.fix
    assert "'nvidia.com/gpu:NoSchedule'" in p.fix
