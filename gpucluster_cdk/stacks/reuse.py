"""Reuse of unchanged clusters' synthesized stacks (the per-user cache kind ``synth-cluster``).

No cdktf import: a re-synth whose clusters are all unchanged (and no fleet) never starts the jsii
kernel.

**What a cluster's stacks depend on.** ``<name>-cluster`` and ``<name>-runtime`` are built from the
cluster's :class:`~gpucluster.model.RuntimePlan` alone (the plugin hook ``gpucluster_cluster_stack``
gets ``cluster`` and ``recipe``; the runtime stack reads ``plan``), by the code of gpucluster,
gpucluster_cdk and the plugins implementing the synthesis hooks, with the installed cdktf (or cdktn),
constructs, jsii and provider bindings. Across clusters, cdktf's cross-stack references are the only
link: a reference from stack B to a token of stack A adds an output ``cross-stack-output-<id>`` to
A (``TerraformStack.registerOutgoingCrossStackReference``, id = the referenced expression), a
``terraform_remote_state`` ``cross-stack-reference-input-<A>`` made by A's backend to B
(``registerIncomingCrossStackReference``), and A to B's dependencies in ``manifest.json``
(``App.crossStackReference``; cdktf 0.21 ``lib/app.js``, ``lib/terraform-stack.js``). Without a
``fleet:`` section no stack references another cluster's. In a fleet (:mod:`gpucluster_cdk.stacks.fleet`)
the fleet stack references every member's AKS id (an output in the member's cluster stack), the
barrier after group N references the rollout marker of each runtime stack of group N (an output
there), and each runtime stack of group N+1 references the barrier (a remote state of the barrier
stack's backend, a dependency, and the group digest of group N, i.e. of the other clusters' plans):
:func:`fleet_context` is exactly that, and it is part of the member's key.

**Key** (:func:`cluster_key`): sha256 of the plan (its pickle, without the cluster's position in the
file: :func:`position_free`), that fleet context, the platform's
``provisions_cluster``, :func:`synth_identity` (the code and the installed distributions), the
environment cdktf reads at synth (``CDKTF_CONTEXT_JSON``, ``SYNTH_HCL_OUTPUT``, ``GPUCLUSTER_CDK``)
and, for a ``cloud`` backend (cdktf runs ``terraform version`` for it), which Terraform CLI is on
``PATH``. A plan that cannot be pickled is not cached.

**Entry** (:func:`store` / :func:`load`): every file below ``stacks/<stack>/`` of the cluster's
stacks (``cdk.tf.json``, ``assets/...``), their ``manifest.json`` entries, the ids a fleet
build needs of them (:data:`EXPORT_KEYS`) and the code the building process had loaded
(:func:`loaded_code`: every module outside the standard library and the two hashed packages,
with its file's identity). An entry is used only while that code is unchanged and still the
copy this process would import (:func:`code_unchanged`): a plugin's helper in another package,
a plugin in a namespace package (no folder to hash), a module imported inside a hook, PyYAML
writing the values documents -- none of them is in the key, all of them are checked. Reads go through :func:`gpucluster.diskcache.get`
(ownership and permission rules, sha256 of the payload); anything unexpected in the payload
(format, stack names, a path leaving the stack folder, sizes) is a miss. Entries are written
only after the output passed every check (:func:`gpucluster_cdk.stacks.synthesis.synth`).

``manifest.json`` is always made whole: :func:`manifest_text` writes it as the framework does
(:data:`MANIFEST_STYLES`: keys sorted by UTF-16 code units, no final newline);
:func:`check_manifest_text` finds the style of every manifest the framework wrote in the run (an
entry keeps it) and fails when none matches.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import pickle
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from gpucluster import diskcache

KIND = "synth-cluster"
"""Cache kind (folder) of the entries."""

FORMAT = 2
"""Payload format of an entry (a change makes every entry a miss)."""

MANIFEST_STYLES = ("json-stable-stringify", "safe-stable-stringify")
"""How the framework writes ``manifest.json``: cdktf 0.21 with ``json-stable-stringify`` 1.3
(``space: 2``; an empty list or map is ``[`` newline, indent, ``]``), cdktn 0.24 with
``safe-stable-stringify`` (``JSON.stringify`` layout with sorted keys: ``[]``, ``{}``)."""


SYNTH_CACHE_ENV = "GPUCLUSTER_SYNTH_CACHE"
"""Environment variable: ``off`` (or ``0``/``no``/``false``) synthesizes every cluster without the cache."""

_SYNTH_ENV = ("CDKTF_CONTEXT_JSON", "SYNTH_HCL_OUTPUT", "GPUCLUSTER_CDK")
"""Environment variables the framework or gpucluster_cdk read while building or writing stacks."""

DISTRIBUTION_MODULES = (
    "cdktf",
    "cdktn",
    "constructs",
    "jsii",
    "cdktf_cdktf_provider_azurerm",
    "cdktf_cdktf_provider_helm",
    "cdktn_provider_azurerm",
    "cdktn_provider_helm",
    "typeguard",
)
"""Top-level modules whose installed copy (:func:`gpucluster.diskcache.module_identity`: path, file
identity and ``<dist>-<version>.dist-info``) is part of every key: both CDK distributions (one of
them is used, ``GPUCLUSTER_CDK`` is in the key), their bindings and jsii's runtime type checker."""

EXPORT_KEYS = ("aks_cluster",)
"""Ids an entry keeps for fleet builds: ``aks_cluster`` = ``[resource type, logical id]`` of a
member's AKS cluster (the fleet stack references its ``id``)."""

_HOOKS = ("gpucluster_cluster_stack", "gpucluster_platforms")
"""Plugin hooks whose implementations' code is part of the key (the ones synthesis calls)."""


SYNTH_CACHE_VALUES = {
    "on": True,
    "1": True,
    "yes": True,
    "true": True,
    "off": False,
    "0": False,
    "no": False,
    "false": False,
}
"""What ``GPUCLUSTER_SYNTH_CACHE`` may be (any case; empty or unset: on)."""


def cache_enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``GPUCLUSTER_SYNTH_CACHE`` is ``off``/``0``/``no``/``false`` (any case) or the
    per-user cache is disabled (``GPUCLUSTER_CACHE_DIR=off``, no home folder).

    Raises:
        GpuclusterError: ``error[config] key=GPUCLUSTER_SYNTH_CACHE`` for a value not in
            :data:`SYNTH_CACHE_VALUES` (a misspelt ``off`` never keeps the cache on).
    """
    from gpucluster.errors import GpuclusterError

    env = os.environ if env is None else env
    raw = env.get(SYNTH_CACHE_ENV, "")
    if raw and raw.lower() not in SYNTH_CACHE_VALUES:
        raise GpuclusterError(
            f"{SYNTH_CACHE_ENV}={raw!r} is not a cache switch",
            key=SYNTH_CACHE_ENV,
            id="config",
            allowed=", ".join(SYNTH_CACHE_VALUES),
            fix=f"set {SYNTH_CACHE_ENV}=off to synthesize every cluster, or unset it",
        )
    if raw and not SYNTH_CACHE_VALUES[raw.lower()]:
        return False
    return diskcache.cache_dir(env) is not None


# --------------------------------------------------------------------------- identity

_FILE_DIGESTS: dict[str, tuple[tuple[int, int, int, int], bytes]] = {}


def _file_digest(path: str) -> bytes:
    """sha256 of a file's bytes, remembered per (size, mtime, inode, ctime) in this process."""
    st = os.stat(path)
    mark = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
    hit = _FILE_DIGESTS.get(path)
    if hit is not None and hit[0] == mark:
        return hit[1]
    with open(path, "rb") as f:
        value = hashlib.sha256(f.read()).digest()
    _FILE_DIGESTS[path] = (mark, value)
    return value


def tree_digest(root: str | os.PathLike[str]) -> str:
    """sha256 over every file below ``root`` (relative path and content digest, sorted; ``__pycache__``
    and compiled files skipped); a single file when ``root`` is one. ``"absent"`` when unreadable."""
    root = os.fspath(root)
    h = hashlib.sha256()
    try:
        if os.path.isfile(root):
            h.update(_file_digest(root))
            return h.hexdigest()
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root).encode("utf-8", "surrogateescape")
                h.update(len(rel).to_bytes(4, "big") + rel + _file_digest(path))
    except OSError:
        return "absent"
    return h.hexdigest()


def _code_root(module_name: str | None) -> str | None:
    """The folder of the top-level package of ``module_name`` (or its file for a plain module)."""
    if not module_name:
        return None
    top = module_name.split(".")[0]
    module = sys.modules.get(top) or sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    return os.path.dirname(path) if os.path.basename(path) == "__init__.py" else path


def plugin_identity(pm: Any = None) -> list[str]:
    """What the synthesis hooks' implementations are: per implementation (in call order) the plugin
    name, the function's module and qualified name, its bytecode (``marshal`` of ``__code__``, so two
    functions of one file differ) and :func:`tree_digest` of its top-level package."""
    from gpucluster.plugins import get_plugin_manager

    pm = pm or get_plugin_manager()
    parts: list[str] = []
    for hook in _HOOKS:
        caller = getattr(pm.hook, hook, None)
        for impl in caller.get_hookimpls() if caller is not None else []:
            fn = impl.function
            code = getattr(fn, "__code__", None)
            module = getattr(fn, "__module__", None)
            root = _code_root(module)
            parts.append(
                "\0".join(
                    [
                        hook,
                        str(impl.plugin_name),
                        str(module),
                        str(getattr(fn, "__qualname__", fn)),
                        hashlib.sha256(marshal.dumps(code)).hexdigest()
                        if code is not None
                        else repr(fn),
                        tree_digest(root) if root else "no source",
                    ]
                )
            )
    return parts


def synth_identity(env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """Digests of what a cluster's stacks depend on besides its plan: the files of the
    ``gpucluster`` and ``gpucluster_cdk`` packages, the installed :data:`DISTRIBUTION_MODULES`
    (:func:`gpucluster.diskcache.module_identity`), the Python version and the environment cdktf
    reads at synth; the second digest adds :func:`plugin_identity` (for clusters whose cluster
    stack a plugin builds; a runtime stack alone calls no plugin)."""
    import gpucluster
    import gpucluster_cdk

    env = os.environ if env is None else env
    _IDENTITIES.clear()  # a new synth: files and import locations are examined again
    _LOCATIONS.clear()
    _CHECKED.clear()
    base = diskcache.digest(
        [
            f"{KIND} {FORMAT}",
            gpucluster.__version__,
            sys.version,
            tree_digest(os.path.dirname(gpucluster.__file__)),
            tree_digest(os.path.dirname(gpucluster_cdk.__file__)),
            *(diskcache.module_identity(name) for name in DISTRIBUTION_MODULES),
            *(f"{name}={env.get(name)!r}" for name in _SYNTH_ENV),
        ]
    )
    return base, diskcache.digest([base, *plugin_identity()])


_IDENTITIES: dict[str, str] = {}
_LOCATIONS: dict[str, tuple[str, ...] | None] = {}
_CHECKED: dict[tuple, bool] = {}


def _file_identity(path: str) -> str:
    """A file's size, mtime, inode and ctime (a rewrite in place changes the ctime, which no user
    can set back), remembered until the next :func:`synth_identity`; ``"absent"`` when it cannot
    be examined."""
    hit = _IDENTITIES.get(path)
    if hit is None:
        try:
            st = os.stat(path)
            hit = f"{st.st_size} {st.st_mtime_ns} {st.st_ino} {st.st_ctime_ns}"
        except (OSError, ValueError):
            hit = "absent"
        _IDENTITIES[path] = hit
    return hit


def _folders(paths: Iterable[str | None]) -> tuple[str, ...]:
    """``paths`` as absolute and real folder prefixes (ending in the separator), sorted."""
    return tuple(
        sorted(
            {
                os.path.join(f(p), "")
                for p in paths
                if p
                for f in (os.path.abspath, os.path.realpath)
            }
        )
    )


def _skipped(path: str) -> bool:
    """Whether :func:`loaded_code` leaves the module file ``path`` out: the standard library (the
    Python version is in the key; its folder is the one ``os`` comes from, the installation's, not
    a virtual environment's) unless in a ``site-packages`` folder below it, and the
    ``gpucluster``/``gpucluster_cdk`` packages (their files' contents are in the key, :func:`synth_identity`)."""
    import site
    import sysconfig

    import gpucluster
    import gpucluster_cdk

    if not _ROOTS:
        user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
        site_dirs = [
            *getattr(site, "getsitepackages", lambda: [])(),
            user,
            sysconfig.get_path("purelib"),
            sysconfig.get_path("platlib"),
            *(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")),
        ]
        _ROOTS.extend(
            [
                _folders([os.path.dirname(os.__file__)]),
                _folders(site_dirs),
                _folders(
                    [os.path.dirname(gpucluster.__file__), os.path.dirname(gpucluster_cdk.__file__)]
                ),
            ]
        )
    stdlib, sites, ours = _ROOTS
    return path.startswith(ours) or (path.startswith(stdlib) and not path.startswith(sites))


_ROOTS: list[tuple[str, ...]] = []


def loaded_code(modules: Mapping[str, Any] | None = None) -> list[list[str]]:
    """The code a build in this process may have run besides what the key holds: per module of
    ``modules`` (default ``sys.modules``) with an absolute ``__file__`` outside
    :func:`_skipped`, ``[module name, file, identity]`` (:func:`_file_identity`), sorted.
    The script that started the process (``__main__``: ``main.py``, the ``gpucluster`` command)
    builds nothing and is left out, so either finds the other's entries."""
    modules = sys.modules if modules is None else modules
    out = []
    for name, module in list(modules.items()):
        path = getattr(module, "__file__", None)
        if (
            name in ("__main__", "__mp_main__")
            or not isinstance(path, str)
            or not os.path.isabs(path)
            or _skipped(path)
        ):
            continue
        out.append([name, path, _file_identity(path)])
    return sorted(out)


def _locations(top: str) -> tuple[str, ...] | None:
    """Where top-level module ``top`` is (loaded) or would be imported from (not imported here):
    its package folders or its file; None when it is not found. Remembered until the next
    :func:`synth_identity` once found without being loaded."""
    if top in _LOCATIONS:
        return _LOCATIONS[top]
    module = sys.modules.get(top)
    if module is not None:
        folders = getattr(module, "__path__", None)
        if folders is not None:
            return tuple(folders)
        path = getattr(module, "__file__", None)
        return (path,) if isinstance(path, str) else None
    import importlib.util

    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    found = None
    if spec is not None and spec.submodule_search_locations is not None:
        found = tuple(spec.submodule_search_locations)
    elif spec is not None and spec.origin:
        found = (spec.origin,)
    _LOCATIONS[top] = found
    return found


def code_unchanged(record: Any) -> bool:
    """Whether every module of a :func:`loaded_code` record still has the same file identity and
    is still the copy this process has loaded, or would import (the same file, or a file inside the
    folders its top-level package is found in); False for anything else (a malformed record too)."""
    if not isinstance(record, list) or not all(
        isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
        for item in record
    ):
        return False
    memo = tuple(tuple(item) for item in record)  # entries stored by one process share their record
    if memo not in _CHECKED:
        _CHECKED[memo] = _code_unchanged(record)
    return _CHECKED[memo]


def _code_unchanged(record: list[list[str]]) -> bool:
    for name, path, identity in record:
        if _file_identity(path) != identity:
            return False
        module = sys.modules.get(name)
        if module is not None:
            if getattr(module, "__file__", None) != path:
                return False
            continue
        found = _locations(name.partition(".")[0])
        if found is None or not any(
            path == f or path.startswith(os.path.join(f, "")) for f in found if f
        ):
            return False
    return True


def fleet_context(fleet: Any, plans: Sequence[Any]) -> dict[str, tuple]:
    """Per fleet member: what the fleet's stacks put into (or ask of) its stacks, as plain data
    (see the module docstring): its group, its rollout digest, whether the barrier after its
    group reads its marker, and the barrier its runtime stack waits for (stack name, group, group
    digest, the backend of that stack). Non-members are absent. Mirrors
    :func:`gpucluster_cdk.stacks.fleet.add_fleet`."""
    if fleet is None:
        return {}
    from gpucluster.inputs import fleet as fleet_mod

    by_name = {p.cluster.name: p for p in plans}
    owner = next((p.cluster for p in plans if p.cluster.backend is not None), None)
    owner_backend = repr(owner.backend) if owner is not None else "local"
    digests = {
        name: fleet_mod.rollout_digest(plan)
        for name, plan in by_name.items()
        if name in fleet.members
    }
    order = fleet_mod.stages(fleet)
    context: dict[str, tuple] = {}
    for index, (group, names) in enumerate(order):
        for name in names:
            waits = None
            if index > 0:
                prev_group, prev_names = order[index - 1]
                waits = (
                    fleet_mod.barrier_stack_name(fleet.name, prev_group.name),
                    prev_group.name,
                    fleet_mod.group_digest((n, digests[n]) for n in prev_names),
                    owner_backend,
                )
            context[name] = (
                "member",
                fleet.name,
                group.name,
                digests.get(name),
                index + 1 < len(order),
                waits,
            )
    return context


def _terraform_identity() -> str:
    """The Terraform CLI cdktf would run (``TERRAFORM_BINARY_NAME`` or ``terraform`` on ``PATH``):
    path, size and mtime; ``absent`` when there is none."""
    name = os.environ.get("TERRAFORM_BINARY_NAME") or "terraform"
    found = shutil.which(name)
    if found is None:
        return "absent"
    try:
        st = os.stat(found)
    except OSError:
        return "absent"
    return f"{found} {st.st_size} {st.st_mtime_ns}"


def plan_bytes(plan: Any) -> bytes | None:
    """The plan as bytes for its key: a ``pickle`` (protocol 5) without its memo (``fast`` mode, so
    objects shared inside the plan are written like copies: equal plans give equal bytes whether
    or not they share objects); None when it cannot be pickled."""
    import io

    buffer = io.BytesIO()
    try:
        pickler = pickle.Pickler(buffer, protocol=5)
        pickler.fast = True
        pickler.dump(plan)
    except Exception:  # noqa: BLE001 - anything unpicklable is simply not cached
        return None
    return buffer.getvalue()


def position_free(plan: Any) -> Any:
    """``plan`` as if its cluster had no position in a file: a copy whose ``cluster.index`` is None
    and whose ``cluster.backend_key`` and findings' keys start ``clusters[].`` instead of
    ``clusters[<index>].`` (:func:`gpucluster.model.file_key`). The position only names where an
    error is (stacks are stored only when there was none); the stacks never depend on it
    (tests/test_synth_reuse.py inserts and removes clusters and compares with a full synth)."""
    import dataclasses

    cluster: Any = getattr(plan, "cluster", None)
    index = getattr(cluster, "index", None)
    if cluster is None or index is None:
        return plan
    prefix = f"clusters[{index}]."

    def free(key: Any) -> Any:
        return (
            "clusters[]." + key[len(prefix) :]
            if isinstance(key, str) and key.startswith(prefix)
            else key
        )

    try:
        return dataclasses.replace(
            plan,
            cluster=dataclasses.replace(cluster, index=None, backend_key=free(cluster.backend_key)),
            findings=[_with_key(f, free) for f in plan.findings],
        )
    except (TypeError, ValueError):  # not the model's dataclasses: keyed as it is
        return plan


def _with_key(finding: Any, free: Any) -> Any:
    import dataclasses

    return dataclasses.replace(finding, key=free(finding.key))


def cluster_key(
    plan: Any, *, identity: tuple[str, str], context: tuple | None, provisions: bool
) -> str | None:
    """The key of a cluster's stacks (see the module docstring); None: not cacheable (the plan does
    not pickle, or a ``cloud`` backend without a Terraform CLI: the synth must fail as without cache).

    The cluster's position in its file is left out (:func:`position_free`): inserting or removing a
    cluster before it does not rebuild it."""
    data = plan_bytes(position_free(plan))
    if data is None:
        return None
    backend = plan.cluster.backend or {}
    terraform = ""
    if backend.get("type") == "cloud":
        terraform = _terraform_identity()
        if terraform == "absent":
            return None
    return diskcache.digest(
        [
            f"{KIND} {FORMAT}",
            identity[1] if provisions else identity[0],
            data,
            repr(context),
            str(provisions),
            terraform,
        ]
    )


# --------------------------------------------------------------------------- entries


def _safe_rel(rel: Any) -> bool:
    """Whether ``rel`` is a plain relative POSIX path inside a stack folder."""
    if not isinstance(rel, str) or not rel or "\0" in rel or "\\" in rel or rel.startswith("/"):
        return False
    parts = PurePosixPath(rel).parts
    return all(p not in ("", ".", "..") for p in parts) and "/".join(parts) == rel


def read_stack_files(folder: Path) -> list[tuple[str, bytes]]:
    """Every file below ``folder`` as ``(relative POSIX path, bytes)``, sorted.

    Raises:
        OSError: unreadable, or an entry that is neither a folder nor a regular file.
    """
    files: list[tuple[str, bytes]] = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                raise OSError(f"{path} is not a regular file")
            with open(path, "rb") as f:
                files.append((Path(os.path.relpath(path, folder)).as_posix(), f.read()))
    for root, dirs, _names in os.walk(folder):
        for d in dirs:
            if os.path.islink(os.path.join(root, d)):
                raise OSError(f"{os.path.join(root, d)} is a link")
    return files


def encode_entry(
    version: str,
    stacks: Sequence[tuple[str, Mapping[str, Any], Sequence[tuple[str, bytes]]]],
    exports: Mapping[str, Any],
    style: str = MANIFEST_STYLES[0],
    code: list[list[str]] | None = None,
) -> bytes:
    """An entry's payload: one JSON header line (format, framework version, manifest style, per stack
    its name, manifest entry and ``[path, size]`` of each file; the exports; ``code``, default
    :func:`loaded_code` of this process), then the files' bytes."""
    header = {
        "format": FORMAT,
        "version": version,
        "style": style,
        "exports": dict(exports),
        "code": loaded_code() if code is None else code,
        "stacks": [
            {
                "name": name,
                "manifest": dict(manifest),
                "files": [[rel, len(data)] for rel, data in files],
            }
            for name, manifest, files in stacks
        ],
    }
    body = b"".join(data for _, _, files in stacks for _, data in files)
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8") + b"\n" + body


def decode_entry(payload: bytes, expected: Sequence[str]) -> dict[str, Any] | None:
    """The entry of :func:`encode_entry` if it is whole and holds exactly the stacks ``expected``
    (names in order), each manifest entry naming its stack with no annotations, safe paths (none
    twice, none below another file) and sizes adding up, and its code record is unchanged (:func:`code_unchanged`); else None. Returns ``{"version", "style", "exports", "stacks": [(name, manifest, [(rel, bytes)])]}``."""
    head, sep, body = payload.partition(b"\n")
    if not sep:
        return None
    try:
        header = json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(header, dict)
        or header.get("format") != FORMAT
        or not isinstance(header.get("version"), str)
        or header.get("style") not in MANIFEST_STYLES
        or not code_unchanged(header.get("code"))
    ):
        return None
    exports, entries = header.get("exports"), header.get("stacks")
    if (
        not isinstance(exports, dict)
        or not isinstance(entries, list)
        or [e.get("name") if isinstance(e, dict) else None for e in entries] != list(expected)
    ):
        return None
    offset = 0
    stacks = []
    for entry in entries:
        manifest, files = entry.get("manifest"), entry.get("files")
        if (
            not isinstance(manifest, dict)
            or manifest.get("name") != entry["name"]
            or manifest.get("annotations") != []
            or not isinstance(files, list)
        ):
            return None
        out = []
        paths: set[str] = set()
        folders: set[str] = set()
        for item in files:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not _safe_rel(item[0])
                or type(item[1]) is not int
                or item[1] < 0
                or offset + item[1] > len(body)
            ):
                return None
            parents = {"/".join(item[0].split("/")[:i]) for i in range(1, item[0].count("/") + 1)}
            if (
                item[0] in paths or item[0] in folders or parents & paths
            ):  # a file twice, or a file in a file's place
                return None
            paths.add(item[0])
            folders |= parents
            out.append((item[0], body[offset : offset + item[1]]))
            offset += item[1]
        stacks.append((entry["name"], manifest, out))
    if offset != len(body):
        return None
    return {
        "version": header["version"],
        "style": header["style"],
        "exports": exports,
        "stacks": stacks,
    }


def load(key: str, expected: Sequence[str]) -> dict[str, Any] | None:
    """The entry under ``key`` for stacks ``expected`` (:func:`decode_entry`), or None (a miss)."""
    payload = diskcache.get(KIND, key)
    return None if payload is None else decode_entry(payload, expected)


def store(
    key: str,
    version: str,
    stacks: Sequence[tuple[str, Mapping[str, Any], Sequence[tuple[str, bytes]]]],
    exports: Mapping[str, Any],
    style: str = MANIFEST_STYLES[0],
) -> bool:
    """Put an entry (best-effort: False when not written); entries with annotations are not kept."""
    if any(manifest.get("annotations") != [] for _, manifest, _ in stacks):
        return False
    return diskcache.put(KIND, key, encode_entry(version, stacks, exports, style))


def write_stack_files(
    stacks_dir: Path,
    name: str,
    files: Iterable[tuple[str, bytes]],
    *,
    previous: Path | None = None,
) -> int:
    """Write a stack's files below ``stacks_dir/name`` (a fresh folder).

    With ``previous`` (the stack's folder in the output being replaced), a file that is there with
    exactly these bytes is hard-linked instead of written (:func:`_link_same`): no data is written
    and removing the previous output frees nothing, which on a journaling file system is most of
    a reused stack's cost. Any doubt about that file means it is written. Only a file inside the
    previous output is linked: ``previous``, its parent (the ``stacks`` folder) and every folder
    between it and the file are opened without following a symbolic link
    (:class:`_PreviousFolders`), so a link in place of one of them (to files elsewhere) is not
    followed.

    Returns:
        how many files were hard-linked.

    Raises:
        OSError: a file or folder could not be written (the folder exists, the disk is full, ...).
    """
    root = os.path.join(os.fspath(stacks_dir), name)
    old = None if previous is None else _PreviousFolders(previous)
    mode = _fresh_mode() if old is not None else 0
    os.mkdir(root)
    made = {root}
    linked = 0
    try:
        for rel, data in files:
            path = os.path.join(root, rel)
            parent = os.path.dirname(path)
            if parent not in made:
                os.makedirs(parent, exist_ok=True)
                made.add(parent)
            folder = None if old is None else old.folder(os.path.dirname(rel))
            if folder is not None and _link_same(folder, os.path.basename(rel), path, data, mode):
                linked += 1
                continue
            _write_new(path, data)
    finally:
        if old is not None:
            old.close()
    return linked


def _write_new(path: str, data: bytes) -> None:
    """Create file ``path`` (it must not exist; mode 0o666 under the umask) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def rewrite_changed_links(folder: Path, files: Iterable[tuple[str, bytes]]) -> int:
    """Write anew every file of a stack written by :func:`write_stack_files` below ``folder`` that
    has more than one link (it was hard-linked from the previous output) and no longer holds its
    bytes: something wrote into the previous output's file after it was linked (an edit in place
    while the app built the other clusters). Called right before the output is swapped in.

    Returns:
        how many files were written anew.

    Raises:
        OSError: a file could not be read or written.
    """
    rewritten = 0
    for rel, data in files:
        path = os.path.join(os.fspath(folder), rel)
        if os.lstat(path).st_nlink == 1:
            continue  # written by this synth: no other name reaches it
        with open(path, "rb") as f:
            if f.read(len(data) + 1) == data:
                continue
        os.unlink(path)
        _write_new(path, data)
        rewritten += 1
    return rewritten


class _PreviousFolders:
    """The folders of one stack of the previous output, each opened (``O_DIRECTORY``,
    ``O_NOFOLLOW``) from its parent's descriptor, from the ``stacks`` folder down: a folder that is
    a symbolic link, or anything else that is not a folder, has no descriptor (None), nor has
    anything below it. Descriptors are kept until :meth:`close`."""

    _FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

    def __init__(self, root: Path):
        self._root = root
        self._fds: dict[str, int | None] = {}

    def folder(self, rel: str) -> int | None:
        """The descriptor of folder ``rel`` (POSIX, relative to the stack folder; ``""``: itself)."""
        if rel in self._fds:
            return self._fds[rel]
        fd = None
        try:
            if rel == "":
                parent = os.open(self._root.parent, self._FLAGS)  # the stacks folder
                try:
                    fd = os.open(self._root.name, self._FLAGS, dir_fd=parent)
                finally:
                    os.close(parent)
            else:
                head, _, tail = rel.rpartition("/")
                above = self.folder(head)
                if above is not None:
                    fd = os.open(tail, self._FLAGS, dir_fd=above)
        except (OSError, NotImplementedError):
            fd = None
        self._fds[rel] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            if fd is not None:
                os.close(fd)
        self._fds.clear()


def _fresh_mode() -> int:
    """The permission bits ``os.open(..., 0o666)`` gives a new file under this process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _link_same(folder: int, old: str, new: str, data: bytes, mode: int) -> bool:
    """Hard-link ``old`` (a name in the open folder ``folder``) as ``new`` when it is a regular file
    of this user, with one link, the mode a new file gets (``mode``, :func:`_fresh_mode`), and
    exactly ``data``; the bytes are read again through ``new`` after linking (the same file:
    nothing replaced ``old`` in between). False (``new`` absent) otherwise or on any error."""
    import stat

    try:
        st = os.stat(old, dir_fd=folder, follow_symlinks=False)
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_nlink != 1
            or stat.S_IMODE(st.st_mode) != mode
            or st.st_size != len(data)
        ):
            return False
        os.link(old, new, src_dir_fd=folder, follow_symlinks=False)
    except (OSError, NotImplementedError):
        return False
    try:
        fd = os.open(new, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            same = os.fstat(f.fileno()).st_ino == st.st_ino and f.read(len(data) + 1) == data
    except OSError:
        same = False
    if not same:
        os.unlink(new)
    return same


# --------------------------------------------------------------------------- manifest.json


def _js_key(key: str) -> bytes:
    """Sort key of JavaScript's default ``Array.prototype.sort`` on strings (UTF-16 code units)."""
    return key.encode("utf-16-be", "surrogatepass")


def _stringify(node: Any, level: int, space: str, collapse: bool) -> str:
    indent = "\n" + space * level
    if isinstance(node, dict):
        if not node and collapse:
            return "{}"
        out = [
            indent
            + space
            + json.dumps(k, ensure_ascii=False)
            + ": "
            + _stringify(node[k], level + 1, space, collapse)
            for k in sorted(node, key=_js_key)
        ]
        return "{" + ",".join(out) + indent + "}"
    if isinstance(node, list):
        if not node and collapse:
            return "[]"
        return (
            "["
            + ",".join(indent + space + _stringify(v, level + 1, space, collapse) for v in node)
            + indent
            + "]"
        )
    if isinstance(node, bool) or node is None or isinstance(node, (str, int)):
        return json.dumps(node, ensure_ascii=False)
    raise TypeError(f"manifest value of type {type(node).__name__}")


def manifest_text(
    version: str, stacks: Mapping[str, Mapping[str, Any]], style: str = MANIFEST_STYLES[0]
) -> str:
    """``manifest.json`` as the framework writes it (``Manifest.writeToFile``, :data:`MANIFEST_STYLES`)
    for stack entries ``stacks`` (name -> entry)."""
    return _stringify(
        {"stacks": dict(stacks), "version": version}, 0, "  ", style == "safe-stable-stringify"
    )


def check_manifest_text(text: str) -> tuple[dict[str, Any], str]:
    """Parse a ``manifest.json`` the framework wrote and find the style (:data:`MANIFEST_STYLES`) in
    which :func:`manifest_text` writes the same text.

    Raises:
        RuntimeError: no style does (the writer is out of step with the installed framework).
    """
    data = json.loads(text)
    if isinstance(data, dict) and set(data) == {"stacks", "version"}:
        for style in MANIFEST_STYLES:
            if manifest_text(data["version"], data["stacks"], style) == text:
                return data, style
    raise RuntimeError(
        "manifest.json as cdktf wrote it differs from gpucluster's writer "
        "(gpucluster_cdk.stacks.reuse.manifest_text); synthesize with GPUCLUSTER_SYNTH_CACHE=off "
        "and GPUCLUSTER_SYNTH_WORKERS=1 and report it"
    )


def store_cluster(
    key: str,
    names: Sequence[str],
    stacks_dir: Path,
    manifest: Mapping[str, Any],
    version: str,
    exports: Mapping[str, Any],
    style: str,
) -> None:
    """Store one cluster's stacks (read back from ``stacks_dir``) under ``key``; any error: not stored."""
    try:
        stacks = [(name, manifest[name], read_stack_files(stacks_dir / name)) for name in names]
    except (OSError, KeyError):
        return
    store(key, version, stacks, exports, style)
