#!/usr/bin/env bash
# bench_import.sh - how fast `tiergnn import` writes, relative to what the disk can do, and how
# much memory it takes relative to --mem.
#
#   bench/bench_import.sh [WORKDIR]
#
# Generates a NumPy tree, an OGB-layout CSV tree and a text edge list of a few GB in WORKDIR (default ./bench-import-tmp,
# on the disk being measured), then for each:
#   - checks the imported counts against what was generated and runs `tiergnn verify` (a fast
#     wrong import is no result),
#   - reports dataset bytes / wall time, and that as a ratio of `dd` writing the same number of
#     bytes sequentially to the same directory (the better of oflag=direct and conv=fdatasync),
#   - reports all bytes the import wrote (dataset + external-sort runs, from GNU time's %O),
#   - reports peak RSS (GNU time's %M) against --mem.
# Everything in WORKDIR is deleted at the end unless KEEP=1.
#
# Environment: TG_BIN (default build/tiergnn), MEMS (--mem values, default "256M 1G"), INPUTS
# (which inputs, default "npy ogb edgelist"),
# NPY_NODES/NPY_DIM/NPY_EDGES (4000000/128/40000000), OGB_NODES/OGB_DIM/OGB_EDGES
# (1000000/128/10000000), EL_NODES/EL_EDGES (4000000/120000000),
# DROP_CACHES=1 to drop the page cache before each run (root only; otherwise inputs may be cached,
# so the figures are for writing, with reading from memory).
set -euo pipefail

WORK=${1:-$PWD/bench-import-tmp}
BIN=${TG_BIN:-build/tiergnn}
MEMS=${MEMS:-"256M 1G"}
INPUTS=${INPUTS:-"npy ogb edgelist"}
NPY_NODES=${NPY_NODES:-4000000}
NPY_DIM=${NPY_DIM:-128}
NPY_EDGES=${NPY_EDGES:-40000000}
OGB_NODES=${OGB_NODES:-1000000}
OGB_DIM=${OGB_DIM:-128}
OGB_EDGES=${OGB_EDGES:-10000000}
EL_NODES=${EL_NODES:-4000000}
EL_EDGES=${EL_EDGES:-120000000}
TIME=/usr/bin/time

[ -x "$BIN" ] || { echo "bench_import: $BIN not found (build first or set TG_BIN)" >&2; exit 1; }
[ -x "$TIME" ] || { echo "bench_import: needs GNU time at $TIME" >&2; exit 1; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------- input generator
cat > "$WORK/gen.c" <<'EOF'
/* Writes a NumPy tree (feat f32, labels i64, edge_index i64 (2,E), splits) or a text edge list.
 * Ids are xorshift-random in [0, N); features are k/1000 for k in -1000..1000. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t s = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

static FILE *npy(const char *dir, const char *name, const char *descr, const char *shape)
{
    char path[4096], dict[256], hdr[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    int dn = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t h = (size_t)dn + 1;
    h += (64 - (10 + h) % 64) % 64;
    memset(hdr, ' ', h);
    memcpy(hdr, dict, (size_t)dn);
    hdr[h - 1] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)h,
                             (unsigned char)(h >> 8)};
    fwrite(pre, 1, 10, f);
    fwrite(hdr, 1, h, f);
    return f;
}

static void ids(FILE *f, uint64_t lo, uint64_t hi, uint64_t mod)
{
    int64_t buf[8192];
    for (uint64_t i = lo; i < hi;) {
        size_t k = 0;
        for (; k < 8192 && i < hi; k++, i++)
            buf[k] = mod ? (int64_t)(next() % mod) : (int64_t)i;
        fwrite(buf, 8, k, f);
    }
}

int main(int argc, char **argv)
{
    char shape[128];
    if (argc == 6 && !strcmp(argv[1], "npy")) {
        uint64_t n = strtoull(argv[3], 0, 10), d = strtoull(argv[4], 0, 10);
        uint64_t e = strtoull(argv[5], 0, 10);
        snprintf(shape, sizeof shape, "(%llu, %llu)", (unsigned long long)n, (unsigned long long)d);
        FILE *f = npy(argv[2], "feat.npy", "<f4", shape);
        float *row = malloc(d * sizeof *row);
        for (uint64_t v = 0; v < n; v++) {
            for (uint64_t j = 0; j < d; j++)
                row[j] = (float)((int64_t)(next() % 2001) - 1000) * 1e-3f;
            fwrite(row, 4, d, f);
        }
        fclose(f);
        snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)n);
        f = npy(argv[2], "labels.npy", "<i8", shape);
        ids(f, 0, n, 16);
        fclose(f);
        snprintf(shape, sizeof shape, "(2, %llu)", (unsigned long long)e);
        f = npy(argv[2], "edge_index.npy", "<i8", shape);
        ids(f, 0, 2 * e, n);
        fclose(f);
        const char *names[3] = {"train_idx.npy", "valid_idx.npy", "test_idx.npy"};
        uint64_t b[4] = {0, n / 2, 3 * n / 4, n};
        for (int k = 0; k < 3; k++) {
            snprintf(shape, sizeof shape, "(%llu,)", (unsigned long long)(b[k + 1] - b[k]));
            f = npy(argv[2], names[k], "<i8", shape);
            ids(f, b[k], b[k + 1], 0);
            fclose(f);
        }
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "edgelist")) {
        FILE *f = fopen(argv[2], "w");
        if (!f) {
            perror(argv[2]);
            return 1;
        }
        setvbuf(f, NULL, _IOFBF, 1 << 20);
        uint64_t n = strtoull(argv[3], 0, 10), e = strtoull(argv[4], 0, 10);
        fprintf(f, "# bench_import.sh: %llu edges over ids < %llu\n", (unsigned long long)e,
                (unsigned long long)n);
        for (uint64_t i = 0; i < e; i++) {
            uint64_t a = next() % n, b = next() % n;
            fprintf(f, "%llu\t%llu\n", (unsigned long long)a, (unsigned long long)b);
        }
        fclose(f);
        return 0;
    }
    if (argc == 6 && !strcmp(argv[1], "ogb")) { /* OGB raw layout, plain CSV */
        uint64_t n = strtoull(argv[3], 0, 10), d = strtoull(argv[4], 0, 10);
        uint64_t e = strtoull(argv[5], 0, 10);
        char path[4096];
        snprintf(path, sizeof path, "%s/raw/node-feat.csv", argv[2]);
        FILE *f = fopen(path, "w");
        if (!f) {
            perror(path);
            return 1;
        }
        setvbuf(f, NULL, _IOFBF, 1 << 20);
        for (uint64_t v = 0; v < n; v++)
            for (uint64_t j = 0; j < d; j++) {
                int64_t k = (int64_t)(next() % 2001) - 1000;
                fprintf(f, "%s%lld.%03lld%c", k < 0 ? "-" : "", (long long)(k < 0 ? -k : k) / 1000,
                        (long long)(k < 0 ? -k : k) % 1000, j + 1 < d ? ',' : '\n');
            }
        fclose(f);
        snprintf(path, sizeof path, "%s/raw/node-label.csv", argv[2]);
        f = fopen(path, "w");
        for (uint64_t v = 0; v < n; v++)
            fprintf(f, "%llu\n", (unsigned long long)(next() % 16));
        fclose(f);
        snprintf(path, sizeof path, "%s/raw/edge.csv", argv[2]);
        f = fopen(path, "w");
        setvbuf(f, NULL, _IOFBF, 1 << 20);
        for (uint64_t i = 0; i < e; i++) {
            uint64_t a = next() % n, b = next() % n;
            fprintf(f, "%llu,%llu\n", (unsigned long long)a, (unsigned long long)b);
        }
        fclose(f);
        snprintf(path, sizeof path, "%s/raw/num-node-list.csv", argv[2]);
        f = fopen(path, "w");
        fprintf(f, "%llu\n", (unsigned long long)n);
        fclose(f);
        snprintf(path, sizeof path, "%s/raw/num-edge-list.csv", argv[2]);
        f = fopen(path, "w");
        fprintf(f, "%llu\n", (unsigned long long)e);
        fclose(f);
        const char *names[3] = {"train", "valid", "test"};
        uint64_t b[4] = {0, n / 2, 3 * n / 4, n};
        for (int k = 0; k < 3; k++) {
            snprintf(path, sizeof path, "%s/split/random/%s.csv", argv[2], names[k]);
            f = fopen(path, "w");
            for (uint64_t v = b[k]; v < b[k + 1]; v++)
                fprintf(f, "%llu\n", (unsigned long long)v);
            fclose(f);
        }
        return 0;
    }
    fprintf(stderr, "usage: gen npy DIR N D E | gen edgelist FILE N E | gen ogb DIR N D E\n");
    return 2;
}
EOF
cc -O2 -o "$WORK/gen" "$WORK/gen.c"

echo "# generating inputs in $WORK" >&2
case " $INPUTS " in *" npy "*)
    mkdir -p "$WORK/npy"
    "$WORK/gen" npy "$WORK/npy" "$NPY_NODES" "$NPY_DIM" "$NPY_EDGES" ;;
esac
case " $INPUTS " in *" edgelist "*)
    "$WORK/gen" edgelist "$WORK/edges.txt" "$EL_NODES" "$EL_EDGES" ;;
esac
case " $INPUTS " in *" ogb "*)
    mkdir -p "$WORK/ogb/raw" "$WORK/ogb/split/random"
    "$WORK/gen" ogb "$WORK/ogb" "$OGB_NODES" "$OGB_DIM" "$OGB_EDGES" ;;
esac
sync

drop_caches() {
    if [ "${DROP_CACHES:-0}" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
}

dataset_bytes() { # sum of the dataset's files
    du -sb "$1" | cut -f1
}

meta() { # meta KEY DIR
    sed -n "s/^$1 = //p" "$2/meta.txt"
}

# dd baseline: write BYTES sequentially to WORK twice, with O_DIRECT (the disk's raw rate; the
# importer writes its big files that way) and through the page cache with an fsync at the end
# (like the importer's commit); return the better rate in MB/s (1e6 bytes). On this VM the
# page-cache write is often the slower one by far; taking the better is the stricter yardstick.
dd_rate() {
    local bytes=$1 count=$(( ($1 + 8388607) / 8388608 )) best=0 r t0 t1 flags
    for flags in oflag=direct conv=fdatasync; do
        drop_caches
        sync
        t0=$(date +%s.%N)
        dd if=/dev/zero of="$WORK/dd.bin" bs=8M count="$count" $flags status=none
        t1=$(date +%s.%N)
        rm -f "$WORK/dd.bin"
        r=$(echo "$count $t0 $t1" | awk '{ printf "%.1f", $1 * 8388608 / ($3 - $2) / 1e6 }')
        best=$(echo "$best $r" | awk '{ print ($2 > $1) ? $2 : $1 }')
    done
    echo "$best"
}

echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) before the runs; cpu = user+sys seconds"
printf '%-9s %-6s %10s %8s %7s %10s %9s %8s %12s %10s %8s\n' input mem dataset wall cpu "MB/s" "dd MB/s" \
    ratio "all writes" "RSS MiB" "RSS/mem"
run() { # run NAME MEM EXPECT_EDGES ARGS...
    local name=$1 mem=$2 want_edges=$3
    shift 3
    local out="$WORK/out-$name"
    rm -rf "$out"
    drop_caches
    "$TIME" -f "%e %M %O %U %S" -o "$WORK/time.txt" "$BIN" --quiet import "$out" "$@" --mem "$mem" \
        > /dev/null
    # Check before reporting: edges and nodes must be what was generated.
    local edges nodes
    edges=$(meta num_edges "$out")
    nodes=$(meta num_nodes "$out")
    if [ "$edges" != "$want_edges" ]; then
        echo "bench_import: $name imported $edges edges, expected $want_edges" >&2
        exit 1
    fi
    if [ "$name" = ogb ] && [ "$nodes" != "$OGB_NODES" ]; then
        echo "bench_import: ogb imported $nodes nodes, expected $OGB_NODES" >&2
        exit 1
    fi
    if [ "$name" = npy ] && [ "$nodes" != "$NPY_NODES" ]; then
        echo "bench_import: npy imported $nodes nodes, expected $NPY_NODES" >&2
        exit 1
    fi
    # and the whole dataset must pass `tiergnn verify` (sizes, checksums, ranges; not timed)
    "$BIN" --quiet verify "$out" > /dev/null || { echo "bench_import: $name: verify failed" >&2; exit 1; }
    local bytes wall rss outblk usr sys dd mem_b
    bytes=$(dataset_bytes "$out")
    read -r wall rss outblk usr sys < "$WORK/time.txt"
    rm -rf "$out"
    dd=$(dd_rate "$bytes")
    mem_b=$(numfmt --from=iec "$mem")
    awk -v n="$name" -v m="$mem" -v b="$bytes" -v w="$wall" -v dd="$dd" -v r="$rss" \
        -v o="$outblk" -v mb="$mem_b" -v cpu="$(echo "$usr $sys" | awk '{ print $1 + $2 }')" 'BEGIN {
        rate = b / w / 1e6;
        printf "%-9s %-6s %8.2fGB %7.1fs %6.1fs %10.1f %9.1f %8.2f %10.2fGB %10.0f %8.2f\n",
            n, m, b / 1e9, w, cpu, rate, dd, rate / dd, o * 512 / 1e9, r / 1024, r * 1024 / mb }'
}

for mem in $MEMS; do
    for input in $INPUTS; do
        case $input in
        npy) run npy "$mem" "$NPY_EDGES" --from npy "$WORK/npy" ;;
        ogb) run ogb "$mem" "$OGB_EDGES" --from ogb "$WORK/ogb" --split random ;;
        edgelist) run edgelist "$mem" "$EL_EDGES" --from edgelist "$WORK/edges.txt" --feat-dim 64 ;;
        esac
    done
done
