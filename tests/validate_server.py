"""A local Kubernetes API stand-in for the live path of validate: answers GET list/get requests of
the core and ``/apis`` groups from a list of objects, on 127.0.0.1 only, and records every
request. Bearer-token auth like an API server (401 without it); ``forbidden`` paths answer 403.
Bounded: it serves until :meth:`FakeApi.close` and each request is answered once."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gpucluster.live.snapshot import BUILTIN_KINDS

TOKEN = "gpucluster-test-token"


def _plurals(items: list[dict[str, Any]]) -> dict[str, tuple[str, str, str]]:
    """``"<api prefix>/<plural>"`` -> (apiVersion, kind, scope)."""
    out = {}
    for (api_version, kind), (plural, scope) in BUILTIN_KINDS.items():
        out[f"{'/api/v1' if api_version == 'v1' else '/apis/' + api_version}/{plural}"] = (
            api_version,
            kind,
            scope,
        )
    for crd in items:
        if crd["kind"] != "CustomResourceDefinition":
            continue
        spec = crd["spec"]
        for v in spec.get("versions") or []:
            out[f"/apis/{spec['group']}/{v['name']}/{spec['names']['plural']}"] = (
                f"{spec['group']}/{v['name']}",
                spec["names"]["kind"],
                spec["scope"],
            )
    return out


class FakeApi:
    """``FakeApi(lambda: items)``: the objects served are ``items()`` at each request (so a test
    can change the cluster between readings). ``requests``: ``(method, path)`` of every request."""

    def __init__(
        self, items: Callable[[], list[dict[str, Any]]], *, forbidden: tuple[str, ...] = ()
    ):
        self.items = items
        self.forbidden = forbidden
        self.requests: list[tuple[str, str]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                api.requests.append(("GET", self.path))
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, {"kind": "Status", "code": 401})
                path = self.path.split("?")[0]
                if any(path.startswith(p) for p in api.forbidden):
                    return self._send(403, {"kind": "Status", "code": 403})
                code, body = api.answer(path)
                self._send(code, body)

            def do_POST(self):  # noqa: N802
                api.requests.append(("POST", self.path))
                self._send(405, {"kind": "Status", "code": 405})

            do_PUT = do_PATCH = do_DELETE = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str) -> tuple[int, Any]:
        items = self.items()
        plurals = _plurals(items)
        parts = path.rstrip("/").split("/")
        # /api/v1/namespaces/<ns> (get one namespace)
        if len(parts) == 5 and parts[1:4] == ["api", "v1", "namespaces"]:
            for o in items:
                if o["kind"] == "Namespace" and o["metadata"]["name"] == parts[4]:
                    return 200, o
            return 404, {"kind": "Status", "code": 404}
        namespace = None
        if "namespaces" in parts[:-1]:
            i = parts.index("namespaces")
            namespace = parts[i + 1]
            parts = parts[:i] + parts[i + 2 :]
        key = "/".join(parts)
        if key not in plurals:
            return 404, {"kind": "Status", "code": 404}
        api_version, kind, _scope = plurals[key]
        found = [
            {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
            for o in items
            if o["apiVersion"] == api_version
            and o["kind"] == kind
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
        return 200, {
            "apiVersion": api_version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": "1"},
            "items": found,
        }

    def kubeconfig(self, path: Path, *, exec_command: list[str] | None = None) -> Path:
        user: dict[str, Any] = {"token": TOKEN}
        if exec_command:
            user = {
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1beta1",
                    "command": exec_command[0],
                    "args": exec_command[1:],
                    "interactiveMode": "Never",
                }
            }
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": user}],
            "contexts": [
                {"name": "test", "context": {"cluster": "test", "user": "test"}},
                {"name": "other", "context": {"cluster": "test", "user": "test"}},
            ],
        }
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class HostileApi:
    """A bad API server on 127.0.0.1 for the hostile-server tests: every GET gets the same bad
    answer, chosen by ``mode``:

    * ``"silent"``: a listening socket that never accepts (connections wait in its backlog);
    * ``"sleep"``: reads the request, then answers nothing until closed;
    * ``"trickle"``: a 200 whose body comes one byte every 0.5 s;
    * ``"cut"``: a 200 announcing 4096 bytes, 40 sent, then the connection is closed;
    * ``"huge"``: a 200 body of ``huge_bytes`` bytes (the client's bound is below it);
    * ``"status"``: ``status`` with a JSON Status body;
    * ``"body"``: a 200 whose body is ``body`` (bytes), as ``content_type``.

    Bounded: each answer stops after at most 120 steps or when :meth:`close` is called."""

    def __init__(
        self,
        mode: str,
        *,
        body: bytes = b"",
        content_type: str = "application/json",
        status: int = 500,
        huge_bytes: int = 65 * 1024 * 1024,
    ):
        import socket

        self.mode = mode
        self.closed = threading.Event()
        self.requests: list[str] = []
        api = self
        if mode == "silent":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(64)
            self.port = self.sock.getsockname()[1]
            self.server = None
            return

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _head(self, code: int, length: int, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.flush()

            def do_GET(self):  # noqa: N802
                api.requests.append(self.path)
                try:
                    self._answer()
                except OSError:  # the client went away (the deadline stopped it)
                    pass

            def _answer(self) -> None:
                if api.mode == "sleep":
                    api.closed.wait(60)
                elif api.mode == "trickle":
                    self._head(200, 10**6)
                    for _ in range(120):
                        if api.closed.wait(0.5):
                            break
                        self.wfile.write(b" ")
                        self.wfile.flush()
                elif api.mode == "cut":
                    self._head(200, 4096)
                    self.wfile.write(b'{"kind": "NodeList", "items": [{"metadata": ')
                    self.wfile.flush()
                    self.close_connection = True
                elif api.mode == "huge":
                    self._head(200, huge_bytes)
                    chunk = b" " * (1024 * 1024)
                    for _ in range(min(huge_bytes // len(chunk), 120)):
                        if api.closed.is_set():
                            break
                        self.wfile.write(chunk)
                elif api.mode == "status":
                    data = json.dumps({"kind": "Status", "code": status}).encode()
                    self._head(status, len(data))
                    self.wfile.write(data)
                else:
                    self._head(200, len(body), content_type)
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path, *, user: dict[str, Any] | None = None) -> Path:
        """A kubeconfig naming this server; ``user`` (default: no credential, so no token goes
        over plain http)."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": user or {}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }
        path.write_text(json.dumps(doc), encoding="utf-8")
        return path

    def close(self) -> None:
        self.closed.set()
        if self.server is None:
            self.sock.close()
            return
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
