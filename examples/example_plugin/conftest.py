"""pytest set-up of the example plugin: the gpucluster test kit's ``gpucluster_kit`` fixture.

In a plugin's own repository the root ``conftest.py`` may instead say
``pytest_plugins = ["gpucluster.sdk.testing"]``.
"""

from gpucluster.sdk.testing import gpucluster_kit  # noqa: F401  (the fixture)
