"""The ONE module that imports a CDK for Terraform distribution, constructs, jsii and the
prebuilt provider bindings.

Everything else in :mod:`gpucluster_cdk` (the other constructs, the stacks, the app) imports the
framework from here. Two distributions are supported, chosen by ONE setting, the environment variable
``GPUCLUSTER_CDK`` (read once, when this module is first imported; unset: ``cdktf`` when it is
installed, else ``cdktn``; the table is :data:`gpucluster_cdk.distributions.DISTRIBUTIONS`):

============  ==============================  ===========================  =======================
setting       framework                       azurerm binding (provider)   helm binding (provider)
============  ==============================  ===========================  =======================
``cdktf``     ``cdktf`` 0.21 (HashiCorp;      cdktf-cdktf-provider-azurerm cdktf-cdktf-provider-helm
(default)     deprecated 2025-12-10, frozen)  14.23.1 (azurerm 4.55.0)     12.1.2 (helm 3.1.1)
``cdktn``     ``cdktn`` 0.24 (CDK Terrain,    cdktn-provider-azurerm       cdktn-provider-helm
              the maintained fork)            18.9.0 (azurerm 5.10.0)      15.1.0 (helm 3.3.0)
============  ==============================  ===========================  =======================

Install the second with ``pip install -e '.[cdktn]'`` (``make cdktn`` builds ``.venv-cdktn``).
Constructs see the difference only through :data:`AZURERM_MAJOR` (azurerm 5.x requires
``node_provisioning_profile`` on ``azurerm_kubernetes_cluster``, see gpucluster_cdk/constructs_lib/aks.py).

**Only the binding submodules a construct uses are imported.** A prebuilt binding package
(``cdktf_cdktf_provider_azurerm``: ~1,500 submodules, one per resource) imports every submodule
from its ``__init__``; that costs seconds and hundreds of MiB. jsii-generated packages are laid
out so that this is not needed: ``<package>._jsii`` loads the jsii assembly into the Node.js
kernel (and the assemblies it depends on), and each submodule starts with
``from .._jsii import *`` and registers its own classes with the jsii runtime when it runs. So
:func:`_submodule` puts a bare package module (``__path__`` only, its ``__init__`` not run) into
``sys.modules`` and imports just the submodule: the assembly is still loaded exactly once, by
``_jsii``, and every class we use is registered. For types the kernel hands back from a
submodule not imported yet, the package module gets a PEP 562 ``__getattr__`` that imports
submodules on demand, and jsii's runtime is given the submodule FQN -> module map (what
jsii-pacmak emits as ``_SUBMODULE_FQN_MAP`` for lazy packages such as the cdktn bindings), so
its on-demand type resolution imports the right submodule. cdktn bindings are generated lazy
already; they are imported the ordinary way.

**Adding a resource is one line**: put its submodule and class names into
:data:`AZURERM_CLASSES` (or :data:`HELM_CLASSES`), e.g.
``"role_assignment": ("RoleAssignment",),``; then ``azurerm().RoleAssignment`` works and
imports that submodule on first use. The submodule name is the Terraform resource type
without the provider prefix (``azurerm_role_assignment`` -> ``role_assignment``); both
distributions use the same names (a resource the other azurerm major removed fails only
when used).

Set ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20`` when running on Node 20 (done here
with ``setdefault`` before jsii starts, and in the Makefile).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import ModuleType, SimpleNamespace
from typing import Any

from gpucluster_cdk.kernel_env import KERNEL_DEFAULTS  # noqa: E402

for _name, _value in KERNEL_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

from gpucluster_cdk.distributions import (  # noqa: E402,F401  (re-exported)
    DEFAULT_DISTRIBUTION,
    DISTRIBUTIONS,
    JSII_VERSION,
    SETTING,
    Distribution,
    chosen,
    installed_version,
)

DIST = chosen()
FRAMEWORK = DIST.name
"""Name of the CDK for Terraform distribution this module binds to (``cdktf`` or ``cdktn``)."""

AZURERM_PROVIDER_VERSION = DIST.azurerm_version
"""``hashicorp/azurerm`` version the installed binding pins in ``required_providers`` (4.55.0 for
cdktf-cdktf-provider-azurerm 14.23.1, 5.10.0 for cdktn-provider-azurerm 18.9.0). pyproject.toml
pins the bindings exactly and a test compares the synthesized JSON with this value."""

AZURERM_MAJOR = int(AZURERM_PROVIDER_VERSION.split(".")[0])
"""Major version of ``hashicorp/azurerm`` (4 or 5): what constructs branch on."""

HELM_PROVIDER_VERSION = DIST.helm_version
"""``hashicorp/helm`` version the installed binding pins (3.1.1 for cdktf, 3.3.0 for cdktn)."""

import jsii  # noqa: E402

_JSII_PROCESS_FILE = "/jsii/_kernel/providers/process.py"
"""Where jsii 1.x defines the kernel process's ``stop`` (registered with :mod:`atexit` when the
kernel starts) and ``__del__`` (which calls it)."""


def _ended_kernel_report(unraisable: Any) -> bool:
    """True when ``unraisable`` (what :data:`sys.unraisablehook` gets) is jsii's kernel exit hook
    failing on a kernel that already ended: a ``BrokenPipeError`` of ``stop`` (it wrote
    ``{"exit":0}`` to the stdin of a Node.js process a signal to the process group ended), or the
    ``AttributeError`` of ``__del__`` for a kernel a signal interrupted while it started (no
    ``_process`` yet). Recognised by the exception and the outermost frame of its traceback (a
    function ``stop`` or ``__del__`` in jsii's ``_kernel/providers/process.py``); CPython 3.11-3.13
    pass such reports to the hook ("Exception ignored in atexit callback", and ``__del__``'s)."""
    exc = unraisable.exc_value
    tb = unraisable.exc_traceback
    if tb is None or not isinstance(exc, (BrokenPipeError, ConnectionResetError, AttributeError)):
        return False
    code = tb.tb_frame.f_code
    if not code.co_filename.replace(os.sep, "/").endswith(_JSII_PROCESS_FILE):
        return False
    if isinstance(exc, AttributeError):
        return code.co_name == "__del__" and "_process" in str(exc)
    return code.co_name in ("stop", "__del__")


def quiet_ended_kernel_exit() -> None:
    """Drop the report of jsii's kernel exit hook failing on a kernel that already ended (called at
    import, before the kernel starts). Idempotent.

    jsii (1.x) registers the kernel process's ``stop`` with :mod:`atexit` when the kernel starts
    (at ``import cdktf``); it writes ``{"exit":0}`` to the Node.js process's stdin. When a signal to
    the process group (Ctrl-C, a CI timeout) ended Node.js first, that write raises
    ``BrokenPipeError`` and Python prints "Exception ignored in atexit callback" with a traceback.
    Python hands such an exception to :data:`sys.unraisablehook` (Python docs, "sys.unraisablehook"
    and "atexit"); the hook installed here drops exactly that report
    (:func:`_ended_kernel_report`) and passes every other one to the hook it replaced. The dead
    kernel's pipes are closed and its runtime folder removed when the interpreter exits
    (``tempfile.TemporaryDirectory``'s finalizer).
    """
    previous = sys.unraisablehook
    if getattr(previous, "_gpucluster_kernel_exit", False):
        return

    def unraisablehook(unraisable: Any) -> None:
        if not _ended_kernel_report(unraisable):
            previous(unraisable)

    unraisablehook._gpucluster_kernel_exit = True  # type: ignore[attr-defined]
    sys.unraisablehook = unraisablehook


_KERNEL_OUTPUT_MUTED: list[bool] = []
"""Non-empty once :func:`mute_kernel_output` ran."""


def mute_kernel_output() -> None:
    """From now on, drop whatever the jsii Node.js kernel writes to its stderr (and stdout): every
    write to :data:`sys.stdout` / :data:`sys.stderr` from a thread other than the main thread
    (:class:`MutableStream`, which says why).

    main.py calls it on a stop signal (safe in a signal handler: one list append, no lock).
    Idempotent.
    """
    if not _KERNEL_OUTPUT_MUTED:
        _KERNEL_OUTPUT_MUTED.append(True)


_STOP_SIGNAL_NUMBERS = frozenset(int(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))
_WAKEUP_READ_FD: list[int] = []
"""Read end of the pipe Python's C-level signal handler writes each signal number to
(:func:`signal.set_wakeup_fd`, set by :func:`_watch_stop_signals`), when this module set it."""


def _watch_stop_signals() -> None:
    """Let the kernel's reader thread see a stop signal the moment the OS delivers it.

    main.py's Python-level handler calls :func:`mute_kernel_output`, but only once the main thread
    runs bytecode again (it needs the GIL; on a loaded machine that can be after the kernel already
    wrote its ``ECONNRESET`` line and the reader printed it: 1 run in 50 of a stress test). Python's
    C-level handler writes the signal number to the wakeup fd at once, from whatever thread, so the
    reader checks that pipe (and the process's pending signals, ``ShdPnd`` in ``/proc/self/status``,
    for a signal not yet delivered to any thread). Only from the main thread and only when no wakeup
    fd is set (asyncio and others keep theirs)."""
    if _WAKEUP_READ_FD or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    try:
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (OSError, ValueError):
        os.close(read_fd)
        os.close(write_fd)
        return
    if previous != -1:  # someone else's: keep it
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    _WAKEUP_READ_FD.append(read_fd)


def _stop_signal_arrived() -> bool:
    """True once a stop signal reached this process (see :func:`_watch_stop_signals`); then mutes."""
    if _KERNEL_OUTPUT_MUTED:
        return True
    arrived = False
    if _WAKEUP_READ_FD:
        try:
            arrived = any(
                number in _STOP_SIGNAL_NUMBERS for number in os.read(_WAKEUP_READ_FD[0], 4096)
            )
        except OSError:  # BlockingIOError: nothing written
            pass
    if not arrived:
        try:
            with open("/proc/self/status", encoding="ascii", errors="replace") as status:
                pending = next(
                    (int(line.split()[1], 16) for line in status if line.startswith("ShdPnd:")), 0
                )
        except (OSError, ValueError, IndexError):
            pending = 0
        arrived = any(pending & (1 << (number - 1)) for number in _STOP_SIGNAL_NUMBERS)
    if arrived:
        mute_kernel_output()
    return arrived


def _dropped_here() -> bool:
    """True for a write to :data:`sys.stdout` / :data:`sys.stderr` that is dropped: one from a
    thread other than the main thread (jsii's kernel output reader among them) once a stop signal
    arrived (:func:`_stop_signal_arrived`). The main thread's writes always go through."""
    return threading.current_thread() is not threading.main_thread() and _stop_signal_arrived()


class _MutableBinary:
    """A standard stream's ``buffer`` whose writes :func:`_dropped_here` drops (reported written)."""

    def __init__(self, raw):
        self._raw = raw

    def write(self, data) -> int:
        if _dropped_here():
            return len(data)
        return self._raw.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class MutableStream:
    """:data:`sys.stdout` or :data:`sys.stderr` as a proxy of the stream it replaced: every
    attribute is the stream's own (``encoding``, ``fileno``, ``flush``, ``isatty``,
    ``reconfigure``, ...), but a write of text, or of bytes through ``buffer``, that
    :func:`_dropped_here` drops is reported written and goes nowhere.

    Why: a signal to the process group (Ctrl-C, a CI job timeout) also ends the jsii kernel's
    Node.js child; the kernel's runtime then logs ``Error on jsii API channel to child process:
    ... ECONNRESET`` (jsii ``bin/jsii-runtime.js``) and jsii's stderr reader thread prints that
    raw line (``print(line, file=sys.stderr)``) or forwards the kernel's console output
    (``sys.stderr.buffer.write``, ``sys.stdout.buffer.write``), looking the stream up at each
    write. After a stop the process prints only its own one line.
    """

    def __init__(self, stream):
        self._stream = stream

    @property
    def wrapped(self):
        """The stream this proxy writes to."""
        return self._stream

    def write(self, text: str) -> int:
        if _dropped_here():
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> _MutableBinary:
        return _MutableBinary(self._stream.buffer)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def mutable_standard_streams() -> None:
    """Put :class:`MutableStream` proxies in place of :data:`sys.stdout` and :data:`sys.stderr`
    (called at import, before the kernel starts; a missing or already wrapped stream is left as it
    is). Idempotent."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, MutableStream):
            setattr(sys, name, MutableStream(stream))


from gpucluster_cdk.kernel_env import (  # noqa: E402,F401 (used below)  # noqa: E402,F401
    LAZY_JS_PRELOAD,
    check_cdk_environment,
    check_node_options,
    lazy_js_settings,
)


@contextlib.contextmanager
def _lazy_js_bindings(packages: Sequence[str]) -> Iterator[None]:
    """While inside (the jsii Node.js kernel starts there), the environment has
    :func:`gpucluster_cdk.kernel_env.lazy_js_settings` for the npm ``packages`` (``NODE_OPTIONS``
    preloads :data:`LAZY_JS_PRELOAD`: each binding's ``lib/index.js`` requires a resource module
    only when the kernel first needs it); the variables are restored afterwards, so no other
    Node.js process this one starts sees them. ``GPUCLUSTER_LAZY_JS=0`` turns it off.
    """
    settings = lazy_js_settings(packages)
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def lazy_js_packages(dist: Distribution) -> list[str]:
    """``<npm name>@<pinned version>`` of each binding assembly the Node.js preload may make lazy:
    those whose Python binding is installed at its pinned version (:func:`installed_version`; the
    preload itself checks the npm package's ``package.json``). Another version takes the plain
    path: the binding's ``lib/index.js`` is compiled as it is."""
    pins = dist.binding_pins()
    return [
        f"{npm}@{version}"
        for npm, version, package in dist.js_pins()
        if installed_version(pins[package][0]) == pins[package][1]
    ]


check_cdk_environment()  # a JSII_NODE, no node on PATH or a CDKTF_CONTEXT_JSON that cannot work: one input error line, before the kernel
check_node_options()  # a NODE_OPTIONS Node.js refuses is one input error line, before the kernel starts
quiet_ended_kernel_exit()  # before the framework import starts the kernel and registers its exit hook
mutable_standard_streams()  # likewise: after a stop signal the kernel's output is dropped (main.py)
_watch_stop_signals()
with _lazy_js_bindings(
    lazy_js_packages(DIST)
):  # the first jsii load (constructs) starts the kernel
    from constructs import Construct, IValidation, Node  # noqa: E402,F401  (re-exported)

_framework = importlib.import_module(DIST.name)
App = _framework.App
AssetType = _framework.AssetType
AzurermBackend = _framework.AzurermBackend
"""Terraform's ``azurerm`` backend (cdktf 0.21 / cdktn 0.24). A stack reading another stack's
outputs gets, from this backend's ``getRemoteStateDataSource``, a
:data:`DataTerraformRemoteStateAzurerm` with the same settings (and ``workspace =
terraform.workspace``)."""
DataTerraformRemoteStateAzurerm = _framework.DataTerraformRemoteStateAzurerm
CloudBackend = _framework.CloudBackend
DataResource = _framework.DataResource
Fn = _framework.Fn
LocalBackend = _framework.LocalBackend
NamedCloudWorkspace = _framework.NamedCloudWorkspace
Op = _framework.Op
Postcondition = _framework.Postcondition
Precondition = _framework.Precondition
TerraformAsset = _framework.TerraformAsset
TerraformOutput = _framework.TerraformOutput
TerraformProvider = _framework.TerraformProvider
TerraformProviderGeneratorMetadata = _framework.TerraformProviderGeneratorMetadata
TerraformResource = _framework.TerraformResource
TerraformResourceLifecycle = _framework.TerraformResourceLifecycle
TerraformStack = _framework.TerraformStack
TerraformVariable = _framework.TerraformVariable
TerraformVariableValidationConfig = _framework.TerraformVariableValidationConfig
Testing = _framework.Testing
Token = _framework.Token


@jsii.implements(IValidation)
class _Validation:
    """jsii adapter: a Python callable returning a list of error strings."""

    def __init__(self, check: Callable[[], Sequence[str]]):
        self._check = check

    def validate(self) -> list[str]:
        return [str(msg) for msg in self._check()]


def add_validation(
    scope: Construct, check: Callable[[], Sequence[str]], *, stack: Construct | None = None
) -> None:
    """Register ``check`` for ``scope``; cdktf runs it at synth time.

    Each returned string becomes an error naming the construct path (``[stack/construct] message``,
    :func:`validation_errors`) and synthesis fails (also under the cdktf CLI, which only continues
    on error *annotations*, not on validation errors).

    Args:
        stack: ``scope``'s stack (or any ancestor), when the caller knows it without asking the
            kernel. Then ``check`` joins that construct's ONE jsii validation (created on the first
            call), which runs the checks in the order they were added and prefixes each message
            with the path of its own construct, asked of the kernel only for a failing check. That
            saves three kernel round trips per construct while building (``node``, the validation
            object, ``addValidation``) and one callback from Node.js each at synth. Without it:
            ``scope.node.add_validation`` as such.
    """
    if stack is None:
        scope.node.add_validation(_Validation(check))
        return
    checks = stack.__dict__.get(_CHECKS)
    if checks is None:
        checks = stack.__dict__[_CHECKS] = []

        def run_all() -> list[str]:
            return [
                f"[{construct.node.path}] {message}"
                for construct, each in checks
                for message in each()
            ]

        stack.node.add_validation(_Validation(run_all))
    checks.append((scope, check))


_CHECKS = "_gpucluster_checks"
"""Attribute of a construct's Python object holding the checks of :func:`add_validation` (``stack=``)."""

_VALIDATION_FAILED = "Validation failed with the following errors:"
_JOINED = re.compile(r"^\[([^\]]*)\] (\[\1(?:/[^\]]*)?\] .*)$")
"""A joined check's line: ``[<stack>] [<stack>/<construct>] message`` (the stack's path, then the
construct's own)."""


def validation_errors(err: BaseException) -> list[str] | None:
    """The messages of a construct validation failure raised by ``App.synth()``, else None.

    cdktf (through jsii) raises a plain ``RuntimeError`` whose text holds one
    ``[<construct path>] <message>`` line per failed validation (see :func:`add_validation`; a
    joined check's line starts with its stack's path too, dropped here).
    Returns those lines in order, or None when ``err`` is some other error.
    """
    text = str(err)
    if not isinstance(err, RuntimeError) or _VALIDATION_FAILED not in text:
        return None
    body = text.split(_VALIDATION_FAILED, 1)[1]
    lines = [line.strip() for line in body.splitlines() if line.strip().startswith("[")]
    return [m.group(2) if (m := _JOINED.fullmatch(line)) else line for line in lines]


# --------------------------------------------------------------------------- provider bindings

HELM_CLASSES: Mapping[str, tuple[str, ...]] = {
    "provider": ("HelmProvider", "HelmProviderKubernetes", "HelmProviderKubernetesExec"),
    "release": ("Release", "ReleasePostrender", "ReleaseSet"),
    "data_helm_template": ("DataHelmTemplate",),
}
"""Helm binding: submodule -> the classes gpucluster uses from it (one line per submodule)."""

AZURERM_CLASSES: Mapping[str, tuple[str, ...]] = {
    "provider": ("AzurermProvider", "AzurermProviderFeatures"),
    "resource_group": ("ResourceGroup",),
    "data_azurerm_resource_group": ("DataAzurermResourceGroup",),
    "data_azurerm_client_config": ("DataAzurermClientConfig",),
    "role_assignment": ("RoleAssignment",),
    "log_analytics_workspace": ("LogAnalyticsWorkspace",),
    "kubernetes_cluster": (
        "KubernetesCluster",
        "KubernetesClusterDefaultNodePool",
        "KubernetesClusterDefaultNodePoolUpgradeSettings",
        "KubernetesClusterIdentity",
        "KubernetesClusterAzureActiveDirectoryRoleBasedAccessControl",
        "KubernetesClusterApiServerAccessProfile",
        "KubernetesClusterNetworkProfile",
        "KubernetesClusterMaintenanceWindowAutoUpgrade",
        "KubernetesClusterMaintenanceWindowNodeOs",
        "KubernetesClusterOmsAgent",
        "KubernetesClusterMicrosoftDefender",
        "KubernetesClusterKeyVaultSecretsProvider",
        "KubernetesClusterNodeProvisioningProfile",  # azurerm 5.x only (AZURERM_MAJOR >= 5)
    ),
    "kubernetes_cluster_node_pool": (
        "KubernetesClusterNodePool",
        "KubernetesClusterNodePoolUpgradeSettings",
    ),
    "kubernetes_fleet_manager": ("KubernetesFleetManager", "KubernetesFleetManagerHubProfile"),
    "kubernetes_fleet_member": ("KubernetesFleetMember",),
    "kubernetes_fleet_update_run": (
        "KubernetesFleetUpdateRun",
        "KubernetesFleetUpdateRunManagedClusterUpdate",
        "KubernetesFleetUpdateRunManagedClusterUpdateNodeImageSelection",
        "KubernetesFleetUpdateRunManagedClusterUpdateUpgrade",
    ),
    "kubernetes_fleet_update_strategy": (
        "KubernetesFleetUpdateStrategy",
        "KubernetesFleetUpdateStrategyStage",
        "KubernetesFleetUpdateStrategyStageGroup",
    ),
}
"""azurerm binding: submodule -> the classes gpucluster uses from it (one line per submodule).
Add a line to use another resource (module docstring)."""


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _bare_package(package: str) -> ModuleType:
    """``package`` in ``sys.modules`` without running its ``__init__`` (see module docstring).

    The module has the package's ``__spec__`` and ``__path__`` (so ``package.sub`` imports
    work), and a PEP 562 ``__getattr__`` importing a submodule on first attribute access. jsii's
    runtime learns the submodule FQN -> module map of the assembly (``@scope/name.camelCase`` ->
    ``package.snake_case``, jsii-pacmak's naming), so a type returned by the kernel from a
    submodule not imported yet is resolved by importing that submodule.

    Raises:
        ModuleNotFoundError: the package is not installed.
    """
    existing = sys.modules.get(package)
    if existing is not None:
        return existing
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(f"No module named '{package}'", name=package)
    module = importlib.util.module_from_spec(spec)  # does not execute __init__

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[package] = module
    jsii_module = importlib.import_module(f"{package}._jsii")  # loads the assembly once
    assembly = jsii_module.__jsii_assembly__.name  # e.g. "@cdktf/provider-azurerm"
    from jsii import _reference_map

    names = [
        n for n in os.listdir(spec.submodule_search_locations[0]) if not n.startswith(("_", "."))
    ]
    _reference_map._submodule_fqn_map.update(  # the map jsii-pacmak emits for lazy packages
        {f"{assembly}.{_snake_to_camel(n)}": f"{package}.{n}" for n in names}
    )
    return module


@functools.cache
def bare_package_allowed(package: str) -> bool:
    """True when :func:`_bare_package` may be used for the binding ``package``: the installed jsii
    is :data:`JSII_VERSION` (the one whose private ``_reference_map._submodule_fqn_map`` it fills)
    and the binding is installed at its pinned version (:meth:`Distribution.binding_pins`, the
    layout checked: one submodule per resource, ``_jsii`` loading the assembly). Otherwise the
    binding is imported the ordinary way (its ``__init__`` imports every submodule: slower, the
    same classes and output)."""
    name, version = DIST.binding_pins()[package]
    return installed_version("jsii") == JSII_VERSION and installed_version(name) == version


def _submodule(package: str, name: str, *, lazy: bool) -> ModuleType:
    """``package.name``, importing only that submodule (and the package's ``_jsii``) when
    :func:`bare_package_allowed`; else the package as its ``__init__`` imports it."""
    if not lazy and bare_package_allowed(package):
        _bare_package(package)
    return importlib.import_module(f"{package}.{name}")


class Binding:
    """The classes of one prebuilt provider binding, each imported from its submodule on first use.

    ``binding.Release`` imports ``<package>.release`` (once) and returns its ``Release`` class.
    ``PROVIDER_SOURCE`` is the provider's registry source (``hashicorp/helm``).

    Raises:
        AttributeError: a class name not listed in the binding's class table.
    """

    def __init__(
        self, package: str, classes: Mapping[str, tuple[str, ...]], source: str, *, lazy: bool
    ):
        self._package = package
        self._lazy = lazy
        self._where = {cls: sub for sub, names in classes.items() for cls in names}
        self.PROVIDER_SOURCE = source

    def __getattr__(self, name: str) -> Any:
        sub = self.__dict__.get("_where", {}).get(name)
        if sub is None:
            raise AttributeError(
                f"{name} is not in the class table of {self.__dict__.get('_package')} (gpucluster_cdk/constructs_lib/cdk.py)"
            )
        value = getattr(_submodule(self._package, sub, lazy=self._lazy), name)
        setattr(self, name, value)
        return value

    def loaded(self) -> bool:
        """True once any class of this binding was imported."""
        return any(k for k in self.__dict__ if k in self._where)


@functools.cache
def helm() -> Binding:
    """The Helm provider binding (``hashicorp/helm``): HelmProvider, HelmProviderKubernetes, Release,
    ReleaseSet (:data:`HELM_CLASSES`), once per process."""
    return Binding(DIST.helm_package, HELM_CLASSES, "hashicorp/helm", lazy=DIST.lazy_bindings)


@functools.cache
def azurerm() -> Binding:
    """The azurerm provider binding (``hashicorp/azurerm``, :data:`AZURERM_CLASSES`), once per process.

    Nothing is imported until a class is used; then only that class's submodule (and, the
    first time, the 30 MB jsii assembly into the Node.js kernel).
    """
    return Binding(
        DIST.azurerm_package, AZURERM_CLASSES, "hashicorp/azurerm", lazy=DIST.lazy_bindings
    )


def azurerm_loaded() -> bool:
    """True once a class of the azurerm binding was imported in this process."""
    return azurerm.cache_info().currsize > 0 and azurerm().loaded()


def azurerm_fleet() -> Binding:
    """The Azure Kubernetes Fleet Manager resources of the azurerm binding (the same :func:`azurerm`
    binding; kept as its own name for gpucluster_cdk/constructs_lib/fleet.py).

    azurerm 4.55 has ``kubernetes_fleet_manager``, ``_member``, ``_update_strategy`` and
    ``_update_run``; it has no auto-upgrade profile resource (see :data:`AZAPI_PROVIDER`).
    """
    return azurerm()


AZAPI_PROVIDER = SimpleNamespace(source="Azure/azapi", name="azapi", version_constraint="~> 2.0")
"""The ``Azure/azapi`` provider (no prebuilt cdktf binding is installed): resources azurerm 4.55
lacks are written as raw ``azapi_resource`` blocks (:class:`TerraformResource` plus overrides)."""
