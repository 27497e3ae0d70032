/* bench_pack - throughput of batched feature packing (tg_pack, store/pack) on a real feature file
 * (bench/README.md, "Batched feature packing").
 *
 *     bench_pack FEATURES.BIN --nodes N --row-bytes B [--targets 7000000] [--outs 40]
 *                [--chunks OUTS] [--shuffled 1] [--ram-rows 0] [--part-mib 256]
 *                [--threads 4] [--seed 1] [--dir DIR] [--baseline] [--check 100000]
 *
 * Random targets shaped like DiskGNN's layout: --targets rows spread evenly over --chunks chunks
 * (each draws its nodes uniformly; a node may go to several chunks and twice to one), chunk c
 * being region c / outs of file output c % outs (--chunks 40 --outs 1: one file of 40 chunks);
 * the first --shuffled chunks place their rows at random positions (a disk cache ordered by
 * MinHash), the others in node order (packed chunks); --ram-rows more go to one RAM output (the
 * CPU cache). Outputs are O_TMPFILE files in --dir (default: the feature file's directory), so
 * nothing is left behind. Partitions of --part-mib MiB of rows. Printed: the time, the read and
 * write bandwidth and tg_pack's stage times. --baseline first measures the disk alone: an
 * O_DIRECT sequential read of the whole feature file through io/, and an O_DIRECT sequential
 * write of the packed bytes to one file. --check then compares that many random targets'
 * bytes (pread) with the feature file's rows; any difference fails the run.
 */
#include "tiergnn/io.h"
#include "tiergnn/pack.h"
#include "tiergnn/util.h"

#define BENCH_NAME "bench_pack"
#include "bench_common.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    tg_pack_target_t *t;
    size_t n;
    size_t *first; /* partition p: t[first[p] .. first[p + 1]) */
} plan_t;

static int64_t plan_targets(void *ctx, uint32_t p, tg_pack_target_t *dst, size_t cap)
{
    plan_t *pl = ctx;
    size_t n = pl->first[p + 1] - pl->first[p];
    memcpy(dst, pl->t + pl->first[p], n * sizeof *dst);
    return (int64_t)n;
}

/* A region of output o from byte base: rows nodes sorted (a chunk), positions in order or
 * shuffled (a disk cache). */
static void draw_output(plan_t *pl, tg_rng_t *r, uint32_t o, uint64_t base, uint64_t rows,
                        uint64_t N, size_t rb, int shuffled)
{
    uint32_t *nodes = xmalloc(rows * sizeof *nodes), *pos = xmalloc(rows * sizeof *pos);
    uint32_t *cnt = calloc(N + 1, sizeof *cnt);
    if (!cnt) die("out of memory");
    for (uint64_t i = 0; i < rows; i++)
        cnt[tg_rng_below(r, N) + 1]++;
    for (uint64_t v = 0, i = 0; v < N; v++)
        for (uint32_t k = 0; k < cnt[v + 1]; k++)
            nodes[i++] = (uint32_t)v;
    for (uint64_t i = 0; i < rows; i++)
        pos[i] = (uint32_t)i;
    if (shuffled) tg_rng_shuffle_u32(r, pos, rows);
    for (uint64_t i = 0; i < rows; i++)
        pl->t[pl->n++] = (tg_pack_target_t){nodes[i], o, base + (uint64_t)pos[i] * rb};
    free(cnt);
    free(nodes);
    free(pos);
}

static double mbps(uint64_t bytes, double s)
{
    return s > 0 ? (double)bytes / s / 1e6 : 0;
}

/* The disk alone: the whole feature file read sequentially with O_DIRECT (8 MiB requests, the
 * same queue shape as tg_pack's), then `bytes` written sequentially to a fresh file + fdatasync. */
static void baseline(const char *feat, const char *dir, uint64_t bytes)
{
    tg_io_file_t *f;
    tg_io_t *io;
    tg_io_opts_t o = {.depth = 8, .max_read_bytes = 1 << 20};
    if (tg_io_file_open(&f, feat, 0) < 0 || tg_io_create(&io, &o) < 0) die(tg_errmsg());
    size_t chunk = (size_t)64 << 20, req = (size_t)8 << 20;
    char *buf = tg_aligned_alloc(4096, chunk);
    uint64_t size = tg_io_file_size(f);
    double t0 = tg_now();
    for (uint64_t off = 0; off < size; off += chunk) {
        tg_io_req_t r[8];
        size_t n = 0;
        for (size_t b = 0; b < chunk && off + b < size; b += req, n++)
            r[n] = (tg_io_req_t){.file = f,
                                 .off = off + b,
                                 .len = (size_t)TG_MIN(req, size - off - b),
                                 .dst = buf + b};
        if (tg_io_read_batch(io, r, n) < 0) die(tg_errmsg());
    }
    double tr = tg_now() - t0;
    tg_io_destroy(io);
    tg_io_file_close(f);
    int fd = open(dir, O_TMPFILE | O_WRONLY | O_DIRECT, 0600);
    if (fd < 0) die("cannot create an O_DIRECT temporary file for the write baseline");
    memset(buf, 0x5a, chunk);
    bytes = bytes / 4096 * 4096;
    t0 = tg_now();
    for (uint64_t off = 0; off < bytes; off += chunk)
        if (tg_pwrite_full(fd, buf, (size_t)TG_MIN(chunk, bytes - off), off, "baseline") < 0)
            die(tg_errmsg());
    if (fdatasync(fd) < 0) die("fdatasync failed");
    double tw = tg_now() - t0;
    close(fd);
    free(buf);
    printf("baseline: read %.2f GB in %.2f s = %.0f MB/s, write %.2f GB in %.2f s = %.0f MB/s "
           "(O_DIRECT, sequential, 64 MiB calls); one after the other: %.2f s\n",
           size / 1e9, tr, mbps(size, tr), bytes / 1e9, tw, mbps(bytes, tw), tr + tw);
}

/* n random targets: output bytes == feature row. */
static void check(const plan_t *pl, const tg_pack_out_t *outs, const char *feat, size_t rb,
                  uint64_t n, uint64_t seed)
{
    int ffd = open(feat, O_RDONLY);
    if (ffd < 0) die("cannot open the feature file to check");
    char *a = xmalloc(rb), *b = xmalloc(rb);
    tg_rng_t r;
    tg_rng_seed2(&r, seed, 99);
    for (uint64_t i = 0; i < n && pl->n; i++) {
        const tg_pack_target_t *t = &pl->t[tg_rng_below(&r, pl->n)];
        if (tg_pread_full(ffd, a, rb, (uint64_t)t->node * rb, feat) < 0) die(tg_errmsg());
        if (outs[t->out].mem)
            memcpy(b, (char *)outs[t->out].mem + t->off, rb);
        else if (tg_pread_full(outs[t->out].fd, b, rb, t->off, "output") < 0)
            die(tg_errmsg());
        if (memcmp(a, b, rb)) {
            fprintf(stderr, "output %u offset %llu: not node %u's row\n", t->out,
                    (unsigned long long)t->off, t->node);
            die("check failed");
        }
    }
    close(ffd);
    free(a);
    free(b);
    printf("check: %llu random targets equal the feature file's rows\n", (unsigned long long)n);
}

int main(int argc, char **argv)
{
    const char *feat = NULL, *dir = NULL;
    uint64_t N = 0, rb = 0, targets = 7000000, nouts = 40, chunks = 0, shuffled = 1, ram_rows = 0;
    uint64_t part_mib = 256, threads = 4, seed = 1, ncheck = 100000;
    int do_base = 0;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t *dst = !strcmp(k, "--nodes")       ? &N
                        : !strcmp(k, "--row-bytes") ? &rb
                        : !strcmp(k, "--targets")   ? &targets
                        : !strcmp(k, "--outs")      ? &nouts
                        : !strcmp(k, "--chunks")    ? &chunks
                        : !strcmp(k, "--shuffled")  ? &shuffled
                        : !strcmp(k, "--ram-rows")  ? &ram_rows
                        : !strcmp(k, "--part-mib")  ? &part_mib
                        : !strcmp(k, "--threads")   ? &threads
                        : !strcmp(k, "--seed")      ? &seed
                        : !strcmp(k, "--check")     ? &ncheck
                                                    : NULL;
        if (dst) {
            if (!v || tg_parse_u64(v, dst, k) < 0) die(v ? tg_errmsg() : "missing value");
            i++;
        } else if (!strcmp(k, "--dir") && v) {
            dir = argv[++i];
        } else if (!strcmp(k, "--baseline")) {
            do_base = 1;
        } else if (k[0] != '-' && !feat) {
            feat = k;
        } else {
            die("usage: bench_pack FEATURES.BIN --nodes N --row-bytes B [options] (see the top "
                "of bench/bench_pack.c)");
        }
    }
    if (!feat || !N || !rb || !nouts || nouts > 100000 || N > UINT32_MAX) die("bad arguments");
    char dbuf[4096];
    if (!dir) {
        snprintf(dbuf, sizeof dbuf, "%s", feat);
        char *slash = strrchr(dbuf, '/');
        if (slash)
            *slash = 0;
        else
            snprintf(dbuf, sizeof dbuf, ".");
        dir = dbuf;
    }
    tg_log_set_level(TG_LOG_INFO);

    /* the targets */
    uint32_t K = (uint32_t)nouts + (ram_rows ? 1 : 0);
    plan_t pl = {.t = xmalloc((targets + ram_rows) * sizeof *pl.t)};
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    double t0 = tg_now();
    if (!chunks) chunks = nouts;
    uint64_t per_chunk = (targets + chunks - 1) / chunks;
    for (uint64_t c = 0; c < chunks; c++) /* chunk c: output c % nouts, region c / nouts */
        draw_output(&pl, &r, (uint32_t)(c % nouts), c / nouts * per_chunk * rb,
                    targets / chunks + (c < targets % chunks), N, rb, c < shuffled);
    if (ram_rows) draw_output(&pl, &r, (uint32_t)nouts, 0, ram_rows, N, rb, 1);
    qsort(pl.t, pl.n, sizeof *pl.t, tg_pack_target_cmp);
    uint64_t rows_per_part = TG_MAX(1, (part_mib << 20) / rb);
    uint32_t P = (uint32_t)((N + rows_per_part - 1) / rows_per_part);
    tg_pack_part_t *parts = xmalloc(P * sizeof *parts);
    pl.first = xmalloc((P + 1) * sizeof *pl.first);
    for (uint32_t p = 0, k = 0; p < P; p++) {
        parts[p].lo = p * rows_per_part;
        parts[p].hi = TG_MIN(N, parts[p].lo + rows_per_part);
        pl.first[p] = k;
        while (k < pl.n && pl.t[k].node < parts[p].hi)
            k++;
        parts[p].ntargets = k - pl.first[p];
        pl.first[p + 1] = k;
    }
    printf("plan: %zu targets (%.2f GB) in %llu chunks (%llu shuffled) over %u file outputs%s, %u "
           "partitions of "
           "%llu rows, drawn in %.2f s\n",
           pl.n, pl.n * (double)rb / 1e9, (unsigned long long)chunks, (unsigned long long)shuffled,
           (unsigned)nouts, ram_rows ? " + 1 RAM output" : "", P, (unsigned long long)rows_per_part,
           tg_now() - t0);

    /* the outputs */
    tg_pack_out_t *outs = calloc(K, sizeof *outs);
    for (uint32_t o = 0; o < nouts; o++)
        if ((outs[o].fd = open(dir, O_TMPFILE | O_RDWR, 0600)) < 0)
            die("cannot create an O_TMPFILE output in --dir");
    if (ram_rows) {
        outs[nouts].size = ram_rows * rb;
        outs[nouts].mem = xmalloc(ram_rows * rb);
    }
    if (do_base) baseline(feat, dir, (uint64_t)(pl.n - ram_rows) * rb);

    tg_budget_t budget;
    tg_budget_init(&budget, 0);
    tg_pack_opts_t o = {.feat_path = feat,
                        .num_nodes = N,
                        .row_bytes = rb,
                        .parts = parts,
                        .nparts = P,
                        .targets = plan_targets,
                        .targets_ctx = &pl,
                        .outs = outs,
                        .nouts = K,
                        .threads = (int)threads,
                        .budget = &budget,
                        .progress = "packing"};
    char b1[32];
    printf("tg_pack_bytes: %s\n", tg_fmt_bytes(tg_pack_bytes(parts, P, rb, K), b1, sizeof b1));
    tg_pack_stats_t st;
    if (tg_pack(&o, &st) < 0) die(tg_errmsg());
    uint64_t wr = st.file_bytes + st.ram_bytes;
    printf("pack: %.2f s: read %.2f GB = %.0f MB/s, wrote %.2f GB = %.0f MB/s (files %.2f GB, RAM "
           "%.2f GB), %llu pwrites, %llu partitions, budget peak %s\n",
           st.total_s, st.read_bytes / 1e9, mbps(st.read_bytes, st.total_s), wr / 1e9,
           mbps(wr, st.total_s), st.file_bytes / 1e9, st.ram_bytes / 1e9,
           (unsigned long long)st.writes, (unsigned long long)st.partitions,
           tg_fmt_bytes(budget.peak, b1, sizeof b1));
    printf("stages: reader %.2f s (%.0f MB/s while reading), waiting for reads %.2f s, ordering + "
           "copying %.2f s, writing %.2f s, final sync %.2f s\n",
           st.read_s, mbps(st.read_bytes, st.read_s), st.read_wait_s, st.dispatch_s, st.write_s,
           st.sync_s);
    if (ncheck) check(&pl, outs, feat, rb, ncheck, seed);
    for (uint32_t k = 0; k < K; k++)
        if (!outs[k].mem) close(outs[k].fd);
    free(outs[K - 1].mem);
    free(outs);
    free(parts);
    free(pl.first);
    free(pl.t);
    return 0;
}
