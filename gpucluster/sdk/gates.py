"""NVIDIA-stack gate constructors, the SDK's path (defined in :mod:`gpucluster.charts.gate_helpers`).

The core's default ClusterPolicy gate uses them too; they live in the core so that the core
never imports :mod:`gpucluster.sdk` (whose ``__init__`` re-exports the core).
"""

from gpucluster.charts.gate_helpers import *  # noqa: F401,F403  (re-exported)
from gpucluster.charts.gate_helpers import __all__  # noqa: F401
