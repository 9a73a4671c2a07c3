"""The one synthesis path: plans -> a whole, atomically replaced output folder (``cdktf.out``).

Used by the cdktf app (:mod:`gpucluster_cdk.app`, ``python -m gpucluster_cdk`` / ``main.py``),
``gpucluster synth`` and the plugin test kit. No cdktf import at module level: cdktf (and the jsii
kernel) is imported only when a stack is built in this process.

What :func:`synth` does, in order:

1. Each cluster's key (:func:`gpucluster_cdk.stacks.reuse.cluster_key`); the clusters whose
   entry is in the per-user cache are *reused*: their stack folders are written from the entry,
   by a forked helper process (:class:`_ReusedWriter`) while step 2 runs, so the file system's
   work overlaps the build's (which waits on the jsii kernel most of the time).
2. The other clusters are built: in this process (one cdktf App, today's path), or, when several
   must be built and more than one worker is allowed, spread over forked worker processes
   (:mod:`gpucluster_cdk.stacks.workers`), each synthesizing its share into its own folder.
3. With a ``fleet:`` section the fleet's stacks are built every time, in an App holding stand-ins
   for the member stacks not built in it (:func:`gpucluster_cdk.stacks.app.stand_in_stacks`).
4. ``manifest.json`` is made whole from every stack's entry
   (:func:`gpucluster_cdk.stacks.reuse.manifest_text`), the folder swapped in
   (:func:`gpucluster_cdk.stacks.outdir.staged_outdir`) and new entries stored.

The bytes written are those of one App holding every stack (tests/test_synth_reuse.py compares
them after edits of every kind). A worker that fails makes the run fall back to building in this
process, so errors are exactly those of a one-process synth.

Settings: ``cache`` (default: on unless ``GPUCLUSTER_SYNTH_CACHE=off`` or
``GPUCLUSTER_CACHE_DIR=off``) and ``workers`` (default: ``GPUCLUSTER_SYNTH_WORKERS``, else the
usable CPUs, at most :data:`MAX_DEFAULT_WORKERS`; ``1`` builds everything in this process).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.model import RuntimePlan
from gpucluster_cdk.stacks import reuse
from gpucluster_cdk.stacks.names import stack_names
from gpucluster_cdk.stacks.outdir import staged_outdir

if TYPE_CHECKING:
    from gpucluster.inputs.fleet import FleetSpec

WORKERS_ENV = "GPUCLUSTER_SYNTH_WORKERS"
"""Environment variable: how many worker processes may build clusters (``1``: this process only)."""


def is_worker_count(text: str) -> bool:
    """Whether ``text`` is a worker count as ``GPUCLUSTER_SYNTH_WORKERS`` and ``gpucluster synth
    --workers`` take it (:func:`worker_count`): 1 to 999 written in ASCII decimal digits only (no
    sign, space, underscore or other digit)."""
    return re.fullmatch(r"[0-9]{1,3}", text) is not None and int(text) >= 1


MAX_DEFAULT_WORKERS = 8
"""The default worker count is the usable CPU count, at most this."""

MIN_CLUSTERS_PER_WORKER = 2
"""A worker is started only for at least this many clusters to build (each pays the jsii kernel's start)."""

Progress = Callable[[int, int, str, Sequence[str]], None]
"""``progress(i, n, cluster, stacks)``: cluster ``i`` of ``n`` (from 1, in the order they are done)
has its stacks written (built or reused)."""


def worker_count(requested: int | None = None, env: Mapping[str, str] | None = None) -> int:
    """The most worker processes a synth may use: ``requested``, else ``GPUCLUSTER_SYNTH_WORKERS``
    (:func:`is_worker_count`, the flag's rule too; empty: unset), else the CPUs this process may run on
    (``os.sched_getaffinity``) capped at :data:`MAX_DEFAULT_WORKERS`.

    Raises:
        GpuclusterError: ``error[config] key=GPUCLUSTER_SYNTH_WORKERS`` for a value that is not a
            worker count.
    """
    env = os.environ if env is None else env
    if requested is None:
        raw = env.get(WORKERS_ENV, "")
        if raw:
            if not is_worker_count(raw):
                raise GpuclusterError(
                    f"{WORKERS_ENV}={raw!r} is not a worker count",
                    key=WORKERS_ENV,
                    id="config",
                    allowed="an integer from 1 to 999 in decimal digits",
                    fix=f"set {WORKERS_ENV}=1 (this process only) or more, "
                    "or unset it (the CPU count)",
                )
            requested = int(raw)
    if requested is None:
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 1
        requested = min(cpus, MAX_DEFAULT_WORKERS)
    return max(1, int(requested))


@dataclass
class _Cluster:
    plan: RuntimePlan
    stacks: list[str]
    key: str | None = None
    entry: dict[str, Any] | None = None


@dataclass
class _Built:
    """Manifest entries and exports of the stacks built so far (any process)."""

    manifest: dict[str, dict[str, Any]] = field(default_factory=dict)
    exports: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: str | None = None
    style: str | None = None


def synth(
    plans: Sequence[RuntimePlan],
    outdir: str | os.PathLike = "cdktf.out",
    *,
    fleet: FleetSpec | None = None,
    warnings: list[Problem] | None = None,
    cache: bool | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    reused: list[str] | None = None,
    outdir_key: str = "CDKTF_OUTDIR",
) -> list[str]:
    """Synthesize ``plans`` into ``outdir``, replacing it atomically (see the module docstring).

    Everything is built in a fresh sibling folder; ``outdir`` is swapped only after every stack
    was written and checked. Any exception (construct validation error, plugin error, a stop
    signal) leaves a previous ``outdir`` byte-identical. When a release's values (the
    ``VALUES-CREDENTIAL`` warning) or a cluster's platform ``settings`` (kubelogin's ``env``) hold a
    literal credential (:func:`gpucluster.values.credential_paths`), the output's folders are
    written 0700 and its files 0600, and that cluster is never cached.

    Args:
        fleet: the cluster file's validated ``fleet:`` section, or None.
        warnings: receives ``warning[output]`` problems (previous output not removable; see
            :func:`gpucluster_cdk.stacks.outdir.staged_outdir`).
        cache: reuse unchanged clusters' stacks (None: :func:`gpucluster_cdk.stacks.reuse.cache_enabled`).
        workers: most worker processes (None: :func:`worker_count`).
        progress: called per cluster when its stacks are written (:data:`Progress`).
        reused: receives the names of the clusters whose stacks came from the cache.
        outdir_key: the setting that named ``outdir``, the ``key=`` of its error lines
            (``CDKTF_OUTDIR``, the default; ``--out``).

    Returns:
        the stack names written, sorted.

    Raises:
        GpuclusterError: bad input found while building the stacks, construct validation errors
            (one ``error[construct]`` problem per ``[construct path] message``, naming the cluster
            and, in runtime stacks, the component), ``error[injection]``, ``error[output]``, or
            ``error[config]`` for a bad ``GPUCLUSTER_SYNTH_WORKERS``.
    """
    from gpucluster.values import credential_paths

    final = Path(outdir).absolute()
    max_workers = worker_count(workers)
    secret = {
        plan.cluster.name
        for plan in plans  # a literal credential in its values or its platform settings
        if credential_paths(plan.cluster.settings or {})
        or any(credential_paths(node.values) for node in plan.nodes)
    }
    private = bool(secret)  # VALUES-CREDENTIAL: the output is the owner's only (staged_outdir)
    use_cache = (
        reuse.cache_enabled() if cache is None else bool(cache)
    ) and reuse.diskcache.cache_dir() is not None
    clusters = [_Cluster(plan, stack_names(plan)) for plan in plans]
    if use_cache and clusters:
        _key_clusters(clusters, plans, fleet=fleet, secret=secret)
    with staged_outdir(outdir, warnings=warnings, private=private, key=outdir_key) as staged:
        stacks_dir = staged / "stacks"
        built = _Built()
        for c in clusters:
            if c.key is not None:
                c.entry = reuse.load(c.key, c.stacks)
        reused, reused_names = [c for c in clusters if c.entry is not None], reused
        todo = [c for c in clusters if c.entry is None]
        done: list[str] = []

        def report(c: _Cluster) -> None:
            done.append(c.plan.cluster.name)
            if progress is not None:
                progress(len(done), len(clusters), c.plan.cluster.name, list(c.stacks))

        for c in reused:
            built.exports[c.plan.cluster.name] = c.entry["exports"]
        writer = _ReusedWriter(
            reused, staged / REUSED_FOLDER, None if private else _previous_stacks(final)
        )
        try:
            built_here, whole = _build_changed(
                plans,
                clusters,
                todo,
                staged,
                final=final,
                fleet=fleet,
                built=built,
                report=report,
                writer=writer,
                max_workers=max_workers,
            )
        finally:
            writer.stop()
        if reused:
            _place_reused(reused, staged / REUSED_FOLDER, stacks_dir, built, reused_names, report)
        if not whole:
            (staged / "manifest.json").write_text(
                reuse.manifest_text(built.version, built.manifest, built.style), encoding="utf-8"
            )
        _store_built(built_here, stacks_dir, built)
        for c in reused:  # linked files changed through the previous output since: written anew
            for name, _entry, files in c.entry["stacks"]:
                reuse.rewrite_changed_links(stacks_dir / name, files)
        return sorted(p.name for p in stacks_dir.iterdir())


def _build_changed(
    plans: Sequence[RuntimePlan],
    clusters: Sequence[_Cluster],
    todo: list[_Cluster],
    staged: Path,
    *,
    final: Path,
    fleet: FleetSpec | None,
    built: _Built,
    report: Callable[[_Cluster], None],
    writer: _ReusedWriter,
    max_workers: int,
) -> tuple[list[_Cluster], bool]:
    """Build ``todo`` (in workers, else here) and the fleet's stacks into ``staged`` while
    ``writer`` writes the reused stacks; returns the clusters built in this process and whether
    one App held every stack (its ``manifest.json`` is kept as the framework wrote it)."""
    reused = len(todo) < len(clusters)
    elsewhere = False
    results = None
    n_workers = min(max_workers, len(todo) // MIN_CLUSTERS_PER_WORKER)
    if n_workers > 1:
        results = _run_in_workers(
            plans,
            todo,
            n_workers,
            staged,
            final=final,
            fleet=fleet,
            built=built,
            report=report,
            forked=writer.begin,
        )
        if results is not None:
            todo, elsewhere = [], True
    whole = not reused and not elsewhere
    built_here: list[_Cluster] = []
    if todo or fleet is not None or not clusters:
        writer.begin()
        _build_in_process(plans, todo, staged, final=final, fleet=fleet, whole=whole, built=built)
        built_here = todo
        for c in todo:
            report(c)
    if results is not None:  # after the fleet App: its stand-ins have the members' names
        stacks_dir = staged / "stacks"
        stacks_dir.mkdir(exist_ok=True)
        for result in results:
            for name in result["stacks"]:
                os.rename(Path(result["folder"]) / "stacks" / name, stacks_dir / name)
            shutil.rmtree(result["folder"])
    writer.begin()  # every cluster reused: written now
    if not built_here and not elsewhere and reused:
        from gpucluster_cdk.kernel_env import check_all

        check_all()  # no kernel started: the environment it needs is still checked, as in a full synth
    writer.finish()
    return built_here, whole


def _run_in_workers(
    plans: Sequence[RuntimePlan],
    todo: list[_Cluster],
    n_workers: int,
    staged: Path,
    *,
    final: Path,
    fleet: FleetSpec | None,
    built: _Built,
    report: Callable[[_Cluster], None],
    forked: Callable[[], None] | None = None,
) -> list[dict[str, Any]] | None:
    """Build ``todo`` in worker processes into ``built``; their results, or None (no fork, or a
    worker failed). ``forked`` is called once the workers run (see :func:`gpucluster_cdk.stacks.workers.run`)."""
    from gpucluster_cdk.stacks import workers as workers_mod

    if not workers_mod.can_fork():
        return None
    results = workers_mod.run(
        plans,
        _chunks(todo, n_workers),
        base=staged,
        final=final,
        fleet=fleet,
        exports=built.exports,
        keys={c.plan.cluster.name: c.key for c in todo},
        forked=forked,
        queue=fleet is None,  # no stack references another cluster's: any worker may build any
    )
    if results is not None:  # None: a worker failed; build here, for this process's own error
        for result in results:
            built.manifest.update(result["manifest"])
            built.exports.update(result["exports"])
            built.version = built.version or result["version"]
            built.style = built.style or result["style"]
        for c in todo:
            report(c)
    return results


REUSED_FOLDER = ".reused"
"""Folder of the staged output where :class:`_ReusedWriter` writes the reused stacks (moved into
``stacks/`` once the build is done, so a fleet App's stand-ins of the same names never meet them)."""


class _ReusedWriter:
    """Writes the reused clusters' stacks (their cache entries' files,
    :func:`gpucluster_cdk.stacks.reuse.write_stack_files`) below ``folder``, in a forked helper
    process (:class:`gpucluster_cdk.stacks.workers.Helper`) while this process builds the others.

    Unless the output is ``private``, a file the previous output (``previous``: its ``stacks``
    folder) holds with the same bytes is hard-linked from there.

    :meth:`begin` starts the helper (once; it must be before this process imports cdktf, and
    after any worker was forked; when no helper can be forked, nothing happens); :meth:`finish`
    waits for it -- when it failed, or never started, the stacks are written by this process
    (so a write error is this process's ``OSError``, as in a synth without a helper);
    :meth:`stop` ends a helper still running (always called, so no process writes into a staged
    folder that is being removed).
    """

    def __init__(self, reused: Sequence[_Cluster], folder: Path, previous: Path | None):
        from gpucluster_cdk.stacks.workers import Helper

        self._reused = list(reused)
        self._folder = folder
        self._previous = previous
        self._helper = Helper(self._write)
        self._begun = False

    def begin(self) -> None:
        if not self._begun and self._reused:
            self._begun = self._helper.start()

    def _write(self) -> None:
        self._folder.mkdir()
        for c in self._reused:
            for name, _entry, files in c.entry["stacks"]:
                reuse.write_stack_files(
                    self._folder,
                    name,
                    files,
                    previous=None if self._previous is None else self._previous / name,
                )

    def finish(self) -> None:
        if not self._reused:
            return
        if not (self._begun and self._helper.wait()):
            shutil.rmtree(self._folder, ignore_errors=True)
            self._write()

    def stop(self) -> None:
        self._helper.end()


def _previous_stacks(final: Path) -> Path | None:
    """The ``stacks`` folder of the output being replaced (through a symbolic link to a folder), or None."""
    try:
        folder = final.resolve() / "stacks"
        return folder if folder.is_dir() else None
    except (OSError, RuntimeError, ValueError):
        return None


def _place_reused(
    reused: Sequence[_Cluster],
    folder: Path,
    stacks_dir: Path,
    built: _Built,
    reused_names: list[str] | None,
    report: Callable[[_Cluster], None],
) -> None:
    """Move the reused stacks :class:`_ReusedWriter` wrote into ``stacks_dir`` and their manifest
    entries into ``built``; report each cluster (in plan order)."""
    stacks_dir.mkdir(exist_ok=True)
    for c in reused:
        for name, entry, _files in c.entry["stacks"]:
            os.rename(folder / name, stacks_dir / name)
            built.manifest[name] = entry
        built.version = built.version or c.entry["version"]
        built.style = built.style or c.entry["style"]
        if reused_names is not None:
            reused_names.append(c.plan.cluster.name)
        report(c)
    folder.rmdir()


def _store_built(built_here: Sequence[_Cluster], stacks_dir: Path, built: _Built) -> None:
    """Store the stacks of the clusters built in this synth in the cache (keyed ones only)."""
    for c in built_here if built.style is not None else ():
        if c.key is not None:
            reuse.store_cluster(
                c.key,
                c.stacks,
                stacks_dir,
                built.manifest,
                built.version,
                built.exports.get(c.plan.cluster.name, {}),
                built.style,
            )


def _key_clusters(
    clusters: Sequence[_Cluster],
    plans: Sequence[RuntimePlan],
    *,
    fleet: FleetSpec | None,
    secret: set[str],
) -> None:
    """Give every cluster but those in ``secret`` (a literal credential in its values: never
    copied into the cache) its cache key (:func:`gpucluster_cdk.stacks.reuse.cluster_key`)."""
    identity = reuse.synth_identity()
    contexts = reuse.fleet_context(fleet, plans)
    for c in clusters:
        if c.plan.cluster.name in secret:
            continue
        c.key = reuse.cluster_key(
            c.plan,
            identity=identity,
            context=contexts.get(c.plan.cluster.name),
            provisions=len(c.stacks) == 2,
        )


def _build_in_process(
    plans: Sequence[RuntimePlan],
    todo: Sequence[_Cluster],
    staged: Path,
    *,
    final: Path,
    fleet: FleetSpec | None,
    whole: bool,
    built: _Built,
) -> None:
    """Build ``todo``'s stacks (and the fleet's) in one App in this process, into ``staged``; add
    their manifest entries, exports, manifest version and style to ``built``. With ``whole`` the
    App holds every stack and its manifest.json is kept as the framework wrote it; otherwise the
    stand-ins of clusters built elsewhere are removed."""
    from gpucluster_cdk.stacks.app import synth_app  # imports cdktf (or cdktn) only now

    result = synth_app(
        plans,
        staged,
        final=final,
        fleet=fleet,
        real=None if whole else {c.plan.cluster.name for c in todo},
        exports=built.exports,
    )
    built.exports.update(result["exports"])
    text = (staged / "manifest.json").read_text(encoding="utf-8")
    try:
        manifest, style = reuse.check_manifest_text(text)
    except RuntimeError:
        if not whole:
            raise
        manifest, style = json.loads(text), None  # written as it is; nothing is stored (no style)
    built.version = built.version or manifest["version"]
    built.style = built.style or style
    keep = set(result["stacks"])
    for name, entry in manifest["stacks"].items():
        if name in keep:
            built.manifest[name] = entry
        else:  # a stand-in (its output is not the stack's)
            shutil.rmtree(staged / "stacks" / name)


def _chunks(todo: Sequence[_Cluster], n: int) -> list[list[str]]:
    """``todo`` in ``n`` contiguous shares of about equal release counts (plan order kept)."""
    weights = [len(c.plan.nodes) + 5 for c in todo]
    total = sum(weights)
    shares: list[list[str]] = [[] for _ in range(n)]
    acc = 0
    for c, w in zip(todo, weights, strict=True):
        index = min(n - 1, (acc * n) // total)
        shares[index].append(c.plan.cluster.name)
        acc += w
    return [s for s in shares if s]
