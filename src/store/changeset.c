/* Ginex's changeset precomputation (see tiergnn/changeset.h): the paper's three passes over the
 * trace. Passes 1 and 2 build the per-node list of access iterations (ptr, iters); pass 3
 * simulates Belady's cache with it.
 *
 * The cache of pass 3 is a bucket queue by next access rather than a binary heap: a key is an
 * iteration (S values) or "never", so a node moves between buckets in O(1) and the largest key
 * is found by walking down from the highest bucket used. Two facts keep the buckets singly
 * linked lists: at iteration i the bucket of key i holds exactly the cached nodes accessed at i
 * (a key is the next access), which all leave it, so the whole list is dropped after they moved;
 * and evictions always take the head of the highest non-empty bucket. The misses to insert are
 * chained by key and inserted in ascending key order, so a row inserted at iteration i is never
 * evicted at iteration i (the evicted row has a larger key than every row inserted before it),
 * and the iteration's in and out lists are exactly C_{i+1} \ C_i and C_i \ C_{i+1}.
 *
 * Workspace: ptr and slot (the cache slot + 1 of a node, 0 = not cached) are zero between calls;
 * every call leaves them so, on errors too. tg_cs_trace_check borrows them as "seen at iteration"
 * and "at position" marks. */
#include "tiergnn/changeset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MSB 0x80000000u
#define NEVER 0x7FFFFFFFu /* the key "not accessed again": the dummy entry without its MSB */
#define NIL UINT32_MAX
#define MAX_ITERS (NEVER - 1)
#define MAX_ACCESSES (UINT32_MAX - 1) /* iters has T + 1 entries, indexed by u32 */

struct tg_cs_ws {
    uint64_t n;
    uint32_t *ptr;  /* (n) pass 1: access count; then the index in iters of the next access */
    uint32_t *slot; /* (n) cache slot + 1, 0 = not cached */
    tg_budget_t *budget;
    uint64_t reserved;
};

uint64_t tg_cs_ws_bytes(uint64_t num_nodes)
{
    return num_nodes * 2 * sizeof(uint32_t);
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
    size_t n = (size_t)TG_MAX(num_nodes, 1);
    if (ws) {
        ws->ptr = calloc(n, sizeof(uint32_t));
        ws->slot = calloc(n, sizeof(uint32_t));
    }
    if (!ws || !ws->ptr || !ws->slot) {
        if (ws) free(ws->ptr), free(ws->slot);
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
    free(ws->ptr);
    free(ws->slot);
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
    /* ptr[v] = iteration + 1 where v was last seen, slot[v] = its position there. */
    uint64_t j = 0, T = t->off[t->iters];
    for (uint32_t i = 0; rc == 0 && i < t->iters; i++) {
        for (; j < t->off[i + 1]; j++) {
            uint32_t v = t->ids[j];
            if (v >= ws->n) {
                rc = bad_id(ws, t, i, j);
                break;
            }
            if (ws->ptr[v] == i + 1) {
                rc = twice(t, i, t->off[i] + ws->slot[v], j);
                break;
            }
            ws->ptr[v] = i + 1;
            ws->slot[v] = (uint32_t)(j - t->off[i]);
        }
    }
    for (uint64_t k = 0; k < TG_MIN(j, T); k++) {
        uint32_t v = t->ids[k];
        if (v < ws->n) ws->ptr[v] = ws->slot[v] = 0;
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
    uint32_t *mark = ws->ptr;
    for (uint64_t k = 0; k < n_prev; k++)
        mark[prev[k]] = PREV;
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
            if (mark[v] == PREV) mark[v] |= SEEN, c[cnt++] = v;
        }
        for (uint64_t j = a; rc == 0 && j < b && cnt < cap; j++) {
            uint32_t v = t->ids[j];
            if (!(mark[v] & SEEN)) mark[v] |= SEEN, c[cnt++] = v;
        }
        end = b;
    }
    for (uint64_t j = 0; j < end; j++)
        if (t->ids[j] < ws->n) mark[t->ids[j]] = 0;
    for (uint64_t k = 0; k < n_prev; k++)
        mark[prev[k]] = 0;
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
    uint32_t cap, used; /* cache slots: min(entries, distinct candidates); in use */
    uint32_t top;       /* >= the highest non-empty bucket */
    uint32_t longest;   /* accesses of the longest iteration */
    uint32_t *iters;    /* (T + 1) pass 2: every node's access iterations, CSR by node */
    uint32_t *snode;    /* (cap) the node a slot holds */
    uint32_t *snext;    /* (cap) the next slot of its bucket, NIL = last */
    uint32_t *head;     /* (S + 1) first slot of bucket b = nodes next accessed at b; S = never */
    uint32_t *cv, *cp;  /* (longest) misses to insert: node, position in ids_i */
    uint32_t *cn;       /* (longest) next miss with the same key, NIL = last */
    uint32_t *chead;    /* (S) first miss with key b */
    uint64_t in_cap, out_cap, temp_bytes;
    void *block;
} sim_t;

/* Pass 1: each node's access count into ptr; the trace's ids checked against num_nodes. */
static int count_accesses(sim_t *s, uint32_t *distinct)
{
    const tg_cs_trace_t *t = s->t;
    uint32_t *ptr = s->ws->ptr, nd = 0, longest = 0;
    for (uint32_t i = 0; i < s->S; i++) {
        longest = TG_MAX(longest, (uint32_t)(t->off[i + 1] - t->off[i]));
        for (uint64_t j = t->off[i]; j < t->off[i + 1]; j++) {
            uint32_t v = t->ids[j];
            if (v >= s->ws->n) {
                memset(ptr, 0, (size_t)s->ws->n * sizeof *ptr);
                return bad_id(s->ws, t, i, j);
            }
            nd += ptr[v]++ == 0;
        }
    }
    *distinct = nd;
    s->longest = longest;
    return 0;
}

/* Pass 2: ptr = the exclusive prefix sum of the counts, iters filled through it, then ptr moved
 * back to the start of each list, whose first entry gets the MSB. A node never accessed points
 * at the dummy entry (in the paper it would point at the next node's list). */
static void build_iters(sim_t *s)
{
    const tg_cs_trace_t *t = s->t;
    uint32_t *ptr = s->ws->ptr, *iters = s->iters, sum = 0;
    uint64_t n = s->ws->n;
    for (uint64_t v = 0; v < n; v++) {
        uint32_t c = ptr[v];
        ptr[v] = sum;
        sum += c;
    }
    for (uint32_t i = 0; i < s->S; i++)
        for (uint64_t j = t->off[i]; j < t->off[i + 1]; j++)
            iters[ptr[t->ids[j]]++] = i;
    uint32_t start = 0;
    for (uint64_t v = 0; v < n; v++) {
        uint32_t end = ptr[v];
        if (end == start) {
            ptr[v] = s->T;
        } else {
            ptr[v] = start;
            iters[start] |= MSB;
            start = end;
        }
    }
    iters[s->T] = UINT32_MAX;
}

static inline void push(sim_t *s, uint32_t sl, uint32_t key)
{
    uint32_t b = key == NEVER ? s->S : key;
    s->snext[sl] = s->head[b];
    s->head[b] = sl;
    if (b > s->top) s->top = b;
}

/* Leaves the workspace zero again: ptr wholly, slot where a node is cached. */
static void ws_clear(sim_t *s)
{
    memset(s->ws->ptr, 0, (size_t)s->ws->n * sizeof(uint32_t));
    for (uint32_t sl = 0; sl < s->used; sl++)
        s->ws->slot[s->snode[sl]] = 0;
    s->used = 0;
}

/* Bytes of the temporaries: iters, slots, buckets and the chained misses, in one block. */
static uint64_t temp_words(const sim_t *s)
{
    return (uint64_t)s->T + 1 + 2 * (uint64_t)s->cap + 2 * ((uint64_t)s->S + 1) +
           3 * (uint64_t)s->longest;
}

static int temp_alloc(sim_t *s, tg_budget_t *budget)
{
    uint64_t w = temp_words(s);
    s->temp_bytes = w * sizeof(uint32_t);
    int rc = budget ? tg_budget_reserve(budget, s->temp_bytes,
                                        "changeset temporaries (4 bytes per access, 8 per cache "
                                        "entry, 12 per access of the longest iteration)")
                    : 0;
    if (rc < 0) return rc;
    uint32_t *p = s->block = malloc((size_t)w * sizeof *p);
    if (!p) {
        if (budget) tg_budget_release(budget, s->temp_bytes);
        return tg_err(-ENOMEM, "changeset: out of memory for %llu bytes of temporaries",
                      (unsigned long long)s->temp_bytes);
    }
    s->iters = p, p += (uint64_t)s->T + 1;
    s->snode = p, p += s->cap;
    s->snext = p, p += s->cap;
    s->head = p, p += (uint64_t)s->S + 1;
    s->chead = p, p += (uint64_t)s->S + 1;
    s->cv = p, p += s->longest;
    s->cp = p, p += s->longest;
    s->cn = p;
    memset(s->head, 0xff, ((uint64_t)s->S + 1) * sizeof *p);
    memset(s->chead, 0xff, ((uint64_t)s->S + 1) * sizeof *p);
    return 0;
}

/* The initial state into the cache, each node under its first access. */
static int load_init(sim_t *s, const uint32_t *init, uint64_t n_init)
{
    uint32_t *slot = s->ws->slot;
    for (uint64_t k = 0; k < n_init; k++) {
        uint32_t v = init[k];
        if (slot[v])
            return tg_err(-EINVAL,
                          "changeset: initial state entries %u and %llu are both node %u, "
                          "expected distinct ids",
                          slot[v] - 1, (unsigned long long)k, v);
        uint32_t sl = s->used++;
        s->snode[sl] = v;
        slot[v] = sl + 1;
        push(s, sl, s->iters[s->ws->ptr[v]] & NEVER);
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
    uint32_t n = (uint32_t)(t->off[i + 1] - t->off[i]), *ptr = s->ws->ptr, hits = 0, m = 0;
    const uint32_t *ids = n ? t->ids + t->off[i] : NULL, *iters = s->iters, *slot = s->ws->slot;
    int update = i + 1 < s->S;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t v = ids[k], p = ptr[v] + 1, e = iters[p];
        if (e & MSB) p = s->T, e = NEVER;
        if (e == i) { /* v's list holds i twice */
            uint32_t k2 = k + 1;
            while (k2 < n && ids[k2] != v)
                k2++;
            return twice(t, i, t->off[i] + k, t->off[i] + k2);
        }
        ptr[v] = p;
        uint32_t sl = slot[v];
        if (sl) {
            hits++;
            if (update) push(s, sl - 1, e);
        } else if (update && e != NEVER) {
            s->cv[m] = v, s->cp[m] = k, s->cn[m] = s->chead[e], s->chead[e] = m;
            m++;
        }
    }
    if (update) s->head[i] = NIL; /* its nodes were all accessed and moved on */
    *misses = n - hits;
    *m_out = m;
    return 0;
}

/* Iteration i, second half: inserts the chained misses in ascending next access while the
 * cache has room or holds a row accessed later (evicted). Output room for m entries each. */
static void insert_iter(sim_t *s, uint32_t i, tg_cs_t *o, uint64_t *in_len, uint64_t *out_len)
{
    uint32_t *slot = s->ws->slot;
    int open = s->cap > 0;
    for (uint32_t b = i + 1; b < s->S; b++) {
        uint32_t j = s->chead[b];
        s->chead[b] = NIL;
        for (; open && j != NIL; j = s->cn[j]) {
            uint32_t sl;
            if (s->used < s->cap) {
                sl = s->used++;
            } else {
                while (s->head[s->top] == NIL)
                    s->top--;
                if (s->top <= b) { /* every later miss is accessed no sooner than the max */
                    open = 0;
                    break;
                }
                sl = s->head[s->top];
                s->head[s->top] = s->snext[sl];
                slot[s->snode[sl]] = 0;
                o->out_ids[(*out_len)++] = s->snode[sl];
            }
            uint32_t v = s->cv[j];
            s->snode[sl] = v;
            slot[v] = sl + 1;
            push(s, sl, b);
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
    memcpy(o->final, s->snode, (size_t)bytes);
    o->num_final = s->used;
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
        memset(ws->ptr, 0, (size_t)ws->n * sizeof(uint32_t));
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
