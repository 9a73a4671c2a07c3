"""Built-in gpucluster platform plugin for Oracle Kubernetes Engine (OKE).

OKE clusters exist already: gpucluster installs the NVIDIA GPU software stack into them
through the ``<name>-runtime`` stack only (kubeconfig from the cluster file's ``existing:``).
Registered under the ``gpucluster`` entry-point group like a third-party plugin and written
against the public SDK (:mod:`gpucluster.sdk`) only. Each hook lives in one submodule:

* ``platform``  gpucluster_platforms, gpucluster_catalog_dirs, gpucluster_prepare_cluster
* ``policy``    gpucluster_policy_checks (OKE-specific checks)
* ``gates``     gpucluster_gates (OKE readiness gates)

Catalog (``catalog/``): the OKE recipe family of NVIDIA AI Cluster Runtime (overlays ``oke-ol*``,
``gb200-oke-*``, ``a100-oke-*``, ``l40s-oke-*``, the ``gb200/a100/l40s-any`` accelerator
overlays) with its values files and manifest templates; see docs/oke.md.
"""

from gpucluster_oke.gates import *  # noqa: F401,F403
from gpucluster_oke.platform import *  # noqa: F401,F403
from gpucluster_oke.policy import *  # noqa: F401,F403
