/* engine/lookahead alone, over a real batch source and a WINDOW feature buffer: the next
 * `window` batches are announced before the pipeline takes each one (the buffer's trace holds
 * exactly their positions less the rows a RAM tier serves), a batch done leaves the trace, the
 * batches held ahead hold their bytes against the budget until taken; a budget without room
 * stops the window short and the pass goes on; a full trace leaves batches unannounced; window 0
 * passes batches through; a pass ended early retires what it announced and gives every byte
 * back; a second pass over the same buffer announces again (its ids above the first's); a budget
 * without room for the announcement scratch fails the step naming it. */
#include "engine/lookahead.h"
#include "tg_test.h"

enum { N = 200, DEG = 4, BS = 10, D = 4 };

static uint64_t indptr[N + 1], indices[N * DEG], seeds[N];
static int64_t fan[2] = {3, 2};

static tg_adj_t *ring(void)
{
    for (uint64_t i = 0; i < N; i++) {
        indptr[i] = i * DEG;
        for (uint64_t d = 0; d < DEG; d++)
            indices[i * DEG + d] = (i * 13 + d * 29 + 7) % N;
        seeds[i] = (i * 71) % N;
    }
    indptr[N] = N * DEG;
    tg_adj_t *adj = NULL;
    TG_CHECK_OK(tg_adj_raw_create(&adj, N, N * DEG, indptr, indices, 8));
    return adj;
}

static tg_source_t *source(tg_adj_t *adj, size_t k)
{
    tg_sloader_opts_t o = {.adj = adj,
                           .num_layers = 2,
                           .fanouts = fan,
                           .seeds = seeds,
                           .num_seeds = N,
                           .batch_size = BS,
                           .seed = 5,
                           .epoch = 1,
                           .num_threads = 1};
    tg_source_t *src = NULL;
    TG_CHECK_OK(tg_source_start(&src, &o, k));
    return src;
}

static tg_featbuf_t *buffer(uint32_t W, uint32_t positions)
{
    tg_featbuf_opts_t o = {.num_nodes = N,
                           .feat_dim = D,
                           .dtype = TG_F32,
                           .max_batch_nodes = N,
                           .max_batches = 1,
                           .num_slots = N,
                           .policy = TG_FEATBUF_WINDOW,
                           .window = W ? W : 1,
                           .future_positions = positions};
    tg_featbuf_t *fb = NULL;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, NULL));
    return fb;
}

static uint32_t future_positions(tg_featbuf_t *fb)
{
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    return st.future_positions;
}

/* the nodes of b outside the tier */
static uint32_t outside(const tg_batch_t *b, const tg_tier_t *t)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < b->num_nodes; i++)
        n += !t || !tg_tier_find(t, b->nodes[i]);
    return n;
}

TG_TEST(window_announced_and_retired)
{
    tg_adj_t *adj = ring();
    static float rows[N * D];
    uint64_t hot[20];
    for (int i = 0; i < 20; i++)
        hot[i] = (uint64_t)i * 7;
    tg_tier_t *tier;
    TG_CHECK_OK(tg_tier_borrow_create(&tier, "hot", rows, D * 4, hot, 20, N, NULL));
    tg_featbuf_t *fb = buffer(2, 1 << 16);
    tg_budget_t bg;
    tg_budget_init(&bg, 0);
    tg_lookahead_opts_t o = {.fb = fb,
                             .skip = tier,
                             .window = 2,
                             .max_nodes = N,
                             .est_bytes = 64,
                             .budget = &bg,
                             .who = "test"};
    tg_lookahead_t *la;
    TG_CHECK_OK(tg_lookahead_open(&la, &o));
    for (int pass = 0; pass < 2; pass++) {
        tg_source_t *src = source(adj, 2);
        uint64_t nb = tg_source_num_batches(src), first = pass; /* the second resumes at 1 */
        for (uint64_t b = 0; b < first; b++) {                  /* skipped by the resume */
            tg_sloader_item_t *it;
            TG_CHECK(tg_source_next(src, &it) == 1);
            tg_source_item_free(src, it);
        }
        TG_CHECK_OK(tg_lookahead_begin(la, src, nb, first));
        for (uint64_t b = first; b < nb; b++) {
            tg_sloader_item_t *it = NULL;
            TG_CHECK(tg_lookahead_next(la, &it) == 1);
            if (!it) break;
            TG_CHECK(it->batch.id == b);
            /* announced: this batch and up to two after it */
            uint32_t want = outside(&it->batch, tier);
            uint64_t held = 0;
            for (size_t i = 0; i < 2 && b + 1 + i < nb; i++) {
                const tg_sloader_item_t *ahead;
                TG_CHECK(tg_source_peek(src, i, &ahead) == 1);
                want += outside(&ahead->batch, tier);
                held += TG_MAX(tg_batch_bytes(&ahead->batch), (uint64_t)64);
            }
            if (future_positions(fb) != want)
                TG_FAIL("pass %d batch %llu: %u positions announced, expected %u", pass,
                        (unsigned long long)b, future_positions(fb), want);
            TG_CHECK(bg.used >= held); /* the batches ahead hold their bytes */
            TG_CHECK_OK(tg_lookahead_done(la, b));
            TG_CHECK_OK(tg_lookahead_done(la, b)); /* once */
            tg_source_item_free(src, it);
        }
        tg_sloader_item_t *it;
        TG_CHECK(tg_lookahead_next(la, &it) == 0);
        TG_CHECK(future_positions(fb) == 0);
        tg_lookahead_counts_t c;
        tg_lookahead_counts(la, &c);
        TG_CHECK(c.announced == nb - first && c.unannounced == 0 && c.stopped_short == 0);
        tg_lookahead_end(la, 1);
        tg_source_stop(src);
    }
    TG_CHECK(bg.used > 0); /* the announcement scratch, until close */
    tg_lookahead_close(la);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_destroy(&bg);
    tg_featbuf_destroy(fb);
    tg_tier_destroy(tier);
    tg_adj_destroy(adj);
}

/* Runs a pass of `stop` batches (all when 0) with window W; returns the counts. */
static tg_lookahead_counts_t run(tg_adj_t *adj, tg_featbuf_t *fb, tg_budget_t *bg, uint32_t W,
                                 uint64_t stop, uint64_t keep)
{
    tg_lookahead_opts_t o = {
        .fb = fb, .window = W, .max_nodes = N, .est_bytes = 64, .keep = keep, .budget = bg};
    tg_lookahead_t *la;
    TG_CHECK_OK(tg_lookahead_open(&la, &o));
    tg_source_t *src = source(adj, W);
    uint64_t nb = tg_source_num_batches(src), got = 0;
    TG_CHECK_OK(tg_lookahead_begin(la, src, nb, 0));
    tg_sloader_item_t *it;
    while ((!stop || got < stop) && tg_lookahead_next(la, &it) == 1) {
        TG_CHECK(it->batch.id == got);
        TG_CHECK_OK(tg_lookahead_done(la, got));
        tg_source_item_free(src, it);
        got++;
    }
    TG_CHECK(got == (stop ? stop : nb));
    tg_lookahead_counts_t c;
    tg_lookahead_counts(la, &c);
    tg_lookahead_end(la, 1);
    tg_source_stop(src);
    TG_CHECK(future_positions(fb) == 0); /* everything announced retired */
    tg_lookahead_close(la);
    return c;
}

TG_TEST(short_full_none_and_early_end)
{
    tg_adj_t *adj = ring();
    /* a budget without room: the window stops short, every batch still comes */
    tg_featbuf_t *fb = buffer(3, 1 << 16);
    tg_budget_t bg;
    tg_budget_init(&bg, 4096);
    tg_lookahead_counts_t c = run(adj, fb, &bg, 3, 0, 4000);
    TG_CHECK(c.stopped_short > 0 && c.announced < N / BS);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_destroy(&bg);
    tg_featbuf_destroy(fb);
    /* a trace with room for about one batch: the others unannounced */
    fb = buffer(3, 60);
    c = run(adj, fb, NULL, 3, 0, 0);
    TG_CHECK(c.unannounced > 0 && c.announced + c.unannounced >= N / BS);
    tg_featbuf_destroy(fb);
    /* window 0: batches pass through, nothing announced */
    fb = buffer(0, 1 << 16);
    c = run(adj, fb, NULL, 0, 0, 0);
    TG_CHECK(c.announced == 0 && c.unannounced == 0 && c.stopped_short == 0);
    /* a pass ended early: what it announced is retired, every byte back */
    tg_budget_init(&bg, 0);
    c = run(adj, fb, &bg, 0, 3, 0);
    tg_featbuf_destroy(fb);
    fb = buffer(4, 1 << 16);
    c = run(adj, fb, &bg, 4, 3, 0);
    TG_CHECK(c.announced >= 3);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_destroy(&bg);
    tg_featbuf_destroy(fb);
    tg_adj_destroy(adj);
}

/* The announcement scratch is the budget's too: a budget that holds a batch ahead but not the
 * scratch fails the step naming it, and everything goes back. */
TG_TEST(scratch_refused)
{
    tg_adj_t *adj = ring();
    tg_featbuf_t *fb = buffer(2, 1 << 16);
    tg_budget_t bg;
    tg_budget_init(&bg, 100);
    tg_lookahead_opts_t o = {
        .fb = fb, .window = 2, .max_nodes = N, .est_bytes = 64, .budget = &bg, .who = "test"};
    tg_lookahead_t *la;
    TG_CHECK_OK(tg_lookahead_open(&la, &o));
    tg_source_t *src = source(adj, 2);
    TG_CHECK_OK(tg_lookahead_begin(la, src, tg_source_num_batches(src), 0));
    tg_sloader_item_t *it = NULL;
    TG_CHECK_ERR(tg_lookahead_next(la, &it), "test: announcement");
    TG_CHECK(it == NULL);
    tg_lookahead_end(la, 1);
    tg_source_stop(src);
    tg_lookahead_close(la);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_destroy(&bg);
    tg_featbuf_destroy(fb);
    tg_adj_destroy(adj);
}

int main(void)
{
    TG_RUN(window_announced_and_retired);
    TG_RUN(short_full_none_and_early_end);
    TG_RUN(scratch_refused);
    return tg_test_done();
}
