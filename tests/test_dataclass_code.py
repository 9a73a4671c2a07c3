"""The compiled-dataclass-method cache (gpucluster/dataclass_code.py): same functions, warm runs
compile none, and a bad entry, another Python or a disabled cache is the standard library's path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import dataclasses, json, sys
import gpucluster
from gpucluster import dataclass_code
from gpucluster import model  # the core's dataclasses
from gpucluster.pipeline import build_plans  # most of the rest

@dataclasses.dataclass(frozen=True, order=True)
class P:
    a: int
    b: str = "x"
    c: list = dataclasses.field(default_factory=list, compare=False)
    def __post_init__(self):
        object.__setattr__(self, "c", [*self.c, self.a])

@dataclasses.dataclass(eq=False, kw_only=True, slots=True)
class K:
    name: str
    n: int = 3

p, q = P(1), P(2, "y", [7])
k = K(name="n")
try:
    p.a = 5
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(json.dumps({
    "installed": getattr(dataclasses._create_fn, "_gpucluster_cached", False),
    "compiled_here": dataclass_code.compiled_here(),
    "repr": [repr(p), repr(q), repr(k)],
    "order": [p < q, p == P(1), hash(p) == hash(P(1)), k == K(name="n")],
    "frozen": frozen,
    "init": str(__import__("inspect").signature(P.__init__)),
    "plan": [plan.cluster.name for plan in build_plans(__import__("gpucluster.inputs.config", fromlist=["x"]).load_config(None)[0])],
}))
"""


def probe(cache: str, *args: str) -> dict:
    env = {**os.environ, "GPUCLUSTER_CACHE_DIR": cache, "GPUCLUSTER_EMBEDDED_DEFAULT": "1"}
    run = subprocess.run(
        [sys.executable, *args, "-c", PROBE],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def entries(cache: Path) -> list[Path]:
    return (
        sorted((cache / "dataclass-code").glob("*")) if (cache / "dataclass-code").is_dir() else []
    )


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the cache wraps CPython 3.11's dataclasses only"
)
def test_a_warm_run_compiles_no_method_and_makes_the_same_functions(tmp_path):
    cache = tmp_path / "cache"
    off = probe("off")
    assert off["installed"] is False and off["compiled_here"] == 0
    cold = probe(str(cache))
    assert (
        cold["installed"] is True and cold["compiled_here"] > 100
    )  # every method of every class imported
    assert len(entries(cache)) == 1
    warm = probe(str(cache))
    assert warm["compiled_here"] == 0
    for result in (cold, warm):
        assert {k: v for k, v in result.items() if k not in ("installed", "compiled_here")} == {
            k: v for k, v in off.items() if k not in ("installed", "compiled_here")
        }
    assert off["order"] == [True, True, True, False] and off["frozen"] is True


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the cache wraps CPython 3.11's dataclasses only"
)
@pytest.mark.parametrize("damage", ["flip", "truncate", "not-code", "empty"])
def test_a_damaged_entry_is_a_miss(tmp_path, damage):
    import marshal

    cache = tmp_path / "cache"
    probe(str(cache))
    [entry] = entries(cache)
    data = entry.read_bytes()
    if damage == "flip":
        data = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = b""
    else:  # a well-formed entry (right header and checksum) whose values are not code objects
        from gpucluster import diskcache

        payload = marshal.dumps(
            {"def __create_fn__():\n def f():\n  pass\n return f": "print('forged')"}
        )
        key = entry.name
        assert diskcache.put(
            "dataclass-code", key, payload, env={"GPUCLUSTER_CACHE_DIR": str(cache)}
        )
        data = entry.read_bytes()
    entry.write_bytes(data)
    os.chmod(entry, 0o600)
    again = probe(str(cache))
    assert again["installed"] is True and again["compiled_here"] > 100
    assert again["repr"] == probe("off")["repr"]


@pytest.mark.parametrize("case", ["version", "implementation", "signature", "cache-off"])
def test_not_installed_on_another_python_signature_or_without_a_cache(monkeypatch, tmp_path, case):
    import dataclasses
    import types

    from gpucluster import dataclass_code

    stdlib = getattr(dataclasses._create_fn, "_gpucluster_wraps", dataclasses._create_fn)
    monkeypatch.setattr(dataclasses, "_create_fn", stdlib)
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", str(tmp_path / "c"))
    if case == "version":
        monkeypatch.setattr(sys, "version_info", (3, 13, 0, "final", 0))
    elif case == "implementation":
        monkeypatch.setattr(
            sys, "implementation", types.SimpleNamespace(name="pypy", cache_tag=None)
        )
    elif case == "signature":

        def other(name, args, body, *, globals=None, locals=None):  # 3.12's had no return_type...
            return stdlib(name, args, body, globals=globals, locals=locals)

        monkeypatch.setattr(dataclasses, "_create_fn", other)
    else:
        monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    before = dataclasses._create_fn
    assert dataclass_code.install() is False
    assert dataclasses._create_fn is before


def test_the_key_holds_the_module_bytes(monkeypatch, tmp_path):
    """A change of how the methods are compiled (this module's code) is another entry."""
    from gpucluster import dataclass_code

    key = dataclass_code._key()
    other = tmp_path / "dataclass_code.py"
    other.write_bytes(open(dataclass_code.__file__, "rb").read() + b"\n# changed\n")
    monkeypatch.setattr(dataclass_code, "__file__", str(other))
    assert dataclass_code._key() != key
