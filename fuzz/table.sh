#!/bin/sh
# Prints docs/RELIABILITY.md's fuzz Results table (markdown) from a ledger that fuzz/run.sh
# wrote, one row per target in the order given (default: every target with a row):
#
#     fuzz/table.sh build-fuzz/ledger.tsv [TARGET...]
#
# A ledger row is one run (state ok, interrupted or CRASHED ...), or a "carried: N runs ..., K
# crashed ..." row that stands for N earlier runs whose own rows are gone (a ledger lives in an
# ignored build folder, so it does not outlive its machine; the tree keeps a copy,
# docs/fuzz-ledger.tsv, and carried rows sum what an earlier copy held). Its commit field may
# list several commits, comma-separated.
set -u
[ $# -ge 1 ] || { echo "usage: $0 LEDGER [TARGET...]" >&2; exit 2; }
ledger=$1
shift
[ -r "$ledger" ] || { echo "$0: cannot read $ledger" >&2; exit 1; }
awk -F'\t' -v order="$*" '
function group(n,   s, i, out) {  # 1234567 -> 1,234,567
    s = sprintf("%d", n); out = ""
    while (length(s) > 3) { out = "," substr(s, length(s) - 2) out; s = substr(s, 1, length(s) - 3) }
    return s out
}
NR == 1 { next }
NF < 8 { printf "%s: line %d: expected 8 tab-separated fields, found %d\n", FILENAME, NR, NF > "/dev/stderr"; bad = 1; exit 1 }
{
    t = $3
    if (!(t in runs)) { seen[++nt] = t; runs[t] = 0; crash[t] = 0; cpu[t] = 0; ex[t] = 0; edges[t] = 0; cl[t] = "" }
    if ($8 ~ /^carried: [0-9]+ runs/) {
        split($8, w, " "); runs[t] += w[2]
        if (match($8, /[0-9]+ crashed/)) crash[t] += substr($8, RSTART, RLENGTH - 8)
    } else {
        runs[t]++
        if ($8 ~ /^CRASHED/) crash[t]++
    }
    cpu[t] += $5; ex[t] += $7
    if ($6 ~ /^[0-9]+$/ && $6 + 0 > edges[t]) edges[t] = $6 + 0
    nc = split($2, c, ",")
    for (i = 1; i <= nc; i++) if (index(", " cl[t] ", ", ", " c[i] ", ") == 0) cl[t] = cl[t] == "" ? c[i] : cl[t] ", " c[i]
}
END {
    if (bad) exit 1
    print "| target | runs | CPU hours | of the goal (1 h) | executions | edges (most in a run) | crashes | commits |"
    print "|---|--:|--:|--:|--:|--:|--:|---|"
    n = split(order, want, " ")
    if (n == 0) for (i = 1; i <= nt; i++) want[++n] = seen[i]
    for (i = 1; i <= n; i++) {
        t = want[i]
        if (!(t in runs)) { printf "| %s | 0 | 0.00 | 0%% | 0 | - | 0 | |\n", t; continue }
        h = cpu[t] / 3600; p = h >= 1 ? 100 : int(h * 100 + 1e-6)
        printf "| %s | %d | %.2f | %d%% | %s | %d | %d | %s |\n", t, runs[t], h, p, group(ex[t]), edges[t], crash[t], cl[t]
    }
}' "$ledger"
