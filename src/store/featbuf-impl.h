/* store/featbuf-impl.h - the seam between the feature buffer's mechanism (featbuf.c: slots, the
 * mapping table, references, admission, loads) and its replacement policies (featbuf_policy.c:
 * which unreferenced row goes when a slot is needed, and the future trace and pinned set they
 * decide by). Everything declared here runs under the buffer's mutex unless it says otherwise.
 *
 * Candidates: a slot that is VALID, unreferenced and not pinned is a candidate for eviction; the
 * mechanism counts them (num_cand) and keeps slot->list == FB_LIST_CAND, the policy orders them.
 * The mechanism calls, for slot s:
 *     insert(s)   s became a candidate (its last reference went; the slot stays mapped and valid)
 *     remove(s)   s stops being one: referenced again (a hit on standby) or evicted
 *     victim()    which candidate to evict next (num_cand > 0); the mechanism then removes it,
 *                 unmaps it and counts the eviction
 *     rekey(s)    the announced future of candidate s's node changed (trace policies only)
 * A pinned row (STATIC) that loses its last reference is no candidate: it waits on no list
 * (FB_LIST_PINNED) until it is referenced again, so it is never evicted.
 */
#ifndef TIERGNN_FEATBUF_IMPL_H
#define TIERGNN_FEATBUF_IMPL_H

#include <pthread.h>

#include "tiergnn/featbuf.h"

#define FB_NO_SLOT UINT32_MAX
#define FB_NO_NODE UINT64_MAX
#define FB_NIL UINT32_MAX        /* end of a position chain, empty table entry */
#define FB_NEVER UINT64_MAX      /* next use of a node without announced uses */
#define FB_MAX_FUTURE (1u << 30) /* future_positions limit: u32 ring indices with room to spare */

enum { FB_LIST_NONE = 0, FB_LIST_FREE = 1, FB_LIST_CAND = 2, FB_LIST_PINNED = 3 };

typedef struct fb_slot {
    uint64_t node; /* reverse map; FB_NO_NODE when FREE (a FAILED slot keeps it for messages) */
    uint32_t refs; /* batch positions holding the slot */
    uint32_t prev, next; /* LRU links of a candidate; next doubles as the free-stack link */
    int32_t err;         /* status of a FAILED load */
    uint8_t state;       /* TG_FEATBUF_FREE / LOADING / VALID / FAILED */
    uint8_t list;   /* FB_LIST_*: where an unreferenced slot waits (checked by tg_featbuf_check) */
    uint8_t pinned; /* holds a node of the pinned set (LOADING or VALID) */
} fb_slot_t;

typedef struct fb_policy_ops {
    const char *name;
    void (*insert)(tg_featbuf_t *fb, uint32_t s);
    void (*remove)(tg_featbuf_t *fb, uint32_t s);
    /* *protected_out: the policy would rather have kept it (WINDOW: used within the window;
     * NEXT_USE: used again at all) - counted as evictions_protected. */
    uint32_t (*victim)(tg_featbuf_t *fb, int *protected_out);
    void (*rekey)(tg_featbuf_t *fb, uint32_t s); /* NULL: the order ignores the trace */
    int (*check)(tg_featbuf_t *fb);              /* 0 or -EFAULT with a message */
} fb_policy_ops_t;

/* Heap policies (NEXT_USE, WINDOW): candidates in a min-heap on (key, tick), tick = release
 * order, so equal keys go least recently released first. */
typedef struct fb_heap_ent {
    uint64_t key, tick;
    uint32_t slot;
} fb_heap_ent_t;

/* The future trace: announced batches (a ring of records in id order) and their node positions
 * (a ring in the same order). The positions of one node are chained (next) from its earliest to
 * its latest, and a hash table of {head, tail} per node with announced uses finds the chain;
 * the table's key is read through pos[head].node, so an entry costs 8 bytes. A batch leaves the
 * trace (is retired) once it and every earlier batch are done. */
typedef struct fb_fpos {
    uint64_t node;
    uint32_t next; /* the node's next position, FB_NIL if none */
    uint32_t rec;  /* its batch record */
} fb_fpos_t;

typedef struct fb_frec {
    uint64_t id;
    uint32_t first; /* its first position */
    unsigned count : 31, done : 1;
} fb_frec_t;

typedef struct fb_fnode {
    uint32_t head, tail; /* positions; head == FB_NIL: empty entry */
} fb_fnode_t;

typedef struct fb_trace {
    fb_fpos_t *pos; /* (cap) */
    fb_frec_t *rec; /* (cap) */
    fb_fnode_t *tab;
    uint32_t cap;
    uint32_t pos_head, pos_len, rec_head, rec_len;
    uint64_t tab_mask;
    int tab_bits;
    int have_last;
    uint64_t last_id; /* largest id announced */
} fb_trace_t;

/* The buffer. Lock order: mu is the only lock; every field below it is guarded by it except the
 * immutable sizing fields and data. */
struct tg_featbuf {
    tg_featbuf_opts_t o;
    size_t row_bytes, stride;
    uint32_t num_slots, min_slots;
    unsigned char *data; /* (num_slots * stride) */
    size_t data_bytes;
    fb_slot_t *slots; /* (num_slots) */
    uint32_t *map;    /* direct: (num_nodes); hash: (map_mask + 1) */
    uint64_t map_mask;
    int map_bits;
    int direct;
    const fb_policy_ops_t *pol;

    tg_budget_t *budget;
    uint64_t reserved; /* the buffer's own bytes; handles add theirs to handle_bytes */

    pthread_mutex_t mu;
    pthread_cond_t cv_space, cv_done;
    uint32_t free_head, num_free;
    uint32_t num_cand;      /* candidates (the policy's standby rows) */
    uint32_t num_pin_idle;  /* pinned, valid, unreferenced (FB_LIST_PINNED) */
    uint32_t num_pin_slots; /* slots with pinned set */
    uint32_t lru_head,
        lru_tail;        /* LRU and STATIC: the candidates, head = least recently released */
    uint64_t tick;       /* heap policies: release counter */
    fb_heap_ent_t *heap; /* (num_slots) */
    uint32_t *heap_pos;  /* (num_slots) index of a candidate slot in heap */
    uint32_t heap_len;
    fb_trace_t tr;
    uint64_t *pin;                         /* (pin_cap) the pinned set, sorted, distinct */
    uint64_t num_pin, pin_cap, pin_cursor; /* cursor: tg_featbuf_preload's next index into pin */
    uint64_t ticket_next, ticket_serving;  /* FIFO admission of blocked acquirers */
    uint32_t space_waiters, done_waiters;
    int shutdown;
    uint64_t live_handles, handle_bytes;
    uint64_t total_refs; /* sum of slot refs = positions held by acquired batches */
    tg_featbuf_stats_t st;
};

/* Open-addressing tables (the mapping table, the trace's node table): a power of two >= 2 x the
 * most entries keeps linear probes short (load <= 1/2); Fibonacci hashing (the top bits of a
 * multiply by 2^64/phi) spreads consecutive ids. */
static inline int tg_featbuf_hash_bits(uint64_t max_entries)
{
    int bits = 4;
    while ((1ull << bits) < 2 * max_entries)
        bits++;
    return bits;
}

static inline uint64_t tg_featbuf_hash_home(uint64_t node, int bits)
{
    return (node * 0x9E3779B97F4A7C15ull) >> (64 - bits);
}

/* Backward-shift deletion: the entry at j whose home is k may move to the hole at i unless k
 * lies cyclically in (i, j]. */
static inline int tg_featbuf_hash_stays(uint64_t i, uint64_t j, uint64_t k)
{
    return i <= j ? (i < k && k <= j) : (i < k || k <= j);
}

/* featbuf_policy.c. Sizing works on options alone (before the buffer exists). */
const fb_policy_ops_t *tg_featbuf_policy_ops(tg_featbuf_policy_t p);
/* Bytes the policy adds to a buffer of num_slots slots whose minimum is min_slots. */
uint64_t tg_featbuf_policy_bytes(const tg_featbuf_opts_t *o, uint32_t num_slots,
                                 uint32_t min_slots);
/* Allocates the policy's structures (fb->o, num_slots, min_slots set); -ENOMEM. Not locked. */
int tg_featbuf_policy_init(tg_featbuf_t *fb);
void tg_featbuf_policy_free(tg_featbuf_t *fb);
/* The trace (callers hold mu): see tg_featbuf_future_add / _done for the contract. */
int tg_featbuf_trace_add(tg_featbuf_t *fb, uint64_t id, const uint64_t *nodes, size_t n);
int tg_featbuf_trace_done(tg_featbuf_t *fb, uint64_t id);
/* Replaces the pinned set by sorted distinct nodes[0..n) (n <= pin_cap). */
void tg_featbuf_pin_set(tg_featbuf_t *fb, const uint64_t *sorted, uint64_t n);
int tg_featbuf_pin_has(const tg_featbuf_t *fb, uint64_t node);
/* Verifies the trace's rings, chains and table. */
int tg_featbuf_trace_check(tg_featbuf_t *fb);

/* featbuf.c: the announced future of node changed; reorders its slot if it is a candidate. */
void tg_featbuf_node_changed(tg_featbuf_t *fb, uint64_t node);

#endif
