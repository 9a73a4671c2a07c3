"""gpucluster_cdk/constructs_lib/cdk.py imports only the binding submodules a stack uses, keeping jsii's type
registry right, and the AKS-free synth paths never touch azurerm.

Each check runs in a fresh interpreter (what is imported is per process), under the
distribution ``GPUCLUSTER_CDK`` selects (default cdktf).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import EXISTING_AKS, NVKE_EXISTING, run_main

ROOT = Path(__file__).resolve().parents[1]

NVKE_OKE_FILE = (
    "clusters:\n"
    + NVKE_EXISTING
    + """\
  - name: oke-a100
    criteria: {service: oke, accelerator: a100, os: ubuntu, intent: training}
    profile: {gpuStack: operator-managed}
"""
)


def run(code: str, tmp_path: Path, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter; every stack is built there (no reuse of cached stacks:
    these tests are about what building imports)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_CONFIG")}
    full_env.update(
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CHECKPOINT_DISABLE="1",
        GPUCLUSTER_SYNTH_CACHE="off",
        **env,
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


PRELUDE = f"""
import json, sys
sys.path.insert(0, {str(ROOT)!r})
from gpucluster.inputs.config import load_clusters
from gpucluster.pipeline import build_plans
from gpucluster_cdk import stacks
from gpucluster_cdk.constructs_lib import cdk
"""


def test_nvke_and_oke_synth_never_touch_azurerm(tmp_path):
    (tmp_path / "gpucluster.yaml").write_text(NVKE_OKE_FILE)
    out = run(
        PRELUDE
        + """
written = stacks.synth(build_plans(load_clusters("gpucluster.yaml", env={})), "cdktf.out")
print(json.dumps({"written": written, "azurerm": sorted(m for m in sys.modules if "provider_azurerm" in m),
                  "helm": sorted(m for m in sys.modules if "provider_helm" in m), "loaded": cdk.azurerm_loaded()}))
""",
        tmp_path,
    )
    assert out["written"] == ["nvke-a-runtime", "oke-a100-runtime"]
    assert out["azurerm"] == [] and out["loaded"] is False
    assert out["helm"], "the helm binding was used"


def test_aks_synth_imports_only_the_submodules_it_uses(tmp_path):
    out = run(
        PRELUDE
        + """
stacks.synth(build_plans(load_clusters(env={})), "cdktf.out")
pkg = cdk.DIST.azurerm_package
subs = sorted({m.split(".")[1] for m in sys.modules if m.startswith(pkg + ".")} - {"_private"})
print(json.dumps({"subs": subs, "pkg_init_ran": hasattr(sys.modules[pkg], "__all__"), "lazy": cdk.DIST.lazy_bindings,
                  "loaded": cdk.azurerm_loaded()}))
""",
        tmp_path,
    )
    used = {
        "_jsii",
        *(
            sub
            for sub in __import__(
                "gpucluster_cdk.constructs_lib.cdk", fromlist=["x"]
            ).AZURERM_CLASSES
        ),
    }
    assert out["loaded"] is True
    assert set(out["subs"]) <= used, (
        f"imported more than the class table: {sorted(set(out['subs']) - used)}"
    )
    assert {
        "_jsii",
        "kubernetes_cluster",
        "kubernetes_cluster_node_pool",
        "resource_group",
        "provider",
    } <= set(out["subs"])
    if not out[
        "lazy"
    ]:  # cdktf bindings: the package __init__ (which imports ~1,500 submodules) never ran
        assert out["pkg_init_ran"] is False


def test_jsii_resolves_types_of_submodules_not_imported_yet(tmp_path):
    # The kernel can hand back an object of a class whose submodule was never imported; jsii's runtime
    # then imports it through the submodule FQN map. Check the map names the module that really
    # registers each type, for a spread of submodules, and that resolution imports it.
    out = run(
        PRELUDE
        + """
import importlib, os
from jsii import _reference_map as rm
az = cdk.azurerm()
az.ResourceGroup  # loads the package's _jsii (the assembly) and one submodule
pkg = cdk.DIST.azurerm_package
folder = os.path.dirname(importlib.util.find_spec(pkg + "._jsii").origin.rsplit("/_jsii/", 1)[0] + "/x")
names = sorted(n for n in os.listdir(folder) if not n.startswith(("_", ".")) and os.path.isdir(os.path.join(folder, n)))
assert len(names) > 1000, len(names)
mismatches, checked = [], 0
for fqn, module in sorted(rm._submodule_fqn_map.items()):
    if not module.startswith(pkg + ".") or module.split(".")[1] not in names[::150]:
        continue
    mod = importlib.import_module(module)
    types = {getattr(v, "__jsii_type__", "") for v in vars(mod).values()}
    checked += 1
    if not any(t.startswith(fqn + ".") for t in types if t):
        mismatches.append((fqn, module))
probe = "virtual_network_peering"
fqn = next(f for f, m in rm._submodule_fqn_map.items() if m == pkg + "." + probe)
before = pkg + "." + probe in sys.modules
ok = rm._try_import_type_module(fqn + ".VirtualNetworkPeering")
print(json.dumps({"mismatches": mismatches, "checked": checked, "before": before, "ok": ok,
                  "registered": fqn + ".VirtualNetworkPeering" in rm._types}))
""",
        tmp_path,
    )
    assert out["checked"] >= 8 and out["mismatches"] == []
    assert out["before"] is False and out["ok"] is True and out["registered"] is True


def test_unknown_distribution_is_one_error_line(tmp_path):
    result = run_main(cwd=tmp_path, outdir=tmp_path / "out", GPUCLUSTER_CDK="cdkx")
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert errors == [
        "error[config] key=GPUCLUSTER_CDK: unknown CDK for Terraform distribution 'cdkx' (allowed: cdktf, cdktn) "
        "fix: unset GPUCLUSTER_CDK (cdktf) or set it to cdktn"
    ]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value, said",
    [
        ("--bogus", "node: --bogus is not allowed in NODE_OPTIONS"),
        ("--require ./no-such-preload.js", "Error: Cannot find module"),
    ],
)
def test_node_options_node_refuses_is_one_input_error_line_and_writes_nothing(
    tmp_path, value, said
):
    """A NODE_OPTIONS Node.js refuses: one error[input] key=NODE_OPTIONS line with Node.js's own
    words, exit 2, the previous output untouched, no staged folder (not jsii's raw lines and
    error[internal] exit 70)."""
    (tmp_path / "gpucluster.yaml").write_text(EXISTING_AKS)
    out = tmp_path / "cdktf.out"
    (out / "stacks" / "old").mkdir(parents=True)
    (out / "manifest.json").write_text('{"stacks": {}}')
    result = run_main(cwd=tmp_path, outdir=out, NODE_OPTIONS=value)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(
        f"error[input] key=NODE_OPTIONS: Node.js (which runs the jsii kernel) refuses "
        f"NODE_OPTIONS={value!r}: {said}"
    ), line
    assert " fix: unset NODE_OPTIONS" in line
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdktf.out", "gpucluster.yaml"]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == [
        "manifest.json",
        "stacks",
        "stacks/old",
    ]


def test_node_options_node_accepts_is_left_alone():
    from gpucluster.errors import GpuclusterError
    from gpucluster_cdk.constructs_lib import cdk

    cdk.check_node_options(
        {**os.environ, "NODE_OPTIONS": "--no-warnings"}
    )  # returns: Node.js allows it
    cdk.check_node_options(
        {**os.environ, "NODE_OPTIONS": " ", "JSII_NODE": "/bin/false"}
    )  # blank: node not even run
    with pytest.raises(
        GpuclusterError,
        match="key=NODE_OPTIONS: .* refuses NODE_OPTIONS='-x': node exited with code 1",
    ):
        cdk.check_node_options(
            {**os.environ, "NODE_OPTIONS": "-x", "JSII_NODE": "/bin/false"}
        )  # the node jsii runs


def test_kernel_output_is_muted_as_soon_as_a_stop_signal_arrives(tmp_path):
    """The reader thread sees a stop signal through the wakeup fd Python's C-level handler writes,
    before any Python-level handler ran (a handler that does nothing here); SIGUSR1 is not a stop."""
    out = run(
        """
import json, os, signal
from gpucluster_cdk.constructs_lib import cdk
before = cdk._stop_signal_arrived()
for signum in (signal.SIGUSR1, signal.SIGTERM):
    signal.signal(signum, lambda *a: None)
os.kill(os.getpid(), signal.SIGUSR1)
after_usr1 = cdk._stop_signal_arrived()
os.kill(os.getpid(), signal.SIGTERM)
print(json.dumps({"watching": bool(cdk._WAKEUP_READ_FD), "before": before, "usr1": after_usr1,
                  "term": cdk._stop_signal_arrived(), "muted": bool(cdk._KERNEL_OUTPUT_MUTED)}))
""",
        tmp_path,
    )
    assert out == {"watching": True, "before": False, "usr1": False, "term": True, "muted": True}


def test_a_binding_class_not_in_the_table_is_named():
    from gpucluster_cdk.constructs_lib import cdk

    with pytest.raises(AttributeError) as err:
        _ = cdk.helm().NoSuchClass
    assert "NoSuchClass is not in the class table" in str(err.value)
    assert "gpucluster_cdk/constructs_lib/cdk.py" in str(err.value)
