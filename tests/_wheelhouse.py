"""Wheels of the distributions this environment already has installed, for a fresh virtual
environment that must install offline (``pip install --no-index --find-links``).

:func:`wheelhouse` walks the requirements of a wheel's METADATA (with the extras asked for)
through the installed distributions and writes one wheel per distribution it reaches, from the
files the installation recorded (``RECORD``), with a new ``RECORD`` of their hashes; the tags are
the ones the installed ``WHEEL`` file names. Files outside ``site-packages`` (console scripts) are
left out: pip writes them again from ``entry_points.txt``. Not a test module: plain code.
"""

from __future__ import annotations

import base64
import csv
import email
import hashlib
import io
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}
"""dist-info files an installer writes, not part of a wheel (RECORD is written anew)."""


def requirements_of(meta: email.message.Message, extras: set[str]) -> list[Requirement]:
    """``Requires-Dist`` entries of ``meta`` whose marker holds for this interpreter and ``extras``."""
    found = []
    for text in meta.get_all("Requires-Dist") or []:
        req = Requirement(text)
        envs = [dict(default_environment(), extra=e) for e in (extras or {""})] + [
            dict(default_environment(), extra="")
        ]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            found.append(req)
    return found


def closure(roots: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions ``roots`` need, recursively (extras followed), sorted by name.

    Raises:
        LookupError: a needed distribution is not installed here.
    """
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError as err:
            raise LookupError(f"{req.name} is not installed in this environment") from err
        if name not in seen:
            seen[name] = dist
            todo.extend(requirements_of(dist.metadata, set()))
        if req.extras:
            todo.extend(
                r
                for r in requirements_of(dist.metadata, set(req.extras))
                if r.marker is not None and "extra" in str(r.marker)
            )
    return [seen[n] for n in sorted(seen)]


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """One wheel of ``dist`` in ``out`` (stored, not compressed: these are copied once)."""
    info = next(
        f for f in dist.files if f.parts[0].endswith(".dist-info") and f.name == "METADATA"
    ).parts[0]
    wheel_meta = email.message_from_string((dist.locate_file(info) / "WHEEL").read_text())
    tags = wheel_meta.get_all("Tag")
    py, abi, plat = (".".join(sorted({t.split("-")[i] for t in tags})) for i in range(3))
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    target = out / f"{name}-{dist.version}-{py}-{abi}-{plat}.whl"
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for rel in sorted(dist.files, key=str):
            if rel.parts[0] == ".." or "__pycache__" in rel.parts or rel.suffix == ".pyc":
                continue
            if rel.parts[0] == info and rel.name in INSTALLER_FILES:
                continue
            path = Path(dist.locate_file(rel))
            if not path.is_file():
                continue
            data = path.read_bytes()
            archive.writestr(str(rel), data)
            writer.writerow([str(rel), _hash(data), len(data)])
        writer.writerow([f"{info}/RECORD", "", ""])
        archive.writestr(f"{info}/RECORD", record.getvalue())
    return target


def wheelhouse(wheel: Path, extras: set[str], out: Path) -> list[Path]:
    """Wheels, in ``out``, of every installed distribution ``wheel`` needs with ``extras``."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(archive.read(name))
    out.mkdir(parents=True, exist_ok=True)
    return [repack(dist, out) for dist in closure(requirements_of(meta, extras))]
