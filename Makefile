# Two entry points for a fresh machine with Python 3.11 and make:
#   make demo   - virtualenv + install + run the streaming job on the bundled corpus
#   make test   - virtualenv + install + run every test
# and, while developing, make test-fast (pure logic and TestPipeline tests: no process, no server, no slow test).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast install models bench lint clean browser

$(STAMP): requirements.txt requirements-dev.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# The 128-dim text model, trained from data/topics when missing (seconds); the topic classifier ships in data/topics.
models: $(STAMP)
	$(BIN)/newsflow train-topics

demo: $(STAMP) models
	$(BIN)/newsflow demo

# ruff (configuration in ruff.toml): lint rules and formatting, both checked, nothing rewritten.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Headless Chromium for tests/web/test_browser.py (Debian's package; Playwright drives it through its
# executable path, nothing is downloaded by Playwright). Quick no-op when already installed; as root
# (.ci/run) or with sudo it installs it with apt-get, elsewhere it says so and the browser tests skip.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then echo "make browser: no apt-get; install Chromium yourself (browser tests will skip)"; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "make browser: not root and no sudo; run 'apt-get install chromium' (browser tests will skip)"; fi

# Every test: unit, Beam (TestPipeline/TestStream), integration (embedded Redis, HTTP on 127.0.0.1) and browser;
# the 25 slowest are listed at the end, to keep the suite inside its 35-minute budget.
test: $(STAMP) models lint browser
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25 tests

# The fast lane: tests not marked integration, browser or slow (markers applied in tests/conftest.py);
# --fast-lane fails any of them that starts a process or opens a listening socket.
test-fast: $(STAMP) models
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not (integration or browser or slow)" --fast-lane tests

bench: $(STAMP) models
	for b in simhash lsh pipeline extraction enrichment mmr serving crawl crawl_to_display sources nightly state_size near_duplicate_recheck story_scale near_duplicate_density model_switch continuous_recluster search cluster_balance; do $(BIN)/python -m benchmarks.$$b --json; done

clean:
	-$(BIN)/newsflow redis stop --data-dir var --no-save
	rm -rf $(VENV) var
