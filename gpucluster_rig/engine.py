"""Apply and destroy a synthesized runtime stack's ``helm_release`` resources with the Helm CLI.

The rig would run ``terraform apply`` with the real ``hashicorp/helm`` provider, but the Go module
proxy does not serve terraform-provider-helm at any 3.x commit (docs/rehearse.md, "What the rig
cannot do yet"). Until it does, this engine reads the stack exactly as cdktf wrote it
(``cdk.tf.json``) and does what the provider does with each resource, through the Helm library
version the provider links (``helm`` v3.18.4, built by :mod:`gpucluster_rig.build`):

* ``helm_release`` -> ``helm upgrade --install`` with the resource's ``chart``, ``repository``,
  ``version``, ``namespace`` (``create_namespace``), ``values`` (one ``-f`` file each, in order),
  ``set`` (``--set-string`` for ``type = "string"``, else ``--set``), ``description``,
  ``timeout``, ``wait`` (Helm's legacy wait, as the provider's Helm v3 library does; default
  true), ``wait_for_jobs`` and ``postrender`` (``--post-renderer`` with each of its ``args`` as
  ``--post-renderer-args``; a ``binary_path`` without a ``/`` is looked up on ``PATH`` as the
  provider does, then beside this interpreter, where ``pip`` installs ``gpucluster``); a local
  chart path is read relative to the stack's folder;
* ``data.helm_template`` -> ``helm show crds`` of the same chart (the provider's ``crds``
  attribute is the chart's ``CRDObjects()``; the engine keeps them as one element);
* the walk follows ``depends_on`` with Terraform's default parallelism (10), and destroy runs in
  the reverse order (``helm uninstall --wait``; ``pre-delete`` hooks -- our teardown guards -- run);
* like Terraform, the engine keeps a **state** (``state.json`` in its folder): each release's
  applied configuration (``name``, ``namespace``, ``chart``, ``repository``, ``version``, the
  evaluated ``values`` and ``set``, ``description``, ``timeout``, ``wait``, ``wait_for_jobs``,
  ``create_namespace``, ``lifecycle``). A later apply upgrades only a release whose configuration
  differs from its state, that failed last time (Terraform taints it), or that Helm no longer has
  deployed (the provider reads the release back); every other release is left alone (its Helm
  revision stays), as ``terraform apply`` leaves a resource with no planned change;
* each ``helm`` is bounded by the release's ``timeout`` (default 300 s): reading the chart,
  applying and waiting together. A chart repository that accepts and never answers would keep
  Helm waiting (its HTTP client allows 120 s a request); the engine stops it at the deadline
  (SIGTERM, then SIGKILL) and the release fails with one line naming the command, the timeout and
  the chart's source -- never a hang;
* the only expressions evaluated are the ones gpucluster writes: ``base64gzip``/``sha256``/
  ``length`` of ``join(sep, data.helm_template.<id>.crds)``, ``var.<name>`` (its default) and
  the ``$${``/``%%{`` escapes; anything else is refused by name (:class:`RigError` ``rig.engine``).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpucluster_rig.build import RigError

PARALLELISM = 10
"""Terraform's default ``-parallelism``."""

KNOWN_RELEASE_KEYS = frozenset(
    {
        "//",
        "name",
        "namespace",
        "chart",
        "repository",
        "version",
        "values",
        "set",
        "create_namespace",
        "description",
        "timeout",
        "wait",
        "wait_for_jobs",
        "depends_on",
        "lifecycle",
        "postrender",
    }
)
"""``helm_release`` arguments the engine carries out; a stack with another is refused."""

_JOIN = r'join\("(?P<sep>(?:[^"\\]|\\.)*)", data\.helm_template\.(?P<data>[A-Za-z0-9_-]+)\.crds\)'
_EXPRS = {
    "base64gzip": re.compile(rf"^\$\{{base64gzip\({_JOIN}\)\}}$"),
    "sha256": re.compile(rf"^\$\{{sha256\({_JOIN}\)\}}$"),
    "length": re.compile(rf"^\$\{{length\(base64gzip\({_JOIN}\)\)\s*<=\s*(?P<limit>[0-9]+)\}}$"),
    "var": re.compile(r"^\$\{var\.(?P<name>[A-Za-z0-9_-]+)\}$"),
}


def unescape(text: str) -> str:
    """Terraform's template escapes undone: ``$${`` -> ``${``, ``%%{`` -> ``%{``."""
    return text.replace("$${", "${").replace("%%{", "%{")


@dataclass
class Step:
    """What happened to one resource: ``ok`` None while pending."""

    id: str
    namespace: str
    start: float = 0.0
    end: float = 0.0
    ok: bool | None = None
    line: str = ""
    action: str = ""
    """``create``, ``update`` (configuration changed, or tainted by a failed apply) or
    ``unchanged`` (nothing run); ``delete`` when destroying."""

    def as_dict(self, t0: float) -> dict[str, Any]:
        return {
            "release": self.id,
            "namespace": self.namespace,
            "action": self.action,
            "ok": self.ok,
            "start": round(self.start - t0, 1) if self.start else None,
            "end": round(self.end - t0, 1) if self.end else None,  # rounded on its own: order kept
            "seconds": round(self.end - self.start, 1) if self.end else None,
            "message": self.line,
        }


@dataclass
class Stack:
    """A synthesized runtime stack (``cdktf.out/stacks/<name>``)."""

    folder: Path
    releases: dict[str, dict[str, Any]] = field(default_factory=dict)
    templates: dict[str, dict[str, Any]] = field(default_factory=dict)
    variables: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> Stack:
        doc = json.loads((folder / "cdk.tf.json").read_text(encoding="utf-8"))
        stack = cls(
            folder,
            dict(doc.get("resource", {}).get("helm_release", {})),
            dict(doc.get("data", {}).get("helm_template", {})),
            {k: v.get("default") for k, v in (doc.get("variable") or {}).items()},
        )
        others = sorted(set(doc.get("resource", {})) - {"helm_release"})
        if others:
            raise RigError(
                "engine",
                f"the stack has resources the rig cannot apply: {', '.join(others)}",
                "rehearse runtime stacks only",
            )
        for rid, cfg in stack.releases.items():
            unknown = sorted(set(cfg) - KNOWN_RELEASE_KEYS)
            if unknown:
                raise RigError(
                    "engine",
                    f"helm_release.{rid} uses {', '.join(unknown)}, which the rig's engine does not carry out",
                    "extend gpucluster_rig/engine.py",
                )
        return stack

    def deps(self, rid: str) -> list[str]:
        return [
            d.split(".", 1)[1]
            for d in self.releases[rid].get("depends_on", [])
            if d.startswith("helm_release.")
        ]


class Engine:
    """Runs the Helm CLI against the rig (``helm`` and a kubeconfig).

    Args:
        helm: the ``helm`` binary; kubeconfig: the rig's admin kubeconfig; folder: Helm's caches
        and the values files written per release (fresh per engine).
    """

    def __init__(self, helm: Path, kubeconfig: Path, folder: Path, env: dict[str, str]) -> None:
        self.helm = helm
        self.kubeconfig = kubeconfig
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.env = dict(env)
        for key, sub in (
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ):
            self.env[key] = str(folder / sub)
        self._crds: dict[str, str] = {}
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[str]] = set()
        self._stopped = False
        self.state_path = folder / "state.json"
        self.state: dict[str, dict[str, Any]] = (
            json.loads(self.state_path.read_text(encoding="utf-8"))
            if self.state_path.is_file()
            else {}
        )

    def _save_state(self) -> None:
        with self._lock:
            text = json.dumps(self.state, indent=1, sort_keys=True) + "\n"
        self.state_path.write_text(text, encoding="utf-8")

    def applied_config(self, stack: Stack, rid: str) -> dict[str, Any]:
        """What the state records of ``helm_release.<rid>``: its arguments as the provider sees
        them at apply time (expressions evaluated; a local chart as the stack writes it, relative
        to the stack's folder, so the same content-addressed chart compares equal)."""
        cfg = stack.releases[rid]
        out: dict[str, Any] = {
            k: v for k, v in cfg.items() if k not in ("//", "depends_on", "values", "set")
        }
        out["values"] = [
            self.evaluate(stack, text, f"helm_release.{rid}.values[{i}]")
            for i, text in enumerate(cfg.get("values", []))
        ]
        out["set"] = [
            {
                **entry,
                "value": self.evaluate(
                    stack, entry["value"], f"helm_release.{rid}.set.{entry['name']}"
                ),
            }
            for entry in cfg.get("set", [])
        ]
        return out

    def plan(self, stack: Stack) -> dict[str, str]:
        """Release id -> ``create``, ``update`` or ``unchanged``: what ``terraform plan`` would say
        of each ``helm_release`` against the engine's state and the releases Helm has deployed."""
        deployed = self.deployed()
        out = {}
        for rid, cfg in stack.releases.items():
            entry = self.state.get(rid)
            if entry is None:
                out[rid] = "create"
                continue
            try:
                same = entry.get("config") == self.applied_config(stack, rid)
            except RigError:  # the apply says what cannot be evaluated
                same = False
            if entry.get("tainted") or (cfg["namespace"], cfg["name"]) not in deployed or not same:
                out[rid] = "update"
            else:
                out[rid] = "unchanged"
        return out

    def helm_run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``helm --kubeconfig <rig> ARGS`` in the engine's environment; the finished process.

        A ``helm`` still running after ``timeout`` seconds is stopped (SIGTERM, which Helm turns
        into a cancelled operation and a ``failed`` release; SIGKILL :data:`STOP_SECONDS` later)
        and :class:`HelmTimeout` is raised with what it had printed."""
        cmd = [str(self.helm), "--kubeconfig", str(self.kubeconfig), *args]
        with self._lock:
            if self._stopped:
                raise RigError("interrupted", "the engine was stopped", "run the apply again")
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=self.env,
            )
            self._running.add(proc)
        with proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    out, err = proc.communicate(timeout=STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                raise HelmTimeout(args, timeout, _last(err or out)) from None
            finally:
                with self._lock:
                    self._running.discard(proc)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def stop(self) -> None:
        """Stop every ``helm`` this engine runs (SIGTERM, as :meth:`helm_run` does at a timeout)
        and refuse to start another (:class:`RigError` ``rig.interrupted``): what an interrupted
        walk does before it waits for its workers."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            if proc.poll() is None:
                proc.terminate()

    def _chart_args(self, stack: Stack, cfg: dict[str, Any]) -> list[str]:
        chart = cfg["chart"]
        if cfg.get("repository"):
            return [
                chart,
                "--repo",
                cfg["repository"],
                *(["--version", cfg["version"]] if cfg.get("version") else []),
            ]
        return [str((stack.folder / chart).resolve())]

    def crds(self, stack: Stack, data_id: str, timeout: float = 300) -> str:
        """The ``crds`` of ``data.helm_template.<data_id>``, joined (see the module docstring);
        read once per chart (``helm show crds``, bounded by ``timeout`` seconds)."""
        cfg = stack.templates[data_id]
        chart = self._chart_args(stack, cfg)
        key = "\0".join(chart)  # the chart, not the stack: a kept rig applies several stacks
        with self._lock:
            if key in self._crds:
                return self._crds[key]
        try:
            proc = self.helm_run("show", "crds", *chart, timeout=timeout)
        except HelmTimeout as exc:
            raise RigError(
                "engine", f"data.helm_template.{data_id}: {exc}", "the chart repository must answer"
            ) from None
        if proc.returncode != 0:
            raise RigError(
                "engine",
                f"data.helm_template.{data_id}: {_last(proc.stderr)}",
                "the chart must be in the rig's repository",
            )
        text = proc.stdout
        text = text[len("---\n") :] if text.startswith("---\n") else text
        with self._lock:
            self._crds[key] = text
        return text

    def evaluate(self, stack: Stack, text: str, where: str, timeout: float = 300) -> Any:
        """A string of the stack with its expression evaluated (see the module docstring); a
        chart read for it takes at most ``timeout`` seconds."""
        if "${" not in text.replace("$${", ""):
            return unescape(text)
        for name, pattern in _EXPRS.items():
            m = pattern.match(text)
            if not m:
                continue
            if name == "var":
                return stack.variables.get(m.group("name"))
            joined = self.crds(stack, m.group("data"), timeout)
            if name == "sha256":
                return hashlib.sha256(joined.encode()).hexdigest()
            packed = base64.b64encode(gzip.compress(joined.encode(), mtime=0)).decode()
            return packed if name == "base64gzip" else len(packed) <= int(m.group("limit"))
        raise RigError(
            "engine",
            f"{where}: expression the rig cannot evaluate: {text[:120]}",
            "extend gpucluster_rig/engine.py",
        )

    def install(self, stack: Stack, rid: str) -> tuple[bool, str]:
        """``helm upgrade --install`` of ``helm_release.<rid>``: (ok, the last line Helm printed).

        The whole of it -- reading charts, applying, waiting -- is bounded by the release's
        ``timeout`` (default 300 s, the provider's): a chart repository that accepts and never
        answers fails the release then, with a line that says so."""
        cfg = stack.releases[rid]
        timeout = int(cfg.get("timeout", 300))
        try:
            return self._install(stack, rid, cfg, timeout)
        except HelmTimeout as exc:
            source = cfg.get("repository") or "the stack's folder"
            return False, f"{exc} (chart {cfg['chart']} {cfg.get('version', '')} from {source})"

    def _install(
        self, stack: Stack, rid: str, cfg: dict[str, Any], timeout: int
    ) -> tuple[bool, str]:
        deadline = time.monotonic() + timeout
        for i, pre in enumerate((cfg.get("lifecycle") or {}).get("precondition", [])):
            if (
                self.evaluate(
                    stack,
                    pre["condition"],
                    f"helm_release.{rid}.lifecycle.precondition[{i}]",
                    timeout,
                )
                is not True
            ):
                return False, f"precondition failed: {pre.get('error_message', '')}"
        values_dir = Path(tempfile.mkdtemp(prefix=f"{rid}-", dir=self.folder))
        args = [
            "upgrade",
            "--install",
            cfg["name"],
            *self._chart_args(stack, cfg),
            "--namespace",
            cfg["namespace"],
        ]
        if cfg.get("create_namespace"):
            args.append("--create-namespace")
        for i, text in enumerate(cfg.get("values", [])):
            path = values_dir / f"values-{i}.yaml"
            path.write_text(
                self.evaluate(stack, text, f"helm_release.{rid}.values[{i}]", timeout),
                encoding="utf-8",
            )
            args += ["-f", str(path)]
        for entry in cfg.get("set", []):
            value = self.evaluate(
                stack, entry["value"], f"helm_release.{rid}.set.{entry['name']}", timeout
            )
            flag = "--set-string" if entry.get("type") == "string" else "--set"
            args += [flag, f"{entry['name']}={value}"]
        if cfg.get("postrender"):
            args += self._postrender_args(cfg["postrender"], rid)
        if cfg.get("description"):
            args += ["--description", cfg["description"]]
        args += ["--timeout", f"{timeout}s"]
        if cfg.get("wait", True):
            args.append("--wait")
            if cfg.get("wait_for_jobs"):
                args.append("--wait-for-jobs")
        proc = self.helm_run(*args, timeout=max(1.0, deadline - time.monotonic()))
        if proc.returncode != 0:
            return False, _last(proc.stderr or proc.stdout)
        return True, _last(proc.stdout)

    def _postrender_args(self, postrender: dict[str, Any], rid: str) -> list[str]:
        """``--post-renderer BINARY --post-renderer-args ARG ...`` of a ``postrender`` block;
        :class:`RigError` ``rig.engine`` when its binary is nowhere to be found."""
        binary = str(postrender.get("binary_path") or "")
        found = binary if "/" in binary else shutil.which(binary, path=self.env.get("PATH"))
        if found is None and binary:
            beside = Path(sys.executable).parent / binary
            found = str(beside) if beside.is_file() else None
        if not found:
            raise RigError(
                "engine",
                f"helm_release.{rid}.postrender.binary_path {binary!r} is not on PATH",
                "install gpucluster where the rig runs (pip install gpucluster)",
            )
        args = ["--post-renderer", found]
        for arg in postrender.get("args") or []:
            args += ["--post-renderer-args", str(arg)]
        return args

    def uninstall(self, stack: Stack, rid: str) -> tuple[bool, str]:
        cfg = stack.releases[rid]
        timeout = int(cfg.get("timeout", 300))
        args = [
            "uninstall",
            cfg["name"],
            "--namespace",
            cfg["namespace"],
            "--timeout",
            f"{timeout}s",
        ]
        if cfg.get("wait", True):
            args.append("--wait")
        try:
            proc = self.helm_run(*args, timeout=timeout)
        except HelmTimeout as exc:
            return False, str(exc)
        if proc.returncode != 0:
            return False, _last(proc.stderr or proc.stdout)
        return True, _last(proc.stdout)

    def deployed(self) -> set[tuple[str, str]]:
        """``(namespace, name)`` of every release Helm has in status ``deployed``."""
        proc = self.helm_run("list", "-A", "-o", "json", timeout=60)
        try:
            return {(r["namespace"], r["name"]) for r in json.loads(proc.stdout or "[]")}
        except (ValueError, KeyError, TypeError):
            return set()

    def revisions(self) -> dict[tuple[str, str], int]:
        """``(namespace, name)`` -> Helm revision of every release (any status)."""
        proc = self.helm_run("list", "-A", "-a", "-o", "json", timeout=60)
        return {(r["namespace"], r["name"]): int(r["revision"]) for r in json.loads(proc.stdout)}

    def installed(self) -> set[str]:
        """Names of the releases Helm has on the cluster (every namespace): the rig's "state"."""
        return set(self.helm_run("list", "-A", "-a", "-q", timeout=60).stdout.split())

    def walk(self, stack: Stack, *, destroy: bool = False) -> tuple[list[Step], float]:
        """Apply (or destroy) every release in dependency order; (steps, makespan in seconds).

        A failed release stops the walk from starting its dependents (as Terraform does); the
        others go on. ``ok`` stays None for a release never started. Destroy walks only the
        releases Helm has (as Terraform destroys only what its state holds)."""
        ids = sorted(stack.releases)
        if destroy:
            have = self.installed()
            ids = [rid for rid in ids if stack.releases[rid]["name"] in have]
        before = {rid: set(stack.deps(rid)) & set(ids) for rid in ids}
        if destroy:
            after: dict[str, set[str]] = {rid: set() for rid in ids}
            for rid, deps in before.items():
                for d in deps:
                    after[d].add(rid)
            before = after
        steps = {rid: Step(rid, stack.releases[rid]["namespace"]) for rid in ids}
        planned = {rid: "delete" for rid in ids} if destroy else self.plan(stack)
        for rid in ids:
            steps[rid].action = planned[rid]
        done: set[str] = set()
        failed: set[str] = set()
        running: dict[Future[tuple[bool, str]], str] = {}
        t0 = time.monotonic()
        action = self.uninstall if destroy else self.install
        with ThreadPoolExecutor(PARALLELISM) as pool:
            try:
                self._walk_loop(
                    stack, ids, before, steps, action, pool, running, done, failed, destroy
                )
            except BaseException:  # Ctrl-C, SIGTERM: stop the running helms before waiting on them
                self.stop()
                raise
        self._save_state()
        return [steps[r] for r in ids], time.monotonic() - t0

    def _walk_loop(
        self,
        stack: Stack,
        ids: list[str],
        before: dict[str, set[str]],
        steps: dict[str, Step],
        action: Any,
        pool: ThreadPoolExecutor,
        running: dict[Future[tuple[bool, str]], str],
        done: set[str],
        failed: set[str],
        destroy: bool,
    ) -> None:
        """:meth:`walk`'s scheduling: start what is ready, record what finished, until none runs."""
        while True:
            moved = True
            while moved:  # until a pass starts, skips or fails nothing more
                moved = False
                for rid in ids:
                    if steps[rid].start or rid in failed:
                        continue
                    if before[rid] & failed:
                        failed.add(rid)
                        steps[rid].line = (
                            "not started: " + ", ".join(sorted(before[rid] & failed)) + " failed"
                        )
                        moved = True
                    elif before[rid] <= done and steps[rid].action == "unchanged":
                        steps[rid].start = steps[rid].end = time.monotonic()
                        steps[rid].ok, steps[rid].line = True, "no changes"
                        done.add(rid)
                        moved = True
                    elif before[rid] <= done and len(running) < PARALLELISM:
                        steps[rid].start = time.monotonic()
                        running[pool.submit(action, stack, rid)] = rid
            if not running:
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                rid = running.pop(fut)
                step = steps[rid]
                step.end = time.monotonic()
                try:
                    step.ok, step.line = fut.result()
                except (RigError, subprocess.TimeoutExpired) as exc:
                    step.ok, step.line = False, str(exc)
                (done if step.ok else failed).add(rid)
                self._record(stack, rid, step, destroy)

    def _record(self, stack: Stack, rid: str, step: Step, destroy: bool) -> None:
        """The state after a finished step: a destroyed release leaves it; an applied one records
        its configuration, ``tainted`` when the apply failed (the next apply runs it again)."""
        with self._lock:
            if destroy:
                if step.ok:
                    self.state.pop(rid, None)
                return
        try:
            config = self.applied_config(stack, rid)
        except RigError:
            config = {}
        with self._lock:
            self.state[rid] = {"config": config, "tainted": not step.ok}


STOP_SECONDS = 10
"""Seconds a ``helm`` past its release's timeout gets to stop after SIGTERM, before SIGKILL."""


class HelmTimeout(subprocess.TimeoutExpired):
    """A ``helm`` command stopped at its deadline; ``str()`` is one line naming the command, the
    deadline and Helm's last line."""

    def __init__(self, args: tuple[str, ...], timeout: float, said: str) -> None:
        super().__init__(["helm", *args], timeout)
        self.said = said

    def __str__(self) -> str:
        words = [str(a) for a in self.cmd[1:3]]
        return (
            f"{' '.join(['helm', *words])} did not finish within the release's timeout "
            f"({self.timeout:.0f} s) and was stopped; Helm's last line: {self.said or '(none)'}"
        )


def _last(text: str) -> str:
    """The line that says what happened: Helm's last ``Error:`` line (it names the cause, e.g.
    ``no matches for kind "NodeWright" in version ...``) and, when another line follows it (Helm's
    hint, ``ensure CRDs are installed first``), that last line too; else the last line. At most
    600 characters."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    errors = [i for i, ln in enumerate(lines) if ln.startswith("Error:")]
    if errors and errors[-1] != len(lines) - 1:
        said = lines[errors[-1]]
        tail = lines[-1][:200]
        return f"{said[: 597 - len(tail) - 3]} -- {tail}"
    return lines[-1][:600]
