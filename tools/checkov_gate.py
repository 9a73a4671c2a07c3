#!/usr/bin/env python3
"""checkov on synthesized stacks, with per-resource justified skips.

Usage: ``tools/checkov_gate.py [--checkov PATH] STACK_DIR_OR_CDK_TF_JSON...``

Runs checkov once for all the files given (``checkov -f <a> -f <b> ... --framework
terraform_json``; checkov 3.3.30 in its own virtual environment, ``make checkov-setup``; it needs
``packaging<24``; its start-up costs several CPU seconds, so one run for all files) and prints,
per file in the order given, one line per check result and a summary line
``<file>: N passed, N failed, N skipped with a reason (checkov V)``. Each result is attributed
to its file by checkov's ``file_abs_path``. Exit 0 when every failed check is skipped by the
failing resource itself, 1 otherwise, 2 on a usage problem.

Skips: checkov 3.x reads inline ``checkov:skip`` comments in HCL, but not in ``terraform_json``
files (its terraform_json runner passes no suppressions to the resource checks; cdktf cannot
write HCL comments: bridgecrewio/checkov#4634, hashicorp/terraform-cdk#3609). So the constructs
write each skip into the resource's ``//`` metadata, the shape proposed there::

    "//": {"checkov": {"skip": [{"id": "CKV_AZURE_117", "comment": "<why>"}]}}

and this gate counts a failed check as skipped only when *that* resource lists *that* check id
with a non-empty reason. A listed skip whose check passes is an error too (stale skip), so skips
cannot outlive their reason. No blanket ``--skip-check``.

checkov's terraform_json parser fails on ``terraform.required_version`` (a string where it expects
blocks: "this method receives only dicts"), so the file checkov reads is a copy without that one
key; everything else is scanned as synthesized.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"


def _skips(doc: dict) -> dict[str, dict[str, str]]:
    """resource address (``type.name``) -> {check id: reason} from the ``//`` metadata."""
    out: dict[str, dict[str, str]] = {}
    for block in ("resource", "data"):
        for rtype, resources in (doc.get(block) or {}).items():
            for name, body in resources.items():
                entries = ((body.get("//") or {}).get("checkov") or {}).get("skip") or []
                prefix = "data." if block == "data" else ""
                out[f"{prefix}{rtype}.{name}"] = {
                    e["id"]: str(e.get("comment") or "").strip() for e in entries
                }
    return out


def _address(record: dict, doc: dict) -> str:
    """``type.name`` of a checkov record (``resource.<name>`` for resource checks, ``type.name`` for graph checks)."""
    resource = record["resource"]
    if resource.startswith("resource."):
        name = resource.split(".", 1)[1]
        for rtype, resources in (doc.get("resource") or {}).items():
            if name in resources:
                return f"{rtype}.{name}"
    return resource


def _report(stdout: str) -> dict | None:
    """checkov's JSON report of the ``terraform_json`` framework (a list when it ran several), or None."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        return None
    if isinstance(report, list):
        report = next(
            (r for r in report if isinstance(r, dict) and r.get("check_type") == "terraform_json"),
            report[0] if report else None,
        )
    return report if isinstance(report, dict) else None


def scan_all(paths: list[Path], checkov: Path) -> list[tuple[list[str], int]]:
    """One checkov run over every file of ``paths``; per file (in the order given) the lines
    describing its results and its number of problems (unjustified failures, stale skips, skips
    without a reason, parsing errors, nothing checked).

    checkov gets each file's scanned copy in a folder of its own (``<tmp>/<i>/cdk.tf.json``) and
    names the file of every result (``file_abs_path``), so a result, and the skip that may cover
    it, belong to exactly one file: a skip counts only for the resource and the file it is on,
    even where two files hold resources of the same address.
    """
    docs = [json.loads(path.read_text()) for path in paths]
    with tempfile.TemporaryDirectory(prefix="checkov-gate-") as tmp:
        targets = []
        for i, doc in enumerate(docs):
            scanned = json.loads(json.dumps(doc))
            (scanned.get("terraform") or {}).pop("required_version", None)
            target = Path(tmp) / str(i) / "cdk.tf.json"
            target.parent.mkdir()
            target.write_text(json.dumps(scanned, indent=2))
            targets.append(target)
        env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_NO_OUTPUT_COLORS="1")
        files = [arg for target in targets for arg in ("-f", str(target))]
        run = subprocess.run(
            [
                str(checkov),
                *files,
                "--framework",
                "terraform_json",
                "-o",
                "json",
                "--skip-download",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            cwd=tmp,
        )
        index = {str(target.resolve()): i for i, target in enumerate(targets)}

        def owner(reported: str) -> int | None:
            candidate = Path(reported)
            if not candidate.is_absolute():
                candidate = Path(tmp) / reported.lstrip("/")
            return index.get(str(candidate.resolve()))

        report = _report(run.stdout)
        if report is None:
            why = f"checkov printed no JSON report (exit {run.returncode}): {run.stderr.strip()[-300:]}"
            return [([f"{path}: {why}"], 1) for path in paths]
        results = report.get("results") or {}
        version = (report.get("summary") or {}).get("checkov_version", "?")
        records: list[dict[str, list[dict]]] = [{"failed": [], "passed": []} for _ in paths]
        for kind in ("failed", "passed"):
            for record in results.get(f"{kind}_checks", []):
                at = owner(record.get("file_abs_path") or record.get("file_path") or "")
                if at is None:
                    return [
                        (
                            [
                                f"{path}: checkov reported a result of a file it was not given: {record.get('file_path')}"
                            ],
                            1,
                        )
                        for path in paths
                    ]
                records[at][kind].append(record)
        parse_errors: list[list[str]] = [[] for _ in paths]
        for reported in results.get("parsing_errors") or []:
            at = owner(str(reported))
            for j in range(len(paths)) if at is None else (at,):
                parse_errors[j].append(str(reported))
    return [
        _lines(path, doc, records[i], parse_errors[i], version)
        for i, (path, doc) in enumerate(zip(paths, docs, strict=True))
    ]


def _lines(
    path: Path, doc: dict, records: dict[str, list[dict]], parse_errors: list[str], version: str
) -> tuple[list[str], int]:
    """The lines and problem count of one file from its own results."""
    if parse_errors:
        return [f"{path}: checkov could not parse it: {parse_errors}"], 1
    if not records["failed"] and not records["passed"]:
        return [f"{path}: checkov found nothing to check"], 1
    skips = _skips(doc)
    lines, problems = [], 0
    used: set[tuple[str, str]] = set()
    for record in records["failed"]:
        address, check = _address(record, doc), record["check_id"]
        reason = skips.get(address, {}).get(check)
        if reason:
            used.add((address, check))
            lines.append(f"SKIPPED {check} {address}: {reason}")
        else:
            problems += 1
            lines.append(f"FAILED  {check} {address}: {record['check_name']}")
    for record in records["passed"]:
        address, check = _address(record, doc), record["check_id"]
        if check in skips.get(address, {}):
            problems += 1
            lines.append(
                f"STALE   {check} {address}: skipped but the check passes; remove the skip"
            )
        else:
            lines.append(f"PASSED  {check} {address}")
    for address, checks in skips.items():
        for check, reason in checks.items():
            if not reason:
                problems += 1
                lines.append(f"NOREASON {check} {address}: a skip needs a reason")
    lines.append(
        f"{path}: {len(records['passed'])} passed, {len(records['failed']) - len(used)} failed, "
        f"{len(used)} skipped with a reason (checkov {version})"
    )
    return lines, problems


def scan(path: Path, checkov: Path) -> tuple[list[str], int]:
    """:func:`scan_all` of one file."""
    return scan_all([path], checkov)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkov", type=Path, default=DEFAULT_CHECKOV)
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if not args.checkov.exists():
        print(f"checkov not found at {args.checkov}; run `make checkov-setup`", file=sys.stderr)
        return 2
    files = []
    for path in args.paths:
        file = path / "cdk.tf.json" if path.is_dir() else path
        if not file.is_file():
            print(f"{file}: no such file", file=sys.stderr)
            return 2
        files.append(file)
    total = 0
    for lines, problems in scan_all(files, args.checkov):
        print("\n".join(lines))
        total += problems
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
