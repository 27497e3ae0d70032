# tiergnn: the two set-up commands of the README.
#   make demo   installs missing Debian packages, builds, runs the main job on a generated dataset
#   make check  installs missing Debian packages, builds, runs every test (plain and ASan+UBSan)
.PHONY: all deps build build-asan demo check test bench format clean

DEBIAN_PACKAGES := cmake make gcc clang pkg-config liburing-dev libopenblas-dev zlib1g-dev libmetis-dev
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
DEMO_DIR ?= data/demo-1m
DEMO_NODES ?= 1000000
DEMO_MEM ?= 160M
TIERGNN := $(BUILD)/tiergnn

all: build

deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang -DTG_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Release build with gcc, then a Debug build with clang under ASan + UBSan: both compilers stay
# -Werror clean and every test runs twice.
check: build build-asan
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@if [ ! -f $(DEMO_DIR)/meta.txt ]; then \
	  $(TIERGNN) generate $(DEMO_DIR) --nodes $(DEMO_NODES) --avg-degree 15 --feat-dim 64 --classes 16 --seed 1; \
	fi
	$(TIERGNN) info $(DEMO_DIR)
	@echo "== out of core: --mem $(DEMO_MEM) is the whole process (model, batches, buffers), below the 256 MB of features;"
	@echo "== strategy gnndrive (io_uring + O_DIRECT + feature buffer); the first 100 batches of each epoch"
	rm -rf runs/demo-sage
	$(TIERGNN) train $(DEMO_DIR) --strategy gnndrive --mem $(DEMO_MEM) --model sage --layers 2 --hidden 128 \
	  --fanouts 10,5 --batch-size 1024 --epochs 2 --batches-per-epoch 100 --eval-every 0 --eval-fanouts train \
	  --eval-max-nodes 20000 --threads $(JOBS) --seed 1 --out runs/demo-sage
	$(TIERGNN) eval $(DEMO_DIR) --checkpoint runs/demo-sage --split test --mem $(DEMO_MEM) --strategy gnndrive \
	  --max-nodes 20000

bench: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DTG_BENCH=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
