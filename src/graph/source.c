/* Look-ahead batch source: a loader plus a ring of the next lookahead + 1 batches (see
 * tiergnn/graph.h). The loader hands batches out in id order, so the ring is filled in id order
 * too and slot (head + i) mod cap always holds batch next + i. */
#include "tiergnn/graph.h"

#include <stdlib.h>
#include <string.h>

struct tg_source {
    tg_sloader_t *ld;
    tg_sloader_item_t **ring; /* (cap) */
    size_t cap, head, len;    /* ring[head .. head+len) hold batches next .. next+len-1 */
    uint64_t next;            /* id of ring[head] */
    int rc; /* the loader's error, once seen: reported after the batches before it */
    char msg[512];
    int ended; /* the loader has no more batches */
};

int tg_source_start(tg_source_t **out, const tg_sloader_opts_t *o, size_t lookahead)
{
    *out = NULL;
    if (lookahead > (1u << 20))
        return tg_err(-EINVAL, "batch source: look-ahead of %zu batches, at most %u", lookahead,
                      1u << 20);
    tg_source_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "batch source: out of memory");
    s->cap = lookahead + 1;
    s->ring = calloc(s->cap, sizeof *s->ring);
    if (!s->ring) {
        free(s);
        return tg_err(-ENOMEM, "batch source: out of memory for a window of %zu", lookahead);
    }
    int rc = tg_sloader_start(&s->ld, o);
    if (rc < 0) {
        free(s->ring);
        free(s);
        return rc;
    }
    s->next = o->first_batch;
    *out = s;
    return 0;
}

/* Pulls batches from the loader until the window holds `want` of them, the epoch ends, or the
 * loader fails (then remembered, to be reported where it happened). */
static void fill(tg_source_t *s, size_t want)
{
    while (s->len < want && !s->ended && s->rc == 0) {
        tg_sloader_item_t *it;
        int rc = tg_sloader_next(s->ld, &it);
        if (rc > 0) {
            s->ring[(s->head + s->len) % s->cap] = it;
            s->len++;
        } else if (rc == 0) {
            s->ended = 1;
        } else {
            s->rc = rc;
            snprintf(s->msg, sizeof s->msg, "%s", tg_errmsg());
        }
    }
}

int tg_source_peek(tg_source_t *s, size_t i, const tg_sloader_item_t **it)
{
    *it = NULL;
    if (i >= s->cap)
        return tg_err(-EINVAL, "batch source: peek %zu ahead, the window holds %zu", i, s->cap - 1);
    fill(s, i + 1);
    if (i < s->len) {
        *it = s->ring[(s->head + i) % s->cap];
        return 1;
    }
    if (s->rc < 0) return tg_err(s->rc, "%s", s->msg);
    return 0;
}

int tg_source_next(tg_source_t *s, tg_sloader_item_t **it)
{
    *it = NULL;
    fill(s, 1);
    if (s->len == 0) return s->rc < 0 ? tg_err(s->rc, "%s", s->msg) : 0;
    *it = s->ring[s->head];
    s->ring[s->head] = NULL;
    s->head = (s->head + 1) % s->cap;
    s->len--;
    s->next++;
    return 1;
}

void tg_source_item_free(tg_source_t *s, tg_sloader_item_t *it)
{
    tg_sloader_item_free(s->ld, it);
}

uint64_t tg_source_next_id(const tg_source_t *s)
{
    return s->next;
}

uint64_t tg_source_num_batches(const tg_source_t *s)
{
    return tg_sloader_num_batches(s->ld);
}

void tg_source_stop(tg_source_t *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->len; i++)
        tg_sloader_item_free(s->ld, s->ring[(s->head + i) % s->cap]);
    tg_sloader_stop(s->ld);
    free(s->ring);
    free(s);
}
