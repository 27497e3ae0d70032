/* The ginex strategy: every gathered row equals the in-memory store's, over passes that carry
 * the cache over; the misses the executor counts equal the misses the changeset simulation
 * predicted (the cache followed the plan exactly), with and without a resume point inside a
 * superbatch; the hit ratio is above zero; the spill files leave nothing behind (after a pass,
 * an I/O error of the executor, an I/O error of the inspector's sampling); a budget too small is
 * refused with the amounts; the epoch JSON and the human epoch line carry the plan's figures. The
 * checkpoints' equality with memory's and resume after every batch are test_strategy's, for every
 * exact strategy. */
#include "test_engine_common.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine-impl.h"
#include "engine/strategies/ginex.h"

static char root[4000], ds[4200];
#define N 3000u
#define DIM 16u

typedef struct {
    uint64_t mem, superbatch, chunk, feature_cache;
    int sampler_threads;
} cfg_t;

static int open_run(tg_run_t *r, const cfg_t *c)
{
    static char v[3][32];
    static tg_strategy_arg_t args[5];
    snprintf(v[0], 32, "%llu", (unsigned long long)(c->superbatch ? c->superbatch : 3));
    snprintf(v[1], 32, "%llu", (unsigned long long)(c->chunk ? c->chunk : 64));
    args[0] = (tg_strategy_arg_t){"superbatch", v[0]};
    args[1] = (tg_strategy_arg_t){"chunk-rows", v[1]};
    args[2] = (tg_strategy_arg_t){"io-depth", "8"}; /* no device probe in tests */
    args[3] = (tg_strategy_arg_t){"io-gap", "0"};
    snprintf(v[2], 32, "%llu", (unsigned long long)c->feature_cache);
    args[4] = (tg_strategy_arg_t){"feature-cache", c->feature_cache ? v[2] : "auto"};
    tg_run_opts_t o = {.dataset = ds,
                       .strategy = "ginex",
                       .args = args,
                       .nargs = 5,
                       .mem_bytes = c->mem,
                       .threads = 1};
    tg_strategy_opts_default(&o.sopts);
    o.sopts.sampler_threads = c->sampler_threads;
    return tg_run_open_opts(r, &o);
}

typedef struct {
    tg_store_t *ref;
    uint64_t bad_rows, steps, first_id;
    float *Xref;
} check_t;

static int check_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, DIM, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    if (!c->steps) c->first_id = b->id;
    c->steps++;
    return 0;
}

static int run_pass(tg_run_t *r, check_t *c, uint64_t epoch, uint64_t first, tg_pass_stats_t *st)
{
    static const int64_t fan[2] = {5, 5};
    tg_pass_t p = {.seeds = r->split[0],
                   .num_seeds = r->split_n[0],
                   .batch_size = 64,
                   .seed = 7,
                   .epoch = epoch,
                   .first_batch = first,
                   .num_layers = 2,
                   .fanouts = fan,
                   .step = check_step,
                   .ctx = c};
    return tg_run_pass(r, &p, st);
}

/* Files in the dataset's derived/ directory (the spill files' directory) other than derived
 * files: 0 when absent. */
static int derived_files(void)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/derived", ds);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) /* derived files (the neighbour cache, out-degrees) do not count */
        if (e->d_name[0] != '.' && strncmp(e->d_name, "ncache-", 7) &&
            strncmp(e->d_name, "outdeg-", 7))
            n++;
    closedir(d);
    return n;
}

static void pass_case(const cfg_t *cfg, const char *what)
{
    tg_run_t r;
    if (open_run(&r, cfg) < 0) {
        TG_FAIL("%s: open: %s", what, tg_errmsg());
        return;
    }
    check_t c = {0};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
    int before = derived_files();
    /* two whole passes (the second starts from the first's cache), then one resumed inside a
     * superbatch */
    static const uint64_t first[3] = {0, 0, 4};
    for (int pass = 0; pass < 3; pass++) {
        tg_pass_stats_t st;
        c.steps = 0;
        if (run_pass(&r, &c, (uint64_t)pass, first[pass], &st) < 0)
            TG_FAIL("%s: pass %d: %s", what, pass, tg_errmsg());
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        TG_CHECK(c.steps > 0 && c.first_id == first[pass]);
        tg_ginex_figures_t f;
        TG_CHECK_OK(tg_ginex_figures(&st, &f));
        TG_CHECK(st.have_cache && st.have_io);
        TG_CHECK(st.cache_lookups > 0);
        TG_CHECK_EQ_U64(f.misses, st.cache_lookups - st.cache_hits);
        TG_CHECK_EQ_U64(f.misses, f.predicted_misses);
        TG_CHECK_EQ_U64(st.tiers[0].lookups, st.cache_lookups);
        TG_CHECK(!strcmp(st.tiers[0].name, "ginex-cache"));
        /* the file tier read exactly the misses and the prefetched rows */
        TG_CHECK_EQ_U64(st.tiers[st.ntiers - 1].lookups, f.predicted_misses + f.prefetch_rows);
        TG_CHECK(f.superbatches >= 1 && f.superbatch >= 1);
        if (pass == 1) {
            TG_CHECK(st.cache_hits > 0 || cfg->feature_cache == 1 || cfg->mem);
            fprintf(stderr, "  %-28s hit ratio %.3f, %llu superbatches, %llu prefetched\n", what,
                    (double)st.cache_hits / (double)st.cache_lookups,
                    (unsigned long long)f.superbatches, (unsigned long long)f.prefetch_rows);
        }
    }
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before); /* no spill file left */
    TG_CHECK(!cfg->mem || r.budget.peak <= cfg->mem);
    tg_store_release(c.ref);
    free(c.Xref);
    tg_run_close(&r);
}

TG_TEST(rows_and_planned_misses)
{
    /* a cache of 600 of the 3000 rows: evictions in every iteration */
    pass_case(&(cfg_t){.superbatch = 3, .feature_cache = 600 * 72}, "superbatch 3");
    pass_case(&(cfg_t){.superbatch = 1, .feature_cache = 600 * 72, .sampler_threads = 2},
              "superbatch 1");
    pass_case(&(cfg_t){.superbatch = 1000, .feature_cache = 600 * 72}, "one superbatch");
    pass_case(&(cfg_t){.superbatch = 3, .feature_cache = 1}, "no feature cache");
    pass_case(&(cfg_t){.mem = 16 << 20, .superbatch = 0, .chunk = 16}, "--mem 16M, auto");
}

TG_TEST(budget_too_small)
{
    tg_run_t r;
    TG_CHECK_ERR(open_run(&r, &(cfg_t){.mem = 100 << 10}), "--mem");
}

/* A read error of the executor (a feature row) and of the inspector (an index read while it
 * samples): the pass fails naming the file and the offset, and leaves no file behind. */
TG_TEST(read_errors)
{
    for (int which = 0; which < 2; which++) {
        tg_run_t r;
        TG_CHECK_OK(open_run(&r, &(cfg_t){.superbatch = 2}));
        check_t c = {0};
        TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
        int before = derived_files();
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = which ? "indices.bin" : "features.bin",
                           .lo = 0,
                           .hi = 1ull << 40,
                           .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&f));
        tg_pass_stats_t st;
        tg_err_clear();
        int rc = run_pass(&r, &c, 0, 0, &st);
        const char *m = tg_errmsg();
        if (rc >= 0 || !strstr(m, f.file) || !strstr(m, "offset"))
            TG_FAIL("%s: rc %d, message '%s'", f.file, rc, m);
        else
            fprintf(stderr, "  %s\n", m);
        tg_io_fault_clear();
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
        tg_store_release(c.ref);
        free(c.Xref);
        tg_run_close(&r);
    }
}

/* The inspector fails while it samples a later superbatch (an index read after `after` good
 * ones): the superbatches before it train first, the pass then fails naming the file, and the
 * inspector's thread, spill files and plans all go (ASan, the derived/ directory). */
TG_TEST(inspector_error_later)
{
    int late = 0;
    for (uint64_t after = 10; after <= 10000; after *= 4) {
        tg_run_t r;
        TG_CHECK_OK(open_run(&r, &(cfg_t){.superbatch = 2, .feature_cache = 600 * 72}));
        check_t c = {0};
        TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
        int before = derived_files();
        tg_pass_stats_t st;
        TG_CHECK_OK(run_pass(&r, &c, 0, 0, &st)); /* sets up (the split's profile reads too) */
        uint64_t all = c.steps;
        c.steps = 0;
        tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                           .file = "indices.bin",
                           .hi = 1ull << 40,
                           .err = EIO,
                           .after = after};
        TG_CHECK_OK(tg_io_fault_add(&f));
        tg_err_clear();
        int rc = run_pass(&r, &c, 1, 0, &st);
        tg_io_fault_clear();
        if (rc == 0) {
            TG_CHECK_EQ_U64(c.steps, all); /* fewer reads than `after` */
        } else {
            if (!strstr(tg_errmsg(), "indices.bin")) TG_FAIL("message: %s", tg_errmsg());
            TG_CHECK(c.steps < all);
            late |= c.steps > 0;
            fprintf(stderr, "  after %llu index reads: %llu of %llu batches trained\n",
                    (unsigned long long)after, (unsigned long long)c.steps,
                    (unsigned long long)all);
        }
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        tg_store_release(c.ref);
        free(c.Xref);
        tg_run_close(&r);
        TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
    }
    TG_CHECK(late);
}

/* The CLI: the epoch JSON and the human epoch line have the plan's figures, and the misses equal
 * the prediction. */
TG_TEST(cli_json)
{
    char *out = NULL;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/run", root);
    int rc = tg_test_cli(&out,
                         "train %s --out %s --model sage --layers 2 --hidden 16 --fanouts 5,5 "
                         "--batch-size 64 --epochs 2 --threads 1 --json --strategy ginex "
                         "--superbatch 4 --io-depth 8 --mem 40M",
                         ds, dir);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    for (int e = 0; e < 2 && rc == 0; e++) {
        TG_CHECK(json_value(out, "changeset_s", e) >= 0);
        TG_CHECK(json_value(out, "cache_init_s", e) >= 0);
        TG_CHECK(json_value(out, "cache_misses", e) == json_value(out, "predicted_misses", e));
        TG_CHECK(json_value(out, "superbatches", e) >= 1);
    }
    TG_CHECK(out && strstr(out, "ginex: superbatch of 4 batches"));
    free(out);
    /* the human epoch line: the plan's clause follows the I/O figures */
    out = NULL;
    snprintf(dir, sizeof dir, "%s/run-line", root);
    rc = tg_test_cli(&out,
                     "train %s --out %s --model sage --layers 2 --hidden 16 --fanouts 5,5 "
                     "--batch-size 64 --epochs 1 --threads 1 --strategy ginex --superbatch 4 "
                     "--mem 40M",
                     ds, dir);
    TG_CHECK(rc == 0);
    const char *io = out ? strstr(out, "; io ") : NULL, *m = out ? strstr(out, ", misses ") : NULL;
    unsigned long long misses = 1, planned = 0;
    TG_CHECK(io && m && io < m && strstr(io, ", hit ratio ") < m);
    TG_CHECK(m && sscanf(m, ", misses %llu (planned %llu)", &misses, &planned) == 2);
    TG_CHECK_EQ_U64(misses, planned);
    TG_CHECK(m && strstr(m, "), changesets ") && strstr(m, " s, cache init "));
    if (!m) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
}

/* The split between the caches is the cost model's (one rule): a run that names ginex without
 * --ginex-split takes the planned share and says so; --ginex-split given wins, unplanned; where
 * the planner cannot profile (the device probe cannot open features.bin, no cached probe) the
 * feature cache takes all and the log says the split was not planned. */
static int share_in(const char *out)
{
    const char *at = out ? strstr(out, "neighbour cache share ") : NULL;
    int pct = -1;
    if (at) sscanf(at, "neighbour cache share %d%%", &pct);
    return pct;
}

TG_TEST(split_planned_or_given)
{
    char *out = NULL, dir[4300];
    const char *args = "--model sage --layers 2 --hidden 16 --fanouts 5,5 --batch-size 64 "
                       "--epochs 1 --threads 1 --strategy ginex --io-depth 8 --mem 40M";
    snprintf(dir, sizeof dir, "%s/planned", root);
    int rc = tg_test_cli(&out, "train %s --out %s %s", ds, dir, args);
    TG_CHECK(rc == 0 && out && strstr(out, "ginex: planned from a profile of "));
    const char *at = out ? strstr(out, "ginex: --ginex-split ") : NULL;
    int planned = -1;
    TG_CHECK(at && sscanf(at, "ginex: --ginex-split %d planned", &planned) == 1);
    TG_CHECK(planned >= 0 && planned <= 100 && share_in(out) == planned);
    TG_CHECK(out && !strstr(out, "not planned"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    snprintf(dir, sizeof dir, "%s/given", root);
    rc = tg_test_cli(&out, "train %s --out %s %s --ginex-split 30", ds, dir, args);
    TG_CHECK(rc == 0 && out && !strstr(out, "planned from") && share_in(out) == 30);
    free(out);
    char cache[4300];
    snprintf(cache, sizeof cache, "%s/empty-cache", root);
    const char *old = getenv("XDG_CACHE_HOME");
    char *saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("TIERGNN_IO_FAULT", "EINVAL@0,op=open,file=features.bin", 1);
    snprintf(dir, sizeof dir, "%s/unplanned", root);
    rc = tg_test_cli(&out, "train %s --out %s %s", ds, dir, args);
    unsetenv("TIERGNN_IO_FAULT");
    if (saved)
        setenv("XDG_CACHE_HOME", saved, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(saved);
    TG_CHECK(rc == 0 && out && strstr(out, "ginex: its options are not planned (") &&
             strstr(out, "its defaults stand") && share_in(out) == 0 &&
             strstr(out, "--ginex-split not planned"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
}

int main(void)
{
    alarm(300);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("ginex"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = N;
    so.dim = DIM;
    synth_write(ds, &so);
    TG_RUN(rows_and_planned_misses);
    TG_RUN(budget_too_small);
    TG_RUN(read_errors);
    TG_RUN(inspector_error_later);
    TG_RUN(cli_json);
    TG_RUN(split_planned_or_given);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
