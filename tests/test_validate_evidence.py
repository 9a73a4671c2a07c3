"""``gpucluster validate --format ctrf`` and ``--attestation FILE``: the CTRF report is valid
against the CTRF schema shipped in the package (ctrf-io/ctrf), its statuses and counts are the
checks' verdicts; the attestation is an in-toto Statement v1 that PyPI in-toto-attestation (the
project's own bindings) parses strictly and validates, with the sha256 of the snapshot file, the
cluster file and the plan fingerprint as subjects; both are byte-identical for the same inputs
under ``SOURCE_DATE_EPOCH``; bad paths and values give one line, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import io
import json

import jsonschema
import pytest
from google.protobuf import json_format
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from validate_support import HEALTHY_DEFAULT, find, items_of, write_snapshot

from gpucluster.cli import main
from gpucluster.live import evidence
from gpucluster.live import validate as validate_mod

EPOCH = "1796385600"  # 2026-12-04T12:00:00Z
GPU_NODE = "aks-gpu-12345678-vmss000000"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", *args], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _json(*args: str) -> dict:
    code, out, err = run(*args, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def test_ctrf_of_the_healthy_default_is_valid_and_counts_every_check(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    code, out, err = run("--snapshot", str(HEALTHY_DEFAULT), "--format", "ctrf")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    jsonschema.validate(doc, evidence.ctrf_schema(), format_checker=jsonschema.FormatChecker())
    evidence_doc = _json("--snapshot", str(HEALTHY_DEFAULT))
    tests = doc["results"]["tests"]
    assert [t["name"] for t in tests] == [c["id"] for c in evidence_doc["checks"]]
    summary = doc["results"]["summary"]
    assert summary["tests"] == len(tests) == evidence_doc["summary"]["checks"]
    assert (summary["passed"], summary["skipped"], summary["failed"], summary["other"]) == (
        evidence_doc["summary"]["pass"],
        evidence_doc["summary"]["skip"],
        0,
        0,
    )
    assert doc["timestamp"] == "2026-12-04T12:00:00Z" and summary["start"] == 1796385600000
    assert doc["reportFormat"] == "CTRF" and doc["results"]["tool"]["name"] == "gpucluster"
    assert {t["suite"][0] for t in tests} == {"deployment"}
    skipped = [t for t in tests if t["status"] == "skipped"]
    assert [t["name"] for t in skipped] == ["aicr-health/nodewright-operator"]
    assert "skyhook" in skipped[0]["message"]
    assert doc["extra"]["gpucluster"]["planFingerprint"] == evidence_doc["plan"]["fingerprint"]


def test_ctrf_of_a_failing_cluster_says_failed_and_other(tmp_path, monkeypatch):
    items = items_of(HEALTHY_DEFAULT.read_text(encoding="utf-8"))
    for policy in find(items, "ClusterPolicy"):
        policy["status"]["state"] = "notReady"
    path = write_snapshot(tmp_path / "s.json", items)
    code, out, err = run("--snapshot", str(path), "--format", "ctrf")
    assert (code, err) == (1, "")
    doc = json.loads(out)
    jsonschema.validate(doc, evidence.ctrf_schema())
    failed = [t for t in doc["results"]["tests"] if t["status"] == "failed"]
    assert failed and doc["results"]["summary"]["failed"] == len(failed)
    assert any(t["extra"]["component"] == "gpu-operator" for t in failed)


@pytest.mark.parametrize(
    ("verdict", "status"),
    [("pass", "passed"), ("fail", "failed"), ("skip", "skipped"), ("unsupported", "other")],
)
def test_every_verdict_has_its_ctrf_status(verdict, status):
    doc = evidence.ctrf_document(
        [evidence.CtrfTest(name="c", verdict=verdict, phase="deployment", message="m")],
        tool_version="0",
        time="2026-12-04T12:00:00Z",
        environment={"appName": "gpucluster"},
    )
    jsonschema.validate(doc, evidence.ctrf_schema())
    assert doc["results"]["tests"][0]["status"] == status
    assert doc["results"]["summary"][status] == 1 and doc["results"]["summary"]["tests"] == 1


def _statement(text: str) -> Statement:
    pb = json_format.Parse(text, statement_pb2.Statement())  # unknown fields are refused
    stmt = Statement.copy_from_pb(pb)
    stmt.validate()
    return stmt


def test_attestation_is_an_in_toto_statement_with_the_right_digests(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    snapshot = tmp_path / "cluster.json"
    snapshot.write_bytes(HEALTHY_DEFAULT.read_bytes())
    att = tmp_path / "validate.intoto.json"
    code, out, err = run("--snapshot", str(snapshot), "--attestation", str(att))
    assert (code, err) == (0, "") and "PASSED" in out
    text = att.read_text(encoding="utf-8")
    stmt = _statement(text)
    doc = json.loads(text)
    assert doc["_type"] == "https://in-toto.io/Statement/v1" == stmt.pb.type
    assert doc["predicateType"] == validate_mod.PREDICATE_TYPE
    evidence_doc = _json("--snapshot", str(snapshot))
    assert doc["predicate"] == evidence_doc
    jsonschema.validate(doc["predicate"], validate_mod.report_schema())
    subjects = {s["name"]: s["digest"]["sha256"] for s in doc["subject"]}
    assert subjects[str(snapshot)] == hashlib.sha256(snapshot.read_bytes()).hexdigest()
    assert subjects["plan:gpu-training"] == evidence_doc["plan"]["fingerprint"]
    assert len(subjects) == 2  # the embedded default cluster file is no file


def test_attestation_names_the_cluster_file(tmp_path, monkeypatch):
    from validate_support import ROOT

    config = tmp_path / "gpucluster.yaml"
    config.write_bytes((ROOT / "gpucluster" / "default_cluster.yaml").read_bytes())
    att = tmp_path / "a.json"
    code, _, err = run(
        "--config", str(config), "--snapshot", str(HEALTHY_DEFAULT), "--attestation", str(att)
    )
    assert (code, err) == (0, "")
    subjects = {s["name"]: s["digest"]["sha256"] for s in json.loads(att.read_text())["subject"]}
    assert subjects[str(config)] == hashlib.sha256(config.read_bytes()).hexdigest()


def test_ctrf_and_attestation_are_byte_identical_for_the_same_inputs(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    outputs = []
    for n in range(2):
        att = tmp_path / f"a{n}.json"
        code, out, err = run(
            "--snapshot", str(HEALTHY_DEFAULT), "--format", "ctrf", "--attestation", str(att)
        )
        assert (code, err) == (0, "")
        outputs.append((out, att.read_bytes()))
    assert outputs[0] == outputs[1]


def test_bad_attestation_path_and_epoch_are_one_line_and_write_nothing(tmp_path, monkeypatch):
    code, out, err = run(
        "--snapshot",
        str(HEALTHY_DEFAULT),
        "--attestation",
        str(tmp_path / "missing" / "a.json"),
    )
    assert (code, out) == (2, "") and err.startswith("error[validate.input]")
    assert len(err.splitlines()) == 1 and "key=--attestation" in err
    code, out, err = run("--snapshot", str(HEALTHY_DEFAULT), "--attestation", str(tmp_path))
    assert code == 2 and len(err.splitlines()) == 1 and "not a regular file" in err
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    att = tmp_path / "a.json"
    code, out, err = run("--snapshot", str(HEALTHY_DEFAULT), "--attestation", str(att))
    assert code == 2 and len(err.splitlines()) == 1 and "key=SOURCE_DATE_EPOCH" in err
    assert not att.exists() and list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- upgrade-check


def _upgrade(tmp_path, *extra: str) -> tuple[int, str, str, list[str]]:
    from test_upgrade_live import cluster_file, faulted_items

    profile = {"gpuStack": "operator-managed"}
    old = cluster_file(tmp_path / "a.yaml", profile=profile)
    new = cluster_file(
        tmp_path / "b.yaml",
        profile=profile,
        overrides={"set": ["gpuoperator:driver.version=580.105.08"]},
    )
    snap = write_snapshot(tmp_path / "snap.json", faulted_items())
    args = ["upgrade-check", "--from", old, "--to", new, "--snapshot", str(snap), *extra]
    out, err = io.StringIO(), io.StringIO()
    code = main(args, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue(), args


def test_upgrade_check_ctrf_has_a_test_per_component_pool_and_node(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    code, out, err, args = _upgrade(tmp_path, "--format", "ctrf")
    assert (code, err) == (3, "")  # manual
    doc = json.loads(out)
    jsonschema.validate(doc, evidence.ctrf_schema(), format_checker=jsonschema.FormatChecker())
    live = json.loads(_upgrade(tmp_path, "--format", "json")[1])
    names = {t["name"]: t for t in doc["results"]["tests"]}
    expected = (
        [f"component/{c['component']}" for c in live["components"]]
        + [f"pool/{p['pool']}" for p in live["pools"]]
        + [f"node/{n['node']}" for n in live["nodes"]]
    )
    assert list(names) == expected
    status = {"safe": "passed", "manual": "failed", "unknown": "other"}
    for n in live["nodes"]:
        assert names[f"node/{n['node']}"]["status"] == status[n["verdict"]]
    assert {status[n["verdict"]] for n in live["nodes"]} >= {"passed", "failed"}
    assert doc["results"]["summary"]["failed"] == sum(
        1 for t in names.values() if t["status"] == "failed"
    )


def test_upgrade_check_attestation_binds_the_snapshot_and_both_plans(tmp_path, monkeypatch):
    att = tmp_path / "upgrade.intoto.json"
    code, _, err, args = _upgrade(tmp_path, "--attestation", str(att))
    assert (code, err) == (3, "")  # manual
    text = att.read_text(encoding="utf-8")
    _statement(text)
    doc = json.loads(text)
    live = json.loads(_upgrade(tmp_path, "--format", "json")[1])
    assert doc["predicate"] == live and doc["predicateType"] == "urn:gpucluster:UpgradeCheckLive:v1"
    subjects = [s["name"] for s in doc["subject"]]
    snap = tmp_path / "snap.json"
    assert subjects == [str(snap), "plan:from:lab", "plan:to:lab"]
    assert doc["subject"][0]["digest"]["sha256"] == hashlib.sha256(snap.read_bytes()).hexdigest()
    assert doc["subject"][1]["digest"] != doc["subject"][2]["digest"]  # the driver pin differs


def test_upgrade_check_evidence_needs_the_cluster_state(tmp_path):
    code, out, err, args = _upgrade(tmp_path)
    i = args.index("--snapshot")
    files_only = args[:i] + args[i + 2 :]
    for extra in (["--format", "ctrf"], ["--attestation", str(tmp_path / "x.json")]):
        o, e = io.StringIO(), io.StringIO()
        assert main([*files_only, *extra], stdout=o, stderr=e) == 2
        assert o.getvalue() == "" and len(e.getvalue().splitlines()) == 1
        assert e.getvalue().startswith("error[validate.input]") and "--snapshot" in e.getvalue()
    assert not (tmp_path / "x.json").exists()
