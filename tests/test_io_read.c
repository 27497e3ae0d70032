/* Reads of random unaligned byte ranges equal pread of the same file, over every combination of
 * backend (io_uring with and without registered buffers, pread), queue depth (1, 8, 64), merging
 * on/off, max read size (128 KiB, 16 KiB: forces splitting), O_DIRECT and buffered files, and the
 * three ways to read (tg_io_read_batch, tg_io_submit + tg_io_reap, tg_io_read). Destinations are
 * unaligned and guarded so that a copy one byte too long is caught. */
#include "test_io_common.h"

#define GUARD 16
#define GUARD_BYTE 0xA5

static const char *dir;
static char *path;
static uint64_t fsize;
static int have_uring;

typedef struct range {
    uint64_t off;
    size_t len;
} range_t;

/* A mix of what the engine asks for: feature rows, tiny reads, index slices larger than a
 * staging slot, reads that end at EOF, exact duplicates and runs of adjacent rows. */
static size_t make_ranges(tg_rng_t *rng, range_t *r, size_t n)
{
    size_t k = 0;
    while (k < n) {
        uint64_t kind = tg_rng_below(rng, 100);
        if (kind < 50) {
            r[k].len = 1 + (size_t)tg_rng_below(rng, 5000);
        } else if (kind < 65) {
            r[k].len = 1 + (size_t)tg_rng_below(rng, 16);
        } else if (kind < 75) {
            r[k].len = 1 + (size_t)tg_rng_below(rng, 300 << 10);
        } else if (kind < 80) {
            r[k].len = 1 + (size_t)tg_rng_below(rng, 20000);
            r[k].off = fsize - r[k].len; /* ends exactly at EOF */
            k++;
            continue;
        } else if (kind < 88 && k > 0) {
            r[k] = r[tg_rng_below(rng, k)]; /* duplicate of an earlier range */
            k++;
            continue;
        } else if (kind < 95 && k + 8 <= n) {
            /* 8 adjacent rows of 300 bytes */
            uint64_t base = tg_rng_below(rng, fsize - 8 * 300);
            for (int i = 0; i < 8; i++)
                r[k++] = (range_t){base + (uint64_t)i * 300, 300};
            continue;
        } else {
            r[k].len = 0;
            r[k].off = tg_rng_below(rng, fsize + 1);
            k++;
            continue;
        }
        r[k].off = tg_rng_below(rng, fsize - r[k].len + 1);
        k++;
    }
    return k;
}

/* Lays out n guarded destinations (each at an odd offset) in one block and fills requests. */
static uint8_t *make_reqs(tg_io_req_t *q, tg_io_file_t *f, const range_t *r, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += r[i].len + 2 * GUARD + 1;
    uint8_t *mem = malloc(total + 1);
    memset(mem, GUARD_BYTE, total + 1);
    size_t pos = 1; /* odd: never aligned */
    for (size_t i = 0; i < n; i++) {
        q[i] = (tg_io_req_t){.file = f,
                             .off = r[i].off,
                             .len = r[i].len,
                             .dst = mem + pos + GUARD,
                             .user = (void *)(uintptr_t)i};
        memset(q[i].dst, 0, r[i].len);
        pos += r[i].len + 2 * GUARD + 1;
    }
    return mem;
}

static int verify(const tg_io_req_t *q, size_t n, const char *what)
{
    int bad = 0;
    uint8_t *ref = malloc(400 << 10);
    for (size_t i = 0; i < n && bad < 5; i++) {
        const uint8_t *d = q[i].dst;
        if (q[i].res != 0) {
            TG_FAIL("%s: request %zu [%llu,+%zu) res %d", what, i, (unsigned long long)q[i].off,
                    q[i].len, q[i].res);
            bad++;
            continue;
        }
        size_t got = tio_pread(path, q[i].off, q[i].len, ref);
        if (got != q[i].len || memcmp(ref, d, q[i].len)) {
            TG_FAIL("%s: request %zu [%llu,+%zu) differs from pread", what, i,
                    (unsigned long long)q[i].off, q[i].len);
            bad++;
        }
        for (int g = 1; g <= GUARD; g++)
            if (d[-g] != GUARD_BYTE || d[q[i].len - 1 + g] != GUARD_BYTE) {
                TG_FAIL("%s: request %zu: guard byte overwritten", what, i);
                bad++;
                break;
            }
    }
    free(ref);
    return bad;
}

typedef struct variant {
    unsigned flags; /* TG_IO_* queue flags */
    unsigned depth;
    size_t max_read;
    unsigned fileflags; /* TG_IO_FILE_* */
} variant_t;

static void name_of(const variant_t *v, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s depth=%u merge=%s max_read=%zuK file=%s",
             (v->flags & TG_IO_FORCE_PREAD) ? "pread" : "io_uring",
             (v->flags & TG_IO_FORCE_PREAD) ? ""
             : (v->flags & TG_IO_NO_FIXED)  ? ""
                                            : "+fixed",
             v->depth, (v->flags & TG_IO_NO_MERGE) ? "off" : "on", v->max_read >> 10,
             (v->fileflags & TG_IO_FILE_BUFFERED) ? "buffered" : "direct");
}

static void run_variant(const variant_t *v, uint64_t seed)
{
    char name[160];
    name_of(v, name, sizeof name);
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, v->fileflags));
    if (!f) return;
    TG_CHECK(tg_io_file_direct(f) == !(v->fileflags & TG_IO_FILE_BUFFERED));
    tg_io_opts_t o = {.depth = v->depth, .max_read_bytes = v->max_read, .flags = v->flags};
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_create(&io, &o));
    if (!io) {
        tg_io_file_close(f);
        return;
    }
    TG_CHECK(!strcmp(tg_io_backend(io), (v->flags & TG_IO_FORCE_PREAD) ? "pread" : "io_uring"));

    tg_rng_t rng;
    tg_rng_seed(&rng, seed);
    enum { N = 160 };
    range_t r[N];
    tg_io_req_t q[N];

    /* 1. synchronous batch */
    size_t n = make_ranges(&rng, r, N);
    uint8_t *mem = make_reqs(q, f, r, n);
    TG_CHECK_OK(tg_io_read_batch(io, q, n));
    if (verify(q, n, name)) fprintf(stderr, "  in read_batch of %s\n", name);
    free(mem);

    /* 2. asynchronous: two submits in flight, reaped with varying max/min */
    n = make_ranges(&rng, r, N);
    mem = make_reqs(q, f, r, n);
    size_t half = n / 2;
    TG_CHECK_OK(tg_io_submit(io, q, half));
    TG_CHECK_OK(tg_io_submit(io, q + half, n - half));
    TG_CHECK_EQ_U64(tg_io_inflight(io), n);
    uint8_t *seen = calloc(n, 1);
    size_t got = 0;
    while (tg_io_inflight(io) > 0) {
        tg_io_req_t *done[7];
        size_t max = 1 + (size_t)tg_rng_below(&rng, 7);
        int k = tg_io_reap(io, done, max, 1 + (size_t)tg_rng_below(&rng, max));
        TG_CHECK(k >= 1 && (size_t)k <= max);
        if (k < 1) break;
        for (int i = 0; i < k; i++) {
            size_t idx = (size_t)(uintptr_t)done[i]->user;
            TG_CHECK(done[i] == &q[idx]);
            TG_CHECK(!seen[idx]); /* every request comes back exactly once */
            seen[idx] = 1;
        }
        got += (size_t)k;
    }
    TG_CHECK_EQ_U64(got, n);
    if (verify(q, n, name)) fprintf(stderr, "  in submit/reap of %s\n", name);
    free(seen);
    free(mem);

    /* 3. single reads */
    for (int i = 0; i < 8; i++) {
        size_t len = 1 + (size_t)tg_rng_below(&rng, 9000);
        uint64_t off = tg_rng_below(&rng, fsize - len + 1);
        uint8_t *a = malloc(len + 1), *b = malloc(len);
        TG_CHECK_OK(tg_io_read(io, f, off, len, a + 1));
        TG_CHECK(tio_pread(path, off, len, b) == len && !memcmp(a + 1, b, len));
        free(a);
        free(b);
    }
    tg_io_destroy(io);
    tg_io_file_close(f);
}

TG_TEST(all_variants)
{
    static const unsigned depths[] = {1, 8, 64};
    static const size_t max_reads[] = {128 << 10, 16 << 10};
    static const unsigned backends[] = {0, TG_IO_NO_FIXED, TG_IO_FORCE_PREAD};
    uint64_t seed = 1;
    for (size_t b = 0; b < 3; b++) {
        if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
        for (size_t d = 0; d < 3; d++) {
            /* pread runs one read at a time whatever the depth: one depth covers it */
            if ((backends[b] & TG_IO_FORCE_PREAD) && d > 0) continue;
            for (int merge = 0; merge < 2; merge++)
                for (size_t m = 0; m < 2; m++)
                    for (int buffered = 0; buffered < 2; buffered++) {
                        variant_t v = {backends[b] | (merge ? 0 : TG_IO_NO_MERGE), depths[d],
                                       max_reads[m], buffered ? TG_IO_FILE_BUFFERED : 0};
                        run_variant(&v, seed++);
                    }
        }
    }
}

/* Rows whose offsets, lengths and destinations are all aligned are read straight into dst (no
 * staging copy) unless merged with a neighbour: both paths, a request split into several such
 * reads, and a row running past EOF. */
TG_TEST(aligned_rows)
{
    static const unsigned backends[] = {0, TG_IO_NO_FIXED, TG_IO_FORCE_PREAD};
    for (int buffered = 0; buffered < 2; buffered++)
        for (size_t b = 0; b < 3; b++)
            for (int merge = 0; merge < 2; merge++) {
                if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
                tg_io_file_t *f = NULL;
                tg_io_t *io = NULL;
                TG_CHECK_OK(tg_io_file_open(&f, path, buffered ? TG_IO_FILE_BUFFERED : 0));
                tg_io_opts_t o = {.depth = 8,
                                  .max_read_bytes = 16 << 10,
                                  .flags = backends[b] | (merge ? 0 : TG_IO_NO_MERGE)};
                TG_CHECK_OK(tg_io_create(&io, &o));
                if (!f || !io) {
                    tg_io_destroy(io);
                    tg_io_file_close(f);
                    continue;
                }
                const size_t A = tg_io_file_align(f), slot = 80 << 10;
                enum { N = 12 };
                /* rows of 1 or 2 blocks, some adjacent (merged when merging is on), one of
                 * 40 KiB (split into 16 KiB reads) */
                uint64_t offs[N] = {0,       A,       7 * A,   9 * A,   100 * A, 101 * A,
                                    200 * A, 300 * A, 302 * A, 500 * A, 600 * A, 800 * A};
                size_t lens[N] = {A, A, 2 * A, A, A, 2 * A, 40 << 10, A, A, 2 * A, A, A};
                uint8_t *mem = tg_aligned_alloc(4096, N * slot);
                memset(mem, GUARD_BYTE, N * slot);
                tg_io_req_t q[N];
                for (int i = 0; i < N; i++)
                    q[i] = (tg_io_req_t){
                        .file = f, .off = offs[i], .len = lens[i], .dst = mem + (size_t)i * slot};
                TG_CHECK_OK(tg_io_read_batch(io, q, N));
                uint8_t *ref = malloc(slot);
                for (int i = 0; i < N; i++) {
                    const uint8_t *d = q[i].dst;
                    TG_CHECK(q[i].res == 0);
                    TG_CHECK(tio_pread(path, offs[i], lens[i], ref) == lens[i] &&
                             !memcmp(ref, d, lens[i]));
                    TG_CHECK(d[lens[i]] == GUARD_BYTE && d[slot - 1] == GUARD_BYTE);
                }
                free(ref);
                /* the last block of the file is partial: an aligned row there runs past EOF */
                uint64_t last = fsize / A * A;
                TG_CHECK_ERR(tg_io_read(io, f, last, A, mem), "unexpected end of file");
                TG_CHECK_OK(tg_io_read(io, f, last, fsize - last, mem));
                TG_CHECK(mem[0] == tio_pattern(last));
                free(mem);
                tg_io_destroy(io);
                tg_io_file_close(f);
            }
}

/* The alignment comes from statx where the filesystem reports it: a power of two, at most a
 * page, and O_DIRECT reads at that alignment work. */
TG_TEST(alignment)
{
    tg_io_file_t *f = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    if (!f) return;
    unsigned a = tg_io_file_align(f);
    TG_CHECK(a >= 512 && a <= 4096 && (a & (a - 1)) == 0);
    TG_CHECK_EQ_U64(tg_io_file_size(f), fsize);
    TG_CHECK(!strcmp(tg_io_file_path(f), path));
    fprintf(stderr, "  %s: O_DIRECT alignment %u\n", dir, a);
    tg_io_file_close(f);
}

TG_TEST(bad_requests)
{
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    TG_CHECK_OK(tg_io_file_open(&f, path, 0));
    TG_CHECK_OK(tg_io_create(&io, NULL));
    if (!f || !io) goto out;
    char buf[8];
    tg_io_req_t q = {.file = NULL, .off = 0, .len = 8, .dst = buf};
    TG_CHECK_ERR(tg_io_read_batch(io, &q, 1), "no file");
    q = (tg_io_req_t){.file = f, .off = 0, .len = 8, .dst = NULL};
    TG_CHECK_ERR(tg_io_read_batch(io, &q, 1), "no destination");
    q = (tg_io_req_t){.file = f, .off = UINT64_MAX - 4, .len = 8, .dst = buf};
    TG_CHECK_ERR(tg_io_read_batch(io, &q, 1), "overflows");
    TG_CHECK_EQ_U64(tg_io_inflight(io), 0);
    /* read_batch refuses a queue with asynchronous requests in flight */
    q = (tg_io_req_t){.file = f, .off = 0, .len = 8, .dst = buf};
    TG_CHECK_OK(tg_io_submit(io, &q, 1));
    tg_io_req_t q2 = q;
    TG_CHECK_ERR(tg_io_read_batch(io, &q2, 1), "in flight");
    TG_CHECK_OK(tg_io_wait(io));
    TG_CHECK(q.res == 0 && buf[3] == (char)tio_pattern(3));
    tg_io_opts_t o = {.max_read_bytes = 5000};
    tg_io_t *bad = NULL;
    TG_CHECK_ERR(tg_io_create(&bad, &o), "multiple of 4096");
    o = (tg_io_opts_t){.depth = 100000};
    TG_CHECK_ERR(tg_io_create(&bad, &o), "above the maximum");
    tg_io_file_t *g = NULL;
    TG_CHECK_ERR(tg_io_file_open(&g, dir, 0), dir); /* a directory */
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/missing.bin", dir);
    TG_CHECK_ERR(tg_io_file_open(&g, missing, 0), "missing.bin");
out:
    tg_io_destroy(io);
    tg_io_file_close(f);
}

int main(void)
{
    dir = tio_begin("io_read", &have_uring);
    fsize = (5u << 20) + 1234; /* an unaligned tail: the last read is short by design */
    path = tio_make_file(dir, "data.bin", fsize);
    TG_RUN(alignment);
    TG_RUN(all_variants);
    TG_RUN(aligned_rows);
    TG_RUN(bad_requests);
    free(path);
    return tio_end(dir, have_uring);
}
