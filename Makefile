# gpucluster: set-up, synthesis, tests, benchmark.
#
#   make synth   .venv (python3.11, else 3.12 or 3.13) + pip install -e '.[cdk,render,test]' + pinned cdktf-cli (npm ci),
#                then `cdktf synth` of the cluster file (GPUCLUSTER_CONFIG, ./gpucluster.yaml or
#                the embedded default, without the notice) into cdktf.out/ (replaced atomically).
#   make lint    ruff check, ruff format --check and mypy, configured in pyproject.toml, and
#                cog --check of the docs' generated text (part of `make test`, first: a finding
#                fails it).
#   make docs    rewrite the docs' text generated from the code (cog blocks, tools/docs_cog.py).
#   make test    set-up, then pytest in parallel worker processes (pytest-xdist, PYTEST_WORKERS; includes
#                the end-to-end `cdktf synth` test, marker synth), with test-cdktn alongside.
#   make bench   wall time, CPU time and peak RSS of plan, binding import and synth for 1, 10 and
#                50 clusters, under cdktf and CDK Terrain (cdktn), with the floor (`import cdktf`).
#                Then the rig's rows: the default rehearsal's makespan, and AICR's deploy.sh against
#                our stack from the same RecipeResult (makespans, ratio, readiness; docs/rehearse.md).
#   make cdktn   .venv-cdktn: the same project with CDK Terrain instead of cdktf ('.[cdktn,test]').
#   make test-cdktn  the synthesis tests under CDK Terrain (part of `make test`).
#   make checkov-setup   checkov in its own venv .venv-checkov (it needs packaging<24), pinned by
#                tools/checkov-requirements.txt; `make test` uses it (tests/test_checkov_aks.py).
#                First install ~6.5 min on a shared 2-core machine, then cached by its stamp file.
#   make mutation  mutmut 3 (tools/mutation-requirements.txt, into .venv) on the modules that make the
#                gate, policy and upgrade decisions, plus hand mutants of their module-level code:
#                a score per module and the surviving mutants (tools/mutation.py; MUTATION_SAMPLE
#                mutants per module, 0 for all; not part of `make test`).
#   make fuzz    the long, seeded Hypothesis profile of the cluster-file fuzz suite (5,500
#                in-process cases with FUZZ_EXAMPLES=2000, and more real main.py runs); `make test`
#                runs the fast profile.
#
# Targets are keyed on stamp files, so repeated runs only redo what changed.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := synth

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CHECKPOINT_DISABLE := 1

# The cdktf CLI runs `terraform version`, which logs a scary "Unable to open CLI configuration
# file" when the configured file is missing; use an empty one in that case only.
TF_CLI_CONFIG_CANDIDATE := $(or $(TF_CLI_CONFIG_FILE),$(HOME)/.terraformrc)
ifeq ($(wildcard $(TF_CLI_CONFIG_CANDIDATE)),)
export TF_CLI_CONFIG_FILE := /dev/null
endif

# The Python that creates .venv: the first of PYTHON_CANDIDATES that is a supported CPython
# (pyproject.toml requires-python: 3.11, 3.12 or 3.13), preferring 3.11, the oldest (the version
# ruff and mypy target); evaluated only when .venv is created. Override with
# PYTHON_BOOTSTRAP=/path/to/python3.
PYTHON_CANDIDATES := python3.11 python3.12 python3.13 python3
PYTHON_BOOTSTRAP ?= $(firstword $(foreach p,$(PYTHON_CANDIDATES),$(shell command -v $(p) >/dev/null 2>&1 && $(p) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' >/dev/null 2>&1 && echo $(p))))
VENV := .venv
PY := $(VENV)/bin/python
CDKTF := node_modules/.bin/cdktf
PY_STAMP := $(VENV)/.gpucluster-installed
VENV_CDKTN := .venv-cdktn
PY_CDKTN := $(VENV_CDKTN)/bin/python
CDKTN_STAMP := $(VENV_CDKTN)/.gpucluster-installed
# The synthesis tests run a second time under CDK Terrain (main.py directly; the cdktf CLI tests
# need cdktf's own CLI and are not part of this list).
CDKTN_TESTS := tests/test_constructs_aks.py tests/test_constructs_helm.py tests/test_stacks.py tests/test_synth_reuse.py \
	tests/test_nvke_synth.py tests/test_oke_synth.py tests/test_backend_stacks.py tests/test_backend_azurerm.py tests/test_chart_mirrors.py tests/test_cdk_bindings.py \
	tests/test_helm_string_variables.py tests/test_fleet.py tests/test_synth_outdir.py tests/test_lazy_bindings.py \
	tests/test_synth_reuse_files.py tests/test_synth_workers.py tests/test_patch_guards.py
NODE_STAMP := node_modules/.gpucluster-installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.gpucluster-installed
# pytest-xdist: the test files are spread over PYTEST_WORKERS processes (default: the CPU count, at
# most 4), each file's tests in one process (--dist loadfile: a module-scoped fixture such as a shared
# synth is built once). PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n > 4 ? 4 : n )))
PYTEST_ARGS ?= -q -n $(PYTEST_WORKERS) --dist loadfile

.PHONY: setup synth lint docs test test-cdktn test-rig rig cdktn bench fuzz mutation clean checkov-setup

setup: $(PY_STAMP) $(NODE_STAMP)

$(PY):
	$(if $(PYTHON_BOOTSTRAP),,$(error Python 3.11, 3.12 or 3.13 not found (tried $(PYTHON_CANDIDATES)); set PYTHON_BOOTSTRAP=/path/to/python3))
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(PY_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[cdk,render,test]'
	touch $@

# npm may warn that @cdktf/node-pty-prebuilt-multiarch has install scripts that were not run;
# `cdktf synth` does not use the pseudo-terminal, so the warning is harmless.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(PY_CDKTN):
	$(if $(PYTHON_BOOTSTRAP),,$(error Python 3.11, 3.12 or 3.13 not found (tried $(PYTHON_CANDIDATES)); set PYTHON_BOOTSTRAP=/path/to/python3))
	$(PYTHON_BOOTSTRAP) -m venv $(VENV_CDKTN)

# Only cdktn is installed here, so GPUCLUSTER_CDK unset selects it (also in test subprocesses).
$(CDKTN_STAMP): pyproject.toml | $(PY_CDKTN)
	$(PY_CDKTN) -m pip install -q -e '.[cdktn,test]'
	touch $@

cdktn: $(CDKTN_STAMP)

checkov-setup: $(CHECKOV_STAMP)

$(CHECKOV_STAMP): tools/checkov-requirements.txt
	$(if $(PYTHON_BOOTSTRAP),,$(error Python 3.11, 3.12 or 3.13 not found (tried $(PYTHON_CANDIDATES)); set PYTHON_BOOTSTRAP=/path/to/python3))
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON_BOOTSTRAP) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q -r tools/checkov-requirements.txt
	touch $@

# GPUCLUSTER_EMBEDDED_DEFAULT=1: without a cluster file here, the embedded default is what this
# target is for (no info[input.default] notice); a cluster file or GPUCLUSTER_CONFIG still wins.
synth: setup
	GPUCLUSTER_EMBEDDED_DEFAULT=1 $(CDKTF) synth

# The linter, the formatter's check and the type checker, as configured in pyproject.toml.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/cog --check -I tools $(COG_FILES)

# The docs' cog blocks: text generated from the code (usage lines, quoted tests).
COG_FILES := docs/cli.md docs/plugins.md
docs: setup
	$(VENV)/bin/cog -r -I tools $(COG_FILES)

# test-cdktn runs alongside the main pytest run (it fills the cores while the main run's last files
# finish); its output is printed after the main run's, and either failing fails `make test`.
# The rig is built first (cached after the first time): the real kube-scheduler tests of the main run
# read its programs through GPUCLUSTER_RIG_BIN; without Go they skip and say why.
test: setup cdktn checkov-setup lint rig
	@rig_bin=$$($(PY) -m gpucluster_rig build 2>/dev/null) || rig_bin=""; \
	if [ -n "$$rig_bin" ]; then export GPUCLUSTER_RIG_BIN="$$rig_bin"; fi; \
	cdktn_log=$$(mktemp); \
	$(MAKE) --no-print-directory test-cdktn > "$$cdktn_log" 2>&1 & cdktn_pid=$$!; \
	main_rc=0; $(PY) -m pytest $(PYTEST_ARGS) || main_rc=$$?; \
	cdktn_rc=0; wait $$cdktn_pid || cdktn_rc=$$?; \
	echo "test-cdktn (the synthesis tests under CDK Terrain, run alongside):"; cat "$$cdktn_log"; rm -f "$$cdktn_log"; \
	rig_rc=0; $(MAKE) --no-print-directory test-rig || rig_rc=$$?; \
	test $$main_rc -eq 0 && test $$cdktn_rc -eq 0 && test $$rig_rc -eq 0

# The rehearsal rig's programs (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd, kwok, kwokctl, helm), built from the Go module proxy into the user's cache
# (gpucluster_rig/build.py; ~15 min cold on 2 cores, nothing when cached), and Helm 4 for the AICR
# side-by-side test (its own cache key). Built here, outside the rig tests' network namespace,
# which reaches no module proxy. Without Go: skipped, said.
rig: setup
	@if command -v go >/dev/null 2>&1; then $(PY) -m gpucluster_rig build && $(PY) -m gpucluster_rig build-helm4; \
	else echo "rig: no Go toolchain on PATH; the rig's tests will skip (install Go 1.26+)"; fi

# The rig's tests, in a private network namespace whose only interface is loopback (unshare --net;
# root, or --map-root-user where user namespaces are allowed): nothing they start can leave 127.0.0.1.
RIG_PYTEST_ARGS ?= -q -p no:cacheprovider
test-rig: rig
	@if unshare --net true 2>/dev/null; then isolate="unshare --net"; \
	elif unshare --net --map-root-user true 2>/dev/null; then isolate="unshare --net --map-root-user"; \
	else echo "test-rig: cannot create a network namespace here (unshare --net); the rig's tests skip"; isolate=""; fi; \
	$$isolate sh -c 'ip link set lo up 2>/dev/null; exec "$$@"' sh $(PY) -m pytest $(RIG_PYTEST_ARGS) tests/rig

test-cdktn: cdktn
	GPUCLUSTER_CDK=cdktn $(PY_CDKTN) -m pytest $(PYTEST_ARGS) -p no:cacheprovider $(CDKTN_TESTS)

bench: setup cdktn rig
	$(PY) tools/bench.py
	$(PY) tools/bench_rehearse.py

FUZZ_EXAMPLES ?= 2000
fuzz: setup
	GPUCLUSTER_FUZZ=long GPUCLUSTER_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/test_fuzz_cluster_file.py tests/test_fuzz_main.py

MUTMUT_STAMP := $(VENV)/.gpucluster-mutmut-installed
$(MUTMUT_STAMP): tools/mutation-requirements.txt $(PY_STAMP)
	$(PY) -m pip install -q -r tools/mutation-requirements.txt
	touch $@

# A seeded sample of MUTATION_SAMPLE mutants per module (0: every mutant; about 4,900 in all, hours
# on a 2-core machine); MUTATION_ARGS passes more options (--recheck, --module PATH, --seed S).
MUTATION_SAMPLE ?= 40
MUTATION_JOBS ?= 2
mutation: $(MUTMUT_STAMP)
	$(PY) tools/mutation.py --sample $(MUTATION_SAMPLE) --jobs $(MUTATION_JOBS) $(MUTATION_ARGS)

clean:
	rm -rf cdktf.out .cdktf.out.* mutants
