"""Test kit for gpucluster plugins: register plugins for one test, plan, synthesize, run the CLI.

What pytest's ``pytester`` is to pytest plugins and datasette's ``pm.register``/``unregister``
is to datasette plugins. Import only this and :mod:`gpucluster.sdk` in a plugin's tests::

    import gpucluster_example
    from gpucluster.sdk.testing import registered

    CLUSTER = {"name": "ex1", "criteria": {"service": "example-k8s", "accelerator": "h100",
                                           "os": "ubuntu", "intent": "training"}}

    def test_the_gate_takes_effect():
        with registered(gpucluster_example) as kit:
            plan = kit.plan(CLUSTER)
        assert plan.node("example-clusterpolicy-ready").depends_on == ["gpu-operator"]

or, with the fixture (``pytest_plugins = ["gpucluster.sdk.testing"]`` in ``conftest.py``)::

    def test_the_gate_takes_effect(gpucluster_kit):
        gpucluster_kit.register(gpucluster_example)
        assert gpucluster_kit.plan(CLUSTER).gates

:func:`registered` gives the test a private plugin manager (the installed plugins, built-ins
included, plus the given modules) and puts the previous one back afterwards, whatever the test
did; ``GPUCLUSTER_PLUGINS``/``GPUCLUSTER_DISABLE_PLUGINS`` of the environment are ignored inside.
The :class:`PluginKit` it yields builds plans with the real pipeline, synthesizes with the real
stacks (needs the ``cdk`` extra) and runs the real CLI in-process. :meth:`PluginKit.record`
records the hook calls (:class:`HookRecorder`, pytester's ``HookRecorder``) and
:attr:`CliResult.stdout` / :attr:`CliResult.stderr` match printed lines (:class:`LineMatcher`,
pytest's ``LineMatcher``); docs/testing.md is their reference.
"""

from __future__ import annotations

import builtins
import contextlib
import fnmatch
import functools
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy

from gpucluster import plugins as _plugins
from gpucluster.model import ClusterSpec, Component, Criteria, Platform, Recipe, RuntimePlan

__all__ = [
    "CliResult",
    "HookCall",
    "HookRecorder",
    "LineMatcher",
    "PluginKit",
    "Synth",
    "registered",
    "gpucluster_kit",
]

ClusterDocument = Mapping[str, Any]
"""One ``clusters:`` entry of a cluster file, as a mapping (``{"name": ..., "criteria": {...}}``)."""


@dataclass(frozen=True)
class CliResult:
    """What a ``gpucluster`` command printed and returned (:meth:`PluginKit.cli`).

    Attributes:
        code: exit status (0 ok, 2 bad input; docs/cli.md).
        out / err: everything written to stdout / stderr.
    """

    code: int
    out: str
    err: str

    @property
    def stdout(self) -> LineMatcher:
        """The lines of :attr:`out` to match (``result.stdout.fnmatch_lines([...])``; pytester's ``RunResult.stdout``)."""
        return LineMatcher(self.out.splitlines())

    @property
    def stderr(self) -> LineMatcher:
        """The lines of :attr:`err` to match (``result.stderr.fnmatch_lines(["error[[]input]*"])``)."""
        return LineMatcher(self.err.splitlines())


@dataclass
class Synth:
    """A synthesized ``cdktf.out`` (:meth:`PluginKit.synth`).

    Attributes:
        outdir: the output folder (``manifest.json``, ``stacks/<name>/cdk.tf.json``).
        stacks: the stack names written, sorted (``<cluster>-runtime``, ``<cluster>-cluster``).
    """

    outdir: Path
    stacks: list[str] = field(default_factory=list)

    def terraform(self, stack: str) -> dict[str, Any]:
        """The Terraform JSON of ``stack`` (``stacks/<stack>/cdk.tf.json``), parsed.

        Raises:
            KeyError: no such stack (names the stacks written).
        """
        if stack not in self.stacks:
            raise KeyError(f"no stack '{stack}' (written: {', '.join(self.stacks)})")
        doc: dict[str, Any] = json.loads(
            (self.outdir / "stacks" / stack / "cdk.tf.json").read_text(encoding="utf-8")
        )
        return doc

    def releases(self, stack: str) -> dict[str, dict[str, Any]]:
        """The ``helm_release`` resources of ``stack`` by release id (``{}`` when there is none)."""
        releases: dict[str, dict[str, Any]] = (
            self.terraform(stack).get("resource", {}).get("helm_release", {})
        )
        return releases


class PluginKit:
    """The pipeline, the stacks and the CLI, bound to one test's plugin manager.

    Made by :func:`registered` (or the ``gpucluster_kit`` fixture); valid while that context is
    active.
    """

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm

    # ------------------------------------------------------------------ plugins

    def register(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin module (or object) for the rest of the test, like ``pm.register``.

        Args:
            plugin: a module or object with ``@hookimpl`` functions.
            name: plugin name (errors, ``gpucluster plugins``); default: the module name.

        Raises:
            gpucluster.sdk.GpuclusterError: an unknown hook name, a bad signature or a hook
                wrapper (the same check as for installed plugins).
        """
        _plugins.register_plugin(self.pm, plugin, name=name)
        _plugins.check_hookimpls(self.pm)

    def unregister(self, plugin: object | None = None, *, name: str | None = None) -> None:
        """Remove a plugin (by object or by plugin name, e.g. a built-in ``"oke"``) for the rest of the test."""
        self.pm.unregister(plugin, name=name)

    @contextlib.contextmanager
    def record(self) -> Iterator[HookRecorder]:
        """Record every hook implementation called inside the block (see :class:`HookRecorder`)::

            with kit.record() as calls:
                kit.plan(CLUSTER)
            assert calls.plugins("gpucluster_gates") == ["gpucluster_example", "aks"]

        The implementations of the plugins registered when the block starts are recorded; the
        originals are back when it ends, whatever happened inside.
        """
        recorder = HookRecorder()
        wrapped: list[tuple[Any, Any]] = []
        try:
            for caller in list(self.pm.hook.__dict__.values()):
                if not isinstance(caller, pluggy.HookCaller):
                    continue
                for impl in caller.get_hookimpls():
                    wrapped.append((impl, impl.function))
                    wrapper = recorder._wrap(
                        caller.name, impl.plugin_name, impl.function, tuple(impl.argnames)
                    )
                    impl.function = wrapper  # type: ignore[misc]  # pluggy's Final; restored below
            yield recorder
        finally:
            for impl, function in reversed(wrapped):
                impl.function = function

    # ------------------------------------------------------------------ hooks

    def platforms(self) -> dict[str, Platform]:
        """Every declared :class:`~gpucluster.sdk.Platform` by service (``kit.platforms()["aks"]``).

        Raises:
            gpucluster.sdk.GpuclusterError: two plugins declare one service, or a plugin returns
                something other than Platforms (names the plugin).
        """
        return _plugins.platforms(self.pm)

    def call_hook(self, name: str, **kwargs: Any) -> list[tuple[str, Any]]:
        """Call hook ``name`` as the core does: ``[(plugin name, result), ...]`` in call order,
        ``None`` results left out, a ``firstresult`` hook stopped at the first; a service-scoped
        hook (one with a ``cluster`` argument) reaches a platform plugin only for its services.

        Raises:
            gpucluster.sdk.GpuclusterError: what a plugin raised (keys made absolute for a cluster
                hook), or any other exception as one naming the plugin and the hook.
        """
        return _plugins.call_hook_attributed(name, pm=self.pm, **kwargs)

    def prepare(self, doc: ClusterDocument | ClusterSpec, **kwargs: Any) -> ClusterSpec:
        """The cluster as its platform prepared it (defaults and validation of
        ``gpucluster_prepare_cluster``, after the core's check of ``profile`` and ``settings``
        against the :class:`~gpucluster.sdk.Platform`): what every later hook receives.

        Args:
            doc: a ``clusters:`` entry (parsed with :meth:`cluster`, ``kwargs`` passed on) or a
                :class:`ClusterSpec` (not changed).

        Raises:
            gpucluster.sdk.GpuclusterError: an unknown service, a profile or setting the platform
                does not declare, or the plugin's own refusal (keys as the user reads them).
        """
        from gpucluster.pipeline import prepare_cluster

        spec = doc if isinstance(doc, ClusterSpec) else self.cluster(doc, **kwargs)
        return prepare_cluster(spec)

    # ------------------------------------------------------------------ plans

    def clusters(
        self,
        document: Mapping[str, Any] | str,
        *,
        root: str | os.PathLike[str] | None = None,
        source: str = "clusters.yaml",
    ) -> list[ClusterSpec]:
        """Parse and validate a cluster file's content (``{"clusters": [...]}`` or YAML text).

        Args:
            document: the whole cluster file (mapping or YAML text).
            root: the folder recipe paths are relative to (default: the current directory).
            source: the file name shown in errors and kept as ``ClusterSpec.source``.

        Raises:
            gpucluster.sdk.GpuclusterError: what ``gpucluster plan`` would refuse.
        """
        from gpucluster import yamlsafe
        from gpucluster.inputs.config import parse_clusters

        if isinstance(document, str):
            with tempfile.TemporaryDirectory(prefix="gpucluster-kit-") as tmp:
                path = Path(tmp) / "clusters.yaml"
                path.write_text(document, encoding="utf-8")
                document = yamlsafe.load_yaml_file(path, display=source)
        return parse_clusters(
            document, source=source, root=Path(root) if root is not None else Path.cwd()
        )

    def cluster(self, doc: ClusterDocument, **kwargs: Any) -> ClusterSpec:
        """Parse one ``clusters:`` entry (see :meth:`clusters` for the keyword arguments)."""
        (spec,) = self.clusters({"clusters": [dict(doc)]}, **kwargs)
        return spec

    def plan(self, doc: ClusterDocument | ClusterSpec, **kwargs: Any) -> RuntimePlan:
        """Build one cluster's plan through the real pipeline (``gpucluster plan``'s work).

        Args:
            doc: a ``clusters:`` entry (parsed with :meth:`cluster`) or a :class:`ClusterSpec`.

        Raises:
            gpucluster.sdk.GpuclusterError: invalid input or error findings (``.problems``
                holds one Problem each, with the finding ``id``).
        """
        from gpucluster.pipeline import build_plan

        spec = doc if isinstance(doc, ClusterSpec) else self.cluster(doc, **kwargs)
        return build_plan(spec)

    def load(self, path: str | os.PathLike[str] | None = None) -> list[ClusterSpec]:
        """The clusters of the cluster file at ``path`` (as ``gpucluster plan --config PATH`` reads
        it: recipe paths relative to its folder); ``None``: the built-in example cluster that a
        folder without a cluster file gets. ``GPUCLUSTER_CONFIG`` is ignored.

        Raises:
            gpucluster.sdk.GpuclusterError: what ``gpucluster plan`` would refuse.
        """
        from gpucluster.inputs.config import load_clusters

        return load_clusters(None if path is None else str(path), env={})

    def plans(self, document: Mapping[str, Any] | str, **kwargs: Any) -> list[RuntimePlan]:
        """Every cluster of a whole cluster file, planned (see :meth:`clusters`)."""
        from gpucluster.pipeline import build_plans

        return build_plans(self.clusters(document, **kwargs))

    def chart_values(self, plan: RuntimePlan, component: str) -> dict[str, Any]:
        """The values ``component``'s chart receives in ``plan``: its effective values without the
        paths its registry entry declares manifest-only (``manifestValues``), i.e. what the
        chart's ``helm_release`` gets.

        Raises:
            KeyError: ``component`` is not in the plan.
        """
        from gpucluster.charts.graph import chart_values

        return chart_values(plan.components[component])

    # ------------------------------------------------------------------ recipes and the catalog

    def catalog(self) -> Any:
        """The catalog the plans read: the core's directory and every plugin's
        ``gpucluster_catalog_dirs``, loaded and merged (read-only; ``.overlays`` and ``.mixins``:
        name -> parsed document, ``.overlay_files``: name -> path, ``.components``: the registry
        by component name, ``.dirs``: the directories in order).

        Raises:
            gpucluster.sdk.GpuclusterError: a malformed registry, overlay or mixin file, or a name
                defined twice.
        """
        from gpucluster.recipes.catalog import load_catalog

        return load_catalog()

    def check_catalog(self) -> list[str]:
        """Validate every overlay of :meth:`catalog` as a recipe resolution does (schema, base
        chains, mixins, ``spec.profile``) and return the overlay names, sorted.

        Raises:
            gpucluster.sdk.GpuclusterError: the first invalid overlay (names its file and key).
        """
        from gpucluster.recipes.overlays import overlay_index

        return sorted(overlay_index(self.catalog()).overlays)

    def resolve(self, criteria: Criteria, *, profile: Mapping[str, str] | None = None) -> Recipe:
        """The recipe ``criteria`` resolve to in :meth:`catalog` (``gpucluster recipe``'s work:
        overlays applied, mixins, the ``profile`` choices, e.g. ``{"gpuStack": "operator-managed"}``).

        Raises:
            gpucluster.sdk.GpuclusterError: no recipe covers the criteria, or an unknown profile.
        """
        from gpucluster.recipes.recipe import resolve

        return resolve(criteria, self.catalog(), profile=profile)

    def component_values(self, recipe: Recipe, name: str) -> dict[str, Any]:
        """Component ``name``'s values in ``recipe`` before any cluster's overrides: its values
        files, the recipe's overrides and the profile's values, layered.

        Raises:
            KeyError: ``name`` is not in the recipe.
        """
        from gpucluster.recipes.layering import component_values

        return component_values(recipe.component(name), recipe, self.catalog())

    def components(self, recipe: Recipe) -> dict[str, Component]:
        """Every enabled component of ``recipe`` with its values (:meth:`component_values`), by name."""
        from gpucluster.recipes.layering import effective_components

        return effective_components(recipe, self.catalog())

    def recipe_document(
        self, recipe: Recipe | RuntimePlan, components: Mapping[str, Component] | None = None
    ) -> dict[str, Any]:
        """The RecipeResult ``gpucluster recipe`` writes for ``recipe`` (or a plan's recipe), with
        the hydrated values of ``components`` when given: a mapping that, dumped with
        ``yaml.safe_dump``, is a file a cluster's ``recipe:`` can name."""
        from gpucluster.recipes.recipe_result_writer import to_document

        return to_document(recipe.recipe if isinstance(recipe, RuntimePlan) else recipe, components)

    def read_recipe(self, path: str | os.PathLike[str]) -> Recipe:
        """A RecipeResult file read as a cluster's ``recipe:`` is (against :meth:`catalog`).

        Raises:
            gpucluster.sdk.GpuclusterError: every problem of the file, one line each.
        """
        from gpucluster.recipes.recipe_result import recipe_from_file

        return recipe_from_file(str(path), self.catalog())

    # ------------------------------------------------------------------ synthesis

    def synth(
        self,
        document: Mapping[str, Any] | str | Sequence[RuntimePlan],
        outdir: str | os.PathLike[str],
    ) -> Synth:
        """Synthesize a cluster file (or plans) into ``outdir`` with the real stacks, in-process.

        Needs the ``cdk`` extra (cdktf and the provider bindings) and the repository's
        ``stacks`` package; the Terraform JSON is what ``cdktf synth`` writes for the same input.

        Args:
            document: a whole cluster file (mapping or YAML text, see :meth:`clusters`) or
                plans from :meth:`plan`/:meth:`plans`.
            outdir: the output folder (replaced atomically).

        Raises:
            gpucluster.sdk.GpuclusterError: bad input, error findings or construct errors.
        """
        from gpucluster_cdk import stacks

        if isinstance(document, (Mapping, str)):
            plans = self.plans(document)
        else:
            plans = list(document)
        written = stacks.synth(plans, outdir)
        return Synth(outdir=Path(outdir), stacks=written)

    # ------------------------------------------------------------------ CLI

    def cli(self, *argv: str) -> CliResult:
        """Run ``gpucluster <argv>`` in-process (``kit.cli("plan", "--config", path)``).

        Returns the exit status and the captured output; never raises for bad input (the CLI
        prints it and returns 2, as for a user).
        """
        from gpucluster import cli

        out, err = io.StringIO(), io.StringIO()
        code = cli.main(list(argv), stdout=out, stderr=err)
        return CliResult(code=code, out=out.getvalue(), err=err.getvalue())


# ---------------------------------------------------------------------- hook-call recorder


@dataclass(frozen=True)
class HookCall:
    """One call of one plugin's implementation of a hook, as :class:`HookRecorder` saw it.

    Attributes:
        hook: the hook name (``"gpucluster_gates"``).
        plugin: the plugin's name (``"aks"``, ``"gpucluster_example"``; as ``gpucluster plugins`` lists it).
        kwargs: the arguments the implementation received, by name (only those it declares;
            the objects themselves, not copies).
        result: what it returned (``None`` included); ``None`` when it raised.
        error: the exception it raised, else ``None`` (the recorder re-raises it unchanged).

    An argument is also an attribute: ``call.cluster`` is ``call.kwargs["cluster"]`` (pytester's
    ``ParsedCall``).
    """

    hook: str
    plugin: str
    kwargs: Mapping[str, Any]
    result: Any = None
    error: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        kwargs = self.__dict__.get("kwargs", {})
        if name in kwargs:
            return kwargs[name]
        raise AttributeError(
            f"{self.hook} call of plugin '{self.plugin}' has no argument '{name}' "
            f"(it received: {', '.join(kwargs) or 'none'})"
        )


class HookRecorder:
    """Every hook implementation called while recording, in call order (pytester's ``HookRecorder``).

    Made by :meth:`PluginKit.record`: it wraps each registered plugin's hook implementations
    (those registered when recording starts) and puts the originals back when the block ends.
    Calls made by the pipeline, the CLI and the stacks are all seen, whichever way the core calls
    the hook; an implementation the core does not call (another service's plugin for a
    service-scoped hook, the rest of a ``firstresult`` hook) is not recorded.
    """

    def __init__(self) -> None:
        self.calls: list[HookCall] = []
        """Every call, in the order the implementations ran."""

    def getcalls(
        self, names: str | Sequence[str] | None = None, *, plugin: str | None = None
    ) -> list[HookCall]:
        """The calls of the hooks ``names`` (one name, space-separated names or a sequence; ``None``:
        every hook), of ``plugin`` only when given, in call order."""
        wanted = (
            set(names.split() if isinstance(names, str) else names) if names is not None else None
        )
        return [
            c
            for c in self.calls
            if (wanted is None or c.hook in wanted) and (plugin is None or c.plugin == plugin)
        ]

    def hooks(self, plugin: str | None = None) -> list[str]:
        """The hook names in call order, each run of repeated calls of one hook as one name
        (``["gpucluster_prepare_cluster", "gpucluster_adjust_values", ...]``); of ``plugin`` only when given."""
        names: list[str] = []
        for call in self.getcalls(plugin=plugin):
            if not names or names[-1] != call.hook:
                names.append(call.hook)
        return names

    def plugins(self, hook: str) -> list[str]:
        """The plugins whose implementation of ``hook`` ran, in call order, each once."""
        return list(dict.fromkeys(c.plugin for c in self.getcalls(hook)))

    def getcall(self, name: str, *, plugin: str | None = None) -> HookCall:
        """The one call of ``name`` (of ``plugin`` when given).

        Raises:
            AssertionError: none or more than one such call (names how many and of which plugins).
        """
        __tracebackhide__ = True
        calls = self.getcalls(name, plugin=plugin)
        if len(calls) != 1:
            who = ", ".join(c.plugin for c in calls) or "none"
            raise AssertionError(
                f"expected one call of {name}{f' by {plugin}' if plugin else ''}, got "
                f"{len(calls)} (plugins: {who})"
            )
        return calls[0]

    def assert_called_in_order(self, *names: str, plugin: str | None = None) -> None:
        """Each hook of ``names`` was called, in this order (other hooks may come between).

        Raises:
            AssertionError: a hook was not called after the previous one (names it and the order seen).
        """
        __tracebackhide__ = True
        seen = self.hooks(plugin)
        at = 0
        for name in names:
            try:
                at = seen.index(name, at) + 1
            except ValueError:
                raise AssertionError(
                    f"{name} was not called after {names[names.index(name) - 1] if names.index(name) else 'the start'}"
                    f" (calls in order: {', '.join(seen) or 'none'})"
                ) from None

    def _wrap(self, hook: str, plugin: str, function: Any, argnames: tuple[str, ...]) -> Any:
        @functools.wraps(function)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            received = {
                **dict(zip(argnames, args, strict=False)),
                **kwargs,
            }  # pluggy passes them by position, the core by name
            try:
                result = function(*args, **kwargs)
            except BaseException as exc:
                self.calls.append(HookCall(hook, plugin, received, None, exc))
                raise
            self.calls.append(HookCall(hook, plugin, received, result))
            return result

        return recorded


# ---------------------------------------------------------------------- output line matcher


class LineMatcher:
    """Lines of output to match against patterns, in order (pytest's ``LineMatcher``).

    ``fnmatch_lines`` matches with :func:`fnmatch.fnmatchcase` (``*`` any text, ``?`` one
    character, ``[seq]`` one of; ``[`` itself is ``[[]``, so write ``error[[]input]*``), and
    ``re_match_lines`` with :func:`re.match` (anchored at the start of the line). Each pattern
    must match a line after the line the previous pattern matched (other lines may come between,
    unless ``consecutive``); a line equal to the pattern always matches.

    Made by :attr:`CliResult.stdout` / :attr:`CliResult.stderr`, or ``LineMatcher(text.splitlines())``.
    """

    def __init__(self, lines: Sequence[str]) -> None:
        if isinstance(lines, str):
            raise TypeError("LineMatcher takes a list of lines: LineMatcher(text.splitlines())")
        self.lines: list[str] = list(lines)
        """The lines, without their line ends."""

    def __str__(self) -> str:
        return "\n".join(self.lines)

    def str(self) -> str:
        """The lines joined with ``\\n`` (pytest's ``LineMatcher.str``)."""
        return "\n".join(self.lines)

    def fnmatch_lines(
        self, patterns: builtins.str | Sequence[builtins.str], *, consecutive: bool = False
    ) -> None:
        """Every pattern (fnmatch, see the class) matches a line, in order.

        Args:
            patterns: one pattern or a sequence; a string with line ends is one pattern per line.
            consecutive: the matching lines follow each other with none between.

        Raises:
            AssertionError: a pattern matched no line after the previous match; the message shows
                what each pattern matched and every line it was tried against.
        """
        __tracebackhide__ = True
        self._match_lines(patterns, fnmatch.fnmatchcase, "fnmatch", consecutive=consecutive)

    def re_match_lines(
        self, patterns: builtins.str | Sequence[builtins.str], *, consecutive: bool = False
    ) -> None:
        """Every regular expression matches (:func:`re.match`) a line, in order (see :meth:`fnmatch_lines`)."""
        __tracebackhide__ = True
        self._match_lines(
            patterns,
            lambda line, pattern: re.match(pattern, line) is not None,
            "re.match",
            consecutive=consecutive,
        )

    def no_fnmatch_line(self, pattern: builtins.str) -> None:
        """No line matches the fnmatch ``pattern``.

        Raises:
            AssertionError: a line matches (names it).
        """
        __tracebackhide__ = True
        self._no_match_line(pattern, fnmatch.fnmatchcase, "fnmatch")

    def no_re_match_line(self, pattern: builtins.str) -> None:
        """No line matches (:func:`re.match`) the regular expression ``pattern``."""
        __tracebackhide__ = True
        self._no_match_line(pattern, lambda line, p: re.match(p, line) is not None, "re.match")

    def get_lines_after(self, pattern: builtins.str) -> list[builtins.str]:
        """The lines after the first line matching the fnmatch ``pattern``.

        Raises:
            ValueError: no line matches.
        """
        for i, line in enumerate(self.lines):
            if line == pattern or fnmatch.fnmatchcase(line, pattern):
                return self.lines[i + 1 :]
        raise ValueError(f"no line matches {pattern!r}")

    def _match_lines(
        self,
        patterns: builtins.str | Sequence[builtins.str],
        match: Any,
        how: builtins.str,
        *,
        consecutive: bool,
    ) -> None:
        __tracebackhide__ = True
        wanted = patterns.splitlines() if isinstance(patterns, str) else list(patterns)
        log: list[str] = []
        lines = list(self.lines)
        started = False
        for pattern in wanted:
            said_nomatch = False
            while lines:
                line = lines.pop(0)
                if line == pattern or match(line, pattern):
                    log.append(f"{'exact match' if line == pattern else how}: {pattern!r}")
                    log.append(f"   with: {line!r}")
                    started = True
                    break
                if consecutive and started:
                    log.append(f"no consecutive match: {pattern!r}")
                    log.append(f"   with: {line!r}")
                    raise AssertionError("\n".join(log))
                if not said_nomatch:
                    log.append(f"nomatch: {pattern!r}")
                    said_nomatch = True
                log.append(f"    and: {line!r}")
            else:
                log.append(f"remains unmatched: {pattern!r}")
                raise AssertionError("\n".join(log))

    def _no_match_line(self, pattern: builtins.str, match: Any, how: builtins.str) -> None:
        __tracebackhide__ = True
        for line in self.lines:
            if line == pattern or match(line, pattern):
                raise AssertionError(f"{how}: {pattern!r}\n   with: {line!r}")


@contextlib.contextmanager
def registered(
    *plugins: object, entry_points: bool = True, disable: Sequence[str] = ()
) -> Iterator[PluginKit]:
    """A private plugin manager for the block: installed plugins plus ``plugins``.

    Inside the block every gpucluster call (pipeline, CLI, stacks) uses it; afterwards the
    previous process-wide manager is back, whatever happened inside.

    Args:
        plugins: plugin modules (or objects) to register, in order (later-registered run first).
            A module already loaded through its installed entry point is not registered twice.
        entry_points: load the installed plugins (built-ins included) as a user's run would;
            ``False`` for a manager holding only ``plugins``.
        disable: plugin names to block (``"oke"``), like ``GPUCLUSTER_DISABLE_PLUGINS``.

    Yields:
        PluginKit bound to the private manager.

    Raises:
        gpucluster.sdk.GpuclusterError: a plugin is invalid (unknown hook, bad signature,
            hook wrapper) or an installed one fails to load.
    """
    saved = _plugins.swap_plugin_manager(None)
    try:
        pm = _plugins.new_plugin_manager(entry_points=entry_points, disable=disable, env={})
        kit = PluginKit(pm)
        for plugin in plugins:
            kit.register(plugin)
        _plugins.swap_plugin_manager(pm)
        yield kit
    finally:
        _plugins.swap_plugin_manager(saved)


try:  # the fixture, for ``pytest_plugins = ["gpucluster.sdk.testing"]``
    import pytest as _pytest
except ImportError:  # pragma: no cover - pytest is only needed to use the fixture
    _pytest = None  # type: ignore[assignment]

if _pytest is not None:

    @_pytest.fixture
    def gpucluster_kit() -> Iterator[PluginKit]:
        """A :class:`PluginKit` with the installed plugins; ``.register(module)`` adds yours."""
        with registered() as kit:
            yield kit
else:  # pragma: no cover
    gpucluster_kit = None
