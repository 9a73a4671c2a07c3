"""gpucluster's CDK for Terraform layer: the cdktf app, the stacks and the constructs.

* :mod:`gpucluster_cdk.app` -- the app ``cdktf synth`` runs (``python -m gpucluster_cdk``) and
  ``gpucluster synth`` calls in-process;
* :mod:`gpucluster_cdk.stacks` -- ``<name>-cluster``, ``<name>-runtime`` and fleet stacks, atomic output;
* :mod:`gpucluster_cdk.constructs_lib` -- the constructs; ``constructs_lib/cdk.py`` is the only
  module that imports cdktf (or CDK Terrain) and the provider bindings.

The domain core (:mod:`gpucluster`) never imports this package (the test kit and ``gpucluster
synth`` do, inside the functions that synthesize). This file imports nothing, so ``python -m
gpucluster_cdk`` installs its signal handlers before any gpucluster code runs.
"""
