/* The .npy reader: v1/v2/v3 headers, every dtype, conversions, and each error naming the file
 * (and the offset where there is one). Files are written by hand, byte by byte, as numpy does. */
#include <unistd.h>

#include "data/import-impl.h"
#include "tg_test.h"

static char dir[4096];

/* Builds a .npy image: preamble, dict header padded with spaces + '\n' to a multiple of 64. */
static uint8_t *npy_build(size_t *len, int version, const char *descr, const char *fortran,
                          const char *shape, const void *data, size_t bytes)
{
    char dict[512];
    int dn = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                      descr, fortran, shape);
    size_t pre = version == 1 ? 10 : 12, hlen = (size_t)dn + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    uint8_t *b = malloc(pre + hlen + bytes + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)version;
    b[7] = 0;
    if (version == 1) {
        b[8] = (uint8_t)hlen;
        b[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++)
            b[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, (size_t)dn);
    b[pre + hlen - 1] = '\n';
    if (bytes) memcpy(b + pre + hlen, data, bytes);
    *len = pre + hlen + bytes;
    return b;
}

static const char *write_npy(const char *name, uint8_t *img, size_t len)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (tg_write_file_atomic(path, img, len)) TG_FAIL("write %s: %s", path, tg_errmsg());
    free(img);
    return path;
}

/* Values 0, 1, 0, 3, 4, ... (i % 2 for bool) encoded in each dtype. */
static size_t encode(tg_npy_dtype_t t, int i, uint8_t *out)
{
    switch (t) {
    case TG_NPY_B1:
        out[0] = (uint8_t)(i % 2);
        return 1;
    case TG_NPY_U1:
    case TG_NPY_I1:
        out[0] = (uint8_t)i;
        return 1;
    case TG_NPY_U2:
    case TG_NPY_I2: {
        uint16_t v = (uint16_t)i;
        memcpy(out, &v, 2);
        return 2;
    }
    case TG_NPY_U4:
    case TG_NPY_I4: {
        uint32_t v = (uint32_t)i;
        memcpy(out, &v, 4);
        return 4;
    }
    case TG_NPY_U8:
    case TG_NPY_I8: {
        uint64_t v = (uint64_t)i;
        memcpy(out, &v, 8);
        return 8;
    }
    case TG_NPY_F2: {
        uint16_t v = tg_f32_to_f16((float)i);
        memcpy(out, &v, 2);
        return 2;
    }
    case TG_NPY_F4: {
        float v = (float)i;
        memcpy(out, &v, 4);
        return 4;
    }
    default: {
        double v = i;
        memcpy(out, &v, 8);
        return 8;
    }
    }
}

TG_TEST(every_dtype)
{
    enum { R = 300, C = 7 }; /* 2100 elements: several bounce-buffer refills for none, but odd */
    for (int t = 0; t < TG_NPY_DTYPE_COUNT; t++) {
        for (int version = 1; version <= 3; version++) {
            uint8_t data[R * C * 8];
            size_t bytes = 0;
            for (int i = 0; i < R * C; i++)
                bytes += encode((tg_npy_dtype_t)t, i % 100, data + bytes);
            size_t len;
            uint8_t *img = npy_build(&len, version, tg_npy_dtype_name((tg_npy_dtype_t)t), "False",
                                     "(300, 7)", data, bytes);
            const char *path = write_npy("all.npy", img, len);
            tg_npy_t f;
            TG_CHECK_OK(tg_npy_open(&f, path));
            TG_CHECK(f.version == version);
            TG_CHECK(f.dtype == (tg_npy_dtype_t)t);
            TG_CHECK(f.ndim == 2 && f.shape[0] == R && f.shape[1] == C && f.count == R * C);
            TG_CHECK(f.data_off % 64 == 0);
            static int64_t iv[R * C];
            static float fv[R * C];
            static double dv[R * C];
            TG_CHECK_OK(tg_npy_read_i64(&f, 0, R * C, iv));
            TG_CHECK_OK(tg_npy_read_f32(&f, 0, R * C, fv));
            TG_CHECK_OK(tg_npy_read_f64(&f, 5, R * C - 5, dv));
            for (int i = 0; i < R * C; i++) {
                double want = t == TG_NPY_B1 ? (i % 100) % 2 : i % 100;
                if (iv[i] != (int64_t)want || fv[i] != (float)want ||
                    (i >= 5 && dv[i - 5] != want)) {
                    TG_FAIL("%s v%d element %d: %lld %g %g, want %g",
                            tg_npy_dtype_name((tg_npy_dtype_t)t), version, i, (long long)iv[i],
                            fv[i], i >= 5 ? dv[i - 5] : want, want);
                    break;
                }
            }
            tg_npy_close(&f);
        }
    }
}

TG_TEST(large_array_streams)
{
    /* 3 M float64: bigger than the 1 MiB bounce buffer, read in pieces at odd offsets. */
    size_t n = 3u << 20;
    double *d = malloc(n * 8);
    for (size_t i = 0; i < n; i++)
        d[i] = (double)i * 0.5;
    size_t len;
    uint8_t *img = npy_build(&len, 1, "<f8", "False", "(3145728,)", d, n * 8);
    free(d);
    const char *path = write_npy("big.npy", img, len);
    tg_npy_t f;
    TG_CHECK_OK(tg_npy_open(&f, path));
    float *out = malloc(1000003 * sizeof *out);
    TG_CHECK_OK(tg_npy_read_f32(&f, 2000001, 1000003, out));
    TG_CHECK(out[0] == 1000000.5f && out[1000002] == (float)(3000003 * 0.5));
    TG_CHECK_ERR(tg_npy_read_f32(&f, n - 1, 2, out), "beyond the 3145728 elements");
    free(out);
    tg_npy_close(&f);
}

TG_TEST(scalar_and_fortran_1d)
{
    uint8_t data[8] = {1, 0, 0, 0, 2, 0, 0, 0};
    size_t len;
    tg_npy_t f;
    uint8_t *img = npy_build(&len, 1, "<i4", "True", "(2,)", data, 8);
    /* a 1-D array has one layout, so fortran_order True is harmless */
    TG_CHECK_OK(tg_npy_open_mem(&f, img, len, "v.npy"));
    int64_t v[2];
    TG_CHECK_OK(tg_npy_read_i64(&f, 0, 2, v));
    TG_CHECK(v[0] == 1 && v[1] == 2);
    tg_npy_close(&f);
    free(img);
    img = npy_build(&len, 1, "<i4", "False", "()", data, 4);
    TG_CHECK_OK(tg_npy_open_mem(&f, img, len, "s.npy"));
    TG_CHECK(f.ndim == 0 && f.count == 1);
    tg_npy_close(&f);
    free(img);
}

static void expect_open_error(uint8_t *img, size_t len, const char *needle)
{
    const char *path = write_npy("bad.npy", img, len);
    tg_npy_t f;
    TG_CHECK_ERR(tg_npy_open(&f, path), needle);
    if (!strstr(tg_errmsg(), path)) TG_FAIL("message '%s' does not name %s", tg_errmsg(), path);
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
}

TG_TEST(errors)
{
    float data[6] = {1, 2, 3, 4, 5, 6};
    size_t len;
    uint8_t *img;

    img = npy_build(&len, 1, "<f4", "True", "(2, 3)", data, 24);
    expect_open_error(img, len, "Fortran order");
    img = npy_build(&len, 1, ">f4", "False", "(2, 3)", data, 24);
    expect_open_error(img, len, "big-endian");
    img = npy_build(&len, 1, "<c8", "False", "(2, 3)", data, 24);
    expect_open_error(img, len, "unsupported dtype '<c8'");
    img = npy_build(&len, 1, "|f4", "False", "(2, 3)", data, 24);
    expect_open_error(img, len, "unsupported dtype '|f4'");
    img = npy_build(&len, 1, "<f4", "False", "(2, 3)", data, 24);
    expect_open_error(img, len - 5,
                      "truncated: shape and dtype <f4 need 24 data bytes from offset 128, "
                      "but the file ends at offset 147");
    img = npy_build(&len, 1, "<f4", "False", "(2, 3)", data, 24);
    expect_open_error(img, 40, "truncated: the header needs 128 bytes");
    img = npy_build(&len, 1, "<f4", "False", "(2, 2)", data, 24);
    expect_open_error(img, len, "8 bytes after the data end at offset 144");
    img = npy_build(&len, 1, "<f4", "False", "(2, 3)", data, 24);
    img[1] = 'X';
    expect_open_error(img, len, "not a .npy file");
    img = npy_build(&len, 1, "<f4", "False", "(2, 3)", data, 24);
    img[6] = 9;
    expect_open_error(img, len, "version 9.0 is not supported");
    img = npy_build(&len, 1, "<f4", "False", "(2, x)", data, 24);
    expect_open_error(img, len, "malformed .npy header");
    img = npy_build(&len, 1, "<f4", "Maybe", "(2, 3)", data, 24);
    expect_open_error(img, len, "fortran_order must be True or False");
    img = npy_build(&len, 1, "<f4', 'extra': 'x", "False", "(2, 3)", data, 24);
    expect_open_error(img, len, "unexpected key 'extra'");
    expect_open_error((uint8_t *)strdup("\x93NUM"), 4, "shorter than the preamble");
    /* found by fuzz_npy: control bytes in a key must not break the one-line message */
    img = npy_build(&len, 1, "<f4', 'a\nb\x01': 'x", "False", "(2, 3)", data, 24);
    expect_open_error(img, len, "unexpected key 'a?b?'");

    /* dtype checks name what was expected */
    img = npy_build(&len, 1, "<i8", "False", "(3,)", data, 24);
    const char *path = write_npy("ints.npy", img, len);
    tg_npy_t f;
    TG_CHECK_OK(tg_npy_open(&f, path));
    TG_CHECK_ERR(tg_npy_expect_dtype(&f, TG_NPY_KIND_FLOAT, "features"),
                 "dtype '<i8' cannot hold features (expected one of: <f2 <f4 <f8)");
    TG_CHECK_OK(tg_npy_expect_dtype(&f, TG_NPY_KIND_INT, "ids"));
    tg_npy_close(&f);

    /* integers from floats must be integral; u64 must fit in int64 */
    double fl[2] = {3.0, 1.5};
    img = npy_build(&len, 1, "<f8", "False", "(2,)", fl, 16);
    path = write_npy("fl.npy", img, len);
    TG_CHECK_OK(tg_npy_open(&f, path));
    int64_t iv[2];
    TG_CHECK_ERR(tg_npy_read_i64(&f, 0, 2, iv), "fl.npy: offset 136: value 1.5 is not an integer");
    tg_npy_close(&f);
    uint64_t big[1] = {1ull << 63};
    img = npy_build(&len, 1, "<u8", "False", "(1,)", big, 8);
    path = write_npy("u8.npy", img, len);
    TG_CHECK_OK(tg_npy_open(&f, path));
    TG_CHECK_ERR(tg_npy_read_i64(&f, 0, 1, iv), "does not fit in int64");
    tg_npy_close(&f);

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/none.npy", dir);
    TG_CHECK_ERR(tg_npy_open(&f, missing), "none.npy: cannot open");
}

/* The header writer: what the reader (and NumPy, when /usr/bin/python3 has it) reads back. */
TG_TEST(header_writer)
{
    char h[256];
    uint64_t shape[2] = {3, 2};
    size_t hl = tg_npy_header(h, sizeof h, "<i4", 2, shape);
    TG_CHECK(hl > 0 && hl % 64 == 0);
    uint8_t img[256 + 24];
    memcpy(img, h, hl);
    int32_t v[6] = {1, -2, 3, -4, 5, -6};
    memcpy(img + hl, v, sizeof v);
    tg_npy_t f;
    TG_CHECK_OK(tg_npy_open_mem(&f, img, hl + sizeof v, "w.npy"));
    TG_CHECK(f.ndim == 2 && f.shape[0] == 3 && f.shape[1] == 2 && f.dtype == TG_NPY_I4);
    int64_t got[6];
    TG_CHECK_OK(tg_npy_read_i64(&f, 0, 6, got));
    TG_CHECK(got[0] == 1 && got[5] == -6);
    tg_npy_close(&f);
    TG_CHECK(tg_npy_header(h, 40, "<i4", 2, shape) == 0); /* too small a buffer */
}

/* Whether Debian's python3 has NumPy (for the checks that np.load reads our files). */
static int have_numpy(void)
{
    return system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

/* infer --format npy: FILE.npy and FILE.emb.npy beside the raw files, with the shapes of the
 * dataset and the model, holding the raw files' bytes; np.load reads them. */
TG_TEST(infer_format_npy)
{
    char ds[4200], run[4200], pred[4300], p[4400], *out = NULL;
    snprintf(ds, sizeof ds, "%s/ds", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(pred, sizeof pred, "%s/pred.i32", run);
    int rc =
        tg_test_cli(&out, "generate %s --nodes 300 --avg-degree 6 --feat-dim 8 --classes 3", ds);
    TG_CHECK(rc == 0);
    free(out);
    rc = tg_test_cli(&out,
                     "train %s --out %s --model sage --layers 2 --hidden 16 --fanouts 5,5 "
                     "--batch-size 64 --epochs 1",
                     ds, run);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    if (rc) return;
    rc = tg_test_cli(&out, "infer %s --checkpoint %s --out %s --embeddings --format npy", ds, run,
                     pred);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    struct {
        const char *suffix;
        tg_npy_dtype_t dtype;
        int ndim;
        uint64_t d1;
    } want[2] = {{".npy", TG_NPY_I4, 1, 0}, {".emb.npy", TG_NPY_F4, 2, 16}};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s%s", pred, want[k].suffix);
        tg_npy_t f;
        TG_CHECK_OK(tg_npy_open(&f, p));
        if (!f.path) continue;
        TG_CHECK(f.dtype == want[k].dtype && f.ndim == want[k].ndim && f.shape[0] == 300);
        if (want[k].ndim == 2) TG_CHECK_EQ_U64(f.shape[1], want[k].d1);
        /* the data are the raw file's bytes */
        char raw[4400];
        snprintf(raw, sizeof raw, "%s%s", pred, k ? ".emb" : "");
        size_t rl = 0, nl = 0;
        char *a = tg_test_read_all(raw, &rl), *b = tg_test_read_all(p, &nl);
        TG_CHECK(a && b && nl == f.data_off + rl && !memcmp(b + f.data_off, a, rl));
        free(a);
        free(b);
        tg_npy_close(&f);
    }
    /* a bad --format is refused before inference */
    rc = tg_test_cli(&out, "infer %s --checkpoint %s --out %s --format csv", ds, run, pred);
    TG_CHECK(rc != 0);
    if (out && !strstr(out, "--format must be raw or npy")) TG_FAIL("output: %s", out);
    free(out);
    if (!have_numpy()) {
        fprintf(stderr, "SKIP np.load check: /usr/bin/python3 has no numpy\n");
        return;
    }
    char cmd[16000];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as np, sys; p = np.load(sys.argv[1]); "
             "e = np.load(sys.argv[2]); r = np.fromfile(sys.argv[3], dtype='<i4'); "
             "assert p.shape == (300,) and p.dtype == np.int32, p.shape; "
             "assert e.shape == (300, 16) and e.dtype == np.float32, e.shape; "
             "assert (p == r).all() and p.min() >= 0 and p.max() < 3\" %s.npy %s.emb.npy %s",
             pred, pred, pred);
    TG_CHECK(system(cmd) == 0);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", tg_test_tmpdir("npy"));
    /* the .npy reader and writer alone: no GEMM for the OpenBLAS variants */
    TG_RUN_PLAIN(every_dtype);
    TG_RUN_PLAIN(large_array_streams);
    TG_RUN_PLAIN(scalar_and_fortran_1d);
    TG_RUN_PLAIN(errors);
    TG_RUN_PLAIN(header_writer);
    TG_RUN(infer_format_npy);
    if (!tg_test_failures) tg_rmtree(dir);
    return tg_test_done();
}
