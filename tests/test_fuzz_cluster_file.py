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

Properties of hostile input classes besides the mutations: a control character (a trailing
newline written as a YAML block scalar, mostly) in any string of a valid document never reaches
the plan; an integer outside int64 in any base is one error naming its key; any cache entry under
a valid checksum decodes to plain data or a miss within bounded memory; an option-like
``upgrade-check`` revision is one error line and writes nothing; a folder holding a user file and
no output marker is never replaced (a quarter, an eighth or a quarter of the budget each).

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

import fuzz_cluster as fc
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gpucluster.cli import main as cli_main
from gpucluster.inputs import config
from gpucluster.recipes import catalog as catalog_mod

SEED = 20261201
FAST_EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_FAST_EXAMPLES", "60"))
LONG = os.environ.get("GPUCLUSTER_FUZZ") == "long"
EXAMPLES = int(os.environ.get("GPUCLUSTER_FUZZ_EXAMPLES", "2000")) if LONG else FAST_EXAMPLES

settings.register_profile(
    "gpucluster-fuzz",
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)
FUZZ = settings.get_profile("gpucluster-fuzz")
FUZZ_VALID = settings(
    FUZZ, max_examples=int(os.environ.get("GPUCLUSTER_FUZZ_VALID_EXAMPLES", max(EXAMPLES // 4, 10)))
)
"""Valid documents plan fully (~0.7 s each): a quarter of the budget (GPUCLUSTER_FUZZ_VALID_EXAMPLES)."""
FUZZ_SETS = settings(
    FUZZ, max_examples=int(os.environ.get("GPUCLUSTER_FUZZ_SET_EXAMPLES", max(EXAMPLES // 2, 10)))
)

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


def run_plan(
    text: str, sets: tuple[str, ...] = (), extra: tuple[str, ...] = ()
) -> tuple[int, str, str]:
    """``gpucluster plan --config <file with text> [--set ...]`` in-process: (exit code, stdout, stderr).

    The cluster file's folder is laid out by :func:`fuzz_cluster.lay_out_project`. An exception
    escaping the CLI is a contract failure (it would be a traceback)."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-fuzz-") as folder:
        fc.lay_out_project(folder)
        path = Path(folder) / "gpucluster.yaml"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        out, err = io.StringIO(), io.StringIO()
        argv = ["plan", "--config", str(path), *extra] + [arg for s in sets for arg in ("--set", s)]
        try:
            code = cli_main(argv, stdout=out, stderr=err)
        except BaseException as exc:  # noqa: BLE001
            pytest.fail(
                f"exception escaped the CLI: {''.join(traceback.format_exception(exc))}\n--- input ---\n{text[:2000]}"
            )
    STATS["cases"] += 1
    STATS[f"exit{code}"] = STATS.get(f"exit{code}", 0) + 1
    return code, out.getvalue(), err.getvalue()


def check_contract(code: int, out: str, err: str, text: str, *, plan_text: bool = True) -> None:
    where = f"\n--- input ---\n{text[:2000]}\n--- stderr ---\n{err[:4000]}"
    assert "Traceback" not in err, where
    lines = err.splitlines()
    for line in lines:
        assert LINE.match(line), f"not a contract line: {line[:300]!r}{where}"
        assert not UNSAFE.search(line), f"raw control character in {line[:300]!r}{where}"
        assert len(line) < 2500, f"line of {len(line)} characters{where}"
    if code == 0:
        assert out.startswith("cluster " if plan_text else "["), where
        assert not any(line.startswith("error[") for line in lines), where
    else:
        assert code == 2, f"exit {code}{where}"
        assert out == "", where
        assert any(line.startswith("error[") for line in lines), where
        assert not any(line.startswith("error[internal]") for line in lines), where


def test_schema_strategies_cover_every_cluster_key():
    """A key added to the cluster file gets a strategy here, or this fails."""
    assert set(fc.CLUSTER_FIELDS) == set(config.CLUSTER_KEYS)
    assert {"clusters", "backend", "charts", "images", "fleet"} == set(
        config.TOP_KEYS
    )  # fleet: tests/test_fleet*.py


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
@given(
    fc.valid_documents(),
    st.lists(
        st.one_of(st.sampled_from(fc.DEEP_SETS + fc.SAFE_SETS), fc.hostile_strings),
        min_size=1,
        max_size=3,
    ),
)
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


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _strings(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


@FUZZ_VALID
@seed(SEED + 4)
@given(st.data())
def test_control_characters_in_any_string_are_refused_or_never_reach_the_plan(data):
    """Any string of a valid document (value or key) given a trailing newline -- written as a YAML
    block scalar, as ``name: |`` is -- or another control character: one error line, or a plan
    whose every string is free of control characters (whole-string validation)."""
    doc = data.draw(fc.control_character_mutations(data.draw(fc.valid_documents())))
    text = fc.dump_block(doc)
    code, out, err = run_plan(text, extra=("--format", "json"))
    check_contract(code, out, err, text, plan_text=False)
    if code == 0:
        leaked = [s for s in _strings(json.loads(out)) if CONTROL.search(s)]
        assert not leaked, f"{leaked[:3]!r} reached the plan\n--- input ---\n{text[:2000]}"


@FUZZ_VALID
@seed(SEED + 5)
@given(fc.valid_documents(), fc.out_of_range_integers, st.booleans())
def test_an_integer_outside_64_bits_in_any_base_is_one_error_naming_its_key(doc, literal, in_pool):
    """An integer literal outside int64 (decimal past Python's 4,300-digit limit, hex, YAML 1.1
    octal, binary, with underscores) placed in a values entry or a pool's nodeCount: exit 2 with one
    error naming the key, never a traceback nor a plugin's hook failing."""
    doc = copy.deepcopy(doc)
    cluster = doc["clusters"][0]
    pools = cluster.get("pools") or []
    if in_pool and pools:
        pools[-1]["nodeCount"] = fc.INT_PLACEHOLDER
        key = f"clusters[0].pools[{len(pools) - 1}].nodeCount"
    else:
        entries = cluster.setdefault("overrides", {}).setdefault("values", [])
        entries.append(
            {"component": "gpu-operator", "values": {"gpuclusterFuzz": fc.INT_PLACEHOLDER}}
        )
        key = f"clusters[0].overrides.values[{len(entries) - 1}].values.gpuclusterFuzz"
    text = fc.dump(doc).replace(fc.INT_PLACEHOLDER, literal)
    code, out, err = run_plan(text)
    check_contract(code, out, err, text[:3000])
    assert code == 2, err
    assert any(
        f"key={key}: integer " in line and "outside the 64-bit range" in line
        for line in err.splitlines()
    ), err[:3000]


@settings(FUZZ, max_examples=max(EXAMPLES // 4, 10))
@seed(SEED + 6)
@given(
    st.binary(max_size=64),
    st.sampled_from([b"[", b"{", b"u", b"l", b"t", b"", b"i", b"g"]),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
)
def test_any_cache_entry_is_plain_data_or_a_miss_within_bounded_memory(tail, code, declared):
    """Whatever bytes an entry holds under a valid header and checksum (a declared length of up to
    2**31 included), reading it gives plain data or a miss: no exception, and no allocation beyond
    a small multiple of its size (was: 16 GiB for a 5-byte list header)."""
    import tracemalloc

    from gpucluster import diskcache

    payload = code + declared.to_bytes(4, "little", signed=True) + tail if code else tail
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o700)
        env = {diskcache.CACHE_DIR_ENV: folder}
        os.mkdir(os.path.join(folder, "k"), 0o700)
        with open(os.path.join(folder, "k", "e"), "wb") as f:
            f.write(
                b"gpucluster-cache 1\ne\n"
                + __import__("hashlib").sha256(payload).hexdigest().encode()
                + b"\n"
                + payload
            )
        tracemalloc.start()
        try:
            value = diskcache.get_plain("k", "e", env=env)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert value is diskcache.MISS or diskcache.is_plain(value)
    assert peak < 8 << 20, (
        f"{peak} bytes for a {len(payload)}-byte entry"
    )  # the 1 MiB read buffer, not GiBs


@pytest.fixture(scope="module")
def git_project(tmp_path_factory):
    """A git repository holding a cluster file, and a victim file beside it."""
    import subprocess

    root = tmp_path_factory.mktemp("revisions")
    repo = root / "repo"
    repo.mkdir()
    (repo / "gpucluster.yaml").write_text(
        fc.dump({"clusters": [{"name": "lab", "criteria": dict(fc.AKS_CRITERIA[0])}]})
    )
    for args in (
        ["init", "-q"],
        ["add", "gpucluster.yaml"],
        ["-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "one"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    (root / "victim.txt").write_text("important\n")
    return root


@settings(FUZZ, max_examples=max(EXAMPLES // 8, 10))
@seed(SEED + 7)
@given(fc.option_like_arguments, st.sampled_from(["--from", "--to"]))
def test_an_option_like_revision_is_one_error_line_and_touches_nothing(git_project, revision, flag):
    """``--from=<REV>:gpucluster.yaml`` (or ``--to``) with REV looking like an option of git: one
    error line, exit 2, and no file written or changed (was: --output=FILE truncated FILE)."""
    victim = git_project / "victim.txt"
    revision = revision.replace("VICTIM", str(victim))
    before = sorted(p.name for p in git_project.rglob("*") if ".git" not in p.parts)
    other = "--to" if flag == "--from" else "--from"
    cwd = os.getcwd()
    os.chdir(git_project / "repo")
    try:
        out, err = io.StringIO(), io.StringIO()
        code = cli_main(
            ["upgrade-check", f"{flag}={revision}:gpucluster.yaml", other, "gpucluster.yaml"],
            stdout=out,
            stderr=err,
        )
    finally:
        os.chdir(cwd)
    lines = err.getvalue().splitlines()
    assert code == 2 and out.getvalue() == "", err.getvalue()
    assert len(lines) == 1 and LINE.match(lines[0]) and not UNSAFE.search(lines[0]), lines
    assert victim.read_text() == "important\n"
    assert sorted(p.name for p in git_project.rglob("*") if ".git" not in p.parts) == before


@settings(FUZZ, max_examples=max(EXAMPLES // 4, 10))
@seed(SEED + 8)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "notes.txt",
                "gpucluster.yaml",
                "values",
                ".env",
                "README.md",
                "main.tf",
                "manifest.json",
                "stacks",
                "x.yaml",
                ".gpucluster-outputs",
            ]
        ),
        st.sampled_from(["file", "folder"]),
        min_size=1,
        max_size=5,
    )
)
def test_a_folder_with_a_user_file_and_no_marker_is_never_replaced(layout):
    """Any folder holding at least one entry that is not an earlier output's (``stacks/`` and at most
    ``manifest.json``) and no ``.gpucluster-output`` marker is refused with one error[outdir] line,
    and every file in it stays."""
    from gpucluster.errors import GpuclusterError
    from gpucluster_cdk.stacks.outdir import staged_outdir

    legacy = (
        set(layout) <= {"manifest.json", "stacks"}
        and layout.get("stacks") == "folder"
        and layout.get("manifest.json", "file") == "file"
    )
    with tempfile.TemporaryDirectory() as top:
        out = Path(top) / "out"
        out.mkdir()
        for name, kind in layout.items():
            (out / name).mkdir() if kind == "folder" else (out / name).write_text(name)
        before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
        try:
            with staged_outdir(out) as staged:
                (staged / "manifest.json").write_text("{}")
            replaced = True
        except GpuclusterError as exc:
            replaced = False
            assert (
                exc.render().startswith("error[outdir] key=CDKTF_OUTDIR: ")
                and "\n" not in exc.render()
            )
        assert replaced == legacy, layout
        if not replaced:
            assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before
        assert sorted(p.name for p in Path(top).iterdir()) == ["out"]


def test_zz_report_figures(capsys):
    """Print how many cases ran (``make fuzz`` quotes it)."""
    with capsys.disabled():
        print(
            f"\nfuzz cases in-process: {STATS['cases']} (exit 0: {STATS['exit0']}, exit 2: {STATS['exit2']}, "
            f"profile {'long' if LONG else 'fast'}, {EXAMPLES} examples per strategy, seed {SEED})"
        )
