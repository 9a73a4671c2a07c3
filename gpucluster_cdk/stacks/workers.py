"""Worker processes that build clusters' stacks in parallel (forked; no cdktf import here).

:func:`run` forks one process per share of the clusters to build, *before* this process imports
cdktf (a jsii kernel cannot be shared across a fork: :func:`can_fork`). Each worker builds an App
with its share's real stacks (plus stand-ins for the other fleet members and the fleet's stacks,
so cross-stack references register exactly as in one App: :func:`gpucluster_cdk.stacks.app.build_app`),
synthesizes it into its own folder inside the staged output folder, runs the injection check,
stores its cache entries, and reports the stacks' ``manifest.json`` entries through a pipe.

Stop signals: the workers are in this process's process group (Ctrl-C reaches them); a stop
signal to this process alone makes :func:`run` end them (SIGTERM, then wait) before the signal's
exception goes on; a worker whose parent dies gets SIGTERM (Linux ``PR_SET_PDEATHSIG``). A
worker ends at once on a stop signal (default action; its jsii kernel ends when its pipe closes)
and writes nothing to stdout or stderr; :func:`run` removes each worker's temporary folder (its
``TMPDIR``). The signals are blocked from before the fork until the worker reset them, so the
parent's handlers never run in a worker.

Without a fleet, the workers take chunks of clusters, smaller towards the end, from a shared
queue (a pipe) and build each chunk in an App of its own, so they end at about the same time
however the machine slows one of them; with a fleet, each builds its contiguous share in one App.
:class:`Helper` forks one process under the same rules for other work (the reused stacks' files).

A worker that fails for any reason makes :func:`run` return None: the caller then builds in its
own process, so every error is the one a one-process synth reports.
"""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpucluster_cdk import exit_hooks

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def can_fork() -> bool:
    """Whether worker processes can be forked here: POSIX ``fork``, no jsii kernel started in this
    process (``jsii`` not imported), no other thread running, and ``SIGCHLD`` not ignored (a
    disposition a supervisor may leave across ``exec``: the kernel then reaps every child itself,
    so none could be waited for -- ``waitpid`` fails with ``ECHILD``)."""
    return (
        hasattr(os, "fork")
        and "jsii" not in sys.modules
        and threading.active_count() == 1
        and signal.getsignal(signal.SIGCHLD) != signal.SIG_IGN
    )


def _die_with_parent(parent: int) -> None:
    """Ask Linux to send SIGTERM when the parent ends; end now if it already did."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(128 + signal.SIGTERM)


def _become_child(parent: int, blocked: Any) -> None:
    """The first steps of a forked worker or helper: the parent's exit hooks dropped, stop signals
    at their default action and unblocked (``blocked``: the mask before the fork), SIGTERM when the
    parent dies, standard output and error to ``/dev/null`` (the parent reports)."""
    exit_hooks.drop_inherited()  # the parent's exit hooks are not this process's
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    _die_with_parent(parent)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def run(
    plans: Sequence[Any],
    shares: Sequence[Sequence[str]],
    *,
    base: Path,
    final: Path,
    fleet: Any,
    exports: Mapping[str, Any],
    keys: Mapping[str, str | None],
    forked: Callable[[], None] | None = None,
    queue: bool = False,
) -> list[dict[str, Any]] | None:
    """Build the clusters named in ``shares`` (one worker each) into folders below ``base``.

    ``forked`` (if given) is called in this process once every worker is forked, before their
    results are awaited: work of this process that overlaps theirs (it may start threads).

    With ``queue`` the shares only set the number of workers: the named clusters (in share order)
    are cut into chunks that get smaller towards the end (:func:`queue_chunks`), whose numbers go
    into one pipe; each worker takes the next chunk when it is done with one (:func:`_pulled`) and
    builds it in an App of its own -- so a worker slowed down (by the other processes of the
    machine, a bigger cluster) takes fewer, and all end at about the same time.
    Only for clusters whose stacks reference no other cluster's (no fleet: an App per fleet member
    would hold stand-ins of all the others).

    Returns:
        per share, in order: ``{"folder", "stacks": names built, "manifest": name -> entry,
        "exports", "version"}``; None when a worker failed, or one could not be started (no
        pipe, temporary folder or ``fork``: a process or memory limit); the workers' folders are
        removed then.
    """
    running: dict[int, Path] = {}  # pid -> folder, until reaped
    pipes: dict[int, int] = {}  # read end -> pid, until closed
    order: list[int] = []
    privates: list[str] = []  # each worker's TMPDIR (its jsii kernel's files), removed at the end
    parent = os.getpid()
    queue_fd: int | None = None
    chunks: list[list[str]] = []
    if queue:
        try:
            queue_fd, chunks = _queue(shares)
        except OSError:  # too many chunks for one pipe: each worker builds its share
            queue_fd = None
    whole = False  # every worker ran and reported: their folders are the caller's
    try:
        for index, share in enumerate(shares):
            folder = base / f".worker-{index}"
            try:
                privates.append(tempfile.mkdtemp(prefix="gpucluster-worker-"))
                read_fd, write_fd = os.pipe()
            except OSError:  # no file descriptor or temporary folder left
                return None
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                try:
                    pid = os.fork()
                except OSError:  # the process limit (EAGAIN) or no memory: the caller builds
                    os.close(read_fd)
                    return None
                if pid == 0:  # the worker: never returns
                    os.close(read_fd)
                    _worker(
                        write_fd,
                        parent,
                        blocked,
                        privates[-1],
                        plans,
                        set(share),
                        folder,
                        final,
                        fleet,
                        exports,
                        keys,
                        queue_fd,
                        chunks,
                    )
                running[pid] = folder
                pipes[read_fd] = pid
                order.append(pid)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                os.close(write_fd)
        if forked is not None:
            forked()
        payloads = _collect(pipes)
        results: list[dict[str, Any]] = []
        failed = False
        for pid in order:
            _, status = os.waitpid(pid, 0)
            folder = running.pop(pid)
            result = None
            if os.waitstatus_to_exitcode(status) == 0 and payloads.get(pid):
                try:
                    result = pickle.loads(payloads[pid])
                except Exception:  # noqa: BLE001
                    result = None
            if not isinstance(result, dict) or "stacks" not in result:
                failed = True
            else:
                result["folder"] = str(folder)
                results.append(result)
        if failed:
            return None
        whole = True
        return results
    finally:
        if queue_fd is not None:
            os.close(queue_fd)
        _end_workers(running, pipes, privates)
        if not whole:  # a worker failed or could not be started, or a stop signal: none is kept
            for index in range(len(shares)):
                shutil.rmtree(base / f".worker-{index}", ignore_errors=True)


def _end_workers(
    running: Mapping[int, Path], pipes: Mapping[int, int], privates: Sequence[str]
) -> None:
    """End (SIGTERM) and reap the processes (workers, a :class:`Helper`) still ``running`` (a stop signal or an error while they
    ran), close the ``pipes`` still open and remove the workers' temporary folders ``privates``."""
    for pid in running:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    for fd in pipes:
        os.close(fd)
    for pid in running:
        try:
            os.waitpid(pid, 0)
        except OSError:
            pass
    for private in privates:
        shutil.rmtree(private, ignore_errors=True)


_RECORD = 4
"""Bytes of one chunk's number in the queue pipe (big-endian); a pipe read of that size is whole."""


def queue_chunks(count: int, workers: int) -> list[tuple[int, int]]:
    """``count`` items cut into ``(start, length)`` chunks for ``workers`` pulling workers: each
    chunk takes a ``2 * workers``-th of what is left (at least 1), so the first are large (few
    Apps) and the last single items (the workers end within about one item of each other).
    E.g. 50 items, 2 workers: 13, 10, 7, 5, 4, 3, 2, 2, 1, 1, 1, 1."""
    chunks, start = [], 0
    while start < count:
        length = max(1, -(-(count - start) // (2 * max(1, workers))))
        chunks.append((start, length))
        start += length
    return chunks


def _queue(shares: Sequence[Sequence[str]]) -> tuple[int, list[list[str]]]:
    """The chunks of the clusters of ``shares`` (in order; :func:`queue_chunks`) and a pipe holding
    each chunk's number, its writing end closed: its reading end, which the workers share
    (:func:`_pulled`), and the chunks.

    Raises:
        OSError: no pipe, or more chunks than the pipe holds without a reader (16,384).
    """
    names = [name for share in shares for name in share]
    chunks = [names[a : a + n] for a, n in queue_chunks(len(names), len(shares))]
    data = b"".join(i.to_bytes(_RECORD, "big") for i in range(len(chunks)))
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(write_fd, False)
        if os.write(write_fd, data) != len(data):
            raise OSError("the queue does not fit in a pipe")
    except OSError:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd, chunks


def _pulled(queue_fd: int):
    """The chunk numbers a worker takes from the queue pipe, one at a time, until it is empty
    (each read takes one whole record: the pipe holds only whole records and its writer is gone)."""
    while True:
        record = os.read(queue_fd, _RECORD)
        if len(record) != _RECORD:
            return
        yield int.from_bytes(record, "big")


def _collect(pipes: dict[int, int]) -> dict[int, bytes]:
    """Read every worker's pipe to its end, removing each from ``pipes`` once closed (a stop
    signal's exception interrupts the wait)."""
    data: dict[int, list[bytes]] = {pid: [] for pid in pipes.values()}
    while pipes:
        ready, _, _ = select.select(list(pipes), [], [])
        for fd in ready:
            chunk = os.read(fd, 1 << 20)
            if chunk:
                data[pipes[fd]].append(chunk)
            else:
                del pipes[fd]
                os.close(fd)
    return {pid: b"".join(parts) for pid, parts in data.items()}


def _worker(
    write_fd: int,
    parent: int,
    blocked: Any,
    private: str,
    plans: Sequence[Any],
    share: set[str],
    folder: Path,
    final: Path,
    fleet: Any,
    exports: Mapping[str, Any],
    keys: Mapping[str, str | None],
    queue_fd: int | None = None,
    chunks: Sequence[Sequence[str]] = (),
) -> None:
    """The worker process (see the module docstring); ends with ``os._exit``.

    Its stop signals take their default action (the process ends at once, whichever of its threads
    the signal reaches: a Python-level handler would wait for the main thread, which may be asleep
    in a plugin while jsii's reader thread gets the signal)."""
    code = 1
    try:
        _become_child(parent, blocked)
        os.environ["TMPDIR"] = tempfile.tempdir = private
        payload = pickle.dumps(
            _build(plans, share, folder, final, fleet, exports, keys)
            if queue_fd is None
            else _build_pulled(plans, queue_fd, chunks, folder, final, exports, keys)
        )
        code = 0
    except BaseException:  # noqa: BLE001 - reported as a failure; the parent builds again itself
        payload = pickle.dumps({"failed": traceback.format_exc()})
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view) :]
        os.close(write_fd)
    except BaseException:  # noqa: BLE001
        code = 1
    try:
        exit_hooks.run_now()  # the jsii kernel's stop, registered in this process
    except BaseException:  # noqa: BLE001
        pass
    os._exit(code)


def _build(
    plans: Sequence[Any],
    share: set[str],
    folder: Path,
    final: Path,
    fleet: Any,
    exports: Mapping[str, Any],
    keys: Mapping[str, str | None],
    staging: Path | None = None,
) -> dict[str, Any]:
    from gpucluster_cdk.stacks import reuse
    from gpucluster_cdk.stacks.app import synth_app
    from gpucluster_cdk.stacks.names import stack_names

    folder.mkdir(exist_ok=True)
    result = synth_app(
        plans, folder, final=final, fleet=fleet, real=share, exports=exports, staging=staging
    )
    manifest, style = reuse.check_manifest_text(
        (folder / "manifest.json").read_text(encoding="utf-8")
    )
    names = [n for plan in plans if plan.cluster.name in share for n in stack_names(plan)]
    entries = {name: manifest["stacks"][name] for name in names}
    for plan in plans:
        key = keys.get(plan.cluster.name)
        if plan.cluster.name in share and key is not None:
            reuse.store_cluster(
                key,
                stack_names(plan),
                folder / "stacks",
                entries,
                manifest["version"],
                result["exports"].get(plan.cluster.name, {}),
                style,
            )
    return {
        "stacks": names,
        "manifest": entries,
        "exports": result["exports"],
        "version": manifest["version"],
        "style": style,
    }


class Helper:
    """One forked process running ``task()`` beside this one (e.g. writing files while this process
    builds stacks), under the workers' rules: forked only when :func:`can_fork`, stop signals at
    their default action, SIGTERM when this process dies, its output to ``/dev/null``, this
    process's exit hooks not run.

    :meth:`start` forks it (False: it cannot be forked here, or ``fork`` failed; the caller does
    the task itself);
    :meth:`wait` waits for its end and tells whether ``task`` returned without an exception;
    :meth:`end` ends it (SIGTERM) if it still runs and reaps it -- call it in a ``finally``.
    """

    def __init__(self, task: Callable[[], None]):
        self._task = task
        self._pid: int | None = None
        self._ok: bool | None = None

    def start(self) -> bool:
        if self._pid is not None or not can_fork():
            return self._pid is not None
        parent = os.getpid()
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            try:
                pid = os.fork()
            except OSError:  # the process limit (EAGAIN) or no memory: the caller does the task
                return False
            if pid == 0:
                code = 1
                try:
                    _become_child(parent, blocked)
                    self._task()
                    code = 0
                except BaseException:  # noqa: BLE001 - the parent does the task again itself
                    code = 1
                os._exit(code)
            self._pid = pid
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return True

    def wait(self) -> bool:
        if self._ok is None and self._pid is not None:
            _, status = os.waitpid(self._pid, 0)
            self._pid = None
            self._ok = os.waitstatus_to_exitcode(status) == 0
        return bool(self._ok)

    def end(self) -> None:
        if self._pid is None:
            return
        _end_workers({self._pid: Path()}, {}, ())
        self._pid = None
        self._ok = False


def _build_pulled(
    plans: Sequence[Any],
    queue_fd: int,
    chunks: Sequence[Sequence[str]],
    folder: Path,
    final: Path,
    exports: Mapping[str, Any],
    keys: Mapping[str, str | None],
) -> dict[str, Any]:
    """Build the chunks taken from the queue (:func:`_pulled`), each in an App of its own (in
    ``folder/.app-<k>``, its stacks then moved to ``folder/stacks``), sharing one chart staging
    folder (each distinct local chart staged once per worker); the merged result of :func:`_build`."""
    merged: dict[str, Any] = {
        "stacks": [],
        "manifest": {},
        "exports": {},
        "version": None,
        "style": None,
    }
    stacks = folder / "stacks"
    stacks.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="gpucluster-charts-") as staging:
        for k, number in enumerate(_pulled(queue_fd)):
            sub = folder / f".app-{k}"
            part = _build(
                plans, set(chunks[number]), sub, final, None, exports, keys, staging=Path(staging)
            )
            for name in part["stacks"]:
                os.rename(sub / "stacks" / name, stacks / name)
            shutil.rmtree(sub)
            merged["stacks"] += part["stacks"]
            merged["manifest"].update(part["manifest"])
            merged["exports"].update(part["exports"])
            merged["version"] = merged["version"] or part["version"]
            merged["style"] = merged["style"] or part["style"]
    return merged
