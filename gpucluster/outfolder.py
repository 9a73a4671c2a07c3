"""Which folders a gpucluster command may replace: its own earlier output, or nothing of the user's.

``main.py`` / ``cdktf synth`` (``CDKTF_OUTDIR``, default ``cdktf.out``) and ``gpucluster render
--out`` replace their output folder as a whole. Before anything is written, the folder given
(after following a symbolic link to the folder it names) must be one of:

* absent (it is created), or an empty folder;
* a folder holding the marker file :data:`MARKER` (``.gpucluster-output``, a regular file whose
  text is :data:`MARKER_TEXT`), which every gpucluster output carries from now on;
* an earlier output written before the marker existed: for a synthesis, ``stacks/`` (a folder)
  and at most ``manifest.json`` (a regular file) besides -- the layout of ``cdktf synth``
  (cdktf-cli 0.21, "cdktf.out" folder); for ``render``, only ``<cluster>/<release>/`` folders each holding a
  ``values.yaml``.

Anything else -- a project folder, a folder of values files, a home folder, a volume holding user
files -- is one ``error[outdir]`` line (exit 2) and nothing is touched. Whatever it holds, the
output folder is never ``/``, the user's home folder, the working folder or a folder above it,
nor a folder with a mount point directly inside it (replacing it would move the mounted volume).

Staging folders of an interrupted run (``.gpucluster-staging.*``, left inside a mount point) do
not count as the user's files.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from gpucluster.errors import GpuclusterError

MARKER = ".gpucluster-output"
"""Name of the marker file written at the top of every output folder."""

MARKER_TEXT = (
    "This folder is written by gpucluster and replaced as a whole by its next run "
    "(synth or render): do not keep your own files here.\n"
)
"""The marker's exact text (constant: the output stays byte-identical for the same input)."""

STAGING_PREFIX = ".gpucluster-staging."
"""Name prefix of a staging folder made inside an output folder that is a mount point."""

SYNTH_ELSEWHERE = "synthesize elsewhere (cdktf synth --output DIR, or CDKTF_OUTDIR for main.py)"
"""The end of a synthesis output error's ``fix:`` under ``cdktf synth`` (the folder came from
``CDKTF_OUTDIR``): how to name another output folder."""


def synth_elsewhere(key: str) -> str:
    """The end of a synthesis output error's ``fix:`` for the setting ``key`` that named the
    folder: ``gpucluster synth --out NEW_FOLDER`` for ``--out`` (an installed user has no
    ``main.py``), else :data:`SYNTH_ELSEWHERE`."""
    if key == "--out":
        return "synthesize elsewhere (gpucluster synth --out NEW_FOLDER)"
    return SYNTH_ELSEWHERE


_SYNTH_LEGACY = frozenset({"manifest.json", "stacks"})
_MARKER_READ_LIMIT = 4096


def write_marker(folder: str | os.PathLike) -> None:
    """Write :data:`MARKER` into ``folder`` (a staging folder about to become the output).

    Raises:
        OSError: the file cannot be written (the caller reports it as its output error).
    """
    with open(os.path.join(folder, MARKER), "w", encoding="utf-8") as f:
        f.write(MARKER_TEXT)


def _is_marker(path: Path) -> bool:
    """Whether ``path`` is our marker: a regular file (no link, FIFO or device; opened without
    blocking) whose text is :data:`MARKER_TEXT`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return os.read(fd, _MARKER_READ_LIMIT) == MARKER_TEXT.encode("utf-8")
    except OSError:
        return False
    finally:
        os.close(fd)


def _is_dir(path: Path) -> bool:
    return stat.S_ISDIR(os.lstat(path).st_mode)


def _legacy_synth(folder: Path, names: set[str]) -> bool:
    return (
        "stacks" in names
        and names <= _SYNTH_LEGACY
        and _is_dir(folder / "stacks")
        and (
            "manifest.json" not in names or stat.S_ISREG(os.lstat(folder / "manifest.json").st_mode)
        )
    )


def _legacy_render(folder: Path, names: set[str]) -> bool:
    for cluster in names:
        if not _is_dir(folder / cluster):
            return False
        for release in os.listdir(folder / cluster):
            values = folder / cluster / release / "values.yaml"
            if (
                not _is_dir(folder / cluster / release)
                or not os.path.lexists(values)
                or not stat.S_ISREG(os.lstat(values).st_mode)
            ):
                return False
    return bool(names)


def _protected(target: Path) -> str | None:
    """Why ``target`` (resolved) may never be an output folder, or None."""
    if target == Path(target.anchor):
        return "is the root of the file system"
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):
        home = None
    if home is not None and target == home:
        return "is your home folder"
    cwd = Path.cwd().resolve()
    if target == cwd:
        return "is the working folder"
    if target in cwd.parents:
        return f"holds the working folder {cwd}"
    return None


def _listing(names: Iterable[str], limit: int = 4) -> str:
    shown = sorted(names)
    text = ", ".join(shown[:limit])
    return text + (f" and {len(shown) - limit} more" if len(shown) > limit else "")


def check_replaceable(final: str | os.PathLike, *, kind: str, key: str, fix_elsewhere: str) -> None:
    """Refuse to replace ``final`` unless it is an earlier output or empty (see the module docstring).

    Args:
        final: the output folder as given (relative to the working folder; a symbolic link is
            judged by the folder it names).
        kind: ``"synth"`` or ``"render"`` (which pre-marker layout is recognized).
        key: the setting that named the folder (``CDKTF_OUTDIR``, ``--out``), printed as ``key=``.
        fix_elsewhere: how to name another folder (``fix:`` text, e.g. :data:`SYNTH_ELSEWHERE`).

    Raises:
        GpuclusterError: ``error[outdir]`` (one line) when the folder is not ours; nothing was touched.
            File system errors while looking are left to the caller's own checks (not raised here).
    """
    final = Path(final).absolute()
    try:
        target = final.resolve()
    except (OSError, RuntimeError, ValueError):
        return  # a loop or an unusable name: the caller's own checks word that
    why = _protected(target)
    if why is not None:
        shown = str(final) if target == final else f"{final} (-> {target})"
        raise GpuclusterError(
            f"the output folder {shown} {why}; replacing it would delete files that are not gpucluster's",
            key=key,
            id="outdir",
            allowed="a missing or empty folder, or an earlier gpucluster output",
            fix=f"{fix_elsewhere}: a folder of its own, e.g. "
            f"{final / ('cdktf.out' if kind == 'synth' else 'gpucluster.render')}",
        )
    try:
        if not target.is_dir():
            return  # absent (created), or a file: the caller refuses that with its own words
        names = {n for n in os.listdir(target) if not n.startswith(STAGING_PREFIX)}
        mounts = sorted(n for n in names if os.path.ismount(target / n))
        if mounts:
            raise GpuclusterError(
                f"the output folder {final} holds the mount point {target / mounts[0]}; replacing the folder would "
                "move the mounted volume",
                key=key,
                id="outdir",
                allowed="a missing or empty folder, or an earlier gpucluster output",
                fix=f"{fix_elsewhere}: the mount point itself, or a folder of its own inside it",
            )
        if not names or (MARKER in names and _is_marker(target / MARKER)):
            return
        if (_legacy_synth if kind == "synth" else _legacy_render)(target, names):
            return
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return
        raise GpuclusterError(
            f"cannot tell whether the output folder {final} is an earlier gpucluster output: {err.strerror or err}",
            key=key,
            id="outdir",
            fix=f"make it readable, or {fix_elsewhere}",
        ) from None
    raise GpuclusterError(
        f"the output folder {final} is not an earlier gpucluster output (it holds {_listing(names)}, and no "
        f"{MARKER} marker); replacing it would delete those files",
        key=key,
        id="outdir",
        allowed="a missing or empty folder, or one gpucluster wrote (it carries " + MARKER + ")",
        fix=f"{fix_elsewhere}, or move those files away if they are not needed",
    )


def unwritable_reason(folder: object) -> str:
    """Why ``folder`` (a path, created with its parents when missing) could not be made or
    written: ``'<ancestor> is a file'``, ``'<ancestor> is not writable'``, or ``''`` when it can
    (its nearest existing ancestor is a folder this process may write and enter).

    A command checks its output folders with it before it starts, so a bad one is one input line
    instead of an ``OSError`` deep inside."""
    existing = Path(os.path.abspath(str(folder)))
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return ""
