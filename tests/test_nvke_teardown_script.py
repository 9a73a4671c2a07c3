"""The sriov-ib-networks post-delete wait, run for real under dash and bash against a fake kubectl
(tests/gate_harness.py: fake kubectl/date/sleep, no real time passes)."""

from __future__ import annotations

import pytest
from gate_harness import SHELLS, run_script

from gpucluster_nvke import fabric
from gpucluster_nvke.settings import parse_settings

RAILS = [
    {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
    {"name": "mlx5_1", "rootDevice": "0002:03:00.0", "pfName": "ibP2p3s0"},
]
API = ("sriovibnetworks\nsriovnetworknodepolicies\nsriovnetworknodestates\n", "", 0)

pytestmark = pytest.mark.parametrize("shell", SHELLS)


def script(timeout: int = 120) -> str:
    s = parse_settings({"rails": RAILS, "teardown": {"timeoutSeconds": timeout}})
    job = fabric.teardown_wait_hook(s, "nvidia-network-operator")[3]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    env = "".join(
        f"{e['name']}='{e['value']}'; export {e['name']}\n" for e in c["env"] if e["name"] != "HOME"
    )
    return env + c["command"][-1]


def state(name, sync="Succeeded", desired="Idle", current="Idle", pcis="", names=""):
    return f"{name}|{sync}|{desired}|{current}|{pcis} {names}\n"


def test_waits_until_every_node_is_succeeded_and_idle(tmp_path, shell):
    responses = [
        API,
        # policies just deleted: the operator has not yet removed the rail PFs from the node spec
        (
            state("tray-1", pcis="0000:03:00.0 0002:03:00.0", names="ibp3s0 ibP2p3s0")
            + state("tray-2"),
            "",
            0,
        ),
        # drain through the Maintenance Operator in flight on tray-1
        (
            state("tray-1", sync="InProgress", desired="Drain_Required", current="Draining")
            + state("tray-2"),
            "",
            0,
        ),
        (state("tray-1", sync="InProgress", current="DrainComplete") + state("tray-2"), "", 0),
        (state("tray-1") + state("tray-2"), "", 0),
    ]
    run = run_script(script(), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.lines[-1] == "every SriovNetworkNodeState is Succeeded with no drain in flight"
    assert [line for line in run.lines if line.startswith("waiting for")] == [
        "waiting for: tray-1"
    ] * 3
    assert run.calls[0] == ["api-resources", "--api-group=sriovnetwork.openshift.io", "-o", "name"]
    assert run.calls[1][:4] == [
        "get",
        "sriovnetworknodestates.sriovnetwork.openshift.io",
        "-n",
        "nvidia-network-operator",
    ]
    assert len(run.calls) == 5


def test_a_pf_name_still_in_the_spec_keeps_it_waiting(tmp_path, shell):
    responses = [
        API,
        (state("tray-1", names="ibP2p3s0"), "", 0),
        (state("tray-1", names="ibp9s0"), "", 0),
    ]
    run = run_script(script(), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stderr
    assert run.lines.count("waiting for: tray-1") == 1


def test_no_sriov_api_means_nothing_to_wait_for(tmp_path, shell):
    run = run_script(script(), [("nicclusterpolicies\n", "", 0)], tmp_path, shell=shell)
    assert run.returncode == 0
    assert run.lines == ["no SriovNetworkNodeState API: nothing to wait for"]
    assert len(run.calls) == 1


def test_api_errors_are_retried_not_taken_as_done(tmp_path, shell):
    responses = [
        ("", "connection refused\n", 1),
        ("", "connection refused\n", 1),
        (state("tray-1"), "", 0),
    ]
    run = run_script(script(), responses, tmp_path, shell=shell)
    assert run.returncode == 0, run.stderr
    assert "waiting for: (API error)" in run.lines


def test_times_out_and_fails_the_uninstall(tmp_path, shell):
    responses = [API, (state("tray-1", sync="Failed"), "", 0)]
    run = run_script(script(timeout=60), responses, tmp_path, shell=shell, clock_step=10)
    assert run.returncode == 1
    assert "timed out; still reconfiguring: tray-1" in run.stderr
    assert "do not uninstall network-operator" in run.stderr
