/* derived/ files: names, write/commit/reopen, the O_DIRECT-aligned payload, every reason a file
 * goes stale, abort and a crash mid-write, errors of create/commit/open/list/clean, a full and a
 * read-only disk (tmpfs; skipped where mount(2) is refused), and `tiergnn info` / `clean`. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"

static char tmp[4096], dsdir[4200], ddir[4300];
static tg_dataset_t *ds;

static void reopen_dataset(void)
{
    tg_dataset_close(ds);
    ds = NULL;
    if (tg_dataset_open(&ds, dsdir, TG_OPEN_CHECK_SIZES) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", dsdir, tg_errmsg());
        exit(1);
    }
}

/* len bytes of a pattern that depends on seed, in 4096-aligned memory. */
static unsigned char *pattern(size_t len, unsigned seed)
{
    unsigned char *p = tg_aligned_alloc(4096, len ? len : 1);
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 12));
    return p;
}

/* Writes kind/params with `len` bytes of pattern(seed) in pieces of `piece`; commit. */
static int build(const char *root, const char *kind, const char *params, size_t len, unsigned seed,
                 size_t piece)
{
    tg_derived_writer_t *w;
    int rc = tg_derived_create(&w, ds, root, kind, params, 64 << 10);
    if (rc) return rc;
    unsigned char *p = pattern(len, seed);
    for (size_t off = 0; off < len && !rc; off += piece)
        rc = tg_derived_append(w, p + off, TG_MIN(piece, len - off));
    free(p);
    if (rc) {
        tg_derived_abort(w);
        return rc;
    }
    return tg_derived_commit(w);
}

static void path_of(const char *kind, const char *params, char *buf, size_t len)
{
    if (tg_derived_path(ds, NULL, kind, params, buf, len) < 0) TG_FAIL("path: %s", tg_errmsg());
}

/* Overwrites len bytes at off of a file. */
static void poke(const char *path, uint64_t off, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY);
    TG_CHECK(fd >= 0 && pwrite(fd, data, len, (off_t)off) == (ssize_t)len);
    if (fd >= 0) close(fd);
}

static void expect_stale(const char *kind, const char *params, unsigned flags, const char *why)
{
    tg_derived_file_t *f = NULL;
    tg_err_clear();
    int rc = tg_derived_open(&f, ds, NULL, kind, params, flags);
    if (rc != -ESTALE)
        TG_FAIL("open %s %s: %d (%s), expected -ESTALE", kind, params, rc, tg_errmsg());
    if (!strstr(tg_errmsg(), why)) TG_FAIL("message '%s' lacks '%s'", tg_errmsg(), why);
    if (!strstr(tg_errmsg(), ddir)) TG_FAIL("message '%s' does not name the file", tg_errmsg());
    TG_CHECK(f == NULL);
    tg_derived_close(f);
}

static void expect_valid(const char *kind, const char *params, size_t len, unsigned seed)
{
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, NULL, kind, params, TG_DERIVED_VERIFY));
    if (!f) return;
    TG_CHECK_EQ_U64(f->payload_len, len);
    unsigned char *want = pattern(len, seed), *got = malloc(len ? len : 1);
    TG_CHECK_OK(tg_derived_read(f, got, len, 0));
    TG_CHECK(memcmp(want, got, len) == 0);
    TG_CHECK(f->payload_crc == tg_crc32(0, want, len));
    free(want);
    free(got);
    tg_derived_close(f);
}

/* ---------------------------------------------------------------- tests */

/* Positional writes: pieces out of order and a hole read back as written (zeros in the hole),
 * the CRC computed at commit; mixing them with appends is refused. */
TG_TEST(positional_writes)
{
    size_t len = 3 * 4096 + 100;
    unsigned char *want = pattern(len, 7);
    memset(want + 5000, 0, 3000); /* never written: a hole */
    tg_derived_writer_t *w = NULL;
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "pos", "a=1", 0));
    if (!w) return;
    TG_CHECK_OK(tg_derived_set_size(w, len));
    TG_CHECK_OK(tg_derived_pwrite(w, want + 8000, len - 8000, 8000));
    TG_CHECK_OK(tg_derived_flush(w));
    TG_CHECK_OK(tg_derived_pwrite(w, want, 5000, 0));
    TG_CHECK_EQ_U64(tg_derived_written(w), len);
    TG_CHECK_ERR(tg_derived_append(w, want, 10), "after positional writes");
    /* the writer keeps its first error */
    TG_CHECK_ERR(tg_derived_commit(w), "after positional writes");
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "pos", "a=1", 0));
    TG_CHECK_OK(tg_derived_pwrite(w, want + 8000, len - 8000, 8000));
    TG_CHECK_OK(tg_derived_pwrite(w, want, 5000, 0));
    TG_CHECK_OK(tg_derived_commit(w));
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, NULL, "pos", "a=1", TG_DERIVED_VERIFY));
    if (f) {
        unsigned char *got = malloc(len);
        TG_CHECK_EQ_U64(f->payload_len, len);
        TG_CHECK_OK(tg_derived_read(f, got, len, 0));
        TG_CHECK(memcmp(got, want, len) == 0);
        TG_CHECK(f->payload_crc == tg_crc32(0, want, len));
        free(got);
        tg_derived_close(f);
    }
    /* a positional write after appends */
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "pos", "a=2", 0));
    TG_CHECK_OK(tg_derived_append(w, want, 10));
    TG_CHECK_ERR(tg_derived_pwrite(w, want, 10, 100), "after appends");
    TG_CHECK_ERR(tg_derived_set_size(w, 10), "after appends");
    tg_derived_abort(w);
    free(want);
}

TG_TEST(names)
{
    char b[256];
    TG_CHECK_OK(tg_derived_name("ncache", "bytes=67108864", b, sizeof b));
    TG_CHECK(!strcmp(b, "ncache-bytes=67108864.bin"));
    TG_CHECK_OK(tg_derived_name("part_2", "k=4,seed=1,algo=metis+ref", b, sizeof b));
    TG_CHECK(!strcmp(b, "part_2-k=4,seed=1,algo=metis+ref.bin"));
    /* characters outside the name set: replaced, and a hash keeps "a b" apart from "a_b" */
    char c[256];
    TG_CHECK_OK(tg_derived_name("k", "a b/c", b, sizeof b));
    TG_CHECK_OK(tg_derived_name("k", "a_b_c", c, sizeof c));
    TG_CHECK(!strncmp(b, "k-a_b_c~", 8) && !strchr(b, '/') && strcmp(b, c) != 0);
    /* long params: shortened + hash, different for a different tail */
    char lp[300], lq[300];
    memset(lp, 'x', 299);
    lp[299] = 0;
    memcpy(lq, lp, sizeof lp);
    lq[298] = 'y';
    TG_CHECK_OK(tg_derived_name("k", lp, b, sizeof b));
    TG_CHECK_OK(tg_derived_name("k", lq, c, sizeof c));
    TG_CHECK(strlen(b) < 80 && strchr(b, '~') && strcmp(b, c) != 0);
    /* bad kinds and params */
    TG_CHECK_ERR(tg_derived_name("", "a", b, sizeof b), "kind");
    TG_CHECK_ERR(tg_derived_name(NULL, "a", b, sizeof b), "kind");
    TG_CHECK_ERR(tg_derived_name("Ncache", "a", b, sizeof b), "[a-z0-9_]");
    TG_CHECK_ERR(tg_derived_name("n-cache", "a", b, sizeof b), "[a-z0-9_]");
    TG_CHECK_ERR(tg_derived_name("tmp", "a", b, sizeof b), "'tmp'");
    TG_CHECK_ERR(tg_derived_name("abcdefghijklmnopqrstuvwxyz012345", "a", b, sizeof b), "1..31");
    TG_CHECK_OK(tg_derived_name("t", "a", b, sizeof b));
    TG_CHECK_ERR(tg_derived_name("k", "", b, sizeof b), "params must be 1..");
    TG_CHECK_ERR(tg_derived_name("k", NULL, b, sizeof b), "params must be 1..");
    TG_CHECK_ERR(tg_derived_name("k", "a\nb", b, sizeof b), "not printable");
    char *big = malloc(TG_DERIVED_PARAMS_MAX + 2);
    memset(big, 'p', TG_DERIVED_PARAMS_MAX + 1);
    big[TG_DERIVED_PARAMS_MAX + 1] = 0;
    TG_CHECK_ERR(tg_derived_name("k", big, b, sizeof b), "params must be 1..");
    free(big);
    TG_CHECK(tg_derived_name("ncache", "bytes=1", b, 8) == -ENAMETOOLONG);
    /* path errors too */
    TG_CHECK_ERR(tg_derived_path(ds, NULL, "Bad", "a", b, sizeof b), "kind");
    TG_CHECK(tg_derived_path(ds, NULL, "ncache", "bytes=1", b, 12) == -ENAMETOOLONG);
    char d[4400];
    tg_derived_dir(ds, "/scratch/x", d, sizeof d);
    TG_CHECK(!strcmp(d, "/scratch/x"));
    tg_derived_dir(ds, NULL, d, sizeof d);
    TG_CHECK(!strcmp(d, ddir));
}

TG_TEST(write_commit_reopen)
{
    /* pieces of 3 sizes: small unaligned ones and one aligned piece larger than the buffer */
    size_t len = (3u << 20) + 777;
    tg_derived_writer_t *w;
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "ncache", "bytes=4096", 64 << 10));
    if (!w) return;
    unsigned char *p = pattern(len, 1);
    TG_CHECK_OK(tg_derived_append(w, p, 1000));
    TG_CHECK_OK(tg_derived_append(w, p + 1000, 3096));
    TG_CHECK_OK(tg_derived_append(w, p + 4096, 2u << 20)); /* larger than the buffer */
    TG_CHECK_OK(tg_derived_append(w, p + 4096 + (2u << 20), len - 4096 - (2u << 20)));
    TG_CHECK_OK(tg_derived_append(w, p, 0));
    TG_CHECK_EQ_U64(tg_derived_written(w), len);
    TG_CHECK(tg_test_count_entries(ddir, 0) == 1); /* only the temp file so far */
    TG_CHECK_OK(tg_derived_commit(w));
    TG_CHECK(tg_test_count_entries(ddir, 0) == 1); /* the file, no temp left */

    char path[4400];
    path_of("ncache", "bytes=4096", path, sizeof path);
    struct stat st;
    TG_CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == TG_DERIVED_PAYLOAD_OFFSET + len);

    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, NULL, "ncache", "bytes=4096", TG_DERIVED_VERIFY));
    if (!f) return;
    TG_CHECK(!strcmp(f->path, path) && !strcmp(f->kind, "ncache"));
    TG_CHECK(!strcmp(f->params, "bytes=4096"));
    TG_CHECK(f->payload_off == TG_DERIVED_PAYLOAD_OFFSET && f->payload_off % 4096 == 0);
    TG_CHECK_EQ_U64(f->payload_len, len);
    TG_CHECK(f->payload_crc == tg_crc32(0, p, len));
    unsigned char *got = malloc(len);
    TG_CHECK_OK(tg_derived_read(f, got, len, 0));
    TG_CHECK(memcmp(got, p, len) == 0);
    TG_CHECK_OK(tg_derived_read(f, got, 10, len - 10));
    TG_CHECK(memcmp(got, p + len - 10, 10) == 0);
    TG_CHECK_ERR(tg_derived_read(f, got, 11, len - 10), "past its end");
    TG_CHECK_ERR(tg_derived_read(f, got, 1, len + 1), "past its end");

    /* the payload offset is what an O_DIRECT reader adds: an aligned block reads back */
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd >= 0) {
        unsigned char *blk = tg_aligned_alloc(4096, 8192);
        TG_CHECK(pread(fd, blk, 8192, (off_t)(f->payload_off + 4096)) == 8192);
        TG_CHECK(memcmp(blk, p + 4096, 8192) == 0);
        free(blk);
        close(fd);
    } else {
        fprintf(stderr, "note: no O_DIRECT on %s (%s)\n", path, strerror(errno));
    }
    free(got);
    free(p);
    tg_derived_close(f);

    /* an empty payload is a valid file too */
    TG_CHECK_OK(build(NULL, "empty", "n=0", 0, 0, 1));
    expect_valid("empty", "n=0", 0, 0);
    /* long params are kept whole in the header */
    char lp[3000];
    memset(lp, 'q', sizeof lp - 1);
    lp[sizeof lp - 1] = 0;
    lp[5] = ' ';
    TG_CHECK_OK(build(NULL, "long", lp, 100, 2, 100));
    TG_CHECK_OK(tg_derived_open(&f, ds, NULL, "long", lp, 0));
    if (f) TG_CHECK(!strcmp(f->params, lp));
    tg_derived_close(f);
    tg_derived_close(NULL);
}

TG_TEST(params_differ)
{
    /* Two params with the same file name can only meet through a hash collision or a rename;
     * the header tells them apart either way. */
    char a[4400], b[4400];
    TG_CHECK_OK(build(NULL, "pr", "alpha=0.85", 4000, 3, 1000));
    path_of("pr", "alpha=0.85", a, sizeof a);
    path_of("pr", "alpha=0.9", b, sizeof b);
    TG_CHECK(rename(a, b) == 0);
    expect_stale("pr", "alpha=0.9", 0, "params differ: made for 'alpha=0.85', wanted 'alpha=0.9'");
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "pr", "alpha=0.85", 0) ==
             -ENOENT);
    TG_CHECK_ERR(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "pr", "alpha=0.85", 0),
                 "not built yet");
    path_of("pq", "alpha=0.9", a, sizeof a);
    TG_CHECK(rename(b, a) == 0);
    expect_stale("pq", "alpha=0.9", 0, "made as kind 'pr', wanted 'pq'");
    /* a rebuild replaces the stale file */
    TG_CHECK_OK(build(NULL, "pq", "alpha=0.9", 5000, 4, 5000));
    expect_valid("pq", "alpha=0.9", 5000, 4);
    /* bad names are refused before anything is touched */
    tg_derived_writer_t *w = NULL;
    TG_CHECK_ERR(tg_derived_create(&w, ds, NULL, "x y", "a", 0), "kind");
    TG_CHECK(w == NULL);
    TG_CHECK_ERR(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "x", "", 0), "params");
}

/* Rewrites features.bin with other values and records its new CRC in meta.txt, as a
 * re-import of changed data would. */
static void change_features(void)
{
    char fp[4400];
    tg_dataset_path(ds, TG_FILE_FEATURES, fp, sizeof fp);
    size_t len = 0;
    unsigned char *x = (unsigned char *)tg_test_read_all(fp, &len);
    if (!x) return;
    x[0] ^= 0x40;
    TG_CHECK_OK(tg_write_file_atomic(fp, x, len));
    tg_meta_t m = ds->meta;
    m.files[TG_FILE_FEATURES].crc32 = tg_crc32(0, x, len);
    char *text, mp[4400];
    TG_CHECK_OK(tg_meta_format(&m, &text));
    snprintf(mp, sizeof mp, "%s/%s", dsdir, TG_META_NAME);
    TG_CHECK_OK(tg_write_file_atomic(mp, text, strlen(text)));
    free(text);
    free(x);
    reopen_dataset();
}

TG_TEST(dataset_changed)
{
    TG_CHECK_OK(build(NULL, "chunks", "rows=64", 10000, 5, 4096));
    expect_valid("chunks", "rows=64", 10000, 5);
    change_features();
    expect_stale("chunks", "rows=64", 0, "dataset changed since it was built: features.bin CRC");
    TG_CHECK_OK(build(NULL, "chunks", "rows=64", 20000, 6, 4096));
    expect_valid("chunks", "rows=64", 20000, 6);
    /* the node count is part of the identity too */
    tg_meta_t keep = ds->meta;
    ds->meta.num_nodes++;
    expect_stale("chunks", "rows=64", 0, "nodes then,");
    ds->meta = keep;
    ds->meta.feat_dim++;
    ds->meta.num_edges++;
    expect_stale("chunks", "rows=64", 0, "feature width");
    ds->meta = keep;
    expect_valid("chunks", "rows=64", 20000, 6);
}

TG_TEST(truncated_and_corrupt)
{
    char path[4400];
    path_of("trunc", "v=1", path, sizeof path);
    uint64_t full = TG_DERIVED_PAYLOAD_OFFSET + 9000;

    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    TG_CHECK(truncate(path, (off_t)full - 1) == 0);
    expect_stale("trunc", "v=1", 0, "truncated: 13095 bytes, the header says 13096");
    TG_CHECK(truncate(path, 100) == 0);
    expect_stale("trunc", "v=1", 0, "truncated: 100 bytes, less than the 4096-byte header");
    TG_CHECK(truncate(path, 0) == 0);
    expect_stale("trunc", "v=1", 0, "truncated: 0 bytes");
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    TG_CHECK(truncate(path, (off_t)full + 5) == 0);
    expect_stale("trunc", "v=1", 0, "too long: 13101 bytes");

    /* a byte of the header (num_nodes), the magic, the header CRC itself */
    unsigned char bad = 0xee;
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    poke(path, 33, &bad, 1);
    expect_stale("trunc", "v=1", 0, "bad CRC: header CRC");
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    poke(path, 0, "XXXX", 4);
    expect_stale("trunc", "v=1", 0, "bad magic");
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    poke(path, TG_DERIVED_PAYLOAD_OFFSET - 2, &bad, 1);
    expect_stale("trunc", "v=1", 0, "bad CRC: header CRC");

    /* another format version, with a header CRC that matches */
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    unsigned char *h = (unsigned char *)tg_test_read_all(path, NULL);
    if (h) {
        h[8] = 9;
        uint32_t crc = tg_crc32(0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, 0, h, 16);
        poke(path, TG_DERIVED_PAYLOAD_OFFSET - 4, &crc, 4);
        expect_stale("trunc", "v=1", 0, "format version 9");
        /* params length out of range, CRC again made to match */
        h[8] = 1;
        h[128] = 0xff, h[129] = 0xff;
        crc = tg_crc32(0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, 0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, TG_DERIVED_PAYLOAD_OFFSET - 4, &crc, 4);
        expect_stale("trunc", "v=1", 0, "header fields out of range");
        /* a newline in the params (or a control byte in the kind), CRC made to match: another's
         * file, and its bytes stay out of the one-line message (found by fuzz_part) */
        h[128] = 3, h[129] = 0;
        h[132 + 1] = '\n';
        crc = tg_crc32(0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, 0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, TG_DERIVED_PAYLOAD_OFFSET - 4, &crc, 4);
        expect_stale("trunc", "v=1", 0, "header fields out of range (byte 0x0a in its params)");
        TG_CHECK(!strchr(tg_errmsg(), '\n'));
        h[132 + 1] = '=';
        h[96 + 2] = 0x07;
        crc = tg_crc32(0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, 0, h, TG_DERIVED_PAYLOAD_OFFSET - 4);
        poke(path, TG_DERIVED_PAYLOAD_OFFSET - 4, &crc, 4);
        expect_stale("trunc", "v=1", 0, "header fields out of range (byte 0x07 in its kind)");
        free(h);
    }

    /* a payload byte: found only with TG_DERIVED_VERIFY */
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    poke(path, TG_DERIVED_PAYLOAD_OFFSET + 8000, &bad, 1);
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, NULL, "trunc", "v=1", 0));
    tg_derived_close(f);
    expect_stale("trunc", "v=1", TG_DERIVED_VERIFY, "bad CRC: payload CRC");
    /* ... or through a dataset opened with its checksums checked (train --verify): hier's
     * feature rows, gids's ranking live in such payloads */
    tg_dataset_t *plain = ds;
    TG_CHECK_OK(tg_dataset_open(&ds, dsdir, TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS));
    if (ds) {
        expect_stale("trunc", "v=1", 0, "bad CRC: payload CRC");
        tg_dataset_close(ds);
    }
    ds = plain;
    TG_CHECK_OK(build(NULL, "trunc", "v=1", 9000, 7, 9000));
    expect_valid("trunc", "v=1", 9000, 7);
}

TG_TEST(abort_and_errors)
{
    char path[4400];
    int before = tg_test_count_entries(ddir, 0);
    tg_derived_writer_t *w;
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "aborted", "x=1", 0));
    unsigned char *p = pattern(100000, 8);
    TG_CHECK_OK(tg_derived_append(w, p, 100000));
    TG_CHECK(tg_test_count_entries(ddir, 0) == before + 1);
    tg_derived_abort(w);
    tg_derived_abort(NULL);
    TG_CHECK(tg_test_count_entries(ddir, 0) == before);
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "aborted", "x=1", 0) ==
             -ENOENT);

    /* commit cannot rename over a non-empty directory: the error names the file, the temp
     * goes, and open refuses the directory (not -ESTALE: a rebuild would not help) */
    path_of("blocked", "x=1", path, sizeof path);
    char inner[4500];
    snprintf(inner, sizeof inner, "%s/f", path);
    TG_CHECK_OK(tg_mkdir_p(path));
    tg_test_write_file(inner, "x");
    before = tg_test_count_entries(ddir, 0);
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "blocked", "x=1", 0));
    TG_CHECK_OK(tg_derived_append(w, p, 5000));
    TG_CHECK_ERR(tg_derived_commit(w), "cannot rename");
    TG_CHECK(tg_test_count_entries(ddir, 0) == before);
    tg_err_clear();
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "blocked", "x=1", 0) ==
             -EINVAL);
    TG_CHECK(strstr(tg_errmsg(), "not a regular file") != NULL);
    tg_rmtree(path);

    /* a root that is a regular file: create, open and list fail with the errno, not -ENOENT */
    char file_root[4400];
    snprintf(file_root, sizeof file_root, "%s/not-a-dir", tmp);
    tg_test_write_file(file_root, "x");
    TG_CHECK_ERR(tg_derived_create(&w, ds, file_root, "k", "a=1", 0), "not-a-dir");
    char under_file[4500];
    snprintf(under_file, sizeof under_file, "%s/sub", file_root);
    TG_CHECK_ERR(tg_derived_create(&w, ds, under_file, "k", "a=1", 0), "cannot create directory");
    tg_err_clear();
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, file_root, "k", "a=1", 0) ==
             -ENOTDIR);
    tg_derived_entry_t *v;
    size_t n;
    TG_CHECK_ERR(tg_derived_list(ds, file_root, &v, &n), "cannot list");
    uint64_t freed;
    size_t removed;
    TG_CHECK_ERR(tg_derived_clean(ds, file_root, 0, NULL, &freed, &removed), "cannot list");
    /* a root given as an override is used as is, and made when missing */
    char scratch[4400];
    snprintf(scratch, sizeof scratch, "%s/scratch/a/b", tmp);
    TG_CHECK_OK(build(scratch, "k", "a=1", 10, 1, 10));
    TG_CHECK(tg_test_count_entries(scratch, 0) == 1);
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, scratch, "k", "a=1", TG_DERIVED_VERIFY));
    tg_derived_close(f);
    free(p);
}

/* Forks a child that writes part of kind/params and dies without committing. */
static pid_t crash_writer(const char *kind, const char *params)
{
    pid_t pid = fork();
    if (pid == 0) {
        tg_derived_writer_t *w;
        unsigned char *p = pattern(200000, 9);
        if (tg_derived_create(&w, ds, NULL, kind, params, 64 << 10) ||
            tg_derived_append(w, p, 200000))
            _exit(1);
        _exit(0); /* a crash: no commit, no abort */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    TG_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return pid;
}

static int temp_of(pid_t pid)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tmp-%d-", (int)pid);
    DIR *d = opendir(ddir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

TG_TEST(crash_mid_write)
{
    /* a crash while rebuilding leaves the committed file in place and trusted */
    TG_CHECK_OK(build(NULL, "crash", "v=1", 3000, 10, 3000));
    pid_t pid = crash_writer("crash", "v=1");
    TG_CHECK(temp_of(pid) == 1);
    tg_derived_entry_t *v = NULL;
    size_t n = 0;
    TG_CHECK_OK(tg_derived_list(ds, NULL, &v, &n));
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].state == TG_DERIVED_TEMP_DEAD && strstr(v[i].why, "which is gone")) seen++;
    TG_CHECK(seen == 1);
    free(v);
    expect_valid("crash", "v=1", 3000, 10); /* the open also sweeps the dead temp file */
    TG_CHECK(temp_of(pid) == 0);

    /* a crash on the first build: no file is trusted, the next create sweeps the temp */
    pid = crash_writer("crash", "v=2");
    TG_CHECK(temp_of(pid) == 1);
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "crash", "v=2", 0) == -ENOENT);
    TG_CHECK(temp_of(pid) == 0);
    pid = crash_writer("crash", "v=2");
    TG_CHECK(temp_of(pid) == 1);
    tg_derived_writer_t *w;
    TG_CHECK_OK(tg_derived_create(&w, ds, NULL, "other", "v=1", 0));
    TG_CHECK(temp_of(pid) == 0);

    /* a running writer's temp file is never swept (this process is alive) */
    TG_CHECK(temp_of(getpid()) == 1);
    TG_CHECK(tg_derived_open(&(tg_derived_file_t *){NULL}, ds, NULL, "other", "v=1", 0) == -ENOENT);
    TG_CHECK(temp_of(getpid()) == 1);
    TG_CHECK_OK(tg_derived_list(ds, NULL, &v, &n));
    seen = 0;
    for (size_t i = 0; i < n; i++)
        seen += v[i].state == TG_DERIVED_TEMP_LIVE;
    TG_CHECK(seen == 1);
    free(v);
    uint64_t freed;
    size_t removed;
    TG_CHECK_OK(tg_derived_clean(ds, NULL, 1, NULL, &freed, &removed));
    TG_CHECK(temp_of(getpid()) == 1);
    TG_CHECK_OK(tg_derived_commit(w));
    TG_CHECK(temp_of(getpid()) == 0);
    expect_valid("other", "v=1", 0, 0);
}

static int mount_tmpfs(const char *mnt, unsigned long flags, const char *opts)
{
    tg_mkdir_p(mnt);
    if (mount("tmpfs", mnt, "tmpfs", flags, opts)) {
        fprintf(stderr, "SKIP (part): cannot mount a tmpfs on %s (%s)\n", mnt, strerror(errno));
        return -1;
    }
    return 0;
}

TG_TEST(disk_full_and_read_only)
{
    char mnt[4400];
    snprintf(mnt, sizeof mnt, "%s/full", tmp);
    if (mount_tmpfs(mnt, 0, "size=256k")) return;
    /* 1 MiB into 256 KiB: ENOSPC from an append or from commit, then the same from every call;
     * nothing is left behind */
    tg_derived_writer_t *w;
    TG_CHECK_OK(tg_derived_create(&w, ds, mnt, "big", "n=1", 64 << 10));
    unsigned char *p = pattern(1 << 20, 11);
    int rc = 0;
    for (size_t off = 0; off < (1u << 20) && !rc; off += 32 << 10)
        rc = tg_derived_append(w, p + off, 32 << 10);
    if (rc) {
        TG_CHECK(rc == -ENOSPC);
        TG_CHECK_ERR(tg_derived_append(w, p, 10), "tmp-");
    }
    tg_err_clear();
    rc = tg_derived_commit(w);
    TG_CHECK(rc == -ENOSPC);
    if (!strstr(tg_errmsg(), mnt) || !strstr(tg_errmsg(), "tmp-"))
        TG_FAIL("message '%s' should name the temp file", tg_errmsg());
    TG_CHECK(tg_test_count_entries(mnt, 0) == 0);

    /* a disk already full: the header's room cannot be written (create or commit says so) */
    char filler[4500];
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    int fd = open(filler, O_WRONLY | O_CREAT, 0644);
    while (fd >= 0 && write(fd, p, 4096) == 4096) {
    }
    if (fd >= 0) close(fd);
    w = NULL;
    tg_err_clear();
    rc = tg_derived_create(&w, ds, mnt, "big", "n=1", 4096);
    if (rc == 0) rc = tg_derived_commit(w);
    TG_CHECK(rc == -ENOSPC && strstr(tg_errmsg(), "tmp-") != NULL);
    TG_CHECK(tg_test_count_entries(mnt, 0) == 1);
    unlink(filler);

    /* a file that fits; then the disk turns read-only: clean reports what it cannot remove */
    TG_CHECK_OK(build(mnt, "small", "n=1", 1000, 12, 1000));
    TG_CHECK(mount("tmpfs", mnt, "tmpfs", MS_REMOUNT | MS_RDONLY, "size=256k") == 0);
    TG_CHECK_ERR(tg_derived_create(&w, ds, mnt, "small", "n=2", 0), mnt);
    uint64_t freed;
    size_t removed;
    TG_CHECK_ERR(tg_derived_clean(ds, mnt, 0, NULL, &freed, &removed), "cannot remove");
    TG_CHECK(removed == 0 && freed == 0);
    /* reading still works on a read-only disk */
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, ds, mnt, "small", "n=1", TG_DERIVED_VERIFY));
    tg_derived_close(f);
    free(p);
    umount(mnt);
}

TG_TEST(cli_info_and_clean)
{
    char *out = NULL, path[4400], notes[4400];
    /* no derived/ yet */
    tg_rmtree(ddir);
    TG_CHECK(tg_test_cli(&out, "info %s", dsdir) == 0);
    if (!out || !strstr(out, "derived:    none")) TG_FAIL("info: %s", out);
    free(out);

    TG_CHECK_OK(build(NULL, "ncache", "bytes=4096", 5000, 13, 5000));
    TG_CHECK_OK(build(NULL, "part", "k=4", 6000, 14, 6000));
    path_of("part", "k=4", path, sizeof path);
    TG_CHECK(truncate(path, 5000) == 0);
    pid_t pid = crash_writer("pr", "alpha=0.85");
    snprintf(notes, sizeof notes, "%s/notes.txt", ddir);
    tg_test_write_file(notes, "mine");

    TG_CHECK(tg_test_cli(&out, "info %s", dsdir) == 0);
    const char *want[] = {"derived:    ",
                          "(4 entries",
                          "1 stale)",
                          "ncache     bytes=4096",
                          "valid",
                          "part       k=4",
                          "stale: truncated: 5000 bytes",
                          "which is gone",
                          "notes.txt",
                          "not a derived file"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!out || !strstr(out, want[i])) TG_FAIL("info lacks '%s':\n%s", want[i], out);
    free(out);
    TG_CHECK(temp_of(pid) == 1); /* info only looks */

    TG_CHECK(tg_test_cli(&out, "clean %s --stale-only", dsdir) == 0);
    const char *want2[] = {"removed  part-k=4.bin", "removed  tmp-",
                           "kept     ncache-bytes=4096.bin (valid)",
                           "kept     notes.txt (not a derived file)", "in 2 files"};
    for (size_t i = 0; i < sizeof want2 / sizeof *want2; i++)
        if (!out || !strstr(out, want2[i])) TG_FAIL("clean lacks '%s':\n%s", want2[i], out);
    free(out);
    TG_CHECK(tg_test_count_entries(ddir, 0) == 2);
    expect_valid("ncache", "bytes=4096", 5000, 13);

    TG_CHECK(tg_test_cli(&out, "clean %s", dsdir) == 0);
    if (!out || !strstr(out, "removed  ncache-bytes=4096.bin") ||
        !strstr(out, "freed 8.88 KiB (9096 bytes) in 1 file\n"))
        TG_FAIL("clean: %s", out);
    free(out);
    TG_CHECK(tg_test_count_entries(ddir, 0) == 1); /* notes.txt stays, so does derived/ */
    unlink(notes);
    TG_CHECK_OK(build(NULL, "ncache", "bytes=4096", 5000, 13, 5000));
    TG_CHECK(tg_test_cli(&out, "clean %s", dsdir) == 0);
    if (!out || !strstr(out, "(empty)")) TG_FAIL("clean: %s", out);
    free(out);
    struct stat st;
    TG_CHECK(stat(ddir, &st) != 0); /* the emptied derived/ went too */
    TG_CHECK(tg_test_cli(&out, "clean %s", dsdir) == 0);
    if (!out || !strstr(out, "freed 0 B")) TG_FAIL("clean of nothing: %s", out);
    free(out);

    /* the dataset is untouched */
    tg_dataset_t *check;
    TG_CHECK_OK(tg_dataset_open(&check, dsdir, TG_OPEN_CHECK_CHECKSUMS));
    tg_dataset_close(check);

    /* usage and errors */
    TG_CHECK(tg_test_cli(&out, "clean --help") == 0);
    if (!out || !strstr(out, "usage: tiergnn clean DATASET [--stale-only]")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "clean") != 0);
    if (!out || !strstr(out, "expected one dataset directory")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "clean %s/nope", tmp) != 0);
    if (!out || !strstr(out, "nope")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "clean %s --bogus", dsdir) != 0);
    free(out);
    TG_CHECK(tg_test_cli(&out, "--help") == 0);
    if (!out || !strstr(out, "clean ")) TG_FAIL("main usage lacks clean: %s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "info --help") == 0);
    if (!out || !strstr(out, "derived/")) TG_FAIL("%s", out);
    free(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_QUIET);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("derived"));
    snprintf(dsdir, sizeof dsdir, "%s/ds", tmp);
    snprintf(ddir, sizeof ddir, "%s/derived", dsdir);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 500;
    o.feat_dim = 8;
    o.classes = 4;
    o.mem_bytes = tg_gen_min_mem(&o);
    o.threads = 1;
    if (tg_generate(dsdir, &o) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", dsdir, tg_errmsg());
        return 1;
    }
    reopen_dataset();
    TG_RUN(names);
    TG_RUN(write_commit_reopen);
    TG_RUN(positional_writes);
    TG_RUN(params_differ);
    TG_RUN(dataset_changed);
    TG_RUN(truncated_and_corrupt);
    TG_RUN(abort_and_errors);
    TG_RUN(crash_mid_write);
    TG_RUN(disk_full_and_read_only);
    TG_RUN(cli_info_and_clean);
    tg_dataset_close(ds);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
