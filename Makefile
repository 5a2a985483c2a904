# Two commands for learners (`make lab`, `make test`), a few for maintainers.
# Everything runs in .venv, created on first use from pyproject.toml's pins.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test lint format notebooks clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -e '.[dev,triton]'
	touch $(STAMP)

# JupyterLab on the notebooks, on localhost only, with token authentication kept.
lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.ip=127.0.0.1 --ServerApp.root_dir=notebooks

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Re-execute every notebook in place, storing fresh outputs (then commit them).
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/[0-9]*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
