#!/usr/bin/env bash
# bench_generate.sh - how fast `tiergnn generate` writes, relative to a plain sequential write
# on the same disk, and how much memory it takes relative to --mem.
#
#   bench/bench_generate.sh [WORKDIR]
#
# In WORKDIR (default ./bench-generate-tmp, on the disk being measured):
#   1. dd writes as many bytes as the dataset will have, sequentially, twice: with O_DIRECT
#      (oflag=direct, the disk's raw rate; generate writes its big files with O_DIRECT) and
#      through the page cache with an fsync at the end (conv=fdatasync). The ratio uses the
#      better of the two.
#   2. tiergnn generate under GNU time: wall time, CPU time, peak RSS, bytes written by the
#      process (dataset + edge-sort run files).
#   3. dd oflag=direct once more, right after generate (the disk's rate drifts within minutes).
#   4. tiergnn verify on the result (a fast broken dataset is no result) and tiergnn info.
#   5. Prints the figures and one markdown table row for bench/README.md: the ratio against the
#      best of the three dd runs, and against the mean of the two direct runs.
# Everything in WORKDIR is deleted at the end unless KEEP=1.
#
# Environment: TG_BIN (default build/tiergnn), NODES (10000000), DEGREE (20.3: 200M edges
# after the 1.4% repeats are dropped at 10M nodes), DIM (128),
# CLASSES (32), DTYPE (f32), MEM (1G), THREADS (0 = all CPUs), SEED (1).
set -euo pipefail

WORK=${1:-$PWD/bench-generate-tmp}
BIN=${TG_BIN:-build/tiergnn}
NODES=${NODES:-10000000}
DEGREE=${DEGREE:-20.3}
DIM=${DIM:-128}
CLASSES=${CLASSES:-32}
DTYPE=${DTYPE:-f32}
MEM=${MEM:-1G}
THREADS=${THREADS:-0}
SEED=${SEED:-1}
TIME=/usr/bin/time

[ -x "$BIN" ] || { echo "bench_generate: $BIN not found (build first or set TG_BIN)" >&2; exit 1; }
[ -x "$TIME" ] || { echo "bench_generate: needs GNU time at $TIME" >&2; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

# Expected dataset bytes (edges before repeats are dropped: an upper bound, close enough to
# size the dd run).
ESZ=4
[ "$NODES" -ge 4294967296 ] && ESZ=8
FSZ=4
[ "$DTYPE" = f16 ] && FSZ=2
BYTES=$(python3 -c "
n, k, d = $NODES, $DEGREE, $DIM
print(int(8 * (n + 1) + $ESZ * n * k + $FSZ * n * d + 4 * n + $ESZ * n))")
COUNT=$(( (BYTES + 8388607) / 8388608 ))

rate() { python3 -c "print('%.0f' % (($1) / ($2) / 1e6))"; } # bytes seconds -> MB/s

echo "== machine"
echo "cpus: $(nproc), RAM: $(free -g | awk '/Mem:/ {print $2}') GiB, load: $(cut -d' ' -f1-3 /proc/loadavg)"
df -h "$WORK" | tail -1

dd_run() { # dd_run FLAG: writes COUNT x 8 MiB with that flag, prints MB/s
    local t0 t1
    sync
    t0=$(date +%s.%N)
    dd if=/dev/zero of="$WORK/dd.bin" bs=8M count="$COUNT" "$1" status=none
    t1=$(date +%s.%N)
    rm -f "$WORK/dd.bin"
    rate "$COUNT * 8388608" "$t1 - $t0"
}

echo "== dd: $COUNT x 8 MiB to $WORK"
DD_DIRECT=$(dd_run oflag=direct)
DD_SYNC=$(dd_run conv=fdatasync)
DD_BEST=$(( DD_DIRECT > DD_SYNC ? DD_DIRECT : DD_SYNC ))
echo "dd oflag=direct: $DD_DIRECT MB/s; dd conv=fdatasync: $DD_SYNC MB/s"

echo "== tiergnn generate --nodes $NODES --avg-degree $DEGREE --feat-dim $DIM --classes $CLASSES --feat-dtype $DTYPE --mem $MEM"
sync
"$TIME" -f "%e %U %S %M %O" -o "$WORK/time.txt" \
    "$BIN" generate "$WORK/ds" --nodes "$NODES" --avg-degree "$DEGREE" --feat-dim "$DIM" \
    --classes "$CLASSES" --feat-dtype "$DTYPE" --mem "$MEM" --threads "$THREADS" --seed "$SEED" \
    2> >(tee "$WORK/gen.log" >&2)
read -r WALL USR SYS RSS_KB OUT_BLOCKS < "$WORK/time.txt"

# The disk's rate drifts by up to 2x within minutes on this VM (the host caches writes): dd runs
# again right after generate, and the ratio is also given against the mean of the two direct
# runs, the disk's rate around the time generate ran. The headline ratio stays the strict one,
# against the best dd of all.
echo "== dd again, right after generate"
DD_DIRECT2=$(dd_run oflag=direct)
echo "dd oflag=direct: $DD_DIRECT2 MB/s"
DD_BEST=$(( DD_DIRECT2 > DD_BEST ? DD_DIRECT2 : DD_BEST ))
DD_MEAN=$(( (DD_DIRECT + DD_DIRECT2) / 2 ))
DS_BYTES=$(find "$WORK/ds" -type f -name '*.bin' -printf '%s\n' | awk '{s += $1} END {print s}')
GEN_RATE=$(rate "$DS_BYTES" "$WALL")
RATIO=$(python3 -c "print('%.2f' % ($GEN_RATE / $DD_BEST))")
RATIO_DIRECT=$(python3 -c "print('%.2f' % ($GEN_RATE / $DD_DIRECT))")
RATIO_MEAN=$(python3 -c "print('%.2f' % ($GEN_RATE / $DD_MEAN))")
MEM_BYTES=$(python3 -c "
s='$MEM'.upper().rstrip('B').rstrip('I'); m={'K':1<<10,'M':1<<20,'G':1<<30,'T':1<<40}
print(int(float(s[:-1]) * m[s[-1]]) if s[-1] in m else int(s))")
RSS=$(( RSS_KB * 1024 ))
EDGES=$(awk -F' = ' '/^num_edges/ {print $2}' "$WORK/ds/meta.txt")

echo "== tiergnn verify"
T0=$(date +%s.%N)
"$BIN" --quiet verify "$WORK/ds"
T1=$(date +%s.%N)
VERIFY_RATE=$(rate "$DS_BYTES" "$T1 - $T0")
echo "== tiergnn info"
"$BIN" info "$WORK/ds" | sed -n '/^nodes/,/^labels/p'

echo "== results"
python3 - <<EOF
wall, usr, sys_, rss, mem = $WALL, $USR, $SYS, $RSS, $MEM_BYTES
dsb, outb = $DS_BYTES, $OUT_BLOCKS * 512
print(f"dataset: $NODES nodes, $EDGES edges, D = $DIM $DTYPE: {dsb / 1e9:.2f} GB")
print(f"generate: {wall:.1f} s wall, {usr:.1f} s user + {sys_:.1f} s system CPU")
print(f"  throughput {dsb / wall / 1e6:.0f} MB/s = {$RATIO} x the best dd ({$DD_BEST} MB/s), "
      f"{$RATIO_DIRECT} x dd oflag=direct before, {$RATIO_MEAN} x the mean of dd oflag=direct "
      f"before and after ({$DD_MEAN} MB/s)")
print(f"  bytes written incl. edge-sort runs: {outb / 1e9:.2f} GB ({outb / dsb:.2f} x the dataset)")
print(f"  peak RSS {rss / 2**20:.0f} MiB = {rss / mem:.2f} x --mem $MEM")
print(f"verify: {$VERIFY_RATE} MB/s")
print()
print("| nodes | edges | D | wall s | CPU s | MB/s | dd direct before / after MB/s | dd fdatasync MB/s | ratio (best dd) | ratio (mean direct) | peak RSS MiB | --mem |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
print(f"| $NODES | $EDGES | $DIM $DTYPE | {wall:.1f} | {usr + sys_:.1f} | {dsb / wall / 1e6:.0f} | "
      f"$DD_DIRECT / $DD_DIRECT2 | $DD_SYNC | {$RATIO} | {$RATIO_MEAN} | {rss / 2**20:.0f} | $MEM |")
EOF
