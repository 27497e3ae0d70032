#!/usr/bin/env bash
# cora_accuracy.sh - the Cora (Planetoid split) accuracy measurement of docs/TRAINING.md.
#
#   bench/cora_accuracy.sh [--bin build/tiergnn] [--seeds 10] [--models "gcn gat sage mlp"]
#                          [--work DIR] [--threads 1]
#
# Imports ../shared/datasets/cora (once, into WORK/cora), then trains each model once per seed
# with full neighbourhoods on all 140 training nodes per step for 200 epochs, evaluating every
# epoch; the test accuracy of a run is the one at its best-validation epoch. Prints, per model,
# mean +- sample standard deviation over the seeds of test (and validation) accuracy, and keeps
# every run's JSON lines in WORK/<model>-seed<S>.jsonl.
#
# Hyperparameters are those of the papers, not tuned on the test set:
#   gcn   Kipf & Welling 2017: 2 layers, 16 hidden, dropout 0.5, lr 0.01, weight decay 5e-4,
#         row-normalised features
#   gat   Velickovic et al. 2018: 8 heads x 8 hidden, ELU, dropout 0.6 on inputs and attention,
#         lr 0.005, weight decay 5e-4, row-normalised features
#   sage  GraphSAGE-mean with the GCN settings above (2 layers, 16 hidden)
#   mlp   the GCN settings without edges (the no-graph reference)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
bin=$here/build/tiergnn
seeds=10
models="gcn gat sage mlp"
work=${TMPDIR:-/tmp}/tiergnn-cora-accuracy
threads=1
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "cora_accuracy.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
src=${TG_SHARED_DIR:-$here/../shared}/datasets/cora
[ -x "$bin" ] || { echo "cora_accuracy.sh: $bin not found (build first: make build)" >&2; exit 1; }
[ -d "$src" ] || { echo "cora_accuracy.sh: $src not found" >&2; exit 1; }
mkdir -p "$work"
if [ ! -f "$work/cora/meta.txt" ]; then
  "$bin" import "$work/cora" --from ogb "$src" --split planetoid >&2
fi

common="--layers 2 --fanouts -1,-1 --batch-size 0 --epochs 200 --eval-every 1 \
  --checkpoint-every 0 --weight-decay 5e-4 --normalize-features --threads $threads"
flags_for() {
  case "$1" in
    gcn) echo "--model gcn --hidden 16 --dropout 0.5 --lr 0.01" ;;
    gat) echo "--model gat --hidden 64 --heads 8 --activation elu --dropout 0.6 --attn-dropout 0.6 --lr 0.005" ;;
    sage) echo "--model sage --hidden 16 --dropout 0.5 --lr 0.01" ;;
    mlp) echo "--model mlp --hidden 16 --dropout 0.5 --lr 0.01" ;;
    *) echo "cora_accuracy.sh: unknown model '$1'" >&2; exit 2 ;;
  esac
}

printf "%-6s %6s %18s %18s %8s\n" model seeds "test acc (%)" "valid acc (%)" "s/run"
for m in $models; do
  flags=$(flags_for "$m")
  tests=() valids=() t0=$(date +%s.%N)
  for s in $(seq 1 "$seeds"); do
    run=$work/$m-seed$s
    rm -rf "$run"
    # shellcheck disable=SC2086
    "$bin" --quiet train "$work/cora" $flags $common --seed "$s" --out "$run" --json \
      > "$run.jsonl"
    final=$(tail -n 1 "$run.jsonl")
    tests+=("$(sed -n 's/.*"test_acc":\([0-9.e-]*\).*/\1/p' <<< "$final")")
    valids+=("$(sed -n 's/.*"valid_acc":\([0-9.e-]*\).*/\1/p' <<< "$final")")
  done
  t1=$(date +%s.%N)
  stats() { awk '{ s += $1; q += $1 * $1; n++ } END { m = s / n; v = n > 1 ? (q - n * m * m) / (n - 1) : 0; sd = v > 0 ? sqrt(v) : 0; printf "%6.2f +- %5.2f", 100 * m, 100 * sd }'; }
  printf "%-6s %6d %18s %18s %8.1f\n" "$m" "$seeds" \
    "$(printf '%s\n' "${tests[@]}" | stats)" "$(printf '%s\n' "${valids[@]}" | stats)" \
    "$(awk -v a="$t0" -v b="$t1" -v n="$seeds" 'BEGIN { print (b - a) / n }')"
done
