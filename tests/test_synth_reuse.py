"""Reused stacks never change a byte: a cached re-synth equals a full one-process synth.

Each case synthesizes with the per-user cache (a folder of the test), edits one input, synthesizes
again with the cache -- the unchanged clusters' stacks come from their entries -- and compares the
whole output folder with a synth that uses no cache, byte for byte. The progress callback shows
which clusters were reused, so no case passes without reuse happening.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import AKS_CLUSTER as AKS
from _support import main_env, tree

from gpucluster import diskcache
from gpucluster.inputs.config import load_config
from gpucluster.pipeline import build_plans

ROOT = Path(__file__).resolve().parents[1]
FLEET_EXAMPLE = ROOT / "examples" / "fleet-canary-prod.yaml"

CLUSTERS = """\
clusters:
  - name: train
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    pools:
      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2, gpu: false}
      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: NODES}
  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    existing: {kubeconfig: /etc/kube/lab}
    scheduling: {accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}}
    overrides:
      values:
        - {component: gpu-operator, file: shared.yaml}
  - name: edge
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: inference}
    existing: {kubeconfig: /etc/kube/edge}
    scheduling: {accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}}
    overrides:
      values:
        - {component: gpu-operator, file: shared.yaml}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    monkeypatch.delenv("GPUCLUSTER_SYNTH_CACHE", raising=False)
    return folder


def synth(config: Path, out: Path, *, cache: bool) -> dict[str, str]:
    """Synthesize ``config`` into ``out`` in this process (one worker); cluster -> reused/synthesized."""
    from gpucluster_cdk import stacks

    clusters, fleet = load_config(str(config))
    done: list[str] = []
    reused: list[str] = []
    stacks.synth(
        build_plans(clusters),
        out,
        fleet=fleet,
        cache=cache,
        workers=1,
        reused=reused,
        progress=lambda i, n, name, names: done.append(name),
    )
    return {name: "reused" if name in reused else "synthesized" for name in done}


def assert_same_as_full(config: Path, tmp_path: Path, name: str) -> dict[str, str]:
    """Cached synth of ``config`` == full synth, byte for byte; returns the cached run's progress."""
    cached, full = (
        tmp_path / f"{name}-cached" / "cdktf.out",
        tmp_path / f"{name}-full" / "cdktf.out",
    )
    done = synth(config, cached, cache=True)
    synth(config, full, cache=False)
    assert tree(cached) == tree(full)
    return done


def write_clusters(
    folder: Path, nodes: int = 1, shared: str = "dcgmExporter: {serviceMonitor: {interval: 30s}}\n"
) -> Path:
    (folder / "shared.yaml").write_text(shared)
    path = folder / "gpucluster.yaml"
    path.write_text(CLUSTERS.replace("NODES", str(nodes)))
    return path


def entries(cache_folder: Path) -> list[Path]:
    kind = cache_folder / "synth-cluster"
    return sorted(p for p in kind.iterdir() if not p.name.startswith(".")) if kind.is_dir() else []


def test_edit_one_cluster_and_a_shared_values_file(tmp_path, cache):
    config = write_clusters(tmp_path)
    assert synth(config, tmp_path / "first" / "cdktf.out", cache=True) == dict.fromkeys(
        ["train", "lab", "edge"], "synthesized"
    )
    assert len(entries(cache)) == 3
    assert assert_same_as_full(config, tmp_path, "warm") == dict.fromkeys(
        ["train", "lab", "edge"], "reused"
    )

    write_clusters(tmp_path, nodes=3)  # one cluster's pool
    assert assert_same_as_full(config, tmp_path, "one") == {
        "train": "synthesized",
        "lab": "reused",
        "edge": "reused",
    }

    write_clusters(
        tmp_path, nodes=3, shared="dcgmExporter: {serviceMonitor: {interval: 60s}}\n"
    )  # both users of it
    assert assert_same_as_full(config, tmp_path, "shared") == {
        "train": "reused",
        "lab": "synthesized",
        "edge": "synthesized",
    }


def test_tampered_and_deleted_entries_are_misses(tmp_path, cache):
    config = write_clusters(tmp_path)
    synth(config, tmp_path / "first" / "cdktf.out", cache=True)
    first, second, third = entries(cache)
    data = bytearray(first.read_bytes())
    data[-10] ^= 0x01  # a flipped bit in a file's bytes: the checksum no longer matches
    first.write_bytes(bytes(data))
    second.unlink()
    third.write_bytes(third.read_bytes()[:-100])  # cut short
    done = assert_same_as_full(config, tmp_path, "tampered")
    assert sorted(done.values()) == ["synthesized"] * 3


def test_installed_binding_version_is_in_the_key(tmp_path, cache, monkeypatch):
    """A new provider binding (simulated: another identity of its installed copy) rebuilds everything."""
    config = write_clusters(tmp_path)
    synth(config, tmp_path / "first" / "cdktf.out", cache=True)
    real = diskcache.module_identity

    def upgraded(name: str) -> str:
        return real(name) + (
            " cdktf_cdktf_provider_helm-12.1.3.dist-info"
            if name == "cdktf_cdktf_provider_helm"
            else ""
        )

    monkeypatch.setattr(diskcache, "module_identity", upgraded)
    assert sorted(assert_same_as_full(config, tmp_path, "upgraded").values()) == ["synthesized"] * 3
    monkeypatch.setattr(diskcache, "module_identity", real)
    assert sorted(assert_same_as_full(config, tmp_path, "back").values()) == ["reused"] * 3


def test_fleet_member_and_fleet_section_edits(tmp_path, cache):
    """A fleet: the fleet stacks are rebuilt every time around reused member stacks (stand-ins)."""
    text = FLEET_EXAMPLE.read_text()
    config = tmp_path / "fleet.yaml"
    config.write_text(text)
    synth(config, tmp_path / "first" / "cdktf.out", cache=True)
    assert sorted(assert_same_as_full(config, tmp_path, "warm").values()) == ["reused"] * 4

    config.write_text(
        text.replace("region: westus3\n", 'region: westus3\n    kubernetesVersion: "1.35"\n', 1)
    )
    done = assert_same_as_full(config, tmp_path, "member")  # a prod member: its own stacks only
    assert done == {
        "canary-eastus": "reused",
        "prod-eastus": "reused",
        "prod-westus3": "synthesized",
        "prod-swedencentral": "reused",
    }

    config.write_text(
        text.replace(
            "name: canary-eastus\n    criteria: {service: aks, accelerator: h100, os: ubuntu, "
            "intent: training}\n",
            "name: canary-eastus\n    criteria: {service: aks, accelerator: "
            'h100, os: ubuntu, intent: training}\n    kubernetesVersion: "1.35"\n',
            1,
        )
    )
    done = assert_same_as_full(
        config, tmp_path, "canary"
    )  # the canary's digest is the prod members' barrier digest
    assert done == {
        "canary-eastus": "synthesized",
        "prod-eastus": "synthesized",
        "prod-westus3": "synthesized",
        "prod-swedencentral": "synthesized",
    }

    config.write_text(
        text.replace("afterStageWaitSeconds: 3600", "afterStageWaitSeconds: 7200").replace(
            "approval: true", "approval: false"
        )
    )
    assert_same_as_full(config, tmp_path, "section")


PLUGIN = """
from gpucluster.sdk import hookimpl

@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    from gpucluster_cdk.constructs_lib.cdk import TerraformOutput
    TerraformOutput(scope, "plugin_marker", value="MARK")
    return None  # the AKS plugin builds the cluster
"""


def run_main(tmp_path: Path, out: Path, **extra: str) -> subprocess.CompletedProcess:
    settings = dict(
        GPUCLUSTER_PLUGINS="gpucluster_test_marker",
        PYTHONPATH=str(tmp_path / "plugins"),
        GPUCLUSTER_CACHE_DIR=str(tmp_path / "cache"),
        GPUCLUSTER_SYNTH_WORKERS="1",
    )
    env = main_env(outdir=out, config=tmp_path / "gpucluster.yaml", **{**settings, **extra})
    result = subprocess.run(
        [sys.executable, str(ROOT / "main.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_plugin_code_edit_and_switches(tmp_path):
    """Through main.py: an edit of a synthesis plugin's code rebuilds; GPUCLUSTER_CACHE_DIR=off and
    GPUCLUSTER_SYNTH_CACHE=off synthesize without reading or writing entries."""
    (tmp_path / "plugins").mkdir()
    plugin = tmp_path / "plugins" / "gpucluster_test_marker.py"
    plugin.write_text(PLUGIN.replace("MARK", "first"))
    write_clusters(tmp_path)
    run_main(tmp_path, tmp_path / "a" / "cdktf.out")
    assert len(entries(tmp_path / "cache")) == 3
    assert (
        b'"first"'
        in (tmp_path / "a" / "cdktf.out" / "stacks" / "train-cluster" / "cdk.tf.json").read_bytes()
    )

    plugin.write_text(PLUGIN.replace("MARK", "second"))
    run_main(tmp_path, tmp_path / "b" / "cdktf.out")
    run_main(tmp_path, tmp_path / "c" / "cdktf.out", GPUCLUSTER_CACHE_DIR="off")
    assert (
        b'"second"'
        in (tmp_path / "b" / "cdktf.out" / "stacks" / "train-cluster" / "cdk.tf.json").read_bytes()
    )
    assert tree(tmp_path / "b" / "cdktf.out") == tree(tmp_path / "c" / "cdktf.out")
    assert (
        len(entries(tmp_path / "cache")) == 4
    )  # the train cluster's new entry; lab and edge were reused

    for entry in entries(tmp_path / "cache"):
        entry.write_bytes(b"gpucluster-cache 1\nforged\n")
    run_main(tmp_path, tmp_path / "d" / "cdktf.out", GPUCLUSTER_SYNTH_CACHE="off")
    assert tree(tmp_path / "d" / "cdktf.out") == tree(tmp_path / "c" / "cdktf.out")
    assert all(
        e.read_bytes() == b"gpucluster-cache 1\nforged\n" for e in entries(tmp_path / "cache")
    )  # not written


def test_key_is_stable_across_processes(tmp_path):
    """The key of a plan is the same in two processes with different hash seeds (no set order or
    object identity in it), so entries are found again by the next run."""
    code = (
        "import sys\n"
        "from gpucluster.inputs.config import load_config\n"
        "from gpucluster.pipeline import build_plans\n"
        "from gpucluster_cdk.stacks import reuse\n"
        "from gpucluster_cdk.stacks.names import provisions_cluster\n"
        "clusters, fleet = load_config(sys.argv[1])\n"
        "plans = build_plans(clusters)\n"
        "ident = reuse.synth_identity()\n"
        "ctx = reuse.fleet_context(fleet, plans)\n"
        "print([reuse.cluster_key(p, identity=ident, context=ctx.get(p.cluster.name), provisions=provisions_cluster(p))"
        " for p in plans])\n"
    )
    keys = set()
    for seed in ("1", "2"):
        env = dict(
            os.environ, PYTHONHASHSEED=seed, GPUCLUSTER_CACHE_DIR=str(tmp_path / f"cache-{seed}")
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(FLEET_EXAMPLE)],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        keys.add(out.stdout)
    assert len(keys) == 1 and "None" not in keys.pop()


def test_manifest_writer_matches_cdktf():
    from gpucluster_cdk.stacks import reuse

    text = reuse.manifest_text(
        "0.21.0",
        {
            "b": {"dependencies": [], "name": "b", "annotations": []},
            "a": {"dependencies": ["b"], "name": "a"},
        },
    )
    assert text == (
        '{\n  "stacks": {\n    "a": {\n      "dependencies": [\n        "b"\n      ],\n      "name": "a"\n'
        '    },\n    "b": {\n      "annotations": [\n      ],\n      "dependencies": [\n      ],\n'
        '      "name": "b"\n    }\n  },\n  "version": "0.21.0"\n}'
    )
    assert reuse.check_manifest_text(text)[1] == "json-stable-stringify"  # cdktf 0.21
    collapsed = reuse.manifest_text(
        "0.24.0", {"b": {"annotations": [], "name": "b"}}, "safe-stable-stringify"
    )
    assert (
        collapsed
        == '{\n  "stacks": {\n    "b": {\n      "annotations": [],\n      "name": "b"\n    }\n  },\n  "version": "0.24.0"\n}'
    )
    assert reuse.check_manifest_text(collapsed)[1] == "safe-stable-stringify"  # cdktn 0.24
    with pytest.raises(RuntimeError):
        reuse.check_manifest_text('{"stacks": {}, "version": "0.21.0"}')


NAMESPACE_PLUGIN = """
from gpucluster.sdk import hookimpl


def marker():
    return "MARK"


@hookimpl(tryfirst=True)
def gpucluster_cluster_stack(scope, cluster, recipe):
    from gpucluster_cdk.constructs_lib.cdk import TerraformOutput
    from acme_gpu_lib import lib_marker  # a helper of another top-level package, imported when the hook runs

    TerraformOutput(scope, "plugin_marker", value=marker())
    TerraformOutput(scope, "lib_marker", value=lib_marker())
    return None
"""


def test_code_the_build_ran_outside_the_hooks_package(tmp_path):
    """A plugin in a namespace package (no ``__init__.py``, so no package folder to hash) whose hook
    calls a helper of its own module and one of another top-level package imported inside the hook:
    editing either, or putting another copy of the helper first on ``PYTHONPATH``, rebuilds (was:
    the previous entry was reused, ``first`` instead of ``second``)."""
    plugins, other = tmp_path / "plugins", tmp_path / "other"
    (plugins / "acme").mkdir(parents=True)
    other.mkdir()
    hook_module = plugins / "acme" / "gpu_hook.py"
    hook_module.write_text(NAMESPACE_PLUGIN.replace("MARK", "first"))
    (plugins / "acme_gpu_lib.py").write_text("def lib_marker():\n    return 'first'\n")
    write_clusters(tmp_path)
    settings = dict(GPUCLUSTER_PLUGINS="acme.gpu_hook")

    def markers(out: Path) -> tuple[str, str]:
        import json

        document = json.loads((out / "stacks" / "train-cluster" / "cdk.tf.json").read_text())
        return document["output"]["plugin_marker"]["value"], document["output"]["lib_marker"][
            "value"
        ]

    run_main(tmp_path, tmp_path / "a" / "cdktf.out", **settings)
    assert markers(tmp_path / "a" / "cdktf.out") == ("first", "first")
    assert len(entries(tmp_path / "cache")) == 3

    hook_module.write_text(
        NAMESPACE_PLUGIN.replace("MARK", "second")
    )  # the hook's own bytecode is unchanged
    run_main(tmp_path, tmp_path / "b" / "cdktf.out", **settings)
    assert markers(tmp_path / "b" / "cdktf.out") == ("second", "first")

    (plugins / "acme_gpu_lib.py").write_text("def lib_marker():\n    return 'second'\n")
    run_main(tmp_path, tmp_path / "c" / "cdktf.out", **settings)
    assert markers(tmp_path / "c" / "cdktf.out") == ("second", "second")

    (other / "acme_gpu_lib.py").write_text(
        "def lib_marker():\n    return 'third'\n"
    )  # another copy, found first
    run_main(
        tmp_path,
        tmp_path / "d" / "cdktf.out",
        PYTHONPATH=f"{other}{os.pathsep}{plugins}",
        **settings,
    )
    assert markers(tmp_path / "d" / "cdktf.out") == ("second", "third")
    run_main(
        tmp_path,
        tmp_path / "e" / "cdktf.out",
        PYTHONPATH=f"{other}{os.pathsep}{plugins}",
        GPUCLUSTER_CACHE_DIR="off",
        **settings,
    )
    assert tree(tmp_path / "d" / "cdktf.out") == tree(tmp_path / "e" / "cdktf.out")


def test_loaded_code_record():
    """The record holds installed libraries (PyYAML writes the values documents) and the plugins,
    not the standard library nor the two packages whose file contents are in the key; a changed
    identity or a record of another shape is not unchanged."""
    import json as stdlib_json

    import yaml

    import gpucluster_aks
    from gpucluster_cdk.stacks import reuse

    record = reuse.loaded_code()
    names = {name for name, _, _ in record}
    assert "yaml" in names and "gpucluster_aks" in names and "pluggy" in names
    assert not names & {
        "json",
        "os",
        "gpucluster",
        "gpucluster.diskcache",
        "gpucluster_cdk.stacks.reuse",
        "__main__",
    }
    assert stdlib_json and gpucluster_aks and yaml.__file__ in {path for _, path, _ in record}
    reuse.synth_identity()  # a new synth: nothing remembered
    assert reuse.code_unchanged(record)
    yaml_at = next(i for i, (name, _, _) in enumerate(record) if name == "yaml")
    changed = [list(item) for item in record]
    changed[yaml_at][2] = "0 0 0 0"  # another install of PyYAML
    assert not reuse.code_unchanged(changed)
    moved = [list(item) for item in record]
    moved[yaml_at][1] = str(Path(yaml.__file__).with_name("elsewhere.py"))
    assert not reuse.code_unchanged(moved)
    assert not reuse.code_unchanged("not a record") and not reuse.code_unchanged(
        [["yaml", yaml.__file__]]
    )


@pytest.mark.parametrize("extra", ["again", "below"])
def test_an_entry_whose_files_collide_is_a_miss(tmp_path, cache, extra):
    """An entry under a valid checksum listing a file twice, or a file below another file, is a
    miss like any other unexpected payload (was: error[output] 'File exists', exit 2, on every run
    until the cache was cleared)."""
    from gpucluster_cdk.stacks import reuse

    config = write_clusters(tmp_path)
    synth(config, tmp_path / "first" / "cdktf.out", cache=True)
    for path in entries(cache):
        key = path.name
        payload = diskcache.get(reuse.KIND, key)
        names = [s["name"] for s in __import__("json").loads(payload.partition(b"\n")[0])["stacks"]]
        entry = reuse.decode_entry(payload, names)
        stacks = [(name, manifest, list(files)) for name, manifest, files in entry["stacks"]]
        name, manifest, files = stacks[-1]
        files.append(files[0] if extra == "again" else (files[0][0] + "/inner", b"{}"))
        stacks[-1] = (name, manifest, files)
        assert diskcache.put(
            reuse.KIND,
            key,
            reuse.encode_entry(entry["version"], stacks, entry["exports"], entry["style"]),
        )
    assert sorted(assert_same_as_full(config, tmp_path, "collide").values()) == ["synthesized"] * 3


def test_inserting_or_removing_a_cluster_rebuilds_only_that_cluster(tmp_path, cache):
    """A cluster's position in the file is not in its key (reuse.position_free): a cluster
    inserted at the top, or the first one removed, leaves the others reused -- a per-cluster
    backend (its error key names the position) included."""
    backend = (
        "    backend: {type: azurerm, storageAccountName: gpustate01, containerName: tfstate}\n"
    )
    one = AKS.format(name="one") + backend
    two = AKS.format(name="two") + (
        "    pools:\n      - {name: system, vmSize: Standard_D8ds_v5, nodeCount: 2, gpu: false}\n"
        "      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: 2}\n"
    )
    config = tmp_path / "gpucluster.yaml"
    config.write_text("clusters:\n" + one + two)
    assert set(synth(config, tmp_path / "first" / "cdktf.out", cache=True).values()) == {
        "synthesized"
    }
    config.write_text("clusters:\n" + AKS.format(name="new") + one + two)
    assert assert_same_as_full(config, tmp_path, "inserted") == {
        "new": "synthesized",
        "one": "reused",
        "two": "reused",
    }
    config.write_text("clusters:\n" + two)
    assert assert_same_as_full(config, tmp_path, "removed") == {"two": "reused"}
