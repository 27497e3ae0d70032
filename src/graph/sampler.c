/* Node-wise uniform neighbour sampler (see tiergnn/graph.h). */
#include "tiergnn/graph.h"

#include <stdlib.h>
#include <string.h>

#define EMPTY UINT64_MAX

struct tg_sampler {
    tg_adj_t *adj;
    int num_layers;
    int64_t fanouts[TG_MAX_LAYERS];
    /* global id -> local position, open addressing; keys EMPTY when free */
    uint64_t *map_keys;
    uint32_t *map_vals;
    size_t map_cap, map_len;
    /* the batch's node list while it grows */
    uint64_t *nodes;
    size_t nodes_cap;
    /* edge positions chosen for the current layer, and the neighbour ids read for them */
    uint64_t *pos, *nbr;
    size_t pos_cap;
    /* hash set of offsets for Floyd's algorithm when the fanout is large */
    uint64_t *set;
    size_t set_cap;
};

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, const char *what)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * elem);
    if (!np) return tg_err(-ENOMEM, "sampler: out of memory for %s (%zu entries)", what, c);
    *p = np;
    *cap = c;
    return 0;
}

static void map_clear(tg_sampler_t *s)
{
    for (size_t i = 0; i < s->map_cap; i++)
        s->map_keys[i] = EMPTY;
    s->map_len = 0;
}

static int map_rehash(tg_sampler_t *s, size_t cap)
{
    uint64_t *ok = s->map_keys;
    uint32_t *ov = s->map_vals;
    size_t ocap = s->map_cap;
    uint64_t *nk = malloc(cap * sizeof *nk);
    uint32_t *nv = malloc(cap * sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return tg_err(-ENOMEM, "sampler: out of memory for the node map (%zu slots)", cap);
    }
    for (size_t i = 0; i < cap; i++)
        nk[i] = EMPTY;
    for (size_t i = 0; i < ocap; i++) {
        if (ok[i] == EMPTY) continue;
        size_t h = (size_t)mix64(ok[i]) & (cap - 1);
        while (nk[h] != EMPTY)
            h = (h + 1) & (cap - 1);
        nk[h] = ok[i];
        nv[h] = ov[i];
    }
    free(ok);
    free(ov);
    s->map_keys = nk;
    s->map_vals = nv;
    s->map_cap = cap;
    return 0;
}

/* Returns the local id of v, appending v to the node list if new (*is_new set accordingly). */
static int map_get_or_add(tg_sampler_t *s, uint64_t v, uint32_t *local, int *is_new)
{
    if ((s->map_len + 1) * 2 > s->map_cap) {
        int rc = map_rehash(s, s->map_cap ? s->map_cap * 2 : 1024);
        if (rc < 0) return rc;
    }
    size_t h = (size_t)mix64(v) & (s->map_cap - 1);
    while (s->map_keys[h] != EMPTY) {
        if (s->map_keys[h] == v) {
            *local = s->map_vals[h];
            *is_new = 0;
            return 0;
        }
        h = (h + 1) & (s->map_cap - 1);
    }
    if (s->map_len >= UINT32_MAX)
        return tg_err(-EOVERFLOW,
                      "sampler: a batch reaches more than %u nodes; use a smaller "
                      "batch size or smaller fanouts",
                      UINT32_MAX);
    int rc = grow((void **)&s->nodes, &s->nodes_cap, s->map_len + 1, sizeof *s->nodes, "nodes");
    if (rc < 0) return rc;
    uint32_t id = (uint32_t)s->map_len;
    s->map_keys[h] = v;
    s->map_vals[h] = id;
    s->nodes[id] = v;
    s->map_len++;
    *local = id;
    *is_new = 1;
    return 0;
}

int tg_sampler_create(tg_sampler_t **out, tg_adj_t *adj, int num_layers, const int64_t *fanouts)
{
    *out = NULL;
    if (!adj) return tg_err(-EINVAL, "sampler: no adjacency given");
    if (num_layers < 1 || num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "sampler: %d layers, expected 1..%d", num_layers, TG_MAX_LAYERS);
    for (int l = 0; l < num_layers; l++)
        if (fanouts[l] < TG_FANOUT_ALL)
            return tg_err(-EINVAL, "sampler: fanout %lld for layer %d, expected -1 (all) or >= 0",
                          (long long)fanouts[l], l);
    tg_sampler_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "sampler: out of memory");
    s->adj = adj;
    s->num_layers = num_layers;
    memcpy(s->fanouts, fanouts, (size_t)num_layers * sizeof *fanouts);
    *out = s;
    return 0;
}

void tg_sampler_destroy(tg_sampler_t *s)
{
    if (!s) return;
    free(s->map_keys);
    free(s->map_vals);
    free(s->nodes);
    free(s->pos);
    free(s->nbr);
    free(s->set);
    free(s);
}

static void sort_u64(uint64_t *a, size_t n);

/* Small open-addressing set of offsets for Floyd's algorithm; cleared per destination. */
static int set_insert(uint64_t *set, size_t cap, uint64_t x)
{
    size_t h = (size_t)mix64(x) & (cap - 1);
    while (set[h] != EMPTY) {
        if (set[h] == x) return 0;
        h = (h + 1) & (cap - 1);
    }
    set[h] = x;
    return 1;
}

/* Chooses k distinct offsets of [0, deg) uniformly (Robert Floyd's algorithm: k RNG draws, no
 * O(deg) scratch, which matters for hubs with millions of neighbours) and writes beg + offset to
 * out in ascending order. */
static int choose(tg_sampler_t *s, tg_rng_t *rng, uint64_t beg, uint64_t deg, uint64_t k,
                  uint64_t *out)
{
    if (k <= 32) {
        /* Linear duplicate check is faster than hashing for the usual fanouts (5..25). */
        uint64_t n = 0;
        for (uint64_t j = deg - k; j < deg; j++) {
            uint64_t t = tg_rng_below(rng, j + 1);
            int dup = 0;
            for (uint64_t i = 0; i < n; i++)
                if (out[i] == t) {
                    dup = 1;
                    break;
                }
            out[n++] = dup ? j : t;
        }
    } else {
        size_t cap = 64;
        while (cap < 2 * k)
            cap *= 2;
        int rc = grow((void **)&s->set, &s->set_cap, cap, sizeof *s->set, "sampling set");
        if (rc < 0) return rc;
        for (size_t i = 0; i < cap; i++)
            s->set[i] = EMPTY;
        uint64_t n = 0;
        for (uint64_t j = deg - k; j < deg; j++) {
            uint64_t t = tg_rng_below(rng, j + 1);
            if (set_insert(s->set, cap, t))
                out[n++] = t;
            else {
                set_insert(s->set, cap, j);
                out[n++] = j;
            }
        }
    }
    sort_u64(out, k);
    for (uint64_t i = 0; i < k; i++)
        out[i] += beg;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void sort_u64(uint64_t *a, size_t n)
{
    if (n > 32) {
        qsort(a, n, sizeof *a, cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = a[i];
        size_t j = i;
        while (j > 0 && a[j - 1] > x) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = x;
    }
}

int tg_sampler_sample(tg_sampler_t *s, const uint64_t *seeds, size_t n, tg_rng_t *rng,
                      tg_batch_t *out)
{
    memset(out, 0, sizeof *out);
    tg_adj_t *adj = s->adj;
    const uint64_t *indptr = adj->indptr;
    int L = s->num_layers, rc = 0;
    if (n == 0) return tg_err(-EINVAL, "sampler: a batch needs at least one seed");
    if (n > UINT32_MAX)
        return tg_err(-EINVAL, "sampler: %zu seeds in one batch, at most %u", n, UINT32_MAX);

    /* Size the map for the seeds plus a guess of the first hop, so that small batches never
     * rehash; then clear it (O(capacity), which tracks the largest batch seen). */
    size_t want = 1024;
    while (want < 4 * n)
        want *= 2;
    if (s->map_cap < want) {
        free(s->map_keys);
        free(s->map_vals);
        s->map_keys = NULL;
        s->map_vals = NULL;
        s->map_cap = 0;
        if ((rc = map_rehash(s, want)) < 0) return rc;
    }
    map_clear(s);

    out->num_layers = L;
    out->blocks = calloc((size_t)L, sizeof *out->blocks);
    if (!out->blocks) return tg_err(-ENOMEM, "sampler: out of memory");

    for (size_t i = 0; i < n; i++) {
        uint32_t local;
        int is_new;
        if (seeds[i] >= adj->num_nodes) {
            rc = tg_err(-EINVAL, "sampler: seed %llu is not a node id (%llu nodes)",
                        (unsigned long long)seeds[i], (unsigned long long)adj->num_nodes);
            goto err;
        }
        if ((rc = map_get_or_add(s, seeds[i], &local, &is_new)) < 0) goto err;
        if (!is_new) {
            rc = tg_err(-EINVAL, "sampler: seed %llu appears twice in one batch",
                        (unsigned long long)seeds[i]);
            goto err;
        }
    }

    /* From the seeds outwards: block L-1 first, block 0 last. */
    for (int l = L - 1; l >= 0; l--) {
        tg_block_t *b = &out->blocks[l];
        uint32_t num_dst = (uint32_t)s->map_len;
        int64_t f = s->fanouts[l];
        b->num_dst = num_dst;
        b->indptr = malloc(((size_t)num_dst + 1) * sizeof *b->indptr);
        if (!b->indptr) {
            rc = tg_err(-ENOMEM, "sampler: out of memory for block %d", l);
            goto err;
        }
        /* Pass 1: how many edges each destination keeps. */
        b->indptr[0] = 0;
        for (uint32_t i = 0; i < num_dst; i++) {
            uint64_t v = s->nodes[i];
            uint64_t deg = indptr[v + 1] - indptr[v];
            uint64_t k = f < 0 ? deg : TG_MIN((uint64_t)f, deg);
            b->indptr[i + 1] = b->indptr[i] + k;
        }
        uint64_t ne = b->indptr[num_dst];
        b->num_edges = ne;
        if ((rc = grow((void **)&s->pos, &s->pos_cap, ne, sizeof *s->pos, "edge positions")) < 0)
            goto err;
        /* nbr shares pos_cap: grow it to the same capacity. */
        {
            uint64_t *nb = realloc(s->nbr, (s->pos_cap ? s->pos_cap : 1) * sizeof *nb);
            if (!nb) {
                rc = tg_err(-ENOMEM, "sampler: out of memory for %llu neighbours",
                            (unsigned long long)ne);
                goto err;
            }
            s->nbr = nb;
        }
        /* Pass 2: choose the positions (the RNG is consumed in destination order). */
        for (uint32_t i = 0; i < num_dst; i++) {
            uint64_t v = s->nodes[i];
            uint64_t beg = indptr[v], deg = indptr[v + 1] - beg;
            uint64_t k = b->indptr[i + 1] - b->indptr[i];
            if (k == 0)
                continue; /* also keeps s->pos (NULL before the first edge) out of arithmetic */
            uint64_t *p = s->pos + b->indptr[i];
            if (k == deg) {
                for (uint64_t j = 0; j < k; j++)
                    p[j] = beg + j;
            } else if ((rc = choose(s, rng, beg, deg, k, p)) < 0) {
                goto err;
            }
        }
        /* One batched read per layer: a disk-resident adjacency turns it into merged I/O. */
        if (ne && (rc = tg_adj_read(adj, s->pos, (size_t)ne, s->nbr)) < 0) {
            tg_err_prefix(rc, "sampler: block %d", l);
            goto err;
        }
        b->indices = malloc((ne ? ne : 1) * sizeof *b->indices);
        if (!b->indices) {
            rc = tg_err(-ENOMEM, "sampler: out of memory for block %d (%llu edges)", l,
                        (unsigned long long)ne);
            goto err;
        }
        for (uint64_t e = 0; e < ne; e++) {
            uint32_t local;
            int is_new;
            if (s->nbr[e] >= adj->num_nodes) {
                rc = tg_err(-EINVAL,
                            "sampler: edge %llu names node %llu, but the graph has %llu "
                            "nodes (corrupt indices?)",
                            (unsigned long long)s->pos[e], (unsigned long long)s->nbr[e],
                            (unsigned long long)adj->num_nodes);
                goto err;
            }
            if ((rc = map_get_or_add(s, s->nbr[e], &local, &is_new)) < 0) goto err;
            b->indices[e] = local;
        }
        b->num_src = (uint32_t)s->map_len;
    }

    out->num_nodes = (uint32_t)s->map_len;
    out->num_seeds = (uint32_t)n;
    out->nodes = malloc(s->map_len * sizeof *out->nodes);
    if (!out->nodes) {
        rc = tg_err(-ENOMEM, "sampler: out of memory for %zu node ids", s->map_len);
        goto err;
    }
    memcpy(out->nodes, s->nodes, s->map_len * sizeof *out->nodes);
    return 0;
err:
    tg_batch_free(out);
    return rc;
}

/* Stream tags keep the shuffling and sampling streams of one (seed, epoch) apart. */
#define STREAM_SAMPLE 0x53414d50ULL  /* "SAMP" */
#define STREAM_SHUFFLE 0x53485546ULL /* "SHUF" */

void tg_sampler_batch_rng(tg_rng_t *r, uint64_t seed, uint64_t epoch, uint64_t batch)
{
    tg_rng_t e;
    tg_rng_seed2(&e, seed, (STREAM_SAMPLE << 32) ^ epoch);
    tg_rng_seed2(r, tg_rng_u64(&e), batch);
}

void tg_sampler_shuffle_epoch(uint64_t *ids, size_t n, uint64_t seed, uint64_t epoch)
{
    tg_rng_t r;
    tg_rng_seed2(&r, seed, (STREAM_SHUFFLE << 32) ^ epoch);
    tg_rng_shuffle_u64(&r, ids, n);
}

int tg_fanouts_parse(const char *s, int64_t *fanouts, int *n)
{
    *n = 0;
    if (!s || !*s)
        return tg_err(-EINVAL, "--fanouts: empty list, expected e.g. 10,10 (-1 = all neighbours)");
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[32];
        if (len == 0 || len >= sizeof item)
            return tg_err(-EINVAL, "--fanouts: item %d of '%s' is %s, expected an integer >= -1",
                          *n + 1, s, len ? "too long" : "empty");
        memcpy(item, p, len);
        item[len] = 0;
        int64_t v;
        char what[48];
        snprintf(what, sizeof what, "--fanouts item %d", *n + 1);
        int rc = tg_parse_i64(item, &v, what);
        if (rc < 0) return rc;
        if (v < TG_FANOUT_ALL)
            return tg_err(-EINVAL, "--fanouts: item %d is %lld, expected -1 (all) or >= 0", *n + 1,
                          (long long)v);
        if (*n >= TG_MAX_LAYERS)
            return tg_err(-EINVAL, "--fanouts: more than %d values", TG_MAX_LAYERS);
        fanouts[(*n)++] = v;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}
