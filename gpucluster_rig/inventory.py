"""Every image a rehearsed apply put on the rig, read from the API server, against ``gpucluster images``.

After a rehearsed apply (:func:`gpucluster_rig.rehearse.rehearse_cluster` with ``destroy=False``)
the rig holds what Helm installed -- through the Helm library version Terraform's provider links,
with the stack's ``postrender`` (``images.mirror``) -- and what our Jobs applied. This module reads
it back, independently of how ``gpucluster images`` derives its list:

* **pods** (:class:`PodWatch`): every pod the API server held from the start of the apply to its
  end, watched (``kubectl get pods -A --watch``), so the pods of hook Jobs that Helm deletes once
  they succeed count too; each container, init container and ephemeral container image;
* **custom-resource image fields** (:func:`custom_resource_images`): every object of every
  CustomResourceDefinition on the server, walked for image fields and composed as the operators
  compose them (:func:`compose`): ``repository/image:version`` (``@version`` for a ``sha256:``
  version; GPU Operator ``ImagePath``, https://github.com/NVIDIA/gpu-operator/blob/main/internal/image/image.go;
  the Network Operator and NodeWright compose the same three fields), an ``image`` string that is
  a whole reference as it is (Prometheus, Alertmanager, containers of a pod template in a CR), an
  ``image: {repository, name, tag, digest}`` mapping (KAI Scheduler's Config) joined. A component
  whose ``enabled`` is false is not started by its operator and is counted apart (``disabled``), as
  are the ClusterPolicy's sandbox components while ``sandboxWorkloads.enabled`` is not true. The
  driver images the GPU Operator and the Network Operator complete per node OS (and, for the DOCA
  driver, CPU architecture) are ``per_os``: the rig's KWOK nodes run no OS, so such a field is
  found when the inventory lists it for some node OS (with the GPU nodes' architecture).

:func:`compare` sets both against the JSON of ``gpucluster images``: images found on the rig that
the inventory does not list (``missing``: the inventory is incomplete), listed images the rig never
showed (``unseen``: operands no operator starts on the rig, the other node OS tags), and, with
``images.mirror``, every reference that does not start with ``<mirror>/`` (``public``).
:func:`rehearse_inventory` does all of it for one cluster of a file.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError
from gpucluster_rig.charts import ChartRepo
from gpucluster_rig.cluster import Cluster
from gpucluster_rig.rehearse import mirrored_config, rehearse_cluster, synth

PER_OS = {
    ("ClusterPolicy", "driver"): False,
    ("ClusterPolicy", "vgpuManager"): False,
    ("ClusterPolicy", "gds"): False,
    ("ClusterPolicy", "gdrcopy"): False,
    ("NicClusterPolicy", "ofedDriver"): True,
}
"""``(kind, top-level spec key)`` -> whether the operator adds the CPU architecture after the node
OS to the image tag (GPU Operator: ``<version>-<ID><VERSION_ID>``; Network Operator DOCA driver:
``<version>-<ID><VERSION_ID>-<arch>``)."""

SANDBOX = frozenset(
    {
        "vgpuManager",
        "vgpuDeviceManager",
        "vfioManager",
        "kataManager",
        "ccManager",
        "sandboxDevicePlugin",
        "kataSandboxDevicePlugin",
    }
)
"""ClusterPolicy components the GPU Operator starts only with ``sandboxWorkloads.enabled: true``."""


def normalize(reference: str) -> str:
    """``reference`` with Docker's defaults made explicit: a first path component without ``.``
    or ``:`` (and not ``localhost``) is a Docker Hub path (``docker.io/``), a one-component Docker Hub
    path is under ``library/``. Tag and digest unchanged."""
    text = reference.strip()
    first, _, rest = text.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        text = f"docker.io/{text}"
        first, _, rest = text.partition("/")
    if first == "docker.io" and "/" not in rest.split("@", 1)[0].split(":", 1)[0]:
        text = f"docker.io/library/{rest}"
    return text


def _enabled(node: Mapping[str, Any]) -> bool:
    value = node.get("enabled", True)
    return not (value is False or str(value).lower() == "false")


def compose(node: Mapping[str, Any]) -> str | None:
    """The reference an operator pulls for one component mapping with an ``image`` (module
    docstring), or None when it has none."""
    image = node.get("image")
    if isinstance(image, Mapping):
        text = str(image.get("repository") or "").strip().rstrip("/")
        if not text:
            return None
        if image.get("name"):
            text += f"/{image['name']}"
        if image.get("tag"):
            text += f":{image['tag']}"
        if str(image.get("digest") or "").startswith("sha256:"):
            text += f"@{image['digest']}"
        return text
    if not isinstance(image, str) or not image.strip():
        return None
    image = image.strip()
    repository = str(node.get("repository") or "").strip().rstrip("/")
    version = str(node.get("version") or "").strip()
    last = image.rsplit("/", 1)[-1]
    whole = "@" in image or ":" in last
    if repository:
        base = f"{repository}/{image}"
    elif whole or not version:
        base = image
        version = ""
    else:
        base = image
    if version:
        base = f"{base}@{version}" if version.startswith("sha256:") else f"{base}:{version}"
    sha = str(node.get("containerSHA") or "").strip()
    if sha.startswith("sha256:") and "@" not in base:
        base = f"{base}@{sha}"
    return base


@dataclass
class Found:
    """One image the rig showed: ``reference`` (normalized), where it was seen (``kind/ns/name path``),
    and for a per-OS driver field whether its tag also takes the architecture (``per_os``: None
    when the operator uses the tag as it is)."""

    reference: str
    where: list[str] = field(default_factory=list)
    per_os: bool | None = None


def _walk(
    kind: str, node: Any, path: tuple[str, ...], sandbox_on: bool
) -> Iterator[tuple[tuple[str, ...], str | None, bool]]:
    """``(path, composed reference or None, enabled)`` of every mapping with an ``image``."""
    if isinstance(node, Mapping):
        on = _enabled(node)
        if kind == "ClusterPolicy" and len(path) == 2 and path[1] in SANDBOX and not sandbox_on:
            on = False
        if "image" in node:
            ref = compose(node)
            if ref is not None:
                yield path, ref, on
        for key, value in node.items():
            if key == "image" and isinstance(value, Mapping):
                continue
            for sub_path, ref, sub_on in _walk(kind, value, (*path, str(key)), sandbox_on):
                yield sub_path, ref, sub_on and on
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _walk(kind, item, (*path, str(i)), sandbox_on)


def cr_image_fields(obj: Mapping[str, Any]) -> Iterator[tuple[str, str, bool, bool | None]]:
    """``(path, reference, enabled, per_os)`` of every image field of one custom resource
    (``per_os``: :data:`PER_OS` of its top-level component when the field is that component's own
    image, else None)."""
    kind = str(obj.get("kind"))
    spec = obj.get("spec")
    sandbox = spec.get("sandboxWorkloads") if isinstance(spec, Mapping) else None
    sandbox_on = isinstance(sandbox, Mapping) and str(sandbox.get("enabled")).lower() == "true"
    for path, ref, on in _walk(
        kind, {k: v for k, v in obj.items() if k != "status"}, (), sandbox_on
    ):
        per_os = PER_OS.get((kind, path[1])) if len(path) == 2 and path[0] == "spec" else None
        yield ".".join(path), str(ref), on, per_os


class PodWatch:
    """Every pod the API server holds while the watch runs (``kubectl get pods -A --watch -o json``),
    plus the pods listed when it stops; :meth:`pods` maps ``namespace/name`` to its last state."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._pods: dict[str, dict[str, Any]] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [
                str(self.cluster.binaries / "kubectl"),
                "--kubeconfig",
                str(self.cluster.kubeconfig),
                "get",
                "pods",
                "-A",
                "--watch",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.cluster.env(),
        )
        self._thread = threading.Thread(target=self._read, name="pod-watch", daemon=True)
        self._thread.start()

    def _add(self, pod: Any) -> None:
        if isinstance(pod, Mapping) and pod.get("kind") == "Pod":
            meta = pod.get("metadata") or {}
            with self._lock:
                self._pods[f"{meta.get('namespace')}/{meta.get('name')}"] = dict(pod)

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._proc.stdout:
            buffer += line
            while True:
                text = buffer.lstrip()
                if not text:
                    buffer = ""
                    break
                try:
                    obj, end = decoder.raw_decode(text)
                except ValueError:
                    break
                self._add(obj)
                buffer = text[end:]

    def stop(self) -> None:
        """End the watch, then add every pod the server lists now."""
        time.sleep(1.0)  # let the watch print what it has
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=30)
        if self._thread is not None:
            self._thread.join(timeout=30)
        out = self.cluster.kubectl("get", "pods", "-A", "-o", "json", check=False)
        for pod in json.loads(out).get("items", []) if out else []:
            self._add(pod)

    def pods(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(sorted(self._pods.items()))


def pod_images(pods: Mapping[str, Mapping[str, Any]]) -> dict[str, Found]:
    """Every container, init container and ephemeral container image of ``pods``, normalized."""
    found: dict[str, Found] = {}
    for key, pod in pods.items():
        spec = pod.get("spec") or {}
        for group in ("initContainers", "containers", "ephemeralContainers"):
            for c in spec.get(group) or []:
                image = str(c.get("image") or "")
                if image:
                    ref = normalize(image)
                    found.setdefault(ref, Found(ref)).where.append(
                        f"Pod/{key} {group}[{c.get('name')}]"
                    )
    return found


def custom_resource_images(cluster: Cluster) -> tuple[dict[str, Found], list[str], int]:
    """Every image field of every custom resource on the server: ``(found, disabled, objects)``:
    the enabled fields' references (normalized), one line per field of a disabled component, and
    how many custom resources were read."""
    found: dict[str, Found] = {}
    disabled: list[str] = []
    objects = 0
    out = cluster.kubectl("get", "crd", "-o", "json", check=False)
    crds = json.loads(out).get("items", []) if out else []
    for crd in sorted(crds, key=lambda c: c["metadata"]["name"]):
        name = crd["metadata"]["name"]
        text = cluster.kubectl("get", name, "-A", "-o", "json", check=False)
        for obj in json.loads(text).get("items", []) if text else []:
            objects += 1
            meta = obj.get("metadata") or {}
            label = f"{obj.get('kind')}/{meta.get('namespace') or '-'}/{meta.get('name')}"
            for path, ref, on, per_os in cr_image_fields(obj):
                if not on:
                    disabled.append(f"{label} {path}: {ref}")
                    continue
                norm = normalize(ref)
                entry = found.setdefault(norm, Found(norm, per_os=per_os))
                entry.where.append(f"{label} {path}")
    return found, sorted(disabled), objects


def _matches_listed(found: Found, listed: set[str], arch: str) -> bool:
    if found.per_os is None:
        return found.reference in listed
    if "@" in found.reference:
        return found.reference in listed
    suffix = f"-{arch}" if found.per_os else ""
    return any(
        ref.startswith(found.reference + "-") and ref.endswith(suffix) and "@" not in ref
        for ref in listed
    )


def compare(
    pods: Mapping[str, Found], crs: Mapping[str, Found], inventory: Mapping[str, Any], *, arch: str
) -> dict[str, Any]:
    """``pods``/``crs`` (:func:`pod_images`, :func:`custom_resource_images`) against one cluster's
    entry of ``gpucluster images --format json``: counts, ``missing`` (found, not listed: with where),
    ``unseen`` (listed, never found) and ``public`` (found outside ``<mirror>/``, when the inventory's
    references are at a mirror; else None)."""
    listed = {normalize(i["reference"]) for i in inventory["images"]}
    mirrors = {
        i["reference"][: -len(i["upstream"]) - 1]
        for i in inventory["images"]
        if i["reference"] != i["upstream"]
    }
    mirror = next(iter(mirrors)) if len(mirrors) == 1 else None
    everything = {**crs, **pods}
    missing = {
        ref: sorted(f.where)[:3]
        for ref, f in sorted(everything.items())
        if not _matches_listed(f, listed, arch)
    }
    seen = set(pods) | {
        ref for ref in listed if any(_matches_listed(f, {ref}, arch) for f in crs.values())
    }
    public = None
    if mirror is not None:
        public = {
            ref: sorted(f.where)[:3]
            for ref, f in sorted(everything.items())
            if not ref.startswith(mirror + "/")
        }
    return {
        "listed": len(listed),
        "podImages": len(pods),
        "crImages": len(crs),
        "found": len(set(pods) | set(crs)),
        "missing": missing,
        "unseen": sorted(listed - seen),
        "mirror": mirror,
        "public": public,
    }


def images_json(config: Path, cluster: str, charts: Path) -> dict[str, Any]:
    """``gpucluster images --format json`` of ``cluster`` with the charts of ``charts``; its entry.
    :class:`RigError` when the command fails or the list is incomplete."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster.cli",
            "images",
            "--config",
            str(config),
            "--cluster",
            cluster,
            "--charts",
            str(charts),
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=config.parent,
    )
    if proc.returncode not in (0, 4) or not proc.stdout.strip():
        raise RigError(
            "images", f"gpucluster images failed: {proc.stderr.strip()[-300:]}", "run it"
        )
    (entry,) = json.loads(proc.stdout)["clusters"]
    entry["exitCode"] = proc.returncode
    entry["stderr"] = proc.stderr
    return dict(entry)


def rehearse_inventory(
    *,
    config: Path,
    cluster_name: str,
    folder: Path,
    binaries: Path,
    charts: Path | None,
    crds: Path | None,
    delay: float = 2.0,
) -> dict[str, Any]:
    """Rehearse ``cluster_name`` of ``config`` (as :func:`gpucluster_rig.rehearse.run` does, one
    cluster, no destroy), watch every pod of the apply, read back every custom resource, then
    compare with ``gpucluster images`` run on the same file with the very charts the rig served
    (the staged folders :class:`~gpucluster_rig.charts.ChartRepo` packaged: exact, re-versioned
    and stub charts alike, so both sides render the same templates). The rig is stopped before
    returning. Returns ``{"report": <rehearsal report>, "inventory": <images JSON entry>,
    "comparison": compare(...), "disabled": [...], "customResources": n, "pods": n,
    "servedCharts": {how: n}}``."""
    from gpucluster.inputs.config import load_clusters
    from gpucluster.pipeline import prepare_cluster

    (spec,) = [prepare_cluster(c) for c in load_clusters(str(config)) if c.name == cluster_name]
    work = folder / spec.name
    work.mkdir(parents=True, exist_ok=True)
    rig = Cluster(binaries, work / "rig", name=f"rig-{spec.name}"[:40])
    env = rig.env()
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    env.setdefault("CHECKPOINT_DISABLE", "1")
    repo = ChartRepo(work / "charts", binaries / "helm", charts, env)
    repo.start()
    try:
        copy = mirrored_config(config, work, repo.url)
        synth(copy, work / "cdktf.out", env)
        rig.start()
        watch = PodWatch(rig)
        watch.start()
        try:
            report = rehearse_cluster(
                spec,
                work / "cdktf.out" / "stacks" / f"{spec.name}-runtime",
                rig,
                repo,
                delay=delay,
                crds_dir=crds,
                destroy=False,
            )
        finally:
            watch.stop()
        pods = watch.pods()
        crs, disabled, objects = custom_resource_images(rig)
    finally:
        rig.stop()
        repo.stop()
    staged = work / "staged"
    inventory = images_json(config, spec.name, staged)
    arch = "arm64" if str(spec.criteria.accelerator) in ("gb200", "gb300", "gh200") else "amd64"
    served: dict[str, int] = {}
    for c in report.get("charts", []):
        served[c["how"]] = served.get(c["how"], 0) + 1
    shutil.rmtree(work / "rig", ignore_errors=True)
    return {
        "report": report,
        "inventory": inventory,
        "comparison": compare(pod_images(pods), crs, inventory, arch=arch),
        "disabled": disabled,
        "customResources": objects,
        "pods": len(pods),
        "servedCharts": served,
    }
