"""``gpucluster docs``: every ``docs/NAME.md`` a message, help page or generated file of the
installed package names is a topic it prints (the wheel ships them: tests/test_distribution.py
installs it and reads them there)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from gpucluster import cli, userdocs

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(r"(?<![\w/.-])docs/([\w-]+)\.md")
"""``docs/NAME.md`` as the package's text writes it (not a path inside another project's URL)."""


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def named_docs() -> dict[str, list[str]]:
    """``{NAME: [files naming docs/NAME.md]}`` over everything the wheel installs."""
    found: dict[str, list[str]] = {}
    for package in ("gpucluster", "gpucluster_cdk", "plugins"):
        for path in sorted((ROOT / package).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".j2", ".yaml", ".md", ".json"):
                for name in NAMED.findall(path.read_text(encoding="utf-8", errors="replace")):
                    found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_doc_the_package_names_is_a_topic():
    named = named_docs()
    assert len(named) >= 10  # errors, --help and the init templates name many
    assert [n for n in named if n not in userdocs.topics() and n != "NAME"] == []


@pytest.mark.parametrize(
    "typed",
    ["cluster-file", "cluster-file.md", "docs/cluster-file.md", "docs/cluster-file.md#pools"],
)
def test_a_topic_prints_the_doc_as_a_message_names_it(typed):
    code, out, err = run(["docs", typed])
    assert (code, err) == (0, "")
    assert out == (ROOT / "docs" / "cluster-file.md").read_text(encoding="utf-8")


def test_the_list_names_every_doc_with_its_title():
    code, out, err = run(["docs"])
    assert (code, err) == (0, "")
    lines = out.splitlines()
    for path in sorted((ROOT / "docs").glob("*.md")):
        title = path.read_text(encoding="utf-8").split("\n", 1)[0].lstrip("# ").replace("`", "")
        assert any(line.split()[0] == path.stem and line.endswith(title) for line in lines), path
    assert "gpucluster docs TOPIC" in lines[-1]


def test_an_unknown_topic_is_one_line_with_the_list_and_a_near_miss():
    code, out, err = run(["docs", "overides"])
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith("error[docs.topic] key=TOPIC: no doc named 'overides' (allowed: ")
    assert "fix: did you mean 'overrides'? run 'gpucluster docs'" in line


def test_the_top_level_help_says_where_the_docs_are(capsys):
    assert cli.main(["--help"]) == 0
    assert "gpucluster docs NAME" in " ".join(capsys.readouterr().out.split())


def test_the_plugin_doc_says_one_thing_about_the_sdk_version():
    """docs/plugins.md "Compatibility" gives the SDK API a semantic version (sdk.API_VERSION);
    no other sentence of the doc may say the SDK is not versioned."""
    from gpucluster import sdk

    text = " ".join((ROOT / "docs" / "plugins.md").read_text(encoding="utf-8").split())
    assert f"plugin SDK API {sdk.API_VERSION}" in text and "[semantic versioning]" in text
    assert not re.search(r"SDK (?:API )?is not versioned|not versioned separately", text)
