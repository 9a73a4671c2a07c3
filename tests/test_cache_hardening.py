"""Caches trust only what the user owns, and reading them never blocks nor allocates without
bound: the per-user result cache (gpucluster.diskcache) opens entries with O_NONBLOCK and takes
regular files only (a FIFO made plan and synth hang forever), checks a marshal entry's declared
lengths before decoding (a 5-byte entry asked for 16 GiB: MemoryError traceback or the OOM
killer); a chart in the pull cache is used only when it is the user's (gpucluster.charts.chartcache: a
chart another user planted in a shared XDG_CACHE_HOME was rendered as "what Terraform installs"),
and a FIFO named Chart.yaml is no chart, not a hang."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster import diskcache
from gpucluster.lint.render import ChartSources, cache_key, read_chart_dir

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534


def plant(folder: Path, kind: str, key: str, payload: bytes) -> Path:
    (folder / kind).mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.chmod(0o700)
    entry = folder / kind / key
    entry.write_bytes(
        b"gpucluster-cache 1\n"
        + key.encode()
        + b"\n"
        + hashlib.sha256(payload).hexdigest().encode()
        + b"\n"
        + payload
    )
    entry.chmod(0o600)
    return entry


def test_a_fifo_as_an_entry_is_a_miss_without_blocking(tmp_path):
    (tmp_path / "c" / "k").mkdir(parents=True, mode=0o700)
    (tmp_path / "c").chmod(0o700)
    os.mkfifo(tmp_path / "c" / "k" / "key")
    code = (
        "import sys; from gpucluster import diskcache; "
        "print(diskcache.get('k', 'key', env={'GPUCLUSTER_CACHE_DIR': sys.argv[1]}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0 and result.stdout == "None\n", result.stderr


@pytest.mark.parametrize(
    "payload",
    [
        b"[\xff\xff\xff\x7f",
        b"u\xff\xff\xff\x7f",
        b"l\xff\xff\xff\x7f",
        b"{u\xff\xff\xff\x7f",
        b"[\x02\x00\x00\x00N",
        b"N N",
        b"c",
        b"",
        b"\xdb",
    ],
    ids=[
        "list-2G",
        "str-2G",
        "long-2G",
        "dict-key-2G",
        "short-list",
        "trailing",
        "code",
        "empty",
        "ref",
    ],
)
def test_a_crafted_entry_is_a_miss_without_decoding_it(tmp_path, monkeypatch, payload):
    env = {"GPUCLUSTER_CACHE_DIR": str(tmp_path / "c")}
    plant(tmp_path / "c", "yaml-strict", "k", payload)
    assert diskcache.get("yaml-strict", "k", env=env) == payload  # a well-formed entry
    decoded = []
    monkeypatch.setattr(diskcache.marshal, "loads", lambda data: decoded.append(data))
    assert diskcache.get_plain("yaml-strict", "k", env=env) is diskcache.MISS
    assert decoded == []  # refused before marshal.loads could allocate what the header claims


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        -(2**70),
        1.5,
        "é",
        [],
        {},
        [1, [2, {"a": [None, True]}]],
        {"k": {"j": ["x"]}, "": ""},
        list(range(300)),
        {str(i): [i] for i in range(40)},
    ],
)
def test_plain_data_round_trips_through_the_bounded_decode(tmp_path, value):
    env = {"GPUCLUSTER_CACHE_DIR": str(tmp_path / "c")}
    assert diskcache.put_plain("yaml-strict", "k", value, env=env)
    assert diskcache.get_plain("yaml-strict", "k", env=env) == value


def test_a_crafted_entry_does_not_fail_a_plan(tmp_path):
    """The reproducer: every entry of a warm cache replaced by a 5-byte list header claiming 2**31
    items, then a plan under a 4 GB address-space limit (was: MemoryError traceback)."""
    env = {**os.environ, "GPUCLUSTER_CACHE_DIR": str(tmp_path / "c")}
    env.pop("GPUCLUSTER_CONFIG", None)
    gc = [sys.executable, "-m", "gpucluster.cli", "plan"]
    first = subprocess.run(gc, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    for kind in os.listdir(tmp_path / "c"):
        for key in os.listdir(tmp_path / "c" / kind):
            plant(tmp_path / "c", kind, key, b"[\xff\xff\xff\x7f")
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30)); "
        "import sys; from gpucluster.cli import main; sys.exit(main(['plan']))"
    )
    again = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr[-2000:]


def write_chart(folder: Path, name: str = "demo", version: str = "1.0.0") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
    (folder / "templates").mkdir(exist_ok=True)
    (folder / "templates" / "cm.yaml").write_text("kind: ConfigMap\n")
    return folder


def cached_chart(cache: Path) -> Path:
    cache.mkdir(mode=0o700)
    key = cache_key("https://charts.example.com", "demo", "1.0.0")
    parts = cache
    for part in key.parts:
        parts = parts / part
        parts.mkdir(mode=0o700)
    return write_chart(parts / "demo")


def locate(cache: Path):
    return ChartSources([], cache_dir=cache).locate("https://charts.example.com", "demo", "1.0.0")


def test_the_users_own_chart_cache_is_used(tmp_path):
    chart = cached_chart(tmp_path / "cache")
    found = locate(tmp_path / "cache")
    assert found.how == "cached" and found.chart.path == chart


@pytest.mark.parametrize("where", ["root", "middle", "chart", "file"])
def test_a_chart_cache_others_can_write_is_a_miss(tmp_path, where):
    chart = cached_chart(tmp_path / "cache")
    target = {
        "root": tmp_path / "cache",
        "middle": chart.parent.parent,
        "chart": chart,
        "file": chart / "templates" / "cm.yaml",
    }[where]
    target.chmod(target.stat().st_mode | 0o022)
    assert locate(tmp_path / "cache").chart is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown)")
@pytest.mark.parametrize("where", ["folder", "file"])
def test_a_chart_planted_by_another_user_is_never_rendered(tmp_path, where):
    chart = cached_chart(tmp_path / "cache")
    os.chown(chart if where == "folder" else chart / "templates" / "cm.yaml", NOBODY, NOBODY)
    assert locate(tmp_path / "cache").chart is None


def test_a_fifo_named_chart_yaml_is_no_chart_and_does_not_block(tmp_path):
    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / "Chart.yaml")
    assert read_chart_dir(tmp_path / "c") is None


def test_a_relative_cache_folder_disables_the_cache_and_writes_nothing_into_the_project(
    tmp_path, monkeypatch
):
    """GPUCLUSTER_CACHE_DIR=relcache wrote parsed cluster and values files (secrets included) into
    the working folder; a relative XDG_CACHE_HOME is ignored (XDG Base Directory Specification)."""
    assert diskcache.cache_dir({diskcache.CACHE_DIR_ENV: "relcache"}) is None
    assert (
        diskcache.cache_dir({diskcache.CACHE_DIR_ENV: "./c", "XDG_CACHE_HOME": str(tmp_path)})
        is None
    )
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    assert diskcache.cache_dir({"XDG_CACHE_HOME": "rel"}) == home / ".cache" / "gpucluster"
    from gpucluster.charts.chartcache import default_cache_dir

    assert default_cache_dir({"XDG_CACHE_HOME": "rel"}) == home / ".cache" / "gpucluster" / "charts"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "gpucluster.yaml").write_text(
        "clusters:\n  - name: r\n    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}\n"
    )
    env = {**os.environ, "GPUCLUSTER_CACHE_DIR": "relcache"}
    env.pop("GPUCLUSTER_CONFIG", None)
    result = subprocess.run(
        [sys.executable, "-m", "gpucluster.cli", "plan"],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["gpucluster.yaml"]
