"""The last check before a synth's output is swapped in: no string Terraform would evaluate or
choke on that gpucluster did not write (no cdktf import at module level)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gpucluster.errors import GpuclusterError, Problem
from gpucluster_cdk.stacks.names import cluster_stack_name, runtime_stack_name

if TYPE_CHECKING:
    from gpucluster.model import RuntimePlan

_CONTROL_FIX = (
    "remove the newline or control character from the value in the cluster file; that it was not "
    "refused earlier is a gpucluster or plugin bug (a field without its check)"
)
_TEMPLATE_FIX = (
    "a construct passed a string without gpucluster_cdk.constructs_lib.tfstring.literal(); escape it there "
    "(this is a gpucluster or plugin bug, not your input)"
)


def check_no_injection(
    outdir: Path, stack_names: Sequence[str], plans: Sequence[RuntimePlan]
) -> None:
    """Refuse output in which Terraform would evaluate a template sequence gpucluster did not write.

    Every literal string reaches Terraform through :func:`gpucluster_cdk.constructs_lib.tfstring.literal`; this is
    the check that none was missed (a new construct argument, a plugin's own construct).

    Nor may any string but a ``helm_release``'s ``values`` documents hold a control character
    (:func:`constructs_lib.tfstring.unexpected_controls`: a newline in a name, a location, a
    ``set`` name).

    Raises:
        GpuclusterError: ``error[injection]`` per stack with an unescaped ``${``/``%{`` sequence
            or a control character (path inside ``cdk.tf.json`` and the sequence or string,
            cut), before the output is swapped in.
    """
    from gpucluster_cdk.constructs_lib.tfstring import (
        unexpected_controls,
        unexpected_templates,
    )  # the package imports cdktf

    problems: list[Problem] = []
    for name in stack_names:
        document = json.loads(
            (outdir / "stacks" / name / "cdk.tf.json").read_text(encoding="utf-8")
        )
        cluster = next(
            (
                p.cluster.name
                for p in plans
                if name in (runtime_stack_name(p.cluster.name), cluster_stack_name(p.cluster.name))
            ),
            None,
        )
        controls = list(unexpected_controls(document))
        templates = [(path, repr(seq)) for path, seq in unexpected_templates(document)]
        for found, what, fix in (
            (controls, "string(s) would reach Terraform with a control character", _CONTROL_FIX),
            (
                templates,
                "Terraform template sequence(s) would be evaluated at plan time",
                _TEMPLATE_FIX,
            ),
        ):
            if found:
                path, text = found[0]
                problems.append(
                    Problem(
                        message=f"stack {name}: {len(found)} {what}, first at {path}: {text}",
                        cluster=cluster,
                        id="injection",
                        fix=fix,
                    )
                )
    if problems:
        raise GpuclusterError(problems=problems)
