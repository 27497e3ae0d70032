/* engine/nextpass: the next training pass prepared on engine/ahead's thread (nextpass.h). */
#include "nextpass.h"

#include <errno.h>
#include <stdlib.h>

#include "ahead.h"
#include "passkey.h"

struct tg_nextpass {
    tg_nextpass_opts_t o;
    tg_ahead_t *a;     /* one slot: made */
    void *made;        /* the worker's item while it prepares */
    void *held;        /* the item prepared for key, until claimed or dropped */
    tg_pass_key_t key; /* the pass being prepared, or held's */
};

/* engine/ahead's producer: the item of the pass in np->key. */
static int produce(void *ctx, void *item, uint64_t k, tg_ahead_t *a)
{
    tg_nextpass_t *np = ctx;
    (void)k;
    tg_pass_t p = tg_pass_key_pass(&np->key);
    return np->o.prepare(np->o.ctx, &p, tg_ahead_abort_flag(a), item);
}

/* engine/ahead's drop: an item made and never taken. */
static void drop_made(void *ctx, void *item)
{
    tg_nextpass_t *np = ctx;
    void **it = item;
    if (*it) np->o.drop(np->o.ctx, *it);
    *it = NULL;
}

static void drop_held(tg_nextpass_t *np)
{
    if (np->held) np->o.drop(np->o.ctx, np->held);
    np->held = NULL;
    tg_pass_key_free(&np->key);
}

int tg_nextpass_open(tg_nextpass_t **out, const tg_nextpass_opts_t *o)
{
    *out = NULL;
    if (!o->prepare || !o->drop) return tg_err(-EINVAL, "nextpass: prepare and drop are required");
    tg_nextpass_t *np = calloc(1, sizeof *np);
    if (!np) return tg_err(-ENOMEM, "%s: out of memory", o->who ? o->who : "nextpass");
    np->o = *o;
    if (!np->o.who) np->o.who = "nextpass";
    void *items[1] = {&np->made};
    tg_ahead_opts_t ao = {.slots = 1,
                          .items = items,
                          .produce = produce,
                          .drop = drop_made,
                          .ctx = np,
                          .who = np->o.who};
    int rc = tg_ahead_open(&np->a, &ao);
    if (rc < 0) {
        free(np);
        return rc;
    }
    *out = np;
    return 0;
}

int tg_nextpass_start(tg_nextpass_t *np, const tg_pass_t *next)
{
    if (tg_ahead_running(np->a))
        return tg_err(-EINVAL, "%s: a preparation is running (wait or cancel first)", np->o.who);
    drop_held(np);
    int rc = tg_pass_key_set(&np->key, next);
    if (rc == 0 && (rc = tg_ahead_start(np->a, 1)) < 0) tg_pass_key_free(&np->key);
    return rc;
}

int tg_nextpass_wait(tg_nextpass_t *np)
{
    if (!tg_ahead_running(np->a)) return 0;
    void *item;
    int rc = tg_ahead_next(np->a, NULL, &item);
    if (rc > 0) {
        np->held = np->made;
        np->made = NULL;
        rc = tg_ahead_release(np->a, item);
    }
    tg_ahead_stop(np->a);
    if (!np->held) tg_pass_key_free(&np->key);
    return rc == -ECANCELED ? 0 : rc;
}

void *tg_nextpass_claim(tg_nextpass_t *np, const tg_pass_t *p)
{
    if (!np->held || tg_ahead_running(np->a) || !tg_pass_key_match(&np->key, p, 0)) return NULL;
    void *it = np->held;
    np->held = NULL;
    tg_pass_key_free(&np->key);
    return it;
}

void tg_nextpass_cancel(tg_nextpass_t *np)
{
    tg_ahead_stop(np->a);
    drop_held(np);
}

void tg_nextpass_close(tg_nextpass_t *np)
{
    if (!np) return;
    tg_nextpass_cancel(np);
    tg_ahead_close(np->a);
    free(np);
}
