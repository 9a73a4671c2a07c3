"""The CDK for Terraform distributions gpucluster runs on and the provider bindings pinned for
each (no jsii or cdktf import: the checks of the kernel's environment need the chosen one's
binding packages before anything is imported). :mod:`gpucluster_cdk.constructs_lib.cdk`
binds to :func:`chosen` when it is first imported.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass

from gpucluster_cdk.kernel_env import gpucluster_error as _error

SETTING = "GPUCLUSTER_CDK"
"""Environment variable choosing the distribution: ``cdktf`` (default) or ``cdktn``."""


@dataclass(frozen=True)
class Distribution:
    """One CDK for Terraform distribution and the provider bindings pinned for it.

    Attributes:
        name: the setting's value and the framework's Python package (``cdktf``/``cdktn``).
        extra: the pyproject extra that installs it.
        azurerm_package / helm_package: Python packages of the prebuilt bindings.
        azurerm_binding / helm_binding: distribution names and pinned versions (pyproject.toml).
        azurerm_version / helm_version: provider versions those bindings write into
            ``required_providers`` (each binding release pins one).
        lazy_bindings: the binding packages' ``__init__`` imports no submodule (jsii-pacmak
            lazy loading), so they are imported normally.
        binding_js_packages: npm names of the bindings' jsii assemblies (their ``lib/index.js``
            is made lazy in the Node.js kernel, :func:`_lazy_js_bindings`).
    """

    name: str
    extra: str
    azurerm_package: str
    helm_package: str
    azurerm_binding: str
    helm_binding: str
    azurerm_version: str
    helm_version: str
    lazy_bindings: bool
    binding_js_packages: tuple[str, ...] = ()

    def binding_pins(self) -> dict[str, tuple[str, str]]:
        """``{Python package: (distribution name, pinned version)}`` of the two bindings, e.g.
        ``{"cdktf_cdktf_provider_helm": ("cdktf-cdktf-provider-helm", "12.1.2"), ...}``."""
        pins = {}
        for package, binding in (
            (self.azurerm_package, self.azurerm_binding),
            (self.helm_package, self.helm_binding),
        ):
            name, version = binding.split()
            pins[package] = (name, version)
        return pins

    def js_pins(self) -> tuple[tuple[str, str, str], ...]:
        """``(npm name, pinned version, Python package)`` of each binding's jsii assembly: a
        prebuilt binding release embeds the npm package of the same version
        (``_jsii/provider-helm@12.1.2.jsii.tgz``)."""
        pins = self.binding_pins()
        return tuple(
            (npm, pins[package][1], package)
            for npm, package in zip(
                self.binding_js_packages, (self.azurerm_package, self.helm_package), strict=True
            )
        )


DISTRIBUTIONS: Mapping[str, Distribution] = {
    "cdktf": Distribution(
        name="cdktf",
        extra="cdk",
        azurerm_package="cdktf_cdktf_provider_azurerm",
        helm_package="cdktf_cdktf_provider_helm",
        azurerm_binding="cdktf-cdktf-provider-azurerm 14.23.1",
        helm_binding="cdktf-cdktf-provider-helm 12.1.2",
        azurerm_version="4.55.0",
        helm_version="3.1.1",
        lazy_bindings=False,
        binding_js_packages=("@cdktf/provider-azurerm", "@cdktf/provider-helm"),
    ),
    "cdktn": Distribution(
        name="cdktn",
        extra="cdktn",
        azurerm_package="cdktn_provider_azurerm",
        helm_package="cdktn_provider_helm",
        azurerm_binding="cdktn-provider-azurerm 18.9.0",
        helm_binding="cdktn-provider-helm 15.1.0",
        azurerm_version="5.10.0",
        helm_version="3.3.0",
        lazy_bindings=True,
        binding_js_packages=("@cdktn/provider-azurerm", "@cdktn/provider-helm"),
    ),
}
DEFAULT_DISTRIBUTION = "cdktf"

JSII_VERSION = "1.142.0"
"""The jsii whose private submodule map (``jsii._reference_map._submodule_fqn_map``)
:mod:`gpucluster_cdk.constructs_lib.cdk` fills for a bare binding package; with any other
installed jsii the bindings are imported the ordinary way (docs/synth.md, "What we patch, why,
and how it turns itself off")."""


def installed_version(distribution: str) -> str | None:
    """The installed version of the Python ``distribution`` (:func:`importlib.metadata.version`),
    None when it is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def chosen(environ: Mapping[str, str] | None = None) -> Distribution:
    """The distribution :data:`SETTING` names; unset: ``cdktf`` when installed, else ``cdktn``
    (so an environment with only the ``cdktn`` extra, such as ``.venv-cdktn``, uses it throughout,
    also in subprocesses that drop ``GPUCLUSTER_*`` variables).

    Raises:
        GpuclusterError (``id=config``): an unknown value, or the distribution is not installed.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(SETTING, "").strip()
    if not value:
        installed = [name for name in DISTRIBUTIONS if importlib.util.find_spec(name) is not None]
        value = installed[0] if installed else DEFAULT_DISTRIBUTION
    dist = DISTRIBUTIONS.get(value)
    if dist is None:
        raise _error(
            f"unknown CDK for Terraform distribution '{value}'",
            key=SETTING,
            allowed=", ".join(DISTRIBUTIONS),
            fix=f"unset {SETTING} (cdktf) or set it to cdktn",
            id="config",
        )
    if importlib.util.find_spec(dist.name) is None:
        raise _error(
            f"{SETTING}={dist.name} but the Python package '{dist.name}' is not installed",
            key=SETTING,
            fix=f"pip install -e '.[{dist.extra}]' (for cdktn: `make cdktn` builds .venv-cdktn), or unset {SETTING}",
            id="config",
        )
    return dist
