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
stacks (needs the ``cdk`` extra) and runs the real CLI in-process.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import pluggy

from gpucluster import plugins as _plugins
from gpucluster.model import ClusterSpec, RuntimePlan

__all__ = ["CliResult", "PluginKit", "Synth", "registered", "gpucluster_kit"]

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
        return json.loads((self.outdir / "stacks" / stack / "cdk.tf.json").read_text(encoding="utf-8"))

    def releases(self, stack: str) -> dict[str, dict[str, Any]]:
        """The ``helm_release`` resources of ``stack`` by release id (``{}`` when there is none)."""
        return self.terraform(stack).get("resource", {}).get("helm_release", {})


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

    # ------------------------------------------------------------------ plans

    def clusters(self, document: Mapping[str, Any] | str, *, root: str | os.PathLike | None = None,
                 source: str = "clusters.yaml") -> list[ClusterSpec]:
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
        return parse_clusters(document, source=source, root=Path(root) if root is not None else Path.cwd())

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

    def plans(self, document: Mapping[str, Any] | str, **kwargs: Any) -> list[RuntimePlan]:
        """Every cluster of a whole cluster file, planned (see :meth:`clusters`)."""
        from gpucluster.pipeline import build_plans

        return build_plans(self.clusters(document, **kwargs))

    # ------------------------------------------------------------------ synthesis

    def synth(self, document: Mapping[str, Any] | str | Sequence[RuntimePlan], outdir: str | os.PathLike) -> Synth:
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


@contextlib.contextmanager
def registered(*plugins: object, entry_points: bool = True, disable: Sequence[str] = ()) -> Iterator[PluginKit]:
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
    _pytest = None

if _pytest is not None:

    @_pytest.fixture
    def gpucluster_kit() -> Iterator[PluginKit]:
        """A :class:`PluginKit` with the installed plugins; ``.register(module)`` adds yours."""
        with registered() as kit:
            yield kit
else:  # pragma: no cover
    gpucluster_kit = None
