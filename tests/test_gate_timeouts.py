"""Gate wait budgets are decided once: the kind defaults (``gates.DEFAULT_TIMEOUTS`` and
``GateSpec.create_timeout_seconds``), the ClusterPolicy budget every built-in platform uses
(``CLUSTERPOLICY_DEFAULT_TIMEOUT``, the default of ``clusterpolicy_ready``), and the Helm margin;
docs/gates.md states them as the code does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpucluster.charts.gates import DEFAULT_TIMEOUTS, GATE_KINDS, effective_timeout
from gpucluster.charts.graph import GATE_TIMEOUT_MARGIN_SECONDS
from gpucluster.model import GateSpec
from gpucluster.sdk import clusterpolicy_ready
from gpucluster.sdk.gates import CLUSTERPOLICY_DEFAULT_TIMEOUT, GATE_CLUSTERPOLICY_READY
from gpucluster.sdk.testing import registered

DOCS = Path(__file__).resolve().parents[1] / "docs" / "gates.md"
EXISTING = {"kubeconfig": "~/.kube/config"}
CLUSTERS = {
    "aks": {
        "name": "a1",
        "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
    },
    "oke": {
        "name": "o1",
        "criteria": {"service": "oke", "accelerator": "a100", "os": "ubuntu", "intent": "training"},
        "profile": {"gpuStack": "operator-managed"},
    },
    "nvke": {
        "name": "n1",
        "criteria": {
            "service": "nvke",
            "accelerator": "gb200",
            "os": "ubuntu",
            "intent": "training",
            "platform": "kubeflow",
        },
        "existing": EXISTING,
        "settings": {
            "rails": [{"name": f"mlx5_{i}", "rootDevice": f"000{i}:03:00.0"} for i in range(4)]
        },
    },
}


def test_the_docs_table_states_the_kind_defaults():
    text = DOCS.read_text(encoding="utf-8")
    table = re.search(
        r"^\| kind \| passes when \| default timeout \|\n(.*?)\n\n", text, re.S | re.M
    ).group(1)
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| .*\| ([^|]+) \|$", table, re.M))
    assert set(rows) == set(GATE_KINDS)
    create = GateSpec.__dataclass_fields__["create_timeout_seconds"].default
    for kind in GATE_KINDS:
        extra = f" (+{create} s create)" if kind == "crd-established" else ""
        assert rows[kind].strip() == f"{DEFAULT_TIMEOUTS[kind]} s{extra}", kind
    assert f"within `create_timeout_seconds`, default {create} s" in text
    assert f"within `timeout_seconds`, default {DEFAULT_TIMEOUTS['crd-established']} s" in text
    assert f"the wait budget\n+ {GATE_TIMEOUT_MARGIN_SECONDS} s" in text


@pytest.mark.parametrize("kind", GATE_KINDS)
def test_a_gate_without_a_timeout_waits_its_kinds_default(kind):
    assert effective_timeout(GateSpec(name="g", component="c", kind=kind)) == DEFAULT_TIMEOUTS[kind]


@pytest.mark.parametrize("service", sorted(CLUSTERS))
def test_every_builtin_clusterpolicy_gate_waits_the_one_budget(service):
    with registered() as kit:
        plan = kit.plan(CLUSTERS[service])
    (gate,) = [g for g in plan.gates if g.name == GATE_CLUSTERPOLICY_READY]
    assert (
        gate.timeout_seconds
        == CLUSTERPOLICY_DEFAULT_TIMEOUT
        == clusterpolicy_ready().timeout_seconds
    )
