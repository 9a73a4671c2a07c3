"""Terraform backend choice of a cluster's stacks (cluster-file key ``backend``), pure Python.

Three backend types:

* ``local`` (default): every stack keeps its state in a local file next to the output folder
  (``terraform.<stack>.tfstate``). Stored on :class:`~gpucluster.model.ClusterSpec` as
  ``backend=None``, so the synthesized JSON is exactly what it was before the key existed.
* ``cloud``: HCP Terraform / Terraform Cloud (or Terraform Enterprise through ``hostname``).
  Each stack gets a Terraform ``cloud`` block with one named workspace,
  ``<workspacePrefix><stack name>`` (``<prefix><cluster>-cluster``, ``<prefix><cluster>-runtime``).
  Stored as the normalized mapping::

      {"type": "cloud", "organization": str, "workspacePrefix": str,
       "hostname": str (default "app.terraform.io"), "project": str | None}

* ``azurerm``: a blob in an Azure Storage account container (Terraform's ``azurerm`` backend,
  https://developer.hashicorp.com/terraform/language/backend/azurerm). Each stack gets its own
  blob, ``<keyPrefix><stack name>.tfstate`` (:func:`state_key`), and Entra ID authentication to
  the storage account (``use_azuread_auth = true``) unless ``useAzureadAuth: false``. Stored as::

      {"type": "azurerm", "storageAccountName": str, "containerName": str, "keyPrefix": str
       (default ""), "useAzureadAuth": bool (default True), "resourceGroupName": str | None,
       "subscriptionId": str | None, "tenantId": str | None, "useOidc": bool | None}

No credentials are accepted (:data:`CREDENTIAL_KEYS` are refused with where they come from):
for ``cloud`` Terraform reads the API token from ``terraform login`` (credentials file) or
``TF_TOKEN_<hostname>`` in the environment; for ``azurerm`` it signs in with ``az login``, a
managed identity or OIDC (``ARM_*`` environment variables), and reads an access key or SAS
token, if one is used at all, from ``ARM_ACCESS_KEY`` / ``ARM_SAS_TOKEN``.

Name rules (refused at input time, before anything is written):

* workspace names: letters, digits, ``-`` and ``_``, at most 90 characters (HCP Terraform
  workspace naming rule);
* organization names: letters, digits, ``-``, ``_`` and ``.`` (the identifier check of
  go-tfe, the API client the Terraform CLI uses);
* project names: 3 to 40 characters, letters, digits, spaces, ``-`` and ``_``, no leading or
  trailing space (terraform-provider-tfe ``tfe_project.name`` validation);
* hostname: a host name with an optional ``:port``, no scheme or path;
* storage account names: 3 to 24 lowercase letters and digits; resource group names: 1 to 90
  letters, digits, ``_``, ``-``, ``.``, ``(`` and ``)``, not ending in ``.`` ("Naming rules and
  restrictions for Azure resources",
  https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/resource-name-rules);
* container names: 3 to 63 lowercase letters, digits and ``-``, starting and ending with a
  letter or digit, no two ``-`` in a row ("Naming and Referencing Containers, Blobs, and
  Metadata", https://learn.microsoft.com/en-us/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata);
* ``keyPrefix``: letters, digits, ``.``, ``_``, ``-`` and ``/`` between path segments (no
  ``.``/``..`` segment, no leading or doubled ``/``); the whole blob name at most 1,024 characters
  (the same Azure page);
* subscription and tenant ids: GUIDs.

The stacks layer (``gpucluster_cdk/stacks/common.py``) turns the mapping into cdktf's
``CloudBackend`` with a ``NamedCloudWorkspace``, or ``AzurermBackend``; this module never imports cdktf.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from gpucluster.errors import GpuclusterError
from gpucluster.fields import Fields, Where

BACKEND_TYPES = ("local", "cloud", "azurerm")
LOCAL_KEYS = ("type",)
CLOUD_KEYS = ("type", "organization", "workspacePrefix", "hostname", "project")
AZURERM_KEYS = (
    "type",
    "storageAccountName",
    "containerName",
    "keyPrefix",
    "resourceGroupName",
    "subscriptionId",
    "tenantId",
    "useAzureadAuth",
    "useOidc",
)
KEYS = {"local": LOCAL_KEYS, "cloud": CLOUD_KEYS, "azurerm": AZURERM_KEYS}
DEFAULT_HOSTNAME = "app.terraform.io"
STATE_KEY_SUFFIX = ".tfstate"

STACK_SUFFIXES = ("-cluster", "-runtime")
"""Stack name suffixes (``gpucluster_cdk.stacks.common.cluster_stack_name`` / ``runtime_stack_name``); one
workspace per stack."""

WORKSPACE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
WORKSPACE_PREFIX = re.compile(r"^[A-Za-z0-9_-]*$")
WORKSPACE_NAME_MAX = 90
ORGANIZATION_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
PROJECT_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_ -]+[A-Za-z0-9_-]$")
PROJECT_NAME_MAX = 40
HOSTNAME = re.compile(
    r"^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?$"
)
STORAGE_ACCOUNT_NAME = r"[a-z0-9]{3,24}"
CONTAINER_NAME = r"(?=.{3,63}\Z)[a-z0-9]+(-[a-z0-9]+)*"
RESOURCE_GROUP_NAME = r"[A-Za-z0-9_().-]{0,89}[A-Za-z0-9_()-]"
KEY_PREFIX = r"(?!/)(?!.*//)(?!(.*/)?\.\.?/)[A-Za-z0-9._/-]*"
GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
BLOB_NAME_MAX = 1024
"""Patterns of the ``azurerm`` fields, matched whole (``re.fullmatch``: no trailing newline slips
through); sources in the module docstring."""

CREDENTIAL_KEYS = (
    "token",
    "password",
    "credentials",
    "apiToken",
    "accessKey",
    "access_key",
    "sasToken",
    "sas_token",
    "clientSecret",
    "client_secret",
    "clientCertificatePassword",
    "client_certificate_password",
    "oidcToken",
    "oidc_token",
    "oidcRequestToken",
    "oidc_request_token",
)
"""Keys refused in any backend mapping: a secret never goes into the cluster file (nor into the
synthesized JSON, which carries the backend block)."""
_DOCS = "see docs/cluster-file.md (backend)"
_AZURE_CREDENTIALS_FIX = (
    "remove it; with Entra ID auth (useAzureadAuth, the default) Terraform signs in with `az login`, a managed identity, "
    "or OIDC in CI (useOidc: true, with ARM_CLIENT_ID and ARM_TENANT_ID in the environment); an access key or SAS token, "
    "if you must use one, goes in the ARM_ACCESS_KEY or ARM_SAS_TOKEN environment variable"
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
    fields = Where(file, cluster).fields(
        raw,
        key,
        allowed="{type: local} or {type: cloud, organization: ORG, workspacePrefix: PREFIX}",
        fix=_DOCS,
    )
    secret = sorted(k for k in raw if k in CREDENTIAL_KEYS)
    if secret:
        raise GpuclusterError(
            f"'{key}.{secret[0]}': credentials do not belong in the cluster file",
            key=f"{key}.{secret[0]}",
            fix=_AZURE_CREDENTIALS_FIX
            if raw.get("type") == "azurerm"
            else "remove it; Terraform reads the token from `terraform login` or the TF_TOKEN_<hostname> environment variable "
            "(e.g. TF_TOKEN_app_terraform_io)",
            **w,
        )
    if "type" not in raw:
        raise GpuclusterError(
            f"missing key '{key}.type'", key=f"{key}.type", allowed=", ".join(BACKEND_TYPES), **w
        )
    kind = raw["type"]
    if kind not in BACKEND_TYPES:
        raise GpuclusterError(
            f"unknown backend type {kind!r}",
            key=f"{key}.type",
            allowed=", ".join(BACKEND_TYPES),
            fix="use 'local' (state files next to cdktf.out), 'cloud' (HCP Terraform / Terraform Enterprise) or 'azurerm' "
            "(an Azure Storage account)",
            **w,
        )
    fields.check_keys(KEYS[kind], context=f"for backend type '{kind}'", fix=_DOCS)
    if kind == "local":
        return None

    def text(name: str, *, required: bool, empty_ok: bool = False) -> str | None:
        if required and fields.get(name) is None:
            raise fields.error(
                name,
                f"missing key '{key}.{name}' (required for backend type '{kind}')",
                fix=f"set {name} (see docs/cluster-file.md, backend)",
            )
        return fields.get_str(name, empty_ok=empty_ok)

    if kind == "azurerm":
        return _parse_azurerm(fields, text, key=key, w=w)
    organization = text("organization", required=True) or ""
    if not ORGANIZATION_NAME.fullmatch(organization):
        raise GpuclusterError(
            f"invalid organization name {organization!r}",
            key=f"{key}.organization",
            allowed="letters, digits, '-', '_' and '.'",
            **w,
        )
    prefix = text("workspacePrefix", required=True, empty_ok=True) or ""
    if not WORKSPACE_PREFIX.fullmatch(prefix):
        raise GpuclusterError(
            f"invalid workspacePrefix {prefix!r}: workspace names are <workspacePrefix><stack name>",
            key=f"{key}.workspacePrefix",
            allowed="letters, digits, '-' and '_' (HCP Terraform workspace names)",
            **w,
        )
    hostname = text("hostname", required=False) or DEFAULT_HOSTNAME
    if not HOSTNAME.fullmatch(hostname):
        raise GpuclusterError(
            f"invalid hostname {hostname!r}",
            key=f"{key}.hostname",
            allowed="a host name with an optional :port, no scheme or path (e.g. app.terraform.io, tfe.example.com)",
            **w,
        )
    project = text("project", required=False)
    if project is not None and (
        len(project) > PROJECT_NAME_MAX or not PROJECT_NAME.fullmatch(project)
    ):
        raise GpuclusterError(
            f"invalid project name {project!r}",
            key=f"{key}.project",
            allowed=f"3 to {PROJECT_NAME_MAX} characters: letters, digits, spaces, '-' and '_', "
            "not starting or ending with a space",
            **w,
        )
    return {
        "type": "cloud",
        "organization": organization,
        "workspacePrefix": prefix,
        "hostname": hostname,
        "project": project,
    }


_AZ_LIST = {
    "storageAccountName": "az storage account list --query [].name",
    "containerName": "az storage container list --auth-mode login --account-name ACCOUNT --query [].name",
    "resourceGroupName": "az group list --query [].name",
}


def _parse_azurerm(raw: Fields, text: Any, *, key: str, w: Mapping[str, Any]) -> dict[str, Any]:
    """The ``azurerm`` fields of ``raw`` (``text``: :func:`parse_backend`'s string reader), each
    matched whole against its pattern (module docstring)."""

    def checked(
        name: str,
        pattern: str,
        allowed: str,
        *,
        required: bool,
        empty_ok: bool = False,
        fix: str = "",
    ) -> str | None:
        value = text(name, required=required, empty_ok=empty_ok)
        if value is not None and not re.fullmatch(pattern, value):
            raise GpuclusterError(
                f"invalid {name} {value!r}",
                key=f"{key}.{name}",
                allowed=allowed,
                fix=fix
                or f"name it as `{_AZ_LIST[name]}` shows it (see docs/cluster-file.md, backend)",
                **w,
            )
        return value

    def flag(name: str) -> bool | None:
        return raw.get_bool(name)

    account = checked(
        "storageAccountName",
        STORAGE_ACCOUNT_NAME,
        "3 to 24 lowercase letters and digits (Azure storage account names)",
        required=True,
    )
    container = checked(
        "containerName",
        CONTAINER_NAME,
        "3 to 63 lowercase letters, digits and '-', starting and ending with "
        "a letter or digit, no '--' (Azure container names)",
        required=True,
    )
    prefix = (
        checked(
            "keyPrefix",
            KEY_PREFIX,
            "letters, digits, '.', '_', '-' and '/' between path segments (no '.' or '..' "
            "segment, no leading or doubled '/'), e.g. gpucluster/",
            required=False,
            empty_ok=True,
            fix="write a blob path prefix such as gpucluster/ or team-a/gpu-",
        )
        or ""
    )
    group = checked(
        "resourceGroupName",
        RESOURCE_GROUP_NAME,
        "1 to 90 letters, digits, '_', '-', '.', '(' and ')', not "
        "ending in '.' (Azure resource group names)",
        required=False,
    )
    subscription = checked(
        "subscriptionId",
        GUID,
        "a GUID, e.g. 00000000-0000-0000-0000-000000000000",
        required=False,
        fix="write the subscription's id (az account show --query id), or leave it out to use ARM_SUBSCRIPTION_ID",
    )
    tenant = checked(
        "tenantId",
        GUID,
        "a GUID, e.g. 00000000-0000-0000-0000-000000000000",
        required=False,
        fix="write the tenant's id (az account show --query tenantId), or leave it out to use ARM_TENANT_ID",
    )
    azuread = flag("useAzureadAuth")
    return {
        "type": "azurerm",
        "storageAccountName": account,
        "containerName": container,
        "keyPrefix": prefix,
        "useAzureadAuth": True if azuread is None else azuread,
        "resourceGroupName": group,
        "subscriptionId": subscription,
        "tenantId": tenant,
        "useOidc": flag("useOidc"),
    }


PLACEHOLDERS: dict[tuple[str, str], str] = {
    ("azurerm", "storageAccountName"): "tfstate0example",
    ("cloud", "organization"): "my-organization",
}
"""``{(backend type, key): value}``: what ``gpucluster init`` writes where only the user knows the
name (its templates render these); a plan that still has one gets a ``BACKEND-PLACEHOLDER``
warning (:func:`placeholder_findings`)."""


def placeholder_findings(cluster: Any) -> list[Any]:
    """A ``warning[BACKEND-PLACEHOLDER]`` :class:`~gpucluster.model.Finding` for each
    :data:`PLACEHOLDERS` value still in ``cluster.backend`` (a ClusterSpec): plan and synth
    work, but the first ``terraform init`` fails or, worse, writes state to a stranger's
    account or organization of that name."""
    from gpucluster.model import Finding

    backend = cluster.backend or {}
    out = []
    for (kind, key), value in PLACEHOLDERS.items():
        if backend.get("type") == kind and backend.get(key) == value:
            where = cluster.backend_key or "backend"
            out.append(
                Finding(
                    "BACKEND-PLACEHOLDER",
                    "warning",
                    cluster.name,
                    "",
                    f"{where}.{key}",
                    f"backend {key} is still {value!r}, the example `gpucluster init` wrote: "
                    "terraform init would look for a "
                    + ("storage account" if kind == "azurerm" else "HCP Terraform organization")
                    + " of that name, which is not yours",
                    f"set {where}.{key} to your "
                    + (
                        "storage account's name (az storage account list --query [].name)"
                        if kind == "azurerm"
                        else "HCP Terraform organization's name (app.terraform.io, Organizations)"
                    ),
                    file=cluster.source,
                )
            )
    return out


def is_cloud(backend: Mapping[str, Any] | None) -> bool:
    """Whether ``backend`` (normalized, None = local) is HCP Terraform / Terraform Enterprise."""
    return backend is not None and backend.get("type") == "cloud"


def state_key(backend: Mapping[str, Any], stack_name: str) -> str:
    """The ``azurerm`` blob of one stack: ``<keyPrefix><stack_name>.tfstate``
    (``gpucluster/gpu-training-runtime.tfstate`` for ``keyPrefix: gpucluster/``)."""
    return f"{backend['keyPrefix']}{stack_name}{STATE_KEY_SUFFIX}"


def _stack_names(cluster: str) -> list[str]:
    return [f"{cluster}{suffix}" for suffix in STACK_SUFFIXES]


def prefix_key(backend_key: str, backend: Mapping[str, Any] | None) -> str:
    """The key to blame for a name derived from ``backend``'s prefix: ``<backend_key>.keyPrefix``
    for ``azurerm``, else ``<backend_key>.workspacePrefix``."""
    return f"{backend_key}.{'keyPrefix' if backend is not None and backend.get('type') == 'azurerm' else 'workspacePrefix'}"


def workspace_name(backend: Mapping[str, Any], stack_name: str) -> str:
    """The HCP Terraform workspace of one stack: ``<workspacePrefix><stack_name>``."""
    return f"{backend['workspacePrefix']}{stack_name}"


def workspace_names(backend: Mapping[str, Any], cluster: str) -> list[str]:
    """The workspaces of a cluster's stacks, ``[<prefix><cluster>-cluster, <prefix><cluster>-runtime]``."""
    return [workspace_name(backend, f"{cluster}{suffix}") for suffix in STACK_SUFFIXES]


def check_workspaces(
    backend: Mapping[str, Any] | None, *, cluster: str, file: str, key: str
) -> None:
    """Refuse workspace names HCP Terraform would refuse (per cluster: they contain its name), and
    ``azurerm`` state blob names longer than Azure allows.

    Args:
        backend: the normalized backend of the cluster (``None``: local, nothing to check).
        cluster: the cluster name.
        key: the key path to blame (``clusters[i].backend.workspacePrefix`` or
            ``backend.workspacePrefix`` when the top-level default applies).

    Raises:
        GpuclusterError: a workspace name longer than 90 characters or with other characters
            than letters, digits, ``-`` and ``_``; a blob name longer than 1,024 characters.
    """
    if backend is None:
        return
    if backend.get("type") == "azurerm":
        for stack in _stack_names(cluster):
            blob = state_key(backend, stack)
            if len(blob) > BLOB_NAME_MAX:
                raise GpuclusterError(
                    f"state blob name {blob!r} is {len(blob)} characters; Azure allows at most {BLOB_NAME_MAX}",
                    file=file,
                    cluster=cluster,
                    key=key,
                    fix="shorten keyPrefix",
                )
        return
    for name in workspace_names(backend, cluster):
        if not WORKSPACE_NAME.fullmatch(name):
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


def check_unique_workspaces(
    entries: Iterable[tuple[str, Mapping[str, Any] | None, str]], *, file: str
) -> None:
    """Refuse two stacks that would share one workspace or one ``azurerm`` state blob.

    Args:
        entries: ``(cluster name, normalized backend, key path of its prefix)`` in file order.

    Raises:
        GpuclusterError: ``<prefix><stack>`` collides on the same hostname and organization
            (e.g. an empty prefix with cluster ``a-b`` and prefix ``a-`` with cluster ``b``), or
            in the same storage account and container, naming the later cluster.
    """
    seen: dict[tuple[str, ...], str] = {}
    where: tuple[str, ...]
    for cluster, backend, key in entries:
        if backend is None:
            continue
        if backend.get("type") == "azurerm":
            for stack in _stack_names(cluster):
                blob = state_key(backend, stack)
                where = ("azurerm", backend["storageAccountName"], backend["containerName"], blob)
                if where in seen:
                    raise GpuclusterError(
                        f"state blob '{blob}' in container '{backend['containerName']}' of storage account "
                        f"'{backend['storageAccountName']}' is used by cluster '{seen[where]}' too; one blob holds one stack's state",
                        file=file,
                        cluster=cluster,
                        key=key,
                        fix="give the clusters key prefixes that cannot collide",
                    )
                seen[where] = cluster
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
