/* Rows through an extraction to scattered places (tiergnn/extract.h, "rows to scattered
 * places"): a chunk of (node, place) pairs at a time into staging rows, then each row to its
 * place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/extract.h"

struct tg_extract_scatter {
    float *stage;    /* (chunk x dim) rows as the extraction converted them */
    uint64_t *nodes; /* (chunk) the chunk's nodes */
    uint64_t *pairs; /* (pairs_cap) the caller's pairs */
    size_t pairs_cap;
    uint32_t chunk, dim;
    tg_budget_t *budget;
    uint64_t reserved;
    char who[32];
};

uint64_t tg_extract_scatter_bytes(uint32_t chunk, uint32_t dim)
{
    return (uint64_t)chunk * ((uint64_t)dim * sizeof(float) + sizeof(uint64_t));
}

int tg_extract_scatter_create(tg_extract_scatter_t **out, uint32_t chunk, uint32_t dim,
                              tg_budget_t *budget, const char *who)
{
    *out = NULL;
    if (!who) who = "extract";
    if (!chunk || !dim) return tg_err(-EINVAL, "%s: a staging of %u rows of %u", who, chunk, dim);
    uint64_t bytes = tg_extract_scatter_bytes(chunk, dim);
    char what[64];
    snprintf(what, sizeof what, "%s: read staging", who);
    int rc = budget ? tg_budget_reserve(budget, bytes, what) : 0;
    if (rc < 0) return rc;
    tg_extract_scatter_t *sc = calloc(1, sizeof *sc);
    if (sc) {
        sc->stage = malloc((size_t)chunk * dim * sizeof(float));
        sc->nodes = malloc((size_t)chunk * sizeof(uint64_t));
    }
    if (!sc || !sc->stage || !sc->nodes) {
        if (sc) free(sc->stage), free(sc->nodes);
        free(sc);
        if (budget) tg_budget_release(budget, bytes);
        return tg_err(-ENOMEM, "%s: out of memory for a read staging of %u rows", who, chunk);
    }
    sc->chunk = chunk;
    sc->dim = dim;
    sc->budget = budget;
    sc->reserved = budget ? bytes : 0;
    snprintf(sc->who, sizeof sc->who, "%s", who);
    *out = sc;
    return 0;
}

uint64_t *tg_extract_scatter_pairs(tg_extract_scatter_t *sc, size_t n)
{
    if (sc->pairs && n <= sc->pairs_cap) return sc->pairs;
    size_t nc = TG_MAX(n, sc->pairs_cap * 3 / 2 + 1024);
    uint64_t *np = realloc(sc->pairs, nc * sizeof *np);
    if (!np) {
        tg_err(-ENOMEM, "%s: out of memory for %zu rows to read", sc->who, n);
        return NULL;
    }
    sc->pairs = np;
    sc->pairs_cap = nc;
    return np;
}

int tg_extract_scatter_read(tg_extract_scatter_t *sc, tg_extract_worker_t *w, uint64_t batch,
                            const uint64_t *pairs, size_t n, float *X,
                            void *(*place_of)(void *ctx, uint32_t place), void *place_ctx,
                            const tg_extract_hooks_t *hooks)
{
    size_t row = (size_t)sc->dim * sizeof(float);
    for (size_t at = 0; at < n; at += sc->chunk) {
        size_t k = TG_MIN((size_t)sc->chunk, n - at);
        for (size_t i = 0; i < k; i++)
            sc->nodes[i] = pairs[at + i] >> 32;
        tg_extract_batch_t eb = {.id = batch, .nodes = sc->nodes, .n = (uint32_t)k, .X = sc->stage};
        int rc = tg_extract_group(w, &eb, 1, hooks);
        if (rc < 0) return rc;
        for (size_t i = 0; i < k; i++) {
            uint32_t place = (uint32_t)pairs[at + i];
            void *to = X ? X + (size_t)place * sc->dim : place_of(place_ctx, place);
            memcpy(to, sc->stage + i * sc->dim, row);
        }
    }
    return 0;
}

void tg_extract_scatter_destroy(tg_extract_scatter_t *sc)
{
    if (!sc) return;
    if (sc->budget && sc->reserved) tg_budget_release(sc->budget, sc->reserved);
    free(sc->stage);
    free(sc->nodes);
    free(sc->pairs);
    free(sc);
}
