/* Helpers for the engine/training tests: a small synthetic dataset written with the dataset
 * writer (tg_dsw_*), so that the tests need neither the generator nor ../shared.
 *
 * The graph has planted communities: node v belongs to class v % C, each node gets `deg` random
 * undirected edges, a fraction `homophily` of them inside its class; features are a class
 * centroid plus Gaussian noise. GNNs beat an MLP on it once noise hides the centroid. */
#ifndef TEST_ENGINE_COMMON_H
#define TEST_ENGINE_COMMON_H

#include "tg_test.h"

#include "tiergnn/data.h"
#include "tiergnn/graph.h"
#include "tiergnn/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t nodes;
    uint32_t classes, dim, deg;
    double homophily, noise;
    tg_feat_dtype_t dtype;
    int self_loops;
    uint64_t seed;
} synth_opts_t;

/* Whether X, batch b's input matrix (dim floats a row), holds the rows the reference store ref
 * gathers for b's nodes, gathered into *buf (grown here, freed by the caller). 1 equal, 0 not,
 * -EIO when ref cannot gather them or there is no memory for them. */
TG_UNUSED static int batch_rows_equal(tg_store_t *ref, const tg_batch_t *b, const float *X,
                                      uint32_t dim, float **buf)
{
    size_t n = (size_t)b->num_nodes * dim;
    float *t = realloc(*buf, (n ? n : 1) * sizeof *t);
    if (!t) return -EIO;
    *buf = t;
    if (tg_store_gather(ref, b->nodes, b->num_nodes, t) < 0) return -EIO;
    return memcmp(X, t, n * sizeof *X) == 0;
}

TG_UNUSED static int cmp_u64_(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Writes the dataset to dir (replacing it); exits on failure (test setup). */
TG_UNUSED static void synth_write(const char *dir, const synth_opts_t *so)
{
    uint64_t n = so->nodes, C = so->classes, D = so->dim;
    tg_rng_t r;
    tg_rng_seed(&r, so->seed);
    /* undirected edges as (dst << 32 | src) pairs in both directions, then sorted = CSC */
    uint64_t cap = n * so->deg * 2 + n + 16, ne = 0;
    uint64_t *pairs = malloc(cap * sizeof *pairs);
    for (uint64_t v = 0; v < n; v++)
        for (uint32_t k = 0; k < so->deg / 2 + 1; k++) {
            uint64_t u;
            if (tg_rng_uniform(&r) < so->homophily)
                u = (tg_rng_below(&r, (n - 1 - v % C) / C + 1)) * C + v % C;
            else
                u = tg_rng_below(&r, n);
            if (u == v || u >= n) continue;
            pairs[ne++] = (v << 32) | u;
            pairs[ne++] = (u << 32) | v;
        }
    if (so->self_loops)
        for (uint64_t v = 0; v < n; v++)
            pairs[ne++] = (v << 32) | v;
    qsort(pairs, ne, sizeof *pairs, cmp_u64_);
    uint64_t m = 0; /* dedup */
    for (uint64_t i = 0; i < ne; i++)
        if (i == 0 || pairs[i] != pairs[i - 1]) pairs[m++] = pairs[i];
    ne = m;

    tg_dsw_t w;
    if (tg_dsw_begin(&w, dir, 1) < 0) goto fail;
    tg_meta_t *mt = &w.meta;
    mt->num_nodes = n;
    mt->num_edges = ne;
    mt->feat_dim = (uint32_t)D;
    mt->feat_dtype = so->dtype;
    mt->index_dtype = TG_U32;
    mt->num_classes = (uint32_t)C;
    snprintf(mt->source, sizeof mt->source, "test synth seed %llu", (unsigned long long)so->seed);
    tg_filew_t fw;
    /* indptr */
    if (tg_dsw_open_file(&w, TG_FILE_INDPTR, &fw) < 0) goto fail;
    uint64_t e = 0;
    for (uint64_t v = 0; v <= n; v++) {
        while (e < ne && (pairs[e] >> 32) < v)
            e++;
        tg_filew_write(&fw, &e, 8);
    }
    if (tg_dsw_close_file(&w, TG_FILE_INDPTR, &fw) < 0) goto fail;
    if (tg_dsw_open_file(&w, TG_FILE_INDICES, &fw) < 0) goto fail;
    for (uint64_t i = 0; i < ne; i++) {
        uint32_t s = (uint32_t)(pairs[i] & 0xffffffffu);
        tg_filew_write(&fw, &s, 4);
    }
    if (tg_dsw_close_file(&w, TG_FILE_INDICES, &fw) < 0) goto fail;
    /* features: centroid of class c is +-1 in a pattern, plus noise */
    if (tg_dsw_open_file(&w, TG_FILE_FEATURES, &fw) < 0) goto fail;
    for (uint64_t v = 0; v < n; v++)
        for (uint64_t k = 0; k < D; k++) {
            uint64_t c = v % C;
            float x =
                (float)((((c * 7 + k * 3) % 5) < 2 ? 1.0 : -0.5) + so->noise * tg_rng_normal(&r));
            if (so->dtype == TG_F16) {
                uint16_t h = tg_f32_to_f16(x);
                tg_filew_write(&fw, &h, 2);
            } else {
                tg_filew_write(&fw, &x, 4);
            }
        }
    if (tg_dsw_close_file(&w, TG_FILE_FEATURES, &fw) < 0) goto fail;
    if (tg_dsw_open_file(&w, TG_FILE_LABELS, &fw) < 0) goto fail;
    for (uint64_t v = 0; v < n; v++) {
        int32_t y = (int32_t)(v % C);
        tg_filew_write(&fw, &y, 4);
    }
    if (tg_dsw_close_file(&w, TG_FILE_LABELS, &fw) < 0) goto fail;
    /* splits: a deterministic permutation, 50/25/25 */
    uint32_t *perm = malloc(n * sizeof *perm);
    for (uint64_t v = 0; v < n; v++)
        perm[v] = (uint32_t)v;
    tg_rng_shuffle_u32(&r, perm, n);
    uint64_t ntr = n / 2, nva = n / 4, nte = n - ntr - nva;
    mt->num_train = ntr;
    mt->num_valid = nva;
    mt->num_test = nte;
    static const tg_file_id_t sp[3] = {TG_FILE_TRAIN, TG_FILE_VALID, TG_FILE_TEST};
    uint64_t off = 0, cnt[3] = {ntr, nva, nte};
    for (int s = 0; s < 3; s++) {
        if (tg_dsw_open_file(&w, sp[s], &fw) < 0) goto fail;
        tg_filew_write(&fw, perm + off, cnt[s] * 4);
        off += cnt[s];
        if (tg_dsw_close_file(&w, sp[s], &fw) < 0) goto fail;
    }
    free(perm);
    free(pairs);
    if (tg_dsw_commit(&w) < 0) goto fail;
    tg_dsw_abort(&w);
    return;
fail:
    fprintf(stderr, "synth_write %s: %s\n", dir, tg_errmsg());
    exit(1);
}

TG_UNUSED static void synth_default(synth_opts_t *so)
{
    memset(so, 0, sizeof *so);
    so->nodes = 600;
    so->classes = 4;
    so->dim = 16;
    so->deg = 8;
    so->homophily = 0.8;
    so->noise = 1.5;
    so->dtype = TG_F32;
    so->seed = 1;
}

/* Counts the lines of out that start with '{' and contain key. */
TG_UNUSED static int json_lines_with(const char *out, const char *key)
{
    int n = 0;
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[0] == '{') {
            char *line = strndup(p, len);
            if (strstr(line, key)) n++;
            free(line);
        }
        p = e ? e + 1 : NULL;
    }
    return n;
}

/* The value of "key": in the n-th JSON line (0-based) that contains it; NAN if absent. */
TG_UNUSED static double json_value(const char *out, const char *key, int nth)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    int n = 0;
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[0] == '{') {
            char *line = strndup(p, len);
            char *k = strstr(line, pat);
            if (k && n++ == nth) {
                double v = strncmp(k + strlen(pat), "null", 4) ? atof(k + strlen(pat)) : NAN;
                free(line);
                return v;
            }
            free(line);
        }
        p = e ? e + 1 : NULL;
    }
    return NAN;
}

#endif
