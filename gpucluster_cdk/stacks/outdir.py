"""Atomic replacement of the synthesis output folder (no cdktf import).

``cdktf synth`` (CLI 0.21) does not clean the output folder before running the app: it passes
``CDKTF_OUTDIR`` to the app, reads ``manifest.json`` afterwards and then deletes the
``stacks/<name>`` folders that existed before the run but are not in the new manifest. The app
itself (``cdktf.App.synth``) writes into the folder in place, stack by stack. A failing app
would therefore leave a half-written folder. gpucluster instead synthesizes into a fresh
sibling folder (``.<name>.XXXX``) and swaps it in with one ``renameat2(RENAME_EXCHANGE)``
(Linux; two renames elsewhere), so readers see either the previous or the new output.

An output folder that is a symbolic link to a folder stays a link: the folder it points to is
replaced (staged next to it, on the same file system).

Output folders that cannot be exchanged as a whole -- a mount point (a container volume,
``EBUSY``), or a folder the parent's sticky bit or ownership keeps in place (``EPERM``/``EACCES``)
-- are filled by swapping their *children*: the new output is staged inside the folder (mount
point) or next to it, then each top-level entry (``manifest.json``, ``stacks``, ...) is exchanged
in one ``renameat2`` and the entries the new output lacks are moved out. Stop signals are blocked
during the swap, and a failed step undoes the ones before it, so the folder holds the previous
or the new output, never a mix.

Only a folder that is ours is replaced (:func:`gpucluster.outfolder.check_replaceable`: absent,
empty, carrying the ``.gpucluster-output`` marker every output gets, or an earlier ``cdktf synth``
layout); anything else is one ``error[outdir]`` line before the synthesis starts, checked again
right before the swap.

A run killed outright (SIGKILL, the OOM killer, a power cut) leaves its staging folder behind.
Each staging folder holds, until the swap, a lock file (:data:`STAGING_LOCK`) its run keeps
locked (``flock``) for as long as it lives; the kernel drops the lock when the process dies. The
next run for the same output removes every staging folder of that output (``.<name>.XXXXXXXX``
beside it, or :data:`gpucluster.outfolder.STAGING_PREFIX` inside a mount point) that it can prove
is a dead run's: a folder (not a link) the user owns, holding that lock file, whose lock it
obtains at once (:func:`remove_stale_staging`). A folder without the lock file, or whose run is
still alive, is left alone.

After a successful swap the previous tree is removed best-effort: when that fails (a previous
output written by another user, e.g. after ``sudo make synth``), the run still succeeds and a
``warning[output]`` names the leftover folder and how to remove it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.outfolder import STAGING_PREFIX, check_replaceable, synth_elsewhere, write_marker

_AT_FDCWD = -100
_RENAME_EXCHANGE = 1 << 1


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False when unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


_SWAP_FALLBACK_ERRNOS = {errno.EBUSY, errno.EPERM, errno.EACCES, errno.EXDEV}
"""Errors of exchanging the whole folder after which the children are swapped instead."""

_STOP_SIGNALS = tuple(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)
)


@contextmanager
def _signals_blocked() -> Iterator[None]:
    """Defer stop signals (delivered when the block ends) while the output is being swapped."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


REMOVE_THREADS = 4
"""Threads that remove a previous output's ``stacks/<name>`` folders side by side (:func:`_remove_tree`)."""


def _remove_tree(path: Path) -> OSError | None:
    """``shutil.rmtree(path)``; the first error instead of raising (None when all is gone).

    The folders below ``path/stacks`` are removed by up to :data:`REMOVE_THREADS` threads at once:
    removing a synced output is mostly waiting for the file system's journal, which serves several
    callers at once (a 50-cluster output, synced: 0.54-0.59 s in one thread, 0.37-0.45 s in four).
    """
    import threading

    errors: list[OSError] = []

    def record(func, failed, exc_info):
        errors.append(exc_info[1])

    try:  # ``stacks`` itself not followed: a symbolic link there is removed, not what it names
        stacks = os.open(
            path / "stacks", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        )
    except OSError:
        stacks = None
    try:
        folders = []
        if stacks is not None:
            with os.scandir(stacks) as entries:
                folders = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        if len(folders) > 1:

            def remove(share: list[str]) -> None:
                for folder in share:  # relative to the descriptor: no link on the way is followed
                    shutil.rmtree(folder, dir_fd=stacks, onerror=record)

            n = min(REMOVE_THREADS, len(folders))
            threads = [threading.Thread(target=remove, args=(folders[i::n],)) for i in range(n)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        if stacks is not None:
            os.close(stacks)
    shutil.rmtree(path, onerror=record)
    return errors[0] if errors and path.exists() else None


def replace_dir(new: Path, final: Path) -> Path | None:
    """Make folder ``new`` appear at ``final``, replacing what is there in one step.

    Returns:
        None when the previous tree is gone; otherwise the folder that still holds (part of) it,
        because removing it failed (see :func:`staged_outdir`, which turns that into a warning).

    Raises:
        OSError: ``final`` exists and is not a folder, or the rename fails (nothing changed then).
    """
    new, final = Path(new), Path(final)
    if not final.exists() and not final.is_symlink():
        try:
            os.rename(new, final)
            return None
        except OSError as err:  # a concurrent synth put its output there first: replace that
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    if not final.is_dir() or final.is_symlink():
        raise OSError(errno.ENOTDIR, f"{final} exists and is not a folder; refusing to replace it")
    if _exchange(new, final):
        return new if _remove_tree(new) else None  # ``new`` now holds the previous output
    old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
    os.rmdir(old)
    os.rename(final, old)
    try:
        os.rename(new, final)
    except OSError:
        os.rename(old, final)
        raise
    return old if _remove_tree(old) else None


def swap_children(new: Path, final: Path) -> Path | None:
    """Replace the *contents* of folder ``final`` by those of ``new`` (same file system), entry by entry.

    Each top-level entry of ``new`` is exchanged with the one of the same name (``renameat2``) or
    moved in; entries of ``final`` that ``new`` lacks are moved into ``new``; staging folders
    (:data:`STAGING_PREFIX`) are left alone. A failed step undoes the steps before it. ``new``
    then holds the previous contents and is removed best-effort.

    Returns:
        None, or ``new`` when removing the previous contents failed.

    Raises:
        OSError: a step failed (``final`` holds its previous contents again).
    """
    new, final = Path(new), Path(final)
    done: list[tuple[str, str]] = []  # ("exchanged" | "moved-in" | "moved-out", name)
    try:
        for name in sorted(os.listdir(new)):
            if os.path.lexists(final / name):
                if not _exchange(new / name, final / name):
                    raise OSError(
                        errno.ENOSYS,
                        "renameat2(RENAME_EXCHANGE) is not supported here",
                        str(final / name),
                    )
                done.append(("exchanged", name))
            else:
                os.rename(new / name, final / name)
                done.append(("moved-in", name))
        incoming = {n for kind, n in done}
        for name in sorted(os.listdir(final)):
            if name not in incoming and not name.startswith(STAGING_PREFIX) and name != new.name:
                os.rename(final / name, new / name)
                done.append(("moved-out", name))
    except OSError:
        for kind, name in reversed(done):
            try:
                if kind == "exchanged":
                    _exchange(new / name, final / name)
                elif kind == "moved-in":
                    os.rename(final / name, new / name)
                else:
                    os.rename(new / name, final / name)
            except OSError:
                pass
        raise
    return new if _remove_tree(new) else None


def _output_error(message: str, fix: str, key: str = "CDKTF_OUTDIR") -> GpuclusterError:
    return GpuclusterError(message, key=key, fix=fix, id="output")


def output_error(
    err: OSError, final: Path, doing: str, key: str = "CDKTF_OUTDIR"
) -> GpuclusterError:
    """One ``error[output]`` line for a file system error while ``doing`` something with ``final``:
    a full disk (``ENOSPC``/``EDQUOT``), no permission (``EACCES``/``EPERM``), a read-only file
    system (``EROFS``), or any other ``OSError`` (its text)."""
    code = err.errno
    reason = err.strerror or str(err)
    elsewhere = synth_elsewhere(key)
    if code in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space on the file system of {final} (df -h {final}), or {elsewhere}"
    elif code in (errno.EACCES, errno.EPERM):
        fix = f"give your user write access to {final} and {final.parent} (ls -ld them), or {elsewhere}"
    elif code == errno.EROFS:
        fix = f"{final} is on a read-only file system; {elsewhere}"
    else:
        fix = f"check {final} and its file system, or {elsewhere}"
    return _output_error(
        f"{doing} {final} failed: {reason} (errno {errno.errorcode.get(code or 0, code)}); "
        "the previous output is unchanged",
        fix,
        key,
    )


def _checked_target(final: Path, key: str) -> Path:
    """The folder to replace: ``final``, or the folder a symbolic link ``final`` points to.

    Raises:
        GpuclusterError: ``final`` is a file (or another non-folder), a link to a missing folder,
            a symbolic link loop, or a name the file system refuses (too long, NUL byte).
    """
    try:
        if final.is_symlink():
            try:
                target = final.resolve(strict=True)
            except (OSError, RuntimeError):
                target = None
            if target is None or not target.is_dir():
                raise _output_error(
                    f"{final} is a symbolic link to a missing folder ({os.readlink(final)})",
                    f"create the folder it points to, remove the link, or {synth_elsewhere(key)}",
                    key,
                )
            return target
        if os.path.lexists(final) and not final.is_dir():
            raise _output_error(
                f"{final} exists and is not a folder; refusing to replace it",
                f"remove or rename it, or {synth_elsewhere(key)}",
                key,
            )
    except ValueError:
        raise _output_error(
            f"the output folder name {str(final)!r} holds a NUL byte",
            f"rename it, or {synth_elsewhere(key)}",
            key,
        ) from None
    except OSError as err:
        raise output_error(err, final, "checking", key) from None
    return final


def _make_private(folder: Path) -> None:
    """Folders 0700 and files 0600 below ``folder`` (itself included): readable by the owner only."""
    for dirpath, _dirnames, filenames in os.walk(folder):
        os.chmod(dirpath, 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)


STAGING_LOCK = ".gpucluster-staging-lock"
"""Lock file of a staging folder, held locked by the run that made it until the swap."""


def _lock_staging(staged: Path) -> int:
    """Create :data:`STAGING_LOCK` in ``staged`` and lock it (``flock``, exclusive): the returned
    descriptor keeps it locked until it is closed or the process ends."""
    import fcntl

    fd = os.open(staged / STAGING_LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def _stale(folder: Path) -> bool:
    """True when ``folder`` is provably a dead run's staging folder: a real folder the user owns,
    holding a regular :data:`STAGING_LOCK` file the user owns, whose lock is free."""
    import fcntl

    try:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        fd = os.open(folder / STAGING_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        lock = os.fstat(fd)
        if not stat.S_ISREG(lock.st_mode) or lock.st_uid != os.getuid():
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:  # EWOULDBLOCK: its run is alive
        return False
    finally:
        os.close(fd)


def remove_stale_staging(final: Path) -> list[Path]:
    """Remove the staging folders of ``final`` that dead runs left (module docstring): the
    ``.<name>.XXXXXXXX`` folders beside it and, when it is a mount point, the
    :data:`~gpucluster.outfolder.STAGING_PREFIX` folders inside it. Best effort: a folder that
    cannot be removed stays. Returns the folders removed."""
    inside = os.path.ismount(final)
    where, prefix = (final, STAGING_PREFIX) if inside else (final.parent, f".{final.name}.")
    try:
        names = sorted(os.listdir(where))
    except OSError:
        return []
    removed = []
    for name in names:
        rest = name[len(prefix) :]
        if not name.startswith(prefix) or len(rest) != 8 or not rest.replace("_", "").isalnum():
            continue  # not a name tempfile.mkdtemp gives (8 random letters, digits or '_')
        folder = where / name
        if _stale(folder) and _remove_tree(folder) is None:
            removed.append(folder)
    return removed


@contextmanager
def staged_outdir(
    final: str | os.PathLike,
    *,
    warnings: list[Problem] | None = None,
    private: bool = False,
    key: str = "CDKTF_OUTDIR",
) -> Iterator[Path]:
    """Yield a staging folder for ``final``, empty but for its run's :data:`STAGING_LOCK` (removed
    before the swap); on success its contents replace ``final``. Stale staging folders of
    ``final`` are removed first (:func:`remove_stale_staging`).

    ``final`` may be missing (created), a folder, a symbolic link to a folder (the link is kept;
    the folder it points to is replaced) or a mount point (staged inside it, children swapped).
    On any exception the staged folder is removed and ``final`` is left exactly as it was.

    Args:
        warnings: receives a ``warning[output]`` :class:`Problem` when the previous output was
            replaced but could not be removed (the run still succeeded).
        private: the output holds a literal credential: its folders are made 0700 and its files
            0600 (instead of the umask's modes) before the swap.
        key: the setting that named ``final``, printed as ``key=`` in every line about it
            (``CDKTF_OUTDIR``, the default; ``--out`` for ``gpucluster synth --out``).

    The staged folder receives the ``.gpucluster-output`` marker (:mod:`gpucluster.outfolder`)
    before the swap.

    Raises:
        GpuclusterError: ``error[outdir]`` when ``final`` is not an earlier output nor empty (see
            :func:`gpucluster.outfolder.check_replaceable`), checked before the block runs and
            again before the swap; ``error[output]`` (one line, with a fix) when ``final`` is a
            file, a link to a missing folder, its parent is not writable, the disk is full, or the
            swap fails.
    """
    given = Path(final)
    check_replaceable(given, kind="synth", key=key, fix_elsewhere=synth_elsewhere(key))
    final = _checked_target(given.absolute(), key)
    remove_stale_staging(final)
    try:
        inside = os.path.ismount(final)
        parent = final if inside else final.parent
        parent.mkdir(parents=True, exist_ok=True)
        staged = Path(
            tempfile.mkdtemp(prefix=STAGING_PREFIX if inside else f".{final.name}.", dir=parent)
        )
        try:
            lock = _lock_staging(staged)
        except OSError:
            shutil.rmtree(staged, ignore_errors=True)
            raise
    except OSError as err:
        where = "inside" if os.path.ismount(final) else "next to"
        raise _output_error(
            f"cannot create the staging folder {where} {final}: {err.strerror or err}",
            f"make {final if where == 'inside' else final.parent} writable, or {synth_elsewhere(key)}",
            key,
        ) from None
    try:
        yield staged
        os.unlink(staged / STAGING_LOCK)  # not part of the output; held locked until the end
        write_marker(staged)
        if private:
            _make_private(staged)
        check_replaceable(given, kind="synth", key=key, fix_elsewhere=synth_elsewhere(key))
        umask = os.umask(0)
        os.umask(umask)
        leftover = None
        with _signals_blocked():
            try:
                if inside:
                    leftover = swap_children(staged, final)
                else:
                    os.chmod(staged, 0o700 if private else 0o777 & ~umask)
                    try:
                        leftover = replace_dir(staged, final)
                    except OSError as err:
                        if err.errno not in _SWAP_FALLBACK_ERRNOS or not final.is_dir():
                            raise
                        leftover = swap_children(staged, final)
            except OSError as err:
                raise output_error(err, final, "replacing", key) from None
        if leftover is not None and warnings is not None:
            warnings.append(
                Problem(
                    message=f"the new output is in place, but the previous one could not be removed from {leftover} "
                    f"({getattr(_remove_tree(leftover), 'strerror', None) or 'not removable'}); it may belong to "
                    "another user (an earlier sudo run)",
                    key=key,
                    id="output",
                    fix=f"remove it as its owner (e.g. sudo rm -rf {leftover})",
                )
            )
    except OSError as err:
        shutil.rmtree(staged, ignore_errors=True)
        raise output_error(err, final, "writing", key) from None
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    finally:
        os.close(lock)
