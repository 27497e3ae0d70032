#!/usr/bin/env bash
# The README's two set-up commands on a fresh Debian 12, as a new user runs them (make fresh-check).
#
# A debootstrap minbase chroot of bookworm from this machine's Debian mirror with git, make and
# ca-certificates only; the project cloned into it at /work/tiergnn (the committed HEAD) with
# ../shared copied beside it at /work/shared; /proc, /dev and /sys bound in, /sys/fs/cgroup
# deliberately not (no cgroup can be written there: membudget runs without a limit, as in many
# containers and for users who are not root). Then, as root, in a clean environment:
# `make check`, then `make demo`. Each must pass; no process may be left in the chroot after
# either, and more than FRESH_MAX_PROCS at once is a runaway (a fork bomb): every process in the
# chroot is killed and the check fails. Prints the figures (tests run and skipped per build, the
# skip lines inside tests, minutes) and writes them to FRESH_DIR/summary.txt.
#
#   tests/fresh/run.sh
#
# Needs root and the Debian mirror. Environment:
#   FRESH_DIR        where the chroot goes (default /var/tmp/tiergnn-fresh; removed first)
#   FRESH_MIRROR     Debian mirror (default: the first one in /etc/apt/sources.list*)
#   FRESH_SUITE      default bookworm
#   FRESH_TIMEOUT    seconds per command (default 5400, CI's 90 minutes)
#   FRESH_MAX_PROCS  default 400
#   FRESH_KEEP=1     keep the chroot afterwards (it is removed when the check passes)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
shared=$(cd "$repo/../shared" 2>/dev/null && pwd || true)
FRESH_DIR=${FRESH_DIR:-/var/tmp/tiergnn-fresh}
FRESH_SUITE=${FRESH_SUITE:-bookworm}
FRESH_TIMEOUT=${FRESH_TIMEOUT:-5400}
FRESH_MAX_PROCS=${FRESH_MAX_PROCS:-400}
root=$FRESH_DIR/root
summary=$FRESH_DIR/summary.txt

die() {
    echo "fresh-check: $*" >&2
    exit 2
}
say() { echo "fresh-check: $*" | tee -a "$summary"; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount)"
[ -n "$shared" ] || die "no ../shared beside $repo: the tests and the demo reach it by path"
case "$FRESH_DIR" in /*) ;; *) die "FRESH_DIR must be an absolute path, got '$FRESH_DIR'" ;; esac

# The first Debian (not security) mirror this machine's apt uses: deb822 "URIs:" or one-line "deb".
mirror() {
    local f u
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        u=$(sed -n -e 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' \
                -e 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' "$f" |
            grep -E '/debian/?$' | head -n 1)
        [ -n "$u" ] && { echo "${u%/}"; return; }
    done
    echo http://deb.debian.org/debian
}
MIRROR=${FRESH_MIRROR:-$(mirror)}

# ---------------------------------------------------------------- mounts and processes

unmount_all() {
    local m
    # deepest first; lazy, so a busy mount cannot stop the clean-up
    for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/self/mounts | sort -r); do
        umount -l "$m" 2>/dev/null || true
    done
}

# Pids of the processes whose root directory is the chroot's.
chroot_pids() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$root" ] && echo "${p#/proc/}"
    done
    return 0
}

kill_chroot() {
    local pids
    for _ in 1 2 3 4 5; do
        pids=$(chroot_pids)
        [ -z "$pids" ] && return 0
        kill -KILL $pids 2>/dev/null || true
        sleep 1
    done
}

cleanup() {
    [ -n "${watch_pid:-}" ] && kill "$watch_pid" 2>/dev/null || true
    [ -d "$root" ] && kill_chroot
    unmount_all
}
trap cleanup EXIT

# Counts the chroot's processes every 2 s; past FRESH_MAX_PROCS it kills them all and leaves a mark.
watchdog() {
    local n
    while sleep 2; do
        n=$(chroot_pids | wc -l)
        if [ "$n" -gt "$FRESH_MAX_PROCS" ]; then
            {
                echo "$n processes in the chroot (more than FRESH_MAX_PROCS=$FRESH_MAX_PROCS): a runaway; the most common:"
                for p in $(chroot_pids | head -n 2000); do tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null; echo; done |
                    cut -c1-160 | sort | uniq -c | sort -rn | head -n 5
            } > "$FRESH_DIR/runaway.txt"
            kill_chroot
        fi
    done
}

# ---------------------------------------------------------------- the chroot

# Removes the chroot unless something is still mounted in it (then removing would reach the
# host's /dev); --one-file-system as a second guard.
remove_root() {
    [ -d "$root" ] || return 0
    kill_chroot
    unmount_all
    if awk -v r="$root/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
        die "something is still mounted under $root; not removing it"
    fi
    rm -rf --one-file-system "$root"
}
remove_root
rm -rf --one-file-system "$FRESH_DIR"
mkdir -p "$FRESH_DIR"
FRESH_DIR=$(realpath "$FRESH_DIR")
root=$FRESH_DIR/root
summary=$FRESH_DIR/summary.txt
: > "$summary"
head=$(git -C "$repo" rev-parse --short HEAD)
say "testing commit $head of $repo (the committed tree: a clone)"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] ||
    say "note: $repo has uncommitted changes; they are not in the clone"
command -v debootstrap > /dev/null || {
    echo "installing debootstrap"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
}
t0=$(date +%s)
echo "debootstrap --variant=minbase $FRESH_SUITE from $MIRROR into $root"
debootstrap --variant=minbase --include=git,make,ca-certificates "$FRESH_SUITE" "$root" "$MIRROR" \
    > "$FRESH_DIR/debootstrap.log" 2>&1 || {
    tail -n 20 "$FRESH_DIR/debootstrap.log" >&2
    die "debootstrap failed (log: $FRESH_DIR/debootstrap.log)"
}
{
    echo "deb $MIRROR $FRESH_SUITE main"
    echo "deb $MIRROR $FRESH_SUITE-updates main"
    echo "deb ${MIRROR%/debian}/debian-security $FRESH_SUITE-security main"
} > "$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
say "chroot made in $(( $(date +%s) - t0 )) s: $(chroot "$root" dpkg-query -W -f='.' | wc -c) packages"

mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
mount --bind /sys "$root/sys" # not --rbind: /sys/fs/cgroup stays an empty directory
if [ -n "$(ls -A "$root/sys/fs/cgroup" 2>/dev/null)" ]; then
    die "$root/sys/fs/cgroup is not empty: the chroot would have a cgroup"
fi
mkdir -p "$root/work" "$root/mnt/origin"
mount --bind -o ro "$repo" "$root/mnt/origin"
cp -a "$shared" "$root/work/shared"

# A login's clean environment: none of this shell's variables (OPENBLAS_CORETYPE, a PATH with
# another python3) reach the commands.
in_chroot() {
    chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$1"
}
in_chroot "git config --global --add safe.directory /mnt/origin/.git &&
           git clone -q --no-hardlinks /mnt/origin /work/tiergnn" || die "git clone inside the chroot failed"
umount "$root/mnt/origin"

# ---------------------------------------------------------------- the two commands

watchdog &
watch_pid=$!
failed=0
run_make() { # TARGET
    local t s rc=0 left
    t=$(date +%s)
    echo "== make $1 in the chroot (log: $FRESH_DIR/make-$1.log)"
    timeout -k 30 "$FRESH_TIMEOUT" chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/bash -c "cd /work/tiergnn && make $1" > "$FRESH_DIR/make-$1.log" 2>&1 || rc=$?
    s=$(( $(date +%s) - t ))
    left=$(chroot_pids | wc -l)
    if [ "$left" -gt 0 ]; then
        say "make $1 left $left process(es) running in the chroot:"
        for p in $(chroot_pids | head -n 20); do tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null; echo; done |
            cut -c1-160 | tee -a "$summary"
        kill_chroot
        failed=1
    fi
    if [ -f "$FRESH_DIR/runaway.txt" ]; then
        say "make $1: runaway stopped:"
        tee -a "$summary" < "$FRESH_DIR/runaway.txt"
        [ "$rc" = 0 ] && rc=1
    fi
    say "make $1: exit status $rc in $((s / 60)) min $((s % 60)) s"
    [ "$rc" = 0 ] || {
        tail -n 30 "$FRESH_DIR/make-$1.log"
        failed=1
    }
    return 0
}

run_make check
# The figures: per build, ctest's totals and the tests it skipped (exit 77), then the skip lines
# printed inside tests that passed (a case a machine cannot run: "skipped: ...", "SKIP: ..."; not
# the sub-tests a variant leaves out by design, "SKIP x (variant gemm)", tests/support/tg_test.h).
k=0
for b in build build-asan; do
    k=$((k + 1))
    tot=$(grep 'tests failed out of' "$FRESH_DIR/make-check.log" | sed -n "${k}p")
    say "$b: ${tot:-no ctest summary}"
    skipped=$(awk -v k="$k" '/tests failed out of/ { n++ } n == k && /\(Skipped\)/' "$FRESH_DIR/make-check.log" | wc -l)
    say "$b: $skipped test program(s) skipped (exit 77)"
    log=$root/work/tiergnn/$b/Testing/Temporary/LastTest.log
    [ -f "$log" ] || continue
    grep -E '^\s*(skipped|SKIP|note: .*skipped)' "$log" | grep -vE '^SKIP \w+ \(variant \w+\)$' |
        sed 's/^ *//' | cut -c1-200 | sort | uniq -c | sort -rn > "$FRESH_DIR/$b-skips.txt" || true
    say "$b: $(awk '{ s += $1 } END { print s + 0 }' "$FRESH_DIR/$b-skips.txt") skip line(s) inside tests, by kind:"
    head -n 12 "$FRESH_DIR/$b-skips.txt" | tee -a "$summary"
done
run_make demo
grep -E '^== (epoch|checkpoints)|checkpoints (identical|DIFFERENT)' "$FRESH_DIR/make-demo.log" |
    tee -a "$summary" || true

kill "$watch_pid" 2>/dev/null || true
watch_pid=
if [ "$failed" = 0 ]; then
    say "PASS (commit $head, $(( ($(date +%s) - t0) / 60 )) min in all)"
    [ "${FRESH_KEEP:-0}" = 1 ] || remove_root
    exit 0
fi
say "FAIL (commit $head; the chroot is kept in $root)"
exit 1
