/* Ginex's static neighbour cache (tiergnn/ncache.h): selection, the derived file, loading. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/ncache.h"
#include "tiergnn/outdeg.h"

#define HDR_MAGIC "TGNCACHE"
#define HDR_BYTES 64u
#define MAX_ARRAY ((uint64_t)UINT32_MAX) /* entries: every address stays below TG_NCACHE_MISS */
#define READ_BYTES ((size_t)4 << 20)     /* a piece of indices.bin */
#define IO_DEPTH 4u                      /* 4 reads of 1 MiB in flight: sequential bandwidth */
#define IO_MAX_READ ((size_t)1 << 20)
#define IO_BYTES (IO_DEPTH * IO_MAX_READ + ((uint64_t)64 << 10)) /* staging + bookkeeping */
#define OUT_ENTRIES ((size_t)256 << 10)                          /* 1 MiB of array per append */
#define WRITE_BUF ((size_t)1 << 20)
/* What a build holds beside its node-sized arrays. */
#define BUILD_BUFFERS (READ_BYTES + IO_BYTES + 2 * WRITE_BUF + OUT_ENTRIES * 4)
#define PROGRESS_BYTES ((uint64_t)64 << 20) /* indices.bin larger than this: a progress bar */

/* The payload's first 64 bytes (native byte order, like every derived payload). */
typedef struct {
    char magic[8];
    uint32_t version, hdr_bytes;
    uint64_t num_nodes, num_edges, bytes, nodes, edges, array_len;
} nc_hdr_t;
_Static_assert(sizeof(nc_hdr_t) == HDR_BYTES, "the payload header is 64 bytes");

struct tg_ncache {
    nc_hdr_t h;
    uint32_t *addr;  /* (num_nodes) address_table */
    uint32_t *array; /* (array_len) cache_array */
    uint64_t reserved;
    tg_budget_t *budget;
    int built, in_ram;
    _Atomic uint64_t lookups, hits, entries;
};

static void params_of(uint64_t bytes, char *buf, size_t len)
{
    snprintf(buf, len, "bytes=%llu,v=%d", (unsigned long long)bytes, TG_NCACHE_VERSION);
}

uint64_t tg_ncache_min_bytes(const tg_dataset_t *ds)
{
    return ds->meta.num_nodes * sizeof(uint32_t);
}

/* A node whose list can be cached at all: it has one, and its entry fits the array. */
static inline int cacheable(uint64_t deg)
{
    return deg > 0 && deg < MAX_ARRAY;
}

uint64_t tg_ncache_full_bytes(uint64_t num_nodes, const uint64_t *indptr)
{
    uint64_t entries = 0;
    for (uint64_t v = 0; v < num_nodes; v++) {
        uint64_t d = indptr[v + 1] - indptr[v];
        if (cacheable(d)) entries += 1 + d;
    }
    return (num_nodes + entries) * sizeof(uint32_t);
}

/* The sizes the cache accepts (see the header): node ids in 32 bits, the address table, and an
 * array of at most 2^32 - 1 entries when the graph could fill more. */
static int check_size(const tg_dataset_t *ds, uint64_t bytes)
{
    uint64_t N = ds->meta.num_nodes, E = ds->meta.num_edges, min = tg_ncache_min_bytes(ds);
    char a[32], b[32];
    if (N > UINT32_MAX)
        return tg_err(-EINVAL,
                      "neighbour cache: %llu nodes, but its entries are 32-bit node ids (at most "
                      "%u nodes)",
                      (unsigned long long)N, UINT32_MAX);
    if (bytes < min)
        return tg_err(-EINVAL,
                      "neighbour cache of %llu bytes (%s): less than its address table alone "
                      "(%llu nodes x 4 = %llu bytes, %s)",
                      (unsigned long long)bytes, tg_fmt_bytes(bytes, a, sizeof a),
                      (unsigned long long)N, (unsigned long long)min,
                      tg_fmt_bytes(min, b, sizeof b));
    if ((bytes - min) / 4 > MAX_ARRAY && N + E > MAX_ARRAY)
        return tg_err(-EINVAL,
                      "neighbour cache of %llu bytes: its array would pass 2^32 - 1 entries, "
                      "which its 32-bit addresses cannot reach; at most %llu bytes on this graph",
                      (unsigned long long)bytes, (unsigned long long)(min + MAX_ARRAY * 4));
    return 0;
}

/* ---------------------------------------------------------------- selection */

typedef struct {
    const tg_dataset_t *ds;
    const char *root;
    tg_budget_t *budget;
    tg_io_stats_t *stats;
    uint64_t N, E, bytes, held; /* held: reserved against budget */
    uint64_t *indptr;           /* (N + 1) */
    uint32_t *addr;             /* (N) out-degrees while ranking, then the address table */
    uint64_t *sel;              /* (N / 64 + 1) bitmap of the nodes cached */
    nc_hdr_t h;
} build_t;

static _Thread_local const build_t *rank_of; /* qsort's context */

/* By out/in descending (exact: both degrees are below 2^32, so the products fit 64 bits), then
 * out-degree descending, then id ascending. */
static int cmp_rank(const void *pa, const void *pb)
{
    uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
    const build_t *b = rank_of;
    uint64_t ox = b->addr[x], oy = b->addr[y];
    uint64_t ix = b->indptr[x + 1] - b->indptr[x], iy = b->indptr[y + 1] - b->indptr[y];
    uint64_t l = ox * iy, r = oy * ix;
    if (l != r) return l > r ? -1 : 1;
    if (ox != oy) return ox > oy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* b->sel and b->h: the nodes in rank order while they fit (a node that does not fit is skipped;
 * smaller ones after it are still taken). Then b->addr becomes the address table. */
static int select_nodes(build_t *b)
{
    tg_outdeg_t *od = NULL;
    int rc = tg_outdeg_open(&od, b->ds, b->root, b->budget);
    if (rc == 0) rc = tg_outdeg_counts(od, 0, b->N, b->addr);
    tg_outdeg_close(od);
    if (rc < 0) return tg_err_prefix(rc, "neighbour cache: out-degrees");
    uint64_t n = 0;
    for (uint64_t v = 0; v < b->N; v++)
        n += cacheable(b->indptr[v + 1] - b->indptr[v]);
    uint32_t *ids = malloc(n ? n * sizeof *ids : 1);
    if (!ids) return tg_err(-ENOMEM, "neighbour cache: out of memory for the ranking");
    n = 0;
    for (uint64_t v = 0; v < b->N; v++)
        if (cacheable(b->indptr[v + 1] - b->indptr[v])) ids[n++] = (uint32_t)v;
    rank_of = b;
    qsort(ids, (size_t)n, sizeof *ids, cmp_rank);
    uint64_t cap = TG_MIN((b->bytes - b->N * 4) / 4, MAX_ARRAY), used = 0;
    for (uint64_t k = 0; k < n && cap - used >= 2; k++) {
        uint32_t v = ids[k];
        uint64_t deg = b->indptr[v + 1] - b->indptr[v];
        if (1 + deg > cap - used) continue;
        b->sel[v / 64] |= (uint64_t)1 << (v % 64);
        used += 1 + deg;
        b->h.nodes++;
        b->h.edges += deg;
    }
    free(ids);
    b->h.array_len = used;
    uint64_t at = 0;
    for (uint64_t v = 0; v < b->N; v++)
        if (b->sel[v / 64] >> (v % 64) & 1) {
            b->addr[v] = (uint32_t)at;
            at += 1 + b->indptr[v + 1] - b->indptr[v];
        } else {
            b->addr[v] = TG_NCACHE_MISS;
        }
    return 0;
}

/* ---------------------------------------------------------------- streaming the lists */

/* Where the array goes: the derived writer (through buf) or RAM. */
typedef struct {
    tg_derived_writer_t *w;
    uint32_t *ram;
    uint32_t *buf; /* (OUT_ENTRIES) */
    size_t n;
    uint64_t at; /* entries put */
} sink_t;

static int sink_flush(sink_t *s)
{
    int rc = s->w && s->n ? tg_derived_append(s->w, s->buf, s->n * sizeof *s->buf) : 0;
    s->n = 0;
    return rc;
}

static int sink_put(sink_t *s, const uint32_t *v, size_t n)
{
    if (s->ram) {
        memcpy(s->ram + s->at, v, n * sizeof *v);
        s->at += n;
        return 0;
    }
    while (n) {
        size_t k = TG_MIN(n, OUT_ENTRIES - s->n);
        memcpy(s->buf + s->n, v, k * sizeof *v);
        s->n += k, s->at += k, v += k, n -= k;
        int rc = s->n == OUT_ENTRIES ? sink_flush(s) : 0;
        if (rc < 0) return rc;
    }
    return 0;
}

/* Entries [from, to) of the piece in raw (first entry = position base) into the sink as u32,
 * each checked against the node count. */
static int put_entries(const build_t *b, sink_t *s, const void *raw, size_t esz, uint64_t base,
                       uint64_t from, uint64_t to)
{
    uint32_t tmp[1024];
    while (from < to) {
        size_t k = (size_t)TG_MIN(to - from, (uint64_t)1024);
        for (size_t i = 0; i < k; i++) {
            uint64_t j = from - base + i;
            uint64_t u = esz == 4 ? ((const uint32_t *)raw)[j] : ((const uint64_t *)raw)[j];
            if (u >= b->N)
                return tg_err(-EINVAL,
                              "indices.bin: entry at offset %llu is %llu, expected < %llu nodes",
                              (unsigned long long)((from + i) * esz), (unsigned long long)u,
                              (unsigned long long)b->N);
            tmp[i] = (uint32_t)u;
        }
        int rc = sink_put(s, tmp, k);
        if (rc < 0) return rc;
        from += k;
    }
    return 0;
}

/* The array: for each cached node in id order its count and its list, read from indices.bin in
 * pieces of READ_BYTES in file order (each piece at most once, none that holds no cached list). */
static int stream_lists(const build_t *b, sink_t *s)
{
    char path[4096];
    tg_dataset_path(b->ds, TG_FILE_INDICES, path, sizeof path);
    size_t esz = tg_index_dtype_size(b->ds->meta.index_dtype), per = READ_BYTES / esz;
    uint64_t size = b->E * esz, loaded = UINT64_MAX;
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    void *buf = malloc(READ_BYTES);
    tg_io_opts_t o = {.depth = IO_DEPTH, .max_read_bytes = IO_MAX_READ, .stats = b->stats};
    int rc = buf ? 0 : tg_err(-ENOMEM, "neighbour cache: out of memory for the read buffer");
    if (rc == 0) rc = tg_io_file_open(&f, path, 0);
    if (rc == 0) rc = tg_io_create(&io, &o);
    tg_progress_t pg;
    int bar = size >= PROGRESS_BYTES;
    if (bar) tg_progress_begin(&pg, "neighbour cache", b->N, "nodes");
    for (uint64_t v = 0; rc == 0 && v < b->N; v++) {
        if (bar && v % 65536 == 0) tg_progress_update(&pg, v, NULL);
        if (!(b->sel[v / 64] >> (v % 64) & 1)) continue;
        uint64_t p = b->indptr[v], end = b->indptr[v + 1];
        uint32_t cnt = (uint32_t)(end - p);
        rc = sink_put(s, &cnt, 1);
        while (rc == 0 && p < end) {
            uint64_t k = p / per, stop = TG_MIN(end, (k + 1) * per);
            if (k != loaded) {
                uint64_t off = k * per * esz;
                if ((rc = tg_io_read(io, f, off, (size_t)TG_MIN(READ_BYTES, size - off), buf)) < 0)
                    break;
                loaded = k;
            }
            rc = put_entries(b, s, buf, esz, k * per, p, stop);
            p = stop;
        }
    }
    if (bar) tg_progress_end(&pg);
    if (rc == 0) rc = sink_flush(s);
    if (rc == 0 && s->at != b->h.array_len)
        rc = tg_err(-EIO, "neighbour cache: wrote %llu array entries, expected %llu",
                    (unsigned long long)s->at, (unsigned long long)b->h.array_len);
    tg_io_destroy(io);
    tg_io_file_close(f);
    free(buf);
    return rc < 0 ? tg_err_prefix(rc, "building the neighbour cache") : 0;
}

/* ---------------------------------------------------------------- building */

static void build_free(build_t *b)
{
    free(b->indptr);
    free(b->addr);
    free(b->sel);
    if (b->budget && b->held) tg_budget_release(b->budget, b->held);
    b->indptr = NULL, b->addr = NULL, b->sel = NULL, b->held = 0;
}

/* indptr, the ranking's arrays and the selection: everything up to streaming the lists. */
static int build_begin(build_t *b, const tg_dataset_t *ds, const char *root, uint64_t bytes,
                       tg_budget_t *budget, tg_io_stats_t *stats)
{
    memset(b, 0, sizeof *b);
    *b = (build_t){.ds = ds,
                   .root = root,
                   .budget = budget,
                   .stats = stats,
                   .N = ds->meta.num_nodes,
                   .E = ds->meta.num_edges,
                   .bytes = bytes};
    memcpy(b->h.magic, HDR_MAGIC, 8);
    b->h.version = TG_NCACHE_VERSION;
    b->h.hdr_bytes = HDR_BYTES;
    b->h.num_nodes = b->N;
    b->h.num_edges = b->E;
    b->h.bytes = bytes;
    /* indptr, out-degrees / addresses, the ranking's ids, the bitmap, the buffers */
    uint64_t held = (b->N + 1) * 8 + b->N * 8 + (b->N / 64 + 1) * 8 + BUILD_BUFFERS;
    int rc = budget ? tg_budget_reserve(budget, held, "neighbour cache build") : 0;
    if (rc < 0) return rc;
    b->held = budget ? held : 0;
    if ((rc = tg_dataset_load_indptr(ds, &b->indptr)) < 0) goto err;
    b->addr = malloc(b->N ? b->N * sizeof *b->addr : 1);
    b->sel = calloc(b->N / 64 + 1, sizeof *b->sel);
    if (!b->addr || !b->sel) {
        rc = tg_err(-ENOMEM, "neighbour cache: out of memory for %llu nodes' degrees",
                    (unsigned long long)b->N);
        goto err;
    }
    if ((rc = select_nodes(b)) < 0) goto err;
    return 0;
err:
    build_free(b);
    return rc;
}

static void log_built(const nc_hdr_t *h, const char *where, double s)
{
    char a[32];
    tg_log_info("neighbour cache: built %s: %llu nodes, %llu in-neighbour entries (%.1f%% of "
                "edges), %s, in %.2f s",
                where, (unsigned long long)h->nodes, (unsigned long long)h->edges,
                h->num_edges ? 100.0 * (double)h->edges / (double)h->num_edges : 0.0,
                tg_fmt_bytes((h->num_nodes + h->array_len) * 4, a, sizeof a), s);
}

/* The derived file: 1 built, 2 the directory cannot be written (logged), < 0 an error. */
static int build_file(const tg_dataset_t *ds, const char *root, uint64_t bytes, tg_budget_t *budget,
                      tg_io_stats_t *stats)
{
    char params[64];
    params_of(bytes, params, sizeof params);
    double t0 = tg_now();
    tg_derived_writer_t *w = NULL;
    int rc = tg_derived_create(&w, ds, root, TG_NCACHE_KIND, params, WRITE_BUF);
    if (rc < 0) {
        tg_log_info("neighbour cache: cannot write the derived file (%s); building it in RAM",
                    tg_errmsg());
        return 2;
    }
    build_t b;
    sink_t s = {.w = w};
    if ((rc = build_begin(&b, ds, root, bytes, budget, stats)) < 0) {
        tg_derived_abort(w);
        return rc;
    }
    if (!(s.buf = malloc(OUT_ENTRIES * sizeof *s.buf)))
        rc = tg_err(-ENOMEM, "neighbour cache: out of memory");
    if (rc == 0 && (rc = tg_derived_append(w, &b.h, sizeof b.h)) == 0 &&
        (rc = tg_derived_append(w, b.addr, b.N * sizeof *b.addr)) == 0)
        rc = stream_lists(&b, &s);
    free(s.buf);
    nc_hdr_t h = b.h;
    build_free(&b);
    if (rc < 0) {
        tg_derived_abort(w);
        return rc;
    }
    if ((rc = tg_derived_commit(w)) < 0) return rc;
    char where[4200];
    tg_derived_path(ds, root, TG_NCACHE_KIND, params, where, sizeof where);
    log_built(&h, where, tg_now() - t0);
    return 1;
}

/* The derived file valid into *f (0), built first (1); 2 = none to be had (the directory
 * cannot be written or read: logged). */
static int find_or_build(const tg_dataset_t *ds, const char *root, uint64_t bytes,
                         tg_budget_t *budget, tg_io_stats_t *stats, int rebuild,
                         tg_derived_file_t **f)
{
    char params[64];
    params_of(bytes, params, sizeof params);
    int rc = rebuild ? -ESTALE : tg_derived_open(f, ds, root, TG_NCACHE_KIND, params, 0);
    if (rc == 0 || rc == -EINVAL) return rc;
    if (rc != -ENOENT && rc != -ESTALE) {
        tg_log_info("neighbour cache: cannot read the derived file (%s); building it in RAM",
                    tg_errmsg());
        return 2;
    }
    if (rc == -ESTALE && !rebuild) tg_log_info("neighbour cache: %s", tg_errmsg());
    if ((rc = build_file(ds, root, bytes, budget, stats)) != 1) return rc;
    rc = tg_derived_open(f, ds, root, TG_NCACHE_KIND, params, 0);
    return rc < 0 ? rc : 1;
}

int tg_ncache_prepare(const tg_dataset_t *ds, const char *root, uint64_t bytes, tg_budget_t *budget,
                      tg_io_stats_t *stats)
{
    int rc = check_size(ds, bytes);
    if (rc < 0) return rc;
    tg_derived_file_t *f = NULL;
    rc = find_or_build(ds, root, bytes, budget, stats, 0, &f);
    tg_derived_close(f);
    return rc;
}

/* ---------------------------------------------------------------- the handle */

void tg_ncache_close(tg_ncache_t *nc)
{
    if (!nc) return;
    free(nc->addr);
    free(nc->array);
    if (nc->budget && nc->reserved) tg_budget_release(nc->budget, nc->reserved);
    free(nc);
}

/* Reserves and allocates the arrays for nc->h. */
static int nc_alloc(tg_ncache_t *nc, tg_budget_t *budget, int with_addr)
{
    uint64_t N = nc->h.num_nodes, L = nc->h.array_len, mem = (N + L) * 4;
    int rc = budget ? tg_budget_reserve(budget, mem, "neighbour cache") : 0;
    if (rc < 0) return rc;
    nc->budget = budget;
    nc->reserved = budget ? mem : 0;
    if (with_addr) nc->addr = malloc(N ? N * 4 : 1);
    nc->array = malloc(L ? L * 4 : 1);
    if ((with_addr && !nc->addr) || !nc->array) {
        char a[32];
        return tg_err(-ENOMEM, "neighbour cache: out of memory for %s",
                      tg_fmt_bytes(mem, a, sizeof a));
    }
    return 0;
}

/* Builds the cache straight into nc (the derived directory cannot be written). */
static int build_ram(tg_ncache_t *nc, const tg_dataset_t *ds, const char *root, uint64_t bytes,
                     tg_budget_t *budget, tg_io_stats_t *stats)
{
    double t0 = tg_now();
    build_t b;
    int rc = build_begin(&b, ds, root, bytes, budget, stats);
    if (rc < 0) return rc;
    nc->h = b.h;
    if ((rc = nc_alloc(nc, budget, 0)) == 0) {
        sink_t s = {.ram = nc->array};
        rc = stream_lists(&b, &s);
    }
    nc->addr = b.addr; /* the address table, handed over */
    b.addr = NULL;
    build_free(&b);
    if (rc == 0) log_built(&nc->h, "in RAM", tg_now() - t0);
    return rc;
}

/* Loads the derived file f into nc: header checks, the arrays through io/, the payload's CRC and
 * every address against the array. -EBADMSG: the file is damaged (the caller rebuilds it). */
static int load(tg_ncache_t *nc, const tg_derived_file_t *f, const tg_dataset_t *ds, uint64_t bytes,
                tg_budget_t *budget, tg_io_stats_t *stats)
{
    nc_hdr_t *h = &nc->h;
    uint64_t N = ds->meta.num_nodes, E = ds->meta.num_edges;
    int rc = f->payload_len >= HDR_BYTES ? tg_derived_read(f, h, HDR_BYTES, 0) : -EBADMSG;
    if (rc == 0 &&
        (memcmp(h->magic, HDR_MAGIC, 8) || h->version != TG_NCACHE_VERSION ||
         h->hdr_bytes != HDR_BYTES || h->num_nodes != N || h->num_edges != E || h->bytes != bytes ||
         h->array_len != h->nodes + h->edges || h->array_len > MAX_ARRAY || h->edges > E ||
         f->payload_len != HDR_BYTES + (N + h->array_len) * 4))
        rc = -EBADMSG;
    if (rc == -EBADMSG)
        return tg_err(rc,
                      "%s: not a neighbour cache of %llu nodes, %llu edges and %llu bytes "
                      "(header or size)",
                      f->path, (unsigned long long)N, (unsigned long long)E,
                      (unsigned long long)bytes);
    if (rc < 0 || (rc = nc_alloc(nc, budget, 1)) < 0) return rc;
    tg_io_file_t *file = NULL;
    tg_io_t *io = NULL;
    tg_io_opts_t o = {
        .depth = IO_DEPTH, .max_read_bytes = IO_MAX_READ, .budget = budget, .stats = stats};
    uint64_t L = h->array_len, off = f->payload_off + HDR_BYTES;
    if ((rc = tg_io_file_open(&file, f->path, 0)) == 0 && (rc = tg_io_create(&io, &o)) == 0 &&
        (rc = tg_io_read(io, file, off, (size_t)N * 4, nc->addr)) == 0)
        rc = tg_io_read(io, file, off + N * 4, (size_t)L * 4, nc->array);
    tg_io_destroy(io);
    tg_io_file_close(file);
    if (rc < 0) return tg_err_prefix(rc, "loading the neighbour cache");
    uint32_t crc = tg_crc32(0, h, HDR_BYTES);
    crc = tg_crc32(crc, nc->addr, (size_t)N * 4);
    crc = tg_crc32(crc, nc->array, (size_t)L * 4);
    if (crc != f->payload_crc)
        return tg_err(-EBADMSG, "%s: payload CRC-32 %08x, the header says %08x (damaged)", f->path,
                      crc, f->payload_crc);
    uint64_t nodes = 0;
    for (uint64_t v = 0; v < N; v++) {
        uint64_t a = nc->addr[v];
        if (a == TG_NCACHE_MISS) continue;
        if (a >= L || nc->array[a] > L - a - 1)
            return tg_err(-EBADMSG, "%s: node %llu's entry at %llu passes the array's %llu entries",
                          f->path, (unsigned long long)v, (unsigned long long)a,
                          (unsigned long long)L);
        nodes++;
    }
    if (nodes != h->nodes)
        return tg_err(-EBADMSG, "%s: %llu nodes cached, the header says %llu", f->path,
                      (unsigned long long)nodes, (unsigned long long)h->nodes);
    return 0;
}

/* Releases what a failed load or build left in nc, keeping nc itself. */
static void nc_reset(tg_ncache_t *nc)
{
    free(nc->addr);
    free(nc->array);
    if (nc->budget && nc->reserved) tg_budget_release(nc->budget, nc->reserved);
    memset(nc, 0, sizeof *nc);
}

int tg_ncache_open(tg_ncache_t **out, const tg_dataset_t *ds, const char *root, uint64_t bytes,
                   tg_budget_t *budget, tg_io_stats_t *stats)
{
    *out = NULL;
    int rc = check_size(ds, bytes);
    if (rc < 0) return rc;
    tg_ncache_t *nc = calloc(1, sizeof *nc);
    if (!nc) return tg_err(-ENOMEM, "neighbour cache: out of memory");
    for (int attempt = 0; attempt < 2; attempt++) {
        tg_derived_file_t *f = NULL;
        rc = find_or_build(ds, root, bytes, budget, stats, attempt, &f);
        if (rc == 2) {
            rc = build_ram(nc, ds, root, bytes, budget, stats);
            nc->built = nc->in_ram = 1;
            break;
        }
        if (rc < 0) break;
        int built = rc;
        rc = load(nc, f, ds, bytes, budget, stats);
        tg_derived_close(f);
        nc->built = built;
        /* a damaged file is rebuilt once; one that was just built and fails is an error */
        if (rc != -EBADMSG || built) break;
        tg_log_warn("neighbour cache: %s; rebuilding it", tg_errmsg());
        nc_reset(nc);
    }
    if (rc < 0) {
        tg_ncache_close(nc);
        return rc == -EBADMSG ? -EINVAL : rc;
    }
    *out = nc;
    return 0;
}

void tg_ncache_info(const tg_ncache_t *nc, tg_ncache_info_t *out)
{
    const nc_hdr_t *h = &nc->h;
    *out = (tg_ncache_info_t){.num_nodes = h->num_nodes,
                              .num_edges = h->num_edges,
                              .bytes = h->bytes,
                              .mem_bytes = (h->num_nodes + h->array_len) * 4,
                              .nodes = h->nodes,
                              .edges = h->edges,
                              .array_len = h->array_len,
                              .built = nc->built,
                              .in_ram = nc->in_ram};
}

const uint32_t *tg_ncache_find(const tg_ncache_t *nc, uint64_t v, uint64_t *deg)
{
    if (v >= nc->h.num_nodes || nc->addr[v] == TG_NCACHE_MISS) return NULL;
    const uint32_t *e = nc->array + nc->addr[v];
    *deg = e[0];
    return e + 1;
}

const uint32_t *tg_ncache_address_table(const tg_ncache_t *nc)
{
    return nc->addr;
}

const uint32_t *tg_ncache_array(const tg_ncache_t *nc)
{
    return nc->array;
}

void tg_ncache_count(tg_ncache_t *nc, uint64_t lookups, uint64_t hits, uint64_t entries)
{
    atomic_fetch_add_explicit(&nc->lookups, lookups, memory_order_relaxed);
    atomic_fetch_add_explicit(&nc->hits, hits, memory_order_relaxed);
    atomic_fetch_add_explicit(&nc->entries, entries, memory_order_relaxed);
}

void tg_ncache_stats(tg_ncache_t *nc, tg_ncache_stats_t *st, int reset)
{
    if (reset) {
        st->lookups = atomic_exchange(&nc->lookups, 0);
        st->hits = atomic_exchange(&nc->hits, 0);
        st->entries = atomic_exchange(&nc->entries, 0);
    } else {
        st->lookups = atomic_load(&nc->lookups);
        st->hits = atomic_load(&nc->hits);
        st->entries = atomic_load(&nc->entries);
    }
}
