"""``gpucluster charts pull``: every chart the runtime stacks pin, fetched into the chart cache.

Pure Python (no cdktf). The charts are exactly the ``helm_release`` s Terraform installs
(:class:`~gpucluster.model.PlanNode` of kind ``chart``: repository, chart, version, with the
cluster file's mirror applied, :mod:`gpucluster.charts.mirrors`); each is pulled once into
:mod:`gpucluster.charts.chartcache`. ``render`` and ``lint`` then read it from there, offline.

An HTTP(S) chart repository is read here, with the standard library (:func:`fetch_http`): its
``index.yaml`` once per run (parsed by :func:`gpucluster.yamlsafe.load_untrusted`: libyaml's events,
no aliases, at most :data:`INDEX_EVENTS` nodes, within the deadline), within caps (:data:`INDEX_CAP`, :data:`ARCHIVE_CAP`,
:data:`UNPACKED_CAP`), a per-request timeout (:data:`REQUEST_TIMEOUT`) and one total deadline
(:class:`Deadline`, ``charts pull --timeout``); no redirect is followed and no archive is taken
from a host other than the repository's (:data:`REDIRECT_HOSTS` names the one upstream whose index
points elsewhere); the archive's digest, members, chart name and version are checked before it is
stored. Anything a repository sends that cannot be trusted is a :class:`PullError`
(``error[charts.pull]``); a chart version it does not hold is :class:`ChartNotFound`
(``error[charts.unavailable]``). An OCI registry is pulled with Helm's own client (PyPI
``helm-python-sdk``, ``helm_python.pull``) in a child process killed at the deadline
(:func:`fetch_oci`), so neither a silent registry nor a crash of Helm's Go runtime ends this one.

OCI registries are reached over HTTPS, except on a loopback address (``localhost``,
``127.0.0.0/8``, ``::1``), where plain HTTP is used -- the registries Docker treats as insecure
by default (Docker Engine API, ``RegistryServiceConfig.InsecureRegistryCIDRs``: "By default, local
registries (::1/128 and 127.0.0.0/8) are configured as insecure",
https://docs.docker.com/reference/api/engine/version/v1.57/schemas/RegistryServiceConfig/).
Registry logins come from Helm's registry configuration (``helm registry login``, ``az acr
login``); none is read from the cluster file.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import http.client
import io
import ipaddress
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, unquote, urljoin, urlsplit, urlunsplit

import yaml

from gpucluster.charts import chartcache
from gpucluster.charts.helmsdk import helm
from gpucluster.model import RuntimePlan
from gpucluster.yamlsafe import UntrustedYamlError, load_untrusted

PULL_FIX = (
    "the repository answered without this chart version: copy it into your mirror (`helm pull` it from the "
    "upstream `gpucluster recipe` names as its source, then `helm push` it to an OCI mirror, or add the archive "
    "to an HTTP mirror and run `helm repo index`), or name a mirror that holds it (charts.mirror or "
    "charts.mirrors in the cluster file, docs/cluster-file.md); render and lint also read a chart unpacked into a "
    "--charts folder"
)
"""The ``fix:`` of a chart version the repository answered it does not hold (``error[charts.unavailable]``);
an unreachable repository has :data:`UNREACHABLE_FIX`."""
PULL_ERROR_FIX = (
    "the repository sent what cannot be used, or did not answer in time: make it serve the chart as its "
    "index.yaml lists it (the archive on the repository's own host, its Chart.yaml naming that chart and version, "
    "its sha256 the index's digest), raise --timeout for a slow link, or name another mirror (charts.mirror or "
    "charts.mirrors in the cluster file, docs/cluster-file.md)"
)
"""The ``fix:`` of an ``error[charts.pull]`` line (:class:`PullError`)."""


@dataclass(frozen=True)
class PinnedChart:
    """One chart a runtime stack installs, as Terraform fetches it.

    Attributes:
        repository: where it is fetched from (the mirror, when the cluster file names one).
        chart / version: the chart name and pinned version.
        users: ``(cluster, release)`` of every release that installs it, in plan order.
    """

    repository: str
    chart: str
    version: str
    users: tuple[tuple[str, str], ...]


def pinned_charts(plans: Sequence[RuntimePlan]) -> list[PinnedChart]:
    """Every distinct ``(repository, chart, version)`` of the plans' ``chart`` releases, in order of
    first use (plan order, then release order)."""
    found: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for plan in plans:
        for node in plan.nodes:
            if node.kind == "chart" and node.repository:
                found.setdefault((node.repository, node.chart, node.version), []).append(
                    (plan.cluster.name, node.id)
                )
    return [
        PinnedChart(repo, chart, version, tuple(users))
        for (repo, chart, version), users in found.items()
    ]


def is_loopback(repository: str) -> bool:
    """Whether the host of ``repository`` is ``localhost`` or a loopback IP address."""
    host = urlsplit(repository).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ----------------------------------------------------------------------------- HTTP(S) repositories

INDEX_CAP = 32 * 1024 * 1024
"""Largest ``index.yaml`` read (bytes): the index of every chart of a large repository (Bitnami's,
about 20 MiB in 2024) fits; a longer answer is refused, not held in memory."""
INDEX_EVENTS = INDEX_CAP // 8
"""Most YAML nodes of an ``index.yaml`` (:func:`gpucluster.yamlsafe.load_untrusted`'s
``max_events``): a real index has one per 16 bytes or so (a generated 14.6 MB index in the
style of Bitnami's: 897,142), so a full-size one fits twice over, while what the parse builds
stays in proportion to :data:`INDEX_CAP` whatever the text (at most about 170 MB measured, for
an index of 2 million empty mappings). The parse runs within the total deadline: it is checked
every :data:`gpucluster.yamlsafe.CHECK_EVERY` nodes."""
ARCHIVE_CAP = 64 * 1024 * 1024
"""Largest chart archive (``.tgz``) read (bytes); unpacked it is held to :data:`UNPACKED_CAP`."""
UNPACKED_CAP = 100 * 1024 * 1024
"""Largest total of the files of an unpacked chart (bytes): Helm's chart loader's own limit
(``loader.MaxDecompressedChartSize``, 100 MiB, Helm source ``pkg/chart/loader``)."""
UNPACKED_FILE_CAP = 5 * 1024 * 1024
"""Largest single file of an unpacked chart (bytes): Helm's ``loader.MaxDecompressedFileSize`` (5 MiB)."""
MEMBER_CAP = 20_000
"""Most members (files and folders) of a chart archive."""
REQUEST_TIMEOUT = 30.0
"""Seconds one connect, or one read of a request, may wait for the server."""
DEFAULT_TIMEOUT = 300.0
"""Default total deadline of one ``charts pull`` (seconds; ``--timeout``), Helm's own default
for an operation (``helm install --timeout``, 5m0s)."""
REDIRECT_HOSTS: dict[str, tuple[str, ...]] = {
    "https://prometheus-community.github.io/helm-charts": (
        "github.com",
        "objects.githubusercontent.com",
        "release-assets.githubusercontent.com",
    ),
}
"""Upstream repositories whose ``index.yaml`` names chart archives on other hosts, and those hosts
(HTTPS only; redirects followed only among them): the prometheus-community index gives
``https://github.com/prometheus-community/helm-charts/releases/download/...`` URLs, which GitHub
answers with a redirect to its release-asset host. Every other repository -- every mirror --
serves its archives itself: a chart URL to another host or port, and any redirect, is refused."""
_MAX_REDIRECTS = 5


class PullError(Exception):
    """The repository answered, or failed to answer, in a way that gives no trustworthy chart: a
    deadline passed, an answer over its cap, a redirect or a chart URL to a host not allowed, a
    digest, name or version that does not match, an unsafe archive (``error[charts.pull]``)."""


class Unreachable(PullError):
    """The repository's host could not be reached: its name does not resolve, the connection is
    refused or reset, no route (``error[charts.unreachable]``: one line per host and cause)."""


UNREACHABLE_FIX = (
    "check this machine's network, DNS and proxy settings (HTTPS_PROXY, NO_PROXY) for that host, or "
    "name a mirror it can reach (charts.mirror or charts.mirrors in the cluster file, "
    "docs/cluster-file.md); offline, render and lint read charts unpacked into --charts folders"
)
"""The ``fix:`` of an ``error[charts.unreachable]`` line (:class:`Unreachable`)."""


def _unreachable_reason(exc: OSError, parts: SplitResult, what: str) -> str:
    """What went wrong reaching ``parts``' host, named by its cause (a DNS failure, a refused or
    reset connection), with the system's own words after it."""
    host = parts.hostname or ""
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    if isinstance(exc, socket.gaierror):
        cause = f"the host name {host} does not resolve (DNS)"
    elif isinstance(exc, ConnectionRefusedError):
        cause = f"{host}:{port} refused the connection (nothing listens there)"
    elif isinstance(exc, ConnectionResetError | BrokenPipeError):
        cause = f"{host}:{port} closed the connection before answering"
    else:
        cause = f"{host}:{port} cannot be reached"
    return f"{what}: {cause}: {first_line(exc)}"


class ChartNotFound(Exception):
    """The repository's index lists no such chart version, or the archive is not there (404)
    (``error[charts.unavailable]``)."""


def safe_url(url: str) -> str:
    """``url`` as it may be printed: no user info (``user:password@``), no query (a token)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "…" if parts.query else "", ""))


class Deadline:
    """A total deadline of ``seconds`` from now (monotonic clock)."""

    def __init__(self, seconds: float = DEFAULT_TIMEOUT) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (0 or less: passed)."""
        return self.end - time.monotonic()

    def expired_error(self) -> PullError:
        """The error of a passed deadline."""
        return PullError(f"the total deadline of {self.seconds:g} s (--timeout) passed")

    def per_request(self) -> float:
        """Seconds the next connect or read may wait: :data:`REQUEST_TIMEOUT`, less when the
        total deadline is nearer.

        Raises:
            PullError: the deadline has passed.
        """
        left = self.remaining()
        if left <= 0:
            raise self.expired_error()
        return min(REQUEST_TIMEOUT, left)


@dataclass
class PullSession:
    """What one ``charts pull`` run shares: its :class:`Deadline` and each repository's parsed
    index (fetched once per run; a failure to fetch it is kept too, so it is tried once)."""

    deadline: Deadline = field(default_factory=Deadline)
    indexes: dict[str, dict[str, Any] | Exception] = field(default_factory=dict)


def _connection(parts: SplitResult, timeout: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection for ``parts`` (through ``HTTPS_PROXY``/``HTTP_PROXY`` unless ``NO_PROXY``
    names the host, as :mod:`urllib.request` reads them) and the request target to send."""
    host, port = parts.hostname or "", parts.port
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and urllib.request.proxy_bypass(host):
        proxy = None
    proxy_headers: dict[str, str] = {}
    if proxy:
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        if p.username is not None:
            token = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
            proxy_headers["Proxy-Authorization"] = "Basic " + base64.b64encode(token).decode()
        via = (p.hostname or "", p.port or 8080)
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                *via, timeout=timeout, context=ssl.create_default_context()
            )
            conn.set_tunnel(host, port, headers=proxy_headers)
            return conn, target
        conn = http.client.HTTPConnection(*via, timeout=timeout)
        return conn, urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], target, "", ""))
    if parts.scheme == "https":
        return http.client.HTTPSConnection(
            host, port, timeout=timeout, context=ssl.create_default_context()
        ), target
    return http.client.HTTPConnection(host, port, timeout=timeout), target


def _host(parts: SplitResult) -> tuple[str, str, int | None]:
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _get_once(url: str, deadline: Deadline, cap: int, what: str) -> tuple[int, str, bytes]:
    """One GET of ``url``: ``(status, Location header, body)``; the body (of a 200) read in
    chunks, at most ``cap`` bytes, each read waiting at most :meth:`Deadline.per_request`, and a
    watchdog that closes the connection when the total deadline passes (a server that trickles
    its headers is cut too). A body shorter than its ``Content-Length`` (the server closed
    early) is a :class:`PullError`, never taken for the whole."""
    parts = urlsplit(url)
    conn, target = _connection(parts, deadline.per_request())
    expired = threading.Event()
    timer: threading.Timer | None = None
    try:
        conn.connect()
        sock = conn.sock

        def cut() -> None:
            expired.set()
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(max(deadline.remaining(), 0.0), cut)
        timer.daemon = True
        timer.start()
        conn.request(
            "GET", target, headers={"User-Agent": "gpucluster", "Accept-Encoding": "identity"}
        )
        sock.settimeout(deadline.per_request())
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, resp.getheader("Location") or "", b""
        length = resp.getheader("Content-Length")
        if length and length.strip().isdigit() and int(length) > cap:
            raise PullError(f"{what} is {int(length)} bytes, more than the {cap} read")
        chunks, total = [], 0
        # A server that ends the connection after the answer (HTTP/1.0, "Connection: close"):
        # http.client closes the socket itself once the body is read -- from CPython 3.13 on inside
        # the read1() that returns the last bytes -- so the loop ends there and never sets a
        # timeout on a closed socket (EBADF).
        while not resp.isclosed():
            if sock.fileno() != -1:
                sock.settimeout(deadline.per_request())
            chunk = resp.read1(1 << 16)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                raise PullError(f"{what} is longer than the {cap} bytes read")
            chunks.append(chunk)
        if expired.is_set():
            raise deadline.expired_error()
        if length and length.strip().isdigit() and total < int(length):
            # read1() returns b"" when the server closes early; the answer is not the whole
            raise PullError(f"{what}: the connection closed after {total} of {int(length)} bytes")
        return 200, "", b"".join(chunks)
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or deadline.remaining() <= 0:
            raise deadline.expired_error() from None
        if isinstance(exc, TimeoutError | socket.timeout):
            raise PullError(
                f"{what}: no answer within {REQUEST_TIMEOUT:g} s (one connect or read)"
            ) from None
        if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError):
            raise Unreachable(_unreachable_reason(exc, parts, what)) from None
        raise PullError(f"{what}: {type(exc).__name__}: {first_line(exc)}") from None
    finally:
        if timer is not None:
            timer.cancel()
        conn.close()


def http_get(
    url: str, deadline: Deadline, *, cap: int, what: str, hosts: Sequence[str] = ()
) -> bytes:
    """GET ``url`` within ``deadline``, at most ``cap`` bytes of body.

    TLS certificates are verified (the system's trust store, :func:`ssl.create_default_context`);
    proxies come from ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``. A redirect is followed only
    to an HTTPS URL on one of ``hosts`` (at most 5); every other is refused.

    Raises:
        ChartNotFound: a 404 answer.
        PullError: any other failure (deadline, cap, status, redirect, connection).
    """
    for _ in range(_MAX_REDIRECTS + 1):
        status, location, body = _get_once(url, deadline, cap, what)
        if status == 200:
            return body
        if status == 404:
            raise ChartNotFound(f"{what} is not there (HTTP 404)")
        if status in (301, 302, 303, 307, 308):
            target = urljoin(url, location)
            parts = urlsplit(target)
            if (parts.hostname or "").lower() not in hosts or parts.scheme != "https":
                raise PullError(
                    f"{what} redirects to {safe_url(target)}, which the repository settings do not name "
                    "(redirects are not followed)"
                )
            url = target
            continue
        raise PullError(f"{what} answered HTTP {status}")
    raise PullError(f"{what}: more than {_MAX_REDIRECTS} redirects")


def _index(repository: str, session: PullSession) -> dict[str, Any]:
    """The parsed ``index.yaml`` of ``repository`` (once per session)."""
    known = session.indexes.get(repository)
    if known is None:
        try:
            data = http_get(
                f"{repository.rstrip('/')}/index.yaml",
                session.deadline,
                cap=INDEX_CAP,
                what="index.yaml",
            )
            known = parse_index(data, session.deadline)
        except ChartNotFound:
            known = PullError("the repository has no index.yaml (HTTP 404): not a chart repository")
        except PullError as exc:
            known = exc
        session.indexes[repository] = known
    if isinstance(known, Exception):
        raise known
    return known


def parse_index(data: bytes, deadline: Deadline) -> dict[str, Any]:
    """A repository's ``index.yaml`` as a mapping with an ``entries`` mapping, parsed by
    :func:`gpucluster.yamlsafe.load_untrusted` (no aliases, at most :data:`INDEX_EVENTS` nodes),
    ``deadline`` checked as it goes.

    Raises:
        PullError: not YAML, refused by the parser, no ``entries`` mapping, or the deadline passed.
    """
    try:
        parsed = load_untrusted(data, max_events=INDEX_EVENTS, check=deadline.per_request)
    except UntrustedYamlError as exc:
        raise PullError(f"index.yaml is not accepted: {first_line(exc)}") from None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("entries"), dict):
        raise PullError("index.yaml has no 'entries' mapping")
    return parsed


def _same_version(a: str, b: str) -> bool:
    """``1.2.3`` and ``v1.2.3`` are one version (Helm compares parsed semantic versions)."""
    return a == b or a.removeprefix("v") == b.removeprefix("v")


def fetch_http(
    repository: str, chart: str, version: str, folder: Path, session: PullSession
) -> None:
    """Fetch ``chart`` ``version`` from the HTTP(S) chart repository and unpack it into
    ``folder/<chart>/`` (Helm's chart repository layout: "The Chart Repository Guide",
    https://helm.sh/docs/topics/chart_repository/).

    Reads ``index.yaml`` (once per session, at most :data:`INDEX_CAP` bytes), takes the entry of
    that version, downloads its first URL (relative URLs against the repository; an absolute one
    must be on the repository's host and port, or a :data:`REDIRECT_HOSTS` host of it), at most
    :data:`ARCHIVE_CAP` bytes, checks the entry's ``digest`` (sha256 of the archive) when given,
    unpacks it safely (:func:`unpack_chart`) and checks that its ``Chart.yaml`` is that chart and
    version.

    Raises:
        ChartNotFound: no such chart version in the index, or its archive is not there.
        PullError: everything else (see :class:`PullError`).
    """
    index = _index(repository, session)
    entries = index["entries"].get(chart)
    entry = next(
        (
            e
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, dict) and _same_version(str(e.get("version", "")), version)
        ),
        None,
    )
    if entry is None:
        listed = [
            str(e.get("version"))
            for e in (entries if isinstance(entries, list) else [])
            if isinstance(e, dict) and e.get("version") is not None
        ]
        has = (
            f"; it has {len(listed)} version{'' if len(listed) == 1 else 's'} of {chart}: "
            + ", ".join(listed[:10])
            + (", ..." if len(listed) > 10 else "")
            if listed
            else f"; it lists no chart named {chart}"
        )
        raise ChartNotFound(
            f'chart "{chart}" version "{version}" not found in the repository index{has}'
        )
    urls = entry.get("urls")
    if not isinstance(urls, list) or not urls or not isinstance(urls[0], str) or not urls[0]:
        raise PullError(f"the index entry of {chart} {version} names no archive URL")
    base = urlsplit(repository)
    url = urljoin(repository.rstrip("/") + "/", urls[0])
    parts = urlsplit(url)
    extra = REDIRECT_HOSTS.get(repository.rstrip("/"), ())
    if _host(parts) != _host(base) and not (
        parts.scheme == "https" and (parts.hostname or "").lower() in extra
    ):
        raise PullError(
            f"the index sends {chart} {version} to {safe_url(url)}, a host the repository settings do not "
            f"name (archives must come from {base.hostname}{f':{base.port}' if base.port else ''})"
        )
    data = http_get(
        url, session.deadline, cap=ARCHIVE_CAP, what=f"archive {safe_url(url)}", hosts=extra
    )
    digest = entry.get("digest")
    if digest is not None and digest != "":  # Helm checks a digest only when the entry has one
        got = hashlib.sha256(data).hexdigest()
        if not isinstance(digest, str):  # unquoted digits: YAML read a number (all zeros: 0)
            raise PullError(
                f"the index gives {chart} {version} the digest {str(digest)[:80]}, a YAML "
                f"{type(digest).__name__}, not a sha256 text (the archive's is {got})"
            )
        if digest.lower().removeprefix("sha256:") != got:
            raise PullError(
                f"archive of {chart} {version} has sha256 {got}, the index says {digest[:80]}"
            )
    unpack_chart(data, folder, chart)
    check_chart_yaml(folder / chart / "Chart.yaml", chart, version)


def unpack_chart(data: bytes, folder: Path, chart: str) -> None:
    """Unpack a chart archive (``.tgz``) into ``folder``, read as a stream.

    Every member must be a regular file or a folder below ``<chart>/`` (no absolute path, no
    ``..``, no link, device or FIFO), at most :data:`MEMBER_CAP` members, each file at most
    :data:`UNPACKED_FILE_CAP` and all at most :data:`UNPACKED_CAP` bytes (a decompression bomb
    stops at the cap). Files are written 0600, folders 0700, never through a link.

    Raises:
        PullError: an unsafe or over-large archive, or one that is not a gzip tar.
    """
    total = count = 0
    try:
        # gzip read by the gzip module, the tar as a stream of it (tarfile's own "r|gz" misreads a
        # gzip header with an extra field, which Helm writes: CPython issue "tarfiles can't open tgz files
        # with gzip features like FEXTRA & FCOMMENT when mode='r|*'", https://github.com/python/cpython/issues/107398)
        with (
            gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped,
            tarfile.open(fileobj=unzipped, mode="r|") as tar,
        ):
            for member in tar:
                count += 1
                if count > MEMBER_CAP:
                    raise PullError(f"the archive has more than {MEMBER_CAP} members")
                name = member.name
                parts = name.replace("\\", "/").split("/")
                if (
                    name.startswith("/")
                    or ".." in parts
                    or parts[0] != chart
                    or any(ch in name for ch in "\x00")
                ):
                    raise PullError(
                        f"the archive holds {name!r}, outside the chart folder {chart}/"
                    )
                if not (member.isfile() or member.isdir()):
                    raise PullError(
                        f"the archive holds {name!r}, which is neither a file nor a folder (links and devices are refused)"
                    )
                target = folder.joinpath(*[p for p in parts if p not in ("", ".")])
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True, mode=0o700)
                    continue
                if member.size > UNPACKED_FILE_CAP:
                    raise PullError(
                        f"the archive's {name!r} is larger than {UNPACKED_FILE_CAP} bytes"
                    )
                total += member.size
                if total > UNPACKED_CAP:
                    raise PullError(f"the unpacked archive is larger than {UNPACKED_CAP} bytes")
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                source = tar.extractfile(member)
                if source is None:
                    raise PullError(f"the archive's {name!r} cannot be read")
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as out, source:
                    shutil.copyfileobj(source, out, 1 << 16)
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
        if isinstance(exc, FileExistsError):
            raise PullError(f"the archive holds {exc.filename} twice") from None
        raise PullError(
            f"the archive is not a chart archive (gzip tar): {first_line(exc)}"
        ) from None


def check_chart_yaml(path: Path, chart: str, version: str) -> None:
    """The unpacked ``Chart.yaml`` names ``chart`` at ``version``.

    Raises:
        PullError: it is missing, not YAML, or names another chart or version.
    """
    try:
        meta = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PullError(
            f"the archive's {chart}/Chart.yaml cannot be read: {first_line(exc)}"
        ) from None
    name = meta.get("name") if isinstance(meta, dict) else None
    got = str(meta.get("version", "")) if isinstance(meta, dict) else ""
    if name != chart or not _same_version(got, version):
        raise PullError(
            f"the archive holds chart {str(name)[:80]} {got[:80]}, not {chart} {version} as asked"
        )


def fetch_chart(
    repository: str, chart: str, version: str, folder: Path, session: PullSession | None = None
) -> None:
    """Pull ``chart`` at ``version`` from ``repository`` and unpack it into ``folder/<chart>/``.

    ``oci://host/path`` pulls ``oci://host/path/<chart>:<version>`` with Helm's client in a child
    process (:func:`fetch_oci`); ``https://`` / ``http://`` reads the repository's ``index.yaml``
    (:func:`fetch_http`). Either way the unpacked ``Chart.yaml`` must name that chart and version.

    Raises:
        ChartNotFound / PullError: the chart version cannot be had, or what came cannot be used.
        OciError: Helm's client reported an error (the registry or the chart version cannot be had).
    """
    session = session or PullSession()
    if repository.startswith("oci://"):
        fetch_oci(repository, chart, version, folder, session.deadline)
        check_chart_yaml(folder / chart / "Chart.yaml", chart, version)
    else:
        fetch_http(repository, chart, version, folder, session)


class OciError(Exception):
    """Helm's OCI client reported an error (its first line) (``error[charts.unavailable]``)."""


_OCI_ERROR = 3
"""Exit status of the :func:`_oci_child` process when Helm's client raised an error."""
_STDERR_TAIL = 64 * 1024
"""Bytes of the child's stderr read back (the end of a Go runtime's dump is enough)."""


def fetch_oci(repository: str, chart: str, version: str, folder: Path, deadline: Deadline) -> None:
    """``helm pull oci://<repository>/<chart> --version <version> --untar`` into ``folder``, in a
    child Python process running Helm's client (PyPI ``helm-python-sdk``), killed when
    ``deadline`` passes: a crash of Helm's Go runtime, or a registry that never answers, is one
    error, never the end of this process. Plain HTTP only for a loopback registry
    (:func:`is_loopback`); logins from Helm's registry configuration (the child inherits the
    environment).

    Raises:
        GpuclusterError: the ``render`` extra (helm-python-sdk) is not installed.
        OciError: Helm's client raised an error (first line of its message).
        PullError: the deadline passed, or the child ended another way (a signal, a crash).
    """
    helm()  # the extra's absence is one input error here, not a failed child
    left = deadline.remaining()
    if left <= 0:
        raise deadline.expired_error()
    argv = [
        sys.executable,
        "-c",
        "import sys; from gpucluster.charts.pull import _oci_child; sys.exit(_oci_child(sys.argv[1:]))",
        f"{repository.rstrip('/')}/{chart}",
        version,
        str(folder),
        "1" if is_loopback(repository) else "0",
    ]
    with tempfile.TemporaryFile() as errors:
        try:
            done = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                timeout=left,
            )
        except subprocess.TimeoutExpired:
            raise deadline.expired_error() from None
        size = errors.seek(0, os.SEEK_END)
        errors.seek(max(0, size - _STDERR_TAIL))
        tail = errors.read().decode("utf-8", "replace").strip()
    if done.returncode == 0:
        return
    if done.returncode == _OCI_ERROR and tail:
        raise OciError(tail.splitlines()[-1])
    how = (
        f"was killed by signal {-done.returncode}"
        if done.returncode < 0
        else f"exited with status {done.returncode}"
    )
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    raise PullError(
        f"Helm's OCI client {how}" + (f" ({safe_url(last.strip())[:200]})" if last else "")
    )


_UNREACHABLE_WORDS = (
    "connection refused",
    "no such host",
    "network is unreachable",
    "no route to host",
)


def _oci_transport_failure(message: str) -> tuple[str, str] | None:
    """``(kind, reason)`` when Helm's OCI error is a request that got no usable answer -- Go's
    ``Get "URL": CAUSE`` (``EOF``, a refused connection, a malformed response) -- else None (the
    registry answered, e.g. ``not found``). The reason names the registry's host, not the URL,
    so the charts of one registry share it (one line for all of them)."""
    found = re.search(r'(?:Get|Head|Post) "([^"]+)": (.+)$', message.strip().splitlines()[-1])
    if found is None:
        return None
    host = urlsplit(found[1]).netloc.rpartition("@")[2]
    cause = found[2].strip()
    if any(w in cause.lower() for w in _UNREACHABLE_WORDS):
        return "charts.unreachable", f"the registry {host} cannot be reached: {cause}"
    return "charts.pull", f"the registry {host} did not answer: {cause}"


def _oci_child(argv: Sequence[str]) -> int:
    """The child process of :func:`fetch_oci`: ``REF VERSION FOLDER PLAIN_HTTP(0/1)``; 0 when
    pulled, :data:`_OCI_ERROR` with Helm's error as the last stderr line."""
    ref, version, folder, plain = argv
    try:
        helm().pull(
            ref,
            version=version,
            untar=True,
            untar_dir=folder,
            destination=folder,
            plain_http=plain == "1",
        )
    except Exception as exc:  # HelmError and its kinds: the parent reports the first line
        sys.stderr.write(first_line(exc) + "\n")
        return _OCI_ERROR
    return 0


@dataclass(frozen=True)
class PullResult:
    """What happened to one :class:`PinnedChart`: ``how`` is ``cached`` (already there), ``pulled``
    or ``failed``; ``path`` the cached chart folder (None when failed); ``reason`` why it failed;
    ``kind`` the error id of a failure: ``charts.unavailable`` (the repository does not hold that
    chart version, or cannot be had at all), ``charts.unreachable`` (its host cannot be reached:
    :class:`Unreachable`) or ``charts.pull`` (what it sent cannot be trusted, or it did not answer
    in time: :class:`PullError`)."""

    pinned: PinnedChart
    how: str
    path: Path | None = None
    reason: str = ""
    kind: str = "charts.unavailable"


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def pull_one(
    pinned: PinnedChart | tuple[str, str, str],
    cache_dir: Path,
    *,
    refresh: bool = False,
    session: PullSession | None = None,
) -> PullResult:
    """Make sure one chart is in the cache (:func:`pull_all` for each).

    Args:
        pinned: the chart, or ``(repository, chart, version)``.
        refresh: pull again even when a trusted entry is there.
        session: the run's deadline and fetched indexes (default: a new one, :data:`DEFAULT_TIMEOUT`).

    Never raises for a chart that cannot be had: the result says why (``how == "failed"``); the
    cache is then as it was (the chart is fetched into a temporary folder, renamed at the end).
    """
    if not isinstance(pinned, PinnedChart):
        pinned = PinnedChart(*pinned, users=())
    repo, chart, version = pinned.repository, pinned.chart, pinned.version
    if not refresh:
        found = chartcache.lookup(cache_dir, repo, chart, version)
        if found is not None:
            return PullResult(pinned, "cached", found)
    session = session or PullSession()
    try:
        path = chartcache.store(
            cache_dir,
            repo,
            chart,
            version,
            lambda folder: fetch_chart(repo, chart, version, folder, session),
        )
    except PullError as exc:
        kind = "charts.unreachable" if isinstance(exc, Unreachable) else "charts.pull"
        return PullResult(pinned, "failed", reason=first_line(exc), kind=kind)
    except OciError as exc:
        transport = _oci_transport_failure(str(exc))
        if transport is not None:  # the registry never answered: a cause all its charts share
            return PullResult(pinned, "failed", reason=transport[1], kind=transport[0])
        return PullResult(pinned, "failed", reason=first_line(exc))
    except Exception as exc:  # HelmError, ChartCacheError: reported with the chart, never raised
        from gpucluster.errors import GpuclusterError

        if isinstance(exc, GpuclusterError):
            raise
        return PullResult(pinned, "failed", reason=first_line(exc))
    return PullResult(pinned, "pulled", path)


def pull_all(
    plans: Sequence[RuntimePlan],
    cache_dir: Path,
    *,
    refresh: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[PullResult]:
    """:func:`pull_one` for every :func:`pinned_charts` of ``plans``, in that order, sharing one
    :class:`PullSession`: ``timeout`` seconds in all (a chart left when it has passed fails with
    the deadline's error), each repository's index read once."""
    session = PullSession(Deadline(timeout))
    return [pull_one(p, cache_dir, refresh=refresh, session=session) for p in pinned_charts(plans)]
