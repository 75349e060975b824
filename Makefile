# The README's commands. Each one installs what is missing and builds first.
MAKEFLAGS += --no-print-directory
BUILD ?= build
CMAKE_FLAGS ?=
ifneq ($(CI),)
CMAKE_FLAGS += -DCODEINTERP_WERROR=ON
endif
PYTEST = /usr/bin/python3 -m pytest

.PHONY: all deps build test unit integration integration-asan sanitize demo clean format check-format bench \
	fresh-system-check

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

# The format check, unit tests (plain and under ASan/UBSan), the integration suite
# over the real socket in both worker start modes, and once more with the supervisor
# itself built with ASan/UBSan (a leak or memory error fails its exit status).
test: build check-format sanitize
	ctest --test-dir $(BUILD) --output-on-failure
	CODEINTERP_BUILD=$(abspath $(BUILD)) CODEINTERP_WORKER_START=zygote $(PYTEST) -q tests/integration
	CODEINTERP_BUILD=$(abspath $(BUILD)) CODEINTERP_WORKER_START=exec $(PYTEST) -q tests/integration
	$(MAKE) integration-asan

# The supervisor under ASan/UBSan with the ordinary worker (a worker cannot run
# under ASan: its address-space limit is far below ASan's shadow mappings).
integration-asan: build sanitize
	@rm -rf $(BUILD)-asan-bin && mkdir -p $(BUILD)-asan-bin/bin
	@cp $(BUILD)-san/bin/codeinterpd $(BUILD)-asan-bin/bin/
	@cp $(BUILD)/bin/codeinterp-worker $(BUILD)/bin/codeinterp $(BUILD)-asan-bin/bin/
	ASAN_OPTIONS=detect_leaks=1 CODEINTERP_BUILD=$(abspath $(BUILD))-asan-bin $(PYTEST) -q tests/integration

demo: build
	@tests/demo.sh $(abspath $(BUILD))

# The C files to format: git's list in a git checkout (this directory is its top),
# otherwise (a release tarball, no git) every .c/.h under the source folders. An empty
# list is an error, never a silent pass.
C_SOURCE_DIRS = client common policy supervisor tests worker
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

clean:
	rm -rf $(BUILD) $(BUILD)-san $(BUILD)-asan-bin

# A fresh minimal Debian 12 root (debootstrap, cached under /var/tmp) runs the README's
# commands from a copy of HEAD without .git (docs/operations.md). Root; ~5 minutes.
fresh-system-check:
	scripts/fresh-system-check.sh

# Benchmarks and soaks are not part of `make test` (see docs/performance.md).
bench: build
	CODEINTERP_BUILD=$(abspath $(BUILD)) /usr/bin/python3 tests/bench/bench.py
