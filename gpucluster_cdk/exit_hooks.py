"""Exit hooks a process runs itself before it ends with ``os._exit`` (no cdktf import).

The synth script (:func:`gpucluster_cdk.app.run_script`) and a forked synth worker
(:mod:`gpucluster_cdk.stacks.workers`) end with ``os._exit``: the script so that a stop signal in
the interpreter's finalization cannot end it with -15 instead of its one line, a worker so that
nothing of its parent (pytest's, a plugin's, gpucluster's own exit hooks) runs in it twice. Before
that they run the exit hooks registered with :mod:`atexit` (the jsii kernel's stop, the private
``TMPDIR``'s removal), and a worker drops the hooks it inherited when it starts.

:mod:`atexit` has no public call for either, so this uses CPython's undocumented
``atexit._run_exitfuncs`` and ``atexit._clear`` (in CPython 3.11-3.13, C module
``Modules/atexitmodule.c``), and only on the CPython versions they were checked on
(:data:`CHECKED_PYTHONS`). On any other interpreter the plain path is taken: the script ends
through ``SystemExit`` (the interpreter runs the hooks), a worker neither drops nor runs hooks and
ends with ``os._exit`` (its jsii kernel ends when its standard input closes; its staging folders
are inside the parent's private ``TMPDIR``, which the parent removes). docs/synth.md, "What we
patch, why, and how it turns itself off"; tests/test_exit_hooks.py forces the plain path.
"""

from __future__ import annotations

import atexit
import sys

CHECKED_PYTHONS = ((3, 11), (3, 12), (3, 13))
"""``sys.version_info[:2]`` of the CPython versions whose ``atexit._run_exitfuncs`` and
``atexit._clear`` this module was checked against."""


def private_atexit() -> bool:
    """True when this interpreter is a checked CPython (:data:`CHECKED_PYTHONS`) whose
    :mod:`atexit` has ``_run_exitfuncs`` and ``_clear``; else the plain path is taken."""
    return (
        sys.implementation.name == "cpython"
        and sys.version_info[:2] in CHECKED_PYTHONS
        and callable(getattr(atexit, "_run_exitfuncs", None))
        and callable(getattr(atexit, "_clear", None))
    )


def run_now() -> bool:
    """Run every registered exit hook now, last registered first, as the interpreter does at
    exit (an exception in one is reported through ``sys.unraisablehook`` and the others still
    run). Returns False, running nothing, when :func:`private_atexit` is False."""
    if not private_atexit():
        return False
    atexit._run_exitfuncs()
    return True


def drop_inherited() -> bool:
    """Forget every exit hook registered so far (a forked child's inherited ones). Returns False,
    dropping nothing, when :func:`private_atexit` is False."""
    if not private_atexit():
        return False
    atexit._clear()
    return True
