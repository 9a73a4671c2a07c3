"""The rig's build files agree with its one pin file, its cache key follows its inputs, and its
failures are one line. (The control plane itself is tested in tests/rig/, in a network namespace.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucluster_rig import build

ROOT = Path(__file__).resolve().parents[1]


def _requires(gomod: Path) -> dict[str, str]:
    text = gomod.read_text(encoding="utf-8")
    return dict(re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)(?:\s*//.*)?$", text, re.M))


def test_each_go_module_requires_the_pinned_version() -> None:
    pins = build.pins()
    assert _requires(build.GO_DIR / "kube" / "go.mod")["k8s.io/kubernetes"] == pins["kubernetes"]
    assert _requires(build.GO_DIR / "kwok" / "go.mod")["sigs.k8s.io/kwok"] == pins["kwok"]
    assert _requires(build.GO_DIR / "helm" / "go.mod")["helm.sh/helm/v3"] == pins["helm"]


def test_staging_replaces_follow_the_kubernetes_go_mod() -> None:
    gomod = """module k8s.io/kubernetes

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/x/y => github.com/x/y v1.0.0
)
"""
    assert build.staging_replaces(gomod, "v1.34.4") == [
        "k8s.io/api => k8s.io/api v0.34.4",
        "k8s.io/client-go => k8s.io/client-go v0.34.4",
    ]


def test_the_kube_module_replaces_exactly_the_pinned_kubernetes_staging_modules() -> None:
    """Against the real go.mod of the pinned k8s.io/kubernetes (from Go's module cache or the proxy)."""
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    pin = build.pins()["kubernetes"]
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{pin}"],
        capture_output=True,
        text=True,
        cwd=build.GO_DIR / "kube",
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.skip(f"k8s.io/kubernetes@{pin} cannot be had here: {proc.stdout[-200:]}")
    upstream = Path(json.loads(proc.stdout)["GoMod"]).read_text(encoding="utf-8")
    want = build.staging_replaces(upstream, pin)
    ours = (build.GO_DIR / "kube" / "go.mod").read_text(encoding="utf-8")
    have = sorted(re.findall(r"^\t(k8s\.io/\S+ => k8s\.io/\S+ v\S+)$", ours, re.M))
    assert len(want) > 25
    assert have == sorted(want)


def test_the_build_key_follows_go_version_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = build.build_key("go version go1.26.8 linux/amd64")
    assert a == build.build_key("go version go1.26.8 linux/amd64")
    assert a != build.build_key("go version go1.27.3 linux/amd64")
    pins = tmp_path / "pins.json"
    pins.write_text(build.PINS_FILE.read_text().replace("v1.34.4", "v1.34.3"))
    go = tmp_path / "go"
    shutil.copytree(build.GO_DIR, go)
    monkeypatch.setattr(build, "PINS_FILE", pins)
    monkeypatch.setattr(build, "GO_DIR", go)
    assert build.build_key("go version go1.26.8 linux/amd64") != a


def test_helm4_has_its_own_key_and_never_changes_the_rigs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adding or changing go/helm4 leaves the rig programs' key (and so their cached folder) as
    it is; the Helm 4 key follows only its own files and the Go version."""
    line = "go version go1.26.8 linux/amd64"
    go = tmp_path / "go"
    shutil.copytree(build.GO_DIR, go)
    pins = tmp_path / "pins.json"
    shutil.copyfile(build.PINS_FILE, pins)
    monkeypatch.setattr(build, "GO_DIR", go)
    monkeypatch.setattr(build, "PINS_FILE", pins)
    rig, h4 = build.build_key(line), build.component_key(line, "helm4")
    shutil.rmtree(go / "helm4")
    assert build.build_key(line) == rig  # as before go/helm4 existed
    shutil.copytree(ROOT / "gpucluster_rig" / "go" / "helm4", go / "helm4")
    (go / "helm4" / "tools.go").write_text("package tools\n")
    assert build.build_key(line) == rig
    assert build.component_key(line, "helm4") != h4
    (go / "helm4" / "tools.go").write_text("package tools // another\n")
    h4b = build.component_key(line, "helm4")
    (go / "kube" / "go.mod").write_text("module changed\n")
    pins.write_text(pins.read_text().replace("v1.34.4", "v1.34.3"))
    assert build.build_key(line) != rig
    assert build.component_key(line, "helm4") == h4b
    assert build.component_key("go version go1.27.3 linux/amd64", "helm4") != h4b


def test_helm4_is_the_version_its_go_mod_requires_stamped() -> None:
    group = build.helm4_group()
    want = _requires(build.GO_DIR / "helm4" / "go.mod")["helm.sh/helm/v4"]
    assert want.startswith("v4.")
    assert group.packages == ("helm.sh/helm/v4/cmd/helm",) and group.programs == ("helm",)
    assert f"-X helm.sh/helm/v4/internal/version.version={want}" in group.ldflags
    assert "helm4" in build.OWN_KEY_GROUPS and all(g.name != "helm4" for g in build.groups())


def test_a_helm4_binary_that_is_not_executable_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.HELM4_ENV, str(tmp_path / "helm"))
    with pytest.raises(
        build.RigError, match=r"^error\[rig.binaries\].*GPUCLUSTER_RIG_HELM4"
    ) as err:
        build.helm4()
    assert "\n" not in err.value.line
    (tmp_path / "helm").write_text("#!/bin/sh\n")
    (tmp_path / "helm").chmod(0o755)
    assert build.helm4() == tmp_path / "helm"


def test_groups_stamp_the_kubernetes_version() -> None:
    kube = next(g for g in build.groups() if g.name == "kube")
    pin = build.pins()["kubernetes"]
    assert f"-X k8s.io/component-base/version.gitVersion={pin}" in kube.ldflags
    assert "-X k8s.io/component-base/version.gitMinor=34" in kube.ldflags
    assert set(kube.programs) | {"kwok", "kwokctl", "helm"} == set(build.PROGRAMS)


def test_no_go_is_one_line_with_a_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(build.BIN_ENV, raising=False)
    with pytest.raises(build.RigError) as err:
        build.binaries()
    line = err.value.line
    assert line.startswith("error[rig.go]") and "\n" not in line
    assert "fix: install Go" in line and "--binaries" in line


def test_a_binaries_folder_lacking_a_program_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in build.PROGRAMS:
        if name != "kwokctl":
            (tmp_path / name).write_text("#!/bin/sh\n")
            (tmp_path / name).chmod(0o755)
    (tmp_path / "stages.yaml").write_text("")
    monkeypatch.setenv(build.BIN_ENV, str(tmp_path))
    with pytest.raises(build.RigError, match=r"error\[rig.binaries\].*lacks kwokctl"):
        build.binaries()
    (tmp_path / "kwokctl").write_text("#!/bin/sh\n")
    (tmp_path / "kwokctl").chmod(0o755)
    assert build.binaries() == tmp_path


def test_the_core_never_imports_the_rig() -> None:
    offenders = []
    for folder in ("gpucluster", "gpucluster_cdk", "plugins"):
        for path in (ROOT / folder).rglob("*.py"):
            if re.search(
                r"^\s*(from|import)\s+gpucluster_rig\b", path.read_text(encoding="utf-8"), re.M
            ):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_gpucluster_rehearse_takes_the_rigs_own_options() -> None:
    """``gpucluster rehearse`` forwards to ``python -m gpucluster_rig rehearse``: the same options."""
    import argparse

    from gpucluster import cli
    from gpucluster_rig.__main__ import _parser

    def options(parser: argparse.ArgumentParser) -> set[str]:
        return {o for a in parser._actions for o in a.option_strings if o not in ("-h", "--help")}

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    ours = next(
        a
        for a in cli.build_parser("rehearse")._actions
        if isinstance(a, argparse._SubParsersAction)
    )
    assert options(ours.choices["rehearse"]) == options(sub.choices["rehearse"])


def test_a_rehearsal_that_cannot_start_is_one_line_and_leaves_no_folder(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in build.PROGRAMS:
        (fake / name).write_text("#!/bin/sh\nexit 1\n")
        (fake / name).chmod(0o755)
    (fake / "stages.yaml").write_text("")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster_rig",
            "rehearse",
            "--cluster",
            "nope",
            "--no-isolate",
            "--binaries",
            str(fake),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "error[rig.input] file=<embedded default> key=--cluster: no cluster named 'nope' in the cluster"
        " file (allowed: gpu-training) fix: name one of the file's clusters, or leave --cluster out"
        " to rehearse every one"
    ]
    assert list(tmp.iterdir()) == []


def test_an_unexpected_error_is_one_line_naming_the_kept_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rig bug is one ``error[rig.internal]`` line (exit 70) that says where the logs are, not a
    traceback."""
    from gpucluster_rig import __main__ as rig_main
    from gpucluster_rig import rehearse

    fake = tmp_path / "bin"
    fake.mkdir()
    for name in build.PROGRAMS:
        (fake / name).write_text("#!/bin/sh\nexit 1\n")
        (fake / name).chmod(0o755)
    (fake / "stages.yaml").write_text("")

    def broken(**_: object) -> None:
        raise KeyError("status")

    monkeypatch.setattr(rehearse, "run", broken)
    monkeypatch.delenv("GPUCLUSTER_DEBUG", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    code = rig_main.main(
        ["rehearse", "--no-isolate", "--binaries", str(fake), "--work", str(work)]
        + ["--charts", str(_one_chart(tmp_path))]
    )
    err = capsys.readouterr().err
    assert code == 70
    assert err.splitlines() == [
        f"error[rig.internal]: unexpected KeyError: 'status'; logs and reports kept in {work} fix: this"
        " is a gpucluster bug: rerun with GPUCLUSTER_DEBUG=1 and report the traceback with the command,"
        " its cluster file and the kept folder"
    ]


def _one_chart(tmp_path: Path) -> Path:
    """A --charts folder with one unpacked chart (every other chart a stub)."""
    folder = tmp_path / "charts"
    (folder / "example").mkdir(parents=True, exist_ok=True)
    (folder / "example" / "Chart.yaml").write_text("apiVersion: v2\nname: example\nversion: 1\n")
    return folder


def test_without_charts_a_stack_needing_crds_is_refused_before_the_rig_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpucluster rehearse` without --charts on the built-in AKS example: one
    ``error[rig.input] key=--charts`` line, exit 2, before the rig's programs are built or found
    (a first run would otherwise build them for minutes, then refuse)."""
    from gpucluster_rig import __main__ as rig_main

    built: list[object] = []
    monkeypatch.setattr(build, "binaries", lambda *a, **k: built.append(a) or tmp_path)
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "work"
    code = rig_main.main(["rehearse", "--no-isolate", "--work", str(work)])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and " key=--charts: " in lines[0], lines
    assert lines[0].startswith("error[rig.input] cluster="), lines
    assert built == [] and not work.exists()


def test_a_helm_failure_keeps_the_line_that_names_the_cause() -> None:
    """Helm ends a missing-CRD failure with a hint; the engine's line keeps the cause before it
    (it kept only ``ensure CRDs are installed first``)."""
    from gpucluster_rig.engine import _last

    stderr = (
        'Release "rdma" does not exist. Installing it now.\n'
        "Error: unable to build kubernetes objects from release manifest: resource mapping not found for name: "
        '"rdma-modules" namespace: "" from "": no matches for kind "NodeWright" in version '
        '"nodewright.nvidia.com/v1alpha1"\n'
        "ensure CRDs are installed first\n"
    )
    line = _last(stderr)
    assert 'no matches for kind "NodeWright"' in line
    assert line.endswith(" -- ensure CRDs are installed first")
    assert _last("Error: chart not found\n") == "Error: chart not found"
    assert _last("a\nb\n") == "b" and _last("") == ""
    assert len(_last("Error: " + "x" * 2000 + "\nhint " + "y" * 900)) <= 600


def _fake_kubectl(answers: list[str], calls: list[tuple[str, ...]]):  # noqa: ANN202
    def kubectl(*args: str, **_: object) -> str:
        calls.append(args)
        return answers.pop(0) if args[0] == "get" and answers else ""

    return kubectl


def test_a_new_namespace_is_ready_for_pods_only_once_its_default_serviceaccount_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API server refuses a pod in a namespace until the ServiceAccount controller has made
    ``default`` there; ``create_namespace`` returns only after it is seen, and says so at its
    deadline."""
    from gpucluster_rig.cluster import Cluster

    rig = Cluster(tmp_path / "bin", tmp_path / "rig")
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(rig, "kubectl", _fake_kubectl(["", "", "serviceaccount/default\n"], calls))
    rig.create_namespace("team")
    assert calls[0] == ("create", "namespace", "team")
    assert [c[:3] for c in calls[1:]] == [("get", "serviceaccount", "default")] * 3
    monkeypatch.setattr(rig, "kubectl", _fake_kubectl([], []))
    with pytest.raises(build.RigError) as err:
        rig.create_namespace("late", timeout=0)
    assert str(err.value).startswith("error[rig.namespace]")
    assert "late has no default ServiceAccount" in str(err.value)


def test_a_work_folder_that_cannot_be_made_is_one_input_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--work`` below a file: one ``error[rig.input] key=--work`` line, exit 2, before anything
    starts (it was ``error[rig.internal]``, exit 70, calling it a gpucluster bug)."""
    from gpucluster_rig import __main__ as rig_main

    fake = tmp_path / "bin"
    fake.mkdir()
    for name in build.PROGRAMS:
        (fake / name).write_text("#!/bin/sh\nexit 1\n")
        (fake / name).chmod(0o755)
    (fake / "stages.yaml").write_text("")
    a_file = tmp_path / "f.txt"
    a_file.write_text("x\n")
    work = a_file / "work"
    code = rig_main.main(
        ["rehearse", "--no-isolate", "--binaries", str(fake), "--work", str(work)]
        + ["--charts", str(_one_chart(tmp_path))]
    )
    lines = capsys.readouterr().err.splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error[rig.input] key=--work: "), lines
    assert f"{a_file} is a file" in lines[0] and " fix: " in lines[0], lines
    assert a_file.read_text() == "x\n"


@pytest.mark.parametrize("command", ["rehearse", "compare-aicr"])
def test_bad_work_and_bundle_are_refused_before_the_programs_are_looked_for(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    """``--work`` below a file (and ``compare-aicr --bundle`` that is no AICR bundle) is one
    ``error[rig.input]`` line before the rig's programs are built or found: with a missing
    ``--binaries`` folder the line was ``error[rig.binaries]``, and without one the build ran
    first."""
    from gpucluster_rig import __main__ as rig_main

    monkeypatch.chdir(tmp_path)  # the built-in example cluster
    monkeypatch.delenv("GPUCLUSTER_CONFIG", raising=False)
    a_file = tmp_path / "f.txt"
    a_file.write_text("x\n")
    charts = tmp_path / "charts"
    (charts / "x").mkdir(parents=True)
    (charts / "x" / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 1.0.0\n")
    common = ["--no-isolate", "--binaries", str(tmp_path / "none")]
    if command == "rehearse":
        argv = ["rehearse", *common, "--charts", str(charts), "--work", str(a_file / "work")]
        key = "--work"
    else:
        argv = ["compare-aicr", *common, "--bundle", str(tmp_path), "--work", str(tmp_path / "w")]
        key = "--bundle"
    code = rig_main.main(argv)
    lines = capsys.readouterr().err.splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"error[rig.input] key={key}: "), lines
    assert not (tmp_path / "w").exists()


def test_a_control_plane_that_never_starts_is_one_cluster_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kwokctl create past its deadline (a cluster it cannot reach, a machine too loaded) is one
    ``error[rig.cluster]`` line naming kwokctl's log; it was an uncaught TimeoutExpired that
    ``rehearse`` turned into ``error[rig.internal]`` (exit 70, 'a gpucluster bug')."""
    from gpucluster_rig import cluster as cluster_mod

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "stages.yaml").write_text("")

    def too_slow(cmd: list[str], **kwargs: object) -> None:
        raise subprocess.TimeoutExpired(cmd, 240.0)

    monkeypatch.setattr(cluster_mod.subprocess, "run", too_slow)
    rig = cluster_mod.Cluster(tmp_path / "bin", tmp_path / "rig", name="rig-x")
    try:
        with pytest.raises(build.RigError) as err:
            rig.start(timeout=180)
    finally:
        rig.sink.stop()
    assert err.value.line.startswith("error[rig.cluster]: kwokctl create cluster did not finish"), (
        err.value.line
    )
    assert str(tmp_path / "rig" / "kwokctl.log") in err.value.line


def _fake_rig(tmp_path: Path) -> Path:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name in build.PROGRAMS:
        (fake / name).write_text("#!/bin/sh\nexit 1\n")
        (fake / name).chmod(0o755)
    (fake / "stages.yaml").write_text("")
    return fake


class _Execd(Exception):
    pass


@pytest.mark.parametrize("unshare", ["refused", "missing"])
def test_a_network_namespace_that_cannot_be_made_is_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    unshare: str,
) -> None:
    """Where `unshare --net` is refused (a container without CAP_SYS_ADMIN, user namespaces
    off) the rehearsal printed unshare's own line and exited 1 ('a rehearsal failed'; no JSON
    with --format json); without unshare it ran on the host's network without a word. Both are
    one ``error[rig.isolate]`` line, exit 2, before anything starts."""
    from gpucluster_rig import __main__ as rig_main
    from gpucluster_rig import rehearse

    tools = tmp_path / "tools"
    tools.mkdir()
    if unshare == "refused":
        (tools / "unshare").write_text(
            "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n"
        )
        (tools / "unshare").chmod(0o755)
        monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    else:
        real_which = shutil.which
        monkeypatch.setattr(
            rehearse.shutil, "which", lambda n, *a, **k: None if n == "unshare" else real_which(n)
        )
    monkeypatch.setattr(rehearse, "in_private_network", lambda: False)

    def execv(*_: object) -> None:  # the old code replaced this process with unshare
        raise _Execd

    def run(**_: object) -> None:
        raise _Execd

    monkeypatch.setattr(rig_main.os, "execv", execv)
    monkeypatch.setattr(rehearse, "run", run)
    work = tmp_path / "work"
    code = rig_main.main(["rehearse", "--binaries", str(_fake_rig(tmp_path)), "--work", str(work)])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error[rig.isolate]: "), lines
    assert "--no-isolate" in lines[0].split(" fix: ", 1)[1], lines
    if unshare == "refused":
        assert "Operation not permitted" in lines[0]
    assert not work.exists()


@pytest.mark.parametrize("delay", ["nan", "inf", "-5", "1e9"])
def test_a_stand_in_delay_that_is_no_number_of_seconds_is_one_usage_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], delay: str
) -> None:
    """`--delay nan` (or inf) made the stand-ins never report ready, so the rehearsal waited out
    every gate (30 minutes for the ClusterPolicy gate); refused as the other durations are."""
    from gpucluster.cli import main

    code = main(["rehearse", f"--delay={delay}", "--binaries", str(tmp_path / "none")])
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.strip()]
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("error[usage]") and "--delay" in lines[0], lines


def test_a_failed_kwokctl_create_is_said_in_its_own_words_not_its_json(tmp_path: Path) -> None:
    """kwokctl logs JSON; the rig.cluster line carried its last log record as raw JSON
    ({"time":...,"level":"ERROR","source":{...},"msg":"Execute exit","err":"cmd wait: ..."}),
    cut before the cause. The line says the record's msg and err."""
    from gpucluster_rig import cluster as cluster_mod

    fake = _fake_rig(tmp_path)
    record = {
        "time": "2026-12-06T13:07:04Z",
        "level": "ERROR",
        "source": {"function": "main.main", "file": "cmd/kwokctl/main.go", "line": 56},
        "msg": "Execute exit",
        "err": "cmd wait: kube-apiserver exited: boom: broken apiserver",
    }
    (fake / "kwokctl").write_text(f"#!/bin/sh\necho '{json.dumps(record)}'\nexit 1\n")
    rig = cluster_mod.Cluster(fake, tmp_path / "rig", name="rig-x")
    try:
        with pytest.raises(build.RigError) as err:
            rig.start(timeout=30)
    finally:
        rig.sink.stop()
    assert err.value.line.startswith(
        "error[rig.cluster]: kwokctl create cluster failed: Execute exit: cmd wait: "
        "kube-apiserver exited: boom: broken apiserver fix: "
    ), err.value.line


@pytest.mark.parametrize("command", ["rehearse", "compare-aicr"])
def test_the_rigs_own_entry_point_refuses_a_delay_that_is_no_number_of_seconds(
    tmp_path: Path, command: str
) -> None:
    """``python -m gpucluster_rig`` takes ``--delay`` with gpucluster's check (``nan`` or ``inf``
    never lets a stand-in report ready): one error[usage] line, exit 2, nothing started."""
    extra = ["--bundle", str(tmp_path)] if command == "compare-aicr" else []
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpucluster_rig",
            command,
            *extra,
            "--delay",
            "nan",
            "--binaries",
            str(tmp_path / "none"),
            "--work",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error[usage]: argument --delay: 'nan'"), lines
    assert "run 'python -m gpucluster_rig " in lines[0]
    assert not (tmp_path / "work").exists()


def test_a_client_gone_mid_download_prints_nothing_from_the_chart_repository(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Helm stopped mid-download (Ctrl-C, its timeout) leaves the repository writing to a closed
    connection: nothing may reach the rehearsal's stderr (it printed a BrokenPipeError traceback
    under the rehearsal's one error line); another failure of a request goes to the log file."""
    import socket
    import struct
    import threading
    import time

    from gpucluster_rig.charts import ChartRepo

    repo = ChartRepo(tmp_path / "repo", tmp_path / "no-helm", None, {})
    (repo.folder / "big.tgz").write_bytes(b"\0" * (32 << 20))
    repo.start()
    try:
        before = {t for t in threading.enumerate()}
        client = socket.create_connection(("127.0.0.1", repo.port), timeout=10)
        client.sendall(b"GET /big.tgz HTTP/1.1\r\nHost: x\r\n\r\n")
        client.recv(1024)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # a reset: the server's next writes fail
        deadline = time.monotonic() + 30
        while any(
            t.is_alive()
            for t in set(threading.enumerate()) - before - {threading.current_thread()}
            if "process_request" in t.name
        ):
            assert time.monotonic() < deadline, "the request's thread did not end"
            time.sleep(0.05)
    finally:
        repo.stop()
    assert capfd.readouterr().err == ""
    assert not (tmp_path / "chart-repo-errors.log").exists()
