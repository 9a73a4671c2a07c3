"""``gpucluster init [DIR]``: a project folder the user owns and commits.

It writes, from the Jinja2 templates in ``gpucluster/templates/init/`` (package data, versioned
with the tool):

* ``cdktf.json`` -- the CDK for Terraform project; its ``app`` is ``python -m gpucluster_cdk``,
  the *installed* app (no copy of gpucluster's code in the project);
* ``gpucluster.yaml`` -- a commented, valid cluster file for the chosen platform and intent, with
  the chosen Terraform backend;
* ``requirements.txt`` -- ``gpucluster[cdk,render,validate]==<this version>``;
* ``.gitignore`` -- ``cdktf.out/``, ``.terraform/``, local state files, ``.venv/``;
* ``README.md`` -- the next commands (set up, plan, lint, synth, deploy and what deploying needs);
* optionally a CI workflow: ``.github/workflows/gpucluster.yml`` (GitHub Actions) or
  ``azure-pipelines.yml`` (Azure Pipelines), running plan, charts pull, lint and synth and keeping
  ``cdktf.out`` as an artifact.

The choices are tables (:data:`SERVICES`, :data:`BACKENDS`, :data:`CI_PROVIDERS`): adding a
backend is one :class:`BackendChoice` entry and its template under ``backends/``.

It never overwrites a file: every target is checked before the first one is written, and a
target that exists is one ``error[init.exists]`` line naming them all (exit 2, nothing written).
A write that fails half-way removes what this run wrote.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpucluster.errors import GpuclusterError, Problem
from gpucluster.inputs.backends import PLACEHOLDERS

TEMPLATES = Path(__file__).parent / "templates" / "init"


@dataclass(frozen=True)
class ServiceChoice:
    """One ``--service`` of ``gpucluster init``.

    Attributes:
        service: the criteria service (a platform plugin must declare it).
        template: the cluster entry's template, relative to :data:`TEMPLATES`.
        summary: what the cluster file describes, for the project's README (one phrase).
        provisions: True when gpucluster creates the cluster (a ``<name>-cluster`` stack).
    """

    service: str
    template: str
    summary: str
    provisions: bool


@dataclass(frozen=True)
class BackendChoice:
    """One ``--backend`` of ``gpucluster init``: where Terraform keeps each stack's state.

    Attributes:
        name: the cluster file's ``backend.type``.
        template: the ``backend:`` section's template, relative to :data:`TEMPLATES`.
        readme: one sentence for the project's README (where the state is, what it needs).
        synth_needs_terraform: the CI workflow installs the Terraform CLI before synth (the
            ``cloud`` block is checked with ``terraform version`` while synthesizing).
    """

    name: str
    template: str
    readme: str
    synth_needs_terraform: bool = False


@dataclass(frozen=True)
class CiChoice:
    """One ``--ci`` of ``gpucluster init``.

    Attributes:
        name: the option value.
        title: the CI system's name, for the README.
        path: the workflow file, relative to the project folder (None: no workflow).
        template: its template, relative to :data:`TEMPLATES`.
    """

    name: str
    title: str
    path: str | None = None
    template: str | None = None


SERVICES: dict[str, ServiceChoice] = {
    s.service: s
    for s in (
        ServiceChoice(
            "aks",
            "clusters/aks.yaml.j2",
            "an AKS cluster with an H100 GPU pool, which gpucluster creates, and "
            "NVIDIA's GPU stack on it",
            provisions=True,
        ),
        ServiceChoice(
            "nvke",
            "clusters/nvke.yaml.j2",
            "NVIDIA's GPU and network stack on an existing NVKE GB200 cluster",
            provisions=False,
        ),
        ServiceChoice(
            "oke",
            "clusters/oke.yaml.j2",
            "NVIDIA's GPU stack on an existing OKE GB200 cluster",
            provisions=False,
        ),
    )
}
"""``--service`` choices, in ``--help`` order."""

BACKENDS: dict[str, BackendChoice] = {
    b.name: b
    for b in (
        BackendChoice(
            "local",
            "backends/local.yaml.j2",
            "`terraform.<stack>.tfstate` files in this folder (backend `local`, git-ignored): keep them, "
            "they are the only record of what Terraform created; a team uses a shared backend.",
        ),
        BackendChoice(
            "cloud",
            "backends/cloud.yaml.j2",
            "HCP Terraform workspaces, one per stack (backend `cloud`); `terraform login` or "
            "`TF_TOKEN_app_terraform_io` signs Terraform in.",
            synth_needs_terraform=True,
        ),
        BackendChoice(
            "azurerm",
            "backends/azurerm.yaml.j2",
            "blobs in an Azure Storage container, one per stack (backend `azurerm`, Entra ID auth): "
            "replace the storage account, container and resource group names in gpucluster.yaml "
            "with yours before the first `terraform init`.",
        ),
    )
}
"""``--backend`` choices (the cluster file's ``backend.type``), in ``--help`` order."""

CI_PROVIDERS: dict[str, CiChoice] = {
    c.name: c
    for c in (
        CiChoice("none", "no CI"),
        CiChoice(
            "github", "GitHub Actions", ".github/workflows/gpucluster.yml", "ci/github.yml.j2"
        ),
        CiChoice(
            "azure-pipelines", "Azure Pipelines", "azure-pipelines.yml", "ci/azure-pipelines.yml.j2"
        ),
    )
}
"""``--ci`` choices, in ``--help`` order."""

INTENTS = ("training", "inference")
DEFAULTS = {"service": "aks", "intent": "training", "backend": "local", "ci": "none"}


@dataclass(frozen=True)
class InitOptions:
    """What ``gpucluster init`` was asked for (the CLI's options, checked by :func:`check_options`)."""

    service: str = DEFAULTS["service"]
    intent: str = DEFAULTS["intent"]
    backend: str = DEFAULTS["backend"]
    ci: str = DEFAULTS["ci"]
    name: str | None = None

    @property
    def cluster_name(self) -> str:
        """``--name``, default ``<service>-<intent>`` (``aks-training``)."""
        return self.name or f"{self.service}-{self.intent}"


def check_options(options: InitOptions) -> None:
    """Refuse a choice gpucluster cannot make a valid project of.

    Raises:
        GpuclusterError: an unknown service/backend/CI provider (key ``--service``, ``--backend``,
            ``--ci``); a service no loaded plugin declares; an intent the service's platform
            declares no recipes for (``--intent``: NVKE has training recipes only); a cluster name
            that is not a DNS label of at most 40 characters (``--name``).
    """
    from gpucluster.inputs.config import CLUSTER_NAME, CLUSTER_NAME_MAX
    from gpucluster.plugins import platform_for

    for key, value, table in (
        ("--service", options.service, SERVICES),
        ("--backend", options.backend, BACKENDS),
        ("--ci", options.ci, CI_PROVIDERS),
    ):
        if value not in table and key == "--service" and value in _loaded_services():
            raise GpuclusterError(
                f"platform '{value}' is loaded from a plugin, but gpucluster init has project "
                "templates for the built-in platforms only",
                key=key,
                allowed=", ".join(table),
                fix=f"run 'gpucluster init --service {next(iter(table))}', then set the cluster's "
                f"criteria.service: {value} and the keys its plugin documents (docs/cluster-file.md; "
                "docs/plugins.md, What a plugin cannot do)",
            )
        if value not in table:
            raise GpuclusterError(
                f"unknown {key[2:]} '{value}'",
                key=key,
                allowed=", ".join(table),
                fix=f"choose one of the {key[2:]} values gpucluster init knows",
            )
    platform = platform_for(options.service, key="--service")
    intents = tuple(platform.intents or INTENTS)
    if options.intent not in intents:
        raise GpuclusterError(
            f"service '{options.service}' has no recipes for intent '{options.intent}'",
            key="--intent",
            allowed=", ".join(intents),
            fix=f"use one of the intents the {options.service} platform declares",
        )
    name = options.cluster_name
    if not CLUSTER_NAME.fullmatch(name) or len(name) > CLUSTER_NAME_MAX:
        raise GpuclusterError(
            f"cluster name {name!r} is not a DNS label of at most {CLUSTER_NAME_MAX} characters",
            key="--name",
            allowed="lowercase letters, digits and '-', starting with a letter, not ending in '-'",
            fix="give --name a name such as research or gpu-training",
        )


def _loaded_services() -> set[str]:
    """The services of every loaded platform plugin (built-in and third-party)."""
    from gpucluster.plugins import platforms

    return set(platforms())


def render_project(options: InitOptions, title: str) -> dict[str, str]:
    """The project's files: ``{relative path: text}``, in the order they are written.

    Args:
        options: checked choices (:func:`check_options`).
        title: the README's heading (the project folder's name).
    """
    import jinja2

    from gpucluster import __version__
    from gpucluster.plugins import platforms

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    service, backend, ci = (
        SERVICES[options.service],
        BACKENDS[options.backend],
        CI_PROVIDERS[options.ci],
    )
    name = options.cluster_name
    platform = platforms().get(options.service)
    stacks = [f"{name}-cluster", f"{name}-runtime"] if service.provisions else [f"{name}-runtime"]
    context = {
        "version": __version__,
        "service": options.service,
        "intent": options.intent,
        "name": name,
        "title": title,
        "summary": service.summary,
        "backend": backend,
        "ci": ci,
        "project_id": f"gpucluster-{name}",
        "backend_template": backend.template,
        "cluster_template": service.template,
        "stacks": stacks,
        "region": (platform.default_region if platform is not None else None) or "",
        "placeholder": {f"{kind}.{key}": value for (kind, key), value in PLACEHOLDERS.items()},
    }
    files = {
        "cdktf.json": "cdktf.json.j2",
        "gpucluster.yaml": "gpucluster.yaml.j2",
        "requirements.txt": "requirements.txt.j2",
        ".gitignore": "gitignore.j2",
        "README.md": "README.md.j2",
    }
    if ci.path and ci.template:
        files[ci.path] = ci.template
    return {path: env.get_template(template).render(context) for path, template in files.items()}


def init_project(folder: str | os.PathLike, options: InitOptions) -> list[Path]:
    """Create the project in ``folder`` (made when missing); returns the files written, in order.

    Raises:
        GpuclusterError: a bad choice (:func:`check_options`); ``folder`` is not a folder
            or cannot be resolved (a symbolic-link loop, a name too long), or a folder inside it
            a file would be written through is a symbolic link (``error[init.folder]``, nothing
            written); a target file exists (``error[init.exists]``, every one
            named, nothing written); a write failed (``error[output]``, what this run wrote removed).
    """
    check_options(options)
    root = Path(folder)
    try:
        if root.exists() and not root.is_dir():
            raise GpuclusterError(
                f"'{root}' is not a folder",
                file=str(root),
                id="init.folder",
                key="DIR",
                fix="name a new or existing folder for the project",
            )
        absolute = root.resolve(strict=False)
    except (OSError, RuntimeError) as err:  # a symbolic-link loop, a name too long (ENAMETOOLONG)
        raise GpuclusterError(
            f"cannot use '{root}' as the project folder: "
            + (
                err.strerror
                if isinstance(err, OSError) and err.strerror
                else "a symbolic-link loop"
            ),
            file=str(root),
            id="init.folder",
            key="DIR",
            fix="name a new or existing folder whose path resolves (no symbolic-link loop, "
            "each name at most 255 bytes)",
        ) from None
    files = render_project(options, absolute.name or "gpucluster project")
    _refuse_links_out(root, files)
    existing = [rel for rel in files if os.path.lexists(root / rel)]
    if existing:
        raise GpuclusterError(
            problems=[
                Problem(
                    message=f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''} in {absolute}; "
                    "gpucluster init never overwrites a file, so it wrote nothing",
                    file=str(root / existing[0]),
                    id="init.exists",
                    fix="run gpucluster init in a new or empty folder (gpucluster init DIR), or move those files away first",
                )
            ]
        )
    return _write_all(root, files)


def _refuse_links_out(root: Path, files: Mapping[str, str]) -> None:
    """Refuse a folder inside the project that a target would be written through when it is a
    symbolic link (``.github -> /elsewhere``): writing through it would put the file outside the
    project. The project folder itself may be a link (the user named it).

    Raises:
        GpuclusterError: ``error[init.folder]`` naming the link, nothing written.
    """
    for rel in files:
        parent = Path(rel).parent
        for depth in range(1, len(parent.parts) + 1):
            folder = root.joinpath(*parent.parts[:depth])
            if folder.is_symlink():
                raise GpuclusterError(
                    f"'{folder}' is a symbolic link; gpucluster init writes no file through a "
                    f"link (it would write {rel} outside the project), so it wrote nothing",
                    file=str(folder),
                    id="init.folder",
                    key="DIR",
                    fix=f"replace the link {folder} with a folder, or run gpucluster init in a new folder",
                )


def _write_all(root: Path, files: Mapping[str, str]) -> list[Path]:
    """Write every file with exclusive creation (a file that appeared meanwhile is never
    replaced); on any failure remove what was written and the folders made, then raise."""
    made: list[Path] = []
    written: list[Path] = []
    try:
        for rel, text in files.items():
            target = root / rel
            _refuse_links_out(root, {rel: text})  # a link made since the first check
            missing = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            made.extend(reversed(missing))
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            with open(fd, "w", encoding="utf-8") as handle:
                written.append(target)
                handle.write(text)
    except (OSError, GpuclusterError) as err:
        for path in reversed(written):
            path.unlink(missing_ok=True)
        for path in reversed(made):
            try:
                path.rmdir()
            except OSError:
                pass
        if isinstance(err, GpuclusterError):
            raise
        what = (
            "already exists"
            if isinstance(err, FileExistsError)
            else (err.strerror or type(err).__name__)
        )
        raise GpuclusterError(
            problems=[
                Problem(
                    message=f"could not write {err.filename or root}: {what}; gpucluster init removed what it had written",
                    file=str(err.filename or root),
                    id="output",
                    key="DIR",
                    fix="make the folder writable (or free space), or choose another folder",
                )
            ]
        ) from None
    return written
