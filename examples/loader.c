/* examples/loader.c - pull a strategy's batches with tiergnn/loader.h, as a trainer of its own
 * would, and print what each epoch read.
 *
 *     example_loader DATASET [STRATEGY [MEM [RANK/WORLD]]]
 *     example_loader data/products diskgnn 1200M
 *     example_loader data/products gnndrive 800M 1/2     # rank 1's half of every epoch
 *
 * The "model" here only sums each batch's X and counts its labelled seeds: in its place a real
 * trainer runs forward, loss and backward on b->batch's blocks, b->X and b->y before it releases
 * the batch. Two batches may be held at once (max_held): a trainer that overlaps its steps
 * keeps the previous one until the next is taken. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/loader.h"

static int run(tg_loader_t *L, uint64_t epochs)
{
    tg_loader_info_t info;
    tg_loader_info(L, &info);
    printf("strategy %s, %llu seeds, rank share %llu of %llu batches, slots of %llu bytes\n",
           info.strategy, (unsigned long long)info.num_seeds, (unsigned long long)info.rank_batches,
           (unsigned long long)info.epoch_batches, (unsigned long long)info.slot_bytes);
    for (uint64_t e = 0; e < epochs; e++) {
        int rc = tg_loader_set_epoch(L, e);
        if (rc < 0) return rc;
        double sum = 0;
        uint64_t labelled = 0;
        const tg_loader_batch_t *b, *prev = NULL;
        double t0 = tg_now();
        while ((rc = tg_loader_next(L, &b)) > 0) {
            size_t n = (size_t)b->batch.num_nodes * b->dim;
            for (size_t i = 0; i < n; i++)
                sum += b->X[i];
            for (size_t i = 0; i < (size_t)b->batch.num_seeds * b->label_width; i++)
                labelled += b->y[i] >= 0;
            /* keep one batch back, as a trainer that overlaps steps would */
            if (prev && (rc = tg_loader_release(L, prev)) < 0) return rc;
            prev = b;
        }
        if (prev) tg_loader_release(L, prev);
        if (rc < 0) return rc;
        tg_loader_stats_t st;
        tg_loader_stats(L, &st);
        printf("epoch %llu: %llu batches in %.2f s (waited %.2f s), %llu labelled seeds, "
               "sum(X) %.6g; read %llu bytes in %llu requests; memory %llu of %llu bytes\n",
               (unsigned long long)e, (unsigned long long)st.batches, tg_now() - t0, st.wait_s,
               (unsigned long long)labelled, sum, (unsigned long long)st.io_read_bytes,
               (unsigned long long)st.io_requests, (unsigned long long)st.data_bytes_peak,
               (unsigned long long)st.mem_bytes);
        for (int t = 0; t < st.ntiers; t++)
            printf("    tier %s: %llu of %llu rows\n", st.tiers[t].name,
                   (unsigned long long)st.tiers[t].hits, (unsigned long long)st.tiers[t].lookups);
        /* the pass's part of tiergnn train's epoch line, the strategy's own clause included */
        if (!strncmp(st.pass_line, "; ", 2)) printf("    pass: %s\n", st.pass_line + 2);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s DATASET [STRATEGY [MEM [RANK/WORLD]]]\n", argv[0]);
        return 2;
    }
    tg_loader_opts_t o;
    tg_loader_opts_default(&o);
    o.dataset = argv[1];
    if (argc > 2) o.strategy = argv[2];
    if (argc > 3 && tg_parse_size(argv[3], &o.mem_bytes) < 0) {
        fprintf(stderr, "%s\n", tg_errmsg());
        return 2;
    }
    if (argc > 4 && sscanf(argv[4], "%d/%d", &o.rank, &o.world_size) != 2) {
        fprintf(stderr, "RANK/WORLD: expected two integers as 1/2, got '%s'\n", argv[4]);
        return 2;
    }
    o.num_epochs = 2;
    tg_loader_t *L;
    int rc = tg_loader_open(&L, &o);
    if (rc == 0) rc = run(L, o.num_epochs);
    if (rc < 0) fprintf(stderr, "error: %s\n", tg_errmsg());
    tg_loader_close(L);
    return rc < 0 ? 1 : 0;
}
