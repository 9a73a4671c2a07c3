"""The cluster file's ``schedulerProfiles`` (gpucluster.inputs.scheduler_profiles).

* Presets: the two profiles of Microsoft's post, exactly (plugins and args).
* Parsing: a written-out upstream profile is kept as written; each invalid setting is one error
  line naming the key, with the fix (also through ``gpucluster plan``: exit 2, one line);
  other platforms and Kubernetes older than 1.33 are refused.
* The runtime plan: one ``scheduler-profiles`` release with the ``SchedulerConfiguration``
  ``upstream`` (aks.azure.com/v1alpha1) whose ``spec.rawConfig`` parses back to the profiles,
  depending on nothing; ``plan`` lists it; a cluster without profiles has no such release.
* upgrade-check: adding or changing a profile is ``safe``, removing one ``manual``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from scheduler_profile_cases import broken_profiles, valid_profiles

from gpucluster import pipeline
from gpucluster.cli import main
from gpucluster.errors import GpuclusterError
from gpucluster.inputs import scheduler_profiles as sp
from gpucluster.inputs.config import parse_clusters

CRITERIA = {"service": "aks", "accelerator": "h100", "os": "ubuntu", "intent": "training"}

CUSTOM = {
    "schedulerName": "gpu-score",
    "plugins": {
        "multiPoint": {"disabled": [{"name": "PodTopologySpread"}]},
        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
    },
    "pluginConfig": [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "nvidia.com/gpu", "weight": 10}],
                }
            },
        }
    ],
}


def _doc(profiles, **extra) -> dict:
    doc = {"name": "c", "criteria": dict(CRITERIA), **extra}
    if profiles is not None:
        doc["schedulerProfiles"] = profiles
    return doc


def _spec(doc: dict):
    (spec,) = parse_clusters({"clusters": [doc]}, source="gpucluster.yaml", root=Path("."))
    return spec


def _error(doc: dict) -> str:
    with pytest.raises(GpuclusterError) as info:
        _spec(doc)
    (problem,) = info.value.problems
    line = problem.render()
    assert "\n" not in line and "fix:" in line
    return line


def test_presets_are_the_posts_profiles():
    gpu = sp.PRESETS["gpu-binpacking"]
    assert gpu["plugins"]["multiPoint"] == {
        "enabled": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesBalancedAllocation"}],
        "disabled": [{"name": "PodTopologySpread"}],
    }
    fit = gpu["pluginConfig"][0]["args"]["scoringStrategy"]
    assert fit == {
        "type": "MostAllocated",
        "resources": [{"name": "nvidia.com/gpu", "weight": 8}, {"name": "cpu", "weight": 1}],
    }
    assert gpu["pluginConfig"][1]["args"]["resources"] == [
        {"name": "cpu", "weight": 1},
        {"name": "memory", "weight": 1},
    ]
    cpu = sp.PRESETS["cpu-binpacking"]["pluginConfig"][0]["args"]["scoringStrategy"]
    assert cpu["type"] == "RequestedToCapacityRatio"
    assert cpu["resources"] == [{"name": "cpu", "weight": 8}, {"name": "memory", "weight": 1}]
    assert [(p["utilization"], p["score"]) for p in cpu["requestedToCapacityRatio"]["shape"]] == [
        (0, 0),
        (30, 8),
        (50, 10),
        (85, 10),
        (90, 3),
        (100, 0),
    ]


def test_parse_preset_and_custom_profiles():
    spec = _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}, CUSTOM]))
    gpu, custom = spec.scheduler_profiles
    assert gpu.preset == "gpu-binpacking" and gpu.scheduler_name == "gpu-pack"
    assert gpu.profile == {"schedulerName": "gpu-pack", **sp.PRESETS["gpu-binpacking"]}
    assert custom.preset is None
    expected = copy.deepcopy(CUSTOM)
    expected["pluginConfig"][0]["args"] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "NodeResourcesFitArgs",
        **expected["pluginConfig"][0]["args"],
    }
    assert custom.profile == expected
    assert _spec(_doc(None)).scheduler_profiles == ()


BAD = [
    (
        {"schedulerName": "default-scheduler", "preset": "gpu-binpacking"},
        "[0].schedulerName",
        "reserved",
    ),
    ({"schedulerName": "kai-scheduler", "preset": "gpu-binpacking"}, "[0].schedulerName", "KAI"),
    ({"schedulerName": "aks-system", "preset": "gpu-binpacking"}, "[0].schedulerName", "reserved"),
    ({"schedulerName": "Bad_Name", "preset": "gpu-binpacking"}, "[0].schedulerName", "DNS-1123"),
    ({"schedulerName": "a", "preset": "gpu-packing"}, "[0].preset", "unknown preset"),
    ({"schedulerName": "a"}, "[0].preset", "neither"),
    ({"schedulerName": "a", "preset": "gpu-binpacking", "plugins": {}}, "[0].plugins", "not both"),
    ({"schedulerName": "a", "plugins": {"filter": {}}}, "[0].plugins.filter", "unknown key"),
    (
        {
            "schedulerName": "a",
            "plugins": {"multiPoint": {"enabled": [{"name": "NodeResourceFit"}]}},
        },
        "[0].plugins.multiPoint.enabled[0].name",
        "did you mean 'NodeResourcesFit'",
    ),
    (
        {
            "schedulerName": "a",
            "plugins": {"multiPoint": {"disabled": [{"name": "DefaultBinder"}]}},
        },
        "[0].plugins.multiPoint.disabled[0].name",
        "cannot be disabled",
    ),
    (
        {"schedulerName": "a", "plugins": {"multiPoint": {"disabled": [{"name": "*"}]}}},
        "[0].plugins.multiPoint.disabled[0].name",
        "unknown plugin",
    ),
    (
        {"schedulerName": "a", "plugins": {"score": {"enabled": [{"name": "NodePorts"}]}}},
        "[0].plugins.score.enabled[0].name",
        "unknown score plugin",
    ),
    (
        {
            "schedulerName": "a",
            "plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": 101}]}},
        },
        "[0].plugins.score.enabled[0].weight",
        "at most 100",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Packed"}}}
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.type",
        "unknown scoring strategy",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [{"name": "cpu", "weight": 0}],
                        }
                    },
                }
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.resources[0].weight",
        "at least 1",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "RequestedToCapacityRatio",
                            "requestedToCapacityRatio": {
                                "shape": [{"utilization": 50, "score": 11}]
                            },
                        }
                    },
                }
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
        "at most 10",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "RequestedToCapacityRatio",
                            "requestedToCapacityRatio": {
                                "shape": [
                                    {"utilization": 50, "score": 1},
                                    {"utilization": 50, "score": 2},
                                ]
                            },
                        }
                    },
                }
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
        "must increase",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
                }
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio",
        "needs requestedToCapacityRatio.shape",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesBalancedAllocation",
                    "args": {"resources": [{"name": "cpu", "weight": 2}]},
                }
            ],
        },
        "[0].pluginConfig[0].args.resources[0].weight",
        "must be 1",
    ),
    (
        {"schedulerName": "a", "pluginConfig": [{"name": "InterPodAffinity", "args": {}}]},
        "[0].pluginConfig[0].name",
        "checks the args of",
    ),
    (
        {
            "schedulerName": "a",
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {"scoringStrategy": {"type": "MostAllocated", "shape": []}},
                }
            ],
        },
        "[0].pluginConfig[0].args.scoringStrategy.shape",
        "unknown key",
    ),
]


@pytest.mark.parametrize(("profile", "key", "words"), BAD, ids=[b[2] + b[1] for b in BAD])
def test_bad_profile_is_one_line_naming_the_key(profile, key, words):
    line = _error(_doc([profile]))
    assert f"key=clusters[0].schedulerProfiles{key}:" in line
    assert words in line


def test_twice_the_same_name():
    line = _error(
        _doc(
            [
                {"schedulerName": "p", "preset": "gpu-binpacking"},
                {"schedulerName": "p", "preset": "cpu-binpacking"},
            ]
        )
    )
    assert "key=clusters[0].schedulerProfiles[1].schedulerName:" in line and "used twice" in line


def test_other_platforms_and_old_kubernetes_are_refused():
    profiles = [{"schedulerName": "p", "preset": "gpu-binpacking"}]
    line = _error(
        {
            "name": "c",
            "criteria": {"service": "oke", "accelerator": "h100"},
            "schedulerProfiles": profiles,
        }
    )
    assert "AKS-only" in line and "key=clusters[0].schedulerProfiles:" in line
    line = _error(_doc(profiles, kubernetesVersion="1.32"))
    assert "1.33 or later" in line and "cluster has 1.32" in line
    # the fix names AKS's own floor (1.34), so following it does not lead to AKS-K8S-VERSION
    assert 'fix: set kubernetesVersion: "1.34" or later' in line
    assert _spec(_doc(profiles, kubernetesVersion="1.33")).scheduler_profiles


def test_plan_renders_the_scheduler_configuration():
    spec = _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}, CUSTOM]))
    plan = pipeline.build_plan(spec)
    node = plan.node("scheduler-profiles")
    assert node.kind == "manifests" and node.depends_on == []
    assert node.values == {"contentHash": node.local_chart.content_hash}
    (template,) = [t for p, t in node.local_chart.files.items() if p.startswith("templates/")]
    (obj,) = list(yaml.safe_load_all(template))
    assert obj["apiVersion"] == "aks.azure.com/v1alpha1" and obj["kind"] == "SchedulerConfiguration"
    assert obj["metadata"] == {"name": "upstream"}
    raw = yaml.safe_load(obj["spec"]["rawConfig"])
    assert raw == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [p.profile for p in spec.scheduler_profiles],
    }
    assert "{{" not in template
    # the validation gate, when there is one, runs after it like after every release
    assert all("scheduler-profiles" not in n.depends_on or n.kind == "gate" for n in plan.nodes)
    without = pipeline.build_plan(_spec(_doc(None)))
    assert "scheduler-profiles" not in {n.id for n in without.nodes}
    assert [n.id for n in plan.nodes if n.id != "scheduler-profiles"] == [
        n.id for n in without.nodes
    ]


def test_cli_plan_shows_it_and_refuses_bad_input(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "gpucluster.yaml"
    good.write_text(
        yaml.safe_dump(
            {"clusters": [_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}])]}
        )
    )
    assert main(["plan", "--config", str(good)]) == 0
    assert "scheduler-profiles" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    _doc([{"schedulerName": "default-scheduler", "preset": "gpu-binpacking"}])
                ]
            }
        )
    )
    assert main(["plan", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error[input]") and "schedulerName" in err[0]


def test_upgrade_verdicts():
    a = _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}]))
    b = _spec(_doc([{"schedulerName": "gpu-pack", "preset": "cpu-binpacking"}, {**CUSTOM}]))
    c = _spec(_doc(None))
    assert sp.profile_changes(a, a) == []
    changed = sp.profile_changes(a, b)
    assert [(d, v) for d, v, _, _ in changed] == [
        ("schedulerProfiles gpu-pack changed", "safe"),
        ("schedulerProfiles gpu-score added", "safe"),
    ]
    assert "running pods are not moved" in changed[0][2]
    ((detail, verdict, why, action),) = sp.profile_changes(a, c)
    assert verdict == "manual" and "Pending" in why and action


def test_upgrade_check_judges_a_profile_change():
    from gpucluster.lint.upgrade_check import compare_plans

    a = pipeline.build_plan(
        _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}]))
    )
    b = pipeline.build_plan(
        _spec(_doc([{"schedulerName": "gpu-pack", "preset": "cpu-binpacking"}]))
    )
    c = pipeline.build_plan(_spec(_doc(None)))
    assert compare_plans(a, a, []).changes == []
    (change,) = compare_plans(a, b, []).changes
    assert change.component == "cluster" and change.verdict == "safe"
    assert change.details == ["schedulerProfiles gpu-pack changed"]
    assert change.reasons[0].rule == "scheduler-profile-change"
    (change,) = compare_plans(a, c, []).changes
    assert change.verdict == "manual" and change.details == ["schedulerProfiles gpu-pack removed"]


def test_validate_checks_the_live_scheduler_configuration():
    from gpucluster.live.checks import derive_checks, read_plan, run_checks
    from gpucluster.live.snapshot import Snapshot

    plan = pipeline.build_plan(
        _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}]))
    )
    read_plan(plan)  # what a snapshot must read: no KeyError for the release of no component
    (check,) = [c for c in derive_checks(plan) if c.component == "scheduler-profiles"]
    assert check.name == "manifest-object"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "schedulerconfigurations.aks.azure.com"},
        "spec": {
            "group": "aks.azure.com",
            "scope": "Cluster",
            "names": {"kind": "SchedulerConfiguration"},
            "versions": [{"name": "v1alpha1", "served": True}],
        },
    }
    (template,) = [
        t
        for p, t in plan.node("scheduler-profiles").local_chart.files.items()
        if p.startswith("templates/")
    ]
    live = yaml.safe_load(template)

    def result(items):
        ((_, res),) = run_checks([check], Snapshot(items=items))
        return res

    assert result([crd, live]).verdict == "pass"
    edited = copy.deepcopy(live)
    edited["spec"]["rawConfig"] = live["spec"]["rawConfig"].replace("weight: 8", "weight: 2")
    assert result([crd, edited]).verdict == "fail" and "differs" in result([crd, edited]).reason
    assert result([crd]).verdict == "fail"
    assert "does not serve" in result([]).reason


@settings(max_examples=150, deadline=None, derandomize=True)
@given(valid_profiles())
def test_generated_profiles_are_accepted(profiles):
    """The sample the real-scheduler differential feeds (tests/scheduler_profile_cases.py) is accepted."""
    spec = _spec(_doc(profiles))
    assert [p.scheduler_name for p in spec.scheduler_profiles] == [
        p["schedulerName"] for p in profiles
    ]
    raw = yaml.safe_load(sp.raw_config(spec.scheduler_profiles))
    assert [p["schedulerName"] for p in raw["profiles"]] == [p["schedulerName"] for p in profiles]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(broken_profiles())
def test_generated_broken_profiles_are_refused_in_one_line(broken):
    profiles, what, _ = broken
    line = _error(_doc(profiles))
    assert "key=clusters[0].schedulerProfiles" in line, what


def test_raw_config_quotes_names_yaml_11_reads_as_other_types():
    names = ["n", "y", "on", "no", "1", "0x1f", "1e3"]
    spec = _spec(_doc([{"schedulerName": n, "preset": "gpu-binpacking"} for n in names]))
    text = sp.raw_config(spec.scheduler_profiles)
    for n in names:
        assert f"- schedulerName: '{n}'\n" in text
    assert [p["schedulerName"] for p in yaml.safe_load(text)["profiles"]] == names


KUBEFLOW = {**CRITERIA, "platform": "kubeflow"}


def _runtime(plan) -> dict:
    chart = plan.node("kubeflow-trainer-manifests").local_chart
    (text,) = [t for p, t in chart.files.items() if "torch-distributed" in p]
    return yaml.safe_load(text)


def _pod_spec(runtime: dict) -> dict:
    (job,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    return job["template"]["spec"]["template"]["spec"]


def test_training_runtime_names_the_profile_and_installs_after_it():
    profiles = [
        {"schedulerName": "cpu-pack", "preset": "cpu-binpacking"},
        {"schedulerName": "gpu-pack", "preset": "gpu-binpacking", "trainingRuntime": True},
    ]
    plan = pipeline.build_plan(_spec({**_doc(profiles), "criteria": dict(KUBEFLOW)}))
    assert _pod_spec(_runtime(plan))["schedulerName"] == "gpu-pack"
    import kubernetes_validate  # the pod template is a core PodSpec: strict Kubernetes 1.34 schema

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "x"},
        "spec": _pod_spec(_runtime(plan)),
    }
    kubernetes_validate.validate(pod, "1.34.0", strict=True)
    assert "scheduler-profiles" in plan.node("kubeflow-trainer-manifests").depends_on
    # without trainingRuntime the runtime names no scheduler and waits for nothing new
    plain = pipeline.build_plan(_spec({**_doc(profiles[:1]), "criteria": dict(KUBEFLOW)}))
    assert "schedulerName" not in _pod_spec(_runtime(plain))
    assert "scheduler-profiles" not in plain.node("kubeflow-trainer-manifests").depends_on


def test_training_runtime_errors():
    twice = [
        {"schedulerName": "a", "preset": "gpu-binpacking", "trainingRuntime": True},
        {"schedulerName": "b", "preset": "cpu-binpacking", "trainingRuntime": True},
    ]
    line = _error({**_doc(twice), "criteria": dict(KUBEFLOW)})
    assert (
        "key=clusters[0].schedulerProfiles[1].trainingRuntime:" in line and "two profiles" in line
    )
    line = _error(
        _doc([{"schedulerName": "a", "preset": "gpu-binpacking", "trainingRuntime": "yes"}])
    )
    assert "key=clusters[0].schedulerProfiles[0].trainingRuntime:" in line
    spec = _spec(
        _doc([{"schedulerName": "a", "preset": "gpu-binpacking", "trainingRuntime": True}])
    )
    with pytest.raises(GpuclusterError) as info:  # no Kubeflow recipe
        pipeline.build_plan(spec)
    (problem,) = info.value.problems
    line = problem.render()
    assert (
        "key=schedulerProfiles[0].trainingRuntime" in line
        or "schedulerProfiles[0].trainingRuntime" in line
    )
    assert "no Kubeflow training runtime" in line and "\n" not in line


def test_upgrade_verdict_of_a_training_runtime_flip():
    on = _spec(
        _doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking", "trainingRuntime": True}])
    )
    off = _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}]))
    ((detail, verdict, why, _),) = sp.profile_changes(off, on)
    assert (
        detail == "schedulerProfiles gpu-pack trainingRuntime false -> true" and verdict == "safe"
    )
    assert "running ones stay" in why
    ((detail, _, why, _),) = sp.profile_changes(on, off)
    assert detail.endswith("true -> false") and "default-scheduler" in why


def test_synthesized_runtime_stack_installs_the_scheduler_configuration(tmp_path):
    import json

    from gpucluster_cdk import stacks

    plan = pipeline.build_plan(
        _spec(_doc([{"schedulerName": "gpu-pack", "preset": "gpu-binpacking"}]))
    )
    out = tmp_path / "cdktf.out"
    stacks.synth([plan], out)
    folder = out / "stacks" / "c-runtime"
    runtime = json.loads((folder / "cdk.tf.json").read_text())
    release = runtime["resource"]["helm_release"]["scheduler-profiles"]
    assert "depends_on" not in release and release["namespace"] == "kube-system"
    (template,) = folder.glob(
        "assets/scheduler-profiles_chart_*/*/templates/000-scheduler-configuration.yaml"
    )
    obj = yaml.safe_load(template.read_text())
    assert obj["kind"] == "SchedulerConfiguration" and obj["metadata"]["name"] == "upstream"
    assert yaml.safe_load(obj["spec"]["rawConfig"])["profiles"] == [
        plan.cluster.scheduler_profiles[0].profile
    ]
