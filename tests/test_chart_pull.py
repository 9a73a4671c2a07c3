"""``gpucluster charts pull`` against real chart repositories on 127.0.0.1, then ``render`` and
``lint`` from the chart cache; the chart cache's ownership and mode rules.

* HTTP: a chart repository (packaged ``.tgz`` charts plus the ``index.yaml`` Helm generates)
  served by Python's ``http.server``, reached only through the cluster file's ``charts.mirror``.
  It holds the ``../shared/reference/charts`` chart of every release the default stack pins;
  where the reference folder lacks the pinned version, the nearest reference chart is packaged
  relabeled to the pinned name and version (the chart render's nearest-version match would use),
  so the repository answers for every pin but NVSentinel, which has no reference chart.
* OCI: Debian's ``docker-registry`` (the CNCF distribution registry) on 127.0.0.1 with a
  temporary storage folder: a real chart pushed with Helm's client, pulled through a
  ``charts.mirrors`` entry that sends an HTTP upstream to the OCI registry (as with an Azure
  Container Registry holding the charts). Skipped with the reason when the binary is absent
  (``.ci/run`` installs it).
* The cache: entries 0600 in 0700 folders; an entry below a folder another user owns or others
  can write, or holding a link or a loosely-moded file, is never used, and nothing is written there.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from gpucluster import pipeline
from gpucluster.charts import chartcache
from gpucluster.charts import pull as charts
from gpucluster.cli import main
from gpucluster.inputs import config
from gpucluster.inputs.config import EMBEDDED_DEFAULT
from gpucluster.lint.render import ChartSources

helm_python = pytest.importorskip("helm_python", reason="needs the render extra (helm-python-sdk)")

REGISTRY = "/usr/bin/docker-registry"


def cli(argv: list[str], monkeypatch) -> tuple[int, str, str]:
    """``gpucluster ARGV`` in process: exit code, stdout, stderr (no $GPUCLUSTER_CHARTS folders)."""
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def default_pins() -> list[tuple[str, str, str]]:
    """``(upstream repository, chart, version)`` of every chart release of the default stack."""
    (cluster,) = config.load_clusters(str(EMBEDDED_DEFAULT), env={})
    return [
        (p.repository, p.chart, p.version)
        for p in charts.pinned_charts([pipeline.build_plan(cluster)])
    ]


def package(source: Path, work: Path, dest: Path, *, name: str, version: str) -> Path:
    """``helm package`` the chart at ``source`` as ``name`` ``version`` into ``dest`` (a relabeled
    copy when the chart's own name or version differ); returns the archive."""
    meta = yaml.safe_load((source / "Chart.yaml").read_text())
    if (meta["name"], str(meta["version"])) != (name, version):
        copy = work / f"{name}-{version}"
        shutil.copytree(source, copy)
        for path in [copy, *copy.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        meta.update(name=name, version=version)
        (copy / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        source = copy
    return Path(helm_python.package(str(source), destination=str(dest)))


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    """Static files without a request log; remembers the archives it served (class attribute)."""

    served: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path.endswith(".tgz"):
            type(self).served.append(self.path)
        super().do_GET()


@pytest.fixture(scope="module")
def chart_repo(reference_charts, tmp_path_factory):
    """An HTTP chart repository on 127.0.0.1 at ``<url>/mirror``: ``(url, chart names, handler class)``."""
    root = tmp_path_factory.mktemp("repo")
    repo, work = root / "site" / "mirror", root / "work"
    repo.mkdir(parents=True)
    work.mkdir()
    offline = ChartSources([reference_charts], cache_dir=root / "unused")
    served = []
    for repository, chart, version in default_pins():
        found = offline.locate(repository, chart, version)
        if found.chart is None:
            continue
        try:
            package(found.chart.path, work, repo, name=chart, version=version)
        except (
            helm_python.HelmChartInvalidError
        ):  # a dependency missing from its charts/ folder: Helm packages no such chart
            continue
        served.append(chart)
    helm_python.repo_index_generate(
        str(repo)
    )  # relative archive URLs: the repository works at any address
    handler = type("Files", (QuietFiles,), {"served": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(root / "site"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mirror", served, handler
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def pulled(chart_repo, tmp_path_factory):
    """The default cluster with ``charts.mirror`` naming the repository, and a chart cache that
    ``charts pull`` filled: ``(cluster file, cache, (code, stdout, stderr))``."""
    url, _, _ = chart_repo
    project = tmp_path_factory.mktemp("project")
    config_file = project / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {url}\n" + EMBEDDED_DEFAULT.read_text())
    cache = tmp_path_factory.mktemp("home") / ".cache" / "gpucluster" / "charts"
    with pytest.MonkeyPatch.context() as mp:
        result = cli(["charts", "pull", "--config", str(config_file), "--cache", str(cache)], mp)
    return config_file, cache, result


UNSERVED = {"nvsentinel"}
"""NVSentinel has no reference chart (charts/SOURCES.md); every other pin is served, the
reference kube-prometheus-stack with the subcharts its Chart.yaml names (kube-state-metrics,
prometheus-node-exporter, grafana, prometheus-windows-exporter)."""


def test_the_repository_serves_every_pin_it_can(chart_repo):
    assert {c for _, c, _ in default_pins()} - set(chart_repo[1]) == UNSERVED


def test_charts_pull_fetches_every_pin_through_the_mirror(pulled, chart_repo):
    url, served, handler = chart_repo
    config_file, cache, (code, out, err) = pulled
    assert code == 2  # charts the repository does not hold cannot be had
    lines = out.strip().splitlines()
    assert sorted(line.split()[1] for line in lines[:-1] if line.startswith("pulled ")) == sorted(
        served
    )
    assert all(line.endswith(f" from {url}") for line in lines[:-1]), out
    n = len(served) + len(UNSERVED)
    assert (
        lines[-1]
        == f"{n} charts: {len(served)} pulled, 0 already cached, {len(UNSERVED)} unavailable; cache {cache}"
    )
    errors = err.strip().splitlines()
    assert sorted(e.split(" component=")[1].split(" ")[0] for e in errors) == sorted(UNSERVED)
    nvsentinel = next(e for e in errors if "component=nvsentinel " in e)
    assert nvsentinel.startswith(
        "error[charts.unavailable] cluster=gpu-training component=nvsentinel release=nvsentinel: "
        f"chart nvsentinel v1.25.0 from {url} cannot be pulled: "
    )
    assert "not found" in nvsentinel and "charts.mirror" in nvsentinel and "--charts" in nvsentinel
    # The repository answered: the fix says to copy the chart there, not to make it reachable.
    fix = nvsentinel.split(" fix: ", 1)[1]
    assert "reachable" not in fix and "copy it into your mirror" in fix
    pins = [(chart, version) for _, chart, version in default_pins() if chart in served]
    assert sorted(handler.served) == sorted(
        f"/mirror/{chart}-{version}.tgz" for chart, version in pins
    )  # each once
    for chart, version in pins:
        folder = chartcache.lookup(cache, url, chart, version)
        assert (
            folder is not None
            and str(yaml.safe_load((folder / "Chart.yaml").read_text())["version"]) == version
        )


class WhenWritten(io.StringIO):
    """A stdout that notes, for each ``pulled`` line, how many archives the server had sent then."""

    def __init__(self, served: list[str]) -> None:
        super().__init__()
        self.served = served
        self.at: list[int] = []

    def write(self, text: str) -> int:
        if text.startswith("pulled "):
            self.at.append(len(self.served))
        return super().write(text)


def test_each_chart_is_printed_as_it_completes(chart_repo, tmp_path, monkeypatch):
    """The k-th ``pulled`` line is written when the k-th archive has been served, not after
    the last one; stderr, not a terminal, holds no progress line."""
    url, served, handler = chart_repo
    config_file = tmp_path / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {url}\n" + EMBEDDED_DEFAULT.read_text())
    monkeypatch.delenv("GPUCLUSTER_CHARTS", raising=False)
    before = len(handler.served)
    out, err = WhenWritten(handler.served), io.StringIO()
    argv = ["charts", "pull", "--config", str(config_file), "--cache", str(tmp_path / "cache")]
    assert main(argv, stdout=out, stderr=err) == 2
    assert [n - before for n in out.at] == list(range(1, len(served) + 1))
    assert "\x1b" not in err.getvalue() and "\r" not in err.getvalue()


def test_a_terminal_sees_which_chart_is_being_fetched(chart_repo, tmp_path):
    """``charts pull`` with stderr on a pseudo-terminal: a ``[i/n] chart version from URL`` line
    per chart, rewritten in place and erased; stdout (a pipe) gets the result lines only."""
    import pty

    url, served, _ = chart_repo
    config_file = tmp_path / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {url}\n" + EMBEDDED_DEFAULT.read_text())
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    env.update(HOME=str(tmp_path), COLUMNS="200")
    master, slave = pty.openpty()
    received = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed its end (EIO)
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "gpucluster"),
            "charts",
            "pull",
            "--config",
            str(config_file),
            "--cache",
            str(tmp_path / "cache"),
        ],
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    assert proc.returncode == 2
    text = received.decode()
    n = len(default_pins())
    shown = [part for part in text.split("\r\x1b[K") if part.startswith("[")]
    assert [part.split("]")[0] for part in shown] == [f"[{i}/{n}" for i in range(1, n + 1)]
    assert shown[0].startswith(f"[1/{n}] cert-manager v1.20.2 from {url}")
    parts = text.split("\r\x1b[K")
    for part in parts:  # erased before each error line (the pty writes \n as \r\n)
        assert (
            part == ""
            or (part.startswith("[") and "\n" not in part)
            or (part.startswith("error[") and part.endswith("\r\n") and part.count("\n") == 1)
        ), part
    assert not parts[-1].startswith("[")  # and at the end
    assert b"\x1b" not in proc.stdout and proc.stdout.decode().count("\npulled ") >= len(served) - 1


def test_cache_entries_are_private(pulled):
    _, cache, _ = pulled
    entries = list(cache.rglob("*"))
    assert len(entries) > 100
    for path in [cache, *entries]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == 0o700 if path.is_dir() else mode == 0o600, (path, oct(mode))
    assert not [p for p in entries if p.name.startswith(".pull-") or p.suffix == ".tgz"]


def test_a_second_pull_uses_the_cache(pulled, chart_repo, monkeypatch):
    config_file, cache, _ = pulled
    _, served, handler = chart_repo
    before = len(handler.served)
    code, out, err = cli(
        ["charts", "pull", "--config", str(config_file), "--cache", str(cache)], monkeypatch
    )
    assert code == 2 and len(handler.served) == before  # no archive downloaded again
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith(
            f"{len(served) + len(UNSERVED)} charts: 0 pulled, {len(served)} already cached, {len(UNSERVED)} unavailable"
        )
    )


def test_lint_and_render_run_from_the_cache_without_allow_missing(
    pulled, shared_dir, tmp_path, monkeypatch
):
    config_file, cache, _ = pulled
    common = ["--config", str(config_file), "--cache", str(cache)]
    code, out, err = cli(
        ["lint", *common, "--crds", str(shared_dir / "reference" / "crds")], monkeypatch
    )
    assert code == 0, err
    assert not [line for line in err.splitlines() if line.startswith("error[")], err
    unavailable = [line for line in err.splitlines() if "[render.chart-unavailable]" in line]
    assert sorted(line.split(" component=")[1].split(" ")[0] for line in unavailable) == sorted(
        UNSERVED
    )
    assert all(
        line.startswith("warning[render.chart-unavailable] cluster=gpu-training ")
        for line in unavailable
    )
    assert all("gpucluster charts pull" in line for line in unavailable)
    assert "render.chart-nearest" not in err  # every other chart is the pinned one, from the cache
    assert out.strip().splitlines()[-1] == (
        "not checked (chart unavailable): gpu-training/nvsentinel"
    ), out
    code, out, err = cli(["render", *common, "--out", str(tmp_path / "out")], monkeypatch)
    assert code == 0, err
    rendered = {p.name for p in (tmp_path / "out" / "gpu-training").iterdir()}
    assert {
        "gpu-operator",
        "network-operator",
        "cert-manager",
        "kai-scheduler",
        "prometheus-adapter",
    } <= rendered
    assert (
        tmp_path
        / "out"
        / "gpu-training"
        / "gpu-operator"
        / "gpu-operator"
        / "templates"
        / "clusterpolicy.yaml"
    ).is_file()
    code, _, err = cli(["lint", *common, "--require-charts"], monkeypatch)
    assert (
        code == 2
        and "error[render.chart-unavailable] cluster=gpu-training component=nvsentinel" in err
    )


def test_a_chart_missing_from_the_cache_is_reported_with_how_to_get_it(
    pulled, tmp_path, monkeypatch
):
    config_file, _, _ = pulled
    code, out, err = cli(
        [
            "render",
            "--config",
            str(config_file),
            "--cache",
            str(tmp_path / "empty"),
            "--out",
            str(tmp_path / "out"),
            "--cluster",
            "gpu-training",
        ],
        monkeypatch,
    )
    assert code == 0
    line = next(
        line
        for line in err.splitlines()
        if "component=cert-manager" in line and "chart-unavailable" in line
    )
    assert (
        "not checked" in line
        and "fix: run `gpucluster charts pull`" in line
        and "charts.mirror" in line
        and "--charts" in line
    )


# --------------------------------------------------------------------------- OCI registry on 127.0.0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def oci_registry(tmp_path_factory):
    """``docker-registry serve`` on 127.0.0.1 with its own storage: the ``host:port``."""
    if not os.access(REGISTRY, os.X_OK):
        pytest.skip(
            f"needs Debian's docker-registry at {REGISTRY} (apt-get install docker-registry; .ci/run installs it)"
        )
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(
        "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'storage'}}}}}\nhttp: {{addr: 127.0.0.1:{port}}}\n"
    )
    proc = subprocess.Popen(
        [REGISTRY, "serve", str(root / "config.yml")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(200):  # until it answers the distribution API's base endpoint
            if proc.poll() is not None:
                pytest.fail(
                    f"docker-registry exited: {proc.stderr.read().decode(errors='replace')}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("docker-registry did not answer on /v2/")
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_charts_pull_through_an_oci_mirror(oci_registry, reference_charts, tmp_path, monkeypatch):
    archive = package(
        reference_charts / "cert-manager",
        tmp_path,
        tmp_path,
        name="cert-manager",
        version="v1.20.2",
    )
    helm_python.push(str(archive), f"oci://{oci_registry}/helm", plain_http=True)
    config_file = tmp_path / "gpucluster.yaml"
    mirror = f"oci://{oci_registry}/helm"
    config_file.write_text(
        f"charts:\n  mirrors:\n    https://charts.jetstack.io: {mirror}\n"
        + EMBEDDED_DEFAULT.read_text()
    )
    cache = tmp_path / "cache"
    code, out, err = cli(
        ["charts", "pull", "--config", str(config_file), "--cache", str(cache)], monkeypatch
    )
    assert f"pulled  cert-manager v1.20.2 from {mirror}\n" in out, (out, err)
    assert (
        code == 2 and "cluster=gpu-training component=cert-manager" not in err
    )  # the others have no network here
    found = ChartSources([], cache_dir=cache).locate(mirror, "cert-manager", "v1.20.2")
    assert (
        found.how == "cached"
        and found.chart.version == "v1.20.2"
        and found.chart.path.is_relative_to(cache)
    )
    assert (
        cache
        / "oci"
        / f"127.0.0.1_{oci_registry.split(':')[1]}"
        / "helm"
        / "cert-manager"
        / "v1.20.2"
        in found.chart.path.parents
    )


# --------------------------------------------------------------------------- who may write the cache


def fake_fetch(folder: Path, *, name: str = "demo") -> None:
    (folder / name / "templates").mkdir(parents=True)
    (folder / name / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: 1.0.0\n")
    (folder / name / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    )
    (folder / f"{name}-1.0.0.tgz").write_bytes(b"archive")


REPO = "https://charts.example.com/stable"


def stored(cache: Path) -> Path:
    return chartcache.store(cache, REPO, "demo", "1.0.0", fake_fetch)


def test_store_writes_private_entries_and_lookup_finds_them(tmp_path):
    cache = tmp_path / "cache"
    folder = stored(cache)
    assert folder == cache / "https" / "charts.example.com" / "stable" / "demo" / "1.0.0" / "demo"
    assert chartcache.lookup(cache, REPO, "demo", "1.0.0") == folder
    assert sorted(p.name for p in folder.parent.iterdir()) == ["demo"]  # the archive is not kept
    for path in [cache, *cache.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


@pytest.mark.parametrize(
    "spoil",
    ["group-writable cache", "world-writable entry folder", "loose file", "link in the entry"],
)
def test_an_entry_others_could_have_written_is_never_used(tmp_path, spoil):
    cache = tmp_path / "cache"
    folder = stored(cache)
    if spoil == "group-writable cache":
        cache.chmod(0o770)
    elif spoil == "world-writable entry folder":
        folder.parent.chmod(0o707)
    elif spoil == "loose file":
        (folder / "templates" / "cm.yaml").chmod(0o666)
    else:
        (folder / "templates" / "other.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    assert chartcache.lookup(cache, REPO, "demo", "1.0.0") is None
    assert ChartSources([], cache_dir=cache).locate(REPO, "demo", "1.0.0").chart is None


def test_a_cache_folder_another_user_owns_is_neither_read_nor_written(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give a folder to another user")
    cache = tmp_path / "cache"
    folder = stored(cache)
    os.chown(cache / "https", 65534, 65534)  # a planted folder on the way to the entry
    assert chartcache.lookup(cache, REPO, "demo", "1.0.0") is None
    with pytest.raises(chartcache.ChartCacheError, match="is not yours alone"):
        chartcache.store(cache, REPO, "demo", "2.0.0", fake_fetch)
    assert not (cache / "https" / "charts.example.com" / "stable" / "demo" / "2.0.0").exists()
    os.chown(cache / "https", 0, 0)
    os.chown(cache, 65534, 65534)
    result = charts.pull_one((REPO, "demo", "1.0.0"), cache)
    assert result.how == "failed" and "is not yours alone" in result.reason
    assert folder.is_dir()


def test_a_failed_fetch_leaves_nothing_behind(tmp_path):
    cache = tmp_path / "cache"

    def broken(folder: Path) -> None:
        (folder / "partial").write_text("x")
        raise OSError("connection reset")

    with pytest.raises(OSError, match="connection reset"):
        chartcache.store(cache, REPO, "demo", "1.0.0", broken)
    assert not cache.exists()  # not even the folders made for the entry (the cache was absent)
    (cache / "other").mkdir(parents=True)  # a cache that exists keeps what it held
    with pytest.raises(OSError, match="connection reset"):
        chartcache.store(cache, REPO, "demo", "1.0.0", broken)
    assert [p.name for p in cache.iterdir()] == ["other"]


def test_an_untrusted_entry_is_replaced_not_used(tmp_path):
    cache = tmp_path / "cache"
    folder = stored(cache)
    (folder / "templates" / "cm.yaml").write_text("planted\n")
    (folder / "templates" / "cm.yaml").chmod(0o666)
    again = stored(cache)
    assert again == folder and (folder / "templates" / "cm.yaml").read_text().startswith(
        "apiVersion: v1"
    )
    assert chartcache.lookup(cache, REPO, "demo", "1.0.0") == folder


@pytest.mark.parametrize(
    "repository, plain",
    [
        ("oci://127.0.0.1:5000/helm", True),
        ("oci://127.8.9.10/helm", True),
        ("oci://[::1]:5000/helm", True),
        ("oci://localhost:5000/helm", True),
        ("oci://myacr.azurecr.io/helm", False),
        ("oci://10.0.0.5:5000/helm", False),
        ("oci://127.0.0.1.example.com/helm", False),
    ],
)
def test_plain_http_only_for_loopback_registries(repository, plain):
    assert charts.is_loopback(repository) is plain


# --------------------------------------------------------------------------- hostile mirrors on 127.0.0.1

PIN = next(p for p in default_pins() if p[1] == "cert-manager")
"""The pin every hostile index lists: ``(upstream, "cert-manager", version)``."""


class Hostile(http.server.BaseHTTPRequestHandler):
    """A mirror whose answer for each path is a function of the handler (``routes``, per server;
    ``"*"``: every other path); ``release`` ends every answer still running (teardown)."""

    routes: dict = {}
    release = threading.Event()

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        route = self.routes.get(self.path.split("?")[0], self.routes.get("*"))
        try:
            if route is None:
                self.send_error(404)
            else:
                route(self)
        except (BrokenPipeError, ConnectionResetError):
            pass


def answer(body: bytes, status: int = 200, **headers: str):
    def route(h: Hostile) -> None:
        h.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            h.send_header(name, value)
        h.end_headers()
        h.wfile.write(body)

    return route


def endless(h: Hostile) -> None:
    h.send_response(200)
    h.end_headers()
    h.wfile.write(b"apiVersion: v1\nentries:\n")
    while not h.release.is_set():
        h.wfile.write(b"#" * 65535 + b"\n")


def trickle(h: Hostile) -> None:
    """``index.yaml`` one byte a second, no Content-Length."""
    h.send_response(200)
    h.end_headers()
    for byte in b"apiVersion: v1\nentries: {}\n" * 100:
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        if h.release.wait(1.0):
            return


def asleep(h: Hostile) -> None:
    """Accepts, reads the request, answers nothing."""
    h.release.wait(120)


@pytest.fixture
def hostile():
    """Start a hostile mirror on 127.0.0.1: ``start(routes) -> base URL`` (several may run)."""
    servers = []
    release = threading.Event()

    def start(routes: dict) -> str:
        handler = type("H", (Hostile,), {"routes": routes, "release": release})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    release.set()
    for server in servers:
        server.shutdown()
        server.server_close()


def archive(
    members: list[tuple[str, bytes]], *, name: str = "cert-manager", version: str | None = None
) -> bytes:
    """A chart archive (gzip tar) of ``members`` (path, content); with ``version``, first a
    ``<name>/Chart.yaml`` naming it."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if version is not None:
            members = [
                (
                    f"{name}/Chart.yaml",
                    f"apiVersion: v2\nname: {name}\nversion: {version}\n".encode(),
                ),
                *members,
            ]
        for path, content in members:
            info = tarfile.TarInfo(path)
            info.size = len(content)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def index_for(url: str, *, digest: str | None = None, version: str = PIN[2]) -> bytes:
    entry: dict = {"name": PIN[1], "version": version, "urls": [url], "apiVersion": "v2"}
    if digest is not None:
        entry["digest"] = digest
    return yaml.safe_dump({"apiVersion": "v1", "entries": {PIN[1]: [entry]}}).encode()


def hostile_pull(tmp_path: Path, mirror: str, *extra: str) -> tuple[int, str, str, Path]:
    """``gpucluster charts pull`` of the default cluster through ``mirror`` in a child process
    (generous outer limit: 240 s), ``--timeout 3``: ``(code, stdout, stderr, cache)``."""
    project = tmp_path / "project"
    project.mkdir()
    config_file = project / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text())
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCLUSTER_CHARTS",)}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "gpucluster"),
            "charts",
            "pull",
            "--config",
            str(config_file),
            "--cache",
            str(cache),
            "--timeout",
            "3",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=project,
    )
    assert sorted(p.name for p in project.iterdir()) == ["gpucluster.yaml"]  # nothing beside it
    assert sorted(p.name for p in tmp_path.iterdir()) in (["cache", "project"], ["project"])
    return proc.returncode, proc.stdout, proc.stderr, cache


def files_in(cache: Path) -> list[Path]:
    """Everything in ``cache``, folders too: a pull that stored nothing leaves no empty
    ``<chart>/`` folder behind either (the cache is as it was)."""
    return sorted(cache.rglob("*")) if cache.exists() else []


def test_a_refused_mirror_leaves_no_cache_folder(tmp_path):
    """Every chart refused (nothing listens on 127.0.0.1:1): exit 2 and the cache folder, absent
    before, is absent after -- it held an empty ``<chart>/`` folder per chart."""
    code, _, err, cache = hostile_pull(tmp_path, "http://127.0.0.1:1/mirror")
    assert code == 2, err
    assert not cache.exists(), files_in(cache)


def index_failure(tmp_path, mirror: str, reason: str) -> str:
    """The index fails for every chart: one ``error[charts.pull]`` line names the repository,
    ``reason`` and its fix once, then every chart with the releases that install it; exit 2;
    nothing in the cache. Returns stderr."""
    code, out, err, cache = hostile_pull(tmp_path, mirror)
    pins = default_pins()
    assert code == 2, err
    [line] = err.splitlines()
    assert line.startswith(
        f"error[charts.pull] repository={mirror}: {len(pins)} charts from {mirror} were not stored: "
    ), line
    assert reason in line and line.count(" fix: ") == 1 and line.count(reason) == 1, line
    listed = line.split("; not pulled: ")[1].split(" fix: ")[0].split("; ")
    assert [item.split(" (")[0] for item in listed] == [
        f"{chart} {version}" for _, chart, version in pins
    ]
    assert all(item.endswith(")") and "gpu-training/" in item for item in listed)
    assert out.splitlines()[-1].startswith(f"{len(pins)} charts: 0 pulled, 0 already cached, ")
    assert files_in(cache) == []
    return err


def test_an_endless_index_is_cut_at_its_cap(hostile, tmp_path):
    mirror = hostile({"/index.yaml": endless})
    index_failure(tmp_path, mirror, f"index.yaml is longer than the {charts.INDEX_CAP} bytes read")


def test_an_index_sent_a_byte_a_second_meets_the_total_deadline(hostile, tmp_path):
    mirror = hostile({"/index.yaml": trickle})
    index_failure(tmp_path, mirror, "the total deadline of 3 s (--timeout) passed")


def test_a_server_that_accepts_and_sleeps_meets_the_total_deadline(hostile, tmp_path):
    mirror = hostile({"/index.yaml": asleep})
    index_failure(tmp_path, mirror, "the total deadline of 3 s (--timeout) passed")


def test_an_index_that_is_not_a_repository_index(hostile, tmp_path):
    mirror = hostile({"/index.yaml": answer(b"- just\n- a list\n")})
    index_failure(tmp_path, mirror, "index.yaml has no 'entries' mapping")


def test_an_index_cut_short_is_named_so(hostile, tmp_path):
    """The server announces more bytes than it sends, then closes: not parsed as the whole."""
    body = b"apiVersion: v1\n"
    mirror = hostile({"/index.yaml": answer(body, **{"Content-Length": "100000"})})
    index_failure(
        tmp_path, mirror, f"index.yaml: the connection closed after {len(body)} of 100000 bytes"
    )


def chart_failure(tmp_path, mirror: str, reason: str) -> str:
    """cert-manager fails with one ``error[charts.pull]`` line naming ``reason``; every other chart
    is not in the index (``error[charts.unavailable]``); exit 2; nothing in the cache."""
    code, out, err, cache = hostile_pull(tmp_path, mirror)
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == len(default_pins()), err
    (pull_line,) = [line for line in lines if line.startswith("error[charts.pull]")]
    assert pull_line.startswith(
        "error[charts.pull] cluster=gpu-training component=cert-manager release=cert-manager "
        f"chart=cert-manager@{PIN[2]} repository={mirror}: "
    ), pull_line
    assert reason in pull_line and " fix: " in pull_line, pull_line
    others = [line for line in lines if line != pull_line]
    assert all(
        line.startswith("error[charts.unavailable] ") and "not found" in line for line in others
    )
    assert files_in(cache) == []
    return out + err


def test_a_chart_of_another_version_is_not_stored(hostile, tmp_path):
    tgz = archive([], version="9.9.9")
    mirror = hostile({"/index.yaml": answer(index_for("cm.tgz")), "/cm.tgz": answer(tgz)})
    chart_failure(
        tmp_path,
        mirror,
        f"the archive holds chart cert-manager 9.9.9, not cert-manager {PIN[2]} as asked",
    )


def test_a_chart_of_another_name_is_not_stored(hostile, tmp_path):
    tgz = archive(
        [
            (
                "cert-manager/Chart.yaml",
                b"apiVersion: v2\nname: evil\nversion: " + PIN[2].encode() + b"\n",
            )
        ]
    )
    mirror = hostile({"/index.yaml": answer(index_for("cm.tgz")), "/cm.tgz": answer(tgz)})
    chart_failure(tmp_path, mirror, f"the archive holds chart evil {PIN[2]}, not cert-manager")


def test_an_archive_whose_digest_is_not_the_index_digest(hostile, tmp_path):
    tgz = archive([], version=PIN[2])
    mirror = hostile(
        {"/index.yaml": answer(index_for("cm.tgz", digest="0" * 64)), "/cm.tgz": answer(tgz)}
    )
    got = hashlib.sha256(tgz).hexdigest()
    chart_failure(tmp_path, mirror, f"has sha256 {got}, the index says {'0' * 64}")


def test_an_unquoted_all_zero_digest_is_not_taken_for_none(hostile, tmp_path):
    """``digest: 000...0`` unquoted is the YAML integer 0: the check is not skipped, the entry
    is refused, naming what YAML read."""
    tgz = archive([], version=PIN[2])
    text = index_for("cm.tgz", digest="sha256:x").decode().replace("sha256:x", "0" * 64)
    assert yaml.safe_load(text)["entries"]["cert-manager"][0]["digest"] == 0
    mirror = hostile({"/index.yaml": answer(text.encode()), "/cm.tgz": answer(tgz)})
    got = hashlib.sha256(tgz).hexdigest()
    chart_failure(
        tmp_path,
        mirror,
        f"the index gives cert-manager {PIN[2]} the digest 0, a YAML int, not a sha256 text "
        f"(the archive's is {got})",
    )


def test_an_index_with_an_alias_is_refused(hostile, tmp_path):
    text = index_for("cm.tgz") + b"extra: &a [x, x]\nmore: [*a, *a]\n"
    mirror = hostile({"/index.yaml": answer(text)})
    index_failure(tmp_path, mirror, "index.yaml is not accepted: aliases (*name) are not accepted")


def bitnami_like_index(entries: int) -> bytes:
    """An ``index.yaml`` of ``entries`` chart versions, each as Bitnami's index writes one
    (annotations, dependencies, maintainers, urls, sha256 digest: about 1.1 KB)."""
    charts_ = {}
    for i in range(entries):
        name = f"chart{i // 60:04d}"
        charts_.setdefault(name, []).append(
            {
                "annotations": {
                    "category": "Database",
                    "images": f"- name: {name}\n  image: docker.io/bitnami/{name}:11.4.{i}-debian-12-r0\n",
                    "licenses": "Apache-2.0",
                },
                "apiVersion": "v2",
                "appVersion": f"11.4.{i}",
                "created": "2024-08-15T09:12:13.123456789Z",
                "dependencies": [
                    {
                        "name": "common",
                        "repository": "oci://registry-1.docker.io/bitnamicharts",
                        "tags": ["bitnami-common"],
                        "version": "2.x.x",
                    }
                ],
                "description": f"{name} is an open source relational database management system.",
                "digest": hashlib.sha256(f"{name}{i}".encode()).hexdigest(),
                "home": "https://bitnami.com",
                "icon": f"https://bitnami.com/assets/stacks/{name}/img/{name}-stack-220x234.png",
                "keywords": [name, "mysql", "database"],
                "maintainers": [
                    {"name": "Broadcom, Inc.", "url": "https://github.com/bitnami/charts"}
                ],
                "name": name,
                "sources": [f"https://github.com/bitnami/charts/tree/main/bitnami/{name}"],
                "urls": [f"https://charts.bitnami.com/bitnami/{name}-19.0.{i}.tgz"],
                "version": f"19.0.{i}",
            }
        )
    return yaml.dump({"apiVersion": "v1", "entries": charts_}, Dumper=yaml.CSafeDumper).encode()


def test_a_large_index_parses_in_memory_in_proportion_to_its_size():
    """PyYAML's pure-Python loader held about 130 times an index's size at its peak (1.9 GB for
    14.6 MB); the parse holds less than 10 times (tracemalloc's peak of Python allocations)."""
    import tracemalloc

    data = bitnami_like_index(2000)
    assert len(data) > 1_500_000
    tracemalloc.start()
    try:
        index = charts.parse_index(data, charts.Deadline(600))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert index == yaml.load(data, Loader=yaml.CSafeLoader)
    assert peak < 10 * len(data), (peak, len(data))


class ExpiresAfterDownload(charts.Deadline):
    """A deadline that passes the moment the index has been downloaded (``passed`` set by the
    wrapped ``http_get``): only a deadline checked while parsing sees it."""

    passed = False

    def remaining(self) -> float:
        return -1.0 if self.passed else super().remaining()


def test_the_total_deadline_covers_parsing_the_index(hostile, tmp_path, monkeypatch):
    deadline = ExpiresAfterDownload(300)
    real_get = charts.http_get

    def get_then_expire(*args, **kwargs):
        body = real_get(*args, **kwargs)
        deadline.passed = True
        return body

    monkeypatch.setattr(charts, "http_get", get_then_expire)
    mirror = hostile({"/index.yaml": answer(bitnami_like_index(100))})
    result = charts.pull_one(
        (mirror, "chart0000", "19.0.0"),
        tmp_path / "cache",
        session=charts.PullSession(deadline),
    )
    assert (result.how, result.kind) == ("failed", "charts.pull")
    assert result.reason == "the total deadline of 300 s (--timeout) passed"


def test_the_right_archive_with_its_digest_is_stored(hostile, tmp_path):
    tgz = archive([("cert-manager/templates/cm.yaml", b"kind: ConfigMap\n")], version=PIN[2])
    digest = hashlib.sha256(tgz).hexdigest()
    mirror = hostile(
        {"/index.yaml": answer(index_for("cm.tgz", digest=digest)), "/cm.tgz": answer(tgz)}
    )
    code, out, err, cache = hostile_pull(tmp_path, mirror)
    assert f"pulled  cert-manager {PIN[2]} from {mirror}\n" in out, err
    assert "charts.pull" not in err
    folder = chartcache.lookup(cache, mirror, "cert-manager", PIN[2])
    assert (
        folder is not None
        and (folder / "templates" / "cm.yaml").read_bytes() == b"kind: ConfigMap\n"
    )


def test_an_archive_cut_short_is_named_so(hostile, tmp_path):
    tgz = archive([("cert-manager/templates/cm.yaml", b"kind: ConfigMap\n")], version=PIN[2])
    mirror = hostile(
        {
            "/index.yaml": answer(index_for("cm.tgz")),
            "/cm.tgz": answer(tgz[:40], **{"Content-Length": str(len(tgz))}),
        }
    )
    chart_failure(tmp_path, mirror, f"the connection closed after 40 of {len(tgz)} bytes")


def test_a_redirect_to_another_port_is_not_followed(hostile, tmp_path):
    tgz = archive([], version=PIN[2])
    other = hostile({"/cm.tgz": answer(tgz)})
    mirror = hostile(
        {
            "/index.yaml": answer(index_for("cm.tgz")),
            "/cm.tgz": answer(b"", 302, Location=f"{other}/cm.tgz"),
        }
    )
    chart_failure(
        tmp_path, mirror, f"redirects to {other}/cm.tgz, which the repository settings do not name"
    )


def test_a_redirect_of_the_index_is_not_followed(hostile, tmp_path):
    other = hostile({"/index.yaml": answer(index_for("cm.tgz"))})
    mirror = hostile({"/index.yaml": answer(b"", 301, Location=f"{other}/index.yaml")})
    index_failure(tmp_path, mirror, "redirects to")


def test_a_chart_url_to_another_host_is_refused_and_its_credentials_never_printed(
    hostile, tmp_path
):
    tgz = archive([], version=PIN[2])
    other = hostile({"/cm.tgz": answer(tgz)})
    secret_url = other.replace("http://", "http://robot:S3CRETPASS@") + "/cm.tgz?token=T0KENVALUE"
    mirror = hostile({"/index.yaml": answer(index_for(secret_url))})
    text = chart_failure(
        tmp_path, mirror, f"the index sends cert-manager {PIN[2]} to {other}/cm.tgz?…, a host"
    )
    assert "S3CRETPASS" not in text and "T0KENVALUE" not in text and "robot" not in text


def test_a_gzip_bomb_stops_at_the_cap(hostile, tmp_path):
    big = tarfile.TarInfo("cert-manager/templates/big.yaml")
    big.size = 10 * 1024**3  # declared 10 GiB: what a bomb unpacks to
    head = archive([], version=PIN[2])
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(head))) as tar:
            for member in tar:
                gz.write(member.tobuf())
                gz.write(tar.extractfile(member).read().ljust(512 * -(-member.size // 512), b"\0"))
        gz.write(big.tobuf())
        gz.write(b"\0" * (8 * 1024 * 1024))
    mirror = hostile(
        {"/index.yaml": answer(index_for("cm.tgz")), "/cm.tgz": answer(buf.getvalue())}
    )
    chart_failure(tmp_path, mirror, f"is larger than {charts.UNPACKED_FILE_CAP} bytes")


def test_a_tar_member_outside_the_chart_folder_is_refused(hostile, tmp_path):
    tgz = archive([("cert-manager/../../../escaped.txt", b"x")], version=PIN[2])
    mirror = hostile({"/index.yaml": answer(index_for("cm.tgz")), "/cm.tgz": answer(tgz)})
    chart_failure(tmp_path, mirror, "outside the chart folder cert-manager/")
    assert not list(tmp_path.rglob("escaped.txt"))


def member(name: str, kind: bytes, **attrs) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


@pytest.mark.parametrize(
    ("info", "reason"),
    [
        (member("/etc/demo", tarfile.REGTYPE), "outside the chart folder"),
        (member("demo/../x", tarfile.REGTYPE), "outside the chart folder"),
        (member("other/x", tarfile.REGTYPE), "outside the chart folder"),
        (
            member("demo/link", tarfile.SYMTYPE, linkname="/etc/passwd"),
            "neither a file nor a folder",
        ),
        (
            member("demo/hard", tarfile.LNKTYPE, linkname="demo/Chart.yaml"),
            "neither a file nor a folder",
        ),
        (
            member("demo/dev", tarfile.CHRTYPE, devmajor=1, devminor=3),
            "neither a file nor a folder",
        ),
        (member("demo/fifo", tarfile.FIFOTYPE), "neither a file nor a folder"),
    ],
)
def test_unsafe_members_are_refused(tmp_path, info, reason):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        chart_yaml = b"apiVersion: v2\nname: demo\nversion: 1.0.0\n"
        first = tarfile.TarInfo("demo/Chart.yaml")
        first.size = len(chart_yaml)
        tar.addfile(first, io.BytesIO(chart_yaml))
        tar.addfile(info, io.BytesIO(b"x" * info.size))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(charts.PullError, match=reason):
        charts.unpack_chart(buf.getvalue(), out, "demo")
    assert [p.name for p in out.rglob("*") if not p.is_dir()] == ["Chart.yaml"]


def test_too_many_members_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(charts, "MEMBER_CAP", 3)
    tgz = archive([(f"demo/f{i}", b"") for i in range(5)], name="demo", version="1.0.0")
    with pytest.raises(charts.PullError, match="more than 3 members"):
        charts.unpack_chart(tgz, tmp_path, "demo")


def small_repository(folder: Path) -> list[tuple[str, str]]:
    """A chart repository in ``folder``: for every pin of the default stack a small chart archive
    (its ``Chart.yaml`` and one template), and an ``index.yaml`` naming each with a relative URL
    and its sha256 digest, as ``helm repo index`` writes them. Returns ``(chart, version)`` pairs."""
    folder.mkdir(parents=True, exist_ok=True)
    entries: dict = {}
    pins = sorted({(chart, version) for _, chart, version in default_pins()})
    for chart, version in pins:
        tgz = archive(
            [(f"{chart}/templates/cm.yaml", b"kind: ConfigMap\n")], name=chart, version=version
        )
        (folder / f"{chart}-{version}.tgz").write_bytes(tgz)
        entries[chart] = [
            {
                "apiVersion": "v2",
                "name": chart,
                "version": version,
                "urls": [f"{chart}-{version}.tgz"],
                "digest": hashlib.sha256(tgz).hexdigest(),
            }
        ]
    (folder / "index.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "entries": entries}))
    return pins


class ClosingFiles(QuietFiles):
    """Static files over HTTP/1.1, each answer with ``Connection: close`` (the server ends the
    connection after it, as many proxies in front of a chart repository do)."""

    protocol_version = "HTTP/1.1"

    def end_headers(self) -> None:
        self.send_header("Connection", "close")
        super().end_headers()


@pytest.mark.parametrize(
    "handler", [QuietFiles, ClosingFiles], ids=["http-1.0", "connection-close"]
)
def test_a_repository_that_closes_each_connection_serves_every_chart(
    handler, tmp_path, monkeypatch
):
    """``python -m http.server``'s handler (HTTP/1.0: the server closes after each answer), and
    the same over HTTP/1.1 with ``Connection: close``: every chart is pulled, in this Python
    (tests/test_python_versions.py runs ``charts pull`` against ``python -m http.server`` in the
    other supported Pythons)."""
    pins = small_repository(tmp_path / "site")
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(tmp_path / "site"))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        mirror = f"http://127.0.0.1:{server.server_address[1]}"
        config_file = tmp_path / "gpucluster.yaml"
        config_file.write_text(f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text())
        cache = tmp_path / "cache"
        code, out, err = cli(
            ["charts", "pull", "--config", str(config_file), "--cache", str(cache)], monkeypatch
        )
    finally:
        server.shutdown()
        server.server_close()
    assert (code, err) == (0, ""), err
    for chart, version in pins:
        assert f"pulled  {chart} {version} from {mirror}\n" in out, out
        folder = chartcache.lookup(cache, mirror, chart, version)
        assert folder is not None and (folder / "templates" / "cm.yaml").is_file()


TLS_FILES = """
import functools, http.server, ssl, sys
cert, key, folder = sys.argv[1:4]
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
class Files(http.server.SimpleHTTPRequestHandler):  # HTTP/1.0: closes after each answer
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Files, directory=folder))
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
"""``python -c TLS_FILES CERT KEY FOLDER``: ``http.server``'s file handler over TLS on
127.0.0.1 (a port of its choosing, printed first)."""


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``IP:127.0.0.1`` and its key, made by the openssl CLI
    (a CA certificate with the extensions Python 3.13's strict verification asks for);
    skips without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command (apt-get install openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


@contextlib.contextmanager
def tls_files(python: str, folder: Path, cert: Path, key: Path, env: dict | None = None):
    """Serve ``folder`` over HTTPS with :data:`TLS_FILES` run by ``python``: yields the URL."""
    server = subprocess.Popen(
        [python, "-c", TLS_FILES, str(cert), str(key), str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        yield f"https://127.0.0.1:{int(server.stdout.readline())}"
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_an_https_repository_that_closes_each_connection_serves_every_chart(tmp_path, monkeypatch):
    """As above over TLS (the certificate trusted through ``SSL_CERT_FILE``)."""
    pins = small_repository(tmp_path / "site")
    cert, key = self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with tls_files(sys.executable, tmp_path / "site", cert, key) as mirror:
        config_file = tmp_path / "gpucluster.yaml"
        config_file.write_text(f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text())
        code, out, err = cli(
            ["charts", "pull", "--config", str(config_file), "--cache", str(tmp_path / "cache")],
            monkeypatch,
        )
    assert (code, err) == (0, ""), err
    for chart, version in pins:
        assert f"pulled  {chart} {version} from {mirror}\n" in out, out


def test_timeout_must_be_a_number_of_seconds(monkeypatch):
    code, _, err = cli(["charts", "pull", "--timeout", "soon"], monkeypatch)
    assert (
        code == 2 and err.startswith("error[usage]") and "'soon' is not a number of seconds" in err
    )


def test_an_oci_registry_that_accepts_and_sleeps_meets_the_total_deadline(hostile, tmp_path):
    mirror = hostile({"*": asleep}).replace("http://", "oci://") + "/helm"
    index_failure(tmp_path, mirror, "the total deadline of 3 s (--timeout) passed")


def hangs_up(h: Hostile) -> None:
    """Reads the request, closes the connection without a byte of answer."""
    h.close_connection = True


def test_an_oci_registry_that_hangs_up_is_one_line_for_every_chart(hostile, tmp_path):
    """Each chart's Helm error names its own URL, so the shared cause was twelve
    charts.unavailable lines, each with the fix for a registry that lacks the chart version."""
    mirror = hostile({"*": hangs_up}).replace("http://", "oci://") + "/helm"
    host = mirror.split("://", 1)[1].split("/", 1)[0]
    code, out, err, cache = hostile_pull(tmp_path, mirror)
    lines = err.splitlines()
    assert code == 2 and files_in(cache) == [], err
    # the charts Helm asked before the 3 s deadline passed: one line, the registry's cause once
    (eof,) = [ln for ln in lines if f"the registry {host} did not answer: EOF" in ln]
    assert eof.startswith(f"error[charts.pull] repository={mirror}: "), eof
    assert "without this chart version" not in err and "charts.unavailable" not in err, err
    for _, chart, version in default_pins():  # every chart named once (the rest: the deadline)
        named = [
            ln
            for ln in lines
            if f"chart={chart}@{version} " in ln or f"{chart} {version} (gpu-training/" in ln
        ]  # a cause only one chart met (one asked before the deadline, on a loaded machine) is that chart's own line
        assert len(named) == 1, (chart, err)


def test_an_oci_registry_sending_endless_answers_names_every_chart_once(hostile, tmp_path):
    """Each chart fails (the first its own way, the rest when the deadline has passed): every
    chart is named by exactly one line, a cause shared by several is told once."""
    mirror = hostile({"*": endless}).replace("http://", "oci://") + "/helm"
    code, out, err, cache = hostile_pull(tmp_path, mirror)
    lines = err.splitlines()
    assert code == 2 and 1 <= len(lines) <= len(default_pins()), err
    assert all(line.startswith("error[") and line.count(" fix: ") == 1 for line in lines), err
    for _, chart, version in default_pins():
        named = [
            line
            for line in lines
            if f"chart={chart}@{version} " in line or f"{chart} {version} (gpu-training/" in line
        ]
        assert len(named) == 1, (chart, err)
    assert "goroutine" not in err and files_in(cache) == []


def test_sigterm_during_a_pull_leaves_nothing_in_the_cache(hostile, tmp_path):
    """A CI runner's timeout (SIGTERM) while a chart is being fetched: the command ends with
    128 + 15 and leaves no half-fetched ``.pull-*`` folder in the cache (it ended at once,
    without its clean-up: the folder stayed)."""
    asked = threading.Event()

    def sleeps(h: Hostile) -> None:
        asked.set()
        h.release.wait(120)

    mirror = hostile({"*": sleeps})
    config_file = tmp_path / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text())
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "gpucluster"), "charts", "pull", "--config"]
        + [str(config_file), "--cache", str(cache), "--timeout", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert asked.wait(60), "the pull never asked the mirror"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert [p for p in cache.rglob(".pull-*")] == []


# --------------------------------------------------------------------------- messages that name the cause


def test_a_host_name_that_does_not_resolve_is_one_line_naming_dns(tmp_path, monkeypatch):
    """The mirror's host name does not resolve (the resolver answers as it does offline; no
    query leaves this process): one ``error[charts.unreachable]`` line names the host, DNS and
    what to set, once for the twelve charts; nothing blames what the repository sent."""
    real = socket.getaddrinfo

    def offline(host, *args, **kwargs):
        if host == "charts.gpucluster-test.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", offline)
    mirror = "http://charts.gpucluster-test.invalid/mirror"
    config_file = tmp_path / "gpucluster.yaml"
    config_file.write_text(f"charts:\n  mirror: {mirror}\n" + EMBEDDED_DEFAULT.read_text())
    code, out, err = cli(
        ["charts", "pull", "--config", str(config_file), "--cache", str(tmp_path / "cache")],
        monkeypatch,
    )
    assert code == 2
    [line] = err.splitlines()
    n = len(default_pins())
    assert line.startswith(
        f"error[charts.unreachable] repository={mirror}: {n} charts from {mirror} were not stored: "
        "index.yaml: the host name charts.gpucluster-test.invalid does not resolve (DNS): "
    ), line
    assert "sent what cannot be used" not in line and " mirror=" not in line
    assert line.split(" fix: ")[1].startswith("check this machine's network, DNS and proxy")
    assert out.splitlines()[-1].startswith(
        f"{n} charts: 0 pulled, 0 already cached, {n} unavailable"
    )


def test_a_refused_connection_is_named_so(tmp_path):
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mirror = f"http://127.0.0.1:{port}"
    code, _, err, _ = hostile_pull(tmp_path, mirror)
    [line] = err.splitlines()
    assert code == 2 and line.startswith(f"error[charts.unreachable] repository={mirror}: ")
    assert f"index.yaml: 127.0.0.1:{port} refused the connection" in line, line


def test_a_version_the_mirror_lacks_names_the_versions_it_has(hostile, tmp_path):
    mirror = hostile(
        {"/index.yaml": answer(index_for("cert-manager-v0.0.1.tgz", version="v0.0.1"))}
    )
    code, _, err, _ = hostile_pull(tmp_path, mirror)
    lines = err.splitlines()
    [cert] = [line for line in lines if "component=cert-manager " in line]
    assert code == 2 and cert.startswith("error[charts.unavailable] ")
    assert (
        f'chart "cert-manager" version "{PIN[2]}" not found in the repository index; '
        "it has 1 version of cert-manager: v0.0.1" in cert
    ), cert
    [nfd] = [line for line in lines if "component=nfd " in line]
    assert "it lists no chart named node-feature-discovery" in nfd, nfd
