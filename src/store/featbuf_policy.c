/* The feature buffer's replacement policies (see featbuf-impl.h for the seam, featbuf.h for the
 * user's view). Each policy orders the candidates - valid, unreferenced, unpinned rows - and names
 * the one to evict:
 *   LRU, STATIC  a doubly-linked list through the slots, least recently released at the head:
 *                O(1) per operation (GNNDrive's standby list; STATIC's pinned rows never join it)
 *   NEXT_USE     Belady (Ginex, section 3.3): the row whose node's next announced use is farthest,
 *                never used again first; ties least recently released first
 *   WINDOW       GIDS's window buffer (section 3.4): rows not used by the next `window` announced
 *                batches first, least recently released first; then the protected ones, same order
 * NEXT_USE and WINDOW keep the candidates in an indexed min-heap on (key, release tick), so
 * insert, remove, victim and a key change cost O(log candidates); a key changes when a batch is
 * announced (its nodes that had no announced use) or retired (its nodes, and for WINDOW the
 * nodes of the batch that enters the window).
 *
 * The future trace is the Ginex inspector's knowledge held incrementally: rather than the whole
 * superbatch's iters/ptr arrays, the announced positions that have not been retired, each
 * node's positions chained in batch order, so a node's next use is its chain's head.
 */
#include "featbuf-impl.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- LRU (and STATIC) */

static void lru_insert(tg_featbuf_t *fb, uint32_t s)
{
    fb_slot_t *x = &fb->slots[s];
    x->prev = fb->lru_tail;
    x->next = FB_NO_SLOT;
    if (fb->lru_tail != FB_NO_SLOT)
        fb->slots[fb->lru_tail].next = s;
    else
        fb->lru_head = s;
    fb->lru_tail = s;
}

static void lru_remove(tg_featbuf_t *fb, uint32_t s)
{
    fb_slot_t *x = &fb->slots[s];
    if (x->prev != FB_NO_SLOT)
        fb->slots[x->prev].next = x->next;
    else
        fb->lru_head = x->next;
    if (x->next != FB_NO_SLOT)
        fb->slots[x->next].prev = x->prev;
    else
        fb->lru_tail = x->prev;
    x->prev = x->next = FB_NO_SLOT;
}

static uint32_t lru_victim(tg_featbuf_t *fb, int *protected_out)
{
    *protected_out = 0;
    return fb->lru_head; /* the oldest released row goes */
}

static int lru_check(tg_featbuf_t *fb)
{
    uint32_t n = 0, prev = FB_NO_SLOT;
    for (uint32_t s = fb->lru_head; s != FB_NO_SLOT; prev = s, s = fb->slots[s].next)
        if (++n > fb->num_slots || fb->slots[s].list != FB_LIST_CAND || fb->slots[s].prev != prev)
            return tg_err(-EFAULT, "feature buffer check: standby list corrupt at %u", s);
    if (n != fb->num_cand || prev != fb->lru_tail)
        return tg_err(-EFAULT,
                      "feature buffer check: standby list has %u slots ending at %u, counts say "
                      "%u ending at %u",
                      n, prev, fb->num_cand, fb->lru_tail);
    return 0;
}

/* ---------------------------------------------------------------- the future trace */

static uint64_t tab_home(const fb_trace_t *t, uint64_t node)
{
    return tg_featbuf_hash_home(node, t->tab_bits);
}

/* The table index of node's entry, or FB_NIL. */
static uint32_t tab_find(const fb_trace_t *t, uint64_t node)
{
    for (uint64_t i = tab_home(t, node);; i = (i + 1) & t->tab_mask) {
        uint32_t h = t->tab[i].head;
        if (h == FB_NIL) return FB_NIL;
        if (t->pos[h].node == node) return (uint32_t)i;
    }
}

/* node has no entry; pos[p].node == node already. */
static void tab_insert(fb_trace_t *t, uint64_t node, uint32_t p)
{
    uint64_t i = tab_home(t, node);
    while (t->tab[i].head != FB_NIL)
        i = (i + 1) & t->tab_mask;
    t->tab[i] = (fb_fnode_t){.head = p, .tail = p};
}

/* Backward-shift deletion (as the mapping table's): no tombstones, lookups stay exact. */
static void tab_remove(fb_trace_t *t, uint64_t i)
{
    for (uint64_t j = i;;) {
        j = (j + 1) & t->tab_mask;
        if (t->tab[j].head == FB_NIL) break;
        uint64_t k = tab_home(t, t->pos[t->tab[j].head].node);
        if (!tg_featbuf_hash_stays(i, j, k)) {
            t->tab[i] = t->tab[j];
            i = j;
        }
    }
    t->tab[i].head = t->tab[i].tail = FB_NIL;
}

static uint32_t ring(const fb_trace_t *t, uint64_t i)
{
    return (uint32_t)(i % t->cap);
}

/* The id of node's next announced batch, FB_NEVER if none. */
static uint64_t next_use(const tg_featbuf_t *fb, uint64_t node)
{
    const fb_trace_t *t = &fb->tr;
    uint32_t i = tab_find(t, node);
    return i == FB_NIL ? FB_NEVER : t->rec[t->pos[t->tab[i].head].rec].id;
}

/* 1 if node is used by one of the first `window` batches of the trace. */
static int in_window(const tg_featbuf_t *fb, uint64_t node)
{
    const fb_trace_t *t = &fb->tr;
    uint32_t i = tab_find(t, node);
    if (i == FB_NIL) return 0;
    uint32_t r = t->pos[t->tab[i].head].rec;
    return (uint64_t)ring(t, (uint64_t)r + t->cap - t->rec_head) < fb->o.window;
}

int tg_featbuf_trace_add(tg_featbuf_t *fb, uint64_t id, const uint64_t *nodes, size_t n)
{
    fb_trace_t *t = &fb->tr;
    if (t->have_last && id <= t->last_id)
        return tg_err(-EINVAL,
                      "feature buffer: future batch %llu announced after batch %llu (ids must "
                      "increase)",
                      (unsigned long long)id, (unsigned long long)t->last_id);
    if (n > (size_t)(t->cap - t->pos_len) || (n && t->rec_len == t->cap))
        return tg_err(-ENOSPC,
                      "feature buffer: future batch %llu of %zu nodes does not fit: %u of "
                      "future_positions %u are announced and not done (call "
                      "tg_featbuf_future_done for batches that acquired, or raise "
                      "future_positions)",
                      (unsigned long long)id, n, t->pos_len, t->cap);
    t->have_last = 1;
    t->last_id = id;
    if (n == 0) return 0; /* nothing to remember: done() of it finds no record and is a no-op */
    uint32_t r = ring(t, (uint64_t)t->rec_head + t->rec_len);
    uint32_t first = ring(t, (uint64_t)t->pos_head + t->pos_len);
    t->rec[r] = (fb_frec_t){.id = id, .first = first, .count = (unsigned)n, .done = 0};
    t->rec_len++;
    t->pos_len += (uint32_t)n;
    for (size_t k = 0; k < n; k++) {
        uint32_t p = ring(t, (uint64_t)first + k);
        t->pos[p] = (fb_fpos_t){.node = nodes[k], .next = FB_NIL, .rec = r};
        uint32_t e = tab_find(t, nodes[k]);
        if (e != FB_NIL) { /* an earlier use stays the next one */
            t->pos[t->tab[e].tail].next = p;
            t->tab[e].tail = p;
        } else {
            tab_insert(t, nodes[k], p);
            tg_featbuf_node_changed(fb, nodes[k]); /* was never used again */
        }
    }
    return 0;
}

/* Retires the oldest batch (done, as every earlier one): its nodes move on to their next use. */
static void retire_head(tg_featbuf_t *fb)
{
    fb_trace_t *t = &fb->tr;
    fb_frec_t R = t->rec[t->rec_head];
    for (uint32_t k = 0; k < R.count; k++) {
        uint32_t p = ring(t, (uint64_t)R.first + k);
        uint32_t e = tab_find(t, t->pos[p].node);
        if (t->pos[p].next == FB_NIL)
            tab_remove(t, e);
        else
            t->tab[e].head = t->pos[p].next;
    }
    t->rec_head = ring(t, (uint64_t)t->rec_head + 1);
    t->rec_len--;
    t->pos_head = ring(t, (uint64_t)t->pos_head + R.count);
    t->pos_len -= R.count;
    /* the retired positions keep their nodes until the next announcement overwrites them */
    for (uint32_t k = 0; k < R.count; k++)
        tg_featbuf_node_changed(fb, t->pos[ring(t, (uint64_t)R.first + k)].node);
    if (fb->o.policy == TG_FEATBUF_WINDOW && t->rec_len >= fb->o.window) {
        const fb_frec_t *in = &t->rec[ring(t, (uint64_t)t->rec_head + fb->o.window - 1)];
        for (uint32_t k = 0; k < in->count; k++)
            tg_featbuf_node_changed(fb, t->pos[ring(t, (uint64_t)in->first + k)].node);
    }
}

int tg_featbuf_trace_done(tg_featbuf_t *fb, uint64_t id)
{
    fb_trace_t *t = &fb->tr;
    /* records are in id order: binary search */
    uint32_t lo = 0, hi = t->rec_len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->rec[ring(t, (uint64_t)t->rec_head + mid)].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    fb_frec_t *R = lo < t->rec_len ? &t->rec[ring(t, (uint64_t)t->rec_head + lo)] : NULL;
    if (!R || R->id != id) {
        if (!t->have_last || id > t->last_id)
            return tg_err(-EINVAL, "feature buffer: future_done of batch %llu, never announced",
                          (unsigned long long)id);
        return 0; /* an empty batch, or one retired already */
    }
    if (R->done)
        return tg_err(-EINVAL, "feature buffer: future_done of batch %llu twice",
                      (unsigned long long)id);
    R->done = 1;
    while (t->rec_len && t->rec[t->rec_head].done)
        retire_head(fb);
    return 0;
}

int tg_featbuf_trace_check(tg_featbuf_t *fb)
{
#define BAD(...) return tg_err(-EFAULT, "feature buffer check: future trace: " __VA_ARGS__)
    const fb_trace_t *t = &fb->tr;
    if (t->pos_len > t->cap || t->rec_len > t->cap || t->rec_len > t->pos_len)
        BAD("%u positions, %u batches for capacity %u", t->pos_len, t->rec_len, t->cap);
    uint64_t at = t->pos_head, sum = 0;
    for (uint32_t k = 0; k < t->rec_len; k++) {
        uint32_t r = ring(t, (uint64_t)t->rec_head + k);
        const fb_frec_t *R = &t->rec[r];
        if (R->first != ring(t, at) || R->count == 0)
            BAD("batch %llu starts at %u with %u positions, expected %u", (unsigned long long)R->id,
                R->first, (unsigned)R->count, ring(t, at));
        if (k && R->id <= t->rec[ring(t, (uint64_t)r + t->cap - 1)].id)
            BAD("batch ids out of order at %llu", (unsigned long long)R->id);
        for (uint32_t q = 0; q < R->count; q++)
            if (t->pos[ring(t, at + q)].rec != r)
                BAD("position %u names batch record %u, not %u", ring(t, at + q),
                    t->pos[ring(t, at + q)].rec, r);
        at += R->count;
        sum += R->count;
    }
    if (sum != t->pos_len)
        BAD("batches hold %llu positions, count says %u", (unsigned long long)sum, t->pos_len);
    uint64_t chained = 0;
    for (uint64_t i = 0; i <= t->tab_mask; i++) {
        fb_fnode_t e = t->tab[i];
        if (e.head == FB_NIL) continue;
        uint64_t v = t->pos[e.head].node;
        if (tab_find(t, v) != i)
            BAD("table entry %llu of node %llu is not found by lookup", (unsigned long long)i,
                (unsigned long long)v);
        uint32_t last = FB_NIL, prev_rank = 0;
        for (uint32_t p = e.head; p != FB_NIL; last = p, p = t->pos[p].next) {
            uint32_t rank = ring(t, (uint64_t)p + t->cap - t->pos_head);
            if (rank >= t->pos_len || t->pos[p].node != v || (last != FB_NIL && rank <= prev_rank))
                BAD("chain of node %llu broken at position %u", (unsigned long long)v, p);
            prev_rank = rank;
            if (++chained > t->pos_len) BAD("chains hold more positions than announced");
        }
        if (last != e.tail)
            BAD("chain of node %llu ends at %u, tail says %u", (unsigned long long)v, last, e.tail);
    }
    if (chained != t->pos_len)
        BAD("chains hold %llu positions, %u announced", (unsigned long long)chained, t->pos_len);
    return 0;
#undef BAD
}

/* ---------------------------------------------------------------- the indexed heap */

static int ent_less(const fb_heap_ent_t *a, const fb_heap_ent_t *b)
{
    return a->key < b->key || (a->key == b->key && a->tick < b->tick);
}

static void heap_place(tg_featbuf_t *fb, uint32_t i, fb_heap_ent_t e)
{
    fb->heap[i] = e;
    fb->heap_pos[e.slot] = i;
}

static void sift_up(tg_featbuf_t *fb, uint32_t i)
{
    fb_heap_ent_t e = fb->heap[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!ent_less(&e, &fb->heap[p])) break;
        heap_place(fb, i, fb->heap[p]);
        i = p;
    }
    heap_place(fb, i, e);
}

static void sift_down(tg_featbuf_t *fb, uint32_t i)
{
    fb_heap_ent_t e = fb->heap[i];
    for (;;) {
        uint64_t c = 2 * (uint64_t)i + 1;
        if (c >= fb->heap_len) break;
        if (c + 1 < fb->heap_len && ent_less(&fb->heap[c + 1], &fb->heap[c])) c++;
        if (!ent_less(&fb->heap[c], &e)) break;
        heap_place(fb, i, fb->heap[c]);
        i = (uint32_t)c;
    }
    heap_place(fb, i, e);
}

static void heap_fix(tg_featbuf_t *fb, uint32_t i)
{
    if (i > 0 && ent_less(&fb->heap[i], &fb->heap[(i - 1) / 2]))
        sift_up(fb, i);
    else
        sift_down(fb, i);
}

/* The heap key of slot s's node: smaller goes first. */
static uint64_t key_of(const tg_featbuf_t *fb, uint32_t s)
{
    uint64_t v = fb->slots[s].node;
    if (fb->o.policy == TG_FEATBUF_NEXT_USE) return FB_NEVER - next_use(fb, v); /* never: 0 */
    return (uint64_t)in_window(fb, v);
}

static void heap_insert(tg_featbuf_t *fb, uint32_t s)
{
    uint32_t i = fb->heap_len++;
    fb->heap[i] = (fb_heap_ent_t){.key = key_of(fb, s), .tick = ++fb->tick, .slot = s};
    fb->heap_pos[s] = i;
    sift_up(fb, i);
}

static void heap_remove(tg_featbuf_t *fb, uint32_t s)
{
    uint32_t i = fb->heap_pos[s], last = --fb->heap_len;
    fb->heap_pos[s] = FB_NIL;
    if (i == last) return;
    heap_place(fb, i, fb->heap[last]);
    heap_fix(fb, i);
}

static uint32_t heap_victim(tg_featbuf_t *fb, int *protected_out)
{
    *protected_out = fb->heap[0].key != 0; /* announced again / inside the window */
    return fb->heap[0].slot;
}

static void heap_rekey(tg_featbuf_t *fb, uint32_t s)
{
    uint32_t i = fb->heap_pos[s];
    uint64_t k = key_of(fb, s);
    if (k == fb->heap[i].key) return;
    fb->heap[i].key = k;
    heap_fix(fb, i);
}

static int heap_check(tg_featbuf_t *fb)
{
#define BAD(...) return tg_err(-EFAULT, "feature buffer check: policy heap: " __VA_ARGS__)
    if (fb->heap_len != fb->num_cand)
        BAD("%u entries for %u candidates", fb->heap_len, fb->num_cand);
    for (uint32_t i = 0; i < fb->heap_len; i++) {
        const fb_heap_ent_t *e = &fb->heap[i];
        if (e->slot >= fb->num_slots || fb->heap_pos[e->slot] != i ||
            fb->slots[e->slot].list != FB_LIST_CAND)
            BAD("entry %u names slot %u which is not a candidate indexed there", i, e->slot);
        if (i && ent_less(e, &fb->heap[(i - 1) / 2])) BAD("order broken at entry %u", i);
        if (e->key != key_of(fb, e->slot))
            BAD("slot %u (node %llu) has key %llu, its future says %llu", e->slot,
                (unsigned long long)fb->slots[e->slot].node, (unsigned long long)e->key,
                (unsigned long long)key_of(fb, e->slot));
    }
    return tg_featbuf_trace_check(fb);
#undef BAD
}

/* ---------------------------------------------------------------- tables, sizing, pinned set */

static const fb_policy_ops_t policy_lru = {"lru",      lru_insert, lru_remove,
                                           lru_victim, NULL,       lru_check};
static const fb_policy_ops_t policy_static = {"static",   lru_insert, lru_remove,
                                              lru_victim, NULL,       lru_check};
static const fb_policy_ops_t policy_next_use = {"next_use",  heap_insert, heap_remove,
                                                heap_victim, heap_rekey,  heap_check};
static const fb_policy_ops_t policy_window = {"window",    heap_insert, heap_remove,
                                              heap_victim, heap_rekey,  heap_check};

const fb_policy_ops_t *tg_featbuf_policy_ops(tg_featbuf_policy_t p)
{
    switch (p) {
    case TG_FEATBUF_LRU:
        return &policy_lru;
    case TG_FEATBUF_STATIC:
        return &policy_static;
    case TG_FEATBUF_NEXT_USE:
        return &policy_next_use;
    case TG_FEATBUF_WINDOW:
        return &policy_window;
    }
    return NULL;
}

const char *tg_featbuf_policy_name(tg_featbuf_policy_t p)
{
    const fb_policy_ops_t *ops = tg_featbuf_policy_ops(p);
    return ops ? ops->name : "?";
}

static int uses_trace(const tg_featbuf_opts_t *o)
{
    return o->policy == TG_FEATBUF_NEXT_USE || o->policy == TG_FEATBUF_WINDOW;
}

uint64_t tg_featbuf_policy_bytes(const tg_featbuf_opts_t *o, uint32_t num_slots, uint32_t min_slots)
{
    if (o->policy == TG_FEATBUF_STATIC) /* the pinned ids: at most num_slots - min_slots */
        return num_slots > min_slots ? 8ull * (num_slots - min_slots) : 0;
    if (!uses_trace(o)) return 0;
    uint64_t cap = o->future_positions;
    return (uint64_t)num_slots * (sizeof(fb_heap_ent_t) + sizeof(uint32_t)) +
           cap * (sizeof(fb_fpos_t) + sizeof(fb_frec_t)) +
           sizeof(fb_fnode_t) * (1ull << tg_featbuf_hash_bits((uint32_t)cap));
}

int tg_featbuf_policy_init(tg_featbuf_t *fb)
{
    fb->lru_head = fb->lru_tail = FB_NO_SLOT;
    fb->pol = tg_featbuf_policy_ops(fb->o.policy);
    if (fb->o.policy == TG_FEATBUF_STATIC) {
        fb->pin_cap = fb->num_slots - fb->min_slots;
        fb->pin = malloc(8 * (fb->pin_cap ? fb->pin_cap : 1));
        return fb->pin ? 0 : -ENOMEM;
    }
    if (!uses_trace(&fb->o)) return 0;
    fb_trace_t *t = &fb->tr;
    t->cap = fb->o.future_positions;
    t->tab_bits = tg_featbuf_hash_bits(t->cap);
    t->tab_mask = (1ull << t->tab_bits) - 1;
    fb->heap = malloc(sizeof *fb->heap * (fb->num_slots ? fb->num_slots : 1));
    fb->heap_pos = malloc(sizeof *fb->heap_pos * (fb->num_slots ? fb->num_slots : 1));
    t->pos = malloc(sizeof *t->pos * t->cap);
    t->rec = malloc(sizeof *t->rec * t->cap);
    t->tab = malloc(sizeof *t->tab * (t->tab_mask + 1));
    if (!fb->heap || !fb->heap_pos || !t->pos || !t->rec || !t->tab) return -ENOMEM;
    memset(fb->heap_pos, 0xff, sizeof *fb->heap_pos * fb->num_slots);
    memset(t->tab, 0xff, sizeof *t->tab * (t->tab_mask + 1)); /* FB_NIL everywhere */
    return 0;
}

void tg_featbuf_policy_free(tg_featbuf_t *fb)
{
    free(fb->pin);
    free(fb->heap);
    free(fb->heap_pos);
    free(fb->tr.pos);
    free(fb->tr.rec);
    free(fb->tr.tab);
}

void tg_featbuf_pin_set(tg_featbuf_t *fb, const uint64_t *sorted, uint64_t n)
{
    if (n) memcpy(fb->pin, sorted, 8 * n);
    fb->num_pin = n;
    fb->pin_cursor = 0;
}

int tg_featbuf_pin_has(const tg_featbuf_t *fb, uint64_t node)
{
    uint64_t lo = 0, hi = fb->num_pin;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fb->pin[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < fb->num_pin && fb->pin[lo] == node;
}
