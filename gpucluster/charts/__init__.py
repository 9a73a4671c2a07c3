"""The charts: what each component becomes in Terraform, and where its charts come from.

Owns: the manifest charts rendered from the catalog's templates (:mod:`gpucluster.charts.manifests`),
readiness gates (:mod:`gpucluster.charts.gates`; the NVIDIA-stack gate shapes,
:mod:`gpucluster.charts.gate_helpers`, re-exported as ``gpucluster.sdk.gates``), the one builder
of gpucluster's own Job charts (:mod:`gpucluster.charts.jobchart`), CRD steps
(:mod:`gpucluster.charts.crds`), teardown guards (:mod:`gpucluster.charts.teardown`), the release
graph (:mod:`gpucluster.charts.graph`), chart mirrors (:mod:`gpucluster.charts.mirrors`), the
chart cache (:mod:`gpucluster.charts.chartcache`), ``gpucluster charts pull``
(:mod:`gpucluster.charts.pull`) and the Helm SDK wrapper both use (:mod:`gpucluster.charts.helmsdk`).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.hashing`, :mod:`gpucluster.versions`,
:mod:`gpucluster.diskcache`, :mod:`gpucluster.fields`), :mod:`gpucluster.plugins` (the manifest and gate hooks) and
:mod:`gpucluster.recipes` (the catalog and the scheduling inputs). Nothing from
:mod:`gpucluster.inputs`, :mod:`gpucluster.pipeline`, :mod:`gpucluster.lint`, :mod:`gpucluster.live` or
``gpucluster.sdk``.
"""
