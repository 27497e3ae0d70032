/* The gnndrive pipeline in process (tg_run_pass): every batch's feature matrix equals the
 * in-memory store's rows, in batch order, for any number of extractors, queue depth, chunk size
 * (down to constant eviction), merge gap, f16 files and normalisation; out-of-order passes run
 * every batch once; a stop drains to a prefix; and an error in any stage - a sampler's (index
 * read fault), an extractor's (feature read fault, a feature file truncated mid-run), the
 * trainer's - ends the pass with that stage's message after joining every thread and freeing
 * every batch (ASan checks the freeing). Also the mmap strategy's SIGBUS guard under truncation. */
#include "test_engine_common.h"

#include <fcntl.h>
#include <unistd.h>

#include "engine/engine-impl.h"
#include "tiergnn/featbuf.h"

static char root[4000], ds[4200], ds16[4200];

typedef struct {
    const char *strategy;
    uint64_t mem;
    int extractors, queue_depth, sampler_threads;
    uint32_t chunk;
    int64_t gap;
    int normalize, out_of_order, sweep;
    uint64_t cache_bytes;
} cfg_t;

static void cfg_default(cfg_t *c)
{
    memset(c, 0, sizeof *c);
    c->strategy = "gnndrive";
    c->extractors = 2;
    c->queue_depth = 2;
    c->sampler_threads = 2;
    c->chunk = 0;
    c->gap = 0;
}

static int open_run(tg_run_t *r, const char *dir, const cfg_t *c)
{
    tg_run_opts_t o;
    memset(&o, 0, sizeof o);
    o.dataset = dir;
    o.strategy = c->strategy;
    tg_strategy_opts_default(&o.sopts);
    o.sopts.normalize = c->normalize;
    o.sopts.threads = 1;
    o.sopts.sampler_threads = c->sampler_threads;
    /* the strategies' own options, as the CLI passes them */
    static char v[14][32];
    static tg_strategy_arg_t args[14];
    int n = 0;
#define ARG(name, fmt, val)                                                                        \
    do {                                                                                           \
        snprintf(v[n], sizeof v[n], fmt, val);                                                     \
        args[n] = (tg_strategy_arg_t){name, v[n]};                                                 \
        n++;                                                                                       \
    } while (0)
    ARG("gather-threads", "%d", 2);
    ARG("extractors", "%d", c->extractors);
    ARG("queue-depth", "%d", c->queue_depth);
    ARG("io-depth", "%d", 8); /* no device probe in tests */
    ARG("io-gap", "%llu", (unsigned long long)c->gap);
    ARG("chunk-rows", "%u", (unsigned)c->chunk);
    ARG("sweep-batches", "%d", c->sweep ? c->sweep : 1);
    ARG("resident-indices", "%d", 0); /* these tests read the indices from disk */
    ARG("features-in-ram", "%d", 0);  /* and the features through the buffer */
    if (c->cache_bytes) ARG("feature-buffer", "%llu", (unsigned long long)c->cache_bytes);
#undef ARG
    if (c->out_of_order) args[n++] = (tg_strategy_arg_t){"out-of-order", NULL};
    o.args = args;
    o.nargs = n;
    o.mem_bytes = c->mem;
    o.threads = 1;
    return tg_run_open_opts(r, &o);
}

/* What the step callback checks and does. */
typedef struct {
    tg_store_t *ref; /* the in-memory store: the truth */
    uint32_t dim;
    uint64_t steps, bad_rows, out_of_order_seen, last_id;
    uint8_t *seen; /* per batch id */
    uint64_t nbatches;
    int64_t stop_at;     /* return TG_PASS_STOP at this step (-1: never) */
    int64_t fail_at;     /* return -ERANGE at this step */
    int64_t truncate_at; /* truncate the feature file at this step */
    const char *trunc_path;
    uint64_t trunc_to;
    float *Xref;
    size_t xcap;
} check_t;

static int check_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    if ((int64_t)c->steps == c->truncate_at)
        TG_CHECK(truncate(c->trunc_path, (off_t)c->trunc_to) == 0);
    if ((int64_t)c->steps == c->fail_at) {
        c->steps++;
        return tg_err(-ERANGE, "test: the step of batch %llu fails", (unsigned long long)b->id);
    }
    size_t need = (size_t)b->num_nodes * c->dim;
    if (need > c->xcap) {
        free(c->Xref);
        c->Xref = malloc(need * sizeof *c->Xref);
        c->xcap = need;
    }
    if (tg_store_gather(c->ref, b->nodes, b->num_nodes, c->Xref) < 0) {
        TG_FAIL("reference gather: %s", tg_errmsg());
        return -EIO;
    }
    for (uint32_t i = 0; i < b->num_nodes; i++)
        if (memcmp(X + (size_t)i * c->dim, c->Xref + (size_t)i * c->dim, c->dim * sizeof *X))
            c->bad_rows++;
    if (b->id < c->nbatches) {
        if (c->seen[b->id]) TG_FAIL("batch %llu delivered twice", (unsigned long long)b->id);
        c->seen[b->id] = 1;
    }
    if (c->steps && b->id != c->last_id + 1) c->out_of_order_seen++;
    c->last_id = b->id;
    c->steps++;
    return (int64_t)c->steps - 1 == c->stop_at ? TG_PASS_STOP : 0;
}

/* One pass over the training split of r (seed order of epoch 0), checked against ref. */
static int run_pass(tg_run_t *r, tg_store_t *ref, check_t *c, uint64_t first, tg_pass_stats_t *st,
                    int allow_ooo)
{
    static const int64_t fan[2] = {5, 5};
    uint64_t n = r->split_n[0];
    uint64_t *order = malloc(n * sizeof *order);
    memcpy(order, r->split[0], n * sizeof *order);
    tg_sampler_shuffle_epoch(order, n, 7, 0);
    uint64_t bsz = 64;
    c->ref = ref;
    c->dim = ref->dim;
    c->nbatches = (n + bsz - 1) / bsz;
    if (!c->seen) c->seen = calloc(c->nbatches, 1);
    tg_pass_t p = {.seeds = order,
                   .num_seeds = n,
                   .batch_size = bsz,
                   .seed = 7,
                   .epoch = 0,
                   .first_batch = first,
                   .num_layers = 2,
                   .fanouts = fan,
                   .allow_out_of_order = allow_ooo,
                   .step = check_step,
                   .ctx = c};
    int rc = tg_run_pass(r, &p, st);
    free(order);
    return rc;
}

static void check_free(check_t *c)
{
    free(c->seen);
    free(c->Xref);
    memset(c, 0, sizeof *c);
}

static void check_init(check_t *c)
{
    memset(c, 0, sizeof *c);
    c->stop_at = c->fail_at = c->truncate_at = -1;
}

static tg_store_t *ref_store(const char *dir, int normalize)
{
    tg_dataset_t *d;
    tg_store_t *st = NULL;
    if (tg_dataset_open(&d, dir, 0) < 0) return NULL;
    tg_store_opts_t so = {.normalize = normalize};
    if (tg_store_memory_open(&st, d, &so) < 0) st = NULL;
    tg_dataset_close(d);
    return st;
}

/* ---------------------------------------------------------------- correct rows, any shape */

static void rows_case(const char *dir, const cfg_t *c, const char *what)
{
    tg_run_t r;
    int rc = open_run(&r, dir, c);
    if (rc < 0) {
        TG_FAIL("%s: open: %s", what, tg_errmsg());
        return;
    }
    tg_store_t *ref = ref_store(dir, c->normalize);
    check_t k;
    check_init(&k);
    tg_pass_stats_t st;
    for (int pass = 0; pass < 2; pass++) { /* the second pass reuses the warm buffer */
        if (k.seen) memset(k.seen, 0, k.nbatches);
        k.steps = 0;
        rc = run_pass(&r, ref, &k, 0, &st, 1);
        if (rc < 0) TG_FAIL("%s: pass %d: %s", what, pass, tg_errmsg());
        TG_CHECK_EQ_U64(k.bad_rows, 0);
        TG_CHECK_EQ_U64(k.steps, k.nbatches);
        TG_CHECK_EQ_U64(st.next_batch, k.nbatches);
        for (uint64_t b = 0; b < k.nbatches; b++)
            if (!k.seen[b]) TG_FAIL("%s: batch %llu never trained", what, (unsigned long long)b);
        if (!c->out_of_order && k.out_of_order_seen)
            TG_FAIL("%s: in-order pass delivered out of order", what);
        TG_CHECK(st.have_cache && st.cache_lookups > 0);
        TG_CHECK(st.have_io && st.io_requests > 0 && st.io_read_bytes > 0);
    }
    fprintf(stderr,
            "  %-40s hit ratio %.3f, %llu reads, %llu bytes, batch bytes peak %llu, "
            "out-of-order steps %llu\n",
            what, (double)st.cache_hits / (double)st.cache_lookups,
            (unsigned long long)st.io_requests, (unsigned long long)st.io_read_bytes,
            (unsigned long long)st.batch_bytes_peak, (unsigned long long)k.out_of_order_seen);
    TG_CHECK(r.budget.peak <= (c->mem ? c->mem : UINT64_MAX));
    check_free(&k);
    tg_store_release(ref);
    tg_run_close(&r);
}

TG_TEST(rows_match_memory_store)
{
    cfg_t c;
    cfg_default(&c);
    rows_case(ds, &c, "defaults");
    c.extractors = 1;
    c.queue_depth = 1;
    c.sampler_threads = 0;
    rows_case(ds, &c, "1 extractor, depth 1, inline sampling");
    cfg_default(&c);
    c.extractors = 4;
    c.chunk = 64; /* many chunks per batch, the buffer at its minimum of 4 x 64 rows: eviction */
    c.cache_bytes = 1;
    rows_case(ds, &c, "4 extractors, 64-row chunks");
    cfg_default(&c);
    c.gap = 4096; /* rows merged across holes into staging */
    c.normalize = 1;
    rows_case(ds, &c, "merge gap 4 KiB, normalised");
    cfg_default(&c);
    c.gap = 1024;
    rows_case(ds16, &c, "f16 file, merge gap 1 KiB");
    cfg_default(&c);
    c.out_of_order = 1;
    c.extractors = 3;
    rows_case(ds, &c, "out of order, 3 extractors");
    cfg_default(&c);
    c.sweep = 3; /* three batches per sweep: shared rows read once, scattered to each */
    c.chunk = 100;
    rows_case(ds, &c, "sweeps of 3 batches, 100-row chunks");
    c.out_of_order = 1;
    c.gap = 4096;
    rows_case(ds16, &c, "sweeps of 3, out of order, f16, gap 4 KiB");
    cfg_default(&c);
    c.mem = 15u << 20; /* a tight budget: the buffer gets what is left */
    c.chunk = 128;
    rows_case(ds, &c, "--mem 15M, 128-row chunks");
}

/* ---------------------------------------------------------------- stops and resumption */

TG_TEST(stop_and_first_batch)
{
    for (int ooo = 0; ooo < 2; ooo++) {
        cfg_t c;
        cfg_default(&c);
        c.out_of_order = ooo;
        c.extractors = 3;
        c.sweep = 2;
        tg_run_t r;
        TG_CHECK_OK(open_run(&r, ds, &c));
        tg_store_t *ref = ref_store(ds, 0);
        check_t k;
        check_init(&k);
        k.stop_at = 3;
        tg_pass_stats_t st;
        TG_CHECK_OK(run_pass(&r, ref, &k, 0, &st, 1));
        TG_CHECK(st.stopped);
        /* in order: exactly 4 steps; out of order: the batches handed out are drained, and
         * they form a prefix of the pass */
        if (!ooo) TG_CHECK_EQ_U64(st.next_batch, 4);
        TG_CHECK(st.next_batch >= 4 && st.next_batch == k.steps);
        for (uint64_t b = 0; b < st.next_batch; b++)
            if (!k.seen[b]) TG_FAIL("stopped pass left batch %llu out", (unsigned long long)b);
        /* the rest, from next_batch */
        uint64_t first = st.next_batch;
        k.stop_at = -1;
        k.steps = 0;
        TG_CHECK_OK(run_pass(&r, ref, &k, first, &st, 1));
        TG_CHECK_EQ_U64(k.steps, k.nbatches - first);
        for (uint64_t b = 0; b < k.nbatches; b++)
            if (!k.seen[b]) TG_FAIL("resumed pass missed batch %llu", (unsigned long long)b);
        TG_CHECK_EQ_U64(k.bad_rows, 0);
        check_free(&k);
        tg_store_release(ref);
        tg_run_close(&r);
    }
}

/* ---------------------------------------------------------------- errors of every stage */

/* A pass that must fail with a message containing `needle`, with the fault rule f (may be NULL)
 * in force: added after the reference store has read the rows (its plain reads meet the rules
 * too), removed at the end. */
static void failing_pass(const cfg_t *c, check_t *k, const char *needle, const char *what,
                         const tg_io_fault_t *f)
{
    tg_run_t r;
    int rc = open_run(&r, ds, c);
    if (rc < 0) {
        TG_FAIL("%s: open: %s", what, tg_errmsg());
        return;
    }
    tg_store_t *ref = ref_store(ds, 0);
    if (!ref) {
        TG_FAIL("%s: the reference store: %s", what, tg_errmsg());
        tg_run_close(&r);
        return;
    }
    if (f) TG_CHECK_OK(tg_io_fault_add(f));
    tg_pass_stats_t st;
    tg_err_clear();
    rc = run_pass(&r, ref, k, 0, &st, 1);
    if (rc >= 0)
        TG_FAIL("%s: the pass succeeded", what);
    else if (!strstr(tg_errmsg(), needle))
        TG_FAIL("%s: message '%s' lacks '%s'", what, tg_errmsg(), needle);
    else
        fprintf(stderr, "  %s: %s\n", what, tg_errmsg());
    TG_CHECK_EQ_U64(k->bad_rows, 0); /* never wrong numbers, up to the failure */
    /* a later pass reports the earlier failure instead of hanging */
    if (!strcmp(c->strategy, "gnndrive")) {
        check_t k2;
        check_init(&k2);
        TG_CHECK(run_pass(&r, ref, &k2, 0, &st, 1) < 0);
        check_free(&k2);
    }
    tg_io_fault_clear();
    tg_store_release(ref);
    tg_run_close(&r);
}

TG_TEST(extractor_read_error)
{
    for (int e = 1; e <= 3; e += 2) {
        cfg_t c;
        cfg_default(&c);
        c.extractors = e;
        c.gap = e == 3 ? 2048 : 0;
        /* node 0's row and a few after it: read by most batches */
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = "features.bin",
                           .lo = 64 * 16 * 4,
                           .hi = 80 * 16 * 4,
                           .err = EIO};
        check_t k;
        check_init(&k);
        failing_pass(&c, &k, "features.bin", e == 1 ? "EIO, 1 extractor" : "EIO, 3 extractors", &f);
        check_free(&k);
    }
}

TG_TEST(sampler_read_error)
{
    cfg_t c;
    cfg_default(&c);
    tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                       .file = "indices.bin",
                       .lo = 0,
                       .hi = 1 << 30,
                       .err = EIO,
                       .after = 20};
    check_t k;
    check_init(&k);
    failing_pass(&c, &k, "indices.bin", "EIO on indices.bin", &f);
    check_free(&k);
}

/* Reads of features.bin or indices.bin that come back short (the bytes stop at one offset) end
 * the pass with the file and the offset; the rows up to it were right. */
TG_TEST(short_read)
{
    const char *files[2] = {"features.bin", "indices.bin"};
    for (int i = 0; i < 2; i++) {
        cfg_t c;
        cfg_default(&c);
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = files[i],
                           .lo = 70 * 16 * 4,
                           .hi = 1 << 30,
                           .short_read = 1,
                           .after = 3};
        check_t k;
        check_init(&k);
        char needle[64];
        snprintf(needle, sizeof needle, "%s: unexpected end of file at offset", files[i]);
        failing_pass(&c, &k, needle,
                     files[i] == files[0] ? "short feature read" : "short index read", &f);
        check_free(&k);
    }
}

TG_TEST(trainer_error)
{
    cfg_t c;
    cfg_default(&c);
    c.extractors = 3;
    check_t k;
    check_init(&k);
    k.fail_at = 2;
    failing_pass(&c, &k, "the step of batch 2 fails", "trainer error at step 2", NULL);
    TG_CHECK_EQ_U64(k.steps, 3);
    check_free(&k);
}

/* Truncates a copy of the dataset's feature file under the pass. */
static void truncation_case(const char *strategy, const char *needle)
{
    char copy[4300];
    snprintf(copy, sizeof copy, "%s/trunc-%s", root, strategy);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 3000;
    so.dim = 16;
    synth_write(copy, &so);
    char feat[4400];
    snprintf(feat, sizeof feat, "%s/features.bin", copy);
    cfg_t c;
    cfg_default(&c);
    c.strategy = strategy;
    tg_run_t r;
    if (open_run(&r, copy, &c) < 0) {
        TG_FAIL("%s: open: %s", strategy, tg_errmsg());
        return;
    }
    tg_store_t *ref = ref_store(copy, 0);
    check_t k;
    check_init(&k);
    k.truncate_at = 2;
    k.trunc_path = feat;
    k.trunc_to = 1000 * 16 * 4 + 100; /* rows from node 1000 on are gone */
    tg_pass_stats_t st;
    tg_err_clear();
    int rc = run_pass(&r, ref, &k, 0, &st, 1);
    if (rc >= 0)
        TG_FAIL("%s: the pass survived the truncation", strategy);
    else if (!strstr(tg_errmsg(), needle) || !strstr(tg_errmsg(), "features.bin"))
        TG_FAIL("%s: message '%s' lacks '%s'", strategy, tg_errmsg(), needle);
    else
        fprintf(stderr, "  %s: %s\n", strategy, tg_errmsg());
    /* the rows compared before the failure were all right (the reference store read the file
     * before the truncation) */
    TG_CHECK_EQ_U64(k.bad_rows, 0);
    check_free(&k);
    tg_store_release(ref);
    tg_run_close(&r);
}

TG_TEST(feature_file_truncated_mid_run)
{
    truncation_case("gnndrive", "offset");
    truncation_case("mmap",
                    "truncated"); /* SIGBUS names the offset; a partial last page the size */
}

TG_TEST(budget_too_small)
{
    cfg_t c;
    cfg_default(&c);
    c.mem = 200 << 10;
    tg_run_t r;
    TG_CHECK_ERR(open_run(&r, ds, &c), "give --mem");
    c.strategy = "memory";
    c.mem = 100 << 10;
    TG_CHECK_ERR(open_run(&r, ds, &c), "is too small for strategy memory");
    c.strategy = "auto";
    c.mem = 64 << 20;
    TG_CHECK_OK(open_run(&r, ds, &c));
    TG_CHECK(r.strat_i == &tg_strategy_memory);
    tg_run_close(&r);
}

int main(void)
{
    alarm(300); /* a deadlock fails the test instead of hanging it */
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("gnndrive"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    snprintf(ds16, sizeof ds16, "%s/ds16", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 3000;
    so.dim = 16;
    synth_write(ds, &so);
    so.dtype = TG_F16;
    so.dim = 24;
    synth_write(ds16, &so);
    TG_RUN(rows_match_memory_store);
    TG_RUN(stop_and_first_batch);
    TG_RUN(extractor_read_error);
    TG_RUN(sampler_read_error);
    TG_RUN(short_read);
    TG_RUN(trainer_error);
    TG_RUN(feature_file_truncated_mid_run);
    TG_RUN(budget_too_small);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
