/* Row files read through io/ (see "row files read through io/" in tiergnn/store.h): resident
 * rows chosen by weight and filled by one sequential pass, the rest read per gather as sorted
 * runs merged through small holes. Sections: choosing the resident rows, the sequential pass,
 * gathering (sort, runs, windows of reads, conversion), open and close. */
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"
#include "tiergnn/io.h"
#include "tiergnn/rowcrc.h"
#include "tiergnn/store.h"

#define NOT_RESIDENT UINT32_MAX
#define DEFAULT_GAP ((uint64_t)4096)
#define DEFAULT_DEPTH 64u
#define READ_BYTES ((size_t)64 << 10)   /* io/'s largest disk read (one staging slot) */
#define STAGE_BYTES ((size_t)4 << 20)   /* raw bytes one window of reads lands in */
#define SPAN_BYTES ((uint64_t)64 << 10) /* the longest run merged through holes */
#define WINDOW_REQS 4096u               /* requests per window (io/'s bookkeeping) */
#define WEIGHT_BUCKETS 65536u

struct tg_rowfile {
    tg_io_file_t *file;
    int own_file;
    const char *path;
    uint64_t num_rows;
    uint32_t dim;
    size_t raw_row; /* bytes of one row in the file */
    tg_feat_dtype_t dtype;
    int normalize;
    const tg_rowcrc_t *rowcrc;
    uint64_t gap;
    tg_budget_t *budget;
    uint64_t reserved;
    tg_io_t *io;
    unsigned char *stage; /* STAGE_BYTES */
    float *res;           /* resident rows (resident x dim), in id order */
    uint32_t *slot;       /* row -> its place in res, or NOT_RESIDENT; NULL when all resident */
    uint64_t resident;
    /* the gather's sort arrays: (id << 32 | position) keys, cap of each */
    uint64_t *keys, *tmp;
    size_t keys_cap;
    uint64_t keys_reserved;
    tg_io_req_t *reqs; /* WINDOW_REQS */
    tg_rowfile_counts_t counts;
};

static int reserve(tg_rowfile_t *rf, uint64_t bytes, const char *what)
{
    if (!rf->budget || !bytes) return 0;
    int rc = tg_budget_reserve(rf->budget, bytes, what);
    if (rc == 0) rf->reserved += bytes;
    return rc;
}

/* ---------------------------------------------------------------- choosing the resident rows */

/* slot[v] for the k rows of greatest weight (clamped to WEIGHT_BUCKETS - 1), ties to lower ids;
 * the places follow id order, so the sequential pass fills res front to back. */
static int choose_rows(tg_rowfile_t *rf, const uint32_t *weight, uint64_t k)
{
    uint64_t n = rf->num_rows;
    uint64_t *hist = calloc(WEIGHT_BUCKETS, sizeof *hist);
    if (!hist) return tg_err(-ENOMEM, "%s: out of memory choosing resident rows", rf->path);
    for (uint64_t v = 0; v < n; v++)
        hist[TG_MIN(weight[v], WEIGHT_BUCKETS - 1)]++;
    /* the least weight t kept, and how many rows of weight exactly t fit */
    uint64_t above = 0, t = WEIGHT_BUCKETS - 1;
    while (t > 0 && above + hist[t] <= k) {
        above += hist[t];
        t--;
    }
    uint64_t at_t = k - above;
    if (t == 0 && above + hist[0] <= k) at_t = hist[0];
    free(hist);
    uint32_t next = 0;
    for (uint64_t v = 0; v < n; v++) {
        uint32_t w = TG_MIN(weight[v], WEIGHT_BUCKETS - 1);
        int keep = w > t || (w == t && at_t > 0);
        if (w == t && keep) at_t--;
        rf->slot[v] = keep ? next++ : NOT_RESIDENT;
    }
    rf->resident = next;
    return 0;
}

/* ---------------------------------------------------------------- the sequential pass */

/* Converts raw rows first..first+n (at raw) into their resident places, checking each. */
static int keep_rows(tg_rowfile_t *rf, uint64_t first, uint64_t n, const unsigned char *raw)
{
    size_t d = rf->dim;
    if (!rf->slot) {
        int rc = tg_rowcrc_check_rows(rf->rowcrc, first, n, raw, rf->path, first * rf->raw_row);
        if (rc < 0) return rc;
        tg_feat_rows_f32(rf->res + first * d, raw, 0, n, d, rf->dtype, rf->normalize);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint32_t s = rf->slot[first + i];
        if (s == NOT_RESIDENT) continue;
        const unsigned char *row = raw + i * rf->raw_row;
        int rc = tg_rowcrc_check(rf->rowcrc, first + i, row, rf->path, (first + i) * rf->raw_row);
        if (rc < 0) return rc;
        tg_feat_rows_f32(rf->res + (size_t)s * d, row, 0, 1, d, rf->dtype, rf->normalize);
    }
    return 0;
}

/* Reads the file front to back in windows of whole rows, one request per READ_BYTES of a window
 * so that io/ keeps them in flight together, keeping the resident rows. */
static int stream(tg_rowfile_t *rf)
{
    uint64_t per = STAGE_BYTES / rf->raw_row; /* rows per window */
    uint64_t per_req = TG_MAX(READ_BYTES / rf->raw_row, (uint64_t)1);
    for (uint64_t first = 0; first < rf->num_rows; first += per) {
        uint64_t n = TG_MIN(per, rf->num_rows - first);
        size_t nr = 0;
        for (uint64_t r = 0; r < n; r += per_req) {
            uint64_t m = TG_MIN(per_req, n - r);
            rf->reqs[nr++] = (tg_io_req_t){.file = rf->file,
                                           .off = (first + r) * rf->raw_row,
                                           .len = (size_t)(m * rf->raw_row),
                                           .dst = rf->stage + r * rf->raw_row};
        }
        int rc = tg_io_read_batch(rf->io, rf->reqs, nr);
        if (rc == 0) rc = keep_rows(rf, first, n, rf->stage);
        if (rc < 0) return rc;
        rf->counts.stream_bytes += n * rf->raw_row;
    }
    return 0;
}

/* ---------------------------------------------------------------- gathering */

/* Sorts keys[0..n) by their high 32 bits (the row id) with an LSD radix sort over the bits ids
 * use; the positions in the low bits keep equal ids in input order. Returns the sorted array
 * (keys or tmp). */
static uint64_t *sort_keys(uint64_t *keys, uint64_t *tmp, size_t n, uint64_t num_rows)
{
    unsigned bits = 0;
    while (bits < 32 && (num_rows - 1) >> bits)
        bits++;
    size_t cnt[2048];
    for (unsigned shift = 0; shift < bits; shift += 11) {
        memset(cnt, 0, sizeof cnt);
        for (size_t i = 0; i < n; i++)
            cnt[(keys[i] >> (32 + shift)) & 2047]++;
        size_t sum = 0;
        for (size_t b = 0; b < 2048; b++) {
            size_t c = cnt[b];
            cnt[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            tmp[cnt[(keys[i] >> (32 + shift)) & 2047]++] = keys[i];
        uint64_t *t = keys;
        keys = tmp;
        tmp = t;
    }
    return keys;
}

static int grow_keys(tg_rowfile_t *rf, size_t n)
{
    if (n <= rf->keys_cap) return 0;
    size_t cap = TG_MAX(n, rf->keys_cap * 2);
    uint64_t bytes = (uint64_t)cap * 2 * sizeof(uint64_t);
    if (rf->budget && rf->keys_reserved) tg_budget_release(rf->budget, rf->keys_reserved);
    rf->reserved -= rf->keys_reserved;
    rf->keys_reserved = 0;
    free(rf->keys);
    free(rf->tmp);
    rf->keys = rf->tmp = NULL;
    rf->keys_cap = 0;
    int rc = reserve(rf, bytes, "row file: the gather's sort arrays");
    if (rc < 0) return rc;
    rf->keys_reserved = rf->budget ? bytes : 0;
    rf->keys = malloc(cap * sizeof *rf->keys);
    rf->tmp = malloc(cap * sizeof *rf->tmp);
    if (!rf->keys || !rf->tmp)
        return tg_err(-ENOMEM, "%s: out of memory for a gather of %zu rows", rf->path, n);
    rf->keys_cap = cap;
    return 0;
}

/* The rows of keys[0..n) (sorted) that the window's requests brought into the stage, converted into
 * their places of out. */
static int scatter(tg_rowfile_t *rf, const uint64_t *keys, size_t n, float *out)
{
    size_t d = rf->dim, r = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = keys[i] >> 32, off = id * rf->raw_row;
        while (off >= rf->reqs[r].off + rf->reqs[r].len)
            r++;
        const unsigned char *raw = (const unsigned char *)rf->reqs[r].dst + (off - rf->reqs[r].off);
        int rc = tg_rowcrc_check(rf->rowcrc, id, raw, rf->path, off);
        if (rc < 0) return rc;
        tg_feat_rows_f32(out + (keys[i] & 0xffffffffu) * d, raw, 0, 1, d, rf->dtype, rf->normalize);
    }
    return 0;
}

/* Reads the rows of keys[0..n) (sorted by id) into out: runs of rows separated by holes of at
 * most gap bytes become one request each, and windows of requests that fill the stage are read
 * and converted in turn. */
static int read_misses(tg_rowfile_t *rf, const uint64_t *keys, size_t n, float *out)
{
    size_t rb = rf->raw_row, i = 0;
    while (i < n) {
        size_t nr = 0, used = 0, w0 = i;
        while (i < n && nr < WINDOW_REQS) {
            uint64_t start = (keys[i] >> 32) * rb, end = start + rb;
            size_t j = i + 1;
            while (j < n) {
                uint64_t o = (keys[j] >> 32) * rb;
                if (o + rb <= end) { /* the same row again */
                    j++;
                    continue;
                }
                if (o - end > rf->gap || o + rb - start > SPAN_BYTES) break;
                end = o + rb;
                j++;
            }
            if (used + (end - start) > STAGE_BYTES) break;
            rf->reqs[nr++] = (tg_io_req_t){.file = rf->file,
                                           .off = start,
                                           .len = (size_t)(end - start),
                                           .dst = rf->stage + used};
            used += (size_t)(end - start);
            rf->counts.miss_bytes += end - start;
            i = j;
        }
        rf->counts.miss_requests += nr;
        int rc = tg_io_read_batch(rf->io, rf->reqs, nr);
        if (rc == 0) rc = scatter(rf, keys + w0, i - w0, out);
        if (rc < 0) return rc;
    }
    return 0;
}

int tg_rowfile_gather(tg_rowfile_t *rf, const uint64_t *ids, size_t n, float *out)
{
    size_t d = rf->dim, nm = 0;
    if (n > UINT32_MAX)
        return tg_err(-EINVAL, "%s: a gather of %zu rows is too large (at most %u)", rf->path, n,
                      (unsigned)UINT32_MAX);
    int rc = grow_keys(rf, n);
    if (rc < 0) return rc;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = ids[i];
        if (v >= rf->num_rows)
            return tg_err(-EINVAL, "%s: row %llu out of range (%llu rows)", rf->path,
                          (unsigned long long)v, (unsigned long long)rf->num_rows);
        /* without slots either every row is resident or none is */
        uint32_t s = rf->slot ? rf->slot[v] : rf->resident ? (uint32_t)v : NOT_RESIDENT;
        if (s != NOT_RESIDENT)
            memcpy(out + i * d, rf->res + (size_t)s * d, d * sizeof *out);
        else
            rf->keys[nm++] = v << 32 | i;
    }
    rf->counts.gather_rows += n;
    rf->counts.miss_rows += nm;
    if (!nm) return 0;
    const uint64_t *sorted = sort_keys(rf->keys, rf->tmp, nm, rf->num_rows);
    return read_misses(rf, sorted, nm, out);
}

/* ---------------------------------------------------------------- open and close */

static int open_file(tg_rowfile_t *rf, const tg_rowfile_opts_t *o)
{
    if (o->file) {
        rf->file = o->file;
    } else {
        int rc = tg_io_file_open(&rf->file, o->path, 0);
        if (rc < 0) return rc;
        rf->own_file = 1;
    }
    rf->path = tg_io_file_path(rf->file);
    uint64_t want = o->num_rows * rf->raw_row;
    if (tg_io_file_size(rf->file) < want)
        return tg_err(-EINVAL, "%s: %llu bytes, %llu rows of %zu bytes need %llu", rf->path,
                      (unsigned long long)tg_io_file_size(rf->file),
                      (unsigned long long)o->num_rows, rf->raw_row, (unsigned long long)want);
    return 0;
}

/* How many rows stay resident, with their slots (NULL when all do). */
static int plan_resident(tg_rowfile_t *rf, const tg_rowfile_opts_t *o)
{
    uint64_t n = rf->num_rows, f32_row = (uint64_t)rf->dim * sizeof(float);
    uint64_t slots = n * sizeof(uint32_t), k;
    int rc;
    if (o->ram_bytes / f32_row >= n) {
        k = n;
    } else {
        k = o->ram_bytes > slots ? (o->ram_bytes - slots) / f32_row : 0;
        if (k == 0) return 0;
        if ((rc = reserve(rf, slots, "row file: the resident rows' slots")) < 0) return rc;
        rf->slot = malloc((size_t)slots);
        if (!rf->slot) return tg_err(-ENOMEM, "%s: out of memory for row slots", rf->path);
        if (o->weight) {
            if ((rc = choose_rows(rf, o->weight, k)) < 0) return rc;
        } else {
            for (uint64_t v = 0; v < n; v++)
                rf->slot[v] = v < k ? (uint32_t)v : NOT_RESIDENT;
            rf->resident = k;
        }
        k = rf->resident;
    }
    if ((rc = reserve(rf, k * f32_row, "row file: resident rows")) < 0) return rc;
    rf->res = malloc(TG_MAX(k * f32_row, (uint64_t)1));
    if (!rf->res)
        return tg_err(-ENOMEM, "%s: out of memory for %llu resident rows", rf->path,
                      (unsigned long long)k);
    rf->resident = k;
    return 0;
}

int tg_rowfile_open(tg_rowfile_t **out, const tg_rowfile_opts_t *o)
{
    *out = NULL;
    if (!o->dim || (!o->path && !o->file) || o->num_rows > (uint64_t)UINT32_MAX)
        return tg_err(-EINVAL, "row file: needs a file, dim > 0 and at most %u rows",
                      (unsigned)UINT32_MAX);
    tg_rowfile_t *rf = calloc(1, sizeof *rf);
    if (!rf) return tg_err(-ENOMEM, "row file: out of memory");
    rf->num_rows = o->num_rows;
    rf->dim = o->dim;
    rf->dtype = o->dtype;
    rf->raw_row = (size_t)o->dim * tg_feat_dtype_size(o->dtype);
    rf->normalize = o->normalize;
    rf->rowcrc = o->rowcrc;
    rf->gap = o->gap ? o->gap : DEFAULT_GAP;
    rf->budget = o->budget;
    rf->path = o->path ? o->path : "row file";
    int rc = open_file(rf, o);
    if (rc < 0) goto err;
    if (rf->raw_row > STAGE_BYTES) {
        rc = tg_err(-EINVAL, "%s: rows of %zu bytes are longer than the %zu-byte stage", rf->path,
                    rf->raw_row, STAGE_BYTES);
        goto err;
    }
    tg_io_opts_t io = {.depth = o->depth ? o->depth : DEFAULT_DEPTH,
                       .max_read_bytes = READ_BYTES,
                       .budget = o->budget,
                       .stats = o->stats};
    if ((rc = tg_io_create(&rf->io, &io)) < 0) goto err;
    if ((rc = reserve(rf, STAGE_BYTES + WINDOW_REQS * sizeof *rf->reqs, "row file: the stage")) < 0)
        goto err;
    rf->stage = malloc(STAGE_BYTES);
    rf->reqs = malloc(WINDOW_REQS * sizeof *rf->reqs);
    if (!rf->stage || !rf->reqs) {
        rc = tg_err(-ENOMEM, "%s: out of memory for the read stage", rf->path);
        goto err;
    }
    if ((rc = plan_resident(rf, o)) < 0) goto err;
    rf->counts.resident_rows = rf->resident;
    if (rf->resident && (rc = stream(rf)) < 0) goto err;
    *out = rf;
    return 0;
err:
    tg_rowfile_close(rf);
    return rc;
}

void tg_rowfile_counts(const tg_rowfile_t *rf, tg_rowfile_counts_t *c)
{
    *c = rf->counts;
}

void tg_rowfile_close(tg_rowfile_t *rf)
{
    if (!rf) return;
    tg_io_destroy(rf->io);
    if (rf->own_file) tg_io_file_close(rf->file);
    free(rf->stage);
    free(rf->reqs);
    free(rf->res);
    free(rf->slot);
    free(rf->keys);
    free(rf->tmp);
    if (rf->budget && rf->reserved) tg_budget_release(rf->budget, rf->reserved);
    free(rf);
}
