#!/usr/bin/env bash
# default_path.sh - the planner's second acceptance point: `tiergnn train` on the shared bench
# with --mem 1200M and no --strategy, against the fastest exact strategy (diskgnn on this bench),
# each run cold in its own cgroup of --mem, alternated so that both see the same machine.
#
#   bench/plan/default_path.sh [ROUNDS]      (default 2: d a d a d, diskgnn first and last)
#
# Environment: TG_BIN (build/tiergnn), DATA (data/g4m), OUT (runs/default-path), FASTEST
# (diskgnn), MEMBUDGET (../shared/tools/membudget). Each run: 2 epochs, SAGE 3 x 256, fanouts
# 10,10,10, batches of 1000, 2 threads, the evaluation after the last epoch on 5000 sampled
# nodes (outside the epochs). Prints per run: the strategy the run took, its profile (auto),
# epoch 1, epoch 2, train_time_s and the test accuracy; then the means. 1.5-2 minutes a run.
set -euo pipefail

BIN=${TG_BIN:-build/tiergnn}
DATA=${DATA:-data/g4m}
OUT=${OUT:-runs/default-path}
FASTEST=${FASTEST:-diskgnn}
MB=${MEMBUDGET:-../shared/tools/membudget}
ROUNDS=${1:-2}
[ -x "$BIN" ] || { echo "default_path.sh: $BIN not found (build first or set TG_BIN)" >&2; exit 1; }
[ -x "$MB" ] || { echo "default_path.sh: $MB not found (set MEMBUDGET)" >&2; exit 1; }
[ -f "$DATA/meta.txt" ] || { echo "default_path.sh: no dataset at $DATA" >&2; exit 1; }
mkdir -p "$OUT"

run() { # NAME [--strategy S]
    local name=$1
    shift
    rm -rf "${OUT:?}/$name"
    "$MB" --evict "$DATA" 1200M -- "$BIN" train "$DATA" --out "$OUT/$name" --mem 1200M \
        --threads 2 --batch-size 1000 --model sage --layers 3 --hidden 256 --fanouts 10,10,10 \
        --epochs 2 --eval-every 0 --eval-fanouts train --eval-max-nodes 5000 --seed 1 --json \
        "$@" >"$OUT/$name.jsonl" 2>"$OUT/$name.log" || {
        echo "default_path.sh: $name failed: $(tail -1 "$OUT/$name.log")" >&2
        exit 1
    }
}

order=("d0")
for ((i = 1; i <= ROUNDS; i++)); do order+=("a$i" "d$i"); done
for name in "${order[@]}"; do
    echo "== $name ($(date +%H:%M:%S))" >&2
    if [ "${name:0:1}" = d ]; then run "$name" --strategy "$FASTEST"; else run "$name"; fi
done

/usr/bin/python3 - "$OUT" "${order[@]}" <<'EOF'
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
rows = {}
print("| run | strategy | profile s | epoch 1 s | epoch 2 s | train_time_s | test acc |")
print("|---|---|--:|--:|--:|--:|--:|")
for n in names:
    lines = [json.loads(l) for l in open(os.path.join(out, n + ".jsonl")) if l.startswith("{")]
    ep = {l["epoch"]: l for l in lines if "epoch" in l and "time_s" in l}
    fin = [l for l in lines if "train_time_s" in l][-1]
    prof = ""
    plan = os.path.join(out, n, "plan.json")
    if os.path.exists(plan):
        prof = "%.2f" % json.load(open(plan))["profile"]["total_s"]
    row = (ep[1]["time_s"], ep[2]["time_s"], fin["train_time_s"])
    rows.setdefault(n[0], []).append(row)
    print("| %s | %s | %s | %.2f | %.2f | %.2f | %.4f |" % (n, fin["strategy"], prof, *row,
                                                         fin["test_acc"]))
mean = lambda k, i: sum(r[i] for r in rows[k]) / len(rows[k])
for i, what in ((2, "train_time_s"), (1, "epoch 2")):
    a, d = mean("a", i), mean("d", i)
    print("\n%s: default %.2f s (mean of %d) against the fastest exact %.2f s (mean of %d): %.3fx"
          % (what, a, len(rows["a"]), d, len(rows["d"]), a / d))
EOF
