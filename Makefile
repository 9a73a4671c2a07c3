# gpucluster: set-up, synthesis, tests, benchmark.
#
#   make synth   .venv (python3.11) + pip install -e '.[cdk,render,test]' + pinned cdktf-cli (npm ci),
#                then `cdktf synth` of the cluster file (GPUCLUSTER_CONFIG, ./gpucluster.yaml or
#                the embedded default) into cdktf.out/ (replaced atomically).
#   make test    set-up, then pytest (includes the end-to-end `cdktf synth` test, marker synth).
#   make bench   median wall time / peak RSS of plan building, binding import and cdktf synth.
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

# The Python that creates .venv: python3.11, else python3 if it is 3.11 (evaluated only when .venv
# is created). Override with PYTHON_BOOTSTRAP=/path/to/python3.11.
PYTHON_CANDIDATES := python3.11 python3
PYTHON_BOOTSTRAP ?= $(firstword $(foreach p,$(PYTHON_CANDIDATES),$(shell command -v $(p) >/dev/null 2>&1 && $(p) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1 && echo $(p))))
VENV := .venv
PY := $(VENV)/bin/python
CDKTF := node_modules/.bin/cdktf
PY_STAMP := $(VENV)/.gpucluster-installed
NODE_STAMP := node_modules/.gpucluster-installed
PYTEST_ARGS ?= -q

.PHONY: setup synth test bench clean

setup: $(PY_STAMP) $(NODE_STAMP)

$(PY):
	$(if $(PYTHON_BOOTSTRAP),,$(error Python 3.11 not found (tried $(PYTHON_CANDIDATES)); set PYTHON_BOOTSTRAP=/path/to/python3.11))
	$(PYTHON_BOOTSTRAP) -m venv $(VENV)

$(PY_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[cdk,render,test]'
	touch $@

# npm may warn that @cdktf/node-pty-prebuilt-multiarch has install scripts that were not run;
# `cdktf synth` does not use the pseudo-terminal, so the warning is harmless.
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

synth: setup
	$(CDKTF) synth

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) tools/bench.py

clean:
	rm -rf cdktf.out .cdktf.out.*
