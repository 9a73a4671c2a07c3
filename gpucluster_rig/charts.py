"""A chart repository on 127.0.0.1 for the rig, built from unpacked upstream charts.

The rig synthesizes the runtime stack with ``charts.mirror`` pointing here (an HTTP chart
repository: ``index.yaml`` and ``<chart>-<version>.tgz``; Helm documentation, "The Chart
Repository Guide"), so the stack is the user's own but every chart comes from loopback.

Where the charts come from: a folder of unpacked charts (``--charts DIR``; this repository's tests
use ``../shared/reference/charts``), each ``<folder>/Chart.yaml`` naming the chart and version.
For every chart and version the stack pins, :meth:`ChartRepo.add` takes, in order: a folder of
that name and version (``exact``); a folder of that name (``Chart.yaml`` name or folder name) at another version, packaged
with the pinned name and version (``re-versioned``, the source folder and version reported); or, when none has that name, an
empty chart of that name and version (``stub``: it installs nothing, and the report counts it
apart).

Faults, for failure tests: :meth:`ChartRepo.withhold` takes a chart out of the index (the mirror
does not serve it: Helm's ``not found in ... repository``); :attr:`ChartRepo.hang` makes every
request accepted and never answered (a mirror that hangs) until it is cleared or the repository
stops.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpucluster_rig.build import RigError


@dataclass
class Served:
    """One chart the repository serves."""

    chart: str
    version: str
    how: str  # exact | re-versioned | stub
    source: str  # the folder's name and version, or "" for a stub

    def as_dict(self) -> dict[str, str]:
        return {
            "chart": self.chart,
            "version": self.version,
            "how": self.how,
            "source": self.source,
        }


class _Quiet(http.server.SimpleHTTPRequestHandler):
    repo: ChartRepo | None = None

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def handle_one_request(self) -> None:
        """Answer, or -- while the repository :attr:`ChartRepo.hang` s -- hold the accepted
        connection without a byte until the fault is cleared or the repository stops."""
        repo = self.repo
        if repo is not None and repo.hang:
            repo.held += 1
            while repo.hang and repo._server is not None:
                time.sleep(0.2)
            self.close_connection = True
            return
        super().handle_one_request()


class _Server(http.server.ThreadingHTTPServer):
    """The repository's server: a client that goes away mid-answer (Helm stopped by Ctrl-C or its
    timeout: a broken pipe, a reset) is no error of the repository and prints nothing; any other
    failure of a request is appended to ``errors_log`` instead of the rehearsal's stderr."""

    errors_log: Path | None = None

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError) or self.errors_log is None:
            return
        with self.errors_log.open("a", encoding="utf-8") as log:
            log.write(f"request from {client_address}:\n{traceback.format_exc()}\n")


class ChartRepo:
    """The repository: :meth:`add` charts, :meth:`index`, then :meth:`serve` on 127.0.0.1.

    Args:
        folder: where packages and ``index.yaml`` are written (fresh).
        helm: the rig's ``helm`` binary (``helm package``, ``helm repo index``).
        sources: the folder of unpacked charts, or None (every chart a stub).
        env: the environment Helm runs in.
    """

    def __init__(self, folder: Path, helm: Path, sources: Path | None, env: dict[str, str]) -> None:
        self.folder = folder
        self.helm = helm
        self.env = env
        self.served: dict[tuple[str, str], Served] = {}
        self._server: _Server | None = None
        self.port = 0
        self.hang = False
        """While True, every request is accepted and never answered (a fault for tests)."""
        self.held = 0
        """How many requests a hang held."""
        self.withheld: set[str] = set()
        """Charts :meth:`withhold` took out of the index."""
        folder.mkdir(parents=True, exist_ok=True)
        self._sources: dict[str, list[tuple[str, Path]]] = {}
        if sources is not None:
            for chart_yaml in sorted(sources.glob("*/Chart.yaml")):
                meta = yaml.safe_load(chart_yaml.read_text(encoding="utf-8")) or {}
                version = str(meta.get("version"))
                names = {str(meta.get("name")), chart_yaml.parent.name}
                if chart_yaml.parent.name.endswith("-" + version):  # <chart>-<version> folders
                    names.add(chart_yaml.parent.name[: -len(version) - 1])
                for name in names:
                    self._sources.setdefault(name, []).append((version, chart_yaml.parent))

    def start(self) -> str:
        """Listen on 127.0.0.1 (a free port) in a daemon thread; the repository URL."""
        handler = functools.partial(
            type("_Handler", (_Quiet,), {"repo": self}), directory=str(self.folder)
        )
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.errors_log = self.folder.parent / "chart-repo-errors.log"
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="chart-repo", daemon=True).start()
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _helm(self, *args: str) -> None:
        proc = subprocess.run(
            [str(self.helm), *args], capture_output=True, text=True, env=self.env, timeout=300
        )
        if proc.returncode != 0:
            raise RigError(
                "charts", f"helm {args[0]}: {proc.stderr.strip()[-300:]}", "see the message"
            )

    def add(self, chart: str, version: str) -> Served:
        """Package ``chart`` at ``version`` into the repository (see the module docstring)."""
        key = (chart, version)
        if key in self.served:
            return self.served[key]
        candidates = self._sources.get(chart, [])
        bare = version.lstrip("v")
        exact = next((p for v, p in candidates if v.lstrip("v") == bare), None)
        if exact is not None:
            source, how = exact, "exact"
        elif candidates:
            # the folder named exactly like the chart (the catalog's pin), else the newest
            named = [c for c in candidates if c[1].name == chart]
            v, source = (named or sorted(candidates))[-1]
            how = f"re-versioned from {v}"
        else:
            source, how = self._stub(chart, version), "stub"
        staged = self.folder.parent / "staged" / f"{chart}-{version}"
        if staged.exists():
            shutil.rmtree(staged)
        shutil.copytree(source, staged, symlinks=False)
        meta = yaml.safe_load((staged / "Chart.yaml").read_text(encoding="utf-8")) or {}
        # a nearest source takes the pinned name and version; a chart whose appVersion follows its
        # version (the DRA driver's templates build the image tag from it) takes that too
        source_version = str(meta.get("version", "")).lstrip("v")
        if how != "exact" and str(meta.get("appVersion", "")).lstrip("v") == source_version:
            prefix = "v" if str(meta["appVersion"]).startswith("v") else ""
            meta["appVersion"] = prefix + version.lstrip("v")
        meta["name"], meta["version"] = chart, version
        (staged / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
        self._helm("package", str(staged), "--destination", str(self.folder))
        served = Served(
            chart,
            version,
            "exact" if how == "exact" else ("stub" if how == "stub" else "re-versioned"),
            "" if how == "stub" else f"{source.name} ({how})",
        )
        self.served[key] = served
        return served

    def _stub(self, chart: str, version: str) -> Path:
        stub = self.folder.parent / "stubs" / chart
        if stub.exists():
            shutil.rmtree(stub)
        (stub / "templates").mkdir(parents=True)
        (stub / "Chart.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v2",
                    "name": chart,
                    "version": version,
                    "description": "rig stub: no source at hand",
                }
            )
        )
        return stub

    def index(self) -> None:
        """Write ``index.yaml`` for every package (``helm repo index --url``) but the charts
        :meth:`withhold` took out."""
        self._helm("repo", "index", str(self.folder), "--url", self.url)
        if self.withheld:
            path = self.folder / "index.yaml"
            doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            entries = doc.get("entries") or {}
            for chart in self.withheld:
                entries.pop(chart, None)
            path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")

    def withhold(self, chart: str, withheld: bool = True) -> None:
        """Stop (``withheld``) or resume serving every version of ``chart``: the index is
        rewritten without it (its package stays on disk, unlisted, as in a mirror that lacks it)."""
        (self.withheld.add if withheld else self.withheld.discard)(chart)
        self.index()
