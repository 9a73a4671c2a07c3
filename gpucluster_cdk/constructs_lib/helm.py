"""Helm release constructs (``hashicorp/helm`` 3.1.1 via cdktf-cdktf-provider-helm 12.x).

* :class:`HelmComponent`  -- one ``helm_release`` of a remote chart (HTTPS or OCI repository).
* :class:`LocalChartRelease` -- one ``helm_release`` of a generated chart
  (:class:`gpucluster.model.LocalChart`), shipped inside the stack's own output folder as a
  ``TerraformAsset`` so it travels with the stack to remote runs (Terraform Cloud).

Both render the values document they are given (``values_yaml``: ONE YAML document, rendered by
the caller -- the stacks use ``gpucluster.values.values_yaml``, the text ``gpucluster render``
shares -- and Terraform-escaped here, :func:`values_document`), pin the chart
version, create their namespace, wait for resources (and Jobs, for gates) and depend on
exactly the releases they are given. The Terraform resource name is the release name
(``helm_release.<release name>``), so plans read like the release graph.

Terraform-variable-bound values (``set_entries``: one :class:`SetEntry` per dotted values path,
computed by the caller) become a stack-level ``TerraformVariable`` (default: the value at that
path, if any) and a ``set`` entry, so they can be chosen at plan time (``-var``, workspace
variables).

This module imports nothing from ``gpucluster`` but the plain :class:`gpucluster.model.LocalChart`
type it is given (tests/test_constructs_imports.py): the mapping from a plan to these props lives
in ``gpucluster_cdk/stacks/runtime.py``.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from gpucluster.model import LocalChart, scalar_type
from gpucluster_cdk.constructs_lib.cdk import (
    AssetType,
    Construct,
    Precondition,
    TerraformAsset,
    TerraformResourceLifecycle,
    TerraformStack,
    TerraformVariable,
    TerraformVariableValidationConfig,
    add_validation,
    helm,
)
from gpucluster_cdk.constructs_lib.tfstring import literal

STAGING_CONTEXT_KEY = "gpucluster:stagingDir"
"""Construct context key: absolute folder where local charts are staged before synth copies
them into ``<outdir>/stacks/<stack>/assets/``. Unset: a per-process temporary folder."""

DEFAULT_TIMEOUT_SECONDS = 900

_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_PINNED_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
_TF_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TF_RESERVED_VARIABLE_NAMES = {
    "source",
    "version",
    "providers",
    "count",
    "for_each",
    "lifecycle",
    "depends_on",
    "locals",
}
HELM_RELEASE_NAME_MAX = 53
"""Helm's limit on release names."""


# --------------------------------------------------------------------------- helpers


_VALUES_DOCUMENTS: dict[str, str] = {}


def values_document(text: str) -> str:
    """The values document ``text`` (YAML) safe inside Terraform JSON: Terraform template
    sequences ``${`` / ``%{`` are escaped (``$${``, ``%%{``, :func:`gpucluster_cdk.constructs_lib.tfstring.literal`)
    so literal values like ``${HOSTNAME}`` reach Helm unchanged. Each distinct text is escaped
    once per process (many releases share a document)."""
    hit = _VALUES_DOCUMENTS.get(text)
    if hit is None:
        hit = _VALUES_DOCUMENTS[text] = literal(text)
    return hit


def chart_source(repository: str, chart: str) -> tuple[str, str]:
    """``(repository, chart)`` as the Helm provider wants them.

    * ``https://repo`` + ``name``: unchanged.
    * OCI: ``repository = "oci://registry/path"``, ``chart = "name"``; a chart given as a full
      ``oci://registry/path/name`` reference is split that way.
    """
    repository = (repository or "").strip()
    chart = (chart or "").strip()
    if chart.startswith("oci://"):
        ref, _, name = chart.rstrip("/").rpartition("/")
        if repository and repository.rstrip("/") != ref:
            return repository, chart  # contradictory; validate_release reports it
        return ref, name
    if repository.startswith("oci://"):
        return repository.rstrip("/"), chart
    return repository, chart


_PROCESS_STAGING: list[Path] = []


def _process_staging_root() -> Path:
    if not _PROCESS_STAGING:
        root = Path(tempfile.mkdtemp(prefix="gpucluster-charts-"))
        atexit.register(shutil.rmtree, root, True)
        _PROCESS_STAGING.append(root)
    return _PROCESS_STAGING[0]


def _folder_name(name: str) -> str:
    """``name`` when it is a plain name (a valid release name); otherwise a stand-in derived from
    it, so an invalid name (refused by validation at synth) never leads outside the staging folder."""
    if _RELEASE_NAME.fullmatch(name or "") and len(name) <= HELM_RELEASE_NAME_MAX:
        return name
    return (
        "invalid-"
        + hashlib.sha256(b"name\0" + (name or "").encode("utf-8") + b"\0").hexdigest()[:16]
    )


_STAGED: dict[str, str] = {}
"""Staged chart folder (absolute path) -> the key of the files written into it, in this process."""


def chart_files_key(files: Mapping[str, str]) -> str:
    """sha256 hex of a chart's files (sorted relative paths and texts, each NUL-terminated): two
    charts with the same key have the same files, whatever their ``content_hash`` says."""
    digest = hashlib.sha256()
    for rel, text in sorted(files.items()):
        digest.update(
            rel.encode("utf-8", "surrogatepass")
            + b"\0"
            + text.encode("utf-8", "surrogatepass")
            + b"\0"
        )
    return digest.hexdigest()


def staging_folder(
    scope: Construct, stack_id: str, release_name: str, files_key: str | None = None
) -> Path:
    """Folder to stage one local chart in, always inside the staging folder (a name that is not a
    valid release name is replaced by a stand-in; validation refuses it at synth).

    With context ``gpucluster:stagingDir`` (set by ``gpucluster_cdk.stacks.build_app``, one folder per synth):
    ``<stagingDir>/<release>/<files_key>`` when ``files_key`` (:func:`chart_files_key`) is given --
    shared by every stack that ships the same files under that release name (a fleet stages each
    distinct chart once, not once per cluster; :meth:`LocalChartRelease.__init__` writes the files
    only into a folder it has not filled in this process) -- else ``<stagingDir>/<stack>/<release>``,
    emptied. Without the context: a fresh folder under a per-process temporary directory, so two
    Apps in one process never share a folder. Nothing of this path reaches the output (cdktf copies
    the folder to ``stacks/<stack>/assets/<construct id>/<hash>/``).
    """
    stack_id, release_name = _folder_name(stack_id), _folder_name(release_name)
    ctx = _stack_memo(
        TerraformStack.of(scope) if not isinstance(scope, TerraformStack) else scope,
        "staging_context",
        lambda: scope.node.try_get_context(STAGING_CONTEXT_KEY),
    )
    if ctx:
        folder = (
            Path(ctx) / release_name / files_key
            if files_key
            else Path(ctx) / stack_id / release_name
        )
        if files_key and _STAGED.get(str(folder)) == files_key and folder.is_dir():
            return folder
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder
    parent = _process_staging_root() / stack_id
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{release_name}-", dir=parent))


# --------------------------------------------------------------------------- props


@dataclass(frozen=True)
class SetEntry:
    """One Terraform-variable-bound ``helm_release.set`` entry.

    Attributes:
        path: the dotted values path Helm sets.
        variable: the Terraform variable's name (an identifier, validated at synth).
        default: the variable's default, the value at ``path`` (None: the variable is required).
        set_type: ``"string"`` (Helm parses the value like ``--set-string``) or ``"auto"`` (``--set``).
        present: the values hold ``path`` (a list/map or null there cannot be bound: refused).
    """

    path: str
    variable: str
    default: Any = None
    set_type: str = "string"
    present: bool = False


@dataclass(frozen=True)
class CrdBundleSource:
    """The chart whose CRDs a CRD step release receives from Terraform (``helm_template`` with
    ``include_crds``; see :meth:`LocalChartRelease._crd_bundle`).

    Attributes:
        repository / chart / version: the chart at its pinned version (see :func:`chart_source`).
        values_yaml: its values document (text, like :attr:`ReleaseOptions.values_yaml`).
        kube_version: ``helm template --kube-version`` (``1.34.0``).
        max_gz_bytes: largest base64 gzip bundle a plan-time precondition accepts.
    """

    repository: str
    chart: str
    version: str
    values_yaml: str
    kube_version: str
    max_gz_bytes: int


POSTRENDER_BINARY = "gpucluster"
"""The post-renderer Terraform's Helm provider runs for a cluster with ``images.mirror``: the
``gpucluster`` command on the ``PATH`` of the machine running ``terraform apply``."""


@dataclass(frozen=True)
class ReleaseOptions:
    """Options shared by both release constructs.

    Attributes:
        release_name: Helm release name (DNS-1123, <= 53 chars); also the Terraform resource name.
        namespace: release namespace, created by the release (``create_namespace``).
        values_yaml: the Helm values as one YAML document (text; ``{}`` by default).
        depends_on: releases to apply first (HelmComponent / LocalChartRelease constructs).
        timeout_seconds: Helm operation timeout (default 900 s).
        wait: wait for resources to be ready (default True).
        wait_for_jobs: also wait for Jobs to complete (readiness gates).
        create_namespace: create the namespace if missing (default True).
        set_entries: the Terraform-variable-bound values paths (:class:`SetEntry`, by path).
        variable_hashes: dotted values path -> :class:`gpucluster.model.VariableHash`; each
            becomes a ``set`` entry of type string whose value Terraform computes,
            ``sha256(jsonencode([base, var.v1, ...]))`` (:func:`variable_hash_expression`).
        crd_source: a CRD step's chart (:class:`CrdBundleSource`), else None.
        description: Helm release description.
        provider: Helm provider instance (default: the stack's default ``helm`` provider).
        image_mirror: the cluster's ``images.mirror``: the release gets Helm's post-renderer
            ``gpucluster postrender --image-mirror <mirror>`` (``helm_release.postrender``), which
            rewrites every image reference to the mirror (:mod:`gpucluster.charts.imagemirror`);
            '' (default): none.
    """

    release_name: str
    namespace: str
    values_yaml: str = "{}\n"
    depends_on: Sequence[Any] = ()
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS
    wait: bool = True
    wait_for_jobs: bool = False
    create_namespace: bool = True
    set_entries: Sequence[SetEntry] = ()
    variable_hashes: Mapping[str, Any] = field(default_factory=dict)
    crd_source: CrdBundleSource | None = None
    description: str = ""
    provider: Any = None
    image_mirror: str = ""


@dataclass(frozen=True)
class HelmComponentProps(ReleaseOptions):
    """A remote chart release: ``chart`` from ``repository`` at pinned ``version`` (the other
    attributes are :class:`ReleaseOptions`').

    Attributes:
        chart: the chart's name in the repository.
        repository: ``https://…`` or ``oci://registry/path`` (see :func:`chart_source`).
        version: one exact chart version.
    """

    chart: str = ""
    repository: str = ""
    version: str = ""


@dataclass(frozen=True)
class LocalChartReleaseProps(ReleaseOptions):
    """A generated chart release (the other attributes are :class:`ReleaseOptions`').

    Attributes:
        chart: the generated chart; its ``files`` are written out and shipped as an asset.
    """

    chart: LocalChart | None = None


def validate_release(props: ReleaseOptions) -> list[str]:
    """Problems common to both release kinds (empty list when valid)."""
    errors: list[str] = []
    name = props.release_name
    if not _RELEASE_NAME.fullmatch(name or "") or len(name) > HELM_RELEASE_NAME_MAX:
        errors.append(
            f"release name '{name}' must be lowercase letters, digits and '-', at most {HELM_RELEASE_NAME_MAX} characters"
        )
    if not _DNS_LABEL.fullmatch(props.namespace or ""):
        errors.append(f"namespace '{props.namespace}' of release '{name}' must be a DNS-1123 label")
    if props.timeout_seconds <= 0:
        errors.append(
            f"timeout_seconds of release '{name}' must be > 0 (got {props.timeout_seconds})"
        )
    for entry in props.set_entries:
        path, var = entry.path, entry.variable
        if not _TF_IDENTIFIER.fullmatch(var or "") or var in _TF_RESERVED_VARIABLE_NAMES:
            errors.append(
                f"Terraform variable name '{var}' (values path '{path}' of release '{name}') must be an identifier "
                f"(letters, digits, '_', '-') and not one of {', '.join(sorted(_TF_RESERVED_VARIABLE_NAMES))}"
            )
        if entry.present and scalar_type(entry.default) is None:
            errors.append(
                f"values path '{path}' of release '{name}' is bound to Terraform variable '{var}' but holds a "
                "list/map; only scalar values can be set from a variable"
            )
        elif entry.present and _splits_in_helm_set(entry.default):
            errors.append(
                f"values path '{path}' of release '{name}' is bound to Terraform variable '{var}' but its default "
                f"{entry.default!r} has a comma or a backslash, or starts with '{{': Helm's set entry would "
                "split it and the variable's validation would refuse it; do not bind this path to a variable"
            )
    for dep in props.depends_on:
        if not isinstance(dep, _ReleaseConstruct):
            errors.append(
                f"depends_on of release '{name}' must hold HelmComponent/LocalChartRelease constructs, got {type(dep).__name__}"
            )
    return errors


# --------------------------------------------------------------------------- constructs


class _ReleaseConstruct(Construct):
    """Common part: the ``helm_release`` resource and its Terraform variables."""

    release: Any
    release_name: str

    def _create_release(
        self,
        props: ReleaseOptions,
        *,
        chart: str,
        repository: str | None,
        version: str | None,
        extra_sets: Sequence[Any] = (),
        lifecycle: Any = None,
    ) -> None:
        h = helm()
        stack = _stack_of(self)
        if props.provider is None:
            ensure_helm_provider(stack)
        sets = []
        for entry in props.set_entries:
            variable = stack_variable(
                stack,
                entry.variable,
                default=entry.default,
                description=f"Helm value '{entry.path}' of release '{props.release_name}'",
                helm_set_string=True,
            )
            sets.append(
                h.ReleaseSet(
                    name=literal(entry.path), value=variable.string_value, type=entry.set_type
                )
            )
        for path, vh in sorted(props.variable_hashes.items()):
            for var_name, default in vh.variables:
                stack_variable(
                    stack,
                    var_name,
                    default=default,
                    helm_set_string=True,
                    description=f"Helm value read by '{path}' of release '{props.release_name}'",
                )
            sets.append(
                h.ReleaseSet(name=literal(path), value=variable_hash_expression(vh), type="string")
            )
        sets.extend(extra_sets)
        self.release_name = props.release_name
        self.release = h.Release(
            self,
            "release",
            name=literal(props.release_name),
            namespace=literal(props.namespace),
            create_namespace=props.create_namespace,
            chart=literal(chart),
            repository=literal(repository) if repository else None,
            version=literal(version) if version else None,
            values=[values_document(props.values_yaml)],
            set=sets or None,
            wait=props.wait,
            wait_for_jobs=props.wait_for_jobs,
            timeout=props.timeout_seconds,
            description=literal(props.description) if props.description else None,
            depends_on=[d.release for d in props.depends_on if isinstance(d, _ReleaseConstruct)]
            or None,
            provider=props.provider,
            lifecycle=lifecycle,
            postrender=h.ReleasePostrender(
                binary_path=POSTRENDER_BINARY,
                args=["postrender", "--image-mirror", literal(props.image_mirror)],
            )
            if props.image_mirror
            else None,
        )
        self.release.override_logical_id(props.release_name)


class HelmComponent(_ReleaseConstruct):
    """One ``helm_release`` of a remote chart (AICR component chart).

    Validation (at synth, with this construct's path): release/namespace names, pinned exact
    chart version (no ranges), repository scheme ``https``/``http``/``oci``, variable bindings.
    """

    def __init__(self, scope: Construct, id: str, props: HelmComponentProps):
        super().__init__(scope, id)
        self.__dict__["_gpucluster_scope"] = scope
        self.props = props
        repository, chart = chart_source(props.repository, props.chart)

        def check() -> list[str]:
            errors = validate_release(props)
            if not chart:
                errors.append(f"release '{props.release_name}' has no chart name")
            if not repository:
                errors.append(
                    f"release '{props.release_name}' has no chart repository (https:// or oci://)"
                )
            elif not repository.startswith(("https://", "http://", "oci://")):
                errors.append(
                    f"repository '{repository}' of release '{props.release_name}' must start with https://, http:// or oci://"
                )
            if chart.startswith("oci://"):
                errors.append(
                    f"chart '{chart}' of release '{props.release_name}' names another registry than repository '{repository}'"
                )
            if not _PINNED_VERSION.fullmatch(props.version or ""):
                errors.append(
                    f"chart version '{props.version}' of release '{props.release_name}' must be one exact version "
                    "(e.g. v26.7.1 or 0.19.0), not a range or empty"
                )
            return errors

        add_validation(self, check, stack=_stack_of(self))
        self._create_release(props, chart=chart, repository=repository, version=props.version)


class LocalChartRelease(_ReleaseConstruct):
    """One ``helm_release`` of a generated chart, shipped as a directory ``TerraformAsset``.

    The chart files are written to a staging folder (:func:`staging_folder`; it never appears in
    the output; with the synth's staging context each distinct chart is written once per process
    and shared by the stacks that ship it); cdktf copies them to
    ``stacks/<stack>/assets/<id>/<hash>/`` and ``chart`` is that relative path, so the stack folder
    is self-contained. ``<hash>`` is the chart's ``content_hash`` (the sha256 of its files,
    first 32 hex digits): same content, same path.

    Attributes:
        asset: the TerraformAsset; ``chart_path``: the relative chart path used by the release.
    """

    def __init__(self, scope: Construct, id: str, props: LocalChartReleaseProps):
        super().__init__(scope, id)
        self.__dict__["_gpucluster_scope"] = scope
        self.props = props
        chart = props.chart
        files = dict(chart.files) if chart is not None else {}
        bad_paths = [p for p in files if not _safe_relative(p)]

        def check() -> list[str]:
            errors = validate_release(props)
            if chart is None:
                errors.append(f"release '{props.release_name}' has no local chart")
                return errors
            if "Chart.yaml" not in files:
                errors.append(
                    f"local chart '{chart.name}' of release '{props.release_name}' has no Chart.yaml"
                )
            for p in bad_paths:
                errors.append(
                    f"local chart '{chart.name}' file '{p}' must be a relative path inside the chart"
                )
            return errors

        stack = _stack_of(self)
        add_validation(self, check, stack=stack)
        shipped = {rel: text for rel, text in files.items() if rel not in bad_paths}
        key = chart_files_key(shipped)
        folder = staging_folder(
            stack, _stack_memo(stack, "id", lambda: stack.node.id), props.release_name, key
        )
        if _STAGED.get(str(folder)) != key:
            for rel, text in sorted(shipped.items()):
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            _STAGED[str(folder)] = key
        asset_hash = (chart.content_hash if chart is not None else hashlib.sha256(b"").hexdigest())[
            :32
        ]
        self.asset = TerraformAsset(
            self,
            ASSET_ID,
            path=str(folder.resolve()),
            type=AssetType.DIRECTORY,
            asset_hash=asset_hash,
        )
        self.chart_path = "./" + directory_asset_path(self.asset, scope, id, asset_hash).rstrip("/")
        extra_sets, lifecycle = (
            self._crd_bundle(props) if props.crd_source is not None else ((), None)
        )
        self._create_release(
            props,
            chart=self.chart_path,
            repository=None,
            version=None,
            extra_sets=extra_sets,
            lifecycle=lifecycle,
        )

    def _crd_bundle(self, props: LocalChartReleaseProps) -> tuple[list[Any], Any]:
        """A CRD step's bundle (:class:`CrdBundleSource`): a ``helm_template`` data source of the owner's
        chart at its pinned version with ``include_crds`` (rendered by the Helm provider on the
        Terraform runner, locally or in a remote run, like the release itself), and the ``set``
        entries ``crdsGz`` = ``base64gzip(join("\\n---\\n", crds))`` and ``crdsHash`` = its sha256, so
        a chart version bump changes the step at plan time. A precondition refuses a bundle larger
        than ``max_gz_bytes`` (the stacks pass ``gpucluster.charts.crds.MAX_CRDS_GZ_BYTES``: Helm's 1 MiB
        release Secret)."""
        src = props.crd_source
        max_bytes = src.max_gz_bytes
        h = helm()
        repository, chart = chart_source(src.repository, src.chart)
        data = h.DataHelmTemplate(
            self,
            "crds-source",
            name=literal(props.release_name),
            namespace=literal(props.namespace),
            chart=literal(chart),
            repository=literal(repository),
            version=literal(src.version),
            values=[values_document(src.values_yaml)],
            include_crds=True,
            skip_tests=True,
            kube_version=literal(src.kube_version),
            provider=props.provider,
        )
        data.override_logical_id(props.release_name)
        joined = f'join("\\n---\\n", data.helm_template.{props.release_name}.crds)'
        bundle = f"base64gzip({joined})"
        sets = [
            h.ReleaseSet(name="crdsGz", value="${" + bundle + "}", type="string"),
            h.ReleaseSet(name="crdsHash", value="${sha256(" + joined + ")}", type="string"),
        ]
        lifecycle = TerraformResourceLifecycle(
            precondition=[
                Precondition(
                    condition="${length(" + bundle + ") <= " + str(max_bytes) + "}",
                    error_message=literal(
                        f"the CRDs of {chart} {src.version} are larger than {max_bytes} bytes gzip'd (base64); Helm's "
                        "release Secret (1 MiB) cannot hold the CRD step: apply them by hand before upgrading (docs/upgrading.md)"
                    ),
                )
            ]
        )
        return sets, lifecycle


ASSET_ID = "chart"
"""Construct id of a :class:`LocalChartRelease`'s ``TerraformAsset`` (its folder in the output is
``assets/<release construct id>_chart_<hash of the path>/``)."""

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_NOT_ID_CHARACTER = re.compile(r"[^A-Za-z0-9_-]")
_ASSET_PATH_RULE: list[bool] = []
"""Empty until the first directory asset of the process: then ``[True]`` when :func:`unique_id`
gave the kernel's answer (asset paths are computed in Python from then on), ``[False]`` when it
did not (every asset path is asked of the kernel)."""


def unique_id(components: Sequence[str]) -> str:
    """cdktf's logical id of a construct path below its stack (``makeUniqueId`` of
    ``cdktf/lib/private/unique.js``, the same in cdktf 0.21 and cdktn 0.24; used by
    ``TerraformStack.allocateLogicalId``): components ``Default`` dropped; one component -> itself
    without characters outside ``[A-Za-z0-9_-]`` (if <= 255 characters); otherwise the components
    without ``Resource`` and without one that the previous one ends with, stripped the same way,
    joined by ``_`` and cut to 240 characters, then ``_`` and the first 8 hex digits (upper case)
    of the md5 of the components joined by ``/``.

    Raises:
        ValueError: no component left.
    """
    parts = [c for c in components if c != "Default"]
    if not parts:
        raise ValueError("cannot compute a logical id of an empty path")
    strip = functools.partial(_NOT_ID_CHARACTER.sub, "")
    if len(parts) == 1 and len(strip(parts[0])) <= 255:
        return strip(parts[0])
    digest = hashlib.md5("/".join(parts).encode("utf-8")).hexdigest()[:8].upper()  # noqa: S324 - cdktf's id, not security
    human: list[str] = []
    for part in parts:
        if not human or not human[-1].endswith(part):
            human.append(part)
    return "_".join(strip(h) for h in human if h != "Resource")[:240] + "_" + digest


def directory_asset_path(asset: Any, scope: Construct, construct_id: str, asset_hash: str) -> str:
    """``asset.path`` of a directory ``TerraformAsset`` with id :data:`ASSET_ID` inside the construct
    ``construct_id`` that was created directly in the stack ``scope``: ``assets/<logical id>/<asset
    hash>`` (no trailing slash) (cdktf's ``TerraformAsset.path``, :func:`unique_id` of ``[construct_id, "chart"]``),
    computed here instead of one kernel round trip per chart.

    The kernel is asked instead when the rule may not apply (``scope`` not a ``TerraformStack`` or a
    subclass overriding ``allocate_logical_id``, an id or hash outside ``[A-Za-z0-9_-]``), and once
    per process, for the first asset, to check the rule: if the kernel's answer differs (another
    cdktf version), every later asset is asked of the kernel too.
    """
    simple = (
        isinstance(scope, TerraformStack)
        and getattr(type(scope), "allocate_logical_id", None)
        is getattr(TerraformStack, "allocate_logical_id", None)
        and _SAFE_ID.fullmatch(construct_id) is not None
        and _SAFE_ID.fullmatch(asset_hash) is not None
    )
    if not simple or _ASSET_PATH_RULE == [False]:
        return asset.path
    computed = f"assets/{unique_id([construct_id, ASSET_ID])}/{asset_hash}"
    if not _ASSET_PATH_RULE:
        actual = asset.path
        _ASSET_PATH_RULE.append(actual == computed)
        return actual
    return computed


def variable_hash_expression(vh: Any) -> str:
    """Terraform expression of a :class:`gpucluster.model.VariableHash`:
    ``${sha256(jsonencode(["<base>", var.v1, ...]))}`` (the base is sha256 hex, variable names
    are validated identifiers, so nothing needs escaping)."""
    if not re.fullmatch(r"[0-9a-f]{64}", vh.base or ""):
        raise ValueError(f"variable hash base {vh.base!r} is not sha256 hex")
    names = [name for name, _ in vh.variables]
    for name in names:
        if not _TF_IDENTIFIER.fullmatch(name or ""):
            raise ValueError(f"Terraform variable name {name!r} is not an identifier")
    return (
        "${sha256(jsonencode([" + ", ".join([f'"{vh.base}"', *[f"var.{n}" for n in names]]) + "]))}"
    )


def ensure_helm_provider(stack: TerraformStack, **kubernetes: Any):
    """The stack's default ``helm`` provider (id ``helm``), created if absent.

    ``kubernetes`` are ``HelmProviderKubernetes`` arguments (``host``, ``config_path``, ...);
    without them the provider uses the ambient kubeconfig (``KUBE_CONFIG_PATH``).
    """
    memo = stack.__dict__.setdefault(_MEMO, {})
    existing = memo.get("helm_provider") or stack.node.try_find_child("helm")
    if existing is not None:
        memo["helm_provider"] = existing
        return existing
    h = helm()
    provider = h.HelmProvider(
        stack, "helm", kubernetes=h.HelmProviderKubernetes(**kubernetes) if kubernetes else None
    )
    memo["helm_provider"] = provider
    return provider


_MEMO = "_gpucluster_memo"
"""Attribute of a stack's Python object holding facts looked up once (each lookup is a round
trip to the jsii kernel: about 260 of them per cluster before; see docs/synth.md)."""


def _stack_memo(stack: TerraformStack, key: str, compute: Any) -> Any:
    """``compute()`` once per stack object (facts that cannot change once the stack has children:
    its id, the app context, the default Helm provider)."""
    memo = stack.__dict__.setdefault(_MEMO, {})
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def _stack_of(construct: Construct) -> TerraformStack:
    """``TerraformStack.of(construct)``, answered in Python for a release created directly in its
    stack (the runtime stack's case), else asked of the kernel once per construct."""
    node_scope = construct.__dict__.get("_gpucluster_scope")
    if isinstance(node_scope, TerraformStack):
        return node_scope
    return TerraformStack.of(construct)


def _safe_relative(path: str) -> bool:
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and "\\" not in path


def _splits_in_helm_set(value: Any) -> bool:
    """True for a string a Helm ``set`` entry of type ``string`` would not pass through as is."""
    return isinstance(value, str) and (value.startswith("{") or "," in value or chr(92) in value)


_HELM_SPLIT_PATTERN_HCL = r'"^[{]|[,\\\\]"'
"""HCL string literal of an RE2 pattern matching a leading ``{``, a comma or a backslash."""


def helm_set_string_validation(name: str) -> TerraformVariableValidationConfig:
    """Plan-time refusal of string values a Helm ``set`` entry of type ``string`` would mangle.

    The entry is parsed like ``helm --set-string``: a comma ends the value (the rest becomes a
    new key without a value), a backslash escapes the next character, and a value starting with
    ``{`` is read as a list. hashicorp/helm 3.1.1's ``literal`` type is no way out: it YAML-parses
    ``<name>: <value>`` and stores the result under the whole name as one top-level key, so the
    dotted paths gpucluster binds (``driver.version``) would never reach the nested value.
    """
    return TerraformVariableValidationConfig(
        condition="${length(regexall(" + _HELM_SPLIT_PATTERN_HCL + f", var.{name})) == 0}}",
        error_message=(
            f"{name} must not contain a comma or a backslash, nor start with '{{': the Helm provider passes it as a "
            "--set-string entry, which splits the value at commas. Put such a value in the cluster file's "
            "overrides.values instead of binding it to a variable."
        ),
    )


def stack_variable(
    stack: TerraformStack,
    name: str,
    *,
    default: Any = None,
    description: str = "",
    helm_set_string: bool = False,
) -> TerraformVariable:
    """The stack's Terraform variable ``name`` (created once; Terraform name exactly ``name``).

    Type from ``default``: ``string``/``bool``/``number``; ``string`` without a default
    (then the variable is required at plan time). ``helm_set_string``: the variable feeds a Helm
    ``set`` entry; a string variable then refuses values Helm would split
    (:func:`helm_set_string_validation`).
    """
    existing = stack.node.try_find_child(f"variable-{name}")
    if existing is not None:
        return existing
    var_type = scalar_type(default) if default is not None else "string"
    variable = TerraformVariable(
        stack,
        f"variable-{name}",
        type=var_type or "string",
        default=default,
        description=description or None,
        validation=[helm_set_string_validation(name)]
        if helm_set_string and (var_type or "string") == "string"
        else None,
    )
    variable.override_logical_id(name)
    return variable
