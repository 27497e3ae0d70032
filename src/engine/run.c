/* Opening the resources a run reads: dataset, labels, splits, the strategy's adjacency and
 * feature store, the compute pool; all graph and feature data reserved against one budget. */
#include "engine-impl.h"

#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of labels and splits as the run holds them (labels i32, split ids widened to u64). */
static uint64_t common_bytes(const tg_meta_t *m, uint64_t *labels, uint64_t *splits)
{
    *labels = m->num_nodes * (m->multi_label ? m->num_classes : 1) * sizeof(int32_t);
    *splits = (m->num_train + m->num_valid + m->num_test) * sizeof(uint64_t);
    return *labels + *splits;
}

/* Large blocks (input matrices, batches, staging) come and go on several threads. glibc raises
 * its mmap threshold to the size of the first large block freed, after which such blocks come
 * from per-thread heaps that keep what is freed: tens of MiB above what the budget accounts. A
 * fixed threshold keeps them mapped, so a free gives the memory back. */
static void malloc_tune(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
#endif
}

/* The run's strategy (asked for, or chosen for mem_bytes when "auto"), its options parsed from
 * its table, and its derived files built (or found valid) before it opens. common: the run's
 * own bytes beside the strategy's. */
static int run_strategy(tg_run_t *r, const tg_run_opts_t *o, uint64_t mem_bytes, uint64_t common)
{
    int rc;
    char why[512];
    if (!o->strategy || !*o->strategy || !strcmp(o->strategy, "auto")) {
        if ((rc = tg_strategy_choose(r->ds, mem_bytes, common, o->auto_extra, &r->sopts, o->args,
                                     o->nargs, &r->strat_i, why, sizeof why)) < 0)
            return rc;
        tg_log_info("strategy %s: %s", r->strat_i->info.name, why);
    } else if ((rc = tg_strategy_find(o->strategy, &r->strat_i)) < 0) {
        return rc;
    }
    /* The strategy's own options, from its table. */
    r->scfg = calloc(1, r->strat_i->info.config_size + 1);
    if (!r->scfg) return tg_err(-ENOMEM, "out of memory");
    if ((rc = tg_strategy_parse(&r->strat_i->info, o->args, o->nargs, r->scfg, 1)) < 0) return rc;
    r->sopts.cfg = r->scfg;
    for (int k = 0; k < r->strat_i->info.num_opts && k < 64; k++)
        for (int i = 0; i < o->nargs; i++)
            if (!strcmp(o->args[i].name, r->strat_i->info.opts[k].name))
                r->opts_given |= (uint64_t)1 << k;
    if (r->strat_i->prepare && (rc = r->strat_i->prepare(r->ds, &r->sopts)) < 0) return rc;
    return 0;
}

/* The minimum working set (the strategy's, labels and splits lb + sb, the caller's extra bytes
 * and --verify-reads' checksums), refused with the amount needed before anything large is
 * loaded. */
static int run_check_min(tg_run_t *r, const tg_run_opts_t *o, uint64_t mem_bytes, uint64_t lb,
                         uint64_t sb)
{
    char why[512];
    uint64_t common = lb + sb + o->extra_bytes;
    uint64_t crc_bytes = o->verify_reads ? r->ds->meta.num_nodes * sizeof(uint32_t) : 0;
    uint64_t need = r->strat_i->min_bytes(r->ds, &r->sopts, why, sizeof why) + common + crc_bytes;
    if (!mem_bytes || need <= mem_bytes) return 0;
    char a[32], b[32], c[32], d[32];
    if (crc_bytes) {
        size_t k = strlen(why);
        snprintf(why + k, sizeof why - k, "; row checksums of --verify-reads %s",
                 tg_fmt_bytes(crc_bytes, a, sizeof a));
    }
    return tg_err(-ENOMEM,
                  "--mem %s is too small for strategy %s on %s: its minimum working set is %s "
                  "(labels and splits %s, seed order and masks %s, %s); give --mem %lluM or more",
                  tg_fmt_bytes(mem_bytes, a, sizeof a), r->strat_i->info.name, o->dataset,
                  tg_fmt_bytes(need, b, sizeof b), tg_fmt_bytes(lb + sb, c, sizeof c),
                  tg_fmt_bytes(o->extra_bytes, d, sizeof d), why,
                  (unsigned long long)((need + (1 << 20) - 1) >> 20));
}

/* The budget, then labels (lb bytes) and the splits (sb), reserved against it. */
static int run_load_common(tg_run_t *r, uint64_t mem_bytes, uint64_t lb, uint64_t sb)
{
    const tg_meta_t *m = &r->ds->meta;
    tg_budget_init(&r->budget, mem_bytes);
    r->budget_init = 1;
    int rc = tg_budget_reserve(&r->budget, lb, "labels");
    if (rc < 0) return rc;
    r->label_bytes = lb;
    if ((rc = tg_dataset_load_labels(r->ds, &r->labels)) < 0) return rc;
    r->label_width = m->multi_label ? m->num_classes : 1;
    if ((rc = tg_budget_reserve(&r->budget, sb, "split ids")) < 0) return rc;
    r->split_bytes = sb;
    static const tg_file_id_t ids[3] = {TG_FILE_TRAIN, TG_FILE_VALID, TG_FILE_TEST};
    for (int s = 0; s < 3; s++)
        if ((rc = tg_dataset_load_split(r->ds, ids[s], &r->split[s], &r->split_n[s])) < 0)
            return rc;
    r->row_bytes = (uint32_t)(m->feat_dim * tg_feat_dtype_size(m->feat_dtype));
    return 0;
}

int tg_run_open_opts(tg_run_t *r, const tg_run_opts_t *o)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, malloc_tune);
    memset(r, 0, sizeof *r);
    atomic_init(&r->index_bytes, 0);
    unsigned flags = TG_OPEN_CHECK_SIZES | (o->verify ? TG_OPEN_CHECK_CHECKSUMS : 0);
    int rc = tg_dataset_open(&r->ds, o->dataset, flags);
    if (rc < 0) {
        if (o->verify) tg_err_prefix(rc, "--verify");
        return rc;
    }
    const tg_meta_t *m = &r->ds->meta;
    if (m->num_nodes == 0 || m->num_nodes > UINT32_MAX) {
        rc = tg_err(-EINVAL, "%s: %llu nodes; training needs 1..%u nodes", o->dataset,
                    (unsigned long long)m->num_nodes, UINT32_MAX);
        goto err;
    }
    if (m->num_classes == 0) {
        rc = tg_err(-EINVAL, "%s: the dataset has no classes (num_classes = 0)", o->dataset);
        goto err;
    }
    r->sopts = o->sopts;
    if (r->sopts.threads < 1) r->sopts.threads = o->threads > 0 ? o->threads : 1;
    if (r->sopts.sampler_threads < 0) {
        r->sopts.sampler_threads = r->sopts.threads;
        r->sopts.sampler_threads_auto = 1;
    }
    /* Under a cgroup memory limit the budget is at most that limit (less a margin). */
    char cgwhy[256];
    uint64_t mem_bytes =
        tg_budget_effective(o->mem_bytes, tg_cgroup_mem_limit(), cgwhy, sizeof cgwhy);
    if (cgwhy[0]) tg_log_info("%s", cgwhy);
    uint64_t lb, sb, common = common_bytes(m, &lb, &sb) + o->extra_bytes;
    if ((rc = run_strategy(r, o, mem_bytes, common)) < 0 ||
        (rc = run_check_min(r, o, mem_bytes, lb, sb)) < 0 ||
        (rc = run_load_common(r, mem_bytes, lb, sb)) < 0)
        goto err;
    /* before the strategy: its stores and tiers read rows while they open */
    if (o->verify_reads && (rc = tg_rowcrc_open(&r->rowcrc, r->ds, NULL, &r->budget)) < 0) goto err;
    tg_adj_t *raw = NULL;
    if ((rc = r->strat_i->open(&r->strat, r, &r->sopts)) < 0) goto err;
    /* Every strategy's samplers read through this wrapper: the index bytes they use. */
    raw = r->adj;
    r->adj = NULL;
    if ((rc = tg_adj_counting_wrap(&r->adj, raw, tg_index_dtype_size(m->index_dtype),
                                   &r->index_bytes)) < 0)
        goto err;
    if ((rc = tg_pool_create(&r->pool, o->threads > 0 ? o->threads : 1)) < 0) goto err;
    return 0;
err:
    tg_run_close(r);
    return rc;
}

int tg_run_open(tg_run_t *r, const char *dataset, tg_run_store_t store, int normalize,
                uint64_t mem_bytes, int threads)
{
    tg_run_opts_t o;
    memset(&o, 0, sizeof o);
    o.dataset = dataset;
    o.strategy = store == TG_RUN_STORE_MEMORY ? "memory" : "gnndrive";
    tg_strategy_opts_default(&o.sopts);
    o.sopts.normalize = normalize;
    o.sopts.threads = threads;
    o.sopts.sampler_threads = threads;
    /* no device probe for the layer-wise store's runs */
    static const tg_strategy_arg_t file_args[] = {{"io-depth", "16"}, {"io-gap", "0"}};
    if (store == TG_RUN_STORE_FILE) {
        o.args = file_args;
        o.nargs = 2;
    }
    o.mem_bytes = mem_bytes;
    o.threads = threads;
    return tg_run_open_opts(r, &o);
}

void tg_run_close(tg_run_t *r)
{
    tg_pool_destroy(r->pool);
    /* Work the strategy runs between passes reads the adjacency: it stops first. */
    if (r->strat_i && r->strat_i->drain && r->strat) r->strat_i->drain(r->strat);
    /* The adjacency and store first: a strategy may own what they count into. */
    tg_store_release(r->store);
    tg_adj_destroy(r->adj);
    if (r->strat_i) r->strat_i->close(r->strat);
    tg_rowcrc_close(r->rowcrc);
    free(r->scfg);
    for (int s = 0; s < 3; s++)
        free(r->split[s]);
    free(r->labels);
    if (r->budget_init) tg_budget_destroy(&r->budget);
    tg_dataset_close(r->ds);
    memset(r, 0, sizeof *r);
}

void tg_run_labels(const tg_run_t *r, const uint64_t *nodes, size_t n, const uint8_t *mask,
                   int32_t *y)
{
    size_t w = r->label_width;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = nodes[i];
        if (mask && !mask[v]) {
            for (size_t k = 0; k < w; k++)
                y[i * w + k] = -1;
        } else {
            memcpy(y + i * w, r->labels + v * w, w * sizeof *y);
        }
    }
}

int tg_run_pass(tg_run_t *r, const tg_pass_t *p, tg_pass_stats_t *st)
{
    return r->strat_i->pass(r->strat, p, st);
}
