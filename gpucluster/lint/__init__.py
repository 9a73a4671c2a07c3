"""The offline commands beside synth: a chart set or a revision checked from files, no cluster.

Owns: ``gpucluster render`` and ``lint`` (:mod:`gpucluster.lint.render`: every release rendered
with Helm's own engine, offline; :mod:`gpucluster.lint.lint`, with the API-server schema view
:mod:`gpucluster.lint.lint_schema` and the CRDs' CEL rules :mod:`gpucluster.lint.lint_cel`),
``gpucluster images`` (:mod:`gpucluster.lint.images`, its Hauler and Zarf schemas in
``schemas/``), the plan's ``warning[values.unread]`` (:mod:`gpucluster.lint.unread`) and
``gpucluster upgrade-check --from OLD --to NEW``, the comparison of two revisions' files
(:mod:`gpucluster.lint.upgrade_check`).

May import: the leaves at the package root (:mod:`gpucluster.model`, :mod:`gpucluster.errors`,
:mod:`gpucluster.values`, :mod:`gpucluster.versions`, :mod:`gpucluster.hashing`,
:mod:`gpucluster.yamlsafe`, :mod:`gpucluster.outfolder`, :mod:`gpucluster.plugins`, ...),
:mod:`gpucluster.recipes`, :mod:`gpucluster.charts`, :mod:`gpucluster.inputs` and, for the plans,
:mod:`gpucluster.pipeline`; optional libraries (``helm_python``: the ``render`` extra, ``celpy``,
``kubernetes_validate``) only inside the functions that need them. Never :mod:`gpucluster.live`
(what reads a cluster), not even inside a function, nor the commands or ``gpucluster.sdk``
(tests/test_core_imports.py).
"""
