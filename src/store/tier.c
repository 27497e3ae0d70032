/* The static RAM tier (see "tiers" in tiergnn/extract.h): the raw rows of a fixed node set,
 * read once with large sorted reads through io/ and never changed afterwards, so lookups take
 * no lock; or rows its creator already holds (borrowed: only the lookup is the tier's). Rows are
 * kept in node order; a node's row index comes from a direct u32[num_nodes] table or an
 * open-addressing hash, whichever costs fewer bytes. */
#include <stdlib.h>
#include <string.h>

#include "tiergnn/extract.h"
#include "tiergnn/rowcrc.h"

/* The fill reads the sorted rows in merged runs: rows whose holes are at most FILL_GAP bytes
 * are read together, holes included, up to FILL_SPAN bytes a read, FILL_RUNS reads a submit
 * (into merge buffers, then copied). A random 4 KiB read costs the disk about what it
 * transfers sequentially in ~10 KiB, so a tier of 15% of 128-byte rows reads the file nearly
 * sequentially (bench/README.md, "GIDS (issue 12): the shared bench, the window and the
 * accumulator": its 100 M-node run, the constant buffer's fill). Memory: the merge buffers (4 MiB)
 * and io/'s staging (1 MiB) while it runs. */
#define FILL_DEPTH 8u
#define FILL_MAX_READ ((size_t)128 << 10)
#define FILL_SPAN TG_TIER_FILL_SPAN
#define FILL_GAP TG_TIER_FILL_GAP
#define FILL_RUNS TG_TIER_FILL_RUNS
#define FILL_BATCH ((size_t)8192) /* rows per submit (rows wider than half a span) */
#define NO_ROW UINT32_MAX
#define NO_KEY UINT64_MAX

typedef struct {
    uint64_t count;      /* distinct nodes held */
    unsigned char *rows; /* (count, row_bytes), in node order; or the caller's (borrowed) */
    int borrowed;        /* rows are the caller's: not freed */
    uint32_t *direct;    /* (num_nodes) row index or NO_ROW; or NULL */
    uint64_t *hkey;      /* (mask + 1) node or NO_KEY */
    uint32_t *hrow;      /* (mask + 1) row index */
    uint64_t mask;
    tg_budget_t *budget;
} static_t;

static uint64_t hash_cap(uint64_t n)
{
    uint64_t cap = 2;
    while (cap < 2 * n)
        cap <<= 1;
    return cap;
}

static uint64_t table_bytes(uint64_t num_nodes, uint64_t n, int *direct)
{
    uint64_t d = num_nodes * sizeof(uint32_t), h = hash_cap(n) * (sizeof(uint64_t) + 4);
    if (direct) *direct = d <= h;
    return TG_MIN(d, h);
}

uint64_t tg_tier_static_bytes(uint64_t num_nodes, uint32_t feat_dim, tg_feat_dtype_t dtype,
                              uint64_t n)
{
    return n * feat_dim * tg_feat_dtype_size(dtype) + table_bytes(num_nodes, n, NULL);
}

static uint64_t hash_slot(uint64_t node, uint64_t mask)
{
    return (node * 0x9E3779B97F4A7C15ull >> 17) & mask;
}

static const void *static_find(const tg_tier_t *t, uint64_t node)
{
    const static_t *s = t->impl;
    uint32_t r = NO_ROW;
    if (s->direct) {
        r = s->direct[node];
    } else {
        for (uint64_t i = hash_slot(node, s->mask);; i = (i + 1) & s->mask) {
            if (s->hkey[i] == node) {
                r = s->hrow[i];
                break;
            }
            if (s->hkey[i] == NO_KEY) break;
        }
    }
    return r == NO_ROW ? NULL : s->rows + (size_t)r * t->row_bytes;
}

static void static_destroy(tg_tier_t *t)
{
    static_t *s = t->impl;
    if (s) {
        if (!s->borrowed) free(s->rows);
        free(s->direct);
        free(s->hkey);
        free(s->hrow);
        if (s->budget && t->mem_bytes) tg_budget_release(s->budget, t->mem_bytes);
        free(s);
    }
    free(t);
}

static const tg_tier_i static_iface = {static_find, static_destroy};

/* Rows wider than half a span: one request each, FILL_BATCH per submit (io/ merges adjacent
 * ones into reads of up to FILL_MAX_READ). */
static int fill_rows_each(tg_io_t *q, const tg_tier_static_opts_t *o, static_t *s,
                          const uint64_t *ids, size_t row)
{
    tg_io_req_t *req = malloc(FILL_BATCH * sizeof *req);
    if (!req) return tg_err(-ENOMEM, "static tier: out of memory");
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < s->count; i += FILL_BATCH) {
        size_t m = (size_t)TG_MIN((uint64_t)FILL_BATCH, s->count - i);
        for (size_t k = 0; k < m; k++)
            req[k] = (tg_io_req_t){.file = o->feat,
                                   .off = ids[i + k] * row,
                                   .len = row,
                                   .dst = s->rows + (size_t)(i + k) * row};
        rc = tg_io_read_batch(q, req, m);
    }
    free(req);
    return rc;
}

/* The rows of the sorted distinct nodes ids[0..count) into s->rows, in merged runs (above). */
static int fill_rows(const tg_tier_static_opts_t *o, static_t *s, const uint64_t *ids, size_t row,
                     tg_budget_t *budget)
{
    tg_io_opts_t io = {
        .depth = FILL_DEPTH, .max_read_bytes = FILL_MAX_READ, .budget = budget, .stats = o->stats};
    if (s->count == 0) return 0;
    tg_io_t *q;
    int rc = tg_io_create(&q, &io);
    if (rc < 0) return rc;
    uint64_t align = tg_io_file_align(o->feat), fsize = tg_io_file_size(o->feat);
    if (align == 0) align = 1;
    if (row + 2 * align > FILL_SPAN / 2) {
        rc = fill_rows_each(q, o, s, ids, row);
        tg_io_destroy(q);
        return rc;
    }
    uint64_t bytes = (uint64_t)FILL_RUNS * FILL_SPAN;
    char *buf = NULL;
    if (budget && (rc = tg_budget_reserve(budget, bytes, "static tier fill")) < 0) {
        tg_io_destroy(q);
        return rc;
    }
    if (!(buf = tg_aligned_alloc(4096, (size_t)bytes)))
        rc = tg_err(-ENOMEM, "static tier: out of memory for its fill buffers");
    tg_io_req_t req[FILL_RUNS];
    uint64_t first[FILL_RUNS], end[FILL_RUNS];
    for (uint64_t i = 0; rc == 0 && i < s->count;) {
        unsigned nr = 0;
        for (; nr < FILL_RUNS && i < s->count; nr++) {
            uint64_t off = ids[i] * row / align * align, j = i + 1;
            while (j < s->count && ids[j] * row - (ids[j - 1] * row + row) <= FILL_GAP &&
                   (ids[j] * row + row + align - 1) / align * align - off <= FILL_SPAN)
                j++;
            uint64_t stop = (ids[j - 1] * row + row + align - 1) / align * align;
            req[nr] = (tg_io_req_t){.file = o->feat,
                                    .off = off,
                                    .len = (size_t)(TG_MIN(stop, fsize) - off),
                                    .dst = buf + (size_t)nr * FILL_SPAN};
            first[nr] = i;
            end[nr] = j;
            i = j;
        }
        if ((rc = tg_io_read_batch(q, req, nr)) < 0) {
            /* io/ names the merged read's offset; name the rows it was for too */
            for (unsigned r = 0; r < nr; r++)
                if (req[r].res < 0) {
                    tg_err_prefix(rc, "the rows of nodes %llu..%llu (file offset %llu)",
                                  (unsigned long long)ids[first[r]],
                                  (unsigned long long)ids[end[r] - 1],
                                  (unsigned long long)(ids[first[r]] * row));
                    break;
                }
            break;
        }
        for (unsigned r = 0; r < nr && rc == 0; r++)
            for (uint64_t k = first[r]; k < end[r] && rc == 0; k++) {
                const char *src = (const char *)req[r].dst + (ids[k] * row - req[r].off);
                rc =
                    tg_rowcrc_check(o->rowcrc, ids[k], src, tg_io_file_path(o->feat), ids[k] * row);
                memcpy(s->rows + (size_t)k * row, src, row);
            }
        if (rc < 0) break;
    }
    free(buf);
    if (budget) tg_budget_release(budget, bytes);
    tg_io_destroy(q);
    return rc;
}

/* Row i holds node ids[i]; ids must be distinct (a repeated one is -EINVAL, naming it). */
static int build_index(tg_tier_t *t, static_t *s, const uint64_t *ids, uint64_t num_nodes,
                       int direct)
{
    uint64_t i = 0;
    if (direct) {
        s->direct = malloc((size_t)num_nodes * sizeof *s->direct + 1);
        if (!s->direct) return tg_err(-ENOMEM, "static tier %s: out of memory", t->name);
        memset(s->direct, 0xff, (size_t)num_nodes * sizeof *s->direct);
        for (; i < s->count; i++) {
            if (s->direct[ids[i]] != NO_ROW) goto twice;
            s->direct[ids[i]] = (uint32_t)i;
        }
        return 0;
    }
    uint64_t cap = hash_cap(s->count);
    s->mask = cap - 1;
    s->hkey = malloc((size_t)cap * sizeof *s->hkey);
    s->hrow = malloc((size_t)cap * sizeof *s->hrow);
    if (!s->hkey || !s->hrow) return tg_err(-ENOMEM, "static tier %s: out of memory", t->name);
    memset(s->hkey, 0xff, (size_t)cap * sizeof *s->hkey);
    for (; i < s->count; i++) {
        uint64_t h = hash_slot(ids[i], s->mask);
        while (s->hkey[h] != NO_KEY) {
            if (s->hkey[h] == ids[i]) goto twice;
            h = (h + 1) & s->mask;
        }
        s->hkey[h] = ids[i];
        s->hrow[h] = (uint32_t)i;
    }
    return 0;
twice:
    return tg_err(-EINVAL, "static tier %s: node %llu is given twice", t->name,
                  (unsigned long long)ids[i]);
}

/* A tier with no rows or table yet, after the nodes are checked to be below num_nodes. */
static int tier_new(tg_tier_t **out, const char *name, size_t row_bytes, const uint64_t *nodes,
                    uint64_t n, uint64_t num_nodes)
{
    *out = NULL;
    for (uint64_t i = 0; i < n; i++)
        if (nodes[i] >= num_nodes)
            return tg_err(-EINVAL, "static tier %s: node %llu out of range (%llu nodes)", name,
                          (unsigned long long)nodes[i], (unsigned long long)num_nodes);
    tg_tier_t *t = calloc(1, sizeof *t);
    static_t *s = calloc(1, sizeof *s);
    if (!t || !s) {
        free(t);
        free(s);
        return tg_err(-ENOMEM, "static tier %s: out of memory", name);
    }
    t->iface = &static_iface;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->row_bytes = row_bytes;
    t->impl = s;
    *out = t;
    return 0;
}

int tg_tier_static_create(tg_tier_t **out, const tg_tier_static_opts_t *o, const uint64_t *nodes,
                          uint64_t n, tg_budget_t *budget)
{
    *out = NULL;
    const char *name = o->name ? o->name : "static";
    if (!o->feat || o->feat_dim == 0 || n >= NO_ROW)
        return tg_err(-EINVAL, "static tier %s: needs a feature file, a width and < 2^32 rows",
                      name);
    size_t row = (size_t)o->feat_dim * tg_feat_dtype_size(o->dtype);
    tg_tier_t *t;
    int rc = tier_new(&t, name, row, nodes, n, o->num_nodes);
    if (rc < 0) return rc;
    static_t *s = t->impl;
    uint64_t *ids = malloc((size_t)n * sizeof *ids + 1);
    if (!ids) {
        static_destroy(t);
        return tg_err(-ENOMEM, "static tier %s: out of memory", name);
    }
    if (n) memcpy(ids, nodes, (size_t)n * sizeof *ids);
    qsort(ids, (size_t)n, sizeof *ids, tg_cmp_u64);
    for (uint64_t i = 0; i < n; i++)
        if (i == 0 || ids[i] != ids[i - 1]) ids[s->count++] = ids[i];
    int direct;
    uint64_t bytes = s->count * row + table_bytes(o->num_nodes, s->count, &direct);
    char what[64];
    snprintf(what, sizeof what, "static tier %s", name);
    if (budget && (rc = tg_budget_reserve(budget, bytes, what)) < 0) goto err;
    t->mem_bytes = bytes;
    s->budget = budget;
    s->rows = malloc((size_t)(s->count * row) + 1);
    if (!s->rows) {
        rc = tg_err(-ENOMEM, "static tier %s: out of memory for %llu rows", name,
                    (unsigned long long)s->count);
        goto err;
    }
    if ((rc = build_index(t, s, ids, o->num_nodes, direct)) < 0) goto err;
    if ((rc = fill_rows(o, s, ids, row, budget)) < 0) {
        tg_err_prefix(rc, "static tier %s", name);
        goto err;
    }
    free(ids);
    *out = t;
    return 0;
err:
    free(ids);
    static_destroy(t);
    return rc;
}

int tg_tier_borrow_create(tg_tier_t **out, const char *name, const void *rows, size_t row_bytes,
                          const uint64_t *nodes, uint64_t n, uint64_t num_nodes,
                          tg_budget_t *budget)
{
    *out = NULL;
    if (!name) name = "borrowed";
    if (row_bytes == 0 || n >= NO_ROW || (n && !rows))
        return tg_err(-EINVAL, "static tier %s: needs rows, a row width and < 2^32 rows", name);
    tg_tier_t *t;
    int rc = tier_new(&t, name, row_bytes, nodes, n, num_nodes);
    if (rc < 0) return rc;
    static_t *s = t->impl;
    s->borrowed = 1;
    s->rows = (unsigned char *)(uintptr_t)rows; /* never written through */
    s->count = n;
    int direct;
    uint64_t bytes = table_bytes(num_nodes, n, &direct);
    char what[64];
    snprintf(what, sizeof what, "static tier %s", name);
    if (budget && (rc = tg_budget_reserve(budget, bytes, what)) < 0) goto err;
    t->mem_bytes = bytes;
    s->budget = budget;
    if ((rc = build_index(t, s, nodes, num_nodes, direct)) < 0) goto err;
    *out = t;
    return 0;
err:
    static_destroy(t);
    return rc;
}

void tg_tier_destroy(tg_tier_t *t)
{
    if (t) t->iface->destroy(t);
}

uint64_t tg_tier_static_count(const tg_tier_t *t)
{
    /* 0 for a tier of another kind (the extraction asks its first tier, whatever it is) */
    return t->iface == &static_iface ? ((const static_t *)t->impl)->count : 0;
}

void tg_tier_stats(tg_tier_t *t, tg_tier_stats_t *out, int reset)
{
    out->name = t->name;
    out->lookups = reset ? atomic_exchange(&t->lookups, 0) : atomic_load(&t->lookups);
    out->hits = reset ? atomic_exchange(&t->hits, 0) : atomic_load(&t->hits);
    out->bytes = out->hits * t->row_bytes;
}

uint64_t tg_tier_static_fit(uint64_t num_nodes, uint32_t feat_dim, tg_feat_dtype_t dtype,
                            uint64_t room, uint64_t per_row, uint64_t fixed)
{
    uint64_t lo = 0, hi = num_nodes;
    while (lo < hi) {
        uint64_t k = hi - (hi - lo) / 2;
        uint64_t need = tg_tier_static_bytes(num_nodes, feat_dim, dtype, k) + k * per_row + fixed;
        if (need <= room)
            lo = k;
        else
            hi = k - 1;
    }
    return lo;
}
