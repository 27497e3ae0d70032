/* Spill files: sampled batches written to an unnamed file and read back (see tiergnn/graph.h).
 *
 * One buffer serves both directions: while writing it collects records and leaves in one
 * pwrite when full; while reading it is refilled with pread. s->off is the logical offset of the
 * next byte written or read, s->size the bytes written since the last reset. */
#include "tiergnn/graph.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPILL_MAGIC 0x50534754u /* "TGSP" in a little-endian file */
#define F_NODES32 1u
#define F_INDPTR32 2u
#define F_WEIGHTS 4u /* f32 edge weights after each layer's indices */
#define DEFAULT_BUF (4u << 20)
#define MIN_BUF (64u << 10)

typedef struct {
    uint32_t magic, flags;
    uint64_t id;
    uint32_t num_layers, num_nodes, num_seeds, zero;
    uint64_t payload;
} rec_head_t;

typedef struct {
    uint32_t num_dst, num_src;
    uint64_t num_edges;
} rec_layer_t;

struct tg_spill {
    int fd;
    int reading, failed;
    uint8_t *buf;
    size_t cap;
    size_t fill, pos; /* writing: fill = bytes buffered; reading: buf[pos .. fill) unread */
    uint64_t off;     /* logical offset of the next byte */
    uint64_t bufoff;  /* reading: file offset of buf[0] */
    uint64_t size, count;
    uint32_t crc; /* of the record so far */
    tg_budget_t *budget;
    uint64_t reserved;
    char name[4200];
};

/* ---------------------------------------------------------------- open / close */

static int create_file(tg_spill_t *s, const char *dir, unsigned flags)
{
    s->fd = tg_tmpfile_open(dir, "spill", (flags & TG_SPILL_NAMED) != 0, s->name, sizeof s->name);
    return s->fd < 0 ? s->fd : 0;
}

int tg_spill_open(tg_spill_t **out, const char *dir, const tg_spill_opts_t *opts)
{
    *out = NULL;
    tg_spill_opts_t o = {0};
    if (opts) o = *opts;
    if (!dir || !*dir) return tg_err(-EINVAL, "spill: no directory given");
    size_t cap = o.buf_bytes ? TG_MAX(o.buf_bytes, (size_t)MIN_BUF) : DEFAULT_BUF;
    tg_spill_t *s = calloc(1, sizeof *s);
    if (!s) return tg_err(-ENOMEM, "spill: out of memory");
    s->fd = -1;
    int rc;
    if (o.budget && (rc = tg_budget_reserve(o.budget, cap, "spill buffer")) < 0) {
        free(s);
        return rc;
    }
    s->budget = o.budget;
    s->reserved = o.budget ? cap : 0;
    s->cap = cap;
    if (!(s->buf = malloc(cap))) {
        rc = tg_err(-ENOMEM, "spill: out of memory for a %zu-byte buffer", cap);
        goto err;
    }
    if ((rc = create_file(s, dir, o.flags)) < 0) goto err;
    *out = s;
    return 0;
err:
    tg_spill_close(s);
    return rc;
}

void tg_spill_close(tg_spill_t *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->budget) tg_budget_release(s->budget, s->reserved);
    free(s->buf);
    free(s);
}

const char *tg_spill_name(const tg_spill_t *s)
{
    return s->name;
}

int tg_spill_fd(const tg_spill_t *s)
{
    return s->fd;
}

uint64_t tg_spill_count(const tg_spill_t *s)
{
    return s->count;
}

uint64_t tg_spill_bytes(const tg_spill_t *s)
{
    return s->size;
}

/* ---------------------------------------------------------------- writing */

static int flush(tg_spill_t *s)
{
    uint64_t at = s->off - s->fill;
    size_t done = 0;
    while (done < s->fill) {
        ssize_t w = pwrite(s->fd, s->buf + done, s->fill - done, (off_t)(at + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            s->failed = 1;
            return tg_err(-e, "%s: writing %zu bytes at offset %llu: %s", s->name, s->fill - done,
                          (unsigned long long)(at + done), strerror(e));
        }
        done += (size_t)w;
    }
    s->fill = 0;
    return 0;
}

static int put(tg_spill_t *s, const void *p, size_t n)
{
    const uint8_t *src = p;
    s->crc = tg_crc32(s->crc, p, n);
    while (n) {
        if (s->fill == s->cap) {
            int rc = flush(s);
            if (rc < 0) return rc;
        }
        size_t k = TG_MIN(n, s->cap - s->fill);
        memcpy(s->buf + s->fill, src, k);
        s->fill += k;
        s->off += k;
        src += k;
        n -= k;
    }
    return 0;
}

/* Writes a[0..n) as u32 (narrow) or u64. */
static int put_ids(tg_spill_t *s, const uint64_t *a, size_t n, int narrow)
{
    if (!narrow) return put(s, a, n * sizeof *a);
    uint32_t tmp[1024];
    for (size_t i = 0; i < n;) {
        size_t k = TG_MIN(n - i, (size_t)1024);
        for (size_t j = 0; j < k; j++)
            tmp[j] = (uint32_t)a[i + j];
        int rc = put(s, tmp, k * sizeof *tmp);
        if (rc < 0) return rc;
        i += k;
    }
    return 0;
}

static uint64_t payload_bytes(const rec_head_t *h, const rec_layer_t *ly)
{
    uint64_t w = h->flags & F_NODES32 ? 4 : 8, iw = h->flags & F_INDPTR32 ? 4 : 8;
    uint64_t n = (uint64_t)h->num_nodes * w;
    for (uint32_t l = 0; l < h->num_layers; l++)
        n += ((uint64_t)ly[l].num_dst + 1) * iw + ly[l].num_edges * (h->flags & F_WEIGHTS ? 8 : 4);
    return n;
}

int tg_spill_write(tg_spill_t *s, const tg_batch_t *b)
{
    if (s->failed) return tg_err(-EIO, "%s: an earlier error stopped this spill file", s->name);
    if (s->reading) return tg_err(-EINVAL, "%s: write while reading (reset first)", s->name);
    if (b->num_layers < 1 || b->num_layers > TG_MAX_LAYERS || !b->blocks)
        return tg_err(-EINVAL, "%s: batch %llu has %d layers, expected 1..%d", s->name,
                      (unsigned long long)b->id, b->num_layers, TG_MAX_LAYERS);
    rec_head_t h = {.magic = SPILL_MAGIC,
                    .flags = F_NODES32 | F_INDPTR32,
                    .id = b->id,
                    .num_layers = (uint32_t)b->num_layers,
                    .num_nodes = b->num_nodes,
                    .num_seeds = b->num_seeds};
    rec_layer_t ly[TG_MAX_LAYERS];
    for (uint32_t i = 0; i < b->num_nodes; i++)
        if (b->nodes[i] > UINT32_MAX) {
            h.flags &= ~F_NODES32;
            break;
        }
    if (b->blocks[0].weights) h.flags |= F_WEIGHTS;
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *bl = &b->blocks[l];
        ly[l] = (rec_layer_t){bl->num_dst, bl->num_src, bl->num_edges};
        if (bl->num_edges > UINT32_MAX) h.flags &= ~F_INDPTR32;
        if (!bl->weights != !(h.flags & F_WEIGHTS))
            return tg_err(-EINVAL,
                          "%s: batch %llu: block %d %s edge weights but block 0 %s; expected "
                          "all blocks weighted or none",
                          s->name, (unsigned long long)b->id, l, bl->weights ? "has" : "has no",
                          bl->weights ? "has none" : "has");
    }
    h.payload = payload_bytes(&h, ly);
    uint64_t start = s->off;
    s->crc = 0;
    int rc = put(s, &h, sizeof h);
    if (rc == 0) rc = put(s, ly, (size_t)b->num_layers * sizeof *ly);
    if (rc == 0) rc = put_ids(s, b->nodes, b->num_nodes, h.flags & F_NODES32);
    for (int l = 0; rc == 0 && l < b->num_layers; l++) {
        const tg_block_t *bl = &b->blocks[l];
        rc = put_ids(s, bl->indptr, (size_t)bl->num_dst + 1, h.flags & F_INDPTR32);
        if (rc == 0) rc = put(s, bl->indices, bl->num_edges * sizeof *bl->indices);
        if (rc == 0 && (h.flags & F_WEIGHTS))
            rc = put(s, bl->weights, bl->num_edges * sizeof *bl->weights);
    }
    uint32_t crc = s->crc;
    if (rc == 0) rc = put(s, &crc, sizeof crc);
    if (rc < 0)
        return tg_err_prefix(rc, "spill: batch %llu (record at offset %llu)",
                             (unsigned long long)b->id, (unsigned long long)start);
    s->size = s->off;
    s->count++;
    return 0;
}

int tg_spill_fill(tg_spill_t *s, tg_sloader_t *l, uint64_t max, uint64_t *written)
{
    uint64_t n = 0;
    int rc = 0;
    while (n < max) {
        tg_sloader_item_t *it;
        if ((rc = tg_sloader_next(l, &it)) <= 0) break;
        rc = tg_spill_write(s, &it->batch);
        tg_sloader_item_free(l, it);
        if (rc < 0) break;
        n++;
    }
    if (written) *written = n;
    return rc < 0 ? rc : 0;
}

int tg_spill_rewind(tg_spill_t *s)
{
    if (!s->reading) {
        if (s->failed) return tg_err(-EIO, "%s: an earlier error stopped this spill file", s->name);
        int rc = flush(s);
        if (rc < 0) return rc;
    }
    s->reading = 1;
    s->failed = 0;
    s->off = s->bufoff = 0;
    s->fill = s->pos = 0;
    return 0;
}

int tg_spill_read_item(tg_spill_t *s, uint64_t id, uint64_t num_nodes, double sample_s,
                       tg_sloader_item_t **out)
{
    *out = NULL;
    tg_sloader_item_t *it = calloc(1, sizeof *it);
    if (!it)
        return tg_err(-ENOMEM, "%s: out of memory for batch %llu", s->name, (unsigned long long)id);
    int rc = tg_spill_read(s, &it->batch);
    if (rc == 0)
        rc = tg_err(-EIO, "%s: ended before batch %llu", s->name, (unsigned long long)id);
    else if (rc > 0 && num_nodes == TG_SPILL_ANY_NODES && it->batch.id != id)
        rc = tg_err(-EIO, "%s: holds batch %llu where batch %llu was expected", s->name,
                    (unsigned long long)it->batch.id, (unsigned long long)id);
    else if (rc > 0 && num_nodes != TG_SPILL_ANY_NODES &&
             (it->batch.id != id || it->batch.num_nodes != num_nodes))
        rc = tg_err(-EIO,
                    "%s: holds batch %llu of %u rows where batch %llu of %llu rows was expected",
                    s->name, (unsigned long long)it->batch.id, it->batch.num_nodes,
                    (unsigned long long)id, (unsigned long long)num_nodes);
    if (rc < 0) {
        tg_spill_item_free(it);
        return rc;
    }
    it->sample_s = sample_s;
    *out = it;
    return 1;
}

void tg_spill_item_free(tg_sloader_item_t *it)
{
    if (!it) return;
    tg_batch_free(&it->batch);
    free(it);
}

int tg_spill_reset(tg_spill_t *s)
{
    if (ftruncate(s->fd, 0) < 0) {
        s->failed = 1;
        return tg_err(-errno, "%s: cannot empty the file: %s", s->name, strerror(errno));
    }
    s->reading = s->failed = 0;
    s->off = s->bufoff = s->size = s->count = 0;
    s->fill = s->pos = 0;
    return 0;
}

/* ---------------------------------------------------------------- reading */

/* Copies the next n bytes; -ENODATA at a short file (the caller names the record). */
static int get(tg_spill_t *s, void *p, size_t n)
{
    uint8_t *dst = p;
    size_t want = n;
    while (n) {
        if (s->pos == s->fill) {
            s->bufoff += s->fill;
            s->fill = s->pos = 0;
            ssize_t r;
            do
                r = pread(s->fd, s->buf, s->cap, (off_t)s->bufoff);
            while (r < 0 && errno == EINTR);
            if (r < 0)
                return tg_err(-errno, "read at offset %llu: %s", (unsigned long long)s->bufoff,
                              strerror(errno));
            if (r == 0)
                return tg_err(-ENODATA, "the file ends at offset %llu, %zu bytes short",
                              (unsigned long long)s->bufoff, n);
            s->fill = (size_t)r;
        }
        size_t k = TG_MIN(n, s->fill - s->pos);
        memcpy(dst, s->buf + s->pos, k);
        s->pos += k;
        s->off += k;
        dst += k;
        n -= k;
    }
    s->crc = tg_crc32(s->crc, p, want);
    return 0;
}

static int get_ids(tg_spill_t *s, uint64_t *a, size_t n, int narrow)
{
    if (!narrow) return get(s, a, n * sizeof *a);
    uint32_t tmp[1024];
    for (size_t i = 0; i < n;) {
        size_t k = TG_MIN(n - i, (size_t)1024);
        int rc = get(s, tmp, k * sizeof *tmp);
        if (rc < 0) return rc;
        for (size_t j = 0; j < k; j++)
            a[i + j] = tmp[j];
        i += k;
    }
    return 0;
}

/* Checks a record's header and layer table against each other and the file's end. */
static int check_head(const tg_spill_t *s, uint64_t start, const rec_head_t *h,
                      const rec_layer_t *ly)
{
    uint64_t left = s->size - start;
    uint64_t need = payload_bytes(h, ly);
    for (uint32_t l = 0; l < h->num_layers; l++)
        if (ly[l].num_edges > left) /* also keeps the sum below from overflowing */
            return tg_err(-EBADMSG, "layer %u claims %llu edges, more than the file holds", l,
                          (unsigned long long)ly[l].num_edges);
    if (need != h->payload)
        return tg_err(-EBADMSG, "the payload size %llu does not match the sizes (%llu)",
                      (unsigned long long)h->payload, (unsigned long long)need);
    uint64_t total = sizeof *h + h->num_layers * sizeof *ly + need + 4;
    if (total > left)
        return tg_err(-EBADMSG, "the record needs %llu bytes, the file ends %llu bytes after it",
                      (unsigned long long)total, (unsigned long long)left);
    return 0;
}

static int read_record(tg_spill_t *s, uint64_t start, tg_batch_t *out)
{
    rec_head_t h;
    rec_layer_t ly[TG_MAX_LAYERS];
    s->crc = 0;
    int rc = get(s, &h, sizeof h);
    if (rc < 0) return rc;
    if (h.magic != SPILL_MAGIC)
        return tg_err(-EBADMSG, "bad magic 0x%08x, expected 0x%08x", h.magic, SPILL_MAGIC);
    if (h.num_layers < 1 || h.num_layers > TG_MAX_LAYERS ||
        (h.flags & ~(F_NODES32 | F_INDPTR32 | F_WEIGHTS)) || h.zero)
        return tg_err(-EBADMSG, "bad header (%u layers, flags 0x%x)", h.num_layers, h.flags);
    if ((rc = get(s, ly, h.num_layers * sizeof *ly)) < 0) return rc;
    if ((rc = check_head(s, start, &h, ly)) < 0) return rc;
    out->num_layers = (int)h.num_layers;
    out->num_nodes = h.num_nodes;
    out->num_seeds = h.num_seeds;
    out->id = h.id;
    out->blocks = calloc(h.num_layers, sizeof *out->blocks);
    out->nodes = malloc(((size_t)h.num_nodes + 1) * sizeof *out->nodes);
    if (!out->blocks || !out->nodes) return tg_err(-ENOMEM, "out of memory");
    for (uint32_t l = 0; l < h.num_layers; l++) {
        tg_block_t *b = &out->blocks[l];
        b->num_dst = ly[l].num_dst;
        b->num_src = ly[l].num_src;
        b->num_edges = ly[l].num_edges;
        b->indptr = malloc(((size_t)b->num_dst + 1) * sizeof *b->indptr);
        b->indices = malloc((b->num_edges ? b->num_edges : 1) * sizeof *b->indices);
        if (h.flags & F_WEIGHTS)
            b->weights = malloc((b->num_edges ? b->num_edges : 1) * sizeof *b->weights);
        if (!b->indptr || !b->indices || ((h.flags & F_WEIGHTS) && !b->weights))
            return tg_err(-ENOMEM, "out of memory for layer %u (%llu edges)", l,
                          (unsigned long long)b->num_edges);
    }
    if ((rc = get_ids(s, out->nodes, h.num_nodes, h.flags & F_NODES32)) < 0) return rc;
    for (uint32_t l = 0; l < h.num_layers; l++) {
        tg_block_t *b = &out->blocks[l];
        if ((rc = get_ids(s, b->indptr, (size_t)b->num_dst + 1, h.flags & F_INDPTR32)) < 0 ||
            (rc = get(s, b->indices, b->num_edges * sizeof *b->indices)) < 0 ||
            (b->weights && (rc = get(s, b->weights, b->num_edges * sizeof *b->weights)) < 0))
            return rc;
    }
    uint32_t want = s->crc, got;
    if ((rc = get(s, &got, sizeof got)) < 0) return rc;
    if (got != want)
        return tg_err(-EBADMSG, "CRC mismatch (stored 0x%08x, computed 0x%08x)", got, want);
    return 0;
}

int tg_spill_read(tg_spill_t *s, tg_batch_t *out)
{
    memset(out, 0, sizeof *out);
    if (!s->reading) return tg_err(-EINVAL, "%s: read before tg_spill_rewind", s->name);
    if (s->failed) return tg_err(-EIO, "%s: an earlier error stopped this spill file", s->name);
    if (s->off == s->size) return 0;
    uint64_t start = s->off;
    int rc = read_record(s, start, out);
    if (rc < 0) {
        s->failed = 1;
        tg_batch_free(out);
        return tg_err_prefix(rc, "%s: record at offset %llu", s->name, (unsigned long long)start);
    }
    return 1;
}
