/* The engine's pipeline (src/engine/pipeline.c) with a source and workers of the test's own:
 * every batch trains once in id order; a source that answers -ECANCELED because the pipeline
 * stopped at the normal end of a pass is not an error (diskgnn's test once failed with a bare
 * "Operation canceled": a worker asked for one more batch just as the trainer finished); a real
 * error keeps its message; the accumulator's group_more bounds a worker's groups; a step that
 * keeps X (TG_PASS_KEEP_X, the pull loader's lending) owns it past the pass. */
#include "engine/pipeline.h"
#include "tg_test.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NB = 12, DIM = 4 };

typedef struct {
    uint64_t next, count;
    int hold_after_last; /* the pull after the last batch waits for the stop, then -ECANCELED */
    int fail_at;         /* batch id whose pull fails with -EIO (-1: none) */
    uint64_t trained[NB];
    uint64_t ntrained;
    int groups, max_group, more_limit;
    const float *kept[NB]; /* keep_step's */
} src_t;

static int s_next(void *ctx, tg_pipe_t *P, tg_sloader_item_t **out)
{
    src_t *s = ctx;
    *out = NULL;
    if (s->next >= s->count && s->hold_after_last) {
        /* what a source's own abort check sees when the stop lands between the pipeline's
         * check and the source's: wait for it, at most 5 s */
        for (int i = 0; i < 5000 && !tg_pipe_aborted(P); i++)
            usleep(1000);
        return -ECANCELED;
    }
    if (tg_pipe_aborted(P)) return -ECANCELED;
    if (s->next >= s->count) return 0;
    if ((int)s->next == s->fail_at)
        return tg_err(-EIO, "test source: batch %llu is unreadable", (unsigned long long)s->next);
    tg_sloader_item_t *it = calloc(1, sizeof *it);
    if (!it) return -ENOMEM;
    it->batch.id = s->next++;
    it->batch.num_nodes = 3;
    *out = it;
    return 1;
}

static void s_free(void *ctx, tg_sloader_item_t *it)
{
    (void)ctx;
    free(it);
}

static int s_work(void *ctx, tg_pipe_t *P, int worker, const tg_batch_t *const *b, float *const *X,
                  int n)
{
    src_t *s = ctx;
    (void)P, (void)worker;
    s->groups++;
    if (n > s->max_group) s->max_group = n;
    for (int j = 0; j < n; j++)
        for (uint32_t i = 0; i < b[j]->num_nodes * DIM; i++)
            X[j][i] = (float)b[j]->id;
    return 0;
}

static int s_more(void *ctx, const tg_batch_t *const *b, int n)
{
    src_t *s = ctx;
    (void)b;
    return n < s->more_limit;
}

static int s_step(void *ctx, const tg_batch_t *b, const float *X)
{
    src_t *s = ctx;
    if (X[0] != (float)b->id) return -EINVAL;
    s->trained[s->ntrained++] = b->id;
    return 0;
}

/* Keeps every X, as the pull loader does. */
static int keep_step(void *ctx, const tg_batch_t *b, const float *X)
{
    src_t *s = ctx;
    int rc = s_step(ctx, b, X);
    if (rc < 0) return rc;
    s->kept[b->id] = X;
    return TG_PASS_KEEP_X;
}

static int run_step(src_t *s, int group, int use_more, tg_pass_stats_t *st, tg_pass_step_fn step)
{
    tg_pass_t p = {.batch_size = 1, .step = step, .ctx = s};
    tg_pipe_source_t src = {.next = s_next, .item_free = s_free, .num_batches = s->count, .ctx = s};
    tg_pipe_opts_t o = {.pass = &p,
                        .source = &src,
                        .dim = DIM,
                        .workers = 1,
                        .group = group,
                        .work = s_work,
                        .work_ctx = s,
                        .queue_depth = 2,
                        .in_order = 1,
                        .group_more = use_more ? s_more : NULL};
    return tg_pipe_run(&o, st);
}

static int run(src_t *s, int group, int use_more, tg_pass_stats_t *st)
{
    return run_step(s, group, use_more, st, s_step);
}

TG_TEST(in_order_once)
{
    src_t s = {.count = NB, .fail_at = -1};
    tg_pass_stats_t st;
    TG_CHECK_OK(run(&s, 1, 0, &st));
    TG_CHECK_EQ_U64(s.ntrained, NB);
    for (uint64_t i = 0; i < s.ntrained; i++)
        TG_CHECK_EQ_U64(s.trained[i], i);
    TG_CHECK_EQ_U64(st.steps, NB);
    TG_CHECK_EQ_U64(st.next_batch, NB);
}

/* The stop at the end of a pass reaches a source mid-call: its -ECANCELED is not the pass's. */
TG_TEST(cancel_at_the_end_is_not_an_error)
{
    src_t s = {.count = NB, .fail_at = -1, .hold_after_last = 1};
    tg_pass_stats_t st;
    int rc = run(&s, 1, 0, &st);
    TG_CHECK_OK(rc);
    if (rc < 0) fprintf(stderr, "  the pass returned %d: %s\n", rc, tg_errmsg());
    TG_CHECK_EQ_U64(s.ntrained, NB);
}

/* A source's real error is the pass's, with its message, and no batch after it trains. */
TG_TEST(source_error_keeps_its_message)
{
    src_t s = {.count = NB, .fail_at = 5};
    tg_pass_stats_t st;
    TG_CHECK_ERR(run(&s, 1, 0, &st), "batch 5 is unreadable");
    TG_CHECK(s.ntrained <= 5);
}

/* group_more: groups of at most more_limit batches (here 3 of a possible 8), all in order. */
TG_TEST(group_more_bounds_groups)
{
    src_t s = {.count = NB, .fail_at = -1, .more_limit = 3};
    tg_pass_stats_t st;
    TG_CHECK_OK(run(&s, 8, 1, &st));
    TG_CHECK_EQ_U64(s.ntrained, NB);
    TG_CHECK(s.max_group == 3);
    TG_CHECK(s.groups == NB / 3);
    for (uint64_t i = 0; i < s.ntrained; i++)
        TG_CHECK_EQ_U64(s.trained[i], i);
    /* without it, full groups of 8 (and the rest) */
    src_t t = {.count = NB, .fail_at = -1, .more_limit = 3};
    TG_CHECK_OK(run(&t, 8, 0, &st));
    TG_CHECK(t.max_group == 8 && t.groups == 2);
}

/* Kept matrices leave the pipeline's places and its bytes in flight (the pass ends although
 * all 12 are kept with 3 places) and stay valid after it, until tg_pass_x_free. */
TG_TEST(kept_x_outlives_the_pass)
{
    src_t s = {.count = NB, .fail_at = -1};
    tg_pass_stats_t st;
    TG_CHECK_OK(run_step(&s, 1, 0, &st, keep_step));
    TG_CHECK_EQ_U64(s.ntrained, NB);
    TG_CHECK(st.batch_bytes_peak <= 3 * 3 * DIM * sizeof(float));
    for (int i = 0; i < NB; i++) {
        TG_CHECK(s.kept[i] != NULL);
        if (!s.kept[i]) continue;
        for (int k = 0; k < 3 * DIM; k++)
            TG_CHECK(s.kept[i][k] == (float)i);
        tg_pass_x_free(s.kept[i]);
    }
    tg_pass_x_free(NULL);
}

int main(void)
{
    TG_RUN(in_order_once);
    TG_RUN(cancel_at_the_end_is_not_an_error);
    TG_RUN(source_error_keeps_its_message);
    TG_RUN(group_more_bounds_groups);
    TG_RUN(kept_x_outlives_the_pass);
    return tg_test_done();
}
