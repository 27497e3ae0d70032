/* Out-degree counts from indices.bin and the top of their ranking (tiergnn/outdeg.h). */
#include <stdlib.h>
#include <string.h>

#include "tiergnn/derived.h"
#include "tiergnn/io.h"
#include "tiergnn/outdeg.h"

#define READ_BYTES ((size_t)4 << 20) /* one sweep step of indices.bin, one step of the counts */
#define IO_DEPTH 4u                  /* 4 reads of 1 MiB in flight: sequential bandwidth */
#define IO_MAX_READ ((size_t)1 << 20)
#define SCAN_BYTES ((size_t)256 << 10) /* a piece of the derived counts while selecting */
#define WRITE_BUF ((size_t)1 << 20)
#define DEFAULT_MEM ((uint64_t)256 << 20)
#define HIST 65536u
#define MIN_CHUNK ((uint64_t)1024) /* counts per sweep at the least */
/* What a sweep holds beside the counts: the read buffer, io/ staging and its bookkeeping. */
#define SWEEP_BYTES (READ_BYTES + IO_DEPTH * IO_MAX_READ + ((uint64_t)64 << 10))

struct tg_outdeg {
    tg_derived_file_t *file; /* the counts on disk, or */
    uint32_t *counts;        /* (num_nodes) in RAM */
    uint32_t *buf;           /* SCAN_BYTES: a piece of the file */
    uint64_t num_nodes, reserved;
    tg_budget_t *budget;
};

/* ---------------------------------------------------------------- counting */

typedef struct {
    tg_io_file_t *f;
    tg_io_t *io;
    void *buf;
    size_t esz;
    uint64_t bytes, num_nodes;
    size_t read;         /* bytes per step: READ_BYTES, less for a small file */
    tg_budget_t *budget; /* the read buffer is reserved here (NULL: not accounted) */
} sweep_t;

static void sweep_close(sweep_t *s)
{
    tg_io_destroy(s->io);
    tg_io_file_close(s->f);
    if (s->buf && s->budget) tg_budget_release(s->budget, s->read);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

static int sweep_open(sweep_t *s, const tg_dataset_t *ds, tg_budget_t *budget)
{
    memset(s, 0, sizeof *s);
    char path[4096];
    tg_dataset_path(ds, TG_FILE_INDICES, path, sizeof path);
    s->esz = tg_index_dtype_size(ds->meta.index_dtype);
    s->bytes = ds->meta.num_edges * s->esz;
    s->num_nodes = ds->meta.num_nodes;
    /* small files, small buffers (what a small run frees may still count in its RSS) */
    s->read = (size_t)TG_MIN((uint64_t)READ_BYTES, (s->bytes + 4095) / 4096 * 4096 + 4096);
    tg_io_opts_t io = {
        .depth = IO_DEPTH, .max_read_bytes = TG_MIN(IO_MAX_READ, s->read), .budget = budget};
    int rc = tg_io_file_open(&s->f, path, 0);
    if (rc == 0) rc = tg_io_create(&s->io, &io);
    if (rc == 0 && budget) rc = tg_budget_reserve(budget, s->read, "out-degree sweep");
    if (rc == 0 && !(s->buf = malloc(s->read))) {
        if (budget) tg_budget_release(budget, s->read);
        rc = tg_err(-ENOMEM, "out-degrees: out of memory for the read buffer");
    }
    s->budget = budget;
    if (rc < 0) sweep_close(s);
    return rc;
}

/* counts[0..n) = appearances of nodes lo..lo+n-1 in indices.bin: one sweep of the file. The
 * first sweep (lo == 0) also checks every entry against the node count. */
static int sweep_count(sweep_t *s, uint64_t lo, uint64_t n, uint32_t *counts)
{
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (uint64_t off = 0; off < s->bytes; off += s->read) {
        size_t len = (size_t)TG_MIN((uint64_t)s->read, s->bytes - off), m = len / s->esz;
        int rc = tg_io_read(s->io, s->f, off, len, s->buf);
        if (rc < 0) return tg_err_prefix(rc, "counting out-degrees");
        for (size_t i = 0; i < m; i++) {
            uint64_t v =
                s->esz == 4 ? ((const uint32_t *)s->buf)[i] : ((const uint64_t *)s->buf)[i];
            if (lo == 0 && v >= s->num_nodes)
                return tg_err(-EINVAL, "%s: entry at offset %llu is %llu, expected < %llu nodes",
                              tg_io_file_path(s->f), (unsigned long long)(off + i * s->esz),
                              (unsigned long long)v, (unsigned long long)s->num_nodes);
            if (v - lo < n && counts[v - lo] != UINT32_MAX) counts[v - lo]++;
        }
    }
    return 0;
}

/* Writes the derived file, mem bytes of counts at a time. 1 = built, 2 = the directory cannot
 * be written (logged), < 0 = an error of indices.bin or memory. */
static int build_file(const tg_dataset_t *ds, const char *root, uint64_t mem, tg_budget_t *budget)
{
    uint64_t N = ds->meta.num_nodes;
    uint64_t chunk = TG_MIN(TG_MAX(mem / sizeof(uint32_t), MIN_CHUNK), N);
    size_t wbuf = (size_t)TG_MIN((uint64_t)WRITE_BUF, (chunk * 4 + 4095) / 4096 * 4096);
    uint64_t held = chunk * sizeof(uint32_t) + 2 * wbuf;
    tg_derived_writer_t *w = NULL;
    uint32_t *counts = NULL;
    sweep_t s;
    int rc = tg_derived_create(&w, ds, root, TG_OUTDEG_KIND, TG_OUTDEG_PARAMS, wbuf);
    if (rc < 0) goto unwritable;
    if (budget && (rc = tg_budget_reserve(budget, held, "out-degree counts")) < 0) {
        tg_derived_abort(w);
        return rc;
    }
    if ((rc = sweep_open(&s, ds, budget)) == 0) {
        if (!(counts = malloc((size_t)chunk * sizeof *counts + 1)))
            rc = tg_err(-ENOMEM, "out-degrees: out of memory for %llu counts",
                        (unsigned long long)chunk);
        if (N > chunk && rc == 0)
            tg_log_info("out-degrees: %llu nodes in %llu sweeps of indices.bin (%llu counts each)",
                        (unsigned long long)N, (unsigned long long)((N + chunk - 1) / chunk),
                        (unsigned long long)chunk);
        for (uint64_t lo = 0; rc == 0 && lo < N; lo += chunk) {
            uint64_t n = TG_MIN(chunk, N - lo);
            if ((rc = sweep_count(&s, lo, n, counts)) == 0 &&
                tg_derived_append(w, counts, (size_t)n * sizeof *counts) < 0)
                rc = 2; /* the derived directory's fault (full, read-only): count in RAM */
        }
        sweep_close(&s);
    }
    free(counts);
    if (budget) tg_budget_release(budget, held);
    if (rc != 0) {
        tg_derived_abort(w);
        if (rc < 0) return rc;
    } else if (tg_derived_commit(w) == 0) {
        return 1;
    }
unwritable:
    tg_log_info("out-degrees: cannot write the derived file (%s); counting in RAM instead",
                tg_errmsg());
    return 2;
}

/* The valid derived file into *f (0), built first (1); 2 = there is none to be had (the
 * directory cannot be written or read: logged); < 0 = an error of indices.bin or memory. */
static int find_or_build(const tg_dataset_t *ds, const char *root, uint64_t mem,
                         tg_budget_t *budget, tg_derived_file_t **f)
{
    int rc = tg_derived_open(f, ds, root, TG_OUTDEG_KIND, TG_OUTDEG_PARAMS, 0);
    /* the header's payload size is only checked against the file's: a header rewritten with
     * another size would pass, and every read past it then fail (fuzz_outdeg) */
    if (rc == 0 && (*f)->payload_len != ds->meta.num_nodes * sizeof(uint32_t)) {
        rc =
            tg_err(-ESTALE, "%s: stale, %llu payload bytes, expected %llu (4 per node); rebuild it",
                   (*f)->path, (unsigned long long)(*f)->payload_len,
                   (unsigned long long)(ds->meta.num_nodes * sizeof(uint32_t)));
        tg_derived_close(*f);
        *f = NULL;
    }
    if (rc == 0 || rc == -EINVAL) return rc;
    if (rc != -ENOENT && rc != -ESTALE) {
        tg_log_info("out-degrees: cannot read the derived file (%s); counting in RAM instead",
                    tg_errmsg());
        return 2;
    }
    if (rc == -ESTALE) tg_log_info("out-degrees: %s", tg_errmsg()); /* says it is rebuilt */
    if ((rc = build_file(ds, root, mem, budget)) != 1) return rc;
    rc = tg_derived_open(f, ds, root, TG_OUTDEG_KIND, TG_OUTDEG_PARAMS, 0);
    return rc < 0 ? rc : 1;
}

int tg_outdeg_prepare(const tg_dataset_t *ds, const char *root, uint64_t mem)
{
    tg_derived_file_t *f = NULL;
    int rc = find_or_build(ds, root, mem ? mem : DEFAULT_MEM, NULL, &f);
    tg_derived_close(f);
    return rc;
}

/* ---------------------------------------------------------------- the handle */

void tg_outdeg_close(tg_outdeg_t *od)
{
    if (!od) return;
    tg_derived_close(od->file);
    free(od->counts);
    free(od->buf);
    if (od->budget && od->reserved) tg_budget_release(od->budget, od->reserved);
    free(od);
}

int tg_outdeg_open(tg_outdeg_t **out, const tg_dataset_t *ds, const char *root, tg_budget_t *budget)
{
    *out = NULL;
    tg_outdeg_t *od = calloc(1, sizeof *od);
    if (!od) return tg_err(-ENOMEM, "out-degrees: out of memory");
    od->num_nodes = ds->meta.num_nodes;
    od->budget = budget;
    uint64_t mem = DEFAULT_MEM;
    if (budget && budget->limit)
        mem = budget->limit > budget->used + 2 * SWEEP_BYTES
                  ? budget->limit - budget->used - 2 * SWEEP_BYTES
                  : 1;
    int rc = find_or_build(ds, root, mem, budget, &od->file);
    if (rc == 2) {
        /* no derived file to be had: every count in RAM while the handle lives */
        uint64_t bytes = od->num_nodes * sizeof(uint32_t);
        sweep_t s;
        if ((rc = budget ? tg_budget_reserve(budget, bytes, "out-degree counts in RAM") : 0) < 0)
            goto err;
        od->reserved = bytes;
        if (!(od->counts = malloc((size_t)bytes + 1))) {
            rc = tg_err(-ENOMEM, "out-degrees: out of memory for %llu counts",
                        (unsigned long long)od->num_nodes);
            goto err;
        }
        if ((rc = sweep_open(&s, ds, budget)) < 0) goto err;
        rc = sweep_count(&s, 0, od->num_nodes, od->counts);
        sweep_close(&s);
    } else if (rc >= 0) {
        if ((rc = budget ? tg_budget_reserve(budget, SCAN_BYTES, "out-degree reads") : 0) < 0)
            goto err;
        od->reserved = SCAN_BYTES;
        if (!(od->buf = malloc(SCAN_BYTES))) rc = tg_err(-ENOMEM, "out-degrees: out of memory");
    }
    if (rc < 0) goto err;
    *out = od;
    return 0;
err:
    tg_outdeg_close(od);
    return rc;
}

int tg_outdeg_in_ram(const tg_outdeg_t *od)
{
    return od->counts != NULL;
}

int tg_outdeg_counts(tg_outdeg_t *od, uint64_t first, uint64_t n, uint32_t *out)
{
    if (first > od->num_nodes || n > od->num_nodes - first)
        return tg_err(-EINVAL, "out-degrees: nodes %llu..+%llu past %llu nodes",
                      (unsigned long long)first, (unsigned long long)n,
                      (unsigned long long)od->num_nodes);
    if (od->counts) {
        memcpy(out, od->counts + first, (size_t)n * sizeof *out);
        return 0;
    }
    return tg_derived_read(od->file, out, (size_t)n * sizeof *out, first * sizeof *out);
}

/* ---------------------------------------------------------------- the top k */

typedef struct {
    uint64_t *hist;   /* HIST */
    uint32_t bucket;  /* pass 2: the high half of the k-th count */
    uint32_t t;       /* pass 3: the k-th count */
    uint64_t eq_left; /* pass 3: nodes at t still to take */
    uint64_t *keys, nkeys;
} select_t;

/* Pass 0: histogram of the high halves; 1: of the low halves within the bucket; 2: collect
 * (count << 32 | ~id) keys, the lowest ids first at the threshold. */
static void visit(select_t *x, int pass, uint64_t first, const uint32_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (pass == 0)
            x->hist[c[i] >> 16]++;
        else if (pass == 1 && c[i] >> 16 == x->bucket)
            x->hist[c[i] & 0xffffu]++;
        else if (pass == 2 && (c[i] > x->t || (c[i] == x->t && x->eq_left && x->eq_left--)))
            x->keys[x->nkeys++] = (uint64_t)c[i] << 32 | (UINT32_MAX - (uint32_t)(first + i));
    }
}

static int scan(tg_outdeg_t *od, select_t *x, int pass)
{
    size_t step = SCAN_BYTES / sizeof(uint32_t);
    for (uint64_t first = 0; first < od->num_nodes; first += step) {
        size_t n = (size_t)TG_MIN((uint64_t)step, od->num_nodes - first);
        const uint32_t *c = od->counts ? od->counts + first : od->buf;
        int rc = od->counts ? 0 : tg_outdeg_counts(od, first, n, od->buf);
        if (rc < 0) return rc;
        visit(x, pass, first, c, n);
    }
    return 0;
}

/* The largest h with above + sum(hist[h..]) >= k; adds the counts above h to *above. */
static uint32_t kth_bucket(const uint64_t *hist, uint64_t k, uint64_t *above)
{
    uint32_t h = HIST - 1;
    while (h > 0 && *above + hist[h] < k)
        *above += hist[h--];
    return h;
}

static int cmp_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

int tg_outdeg_top(tg_outdeg_t *od, uint64_t k, uint64_t *ids, uint64_t *hot)
{
    k = TG_MIN(k, od->num_nodes);
    if (hot) *hot = 0;
    if (k == 0) return 0;
    select_t x = {.hist = calloc(HIST, sizeof(uint64_t)), .keys = ids};
    if (!x.hist) return tg_err(-ENOMEM, "out-degrees: out of memory");
    uint64_t above = 0;
    int rc = scan(od, &x, 0);
    if (rc == 0) {
        x.bucket = kth_bucket(x.hist, k, &above);
        memset(x.hist, 0, HIST * sizeof *x.hist);
        rc = scan(od, &x, 1);
    }
    if (rc == 0) {
        x.t = x.bucket << 16 | kth_bucket(x.hist, k, &above);
        x.eq_left = k - above;
        rc = scan(od, &x, 2);
    }
    free(x.hist);
    if (rc < 0) return rc;
    qsort(ids, (size_t)x.nkeys, sizeof *ids, cmp_desc);
    for (uint64_t i = 0; i < x.nkeys; i++) {
        if (hot) *hot += ids[i] >> 32;
        ids[i] = UINT32_MAX - (ids[i] & UINT32_MAX);
    }
    return 0;
}
