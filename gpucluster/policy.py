"""Policy checks (placeholder until the policy work lands)."""

from __future__ import annotations

from gpucluster.plugins import call_hook


def evaluate(cluster, recipe, components, catalog):
    """Run core checks and ``gpucluster_policy_checks`` hooks; return all findings sorted."""
    findings = []
    for batch in call_hook("gpucluster_policy_checks", cluster=cluster, recipe=recipe, components=components):
        findings.extend(batch)
    return sorted(findings, key=lambda f: (f.severity != "error", f.id, f.component, f.key))
