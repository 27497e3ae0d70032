#!/bin/bash
# The soak (docs/RELIABILITY.md, "Soak"): each strategy trains for SOAK_SECONDS under
# ../shared/tools/membudget (a cgroup limit of SOAK_MEM, page cache included, started cold) while
# this script samples, every SOAK_INTERVAL seconds, the process's resident set (VmRSS), its open
# file descriptors, its threads and the cgroup's memory.current. Then SIGINT stops the run (which
# must exit 130 with its checkpoint written), and the epochs after the first that ran whole are
# judged, in thirds:
#
#   flat   the median of the last third's epoch medians of RSS is at most the first third's plus
#          max(1%, 8 MiB); the most open descriptors of the last third are at most those of the
#          first third; the cgroup never passed its limit and nothing was killed. The largest
#          samples and the threads are reported (a sample catches an epoch's transient peaks by
#          chance; threads come and go with a run's phases), not judged.
#
# The strategies run one after the other (SOAK_PARALLEL=1: all at once, each under its own
# cgroup; slower epochs, the same question). Usage (make soak sets these from its variables):
#
#     TIERGNN=build/tiergnn SOAK_DATASET=data/demo-1m SOAK_MEM=256M \
#       SOAK_STRATEGIES="gnndrive diskgnn" SOAK_SECONDS=3600 tests/soak/run.sh
#
# SOAK_TRAIN: the training flags (default: the demo's model); SOAK_ARGS_<strategy>: that
# strategy's own flags (e.g. SOAK_ARGS_hier="--parts 1024"). Output under SOAK_WORK (default
# build/soak): STRATEGY/samples.tsv (t_s epoch rss_kib fds threads cgroup_bytes:
# memory.current or memory.usage_in_bytes, page cache included), STRATEGY/train.log,
# STRATEGY/per-epoch.tsv and summary.md (one row per strategy; also printed). Exit status 1 when
# a strategy is not flat or its run failed. SOAK_JUDGE_ONLY=1 judges the runs already in
# SOAK_WORK again without running anything.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
TIERGNN=${TIERGNN:-$root/build/tiergnn}
MEMBUDGET=${SOAK_MEMBUDGET:-$root/../shared/tools/membudget}
DS=${SOAK_DATASET:-$root/data/demo-1m}
MEM=${SOAK_MEM:-256M}
STRATS=${SOAK_STRATEGIES:-gnndrive diskgnn}
SECS=${SOAK_SECONDS:-3600}
EVERY=${SOAK_INTERVAL:-5}
WORK=${SOAK_WORK:-$root/build/soak}
TRAIN=${SOAK_TRAIN:---model sage --layers 2 --hidden 128 --fanouts 10,5 --batch-size 1024 --eval-fanouts train --eval-max-nodes 20000 --seed 1}

die() { echo "soak: $*" >&2; exit 2; }
[ -x "$TIERGNN" ] || die "no tiergnn at $TIERGNN (build it: make build)"
[ -f "$DS/meta.txt" ] || die "no dataset at $DS (meta.txt missing; make soak generates the demo's)"
[ -x "$MEMBUDGET" ] || die "no membudget at $MEMBUDGET: the soak needs its cgroup limit"
case $EVERY in '' | *[!0-9]*) die "SOAK_INTERVAL must be whole seconds, got '$EVERY'" ;; esac
case $SECS in '' | *[!0-9]*) die "SOAK_SECONDS must be whole seconds, got '$SECS'" ;; esac
mkdir -p "$WORK" || die "cannot create $WORK"

# One strategy: start it under the cgroup, sample until SECS have passed, stop it with SIGINT.
# Leaves STRATEGY/samples.tsv, train.log, rc.
soak_one() {
    local s=$1 dir=$WORK/$1 var args mb pid cg t0 now t ep rss fds thr cur
    var=SOAK_ARGS_$s
    args=${!var:-}
    rm -rf "$dir"
    mkdir -p "$dir"
    printf 't_s\tepoch\trss_kib\tfds\tthreads\tcgroup_bytes\n' >"$dir/samples.tsv"
    echo "$TIERGNN train $DS --strategy $s $args --mem $MEM --epochs 1000000 $TRAIN --out $dir/run" >"$dir/command"
    # shellcheck disable=SC2086
    "$MEMBUDGET" --evict "$DS" "$MEM" -- "$TIERGNN" train "$DS" --strategy "$s" $args --mem "$MEM" \
        --epochs 1000000 $TRAIN --out "$dir/run" >"$dir/train.out" 2>"$dir/train.log" &
    mb=$!
    t0=$(date +%s)
    pid=
    for _ in $(seq 100); do
        pid=$(pgrep -P "$mb" | head -n 1)
        [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$TIERGNN")" ] && break
        pid=
        sleep 0.1
    done
    [ -n "$pid" ] || { wait "$mb"; echo "$?" >"$dir/rc"; echo "soak: $s: tiergnn did not start (see $dir/train.log)" >&2; return; }
    # the cgroup's usage: memory.usage_in_bytes under cgroup v1 (a memory: line), else v2's
    cg=$(sed -n 's/^[0-9]*:memory://p' "/proc/$pid/cgroup" 2>/dev/null)
    if [ -n "$cg" ]; then
        cg=/sys/fs/cgroup/memory${cg%/}/memory.usage_in_bytes
    else
        cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$pid/cgroup" 2>/dev/null)
        cg=${cg%/}/memory.current
    fi
    echo "soak: $s: pid $pid, cgroup $cg, $SECS s, sampling every $EVERY s ($dir)" >&2
    while kill -0 "$pid" 2>/dev/null; do
        now=$(date +%s)
        t=$((now - t0))
        [ "$t" -ge "$SECS" ] && break
        rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
        thr=$(awk '/^Threads:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
        fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        cur=$(cat "$cg" 2>/dev/null || echo 0)
        ep=$(grep -c '^epoch [0-9]*/' "$dir/train.log")
        [ -n "$rss" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$ep" "$rss" "$fds" "$thr" "$cur" >>"$dir/samples.tsv"
        sleep "$EVERY"
    done
    kill -INT "$pid" 2>/dev/null
    wait "$mb"
    echo "$?" >"$dir/rc"
}

# The verdict of one strategy from its samples: one summary.md row; per-epoch.tsv.
judge() {
    local s=$1 dir=$WORK/$1 rc limit peak epochs
    rc=$(cat "$dir/rc")
    limit=$(sed -n 's/^membudget: limit=\([0-9]*\) .*/\1/p' "$dir/train.log" | tail -n 1)
    peak=$(sed -n 's/^membudget: limit=[0-9]* peak=\([0-9a-z]*\) .*/\1/p' "$dir/train.log" | tail -n 1)
    epochs=$(grep -c '^epoch [0-9]*/' "$dir/train.log")
    awk -F'\t' 'NR > 1 { e = $2; if (!(e in r) || $3 > r[e]) r[e] = $3; if (!(e in f) || $4 > f[e]) f[e] = $4;
                         if (!(e in c) || $6 > c[e]) c[e] = $6; if (!(e in t0)) t0[e] = $1; t1[e] = $1; n = e > n ? e : n }
        END { print "epochs_done\tfrom_s\tto_s\tmax_rss_kib\tmax_fds\tmax_cgroup_bytes";
              for (e = 0; e <= n; e++) if (e in r) printf "%d\t%d\t%d\t%d\t%d\t%d\n", e, t0[e], t1[e], r[e], f[e], c[e] }' \
        "$dir/samples.tsv" >"$dir/per-epoch.tsv"
    # The epochs after the first that ran whole (the last one was cut by SIGINT), in thirds: the
    # median RSS of each epoch (its working level: a leak raises it) compared third against
    # third; the largest samples are reported too, but a 5 s sample catches an epoch's transient
    # peaks by chance, so they are not judged.
    awk -F'\t' -v s="$s" -v rc="$rc" -v limit="${limit:-0}" -v peak="${peak:-?}" -v epochs="$epochs" '
        function sort(a, n,    i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
        function median(a, lo, hi,    b, i, n) { n = 0; for (i = lo; i <= hi; i++) b[++n] = a[i]; sort(b, n); return b[int((n + 1) / 2)] }
        NR > 1 && $2 >= 1 { n++; e[n] = $2; t[n] = $1; r[n] = $3; f[n] = $4; h[n] = $5; last = $2 }
        END {
            for (i = 1; i <= n; i++) if (e[i] < last) {
                k = e[i]; c[k]++; v[k, c[k]] = r[i]; tm[k] += t[i]
                if (r[i] > mx[k]) mx[k] = r[i]; if (f[i] > fx[k]) fx[k] = f[i]; if (h[i] > hx[k]) hx[k] = h[i]
            }
            E = 0
            for (k = 1; k < last; k++) if (c[k]) {
                E++; delete w; for (i = 1; i <= c[k]; i++) w[i] = v[k, i]
                sort(w, c[k]); md[E] = w[int((c[k] + 1) / 2)]; tx[E] = tm[k] / c[k]; mxe[E] = mx[k]; fxe[E] = fx[k]; hxe[E] = hx[k]
            }
            if (E < 3) { printf "| %s | %d | %s | too few whole epochs after the first (%d) | | | | | | | NOT JUDGED |\n", s, epochs, rc, E; exit 3 }
            a = int(E / 3); m1 = median(md, 1, a); m3 = median(md, E - a + 1, E)
            r1 = f1 = h1 = r3 = f3 = h3 = 0
            for (j = 1; j <= a; j++) { if (mxe[j] > r1) r1 = mxe[j]; if (fxe[j] > f1) f1 = fxe[j]; if (hxe[j] > h1) h1 = hxe[j] }
            for (j = E - a + 1; j <= E; j++) { if (mxe[j] > r3) r3 = mxe[j]; if (fxe[j] > f3) f3 = fxe[j]; if (hxe[j] > h3) h3 = hxe[j] }
            # least-squares slope of the epoch medians against time, MiB per hour
            for (j = 1; j <= E; j++) { st += tx[j]; sr += md[j] }
            mt = st / E; mr = sr / E
            for (j = 1; j <= E; j++) { num += (tx[j] - mt) * (md[j] - mr); den += (tx[j] - mt) ^ 2 }
            slope = den > 0 ? num / den * 3600 / 1024 : 0
            tol = m1 / 100; if (tol < 8192) tol = 8192
            ok = (m3 <= m1 + tol) && (f3 <= f1) && (rc == 130 || rc == 0) && peak != "?" && (limit == 0 || peak + 0 <= limit + 0)
            printf "| %s | %d | %s | %.1f -> %.1f MiB (%+.1f MiB/h) | %.1f -> %.1f MiB | %d -> %d | %d -> %d | %.0f MiB | %.0f MiB | %d | %s |\n",
                s, epochs, rc, m1 / 1024, m3 / 1024, slope, r1 / 1024, r3 / 1024, f1, f3, h1, h3, limit / 1048576, (peak + 0) / 1048576, E,
                ok ? "flat" : "NOT FLAT"
            exit ok ? 0 : 1
        }' "$dir/samples.tsv"
}

if [ "${SOAK_JUDGE_ONLY:-0}" = 1 ]; then
    : # the runs are in SOAK_WORK already: judge them again
elif [ "${SOAK_PARALLEL:-0}" = 1 ]; then
    echo "soak: $STRATS on $DS under a $MEM cgroup, $SECS s each, sampling every $EVERY s" >&2
    for s in $STRATS; do soak_one "$s" & done
    wait
else
    echo "soak: $STRATS on $DS under a $MEM cgroup, $SECS s each, sampling every $EVERY s" >&2
    for s in $STRATS; do soak_one "$s"; done
fi
status=0
{
    echo "| strategy | epochs | exit | RSS, epoch medians: first -> last third (slope) | RSS, largest sample: first -> last third | open fds | threads | limit | cgroup peak | epochs judged | verdict |"
    echo "|---|--:|--:|---|---|---|---|--:|--:|--:|---|"
    for s in $STRATS; do judge "$s" || status=1; done
} | tee "$WORK/summary.md"
grep -q 'NOT' "$WORK/summary.md" && status=1
exit $status
