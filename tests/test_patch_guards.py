"""The two kept reaches into other libraries turn themselves off for any version but the pinned
one, and the plain path writes the same bytes (docs/synth.md, "What we patch, why, and how it
turns itself off"):

* the bare binding package (jsii's private ``_reference_map._submodule_fqn_map``): off unless the
  installed jsii is ``JSII_VERSION`` and the binding is at its pin (read with
  ``importlib.metadata``);
* the Node.js preload (``Module.prototype._compile``): a binding's ``lib/index.js`` is rewritten
  only when the Python binding is at its pin and the npm package's ``package.json`` has the
  version the preload is given.

Each synth runs in a fresh interpreter (what is imported is per process), under the distribution
``GPUCLUSTER_CDK`` selects (default cdktf). A probe preloaded into the kernel's Node.js processes
counts the azurerm modules they compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import main_env, tree

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
const fs = require("fs"), path = require("path");
process.on("exit", () => {
  const n = Object.keys(require.cache).filter((f) => f.includes("provider-azurerm" + path.sep + "lib" + path.sep)).length;
  fs.writeFileSync(path.join(process.env.PROBE_DIR, String(process.pid)), String(n));
});
"""

RUNNER = f"""
import importlib.metadata, json, os, sys
sys.path.insert(0, {str(ROOT)!r})
mode = sys.argv[1]
if mode == "other-versions":  # jsii and the bindings report another version than the pinned one
    real = importlib.metadata.version
    importlib.metadata.version = lambda name: "0.0.0" if name == "jsii" or "provider" in name else real(name)
if mode == "other-npm":  # the preload is told another npm version than the one installed
    from gpucluster_cdk import distributions
    real_pins = distributions.Distribution.js_pins
    distributions.Distribution.js_pins = lambda self: tuple((n, "0.0.0", p) for n, _, p in real_pins(self))
from gpucluster_cdk import app
code = app.main([], outdir=sys.argv[2], cache=False, workers=1)
from gpucluster_cdk.constructs_lib import cdk
package = cdk.DIST.azurerm_package
print(json.dumps({{
    "code": code,
    "lazy_js": cdk.lazy_js_packages(cdk.DIST),
    "bare": cdk.bare_package_allowed(package),
    "submodules": sum(1 for m in sys.modules if m.startswith(package + ".")),
}}))
"""


def synth(tmp_path: Path, mode: str) -> tuple[dict, dict[str, bytes], int]:
    """A synth of the embedded default cluster in ``mode``: (what the runner saw, the output
    folder's files, the most azurerm modules one kernel Node.js process compiled)."""
    out = tmp_path / mode / "cdktf.out"
    probe_dir = tmp_path / mode / "probe"
    probe_dir.mkdir(parents=True)
    probe = tmp_path / "probe.cjs"
    probe.write_text(PROBE)
    env = main_env(
        outdir=out,
        GPUCLUSTER_EMBEDDED_DEFAULT="1",
        NODE_OPTIONS=f'--require "{probe}"',
        PROBE_DIR=str(probe_dir),
    )
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, mode, str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0, result.stderr
    compiled = max(int(p.read_text()) for p in probe_dir.iterdir())
    return seen, tree(out), compiled


@pytest.fixture(scope="module")
def pinned(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("pinned"), "pinned")


def test_at_the_pinned_versions_both_reaches_are_on(pinned):
    seen, files, compiled = pinned
    assert len(seen["lazy_js"]) == 2 and all("@" in p[1:] for p in seen["lazy_js"])
    assert compiled < 100  # the kernel compiled only the azurerm modules the stack uses
    if os.environ.get("GPUCLUSTER_CDK", "cdktf") == "cdktf":
        assert seen["bare"] is True and seen["submodules"] < 100
    assert any(name.endswith("cdk.tf.json") for name in files)


def test_other_versions_take_the_plain_path_with_the_same_output(tmp_path, pinned):
    seen, files, compiled = synth(tmp_path, "other-versions")
    assert seen["lazy_js"] == [] and seen["bare"] is False
    assert compiled > 1000  # the binding's lib/index.js required every resource module
    if os.environ.get("GPUCLUSTER_CDK", "cdktf") == "cdktf":
        assert seen["submodules"] > 1000  # the package's __init__ imported every submodule
    assert files == pinned[1]


def test_another_npm_version_leaves_the_index_as_it_is_with_the_same_output(tmp_path, pinned):
    seen, files, compiled = synth(tmp_path, "other-npm")
    assert len(seen["lazy_js"]) == 2 and all(p.endswith("@0.0.0") for p in seen["lazy_js"])
    assert compiled > 1000
    assert files == pinned[1]
