"""The hook specifications, the SDK's path (defined in :mod:`gpucluster.hookspecs`, in call order).

They live in the core so that the plugin manager (:mod:`gpucluster.plugins`) never imports
:mod:`gpucluster.sdk`, whose ``__init__`` re-exports the core.
"""

from gpucluster.hookspecs import *  # noqa: F401,F403  (re-exported, in definition order)
from gpucluster.hookspecs import HOOK_ORDER, READ_ONLY_ARGS, hookspec  # noqa: F401
