/* engine/passkey alone: a key matches the pass it was set from and no pass that differs in one
 * of the fields that decide the batches; any_epoch ignores the epoch and the seeds' order but
 * nothing else; the pass it gives back equals the one it was set from; setting it again frees
 * the old copy (ASan); a freed key matches nothing; too many layers is refused. */
#include "engine/passkey.h"
#include "tg_test.h"

static uint64_t seeds[6] = {5, 3, 9, 1, 7, 2};
static int64_t fan[2] = {10, 5};

static tg_pass_t base_pass(void)
{
    return (tg_pass_t){.seeds = seeds,
                       .num_seeds = 6,
                       .batch_size = 4,
                       .seed = 42,
                       .epoch = 3,
                       .first_batch = 1,
                       .num_layers = 2,
                       .fanouts = fan,
                       .sampler = &tg_sampler_node,
                       .training = 1};
}

TG_TEST(match_and_round_trip)
{
    tg_pass_key_t k = {0};
    tg_pass_t p = base_pass();
    TG_CHECK(!tg_pass_key_match(&k, &p, 0)); /* zeroed */
    TG_CHECK_OK(tg_pass_key_set(&k, &p));
    TG_CHECK(k.seeds != seeds);
    TG_CHECK(tg_pass_key_match(&k, &p, 0));
    TG_CHECK(tg_pass_key_match(&k, &p, 1));
    tg_pass_t q = tg_pass_key_pass(&k);
    TG_CHECK(q.num_seeds == 6 && memcmp(q.seeds, seeds, sizeof seeds) == 0);
    TG_CHECK(q.batch_size == 4 && q.seed == 42 && q.epoch == 3 && q.first_batch == 1);
    TG_CHECK(q.num_layers == 2 && q.fanouts[0] == 10 && q.fanouts[1] == 5);
    TG_CHECK(q.sampler == &tg_sampler_node && !q.step && !q.next);
    TG_CHECK(tg_pass_key_match(&k, &q, 0));
    /* the copy outlives the pass's seeds */
    uint64_t mine[6];
    memcpy(mine, seeds, sizeof mine);
    p.seeds = mine;
    TG_CHECK_OK(tg_pass_key_set(&k, &p)); /* again: the old copy is freed */
    mine[0] = 99;
    TG_CHECK(tg_pass_key_pass(&k).seeds[0] == 5);
    tg_pass_key_free(&k);
    TG_CHECK(!tg_pass_key_match(&k, &q, 0) && !tg_pass_key_match(&k, &q, 1));
    tg_pass_key_free(&k); /* twice is harmless */
}

TG_TEST(each_field_counts)
{
    tg_pass_key_t k = {0};
    tg_pass_t p = base_pass();
    TG_CHECK_OK(tg_pass_key_set(&k, &p));
    uint64_t other[6] = {5, 3, 9, 1, 2, 7}; /* the same seeds in another order */
    int64_t fan2[2] = {10, 6};
    for (int f = 0; f < 9; f++) {
        tg_pass_t q = base_pass();
        int epoch_only = 0;
        switch (f) {
        case 0:
            q.seeds = other, epoch_only = 1;
            break;
        case 1:
            q.epoch = 4, epoch_only = 1;
            break;
        case 2:
            q.num_seeds = 5;
            break;
        case 3:
            q.batch_size = 3;
            break;
        case 4:
            q.seed = 43;
            break;
        case 5:
            q.first_batch = 0;
            break;
        case 6:
            q.num_layers = 1;
            break;
        case 7:
            q.fanouts = fan2;
            break;
        case 8:
            q.sampler = &tg_sampler_ladies;
            break;
        }
        if (tg_pass_key_match(&k, &q, 0)) TG_FAIL("field %d: matched", f);
        if (tg_pass_key_match(&k, &q, 1) != epoch_only)
            TG_FAIL("field %d: any_epoch gave %d", f, !epoch_only);
    }
    tg_pass_key_free(&k);
}

TG_TEST(no_seeds)
{
    tg_pass_key_t k = {0};
    tg_pass_t p = base_pass();
    p.seeds = NULL;
    p.num_seeds = 0;
    TG_CHECK_OK(tg_pass_key_set(&k, &p));
    TG_CHECK(tg_pass_key_match(&k, &p, 0)); /* an empty pass is a pass */
    tg_pass_key_free(&k);
}

TG_TEST(too_many_layers)
{
    tg_pass_key_t k = {0};
    tg_pass_t p = base_pass();
    TG_CHECK_OK(tg_pass_key_set(&k, &p));
    p.num_layers = TG_MAX_LAYERS + 1;
    TG_CHECK_ERR(tg_pass_key_set(&k, &p), "layers");
    TG_CHECK(!k.seeds && !tg_pass_key_match(&k, &p, 1)); /* left freed */
}

int main(void)
{
    TG_RUN(match_and_round_trip);
    TG_RUN(each_field_counts);
    TG_RUN(no_seeds);
    TG_RUN(too_many_layers);
    return tg_test_done();
}
