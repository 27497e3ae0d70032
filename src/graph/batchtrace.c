/* A run of sampled batches, spilled, with their access trace (see tiergnn/batchtrace.h). */
#include "tiergnn/batchtrace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg_btrace_init(tg_btrace_t *t, tg_budget_t *budget, const char *what)
{
    memset(t, 0, sizeof *t);
    t->budget = budget;
    t->what = what ? what : "batch trace";
}

static int reserve(tg_btrace_t *t, uint64_t bytes)
{
    return t->budget && bytes ? tg_budget_reserve(t->budget, bytes, t->what) : 0;
}

static void release(tg_btrace_t *t, uint64_t bytes)
{
    if (t->budget && bytes) tg_budget_release(t->budget, bytes);
}

/* Room for n ids: exactly n when asked (a hint), else by half again and 1024 more. */
static int grow_ids(tg_btrace_t *t, uint64_t n, int exact)
{
    if (n <= t->ids_cap) return 0;
    if (t->ids_freed) return tg_err(-EINVAL, "%s: its ids were freed", t->what);
    uint64_t nc = exact ? n : TG_MAX(n, t->ids_cap + t->ids_cap / 2 + 1024);
    uint64_t add = (nc - t->ids_cap) * sizeof(uint32_t);
    int rc = reserve(t, add);
    if (rc < 0) return rc;
    uint32_t *na = realloc(t->ids, nc * sizeof(uint32_t));
    if (!na) {
        release(t, add);
        return tg_err(-ENOMEM, "%s: out of memory for %llu entries", t->what,
                      (unsigned long long)n);
    }
    t->ids = na;
    t->ids_cap = nc;
    t->ids_held += add;
    return 0;
}

/* Room for n batches: off (n + 1) and sample_s (n). */
static int grow_batches(tg_btrace_t *t, uint64_t n, int exact)
{
    if (n <= t->n_cap && t->off) return 0;
    uint64_t nc = exact ? n : TG_MAX(n, t->n_cap + t->n_cap / 2 + 16);
    uint64_t want = nc * sizeof(double) + (nc + 1) * sizeof(uint64_t);
    uint64_t add = want > t->n_held ? want - t->n_held : 0;
    int rc = reserve(t, add);
    if (rc < 0) return rc;
    uint64_t *no = realloc(t->off, (nc + 1) * sizeof *no);
    if (no) t->off = no;
    double *ns = no ? realloc(t->sample_s, nc * sizeof *ns + 1) : NULL;
    if (!ns) {
        release(t, add);
        return tg_err(-ENOMEM, "%s: out of memory for %llu batches", t->what,
                      (unsigned long long)n);
    }
    t->sample_s = ns;
    if (!t->n_cap) t->off[0] = 0;
    t->n_cap = nc;
    t->n_held += add;
    return 0;
}

int tg_btrace_reserve(tg_btrace_t *t, uint64_t batches, uint64_t ids)
{
    int rc = grow_batches(t, batches, 1);
    if (rc == 0 && ids) rc = grow_ids(t, ids, 0);
    return rc;
}

int tg_btrace_add(tg_btrace_t *t, const tg_batch_t *b, double sample_s)
{
    uint64_t at = tg_btrace_accesses(t);
    int rc = grow_batches(t, t->n + 1, 0);
    if (rc == 0) rc = grow_ids(t, at + b->num_nodes, 0);
    if (rc < 0) return rc;
    uint32_t *dst = t->ids + at;
    for (uint32_t i = 0; i < b->num_nodes; i++) {
        if (b->nodes[i] > UINT32_MAX)
            return tg_err(-EOVERFLOW, "%s: batch %llu holds node %llu; the trace keeps 32-bit ids",
                          t->what, (unsigned long long)b->id, (unsigned long long)b->nodes[i]);
        dst[i] = (uint32_t)b->nodes[i];
    }
    t->sample_s[t->n] = sample_s;
    t->off[t->n + 1] = at + b->num_nodes;
    t->n++;
    return 0;
}

int tg_btrace_sample(tg_btrace_t *t, tg_sloader_t *ld, uint64_t count, tg_spill_t *sp,
                     const atomic_int *abort)
{
    int rc = 0;
    for (uint64_t j = 0; j < count && rc == 0; j++) {
        if (abort && atomic_load(abort)) return tg_err(-ECANCELED, "%s: stopped", t->what);
        tg_sloader_item_t *it;
        rc = tg_sloader_next(ld, &it);
        if (rc == 0)
            rc = tg_err(-EIO, "%s: the sampler's epoch ended after %llu of %llu batches", t->what,
                        (unsigned long long)j, (unsigned long long)count);
        if (rc < 0) return rc;
        rc = sp ? tg_spill_write(sp, &it->batch) : 0;
        if (rc == 0) rc = tg_btrace_add(t, &it->batch, it->sample_s);
        tg_sloader_item_free(ld, it);
    }
    if (rc == 0 && sp) rc = tg_spill_rewind(sp);
    return rc;
}

uint64_t tg_btrace_accesses(const tg_btrace_t *t)
{
    return t->off ? t->off[t->n] : 0;
}

void tg_btrace_clear(tg_btrace_t *t)
{
    t->n = 0;
}

void tg_btrace_free_ids(tg_btrace_t *t)
{
    free(t->ids);
    t->ids = NULL;
    release(t, t->ids_held);
    t->ids_held = t->ids_cap = 0;
    t->ids_freed = 1;
}

void tg_btrace_free(tg_btrace_t *t)
{
    tg_btrace_free_ids(t);
    free(t->off);
    free(t->sample_s);
    release(t, t->n_held);
    tg_btrace_init(t, t->budget, t->what);
}
