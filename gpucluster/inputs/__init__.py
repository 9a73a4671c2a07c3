"""The inputs: the cluster file and what it declares.

Owns: reading and validating ``gpucluster.yaml`` (or the embedded default) into
:class:`~gpucluster.model.ClusterSpec` objects (:mod:`gpucluster.inputs.config`), the Terraform
backends a cluster or fleet names (:mod:`gpucluster.inputs.backends`), the fleet section with
its update groups and rollout (:mod:`gpucluster.inputs.fleet`) and the AKS scheduler profiles with
the ``SchedulerConfiguration`` release they become (:mod:`gpucluster.inputs.scheduler_profiles`).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.fields`, :mod:`gpucluster.yamlsafe`, ...), :mod:`gpucluster.plugins` (the
platforms' declared inputs), and the parsers of the cluster-file sections other packages own
(:mod:`gpucluster.recipes`: overrides, scheduling, a RecipeResult file; :mod:`gpucluster.charts`:
chart mirrors, the manifest chart builder). Never :mod:`gpucluster.pipeline`, :mod:`gpucluster.lint`, :mod:`gpucluster.live`, the commands or
``gpucluster.sdk``.
"""
