/* Ginex's changeset precomputation (see tiergnn/changeset.h): the paper's three passes over the
 * trace. Passes 1 and 2 build the per-node list of access iterations (ptr, iters); pass 3
 * simulates Belady's cache with it.
 *
 * The cache of pass 3 is a bucket queue by next access rather than a binary heap: a key is an
 * iteration (S values) or "never" (bucket S), so a node moves between buckets in O(1) and the
 * largest key is found by walking down from the highest bucket used (at most S steps per
 * iteration, as it only moves down while the iteration evicts). A bucket is a stack of chunks of
 * node ids and is never searched: at iteration i bucket i holds exactly the cached nodes accessed
 * at i (a key is the next access), which all get a new key, so the bucket is dropped whole and its
 * nodes pushed again as the accesses find them cached; evictions pop the top of the highest
 * non-empty bucket. The misses to insert are chained by key and inserted in ascending key order,
 * so a row inserted at iteration i is never evicted at iteration i (the evicted row has a larger
 * key than every row inserted before it), and the iteration's in and out lists are exactly
 * C_{i+1} \ C_i and C_i \ C_{i+1}.
 *
 * Workspace: a node's ptr and its cached mark side by side, one cache line for both, zero between
 * calls; every call leaves them so, on errors too. tg_cs_trace_check borrows them as "seen at
 * iteration" and "at position" marks.
 *
 * The passes are bound by random accesses to the node entries and iters (tens of MB for the
 * traces Ginex computes), so they prefetch a few accesses ahead: a node's entry, then the iters
 * entry it points to. */
#include "tiergnn/changeset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MSB 0x80000000u
#define NEVER 0x7FFFFFFFu /* the key "not accessed again": the dummy entry without its MSB */
#define NIL UINT32_MAX
#define MAX_ITERS (NEVER - 1)
#define MAX_ACCESSES (UINT32_MAX - 1) /* iters has T + 1 entries, indexed by u32 */
#define AHEAD 16   /* accesses prefetched ahead (twice that for the node entry) */
#define CHUNK 256u /* node ids per chunk of a bucket */

typedef struct {
    uint32_t ptr; /* pass 1: access count; then the index in iters of the next access */
    uint32_t in;  /* cached: 0 = no; else 1, or for a node of the initial state its entry + 1 */
} node_t;

struct tg_cs_ws {
    uint64_t n;
    node_t *nd; /* (n) */
    tg_budget_t *budget;
    uint64_t reserved;
};

/* Memory for the random accesses: 2 MiB aligned and in huge pages where the kernel gives them
 * (madvise mode), so that the passes miss the TLB less. NULL on failure; free with free(). */
static void *big_alloc(size_t bytes)
{
    size_t huge = (size_t)2 << 20;
    void *p = tg_aligned_alloc(bytes >= huge ? huge : 64, bytes ? bytes : 1);
    if (p && bytes >= huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static inline void prefetch(const void *p)
{
    __builtin_prefetch(p, 1, 3);
}

uint64_t tg_cs_ws_bytes(uint64_t num_nodes)
{
    return num_nodes * sizeof(node_t);
}

int tg_cs_ws_create(tg_cs_ws_t **out, uint64_t num_nodes, tg_budget_t *budget)
{
    *out = NULL;
    if (num_nodes > UINT32_MAX)
        return tg_err(-EINVAL, "changeset: %llu nodes, at most %u (u32 ids)",
                      (unsigned long long)num_nodes, UINT32_MAX);
    uint64_t bytes = tg_cs_ws_bytes(num_nodes);
    int rc =
        budget ? tg_budget_reserve(budget, bytes, "changeset workspace (8 bytes per node)") : 0;
    if (rc < 0) return rc;
    tg_cs_ws_t *ws = calloc(1, sizeof *ws);
    size_t nb = (size_t)TG_MAX(num_nodes, 1) * sizeof(node_t);
    if (ws && (ws->nd = big_alloc(nb))) memset(ws->nd, 0, nb);
    if (!ws || !ws->nd) {
        free(ws);
        if (budget) tg_budget_release(budget, bytes);
        return tg_err(-ENOMEM, "changeset: out of memory for the workspace (%llu bytes)",
                      (unsigned long long)bytes);
    }
    ws->n = num_nodes;
    ws->budget = budget;
    ws->reserved = budget ? bytes : 0;
    *out = ws;
    return 0;
}

void tg_cs_ws_destroy(tg_cs_ws_t *ws)
{
    if (!ws) return;
    free(ws->nd);
    if (ws->budget) tg_budget_release(ws->budget, ws->reserved);
    free(ws);
}

/* The shape of t: off[0] = 0, offsets non-decreasing, sizes that fit the u32 arrays. */
static int check_offsets(const tg_cs_trace_t *t)
{
    if (!t || !t->off) return tg_err(-EINVAL, "changeset trace: no offsets");
    uint32_t S = t->iters;
    if (S > MAX_ITERS)
        return tg_err(-EINVAL, "changeset trace: %u iterations, at most %u", S, MAX_ITERS);
    if (t->off[0] != 0)
        return tg_err(-EINVAL, "changeset trace: off[0] = %llu, expected 0",
                      (unsigned long long)t->off[0]);
    for (uint32_t i = 0; i < S; i++)
        if (t->off[i + 1] < t->off[i])
            return tg_err(-EINVAL,
                          "changeset trace: off[%u] = %llu < off[%u] = %llu, expected "
                          "non-decreasing offsets",
                          i + 1, (unsigned long long)t->off[i + 1], i,
                          (unsigned long long)t->off[i]);
    if (t->off[S] > MAX_ACCESSES)
        return tg_err(-EINVAL, "changeset trace: %llu accesses, at most %u",
                      (unsigned long long)t->off[S], MAX_ACCESSES);
    if (t->off[S] && !t->ids)
        return tg_err(-EINVAL, "changeset trace: %llu accesses but no ids",
                      (unsigned long long)t->off[S]);
    return 0;
}

static int bad_id(const tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint32_t i, uint64_t j)
{
    return tg_err(-EINVAL, "changeset trace: iteration %u position %llu: node %u, expected < %llu",
                  i, (unsigned long long)(j - t->off[i]), t->ids[j], (unsigned long long)ws->n);
}

static int twice(const tg_cs_trace_t *t, uint32_t i, uint64_t first, uint64_t second)
{
    return tg_err(-EINVAL,
                  "changeset trace: iteration %u: node %u at positions %llu and %llu, "
                  "expected distinct ids within an iteration",
                  i, t->ids[first], (unsigned long long)(first - t->off[i]),
                  (unsigned long long)(second - t->off[i]));
}

int tg_cs_trace_check(tg_cs_ws_t *ws, const tg_cs_trace_t *t)
{
    int rc = check_offsets(t);
    if (rc < 0) return rc;
    /* ptr = iteration + 1 where the node was last seen, in = its position there. */
    uint64_t j = 0, T = t->off[t->iters];
    for (uint32_t i = 0; rc == 0 && i < t->iters; i++) {
        for (; j < t->off[i + 1]; j++) {
            uint32_t v = t->ids[j];
            if (v >= ws->n) {
                rc = bad_id(ws, t, i, j);
                break;
            }
            if (ws->nd[v].ptr == i + 1) {
                rc = twice(t, i, t->off[i] + ws->nd[v].in, j);
                break;
            }
            ws->nd[v] = (node_t){i + 1, (uint32_t)(j - t->off[i])};
        }
    }
    for (uint64_t k = 0; k < TG_MIN(j, T); k++) {
        uint32_t v = t->ids[k];
        if (v < ws->n) ws->nd[v] = (node_t){0, 0};
    }
    return rc;
}

int tg_cs_init_state(tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint64_t entries, const uint32_t *prev,
                     uint64_t n_prev, uint32_t **c0, uint64_t *n0)
{
    enum { PREV = 1, SEEN = 2 };
    *c0 = NULL;
    *n0 = 0;
    int rc = check_offsets(t);
    if (rc < 0) return rc;
    for (uint64_t k = 0; k < n_prev; k++)
        if (prev[k] >= ws->n)
            return tg_err(-EINVAL, "changeset: previous state entry %llu: node %u, expected < %llu",
                          (unsigned long long)k, prev[k], (unsigned long long)ws->n);
    uint64_t T = t->off[t->iters], cap = TG_MIN(TG_MIN(entries, T), ws->n), cnt = 0;
    uint32_t *c = malloc((size_t)TG_MAX(cap, 1) * sizeof *c);
    if (!c)
        return tg_err(-ENOMEM, "changeset: out of memory for an initial state of %llu ids",
                      (unsigned long long)cap);
    node_t *nd = ws->nd;
    for (uint64_t k = 0; k < n_prev; k++)
        nd[prev[k]].ptr = PREV;
    /* Iteration by iteration: first the nodes of prev first accessed here, then the others. */
    uint64_t end = 0;
    for (uint32_t i = 0; rc == 0 && cnt < cap && i < t->iters; i++) {
        uint64_t a = t->off[i], b = t->off[i + 1];
        for (uint64_t j = a; j < b && cnt < cap; j++) {
            uint32_t v = t->ids[j];
            if (v >= ws->n) {
                rc = bad_id(ws, t, i, j);
                break;
            }
            if (nd[v].ptr == PREV) nd[v].ptr |= SEEN, c[cnt++] = v;
        }
        for (uint64_t j = a; rc == 0 && j < b && cnt < cap; j++) {
            uint32_t v = t->ids[j];
            if (!(nd[v].ptr & SEEN)) nd[v].ptr |= SEEN, c[cnt++] = v;
        }
        end = b;
    }
    for (uint64_t j = 0; j < end; j++)
        if (t->ids[j] < ws->n) nd[t->ids[j]].ptr = 0;
    for (uint64_t k = 0; k < n_prev; k++)
        nd[prev[k]].ptr = 0;
    if (rc < 0) {
        free(c);
        return rc;
    }
    *c0 = c;
    *n0 = cnt;
    return 0;
}

/* ---------------------------------------------------------------- simulation */

typedef struct {
    tg_cs_ws_t *ws;
    const tg_cs_trace_t *t;
    uint32_t S, T;
    uint32_t cap, used; /* cache entries: min(entries, distinct candidates); in use */
    uint32_t top;       /* >= the highest non-empty bucket */
    uint32_t longest;   /* accesses of the longest iteration */
    uint32_t *iters;    /* (T + 1) pass 2: every node's access iterations, CSR by node */
    /* Bucket b (S = never) is a stack of chunks of CHUNK node ids, all but the top one full. */
    uint32_t *btop;  /* (S + 1) top chunk, NIL = empty */
    uint32_t *bfill; /* (S + 1) ids in the top chunk */
    uint32_t *cent;  /* (nchunks, CHUNK) */
    uint32_t *cnext; /* (nchunks) the chunk below, or the next free one */
    uint32_t nchunks, cfree;
    uint32_t *cv, *cp; /* (longest) misses to insert: node, position in ids_i */
    uint32_t *cn;      /* (longest) next miss with the same key, NIL = last */
    uint32_t *chead;   /* (S + 1) first miss with key b */
    uint64_t in_cap, out_cap, temp_bytes;
    void *block;
} sim_t;

/* Pass 1: each node's access count into ptr; the trace's ids checked against num_nodes. */
static int count_accesses(sim_t *s, uint32_t *distinct)
{
    const tg_cs_trace_t *t = s->t;
    node_t *nd = s->ws->nd;
    uint32_t nd_count = 0, longest = 0;
    for (uint32_t i = 0; i < s->S; i++) {
        longest = TG_MAX(longest, (uint32_t)(t->off[i + 1] - t->off[i]));
        for (uint64_t j = t->off[i]; j < t->off[i + 1]; j++) {
            uint32_t v = t->ids[j];
            if (j + AHEAD < s->T && t->ids[j + AHEAD] < s->ws->n) prefetch(&nd[t->ids[j + AHEAD]]);
            if (v >= s->ws->n) {
                memset(nd, 0, (size_t)s->ws->n * sizeof *nd);
                return bad_id(s->ws, t, i, j);
            }
            nd_count += nd[v].ptr++ == 0;
        }
    }
    *distinct = nd_count;
    s->longest = longest;
    return 0;
}

/* Pass 2: ptr = the exclusive prefix sum of the counts, iters filled through it, then ptr moved
 * back to the start of each list, whose first entry gets the MSB. A node never accessed points
 * at the dummy entry (in the paper it would point at the next node's list). */
static void build_iters(sim_t *s)
{
    const uint32_t *ids = s->t->ids;
    const uint64_t *off = s->t->off;
    node_t *nd = s->ws->nd;
    uint32_t *iters = s->iters, sum = 0, T = s->T;
    uint64_t n = s->ws->n;
    for (uint64_t v = 0; v < n; v++) {
        uint32_t c = nd[v].ptr;
        nd[v].ptr = sum;
        sum += c;
    }
    for (uint32_t i = 0; i < s->S; i++)
        for (uint64_t j = off[i]; j < off[i + 1]; j++) {
            if (j + 2 * AHEAD < T) prefetch(&nd[ids[j + 2 * AHEAD]]);
            if (j + AHEAD < T) prefetch(&iters[nd[ids[j + AHEAD]].ptr]);
            iters[nd[ids[j]].ptr++] = i;
        }
    uint32_t start = 0;
    for (uint64_t v = 0; v < n; v++) {
        uint32_t end = nd[v].ptr;
        if (end == start) {
            nd[v].ptr = T;
        } else {
            nd[v].ptr = start;
            iters[start] |= MSB;
            start = end;
        }
    }
    iters[T] = UINT32_MAX;
}

static inline uint32_t bucket_of(const sim_t *s, uint32_t key)
{
    return key == NEVER ? s->S : key;
}

static inline void bucket_push(sim_t *s, uint32_t b, uint32_t v)
{
    uint32_t c = s->btop[b];
    if (c == NIL || s->bfill[b] == CHUNK) {
        uint32_t f = s->cfree;
        s->cfree = s->cnext[f];
        s->cnext[f] = c;
        s->btop[b] = c = f;
        s->bfill[b] = 0;
    }
    s->cent[(size_t)c * CHUNK + s->bfill[b]++] = v;
    if (b > s->top) s->top = b;
}

/* The last id pushed on bucket b, which is not empty. */
static inline uint32_t bucket_pop(sim_t *s, uint32_t b)
{
    uint32_t c = s->btop[b], v = s->cent[(size_t)c * CHUNK + --s->bfill[b]];
    if (s->bfill[b] == 0) {
        s->btop[b] = s->cnext[c];
        s->cnext[c] = s->cfree;
        s->cfree = c;
        s->bfill[b] = s->btop[b] == NIL ? 0 : CHUNK;
    }
    return v;
}

static void bucket_drop(sim_t *s, uint32_t b)
{
    for (uint32_t c = s->btop[b], below; c != NIL; c = below) {
        below = s->cnext[c];
        s->cnext[c] = s->cfree;
        s->cfree = c;
    }
    s->btop[b] = NIL;
    s->bfill[b] = 0;
}

/* Leaves the workspace zero again. */
static void ws_clear(sim_t *s)
{
    memset(s->ws->nd, 0, (size_t)s->ws->n * sizeof(node_t));
    s->used = 0;
}

/* The temporaries, in one block: iters, the buckets, the chained misses. The cache holds at
 * most cap ids, so its buckets at most cap / CHUNK full chunks and a partial one each. */
static int temp_alloc(sim_t *s, tg_budget_t *budget)
{
    uint64_t S1 = (uint64_t)s->S + 1;
    s->nchunks = (uint32_t)((s->cap + CHUNK - 1) / CHUNK + S1);
    uint64_t w =
        (uint64_t)s->T + 1 + 3 * S1 + (uint64_t)s->nchunks * (CHUNK + 1) + 3 * (uint64_t)s->longest;
    s->temp_bytes = w * sizeof(uint32_t);
    int rc = budget ? tg_budget_reserve(budget, s->temp_bytes,
                                        "changeset temporaries (4 bytes per access and per cache "
                                        "entry, 12 per access of the longest iteration)")
                    : 0;
    if (rc < 0) return rc;
    uint32_t *p = s->block = big_alloc((size_t)w * sizeof *p);
    if (!p) {
        if (budget) tg_budget_release(budget, s->temp_bytes);
        return tg_err(-ENOMEM, "changeset: out of memory for %llu bytes of temporaries",
                      (unsigned long long)s->temp_bytes);
    }
    s->iters = p, p += (uint64_t)s->T + 1;
    s->btop = p, p += S1;
    s->bfill = p, p += S1;
    s->chead = p, p += S1;
    s->cnext = p, p += s->nchunks;
    s->cent = p, p += (uint64_t)s->nchunks * CHUNK;
    s->cv = p, p += s->longest;
    s->cp = p, p += s->longest;
    s->cn = p;
    memset(s->btop, 0xff, S1 * sizeof *p);
    memset(s->bfill, 0, S1 * sizeof *p);
    memset(s->chead, 0xff, S1 * sizeof *p);
    for (uint32_t c = 0; c < s->nchunks; c++)
        s->cnext[c] = c + 1 < s->nchunks ? c + 1 : NIL;
    s->cfree = 0;
    return 0;
}

/* The initial state into the cache, each node under its first access; in = its entry + 1. */
static int load_init(sim_t *s, const uint32_t *init, uint64_t n_init)
{
    node_t *nd = s->ws->nd;
    for (uint64_t k = 0; k < n_init; k++) {
        uint32_t v = init[k];
        if (nd[v].in)
            return tg_err(-EINVAL,
                          "changeset: initial state entries %u and %llu are both node %u, "
                          "expected distinct ids",
                          nd[v].in - 1, (unsigned long long)k, v);
        nd[v].in = (uint32_t)k + 1;
        bucket_push(s, bucket_of(s, s->iters[nd[v].ptr] & NEVER), v);
        s->used++;
    }
    return 0;
}

/* Grows the output lists *a (and *b, same length) to hold need entries, reserving the bytes. */
static int grow(tg_cs_t *o, uint32_t **a, uint32_t **b, uint64_t *cap, uint64_t need)
{
    if (need <= *cap) return 0;
    uint64_t nc = TG_MAX(need, 2 * *cap), per = (b ? 2 : 1) * sizeof(uint32_t);
    uint64_t add = (nc - *cap) * per;
    int rc = o->budget ? tg_budget_reserve(o->budget, add, "changeset output (in/out lists)") : 0;
    if (rc < 0) return rc;
    uint32_t *na = realloc(*a, (size_t)nc * sizeof(uint32_t));
    if (na) *a = na;
    uint32_t *nb = na && b ? realloc(*b, (size_t)nc * sizeof(uint32_t)) : NULL;
    if (nb) *b = nb;
    if (!na || (b && !nb)) {
        if (o->budget) tg_budget_release(o->budget, add);
        return tg_err(-ENOMEM, "changeset: out of memory for %llu bytes of in/out lists",
                      (unsigned long long)(nc * per));
    }
    /* A first realloc that succeeded with a second that failed keeps the larger *a: harmless. */
    o->reserved += add;
    *cap = nc;
    return 0;
}

/* Iteration i, first half: serves ids_i (misses counted), moves each accessed node's ptr to its
 * next access, and unless i is the last iteration moves the hit rows to the bucket of their next
 * access and chains the misses accessed again by key (the others bypass the cache). */
static int access_iter(sim_t *s, uint32_t i, uint64_t *misses, uint32_t *m_out)
{
    const tg_cs_trace_t *t = s->t;
    const uint32_t *ids = t->ids, *iters = s->iters;
    uint64_t a = t->off[i], z = t->off[i + 1];
    uint32_t T = s->T, hits = 0, m = 0, *cv = s->cv, *cp = s->cp, *cn = s->cn;
    uint32_t *chead = s->chead;
    node_t *nd = s->ws->nd;
    int update = i + 1 < s->S;
    if (update) bucket_drop(s, i); /* its nodes are all accessed now and pushed again below */
    for (uint64_t j = a; j < z; j++) {
        if (j + 2 * AHEAD < T) prefetch(&nd[ids[j + 2 * AHEAD]]);
        if (j + AHEAD < T) prefetch(&iters[nd[ids[j + AHEAD]].ptr + 1]);
        uint32_t v = ids[j];
        node_t *x = &nd[v];
        uint32_t p = x->ptr + 1, e = iters[p];
        if (e & MSB) p = T, e = NEVER;
        if (e == i) { /* v's list holds i twice */
            uint64_t j2 = j + 1;
            while (j2 < z && ids[j2] != v)
                j2++;
            return twice(t, i, j, j2);
        }
        x->ptr = p;
        if (x->in) {
            hits++;
            if (update) bucket_push(s, bucket_of(s, e), v);
        } else if (update && e != NEVER) {
            cv[m] = v, cp[m] = (uint32_t)(j - a), cn[m] = chead[e], chead[e] = m;
            m++;
        }
    }
    *misses = (z - a) - hits;
    *m_out = m;
    return 0;
}

/* Iteration i, second half: inserts the chained misses in ascending next access while the
 * cache has room or holds a row accessed later (evicted). Output room for m entries each. */
static void insert_iter(sim_t *s, uint32_t i, tg_cs_t *o, uint64_t *in_len, uint64_t *out_len)
{
    node_t *nd = s->ws->nd;
    int open = s->cap > 0;
    for (uint32_t b = i + 1; b < s->S; b++) {
        uint32_t j = s->chead[b];
        s->chead[b] = NIL;
        for (; open && j != NIL; j = s->cn[j]) {
            if (s->used < s->cap) {
                s->used++;
            } else {
                while (s->btop[s->top] == NIL)
                    s->top--;
                if (s->top <= b) { /* every later miss is accessed no sooner than the max */
                    open = 0;
                    break;
                }
                uint32_t u = bucket_pop(s, s->top);
                nd[u].in = 0;
                o->out_ids[(*out_len)++] = u;
            }
            uint32_t v = s->cv[j];
            nd[v].in = 1;
            bucket_push(s, b, v);
            o->in_ids[*in_len] = v;
            o->in_pos[(*in_len)++] = s->cp[j];
        }
    }
}

/* Pass 3 over every iteration into o. */
static int simulate(sim_t *s, tg_cs_t *o)
{
    uint64_t in_len = 0, out_len = 0;
    for (uint32_t i = 0; i < s->S; i++) {
        uint32_t m = 0;
        int rc = access_iter(s, i, &o->misses[i], &m);
        if (rc == 0) rc = grow(o, &o->in_ids, &o->in_pos, &s->in_cap, in_len + m);
        if (rc == 0) rc = grow(o, &o->out_ids, NULL, &s->out_cap, out_len + m);
        if (rc < 0) return rc;
        if (m) insert_iter(s, i, o, &in_len, &out_len);
        o->total_misses += o->misses[i];
        o->in_off[i + 1] = in_len;
        o->out_off[i + 1] = out_len;
    }
    return 0;
}

/* The fixed part of the output (misses, offsets) and, at the end, the final state; the in/out
 * lists shrunk to their length, the bytes no longer held returned. */
static int out_alloc(tg_cs_t *o, uint32_t S)
{
    uint64_t bytes = ((uint64_t)S + 2 * ((uint64_t)S + 1)) * sizeof(uint64_t);
    int rc = o->budget ? tg_budget_reserve(o->budget, bytes, "changeset output (offsets)") : 0;
    if (rc < 0) return rc;
    o->reserved += bytes;
    o->misses = calloc((size_t)S + 1, sizeof(uint64_t));
    o->in_off = calloc((size_t)S + 1, sizeof(uint64_t));
    o->out_off = calloc((size_t)S + 1, sizeof(uint64_t));
    if (!o->misses || !o->in_off || !o->out_off)
        return tg_err(-ENOMEM, "changeset: out of memory for %llu bytes of offsets",
                      (unsigned long long)bytes);
    return 0;
}

static int out_finish(sim_t *s, tg_cs_t *o)
{
    uint64_t bytes = (uint64_t)s->used * sizeof(uint32_t);
    int rc = o->budget ? tg_budget_reserve(o->budget, bytes, "changeset final state") : 0;
    if (rc < 0) return rc;
    o->reserved += bytes;
    if (!(o->final = malloc((size_t)TG_MAX(bytes, 1))))
        return tg_err(-ENOMEM, "changeset: out of memory for the final state (%llu bytes)",
                      (unsigned long long)bytes);
    uint64_t n = 0;
    for (uint32_t b = 0; b <= s->S; b++)
        for (uint32_t c = s->btop[b], k = s->bfill[b]; c != NIL; c = s->cnext[c], k = CHUNK) {
            memcpy(o->final + n, s->cent + (size_t)c * CHUNK, k * sizeof(uint32_t));
            n += k;
        }
    o->num_final = n;
    uint64_t in = o->in_off[s->S], out = o->out_off[s->S];
    uint64_t spare =
        (s->in_cap - in) * 2 * sizeof(uint32_t) + (s->out_cap - out) * sizeof(uint32_t);
    uint32_t *p; /* a shrink that fails keeps the larger block */
    size_t in_b = (size_t)TG_MAX(in, 1) * sizeof *p, out_b = (size_t)TG_MAX(out, 1) * sizeof *p;
    if (in < s->in_cap && (p = realloc(o->in_ids, in_b))) o->in_ids = p;
    if (in < s->in_cap && (p = realloc(o->in_pos, in_b))) o->in_pos = p;
    if (out < s->out_cap && (p = realloc(o->out_ids, out_b))) o->out_ids = p;
    if (o->budget) tg_budget_release(o->budget, spare);
    o->reserved -= spare;
    return 0;
}

int tg_cs_compute(tg_cs_ws_t *ws, const tg_cs_trace_t *t, uint64_t entries, const uint32_t *init,
                  uint64_t n_init, tg_cs_t *out, tg_budget_t *budget)
{
    memset(out, 0, sizeof *out);
    int rc = check_offsets(t);
    if (rc < 0) return rc;
    if (n_init > entries)
        return tg_err(-EINVAL, "changeset: initial state of %llu ids, more than the %llu entries",
                      (unsigned long long)n_init, (unsigned long long)entries);
    for (uint64_t k = 0; k < n_init; k++)
        if (init[k] >= ws->n)
            return tg_err(-EINVAL, "changeset: initial state entry %llu: node %u, expected < %llu",
                          (unsigned long long)k, init[k], (unsigned long long)ws->n);
    sim_t s = {.ws = ws, .t = t, .S = t->iters, .T = (uint32_t)t->off[t->iters], .top = 0};
    uint32_t distinct = 0;
    if ((rc = count_accesses(&s, &distinct)) < 0) return rc;
    s.cap = (uint32_t)TG_MIN(TG_MIN(entries, n_init + distinct), ws->n);
    if ((rc = temp_alloc(&s, budget)) < 0) {
        memset(ws->nd, 0, (size_t)ws->n * sizeof(node_t));
        return rc;
    }
    build_iters(&s);
    out->iters = s.S;
    out->entries = entries;
    out->budget = budget;
    rc = load_init(&s, init, n_init);
    if (rc == 0) rc = out_alloc(out, s.S);
    if (rc == 0) rc = simulate(&s, out);
    if (rc == 0) rc = out_finish(&s, out);
    ws_clear(&s);
    free(s.block);
    if (budget) tg_budget_release(budget, s.temp_bytes);
    if (rc < 0) tg_cs_free(out);
    return rc;
}

void tg_cs_free(tg_cs_t *cs)
{
    if (!cs) return;
    free(cs->misses);
    free(cs->in_off);
    free(cs->out_off);
    free(cs->in_ids);
    free(cs->in_pos);
    free(cs->out_ids);
    free(cs->final);
    if (cs->budget) tg_budget_release(cs->budget, cs->reserved);
    memset(cs, 0, sizeof *cs);
}
