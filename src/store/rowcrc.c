/* A CRC-32 per feature row, built from features.bin and checked on reads (tiergnn/rowcrc.h). */
#include "tiergnn/rowcrc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tiergnn/derived.h"
#include "tiergnn/io.h"

#define PIECE_BYTES ((size_t)16 << 20) /* one sequential read of features.bin */
#define IO_DEPTH 8u                    /* 8 reads of 2 MiB in flight: sequential bandwidth */
#define IO_MAX_READ ((size_t)2 << 20)
#define WRITE_BUF ((size_t)1 << 20)
#define READ_SUMS ((size_t)1 << 20) /* sums read from the derived file at a time */

/* One pass over features.bin: the sums of every row into dst (N entries; NULL: none kept) and w
 * (NULL: none written; *wfail = 1 when an append fails, which stops the writing, not the pass).
 * The whole file's CRC-32, combined from the row sums, must be meta.txt's. */
static int compute(const tg_dataset_t *ds, uint32_t *dst, tg_derived_writer_t *w, int *wfail)
{
    const tg_meta_t *m = &ds->meta;
    size_t row = (size_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    uint64_t N = m->num_nodes, bytes = N * row;
    char path[4096];
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    if (row == 0 || N == 0) return 0;
    uint64_t per = TG_MAX((uint64_t)1, (uint64_t)(PIECE_BYTES / row));
    size_t piece = (size_t)TG_MIN(per * row, bytes);
    uint32_t *sums = malloc((size_t)TG_MIN(per, N) * sizeof *sums);
    void *buf = malloc(piece);
    tg_io_file_t *f = NULL;
    tg_io_t *io = NULL;
    tg_io_opts_t io_o = {.depth = IO_DEPTH,
                         .max_read_bytes = TG_MIN(IO_MAX_READ, (piece + 4095) / 4096 * 4096)};
    int rc = !sums || !buf
                 ? tg_err(-ENOMEM, "row checksums: out of memory for a %zu-byte read", piece)
                 : 0;
    if (rc == 0) rc = tg_io_file_open(&f, path, 0);
    if (rc == 0) rc = tg_io_create(&io, &io_o);
    uLong op = crc32_combine_gen64((z_off64_t)row), whole = 0;
    tg_progress_t pg;
    int shown = rc == 0;
    if (shown) tg_progress_begin(&pg, "row checksums", bytes, "B");
    for (uint64_t first = 0; rc == 0 && first < N; first += per) {
        uint64_t n = TG_MIN(per, N - first);
        if ((rc = tg_io_read(io, f, first * row, (size_t)(n * row), buf)) < 0) {
            tg_err_prefix(rc, "row checksums");
            break;
        }
        for (uint64_t i = 0; i < n; i++) {
            sums[i] = tg_data_crc32(0, (const char *)buf + i * row, row);
            whole = first + i == 0 ? sums[i] : crc32_combine_op(whole, sums[i], op);
        }
        if (dst) memcpy(dst + first, sums, (size_t)n * sizeof *sums);
        if (w && !*wfail && tg_derived_append(w, sums, (size_t)n * sizeof *sums) < 0) *wfail = 1;
        tg_progress_update(&pg, (first + n) * row, NULL);
    }
    if (shown) tg_progress_end(&pg);
    if (rc == 0 && (uint32_t)whole != m->files[TG_FILE_FEATURES].crc32)
        rc = tg_err(-EIO,
                    "%s: CRC-32 0x%08x, but meta.txt records 0x%08x: the file changed after the "
                    "dataset was written (checksum mismatch); no row checksums taken from it",
                    path, (unsigned)whole, (unsigned)m->files[TG_FILE_FEATURES].crc32);
    tg_io_destroy(io);
    tg_io_file_close(f);
    free(buf);
    free(sums);
    return rc;
}

/* The derived file, valid with N x 4 payload bytes, into *f: 0, else -ENOENT / -ESTALE (the
 * message says why) or another error of the directory. */
static int find(const tg_dataset_t *ds, const char *root, tg_derived_file_t **f)
{
    /* the payload's own CRC too (4 bytes a node: cheap): a changed sum would otherwise be
     * reported as a changed row of features.bin, which `tiergnn verify` then finds intact */
    int rc = tg_derived_open(f, ds, root, TG_ROWCRC_KIND, TG_ROWCRC_PARAMS, TG_DERIVED_VERIFY);
    uint64_t want = ds->meta.num_nodes * sizeof(uint32_t);
    if (rc == 0 && (*f)->payload_len != want) {
        rc = tg_err(-ESTALE, "%s: stale, %llu payload bytes, expected %llu (4 per node); rebuilt",
                    (*f)->path, (unsigned long long)(*f)->payload_len, (unsigned long long)want);
        tg_derived_close(*f);
        *f = NULL;
    }
    return rc;
}

/* Builds the derived file, keeping the sums in dst too when given. 1 = written; 2 = the
 * directory cannot be written (logged; dst, when given, is complete); < 0 = an error of
 * features.bin or memory. */
static int build(const tg_dataset_t *ds, const char *root, uint32_t *dst)
{
    tg_derived_writer_t *w = NULL;
    int wfail = 0;
    if (tg_derived_create(&w, ds, root, TG_ROWCRC_KIND, TG_ROWCRC_PARAMS, WRITE_BUF) < 0) {
        tg_log_info("row checksums: cannot write the derived file (%s); %s", tg_errmsg(),
                    dst ? "keeping them in RAM" : "nothing kept");
        w = NULL;
        wfail = 1;
        if (!dst) return 2;
    }
    int rc = compute(ds, dst, w, &wfail);
    if (rc < 0 || wfail) {
        if (w) tg_derived_abort(w);
        if (rc < 0) return rc;
        if (w) tg_log_info("row checksums: cannot write the derived file; kept in RAM");
        return 2;
    }
    if ((rc = tg_derived_commit(w)) < 0) {
        tg_log_info("row checksums: cannot write the derived file (%s)", tg_errmsg());
        return 2;
    }
    return 1;
}

int tg_rowcrc_prepare(const tg_dataset_t *ds, const char *root)
{
    tg_derived_file_t *f = NULL;
    int rc = find(ds, root, &f);
    tg_derived_close(f);
    if (rc == 0) return 0;
    if (rc != -ENOENT && rc != -ESTALE) {
        tg_log_info("row checksums: cannot read the derived file (%s); nothing kept", tg_errmsg());
        return 2;
    }
    if (rc == -ESTALE) tg_log_info("row checksums: %s", tg_errmsg());
    return build(ds, root, NULL);
}

void tg_rowcrc_close(tg_rowcrc_t *rc)
{
    if (!rc) return;
    if (rc->budget && rc->reserved) tg_budget_release(rc->budget, rc->reserved);
    free(rc->own);
    free(rc);
}

/* A handle with room for n sums, reserved against budget. */
static int alloc_table(tg_rowcrc_t **out, uint64_t n, size_t row_bytes, tg_budget_t *budget)
{
    *out = NULL;
    uint64_t bytes = n * sizeof(uint32_t);
    if (budget) {
        int rc = tg_budget_reserve(budget, bytes, "row checksums (--verify-reads)");
        if (rc < 0) return rc;
    }
    tg_rowcrc_t *r = calloc(1, sizeof *r);
    uint32_t *own = malloc((size_t)bytes + 1);
    if (!r || !own) {
        free(r);
        free(own);
        if (budget) tg_budget_release(budget, bytes);
        return tg_err(-ENOMEM, "row checksums: out of memory for %llu sums", (unsigned long long)n);
    }
    r->num_nodes = n;
    r->row_bytes = row_bytes;
    r->crc = r->own = own;
    r->budget = budget;
    r->reserved = budget ? bytes : 0;
    *out = r;
    return 0;
}

int tg_rowcrc_open(tg_rowcrc_t **out, const tg_dataset_t *ds, const char *root, tg_budget_t *budget)
{
    const tg_meta_t *m = &ds->meta;
    tg_rowcrc_t *r;
    int rc = alloc_table(&r, m->num_nodes, (size_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype),
                         budget);
    if (rc < 0) return rc;
    tg_derived_file_t *f = NULL;
    rc = find(ds, root, &f);
    if (rc == 0) {
        uint64_t bytes = m->num_nodes * sizeof(uint32_t);
        for (uint64_t off = 0; rc == 0 && off < bytes; off += READ_SUMS)
            rc = tg_derived_read(f, (char *)r->own + off,
                                 (size_t)TG_MIN((uint64_t)READ_SUMS, bytes - off), off);
        tg_derived_close(f);
    } else if (rc == -ENOENT || rc == -ESTALE) {
        if (rc == -ESTALE) tg_log_info("row checksums: %s", tg_errmsg());
        rc = build(ds, root, r->own);
        if (rc > 0) rc = 0;
    } else {
        tg_log_info("row checksums: cannot read the derived file (%s); computing them in RAM",
                    tg_errmsg());
        int wfail = 1;
        rc = compute(ds, r->own, NULL, &wfail);
    }
    if (rc < 0) {
        tg_rowcrc_close(r);
        return tg_err_prefix(rc, "--verify-reads");
    }
    *out = r;
    return 0;
}

int tg_rowcrc_permuted(tg_rowcrc_t **out, const tg_rowcrc_t *src, const uint64_t *map, uint64_t n,
                       tg_budget_t *budget)
{
    tg_rowcrc_t *r;
    int rc = alloc_table(&r, n, src->row_bytes, budget);
    if (rc < 0) return rc;
    for (uint64_t i = 0; i < n; i++) {
        if (map[i] >= src->num_nodes) {
            tg_rowcrc_close(r);
            return tg_err(-EINVAL, "row checksums: row %llu maps to node %llu of %llu",
                          (unsigned long long)i, (unsigned long long)map[i],
                          (unsigned long long)src->num_nodes);
        }
        r->own[i] = src->crc[map[i]];
    }
    r->map = map;
    *out = r;
    return 0;
}

int tg_rowcrc_check(const tg_rowcrc_t *rc, uint64_t row, const void *raw, const char *path,
                    uint64_t off)
{
    if (!rc) return 0;
    if (row >= rc->num_nodes)
        return tg_err(-EINVAL, "%s: offset %llu: row %llu has no checksum (%llu rows)", path,
                      (unsigned long long)off, (unsigned long long)row,
                      (unsigned long long)rc->num_nodes);
    uint32_t got = tg_data_crc32(0, raw, rc->row_bytes);
    if (got == rc->crc[row]) return 0;
    char where[64] = "";
    if (rc->map) snprintf(where, sizeof where, " (row %llu of the file)", (unsigned long long)row);
    return tg_err(-EIO,
                  "%s: offset %llu: the row of node %llu%s does not match its checksum in "
                  "derived/rowcrc (CRC-32 0x%08x, expected 0x%08x): the file changed after it was "
                  "verified; run tiergnn verify",
                  path, (unsigned long long)off, (unsigned long long)(rc->map ? rc->map[row] : row),
                  where, (unsigned)got, (unsigned)rc->crc[row]);
}

int tg_rowcrc_check_rows(const tg_rowcrc_t *rc, uint64_t first, uint64_t n, const void *raw,
                         const char *path, uint64_t off)
{
    if (!rc) return 0;
    for (uint64_t i = 0; i < n; i++) {
        int e = tg_rowcrc_check(rc, first + i, (const char *)raw + i * rc->row_bytes, path,
                                off + i * rc->row_bytes);
        if (e < 0) return e;
    }
    return 0;
}
