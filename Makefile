# Two commands do everything on a fresh machine (README): `make demo` and `make test`.
# Both create .venv and install capaware into it first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch/torchvision. The default is the CUDA build (about 3 GB of NVIDIA libraries, needed for a GPU); on a
# CPU-only machine the CPU build is smaller and runs the same:
#   make demo TORCH_PINS="torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cpu"
TORCH_PINS ?= torch==2.14.1 torchvision==0.29.1

.PHONY: java demo stand-in test test-integration test-studies study study-captioning study-trunks study-table1 \
  study-headroom study-positive bench venv clean-demo

venv: $(VENV)/.installed

# Bytecode: this project's machines set PYTHONDONTWRITEBYTECODE=1, and without .pyc files every process compiled
# torch again (`import torch, torchvision, numpy, scipy.stats` took 16.4 s instead of 6.0 on a 2-vCPU Intel Xeon,
# family 6 model 207), in each of the demo's and the tests' dozens of processes (issue #55). Byte-compiling all of
# the venv at install compiled four times what any stage imports (11,838 modules; the stages import 2,964). So make's
# commands write the .pyc of what they import, as Python does by default: the first process to import a module
# compiles it once, the next ones read it, and a changed module is compiled again (never used stale). The venv's
# last step imports every module of the checkout once (scripts/warm_imports.py), so that what they load is compiled
# at install, not by the first stage commands or tests all at once.
unexport PYTHONDONTWRITEBYTECODE
#
# uv installs what pip would (the same pins, from PyPI), fetching in parallel (torch's CUDA build is about 4 GB of
# wheels), and keeps what it fetched in its cache (~/.cache/uv): the next clone's venv links from there (timings in
# docs/devices.md). uv reads no pip.conf: where it cannot reach PyPI, pip installs instead, with your pip settings
# (a mirror). To install with pip alone: make venv UV_PIP=".venv/bin/python -m pip install -q".
UV_PIP ?= $(VENV)/bin/uv pip install --python $(PY) -q
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv==0.13.9 || echo 'uv not installable here: pip installs the venv'
	$(UV_PIP) $(TORCH_PINS) || $(PY) -m pip install -q $(TORCH_PINS)
	$(UV_PIP) -e '.[test]' || $(PY) -m pip install -q -e '.[test]'
	$(PY) scripts/warm_imports.py
	touch $@

# Java first, before the venv's minute of installing: the captioners score with the PTB tokenizer and METEOR
# (the pipeline checks it again, with everything else its stages need: capaware/preflight.py).
JAVA_FIX := install Java 8 or later: sudo apt-get install -y openjdk-17-jre-headless (Debian, Ubuntu) \
  or brew install openjdk@17 (macOS); then `java -version` must work
JAVA_ERROR := error: java: no Java runtime on PATH; the demo scores its captions with the PTB tokenizer and METEOR, \
  which are Java (fix: $(JAVA_FIX))
java:
	@java -version >/dev/null 2>&1 || { echo '$(JAVA_ERROR)' >&2; exit 1; }

demo: java venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/demo.sh

# The stand-in for ImageNet weights that make demo loads (configs/demo/weights/class_pretrained_resnet10.pt): the
# caption config's own class pretraining (6 epochs of 48 px object crops, float32), trained once and kept in the
# repository as a user keeps ImageNet weights, so that no demo run spends its first minutes retraining it (issue
# #55). The studies still pretrain their own trunks. About 3 minutes on 2 cores; prints its val accuracy.
STANDIN_RUN ?= runs/standin
STANDIN := configs/demo/weights/class_pretrained_resnet10.pt
stand-in: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m capaware.stage data configs/demo/demo_caption.yaml run_dir=$(STANDIN_RUN)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m embedder.pretrain --config configs/demo/demo_caption.yaml \
	  run_dir=$(STANDIN_RUN) pretrain.precision=float32
	mkdir -p $(dir $(STANDIN)) && cp $(STANDIN_RUN)/caption/class_pretrained/model.pt $(STANDIN)

# Two pytest workers (pytest-xdist), a test file each at a time (module fixtures are built once):
# most tests run one torch thread, so two files side by side use both cores of a 2-core machine. The workers
# take files longest first, by their measured seconds (tests/conftest.py, tests/file_seconds.json).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest $(XDIST) -m "not studies and not integration"

# Whole-pipeline scenarios whose pieces make test checks: the COCO rehearsal, two jobs against one, a kill in stage
# three then a rerun, two processes and two nodes training as one (about 9 minutes on 2 cores; CI runs it after make
# test).
test-integration: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest $(XDIST) -m integration

# The study commands README and docs print, each run as written on a tiny config (tests/studies/test_study_commands.py;
# a few minutes on 2 cores, so apart from `make test`; CI runs both).
test-studies: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m pytest $(XDIST) -m studies

# The study profile: stage one over 3 training seeds at the full budgets (Fig. 3 and Fig. 5 tables;
# studies/stage_one_seeds/configs/pipeline_study.yaml). About an hour on 2 CPU cores with native bfloat16 before the
# Rank-N-Contrast rows joined it; studies/rank_n_contrast/configs/pipeline_rnc.yaml (those rows and log-ratio alone)
# took 35 min (docs/studies/rank_n_contrast.md).
STUDY_RUN ?= runs/study
study: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) -m studies.stage_one_seeds.stage1_seeds \
	  studies/stage_one_seeds/configs/pipeline_study.yaml $(STUDY_RUN) 0 1 2

# The captioning study over stage-one trunks (issue #46), under studies/trunks/configs/declaration_table1.yaml: per
# trunk its own Img, Cap, Cap-shuffled and Img-adapted, both captioners XE then SCST over the declared captioner seeds,
# then Table 1 over trunks (trunk-level tests, Holm) and the probes (studies/trunks/study_trunks.sh; resumable;
# TRUNKS=0 runs one trunk).
TRUNKS_RUN ?= runs/trunks
TRUNKS ?=
study-trunks: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash studies/trunks/study_trunks.sh $(TRUNKS_RUN) $(TRUNKS)

# Table 1 with the power to answer (issue #56; studies/table1_pooled/configs/declaration_table1_pooled.yaml): the power
# plan's trunks, one pooled primary contrast, TOST, a known-effect check; resumable trunk by trunk, each finished trunk
# kept in docs/study_results/table1_pooled/ (commit it) and the table read from those records
# (studies/table1_pooled/study_pooled.sh; TRUNKS="3 4" runs those trunks).
POOLED_RUN ?= runs/table1_pooled
study-table1: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash studies/table1_pooled/study_pooled.sh $(POOLED_RUN) $(TRUNKS)

# The positive control and its negative (issue #46; rules in docs/declaration.md): from the colour-blind stand-in, the
# recipe chosen on val, then real and shuffled caption labels over the declared seeds
# (studies/positive_control/study_positive.sh; resumable, run by run).
POSITIVE_RUN ?= runs/positive
POSITIVE_ARGS ?=
study-positive: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash studies/positive_control/study_positive.sh $(POSITIVE_RUN) $(POSITIVE_ARGS)

# The captioning study (issue #35): Img, Cap, Cap2, Attr and Oracle features on both captioners, XE then SCST, over
# captioner seeds, on 1,000 test images, with every paired difference's t-test and the smallest detectable difference,
# then the pooled and grid probes (studies/captioning/study_captioning.sh; time and machine in
# docs/studies/caption_aware.md).
CAPTIONING_RUN ?= runs/captioning
CAPTIONING_SEEDS ?= 0 1 2 3 4
study-captioning: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash studies/captioning/study_captioning.sh $(CAPTIONING_RUN) $(CAPTIONING_SEEDS)

# Headroom on a finished demo run: the Oracle grid against Img, XE only, over 3 captioner seeds (issue #35). The
# Oracle features are dumped first (the demo does not: issue #46 found this target failing on a fresh clone).
study-headroom: venv
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/stage2_features.sh \
	  studies/captioning/configs/captioning_features_oracle.yaml run_dir=runs/demo
	PATH="$(abspath $(VENV))/bin:$$PATH" bash studies/table1_seeds/table1_seeds.sh \
	  studies/captioning/configs/pipeline_headroom.yaml runs/demo 0 1 2 --results runs/demo/results/headroom

# Speed measurements (about an hour on 2 cores; each prints the command that reproduces it and its ratios;
# README's benchmark blocks are their outputs, saved under benchmarks/results/).
bench: venv
	mkdir -p benchmarks/results
	for b in bench_log_ratio bench_rank_n_contrast bench_adam bench_stage1_precision bench_stage1_arch \
	  bench_stage1_overhead bench_caption_graph bench_caption_graph_scale bench_features bench_captioners \
	  bench_vs_selfcritical bench_scst; do \
	  PATH="$(abspath $(VENV))/bin:$$PATH" \
	  bash -o pipefail -c "$(PY) benchmarks/$$b.py | tee benchmarks/results/$$b.txt" || exit 1; done
	# the same stage-one step with torch held to AVX2: what a CPU without native bfloat16 sees (issue #24)
	ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 bash -o pipefail -c "$(PY) benchmarks/bench_stage1_precision.py \
	--repeats 2 | tee benchmarks/results/bench_stage1_precision_avx2.txt"
	ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 bash -o pipefail -c "$(PY) benchmarks/bench_stage1_arch.py \
	| tee benchmarks/results/bench_stage1_arch_avx2.txt"

clean-demo:
	rm -rf runs/demo results
