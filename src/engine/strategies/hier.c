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
 * time. A mega-batch reads its parts' rows, old ids and lists with large sequential reads (a
 * part is one run of each file) and forms the subgraph on T ∪ (N(T) ∩ static): T's lists keep
 * the neighbours in T and the static ones (which join the mega-batch), the joining static nodes'
 * lists keep the neighbours in the mega-batch. Its training nodes, shuffled per pass, are cut into
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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../ahead.h"
#include "tiergnn/partition.h"
#include "../xpass.h"
#include "hier.h"

#define NONE UINT32_MAX
#define PREFETCH 1 /* sampling from RAM is quick: a batch ahead per sampler thread */
#define LIST_READ ((uint64_t)4 << 20) /* bytes of neighbour lists read at once */
#define NODES_PER_PART 4096           /* --parts auto: the paper's "several thousand nodes" */

/* ---------------------------------------------------------------- options */

typedef struct {
    tg_xpass_cfg_t x; /* evaluation passes' extraction */
    int64_t parts, method, passes, dynamic_parts;
    double static_ratio;
} hier_cfg_t;

#define H_OPT(n, k, d, lo, hi, a, f, m, h)                                                         \
    {                                                                                              \
        .name = n, .kind = k, .def = d, .min = lo, .max = hi, .auto_ok = a,                        \
        .offset = offsetof(hier_cfg_t, f), .meta = m, .help = h                                    \
    }

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

/* One mega-batch in RAM: T (its parts' nodes, locals [0, nt)) and the static nodes it reached
 * (locals [nt, nm)), their subgraph, rows and original ids, and T's training nodes. */
typedef struct mega {
    uint64_t nt, nm, ne, nseeds;
    uint64_t e_cap;    /* edges indices holds (grows, against the budget) */
    char *feat;        /* nt rows (T); the static ones are in the static cache */
    uint64_t *old_ids; /* nm */
    uint64_t *indptr;  /* nm + 1 */
    uint32_t *indices; /* ne locals */
    uint32_t *sidx;    /* nm - nt: the static index of local nt + j */
    uint64_t *seeds;   /* nseeds locals */
    tg_adj_t *adj;
    uint64_t deg_full, deg_induced, deg_static;
} mega_t;

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
    int fixed_ready;    /* setup_fixed done */
    int ready;          /* setup done: N_d sized */
    uint64_t held;      /* budget reserved by setup_fixed */
    uint64_t mega_held; /* budget of the two mega-batches, while they exist */
    uint64_t prov_left; /* the budget plan's profile: the dynamic cache's provisional room */
    /* training nodes, new ids ascending, and where each part's start */
    uint64_t *train_new, *tp;
    uint64_t ntrain;
    /* the static cache: S nodes (new ids ascending), rows, original ids. A static node's
     * in-neighbours are kept in two halves, so that a mega-batch touches only the edges it keeps:
     * those that are static nodes too, in RAM (s_ip, s_lists: static indices), and the others,
     * by the part they are in (pstat: the derived partstat-* file, per part the pairs (static
     * index, offset in the part) of its nodes' edges into static nodes, read with the part). */
    uint64_t S;
    uint64_t *s_new, *s_old, *s_ip;
    uint32_t *s_lists;
    uint64_t ss_edges, ss_cap; /* s_lists' entries, and its room */
    char *s_feat;
    uint32_t *s_rank;      /* per 64 new ids: the static nodes before them */
    uint32_t *s_local;     /* while a mega-batch loads: the local id given to a static node */
    uint64_t *s_cur;       /* while a mega-batch loads: a joined static node's edge count/cursor */
    uint64_t *s_join;      /* while a mega-batch loads: the static nodes that joined (bitmap) */
    uint32_t *s_jrank;     /* per 64 static nodes: the joined ones before them */
    uint64_t static_edges; /* in the static nodes' lists */
    uint64_t *psize, *pedge; /* the parts' nodes and edges, each largest first */
    tg_derived_file_t *pstat;
    uint64_t *ps_off;   /* P + 1: the pairs before part k in pstat (after these offsets) */
    uint64_t *pspairs;  /* the parts' pairs, largest first */
    uint32_t *pairs;    /* the loading mega-batch's pairs (2 u32 each) */
    uint64_t pairs_cap; /* its room: the N_d largest parts' pairs */
    /* the dynamic cache */
    uint64_t nd; /* parts per mega-batch */
    uint64_t t_cap, e_cap, seeds_cap;
    mega_t mega[2];
    int32_t *slot;              /* while a mega-batch loads: per part, its first local (or -1) */
    uint64_t *in_t, *is_static; /* bitmaps over new ids: in the loading T; in the static cache */
    uint64_t *ipbuf;
    uint32_t *lbuf;
    uint64_t ipbuf_cap;
    /* the epoch's schedule */
    uint64_t sched_epoch;
    int sched_valid;
    uint32_t *order; /* parts, shuffled */
    sched_mega_t *sched;
    uint64_t nmega, epoch_batches;
    /* loading: mega-batch k + 1 on engine/ahead's thread while k trains; the loader's figures */
    tg_ahead_t *ahead;
    uint64_t *run; /* a training pass's mega-batches in order (set before the loader starts) */
    uint64_t read_bytes, reads;
    double load_s;
};

/* ---------------------------------------------------------------- small helpers */

/* Bits set in x. Without -mpopcnt, __builtin_popcountll is a call into libgcc, and the loader
 * ranks a few hundred million ids an epoch at 100 M nodes: 12% of its time went to the call. */
static inline uint32_t pop64(uint64_t x)
{
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* The static index of new id v (its rank among the static nodes, which are sorted by new id),
 * or NONE: a bit test and a popcount, no probing. */
static uint32_t static_find(const tg_strategy_t *s, uint64_t v)
{
    uint64_t w = s->is_static[v >> 6];
    if (!((w >> (v & 63)) & 1)) return NONE;
    return s->s_rank[v >> 6] + (uint32_t)pop64(w & ((1ull << (v & 63)) - 1));
}

/* Reads payload bytes of a derived file and drops them from the page cache (a cgroup counts
 * it): the mega-batches are read once per epoch, sequentially. */
static int rd(tg_strategy_t *s, const tg_derived_file_t *f, void *buf, uint64_t len, uint64_t off)
{
    if (!len) return 0;
    int rc = tg_derived_read(f, buf, len, off);
    (void)posix_fadvise(f->fd, (off_t)(f->payload_off + off), (off_t)len, POSIX_FADV_DONTNEED);
    s->read_bytes += len;
    s->reads++;
    return rc;
}

static uint64_t rd_id(const tg_strategy_t *s, const void *a, uint64_t i)
{
    return s->part->index_bytes == 4 ? ((const uint32_t *)a)[i] : ((const uint64_t *)a)[i];
}

/* The epoch' of mega-batch i, pass j: the RNG streams of its shuffles and batches. Training
 * epochs stay far below evaluation's (graph/plan.c: near UINT64_MAX). */
static uint64_t sub_epoch(uint64_t epoch, uint64_t i, uint64_t j)
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

/* The params of the partition to use: with method auto, one already built (METIS's first),
 * else what auto resolves to. */
static int find_params(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *buf, size_t len,
                       tg_part_assign_opts_t *a)
{
    assign_opts(so, ds, a);
    if (a->method == TG_PART_AUTO) {
        const tg_part_method_t try[2] = {TG_PART_METIS, TG_PART_STREAM};
        for (int i = 0; i < 2; i++) {
            tg_part_t *p = NULL;
            int rc = tg_part_params(a, try[i], buf, len);
            if (rc == 0 && tg_part_open(&p, ds, buf) == 0) {
                tg_part_close(p);
                a->method = try[i];
                return 0;
            }
        }
        char why[256];
        a->method = tg_part_resolve(ds, a, why, sizeof why);
    }
    return tg_part_params(a, a->method, buf, len);
}

static int hier_prepare(const tg_dataset_t *ds, const tg_strategy_opts_t *so)
{
    tg_part_build_opts_t o = {0};
    char params[256];
    int rc = find_params(ds, so, params, sizeof params, &o.assign);
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

static void mega_free(mega_t *m)
{
    tg_adj_destroy(m->adj);
    free(m->feat);
    free(m->old_ids);
    free(m->indptr);
    free(m->indices);
    free(m->sidx);
    free(m->seeds);
    memset(m, 0, sizeof *m);
}

static void megas_release(tg_strategy_t *s);

/* Undoes setup: every cache, map and buffer freed, its budget released. */
static void teardown(tg_strategy_t *s)
{
    megas_release(s);
    tg_extract_destroy(s->ex);
    s->ex = NULL;
    tg_tier_destroy(s->eval_tier); /* after the extraction that asks it, before s_feat */
    s->eval_tier = NULL;
    free(s->train_new), free(s->tp), free(s->s_new), free(s->s_old), free(s->s_ip);
    free(s->s_lists), free(s->s_feat), free(s->s_rank), free(s->s_local), free(s->s_cur);
    free(s->ps_off), free(s->pspairs), free(s->s_join), free(s->s_jrank);
    s->s_join = NULL;
    s->s_jrank = NULL;
    tg_derived_close(s->pstat);
    s->pstat = NULL;
    s->ps_off = s->pspairs = s->s_cur = NULL;
    s->ss_edges = s->ss_cap = 0;
    free(s->slot), free(s->ipbuf), free(s->lbuf), free(s->order), free(s->sched);
    free(s->in_t), free(s->is_static), free(s->psize), free(s->pedge);
    s->in_t = s->is_static = s->psize = s->pedge = NULL;
    s->train_new = s->tp = s->s_new = s->s_old = s->s_ip = NULL;
    s->s_lists = s->s_local = s->s_rank = NULL;
    s->s_feat = NULL;
    s->slot = NULL;
    s->ipbuf = NULL;
    s->lbuf = NULL;
    s->order = NULL;
    s->sched = NULL;
    s->S = 0;
    if (s->held) tg_budget_release(&s->r->budget, s->held);
    s->held = 0;
    s->ready = s->fixed_ready = 0;
    s->sched_valid = 0;
}

static void hier_close(tg_strategy_t *s)
{
    if (!s) return;
    tg_ahead_close(s->ahead);
    teardown(s);
    free(s->run);
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
    if (rc == 0) rc = find_params(r->ds, so, s->params, sizeof s->params, &a);
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

/* ---------------------------------------------------------------- setup */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_desc(const void *a, const void *b)
{
    return -cmp_u64(a, b);
}

/* New ids of the training nodes and of the static nodes (given as old ids): one sequential pass
 * over new_of_old. */
static int to_new_ids(tg_strategy_t *s, uint64_t *ids, uint64_t n)
{
    /* ids sorted by old id with their positions, so one sweep of the map serves them */
    uint64_t *pos = malloc(n * 2 * sizeof *pos + 1);
    if (!pos) return tg_err(-ENOMEM, "hier: out of memory");
    for (uint64_t i = 0; i < n; i++)
        pos[2 * i] = ids[i], pos[2 * i + 1] = i;
    qsort(pos, n, 2 * sizeof *pos, cmp_u64);
    const tg_part_t *p = s->part;
    uint64_t chunk = (4u << 20) / 8;
    uint64_t *buf = malloc(chunk * 8);
    int rc = buf ? 0 : tg_err(-ENOMEM, "hier: out of memory");
    uint64_t k = 0;
    for (uint64_t lo = 0; rc == 0 && lo < s->N && k < n; lo += chunk) {
        uint64_t hi = TG_MIN(s->N, lo + chunk);
        if (pos[2 * k] >= hi) continue;
        /* new ids checked to be nodes: they index the bitmaps and the parts */
        rc = tg_part_new_ids(p, lo, hi - lo, buf);
        (void)posix_fadvise(p->map->fd,
                            (off_t)(p->map->payload_off + p->new_of_old_off + lo * p->id_bytes),
                            (off_t)((hi - lo) * p->id_bytes), POSIX_FADV_DONTNEED);
        s->read_bytes += (hi - lo) * p->id_bytes, s->reads++;
        for (; rc == 0 && k < n && pos[2 * k] < hi; k++)
            ids[pos[2 * k + 1]] = buf[pos[2 * k] - lo];
    }
    free(buf);
    free(pos);
    return rc;
}

/* The S highest in-degree nodes (ties: lower id), as old ids. */
static int top_degree(tg_strategy_t *s, uint64_t S, uint64_t *out)
{
    const uint64_t *ip = s->disk->indptr;
    uint64_t maxd = 0;
    for (uint64_t v = 0; v < s->N; v++)
        maxd = TG_MAX(maxd, ip[v + 1] - ip[v]);
    /* the threshold degree from a histogram of degrees (capped) */
    uint64_t cap = TG_MIN(maxd, (uint64_t)1 << 20) + 1;
    uint64_t *hist = calloc(cap, sizeof *hist);
    if (!hist) return tg_err(-ENOMEM, "hier: out of memory");
    for (uint64_t v = 0; v < s->N; v++)
        hist[TG_MIN(ip[v + 1] - ip[v], cap - 1)]++;
    uint64_t thr = cap - 1, above = 0;
    while (thr > 0 && above + hist[thr] < S)
        above += hist[thr--];
    free(hist);
    uint64_t n = 0;
    for (uint64_t v = 0; v < s->N && n < S; v++)
        if (TG_MIN(ip[v + 1] - ip[v], cap - 1) > thr) out[n++] = v;
    for (uint64_t v = 0; v < s->N && n < S; v++)
        if (TG_MIN(ip[v + 1] - ip[v], cap - 1) == thr) out[n++] = v;
    return 0;
}

/* Bytes of one mega-batch buffer for these caps. */
static uint64_t mega_bytes(const tg_strategy_t *s, uint64_t t, uint64_t e, uint64_t seeds)
{
    uint64_t m = t + s->S;
    return t * s->row + m * 8 + (m + 1) * 8 + e * 4 + s->S * 4 + seeds * 8;
}

/* The dynamic cache for mega-batches of t nodes, e edges of T's lists and np static pairs:
 * two mega-batches, each with room for every edge it can keep, and one pair buffer. */
static uint64_t dyn_bytes(const tg_strategy_t *s, uint64_t t, uint64_t e, uint64_t np)
{
    return 2 * mega_bytes(s, t, e + np + s->ss_edges, TG_MIN(t, s->ntrain)) + np * 8;
}

/* The two mega-batch buffers and their budget: allocated for training passes, released for
 * evaluation (tg_strategy_i.evaluating, and an evaluation pass that comes without it), whose
 * batches (sampled from the whole graph, larger than the budget plan measured for hier) and
 * layer-wise passes take their room. */
static int megas_alloc(tg_strategy_t *s)
{
    if (s->mega_held) return 0;
    uint64_t mb = mega_bytes(s, s->t_cap, s->e_cap, s->seeds_cap);
    int rc = tg_budget_reserve(&s->r->budget, 2 * mb + s->pairs_cap * 8, "hier: two mega-batches");
    if (rc < 0) return rc;
    s->mega_held = 2 * mb + s->pairs_cap * 8;
    if (!(s->pairs = malloc(s->pairs_cap * 8 + 8)))
        return tg_err(-ENOMEM, "hier: out of memory for a mega-batch's static pairs");
    for (int i = 0; i < 2; i++) {
        mega_t *m = &s->mega[i];
        uint64_t mm = s->t_cap + s->S;
        m->feat = malloc(s->t_cap * s->row + 1);
        m->old_ids = malloc(mm * 8 + 8);
        m->indptr = malloc((mm + 1) * 8);
        m->indices = malloc(s->e_cap * 4 + 4);
        m->e_cap = s->e_cap;
        m->sidx = malloc(s->S * 4 + 4);
        m->seeds = malloc(s->seeds_cap * 8 + 8);
        if (!m->feat || !m->old_ids || !m->indptr || !m->indices || !m->sidx || !m->seeds)
            return tg_err(-ENOMEM, "hier: out of memory for a mega-batch");
    }
    return 0;
}

static void megas_release(tg_strategy_t *s)
{
    for (int i = 0; i < 2; i++)
        mega_free(&s->mega[i]);
    free(s->pairs);
    s->pairs = NULL;
    if (s->mega_held) tg_budget_release(&s->r->budget, s->mega_held);
    s->mega_held = 0;
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

/* ---------------------------------------------------------------- the static nodes' lists */

/* fn(s, ctx, si, raw, n): n entries of static node si's in-neighbour list (the partadj file's
 * width: rd_id), each checked to name a node. */
typedef int (*list_fn)(tg_strategy_t *s, void *ctx, uint32_t si, const void *raw, uint64_t n);

/* Calls fn on every static node's list (static index ascending), LIST_READ at a time and at
 * least once per node (n = 0 for an empty list); with a progress bar when what is given. */
static int each_static_list(tg_strategy_t *s, const char *what, list_fn fn, void *ctx)
{
    tg_part_t *p = s->part;
    tg_progress_t pg;
    if (what) tg_progress_begin(&pg, what, s->S, "nodes");
    uint64_t seen = 0;
    int rc = 0;
    for (uint64_t i = 0; i < s->S && rc == 0; i++) {
        uint64_t be[2];
        if ((rc = rd(s, p->adj, be, 16, s->s_new[i] * 8)) < 0 ||
            (rc = tg_part_check_indptr(p, s->s_new[i], 2, be)) < 0)
            break;
        uint64_t len = be[1] - be[0];
        if (be[1] < be[0] || len > s->static_edges - seen) {
            rc = tg_err(-EINVAL, "%s: the static nodes' lists hold more than indptr.bin says",
                        p->adj->path);
            break;
        }
        seen += len;
        uint64_t done = 0;
        do {
            uint64_t n = TG_MIN(len - done, LIST_READ / p->index_bytes);
            if (n)
                rc = rd(s, p->adj, s->lbuf, n * p->index_bytes,
                        p->indices_off + (be[0] + done) * p->index_bytes);
            if (rc == 0) rc = tg_part_check_indices(p, be[0] + done, n, s->lbuf);
            if (rc == 0) rc = fn(s, ctx, (uint32_t)i, s->lbuf, n);
            done += n;
        } while (rc == 0 && done < len);
        if (what && (i & 1023) == 0) tg_progress_update(&pg, i, NULL);
    }
    if (what) {
        if (rc == 0) tg_progress_update(&pg, s->S, NULL);
        tg_progress_end(&pg);
    }
    return rc;
}

/* The RAM half: a static node's in-neighbours that are static too, as static indices. */
static int keep_static(tg_strategy_t *s, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    (void)ctx;
    for (uint64_t j = 0; j < n; j++) {
        uint32_t sj = static_find(s, rd_id(s, raw, j));
        if (sj == NONE) continue;
        if (s->ss_edges == s->ss_cap) {
            uint64_t add = TG_MAX(s->ss_cap / 2, (uint64_t)1 << 16);
            int rc = tg_budget_reserve(&s->r->budget, add * 4, "hier: the static cache's lists");
            if (rc < 0) return rc;
            s->held += add * 4;
            uint32_t *l = realloc(s->s_lists, (s->ss_cap + add) * 4);
            if (!l) return tg_err(-ENOMEM, "hier: out of memory for the static cache's lists");
            s->s_lists = l;
            s->ss_cap += add;
        }
        s->s_lists[s->ss_edges++] = sj;
    }
    s->s_ip[si + 1] = s->ss_edges;
    return 0;
}

/* partstat's payload: (P + 1) u64, the pairs before part k, then the pairs, 2 u32 each (static
 * index, the in-neighbour's offset in its part); within a part, by static index and list order.
 * Built in windows: a window's pairs, counting-sorted by part, go out as one positional write per
 * part (the layout of part_build's rewrites). */
typedef struct {
    tg_derived_writer_t *w;
    uint64_t cap, n, hdr, unflushed;
    uint32_t *key, *pr, *out; /* cap parts; 2 cap pairs; 2 cap sorted pairs */
    uint64_t *wc, *cur;       /* P + 1 window counts; P + 1 write cursors (in pairs) */
} pwin_t;

static int count_pairs(tg_strategy_t *s, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    (void)si;
    uint64_t *cnt = ctx;
    for (uint64_t j = 0; j < n; j++)
        cnt[tg_part_of(s->part, rd_id(s, raw, j)) + 1]++;
    return 0;
}

static int pwin_flush(tg_strategy_t *s, pwin_t *w)
{
    uint32_t P = s->P;
    memset(w->wc, 0, (P + 1) * sizeof *w->wc);
    for (uint64_t x = 0; x < w->n; x++)
        w->wc[w->key[x] + 1]++;
    for (uint32_t k = 0; k < P; k++)
        w->wc[k + 1] += w->wc[k];
    for (uint64_t x = 0; x < w->n; x++) { /* stable; afterwards wc[k] is part k's end */
        uint64_t y = w->wc[w->key[x]]++;
        w->out[2 * y] = w->pr[2 * x], w->out[2 * y + 1] = w->pr[2 * x + 1];
    }
    int rc = 0;
    for (uint32_t k = 0; k < P && rc == 0; k++) {
        uint64_t b = k ? w->wc[k - 1] : 0, en = w->wc[k];
        if (en > b) {
            rc = tg_derived_pwrite(w->w, w->out + 2 * b, (en - b) * 8, w->hdr + w->cur[k] * 8);
            w->cur[k] += en - b;
        }
    }
    w->unflushed += w->n * 8;
    w->n = 0;
    if (rc == 0 && w->unflushed >= ((uint64_t)256 << 20)) {
        rc = tg_derived_flush(w->w);
        w->unflushed = 0;
    }
    return rc;
}

static int add_pairs(tg_strategy_t *s, void *ctx, uint32_t si, const void *raw, uint64_t n)
{
    pwin_t *w = ctx;
    for (uint64_t j = 0; j < n; j++) {
        uint64_t u = rd_id(s, raw, j);
        uint32_t k = tg_part_of(s->part, u);
        w->key[w->n] = k;
        w->pr[2 * w->n] = si, w->pr[2 * w->n + 1] = (uint32_t)(u - s->part->pp[k]);
        if (++w->n == w->cap) {
            int rc = pwin_flush(s, w);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* Builds partstat for these params: two passes over the static nodes' lists (count, write), in
 * windows of what the budget leaves (at most 320 MiB, 20 bytes a pair). */
static int build_pstat(tg_strategy_t *s, const char *params)
{
    uint32_t P = s->P;
    tg_budget_t *bg = &s->r->budget;
    uint64_t left = bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 0) : UINT64_MAX;
    uint64_t cap = TG_MIN(TG_MAX(left / 2 / 20, (uint64_t)1 << 16), (uint64_t)1 << 24);
    uint64_t tmp = cap * 20 + (P + 1) * 8 * 2 + ((uint64_t)16 << 20);
    int rc = tg_budget_reserve(bg, tmp, "hier: building the static pairs (partstat)");
    if (rc < 0) return rc;
    double t0 = tg_now();
    pwin_t w = {.cap = cap, .hdr = (P + 1) * 8};
    w.key = malloc(cap * 4);
    w.pr = malloc(cap * 8);
    w.out = malloc(cap * 8);
    w.wc = calloc(P + 1, 8);
    w.cur = calloc(P + 1, 8);
    if (!w.key || !w.pr || !w.out || !w.wc || !w.cur)
        rc = tg_err(-ENOMEM, "hier: out of memory building the static pairs");
    /* the header: the pairs before each part (counted in cur, then made a prefix sum) */
    if (rc == 0) rc = each_static_list(s, "hier: static pairs, counting", count_pairs, w.cur);
    for (uint32_t k = 0; rc == 0 && k < P; k++)
        w.cur[k + 1] += w.cur[k];
    if (rc == 0) rc = tg_derived_create(&w.w, s->r->ds, NULL, "partstat", params, 0);
    if (rc == 0) rc = tg_derived_pwrite(w.w, w.cur, (P + 1) * 8, 0);
    if (rc == 0) rc = tg_derived_set_size(w.w, w.hdr + w.cur[P] * 8);
    if (rc == 0) rc = each_static_list(s, "hier: static pairs, writing", add_pairs, &w);
    if (rc == 0 && w.n) rc = pwin_flush(s, &w);
    if (w.w) rc = rc < 0 ? (tg_derived_abort(w.w), rc) : tg_derived_commit(w.w);
    if (rc == 0)
        tg_log_info("hier: static pairs (partstat, %llu pairs) built in %.1f s",
                    (unsigned long long)s->static_edges, tg_now() - t0);
    free(w.key), free(w.pr), free(w.out), free(w.wc), free(w.cur);
    tg_budget_release(bg, tmp);
    return rc;
}

/* partstat opened (built when missing or stale) and its part offsets read and checked. */
static int open_pstat(tg_strategy_t *s)
{
    uint32_t P = s->P;
    char params[TG_DERIVED_PARAMS_MAX + 1];
    int n = snprintf(params, sizeof params, "%s,static=%llu", s->params, (unsigned long long)s->S);
    if (n < 0 || (size_t)n >= sizeof params)
        return tg_err(-ENAMETOOLONG, "hier: partstat's parameters are too long");
    int rc = tg_derived_open(&s->pstat, s->r->ds, NULL, "partstat", params, 0);
    if (rc == -ENOENT || rc == -ESTALE) {
        if (rc == -ESTALE) tg_log_info("hier: rebuilding partstat: %s", tg_errmsg());
        if ((rc = build_pstat(s, params)) == 0)
            rc = tg_derived_open(&s->pstat, s->r->ds, NULL, "partstat", params, 0);
    }
    if (rc < 0) return tg_err_prefix(rc, "hier: the static pairs");
    if ((rc = rd(s, s->pstat, s->ps_off, (P + 1) * 8, 0)) < 0) return rc;
    for (uint32_t k = 0; k < P; k++) {
        if (s->ps_off[k + 1] < s->ps_off[k])
            return tg_err(-EINVAL, "%s: part %u's pairs end before they start", s->pstat->path, k);
        s->pspairs[k] = s->ps_off[k + 1] - s->ps_off[k];
    }
    if (s->ps_off[0] != 0 || s->ps_off[P] != s->static_edges ||
        s->pstat->payload_len != (P + 1) * 8 + s->ps_off[P] * 8)
        return tg_err(-EINVAL,
                      "%s: %llu pairs in %llu payload bytes, expected the static nodes' %llu "
                      "edges",
                      s->pstat->path, (unsigned long long)s->ps_off[P],
                      (unsigned long long)s->pstat->payload_len,
                      (unsigned long long)s->static_edges);
    qsort(s->pspairs, P, sizeof *s->pspairs, cmp_desc);
    return 0;
}

/* The static cache's nodes (s->s_new holds their old ids on entry): old ids kept, new ids
 * sorted, their rows read (checked under --verify-reads), their bitmap and ranks, their lists
 * (the static-to-static half in RAM, the rest by part in partstat), and the evaluation passes'
 * tier over their rows. */
static int static_cache_fill(tg_strategy_t *s)
{
    tg_part_t *p = s->part;
    tg_budget_t *bg = &s->r->budget;
    uint64_t S = s->S;
    int rc = 0;
    memcpy(s->s_old, s->s_new, S * sizeof *s->s_new);
    if ((rc = to_new_ids(s, s->s_new, S)) < 0) return rc;
    /* sort (new, old) pairs by new id */
    uint64_t *pairs = malloc(2 * S * sizeof *pairs);
    if (!pairs) return tg_err(-ENOMEM, "hier: out of memory");
    for (uint64_t i = 0; i < S; i++)
        pairs[2 * i] = s->s_new[i], pairs[2 * i + 1] = s->s_old[i];
    qsort(pairs, S, 2 * sizeof *pairs, cmp_u64);
    for (uint64_t i = 0; i < S; i++)
        s->s_new[i] = pairs[2 * i], s->s_old[i] = pairs[2 * i + 1];
    free(pairs);
    for (uint64_t i = 0; i < S && rc == 0; i++) {
        uint64_t v = s->s_new[i];
        rc = rd(s, p->feat, s->s_feat + i * s->row, s->row, v * s->row);
        /* --verify-reads: partfeat's rows are copies of features.bin's, by original id */
        if (rc == 0)
            rc = tg_rowcrc_check(s->r->rowcrc, s->s_old[i], s->s_feat + i * s->row, p->feat->path,
                                 p->feat->payload_off + v * s->row);
        s->is_static[v >> 6] |= 1ull << (v & 63);
    }
    if (rc < 0) return rc;
    /* ranks: the static index of a node is the static nodes before it (s_new ascending) */
    uint32_t acc = 0;
    for (uint64_t w = 0; w < (s->N + 63) / 64; w++) {
        s->s_rank[w] = acc;
        acc += (uint32_t)pop64(s->is_static[w]);
    }
    /* the lists: the static-to-static half in RAM, the rest by part on disk */
    if ((rc = each_static_list(s, NULL, keep_static, NULL)) < 0) return rc;
    if ((rc = open_pstat(s)) < 0) return rc;
    /* evaluation passes sample the whole graph: the static rows, the most often sampled
     * (highest degree), come from RAM there too (an extraction made before, for an
     * evaluation first, has no tier: made again) */
    if ((rc = tg_tier_borrow_create(&s->eval_tier, "hier-static", s->s_feat, s->row, s->s_old, S,
                                    s->N, bg)) < 0)
        return tg_err_prefix(rc, "hier");
    tg_extract_destroy(s->ex);
    s->ex = NULL;
    return 0;
}

/* The parts' sizes and edge counts, each largest first (a mega-batch's caps come from the
 * largest parts), and the largest part's size. */
static int part_sizes(tg_strategy_t *s, uint64_t *max_part)
{
    tg_part_t *p = s->part;
    uint32_t P = s->P;
    int rc = 0;
    *max_part = 0;
    s->psize = malloc(P * sizeof *s->psize + 1);
    s->pedge = malloc(P * sizeof *s->pedge + 1);
    uint64_t *ipb = malloc((P + 1) * sizeof *ipb);
    if (!s->psize || !s->pedge || !ipb) {
        free(ipb);
        return tg_err(-ENOMEM, "hier: out of memory");
    }
    for (uint32_t k = 0; k <= P && rc == 0; k++) {
        rc = rd(s, p->adj, ipb + k, 8, p->pp[k] * 8);
        if (rc == 0) rc = tg_part_check_indptr(p, p->pp[k], 1, ipb + k);
        if (rc == 0 && k && ipb[k] < ipb[k - 1])
            rc = tg_err(-EINVAL, "%s: indptr[%llu] = %llu, below indptr[%llu] = %llu", p->adj->path,
                        (unsigned long long)p->pp[k], (unsigned long long)ipb[k],
                        (unsigned long long)p->pp[k - 1], (unsigned long long)ipb[k - 1]);
    }
    for (uint32_t k = 0; k < P && rc == 0; k++) {
        s->psize[k] = p->pp[k + 1] - p->pp[k];
        s->pedge[k] = ipb[k + 1] - ipb[k];
        *max_part = TG_MAX(*max_part, s->psize[k]);
    }
    free(ipb);
    if (rc < 0) return rc;
    qsort(s->psize, P, sizeof *s->psize, cmp_desc);
    qsort(s->pedge, P, sizeof *s->pedge, cmp_desc);
    return 0;
}

/* What does not depend on N_d, set up once: evaluation's extraction, the parts' sizes, the
 * training nodes by part, the static cache (rows, lists, bitmap and ranks) and the loading's
 * maps. The budget's profile keeps it: only the mega-batches are sized again after the plan. */
static int setup_fixed(tg_strategy_t *s)
{
    if (s->fixed_ready) return 0;
    tg_run_t *r = s->r;
    const hier_cfg_t *c = s->c;
    tg_budget_t *bg = &r->budget;
    tg_part_t *p = s->part;
    uint32_t P = s->P;
    s->ntrain = r->split_n[0];
    uint64_t S = c->static_ratio > 0 ? (uint64_t)((double)s->N * c->static_ratio + 0.5) : 0;
    S = TG_MIN(S, s->N);
    uint64_t max_part;
    int rc = part_sizes(s, &max_part);
    if (rc < 0) return rc;
    /* the static nodes: degrees from the original indptr; their lists' lengths are the same */
    uint64_t *sids = S ? malloc(S * sizeof *sids) : NULL;
    if (S && !sids) return tg_err(-ENOMEM, "hier: out of memory");
    if (S && (rc = top_degree(s, S, sids)) < 0) {
        free(sids);
        return rc;
    }
    uint64_t static_edges = 0;
    for (uint64_t i = 0; i < S; i++)
        static_edges += s->disk->indptr[sids[i] + 1] - s->disk->indptr[sids[i]];
    /* reserved: the parts' sizes, training nodes (new ids, per part), the parts' order and
     * slots, the parts' pairs (offsets, sizes), the static cache (rows, ids, list bounds,
     * locals, cursors; its static-to-static lists as they grow), the bitmaps and ranks, the
     * list-reading buffers */
    s->ipbuf_cap = max_part + 1;
    uint64_t fixed = P * 16 + s->ntrain * 8 + (P + 1) * 8 + P * (4 + 4) + (P + 1) * 8 + P * 8 +
                     S * (s->row + 8 + 8 + 8 + 4 + 8) + (S + 63) / 64 * (8 + 4) +
                     (s->N + 63) / 64 * (8 + 8 + 4) + s->ipbuf_cap * 8 + LIST_READ;
    if ((rc = tg_budget_reserve(bg, fixed, "hier: static cache and maps")) < 0) {
        free(sids);
        return rc;
    }
    s->held += fixed;
    s->S = S;
    s->static_edges = static_edges;
    s->s_new = sids; /* old ids until to_new_ids below */
    s->train_new = malloc(s->ntrain * sizeof *s->train_new + 1);
    s->tp = calloc(P + 1, sizeof *s->tp);
    s->slot = malloc(P * sizeof *s->slot + 1);
    s->in_t = calloc((s->N + 63) / 64, 8);
    s->is_static = calloc((s->N + 63) / 64, 8);
    s->ipbuf = malloc(s->ipbuf_cap * sizeof *s->ipbuf);
    s->lbuf = malloc(LIST_READ);
    s->s_old = malloc(S * sizeof *s->s_old + 1);
    s->s_ip = calloc(S + 1, sizeof *s->s_ip);
    s->s_feat = malloc(S * s->row + 1);
    s->s_local = malloc(S * sizeof *s->s_local + 1);
    s->s_cur = malloc(S * sizeof *s->s_cur + 1);
    s->s_join = malloc((S + 63) / 64 * sizeof *s->s_join + 1);
    s->s_jrank = malloc((S + 63) / 64 * sizeof *s->s_jrank + 1);
    s->s_rank = malloc((s->N + 63) / 64 * sizeof *s->s_rank + 1);
    s->ps_off = calloc(P + 1, sizeof *s->ps_off);
    s->pspairs = calloc(P + 1, sizeof *s->pspairs);
    if (!s->train_new || !s->tp || !s->slot || !s->in_t || !s->is_static || !s->ipbuf || !s->lbuf ||
        !s->s_old || !s->s_ip || !s->s_feat || !s->s_local || !s->s_cur || !s->s_join ||
        !s->s_jrank || !s->s_rank || !s->ps_off || !s->pspairs)
        return tg_err(-ENOMEM, "hier: out of memory for the static cache and the maps");
    for (uint32_t k = 0; k < P; k++)
        s->slot[k] = -1;
    for (uint64_t i = 0; i < S; i++)
        s->s_local[i] = NONE;
    /* the training nodes */
    memcpy(s->train_new, r->split[0], s->ntrain * sizeof *s->train_new);
    if ((rc = to_new_ids(s, s->train_new, s->ntrain)) < 0) return rc;
    qsort(s->train_new, s->ntrain, sizeof *s->train_new, cmp_u64);
    for (uint64_t i = 0; i < s->ntrain; i++)
        s->tp[tg_part_of(p, s->train_new[i]) + 1]++;
    for (uint32_t k = 0; k < P; k++)
        s->tp[k + 1] += s->tp[k];
    if (S && (rc = static_cache_fill(s)) < 0) return rc;
    if ((rc = setup_eval(s)) < 0) return rc;
    s->fixed_ready = 1;
    return 0;
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
    uint64_t S = s->S;
    char a[32], b[32], d[32], e[32];
    uint64_t left = bg->limit ? (bg->limit > bg->used ? bg->limit - bg->used : 0) : 0;
    if (s->prov_left) left = TG_MIN(left, s->prov_left);
    uint64_t nd = 0, t = 0, ed = 0, np = 0;
    uint64_t want = c->dynamic_parts > 0 ? TG_MIN((uint64_t)c->dynamic_parts, (uint64_t)P)
                    : bg->limit          ? P
                                         : TG_MAX((uint64_t)1, (P + 7) / 8);
    while (nd < want) {
        uint64_t t2 = t + s->psize[nd], e2 = ed + s->pedge[nd], np2 = np + s->pspairs[nd];
        if (bg->limit && dyn_bytes(s, t2, e2, np2) > left) break;
        t = t2, ed = e2, np = np2, nd++;
    }
    if (nd == 0 || (c->dynamic_parts > 0 && nd < want)) {
        uint64_t t1 = nd ? t : s->psize[0], e1 = nd ? ed : s->pedge[0];
        uint64_t np1 = nd ? np : s->pspairs[0];
        return tg_err(-ENOMEM,
                      "hier: --mem leaves %s for the dynamic cache after the static cache (%llu "
                      "nodes, %s), but two mega-batches of %llu part(s) need %s: raise --mem, "
                      "lower --static-ratio or --dynamic-parts, or use more --parts",
                      tg_fmt_bytes(left, a, sizeof a), (unsigned long long)S,
                      tg_fmt_bytes(s->held, b, sizeof b), (unsigned long long)(nd ? want : 1),
                      tg_fmt_bytes(dyn_bytes(s, t1, e1, np1), d, sizeof d));
    }
    s->nd = nd;
    s->sched_valid = 0; /* a schedule cuts the parts into mega-batches of N_d */
    s->t_cap = t;
    /* exact bounds: T's edges, its parts' pairs, the static-to-static edges */
    s->e_cap = ed + np + s->ss_edges;
    s->pairs_cap = np;
    s->seeds_cap = TG_MIN(t, s->ntrain);
    if ((rc = megas_alloc(s)) < 0) return rc;
    tg_log_info("hier: %u parts (%s), %llu per mega-batch (%s each, two in RAM); static cache "
                "%llu nodes (%.2f%%, %s with %llu in-edges, %llu of them from static nodes)",
                P, s->params, (unsigned long long)s->nd,
                tg_fmt_bytes(s->mega_held / 2, a, sizeof a), (unsigned long long)S,
                s->N ? 100.0 * (double)S / (double)s->N : 0.0,
                tg_fmt_bytes(S * s->row, e, sizeof e), (unsigned long long)s->static_edges,
                (unsigned long long)s->ss_edges);
    s->ready = 1;
    return 0;
}

/* ---------------------------------------------------------------- the schedule */

static int schedule(tg_strategy_t *s, const tg_pass_t *p)
{
    if (s->sched_valid && s->sched_epoch == p->epoch) return 0;
    uint32_t P = s->P;
    if (!s->order && !(s->order = malloc(P * sizeof *s->order)))
        return tg_err(-ENOMEM, "hier: out of memory");
    uint64_t *tmp = malloc(P * sizeof *tmp);
    if (!tmp) return tg_err(-ENOMEM, "hier: out of memory");
    for (uint32_t k = 0; k < P; k++)
        tmp[k] = k;
    /* the parts' shuffle: its own stream (the top bit keeps it apart from the batches') */
    tg_sampler_shuffle_epoch(tmp, P, p->seed, p->epoch | (1ull << 63));
    for (uint32_t k = 0; k < P; k++)
        s->order[k] = (uint32_t)tmp[k];
    free(tmp);
    s->nmega = (P + s->nd - 1) / s->nd;
    free(s->sched);
    if (!(s->sched = calloc(s->nmega, sizeof *s->sched))) return tg_err(-ENOMEM, "out of memory");
    uint64_t B = p->batch_size, passes = (uint64_t)s->c->passes, total = 0;
    for (uint64_t i = 0; i < s->nmega; i++) {
        sched_mega_t *m = &s->sched[i];
        for (uint64_t k = i * s->nd; k < TG_MIN((uint64_t)P, (i + 1) * s->nd); k++) {
            uint32_t q = s->order[k];
            m->ntrain += s->tp[q + 1] - s->tp[q];
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
    if (p->num_seeds < s->ntrain)
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

/* ---------------------------------------------------------------- loading a mega-batch */

/* The local id of neighbour u (a new id) in the mega-batch being loaded, or NONE; static nodes
 * join it when add (T's lists), not when they are reached from a static node's list. */
static inline int bit(const uint64_t *b, uint64_t i)
{
    return (int)((b[i >> 6] >> (i & 63)) & 1);
}

/* Sets (on) or clears bits [lo, hi). */
static void bits_range(uint64_t *b, uint64_t lo, uint64_t hi, int on)
{
    for (uint64_t i = lo; i < hi;) {
        if ((i & 63) == 0 && hi - i >= 64) {
            b[i >> 6] = on ? ~0ull : 0;
            i += 64;
        } else {
            if (on)
                b[i >> 6] |= 1ull << (i & 63);
            else
                b[i >> 6] &= ~(1ull << (i & 63));
            i++;
        }
    }
}

/* Most neighbours are in neither T nor the static cache: two bit tests drop them, and only the
 * kept ones pay for a part lookup (binary search) or the static map. */
static uint32_t local_of(tg_strategy_t *s, mega_t *m, uint64_t u, int add, uint64_t *base,
                         int *is_static)
{
    *is_static = 0;
    if (bit(s->in_t, u)) {
        uint32_t k = tg_part_of(s->part, u);
        return (uint32_t)(base[s->slot[k]] + (u - s->part->pp[k]));
    }
    if (!bit(s->is_static, u)) return NONE;
    uint32_t si = static_find(s, u);
    if (si == NONE) return NONE;
    *is_static = 1;
    if (s->s_local[si] == NONE && add) {
        uint64_t j = m->nm - m->nt;
        m->sidx[j] = si;
        m->old_ids[m->nm] = s->s_old[si];
        s->s_local[si] = (uint32_t)m->nm++;
    }
    return s->s_local[si];
}

/* Room for need more edges in m. setup's e_cap bounds every mega-batch (T's edges, its parts'
 * pairs, the static-to-static edges), so this only guards it; a growth is reserved first. */
static int edge_room(tg_strategy_t *s, mega_t *m, uint64_t need)
{
    if (need <= m->e_cap - m->ne) return 0;
    uint64_t add = TG_MAX(need - (m->e_cap - m->ne), TG_MAX(m->e_cap / 2, (uint64_t)1 << 16));
    int rc = tg_budget_reserve(&s->r->budget, add * 4, "hier: a mega-batch's edges");
    if (rc < 0) return rc;
    uint32_t *n = realloc(m->indices, (m->e_cap + add) * 4);
    if (!n) {
        tg_budget_release(&s->r->budget, add * 4);
        return tg_err(-ENOMEM, "hier: out of memory for a mega-batch's edges");
    }
    m->indices = n;
    m->e_cap += add;
    s->mega_held += add * 4;
    return 0;
}

/* The joined static node si's local: nt + its rank among the joined (s_join, s_jrank: 128 KiB
 * and 64 KiB a million static nodes, which stay in cache where s_local would not). */
static inline uint32_t joined_local(const tg_strategy_t *s, uint64_t nt, uint32_t si)
{
    uint64_t w = s->s_join[si >> 6];
    return (uint32_t)(nt + s->s_jrank[si >> 6] + (uint32_t)pop64(w & ((1ull << (si & 63)) - 1)));
}

/* The lists of the static nodes that joined m (locals [nt, nm), in join order so far): their
 * in-neighbours in T, from the pairs of T's parts (read with them), then their static
 * in-neighbours that joined too, from RAM. First the joined nodes are renumbered in static-index
 * order (T's lists follow), so that "joined?" and "which local?" are a bit test and a rank in
 * small tables; then each list gets the room of its pairs and its whole static list, is filled
 * in one pass and the lists are closed up. Every edge touched is one of the joined nodes'. */
static int load_static(tg_strategy_t *s, mega_t *m, const uint32_t *parts, const uint64_t *base,
                       uint64_t n)
{
    tg_part_t *p = s->part;
    uint64_t nt = m->nt, nj = m->nm - m->nt, np = 0, hdr = (s->P + 1) * 8, words = (s->S + 63) / 64;
    uint64_t *cnt = s->s_cur;
    int rc = 0;
    /* the joined set, its ranks, and the renumbering (T's edges into it follow) */
    memset(s->s_join, 0, words * sizeof *s->s_join);
    for (uint64_t j = 0; j < nj; j++)
        s->s_join[m->sidx[j] >> 6] |= 1ull << (m->sidx[j] & 63);
    for (uint64_t w = 0, acc = 0; w < words; w++) {
        s->s_jrank[w] = (uint32_t)acc;
        acc += (uint64_t)pop64(s->s_join[w]);
    }
    for (uint64_t j = 0; j < nj; j++)
        cnt[j] = joined_local(s, nt, m->sidx[j]);
    for (uint64_t x = 0; x < m->ne; x++)
        if (m->indices[x] >= nt) m->indices[x] = (uint32_t)cnt[m->indices[x] - nt];
    for (uint64_t w = 0, j = 0; w < words; w++)
        for (uint64_t b = s->s_join[w]; b; b &= b - 1) {
            uint32_t si = (uint32_t)(w * 64 + (uint64_t)__builtin_ctzll(b));
            m->sidx[j] = si;
            m->old_ids[nt + j++] = s->s_old[si];
        }
    memset(cnt, 0, nj * sizeof *cnt);
    /* the parts' pairs, read, checked and counted */
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        uint64_t c = s->ps_off[k + 1] - s->ps_off[k], size = p->pp[k + 1] - p->pp[k];
        if (np + c > s->pairs_cap) {
            rc = tg_err(-EOVERFLOW, "%s: more pairs than the largest parts hold", s->pstat->path);
            break;
        }
        uint32_t *pr = s->pairs + 2 * np;
        if ((rc = rd(s, s->pstat, pr, c * 8, hdr + s->ps_off[k] * 8)) < 0) break;
        for (uint64_t x = 0; x < c; x++) {
            uint32_t si = pr[2 * x];
            if (si >= s->S || pr[2 * x + 1] >= size) {
                rc = tg_err(-EINVAL,
                            "%s: pair %llu (part %u) names static node %u of %llu at offset %u "
                            "of %llu",
                            s->pstat->path, (unsigned long long)(s->ps_off[k] + x), k, si,
                            (unsigned long long)s->S, pr[2 * x + 1], (unsigned long long)size);
                break;
            }
            if (bit(s->s_join, si)) cnt[joined_local(s, nt, si) - nt]++;
            pr[2 * x + 1] = (uint32_t)(base[i] + pr[2 * x + 1]); /* the neighbour's local */
        }
        np += c;
    }
    if (rc < 0) return rc;
    /* room: each list's pairs and its whole static list; the counts become cursors */
    uint64_t room = 0;
    for (uint64_t j = 0; j < nj; j++) {
        uint32_t si = m->sidx[j];
        uint64_t c = cnt[j];
        m->indptr[nt + j] = cnt[j] = m->ne + room;
        room += c + (s->s_ip[si + 1] - s->s_ip[si]);
    }
    if ((rc = edge_room(s, m, room)) < 0) return rc;
    for (uint64_t x = 0; x < np; x++) {
        uint32_t si = s->pairs[2 * x];
        if (bit(s->s_join, si))
            m->indices[cnt[joined_local(s, nt, si) - nt]++] = s->pairs[2 * x + 1];
    }
    for (uint64_t j = 0; j < nj; j++) {
        uint32_t si = m->sidx[j];
        for (uint64_t x = s->s_ip[si]; x < s->s_ip[si + 1]; x++) {
            uint32_t sj = s->s_lists[x];
            if (bit(s->s_join, sj)) m->indices[cnt[j]++] = joined_local(s, nt, sj);
        }
    }
    /* closed up: a list only moves down */
    uint64_t w = m->ne;
    for (uint64_t j = 0; j < nj; j++) {
        uint64_t st = m->indptr[nt + j], len = cnt[j] - st;
        if (w != st) memmove(m->indices + w, m->indices + st, len * sizeof *m->indices);
        m->indptr[nt + j] = w;
        w += len;
    }
    m->ne = w;
    return 0;
}

/* T's lists, part by part (parts[0..n) in id order, part i's locals from base[i]), filtered to
 * the mega-batch: neighbours in T, and static ones, which join it. */
static int load_lists(tg_strategy_t *s, mega_t *m, const uint32_t *parts, uint64_t *base,
                      uint64_t n)
{
    tg_part_t *p = s->part;
    size_t ib = p->index_bytes;
    int rc = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        uint64_t lo = p->pp[k], cnt = p->pp[k + 1] - lo;
        if ((rc = rd(s, p->adj, s->ipbuf, (cnt + 1) * 8, lo * 8)) < 0 ||
            (rc = tg_part_check_indptr(p, lo, cnt + 1, s->ipbuf)) < 0)
            break;
        uint64_t bs = 0, bn = 0; /* the list buffer holds entries [bs, bs + bn) */
        for (uint64_t v = 0; v < cnt && rc == 0; v++) {
            m->indptr[base[i] + v] = m->ne;
            for (uint64_t e = s->ipbuf[v]; e < s->ipbuf[v + 1] && rc == 0; e++) {
                if (e >= bs + bn) {
                    bs = e;
                    bn = TG_MIN(s->ipbuf[cnt] - e, LIST_READ / ib);
                    if ((rc = rd(s, p->adj, s->lbuf, bn * ib, p->indices_off + e * ib)) < 0 ||
                        (rc = tg_part_check_indices(p, bs, bn, s->lbuf)) < 0)
                        break;
                }
                uint64_t u = rd_id(s, s->lbuf, e - bs);
                int st;
                uint32_t l = local_of(s, m, u, 1, base, &st);
                m->deg_full++;
                if (l == NONE) continue;
                if ((rc = edge_room(s, m, 1)) < 0) break;
                m->indices[m->ne++] = l;
                if (st)
                    m->deg_static++;
                else
                    m->deg_induced++;
            }
        }
    }
    return rc;
}

static int load(tg_strategy_t *s, mega_t *m, uint64_t index)
{
    tg_part_t *p = s->part;
    double t0 = tg_now();
    uint64_t first = index * s->nd, n = TG_MIN((uint64_t)s->P, first + s->nd) - first;
    /* its parts in id order: reads go up the files */
    uint32_t *parts = malloc(n * sizeof *parts + 1);
    uint64_t *base = malloc(n * sizeof *base + 1);
    int rc = parts && base ? 0 : tg_err(-ENOMEM, "hier: out of memory");
    for (uint64_t i = 0; i < n && rc == 0; i++)
        parts[i] = s->order[first + i];
    for (uint64_t i = 1; i < n && rc == 0; i++) /* insertion sort: N_d is small */
        for (uint64_t j = i; j > 0 && parts[j - 1] > parts[j]; j--) {
            uint32_t t = parts[j];
            parts[j] = parts[j - 1];
            parts[j - 1] = t;
        }
    tg_adj_destroy(m->adj);
    m->adj = NULL;
    m->nt = m->ne = m->nseeds = 0;
    m->deg_full = m->deg_induced = m->deg_static = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        base[i] = m->nt;
        s->slot[k] = (int32_t)i;
        bits_range(s->in_t, p->pp[k], p->pp[k + 1], 1);
        m->nt += p->pp[k + 1] - p->pp[k];
    }
    if (rc == 0 && m->nt > s->t_cap)
        rc = tg_err(-EOVERFLOW, "hier: mega-batch %llu has %llu nodes, more than planned (%llu)",
                    (unsigned long long)index, (unsigned long long)m->nt,
                    (unsigned long long)s->t_cap);
    m->nm = m->nt;
    /* rows and original ids: one read per run of consecutive parts */
    for (uint64_t i = 0; i < n && rc == 0;) {
        uint64_t j = i + 1;
        while (j < n && parts[j] == parts[j - 1] + 1)
            j++;
        uint64_t lo = p->pp[parts[i]], hi = p->pp[parts[j - 1] + 1];
        rc = rd(s, p->feat, m->feat + base[i] * s->row, (hi - lo) * s->row, lo * s->row);
        if (rc == 0) rc = tg_part_old_ids(p, lo, hi - lo, m->old_ids + base[i]);
        /* --verify-reads: partfeat's rows are copies of features.bin's, by original id */
        for (uint64_t t = 0; t < hi - lo && rc == 0 && s->r->rowcrc; t++)
            rc = tg_rowcrc_check(s->r->rowcrc, m->old_ids[base[i] + t],
                                 m->feat + (base[i] + t) * s->row, p->feat->path,
                                 p->feat->payload_off + (lo + t) * s->row);
        s->read_bytes += (hi - lo) * p->id_bytes, s->reads++;
        i = j;
    }
    /* T's lists, part by part, filtered to the mega-batch (static neighbours join it) */
    if (rc == 0) rc = load_lists(s, m, parts, base, n);
    /* the static nodes that joined: their lists, filtered to the mega-batch */
    if (rc == 0 && m->nm > m->nt) rc = load_static(s, m, parts, base, n);
    m->indptr[m->nm] = m->ne;
    /* T's training nodes, part by part */
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint32_t k = parts[i];
        for (uint64_t x = s->tp[k]; x < s->tp[k + 1]; x++)
            m->seeds[m->nseeds++] = base[i] + (s->train_new[x] - p->pp[k]);
    }
    if (rc == 0) rc = tg_adj_raw_create(&m->adj, m->nm, m->ne, m->indptr, m->indices, 4);
    /* the load's maps back to empty */
    for (uint64_t i = 0; i < n && parts; i++) {
        s->slot[parts[i]] = -1;
        bits_range(s->in_t, p->pp[parts[i]], p->pp[parts[i] + 1], 0);
    }
    for (uint64_t j = m->nt; j < m->nm; j++)
        s->s_local[m->sidx[j - m->nt]] = NONE;
    free(parts);
    free(base);
    s->load_s += tg_now() - t0;
    return rc;
}

/* engine/ahead's producer: the pass's mega-batch k into a free buffer. */
static int load_run(void *ctx, void *item, uint64_t k, tg_ahead_t *a)
{
    tg_strategy_t *s = ctx;
    (void)a;
    return load(s, item, s->run[k]);
}

/* ---------------------------------------------------------------- training on a mega-batch */

typedef struct {
    tg_strategy_t *s;
    const tg_pass_t *p; /* the engine's pass */
    mega_t *m;
    uint64_t base; /* the epoch's number of this sub-pass's batch 0 */
    uint64_t *ids; /* the trainer's: a batch's original ids */
    uint64_t ids_cap;
    uint64_t rows_static, rows_dyn;
} sub_t;

static int sub_gather(void *ctx, const tg_batch_t *b, float *X)
{
    sub_t *c = ctx;
    tg_strategy_t *s = c->s;
    const mega_t *m = c->m;
    uint32_t dim = s->r->ds->meta.feat_dim;
    tg_feat_dtype_t dt = s->r->ds->meta.feat_dtype;
    int norm = s->r->sopts.normalize;
    uint64_t st = 0;
    for (uint32_t i = 0; i < b->num_nodes; i++) {
        uint64_t l = b->nodes[i];
        const char *src;
        if (l < m->nt) {
            src = m->feat + l * s->row;
        } else {
            src = s->s_feat + (uint64_t)m->sidx[l - m->nt] * s->row;
            st++;
        }
        tg_feat_rows_f32(X + (size_t)i * dim, src, 0, 1, dim, dt, norm);
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

static void add_stats(tg_pass_stats_t *st, const tg_pass_stats_t *a)
{
    st->steps += a->steps;
    st->sample_s += a->sample_s;
    st->gather_s += a->gather_s;
    st->wait_s += a->wait_s;
    st->release_s += a->release_s;
    st->batch_bytes_peak = TG_MAX(st->batch_bytes_peak, a->batch_bytes_peak);
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

/* Trains the passes over mega-batch i (the i-th of the schedule, loaded in m) whose batches are
 * the epoch's *k onwards, skipping those a resumed pass did already; *k moves past them. */
static int train_mega(tg_strategy_t *s, sub_t *c, mega_t *m, uint64_t i, uint64_t *k,
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
        uint64_t ep = sub_epoch(p->epoch, i, j);
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
        add_stats(st, &a);
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
    uint64_t megabatches, dynamic_parts, static_nodes, nodes;
    double load_s, load_wait_s;
    uint64_t deg_full, deg_induced, deg_static;
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
    st->io_read_bytes = s->read_bytes - f->rb0;
    st->io_requests = s->reads - f->rq0;
    st->have_io_wait = 1;
    st->io_wait_s = f->o.load_wait_s;
    uint64_t rows = c->rows_static + c->rows_dyn;
    st->have_cache = 1;
    st->cache_lookups = rows;
    st->cache_hits = c->rows_static;
    (void)tg_pass_tier_add(st, "hier-static", rows, c->rows_static, c->rows_static * s->row);
    (void)tg_pass_tier_add(st, "hier-megabatch", c->rows_dyn, c->rows_dyn, c->rows_dyn * s->row);
    f->o.passes = 1;
    f->o.dynamic_parts = s->nd;
    f->o.static_nodes = s->S;
    f->o.load_s = s->load_s - f->load0;
    tg_pass_own_put(st, &f->o, sizeof f->o);
}

static void hier_own_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    hier_own_t a, b;
    tg_pass_own_get(sum, &a, sizeof a);
    tg_pass_own_get(add, &b, sizeof b);
    a.passes += b.passes;
    a.megabatches += b.megabatches;
    a.dynamic_parts = TG_MAX(a.dynamic_parts, b.dynamic_parts);
    a.static_nodes = TG_MAX(a.static_nodes, b.static_nodes);
    a.nodes += b.nodes;
    a.load_s += b.load_s;
    a.load_wait_s += b.load_wait_s;
    a.deg_full += b.deg_full;
    a.deg_induced += b.deg_induced;
    a.deg_static += b.deg_static;
    tg_pass_own_put(sum, &a, sizeof a);
}

int tg_hier_figures(const tg_pass_stats_t *st, tg_hier_figures_t *f)
{
    hier_own_t o;
    tg_pass_own_get(st, &o, sizeof o);
    memset(f, 0, sizeof *f);
    if (!o.passes) return -ENOENT;
    *f = (tg_hier_figures_t){.megabatches = o.megabatches,
                             .dynamic_parts = o.dynamic_parts,
                             .static_nodes = o.static_nodes,
                             .nodes = o.nodes,
                             .load_s = o.load_s,
                             .load_wait_s = o.load_wait_s,
                             .deg_full = o.deg_full,
                             .deg_induced = o.deg_induced,
                             .deg_static = o.deg_static};
    return 0;
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

/* A training pass (Algorithm 1): the schedule's mega-batches in order, each loaded while the one
 * before trains (engine/ahead), each trained --passes times from RAM. */
static int train_pass(tg_strategy_t *s, const tg_pass_t *p, tg_pass_stats_t *st)
{
    int rc = schedule(s, p);
    if (rc < 0) return rc;
    uint64_t limit = limit_of(s, p), nrun, k;
    st->next_batch = p->first_batch;
    if (p->first_batch >= limit) return 0;
    if ((rc = plan_run(s, p->first_batch, limit, &nrun, &k)) < 0) return rc;
    hier_fig_t f = {.rb0 = s->read_bytes, .rq0 = s->reads, .load0 = s->load_s};
    sub_t c = {.s = s, .p = p};
    if ((rc = tg_ahead_start(s->ahead, nrun)) < 0) return rc;
    for (uint64_t q = 0; q < nrun && rc == 0 && !st->stopped && k < limit; q++) {
        void *item;
        double t0 = tg_now();
        rc = tg_ahead_next(s->ahead, NULL, &item);
        f.o.load_wait_s += tg_now() - t0;
        if (rc == 0) rc = tg_err(-EIO, "hier: the loader ended early (internal error)");
        if (rc < 0) break;
        mega_t *m = item;
        f.o.megabatches++;
        f.o.nodes += m->nt;
        f.o.deg_full += m->deg_full;
        f.o.deg_induced += m->deg_induced;
        f.o.deg_static += m->deg_static;
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
    tg_sampler_t *sm = NULL;
    if (rc == 0 && i < s->nmega) rc = load(s, &s->mega[0], i);
    if (rc == 0 && i < s->nmega)
        rc = tg_sampler_open(&sm, o->sampler, s->mega[0].adj, o->num_layers, o->fanouts);
    const mega_t *m = &s->mega[0];
    for (uint64_t b = 0; rc == 0 && sm && b < 2 && b * p.batch_size < m->nseeds; b++) {
        tg_rng_t rng;
        tg_sampler_batch_rng(&rng, p.seed, sub_epoch(p.epoch, i, 0), b);
        tg_batch_t bt;
        memset(&bt, 0, sizeof bt);
        uint64_t n = TG_MIN(p.batch_size, m->nseeds - b * p.batch_size);
        if ((rc = tg_sampler_sample(sm, m->seeds + b * p.batch_size, (size_t)n, &rng, &bt)) < 0)
            break;
        if (bt.num_nodes > largest->num_nodes) {
            tg_batch_free(largest);
            *largest = bt;
        } else {
            tg_batch_free(&bt);
        }
    }
    tg_sampler_destroy(sm);
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

static int hier_in_flight(const tg_strategy_opts_t *so)
{
    const hier_cfg_t *c = so->cfg;
    return TG_MAX(tg_xpass_in_flight(&c->x),
                  tg_gather_pass_in_flight(so->sampler_threads, PREFETCH));
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
    .batches_in_flight = hier_in_flight,
    .epoch_batches = hier_epoch_batches,
    .profile_batch = hier_profile,
    .evaluating = megas_release,
    .report = hier_report,
    .own_add = hier_own_add,
};
