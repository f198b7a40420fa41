# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A thin front door. All build logic lives in meson; these targets install what
# is missing, configure the build directories and run meson.
#
#   make demo    live kernel update in the QEMU lab, prints the downtime report
#   make check   every test suite: unit (+valgrind, +ASan/UBSan), integration, fuzz, lab
#   make bench   meson benchmarks (figures, never pass/fail on speed)
#   make clean   removes the build directories (the lab image cache stays)
#
# CHECK_SUITES="unit integration" make check   runs only those stages.

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
ARM64_BUILD ?= build-arm64

.PHONY: all build deps check bench demo clean format

all: build

deps:
	@tools/install-deps

build: deps
	@tools/meson-configure $(BUILD)
	meson compile -C $(BUILD)

check: deps
	@tools/check

bench: build
	meson test -C $(BUILD) --benchmark --print-errorlogs --verbose
	@tools/meson-configure $(ARM64_BUILD) arm64
	meson test -C $(ARM64_BUILD) --benchmark --print-errorlogs --verbose

demo: build
	@tools/demo $(BUILD)

format:
	@git ls-files -co --exclude-standard '*.c' '*.h' | grep -v '^build' | xargs -r clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(ARM64_BUILD)
