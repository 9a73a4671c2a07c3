#!/usr/bin/env python3
"""checkov on synthesized stacks, with per-resource justified skips.

Usage: ``tools/checkov_gate.py [--checkov PATH] STACK_DIR_OR_CDK_TF_JSON...``

Runs ``checkov -f <cdk.tf.json> --framework terraform_json`` (checkov 3.3.30 in its own virtual
environment, ``make checkov-setup``; it needs ``packaging<24``) on each file and prints one line
per check result. Exit 0 when every failed check is skipped by the failing resource itself, 1
otherwise, 2 on a usage or parsing problem.

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
                out[f"{prefix}{rtype}.{name}"] = {e["id"]: str(e.get("comment") or "").strip() for e in entries}
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


def scan(path: Path, checkov: Path) -> tuple[list[str], int]:
    """Lines describing each result of ``path`` and the number of problems (unjustified failures,
    stale skips, parsing errors)."""
    doc = json.loads(path.read_text())
    scanned = json.loads(json.dumps(doc))
    (scanned.get("terraform") or {}).pop("required_version", None)
    with tempfile.TemporaryDirectory(prefix="checkov-gate-") as tmp:
        target = Path(tmp) / "cdk.tf.json"
        target.write_text(json.dumps(scanned, indent=2))
        env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_NO_OUTPUT_COLORS="1")
        run = subprocess.run([str(checkov), "-f", str(target), "--framework", "terraform_json", "-o", "json", "--skip-download"],
                             capture_output=True, text=True, env=env, timeout=600)
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        return [f"{path}: checkov printed no JSON report (exit {run.returncode}): {run.stderr.strip()[-300:]}"], 1
    if isinstance(report, list):
        report = report[0]
    if not report.get("results"):  # an empty report: {"passed": 0, ...}
        return [f"{path}: checkov found nothing to check: {json.dumps(report)[:200]}"], 1
    results = report["results"]
    skips = _skips(doc)
    lines, problems = [], 0
    if results.get("parsing_errors"):
        return [f"{path}: checkov could not parse it: {results['parsing_errors']}"], 1
    used: set[tuple[str, str]] = set()
    for record in results.get("failed_checks", []):
        address, check = _address(record, doc), record["check_id"]
        reason = skips.get(address, {}).get(check)
        if reason:
            used.add((address, check))
            lines.append(f"SKIPPED {check} {address}: {reason}")
        else:
            problems += 1
            lines.append(f"FAILED  {check} {address}: {record['check_name']}")
    for record in results.get("passed_checks", []):
        address, check = _address(record, doc), record["check_id"]
        if check in skips.get(address, {}):
            problems += 1
            lines.append(f"STALE   {check} {address}: skipped but the check passes; remove the skip")
        else:
            lines.append(f"PASSED  {check} {address}")
    for address, checks in skips.items():
        for check, reason in checks.items():
            if not reason:
                problems += 1
                lines.append(f"NOREASON {check} {address}: a skip needs a reason")
    summary = report.get("summary", {})
    lines.append(f"{path}: {summary.get('passed', 0)} passed, {summary.get('failed', 0) - len(used)} failed, "
                 f"{len(used)} skipped with a reason (checkov {summary.get('checkov_version', '?')})")
    return lines, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkov", type=Path, default=DEFAULT_CHECKOV)
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if not args.checkov.exists():
        print(f"checkov not found at {args.checkov}; run `make checkov-setup`", file=sys.stderr)
        return 2
    total = 0
    for path in args.paths:
        file = path / "cdk.tf.json" if path.is_dir() else path
        if not file.is_file():
            print(f"{file}: no such file", file=sys.stderr)
            return 2
        lines, problems = scan(file, args.checkov)
        print("\n".join(lines))
        total += problems
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
