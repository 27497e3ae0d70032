/* Layer-wise full-neighbour forward over node chunks (evaluation and inference).
 *
 * Layer l runs over chunks of destination nodes; each chunk's block (dst = the chunk, src = dst +
 * every in-neighbour) comes from a one-layer sampler with fanout -1, its input rows from the
 * features (l = 0) or from layer l-1's output matrix, which lives in RAM or in a temporary
 * file. Only one chunk's block and rows are in memory at a time when files are used.
 *
 * GCN and chunks: nn's GCN layer normalises by 1/sqrt(d_i d_j) with d_j taken from the block; a
 * source that is not a destination of the block gets d_j = 1 + (its out-degree in the block),
 * which for a chunk is smaller than its true degree. Scaling such a source's input row by
 * sqrt((1 + outdeg_block(j)) / (1 + deg(j))) turns the term into x_j W / sqrt(d_i deg_j) (the
 * layer is linear in x_j up to the aggregation), so the result equals the whole-graph
 * computation, D^-1/2 (A + I) D^-1/2 X W, for every chunk size. deg(j) counts j's in-neighbours
 * other than j itself (nn drops explicit self edges and adds one self loop). A GCN trained with
 * the ladies sampler evaluates with that sampler's fanout -1 blocks instead: their weights are
 * P[i,j] = 1 / d_i, which depend on the destination alone, so every chunk is exact unscaled.
 *
 * Reading out of core: a chunk's sources lie all over the layer's input, so every chunk touches
 * most of a file that does not fit in RAM; read row by row through the page cache, a pass reads
 * the file once per chunk. The input of a layer that is a file (features.bin for a strategy that
 * is not in RAM, an intermediate layer kept in a file) is therefore read through a row file
 * (tiergnn/store.h): as many of its rows as the budget leaves room for, the most-read first, are
 * loaded by one sequential pass through io/, and each chunk reads the rest as sorted runs merged
 * through small holes, with O_DIRECT. An intermediate layer stays in RAM, reserved against the
 * budget, when it fits beside its input (see bench/README.md, "Layer-wise evaluation and
 * inference out of core"). Rows are the same f32 values whichever way they come, and the chunks
 * are tg_lw_auto_chunk's for every strategy, so the results do not depend on the budget. */
#include "engine-impl.h"
#include "tiergnn/dist.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes of input rows an automatic out-of-core chunk aims at. */
#define LW_CHUNK_BYTES ((uint64_t)64 << 20)
/* A row file's stage and io/ staging slots, with room to spare (see store/rowfile.c). */
#define LW_IO_BYTES ((uint64_t)12 << 20)
/* Data-parallel: the rows one broadcast of a layer carries at most, and the staging buffer of a
 * layer kept in a file. */
#define LW_XCHG_BYTES ((size_t)1 << 20)

/* A (rows, cols) float matrix in RAM (reserved against budget when budget is set) or in a file,
 * which io/ reads through iof (opened before the name goes). */
typedef struct {
    float *mem;
    int fd;
    tg_io_file_t *iof;
    char path[4096];
    uint64_t rows;
    uint32_t cols;
    tg_budget_t *budget;
    uint64_t reserved;
} mat_t;

static void mat_init(mat_t *x)
{
    memset(x, 0, sizeof *x);
    x->fd = -1;
}

static void mat_destroy(mat_t *x)
{
    free(x->mem);
    if (x->fd >= 0) close(x->fd);
    tg_io_file_close(x->iof);
    if (x->budget && x->reserved) tg_budget_release(x->budget, x->reserved);
    mat_init(x);
}

/* dir NULL: in RAM (reserved against budget unless it is NULL); else a file in dir. */
static int mat_create(mat_t *x, uint64_t rows, uint32_t cols, const char *dir, int layer,
                      tg_budget_t *budget)
{
    mat_init(x);
    x->rows = rows;
    x->cols = cols;
    uint64_t bytes = rows * cols * sizeof(float);
    if (!dir) {
        char what[64];
        snprintf(what, sizeof what, "layer-wise forward: layer %d's output", layer);
        int rc = budget ? tg_budget_reserve(budget, bytes, what) : 0;
        if (rc < 0) return rc;
        x->budget = budget;
        x->reserved = budget ? bytes : 0;
        x->mem = malloc(bytes ? bytes : 1);
        if (!x->mem) {
            mat_destroy(x);
            return tg_err(-ENOMEM,
                          "layer-wise forward: out of memory for layer %d's output "
                          "(%llu x %u floats)",
                          layer, (unsigned long long)rows, cols);
        }
        return 0;
    }
    /* the rank too: ranks on several machines may share the directory and a pid */
    snprintf(x->path, sizeof x->path, "%s/layer%d-%d-r%d.f32", dir, layer, (int)getpid(),
             tg_dist_rank());
    x->fd = open(x->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (x->fd < 0) return tg_err(-errno, "%s: cannot create: %s", x->path, strerror(errno));
    int rc = 0;
    if (ftruncate(x->fd, (off_t)bytes) != 0) {
        int e = errno;
        rc = tg_err(-e, "%s: cannot size to %llu bytes: %s", x->path, (unsigned long long)bytes,
                    strerror(e));
    }
    /* the next layer reads it through io/: opened now, while it has a name */
    if (rc == 0) rc = tg_io_file_open(&x->iof, x->path, 0);
    /* Unlinked right away: the file vanishes even if the process is killed. */
    unlink(x->path);
    if (rc < 0) mat_destroy(x);
    return rc;
}

/* The layer is written: its pages go to the disk and leave the page cache, where they would
 * count against a cgroup's limit; the next layer reads the file with O_DIRECT. */
static int mat_finish(mat_t *x)
{
    if (x->fd < 0) return 0;
    if (fdatasync(x->fd) != 0)
        return tg_err(-errno, "%s: cannot write back: %s", x->path, strerror(errno));
    (void)posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED);
    return 0;
}

static int mat_write(mat_t *x, uint64_t first, uint64_t n, const float *rows)
{
    size_t rb = (size_t)x->cols * sizeof(float);
    if (x->mem) {
        memcpy(x->mem + first * x->cols, rows, n * rb);
        return 0;
    }
    return tg_pwrite_full(x->fd, rows, n * rb, first * rb, x->path);
}

/* out row i = row ids[i] of a matrix in RAM. */
static void mat_read(const mat_t *x, const uint64_t *ids, size_t n, float *out)
{
    size_t rb = (size_t)x->cols * sizeof(float);
    for (size_t i = 0; i < n; i++)
        memcpy(out + i * x->cols, x->mem + ids[i] * x->cols, rb);
}

/* In-degree without self edges of every node (for the GCN correction). The positions of many
 * consecutive nodes go into one tg_adj_read (up to `cap`), so that a disk-resident adjacency
 * reads indices.bin in long sequential runs instead of one small read per node. */
static int true_degrees(tg_adj_t *adj, uint32_t **out)
{
    uint64_t n = adj->num_nodes;
    uint32_t *deg = malloc((n ? n : 1) * sizeof *deg);
    uint64_t cap = 1 << 16;
    uint64_t *pos = malloc(cap * sizeof *pos), *nbr = malloc(cap * sizeof *nbr);
    int rc = 0;
    if (!deg || !pos || !nbr) {
        rc = tg_err(-ENOMEM, "layer-wise forward: out of memory for node degrees");
        goto out;
    }
    for (uint64_t v = 0; v < n; v++)
        deg[v] = 0;
    /* (v, p): the next position to read is p of node v */
    uint64_t v = 0, p = n ? adj->indptr[0] : 0;
    while (v < n) {
        uint64_t k = 0, v_first = v;
        uint64_t p_first = p;
        /* fill pos with positions of v, v+1, ... (a long list may be split across calls) */
        while (v < n && k < cap) {
            uint64_t end = adj->indptr[v + 1];
            while (p < end && k < cap)
                pos[k++] = p++;
            if (p == end) {
                v++;
                if (v < n) p = adj->indptr[v];
            }
        }
        if (k && (rc = tg_adj_read(adj, pos, (size_t)k, nbr)) < 0) goto out;
        /* walk the same positions again to credit each entry to its node */
        uint64_t u = v_first, q = p_first;
        for (uint64_t i = 0; i < k; i++) {
            while (q == adj->indptr[u + 1]) {
                u++;
                q = adj->indptr[u];
            }
            if (nbr[i] != u && deg[u] < UINT32_MAX) deg[u]++;
            q++;
        }
    }
out:
    free(pos);
    free(nbr);
    if (rc < 0) {
        free(deg);
        deg = NULL;
    }
    *out = deg;
    return rc;
}

static void gcn_scale_sources(const tg_block_t *blk, const uint64_t *nodes, const uint32_t *deg,
                              float *H, uint32_t dim, uint32_t *outdeg)
{
    uint32_t nd = blk->num_dst, ns = blk->num_src;
    memset(outdeg, 0, (size_t)ns * sizeof *outdeg);
    for (uint64_t e = 0; e < blk->num_edges; e++)
        outdeg[blk->indices[e]]++;
    for (uint32_t j = nd; j < ns; j++) {
        float s = (float)sqrt((1.0 + outdeg[j]) / (1.0 + deg[nodes[j]]));
        float *row = H + (size_t)j * dim;
        for (uint32_t k = 0; k < dim; k++)
            row[k] *= s;
    }
}

uint64_t tg_lw_auto_chunk(const tg_run_t *r, const tg_model_t *m)
{
    /* A chunk's input rows (its nodes and all their in-neighbours, on average 1 + E/N rows per
     * node) should take about LW_CHUNK_BYTES, like one training batch's activations, not a fixed
     * 65536 nodes' worth (which on a dense graph is gigabytes). The same for every strategy: the
     * chunk decides the GEMM shapes, and other shapes round differently (docs/TRAINING.md), so
     * only equal chunks let memory, mmap and gnndrive evaluate - and checkpoint - the same
     * bytes. */
    const tg_model_config_t *cfg = tg_model_config(m);
    uint32_t width = TG_MAX(cfg->in_dim, TG_MAX(cfg->hidden, cfg->out_dim));
    double rows = 1.0 + (double)r->adj->num_edges / (double)TG_MAX(r->adj->num_nodes, 1);
    uint64_t c = (uint64_t)((double)LW_CHUNK_BYTES / (rows * width * sizeof(float)));
    return TG_MIN(TG_MAX(c, (uint64_t)256), (uint64_t)65536);
}

/* Bytes of the run's budget not reserved (UINT64_MAX when it has no limit). */
static uint64_t budget_left(tg_run_t *r)
{
    if (!r->budget_init) return UINT64_MAX;
    pthread_mutex_lock(&r->budget.mu);
    uint64_t left = !r->budget.limit                   ? UINT64_MAX
                    : r->budget.used < r->budget.limit ? r->budget.limit - r->budget.used
                                                       : 0;
    pthread_mutex_unlock(&r->budget.mu);
    return left;
}

/* What a row file may keep resident: the budget left, or without a limit a quarter of the RAM,
 * the share the automatic choice of strategy gives a dataset (an out-of-core strategy runs
 * because the data did not fit it). */
static uint64_t ram_left(tg_run_t *r)
{
    uint64_t left = budget_left(r), quarter = tg_phys_mem_bytes() / 4;
    return left != UINT64_MAX || !quarter ? left : quarter;
}

/* The most sources a chunk of the layer can have: each chunk's nodes and their in-neighbours
 * (repeats counted, so at least what the block holds), at most N; an MLP reads the chunk only. */
static uint64_t max_sources(const tg_run_t *r, const tg_lw_opts_t *o, int mlp, int last,
                            uint64_t chunk)
{
    uint64_t N = r->adj->num_nodes, count = last && o->targets ? o->num_targets : N, most = 0;
    for (uint64_t c0 = 0; c0 < count; c0 += chunk) {
        uint64_t n = TG_MIN(chunk, count - c0), src = n;
        for (uint64_t i = 0; i < n && !mlp; i++)
            src += tg_adj_degree(r->adj, last && o->targets ? o->targets[c0 + i] : c0 + i);
        most = TG_MAX(most, TG_MIN(src, N));
    }
    return most;
}

/* RAM a chunk of a layer (din -> dout) works in besides the layer's input and output matrices:
 * its input rows with their block entries and the row file's sort keys, its output rows, and a
 * row file's stage and io/ slots. Not reserved: the input's resident rows are sized to leave it
 * free. */
static uint64_t chunk_bytes(uint64_t sources, uint64_t chunk, uint32_t din, uint32_t dout)
{
    return sources * ((uint64_t)din * sizeof(float) + 44) + chunk * (uint64_t)dout * 8 +
           LW_IO_BYTES;
}

/* Where a layer's input rows come from. */
typedef struct {
    tg_store_t *store;   /* the strategy's store, in RAM (features of layer 0) */
    const mat_t *mat;    /* the previous layer in RAM */
    tg_rowfile_t *rf;    /* a file: features.bin or the previous layer's (read through io/) */
    uint32_t *weight;    /* the row file's weights: 1 + in-degree, clamped (one per node) */
    uint64_t weight_res; /* bytes of weight reserved */
    tg_io_stats_t io;    /* the row file's disk reads */
} lw_input_t;

static int input_gather(lw_input_t *in, const uint64_t *ids, size_t n, float *out)
{
    if (in->rf) return tg_rowfile_gather(in->rf, ids, n, out);
    if (in->mat) {
        mat_read(in->mat, ids, n, out);
        return 0;
    }
    return tg_store_gather(in->store, ids, n, out);
}

/* A node is read by the chunks of its out-neighbours and its own: its in-degree stands in for
 * the out-degree (equal on undirected graphs) when choosing which rows stay resident. */
static int input_weights(tg_run_t *r, lw_input_t *in)
{
    if (in->weight) return 0;
    uint64_t n = r->adj->num_nodes, bytes = (n ? n : 1) * sizeof(uint32_t);
    tg_budget_t *b = r->budget_init ? &r->budget : NULL;
    int rc = b ? tg_budget_reserve(b, bytes, "layer-wise forward: row weights") : 0;
    if (rc < 0) return rc;
    in->weight_res = b ? bytes : 0;
    in->weight = malloc(bytes);
    if (!in->weight) return tg_err(-ENOMEM, "layer-wise forward: out of memory for row weights");
    for (uint64_t v = 0; v < n; v++)
        in->weight[v] = (uint32_t)TG_MIN(1 + tg_adj_degree(r->adj, v), (uint64_t)UINT32_MAX);
    return 0;
}

/* Opens layer l's input file (features.bin when prev is NULL, else prev's file) as a row file
 * with as many resident rows as leave `work` bytes of the budget free. */
static int input_open(tg_run_t *r, int l, const mat_t *prev, uint64_t work, lw_input_t *in)
{
    char path[4096];
    tg_io_stats_init(&in->io);
    tg_rowfile_opts_t ro = {.num_rows = r->adj->num_nodes,
                            .budget = r->budget_init ? &r->budget : NULL,
                            .stats = &in->io};
    if (prev) {
        ro.file = prev->iof;
        ro.dim = prev->cols;
        ro.dtype = TG_F32;
    } else {
        tg_dataset_path(r->ds, TG_FILE_FEATURES, path, sizeof path);
        ro.path = path;
        ro.dim = r->ds->meta.feat_dim;
        ro.dtype = r->ds->meta.feat_dtype;
        ro.normalize = r->sopts.normalize;
        ro.rowcrc = r->rowcrc;
    }
    uint64_t all = ro.num_rows * ro.dim * sizeof(float), left = ram_left(r);
    int rc = left < work + all ? input_weights(r, in) : 0;
    if (rc == 0) {
        left = ram_left(r);
        ro.ram_bytes = left > work ? left - work : 0;
        ro.weight = in->weight;
        rc = tg_rowfile_open(&in->rf, &ro);
    }
    if (rc == -ENOMEM && ro.budget) {
        /* The budget is spent (a training run's caches hold it while it evaluates, or --mem is
         * below a row file's stage): every row is read per chunk, through a stage that is not
         * reserved, rather than not at all. */
        tg_log_debug("layer-wise forward, layer %d: %s; every row is read per chunk", l,
                     tg_errmsg());
        ro.budget = NULL;
        ro.ram_bytes = 0;
        ro.weight = NULL;
        rc = tg_rowfile_open(&in->rf, &ro);
    }
    if (rc < 0) tg_err_prefix(rc, "layer-wise forward, layer %d's input", l);
    return rc;
}

static void input_close(tg_run_t *r, lw_input_t *in, int l)
{
    if (in->rf) {
        tg_rowfile_counts_t c;
        tg_rowfile_counts(in->rf, &c);
        tg_io_counts_t io;
        tg_io_stats_snapshot(&in->io, &io);
        tg_log_debug("layer-wise layer %d: %llu of %llu rows resident, %llu bytes streamed; "
                     "%llu of %llu rows gathered from the file in %llu requests of %llu bytes; "
                     "the disk read %llu bytes in %llu reads",
                     l, (unsigned long long)c.resident_rows, (unsigned long long)r->adj->num_nodes,
                     (unsigned long long)c.stream_bytes, (unsigned long long)c.miss_rows,
                     (unsigned long long)c.gather_rows, (unsigned long long)c.miss_requests,
                     (unsigned long long)c.miss_bytes, (unsigned long long)io.io_read_bytes,
                     (unsigned long long)io.io_requests);
    }
    tg_rowfile_close(in->rf);
    in->rf = NULL;
    in->mat = NULL;
    in->store = NULL;
}

/* One layer-wise pass: the sampler, the chunk buffers and the two matrices between layers. */
typedef struct {
    tg_run_t *r;
    tg_model_t *m;
    const tg_lw_opts_t *o;
    uint64_t chunk;
    int64_t fan; /* -1: every in-neighbour; 0: an MLP's chunk alone */
    int ooc;     /* features.bin through a row file (a strategy not in RAM) */
    tg_sampler_t *s;
    uint32_t *deg;    /* GCN: true in-degrees (NULL otherwise) */
    uint32_t *outdeg; /* (hin rows) GCN scaling scratch */
    uint64_t *ids;    /* (chunk) the chunk's destinations */
    float *Hin, *Hout;
    size_t hin_cap, hout_cap;
    mat_t prev, next; /* layer l-1's output (l's input), layer l's output */
    lw_input_t in;
    tg_batch_t b;
} lw_pass_t;

/* Hin for the block's sources and Hout for its destinations. */
static int lw_grow(lw_pass_t *w, const tg_block_t *blk, uint32_t din, uint32_t dout)
{
    size_t need_in = (size_t)blk->num_src * din, need_out = (size_t)blk->num_dst * dout;
    if (need_in > w->hin_cap) {
        free(w->Hin);
        free(w->outdeg);
        w->Hin = malloc(need_in * sizeof *w->Hin);
        w->outdeg = malloc((size_t)blk->num_src * sizeof *w->outdeg);
        w->hin_cap = need_in;
        if (!w->Hin || !w->outdeg) {
            w->hin_cap = 0;
            return tg_err(-ENOMEM, "layer-wise forward: out of memory for %u input rows",
                          blk->num_src);
        }
    }
    if (need_out > w->hout_cap) {
        free(w->Hout);
        w->Hout = malloc(need_out * sizeof *w->Hout);
        w->hout_cap = need_out;
        if (!w->Hout) {
            w->hout_cap = 0;
            return tg_err(-ENOMEM, "layer-wise forward: out of memory for %u output rows",
                          blk->num_dst);
        }
    }
    return 0;
}

/* Layer l's output matrix of count rows (kept: not the last layer, or the last when its rows
 * are exchanged) and where its input rows come from. The output goes to a file only when asked
 * for files and it does not fit beside the chunk's working set and the whole input in the budget
 * (without a limit: a quarter of the RAM). */
static int lw_layer_open(lw_pass_t *w, int l, int last, int keep, uint64_t count, uint32_t din,
                         uint32_t dout)
{
    tg_run_t *r = w->r;
    uint64_t N = r->adj->num_nodes;
    int in_file = l == 0 ? w->ooc : w->prev.mem == NULL, rc;
    uint64_t src = max_sources(r, w->o, w->fan == 0, last, w->chunk);
    uint64_t work = chunk_bytes(src, w->chunk, din, dout);
    if (keep) {
        const char *dir = w->o->tmp_dir;
        tg_budget_t *bud = NULL;
        uint64_t need = work + count * dout * sizeof(float);
        if (in_file) need += N * din * sizeof(float);
        uint64_t left = ram_left(r);
        if (dir && left != UINT64_MAX && left >= need) {
            dir = NULL;
            bud = r->budget_init ? &r->budget : NULL;
        }
        if ((rc = mat_create(&w->next, count, dout, dir, l, bud)) < 0) return rc;
    }
    if (in_file) {
        tg_log_debug("layer-wise layer %d: %llu bytes of the budget left, %llu for a chunk's work",
                     l, (unsigned long long)budget_left(r), (unsigned long long)work);
        return input_open(r, l, l ? &w->prev : NULL, work, &w->in);
    }
    if (l == 0)
        w->in.store = r->store;
    else
        w->in.mat = &w->prev;
    return 0;
}

/* Layer l for destinations c0..c0+n of the layer's list: block, input rows, the layer, and the
 * output written to the next matrix when the layer is kept, else (the last) handed to the sink. */
static int lw_chunk(lw_pass_t *w, int l, int last, uint64_t c0, uint64_t n, uint32_t din,
                    uint32_t dout)
{
    const tg_lw_opts_t *o = w->o;
    for (uint64_t i = 0; i < n; i++)
        w->ids[i] = last && o->targets ? o->targets[c0 + i] : c0 + i;
    tg_rng_t unused; /* fanout -1 / 0 draws nothing */
    tg_rng_seed(&unused, 0);
    int rc = tg_sampler_sample(w->s, w->ids, (size_t)n, &unused, &w->b);
    if (rc < 0) return rc;
    const tg_block_t *blk = &w->b.blocks[0];
    if ((rc = lw_grow(w, blk, din, dout)) < 0) return rc;
    if ((rc = input_gather(&w->in, w->b.nodes, blk->num_src, w->Hin)) < 0) {
        tg_err_prefix(rc, "layer-wise forward, layer %d, nodes %llu..%llu", l,
                      (unsigned long long)c0, (unsigned long long)(c0 + n));
        return rc;
    }
    if (w->deg) gcn_scale_sources(blk, w->b.nodes, w->deg, w->Hin, din, w->outdeg);
    if ((rc = tg_model_layer_forward(w->m, l, blk, w->Hin, w->Hout)) < 0) {
        tg_err_prefix(rc, "layer %d, nodes %llu..%llu", l, (unsigned long long)c0,
                      (unsigned long long)(c0 + n));
        return rc;
    }
    if (w->next.mem || w->next.fd >= 0) {
        rc = mat_write(&w->next, c0, n, w->Hout);
    } else {
        /* The embedding is the last layer's input for the chunk's own rows (dst first among the
         * sources), unscaled because destinations are never scaled. */
        rc = o->sink(o->ctx, c0, w->ids, (size_t)n, w->Hout, o->want_emb ? w->Hin : NULL);
    }
    tg_batch_free(&w->b);
    return rc;
}

static void lw_free(lw_pass_t *w)
{
    input_close(w->r, &w->in, -1);
    if (w->in.weight_res) tg_budget_release(&w->r->budget, w->in.weight_res);
    free(w->in.weight);
    tg_batch_free(&w->b);
    mat_destroy(&w->prev);
    mat_destroy(&w->next);
    free(w->Hin);
    free(w->Hout);
    free(w->outdeg);
    free(w->ids);
    free(w->deg);
    tg_sampler_destroy(w->s);
}

/* ---------------------------------------------------------------- data-parallel ranks */

/* Rank q's rows [*lo, *hi) of a layer of count rows: its share of the layer's chunks, whole
 * chunks, so that every chunk has the shapes (and so the bits) of a single process's. */
static void lw_share(const lw_pass_t *w, uint64_t count, int q, uint64_t *lo, uint64_t *hi)
{
    uint64_t chunks = (count + w->chunk - 1) / w->chunk, c_lo, c_hi;
    tg_dist_share(chunks, q, &c_lo, &c_hi);
    *lo = TG_MIN(c_lo * w->chunk, count);
    *hi = TG_MIN(c_hi * w->chunk, count);
}

/* (collective) x's rows [lo, hi) of every rank q's share become every rank's: rank q broadcasts
 * them in pieces of LW_XCHG_BYTES, received straight into a matrix in RAM or through a staging
 * buffer into a file. A rank whose read or write fails keeps joining the broadcasts (its peers
 * wait in them) and returns its error after; only an MPI error stops at once (it is fatal to
 * MPI anyway). */
static int lw_exchange(lw_pass_t *w, mat_t *x, uint64_t count)
{
    size_t rb = (size_t)x->cols * sizeof(float);
    uint64_t piece = TG_MAX((uint64_t)1, LW_XCHG_BYTES / TG_MAX(rb, (size_t)1));
    float *buf = x->mem ? NULL : malloc(piece * rb);
    if (!x->mem && !buf)
        return tg_err(-ENOMEM, "layer-wise forward: out of memory to exchange rows");
    int me = tg_dist_rank(), rc = 0, e = 0;
    for (int q = 0; q < tg_dist_size() && e == 0; q++) {
        uint64_t lo, hi;
        lw_share(w, count, q, &lo, &hi);
        for (uint64_t r0 = lo; r0 < hi && e == 0; r0 += piece) {
            uint64_t n = TG_MIN(piece, hi - r0);
            float *rows = x->mem ? x->mem + r0 * x->cols : buf;
            if (!x->mem && q == me && rc == 0)
                rc = tg_pread_full(x->fd, buf, n * rb, r0 * rb, x->path);
            e = tg_dist_bcast(rows, n * rb, q, "a layer-wise layer's rows");
            if (!x->mem && q != me && rc == 0 && e == 0) rc = mat_write(x, r0, n, buf);
        }
    }
    free(buf);
    return e < 0 ? e : rc;
}

/* Rank 0, after the final layer's rows were exchanged: the sink gets every target in order, its
 * logits from the kept matrix and its embedding from the layer's input, the rows the chunk's
 * block would have put first (destinations are never scaled). */
static int lw_sink_all(lw_pass_t *w, uint64_t count, uint32_t din, uint32_t dout)
{
    const tg_lw_opts_t *o = w->o;
    size_t need_in = o->want_emb ? (size_t)w->chunk * din : 0, need_out = (size_t)w->chunk * dout;
    if (need_in > w->hin_cap || need_out > w->hout_cap) {
        free(w->Hin);
        free(w->Hout);
        w->Hin = malloc(TG_MAX(need_in, w->hin_cap) * sizeof *w->Hin + 1);
        w->Hout = malloc(TG_MAX(need_out, w->hout_cap) * sizeof *w->Hout + 1);
        w->hin_cap = w->Hin ? TG_MAX(need_in, w->hin_cap) : 0;
        w->hout_cap = w->Hout ? TG_MAX(need_out, w->hout_cap) : 0;
        if (!w->Hin || !w->Hout)
            return tg_err(-ENOMEM, "layer-wise forward: out of memory for a chunk's outputs");
    }
    const mat_t *x = &w->next;
    int rc = 0;
    for (uint64_t c0 = 0; c0 < count && rc >= 0; c0 += w->chunk) {
        uint64_t n = TG_MIN(w->chunk, count - c0);
        for (uint64_t i = 0; i < n; i++)
            w->ids[i] = o->targets ? o->targets[c0 + i] : c0 + i;
        const float *logits = x->mem ? x->mem + c0 * x->cols : w->Hout;
        if (!x->mem) {
            size_t rb = (size_t)x->cols * sizeof(float);
            rc = tg_pread_full(x->fd, w->Hout, n * rb, c0 * rb, x->path);
        }
        if (rc >= 0 && o->want_emb) rc = input_gather(&w->in, w->ids, (size_t)n, w->Hin);
        if (rc >= 0)
            rc = o->sink(o->ctx, c0, w->ids, (size_t)n, logits, o->want_emb ? w->Hin : NULL);
    }
    return rc;
}

/* ---------------------------------------------------------------- the pass */

/* Layer l over this rank's share of its count rows (all of them for one rank); with K > 1 ranks,
 * then the agreement that every rank's share succeeded and the exchange of the kept rows. */
static int lw_layer(lw_pass_t *w, int l, uint64_t count, uint64_t *work_done, tg_progress_t *prog)
{
    const tg_lw_opts_t *o = w->o;
    int L = tg_model_config(w->m)->num_layers, last = l == L - 1, K = tg_dist_size();
    int keep = !last || (K > 1 && o->sink_root);
    uint32_t din, dout;
    tg_model_layer_dims(w->m, l, &din, &dout);
    uint64_t lo = 0, hi = count;
    if (K > 1) lw_share(w, count, tg_dist_rank(), &lo, &hi);
    int rc = lw_layer_open(w, l, last, keep, count, din, dout);
    for (uint64_t c0 = lo; c0 < hi && rc >= 0; c0 += w->chunk) {
        uint64_t n = TG_MIN(w->chunk, hi - c0);
        rc = lw_chunk(w, l, last, c0, n, din, dout);
        *work_done += n;
        if (o->progress_label) tg_progress_update(prog, *work_done, NULL);
    }
    if (K > 1) {
        char what[64];
        snprintf(what, sizeof what, "its share of layer-wise layer %d", l);
        if ((rc = tg_dist_agree(rc, what)) >= 0 && keep) {
            snprintf(what, sizeof what, "to exchange layer-wise layer %d's rows", l);
            rc = tg_dist_agree(lw_exchange(w, &w->next, count), what);
        }
        if (rc >= 0 && last && keep && tg_dist_rank() == 0) rc = lw_sink_all(w, count, din, dout);
    }
    input_close(w->r, &w->in, l);
    if (rc < 0 || last) return rc;
    if ((rc = mat_finish(&w->next)) < 0) return rc;
    mat_destroy(&w->prev);
    w->prev = w->next;
    mat_init(&w->next);
    return 0;
}

/* The sampler, the GCN degrees and the chunk's id buffer. */
static int lw_setup(lw_pass_t *w)
{
    const tg_model_config_t *cfg = tg_model_config(w->m);
    /* An MLP reads no neighbours: a fanout of 0 keeps its chunks to the chunk itself. A GCN
     * trained with a layer-wise sampler (ladies) gets that sampler's full-neighbour blocks: they
     * carry the exact weights of the operator its training estimated (P = D^-1 (A + I)), which
     * need no degree scaling. */
    w->fan = cfg->type == TG_MODEL_MLP ? 0 : TG_FANOUT_ALL;
    const tg_sampler_i *kind = cfg->type == TG_MODEL_GCN ? w->r->sampler : NULL;
    int rc = tg_sampler_open(&w->s, kind, w->r->adj, 1, &w->fan);
    if (rc < 0) return rc;
    if (cfg->type == TG_MODEL_GCN && !kind && (rc = true_degrees(w->r->adj, &w->deg)) < 0)
        return rc;
    w->ids = malloc(w->chunk * sizeof *w->ids);
    if (!w->ids) return tg_err(-ENOMEM, "layer-wise forward: out of memory");
    return 0;
}

int tg_lw_forward(tg_run_t *r, tg_model_t *m, const tg_lw_opts_t *o)
{
    const tg_model_config_t *cfg = tg_model_config(m);
    int L = cfg->num_layers, rc = 0;
    uint64_t N = r->adj->num_nodes;
    lw_pass_t w;
    memset(&w, 0, sizeof w);
    w.r = r;
    w.m = m;
    w.o = o;
    w.chunk = o->chunk ? o->chunk : tg_lw_auto_chunk(r, m);
    w.ooc = r->strat_i && !(r->strat_i->info.caps & TG_STRAT_IN_RAM);
    mat_init(&w.prev);
    mat_init(&w.next);
    rc = tg_dist_size() > 1 ? tg_dist_agree(lw_setup(&w), "to start a layer-wise forward")
                            : lw_setup(&w);
    if (rc < 0) goto out;
    uint64_t total_work = 0, work_done = 0, lo, hi;
    for (int l = 0; l < L; l++) { /* this rank's share of each layer: the whole with one rank */
        lw_share(&w, l == L - 1 && o->targets ? o->num_targets : N, tg_dist_rank(), &lo, &hi);
        total_work += hi - lo;
    }
    tg_progress_t prog;
    if (o->progress_label) tg_progress_begin(&prog, o->progress_label, total_work, "nodes");
    for (int l = 0; l < L && rc >= 0; l++)
        rc = lw_layer(&w, l, l == L - 1 && o->targets ? o->num_targets : N, &work_done, &prog);
    if (o->progress_label) tg_progress_end(&prog);
out:
    lw_free(&w);
    return rc;
}
