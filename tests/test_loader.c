/* The pull-model loader (tiergnn/loader.h): over the whole strategy table it yields the batches
 * (node ids, blocks) and X rows of the strategy's own training pass with the same seed
 * (tg_run_pass, batch by batch), and X equals the feature file's rows; epochs again, and after a
 * mid-epoch set_epoch; ranks 0..K-1 partition the epoch by the rank rule; the held-batch limit;
 * close before the first batch, mid-epoch and with batches held (no thread or fd left: ASan
 * sees leaks); custom seeds in order with their labels; the whole-graph batch; every refused
 * option names itself. */
#include "test_engine_common.h"

#include <dirent.h>
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <unistd.h>

#include "tiergnn/engine.h"
#include "tiergnn/io.h"
#include "tiergnn/loader.h"
#include "engine/engine-impl.h"

static char root[4000], ds[4200];

#define BATCH 64
#define EPOCHS 2
#define MAX_BATCHES 64

/* ---------------------------------------------------------------- helpers */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 0x100000001b3ull;
    return h;
}

/* One digest of a batch's ids and blocks, one of its X. */
static uint64_t batch_digest(const tg_batch_t *b)
{
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &b->num_layers, sizeof b->num_layers);
    h = fnv(h, &b->num_seeds, sizeof b->num_seeds);
    h = fnv(h, b->nodes, (size_t)b->num_nodes * sizeof *b->nodes);
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *k = &b->blocks[l];
        h = fnv(h, &k->num_dst, sizeof k->num_dst);
        h = fnv(h, &k->num_src, sizeof k->num_src);
        h = fnv(h, k->indptr, ((size_t)k->num_dst + 1) * sizeof *k->indptr);
        h = fnv(h, k->indices, (size_t)k->num_edges * sizeof *k->indices);
        if (k->weights) h = fnv(h, k->weights, (size_t)k->num_edges * sizeof *k->weights);
    }
    return h;
}

static uint64_t x_digest(const tg_batch_t *b, const float *X, uint32_t dim)
{
    return fnv(0xcbf29ce484222325ull, X, (size_t)b->num_nodes * dim * sizeof *X);
}

/* The batches of one pass, by id. */
typedef struct {
    uint64_t n; /* batches seen */
    int seen[MAX_BATCHES];
    uint64_t b[MAX_BATCHES], x[MAX_BATCHES];
    uint32_t dim;
} digests_t;

/* A strategy's example options (its table's example_args) plus the test's I/O settings, split
 * into args; --mem into *mem. */
typedef struct {
    char buf[1024];
    tg_strategy_arg_t args[32];
    int nargs;
    uint64_t mem;
} sargs_t;

static void sargs_of(sargs_t *s, const char *name)
{
    const tg_strategy_info_t *si = tg_strategy_info_find(name);
    snprintf(s->buf, sizeof s->buf, "%s --io-depth 8 --io-gap 0",
             si && si->example_args ? si->example_args : "");
    s->nargs = 0;
    s->mem = 0;
    char *save = NULL;
    for (char *t = strtok_r(s->buf, " ", &save); t && s->nargs < 32;
         t = strtok_r(NULL, " ", &save)) {
        const char *key = t + 2;
        if (!strcmp(key, "mem")) {
            TG_CHECK(tg_parse_size(strtok_r(NULL, " ", &save), &s->mem) == 0);
            continue;
        }
        const char *val = tg_strategy_opt_kind(key) == 1 ? strtok_r(NULL, " ", &save) : NULL;
        s->args[s->nargs++] = (tg_strategy_arg_t){key, val};
    }
}

static void opts_for(tg_loader_opts_t *o, const char *strategy, const sargs_t *sa)
{
    tg_loader_opts_default(o);
    o->dataset = ds;
    o->strategy = strategy;
    o->strategy_args = sa->args;
    o->num_strategy_args = sa->nargs;
    o->mem_bytes = sa->mem;
    o->fanouts[0] = o->fanouts[1] = 5;
    o->batch_size = BATCH;
    o->seed = 3;
    o->num_epochs = EPOCHS;
}

static int ref_step(void *ctx, const tg_batch_t *b, const float *X)
{
    digests_t *d = ctx;
    if (b->id >= MAX_BATCHES) return tg_err(-EINVAL, "batch id %llu", (unsigned long long)b->id);
    d->seen[b->id] = 1;
    d->b[b->id] = batch_digest(b);
    d->x[b->id] = x_digest(b, X, d->dim);
    d->n++;
    return 0;
}

/* The strategy's own training passes (tg_run_pass, as tiergnn train runs them) over epochs
 * 0..EPOCHS-1, digested; with own, the keys train's epoch line adds for epoch 0's pass beside
 * the shared ones (the strategy's section by its report hook, neighbor_cache) as one JSON
 * object. */
static int reference(const tg_loader_opts_t *lo, digests_t ref[EPOCHS], char *own, size_t len)
{
    tg_run_t r;
    tg_run_opts_t ro = {.dataset = lo->dataset,
                        .strategy = lo->strategy,
                        .args = lo->strategy_args,
                        .nargs = lo->num_strategy_args,
                        .mem_bytes = lo->mem_bytes,
                        .threads = 1};
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.threads = 1;
    ro.sopts.sampler_threads = -1;
    int rc = tg_run_open_opts(&r, &ro);
    if (rc < 0) return rc;
    r.sampler = lo->sampler ? tg_sampler_find(lo->sampler) : NULL;
    tg_plan_t plan, next;
    tg_plan_opts_t po = {.num_nodes = r.ds->meta.num_nodes,
                         .train = r.split[0],
                         .num_train = r.split_n[0],
                         .batch_size = lo->batch_size,
                         .num_layers = lo->num_layers,
                         .fanouts = lo->fanouts,
                         .seed = lo->seed};
    TG_CHECK_OK(tg_plan_init(&plan, &po));
    TG_CHECK_OK(tg_plan_init(&next, &po));
    for (uint64_t e = 0; e < EPOCHS && rc >= 0; e++) {
        memset(&ref[e], 0, sizeof ref[e]);
        ref[e].dim = r.ds->meta.feat_dim;
        tg_plan_epoch(&plan, e);
        tg_pass_t p = {.seeds = plan.seeds,
                       .num_seeds = plan.num_seeds,
                       .batch_size = plan.batch_size,
                       .seed = lo->seed,
                       .epoch = e,
                       .num_layers = lo->num_layers,
                       .fanouts = lo->fanouts,
                       .sampler = r.sampler,
                       .allow_out_of_order = 1,
                       .training = 1,
                       .step = ref_step,
                       .ctx = &ref[e]};
        tg_pass_t np = p;
        if ((r.strat_i->info.caps & TG_STRAT_NEXT_PASS) && e + 1 < EPOCHS) {
            tg_plan_epoch(&next, e + 1);
            np.seeds = next.seeds;
            np.epoch = e + 1;
            np.step = NULL;
            np.ctx = NULL;
            p.next = &np;
        }
        uint64_t n = plan.num_batches;
        if (r.strat_i->epoch_batches && (rc = r.strat_i->epoch_batches(r.strat, &p, &n)) < 0) break;
        tg_pass_stats_t ps;
        rc = tg_run_pass(&r, &p, &ps);
        if (rc >= 0 && ref[e].n != n)
            rc = tg_err(-EIO, "reference: %llu of %llu batches", (unsigned long long)ref[e].n,
                        (unsigned long long)n);
        if (rc >= 0 && own && e == 0) {
            char buf[1024], *text = NULL;
            tg_json_t j;
            tg_json_begin(&j);
            tg_pass_report(&r, &ps, &j, NULL, 0);
            if (ps.have_ncache)
                tg_json_raw(&j, "neighbor_cache", tg_pass_ncache_json(&ps, buf, sizeof buf));
            tg_json_end(&j, NULL, &text);
            snprintf(own, len, "%s", text ? text : "");
            free(text);
        }
    }
    tg_plan_destroy(&plan);
    tg_plan_destroy(&next);
    tg_run_close(&r);
    return rc;
}

/* The memory strategy's store: the feature file's rows as f32. */
static tg_store_t *rows_store(tg_dataset_t **d)
{
    tg_store_t *st = NULL;
    TG_CHECK_OK(tg_dataset_open(d, ds, 0));
    tg_store_opts_t so = {0};
    if (*d) TG_CHECK_OK(tg_store_memory_open(&st, *d, &so));
    return st;
}

/* Takes the rest of L's epoch, checking every batch against ref (by id) and X against the
 * file's rows; returns the ids' bitmap count. lo_id..hi_id: the ids the share may hold. */
static uint64_t drain_check(tg_loader_t *L, const digests_t *ref, uint64_t lo_id, uint64_t hi_id,
                            int seen[MAX_BATCHES], const char *what)
{
    tg_dataset_t *d = NULL;
    tg_store_t *st = rows_store(&d);
    float *buf = NULL;
    const tg_loader_batch_t *b;
    int rc;
    uint64_t got = 0;
    while ((rc = tg_loader_next(L, &b)) > 0) {
        uint64_t id = b->batch.id;
        if (id < lo_id || id >= hi_id || id >= MAX_BATCHES || !ref->seen[id]) {
            TG_FAIL("%s: batch id %llu outside [%llu, %llu)", what, (unsigned long long)id,
                    (unsigned long long)lo_id, (unsigned long long)hi_id);
        } else {
            if (seen[id]++) TG_FAIL("%s: batch %llu twice", what, (unsigned long long)id);
            if (batch_digest(&b->batch) != ref->b[id])
                TG_FAIL("%s: batch %llu's ids or blocks differ from the pass's", what,
                        (unsigned long long)id);
            if (x_digest(&b->batch, b->X, b->dim) != ref->x[id])
                TG_FAIL("%s: batch %llu's X differs from the pass's", what, (unsigned long long)id);
            if (st && batch_rows_equal(st, &b->batch, b->X, b->dim, &buf) != 1)
                TG_FAIL("%s: batch %llu's X is not the feature file's rows", what,
                        (unsigned long long)id);
            for (uint32_t i = 0; i < b->batch.num_seeds; i++)
                if (b->y[i] != (int32_t)(b->batch.nodes[i] % 4))
                    TG_FAIL("%s: batch %llu seed %u: label %d, expected %d", what,
                            (unsigned long long)id, i, b->y[i], (int)(b->batch.nodes[i] % 4));
        }
        got++;
        TG_CHECK_OK(tg_loader_release(L, b));
    }
    if (rc < 0) TG_FAIL("%s: tg_loader_next: %s", what, tg_errmsg());
    TG_CHECK(tg_loader_next(L, &b) == 0 && b == NULL); /* and again at the end */
    free(buf);
    tg_store_release(st);
    tg_dataset_close(d);
    return got;
}

/* The top-level keys of the JSON object js into keys (at most max); their count. */
static int json_keys(const char *js, char keys[][48], int max)
{
    int depth = 0, n = 0;
    for (const char *p = js; *p; p++) {
        if (*p == '"') {
            const char *q = p + 1;
            while (*q && *q != '"')
                q += *q == '\\' && q[1] ? 2 : 1;
            if (depth == 1 && q[0] == '"' && q[1] == ':' && n < max)
                snprintf(keys[n++], 48, "%.*s", (int)(q - p - 1), p + 1);
            if (!*q) break;
            p = q;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return n;
}

static int key_in(const char *k, char keys[][48], int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(k, keys[i])) return 1;
    return 0;
}

/* The keys tg_loader_stats_json writes for every strategy. */
static const char *loader_keys[] = {
    "epoch",           "batches",         "rank_batches",     "pass_done",     "stopped",
    "sample_s",        "gather_s",        "wait_s",           "copy_s",        "stall_s",
    "pass_time_s",     "pass_wait_s",     "io_requests",      "io_read_bytes", "io_needed_bytes",
    "io_wait_s",       "cache_hit_ratio", "batch_bytes_peak", "mem_bytes",     "data_bytes",
    "data_bytes_peak", "cache_tiers"};
#define NUM_LOADER_KEYS ((int)(sizeof loader_keys / sizeof *loader_keys))

/* js is one JSON object with exactly the loader's keys and own's (train's strategy section),
 * each once. */
static void check_keys(const char *js, const char *own, const char *what)
{
    static char got[64][48], want[64][48];
    int n = json_keys(js, got, 64), w = json_keys(own, want, 64 - NUM_LOADER_KEYS);
    for (int i = 0; i < NUM_LOADER_KEYS; i++)
        snprintf(want[w + i], 48, "%s", loader_keys[i]);
    w += NUM_LOADER_KEYS;
    for (int i = 0; i < n; i++) {
        if (!key_in(got[i], want, w))
            TG_FAIL("%s: key %s is neither train's nor the loader's", what, got[i]);
        if (key_in(got[i], got, i)) TG_FAIL("%s: key %s twice", what, got[i]);
    }
    for (int i = 0; i < w; i++)
        if (!key_in(want[i], got, n)) TG_FAIL("%s: key %s missing in %s", what, want[i], js);
    size_t l = strlen(js);
    if (!l || js[0] != '{' || js[l - 1] != '}' || strstr(js, ",}") || strstr(js, ",,") ||
        strchr(js, '\n'))
        TG_FAIL("%s: not one JSON object: %s", what, js);
}

/* ---------------------------------------------------------------- tests */

TG_TEST(every_strategy_yields_its_pass)
{
    for (int i = 0; i < tg_strategy_count(); i++) {
        const char *name = tg_strategy_info(i)->name;
        sargs_t sa;
        sargs_of(&sa, name);
        tg_loader_opts_t o;
        opts_for(&o, name, &sa);
        digests_t ref[EPOCHS];
        char own[4096] = "";
        if (reference(&o, ref, own, sizeof own) < 0) {
            TG_FAIL("%s: reference pass: %s", name, tg_errmsg());
            continue;
        }
        tg_loader_t *L = NULL;
        TG_CHECK_OK(tg_loader_open(&L, &o));
        if (!L) continue;
        tg_loader_info_t info;
        tg_loader_info(L, &info);
        TG_CHECK(!strcmp(info.strategy, name));
        TG_CHECK_EQ_U64(info.rank_batches, ref[0].n);
        char what[96];
        for (uint64_t e = 0; e < EPOCHS; e++) {
            int seen[MAX_BATCHES] = {0};
            snprintf(what, sizeof what, "%s epoch %llu", name, (unsigned long long)e);
            TG_CHECK_OK(tg_loader_set_epoch(L, e));
            TG_CHECK_EQ_U64(drain_check(L, &ref[e], 0, MAX_BATCHES, seen, what), ref[e].n);
            tg_loader_stats_t st;
            tg_loader_stats(L, &st);
            TG_CHECK(st.pass_done && !st.stopped && st.batches == ref[e].n);
            /* a strategy whose batches come from its own graph (hier's mega-batches) reads
             * no adjacency of the run's */
            const tg_strategy_i *si = NULL;
            TG_CHECK_OK(tg_strategy_find(name, &si));
            int own_graph = si && si->profile_batch;
            if (!(st.feature_bytes > 0 && (st.index_bytes > 0 || own_graph)))
                TG_FAIL("%s: feature bytes %llu, index bytes %llu", what,
                        (unsigned long long)st.feature_bytes, (unsigned long long)st.index_bytes);
            if (sa.mem) TG_CHECK(st.data_bytes_peak <= sa.mem);
            char *js = NULL;
            TG_CHECK_OK(tg_loader_stats_json(&st, &js));
            TG_CHECK(js && json_value(js, "batches", 0) == (double)ref[e].n);
            TG_CHECK(js && json_value(js, "io_needed_bytes", 0) ==
                               (double)(st.index_bytes + st.feature_bytes));
            TG_CHECK(js && strstr(js, "\"cache_tiers\":["));
            if (js) check_keys(js, own, what); /* the strategy's section as train's */
            free(js);
        }
        /* a stopped pass, then epoch 1 again */
        TG_CHECK_OK(tg_loader_set_epoch(L, 0));
        const tg_loader_batch_t *b;
        TG_CHECK(tg_loader_next(L, &b) == 1);
        TG_CHECK_OK(tg_loader_set_epoch(L, 1));
        TG_CHECK_OK(tg_loader_release(L, b)); /* held across set_epoch */
        int seen[MAX_BATCHES] = {0};
        snprintf(what, sizeof what, "%s epoch 1 after a stopped pass", name);
        TG_CHECK_EQ_U64(drain_check(L, &ref[1], 0, MAX_BATCHES, seen, what), ref[1].n);
        tg_loader_close(L);
    }
}

/* Drains L's current epoch into d (digests by batch id); the batches taken. */
static uint64_t drain_digests(tg_loader_t *L, digests_t *d, const char *what)
{
    const tg_loader_batch_t *b;
    int rc;
    uint64_t got = 0;
    while ((rc = tg_loader_next(L, &b)) > 0) {
        uint64_t id = b->batch.id;
        if (id >= MAX_BATCHES || d->seen[id]) {
            TG_FAIL("%s: batch id %llu again or past %d", what, (unsigned long long)id,
                    MAX_BATCHES);
        } else {
            d->seen[id] = 1;
            d->b[id] = batch_digest(&b->batch);
            d->x[id] = x_digest(&b->batch, b->X, b->dim);
            d->n++;
        }
        got++;
        TG_CHECK_OK(tg_loader_release(L, b));
    }
    if (rc < 0) TG_FAIL("%s: tg_loader_next: %s", what, tg_errmsg());
    return got;
}

/* The current epoch of L drained; its statistics' JSON's value of key (NAN without one). */
static double epoch_figure(tg_loader_t *L, digests_t *d, const char *key, uint64_t *peak,
                           const char *what)
{
    memset(d, 0, sizeof *d);
    uint64_t got = drain_digests(L, d, what);
    tg_loader_stats_t st;
    tg_loader_stats(L, &st);
    TG_CHECK(st.pass_done && got > 0 && st.batches == got);
    *peak = st.data_bytes_peak;
    char *js = NULL;
    TG_CHECK_OK(tg_loader_stats_json(&st, &js));
    double v = js ? json_value(js, key, 0) : NAN;
    free(js);
    return v;
}

/* hier with its mega-batches' parts automatic (no --dynamic-parts) under a --mem that cannot
 * hold two mega-batches of every part: the loader's budget plan comes before hier sizes its
 * mega-batches, so they get what the plan leaves (as in tiergnn train). Before, counting the
 * epoch's batches sized them from all of --mem, and the plan's measure then found no room
 * ("--mem leaves 338.79 KiB for the dynamic cache ... two mega-batches of 1 part(s) need").
 * The batches are the training pass's with the parts per mega-batch the loader chose. */
TG_TEST(hier_auto_parts_under_a_budget)
{
    char hds[4300];
    snprintf(hds, sizeof hds, "%s/hier", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 20000;
    so.dim = 128;
    synth_write(hds, &so);
    tg_strategy_arg_t args[] = {{"parts", "16"},
                                {"static-ratio", "0.02"},
                                {"io-depth", "8"},
                                {"io-gap", "0"},
                                {"dynamic-parts", NULL}};
    tg_loader_opts_t o;
    tg_loader_opts_default(&o);
    o.dataset = hds;
    o.strategy = "hier";
    o.strategy_args = args;
    o.num_strategy_args = 4; /* automatic parts */
    o.fanouts[0] = o.fanouts[1] = 5;
    o.batch_size = 1024;
    o.seed = 3;
    o.num_epochs = EPOCHS;
    o.mem_bytes = 1ull << 30; /* first, a roomy open builds the partition and its files */
    tg_loader_t *L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    tg_loader_close(L);
    /* then the --mem the plan needs beside the mega-batches, as refusals name it (each names
     * what it measured so far), and one copy of every feature row more */
    uint64_t half = so.nodes * so.dim * sizeof(float), need = 1 << 20;
    int rc = -ENOMEM;
    for (int i = 0; i < 4 && rc == -ENOMEM; i++) {
        o.mem_bytes = need + (i ? half : 0);
        if ((rc = tg_loader_open(&L, &o)) == 0) break;
        const char *m = tg_errmsg(), *give = strstr(m, "give --mem ");
        const char *least = strstr(m, "need at least --mem ");
        char tok[32] = "";
        uint64_t v = 0;
        if (!((give && sscanf(give, "give --mem %31s", tok) == 1) ||
              (least && sscanf(least, "need at least --mem %31s", tok) == 1)) ||
            tg_parse_size(tok, &v) < 0 || v <= need)
            break; /* refused for another reason: failed below */
        need = v;
    }
    digests_t d[EPOCHS];
    uint64_t peak = 0;
    char what[96];
    snprintf(what, sizeof what, "hier, automatic parts at --mem %llu",
             (unsigned long long)o.mem_bytes);
    if (rc < 0) TG_FAIL("%s: %s", what, tg_errmsg());
    if (!L) return;
    double nd = NAN;
    for (uint64_t e = 0; e < EPOCHS; e++) {
        TG_CHECK_OK(tg_loader_set_epoch(L, e));
        double v = epoch_figure(L, &d[e], "dynamic_parts", &peak, what);
        TG_CHECK(peak <= o.mem_bytes);
        if (e == 0) nd = v;
        TG_CHECK(v == nd);
    }
    tg_loader_close(L);
    if (!(nd >= 1 && nd < 16)) {
        TG_FAIL("%s: %g parts per mega-batch, expected 1..15", what, nd);
        return;
    }
    /* the strategy's own training passes with those parts: the same batches */
    char ndbuf[32];
    snprintf(ndbuf, sizeof ndbuf, "%d", (int)nd);
    args[4].value = ndbuf;
    o.num_strategy_args = 5;
    digests_t ref[EPOCHS];
    if (reference(&o, ref, NULL, 0) < 0) {
        TG_FAIL("%s: reference pass: %s", what, tg_errmsg());
        return;
    }
    for (uint64_t e = 0; e < EPOCHS; e++) {
        TG_CHECK_EQ_U64(d[e].n, ref[e].n);
        for (uint64_t id = 0; id < MAX_BATCHES; id++) {
            if (d[e].seen[id] != ref[e].seen[id])
                TG_FAIL("%s epoch %llu: batch %llu in one of loader and pass only", what,
                        (unsigned long long)e, (unsigned long long)id);
            else if (d[e].seen[id] && (d[e].b[id] != ref[e].b[id] || d[e].x[id] != ref[e].x[id]))
                TG_FAIL("%s epoch %llu: batch %llu differs from the pass's", what,
                        (unsigned long long)e, (unsigned long long)id);
        }
    }
}

/* Ranks 0..K-1 of K: rank r yields [r m, (r + 1) m), m = floor(n / K), with the pass's batches. */
TG_TEST(ranks_partition_the_epoch)
{
    static const char *names[] = {"memory", "gnndrive", "diskgnn", "hier"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        sargs_t sa;
        sargs_of(&sa, names[i]);
        tg_loader_opts_t o;
        opts_for(&o, names[i], &sa);
        digests_t ref[EPOCHS];
        if (reference(&o, ref, NULL, 0) < 0) {
            TG_FAIL("%s: reference pass: %s", names[i], tg_errmsg());
            continue;
        }
        for (int K = 2; K <= 3; K++) {
            uint64_t n = ref[1].n, m = n / (uint64_t)K;
            int seen[MAX_BATCHES] = {0};
            for (int r = 0; r < K; r++) {
                o.rank = r;
                o.world_size = K;
                o.epoch = 1;
                tg_loader_t *L = NULL;
                TG_CHECK_OK(tg_loader_open(&L, &o));
                if (!L) continue;
                tg_loader_info_t info;
                tg_loader_info(L, &info);
                TG_CHECK_EQ_U64(info.epoch_batches, n);
                TG_CHECK_EQ_U64(info.rank_batches, m);
                TG_CHECK_EQ_U64(info.first_batch, r * m);
                char what[96];
                snprintf(what, sizeof what, "%s rank %d of %d", names[i], r, K);
                TG_CHECK_EQ_U64(drain_check(L, &ref[1], r * m, (r + 1) * m, seen, what), m);
                tg_loader_close(L);
            }
            for (uint64_t b = 0; b < K * m; b++)
                if (seen[b] != 1)
                    TG_FAIL("%s K=%d: batch %llu yielded %d times", names[i], K,
                            (unsigned long long)b, seen[b]);
        }
    }
}

/* drop_last: the partial last batch is not yielded, with one rank and with two. */
TG_TEST(drop_last)
{
    sargs_t sa;
    sargs_of(&sa, "memory");
    tg_loader_opts_t o;
    opts_for(&o, "memory", &sa);
    digests_t ref[EPOCHS];
    TG_CHECK_OK(reference(&o, ref, NULL, 0));
    uint64_t n = ref[0].n; /* 300 training nodes: 4 batches of 64 and one of 44 */
    TG_CHECK_EQ_U64(n, 5);
    o.drop_last = 1;
    for (int K = 1; K <= 2; K++) {
        o.world_size = K;
        o.rank = K - 1;
        tg_loader_t *L = NULL;
        TG_CHECK_OK(tg_loader_open(&L, &o));
        if (!L) continue;
        uint64_t m = (n - 1) / (uint64_t)K;
        int seen[MAX_BATCHES] = {0};
        TG_CHECK_EQ_U64(drain_check(L, &ref[0], o.rank * m, (o.rank + 1) * m, seen, "drop_last"),
                        m);
        tg_loader_close(L);
    }
}

/* The LADIES sampler's weighted blocks come through as the pass made them. */
TG_TEST(ladies_blocks)
{
    static const char *names[] = {"memory", "gnndrive"};
    for (size_t i = 0; i < 2; i++) {
        sargs_t sa;
        sargs_of(&sa, names[i]);
        tg_loader_opts_t o;
        opts_for(&o, names[i], &sa);
        o.sampler = "ladies";
        o.fanouts[0] = o.fanouts[1] = 100;
        digests_t ref[EPOCHS];
        TG_CHECK_OK(reference(&o, ref, NULL, 0));
        tg_loader_t *L = NULL;
        TG_CHECK_OK(tg_loader_open(&L, &o));
        if (!L) continue;
        const tg_loader_batch_t *b;
        TG_CHECK(tg_loader_next(L, &b) == 1);
        if (b) TG_CHECK(b->batch.blocks[0].weights != NULL);
        if (b) TG_CHECK_OK(tg_loader_release(L, b));
        TG_CHECK_OK(tg_loader_set_epoch(L, 0));
        int seen[MAX_BATCHES] = {0};
        TG_CHECK_EQ_U64(drain_check(L, &ref[0], 0, MAX_BATCHES, seen, names[i]), ref[0].n);
        tg_loader_close(L);
    }
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

TG_TEST(held_limit_and_close)
{
    sargs_t sa;
    sargs_of(&sa, "gnndrive");
    tg_loader_opts_t o;
    opts_for(&o, "gnndrive", &sa);
    digests_t ref[EPOCHS];
    TG_CHECK_OK(reference(&o, ref, NULL, 0));
    int fds = open_fds();
    tg_loader_t *L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    if (!L) return;
    const tg_loader_batch_t *a, *b, *c;
    TG_CHECK(tg_loader_next(L, &a) == 1);
    TG_CHECK(tg_loader_next(L, &b) == 1);
    TG_CHECK_ERR(tg_loader_next(L, &c), "max_held is 2");
    TG_CHECK(c == NULL);
    /* both held batches are intact while the pass goes on */
    TG_CHECK(batch_digest(&a->batch) == ref[0].b[a->batch.id]);
    TG_CHECK(x_digest(&a->batch, a->X, a->dim) == ref[0].x[a->batch.id]);
    TG_CHECK_OK(tg_loader_release(L, a));
    TG_CHECK_ERR(tg_loader_release(L, a), "released already");
    tg_loader_batch_t fake;
    TG_CHECK_ERR(tg_loader_release(L, &fake), "not one of its slots");
    TG_CHECK(tg_loader_next(L, &c) == 1);
    TG_CHECK(batch_digest(&b->batch) == ref[0].b[b->batch.id]);
    TG_CHECK(x_digest(&c->batch, c->X, c->dim) == ref[0].x[c->batch.id]);
    tg_loader_stats_t st;
    tg_loader_stats(L, &st);
    TG_CHECK_EQ_U64(st.batches, 3);
    tg_loader_close(L); /* mid-epoch, two batches held */
    TG_CHECK(open_fds() == fds);

    /* before the first next; right after set_epoch; after the epoch's end */
    for (int how = 0; how < 3; how++) {
        static const char *names[] = {"gnndrive", "diskgnn", "ginex", "gids", "hier"};
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            sargs_t s2;
            sargs_of(&s2, names[i]);
            opts_for(&o, names[i], &s2);
            o.max_held = 1;
            L = NULL;
            TG_CHECK_OK(tg_loader_open(&L, &o));
            if (!L) continue;
            if (how == 1) TG_CHECK_OK(tg_loader_set_epoch(L, 1));
            if (how == 2) {
                /* the share's last batch kept: max_held (1) is held at the end, and the end
                 * is still the end, not -EBUSY */
                tg_loader_info_t inf;
                tg_loader_info(L, &inf);
                int rc = 1;
                const tg_loader_batch_t *last = NULL;
                for (uint64_t k = 0; k < inf.rank_batches && rc > 0; k++) {
                    if ((rc = tg_loader_next(L, &last)) > 0 && k + 1 < inf.rank_batches)
                        TG_CHECK_OK(tg_loader_release(L, last));
                }
                TG_CHECK(rc == 1 && last);
                TG_CHECK(tg_loader_next(L, &a) == 0);
                if (last) TG_CHECK_OK(tg_loader_release(L, last));
                TG_CHECK(tg_loader_next(L, &a) == 0);
                TG_CHECK_OK(tg_loader_set_epoch(L, 1));
                TG_CHECK(tg_loader_next(L, &a) == 1);
            }
            tg_loader_close(L);
            TG_CHECK(open_fds() == fds);
        }
    }
}

typedef struct {
    tg_loader_t *L;
    const tg_loader_batch_t *b;
    volatile int released;
} releaser_t;

static void *release_later(void *arg)
{
    releaser_t *r = arg;
    usleep(50 * 1000);
    r->released = 1;
    TG_CHECK_OK(tg_loader_release(r->L, r->b));
    return NULL;
}

/* wait_held: tg_loader_next at max_held waits for another thread's release. */
TG_TEST(wait_held)
{
    sargs_t sa;
    sargs_of(&sa, "memory");
    tg_loader_opts_t o;
    opts_for(&o, "memory", &sa);
    o.max_held = 1;
    o.wait_held = 1;
    tg_loader_t *L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    if (!L) return;
    releaser_t r = {.L = L};
    TG_CHECK(tg_loader_next(L, &r.b) == 1);
    pthread_t t;
    TG_CHECK(pthread_create(&t, NULL, release_later, &r) == 0);
    const tg_loader_batch_t *b;
    TG_CHECK(tg_loader_next(L, &b) == 1);
    TG_CHECK(r.released);
    TG_CHECK_EQ_U64(b->index, 1);
    pthread_join(t, NULL);
    TG_CHECK_OK(tg_loader_release(L, b));
    tg_loader_close(L);
}

/* A read error in the strategy's pass reaches tg_loader_next with the file's name, again on
 * the next call, and the loader still closes clean. */
TG_TEST(error_in_pass)
{
    sargs_t sa;
    sargs_of(&sa, "gnndrive"); /* --features-in-ram 0: every row from features.bin */
    tg_loader_opts_t o;
    opts_for(&o, "gnndrive", &sa);
    int fds = open_fds();
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "features.bin", .lo = 0, .hi = UINT64_MAX, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_loader_t *L = NULL;
    tg_err_clear();
    int rc = tg_loader_open(&L, &o);
    if (rc >= 0) { /* the open read no row: the pass meets the fault */
        const tg_loader_batch_t *b;
        while ((rc = tg_loader_next(L, &b)) > 0)
            TG_CHECK_OK(tg_loader_release(L, b));
        TG_CHECK(rc < 0 && strstr(tg_errmsg(), "loader: epoch 0, strategy gnndrive"));
        TG_CHECK(tg_loader_next(L, &b) < 0 && b == NULL);
    }
    fprintf(stderr, "  %s: %s\n", L ? "next" : "open", tg_errmsg());
    if (!strstr(tg_errmsg(), "features.bin")) TG_FAIL("error '%s' names no file", tg_errmsg());
    TG_CHECK(rc < 0);
    tg_loader_close(L);
    tg_io_fault_clear();
    TG_CHECK(open_fds() == fds);
}

/* Seeds of the caller, in order (shuffle 0): batch b holds seeds[b * bs, ...) first, with their
 * labels; the whole-graph batch masks the nodes that are not seeds. */
TG_TEST(seeds_in_order_and_whole_graph)
{
    sargs_t sa;
    sargs_of(&sa, "memory");
    tg_loader_opts_t o;
    opts_for(&o, "memory", &sa);
    uint64_t seeds[150];
    for (uint64_t i = 0; i < 150; i++)
        seeds[i] = (i * 37 + 11) % 600;
    /* the options' strings and arrays need not outlive the open (ASan sees a use after free) */
    uint64_t *given = malloc(sizeof seeds);
    char *path = strdup(ds);
    memcpy(given, seeds, sizeof seeds);
    o.dataset = path;
    o.seeds = given;
    o.num_seeds = 150;
    o.shuffle = 0;
    o.batch_size = 40;
    tg_loader_t *L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    free(given);
    free(path);
    if (!L) return;
    tg_dataset_t *d = NULL;
    tg_store_t *st = rows_store(&d);
    float *buf = NULL;
    const tg_loader_batch_t *b;
    uint64_t k = 0, nb = 0;
    int rc;
    while ((rc = tg_loader_next(L, &b)) > 0) {
        TG_CHECK_EQ_U64(b->batch.id, nb);
        TG_CHECK_EQ_U64(b->index, nb);
        nb++;
        for (uint32_t i = 0; i < b->batch.num_seeds; i++, k++) {
            TG_CHECK_EQ_U64(b->batch.nodes[i], seeds[k]);
            TG_CHECK(b->y[i] == (int32_t)(seeds[k] % 4));
        }
        if (st) TG_CHECK(batch_rows_equal(st, &b->batch, b->X, b->dim, &buf) == 1);
        TG_CHECK_OK(tg_loader_release(L, b));
    }
    TG_CHECK(rc == 0);
    TG_CHECK_EQ_U64(k, 150);
    TG_CHECK_EQ_U64(nb, 4);
    tg_loader_close(L);

    /* every fanout -1 and one batch of the split: the whole graph, labels on the train split */
    opts_for(&o, "memory", &sa);
    o.fanouts[0] = o.fanouts[1] = -1;
    o.batch_size = 0;
    L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    if (L) {
        tg_loader_info_t info;
        tg_loader_info(L, &info);
        TG_CHECK(info.whole_graph && info.rank_batches == 1);
        TG_CHECK(tg_loader_next(L, &b) == 1);
        TG_CHECK_EQ_U64(b->batch.num_seeds, 600);
        uint64_t labelled = 0;
        for (uint32_t i = 0; i < b->batch.num_seeds; i++)
            labelled += b->y[i] >= 0;
        TG_CHECK_EQ_U64(labelled, 300);
        if (st) TG_CHECK(batch_rows_equal(st, &b->batch, b->X, b->dim, &buf) == 1);
        TG_CHECK_OK(tg_loader_release(L, b));
        TG_CHECK(tg_loader_next(L, &b) == 0);
        tg_loader_close(L);
    }
    o.world_size = 2;
    L = NULL;
    TG_CHECK_ERR(tg_loader_open(&L, &o), "world_size 2 exceeds the 1 batch(es)");
    TG_CHECK(L == NULL);
    free(buf);
    tg_store_release(st);
    tg_dataset_close(d);
}

/* The statistics' JSON carries the strategy's own section as tiergnn train's epoch line has it
 * (the kit's report hook over the loader's pass): gids's object "gids" with the settings its
 * training pass reports, none for memory; before the pass ends, the loader's keys alone. */
TG_TEST(stats_strategy_section)
{
    static const char *names[] = {"memory", "gids"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        sargs_t sa;
        sargs_of(&sa, names[i]);
        tg_loader_opts_t o;
        opts_for(&o, names[i], &sa);
        digests_t ref[EPOCHS];
        char own[4096] = "";
        TG_CHECK_OK(reference(&o, ref, own, sizeof own));
        int gids = !strcmp(names[i], "gids");
        if (gids && !strstr(own, "\"gids\":{"))
            TG_FAIL("gids: train's epoch line has no section gids: %s", own);
        tg_loader_t *L = NULL;
        TG_CHECK_OK(tg_loader_open(&L, &o));
        if (!L) continue;
        tg_loader_stats_t st;
        char *js = NULL;
        tg_loader_stats(L, &st); /* the pass may be running: no section yet */
        if (!st.pass_done) {
            TG_CHECK_OK(tg_loader_stats_json(&st, &js));
            if (js) check_keys(js, "{}", names[i]);
            TG_CHECK(js && strstr(js, "\"cache_tiers\":[]"));
            free(js);
        }
        int seen[MAX_BATCHES] = {0};
        TG_CHECK_EQ_U64(drain_check(L, &ref[0], 0, MAX_BATCHES, seen, names[i]), ref[0].n);
        tg_loader_stats(L, &st);
        TG_CHECK(st.pass_done);
        js = NULL;
        TG_CHECK_OK(tg_loader_stats_json(&st, &js));
        if (js) check_keys(js, own, names[i]);
        /* the settings gids's pass reports are those of train's pass */
        static const char *same[] = {"window", "constant_buffer_rows", "target_depth"};
        for (size_t k = 0; js && gids && k < sizeof same / sizeof *same; k++)
            if (json_value(js, same[k], 0) != json_value(own, same[k], 0))
                TG_FAIL("gids: %s %g in the loader's JSON, %g in train's", same[k],
                        json_value(js, same[k], 0), json_value(own, same[k], 0));
        if (!strstr(st.pass_line, "; io "))
            TG_FAIL("%s: the human line's part '%s' has no I/O clause", names[i], st.pass_line);
        free(js);
        tg_loader_close(L);
    }
}

/* The "at_start" of js's object "preprocess" (diskgnn's preparation): 1, 0, or -1 when absent;
 * *reused its "reused". */
static int preprocess_at_start(const char *js, int *reused)
{
    const char *p = strstr(js, "\"preprocess\":{");
    const char *e = p ? strchr(p, '}') : NULL;
    if (!e) return -1;
    char obj[1024];
    snprintf(obj, sizeof obj, "%.*s", (int)(e - p), p);
    *reused = strstr(obj, "\"reused\":true") != NULL;
    return strstr(obj, "\"at_start\":true") ? 1 : strstr(obj, "\"at_start\":false") ? 0 : -1;
}

/* diskgnn prepares the next epoch's share during this one: rank 1 of 2 tells it the share's
 * start (tg_pass_t.next's first_batch), so the second epoch trains what was prepared during
 * the first instead of preparing again at its start. */
TG_TEST(diskgnn_rank_uses_the_prepared_epoch)
{
    sargs_t sa;
    sargs_of(&sa, "diskgnn");
    tg_loader_opts_t o;
    opts_for(&o, "diskgnn", &sa);
    digests_t ref[EPOCHS];
    TG_CHECK_OK(reference(&o, ref, NULL, 0));
    o.rank = 1;
    o.world_size = 2;
    tg_loader_t *L = NULL;
    TG_CHECK_OK(tg_loader_open(&L, &o));
    if (!L) return;
    for (uint64_t e = 0; e < EPOCHS; e++) {
        TG_CHECK_OK(tg_loader_set_epoch(L, e));
        uint64_t m = ref[e].n / 2;
        int seen[MAX_BATCHES] = {0};
        char what[64];
        snprintf(what, sizeof what, "diskgnn rank 1 of 2, epoch %llu", (unsigned long long)e);
        TG_CHECK_EQ_U64(drain_check(L, &ref[e], m, 2 * m, seen, what), m);
        tg_loader_stats_t st;
        tg_loader_stats(L, &st);
        char *js = NULL;
        TG_CHECK_OK(tg_loader_stats_json(&st, &js));
        int reused = -1, at_start = js ? preprocess_at_start(js, &reused) : -1;
        /* epoch 0 prepares at its start; epoch 1 was prepared during epoch 0 */
        if (at_start != (e == 0) || reused)
            TG_FAIL("%s: preprocess at_start %d reused %d, expected at_start %d: %s", what,
                    at_start, reused, e == 0, js ? js : "(no JSON)");
        free(js);
    }
    tg_loader_close(L);
}

TG_TEST(bad_options)
{
    sargs_t sa;
    sargs_of(&sa, "memory");
    tg_loader_opts_t o;
    tg_loader_t *L = NULL;
    uint64_t seeds[2] = {1, 600};
#define BAD(setup, needle)                                                                         \
    do {                                                                                           \
        opts_for(&o, "memory", &sa);                                                               \
        setup;                                                                                     \
        L = (tg_loader_t *)1;                                                                      \
        TG_CHECK_ERR(tg_loader_open(&L, &o), needle);                                              \
        TG_CHECK(L == NULL);                                                                       \
    } while (0)
    BAD(o.dataset = NULL, "dataset is required");
    BAD(o.dataset = "/nonexistent/ds", "/nonexistent/ds");
    BAD(o.strategy = "nosuch", "unknown strategy 'nosuch'");
    BAD(o.sampler = "nosuch", "sampler 'nosuch' unknown");
    BAD(o.num_layers = 0, "num_layers 0 out of range");
    BAD(o.num_layers = TG_MAX_LAYERS + 1, "num_layers 17 out of range");
    BAD(o.fanouts[1] = -2, "fanouts[1] = -2");
    BAD((o.sampler = "ladies", o.fanouts[0] = 0), "sampler ladies expects >= 1");
    BAD((o.seeds = seeds, o.num_seeds = 0), "num_seeds 0");
    BAD((o.seeds = seeds, o.num_seeds = 1, o.split = "valid"), "both seeds and split");
    BAD(o.split = "dev", "split 'dev' unknown");
    BAD((o.seeds = seeds, o.num_seeds = 2), "seeds[1] = 600 is not a node");
    BAD(o.world_size = 0, "world_size 0 out of range");
    BAD((o.world_size = 2, o.rank = 2), "rank 2 out of range");
    BAD(o.rank = -1, "rank -1 out of range");
    BAD(o.world_size = 6, "world_size 6 exceeds the 5 batch(es)");
    BAD(o.max_held = 0, "max_held 0 out of range");
    BAD(o.max_held = 65, "max_held 65 out of range");
    BAD(o.threads = 0, "threads 0 out of range");
    BAD(o.sampler_threads = -2, "sampler_threads -2 out of range");
    BAD(o.shuffle = 2, "take 0 or 1");
    BAD(o.mem_bytes = 1 << 20, "--mem");
    /* wide rows: 64 slots of a whole-graph batch (4 MiB each) do not fit in 128M */
    char wide[4300];
    snprintf(wide, sizeof wide, "%s/wide", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 2000;
    so.dim = 512;
    synth_write(wide, &so);
    BAD((o.dataset = wide, o.mem_bytes = 128 << 20, o.max_held = 64, o.batch_size = 0,
         o.fanouts[0] = o.fanouts[1] = -1),
        "max_held 64 held batches");
    sargs_t sh;
    sargs_of(&sh, "hier");
    opts_for(&o, "hier", &sh);
    o.drop_last = 1;
    L = (tg_loader_t *)1;
    TG_CHECK_ERR(tg_loader_open(&L, &o), "drop_last with strategy hier");
    TG_CHECK(L == NULL);
#undef BAD
}

/* ---------------------------------------------------------------- the hand-over */

static int open_threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* This process's anonymous RSS (RssAnon in /proc/self/status); 0 when it cannot be read. */
static uint64_t rss_anon(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb << 10;
}

/* A thread that samples rss_anon every millisecond: its peak. */
typedef struct {
    pthread_t t;
    atomic_int stop;
    uint64_t peak; /* read after the join */
} rss_watch_t;

static void *rss_watch_main(void *arg)
{
    rss_watch_t *w = arg;
    while (!atomic_load(&w->stop)) {
        uint64_t v = rss_anon();
        if (v > w->peak) w->peak = v;
        usleep(1000);
    }
    return NULL;
}

/* "12.34 MiB" (tg_fmt_bytes) right after `key` in m, as bytes; -1 when absent. */
static double size_after(const char *m, const char *key)
{
    const char *p = m ? strstr(m, key) : NULL;
    double v;
    char unit[8];
    if (!p || sscanf(p + strlen(key), "%lf %7[A-Za-z]", &v, unit) != 2) return -1;
    static const char *u[] = {"B", "KiB", "MiB", "GiB"};
    for (int i = 0; i < 4; i++, v *= 1024)
        if (!strcmp(unit, u[i])) return v;
    return -1;
}

/* The budget reserves max_held held batches beside the strategy's matrices in flight, not one
 * more: the batch the caller has not taken yet waits in the strategy's own matrix. The plan's
 * refusal names the parts and their sum; at the --mem it names (one batch's X below what one
 * more slot would need) the loader runs, with the caller holding max_held batches while the
 * strategy fills its matrices and offers the next, and the process's anonymous RSS stays
 * within --mem. Before, the plan reserved "max_held 2 + 1 batch slots" and refused this --mem.
 * gnndrive's feature buffer takes what the plan leaves, so the budget is used to its end. */
TG_TEST(budget_counts_held_batches)
{
    char bds[4300];
    snprintf(bds, sizeof bds, "%s/wide", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 30000;
    so.dim = 256; /* a batch's X about 20 MiB: more than the plan's slack of the process */
    synth_write(bds, &so);
    tg_strategy_arg_t args[] = {{"extractors", "2"},
                                {"chunk-rows", "64"},
                                {"features-in-ram", "0"},
                                {"io-depth", "8"},
                                {"io-gap", "0"}};
    tg_loader_opts_t o;
    tg_loader_opts_default(&o);
    o.dataset = bds;
    o.strategy = "gnndrive";
    o.strategy_args = args;
    o.num_strategy_args = 5;
    o.fanouts[0] = o.fanouts[1] = 10;
    o.batch_size = 512;
    o.seed = 3;
    o.num_epochs = 2;
    o.max_batches = 6; /* of 12: every row is read from disk through a buffer of 2 MiB */
    o.max_held = 2;
    /* the plan's refusal: each refusal names the --mem it needs so far */
    char plan[2048] = "";
    tg_loader_t *L = NULL;
    uint64_t mem = 1 << 20;
    int rc = -ENOMEM;
    for (int i = 0; i < 6; i++) {
        o.mem_bytes = mem;
        if ((rc = tg_loader_open(&L, &o)) == 0) break;
        const char *m = tg_errmsg(), *give = strstr(m, "give --mem ");
        const char *least = strstr(m, "need at least --mem ");
        if (strstr(m, "too small for these batches")) snprintf(plan, sizeof plan, "%s", m);
        char tok[32] = "";
        uint64_t v = 0;
        if (!((give && sscanf(give, "give --mem %31s", tok) == 1) ||
              (least && sscanf(least, "need at least --mem %31s", tok) == 1)) ||
            tg_parse_size(tok, &v) < 0 || v <= mem)
            break;
        mem = v;
    }
    /* the plan's --mem and 2 MiB for the feature buffer's least (its pass refuses less) */
    if (rc == 0) tg_loader_close(L);
    o.mem_bytes = mem += 2 << 20;
    if (rc < 0 || (rc = tg_loader_open(&L, &o)) < 0) {
        TG_FAIL("gnndrive at --mem %llu: %s", (unsigned long long)mem, tg_errmsg());
        return;
    }
    fprintf(stderr, "  the plan's refusal: %s\n  opened at --mem %lluM\n", plan,
            (unsigned long long)(mem >> 20));
    /* its parts: the process, k matrices in flight, max_held held batches; their sum */
    const char *mk = strstr(plan, "input matrices strategy gnndrive");
    const char *pk = strstr(plan, "), ");
    unsigned long long k = 0;
    int held = -1;
    const char *hk = strstr(plan, " and max_held ");
    if (pk) sscanf(pk, "), %llu input matrices", &k);
    if (hk) sscanf(hk, " and max_held %d held batches", &held);
    double proc = size_after(plan, "the process ("), x = size_after(plan, "in flight (");
    double each = size_after(plan, "held batches ("), need = size_after(plan, ") need ");
    double data = size_after(plan, " beside the ");
    if (!mk || k < 1 || held != o.max_held || proc < 0 || x < 0 || each < 0 || need < 0 ||
        data < 0) {
        TG_FAIL("the plan's refusal does not name the process, the matrices in flight and "
                "max_held %d held batches: '%s'",
                o.max_held, plan);
        tg_loader_close(L);
        return;
    }
    double sum = proc + (double)k * x + held * each;
    if (fabs(sum - need) > 0.001 * need + 65536)
        TG_FAIL("the parts add up to %.0f bytes, the refusal needs %.0f", sum, need);
    /* one slot more (the old accounting) would not have fitted this --mem */
    TG_CHECK(data + need + each > (double)mem);
    TG_CHECK(each > 8.0 * (1 << 20)); /* an X larger than the plan's slack */

    rss_watch_t w = {.peak = rss_anon()};
    TG_CHECK(pthread_create(&w.t, NULL, rss_watch_main, &w) == 0);
    const tg_loader_batch_t *h[2], *b;
    uint64_t got = 0;
    for (uint64_t e = 0; e < 2; e++) {
        TG_CHECK_OK(tg_loader_set_epoch(L, e));
        /* max_held held while the strategy fills its matrices and offers the next batch */
        TG_CHECK(tg_loader_next(L, &h[0]) == 1 && tg_loader_next(L, &h[1]) == 1);
        usleep(300 * 1000);
        TG_CHECK_ERR(tg_loader_next(L, &b), "max_held is 2");
        TG_CHECK_OK(tg_loader_release(L, h[0]));
        TG_CHECK_OK(tg_loader_release(L, h[1]));
        got += 2;
        while ((rc = tg_loader_next(L, &b)) > 0) {
            usleep(2000); /* a consumer slower than the strategy */
            TG_CHECK_OK(tg_loader_release(L, b));
            got++;
        }
        TG_CHECK(rc == 0);
    }
    tg_loader_stats_t st;
    tg_loader_stats(L, &st);
    atomic_store(&w.stop, 1);
    pthread_join(w.t, NULL);
    fprintf(stderr, "  %llu batches; peak anonymous RSS %.2f MiB, budget peak %.2f MiB of %.2f\n",
            (unsigned long long)got, (double)w.peak / (1 << 20),
            (double)st.data_bytes_peak / (1 << 20), (double)mem / (1 << 20));
    TG_CHECK(got > 4);
    TG_CHECK(st.data_bytes_peak <= mem);
#ifndef TG_SANITIZE /* under ASan the RSS is mostly shadow memory and freed blocks' quarantine */
    if (w.peak > mem)
        TG_FAIL("peak anonymous RSS %llu exceeds --mem %llu", (unsigned long long)w.peak,
                (unsigned long long)mem);
#endif
    tg_loader_close(L);
}

/* The rendezvous with a caller slower than the strategy, one holding max_held batches, and a
 * set_epoch and a close while the pass waits for the caller to take its batch: the batches are
 * the pass's, in its order, and nothing is left behind. */
TG_TEST(handover)
{
    static const char *names[] = {"memory", "mmap", "gnndrive", "ginex", "diskgnn", "hier"};
    int fds = open_fds(), thr = open_threads();
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        sargs_t sa;
        sargs_of(&sa, names[i]);
        tg_loader_opts_t o;
        opts_for(&o, names[i], &sa);
        o.max_held = 1 + (int)(i % 2);
        digests_t ref[EPOCHS];
        if (reference(&o, ref, NULL, 0) < 0) {
            TG_FAIL("%s: reference pass: %s", names[i], tg_errmsg());
            continue;
        }
        tg_loader_t *L = NULL;
        TG_CHECK_OK(tg_loader_open(&L, &o));
        if (!L) continue;
        char what[64];
        /* epoch 0: each batch kept a while */
        snprintf(what, sizeof what, "%s, a slow caller", names[i]);
        const tg_loader_batch_t *b, *h[2];
        int rc, seen[MAX_BATCHES] = {0};
        uint64_t got = 0;
        while ((rc = tg_loader_next(L, &b)) > 0) {
            uint64_t id = b->batch.id;
            if (id >= MAX_BATCHES || !ref[0].seen[id] || seen[id]++ ||
                batch_digest(&b->batch) != ref[0].b[id] ||
                x_digest(&b->batch, b->X, b->dim) != ref[0].x[id])
                TG_FAIL("%s: batch %llu is not the pass's", what, (unsigned long long)id);
            TG_CHECK_EQ_U64(b->index, got);
            usleep(3000);
            TG_CHECK_OK(tg_loader_release(L, b));
            got++;
        }
        TG_CHECK(rc == 0);
        TG_CHECK_EQ_U64(got, ref[0].n);
        tg_loader_stats_t st;
        tg_loader_stats(L, &st);
        TG_CHECK(st.pass_done && !st.stopped && st.batches == got);
        /* epoch 1: max_held held while the pass offers the next; then the rest */
        snprintf(what, sizeof what, "%s, max_held held", names[i]);
        TG_CHECK_OK(tg_loader_set_epoch(L, 1));
        for (int k = 0; k < o.max_held; k++)
            TG_CHECK(tg_loader_next(L, &h[k]) == 1);
        usleep(100 * 1000);
        TG_CHECK_ERR(tg_loader_next(L, &b), "release one");
        memset(seen, 0, sizeof seen);
        for (int k = 0; k < o.max_held; k++) {
            seen[h[k]->batch.id]++;
            TG_CHECK(batch_digest(&h[k]->batch) == ref[1].b[h[k]->batch.id]);
            TG_CHECK(x_digest(&h[k]->batch, h[k]->X, h[k]->dim) == ref[1].x[h[k]->batch.id]);
            TG_CHECK_OK(tg_loader_release(L, h[k]));
        }
        got = (uint64_t)o.max_held;
        while ((rc = tg_loader_next(L, &b)) > 0) {
            uint64_t id = b->batch.id;
            if (id >= MAX_BATCHES || !ref[1].seen[id] || seen[id]++ ||
                x_digest(&b->batch, b->X, b->dim) != ref[1].x[id])
                TG_FAIL("%s: batch %llu is not the pass's", what, (unsigned long long)id);
            TG_CHECK_OK(tg_loader_release(L, b));
            got++;
        }
        TG_CHECK(rc == 0);
        TG_CHECK_EQ_U64(got, ref[1].n);
        /* epoch 0 again, left while the pass waits with its next batch: set_epoch, then close
         * with a batch held */
        snprintf(what, sizeof what, "%s, set_epoch in the rendezvous", names[i]);
        TG_CHECK_OK(tg_loader_set_epoch(L, 0));
        TG_CHECK(tg_loader_next(L, &h[0]) == 1);
        usleep(50 * 1000);
        TG_CHECK_OK(tg_loader_set_epoch(L, 1));
        TG_CHECK(x_digest(&h[0]->batch, h[0]->X, h[0]->dim) == ref[0].x[h[0]->batch.id]);
        TG_CHECK_OK(tg_loader_release(L, h[0]));
        TG_CHECK(tg_loader_next(L, &h[0]) == 1);
        if (h[0]) TG_CHECK(x_digest(&h[0]->batch, h[0]->X, h[0]->dim) == ref[1].x[h[0]->batch.id]);
        usleep(50 * 1000);
        tg_loader_close(L); /* the pass waits in the step with the next batch; one held */
        TG_CHECK(open_fds() == fds);
        for (int t = 0; t < 100 && open_threads() != thr; t++)
            usleep(10 * 1000); /* a joined thread may take a moment to leave /proc */
        TG_CHECK(open_threads() == thr);
    }
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("loader"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    TG_RUN(budget_counts_held_batches); /* first: its RSS is least the other tests' heap */
    TG_RUN(bad_options);
    TG_RUN(seeds_in_order_and_whole_graph);
    TG_RUN(drop_last);
    TG_RUN(ladies_blocks);
    TG_RUN(held_limit_and_close);
    TG_RUN(wait_held);
    TG_RUN(handover);
    TG_RUN(error_in_pass);
    TG_RUN(stats_strategy_section);
    TG_RUN(diskgnn_rank_uses_the_prepared_epoch);
    TG_RUN(ranks_partition_the_epoch);
    TG_RUN(every_strategy_yields_its_pass);
    TG_RUN(hier_auto_parts_under_a_budget);
    if (!tg_test_failures) tg_rmtree(root);
    return tg_test_done();
}
