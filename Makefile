# The README's commands. Each one installs what is missing and builds first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DCODEINTERP_WERROR=ON
endif
PYTEST = /usr/bin/python3 -m pytest
# Test processes per suite (pytest-xdist): the tests mostly wait for supervisors and
# workers, so three keep the development machine's two cores busy; each process starts
# supervisors of its own (docs/testing.md, "Running in parallel").
TEST_JOBS ?= 3
PYTEST_PAR = $(PYTEST) -q -n $(TEST_JOBS)
WITH_BUILD = CODEINTERP_BUILD=$(abspath $(BUILD))
# `make test` times each stage (scripts/timed.sh): a line per stage as it ends, the table
# at the end, in $(BUILD)/test-times.
TIMED = scripts/timed.sh $(abspath $(BUILD))/test-times
TIMED_DEEP = scripts/timed.sh $(abspath $(BUILD))/test-deep-times

.PHONY: all deps build test test-fast unit integration integration-exec integration-asan sanitize demo clean \
	format check-format bench fuzz-build fuzz-smoke fuzz-long cppcheck fresh-system-check test-flake

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$$(nproc)

unit: build
	ctest --test-dir $(BUILD) --output-on-failure

# The integration suite in the reference configuration (zygote mode, root, the plain
# build, Debian's CPython): every test. The other configurations run the tests marked
# as depending on them (docs/testing.md, "Configurations and markers").
integration: build
	$(WITH_BUILD) $(PYTEST_PAR) tests/integration

# The tests whose subject depends on the worker start mode, in exec mode.
integration-exec: build
	$(WITH_BUILD) CODEINTERP_WORKER_START=exec $(PYTEST_PAR) tests/integration

# Unit tests built with AddressSanitizer and UndefinedBehaviorSanitizer.
sanitize: deps
	@cmake -S . -B $(BUILD)-san -DCMAKE_BUILD_TYPE=Debug -DCODEINTERP_ASAN=ON -DCODEINTERP_UBSAN=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD)-san -j$$(nproc)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD)-san --output-on-failure -E seccomp_python_probe

# Every stage, timed (docs/testing.md has the times): the format check, cppcheck,
# pyflakes, mypy on the Python client, the unit tests, the tool face, the integration suite (every test in the
# reference configuration), the Python client, the
# deployment manifests, the adversarial suite (default configuration) and rootless. The sanitizer builds, the
# fuzzers and the other CPythons are `make test-deep`, which CI runs after this.
test: deps
	@$(TIMED) start
	@$(TIMED) build $(MAKE) build
	@$(TIMED) check-format $(MAKE) check-format
	@$(TIMED) lint-python $(MAKE) lint-python
	@$(TIMED) typecheck-python $(MAKE) typecheck-python
	@$(TIMED) unit-python $(MAKE) unit-python
	@$(TIMED) cppcheck $(MAKE) cppcheck
	@$(TIMED) sdk-types $(MAKE) sdk-types
	@$(TIMED) unit ctest --test-dir $(BUILD) --output-on-failure
	@$(TIMED) tool-test $(MAKE) tool-test
	@$(TIMED) integration $(MAKE) integration
	@$(TIMED) python-client $(MAKE) python-client
	@$(TIMED) deployment-test $(MAKE) deployment-test
	@$(TIMED) adversarial $(MAKE) adversarial-default
	@$(TIMED) test-rootless $(MAKE) test-rootless
	@$(TIMED) end

# What takes builds of its own, timed like make test (its table in
# BUILD/test-deep-times): the unit tests under ASan/UBSan, a bounded run of every fuzz
# target, the integration tests marked start_mode in exec mode, those marked asan against
# the ASan/UBSan supervisor, the
# adversarial suite in exec mode and under the data policy, and the tests marked python
# against every other CPython (a build each). CI runs it after
# make test (.ci/run); it keeps make test within its 15 minutes.
.PHONY: test-deep
test-deep: deps
	@$(TIMED_DEEP) start
	@$(TIMED_DEEP) sanitize $(MAKE) sanitize
	@$(TIMED_DEEP) fuzz-smoke $(MAKE) fuzz-smoke
	@$(TIMED_DEEP) integration-exec $(MAKE) integration-exec
	@$(TIMED_DEEP) integration-asan $(MAKE) integration-asan
	@$(TIMED_DEEP) adversarial-more $(MAKE) adversarial-more
	@$(TIMED_DEEP) test-python-versions $(MAKE) test-python-versions
	@$(TIMED_DEEP) end

# The fast tier (make fresh-system-check runs it on a fresh root after make demo): the
# format check (without git there), the npm packages, the unit tests and one pass of the
# integration suite in the reference configuration.
test-fast: build
	@$(TIMED) start
	@$(TIMED) check-format $(MAKE) check-format
	@$(TIMED) sdk-types $(MAKE) sdk-types
	@$(TIMED) unit-python $(MAKE) unit-python
	@$(TIMED) unit ctest --test-dir $(BUILD) --output-on-failure
	@$(TIMED) integration $(MAKE) integration
	@$(TIMED) end

# The integration suite FLAKE_ROUNDS times (default 5), in the reference configuration
# and exec mode, while stress-ng keeps every core busy; reports each test that failed
# and in how many rounds (scripts/test-flake.sh, docs/testing.md "Flakiness").
test-flake: build
	scripts/test-flake.sh $(abspath $(BUILD))

# The supervisor under ASan/UBSan with the ordinary worker (a worker cannot run
# under ASan: its address-space limit is far below ASan's shadow mappings).
integration-asan: build sanitize
	@rm -rf $(BUILD)-asan-bin && mkdir -p $(BUILD)-asan-bin/bin
	@cp $(BUILD)-san/bin/codeinterpd $(BUILD)-asan-bin/bin/
	@cp $(BUILD)/bin/codeinterp-worker $(BUILD)/bin/codeinterp $(BUILD)-asan-bin/bin/
	@cp $(BUILD)/python.json $(BUILD)-asan-bin/
	ASAN_OPTIONS=detect_leaks=1 CODEINTERP_BUILD=$(abspath $(BUILD))-asan-bin $(PYTEST_PAR) tests/integration

# The integration tests marked rootless against supervisors started as an unprivileged
# user created for the run (removed afterwards), in both worker start modes
# (scripts/test-rootless.sh, docs/testing.md). Root; fails instead of skipping under
# CODEINTERP_MUST_SANDBOX=1 without unprivileged user namespaces.
.PHONY: test-rootless
test-rootless: build
	scripts/test-rootless.sh $(abspath $(BUILD))

# Configure refuses an embed library that is not the chosen interpreter's own; then the
# integration tests marked python against every other CPython >= 3.12 on this machine
# (pyenv), each built in $(BUILD)-py3.X with -DCODEINTERP_PYTHON, in both start modes;
# skipped with a message when there is none (scripts/test-python-versions.sh).
.PHONY: test-python-versions
test-python-versions: deps
	tests/cmake/python_mismatch.sh
	scripts/test-python-versions.sh $(BUILD) "$(CMAKE_FLAGS)"

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
	-DCODEINTERP_PY_VERSION=\"3\" -DCODEINTERP_PY_MAJOR_MINOR=\"3\" -DCODEINTERP_PY_PREFIX=\"/\" -DCODEINTERP_PY_EXECUTABLE=\"/\" \
	-DCODEINTERP_PY_RUNTIME=\"/\" -DCODEINTERP_PY_MASK=\"\" -DCODEINTERP_PYTHON=\"/\" -DCODEINTERP_SOURCE_DIR=\"/\" \
	-DCODEINTERP_WORKER_PATH=\"/\" \
	$(foreach p,NUMPY PANDAS MATPLOTLIB SCIPY SKLEARN STATSMODELS SYMPY SEABORN OPENPYXL TABULATE,$(foreach f,SITES BINDS PRELOAD ENV MISSING,-DCODEINTERP_PY_PKG_$(p)_$(f)=\"\"))
CPPCHECK_DIRS = $(wildcard common contract policy supervisor worker client)
cppcheck: deps
	cppcheck --quiet --enable=warning,portability --inline-suppr --error-exitcode=1 --platform=unix64 \
		-I. $(CPPCHECK_DEFINES) $(CPPCHECK_DIRS)

demo: build
	@tests/demo.sh $(abspath $(BUILD))

# The C files to format: git's list in a git checkout (this directory is its top),
# otherwise (a release tarball, no git) every .c/.h under the source folders. An empty
# list is an error, never a silent pass.
C_SOURCE_DIRS = client common contract policy supervisor tests worker
list_c_files = if [ "$$(git rev-parse --is-inside-work-tree 2>/dev/null)" = true ] && \
		[ -z "$$(git rev-parse --show-prefix 2>/dev/null)" ]; then \
		git ls-files '*.c' '*.h'; \
	else \
		find $(C_SOURCE_DIRS) -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort; \
	fi
c_files_or_fail = files=$$($(list_c_files)); \
	if [ -z "$$files" ]; then echo "$@: found no C files to check (neither git ls-files nor find over $(C_SOURCE_DIRS))" >&2; exit 1; fi; \
	echo "$@: $$(echo "$$files" | wc -l) C files"

format:
	@$(c_files_or_fail); clang-format -i $$files

check-format:
	@$(c_files_or_fail); clang-format --dry-run -Werror $$files

# The npm packages the tool-face tests need, into tests/sdk-types/node_modules only
# (again only when package-lock.json changed).
.PHONY: sdk-types tool-test
sdk-types:
	@scripts/install-sdk-types.sh

# The tool face: describe/tool goldens, the SDK type check, the renderings, the MCP server
# driven by the official MCP client. CODEINTERP_UPDATE_GOLDEN=1 rewrites tests/golden/.
tool-test: build sdk-types
	$(WITH_BUILD) $(PYTEST_PAR) tests/tool

# The Python: pyflakes (Debian's python3-pyflakes) on the worker's runner, its numeric module and the tests.
.PHONY: lint-python unit-python
lint-python: deps
	/usr/bin/python3 -m pyflakes worker/runner.py worker/codeinterp_numeric.py python tests/conftest.py tests/lib tests/python tests/python_client \
		tests/integration tests/bench tests/tool tests/deployment tests/pod tests/adversarial tests/compat

# The Python client's type hints (it ships py.typed): Debian's mypy --strict, its cache in
# $(BUILD). Needs no build.
.PHONY: typecheck-python
typecheck-python: deps
	cd python && /usr/bin/python3 -m mypy --strict --cache-dir $(abspath $(BUILD))/mypy-cache -p codeinterp

# The worker's runner and numeric module (worker/*.py) as Python; needs no build.
unit-python: deps
	$(PYTEST_PAR) tests/python

# The Kubernetes manifests (packaging/kubernetes/, docs/deployment.md), parsed and checked;
# their policy is loaded by the built codeinterpd --check-config.
.PHONY: deployment-test
deployment-test: build
	$(WITH_BUILD) $(PYTEST_PAR) tests/deployment

# The Python client (python/codeinterp) against a real supervisor.
.PHONY: python-client
python-client: build
	$(WITH_BUILD) $(PYTEST_PAR) tests/python_client

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-asan-bin $(BUILD)-fuzz $(BUILD)-py3.* $(BUILD)-deb $(BUILD)-deb-upgrade

# A fresh minimal Debian 12 root (debootstrap, cached under /var/tmp) installs what the
# README's commands need from a copy of HEAD without .git and runs make demo and the
# fast tier, make test-fast (docs/operations.md). Root; a few minutes.
fresh-system-check:
	scripts/fresh-system-check.sh

# Installing and packaging (docs/operations.md, "Installing" and "Debian packages").
# install-check: DESTDIR install of a prefix-/usr build into a temporary tree, checked
# path by path. deb: the Debian packages, into $(BUILD)-deb/. test-package: those
# packages under a booted systemd (= nspawn-check, below).
.PHONY: install-check deb test-package
install-check: deps
	tests/package/check-install.sh $(abspath $(BUILD))-install

deb:
	scripts/build-deb.sh $(abspath $(BUILD))-deb

test-package: nspawn-check

# The packages as apt installs them and the units as shipped, under a booted systemd
# (systemd-nspawn -b in a fresh minimal Debian 12 root): socket activation, calls, reload,
# watchdog, stop, both start modes, an upgrade to a second build (deb-upgrade: the same
# source as version <version>+upgrade1) with a client loop running, purge.
.PHONY: nspawn-check deb-upgrade
DEB_VERSION = $(shell dpkg-parsechangelog -l debian/changelog -S Version 2>/dev/null)
deb-upgrade:
	CODEINTERP_DEB_VERSION=$(DEB_VERSION)+upgrade1 scripts/build-deb.sh $(abspath $(BUILD))-deb-upgrade

nspawn-check: deb deb-upgrade
	scripts/nspawn-check.sh $(abspath $(BUILD))-deb $(abspath $(BUILD))-deb-upgrade

# The image and the pod specs of packaging/kubernetes/ under podman kube play with runc
# (docs/deployment.md, "What was run"): DEB_DIR=dir takes packages already built,
# otherwise make deb runs first. Root; about 2.5 minutes with the packages and images
# cached, 4.5 from nothing (docs/deployment.md has the phase times).
.PHONY: pod-check
pod-check:
	scripts/pod-check.sh $(DEB_DIR)

# The compatibility suite (tests/compat/run.py, docs/testing.md "Compatibility"): CPython's
# regression tests of the common stdlib modules in a worker under each profile (the
# reviewed policy and the data policy) and on the host, compared test by test; a
# sandbox-only failure must be listed in tests/compat/expected.txt with its rule.
# MODULES="json re", PROFILES=default|data, UPDATE=1 (rewrite expected.txt), STRICT=1
# (stale entries fail too). A few minutes: not part of `make test`.
.PHONY: test-compat
test-compat: build
	$(WITH_BUILD) MODULES="$(MODULES)" PROFILES="$(PROFILES)" UPDATE="$(UPDATE)" STRICT="$(STRICT)" \
		/usr/bin/python3 tests/compat/run.py

# Benchmarks and soaks are not part of `make test` (see docs/performance.md).
bench: build
	CODEINTERP_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/bench/bench.py

# The adversarial suite (tests/adversarial, docs/security.md "Adversarial suite"): every
# escape and abuse attempt inside the sandbox, in errno and kill mode (one test process
# each), in both worker start modes, then once more under the data policy
# (packaging/policy-data.yaml: the scientific stack bound and preloaded) in zygote mode,
# the attempts of the categories that policy widens; and the validation mode, which runs
# each attempt outside the sandbox (root in a temp dir, or an unshare'd user namespace)
# and checks that it escapes there.
ADVERSARIAL = $(WITH_BUILD) $(PYTEST) -q -n 2 --dist loadgroup tests/adversarial
.PHONY: adversarial adversarial-default adversarial-more adversarial-validate
# adversarial-default (in make test): the default configuration, workerStart zygote;
# adversarial-more (in make test-deep): exec mode, then the data policy.
adversarial: adversarial-default adversarial-more

adversarial-default: build
	@echo "adversarial: workerStart zygote"
	@CODEINTERP_WORKER_START=zygote $(ADVERSARIAL)

adversarial-more: build
	@rc=0; echo "adversarial: workerStart exec"; \
	CODEINTERP_WORKER_START=exec $(ADVERSARIAL) || rc=1; \
	echo "adversarial: workerStart zygote, packaging/policy-data.yaml"; \
	CODEINTERP_WORKER_START=zygote CODEINTERP_ADVERSARIAL_POLICY=$(abspath packaging/policy-data.yaml) \
		$(ADVERSARIAL) || rc=1; \
	exit $$rc

adversarial-validate:
	/usr/bin/python3 tests/adversarial/validate.py

# Latency, throughput and page faults per embedded CPython, side by side: the default
# build and each $(BUILD)-py3.X that test-python-versions builds.
.PHONY: bench-versions
bench-versions: build
	@CODEINTERP_BUILD_ONLY=1 scripts/test-python-versions.sh $(BUILD) "$(CMAKE_FLAGS)"
	CODEINTERP_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/bench/bench.py --versions \
		$(abspath $(BUILD)) $$(ls -d $(abspath $(BUILD))-py3.* 2>/dev/null)
