#!/usr/bin/env bash
# workloads.sh - the planner's acceptance bench: generated workloads that favour different
# strategies, every strategy and `auto` benched on each, cold, in a cgroup of --mem.
#
#   bench/plan/workloads.sh [NAME...]        (default: every workload below)
#   python3 bench/plan/errors.py runs/plan31  (predicted against measured, auto's choice)
#
# Each workload is generated under $DATA (default data/plan31) when absent, then benched with
# `tiergnn bench` (2 epochs: the second is the steady epoch the prediction is compared with)
# into $OUT/NAME (default runs/plan31/NAME). The same model for all: SAGE 2 x 128, fanouts
# 10,10, batches of 512, $THREADS threads (default 2); the evaluation after the last epoch (not
# part of an epoch's time) on 1000 sampled nodes per split. 1-4 minutes per workload on 2
# cores (mmap's runs the longest).
#
# Environment: TG_BIN (build/tiergnn), DATA, OUT, THREADS, EPOCHS (2), STRATS (the strategies
# and auto), EXTRA (more arguments for every `tiergnn bench`).
set -euo pipefail

BIN=${TG_BIN:-build/tiergnn}
DATA=${DATA:-data/plan31}
OUT=${OUT:-runs/plan31}
THREADS=${THREADS:-2}
EPOCHS=${EPOCHS:-2}
STRATS=${STRATS:-auto,memory,mmap,gnndrive,pagraph,ginex,diskgnn,hier,gids}
[ -x "$BIN" ] || { echo "workloads.sh: $BIN not found (build first or set TG_BIN)" >&2; exit 1; }

# name | generate options | bench options (--mem and what caps the epoch)
#   ram:    features fit loosely: memory (and mmap once the file is cached) should win
#   wide:   rows of 512 floats, the file twice --mem: few merged reads of large rows
#   narrow: 1M nodes, rows of 32 floats, 10% training nodes (120 of its 196 batches an epoch),
#           tight --mem: the neighbour lists and the sampling dominate, rows are small
#   few:    0.5% training nodes (6 batches): the preparation of a strategy weighs most
# Session 24 made ram's, wide's and narrow's epochs 2.5-4x longer (training fraction, batches):
# at 0.2-1 s an epoch, a tenth of a second of noise was 10-50% of the fastest strategies' epochs.
WORKLOADS=(
    "ram|--nodes 300000 --avg-degree 20 --feat-dim 128 --train-frac 0.50|--mem 1G"
    "wide|--nodes 300000 --avg-degree 20 --feat-dim 512 --train-frac 0.08|--mem 320M"
    "narrow|--nodes 1000000 --avg-degree 10 --feat-dim 32 --train-frac 0.10|--mem 120M --batches-per-epoch 120"
    "few|--nodes 600000 --avg-degree 20 --feat-dim 256 --train-frac 0.005|--mem 300M"
)

want() {
    [ $# -eq 0 ] && return 0
    local n
    for n in "${SELECTED[@]}"; do [ "$n" = "$1" ] && return 0; done
    return 1
}
SELECTED=("$@")

mkdir -p "$DATA" "$OUT"
for w in "${WORKLOADS[@]}"; do
    IFS='|' read -r name gen bopts <<<"$w"
    if [ ${#SELECTED[@]} -gt 0 ] && ! want "$name"; then continue; fi
    ds=$DATA/$name
    # a graph generated with other options (an earlier version of this table) is made again
    if [ -f "$ds/meta.txt" ] && [ "$(cat "$ds/workload.txt" 2>/dev/null)" != "$gen" ]; then
        echo "== $name: $ds was generated with other options; generating it again" >&2
        rm -rf "$ds"
    fi
    if [ ! -f "$ds/meta.txt" ]; then
        # shellcheck disable=SC2086
        "$BIN" generate "$ds" $gen --valid-frac 0.01 --test-frac 0.01 --seed 31
        printf '%s\n' "$gen" >"$ds/workload.txt"
    fi
    echo "== $name: $gen; $bopts" >&2
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$BIN" bench "$ds" $bopts --strategies "$STRATS" --epochs "$EPOCHS" --out "$OUT/$name" \
        --overwrite --model sage --layers 2 --hidden 128 --fanouts 10,10 --batch-size 512 \
        --threads "$THREADS" --eval-fanouts train --eval-max-nodes 1000 ${EXTRA:-} || echo "workloads.sh: $name: some runs failed" >&2
    echo "== $name: $(($(date +%s) - t0)) s" >&2
done
