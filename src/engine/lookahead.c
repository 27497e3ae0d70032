/* engine/lookahead: the next batches' rows announced to a feature buffer (lookahead.h). */
#include "lookahead.h"

#include <errno.h>
#include <stdlib.h>

struct tg_lookahead {
    tg_lookahead_opts_t o;
    char who[32];
    uint64_t *ann; /* scratch: a batch's nodes the skip tier does not hold */
    uint64_t ann_cap;
    uint64_t *held; /* (window + 1) bytes reserved for each batch held ahead, by id mod */
    uint64_t est;   /* bytes reserved per batch ahead (the largest seen) */
    uint64_t base;  /* trace ids of this pass: base + batch id */
    /* per pass */
    tg_source_t *src;
    uint64_t num_batches, first, next; /* next: the next batch to announce */
    uint8_t *in_trace;                 /* per batch: announced, not yet done */
    tg_lookahead_counts_t counts;
};

int tg_lookahead_open(tg_lookahead_t **out, const tg_lookahead_opts_t *o)
{
    *out = NULL;
    tg_lookahead_t *la = calloc(1, sizeof *la);
    if (la) la->held = calloc((size_t)o->window + 1, sizeof *la->held);
    if (!la || !la->held) {
        free(la);
        return tg_err(-ENOMEM, "%s: out of memory for a look-ahead", o->who ? o->who : "");
    }
    la->o = *o;
    snprintf(la->who, sizeof la->who, "%s", o->who ? o->who : "look-ahead");
    la->est = o->est_bytes;
    *out = la;
    return 0;
}

/* Announces batch b's rows the skip tier does not hold. */
static int announce(tg_lookahead_t *la, const tg_batch_t *b)
{
    uint64_t n = 0;
    if (la->ann_cap < b->num_nodes) {
        /* grown by half again, but not past the plan's bound, which is what the budget kept
         * for it */
        uint64_t nc =
            TG_MAX((uint64_t)b->num_nodes, TG_MIN(la->ann_cap + la->ann_cap / 2, la->o.max_nodes));
        uint64_t add = (nc - la->ann_cap) * sizeof *la->ann;
        char what[64];
        snprintf(what, sizeof what, "%s: announcement", la->who);
        int rc = la->o.budget ? tg_budget_reserve(la->o.budget, add, what) : 0;
        if (rc < 0) return rc;
        uint64_t *na = realloc(la->ann, nc * sizeof *na);
        if (!na) {
            if (la->o.budget) tg_budget_release(la->o.budget, add);
            return tg_err(-ENOMEM, "%s: out of memory for %llu announced nodes", la->who,
                          (unsigned long long)nc);
        }
        la->ann = na;
        la->ann_cap = nc;
    }
    for (uint32_t i = 0; i < b->num_nodes; i++)
        if (!la->o.skip || !tg_tier_find(la->o.skip, b->nodes[i])) la->ann[n++] = b->nodes[i];
    int rc = tg_featbuf_future_add(la->o.fb, la->base + b->id, la->ann, n);
    if (rc == -ENOSPC) {
        la->counts.unannounced++;
        return 0;
    }
    if (rc == 0) {
        la->counts.announced++;
        la->in_trace[b->id] = 1; /* read by the worker the pipeline hands the batch to */
    }
    return rc;
}

/* Reserves bytes for a batch held ahead if the budget keeps o.keep free beside them. */
static int reserve(tg_lookahead_t *la, uint64_t bytes)
{
    tg_budget_t *bg = la->o.budget;
    if (!bg) return 0;
    if (bg->limit && bg->used + bytes + la->o.keep > bg->limit) {
        if (!la->counts.stopped_short) {
            char a[32], b[32], c[32];
            tg_log_info("%s: the look-ahead stops short: --mem has %s free, a batch needs %s "
                        "beside the %s the reads in flight keep",
                        la->who, tg_fmt_bytes(bg->limit - TG_MIN(bg->used, bg->limit), a, sizeof a),
                        tg_fmt_bytes(bytes, b, sizeof b), tg_fmt_bytes(la->o.keep, c, sizeof c));
        }
        return -ENOMEM;
    }
    char what[64];
    snprintf(what, sizeof what, "%s: look-ahead batch", la->who);
    return tg_budget_reserve(bg, bytes, what);
}

/* Samples up to `window` batches beyond the next and announces the new ones; each one's bytes
 * are reserved first (the largest seen so far, then its own), and the window stops growing
 * while the budget has no room. */
static int look_ahead(tg_lookahead_t *la)
{
    uint64_t next = tg_source_next_id(la->src), W = la->o.window;
    if (la->next < next) la->next = next;
    while (la->next <= next + W && la->next < la->num_batches) {
        uint64_t *held = &la->held[la->next % (W + 1)];
        if (reserve(la, la->est) < 0) {
            la->counts.stopped_short++;
            return 0;
        }
        *held = la->o.budget ? la->est : 0;
        const tg_sloader_item_t *it;
        int rc = tg_source_peek(la->src, (size_t)(la->next - next), &it);
        if (rc <= 0) return rc;
        uint64_t own = tg_batch_bytes(&it->batch);
        if (la->o.budget && own > *held && reserve(la, own - *held) == 0) *held = own;
        la->est = TG_MAX(la->est, own);
        if ((rc = announce(la, &it->batch)) < 0) return rc;
        la->next++;
    }
    return 0;
}

int tg_lookahead_begin(tg_lookahead_t *la, tg_source_t *src, uint64_t num_batches,
                       uint64_t first_batch)
{
    if (!(la->in_trace = calloc(num_batches ? num_batches : 1, 1)))
        return tg_err(-ENOMEM, "%s: out of memory for %llu batch flags", la->who,
                      (unsigned long long)num_batches);
    la->src = src;
    la->num_batches = num_batches;
    la->first = la->next = first_batch;
    la->counts = (tg_lookahead_counts_t){0};
    return 0;
}

int tg_lookahead_next(tg_lookahead_t *la, tg_sloader_item_t **out)
{
    uint32_t W = la->o.window;
    int rc = W ? look_ahead(la) : 0;
    if (rc < 0) return rc;
    uint64_t id = tg_source_next_id(la->src);
    rc = tg_source_next(la->src, out);
    if (rc > 0 && W) {
        uint64_t *held = &la->held[id % (W + 1)];
        if (la->o.budget) tg_budget_release(la->o.budget, *held); /* the pipeline's now */
        *held = 0;
    }
    return rc;
}

int tg_lookahead_done(tg_lookahead_t *la, uint64_t b)
{
    if (!la->in_trace[b]) return 0; /* not announced (window 0, a full trace) */
    la->in_trace[b] = 0;
    return tg_featbuf_future_done(la->o.fb, la->base + b);
}

void tg_lookahead_end(tg_lookahead_t *la, int retire)
{
    for (uint32_t i = 0; i <= la->o.window; i++) {
        if (la->o.budget) tg_budget_release(la->o.budget, la->held[i]);
        la->held[i] = 0;
    }
    for (uint64_t b = la->first; la->in_trace && b < la->next; b++)
        if (la->in_trace[b] && retire) (void)tg_featbuf_future_done(la->o.fb, la->base + b);
    free(la->in_trace);
    la->in_trace = NULL;
    la->src = NULL;
    la->base += la->num_batches + 1;
}

void tg_lookahead_counts(const tg_lookahead_t *la, tg_lookahead_counts_t *c)
{
    *c = la->counts;
}

void tg_lookahead_close(tg_lookahead_t *la)
{
    if (!la) return;
    if (la->o.budget && la->ann_cap) tg_budget_release(la->o.budget, la->ann_cap * sizeof *la->ann);
    free(la->ann);
    free(la->held);
    free(la->in_trace);
    free(la);
}
