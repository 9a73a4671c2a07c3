"""The plugin SDK as a third party uses it (docs/plugins.md).

The example plugin ``examples/example_plugin`` (platform ``example-k8s``; its own tests, written
on :mod:`gpucluster.sdk.testing`, are in ``examples/example_plugin/tests``) is loaded through
``GPUCLUSTER_PLUGINS`` and, built and installed with pip, through a real ``gpucluster`` entry
point. Plugin failures are reported naming the plugin (exit 2, no traceback), cluster hooks are
scoped to the plugin serving the service, duplicate services name both plugins,
``GPUCLUSTER_DISABLE_PLUGINS`` blocks plugins, ``gpucluster plugins`` lists them, and every
built-in plugin imports only ``gpucluster.sdk``, the standard library and PyYAML.

Every test here runs with a private plugin manager: the fixture :func:`_private_plugin_manager`
restores the process-wide one afterwards, so other test modules see the built-ins only.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from _support import AKS_TRAINING_RECIPE

import gpucluster.plugins as plugins_mod
import gpucluster.sdk as sdk
from gpucluster import cli, pipeline
from gpucluster.errors import PluginError
from gpucluster.inputs.config import parse_clusters
from gpucluster.sdk import hookspecs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_DIST = ROOT / "examples" / "example_plugin"
EXAMPLE = "gpucluster_example"
DOCS = ROOT / "docs" / "plugins.md"
HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("gpucluster_"))

CLUSTER = {
    "name": "ex1",
    "criteria": {
        "service": "example-k8s",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
    },
    "existing": {"kubeconfig": "~/.kube/example.yaml", "context": "ex1"},
}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _private_plugin_manager(monkeypatch):
    """Run each test with its own plugin manager; restore the process-wide one afterwards."""
    monkeypatch.delenv("GPUCLUSTER_PLUGINS", raising=False)
    monkeypatch.delenv("GPUCLUSTER_DISABLE_PLUGINS", raising=False)
    before = set(sys.modules)
    saved = plugins_mod.swap_plugin_manager(
        None
    )  # loaded afresh from this test's environment on first use
    yield
    plugins_mod.swap_plugin_manager(saved)
    for name in set(sys.modules) - before:
        if name.startswith((EXAMPLE, "probe_")):
            del sys.modules[name]


def load(monkeypatch, *modules: str, disable: tuple[str, ...] = (), extra_path: Path | None = None):
    """Load plugins as a user would: ``GPUCLUSTER_PLUGINS``/``GPUCLUSTER_DISABLE_PLUGINS`` + reload."""
    monkeypatch.syspath_prepend(str(EXAMPLE_DIST))
    if extra_path is not None:
        monkeypatch.syspath_prepend(str(extra_path))
    monkeypatch.setenv("GPUCLUSTER_PLUGINS", ",".join(modules))
    monkeypatch.setenv("GPUCLUSTER_DISABLE_PLUGINS", ",".join(disable))
    return plugins_mod.get_plugin_manager(reload=True)


def write_plugin(tmp_path: Path, name: str, body: str) -> Path:
    (tmp_path / f"{name}.py").write_text(
        "from gpucluster.sdk import *\n" + textwrap.dedent(body), encoding="utf-8"
    )
    return tmp_path


def cluster_spec(tmp_path: Path, **changes):
    doc = {**CLUSTER, **changes}
    (spec,) = parse_clusters({"clusters": [doc]}, source="clusters.yaml", root=tmp_path)
    return spec


def cluster_file(tmp_path: Path, **changes) -> str:
    path = tmp_path / "clusters.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{**CLUSTER, **changes}]}), encoding="utf-8")
    return str(path)


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "GPUCLUSTER_PLUGINS",
            "GPUCLUSTER_DISABLE_PLUGINS",
            "GPUCLUSTER_DEBUG",
            "PYTHONPATH",
        )
    }
    env.update(extra)
    return env


def run_subprocess(argv, env, cwd):
    return subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


# --------------------------------------------------------------------------- loading through GPUCLUSTER_PLUGINS


def test_example_plugin_loads_through_gpucluster_plugins(monkeypatch):
    pm = load(monkeypatch, EXAMPLE)
    module = pm.get_plugin(EXAMPLE)
    assert module is not None and module.__name__ == EXAMPLE
    assert {c.name for c in pm.get_hookcallers(module)} == {
        "gpucluster_platforms",
        "gpucluster_catalog_dirs",
        "gpucluster_prepare_cluster",
        "gpucluster_gates",
        "gpucluster_policy_checks",
    }
    known = plugins_mod.platforms()
    assert sorted(known) == ["aks", "example-k8s", "nvke", "oke"]
    assert (
        known["example-k8s"] is module.PLATFORM and known["example-k8s"].provisions_cluster is False
    )


SCOPED = """
@hookimpl
def gpucluster_platforms():
    return [Platform(service="other-k8s", display_name="Other", accelerators=("h100",))]

@hookimpl(tryfirst=True)
def gpucluster_prepare_cluster(cluster):
    raise RuntimeError("called for " + cluster.criteria.service)

@hookimpl
def gpucluster_gates(cluster, recipe, components):
    raise RuntimeError("called for " + cluster.criteria.service)
"""

UNSCOPED = """
CALLS = []

@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    CALLS.append(cluster.criteria.service)
    return [Finding(id="ORG-NOTE", severity="info", cluster=cluster.name, component="-", key="-", message="seen", fix="-")]
"""


def test_service_scoped_hooks_reach_only_the_plugin_serving_the_cluster(monkeypatch, tmp_path):
    write_plugin(tmp_path, "probe_scoped", SCOPED)
    write_plugin(tmp_path, "probe_unscoped", UNSCOPED)
    load(monkeypatch, EXAMPLE, "probe_scoped", "probe_unscoped", extra_path=tmp_path)
    plan = pipeline.build_plan(
        cluster_spec(tmp_path)
    )  # probe_scoped serves other-k8s only: never called
    assert [g.name for g in plan.gates] == ["example-clusterpolicy-ready"]
    # a plugin declaring no platform is called for every cluster
    assert sys.modules["probe_unscoped"].CALLS == ["example-k8s"]
    assert [f.id for f in plan.findings] == ["ORG-NOTE"]
    # for its own service it is called
    other = cluster_spec(tmp_path, criteria={"service": "other-k8s", "accelerator": "h100"})
    with pytest.raises(
        PluginError,
        match="plugin 'probe_scoped' failed in hook gpucluster_prepare_cluster: RuntimeError: called for other-k8s",
    ):
        pipeline.build_plan(other)


CLUSTER_HOOKS = [h for h in HOOKS if "cluster" in getattr(hookspecs, h).__code__.co_varnames]


@pytest.mark.parametrize("service", ["aks", "nvke", "oke"])
def test_builtin_cluster_hooks_reach_only_the_plugin_of_the_service(service):
    from gpucluster.model import ClusterSpec, Criteria

    assert CLUSTER_HOOKS == sorted(
        [
            "gpucluster_adjust_values",
            "gpucluster_cluster_stack",
            "gpucluster_gates",
            "gpucluster_manifests",
            "gpucluster_policy_checks",
            "gpucluster_prepare_cluster",
        ]
    )
    pm = plugins_mod.get_plugin_manager()
    spec = ClusterSpec(name="c", criteria=Criteria(service=service), source="t")
    for hook in CLUSTER_HOOKS:
        everyone = {impl.plugin_name for impl in getattr(pm.hook, hook).get_hookimpls()}
        called = {
            impl.plugin_name for impl in plugins_mod._scoped_impls(pm, hook, {"cluster": spec})
        }
        assert called == everyone & {service}, hook


def test_unknown_settings_are_refused_by_the_core_for_every_platform(monkeypatch, tmp_path):
    load(monkeypatch, EXAMPLE)
    cases = {
        "example-k8s": ({}, "gateImage, validate"),
        "aks": (
            {
                "criteria": {
                    "service": "aks",
                    "accelerator": "h100",
                    "os": "ubuntu",
                    "intent": "training",
                },
                "existing": None,
            },
            "adminGroupObjectIds, apiServer, azurePolicy, defender, diskEncryptionSetId, ephemeralOsDisk, existingResourceGroup, "
            "hostEncryption, keyVaultSecretsProvider, kubelogin, localAccounts, maxPods, monitoring, network, poolUpgrade, "
            "skuTier, upgrade, zones, gateImage, validate",
        ),
        "oke": (
            {
                "criteria": {
                    "service": "oke",
                    "accelerator": "gb200",
                    "os": "ubuntu",
                    "intent": "training",
                }
            },
            "nvidiaGpuPluginAddon, imageDriverParams, gateImage, validate",
        ),
    }
    for service, (changes, allowed) in cases.items():
        path = cluster_file(tmp_path, settings={"gateImagee": "x"}, **changes)
        code, out, err = run_cli(["plan", "--config", path])
        assert code == 2 and out == "", service
        assert err == (
            f"error[input] file={path} cluster=ex1 key=clusters[0].settings.gateImagee: unknown setting 'gateImagee' for service {service} "
            f"(allowed: {allowed}) fix: remove it or fix its spelling (platform settings: the platform's page in docs/)\n"
        ), service


# --------------------------------------------------------------------------- installation through an entry point


@pytest.fixture(scope="module")
def installed_example(tmp_path_factory):
    """The example distribution built and installed by pip into a private folder (no network)."""
    base = tmp_path_factory.mktemp("example-dist")
    src = base / "src"
    shutil.copytree(
        EXAMPLE_DIST, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    )
    target = base / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return target


def test_installed_distribution_registers_through_the_entry_point(installed_example, tmp_path):
    ep = (
        next(installed_example.glob("gpucluster_example-*.dist-info")) / "entry_points.txt"
    ).read_text()
    assert "[gpucluster]\nexample = gpucluster_example" in ep
    env = subprocess_env(PYTHONPATH=str(installed_example))
    res = run_subprocess(["plugins", "--format", "json"], env, tmp_path)
    assert res.returncode == 0, res.stderr
    inventory = json.loads(res.stdout)
    entry = next(p for p in inventory["plugins"] if p["name"] == "example")
    assert entry["module"] == EXAMPLE and entry["source"] == "entry-point"
    assert entry["distribution"] == {"name": "gpucluster-example", "version": "0.1.0"}
    assert entry["platforms"] == [
        {"service": "example-k8s", "displayName": "Example Kubernetes", "provisionsCluster": False}
    ]
    assert [p["name"] for p in inventory["plugins"]] == ["aks", "example", "nvke", "oke"]
    # the installed package data (catalog) is what the plan resolves against
    res = run_subprocess(
        ["plan", "--config", cluster_file(tmp_path), "--format", "json"], env, tmp_path
    )
    assert res.returncode == 0, res.stderr
    (plan,) = json.loads(res.stdout)
    assert plan["appliedOverlays"][-1] == "h100-example-k8s-ubuntu-training"
    ids = {n["id"]: n for n in plan["nodes"]}
    assert ids["example-clusterpolicy-ready"]["kind"] == "gate"
    assert ids["example-gpu-priority-manifests"]["dependsOn"] == ["kai-scheduler"]
    # blocked by its entry-point name
    res = run_subprocess(
        ["plan", "--config", cluster_file(tmp_path)],
        subprocess_env(PYTHONPATH=str(installed_example), GPUCLUSTER_DISABLE_PLUGINS="example"),
        tmp_path,
    )
    assert res.returncode == 2 and "unknown service 'example-k8s'" in res.stderr


def test_gpucluster_plugins_naming_an_installed_plugin_loads_it_once(installed_example, tmp_path):
    env = subprocess_env(
        PYTHONPATH=str(installed_example), GPUCLUSTER_PLUGINS=f"{EXAMPLE},gpucluster_aks"
    )
    res = run_subprocess(["plugins", "--format", "json"], env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert [(p["name"], p["source"]) for p in json.loads(res.stdout)["plugins"]] == [
        ("aks", "entry-point"),
        ("example", "entry-point"),
        ("nvke", "entry-point"),
        ("oke", "entry-point"),
    ]


def test_loading_every_plugin_does_not_import_cdktf(tmp_path):
    code = (
        "import sys; from gpucluster.plugins import get_plugin_manager, platforms; get_plugin_manager(); platforms(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cdktf', 'constructs', 'jsii', 'gpucluster_cdk', 'cdktf_cdktf_provider_azurerm')))"
    )
    env = subprocess_env(PYTHONPATH=str(EXAMPLE_DIST), GPUCLUSTER_PLUGINS=EXAMPLE)
    res = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


# --------------------------------------------------------------------------- errors name the plugin


RAISING = {
    "gpucluster_platforms": "def gpucluster_platforms():\n    raise RuntimeError('kaput')\n",
    "gpucluster_catalog_dirs": "def gpucluster_catalog_dirs():\n    raise RuntimeError('kaput')\n",
    "gpucluster_prepare_cluster": "@hookimpl(tryfirst=True)\ndef gpucluster_prepare_cluster(cluster):\n    raise RuntimeError('kaput')\n",
    "gpucluster_adjust_values": "def gpucluster_adjust_values(cluster, recipe, component):\n    raise RuntimeError('kaput')\n",
    "gpucluster_manifests": "def gpucluster_manifests(cluster, recipe, components):\n    raise RuntimeError('kaput')\n",
    "gpucluster_gates": "def gpucluster_gates(cluster, recipe, components):\n    raise RuntimeError('kaput')\n",
    "gpucluster_policy_checks": "def gpucluster_policy_checks(cluster, recipe, components):\n    raise RuntimeError('kaput')\n",
}


@pytest.mark.parametrize("hook", sorted(RAISING))
def test_a_raising_hook_is_reported_with_the_plugin_name(hook, monkeypatch, tmp_path):
    body = RAISING[hook] if RAISING[hook].startswith("@") else "@hookimpl\n" + RAISING[hook]
    write_plugin(tmp_path, "probe_boom", body)
    load(monkeypatch, EXAMPLE, "probe_boom", extra_path=tmp_path)
    code, out, err = run_cli(["plan", "--config", cluster_file(tmp_path)])
    assert code == 2 and out == ""
    assert f"plugin 'probe_boom' failed in hook {hook}: " in err and "kaput" in err
    assert "Traceback" not in err


WRONG_SHAPE = {
    "gpucluster_platforms": (
        "def gpucluster_platforms():\n    return ['example-k8s']\n",
        "plugin 'probe_bad' returned str from gpucluster_platforms",
    ),
    "gpucluster_catalog_dirs": (
        "def gpucluster_catalog_dirs():\n    return '/srv/catalog'\n",
        "plugin 'probe_bad' returned str from gpucluster_catalog_dirs",
    ),
    "gpucluster_catalog_dirs-missing": (
        "def gpucluster_catalog_dirs():\n    return ['/nonexistent/h7/catalog']\n",
        "plugin 'probe_bad' returned catalog directory '/nonexistent/h7/catalog', which does not exist",
    ),
    "gpucluster_prepare_cluster": (
        "@hookimpl(tryfirst=True)\ndef gpucluster_prepare_cluster(cluster):\n    return {'name': cluster.name}\n",
        "plugin 'probe_bad' returned dict from gpucluster_prepare_cluster",
    ),
    "gpucluster_adjust_values": (
        "def gpucluster_adjust_values(cluster, recipe, component):\n    return ['driver.enabled=false']\n",
        "component=cert-manager: plugin 'probe_bad' returned list from gpucluster_adjust_values",
    ),
    "gpucluster_manifests": (
        "def gpucluster_manifests(cluster, recipe, components):\n    return 'kind: ConfigMap'\n",
        "plugin 'probe_bad' returned str from gpucluster_manifests",
    ),
    "gpucluster_gates": (
        "def gpucluster_gates(cluster, recipe, components):\n    return {'name': 'x'}\n",
        "plugin 'probe_bad' returned dict from gpucluster_gates",
    ),
    "gpucluster_policy_checks": (
        "def gpucluster_policy_checks(cluster, recipe, components):\n    return ['error: no']\n",
        "plugin 'probe_bad' returned str from gpucluster_policy_checks (allowed: gpucluster.sdk.Finding instances)",
    ),
}


@pytest.mark.parametrize("case", sorted(WRONG_SHAPE))
def test_a_wrong_return_shape_is_reported_with_the_plugin_name(case, monkeypatch, tmp_path):
    body, expected = WRONG_SHAPE[case]
    write_plugin(tmp_path, "probe_bad", body if body.startswith("@") else "@hookimpl\n" + body)
    load(monkeypatch, EXAMPLE, "probe_bad", extra_path=tmp_path)
    code, out, err = run_cli(["plan", "--config", cluster_file(tmp_path)])
    assert code == 2 and out == ""
    assert expected in err and "Traceback" not in err


def test_a_raising_cluster_stack_hook_names_the_plugin(monkeypatch, tmp_path):
    write_plugin(
        tmp_path,
        "probe_boom",
        "@hookimpl\ndef gpucluster_cluster_stack(scope, cluster, recipe):\n    raise KeyError('host')\n",
    )
    load(monkeypatch, "probe_boom", extra_path=tmp_path)
    spec = cluster_spec(tmp_path)
    with pytest.raises(PluginError) as exc:
        plugins_mod.call_hook("gpucluster_cluster_stack", scope=None, cluster=spec, recipe=None)
    assert (
        "plugin 'probe_boom' failed in hook gpucluster_cluster_stack: KeyError: 'host'"
        in exc.value.render()
    )
    assert "GPUCLUSTER_DISABLE_PLUGINS=probe_boom" in exc.value.render()


def test_a_raising_hook_exits_2_without_traceback_in_a_real_process(tmp_path):
    write_plugin(
        tmp_path,
        "probe_boom",
        "@hookimpl\ndef gpucluster_gates(cluster, recipe, components):\n    return {}['missing']\n",
    )
    env = subprocess_env(
        PYTHONPATH=os.pathsep.join([str(EXAMPLE_DIST), str(tmp_path)]),
        GPUCLUSTER_PLUGINS=f"{EXAMPLE},probe_boom",
    )
    res = run_subprocess(["plan", "--config", cluster_file(tmp_path)], env, tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip() == (
        "error[input] cluster=ex1: plugin 'probe_boom' failed in hook gpucluster_gates: KeyError: 'missing' "
        "fix: fix or disable the plugin (GPUCLUSTER_DISABLE_PLUGINS=probe_boom)"
    )


INVALID = {
    "typo": (
        "@hookimpl\ndef gpucluster_gatez(cluster, recipe, components):\n    return None\n",
        "error[input]: plugin 'probe_invalid' is invalid: unknown hook 'gpucluster_gatez'",
    ),
    "signature": (
        "@hookimpl\ndef gpucluster_gates(cluster, recipe, components, extra):\n    return None\n",
        "error[input] key=GPUCLUSTER_PLUGINS: plugin 'probe_invalid' from GPUCLUSTER_PLUGINS is invalid: Plugin 'probe_invalid' for hook "
        "'gpucluster_gates'; hookimpl definition: gpucluster_gates(cluster, recipe, components, extra); Argument(s) {'extra'}",
    ),
    "wrapper": (
        "@hookimpl(hookwrapper=True)\ndef gpucluster_gates(cluster, recipe, components):\n    yield\n",
        "error[input]: plugin 'probe_invalid' implements gpucluster_gates as a hook wrapper, which gpucluster does not support",
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_an_invalid_hook_implementation_is_named(case, monkeypatch, tmp_path):
    body, expected = INVALID[case]
    write_plugin(tmp_path, "probe_invalid", body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GPUCLUSTER_PLUGINS", "probe_invalid")
    code, out, err = run_cli(["plugins"])
    assert code == 2 and out == ""
    assert err.startswith(expected) and err.count("\n") == 1


def test_a_plugin_that_fails_to_import_is_named(monkeypatch, tmp_path):
    (tmp_path / "probe_broken.py").write_text(
        "import cdktf_provider_that_is_not_installed\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("GPUCLUSTER_PLUGINS", "probe_broken")
    with pytest.raises(PluginError) as exc:
        plugins_mod.get_plugin_manager(reload=True)
    assert (
        "plugin module 'probe_broken' from GPUCLUSTER_PLUGINS failed to import: ModuleNotFoundError"
        in exc.value.render()
    )


# --------------------------------------------------------------------------- duplicate services, disabling


DUPLICATE = """
@hookimpl
def gpucluster_platforms():
    return [Platform(service="example-k8s", display_name="Another example", accelerators=("h100",))]
"""


def test_two_plugins_declaring_one_service_are_both_named(monkeypatch, tmp_path):
    write_plugin(tmp_path, "probe_dup", DUPLICATE)
    load(monkeypatch, EXAMPLE, "probe_dup", extra_path=tmp_path)
    with pytest.raises(PluginError) as exc:
        plugins_mod.platforms()
    text = exc.value.render()
    assert re.search(
        r"service 'example-k8s' is declared by both plugin '(probe_dup|gpucluster_example)' and plugin '(probe_dup|gpucluster_example)'",
        text,
    )
    assert "'probe_dup'" in text and "'gpucluster_example'" in text
    assert "fix: disable one of them with GPUCLUSTER_DISABLE_PLUGINS" in text
    code, out, err = run_cli(["plan", "--config", cluster_file(tmp_path)])
    assert code == 2 and "is declared by both plugin" in err
    # `gpucluster plugins` still lists both, then exits 2 naming both
    code, out, err = run_cli(["plugins"])
    assert code == 2
    assert "  platform example-k8s: Another example (existing clusters)" in out
    assert (
        "  platform example-k8s: Example Kubernetes (existing clusters)\n" in out
    )  # the kind once
    assert "(existing clusters) (existing clusters)" not in out
    assert "'probe_dup'" in err and "'gpucluster_example'" in err


def test_disable_plugins_blocks_one_plugin(monkeypatch, tmp_path):
    write_plugin(tmp_path, "probe_dup", DUPLICATE)
    pm = load(monkeypatch, EXAMPLE, "probe_dup", disable=("probe_dup",), extra_path=tmp_path)
    assert pm.get_plugin("probe_dup") is None and pm.is_blocked("probe_dup")
    assert plugins_mod.platforms()["example-k8s"].display_name == "Example Kubernetes"
    assert (
        pipeline.build_plan(cluster_spec(tmp_path)).recipe.applied_overlays[-1]
        == "h100-example-k8s-ubuntu-training"
    )


def test_disable_plugins_blocks_a_builtin(monkeypatch, tmp_path):
    pm = load(monkeypatch, EXAMPLE, disable=("oke",))
    assert pm.get_plugin("oke") is None
    assert sorted(plugins_mod.platforms()) == ["aks", "example-k8s", "nvke"]
    code, out, err = run_cli(["plugins"])
    assert code == 0, err
    assert out.splitlines()[-1] == "oke: blocked (GPUCLUSTER_DISABLE_PLUGINS)"
    assert not any(line.startswith("oke: module") for line in out.splitlines())
    code, _, err = run_cli(
        [
            "recipe",
            "--service",
            "oke",
            "--accelerator",
            "gb200",
            "--os",
            "ubuntu",
            "--intent",
            "training",
        ]
    )
    assert code == 2 and "unknown service 'oke'" in err


def test_disabled_gpucluster_plugins_module_is_not_imported(monkeypatch):
    monkeypatch.delitem(sys.modules, EXAMPLE, raising=False)  # the example's own tests import it
    load(monkeypatch, EXAMPLE, disable=(EXAMPLE,))
    assert EXAMPLE not in sys.modules
    assert "example-k8s" not in plugins_mod.platforms()


# --------------------------------------------------------------------------- gpucluster plugins


def test_plugins_command_lists_builtins_with_hooks_and_platforms():
    code, out, err = run_cli(["plugins"])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "aks: module gpucluster_aks (gpucluster 0.1.0)"
    assert lines[1] == "  platform aks: Azure Kubernetes Service (provisions clusters)"
    assert lines[2] == (
        "  hooks: gpucluster_catalog_dirs, gpucluster_cluster_stack, gpucluster_gates, gpucluster_platforms, "
        "gpucluster_policy_checks, gpucluster_prepare_cluster"
    )
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == [
        "aks",
        "nvke",
        "oke",
    ]
    code, out, _ = run_cli(["plugins", "--format", "json"])
    doc = json.loads(out)
    assert doc["blocked"] == []
    nvke = next(p for p in doc["plugins"] if p["name"] == "nvke")
    assert nvke["source"] == "entry-point" and nvke["distribution"]["name"] == "gpucluster"
    assert (
        "gpucluster_manifests" in nvke["hooks"] and "gpucluster_cluster_stack" not in nvke["hooks"]
    )
    assert run_cli(["plugins", "--format", "json"])[1] == out


def test_plugins_command_marks_gpucluster_plugins_and_tryfirst(monkeypatch, tmp_path):
    write_plugin(
        tmp_path,
        "probe_first",
        "@hookimpl(tryfirst=True)\ndef gpucluster_gates(cluster, recipe, components):\n    return None\n"
        "@hookimpl(trylast=True)\ndef gpucluster_policy_checks(cluster, recipe, components):\n    return None\n",
    )
    load(monkeypatch, EXAMPLE, "probe_first", extra_path=tmp_path)
    code, out, err = run_cli(["plugins"])
    assert code == 0, err
    assert (
        "probe_first: module probe_first (GPUCLUSTER_PLUGINS)\n  hooks: gpucluster_gates (tryfirst), gpucluster_policy_checks (trylast)\n"
        in out
    )
    assert (
        "gpucluster_example: module gpucluster_example (GPUCLUSTER_PLUGINS)\n  platform example-k8s: "
        in out
    )


def test_tryfirst_runs_before_later_registered_plugins(monkeypatch, tmp_path):
    """Call order as documented: later-registered first, tryfirst before, trylast after."""
    write_plugin(
        tmp_path,
        "probe_order_a",
        "@hookimpl(tryfirst=True)\ndef gpucluster_catalog_dirs():\n    return ['a-tryfirst']\n",
    )
    write_plugin(
        tmp_path,
        "probe_order_b",
        "@hookimpl\ndef gpucluster_catalog_dirs():\n    return ['b-plain']\n",
    )
    write_plugin(
        tmp_path,
        "probe_order_c",
        "@hookimpl(trylast=True)\ndef gpucluster_catalog_dirs():\n    return ['c-trylast']\n",
    )
    write_plugin(
        tmp_path,
        "probe_order_d",
        "@hookimpl\ndef gpucluster_catalog_dirs():\n    return ['d-plain-registered-last']\n",
    )
    load(
        monkeypatch,
        "probe_order_c",
        "probe_order_a",
        "probe_order_b",
        "probe_order_d",
        extra_path=tmp_path,
    )
    batches = plugins_mod.call_hook("gpucluster_catalog_dirs")
    order = [
        str(batch[0]) if isinstance(batch[0], str) else Path(batch[0]).parent.name
        for batch in batches
    ]
    assert order == [
        "a-tryfirst",
        "d-plain-registered-last",
        "b-plain",
        "gpucluster_oke",
        "gpucluster_nvke",
        "gpucluster_aks",
        "c-trylast",
    ]


# --------------------------------------------------------------------------- SDK surface and docs


def test_sdk_exports_everything_plugins_use():
    for name in sdk.__all__:
        assert getattr(sdk, name) is not None, name
    assert sdk.ENTRY_POINT_GROUP == plugins_mod.ENTRY_POINT_GROUP == "gpucluster"
    assert sdk.ANY == "any"
    assert sdk.get_path({"driver": {"enabled": False}}, "driver.enabled") is False
    assert sdk.deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": None}}) == {"a": {"b": 1}}
    used = set()
    for path in sorted((ROOT / "plugins").rglob("*.py")) + sorted(
        (EXAMPLE_DIST / EXAMPLE).rglob("*.py")
    ):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "gpucluster.sdk":
                used.update(alias.name for alias in node.names)
    assert used and used <= set(sdk.__all__)


def test_core_settings_are_accepted_by_every_platform(monkeypatch, tmp_path):
    from gpucluster import model

    assert sdk.CORE_SETTING_KEYS == (model.GATE_IMAGE_SETTING, model.VALIDATE_SETTING)
    load(monkeypatch, EXAMPLE)
    image = "registry.example.com/kubectl:v1.34.1"
    clusters = {
        "aks": {
            "criteria": {
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "training",
            },
            "existing": None,
        },
        "oke": {
            "criteria": {
                "service": "oke",
                "accelerator": "gb200",
                "os": "ubuntu",
                "intent": "training",
            }
        },
        "example-k8s": {},
    }
    for service, changes in clusters.items():
        plan = pipeline.build_plan(cluster_spec(tmp_path, settings={"gateImage": image}, **changes))
        assert plan.gates, service
        for gate in plan.gates:
            assert plan.node(gate.name).values["image"] == image, service


def test_docs_and_hookspecs_state_each_hooks_firstresult_flag():
    text = DOCS.read_text(encoding="utf-8")
    for hook in HOOKS:
        match = re.search(rf"^### `{hook}\((.*?)\)`\n(.*?)(?=^### |^## )", text, re.S | re.M)
        assert match, f"docs/plugins.md has no section for {hook}"
        spec = getattr(hookspecs, hook)
        argnames = list(spec.__code__.co_varnames[: spec.__code__.co_argcount])
        assert [a.strip() for a in match.group(1).split(",") if a.strip()] == argnames
        firstresult = bool(getattr(spec, "gpucluster_spec", {}).get("firstresult"))
        assert f"firstresult: {'yes' if firstresult else 'no'}" in match.group(2), hook
        assert f"firstresult: {'yes' if firstresult else 'no'}" in spec.__doc__, hook
    assert {
        h for h in HOOKS if getattr(getattr(hookspecs, h), "gpucluster_spec", {}).get("firstresult")
    } == {
        "gpucluster_prepare_cluster",
        "gpucluster_cluster_stack",
    }


def test_docs_plugins_listing_is_the_real_output(monkeypatch):
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(
        r"^\$ GPUCLUSTER_DISABLE_PLUGINS=oke gpucluster plugins\n(.*?)^```", text, re.S | re.M
    )
    assert block
    monkeypatch.setenv("GPUCLUSTER_DISABLE_PLUGINS", "oke")
    code, out, err = run_cli(["plugins"])
    assert code == 0, err
    assert out == block.group(1)


# --------------------------------------------------------------------------- import discipline of plugins


ALLOWED_THIRD_PARTY = {"yaml"}
LAZY_ONLY = {("gpucluster_aks", "cluster.py"): {"gpucluster_cdk.constructs_lib"}}
"""Imports allowed only inside function bodies (never at module import time)."""


def _imports(tree: ast.AST):
    """``(line, module, inside_function)`` for every import statement and ``__import__`` call."""

    def visit(node: ast.AST, in_function: bool):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, in_function
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, ("." * node.level) + (node.module or ""), in_function
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            yield node.lineno, "__import__()", in_function
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            yield from visit(child, inner)

    yield from visit(tree, False)


def bad_imports(package: str, files: list[Path]) -> list[str]:
    bad = []
    for path in files:
        lazy = LAZY_ONLY.get((package, path.name), set())
        for line, module, in_function in sorted(
            _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        ):
            top = module.split(".")[0]
            ok = (
                module == "gpucluster.sdk"
                or top == package
                or top in sys.stdlib_module_names
                or top in ALLOWED_THIRD_PARTY
                or (in_function and any(module == m or module.startswith(m + ".") for m in lazy))
            ) and top != "importlib"
            if not ok:
                bad.append(f"{path.name}:{line}: {module}")
    return bad


PLUGIN_PACKAGES = {
    "gpucluster_aks": ROOT / "plugins" / "gpucluster_aks",
    "gpucluster_nvke": ROOT / "plugins" / "gpucluster_nvke",
    "gpucluster_oke": ROOT / "plugins" / "gpucluster_oke",
    EXAMPLE: EXAMPLE_DIST / EXAMPLE,
}


@pytest.mark.parametrize("package", sorted(PLUGIN_PACKAGES))
def test_plugin_imports_only_the_sdk_stdlib_and_yaml(package):
    files = sorted(PLUGIN_PACKAGES[package].rglob("*.py"))
    assert files
    assert bad_imports(package, files) == []


def test_aks_cluster_imports_constructs_lib_only_inside_functions():
    path = PLUGIN_PACKAGES["gpucluster_aks"] / "cluster.py"
    found = [
        (m, inside)
        for _, m, inside in _imports(ast.parse(path.read_text(encoding="utf-8")))
        if m.startswith("gpucluster_cdk.constructs_lib")
    ]
    assert found and all(inside for _, inside in found)


def test_the_import_check_sees_module_level_and_misplaced_imports(tmp_path):
    cluster = tmp_path / "cluster.py"
    cluster.write_text(
        "import gpucluster_cdk.constructs_lib\nfrom gpucluster.values import get_path\nimport cdktf\nfrom . import x\n"
        "def hook():\n    from gpucluster_cdk.constructs_lib import AksGpuCluster\n    import cdktf\n    __import__('os')\n"
        "import importlib\nfrom gpucluster.sdk import hookimpl\nimport json, yaml\n"
        "class C:\n    def m(self):\n        from gpucluster_cdk.constructs_lib import gpu_pool\n",
        encoding="utf-8",
    )
    assert bad_imports("gpucluster_aks", [cluster]) == [
        "cluster.py:1: gpucluster_cdk.constructs_lib",
        "cluster.py:2: gpucluster.values",
        "cluster.py:3: cdktf",
        "cluster.py:4: .",
        "cluster.py:7: cdktf",
        "cluster.py:8: __import__()",
        "cluster.py:9: importlib",
    ]
    other = tmp_path / "policy.py"
    other.write_text(
        "def f():\n    from gpucluster_cdk.constructs_lib import gpu_pool\n", encoding="utf-8"
    )
    assert bad_imports("gpucluster_aks", [other]) == ["policy.py:2: gpucluster_cdk.constructs_lib"]


# --------------------------------------------------------------------------- the test kit (gpucluster.sdk.testing)


def test_the_example_plugin_tests_import_only_the_sdk_and_the_test_kit():
    files = sorted((EXAMPLE_DIST / "tests").rglob("*.py")) + [EXAMPLE_DIST / "conftest.py"]
    found = {
        module
        for path in files
        for _, module, _ in _imports(ast.parse(path.read_text(encoding="utf-8")))
    }
    gpucluster_modules = {m for m in found if m.split(".")[0] == "gpucluster"}
    assert gpucluster_modules == {"gpucluster.sdk", "gpucluster.sdk.testing"}
    others = {m.split(".")[0] for m in found} - {"gpucluster", EXAMPLE, "pytest", "__future__"}
    assert others <= set(sys.stdlib_module_names), others


def test_registered_restores_the_previous_manager_whatever_happens():
    from gpucluster.sdk.testing import registered

    before = plugins_mod.get_plugin_manager()
    with pytest.raises(RuntimeError, match="inside"):
        with registered(entry_points=False) as kit:
            assert plugins_mod.get_plugin_manager() is kit.pm is not before
            assert plugins_mod.platforms() == {}
            raise RuntimeError("inside")
    assert plugins_mod.get_plugin_manager() is before


def test_registered_ignores_the_environment_and_blocks_by_name(monkeypatch):
    from gpucluster.sdk.testing import registered

    monkeypatch.setenv("GPUCLUSTER_PLUGINS", "probe_not_importable")
    with registered(disable=("oke",)) as kit:
        assert sorted(plugins_mod.platforms()) == ["aks", "nvke"]
        kit.unregister(name="nvke")
        assert sorted(plugins_mod.platforms()) == ["aks"]


def test_the_kit_refuses_an_invalid_plugin_like_the_loader(tmp_path, monkeypatch):
    from gpucluster.sdk.testing import registered

    write_plugin(
        tmp_path,
        "probe_kit_invalid",
        "@hookimpl\ndef gpucluster_gatez(cluster, recipe, components):\n    return None\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import probe_kit_invalid

    with registered() as kit:
        with pytest.raises(
            PluginError,
            match="plugin 'probe_kit_invalid' is invalid: unknown hook 'gpucluster_gatez'",
        ):
            kit.register(probe_kit_invalid)


def test_the_kit_plans_whole_cluster_files_from_yaml_text():
    from gpucluster.sdk.testing import registered

    with registered() as kit:
        (plan,) = kit.plans(
            "clusters:\n  - name: lab\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
        )
        assert plan.cluster.name == "lab" and plan.cluster.source == "clusters.yaml"
        result = kit.cli(
            *AKS_TRAINING_RECIPE,
        )
        assert result.code == 0 and result.err == "" and "gpu-operator" in result.out


def test_docs_testing_section_uses_only_the_sdk_and_the_kit():
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Testing your plugin\n") : text.index("## What not to do\n")]
    assert "_PM" not in section
    (code,) = re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)
    found = {module for _, module, _ in _imports(ast.parse(code))}
    assert {m for m in found if m.startswith("gpucluster")} == {
        "gpucluster.sdk",
        "gpucluster.sdk.testing",
        "gpucluster_example",
    }
    # the documented functions are the example's real tests
    example_tests = (EXAMPLE_DIST / "tests" / "test_example.py").read_text(encoding="utf-8")
    for name in re.findall(r"^def (test_\w+)", code, re.M):
        assert f"def {name}(" in example_tests or name == "test_the_gate_takes_effect", name


RECORDER = """
CALLS = []

@hookimpl
def gpucluster_platforms():
    CALLS.append("gpucluster_platforms")

@hookimpl
def gpucluster_prepare_cluster(cluster):
    CALLS.append("gpucluster_prepare_cluster")

@hookimpl
def gpucluster_catalog_dirs():
    CALLS.append("gpucluster_catalog_dirs")

@hookimpl
def gpucluster_adjust_values(cluster, recipe, component):
    CALLS.append("gpucluster_adjust_values")

@hookimpl
def gpucluster_policy_checks(cluster, recipe, components):
    CALLS.append("gpucluster_policy_checks")

@hookimpl
def gpucluster_manifests(cluster, recipe, components):
    CALLS.append("gpucluster_manifests")

@hookimpl
def gpucluster_gates(cluster, recipe, components):
    CALLS.append("gpucluster_gates")
"""


def test_hookspecs_and_docs_are_typed_and_in_call_order(monkeypatch, tmp_path):
    import inspect

    defined = [
        name for name in vars(hookspecs) if name.startswith("gpucluster_")
    ]  # definition order
    assert tuple(defined) == hookspecs.HOOK_ORDER and sorted(defined) == HOOKS
    assert (
        tuple(re.findall(r"^### `(gpucluster_\w+)\(", DOCS.read_text(encoding="utf-8"), re.M))
        == hookspecs.HOOK_ORDER
    )
    for name in defined:
        spec = getattr(hookspecs, name)
        annotations = inspect.get_annotations(spec)
        assert set(annotations) == {*inspect.signature(spec).parameters, "return"}, name
    # the pipeline meets them in that order (cluster_stack: at synth only)
    write_plugin(tmp_path, "probe_recorder", RECORDER)
    load(monkeypatch, "probe_recorder", extra_path=tmp_path)
    pipeline.build_plan(
        cluster_spec(
            tmp_path,
            criteria={
                "service": "aks",
                "accelerator": "h100",
                "os": "ubuntu",
                "intent": "training",
            },
            existing=None,
        )
    )
    calls = sys.modules["probe_recorder"].CALLS
    assert list(dict.fromkeys(calls)) == list(hookspecs.HOOK_ORDER[:-1])


def test_init_names_a_plugin_platform_it_has_no_template_for(monkeypatch, tmp_path):
    """``gpucluster plugins`` lists example-k8s; ``init --service example-k8s`` says init has
    templates for the built-in platforms only and how to start (docs/plugins.md), not 'unknown'."""
    import io

    from gpucluster import cli

    load(monkeypatch, EXAMPLE)
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli.main(["init", str(tmp_path / "p"), "--service", "example-k8s"], stdout=out, stderr=err)
        == 2
    )
    [line] = err.getvalue().splitlines()
    assert "unknown" not in line and "platform 'example-k8s' is loaded from a plugin" in line
    assert "criteria.service: example-k8s" in line and not (tmp_path / "p").exists()
    assert "gpucluster init --service" in " ".join(DOCS.read_text(encoding="utf-8").split())
