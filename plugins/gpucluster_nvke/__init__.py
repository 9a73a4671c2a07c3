"""Built-in gpucluster platform plugin for NVIDIA Kubernetes Engine (NVKE) on GB200 NVL trays.

Registered under the ``gpucluster`` entry-point group exactly like a third-party plugin and
written against the public SDK (:mod:`gpucluster.sdk`), the standard library and PyYAML only
(``tests/test_nvke_plugin.py`` parses every module to prove it). One hook per submodule:

* ``platform``   gpucluster_platforms, gpucluster_catalog_dirs, gpucluster_prepare_cluster
* ``values``     gpucluster_adjust_values
* ``manifests``  gpucluster_manifests (NicClusterPolicy, rails, NodeWright, ConfigMap)
* ``gates``      gpucluster_gates
* ``policy``     gpucluster_policy_checks

Pure helpers: ``settings`` (cluster-file inputs) and ``fabric`` (object builders).
See docs/nvke.md.
"""

from gpucluster_nvke.gates import gpucluster_gates
from gpucluster_nvke.manifests import gpucluster_manifests
from gpucluster_nvke.platform import (
    gpucluster_catalog_dirs,
    gpucluster_platforms,
    gpucluster_prepare_cluster,
)
from gpucluster_nvke.policy import gpucluster_policy_checks
from gpucluster_nvke.values import gpucluster_adjust_values

__all__ = [  # the hook implementations pluggy finds on this module
    "gpucluster_adjust_values",
    "gpucluster_catalog_dirs",
    "gpucluster_gates",
    "gpucluster_manifests",
    "gpucluster_platforms",
    "gpucluster_policy_checks",
    "gpucluster_prepare_cluster",
]
