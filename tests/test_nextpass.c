/* engine/nextpass alone: the item prepared for a pass is handed to that pass only (another pass
 * gets NULL and the item stays held); a new start drops the held item; the preparer's error
 * reaches wait with its message and nothing is held; cancel mid-preparation aborts and joins;
 * close while preparing and close with an item held drop it; a start while one runs is refused;
 * wait and claim with nothing started are no-ops. Each item is a heap block, so a leak or a
 * double drop shows under ASan; the counters check every item made is claimed or dropped once. */
#include "engine/nextpass.h"
#include "tg_test.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    uint64_t epoch, first_batch;
} item_t;

typedef struct {
    int64_t fail_epoch;  /* prepare fails at this epoch (-1: never) */
    int64_t block_epoch; /* prepare waits for the abort at this epoch, then -ECANCELED (-1) */
    atomic_int made, dropped, blocked;
} ctx_t;

static int prepare(void *ctx, const tg_pass_t *p, atomic_int *abort, void **item)
{
    ctx_t *c = ctx;
    *item = NULL;
    if ((int64_t)p->epoch == c->fail_epoch)
        return tg_err(-EIO, "test: preparing epoch %llu failed", (unsigned long long)p->epoch);
    if ((int64_t)p->epoch == c->block_epoch) {
        atomic_store(&c->blocked, 1);
        while (!atomic_load(abort))
            usleep(1000);
        return -ECANCELED;
    }
    item_t *it = malloc(sizeof *it);
    if (!it) return tg_err(-ENOMEM, "test: out of memory");
    *it = (item_t){.epoch = p->epoch, .first_batch = p->first_batch};
    atomic_fetch_add(&c->made, 1);
    *item = it;
    return 0;
}

static void drop(void *ctx, void *item)
{
    ctx_t *c = ctx;
    atomic_fetch_add(&c->dropped, 1);
    free(item);
}

static uint64_t seeds[5] = {4, 0, 3, 1, 2};
static int64_t fan[1] = {3};

static tg_pass_t pass(uint64_t epoch)
{
    return (tg_pass_t){.seeds = seeds,
                       .num_seeds = 5,
                       .batch_size = 2,
                       .seed = 1,
                       .epoch = epoch,
                       .num_layers = 1,
                       .fanouts = fan,
                       .training = 1};
}

static tg_nextpass_t *open_np(ctx_t *c)
{
    memset(c, 0, sizeof *c);
    c->fail_epoch = c->block_epoch = -1;
    tg_nextpass_t *np = NULL;
    tg_nextpass_opts_t o = {.prepare = prepare, .drop = drop, .ctx = c, .who = "test: preparer"};
    TG_CHECK_OK(tg_nextpass_open(&np, &o));
    return np;
}

TG_TEST(claimed_by_its_pass_only)
{
    ctx_t c;
    tg_nextpass_t *np = open_np(&c);
    tg_pass_t p1 = pass(1), p2 = pass(2);
    TG_CHECK_OK(tg_nextpass_wait(np)); /* nothing started */
    TG_CHECK(tg_nextpass_claim(np, &p1) == NULL);
    TG_CHECK_OK(tg_nextpass_start(np, &p1));
    TG_CHECK_OK(tg_nextpass_wait(np));
    TG_CHECK(tg_nextpass_claim(np, &p2) == NULL); /* another pass: still held */
    tg_pass_t q = p1;
    q.first_batch = 1;
    TG_CHECK(tg_nextpass_claim(np, &q) == NULL);
    item_t *it = tg_nextpass_claim(np, &p1);
    TG_CHECK(it && it->epoch == 1);
    TG_CHECK(tg_nextpass_claim(np, &p1) == NULL); /* once */
    free(it);
    /* a new start drops what is held */
    TG_CHECK_OK(tg_nextpass_start(np, &p1));
    TG_CHECK_OK(tg_nextpass_wait(np));
    TG_CHECK_OK(tg_nextpass_start(np, &p2));
    TG_CHECK(atomic_load(&c.dropped) == 1);
    /* a start while one runs is refused */
    TG_CHECK_ERR(tg_nextpass_start(np, &p1), "a preparation is running");
    TG_CHECK_OK(tg_nextpass_wait(np));
    it = tg_nextpass_claim(np, &p2);
    TG_CHECK(it && it->epoch == 2);
    free(it);
    tg_nextpass_close(np);
    TG_CHECK(atomic_load(&c.made) == 3 && atomic_load(&c.dropped) == 1);
}

TG_TEST(the_copy_outlives_the_pass)
{
    ctx_t c;
    tg_nextpass_t *np = open_np(&c);
    uint64_t mine[5];
    memcpy(mine, seeds, sizeof mine);
    tg_pass_t p = pass(3);
    p.seeds = mine;
    TG_CHECK_OK(tg_nextpass_start(np, &p));
    memset(mine, 0xff, sizeof mine); /* the caller's pass goes */
    TG_CHECK_OK(tg_nextpass_wait(np));
    tg_pass_t q = pass(3);
    item_t *it = tg_nextpass_claim(np, &q);
    TG_CHECK(it && it->epoch == 3);
    free(it);
    tg_nextpass_close(np);
}

TG_TEST(error_reaches_wait)
{
    ctx_t c;
    tg_nextpass_t *np = open_np(&c);
    c.fail_epoch = 4;
    tg_pass_t p = pass(4);
    TG_CHECK_OK(tg_nextpass_start(np, &p));
    TG_CHECK_ERR(tg_nextpass_wait(np), "preparing epoch 4 failed");
    TG_CHECK(tg_nextpass_claim(np, &p) == NULL);
    TG_CHECK_OK(tg_nextpass_wait(np)); /* once */
    /* and the next one runs */
    tg_pass_t p5 = pass(5);
    TG_CHECK_OK(tg_nextpass_start(np, &p5));
    TG_CHECK_OK(tg_nextpass_wait(np));
    tg_nextpass_close(np); /* with an item held: dropped */
    TG_CHECK(atomic_load(&c.made) == 1 && atomic_load(&c.dropped) == 1);
}

TG_TEST(cancel_and_close_mid_preparation)
{
    ctx_t c;
    tg_nextpass_t *np = open_np(&c);
    c.block_epoch = 6;
    tg_pass_t p = pass(6);
    TG_CHECK_OK(tg_nextpass_start(np, &p));
    while (!atomic_load(&c.blocked))
        usleep(1000);
    tg_nextpass_cancel(np); /* aborts the preparation and joins */
    TG_CHECK_OK(tg_nextpass_wait(np));
    TG_CHECK(tg_nextpass_claim(np, &p) == NULL);
    /* close while preparing */
    atomic_store(&c.blocked, 0);
    TG_CHECK_OK(tg_nextpass_start(np, &p));
    while (!atomic_load(&c.blocked))
        usleep(1000);
    tg_nextpass_close(np);
    TG_CHECK(atomic_load(&c.made) == 0 && atomic_load(&c.dropped) == 0);
    /* close before anything, and NULL */
    np = open_np(&c);
    tg_nextpass_close(np);
    tg_nextpass_close(NULL);
}

TG_TEST(misuse)
{
    tg_nextpass_t *np = NULL;
    tg_nextpass_opts_t o = {.prepare = prepare};
    TG_CHECK_ERR(tg_nextpass_open(&np, &o), "prepare and drop are required");
    TG_CHECK(np == NULL);
}

int main(void)
{
    TG_RUN(claimed_by_its_pass_only);
    TG_RUN(the_copy_outlives_the_pass);
    TG_RUN(error_reaches_wait);
    TG_RUN(cancel_and_close_mid_preparation);
    TG_RUN(misuse);
    return tg_test_done();
}
