# The README's commands. Each one installs what is missing and builds first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DCODEINTERP_WERROR=ON
endif
PYTEST = /usr/bin/python3 -m pytest

.PHONY: all deps build test unit integration integration-asan sanitize demo clean format check-format bench \
	fuzz-build fuzz-smoke fuzz-long cppcheck

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$$(nproc)

unit: build
	ctest --test-dir $(BUILD) --output-on-failure

integration: build
	CODEINTERP_BUILD=$(abspath $(BUILD)) $(PYTEST) -q tests/integration

# Unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer.
sanitize: deps
	@cmake -S . -B $(BUILD)-san -DCMAKE_BUILD_TYPE=Debug -DCODEINTERP_ASAN=ON -DCODEINTERP_UBSAN=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD)-san -j$$(nproc)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-san --output-on-failure -E seccomp_python_probe

# The format check, cppcheck, unit tests (plain and under ASan/UBSan), a bounded run of
# every fuzz target, the integration suite over the real socket in both worker start
# modes, and once more with the supervisor itself built with ASan/UBSan (a leak or
# memory error fails its exit status).
test: build check-format lint-python unit-python cppcheck sanitize fuzz-smoke
	ctest --test-dir $(BUILD) --output-on-failure
	CODEINTERP_BUILD=$(abspath $(BUILD)) CODEINTERP_WORKER_START=zygote $(PYTEST) -q tests/integration
	CODEINTERP_BUILD=$(abspath $(BUILD)) CODEINTERP_WORKER_START=exec $(PYTEST) -q tests/integration
	$(MAKE) integration-asan
	$(MAKE) python-client

# The supervisor under ASan/UBSan with the ordinary worker (a worker cannot run
# under ASan: its address-space limit is far below ASan's shadow mappings).
integration-asan: build sanitize
	@rm -rf $(BUILD)-asan-bin && mkdir -p $(BUILD)-asan-bin/bin
	@cp $(BUILD)-san/bin/codeinterpd $(BUILD)-asan-bin/bin/
	@cp $(BUILD)/bin/codeinterp-worker $(BUILD)/bin/codeinterp $(BUILD)-asan-bin/bin/
	ASAN_OPTIONS=detect_leaks=1 CODEINTERP_BUILD=$(abspath $(BUILD))-asan-bin $(PYTEST) -q tests/integration

# libFuzzer targets (tests/fuzz/, docs/testing.md), built with clang into $(BUILD)-fuzz.
# fuzz-smoke: each target over its seeds, then 15 s of fuzzing; fuzz-long: 10 million
# executions each. Any crash, leak or timeout fails.
fuzz-build: deps
	@CC=clang cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCODEINTERP_FUZZ=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD)-fuzz -j$$(nproc) --target fuzz_targets

fuzz-smoke: fuzz-build
	tests/fuzz/run.sh $(BUILD)-fuzz smoke

fuzz-long: fuzz-build
	tests/fuzz/run.sh $(BUILD)-fuzz long

# cppcheck configured as the build: x86_64 Linux, _GNU_SOURCE and the -D values CMake
# passes (their contents do not matter to it, only that the #error guards see them).
# A finding is fixed, or suppressed inline with the reason:
#   /* cppcheck-suppress <id> ; <why> */ on the line before.
CPPCHECK_DEFINES = -D__x86_64__ -D__linux__ -D_GNU_SOURCE -DCODEINTERP_VERSION=\"0\" \
	-DCODEINTERP_PY_STDLIB=\"/\" -DCODEINTERP_PY_DYNLOAD=\"/\" -DCODEINTERP_PY_LIBDIR=\"/\" \
	-DCODEINTERP_PY_VERSION=\"3\" -DCODEINTERP_SOURCE_DIR=\"/\"
CPPCHECK_DIRS = $(wildcard common contract policy supervisor worker client)
cppcheck: deps
	cppcheck --quiet --enable=warning,portability --inline-suppr --error-exitcode=1 --platform=unix64 \
		-I. $(CPPCHECK_DEFINES) $(CPPCHECK_DIRS)

demo: build
	@tests/demo.sh $(abspath $(BUILD))

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

check-format:
	clang-format --dry-run -Werror $$(git ls-files '*.c' '*.h')

# The Python: pyflakes (Debian's python3-pyflakes) on the worker's runner, its numeric module and the tests.
.PHONY: lint-python unit-python
lint-python: deps
	pyflakes3 worker/runner.py worker/codeinterp_numeric.py python tests/python tests/python_client tests/integration tests/bench

# The worker's runner and numeric module (worker/*.py) as Python; needs no build.
unit-python: deps
	$(PYTEST) -q tests/python

# The Python client (python/codeinterp) against a real supervisor.
.PHONY: python-client
python-client: build
	CODEINTERP_BUILD=$(abspath $(BUILD)) $(PYTEST) -q tests/python_client

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-asan-bin $(BUILD)-fuzz

# Benchmarks and soaks are not part of `make test` (see docs/performance.md).
bench: build
	CODEINTERP_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/bench/bench.py
