"""Evidence in the formats other tools consume: CTRF reports and in-toto attestations.

* :func:`ctrf_document` -- a Common Test Report Format document (CTRF, https://ctrf.io/), the
  JSON ``aicr validate`` writes per phase (NVIDIA/aicr ``pkg/validator/ctrf``: ``reportFormat``
  ``CTRF``, ``specVersion`` ``0.0.1``, one test per check with ``suite: [<phase>]``, statuses
  ``passed | failed | skipped | other``). Valid against the CTRF JSON schema shipped in the package,
  ``schemas/ctrf.schema.json`` (ctrf-io/ctrf ``schema/ctrf.schema.json`` at commit
  ``84ddec55811b6a9bf9db3bf9638c9568cde88bb5``, MIT; see NOTICE).
* :func:`statement` -- an in-toto Statement v1 (https://github.com/in-toto/attestation,
  ``spec/v1/statement.md``), unsigned: ``subject`` the artifacts the result is about, each with its
  sha256; ``predicateType`` a URI naming the predicate's schema; ``predicate`` the result. A user
  signs it with ``cosign attest-blob`` (docs/validate.md).

Both are deterministic for the same inputs: the only time they carry is the result's own (the
``time`` of the validation, which ``SOURCE_DATE_EPOCH`` fixes; see
:func:`gpucluster.live.validate.validate`); keys are sorted, nothing else varies.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpucluster.errors import GpuclusterError

__all__ = [
    "CTRF_SPEC_VERSION",
    "STATEMENT_TYPE",
    "CtrfTest",
    "Subject",
    "ctrf_document",
    "ctrf_schema",
    "ctrf_status",
    "file_subject",
    "judged_subject",
    "now",
    "statement",
    "render",
]

CTRF_SPEC_VERSION = "0.0.1"
"""The ``specVersion`` ``aicr validate`` writes (NVIDIA/aicr ``pkg/validator/ctrf/types.go``
``SpecVersion``), so reports of both tools merge."""

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
"""``_type`` of an in-toto Statement v1 (in-toto/attestation ``spec/v1/statement.md``)."""

_CTRF_STATUS = {"pass": "passed", "fail": "failed", "skip": "skipped", "unsupported": "other"}
"""gpucluster verdicts -> CTRF statuses. ``unsupported`` (could not be decided) is ``other``, as
AICR reports a check that reached no verdict; both ``failed`` and ``other`` block (AICR
``ctrf.IsFailingStatus``)."""

MAX_SUBJECT_BYTES = 128 * 1024 * 1024
"""Largest file hashed as a subject (the snapshot file cap of :mod:`gpucluster.live.snapshot`)."""


def now(env: Mapping[str, str] = os.environ) -> str:
    """The time evidence carries, RFC 3339 UTC to the second: ``SOURCE_DATE_EPOCH`` (seconds since
    the Unix epoch, the reproducible-builds.org convention) when set, so the same inputs give
    byte-identical evidence; else the clock.

    Raises:
        GpuclusterError: ``SOURCE_DATE_EPOCH`` is not a non-negative integer.
    """
    fixed = env.get("SOURCE_DATE_EPOCH")
    if fixed is None:
        when = _dt.datetime.now(_dt.UTC)
    else:
        if not re.fullmatch(r"[0-9]{1,12}", fixed.strip()):
            raise GpuclusterError(
                f"SOURCE_DATE_EPOCH is '{fixed[:40]}', not a number of seconds",
                key="SOURCE_DATE_EPOCH",
                allowed="a non-negative integer (seconds since 1970-01-01T00:00:00Z)",
                fix="set it to e.g. $(git log -1 --format=%ct), or unset it",
                id="validate.input",
            )
        when = _dt.datetime.fromtimestamp(int(fixed), _dt.UTC)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def ctrf_status(verdict: str) -> str:
    """The CTRF status of a gpucluster verdict (``pass``/``fail``/``skip``/``unsupported``).

    Raises:
        KeyError: an unknown verdict (a programming error, not user input).
    """
    return _CTRF_STATUS[verdict]


@dataclass(frozen=True)
class CtrfTest:
    """One CTRF test: ``name`` (unique within the report), ``verdict`` (a gpucluster verdict),
    ``phase`` (the CTRF ``suite``), ``message`` (one line, may be empty) and ``extra`` (string
    values only, as AICR's ``extra``: the component, the object and field that decided)."""

    name: str
    verdict: str
    phase: str
    message: str = ""
    extra: Mapping[str, str] | None = None


def _epoch_ms(time: str) -> int:
    """Milliseconds since the Unix epoch of an RFC 3339 UTC time (``2026-12-04T12:00:00Z``)."""
    when = _dt.datetime.fromisoformat(time.replace("Z", "+00:00"))
    return int(when.timestamp() * 1000)


def ctrf_document(
    tests: Sequence[CtrfTest],
    *,
    tool_version: str,
    time: str,
    environment: Mapping[str, str],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A CTRF document of ``tests`` (module docstring).

    Args:
        tests: in report order.
        tool_version: gpucluster's version (``results.tool.version``).
        time: the result's time, RFC 3339 UTC; ``timestamp``, and ``summary.start`` = ``stop``
            (milliseconds): gpucluster's checks read one snapshot, they take no measurable time
            of their own, so every ``duration`` is 0.
        environment: ``results.environment`` (``appName``, ``appVersion``, ``testEnvironment``...,
            keys of the CTRF schema's environment object).
        extra: the report's ``extra`` (plan fingerprint, snapshot digest...), or none.
    """
    at = _epoch_ms(time)
    counts = dict.fromkeys(("passed", "failed", "skipped", "pending", "other"), 0)
    out_tests = []
    for t in tests:
        status = ctrf_status(t.verdict)
        counts[status] += 1
        entry: dict[str, Any] = {
            "name": t.name,
            "status": status,
            "duration": 0,
            "suite": [t.phase],
        }
        if t.message:
            entry["message"] = t.message
        if t.extra:
            entry["extra"] = {k: str(v) for k, v in t.extra.items() if v}
        out_tests.append(entry)
    doc: dict[str, Any] = {
        "reportFormat": "CTRF",
        "specVersion": CTRF_SPEC_VERSION,
        "timestamp": time,
        "generatedBy": "gpucluster",
        "results": {
            "tool": {"name": "gpucluster", "version": tool_version},
            "summary": {"tests": len(out_tests), **counts, "start": at, "stop": at},
            "tests": out_tests,
            "environment": dict(environment),
        },
    }
    if extra:
        doc["extra"] = dict(extra)
    return doc


def ctrf_schema() -> dict[str, Any]:
    """``schemas/ctrf.schema.json``: the CTRF JSON schema (draft-07) :func:`ctrf_document` output
    is valid against (vendored from ctrf-io/ctrf, module docstring)."""
    return json.loads(
        resources.files("gpucluster.live")
        .joinpath("schemas", "ctrf.schema.json")
        .read_text(encoding="utf-8")
    )


@dataclass(frozen=True)
class Subject:
    """An in-toto ResourceDescriptor of a Statement's ``subject``: ``name`` and a sha256 (hex)."""

    name: str
    sha256: str


def judged_subject(path: str, sha256: str, *, key: str) -> Subject:
    """The subject of a snapshot file that was judged: its name as given and ``sha256``, the
    digest of the bytes read and judged (:attr:`gpucluster.live.snapshot.Snapshot.file_sha256`),
    so a file changed afterwards is not what the attestation vouches for; without it (a snapshot
    made in code) the file's bytes now (:func:`file_subject`)."""
    return Subject(path, sha256) if sha256 else file_subject(path, key=key)


def file_subject(path: str, *, key: str) -> Subject:
    """A subject for the file at ``path``: its name as given and the sha256 of its bytes (what
    ``sha256sum`` prints), read in chunks, at most :data:`MAX_SUBJECT_BYTES`.

    Raises:
        GpuclusterError: the file cannot be read or is larger than the cap (``error[validate.input]``
            naming ``key``).
    """
    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                size += len(chunk)
                if size > MAX_SUBJECT_BYTES:
                    raise GpuclusterError(
                        f"'{path}' is larger than {MAX_SUBJECT_BYTES} bytes",
                        file=path,
                        key=key,
                        fix="name the file the result is about",
                        id="validate.input",
                    )
                digest.update(chunk)
    except OSError as exc:
        raise GpuclusterError(
            f"cannot read '{path}': {exc.strerror or exc}",
            file=path,
            key=key,
            fix="name a readable file",
            id="validate.input",
        ) from None
    return Subject(name=path, sha256=digest.hexdigest())


def statement(
    subjects: Iterable[Subject], *, predicate_type: str, predicate: Mapping[str, Any]
) -> dict[str, Any]:
    """An in-toto Statement v1 (unsigned) about ``subjects`` (in the order given; a repeated
    name is kept once) carrying ``predicate`` of type ``predicate_type`` (a URI)."""
    seen: set[str] = set()
    subject = []
    for s in subjects:
        if s.name in seen:
            continue
        seen.add(s.name)
        subject.append({"name": s.name, "digest": {"sha256": s.sha256}})
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject,
        "predicateType": predicate_type,
        "predicate": dict(predicate),
    }


def render(document: Mapping[str, Any]) -> str:
    """Deterministic JSON text of a CTRF document or a Statement (2-space indent, sorted keys),
    ASCII only: every other character, a lone surrogate included, is a ``\\uXXXX`` escape, so
    names from the cluster (bidirectional and C1 controls) reach no terminal raw and the text
    always encodes."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
