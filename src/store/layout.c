/* DiskGNN's feature layout planner (see tiergnn/layout.h).
 *
 * Planning runs in phases over two per-node arrays:
 *   st[v]: the node's access count, then HOT for a hot node, else the number of outputs the node
 *          is written to (one per segment caching it or chunk holding it: partitions need it);
 *   ix[v]: zero between uses; batch + 1 while checking the trace; the node's access count within
 *          the segment being classified (then VISIT | the visits left while its cache row is
 *          walked); the node's cache index + 1 within the segment being ordered.
 * The two sit side by side (node_t), so that one cache miss serves both.
 * 1. check the trace, count accesses, choose the hot nodes (a count histogram gives the
 *    threshold count; ties taken by ascending id);
 * 2. the segment size (Algorithm 2, then exact measurements: measure() classifies every segment
 *    and only counts, into the offset arrays);
 * 3. classify again, now writing each batch's chunk nodes and each segment's cache nodes, both
 *    sorted by node (radix), and the per-node output counts;
 * 4. cut the partitions over the output counts;
 * 5. per segment: MinHash keys of its cache nodes, sorted within each partition's run, give the
 *    slots; then the read estimate of each of its batches, with and without that order.
 * Every allocation is reserved first (layout arrays kept until destroy, temporaries released at
 * the end of planning). */
#include "tiergnn/layout.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HOT UINT32_MAX
#define VISIT 0x80000000u /* ix of a cache row being walked: the visits left below it */
#define MAX_BATCHES 0x7FFFFFFFu
#define MAX_ACCESSES (UINT32_MAX - 1ull)
#define MAX_ROW_BYTES (1ull << 30)
#define AHEAD 16 /* accesses whose node entry is prefetched ahead (the passes are random reads) */

__extension__ typedef unsigned __int128 u128;

struct tg_layout {
    tg_layout_cfg_t cfg; /* defaults resolved */
    uint32_t B, seg, K;  /* batches, batches per segment, segments */
    uint64_t P;          /* partitions */
    uint32_t *hot;       /* (H) ascending */
    uint64_t H;
    uint64_t *pk_off;  /* (B + 1) first chunk row of batch b in pk */
    uint32_t *pk;      /* (packed rows) each chunk's nodes, ascending */
    uint64_t *ck_off;  /* (B + 1) byte offset of chunk b in the chunk file; [B] = its size */
    uint64_t *cs_off;  /* (K + 1) first cache slot of segment k */
    uint32_t *cn;      /* (cache rows) each segment's cache nodes, ascending */
    uint32_t *cslot;   /* (cache rows) the slot of cn[i] */
    uint32_t *part_lo; /* (P + 1) */
    uint64_t *part_n;  /* (P) targets of partition p */
    tg_layout_step_t *steps;
    uint32_t nsteps, steps_cap, search_segment;
    uint64_t accesses, hot_accesses, read, read_nomh, peak;
    tg_budget_t *budget;
    uint64_t reserved;
};

typedef struct {
    uint64_t cache_rows, packed_rows, disk;
    uint64_t cache_max, chunk_max; /* the largest segment's cache rows, the longest chunk */
    uint64_t chunks;               /* the chunks' bytes, each padded */
} measure_t;

typedef struct {
    uint32_t st, ix; /* side by side: one cache miss serves both */
} node_t;

typedef struct {
    const tg_cs_trace_t *t;
    tg_layout_t *L;
    node_t *nd;          /* (N) see the top */
    uint64_t temp_bytes; /* reserved for temporaries, besides st and ix */
    uint64_t node_bytes; /* st and ix */
    measure_t m;         /* the counts of segment size `measured` (0: none yet) */
    uint32_t measured;
} plan_t;

/* ---------------------------------------------------------------- helpers */

/* Prefetches the node entry of access j + AHEAD when it is before end. */
static inline void ahead(const node_t *nd, const uint32_t *ids, uint64_t j, uint64_t end)
{
    if (j + AHEAD < end) __builtin_prefetch(&nd[ids[j + AHEAD]], 1, 3);
}

static inline uint64_t round_up(uint64_t x, uint64_t align)
{
    return (x + align - 1) & ~(align - 1);
}

/* Reserves bytes for what against b (NULL: not accounted) and allocates them; *held grows by the
 * bytes. NULL with the error recorded on failure (nothing held then). */
static void *held_alloc(tg_budget_t *b, uint64_t *held, uint64_t bytes, const char *what)
{
    if (b && tg_budget_reserve(b, bytes, what) < 0) return NULL;
    void *p = malloc((size_t)(bytes ? bytes : 1));
    if (!p) {
        if (b) tg_budget_release(b, bytes);
        tg_err(-ENOMEM, "layout: out of memory for %s (%llu bytes)", what,
               (unsigned long long)bytes);
        return NULL;
    }
    *held += bytes;
    return p;
}

/* LSD radix sort of a[0 .. n) of type T by the 4 bytes from bit SH0 up (8 bits a pass, passes
 * whose byte is equal in every value skipped); tmp holds n. Stable. */
#define DEFINE_RADIX4(name, T, SH0)                                                                \
    static void name(T *a, T *tmp, size_t n)                                                       \
    {                                                                                              \
        if (n < 2) return;                                                                         \
        size_t cnt[4][256];                                                                        \
        memset(cnt, 0, sizeof cnt);                                                                \
        for (size_t i = 0; i < n; i++)                                                             \
            for (int d = 0; d < 4; d++)                                                            \
                cnt[d][(a[i] >> (SH0 + 8 * d)) & 255]++;                                           \
        T *src = a, *dst = tmp;                                                                    \
        for (int d = 0; d < 4; d++) {                                                              \
            size_t *c = cnt[d], sum = 0;                                                           \
            int sh = SH0 + 8 * d;                                                                  \
            if (c[(src[0] >> sh) & 255] == n) continue;                                            \
            for (int k = 0; k < 256; k++) {                                                        \
                size_t x = c[k];                                                                   \
                c[k] = sum, sum += x;                                                              \
            }                                                                                      \
            for (size_t i = 0; i < n; i++)                                                         \
                dst[c[(src[i] >> sh) & 255]++] = src[i];                                           \
            T *x = src;                                                                            \
            src = dst, dst = x;                                                                    \
        }                                                                                          \
        if (src != a) memcpy(a, src, n * sizeof *a);                                               \
    }

/* Node lists ascending. */
DEFINE_RADIX4(sort_u32, uint32_t, 0)
/* (key << 32 | payload) pairs by key (keys distinct, or ties kept in order). */
DEFINE_RADIX4(sort_u64_hi, uint64_t, 32)

/* The first index of a[0 .. n) (ascending) whose value is >= v. */
static uint64_t lower_bound(const uint32_t *a, uint64_t n, uint32_t v)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Pages of `page` bytes touched by rows of `row` bytes at the sorted slots s[0 .. n). */
static uint64_t pages_touched(const uint32_t *s, size_t n, uint64_t row, uint64_t page)
{
    uint64_t pages = 0, next = 0; /* next: the first page not counted yet */
    for (size_t i = 0; i < n; i++) {
        uint64_t off = (uint64_t)s[i] * row, first = off / page, last = (off + row - 1) / page;
        first = TG_MAX(first, next);
        if (last >= first) pages += last - first + 1, next = last + 1;
    }
    return pages;
}

/* ---------------------------------------------------------------- checks */

static int check_cfg(const tg_layout_cfg_t *c, tg_layout_cfg_t *r)
{
    *r = *c;
    if (!r->num_hashes) r->num_hashes = 2;
    if (!r->chunk_align) r->chunk_align = TG_LAYOUT_DEFAULT_ALIGN;
    if (!r->page_bytes) r->page_bytes = TG_LAYOUT_DEFAULT_ALIGN;
    if (r->num_nodes > UINT32_MAX)
        return tg_err(-EINVAL, "layout: %llu nodes, at most %u (u32 ids)",
                      (unsigned long long)r->num_nodes, UINT32_MAX);
    if (r->row_bytes < 1 || r->row_bytes > MAX_ROW_BYTES)
        return tg_err(-EINVAL, "layout: row_bytes %llu, expected 1 .. %llu",
                      (unsigned long long)r->row_bytes, MAX_ROW_BYTES);
    if (r->num_hashes > TG_LAYOUT_MAX_HASHES)
        return tg_err(-EINVAL, "layout: %u MinHash functions, expected 1 .. %d", r->num_hashes,
                      TG_LAYOUT_MAX_HASHES);
    if (r->chunk_align & (r->chunk_align - 1))
        return tg_err(-EINVAL, "layout: chunk_align %u, expected a power of two", r->chunk_align);
    if (r->num_hot_given && !r->hot_given)
        return tg_err(-EINVAL, "layout: %llu given hot nodes but no list",
                      (unsigned long long)r->num_hot_given);
    for (uint64_t i = 0; r->hot_given && i < r->num_hot_given; i++)
        if (r->hot_given[i] >= r->num_nodes || (i && r->hot_given[i] <= r->hot_given[i - 1]))
            return tg_err(-EINVAL,
                          "layout: given hot node %llu (%u) is out of range or not ascending",
                          (unsigned long long)i, r->hot_given[i]);
    return 0;
}

static int check_trace(plan_t *p)
{
    const tg_cs_trace_t *t = p->t;
    if (!t || !t->off) return tg_err(-EINVAL, "layout trace: no offsets");
    uint32_t B = t->iters;
    if (B > MAX_BATCHES)
        return tg_err(-EINVAL, "layout trace: %u batches, at most %u", B, MAX_BATCHES);
    if (t->off[0] != 0)
        return tg_err(-EINVAL, "layout trace: off[0] = %llu, expected 0",
                      (unsigned long long)t->off[0]);
    for (uint32_t b = 0; b < B; b++)
        if (t->off[b + 1] < t->off[b])
            return tg_err(-EINVAL,
                          "layout trace: off[%u] = %llu < off[%u] = %llu, expected "
                          "non-decreasing offsets",
                          b + 1, (unsigned long long)t->off[b + 1], b,
                          (unsigned long long)t->off[b]);
    if (t->off[B] > MAX_ACCESSES)
        return tg_err(-EINVAL, "layout trace: %llu accesses, at most %llu",
                      (unsigned long long)t->off[B], MAX_ACCESSES);
    if (t->off[B] && !t->ids) return tg_err(-EINVAL, "layout trace: accesses but no ids");
    int rc = 0;
    uint64_t j = 0, N = p->L->cfg.num_nodes;
    for (uint32_t b = 0; rc == 0 && b < B; b++)
        for (; j < t->off[b + 1]; j++) {
            uint32_t v = t->ids[j];
            if (v >= N) {
                rc = tg_err(-EINVAL,
                            "layout trace: batch %u position %llu: node %u, expected < "
                            "%llu",
                            b, (unsigned long long)(j - t->off[b]), v, (unsigned long long)N);
                break;
            }
            if (p->nd[v].ix == b + 1) {
                rc = tg_err(-EINVAL,
                            "layout trace: batch %u position %llu: node %u again, "
                            "expected distinct ids within a batch",
                            b, (unsigned long long)(j - t->off[b]), v);
                break;
            }
            p->nd[v].ix = b + 1;
        }
    for (uint64_t k = 0; k < j; k++)
        p->nd[t->ids[k]].ix = 0;
    return rc;
}

/* ---------------------------------------------------------------- hot tier */

/* Counts accesses into st and chooses the hot nodes: the threshold count c such that fewer than
 * hot_rows nodes have a larger count, all of those plus the lowest ids of count c. st becomes
 * HOT or 0. */
static int choose_hot(plan_t *p)
{
    tg_layout_t *L = p->L;
    const tg_cs_trace_t *t = p->t;
    uint64_t N = L->cfg.num_nodes, T = t->off[t->iters];
    for (uint64_t j = 0; j < T; j++) {
        ahead(p->nd, t->ids, j, T);
        p->nd[t->ids[j]].st++;
    }
    if (L->cfg.hot_given) {
        /* the given set: exactly these nodes */
        L->H = L->cfg.num_hot_given;
        L->hot = held_alloc(L->budget, &L->reserved, L->H * 4, "layout: hot nodes (4 bytes each)");
        if (!L->hot) return -ENOMEM;
        if (L->H) memcpy(L->hot, L->cfg.hot_given, L->H * 4);
        for (uint64_t v = 0, i = 0; v < N; v++) {
            int hot = i < L->H && L->hot[i] == v;
            if (hot) L->hot_accesses += p->nd[v].st, i++;
            p->nd[v].st = hot ? HOT : 0;
        }
        return 0;
    }
    uint64_t hb = 8 * ((uint64_t)t->iters + 2);
    uint64_t *hist = held_alloc(L->budget, &p->temp_bytes, hb, "layout: count histogram");
    if (!hist) return -ENOMEM;
    memset(hist, 0, hb);
    L->peak = TG_MAX(L->peak, L->reserved + p->node_bytes + p->temp_bytes);
    for (uint64_t v = 0; v < N; v++)
        hist[p->nd[v].st]++;
    uint64_t want = L->cfg.hot_rows, above = 0;
    uint32_t c = t->iters;
    for (; c >= 1; c--) { /* above = nodes with count > c */
        if (above + hist[c] >= want) break;
        above += hist[c];
    }
    uint64_t at_c = c >= 1 ? want - above : 0; /* c = 0: every used node is hot */
    free(hist);
    if (L->budget) tg_budget_release(L->budget, hb);
    p->temp_bytes -= hb;
    L->H = c >= 1 ? want : above;
    L->hot = held_alloc(L->budget, &L->reserved, L->H * 4, "layout: hot nodes (4 bytes each)");
    if (!L->hot) return -ENOMEM;
    uint64_t h = 0;
    for (uint64_t v = 0; v < N; v++) {
        uint32_t n = p->nd[v].st;
        int hot = n >= 1 && (n > c || (n == c && at_c && at_c--));
        if (hot) L->hot[h++] = (uint32_t)v, L->hot_accesses += n;
        p->nd[v].st = hot ? HOT : 0;
    }
    return 0;
}

/* ---------------------------------------------------------------- classification */

/* Classifies segment k = [b0, b1) in two passes over its accesses. The first counts each non-hot
 * node's batches in ix. The second meets a node's accesses in batch order: at the first, a count
 * of 1 makes it a chunk row of that batch (ix back to 0), a count c >= 2 a cache row of the
 * segment (ix = VISIT | c - 1, the visits left, so that the last one sets it back to 0). Counts
 * go into ms (chunks padded to chunk_align). With fill, writes the chunk nodes at pk + pk_off[b]
 * and the cache nodes at cn + cs_off[k] (unsorted) and counts each node's outputs in st. npk[b]
 * gets the chunk sizes when npk. Returns the segment's cache rows. */
static uint64_t classify(plan_t *p, uint32_t k, uint32_t b0, uint32_t b1, int fill, uint64_t *npk,
                         measure_t *ms)
{
    const uint32_t *ids = p->t->ids;
    const uint64_t *off = p->t->off;
    node_t *nd = p->nd;
    tg_layout_t *L = p->L;
    uint64_t row = L->cfg.row_bytes, align = L->cfg.chunk_align, end = off[b1];
    for (uint64_t j = off[b0]; j < end; j++) {
        ahead(nd, ids, j, end);
        if (nd[ids[j]].st != HOT) nd[ids[j]].ix++;
    }
    uint64_t cache = 0, cbase = fill ? L->cs_off[k] : 0;
    for (uint32_t b = b0; b < b1; b++) {
        uint64_t m = 0, pbase = fill ? L->pk_off[b] : 0;
        for (uint64_t j = off[b]; j < off[b + 1]; j++) {
            ahead(nd, ids, j, end);
            uint32_t v = ids[j], c = nd[v].ix;
            if (nd[v].st == HOT) continue;
            if (c & VISIT) { /* a cache row met again */
                nd[v].ix = c == (VISIT | 1) ? 0 : c - 1;
                continue;
            }
            if (c == 1) {
                if (fill) L->pk[pbase + m] = v;
                m++;
                nd[v].ix = 0;
            } else {
                if (fill) L->cn[cbase + cache] = v;
                cache++;
                nd[v].ix = VISIT | (c - 1);
            }
            if (fill) nd[v].st++;
        }
        if (npk) npk[b] = m;
        ms->packed_rows += m;
        ms->chunk_max = TG_MAX(ms->chunk_max, m);
        ms->chunks += round_up(m * row, align);
    }
    ms->cache_rows += cache;
    ms->cache_max = TG_MAX(ms->cache_max, cache);
    return cache;
}

/* The exact disk bytes of segment size s and its counts; npk (B) gets the chunk sizes, ncs (K)
 * the segments' cache rows, when not NULL. */
static void measure(plan_t *p, uint32_t s, measure_t *m, uint64_t *npk, uint64_t *ncs)
{
    tg_layout_t *L = p->L;
    memset(m, 0, sizeof *m);
    for (uint32_t k = 0, b0 = 0; b0 < L->B; k++, b0 += s) {
        uint64_t c = classify(p, k, b0, L->B - b0 > s ? b0 + s : L->B, 0, npk, m);
        if (ncs) ncs[k] = c;
    }
    m->disk = round_up(m->cache_rows * L->cfg.row_bytes, L->cfg.chunk_align) + m->chunks;
}

/* ---------------------------------------------------------------- segment size */

static void add_step(tg_layout_t *L, uint32_t s, int exact, uint64_t bytes)
{
    uint64_t budget = L->cfg.disk_budget;
    if (L->nsteps < L->steps_cap)
        L->steps[L->nsteps++] = (tg_layout_step_t){.segment = s,
                                                   .exact = (uint16_t)exact,
                                                   .fits = !budget || bytes <= budget,
                                                   .disk_bytes = bytes};
}

/* Algorithm 2: the first s whose estimate (distinct non-hot nodes of the first s batches) x B /
 * s x row_bytes fits the budget; B if none. Leaves ix zero. */
static uint32_t estimate_segment(plan_t *p)
{
    tg_layout_t *L = p->L;
    const tg_cs_trace_t *t = p->t;
    uint64_t distinct = 0, row = L->cfg.row_bytes, budget = L->cfg.disk_budget;
    uint32_t B = L->B, s = 1;
    for (; s <= B; s++) {
        for (uint64_t j = t->off[s - 1]; j < t->off[s]; j++) {
            uint32_t v = t->ids[j];
            if (p->nd[v].st != HOT && !p->nd[v].ix) p->nd[v].ix = 1, distinct++;
        }
        u128 est = ((u128)distinct * row * B + s - 1) / s; /* rounded up: <= budget exactly */
        add_step(L, s, 0, est > UINT64_MAX ? UINT64_MAX : (uint64_t)est);
        if (est <= budget) break;
    }
    for (uint64_t j = 0; j < t->off[TG_MIN(s, B)]; j++)
        p->nd[t->ids[j]].ix = 0;
    return TG_MIN(s, B);
}

static int no_space(tg_layout_t *L, uint64_t need)
{
    char a[32], b[32];
    return tg_err(-ENOSPC,
                  "--disk-budget %llu (%s) is below the %llu bytes (%s) these batches need outside "
                  "the RAM cache (one copy of each row); give --disk-budget %llu or more, or more "
                  "--mem for the RAM cache",
                  (unsigned long long)L->cfg.disk_budget, tg_fmt_bytes(L->cfg.disk_budget, a, 32),
                  (unsigned long long)need, tg_fmt_bytes(need, b, 32), (unsigned long long)need);
}

/* Exact disk bytes of s, recorded as a step; its counts are left in the offset arrays (shifted
 * by one) and p->m, for set_offsets. */
static uint64_t probe(plan_t *p, uint32_t s)
{
    measure(p, s, &p->m, p->L->pk_off + 1, p->L->cs_off + 1);
    p->measured = s;
    add_step(p->L, s, 1, p->m.disk);
    return p->m.disk;
}

/* The segment size (see the header): the given one checked, or the search. */
static int choose_segment(plan_t *p)
{
    tg_layout_t *L = p->L;
    uint32_t B = L->B;
    uint64_t budget = L->cfg.disk_budget;
    if (B == 0) {
        L->seg = TG_MAX(L->cfg.segment, 1);
        return 0;
    }
    if (L->cfg.segment) {
        uint32_t s = TG_MIN(L->cfg.segment, B);
        uint64_t d = probe(p, s);
        L->seg = s;
        if (!budget || d <= budget) return 0;
        uint64_t need = s == B ? d : probe(p, B);
        if (need > budget) return no_space(L, need);
        char a[32];
        return tg_err(
            -ENOSPC,
            "--segment %u needs %llu bytes (%s) on disk, over --disk-budget %llu; give a "
            "larger --segment, leave it to the search, or give --disk-budget %llu or more",
            s, (unsigned long long)d, tg_fmt_bytes(d, a, 32), (unsigned long long)budget,
            (unsigned long long)d);
    }
    if (!budget) {
        L->seg = 1;
        return 0;
    }
    uint32_t s = L->search_segment = estimate_segment(p), fail = 0; /* s <= fail do not fit */
    for (;;) {
        uint64_t d = probe(p, s);
        if (d <= budget) break;
        if (s == B) return no_space(L, d);
        fail = s;
        if ((u128)d * 10 <= (u128)budget * 11) {
            s++;
        } else {
            u128 jump = ((u128)s * d + budget - 1) / budget;
            s = (uint32_t)TG_MIN(jump, (u128)B);
            s = TG_MAX(s, fail + 1);
        }
    }
    while (fail && s - fail > 1) { /* after a jump: the smallest fitting s above fail */
        uint32_t mid = fail + (s - fail) / 2;
        if (probe(p, mid) <= budget)
            s = mid;
        else
            fail = mid;
    }
    L->seg = s;
    return 0;
}

/* ---------------------------------------------------------------- the layout's lists */

/* The offset arrays, before the search that fills them: 24 bytes per batch (the chunks' rows and
 * bytes, the segments' first slots: at most one segment per batch). */
static int alloc_offsets(tg_layout_t *L)
{
    uint64_t B1 = (uint64_t)L->B + 1;
    uint64_t *a = held_alloc(L->budget, &L->reserved, 24 * B1,
                             "layout: chunk and segment offsets (24 bytes per batch)");
    if (!a) return -ENOMEM;
    L->pk_off = a, L->ck_off = a + B1, L->cs_off = a + 2 * B1;
    memset(a, 0, 24 * B1);
    return 0;
}

/* The offsets of segment size L->seg from its counts (measured again unless the last probe was
 * it): prefix sums of the chunks' rows, their padded bytes and the segments' cache rows. */
static void set_offsets(plan_t *p)
{
    tg_layout_t *L = p->L;
    uint32_t B = L->B;
    L->K = (uint32_t)(((uint64_t)B + L->seg - 1) / L->seg);
    if (p->measured != L->seg) measure(p, L->seg, &p->m, L->pk_off + 1, L->cs_off + 1);
    uint64_t row = L->cfg.row_bytes, align = L->cfg.chunk_align;
    L->pk_off[0] = L->ck_off[0] = L->cs_off[0] = 0;
    for (uint32_t b = 0; b < B; b++) {
        L->ck_off[b + 1] = L->ck_off[b] + round_up(L->pk_off[b + 1] * row, align);
        L->pk_off[b + 1] += L->pk_off[b];
    }
    for (uint32_t k = 0; k < L->K; k++)
        L->cs_off[k + 1] += L->cs_off[k];
}

/* Writes the chunk and cache node lists, each sorted, and the per-node output counts. */
static int fill_lists(plan_t *p, const measure_t *m)
{
    tg_layout_t *L = p->L;
    L->pk = held_alloc(L->budget, &L->reserved, m->packed_rows * 4,
                       "layout: packed chunk lists (4 bytes per packed row)");
    if (!L->pk) return -ENOMEM;
    L->cn = held_alloc(L->budget, &L->reserved, m->cache_rows * 8,
                       "layout: cache lists (8 bytes per cache row: node, slot)");
    if (!L->cn) return -ENOMEM;
    L->cslot = L->cn + m->cache_rows;
    uint64_t tb = 4 * TG_MAX(m->cache_max, m->chunk_max);
    uint32_t *tmp = held_alloc(L->budget, &p->temp_bytes, tb, "layout: radix sort scratch");
    if (!tmp) return -ENOMEM;
    L->peak = TG_MAX(L->peak, L->reserved + p->node_bytes + p->temp_bytes);
    for (uint32_t k = 0, b0 = 0; k < L->K; k++, b0 += L->seg) {
        uint32_t b1 = L->B - b0 > L->seg ? b0 + L->seg : L->B;
        measure_t unused = {0};
        classify(p, k, b0, b1, 1, NULL, &unused);
        sort_u32(L->cn + L->cs_off[k], tmp, L->cs_off[k + 1] - L->cs_off[k]);
        for (uint32_t b = b0; b < b1; b++)
            sort_u32(L->pk + L->pk_off[b], tmp, L->pk_off[b + 1] - L->pk_off[b]);
    }
    free(tmp);
    if (L->budget) tg_budget_release(L->budget, tb);
    p->temp_bytes -= tb;
    return 0;
}

/* ---------------------------------------------------------------- partitions */

/* Greedy cut over the nodes (see the header); with out, writes the bounds and target counts. */
static uint64_t cut_partitions(plan_t *p, uint32_t *lo, uint64_t *n)
{
    tg_layout_t *L = p->L;
    uint64_t N = L->cfg.num_nodes, row = L->cfg.row_bytes, cap = L->cfg.pack_bytes;
    uint64_t parts = 0, bytes = 0, targets = 0;
    for (uint64_t v = 0; v < N; v++) {
        /* a given hot set gets no targets (its rows are held already) */
        uint64_t outs = p->nd[v].st == HOT ? !L->cfg.hot_given : p->nd[v].st, b = (1 + outs) * row;
        if (v == 0 || (cap && bytes + b > cap)) {
            if (v && n) n[parts - 1] = targets;
            if (lo) lo[parts] = (uint32_t)v;
            parts++, bytes = 0, targets = 0;
        }
        bytes += b, targets += outs;
    }
    if (parts && n) n[parts - 1] = targets;
    if (lo) lo[parts] = (uint32_t)N;
    return parts;
}

static int partitions(plan_t *p)
{
    tg_layout_t *L = p->L;
    L->P = cut_partitions(p, NULL, NULL);
    uint64_t *a =
        held_alloc(L->budget, &L->reserved, 12 * L->P + 4, "layout: partitions (12 bytes each)");
    if (!a) return -ENOMEM;
    L->part_n = a, L->part_lo = (uint32_t *)(a + L->P);
    cut_partitions(p, L->part_lo, L->part_n);
    return 0;
}

/* ---------------------------------------------------------------- MinHash order */

typedef struct {
    uint64_t key; /* h_1 .. h_nh, h_1 most significant, `bits` bits each */
    uint64_t fp;  /* XOR of the batches' random words */
    uint32_t idx; /* cache index within the segment (node order) */
    uint32_t pad;
} rec_t;

static inline int rec_less(const rec_t *x, const rec_t *y)
{
    if (x->key != y->key) return x->key < y->key;
    if (x->fp != y->fp) return x->fp < y->fp;
    return x->idx < y->idx;
}

static inline unsigned rec_digit(const rec_t *x, int d)
{
    return (unsigned)((d < 8 ? x->fp >> (8 * d) : x->key >> (8 * (d - 8))) & 255);
}

/* Sorts r[0 .. n) by (key, fp, idx) where r comes in idx order: LSD radix by bytes, fp's then
 * the key's low kb bytes (stable, so idx breaks the ties), skipping bytes equal in every record;
 * tmp holds n. Short runs by insertion. */
static void sort_recs(rec_t *r, rec_t *tmp, size_t n, int kb)
{
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            rec_t x = r[i];
            size_t j = i;
            for (; j > 0 && rec_less(&x, &r[j - 1]); j--)
                r[j] = r[j - 1];
            r[j] = x;
        }
        return;
    }
    size_t cnt[16][256];
    int nd = 8 + kb;
    memset(cnt, 0, sizeof cnt);
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < nd; d++)
            cnt[d][rec_digit(&r[i], d)]++;
    rec_t *src = r, *dst = tmp;
    for (int d = 0; d < nd; d++) {
        size_t *c = cnt[d], sum = 0;
        if (c[rec_digit(&src[0], d)] == n) continue;
        for (int k = 0; k < 256; k++) {
            size_t x = c[k];
            c[k] = sum, sum += x;
        }
        for (size_t i = 0; i < n; i++)
            dst[c[rec_digit(&src[i], d)]++] = src[i];
        rec_t *x = src;
        src = dst, dst = x;
    }
    if (src != r) memcpy(r, src, n * sizeof *r);
}

/* Bits for values < s; the hashes used: as many of num_hashes as fit 64 bits. */
static uint32_t hash_bits(uint32_t s, uint32_t *nh)
{
    uint32_t bits = 1;
    while (bits < 32 && (1ull << bits) < s)
        bits++;
    *nh = TG_MIN(*nh, 64 / bits);
    return bits;
}

/* Segment k's MinHash keys into r[0 .. C) (C = its cache rows, ix marks them). perm holds
 * TG_LAYOUT_MAX_HASHES x seg u32 and rnd seg u64 of scratch. */
static int minhash_keys(plan_t *p, uint32_t k, uint32_t b0, uint32_t b1, rec_t *r, uint64_t C,
                        uint32_t *perm, uint64_t *rnd)
{
    tg_layout_t *L = p->L;
    uint32_t n = b1 - b0, nh = L->cfg.num_hashes, bits = hash_bits(n, &nh);
    uint64_t mask = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
    tg_rng_t rng;
    tg_rng_seed2(&rng, L->cfg.seed, k);
    for (uint32_t j = 0; j < nh; j++) {
        for (uint32_t i = 0; i < n; i++)
            perm[j * n + i] = i;
        tg_rng_shuffle_u32(&rng, perm + (size_t)j * n, n);
    }
    for (uint32_t i = 0; i < n; i++)
        rnd[i] = tg_rng_u64(&rng);
    uint64_t init = nh * bits == 64 ? UINT64_MAX : (1ull << (nh * bits)) - 1;
    for (uint64_t c = 0; c < C; c++)
        r[c] = (rec_t){.key = init, .fp = 0, .idx = (uint32_t)c};
    const uint32_t *ids = p->t->ids;
    uint64_t end = p->t->off[b1];
    for (uint32_t i = 0; i < n; i++)
        for (uint64_t j = p->t->off[b0 + i]; j < p->t->off[b0 + i + 1]; j++) {
            ahead(p->nd, ids, j, end);
            if (j + AHEAD / 2 < end && p->nd[ids[j + AHEAD / 2]].ix) /* its record, next */
                __builtin_prefetch(&r[p->nd[ids[j + AHEAD / 2]].ix - 1], 1, 3);
            uint32_t x = p->nd[ids[j]].ix;
            if (!x) continue;
            rec_t *e = &r[x - 1];
            for (uint32_t h = 0; h < nh; h++) {
                uint32_t sh = (nh - 1 - h) * bits;
                uint64_t cur = (e->key >> sh) & mask, v = perm[h * n + i];
                if (v < cur) e->key = (e->key & ~(mask << sh)) | (v << sh);
            }
            e->fp ^= rnd[i];
        }
    return (int)(nh * bits + 7) / 8;
}

/* Sorts each partition's run of segment k's cache nodes by key and gives the slots. */
static void assign_slots(tg_layout_t *L, uint32_t k, rec_t *r, rec_t *tmp, int kb)
{
    uint64_t base = L->cs_off[k], C = L->cs_off[k + 1] - base;
    const uint32_t *cn = L->cn + base;
    for (uint64_t i0 = 0, i1; i0 < C; i0 = i1) {
        uint64_t part = lower_bound(L->part_lo, L->P + 1, cn[i0] + 1) - 1;
        uint32_t hi = L->part_lo[part + 1];
        for (i1 = i0 + 1; i1 < C && cn[i1] < hi; i1++)
            ;
        sort_recs(r + i0, tmp, i1 - i0, kb);
    }
    for (uint64_t i = 0; i < C; i++)
        L->cslot[base + r[i].idx] = (uint32_t)(base + i);
}

/* Read estimate of segment k's batches, with the slots (mh) and in node order; s holds 3 x the
 * segment's cache rows u32. */
static void estimate_reads(plan_t *p, uint32_t k, uint32_t b0, uint32_t b1, uint32_t *s)
{
    tg_layout_t *L = p->L;
    uint64_t base = L->cs_off[k], C = L->cs_off[k + 1] - base, row = L->cfg.row_bytes;
    uint64_t page = L->cfg.page_bytes;
    uint32_t *a = s, *b = s + C, *tmp = s + 2 * C;
    const uint32_t *ids = p->t->ids;
    uint64_t end = p->t->off[b1];
    for (uint32_t bt = b0; bt < b1; bt++) {
        size_t n = 0;
        for (uint64_t j = p->t->off[bt]; j < p->t->off[bt + 1]; j++) {
            ahead(p->nd, ids, j, end);
            if (j + AHEAD / 2 < end && p->nd[ids[j + AHEAD / 2]].ix) /* its slot, next */
                __builtin_prefetch(&L->cslot[base + p->nd[ids[j + AHEAD / 2]].ix - 1], 0, 3);
            uint32_t x = p->nd[ids[j]].ix;
            if (x) a[n] = L->cslot[base + x - 1], b[n++] = (uint32_t)(base + x - 1);
        }
        sort_u32(a, tmp, n);
        sort_u32(b, tmp, n);
        uint64_t chunk = L->ck_off[bt + 1] - L->ck_off[bt];
        L->read += chunk + pages_touched(a, n, row, page) * page;
        L->read_nomh += chunk + pages_touched(b, n, row, page) * page;
    }
}

static int order_caches(plan_t *p, const measure_t *m)
{
    tg_layout_t *L = p->L;
    uint64_t C = m->cache_max;
    uint64_t tb = 2 * C * sizeof(rec_t) + (uint64_t)L->seg * (4 * TG_LAYOUT_MAX_HASHES + 8);
    rec_t *r = held_alloc(L->budget, &p->temp_bytes, tb,
                          "layout: MinHash keys and their sort (48 bytes per cache row of the "
                          "largest segment)");
    if (!r) return -ENOMEM;
    L->peak = TG_MAX(L->peak, L->reserved + p->node_bytes + p->temp_bytes);
    uint64_t *rnd = (uint64_t *)(r + 2 * C); /* the estimates' lists (12 bytes a row) reuse r */
    uint32_t *perm = (uint32_t *)(rnd + L->seg);
    for (uint32_t k = 0, b0 = 0; k < L->K; k++, b0 += L->seg) {
        uint32_t b1 = L->B - b0 > L->seg ? b0 + L->seg : L->B;
        uint64_t base = L->cs_off[k], Ck = L->cs_off[k + 1] - base;
        for (uint64_t i = 0; i < Ck; i++)
            p->nd[L->cn[base + i]].ix = (uint32_t)i + 1;
        int kb = minhash_keys(p, k, b0, b1, r, Ck, perm, rnd);
        assign_slots(L, k, r, r + C, kb);
        estimate_reads(p, k, b0, b1, (uint32_t *)r);
        for (uint64_t i = 0; i < Ck; i++)
            p->nd[L->cn[base + i]].ix = 0;
    }
    free(r);
    if (L->budget) tg_budget_release(L->budget, tb);
    p->temp_bytes -= tb;
    return 0;
}

/* ---------------------------------------------------------------- public */

uint64_t tg_layout_bytes(const tg_layout_cfg_t *cfg, uint32_t B, uint64_t T, uint64_t *plan_peak)
{
    uint64_t N = cfg->num_nodes, row = TG_MAX(cfg->row_bytes, 1);
    uint64_t H = cfg->hot_given ? cfg->num_hot_given : TG_MIN(cfg->hot_rows, T);
    uint64_t parts = 1;
    if (cfg->pack_bytes) {
        u128 total = (u128)(N + T + H) * row;
        u128 bound = 2 * ((total + cfg->pack_bytes - 1) / cfg->pack_bytes) + 1;
        parts = bound < N ? (uint64_t)bound : TG_MAX(N, 1);
    }
    uint64_t kept = 4 * H + 4 * T + 16 * ((uint64_t)B + 1) + 8 * ((uint64_t)B + 1) + 12 * parts +
                    4 + sizeof(tg_layout_step_t) * (2 * (uint64_t)B + 2);
    if (plan_peak) {
        uint64_t cmax = TG_MIN(N, T / 2), longest = TG_MIN(N, T);
        uint64_t temps = TG_MAX(48 * cmax + (4 * TG_LAYOUT_MAX_HASHES + 8) * (uint64_t)B,
                                4 * TG_MAX(cmax, longest));
        *plan_peak = kept + 8 * N + temps;
    }
    return kept;
}

static int plan_steps(plan_t *p)
{
    double t[6];
    t[0] = tg_now();
    int rc = choose_hot(p);
    if (rc == 0) rc = alloc_offsets(p->L);
    t[1] = tg_now();
    if (rc == 0) rc = choose_segment(p);
    t[2] = tg_now();
    if (rc == 0) {
        set_offsets(p);
        rc = fill_lists(p, &p->m);
    }
    t[3] = tg_now();
    if (rc == 0) rc = partitions(p);
    t[4] = tg_now();
    if (rc == 0) rc = order_caches(p, &p->m);
    t[5] = tg_now();
    if (rc == 0)
        tg_log_debug("layout: planned in %.2f s: hot %.2f, segment %.2f (%u steps), lists %.2f, "
                     "partitions %.2f, MinHash order and estimates %.2f",
                     t[5] - t[0], t[1] - t[0], t[2] - t[1], p->L->nsteps, t[3] - t[2], t[4] - t[3],
                     t[5] - t[4]);
    return rc;
}

int tg_layout_plan(tg_layout_t **out, const tg_cs_trace_t *t, const tg_layout_cfg_t *cfg,
                   tg_budget_t *budget)
{
    *out = NULL;
    tg_layout_cfg_t c;
    int rc = check_cfg(cfg, &c);
    if (rc < 0) return rc;
    if (!t || !t->off) return tg_err(-EINVAL, "layout trace: no offsets");
    uint64_t lb = sizeof(tg_layout_t) + sizeof(tg_layout_step_t) * (2 * (uint64_t)t->iters + 2);
    uint64_t reserved = 0;
    tg_layout_t *L = held_alloc(budget, &reserved, lb, "layout: the layout and its search steps");
    if (!L) return -ENOMEM;
    memset(L, 0, sizeof *L);
    L->cfg = c, L->budget = budget, L->reserved = reserved;
    L->steps = (tg_layout_step_t *)(L + 1), L->steps_cap = 2 * t->iters + 2;
    L->B = t->iters;
    plan_t p = {.t = t, .L = L, .node_bytes = 8 * c.num_nodes};
    uint64_t nb = 0;
    p.nd = held_alloc(budget, &nb, p.node_bytes,
                      "layout: per-node counts and marks (8 bytes "
                      "per node)");
    if (!p.nd) {
        tg_layout_destroy(L);
        return -ENOMEM;
    }
    memset(p.nd, 0, (size_t)p.node_bytes);
    rc = check_trace(&p);
    if (rc == 0) {
        L->accesses = t->off[t->iters];
        rc = plan_steps(&p);
    }
    free(p.nd);
    if (budget) tg_budget_release(budget, nb);
    if (rc < 0) {
        tg_layout_destroy(L);
        return rc;
    }
    L->peak = TG_MAX(L->peak, L->reserved + p.node_bytes);
    *out = L;
    return 0;
}

void tg_layout_destroy(tg_layout_t *L)
{
    if (!L) return;
    free(L->hot);
    free(L->pk_off);
    free(L->pk);
    free(L->cn);
    free(L->part_n);
    if (L->budget) tg_budget_release(L->budget, L->reserved);
    free(L);
}

void tg_layout_summary(const tg_layout_t *L, tg_layout_summary_t *s)
{
    memset(s, 0, sizeof *s);
    uint64_t row = L->cfg.row_bytes;
    s->batches = L->B, s->segment = L->seg, s->num_segments = L->K;
    s->num_hashes = L->cfg.num_hashes, s->search_segment = L->search_segment;
    s->num_partitions = L->P;
    s->hot_rows = L->H;
    s->cache_rows = L->K ? L->cs_off[L->K] : 0;
    s->packed_rows = L->B ? L->pk_off[L->B] : 0;
    s->cache_file_bytes = round_up(s->cache_rows * row, L->cfg.chunk_align);
    s->chunk_file_bytes = L->B ? L->ck_off[L->B] : 0;
    s->disk_bytes = s->cache_file_bytes + s->chunk_file_bytes;
    s->accesses = L->accesses, s->hot_accesses = L->hot_accesses;
    s->needed_bytes = (L->accesses - L->hot_accesses) * row;
    s->read_bytes = L->read, s->read_bytes_nominhash = L->read_nomh;
    if (s->needed_bytes) {
        s->read_amp = (double)L->read / (double)s->needed_bytes;
        s->read_amp_nominhash = (double)L->read_nomh / (double)s->needed_bytes;
    }
    s->num_steps = L->nsteps, s->steps = L->steps;
    s->reserved = L->reserved, s->plan_peak_bytes = L->peak;
}

const uint32_t *tg_layout_hot(const tg_layout_t *L, uint64_t *n)
{
    *n = L->H;
    return L->hot;
}

int tg_layout_partition(const tg_layout_t *L, uint64_t p, uint32_t *lo, uint32_t *hi,
                        uint64_t *ntargets)
{
    if (p >= L->P)
        return tg_err(-EINVAL, "layout: partition %llu, expected < %llu", (unsigned long long)p,
                      (unsigned long long)L->P);
    *lo = L->part_lo[p], *hi = L->part_lo[p + 1], *ntargets = L->part_n[p];
    return 0;
}

/* Every target of nodes [lo, hi) in (out, off) order: the hot slots, the segments' cache slots
 * (regions ascending), the chunks' rows (chunks ascending). Without out, counts them per node
 * into pos[v - lo + 1]; with out, writes each at pos[v - lo]++. */
static void put(tg_pack_target_t *out, uint64_t *pos, uint32_t lo, uint32_t v, uint32_t o,
                uint64_t off)
{
    if (out)
        out[pos[v - lo]++] = (tg_pack_target_t){.node = v, .out = o, .off = off};
    else
        pos[v - lo + 1]++;
}

static void partition_targets(const tg_layout_t *L, uint32_t lo, uint32_t hi, uint64_t *pos,
                              tg_pack_target_t *out)
{
    uint64_t row = L->cfg.row_bytes;
    /* a given hot set is held already: no targets */
    for (uint64_t i = lower_bound(L->hot, L->H, lo);
         !L->cfg.hot_given && i < L->H && L->hot[i] < hi; i++)
        put(out, pos, lo, L->hot[i], TG_LAYOUT_HOT, i * row);
    for (uint32_t k = 0; k < L->K; k++) {
        uint64_t a = L->cs_off[k], n = L->cs_off[k + 1] - a;
        for (uint64_t i = a + lower_bound(L->cn + a, n, lo); i < a + n && L->cn[i] < hi; i++)
            put(out, pos, lo, L->cn[i], TG_LAYOUT_CACHE, (uint64_t)L->cslot[i] * row);
    }
    for (uint32_t b = 0; b < L->B; b++) {
        uint64_t a = L->pk_off[b], n = L->pk_off[b + 1] - a;
        for (uint64_t i = a + lower_bound(L->pk + a, n, lo); i < a + n && L->pk[i] < hi; i++)
            put(out, pos, lo, L->pk[i], TG_LAYOUT_CHUNK, L->ck_off[b] + (i - a) * row);
    }
}

int tg_layout_targets(const tg_layout_t *L, uint64_t p, tg_pack_target_t *out, uint64_t cap,
                      uint64_t *n)
{
    uint32_t lo = 0, hi = 0;
    uint64_t need = 0;
    *n = 0;
    int rc = tg_layout_partition(L, p, &lo, &hi, &need);
    if (rc < 0) return rc;
    if (cap < need)
        return tg_err(-EINVAL, "layout: partition %llu has %llu targets, room for %llu",
                      (unsigned long long)p, (unsigned long long)need, (unsigned long long)cap);
    uint64_t range = (uint64_t)hi - lo, held = 0;
    uint64_t *pos = held_alloc(L->budget, &held, 8 * (range + 1),
                               "layout: a partition's target positions (8 bytes per node)");
    if (!pos) return -ENOMEM;
    memset(pos, 0, 8 * (range + 1));
    partition_targets(L, lo, hi, pos, NULL);
    for (uint64_t i = 0; i < range; i++)
        pos[i + 1] += pos[i];
    *n = pos[range];
    partition_targets(L, lo, hi, pos, out);
    free(pos);
    if (L->budget) tg_budget_release(L->budget, held);
    return 0;
}

uint64_t tg_layout_loc_bytes(uint64_t cap)
{
    return 32 * cap;
}

int tg_layout_loc_init(tg_layout_loc_t *loc, uint64_t cap, tg_budget_t *budget)
{
    memset(loc, 0, sizeof *loc);
    uint64_t held = 0;
    uint64_t *a = held_alloc(budget, &held, tg_layout_loc_bytes(cap),
                             "layout: a batch's locations (32 bytes per row)");
    if (!a) return -ENOMEM;
    loc->cap = cap, loc->budget = budget, loc->reserved = held;
    loc->cache_off = a, loc->tmp = a + cap;
    uint32_t *u = (uint32_t *)(a + 2 * cap);
    loc->hot_pos = u, loc->hot_slot = u + cap, loc->cache_pos = u + 2 * cap;
    loc->chunk_pos = u + 3 * cap;
    return 0;
}

void tg_layout_loc_free(tg_layout_loc_t *loc)
{
    if (!loc) return;
    free(loc->cache_off);
    if (loc->budget) tg_budget_release(loc->budget, loc->reserved);
    memset(loc, 0, sizeof *loc);
}

/* The first index >= i of a[0 .. n) (ascending) whose value is >= v, galloping from i: O(log
 * of the distance), so a sorted walk over a long list costs what it skips in logarithms. */
static uint64_t gallop(const uint32_t *a, uint64_t n, uint64_t i, uint32_t v)
{
    uint64_t hi = i, step = 1; /* a[j] < v for every j < i */
    while (hi < n && a[hi] < v)
        i = hi + 1, hi += step, step *= 2;
    return i + lower_bound(a + i, TG_MIN(hi, n) - i, v);
}

/* The batch's ids sorted with their positions, walked once beside the sorted hot list, the
 * batch's chunk list and its segment's cache list; cache hits are kept in place as (slot,
 * position) and sorted by slot at the end. */
int tg_layout_locate(const tg_layout_t *L, uint32_t b, const uint32_t *ids, uint64_t n,
                     tg_layout_loc_t *loc)
{
    loc->n_hot = loc->n_cache = loc->n_chunk = 0;
    if (b >= L->B) return tg_err(-EINVAL, "layout: batch %u, expected < %u", b, L->B);
    if (n > loc->cap)
        return tg_err(-EINVAL, "layout: batch %u has %llu rows, the locations room for %llu", b,
                      (unsigned long long)n, (unsigned long long)loc->cap);
    uint32_t k = b / L->seg;
    uint64_t pa = L->pk_off[b], pn = L->pk_off[b + 1] - pa, row = L->cfg.row_bytes;
    uint64_t ca = L->cs_off[k], cnum = L->cs_off[k + 1] - ca, nh = 0, nc = 0, nk = 0;
    const uint32_t *pk = L->pk + pa, *cn = L->cn + ca;
    uint64_t *A = loc->cache_off, hi = 0, pi = 0, ci = 0, prev = UINT64_MAX;
    for (uint64_t r = 0; r < n; r++)
        A[r] = (uint64_t)ids[r] << 32 | r;
    sort_u64_hi(A, loc->tmp, n);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)(A[i] >> 32), r = (uint32_t)A[i];
        if (v == prev >> 32)
            return tg_err(-EINVAL, "layout: batch %u position %u: node %u again (also at %u)", b, r,
                          v, (uint32_t)prev);
        prev = A[i];
        if ((hi = gallop(L->hot, L->H, hi, v)) < L->H && L->hot[hi] == v) {
            loc->hot_pos[nh] = r, loc->hot_slot[nh++] = (uint32_t)hi;
        } else if ((pi = gallop(pk, pn, pi, v)) < pn && pk[pi] == v) {
            loc->chunk_pos[pi] = r, nk++;
        } else if ((ci = gallop(cn, cnum, ci, v)) < cnum && cn[ci] == v) {
            A[nc++] = (uint64_t)L->cslot[ca + ci] << 32 | r; /* nc <= i: A[i] is read already */
        } else {
            return tg_err(-EINVAL,
                          "layout: batch %u position %u: node %u is not one of the batch's rows "
                          "in this layout",
                          b, r, v);
        }
    }
    if (nk != pn)
        return tg_err(-EINVAL, "layout: batch %u: its ids name %llu of its chunk's %llu rows", b,
                      (unsigned long long)nk, (unsigned long long)pn);
    sort_u64_hi(A, loc->tmp, nc);
    for (uint64_t i = 0; i < nc; i++) {
        loc->cache_pos[i] = (uint32_t)A[i];
        loc->cache_off[i] = (A[i] >> 32) * row; /* the same array: entry i read first */
    }
    loc->n_hot = nh, loc->n_cache = nc, loc->n_chunk = nk;
    loc->chunk_off = L->ck_off[b];
    loc->chunk_bytes = pn * row;
    loc->chunk_read = L->ck_off[b + 1] - L->ck_off[b];
    return 0;
}
