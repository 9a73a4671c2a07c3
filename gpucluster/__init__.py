"""gpucluster: turn a description of a GPU Kubernetes cluster into Terraform.

The package root is the pure-Python domain core (recipes, resolution, overrides,
policies, gates as data). It never imports cdktf or provider bindings; those live
behind ``gpucluster_cdk.constructs_lib.cdk``. The plugin SDK for third parties is ``gpucluster.sdk``.
"""

__version__ = "0.1.0"
"""The tool's version: the distribution's (``pyproject.toml`` reads it from here), ``gpucluster
--version``, the ``gpucluster[cdk]==`` pin of a project ``gpucluster init`` creates."""

SDK_API_VERSION = "1.0.0"
"""Version of the plugin SDK's API (:mod:`gpucluster.sdk`, its submodules ``hookspecs``, ``gates``
and ``testing``, and the hook specifications), exported as ``gpucluster.sdk.API_VERSION``.

Semantic versioning, independent of :data:`__version__` (docs/plugins.md, "Compatibility"): a
major release may remove or change what plugins use; a minor one only adds (a hook, an export, a
keyword argument with a default); a patch changes nothing plugins see. Whatever is removed in a
major release was deprecated, with a ``DeprecationWarning`` naming the replacement, for at least
one minor release before."""
