# Top-level entry points. Everything is built by CMake in build/.
#   make        build the libraries, tests and benchmarks (Release)
#   make test   build and run the CTest suite (what CI runs)
#   make bench  build, install the peer allocators, run the comparison
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

PREFIX ?= /usr/local

.PHONY: all build test bench bench-quick bench-instr install clean

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

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
