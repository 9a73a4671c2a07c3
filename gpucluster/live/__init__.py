"""Day 2: what reads a running cluster or a snapshot of one, and the in-cluster validation gate.

Owns: ``gpucluster snapshot`` / ``validate`` (:mod:`gpucluster.live.cli`): reading a cluster (a
snapshot file or the live API, :mod:`gpucluster.live.snapshot`, each object's shape checked by
:mod:`gpucluster.live.shapes`), evaluating Kyverno Chainsaw ``assert``/``error`` tests
(:mod:`gpucluster.live.chainsaw`, used for AICR's component health checks shipped in
``aicr_checks/``), the plan's GPU nodes (:mod:`gpucluster.live.nodes`), the checks derived from a
:class:`~gpucluster.model.RuntimePlan` (:mod:`gpucluster.live.checks`) and the ``validate``
command's outputs (:mod:`gpucluster.live.validate`: table, JSON evidence, JUnit;
:mod:`gpucluster.live.evidence`: CTRF, in-toto; their schemas in ``schemas/``), the read-only
RBAC both need (``rbac/validate-reader.yaml``); ``gpucluster upgrade-check --snapshot/--kubeconfig``
(:mod:`gpucluster.live.upgrade_live`), ``gpucluster detect`` (:mod:`gpucluster.live.detect`) and
the in-cluster validation gate of ``settings.validate`` (:mod:`gpucluster.live.gate`).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.hashing`, :mod:`gpucluster.yamlsafe`, ...),
:mod:`gpucluster.inputs`, :mod:`gpucluster.recipes`, :mod:`gpucluster.charts`, for the plan
:mod:`gpucluster.pipeline`, and the offline package :mod:`gpucluster.lint` (the file comparison
:mod:`gpucluster.lint.upgrade_check` that ``upgrade_live`` judges on a cluster; the YAML stream
reader of :mod:`gpucluster.lint.render`); optional libraries (``jmespath``, ``kubernetes``: the
``validate`` extra) only inside the functions that need them. Synth imports only
:mod:`gpucluster.live.gate`, from ``build_plan`` and only for a cluster that sets
``settings.validate``; a plan without it never loads this package.
"""
