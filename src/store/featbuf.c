/* The GNNDrive feature buffer (see include/tiergnn/featbuf.h for the contract and invariants):
 * the mechanism. Which standby row a miss evicts is the replacement policy's (featbuf_policy.c,
 * behind the seam of featbuf-impl.h).
 *
 * Layout: slot rows in one page-aligned block (stride bytes apart); per-slot metadata in an array
 * of fb_slot_t (reverse map node, reference count, state, list links); the mapping table node ->
 * slot is either a direct u32[num_nodes] or an open-addressing hash of u32 slot indices whose keys
 * are read through the reverse map (so an entry costs 4 bytes, not 12). Free slots sit on a
 * singly-linked stack; unreferenced valid slots are candidates the policy orders, or, pinned,
 * wait on no list. One mutex guards all of it (the policy's structures included); two condition
 * variables: cv_space (acquirers waiting for unreferenced slots, signalled by release and by a
 * re-pin that frees rows) and cv_done (batches waiting for rows in flight, signalled by
 * complete).
 */
#include "featbuf-impl.h"
#include "tiergnn/store.h" /* tg_feat_rows_f32 */

#include <stdlib.h>
#include <string.h>

#define NO_SLOT FB_NO_SLOT
#define NO_NODE FB_NO_NODE
#define FB_ALIGN 4096 /* slot area alignment: pages, for O_DIRECT and registered buffers */
#define FB_MAX_ROW_BYTES (1u << 30)
#define FB_MAX_SLOT_ALIGN (1u << 20)
#define PF_DIST 16 /* prefetch distance of batch loops, in nodes */

/* Handle states; written only under fb->mu so that complete() on a reaper thread reads them
 * safely. H_READY: wait() returned 0, the rows may be read. */
enum { H_IDLE = 0, H_ACQUIRED = 1, H_READY = 2 };

struct tg_featbuf_batch {
    tg_featbuf_t *fb;
    int state;
    size_t n;
    uint32_t *slots; /* (max_batch_nodes) slot per position; NO_SLOT during acquire = unmapped */
    tg_featbuf_load_t *loads; /* (max_batch_nodes) */
    size_t num_loads;
    uint8_t *load_done; /* (max_batch_nodes) guarded by fb->mu: complete may run on any thread */
    size_t pending;     /* loads not completed; guarded by fb->mu */
    uint32_t *waits;    /* (max_batch_nodes) positions in flight for another batch */
    size_t num_waits;
    int err; /* first failed own load (guarded by fb->mu) */
    uint64_t err_node;
    uint64_t bytes; /* charged to the budget */
};

/* ---------------------------------------------------------------- sizing */

/* 0 if the policy fields are consistent, else -EINVAL (with a message if report). */
static int policy_opts_check(const tg_featbuf_opts_t *o, int report)
{
#define REFUSE(...) return report ? tg_err(-EINVAL, "feature buffer: " __VA_ARGS__) : -EINVAL
    if (!tg_featbuf_policy_ops(o->policy)) REFUSE("unknown replacement policy %d", (int)o->policy);
    int trace = o->policy == TG_FEATBUF_NEXT_USE || o->policy == TG_FEATBUF_WINDOW;
    if (trace && (o->future_positions == 0 || o->future_positions > FB_MAX_FUTURE))
        REFUSE("policy %s needs future_positions in 1..%u (the most node positions announced "
               "ahead), got %u",
               tg_featbuf_policy_name(o->policy), FB_MAX_FUTURE, o->future_positions);
    if (o->policy == TG_FEATBUF_WINDOW && o->window == 0)
        REFUSE("policy window needs window >= 1 (batches)");
    if (o->policy != TG_FEATBUF_STATIC && (o->pinned || o->num_pinned))
        REFUSE("a pinned node set needs policy static, not %s", tg_featbuf_policy_name(o->policy));
    if (o->num_pinned && !o->pinned)
        REFUSE("num_pinned %llu without a pinned array", (unsigned long long)o->num_pinned);
    return 0;
#undef REFUSE
}

static int opts_valid(const tg_featbuf_opts_t *o)
{
    if (!o || o->num_nodes == 0 || o->num_nodes >= NO_NODE || o->feat_dim == 0) return 0;
    if (o->dtype != TG_F32 && o->dtype != TG_F16) return 0;
    if ((uint64_t)o->feat_dim * tg_feat_dtype_size(o->dtype) > FB_MAX_ROW_BYTES) return 0;
    if (o->max_batch_nodes == 0 || o->max_batches == 0) return 0;
    if (o->slot_align &&
        ((o->slot_align & (o->slot_align - 1)) || o->slot_align > FB_MAX_SLOT_ALIGN))
        return 0;
    if (o->map != TG_FEATBUF_MAP_AUTO && o->map != TG_FEATBUF_MAP_DIRECT &&
        o->map != TG_FEATBUF_MAP_HASH)
        return 0;
    return policy_opts_check(o, 0) == 0;
}

static size_t row_bytes_of(const tg_featbuf_opts_t *o)
{
    return (size_t)o->feat_dim * tg_feat_dtype_size(o->dtype);
}

static size_t stride_of(const tg_featbuf_opts_t *o)
{
    size_t r = row_bytes_of(o), a = o->slot_align ? o->slot_align : 1;
    return (r + a - 1) & ~(a - 1);
}

static int use_direct(const tg_featbuf_opts_t *o, uint32_t num_slots)
{
    if (o->map == TG_FEATBUF_MAP_DIRECT) return 1;
    if (o->map == TG_FEATBUF_MAP_HASH) return 0;
    /* the cheaper in bytes; on a tie the direct table, which is also the faster one */
    return 4 * o->num_nodes <= 4 * (1ull << tg_featbuf_hash_bits(num_slots));
}

static uint64_t map_bytes_of(const tg_featbuf_opts_t *o, uint32_t num_slots)
{
    return use_direct(o, num_slots) ? 4 * o->num_nodes
                                    : 4 * (1ull << tg_featbuf_hash_bits(num_slots));
}

static uint32_t min_slots_of(const tg_featbuf_opts_t *o)
{
    uint64_t m = (uint64_t)o->max_batch_nodes * o->max_batches;
    return m >= NO_SLOT ? 0 : (uint32_t)m;
}

uint64_t tg_featbuf_bytes_for(const tg_featbuf_opts_t *o, uint32_t num_slots)
{
    if (!opts_valid(o)) return 0;
    return (uint64_t)stride_of(o) * num_slots + (uint64_t)sizeof(fb_slot_t) * num_slots +
           map_bytes_of(o, num_slots) + sizeof(struct tg_featbuf) +
           tg_featbuf_policy_bytes(o, num_slots, min_slots_of(o));
}

uint32_t tg_featbuf_min_slots(const tg_featbuf_opts_t *o)
{
    return opts_valid(o) ? min_slots_of(o) : 0;
}

static uint64_t handle_bytes_of(const tg_featbuf_opts_t *o)
{
    return (uint64_t)o->max_batch_nodes *
               (sizeof(uint32_t) + sizeof(tg_featbuf_load_t) + 1 + sizeof(uint32_t)) +
           sizeof(struct tg_featbuf_batch);
}

/* ---------------------------------------------------------------- mapping table */

static uint64_t hash_home(const tg_featbuf_t *fb, uint64_t node)
{
    return tg_featbuf_hash_home(node, fb->map_bits);
}

/* The table entry a lookup of node reads first (the only one for the direct table). */
static const uint32_t *map_home_entry(const tg_featbuf_t *fb, uint64_t node)
{
    return fb->direct ? &fb->map[node] : &fb->map[hash_home(fb, node)];
}

static uint32_t map_find(const tg_featbuf_t *fb, uint64_t node)
{
    if (fb->direct) return fb->map[node];
    for (uint64_t i = hash_home(fb, node);; i = (i + 1) & fb->map_mask) {
        uint32_t s = fb->map[i];
        if (s == NO_SLOT || fb->slots[s].node == node) return s;
    }
}

/* node must not be mapped; slots[s].node == node already. */
static void map_insert(tg_featbuf_t *fb, uint64_t node, uint32_t s)
{
    if (fb->direct) {
        fb->map[node] = s;
        return;
    }
    uint64_t i = hash_home(fb, node);
    while (fb->map[i] != NO_SLOT)
        i = (i + 1) & fb->map_mask;
    fb->map[i] = s;
}

/* Removes node (which must be mapped; slots[its slot].node == node still). Backward-shift
 * deletion: later entries of the probe run move up so that no tombstones are needed and lookups
 * stay exact. */
static void map_remove(tg_featbuf_t *fb, uint64_t node)
{
    if (fb->direct) {
        fb->map[node] = NO_SLOT;
        return;
    }
    uint64_t i = hash_home(fb, node);
    while (fb->slots[fb->map[i]].node != node)
        i = (i + 1) & fb->map_mask;
    for (uint64_t j = i;;) {
        j = (j + 1) & fb->map_mask;
        uint32_t s = fb->map[j];
        if (s == NO_SLOT) break;
        uint64_t k = hash_home(fb, fb->slots[s].node);
        if (!tg_featbuf_hash_stays(i, j, k)) {
            fb->map[i] = s;
            i = j;
        }
    }
    fb->map[i] = NO_SLOT;
}

/* ---------------------------------------------------------------- lists */

static void free_push(tg_featbuf_t *fb, uint32_t s)
{
    fb->slots[s].next = fb->free_head;
    fb->slots[s].list = FB_LIST_FREE;
    fb->free_head = s;
    fb->num_free++;
}

static uint32_t free_pop(tg_featbuf_t *fb)
{
    uint32_t s = fb->free_head;
    fb->free_head = fb->slots[s].next;
    fb->slots[s].list = FB_LIST_NONE;
    fb->num_free--;
    return s;
}

/* A valid row lost its last reference: it stays mapped, as a candidate for eviction or, pinned,
 * on no list at all. */
static void standby_push(tg_featbuf_t *fb, uint32_t s)
{
    fb_slot_t *x = &fb->slots[s];
    if (x->pinned) {
        x->list = FB_LIST_PINNED;
        fb->num_pin_idle++;
        return;
    }
    x->list = FB_LIST_CAND;
    fb->num_cand++;
    fb->pol->insert(fb, s);
}

/* An unreferenced valid row leaves standby (referenced again, or evicted). */
static void standby_take(tg_featbuf_t *fb, uint32_t s)
{
    fb_slot_t *x = &fb->slots[s];
    if (x->list == FB_LIST_PINNED) {
        fb->num_pin_idle--;
    } else {
        fb->pol->remove(fb, s);
        fb->num_cand--;
    }
    x->list = FB_LIST_NONE;
}

void tg_featbuf_node_changed(tg_featbuf_t *fb, uint64_t node)
{
    uint32_t s = map_find(fb, node);
    if (s != NO_SLOT && fb->slots[s].list == FB_LIST_CAND && fb->pol->rekey) fb->pol->rekey(fb, s);
}

/* ---------------------------------------------------------------- create / destroy */

/* A sorted, duplicate-free copy of a pinned set (*out; NULL when n == 0), checked for range. */
static int pin_prepare(const uint64_t *nodes, size_t n, uint64_t num_nodes, uint64_t **out,
                       uint64_t *distinct)
{
    *out = NULL;
    *distinct = 0;
    for (size_t i = 0; i < n; i++)
        if (nodes[i] >= num_nodes)
            return tg_err(-EINVAL,
                          "feature buffer: pinned node %llu at position %zu is out of range "
                          "(%llu nodes)",
                          (unsigned long long)nodes[i], i, (unsigned long long)num_nodes);
    if (n == 0) return 0;
    uint64_t *v = n <= SIZE_MAX / 8 ? malloc(n * 8) : NULL;
    if (!v) return tg_err(-ENOMEM, "feature buffer: out of memory sorting %zu pinned nodes", n);
    memcpy(v, nodes, n * 8);
    qsort(v, n, 8, tg_cmp_u64);
    size_t d = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[d - 1]) v[d++] = v[i];
    *out = v;
    *distinct = d;
    return 0;
}

static int pin_too_many(const tg_featbuf_opts_t *o, uint64_t npin, uint32_t num_slots)
{
    uint32_t min_slots = min_slots_of(o);
    return tg_err(-EINVAL,
                  "feature buffer: a pinned set of %llu nodes leaves %lld of %u slots for the "
                  "rest, below the minimum %u (max_batch_nodes %u x max_batches %u) that keeps "
                  "acquire from blocking: pin at most %u nodes or give more slots",
                  (unsigned long long)npin, (long long)num_slots - (long long)npin, num_slots,
                  min_slots, o->max_batch_nodes, o->max_batches, num_slots - min_slots);
}

/* The slot count the options ask for (see tg_featbuf_opts_t), npin pinned nodes included. */
static int choose_slots(const tg_featbuf_opts_t *o, uint64_t npin, uint32_t *num_slots)
{
    char a[32], b[32];
    uint32_t min_slots = min_slots_of(o);
    if (o->num_slots) {
        if (o->num_slots < min_slots)
            return tg_err(-EINVAL,
                          "feature buffer: num_slots %u is below the minimum %u (max_batch_nodes "
                          "%u x max_batches %u)",
                          o->num_slots, min_slots, o->max_batch_nodes, o->max_batches);
        if (o->num_slots == NO_SLOT)
            return tg_err(-EINVAL, "feature buffer: num_slots must be < 2^32-1");
        *num_slots = o->num_slots;
    } else if (o->mem_bytes) {
        /* the largest slot count whose bytes fit: bytes_for is non-decreasing in the count */
        uint32_t lo = 0, hi = NO_SLOT - 1;
        while (lo < hi) {
            uint32_t mid = lo + (uint32_t)(((uint64_t)hi - lo + 1) / 2);
            if (tg_featbuf_bytes_for(o, mid) <= o->mem_bytes)
                lo = mid;
            else
                hi = mid - 1;
        }
        if (lo < min_slots) {
            uint64_t min_bytes = tg_featbuf_bytes_for(o, min_slots);
            return tg_err(-ENOMEM,
                          "feature buffer: mem_bytes %s holds %u slots but the minimum is %u "
                          "(max_batch_nodes %u x max_batches %u, %zu B per row), which needs "
                          "%llu bytes (%s)",
                          tg_fmt_bytes(o->mem_bytes, a, sizeof a), lo, min_slots,
                          o->max_batch_nodes, o->max_batches, row_bytes_of(o),
                          (unsigned long long)min_bytes, tg_fmt_bytes(min_bytes, b, sizeof b));
        }
        *num_slots = lo;
    } else {
        /* the minimum, and room for the pinned rows on top */
        if ((uint64_t)min_slots + npin >= NO_SLOT)
            return tg_err(-EINVAL, "feature buffer: %u slots + %llu pinned exceed 2^32-1 slots",
                          min_slots, (unsigned long long)npin);
        *num_slots = min_slots + (uint32_t)npin;
    }
    if (npin > *num_slots - min_slots) return pin_too_many(o, npin, *num_slots);
    return 0;
}

static int reserve_budget(const tg_featbuf_opts_t *o, tg_budget_t *budget, uint32_t num_slots)
{
    if (!budget) return 0;
    char a[32], c[32];
    uint32_t min_slots = min_slots_of(o);
    uint64_t bytes = tg_featbuf_bytes_for(o, num_slots);
    int rc = tg_budget_reserve(budget, bytes, "feature buffer");
    if (rc < 0 && num_slots == min_slots)
        return tg_err_prefix(rc,
                             "feature buffer: the minimum of %u slots (max_batch_nodes %u x "
                             "max_batches %u) needs %llu bytes (%s: %zu B row + %zu B "
                             "metadata per slot, %s mapping table, %llu B for policy %s)",
                             min_slots, o->max_batch_nodes, o->max_batches,
                             (unsigned long long)bytes, tg_fmt_bytes(bytes, a, sizeof a),
                             stride_of(o), sizeof(fb_slot_t),
                             use_direct(o, num_slots) ? "direct" : "hash",
                             (unsigned long long)tg_featbuf_policy_bytes(o, num_slots, min_slots),
                             tg_featbuf_policy_name(o->policy));
    if (rc < 0) {
        uint64_t min_bytes = tg_featbuf_bytes_for(o, min_slots);
        return tg_err_prefix(rc,
                             "feature buffer: %u slots need %llu bytes (%s); the minimum, %u "
                             "slots (max_batch_nodes %u x max_batches %u), needs %llu bytes "
                             "(%s)",
                             num_slots, (unsigned long long)bytes, tg_fmt_bytes(bytes, a, sizeof a),
                             min_slots, o->max_batch_nodes, o->max_batches,
                             (unsigned long long)min_bytes, tg_fmt_bytes(min_bytes, c, sizeof c));
    }
    return 0;
}

static void free_memory(tg_featbuf_t *fb)
{
    tg_featbuf_policy_free(fb);
    free(fb->map);
    free(fb->slots);
    free(fb->data);
    free(fb);
}

/* Allocates the slot area, metadata, table and policy structures of a sized buffer. */
static int alloc_memory(tg_featbuf_t *fb)
{
    uint32_t num_slots = fb->num_slots;
    fb->data_bytes = fb->stride * num_slots;
    size_t align = TG_MAX((size_t)FB_ALIGN, (size_t)fb->o.slot_align);
    fb->data = tg_aligned_alloc(align, fb->data_bytes);
    fb->slots = malloc(sizeof(fb_slot_t) * (num_slots ? num_slots : 1));
    uint64_t map_len;
    if (fb->direct) {
        map_len = fb->o.num_nodes;
    } else {
        fb->map_bits = tg_featbuf_hash_bits(num_slots);
        map_len = 1ull << fb->map_bits;
        fb->map_mask = map_len - 1;
    }
    fb->map = map_len <= SIZE_MAX / 4 ? malloc((size_t)map_len * 4) : NULL;
    if (!fb->data || !fb->slots || !fb->map || tg_featbuf_policy_init(fb) < 0) return -ENOMEM;
    memset(fb->map, 0xff, (size_t)map_len * 4); /* NO_SLOT everywhere */
    fb->free_head = NO_SLOT;
    /* pushed in reverse so that slot 0 is handed out first (predictable in tests) */
    for (uint32_t s = num_slots; s-- > 0;) {
        fb->slots[s] = (fb_slot_t){.node = NO_NODE, .prev = NO_SLOT, .next = NO_SLOT};
        free_push(fb, s);
    }
    return 0;
}

int tg_featbuf_create(tg_featbuf_t **out, const tg_featbuf_opts_t *o, tg_budget_t *budget)
{
    *out = NULL;
    if (o && policy_opts_check(o, 1) < 0) return -EINVAL;
    if (!opts_valid(o))
        return tg_err(-EINVAL,
                      "feature buffer: bad options (need num_nodes >= 1, feat_dim >= 1 with rows "
                      "<= 1 GiB, dtype f32 or f16, max_batch_nodes >= 1, max_batches >= 1, "
                      "slot_align 0 or a power of two <= 1 MiB)");
    uint32_t min_slots = tg_featbuf_min_slots(o);
    if (min_slots == 0)
        return tg_err(-EINVAL,
                      "feature buffer: max_batch_nodes %u x max_batches %u exceeds 2^32-1 slots",
                      o->max_batch_nodes, o->max_batches);
    uint64_t *pin = NULL, npin = 0;
    uint32_t num_slots = 0;
    int rc = pin_prepare(o->pinned, o->num_pinned, o->num_nodes, &pin, &npin);
    if (rc == 0) rc = choose_slots(o, npin, &num_slots);
    if (rc == 0) rc = reserve_budget(o, budget, num_slots);
    if (rc < 0) {
        free(pin);
        return rc;
    }

    char a[32];
    int prc;
    uint64_t bytes = tg_featbuf_bytes_for(o, num_slots);
    tg_featbuf_t *fb = calloc(1, sizeof *fb);
    if (!fb) goto err_budget;
    fb->o = *o;
    fb->o.num_slots = num_slots;
    fb->o.pinned = NULL; /* the caller's array may go away: the buffer keeps its own copy */
    fb->row_bytes = row_bytes_of(o);
    fb->stride = stride_of(o);
    fb->num_slots = num_slots;
    fb->min_slots = min_slots;
    fb->budget = budget;
    fb->reserved = bytes;
    fb->direct = use_direct(o, num_slots);
    if (alloc_memory(fb) < 0) goto err_free;
    tg_featbuf_pin_set(fb, pin, npin);
    free(pin);
    pin = NULL;
    if ((prc = pthread_mutex_init(&fb->mu, NULL))) goto err_sync;
    if ((prc = pthread_cond_init(&fb->cv_space, NULL))) goto err_mu;
    if ((prc = pthread_cond_init(&fb->cv_done, NULL))) goto err_cv;
    *out = fb;
    return 0;

err_cv:
    pthread_cond_destroy(&fb->cv_space);
err_mu:
    pthread_mutex_destroy(&fb->mu);
err_sync:
    free_memory(fb);
    if (budget) tg_budget_release(budget, bytes);
    return tg_err(-prc, "feature buffer: cannot initialise its lock: %s", strerror(prc));
err_free:
    free_memory(fb);
err_budget:
    free(pin);
    if (budget) tg_budget_release(budget, bytes);
    return tg_err(-ENOMEM, "feature buffer: out of memory allocating %u slots (%s)", num_slots,
                  tg_fmt_bytes(bytes, a, sizeof a));
}

void tg_featbuf_destroy(tg_featbuf_t *fb)
{
    if (!fb) return;
    if (fb->live_handles) {
        /* a handle would point at freed memory: a bug in the caller, not a runtime condition */
        fprintf(stderr, "tg_featbuf_destroy: %llu batch handles still alive\n",
                (unsigned long long)fb->live_handles);
        abort();
    }
    pthread_cond_destroy(&fb->cv_done);
    pthread_cond_destroy(&fb->cv_space);
    pthread_mutex_destroy(&fb->mu);
    if (fb->budget) tg_budget_release(fb->budget, fb->reserved);
    free_memory(fb);
}

void tg_featbuf_shutdown(tg_featbuf_t *fb)
{
    pthread_mutex_lock(&fb->mu);
    fb->shutdown = 1;
    pthread_cond_broadcast(&fb->cv_space);
    pthread_cond_broadcast(&fb->cv_done);
    pthread_mutex_unlock(&fb->mu);
}

uint32_t tg_featbuf_num_slots(const tg_featbuf_t *fb)
{
    return fb->num_slots;
}

size_t tg_featbuf_row_bytes(const tg_featbuf_t *fb)
{
    return fb->row_bytes;
}

size_t tg_featbuf_slot_stride(const tg_featbuf_t *fb)
{
    return fb->stride;
}

uint64_t tg_featbuf_reserved_bytes(const tg_featbuf_t *fb)
{
    tg_featbuf_t *m = (tg_featbuf_t *)fb; /* the lock is not part of the logical state */
    pthread_mutex_lock(&m->mu);
    uint64_t r = fb->reserved + fb->handle_bytes;
    pthread_mutex_unlock(&m->mu);
    return r;
}

int tg_featbuf_is_direct_map(const tg_featbuf_t *fb)
{
    return fb->direct;
}

void tg_featbuf_memory(const tg_featbuf_t *fb, void **base, size_t *len)
{
    *base = fb->data;
    *len = fb->data_bytes;
}

void *tg_featbuf_row(const tg_featbuf_t *fb, uint32_t slot)
{
    return fb->data + (size_t)slot * fb->stride;
}

/* ---------------------------------------------------------------- handles */

int tg_featbuf_batch_create(tg_featbuf_t *fb, tg_featbuf_batch_t **out)
{
    *out = NULL;
    uint64_t bytes = handle_bytes_of(&fb->o);
    if (fb->budget) {
        int rc = tg_budget_reserve(fb->budget, bytes, "feature buffer batch handle");
        if (rc < 0) return rc;
    }
    size_t m = fb->o.max_batch_nodes;
    tg_featbuf_batch_t *h = calloc(1, sizeof *h);
    if (h) {
        h->slots = malloc(m * sizeof *h->slots);
        h->loads = malloc(m * sizeof *h->loads);
        h->load_done = malloc(m);
        h->waits = malloc(m * sizeof *h->waits);
    }
    if (!h || !h->slots || !h->loads || !h->load_done || !h->waits) {
        if (h) {
            free(h->slots);
            free(h->loads);
            free(h->load_done);
            free(h->waits);
            free(h);
        }
        if (fb->budget) tg_budget_release(fb->budget, bytes);
        return tg_err(-ENOMEM, "feature buffer: out of memory for a batch handle of %zu nodes", m);
    }
    h->fb = fb;
    h->bytes = bytes;
    pthread_mutex_lock(&fb->mu);
    fb->live_handles++;
    fb->handle_bytes += bytes;
    pthread_mutex_unlock(&fb->mu);
    *out = h;
    return 0;
}

void tg_featbuf_batch_destroy(tg_featbuf_batch_t *h)
{
    if (!h) return;
    tg_featbuf_t *fb = h->fb;
    if (h->state != H_IDLE && tg_featbuf_release(h) < 0) {
        /* loads outstanding: a reader may still write the slots, so nothing can be freed */
        fprintf(stderr, "tg_featbuf_batch_destroy: %s\n", tg_errmsg());
        abort();
    }
    pthread_mutex_lock(&fb->mu);
    fb->live_handles--;
    fb->handle_bytes -= h->bytes;
    pthread_mutex_unlock(&fb->mu);
    if (fb->budget) tg_budget_release(fb->budget, h->bytes);
    free(h->slots);
    free(h->loads);
    free(h->load_done);
    free(h->waits);
    free(h);
}

const uint32_t *tg_featbuf_batch_slots(const tg_featbuf_batch_t *h, size_t *n)
{
    *n = h->n;
    return h->slots;
}

const tg_featbuf_load_t *tg_featbuf_batch_loads(const tg_featbuf_batch_t *h, size_t *n)
{
    *n = h->num_loads;
    return h->loads;
}

size_t tg_featbuf_batch_num_waits(const tg_featbuf_batch_t *h)
{
    return h->num_waits;
}

tg_featbuf_t *tg_featbuf_batch_owner(const tg_featbuf_batch_t *h)
{
    return h->fb;
}

size_t tg_featbuf_batch_pending(const tg_featbuf_batch_t *h)
{
    tg_featbuf_t *fb = h->fb;
    pthread_mutex_lock(&fb->mu);
    size_t p = h->pending;
    pthread_mutex_unlock(&fb->mu);
    return p;
}

/* ---------------------------------------------------------------- acquire */

/* Looks every position up (slots[i] = its slot or NO_SLOT) and returns how many unreferenced
 * slots the batch would take: one per unmapped position and one per position whose row sits
 * unreferenced on the standby list. Exact for distinct nodes, an upper bound otherwise. */
static uint64_t classify(tg_featbuf_t *fb, tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n)
{
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        /* Lookups of random ids miss the cache twice (table entry, then slot metadata) and this
         * loop runs under the lock: fetch the entry PF_DIST nodes ahead and, once it has
         * arrived, the slot it names half as far ahead, so the misses overlap. */
        if (i + PF_DIST < n) __builtin_prefetch(map_home_entry(fb, nodes[i + PF_DIST]));
        if (i + PF_DIST / 2 < n) {
            uint32_t t = *map_home_entry(fb, nodes[i + PF_DIST / 2]);
            if (t != NO_SLOT) __builtin_prefetch(&fb->slots[t]);
        }
        uint32_t s = map_find(fb, nodes[i]);
        h->slots[i] = s;
        /* a pinned row waits on no list: reviving it takes nothing from the others */
        if (s == NO_SLOT || (fb->slots[s].refs == 0 && !fb->slots[s].pinned)) need++;
    }
    return need;
}

/* Maps node to a free slot, else the policy's victim (evicting its row), as a load of h at
 * position pos. fb->mu held; an unreferenced slot exists (admission counted it). */
static uint32_t map_new(tg_featbuf_t *fb, tg_featbuf_batch_t *h, uint64_t node, uint32_t pos)
{
    uint32_t s;
    if (fb->num_free) {
        s = free_pop(fb);
    } else {
        if (fb->num_cand == 0) {
            /* admission counted the slots this batch takes: this is a bug, not a condition */
            fprintf(stderr, "tg_featbuf_acquire: no unreferenced slot left after admission\n");
            abort();
        }
        int prot;
        s = fb->pol->victim(fb, &prot);
        standby_take(fb, s);
        map_remove(fb, fb->slots[s].node);
        fb->st.evictions++;
        fb->st.evictions_protected += (uint64_t)prot;
    }
    fb_slot_t *x = &fb->slots[s];
    x->node = node;
    x->state = TG_FEATBUF_LOADING;
    x->refs = 1;
    x->err = 0;
    x->pinned = fb->num_pin && tg_featbuf_pin_has(fb, node);
    fb->num_pin_slots += x->pinned;
    map_insert(fb, node, s);
    h->slots[pos] = s;
    h->load_done[h->num_loads] = 0;
    h->loads[h->num_loads++] = (tg_featbuf_load_t){.node = node, .slot = s, .pos = pos};
    return s;
}

/* Takes every slot of an admitted batch (fb->mu held, need <= unreferenced slots). Mapped rows
 * are pinned first so that the evictions of the second pass cannot pick a standby row this same
 * batch is about to reuse. */
static void take_slots(tg_featbuf_t *fb, tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t s = h->slots[i];
        if (s == NO_SLOT) continue;
        fb_slot_t *x = &fb->slots[s];
        if (x->state == TG_FEATBUF_VALID) {
            if (x->refs == 0) {
                standby_take(fb, s);
                fb->st.standby_hits++;
            }
            fb->st.hits++;
        } else { /* LOADING for another batch (FAILED slots are never mapped) */
            h->waits[h->num_waits++] = (uint32_t)i;
            fb->st.waits++;
        }
        x->refs++;
    }
    for (size_t i = 0; i < n; i++) {
        if (h->slots[i] != NO_SLOT) continue;
        uint32_t s = map_find(fb, nodes[i]);
        if (s != NO_SLOT) { /* a repeat of a node this batch mapped a moment ago */
            fb->slots[s].refs++;
            h->slots[i] = s;
            fb->st.hits++;
            continue;
        }
        map_new(fb, h, nodes[i], (uint32_t)i);
        fb->st.misses++;
    }
    h->n = n;
    h->pending = h->num_loads;
    h->err = 0;
    h->state = H_ACQUIRED;
    fb->total_refs += n;
    fb->st.lookups += n;
    fb->st.acquires++;
}

static int cmp_load_node(const void *a, const void *b)
{
    uint64_t x = ((const tg_featbuf_load_t *)a)->node, y = ((const tg_featbuf_load_t *)b)->node;
    return (x > y) - (x < y);
}

int tg_featbuf_acquire(tg_featbuf_batch_t *h, const uint64_t *nodes, size_t n, int flags)
{
    tg_featbuf_t *fb = h->fb;
    if (h->state != H_IDLE)
        return tg_err(-EINVAL, "feature buffer: acquire on a batch handle that is still acquired "
                               "(release it first)");
    if (n > fb->o.max_batch_nodes)
        return tg_err(-EINVAL, "feature buffer: batch of %zu nodes exceeds max_batch_nodes %u", n,
                      fb->o.max_batch_nodes);
    for (size_t i = 0; i < n; i++)
        if (nodes[i] >= fb->o.num_nodes)
            return tg_err(-EINVAL,
                          "feature buffer: node %llu at position %zu is out of range (%llu nodes)",
                          (unsigned long long)nodes[i], i, (unsigned long long)fb->o.num_nodes);
    h->num_loads = h->num_waits = 0;

    pthread_mutex_lock(&fb->mu);
    if (fb->shutdown) {
        pthread_mutex_unlock(&fb->mu);
        return tg_err(-ECANCELED, "feature buffer: shut down");
    }
    /* Fast path: nobody queued (or nothing to take) and room now. A batch that takes no
     * unreferenced slot may pass queued ones: it cannot delay them. */
    uint64_t need = classify(fb, h, nodes, n);
    uint64_t avail = (uint64_t)fb->num_free + fb->num_cand;
    if (need == 0 || (fb->ticket_next == fb->ticket_serving && need <= avail)) {
        take_slots(fb, h, nodes, n);
        pthread_mutex_unlock(&fb->mu);
        goto done;
    }
    if (flags & TG_FEATBUF_NOWAIT) {
        int queued = fb->ticket_next != fb->ticket_serving;
        pthread_mutex_unlock(&fb->mu);
        return tg_err(
            -EAGAIN, "feature buffer: batch needs %llu unreferenced slots, %llu available%s",
            (unsigned long long)need, (unsigned long long)avail, queued ? " (others queued)" : "");
    }
    /* Slow path: queue up (FIFO by ticket), holding nothing, until first in line with room. */
    uint64_t ticket = fb->ticket_next++;
    double t0 = tg_now();
    fb->st.admission_waits++;
    for (;;) {
        fb->space_waiters++;
        pthread_cond_wait(&fb->cv_space, &fb->mu);
        fb->space_waiters--;
        if (fb->shutdown) {
            /* everyone behind us leaves too (shutdown is final), so the queue needs no repair */
            pthread_mutex_unlock(&fb->mu);
            return tg_err(-ECANCELED, "feature buffer: shut down while waiting for free slots");
        }
        if (ticket != fb->ticket_serving) continue;
        need = classify(fb, h, nodes, n);
        if (need <= (uint64_t)fb->num_free + fb->num_cand) break;
    }
    take_slots(fb, h, nodes, n);
    fb->ticket_serving++;
    fb->st.admission_wait_s += tg_now() - t0;
    if (fb->space_waiters) pthread_cond_broadcast(&fb->cv_space); /* the next in line may fit */
    pthread_mutex_unlock(&fb->mu);
done:
    if ((flags & TG_FEATBUF_SORT_LOADS) && h->num_loads > 1)
        qsort(h->loads, h->num_loads, sizeof *h->loads, cmp_load_node);
    return (int)TG_MIN(h->num_loads, (size_t)INT32_MAX);
}

/* ---------------------------------------------------------------- pinned set and future trace */

/* Brings every mapped slot's pinned flag in line with a new pinned set, moving idle rows between
 * the candidates and the pinned standby. Returns the number of rows that became candidates. */
static uint32_t repin_slots(tg_featbuf_t *fb)
{
    uint32_t unpinned = 0;
    for (uint32_t s = 0; s < fb->num_slots; s++) {
        fb_slot_t *x = &fb->slots[s];
        if (x->state != TG_FEATBUF_LOADING && x->state != TG_FEATBUF_VALID) continue;
        uint8_t want = (uint8_t)(fb->num_pin && tg_featbuf_pin_has(fb, x->node));
        if (want == x->pinned) continue;
        int idle = x->state == TG_FEATBUF_VALID && x->refs == 0;
        if (idle) standby_take(fb, s);
        x->pinned = want;
        fb->num_pin_slots += want ? 1 : (uint32_t)-1;
        if (idle) standby_push(fb, s);
        unpinned += idle && !want;
    }
    return unpinned;
}

uint64_t tg_featbuf_pin_capacity(const tg_featbuf_t *fb)
{
    return fb->o.policy == TG_FEATBUF_STATIC ? fb->pin_cap : 0;
}

int tg_featbuf_pin(tg_featbuf_t *fb, const uint64_t *nodes, size_t n)
{
    if (fb->o.policy != TG_FEATBUF_STATIC)
        return tg_err(-EINVAL, "feature buffer: pinning needs policy static, not %s",
                      fb->pol->name);
    uint64_t *v, d;
    int rc = pin_prepare(nodes, n, fb->o.num_nodes, &v, &d);
    if (rc < 0) return rc;
    if (d > fb->pin_cap) {
        free(v);
        return pin_too_many(&fb->o, d, fb->num_slots);
    }
    pthread_mutex_lock(&fb->mu);
    tg_featbuf_pin_set(fb, v, d);
    if (repin_slots(fb) && fb->space_waiters) pthread_cond_broadcast(&fb->cv_space);
    pthread_mutex_unlock(&fb->mu);
    free(v);
    return 0;
}

int tg_featbuf_preload(tg_featbuf_batch_t *h)
{
    tg_featbuf_t *fb = h->fb;
    if (fb->o.policy != TG_FEATBUF_STATIC)
        return tg_err(-EINVAL, "feature buffer: preload needs policy static, not %s",
                      fb->pol->name);
    if (h->state != H_IDLE)
        return tg_err(-EINVAL, "feature buffer: preload on a batch handle that is still "
                               "acquired (release it first)");
    h->num_loads = h->num_waits = 0;
    pthread_mutex_lock(&fb->mu);
    int rc = 0;
    if (fb->shutdown) {
        rc = tg_err(-ECANCELED, "feature buffer: shut down");
    } else if (fb->ticket_next != fb->ticket_serving) {
        /* taking slots now would delay the acquirers in line: they go first */
        rc = tg_err(-EAGAIN, "feature buffer: preload while acquirers wait for slots");
    } else {
        uint64_t avail = (uint64_t)fb->num_free + fb->num_cand;
        uint32_t k = 0;
        for (; fb->pin_cursor < fb->num_pin && k < fb->o.max_batch_nodes; fb->pin_cursor++) {
            uint64_t v = fb->pin[fb->pin_cursor];
            if (map_find(fb, v) != NO_SLOT) continue; /* loaded, or loading for a batch */
            if (avail == 0) break;
            map_new(fb, h, v, k++);
            avail--;
        }
        if (k == 0 && fb->pin_cursor < fb->num_pin)
            rc = tg_err(-EAGAIN, "feature buffer: preload finds no unreferenced slot");
        if (k) {
            h->n = k;
            h->pending = k;
            h->err = 0;
            h->state = H_ACQUIRED;
            fb->total_refs += k;
            fb->st.acquires++;
            fb->st.preloads += k;
            rc = (int)k;
        }
    }
    pthread_mutex_unlock(&fb->mu);
    return rc;
}

static int trace_nodes_valid(const tg_featbuf_t *fb, uint64_t id, const uint64_t *nodes, size_t n)
{
    if (id == UINT64_MAX)
        return tg_err(-EINVAL, "feature buffer: future batch id 2^64-1 is reserved");
    if (n > UINT32_MAX / 2)
        return tg_err(-EINVAL, "feature buffer: future batch %llu of %zu nodes is too long",
                      (unsigned long long)id, n);
    for (size_t i = 0; i < n; i++)
        if (nodes[i] >= fb->o.num_nodes)
            return tg_err(-EINVAL,
                          "feature buffer: future batch %llu: node %llu at position %zu is out "
                          "of range (%llu nodes)",
                          (unsigned long long)id, (unsigned long long)nodes[i], i,
                          (unsigned long long)fb->o.num_nodes);
    return 0;
}

int tg_featbuf_future_add(tg_featbuf_t *fb, uint64_t batch_id, const uint64_t *nodes, size_t n)
{
    if (!fb->pol->rekey) return 0; /* the policy decides without a future */
    int rc = trace_nodes_valid(fb, batch_id, nodes, n);
    if (rc < 0) return rc;
    pthread_mutex_lock(&fb->mu);
    rc = tg_featbuf_trace_add(fb, batch_id, nodes, n);
    pthread_mutex_unlock(&fb->mu);
    return rc;
}

int tg_featbuf_future_done(tg_featbuf_t *fb, uint64_t batch_id)
{
    if (!fb->pol->rekey) return 0;
    pthread_mutex_lock(&fb->mu);
    int rc = tg_featbuf_trace_done(fb, batch_id);
    pthread_mutex_unlock(&fb->mu);
    return rc;
}

tg_featbuf_policy_t tg_featbuf_policy(const tg_featbuf_t *fb)
{
    return fb->o.policy;
}

/* ---------------------------------------------------------------- complete / wait / release */

/* fb->mu held; k valid and outstanding. */
static void complete_one(tg_featbuf_t *fb, tg_featbuf_batch_t *h, size_t k, int status)
{
    uint32_t s = h->loads[k].slot;
    fb_slot_t *x = &fb->slots[s];
    if (status == 0) {
        x->state = TG_FEATBUF_VALID;
    } else {
        /* Unmap at once: later acquirers load the node afresh into another slot, while batches
         * already holding this slot see FAILED (their references keep it from being reused). */
        map_remove(fb, x->node);
        x->state = TG_FEATBUF_FAILED;
        fb->num_pin_slots -= x->pinned;
        x->pinned = 0;
        x->err = status;
        fb->st.load_errors++;
        if (!h->err) {
            h->err = status;
            h->err_node = x->node;
        }
    }
    h->load_done[k] = 1;
    h->pending--;
}

int tg_featbuf_complete(tg_featbuf_batch_t *h, size_t k, int status)
{
    tg_featbuf_t *fb = h->fb;
    if (status > 0)
        return tg_err(-EINVAL,
                      "feature buffer: complete status must be 0 or a negative error code, "
                      "got %d",
                      status);
    pthread_mutex_lock(&fb->mu);
    int rc = 0;
    if (h->state == H_IDLE)
        rc = tg_err(-EINVAL, "feature buffer: complete of load %zu of a batch not acquired", k);
    else if (k >= h->num_loads)
        rc = tg_err(-EINVAL, "feature buffer: complete of load %zu, but the batch has %zu loads", k,
                    h->num_loads);
    else if (h->load_done[k])
        rc = tg_err(-EINVAL, "feature buffer: load %zu (node %llu) completed twice", k,
                    (unsigned long long)h->loads[k].node);
    else {
        complete_one(fb, h, k, status);
        if (fb->done_waiters) pthread_cond_broadcast(&fb->cv_done);
    }
    pthread_mutex_unlock(&fb->mu);
    return rc;
}

int tg_featbuf_complete_all(tg_featbuf_batch_t *h, int status)
{
    tg_featbuf_t *fb = h->fb;
    if (status > 0)
        return tg_err(-EINVAL,
                      "feature buffer: complete status must be 0 or a negative error code, "
                      "got %d",
                      status);
    pthread_mutex_lock(&fb->mu);
    if (h->state == H_IDLE) {
        pthread_mutex_unlock(&fb->mu);
        return tg_err(-EINVAL, "feature buffer: complete_all on a batch not acquired");
    }
    for (size_t k = 0; k < h->num_loads && h->pending; k++)
        if (!h->load_done[k]) complete_one(fb, h, k, status);
    if (fb->done_waiters) pthread_cond_broadcast(&fb->cv_done);
    pthread_mutex_unlock(&fb->mu);
    return 0;
}

static int load_error(int code, uint64_t node, const char *whose)
{
    return tg_err(code, "feature buffer: the row of node %llu failed to load in %s: %s",
                  (unsigned long long)node, whose, strerror(-code));
}

/* tg_featbuf_wait, or with block = 0 tg_featbuf_try_wait: -EAGAIN instead of sleeping while a
 * row another batch loads is still loading. */
static int wait_rows(tg_featbuf_batch_t *h, int block)
{
    tg_featbuf_t *fb = h->fb;
    if (h->state == H_READY) return 0;
    if (h->state == H_IDLE) return tg_err(-EINVAL, "feature buffer: wait on a batch not acquired");
    pthread_mutex_lock(&fb->mu);
    int rc = 0;
    if (h->pending) {
        rc = tg_err(-EINVAL,
                    "feature buffer: wait with %zu of this batch's own loads outstanding "
                    "(complete them first, or two extractors could wait for each other)",
                    h->pending);
        pthread_mutex_unlock(&fb->mu);
        return rc;
    }
    if (h->err) rc = load_error(h->err, h->err_node, "this batch");
    for (size_t w = 0; w < h->num_waits && rc == 0; w++) {
        const fb_slot_t *x = &fb->slots[h->slots[h->waits[w]]];
        while (x->state == TG_FEATBUF_LOADING && !fb->shutdown) {
            if (!block) {
                pthread_mutex_unlock(&fb->mu);
                return -EAGAIN;
            }
            fb->done_waiters++;
            pthread_cond_wait(&fb->cv_done, &fb->mu);
            fb->done_waiters--;
        }
        if (x->state == TG_FEATBUF_FAILED)
            rc = load_error(x->err, x->node, "another batch");
        else if (x->state != TG_FEATBUF_VALID)
            rc = tg_err(-ECANCELED,
                        "feature buffer: shut down while waiting for the row of "
                        "node %llu",
                        (unsigned long long)x->node);
    }
    if (rc == 0) h->state = H_READY;
    pthread_mutex_unlock(&fb->mu);
    return rc;
}

int tg_featbuf_wait(tg_featbuf_batch_t *h)
{
    return wait_rows(h, 1);
}

int tg_featbuf_try_wait(tg_featbuf_batch_t *h)
{
    return wait_rows(h, 0);
}

int tg_featbuf_release(tg_featbuf_batch_t *h)
{
    tg_featbuf_t *fb = h->fb;
    if (h->state == H_IDLE)
        return tg_err(-EINVAL, "feature buffer: release of a batch not acquired");
    pthread_mutex_lock(&fb->mu);
    if (h->pending) {
        size_t p = h->pending;
        pthread_mutex_unlock(&fb->mu);
        return tg_err(-EBUSY,
                      "feature buffer: release with %zu loads outstanding (their reads may still "
                      "write the slots; complete them first)",
                      p);
    }
    uint32_t freed = 0;
    for (size_t i = 0; i < h->n; i++) {
        uint32_t s = h->slots[i];
        fb_slot_t *x = &fb->slots[s];
        if (--x->refs) continue;
        freed++;
        if (x->state == TG_FEATBUF_VALID) {
            standby_push(fb, s); /* stays mapped: reused without I/O if asked again soon */
        } else {
            /* FAILED (LOADING cannot reach 0: its loader holds a reference until complete) */
            x->node = NO_NODE;
            x->state = TG_FEATBUF_FREE;
            free_push(fb, s);
        }
    }
    fb->total_refs -= h->n;
    fb->st.releases++;
    if (freed && fb->space_waiters) pthread_cond_broadcast(&fb->cv_space);
    h->state = H_IDLE;
    h->n = h->num_loads = h->num_waits = 0;
    pthread_mutex_unlock(&fb->mu);
    return 0;
}

/* ---------------------------------------------------------------- gather */

typedef struct {
    const tg_featbuf_t *fb;
    const uint32_t *slots;
    float *X;
} gather_ctx_t;

static void gather_rows(void *ctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    const gather_ctx_t *g = ctx;
    const tg_featbuf_t *fb = g->fb;
    size_t d = fb->o.feat_dim;
    for (size_t i = begin; i < end; i++) {
        const unsigned char *src = fb->data + (size_t)g->slots[i] * fb->stride;
        float *dst = g->X + i * d;
        tg_feat_rows_f32(dst, src, 0, 1, d, fb->o.dtype, 0);
    }
}

int tg_featbuf_gather_f32(const tg_featbuf_batch_t *h, float *X, tg_pool_t *pool)
{
    if (h->state != H_READY)
        return tg_err(-EINVAL, "feature buffer: gather from a batch whose rows are not all valid "
                               "(tg_featbuf_wait must return 0 first)");
    gather_ctx_t g = {.fb = h->fb, .slots = h->slots, .X = X};
    tg_pool_for(pool, h->n, gather_rows, &g);
    return 0;
}

/* ---------------------------------------------------------------- counters and inspection */

void tg_featbuf_stats(tg_featbuf_t *fb, tg_featbuf_stats_t *s, int reset)
{
    pthread_mutex_lock(&fb->mu);
    *s = fb->st;
    s->num_slots = fb->num_slots;
    s->slots_free = fb->num_free;
    s->slots_standby = fb->num_cand + fb->num_pin_idle;
    s->slots_referenced = fb->num_slots - fb->num_free - s->slots_standby;
    s->slots_pinned = fb->num_pin_slots;
    s->pinned_nodes = fb->num_pin;
    s->future_batches = fb->tr.rec_len;
    s->future_positions = fb->tr.pos_len;
    if (reset) memset(&fb->st, 0, sizeof fb->st);
    pthread_mutex_unlock(&fb->mu);
}

double tg_featbuf_hit_ratio(const tg_featbuf_stats_t *s)
{
    return s->lookups ? (double)(s->hits + s->waits) / (double)s->lookups : 0.0;
}

int tg_featbuf_lookup(tg_featbuf_t *fb, uint64_t node, uint32_t *slot, uint32_t *refs, int *state)
{
    if (node >= fb->o.num_nodes) return 0;
    pthread_mutex_lock(&fb->mu);
    uint32_t s = map_find(fb, node);
    if (s != NO_SLOT) {
        if (slot) *slot = s;
        if (refs) *refs = fb->slots[s].refs;
        if (state) *state = fb->slots[s].state;
    }
    pthread_mutex_unlock(&fb->mu);
    return s != NO_SLOT;
}

void tg_featbuf_slot_info(tg_featbuf_t *fb, uint32_t slot, uint64_t *node, uint32_t *refs,
                          int *state)
{
    pthread_mutex_lock(&fb->mu);
    const fb_slot_t *x = &fb->slots[slot];
    if (node) *node = x->state == TG_FEATBUF_FREE ? NO_NODE : x->node;
    if (refs) *refs = x->refs;
    if (state) *state = x->state;
    pthread_mutex_unlock(&fb->mu);
}

/* The per-slot part of check_locked; counts mapped slots, references and pinned ones. */
static int check_slots(tg_featbuf_t *fb, uint64_t *mapped, uint64_t *refs)
{
#define BAD(...) return tg_err(-EFAULT, "feature buffer check: " __VA_ARGS__)
    uint32_t cand = 0, pin_idle = 0, pinned = 0;
    for (uint32_t s = 0; s < fb->num_slots; s++) {
        const fb_slot_t *x = &fb->slots[s];
        *refs += x->refs;
        int in_map = x->node < fb->o.num_nodes && map_find(fb, x->node) == s;
        switch (x->state) {
        case TG_FEATBUF_FREE:
            if (x->node != NO_NODE || x->refs || x->list != FB_LIST_FREE || x->pinned)
                BAD("free slot %u: node %llu refs %u list %d pinned %d", s,
                    (unsigned long long)x->node, x->refs, x->list, x->pinned);
            break;
        case TG_FEATBUF_LOADING:
            if (!in_map || !x->refs || x->list != FB_LIST_NONE)
                BAD("loading slot %u: mapped %d refs %u list %d", s, in_map, x->refs, x->list);
            ++*mapped;
            break;
        case TG_FEATBUF_VALID: {
            int want = x->refs ? FB_LIST_NONE : x->pinned ? FB_LIST_PINNED : FB_LIST_CAND;
            if (!in_map || x->list != want)
                BAD("valid slot %u: mapped %d refs %u pinned %d list %d", s, in_map, x->refs,
                    x->pinned, x->list);
            ++*mapped;
            cand += x->list == FB_LIST_CAND;
            pin_idle += x->list == FB_LIST_PINNED;
            break;
        }
        case TG_FEATBUF_FAILED:
            if (in_map || !x->refs || x->list != FB_LIST_NONE || x->pinned)
                BAD("failed slot %u: mapped %d refs %u list %d pinned %d", s, in_map, x->refs,
                    x->list, x->pinned);
            break;
        default:
            BAD("slot %u: state %d", s, x->state);
        }
        if (x->state == TG_FEATBUF_LOADING || x->state == TG_FEATBUF_VALID) {
            int want = fb->num_pin && tg_featbuf_pin_has(fb, x->node);
            if (x->pinned != want)
                BAD("slot %u of node %llu: pinned flag %d, pinned set says %d", s,
                    (unsigned long long)x->node, x->pinned, want);
            pinned += x->pinned;
        }
    }
    if (cand != fb->num_cand || pin_idle != fb->num_pin_idle || pinned != fb->num_pin_slots)
        BAD("%u candidates, %u idle pinned, %u pinned slots; counts say %u, %u, %u", cand, pin_idle,
            pinned, fb->num_cand, fb->num_pin_idle, fb->num_pin_slots);
    if (fb->num_pin > fb->num_slots - fb->min_slots)
        BAD("%llu pinned nodes leave fewer than %u slots", (unsigned long long)fb->num_pin,
            fb->min_slots);
    return 0;
#undef BAD
}

static int check_locked(tg_featbuf_t *fb)
{
#define BAD(...) return tg_err(-EFAULT, "feature buffer check: " __VA_ARGS__)
    uint64_t mapped = 0, refs = 0;
    int rc = check_slots(fb, &mapped, &refs);
    if (rc < 0) return rc;
    if (refs != fb->total_refs)
        BAD("slot references sum to %llu, batches hold %llu", (unsigned long long)refs,
            (unsigned long long)fb->total_refs);
    uint64_t entries = 0, len = fb->direct ? fb->o.num_nodes : fb->map_mask + 1;
    for (uint64_t i = 0; i < len; i++) {
        uint32_t s = fb->map[i];
        if (s == NO_SLOT) continue;
        entries++;
        if (s >= fb->num_slots) BAD("table entry %llu holds slot %u", (unsigned long long)i, s);
        if (fb->direct && fb->slots[s].node != i)
            BAD("table entry of node %llu points at slot %u of node %llu", (unsigned long long)i, s,
                (unsigned long long)fb->slots[s].node);
    }
    if (entries != mapped)
        BAD("%llu table entries for %llu mapped slots", (unsigned long long)entries,
            (unsigned long long)mapped);
    uint32_t n = 0;
    for (uint32_t s = fb->free_head; s != NO_SLOT; s = fb->slots[s].next)
        if (++n > fb->num_slots || fb->slots[s].list != FB_LIST_FREE)
            BAD("free list corrupt at %u", s);
    if (n != fb->num_free) BAD("free list has %u slots, count says %u", n, fb->num_free);
    if (fb->st.lookups != fb->st.hits + fb->st.waits + fb->st.misses)
        BAD("lookups %llu != hits + waits + misses", (unsigned long long)fb->st.lookups);
    return fb->pol->check(fb);
#undef BAD
}

int tg_featbuf_check(tg_featbuf_t *fb)
{
    pthread_mutex_lock(&fb->mu);
    int rc = check_locked(fb);
    pthread_mutex_unlock(&fb->mu);
    return rc;
}
