"""The chart cache: pulled charts on disk, per user, and whose entries are trusted (pure Python).

Layout (one folder per pinned chart)::

    <cache>/<scheme>/<host>/<path...>/<chart>/<version>/<chart>/Chart.yaml ...

``<cache>`` is ``--cache``, else ``$GPUCLUSTER_CHART_CACHE``, else
``$XDG_CACHE_HOME/gpucluster/charts``, else ``~/.cache/gpucluster/charts`` (:func:`default_cache_dir`):
a folder of the user who runs gpucluster, never inside the tool's installation. The repository
in the key is the one the chart was fetched from (the mirror when the cluster file names one,
:mod:`gpucluster.charts.mirrors`), so ``gpucluster charts pull``, ``render`` and ``lint`` find the same
entry.

Trust (the rule of the per-user result cache, :func:`gpucluster.diskcache.trusted_path`): an
entry is used only when the cache folder, every folder from it down to the entry, and every
folder and file inside the entry are owned by the current user and writable by neither group
nor others, and the entry holds only folders and regular files (no symbolic link, FIFO or
device). Anything else is a miss: a chart another user planted in a shared ``XDG_CACHE_HOME``
would otherwise be what ``render``/``lint`` show as "what Terraform installs". Folders this module
creates are mode 0700 and files 0600; a store refuses (:class:`ChartCacheError`) to write below a
folder that is not trusted.

An entry is written whole or not at all: the chart is fetched into a temporary folder beside
the entry, its modes set, then renamed into place (``os.replace``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from gpucluster.diskcache import trusted_path

CACHE_ENV = "GPUCLUSTER_CHART_CACHE"
"""Environment variable: folder of pulled charts (default ``~/.cache/gpucluster/charts``)."""


class ChartCacheError(OSError):
    """The cache cannot take an entry: a folder on the way is not trusted, or cannot be written."""


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$GPUCLUSTER_CHART_CACHE``, else ``$XDG_CACHE_HOME/gpucluster/charts`` (when absolute: a relative
    one is ignored, as the XDG Base Directory Specification says), else ``~/.cache/gpucluster/charts``."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(
        base
    ):  # a relative one is ignored (XDG Base Directory Specification)
        base = str(Path.home() / ".cache")
    return Path(base) / "gpucluster" / "charts"


def _clean(segment: str) -> str:
    segment = re.sub(r"[^A-Za-z0-9._-]", "_", segment)
    return "_" if segment in ("", ".", "..") else segment


def cache_key(repository: str, chart: str, version: str) -> Path:
    """Relative cache folder of one pinned chart: ``<scheme>/<host>/<path...>/<chart>/<version>``.

    Every segment is reduced to ``[A-Za-z0-9._-]`` (others become ``_``; ``.``/``..``/empty
    become ``_``), so no key leaves the cache folder. ``oci://registry.k8s.io/nfd/charts`` +
    ``node-feature-discovery`` + ``0.19.0`` -> ``oci/registry.k8s.io/nfd/charts/node-feature-discovery/0.19.0``.
    """
    scheme, sep, rest = (repository or "").partition("://")
    if not sep:
        scheme, rest = "local", repository or ""
    return Path(*[_clean(p) for p in (scheme, *[p for p in rest.split("/") if p], chart, version)])


def entry_dir(cache_dir: Path, repository: str, chart: str, version: str) -> Path:
    """``<cache_dir>/<cache_key>``: the entry folder; the chart itself is ``<entry>/<chart>``."""
    return Path(cache_dir) / cache_key(repository, chart, version)


def _trusted_chain(cache_dir: Path, entry: Path) -> bool:
    """The cache folder and every folder from it down to ``entry`` (included) are trusted."""
    folder = Path(cache_dir)
    if not trusted_path(folder, folder=True):
        return False
    for part in entry.relative_to(cache_dir).parts:
        folder = folder / part
        if not trusted_path(folder, folder=True, follow_symlinks=False):
            return False
    return True


def _trusted_tree(root: Path) -> bool:
    """Every folder and file below ``root`` is trusted and nothing else is there (no link, FIFO, device)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames:
            if not trusted_path(os.path.join(dirpath, name), folder=True, follow_symlinks=False):
                return False
        for name in filenames:
            if not trusted_path(os.path.join(dirpath, name), folder=False, follow_symlinks=False):
                return False
    return True


def lookup(cache_dir: Path, repository: str, chart: str, version: str) -> Path | None:
    """The cached chart folder ``<entry>/<chart>`` (it has a ``Chart.yaml``), or None: absent, or
    not trusted (module docstring)."""
    entry = entry_dir(cache_dir, repository, chart, version)
    folder = entry / _clean(chart)
    if not (folder / "Chart.yaml").is_file() or not _trusted_chain(cache_dir, folder):
        return None
    return folder if _trusted_tree(folder) else None


def _private_modes(root: Path) -> None:
    """Folders 0700 and files 0600 below ``root``; refuses anything that is neither."""
    os.chmod(root, 0o700)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(path, 0o700)
            elif stat.S_ISREG(mode):
                os.chmod(path, 0o600)
            else:
                raise ChartCacheError(
                    f"the fetched chart holds {path}, which is neither a folder nor a regular file"
                )


def _make_folders(cache_dir: Path, entry_parent: Path, made: list[Path]) -> None:
    """Create the cache folder and the folders down to ``entry_parent`` (each 0700), checking each;
    ``made`` gets each folder this call created, outermost first (:func:`_drop_made`)."""
    cache_dir = Path(cache_dir)
    missing = [p for p in (cache_dir, *cache_dir.parents) if not p.exists()]
    try:
        cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        made.extend(reversed(missing))
    except OSError as exc:
        raise ChartCacheError(f"cache folder {cache_dir}: {exc.strerror or exc}") from None
    if not trusted_path(cache_dir, folder=True):
        raise ChartCacheError(
            f"cache folder {cache_dir} is not yours alone (owned by another user, or writable by group or "
            "others); choose your own folder with --cache or GPUCLUSTER_CHART_CACHE"
        )
    folder = cache_dir
    for part in entry_parent.relative_to(cache_dir).parts:
        folder = folder / part
        try:
            folder.mkdir(mode=0o700)
            made.append(folder)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ChartCacheError(f"cache folder {folder}: {exc.strerror or exc}") from None
        if not trusted_path(folder, folder=True, follow_symlinks=False):
            raise ChartCacheError(
                f"cache folder {folder} is not yours alone (a link, owned by another user, or writable by "
                "group or others); remove it, or choose another cache folder"
            )


def _drop_made(made: list[Path]) -> None:
    """Remove the folders of ``made`` that are still empty, innermost first: a pull that stored
    nothing leaves the cache as it was (another run's file in one keeps it)."""
    for folder in reversed(made):
        try:
            folder.rmdir()
        except OSError:
            return


def store(
    cache_dir: Path, repository: str, chart: str, version: str, fetch: Callable[[Path], None]
) -> Path:
    """Put one chart into the cache and return its folder ``<entry>/<chart>``.

    Args:
        fetch: called with an empty private temporary folder; it must leave the unpacked chart in
            ``<folder>/<chart>/`` (other files there, e.g. the downloaded archive, are dropped).

    Raises:
        ChartCacheError: a folder on the way is not trusted or not writable, or ``fetch`` left no
            chart folder (or something other than folders and regular files).
        Exception: whatever ``fetch`` raises, unchanged (the temporary folder is removed).

    A call that stores nothing (an error, an interrupt) removes the folders it made, so the cache
    is as it was.
    """
    cache_dir = Path(cache_dir)
    entry = entry_dir(cache_dir, repository, chart, version)
    made: list[Path] = []
    try:
        _make_folders(cache_dir, entry.parent, made)
        tmp = Path(tempfile.mkdtemp(prefix=".pull-", dir=entry.parent))
    except OSError as exc:
        _drop_made(made)
        if isinstance(exc, ChartCacheError):
            raise
        raise ChartCacheError(f"cache folder {entry.parent}: {exc.strerror or exc}") from None
    old: Path | None = None
    stored = False
    try:
        fetch(tmp)  # its own errors (a repository that cannot be reached) pass through as they are
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _drop_made(made)
        raise
    try:
        name = _clean(chart)
        if not (tmp / name / "Chart.yaml").is_file():
            raise ChartCacheError(
                f"fetching {chart} {version} from {repository} gave no chart folder '{name}'"
            )
        for extra in tmp.iterdir():
            if extra.name != name:
                shutil.rmtree(
                    extra
                ) if extra.is_dir() and not extra.is_symlink() else extra.unlink()
        _private_modes(tmp)
        if os.path.lexists(entry):
            found = lookup(cache_dir, repository, chart, version)
            if found is not None:  # a concurrent pull put the same chart there first
                stored = True
                return found
            old = Path(tempfile.mkdtemp(prefix=".stale-", dir=entry.parent))
            os.replace(entry, old / "entry")  # an untrusted or broken entry: replaced, never used
        os.replace(tmp, entry)
        stored = True
        return entry / name
    except OSError as exc:
        if isinstance(exc, ChartCacheError):
            raise
        raise ChartCacheError(f"cache folder {entry.parent}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        if not stored:
            _drop_made(made)
