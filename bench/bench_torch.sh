#!/usr/bin/env bash
# bench_torch.sh - tiergnn vs PyTorch: the same 3-layer GraphSAGE on the same sampled batches,
# per-batch training step time in interleaved rounds (bench/README.md, "PyTorch comparison").
#
#   bench/bench_torch.sh [--build build-tb] [--data data/g1m] [--dir data/torch-batches]
#                        [--rounds 6] [--passes 2] [--threads "1 2"] [--dropouts "0.5 0"]
#                        [--aggrs coo] [--modes "stock tuned"] [--python /usr/bin/python3]
#
# 1. Generates the 1M-node dataset with BUILD/tiergnn if --data does not exist (the command of
#    the README), and dumps its first 4 training batches (batch 1024, fanouts 10,10,10) with
#    `BUILD/bench_torch dump` unless --dir already holds a dump.
# 2. Checks, for every --aggrs, that torch computes what tiergnn computes on batch 0 with
#    tiergnn's initial weights (`bench_torch.py check`; stops on a mismatch).
# 3. Runs --rounds rounds. A round runs, for every thread count and dropout, one process of each
#    program (`bench_torch time`, then `bench_torch.py time` per aggregation and mode), each
#    timing --passes passes over the 4 batches after a warm-up pass; odd rounds run the list
#    backwards. So load from other processes hits every program alike.
#    Torch modes: stock = torch as installed (glibc malloc, libgomp's default spin-waiting);
#    tuned = jemalloc preloaded (needs Debian's libjemalloc2) with OMP_WAIT_POLICY=PASSIVE.
#    Both set OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to the thread count.
# 4. Prints min and median per program over all passes of all rounds and the ratios to tiergnn
#    (bench_torch.py summary); the raw RESULT lines stay in DIR/results-<date>.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build-tb
data=$here/data/g1m
dir=$here/data/torch-batches
rounds=6
passes=2
threads="1 2"
dropouts="0.5 0"
aggrs=coo
modes="stock tuned"
python=/usr/bin/python3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dropouts) dropouts=$2; shift 2 ;;
    --aggrs) aggrs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "bench_torch.sh: unknown option $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
case " $modes " in
  *" tuned "*) [ -e "$jemalloc" ] || { echo "bench_torch.sh: mode tuned needs $jemalloc (apt-get install libjemalloc2)" >&2; exit 1; } ;;
esac
py=$here/bench/bench_torch.py

if [ ! -e "$data/meta.txt" ]; then
  "$build/tiergnn" generate "$data" --nodes 1000000 --avg-degree 20 --feat-dim 128 --classes 32 --seed 1
fi
if [ ! -e "$dir/meta.txt" ]; then
  "$build/bench_torch" dump "$data" "$dir" --batches 4 --batch 1024 --fanouts 10,10,10
fi
for a in $aggrs; do
  "$python" "$py" check "$dir" --aggr "$a"
done

# One entry per process of a round: "program threads dropout [aggr mode]".
jobs=()
for t in $threads; do
  for d in $dropouts; do
    jobs+=("tiergnn $t $d")
    for a in $aggrs; do
      for m in $modes; do
        jobs+=("torch $t $d $a $m")
      done
    done
  done
done

run_job() {
  local prog=$1 t=$2 d=$3 a=${4:-} m=${5:-}
  if [ "$prog" = tiergnn ]; then
    "$build/bench_torch" time "$dir" --threads "$t" --passes "$passes" --dropout "$d"
  elif [ "$m" = tuned ]; then
    OMP_WAIT_POLICY=PASSIVE LD_PRELOAD=$jemalloc MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 \
      "$python" "$py" time "$dir" --threads "$t" --passes "$passes" --dropout "$d" --aggr "$a"
  else
    "$python" "$py" time "$dir" --threads "$t" --passes "$passes" --dropout "$d" --aggr "$a"
  fi
}

out=$dir/results-$(date +%Y%m%d-%H%M%S).txt
{
  echo "# bench_torch.sh $(date -Is) on $(nproc) CPU(s): $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "# rounds $rounds, passes $passes, threads $threads, dropouts $dropouts, aggrs $aggrs, modes $modes"
} | tee "$out"
n=${#jobs[@]}
for ((r = 0; r < rounds; r++)); do
  read -r l1 _ < /proc/loadavg
  echo "# round $((r + 1))/$rounds, load average $l1" | tee -a "$out"
  for ((i = 0; i < n; i++)); do
    j=$i
    if ((r % 2)); then j=$((n - 1 - i)); fi
    # shellcheck disable=SC2086
    run_job ${jobs[$j]} | grep -E '^RESULT' | tee -a "$out"
  done
done
read -r l1 l5 l15 _ < /proc/loadavg
echo "# load average at the end: $l1 $l5 $l15" | tee -a "$out"
"$python" "$py" summary "$out"
echo "raw results: $out"
