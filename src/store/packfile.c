/* A packed file read back (tiergnn/pack.h, "a packed file"): the map records that say where
 * each input row of a batch lies, the map file that holds them, a tier over the hot rows in RAM,
 * and the reader, which turns a record into the batch's row list and moves the rows into X with
 * store/extract (its public API only: the packed file is the extraction's feature file). */
#include "tiergnn/pack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiergnn/layout.h"
#include "tiergnn/rowcrc.h"

/* ---------------------------------------------------------------- map records */

uint64_t tg_pack_rec_bytes(const tg_pack_rec_t *h)
{
    uint64_t b = sizeof *h + 8 * (uint64_t)h->n_cache +
                 4 * (2 * (uint64_t)h->n_hot + h->n_cache + h->n_chunk);
    return (b + 7) & ~(uint64_t)7;
}

uint64_t tg_pack_rec_bytes_max(uint64_t n)
{
    return sizeof(tg_pack_rec_t) + 12 * n + 8;
}

tg_pack_rec_view_t tg_pack_rec_view(const void *rec)
{
    const tg_pack_rec_t *h = rec;
    tg_pack_rec_view_t v;
    v.cache_row = (const uint64_t *)(h + 1);
    v.hot_pos = (const uint32_t *)(v.cache_row + h->n_cache);
    v.hot_slot = v.hot_pos + h->n_hot;
    v.cache_pos = v.hot_slot + h->n_hot;
    v.chunk_pos = v.cache_pos + h->n_cache;
    return v;
}

uint64_t tg_pack_rec_fill(void *rec, const struct tg_layout_loc *loc, uint64_t cache_row0,
                          uint64_t chunk_row0, size_t row_bytes)
{
    tg_pack_rec_t *h = rec;
    *h = (tg_pack_rec_t){.n_hot = (uint32_t)loc->n_hot,
                         .n_cache = (uint32_t)loc->n_cache,
                         .n_chunk = (uint32_t)loc->n_chunk,
                         .chunk_first = chunk_row0 + loc->chunk_off / row_bytes};
    tg_pack_rec_view_t v = tg_pack_rec_view(rec);
    uint64_t *cache_row = (uint64_t *)v.cache_row;
    for (uint64_t i = 0; i < loc->n_cache; i++)
        cache_row[i] = cache_row0 + loc->cache_off[i] / row_bytes;
    memcpy((uint32_t *)v.hot_pos, loc->hot_pos, loc->n_hot * sizeof(uint32_t));
    memcpy((uint32_t *)v.hot_slot, loc->hot_slot, loc->n_hot * sizeof(uint32_t));
    memcpy((uint32_t *)v.cache_pos, loc->cache_pos, loc->n_cache * sizeof(uint32_t));
    memcpy((uint32_t *)v.chunk_pos, loc->chunk_pos, loc->n_chunk * sizeof(uint32_t));
    return tg_pack_rec_bytes(h);
}

/* rows[pos] = row, once per X row. */
static int rec_put(uint64_t *rows, uint32_t n, uint32_t pos, uint64_t row)
{
    if (pos >= n || rows[pos] != UINT64_MAX) return -1;
    rows[pos] = row;
    return 0;
}

int tg_pack_rec_rows(const void *rec, uint64_t nbytes, uint32_t n, uint64_t hot_rows,
                     uint64_t total_rows, uint64_t *rows, const char *name, uint64_t batch)
{
    const tg_pack_rec_t *h = rec;
    if (nbytes < sizeof *h || (uint64_t)h->n_hot + h->n_cache + h->n_chunk != n ||
        tg_pack_rec_bytes(h) != nbytes)
        return tg_err(-EIO, "%s: the record of batch %llu does not match its %u rows", name,
                      (unsigned long long)batch, n);
    tg_pack_rec_view_t v = tg_pack_rec_view(rec);
    for (uint32_t p = 0; p < n; p++)
        rows[p] = UINT64_MAX;
    for (uint32_t i = 0; i < h->n_hot; i++)
        if (v.hot_slot[i] >= hot_rows || rec_put(rows, n, v.hot_pos[i], v.hot_slot[i]) < 0)
            return tg_err(-EIO, "%s: batch %llu: hot row %u of %llu out of range", name,
                          (unsigned long long)batch, v.hot_slot[i], (unsigned long long)hot_rows);
    for (uint32_t i = 0; i < h->n_cache; i++)
        if (v.cache_row[i] < hot_rows || v.cache_row[i] >= total_rows ||
            (i && v.cache_row[i] <= v.cache_row[i - 1]) ||
            rec_put(rows, n, v.cache_pos[i], v.cache_row[i]) < 0)
            return tg_err(-EIO, "%s: batch %llu: cache row %u out of order or range", name,
                          (unsigned long long)batch, i);
    int bad = h->chunk_first + h->n_chunk > total_rows || (h->n_chunk && h->chunk_first < hot_rows);
    for (uint32_t k = 0; k < h->n_chunk && !bad; k++)
        bad = rec_put(rows, n, v.chunk_pos[k], h->chunk_first + k) < 0;
    if (bad)
        return tg_err(-EIO, "%s: batch %llu: its chunk's rows are out of range", name,
                      (unsigned long long)batch);
    return 0;
}

void tg_pack_rec_nodes(const void *rec, const uint32_t *nodes, uint64_t *row_node)
{
    const tg_pack_rec_t *h = rec;
    tg_pack_rec_view_t v = tg_pack_rec_view(rec);
    for (uint32_t i = 0; i < h->n_cache; i++)
        row_node[v.cache_row[i]] = nodes[v.cache_pos[i]];
    for (uint32_t k = 0; k < h->n_chunk; k++)
        row_node[h->chunk_first + k] = nodes[v.chunk_pos[k]];
}

/* ---------------------------------------------------------------- the map file */

int tg_pack_map_open(tg_pack_map_t *m, const char *dir, const char *what, uint64_t count,
                     tg_budget_t *budget)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    uint64_t bytes = (count + 1) * sizeof *m->off;
    int rc = budget ? tg_budget_reserve(budget, bytes, "a map file's record offsets") : 0;
    if (rc < 0) return rc;
    m->budget = budget;
    m->reserved = budget ? bytes : 0;
    m->count = count;
    if (!(m->off = malloc(bytes))) {
        tg_pack_map_close(m);
        return tg_err(-ENOMEM, "out of memory for %llu map records", (unsigned long long)count);
    }
    m->off[0] = 0;
    if ((m->fd = tg_tmpfile_open(dir, what, 0, m->name, sizeof m->name)) < 0) {
        rc = m->fd;
        tg_pack_map_close(m);
        return rc;
    }
    return 0;
}

int tg_pack_map_append(tg_pack_map_t *m, const void *rec)
{
    if (m->n >= m->count)
        return tg_err(-ENOSPC, "%s: room for %llu records", m->name, (unsigned long long)m->count);
    uint64_t nb = tg_pack_rec_bytes(rec);
    int rc = tg_pwrite_full(m->fd, rec, nb, m->off[m->n], m->name);
    if (rc < 0) return rc;
    m->off[m->n + 1] = m->off[m->n] + nb;
    m->n++;
    m->rec_max = TG_MAX(m->rec_max, nb);
    return 0;
}

int tg_pack_map_read(const tg_pack_map_t *m, uint64_t j, void *buf, uint64_t cap, uint64_t *nbytes)
{
    *nbytes = 0;
    if (j >= m->n)
        return tg_err(-EIO, "%s: no record %llu (%llu written)", m->name, (unsigned long long)j,
                      (unsigned long long)m->n);
    uint64_t nb = m->off[j + 1] - m->off[j];
    if (nb > cap)
        return tg_err(-EIO, "%s: record %llu is %llu bytes, more than planned", m->name,
                      (unsigned long long)j, (unsigned long long)nb);
    int rc = tg_pread_full(m->fd, buf, nb, m->off[j], m->name);
    if (rc == 0) *nbytes = nb;
    return rc;
}

void tg_pack_map_close(tg_pack_map_t *m)
{
    if (m->fd >= 0) close(m->fd);
    free(m->off);
    if (m->reserved) tg_budget_release(m->budget, m->reserved);
    memset(m, 0, sizeof *m);
    m->fd = -1;
}

/* ---------------------------------------------------------------- written from a layout */

void tg_pack_geom(tg_pack_geom_t *g, const struct tg_layout *L, size_t row_bytes)
{
    tg_layout_summary_t sm;
    tg_layout_summary(L, &sm);
    *g = (tg_pack_geom_t){.hot = sm.hot_rows,
                          .cache_rows = sm.cache_file_bytes / row_bytes,
                          .chunk_rows = sm.chunk_file_bytes / row_bytes,
                          .row_bytes = row_bytes};
    g->total_rows = g->hot + g->cache_rows + g->chunk_rows;
}

int tg_pack_map_write(tg_pack_map_t *m, const struct tg_layout *L, const tg_pack_geom_t *g,
                      const uint32_t *ids, const uint64_t *off, uint64_t count, uint64_t *row_node,
                      tg_budget_t *budget)
{
    uint64_t longest = 0;
    for (uint64_t j = 0; j < count; j++)
        longest = TG_MAX(longest, off[j + 1] - off[j]);
    uint64_t ib = tg_pack_rec_bytes_max(longest);
    int rc = budget ? tg_budget_reserve(budget, ib, "a batch's map record") : 0;
    if (rc < 0) return rc;
    tg_layout_loc_t loc = {0};
    uint64_t *rec = malloc(ib + 8);
    if (!rec) rc = tg_err(-ENOMEM, "%s: out of memory for a record", m->name);
    if (rc == 0) rc = tg_layout_loc_init(&loc, longest, budget);
    for (uint64_t j = 0; j < count && rc == 0; j++) {
        if ((rc = tg_layout_locate(L, (uint32_t)j, ids + off[j], off[j + 1] - off[j], &loc)) < 0)
            break;
        tg_pack_rec_fill(rec, &loc, g->hot, g->hot + g->cache_rows, g->row_bytes);
        if (row_node) tg_pack_rec_nodes(rec, ids + off[j], row_node);
        rc = tg_pack_map_append(m, rec);
    }
    tg_layout_loc_free(&loc);
    free(rec);
    if (budget) tg_budget_release(budget, ib);
    return rc;
}

/* The packing's targets: the layout's, with the cache and chunk offsets moved to their places in
 * the one packed file. */
typedef struct {
    const tg_layout_t *L;
    uint64_t base[3];
} targets_ctx_t;

static int64_t pack_targets(void *ctx, uint32_t p, tg_pack_target_t *dst, size_t cap)
{
    targets_ctx_t *c = ctx;
    uint64_t n = 0;
    int rc = tg_layout_targets(c->L, p, dst, cap, &n);
    if (rc < 0) return rc;
    for (uint64_t i = 0; i < n; i++)
        dst[i].off += c->base[dst[i].out];
    return (int64_t)n;
}

int tg_pack_file(const tg_pack_file_opts_t *o, tg_pack_stats_t *st)
{
    const tg_pack_geom_t *g = o->geom;
    const uint64_t row = g->row_bytes, bytes = g->total_rows * row;
    if (ftruncate(o->fd, (off_t)bytes) < 0)
        return tg_err(-errno, "%s: cannot size it to %llu bytes: %s", o->name,
                      (unsigned long long)bytes, strerror(errno));
    tg_layout_summary_t sm;
    tg_layout_summary(o->L, &sm);
    uint64_t np = sm.num_partitions, pb = np * sizeof(tg_pack_part_t);
    int rc = o->budget ? tg_budget_reserve(o->budget, pb, "packing partitions") : 0;
    if (rc < 0) return rc;
    tg_pack_part_t *parts = calloc(np + 1, sizeof *parts);
    if (!parts)
        rc = tg_err(-ENOMEM, "%s: out of memory for %llu partitions", o->name,
                    (unsigned long long)np);
    for (uint64_t p = 0; p < np && rc == 0; p++) {
        uint32_t lo, hi;
        uint64_t nt;
        if ((rc = tg_layout_partition(o->L, p, &lo, &hi, &nt)) == 0)
            parts[p] = (tg_pack_part_t){.lo = lo, .hi = hi, .ntargets = nt};
    }
    static unsigned char none;
    tg_pack_out_t outs[3] = {
        {.mem = o->hot ? o->hot : (void *)&none,
         .size = o->hot ? g->hot * row : 0,
         .fd = -1,
         .name = "the hot rows"},
        {.fd = o->fd, .name = o->name},
        {.fd = o->fd, .name = o->name},
    };
    targets_ctx_t tc = {.L = o->L, .base = {0, g->hot * row, (g->hot + g->cache_rows) * row}};
    tg_pack_opts_t po = {.feat = o->feat,
                         .num_nodes = o->num_nodes,
                         .row_bytes = row,
                         .parts = parts,
                         .nparts = (uint32_t)np,
                         .targets = pack_targets,
                         .targets_ctx = &tc,
                         .outs = outs,
                         .nouts = 3,
                         .threads = o->threads,
                         .budget = o->budget,
                         .abort = o->abort,
                         .progress = o->progress,
                         .io_stats = o->io_stats,
                         .rowcrc = o->rowcrc};
    if (rc == 0) rc = tg_pack(&po, st);
    free(parts);
    if (o->budget) tg_budget_release(o->budget, pb);
    return rc;
}

/* ---------------------------------------------------------------- the hot rows' tier */

typedef struct {
    const unsigned char *rows;
    uint64_t n;
} hot_t;

static const void *hot_find(const tg_tier_t *t, uint64_t row)
{
    const hot_t *h = t->impl;
    return row < h->n ? h->rows + row * t->row_bytes : NULL;
}

static void hot_destroy(tg_tier_t *t)
{
    free(t);
}

static const tg_tier_i hot_iface = {.find = hot_find, .destroy = hot_destroy};

int tg_pack_hot_tier_create(tg_tier_t **out, const char *name, const void *rows, size_t row_bytes,
                            uint64_t n)
{
    *out = NULL;
    tg_tier_t *t = calloc(1, sizeof *t + sizeof(hot_t));
    if (!t) return tg_err(-ENOMEM, "out of memory for a tier");
    hot_t *h = (hot_t *)(t + 1);
    *h = (hot_t){.rows = rows, .n = n};
    t->iface = &hot_iface;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "hot");
    t->row_bytes = row_bytes;
    t->impl = h;
    *out = t;
    return 0;
}

/* Rows per submission of tg_pack_hot_read. */
#define HOT_READ_ROWS 4096u

int tg_pack_hot_read(tg_io_file_t *feat, const uint32_t *nodes, uint64_t n, size_t row_bytes,
                     void *rows, tg_budget_t *budget, tg_io_stats_t *stats,
                     const struct tg_rowcrc *rowcrc)
{
    if (n > UINT32_MAX)
        return tg_err(-EINVAL, "%s: %llu hot rows (at most 2^32 - 1)", tg_io_file_path(feat),
                      (unsigned long long)n);
    uint64_t order_bytes = n * sizeof(uint64_t);
    int rc = budget ? tg_budget_reserve(budget, order_bytes, "reading the hot rows") : 0;
    if (rc < 0) return rc;
    uint64_t *order = malloc(order_bytes + 1); /* node << 32 | place */
    tg_io_req_t *req = malloc(HOT_READ_ROWS * sizeof *req);
    tg_io_opts_t qo = {.budget = budget, .stats = stats};
    tg_io_t *q = NULL;
    rc = order && req
             ? tg_io_create(&q, &qo)
             : tg_err(-ENOMEM, "out of memory for reading %llu hot rows", (unsigned long long)n);
    if (rc == 0) {
        for (uint64_t k = 0; k < n; k++)
            order[k] = (uint64_t)nodes[k] << 32 | k;
        qsort(order, n, sizeof *order, tg_cmp_u64);
    }
    for (uint64_t k0 = 0; rc == 0 && k0 < n; k0 += HOT_READ_ROWS) {
        size_t m = (size_t)TG_MIN((uint64_t)HOT_READ_ROWS, n - k0);
        for (size_t i = 0; i < m; i++) {
            uint64_t v = order[k0 + i] >> 32, place = order[k0 + i] & UINT32_MAX;
            req[i] = (tg_io_req_t){.file = feat,
                                   .off = v * row_bytes,
                                   .len = row_bytes,
                                   .dst = (char *)rows + place * row_bytes};
        }
        rc = tg_io_read_batch(q, req, m);
        for (size_t i = 0; rc == 0 && rowcrc && i < m; i++)
            rc = tg_rowcrc_check(rowcrc, order[k0 + i] >> 32, req[i].dst, tg_io_file_path(feat),
                                 req[i].off);
    }
    tg_io_destroy(q);
    free(req);
    free(order);
    if (budget) tg_budget_release(budget, order_bytes);
    return rc;
}

/* ---------------------------------------------------------------- the reader */

struct tg_pack_reader {
    tg_io_file_t *pf;
    tg_extract_t *ex;
    char who[32];
    const char *name, *map_name;
    uint64_t total_rows, hot_rows;
    uint64_t *rows; /* the batch's row list */
    uint64_t rows_cap;
    tg_budget_t *budget;
};

/* The extraction's sort scratch per row while it reads (keys, their copy, the unique starts). */
#define READER_SCRATCH_PER_ROW (2 * sizeof(uint64_t) + sizeof(uint32_t))

uint64_t tg_pack_reader_bytes(const tg_extract_plan_t *pl, uint64_t max_rows)
{
    return tg_extract_plan_bytes(pl) + max_rows * (sizeof(uint64_t) + READER_SCRATCH_PER_ROW);
}

int tg_pack_reader_open(tg_pack_reader_t **out, const tg_pack_reader_opts_t *o)
{
    *out = NULL;
    if (o->plan->featbuf)
        return tg_err(-EINVAL, "%s: a packed file is read without a feature buffer",
                      o->who ? o->who : "pack");
    /* store/extract addresses rows by 32-bit ids */
    if (o->rows >= ((uint64_t)1 << 32))
        return tg_err(-EINVAL, "%s: the packed file %s has %llu rows; at most 2^32 - 1 are read",
                      o->who ? o->who : "pack", o->name, (unsigned long long)o->rows);
    tg_pack_reader_t *rd = calloc(1, sizeof *rd);
    if (!rd) return tg_err(-ENOMEM, "out of memory for a packed file's reader");
    snprintf(rd->who, sizeof rd->who, "%s", o->who ? o->who : "pack");
    rd->name = o->name;
    rd->map_name = o->map_name;
    rd->total_rows = o->rows;
    rd->hot_rows = o->hot_rows;
    rd->budget = o->budget;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", o->fd);
    int rc = tg_io_file_open(&rd->pf, path, 0);
    if (rc < 0) {
        tg_pack_reader_close(rd);
        return tg_err_prefix(rc, "%s: the packed file %s", rd->who, o->name);
    }
    tg_extract_plan_t pl = *o->plan;
    pl.num_nodes = o->rows;
    tg_tier_t *const tiers[1] = {o->hot};
    tg_extract_opts_t eo = {.plan = &pl,
                            .feat = rd->pf,
                            .normalize = o->normalize,
                            .budget = o->budget,
                            .stats = o->stats,
                            .tiers = tiers,
                            .ntiers = o->hot ? 1 : 0,
                            .who = rd->who,
                            .rowcrc = o->rowcrc};
    if ((rc = tg_extract_create(&rd->ex, &eo)) < 0) {
        tg_pack_reader_close(rd);
        return rc;
    }
    *out = rd;
    return 0;
}

/* Room for a row list of n rows, its growth reserved first. */
static int rows_reserve(tg_pack_reader_t *rd, uint64_t n)
{
    if (n <= rd->rows_cap) return 0;
    uint64_t add = (n - rd->rows_cap) * sizeof *rd->rows;
    int rc = rd->budget ? tg_budget_reserve(rd->budget, add, "a packed batch's row list") : 0;
    if (rc < 0) return rc;
    uint64_t *p = realloc(rd->rows, n * sizeof *p);
    if (!p) {
        if (rd->budget) tg_budget_release(rd->budget, add);
        return tg_err(-ENOMEM, "%s: out of memory for a row list of %llu rows", rd->who,
                      (unsigned long long)n);
    }
    rd->rows = p;
    rd->rows_cap = n;
    return 0;
}

int tg_pack_reader_read(tg_pack_reader_t *rd, uint64_t batch, const void *rec, uint64_t nbytes,
                        uint32_t n, float *X, const tg_extract_hooks_t *hooks)
{
    int rc = rows_reserve(rd, n);
    if (rc == 0)
        rc = tg_pack_rec_rows(rec, nbytes, n, rd->hot_rows, rd->total_rows, rd->rows, rd->map_name,
                              batch);
    if (rc < 0) return rc;
    tg_extract_batch_t b = {.id = batch, .nodes = rd->rows, .n = n, .X = X};
    rc = tg_extract_group(tg_extract_worker(rd->ex, 0), &b, 1, hooks);
    if (rc < 0 && rc != -ECANCELED)
        return tg_err_prefix(rc, "%s: batch %llu: reading the packed file %s", rd->who,
                             (unsigned long long)batch, rd->name);
    return rc;
}

int tg_pack_reader_tier_stats(tg_pack_reader_t *rd, tg_tier_stats_t *out, int max, int reset)
{
    return tg_extract_tier_stats(rd->ex, out, max, reset);
}

void tg_pack_reader_close(tg_pack_reader_t *rd)
{
    if (!rd) return;
    tg_extract_destroy(rd->ex);
    tg_io_file_close(rd->pf);
    if (rd->rows_cap && rd->budget) tg_budget_release(rd->budget, rd->rows_cap * sizeof *rd->rows);
    free(rd->rows);
    free(rd);
}

/* ---------------------------------------------------------------- a packed set */

void tg_pack_set_init(tg_pack_set_t *ps)
{
    memset(ps, 0, sizeof *ps);
    ps->map.fd = ps->fd = -1;
}

/* The map file of the set's batches and, under --verify-reads, the node of every packed row
 * (the hot rows', then each record's) and the checksums in that order. */
static int set_write_maps(tg_pack_set_t *ps, const tg_pack_set_opts_t *o)
{
    char what[64];
    snprintf(what, sizeof what, "%s-map", o->who);
    int rc = tg_pack_map_open(&ps->map, o->dir, what, o->count, o->budget);
    if (rc == 0 && o->rowcrc) {
        uint64_t bytes = ps->geom.total_rows * sizeof *ps->row_node;
        snprintf(what, sizeof what, "%s: the packed rows' nodes", o->who);
        if (o->budget && (rc = tg_budget_reserve(o->budget, bytes, what)) < 0) return rc;
        ps->row_node_bytes = o->budget ? bytes : 0;
        if (!(ps->row_node = calloc(ps->geom.total_rows + 1, sizeof *ps->row_node)))
            return tg_err(-ENOMEM, "%s: out of memory for the packed rows' nodes", o->who);
        for (uint64_t k = 0; k < ps->geom.hot; k++)
            ps->row_node[k] = o->hot_nodes[k];
    }
    if (rc == 0)
        rc = tg_pack_map_write(&ps->map, o->L, &ps->geom, o->ids, o->off, o->count, ps->row_node,
                               o->budget);
    if (rc == 0 && ps->row_node)
        rc = tg_rowcrc_permuted(&ps->crc, o->rowcrc, ps->row_node, ps->geom.total_rows, o->budget);
    return rc;
}

/* The packed file: the layout's rows (the hot rows' range a hole, the rows in RAM too). */
static int set_pack(tg_pack_set_t *ps, const tg_pack_set_opts_t *o)
{
    char what[64];
    snprintf(what, sizeof what, "%s-pack", o->who);
    if ((ps->fd = tg_tmpfile_open(o->dir, what, 0, ps->name, sizeof ps->name)) < 0) return ps->fd;
    tg_pack_file_opts_t po = {.L = o->L,
                              .geom = &ps->geom,
                              .feat = o->feat,
                              .num_nodes = o->num_nodes,
                              .fd = ps->fd,
                              .name = ps->name,
                              .hot = o->hot,
                              .threads = o->threads,
                              .budget = o->budget,
                              .abort = o->abort,
                              .progress = o->progress,
                              .io_stats = o->io_stats,
                              .rowcrc = o->rowcrc};
    return tg_pack_file(&po, &ps->pst);
}

int tg_pack_set_write(tg_pack_set_t *ps, const tg_pack_set_opts_t *o)
{
    ps->budget = o->budget;
    tg_pack_geom(&ps->geom, o->L, o->row_bytes);
    double t0 = tg_now();
    int rc = set_write_maps(ps, o);
    double t1 = tg_now();
    ps->map_s = t1 - t0;
    if (rc == 0) {
        rc = set_pack(ps, o);
        ps->pack_s = tg_now() - t1;
    }
    return rc;
}

int tg_pack_set_reader_open(const tg_pack_set_t *ps, tg_pack_reader_t **out,
                            const tg_pack_reader_opts_t *o)
{
    tg_pack_reader_opts_t ro = *o;
    ro.fd = ps->fd;
    ro.name = ps->name;
    ro.map_name = ps->map.name;
    ro.rows = ps->geom.total_rows;
    ro.hot_rows = ps->geom.hot;
    ro.rowcrc = ps->crc;
    return tg_pack_reader_open(out, &ro);
}

void tg_pack_set_close(tg_pack_set_t *ps)
{
    if (ps->fd >= 0) close(ps->fd);
    tg_pack_map_close(&ps->map);
    tg_rowcrc_close(ps->crc);
    free(ps->row_node);
    if (ps->budget && ps->row_node_bytes) tg_budget_release(ps->budget, ps->row_node_bytes);
    tg_pack_set_init(ps);
}
