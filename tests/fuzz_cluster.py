"""Hypothesis strategies for cluster files, generated from the cluster-file schema (gpucluster.inputs.config).

The schema is the key tables of :mod:`gpucluster.inputs.config` (``TOP_KEYS``, ``CLUSTER_KEYS``,
``POOL_KEYS``, ``EXISTING_KEYS``) plus the overrides/scheduling/backend formats (docs/cluster-file.md,
docs/overrides.md). :data:`CLUSTER_FIELDS` gives every cluster key a strategy of *valid* values;
a test checks that it covers ``config.CLUSTER_KEYS`` exactly, so a new key cannot be left out.

* :func:`valid_documents` -- documents the pipeline accepts (base documents of each platform,
  with fields drawn from the valid strategies).
* :func:`mutated_documents` -- a valid document with one to three mutations at paths drawn from
  the document itself: deletion, a wrong type, a hostile string (huge, unicode, control
  characters, Terraform ``${}``/``%{}``, shell metacharacters, forged ``error[...]`` lines), an
  unknown key.
* :func:`yaml_texts` -- documents as YAML text, plain or with YAML-level attacks (tags such as
  ``!!python/object/apply``, anchors and aliases, merge keys, duplicate keys, tabs, raw control
  characters, several documents, deep nesting).

Hostile strings carry :data:`PROBE` so a test can find them in the output: a probe must never
appear in Terraform JSON as an unescaped template sequence.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml
from hypothesis import strategies as st

PROBE = "gpucluster_probe"
"""Marker inside every Terraform/shell payload (never a real Terraform name or command)."""

TERRAFORM_PAYLOADS = [
    '${file("/etc/passwd")}',
    "${" + PROBE + "}",
    "${var." + PROBE + "}",
    '${file(pathexpand("~/.terraform.d/credentials.tfrc.json"))}' + PROBE,
    "%{ if true }" + PROBE + "%{ endif }",
    "$${" + PROBE + "}",
    "$$${" + PROBE + "}",
    "x${" + PROBE,
    "%{" + PROBE,
]
SHELL_PAYLOADS = [
    "$(touch /tmp/" + PROBE + ")",
    "`touch /tmp/" + PROBE + "`",
    "a; touch /tmp/" + PROBE,
    "a && rm -rf /tmp/" + PROBE,
    "{{ ." + PROBE + " }}",  # Go template (Helm)
    "{{ " + PROBE + " }}",  # Jinja (manifest templates)
    "'\"\\" + PROBE,
]
CONTROL_PAYLOADS = [
    "name\nerror[forged] key=x: forged fix: none",
    "\x1b]0;" + PROBE + "\x07",
    "\x1b[2J\x1b[H" + PROBE,
    "a\rb\x00c\x7f\x85d",
    "\u202e" + PROBE + "\u2066",
    "\u2028line\u2029para",
    "\ufeffbom",
]
PATH_PAYLOADS = [
    "loop",
    "loop/values.yaml",
    "fifo",
    "folder",
    "a\x00b.yaml",
    "x" * 256 + ".yaml",
    "d/" * 300 + "v.yaml",
    "../" * 40 + "etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    "/proc/self/environ",
    "~/values.yaml",
    ".",
    "..",
    "values/gpu-operator.yaml\n",
    "values/../values/gpu-operator.yaml",
    "values/" + "é" * 130 + ".yaml",
]
"""File names for ``recipe`` and ``overrides.values[].file``; the fuzz folder holds a symbolic link
loop ``loop``, a FIFO ``fifo``, a folder ``folder`` and ``values/gpu-operator.yaml`` (see
:func:`lay_out_project`)."""
DEEP_SETS = [
    "gpuoperator:" + ".".join(["k"] * 1000) + "=1",
    "gpuoperator:" + ".".join(["k"] * 200) + "=x",
    "gpuoperator:" + "a" * 5000 + "=1",
    "gpuoperator:driver.version=" + '${file("/etc/passwd")}',
    "gpuoperator:driver.version=%{ if true }x%{ endif }",
    "gpuoperator:driver\\.x=\x1b[2J",
]
UNICODE_PAYLOADS = ["ünïcødé", "名前", "🚀" * 8, "\U0010ffff", "a" * 256, "é" * 200]

hostile_strings = st.one_of(
    st.sampled_from(
        TERRAFORM_PAYLOADS
        + SHELL_PAYLOADS
        + CONTROL_PAYLOADS
        + UNICODE_PAYLOADS
        + PATH_PAYLOADS
        + DEEP_SETS
    ),
    st.text(min_size=0, max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=20).map(
        lambda s: "${" + s + "}"
    ),
    st.integers(min_value=1_000, max_value=60_000).map(lambda n: "A" * n),  # huge
    st.text(alphabet=st.sampled_from("${}%\\\"'`;|&\n\t\x1b\x00:=,./~*"), min_size=1, max_size=30),
)
wrong_types = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just([]),
    st.just({}),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)

# --------------------------------------------------------------------------- valid values per key

names = st.from_regex(r"\A[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,5})?\Z")
AKS_CRITERIA = [
    {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"},
    {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "inference"},
    {
        "service": "aks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "training",
        "platform": "kubeflow",
    },
    {
        "service": "aks",
        "accelerator": "h100",
        "os": "ubuntu",
        "intent": "inference",
        "platform": "dynamo",
    },
]
SAFE_SETS = [
    "gpuoperator:dcgmExporter.serviceMonitor.interval=60s",
    "gpuoperator:driver.rdma.useHostMofed=false",
]

CLUSTER_FIELDS: dict[str, st.SearchStrategy] = {
    "name": names,
    "criteria": st.sampled_from(AKS_CRITERIA),
    "recipe": st.nothing(),  # a path to a RecipeResult file; covered by mutations and the walk test
    "versionSkew": st.nothing(),  # warning | error, with recipe only: reached by mutations
    "profile": st.sampled_from(
        [{}, {"gpuStack": "azure-managed"}, {"gpuStack": "operator-managed"}]
    ),
    "region": st.sampled_from(["eastus", "westus3", "swedencentral"]),
    "kubernetesVersion": st.sampled_from(["1.34", "1.35"]),
    "pools": st.sampled_from(
        [
            [
                {"name": "system", "vmSize": "Standard_D8s_v5", "nodeCount": 2, "gpu": False},
                {
                    "name": "gpu",
                    "vmSize": "Standard_ND96isr_H100_v5",
                    "nodeCount": 1,
                    "labels": {"example.com/team": "ml"},
                },
            ],
            # step 1 of a surge change (docs/cluster-file.md "Replacing a GPU pool")
            [
                {"name": "system", "vmSize": "Standard_D8s_v5", "nodeCount": 2, "gpu": False},
                {"name": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "nodeCount": 1},
                {
                    "name": "gpu2",
                    "vmSize": "Standard_NC80adis_H100_v5",
                    "nodeCount": 2,
                    "replaces": "gpu",
                },
            ],
        ]
    ),
    "existing": st.fixed_dictionaries(
        {"kubeconfig": st.sampled_from(["/etc/kube/config", "~/.kube/config"])},
        optional={"context": st.sampled_from(["prod", "admin@aks"])},
    ),
    "overrides": st.fixed_dictionaries(
        {},
        optional={
            "set": st.lists(st.sampled_from(SAFE_SETS), max_size=2, unique=True),
            "values": st.lists(
                st.one_of(
                    st.fixed_dictionaries(
                        {
                            "component": st.just("gpu-operator"),
                            "values": st.fixed_dictionaries(
                                {
                                    "gpucluster_fuzz": st.sampled_from(
                                        TERRAFORM_PAYLOADS + SHELL_PAYLOADS
                                    )
                                }
                            ),
                        }
                    ),
                    st.just({"component": "gpu-operator", "file": "values/gpu-operator.yaml"}),
                ),
                max_size=2,
            ),
        },
    ),
    "scheduling": st.just({}),
    "settings": st.just({}),
    "backend": st.just({"type": "local"}),
    "charts": st.sampled_from(
        [
            {},
            {"mirror": "oci://myacr.azurecr.io/helm"},
            {
                "mirrors": {
                    "https://helm.ngc.nvidia.com/nvidia": "https://mirror.example.com/nvidia"
                }
            },
        ]
    ),
    "images": st.sampled_from(
        [{}, {"mirror": "myacr.azurecr.io/mirror"}, {"mirror": "localhost:5000"}]
    ),  # docs/cluster-file.md: images.mirror
    "driverUpgradePolicy": st.fixed_dictionaries(
        {},
        optional={
            "autoUpgrade": st.booleans(),
            "maxParallelUpgrades": st.integers(0, 8),
            "maxUnavailable": st.one_of(st.integers(1, 4), st.sampled_from(["1%", "25%", "100%"])),
            "drain": st.fixed_dictionaries(
                {},
                optional={
                    "enable": st.booleans(),
                    "podSelector": st.sampled_from(["", "app=train", "team!=infra"]),
                    "timeoutSeconds": st.integers(0, 3600),
                },
            ),
        },
    ),
    "schedulerProfiles": st.sampled_from(
        [
            [{"schedulerName": "gpu-binpacking-scheduler", "preset": "gpu-binpacking"}],
            [
                {"schedulerName": "cpu-pack", "preset": "cpu-binpacking"},
                {
                    "schedulerName": "gpu-score",
                    "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
                },
            ],
        ]
    ),
    "fleet": st.nothing(),  # a fleet group name; needs a top-level fleet: section (docs/fleets.md): mutations only
}
"""Valid AKS values of every cluster key (``recipe`` and ``existing`` exclude others: see below)."""


@st.composite
def valid_aks_cluster(draw) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "name": draw(names),
        "criteria": copy.deepcopy(draw(CLUSTER_FIELDS["criteria"])),
    }
    for key in (
        "profile",
        "region",
        "kubernetesVersion",
        "overrides",
        "scheduling",
        "settings",
        "backend",
        "charts",
        "images",
        "driverUpgradePolicy",
        "schedulerProfiles",
    ):
        if draw(st.booleans()):
            cluster[key] = copy.deepcopy(draw(CLUSTER_FIELDS[key]))
    if draw(st.booleans()):
        cluster["existing"] = draw(CLUSTER_FIELDS["existing"])
        cluster.pop("region", None)
        # no pools to derive the GPU toleration from (docs/cluster-file.md)
        cluster["scheduling"] = {"accelerated": {"tolerations": ["nvidia.com/gpu:NoSchedule"]}}
    elif draw(st.booleans()):
        cluster["pools"] = copy.deepcopy(draw(CLUSTER_FIELDS["pools"]))
    return cluster


OKE_CLUSTER = {
    "name": "oke-gb200",
    "criteria": {
        "service": "oke",
        "accelerator": "gb200",
        "os": "ubuntu",
        "intent": "training",
        "platform": "kubeflow",
    },
    "profile": {"gpuStack": "oci-managed"},
    "kubernetesVersion": "1.34",
    "existing": {"kubeconfig": "/etc/kube/oke.yaml", "context": "oke-admin"},
    "settings": {"nvidiaGpuPluginAddon": "installed"},
}
NVKE_CLUSTER = {
    "name": "nvke-a",
    "criteria": {
        "service": "nvke",
        "accelerator": "gb200",
        "os": "ubuntu",
        "intent": "training",
        "platform": "kubeflow",
    },
    "kubernetesVersion": "1.34",
    "existing": {"kubeconfig": "/etc/kube/nvke.yaml", "context": "tenant-a"},
    "settings": {
        "rails": [
            {"name": "mlx5_0", "rootDevice": "0000:03:00.0"},
            {"name": "mlx5_1", "rootDevice": "0002:03:00.0"},
            {"name": "mlx5_3", "rootDevice": "0010:03:00.0"},
            {"name": "mlx5_4", "rootDevice": "0012:03:00.0"},
        ]
    },
}


@st.composite
def valid_documents(draw) -> dict[str, Any]:
    """A cluster-file document the pipeline accepts (exit 0)."""
    first = draw(st.one_of(valid_aks_cluster(), st.just(OKE_CLUSTER), st.just(NVKE_CLUSTER)))
    clusters = [copy.deepcopy(first)]
    if draw(st.integers(0, 4)) == 0:
        second = draw(valid_aks_cluster())
        if second["name"] != first["name"]:
            clusters.append(second)
    doc: dict[str, Any] = {"clusters": clusters}
    if draw(st.integers(0, 3)) == 0:  # the file-wide chart mirror (a cluster's own replaces it)
        doc["charts"] = copy.deepcopy(draw(CLUSTER_FIELDS["charts"]))
    if draw(st.integers(0, 3)) == 0:  # the file-wide image mirror (a cluster's own replaces it)
        doc["images"] = copy.deepcopy(draw(CLUSTER_FIELDS["images"]))
    return doc


def lay_out_project(folder) -> None:
    """The files a fuzzed cluster file may reference, plus hostile ones (see :data:`PATH_PAYLOADS`)."""
    import os
    from pathlib import Path

    folder = Path(folder)
    (folder / "values").mkdir()
    (folder / "values" / "gpu-operator.yaml").write_text(
        "gpucluster_fuzz_file: '${file(\"/etc/passwd\")}'\n"
    )
    (folder / "folder").mkdir()
    (folder / "loop").symlink_to("loop")
    os.mkfifo(folder / "fifo")


# --------------------------------------------------------------------------- mutations


def paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key/index path of ``doc`` (the root is ``()``)."""
    found = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            found += paths(value, prefix + (key,))
    elif isinstance(doc, list):
        for index, value in enumerate(doc):
            found += paths(value, prefix + (index,))
    return found


def _parent(doc: Any, path: tuple) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutation(draw, doc: dict) -> dict:
    """``doc`` with one mutation at a path drawn from it."""
    doc = copy.deepcopy(doc)
    candidates = [p for p in paths(doc) if p]
    if not candidates:  # everything was deleted already: replace the whole document
        return draw(st.one_of(wrong_types, hostile_strings))
    path = draw(st.sampled_from(candidates))
    parent = _parent(doc, path)
    kind = draw(st.sampled_from(["delete", "type", "string", "string", "unknown-key", "key"]))
    if kind == "delete":
        del parent[path[-1]]
    elif kind == "type":
        parent[path[-1]] = draw(wrong_types)
    elif kind == "string":
        parent[path[-1]] = draw(hostile_strings)
    elif kind == "unknown-key" and isinstance(parent[path[-1]], dict):
        parent[path[-1]][draw(hostile_strings)] = draw(st.one_of(hostile_strings, wrong_types))
    elif isinstance(parent, dict):  # rename the key to a hostile one
        parent[draw(hostile_strings)] = parent.pop(path[-1])
    else:
        parent[path[-1]] = draw(hostile_strings)
    return doc


@st.composite
def mutated_documents(draw) -> dict:
    doc = draw(valid_documents())
    for _ in range(draw(st.integers(1, 3))):
        if not isinstance(doc, (dict, list)):
            break
        doc = draw(mutation(doc))
    return doc


# --------------------------------------------------------------------------- YAML text


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value used twice (``st.just`` hands out one object) twice, not as ``&id``/``*id``:
    aliases are a YAML-level attack of :data:`YAML_ATTACKS`, not part of a valid document."""

    def ignore_aliases(self, data):
        return True


def dump(doc: Any) -> str:
    return yaml.dump(doc, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True, width=10_000)


YAML_ATTACKS = [
    lambda text: "!!python/object/apply:os.system ['touch /tmp/" + PROBE + "']\n",
    lambda text: text.replace("clusters:", "clusters: !!python/object/new:dict", 1),
    lambda text: text.replace("name:", "name: !!binary aGVsbG8=\n    x:", 1),
    lambda text: text.replace("name:", "name: !custom", 1),
    lambda text: (
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n" + text
    ),
    lambda text: (
        text.replace("criteria:", "criteria: &crit", 1) + "  - name: copy\n    criteria: *crit\n"
    ),
    lambda text: (
        "base: &base {service: aks}\n"
        + text.replace("criteria:", "criteria:\n      <<: *base\n     ", 1)
    ),
    lambda text: text + "clusters: []\n",  # duplicate key
    lambda text: text.replace("  ", "\t", 1),
    lambda text: text.replace("name: ", "name: \x07\x1b[2J", 1),
    lambda text: text.replace("name: ", 'name: "\\x00\\u202e"  # ', 1),
    lambda text: text + "---\nclusters: []\n",
    lambda text: "clusters:\n" + "  " + "[" * 5000 + "]" * 5000 + "\n",
    lambda text: "clusters:\n  - " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
    lambda text: text.replace("name:", "? [complex, key]\n    : 1\n    name:", 1),
    lambda text: text.replace("kubernetesVersion: '1.34'", "kubernetesVersion: 1.30", 1),
    lambda text: text.replace("name:", "name: 2026-07-01\n    alias:", 1),
    lambda text: "\ufeff" + text,
    lambda text: text.encode("utf-8", "replace").decode("latin-1"),
    lambda text: "%YAML 1.1\n%TAG ! tag:evil.example,2026:\n---\n" + text,
]


@st.composite
def yaml_texts(draw) -> str:
    """Cluster files as text: a (mutated) document, or one with a YAML-level attack."""
    doc = draw(st.one_of(valid_documents(), mutated_documents()))
    text = dump(doc)
    if draw(st.booleans()):
        text = draw(st.sampled_from(YAML_ATTACKS))(text)
    return text


# --------------------------------------------------------------------------- newlines, numbers, options

CONTROL_CHARACTERS = [
    "\n",
    "\r\n",
    "\r",
    "\t",
    "\x00",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\x0b",
    "\x0c",
]
"""What a string of the cluster file may end in, start with or hold that no name, region, version
or label may: a trailing newline first (``name: |`` adds one)."""


class _BlockDumper(_NoAliasDumper):
    """Writes a string holding a newline as a YAML block scalar (``|``), as users write multi-line
    values; YAML then adds (or keeps) the final newline."""


def _block_string(dumper, data: str):
    if "\n" in data and not re.search(
        r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]", data.replace("\n", "")
    ):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_str(data)


_BlockDumper.add_representer(str, _block_string)


def dump_block(doc: Any) -> str:
    """:func:`dump` with multi-line strings as block scalars."""
    return yaml.dump(doc, Dumper=_BlockDumper, sort_keys=False, allow_unicode=True, width=10_000)


@st.composite
def control_character_mutations(draw, doc: dict) -> dict:
    """``doc`` with one of its strings (a value or a mapping key) given a :data:`CONTROL_CHARACTERS`
    character at its end (most often), its start or inside."""
    doc = copy.deepcopy(doc)
    strings = [p for p in paths(doc) if p and isinstance(_parent(doc, p)[p[-1]], str)]
    keys = [p for p in paths(doc) if p and isinstance(p[-1], str)]
    char = draw(st.sampled_from(CONTROL_CHARACTERS))
    where = draw(st.sampled_from(["end", "end", "end", "start", "middle"]))

    def changed(text: str) -> str:
        if where == "end":
            return text + char
        if where == "start":
            return char + text
        half = len(text) // 2
        return text[:half] + char + text[half:]

    if strings and (not keys or draw(st.integers(0, 4)) > 0):
        path = draw(st.sampled_from(strings))
        parent = _parent(doc, path)
        parent[path[-1]] = changed(parent[path[-1]])
    else:
        path = draw(st.sampled_from(keys))
        parent = _parent(doc, path)
        items = list(parent.items())
        parent.clear()
        parent.update({(changed(k) if k == path[-1] else k): v for k, v in items})
    return doc


INT_PLACEHOLDER = "gpucluster_fuzz_int_placeholder"
"""A plain YAML scalar :func:`out_of_range_integers` literals replace in a dumped document."""


def _digits(alphabet: str, lead: str, low: int, high: int) -> st.SearchStrategy[str]:
    return st.tuples(
        st.sampled_from(lead), st.text(alphabet=alphabet, min_size=low - 1, max_size=high - 1)
    ).map("".join)


out_of_range_integers = st.one_of(
    _digits("0123456789", "123456789", 20, 6000),  # >= 10**19 > 2**63 - 1
    _digits("0123456789", "123456789", 20, 6000).map(lambda s: "-" + s),  # < -2**63
    _digits("0123456789abcdefABCDEF", "123456789abcdef", 17, 5000).map(
        lambda s: "0x" + s
    ),  # >= 16**16
    _digits("01234567", "1234567", 22, 5000).map(
        lambda s: "0" + s
    ),  # YAML 1.1 octal, >= 8**21 = 2**63
    _digits("01", "1", 64, 5000).map(lambda s: "0b" + s),  # >= 2**63
    _digits("0123456789", "123456789", 20, 400).map(
        lambda s: "_".join(s[i : i + 3] for i in range(0, len(s), 3))
    ),
)
"""Integer literals YAML reads as integers outside int64, in every base PyYAML knows (decimal past
Python's 4,300-digit limit included), built as text: no Python int of 6,000 digits is formatted."""

option_like_arguments = st.one_of(
    st.sampled_from(
        [
            "--output=VICTIM",
            "--remote=/nonexistent",
            "--exec=touch VICTIM",
            "-oVICTIM",
            "--end-of-options",
            "--",
            "-",
            "--format=zip",
            "--prefix=../",
            "-h",
            "--help",
            "--version",
            "-v",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00:"), max_size=30).map(
        lambda s: "-" + s
    ),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00:"), max_size=30).map(
        lambda s: "--" + s
    ),
)
"""``--from``/``--to`` revisions that look like options of git (``VICTIM``: a file the test owns)."""
