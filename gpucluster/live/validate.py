"""``gpucluster validate``: is this cluster, right now, what its plan says?

Runs the checks :func:`gpucluster.live.checks.derive_checks` derives from the cluster's plan on a
snapshot (a file, or one read from the live cluster, :mod:`gpucluster.live.snapshot`) and
reports them three ways:

* a table (``--format text``, default): check, component, result, the object and field that
  decided, the reason;
* JSON evidence (``--format json``): the cluster's identity, the plan fingerprint
  (:func:`gpucluster.inputs.fleet.rollout_digest`, what the runtime stack installs), the gpucluster
  version, the time, and every check's inputs, observations and verdict; schema
  ``schemas/validate-report.schema.json`` (shipped in the package);
* JUnit XML (``--junit FILE``, for CI), valid against the Surefire/Jenkins JUnit schema
  ``schemas/junit-10.xsd`` (Jenkins xunit-plugin, MIT; as PyPI pytest's sdist carries it).

Exit codes: 0 every check passed (``skip`` allowed, printed with its reason), 1 a check failed or
could not be decided (``unsupported``), 2 bad input. Strings read from the cluster are printed
through :func:`gpucluster.errors.one_line` (control and bidirectional characters escaped).

``--wait DURATION`` (live clusters only) re-reads the cluster every ``poll`` seconds until every
check passes or the duration is spent, then reports the last reading: a phase that just applied
can wait for the operators to converge.
"""

from __future__ import annotations

import json
import re
import time as _time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpucluster.errors import FIELD_LIMIT, GpuclusterError, one_line
from gpucluster.live.checks import Check, CheckResult, derive_checks, run_checks
from gpucluster.live.snapshot import Snapshot
from gpucluster.model import RuntimePlan

__all__ = [
    "Report",
    "validate",
    "validate_until",
    "render_text",
    "render_json",
    "render_junit",
    "render_ctrf",
    "attestation",
    "PREDICATE_TYPE",
    "parse_duration",
    "report_schema",
    "EXIT_PASSED",
    "EXIT_FAILED",
    "REPORT_KIND",
]

EXIT_PASSED = 0
EXIT_FAILED = 1
REPORT_KIND = "gpucluster.ValidationReport"
REPORT_VERSION = 1
MAX_WAIT_SECONDS = 6 * 3600
"""Longest ``--wait`` accepted (6 h: longer than every gate budget put together)."""

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(
    text: str,
    *,
    key: str = "--wait",
    fix: str = "give how long to wait for the checks to converge",
) -> int:
    """``"10m"``, ``"90s"``, ``"1h30m"`` or plain seconds (``"600"``) -> seconds.

    Raises:
        GpuclusterError: not a duration, zero, or above :data:`MAX_WAIT_SECONDS` (``key`` and
            ``fix`` name the option).
    """
    text = str(text).strip()
    seconds: int | None = None
    if text.isdigit():
        seconds = int(text)
    else:
        m = _DURATION.fullmatch(text)
        if m and any(m.groups()):
            h, mi, s = (int(g or 0) for g in m.groups())
            seconds = h * 3600 + mi * 60 + s
    if seconds is None or not 0 < seconds <= MAX_WAIT_SECONDS:
        raise GpuclusterError(
            f"'{text}' is not a duration between 1s and {MAX_WAIT_SECONDS // 3600}h",
            key=key,
            allowed="e.g. 90s, 10m, 1h30m, or seconds",
            fix=fix,
            id="validate.input",
        )
    return seconds


@dataclass(frozen=True)
class Report:
    """One validation: the plan, the snapshot, each check with its result, when."""

    plan: RuntimePlan
    snapshot: Snapshot
    results: tuple[tuple[Check, CheckResult], ...]
    time: str
    attempts: int = 1

    def counts(self) -> dict[str, int]:
        out = {"pass": 0, "fail": 0, "skip": 0, "unsupported": 0}
        for _, r in self.results:
            out[r.verdict] = out.get(r.verdict, 0) + 1
        return out

    @property
    def passed(self) -> bool:
        counts = self.counts()
        return counts["fail"] == 0 and counts["unsupported"] == 0

    @property
    def exit_code(self) -> int:
        return EXIT_PASSED if self.passed else EXIT_FAILED


def _now() -> str:
    """The validation's time (:func:`gpucluster.live.evidence.now`: ``SOURCE_DATE_EPOCH`` or the clock)."""
    from gpucluster.live import evidence

    return evidence.now()


def validate(plan: RuntimePlan, snap: Snapshot, *, now: str | None = None) -> Report:
    """Every check of ``plan`` on ``snap``."""
    return Report(
        plan=plan,
        snapshot=snap,
        results=tuple(run_checks(derive_checks(plan), snap)),
        time=now or _now(),
    )


def validate_until(
    plan: RuntimePlan,
    read: Callable[[], Snapshot],
    *,
    wait_seconds: int,
    poll_seconds: float = 10.0,
    clock: Callable[[], float] = _time.monotonic,
    sleep: Callable[[float], None] = _time.sleep,
) -> Report:
    """:func:`validate` on fresh readings (``read()``) until every check passes or ``wait_seconds``
    are spent (at most ``wait_seconds / poll_seconds + 1`` readings); the last report is returned."""
    deadline = clock() + wait_seconds
    attempts = 0
    while True:
        attempts += 1
        report = validate(plan, read())
        if report.passed or clock() + poll_seconds > deadline:
            return Report(
                plan=report.plan,
                snapshot=report.snapshot,
                results=report.results,
                time=report.time,
                attempts=attempts,
            )
        sleep(poll_seconds)


# --------------------------------------------------------------------------- text


def _cell(text: Any, limit: int = FIELD_LIMIT) -> str:
    return one_line(text if text not in (None, "") else "-", limit)


TEXT_WIDTH = 120
"""Widest line of the text report (characters); longer reasons, objects and fields wrap."""


def render_text(report: Report) -> str:
    """The table and a summary line, at most :data:`TEXT_WIDTH` characters wide (a cut-short
    cell of a hostile object excepted: those are one word): per check one row ``RESULT  CHECK
    COMPONENT  REASON`` (the reason wrapped under itself), then, when the check names them, an
    ``object`` and a ``field`` line under it."""
    import textwrap

    plan = report.plan
    rows = [("RESULT", "CHECK", "COMPONENT", "REASON", "", "")]
    for check, result in report.results:
        rows.append(
            (
                result.verdict.upper(),
                _cell(check.name),
                _cell(check.component),
                _cell(result.reason),
                _cell(result.object) if result.object else "",
                _cell(result.field, 80) if result.field else "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    indent = " " * (2 + sum(w + 2 for w in widths))
    detail = " " * (2 + widths[0] + 2)
    lines = [
        f"cluster {one_line(plan.cluster.name, FIELD_LIMIT)}: {len(report.results)} checks against "
        f"{_cell(report.snapshot.source)} ({report.time})"
    ]
    for row in rows:
        head = "  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row[:3])) + "  "
        wrapped = textwrap.wrap(
            row[3], TEXT_WIDTH - len(indent), break_long_words=False, break_on_hyphens=False
        ) or [""]
        lines.append((head + wrapped[0]).rstrip())
        lines += [indent + more for more in wrapped[1:]]
        where = [
            f"{label} {value}" for label, value in (("object", row[4]), ("field", row[5])) if value
        ]
        if len(detail) + len("  ".join(where)) <= TEXT_WIDTH:
            where = ["  ".join(where)] if where else []
        lines += [detail + text for text in where]
    c = report.counts()
    verdict = "PASSED" if report.passed else "FAILED"
    waited = f" after {report.attempts} readings" if report.attempts > 1 else ""
    lines.append(
        f"{verdict}{waited}: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped, {c['unsupported']} unsupported"
    )
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- JSON


def _version() -> str:
    from gpucluster import __version__

    return __version__


def report_document(report: Report) -> dict[str, Any]:
    """The JSON evidence (module docstring); valid against :func:`report_schema`."""
    from gpucluster.inputs.fleet import rollout_digest

    plan = report.plan
    c = report.counts()
    return {
        "kind": REPORT_KIND,
        "version": REPORT_VERSION,
        "gpucluster": {"version": _version()},
        "time": report.time,
        "attempts": report.attempts,
        "cluster": {
            "name": plan.cluster.name,
            "service": plan.cluster.criteria.service,
            "identity": report.snapshot.identity(),
        },
        "plan": {
            "fingerprint": rollout_digest(plan),
            "source": plan.cluster.source,
            "appliedOverlays": list(plan.recipe.applied_overlays),
            "profile": dict([plan.recipe.profile]) if plan.recipe.profile else {},
            "components": sorted(plan.components),
        },
        "result": "pass" if report.passed else "fail",
        "summary": {
            "checks": len(report.results),
            **{k: c[k] for k in ("pass", "fail", "skip", "unsupported")},
        },
        "checks": [
            {
                "id": check.id,
                "check": check.name,
                "component": check.component,
                "proves": check.proves,
                "inputs": json.loads(json.dumps(check.inputs, default=str)),
                "verdict": result.verdict,
                "reason": result.reason,
                "object": result.object,
                "field": result.field,
                "observed": json.loads(json.dumps(result.observed, default=str)),
                "operations": [dict(o) for o in result.operations],
            }
            for check, result in report.results
        ],
    }


def render_json(report: Report) -> str:
    return json.dumps(report_document(report), indent=2, sort_keys=True) + "\n"


def report_schema() -> dict[str, Any]:
    """``schemas/validate-report.schema.json`` (JSON Schema 2020-12) of :func:`report_document`."""
    return json.loads(
        resources.files("gpucluster.live")
        .joinpath("schemas", "validate-report.schema.json")
        .read_text(encoding="utf-8")
    )


def junit_schema_text() -> str:
    """``schemas/junit-10.xsd``: the JUnit XML schema :func:`render_junit` output is valid against."""
    return (
        resources.files("gpucluster.live")
        .joinpath("schemas", "junit-10.xsd")
        .read_text(encoding="utf-8")
    )


# --------------------------------------------------------------------------- JUnit


def render_junit(report: Report) -> str:
    """JUnit XML: one ``testsuite`` per cluster, one ``testcase`` per check (``classname``
    ``gpucluster.validate.<check>``, ``name`` the check id); a failed or unsupported check has a
    ``failure`` (message: the reason; text: object, field, what it proves), a skipped one a
    ``skipped``. Every string passes :func:`gpucluster.errors.one_line`."""
    import xml.etree.ElementTree as ET

    c = report.counts()
    failures = c["fail"] + c["unsupported"]
    suites = ET.Element(
        "testsuites",
        {
            "name": "gpucluster validate",
            "tests": str(len(report.results)),
            "failures": str(failures),
            "errors": "0",
            "time": "0",
        },
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": one_line(report.plan.cluster.name, FIELD_LIMIT),
            "tests": str(len(report.results)),
            "failures": str(failures),
            "errors": "0",
            "skipped": str(c["skip"]),
            "time": "0",
            "timestamp": report.time,
        },
    )
    props = ET.SubElement(suite, "properties")
    from gpucluster.inputs.fleet import rollout_digest

    for name, value in (
        ("plan.fingerprint", rollout_digest(report.plan)),
        ("gpucluster.version", _version()),
        ("snapshot.source", report.snapshot.source),
        ("snapshot.sha256", report.snapshot.digest),
    ):
        ET.SubElement(props, "property", {"name": name, "value": one_line(value, FIELD_LIMIT)})
    for check, result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"gpucluster.validate.{check.name}",
                "name": one_line(check.id, FIELD_LIMIT),
                "time": "0",
            },
        )
        detail = one_line(
            f"component {check.component}; object {result.object or '-'}; field {result.field or '-'}; "
            f"proves: {check.proves}"
        )
        if result.verdict in ("fail", "unsupported"):
            failure = ET.SubElement(
                case, "failure", {"type": result.verdict, "message": one_line(result.reason)}
            )
            failure.text = detail
        elif result.verdict == "skip":
            ET.SubElement(case, "skipped", {"message": one_line(result.reason)})
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


# --------------------------------------------------------------------------- CTRF, in-toto

CTRF_PHASE = "deployment"
"""The CTRF ``suite`` of every validate check: AICR's phase for checks that the deployed
components are installed, healthy and configured as the recipe says (its validators catalog,
``recipes/validators/catalog.yaml``, phase ``deployment``)."""

PREDICATE_TYPE = "urn:gpucluster:ValidationReport:v1"
"""``predicateType`` of a validate attestation: the predicate is the ``--format json`` document
(``kind`` ``gpucluster.ValidationReport``, schema ``schemas/validate-report.schema.json``)."""


def render_ctrf(report: Report) -> str:
    """The CTRF report (:func:`gpucluster.live.evidence.ctrf_document`): one test per check
    (name: the check id; ``extra``: check, component, object, field), suite :data:`CTRF_PHASE`;
    ``environment`` the cluster; ``extra`` the plan fingerprint and the snapshot's digest."""
    from gpucluster.inputs.fleet import rollout_digest
    from gpucluster.live import evidence

    tests = [
        evidence.CtrfTest(
            name=check.id,
            verdict=result.verdict,
            phase=CTRF_PHASE,
            message=one_line(result.reason),
            extra={
                "check": check.name,
                "component": check.component,
                "object": one_line(result.object, FIELD_LIMIT),
                "field": one_line(result.field, FIELD_LIMIT),
            },
        )
        for check, result in report.results
    ]
    doc = evidence.ctrf_document(
        tests,
        tool_version=_version(),
        time=report.time,
        environment={
            "appName": "gpucluster",
            "appVersion": _version(),
            "testEnvironment": report.plan.cluster.name,
        },
        extra={
            "gpucluster": {
                "planFingerprint": rollout_digest(report.plan),
                "snapshotSha256": report.snapshot.digest,
                "snapshotSource": report.snapshot.source,
            }
        },
    )
    return evidence.render(doc)


def attestation(report: Report, *, snapshot_file: str | None = None) -> str:
    """An unsigned in-toto Statement v1 (:func:`gpucluster.live.evidence.statement`) whose
    predicate is :func:`report_document` (type :data:`PREDICATE_TYPE`).

    Subjects, in this order: the snapshot -- ``snapshot_file`` by its name and the sha256 of its
    bytes, or for a live reading ``snapshot:<source>`` with the digest of what was read
    (:attr:`Snapshot.digest`); the cluster file by its name and bytes (unless the plan came from the
    embedded default); the plan, ``plan:<cluster>`` with its fingerprint
    (:func:`gpucluster.inputs.fleet.rollout_digest`, covering every release and its values).

    Raises:
        GpuclusterError: a subject file cannot be read (``error[validate.input]``).
    """
    from pathlib import Path

    from gpucluster.inputs.fleet import rollout_digest
    from gpucluster.live import evidence

    snap = report.snapshot
    subjects = [
        evidence.judged_subject(snapshot_file, snap.file_sha256, key="--snapshot")
        if snapshot_file is not None
        else evidence.Subject(f"snapshot:{snap.source}", snap.digest)
    ]
    source = report.plan.cluster.source
    if source and Path(source).is_file():
        subjects.append(evidence.file_subject(source, key="--config"))
    subjects.append(
        evidence.Subject(f"plan:{report.plan.cluster.name}", rollout_digest(report.plan))
    )
    return evidence.render(
        evidence.statement(
            subjects, predicate_type=PREDICATE_TYPE, predicate=report_document(report)
        )
    )


def select_plan(plans: Sequence[RuntimePlan], names: Sequence[str]) -> RuntimePlan:
    """The one plan ``--cluster`` names (or the only plan).

    Raises:
        GpuclusterError: several clusters and no ``--cluster``, or an unknown name.
    """
    known = [p.cluster.name for p in plans]
    if not names:
        if len(plans) == 1:
            return plans[0]
        raise GpuclusterError(
            "the cluster file has several clusters; name the one to validate",
            key="--cluster",
            allowed=", ".join(known),
            fix="add --cluster NAME",
            id="validate.input",
        )
    if len(names) > 1:
        raise GpuclusterError(
            "validate checks one cluster at a time",
            key="--cluster",
            allowed=", ".join(known),
            fix="give --cluster once (run validate per cluster)",
            id="validate.input",
        )
    for p in plans:
        if p.cluster.name == names[0]:
            return p
    raise GpuclusterError(
        f"no cluster named '{names[0]}' in the cluster file",
        key="--cluster",
        allowed=", ".join(known),
        fix="name one of the file's clusters",
        id="validate.input",
    )
