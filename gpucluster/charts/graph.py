"""Build the runtime stack's release graph (``PlanNode`` s and their ``depends_on`` edges).

Per enabled component, in recipe order:

* ``<c>-pre``        local chart of the pre-manifests (if any); installs before the chart;
* ``<c>``            the component's chart (Helm components only);
* ``<c>-manifests``  local chart of the post-manifests (custom resources after their CRDs);
* ``<gate.name>``    one release per readiness gate of the component.

A component's *ready handle* is the set of its gates (those without an explicit ``before``),
else its post-manifests release, else its chart release. Every release of a component depends
on the ready handles of the component's ``dependencyRefs``, so releases that need a component
ready wait on its gate, and independent releases install in parallel. Terraform destroys in
reverse order, so dependents go first on ``terraform destroy``.

Gate releases get ``wait_for_jobs`` and a Helm timeout of the gate's wait budget plus
:data:`GATE_TIMEOUT_MARGIN_SECONDS`; their values carry ``gatedHash``
(:func:`component_fingerprint` of the gated component), so a change to the gated component
upgrades the gate release, which re-runs its Job (a ``post-upgrade`` hook, see
:mod:`gpucluster.charts.gates`). When Terraform variables reach the gated component (its own bound
values, or variables its computed values read), ``gatedHash`` is a :class:`VariableHash`:
Terraform computes it from the variables' values at plan time, so ``-var`` changes re-run the
gate too (the values document holds the value at the defaults).

Destroy: ``<c>-manifests`` depends on ``<c>``, so its custom resources (NicClusterPolicy,
Skyhook, ...) are uninstalled -- and, with ``wait``, their finalizers processed -- while the
operator that owns them is still running; only then is the operator's chart removed
(docs/gates.md, "terraform destroy").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpucluster.charts.gates import gate_budget_seconds
from gpucluster.errors import GpuclusterError
from gpucluster.hashing import evaluate_variable_hash, fingerprint
from gpucluster.model import (
    Component,
    CrdSource,
    GateSpec,
    LocalChart,
    PlanNode,
    Recipe,
    VariableHash,
)
from gpucluster.values import get_path, without_paths

GATE_TIMEOUT_MARGIN_SECONDS = 120
"""Extra Helm timeout on top of a gate's own wait budget (Job scheduling and image pull). Larger
than the Job's own ``activeDeadlineSeconds`` margin (gates.JOB_START_MARGIN_SECONDS), so the Job
fails with its log line before Helm times out."""


def component_variables(component: Component) -> tuple[tuple[str, Any], ...]:
    """Every Terraform variable that reaches ``component``'s release, with its default, by name:
    the variables bound to its values paths and those its :class:`VariableHash` values read."""
    found: dict[str, Any] = {}
    for path, var in component.terraform_variables.items():
        found[var] = get_path(component.values, path)
    for vh in component.variable_hashes.values():
        for var, default in vh.variables:
            found.setdefault(var, default)
    return tuple(sorted(found.items()))


def chart_values(component: Component) -> dict[str, Any]:
    """The values ``component``'s chart receives: its effective values without the paths the
    registry declares manifest-only (``manifestValues``: read by its manifest templates, not by
    the chart; e.g. agentgateway's ``allowedSourceRanges``, which the inference-gateway manifest
    writes into the LoadBalancer's ``loadBalancerSourceRanges``)."""
    from gpucluster.recipes.catalog import load_catalog

    entry = load_catalog().components.get(component.name)
    paths = entry.manifest_values if entry is not None else ()
    return without_paths(component.values, paths) if paths else component.values


def gated_hash(
    component: Component, manifest_charts: Mapping[tuple[str, str], LocalChart]
) -> VariableHash:
    """The gate's ``gatedHash``: :func:`component_fingerprint` as the base, and every Terraform
    variable reaching the component (:func:`component_variables`), so a ``-var`` change re-runs it."""
    return VariableHash(
        base=component_fingerprint(component, manifest_charts),
        variables=component_variables(component),
    )


def component_fingerprint(
    component: Component, manifest_charts: Mapping[tuple[str, str], LocalChart]
) -> str:
    """Content hash of what a component installs: chart, version, values, manifest charts.

    Fed into its gates' values so a gate re-runs whenever the gated component changes.
    """
    ref = component.ref
    return fingerprint(
        {
            "repository": ref.source,
            "chart": ref.chart,
            "version": ref.version,
            "namespace": ref.namespace,
            "values": component.values,
            "manifests": {
                phase: manifest_charts[(ref.name, phase)].content_hash
                for phase in ("pre", "post")
                if (ref.name, phase) in manifest_charts
            },
        }
    )


def build_nodes(
    cluster_name: str,
    recipe: Recipe,
    components: Mapping[str, Component],
    manifest_charts: Mapping[tuple[str, str], LocalChart],
    gates: Iterable[tuple[GateSpec, LocalChart, dict[str, Any]]],
    crd_steps: Mapping[str, tuple[LocalChart, CrdSource]] | None = None,
    surge: Sequence[tuple[str, str]] = (),
) -> list[PlanNode]:
    """Turn components, manifest charts and gate charts into ordered ``PlanNode`` s.

    Args:
        cluster_name: for error messages.
        recipe: gives the deterministic component order.
        components: enabled components by name (disabled ones are absent).
        manifest_charts: ``(component, "pre"|"post")`` -> rendered local chart.
        gates: ``(spec, chart, values)``; ``values`` are the gate release's values (the gated
            component's fingerprint is added here as ``gatedHash``).
        crd_steps: component -> ``(chart, source)`` of its CRD step (:mod:`gpucluster.charts.crds`):
            node ``<c>-crds`` installs after the component's dependencies, and every release of
            the component (pre-manifests, chart, manifests) depends on it, so the owner's CRDs of
            the new chart version are applied and Established before the operator upgrades and
            before any custom resource of the component is applied.
        surge: ``(new pool, pool it replaces)`` pairs of a surge change (``pools[].replaces``,
            docs/cluster-file.md "Replacing a GPU pool"), sorted; when given, every gate's
            ``gatedHash`` also covers them, so adding (and later finishing) a replacement re-runs
            every gate and the apply completes only when the GPU stack is ready on the new
            pool's nodes too. Empty (the default) leaves the hashes as they are.

    Returns:
        list[PlanNode] in install-friendly order, every ``depends_on`` sorted.

    Raises:
        GpuclusterError: a dependencyRef names a disabled/unknown component, a gate names an
            unknown component, node ids collide, or the graph has a cycle.
    """
    builder = _NodeBuilder(cluster_name, components, manifest_charts, gates, crd_steps or {})
    builder.surge = [list(pair) for pair in surge]
    order = [ref.name for ref in recipe.component_refs if ref.name in components]
    builder.check_dependencies(order)
    nodes = [node for name in order for node in builder.component_nodes(name)]
    _check_graph(cluster_name, nodes)
    return nodes


class _NodeBuilder:
    """The steps of :func:`build_nodes`, per component in recipe order: its CRD step, pre-manifests,
    chart, post-manifests (each after the previous and after the dependencies' ready handles),
    then its gates."""

    def __init__(
        self,
        cluster_name: str,
        components: Mapping[str, Component],
        manifest_charts: Mapping[tuple[str, str], LocalChart],
        gates: Iterable[tuple[GateSpec, LocalChart, dict[str, Any]]],
        crd_steps: Mapping[str, tuple[LocalChart, CrdSource]],
    ) -> None:
        self.cluster_name = cluster_name
        self.components = components
        self.manifest_charts = manifest_charts
        self.crd_steps = crd_steps
        self.surge: list[list[str]] = []
        self.gates_by_component: dict[str, list[tuple[GateSpec, LocalChart, dict[str, Any]]]] = {}
        for spec, chart, values in gates:
            if spec.component not in components:
                continue  # gate of a disabled component
            self.gates_by_component.setdefault(spec.component, []).append((spec, chart, values))
        for items in self.gates_by_component.values():
            items.sort(key=lambda item: item[0].name)
        # gates ordered before another component (``GateSpec.before``): that component waits for them
        self.extra_before: dict[str, list[str]] = {}
        for items in self.gates_by_component.values():
            for spec, _, _ in items:
                for target in spec.before or []:
                    if target in components:
                        self.extra_before.setdefault(target, []).append(spec.name)

    def main_node(self, name: str) -> str:
        """The component's last install release: post-manifests, else the chart, else pre-manifests."""
        if (name, "post") in self.manifest_charts:
            return f"{name}-manifests"
        if self.components[name].ref.type == "Helm":
            return name
        return f"{name}-pre"

    def ready(self, name: str) -> list[str]:
        """The component's ready handle: its own gates (those without ``before``), else :meth:`main_node`."""
        own = [
            spec.name for spec, _, _ in self.gates_by_component.get(name, []) if spec.before is None
        ]
        return own or [self.main_node(name)]

    def check_dependencies(self, order: list[str]) -> None:
        """Every dependencyRef of an enabled component names an enabled component."""
        for name in order:
            for dep in self.components[name].ref.dependency_refs:
                if dep not in self.components:
                    raise GpuclusterError(
                        f"'{name}' depends on '{dep}', which is disabled or not in the recipe",
                        cluster=self.cluster_name,
                        component=name,
                        key="dependencyRefs",
                        fix=f"enable '{dep}' again, or disable '{name}' as well",
                    )

    def component_nodes(self, name: str) -> list[PlanNode]:
        """The releases of one component: install releases in order, then its gates."""
        comp = self.components[name]
        ref = comp.ref
        dep_handles = sorted(
            {h for dep in ref.dependency_refs for h in self.ready(dep)}
            | set(self.extra_before.get(name, []))
        )
        nodes: list[PlanNode] = []
        previous: list[str] = []

        def add(node: PlanNode) -> None:
            nodes.append(node)
            previous[:] = [node.id]

        after = lambda: sorted(set(dep_handles) | set(previous))  # noqa: E731 - dependencies + the previous release
        step = self.crd_steps.get(name)
        if step is not None:
            step_chart, source = step
            add(
                PlanNode(
                    id=f"{name}-crds",
                    kind="crds",
                    component=name,
                    namespace=ref.namespace,
                    local_chart=step_chart,
                    values={"chartVersion": ref.version, "contentHash": step_chart.content_hash},
                    depends_on=list(dep_handles),
                    wait_for_jobs=True,
                    crd_source=source,
                )
            )
        pre = self.manifest_charts.get((name, "pre"))
        if pre is not None:
            add(
                PlanNode(
                    id=f"{name}-pre",
                    kind="pre-manifests",
                    component=name,
                    namespace=ref.namespace,
                    local_chart=pre,
                    values={"contentHash": pre.content_hash},
                    depends_on=after(),
                )
            )
        if ref.type == "Helm":
            add(
                PlanNode(
                    id=name,
                    kind="chart",
                    component=name,
                    namespace=ref.namespace,
                    repository=ref.source,
                    chart=ref.chart,
                    version=ref.version,
                    values=chart_values(comp),
                    depends_on=after(),
                    terraform_variables=dict(comp.terraform_variables),
                    variable_hashes=dict(comp.variable_hashes),
                )
            )
        post = self.manifest_charts.get((name, "post"))
        if post is not None:
            add(
                PlanNode(
                    id=f"{name}-manifests",
                    kind="manifests",
                    component=name,
                    namespace=ref.namespace,
                    local_chart=post,
                    values={"contentHash": post.content_hash},
                    depends_on=after(),
                )
            )
        if not previous:
            raise GpuclusterError(
                f"component '{name}' installs nothing (type {ref.type} without a chart or manifests)",
                cluster=self.cluster_name,
                component=name,
                fix="give it a chart, or manifests, or disable it",
            )
        return nodes + self.gate_nodes(name, previous)

    def gate_nodes(self, name: str, previous: list[str]) -> list[PlanNode]:
        """The component's gate releases: after its last install release (``previous``) and the
        ready handles of ``GateSpec.after``; values carry ``gatedHash`` (:func:`gated_hash`)."""
        comp = self.components[name]
        gate_hash = gated_hash(comp, self.manifest_charts)
        if self.surge:  # a pool replacement re-runs the gate (build_nodes ``surge``)
            gate_hash = VariableHash(
                base=fingerprint({"gated": gate_hash.base, "surge": self.surge}),
                variables=gate_hash.variables,
            )
        gate_hash_value = (
            evaluate_variable_hash(gate_hash) if gate_hash.variables else gate_hash.base
        )
        nodes = []
        for spec, chart, values in self.gates_by_component.get(name, []):
            after = set(previous)
            for other in spec.after:
                if other in self.components:
                    after |= set(self.ready(other)) if other != name else set()
                elif any(
                    other == s.name
                    for items in self.gates_by_component.values()
                    for s, _, _ in items
                ):
                    after.add(other)
            nodes.append(
                PlanNode(
                    id=spec.name,
                    kind="gate",
                    component=name,
                    namespace=comp.ref.namespace,
                    local_chart=chart,
                    values={
                        **values,
                        "gatedHash": gate_hash_value,
                        "contentHash": chart.content_hash,
                    },
                    depends_on=sorted(after - {spec.name}),
                    wait_for_jobs=True,
                    timeout_seconds=gate_budget_seconds(spec) + GATE_TIMEOUT_MARGIN_SECONDS,
                    variable_hashes={"gatedHash": gate_hash} if gate_hash.variables else {},
                )
            )
        return nodes


def _check_graph(cluster_name: str, nodes: list[PlanNode]) -> None:
    ids = [n.id for n in nodes]
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            raise GpuclusterError(
                f"two releases are both named '{node_id}'",
                cluster=cluster_name,
                fix="rename the gate or component so release names are unique",
            )
        seen.add(node_id)
    by_id = {n.id: n for n in nodes}
    for n in nodes:
        for d in n.depends_on:
            if d not in by_id:
                raise GpuclusterError(
                    f"release '{n.id}' depends on unknown release '{d}'", cluster=cluster_name
                )
    state: dict[str, int] = {}

    def visit(node_id: str, stack: list[str]) -> None:
        mark = state.get(node_id, 0)
        if mark == 2:
            return
        if mark == 1:
            cycle = " -> ".join(stack[stack.index(node_id) :] + [node_id])
            raise GpuclusterError(
                f"dependency cycle: {cycle}",
                cluster=cluster_name,
                key="dependencyRefs",
                fix="remove one of the dependencyRefs or gate orderings in the cycle",
            )
        state[node_id] = 1
        for d in by_id[node_id].depends_on:
            visit(d, stack + [node_id])
        state[node_id] = 2

    for node_id in ids:
        visit(node_id, [])


def topological_layers(nodes: list[PlanNode]) -> list[list[str]]:
    """Group node ids into install waves (each wave depends only on earlier ones)."""
    remaining = {n.id: set(n.depends_on) for n in nodes}
    layers: list[list[str]] = []
    done: set[str] = set()
    while remaining:
        wave = sorted(i for i, deps in remaining.items() if deps <= done)
        if not wave:
            raise ValueError("cycle")
        layers.append(wave)
        done |= set(wave)
        for i in wave:
            del remaining[i]
    return layers
