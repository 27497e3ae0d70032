/* Node partitions of a dataset's graph (partition.h): METIS on the graph made undirected, or
 * restreaming LDG in bounded memory, and the edge cut of an assignment.
 *
 * Everything reads the CSC through one sequential stream (csc_t): indptr.bin and indices.bin
 * front to back through a window each, every id checked against N and indptr checked monotone on
 * the way, so a corrupt file is an error naming the file and the offset whoever reads it. The
 * files are read again on every pass instead of being held: the streaming partitioner exists for
 * graphs whose indices do not fit in memory. */
#include "tiergnn/partition.h"

#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TG_HAVE_METIS
#include <metis.h>
#endif

#define WIN_BYTES (16u << 20) /* read window of each file; a multiple of 8: ids never straddle */
#define ID_BATCH 4096         /* ids csc_ids hands out at a time, widened to u64 */
#define UNASSIGNED UINT32_MAX
#define PROGRESS_MASK 0xffff /* progress bars move every 64 Ki nodes */

/* What METIS's k-way holds at its peak, over the graph it is handed (xadj + adjncy, which it
 * keeps): it adds unit vertex and edge weights when given none (adjwgt is as large as adjncy),
 * the matchings and maps, and a coarser graph per level, and a graph whose edges are spread at
 * random (as tiergnn generate's are inside a community) loses few edges per level. Measured
 * (peak RSS, Debian's METIS 5.1, generated graphs of 1 M and 4 M nodes): 15.8 to 18.2 times; the
 * parts barely count (64, 1024 and 8192 parts within 10%). 20 leaves a margin. */
#define METIS_INPUT_MULT 20
#define METIS_PART_BYTES 1024 /* per part: METIS's per-part arrays, small beside the graph */

const char *tg_part_method_name(tg_part_method_t m)
{
    switch (m) {
    case TG_PART_AUTO:
        return "auto";
    case TG_PART_METIS:
        return "metis";
    case TG_PART_STREAM:
        return "stream";
    }
    return "?";
}

int tg_part_method_parse(const char *s, tg_part_method_t *m)
{
    static const tg_part_method_t all[] = {TG_PART_AUTO, TG_PART_METIS, TG_PART_STREAM};
    for (size_t i = 0; s && i < sizeof all / sizeof all[0]; i++)
        if (!strcmp(s, tg_part_method_name(all[i]))) {
            *m = all[i];
            return 0;
        }
    return tg_err(-EINVAL, "partition method '%s': expected auto, metis or stream",
                  s ? s : "(null)");
}

/* parts has no default: 0 is refused, so a caller cannot forget it silently. */
void tg_part_assign_opts_default(tg_part_assign_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->method = TG_PART_AUTO;
    o->seed = 1;
    o->stream_passes = 4;
    o->imbalance = 0.03;
}

/* ---------------------------------------------------------------- sequential CSC stream */

/* One file read front to back through a window. */
typedef struct win {
    int fd;
    char path[4096];
    uint64_t size; /* bytes the metadata says the file holds */
    uint64_t off;  /* file offset of buf[0] */
    char *buf;
    size_t cap, len, pos; /* window size; bytes in it; bytes consumed */
} win_t;

static void win_close(win_t *w)
{
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    free(w->buf);
    w->buf = NULL;
}

static int win_open(win_t *w, const tg_dataset_t *ds, tg_file_id_t id, uint64_t size)
{
    tg_dataset_path(ds, id, w->path, sizeof w->path);
    w->size = size;
    w->cap = (size_t)TG_MIN((uint64_t)WIN_BYTES, TG_MAX((size + 7) & ~(uint64_t)7, 8));
    w->fd = open(w->path, O_RDONLY | O_CLOEXEC);
    if (w->fd < 0) return tg_err(-errno, "%s: cannot open: %s", w->path, strerror(errno));
    posix_fadvise(w->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (!(w->buf = malloc(w->cap)))
        return tg_err(-ENOMEM, "%s: cannot allocate a %zu-byte read window", w->path, w->cap);
    return 0;
}

static void win_rewind(win_t *w)
{
    w->off = 0;
    w->len = w->pos = 0;
}

/* Makes bytes available at buf + pos, reading the next window once this one is used up. Callers
 * ask only for bytes the metadata promises; a shorter file is -EIO naming it and the offset. */
static int win_fill(win_t *w)
{
    if (w->pos < w->len) return 0;
    w->off += w->len;
    assert(w->off < w->size);
    size_t n = (size_t)TG_MIN((uint64_t)w->cap, w->size - w->off);
    int rc = tg_pread_full(w->fd, w->buf, n, w->off, w->path);
    if (rc) return rc;
    w->len = n;
    w->pos = 0;
    return 0;
}

/* The CSC node by node: csc_node begins the next node, csc_ids hands out its in-neighbours. */
typedef struct csc {
    win_t ip, ix;    /* indptr.bin, indices.bin */
    size_t isz;      /* bytes per id */
    uint64_t n, e;   /* nodes, edges */
    uint64_t begun;  /* nodes begun; the current one is begun - 1 */
    uint64_t lo, hi; /* positions of the current node's ids not handed out yet */
    uint64_t *ids;   /* [ID_BATCH] what csc_ids hands out */
} csc_t;

static void csc_close(csc_t *c)
{
    win_close(&c->ip);
    win_close(&c->ix);
    free(c->ids);
    c->ids = NULL;
}

static int csc_open(csc_t *c, const tg_dataset_t *ds)
{
    memset(c, 0, sizeof *c);
    c->ip.fd = c->ix.fd = -1;
    c->isz = tg_index_dtype_size(ds->meta.index_dtype);
    c->n = ds->meta.num_nodes;
    c->e = ds->meta.num_edges;
    int rc;
    if ((rc = win_open(&c->ip, ds, TG_FILE_INDPTR, (c->n + 1) * 8)) ||
        (rc = win_open(&c->ix, ds, TG_FILE_INDICES, c->e * c->isz)))
        goto err;
    if (!(c->ids = malloc(ID_BATCH * sizeof *c->ids))) {
        rc = tg_err(-ENOMEM, "out of memory for a partition read batch");
        goto err;
    }
    return 0;
err:
    csc_close(c);
    return rc;
}

static uint64_t csc_bytes(const csc_t *c)
{
    return c->ip.cap + c->ix.cap + ID_BATCH * sizeof *c->ids;
}

static int csc_indptr(csc_t *c, uint64_t *x)
{
    int rc = win_fill(&c->ip);
    if (rc) return rc;
    memcpy(x, c->ip.buf + c->ip.pos, 8);
    c->ip.pos += 8;
    return 0;
}

/* Back to node 0, for a pass. */
static int csc_rewind(csc_t *c)
{
    win_rewind(&c->ip);
    win_rewind(&c->ix);
    c->begun = c->lo = c->hi = 0;
    uint64_t x;
    int rc = csc_indptr(c, &x);
    if (rc) return rc;
    if (x != 0)
        return tg_err(-EINVAL, "%s: offset 0: indptr[0] = %" PRIu64 ", expected 0", c->ip.path, x);
    return 0;
}

/* Begins the next node; every id of the previous one must have been taken. */
static int csc_node(csc_t *c)
{
    assert(c->lo == c->hi && c->begun < c->n);
    uint64_t x;
    int rc = csc_indptr(c, &x);
    if (rc) return rc;
    uint64_t v = ++c->begun, off = v * 8;
    if (x < c->hi)
        return tg_err(-EINVAL,
                      "%s: offset %" PRIu64 ": indptr decreases at node %" PRIu64 " (%" PRIu64
                      " after %" PRIu64 ")",
                      c->ip.path, off, v, x, c->hi);
    if (x > c->e || (v == c->n && x != c->e))
        return tg_err(-EINVAL,
                      "%s: offset %" PRIu64 ": indptr[%" PRIu64 "] = %" PRIu64
                      ", expected %snum_edges = %" PRIu64,
                      c->ip.path, off, v, x, v == c->n ? "" : "at most ", c->e);
    c->hi = x;
    return 0;
}

/* Up to ID_BATCH in-neighbours of the current node into c->ids, each checked to be a node id.
 * Returns how many (0 once the node's list is done) or an error. */
static int csc_ids(csc_t *c)
{
    win_t *w = &c->ix;
    size_t k = 0;
    while (k < ID_BATCH && c->lo < c->hi) {
        int rc = win_fill(w);
        if (rc) return rc;
        size_t m = TG_MIN((w->len - w->pos) / c->isz, ID_BATCH - k);
        m = (size_t)TG_MIN((uint64_t)m, c->hi - c->lo);
        const char *p = w->buf + w->pos;
        uint64_t *out = c->ids + k;
        if (c->isz == 4) {
            for (size_t i = 0; i < m; i++) {
                uint32_t x;
                memcpy(&x, p + 4 * i, 4);
                out[i] = x;
            }
        } else {
            memcpy(out, p, m * 8);
        }
        for (size_t i = 0; i < m; i++)
            if (out[i] >= c->n)
                return tg_err(-EINVAL,
                              "%s: offset %" PRIu64 ": in-neighbour %" PRIu64 " of node %" PRIu64
                              " is not a node id (num_nodes = %" PRIu64 ")",
                              w->path, (c->lo + i) * c->isz, out[i], c->begun - 1, c->n);
        k += m;
        c->lo += m;
        w->pos += m * c->isz;
    }
    return (int)k;
}

/* ---------------------------------------------------------------- edge cut */

int tg_part_cut(const tg_dataset_t *ds, const uint32_t *part, uint32_t parts,
                tg_part_assign_stats_t *st)
{
    uint64_t n = ds->meta.num_nodes;
    if (parts == 0) return tg_err(-EINVAL, "%s: edge cut of 0 parts", ds->dir);
    uint64_t *size = calloc(parts, sizeof *size);
    if (!size) return tg_err(-ENOMEM, "out of memory for %u part sizes", parts);
    int rc = 0;
    for (uint64_t v = 0; v < n; v++) {
        if (part[v] >= parts) {
            free(size);
            return tg_err(-EINVAL, "%s: node %" PRIu64 " is in part %u, expected < %u", ds->dir, v,
                          part[v], parts);
        }
        size[part[v]]++;
    }
    csc_t c;
    uint64_t edges = 0, cut = 0;
    if ((rc = csc_open(&c, ds)) || (rc = csc_rewind(&c))) goto out;
    for (uint64_t v = 0; v < n; v++) {
        if ((rc = csc_node(&c))) goto out;
        int k;
        while ((k = csc_ids(&c)) > 0)
            for (int i = 0; i < k; i++) {
                uint64_t u = c.ids[i];
                edges += u != v;
                cut += part[u] != part[v];
            }
        if (k < 0) {
            rc = k;
            goto out;
        }
    }
    st->edges = edges;
    st->cut_edges = cut;
    st->min_part = UINT64_MAX;
    st->max_part = 0;
    for (uint32_t p = 0; p < parts; p++) {
        st->min_part = TG_MIN(st->min_part, size[p]);
        st->max_part = TG_MAX(st->max_part, size[p]);
    }
    st->balance = n ? (double)st->max_part / ((double)n / parts) : 0;
out:
    csc_close(&c);
    free(size);
    return rc;
}

/* ---------------------------------------------------------------- METIS */

/* METIS's input for n nodes and `entries` adjacency entries, and what it holds at its peak. */
static uint64_t metis_need(uint64_t n, uint64_t entries, uint32_t parts)
{
    return METIS_INPUT_MULT * ((n + 1) * 4 + entries * 4) + (uint64_t)parts * METIS_PART_BYTES;
}

/* The estimate takes METIS's input to be one entry per CSC edge, as when the CSC stores every
 * edge both ways (tiergnn generate, undirected imports): u -> v and v -> u then make one entry
 * in each list. A CSC without reciprocal edges hands METIS up to twice that; tg_part_assign
 * checks again once the graph is built and its size known. The build holds xadj, the fill
 * cursors, the adjacency before repeats are dropped (2E entries) and the read windows. */
uint64_t tg_part_metis_bytes(const tg_dataset_t *ds, uint32_t parts)
{
    const tg_meta_t *m = &ds->meta;
    uint64_t n = m->num_nodes, e = m->num_edges;
    uint64_t windows = TG_MIN((uint64_t)WIN_BYTES, (n + 1) * 8) +
                       TG_MIN((uint64_t)WIN_BYTES, e * tg_index_dtype_size(m->index_dtype));
    uint64_t build = (2 * n + 1) * 4 + 2 * e * 4 + windows;
    return TG_MAX(build, metis_need(n, e, parts));
}

#ifdef TG_HAVE_METIS
_Static_assert(sizeof(idx_t) == sizeof(uint32_t), "the caller's part[] is METIS's part array");

/* Why METIS cannot take ds (idx_t is 32-bit in Debian's build), or NULL. */
static const char *metis_too_large(const tg_dataset_t *ds)
{
    if (ds->meta.num_nodes > INT32_MAX) return "its nodes exceed METIS's 32-bit ids";
    if (2 * ds->meta.num_edges > INT32_MAX)
        return "twice its edges (the undirected structure) exceed METIS's 32-bit offsets";
    return NULL;
}

static int cmp_idx(const void *a, const void *b)
{
    idx_t x = *(const idx_t *)a, y = *(const idx_t *)b;
    return (x > y) - (x < y);
}

/* One pass over the CSC: with adj NULL, counts each node's undirected degree into xadj[u + 1];
 * else appends v to u's list and u to v's at pos[] (bounded by xadj: a file that changed
 * between the passes is an error, not an overrun). Self loops are left out. */
static int metis_pass(csc_t *c, idx_t *xadj, idx_t *adj, idx_t *pos, tg_progress_t *pg)
{
    int rc = csc_rewind(c);
    if (rc) return rc;
    for (uint64_t v = 0; v < c->n; v++) {
        if ((rc = csc_node(c))) return rc;
        int k;
        while ((k = csc_ids(c)) > 0)
            for (int i = 0; i < k; i++) {
                uint64_t u = c->ids[i];
                if (u == v) continue;
                if (!adj) {
                    xadj[u + 1]++;
                    xadj[v + 1]++;
                    continue;
                }
                if (pos[u] == xadj[u + 1] || pos[v] == xadj[v + 1])
                    return tg_err(-EIO, "%s: changed while being read", c->ix.path);
                adj[pos[u]++] = (idx_t)v;
                adj[pos[v]++] = (idx_t)u;
            }
        if (k < 0) return k;
        if (pg && !(v & PROGRESS_MASK)) tg_progress_update(pg, v, NULL);
    }
    if (pg) tg_progress_update(pg, c->n, NULL);
    for (uint64_t v = 0; adj && v < c->n; v++)
        if (pos[v] != xadj[v + 1]) return tg_err(-EIO, "%s: changed while being read", c->ix.path);
    return 0;
}

/* The graph made undirected in METIS's CSR (xadj, adj): every CSC edge u -> v (u != v) in both
 * lists, each list sorted and without repeats. *peak: the bytes held at most. */
static int metis_graph(const tg_dataset_t *ds, int progress, idx_t **xadj_out, idx_t **adj_out,
                       uint64_t *peak)
{
    uint64_t n = ds->meta.num_nodes;
    idx_t *xadj = calloc(n + 1, sizeof *xadj), *adj = NULL, *pos = NULL;
    csc_t c;
    int rc = csc_open(&c, ds);
    if (rc) goto out;
    if (!xadj) {
        rc = tg_err(-ENOMEM, "out of memory for METIS's xadj (%" PRIu64 " nodes)", n);
        goto out;
    }
    tg_progress_t pg;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* degrees to offsets; the fill cursors start at them */
            for (uint64_t v = 0; v < n; v++)
                xadj[v + 1] += xadj[v];
            adj = malloc(TG_MAX((size_t)xadj[n], 1) * sizeof *adj);
            pos = malloc(TG_MAX(n, 1) * sizeof *pos);
            if (!adj || !pos) {
                rc = tg_err(-ENOMEM, "out of memory for METIS's graph (%" PRIu64 " bytes)",
                            ((uint64_t)xadj[n] + n) * sizeof *adj);
                goto out;
            }
            memcpy(pos, xadj, n * sizeof *pos);
        }
        char label[48];
        snprintf(label, sizeof label, "METIS graph pass %d/2", pass + 1);
        if (progress) tg_progress_begin(&pg, label, n, "nodes");
        rc = metis_pass(&c, xadj, adj, pos, progress ? &pg : NULL);
        if (progress) tg_progress_end(&pg);
        if (rc) goto out;
    }
    *peak = (n + 1 + n + (uint64_t)xadj[n]) * sizeof *adj + csc_bytes(&c);
    /* Sort each list and drop repeats (an edge stored both ways in the CSC arrives twice). */
    idx_t w = 0, lo = 0;
    for (uint64_t v = 0; v < n; v++) {
        idx_t hi = xadj[v + 1];
        qsort(adj + lo, (size_t)(hi - lo), sizeof *adj, cmp_idx);
        for (idx_t i = lo; i < hi; i++)
            if (i == lo || adj[i] != adj[i - 1]) adj[w++] = adj[i];
        xadj[v + 1] = w;
        lo = hi;
    }
    idx_t *shrunk = realloc(adj, TG_MAX((size_t)w, 1) * sizeof *adj);
    if (shrunk) adj = shrunk;
    *xadj_out = xadj;
    *adj_out = adj;
    xadj = adj = NULL;
out:
    csc_close(&c);
    free(pos);
    free(adj);
    free(xadj);
    return rc;
}

/* METIS into o->parts. With the graph built and its size known, one that needs more than mem
 * is -ENOMEM when METIS was asked for, else returns 1: the caller streams instead. */
static int metis_assign(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, uint64_t mem,
                        uint32_t *part, uint64_t *peak)
{
    idx_t *xadj, *adj;
    int rc = metis_graph(ds, o->progress, &xadj, &adj, peak);
    if (rc) return rc;
    uint64_t n = ds->meta.num_nodes, entries = (uint64_t)xadj[n];
    uint64_t need = metis_need(n, entries, o->parts);
    *peak = TG_MAX(*peak, need);
    if (need > mem) {
        free(adj);
        free(xadj);
        char a[32], b[32];
        tg_fmt_bytes(need, a, sizeof a);
        tg_fmt_bytes(mem, b, sizeof b);
        if (o->method == TG_PART_METIS)
            return tg_err(-ENOMEM,
                          "%s: METIS needs about %" PRIu64 " bytes (%s) for the undirected graph "
                          "(%" PRIu64 " adjacency entries: few edges are stored both ways), more "
                          "than the %" PRIu64 " bytes (%s) allowed; allow more memory or use the "
                          "stream method",
                          ds->dir, need, a, entries, mem, b);
        tg_log_info("partition: stream after all (METIS would need about %s for the undirected "
                    "graph, over the %s allowed)",
                    a, b);
        return 1;
    }
    idx_t nv = (idx_t)ds->meta.num_nodes, ncon = 1, np = (idx_t)o->parts, cut = 0;
    idx_t opt[METIS_NOPTIONS];
    METIS_SetDefaultOptions(opt);
    opt[METIS_OPTION_SEED] = (idx_t)(o->seed & INT32_MAX); /* METIS's seed is an idx_t */
    opt[METIS_OPTION_UFACTOR] = (idx_t)TG_MAX(lround(o->imbalance * 1000), 1);
    opt[METIS_OPTION_NUMBERING] = 0;
    tg_log_info("METIS k-way: %" PRIu64 " nodes, %" PRIu64 " undirected edges, %u parts",
                ds->meta.num_nodes, (uint64_t)xadj[nv] / 2, o->parts);
    /* part[] is uint32_t and METIS writes idx_t: the same size, and signed and unsigned variants
     * of one type may alias. */
    int r = METIS_PartGraphKway(&nv, &ncon, xadj, adj, NULL, NULL, NULL, &np, NULL, NULL, opt, &cut,
                                (idx_t *)part);
    free(adj);
    free(xadj);
    if (r == METIS_OK) return 0;
    const char *why = r == METIS_ERROR_INPUT    ? "METIS_ERROR_INPUT (bad input or options)"
                      : r == METIS_ERROR_MEMORY ? "METIS_ERROR_MEMORY (out of memory)"
                                                : "METIS_ERROR";
    return tg_err(r == METIS_ERROR_MEMORY  ? -ENOMEM
                  : r == METIS_ERROR_INPUT ? -EINVAL
                                           : -EIO,
                  "%s: METIS_PartGraphKway into %u parts failed: %s", ds->dir, o->parts, why);
}
#endif

/* ---------------------------------------------------------------- streaming (LDG) */

/* The parts ordered by size, so the least loaded one is at hand in O(1) while sizes move by one:
 * ord[] holds the parts by ascending size; parts of one size form a run ord[first[r] .. last[r]]
 * and run[p] is p's. A part that grows swaps to the end of its run and joins the next run (or
 * starts one of its own); one that shrinks, to the start and the previous run. */
typedef struct loadq {
    uint32_t n;
    uint64_t *size;          /* [n] nodes in each part */
    uint32_t *ord, *at;      /* [n] parts by size; at[p]: p's index in ord */
    uint32_t *run;           /* [n] p's run */
    uint32_t *first, *last;  /* [n] each run's index range in ord */
    uint32_t *spare, nspare; /* [n] run ids not in use */
} loadq_t;

static void lq_init(loadq_t *q)
{
    for (uint32_t p = 0; p < q->n; p++) {
        q->size[p] = 0;
        q->ord[p] = q->at[p] = p;
        q->run[p] = 0;
        q->spare[p] = q->n - 1 - p; /* run 0 holds everything; 1 .. n-1 are spare */
    }
    q->first[0] = 0;
    q->last[0] = q->n - 1;
    q->nspare = q->n - 1;
}

static void lq_swap(loadq_t *q, uint32_t i, uint32_t j)
{
    uint32_t a = q->ord[i], b = q->ord[j];
    q->ord[i] = b;
    q->ord[j] = a;
    q->at[a] = j;
    q->at[b] = i;
}

static void lq_grow(loadq_t *q, uint32_t p)
{
    uint32_t r = q->run[p], j = q->last[r];
    lq_swap(q, q->at[p], j);
    if (q->first[r] == j)
        q->spare[q->nspare++] = r;
    else
        q->last[r] = j - 1;
    q->size[p]++;
    if (j + 1 < q->n && q->size[q->ord[j + 1]] == q->size[p]) {
        r = q->run[q->ord[j + 1]];
        q->first[r] = j;
    } else {
        r = q->spare[--q->nspare];
        q->first[r] = q->last[r] = j;
    }
    q->run[p] = r;
}

static void lq_shrink(loadq_t *q, uint32_t p)
{
    uint32_t r = q->run[p], i = q->first[r];
    lq_swap(q, q->at[p], i);
    if (q->last[r] == i)
        q->spare[q->nspare++] = r;
    else
        q->first[r] = i + 1;
    q->size[p]--;
    if (i > 0 && q->size[q->ord[i - 1]] == q->size[p]) {
        r = q->run[q->ord[i - 1]];
        q->last[r] = i;
    } else {
        r = q->spare[--q->nspare];
        q->first[r] = q->last[r] = i;
    }
    q->run[p] = r;
}

typedef struct ldg {
    loadq_t q;
    uint64_t cap;      /* C = ceil(N / parts * (1 + imbalance)): the most nodes a part takes */
    uint64_t *cnt;     /* [parts] the current node's placed neighbours in each part */
    uint32_t *touched; /* [parts] the parts with cnt > 0 */
} ldg_t;

/* LDG's choice among the parts touched[0 .. nt): the highest cnt (1 - size / C) among parts with
 * room, ties to the smaller part, then the lower id; the least loaded part when none has room or
 * the node has no placed neighbour (there is always room: C parts >= N). Clears cnt. */
static uint32_t ldg_pick(ldg_t *g, uint32_t nt)
{
    const uint64_t *size = g->q.size;
    uint32_t best = UNASSIGNED;
    double bs = 0;
    for (uint32_t t = 0; t < nt; t++) {
        uint32_t p = g->touched[t];
        uint64_t cnt = g->cnt[p];
        g->cnt[p] = 0;
        if (size[p] >= g->cap) continue;
        double s = (double)cnt * (double)(g->cap - size[p]); /* score times C */
        if (best == UNASSIGNED || s > bs ||
            (s == bs && (size[p] < size[best] || (size[p] == size[best] && p < best)))) {
            best = p;
            bs = s;
        }
    }
    return best != UNASSIGNED ? best : g->q.ord[0];
}

/* One pass in node order. In pass 1 a node sees the neighbours placed before it; on later passes
 * (restreaming) every neighbour has a part, from this pass or the last, and the node leaves its
 * own part before choosing again. */
static int ldg_pass(ldg_t *g, csc_t *c, uint32_t *part, int restream, tg_progress_t *pg)
{
    int rc = csc_rewind(c);
    if (rc) return rc;
    for (uint64_t v = 0; v < c->n; v++) {
        if ((rc = csc_node(c))) return rc;
        if (restream) lq_shrink(&g->q, part[v]);
        uint32_t nt = 0;
        int k;
        while ((k = csc_ids(c)) > 0)
            for (int i = 0; i < k; i++) {
                uint64_t u = c->ids[i];
                uint32_t p = part[u];
                if (u == v || p == UNASSIGNED) continue;
                if (g->cnt[p]++ == 0) g->touched[nt++] = p;
            }
        if (k < 0) return k;
        part[v] = ldg_pick(g, nt);
        lq_grow(&g->q, part[v]);
        if (pg && !(v & PROGRESS_MASK)) tg_progress_update(pg, v, NULL);
    }
    if (pg) tg_progress_update(pg, c->n, NULL);
    return 0;
}

/* Restreaming LDG. The order is node id order on every pass, for sequential reads, so the seed
 * plays no part. Holds O(parts) and the read windows beside part[]. */
static int stream_assign(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, uint32_t *part,
                         uint64_t *peak)
{
    uint64_t n = ds->meta.num_nodes, np = o->parts;
    ldg_t g = {.q.n = o->parts};
    g.cap = (uint64_t)ceil((double)n / (double)np * (1 + o->imbalance));
    g.cap = TG_MAX(g.cap, (n + np - 1) / np); /* whatever the rounding, C parts >= N */
    size_t words = 2 * (size_t)np, ids = 7 * (size_t)np;
    uint64_t *block = malloc(words * 8 + ids * 4);
    if (!block) return tg_err(-ENOMEM, "out of memory for %u parts' counters", o->parts);
    g.q.size = block;
    g.cnt = block + np;
    uint32_t *w = (uint32_t *)(block + words);
    uint32_t **arrays[] = {&g.q.ord,  &g.q.at,    &g.q.run,  &g.q.first,
                           &g.q.last, &g.q.spare, &g.touched};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        *arrays[i] = w + i * np;
    memset(g.cnt, 0, np * sizeof *g.cnt);
    lq_init(&g.q);
    for (uint64_t v = 0; v < n; v++)
        part[v] = UNASSIGNED;
    csc_t c;
    int rc = csc_open(&c, ds);
    for (uint32_t pass = 0; !rc && pass < o->stream_passes; pass++) {
        tg_progress_t pg;
        char label[48];
        snprintf(label, sizeof label, "streaming partition pass %u/%u", pass + 1, o->stream_passes);
        if (o->progress) tg_progress_begin(&pg, label, n, "nodes");
        rc = ldg_pass(&g, &c, part, pass > 0, o->progress ? &pg : NULL);
        if (o->progress) tg_progress_end(&pg);
    }
    *peak = words * 8 + ids * 4 + csc_bytes(&c);
    csc_close(&c);
    free(block);
    return rc;
}

/* ---------------------------------------------------------------- assignment */

/* The method that runs: STREAM as asked; METIS as asked, or refused when it cannot run or does
 * not fit; AUTO, METIS where it would be given, else STREAM, saying why. */
static int choose_method(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, uint64_t mem,
                         tg_part_method_t *m)
{
    *m = TG_PART_STREAM;
    if (o->method == TG_PART_STREAM) return 0;
    if (o->method != TG_PART_AUTO && o->method != TG_PART_METIS)
        return tg_err(-EINVAL, "partition method %d: expected auto, metis or stream",
                      (int)o->method);
    int asked = o->method == TG_PART_METIS;
#ifndef TG_HAVE_METIS
    if (asked)
        return tg_err(-ENOTSUP, "partition method metis: this tiergnn was built without METIS "
                                "(install libmetis-dev and rebuild), use stream");
    tg_log_info("partition: stream (this build has no METIS)");
#else
    uint64_t need = tg_part_metis_bytes(ds, o->parts);
    const char *big = metis_too_large(ds);
    char a[32], b[32];
    tg_fmt_bytes(need, a, sizeof a);
    tg_fmt_bytes(mem, b, sizeof b);
    if (big) {
        if (asked) return tg_err(-EOVERFLOW, "%s: METIS cannot partition it: %s", ds->dir, big);
        tg_log_info("partition: stream (METIS cannot take it: %s)", big);
    } else if (need > mem) {
        if (asked)
            return tg_err(-ENOMEM,
                          "%s: METIS needs about %" PRIu64 " bytes (%s) for %" PRIu64
                          " nodes, %" PRIu64 " edges and %u parts, more than the %" PRIu64
                          " bytes (%s) allowed; allow more memory or use the stream method",
                          ds->dir, need, a, ds->meta.num_nodes, ds->meta.num_edges, o->parts, mem,
                          b);
        tg_log_info("partition: stream (METIS would need about %s, over the %s allowed)", a, b);
    } else {
        if (!asked) tg_log_info("partition: METIS (needs about %s, within the %s allowed)", a, b);
        *m = TG_PART_METIS;
    }
#endif
    return 0;
}

int tg_part_assign(const tg_dataset_t *ds, const tg_part_assign_opts_t *o, uint32_t *part,
                   tg_part_assign_stats_t *st)
{
    uint64_t n = ds->meta.num_nodes;
    if (o->parts == 0 || o->parts > n)
        return tg_err(-EINVAL, "%s: %u parts asked for, expected 1 .. %" PRIu64 " (the nodes)",
                      ds->dir, o->parts, n);
    if (o->stream_passes < 1)
        return tg_err(-EINVAL, "streaming partition: 0 passes, expected at least 1");
    if (!(o->imbalance >= 0 && o->imbalance <= 1000))
        return tg_err(-EINVAL, "partition imbalance %g: expected 0 .. 1000 (0.03 = 3%%)",
                      o->imbalance);
    tg_part_method_t m;
    uint64_t mem = o->mem_bytes ? o->mem_bytes : tg_phys_mem_bytes() / 4;
    int rc = choose_method(ds, o, mem, &m);
    if (rc) return rc;
    double t0 = tg_now();
    uint64_t peak = 0;
    if (o->parts == 1) {
        memset(part, 0, n * sizeof *part);
    } else {
#ifdef TG_HAVE_METIS
        if (m == TG_PART_METIS && (rc = metis_assign(ds, o, mem, part, &peak)) == 1)
            m = TG_PART_STREAM; /* the graph built did not fit after all */
#endif
        if (m == TG_PART_STREAM) rc = stream_assign(ds, o, part, &peak);
    }
    if (rc) return rc;
    double seconds = tg_now() - t0;
    if (!st) return 0;
    if ((rc = tg_part_cut(ds, part, o->parts, st))) return rc;
    st->method = m;
    st->seconds = seconds;
    st->peak_bytes = peak;
    return 0;
}
