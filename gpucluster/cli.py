"""``gpucluster`` command line (argparse).

Commands::

    gpucluster --version
        the tool's version and the plugin SDK's API version
    gpucluster recipe --service aks --accelerator h100 --os ubuntu --intent training \\
        [--platform kubeflow] [--profile gpuStack=operator-managed]
        print the resolved recipe as a RecipeResult (YAML, with hydrated values)
    gpucluster plan [--config FILE] [--format text|json] [--set COMPONENT:PATH=VALUE ...]
        print each cluster's release graph: node, kind, depends_on
    gpucluster graph [--config FILE] --format dot [--set COMPONENT:PATH=VALUE ...]
        print the release graph as Graphviz dot
    gpucluster plugins [--format text|json]
        list the loaded plugins: name, source, distribution, hooks, platforms
    gpucluster synth [--config FILE] [--out DIR]
        write every cluster's stacks into DIR (default cdktf.out): the files `cdktf synth` writes,
        in this process (no cdktf CLI; the jsii runtime still runs on Node.js)
    gpucluster init [DIR] [--service aks|nvke|oke] [--intent training|inference] [--backend local|cloud]
                    [--ci none|github|azure-pipelines] [--name NAME]
        create a project folder: cdktf.json (runs the installed app), gpucluster.yaml,
        requirements.txt, .gitignore, README.md, optionally a CI workflow; never overwrites a file
    gpucluster upgrade-check --from OLD --to NEW [--format text|json]
        per cluster and component: version, values and CRD changes and a verdict
        (exit 0 all safe, 3 a manual step is needed, 4 something is unknown; docs/upgrading.md)
    gpucluster render [--config FILE] [--cluster NAME] [--out DIR] [--charts DIR ...] [--pull]
        render every helm_release of the runtime stacks with Helm's engine into DIR/<cluster>/<release>/
    gpucluster lint [--config FILE] [--cluster NAME] [--charts DIR ...] [--crds DIR ...] [--pull]
        render, then check the objects (schemas, dead values, placement, RuntimeClasses, images,
        credentials); findings as error[<id>] ... fix: ..., exit 2 on any error
    gpucluster images [--config FILE] [--cluster NAME] [--charts DIR ...] [--format text|json|hauler|zarf]
        every container image (and upstream chart) the runtime stacks pull, from the rendered
        releases and the custom resources in them; exit 4 when a chart could not be had
    gpucluster postrender --image-mirror MIRROR
        Helm post-renderer: the manifests on stdin with every image reference at MIRROR, on stdout
        (what Terraform runs for a cluster with images.mirror)
    gpucluster charts pull [--config FILE] [--cluster NAME] [--cache DIR] [--refresh]
        pull every chart the runtime stacks pin (through the cluster file's mirror) into the
        chart cache that render and lint read; exit 2 when one cannot be had

    gpucluster snapshot [--config FILE] [--cluster NAME] --kubeconfig F [--context C] [--out FILE]
        read the objects validate needs from a live cluster (get/list only) into one kubectl List
    gpucluster validate [--config FILE] [--cluster NAME] (--kubeconfig F [--context C] | --snapshot FILE)
        [--format text|json] [--junit FILE] [--wait 10m]
        check the cluster against its plan (exit 0 passed, 1 a check failed; docs/validate.md)
    gpucluster docs [TOPIC]
        list the docs, or print one: a message's docs/NAME.md is ``gpucluster docs NAME``
    gpucluster rehearse [--config FILE] [--cluster NAME] [--keep] [--binaries DIR] [--format text|json]
        apply the runtime stacks to a simulated cluster (gpucluster_rig), run the gates, destroy, report

``--set`` adds scalar overrides (docs/overrides.md) after every cluster's own overrides, to
try a change without editing the cluster file; policy checks run on the result.

Invalid input prints :meth:`GpuclusterError.render` to stderr and exits 2 without a
traceback (``GPUCLUSTER_DEBUG=1`` prints the traceback too). Output is deterministic.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO, cast
from urllib.parse import urlsplit

from gpucluster.errors import EXIT_INVALID_INPUT, GpuclusterError, Problem, escaped, format_line
from gpucluster.model import ANY, Criteria, RuntimePlan


def _profile_arg(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value or "=" in value:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not NAME=VALUE (e.g. gpuStack=operator-managed)"
        )
    return name, value


def _worker_count(text: str) -> int:
    """``--workers N``: :func:`gpucluster_cdk.stacks.synthesis.is_worker_count` (the synth's rule,
    also ``GPUCLUSTER_SYNTH_WORKERS``'s; importing that module imports no cdktf)."""
    from gpucluster_cdk.stacks.synthesis import is_worker_count

    if not is_worker_count(text):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a worker count (an integer from 1 to 999)"
        )
    return int(text)


def _seconds(text: str) -> float:
    """``--timeout SECONDS``: a number of seconds from 0.1 to 86400 (ASCII decimal)."""
    if re.fullmatch(r"[0-9]{1,5}(\.[0-9]{1,3})?", text) is None or not 0.1 <= float(text) <= 86400:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a number of seconds (0.1 to 86400, e.g. 300)"
        )
    return float(text)


def stand_in_delay(text: str) -> str:
    """``rehearse --delay S``: a number of seconds from 0 to 3600 (ASCII decimal), kept as the
    text passed on to the rig (``nan`` or ``inf`` would make its stand-ins never report ready).
    The rig's own ``--delay`` (``python -m gpucluster_rig``) takes the same check.

    Raises:
        argparse.ArgumentTypeError: anything else (argparse turns it into the usage line).
    """
    if re.fullmatch(r"[0-9]{1,4}(\.[0-9]{1,3})?", text) is None or not 0 <= float(text) <= 3600:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds (0 to 3600, e.g. 3)")
    return text


_SET_HELP = "scalar override applied to every cluster after its own overrides (repeatable; see docs/overrides.md)"


def _set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set COMPONENT:PATH=VALUE`` (repeatable, into ``sets``), as every command that builds a plan takes it."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        dest="sets",
        metavar="COMPONENT:PATH=VALUE",
        help=_SET_HELP,
    )


def _recipe_arguments(rec: argparse.ArgumentParser) -> None:
    rec.add_argument("--service", required=True, help="platform service, e.g. aks")
    rec.add_argument("--accelerator", default=ANY, help="e.g. h100 (default any)")
    rec.add_argument("--os", default=ANY, help="worker node OS, e.g. ubuntu (default any)")
    rec.add_argument("--intent", default=ANY, help="training or inference (default any)")
    rec.add_argument("--platform", default=ANY, help="e.g. kubeflow, dynamo (default any)")
    rec.add_argument(
        "--profile",
        action="append",
        type=_profile_arg,
        default=[],
        metavar="NAME=VALUE",
        help="profile choice, e.g. gpuStack=operator-managed (repeatable)",
    )


def _findings_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FINDINGS_FLAG,
        choices=("summary", "all"),
        default="summary",
        help="a RecipeResult cluster's findings: one line per kind (summary, default) or every one (all)",
    )


def _plan_arguments(plan: argparse.ArgumentParser) -> None:
    _findings_argument(plan)
    plan.add_argument(
        "--config",
        help="cluster file (default: $GPUCLUSTER_CONFIG, ./gpucluster.yaml, embedded default)",
    )
    plan.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: per cluster its stacks, pools and releases (default); json: the same with every "
        "finding in full",
    )
    _set_argument(plan)


def _graph_arguments(graph: argparse.ArgumentParser) -> None:
    graph.add_argument("--config", help="cluster file (as for plan)")
    graph.add_argument(
        "--format", choices=("dot",), default="dot", help="dot: Graphviz (the only format)"
    )
    _set_argument(graph)


def _detect_arguments(det: argparse.ArgumentParser) -> None:
    det.add_argument("--kubeconfig", help="kubeconfig of the cluster (default: kubectl's)")
    det.add_argument("--context", help="kubeconfig context (default: the current one)")
    det.add_argument(
        "--nodes-json",
        help="read `kubectl get nodes -o json` output from this file instead of running kubectl",
    )
    det.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or json"
    )


def _upgrade_check_arguments(upg: argparse.ArgumentParser) -> None:
    upg.add_argument(
        "--from",
        dest="old",
        required=True,
        metavar="OLD",
        help="cluster file or RecipeResult, or a git revision: REV:path, or REV (the --to file at REV)",
    )
    upg.add_argument(
        "--to",
        dest="new",
        required=True,
        metavar="NEW",
        help="cluster file or RecipeResult (or REV / REV:path)",
    )
    upg.add_argument(
        "--format",
        choices=("text", "json", "ctrf"),
        default="text",
        help="text, json, or ctrf (a Common Test Report Format report; with --snapshot/--kubeconfig)",
    )
    upg.add_argument(
        "--attestation",
        metavar="FILE",
        help="with --snapshot/--kubeconfig: also write an unsigned in-toto Statement of the verdicts",
    )
    upg.add_argument(
        "--snapshot",
        metavar="FILE",
        help="judge the change on this snapshot of the running cluster (gpucluster snapshot, kubectl get -o json): "
        "per GPU pool, node and component; exit 0 safe, 3 manual, 4 unknown (as without it)",
    )
    upg.add_argument(
        "--kubeconfig",
        help="judge the change on the live cluster (read-only, as validate reads it; every pod and ResourceClaim)",
    )
    upg.add_argument("--context", help="kubeconfig context (default: the current one)")
    upg.add_argument(
        "--timeout",
        metavar="DURATION",
        default="60s",
        help="live cluster: total deadline of the reading, as for validate (default 60s)",
    )


def _render_lint_arguments(r: argparse.ArgumentParser) -> None:
    _findings_argument(r)
    r.add_argument("--config", help="cluster file (as for plan)")
    r.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="only this cluster (repeatable; default: all)",
    )
    r.add_argument(
        "--charts",
        action="append",
        default=[],
        metavar="DIR",
        help="folder of unpacked charts (repeatable; default: $GPUCLUSTER_CHARTS, os.pathsep separated)",
    )
    r.add_argument(
        "--cache",
        metavar="DIR",
        help="pull cache (default: $GPUCLUSTER_CHART_CACHE, else $XDG_CACHE_HOME/gpucluster/charts or ~/.cache/gpucluster/charts)",
    )
    r.add_argument(
        "--pull",
        action="store_true",
        help="pull charts missing from --charts and the cache (HTTP or OCI)",
    )
    r.add_argument(
        "--require-charts",
        action="store_true",
        help="a chart or subchart that cannot be had, or only at another version than the pinned one, "
        "is an error (default: a warning naming what was not checked)",
    )
    r.add_argument(
        "--allow-missing",
        action="append",
        default=[],
        metavar="NAME",
        help="with --require-charts: component or subchart whose chart may be unavailable (stays a warning)",
    )
    r.add_argument(
        "--allow-nearest",
        action="append",
        default=[],
        metavar="NAME",
        help="with --require-charts: component or subchart whose chart may be checked against "
        "another version than the pinned one (stays a warning)",
    )
    _set_argument(r)


def _render_arguments(r: argparse.ArgumentParser) -> None:
    _render_lint_arguments(r)
    r.add_argument(
        "--out",
        default="gpucluster.render",
        metavar="DIR",
        help="output folder (replaced; default gpucluster.render)",
    )


def _lint_arguments(r: argparse.ArgumentParser) -> None:
    _render_lint_arguments(r)
    r.add_argument(
        "--crds",
        action="append",
        default=[],
        metavar="DIR",
        help="extra folder of CRDs to validate custom resources against",
    )


def _images_arguments(r: argparse.ArgumentParser) -> None:
    _render_lint_arguments(r)
    r.add_argument(
        "--format",
        choices=("text", "json", "hauler", "zarf"),
        default="text",
        help="text table (default), JSON, Hauler manifests (hauler store sync -f) or a Zarf package config (zarf.yaml)",
    )
    r.add_argument(
        "--node-os",
        action="append",
        default=[],
        metavar="ID",
        help="node OS tag the operators complete driver images with (ubuntu24.04; repeatable; "
        "default for criteria.os ubuntu: ubuntu22.04 and ubuntu24.04)",
    )


def _postrender_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument(
        "--image-mirror",
        required=True,
        metavar="MIRROR",
        help="registry host and path every image is rewritten to (the cluster file's images.mirror)",
    )


def _charts_arguments(ch: argparse.ArgumentParser) -> None:
    sub = ch.add_subparsers(
        dest="charts_command", required=True, metavar="ACTION", help="pull (the only action)"
    )
    pull = sub.add_parser(
        "pull",
        help="pull every chart the runtime stacks pin into the chart cache (HTTP or OCI)",
        description="Pull every chart the runtime stacks pin into the chart cache that render and "
        "lint read (HTTP chart repositories or OCI registries, through the cluster file's "
        "charts.mirror). Exit 2 when a chart cannot be had.",
        epilog=_EXAMPLES["charts pull"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    pull.add_argument("--config", help="cluster file (as for plan)")
    pull.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="only this cluster (repeatable; default: all)",
    )
    pull.add_argument(
        "--cache",
        metavar="DIR",
        help="chart cache (default: $GPUCLUSTER_CHART_CACHE, else $XDG_CACHE_HOME/gpucluster/charts or ~/.cache/gpucluster/charts)",
    )
    pull.add_argument(
        "--refresh", action="store_true", help="pull again charts the cache already holds"
    )
    pull.add_argument(
        "--timeout",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="total deadline of the pull (default: 300); each connect or read waits at most 30 s",
    )
    _set_argument(pull)


def _cluster_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--config", help="cluster file (as for plan)")
    c.add_argument(
        "--cluster",
        action="append",
        default=[],
        metavar="NAME",
        help="the cluster of the file (needed when it has several)",
    )
    c.add_argument(
        "--kubeconfig",
        help="kubeconfig of the live cluster (read-only: get/list; docs/validate.md, RBAC)",
    )
    c.add_argument("--context", help="kubeconfig context (default: the current one)")
    c.add_argument(
        "--timeout",
        metavar="DURATION",
        default="60s",
        help="live cluster: total deadline of one reading, credential plugin, retries and slow "
        "answers included (default 60s)",
    )


def _snapshot_arguments(c: argparse.ArgumentParser) -> None:
    _cluster_arguments(c)
    c.add_argument(
        "--out", metavar="FILE", help="write the snapshot here (default: standard output)"
    )


def _rehearse_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument(
        "--config",
        metavar="FILE",
        help="cluster file (default: ./gpucluster.yaml, else the built-in example)",
    )
    c.add_argument("--cluster", metavar="NAME", help="rehearse only this cluster")
    c.add_argument(
        "--keep",
        action="store_true",
        help="leave the cluster up (no destroy); print its kubeconfig and how to stop it",
    )
    c.add_argument(
        "--binaries",
        metavar="DIR",
        help="a folder with the rig's programs (no build; docs/rehearse.md)",
    )
    c.add_argument(
        "--charts",
        metavar="DIR",
        help="a folder of unpacked charts to serve; required when a chart of the stack owns CRDs, as in every default stack (without it every chart is an empty stub)",
    )
    c.add_argument(
        "--crds",
        metavar="DIR",
        help="a folder of operator CRDs the stand-ins create (the IPPool CRD)",
    )
    c.add_argument(
        "--delay",
        metavar="S",
        type=stand_in_delay,
        help="seconds before a stand-in reports ready (default 3)",
    )
    c.add_argument(
        "--format", choices=("text", "json"), help="the report: text (default) or one JSON object"
    )
    c.add_argument("--work", metavar="DIR", help="work folder (default: a new temporary folder)")
    c.add_argument(
        "--no-isolate", action="store_true", help="do not run in a private network namespace"
    )


def _validate_arguments(c: argparse.ArgumentParser) -> None:
    _cluster_arguments(c)
    c.add_argument(
        "--snapshot",
        metavar="FILE",
        help="a snapshot file (gpucluster snapshot, or kubectl get -o json) instead of --kubeconfig",
    )
    c.add_argument(
        "--format",
        choices=("text", "json", "ctrf"),
        default="text",
        help="text (a table), json (the evidence) or ctrf (a Common Test Report Format report)",
    )
    c.add_argument("--junit", metavar="FILE", help="also write the results as JUnit XML")
    c.add_argument(
        "--attestation",
        metavar="FILE",
        help="also write an unsigned in-toto Statement of the result (sign it with cosign)",
    )
    c.add_argument(
        "--wait",
        metavar="DURATION",
        help="live cluster: re-read until every check passes or DURATION (e.g. 10m) is spent",
    )


def _plugins_arguments(plg: argparse.ArgumentParser) -> None:
    plg.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or json"
    )


def _synth_arguments(syn: argparse.ArgumentParser) -> None:
    syn.add_argument("--config", help="cluster file (as for plan)")
    syn.add_argument(
        "--out",
        metavar="DIR",
        help="output folder (replaced atomically; default: $CDKTF_OUTDIR, else cdktf.out)",
    )
    syn.add_argument(
        "--no-cache",
        action="store_true",
        help="build every cluster's stacks; reuse none from the cache (as GPUCLUSTER_SYNTH_CACHE=off)",
    )
    syn.add_argument(
        "--workers",
        type=_worker_count,
        metavar="N",
        help="most worker processes building clusters (default: $GPUCLUSTER_SYNTH_WORKERS, else the "
        "CPUs, at most 8; 1: this process only)",
    )


def _docs_arguments(d: argparse.ArgumentParser) -> None:
    d.add_argument(
        "topic",
        nargs="?",
        metavar="TOPIC",
        help="a doc's name (cluster-file, or docs/cluster-file.md as messages write it); "
        "none: list them",
    )


def _init_arguments(ini: argparse.ArgumentParser) -> None:
    from gpucluster import init as init_mod

    d = init_mod.DEFAULTS
    ini.add_argument(
        "dir",
        nargs="?",
        default=".",
        metavar="DIR",
        help="project folder, made when missing (default: this one)",
    )
    ini.add_argument(
        "--service",
        default=d["service"],
        metavar="SERVICE",
        help=f"platform: {', '.join(init_mod.SERVICES)} (default {d['service']})",
    )
    ini.add_argument(
        "--intent",
        default=d["intent"],
        metavar="INTENT",
        help=f"{', '.join(init_mod.INTENTS)} (default {d['intent']}; the platform must have recipes for it)",
    )
    ini.add_argument(
        "--backend",
        default=d["backend"],
        metavar="BACKEND",
        help=f"Terraform state: {', '.join(init_mod.BACKENDS)} (default {d['backend']})",
    )
    ini.add_argument(
        "--ci",
        default=d["ci"],
        metavar="CI",
        help=f"CI workflow: {', '.join(init_mod.CI_PROVIDERS)} (default {d['ci']})",
    )
    ini.add_argument("--name", help="cluster name (default <service>-<intent>)")


_EXAMPLES: dict[str, str] = {
    "recipe": "examples:\n  gpucluster recipe --service aks --accelerator h100 --os ubuntu --intent training\n"
    "  gpucluster recipe --service aks --intent training --profile gpuStack=operator-managed > recipe.yaml",
    "plan": "examples:\n  gpucluster plan\n  gpucluster plan --config clusters.yaml --format json\n"
    "  gpucluster plan --set gpuoperator:gdrcopy.enabled=true",
    "graph": "examples:\n  gpucluster graph --format dot > graph.dot && dot -Tsvg graph.dot > graph.svg",
    "detect": "examples:\n  gpucluster detect --kubeconfig ~/.kube/config --context prod\n"
    "  kubectl get nodes -o json > nodes.json && gpucluster detect --nodes-json nodes.json",
    "upgrade-check": "examples:\n  gpucluster upgrade-check --from HEAD:gpucluster.yaml --to gpucluster.yaml\n"
    "  gpucluster upgrade-check --from HEAD --to gpucluster.yaml --snapshot snapshot.json",
    "render": "examples:\n  gpucluster render --out gpucluster.render\n"
    "  gpucluster render --cluster aks-training --charts ./charts",
    "lint": "examples:\n  gpucluster charts pull && gpucluster lint\n"
    "  gpucluster lint --charts ./charts --crds ./crds --require-charts",
    "images": "examples:\n  gpucluster images\n"
    "  gpucluster images --format hauler --node-os ubuntu24.04 > gpucluster-hauler.yaml",
    "postrender": "examples:\n  helm template gpu-operator nvidia/gpu-operator | "
    "gpucluster postrender --image-mirror myacr.azurecr.io/mirror",
    "charts": "examples:\n  gpucluster charts pull\n  gpucluster charts pull --cluster aks-training --refresh",
    "charts pull": "examples:\n  gpucluster charts pull\n  gpucluster charts pull --cache /var/cache/charts --timeout 600",
    "plugins": "examples:\n  gpucluster plugins\n  gpucluster plugins --format json",
    "synth": "examples:\n  gpucluster synth\n  gpucluster synth --config clusters.yaml --out build/cdktf.out",
    "init": "examples:\n  gpucluster init ~/src/gpu-clusters --service aks --intent training --ci github\n"
    "  gpucluster init . --service oke --backend cloud",
    "snapshot": "examples:\n  gpucluster snapshot --kubeconfig ~/.kube/config --out snapshot.json",
    "validate": "examples:\n  gpucluster validate --kubeconfig ~/.kube/config --wait 10m\n"
    "  gpucluster validate --snapshot snapshot.json --format ctrf --junit results.xml",
    "docs": "examples:\n  gpucluster docs\n  gpucluster docs cluster-file | less",
    "rehearse": "examples:\n  gpucluster rehearse --charts ./charts\n"
    "  gpucluster rehearse --charts ./charts --cluster gpu-training --keep --format json",
}
"""``COMMAND --help``'s examples (its epilog)."""


_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "recipe": ("print the resolved recipe (RecipeResult YAML)", _recipe_arguments),
    "plan": (
        "print each cluster's stacks, pools and release graph (node, kind, chart version, depends on)",
        _plan_arguments,
    ),
    "graph": ("print the release graph", _graph_arguments),
    "detect": (
        "name the platform (criteria.service) of a reachable cluster from its nodes' providerIDs",
        _detect_arguments,
    ),
    "upgrade-check": (
        "what changing OLD into NEW does to running GPUs: per cluster and component a verdict safe/manual/unknown "
        "(exit 0 safe, 3 manual, 4 unknown; with --snapshot/--kubeconfig also per node on the running "
        "cluster, same exit codes; docs/upgrading.md)",
        _upgrade_check_arguments,
    ),
    "render": (
        "render every helm_release of the runtime stacks with Helm's own engine (offline)",
        _render_arguments,
    ),
    "lint": (
        "render, then check the rendered objects (docs/cli.md: gpucluster lint)",
        _lint_arguments,
    ),
    "images": (
        "every container image and chart the runtime stacks pull, as a table, JSON, Hauler or Zarf manifest "
        "(docs/air-gap.md)",
        _images_arguments,
    ),
    "postrender": (
        "Helm post-renderer of a cluster with images.mirror: manifests on stdin, the same with every "
        "image at the mirror on stdout (docs/air-gap.md)",
        _postrender_arguments,
    ),
    "charts": (
        "charts pull: fetch every chart the stacks pin into the chart cache render and lint read",
        _charts_arguments,
    ),
    "plugins": (
        "list the loaded plugins with their hooks and platforms (docs/plugins.md)",
        _plugins_arguments,
    ),
    "synth": (
        "write every cluster's Terraform (CDK for Terraform JSON) into cdktf.out, as `cdktf synth` does, "
        "without the cdktf CLI",
        _synth_arguments,
    ),
    "init": (
        "create a project folder you own: cdktf.json, gpucluster.yaml, requirements.txt, .gitignore, README.md, "
        "optionally a CI workflow (never overwrites a file)",
        _init_arguments,
    ),
    "snapshot": (
        "read what validate checks from a live cluster into one kubectl List (read-only)",
        _snapshot_arguments,
    ),
    "validate": (
        "check a live cluster or a snapshot against its plan (exit 0 passed, 1 failed; docs/validate.md)",
        _validate_arguments,
    ),
    "docs": (
        "list the documentation, or print one doc (a message's docs/NAME.md is 'gpucluster docs NAME')",
        _docs_arguments,
    ),
    "rehearse": (
        "apply the runtime stacks to a simulated cluster shaped like the pools (a real control plane built "
        "from source, KWOK nodes, loopback only), run every gate, destroy, report (docs/rehearse.md)",
        _rehearse_arguments,
    ),
}
"""Subcommand -> (help line, function adding its arguments), in the order ``--help`` lists them."""


def version_text() -> str:
    """``gpucluster --version``: ``gpucluster <version> (plugin SDK API <version>)``, from
    :data:`gpucluster.__version__` and :data:`gpucluster.SDK_API_VERSION`."""
    from gpucluster import SDK_API_VERSION, __version__

    return f"gpucluster {__version__} (plugin SDK API {SDK_API_VERSION})"


class _Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one ``error[usage] ... fix: ...`` line (raised
    as :class:`UsageError`) instead of argparse's usage line plus ``gpucluster: error: ...``."""

    def error(self, message: str):
        from gpucluster.errors import did_you_mean

        command = _command_in(self._argv) if getattr(self, "_argv", None) is not None else None
        prog = f"gpucluster {command}" if command and self.prog == "gpucluster" else self.prog
        wrong = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        near = did_you_mean(wrong.group(1), re.findall(r"'(.*?)'", wrong.group(2))) if wrong else ""
        raise UsageError(
            f"{message} (usage: {' '.join(self.format_usage().split()[1:])})",
            id="usage",
            fix=f"{near}run '{prog} --help' for the arguments it takes",
        )

    def parse_args(self, args=None, namespace=None):
        self._argv = list(
            sys.argv[1:] if args is None else args
        )  # the command a top-level error is about
        return super().parse_args(args, namespace)


class UsageError(GpuclusterError):
    """A command line argparse refuses (unknown option, missing argument, bad choice)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser (exposed for docs and tests).

    Args:
        command: build the arguments of this subcommand only (the others get their name and help
            line, so ``gpucluster --help`` and every error read the same); None: all of them.
    """
    parser = _Parser(
        prog="gpucluster",
        description="GPU Kubernetes clusters and NVIDIA's GPU stack as Terraform (CDK for Terraform).",
        epilog="Documentation: 'gpucluster docs' lists it; the docs/NAME.md a message or help page "
        "names prints with 'gpucluster docs NAME'. Start with 'gpucluster init', then "
        "'gpucluster plan' in the folder it makes.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version_text(),
        help="print the tool's version and the plugin SDK's API version, then exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (text, add_arguments) in _COMMANDS.items():
        subparser = sub.add_parser(
            name,
            help=text,
            description=text[0].upper() + text[1:] + ".",
            epilog=_EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command is None or command == name:
            add_arguments(subparser)
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word not starting with ``-`` (the top-level parser
    takes no option with a value), when that is a subcommand; else None."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in _COMMANDS else None


def _cmd_recipe(args: argparse.Namespace, out: TextIO) -> None:
    from gpucluster.plugins import platform_for
    from gpucluster.recipes import layering, recipe_result_writer
    from gpucluster.recipes import recipe as recipe_mod
    from gpucluster.recipes.catalog import load_catalog

    platform_for(args.service, key="--service")
    profile: dict[str, str] = {}
    for name, value in args.profile:
        if name in profile and profile[name] != value:
            raise GpuclusterError(
                f"profile '{name}' is given twice with different values",
                key="--profile",
                fix=f"give --profile {name}=... once",
            )
        profile[name] = value
    criteria = Criteria(
        service=args.service,
        accelerator=args.accelerator,
        os=args.os,
        intent=args.intent,
        platform=args.platform,
    )
    catalog = load_catalog()
    recipe = recipe_mod.resolve(criteria, catalog, profile=profile, file="<command line>")
    components = layering.effective_components(recipe, catalog)
    out.write(recipe_result_writer.dump_yaml(recipe_result_writer.to_document(recipe, components)))


def _plans(config: str | None, sets: Sequence[str] = ()) -> list[RuntimePlan]:
    return _plans_and_fleet(config, sets)[0]


def _plans_and_fleet(config: str | None, sets: Sequence[str] = ()):
    from gpucluster.inputs.config import load_config
    from gpucluster.pipeline import build_plans
    from gpucluster.recipes.overrides import parse_set

    extra = [parse_set(text, source="--set", key=f"--set[{i}]") for i, text in enumerate(sets)]
    clusters, fleet = load_config(config)
    for cluster in clusters:
        cluster.overrides = [*cluster.overrides, *extra]
    return build_plans(clusters), fleet


FINDINGS_FLAG = "--findings"
"""``--findings summary|all`` of plan, graph, render and lint: how a RecipeResult cluster's findings print."""


def _warn_findings(plans: list[RuntimePlan], err: TextIO, detail: str = "summary") -> None:
    """Every plan finding on stderr: a cluster given by a RecipeResult gets one line per finding
    kind (:func:`summarize_findings`) unless ``detail`` is ``all``; other clusters every line."""
    for plan in plans:
        findings = plan.findings
        lines = (
            [f.render() for f in findings]
            if detail == "all" or not plan.recipe.file
            else summarize_findings(findings, how=f"add {FINDINGS_FLAG} all to the command")
        )
        for line in lines:
            err.write(line + "\n")


def summarize_findings(findings, *, how: str, example_chars: int = 160) -> list[str]:
    """One line per ``(severity, id)`` of ``findings``, in first-seen order: a kind seen once is its
    own line; a kind seen N times is ``<severity>[<id>] file=... cluster=...: N findings (first:
    component=... key=...: <message, cut>); all: <how> fix: <first fix>`` -- still the
    ``error|warning|info[<id>] ... fix: ...`` form, made by :func:`gpucluster.errors.format_line`
    (everything from the input escaped).

    Args:
        findings: :class:`gpucluster.model.Finding` objects.
        how: the command that prints every one (``gpucluster plan --findings all``).
        example_chars: the first example's message is cut to this many characters.
    """
    groups: dict[tuple[str, str], list] = {}
    for f in findings:
        groups.setdefault((f.severity, f.id), []).append(f)
    out = []
    for (severity, fid), items in groups.items():
        if len(items) == 1:
            out.append(items[0].render())
            continue
        first = items[0]
        at = " ".join(
            f"{k}={v}" for k, v in (("component", first.component), ("key", first.key)) if v
        )
        message = " ".join(first.message.split())
        if len(message) > example_chars:
            message = message[: example_chars - 3].rstrip() + "..."
        components = sorted({f.component for f in items if f.component})
        out.append(
            format_line(
                severity,
                fid,
                f"{len(items)} findings"
                + (f" ({', '.join(components)})" if components else "")
                + f"; first: {at + ': ' if at else ''}{message}; all {len(items)}: {how}",
                where=(("file", first.file), ("cluster", first.cluster)),
                fix=" ".join(first.fix.split()) or None,
                message_limit=2000,
            )
        )
    return out


def _announce_default(args: argparse.Namespace, err: TextIO) -> None:
    """The ``info[input.default]`` line on ``err`` when the command will use the built-in example
    cluster (:func:`gpucluster.inputs.config.embedded_default_notice`): every command that reads
    the cluster file says so, before anything else."""
    from gpucluster.inputs.config import embedded_default_notice

    notice = embedded_default_notice(args.config)
    if notice:
        err.write(notice + "\n")


def _cmd_plan(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    _announce_default(args, err)
    plans, fleet = _plans_and_fleet(args.config, args.sets)
    _warn_findings(plans, err, getattr(args, "findings", "summary"))
    unread = []
    if any(p.cluster.overrides for p in plans):  # a plan without overrides reads no chart
        from gpucluster.lint.unread import offline_chart_folders, unread_override_findings

        unread = list(unread_override_findings(plans, offline_chart_folders()))
        for finding in unread:
            err.write(finding.render() + "\n")
    rollout = _fleet_rollout(fleet, plans) if fleet is not None else None
    if args.format == "json":
        doc = [
            {
                "cluster": p.cluster.name,
                "appliedOverlays": p.recipe.applied_overlays,
                "profile": dict([p.recipe.profile]) if p.recipe.profile else {},
                **plan_summary(p),
                "nodes": [
                    {
                        "id": n.id,
                        "kind": n.kind,
                        "component": n.component,
                        "dependsOn": list(n.depends_on),
                        **({"version": _node_version(n)} if _node_version(n) else {}),
                    }
                    for n in p.nodes
                ],
                "findings": [
                    _finding_json(f)
                    for f in [*p.findings, *(u for u in unread if u.cluster == p.cluster.name)]
                ],
                **({"fleet": rollout["clusters"][p.cluster.name]} if rollout else {}),
            }
            for p in plans
        ]
        out.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return
    if rollout is not None:
        _write_rollout(rollout, out)
    for i, p in enumerate(plans):
        if i:
            out.write("\n")
        leaf = (
            escaped(p.recipe.applied_overlays[-1]) if p.recipe.applied_overlays else "-"
        )  # a RecipeResult's own text
        prof = (
            f" profile {escaped(p.recipe.profile[0])}={escaped(p.recipe.profile[1])}"
            if p.recipe.profile
            else ""
        )
        out.write(
            f"cluster {escaped(p.cluster.name)}: recipe {leaf}{prof}, {plural(len(p.nodes), 'release')}\n"
        )
        for label, text in _summary_lines(plan_summary(p)):
            out.write(f"  {label:<10}  {escaped(text)}\n")
        width_id = max((len(n.id) for n in p.nodes), default=4)
        width_kind = max((len(n.kind) for n in p.nodes), default=4)
        versions = [escaped(_node_version(n)) or "-" for n in p.nodes]
        width_version = max((len(v) for v in versions), default=7)
        out.write(
            f"  {'NODE'.ljust(width_id)}  {'KIND'.ljust(width_kind)}  "
            f"{'VERSION'.ljust(width_version)}  DEPENDS ON\n"
        )
        for n, version in zip(p.nodes, versions, strict=True):
            deps = escaped(", ".join(n.depends_on)) if n.depends_on else "-"
            out.write(
                f"  {escaped(n.id).ljust(width_id)}  {escaped(n.kind).ljust(width_kind)}  "
                f"{version.ljust(width_version)}  {deps}\n"
            )


def _node_version(node) -> str:
    """The upstream chart version a plan node installs: its chart's, or for a ``crds`` step the
    chart its CRDs come from; ``""`` for gpucluster's own charts (manifests, gates, teardown)."""
    if node.version and node.local_chart is None:
        return node.version
    return node.crd_source.version if node.crd_source is not None else ""


def plural(count: int, noun: str) -> str:
    """``1 release``, ``2 releases``: ``count`` and ``noun`` with an ``s`` unless it is 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def plan_summary(plan: RuntimePlan) -> dict:
    """What a change to the cluster file shows in ``plan`` besides the release graph: the stacks,
    service, region, Kubernetes version, node pools (VM size, count, GPUs per node), the GPUs in
    all, the ``gpuStack`` profile and the existing cluster's kubeconfig. JSON-ready; keys in
    camelCase as ``plan --format json`` prints them."""
    from gpucluster.plugins import platform_for

    c = plan.cluster
    # gpucluster_cdk/stacks/names.py's rule (a plan imports no gpucluster_cdk; a test compares)
    provisions = platform_for(c.criteria.service).provisions_cluster and c.existing is None
    stacks = [f"{c.name}-cluster"] * bool(provisions) + [f"{c.name}-runtime"]
    pools = [
        {
            "name": pool.name,
            "vmSize": pool.vm_size,
            "count": pool.node_count,
            "gpu": pool.gpu,
            **({"gpusPerNode": pool.gpus_per_node} if pool.gpu else {}),
        }
        for pool in c.pools
    ]
    gpu_pools = [pool for pool in c.pools if pool.gpu]
    known = all(pool.gpus_per_node is not None for pool in gpu_pools)
    return {
        "stacks": stacks,
        "service": c.criteria.service,
        "accelerator": c.criteria.accelerator,
        "region": c.region,
        "kubernetesVersion": c.kubernetes_version,
        "pools": pools,
        "gpus": sum((pool.gpus_per_node or 0) * pool.node_count for pool in gpu_pools)
        if known
        else None,
        "gpuStack": plan.recipe.profile[1]
        if plan.recipe.profile and plan.recipe.profile[0] == "gpuStack"
        else None,
        "existingCluster": {"kubeconfig": c.existing.kubeconfig_path, "context": c.existing.context}
        if c.existing is not None
        else None,
    }


def _summary_lines(summary: dict) -> list[tuple[str, str]]:
    """:func:`plan_summary` as ``(label, text)`` lines of the text plan."""
    where = [summary["service"]]
    if summary["region"]:
        where.append(f"region {summary['region']}")
    where.append(f"Kubernetes {summary['kubernetesVersion']}")
    existing = summary["existingCluster"]
    if existing is not None:
        context = f" context {existing['context']}" if existing["context"] else ""
        where.append(f"existing cluster (kubeconfig {existing['kubeconfig']}{context})")
    lines = [("stacks", ", ".join(summary["stacks"])), ("platform", ", ".join(where))]
    pools = []
    for pool in summary["pools"]:
        text = f"{pool['name']} {pool['vmSize']} x {pool['count']}"
        if pool["gpu"]:
            per = pool["gpusPerNode"]
            text += f" ({plural(per, 'GPU')} each)" if per is not None else " (GPUs unknown)"
        pools.append(text)
    if pools:
        lines.append(("pools", "; ".join(pools)))
    if summary["gpus"] is not None and any(pool["gpu"] for pool in summary["pools"]):
        accelerator = "" if summary["accelerator"] == ANY else f" {summary['accelerator']}"
        lines.append(("GPUs", f"{summary['gpus']}{accelerator}"))
    if summary["gpuStack"]:
        lines.append(("gpuStack", summary["gpuStack"]))
    return lines


def _finding_json(finding) -> dict:
    """A :class:`~gpucluster.model.Finding` as ``plan --format json`` carries it: every field, the
    whole message and fix (no cut), credentials masked as in the text lines."""
    from gpucluster.errors import mask_secrets

    return {
        "id": finding.id,
        "severity": finding.severity,
        "file": finding.file,
        "cluster": finding.cluster,
        "component": finding.component,
        "key": finding.key,
        "message": mask_secrets(finding.message),
        "fix": mask_secrets(finding.fix),
    }


def _fleet_rollout(fleet, plans: list[RuntimePlan]) -> dict:
    """The fleet's stage order as data: per stage its group, clusters, waits and barrier; per cluster
    its group, stage and the barrier stack its runtime stack waits for."""
    from gpucluster.inputs import fleet as fleet_mod
    from gpucluster.plugins import platform_for

    digests = {p.cluster.name: fleet_mod.rollout_digest(p) for p in plans}
    order = fleet_mod.stages(fleet)
    stages, clusters = [], {}
    previous_barrier = None
    for index, (group, names) in enumerate(order):
        barrier = (
            fleet_mod.barrier_stack_name(fleet.name, group.name) if index + 1 < len(order) else None
        )
        gdigest = fleet_mod.group_digest((n, digests[n]) for n in names)
        stages.append(
            {
                "stage": index + 1,
                "group": group.name,
                "clusters": names,
                "runtimeStacks": [f"{n}-runtime" for n in names],
                "afterStageWaitSeconds": group.after_stage_wait_seconds,
                "approval": f"approve_{group.name} = {gdigest[:16]}" if group.approval else None,
                "barrierStack": barrier,
            }
        )
        for n in names:
            clusters[n] = {
                "fleet": fleet.name,
                "group": group.name,
                "stage": index + 1,
                "waitsFor": previous_barrier,
                "rolloutDigest": digests[n],
            }
        previous_barrier = barrier
    provisioned = {
        p.cluster.name: bool(platform_for(p.cluster.criteria.service).provisions_cluster)
        and p.cluster.existing is None
        for p in plans
    }
    rg, fleet_name = fleet.resource_group or f"{fleet.name}-rg", fleet.name
    if fleet.existing_id:
        parts = fleet.existing_id.split("/")
        rg, fleet_name = parts[4], parts[-1]
    return {
        "fleet": fleet.name,
        "stacks": [fleet_mod.fleet_stack_name(fleet.name)]
        + (
            [fleet_mod.hub_stack_name(fleet.name)]
            if fleet.hub is not None and fleet.placements
            else []
        ),
        "stages": stages,
        "clusters": clusters,
        "updateRuns": [
            {
                "name": r.name,
                "upgrade": r.upgrade,
                "kubernetesVersion": r.kubernetes_version,
                "start": f"az fleet updaterun start --resource-group {rg} --fleet-name {fleet_name} --name {r.name}",
            }
            for r in fleet.update_runs
        ],
        "placements": [p.name for p in fleet.placements],
        "memberLabels": {n: fleet.member_labels(n) for n in fleet.members},
        "terraformCloud": fleet_mod.tfc_topology(
            fleet, [p.cluster for p in plans], provisioned=provisioned
        ),
        "clusterStacks": [f"{n}-cluster" for n, ok in provisioned.items() if ok],
    }


def _write_rollout(rollout: dict, out: TextIO) -> None:
    out.write(
        f"fleet {rollout['fleet']}: {len(rollout['stages'])} update groups, {len(rollout['clusters'])} members, "
        f"stacks {', '.join(rollout['stacks'])}\n"
    )
    out.write("  STAGE  GROUP  RUNTIME STACKS  THEN\n")
    for st in rollout["stages"]:
        then = []
        if st["afterStageWaitSeconds"]:
            then.append(f"wait {st['afterStageWaitSeconds']}s")
        if st["approval"]:
            then.append(f"approval ({st['approval']})")
        if st["barrierStack"]:
            then.append(f"barrier {st['barrierStack']}")
        out.write(
            f"  {st['stage']}  {st['group']}  {', '.join(st['runtimeStacks'])}  {'; '.join(then) or '-'}\n"
        )
    for run in rollout["updateRuns"]:
        target = f" {run['kubernetesVersion']}" if run["kubernetesVersion"] else ""
        out.write(
            f"  update run {run['name']} ({run['upgrade']}{target}): created, not started; start: {run['start']}\n"
        )
    for name in rollout["placements"]:
        out.write(
            f"  placement {name}: hub ClusterResourcePlacement (External) + ClusterStagedUpdateRun over the groups\n"
        )
    tfc = rollout["terraformCloud"]
    if tfc:
        out.write(
            f"  terraform cloud: organization {tfc['organization']}, project {tfc['project']}, "
            f"{len(tfc['workspaces'])} workspaces (one per stack)\n"
        )
        for t in tfc["runTriggers"]:
            out.write(f"    run trigger: {t['workspace']} <- {', '.join(t['sources'])}\n")
        for c in tfc["remoteStateConsumers"]:
            out.write(f"    state shared: {c['workspace']} -> {', '.join(c['consumers'])}\n")
    out.write("\n")


_DOT_SHAPES = {"chart": "box", "pre-manifests": "note", "manifests": "note", "gate": "diamond"}


def _cmd_graph(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    _announce_default(args, err)
    plans = _plans(args.config, args.sets)
    _warn_findings(plans, err, getattr(args, "findings", "summary"))
    out.write("digraph gpucluster {\n  rankdir=LR;\n")
    for p in plans:
        cid = p.cluster.name
        out.write(f'  subgraph "cluster_{cid}" {{\n    label="{cid}";\n')
        for n in p.nodes:
            out.write(
                f'    "{cid}/{n.id}" [label="{n.id}", shape={_DOT_SHAPES.get(n.kind, "box")}];\n'
            )
        for n in p.nodes:
            for d in n.depends_on:
                out.write(f'    "{cid}/{d}" -> "{cid}/{n.id}";\n')
        out.write("  }\n")
    out.write("}\n")


def _selected_plans(args: argparse.Namespace) -> list[RuntimePlan]:
    """The plans of the cluster file, only the ``--cluster`` ones when given."""
    plans = _plans(args.config, args.sets)
    if args.cluster:
        known = [p.cluster.name for p in plans]
        unknown = [c for c in args.cluster if c not in known]
        if unknown:
            raise GpuclusterError(
                f"no cluster named '{unknown[0]}' in the cluster file",
                key="--cluster",
                allowed=", ".join(known),
                fix="name one of the file's clusters",
            )
        plans = [p for p in plans if p.cluster.name in args.cluster]
    return plans


def _cache_arg(args: argparse.Namespace) -> Path | None:
    """``--cache`` as a path, None without it. :class:`GpuclusterError` (``key=--cache``) when it
    is a file, or when a pull (``charts pull``, ``--pull``) would have to create it below a file
    or in a folder it may not write: one line before anything is fetched."""
    if args.cache and Path(args.cache).exists() and not Path(args.cache).is_dir():
        raise GpuclusterError(
            f"chart cache '{args.cache}' is a file, not a folder",
            key="--cache",
            fix="name a folder for pulled charts (created when missing), or leave --cache out",
        )
    if args.cache and (args.command == "charts" or getattr(args, "pull", False)):
        from gpucluster.outfolder import unwritable_reason

        why = unwritable_reason(args.cache)
        if why:
            raise GpuclusterError(
                f"chart cache '{args.cache}' cannot be created or written: {why}",
                key="--cache",
                fix="name a folder you can write for pulled charts (created when missing), or leave --cache out",
            )
    return Path(args.cache) if args.cache else None


def _rendered(args: argparse.Namespace, err: TextIO):
    from gpucluster.lint import render as render_mod

    _announce_default(args, err)
    plans = _selected_plans(args)
    folders = render_mod.chart_folders_from(args.charts)
    sources = render_mod.ChartSources(folders, cache_dir=_cache_arg(args), pull=args.pull)
    render_mod.helm()
    progress = _Progress(err)
    try:
        return plans, render_mod.render_plans(
            plans,
            sources,
            allow_missing=args.allow_missing,
            require_charts=args.require_charts,
            allow_nearest=args.allow_nearest,
            progress=lambda i, n, name: progress.show(i, n, f"rendering {name}"),
        )
    finally:
        progress.clear()


def _report(
    findings,
    out: TextIO,
    err: TextIO,
    *,
    not_checked: Sequence[str] = (),
    nothing_checked: bool = False,
    plans: Sequence[RuntimePlan] = (),
    other_versions: Sequence[str] = (),
) -> int:
    """Findings on stderr; on stdout the count, what was not checked, what was not decided
    (a finding that depends on a release not rendered) and what was checked against another
    version than the pinned one (``other_versions``: :func:`gpucluster.lint.render.stand_ins`). The count includes the ``plans``'
    policy findings (already printed by :func:`_warn_findings`), saying how many came from there.
    Exit 2 on an error; else, when ``nothing_checked`` (lint, no upstream chart rendered),
    ``EXIT_NOTHING_CHECKED`` (4); else 0."""
    for f in findings:
        err.write(f.render() + "\n")
    planned = [f for plan in plans for f in plan.findings]
    errors = sum(1 for f in [*findings, *planned] if f.severity == "error")
    warnings = sum(1 for f in [*findings, *planned] if f.severity == "warning")
    from_plan = sum(1 for f in planned if f.severity in ("error", "warning"))
    undecided = [f for f in findings if getattr(f, "undecided", ())]
    out.write(
        f"{errors} error(s), {warnings} warning(s)"
        + (f" ({from_plan} of them from the plan's policy checks)" if from_plan else "")
        + (f", {len(undecided)} not decided" if undecided else "")
        + "\n"
    )
    if not_checked:
        out.write(f"not checked (chart unavailable): {'; '.join(not_checked)}\n")
    if undecided:
        named = dict.fromkeys(f"{f.cluster}/{f.release} {f.id}" for f in undecided)
        out.write(f"not decided (depends on a release not checked): {'; '.join(named)}\n")
    if other_versions:
        out.write(f"checked against another version: {'; '.join(other_versions)}\n")
    if errors:
        return EXIT_INVALID_INPUT
    if nothing_checked:
        from gpucluster.lint.lint import EXIT_NOTHING_CHECKED

        out.write(
            "nothing checked: no chart of the stacks could be had, so only gpucluster's generated "
            f"manifests and gates were checked (exit {EXIT_NOTHING_CHECKED}); run `gpucluster charts pull`, "
            "name a mirror (charts.mirror) or give --charts folders\n"
        )
        return EXIT_NOTHING_CHECKED
    return 0


class _Progress:
    """A progress line on ``stream`` when it is a terminal: ``[i/n] text``, rewritten in place
    (carriage return, erase to the end of the line: ECMA-48 EL) and erased before any other line
    is written, so a pipe or a file never gets one (they get only the result lines)."""

    def __init__(self, stream: TextIO) -> None:
        isatty = getattr(stream, "isatty", None)
        try:
            self.on = bool(isatty and isatty())
        except (OSError, ValueError):
            self.on = False
        self.stream = stream
        self.shown = False

    def show(self, done: int, total: int, text: str) -> None:
        """Show ``[done/total] text`` (cut to the terminal's width) in place of the last one."""
        if not self.on:
            return
        import shutil

        width = max(20, shutil.get_terminal_size().columns - 1)
        self.stream.write(f"\r\x1b[K{escaped(f'[{done}/{total}] {text}')[:width]}")
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        """Erase the progress line (before a result line, and at the end)."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def _cmd_charts(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``charts pull``: one line per chart on stdout as it completes (a ``[i/n]`` progress line on
    a terminal's stderr while one is fetched), one error line per chart that cannot be had."""
    from gpucluster.charts import pull as charts
    from gpucluster.charts.chartcache import default_cache_dir
    from gpucluster.charts.helmsdk import helm

    _announce_default(args, err)
    plans = _selected_plans(args)
    _warn_findings(plans, err)
    cache = _cache_arg(args) or default_cache_dir()
    helm()
    session = charts.PullSession(charts.Deadline(args.timeout))
    pinned = charts.pinned_charts(plans)
    progress = _Progress(err)
    results = []
    shared: dict[
        tuple[str, str, str], list
    ] = {}  # one cause of a repository: told once, at the end
    for i, p in enumerate(pinned, 1):
        progress.show(i, len(pinned), f"{p.chart} {p.version} from {charts.safe_url(p.repository)}")
        r = charts.pull_one(p, cache, refresh=args.refresh, session=session)
        progress.clear()
        results.append(r)
        if r.path is None and r.kind in ("charts.pull", "charts.unreachable"):
            host = urlsplit(r.pinned.repository).hostname or r.pinned.repository
            shared.setdefault((r.kind, host, r.reason), []).append(r)
        else:
            _write_pull_result(r, out, err)
        out.flush()
    for group in shared.values():
        if len(group) == 1:
            _write_pull_result(group[0], out, err)
        else:
            _write_shared_failure(group, err)
    failed = sum(1 for r in results if r.path is None)
    out.write(
        f"{plural(len(results), 'chart')}: {sum(1 for r in results if r.how == 'pulled')} pulled, "
        f"{sum(1 for r in results if r.how == 'cached')} already cached, {failed} unavailable; cache {cache}\n"
    )
    return EXIT_INVALID_INPUT if failed else 0


def _write_shared_failure(group, err: TextIO) -> None:
    """One line for the charts of ``group`` (:class:`~gpucluster.charts.pull.PullResult` s of one
    kind, host and reason: an index or a host that failed once for all of them): the cause and
    its fix once, then every chart and the releases that install it."""
    from gpucluster.charts import pull as charts
    from gpucluster.errors import format_line

    first = group[0]
    repositories = sorted({charts.safe_url(r.pinned.repository) for r in group})
    listed = "; ".join(
        f"{r.pinned.chart} {r.pinned.version} ("
        + ", ".join(f"{c}/{rel}" for c, rel in r.pinned.users)
        + ")"
        for r in group
    )
    err.write(
        format_line(
            "error",
            first.kind,
            f"{len(group)} charts from {', '.join(repositories)} were not stored: {first.reason}; "
            f"not pulled: {listed}",
            where=(("repository", repositories[0] if len(repositories) == 1 else ""),),
            fix=charts.UNREACHABLE_FIX
            if first.kind == "charts.unreachable"
            else charts.PULL_ERROR_FIX,
            message_limit=4000,
        )
        + "\n"
    )
    err.flush()


def _write_pull_result(r, out: TextIO, err: TextIO) -> None:
    """One chart's line of ``charts pull``: where it came from on ``out``, or why it could not be
    had on ``err`` (``error[charts.pull]`` for what the repository sent, else
    ``error[charts.unavailable]``)."""
    from gpucluster.charts import pull as charts
    from gpucluster.errors import format_line, one_line
    from gpucluster.lint.render import LintFinding

    p = r.pinned
    if r.path is not None:
        out.write(f"{r.how:<7} {p.chart} {p.version} from {p.repository}\n")
        return
    cluster, release = p.users[0]
    if r.kind in ("charts.pull", "charts.unreachable"):
        err.write(
            format_line(
                "error",
                r.kind,
                f"chart {p.chart} {p.version} from {charts.safe_url(p.repository)} was not stored: {r.reason}",
                where=(
                    ("cluster", cluster),
                    ("component", release),
                    ("release", release),
                    ("chart", f"{p.chart}@{p.version}"),
                    ("repository", charts.safe_url(p.repository)),
                ),
                fix=charts.UNREACHABLE_FIX
                if r.kind == "charts.unreachable"
                else charts.PULL_ERROR_FIX,
                message_limit=2000,
            )
            + "\n"
        )
        err.flush()
        return
    err.write(
        LintFinding(
            "charts.unavailable",
            "error",
            f"chart {p.chart} {p.version} from {p.repository} cannot be pulled: {one_line(r.reason)}",
            fix=charts.PULL_FIX,
            cluster=cluster,
            component=release,
            release=release,
        ).render()
        + "\n"
    )
    err.flush()


def _cmd_render(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpucluster.lint.render import check_output_folder, stand_ins, unverified, write_output

    check_output_folder(
        Path(args.out)
    )  # before the (slow) render: a folder that is not ours is refused first
    plans, result = _rendered(args, err)
    try:
        _warn_findings(plans, err, getattr(args, "findings", "summary"))
        write_output(result, Path(args.out))
        rendered = sum(1 for r in result.releases if r.manifests)
        out.write(
            f"rendered {rendered} of {len(result.releases)} releases into {escaped(args.out)}\n"
        )
        return _report(
            result.findings,
            out,
            err,
            not_checked=unverified(result),
            plans=plans,
            other_versions=stand_ins(result),
        )
    finally:
        result.renderer.close()


def _cmd_lint(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpucluster.lint.lint import lint_result, load_crd_folders, nothing_checked
    from gpucluster.lint.render import stand_ins, unverified

    for folder in args.crds:
        if not Path(folder).is_dir():
            raise GpuclusterError(
                f"CRD folder '{folder}' does not exist",
                key="--crds",
                fix="name a folder of CRD YAML files",
            )
    plans, result = _rendered(args, err)
    try:
        _warn_findings(plans, err, getattr(args, "findings", "summary"))
        return _report(
            lint_result(result, extra_crds=load_crd_folders(args.crds)),
            out,
            err,
            not_checked=unverified(result),
            nothing_checked=nothing_checked(result),
            plans=plans,
            other_versions=stand_ins(result),
        )
    finally:
        result.renderer.close()


def _cmd_images(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``images``: the inventory of every selected cluster on stdout in ``--format``; render
    findings (and plan findings) on stderr; one ``warning[images.incomplete]`` line per release
    whose chart could not be had, ``warning[images.stand-in]`` per release rendered from a chart of
    another version, and per image that cannot be named, then exit 4 (the inventory is
    incomplete), else 0. An error finding of the render exits 2 with nothing on stdout."""
    from gpucluster.lint import images as images_mod
    from gpucluster.lint.lint import EXIT_NOTHING_CHECKED

    for tag in args.node_os:
        if not re.fullmatch(r"[a-z][a-z0-9]*[0-9]+(\.[0-9]+)*", tag):
            raise GpuclusterError(
                f"--node-os '{tag}' is not a node OS tag",
                key="--node-os",
                allowed="<ID><VERSION_ID> of /etc/os-release, such as ubuntu22.04, ubuntu24.04, rhel9.6",
                fix="give the ID and VERSION_ID of the GPU nodes' /etc/os-release, joined",
            )
    plans, result = _rendered(args, err)
    try:
        _warn_findings(plans, err, getattr(args, "findings", "summary"))
        for f in result.findings:
            err.write(f.render() + "\n")
        if any(f.severity == "error" for f in result.findings):
            return EXIT_INVALID_INPUT
        inventories = images_mod.inventory(result, node_os=args.node_os)
    finally:
        result.renderer.close()
    render = {
        "text": images_mod.render_text,
        "json": images_mod.render_json,
        "hauler": images_mod.render_hauler,
        "zarf": images_mod.render_zarf,
    }[args.format]
    text = render(inventories)
    incomplete = False
    for inv in inventories:
        for item in inv.not_rendered:
            incomplete = True
            err.write(
                format_line(
                    "warning",
                    "images.incomplete",
                    f"the images of {item} are not listed: its chart could not be had",
                    where=(("cluster", inv.cluster),),
                    fix="run `gpucluster charts pull` (or give --charts) and list again",
                )
                + "\n"
            )
        for item in inv.stand_ins:
            incomplete = True
            release, note = item.split(": ", 1)
            err.write(
                format_line(
                    "warning",
                    "images.stand-in",
                    f"the images of {release} were listed from a stand-in: {note}: "
                    "the deploy pulls the pinned chart's, which can differ",
                    where=(("cluster", inv.cluster),),
                    fix="add the pinned chart version (`gpucluster charts pull`, or a --charts folder "
                    "holding it) and list again",
                )
                + "\n"
            )
        for item in inv.unlisted:
            incomplete = True
            err.write(
                format_line(
                    "warning",
                    "images.unlisted",
                    item,
                    where=(("cluster", inv.cluster),),
                    fix="mirror that image by hand, or give what it needs (--node-os)",
                )
                + "\n"
            )
    out.write(text)
    return EXIT_NOTHING_CHECKED if incomplete else 0


def _cmd_postrender(args: argparse.Namespace, out: TextIO) -> None:
    """``postrender``: stdin (the YAML stream Helm renders) through
    :func:`gpucluster.charts.imagemirror.rewrite_stream` to stdout. A mirror that is not one, or
    input that is not YAML, is one error line, exit 2, nothing on stdout."""
    import yaml

    from gpucluster.charts import imagemirror

    mirror = imagemirror.check_mirror(
        args.image_mirror, file="<command line>", cluster=None, key="--image-mirror"
    )
    text = sys.stdin.read()
    try:
        result = imagemirror.rewrite_stream(text, mirror)
    except yaml.YAMLError as exc:
        raise GpuclusterError(
            f"the manifests on standard input are not YAML: {' '.join(str(exc).split())}",
            key="stdin",
            id="postrender.input",
            fix="pipe the output of helm template (or Helm's post-renderer input) into it",
        ) from None
    out.write(result)


def _cmd_detect(args: argparse.Namespace, out: TextIO) -> None:
    from gpucluster.live import detect
    from gpucluster.plugins import platforms

    result = detect.run_detect(
        kubeconfig=args.kubeconfig,
        context=args.context,
        nodes_json=args.nodes_json,
        platforms=platforms(),
    )
    if args.format == "json":
        out.write(json.dumps(result.as_dict(), indent=2, sort_keys=True) + "\n")
    else:
        out.write(detect.render_text(result, kubeconfig=args.kubeconfig, context=args.context))


def _cmd_upgrade_check(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the :mod:`gpucluster.lint.upgrade_check` report; returns its exit code (0/3/4).
    With ``--snapshot`` / ``--kubeconfig``: the :mod:`gpucluster.live.upgrade_live` report on
    the cluster's state (the same exit codes)."""
    from gpucluster.lint import upgrade_check

    if args.snapshot is not None or args.kubeconfig is not None or args.context is not None:
        from gpucluster.live import cli as live_cli

        return live_cli.upgrade_check_live_command(args, out, err)
    if args.format == "ctrf" or args.attestation:
        raise GpuclusterError(
            "CTRF reports and attestations are of the change judged on the cluster",
            key="--attestation" if args.attestation else "--format",
            allowed="text, json without --snapshot/--kubeconfig",
            fix="add --snapshot FILE (gpucluster snapshot) or --kubeconfig F",
            id="validate.input",
        )
    report = upgrade_check.run(args.old, args.new)
    out.write(
        upgrade_check.render_json(report)
        if args.format == "json"
        else upgrade_check.render_text(report)
    )
    return report.exit_code


def _cmd_plugins(args: argparse.Namespace, out: TextIO) -> None:
    """Print :func:`gpucluster.plugins.plugin_inventory`, then check that services are unique.

    The list is printed first so a conflict (two plugins declaring one service) can be read
    next to the error, which :func:`gpucluster.plugins.platforms` raises naming both plugins.
    """
    from gpucluster.plugins import platforms, plugin_inventory

    inventory = plugin_inventory()
    if args.format == "json":
        out.write(json.dumps(inventory, indent=2, sort_keys=True) + "\n")
    else:
        for entry in inventory["plugins"]:
            dist = entry["distribution"]
            origin = f"{dist['name']} {dist['version']}" if dist else entry["source"]
            out.write(escaped(f"{entry['name']}: module {entry['module']} ({origin})") + "\n")
            for p in entry["platforms"]:
                kind = "provisions clusters" if p["provisionsCluster"] else "existing clusters"
                out.write(escaped(f"  platform {p['service']}: {p['displayName']} ({kind})") + "\n")
            hooks = [
                hook
                + "".join(f" ({flag})" for flag in ("tryfirst", "trylast") if hook in entry[flag])
                for hook in entry["hooks"]
            ]
            out.write(f"  hooks: {', '.join(hooks) or '-'}\n")
        for name in inventory["blocked"]:
            out.write(f"{escaped(name)}: blocked (GPUCLUSTER_DISABLE_PLUGINS)\n")
    out.flush()
    platforms()


def _cmd_synth(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The cdktf app in this process (:func:`gpucluster_cdk.app.synth_command`: the code path of
    ``cdktf synth``, the same files); imported here only, so no other command loads cdktf."""
    from gpucluster_cdk.app import synth_command

    return synth_command(
        config=args.config,
        outdir=args.out,
        out=out,
        err=err,
        cache=False if args.no_cache else None,
        workers=args.workers,
    )


def _cmd_init(args: argparse.Namespace, out: TextIO) -> None:
    """Create the project (:func:`gpucluster.init.init_project`) and name the files and the next command."""
    from gpucluster import init as init_mod

    options = init_mod.InitOptions(
        service=args.service, intent=args.intent, backend=args.backend, ci=args.ci, name=args.name
    )
    written = init_mod.init_project(args.dir, options)
    root = Path(args.dir)
    out.write(
        f"created {escaped(root.resolve())}: {', '.join(str(p.relative_to(root)) for p in written)}\n"
    )
    where = "" if root.resolve() == Path.cwd().resolve() else f"cd {escaped(args.dir)} && "
    out.write(f"next: {where}gpucluster plan   (README.md: set up, lint, synth, deploy)\n")


def _cmd_snapshot(args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
    from gpucluster.live import cli as live_cli

    live_cli.snapshot_command(args, out, err)


def _cmd_rehearse(args: argparse.Namespace, out: TextIO) -> int:
    """Run the rehearsal rig (``python -m gpucluster_rig rehearse``, a package the core never
    imports) in a child process with these standard streams; its exit code.

    SIGINT and SIGTERM are passed on to the child and its end awaited: the child stops the rig it
    started and exits 130 (``subprocess.call`` would kill it at Ctrl-C before it could, and a
    SIGTERM would end this process alone, leaving the rehearsal running)."""
    import subprocess

    out.flush()
    argv = ["rehearse"]
    for name in ("config", "cluster", "binaries", "charts", "crds", "delay", "format", "work"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", value]
    argv += [flag for flag, on in (("--keep", args.keep), ("--no-isolate", args.no_isolate)) if on]
    child = subprocess.Popen([sys.executable, "-m", "gpucluster_rig", *argv])

    def pass_on(signum: int, frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    before = {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from gpucluster.live import cli as live_cli

    return live_cli.validate_command(args, out, err)


def _cmd_docs(args: argparse.Namespace, out: TextIO) -> None:
    """``gpucluster docs``: the list of docs, or one doc's Markdown (:mod:`gpucluster.userdocs`)."""
    from gpucluster import userdocs

    if args.topic is None:
        out.write(userdocs.listing())
    else:
        out.write(userdocs.topic_path(args.topic).read_text(encoding="utf-8"))


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the CLI.

    Returns:
        0 on success, 2 (:data:`~gpucluster.errors.EXIT_INVALID_INPUT`) on invalid input, 1
        (:data:`EXIT_OUTPUT_CLOSED`) when the output pipe closed early (no traceback).
    """
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    if err is None:  # stderr closed (2>&-): no line can be printed
        err = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    if out is None:  # stdout closed (>&-): say so instead of an AttributeError traceback
        err.write(
            Problem(
                message="standard output is closed, so nothing can be printed",
                key="stdout",
                id="output",
                fix="run the command with its output on a terminal, a file or a pipe (not >&-)",
            ).render()
            + "\n"
        )
        return EXIT_INVALID_INPUT
    argv = sys.argv[1:] if argv is None else list(argv)
    stopped_by: list[int] = []
    saved = _unwind_on_stop_signals(_command_in(argv), stopped_by)
    try:
        return _main(argv, cast(TextIO, _Guarded(out)), err)  # _Guarded is a TextIO by duck typing
    except KeyboardInterrupt:  # Ctrl-C: quietly, with the shell's code for SIGINT
        _discard_output(out)
        return 128 + stopped_by[0] if stopped_by else EXIT_INTERRUPTED
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def _unwind_on_stop_signals(command: str | None, stopped_by: list[int]) -> dict[int, Any]:
    """Make SIGTERM and SIGHUP (a CI runner's timeout, a closed terminal) unwind like Ctrl-C, so
    every ``finally`` removes what it started (a chart half-fetched into the cache, a render's
    temporary folder); further stop signals -- a second Ctrl-C too -- are ignored while that
    runs. ``stopped_by`` gets the signal. SIGINT is taken over only where Python's own Ctrl-C
    handler is in place (an ignored SIGINT, as a background job of a non-interactive shell
    inherits it, stays ignored). Not for ``synth`` and ``rehearse``, which handle signals
    themselves, nor outside the main thread. Returns the handlers to put back."""
    if (
        command in ("synth", "rehearse")
        or threading.current_thread() is not threading.main_thread()
    ):
        return {}
    stops: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        stops += (signal.SIGINT,)

    def unwind(signum: int, frame: object) -> None:
        for s in stops:
            signal.signal(s, signal.SIG_IGN)
        stopped_by.append(signum)
        raise KeyboardInterrupt

    return {s: signal.signal(s, unwind) for s in stops}


_WORKING_FOLDER_COMMANDS = frozenset(
    {"plan", "graph", "render", "lint", "images", "charts", "snapshot", "validate", "upgrade-check"}
)
"""Commands that find files from the working folder (the cluster file, ``--out``, relative
paths): a deleted one is one ``error[input] key=cwd`` line (synth and init say it their way)."""

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (SIGINT): 128 + 2, as a shell reports a process the signal ended."""


def _main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """:func:`main` after the streams are checked: parse, run the command, and turn every failure
    into one line -- input errors and usage errors exit 2, a standard stream that cannot be written
    (a full disk, ``/dev/full``) exits 2, a reader that went away exits 1, anything unexpected is
    one ``error[internal]`` line with exit 70 (the traceback only with ``GPUCLUSTER_DEBUG=1``)."""
    code = 0
    try:
        try:
            parser = build_parser(
                _command_in(argv)
            )  # only the given command's arguments: less work per run
            try:
                args = parser.parse_args(argv)
            except SystemExit as exc:  # --help printed its text
                return exc.code if isinstance(exc.code, int) else 0
            if args.command in _WORKING_FOLDER_COMMANDS:
                from gpucluster.errors import check_working_folder

                check_working_folder(
                    "charts pull" if args.command == "charts" else str(args.command)
                )
            if args.command == "recipe":
                _cmd_recipe(args, out)
            elif args.command == "plan":
                _cmd_plan(args, out, err)
            elif args.command == "graph":
                _cmd_graph(args, out, err)
            elif args.command == "detect":
                _cmd_detect(args, out)
            elif args.command == "plugins":
                _cmd_plugins(args, out)
            elif args.command == "init":
                _cmd_init(args, out)
            elif args.command == "synth":
                code = _cmd_synth(args, out, err)
            elif args.command == "upgrade-check":
                code = _cmd_upgrade_check(args, out, err)
            elif args.command == "render":
                code = _cmd_render(args, out, err)
            elif args.command == "lint":
                code = _cmd_lint(args, out, err)
            elif args.command == "charts":
                code = _cmd_charts(args, out, err)
            elif args.command == "images":
                code = _cmd_images(args, out, err)
            elif args.command == "postrender":
                _cmd_postrender(args, out)
            elif args.command == "snapshot":
                _cmd_snapshot(args, out, err)
            elif args.command == "validate":
                code = _cmd_validate(args, out, err)
            elif args.command == "docs":
                _cmd_docs(args, out)
            elif args.command == "rehearse":
                code = _cmd_rehearse(args, out)
        except GpuclusterError as exc:
            if os.environ.get("GPUCLUSTER_DEBUG") == "1":
                import traceback

                traceback.print_exc(file=err)
            err.write(exc.render() + "\n")
            err.flush()
            return EXIT_INVALID_INPUT
        out.flush()  # inside the try: a reader that went away fails here, not at interpreter exit
    except BrokenPipeError:
        _discard_output(out, err)
        return EXIT_OUTPUT_CLOSED
    except _StreamError as failed:
        error = failed.error
        _discard_output(out)
        with contextlib.suppress(OSError, ValueError):
            err.write(
                Problem(
                    message=f"writing the output failed: {error.strerror or error} (errno {errno.errorcode.get(error.errno or 0, error.errno)})",
                    key="stdout",
                    id="output",
                    fix="free space where the output goes, or redirect it to another file (df -h)",
                ).render()
                + "\n"
            )
            err.flush()
        return EXIT_INVALID_INPUT
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - a bug: one line, never a traceback
        return _internal_error(exc, err)
    return code


class _StreamError(Exception):
    """A write or flush of the standard output failed (a full disk, ``/dev/full``, an I/O error)."""

    def __init__(self, error: OSError):
        super().__init__(error)
        self.error = error


class _Guarded:
    """A text stream whose ``write``/``flush`` failures (other than a closed pipe, which keeps its
    own handling) are raised as :class:`_StreamError`, told apart from a command's own file errors."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StreamError(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _StreamError(exc) from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _internal_error(exc: BaseException, err: TextIO) -> int:
    """One ``error[internal]`` line for an unexpected exception (the traceback with
    ``GPUCLUSTER_DEBUG=1``); returns 70 (``EX_SOFTWARE``, as ``main.py``)."""
    if os.environ.get("GPUCLUSTER_DEBUG") == "1":
        import traceback

        traceback.print_exception(exc, file=err)
    with contextlib.suppress(OSError, ValueError):
        err.write(
            Problem(
                message=f"unexpected {type(exc).__name__}: {exc}",
                id="internal",
                fix="this is a gpucluster bug: rerun with GPUCLUSTER_DEBUG=1 and report the traceback with "
                "the command and its input files",
            ).render()
            + "\n"
        )
        err.flush()
    return EXIT_INTERNAL


EXIT_INTERNAL = 70
"""Exit code of an unexpected internal error (``EX_SOFTWARE``, sysexits.h), as ``main.py``."""


EXIT_OUTPUT_CLOSED = 1
"""Exit code when the reader of the output closed the pipe early (``gpucluster plan | head -1``):
the output was cut short. Python's documented recipe (library/signal, "Note on SIGPIPE")."""


def _discard_output(*streams: TextIO) -> None:
    """Point the standard streams among ``streams`` at /dev/null, so the flush at interpreter
    exit does not raise BrokenPipeError again (Python's documented SIGPIPE recipe)."""
    for stream in streams:
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue  # not a real file (tests pass StringIO)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
