"""Helpers shared by test modules (``from _support import ...``: pytest puts ``tests/`` on
``sys.path``, as for ``test_docs_examples``). Not a test module and not a conftest: plain code.

* :data:`EXISTING_AKS`: the smallest cluster file whose synthesis needs no cloud provider
  bindings (an existing AKS cluster with the keyed GPU toleration AKS needs for it).
* :data:`NVKE_EXISTING`: one ``clusters:`` entry, an existing NVKE GB200 kubeflow cluster with
  four rails (synthesis without cloud bindings).
* :func:`main_env` / :func:`run_main`: a ``python main.py`` run (the cdktf app) of a test, with the
  cluster file, output folder and extra variables it names and nothing of the caller's own
  gpucluster or cdktf settings.
* :func:`tree` / :func:`make`: a folder's files as data, and a folder made from such data.
* :func:`ancestors`: every node a plan node waits for.
* :func:`imports`: the modules a Python source file imports.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "main.py"

EXISTING_AKS = """clusters:
  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    existing: {kubeconfig: /etc/kube/config}
    scheduling:
      accelerated: {tolerations: ["nvidia.com/gpu:NoSchedule"]}
"""

NVKE_EXISTING = """\
  - name: nvke-a
    criteria: {service: nvke, accelerator: gb200, os: ubuntu, intent: training, platform: kubeflow}
    kubernetesVersion: "1.34"
    existing: {kubeconfig: ~/.kube/nvke-a.yaml, context: tenant-a}
    settings:
      rails:
        - {name: mlx5_0, rootDevice: "0000:03:00.0"}
        - {name: mlx5_1, rootDevice: "0002:03:00.0"}
        - {name: mlx5_3, rootDevice: "0010:03:00.0"}
        - {name: mlx5_4, rootDevice: "0012:03:00.0"}
"""


def main_env(*, outdir: Path, config: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment of a test's ``python main.py``: this process's environment without
    ``CDKTF_*`` and ``GPUCLUSTER_*`` (except ``GPUCLUSTER_CDK``, the distribution under test:
    ``make test-cdktn`` sets it), then ``GPUCLUSTER_CONFIG`` (``config``; None: main.py looks for
    ``./gpucluster.yaml``, then the embedded default), ``CDKTF_OUTDIR`` (``outdir``),
    ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20`` and ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUCLUSTER_", "CDKTF_")) or k == "GPUCLUSTER_CDK"
    }
    if config is not None:
        env["GPUCLUSTER_CONFIG"] = str(config)
    env.update(
        CDKTF_OUTDIR=str(outdir), JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20", **extra
    )
    return env


def run_main(
    *, cwd: Path, outdir: Path, config: Path | None = None, timeout: float = 300, **extra: str
) -> subprocess.CompletedProcess:
    """``python main.py`` in ``cwd`` with :func:`main_env`; output captured as text."""
    return subprocess.run(
        [sys.executable, str(MAIN)],
        cwd=cwd,
        env=main_env(outdir=outdir, config=config, **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


AKS_TRAINING_RECIPE = (
    "recipe",
    "--service",
    "aks",
    "--accelerator",
    "h100",
    "--os",
    "ubuntu",
    "--intent",
    "training",
)
"""``gpucluster recipe`` for the AKS H100 Ubuntu training criteria (arguments after the program)."""


def recipe_file(folder: Path, name: str, args: Sequence[str], versions: dict[str, str]) -> str:
    """Run ``gpucluster <args>`` (a ``recipe`` command), set each ``componentRefs`` entry named in
    ``versions`` to its version, and write the RecipeResult to ``folder/name``; returns ``name``."""
    import yaml

    proc = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    doc = yaml.safe_load(proc.stdout)
    for ref in doc["componentRefs"]:
        if ref["name"] in versions:
            ref["version"] = versions[ref["name"]]
    assert {r["name"] for r in doc["componentRefs"]} >= set(versions), versions
    (folder / name).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return name


AKS_CLUSTER = "  - name: {name}\n    criteria: {{service: aks, accelerator: h100, os: ubuntu, intent: training}}\n"
"""One AKS training cluster entry of a cluster file's ``clusters:`` list (``.format(name=...)``)."""


def write_cluster_file(folder: Path, text: str) -> Path:
    """``text`` written to ``folder/gpucluster.yaml``; returns the path."""
    path = folder / "gpucluster.yaml"
    path.write_text(text)
    return path


def load_cluster_text(folder: Path, text: str):
    """The ClusterSpecs of ``text`` written as ``folder/gpucluster.yaml`` (no environment)."""
    from gpucluster.inputs import config

    return config.load_clusters(str(write_cluster_file(folder, text)), env={})


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root``: ``{relative path: bytes}``, in sorted order."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def make(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` below ``root`` (folders made as needed); returns ``root``."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def ancestors(plan, node_id: str) -> set[str]:
    """The ids of every node ``node_id`` of ``plan`` (a RuntimePlan) depends on, directly or not."""
    seen: set[str] = set()
    todo = [node_id]
    while todo:
        for dep in plan.node(todo.pop()).depends_on:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import in ``path``: ``import x``, ``from .x import y`` (dots
    kept), and a ``__import__(...)`` call as ``__import__()``."""
    parsed = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(parsed):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, ("." * node.level) + (node.module or "")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
        ):
            yield node.lineno, "__import__()"


def crd(
    kind: str, spec_schema: dict, *, group: str = "example.com", scope: str = "Cluster"
) -> dict:
    """A minimal ``apiextensions.k8s.io/v1`` CustomResourceDefinition of ``kind`` (plural
    ``<kind>s``, one served and stored version ``v1``) whose object schema is ``spec:
    spec_schema``."""
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}
                    },
                }
            ],
        },
    }
