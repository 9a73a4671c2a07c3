"""Property-based fuzzing of the cluster file (Hypothesis): the bad-input contract holds for any input.

The contract (docs/cluster-file.md, BRIEF "Bad input"): ``gpucluster plan`` / ``main.py`` either
exit 0 with a plan, or exit 2 printing only ``error[<id>] ...: ... fix: ...`` lines (plus
``warning[...]``/``info[...]`` lines, also one line each with a ``fix:``); never a traceback or an
unexpected exception; a failed run leaves the previous output byte-identical; and no string of
the input reaches Terraform as an unescaped ``${``/``%{`` template sequence.

Profiles (both seeded, :data:`SEED`; no example database, so a run is reproducible):

* ``fast`` (default, ``make test``): :data:`FAST_EXAMPLES` in-process cases per strategy.
* ``long`` (``make fuzz``, ``GPUCLUSTER_FUZZ=long``): ``GPUCLUSTER_FUZZ_EXAMPLES`` (default 2,000)
  cases for the mutated-document and YAML strategies, a quarter for valid documents and half for
  ``--set`` arguments: 5,500 in-process cases (plus the file-reference table).

In-process cases drive ``gpucluster.cli.main(["plan", ...])``: the same loader and pipeline
``main.py`` runs before it imports cdktf. Catalog YAML files (not fuzzed) are parsed once per
process and copied for every case, which is what keeps the long profile affordable. Cases that
plan successfully with a Terraform payload in them are synthesized in-process
(``gpucluster_cdk.stacks.synth``) now and then; a smaller number of real ``main.py`` subprocess runs checks the
whole script, previous output included (tests/test_fuzz_main.py).
"""

from __future__ import annotations

import copy
import functools
import io
import json
import os
import re
import tempfile
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import fuzz_cluster as fc
from gpucluster import catalog as catalog_mod
from gpucluster import config
from gpucluster.cli import main as cli_main

SEED = 20261201
FAST_EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_FAST_EXAMPLES", "60"))
LONG = os.environ.get("GPUCLUSTER_FUZZ") == "long"
EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_EXAMPLES", "2000")) if LONG else FAST_EXAMPLES

settings.register_profile(
    "gpucluster-fuzz", max_examples=EXAMPLES, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)
FUZZ = settings.get_profile("gpucluster-fuzz")
FUZZ_VALID = settings(FUZZ, max_examples=int(os.environ.get("GPUCLUSTER_FUZZ_VALID_EXAMPLES", max(EXAMPLES // 4, 10))))
"""Valid documents plan fully (~0.7 s each): a quarter of the budget (GPUCLUSTER_FUZZ_VALID_EXAMPLES)."""
FUZZ_SETS = settings(FUZZ, max_examples=int(os.environ.get("GPUCLUSTER_FUZZ_SET_EXAMPLES", max(EXAMPLES // 2, 10))))

LINE = re.compile(r"^(error|warning|info)\[[A-Za-z0-9._-]+\][^\n]*: [^\n]* fix: \S[^\n]*$")
"""One contract line: ``severity[id] ...: message ... fix: ...`` with no control characters."""
UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

STATS = {"cases": 0, "exit0": 0, "exit2": 0}


@pytest.fixture(scope="module", autouse=True)
def catalog_parsed_once():
    """Parse each catalog YAML file once per process (the catalog is not what is fuzzed)."""
    original = catalog_mod._load_yaml
    cached = functools.lru_cache(maxsize=None)(original)
    catalog_mod._load_yaml = lambda path: copy.deepcopy(cached(path))
    yield
    catalog_mod._load_yaml = original


def run_plan(text: str, sets: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """``gpucluster plan --config <file with text> [--set ...]`` in-process: (exit code, stdout, stderr).

    The cluster file's folder is laid out by :func:`fuzz_cluster.lay_out_project`. An exception
    escaping the CLI is a contract failure (it would be a traceback)."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-fuzz-") as folder:
        fc.lay_out_project(folder)
        path = Path(folder) / "gpucluster.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        out, err = io.StringIO(), io.StringIO()
        argv = ["plan", "--config", str(path)] + [arg for s in sets for arg in ("--set", s)]
        try:
            code = cli_main(argv, stdout=out, stderr=err)
        except BaseException as exc:  # noqa: BLE001
            pytest.fail(f"exception escaped the CLI: {''.join(traceback.format_exception(exc))}\n--- input ---\n{text[:2000]}")
    STATS["cases"] += 1
    STATS[f"exit{code}"] = STATS.get(f"exit{code}", 0) + 1
    return code, out.getvalue(), err.getvalue()


def check_contract(code: int, out: str, err: str, text: str) -> None:
    where = f"\n--- input ---\n{text[:2000]}\n--- stderr ---\n{err[:4000]}"
    assert "Traceback" not in err, where
    lines = err.splitlines()
    for line in lines:
        assert LINE.match(line), f"not a contract line: {line[:300]!r}{where}"
        assert not UNSAFE.search(line), f"raw control character in {line[:300]!r}{where}"
        assert len(line) < 2500, f"line of {len(line)} characters{where}"
    if code == 0:
        assert out.startswith("cluster "), where
        assert not any(line.startswith("error[") for line in lines), where
    else:
        assert code == 2, f"exit {code}{where}"
        assert out == "", where
        assert any(line.startswith("error[") for line in lines), where
        assert not any(line.startswith("error[internal]") for line in lines), where


def test_schema_strategies_cover_every_cluster_key():
    """A key added to the cluster file gets a strategy here, or this fails."""
    assert set(fc.CLUSTER_FIELDS) == set(config.CLUSTER_KEYS)
    assert {"clusters", "backend", "charts", "fleet"} == set(config.TOP_KEYS)  # fleet: tests/test_fleet*.py


@FUZZ_VALID
@seed(SEED)
@given(fc.valid_documents())
def test_valid_documents_plan(doc):
    text = fc.dump(doc)
    code, out, err = run_plan(text)
    check_contract(code, out, err, text)
    assert code == 0, err


@FUZZ
@seed(SEED + 1)
@given(fc.mutated_documents())
def test_mutated_documents_keep_the_contract(doc):
    text = fc.dump(doc)
    code, out, err = run_plan(text)
    check_contract(code, out, err, text)


@FUZZ
@seed(SEED + 2)
@given(fc.yaml_texts())
def test_yaml_level_attacks_keep_the_contract(text):
    code, out, err = run_plan(text)
    check_contract(code, out, err, text)
    assert not Path("/tmp/" + fc.PROBE).exists(), "a YAML tag ran a command"


@FUZZ_SETS
@seed(SEED + 3)
@given(fc.valid_documents(), st.lists(st.one_of(st.sampled_from(fc.DEEP_SETS + fc.SAFE_SETS), fc.hostile_strings),
                                      min_size=1, max_size=3))
def test_set_arguments_keep_the_contract(doc, sets):
    text = fc.dump(doc)
    code, out, err = run_plan(text, tuple(sets))
    check_contract(code, out, err, text + f"\n--set {sets!r}")


@pytest.mark.parametrize("ref", fc.PATH_PAYLOADS)
@pytest.mark.parametrize("key", ["recipe", "values-file"])
def test_hostile_file_references_are_one_line_errors(ref, key):
    """Every hostile file name in both places that reach the file system: one error line, or a plan."""
    cluster = {"name": "lab", "criteria": dict(fc.AKS_CRITERIA[0])}
    if key == "recipe":
        cluster = {"name": "lab", "recipe": ref}
    else:
        cluster["overrides"] = {"values": [{"component": "gpu-operator", "file": ref}]}
    text = fc.dump({"clusters": [cluster]})
    code, out, err = run_plan(text)
    check_contract(code, out, err, text)


def test_zz_report_figures(capsys):
    """Print how many cases ran (``make fuzz`` quotes it)."""
    with capsys.disabled():
        print(f"\nfuzz cases in-process: {STATS['cases']} (exit 0: {STATS['exit0']}, exit 2: {STATS['exit2']}, "
              f"profile {'long' if LONG else 'fast'}, {EXAMPLES} examples per strategy, seed {SEED})")
