"""Version strings and ranges (a leaf: used by gpucluster.lint.upgrade_check and gpucluster.charts.crds,
which imported each other for it)."""

from __future__ import annotations

import re
from typing import Any

_VERSION = re.compile(
    r"^[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


def parse_version(text: str) -> tuple[int, int, int, tuple[int, Any]] | None:
    """``"v26.7.1"`` -> ``(26, 7, 1, (1, ""))``; a pre-release sorts before its release; None when
    ``text`` is not a version."""
    m = _VERSION.fullmatch(str(text).strip())
    if not m:
        return None
    pre = m.group(4)
    return (
        int(m.group(1)),
        int(m.group(2) or 0),
        int(m.group(3) or 0),
        ((0, pre) if pre else (1, "")),
    )


_CLAUSE = re.compile(r"^(>=|<=|>|<|=|==)?\s*(\S+)$")


def version_in_range(version: str, spec: str | None) -> bool:
    """True when ``version`` satisfies every space-separated clause of ``spec`` (``>=``, ``>``,
    ``<=``, ``<``, ``=``; ``*`` or None = any version). A non-version never matches a clause."""
    if spec is None or str(spec).strip() in ("", "*"):
        return True
    have = parse_version(version)
    if have is None:
        return False
    for clause in str(spec).split():
        m = _CLAUSE.fullmatch(clause)
        want = parse_version(m.group(2)) if m else None
        if m is None or want is None:
            return False
        op = m.group(1) or "="
        ok = {
            ">=": have >= want,
            ">": have > want,
            "<=": have <= want,
            "<": have < want,
            "=": have == want,
            "==": have == want,
        }[op]
        if not ok:
            return False
    return True


def compare_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as version ``a`` sorts before, equal to or after ``b`` (Semantic Versioning 2.0.0
    precedence, https://semver.org: a ``v`` prefix and build metadata ignored, a pre-release before
    its release, missing minor/patch as 0); None when either is not a version."""
    have, want = parse_version(a), parse_version(b)
    if have is None or want is None:
        return None
    return (have > want) - (have < want)
