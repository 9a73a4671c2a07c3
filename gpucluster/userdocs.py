"""``gpucluster docs [TOPIC]``: the documentation the messages point at (``docs/NAME.md``), from
wherever gpucluster runs.

The wheel ships the repository's ``docs/*.md`` as ``gpucluster/docs/*.md`` (pyproject.toml maps
the ``docs`` folder there); a checkout or an editable install reads the repository's ``docs/``.
Every error, ``--help`` page and generated file that names ``docs/NAME.md`` is therefore
readable as ``gpucluster docs NAME`` by a user who installed the wheel only.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpucluster.errors import GpuclusterError, did_you_mean

_HERE = Path(__file__).resolve().parent

_TOPIC = re.compile(
    r"(?:.*/)?docs/([A-Za-z0-9_-]+)(?:\.md)?(?:#.*)?|([A-Za-z0-9_-]+)(?:\.md)?(?:#.*)?"
)
"""A topic as a user may type it: ``cli``, ``cli.md``, ``docs/cli.md``, ``docs/cli.md#lint``."""


def docs_folder() -> Path:
    """The folder of the Markdown docs: the installed wheel's ``gpucluster/docs``, else the
    checkout's ``docs`` beside the package.

    Raises:
        GpuclusterError: neither exists (an installation without its data files).
    """
    for candidate in (_HERE / "docs", _HERE.parent / "docs"):
        if (candidate / "cli.md").is_file():
            return candidate
    raise GpuclusterError(
        f"the documentation is not installed (no docs/cli.md in {_HERE} or beside it)",
        key="docs",
        id="docs.missing",
        fix="reinstall gpucluster from its wheel or sdist (pip install --force-reinstall gpucluster)",
    )


def topics() -> dict[str, str]:
    """``{topic: title}`` of every doc, sorted by topic: the file name without ``.md`` and the
    text of its first ``# `` heading (Markdown backticks dropped)."""
    found = {}
    for path in sorted(docs_folder().glob("*.md")):
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        found[path.stem] = first.lstrip("# ").replace("`", "").strip()
    return found


def topic_path(name: str) -> Path:
    """The file of the topic ``name`` (``cli``, ``cli.md``, ``docs/cli.md`` or
    ``docs/cli.md#section``; case as the file's).

    Raises:
        GpuclusterError: no such topic (the allowed ones listed, the nearest suggested).
    """
    known = topics()
    match = _TOPIC.fullmatch(name.strip())
    stem = (match.group(1) or match.group(2)) if match else None
    if stem is not None and stem in known:
        return docs_folder() / f"{stem}.md"
    raise GpuclusterError(
        f"no doc named '{name}'",
        key="TOPIC",
        allowed=", ".join(known),
        id="docs.topic",
        fix=did_you_mean(stem or name, known)
        + "run 'gpucluster docs' for the list, then 'gpucluster docs TOPIC'",
    )


def listing() -> str:
    """``gpucluster docs`` without a topic: one line per topic (name, title) and where they are."""
    known = topics()
    width = max(len(t) for t in known)
    lines = [f"{t.ljust(width)}  {title}" for t, title in known.items()]
    lines.append(
        f"\n{len(known)} docs in {docs_folder()}; read one with 'gpucluster docs TOPIC' "
        "(a message's docs/NAME.md is the topic NAME)"
    )
    return "\n".join(lines) + "\n"
