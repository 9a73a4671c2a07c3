"""gpucluster_cdk/constructs_lib/lazy_bindings.cjs: the Node.js preload that makes a prebuilt binding's
``lib/index.js`` require each resource module on first use (gpucluster_cdk/constructs_lib/cdk.py starts the jsii
kernel with it). The synthesized JSON is unchanged (test_synth_e2e and the determinism tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRELOAD = ROOT / "gpucluster_cdk" / "constructs_lib" / "lazy_bindings.cjs"

# The two line shapes of the real bindings: cdktf (`exports.x = require("./x")`) and cdktn
# (`exports.x = __importStar(require("./x/index"))`), plus a line the preload must leave alone.
INDEX = """\
"use strict";
var __importStar = function (mod) { return mod; };
Object.defineProperty(exports, "__esModule", { value: true });
exports.usedOne = exports.brokenOne = exports.starOne = void 0;
exports.usedOne = require("./used-one");
exports.brokenOne = require("./broken-one");
exports.starOne = __importStar(require("./star-one/index"));
exports.eager = require("./eager").value;
"""

SCRIPT = """
const pkg = require(process.argv[2]);
const seen = () => Object.keys(require.cache).map((f) => require("path").basename(f.replace(/\\/index\\.js$/, ".js"))).sort();
const before = seen();
const used = pkg.usedOne.Used.name;
const star = pkg.starOne.Star.name;
const again = pkg.usedOne === pkg.usedOne;
console.log(JSON.stringify({before, used, star, again, after: seen(), keys: Object.keys(pkg).sort()}));
"""


def _package(tmp_path: Path, name: str, version: str = "1.2.3") -> Path:
    lib = tmp_path / "node_modules" / name / "lib"
    (lib / "star-one").mkdir(parents=True)
    (lib.parent / "package.json").write_text(json.dumps({"name": name, "version": version}))
    (lib / "index.js").write_text(INDEX)
    (lib / "used-one.js").write_text("class Used {}\nexports.Used = Used;\n")
    (lib / "broken-one.js").write_text("throw new Error('broken-one must never be loaded');\n")
    (lib / "star-one" / "index.js").write_text("class Star {}\nexports.Star = Star;\n")
    (lib / "eager.js").write_text("exports.value = 1;\n")
    return lib / "index.js"


def _node(tmp_path: Path, index: Path, packages: str) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH (the jsii kernel needs it too)")
    script = tmp_path / "probe.js"
    script.write_text(SCRIPT)
    env = dict(
        os.environ, NODE_OPTIONS=f'--require "{PRELOAD}"', GPUCLUSTER_LAZY_JS_PACKAGES=packages
    )
    return subprocess.run(
        [node, str(script), str(index)], env=env, capture_output=True, text=True, timeout=60
    )


def test_listed_package_requires_each_module_on_first_use(tmp_path):
    index = _package(tmp_path, "@scope/provider-demo")
    result = _node(tmp_path, index, "@other/x@1.0.0,@scope/provider-demo@1.2.3")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert "used-one.js" not in out["before"] and "star-one.js" not in out["before"]
    assert "eager.js" in out["before"]  # a line of another shape runs as written
    assert (out["used"], out["star"], out["again"]) == ("Used", "Star", True)
    assert "broken-one.js" not in out["after"]  # never required: its getter was not read
    assert out["keys"] == ["brokenOne", "eager", "starOne", "usedOne"]  # every export still listed


@pytest.mark.parametrize(
    "listed",
    [
        "@scope/provider-other@1.2.3",  # another package
        "@scope/provider-demo@1.2.4",  # the package at another version than the one installed
        "@scope/provider-demo",  # no version named: nothing to check against
    ],
)
def test_unlisted_package_or_another_version_is_compiled_unchanged(tmp_path, listed):
    """The plain path: the index requires every module at once (the broken one throws)."""
    index = _package(tmp_path, "@scope/provider-demo")
    result = _node(tmp_path, index, listed)
    assert result.returncode != 0 and "broken-one must never be loaded" in result.stderr


def test_a_package_without_package_json_is_compiled_unchanged(tmp_path):
    index = _package(tmp_path, "@scope/provider-demo")
    (index.parent.parent / "package.json").unlink()
    result = _node(tmp_path, index, "@scope/provider-demo@1.2.3")
    assert result.returncode != 0 and "broken-one must never be loaded" in result.stderr


def test_js_pins_are_the_installed_npm_packages():
    """The version the preload checks is the one of the npm package the installed binding embeds
    (``_jsii/<name>@<version>.jsii.tgz``), and that binding is installed at its pin."""
    import importlib.util

    from gpucluster_cdk.constructs_lib import cdk

    assert cdk.lazy_js_packages(cdk.DIST) == [
        f"{npm}@{version}" for npm, version, _ in cdk.DIST.js_pins()
    ]
    for npm, version, package in cdk.DIST.js_pins():
        folder = Path(importlib.util.find_spec(package).submodule_search_locations[0]) / "_jsii"
        assert [p.name for p in folder.glob("*.jsii.tgz")] == [
            f"{npm.split('/')[1]}@{version}.jsii.tgz"
        ]


def test_kernel_environment_is_restored_after_start():
    code = (
        f"import os, sys; sys.path.insert(0, {str(ROOT)!r}); os.environ['NODE_OPTIONS'] = '--no-warnings'\n"
        "import gpucluster_cdk.constructs_lib.cdk as cdk\n"
        "print(os.environ.get('NODE_OPTIONS'), os.environ.get('GPUCLUSTER_LAZY_JS_PACKAGES'), "
        "','.join(cdk.DIST.binding_js_packages))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"),
    )
    assert result.returncode == 0, result.stderr
    options, packages, expected = result.stdout.split()
    assert (options, packages) == ("--no-warnings", "None")
    assert expected.endswith("/provider-helm") and "/provider-azurerm" in expected


def test_binding_js_packages_name_the_installed_assemblies():
    """The npm names in gpucluster_cdk/constructs_lib/cdk.py are the assemblies the installed bindings load."""
    import importlib.util

    from gpucluster_cdk.constructs_lib import cdk

    for package, npm in zip(
        (cdk.DIST.azurerm_package, cdk.DIST.helm_package), cdk.DIST.binding_js_packages, strict=True
    ):
        spec = importlib.util.find_spec(package)
        text = (Path(spec.submodule_search_locations[0]) / "_jsii" / "__init__.py").read_text()
        assert f'"{npm}"' in text, (package, npm)


TWICE_SCRIPT = """
const { execSync } = require("child_process");
const cp = require("child_process");
const a = cp.execSync(process.argv[2], { stdio: "pipe" }).toString();
const b = cp.execSync(process.argv[2], { stdio: "pipe" }).toString();
console.log(JSON.stringify({ a, b }));
"""


def test_the_kernel_environment_runs_every_command_it_is_asked_to(tmp_path):
    """The kernel's environment (lazy_js_settings) changes how modules compile, nothing else: each
    `terraform version` cdktf runs at synth (per terraform_data resource and cloud backend) runs
    the binary again (an earlier preload answered repeats from the first run; it bought no time)."""
    from gpucluster_cdk.kernel_env import lazy_js_settings

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH (the jsii kernel needs it too)")
    counter = tmp_path / "calls"
    fake = tmp_path / "fake-terraform"
    fake.write_text(f"#!/bin/sh\necho x >> '{counter}'\necho 'Terraform v1.11.0'\n")
    fake.chmod(0o755)
    script = tmp_path / "twice.js"
    script.write_text(TWICE_SCRIPT)
    base = {"PATH": os.environ.get("PATH", ""), "TERRAFORM_BINARY_NAME": str(fake)}
    settings = lazy_js_settings(["@cdktf/provider-helm@12.1.2"], base)
    assert settings and "--require" in settings["NODE_OPTIONS"]
    result = subprocess.run(
        [node, str(script), f"{fake} version"],
        env={**base, **settings},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["a"] == out["b"] == "Terraform v1.11.0\n"
    assert counter.read_text().count("x") == 2


ARCHIVE_SCRIPT = """
import json, sys, zipfile
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from gpucluster_cdk.constructs_lib.cdk import App, AssetType, TerraformAsset, TerraformStack
app = App(outdir=sys.argv[2])
stack = TerraformStack(app, "s")
asset = TerraformAsset(stack, "a", path=sys.argv[1], type=AssetType.ARCHIVE)
app.synth()
(archive,) = Path(sys.argv[2]).glob("stacks/s/assets/a/*/archive.zip")
print(json.dumps(sorted(zipfile.ZipFile(archive).namelist())))
"""


def test_an_archive_asset_still_zips_through_the_preloaded_kernel(tmp_path):
    """cdktf zips an ARCHIVE asset in a child `node fs.js`, which inherits the preload: a real
    ARCHIVE asset synthesized through the kernel gpucluster starts is a zip of the folder."""
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH (the jsii kernel needs it too)")
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a\n")
    (src / "sub" / "b.txt").write_text("b\n")
    script = tmp_path / "archive.py"
    script.write_text(ARCHIVE_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(script), str(src), str(tmp_path / "out"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"),
    )
    assert result.returncode == 0, result.stderr
    names = json.loads(result.stdout.splitlines()[-1])  # cdktf also lists the folder, "sub/"
    assert [n for n in names if not n.endswith("/")] == ["a.txt", "sub/b.txt"]
