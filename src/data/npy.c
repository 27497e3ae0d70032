/* NumPy .npy reader: format versions 1.0, 2.0 and 3.0, C order, little-endian.
 *
 * The header is a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2708, 1433), }; it is parsed by a small tokenizer rather than trusted. Data are read
 * with pread through a fixed bounce buffer and converted on the way, so a 100 GB array is read in
 * bounded memory and any range of it can be read (edge_index row 0 and row 1 in lockstep).
 */
#include "import-impl.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_BOUNCE (1u << 20)
#define NPY_MAX_HEADER (1u << 20) /* numpy itself writes a few hundred bytes */

static const struct {
    const char *name; /* canonical little-endian spelling */
    char type;
    size_t size;
    int kind;
} dtypes[TG_NPY_DTYPE_COUNT] = {
    [TG_NPY_B1] = {"|b1", 'b', 1, TG_NPY_KIND_BOOL},
    [TG_NPY_U1] = {"|u1", 'u', 1, TG_NPY_KIND_INT},
    [TG_NPY_I1] = {"|i1", 'i', 1, TG_NPY_KIND_INT},
    [TG_NPY_U2] = {"<u2", 'u', 2, TG_NPY_KIND_INT},
    [TG_NPY_I2] = {"<i2", 'i', 2, TG_NPY_KIND_INT},
    [TG_NPY_U4] = {"<u4", 'u', 4, TG_NPY_KIND_INT},
    [TG_NPY_I4] = {"<i4", 'i', 4, TG_NPY_KIND_INT},
    [TG_NPY_U8] = {"<u8", 'u', 8, TG_NPY_KIND_INT},
    [TG_NPY_I8] = {"<i8", 'i', 8, TG_NPY_KIND_INT},
    [TG_NPY_F2] = {"<f2", 'f', 2, TG_NPY_KIND_FLOAT},
    [TG_NPY_F4] = {"<f4", 'f', 4, TG_NPY_KIND_FLOAT},
    [TG_NPY_F8] = {"<f8", 'f', 8, TG_NPY_KIND_FLOAT},
};

const char *tg_npy_dtype_name(tg_npy_dtype_t t)
{
    return (unsigned)t < TG_NPY_DTYPE_COUNT ? dtypes[t].name : "?";
}

int tg_npy_dtype_kind(tg_npy_dtype_t t)
{
    return (unsigned)t < TG_NPY_DTYPE_COUNT ? dtypes[t].kind : 0;
}

/* Bytes [off, off + n) of the source: memory, a callback (an .npz member) or the file. */
static int src_read(tg_npy_t *f, void *buf, size_t n, uint64_t off)
{
    if (f->mem) {
        memcpy(buf, f->mem + off, n);
        return 0;
    }
    if (f->read_at) return f->read_at(f->ctx, off, buf, n);
    return tg_pread_full(f->fd, buf, n, off, f->path);
}

void tg_npy_close(tg_npy_t *f)
{
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f->bounce);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* ---------------------------------------------------------------- header parsing */

typedef struct {
    const char *p, *end;
} lex_t;

static void skip_ws(lex_t *x)
{
    while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' || *x->p == '\n' || *x->p == '\r'))
        x->p++;
}

static int accept(lex_t *x, char ch)
{
    skip_ws(x);
    if (x->p < x->end && *x->p == ch) {
        x->p++;
        return 1;
    }
    return 0;
}

/* A Python string literal in '...' or "..." (no escapes: numpy never writes any here). */
static int lex_string(lex_t *x, const char **s, size_t *n)
{
    skip_ws(x);
    if (x->p >= x->end || (*x->p != '\'' && *x->p != '"')) return -1;
    char q = *x->p++;
    const char *b = x->p;
    while (x->p < x->end && *x->p != q)
        x->p++;
    if (x->p >= x->end) return -1;
    *s = b;
    *n = (size_t)(x->p - b);
    x->p++;
    return 0;
}

static int lex_word(lex_t *x, const char *w)
{
    skip_ws(x);
    size_t n = strlen(w);
    if ((size_t)(x->end - x->p) >= n && !memcmp(x->p, w, n)) {
        x->p += n;
        return 1;
    }
    return 0;
}

/* Header text for a message: at most len-1 bytes, control bytes as '?', so that a corrupt
 * header still gives a one-line error. */
static const char *printable(const char *s, size_t n, char *buf, size_t len)
{
    size_t k = 0;
    for (; k < n && k + 1 < len; k++)
        buf[k] = (s[k] >= 32 && s[k] < 127) ? s[k] : '?';
    buf[k] = 0;
    return buf;
}

static int header_err(const tg_npy_t *f, const char *what)
{
    return tg_err(-EINVAL, "%s: malformed .npy header: %s", f->path, what);
}

static int parse_descr(tg_npy_t *f, const char *s, size_t n)
{
    printable(s, n, f->descr, sizeof f->descr);
    if (n < 3)
        return tg_err(-EINVAL, "%s: unsupported dtype '%s' (expected e.g. <f4, <i8, |b1)", f->path,
                      f->descr);
    char order = s[0], type = s[1];
    if (order == '>')
        return tg_err(-EINVAL,
                      "%s: dtype '%s' is big-endian; only little-endian is supported (convert "
                      "with a.astype(a.dtype.newbyteorder('<')))",
                      f->path, f->descr);
    if (order != '<' && order != '|' && order != '=')
        return tg_err(-EINVAL, "%s: unsupported dtype '%s' (expected e.g. <f4, <i8, |b1)", f->path,
                      f->descr);
    size_t size = 0;
    for (size_t i = 2; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || size > 1000) {
            size = 0;
            break;
        }
        size = size * 10 + (size_t)(s[i] - '0');
    }
    for (int t = 0; t < TG_NPY_DTYPE_COUNT; t++)
        if (dtypes[t].type == type && dtypes[t].size == size) {
            /* '|' (no byte order) only makes sense for 1-byte types; '=' is native = little. */
            if (order == '|' && size != 1) break;
            f->dtype = (tg_npy_dtype_t)t;
            f->itemsize = size;
            return 0;
        }
    return tg_err(-EINVAL,
                  "%s: unsupported dtype '%s' (supported: |b1 |u1 |i1 <u2 <i2 <u4 <i4 <u8 <i8 <f2 "
                  "<f4 <f8)",
                  f->path, f->descr);
}

static int parse_header(tg_npy_t *f, const char *h, size_t n)
{
    lex_t x = {h, h + n};
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0, rc;
    if (!accept(&x, '{')) return header_err(f, "expected '{'");
    for (;;) {
        if (accept(&x, '}')) break;
        const char *k;
        size_t kn;
        if (lex_string(&x, &k, &kn)) return header_err(f, "expected a quoted key");
        if (!accept(&x, ':')) return header_err(f, "expected ':' after a key");
        if (kn == 5 && !memcmp(k, "descr", 5)) {
            const char *v;
            size_t vn;
            if (skip_ws(&x), x.p < x.end && *x.p == '[')
                return tg_err(-EINVAL, "%s: structured dtypes are not supported", f->path);
            if (lex_string(&x, &v, &vn)) return header_err(f, "descr must be a string");
            if ((rc = parse_descr(f, v, vn))) return rc;
            have_descr++;
        } else if (kn == 13 && !memcmp(k, "fortran_order", 13)) {
            if (lex_word(&x, "True"))
                fortran = 1;
            else if (lex_word(&x, "False"))
                fortran = 0;
            else
                return header_err(f, "fortran_order must be True or False");
            have_fortran++;
        } else if (kn == 5 && !memcmp(k, "shape", 5)) {
            if (!accept(&x, '(')) return header_err(f, "shape must be a tuple");
            f->ndim = 0;
            while (!accept(&x, ')')) {
                skip_ws(&x);
                uint64_t v = 0;
                int digits = 0;
                while (x.p < x.end && *x.p >= '0' && *x.p <= '9') {
                    if (v > (UINT64_MAX - 9) / 10) return header_err(f, "shape value too large");
                    v = v * 10 + (uint64_t)(*x.p++ - '0');
                    digits++;
                }
                if (!digits) return header_err(f, "shape must hold non-negative integers");
                if (x.p < x.end && *x.p == 'L') x.p++; /* Python 2 long literal */
                if (f->ndim == TG_NPY_MAX_DIM)
                    return tg_err(-EINVAL, "%s: more than %d dimensions", f->path, TG_NPY_MAX_DIM);
                f->shape[f->ndim++] = v;
                if (!accept(&x, ',')) {
                    if (!accept(&x, ')')) return header_err(f, "expected ',' or ')' in shape");
                    break;
                }
            }
            have_shape++;
        } else {
            char kb[33];
            return tg_err(-EINVAL, "%s: malformed .npy header: unexpected key '%s'", f->path,
                          printable(k, kn, kb, sizeof kb));
        }
        if (!accept(&x, ',')) {
            if (!accept(&x, '}')) return header_err(f, "expected ',' or '}'");
            break;
        }
    }
    if (have_descr != 1 || have_fortran != 1 || have_shape != 1)
        return header_err(f, "needs each of 'descr', 'fortran_order' and 'shape' once");
    /* A 0- or 1-dimensional array has one layout; only real Fortran order is rejected. */
    int multi = 0;
    for (int i = 0; i < f->ndim; i++)
        multi += f->shape[i] > 1;
    if (fortran && multi > 1)
        return tg_err(-EINVAL,
                      "%s: array is in Fortran order; save it in C order "
                      "(np.save(path, np.ascontiguousarray(a)))",
                      f->path);
    f->count = 1;
    for (int i = 0; i < f->ndim; i++) {
        if (f->shape[i] && f->count > UINT64_MAX / f->shape[i])
            return header_err(f, "shape overflows 64 bits");
        f->count *= f->shape[i];
    }
    if (f->count > (UINT64_MAX >> 4)) return header_err(f, "shape too large");
    return 0;
}

/* Parses the preamble + header from the first bytes of the file; checks the size. */
static int npy_setup(tg_npy_t *f, uint64_t file_size)
{
    uint8_t pre[12];
    if (file_size < 10)
        return tg_err(-EINVAL, "%s: not a .npy file (%llu bytes, shorter than the preamble)",
                      f->path, (unsigned long long)file_size);
    size_t pn = (size_t)TG_MIN(file_size, (uint64_t)sizeof pre);
    int rc;
    if ((rc = src_read(f, pre, pn, 0))) return rc;
    if (memcmp(pre, "\x93NUMPY", 6))
        return tg_err(-EINVAL, "%s: not a .npy file (missing the \\x93NUMPY magic)", f->path);
    f->version = pre[6];
    uint64_t hlen, hoff;
    if (f->version == 1) {
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
        hoff = 10;
    } else if (f->version == 2 || f->version == 3) {
        if (pn < 12) return tg_err(-EINVAL, "%s: truncated .npy preamble", f->path);
        hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
               (uint64_t)pre[11] << 24;
        hoff = 12;
    } else {
        return tg_err(-EINVAL, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0)",
                      f->path, pre[6], pre[7]);
    }
    if (hlen > NPY_MAX_HEADER)
        return tg_err(-EINVAL, "%s: .npy header length %llu is implausible", f->path,
                      (unsigned long long)hlen);
    if (hoff + hlen > file_size)
        return tg_err(-EINVAL,
                      "%s: truncated: the header needs %llu bytes but the file ends at offset "
                      "%llu",
                      f->path, (unsigned long long)(hoff + hlen), (unsigned long long)file_size);
    char *h = malloc(hlen + 1);
    if (!h) return tg_err(-ENOMEM, "%s: out of memory for the header", f->path);
    if ((rc = src_read(f, h, hlen, hoff))) {
        free(h);
        return rc;
    }
    h[hlen] = 0;
    rc = parse_header(f, h, hlen);
    free(h);
    if (rc) return rc;
    f->data_off = hoff + hlen;
    uint64_t need = f->count * f->itemsize;
    if (file_size - f->data_off < need)
        return tg_err(-EINVAL,
                      "%s: truncated: shape and dtype %s need %llu data bytes from offset %llu, "
                      "but the file ends at offset %llu",
                      f->path, f->descr, (unsigned long long)need, (unsigned long long)f->data_off,
                      (unsigned long long)file_size);
    if (file_size - f->data_off > need)
        return tg_err(-EINVAL,
                      "%s: %llu bytes after the data end at offset %llu (header shape or dtype "
                      "wrong?)",
                      f->path, (unsigned long long)(file_size - f->data_off - need),
                      (unsigned long long)(f->data_off + need));
    f->bounce = malloc(NPY_BOUNCE);
    if (!f->bounce) return tg_err(-ENOMEM, "%s: out of memory", f->path);
    return 0;
}

int tg_npy_open(tg_npy_t *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->path = strdup(path))) return tg_err(-ENOMEM, "out of memory");
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc;
    if (f->fd < 0 || fstat(f->fd, &st)) {
        int e = errno;
        rc = tg_err(-e, "%s: cannot open: %s", path, strerror(e));
        tg_npy_close(f);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = tg_err(-EINVAL, "%s: not a regular file", path);
        tg_npy_close(f);
        return rc;
    }
    posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if ((rc = npy_setup(f, (uint64_t)st.st_size))) tg_npy_close(f);
    return rc;
}

int tg_npy_open_mem(tg_npy_t *f, const void *data, size_t len, const char *name)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->mem = data;
    f->mem_len = len;
    if (!(f->path = strdup(name))) return tg_err(-ENOMEM, "out of memory");
    int rc = npy_setup(f, len);
    if (rc) tg_npy_close(f);
    return rc;
}

int tg_npy_open_cb(tg_npy_t *f, const char *name, uint64_t size,
                   int (*read_at)(void *ctx, uint64_t off, void *buf, size_t n), void *ctx)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->read_at = read_at;
    f->ctx = ctx;
    if (!(f->path = strdup(name))) return tg_err(-ENOMEM, "out of memory");
    int rc = npy_setup(f, size);
    if (rc) tg_npy_close(f);
    return rc;
}

int tg_npy_expect_dtype(const tg_npy_t *f, int kinds, const char *what)
{
    if (dtypes[f->dtype].kind & kinds) return 0;
    char list[160] = "";
    size_t k = 0;
    for (int t = 0; t < TG_NPY_DTYPE_COUNT; t++)
        if (dtypes[t].kind & kinds)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? " " : "", dtypes[t].name);
    return tg_err(-EINVAL, "%s: dtype '%s' cannot hold %s (expected one of: %s)", f->path, f->descr,
                  what, list);
}

/* ---------------------------------------------------------------- data */

/* Reads the raw bytes of elements [first, first + n) (n * itemsize <= NPY_BOUNCE). */
static int read_raw(tg_npy_t *f, uint64_t first, size_t n)
{
    if (first > f->count || n > f->count - first)
        return tg_err(-EINVAL, "%s: read of elements [%llu, %llu) beyond the %llu elements",
                      f->path, (unsigned long long)first, (unsigned long long)(first + n),
                      (unsigned long long)f->count);
    uint64_t off = f->data_off + first * f->itemsize;
    size_t bytes = n * f->itemsize;
    /* The size was checked at open; a short read now means the file shrank under us. */
    return src_read(f, f->bounce, bytes, off);
}

/* Element i of the bounce buffer as double / int64 (memcpy: the buffer is byte-aligned data). */
static double elem_f64(const tg_npy_t *f, size_t i)
{
    const uint8_t *p = f->bounce + i * f->itemsize;
    switch (f->dtype) {
    case TG_NPY_B1:
        return p[0] != 0;
    case TG_NPY_U1:
        return p[0];
    case TG_NPY_I1:
        return (int8_t)p[0];
    case TG_NPY_U2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case TG_NPY_I2: {
        int16_t v;
        memcpy(&v, p, 2);
        return v;
    }
    case TG_NPY_U4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case TG_NPY_I4: {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    case TG_NPY_U8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    case TG_NPY_I8: {
        int64_t v;
        memcpy(&v, p, 8);
        return (double)v;
    }
    case TG_NPY_F2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return tg_f16_to_f32(v);
    }
    case TG_NPY_F4: {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    case TG_NPY_F8: {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    default:
        return NAN;
    }
}

int tg_npy_read_f64(tg_npy_t *f, uint64_t first, size_t n, double *out)
{
    size_t per = NPY_BOUNCE / f->itemsize;
    while (n > 0) {
        size_t k = TG_MIN(n, per);
        int rc = read_raw(f, first, k);
        if (rc) return rc;
        for (size_t i = 0; i < k; i++)
            out[i] = elem_f64(f, i);
        out += k;
        first += k;
        n -= k;
    }
    return 0;
}

int tg_npy_read_f32(tg_npy_t *f, uint64_t first, size_t n, float *out)
{
    size_t per = NPY_BOUNCE / f->itemsize;
    while (n > 0) {
        size_t k = TG_MIN(n, per);
        int rc = read_raw(f, first, k);
        if (rc) return rc;
        if (f->dtype == TG_NPY_F4) {
            memcpy(out, f->bounce, k * 4); /* the common case: no conversion */
        } else if (f->dtype == TG_NPY_F2) {
            for (size_t i = 0; i < k; i++) {
                uint16_t v;
                memcpy(&v, f->bounce + 2 * i, 2);
                out[i] = tg_f16_to_f32(v);
            }
        } else {
            for (size_t i = 0; i < k; i++)
                out[i] = (float)elem_f64(f, i);
        }
        out += k;
        first += k;
        n -= k;
    }
    return 0;
}

int tg_npy_read_i64(tg_npy_t *f, uint64_t first, size_t n, int64_t *out)
{
    size_t per = NPY_BOUNCE / f->itemsize;
    while (n > 0) {
        size_t k = TG_MIN(n, per);
        int rc = read_raw(f, first, k);
        if (rc) return rc;
        /* int64, the usual id dtype, is already what we want */
        if (f->dtype == TG_NPY_I8) memcpy(out, f->bounce, k * 8);
        for (size_t i = 0; i < k && f->dtype != TG_NPY_I8; i++) {
            const uint8_t *p = f->bounce + i * f->itemsize;
            int64_t v;
            if (f->dtype == TG_NPY_I8) {
                memcpy(&v, p, 8);
            } else if (f->dtype == TG_NPY_U8) {
                uint64_t u;
                memcpy(&u, p, 8);
                if (u > (uint64_t)INT64_MAX)
                    return tg_err(-ERANGE, "%s: offset %llu: value %llu does not fit in int64",
                                  f->path,
                                  (unsigned long long)(f->data_off + (first + i) * f->itemsize),
                                  (unsigned long long)u);
                v = (int64_t)u;
            } else if (dtypes[f->dtype].kind == TG_NPY_KIND_FLOAT) {
                double d = elem_f64(f, i);
                if (!(d >= -9.2e18 && d <= 9.2e18) || d != floor(d))
                    return tg_err(-EINVAL, "%s: offset %llu: value %g is not an integer", f->path,
                                  (unsigned long long)(f->data_off + (first + i) * f->itemsize), d);
                v = (int64_t)d;
            } else {
                v = (int64_t)elem_f64(f, i); /* every other integer type is exact in a double */
            }
            out[i] = v;
        }
        out += k;
        first += k;
        n -= k;
    }
    return 0;
}

/* ---------------------------------------------------------------- writing */

size_t tg_npy_header(char *buf, size_t len, const char *descr, int ndim, const uint64_t *shape)
{
    char dict[256];
    size_t k = (size_t)snprintf(dict, sizeof dict,
                                "{'descr': '%s', 'fortran_order': False, "
                                "'shape': (",
                                descr);
    for (int i = 0; i < ndim && k < sizeof dict; i++)
        k += (size_t)snprintf(dict + k, sizeof dict - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    if (k < sizeof dict)
        k += (size_t)snprintf(dict + k, sizeof dict - k, "%s), }", ndim == 1 ? "," : "");
    if (k >= sizeof dict) return 0;
    /* NumPy pads the dict with spaces and ends it with '\n' so that the data start at a
     * multiple of 64 bytes. */
    size_t total = (10 + k + 1 + 63) / 64 * 64;
    if (total > len || total - 10 > 0xffff) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memcpy(buf + 10, dict, k);
    memset(buf + 10 + k, ' ', total - 10 - k - 1);
    buf[total - 1] = '\n';
    return total;
}
