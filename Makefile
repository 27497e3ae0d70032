# tiergnn: the two set-up commands of the README.
#   make demo   installs missing Debian packages, builds, runs the main job on a generated dataset
#   make check  installs missing Debian packages, builds, runs every test (plain and ASan+UBSan;
#               the Python package's pytest suite in the plain build)
#   make python builds the Python package into $(BUILD)/python (PYTHONPATH=$(BUILD)/python)
#   make fuzz   builds the libFuzzer targets (clang) and runs each for FUZZ_TIME seconds
#   make faults runs the fault and kill matrix over every strategy (docs/RELIABILITY.md)
#   make soak   trains for an hour per strategy under a cgroup, sampling RSS and open fds
#   make fresh-check  runs `make check` and `make demo` on a fresh Debian 12 chroot without a
#               cgroup, from a clone of HEAD (tests/fresh/run.sh; root; docs/RELIABILITY.md)
.PHONY: all deps build build-asan python demo check test bench fuzz faults soak fresh-check format clean

DEBIAN_PACKAGES := cmake make gcc clang pkg-config liburing-dev libopenblas-dev zlib1g-dev libmetis-dev \
  python3-numpy python3-dev python3-setuptools python3-pytest python3-torch libopenmpi-dev openmpi-bin
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
DEMO_DIR ?= data/demo-1m
DEMO_NODES ?= 1000000
DEMO_MEM ?= 256M
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

# The Python package alone: libtiergnn.so, the extension modules and the .py files in
# $(BUILD)/python/tiergnn (the plain build makes it too; docs/PYTHON.md).
python: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target python

# Release build with gcc, then a Debug build with clang under ASan + UBSan: both compilers stay
# -Werror clean and every test runs twice.
check: build build-asan
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fresh-check:
	tests/fresh/run.sh

# The demo trains the same model twice on the same generated graph: in RAM (memory strategy, no
# limit), then out of core with DiskGNN (diskgnn: the fastest out-of-core strategy on this
# machine, see bench/README.md "make demo") under --mem $(DEMO_MEM) for the whole process, below
# the dataset's graph + features, with the fresh samples of each epoch packed on disk while the
# epoch before trains. Then it compares their epochs and checkpoints.
DEMO_TRAIN := --model sage --layers 2 --hidden 128 --fanouts 10,5 --batch-size 1024 --epochs 3 \
  --batches-per-epoch 100 --eval-every 0 --eval-fanouts train --eval-max-nodes 20000 \
  --threads $(JOBS) --seed 1
DEMO_OOC := diskgnn
DEMO_OOC_ARGS := --disk-budget 1G

demo: build
	@if [ ! -f $(DEMO_DIR)/meta.txt ]; then \
	  $(TIERGNN) generate $(DEMO_DIR) --nodes $(DEMO_NODES) --avg-degree 15 --feat-dim 64 --classes 16 --seed 1; \
	fi
	$(TIERGNN) info $(DEMO_DIR)
	@echo "== in RAM: strategy memory, no --mem limit; the first 100 batches of each epoch"
	rm -rf runs/demo-memory runs/demo-$(DEMO_OOC)
	mkdir -p runs
	$(TIERGNN) train $(DEMO_DIR) --strategy memory $(DEMO_TRAIN) --out runs/demo-memory --json \
	  > runs/demo-memory.jsonl
	@echo "== out of core: strategy $(DEMO_OOC) $(DEMO_OOC_ARGS), --mem $(DEMO_MEM) for the whole process"
	@echo "== (model, batches, buffers), below the dataset's graph + features; the same batches"
	$(TIERGNN) train $(DEMO_DIR) --strategy $(DEMO_OOC) --mem $(DEMO_MEM) $(DEMO_OOC_ARGS) $(DEMO_TRAIN) \
	  --out runs/demo-$(DEMO_OOC) --json > runs/demo-$(DEMO_OOC).jsonl
	$(TIERGNN) eval $(DEMO_DIR) --checkpoint runs/demo-$(DEMO_OOC) --split test --mem $(DEMO_MEM) \
	  --strategy $(DEMO_OOC) --max-nodes 20000
	@grep -o '"time_s":[0-9.e+-]*' runs/demo-memory.jsonl | cut -d: -f2 > runs/demo-memory.times; \
	 grep -o '"time_s":[0-9.e+-]*' runs/demo-$(DEMO_OOC).jsonl | cut -d: -f2 > runs/demo-$(DEMO_OOC).times; \
	 cmp -s runs/demo-memory/checkpoint.bin runs/demo-$(DEMO_OOC)/checkpoint.bin && same=identical || same=DIFFERENT; \
	 echo "== epoch times, memory vs $(DEMO_OOC) at --mem $(DEMO_MEM) (epoch 1 includes $(DEMO_OOC)'s first packing;"; \
	 echo "==   every epoch but the last also prepares the next one beside it); checkpoints $$same"; \
	 paste runs/demo-memory.times runs/demo-$(DEMO_OOC).times | \
	   awk '{ printf "==   epoch %d: memory %.2f s, $(DEMO_OOC) %.2f s = %.2fx\n", NR, $$1, $$2, $$2 / $$1 }'

bench: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=gcc -DTG_BENCH=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The library and the harnesses of fuzz/ built with clang under libFuzzer's coverage, ASan and
# UBSan (TG_FUZZ), then each target run for FUZZ_TIME seconds, one at a time (fuzz/run.sh: its
# corpus, artifacts and log under $(FUZZ_BUILD)). FUZZ_TARGETS picks some ("fuzz_csv fuzz_npy");
# FUZZ_CPU=S repeats a target until it has had S CPU seconds (ledger: $(FUZZ_BUILD)/ledger.tsv).
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME ?= 60
FUZZ_CPU ?= 0
FUZZ_TARGETS ?= $(sort $(basename $(notdir $(wildcard fuzz/fuzz_*.c))))

fuzz: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DTG_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_TIME=$(FUZZ_TIME) FUZZ_CPU=$(FUZZ_CPU) fuzz/run.sh $(FUZZ_TARGETS)

# The fault and kill matrix (tests/faults/run.sh, docs/RELIABILITY.md): every strategy on a small
# generated dataset under a cgroup limit, through I/O errors, short reads, a full disk, a changed
# features.bin, SIGKILL and SIGINT; prints the table case x strategy -> outcome and writes it to
# $(BUILD)/faults/table.md. FAULT_STRATEGIES / FAULT_CASES pick subsets, FAULT_SEED replays the
# random points, FAULT_ROUNDS draws each case that many times (default 3); FAULT_RANKS2 names
# the strategies with a 2-rank column under mpirun (default gnndrive; all, none).
faults: build
	TIERGNN=$(TIERGNN) FAULT_STRATEGIES="$(FAULT_STRATEGIES)" FAULT_CASES="$(FAULT_CASES)" \
	  FAULT_SEED="$(FAULT_SEED)" FAULT_ROUNDS="$(FAULT_ROUNDS)" FAULT_RANKS2="$(FAULT_RANKS2)" \
	  tests/faults/run.sh

# The soak (tests/soak/run.sh, docs/RELIABILITY.md): each of SOAK_STRATEGIES trains SOAK_SECONDS
# under a SOAK_MEM cgroup (default: the demo's dataset and budget) while RSS, open file
# descriptors and the cgroup's usage are sampled every SOAK_INTERVAL seconds; then SIGINT, and the
# verdict (flat after the first epoch, or not) per strategy in $(BUILD)/soak/summary.md.
SOAK_STRATEGIES ?= gnndrive diskgnn
SOAK_SECONDS ?= 3600
SOAK_INTERVAL ?= 5
SOAK_DATASET ?= $(DEMO_DIR)
SOAK_MEM ?= $(DEMO_MEM)
soak: build
	@if [ "$(SOAK_DATASET)" = "$(DEMO_DIR)" ] && [ ! -f $(DEMO_DIR)/meta.txt ]; then \
	  $(TIERGNN) generate $(DEMO_DIR) --nodes $(DEMO_NODES) --avg-degree 15 --feat-dim 64 --classes 16 --seed 1; \
	fi
	TIERGNN=$(TIERGNN) SOAK_DATASET=$(SOAK_DATASET) SOAK_MEM=$(SOAK_MEM) \
	  SOAK_STRATEGIES="$(SOAK_STRATEGIES)" SOAK_SECONDS=$(SOAK_SECONDS) SOAK_INTERVAL=$(SOAK_INTERVAL) \
	  SOAK_ARGS_diskgnn="$(DEMO_OOC_ARGS)" SOAK_WORK=$(BUILD)/soak tests/soak/run.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
