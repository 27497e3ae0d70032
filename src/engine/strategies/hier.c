/* Strategy "hier": HierBatching (anonymous, "HierBatching: Locality-aware out-of-core training of
 * graph neural networks", an ICLR submission under review; section 3 and Algorithm 1) on the CPU,
 * with the same model, sampler and fanouts as every other strategy.
 *
 * Layout (data/part_build.c, `tiergnn partition`, or this strategy's prepare step): the nodes in
 * --parts min-edge-cut parts, the features and the in-neighbour lists rewritten so that every
 * part is contiguous on disk (derived/ part-*, partfeat-*, partadj-*), in new ids.
 *
 * Caches (3.2): the static cache pins the features and the in-neighbour lists of the
 * --static-ratio highest in-degree nodes in RAM for the whole run. The dynamic cache, what the
 * budget leaves, holds two mega-batches (one trained, one loading: engine/ahead's two slots):
 * N_d = --dynamic-parts parts each (automatic: as many as fit).
 *
 * An epoch (Algorithm 1): the parts shuffled (a pure function of seed and epoch), taken N_d at a
 * time. A mega-batch (graph/megabatch, tiergnn/megabatch.h, which also holds the static cache)
 * reads its parts' rows, old ids and lists with large sequential reads (a part is one run of
 * each file) and forms the subgraph on T ∪ (N(T) ∩ static): T's lists keep the neighbours in T
 * and the static ones (which join the mega-batch), the joining static nodes' lists keep the
 * neighbours in the mega-batch. Its training nodes, shuffled per pass, are cut into
 * mini-batches of --batch-size that the sampler samples from that subgraph (the RNG of batch k of
 * the epoch is (seed, epoch', k) as everywhere, epoch' naming the mega-batch and pass), and X
 * comes from RAM only. --passes p trains each mega-batch p times while the next one loads
 * (pipelining and reuse, 3.3). The batches differ from memory's on purpose: hier trains on a
 * different graph (TG_STRAT_CHANGES_GRAPH), and its accuracy is measured, not assumed.
 *
 * Batch numbering: the epoch's batches in schedule order, so a stopped run resumes at the same
 * mega-batch, pass and batch (exact while the schedule is the same: the same --parts, --passes,
 * --batch-size and N_d, which --mem decides when --dynamic-parts is automatic).
 *
 * Evaluation passes run on the original graph and feature file, like pagraph without a cache:
 * samplers over the disk adjacency, extractors reading rows through io_uring. */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ahead.h"
#include "../plan_cost.h"
#include "hier-impl.h"
#include "hier.h"

#define PREFETCH 1          /* sampling from RAM is quick: a batch ahead per sampler thread */
#define NODES_PER_PART 4096 /* --parts auto: the paper's "several thousand nodes" */

/* ---------------------------------------------------------------- options */

#define H_OPT(...) TG_STRATEGY_OPT(hier_cfg_t, __VA_ARGS__)

static const tg_strategy_opt_t hier_opts[] = {
    TG_XPASS_OPTS,
    H_OPT("parts", TG_SOPT_INT, -1, 1, UINT32_MAX, 1, parts, "P",
          "partitions of the graph (default auto: one per 4096 nodes)"),
    {.name = "method",
     .kind = TG_SOPT_CHOICE,
     .def = TG_PART_AUTO,
     .offset = offsetof(hier_cfg_t, method),
     .choices = "auto|metis|stream",
     .meta = "auto|metis|stream",
     .help = "partitioner when the partition is not built yet: METIS in RAM, or the streaming "
             "one; auto: an existing partition, else METIS when it fits (default auto)"},
    {.name = "static-ratio",
     .kind = TG_SOPT_REAL,
     .rdef = 0.01,
     .rmin = 0,
     .rmax = 1,
     .offset = offsetof(hier_cfg_t, static_ratio),
     .meta = "R",
     .help = "share of the nodes, the highest in-degree ones, whose features and neighbour lists "
             "stay in RAM (the static cache; 0 = none; default 0.01)"},
    H_OPT("passes", TG_SOPT_INT, 1, 1, 64, 0, passes, "p",
          "passes over each mega-batch's training nodes while the next one loads (default 1)"),
    H_OPT("dynamic-parts", TG_SOPT_INT, -1, 1, UINT32_MAX, 1, dynamic_parts, "N",
          "parts per mega-batch (default auto: as many as two mega-batches in --mem allow; "
          "without --mem an eighth of the parts)"),
};

/* ---------------------------------------------------------------- state */

typedef struct {
    uint64_t ntrain; /* their training nodes */
    uint64_t batches;
} sched_mega_t;

struct tg_strategy {
    tg_run_t *r;
    const hier_cfg_t *c;
    tg_io_stats_t stats;
    tg_io_file_t *feat;
    tg_adj_t *disk;
    tg_extract_t *ex;     /* evaluation passes */
    tg_tier_t *eval_tier; /* their first tier: the static cache's rows, by original id */
    char params[256];
    tg_part_t *part;
    uint32_t P;
    uint64_t N;
    size_t row;         /* bytes of a stored row */
    int ready;          /* setup done: N_d sized */
    uint64_t held;      /* budget reserved by setup_fixed beside the loader's (the parts' order) */
    uint64_t prov_left; /* the budget plan's profile: the dynamic cache's provisional room */
    /* the static cache and the mega-batches' loading (graph/megabatch), set up once */
    tg_mb_t *mb;
    /* the dynamic cache: N_d parts per mega-batch, two buffers for mega-batches of at most
     * t_cap nodes, ed edges and np static pairs (the N_d largest parts') */
    uint64_t nd, t_cap, ed, np;
    tg_megabatch_t mega[2];
    /* the epoch's schedule */
    uint64_t sched_epoch;
    int sched_valid;
    uint32_t *order; /* parts, shuffled */
    sched_mega_t *sched;
    uint64_t nmega, epoch_batches;
    /* loading: mega-batch k + 1 on engine/ahead's thread while k trains */
    tg_ahead_t *ahead;
    uint64_t *run; /* a training pass's mega-batches in order (set before the loader starts) */
};

/* The epoch' of mega-batch i, pass j: the RNG streams of its shuffles and batches. Training
 * epochs stay far below evaluation's (graph/plan.c: near UINT64_MAX). */
uint64_t tg_hier_sub_epoch(uint64_t epoch, uint64_t i, uint64_t j)
{
    return (epoch << 32) + (i << 6) + j + 1;
}

/* ---------------------------------------------------------------- the partition */

static void assign_opts(const tg_strategy_opts_t *so, const tg_dataset_t *ds,
                        tg_part_assign_opts_t *a)
{
    const hier_cfg_t *c = so->cfg;
    tg_part_assign_opts_default(a);
    uint64_t N = ds->meta.num_nodes;
    uint64_t parts = c->parts > 0 ? (uint64_t)c->parts : (N + NODES_PER_PART - 1) / NODES_PER_PART;
    a->parts = (uint32_t)TG_MAX((uint64_t)1, TG_MIN(parts, N));
    a->method = (tg_part_method_t)c->method;
    uint64_t cg = tg_cgroup_mem_limit();
    a->mem_bytes = tg_phys_mem_bytes() / 4;
    if (cg) a->mem_bytes = TG_MIN(a->mem_bytes, cg / 2);
}

/* The params of the partition to use: with method auto, one already built, else what auto
 * resolves to (tg_part_find). */
int tg_hier_find_params(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *buf, size_t len,
                        tg_part_assign_opts_t *a)
{
    assign_opts(so, ds, a);
    return tg_part_find(ds, a, buf, len);
}

static int hier_prepare(const tg_dataset_t *ds, const tg_strategy_opts_t *so)
{
    tg_part_build_opts_t o = {0};
    char params[256];
    int rc = tg_hier_find_params(ds, so, params, sizeof params, &o.assign);
    if (rc < 0) return rc;
    o.mem_bytes = o.assign.mem_bytes;
    o.progress = isatty(STDERR_FILENO);
    tg_part_build_stats_t st;
    if ((rc = tg_part_build(ds, &o, &st)) < 0) return tg_err_prefix(rc, "hier: partitioning");
    if (st.built_map || st.built_feat || st.built_adj)
        tg_log_info("hier: partitioned in %.1f s (%s): edge cut %.2f%%, balance %.3f", st.total_s,
                    params,
                    st.sum.edges ? 100.0 * (double)st.sum.cut_edges / (double)st.sum.edges : 0.0,
                    st.sum.balance);
    return 0;
}

/* ---------------------------------------------------------------- open / close */

static void plan_opts(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *path, size_t len,
                      tg_extract_plan_opts_t *po)
{
    tg_xpass_plan_opts(ds, &((const hier_cfg_t *)so->cfg)->x, so->sampler_threads, path, len, po);
    po->minimum = 1; /* evaluation only: the caches get the budget */
}

static uint64_t hier_min_bytes(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *why,
                               size_t len)
{
    char path[4096];
    tg_extract_plan_opts_t po;
    plan_opts(ds, so, path, sizeof path, &po);
    return tg_xpass_min_bytes(ds, &po, so->sampler_threads, 0, NULL, why, len);
}

static void megas_release(tg_strategy_t *s)
{
    if (s->mb) tg_mb_release(s->mb);
}

/* The dynamic cache: the two mega-batch buffers and their budget, allocated for training passes
 * and released for evaluation (tg_strategy_i.evaluating, and an evaluation pass that comes
 * without it), whose batches (sampled from the whole graph, larger than the budget plan
 * measured for hier) and layer-wise passes take their room. */
static int megas_alloc(tg_strategy_t *s)
{
    int rc = tg_mb_alloc(s->mb, s->mega, 2, s->t_cap, s->ed, s->np);
    if (rc < 0) megas_release(s);
    return rc;
}

static void hier_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_ahead_close(s->ahead);
    tg_extract_destroy(s->ex);
    tg_tier_destroy(s->eval_tier); /* after the extraction that asks it, before the rows */
    tg_mb_close(s->mb);
    free(s->order), free(s->sched), free(s->run);
    if (s->held) tg_budget_release(&s->r->budget, s->held);
    tg_io_file_close(s->feat);
    tg_part_close(s->part);
    free(s);
}

static int load_run(void *ctx, void *item, uint64_t k, tg_ahead_t *a);

static int hier_open(tg_strategy_t **out, tg_run_t *r, const tg_strategy_opts_t *so)
{
    tg_strategy_t *s = calloc(1, sizeof *s);
    if (!(*out = s)) return tg_err(-ENOMEM, "strategy hier: out of memory");
    s->r = r;
    s->c = so->cfg;
    s->N = r->ds->meta.num_nodes;
    s->row = r->row_bytes;
    tg_io_stats_init(&s->stats);
    tg_part_assign_opts_t a;
    int rc = tg_xpass_open_disk(r, tg_xpass_adj_queues(so->sampler_threads), &s->stats, &s->feat);
    s->disk = r->adj;
    if (rc == 0) rc = tg_hier_find_params(r->ds, so, s->params, sizeof s->params, &a);
    if (rc == 0 && (rc = tg_part_open(&s->part, r->ds, s->params)) < 0)
        tg_err_prefix(rc, "hier: the partition (`tiergnn partition` builds it)");
    if (rc == 0 && s->N > UINT32_MAX)
        rc = tg_err(-EOVERFLOW,
                    "hier: %llu nodes: mega-batches use 32-bit local ids (at most "
                    "%u nodes)",
                    (unsigned long long)s->N, UINT32_MAX);
    if (rc == 0) s->P = s->part->sum.parts;
    void *items[2] = {&s->mega[0], &s->mega[1]};
    tg_ahead_opts_t ao = {
        .slots = 2, .items = items, .produce = load_run, .ctx = s, .who = "hier: the loader"};
    if (rc == 0) rc = tg_ahead_open(&s->ahead, &ao);
    if (rc < 0) hier_close(s), *out = NULL;
    return rc;
}

/* Evaluation passes: the smallest extraction plan over the original feature file, with the
 * static cache's rows (once loaded) as a RAM tier before it. */
static int setup_eval(tg_strategy_t *s)
{
    if (s->ex) return 0;
    tg_run_t *r = s->r;
    char path[4096];
    tg_extract_plan_opts_t po;
    plan_opts(r->ds, &r->sopts, path, sizeof path, &po);
    tg_extract_plan_t pl;
    int rc = tg_extract_plan(&pl, &po);
    if (rc < 0) return tg_err_prefix(rc, "hier");
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = s->feat,
                            .normalize = r->sopts.normalize,
                            .budget = &r->budget,
                            .stats = &s->stats,
                            .who = "hier",
                            .rowcrc = r->rowcrc,
                            .tiers = &s->eval_tier,
                            .ntiers = s->eval_tier ? 1 : 0};
    if ((rc = tg_extract_create(&s->ex, &eo)) < 0) return tg_err_prefix(rc, "hier");
    return 0;
}

/* --verify-reads: a row of partfeat against features.bin's checksum of its original id. */
static int check_row(void *ctx, uint64_t old_id, const void *row, const char *path, uint64_t off)
{
    return tg_rowcrc_check(ctx, old_id, row, path, off);
}

/* What does not depend on N_d, set up once: the static cache (Algorithm 1, line 9: the
 * --static-ratio highest in-degree nodes, 3.2) and the mega-batches' loader over the partition, the
 * parts' order, and evaluation's extraction with the static rows as its first tier. The budget's
 * profile keeps it: only the mega-batches are sized again after the plan. */
static int setup_fixed(tg_strategy_t *s)
{
    if (s->mb) return 0;
    tg_run_t *r = s->r;
    uint64_t S = s->c->static_ratio > 0 ? (uint64_t)((double)s->N * s->c->static_ratio + 0.5) : 0;
    S = TG_MIN(S, s->N);
    /* the static nodes: degrees from the original indptr; their lists' lengths are the same */
    uint64_t *sids = malloc(S * sizeof *sids + 1);
    if (!sids) return tg_err(-ENOMEM, "hier: out of memory");
    uint64_t static_edges = 0;
    int rc = tg_adj_top_degree(s->disk, S, sids, &static_edges);
    tg_mb_opts_t o = {.ds = r->ds,
                      .part = s->part,
                      .params = s->params,
                      .budget = &r->budget,
                      .row_bytes = s->row,
                      .static_old = sids,
                      .num_static = S,
                      .static_edges = static_edges,
                      .train_old = r->split[0],
                      .num_train = r->split_n[0],
                      .check_row = r->rowcrc ? check_row : NULL,
                      .check_ctx = r->rowcrc,
                      .who = "hier"};
    if (rc == 0) rc = tg_mb_open(&s->mb, &o);
    free(sids);
    if (rc < 0) return rc;
    if ((rc = tg_budget_reserve(&r->budget, s->P * 4, "hier: the parts' order")) == 0)
        s->held = s->P * 4;
    /* evaluation passes sample the whole graph: the static rows, the most often sampled (highest
     * degree), come from RAM there too (an extraction made before, for an evaluation first, has
     * no tier: made again) */
    if (rc == 0 && S &&
        (rc = tg_tier_borrow_create(&s->eval_tier, "hier-static", s->mb->s_feat, s->row,
                                    s->mb->s_old, S, s->N, &r->budget)) < 0)
        tg_err_prefix(rc, "hier");
    if (rc == 0 && S) tg_extract_destroy(s->ex), s->ex = NULL;
    if (rc == 0) rc = setup_eval(s);
    if (rc < 0) { /* undone, so that a later pass sets it up again */
        tg_extract_destroy(s->ex), s->ex = NULL;
        tg_tier_destroy(s->eval_tier), s->eval_tier = NULL;
        tg_mb_close(s->mb), s->mb = NULL;
        if (s->held) tg_budget_release(&r->budget, s->held);
        s->held = 0;
    }
    return rc;
}

/* The most parts, at most want, whose two mega-batches fit left (limited 0: no limit), the
 * largest parts' nodes, edges and pairs summed (the buffers' bounds) into *t, *ed, *np. */
uint64_t tg_hier_fit_parts(const tg_mb_t *L, uint64_t want, int limited, uint64_t left, uint64_t *t,
                           uint64_t *ed, uint64_t *np)
{
    uint64_t nd = 0;
    *t = *ed = *np = 0;
    while (nd < want) {
        uint64_t t2 = *t + L->psize[nd], e2 = *ed + L->pedge[nd], np2 = *np + L->pspairs[nd];
        if (limited && tg_mb_bytes(L, 2, t2, e2, np2) > left) break;
        *t = t2, *ed = e2, *np = np2, nd++;
    }
    return nd;
}

/* N_d, the most parts whose two mega-batches fit what the budget leaves (the profile: at most
 * prov_left), and the mega-batches allocated. */
static int setup(tg_strategy_t *s)
{
    int rc = setup_fixed(s);
    if (rc < 0) return rc;
    const hier_cfg_t *c = s->c;
    tg_budget_t *bg = &s->r->budget;
    uint32_t P = s->P;
    const tg_mb_t *L = s->mb;
    uint64_t S = L->S;
    char a[32], b[32], d[32], e[32];
    uint64_t left = bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 0) : 0;
    if (s->prov_left) left = TG_MIN(left, s->prov_left);
    uint64_t t, ed, np;
    uint64_t want = c->dynamic_parts > 0 ? TG_MIN((uint64_t)c->dynamic_parts, (uint64_t)P)
                    : bg->limit          ? P
                                         : TG_MAX((uint64_t)1, (P + 7) / 8);
    uint64_t nd = tg_hier_fit_parts(L, want, bg->limit != 0, left, &t, &ed, &np);
    if (nd == 0 || (c->dynamic_parts > 0 && nd < want)) {
        uint64_t t1 = nd ? t : L->psize[0], e1 = nd ? ed : L->pedge[0];
        uint64_t np1 = nd ? np : L->pspairs[0];
        return tg_err(-ENOMEM,
                      "hier: --mem leaves %s for the dynamic cache after the static cache (%llu "
                      "nodes, %s), but two mega-batches of %llu part(s) need %s: raise --mem, "
                      "lower --static-ratio or --dynamic-parts, or use more --parts",
                      tg_fmt_bytes(left, a, sizeof a), (unsigned long long)S,
                      tg_fmt_bytes(L->held + s->held, b, sizeof b),
                      (unsigned long long)(nd ? want : 1),
                      tg_fmt_bytes(tg_mb_bytes(L, 2, t1, e1, np1), d, sizeof d));
    }
    s->nd = nd;
    s->sched_valid = 0; /* a schedule cuts the parts into mega-batches of N_d */
    s->t_cap = t;
    /* exact bounds: T's edges, its parts' pairs, the static-to-static edges */
    s->ed = ed;
    s->np = np;
    if ((rc = megas_alloc(s)) < 0) return rc;
    tg_log_info("hier: %u parts (%s), %llu per mega-batch (%s each, two in RAM); static cache "
                "%llu nodes (%.2f%%, %s with %llu in-edges, %llu of them from static nodes)",
                P, s->params, (unsigned long long)s->nd, tg_fmt_bytes(L->buf_held / 2, a, sizeof a),
                (unsigned long long)S, s->N ? 100.0 * (double)S / (double)s->N : 0.0,
                tg_fmt_bytes(S * s->row, e, sizeof e), (unsigned long long)L->static_edges,
                (unsigned long long)L->ss_edges);
    s->ready = 1;
    return 0;
}

/* ---------------------------------------------------------------- the schedule */

int tg_hier_parts_order(uint32_t P, uint64_t seed, uint64_t epoch, uint32_t *order)
{
    uint64_t *tmp = malloc(P * sizeof *tmp + 1);
    if (!tmp) return tg_err(-ENOMEM, "hier: out of memory");
    for (uint32_t k = 0; k < P; k++)
        tmp[k] = k;
    /* the parts' shuffle: its own stream (the top bit keeps it apart from the batches') */
    tg_sampler_shuffle_epoch(tmp, P, seed, epoch | (1ull << 63));
    for (uint32_t k = 0; k < P; k++)
        order[k] = (uint32_t)tmp[k];
    free(tmp);
    return 0;
}

/* An epoch's mega-batches (lines 11-12): the parts shuffled, N_d at a time, and each one's
 * batches (line 16: --passes times its training nodes' batches). */
static int schedule(tg_strategy_t *s, const tg_pass_t *p)
{
    if (s->sched_valid && s->sched_epoch == p->epoch) return 0;
    uint32_t P = s->P;
    if (!s->order && !(s->order = malloc(P * sizeof *s->order)))
        return tg_err(-ENOMEM, "hier: out of memory");
    int rc = tg_hier_parts_order(P, p->seed, p->epoch, s->order);
    if (rc < 0) return rc;
    s->nmega = (P + s->nd - 1) / s->nd;
    free(s->sched);
    if (!(s->sched = calloc(s->nmega, sizeof *s->sched))) return tg_err(-ENOMEM, "out of memory");
    uint64_t B = p->batch_size, passes = (uint64_t)s->c->passes, total = 0;
    for (uint64_t i = 0; i < s->nmega; i++) {
        sched_mega_t *m = &s->sched[i];
        for (uint64_t k = i * s->nd; k < TG_MIN((uint64_t)P, (i + 1) * s->nd); k++) {
            uint32_t q = s->order[k];
            m->ntrain += s->mb->tp[q + 1] - s->mb->tp[q];
        }
        m->batches = passes * ((m->ntrain + B - 1) / B);
        total += m->batches;
    }
    s->epoch_batches = total;
    s->sched_epoch = p->epoch;
    s->sched_valid = 1;
    return 0;
}

static uint64_t limit_of(const tg_strategy_t *s, const tg_pass_t *p)
{
    /* --batches-per-epoch: the plan gives fewer seeds than the training split */
    if (p->num_seeds < s->mb->ntrain)
        return TG_MIN(s->epoch_batches, (p->num_seeds + p->batch_size - 1) / p->batch_size);
    return s->epoch_batches;
}

static int hier_epoch_batches(tg_strategy_t *s, const tg_pass_t *p, uint64_t *n)
{
    int rc;
    if (!s->ready && (rc = setup(s)) < 0) return rc;
    if ((rc = schedule(s, p)) < 0) return rc;
    *n = limit_of(s, p);
    return 0;
}

/* Mega-batch i of the epoch's schedule into m (lines 12-15: T's rows, the lists of T and of the
 * static nodes it reaches, their subgraph): the parts order[i N_d, (i + 1) N_d). */
static int load_mega(tg_strategy_t *s, tg_megabatch_t *m, uint64_t i)
{
    uint64_t first = i * s->nd, n = TG_MIN((uint64_t)s->P, first + s->nd) - first;
    return tg_mb_load(s->mb, m, s->order + first, n);
}

/* engine/ahead's producer: the pass's mega-batch k into a free buffer. */
static int load_run(void *ctx, void *item, uint64_t k, tg_ahead_t *a)
{
    tg_strategy_t *s = ctx;
    (void)a;
    return load_mega(s, item, s->run[k]);
}

/* ---------------------------------------------------------------- training on a mega-batch */

typedef struct {
    tg_strategy_t *s;
    const tg_pass_t *p; /* the engine's pass */
    tg_megabatch_t *m;
    uint64_t base; /* the epoch's number of this sub-pass's batch 0 */
    uint64_t *ids; /* the trainer's: a batch's original ids */
    uint64_t ids_cap;
    uint64_t rows_static, rows_dyn;
} sub_t;

/* X from RAM only (line 21): T's rows from the dynamic cache, the others from the static one. */
static int sub_gather(void *ctx, const tg_batch_t *b, float *X)
{
    sub_t *c = ctx;
    const tg_meta_t *meta = &c->s->r->ds->meta;
    uint64_t st = 0;
    for (uint32_t i = 0; i < b->num_nodes; i++) {
        st += b->nodes[i] >= c->m->nt;
        tg_feat_rows_f32(X + (size_t)i * meta->feat_dim, tg_mb_row(c->s->mb, c->m, b->nodes[i]), 0,
                         1, meta->feat_dim, meta->feat_dtype, c->s->r->sopts.normalize);
    }
    /* sampler threads gather at once: one atomic add per batch */
    __atomic_add_fetch(&c->rows_static, st, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->rows_dyn, b->num_nodes - st, __ATOMIC_RELAXED);
    return 0;
}

/* The engine's step with the batch in original ids (labels) and its number in the epoch. */
static int sub_step(void *ctx, const tg_batch_t *b, const float *X)
{
    sub_t *c = ctx;
    if (b->num_nodes > c->ids_cap) {
        free(c->ids);
        c->ids_cap = b->num_nodes;
        if (!(c->ids = malloc(c->ids_cap * sizeof *c->ids))) {
            c->ids_cap = 0;
            return tg_err(-ENOMEM, "hier: out of memory for a batch's ids");
        }
    }
    for (uint32_t i = 0; i < b->num_nodes; i++)
        c->ids[i] = c->m->old_ids[b->nodes[i]];
    tg_batch_t ob = *b;
    ob.nodes = c->ids;
    ob.id = c->base + b->id;
    return c->p->step(c->p->ctx, &ob, X);
}

/* The mega-batches a training pass loads, in order, into s->run: from the one holding batch
 * `first` (its first batch is *k0), those with training nodes whose first batch comes before
 * `limit`. */
static int plan_run(tg_strategy_t *s, uint64_t first, uint64_t limit, uint64_t *n, uint64_t *k0)
{
    uint64_t i = 0, k = 0;
    while (i < s->nmega && k + s->sched[i].batches <= first)
        k += s->sched[i++].batches;
    *k0 = k;
    *n = 0;
    free(s->run);
    if (!(s->run = malloc((s->nmega + 1) * sizeof *s->run)))
        return tg_err(-ENOMEM, "hier: out of memory for the schedule");
    for (; i < s->nmega && k < limit; i++) {
        if (!s->sched[i].batches) continue;
        s->run[(*n)++] = i;
        k += s->sched[i].batches;
    }
    return 0;
}

/* Trains the passes over mega-batch i (lines 17-23: the i-th of the schedule, loaded in m, its
 * training nodes shuffled into mini-batches each pass) whose batches are the epoch's *k onwards,
 * skipping those a resumed pass did already; *k moves past them. */
static int train_mega(tg_strategy_t *s, sub_t *c, tg_megabatch_t *m, uint64_t i, uint64_t *k,
                      uint64_t limit, tg_pass_stats_t *st)
{
    const tg_pass_t *p = c->p;
    uint64_t first = p->first_batch, B = p->batch_size;
    uint64_t per = (m->nseeds + B - 1) / B;
    uint64_t *seeds = malloc(m->nseeds * sizeof *seeds + 1);
    if (!seeds) return tg_err(-ENOMEM, "hier: out of memory");
    int rc = 0;
    for (uint64_t j = 0; j < (uint64_t)s->c->passes && rc == 0 && *k < limit; j++, *k += per) {
        if (first >= *k + per) continue; /* resumed past this pass */
        memcpy(seeds, m->seeds, m->nseeds * sizeof *seeds);
        uint64_t ep = tg_hier_sub_epoch(p->epoch, i, j);
        tg_sampler_shuffle_epoch(seeds, m->nseeds, p->seed, ep);
        uint64_t nb = TG_MIN(per, limit - *k);
        tg_pass_t sp = {.seeds = seeds,
                        .num_seeds = TG_MIN(m->nseeds, nb * B),
                        .batch_size = B,
                        .seed = p->seed,
                        .epoch = ep,
                        .first_batch = first > *k ? first - *k : 0,
                        .num_layers = p->num_layers,
                        .fanouts = p->fanouts,
                        .sampler = p->sampler,
                        .training = 1,
                        .step = sub_step,
                        .ctx = c};
        c->m = m;
        c->base = *k;
        tg_pipe_opts_t po = {.pass = &sp,
                             .adj = m->adj,
                             .dim = s->r->ds->meta.feat_dim,
                             .sampler_threads = s->r->sopts.sampler_threads,
                             .prefetch = PREFETCH,
                             .gather = sub_gather,
                             .gather_ctx = c,
                             .queue_depth = 1,
                             .in_order = 1};
        tg_pass_stats_t a;
        rc = tg_pipe_run(&po, &a);
        tg_pass_stats_add(s->r, st, &a); /* its times, steps and peak */
        st->next_batch = *k + a.next_batch;
        if (rc == 0 && a.stopped) {
            st->stopped = 1;
            break;
        }
    }
    free(seeds);
    return rc;
}

/* A pass's own figures (tg_pass_stats_t.own): counts and sums, N_d and the static cache's size
 * as settings (the larger), so that passes add; the means are derived when they are reported. */
typedef struct {
    uint64_t passes;
    tg_hier_figures_t f;
} hier_own_t;
TG_PASS_OWN_FITS(hier_own_t);

/* What a training pass gathers as it goes: the loads' reads and time at its start, and the
 * mega-batches' figures. */
typedef struct {
    uint64_t rb0, rq0;
    double load0;
    hier_own_t o;
} hier_fig_t;

/* What a training pass reports: the loads' reads as its I/O, the static cache and the mega-batch
 * as its two tiers, and the mega-batches' figures as its own. */
static void train_report(const tg_strategy_t *s, const sub_t *c, hier_fig_t *f, tg_pass_stats_t *st)
{
    st->have_io = 1;
    st->io_read_bytes = s->mb->read_bytes - f->rb0;
    st->io_requests = s->mb->reads - f->rq0;
    st->have_io_wait = 1;
    st->io_wait_s = f->o.f.load_wait_s;
    uint64_t rows = c->rows_static + c->rows_dyn;
    st->have_cache = 1;
    st->cache_lookups = rows;
    st->cache_hits = c->rows_static;
    (void)tg_pass_tier_add(st, "hier-static", rows, c->rows_static, c->rows_static * s->row);
    (void)tg_pass_tier_add(st, "hier-megabatch", c->rows_dyn, c->rows_dyn, c->rows_dyn * s->row);
    f->o.passes = 1;
    f->o.f.dynamic_parts = s->nd;
    f->o.f.static_nodes = s->mb->S;
    f->o.f.load_s = s->mb->load_s - f->load0;
    tg_pass_own_put(st, &f->o, sizeof f->o);
}

static void hier_own_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    hier_own_t a, b;
    tg_pass_own_get(sum, &a, sizeof a);
    tg_pass_own_get(add, &b, sizeof b);
    a.passes += b.passes;
    a.f.megabatches += b.f.megabatches;
    a.f.dynamic_parts = TG_MAX(a.f.dynamic_parts, b.f.dynamic_parts);
    a.f.static_nodes = TG_MAX(a.f.static_nodes, b.f.static_nodes);
    a.f.nodes += b.f.nodes;
    a.f.load_s += b.f.load_s;
    a.f.load_wait_s += b.f.load_wait_s;
    a.f.deg_full += b.f.deg_full;
    a.f.deg_induced += b.f.deg_induced;
    a.f.deg_static += b.f.deg_static;
    tg_pass_own_put(sum, &a, sizeof a);
}

int tg_hier_figures(const tg_pass_stats_t *st, tg_hier_figures_t *f)
{
    hier_own_t o;
    tg_pass_own_get(st, &o, sizeof o);
    *f = o.f;
    return o.passes ? 0 : -ENOENT;
}

/* The object "megabatch" and the clause "; N mega-batches of ...": the mean in-degrees over the
 * dynamic nodes. Training passes only (evaluation runs on the original graph). */
static void hier_report(const tg_pass_stats_t *st, tg_json_t *j, char *line, size_t len)
{
    tg_hier_figures_t f;
    if (tg_hier_figures(st, &f) < 0) return;
    double n = f.nodes ? (double)f.nodes : 1.0;
    double full = (double)f.deg_full / n, ind = (double)f.deg_induced / n;
    double stc = (double)f.deg_static / n;
    if (j) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"megabatches\":%llu,\"dynamic_parts\":%llu,\"static_nodes\":%llu,"
                 "\"nodes\":%llu,\"load_s\":%.6f,\"load_wait_s\":%.6f,\"mean_degree_full\":%.6f,"
                 "\"mean_degree_induced\":%.6f,\"mean_degree_static\":%.6f}",
                 (unsigned long long)f.megabatches, (unsigned long long)f.dynamic_parts,
                 (unsigned long long)f.static_nodes, (unsigned long long)f.nodes, f.load_s,
                 f.load_wait_s, full, ind, stc);
        tg_json_raw(j, "megabatch", buf);
    }
    size_t l = line ? strlen(line) : len;
    if (l + 1 < len)
        snprintf(line + l, len - l,
                 "; %llu mega-batches of %llu parts, loaded in %.2f s (waited %.2f s); mean "
                 "in-degree %.2f in the graph, %.2f in the mega-batches + %.2f from the static "
                 "cache",
                 (unsigned long long)f.megabatches, (unsigned long long)f.dynamic_parts, f.load_s,
                 f.load_wait_s, full, ind, stc);
}

/* A training pass (Algorithm 1, lines 10-23): the schedule's mega-batches in order, each loaded
 * while the one before trains (engine/ahead: lines 12-15 pipelined with 16-23), each trained
 * --passes times from RAM. */
static int train_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    int rc = schedule(s, p);
    if (rc < 0) return rc;
    uint64_t limit = limit_of(s, p), nrun, k;
    st->next_batch = p->first_batch;
    if (p->first_batch >= limit) return 0;
    if ((rc = plan_run(s, p->first_batch, limit, &nrun, &k)) < 0) return rc;
    const tg_mb_t *L = s->mb;
    hier_fig_t f = {.rb0 = L->read_bytes, .rq0 = L->reads, .load0 = L->load_s};
    sub_t c = {.s = s, .p = p};
    if ((rc = tg_ahead_start(s->ahead, nrun)) < 0) return rc;
    for (uint64_t q = 0; q < nrun && rc == 0 && !st->stopped && k < limit; q++) {
        void *item;
        double t0 = tg_now();
        rc = tg_ahead_next(s->ahead, NULL, &item);
        f.o.f.load_wait_s += tg_now() - t0;
        if (rc == 0) rc = tg_err(-EIO, "hier: the loader ended early (internal error)");
        if (rc < 0) break;
        tg_megabatch_t *m = item;
        f.o.f.megabatches++;
        f.o.f.nodes += m->nt;
        f.o.f.deg_full += m->deg_full;
        f.o.f.deg_induced += m->deg_induced;
        f.o.f.deg_static += m->deg_static;
        rc = train_mega(s, &c, m, s->run[q], &k, limit, st);
        tg_ahead_release(s->ahead, m);
    }
    if (rc > 0) rc = 0;
    tg_ahead_stop(s->ahead); /* after a stop or an error: the load in progress ends first */
    free(c.ids);
    if (rc == 0 && !st->stopped) st->next_batch = TG_MAX(st->next_batch, limit);
    train_report(s, &c, &f, st);
    return rc;
}

/* ---------------------------------------------------------------- the budget's profile */

/* The budget plan measures the largest of the first batches training runs (engine/budget.c):
 * hier's come from a mega-batch, far smaller than the full graph's neighbourhoods on a graph
 * whose parts cut most edges. So: set up with the dynamic cache given all the budget has left
 * now (more than training will leave it: a mega-batch at least as large as training's, so its
 * batches are at least as large, a subgraph's sampled neighbourhoods being subsets), load the
 * epoch's first mega-batch, sample its first batches, and undo it all. */
static int hier_profile(tg_strategy_t *s, const struct tg_budget_plan_opts *o, tg_batch_t *largest)
{
    tg_budget_t *bg = &s->r->budget;
    memset(largest, 0, sizeof *largest);
    s->prov_left = bg->limit > bg->used ? bg->limit - bg->used : 1;
    int rc = setup(s);
    s->prov_left = 0;
    tg_pass_t p = {.num_seeds = o->plan->num_seeds,
                   .batch_size = o->plan->batch_size,
                   .seed = o->plan->seed,
                   .epoch = o->plan->epoch,
                   .num_layers = o->num_layers,
                   .fanouts = o->fanouts,
                   .sampler = o->sampler,
                   .training = 1};
    if (rc == 0) rc = schedule(s, &p);
    uint64_t i = 0;
    while (rc == 0 && i < s->nmega && !s->sched[i].batches)
        i++;
    if (rc == 0 && i < s->nmega) rc = load_mega(s, &s->mega[0], i);
    if (rc == 0 && i < s->nmega) {
        /* its first batches, with the RNG streams of its first pass */
        const tg_megabatch_t *m = &s->mega[0];
        tg_plan_t mp;
        tg_plan_view(&mp, m->seeds, m->nseeds, p.batch_size, p.seed,
                     tg_hier_sub_epoch(p.epoch, i, 0));
        rc = tg_plan_largest_batch(&mp, m->adj, o->sampler, o->num_layers, o->fanouts, 0, 2,
                                   largest);
    }
    /* the fixed part stays (it is data the run holds); N_d is sized again after the plan */
    megas_release(s);
    s->ready = 0;
    if (rc < 0) tg_batch_free(largest);
    return rc < 0 ? tg_err_prefix(rc, "hier: measuring a mega-batch's batch for the budget") : 0;
}

/* ---------------------------------------------------------------- passes */

static int hier_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    memset(st, 0, sizeof *st);
    st->next_batch = p->first_batch;
    int rc;
    if (p->training) {
        if (!s->ready && (rc = setup(s)) < 0) return rc;
        if ((rc = megas_alloc(s)) < 0) return rc;
        return train_pass(s, p, st);
    }
    megas_release(s);
    if ((rc = setup_eval(s)) < 0) return rc;
    /* evaluation: the original graph and features, no cache */
    tg_xpass_begin(s->ex, &s->stats);
    tg_xpass_ncache_take(s->disk, NULL);
    tg_pipe_opts_t po = tg_xpass_pipe_opts(s->r, p, &s->c->x, s->ex);
    rc = tg_pipe_run(&po, st);
    tg_xpass_end(s->ex, &s->stats, 0, st);
    tg_xpass_ncache_take(s->disk, st);
    return rc;
}

/* What the budget plan may lower where --mem leaves no room (read after it, at the first pass). */
static const char *const hier_shrink[] = {"queue-depth", "sweep-batches", NULL};

int tg_hier_in_flight(const tg_strategy_opts_t *so)
{
    const hier_cfg_t *c = so->cfg;
    return TG_MAX(tg_xpass_in_flight(&c->x),
                  tg_gather_pass_in_flight(so->sampler_threads, PREFETCH));
}

/* Evaluation's batches come from the whole graph, sampled or layer-wise: the mega-batches go
 * either way. */
static void hr_evaluating(tg_strategy_t *s, int layerwise)
{
    (void)layerwise;
    megas_release(s);
}

/* The cost model: each pass loads the mega-batches one after the other on one thread, a
 * mega-batch ahead of the samplers: it reads the partitioned features and lists once,
 * sequentially, with synchronous buffered reads (copied out of the page cache on that thread, at
 * the profile's copy rate),
 * then walks every list entry of its parts to keep those inside the mega-batch
 * (graph/megabatch.c): the reads, the copy and that walk add up on the loader thread (stage_s),
 * which bounds the epoch where training a mega-batch is quicker than loading the next (the few
 * workload: 11 mega-batches of one batch each). Sampling, gathering and training are the
 * mega-batch's batches' (plan_measure's, prof.own) where the partition exists, else the whole
 * graph's scaled by the in-degree kept (unknown: all of it). Without the partition, a streaming
 * partitioning (a few passes over the lists) and the rewrite of features and lists come first,
 * and need their size in free disk. */
#define HIER_STREAM_PASSES 4
static int hier_predict(const tg_cost_inputs_t *in, tg_cost_pred_t *p)
{
    const tg_cost_machine_t *m = &in->machine;
    const tg_cost_own_t *own = &in->prof.own;
    double idx = (double)in->data.edges * in->data.index_bytes, feat = tg_cost_feat_bytes(in);
    double keep = in->prof.induced_degree_frac > 0 ? fmin(in->prof.induced_degree_frac, 1) : 1;
    int have = (in->data.derived & TG_COST_HAVE_PARTS) != 0;
    double share = own->batches > 0 && own->load_share > 0 ? fmin(own->load_share, 1) : 1;
    p->read_bytes = (feat + idx) * share;
    /* its buffered reads' rate where measured (the copy out of the page cache in it) */
    int buffered = m->buffered_bytes_per_s > 0;
    p->io_s = buffered ? p->read_bytes / m->buffered_bytes_per_s : tg_cost_seq_s(m, p->read_bytes);
    /* the mega-batches' row accesses and operations against the whole graph's */
    double acc = keep, ops = keep, all = tg_cost_accesses(in);
    if (own->batches > 0 && all > 0 && in->run.epoch_flops > 0) {
        acc = own->batches * own->rows_per_batch / all;
        ops = own->batches * own->flops_per_batch / in->run.epoch_flops;
    }
    p->sample_s = tg_cost_sample_s(in) * acc;
    /* each row looked up in the static cache's tier, then the mega-batch's: a feature buffer's
     * lookup before the copy (on the ram workload its gather took 1.3x memory's CPU) */
    p->gather_s = tg_cost_buffer_gather_s(in, all * acc, 0);
    /* its steps at the rate timed on its own batch where measured */
    p->compute_s = own->step_flops_per_s > 0 && own->batches > 0
                       ? own->batches * own->flops_per_batch / own->step_flops_per_s
                       : tg_cost_compute_s(in) * ops;
    /* the loader: the copy of what it reads, every list entry walked once per epoch; its CPU is
     * the strategy's own, a gather */
    double filter =
        m->filter_edges_per_s > 0 ? (double)in->data.edges * share / m->filter_edges_per_s : 0;
    double copy = m->copy_bytes_per_s > 0 ? p->read_bytes / m->copy_bytes_per_s : 0;
    p->gather_s += filter + copy;
    /* the loader's time: its measured load rate where a load was timed (prof.own) */
    p->stage_s = own->load_bytes_per_s > 0 ? p->read_bytes / own->load_bytes_per_s
                                           : p->io_s + filter + (buffered ? 0 : copy);
    p->stage_cpu_s = filter + copy;
    if (!have)
        p->prep_s = tg_cost_seq_s(m, HIER_STREAM_PASSES * idx + 2 * (feat + idx)) / in->run.epochs;
    tg_cost_overlap(in, p);
    if (!have && (double)in->run.disk_free < feat + idx)
        tg_cost_infeasible(p, "needs %.1f GiB of free disk for its partitioned copy",
                           (feat + idx) / 1073741824.0);
    else if (!have)
        snprintf(p->why, sizeof p->why,
                 "changes the sampled graph; needs derived partition: +%.1f s amortised over %d "
                 "epochs",
                 p->prep_s * in->run.epochs, in->run.epochs);
    else if (own->batches > 0)
        snprintf(p->why, sizeof p->why,
                 "changes the sampled graph: %.0f mega-batches of %.0f parts keep %.0f%% of the "
                 "in-degree, %.0f rows per batch (whole graph: %.0f)",
                 own->groups, own->group_size, 100 * keep, own->rows_per_batch,
                 in->prof.rows_per_batch);
    else if (keep < 1)
        snprintf(p->why, sizeof p->why,
                 "changes the sampled graph: mega-batches keep %.0f%% of the in-degree",
                 100 * keep);
    else
        snprintf(p->why, sizeof p->why,
                 "changes the sampled graph; its batches not measured (the whole graph's taken)");
    return 0;
}

const tg_strategy_i tg_strategy_hier = {
    .info = {.name = "hier",
             .summary = "HierBatching: min-cut partitions stored contiguously, mega-batches of "
                        "partitions trained from RAM (sampled inside them) while the next loads, "
                        "a static cache of the highest-degree nodes",
             .caps = TG_STRAT_DERIVED | TG_STRAT_CHANGES_GRAPH,
             .opts = hier_opts,
             .num_opts = sizeof hier_opts / sizeof hier_opts[0],
             .config_size = sizeof(hier_cfg_t),
             .example_args = "--mem 48M --parts 16 --dynamic-parts 4 --static-ratio 0.02"},
    .min_bytes = hier_min_bytes,
    .prepare = hier_prepare,
    .open = hier_open,
    .pass = hier_pass,
    .close = hier_close,
    .batches_in_flight = tg_hier_in_flight,
    .predict = hier_predict,
    .plan_measure = tg_hier_plan_measure,
    .in_flight_opts = hier_shrink,
    .epoch_batches = hier_epoch_batches,
    .profile_batch = hier_profile,
    .evaluating = hr_evaluating,
    .report = hier_report,
    .own_add = hier_own_add,
};
