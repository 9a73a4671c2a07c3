"""The image inventory proven complete on the rig: for the default AKS cluster, an NVKE GB200 and an
OKE GB200 cluster (``gpucluster init`` scaffolds), each with ``images.mirror`` set, a rehearsed
apply on the real control plane, then every pod image (containers, init and ephemeral containers of
every pod the API server held during the apply, hook Job pods included) and every image field of
every custom resource on the server (composed as the operators compose them) against
``gpucluster images --format json`` of the same file with the charts the rig served.

One rehearsal per cluster proves both claims: with ``images.mirror`` set, Helm's post-renderer
(``gpucluster postrender``, run by the rig as Terraform's provider runs it) rewrites what is
installed, and ``gpucluster images`` lists each image as ``reference`` (at the mirror) and
``upstream`` (the same reference without ``<mirror>/``; tests/test_image_mirror.py shows the
mirrored inventory is the unmirrored one, each at the mirror). So an image the rig shows that the
inventory lacks is missing with or without the mirror, and one the rewrite did not reach is both
missing (the inventory names it at the mirror) and public. The mirror is never dialled: KWOK
nodes pull nothing.

Both sides use the charts the rig served (the reference charts beside the repository, a chart of
another version re-versioned to the pin): ``nvsentinel``'s chart is not among them, so the rig
installs an empty stand-in and neither side names its images (the output says ``stub: 1``).
The NVKE GB200 rehearsal applies 25 of its 26 releases: ``rdma-modules-manifests`` needs the
NodeWright CRD of nodewright v0.19, which the reference charts and CRDs beside the repository do
not hold; the pods and custom resources of the 25 others count (the NodeWright package's images
are compared on the rendered side by tests/test_images.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpucluster_rig import inventory

MIRROR = "registry.airgap.example/mirror"


def _config(kind: str, where: Path) -> Path:
    """The cluster file of ``kind`` (``default``: the embedded AKS default; ``nvke``/``oke``: the
    GB200 training scaffold ``gpucluster init`` writes) with ``images.mirror`` set."""
    if kind == "default":
        from gpucluster.inputs.config import EMBEDDED_DEFAULT

        path = where / "gpucluster.yaml"
        data = yaml.safe_load(Path(EMBEDDED_DEFAULT).read_text(encoding="utf-8"))
    else:
        project = where / "project"
        init = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpucluster.cli",
                "init",
                str(project),
                "--service",
                kind,
                "--intent",
                "training",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert init.returncode == 0, init.stderr
        path = project / "gpucluster.yaml"
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["images"] = {"mirror": MIRROR}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["default", "nvke", "oke"])
def proof(
    request: pytest.FixtureRequest,
    rig_bin: Path,
    shared: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    where = tmp_path_factory.mktemp(f"inventory-{request.param}")
    config = _config(request.param, where)
    (name,) = [c["name"] for c in yaml.safe_load(config.read_text())["clusters"]]
    out = inventory.rehearse_inventory(
        config=config,
        cluster_name=name,
        folder=where / "work",
        binaries=rig_bin,
        charts=shared / "charts",
        crds=shared / "crds",
    )
    out["kind"] = request.param
    cmp = out["comparison"]
    rel = out["report"]["apply"]["releases"]
    counts = out["inventory"]["counts"]
    print(
        f"\n{request.param} cluster {name}: {sum(1 for r in rel if r['ok'])}/{len(rel)} releases applied; "
        f"charts served {out['servedCharts']}; pods seen {out['pods']}, custom resources {out['customResources']}; "
        f"images found on the rig {cmp['found']} ({cmp['podImages']} in pods, {cmp['crImages']} in CR fields), "
        f"listed by gpucluster images {cmp['listed']} ({counts['digest']} by digest, {counts['tagOnly']} by tag only), "
        f"missing {len(cmp['missing'])}, listed but not on the rig {len(cmp['unseen'])}, "
        f"naming a public registry {len(cmp['public'] or {})}; disabled CR components {len(out['disabled'])}"
    )
    for ref, where_seen in cmp["missing"].items():
        print(f"  missing: {ref}  <- {where_seen}")
    for ref, where_seen in (cmp["public"] or {}).items():
        print(f"  public: {ref}  <- {where_seen}")
    for ref in cmp["unseen"]:
        print(f"  not on the rig: {ref}")
    (where / "proof.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def test_the_stack_was_applied(proof: dict[str, Any]) -> None:
    """The comparison means something only after the releases really ran."""
    rel = proof["report"]["apply"]["releases"]
    failed = sorted(r["release"] for r in rel if not r["ok"])
    assert failed == (["rdma-modules-manifests"] if proof["kind"] == "nvke" else []), failed
    assert proof["pods"] >= 10 and proof["customResources"] >= 2
    assert proof["inventory"]["complete"], proof["inventory"]["stderr"]


def test_every_image_on_the_rig_is_in_the_inventory(proof: dict[str, Any]) -> None:
    cmp = proof["comparison"]
    assert cmp["found"] > 0 and cmp["podImages"] > 0 and cmp["crImages"] > 0
    assert cmp["missing"] == {}


def test_no_pod_or_custom_resource_names_a_public_registry(proof: dict[str, Any]) -> None:
    cmp = proof["comparison"]
    assert cmp["mirror"] == MIRROR
    assert cmp["public"] == {}
