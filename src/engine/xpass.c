/* What the extracting strategies share (engine/xpass.h). */
#include "xpass.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/derived.h"
#include "tiergnn/ncache.h"

#define ADJ_MIN_QUEUES 2u
#define ADJ_DEPTH 64u
#define ADJ_MAX_READ ((size_t)16 << 10)
#define ADJ_MAX_REQUESTS ((size_t)4096)

/* Each sampler's read of a layer waits for its disk reads, so samplers overlap their waits only
 * with queues of their own. */
unsigned tg_xpass_adj_queues(int sampler_threads)
{
    return TG_MAX(ADJ_MIN_QUEUES, (unsigned)TG_MAX(sampler_threads, 0));
}

uint64_t tg_xpass_adj_bytes(const tg_dataset_t *ds, unsigned queues)
{
    return tg_xpass_adj_bytes_n(ds->meta.num_nodes, queues);
}

uint64_t tg_xpass_adj_bytes_n(uint64_t num_nodes, unsigned queues)
{
    return (num_nodes + 1) * sizeof(uint64_t) + (uint64_t)queues * ADJ_DEPTH * ADJ_MAX_READ;
}

uint64_t tg_xpass_adj_transient(unsigned queues)
{
    return (uint64_t)queues * ADJ_MAX_REQUESTS * TG_EXTRACT_IO_BOOKKEEPING;
}

int tg_xpass_adj_open(tg_run_t *r, unsigned queues, tg_io_stats_t *stats)
{
    tg_adj_disk_opts_t ao;
    tg_adj_disk_opts_default(&ao);
    ao.io.depth = ADJ_DEPTH;
    ao.io.max_read_bytes = ADJ_MAX_READ;
    ao.io.stats = stats;
    ao.queues = queues;
    ao.max_requests = ADJ_MAX_REQUESTS;
    return tg_adj_disk_open(&r->adj, r->ds, &ao, &r->budget);
}

int tg_xpass_adj_resident(tg_run_t *r, tg_adj_t *disk, uint64_t keep, const char *who)
{
    uint64_t need = tg_adj_disk_load_bytes(disk), limit = r->budget.limit, used = r->budget.used;
    uint64_t avail =
        limit ? (limit > used + keep ? limit - used - keep : 0) : tg_phys_mem_bytes() / 8;
    if (!need || need > avail) return 0;
    double t0 = tg_now();
    int rc = tg_adj_disk_load(disk);
    if (rc < 0) return tg_err_prefix(rc, "%s: loading the indices into RAM", who);
    char a[32];
    tg_log_info("%s: indices.bin in RAM (%s, read in %.2f s): the budget had room after the "
                "feature cache, so the samplers read no index from disk",
                who, tg_fmt_bytes(need, a, sizeof a), tg_now() - t0);
    return 1;
}

int tg_xpass_ncache(tg_run_t *r, tg_adj_t *disk, uint64_t bytes, tg_io_stats_t *stats,
                    const char *who)
{
    if (tg_adj_disk_ncache(disk)) return 0; /* attached by an earlier setup */
    bytes = TG_MIN(bytes, tg_ncache_full_bytes(disk->num_nodes, disk->indptr));
    double t0 = tg_now();
    tg_ncache_t *nc;
    int rc = tg_ncache_open(&nc, r->ds, NULL, bytes, &r->budget, stats);
    if (rc == 0) rc = tg_adj_disk_attach_ncache(disk, nc);
    if (rc < 0) return tg_err_prefix(rc, "%s: neighbour cache", who);
    tg_ncache_info_t in;
    tg_ncache_info(nc, &in);
    char a[32];
    tg_log_info("%s: neighbour cache %s: in-neighbour lists of %llu nodes (%.1f%%), %.1f%% of the "
                "edges, %s in %.2f s",
                who, tg_fmt_bytes(in.mem_bytes, a, sizeof a), (unsigned long long)in.nodes,
                in.num_nodes ? 100.0 * (double)in.nodes / (double)in.num_nodes : 0.0,
                in.num_edges ? 100.0 * (double)in.edges / (double)in.num_edges : 0.0,
                in.in_ram  ? "built in RAM"
                : in.built ? "built and loaded"
                           : "loaded",
                tg_now() - t0);
    return 0;
}

void tg_xpass_ncache_take(tg_adj_t *disk, tg_pass_stats_t *st)
{
    tg_ncache_t *nc = tg_adj_disk_ncache(disk);
    if (!nc) return;
    tg_ncache_stats_t ns;
    tg_ncache_stats(nc, &ns, 1);
    if (!st) return;
    tg_ncache_info_t in;
    tg_ncache_info(nc, &in);
    st->have_ncache = 1;
    st->ncache_lookups = ns.lookups;
    st->ncache_hits = ns.hits;
    st->ncache_bytes = in.mem_bytes;
}

static void ex_fail(void *ctx, int rc, const char *msg)
{
    tg_pipe_fail(ctx, rc, msg);
}

/* The extraction's sort scratch counts in batch_bytes_peak like the matrices. */
static void ex_scratch(void *ctx, int64_t bytes)
{
    tg_pipe_count_bytes(ctx, bytes);
}

int tg_xpass_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *b, float *const *X,
                  int n)
{
    tg_extract_batch_t eb[TG_PIPE_MAX_GROUP];
    for (int j = 0; j < n; j++)
        eb[j] = (tg_extract_batch_t){
            .id = b[j]->id, .nodes = b[j]->nodes, .n = b[j]->num_nodes, .X = X[j]};
    tg_extract_hooks_t hk = {
        .fail = ex_fail, .scratch = ex_scratch, .abort = tg_pipe_abort_flag(P), .ctx = P};
    return tg_extract_group(tg_extract_worker(ctx, worker), eb, n, &hk);
}

void tg_xpass_begin(tg_extract_t *ex, tg_io_stats_t *io)
{
    tg_tier_stats_t ts[TG_PASS_MAX_TIERS];
    tg_io_counts_t c;
    tg_extract_tier_stats(ex, ts, TG_PASS_MAX_TIERS, 1);
    tg_io_stats_take(io, &c);
}

void tg_xpass_end(tg_extract_t *ex, tg_io_stats_t *io, int ram_tiers, tg_pass_stats_t *st)
{
    tg_tier_stats_t ts[TG_PASS_MAX_TIERS];
    int nt = tg_extract_tier_stats(ex, ts, TG_PASS_MAX_TIERS, 1);
    nt = TG_MIN(nt, TG_PASS_MAX_TIERS); /* not inside TG_MIN: it evaluates twice */
    st->ntiers = 0;
    for (int t = 0; t < nt; t++)
        (void)tg_pass_tier_add(st, ts[t].name, ts[t].lookups, ts[t].hits, ts[t].bytes);
    st->have_cache = 1;
    st->cache_lookups = ts[0].lookups;
    st->cache_hits = ram_tiers ? ts[0].hits : 0;
    tg_io_counts_t c;
    tg_io_stats_take(io, &c);
    st->have_io = st->have_io_wait = 1;
    st->io_requests = c.io_requests;
    st->io_read_bytes = c.io_read_bytes;
    st->io_wait_s = c.io_wait_s;
}

int tg_xpass_in_flight(const tg_xpass_cfg_t *x)
{
    return (int)(x->extractors * x->sweep_batches + x->queue_depth);
}

tg_pipe_opts_t tg_xpass_pipe_opts(tg_run_t *r, const tg_pass_t *p, const tg_xpass_cfg_t *x,
                                  tg_extract_t *ex)
{
    return (tg_pipe_opts_t){.pass = p,
                            .adj = r->adj,
                            .dim = r->ds->meta.feat_dim,
                            .sampler_threads = r->sopts.sampler_threads,
                            .prefetch = (size_t)x->queue_depth,
                            .workers = tg_extract_num_workers(ex),
                            .group = (int)x->sweep_batches,
                            .work = tg_xpass_work,
                            .work_ctx = ex,
                            .queue_depth = (int)x->queue_depth,
                            .in_order = 1};
}

void tg_xpass_plan_opts(const tg_dataset_t *ds, const tg_xpass_cfg_t *x, int sampler_threads,
                        char *path, size_t path_len, tg_extract_plan_opts_t *po)
{
    tg_extract_plan_opts_default(po);
    tg_dataset_path(ds, TG_FILE_FEATURES, path, path_len);
    po->num_nodes = ds->meta.num_nodes;
    po->feat_dim = ds->meta.feat_dim;
    po->dtype = ds->meta.feat_dtype;
    po->extractors = (int)x->extractors;
    po->io_depth = (unsigned)x->io_depth;
    po->io_gap = x->io_gap;
    po->chunk_rows = (uint32_t)x->chunk_rows;
    po->featbuf = 0;
    po->probe_path = path;
    po->other_transient = tg_xpass_adj_transient(tg_xpass_adj_queues(sampler_threads));
}

void tg_xpass_ahead_plan_opts(const tg_dataset_t *ds, const tg_xpass_cfg_t *x, int sampler_threads,
                              char *path, size_t path_len, tg_extract_plan_opts_t *po)
{
    tg_xpass_plan_opts(ds, x, sampler_threads, path, path_len, po);
    po->extractors = 1;
}

uint64_t tg_xpass_min_bytes(const tg_dataset_t *ds, tg_extract_plan_opts_t *po, int sampler_threads,
                            uint64_t fixed, const char *what, char *why, size_t why_len)
{
    char a[32], b[32], d[512];
    po->minimum = 1;
    tg_extract_plan_t pl;
    if (tg_extract_plan(&pl, po) < 0) {
        snprintf(why, why_len, "%s", tg_errmsg());
        return UINT64_MAX;
    }
    unsigned q = tg_xpass_adj_queues(sampler_threads);
    uint64_t adj = tg_xpass_adj_bytes(ds, q) + tg_xpass_adj_transient(q);
    if (what)
        snprintf(why, why_len, "indptr and index-read staging %s, %s %s, %s",
                 tg_fmt_bytes(adj, a, sizeof a), what, tg_fmt_bytes(fixed, b, sizeof b),
                 tg_extract_plan_describe(&pl, d, sizeof d));
    else
        snprintf(why, why_len, "indptr and index-read staging %s, %s",
                 tg_fmt_bytes(adj, a, sizeof a), tg_extract_plan_describe(&pl, d, sizeof d));
    return adj + fixed + tg_extract_plan_bytes(&pl);
}

uint64_t tg_xpass_ahead_min_bytes(const tg_dataset_t *ds, const tg_xpass_cfg_t *x,
                                  int sampler_threads, uint64_t fixed, const char *what, char *why,
                                  size_t why_len)
{
    char path[4096];
    tg_extract_plan_opts_t po;
    tg_xpass_ahead_plan_opts(ds, x, sampler_threads, path, sizeof path, &po);
    return tg_xpass_min_bytes(ds, &po, sampler_threads, fixed, what, why, why_len);
}

int tg_xpass_open_disk(tg_run_t *r, unsigned queues, tg_io_stats_t *stats, tg_io_file_t **feat)
{
    *feat = NULL;
    int rc = tg_xpass_adj_open(r, queues, stats);
    if (rc < 0) return rc;
    tg_store_opts_t sto = {
        .normalize = r->sopts.normalize, .budget = &r->budget, .rowcrc = r->rowcrc};
    if ((rc = tg_store_file_open(&r->store, r->ds, &sto)) < 0) return rc;
    char path[4096];
    tg_dataset_path(r->ds, TG_FILE_FEATURES, path, sizeof path);
    if ((rc = tg_io_file_open(feat, path, 0)) < 0) return rc;
    uint64_t want = tg_meta_expected_size(&r->ds->meta, TG_FILE_FEATURES);
    if (tg_io_file_size(*feat) != want) {
        rc = tg_err(-EINVAL, "%s: %llu bytes, meta.txt says %llu (changed since it was written?)",
                    path, (unsigned long long)tg_io_file_size(*feat), (unsigned long long)want);
        tg_io_file_close(*feat);
        *feat = NULL;
    }
    return rc;
}

void tg_xpass_runtime_dir(const tg_dataset_t *ds, char *dir, size_t len)
{
    tg_derived_dir(ds, NULL, dir, len);
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK) == 0) return;
    }
    const char *t = getenv("TMPDIR");
    snprintf(dir, len, "%s", t && *t ? t : "/tmp");
}

int tg_xpass_grow_u32(tg_budget_t *budget, uint32_t **a, uint64_t *cap, uint64_t n, uint64_t *held,
                      const char *what)
{
    if (n <= *cap) return 0;
    uint64_t nc = TG_MAX(n, *cap + *cap / 2 + 1024), add = (nc - *cap) * sizeof(uint32_t);
    int rc = tg_budget_reserve(budget, add, what);
    if (rc < 0) return rc;
    uint32_t *na = realloc(*a, nc * sizeof(uint32_t));
    if (!na) {
        tg_budget_release(budget, add);
        return tg_err(-ENOMEM, "%s: out of memory for %llu entries", what, (unsigned long long)n);
    }
    *held += add;
    *a = na;
    *cap = nc;
    return 0;
}
