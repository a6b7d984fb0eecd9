# Two entry points for a fresh machine with Python 3.11 and make:
#   make demo   - virtualenv + install + run the streaming job on the bundled corpus
#   make test   - virtualenv + install + run every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install models bench lint clean

$(STAMP): requirements.txt setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# Topic classifier + text-embedding model, trained from data/topics when missing (seconds).
models: $(STAMP)
	$(BIN)/newsflow train-topics

demo: $(STAMP) models
	$(BIN)/newsflow demo

# ruff (configuration in ruff.toml): lint rules and formatting, both checked, nothing rewritten.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: $(STAMP) models lint
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

bench: $(STAMP) models
	for b in simhash lsh pipeline extraction enrichment mmr serving crawl crawl_to_display; do $(BIN)/python -m benchmarks.$$b --json; done

clean:
	rm -rf $(VENV) var
