/* `tiergnn import OUT --from edgelist FILE`: SNAP-style text edge lists (plain or .gz).
 *
 * Input: one edge "SRC DST" per line, separated by blanks or tabs; lines starting with '#' or '%'
 * and blank lines are skipped; columns after the second (weights, timestamps) are ignored. An
 * edge SRC DST makes SRC an in-neighbour of DST.
 *
 * Node ids: SNAP files often leave ids unused (web-Google: ids up to 916427 for 875713 nodes).
 * Ids are renumbered by rank: new id = number of distinct ids smaller than the old one. This is
 * the identity when the ids are already 0..N-1, keeps the original order (so the mapping is
 * `sort -un` of the id column), and needs only a bitmap over [0, max id], not a hash table of
 * every id. The file is therefore read twice: pass 1 marks ids and counts edges, pass 2 feeds
 * renumbered edges to the external sort.
 *
 * Features and labels do not exist in an edge list; they are synthesised (gen_node_data below),
 * so that the result trains end to end. See docs/IMPORT.md for what the labels mean.
 */
#include "import-impl.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- id bitmap with rank */

typedef struct {
    uint64_t *bits;
    uint64_t nwords, max_words;
    uint64_t max_id;
    int any;
    /* rank(id) = super_rank[w >> 16] + word_rank[w] + ones of bits[w] below id: one popcount a
     * lookup, 3/16 byte per id in all (bitmap 1/8, word ranks 1/16). */
    uint64_t *super_rank; /* ones before each superblock of 2^16 words */
    uint32_t *word_rank;  /* ones before each word within its superblock */
    uint64_t count;
} idmap_t;

#define IDMAP_BYTES_PER_WORD 12 /* 8 bitmap + 4 word rank (+ negligible superblocks) */

/* Portable popcount: without -mpopcnt, __builtin_popcountll is a libgcc call. */
static inline unsigned popcount64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

static int idmap_mark(idmap_t *m, uint64_t id, const tg_csv_t *c, uint64_t mem)
{
    uint64_t w = id >> 6;
    if (w >= m->nwords) {
        if (w >= m->max_words) {
            char b1[32], b2[32];
            return tg_err(-ENOMEM,
                          "%s: line %llu: node id %llu needs a %s id map, more than a quarter "
                          "of --mem %s; raise --mem",
                          c->path, (unsigned long long)c->line, (unsigned long long)id,
                          tg_fmt_bytes((w + 1) * IDMAP_BYTES_PER_WORD, b1, sizeof b1),
                          tg_fmt_bytes(mem, b2, sizeof b2));
        }
        uint64_t nw = TG_MAX(m->nwords * 2, w + 1);
        nw = TG_MIN(TG_MAX(nw, (uint64_t)1024), m->max_words);
        uint64_t *nb = realloc(m->bits, nw * 8);
        if (!nb) return tg_err(-ENOMEM, "out of memory for the node id bitmap");
        memset(nb + m->nwords, 0, (nw - m->nwords) * 8);
        m->bits = nb;
        m->nwords = nw;
    }
    m->bits[w] |= 1ull << (id & 63);
    if (!m->any || id > m->max_id) m->max_id = id;
    m->any = 1;
    return 0;
}

static int idmap_build_rank(idmap_t *m)
{
    m->super_rank = malloc(((m->nwords >> 16) + 1) * sizeof *m->super_rank);
    m->word_rank = malloc(TG_MAX(m->nwords, (uint64_t)1) * sizeof *m->word_rank);
    if (!m->super_rank || !m->word_rank)
        return tg_err(-ENOMEM, "out of memory for the id rank table");
    uint64_t acc = 0;
    for (uint64_t w = 0; w < m->nwords; w++) {
        if ((w & 0xffff) == 0) m->super_rank[w >> 16] = acc;
        m->word_rank[w] = (uint32_t)(acc - m->super_rank[w >> 16]);
        acc += popcount64(m->bits[w]);
    }
    m->count = acc;
    return 0;
}

/* Rank of a marked id: new id in 0..count-1. */
static inline uint64_t idmap_rank(const idmap_t *m, uint64_t id)
{
    uint64_t w = id >> 6;
    return m->super_rank[w >> 16] + m->word_rank[w] +
           popcount64(m->bits[w] & ((1ull << (id & 63)) - 1));
}

static void idmap_free(idmap_t *m)
{
    free(m->bits);
    free(m->super_rank);
    free(m->word_rank);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- the two passes */

static int row_ids(const tg_csv_t *c, int64_t *s, int64_t *d)
{
    int rc;
    if (tg_csv_nfields(c) < 2)
        return tg_err(-EINVAL, "%s: line %llu: expected two node ids, got %zu field%s", c->path,
                      (unsigned long long)c->line, tg_csv_nfields(c),
                      tg_csv_nfields(c) == 1 ? "" : "s");
    if ((rc = tg_csv_get_i64(c, 0, s)) || (rc = tg_csv_get_i64(c, 1, d))) return rc;
    if (*s < 0 || *d < 0)
        return tg_err(-EINVAL, "%s: line %llu: negative node id %lld", c->path,
                      (unsigned long long)c->line, (long long)(*s < 0 ? *s : *d));
    return 0;
}

static int pass1(const char *path, idmap_t *m, uint64_t *edges, uint64_t mem)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, path, TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges (pass 1/2: ids)", tg_imp_file_size(path));
    uint64_t e = 0;
    int64_t s, d;
    while ((rc = tg_csv_next_pair(&c, &s, &d)) > 0) {
        if ((rc == 1 && (rc = row_ids(&c, &s, &d))) || (rc = idmap_mark(m, (uint64_t)s, &c, mem)) ||
            (rc = idmap_mark(m, (uint64_t)d, &c, mem)))
            break;
        e++;
        if ((e & 0xfffff) == 0) tg_imp_prog_update(&pr, tg_csv_offset(&c));
    }
    tg_imp_prog_end(&pr, rc == 0);
    tg_csv_close(&c);
    *edges = e;
    return rc;
}

static int pass2(tg_imp_t *im, const char *path, const idmap_t *m, int dense, uint64_t edges)
{
    tg_csv_t c;
    int rc = tg_csv_open(&c, path, TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK);
    if (rc) return rc;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges (pass 2/2)", tg_imp_file_size(path));
    uint64_t e = 0;
    int64_t s, d;
    while ((rc = tg_csv_next_pair(&c, &s, &d)) > 0) {
        if (rc == 1 && (rc = row_ids(&c, &s, &d))) break;
        uint64_t us = (uint64_t)s, ud = (uint64_t)d;
        if (us >= m->nwords * 64 || ud >= m->nwords * 64 || !(m->bits[us >> 6] >> (us & 63) & 1) ||
            !(m->bits[ud >> 6] >> (ud & 63) & 1)) {
            rc = tg_err(-EINVAL, "%s: line %llu: the file changed while it was imported", path,
                        (unsigned long long)c.line);
            break;
        }
        if (!dense) {
            us = idmap_rank(m, us);
            ud = idmap_rank(m, ud);
        }
        if ((rc = tg_imp_edge(im, us, ud))) break;
        e++;
        if ((e & 0xfffff) == 0) tg_imp_prog_update(&pr, tg_csv_offset(&c));
    }
    tg_imp_prog_end(&pr, rc == 0);
    tg_csv_close(&c);
    if (!rc && e != edges)
        rc = tg_err(-EINVAL, "%s: the file changed while it was imported (%llu edges, then %llu)",
                    path, (unsigned long long)edges, (unsigned long long)e);
    return rc;
}

/* ---------------------------------------------------------------- synthetic node data
 *
 * The same recipe as `tiergnn generate` (features = class centroid + Gaussian noise, random
 * split), written here so the importer does not depend on the generator's internals. Labels
 * come from the graph: a few rounds of label propagation from random seeds, so that neighbours
 * tend to share a class and a GNN has something to learn from the edges. */

#define LP_ROUNDS 3

/* Sequential reader of an array file of the temp dataset in blocks, widened to u64. */
typedef struct {
    int fd;
    const char *path;
    size_t isz; /* bytes per element on disk: 4 or 8 */
    uint8_t *raw;
    uint64_t *v;
    size_t cap, n, pos; /* elements */
    uint64_t off;       /* next file offset */
} seqr_t;

#define SEQR_ELEMS (1u << 16)

static int seqr_open(seqr_t *r, const char *path, size_t isz, uint8_t *raw, uint64_t *v)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->isz = isz;
    r->raw = raw;
    r->v = v;
    r->cap = SEQR_ELEMS;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

/* Reads the next block; an error if the file ends first (it was written moments ago). */
static int seqr_fill(seqr_t *r)
{
    ssize_t got = pread(r->fd, r->raw, r->cap * r->isz, (off_t)r->off);
    if (got < 0) return tg_err(-errno, "%s: read error: %s", r->path, strerror(errno));
    size_t n = (size_t)got / r->isz;
    if (!n)
        return tg_err(-EIO, "%s: offset %llu: unexpected end of file", r->path,
                      (unsigned long long)r->off);
    r->off += n * r->isz;
    if (r->isz == 8) {
        memcpy(r->v, r->raw, n * 8);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, r->raw + 4 * i, 4);
            r->v[i] = x;
        }
    }
    r->n = n;
    r->pos = 0;
    return 0;
}

static inline int seqr_get(seqr_t *r, uint64_t *out)
{
    if (r->pos == r->n) {
        int rc = seqr_fill(r);
        if (rc) return rc;
    }
    *out = r->v[r->pos++];
    return 0;
}

/* One synchronous round: next[v] = most frequent label among v and its in-neighbours. The
 * label lookups cur[u] are random accesses; prefetching a few edges ahead keeps several cache
 * misses in flight (it halved the time of a round on a random graph). */
static int lp_round(tg_imp_t *im, const uint16_t *cur, uint16_t *next, uint32_t *cnt,
                    uint16_t *touched, void *bufs)
{
    const tg_meta_t *m = &im->dsw.meta;
    char pp[4096], pi[4096];
    tg_dsw_path(&im->dsw, TG_FILE_INDPTR, pp, sizeof pp);
    tg_dsw_path(&im->dsw, TG_FILE_INDICES, pi, sizeof pi);
    uint8_t *raw = bufs;
    uint64_t *vals = (uint64_t *)(raw + 2 * (size_t)SEQR_ELEMS * 8);
    seqr_t rp, ri;
    int rc = seqr_open(&rp, pp, 8, raw, vals);
    if (rc) return rc;
    if ((rc = seqr_open(&ri, pi, tg_index_dtype_size(m->index_dtype), raw + SEQR_ELEMS * 8,
                        vals + SEQR_ELEMS))) {
        close(rp.fd);
        return rc;
    }
    enum { AHEAD = 16 };
    uint64_t beg = 0, end = 0;
    if ((rc = seqr_get(&rp, &beg))) goto out;
    for (uint64_t v = 0; v < m->num_nodes; v++, beg = end) {
        if ((rc = seqr_get(&rp, &end))) goto out;
        size_t nt = 0;
        uint16_t best = cur[v];
        cnt[best] = 1;
        touched[nt++] = best;
        uint32_t bestc = 1;
        for (uint64_t k = beg; k < end; k++) {
            if (ri.pos == ri.n && (rc = seqr_fill(&ri))) goto out;
            if (ri.pos + AHEAD < ri.n) __builtin_prefetch(cur + ri.v[ri.pos + AHEAD]);
            uint16_t l = cur[ri.v[ri.pos++]];
            if (!cnt[l]) touched[nt++] = l;
            if (++cnt[l] > bestc) {
                bestc = cnt[l];
                best = l;
            }
        }
        next[v] = best;
        for (size_t k = 0; k < nt; k++)
            cnt[touched[k]] = 0;
    }
out:
    close(rp.fd);
    close(ri.fd);
    return rc;
}

/* Fills out[0..n) with approximately N(0,1) noise: the Irwin-Hall sum of four 16-bit uniforms
 * from one 64-bit draw, centred and scaled to unit variance (bounded at +-3.46). It is noise on
 * a synthetic signal, so the missing tails do not matter, and it costs one RNG call and no
 * log/sqrt/cos per value: exact normals made the synthesis the slowest part of the import. */
static void noise(tg_rng_t *r, float *out, uint32_t n)
{
    const float scale = 1.7320508f / 65536.0f; /* sqrt(12/4) / 2^16 */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = tg_rng_u64(r);
        uint32_t s = (uint32_t)(x & 0xffff) + (uint32_t)(x >> 16 & 0xffff) +
                     (uint32_t)(x >> 32 & 0xffff) + (uint32_t)(x >> 48);
        out[i] = ((float)s - 2.0f * 65535.0f) * scale;
    }
}

/* The random class a node starts from (and keeps when there is no propagation). */
static uint16_t seed_label(const tg_import_opts_t *o, uint64_t v)
{
    tg_rng_t r;
    tg_rng_seed2(&r, o->seed ^ 0x6c61626c, v);
    return (uint16_t)tg_rng_below(&r, o->classes);
}

static int gen_node_data(tg_imp_t *im)
{
    const tg_import_opts_t *o = im->o;
    tg_meta_t *m = &im->dsw.meta;
    uint64_t n = m->num_nodes;
    uint32_t c = o->classes, d = o->feat_dim;
    int rc = 0;
    uint16_t *lab = NULL, *nxt = NULL, *touched = NULL, *tmp = NULL;
    uint32_t *cnt = NULL;
    void *bufs = NULL;
    float *mu = NULL, *row = NULL;

    /* Labels: random seeds, then LP_ROUNDS of majority vote over in-neighbours. That needs two
     * label arrays (4 bytes a node); the sort is finished, so its share of --mem is free again.
     * Without the memory (or with one class) labels stay the random seeds, computed per node
     * on the fly below, so memory stays bounded either way. */
    tg_rng_t rng;
    if (c > 1 && n * 2 * sizeof *lab <= o->mem_bytes) {
        lab = malloc(n * sizeof *lab);
        nxt = malloc(n * sizeof *nxt);
        cnt = calloc(c, sizeof *cnt);
        touched = malloc(((size_t)c + 1) * sizeof *touched);
        bufs = malloc(4 * (size_t)SEQR_ELEMS * 8); /* raw + widened, indptr and indices */
        if (!lab || !nxt || !cnt || !touched || !bufs) {
            rc = tg_err(-ENOMEM, "out of memory for label propagation over %llu nodes",
                        (unsigned long long)n);
            goto out;
        }
        for (uint64_t v = 0; v < n; v++)
            lab[v] = seed_label(o, v);
        double t0 = tg_now();
        for (int r = 0; r < LP_ROUNDS; r++) {
            if ((rc = lp_round(im, lab, nxt, cnt, touched, bufs))) goto out;
            uint16_t *t = lab;
            lab = nxt;
            nxt = t;
        }
        tg_log_info("labels: %d rounds of label propagation in %.1f s", LP_ROUNDS, tg_now() - t0);
    } else if (c > 1) {
        tg_log_warn("edgelist: labels are random, not from the graph (label propagation needs "
                    "%llu bytes, more than --mem)",
                    (unsigned long long)(n * 4));
    }
    free(nxt);
    nxt = NULL;

    /* Features: centroid of the class (N(0,1) per dimension) + feat_noise * noise(0,1). */
    mu = malloc((size_t)c * d * sizeof *mu);
    row = malloc((size_t)d * sizeof *row);
    tmp = malloc((size_t)d * sizeof *tmp);
    if (!mu || !row || !tmp) {
        rc = tg_err(-ENOMEM, "out of memory for %u class centroids of dimension %u", c, d);
        goto out;
    }
    tg_rng_seed2(&rng, o->seed, 0xce47);
    for (size_t i = 0; i < (size_t)c * d; i++)
        mu[i] = (float)tg_rng_normal(&rng);
    tg_filew_t fw[5];
    int open_n = 0;
    static const tg_file_id_t ids[5] = {TG_FILE_FEATURES, TG_FILE_LABELS, TG_FILE_TRAIN,
                                        TG_FILE_VALID, TG_FILE_TEST};
    for (; open_n < 5; open_n++)
        if ((rc = tg_imp_open(im, ids[open_n], &fw[open_n], open_n ? (1u << 20) : 0))) break;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "features", n * d * tg_feat_dtype_size(o->feat_dtype));
    double t1 = o->train_frac, t2 = t1 + o->valid_frac, t3 = t2 + o->test_frac;
    tg_rng_seed2(&rng, o->seed, 0x5b1d);
    double split_start = tg_rng_uniform(&rng) * t1;
    for (uint64_t v = 0; v < n && !rc; v++) {
        tg_rng_seed2(&rng, o->seed, v + 1);
        uint16_t lv = lab ? lab[v] : seed_label(o, v);
        const float *mc = mu + (size_t)lv * d;
        noise(&rng, row, d);
        for (uint32_t j = 0; j < d; j++)
            row[j] = mc[j] + (float)o->feat_noise * row[j];
        if ((rc = tg_imp_put_feat_row(im, &fw[0], row, d, tmp))) break;
        int32_t l = lv;
        if ((rc = tg_filew_write(&fw[1], &l, 4))) break;
        /* Golden-ratio (Weyl) sequence from a seeded start: the fractions come out exact to
         * about one node for any N and spread evenly over the id range, and the start lies in
         * [0, train_frac) so node 0 is in train and even a 2-node graph has a training node
         * (independent coin flips left tiny graphs without one). */
        double u = split_start + (double)v * 0.6180339887498949;
        u -= floor(u);
        tg_file_id_t which = u < t1   ? TG_FILE_TRAIN
                             : u < t2 ? TG_FILE_VALID
                             : u < t3 ? TG_FILE_TEST
                                      : TG_FILE_COUNT;
        if (which != TG_FILE_COUNT &&
            (rc = tg_imp_split_add(im, &fw[2 + (which - TG_FILE_TRAIN)], which, (int64_t)v,
                                   "edgelist", "node", v)))
            break;
        if ((v & 0xffff) == 0) tg_imp_prog_update(&pr, v * d * tg_feat_dtype_size(o->feat_dtype));
    }
    tg_imp_prog_end(&pr, rc == 0);
    if (!rc && m->num_train == 0)
        rc = tg_err(-EINVAL, "edgelist: no training nodes (%llu nodes, --train-frac %g)",
                    (unsigned long long)n, o->train_frac);
    m->feat_dim = d;
    m->num_classes = c;
    m->multi_label = 0;
    for (int i = 0; i < open_n; i++) {
        if (rc)
            tg_filew_discard(&fw[i]);
        else
            rc = tg_dsw_close_file(&im->dsw, ids[i], &fw[i]);
    }
out:
    free(lab);
    free(nxt);
    free(cnt);
    free(touched);
    free(bufs);
    free(mu);
    free(row);
    free(tmp);
    return rc;
}

int tg_import_edgelist(const char *out_dir, const tg_import_opts_t *opts)
{
    tg_import_opts_t o = *opts;
    const char *path = o.src;
    idmap_t map;
    memset(&map, 0, sizeof map);
    /* The id map (3/16 byte per id) may take a quarter of --mem. */
    map.max_words = TG_MAX((uint64_t)1024, o.mem_bytes / 4 / IDMAP_BYTES_PER_WORD);
    uint64_t edges = 0;
    int rc = pass1(path, &map, &edges, o.mem_bytes);
    if (!rc && !edges) rc = tg_err(-EINVAL, "%s: no edges (only comments or blank lines)", path);
    if (!rc) rc = idmap_build_rank(&map);
    if (rc) {
        idmap_free(&map);
        return rc;
    }
    uint64_t n = map.count;
    int dense = n == map.max_id + 1;
    tg_log_info("import edgelist %s: %llu edges, %llu nodes (ids 0..%llu%s)", path,
                (unsigned long long)edges, (unsigned long long)n, (unsigned long long)map.max_id,
                dense ? ", already dense" : ", renumbered by rank");
    uint64_t map_bytes = map.nwords * IDMAP_BYTES_PER_WORD;
    o.mem_bytes = o.mem_bytes > 2 * map_bytes ? o.mem_bytes - map_bytes : o.mem_bytes / 2;
    char source[512];
    snprintf(source, sizeof source,
             "import --from edgelist %s --feat-dim %u --classes %u --seed %llu --feat-noise %g "
             "--train-frac %g --valid-frac %g --test-frac %g%s%s%s",
             path, o.feat_dim, o.classes, (unsigned long long)o.seed, o.feat_noise, o.train_frac,
             o.valid_frac, o.test_frac, o.undirected ? " --undirected" : "",
             o.dedup ? " --dedup" : "", o.self_loops ? " --self-loops" : "");
    tg_imp_t im;
    if ((rc = tg_imp_begin(&im, out_dir, &o, source))) {
        idmap_free(&map);
        return rc;
    }
    if (!(rc = tg_imp_edges_begin(&im, n)) && !(rc = pass2(&im, path, &map, dense, edges))) {
        idmap_free(&map); /* before the sort's merge and the synthesis need memory */
        tg_log_info("edges: %llu read, sorting into CSC", (unsigned long long)im.edges_in);
        rc = tg_imp_edges_finish(&im);
    }
    idmap_free(&map);
    o.mem_bytes = opts->mem_bytes; /* the sort is done: the synthesis may use all of --mem */
    if (!rc) rc = gen_node_data(&im);
    if (!rc) rc = tg_imp_commit(&im);
    tg_imp_abort(&im);
    return rc;
}
