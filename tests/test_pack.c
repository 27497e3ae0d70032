/* store/pack on real feature files with real io/ and real output files: every packed row equals
 * the feature file's raw row (f32 and f16, rows of 28 to 4096 bytes), in RAM and file outputs,
 * over several partitions (with gaps, empty ones, ones whose targets turn out empty), targets at
 * the first and last node, one node sent to many outputs, outputs filled in node order and out of
 * it, runs longer than one write; several threads write what one writes; a file output read back
 * with O_DIRECT through io/ right after tg_pack holds the rows, and no packed file stays in the
 * page cache. Error paths: the abort flag (set
 * before and during), an injected read error and a truncated feature file (features.bin and the
 * offset named), ENOSPC from /dev/full and a failing fdatasync on /dev/null (the output named), an
 * output not open for writing, a file output's size bound, every kind of bad target, bad
 * partitions, a feature file of the wrong size, a failing callback, and a budget too small
 * (nothing left reserved). Both io/ backends: run with TIERGNN_IO_FAULT="ENOSYS@0,op=ring" for
 * the pread one. */
#include "test_feat_common.h"

#include <linux/magic.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/vfs.h>

#include "tiergnn/io.h"
#include "tiergnn/pack.h"

static const char *dir;

/* ---------------------------------------------------------------- a plan of targets */

typedef struct {
    uint32_t N;
    size_t rb;
    tg_pack_part_t parts[16];
    uint32_t nparts;
    size_t first[16], end[16]; /* targets of partition p: t[first[p] .. end[p]) */
    tg_pack_target_t *t;       /* all, sorted by (node, out, off) */
    size_t n;
    uint64_t out_end[16]; /* bytes each output needs */
    int calls[16];
    int cancel_at; /* set *abort when asked for this partition (-1 = never) */
    atomic_int *abort;
    int fail_at;  /* the callback fails for this partition (-1 = never) */
    int short_at; /* the callback returns no targets for this partition (-1 = never) */
} plan_t;

/* Output o gets rows[o] rows: random nodes (node 0 and N-1 among output 0's; node 7 in every
 * output), starting at byte base[o]; placed in node order, or at random positions when
 * shuffled[o] (a disk cache ordered by something else). */
static void plan_make(plan_t *pl, uint32_t N, size_t rb, uint32_t nouts, const uint32_t *rows,
                      const uint64_t *base, const int *shuffled, uint64_t seed)
{
    memset(pl, 0, sizeof *pl);
    pl->N = N;
    pl->rb = rb;
    pl->cancel_at = pl->fail_at = pl->short_at = -1;
    size_t total = 0;
    for (uint32_t o = 0; o < nouts; o++)
        total += rows[o];
    pl->t = malloc(total * sizeof *pl->t);
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    for (uint32_t o = 0; o < nouts; o++) {
        uint32_t *nodes = malloc(rows[o] * sizeof *nodes), *pos = malloc(rows[o] * sizeof *pos);
        for (uint32_t i = 0; i < rows[o]; i++) {
            nodes[i] = (uint32_t)tg_rng_below(&r, N);
            pos[i] = i;
        }
        if (rows[o] > 0) nodes[0] = 7;
        if (o == 0 && rows[o] > 2) nodes[1] = 0, nodes[2] = N - 1;
        /* node order: sort the nodes, positions ascending */
        for (uint32_t i = 1; i < rows[o]; i++)
            for (uint32_t k = i; k > 0 && nodes[k - 1] > nodes[k]; k--) {
                uint32_t x = nodes[k];
                nodes[k] = nodes[k - 1], nodes[k - 1] = x;
            }
        if (shuffled && shuffled[o]) tg_rng_shuffle_u32(&r, pos, rows[o]);
        for (uint32_t i = 0; i < rows[o]; i++)
            pl->t[pl->n++] = (tg_pack_target_t){nodes[i], o, base[o] + (uint64_t)pos[i] * rb};
        pl->out_end[o] = base[o] + (uint64_t)rows[o] * rb;
        free(nodes);
        free(pos);
    }
    qsort(pl->t, pl->n, sizeof *pl->t, tg_pack_target_cmp);
}

/* Partitions [lo[p], hi[p]), ntargets counted (plus slack, which tg_pack must accept). Targets
 * in gaps between partitions belong to none. */
static void plan_parts(plan_t *pl, const uint64_t *lo, const uint64_t *hi, uint32_t nparts,
                       uint64_t slack)
{
    pl->nparts = nparts;
    size_t k = 0;
    for (uint32_t p = 0; p < nparts; p++) {
        pl->parts[p] = (tg_pack_part_t){lo[p], hi[p], 0};
        while (k < pl->n && pl->t[k].node < lo[p])
            k++;
        pl->first[p] = k;
        while (k < pl->n && pl->t[k].node < hi[p])
            k++;
        pl->end[p] = k;
        pl->parts[p].ntargets = k - pl->first[p];
        if (pl->parts[p].ntargets) pl->parts[p].ntargets += slack;
    }
}

/* Contiguous partitions [cuts[p], cuts[p + 1]). */
static void plan_cuts(plan_t *pl, const uint64_t *cuts, uint32_t nparts, uint64_t slack)
{
    plan_parts(pl, cuts, cuts + 1, nparts, slack);
}

/* Keeps only the targets tg_pack was handed (in a partition, not the short one). */
static void plan_keep_handed(plan_t *pl)
{
    size_t keep = 0;
    for (uint32_t p = 0; p < pl->nparts; p++) {
        if ((int)p == pl->short_at) continue;
        for (size_t i = pl->first[p]; i < pl->end[p]; i++)
            pl->t[keep++] = pl->t[i];
    }
    pl->n = keep;
}

static int64_t plan_targets(void *ctx, uint32_t p, tg_pack_target_t *dst, size_t cap)
{
    plan_t *pl = ctx;
    pl->calls[p]++;
    if ((int)p == pl->cancel_at) atomic_store(pl->abort, 1);
    if ((int)p == pl->fail_at) return tg_err(-EIO, "the plan's spill file broke");
    if ((int)p == pl->short_at) return 0;
    size_t n = pl->end[p] - pl->first[p];
    if (n > cap) return tg_err(-EINVAL, "test: %zu targets > cap %zu", n, cap);
    memcpy(dst, pl->t + pl->first[p], n * sizeof *dst);
    return (int64_t)n;
}

/* ---------------------------------------------------------------- outputs */

typedef struct {
    tg_pack_out_t outs[16];
    uint32_t n;
    char path[16][512];
} outs_t;

/* Outputs 0..n: RAM where ram[o], else a new file dir/name-o. */
static void outs_open(outs_t *u, const plan_t *pl, uint32_t n, const int *ram, const char *name)
{
    memset(u, 0, sizeof *u);
    u->n = n;
    for (uint32_t o = 0; o < n; o++) {
        if (ram[o]) {
            u->outs[o].size = pl->out_end[o];
            u->outs[o].mem = calloc(1, pl->out_end[o] + 1);
            continue;
        }
        snprintf(u->path[o], sizeof u->path[o], "%s/%s-%u", dir, name, o);
        u->outs[o].fd = open(u->path[o], O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (u->outs[o].fd < 0) TG_FAIL("cannot create %s", u->path[o]);
    }
}

static void outs_close(outs_t *u)
{
    for (uint32_t o = 0; o < u->n; o++) {
        free(u->outs[o].mem);
        if (!u->outs[o].mem && u->outs[o].fd > 2) close(u->outs[o].fd);
    }
}

/* Output o's bytes (a copy, out_end[o] long; a file may be shorter when targets were dropped,
 * the rest reads as zeros). */
static unsigned char *out_bytes(const outs_t *u, const plan_t *pl, uint32_t o)
{
    unsigned char *b = calloc(1, pl->out_end[o] + 1);
    if (u->outs[o].mem) {
        memcpy(b, u->outs[o].mem, pl->out_end[o]);
        return b;
    }
    off_t size = lseek(u->outs[o].fd, 0, SEEK_END);
    size_t len = (size_t)TG_MIN((uint64_t)(size > 0 ? size : 0), pl->out_end[o]);
    if (tg_pread_full(u->outs[o].fd, b, len, 0, u->path[o]) < 0) TG_FAIL("%s", tg_errmsg());
    return b;
}

/* Every target's bytes in its output equal the feature file's row; written counts agree. */
static void check_outputs(const outs_t *u, const plan_t *pl, const unsigned char *feat)
{
    size_t bad = 0;
    for (uint32_t o = 0; o < u->n; o++) {
        unsigned char *b = out_bytes(u, pl, o);
        uint64_t rows = 0;
        for (size_t i = 0; i < pl->n; i++) {
            const tg_pack_target_t *t = &pl->t[i];
            if (t->out != o) continue;
            rows++;
            if (memcmp(b + t->off, feat + (size_t)t->node * pl->rb, pl->rb) && bad++ < 5)
                TG_FAIL("output %u, offset %llu: not the row of node %u", o,
                        (unsigned long long)t->off, t->node);
        }
        TG_CHECK_EQ_U64(u->outs[o].written, rows * pl->rb);
        free(b);
    }
}

/* Pages of the first len bytes of fd held in the page cache (mincore), or 0 on tmpfs, where
 * the file's pages are its storage and cannot be dropped. */
static size_t cached_pages(int fd, size_t len)
{
    struct statfs fs;
    if (fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC) return 0;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), np = (len + page - 1) / page, n = 0;
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    unsigned char *vec = malloc(np);
    if (m == MAP_FAILED || mincore(m, len, vec) < 0) {
        TG_FAIL("mmap/mincore: %s", strerror(errno));
    } else {
        for (size_t i = 0; i < np; i++)
            n += vec[i] & 1;
    }
    if (m != MAP_FAILED) munmap(m, len);
    free(vec);
    return n;
}

/* Output o read back with O_DIRECT through io/ (the way training reads packed chunks), before
 * anything reads it through the page cache: every target's row is there. */
static void check_direct_reread(const outs_t *u, const plan_t *pl, uint32_t o,
                                const unsigned char *feat)
{
    tg_io_file_t *f;
    TG_CHECK_OK(tg_io_file_open(&f, u->path[o], 0));
    if (!f) return;
    if (!tg_io_file_direct(f)) fprintf(stderr, "note: %s read without O_DIRECT\n", u->path[o]);
    tg_io_t *io;
    TG_CHECK_OK(tg_io_create(&io, NULL));
    unsigned char *got = malloc(pl->out_end[o]);
    TG_CHECK_OK(tg_io_read(io, f, 0, pl->out_end[o], got));
    size_t bad = 0;
    for (size_t i = 0; i < pl->n; i++) {
        const tg_pack_target_t *t = &pl->t[i];
        if (t->out == o && memcmp(got + t->off, feat + (size_t)t->node * pl->rb, pl->rb) &&
            bad++ < 5)
            TG_FAIL("O_DIRECT re-read of output %u, offset %llu: not node %u's row", o,
                    (unsigned long long)t->off, t->node);
    }
    free(got);
    tg_io_destroy(io);
    tg_io_file_close(f);
}

static tg_pack_opts_t opts_for(plan_t *pl, outs_t *u, const char *feat, tg_budget_t *b)
{
    return (tg_pack_opts_t){.feat_path = feat,
                            .num_nodes = pl->N,
                            .row_bytes = pl->rb,
                            .parts = pl->parts,
                            .nparts = pl->nparts,
                            .targets = plan_targets,
                            .targets_ctx = pl,
                            .outs = u->outs,
                            .nouts = u->n,
                            .threads = 1,
                            .budget = b};
}

static char *feature_file(const char *name, uint32_t N, uint32_t dim, tg_feat_dtype_t dt,
                          unsigned char **bytes)
{
    char *path = tfeat_write(dir, name, N, dim, dt);
    *bytes = (unsigned char *)tg_test_read_all(path, NULL);
    return path;
}

/* ---------------------------------------------------------------- rows land where planned */

/* One dataset: outputs 0 and 3 in RAM, the rest files; outputs 2 and 5 shuffled; partitions
 * [0,1) [1,300) [300,300) [310,640) [640,999) [999,1000): a gap [300, 310) whose targets belong
 * to none, one partition without targets (never asked), one whose callback returns none. */
static void pack_case(uint32_t dim, tg_feat_dtype_t dt, int threads)
{
    enum { N = 1000 };
    unsigned char *feat;
    char *path = feature_file(dt == TG_F32 ? "f32.bin" : "f16.bin", N, dim, dt, &feat);
    size_t rb = dim * tg_feat_dtype_size(dt);
    uint32_t rows[6] = {400, 300, 500, 50, 1, 250};
    uint64_t base[6] = {0, 100, 0, 7, 4096, 0};
    int shuffled[6] = {0, 0, 1, 0, 0, 1}, ram[6] = {1, 0, 0, 1, 0, 0};
    plan_t pl;
    plan_make(&pl, N, rb, 6, rows, base, shuffled, 42 + dim);
    uint64_t lo[6] = {0, 1, 300, 310, 640, 999}, hi[6] = {1, 300, 300, 640, 999, 1000};
    plan_parts(&pl, lo, hi, 6, 3);
    pl.short_at = 4;
    TG_CHECK(pl.end[4] > pl.first[4]); /* the short partition does have targets */
    outs_t u;
    outs_open(&u, &pl, 6, ram, "out");
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_pack_opts_t o = opts_for(&pl, &u, path, &b);
    o.threads = threads;
    tg_pack_stats_t st;
    TG_CHECK_OK(tg_pack(&o, &st));
    plan_keep_handed(&pl);
    check_outputs(&u, &pl, feat);
    TG_CHECK_EQ_U64(st.rows, pl.n);
    TG_CHECK_EQ_U64(st.file_bytes + st.ram_bytes, pl.n * rb);
    TG_CHECK_EQ_U64(st.partitions, 4); /* [0,1) [1,300) [310,640) [999,1000) */
    TG_CHECK(pl.calls[2] == 0);        /* no targets announced: never asked */
    TG_CHECK(pl.calls[0] == 1 && pl.calls[4] == 1 && pl.calls[5] == 1);
    TG_CHECK(st.read_bytes <= (uint64_t)N * rb + 4 * 4096);
    TG_CHECK_EQ_U64(b.used, 0);
    TG_CHECK(b.peak > 0 && b.peak <= tg_pack_bytes(pl.parts, pl.nparts, rb, 6));
    outs_close(&u);
    free(pl.t);
    free(feat);
    free(path);
}

TG_TEST(rows_f32)
{
    pack_case(7, TG_F32, 1);
    pack_case(128, TG_F32, 3);
}

TG_TEST(rows_f16)
{
    pack_case(12, TG_F16, 1);
    pack_case(33, TG_F16, 2);
}

/* Rows of 4 KiB, output 0 takes 2500 rows in node order (a 10 MiB run: written in pieces of at
 * most TG_PACK_WRITE_MAX); 1 and 4 threads produce the same files. Then a file output read with
 * O_DIRECT through io/ holds the rows. */
TG_TEST(threads_and_direct_reread)
{
    enum { N = 3000 };
    unsigned char *feat;
    char *path = feature_file("wide.bin", N, 1024, TG_F32, &feat);
    size_t rb = 4096;
    uint32_t rows[4] = {2500, 700, 900, 40};
    uint64_t base[4] = {0, 512, 0, 0};
    int shuffled[4] = {0, 1, 0, 0}, ram[4] = {0, 0, 0, 1};
    plan_t pl;
    plan_make(&pl, N, rb, 4, rows, base, shuffled, 9);
    uint64_t cuts[4] = {0, 1200, 2000, 3000};
    plan_cuts(&pl, cuts, 3, 0);
    outs_t u1, u4;
    outs_open(&u1, &pl, 4, ram, "t1");
    outs_open(&u4, &pl, 4, ram, "t4");
    tg_pack_opts_t o = opts_for(&pl, &u1, path, NULL);
    tg_pack_stats_t st1, st4;
    TG_CHECK_OK(tg_pack(&o, &st1));
    o.outs = u4.outs;
    o.threads = 4;
    o.progress = "packing";
    TG_CHECK_OK(tg_pack(&o, &st4));
    /* fdatasync + DONTNEED: the packed files do not stay in the page cache */
    for (uint32_t k = 0; k < 3; k++)
        TG_CHECK_EQ_U64(cached_pages(u4.outs[k].fd, pl.out_end[k]), 0);
    check_direct_reread(&u4, &pl, 0, feat); /* 2500 rows of one page each, in node order */
    check_direct_reread(&u4, &pl, 1, feat); /* shuffled rows from offset 512 */
    check_outputs(&u4, &pl, feat);
    for (uint32_t k = 0; k < 4; k++) {
        unsigned char *a = out_bytes(&u1, &pl, k), *b = out_bytes(&u4, &pl, k);
        TG_CHECK(memcmp(a, b, pl.out_end[k]) == 0);
        free(a);
        free(b);
    }
    TG_CHECK(st1.writes > 3 && st1.writes == st4.writes);
    TG_CHECK(st1.writes < pl.n / 4); /* runs, not rows */

    outs_close(&u1);
    outs_close(&u4);
    free(pl.t);
    free(feat);
    free(path);
}

/* An unnamed O_TMPFILE output (as the strategy uses them), read back with O_DIRECT through its
 * /proc/self/fd path right after tg_pack. */
TG_TEST(tmpfile_output)
{
    enum { N = 500 };
    unsigned char *feat;
    char *path = feature_file("tmpf.bin", N, 128, TG_F32, &feat);
    uint32_t rows[1] = {300};
    uint64_t base[1] = {0};
    plan_t pl;
    plan_make(&pl, N, 512, 1, rows, base, NULL, 3);
    uint64_t cuts[3] = {0, 250, 500};
    plan_cuts(&pl, cuts, 2, 0);
    outs_t u;
    memset(&u, 0, sizeof u);
    u.n = 1;
    u.outs[0].fd = open(dir, O_TMPFILE | O_RDWR, 0600);
    if (u.outs[0].fd < 0) {
        fprintf(stderr, "note: O_TMPFILE unsupported here (%s); skipped\n", strerror(errno));
    } else {
        snprintf(u.path[0], sizeof u.path[0], "/proc/self/fd/%d", u.outs[0].fd);
        tg_pack_opts_t o = opts_for(&pl, &u, path, NULL);
        TG_CHECK_OK(tg_pack(&o, NULL));
        check_direct_reread(&u, &pl, 0, feat);
        check_outputs(&u, &pl, feat);
    }
    outs_close(&u);
    free(pl.t);
    free(feat);
    free(path);
}

/* No partitions, or none with targets: nothing read, nothing written, success. */
TG_TEST(nothing_to_do)
{
    unsigned char *feat;
    char *path = feature_file("none.bin", 10, 4, TG_F32, &feat);
    tg_pack_part_t parts[2] = {{0, 5, 0}, {5, 10, 0}};
    tg_pack_opts_t o = {.feat_path = path,
                        .num_nodes = 10,
                        .row_bytes = 16,
                        .parts = parts,
                        .nparts = 2,
                        .targets = plan_targets};
    tg_pack_stats_t st;
    TG_CHECK_OK(tg_pack(&o, &st));
    TG_CHECK(st.read_bytes == 0 && st.rows == 0 && st.partitions == 0);
    TG_CHECK_EQ_U64(tg_pack_bytes(parts, 2, 16, 0), 0);
    o.nparts = 0;
    TG_CHECK_OK(tg_pack(&o, &st));
    free(feat);
    free(path);
}

/* ---------------------------------------------------------------- errors */

typedef struct {
    plan_t pl;
    outs_t u;
    unsigned char *feat;
    char *path;
    tg_budget_t b;
} rig_t;

static void rig_open(rig_t *g, const char *name, int files)
{
    enum { N = 2000 };
    g->path = feature_file(name, N, 16, TG_F32, &g->feat);
    uint32_t rows[3] = {600, 400, 300};
    uint64_t base[3] = {0, 0, 64};
    int ram[3] = {1, !files, !files};
    plan_make(&g->pl, N, 64, 3, rows, base, NULL, 5);
    uint64_t cuts[5] = {0, 500, 1000, 1500, 2000};
    plan_cuts(&g->pl, cuts, 4, 0);
    outs_open(&g->u, &g->pl, 3, ram, name);
    tg_budget_init(&g->b, 0);
}

static void rig_close(rig_t *g)
{
    TG_CHECK_EQ_U64(g->b.used, 0);
    outs_close(&g->u);
    free(g->pl.t);
    free(g->feat);
    free(g->path);
}

TG_TEST(abort_flag)
{
    rig_t g;
    rig_open(&g, "abort", 1);
    atomic_int stop = 1;
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &g.b);
    o.abort = &stop;
    o.threads = 2;
    TG_CHECK_ERR(tg_pack(&o, NULL), "cancelled");
    atomic_store(&stop, 0);
    g.pl.cancel_at = 2;
    g.pl.abort = &stop;
    tg_pack_stats_t st;
    tg_err_clear();
    int rc = tg_pack(&o, &st);
    TG_CHECK(rc == -ECANCELED);
    TG_CHECK(strstr(tg_errmsg(), "cancelled") != NULL);
    TG_CHECK(st.partitions < 4);
    rig_close(&g);
}

TG_TEST(read_errors)
{
    rig_t g;
    rig_open(&g, "rderr", 1);
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &g.b);
    /* EIO on a read that covers byte 70000 (node 1093, partition 2) */
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "rderr", .lo = 70000, .hi = 70001, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_pack_stats_t st;
    TG_CHECK_ERR(tg_pack(&o, &st), "pack: reading partition 2 (nodes");
    TG_CHECK(strstr(tg_errmsg(), "rderr: read error at offset") != NULL);
    TG_CHECK(st.partitions <= 2);
    tg_io_fault_clear();
    TG_CHECK_EQ_U64(g.b.used, 0);

    /* truncated under the run: an open io/ file whose last rows are gone */
    tg_io_file_t *feat;
    TG_CHECK_OK(tg_io_file_open(&feat, g.path, 0));
    TG_CHECK(truncate(g.path, 1700 * 64) == 0);
    o.feat = feat;
    TG_CHECK_ERR(tg_pack(&o, NULL), "unexpected end of file");
    TG_CHECK(strstr(tg_errmsg(), "rderr") != NULL);
    tg_io_file_close(feat);
    /* and a file of the wrong size from the start */
    o.feat = NULL;
    TG_CHECK_ERR(tg_pack(&o, NULL), "expected 128000");
    o.feat_path = "/nonexistent/features.bin";
    TG_CHECK_ERR(tg_pack(&o, NULL), "/nonexistent/features.bin");
    rig_close(&g);
}

TG_TEST(write_errors)
{
    rig_t g;
    rig_open(&g, "wrerr", 1);
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &g.b);
    int keep = g.u.outs[1].fd;
    /* a real ENOSPC: /dev/full refuses every write */
    g.u.outs[1].fd = open("/dev/full", O_WRONLY);
    if (g.u.outs[1].fd < 0) {
        fprintf(stderr, "note: no /dev/full; ENOSPC case skipped\n");
    } else {
        o.threads = 3;
        TG_CHECK_ERR(tg_pack(&o, NULL), "output 1 (/dev/full): writing");
        TG_CHECK(strstr(tg_errmsg(), "No space left") != NULL);
        TG_CHECK(strstr(tg_errmsg(), "at offset") != NULL);
        close(g.u.outs[1].fd);
    }
    /* a real failing fdatasync: /dev/null takes the writes but cannot be synced (EINVAL) */
    g.u.outs[1].fd = open("/dev/null", O_WRONLY);
    if (g.u.outs[1].fd >= 0) {
        TG_CHECK_ERR(tg_pack(&o, NULL), "output 1 (/dev/null): fdatasync");
        close(g.u.outs[1].fd);
    }
    /* not open for writing: refused before anything is read */
    g.u.outs[1].fd = open(g.path, O_RDONLY);
    TG_CHECK_ERR(tg_pack(&o, NULL), "not open for writing");
    close(g.u.outs[1].fd);
    g.u.outs[1].fd = -1;
    TG_CHECK_ERR(tg_pack(&o, NULL), "output 1");
    g.u.outs[1].fd = keep;
    /* a file output's size bound (a disk budget): rows of 64 bytes from offset 64 pass 100 */
    g.u.outs[2].size = 100;
    TG_CHECK_ERR(tg_pack(&o, NULL), "passes the end of output 2");
    TG_CHECK(strstr(tg_errmsg(), "wrerr-2, 100 bytes)") != NULL);
    g.u.outs[2].size = 64 + 300 * 64;
    TG_CHECK_OK(tg_pack(&o, NULL));
    check_outputs(&g.u, &g.pl, g.feat);
    rig_close(&g);
}

/* Each kind of bad target, put into partition 1 (nodes [500, 1000)); the plan packs fine first. */
TG_TEST(bad_targets)
{
    rig_t g;
    rig_open(&g, "badt", 0);
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &g.b);
    o.threads = 2;
    TG_CHECK_OK(tg_pack(&o, NULL));
    check_outputs(&g.u, &g.pl, g.feat);
    tg_pack_target_t *t = g.pl.t + g.pl.first[1];
    size_t n = g.pl.end[1] - g.pl.first[1];
    TG_CHECK(n > 10 && t[2].node < t[3].node && t[3].node < t[4].node);
    const tg_pack_target_t t0 = t[0], t3 = t[3], t4 = t[4];

    t[3].node = 1000; /* the range is checked before the order */
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 1, target 3: node 1000 outside [500, 1000)");
    t[3] = t3;
    t[0].node = 499;
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 1, target 0: node 499 outside");
    t[0] = t0;
    t[3].out = 3;
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 1, target 3: output 3 of 3");
    t[3] = t3;
    t[3].out = 0;
    t[3].off = g.u.outs[0].size - 63; /* RAM output 0: one byte short of a row */
    TG_CHECK_ERR(tg_pack(&o, NULL), "target 3: a row of 64 bytes at offset");
    TG_CHECK(strstr(tg_errmsg(), "passes the end of output 0 (RAM") != NULL);
    t[3] = t4, t[4] = t3; /* swapped */
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 1, targets 3 and 4 out of (node, out, off) order");
    t[3] = t3, t[4] = t3; /* a duplicate */
    TG_CHECK_ERR(tg_pack(&o, NULL), "targets 3 and 4 out of");
    t[3] = t3, t[4] = t4;

    /* two rows overlapping in an output: partition 1 hands just these two */
    tg_pack_target_t *orig = malloc(n * sizeof *orig);
    memcpy(orig, t, n * sizeof *orig);
    t[0] = (tg_pack_target_t){600, 1, 8};
    t[1] = (tg_pack_target_t){601, 1, 0};
    g.pl.end[1] = g.pl.first[1] + 2;
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 1, targets 1 and 0 overlap in output 1");
    memcpy(t, orig, n * sizeof *orig);
    g.pl.end[1] = g.pl.first[1] + n;
    free(orig);
    TG_CHECK_OK(tg_pack(&o, NULL));
    rig_close(&g);
}

/* Claims one target more than the room it was given. */
static int64_t too_many(void *ctx, uint32_t p, tg_pack_target_t *dst, size_t cap)
{
    return (int64_t)cap + 1;
}

TG_TEST(bad_callback_and_parts)
{
    rig_t g;
    rig_open(&g, "badc", 0);
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &g.b);
    g.pl.fail_at = 2;
    TG_CHECK_ERR(tg_pack(&o, NULL), "pack: targets of partition 2: the plan's spill file broke");
    g.pl.fail_at = -1;
    o.targets = too_many;
    TG_CHECK_ERR(tg_pack(&o, NULL), "more than the");
    o.targets = plan_targets;
    tg_pack_part_t parts[4];
    memcpy(parts, g.pl.parts, sizeof parts);
    o.parts = parts;
    parts[2].lo = 900; /* overlaps partition 1 */
    TG_CHECK_ERR(tg_pack(&o, NULL), "partition 2: nodes [900, 1500)");
    parts[2].lo = 1000;
    parts[3].hi = 2001;
    TG_CHECK_ERR(tg_pack(&o, NULL), "within 2000 nodes");
    parts[3].hi = 2000;
    o.row_bytes = 0;
    TG_CHECK_ERR(tg_pack(&o, NULL), "rows of 0 bytes");
    rig_close(&g);
}

TG_TEST(budget_refusal)
{
    rig_t g;
    rig_open(&g, "budget", 1);
    uint64_t need = tg_pack_bytes(g.pl.parts, g.pl.nparts, 64, 3);
    tg_budget_t b;
    tg_budget_init(&b, need - 1);
    tg_pack_opts_t o = opts_for(&g.pl, &g.u, g.path, &b);
    TG_CHECK_ERR(tg_pack(&o, NULL), "pack: needs");
    TG_CHECK(tg_errmsg()[0] && strstr(tg_errmsg(), "partition 0's 500 nodes") != NULL);
    TG_CHECK_EQ_U64(b.used, 0);
    /* someone else holds part of it: refused too */
    tg_budget_destroy(&b);
    tg_budget_init(&b, need + 100);
    TG_CHECK_OK(tg_budget_reserve(&b, 200, "other"));
    TG_CHECK_ERR(tg_pack(&o, NULL), "free of");
    tg_budget_release(&b, 200);
    /* exactly enough: packs, and gives everything back */
    TG_CHECK_OK(tg_pack(&o, NULL));
    check_outputs(&g.u, &g.pl, g.feat);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    rig_close(&g);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    dir = tg_test_tmpdir("pack");
    TG_RUN(rows_f32);
    TG_RUN(rows_f16);
    TG_RUN(threads_and_direct_reread);
    TG_RUN(tmpfile_output);
    TG_RUN(nothing_to_do);
    TG_RUN(abort_flag);
    TG_RUN(read_errors);
    TG_RUN(write_errors);
    TG_RUN(bad_targets);
    TG_RUN(bad_callback_and_parts);
    TG_RUN(budget_refusal);
    return tg_test_done();
}
