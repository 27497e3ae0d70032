#!/usr/bin/env bash
# diskpoll.sh - the device's counters every second beside a bench, tagged with the run then
# going on: for each `tiergnn train` run a bench starts, its workload (the dataset's directory
# name) and strategy, and the device's reads completed, sectors read, milliseconds reading,
# reads in flight, milliseconds busy and weighted milliseconds (/proc/diskstats).
#
#   bench/plan/diskpoll.sh OUT [DEVICE]   (DEVICE: default vda; stops when no bench runs)
#   python3 bench/plan/diskpoll.py OUT    (per run: reads/s and reads in flight while reading)
#
# A second's reads in flight on average: its weighted milliseconds over its milliseconds.
set -euo pipefail
out=${1:?usage: diskpoll.sh OUT [DEVICE]}
dev=${2:-vda}
grep -q " $dev " /proc/diskstats || { echo "diskpoll.sh: no device $dev in /proc/diskstats" >&2; exit 1; }
: >"$out"
while pgrep -f "tiergnn bench" >/dev/null; do
    c=$(pgrep -af "tiergnn train" | grep -v membudget | head -1 || true)
    w=$(grep -o "train [^ ]*" <<<"$c" | awk '{n=split($2, p, "/"); print p[n]}' || true)
    s=$(grep -o "\-\-strategy [a-z]*" <<<"$c" | awk '{print $2}' || true)
    echo "$(date +%s.%N) ${w:-none} ${s:-none} $(awk -v d="$dev" '$3==d{print $4, $6, $7, $12, $13, $14}' /proc/diskstats)" >>"$out"
    sleep 1
done
