/* External edge sort against an in-memory qsort reference: random inputs, forced multi-run and
 * cascade merges (tiny mem_bytes), dedup / self-loop options, u32 and u64 index widths, packed
 * and two-word keys, thread counts, keys written into reserved room, and the error paths. */
#include "data/extsort-impl.h"
#include "tg_test.h"
#include "tiergnn/data.h"

#include <inttypes.h>

typedef struct {
    uint64_t dst, src;
} pair_t;

static int cmp_pair(const void *a, const void *b)
{
    const pair_t *x = a, *y = b;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return 0;
}

/* The reference: qsort, then the options applied in the documented order. */
static void reference(uint64_t N, const uint64_t *src, const uint64_t *dst, size_t n,
                      const tg_edgesort_opts_t *o, uint64_t **indptr, uint64_t **indices,
                      uint64_t *ne)
{
    pair_t *p = malloc((n + N + 1) * sizeof *p);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!(o->remove_self_loops && src[i] == dst[i])) p[m++] = (pair_t){dst[i], src[i]};
    qsort(p, m, sizeof *p, cmp_pair);
    if (o->dedup && m) {
        size_t j = 1;
        for (size_t i = 1; i < m; i++)
            if (cmp_pair(&p[i], &p[j - 1])) p[j++] = p[i];
        m = j;
    }
    if (o->self_loops) {
        char *has = calloc(N, 1);
        for (size_t i = 0; i < m; i++)
            if (p[i].src == p[i].dst) has[p[i].dst] = 1;
        for (uint64_t v = 0; v < N; v++)
            if (!has[v]) p[m++] = (pair_t){v, v};
        free(has);
        qsort(p, m, sizeof *p, cmp_pair);
    }
    *indptr = calloc(N + 1, 8);
    *indices = malloc((m + 1) * 8);
    for (size_t i = 0; i < m; i++) {
        (*indptr)[p[i].dst + 1]++;
        (*indices)[i] = p[i].src;
    }
    for (uint64_t v = 0; v < N; v++)
        (*indptr)[v + 1] += (*indptr)[v];
    *ne = m;
    free(p);
}

typedef struct {
    uint64_t N;
    size_t n;
    uint64_t mem;
    int dedup, self_loops, remove_self_loops, wide, nthreads;
    tg_index_dtype_t idx;
    int batches;       /* add() calls */
    int skew;          /* draw ids from a small hot set too (many duplicates) */
    int reserve;       /* add through tg_edgesort_reserve/commit (packed keys) instead of add() */
    uint64_t expected; /* tg_edgesort_opts_t.expected_edges */
    int expect_late;   /* ...given with tg_edgesort_expect after the first batch instead */
} case_t;

/* Adds src/dst[0..n) by writing packed keys into reserved room, in pieces of `step`; self loops
 * are left out here when the sort is asked to drop them (reserve does not filter). */
static void add_reserved(tg_edgesort_t *es, const case_t *c, const uint64_t *src,
                         const uint64_t *dst, size_t step)
{
    unsigned kb = tg_edgesort_key_bits(es);
    TG_CHECK(kb > 0);
    if (!kb) return;
    for (size_t i = 0; i < c->n; i += step) {
        size_t m = TG_MIN(step, c->n - i), k = 0;
        uint64_t *keys = NULL;
        TG_CHECK_OK(tg_edgesort_reserve(es, m, &keys));
        if (!keys) return;
        for (size_t j = i; j < i + m; j++)
            if (!(c->remove_self_loops && src[j] == dst[j])) keys[k++] = dst[j] << kb | src[j];
        TG_CHECK_OK(tg_edgesort_commit(es, k));
    }
}

/* The indptr and indices writers finish() writes through, in dir (paths of 4096 bytes). */
static void open_outputs(const char *dir, char *pp, char *ip, tg_filew_t *wp, tg_filew_t *wi)
{
    snprintf(pp, 4096, "%s/indptr.bin", dir);
    snprintf(ip, 4096, "%s/indices.bin", dir);
    TG_CHECK_OK(tg_filew_open(wp, pp, 1 << 16));
    TG_CHECK_OK(tg_filew_open(wi, ip, 1 << 16));
}

static void run_case(const case_t *c, uint64_t seed, tg_edgesort_stats_t *st_out)
{
    const char *dir = tg_test_tmpdir("extsort");
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint64_t *src = malloc((c->n + 1) * 8), *dst = malloc((c->n + 1) * 8);
    for (size_t i = 0; i < c->n; i++) {
        uint64_t hot = TG_MAX(1, c->N / 50);
        int h = c->skew && tg_rng_below(&r, 2);
        src[i] = tg_rng_below(&r, h ? hot : c->N);
        dst[i] = tg_rng_below(&r, h ? hot : c->N);
        if (tg_rng_below(&r, 20) == 0) dst[i] = src[i]; /* some self loops */
    }
    tg_edgesort_opts_t o = {.num_nodes = c->N,
                            .mem_bytes = c->mem,
                            .tmp_dir = dir,
                            .dedup = c->dedup,
                            .self_loops = c->self_loops,
                            .remove_self_loops = c->remove_self_loops,
                            .nthreads = c->nthreads,
                            .expected_edges = c->expect_late ? 0 : c->expected};
    tg_edgesort_t *es = NULL;
    TG_CHECK_OK(tg_edgesort_create(&es, &o));
    if (!es) return;
    if (c->wide) TG_CHECK_OK(tg_edgesort_force_wide(es));
    size_t step = (c->n + (size_t)c->batches - 1) / (size_t)c->batches;
    if (c->reserve)
        add_reserved(es, c, src, dst, step);
    else
        for (size_t i = 0; i < c->n; i += step) {
            TG_CHECK_OK(tg_edgesort_add(es, src + i, dst + i, TG_MIN(step, c->n - i)));
            if (i == 0 && c->expect_late) tg_edgesort_expect(es, c->expected);
        }
    char pp[4096], ip[4096];
    tg_filew_t wp, wi;
    open_outputs(dir, pp, ip, &wp, &wi);
    uint64_t ne = 0;
    TG_CHECK_OK(tg_edgesort_finish(es, &wp, &wi, c->idx, &ne));
    tg_file_info_t fp, fi;
    TG_CHECK_OK(tg_filew_close(&wp, &fp));
    TG_CHECK_OK(tg_filew_close(&wi, &fi));
    if (st_out) tg_edgesort_stats(es, st_out);
    tg_edgesort_destroy(es);

    uint64_t *rp, *ri, rne;
    reference(c->N, src, dst, c->n, &o, &rp, &ri, &rne);
    TG_CHECK_EQ_U64(ne, rne);
    size_t pb = 0, ib = 0;
    uint64_t *gp = (uint64_t *)tg_test_read_all(pp, &pb);
    uint64_t *gi = (uint64_t *)tg_test_read_all(ip, &ib);
    size_t isz = c->idx == TG_U64 ? 8 : 4;
    TG_CHECK_EQ_U64(pb, (c->N + 1) * 8);
    TG_CHECK_EQ_U64(ib, rne * isz);
    TG_CHECK_EQ_U64(fi.size, ib);
    if (gp && pb == (c->N + 1) * 8) {
        size_t bad = 0;
        for (uint64_t v = 0; v <= c->N; v++)
            if (gp[v] != rp[v] && bad++ < 3)
                TG_FAIL("N=%" PRIu64 " indptr[%" PRIu64 "] = %" PRIu64 ", expected %" PRIu64, c->N,
                        v, gp[v], rp[v]);
    }
    if (gi && ib == rne * isz) {
        size_t bad = 0;
        for (uint64_t e = 0; e < rne; e++) {
            uint64_t g = isz == 8 ? gi[e] : ((uint32_t *)gi)[e];
            if (g != ri[e] && bad++ < 3)
                TG_FAIL("indices[%" PRIu64 "] = %" PRIu64 ", expected %" PRIu64, e, g, ri[e]);
        }
    }
    /* Run files are gone. */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\.run$' >/dev/null", dir);
    TG_CHECK(system(cmd) != 0);
    free(gp);
    free(gi);
    free(rp);
    free(ri);
    free(src);
    free(dst);
    tg_rmtree(dir);
}

TG_TEST(in_memory_single_run)
{
    case_t c = {.N = 1000, .n = 20000, .mem = 64 << 20, .batches = 3};
    tg_edgesort_stats_t st;
    run_case(&c, 1, &st);
    TG_CHECK_EQ_U64(st.runs_spilled, 0);
    TG_CHECK_EQ_U64(st.key_words, 1);
}

TG_TEST(multi_run)
{
    /* 64 KiB: 4096 keys per run, 200k edges -> ~49 runs, more than one merge pass */
    case_t c = {.N = 5000, .n = 200000, .mem = 64 << 10, .batches = 7};
    tg_edgesort_stats_t st;
    run_case(&c, 2, &st);
    TG_CHECK(st.runs_spilled >= 40);
    TG_CHECK(st.merge_passes >= 1);
    /* a budget with one merge pass */
    c.mem = 1 << 20;
    run_case(&c, 3, &st);
    TG_CHECK(st.runs_spilled >= 2);
    TG_CHECK_EQ_U64(st.merge_passes, 0);
}

TG_TEST(options)
{
    for (int mask = 0; mask < 8; mask++) {
        case_t c = {.N = 3000,
                    .n = 60000,
                    .mem = 128 << 10,
                    .batches = 5,
                    .skew = 1,
                    .dedup = mask & 1,
                    .self_loops = (mask >> 1) & 1,
                    .remove_self_loops = (mask >> 2) & 1};
        int before = tg_test_failures;
        run_case(&c, 10 + (uint64_t)mask, NULL);
        if (tg_test_failures != before)
            TG_FAIL("dedup=%d self_loops=%d remove_self_loops=%d", c.dedup, c.self_loops,
                    c.remove_self_loops);
    }
}

TG_TEST(index_widths_and_wide_keys)
{
    for (int wide = 0; wide < 2; wide++)
        for (int idx = 0; idx < 2; idx++) {
            case_t c = {.N = 70000,
                        .n = 100000,
                        .mem = 256 << 10,
                        .batches = 2,
                        .dedup = 1,
                        .self_loops = wide,
                        .wide = wide,
                        .idx = idx ? TG_U64 : TG_U32};
            tg_edgesort_stats_t st;
            run_case(&c, 20 + (uint64_t)(2 * wide + idx), &st);
            TG_CHECK_EQ_U64(st.key_words, wide ? 2 : 1);
        }
}

TG_TEST(thread_counts_and_edge_cases)
{
    for (int t = 1; t <= 3; t++) {
        case_t c = {.N = 100000, .n = 150000, .mem = 1 << 20, .batches = 1, .nthreads = t};
        run_case(&c, 30, NULL);
    }
    /* one node, no edges, all-empty nodes with self loops */
    case_t one = {.N = 1, .n = 10, .mem = 0, .batches = 1, .self_loops = 1, .dedup = 1};
    run_case(&one, 40, NULL);
    case_t none = {.N = 17, .n = 0, .mem = 0, .batches = 1, .self_loops = 1};
    run_case(&none, 41, NULL);
    case_t none2 = {.N = 17, .n = 0, .mem = 0, .batches = 1};
    run_case(&none2, 42, NULL);
    /* node counts around key-width boundaries */
    uint64_t ns[] = {2, 3, 255, 256, 257, 1u << 16, (1u << 16) + 1};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        case_t c = {.N = ns[i], .n = 5000, .mem = 64 << 10, .batches = 2, .dedup = 1};
        run_case(&c, 50 + i, NULL);
    }
}

TG_TEST(msd_path)
{
    /* runs of >= 64k keys take the parallel MSD pass + per-bucket LSD */
    for (int wide = 0; wide < 2; wide++)
        for (int t = 1 + wide; t <= 3; t += 2) {
            case_t c = {.N = 1u << 20,
                        .n = 120000,
                        .mem = 64 << 20,
                        .batches = 3,
                        .nthreads = t,
                        .wide = wide,
                        .skew = t == 2,
                        .dedup = t == 3};
            run_case(&c, 60 + (uint64_t)t, NULL);
        }
    /* and as spilled runs */
    case_t c = {.N = 3000000, .n = 300000, .mem = 2 << 20, .batches = 4, .nthreads = 2};
    tg_edgesort_stats_t st;
    run_case(&c, 70, &st);
    TG_CHECK(st.runs_spilled >= 2);
}

TG_TEST(reserved_keys)
{
    /* in memory, spilled runs (the reservation spills first), dedup and dropped self loops */
    case_t a = {.N = 5000,
                .n = 20000,
                .mem = 1 << 20,
                .batches = 7,
                .nthreads = 2,
                .reserve = 1,
                .dedup = 1,
                .remove_self_loops = 1,
                .skew = 1};
    run_case(&a, 80, NULL);
    case_t b = {
        .N = 3000000, .n = 300000, .mem = 2 << 20, .batches = 40, .nthreads = 2, .reserve = 1};
    tg_edgesort_stats_t st;
    run_case(&b, 81, &st);
    TG_CHECK(st.runs_spilled >= 2);
    case_t m = {.N = 1u << 20,
                .n = 150000,
                .mem = 64 << 20,
                .batches = 3,
                .nthreads = 2,
                .reserve = 1,
                .self_loops = 1};
    run_case(&m, 82, NULL);

    /* misuse: more than the buffer holds, committing more than reserved, two-word keys */
    const char *dir = tg_test_tmpdir("extsort-reserve");
    tg_edgesort_opts_t o = {.num_nodes = 10, .tmp_dir = dir, .mem_bytes = 1 << 16};
    tg_edgesort_t *es;
    TG_CHECK_OK(tg_edgesort_create(&es, &o));
    uint64_t *k = NULL;
    size_t cap = tg_edgesort_capacity(es);
    TG_CHECK(cap > 0);
    TG_CHECK_ERR(tg_edgesort_reserve(es, cap + 1, &k), "cannot reserve");
    TG_CHECK(k == NULL);
    TG_CHECK_OK(tg_edgesort_reserve(es, 4, &k));
    TG_CHECK_ERR(tg_edgesort_commit(es, 5), "commit of 5 keys, 4 reserved");
    TG_CHECK_OK(tg_edgesort_commit(es, 0));
    TG_CHECK_OK(tg_edgesort_force_wide(es));
    TG_CHECK_EQ_U64(tg_edgesort_key_bits(es), 0);
    TG_CHECK_ERR(tg_edgesort_reserve(es, 1, &k), "two-word keys");
    tg_edgesort_destroy(es);
    tg_rmtree(dir);
}

/* A run file damaged between spilling and the final merge: the read error surfaces from the
 * merge thread that reads it (the root's subtrees run on threads of their own) as an error
 * naming the file, with no hang, and the run files are removed. */
TG_TEST(damaged_run_file)
{
    const char *dir = tg_test_tmpdir("extsort-damaged");
    tg_edgesort_opts_t o = {
        .num_nodes = 1u << 20, .tmp_dir = dir, .mem_bytes = 2u << 20, .nthreads = 2};
    tg_edgesort_t *es;
    TG_CHECK_OK(tg_edgesort_create(&es, &o));
    if (!es) return;
    size_t n = 4 * tg_edgesort_capacity(es) - 1000; /* three run files and the run in memory */
    uint64_t *src = malloc(n * 8), *dst = malloc(n * 8);
    tg_rng_t r;
    tg_rng_seed(&r, 90);
    for (size_t i = 0; i < n; i++) {
        src[i] = tg_rng_below(&r, o.num_nodes);
        dst[i] = tg_rng_below(&r, o.num_nodes);
    }
    TG_CHECK_OK(tg_edgesort_add(es, src, dst, n));
    /* the first run file is complete (each spill waits for the one before) */
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "f=$(ls %s/*.run | sort | head -1) && truncate -s 40960 \"$f\"", dir);
    TG_CHECK(system(cmd) == 0);
    char pp[4096], ip[4096];
    tg_filew_t wp, wi;
    open_outputs(dir, pp, ip, &wp, &wi);
    uint64_t ne = 0;
    TG_CHECK_ERR(tg_edgesort_finish(es, &wp, &wi, TG_U32, &ne), ".run: unexpected end of file");
    tg_filew_discard(&wp);
    tg_filew_discard(&wi);
    tg_edgesort_destroy(es);
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\.run$' >/dev/null", dir);
    TG_CHECK(system(cmd) != 0);
    free(src);
    free(dst);
    tg_rmtree(dir);
}

/* expected_edges plans the spilled runs so that the last, kept in memory, is full: one run
 * fewer on disk here, and the same output whatever the hint says. */
TG_TEST(planned_runs)
{
    /* 2 MiB: about 65k keys a run; 150k edges = 2.3 runs -> two spilled without the hint,
     * and with it the same count but smaller, with a full run left in memory */
    case_t c = {.N = 3000000, .n = 150000, .mem = 2 << 20, .batches = 50, .nthreads = 2};
    tg_edgesort_stats_t plain, hinted;
    run_case(&c, 91, &plain);
    c.expected = c.n;
    run_case(&c, 91, &hinted);
    TG_CHECK_EQ_U64(hinted.runs_spilled, plain.runs_spilled);
    TG_CHECK(hinted.bytes_spilled < plain.bytes_spilled);
    c.expect_late = 1; /* known only after the first batch */
    run_case(&c, 91, &hinted);
    TG_CHECK_EQ_U64(hinted.runs_spilled, plain.runs_spilled);
    TG_CHECK(hinted.bytes_spilled < plain.bytes_spilled);
    c.expect_late = 0;
    /* through reservations too, and wrong hints: too low, too high, far too high */
    c.reserve = 1;
    run_case(&c, 92, &hinted);
    TG_CHECK(hinted.bytes_spilled < plain.bytes_spilled);
    uint64_t wrong[3] = {c.n / 3, 2 * c.n, 100 * c.n};
    for (int i = 0; i < 3; i++) {
        c.expected = wrong[i];
        c.reserve = i == 1;
        run_case(&c, 93 + (uint64_t)i, NULL);
    }
}

TG_TEST(range_error)
{
    const char *dir = tg_test_tmpdir("extsort-range");
    tg_edgesort_opts_t o = {.num_nodes = 10, .tmp_dir = dir, .mem_bytes = 1 << 20};
    tg_edgesort_t *es;
    TG_CHECK_OK(tg_edgesort_create(&es, &o));
    uint64_t s[3] = {1, 2, 3}, d[3] = {4, 10, 5};
    TG_CHECK_OK(tg_edgesort_add(es, s, d, 1));
    TG_CHECK_ERR(tg_edgesort_add(es, s, d, 3), "edge 2 (2 -> 10): node id 10 is out of range");
    tg_edgesort_destroy(es);
    tg_edgesort_opts_t bad = {.num_nodes = 10};
    TG_CHECK_ERR(tg_edgesort_create(&es, &bad), "temporary");
    tg_rmtree(dir);
}

int main(void)
{
    TG_RUN(in_memory_single_run);
    TG_RUN(multi_run);
    TG_RUN(options);
    TG_RUN(index_widths_and_wide_keys);
    TG_RUN(thread_counts_and_edge_cases);
    TG_RUN(msd_path);
    TG_RUN(reserved_keys);
    TG_RUN(planned_runs);
    TG_RUN(damaged_run_file);
    TG_RUN(range_error);
    return tg_test_done();
}
