"""Built-in gpucluster platform plugin for Azure Kubernetes Service (AKS).

Registered under the ``gpucluster`` entry-point group exactly like a third-party plugin and
written against the public SDK (:mod:`gpucluster.sdk`) only. Each hook lives in one submodule:

* ``platform``  gpucluster_platforms, gpucluster_catalog_dirs, gpucluster_prepare_cluster
* ``cluster``   gpucluster_cluster_stack (the only place importing ``gpucluster_cdk.constructs_lib``, lazily)
* ``policy``    gpucluster_policy_checks (AKS-specific checks)
* ``gates``     gpucluster_gates (AKS readiness gates)
"""

from gpucluster_aks.cluster import *  # noqa: F401,F403
from gpucluster_aks.gates import *  # noqa: F401,F403
from gpucluster_aks.platform import *  # noqa: F401,F403
from gpucluster_aks.policy import *  # noqa: F401,F403
