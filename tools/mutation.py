"""``make mutation``: how many wrong versions of the modules that make decisions the tests notice.

mutmut 3 (configured in pyproject.toml ``[tool.mutmut]``: fork server, no warm-up) mutates the
functions of :data:`MODULES`; this script

1. lets mutmut make every mutant (``mutants/``) and takes a seeded sample of ``--sample`` of them
   per module (0: all of them);
2. runs the sample with ``mutmut run NAME...`` (each mutant against the tests mutmut saw call the
   mutated function);
3. runs each survivor again against the whole test files those tests live in (or the module's
   :data:`MODULES` files when mutmut saw none): mutmut does not see a test that only reads a
   module-scoped fixture, so a survivor is counted only when the whole files pass;
4. runs the module's test files without a mutant (a module whose tests fail so is reported
   ``NOT MEASURED``: every mutant would look killed), then applies :data:`HAND_MUTANTS`,
   mutations of module-level code mutmut leaves alone (the gate shell scripts, regexes, state
   sets), one at a time to ``mutants/`` and runs the module's files;
5. prints per module: mutants run, killed, survived, set aside (:data:`EQUIVALENT`, each with why
   it cannot change what the code does) and the score ``killed / (run - set aside)``, then every
   survivor as ``function: -old +new``.

Steps 3 and 4 run per module, the modules side by side (``--jobs``). Leave the checkout as it is
while a run lasts: the tests run on the copy in ``mutants/``, but the platform plugins are
imported from the checkout (their editable install). ``--recheck`` keeps the kills
mutmut stored for the sampled mutants in ``mutants/`` (mutmut forgets a function's results when
its code changes) and runs only the rest. Exit code 0 when every module scores at least
``--min-score`` (default 90), else 1.

Usage: ``python tools/mutation.py [--sample N] [--seed S] [--jobs J] [--module PATH ...]
[--no-hand] [--min-score P]``. Run from the repository root, with mutmut installed
(tools/mutation-requirements.txt). Not part of ``make test``: on a shared 2-core machine a
sample of 40 per module takes tens of minutes.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
RESULTS = MUTANTS / "mutation-results.json"
"""The last run's results per module (written by every run, read by ``--summary``)."""

MODULES: dict[str, tuple[str, ...]] = {
    "gpucluster/charts/gates.py": (
        "tests/test_gates.py",
        "tests/test_gates_scripts.py",
        "tests/test_gate_objects.py",
        "tests/test_gate_timeouts.py",
        "tests/test_gate_variables.py",
        "tests/test_day2_gates.py",
        "tests/test_sdk_gates.py",
        "tests/test_dra_reroll.py",
        "tests/test_stages_forward.py",
    ),
    "gpucluster/live/upgrade_live.py": (
        "tests/test_upgrade_live.py",
        "tests/test_validate_evidence.py",
        "tests/test_validate_shapes.py",
    ),
    "gpucluster/recipes/policy.py": (
        "tests/test_policy.py",
        "tests/test_policy_aks.py",
        "tests/test_overrides.py",
        "tests/test_user_reports.py",
    ),
    "gpucluster/lint/upgrade_check.py": (
        "tests/test_upgrade_check.py",
        "tests/test_surge_replacement.py",
        "tests/test_upgrade_live.py",
    ),
}
"""Each mutated module and the test files that judge it (a hand mutant runs all of them)."""


@dataclass(frozen=True)
class HandMutant:
    """A mutation of module-level code: ``old`` (found exactly once in ``module``) -> ``new``."""

    module: str
    name: str
    old: str
    new: str


HAND_MUTANTS: tuple[HandMutant, ...] = (
    # gates.py: the wait script's prelude, the version comparison, the validation regexes
    HandMutant(
        "gpucluster/charts/gates.py",
        "prelude-deadline-gt",
        '"$(now)" -ge "$limit"',
        '"$(now)" -gt "$limit"',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "prelude-no-retry",
        "if check; then return 0; fi",
        "if check; then return 1; fi",
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "prelude-no-err-tail",
        'err=$(tail -n 1 "$errf" 2>/dev/null)',
        "err=''",
    ),
    HandMutant(
        "gpucluster/charts/gates.py", "num-accepts-text", "''|*[!0-9]*) echo 0 ;;", "'') echo 0 ;;"
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-major-lt",
        '[ "$h1" -gt "$w1" ]; return $?; fi',
        '[ "$h1" -lt "$w1" ]; return $?; fi',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-minor-ignored",
        'if [ "$h2" -ne "$w2" ]; then [ "$h2" -gt "$w2" ]; return $?; fi\n',
        "",
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-patch-ignored",
        'if [ "$h3" -ne "$w3" ]; then [ "$h3" -gt "$w3" ]; return $?; fi\n',
        "",
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-prerelease-equal",
        '[ -z "$wp" ] && return 1',
        '[ -z "$wp" ] && return 0',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-not-a-version",
        '[ -n "$h" ] && [ -n "$w" ] || return 2',
        '[ -n "$w" ] || return 2',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "dns-label-uppercase",
        '_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")',
        '_DNS_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$")',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "dns-subdomain-underscore",
        '_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")',
        '_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$")',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "api-version-any",
        '(?:(?:alpha|beta)[0-9]+)?$")',
        '(?:[a-z]+[0-9]+)?$")',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "jsonpath-two-exprs",
        '_JSONPATH = re.compile(r"^\\{\\.[^{}\\n]+\\}$")',
        '_JSONPATH = re.compile(r"^\\{\\.[^\\n]+\\}$")',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "version-regex-any",
        '_VERSION = re.compile(r"^v?[0-9]+',
        '_VERSION = re.compile(r"^v?[0-9a-z]+',
    ),
    HandMutant(
        "gpucluster/charts/gates.py", "max-gate-name-54", "MAX_GATE_NAME = 53", "MAX_GATE_NAME = 54"
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "workload-statefulset",
        'WORKLOAD_KINDS = {"DaemonSet": "daemonsets", "Deployment": "deployments"}',
        'WORKLOAD_KINDS = {"DaemonSet": "daemonsets", "Deployment": "deployments", "StatefulSet": "statefulsets"}',
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "job-margin-0",
        "JOB_START_MARGIN_SECONDS = 60",
        "JOB_START_MARGIN_SECONDS = 0",
    ),
    HandMutant(
        "gpucluster/charts/gates.py",
        "crd-timeout-600",
        '"crd-established": 120,',
        '"crd-established": 600,',
    ),
    # upgrade_live.py: the label names and the state sets
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "state-label",
        'UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"',
        'UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade"',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "initial-state-annotation",
        'INITIAL_UNSCHEDULABLE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"',
        'INITIAL_UNSCHEDULABLE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state"',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "cordon-states-drain",
        '        "drain-required",\n',
        "",
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "cordon-states-failed",
        '        "upgrade-failed",\n    }',
        "    }",
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "stuck-required",
        'STUCK_STATES = frozenset({"upgrade-required", "upgrade-failed"})',
        'STUCK_STATES = frozenset({"upgrade-failed"})',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "stuck-failed",
        'STUCK_STATES = frozenset({"upgrade-required", "upgrade-failed"})',
        'STUCK_STATES = frozenset({"upgrade-required"})',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "crash-reasons-crashloop",
        '        "CrashLoopBackOff",\n        "ImagePullBackOff",',
        '        "ImagePullBackOff",',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "done-states-done",
        'DONE_STATES = frozenset({"", "upgrade-done"})',
        'DONE_STATES = frozenset({""})',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "driver-pod-prefix-daemonset",
        'DRIVER_POD_PREFIXES = ("nvidia-driver-daemonset", "nvidia-gpu-driver-")',
        'DRIVER_POD_PREFIXES = ("nvidia-driver-daemonset-x", "nvidia-gpu-driver-")',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "driver-pod-prefix-nvidiadriver",
        'DRIVER_POD_PREFIXES = ("nvidia-driver-daemonset", "nvidia-gpu-driver-")',
        'DRIVER_POD_PREFIXES = ("nvidia-driver-daemonset",)',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "mig-prefix",
        'MIG_RESOURCE_PREFIX = "nvidia.com/mig-"',
        'MIG_RESOURCE_PREFIX = "nvidia.com/migx-"',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "ctrf-unknown-passes",
        '"unknown": "unsupported"}',
        '"unknown": "pass"}',
    ),
    HandMutant(
        "gpucluster/live/upgrade_live.py",
        "ctrf-manual-passes",
        '"manual": "fail",',
        '"manual": "pass",',
    ),
    # policy.py: chart defaults, default roots, the severity order
    HandMutant(
        "gpucluster/recipes/policy.py",
        "default-device-plugin-off",
        '"devicePlugin.enabled": True,',
        '"devicePlugin.enabled": False,',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "default-driver-off",
        '"driver.enabled": True,',
        '"driver.enabled": False,',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "default-dra-gpus-off",
        '"resources.gpus.enabled": True,',
        '"resources.gpus.enabled": False,',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "default-waiver-on",
        '"gpuResourcesEnabledOverride": False,',
        '"gpuResourcesEnabledOverride": True,',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "operator-root",
        'OPERATOR_CONTAINER_DRIVER_ROOT = "/run/nvidia/driver"',
        'OPERATOR_CONTAINER_DRIVER_ROOT = "/run/nvidia"',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "dra-default-root",
        'DRA_CHART_DEFAULT_ROOT = "/"',
        'DRA_CHART_DEFAULT_ROOT = "/run/nvidia/driver"',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "runtime-class-default",
        'DEFAULT_RUNTIME_CLASS = "nvidia"',
        'DEFAULT_RUNTIME_CLASS = "nvidia-container-runtime"',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "severity-order",
        '_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}',
        '_SEVERITY_ORDER = {"error": 2, "warning": 1, "info": 0}',
    ),
    HandMutant(
        "gpucluster/recipes/policy.py", "check-dropped", "    check_nvsentinel_runtime_class,\n", ""
    ),
    HandMutant(
        "gpucluster/recipes/policy.py",
        "derived-runtimeclass",
        '    "NVSENTINEL-RUNTIMECLASS": frozenset(\n        {\n            (GPU_OPERATOR, "operator.runtimeClass"),\n            ("nvsentinel", "metadata-collector.runtimeClassName"),\n        }\n    ),\n',
        "",
    ),
    # upgrade_check.py: the exit code table CI gates on
    HandMutant(
        "gpucluster/lint/upgrade_check.py", "exit-manual-1", "EXIT_MANUAL = 3", "EXIT_MANUAL = 1"
    ),
    HandMutant(
        "gpucluster/lint/upgrade_check.py",
        "exit-unknown-3",
        "EXIT_UNKNOWN = 4",
        "EXIT_UNKNOWN = 3",
    ),
    HandMutant(
        "gpucluster/lint/upgrade_check.py",
        "exit-unknown-safe",
        '"unknown": EXIT_UNKNOWN}',
        '"unknown": EXIT_SAFE}',
    ),
)
"""Hand mutants of module-level code (mutmut mutates function bodies only)."""

EQUIVALENT: dict[str, str] = {
    "gpucluster/live/upgrade_live.py: NodeState.verdict_for: "
    '-return worst(found) if found else "safe" +return worst(found) if (found) or True else "safe"': (
        "worst() of no verdicts is already 'safe'"
    ),
    "gpucluster/lint/upgrade_check.py: run_sides: "
    '-a = load_side(old, new, workdir / "from", key="--from") '
    '+a = load_side(old, new, workdir / "from", )': "'--from' is load_side's default key",
    "gpucluster/live/upgrade_live.py: render_ctrf: "
    '-"gpusSchedulableDuring": "" if p.gpus_during is None else str(p.gpus_during), '
    '+"gpusSchedulableDuring": "" if (p.gpus_during is None) and False else str(p.gpus_during),': (
        "_pool_states gives every pool a count of GPUs during the change, never None"
    ),
}
"""Survivors set aside, keyed ``module: function: -old +new`` as printed, with why the mutant
cannot change what the code does."""


@dataclass
class Result:
    """One mutant's outcome."""

    key: str
    status: str  # killed | survived | timeout | ...
    how: str = ""


@dataclass
class ModuleReport:
    module: str
    results: list[Result] = field(default_factory=list)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    env.setdefault("CHECKPOINT_DISABLE", "1")
    env.setdefault("TF_CLI_CONFIG_FILE", "/dev/null")
    return env


def _mutmut(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=ROOT,
        env=_env(),
        text=True,
        capture_output=True,
        check=False,
    )


def _sync_data() -> None:
    """Copy the code's non-Python files (catalog, schemas, templates) that changed into ``mutants/``:
    mutmut copies a file only when ``mutants/`` lacks it, and regenerates only Python files."""
    import filecmp

    for src in (ROOT / "gpucluster").rglob("*"):
        if not src.is_file() or src.suffix in (".py", ".pyc") or "__pycache__" in src.parts:
            continue
        dst = MUTANTS / src.relative_to(ROOT)
        if dst.exists() and filecmp.cmp(src, dst, shallow=False):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def _generate() -> None:
    """mutmut's ``mutants/`` without running anything (its own copy and mutation steps), with the
    code's data files brought up to date (:func:`_sync_data`)."""
    code = (
        "import os\n"
        "from mutmut.mutation.trampoline import set_mutant_under_test\n"
        "import mutmut.__main__ as m\n"
        "set_mutant_under_test('mutant_generation')\n"
        "os.makedirs('mutants', exist_ok=True)\n"
        "m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); m.create_mutants(2)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(), text=True, capture_output=True
    )
    if proc.returncode != 0:
        sys.exit(f"mutmut could not make the mutants:\n{proc.stderr[-3000:]}")
    _sync_data()


def _meta(module: str) -> dict[str, int | None]:
    path = MUTANTS / f"{module}.meta"
    return json.loads(path.read_text(encoding="utf-8"))["exit_code_by_key"]


def _status(code: int | None) -> str:
    """mutmut's name for an exit code (killed, survived, no tests, timeout, ...)."""
    import importlib

    return str(importlib.import_module("mutmut.stats").status_by_exit_code[code])


def _function_and_change(module: str, name: str, source: str) -> str:
    """``module: function: -old +new`` of mutant ``name`` (the changed lines of its function)."""
    func = name.rsplit(".", 1)[-1]
    base, _, _ = func.rpartition("__mutmut_")
    orig = _function_text(source, f"{base}__mutmut_orig")
    mutant = _function_text(source, func)
    old = [ln[1:].strip() for ln in difflib.ndiff(orig[1:], mutant[1:]) if ln.startswith("- ")]
    new = [ln[1:].strip() for ln in difflib.ndiff(orig[1:], mutant[1:]) if ln.startswith("+ ")]
    shown = base[2:].replace("ǁ", ".") if base.startswith("xǁ") else base.removeprefix("x_")
    return f"{module}: {shown}: -{' '.join(old)} +{' '.join(new)}"


def _function_text(source: str, name: str) -> list[str]:
    match = re.search(rf"^([ \t]*)(async )?def {re.escape(name)}\(", source, re.M)
    if match is None:
        return []
    indent = match.group(1)
    lines = source[match.start() :].split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if line.strip() and not line.startswith(indent + " ") and not line.startswith(indent + ")"):
            break
        out.append(line)
    return out


def _tests_files(name: str, module: str) -> list[str]:
    """The files of :data:`MODULES` ``module`` holding tests mutmut ran for ``name`` (all of the
    module's files when none): whole files, so a test that reads a module-scoped fixture runs too."""
    stats = MUTANTS / "mutmut-stats.json"
    files: set[str] = set()
    if stats.exists():
        data = json.loads(stats.read_text(encoding="utf-8"))
        mangled = name.rpartition("__mutmut_")[0]
        for test in data.get("tests_by_mangled_function_name", {}).get(mangled, []):
            files.add(test.split("::", 1)[0])
    own = [f for f in MODULES[module] if f in files]
    return own or list(MODULES[module])


def _pytest(files: list[str], mutant: str, timeout: float) -> int:
    """Run ``files`` in ``mutants/`` with ``mutant`` active ('' for the code as it is there)."""
    env = _env()
    env["MUTANT_UNDER_TEST"] = mutant
    env["PYTHONPATH"] = str(MUTANTS)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-x",
                "-q",
                "-n",
                "0",
                "-p",
                "no:cacheprovider",
                *files,
            ],
            cwd=MUTANTS,
            env=env,
            text=True,
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return -1
    return proc.returncode


def _hand_key(mutant: HandMutant) -> str:
    return f"{mutant.module}: (module) {mutant.name}"


def _hand(mutant: HandMutant) -> Result:
    path = MUTANTS / mutant.module
    text = path.read_text(encoding="utf-8")
    key = _hand_key(mutant)
    if text.count(mutant.old) != 1:
        return Result(key, "stale", f"the text to mutate is found {text.count(mutant.old)} times")
    stamp = path.stat()
    try:
        path.write_text(text.replace(mutant.old, mutant.new), encoding="utf-8")
        code = _pytest(list(MODULES[mutant.module]), "", timeout=1800)
    finally:
        path.write_text(text, encoding="utf-8")
        # mutmut regenerates a file only when the code is newer than it: keep its time
        os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    if code == -1:
        return Result(key, "timeout")
    return Result(key, "killed" if code not in (0, 5) else "survived", "hand mutant, whole files")


def _print_scores(
    results: dict[str, list[Result]], about: dict[str, str], min_score: float
) -> bool:
    """Print each module's score and survivors (:data:`EQUIVALENT` set aside); True when one
    scores below ``min_score``."""
    failing = False
    print()
    for module, found in results.items():
        aside = [r for r in found if r.status == "survived" and r.key in EQUIVALENT]
        if any(r.status == "not measured" for r in found):
            print(f"{module}: NOT MEASURED: its test files fail without a mutant (mutants/ stale?)")
            failing = True
            continue
        alive = [r for r in found if r.status in ("survived", "stale") and r.key not in EQUIVALENT]
        counted = len(found) - len(aside)
        killed = counted - len(alive)
        score = 100.0 * killed / counted if counted else 100.0
        failing |= score < min_score
        print(
            f"{module}: {score:.1f}% ({killed} killed of {counted}; {len(found)} run: "
            f"{about[module]}; {len(aside)} set aside as equivalent)"
        )
        for r in sorted(alive, key=lambda r: r.key):
            print(f"  survived: {r.key}  [{r.how}]")
        for r in sorted(aside, key=lambda r: r.key):
            print(f"  equivalent: {r.key}: {EQUIVALENT[r.key]}")
    return failing


def _summary(min_score: float) -> int:
    """``--summary``: the scores of the last run (:data:`RESULTS`) with today's :data:`EQUIVALENT`."""
    if not RESULTS.exists():
        sys.exit(f"no results yet ({RESULTS}): run without --summary first")
    doc = json.loads(RESULTS.read_text(encoding="utf-8"))
    results = {m: [Result(*r) for r in rs] for m, rs in doc["results"].items()}
    return 1 if _print_scores(results, doc["about"], min_score) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=40, help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument("--module", action="append", choices=sorted(MODULES))
    parser.add_argument("--no-hand", action="store_true", help="skip the hand mutants")
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="keep the kills mutmut stored for the sample (it forgets them when a function changes); "
        "run the rest",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print the last run's scores again (with the equivalent mutants named since)",
    )
    args = parser.parse_args(argv)
    if args.summary:
        return _summary(args.min_score)
    modules = args.module or list(MODULES)
    started = time.monotonic()

    _generate()
    rng = random.Random(args.seed)
    sample: dict[str, list[str]] = {}
    total: dict[str, int] = {}
    for module in modules:
        names = sorted(_meta(module))
        total[module] = len(names)
        sample[module] = (
            names
            if args.sample <= 0 or args.sample >= len(names)
            else sorted(rng.sample(names, args.sample))
        )
    reports = {m: ModuleReport(m) for m in modules}
    keys = {}
    for module in modules:
        source = (MUTANTS / module).read_text(encoding="utf-8")
        for name in sample[module]:
            keys[name] = _function_and_change(module, name, source)
    names = [n for m in modules for n in sample[m]]
    stored: dict[str, str] = {}
    if args.recheck:
        for module in modules:
            codes = _meta(module)
            for name in sample[module]:
                if _status(codes.get(name)) not in ("survived", "no tests", "not checked"):
                    stored[name] = _status(codes.get(name))
        names = [n for n in names if n not in stored]
    print(f"mutmut run: {len(names)} mutants of {sum(total.values())}", flush=True)
    t0 = time.monotonic()
    proc = _mutmut("run", "--max-children", str(args.jobs), *names) if names else None
    run_seconds = time.monotonic() - t0
    if proc is not None and proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        return 2

    survivors: list[tuple[str, str, str]] = []
    run_now = set(names)
    for module in modules:
        codes = _meta(module)
        for name in sample[module]:
            key = keys[name]
            if name not in run_now:
                reports[module].results.append(Result(key, stored[name], f"{name} (stored)"))
                continue
            status = _status(codes.get(name))
            if status in ("survived", "no tests"):
                survivors.append((module, name, key))
            else:
                reports[module].results.append(Result(key, status, name))
    # the tests as they are now (a test added while mutmut ran can only kill more)
    shutil.copytree(ROOT / "tests", MUTANTS / "tests", dirs_exist_ok=True)
    hands = [h for h in HAND_MUTANTS if h.module in reports and not args.no_hand]
    print(
        f"re-running {len(survivors)} survivors against whole test files; {len(hands)} hand mutants",
        flush=True,
    )

    def one_module(module: str) -> list[Result]:
        """A module's survivors, then its hand mutants (which edit its file in mutants/): one at
        a time, while other modules run in the other workers."""
        out: list[Result] = []
        if _pytest(list(MODULES[module]), "", 1800) != 0:
            # a failure without a mutant would count every mutant as killed
            return [Result(f"{module}: the tests fail without a mutant", "not measured")]
        for m, name, key in survivors:
            if m == module:
                code = _pytest(_tests_files(name, module), name, 1800)
                status = "timeout" if code == -1 else ("survived" if code in (0, 5) else "killed")
                out.append(Result(key, status, f"{name} (whole files)"))
        return out + [_hand(h) for h in hands if h.module == module]

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for module, results in zip(modules, pool.map(one_module, modules), strict=True):
            reports[module].results.extend(results)

    about = {
        m: f"{len(sample[m])} of mutmut's {total[m]} mutants (seed {args.seed}) + hand mutants"
        for m in modules
    }
    by_module = {m: reports[m].results for m in modules}
    RESULTS.write_text(
        json.dumps(
            {
                "about": about,
                "results": {
                    m: [[r.key, r.status, r.how] for r in rs] for m, rs in by_module.items()
                },
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    failing = _print_scores(by_module, about, args.min_score)
    elapsed = time.monotonic() - started
    per = run_seconds / max(1, len(names))
    full = per * sum(total.values())
    print(
        f"\n{elapsed:.0f} s in all; mutmut ran {len(names)} mutants in {run_seconds:.0f} s "
        f"({per:.1f} s each with --jobs {args.jobs}): all {sum(total.values())} would take about "
        f"{full / 60:.0f} min"
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
