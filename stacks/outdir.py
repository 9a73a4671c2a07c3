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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from gpucluster.errors import GpuclusterError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 1 << 1


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False when unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(new: Path, final: Path) -> None:
    """Make folder ``new`` appear at ``final``, replacing what is there in one step.

    Raises:
        OSError: ``final`` exists and is not a folder, or the rename fails.
    """
    new, final = Path(new), Path(final)
    if not final.exists() and not final.is_symlink():
        try:
            os.rename(new, final)
            return
        except OSError as err:  # a concurrent synth put its output there first: replace that
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    if not final.is_dir() or final.is_symlink():
        raise OSError(errno.ENOTDIR, f"{final} exists and is not a folder; refusing to replace it")
    if _exchange(new, final):
        shutil.rmtree(new)  # now holds the previous output
        return
    old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
    os.rmdir(old)
    os.rename(final, old)
    os.rename(new, final)
    shutil.rmtree(old)


_ELSEWHERE = "synthesize elsewhere (cdktf synth --output DIR, or CDKTF_OUTDIR for main.py)"


def _output_error(message: str, fix: str) -> GpuclusterError:
    return GpuclusterError(message, key="CDKTF_OUTDIR", fix=fix, id="output")


def _checked_target(final: Path) -> Path:
    """The folder to replace: ``final``, or the folder a symbolic link ``final`` points to.

    Raises:
        GpuclusterError: ``final`` is a file (or another non-folder), or a link to a missing folder.
    """
    if final.is_symlink():
        target = final.resolve()
        if not target.is_dir():
            raise _output_error(f"{final} is a symbolic link to a missing folder ({target})",
                                f"create {target}, remove the link, or {_ELSEWHERE}")
        return target
    if final.exists() and not final.is_dir():
        raise _output_error(f"{final} exists and is not a folder; refusing to replace it",
                            f"remove or rename it, or {_ELSEWHERE}")
    return final


@contextmanager
def staged_outdir(final: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty sibling folder of ``final``; on success it replaces ``final`` atomically.

    ``final`` may be missing (created), a folder, or a symbolic link to a folder (the link is
    kept; the folder it points to is replaced). On any exception the staged folder is removed and
    ``final`` is left exactly as it was.

    Raises:
        GpuclusterError: before anything is staged, when ``final`` is a file, a link to a missing
            folder, or its parent folder is not writable.
    """
    final = _checked_target(Path(final).absolute())
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    except OSError as err:
        raise _output_error(f"cannot create the staging folder next to {final}: {err.strerror or err}",
                            f"make {final.parent} writable, or {_ELSEWHERE}") from None
    try:
        yield staged
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staged, 0o777 & ~umask)
        replace_dir(staged, final)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
