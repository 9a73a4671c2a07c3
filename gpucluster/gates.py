"""Readiness gates (placeholder until the gates work lands)."""

from __future__ import annotations


def collect_gates(cluster, recipe, components):
    """Return the GateSpecs plugins declare for enabled components."""
    return []


def render_gate_chart(cluster, spec, components):
    """Return ``(LocalChart, values)`` of the gate's generated chart."""
    raise NotImplementedError
