/* tg_spill_read_item (graph/spill.c): a spilled run read back as a pipeline source's items, in
 * order, each equal to the batch written and carrying the caller's sampling time; the checks
 * that catch a spill file out of step with its caller (another batch, another node count, the
 * end before the batch), each naming the file and both batches, with nothing left allocated
 * (ASan); and an item freed twice over NULL. */
#include "tg_test.h"
#include "tiergnn/graph.h"

#include <unistd.h>

enum { N = 48, BS = 6, NB = N / BS, DEG = 3 };

static uint64_t indptr[N + 1], indices[N * DEG], seeds[N];

/* A ring: node i's in-neighbours are i + 1, i + 3 and i + 7 (mod N). */
static tg_adj_t *ring(void)
{
    static const int step[DEG] = {1, 3, 7};
    for (uint64_t i = 0; i < N; i++) {
        indptr[i] = i * DEG;
        for (int d = 0; d < DEG; d++)
            indices[i * DEG + (uint64_t)d] = (i + (uint64_t)step[d]) % N;
        seeds[i] = (i * 5) % N;
    }
    indptr[N] = N * DEG;
    tg_adj_t *adj = NULL;
    TG_CHECK_OK(tg_adj_raw_create(&adj, N, N * DEG, indptr, indices, 8));
    return adj;
}

/* The run's NB batches, sampled and spilled; their node counts in n[]. */
static tg_spill_t *spilled(tg_adj_t *adj, tg_batch_t *b, uint32_t *n)
{
    tg_spill_t *sp = NULL;
    TG_CHECK_OK(tg_spill_open(&sp, tg_test_tmpdir("spill_item"), NULL));
    tg_sampler_t *sm;
    int64_t fan[2] = {2, 2};
    TG_CHECK_OK(tg_sampler_create(&sm, adj, 2, fan));
    for (uint64_t k = 0; k < NB; k++) {
        tg_rng_t r;
        tg_sampler_batch_rng(&r, 11, 0, k);
        TG_CHECK_OK(tg_sampler_sample(sm, seeds + k * BS, BS, &r, &b[k]));
        b[k].id = k;
        n[k] = b[k].num_nodes;
        TG_CHECK_OK(tg_spill_write(sp, &b[k]));
    }
    tg_sampler_destroy(sm);
    TG_CHECK_OK(tg_spill_rewind(sp));
    return sp;
}

TG_TEST(in_order)
{
    tg_adj_t *adj = ring();
    tg_batch_t b[NB];
    uint32_t n[NB];
    tg_spill_t *sp = spilled(adj, b, n);
    for (int pass = 0; pass < 2; pass++) { /* with and without the node count */
        for (uint64_t k = 0; k < NB; k++) {
            tg_sloader_item_t *it = NULL;
            uint64_t want = pass ? TG_SPILL_ANY_NODES : n[k];
            TG_CHECK(tg_spill_read_item(sp, k, want, 0.5 * (double)k, &it) == 1);
            if (!it) break;
            TG_CHECK(it->batch.id == k && it->batch.num_nodes == n[k]);
            TG_CHECK(memcmp(it->batch.nodes, b[k].nodes, n[k] * sizeof *b[k].nodes) == 0);
            TG_CHECK(it->sample_s == 0.5 * (double)k && !it->payload);
            tg_spill_item_free(it);
        }
        TG_CHECK_OK(tg_spill_rewind(sp));
    }
    tg_spill_item_free(NULL);
    for (uint64_t k = 0; k < NB; k++)
        tg_batch_free(&b[k]);
    tg_spill_close(sp);
    tg_adj_destroy(adj);
}

TG_TEST(out_of_step)
{
    tg_adj_t *adj = ring();
    tg_batch_t b[NB];
    uint32_t n[NB];
    tg_spill_t *sp = spilled(adj, b, n);
    tg_sloader_item_t *it = (tg_sloader_item_t *)&it;
    /* another batch: both named */
    TG_CHECK_ERR(tg_spill_read_item(sp, 3, TG_SPILL_ANY_NODES, 0, &it),
                 "holds batch 0 where batch 3 was expected");
    TG_CHECK(it == NULL);
    TG_CHECK(strstr(tg_errmsg(), tg_spill_name(sp)) != NULL);
    /* another node count */
    TG_CHECK_OK(tg_spill_rewind(sp));
    char want[128];
    snprintf(want, sizeof want, "holds batch 0 of %u rows where batch 0 of %u rows", n[0],
             n[0] + 1);
    TG_CHECK_ERR(tg_spill_read_item(sp, 0, n[0] + 1, 0, &it), want);
    /* the end before the batch */
    TG_CHECK_OK(tg_spill_rewind(sp));
    for (uint64_t k = 0; k < NB; k++) {
        TG_CHECK(tg_spill_read_item(sp, k, n[k], 0, &it) == 1);
        tg_spill_item_free(it);
    }
    TG_CHECK_ERR(tg_spill_read_item(sp, NB, TG_SPILL_ANY_NODES, 0, &it), "ended before batch 8");
    TG_CHECK(it == NULL);
    /* a damaged record: the spill file's own message */
    TG_CHECK_OK(tg_spill_rewind(sp));
    uint32_t junk = 0;
    TG_CHECK(pwrite(tg_spill_fd(sp), &junk, sizeof junk, 0) == (ssize_t)sizeof junk);
    TG_CHECK_OK(tg_spill_rewind(sp));
    TG_CHECK_ERR(tg_spill_read_item(sp, 0, n[0], 0, &it), "record at offset 0");
    TG_CHECK(it == NULL);
    for (uint64_t k = 0; k < NB; k++)
        tg_batch_free(&b[k]);
    tg_spill_close(sp);
    tg_adj_destroy(adj);
}

int main(void)
{
    TG_RUN(in_order);
    TG_RUN(out_of_step);
    return tg_test_done();
}
