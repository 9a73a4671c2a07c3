"""Verification of a running cluster against its plan (``gpucluster snapshot`` / ``validate``).

Owns: reading a cluster (a snapshot file or the live API, :mod:`gpucluster.verify.snapshot`),
evaluating Kyverno Chainsaw ``assert``/``error`` tests (:mod:`gpucluster.verify.chainsaw`, used
for AICR's component health checks shipped in ``aicr_checks/``), the checks derived from a
:class:`~gpucluster.model.RuntimePlan` (:mod:`gpucluster.verify.checks`) and the ``validate``
command with its outputs (:mod:`gpucluster.verify.validate`: table, JSON evidence, JUnit).

May import: the leaves (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.hashing`, :mod:`gpucluster.yamlsafe`) and, for the
plan, :mod:`gpucluster.pipeline` and :mod:`gpucluster.config`; optional libraries (``jmespath``,
``kubernetes``: the ``validate`` extra) only inside the functions that need them. Synth imports
only :mod:`gpucluster.verify.gate` (the in-cluster validation gate), from ``build_plan`` and only
for a cluster that sets ``settings.validate``; a plan without it never loads this package.
"""
