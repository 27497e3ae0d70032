#!/usr/bin/env bash
# run.sh - tiergnn's loader feeding a GPU, against PyG's NeighborLoader over memmapped features,
# under one host memory limit: builds tiergnn from this tree, generates the shared bench graph,
# trains python/examples/train_pyg.py on CUDA with tiergnn's loader (diskgnn, gids, ginex,
# gnndrive) and with NeighborLoader, and prints epoch time, time waiting for batches and the
# GPU's busy share per run. Under 10 minutes on a machine with 8+ cores and an NVMe disk; see
# bench/gpu/README.md.
#
#   bench/gpu/run.sh [--debs DIR] [--python PY] [--device cuda|cpu] [--nodes 4000000]
#                    [--mem 1200M] [--torch-mem M] [--epochs 2] [--batch-size 1000]
#                    [--max-batches N] [--strategies diskgnn,gids,ginex,gnndrive]
#                    [--workers 4] [--work DIR] [--data DIR] [--tiergnn BIN --pythonpath DIR]
#                    [--run-timeout 150] [--jobs N]
#
# --debs DIR: Debian packages (bench/gpu/fetch-debs.sh) unpacked with dpkg -x into WORK/sysroot
# and built against, for a machine without them and without a mirror. --tiergnn and
# --pythonpath: use a build made before (no build step). Without PyG (torch_geometric) the
# runs use python/examples/train_sage.py (the same model in plain PyTorch) and the PyG+ loader
# of bench/python in place of NeighborLoader, so that the flow runs anywhere (the CPU test:
# --device cpu --nodes 20000). Every run is cold (the dataset evicted from the page cache) in a
# cgroup of --mem: membudget (MEMBUDGET, or ../shared/tools/membudget) when there is one, else
# a cgroup v2 made here, else no limit (said so in the report).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
device=cuda nodes=4000000 mem=1200M torch_mem="" epochs=2 bs=1000 max_batches=0
strategies=diskgnn,gids,ginex,gnndrive workers=4 work=${TMPDIR:-/tmp}/tiergnn-gpu data=""
debs="" python=${PYTHON:-python3} tiergnn="" pythonpath="" run_timeout=150 jobs=$(nproc)
eval_nodes=2000
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs=$2 ;;
    --python) python=$2 ;;
    --device) device=$2 ;;
    --nodes) nodes=$2 ;;
    --mem) mem=$2 ;;
    --torch-mem) torch_mem=$2 ;;
    --epochs) epochs=$2 ;;
    --batch-size) bs=$2 ;;
    --max-batches) max_batches=$2 ;;
    --strategies) strategies=$2 ;;
    --workers) workers=$2 ;;
    --work) work=$2 ;;
    --data) data=$2 ;;
    --tiergnn) tiergnn=$2 ;;
    --pythonpath) pythonpath=$2 ;;
    --run-timeout) run_timeout=$2 ;;
    --jobs) jobs=$2 ;;
    --eval-max-nodes) eval_nodes=$2 ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ -n "$torch_mem" ] || { [ "$device" = cpu ] && torch_mem=500M || torch_mem=256M; }
t0=$(date +%s)
log() { echo "run.sh [$(($(date +%s) - t0)) s]: $*" >&2; }
mkdir -p "$work"
out=$work/results
rm -rf "$out"
mkdir -p "$out"

# ---------------------------------------------------------------- build
if [ -z "$tiergnn" ]; then
  cmake_extra=()
  if [ -n "$debs" ]; then
    sysroot=$work/sysroot
    rm -rf "$sysroot"
    for d in "$debs"/*.deb; do dpkg -x "$d" "$sysroot"; done
    lib=$sysroot/usr/lib/x86_64-linux-gnu
    export PKG_CONFIG_SYSROOT_DIR=$sysroot
    export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$sysroot/usr/share/pkgconfig
    export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$sysroot/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cmake_extra=(-DCMAKE_PREFIX_PATH="$sysroot/usr" -DCMAKE_LIBRARY_PATH="$lib"
      -DCMAKE_INCLUDE_PATH="$sysroot/usr/include")
    log "unpacked $(ls "$debs"/*.deb | wc -l) Debian packages into $sysroot"
  fi
  log "building tiergnn and its Python package for $(command -v "$python")"
  cmake -S "$root" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="$(command -v "$python")" "${cmake_extra[@]}" >"$out/cmake.log" 2>&1 ||
    { tail -n 30 "$out/cmake.log" >&2; exit 1; }
  cmake --build "$work/build" -j "$jobs" --target tiergnn_cli python >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; exit 1; }
  tiergnn=$work/build/tiergnn
  pythonpath=$work/build/python
fi
export PYTHONPATH=$pythonpath${PYTHONPATH:+:$PYTHONPATH}
"$python" -c "import tiergnn" || { echo "run.sh: tiergnn does not import with $python" >&2; exit 1; }
if [ "$device" = cuda ]; then
  "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" ||
    { echo "run.sh: torch sees no CUDA device (give --device cpu to test the flow)" >&2; exit 1; }
fi
if "$python" -c "import torch_geometric" 2>/dev/null; then have_pyg=1; else have_pyg=0; fi
[ $have_pyg = 1 ] || log "PyG is not importable: train_sage.py and the PyG+ loader stand in"

# ---------------------------------------------------------------- the graph
data=${data:-$work/g$nodes}
if [ ! -f "$data/meta.txt" ]; then
  log "generating $data ($nodes nodes, the shared bench's settings)"
  "$tiergnn" -q generate "$data" --nodes "$nodes" --avg-degree 15 --feat-dim 128 --classes 32 \
    --train-frac 0.01 --valid-frac 0.005 --test-frac 0.005 --seed 1 --overwrite
fi

# ---------------------------------------------------------------- a cgroup of --mem per run
membudget=${MEMBUDGET:-$root/../shared/tools/membudget}
to_bytes() {
  local v=${1^^} m=1
  case "$v" in *K) m=1024; v=${v%K} ;; *M) m=$((1024 ** 2)); v=${v%M} ;; *G) m=$((1024 ** 3)); v=${v%G} ;; esac
  echo $((v * m))
}
limit_note="every run in a cgroup of $mem"
limited() { # limited LOG COMMAND...: the command cold, under the limit, its stderr to LOG
  local log=$1
  shift
  if [ -x "$membudget" ]; then
    "$membudget" --evict "$data" "$mem" -- "$@" 2>"$log"
    return
  fi
  for f in "$data"/*.bin; do dd if="$f" iflag=nocache count=0 status=none 2>/dev/null || true; done
  local cg="" parent
  parent=/sys/fs/cgroup$(grep -E '^0::' /proc/self/cgroup | cut -d: -f3)
  if [ -w "$parent" ] && grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null; then
    cg=$parent/tiergnn-gpu.$$
    mkdir "$cg" 2>/dev/null || cg=""
  fi
  if [ -z "$cg" ]; then
    limit_note="NO memory limit (no writable cgroup v2 memory controller here)"
    "$@" 2>"$log"
    return
  fi
  to_bytes "$mem" >"$cg/memory.max"
  echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
  local rc=0
  (echo $BASHPID >"$cg/cgroup.procs" && exec "$@") 2>"$log" || rc=$?
  echo "cgroup: limit=$(cat "$cg/memory.max") peak=$(cat "$cg/memory.peak" 2>/dev/null || echo ?)" >>"$log"
  rmdir "$cg" 2>/dev/null || true
  return $rc
}

gpu_sampler() { # samples the GPU's utilisation every 250 ms into FILE until killed
  command -v nvidia-smi >/dev/null && [ "$device" = cuda ] || return 0
  exec nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 250 >"$1"
}

model=(--layers 3 --hidden 256 --fanouts 10,10,10 --batch-size "$bs" --epochs "$epochs"
  --eval-every 0 --eval-fanouts train --eval-max-nodes "$eval_nodes" --device "$device" --json)
[ "$max_batches" = 0 ] || model+=(--max-batches "$max_batches")
example=$root/python/examples/train_pyg.py
[ $have_pyg = 1 ] || example=$root/python/examples/train_sage.py

one() { # one TAG COMMAND...
  local tag=$1 pid=""
  shift
  log "$tag"
  gpu_sampler "$out/$tag.smi" &
  pid=$!
  local rc=0
  limited "$out/$tag.log" timeout "$run_timeout" "$@" >"$out/$tag.jsonl" || rc=$?
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ $rc = 0 ] || {
    log "$tag failed (exit $rc; 124 = past --run-timeout $run_timeout s): $out/$tag.log"
    failed=$((failed + 1))
  }
}
failed=0

for s in ${strategies//,/ }; do
  one "tiergnn-$s" "$python" "$example" "$data" --strategy "$s" --mem "$mem" \
    --torch-mem "$torch_mem" "${model[@]}"
done
if [ $have_pyg = 1 ]; then
  one "pyg-neighborloader" "$python" "$example" "$data" --loader neighborloader \
    --workers "$workers" "${model[@]}"
else
  one "pygplus" "$python" "$root/bench/python/compare.py" --one-pygplus "$data" "${model[@]}"
fi

# ---------------------------------------------------------------- the report
"$python" - "$out" "$device" "$limit_note" "$(($(date +%s) - t0))" <<'EOF' | tee "$out/report.md"
import glob, json, os, sys
out, device, note, took = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = []
for f in sorted(glob.glob(os.path.join(out, "*.jsonl"))):
    tag = os.path.basename(f)[:-6]
    recs = [json.loads(s) for s in open(f) if s.startswith("{")]
    recs = [r for r in recs if "time_s" in r]
    smi = os.path.join(out, tag + ".smi")
    util = []
    if os.path.exists(smi):
        util = [float(s) for s in open(smi) if s.strip().replace(".", "").isdigit()]
    if not recs:
        rows.append("| %s | failed (see %s.log) |" % (tag, tag))
        continue
    ep = " / ".join("%.2f" % r["time_s"] for r in recs)
    wt = " / ".join("%.2f" % r["wait_s"] for r in recs)
    busy = " / ".join("%.2f" % r["gpu_busy_share"] for r in recs if "gpu_busy_share" in r) or "-"
    acc = next((r["test_acc"] for r in reversed(recs) if "test_acc" in r), float("nan"))
    rows.append("| %s | %s | %s | %s | %s | %.4f |" % (
        tag, ep, wt, busy, "%.0f%%" % (sum(util) / len(util)) if util else "-", acc))
print("device %s; %s; %s s end to end\n" % (device, note, took))
print("| run | epoch s | waiting for batches s | GPU busy share (CUDA events) | GPU utilisation "
      "(nvidia-smi mean) | test acc |")
print("|---|---|---|---|---|---|")
print("\n".join(rows))
EOF
log "done: $out/report.md"
[ $failed = 0 ] || { log "$failed run(s) failed"; exit 1; }
