"""A per-user cache of results keyed by the content they were computed from (``gpucluster plan`` speed).

What is kept (each entry a small file ``<cache dir>/<kind>/<key>``):

* ``catalog-valid``: markers that the shipped catalog files passed their JSON Schemas
  (:mod:`gpucluster.recipes.catalog`), keyed by the bytes of every file, the schemas, the validating
  code and the gpucluster, jsonschema and Python versions;
* ``yaml-parse``: parsed catalog files and plugins' data files (:mod:`gpucluster.recipes.catalog`), keyed
  by the text, catalog.py's source and the PyYAML install;
* ``yaml-strict``: strictly parsed user YAML -- cluster files, values files they name
  (:mod:`gpucluster.yamlsafe`), keyed by the text, yamlsafe.py's source and the PyYAML install;
* ``chart-parse``: parsed chart texts (:func:`gpucluster.charts.manifests.chart_documents`), keyed by the
  text, the parser chosen and the identity of the ``manifest-render`` entries;
* ``manifest-render`` and ``yaml-dump``: the shipped templates' renderings and plain documents'
  YAML (:mod:`gpucluster.charts.manifests`), keyed by template text and context or document, manifests.py's
  source, the jinja2/MarkupSafe/PyYAML installs and the gpucluster version;
* ``synth-cluster``: a cluster's synthesized stacks (:mod:`gpucluster_cdk.stacks.reuse`), keyed by
  its plan, the code and the installed CDK distributions and bindings, and used only while the
  modules the building process had loaded are unchanged.

Every key is a sha256 of everything the result depends on, so an entry is never stale: changed
content is a different key. Every read is checked (header, key, sha256 of the payload) and
anything unexpected -- a missing, unreadable, read-only or corrupt cache, a folder that is a
file, a concurrent writer -- is a miss: the caller computes the result as if there were no
cache. Writes go to a temporary file renamed into place (``os.replace``), so a reader sees a
whole entry or none; a failed write is ignored. Output never depends on the cache.

Whose cache is trusted (as ssh and pip do): the cache folder, its ``<kind>`` subfolder and the
entry itself must each be owned by the current (effective) user and writable by neither group
nor others; otherwise the cache is treated as disabled (every read a miss, no write). A shared
or foreign folder (``GPUCLUSTER_CACHE_DIR=/tmp/shared``, a folder another user made) would let
someone else plant an entry -- a forged parsed catalog changing the Terraform output, a forged
"valid" marker skipping the schema checks, or bytes crafted to crash :mod:`marshal`. Folders this
module creates are mode 0700 and entries 0600. On a system without ``os.geteuid`` (Windows) only
the checksums apply. Entries are opened with ``O_NONBLOCK | O_NOFOLLOW`` and read only when they
are regular files (:func:`open_regular`: a planted FIFO would block ``open``), at most
:data:`MAX_ENTRY_BYTES`; a ``marshal`` entry's declared lengths are checked before it is decoded
(:func:`_bounded_marshal`) and any failure of the decode is a miss.

Size: each kind is kept under a bound (:data:`LIMITS`, else :data:`DEFAULT_LIMIT` bytes) by
removing its least recently used entries (:func:`prune`). A hit refreshes its entry's modification
time when that is older than :data:`TOUCH_AFTER`, so "used" is the last hour's precision; at most
once per :data:`PRUNE_EVERY` per kind (the modification time of a marker ``.pruned/<kind>`` in the
cache folder), a write looks at
the kind's entries and, when they exceed the bound, removes the oldest until they take at most
:data:`PRUNE_TO` of it (and temporary files of writers gone for an hour). Removing an entry costs
only a recomputation.

Folder: ``$GPUCLUSTER_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpucluster``, else
``~/.cache/gpucluster``. ``GPUCLUSTER_CACHE_DIR=off`` -- or any relative path -- disables this cache. (The chart cache,
:mod:`gpucluster.charts.chartcache`, is ``$XDG_CACHE_HOME/gpucluster/charts`` or
``~/.cache/gpucluster/charts`` unless ``$GPUCLUSTER_CHART_CACHE`` moves it; it follows
:func:`trusted_path` too.)
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

CACHE_DIR_ENV = "GPUCLUSTER_CACHE_DIR"
"""Environment variable: the cache folder (``off``: no cache)."""

_MAGIC = b"gpucluster-cache 1\n"


def cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The cache folder (see the module docstring), or None when disabled or no home is known.

    Only absolute folders are used: a relative ``GPUCLUSTER_CACHE_DIR`` disables the cache (it
    would put parsed cluster and values files -- secrets a values file holds included -- into
    whatever folder the command runs in, such as the project's git work tree), and a relative
    ``XDG_CACHE_HOME`` is ignored as the XDG Base Directory Specification says ("All paths set in
    these environment variables must be absolute. If an implementation encounters a relative path
    in any of these variables it should consider the path invalid and ignore it",
    https://specifications.freedesktop.org/basedir-spec/latest/)."""
    env = os.environ if env is None else env
    value = env.get(CACHE_DIR_ENV)
    if value:
        return None if value == "off" or not os.path.isabs(value) else Path(value)
    base = env.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError, OSError):  # no home directory
            return None
    return Path(base) / "gpucluster"


def digest(parts: Iterable[bytes | str]) -> str:
    """sha256 hex of ``parts``, each length-prefixed (no two part lists collide by concatenation)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


_FOLDERS: dict[tuple[str | None, str | None], str | None] = {}


def _folder(env: Mapping[str, str] | None) -> str | None:
    """:func:`cache_dir` as a string, remembered per (``$GPUCLUSTER_CACHE_DIR``, ``$XDG_CACHE_HOME``)."""
    env = os.environ if env is None else env
    marker = (env.get(CACHE_DIR_ENV), env.get("XDG_CACHE_HOME"))
    if marker not in _FOLDERS:
        folder = cache_dir(env)
        _FOLDERS[marker] = None if folder is None else str(folder)
    return _FOLDERS[marker]


def _uid() -> int | None:
    """The effective user id that must own the cache (None: no uids on this system)."""
    geteuid = getattr(os, "geteuid", None)
    return None if geteuid is None else geteuid()


def _trusted(st: os.stat_result, *, folder: bool) -> bool:
    """Whether ``st`` is a folder (or a regular file) owned by :func:`_uid`, not group/world-writable."""
    if not (stat.S_ISDIR(st.st_mode) if folder else stat.S_ISREG(st.st_mode)):
        return False
    uid = _uid()
    return uid is None or (st.st_uid == uid and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def trusted_path(
    path: str | os.PathLike[str], *, folder: bool, follow_symlinks: bool = True
) -> bool:
    """Whether ``path`` is a folder (``folder=True``) or a regular file owned by the current user
    and writable by neither group nor others: this cache's rule (module docstring), which the
    chart cache (:mod:`gpucluster.charts.chartcache`) applies to its folders and files too. False when it
    cannot be examined; ``follow_symlinks=False`` makes a symbolic link never trusted."""
    try:
        st = os.stat(path) if follow_symlinks else os.lstat(path)
    except (OSError, ValueError):
        return False
    return _trusted(st, folder=folder)


def _trusted_folders(folder: str, kind: str) -> bool:
    """Whether ``folder`` and ``folder/kind`` (symlinks followed) exist and are :func:`_trusted`."""
    try:
        return _trusted(os.stat(folder), folder=True) and _trusted(
            os.stat(os.path.join(folder, kind)), folder=True
        )
    except (OSError, ValueError):
        return False


MAX_ENTRY_BYTES = 64 << 20
"""Largest entry read (64 MiB); a larger file is a miss."""

DEFAULT_LIMIT = 128 << 20
"""Bytes a kind's entries may take (128 MiB) unless :data:`LIMITS` names the kind."""

LIMITS = {"synth-cluster": 1 << 30}
"""Bound per kind, in bytes: ``synth-cluster`` 1 GiB (an AKS cluster's two stacks are about 150 KiB:
some 7,000 clusters' stacks)."""

TOUCH_AFTER = 3600
"""Seconds: a hit sets its entry's modification time to now when it is older than this."""

PRUNE_EVERY = 3600
"""Seconds: the least time between two looks at one kind's size (:func:`prune`)."""

PRUNE_TO = 0.8
"""A pruned kind keeps at most this share of its bound (so the next write does not prune again)."""

_PRUNE_MARKERS = ".pruned"
"""Folder of the cache folder holding one marker file per kind, touched when the kind is pruned."""

_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def open_regular(path: str | os.PathLike[str]) -> int | None:
    """A file descriptor of ``path`` opened for reading without blocking and without following a
    final symbolic link, or None when it cannot be opened or is not a regular file (a FIFO, a
    device, a folder). Shared by every reader of files others could plant (cache entries, the
    chart cache's ``Chart.yaml``). The caller closes it."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _read_at_most(fd: int, limit: int) -> bytes | None:
    """At most ``limit`` bytes of ``fd``; None when it holds more."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None


def get(kind: str, key: str, *, env: Mapping[str, str] | None = None) -> bytes | None:
    """The payload stored under ``(kind, key)``, or None (absent, disabled, unreadable, corrupt
    or not trusted: see the module docstring)."""
    folder = _folder(env)
    if folder is None or not _trusted_folders(folder, kind):
        return None
    try:  # without blocking (a FIFO planted as an entry would hang open()), no link, regular files only
        fd = os.open(os.path.join(folder, kind, key), _OPEN_FLAGS)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not _trusted(st, folder=False):
            return None
        data = _read_at_most(fd, MAX_ENTRY_BYTES)
        if data is not None and time.time() - st.st_mtime > TOUCH_AFTER:
            os.utime(fd)  # used: the last to be pruned (prune)
    except OSError:
        return None
    finally:
        os.close(fd)
    if data is None:
        return None
    head = _MAGIC + key.encode("ascii") + b"\n"
    if not data.startswith(head) or len(data) < len(head) + 65:
        return None
    check, payload = data[len(head) : len(head) + 64], data[len(head) + 65 :]
    if (
        data[len(head) + 64 : len(head) + 65] != b"\n"
        or hashlib.sha256(payload).hexdigest().encode("ascii") != check
    ):
        return None
    return payload


def put(kind: str, key: str, payload: bytes, *, env: Mapping[str, str] | None = None) -> bool:
    """Store ``payload`` under ``(kind, key)``; False (and nothing raised) when it cannot be written
    or the folders are not trusted (see the module docstring)."""
    folder = cache_dir(env)
    if folder is None:
        return False
    target = folder / kind / key
    tmp = target.with_name(f".{key}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    data = (
        _MAGIC
        + key.encode("ascii")
        + b"\n"
        + hashlib.sha256(payload).hexdigest().encode("ascii")
        + b"\n"
        + payload
    )
    try:
        # the cache folder and its kind subfolder each made 0700 (mkdir's parents=True would make
        # the cache folder with the umask's mode, group-writable under umask 002)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _trusted(
            os.stat(folder), folder=True
        ):  # nothing created in a folder others can write
            return False
        target.parent.mkdir(exist_ok=True, mode=0o700)
        if not _trusted_folders(str(folder), kind):
            return False
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError):
        return False
    if _prune_due(str(folder), kind):
        prune(kind, env=env)
    return True


def _prune_due(folder: str, kind: str) -> bool:
    """Whether the kind's marker (``.pruned/<kind>``) is missing or older than :data:`PRUNE_EVERY`."""
    try:
        return (
            time.time() - os.stat(os.path.join(folder, _PRUNE_MARKERS, kind)).st_mtime > PRUNE_EVERY
        )
    except OSError:
        return True


def prune(kind: str, *, limit: int | None = None, env: Mapping[str, str] | None = None) -> int:
    """Keep kind ``kind`` under ``limit`` bytes (default: :data:`LIMITS`, else :data:`DEFAULT_LIMIT`).

    When its entries take more, the least recently used (oldest modification time; a hit refreshes
    it, :data:`TOUCH_AFTER`) are removed until they take at most :data:`PRUNE_TO` of ``limit``.
    Temporary files of writes older than :data:`PRUNE_EVERY` are removed too. Only regular files of
    a trusted kind folder (module docstring) are looked at; anything that cannot be examined or
    removed is left (another process may be pruning too). The kind's marker is touched.

    Returns:
        the number of files removed.
    """
    folder = _folder(env)
    if folder is None or not _trusted_folders(folder, kind):
        return 0
    kind_folder = os.path.join(folder, kind)
    limit = LIMITS.get(kind, DEFAULT_LIMIT) if limit is None else limit
    now, removed = time.time(), 0
    entries: list[tuple[float, int, str]] = []
    try:
        with os.scandir(kind_folder) as found:
            for item in found:
                try:
                    st = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not _trusted(st, folder=False):
                    continue
                if item.name.startswith("."):
                    if item.name.endswith(".tmp") and now - st.st_mtime > PRUNE_EVERY:
                        removed += _unlink(item.path)  # a writer that died before its rename
                    continue
                entries.append((st.st_mtime, st.st_size, item.path))
        markers = os.path.join(folder, _PRUNE_MARKERS)
        os.makedirs(markers, mode=0o700, exist_ok=True)
        if _trusted(os.stat(markers), folder=True):
            marker = os.path.join(markers, kind)
            flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            os.close(os.open(marker, flags, 0o600))
            os.utime(marker)
    except OSError:
        return removed
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return removed
    for _mtime, size, path in sorted(entries):
        if total <= limit * PRUNE_TO:
            break
        if _unlink(path):
            removed += 1
            total -= size
    return removed


def _unlink(path: str) -> int:
    try:
        os.unlink(path)
    except OSError:
        return 0
    return 1


def code_identity(
    tag: str, source: str | os.PathLike[str], modules: Iterable[str] = ()
) -> str | None:
    """Digest of the code a cached result depends on besides its input: ``tag`` (the kind and its
    format version), the gpucluster and Python versions, the bytes of ``source`` (the module that
    makes the result: ``__file__``, read, so a checkout's edit without a version bump is another
    key) and :func:`module_identity` of each of ``modules`` (the libraries it uses, not imported).
    None when ``source`` cannot be read (an install without sources): then nothing is cached."""
    from gpucluster import __version__

    try:
        code = Path(source).read_bytes()
    except OSError:
        return None
    return digest(
        [tag, __version__, sys.version, code, *(module_identity(name) for name in modules)]
    )


_DISTRIBUTIONS = {"yaml": "pyyaml"}
"""Import name -> distribution name where they differ (PyYAML installs ``yaml`` with
``PyYAML-<version>.dist-info``, written ``pyyaml-<version>.dist-info`` by current pip)."""


def module_identity(name: str) -> str:
    """Which installed copy of top-level module ``name`` would be imported, without importing it:
    its file's path, size, mtime, inode and ctime (a rewrite in place that keeps size and mtime
    still changes the ctime, which no user can set back), and the ``<distribution>-<version>.dist-info``
    folders beside its package (the distribution named as the module, or :data:`_DISTRIBUTIONS`; a
    reinstall or upgrade changes this string) and, for a package, the names in its folder (whether
    PyYAML's libyaml extension ``_yaml`` is there, without importing the package). ``"<name> absent"``
    when not found."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    origin = getattr(spec, "origin", None)
    if not origin:
        return f"{name} absent"
    try:
        st = os.stat(origin)
        package = Path(origin).parent
        site = package.parent if package.name == name else package
        prefix = _DISTRIBUTIONS.get(name, name).replace("-", "_").lower() + "-"
        metadata = sorted(
            e
            for e in os.listdir(site)
            if e.lower().startswith(prefix) and e.endswith((".dist-info", ".egg-info"))
        )
        files = (
            sorted(e for e in os.listdir(package) if e != "__pycache__")
            if package.name == name
            else []
        )
    except OSError:
        return f"{name} at {origin} unreadable"
    return f"{name} {origin} {st.st_size} {st.st_mtime_ns} {st.st_ino} {st.st_ctime_ns} {' '.join(metadata)} [{' '.join(files)}]"


_PLAIN_SCALARS = (str, int, float, bool, type(None))


def is_plain(value: object) -> bool:
    """Whether ``value`` is plain data that ``marshal`` (version 2) writes and reads back exactly:
    exact ``dict``/``list`` of exact ``str``/``int``/``float``/``bool``/``None`` (dict keys
    scalars too), no container occurring twice (version 2 keeps no shared references) and no cycle."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t in _PLAIN_SCALARS:
            continue
        if t is dict:
            if id(v) in seen:
                return False
            seen.add(id(v))
            for k, item in v.items():  # type: ignore[attr-defined]
                if type(k) not in _PLAIN_SCALARS:
                    return False
                stack.append(item)
        elif t is list:
            if id(v) in seen:
                return False
            seen.add(id(v))
            stack.extend(v)  # type: ignore[arg-type]
        else:
            return False
    return True


MISS = object()
"""What :func:`get_plain` returns for a miss (``None`` is plain data a parse may give)."""


def _bounded_marshal(data: bytes) -> bool:
    """Whether ``data`` is exactly one ``marshal`` (version 2) object made only of what
    :func:`put_plain` writes -- ``None``/``True``/``False``, 32-bit and long ints, binary floats,
    strings, lists and dicts -- with every declared length within the bytes that follow.

    ``marshal.loads`` allocates what a header declares before reading it: a 5-byte list header
    claiming 2**31 items asks for 16 GiB. Checked first, a decode allocates at most about eight
    times the entry's size (a list item takes at least one byte). Walked without recursion."""
    n, pos = len(data), 0
    frames: list[list] = [
        ["list", 1]
    ]  # ["list", items left] or ["dict", True when a key comes next]
    while frames:
        top = frames[-1]
        if top[0] == "list" and top[1] == 0:
            frames.pop()
            continue
        if pos >= n:
            return False
        code = data[pos]
        pos += 1
        if top[0] == "list":
            top[1] -= 1
        elif top[1]:  # a dict's key, or its end
            if code == 0x30:  # '0' (NULL)
                frames.pop()
                continue
            top[1] = False
        else:
            top[1] = True
        if code in (0x4E, 0x54, 0x46):  # 'N' 'T' 'F'
            continue
        if code in (0x69, 0x67):  # 'i' int32, 'g' binary float
            pos += 4 if code == 0x69 else 8
            if pos > n:
                return False
            continue
        if code == 0x7B:  # '{'
            frames.append(["dict", True])
            continue
        if (
            code not in (0x6C, 0x75, 0x74, 0x5B) or pos + 4 > n
        ):  # 'l' long, 'u' 't' strings, '[' list
            return False
        size = int.from_bytes(data[pos : pos + 4], "little", signed=True)
        pos += 4
        length = abs(size) * 2 if code == 0x6C else size  # a long: |size| 15-bit digits of 2 bytes
        if length < 0 or length > n - pos:
            return False
        if code == 0x5B:
            frames.append(["list", size])
        else:
            pos += length
    return pos == n


def get_plain(kind: str, key: str, *, env: Mapping[str, str] | None = None) -> object:
    """The plain data (:func:`is_plain`) stored by :func:`put_plain` under ``(kind, key)``, or
    :data:`MISS`: absent, unusable (see :func:`get`), not bounded ``marshal`` data
    (:func:`_bounded_marshal`), or not plain data. No failure of the decode is raised."""
    payload = get(kind, key, env=env)
    if payload is None or not _bounded_marshal(payload):
        return MISS
    try:
        value = marshal.loads(payload)
    except Exception:  # noqa: BLE001 - ValueError, EOFError, TypeError, MemoryError, RecursionError: a miss
        return MISS
    return value if is_plain(value) else MISS


def put_plain(kind: str, key: str, value: object, *, env: Mapping[str, str] | None = None) -> bool:
    """Store ``value`` as ``marshal`` (version 2) under ``(kind, key)`` if it is plain data
    (:func:`is_plain`: it reads back exactly); False when it is not or cannot be written."""
    return is_plain(value) and put(kind, key, marshal.dumps(value, 2), env=env)  # type: ignore[arg-type]  # is_plain: marshallable
