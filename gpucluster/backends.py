"""Terraform backend choice of a cluster's stacks (cluster-file key ``backend``), pure Python.

Two backend types:

* ``local`` (default): every stack keeps its state in a local file next to the output folder
  (``terraform.<stack>.tfstate``). Stored on :class:`~gpucluster.model.ClusterSpec` as
  ``backend=None``, so the synthesized JSON is exactly what it was before the key existed.
* ``cloud``: HCP Terraform / Terraform Cloud (or Terraform Enterprise through ``hostname``).
  Each stack gets a Terraform ``cloud`` block with one named workspace,
  ``<workspacePrefix><stack name>`` (``<prefix><cluster>-cluster``, ``<prefix><cluster>-runtime``).
  Stored as the normalized mapping::

      {"type": "cloud", "organization": str, "workspacePrefix": str,
       "hostname": str (default "app.terraform.io"), "project": str | None}

No credentials are accepted: Terraform reads the API token from ``terraform login``
(credentials file) or ``TF_TOKEN_<hostname>`` in the environment.

Name rules (refused at input time, before anything is written):

* workspace names: letters, digits, ``-`` and ``_``, at most 90 characters (HCP Terraform
  workspace naming rule);
* organization names: letters, digits, ``-``, ``_`` and ``.`` (the identifier check of
  go-tfe, the API client the Terraform CLI uses);
* project names: 3 to 40 characters, letters, digits, spaces, ``-`` and ``_``, no leading or
  trailing space (terraform-provider-tfe ``tfe_project.name`` validation);
* hostname: a host name with an optional ``:port``, no scheme or path.

The stacks layer (``stacks/common.py``) turns the mapping into cdktf's ``CloudBackend`` with a
``NamedCloudWorkspace``; this module never imports cdktf.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from gpucluster.errors import GpuclusterError

BACKEND_TYPES = ("local", "cloud")
LOCAL_KEYS = ("type",)
CLOUD_KEYS = ("type", "organization", "workspacePrefix", "hostname", "project")
DEFAULT_HOSTNAME = "app.terraform.io"

STACK_SUFFIXES = ("-cluster", "-runtime")
"""Stack name suffixes (``stacks.common.cluster_stack_name`` / ``runtime_stack_name``); one
workspace per stack."""

WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
WORKSPACE_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")
WORKSPACE_NAME_MAX = 90
ORGANIZATION_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
PROJECT_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_ -]+[A-Za-z0-9_-]$")
PROJECT_NAME_MAX = 40
HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?$")

_CREDENTIAL_KEYS = ("token", "password", "credentials", "apiToken")
_DOCS = "see docs/cluster-file.md (backend)"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__
    )


def parse_backend(raw: Any, *, file: str, cluster: str | None, key: str) -> dict[str, Any] | None:
    """Validate one ``backend`` mapping of the cluster file.

    Args:
        raw: the parsed YAML value (``{type: local}`` or ``{type: cloud, organization: ...}``).
        file: the cluster file as named by the user (for errors).
        cluster: the cluster name, or ``None`` for the top-level default.
        key: the key path of the mapping, ``backend`` or ``clusters[i].backend``.

    Returns:
        ``None`` for ``type: local`` (today's relative local state files), or the normalized
        cloud mapping described in the module docstring.

    Raises:
        GpuclusterError: not a mapping, missing or unknown ``type``, unknown keys (a ``token``
            gets its own message: credentials never go into the file), missing
            ``organization`` or ``workspacePrefix``, values that are not strings, names that
            HCP Terraform refuses.
    """
    w = {"file": file, "cluster": cluster}
    if not isinstance(raw, dict):
        raise GpuclusterError(
            f"'{key}' must be a mapping, not {_type_name(raw)}",
            key=key,
            allowed="{type: local} or {type: cloud, organization: ORG, workspacePrefix: PREFIX}",
            fix=_DOCS,
            **w,
        )
    secret = sorted(k for k in raw if k in _CREDENTIAL_KEYS)
    if secret:
        raise GpuclusterError(
            f"'{key}.{secret[0]}': credentials do not belong in the cluster file",
            key=f"{key}.{secret[0]}",
            fix="remove it; Terraform reads the token from `terraform login` or the TF_TOKEN_<hostname> environment variable "
            "(e.g. TF_TOKEN_app_terraform_io)",
            **w,
        )
    if "type" not in raw:
        raise GpuclusterError(f"missing key '{key}.type'", key=f"{key}.type", allowed=", ".join(BACKEND_TYPES), **w)
    kind = raw["type"]
    if kind not in BACKEND_TYPES:
        raise GpuclusterError(
            f"unknown backend type {kind!r}",
            key=f"{key}.type",
            allowed=", ".join(BACKEND_TYPES),
            fix="use 'local' (state files next to cdktf.out) or 'cloud' (HCP Terraform / Terraform Enterprise)",
            **w,
        )
    allowed_keys = LOCAL_KEYS if kind == "local" else CLOUD_KEYS
    unknown = sorted(k for k in raw if k not in allowed_keys)
    if unknown:
        raise GpuclusterError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(str(u)) for u in unknown)} for backend type '{kind}'",
            key=f"{key}.{unknown[0]}",
            allowed=", ".join(allowed_keys),
            fix=_DOCS,
            **w,
        )
    if kind == "local":
        return None

    def text(name: str, *, required: bool, empty_ok: bool = False) -> str | None:
        if raw.get(name) is None:
            if required:
                raise GpuclusterError(
                    f"missing key '{key}.{name}' (required for backend type 'cloud')",
                    key=f"{key}.{name}",
                    fix=f"set {name} (see docs/cluster-file.md, backend)",
                    **w,
                )
            return None
        value = raw[name]
        if not isinstance(value, str) or (not value and not empty_ok):
            raise GpuclusterError(
                f"'{key}.{name}' must be a {'' if empty_ok else 'non-empty '}string, not {_type_name(value)}",
                key=f"{key}.{name}",
                fix="quote the value",
                **w,
            )
        return value

    organization = text("organization", required=True) or ""
    if not ORGANIZATION_NAME.match(organization):
        raise GpuclusterError(
            f"invalid organization name {organization!r}",
            key=f"{key}.organization",
            allowed="letters, digits, '-', '_' and '.'",
            **w,
        )
    prefix = text("workspacePrefix", required=True, empty_ok=True) or ""
    if not WORKSPACE_PREFIX.match(prefix):
        raise GpuclusterError(
            f"invalid workspacePrefix {prefix!r}: workspace names are <workspacePrefix><stack name>",
            key=f"{key}.workspacePrefix",
            allowed="letters, digits, '-' and '_' (HCP Terraform workspace names)",
            **w,
        )
    hostname = text("hostname", required=False) or DEFAULT_HOSTNAME
    if not HOSTNAME.match(hostname):
        raise GpuclusterError(
            f"invalid hostname {hostname!r}",
            key=f"{key}.hostname",
            allowed="a host name with an optional :port, no scheme or path (e.g. app.terraform.io, tfe.example.com)",
            **w,
        )
    project = text("project", required=False)
    if project is not None and (len(project) > PROJECT_NAME_MAX or not PROJECT_NAME.match(project)):
        raise GpuclusterError(
            f"invalid project name {project!r}",
            key=f"{key}.project",
            allowed=f"3 to {PROJECT_NAME_MAX} characters: letters, digits, spaces, '-' and '_', "
            "not starting or ending with a space",
            **w,
        )
    return {"type": "cloud", "organization": organization, "workspacePrefix": prefix, "hostname": hostname, "project": project}


def workspace_name(backend: Mapping[str, Any], stack_name: str) -> str:
    """The HCP Terraform workspace of one stack: ``<workspacePrefix><stack_name>``."""
    return f"{backend['workspacePrefix']}{stack_name}"


def workspace_names(backend: Mapping[str, Any], cluster: str) -> list[str]:
    """The workspaces of a cluster's stacks, ``[<prefix><cluster>-cluster, <prefix><cluster>-runtime]``."""
    return [workspace_name(backend, f"{cluster}{suffix}") for suffix in STACK_SUFFIXES]


def check_workspaces(backend: Mapping[str, Any] | None, *, cluster: str, file: str, key: str) -> None:
    """Refuse workspace names HCP Terraform would refuse (per cluster: they contain its name).

    Args:
        backend: the normalized backend of the cluster (``None``: local, nothing to check).
        cluster: the cluster name.
        key: the key path to blame (``clusters[i].backend.workspacePrefix`` or
            ``backend.workspacePrefix`` when the top-level default applies).

    Raises:
        GpuclusterError: a workspace name longer than 90 characters or with other characters
            than letters, digits, ``-`` and ``_``.
    """
    if backend is None:
        return
    for name in workspace_names(backend, cluster):
        if not WORKSPACE_NAME.match(name):
            raise GpuclusterError(
                f"workspace name {name!r} is not a valid HCP Terraform workspace name",
                file=file,
                cluster=cluster,
                key=key,
                allowed="letters, digits, '-' and '_'",
                **({"fix": "change workspacePrefix"} if key.endswith("workspacePrefix") else {}),
            )
        if len(name) > WORKSPACE_NAME_MAX:
            raise GpuclusterError(
                f"workspace name {name!r} is {len(name)} characters; HCP Terraform allows at most {WORKSPACE_NAME_MAX}",
                file=file,
                cluster=cluster,
                key=key,
                fix="shorten workspacePrefix or the cluster name",
            )


def check_unique_workspaces(entries: Iterable[tuple[str, Mapping[str, Any] | None, str]], *, file: str) -> None:
    """Refuse two stacks that would share one workspace.

    Args:
        entries: ``(cluster name, normalized backend, key path of its workspacePrefix)`` in file order.

    Raises:
        GpuclusterError: ``<prefix><stack>`` collides on the same hostname and organization
            (e.g. an empty prefix with cluster ``a-b`` and prefix ``a-`` with cluster ``b``),
            naming the later cluster.
    """
    seen: dict[tuple[str, str, str], str] = {}
    for cluster, backend, key in entries:
        if backend is None:
            continue
        for name in workspace_names(backend, cluster):
            where = (backend["hostname"], backend["organization"], name)
            if where in seen:
                raise GpuclusterError(
                    f"workspace '{name}' of organization '{backend['organization']}' is used by cluster "
                    f"'{seen[where]}' too; one workspace holds one stack's state",
                    file=file,
                    cluster=cluster,
                    key=key,
                    fix="give the clusters workspace prefixes that cannot collide",
                )
            seen[where] = cluster
