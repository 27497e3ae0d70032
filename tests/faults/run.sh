#!/usr/bin/env bash
# The fault and kill matrix (docs/RELIABILITY.md, "Fault and kill matrix"): every strategy, on a
# small generated dataset, under a cgroup memory limit (../shared/tools/membudget) and a timeout,
# through I/O errors and short reads, a full disk, a changed features.bin, SIGKILL and SIGINT.
# Each case must end in one clear error naming what failed (and leave a state that a run without
# the fault finishes exactly), or in a resumable state whose resumed run writes the same
# checkpoint.bin and best.bin as an uninterrupted run. Prints the table case x strategy ->
# outcome and writes it, with the details, to FAULT_OUT. `make faults` runs it:
#
#     make faults                                   # every strategy, every case
#     make faults FAULT_STRATEGIES="gnndrive hier" FAULT_CASES="kill-run sigint" FAULT_SEED=42
#     TIERGNN=build/tiergnn tests/faults/run.sh     # without make
#
# Variables: TIERGNN (the binary), FAULT_SEED (random points; printed, so that a case can be
# replayed), FAULT_ROUNDS (each case this many times with other random points, default 3),
# FAULT_STRATEGIES, FAULT_CASES (subsets; default all), FAULT_WORK (work directory, default next
# to the binary), FAULT_OUT (the table file, default FAULT_WORK/table.md), FAULT_TIMEOUT (seconds
# per run, default 60: past it a run is a hang), FAULT_MEMBUDGET (none: no cgroup limit, e.g.
# for a sanitizer build whose shadow memory the limits do not plan for).
# ENOSPC cases mount small tmpfs file systems (root only; skipped otherwise) and unmount them.
# FAULT_RANKS2 (strategies, default gnndrive; "all", or "none"): a column "S x2" for each, where
# kill-run, eio-feat, sigint and enospc-ckpt run as two ranks under mpirun (docs/DISTRIBUTED.md,
# "Faults"): rank 1 is killed, interrupted or given the I/O error; rank 0 meets the full disk.
# Exit status 1 when any case FAILs.
set -u
export LC_ALL=C

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
TIERGNN=${TIERGNN:-$root/build/tiergnn}
case $TIERGNN in /*) ;; *) TIERGNN=$PWD/$TIERGNN ;; esac
[ -x "$TIERGNN" ] || { echo "faults: no $TIERGNN (build first: make build)" >&2; exit 2; }
WORK=${FAULT_WORK:-$(dirname "$TIERGNN")/faults}
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
OUT=${FAULT_OUT:-$WORK/table.md}
SEED=${FAULT_SEED:-$(($(date +%s) % 100000))}
TIMEOUT=${FAULT_TIMEOUT:-60}
ROUNDS=${FAULT_ROUNDS:-3}
MEMBUDGET=${FAULT_MEMBUDGET:-$root/../shared/tools/membudget}
ALL_CASES="eio-feat eio-idx eio-derived short-feat short-idx short-derived short1-feat
  enospc-ckpt enospc-rundir enospc-derived enospc-infer trunc-between trunc-between-verify
  trunc-during trunc-during-verify flip-between flip-between-verify flip-between-reads
  flip-during flip-during-verify flip-during-reads trunc-derived flip-derived flip-derived-verify kill-run kill-ckpt
  kill-derived sigint sigint2"
CASES=$(tr -s ' \n' '  ' <<<"${FAULT_CASES:-$ALL_CASES}")
CASES2="kill-run eio-feat sigint enospc-ckpt" # the cases with a 2-rank column

# The strategies of the binary, from `train --help` (new ones join the matrix as they land).
all_strategies() {
    "$TIERGNN" train --help 2>&1 |
        awk '/^strategies/ { on = 1; next } on && /^  [a-z0-9_]+( |$)/ { print $1 }' |
        grep -vx auto
}
STRATEGIES=${FAULT_STRATEGIES:-$(all_strategies | tr '\n' ' ')}
RANKS2=${FAULT_RANKS2:-gnndrive}
[ "$RANKS2" = all ] && RANKS2=$STRATEGIES
[ "$RANKS2" = none ] && RANKS2=
MPIRUN=${FAULT_MPIRUN:-$(command -v mpirun || true)}
# mpirun's ranks on this machine over loopback, as root, two ranks on two cores
MPI_FLAGS=(--allow-run-as-root --oversubscribe --mca btl "self,tcp" --mca btl_tcp_if_include lo
    --mca oob_tcp_if_include lo -x ASAN_OPTIONS)

# The training run of every case: small model, 3 epochs of 20 batches, full evaluation of 2000
# nodes (out of core: layer files in RUNDIR). enospc-ckpt evaluates sampled batches instead, so
# that only checkpoints are written to RUNDIR. Per strategy: the options that make it work out
# of core on this dataset, and the cgroup limit (= --mem; the engine keeps 16 MiB + 2% of it for
# the kernel).
TRAIN="--model sage --layers 2 --hidden 32 --fanouts 5,5 --batch-size 256 --epochs 3
  --batches-per-epoch 20 --eval-max-nodes 2000 --seed 3 --threads 2"
TRAIN_SAMPLED_EVAL="$TRAIN --eval-fanouts train"
# two ranks: one compute thread each (two cores)
TRAIN2=${TRAIN/--threads 2/--threads 1}
TRAIN2_SAMPLED_EVAL="$TRAIN2 --eval-fanouts train"
strategy_args() {
    case $1 in
    memory) echo "--mem 48M" ;;
    mmap) echo "--mem 48M --gather-threads 3" ;;
    gnndrive) echo "--mem 48M --extractors 3 --chunk-rows 64 --features-in-ram 0 --resident-indices 0" ;;
    pagraph) echo "--mem 48M --hot-nodes 400 --extractors 3 --chunk-rows 64 --resident-indices 0" ;;
    ginex) echo "--mem 56M --superbatch 3 --chunk-rows 64" ;;
    diskgnn) echo "--mem 96M --hot-cache 20K --chunk-rows 64" ;;
    hier) echo "--mem 64M --parts 16 --dynamic-parts 4 --static-ratio 0.02" ;;
    gids) echo "--mem 56M --window 4 --constant-buffer 16K --extractors 2 --chunk-rows 64 --sweep-batches 2" ;;
    *) echo "--mem 64M" ;;
    esac
}

# ---------------------------------------------------------------- helpers

MOUNTS=()
cleanup() {
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
mount_tmpfs() { # DIR BYTES
    mkdir -p "$1"
    mount -t tmpfs -o size="$2" tmpfs "$1" || return 1
    MOUNTS+=("$1")
}
umount_tmpfs() {
    umount "$1" 2>/dev/null || umount -l "$1"
    local keep=()
    for m in "${MOUNTS[@]}"; do [ "$m" = "$1" ] || keep+=("$m"); done
    MOUNTS=("${keep[@]}")
}

# Random points: bash's generator seeded by (FAULT_SEED, strategy, case, round), so a case draws
# the same numbers whether it runs alone or in the whole matrix. rand N sets R in [0, N).
rng_init() { RANDOM=$(printf '%s/%s/%s/%s' "$SEED" "$1" "$2" "$3" | cksum | cut -d' ' -f1); }
rand() {
    local n=$1
    [ "$n" -gt 0 ] || n=1
    R=$(((RANDOM * 32768 + RANDOM) % n))
}

file_size() { stat -c %s "$1"; }
xor_byte() { # FILE OFFSET X: byte OFFSET of FILE ^= X
    local b
    b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    # shellcheck disable=SC2059 # the format is the byte, as an octal escape
    printf "\\$(printf '%03o' $((b ^ $3)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Builds the preloaded kill shim once (tests/faults/killshim.c).
SHIM=$WORK/killshim.so
build_shim() {
    local cc=${CC:-cc}
    if [ ! -f "$SHIM" ] || [ "$here/killshim.c" -nt "$SHIM" ]; then
        "$cc" -std=c11 -O2 -Wall -Wextra -Werror -shared -fPIC -o "$SHIM" "$here/killshim.c" -ldl ||
            { echo "faults: cannot build $SHIM" >&2; exit 2; }
    fi
}

# await_pid BASE TRIES: waits up to TRIES x 5 ms for BASE.pid (written by the sh that execs
# tiergnn); T1 when it came, TGPID its pid (empty when it did not come).
await_pid() {
    TGPID=
    for _ in $(seq "$2"); do
        [ -s "$1.pid" ] && break
        sleep 0.005
    done
    T1=$(now_ms)
    [ -s "$1.pid" ] && TGPID=$(cat "$1.pid")
}

# tg_start BASE ARGS...: starts `tiergnn ARGS` in the background under the cgroup limit LIMIT and
# the timeout, with the environment settings of the array ENVS; BASE.out, BASE.err, BASE.pid.
LIMIT=
ENVS=()
tg_start() {
    local base=$1
    shift
    rm -f "$base.pid" "$base.out" "$base.err"
    T0=$(now_ms)
    # sh writes its pid (that of tiergnn, which it execs) for the signal cases; a command in the
    # background of a script starts with SIGINT ignored, env gives tiergnn the default back (as
    # from a terminal: a SIGINT before tiergnn installs its handler ends it)
    # shellcheck disable=SC2016
    if [ "$MEMBUDGET" != none ] && [ -x "$MEMBUDGET" ]; then
        "$MEMBUDGET" "$LIMIT" -- timeout -k 5 "$TIMEOUT" sh -c 'echo $$ > "$0"; exec "$@"' \
            "$base.pid" env --default-signal=INT "${ENVS[@]}" "$TIERGNN" "$@" >"$base.out" 2>"$base.err" &
    else
        timeout -k 5 "$TIMEOUT" sh -c 'echo $$ > "$0"; exec "$@"' \
            "$base.pid" env --default-signal=INT "${ENVS[@]}" "$TIERGNN" "$@" >"$base.out" 2>"$base.err" &
    fi
    BG=$!
    await_pid "$base" 400
}
alive() { [ -n "$TGPID" ] && kill -0 "$TGPID" 2>/dev/null; }
# tg_wait BASE: waits; RC, MS (wall, with membudget's set-up), RUN_MS (tiergnn's own), PEAK,
# ERRLINE (the last "tiergnn: " line), NERR (their count)
tg_wait() {
    local base=$1
    wait "$BG"
    RC=$?
    MS=$(($(now_ms) - T0))
    RUN_MS=$(($(now_ms) - T1))
    PEAK=$(sed -n 's/^membudget: limit=[0-9]* peak=\([0-9a-z]*\) .*/\1/p' "$base.err" | tail -n 1)
    ERRLINE=$(grep '^tiergnn: ' "$base.err" | tail -n 1)
    NERR=$(grep -c '^tiergnn: ' "$base.err")
}
tg_run() { # BASE ARGS...: tg_start + tg_wait
    tg_start "$@"
    tg_wait "$1"
}

# What no case may do: a crash, a hang, a sanitizer report, a cgroup kill or a peak above the
# limit. Sets WHY and returns 1 when the last run did one of them. $1 = 1 if we sent SIGKILL.
bad_end() {
    local killed=${1:-0} base=$2
    WHY=
    case $RC in
    132) WHY="crash: SIGILL" ;;
    134) WHY="crash: SIGABRT" ;;
    135) WHY="crash: SIGBUS" ;;
    136) WHY="crash: SIGFPE" ;;
    139) WHY="crash: SIGSEGV" ;;
    124) WHY="hang: no end within ${TIMEOUT} s" ;;
    137) [ "$killed" = 1 ] || WHY="killed by SIGKILL that we did not send (the cgroup's OOM killer? peak ${PEAK:-?} of $LIMIT)" ;;
    esac
    [ -z "$WHY" ] && [ "$MS" -ge $((TIMEOUT * 1000)) ] && WHY="hang: ran ${MS} ms"
    [ -z "$WHY" ] && grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$base.err" &&
        WHY="sanitizer report in $base.err"
    if [ -z "$WHY" ] && [[ "${PEAK:-}" =~ ^[0-9]+$ ]] && [ "$PEAK" -gt "$(to_bytes "$LIMIT")" ]; then
        WHY="cgroup peak $PEAK above the limit $LIMIT"
    fi
    [ -z "$WHY" ]
}
to_bytes() {
    local v=${1^^} m=1
    case $v in *K) m=1024 v=${v%K} ;; *M) m=$((1024 ** 2)) v=${v%M} ;; *G) m=$((1024 ** 3)) v=${v%G} ;; esac
    echo $((v * m))
}

# The error of the last run is one clear message naming all of the needles.
clear_error() {
    local n
    [ "$RC" -ne 0 ] || return 1
    [ "$NERR" -eq 1 ] || { WHY="$NERR error lines"; return 1; }
    for n in "$@"; do
        [[ "$ERRLINE" == *"$n"* ]] || { WHY="error lacks '$n': $ERRLINE"; return 1; }
    done
}

# same_ckpt RUNDIR: checkpoint.bin and best.bin equal those of the uninterrupted run REF with
# the same flags.
REF=
same_ckpt() {
    local f
    for f in checkpoint.bin best.bin; do
        cmp -s "$1/$f" "$REF/$f" || { WHY="$f differs from the uninterrupted run's"; return 1; }
    done
}

# finish DS RUNDIR BASE: the run again without any fault - resumed when RUNDIR holds a
# checkpoint, else from the start - must end normally with the uninterrupted run's checkpoints.
# The case's training flags are FLAGS.
finish() {
    local ds=$1 rundir=$2 base=$3 resume=
    [ -f "$rundir/checkpoint.bin" ] && resume=--resume
    ENVS=()
    # shellcheck disable=SC2086
    tg_run "$base" train "$ds" --strategy "$S" $SARGS $FLAGS --out "$rundir" $resume
    bad_end 0 "$base" || { WHY="${resume:-fresh} run after it: $WHY"; return 1; }
    [ "$RC" -eq 0 ] || { WHY="${resume:-fresh} run after it failed: $ERRLINE"; return 1; }
    same_ckpt "$rundir" || { WHY="${resume:-fresh} run after it: $WHY"; return 1; }
    FINISHED=${resume:-fresh}
}

fired() { # operations the io/ fault rules of the last run faulted (0 if none were loaded)
    local n
    n=$(sed -n 's/.*TIERGNN_IO_FAULT: \([0-9]*\) operations faulted.*/\1/p' "$1.err" | tail -n 1)
    echo "${n:-0}"
}
matched() {
    local n
    n=$(sed -n 's/.*operations faulted, \([0-9]*\) matched.*/\1/p' "$1.err" | tail -n 1)
    echo "${n:-0}"
}

# The state of the process's epoch when it stopped, for the details.
where() {
    local e
    e=$(grep -o '^epoch [0-9]*/[0-9]*' "$1.err" | tail -n 1)
    if [ -n "$e" ]; then echo "after $e"; elif grep -q '^training ' "$1.err"; then echo "in epoch 1"; else echo "before training"; fi
}

copy_ds() { # SRC DST [derived]: the dataset files, and derived/ when asked
    mkdir -p "$2"
    cp "$1"/*.bin "$1"/meta.txt "$2"/
    if [ "${3:-}" = derived ] && [ -d "$1/derived" ]; then cp -r "$1/derived" "$2/"; fi
}

# ---------------------------------------------------------------- the cases
# Each sets CELL (the table's word) and NOTE (the details line).

# An I/O error or a short read through the fault hook (io/'s queues and util's tg_pread_full; a
# mapping's page faults have none). KIND: eio (the K-th read of the file, K drawn from the reads
# the uninterrupted run made), short (every read of a random byte stops
# there: the first request that needs it fails), short1 (one such read: the queue reads the
# rest). TARGET: features (features.bin), indices (indices.bin), derived (the files of derived/,
# named or unnamed: io/ opens an unnamed one as /proc/self/fd/N).
case_io() {
    local kind=$1 target=$2 spec='' size m file f
    case $target in
    features) file=features.bin m=$M_FEAT size=$(file_size "$DS/features.bin") ;;
    indices) file=indices.bin m=$M_IDX size=$(file_size "$DS/indices.bin") ;;
    derived) file=/derived/ m=$M_DER size=$D_MAX ;;
    esac
    rand "$m"
    local k=$R
    rand "$size"
    for f in $file $([ "$target" = derived ] && echo /proc/self/fd/); do
        case $kind in
        eio) spec+="EIO@0-1T,file=$f,after=$k,count=1;" ;;
        short) spec+="SHORT@$R,file=$f;" ;;
        short1) spec+="SHORT@$R,file=$f,count=1;" ;;
        esac
    done
    spec=${spec%;}
    ENVS=("TIERGNN_IO_FAULT=$spec")
    # shellcheck disable=SC2086
    tg_run "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    NOTE="TIERGNN_IO_FAULT=$spec"
    bad_end 0 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    local f
    f=$(fired "$C/a")
    if [ "$RC" -eq 0 ]; then
        if [ "$f" = 0 ]; then
            CELL=ok-ran:unfired
            NOTE+=": the fault never fired ($m reads of $file through io/ and pread in the uninterrupted run)"
            same_ckpt "$C/run" || { CELL=FAIL:silent-wrong; NOTE+="; $WHY"; }
        elif same_ckpt "$C/run"; then
            CELL=ok-ran:absorbed
            NOTE+=": fired $f time(s), the run retried and ended with the same checkpoints"
        else
            CELL=FAIL:silent-wrong
            NOTE+=": fired $f time(s), exit 0, $WHY"
        fi
        return
    fi
    local needle="Input/output error"
    [ "$kind" = eio ] || needle="unexpected end of file at offset"
    [ "$target" = derived ] && file=derived/
    if ! clear_error "$file" "$needle"; then
        CELL=FAIL:unclear-error
        NOTE+=": $WHY"
        return
    fi
    NOTE+=": $ERRLINE"
    if finish "$DS" "$C/run" "$C/b"; then
        CELL=ok-error
        NOTE+=" (then $FINISHED: same checkpoints)"
    else
        CELL=FAIL:after-error
        NOTE+=" -- $WHY"
    fi
}

# RUNDIR on a small tmpfs. ckpt: sampled evaluation, so the checkpoints (0.5 to 3 times the size
# of one) are what fills it; rundir: full evaluation, whose layer files in RUNDIR may fill it
# first.
case_enospc_rundir() {
    [ "$IS_ROOT" = 1 ] || { CELL=n/a; NOTE="needs root (tmpfs)"; return; }
    local ck size
    ck=$(file_size "$BASE/run/checkpoint.bin")
    if [ "$1" = ckpt ]; then
        FLAGS=$TRAIN_SAMPLED_EVAL
        REF=$BASE/run-ev
        rand 250
        size=$((ck * (50 + R) / 100))
    else
        rand $((3 * ck + 2 * $(file_size "$DS/features.bin")))
        size=$((ck / 2 + R))
    fi
    size=$(((size + 4095) / 4096 * 4096))
    mount_tmpfs "$C/mnt" "$size" || { CELL=n/a; NOTE="cannot mount a tmpfs"; return; }
    ENVS=()
    # shellcheck disable=SC2086
    tg_run "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/mnt/run"
    NOTE="RUNDIR on a ${size}-byte tmpfs (checkpoint.bin is $ck bytes)"
    if ! bad_end 0 "$C/a"; then
        CELL="FAIL:$(fail_word)"
        NOTE+=": $WHY"
    elif [ "$RC" -eq 0 ]; then
        full_disk_ok
        same_ckpt "$C/mnt/run" || { CELL=FAIL:silent-wrong; NOTE+="; $WHY"; }
    elif ! clear_error "No space left on device" "$C/mnt/run"; then
        CELL=FAIL:unclear-error
        NOTE+=": $WHY"
    else
        NOTE+=": $ERRLINE"
        mount -o remount,size=256m "$C/mnt"
        if finish "$DS" "$C/mnt/run" "$C/b"; then
            CELL=ok-error
            NOTE+=" (then, with room, $FINISHED: same checkpoints)"
        else
            CELL=FAIL:after-error
            NOTE+=" -- $WHY"
        fi
    fi
    umount_tmpfs "$C/mnt"
}

# A run that ended normally on a small tmpfs: it fit, or it met the full disk, said so and went
# on without the file (a derived file it can do without: "counting in RAM instead").
full_disk_ok() {
    local said
    said=$(grep -h -m1 'No space left on device' "$C/a.err" | cut -c1-200)
    if [ -n "$said" ]; then
        CELL=ok-ran:fallback
        NOTE+=": exit 0 after '$said'"
    else
        CELL=ok-ran:unfired
        NOTE+=": everything fit"
    fi
}

# Bytes a directory's files take on tmpfs (whole pages).
pages_of() { find "$1" -type f -printf '%s\n' | awk '{ t += int(($1 + 4095) / 4096) * 4096 } END { print t + 0 }'; }

# The dataset on a tmpfs with less room than the files derived/ receives (named or unnamed).
case_enospc_derived() {
    [ "$IS_ROOT" = 1 ] || { CELL=n/a; NOTE="needs root (tmpfs)"; return; }
    [ "$W_DER" -gt 0 ] || { CELL=n/a; NOTE="$S writes nothing in derived/"; return; }
    local size
    # room drawn below W_DER / 2^k, k in 0..5: the bytes written are a sum over time (spills and
    # packs are rewritten), what must fit at once is often much less
    rand 6
    rand $((W_DER >> R))
    size=$(($(pages_of "$ORIG") + R / 4096 * 4096))
    mount_tmpfs "$C/mnt" "$size" || { CELL=n/a; NOTE="cannot mount a tmpfs"; return; }
    copy_ds "$ORIG" "$C/mnt/ds"
    ENVS=()
    # shellcheck disable=SC2086
    tg_run "$C/a" train "$C/mnt/ds" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    NOTE="dataset on a tmpfs with $((size - $(pages_of "$ORIG"))) bytes free (the run writes $W_DER bytes in derived/)"
    if ! bad_end 0 "$C/a"; then
        CELL="FAIL:$(fail_word)"
        NOTE+=": $WHY"
    elif [ "$RC" -eq 0 ]; then
        full_disk_ok
        same_ckpt "$C/run" || { CELL=FAIL:silent-wrong; NOTE+="; $WHY"; }
    elif ! clear_error "No space left on device" "$C/mnt/ds"; then
        CELL=FAIL:unclear-error
        NOTE+=": $WHY"
    else
        NOTE+=": $ERRLINE"
        mount -o remount,size=256m "$C/mnt"
        if finish "$C/mnt/ds" "$C/run" "$C/b"; then
            CELL=ok-error
            NOTE+=" (then, with room, $FINISHED: same checkpoints"
            local left
            left=$(find "$C/mnt/ds/derived" -name 'tmp-*' 2>/dev/null | wc -l)
            [ "$left" -eq 0 ] || NOTE+="; $left temp file(s) left in derived/"
            NOTE+=")"
        else
            CELL=FAIL:after-error
            NOTE+=" -- $WHY"
        fi
    fi
    umount_tmpfs "$C/mnt"
}

case_enospc_infer() {
    [ "$IS_ROOT" = 1 ] || { CELL=n/a; NOTE="needs root (tmpfs)"; return; }
    [ -f "$BASE/pred.i32" ] || { CELL=FAIL:baseline; NOTE="the baseline infer failed"; return; }
    local total size f
    total=$(($(file_size "$BASE/pred.i32") + $(file_size "$BASE/pred.i32.emb")))
    rand "$total"
    size=$(((R + 4095) / 4096 * 4096))
    mount_tmpfs "$C/mnt" "$size" || { CELL=n/a; NOTE="cannot mount a tmpfs"; return; }
    ENVS=()
    # shellcheck disable=SC2086
    tg_run "$C/a" infer "$DS" --checkpoint "$BASE/run" --out "$C/mnt/pred.i32" --embeddings \
        --strategy "$S" $SARGS --threads 2
    NOTE="infer --out on a ${size}-byte tmpfs (output: $total bytes)"
    if ! bad_end 0 "$C/a"; then
        CELL="FAIL:$(fail_word)"
        NOTE+=": $WHY"
    elif [ "$RC" -eq 0 ]; then
        full_disk_ok
        for f in pred.i32 pred.i32.emb; do
            cmp -s "$C/mnt/$f" "$BASE/$f" || { CELL=FAIL:silent-wrong; NOTE+="; $f differs"; }
        done
    elif ! clear_error "No space left on device" "$C/mnt/pred.i32"; then
        CELL=FAIL:unclear-error
        NOTE+=": $WHY"
    else
        NOTE+=": $ERRLINE"
        CELL=ok-error
        # nothing under the final names that a reader would take for a whole output
        for f in pred.i32 pred.i32.emb pred.i32.json; do
            if [ -e "$C/mnt/$f" ] && ! cmp -s "$C/mnt/$f" "$BASE/$f"; then
                CELL=FAIL:half-written
                NOTE+=" -- $f left under its final name, not the whole output"
            fi
        done
        left=$(find "$C/mnt" -name '*.tmp*' | wc -l)
        [ "$left" -eq 0 ] || { CELL=FAIL:half-written; NOTE+=" -- $left temp file(s) left"; }
        mount -o remount,size=256m "$C/mnt"
        # shellcheck disable=SC2086
        tg_run "$C/b" infer "$DS" --checkpoint "$BASE/run" --out "$C/mnt/pred.i32" --embeddings \
            --strategy "$S" $SARGS --threads 2
        if [ "$RC" -ne 0 ]; then
            CELL=FAIL:after-error
            NOTE+=" -- infer with room failed: $ERRLINE"
        else
            for f in pred.i32 pred.i32.emb; do
                cmp -s "$C/mnt/$f" "$BASE/$f" || { CELL=FAIL:after-error; NOTE+=" -- $f differs after infer with room"; }
            done
            [ "$CELL" = ok-error ] && NOTE+=" (then, with room: the same output)"
        fi
    fi
    umount_tmpfs "$C/mnt"
}

# Changes features.bin of a copy of the dataset: MODE trunc | flip, WHEN between | during;
# the run with --verify (the files' CRC-32 first) or --verify-reads (every row read checked
# against derived/rowcrc, written by `verify --row-checksums` before the change).
case_change() {
    local mode=$1 when=$2 verify=${3:-} size at delay=0 was_alive=1 x
    copy_ds "$DS" "$C/ds" derived
    local feat=$C/ds/features.bin
    if [ "$verify" = --verify-reads ]; then
        "$TIERGNN" verify "$C/ds" --row-checksums >"$C/rowcrc.log" 2>&1 ||
            { CELL=FAIL:setup; NOTE="verify --row-checksums failed: $(tail -n 1 "$C/rowcrc.log")"; return; }
    fi
    size=$(file_size "$feat")
    rand "$size"
    at=$R
    rand 255
    x=$((R + 1))
    change() {
        if [ "$mode" = trunc ]; then
            truncate -s "$at" "$feat"
        else
            xor_byte "$feat" "$at" "$x"
        fi
    }
    if [ "$mode" = trunc ]; then NOTE="features.bin truncated to $at of $size bytes"; else NOTE="byte $at of features.bin xor $x"; fi
    ENVS=()
    if [ "$when" = between ]; then
        change
        # shellcheck disable=SC2086
        tg_run "$C/a" train "$C/ds" --strategy "$S" $SARGS $FLAGS --out "$C/run" $verify
    else
        rand $((BASE_MS * 3 / 4))
        delay=$R
        NOTE+=" ${delay} ms into the run"
        # shellcheck disable=SC2086
        tg_start "$C/a" train "$C/ds" --strategy "$S" $SARGS $FLAGS --out "$C/run" $verify
        sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
        alive || was_alive=0
        change
        tg_wait "$C/a"
    fi
    [ -n "$verify" ] && NOTE+=", $verify"
    bad_end 0 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$RC" -ne 0 ]; then
        if [ "$mode" = flip ] && [ -z "$verify" ] && [ "$NERR" -eq 1 ]; then
            CELL=ok-error
            NOTE+=": detected without --verify: $ERRLINE"
            return
        fi
        local needles=(features.bin)
        [ "$mode" = flip ] && needles+=(checksum)
        if ! clear_error "${needles[@]}"; then
            CELL=FAIL:unclear-error
            NOTE+=": $WHY"
            return
        fi
        NOTE+=": $ERRLINE"
        CELL=ok-error
        if [ "$mode" = trunc ]; then
            # the failed run leaves nothing that stops the run on the mended file
            cp "$ORIG/features.bin" "$feat"
            if finish "$C/ds" "$C/run" "$C/b"; then
                NOTE+=" (then, features.bin mended, $FINISHED: same checkpoints)"
            else
                CELL=FAIL:after-error
                NOTE+=" -- $WHY"
            fi
        fi
        return
    fi
    # the run ended normally
    if [ "$mode" = trunc ]; then
        if same_ckpt "$C/run"; then
            if [ "$was_alive" = 0 ]; then
                CELL=ok-ran:ended-before
                NOTE+=": the run had ended before the change"
            else
                CELL=ok-ran:unaffected
                NOTE+=": exit 0 with the same checkpoints ($S read no feature row from the file after the cut)"
            fi
        else
            CELL=FAIL:silent-wrong
            NOTE+=": exit 0, $WHY"
        fi
        return
    fi
    if [ "$verify" = --verify-reads ]; then
        # every row read was checked: a clean exit must have read no changed row
        if [ "$was_alive" = 0 ]; then
            CELL=ok-ran:ended-before
            NOTE+=": the run had ended before the change"
        elif same_ckpt "$C/run"; then
            CELL=ok-ran:unaffected
            NOTE+=": exit 0 with the same checkpoints ($S read the changed row from no disk after the change)"
        else
            CELL=FAIL:silent-wrong
            NOTE+=": exit 0 with --verify-reads, $WHY"
        fi
        return
    fi
    if [ "$when" = between ] && [ -n "$verify" ]; then
        CELL=FAIL:verify-missed
        NOTE+=": --verify accepted the changed file"
        return
    fi
    local res="a different result"
    same_ckpt "$C/run" && res="the same checkpoints (the byte made no difference)"
    if [ "$was_alive" = 0 ]; then
        CELL=ok-ran:ended-before
        NOTE+=": the run had ended before the change"
    elif [ -n "$verify" ]; then
        CELL=undetected-after-verify
        NOTE+=": changed after --verify's check, exit 0 with $res"
    else
        CELL=undetected-without-verify
        NOTE+=": exit 0 with $res"
    fi
    # tiergnn verify catches it
    ENVS=()
    tg_run "$C/v" verify "$C/ds"
    if [ "$RC" -ne 0 ] && grep -q 'features.bin' "$C/v.err" "$C/v.out"; then
        NOTE+="; tiergnn verify: $(grep -h 'features.bin' "$C/v.err" "$C/v.out" | head -n 1)"
    else
        CELL=FAIL:verify-missed
        NOTE+="; tiergnn verify did not report features.bin (exit $RC)"
    fi
}

# A derived file (one the uninterrupted run built, drawn at random) changed between runs: MODE
# trunc (cut at a random length: no longer its recorded size) | flip (one byte, anywhere: the
# header has a CRC, the payload's CRC is read with --verify).
case_derived_change() {
    local mode=$1 verify=${2:-} files n f size at x name
    mapfile -t files < <(find "$DS/derived" -maxdepth 1 -type f -name '*.bin' ! -name 'tmp-*' 2>/dev/null | sort)
    n=${#files[@]}
    [ "$n" -gt 0 ] || { CELL=n/a; NOTE="$S keeps no derived file"; return; }
    copy_ds "$DS" "$C/ds" derived
    rand "$n"
    name=$(basename "${files[$R]}")
    f=$C/ds/derived/$name
    size=$(file_size "$f")
    rand "$size"
    at=$R
    if [ "$mode" = trunc ]; then
        truncate -s "$at" "$f"
        NOTE="derived/$name truncated to $at of $size bytes"
    else
        rand 255
        x=$((R + 1))
        xor_byte "$f" "$at" "$x"
        NOTE="byte $at of derived/$name ($size bytes) xor $x"
    fi
    [ -n "$verify" ] && NOTE+=", --verify"
    # the damaged bytes, and an access time before the change: whether the run rebuilt the file,
    # read it, or left it alone
    cp "$f" "$C/damaged"
    touch -a -d '2000-01-01' "$f"
    local atime0
    atime0=$(stat -c %X "$f")
    ENVS=()
    # shellcheck disable=SC2086
    tg_run "$C/a" train "$C/ds" --strategy "$S" $SARGS $FLAGS --out "$C/run" $verify
    local atime1=
    [ -f "$f" ] && atime1=$(stat -c %X "$f") # before cmp reads it
    bad_end 0 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$RC" -ne 0 ]; then
        if clear_error "derived/"; then
            CELL=ok-error
            NOTE+=": $ERRLINE"
        else
            CELL=FAIL:unclear-error
            NOTE+=": $WHY"
        fi
        return
    fi
    if [ -f "$f" ] && ! cmp -s "$f" "$C/damaged"; then
        if same_ckpt "$C/run"; then
            CELL=ok-ran:rebuilt
            NOTE+=": refused as stale and rebuilt, the same checkpoints"
            local why
            why=$(grep -h -m1 -i 'stale\|rebuil\|CRC' "$C/a.err" | cut -c1-200)
            [ -n "$why" ] && NOTE+=" ($why)"
        else
            CELL=FAIL:ckpt-differs
            NOTE+=": rebuilt, but $WHY"
        fi
        return
    fi
    local same=0 res="a different result"
    same_ckpt "$C/run" && same=1 res="the same checkpoints (the byte made no difference)"
    if [ "$same" = 1 ] && { [ "$mode" = trunc ] || [ "$atime1" = "$atime0" ]; }; then
        # a truncated file never passes the size check: left alone, the run did not need it
        CELL=ok-ran:unused
        NOTE+=": left as it was, exit 0 with the same checkpoints (this run did not need it)"
    elif [ "$mode" = trunc ]; then
        CELL=FAIL:trusted-damaged
        NOTE+=": exit 0 having used the truncated file, with $res"
    elif [ -n "$verify" ]; then
        CELL=FAIL:verify-missed
        NOTE+=": --verify let the run read the damaged file: exit 0 with $res"
    else
        CELL=undetected-without-verify
        NOTE+=": exit 0 with $res"
    fi
}

# SIGKILL or SIGINT at a random time of the run (SIG = KILL | INT | INT2: two SIGINTs).
case_signal() {
    local sig=$1 delay gap=0 was_alive=1 killed=0
    rand $((BASE_MS * 3 / 4))
    delay=$R
    ENVS=()
    # shellcheck disable=SC2086
    tg_start "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    if alive; then
        case $sig in
        KILL) kill -KILL "$TGPID" 2>/dev/null && killed=1 ;;
        INT) kill -INT "$TGPID" 2>/dev/null ;;
        INT2)
            rand 50
            gap=$R
            kill -INT "$TGPID" 2>/dev/null
            sleep "0.0$(printf '%02d' "$gap")"
            kill -INT "$TGPID" 2>/dev/null
            ;;
        esac
    else
        was_alive=0
    fi
    tg_wait "$C/a"
    NOTE="SIG$sig ${delay} ms into the run"
    [ "$sig" = INT2 ] && NOTE="SIGINT ${delay} ms into the run, another $gap ms later"
    bad_end "$killed" "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$was_alive" = 0 ] || [ "$RC" -eq 0 ]; then
        if same_ckpt "$C/run"; then
            CELL=ok-ran:ended-before
            [ "$was_alive" = 1 ] && CELL=ok-ran:completed
            NOTE+=": exit $RC, the run had no batch left to stop at"
        else
            CELL=FAIL:ckpt-differs
            NOTE+=": exit $RC, $WHY"
        fi
        return
    fi
    NOTE+=" ($(where "$C/a"), exit $RC"
    if [ "$sig" = INT ] && [ "$RC" -eq 130 ] && grep -q 'interrupted' "$C/a.err"; then
        NOTE+=": $(grep -h 'interrupted' "$C/a.err" | tail -n 1 | cut -c1-120)"
    elif [ "$sig" = INT ] && [ "$RC" -ne 130 ]; then
        NOTE+=": $ERRLINE"
    fi
    NOTE+=")"
    if finish "$DS" "$C/run" "$C/b"; then
        CELL=ok-resumed
        NOTE+="; $FINISHED: same checkpoints"
    else
        CELL=FAIL:ckpt-differs
        [[ "$WHY" == *differs* ]] || CELL=FAIL:resume-error
        NOTE+="; $WHY"
    fi
}

# SIGKILL at the K-th write, sync or rename of a checkpoint (checkpoint.bin.tmp, best.bin.tmp)
# or of a file in derived/ (the derived files being built, and the unnamed files of spills and
# packs).
case_kill_write() {
    local what=$1 n match ds=$DS
    if [ "$what" = ckpt ]; then
        n=$N_CKPT match=.bin.tmp
    else
        n=$N_DERIVED match=/derived/
        ds=$C/ds
        copy_ds "$ORIG" "$ds"
    fi
    [ "$n" -gt 0 ] || { CELL=n/a; NOTE="no write to *$match* in the uninterrupted run"; return; }
    rand "$n"
    local k=$((R + 1))
    ENVS=("LD_PRELOAD=$SHIM" "TG_KILL_MATCH=$match" "TG_KILL_AT=$k" "ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0")
    # shellcheck disable=SC2086
    tg_run "$C/a" train "$ds" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    NOTE="SIGKILL at write/sync/rename $k of $n on *$match*"
    bad_end 1 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$RC" -ne 137 ]; then
        if [ "$RC" -eq 0 ] && same_ckpt "$C/run"; then
            CELL=ok-ran:unfired
            NOTE+=": this run made fewer such calls"
        else
            CELL=FAIL:unexpected
            NOTE+=": exit $RC: $ERRLINE"
        fi
        return
    fi
    NOTE+=" ($(where "$C/a"))"
    if finish "$ds" "$C/run" "$C/b"; then
        CELL=ok-resumed
        NOTE+="; $FINISHED: same checkpoints"
        if [ "$what" = derived ]; then
            local left
            left=$(find "$ds/derived" -name 'tmp-*' 2>/dev/null | wc -l)
            [ "$left" -eq 0 ] || NOTE+="; $left temp file(s) of the killed run left in derived/"
        fi
    else
        CELL=FAIL:ckpt-differs
        [[ "$WHY" == *differs* ]] || CELL=FAIL:resume-error
        NOTE+="; $WHY"
    fi
}

# ---------------------------------------------------------------- two ranks (FAULT_RANKS2)

# mpi_start BASE ARGS...: `mpirun` of two ranks of `tiergnn ARGS` in the background under the
# timeout (no cgroup: each rank plans its own --mem); rank 1 with the environment settings of
# the array ENVS1 writes its pid to BASE.pid. Then tg_wait BASE as for one process.
ENVS1=()
mpi_start() {
    local base=$1
    shift
    rm -f "$base.pid" "$base.out" "$base.err"
    T0=$(now_ms)
    # shellcheck disable=SC2016
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" timeout -k 5 "$TIMEOUT" \
        "$MPIRUN" "${MPI_FLAGS[@]}" -np 1 "$TIERGNN" "$@" : -np 1 sh -c 'echo $$ > "$0"; exec "$@"' \
        "$base.pid" env --default-signal=INT "${ENVS1[@]}" "$TIERGNN" "$@" >"$base.out" 2>"$base.err" &
    BG=$!
    await_pid "$base" 2000
}
mpi_run() { mpi_start "$@"; tg_wait "$1"; }

# What no 2-rank case may do: a hang (past the timeout), a sanitizer report. Sets WHY.
bad_end2() {
    WHY=
    [ "$RC" = 124 ] || [ "$MS" -ge $((TIMEOUT * 1000)) ] && WHY="hang: no end within ${TIMEOUT} s"
    [ -z "$WHY" ] && grep -qE 'AddressSanitizer|runtime error:' "$1.err" "$1.out" &&
        WHY="sanitizer report in $1.err"
    [ -z "$WHY" ]
}

# The rank's error lines ("rank R/2: tiergnn: ..."), one per line.
rank_errors() { grep -hE "^rank $2/2: tiergnn: " "$1.err" "$1.out"; }

# finish2 RUNDIR BASE: two ranks without any fault - resumed when RUNDIR holds a checkpoint,
# else from the start - must end with the checkpoints of the uninterrupted 2-rank run REF.
finish2() {
    local resume=
    [ -f "$1/checkpoint.bin" ] && resume=--resume
    ENVS1=()
    # shellcheck disable=SC2086
    mpi_run "$2" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$1" $resume
    FINISHED=${resume:-fresh}
    bad_end2 "$2" || { WHY="$FINISHED run after it: $WHY"; return 1; }
    [ "$RC" -eq 0 ] || { WHY="$FINISHED run after it failed (exit $RC): $(grep -h 'tiergnn: ' "$2.err" | head -n 2 | tr '\n' ' ')"; return 1; }
    same_ckpt "$1" || { WHY="$FINISHED run after it: $WHY"; return 1; }
}

# SIGKILL or SIGINT to rank 1 at a random moment: mpirun ends both (naming rank 1 and signal 9),
# or both stop at one step with a checkpoint; --resume then writes the uninterrupted run's.
case2_signal() {
    local sig=$1 delay was_alive=1
    rand $((BASE2_MS * 3 / 4))
    delay=$R
    ENVS1=()
    # shellcheck disable=SC2086
    mpi_start "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    if alive; then kill -"$sig" "$TGPID" 2>/dev/null; else was_alive=0; fi
    tg_wait "$C/a"
    NOTE="SIG$sig to rank 1 ${delay} ms into the run"
    bad_end2 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$was_alive" = 0 ] || [ "$RC" -eq 0 ]; then
        if same_ckpt "$C/run"; then CELL=ok-ran:completed; else CELL=FAIL:ckpt-differs; NOTE+=": $WHY"; fi
        return
    fi
    if [ "$sig" = KILL ]; then
        if ! grep -qE 'rank 1 .*signal 9' "$C/a.err" "$C/a.out"; then
            CELL=FAIL:unclear-error NOTE+=": mpirun does not name rank 1 and signal 9"
            return
        fi
        NOTE+=" (mpirun ended both in $((MS - delay)) ms)"
    else
        local n
        n=$(grep -hc 'tiergnn: interrupted' "$C/a.err" | awk '{ t += $1 } END { print t + 0 }')
        if [ "$n" -ne 2 ]; then
            CELL=FAIL:unclear-error NOTE+=": $n rank(s) say where they stopped, not 2"
            return
        fi
        NOTE+=" ($(grep -h 'tiergnn: interrupted' "$C/a.err" | head -n 1 | cut -c1-100))"
    fi
    if finish2 "$C/run" "$C/b"; then
        CELL=ok-resumed NOTE+="; $FINISHED: same checkpoints"
    else
        CELL=FAIL:resume-error NOTE+="; $WHY"
    fi
}

# An I/O error in rank 1's K-th read of features.bin (K drawn from half the reads one process
# made): the run absorbs it, or ends both ranks with rank 1's message naming the file.
case2_io() {
    rand $((M_FEAT / 2))
    local spec="EIO@0-1T,file=features.bin,after=$R,count=1"
    ENVS1=("TIERGNN_IO_FAULT=$spec")
    # shellcheck disable=SC2086
    mpi_run "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/run"
    NOTE="rank 1: TIERGNN_IO_FAULT=$spec"
    bad_end2 "$C/a" || { CELL="FAIL:$(fail_word)"; NOTE+=": $WHY"; return; }
    if [ "$RC" -eq 0 ]; then
        if same_ckpt "$C/run"; then CELL=ok-ran; else CELL=FAIL:silent-wrong; NOTE+=": $WHY"; fi
        return
    fi
    local line
    line=$(rank_errors "$C/a" 1 | grep 'features.bin' | grep 'Input/output error' | head -n 1)
    [ -n "$line" ] || { CELL=FAIL:unclear-error NOTE+=": no rank 1 line names features.bin and the error"; return; }
    NOTE+=": ${line:0:160}"
    if finish2 "$C/run" "$C/b"; then
        CELL=ok-error NOTE+=" (then $FINISHED: same checkpoints)"
    else
        CELL=FAIL:after-error NOTE+=" -- $WHY"
    fi
}

# RUNDIR on a small tmpfs with sampled evaluation: rank 0's checkpoint meets the full disk, every
# rank stops (the checkpoint's failure is agreed), and with room --resume finishes.
case2_enospc_ckpt() {
    [ "$IS_ROOT" = 1 ] || { CELL=n/a; NOTE="needs root (tmpfs)"; return; }
    local ck size
    ck=$(file_size "$BASE/run2r-ev/checkpoint.bin")
    FLAGS=$TRAIN2_SAMPLED_EVAL
    REF=$BASE/run2r-ev
    rand 250
    size=$(((ck * (50 + R) / 100 + 4095) / 4096 * 4096))
    mount_tmpfs "$C/mnt" "$size" || { CELL=n/a; NOTE="cannot mount a tmpfs"; return; }
    ENVS1=()
    # shellcheck disable=SC2086
    mpi_run "$C/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$C/mnt/run"
    NOTE="RUNDIR on a ${size}-byte tmpfs (checkpoint.bin is $ck bytes)"
    if ! bad_end2 "$C/a"; then
        CELL="FAIL:$(fail_word)" NOTE+=": $WHY"
    elif [ "$RC" -eq 0 ]; then
        if same_ckpt "$C/mnt/run"; then CELL=ok-ran:fit; else CELL=FAIL:silent-wrong; NOTE+="; $WHY"; fi
    elif ! rank_errors "$C/a" 0 | grep -q 'No space left on device'; then
        CELL=FAIL:unclear-error NOTE+=": no rank 0 line says No space left on device"
    else
        NOTE+=": $(rank_errors "$C/a" 0 | grep 'No space' | head -n 1 | cut -c1-160)"
        mount -o remount,size=256m "$C/mnt"
        if finish2 "$C/mnt/run" "$C/b"; then
            CELL=ok-error NOTE+=" (then, with room, $FINISHED: same checkpoints)"
        else
            CELL=FAIL:after-error NOTE+=" -- $WHY"
        fi
    fi
    umount_tmpfs "$C/mnt"
}

run_case2() {
    case $1 in
    kill-run) case2_signal KILL ;;
    sigint) case2_signal INT ;;
    eio-feat) case2_io ;;
    enospc-ckpt) case2_enospc_ckpt ;;
    esac
}

fail_word() {
    case $WHY in
    crash*) echo crash ;;
    hang*) echo hang ;;
    sanitizer*) echo sanitizer ;;
    *OOM* | *peak*) echo cgroup ;;
    *) echo other ;;
    esac
}

run_case() {
    case $1 in
    eio-feat) case_io eio features ;;
    eio-idx) case_io eio indices ;;
    eio-derived) case_io eio derived ;;
    short-feat) case_io short features ;;
    short-idx) case_io short indices ;;
    short-derived) case_io short derived ;;
    short1-feat) case_io short1 features ;;
    enospc-ckpt) case_enospc_rundir ckpt ;;
    enospc-rundir) case_enospc_rundir rundir ;;
    enospc-derived) case_enospc_derived ;;
    enospc-infer) case_enospc_infer ;;
    trunc-between) case_change trunc between ;;
    trunc-between-verify) case_change trunc between --verify ;;
    trunc-during) case_change trunc during ;;
    trunc-during-verify) case_change trunc during --verify ;;
    flip-between) case_change flip between ;;
    flip-between-verify) case_change flip between --verify ;;
    flip-between-reads) case_change flip between --verify-reads ;;
    flip-during) case_change flip during ;;
    flip-during-verify) case_change flip during --verify ;;
    flip-during-reads) case_change flip during --verify-reads ;;
    trunc-derived) case_derived_change trunc ;;
    flip-derived) case_derived_change flip ;;
    flip-derived-verify) case_derived_change flip --verify ;;
    kill-run) case_signal KILL ;;
    sigint) case_signal INT ;;
    sigint2) case_signal INT2 ;;
    kill-ckpt) case_kill_write ckpt ;;
    kill-derived) case_kill_write derived ;;
    *) CELL=n/a NOTE="unknown case" ;;
    esac
}

# ---------------------------------------------------------------- the matrix

# Strategy S's 2-rank column: the uninterrupted 2-rank runs (the references), then the cases of
# CASES2 that CASES holds. n/a without mpirun or tiergnn-mpi beside tiergnn.
run_column2() {
    local c round why2=
    COLS2+="$S "
    if [ -z "$MPIRUN" ] || [ ! -x "$(dirname "$TIERGNN")/tiergnn-mpi" ]; then
        why2="no mpirun or no tiergnn-mpi (a build without MPI)"
    elif [ -n "$base_why" ]; then
        why2=$base_why
    else
        ENVS1=()
        # shellcheck disable=SC2086
        mpi_run "$BASE/m" train "$DS" --strategy "$S" $SARGS $TRAIN2 --out "$BASE/run2r"
        BASE2_MS=$RUN_MS
        [ "$RC" -eq 0 ] || why2="the uninterrupted 2-rank run failed (exit $RC): $(grep -h 'tiergnn: ' "$BASE/m.err" | head -n 2 | tr '\n' ' ')"
        if [ -z "$why2" ] && want enospc-ckpt; then
            # shellcheck disable=SC2086
            mpi_run "$BASE/n" train "$DS" --strategy "$S" $SARGS $TRAIN2_SAMPLED_EVAL --out "$BASE/run2r-ev"
            [ "$RC" -eq 0 ] || why2="the uninterrupted 2-rank run with sampled evaluation failed (exit $RC)"
        fi
    fi
    local summary="$S x2 (mpirun -np 2, $SARGS, --threads 1 each): uninterrupted run ${BASE2_MS:-?} ms"
    echo "== $summary"
    echo "== $summary" >>"$DETAILS"
    for c in $CASES2; do
        want "$c" || continue
        for round in $(seq "$ROUNDS"); do
            C=$SD/$c-x2/r$round
            rm -rf "$C"
            mkdir -p "$C"
            rng_init "$S" "$c-x2" "$round"
            FLAGS=$TRAIN2
            REF=$BASE/run2r
            if [ -n "$why2" ]; then
                CELL=n/a NOTE=$why2
                [ -n "$base_why" ] && CELL=FAIL:baseline
                [[ "$why2" == *uninterrupted* ]] && CELL=FAIL:baseline
            else
                run_case2 "$c"
            fi
            CELLS[$c/$S@2]+="$CELL "
            if [[ "$CELL" == FAIL* ]]; then
                fails=$((fails + 1))
                NOTE+=" [kept: $C]"
            else
                rm -rf "$C"
            fi
            line="$S x2 $c #$round: $CELL -- $NOTE"
            echo "   $line"
            echo "$line" >>"$DETAILS"
        done
        rmdir "$SD/$c-x2" 2>/dev/null
    done
}
COLS2=

build_shim
echo "faults: $TIERGNN, FAULT_SEED=$SEED, work in $WORK"
echo "faults: strategies: $STRATEGIES"
[ "$MEMBUDGET" != none ] && [ -x "$MEMBUDGET" ] || echo "faults: no membudget ($MEMBUDGET): runs have no cgroup limit" >&2
[ "$IS_ROOT" = 1 ] || echo "faults: not root: the ENOSPC cases are skipped" >&2
ORIG=$WORK/ds
if [ ! -f "$ORIG/meta.txt" ]; then
    rm -rf "$ORIG"
    "$TIERGNN" generate "$ORIG" --nodes 20000 --avg-degree 10 --feat-dim 32 --classes 8 --seed 1 \
        >/dev/null 2>"$WORK/generate.log" || { cat "$WORK/generate.log" >&2; exit 2; }
fi
declare -A CELLS
DETAILS=$WORK/details.txt
: >"$DETAILS"
t_start=$(date +%s)
fails=0
want() { [[ " $CASES " == *" $1 "* ]]; }
# The count of a TG_KILL_COUNT file: $1 = calls | bytes
shim_count() {
    local f=$2
    [ -f "$f" ] || { echo 0; return; }
    if [ "$1" = calls ]; then cut -d' ' -f1 "$f"; else cut -d' ' -f2 "$f"; fi
}
shim_env() { # MATCH COUNTFILE
    ENVS=("LD_PRELOAD=$SHIM" "TG_KILL_MATCH=$1" "TG_KILL_COUNT=$2"
        "ASAN_OPTIONS=${ASAN_OPTIONS:-}:verify_asan_link_order=0")
}
for S in $STRATEGIES; do
    SARGS=$(strategy_args "$S")
    LIMIT=$(echo "$SARGS" | sed -n 's/.*--mem \([0-9]*[KMG]\).*/\1/p')
    LIMIT=${LIMIT:-64M}
    SD=$WORK/$S
    rm -rf "$SD"
    mkdir -p "$SD/base"
    BASE=$SD/base
    DS=$SD/ds
    copy_ds "$ORIG" "$DS"
    FLAGS=$TRAIN
    REF=$BASE/run
    # The uninterrupted run, counting what it writes in derived/; a second one (counting
    # checkpoint writes and feature reads: it must write the same checkpoints); runs counting
    # the reads of indices.bin and of derived/; the same with sampled evaluation (enospc-ckpt);
    # and the inference every enospc-infer case compares with.
    shim_env /derived/ "$BASE/derived.count"
    # shellcheck disable=SC2086
    tg_run "$BASE/a" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$BASE/run"
    BASE_MS=$RUN_MS
    base_why=
    if ! bad_end 0 "$BASE/a" || [ "$RC" -ne 0 ]; then
        base_why="the uninterrupted run failed (exit $RC): ${WHY:-$ERRLINE}"
    fi
    N_DERIVED=$(shim_count calls "$BASE/derived.count")
    W_DER=$(shim_count bytes "$BASE/derived.count")
    # the largest derived file, or the feature file's size (a pack or spill file is unnamed)
    D_MAX=$( (file_size "$DS/features.bin"; find "$DS/derived" -type f -printf '%s\n' 2>/dev/null) | sort -n | tail -n 1)
    M_FEAT=0 M_IDX=0 M_DER=0 N_CKPT=0
    if [ -z "$base_why" ]; then
        shim_env .bin.tmp "$BASE/ckpt.count"
        ENVS+=("TIERGNN_IO_FAULT=EIO@0-1T,file=features.bin,after=1000000000000")
        # shellcheck disable=SC2086
        tg_run "$BASE/c" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$BASE/run2"
        M_FEAT=$(matched "$BASE/c")
        N_CKPT=$(shim_count calls "$BASE/ckpt.count")
        # the timed cases draw their moment from the run's length (the first run also probed
        # the device and built the derived files: it is longer)
        BASE_MS=$RUN_MS
        if [ "$RC" -ne 0 ]; then
            base_why="the second uninterrupted run failed (exit $RC): $ERRLINE"
        elif ! same_ckpt "$BASE/run2"; then
            base_why="two uninterrupted runs differ: $WHY"
        fi
    fi
    if [ -z "$base_why" ]; then
        ENVS=("TIERGNN_IO_FAULT=EIO@0-1T,file=indices.bin,after=1000000000000")
        # shellcheck disable=SC2086
        tg_run "$BASE/d" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$BASE/run3"
        M_IDX=$(matched "$BASE/d")
        [ "$RUN_MS" -lt "$BASE_MS" ] && BASE_MS=$RUN_MS
        ENVS=("TIERGNN_IO_FAULT=EIO@0-1T,file=/derived/,after=1000000000000;EIO@0-1T,file=/proc/self/fd/,after=1000000000000")
        # shellcheck disable=SC2086
        tg_run "$BASE/e" train "$DS" --strategy "$S" $SARGS $FLAGS --out "$BASE/run4"
        M_DER=$(matched "$BASE/e")
        ENVS=()
        if want enospc-ckpt; then
            # shellcheck disable=SC2086
            tg_run "$BASE/f" train "$DS" --strategy "$S" $SARGS $TRAIN_SAMPLED_EVAL --out "$BASE/run-ev"
            [ "$RC" -eq 0 ] || base_why="the uninterrupted run with sampled evaluation failed: $ERRLINE"
        fi
        if want enospc-infer; then
            # shellcheck disable=SC2086
            tg_run "$BASE/i" infer "$DS" --checkpoint "$BASE/run" --out "$BASE/pred.i32" --embeddings \
                --strategy "$S" $SARGS --threads 2
            [ "$RC" -eq 0 ] || rm -f "$BASE/pred.i32"
        fi
    fi
    summary="$S ($SARGS; cgroup $LIMIT): uninterrupted run ${BASE_MS} ms; reads through io/ and pread:"
    summary+=" features.bin $M_FEAT, indices.bin $M_IDX, derived/ $M_DER; checkpoint writes"
    summary+=" $N_CKPT; writes in derived/ $N_DERIVED ($W_DER bytes)"
    echo "== $summary"
    echo "== $summary" >>"$DETAILS"
    if [ -n "$base_why" ]; then
        echo "   $base_why"
        echo "   $base_why" >>"$DETAILS"
    fi
    for c in $CASES; do
        for round in $(seq "$ROUNDS"); do
            C=$SD/$c/r$round
            rm -rf "$C"
            mkdir -p "$C"
            rng_init "$S" "$c" "$round"
            FLAGS=$TRAIN
            REF=$BASE/run
            if [ -z "$base_why" ]; then
                run_case "$c"
            else
                CELL=FAIL:baseline
                NOTE=$base_why
            fi
            CELLS[$c/$S]+="$CELL "
            if [[ "$CELL" == FAIL* ]]; then
                fails=$((fails + 1))
                NOTE+=" [kept: $C]"
            else
                rm -rf "$C"
            fi
            line="$S $c #$round: $CELL -- $NOTE"
            echo "   $line"
            echo "$line" >>"$DETAILS"
        done
        rmdir "$SD/$c" 2>/dev/null
    done
    [[ " $RANKS2 " == *" $S "* ]] && run_column2
done
elapsed=$(($(date +%s) - t_start))

# A cell: its rounds' outcomes, each once, with the count when the rounds differ.
cell() {
    echo "$1" | tr ' ' '\n' | sed '/^$/d' | sort | uniq -c | sort -k1,1nr -k2 |
        awk -v n="$ROUNDS" '{ w[NR] = $2; c[NR] = $1 } END {
            if (NR == 1) { printf "%s", w[1]; exit }
            for (i = 1; i <= NR; i++) printf "%s%s x%d", (i > 1 ? ", " : ""), w[i], c[i] }'
}

# The table: rows are cases, columns strategies.
{
    commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
    dirty=
    [ -n "$(git -C "$root" status --porcelain -- src include 2>/dev/null)" ] && dirty=" (with uncommitted changes in src/ or include/)"
    echo "Fault and kill matrix, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit$dirty,"
    echo "FAULT_SEED=$SEED, $ROUNDS round(s) per cell, $((elapsed / 60)) min $((elapsed % 60)) s"
    echo
    # a strategy's 2-rank column ("S x2") follows its own; "-" where the case has no 2-rank form
    printf '| %s |' case
    for S in $STRATEGIES; do
        printf ' %s |' "$S"
        [[ " $COLS2 " == *" $S "* ]] && printf ' %s x2 |' "$S"
    done
    echo
    printf '|---|'
    for S in $STRATEGIES; do
        printf -- '---|'
        [[ " $COLS2 " == *" $S "* ]] && printf -- '---|'
    done
    echo
    for c in $CASES; do
        printf '| %s |' "$c"
        for S in $STRATEGIES; do
            printf ' %s |' "$(cell "${CELLS[$c/$S]:-}")"
            if [[ " $COLS2 " == *" $S "* ]]; then
                if [[ " $CASES2 " == *" $c "* ]]; then printf ' %s |' "$(cell "${CELLS[$c/$S@2]:-}")"; else printf ' - |'; fi
            fi
        done
        echo
    done
} >"$OUT.tmp"
{
    echo
    echo "Details (one line per case and round; replay one with FAULT_SEED=$SEED FAULT_STRATEGIES=S"
    echo "FAULT_CASES=C FAULT_ROUNDS=R):"
    echo
    sed 's/^/    /' "$DETAILS"
} >>"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo
sed -n '1,/^Details/p' "$OUT" | sed '$d'
echo "faults: $fails FAIL(s); table and details in $OUT"
[ "$fails" -eq 0 ]
