"""The rehearsal rig: a real Kubernetes control plane built from source, KWOK GPU nodes, on loopback.

A room of its own: the core (``gpucluster``) never imports it; ``gpucluster rehearse`` runs
``python -m gpucluster_rig``. Modules: :mod:`~gpucluster_rig.build` (the Go builds and their
cache), :mod:`~gpucluster_rig.cluster` (kwokctl), :mod:`~gpucluster_rig.sink` (the egress sink),
:mod:`~gpucluster_rig.nodes` (KWOK nodes from a cluster file), :mod:`~gpucluster_rig.charts`
(a chart repository on 127.0.0.1), :mod:`~gpucluster_rig.engine` (the stack applied with Helm),
:mod:`~gpucluster_rig.runner` (our Jobs run for real), :mod:`~gpucluster_rig.standins`
(operator stand-ins), :mod:`~gpucluster_rig.aks_scheduler` (AKS's scheduler profiles),
:mod:`~gpucluster_rig.rehearse` (the whole rehearsal),
:mod:`~gpucluster_rig.day2` (a rig kept up across revisions of a cluster file). docs/rehearse.md.
"""
