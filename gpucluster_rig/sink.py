"""The egress sink: where the rig's API server sends every connection into the cluster network.

The API server dials Service ClusterIPs and pod IPs for admission and conversion webhooks,
aggregated APIs (an ``APIService`` such as prometheus-adapter's ``v1beta1.custom.metrics.k8s.io``)
and ``pods/proxy``/``services/proxy``. On the rig those addresses lead nowhere this machine may
reach, so the API server's ``--egress-selector-config-file`` routes its ``cluster`` egress as HTTP
CONNECT over a Unix socket to :class:`EgressSink`, which answers ``403`` to every request and
records the target (Kubernetes docs, "Set up Konnectivity service" and the
``EgressSelectorConfiguration`` v1beta1 API: ``proxyProtocol: HTTPConnect``, ``transport.uds``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

EGRESS_CONFIG = """apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: {socket}
"""
"""The API server's egress selection: only ``cluster`` traffic; ``controlplane`` and ``etcd`` stay
direct (loopback)."""


class EgressSink:
    """A Unix-socket HTTP CONNECT proxy that refuses every request and records its target.

    Args:
        folder: where ``egress.sock`` and ``egress.log`` (one JSON object a line:
            ``{"time": <unix s>, "target": "10.96.0.12:443"}``) are written.

    ``attempts`` is the list of targets seen so far (``host:port`` strings), in order.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket_path = folder / "egress.sock"
        self.log_path = folder / "egress.log"
        self.attempts: list[str] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def config(self) -> str:
        """The ``EgressSelectorConfiguration`` document pointing at this sink."""
        return EGRESS_CONFIG.format(socket=self.socket_path)

    def start(self) -> None:
        """Listen on the socket (mode 0600) and serve in a daemon thread."""
        if self.socket_path.exists():
            self.socket_path.unlink()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        server.listen(64)
        self._server = server
        self._thread = threading.Thread(target=self._serve, name="egress-sink", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._refuse, args=(conn,), daemon=True).start()

    def _refuse(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data and len(data) < 16384:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            first = data.split(b"\r\n", 1)[0].decode("latin-1")
            parts = first.split()
            target = (
                parts[1]
                if len(parts) >= 2 and parts[0] == "CONNECT"
                else f"(not CONNECT: {first[:80]!r})"
            )
            with self._lock:
                self.attempts.append(target)
                with self.log_path.open("a", encoding="utf-8") as log:
                    log.write(json.dumps({"time": round(time.time(), 3), "target": target}) + "\n")
            try:
                conn.sendall(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                    b"the gpucluster rehearsal rig sends no traffic into the cluster network\n"
                )
            except OSError:
                pass

    def stop(self) -> None:
        """Close the listening socket (the serving thread ends)."""
        if self._server is not None:
            self._server.close()
            self._server = None
