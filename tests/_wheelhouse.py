"""Wheels of the distributions this environment already has installed, for a fresh virtual
environment that must install offline (``pip install --no-index --find-links``).

:func:`wheelhouse` walks the requirements of a wheel's METADATA (with the extras asked for)
through the installed distributions and writes one wheel per distribution it reaches, from the
files the installation recorded (``RECORD``), with a new ``RECORD`` of their hashes; the tags are
the ones the installed ``WHEEL`` file names. Files outside ``site-packages`` (console scripts) are
left out: pip writes them again from ``entry_points.txt``. Environment markers are evaluated for
a target interpreter (:func:`interpreter_environment`; default: this one), so a wheelhouse can be
made for a Python of another version. A distribution whose wheel is built for this interpreter's
ABI (``cp311``) cannot be repacked for another one: :func:`portable` tells them apart. Not a test
module: plain code.
"""

from __future__ import annotations

import base64
import csv
import email
import hashlib
import io
import json
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}
"""dist-info files an installer writes, not part of a wheel (RECORD is written anew)."""


INTERPRETER_MARKERS = """
import json, platform, sys
info = sys.implementation.version
version = f"{info.major}.{info.minor}.{info.micro}"
if info.releaselevel != "final":
    version += info.releaselevel[0] + str(info.serial)
print(json.dumps({
    "implementation_name": sys.implementation.name,
    "implementation_version": version,
    "platform_python_implementation": platform.python_implementation(),
    "python_full_version": platform.python_version(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
}))
"""
"""What differs between two interpreters of one machine, computed as ``packaging.markers.
default_environment`` does (PEP 508 "Environment Markers")."""


def interpreter_environment(python: str | None = None) -> dict[str, str]:
    """PEP 508 marker environment of the interpreter ``python`` (a path; None: this one): this
    machine's platform markers with that interpreter's version and implementation markers.

    Raises:
        subprocess.CalledProcessError: ``python`` does not run.
    """
    env = dict(default_environment())
    if python is not None:
        out = subprocess.run(
            [python, "-I", "-c", INTERPRETER_MARKERS],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        env.update(json.loads(out))
    return env


def requirements_of(
    meta: email.message.Message, extras: set[str], env: dict[str, str] | None = None
) -> list[Requirement]:
    """``Requires-Dist`` entries of ``meta`` whose marker holds for ``extras`` and the marker
    environment ``env`` (:func:`interpreter_environment`; default: this interpreter's)."""
    base = env or default_environment()
    found = []
    for text in meta.get_all("Requires-Dist") or []:
        req = Requirement(text)
        envs = [dict(base, extra=e) for e in (extras or {""})] + [dict(base, extra="")]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            found.append(req)
    return found


def closure(
    roots: list[Requirement], env: dict[str, str] | None = None
) -> list[metadata.Distribution]:
    """The installed distributions ``roots`` need, recursively (extras followed), sorted by name;
    markers evaluated for ``env`` (see :func:`requirements_of`).

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
            todo.extend(requirements_of(dist.metadata, set(), env))
        if req.extras:
            todo.extend(
                r
                for r in requirements_of(dist.metadata, set(req.extras), env)
                if r.marker is not None and "extra" in str(r.marker)
            )
    return [seen[n] for n in sorted(seen)]


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _info(dist: metadata.Distribution) -> str:
    return next(
        f for f in dist.files if f.parts[0].endswith(".dist-info") and f.name == "METADATA"
    ).parts[0]


def _tags(dist: metadata.Distribution) -> list[str]:
    """The wheel tags (``py3-none-any``) the installed ``WHEEL`` file names."""
    wheel_meta = email.message_from_string((dist.locate_file(_info(dist)) / "WHEEL").read_text())
    return wheel_meta.get_all("Tag") or []


def portable(dist: metadata.Distribution) -> bool:
    """True when ``dist``'s wheel fits any CPython 3 of this platform: its ABI tags are ``none``
    or ``abi3`` (PEP 425, PEP 384), so a repacked copy installs on another Python version."""
    return all(tag.split("-")[1] in ("none", "abi3") for tag in _tags(dist))


def repack(dist: metadata.Distribution, out: Path) -> Path:
    """One wheel of ``dist`` in ``out`` (stored, not compressed: these are copied once)."""
    info = _info(dist)
    tags = _tags(dist)
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


def wheelhouse(
    wheel: Path, extras: set[str], out: Path, env: dict[str, str] | None = None
) -> list[Path]:
    """Wheels, in ``out``, of every installed distribution ``wheel`` needs with ``extras`` (for
    the marker environment ``env``; default: this interpreter's)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(archive.read(name))
    out.mkdir(parents=True, exist_ok=True)
    return [repack(dist, out) for dist in closure(requirements_of(meta, extras, env), env)]
