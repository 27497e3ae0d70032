#!/usr/bin/env bash
# dist.sh - data-parallel training on one machine (docs/DISTRIBUTED.md): `mpirun -np K tiergnn
# train` on the shared bench graph for K = 1, 2, 4, 8 ranks of --threads 2 each, and per K the
# epoch times and the share of each step spent in the gradient all-reduce. Builds tiergnn and
# tiergnn-mpi from this tree (against the Debian packages of --debs, OpenMPI's included, unpacked
# with dpkg -x where the machine has no package mirror), generates the graph, runs. Under 10
# minutes on 16 cores; see bench/gpu/README.md, "Data-parallel ranks".
#
#   bench/gpu/dist.sh [--debs DIR] [--nodes 4000000] [--ranks "1 2 4 8"] [--threads 2]
#                     [--strategy diskgnn] [--mem 4G] [--epochs 2] [--batch-size 1000]
#                     [--work DIR] [--data DIR] [--tiergnn BIN] [--run-timeout 150] [--jobs N]
#
# --mem is each rank's budget (K ranks use K times it). --tiergnn: a build made before, with
# tiergnn-mpi beside it (no build step). The CPU test of the flow, on a small graph:
#   bench/gpu/dist.sh --nodes 200000 --ranks "1 2" --threads 1 --tiergnn build/tiergnn
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
nodes=4000000 ranks="1 2 4 8" threads=2 strategy=diskgnn mem=4G epochs=2 bs=1000
work=${TMPDIR:-/tmp}/tiergnn-dist data="" debs="" tiergnn="" run_timeout=150 jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --debs) debs=$2 ;;
    --nodes) nodes=$2 ;;
    --ranks) ranks=$2 ;;
    --threads) threads=$2 ;;
    --strategy) strategy=$2 ;;
    --mem) mem=$2 ;;
    --epochs) epochs=$2 ;;
    --batch-size) bs=$2 ;;
    --work) work=$2 ;;
    --data) data=$2 ;;
    --tiergnn) tiergnn=$2 ;;
    --run-timeout) run_timeout=$2 ;;
    --jobs) jobs=$2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
t0=$(date +%s)
log() { echo "dist.sh [$(($(date +%s) - t0)) s]: $*" >&2; }
mkdir -p "$work"
out=$work/results-dist
rm -rf "$out"
mkdir -p "$out"

# ---------------------------------------------------------------- build
# The packages unpacked into WORK/sysroot: the libraries, OpenMPI's mpirun (its Debian name,
# mpirun.openmpi: dpkg -x sets up no alternatives) and OPAL_PREFIX so that OpenMPI finds its
# plugins and help files under the sysroot rather than /usr.
mpirun=$(command -v mpirun || true)
if [ -n "$debs" ]; then
  sysroot=$work/sysroot
  rm -rf "$sysroot"
  for d in "$debs"/*.deb; do dpkg -x "$d" "$sysroot"; done
  lib=$sysroot/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_SYSROOT_DIR=$sysroot
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$lib/openblas-pthread/pkgconfig:$sysroot/usr/share/pkgconfig
  export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/openmpi/lib:$sysroot/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ -x "$sysroot/usr/bin/mpirun.openmpi" ]; then
    export OPAL_PREFIX=$sysroot/usr
    mpirun=$sysroot/usr/bin/mpirun.openmpi
  fi
  log "unpacked $(ls "$debs"/*.deb | wc -l) Debian packages into $sysroot"
fi
[ -n "$mpirun" ] || { echo "dist.sh: no mpirun (fetch-debs.sh --mpi, then --debs DIR)" >&2; exit 1; }
if [ -z "$tiergnn" ]; then
  cmake_extra=()
  if [ -n "$debs" ]; then
    cmake_extra=(-DCMAKE_PREFIX_PATH="$sysroot/usr" -DCMAKE_LIBRARY_PATH="$lib"
      -DCMAKE_INCLUDE_PATH="$sysroot/usr/include")
    # FindMPI asks the wrapper compiler, which OPAL_PREFIX relocates to the sysroot
    [ -x "$sysroot/usr/bin/mpicc.openmpi" ] && cmake_extra+=(-DMPI_C_COMPILER="$sysroot/usr/bin/mpicc.openmpi")
  fi
  log "building tiergnn and tiergnn-mpi"
  cmake -S "$root" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DTG_PYTHON=OFF \
    "${cmake_extra[@]}" >"$out/cmake.log" 2>&1 || { tail -n 30 "$out/cmake.log" >&2; exit 1; }
  cmake --build "$work/build" -j "$jobs" --target tiergnn_cli tiergnn_cli_mpi >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; exit 1; }
  tiergnn=$work/build/tiergnn
fi
mpi_cli=$(dirname "$tiergnn")/tiergnn-mpi
[ -x "$mpi_cli" ] || { echo "dist.sh: no $mpi_cli (a build without MPI: see $out/cmake.log)" >&2; exit 1; }
missing=$(ldd "$mpi_cli" "$mpirun" 2>/dev/null | grep 'not found' | sort -u || true)
[ -z "$missing" ] || { echo "dist.sh: libraries not found (add their packages to --debs):" >&2; echo "$missing" >&2; exit 1; }

# ---------------------------------------------------------------- the graph
data=${data:-$work/g$nodes}
if [ ! -f "$data/meta.txt" ]; then
  log "generating $data ($nodes nodes, the shared bench's settings)"
  "$tiergnn" -q generate "$data" --nodes "$nodes" --avg-degree 15 --feat-dim 128 --classes 32 \
    --train-frac 0.01 --valid-frac 0.005 --test-frac 0.005 --seed 1 --overwrite
fi

# ---------------------------------------------------------------- the runs
# Every rank unbound (--bind-to none: OpenMPI binds each of 2 ranks to one core otherwise, and
# a rank runs --threads compute threads and its sampler threads). Evaluation on 2000 sampled
# nodes per split, so that the epochs, not a full-graph forward, make the time. K = 1 goes
# first: it builds the strategy's derived files, which the later runs find.
mpi_flags=(--bind-to none --oversubscribe)
[ "$(id -u)" = 0 ] && mpi_flags+=(--allow-run-as-root)
json_num() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p" <<<"$2"; }
report=$out/report.md
{
  echo "mpirun -np K tiergnn train, $(nproc) cores, $(date -u '+%Y-%m-%d %H:%M UTC'),"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown); graph $data;"
  echo "sage 3 x 256, fanouts 10,10,10, batch $bs per rank, strategy $strategy, --mem $mem and"
  echo "--threads $threads per rank, $epochs epoch(s). A step trains K batches (one per rank)."
  echo
  echo "| K | epoch | time s | steps | all-reduce s | all-reduce share | ms per step | batches/s |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$report"
for K in $ranks; do
  run=$work/run-k$K
  rm -rf "$run"
  log "K = $K: mpirun -np $K (--threads $threads each)"
  rc=0
  timeout -k 10 "$run_timeout" "$mpirun" "${mpi_flags[@]}" -np "$K" "$tiergnn" train "$data" \
    --out "$run" --model sage --layers 3 --hidden 256 --fanouts 10,10,10 --batch-size "$bs" \
    --epochs "$epochs" --threads "$threads" --strategy "$strategy" --mem "$mem" \
    --eval-fanouts train --eval-max-nodes 2000 --json >"$out/k$K.json" 2>"$out/k$K.log" || rc=$?
  if [ $rc -ne 0 ]; then
    log "K = $K failed (exit $rc): $(grep -h 'tiergnn: ' "$out/k$K.log" | head -n 2 | tr '\n' ' ')"
    echo "| $K | failed (exit $rc, $out/k$K.log) | | | | | | |" >>"$report"
    continue
  fi
  grep '"epoch":' "$out/k$K.json" | while read -r line; do
    e=$(json_num epoch "$line") t=$(json_num time_s "$line") b=$(json_num batches "$line")
    a=$(json_num allreduce_s "$line")
    a=${a:-0}
    # batches: rank 0's; a step is one batch per rank
    awk -v K="$K" -v e="$e" -v t="$t" -v b="$b" -v a="$a" 'BEGIN {
      printf "| %d | %d | %.2f | %d | %.3f | %.1f %% | %.2f | %.1f |\n",
        K, e, t, b, a, (t > 0 ? 100 * a / t : 0), (b > 0 ? 1000 * a / b : 0), (t > 0 ? K * b / t : 0) }'
  done >>"$report"
done
log "done: $report"
cat "$report"
