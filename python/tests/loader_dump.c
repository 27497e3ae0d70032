/* loader_dump.c - the C loader's batches written to a file, for python/tests/test_loader.py to
 * compare tiergnn.Loader's with (the same options through tiergnn/loader.h, no Python).
 *
 *     tgpy_loader_dump DATASET OUT STRATEGY FANOUTS BATCH SEED EPOCHS RANK/WORLD SAMPLER MEM
 *                      [NAME=VALUE ...]       (strategy options; NAME alone for a flag)
 *
 * OUT holds, per batch, u64 words: epoch, id, index, num_layers, num_nodes, num_seeds,
 * label_width, nodes[num_nodes]; per layer num_dst, num_src, num_edges, has_weights,
 * indptr[num_dst + 1], indices[num_edges] (each widened to u64), weights[num_edges] (f32 bits
 * widened, when has_weights); then the labels (i32 widened as i64). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/loader.h"

static void put(FILE *f, uint64_t v)
{
    fwrite(&v, sizeof v, 1, f);
}

static void dump_batch(FILE *f, const tg_loader_batch_t *b)
{
    const tg_batch_t *bt = &b->batch;
    uint64_t head[7] = {b->epoch,      bt->id,        b->index,      (uint64_t)bt->num_layers,
                        bt->num_nodes, bt->num_seeds, b->label_width};
    fwrite(head, sizeof head, 1, f);
    fwrite(bt->nodes, sizeof *bt->nodes, bt->num_nodes, f);
    for (int l = 0; l < bt->num_layers; l++) {
        const tg_block_t *k = &bt->blocks[l];
        put(f, k->num_dst);
        put(f, k->num_src);
        put(f, k->num_edges);
        put(f, k->weights != NULL);
        fwrite(k->indptr, sizeof *k->indptr, (size_t)k->num_dst + 1, f);
        for (uint64_t e = 0; e < k->num_edges; e++)
            put(f, k->indices[e]);
        for (uint64_t e = 0; k->weights && e < k->num_edges; e++) {
            uint32_t bits;
            memcpy(&bits, &k->weights[e], sizeof bits);
            put(f, bits);
        }
    }
    for (uint64_t i = 0; i < (uint64_t)bt->num_seeds * b->label_width; i++)
        put(f, (uint64_t)(int64_t)b->y[i]);
}

static int parse(tg_loader_opts_t *o, char **argv, tg_strategy_arg_t *sa, int nsa)
{
    o->dataset = argv[1];
    o->strategy = argv[3];
    char *p = argv[4];
    for (o->num_layers = 0; *p && o->num_layers < TG_MAX_LAYERS; o->num_layers++) {
        o->fanouts[o->num_layers] = strtoll(p, &p, 10);
        if (*p == ',') p++;
    }
    o->batch_size = strtoull(argv[5], NULL, 10);
    o->seed = strtoull(argv[6], NULL, 10);
    if (sscanf(argv[8], "%d/%d", &o->rank, &o->world_size) != 2) return -1;
    o->sampler = argv[9];
    if (tg_parse_size(argv[10], &o->mem_bytes) < 0) return -1;
    for (int i = 0; i < nsa; i++) {
        char *eq = strchr(argv[11 + i], '=');
        if (eq) *eq = 0;
        sa[i].name = argv[11 + i];
        sa[i].value = eq ? eq + 1 : NULL;
    }
    o->strategy_args = sa;
    o->num_strategy_args = nsa;
    return 0;
}

static int run(tg_loader_t *L, uint64_t epochs, FILE *f)
{
    for (uint64_t e = 0; e < epochs; e++) {
        int rc = tg_loader_set_epoch(L, e);
        const tg_loader_batch_t *b;
        while (rc == 0 && (rc = tg_loader_next(L, &b)) > 0) {
            dump_batch(f, b);
            rc = tg_loader_release(L, b);
        }
        if (rc < 0) return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    tg_strategy_arg_t sa[16];
    tg_loader_opts_t o;
    tg_loader_opts_default(&o);
    if (argc < 11 || argc > 11 + 16 || parse(&o, argv, sa, argc - 11) < 0) {
        fprintf(stderr,
                "usage: %s DATASET OUT STRATEGY FANOUTS BATCH SEED EPOCHS RANK/WORLD "
                "SAMPLER MEM [NAME=VALUE ...]\n",
                argv[0]);
        return 2;
    }
    uint64_t epochs = strtoull(argv[7], NULL, 10);
    o.num_epochs = epochs;
    FILE *f = fopen(argv[2], "wb");
    if (!f) return perror(argv[2]), 1;
    tg_loader_t *L;
    int rc = tg_loader_open(&L, &o);
    if (rc == 0) rc = run(L, epochs, f);
    if (rc < 0) fprintf(stderr, "error: %s\n", tg_errmsg());
    tg_loader_close(L);
    if (fclose(f) != 0) rc = -1;
    return rc < 0 ? 1 : 0;
}
