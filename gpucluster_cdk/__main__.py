"""``python -m gpucluster_cdk``: the cdktf app (the ``app`` of a project's ``cdktf.json``).

See :mod:`gpucluster_cdk.app`; the stop-signal handlers are installed before gpucluster is imported.
"""

from gpucluster_cdk import app

app.install_stop_handlers()
app.run_script()
