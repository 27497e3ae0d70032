/* Dataset format: writer -> reader round trips (f32, f16 with tricky values, u32 and u64 index
 * widths, multi-label), f16 conversion, tg_filew (direct and buffered paths, precomputed CRC),
 * metadata parse errors that name meta.txt and the line, and the dataset writer's
 * no-half-written-dataset behaviour. */
#include "data/crc-impl.h"
#include "tg_test.h"
#include "tiergnn/data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- f16 */

TG_TEST(f16_conversion)
{
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f, 0x3c00},
        {-2.0f, 0xc000},
        {65504.0f, 0x7bff},              /* largest finite */
        {65519.0f, 0x7bff},              /* rounds down to the largest */
        {65520.0f, 0x7c00},              /* the tie rounds to even: Inf */
        {1e6f, 0x7c00},                  /* overflow */
        {6.103515625e-05f, 0x0400},      /* smallest normal */
        {5.9604644775390625e-08f, 0x01}, /* smallest subnormal */
        {2.98023223876953125e-08f, 0x0}, /* half of it: tie to even (0) */
        {4.4703483581542969e-08f, 0x1},  /* 0.75 of it: up */
        {8.9406967163085938e-08f, 0x2},  /* 1.5 of it: tie to even (2) */
        {1e-10f, 0x0},                   /* underflow */
        {1.00048828125f, 0x3c00},        /* 1 + 2^-11: tie, to even (1) */
        {1.00146484375f, 0x3c02},        /* 1 + 3 * 2^-11: tie, to even (up) */
        {1.0009765625f, 0x3c01},         /* 1 + 2^-10: exact */
        {2047.0f, 0x67ff},               /* largest with exponent 10 */
        {2047.5f, 0x6800},               /* tie, to even: carries into the next exponent */
        {2046.5f, 0x67fe},               /* tie, to even: down */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = tg_f32_to_f16(cases[i].f);
        if (h != cases[i].h)
            TG_FAIL("f16(%.9g) = 0x%04x, expected 0x%04x", cases[i].f, h, cases[i].h);
    }
    float inf = 1.0f / 0.0f, nan = 0.0f / 0.0f;
    TG_CHECK_EQ_U64(tg_f32_to_f16(inf), 0x7c00);
    TG_CHECK_EQ_U64(tg_f32_to_f16(-inf), 0xfc00);
    uint16_t hn = tg_f32_to_f16(nan);
    TG_CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
    TG_CHECK(isnan(tg_f16_to_f32(hn)));
    /* every finite half survives f16 -> f32 -> f16 */
    for (uint32_t h = 0; h < 65536; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;
        float f = tg_f16_to_f32((uint16_t)h);
        if (tg_f32_to_f16(f) != h) {
            TG_FAIL("round trip of 0x%04x gave 0x%04x", h, tg_f32_to_f16(f));
            break;
        }
    }
    TG_CHECK_NEAR(tg_f16_to_f32(0x0001), 5.9604644775390625e-08, 0);
    TG_CHECK_NEAR(tg_f16_to_f32(0x7bff), 65504.0, 0);
}

/* ---------------------------------------------------------------- CRC-32 */

TG_TEST(crc32_matches_zlib)
{
    size_t n = 1 << 16;
    uint8_t *b = malloc(n + 64);
    tg_rng_t r;
    tg_rng_seed(&r, 3);
    for (size_t i = 0; i < n + 64; i++)
        b[i] = (uint8_t)tg_rng_u64(&r);
    /* every length up to 300 at every offset mod 16, then random ones, with running CRCs */
    for (size_t len = 0; len < 300; len++)
        for (size_t off = 0; off < 16; off++) {
            uint32_t c0 = (uint32_t)len * 2654435761u;
            if (tg_data_crc32(c0, b + off, len) != tg_crc32(c0, b + off, len)) {
                TG_FAIL("crc mismatch at len %zu off %zu", len, off);
                goto out;
            }
        }
    for (int t = 0; t < 200; t++) {
        size_t off = tg_rng_below(&r, 64), len = tg_rng_below(&r, n);
        TG_CHECK_EQ_U64(tg_data_crc32(0, b + off, len), tg_crc32(0, b + off, len));
    }
    /* known value: zlib.crc32(b"123456789") */
    TG_CHECK_EQ_U64(tg_data_crc32(0, "123456789", 9), 0xcbf43926);
    uint8_t ones[100];
    memset(ones, 0xff, sizeof ones);
    TG_CHECK_EQ_U64(tg_data_crc32(tg_data_crc32(0, ones, 37), ones + 37, 63),
                    tg_crc32(0, ones, 100));
out:
    free(b);
}

/* ---------------------------------------------------------------- tg_filew */

TG_TEST(filew_paths)
{
    const char *dir = tg_test_tmpdir("format-filew");
    char path[4096];
    snprintf(path, sizeof path, "%s/x.bin", dir);
    /* sizes that hit: small pieces, an aligned big piece (direct from the caller), a tail */
    size_t total = (3u << 20) + 12345;
    uint8_t *data = tg_aligned_alloc(4096, total);
    for (size_t i = 0; i < total; i++)
        data[i] = (uint8_t)(i * 131 + 7);
    tg_filew_t w;
    TG_CHECK_OK(tg_filew_open(&w, path, 1 << 20));
    TG_CHECK_OK(tg_filew_write(&w, data, 100));
    TG_CHECK_OK(tg_filew_write(&w, data + 100, (1u << 20) - 100)); /* fills one buffer */
    TG_CHECK_OK(tg_filew_write(&w, data + (1u << 20), 1u << 20));  /* aligned: direct */
    TG_CHECK_OK(tg_filew_write_crc(&w, data + (2u << 20), total - (2u << 20),
                                   tg_crc32(0, data + (2u << 20), total - (2u << 20))));
    TG_CHECK_EQ_U64(tg_filew_size(&w), total);
    tg_file_info_t fi;
    TG_CHECK_OK(tg_filew_close(&w, &fi));
    TG_CHECK_EQ_U64(fi.size, total);
    TG_CHECK_EQ_U64(fi.crc32, tg_crc32(0, data, total));
    char *back = NULL;
    size_t len = 0;
    TG_CHECK_OK(tg_read_file(path, &back, &len));
    TG_CHECK_EQ_U64(len, total);
    TG_CHECK(back && memcmp(back, data, total) == 0);
    free(back);
    /* closing twice is an error, discarding after close is harmless */
    TG_CHECK_ERR(tg_filew_close(&w, &fi), "closed");
    tg_filew_discard(&w);
    /* unwritable path */
    snprintf(path, sizeof path, "%s/no/such/dir/x.bin", dir);
    TG_CHECK_ERR(tg_filew_open(&w, path, 0), "cannot create");
    free(data);
    tg_rmtree(dir);
}

/* ---------------------------------------------------------------- round trip */

typedef struct small_ds {
    uint64_t N, E, D, C;
    uint64_t indptr[8];
    uint64_t indices[16];
    float feats[8 * 5];
    int32_t labels[8 * 3];
    uint64_t split[3][4];
    uint64_t nsplit[3];
} small_ds_t;

static int write_all(tg_dsw_t *w, tg_file_id_t id, const void *p, size_t len)
{
    tg_filew_t fw;
    int rc = tg_dsw_open_file_buf(w, id, &fw, 4096);
    if (rc) return rc;
    rc = tg_filew_write(&fw, p, len);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(w, id, &fw);
}

static int write_ids(tg_dsw_t *w, tg_file_id_t id, const uint64_t *v, size_t n, tg_index_dtype_t t)
{
    uint32_t narrow[16];
    if (t == TG_U64) return write_all(w, id, v, n * 8);
    for (size_t i = 0; i < n; i++)
        narrow[i] = (uint32_t)v[i];
    return write_all(w, id, narrow, n * 4);
}

/* Writes s as a dataset with the given dtypes. */
static int write_small(const char *out, const small_ds_t *s, tg_feat_dtype_t fd,
                       tg_index_dtype_t id, int multi)
{
    tg_dsw_t w;
    int rc = tg_dsw_begin(&w, out, 1);
    if (rc) return rc;
    tg_meta_t *m = &w.meta;
    m->num_nodes = s->N;
    m->num_edges = s->E;
    m->feat_dim = (uint32_t)s->D;
    m->feat_dtype = fd;
    m->index_dtype = id;
    m->num_classes = (uint32_t)s->C;
    m->multi_label = multi;
    m->num_train = s->nsplit[0];
    m->num_valid = s->nsplit[1];
    m->num_test = s->nsplit[2];
    snprintf(m->source, sizeof m->source, "test_format");
    uint16_t h[8 * 5];
    for (size_t i = 0; i < s->N * s->D; i++)
        h[i] = tg_f32_to_f16(s->feats[i]);
    if (!rc) rc = write_all(&w, TG_FILE_INDPTR, s->indptr, (s->N + 1) * 8);
    if (!rc) rc = write_ids(&w, TG_FILE_INDICES, s->indices, s->E, id);
    if (!rc)
        rc = fd == TG_F32 ? write_all(&w, TG_FILE_FEATURES, s->feats, s->N * s->D * 4)
                          : write_all(&w, TG_FILE_FEATURES, h, s->N * s->D * 2);
    if (!rc) rc = write_all(&w, TG_FILE_LABELS, s->labels, s->N * 4 * (multi ? s->C : 1));
    for (int k = 0; k < 3 && !rc; k++)
        rc = write_ids(&w, (tg_file_id_t)(TG_FILE_TRAIN + k), s->split[k], s->nsplit[k], id);
    if (rc) {
        tg_dsw_abort(&w);
        return rc;
    }
    rc = tg_dsw_commit(&w);
    tg_dsw_abort(&w);
    return rc;
}

static small_ds_t make_small(void)
{
    small_ds_t s = {.N = 5, .E = 7, .D = 3, .C = 3};
    uint64_t ip[] = {0, 2, 2, 5, 6, 7};
    uint64_t ix[] = {1, 3, 0, 1, 4, 2, 0};
    memcpy(s.indptr, ip, sizeof ip);
    memcpy(s.indices, ix, sizeof ix);
    /* f16-tricky values among ordinary ones */
    float f[] = {0.5f,  -1.25f,         3.0f,        65504.0f, -0.0f,
                 1e-7f, 1.00048828125f, 2.0f / 3.0f, 6e4f,     -6.1e-5f,
                 7.0f,  100.0f,         0.1f,        -0.2f,    0.3f};
    memcpy(s.feats, f, sizeof f);
    int32_t l[] = {0, 2, -1, 1, 2};
    memcpy(s.labels, l, sizeof l);
    s.split[0][0] = 0;
    s.split[0][1] = 3;
    s.split[1][0] = 4;
    s.split[2][0] = 1;
    s.nsplit[0] = 2;
    s.nsplit[1] = 1;
    s.nsplit[2] = 1;
    return s;
}

static void check_read_back(const char *dir, const small_ds_t *s, tg_feat_dtype_t fd,
                            tg_index_dtype_t id)
{
    tg_dataset_t *ds = NULL;
    TG_CHECK_OK(tg_dataset_open(&ds, dir, TG_OPEN_CHECK_SIZES | TG_OPEN_CHECK_CHECKSUMS));
    if (!ds) return;
    TG_CHECK_EQ_U64(ds->meta.num_nodes, s->N);
    TG_CHECK_EQ_U64(ds->meta.num_edges, s->E);
    TG_CHECK_EQ_U64(ds->meta.feat_dtype, fd);
    TG_CHECK_EQ_U64(ds->meta.index_dtype, id);
    TG_CHECK(!strcmp(ds->meta.source, "test_format"));
    uint64_t *ip = NULL, *ix = NULL, *sp = NULL, n = 0;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    for (uint64_t v = 0; ip && v <= s->N; v++)
        TG_CHECK_EQ_U64(ip[v], s->indptr[v]);
    for (uint64_t e = 0; ix && e < s->E; e++)
        TG_CHECK_EQ_U64(ix[e], s->indices[e]);
    for (int k = 0; k < 3; k++) {
        TG_CHECK_OK(tg_dataset_load_split(ds, (tg_file_id_t)(TG_FILE_TRAIN + k), &sp, &n));
        TG_CHECK_EQ_U64(n, s->nsplit[k]);
        for (uint64_t i = 0; sp && i < n; i++)
            TG_CHECK_EQ_U64(sp[i], s->split[k][i]);
        free(sp);
        sp = NULL;
    }
    int32_t *lab = NULL;
    TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
    for (uint64_t v = 0; lab && v < s->N; v++)
        TG_CHECK_EQ_U64((uint32_t)lab[v], (uint32_t)s->labels[v]);
    float got[8 * 5];
    TG_CHECK_OK(tg_dataset_read_features(ds, 1, 3, got));
    for (uint64_t i = 0; i < 3 * s->D; i++) {
        float want = s->feats[s->D + i];
        if (fd == TG_F16) want = tg_f16_to_f32(tg_f32_to_f16(want));
        if (memcmp(&got[i], &want, 4))
            TG_FAIL("feature %llu: %.9g != %.9g", (unsigned long long)i, got[i], want);
    }
    TG_CHECK_ERR(tg_dataset_read_features(ds, 4, 2, got), "out of range");
    free(ip);
    free(ix);
    free(lab);
    tg_dataset_close(ds);
}

TG_TEST(round_trip)
{
    const char *base = tg_test_tmpdir("format-rt");
    small_ds_t s = make_small();
    for (int fd = 0; fd < 2; fd++)
        for (int id = 0; id < 2; id++) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/ds-%d-%d", base, fd, id);
            TG_CHECK_OK(write_small(dir, &s, (tg_feat_dtype_t)fd, (tg_index_dtype_t)id, 0));
            check_read_back(dir, &s, (tg_feat_dtype_t)fd, (tg_index_dtype_t)id);
            TG_CHECK_OK(tg_dataset_verify(dir));
            /* the byte sizes follow the widths */
            struct stat st;
            snprintf(dir + strlen(dir), 64, "/indices.bin");
            TG_CHECK(stat(dir, &st) == 0 && (uint64_t)st.st_size == s.E * (id ? 8 : 4));
        }
    /* multi-label: an N x C matrix of 0/1 */
    small_ds_t mlab = s;
    for (size_t i = 0; i < mlab.N * mlab.C; i++)
        mlab.labels[i] = (int32_t)(i % 2);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/multi", base);
    TG_CHECK_OK(write_small(dir, &mlab, TG_F32, TG_U32, 1));
    tg_dataset_t *ds = NULL;
    TG_CHECK_OK(tg_dataset_open(&ds, dir, TG_OPEN_CHECK_CHECKSUMS));
    if (ds) {
        TG_CHECK(ds->meta.multi_label);
        int32_t *lab = NULL;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        for (size_t i = 0; lab && i < mlab.N * mlab.C; i++)
            TG_CHECK_EQ_U64(lab[i], i % 2);
        free(lab);
        tg_dataset_close(ds);
    }
    TG_CHECK_OK(tg_dataset_verify(dir));
    tg_rmtree(base);
}

TG_TEST(writer_guards)
{
    const char *base = tg_test_tmpdir("format-guards");
    small_ds_t s = make_small();
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/ds", base);
    TG_CHECK_OK(write_small(dir, &s, TG_F32, TG_U32, 0));
    /* an existing dataset needs overwrite */
    tg_dsw_t w;
    TG_CHECK_ERR(tg_dsw_begin(&w, dir, 0), "already exists");
    /* a file whose size does not match the counts fails the commit, and nothing is left */
    TG_CHECK_OK(tg_dsw_begin(&w, dir, 1));
    w.meta.num_nodes = 5;
    w.meta.feat_dim = 3;
    w.meta.num_classes = 3;
    for (int i = 0; i < TG_FILE_COUNT; i++)
        TG_CHECK_OK(write_all(&w, (tg_file_id_t)i, "abc", 3));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", w.tmp_dir);
    TG_CHECK_ERR(tg_dsw_commit(&w), "counts imply");
    tg_dsw_abort(&w);
    struct stat st;
    TG_CHECK(stat(tmp, &st) != 0);
    /* the old dataset is untouched */
    check_read_back(dir, &s, TG_F32, TG_U32);
    tg_rmtree(base);
}

/* ---------------------------------------------------------------- meta errors */

static const char *good_meta = "# comment\n"
                               "format_version = 1\n"
                               "num_nodes = 5\n"
                               "num_edges = 7\n"
                               "feat_dim = 3\n"
                               "feat_dtype = f32\n"
                               "index_dtype = u32\n"
                               "num_classes = 3\n"
                               "multi_label = 0\n"
                               "num_train = 2\n"
                               "num_valid = 1\n"
                               "num_test = 1\n"
                               "source = hand written\n"
                               "file = indptr.bin 48 00000000\n"
                               "file = indices.bin 28 00000000\n"
                               "file = features.bin 60 00000000\n"
                               "file = labels.bin 20 00000000\n"
                               "file = train_idx.bin 8 00000000\n"
                               "file = valid_idx.bin 4 00000000\n"
                               "file = test_idx.bin 4 00000000\n";

/* good_meta with the line starting with `key` replaced by `repl` (NULL: removed). */
static char *edit_meta(const char *key, const char *repl)
{
    char *out = malloc(strlen(good_meta) + 256);
    out[0] = 0;
    const char *p = good_meta;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = (size_t)(nl - p) + 1;
        if (!strncmp(p, key, strlen(key))) {
            if (repl) strcat(strcat(out, repl), "\n");
        } else {
            strncat(out, p, n);
        }
        p += n;
    }
    return out;
}

TG_TEST(meta_errors)
{
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_parse(&m, good_meta, "d/meta.txt"));
    TG_CHECK(!strcmp(m.source, "hand written"));
    struct {
        const char *key, *repl, *needle;
    } cases[] = {
        {"num_nodes", NULL, "d/meta.txt: missing key 'num_nodes'"},
        {"format_version", NULL, "d/meta.txt: missing key 'format_version'"},
        {"file = labels.bin", NULL, "d/meta.txt: missing 'file = labels.bin"},
        {"num_edges", "num_edges = 7x", "d/meta.txt: line 4: num_edges: expected a non-negative"},
        {"num_edges", "num_edges = -7", "d/meta.txt: line 4: num_edges: expected a non-negative"},
        {"feat_dim", "feat_dim = 0", "d/meta.txt: line 5: feat_dim 0 out of range"},
        {"feat_dtype", "feat_dtype = bf16", "d/meta.txt: line 6: feat_dtype must be f32 or f16"},
        {"index_dtype", "index_dtype = i32", "d/meta.txt: line 7: index_dtype must be u32 or u64"},
        {"format_version", "format_version = 2", "d/meta.txt: line 2: format_version 2 is not"},
        {"num_classes", "num_classes 3", "d/meta.txt: line 8: expected 'key = value'"},
        {"file = features.bin", "file = features.bin 61 00000000",
         "d/meta.txt: line 16: features.bin is recorded as 61 bytes but the counts imply 60"},
        {"file = indices.bin", "file = indices.bin 28",
         "d/meta.txt: line 15: expected 'file = NAME"},
        {"file = indices.bin", "file = other.bin 28 0", "d/meta.txt: line 15: unknown file"},
        {"num_train", "num_train = 6", "a split is larger than num_nodes"},
        {"num_nodes", "num_nodes = 99999999999999999999", "line 3: num_nodes: expected"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = edit_meta(cases[i].key, cases[i].repl);
        TG_CHECK_ERR(tg_meta_parse(&m, t, "d/meta.txt"), cases[i].needle);
        free(t);
    }
    /* format -> parse round trip */
    TG_CHECK_OK(tg_meta_parse(&m, good_meta, "x"));
    m.files[TG_FILE_FEATURES].crc32 = 0xdeadbeef;
    char *text = NULL;
    TG_CHECK_OK(tg_meta_format(&m, &text));
    tg_meta_t m2;
    TG_CHECK_OK(tg_meta_parse(&m2, text, "x"));
    TG_CHECK_EQ_U64(m2.files[TG_FILE_FEATURES].crc32, 0xdeadbeef);
    TG_CHECK_EQ_U64(m2.num_test, 1);
    free(text);
    /* tg_meta_read names the file when it is missing */
    const char *dir = tg_test_tmpdir("format-meta");
    TG_CHECK_ERR(tg_meta_read(&m, dir), "meta.txt: cannot open");
    tg_rmtree(dir);
}

int main(void)
{
    TG_RUN(f16_conversion);
    TG_RUN(crc32_matches_zlib);
    TG_RUN(filew_paths);
    TG_RUN(round_trip);
    TG_RUN(writer_guards);
    TG_RUN(meta_errors);
    return tg_test_done();
}
