"""gpucluster: turn a description of a GPU Kubernetes cluster into Terraform.

The package root is the pure-Python domain core (recipes, resolution, overrides,
policies, gates as data). It never imports cdktf or provider bindings; those live
behind ``gpucluster_cdk.constructs_lib.cdk``. The plugin SDK for third parties is ``gpucluster.sdk``.
"""

__version__ = "0.1.0"
