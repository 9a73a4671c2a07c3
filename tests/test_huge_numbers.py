"""Numbers are sized at the boundary: an integer outside 64 bits, in any base YAML reads, is one
error line naming its key (was: a traceback past Python's 4,300-digit limit, or the AKS plugin's
hook failing with "disable the plugin"); so is an unquoted ``--set`` integer outside 64 bits (Helm's
``--set`` would keep it as a string: quoted, it is one here too)."""

from __future__ import annotations

import io

import pytest

from gpucluster.cli import main as cli_main
from gpucluster.recipes.overrides import parse_scalar
from gpucluster.yamlsafe import OutOfRange

LITERALS = {
    "decimal-4301": "9" * 4301,
    "negative-decimal": "-" + "9" * 5000,
    "hex": "0x" + "f" * 4000,
    "octal": "0" + "7" * 3000,  # YAML 1.1 (PyYAML) octal
    "binary": "0b" + "1" * 70,
    "underscores": "1_000_000_000_000_000_000_000",
    "sexagesimal": "1" + "0" * 5000 + ":30",
    "just-past-int64": str(2**63),
}

CLUSTER = """clusters:
  - name: lab
    criteria: {service: aks, accelerator: h100, os: ubuntu, intent: training}
    pools:
      - {name: system, vmSize: Standard_D8s_v5, nodeCount: 2, gpu: false}
      - {name: gpu, vmSize: Standard_ND96isr_H100_v5, nodeCount: NODES}
    overrides:
      values:
        - {component: gpu-operator, values: {x: VALUE}}
"""


def plan(tmp_path, text, *args):
    (tmp_path / "gpucluster.yaml").write_text(text)
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(
        ["plan", "--config", str(tmp_path / "gpucluster.yaml"), *args], stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "where, key",
    [
        ("NODES", "clusters[0].pools[1].nodeCount"),
        ("VALUE", "clusters[0].overrides.values[0].values.x"),
    ],
)
@pytest.mark.parametrize("name", sorted(LITERALS))
def test_an_integer_outside_64_bits_is_one_error_naming_its_key(
    tmp_path, monkeypatch, name, where, key
):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    text = CLUSTER.replace(where, LITERALS[name]).replace("NODES", "1").replace("VALUE", "1")
    code, out, err = plan(tmp_path, text)
    assert code == 2 and out == "", err
    [line] = err.splitlines()
    assert line.startswith(
        f"error[input] file={tmp_path / 'gpucluster.yaml'} key={key}: integer "
    ), line
    assert "is outside the 64-bit range Helm and Kubernetes read" in line and len(line) < 600, line


def test_the_int64_bounds_themselves_are_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    for value in (str(2**63 - 1), str(-(2**63)), "0x7fffffffffffffff"):
        code, _, err = plan(tmp_path, CLUSTER.replace("NODES", "1").replace("VALUE", value))
        assert code == 0, err


def test_a_huge_values_file_integer_names_the_values_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    (tmp_path / "v.yaml").write_text("driver:\n  version: 0x" + "f" * 5000 + "\n")
    text = CLUSTER.replace("NODES", "1").replace(
        "{component: gpu-operator, values: {x: VALUE}}", "{component: gpu-operator, file: v.yaml}"
    )
    code, _, err = plan(tmp_path, text)
    assert code == 2, err
    [line] = err.splitlines()
    assert (
        line.startswith("error[input] file=")
        and "v.yaml cluster=lab key=driver.version: integer 0x" in line
    ), line


@pytest.mark.parametrize(
    "text, value",
    [
        (str(2**63 - 1), 2**63 - 1),
        ("-9223372036854775808", -(2**63)),
        ("12", 12),
        ("'" + "9" * 4301 + "'", "9" * 4301),
    ],
)
def test_a_set_value_is_an_int_only_within_64_bits(text, value):
    assert parse_scalar(text) == value


@pytest.mark.parametrize("text", ["9" * 4301, str(2**63), "-" + "9" * 19, str(-(2**63) - 1)])
def test_a_set_integer_outside_64_bits_is_one_error_naming_its_key(tmp_path, monkeypatch, text):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    assert isinstance(parse_scalar(text), OutOfRange)
    code, out, err = plan(
        tmp_path,
        CLUSTER.replace("NODES", "1").replace("VALUE", "1"),
        "--set",
        "gpuoperator:x=" + text,
    )
    assert (code, out) == (2, ""), err
    [line] = err.splitlines()
    assert line.startswith("error[input] file=--set key=--set[0]: integer "), line
    assert "is outside the 64-bit range Helm and Kubernetes read" in line and len(line) < 600


def test_a_cluster_file_set_integer_outside_64_bits_is_one_error(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCLUSTER_CACHE_DIR", "off")
    text = CLUSTER.replace("NODES", "1").replace("VALUE", "1") + (
        f"      set: ['gpuoperator:x={'9' * 4301}']\n"
    )
    code, out, err = plan(tmp_path, text)
    assert (code, out) == (2, ""), err
    [line] = err.splitlines()
    assert line.startswith(
        f"error[input] file={tmp_path / 'gpucluster.yaml'} cluster=lab key=clusters[0].overrides.set[0]: integer "
    ), line
