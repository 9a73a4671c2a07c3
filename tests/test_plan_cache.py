"""The per-user cache behind a fast ``gpucluster plan`` (gpucluster.diskcache): content-keyed,
checked on every read, ignored when missing, corrupt or unwritable; output never depends on it.

* the shipped catalog's schema check is skipped only when a marker keyed by exactly its bytes says
  it passed (a changed, stale or corrupt marker means the files are validated again, and an
  invalid file is refused with the same error line);
* third-party catalog folders are validated on every load;
* the shipped manifest templates' renderings are cached by template text and context (errors,
  context-changing renderings and non-plain data never are; third-party templates never are);
* a warm default plan imports neither jsonschema, jinja2 nor PyYAML (its
  inputs' parses come from the cache), nor what only an error needs (difflib, traceback); no plan
  imports a CDK (subprocess, sys.modules).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gpucluster import cli, diskcache
from gpucluster.charts import manifests
from gpucluster.errors import GpuclusterError
from gpucluster.recipes import catalog as catalog_mod

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    return folder


def _env(cache_dir: Path | str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLUSTER_")}
    env[diskcache.CACHE_DIR_ENV] = str(cache_dir)
    return env


PLAN_AND_MODULES = (
    "import io, sys; from gpucluster import cli; out = io.StringIO(); rc = cli.main(['plan'], stdout=out, stderr=io.StringIO()); "
    "print(rc, *[m in sys.modules for m in ('jsonschema', 'importlib.metadata', 'jinja2', 'yaml')]); "
    "print(*sorted(m for m in sys.modules if m.partition('.')[0] in sys.argv[1:])); print(out.getvalue(), end='')"
)
NEVER_IMPORTED = (
    "difflib",
    "traceback",
    "cdktf",
    "cdktn",
    "constructs",
    "jsii",
    "gpucluster_cdk",
    "helm_python",
    "kubernetes_validate",
    "gpucluster.recipes.recipe_result",
    "gpucluster.recipes.recipe_result_writer",
    "gpucluster.lint.render",
    "gpucluster.lint.lint",
)
"""Modules no plan without an error imports (difflib and traceback only word errors; the CDK,
Helm's engine and the lint and RecipeResult modules are for other commands)."""


def _plan_subprocess(cache_dir, cwd) -> tuple[str, str]:
    """(first line ``rc jsonschema-imported importlib.metadata-imported jinja2-imported yaml-imported``,
    plan output) of a fresh process; asserts that it imported none of :data:`NEVER_IMPORTED`."""
    res = subprocess.run(
        [sys.executable, "-c", PLAN_AND_MODULES, *{m.partition(".")[0] for m in NEVER_IMPORTED}],
        env=_env(cache_dir),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    first, _, rest = res.stdout.partition("\n")
    imported, _, rest = rest.partition("\n")
    unwanted = [
        m for m in imported.split() if m in NEVER_IMPORTED or m.partition(".")[0] in NEVER_IMPORTED
    ]
    assert not unwanted, f"a plan imported {unwanted}"
    return first, rest


# --------------------------------------------------------------------------- the cache itself


def _documented_kinds() -> set[str]:
    """The cache kinds gpucluster/diskcache.py's docstring lists (``* ``kind``: ...`` items)."""
    import re

    return set(re.findall(r"^\* ``([a-z-]+)``", diskcache.__doc__ or "", re.M)) | set(
        re.findall(r"^\* ``[a-z-]+`` and ``([a-z-]+)``", diskcache.__doc__ or "", re.M)
    )


def test_import_touches_no_cache(tmp_path):
    """Importing the library (its root, the pipeline, the CLI and the SDK) neither reads nor writes
    the per-user cache: a fresh empty cache folder is still empty after the process exits. A plan
    then writes only the kinds gpucluster/diskcache.py documents."""
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    for code in (
        "import gpucluster",
        "import gpucluster.pipeline, gpucluster.cli, gpucluster.sdk",
    ):
        res = subprocess.run(
            [sys.executable, "-c", code],
            env=_env(folder),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stderr
        assert sorted(folder.iterdir()) == [], code
    first, _ = _plan_subprocess(folder, tmp_path)
    assert first.split()[0] == "0"
    written = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    assert written and written <= _documented_kinds(), written - _documented_kinds()


def test_entries_round_trip_and_a_corrupt_or_foreign_entry_is_a_miss(cache):
    key = diskcache.digest(["a", b"b"])
    assert diskcache.get("k", key) is None
    assert diskcache.put("k", key, b"payload")
    assert diskcache.get("k", key) == b"payload"
    path = cache / "k" / key
    data = path.read_bytes()
    path.write_bytes(data[:-1] + b"X")  # payload no longer matches its sha256
    assert diskcache.get("k", key) is None
    path.write_bytes(data[:10])  # truncated
    assert diskcache.get("k", key) is None
    other = diskcache.digest(["other"])
    (cache / "k" / other).write_bytes(data)  # a whole entry, but written for another key
    assert diskcache.get("k", other) is None
    assert diskcache.digest(["ab", "c"]) != diskcache.digest(["a", "bc"])


def test_an_unusable_cache_folder_is_ignored(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(blocker))
    assert diskcache.put("k", "0" * 64, b"x") is False
    assert diskcache.get("k", "0" * 64) is None
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, "off")
    assert diskcache.cache_dir() is None and diskcache.put("k", "0" * 64, b"x") is False
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(ro))
        assert diskcache.put("k", "0" * 64, b"x") is False
        ro.chmod(0o700)


def test_the_default_folder_follows_xdg_cache_home(tmp_path):
    assert diskcache.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "gpucluster"
    assert diskcache.cache_dir({diskcache.CACHE_DIR_ENV: str(tmp_path / "x")}) == tmp_path / "x"


# --------------------------------------------------------------------------- catalog schema markers


@pytest.fixture
def core_copy(tmp_path, monkeypatch):
    """A copy of the core catalog standing in for the shipped one (CORE_CATALOG_DIR patched)."""
    copy_dir = tmp_path / "core"
    shutil.copytree(catalog_mod.CORE_CATALOG_DIR, copy_dir)
    monkeypatch.setattr(catalog_mod, "CORE_CATALOG_DIR", copy_dir)
    catalog_mod._load_catalog.cache_clear()
    yield copy_dir
    catalog_mod._load_catalog.cache_clear()


def _load_and_index(d: Path):
    from gpucluster.recipes import overlays

    catalog_mod._load_catalog.cache_clear()
    cat = catalog_mod.load_catalog((d,))
    overlays.overlay_index(cat)
    return cat


def _markers(cache: Path) -> list[Path]:
    return sorted((cache / catalog_mod.VALID_MARKER_KIND).glob("*"))


def test_a_marker_vouches_only_for_the_bytes_it_was_written_for(cache, core_copy, monkeypatch):
    cold = _load_and_index(core_copy)
    assert cold.schema_vouched == frozenset() and len(_markers(cache)) == 1
    warm = _load_and_index(core_copy)
    assert core_copy / "registry.yaml" in warm.schema_vouched
    assert core_copy / "overlays" / "base.yaml" in warm.schema_vouched
    assert (
        warm.components == cold.components
        and warm.overlays == cold.overlays
        and warm.mixins == cold.mixins
    )
    # an overlay changed into one its schema refuses: no marker matches, the error line is today's
    overlay = core_copy / "overlays" / "base.yaml"
    doc = overlay.read_text()
    overlay.write_text(doc.replace("kind: RecipeOverlay", "kind: RecipeOverlay\nunexpected: 1", 1))
    with pytest.raises(GpuclusterError) as warm_err:
        _load_and_index(core_copy)
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, "off")
    with pytest.raises(GpuclusterError) as uncached_err:
        _load_and_index(core_copy)
    assert warm_err.value.render() == uncached_err.value.render()
    assert "invalid overlay" in warm_err.value.render() and "unexpected" in warm_err.value.render()


def test_an_invalid_registry_is_refused_with_a_warm_cache(cache, core_copy):
    _load_and_index(core_copy)
    _load_and_index(core_copy)
    reg = core_copy / "registry.yaml"
    reg.write_text(reg.read_text().replace("components:", "bogus: 1\ncomponents:", 1))
    with pytest.raises(GpuclusterError) as err:
        _load_and_index(core_copy)
    assert "invalid registry" in err.value.render()


def test_a_corrupt_or_stale_marker_is_ignored_and_the_catalog_validated_again(
    cache, core_copy, monkeypatch
):
    _load_and_index(core_copy)
    (marker,) = _markers(cache)
    marker.write_bytes(marker.read_bytes().replace(b"valid", b"vilad"))
    calls = []
    original = catalog_mod.validate_registry
    monkeypatch.setattr(
        catalog_mod,
        "validate_registry",
        lambda data, file: (calls.append(file), original(data, file)),
    )
    again = _load_and_index(core_copy)
    assert again.schema_vouched == frozenset() and calls == [str(core_copy / "registry.yaml")]
    assert (
        diskcache.get(catalog_mod.VALID_MARKER_KIND, marker.name) == b"valid\n"
    )  # rewritten whole
    # another gpucluster version (or schema source, or jsonschema) is another key: validated again
    monkeypatch.setattr("gpucluster.__version__", "0.0.0-other")
    calls.clear()
    assert _load_and_index(core_copy).schema_vouched == frozenset() and len(calls) == 1


def test_a_third_party_catalog_folder_is_validated_on_every_load(cache, tmp_path, monkeypatch):
    extra = tmp_path / "third-party"
    (extra / "overlays").mkdir(parents=True)
    (extra / "overlays" / "x.yaml").write_text(
        "kind: RecipeOverlay\napiVersion: gpucluster/v1alpha1\nmetadata: {name: x}\nspec: {base: base, criteria: {service: aks}}\n"
    )
    dirs = (catalog_mod.CORE_CATALOG_DIR, extra)
    for _ in range(2):
        catalog_mod._load_catalog.cache_clear()
        cat = catalog_mod.load_catalog(dirs)
        assert not any(p.is_relative_to(extra) for p in cat.schema_vouched)
        assert cat.schema_checked_already(extra / "overlays" / "x.yaml") is False
    catalog_mod._load_catalog.cache_clear()


def test_the_shipped_plugin_packages_are_the_entry_points_gpucluster_declares():
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.entry-points.gpucluster]", 1)[1].split("\n[", 1)[0]
    modules = sorted(
        line.split("=", 1)[1].strip().strip('"')
        for line in section.strip().splitlines()
        if "=" in line
    )
    assert modules == sorted(catalog_mod.SHIPPED_PLUGIN_PACKAGES)


# --------------------------------------------------------------------------- entry points


def test_a_warm_default_plan_imports_neither_jsonschema_jinja2_nor_yaml(
    tmp_path,
):
    cache_dir = tmp_path / "cache"
    cold, cold_out = _plan_subprocess(cache_dir, tmp_path)
    assert (
        cold == "0 True True True True"
    )  # nothing cached: validated, distributions scanned, templates rendered, parsed
    warm, warm_out = _plan_subprocess(cache_dir, tmp_path)
    assert warm == "0 False True False False"  # pluggy reads the distributions every time
    off, off_out = _plan_subprocess("off", tmp_path)
    assert off == "0 True True True True"
    assert warm_out == cold_out == off_out and "cert-manager" in warm_out
    # every marker corrupted: validated again (jsonschema imported), output unchanged
    for path in (cache_dir / catalog_mod.VALID_MARKER_KIND).glob("*"):
        path.write_bytes(b"garbage")
    # every rendering corrupted: rendered again (jinja2 imported), output unchanged
    for path in (cache_dir / manifests.RENDER_CACHE_KIND).glob("*"):
        path.write_bytes(path.read_bytes()[:-1])
    again, again_out = _plan_subprocess(cache_dir, tmp_path)
    assert again == "0 True True True True" and again_out == cold_out


def test_a_cli_plan_is_the_same_with_an_unwritable_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "blocked"
    blocker.write_text("")
    outs = []
    for value in (str(blocker), "off"):
        monkeypatch.setenv(diskcache.CACHE_DIR_ENV, value)
        out = io.StringIO()
        assert cli.main(["plan", "--format", "json"], stdout=out, stderr=io.StringIO()) == 0
        outs.append(json.loads(out.getvalue()))
    assert outs[0] == outs[1]


# --------------------------------------------------------------------------- shipped template renderings


WHERE = {"source": "components/x/manifests/cm.yaml.j2", "cluster": "lab", "component": "x"}
CM = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}\ndata:\n  k: '{{ values.k }}'\n"
)


def _renderings(cache: Path) -> list[Path]:
    return sorted((cache / manifests.RENDER_CACHE_KIND).glob("*"))


def test_a_cached_rendering_is_the_rendered_objects_and_a_corrupt_one_is_rendered_again(
    cache, monkeypatch
):
    context = {"name": "cm", "values": {"k": "v", "n": [1, 2.5, None, True]}}
    rendered = manifests.render_template(CM, context, **WHERE)
    assert (
        manifests.render_shipped_template(CM, context, **WHERE) == rendered
    )  # cold: rendered, kept
    (entry,) = _renderings(cache)
    calls = []
    monkeypatch.setattr(manifests, "render_template", lambda *a, **k: calls.append(1) or rendered)
    warm = manifests.render_shipped_template(CM, context, **WHERE)
    assert warm == rendered and calls == []
    assert warm is not manifests.render_shipped_template(
        CM, context, **WHERE
    )  # every caller its own copy
    other = manifests.render_shipped_template(
        CM, {**context, "name": "other"}, **WHERE
    )  # another context: rendered
    assert calls == [1] and other == rendered
    entry.write_bytes(entry.read_bytes()[:-2] + b"xx")
    assert manifests.render_shipped_template(CM, context, **WHERE) == rendered and calls == [1, 1]


def test_a_rendering_entry_with_a_good_checksum_but_not_plain_objects_is_rendered_again(cache):
    import hashlib
    import marshal

    context = {"name": "cm", "values": {"k": "v"}}
    rendered = manifests.render_shipped_template(CM, context, **WHERE)
    (entry,) = _renderings(cache)
    data = entry.read_bytes()
    header = data[: data.index(b"\n", data.index(b"\n") + 1) + 1]
    odd = [{**rendered[0], "data": {"k": ("v",)}}]  # a tuple no rendering gives
    payload = marshal.dumps(odd)
    entry.write_bytes(header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    assert diskcache.get(manifests.RENDER_CACHE_KIND, entry.name) == payload
    assert manifests.render_shipped_template(CM, context, **WHERE) == rendered


def test_template_errors_are_never_cached(cache):
    bad = CM.replace("{{ values.k }}", "{{ values.missing }}")
    for _ in range(2):
        with pytest.raises(GpuclusterError) as err:
            manifests.render_shipped_template(bad, {"name": "cm", "values": {}}, **WHERE)
        assert "undefined value" in err.value.render()
    with pytest.raises(GpuclusterError) as plain:
        manifests.render_template(bad, {"name": "cm", "values": {}}, **WHERE)
    assert plain.value.render() == err.value.render() and _renderings(cache) == []


def test_a_rendering_that_changes_its_context_or_has_no_plain_key_is_not_cached(cache):
    mutating = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ name }}{{ values.pop('k') and '' }}\n"
    context = {"name": "cm", "values": {"k": "v"}}
    manifests.render_shipped_template(mutating, context, **WHERE)
    assert context == {"name": "cm", "values": {}} and _renderings(cache) == []

    class Name(str):
        pass

    manifests.render_shipped_template(CM, {"name": Name("cm"), "values": {"k": "v"}}, **WHERE)
    assert _renderings(cache) == []
    shared = {"a": 1}  # an object twice in the objects: not plain (YAML would write an alias)
    docs = manifests.render_shipped_template(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: &d {k: v}\nbinaryData: *d\n",
        {},
        **WHERE,
    )
    assert docs[0]["data"] is docs[0]["binaryData"] and _renderings(cache) == [] and shared


def test_only_templates_of_the_shipped_catalog_are_cached(tmp_path):
    third = tmp_path / "third-party"
    (third / "components" / "x" / "manifests").mkdir(parents=True)
    (third / "components" / "x" / "manifests" / "cm.yaml.j2").write_text(CM)
    cat = catalog_mod.Catalog(
        dirs=[catalog_mod.CORE_CATALOG_DIR, third], components={}, overlays={}, mixins={}
    )
    assert manifests._shipped(cat, "components/x/manifests/cm.yaml.j2") is False
    shipped = next(catalog_mod.CORE_CATALOG_DIR.glob("components/*/manifests/*.j2")).relative_to(
        catalog_mod.CORE_CATALOG_DIR
    )
    assert manifests._shipped(cat, shipped.as_posix()) is True


# --------------------------------------------------------------------------- parsed catalog files


def test_every_catalog_file_parses_alike_from_the_cache_and_a_corrupt_entry_is_parsed_again(cache):
    files = [p for d in catalog_mod.catalog_dirs() for p in sorted(d.rglob("*.yaml"))]
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        reference = catalog_mod._parse_yaml_text(text, path)
        cold = catalog_mod._parse_yaml(text, path)
        warm = catalog_mod._parse_yaml(text, path)
        assert repr(cold) == repr(warm) == repr(reference), path
        assert warm is not cold or warm is None or isinstance(warm, (str, int, float, bool))
    entries = sorted((cache / catalog_mod.PARSE_CACHE_KIND).glob("*"))
    assert entries
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:-1])
    path = files[0]
    assert repr(catalog_mod._parse_yaml(path.read_text(), path)) == repr(
        catalog_mod._parse_yaml_text(path.read_text(), path)
    )


def test_a_parse_entry_with_a_good_checksum_but_not_plain_data_is_a_miss(cache):
    """An entry whose checksum matches but whose marshal holds what no YAML parse gives (tuple,
    frozenset, bytes) is parsed again, not handed to the catalog (it raised AttributeError)."""
    import hashlib
    import marshal

    path = catalog_mod.CORE_CATALOG_DIR / "registry.yaml"
    text = path.read_text(encoding="utf-8")
    reference = catalog_mod._parse_yaml(text, path)
    (entry,) = (cache / catalog_mod.PARSE_CACHE_KIND).glob("*")
    data = entry.read_bytes()
    header = data[: data.index(b"\n", data.index(b"\n") + 1) + 1]
    for odd in [({"a": (1, 2)},), {"components": frozenset([1])}, b"registry", {"a": {1j: 1}}]:
        payload = marshal.dumps(odd)
        entry.write_bytes(header + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        assert diskcache.get(catalog_mod.PARSE_CACHE_KIND, entry.name) == payload
        assert repr(catalog_mod._parse_yaml(text, path)) == repr(reference)


def test_a_user_file_parses_alike_from_the_cache_and_its_errors_are_never_cached(
    cache, tmp_path, monkeypatch
):
    """yamlsafe keeps what a strict parse gave (a warm plan reads the cluster file's data without
    PyYAML); a corrupt entry is parsed again; a refused text raises the same line every time."""
    from gpucluster import yamlsafe

    text = "clusters:\n  - name: a\n    n: 1\n    f: 2.5\n    enabled: true\n    none: null\n    list: [x, 'y']\n"
    reference = yamlsafe._parse_text(text, file="f.yaml", cluster=None)
    assert yamlsafe.load_yaml_text(text, file="f.yaml") == reference
    (entry,) = (cache / yamlsafe.PARSE_CACHE_KIND).glob("*")
    with monkeypatch.context() as m:
        m.setattr(yamlsafe, "_parse_text", lambda *a, **k: pytest.fail("parsed again"))
        assert yamlsafe.load_yaml_text(text, file="g.yaml") == reference
    entry.write_bytes(entry.read_bytes()[:-1])
    assert yamlsafe.load_yaml_text(text, file="f.yaml") == reference
    for bad in ("a: 1\na: 2\n", "a: &x 1\nb: *x\n", "a: .nan\n", "{1: x}\n", "a: [\n"):
        lines = set()
        for _ in range(2):
            with pytest.raises(GpuclusterError) as err:
                yamlsafe.load_yaml_text(bad, file="bad.yaml")
            lines.add(err.value.render())
        assert len(lines) == 1 and "file=bad.yaml" in lines.pop()
    assert len(list((cache / yamlsafe.PARSE_CACHE_KIND).glob("*"))) == 1


def test_chart_texts_parse_alike_from_the_cache(cache):
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "a"},
            "data": {"k": "0.10", "n": "{{ x }}"},
        },
        {
            "apiVersion": "example.com/v1",
            "kind": "X",
            "metadata": {"name": "b"},
            "spec": {"n": [1, 2.5, None, True]},
        },
    ]
    text = manifests.dump_documents(docs)
    manifests._PARSED.clear()
    cold = manifests.chart_documents(text)
    manifests._PARSED.clear()
    warm = manifests.chart_documents(text)
    assert list(cold) == list(warm) == docs and warm is not cold
    assert len(list((cache / manifests.PARSE_CACHE_KIND).glob("*"))) == 1


def test_yaml_errors_and_non_plain_results_are_not_cached(cache, tmp_path):
    bad = tmp_path / "bad.yaml"
    for _ in range(2):
        with pytest.raises(GpuclusterError) as err:
            catalog_mod._parse_yaml("a: [\n", bad)
        assert "invalid YAML" in err.value.render()
    assert catalog_mod._parse_yaml("when: 2024-01-01\n", bad) == catalog_mod._parse_yaml_text(
        "when: 2024-01-01\n", bad
    )
    shared = catalog_mod._parse_yaml("a: &x {k: v}\nb: *x\n", bad)
    assert shared["a"] is shared["b"]
    assert (
        not (cache / catalog_mod.PARSE_CACHE_KIND).exists()
        or list((cache / catalog_mod.PARSE_CACHE_KIND).glob("*")) == []
    )
    assert diskcache.is_plain({"a": [1, 2.0, None, True, "s"], 1: {}}) and not diskcache.is_plain(
        {"a": (1,)}
    )


# --------------------------------------------------------------------------- dumped documents


def test_a_cached_dump_is_the_dump_and_a_corrupt_one_is_dumped_again(cache):
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm"},
            "data": {"script": "set -e\necho {{x}}\n", "n": "1.0"},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "labels": {"a": "é"}},
            "stringData": {"k": "yes"},
        },
    ]
    expected = [yaml_dump(d) for d in docs]
    for _ in range(2):  # cold (dumped, kept), then warm (read)
        manifests._DUMPED.clear()
        assert [manifests._dump_one(d, manifests._DOCUMENT_OPTIONS)[0] for d in docs] == expected
    entries = sorted((cache / manifests.DUMP_CACHE_KIND).glob("*"))
    assert len(entries) == 2
    for entry in entries:
        entry.write_bytes(
            entry.read_bytes().replace(b"ConfigMap", b"ConfigMaq").replace(b"Secret", b"Secreu")
        )
    manifests._DUMPED.clear()
    assert [manifests._dump_one(d, manifests._DOCUMENT_OPTIONS)[0] for d in docs] == expected
    manifests._DUMPED.clear()


def yaml_dump(doc):

    return manifests._yaml_dump(doc, manifests._DOCUMENT_OPTIONS)


# --------------------------------------------------------------------------- whose cache is trusted


def _plant(folder: Path, kind: str, key: str, payload: bytes) -> Path:
    """Write a well-formed entry the way another user sharing ``folder`` could."""
    import hashlib

    (folder / kind).mkdir(parents=True, exist_ok=True)
    path = folder / kind / key
    path.write_bytes(
        diskcache._MAGIC
        + key.encode()
        + b"\n"
        + hashlib.sha256(payload).hexdigest().encode()
        + b"\n"
        + payload
    )
    return path


@pytest.fixture(params=["folder", "kind", "entry"])
def planted(request, tmp_path, monkeypatch):
    """A private cache (folder and kind ``k`` mode 0700, entry 0600) holding one well-formed entry,
    which is read as it is; ``.target`` is the part (``.where``: folder, kind or entry) a test
    makes untrustworthy."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    key = diskcache.digest(["planted"])
    entry = _plant(folder, "k", key, b"forged")
    for p in (folder, folder / "k"):
        p.chmod(0o700)
    entry.chmod(0o600)
    assert diskcache.get("k", key) == b"forged"  # the user's own entry is read
    target = {"folder": folder, "kind": folder / "k", "entry": entry}[request.param]
    return SimpleNamespace(where=request.param, folder=folder, key=key, target=target)


def test_a_group_or_world_writable_cache_is_not_trusted(planted):
    folder, key, where = planted.folder, planted.key, planted.where
    planted.target.chmod(0o777 if where != "entry" else 0o666)
    assert diskcache.get("k", key) is None
    if where != "entry":
        assert diskcache.put("k", diskcache.digest(["other"]), b"x") is False
        assert not (folder / "k" / diskcache.digest(["other"])).exists()
    for p in (folder, folder / "k"):
        p.chmod(0o700)
    assert not [p for p in folder.rglob("*.tmp")]


def test_a_cache_owned_by_another_user_is_not_trusted(planted, monkeypatch):
    folder, key, where, owner = planted.folder, planted.key, planted.where, planted.target
    me = os.stat(folder).st_uid
    real_stat, real_fstat = os.stat, os.fstat

    class _Other:  # the os.stat_result of ``owner`` with another uid
        def __init__(self, st):
            self._st = st

        def __getattr__(self, name):
            return (me + 1) if name == "st_uid" else getattr(self._st, name)

    def fake_stat(path, *a, **kw):
        st = real_stat(path, *a, **kw)
        return (
            _Other(st)
            if (st.st_ino, st.st_dev) == (real_stat(owner).st_ino, real_stat(owner).st_dev)
            else st
        )

    def fake_fstat(fd):
        st = real_fstat(fd)
        return (
            _Other(st)
            if (st.st_ino, st.st_dev) == (real_stat(owner).st_ino, real_stat(owner).st_dev)
            else st
        )

    monkeypatch.setattr(diskcache.os, "stat", fake_stat)
    monkeypatch.setattr(diskcache.os, "fstat", fake_fstat)
    assert diskcache.get("k", key) is None
    if where != "entry":
        assert diskcache.put("k", diskcache.digest(["other"]), b"x") is False


def test_a_forged_parse_entry_in_a_shared_folder_does_not_change_the_catalog(tmp_path, monkeypatch):
    """Another user plants, in a world-writable GPUCLUSTER_CACHE_DIR, the parse of a registry with
    another image: it must not be read."""
    import marshal

    folder = tmp_path / "shared"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    path = catalog_mod.CORE_CATALOG_DIR / "registry.yaml"
    text = path.read_text(encoding="utf-8")
    honest = catalog_mod._parse_yaml_text(text, path)
    forged = {"forged": "registry.example/evil:latest"}
    key = diskcache.digest([catalog_mod._parse_identity(), text])
    _plant(folder, catalog_mod.PARSE_CACHE_KIND, key, marshal.dumps(forged, 2))
    assert repr(catalog_mod._parse_yaml(text, path)) == repr(honest)


def test_a_forged_valid_marker_in_a_shared_folder_does_not_skip_validation(
    tmp_path, core_copy, monkeypatch
):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    reg = core_copy / "registry.yaml"
    reg.write_text(reg.read_text().replace("components:", "bogus: 1\ncomponents:", 1))
    files = [
        (p.relative_to(core_copy).as_posix(), p.read_bytes())
        for p in [
            reg,
            *sorted((core_copy / "overlays").glob("*.yaml")),
            *sorted((core_copy / "mixins").glob("*.yaml")),
        ]
    ]
    _plant(folder, catalog_mod.VALID_MARKER_KIND, catalog_mod.schema_marker_key(files), b"valid\n")
    with pytest.raises(GpuclusterError) as err:
        _load_and_index(core_copy)
    assert "invalid registry" in err.value.render()


def test_nothing_is_created_in_a_world_writable_cache_folder(tmp_path, monkeypatch):
    """docs/cli.md: a shared folder others can write is ignored, nothing read or written -- not
    even the kind subfolder (put made ``<folder>/<kind>`` before it checked the folder)."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    assert diskcache.put("k", diskcache.digest(["x"]), b"x") is False
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(
    "module, distribution",
    [
        ("yaml", "pyyaml-"),
        ("jsonschema", "jsonschema-"),
        ("jinja2", "jinja2-"),
        ("referencing", "referencing-"),
    ],
)
def test_an_install_identity_names_the_distribution_and_its_version(module, distribution):
    """A cache key changes on an upgrade: the identity holds the installed distribution's
    ``<name>-<version>.dist-info`` (PyYAML's distribution is not named like its module)."""
    from importlib.metadata import version

    identity = diskcache.module_identity(module)
    dist = {"yaml": "PyYAML"}.get(module, module)
    assert f" {distribution}{version(dist)}.dist-info" in identity.lower(), identity


def test_the_validation_marker_key_holds_the_libraries_jsonschema_checks_with():
    parts = [p for p in catalog_mod._schema_identity() if isinstance(p, str)]
    for name in ("jsonschema", "referencing", "jsonschema_specifications"):
        assert any(p.startswith(f"{name} ") and ".dist-info" in p for p in parts), name


def test_code_identity_follows_the_source_the_tag_and_each_library(tmp_path):
    """One rule for every kind's code identity (diskcache.code_identity): an edit of the module,
    another tag or another library list is another key; an unreadable source caches nothing."""
    source = tmp_path / "maker.py"
    source.write_text("x = 1\n")
    first = diskcache.code_identity("kind 1", source, ["yaml"])
    assert first == diskcache.code_identity("kind 1", source, ["yaml"])
    assert diskcache.code_identity("kind 2", source, ["yaml"]) != first
    assert diskcache.code_identity("kind 1", source, ["yaml", "jinja2"]) != first
    source.write_text("x = 2\n")
    assert diskcache.code_identity("kind 1", source, ["yaml"]) != first
    assert diskcache.code_identity("kind 1", tmp_path / "missing.py") is None
