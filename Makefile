# The two commands of the README: `make demo` and `make test`. Both set up .venv first:
# the demo installs what it runs on (the runtime dependencies), the tests add the test
# tools and the optional extras (ncu, spark) and the system's chromium.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
FULL := $(VENV)/.installed-full

.PHONY: setup setup-full demo test check lint bench clean browser

setup: $(RUNTIME)

$(RUNTIME): pyproject.toml setup.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

setup-full: $(FULL)

$(FULL): $(RUNTIME)
	$(BIN)/pip install --quiet -e '.[test,ncu,spark]'
	touch $(FULL)

demo: setup
	rm -rf demo-runs demo-warehouse
	$(BIN)/etl demo demo-runs
	$(BIN)/etl ingest demo-runs --warehouse demo-warehouse
	$(BIN)/etl query "SELECT run_name, rank, device_id, selected_iteration, round(gpu_util, 4) AS gpu_util, window_ns, busy_ns, idle_ns, round(throughput_samples_per_s) AS samples_per_s FROM run_summary ORDER BY run_name, rank" --warehouse demo-warehouse
	$(BIN)/etl query "SELECT run_name, precision, iteration, round(gpu_util, 3) AS gpu, round(smsp_active_util, 3) AS smsp_active, round(issue_slot_util, 3) AS issue_slot, round(tc_active_util, 3) AS tc_active, round(tc_issue_util, 4) AS tc_issue, round(matched_time_share, 3) AS matched_share FROM run_utilization ORDER BY run_name" --warehouse demo-warehouse
	$(BIN)/etl report --warehouse demo-warehouse -o demo-report.html
	@echo "open $(CURDIR)/demo-report.html"

# every test, the slow ones (tests/slow_tests.py says which and why) included: what CI runs
test: setup-full browser
	$(BIN)/python -m pytest -n 2 -q

# the quick answer while working: the lint, then every test not marked slow
check: lint
	$(BIN)/python -m pytest -n 2 -q -m "not slow"

# the report's browser test drives Debian's chromium (playwright cannot download one here)
browser:
	@test -x /usr/bin/chromium || { apt-get update -q && apt-get install -y -q chromium chromium-driver; }

lint: setup-full
	$(BIN)/ruff check etl tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/etl lint-sql

bench: setup-full
	$(BIN)/python bench/ingest_bench.py

clean:
	rm -rf $(VENV) demo-runs demo-warehouse demo-report.html .pytest_cache
