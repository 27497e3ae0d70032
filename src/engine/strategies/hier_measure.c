/* strategies/hier_measure.c - hier's batches for the planner (tg_strategy_i.plan_measure).
 *
 * The planner's profile samples the whole graph; hier's batches come from a mega-batch's
 * subgraph, a third of the rows on the planner's wide workload (6 of 74 parts per mega-batch,
 * most edges cut). With the partition built, this forms one mega-batch as a run would and
 * samples it:
 *   N_d: setup's loop (tg_hier_fit_parts) over the geometry tg_mb_open measures (the parts'
 *     nodes, edges and static pairs, largest first), in the room the planner's --mem leaves less
 *     the static cache and the maps; twice, as the budget plan sizes it: the first two batches
 *     of a mega-batch of all that room (training nodes in part order, hier_profile's) size the
 *     input matrices, which come off first (a step's arena on them replacing the whole graph's
 *     the planner reserved);
 *   the mega-batch: the steady epoch's (epoch 1) first N_d shuffled parts, their nodes T and the
 *     static nodes their lists reach, the lists filtered to them from the original graph (the
 *     subgraph tg_mb_load reads from the partitioned copy); the provisional one is the first
 *     epoch's, as the budget plan's;
 *   its first batches, its training nodes shuffled as a pass shuffles them, with the run's
 *     sampler: rows and operations per batch; the in-degree T keeps; the epoch's batch count
 *     from the schedule (--batches-per-epoch: the mega-batches up to its last batch).
 * Without the partition nothing is measured (predict charges the build and takes the whole
 * graph's batches). Cost: a pass over the partition's map, the static nodes' lists (every k-th
 * of them past PAIRS_WALK entries), two mega-batches' lists (on the shared bench 1.2-1.6 s of
 * CPU, against an epoch of 7-17 s; the planner runs it for `tiergnn plan`, `tiergnn bench` and
 * an auto run that may take hier); memory: about 9 bytes per node of the graph and the
 * mega-batch's subgraph, freed after. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hier-impl.h"

#define CHUNK 256                   /* list entries read at once */
#define LOAD_BYTES (64.0 * 1048576) /* a timed load's bytes, about (time_load) */
/* The static lists' entries walked for the parts' static pairs: all of them up to this, else
 * every k-th list (static nodes are in id order, not by degree), scaled by k */
#define PAIRS_WALK ((uint64_t)1 << 20)

typedef struct {
    const tg_cost_measure_t *mx;
    const tg_dataset_t *ds;
    const char *params; /* the partition's */
    uint64_t N, S, ntrain;
    uint32_t P;
    uint32_t *part;  /* each node's part, by original id */
    uint64_t *stat;  /* bitmap of the static nodes */
    uint64_t *in_m;  /* bitmap of the mega-batch's nodes (T and the static ones that joined) */
    uint32_t *local; /* original id -> id in the mega-batch, where in_m */
    uint32_t *order; /* the steady epoch's parts, shuffled */
    uint64_t *tcount;
    unsigned char *chosen;
    /* the mega-batch: nm nodes (T's nt first, then the joined static ones) in old[], their
     * filtered lists in ip[] / idx[] (local ids); old and ip have room (+ 1) entries */
    uint64_t nt, nm, ne, cap, room, *old, *ip;
    uint32_t *idx;
    uint64_t full, kept; /* T's in-degrees in the graph, and the entries kept */
    /* tg_mb_open's geometry: tg_hier_fit_parts and tg_mb_bytes read it */
    tg_mb_t geo;
    uint64_t max_part;
    uint64_t stride; /* the static lists walked for the pairs: every stride-th */
} pm_t;

static int bit(const uint64_t *b, uint64_t i)
{
    return (int)((b[i / 64] >> (i % 64)) & 1);
}

static void bit_set(uint64_t *b, uint64_t i, int on)
{
    if (on)
        b[i / 64] |= 1ull << (i % 64);
    else
        b[i / 64] &= ~(1ull << (i % 64));
}

static int cmp_desc(const void *a, const void *b)
{
    return -tg_cmp_u64(a, b);
}

static int cmp_asc(const void *a, const void *b)
{
    return tg_cmp_u64(a, b);
}

static int oom(void)
{
    return tg_err(-ENOMEM, "hier: out of memory for the planner's mega-batch");
}

static int push(pm_t *q, uint32_t l)
{
    if (q->ne == q->cap) {
        uint64_t cap = q->cap ? 2 * q->cap : 1 << 16;
        uint32_t *idx = realloc(q->idx, cap * sizeof *idx);
        if (!idx) return oom();
        q->idx = idx, q->cap = cap;
    }
    q->idx[q->ne++] = l;
    return 0;
}

/* Room for n nodes in old[] and ip[]. */
static int room_for(pm_t *q, uint64_t n)
{
    if (n <= q->room) return 0;
    free(q->old), free(q->ip);
    q->old = malloc(n * sizeof *q->old + 1);
    q->ip = malloc((n + 1) * sizeof *q->ip);
    q->room = q->old && q->ip ? n : 0;
    return q->room ? 0 : oom();
}

/* Calls fn on node v's list, CHUNK entries at a time (each checked to name a node). */
typedef int (*list_fn)(pm_t *q, const uint64_t *nb, size_t n);
static int each_chunk(pm_t *q, uint64_t v, list_fn fn)
{
    tg_adj_t *adj = q->mx->adj;
    uint64_t pos[CHUNK], nb[CHUNK];
    for (uint64_t e = adj->indptr[v]; e < adj->indptr[v + 1];) {
        size_t n = (size_t)TG_MIN((uint64_t)CHUNK, adj->indptr[v + 1] - e);
        for (size_t i = 0; i < n; i++)
            pos[i] = e + i;
        int rc = tg_adj_read(adj, pos, n, nb);
        for (size_t i = 0; i < n && rc == 0; i++)
            if (nb[i] >= q->N)
                rc = tg_err(-EINVAL, "hier: entry %llu of node %llu's list names node %llu of %llu",
                            (unsigned long long)(e + i - adj->indptr[v]), (unsigned long long)v,
                            (unsigned long long)nb[i], (unsigned long long)q->N);
        if (rc == 0) rc = fn(q, nb, n);
        if (rc < 0) return rc;
        e += n;
    }
    return 0;
}

/* ---------------------------------------------------------------- the geometry */

static int count_pairs(pm_t *q, const uint64_t *nb, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        q->geo.pspairs[q->part[nb[i]]] += q->stride;
        q->geo.ss_edges += q->stride * (uint64_t)bit(q->stat, nb[i]);
    }
    return 0;
}

/* Each node's part (the partition's map read once), the static nodes (setup_fixed's: the
 * highest in-degree), the training nodes per part, and tg_mb_open's geometry. */
static int pm_maps(pm_t *q, tg_part_t *pt, double ratio)
{
    tg_mb_t *g = &q->geo;
    uint64_t buf[4096];
    int rc = 0;
    for (uint32_t k = 0; k < q->P && rc == 0; k++) {
        g->psize[k] = pt->pp[k + 1] - pt->pp[k];
        q->max_part = TG_MAX(q->max_part, g->psize[k]);
        for (uint64_t x = pt->pp[k]; x < pt->pp[k + 1] && rc == 0; x += 4096) {
            uint64_t n = TG_MIN((uint64_t)4096, pt->pp[k + 1] - x);
            if ((rc = tg_part_old_ids(pt, x, n, buf)) < 0) break;
            for (uint64_t i = 0; i < n; i++)
                q->part[buf[i]] = k;
        }
    }
    for (uint64_t v = 0; rc == 0 && v < q->N; v++) /* indptr in order */
        g->pedge[q->part[v]] += tg_adj_degree(q->mx->adj, v);
    g->S = q->S = ratio > 0 ? (uint64_t)((double)q->N * ratio + 0.5) : 0;
    uint64_t *sids = malloc(q->S * sizeof *sids + 1);
    if (!sids) return oom();
    if (rc == 0 && q->S) rc = tg_adj_top_degree(q->mx->adj, q->S, sids, &g->static_edges);
    for (uint64_t i = 0; rc == 0 && i < q->S; i++)
        bit_set(q->stat, sids[i], 1);
    /* the static pairs per part (static lists' entries by the part they name) and the
     * static-to-static entries */
    q->stride = g->static_edges > PAIRS_WALK ? (g->static_edges + PAIRS_WALK - 1) / PAIRS_WALK : 1;
    for (uint64_t i = 0; rc == 0 && i < q->S; i += q->stride)
        rc = each_chunk(q, sids[i], count_pairs);
    free(sids);
    for (uint64_t i = 0; rc == 0 && i < q->ntrain; i++)
        q->tcount[q->part[q->mx->train[i]]]++;
    qsort(g->psize, q->P, sizeof *g->psize, cmp_desc);
    qsort(g->pedge, q->P, sizeof *g->pedge, cmp_desc);
    qsort(g->pspairs, q->P, sizeof *g->pspairs, cmp_desc);
    return rc;
}

/* ---------------------------------------------------------------- a mega-batch */

static int join_t(pm_t *q, const uint64_t *nb, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint64_t u = nb[i];
        if (!bit(q->in_m, u)) {
            if (!bit(q->stat, u)) continue;
            q->old[q->nm] = u; /* a static neighbour joins */
            q->local[u] = (uint32_t)q->nm++;
            bit_set(q->in_m, u, 1);
        }
        q->kept++;
        rc = push(q, q->local[u]);
    }
    return rc;
}

static int keep_in(pm_t *q, const uint64_t *nb, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (bit(q->in_m, nb[i])) rc = push(q, q->local[nb[i]]);
    return rc;
}

/* The first mega-batch of epoch's schedule, of nd parts (the parts shuffled as schedule does),
 * from the graph. */
static int pm_form(pm_t *q, uint64_t epoch, uint64_t nd)
{
    for (uint64_t j = 0; j < q->nm; j++) /* the last one's nodes out */
        bit_set(q->in_m, q->old[j], 0);
    int rc = tg_hier_parts_order(q->P, q->mx->seed, epoch, q->order);
    if (rc < 0) return rc;
    memset(q->chosen, 0, q->P);
    for (uint64_t k = 0; k < nd; k++)
        q->chosen[q->order[k]] = 1;
    uint64_t nt = 0;
    for (uint64_t v = 0; v < q->N; v++)
        nt += q->chosen[q->part[v]];
    q->nt = q->nm = q->ne = q->full = q->kept = 0;
    rc = room_for(q, nt + q->S);
    if (rc < 0) return rc;
    for (uint64_t v = 0; v < q->N; v++)
        if (q->chosen[q->part[v]]) {
            q->old[q->nt] = v, q->local[v] = (uint32_t)q->nt++;
            bit_set(q->in_m, v, 1);
        }
    q->nm = q->nt;
    for (uint64_t j = 0; j < q->nt && rc == 0; j++) {
        q->ip[j] = q->ne;
        q->full += tg_adj_degree(q->mx->adj, q->old[j]);
        rc = each_chunk(q, q->old[j], join_t);
    }
    for (uint64_t j = q->nt; j < q->nm && rc == 0; j++) { /* the joined static nodes' lists */
        q->ip[j] = q->ne;
        rc = each_chunk(q, q->old[j], keep_in);
    }
    q->ip[q->nm] = q->ne;
    return rc;
}

/* Its first batches (its training nodes shuffled as a pass shuffles them, or in part order):
 * rows and operations per batch, and the largest batch's rows. */
static int pm_sample(pm_t *q, uint64_t epoch, int shuffled, uint64_t batches, double *rows,
                     double *flops, uint64_t *max_rows, int keep)
{
    const tg_cost_measure_t *mx = q->mx;
    uint64_t ns = 0;
    uint64_t *seeds = malloc(TG_MIN(q->nt, q->ntrain) * sizeof *seeds + 1);
    if (!seeds) return oom();
    /* keyed by part, then id (T's local ids are in id order) */
    for (uint64_t i = 0; i < q->ntrain; i++) {
        uint64_t v = mx->train[i];
        if (bit(q->in_m, v) && q->local[v] < q->nt)
            seeds[ns++] = (uint64_t)q->part[v] << 32 | q->local[v];
    }
    uint64_t ep = tg_hier_sub_epoch(epoch, 0, 0);            /* its first mega-batch and pass */
    if (!shuffled) qsort(seeds, ns, sizeof *seeds, cmp_asc); /* tg_mb_load's: part by part */
    for (uint64_t i = 0; i < ns; i++)
        seeds[i] &= UINT32_MAX;
    if (shuffled) tg_sampler_shuffle_epoch(seeds, ns, mx->seed, ep);
    tg_adj_t *sub = NULL;
    tg_sampler_t *smp = NULL;
    int rc = tg_adj_raw_create(&sub, q->nm, q->ne, q->ip, q->idx, 4);
    if (rc == 0) rc = tg_sampler_open(&smp, mx->sampler, sub, mx->num_layers, mx->fanouts);
    tg_plan_t mp;
    tg_plan_view(&mp, seeds, ns, mx->batch_size, mx->seed, ep);
    uint64_t k = TG_MIN(TG_MAX(batches, (uint64_t)1), mp.num_batches), b = 0;
    *rows = *flops = 0;
    *max_rows = 0;
    for (; rc == 0 && b < k; b++) {
        const uint64_t *sd;
        tg_rng_t r;
        uint64_t cnt = tg_plan_batch(&mp, b, &sd, &r);
        tg_batch_t bt;
        if ((rc = tg_sampler_sample(smp, sd, (size_t)cnt, &r, &bt)) < 0) break;
        tg_flops_t f;
        if ((rc = tg_model_batch_flops(mx->model, &bt, &f)) == 0) {
            *rows += bt.num_nodes;
            *flops += (double)tg_flops_total(&f);
            *max_rows = TG_MAX(*max_rows, (uint64_t)bt.num_nodes);
        }
        /* the largest kept for the profile's step (mx->keep) */
        if (rc == 0 && keep && mx->keep && (!*mx->kept || bt.num_nodes > mx->keep->num_nodes)) {
            if (*mx->kept) tg_batch_free(mx->keep);
            *mx->keep = bt;
            *mx->kept = 1;
            continue;
        }
        tg_batch_free(&bt);
    }
    if (rc == 0 && b) *rows /= (double)b, *flops /= (double)b;
    tg_sampler_destroy(smp);
    tg_adj_destroy(sub);
    free(seeds);
    return rc;
}

/* One real load by the run's loader (tg_mb_open with the run's static cache, which builds
 * partstat where the run would, then tg_mb_load, which drops what it reads from the page cache)
 * of the steady epoch's first mega-batch, or of its first parts where it reads more than
 * LOAD_BYTES: its bytes over its time. On the planner's few workload the loads took 1.37 s an
 * epoch for 657 MiB, where the buffered read, copy and list-walk rates summed gave 0.9 s: the
 * loader walks, checks and places every entry, and the kernel's copies into its buffers miss
 * the CPU's caches. */
static int time_load(pm_t *q, const hier_cfg_t *c, tg_part_t *pt, uint64_t nd,
                     tg_cost_profile_t *prof)
{
    const tg_cost_measure_t *mx = q->mx;
    uint64_t S = c->static_ratio > 0 ? (uint64_t)((double)q->N * c->static_ratio + 0.5) : 0;
    S = TG_MIN(S, q->N);
    uint64_t *sids = malloc(S * sizeof *sids + 1), static_edges = 0, t, ed, np;
    if (!sids) return oom();
    tg_budget_t bg;
    tg_budget_init(&bg, 0);
    tg_mb_t *L = NULL;
    tg_megabatch_t m;
    memset(&m, 0, sizeof m);
    int rc = tg_adj_top_degree(mx->adj, S, sids, &static_edges);
    tg_mb_opts_t o = {.ds = q->ds,
                      .part = pt,
                      .params = q->params,
                      .budget = &bg,
                      .row_bytes = q->geo.row,
                      .static_old = sids,
                      .num_static = S,
                      .static_edges = static_edges,
                      .train_old = mx->train,
                      .num_train = mx->ntrain,
                      .who = "hier (the planner's load)"};
    if (rc == 0) rc = tg_mb_open(&L, &o);
    /* of its parts, as many as hold about LOAD_BYTES (at least one): the rate, not the whole
     * load (a mega-batch of the shared bench reads 190 MB) */
    uint64_t k = nd;
    if (rc == 0) {
        tg_hier_fit_parts(L, nd, 0, 0, &t, &ed, &np);
        double bytes = (double)t * (double)q->geo.row + (double)ed * pt->index_bytes;
        if (bytes > LOAD_BYTES)
            k = TG_MAX((uint64_t)1, (uint64_t)((double)nd * LOAD_BYTES / bytes));
        rc = tg_mb_alloc(L, &m, 1, t, ed, np);
    }
    if (rc == 0) {
        uint64_t rb = L->read_bytes;
        double s0 = L->load_s;
        rc = tg_mb_load(L, &m, q->order, k);
        double dt = L->load_s - s0;
        if (rc == 0 && dt > 0) prof->own.load_bytes_per_s = (double)(L->read_bytes - rb) / dt;
    }
    tg_mb_close(L);
    tg_budget_destroy(&bg);
    free(sids);
    return rc;
}

/* ---------------------------------------------------------------- the measure */

/* N_d in room (at least one part): setup's. */
static uint64_t fit(const pm_t *q, double room)
{
    uint64_t t, ed, np;
    uint64_t nd = tg_hier_fit_parts(&q->geo, q->P, 1, room > 0 ? (uint64_t)room : 0, &t, &ed, &np);
    return TG_MAX(nd, (uint64_t)1);
}

static int measure(pm_t *q, const tg_strategy_opts_t *so, tg_part_t *pt, tg_cost_profile_t *prof)
{
    const tg_cost_measure_t *mx = q->mx;
    const hier_cfg_t *c = so->cfg;
    int rc = pm_maps(q, pt, c->static_ratio);
    if (rc < 0) return rc;
    /* the room: the planner's less the static cache, its lists and the maps (tg_mb_open's) and
     * the parts' order (setup_fixed's) */
    double room = (double)mx->free_bytes - (double)tg_mb_fixed_bytes(&q->geo, q->max_part) -
                  (double)q->geo.ss_edges * 4 - (double)q->P * 4;
    uint64_t want = c->dynamic_parts > 0 ? TG_MIN((uint64_t)c->dynamic_parts, q->P) : 0;
    uint64_t nd = want;
    double rows = 0, flops = 0;
    uint64_t max_rows = 0;
    if (!want) {
        /* the budget plan's sizing (hier_profile, on the first epoch's first mega-batch, before
         * a step's arena is reserved): the input matrices of the first two batches of a
         * mega-batch of all the room; a step's arena on them replaces the whole graph's */
        uint64_t prov = fit(q, room + (double)mx->act_bytes);
        if ((rc = pm_form(q, 0, prov)) == 0)
            rc = pm_sample(q, 0, 0, 2, &rows, &flops, &max_rows, 0);
        double whole = (double)TG_MAX(mx->max_rows, (uint64_t)1);
        double arena = (double)mx->act_bytes * fmax(0, 1 - (double)max_rows / whole);
        double mats = tg_hier_in_flight(so) * (double)max_rows * mx->matrix_row_bytes;
        nd = TG_MIN(prov, fit(q, room + arena - mats));
    }
    /* the steady epoch's first mega-batch's batches as a pass trains them */
    if (rc == 0) rc = pm_form(q, 1, nd);
    if (rc == 0) rc = pm_sample(q, 1, 1, mx->batches, &rows, &flops, &max_rows, 1);
    if (rc < 0) return rc;
    /* the epoch's schedule: the parts N_d at a time, each mega-batch's batches; a cut epoch
     * (--batches-per-epoch) loads the mega-batches up to its last batch */
    uint64_t B = mx->batch_size, batches = 0, nmega = (q->P + nd - 1) / nd, loads = 0;
    for (uint64_t i = 0; i < nmega && !(mx->limited && batches >= mx->epoch_batches); i++) {
        uint64_t t = 0;
        for (uint64_t k = i * nd; k < TG_MIN((uint64_t)q->P, (i + 1) * nd); k++)
            t += q->tcount[q->order[k]];
        batches += (uint64_t)c->passes * ((t + B - 1) / B);
        loads++;
    }
    if (mx->limited) batches = TG_MIN(batches, mx->epoch_batches);
    prof->own = (tg_cost_own_t){.batches = (double)batches,
                                .rows_per_batch = rows,
                                .flops_per_batch = flops,
                                .groups = (double)loads,
                                .group_size = (double)nd,
                                .load_share = (double)loads / (double)nmega};
    prof->induced_degree_frac = q->full ? (double)q->kept / (double)q->full : 1;
    /* the steady epoch's first mega-batch (q->order, pm_form's) loaded for real */
    return time_load(q, c, pt, nd, prof);
}

int tg_hier_plan_measure(const tg_dataset_t *ds, const tg_strategy_opts_t *so,
                         const tg_cost_measure_t *mx, tg_cost_profile_t *prof)
{
    char params[256];
    tg_part_assign_opts_t a;
    int rc = tg_hier_find_params(ds, so, params, sizeof params, &a);
    if (rc < 0) return rc;
    tg_part_t *pt = NULL;
    rc = tg_part_open(&pt, ds, params);
    if (rc == -ENOENT || rc == -ESTALE) return 0; /* not built: predict charges the build */
    if (rc < 0) return rc;
    uint64_t N = ds->meta.num_nodes, words = (N + 63) / 64 + 1;
    pm_t q = {
        .mx = mx, .ds = ds, .params = params, .N = N, .ntrain = mx->ntrain, .P = pt->sum.parts};
    q.geo = (tg_mb_t){.P = q.P,
                      .N = N,
                      .row = ds->meta.feat_dim * tg_feat_dtype_size(ds->meta.feat_dtype),
                      .ntrain = q.ntrain};
    q.part = malloc(N * sizeof *q.part + 1);
    q.local = malloc(N * sizeof *q.local + 1);
    q.stat = calloc(words, sizeof *q.stat);
    q.in_m = calloc(words, sizeof *q.in_m);
    q.order = malloc(q.P * sizeof *q.order + 1);
    q.tcount = calloc(q.P + 1, sizeof *q.tcount);
    q.chosen = malloc(q.P + 1);
    q.geo.psize = malloc(q.P * sizeof *q.geo.psize + 1);
    q.geo.pedge = calloc(q.P + 1, sizeof *q.geo.pedge);
    q.geo.pspairs = calloc(q.P + 1, sizeof *q.geo.pspairs);
    if (!q.part || !q.local || !q.stat || !q.in_m || !q.order || !q.tcount || !q.chosen ||
        !q.geo.psize || !q.geo.pedge || !q.geo.pspairs)
        rc = oom();
    if (rc == 0) rc = measure(&q, so, pt, prof);
    free(q.geo.psize), free(q.geo.pedge), free(q.geo.pspairs);
    free(q.part), free(q.local), free(q.stat), free(q.in_m), free(q.order), free(q.tcount);
    free(q.chosen), free(q.old), free(q.ip), free(q.idx);
    tg_part_close(pt);
    return rc < 0 ? tg_err_prefix(rc, "hier: measuring a mega-batch's batches (%s)", params) : 0;
}
