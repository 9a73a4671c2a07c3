"""Helm's engine and client, in process: PyPI ``helm-python-sdk`` (import ``helm_python``; Helm v4
compiled into the wheel, no helm binary), imported on first use so the core imports without the
``render`` extra. Used by :mod:`gpucluster.lint.render` (render, lint) and :mod:`gpucluster.charts.pull`
(``charts pull``).
"""

from __future__ import annotations

from gpucluster.errors import GpuclusterError


def helm():
    """The ``helm_python`` module (Helm v4 engine), with Helm's own log lines off.

    Raises:
        GpuclusterError: the ``render`` extra is not installed.
    """
    try:
        import helm_python  # noqa: PLC0415  (optional extra)

        helm_python.disable_logging()  # Helm's INFO lines (symbolic links followed) are noise here
    except ImportError:
        raise GpuclusterError(
            "gpucluster render, lint and charts pull need Helm's engine (PyPI helm-python-sdk), which is not installed",
            key="render",
            fix="pip install 'gpucluster[render]' (make setup installs it)",
        ) from None
    return helm_python
