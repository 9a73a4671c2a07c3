"""Where ``--attestation``, ``--junit`` and ``snapshot --out`` write: never over a link (the link
stays, its target gets the bytes), straight through to a pipe or a character device, never onto an
input of the run, one ``error[validate.input]`` line for a path that cannot be written; the
attestation hashes the snapshot bytes that were judged; evidence JSON is ASCII.

Every link, pipe and file is made in a temporary folder: no test writes to the machine's own
``/dev/stdout`` (a test reproducing the old rename as root would replace it)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from test_upgrade_live import _team_pod, cli, cluster_file, healthy_items
from validate_support import write_snapshot

from gpucluster.lint import upgrade_check
from gpucluster.live import snapshot as snapshot_mod
from gpucluster.live import upgrade_live

NODE = "aks-gpu-12345678-vmss000000"


@pytest.fixture
def change(tmp_path):
    """``(old, new, snapshot)``: a driver version change of an operator-managed cluster and a
    snapshot of it."""
    profile = {"gpuStack": "operator-managed"}
    old = cluster_file(tmp_path / "a.yaml", profile=profile)
    new = cluster_file(
        tmp_path / "b.yaml",
        profile=profile,
        overrides={"set": ["gpuoperator:driver.version=580.105.08"]},
    )
    snap = write_snapshot(tmp_path / "snap.json", healthy_items(2))
    return old, new, str(snap)


def attest(change, target: str, *extra: str) -> tuple[int, str, str]:
    old, new, snap = change
    return cli(
        "upgrade-check",
        "--from",
        old,
        "--to",
        new,
        "--snapshot",
        snap,
        "--attestation",
        target,
        *extra,
    )


def _statement(text: str) -> dict:
    doc = json.loads(text)
    assert doc["_type"] == "https://in-toto.io/Statement/v1", doc
    return doc


@pytest.mark.parametrize("depth", [1, 2])
def test_a_link_to_a_file_stays_a_link(tmp_path, change, depth):
    """``--attestation LINK`` (one link, or a chain like /dev/stdout -> /proc/self/fd/1 -> file)
    writes the file the link names and leaves every link in place (the old rename replaced the
    link itself with a regular file)."""
    real = tmp_path / "out" / "attestation.json"
    real.parent.mkdir()
    real.write_text("old\n")
    links = [tmp_path / f"link{i}" for i in range(depth)]
    for here, there in zip(links, [*links[1:], real], strict=True):
        here.symlink_to(there)
    code, out, err = attest(change, str(links[0]))
    assert code == 3 and err == "", err
    for link in links:
        assert link.is_symlink(), link
    _statement(real.read_text(encoding="utf-8"))
    assert sorted(p.name for p in real.parent.iterdir()) == ["attestation.json"], (
        "no temporary left"
    )


def _reader(fifo: Path, got: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _unblock(fifo: Path, thread: threading.Thread) -> None:
    """End a reader still waiting for a writer (the run never opened the pipe)."""
    if thread.is_alive():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    thread.join(30)


def test_a_link_to_a_pipe_is_written_straight_through(tmp_path, change):
    """``--attestation`` naming a link to a pipe (``/dev/stdout`` piped to the next command)
    writes into the pipe: the pipe and the link stay (it was refused: 'not a regular file')."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    got: list[bytes] = []
    thread = _reader(fifo, got)
    try:
        code, _, err = attest(change, str(link))
    finally:
        _unblock(fifo, thread)
    assert code == 3 and err == "", err
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode)
    _statement(got[0].decode("ascii"))


def _discarding_device() -> str:
    """A character device that discards what is written to it: /dev/null, else /dev/zero."""
    for path in (os.devnull, "/dev/zero"):
        try:
            if stat.S_ISCHR(os.lstat(path).st_mode):
                return path
        except OSError:
            continue
    pytest.skip("no character device that discards writes on this machine")


def test_a_link_to_a_character_device_is_written_straight_through(tmp_path, change):
    """A character device (/dev/null or /dev/zero, through a link in the temporary folder) is
    written as it is: the device stays a device, the link a link (it was refused)."""
    device = _discarding_device()
    link = tmp_path / "device"
    link.symlink_to(device)
    code, _, err = attest(change, str(link))
    assert code == 3 and err == "", err
    assert link.is_symlink() and stat.S_ISCHR(os.lstat(device).st_mode)


def _one_line(code: int, out: str, err: str, key: str) -> str:
    assert (code, out) == (2, ""), (code, out, err)
    assert err.count("\n") == 1 and err.startswith("error[validate.input] "), err
    assert f"key={key}" in err and "Traceback" not in err, err
    return err


def test_an_output_that_is_an_input_is_refused(tmp_path, change):
    """``--attestation`` equal to ``--snapshot`` or to the ``--to`` file (as given, or through a
    link), ``validate --junit`` equal to ``--snapshot``: one line, the input untouched (it was
    silently overwritten)."""
    old, new, snap = change
    before = {p: Path(p).read_bytes() for p in (snap, new)}
    for target in (snap, new, str(tmp_path / "." / "snap.json")):
        err = _one_line(*attest(change, target), "--attestation")
        assert "input" in err, err
    alias = tmp_path / "alias.json"
    alias.symlink_to(snap)
    _one_line(*attest(change, str(alias)), "--attestation")
    _one_line(
        *cli("validate", "--snapshot", snap, "--junit", snap),
        "--junit",
    )
    assert {p: Path(p).read_bytes() for p in (snap, new)} == before


def test_a_snapshot_out_that_is_the_cluster_file_is_refused(tmp_path, change):
    old, _, _ = change
    before = Path(old).read_bytes()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    _one_line(
        *cli("snapshot", "--config", old, "--kubeconfig", str(kubeconfig), "--out", old), "--out"
    )
    assert Path(old).read_bytes() == before


@pytest.mark.parametrize(
    "target",
    [
        "{tmp}/" + "x" * 300 + ".json",  # longer than a file name may be
        "{tmp}/a-file.txt/attestation.json",  # under a regular file
        "/proc/gpucluster-attestation.json",  # /proc: never created
    ],
)
def test_an_unwritable_target_is_one_line(tmp_path, change, target):
    (tmp_path / "a-file.txt").write_text("x")
    _one_line(*attest(change, target.format(tmp=tmp_path)), "--attestation")


def test_the_attestation_hashes_the_bytes_that_were_judged(tmp_path, change):
    """The snapshot subject's digest is the sha256 of the bytes read and judged, not of what the
    file holds when the attestation is written."""
    old, new, snap = change
    judged = Path(snap).read_bytes()
    report, a, b = upgrade_check.run_sides(old, new)
    loaded = snapshot_mod.load_snapshot_file(snap)
    live = upgrade_live.assess(report, a.plans[0], b.plans[0], loaded)
    Path(snap).write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    doc = _statement(upgrade_live.attestation(live, a.plans[0], b.plans[0], snapshot_file=snap))
    assert doc["subject"][0]["digest"]["sha256"] == hashlib.sha256(judged).hexdigest()


def test_evidence_json_is_ascii_whatever_the_names(tmp_path, change):
    """A pod name with a right-to-left override, a C1 control and a lone surrogate (JSON
    ``\\ud800``): CTRF on stdout and the attestation are ASCII JSON that carries them escaped (a
    lone surrogate was error[internal], the others raw)."""
    old, new, _ = change
    name = "train-\u202e-\x85-\ud800"
    items = healthy_items(2) + [_team_pod(name, NODE, {"limits": {"nvidia.com/gpu": "8"}})]
    path = tmp_path / "names.json"
    path.write_text(
        json.dumps(
            snapshot_mod.snapshot_document(
                items, every_namespace=snapshot_mod.EVERY_NAMESPACE_KINDS
            )
        ),
        encoding="ascii",
    )
    att = tmp_path / "att.json"
    code, out, err = cli(
        "upgrade-check",
        "--from",
        old,
        "--to",
        new,
        "--snapshot",
        str(path),
        "--format",
        "ctrf",
        "--attestation",
        str(att),
    )
    assert code == 3 and err == "", err
    assert out.isascii() and json.loads(out)
    text = att.read_text(encoding="ascii")
    doc = _statement(text)
    nodes = {n["node"]: n for n in doc["predicate"]["nodes"]}
    assert nodes[NODE]["gpuPods"] == [f"team-a/{name}"]


def test_a_link_through_a_system_folder_to_a_file_is_refused(tmp_path, monkeypatch, change):
    """``/dev/stdout`` redirected to a file is ``/dev/stdout -> /proc/self/fd/1 -> the file``: a
    regular file reached through /dev or /proc is refused (the old rename replaced /dev/stdout
    itself), and so is a new file in /dev. Emulated in the temporary folder, with its ``dev`` and
    ``proc`` standing for the system folders -- the machine's own are never touched."""
    from gpucluster.live import cli as live_cli

    dev, proc = tmp_path / "dev", tmp_path / "proc" / "self" / "fd"
    dev.mkdir()
    proc.mkdir(parents=True)
    monkeypatch.setattr(live_cli, "SYSTEM_FOLDERS", (str(dev), str(tmp_path / "proc")))
    out = tmp_path / "ci.log"
    out.write_text("build log\n")
    (proc / "1").symlink_to(out)
    (dev / "stdout").symlink_to(proc / "1")
    for target in (dev / "stdout", dev / "new.json"):
        err = _one_line(*attest(change, str(target)), "--attestation")
        assert "/dev, /proc or /sys" in err, err
    assert (dev / "stdout").is_symlink() and (proc / "1").is_symlink()
    assert out.read_text() == "build log\n" and not (dev / "new.json").exists()
