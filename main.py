#!/usr/bin/env python3
"""gpucluster cdktf app: cluster file -> RuntimePlans -> stacks -> ``cdktf.out``.

Run by ``cdktf synth`` (``cdktf.json``: ``.venv/bin/python main.py``) or directly.

1. Load the clusters (``GPUCLUSTER_CONFIG``, ``./gpucluster.yaml`` or the embedded default) and
   build every plan with the pure-Python pipeline *before* cdktf is imported.
2. Bad input (:class:`~gpucluster.errors.GpuclusterError`): print the problems to stderr, exit 2,
   write nothing. Warnings (plan findings) go to stderr.
3. Synthesize into a sibling folder of the output folder (``CDKTF_OUTDIR``, default
   ``cdktf.out``) and swap it in atomically: a failed synth leaves the previous output as it was.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError

DEFAULT_OUTDIR = "cdktf.out"


def _stack_dirs(outdir: Path) -> set[str]:
    stacks = outdir / "stacks"
    return {p.name for p in stacks.iterdir() if p.is_dir()} if stacks.is_dir() else set()


def main(argv: list[str] | None = None) -> int:
    from gpucluster.config import load_clusters
    from gpucluster.pipeline import build_plans

    try:
        plans = build_plans(load_clusters())
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    for plan in plans:
        for finding in plan.findings:
            print(finding.render(), file=sys.stderr)

    outdir = Path(os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)
    previous = _stack_dirs(outdir)
    import stacks  # imports cdktf (and, for cluster stacks, the azurerm binding) only now

    try:
        written = stacks.synth(plans, outdir)
    except GpuclusterError as err:
        print(err.render(), file=sys.stderr)
        return EXIT_INVALID_INPUT
    if os.environ.get("CDKTF_CONTINUE_SYNTH_ON_ERROR_ANNOTATIONS") is not None:
        # Under the cdktf CLI: it deletes stacks/<name> folders that existed before the run and
        # are not in the new manifest, with a plain rmSync that fails on a missing folder. Our
        # swap already dropped them; leave empty placeholders for the CLI to delete.
        for name in sorted(previous - set(written)):
            (outdir / "stacks" / name).mkdir(parents=True, exist_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
