#!/bin/sh
# Runs libFuzzer targets one after the other, each for FUZZ_TIME seconds on its seed corpus, and
# prints one line per target: coverage edges (libFuzzer's cov:), executions, CPU seconds and
# whether it crashed. `make fuzz` builds the targets and calls this; it can also be run alone:
#
#     FUZZ_BUILD=build-fuzz FUZZ_TIME=600 fuzz/run.sh fuzz_csv fuzz_ckpt
#
# The seeds of fuzz/corpus/TARGET are copied into FUZZ_BUILD/corpus/TARGET, which is the corpus
# the fuzzer grows (kept between runs, so repeated runs build on each other; the tree's corpus
# never changes). Crashes, leaks, timeouts and out-of-memory inputs go to
# FUZZ_BUILD/artifacts/TARGET/, the fuzzer's output to FUZZ_BUILD/logs/TARGET.log. One fuzzer
# process at a time, single-threaded. Exit status 1 when any target crashed.
#
# FUZZ_CPU=S runs a target again (a new process on the grown corpus, FUZZ_TIME seconds each)
# until this call has spent S CPU seconds on it: on a loaded machine (nice -n 19) wall seconds
# are not CPU seconds. Every run appends a row to FUZZ_BUILD/ledger.tsv (date, commit, target,
# wall s, CPU s, edges, execs, state); the totals per target over the ledger are printed at the
# end, which is what docs/RELIABILITY.md's figures come from. Ctrl-C (or SIGTERM to the fuzzer)
# ends the call with the run recorded as "interrupted". Do not pause a fuzzer (SIGSTOP, a frozen
# cgroup) to free the machine for a benchmark: libFuzzer's -timeout counts wall time, so the
# input in hand on resume is written out as a timeout; stop the call and start it again instead.
set -u
build=${FUZZ_BUILD:-build-fuzz}
time_s=${FUZZ_TIME:-60}
cpu_goal=${FUZZ_CPU:-0}
src=$(dirname "$0")
ledger=$build/ledger.tsv
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -f "$ledger" ] || printf 'date\tcommit\ttarget\twall_s\tcpu_s\tedges\texecs\tstate\n' >"$ledger"
[ $# -gt 0 ] || { echo "usage: $0 TARGET..." >&2; exit 2; }
crashed=0
ticks=$(getconf CLK_TCK)
# CPU seconds (user + system) of this shell's finished children: cutime + cstime of /proc
child_cpu() {
    awk -v t="$ticks" '{ printf "%d", ($16 + $17) / t }' /proc/$$/stat
}
for t in "$@"; do
    bin=$build/$t
    if [ ! -x "$bin" ]; then
        echo "$t: no $bin (build it first: make fuzz)" >&2
        crashed=1
        continue
    fi
    work=$build/corpus/$t
    art=$build/artifacts/$t
    log=$build/logs/$t.log
    mkdir -p "$work" "$art" "$build/logs"
    [ -d "$src/corpus/$t" ] && cp -n "$src/corpus/$t"/* "$work"/ 2>/dev/null
    spent=0
    while :; do
        before=$(ls "$art" | wc -l)
        cpu0=$(child_cpu)
        t0=$(date +%s)
        # -timeout: one input taking 10 s is a hang; -rss_limit_mb: the default 2 GiB, named
        ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
            "$bin" -max_total_time="$time_s" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$art/" "$work" >"$log" 2>&1
        rc=$?
        cpu=$(($(child_cpu) - cpu0))
        wall=$(($(date +%s) - t0))
        spent=$((spent + cpu))
        edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
        execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | cut -d' ' -f2)
        after=$(ls "$art" | wc -l)
        # 72: libFuzzer's exit on SIGINT / SIGTERM (-interrupted_exitcode): stopped, not crashed
        if [ $rc -eq 72 ]; then
            state=interrupted
        elif [ $rc -ne 0 ] || [ "$after" -gt "$before" ]; then
            state="CRASHED (exit $rc; $log, $art/)"
            crashed=1
        else
            state=ok
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$commit" "$t" "$wall" \
            "$cpu" "${edges:-?}" "${execs:-?}" "$state" >>"$ledger"
        echo "$t: edges ${edges:-?}, execs ${execs:-?}, CPU ${cpu} s, $state"
        [ "$state" = interrupted ] && break 2
        [ "$state" = ok ] && [ "$spent" -lt "$cpu_goal" ] || break
    done
done
echo "totals over $ledger (all runs so far):"
awk -F'\t' 'NR > 1 { n[$3]++; c[$3] += $5; x[$3] += $7; e[$3] = $6; if ($8 ~ /^CRASHED/) k[$3]++ }
    END { for (t in n) printf "  %s: %d runs, CPU %.2f h, execs %d, edges %s (last run), %d crashed\n",
              t, n[t], c[t] / 3600, x[t], e[t], k[t] }' "$ledger" | sort
exit $crashed
