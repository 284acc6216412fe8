# Top-level entry points. Everything is built by CMake in build/.
#   make        build the libraries (the default libhakmem and, beside it, the
#               secure libhakmem_secure), tests and benchmarks (Release)
#   make test   build and run the CTest suite (what CI runs)
#   make bench  build, install the peer allocators, run the comparison
#   make bench-secure  the secure library against the default on every row
#               (interleaved; bench/results/secure.md)
#   make deb    the Debian package, from a tree configured for /usr (packaging/README.md)
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

PREFIX ?= /usr/local

.PHONY: all build test bench bench-quick bench-instr bench-secure install deb clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE stress

bench: build
	bash bench/run.sh

bench-quick: build
	bash bench/run.sh --quick

bench-instr: build
	bash bench/run.sh --instr

bench-secure: build
	bash bench/run.sh --secure-report

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

deb:
	cmake -S . -B $(BUILD)/pkg -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DHAKMEM_BUILD_TESTS=OFF -DHAKMEM_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD)/pkg -j $(JOBS)
	cd $(BUILD)/pkg && cpack -G DEB

clean:
	rm -rf $(BUILD)
