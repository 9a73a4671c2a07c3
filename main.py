#!/usr/bin/env python3
"""This repository's cdktf app (``cdktf.json``: ``.venv/bin/python main.py``).

The app itself is :mod:`gpucluster_cdk.app`, which an installed gpucluster runs as ``python -m
gpucluster_cdk``; this file runs it the same way from the source tree (``import main;
main.main([])`` calls it in-process).
"""

if __name__ == "__main__":
    from gpucluster_cdk import app

    app.install_stop_handlers()
    app.run_script()
else:
    from gpucluster_cdk.app import main  # noqa: F401
