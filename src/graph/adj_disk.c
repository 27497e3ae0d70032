/* Disk-resident adjacency: indptr in RAM, indices read from indices.bin through io/ on every
 * tg_adj_read (see "out-of-core adjacency" in tiergnn/graph.h). */
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"
#include "tiergnn/graph.h"
#include "tiergnn/io.h"
#include "tiergnn/ncache.h"

#define DEFAULT_QUEUES 2u
#define DEFAULT_DEPTH 64u
#define DEFAULT_MAX_READ ((size_t)16 << 10)
#define DEFAULT_MAX_REQUESTS ((size_t)16384)

typedef struct {
    uint64_t *indptr;
    uint64_t indptr_bytes;
    tg_budget_t *budget;
    tg_io_file_t *file;
    tg_io_pool_t *pool;
    tg_io_stats_t own_stats; /* used when the caller gave no sink */
    tg_io_stats_t *stats;
    size_t esz; /* 4 (u32) or 8 (u64) */
    size_t max_requests;
    /* tg_adj_disk_load: the whole file in RAM (raw entries), read from there from then on */
    void *resident;
    uint64_t resident_bytes;
    tg_ncache_t *ncache; /* tg_adj_disk_attach_ncache: served before RAM or the disk; owned */
    char path[4096];
} adj_disk_t;

void tg_adj_disk_opts_default(tg_adj_disk_opts_t *o)
{
    memset(o, 0, sizeof *o);
}

/* Widens the u32 entries that a read left at the start of out[0..n) (4 n bytes) to u64 in
 * place. Backwards, so that writing entry k (bytes 8k..8k+7) only overwrites u32 entries 2k and
 * 2k+1, which are at or after k and so already widened. */
static void widen_u32_in_place(uint64_t *out, size_t n)
{
    const unsigned char *raw = (const unsigned char *)out;
    for (size_t k = n; k-- > 0;) {
        uint32_t v;
        memcpy(&v, raw + 4 * k, 4);
        out[k] = v;
    }
}

/* Reads the ranges of reqs[0..nreq) and widens them; names the positions of a failure. */
static int read_ranges(tg_adj_t *adj, tg_io_req_t *reqs, size_t nreq)
{
    adj_disk_t *d = adj->impl;
    int rc = tg_io_pool_read_batch(d->pool, reqs, nreq);
    if (rc < 0) {
        for (size_t j = 0; j < nreq; j++)
            if (reqs[j].res < 0) {
                uint64_t first = reqs[j].off / d->esz, cnt = reqs[j].len / d->esz;
                return tg_err_prefix(rc, "disk adjacency: edge positions %llu..%llu",
                                     (unsigned long long)first,
                                     (unsigned long long)(first + cnt - 1));
            }
        return tg_err_prefix(rc, "disk adjacency");
    }
    if (d->esz == 4)
        for (size_t j = 0; j < nreq; j++)
            widen_u32_in_place(reqs[j].dst, reqs[j].len / 4);
    return 0;
}

/* The byte ranges of one tg_adj_read, read in pieces of max_requests ranges. */
typedef struct {
    tg_adj_t *adj;
    tg_io_req_t *reqs; /* malloc'd at the first range: a read served from RAM needs none */
    size_t cap, n;
} ranges_t;

/* Adds the range of positions p..p+run-1, read straight into dst (u64 entries land as they
 * are, u32 entries land in the first half of the slots and are widened afterwards). */
static int ranges_add(ranges_t *r, uint64_t p, size_t run, uint64_t *dst)
{
    adj_disk_t *d = r->adj->impl;
    if (!r->reqs && !(r->reqs = malloc(r->cap * sizeof *r->reqs)))
        return tg_err(-ENOMEM, "disk adjacency: out of memory for %zu read requests", r->cap);
    if (r->n == r->cap) {
        int rc = read_ranges(r->adj, r->reqs, r->n);
        if (rc < 0) return rc;
        r->n = 0;
    }
    r->reqs[r->n++] =
        (tg_io_req_t){.file = d->file, .off = p * d->esz, .len = run * d->esz, .dst = dst};
    return 0;
}

/* The node whose edge positions hold p (< num_edges): the largest v with indptr[v] <= p. The
 * previous answer v and its successor are tried first: the positions of one node arrive
 * together, and the next node is often the next id. */
static uint64_t node_of(const tg_adj_t *adj, uint64_t p, uint64_t v)
{
    const uint64_t *ip = adj->indptr;
    if (v < adj->num_nodes && ip[v] <= p && p < ip[v + 1]) return v;
    if (v + 1 < adj->num_nodes && ip[v + 1] <= p && p < ip[v + 2]) return v + 1;
    uint64_t lo = 0, hi = adj->num_nodes; /* ip[lo] <= p < ip[hi] (ip[N] = num_edges) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ip[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* With a neighbour cache: the positions pos[i..) of one node. Returns how many there are;
 * *hit when the cache served them into out. */
static size_t serve_cached(tg_adj_t *adj, const uint64_t *pos, size_t i, size_t n, uint64_t *v,
                           uint64_t *out, int *hit)
{
    adj_disk_t *d = adj->impl;
    *v = node_of(adj, pos[i], *v);
    uint64_t beg = adj->indptr[*v], end = adj->indptr[*v + 1], deg;
    size_t g = 1;
    while (i + g < n && pos[i + g] >= beg && pos[i + g] < end)
        g++;
    const uint32_t *list = tg_ncache_find(d->ncache, *v, &deg);
    if ((*hit = list != NULL))
        for (size_t k = i; k < i + g; k++)
            out[k] = list[pos[k] - beg];
    return g;
}

/* out[i] = indices[pos[i]]: the neighbour cache first (when attached), then RAM (after
 * tg_adj_disk_load) or the disk, one byte range per run of consecutive positions, all in one
 * batched call (in pieces of max_requests ranges). */
static int disk_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    adj_disk_t *d = adj->impl;
    ranges_t r = {.adj = adj, .cap = TG_MIN(d->max_requests, n)};
    uint64_t v = UINT64_MAX, lookups = 0, hits = 0, served = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n;) {
        if (pos[i] >= adj->num_edges) {
            rc = tg_err(-EINVAL, "disk adjacency: edge position %llu out of range (%llu edges)",
                        (unsigned long long)pos[i], (unsigned long long)adj->num_edges);
            break;
        }
        size_t stop = n; /* the misses to serve: the node's positions, or all without a cache */
        if (d->ncache) {
            int hit;
            size_t g = serve_cached(adj, pos, i, n, &v, out, &hit);
            lookups++;
            if (hit) {
                hits++, served += g, i += g;
                continue;
            }
            stop = i + g;
        }
        while (rc == 0 && i < stop) {
            uint64_t p = pos[i];
            if (p >= adj->num_edges) break; /* reported at the top */
            if (d->resident) {
                out[i++] = d->esz == 4 ? ((const uint32_t *)d->resident)[p]
                                       : ((const uint64_t *)d->resident)[p];
                continue;
            }
            size_t run = 1;
            while (i + run < stop && pos[i + run] == p + run && p + run < adj->num_edges)
                run++;
            rc = ranges_add(&r, p, run, out + i);
            i += run;
        }
    }
    if (rc == 0 && r.n) rc = read_ranges(adj, r.reqs, r.n);
    free(r.reqs);
    if (d->ncache) tg_ncache_count(d->ncache, lookups, hits, served);
    return rc;
}

static void disk_destroy(tg_adj_t *adj)
{
    adj_disk_t *d = adj->impl;
    if (d) {
        tg_io_pool_destroy(d->pool);
        tg_io_file_close(d->file);
        free(d->indptr);
        if (d->budget && d->indptr_bytes) tg_budget_release(d->budget, d->indptr_bytes);
        free(d->resident);
        tg_ncache_close(d->ncache);
        if (d->budget && d->resident_bytes) tg_budget_release(d->budget, d->resident_bytes);
        free(d);
    }
    free(adj);
}

static const tg_adj_i disk_iface = {"disk", disk_read, disk_destroy};

tg_io_stats_t *tg_adj_disk_stats(tg_adj_t *adj)
{
    if (!adj || adj->iface != &disk_iface) return NULL;
    return ((adj_disk_t *)adj->impl)->stats;
}

int tg_adj_disk_open(tg_adj_t **out, const struct tg_dataset *ds, const tg_adj_disk_opts_t *opts,
                     tg_budget_t *budget)
{
    *out = NULL;
    tg_adj_disk_opts_t o;
    if (opts)
        o = *opts;
    else
        tg_adj_disk_opts_default(&o);
    const tg_meta_t *m = &ds->meta;
    int rc;
    tg_adj_t *adj = calloc(1, sizeof *adj);
    adj_disk_t *d = calloc(1, sizeof *d);
    if (!adj || !d) {
        free(adj);
        free(d);
        return tg_err(-ENOMEM, "disk adjacency: out of memory");
    }
    char *path = d->path; /* for messages */
    tg_dataset_path(ds, TG_FILE_INDICES, d->path, sizeof d->path);
    adj->iface = &disk_iface;
    adj->impl = d;
    adj->num_nodes = m->num_nodes;
    adj->num_edges = m->num_edges;
    d->esz = tg_index_dtype_size(m->index_dtype);
    d->max_requests = o.max_requests ? o.max_requests : DEFAULT_MAX_REQUESTS;
    d->stats = o.io.stats ? o.io.stats : &d->own_stats;
    tg_io_stats_init(&d->own_stats);

    /* indptr first: it is the part that must fit, and the message then says how much. */
    uint64_t ib = (m->num_nodes + 1) * sizeof(uint64_t);
    if (budget && (rc = tg_budget_reserve(budget, ib, "adjacency indptr")) < 0) goto err;
    d->budget = budget;
    d->indptr_bytes = ib;
    if ((rc = tg_dataset_load_indptr(ds, &d->indptr)) < 0) goto err;
    adj->indptr = d->indptr;

    if ((rc = tg_io_file_open(&d->file, path, o.file_flags)) < 0) goto err;
    uint64_t want = m->num_edges * d->esz;
    if (tg_io_file_size(d->file) != want) {
        rc = tg_err(-EINVAL, "%s: %llu bytes, expected %llu (%llu edges of %s from meta.txt)", path,
                    (unsigned long long)tg_io_file_size(d->file), (unsigned long long)want,
                    (unsigned long long)m->num_edges, tg_index_dtype_name(m->index_dtype));
        goto err;
    }
    tg_io_opts_t io = o.io;
    if (!io.depth) io.depth = DEFAULT_DEPTH;
    if (!io.max_read_bytes) io.max_read_bytes = DEFAULT_MAX_READ;
    io.budget = budget;
    io.stats = d->stats;
    if ((rc = tg_io_pool_create(&d->pool, o.queues ? o.queues : DEFAULT_QUEUES, &io)) < 0) {
        tg_err_prefix(rc, "disk adjacency (%s)", path);
        goto err;
    }
    *out = adj;
    return 0;
err:
    disk_destroy(adj);
    return rc;
}

uint64_t tg_adj_disk_load_bytes(const tg_adj_t *adj)
{
    if (!adj || adj->iface != &disk_iface) return 0;
    const adj_disk_t *d = adj->impl;
    if (d->resident) return 0; /* loaded already */
    return (adj->num_edges * d->esz + 4095) / 4096 * 4096;
}

uint64_t tg_adj_disk_file_bytes(const tg_adj_t *adj)
{
    if (!adj || adj->iface != &disk_iface) return 0;
    const adj_disk_t *d = adj->impl;
    return (adj->num_edges * d->esz + 4095) / 4096 * 4096;
}

/* Reads the whole indices.bin into buf through the adjacency's own io/ queues (O_DIRECT where
 * the file system allows it, so the page cache holds no second copy), in 8 MiB requests. */
int tg_adj_disk_read_all(tg_adj_t *adj, void *buf)
{
    if (!adj || adj->iface != &disk_iface)
        return tg_err(-EINVAL, "tg_adj_disk_read_all: not a disk adjacency");
    adj_disk_t *d = adj->impl;
    const uint64_t piece = (uint64_t)8 << 20;
    uint64_t size = adj->num_edges * d->esz;
    size_t nreq = (size_t)((size + piece - 1) / piece);
    tg_io_req_t *reqs = calloc(nreq ? nreq : 1, sizeof *reqs);
    if (!reqs) return tg_err(-ENOMEM, "%s: out of memory for the reads", d->path);
    for (size_t i = 0; i < nreq; i++)
        reqs[i] = (tg_io_req_t){.file = d->file,
                                .off = i * piece,
                                .len = (size_t)TG_MIN(piece, size - i * piece),
                                .dst = (char *)buf + i * piece};
    int rc = tg_io_pool_read_batch(d->pool, reqs, nreq);
    free(reqs);
    if (rc < 0) return tg_err_prefix(rc, "disk adjacency: reading the indices into RAM");
    return 0;
}

/* ---------------------------------------------------------------- a copy in RAM */

typedef struct {
    void *indices; /* tg_adj_disk_file_bytes, 4 KiB-aligned, entries as stored */
    size_t esz;
    tg_budget_t *budget;
    uint64_t bytes; /* reserved against budget */
} adj_copy_t;

static int copy_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    const adj_copy_t *c = adj->impl;
    for (size_t i = 0; i < n; i++) {
        if (pos[i] >= adj->num_edges)
            return tg_err(-EINVAL, "adjacency: edge position %llu out of range (%llu edges)",
                          (unsigned long long)pos[i], (unsigned long long)adj->num_edges);
        out[i] = c->esz == 4 ? ((const uint32_t *)c->indices)[pos[i]]
                             : ((const uint64_t *)c->indices)[pos[i]];
    }
    return 0;
}

static void copy_destroy(tg_adj_t *adj)
{
    adj_copy_t *c = adj->impl;
    if (c) {
        free(c->indices);
        if (c->budget) tg_budget_release(c->budget, c->bytes);
        free(c);
    }
    free(adj);
}

static const tg_adj_i copy_iface = {"disk-copy", copy_read, copy_destroy};

int tg_adj_disk_copy(tg_adj_t **out, tg_adj_t *disk, tg_budget_t *budget, const char *who)
{
    *out = NULL;
    if (!disk || disk->iface != &disk_iface)
        return tg_err(-EINVAL, "tg_adj_disk_copy: not a disk adjacency");
    const adj_disk_t *d = disk->impl;
    uint64_t bytes = tg_adj_disk_file_bytes(disk);
    int rc;
    if (budget && (rc = tg_budget_reserve(budget, bytes, who)) < 0) return rc;
    tg_adj_t *adj = calloc(1, sizeof *adj);
    adj_copy_t *c = calloc(1, sizeof *c);
    void *idx = tg_aligned_alloc(4096, bytes ? (size_t)bytes : 4096);
    if (!adj || !c || !idx) {
        free(idx);
        free(c);
        free(adj);
        if (budget) tg_budget_release(budget, bytes);
        return tg_err(-ENOMEM, "%s: out of memory for %s (%llu bytes)", d->path, who,
                      (unsigned long long)bytes);
    }
    *c = (adj_copy_t){.indices = idx, .esz = d->esz, .budget = budget, .bytes = bytes};
    adj->iface = &copy_iface;
    adj->impl = c;
    adj->num_nodes = disk->num_nodes;
    adj->num_edges = disk->num_edges;
    adj->indptr = disk->indptr;
    if ((rc = tg_adj_disk_read_all(disk, c->indices)) < 0) {
        copy_destroy(adj);
        return rc;
    }
    *out = adj;
    return 0;
}

int tg_adj_disk_load(tg_adj_t *adj)
{
    if (!adj || adj->iface != &disk_iface)
        return tg_err(-EINVAL, "tg_adj_disk_load: not a disk adjacency");
    adj_disk_t *d = adj->impl;
    if (d->resident) return 0;
    uint64_t bytes = tg_adj_disk_file_bytes(adj);
    int rc;
    if (d->budget && (rc = tg_budget_reserve(d->budget, bytes, "indices in RAM")) < 0) return rc;
    char *buf = tg_aligned_alloc(4096, bytes ? (size_t)bytes : 4096);
    if (!buf) {
        rc = tg_err(-ENOMEM, "%s: out of memory for the indices in RAM", d->path);
        goto err;
    }
    if ((rc = tg_adj_disk_read_all(adj, buf)) < 0) goto err;
    d->resident = buf;
    d->resident_bytes = d->budget ? bytes : 0;
    return 0;
err:
    free(buf);
    if (d->budget) tg_budget_release(d->budget, bytes);
    return rc;
}

int tg_adj_disk_attach_ncache(tg_adj_t *adj, tg_ncache_t *nc)
{
    if (!adj || adj->iface != &disk_iface) {
        tg_ncache_close(nc);
        return tg_err(-EINVAL, "tg_adj_disk_attach_ncache: not a disk adjacency");
    }
    adj_disk_t *d = adj->impl;
    if (nc) {
        tg_ncache_info_t in;
        tg_ncache_info(nc, &in);
        int rc = 0;
        if (in.num_nodes != adj->num_nodes || in.num_edges != adj->num_edges)
            rc = tg_err(-EINVAL,
                        "neighbour cache of %llu nodes and %llu edges for %s (%llu nodes, %llu "
                        "edges)",
                        (unsigned long long)in.num_nodes, (unsigned long long)in.num_edges, d->path,
                        (unsigned long long)adj->num_nodes, (unsigned long long)adj->num_edges);
        const uint32_t *addr = tg_ncache_address_table(nc), *arr = tg_ncache_array(nc);
        for (uint64_t v = 0; rc == 0 && v < adj->num_nodes; v++)
            if (addr[v] != TG_NCACHE_MISS && arr[addr[v]] != tg_adj_degree(adj, v))
                rc = tg_err(-EINVAL,
                            "neighbour cache: node %llu has %u cached in-neighbours, %s says "
                            "%llu",
                            (unsigned long long)v, arr[addr[v]], d->path,
                            (unsigned long long)tg_adj_degree(adj, v));
        if (rc < 0) {
            tg_ncache_close(nc);
            return rc;
        }
    }
    tg_ncache_close(d->ncache);
    d->ncache = nc;
    return 0;
}

tg_ncache_t *tg_adj_disk_ncache(tg_adj_t *adj)
{
    if (!adj || adj->iface != &disk_iface) return NULL;
    return ((adj_disk_t *)adj->impl)->ncache;
}
