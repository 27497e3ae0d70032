/* The changeset tier (tiergnn/store.h, "the changeset tier"): Ginex's feature cache (Park et
 * al., "Ginex", section 3.3), direct addressing as in the paper: a u32 address table over every
 * node (its slot, or none) and an array of rows, with each slot's owner and a stack of free
 * slots. It changes only when its owner moves it (retain, apply), so lookups take no lock. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/changeset.h"
#include "tiergnn/extract.h"
#include "tiergnn/store.h"

#define NONE UINT32_MAX
#define KEEP 0x80000000u /* owner mark during retain: the slot's node stays */

typedef struct {
    uint64_t num_nodes, entries;
    uint32_t *addr;  /* (num_nodes) slot of each node, NONE when not held */
    uint32_t *owner; /* (entries) node of each slot, NONE when free */
    unsigned char *rows;
    uint32_t *free_slots;
    uint64_t nfree;
    tg_budget_t *budget;
} cs_tier_t;

static const void *cs_find(const tg_tier_t *t, uint64_t node)
{
    const cs_tier_t *c = t->impl;
    uint32_t slot = node < c->num_nodes ? c->addr[node] : NONE;
    return slot == NONE ? NULL : c->rows + (size_t)slot * t->row_bytes;
}

static void cs_destroy(tg_tier_t *t)
{
    cs_tier_t *c = t->impl;
    if (c) {
        free(c->addr);
        free(c->owner);
        free(c->rows);
        free(c->free_slots);
        if (c->budget && t->mem_bytes) tg_budget_release(c->budget, t->mem_bytes);
        free(c);
    }
    free(t);
}

static const tg_tier_i cs_iface = {cs_find, cs_destroy};

static cs_tier_t *cs_of(const tg_tier_t *t)
{
    return t->iface == &cs_iface ? t->impl : NULL;
}

uint64_t tg_tier_cs_bytes(uint64_t num_nodes, uint64_t entries, size_t row_bytes)
{
    return num_nodes * sizeof(uint32_t) + entries * (row_bytes + 2 * sizeof(uint32_t));
}

int tg_tier_cs_create(tg_tier_t **out, const char *name, uint64_t num_nodes, uint64_t entries,
                      size_t row_bytes, tg_budget_t *budget)
{
    *out = NULL;
    if (!name) name = "changeset";
    if (row_bytes == 0 || num_nodes >= NONE || entries > num_nodes)
        return tg_err(-EINVAL,
                      "changeset tier %s: needs a row width, < 2^32 - 1 nodes and at most one "
                      "entry per node (%llu entries, %llu nodes)",
                      name, (unsigned long long)entries, (unsigned long long)num_nodes);
    uint64_t bytes = tg_tier_cs_bytes(num_nodes, entries, row_bytes);
    char what[64];
    snprintf(what, sizeof what, "changeset tier %s", name);
    int rc;
    if (budget && (rc = tg_budget_reserve(budget, bytes, what)) < 0) return rc;
    tg_tier_t *t = calloc(1, sizeof *t);
    cs_tier_t *c = calloc(1, sizeof *c);
    if (t && c) {
        t->iface = &cs_iface;
        snprintf(t->name, sizeof t->name, "%s", name);
        t->row_bytes = row_bytes;
        t->mem_bytes = budget ? bytes : 0;
        t->impl = c;
        c->budget = budget;
        c->num_nodes = num_nodes;
        c->entries = entries;
        c->addr = malloc(num_nodes ? num_nodes * sizeof(uint32_t) : 1);
        c->owner = malloc(entries ? entries * sizeof(uint32_t) : 1);
        c->free_slots = malloc(entries ? entries * sizeof(uint32_t) : 1);
        c->rows = malloc(entries ? entries * row_bytes : 1);
    }
    if (!t || !c || !c->addr || !c->owner || !c->free_slots || !c->rows) {
        if (t && c)
            cs_destroy(t);
        else {
            free(t);
            free(c);
            if (budget) tg_budget_release(budget, bytes);
        }
        return tg_err(-ENOMEM, "changeset tier %s: out of memory for %llu rows", name,
                      (unsigned long long)entries);
    }
    memset(c->addr, 0xff, num_nodes * sizeof(uint32_t));
    for (uint64_t i = 0; i < entries; i++) {
        c->owner[i] = NONE;
        c->free_slots[i] = (uint32_t)(entries - 1 - i); /* slot 0 is taken first */
    }
    c->nfree = entries;
    *out = t;
    return 0;
}

uint64_t tg_tier_cs_entries(const tg_tier_t *t)
{
    const cs_tier_t *c = cs_of(t);
    return c ? c->entries : 0;
}

uint64_t tg_tier_cs_held(const tg_tier_t *t, uint32_t *nodes)
{
    const cs_tier_t *c = cs_of(t);
    if (!c) return 0;
    if (!nodes) return c->entries - c->nfree;
    uint64_t n = 0;
    for (uint64_t slot = 0; slot < c->entries; slot++)
        if (c->owner[slot] != NONE) nodes[n++] = c->owner[slot];
    return n;
}

void *tg_tier_cs_row(tg_tier_t *t, uint32_t slot)
{
    cs_tier_t *c = t->impl;
    return c->rows + (size_t)slot * t->row_bytes;
}

size_t tg_tier_cs_gather(tg_tier_t *t, const uint64_t *nodes, uint32_t n, void *X, uint64_t *miss)
{
    cs_tier_t *c = t->impl;
    unsigned char *x = X;
    size_t nm = 0;
    for (uint32_t r = 0; r < n; r++) {
        uint32_t slot = c->addr[nodes[r]];
        if (slot != NONE)
            memcpy(x + (size_t)r * t->row_bytes, c->rows + (size_t)slot * t->row_bytes,
                   t->row_bytes);
        else
            miss[nm++] = nodes[r] << 32 | r;
    }
    atomic_fetch_add(&t->lookups, n);
    atomic_fetch_add(&t->hits, n - nm);
    if (nm) qsort(miss, nm, sizeof *miss, tg_cmp_u64);
    return nm;
}

size_t tg_tier_cs_retain(tg_tier_t *t, const uint32_t *state, uint64_t n, uint64_t *fill)
{
    cs_tier_t *c = t->impl;
    size_t nfill = 0;
    /* the nodes of state already held are marked on their slot's owner; the others are to
     * fill */
    for (uint64_t i = 0; i < n; i++) {
        uint32_t v = state[i], slot = c->addr[v];
        if (slot != NONE)
            c->owner[slot] |= KEEP;
        else
            fill[nfill++] = (uint64_t)v << 32;
    }
    for (uint64_t slot = 0; slot < c->entries; slot++) {
        uint32_t o = c->owner[slot];
        if (o == NONE) continue;
        if (o & KEEP) {
            c->owner[slot] = o & ~KEEP;
        } else {
            c->addr[o] = NONE;
            c->owner[slot] = NONE;
            c->free_slots[c->nfree++] = (uint32_t)slot;
        }
    }
    /* in node order (the reads' order), each into a free slot */
    if (nfill) qsort(fill, nfill, sizeof *fill, tg_cmp_u64);
    for (size_t i = 0; i < nfill; i++) {
        uint32_t v = (uint32_t)(fill[i] >> 32), slot = c->free_slots[--c->nfree];
        c->addr[v] = slot;
        c->owner[slot] = v;
        fill[i] |= slot;
    }
    return nfill;
}

int tg_tier_cs_apply(tg_tier_t *t, const struct tg_cs *cs, uint32_t i, const uint64_t *nodes,
                     uint32_t n, const void *X)
{
    cs_tier_t *c = t->impl;
    if (i >= cs->iters) return 0;
    for (uint64_t j = cs->out_off[i]; j < cs->out_off[i + 1]; j++) {
        uint32_t v = cs->out_ids[j], slot = c->addr[v];
        if (slot == NONE)
            return tg_err(-EIO,
                          "changeset tier %s: iteration %u evicts node %u, which is not held "
                          "(internal error)",
                          t->name, i, v);
        c->addr[v] = NONE;
        c->owner[slot] = NONE;
        c->free_slots[c->nfree++] = slot;
    }
    for (uint64_t j = cs->in_off[i]; j < cs->in_off[i + 1]; j++) {
        uint32_t v = cs->in_ids[j], pos = cs->in_pos[j];
        if (!c->nfree || pos >= n || nodes[pos] != v || c->addr[v] != NONE)
            return tg_err(-EIO,
                          "changeset tier %s: iteration %u inserts node %u at position %u, "
                          "which does not fit the tier (internal error)",
                          t->name, i, v, pos);
        uint32_t slot = c->free_slots[--c->nfree];
        c->addr[v] = slot;
        c->owner[slot] = v;
        memcpy(c->rows + (size_t)slot * t->row_bytes,
               (const unsigned char *)X + (size_t)pos * t->row_bytes, t->row_bytes);
    }
    return 0;
}
