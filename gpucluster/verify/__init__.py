"""The commands beside synth: verification of a chart set, a revision or a running cluster.

Owns: ``gpucluster render`` and ``lint`` (:mod:`gpucluster.verify.render`: every release rendered
with Helm; :mod:`gpucluster.verify.lint`, with the API-server schema view
:mod:`gpucluster.verify.lint_schema`), ``gpucluster upgrade-check``
(:mod:`gpucluster.verify.upgrade_check`), ``gpucluster detect`` (:mod:`gpucluster.verify.detect`),
and ``gpucluster snapshot`` / ``validate``: reading a cluster (a snapshot file or the live API,
:mod:`gpucluster.verify.snapshot`),
evaluating Kyverno Chainsaw ``assert``/``error`` tests (:mod:`gpucluster.verify.chainsaw`, used
for AICR's component health checks shipped in ``aicr_checks/``), the checks derived from a
:class:`~gpucluster.model.RuntimePlan` (:mod:`gpucluster.verify.checks`) and the ``validate``
command with its outputs (:mod:`gpucluster.verify.validate`: table, JSON evidence, JUnit).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.hashing`, :mod:`gpucluster.yamlsafe`, ...),
:mod:`gpucluster.inputs`, :mod:`gpucluster.recipes`, :mod:`gpucluster.charts` and, for the plan,
:mod:`gpucluster.pipeline`; optional libraries (``jmespath``,
``kubernetes``: the ``validate`` extra) only inside the functions that need them. Synth imports
only :mod:`gpucluster.verify.gate` (the in-cluster validation gate), from ``build_plan`` and only
for a cluster that sets ``settings.validate``; a plan without it never loads this package.
"""
