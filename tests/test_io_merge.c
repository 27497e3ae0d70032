/* Merging: requests that touch the same or adjacent aligned blocks of a file become one disk
 * read of at most max_read bytes. Exact io_requests / io_read_bytes / io_needed_bytes are
 * asserted for each case, on both backends and several depths, with merging on and off. */
#include "test_io_common.h"

#define MAXQ 80

static const char *dir;
static char *path_a, *path_b, *path_tail;
static int have_uring;

typedef struct expect {
    uint64_t requests, read_bytes;
} expect_t;

typedef struct ctx {
    tg_io_t *io;
    tg_io_file_t *a, *b, *tail;
    unsigned A; /* alignment of the files */
    size_t M;   /* max_read */
    int merge;
    const char *variant;
} ctx_t;

/* Reads the n ranges (file, off, len) in one batch, checks the bytes, and compares the counters
 * with (merged) when merging is on, else with (unmerged). */
static void run_case(ctx_t *c, const char *name, tg_io_file_t **files, const uint64_t *offs,
                     const size_t *lens, size_t n, expect_t merged, expect_t unmerged)
{
    tg_io_req_t q[MAXQ];
    uint8_t *bufs[MAXQ];
    uint64_t need = 0;
    for (size_t i = 0; i < n; i++) {
        bufs[i] = malloc(lens[i] + 1);
        q[i] = (tg_io_req_t){.file = files[i], .off = offs[i], .len = lens[i], .dst = bufs[i]};
        need += lens[i];
    }
    tg_io_counts_t before, after;
    tg_io_stats_take(tg_io_stats(c->io), &before);
    TG_CHECK_OK(tg_io_read_batch(c->io, q, n));
    tg_io_stats_take(tg_io_stats(c->io), &after);
    for (size_t i = 0; i < n; i++) {
        if (q[i].res != 0 || !tio_bytes_ok(bufs[i], offs[i], lens[i]))
            TG_FAIL("%s [%s]: request %zu has wrong bytes (res %d)", name, c->variant, i, q[i].res);
        free(bufs[i]);
    }
    expect_t e = c->merge ? merged : unmerged;
    if (after.io_requests != e.requests || after.io_read_bytes != e.read_bytes ||
        after.io_needed_bytes != need)
        TG_FAIL("%s [%s]: requests %llu (want %llu), read %llu (want %llu), needed %llu (want "
                "%llu)",
                name, c->variant, (unsigned long long)after.io_requests,
                (unsigned long long)e.requests, (unsigned long long)after.io_read_bytes,
                (unsigned long long)e.read_bytes, (unsigned long long)after.io_needed_bytes,
                (unsigned long long)need);
}

static void cases(ctx_t *c)
{
    const uint64_t A = c->A, M = c->M;
    tg_io_file_t *fa[MAXQ];
    for (int i = 0; i < MAXQ; i++)
        fa[i] = c->a;

    { /* five copies of one small range: one read of one block */
        uint64_t o[5] = {A + 10, A + 10, A + 10, A + 10, A + 10};
        size_t l[5] = {10, 10, 10, 10, 10};
        run_case(c, "duplicates", fa, o, l, 5, (expect_t){1, A}, (expect_t){5, 5 * A});
    }
    { /* whole block, next block, part of the block after: adjacent -> one read */
        uint64_t o[3] = {0, A, 2 * A + 5};
        size_t l[3] = {A, A, 2};
        run_case(c, "adjacent", fa, o, l, 3, (expect_t){1, 3 * A}, (expect_t){3, 3 * A});
        uint64_t r[3] = {2 * A + 5, A, 0};
        size_t rl[3] = {2, A, A};
        run_case(c, "adjacent reversed", fa, r, rl, 3, (expect_t){1, 3 * A}, (expect_t){3, 3 * A});
    }
    { /* unaligned rows straddling blocks and overlapping in block 1 */
        uint64_t o[2] = {100, A + 50};
        size_t l[2] = {A, A};
        run_case(c, "overlap", fa, o, l, 2, (expect_t){1, 3 * A}, (expect_t){2, 4 * A});
    }
    { /* one untouched block between them: two reads */
        uint64_t o[2] = {0, 2 * A};
        size_t l[2] = {10, 10};
        run_case(c, "gap", fa, o, l, 2, (expect_t){2, 2 * A}, (expect_t){2, 2 * A});
    }
    { /* every block of M + 2A bytes: the merged read stops at max_read */
        size_t n = (size_t)(M / A + 2);
        uint64_t o[MAXQ];
        size_t l[MAXQ];
        for (size_t i = 0; i < n; i++) {
            o[i] = i * A + 1;
            l[i] = A - 2;
        }
        run_case(c, "cap at max_read", fa, o, l, n, (expect_t){2, M + 2 * A}, (expect_t){n, n * A});
    }
    { /* a request of 2M bytes is split in max_read chunks; the next row joins the last one */
        uint64_t o[2] = {A / 2, 2 * M + A + 1};
        size_t l[2] = {2 * M, 1};
        run_case(c, "split", fa, o, l, 2, (expect_t){3, 2 * M + 2 * A},
                 (expect_t){4, 2 * M + 2 * A});
    }
    { /* same offsets in two files never merge */
        tg_io_file_t *two[2] = {c->a, c->b};
        uint64_t o[2] = {0, 0};
        size_t l[2] = {A, A};
        run_case(c, "two files", two, o, l, 2, (expect_t){2, 2 * A}, (expect_t){2, 2 * A});
    }
    { /* the file ends 100 bytes into a block: the read returns 100 bytes, no retry */
        tg_io_file_t *t[1] = {c->tail};
        uint64_t o[1] = {(1 << 20) + 40};
        size_t l[1] = {60};
        run_case(c, "short tail", t, o, l, 1, (expect_t){1, 100}, (expect_t){1, 100});
    }
    { /* zero-length requests read nothing */
        uint64_t o[3] = {0, 5, 7};
        size_t l[3] = {0, 0, 0};
        run_case(c, "empty", fa, o, l, 3, (expect_t){0, 0}, (expect_t){0, 0});
    }
}

TG_TEST(merging)
{
    static const unsigned depths[] = {1, 8, 64};
    static const unsigned backends[] = {0, TG_IO_NO_FIXED, TG_IO_FORCE_PREAD};
    for (int buffered = 0; buffered < 2; buffered++) {
        ctx_t c = {0};
        unsigned ff = buffered ? TG_IO_FILE_BUFFERED : 0;
        TG_CHECK_OK(tg_io_file_open(&c.a, path_a, ff));
        TG_CHECK_OK(tg_io_file_open(&c.b, path_b, ff));
        TG_CHECK_OK(tg_io_file_open(&c.tail, path_tail, ff));
        if (!c.a || !c.b || !c.tail) return;
        c.A = tg_io_file_align(c.a);
        TG_CHECK(c.A == tg_io_file_align(c.tail));
        for (size_t b = 0; b < 3; b++) {
            if (!have_uring && !(backends[b] & TG_IO_FORCE_PREAD)) continue;
            for (size_t d = 0; d < 3; d++)
                for (c.merge = 0; c.merge < 2; c.merge++) {
                    char variant[128];
                    snprintf(variant, sizeof variant, "%s%s depth %u merge %d %s",
                             (backends[b] & TG_IO_FORCE_PREAD) ? "pread" : "io_uring",
                             backends[b] == 0 ? "+fixed" : "", depths[d], c.merge,
                             buffered ? "buffered" : "direct");
                    c.variant = variant;
                    c.M = 16 << 10;
                    tg_io_opts_t o = {.depth = depths[d],
                                      .max_read_bytes = c.M,
                                      .flags = backends[b] | (c.merge ? 0 : TG_IO_NO_MERGE)};
                    TG_CHECK_OK(tg_io_create(&c.io, &o));
                    if (!c.io) continue;
                    cases(&c);
                    tg_io_destroy(c.io);
                    c.io = NULL;
                }
        }
        tg_io_file_close(c.a);
        tg_io_file_close(c.b);
        tg_io_file_close(c.tail);
    }
}

int main(void)
{
    dir = tio_begin("io_merge", &have_uring);
    path_a = tio_make_file(dir, "a.bin", 1 << 20);
    path_b = tio_make_file(dir, "b.bin", 1 << 20);
    path_tail = tio_make_file(dir, "tail.bin", (1 << 20) + 100);
    TG_RUN(merging);
    free(path_a);
    free(path_b);
    free(path_tail);
    return tio_end(dir, have_uring);
}
