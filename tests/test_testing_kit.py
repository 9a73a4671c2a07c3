"""The test kit's hook-call recorder and output line matcher (docs/testing.md), and every
``python`` block of docs/testing.md run as the test module it is."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from gpucluster.sdk import GpuclusterError, hookimpl
from gpucluster.sdk.testing import HookCall, LineMatcher, registered

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing.md"
_TEXT = PAGE.read_text(encoding="utf-8")
BLOCKS = [
    "\n" * _TEXT.count("\n", 0, m.start(1)) + m.group(1)  # tracebacks point at the page's lines
    for m in re.finditer(r"^```python\n(.*?)^```", _TEXT, re.S | re.M)
]
CLUSTER = {
    "name": "c1",
    "criteria": {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
}


def _tests_of(block: str) -> list[tuple[str, object]]:
    namespace: dict[str, object] = {"__name__": "docs_testing_block"}
    exec(compile(block, str(PAGE), "exec"), namespace)
    return [
        (name, fn) for name, fn in namespace.items() if name.startswith("test_") and callable(fn)
    ]


CASES = [(i, name) for i, block in enumerate(BLOCKS) for name, _ in _tests_of(block)]


def test_the_page_has_examples_of_both():
    text = "\n".join(BLOCKS)
    assert (
        len(CASES) >= 5
        and "kit.record()" in text
        and "fnmatch_lines" in text
        and "re_match_lines" in text
    )


@pytest.mark.parametrize("index, name", CASES, ids=[name for _, name in CASES])
def test_the_examples_on_the_testing_page_pass(index, name, tmp_path):
    fn = dict(_tests_of(BLOCKS[index]))[name]
    kwargs = {"tmp_path": tmp_path} if "tmp_path" in inspect.signature(fn).parameters else {}
    fn(**kwargs)


# --------------------------------------------------------------------------- recorder


class Failing:
    @hookimpl
    def gpucluster_policy_checks(self, cluster, recipe, components):
        raise GpuclusterError("refused", key="settings.x")


def test_a_raising_implementation_is_recorded_and_the_error_passes_through():
    with registered() as kit:
        kit.register(Failing(), name="failing")
        with kit.record() as calls, pytest.raises(GpuclusterError) as err:
            kit.plan(CLUSTER)
    call = calls.getcall("gpucluster_policy_checks", plugin="failing")
    assert call.error is err.value and call.result is None
    assert (
        err.value.problems[0].key == "clusters[0].settings.x"
    )  # the core's handling still applies


def test_the_original_implementations_are_back_after_the_block():
    with registered() as kit:
        impls = [
            i
            for c in kit.pm.hook.__dict__.values()
            if hasattr(c, "get_hookimpls")
            for i in c.get_hookimpls()
        ]
        before = [i.function for i in impls]
        with pytest.raises(RuntimeError), kit.record():
            assert [i.function for i in impls] != before
            raise RuntimeError("leave the block")
        assert [i.function for i in impls] == before
        with kit.record() as calls:
            pass
        kit.plan(CLUSTER)
    assert calls.calls == []


def test_recorded_arguments_and_order():
    with registered() as kit, kit.record() as calls:
        plan = kit.plan(CLUSTER)
    gates = calls.getcall("gpucluster_gates", plugin="aks")
    assert set(gates.kwargs) <= {"cluster", "recipe", "components"} and gates.cluster.name == "c1"
    assert gates.recipe.criteria == plan.recipe.criteria
    assert calls.getcalls("gpucluster_gates gpucluster_policy_checks", plugin="aks") == [
        c
        for c in calls.calls
        if c.plugin == "aks" and c.hook in ("gpucluster_gates", "gpucluster_policy_checks")
    ]
    with pytest.raises(AttributeError, match="has no argument 'scope'"):
        _ = gates.scope
    with pytest.raises(
        AssertionError, match=r"gpucluster_prepare_cluster was not called after gpucluster_gates"
    ):
        calls.assert_called_in_order("gpucluster_gates", "gpucluster_prepare_cluster")
    with pytest.raises(
        AssertionError,
        match=r"expected one call of gpucluster_platforms, got [0-9]{2}|expected one call of gpucluster_platforms, got [2-9] ",
    ):
        calls.getcall("gpucluster_platforms")


def test_a_hook_call_is_plain_data():
    call = HookCall("gpucluster_gates", "aks", {"cluster": 1})
    assert (call.cluster, call.result, call.error) == (1, None, None)


# --------------------------------------------------------------------------- line matcher


def test_consecutive_lines_must_follow_each_other():
    lines = LineMatcher(["a", "b", "x", "c"])
    lines.fnmatch_lines(["a", "b"], consecutive=True)
    with pytest.raises(AssertionError, match="no consecutive match: 'c'"):
        lines.fnmatch_lines(["b", "c"], consecutive=True)
    lines.fnmatch_lines("b\nc")  # one pattern per line, others may come between


def test_fnmatch_brackets_and_regular_expressions():
    lines = LineMatcher(["error[input] key=a: m fix: f", "warning[W1] m fix: f"])
    lines.fnmatch_lines(["error[[]input]*", "warning[[]W?]*"])
    with pytest.raises(AssertionError):
        lines.fnmatch_lines(["error[input]*"])  # [input] is a character class in fnmatch
    lines.re_match_lines([r"error\[input\] key=a:", r"warning\[W\d\]"])
    with pytest.raises(AssertionError, match="re.match: 'warning'"):
        lines.no_re_match_line("warning")
    lines.no_fnmatch_line("info*")
    assert lines.get_lines_after("error*") == ["warning[W1] m fix: f"]
    with pytest.raises(ValueError):
        lines.get_lines_after("info*")
    assert lines.str() == str(lines) == "error[input] key=a: m fix: f\nwarning[W1] m fix: f"


def test_a_string_is_not_taken_for_lines():
    with pytest.raises(TypeError, match="splitlines"):
        LineMatcher("one\ntwo")
