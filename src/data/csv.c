/* Streaming CSV / whitespace-separated text reader for plain and gzip files.
 *
 * zlib's gzread reads plain files transparently, so one code path serves both. For compressed
 * files a background thread inflates ahead into a few blocks (inflate runs at about the speed of
 * parsing, so on two cores this nearly doubles the rate); plain files are read inline. Bytes go
 * into a large buffer; each row is split in place (delimiters become NULs) and numbers are parsed
 * by hand, because sscanf/strtod on every field of a multi-GB feature file costs more than the
 * decompression. The hand parser takes the exactly-rounded fast path (at most 19 significant
 * digits, mantissa < 2^53, |exponent| <= 22) and hands anything else to strtod, so every value
 * is the correctly rounded double.
 */
#include "import-impl.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CSV_BUF (4u << 20)        /* initial read buffer */
#define CSV_MAX_LINE (256u << 20) /* a longer line is an error, not an unbounded allocation */
#define CSV_GZBUF (256u << 10)    /* zlib's own input buffer */

static int csv_init(tg_csv_t *c, const char *name, unsigned flags, size_t cap)
{
    memset(c, 0, sizeof *c);
    c->flags = flags;
    c->cap = cap;
    c->max_cap = CSV_MAX_LINE;
    c->path = strdup(name);
    c->buf = malloc(cap + 1);
    c->field_cap = 64;
    c->field = malloc(c->field_cap * sizeof *c->field);
    c->flen = malloc(c->field_cap * sizeof *c->flen);
    if (!c->path || !c->buf || !c->field || !c->flen) {
        tg_csv_close(c);
        return tg_err(-ENOMEM, "%s: out of memory for the read buffer", name);
    }
    return 0;
}

/* ---------------------------------------------------------------- background inflate */

#define GZ_BLOCK (2u << 20) /* bytes per inflated block */
#define GZ_QUEUE 3          /* blocks in flight */

/* One block of inflated bytes, or the end (n == 0) with err set if zlib failed. */
typedef struct gz_block {
    size_t n, off;     /* bytes in data; bytes already consumed */
    uint64_t comp_off; /* compressed bytes read when the block was done, for progress */
    int err;           /* 0, or a zlib error (Z_ERRNO: errno in sys_errno) */
    int sys_errno;
    char msg[200];
    char data[];
} gz_block_t;

/* Sent when a block cannot be allocated, so that the reader reports it instead of hanging; never
 * freed (compared by address). */
static gz_block_t gz_oom = {.err = Z_MEM_ERROR, .msg = "out of memory for an inflate block"};

static void gz_free(gz_block_t *b)
{
    if (b != &gz_oom) free(b);
}

static void *gz_thread(void *arg)
{
    tg_csv_t *c = arg;
    for (;;) {
        gz_block_t *b = malloc(sizeof *b + GZ_BLOCK);
        if (!b) {
            if (tg_queue_push(c->gzq, &gz_oom)) return NULL;
            break;
        }
        memset(b, 0, sizeof *b);
        int n = gzread(c->gz, b->data, GZ_BLOCK);
        int err = Z_OK;
        const char *m = gzerror(c->gz, &err);
        if (n < 0 || (n == 0 && err != Z_OK && err != Z_STREAM_END)) {
            b->err = err == Z_OK ? Z_DATA_ERROR : err;
            b->sys_errno = errno;
            size_t pl = strlen(c->path);
            /* zlib prefixes its messages with the path; ours names the file already */
            if (m && !strncmp(m, c->path, pl) && m[pl] == ':' && m[pl + 1] == ' ') m += pl + 2;
            snprintf(b->msg, sizeof b->msg, "%s", m ? m : "unknown error");
            n = 0;
        }
        b->n = (size_t)n;
        z_off_t off = gzoffset(c->gz);
        b->comp_off = off > 0 ? (uint64_t)off : 0;
        int last = n == 0;
        if (tg_queue_push(c->gzq, b)) { /* closed: the reader stopped early */
            free(b);
            return NULL;
        }
        if (last) break;
    }
    tg_queue_close(c->gzq); /* nothing more: a pop after the end block returns -EPIPE */
    return NULL;
}

/* Copies up to want inflated bytes to dst; 0 bytes = end of input. */
static int gz_take(tg_csv_t *c, char *dst, size_t want, size_t *got)
{
    *got = 0;
    gz_block_t *b = c->gzblk;
    if (!b || b->off == b->n) {
        if (b && b->n == 0) return 0; /* the end was seen */
        if (b) gz_free(b);
        c->gzblk = NULL;
        void *item;
        if (tg_queue_pop(c->gzq, &item)) return 0;
        c->gzblk = b = item;
        c->gz_comp_off = b->comp_off;
        if (b->err == Z_ERRNO)
            return tg_err(-EIO, "%s: read error after line %llu: %s", c->path,
                          (unsigned long long)c->line, strerror(b->sys_errno));
        if (b->err)
            return tg_err(-EIO, "%s: truncated or corrupt gzip file after line %llu (zlib: %s)",
                          c->path, (unsigned long long)c->line, b->msg);
        if (b->n == 0) return 0;
    }
    size_t n = TG_MIN(want, b->n - b->off);
    memcpy(dst, b->data + b->off, n);
    b->off += n;
    *got = n;
    return 0;
}

static void gz_stop(tg_csv_t *c)
{
    if (!c->gzq) return;
    tg_queue_close(c->gzq); /* unblocks the thread's push */
    pthread_join(c->gzthread, NULL);
    void *item;
    while (!tg_queue_pop(c->gzq, &item))
        gz_free(item);
    if (c->gzblk) gz_free(c->gzblk);
    c->gzblk = NULL;
    tg_queue_destroy(c->gzq);
    c->gzq = NULL;
}

int tg_csv_open(tg_csv_t *c, const char *path, unsigned flags)
{
    int rc = csv_init(c, path, flags, CSV_BUF);
    if (rc) return rc;
    errno = 0;
    c->gz = gzopen(path, "rb");
    if (!c->gz) {
        int e = errno ? errno : ENOMEM;
        tg_csv_close(c);
        return tg_err(-e, "%s: cannot open: %s", path, strerror(e));
    }
    gzbuffer(c->gz, CSV_GZBUF);
    /* gzdirect looks at the first bytes: plain files are read inline, where a thread would
     * only add a copy. */
    if (!gzdirect(c->gz)) {
        if ((rc = tg_queue_create(&c->gzq, GZ_QUEUE))) {
            tg_csv_close(c);
            return rc;
        }
        if ((rc = pthread_create(&c->gzthread, NULL, gz_thread, c))) {
            tg_queue_destroy(c->gzq);
            c->gzq = NULL;
            tg_csv_close(c);
            return tg_err(-rc, "%s: cannot start the inflate thread: %s", path, strerror(rc));
        }
    }
    return 0;
}

int tg_csv_open_range(tg_csv_t *c, int fd, const char *name, unsigned flags, uint64_t begin,
                      uint64_t end, uint64_t first_line)
{
    int rc = csv_init(c, name, flags, CSV_BUF);
    if (rc) return rc;
    c->range = 1;
    c->range_fd = fd;
    c->range_off = begin;
    c->range_end = end < begin ? begin : end;
    c->line = first_line;
    return 0;
}

int tg_csv_open_mem(tg_csv_t *c, const void *data, size_t len, const char *name, unsigned flags,
                    size_t chunk)
{
    int rc = csv_init(c, name, flags, chunk ? chunk : CSV_BUF);
    if (rc) return rc;
    c->mem = data;
    c->mem_len = len;
    return 0;
}

void tg_csv_close(tg_csv_t *c)
{
    gz_stop(c);
    if (c->gz) gzclose_r(c->gz);
    free(c->path);
    free(c->buf);
    free(c->field);
    free(c->flen);
    memset(c, 0, sizeof *c);
}

uint64_t tg_csv_offset(const tg_csv_t *c)
{
    if (c->gzq) return c->gz_comp_off; /* gzoffset belongs to the inflate thread */
    if (c->range) return c->range_off;
    if (c->gz) {
        z_off_t off = gzoffset(c->gz);
        return off > 0 ? (uint64_t)off : 0;
    }
    return c->mem_pos;
}

/* zlib prefixes its messages with the path; drop that, ours names the file already. */
static const char *zlib_msg(tg_csv_t *c, int *err)
{
    const char *m = gzerror(c->gz, err);
    size_t n = strlen(c->path);
    if (m && !strncmp(m, c->path, n) && m[n] == ':' && m[n + 1] == ' ') m += n + 2;
    return m ? m : "unknown error";
}

/* Moves the unconsumed bytes to the front and reads more. A line that fills the whole buffer
 * doubles it, up to CSV_MAX_LINE. Sets eof when the source is exhausted. */
static int fill(tg_csv_t *c)
{
    if (c->pos > 0) {
        memmove(c->buf, c->buf + c->pos, c->len - c->pos);
        c->len -= c->pos;
        c->pos = 0;
    }
    if (c->len == c->cap) {
        if (c->cap >= c->max_cap)
            return tg_err(-EINVAL, "%s: line %llu: longer than %zu bytes (not a CSV file?)",
                          c->path, (unsigned long long)c->line + 1, c->max_cap);
        size_t ncap = TG_MIN(c->cap * 2, c->max_cap);
        char *nb = realloc(c->buf, ncap + 1);
        if (!nb) return tg_err(-ENOMEM, "%s: out of memory for a %zu-byte line", c->path, ncap);
        c->buf = nb;
        c->cap = ncap;
    }
    size_t want = c->cap - c->len;
    size_t got;
    if (c->gzq) {
        int rc = gz_take(c, c->buf + c->len, want, &got);
        if (rc) return rc;
    } else if (c->gz) {
        int n = gzread(c->gz, c->buf + c->len, (unsigned)TG_MIN(want, (size_t)1 << 30));
        int err = Z_OK;
        if (n < 0) {
            const char *m = zlib_msg(c, &err);
            if (err == Z_ERRNO)
                return tg_err(-EIO, "%s: read error after line %llu: %s", c->path,
                              (unsigned long long)c->line, strerror(errno));
            return tg_err(-EIO, "%s: corrupt gzip data after line %llu (zlib: %s)", c->path,
                          (unsigned long long)c->line, m);
        }
        if (n == 0) {
            /* gzread reports a truncated stream only through gzerror at the end. */
            const char *m = zlib_msg(c, &err);
            if (err != Z_OK && err != Z_STREAM_END)
                return tg_err(-EIO, "%s: truncated or corrupt gzip file after line %llu (zlib: %s)",
                              c->path, (unsigned long long)c->line, m);
        }
        got = (size_t)n;
    } else if (c->range) {
        got = 0;
        want = (size_t)TG_MIN((uint64_t)want, c->range_end - c->range_off);
        while (got < want) {
            ssize_t n =
                pread(c->range_fd, c->buf + c->len + got, want - got, (off_t)(c->range_off + got));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0)
                return tg_err(-EIO, "%s: read error at offset %llu: %s", c->path,
                              (unsigned long long)(c->range_off + got), strerror(errno));
            if (n == 0) {
                /* The importer cut the range at a line end it saw: a file that is shorter now
                 * changed under it. UINT64_MAX means "to the end". */
                if (c->range_end != UINT64_MAX)
                    return tg_err(-EIO,
                                  "%s: the file ends at offset %llu, before %llu (did it change "
                                  "while it was read?)",
                                  c->path, (unsigned long long)(c->range_off + got),
                                  (unsigned long long)c->range_end);
                break;
            }
            got += (size_t)n;
        }
        c->range_off += got;
    } else {
        got = TG_MIN(want, c->mem_len - c->mem_pos);
        memcpy(c->buf + c->len, c->mem + c->mem_pos, got);
        c->mem_pos += got;
    }
    c->bytes_in += got;
    c->len += got;
    if (!got) c->eof = 1;
    return 0;
}

static int add_field(tg_csv_t *c, char *start, size_t len)
{
    if (c->nfield == c->field_cap) {
        size_t ncap = c->field_cap * 2;
        char **f = realloc(c->field, ncap * sizeof *f);
        if (f) c->field = f;
        size_t *l = realloc(c->flen, ncap * sizeof *l);
        if (l) c->flen = l;
        if (!f || !l) return tg_err(-ENOMEM, "%s: out of memory for %zu fields", c->path, ncap);
        c->field_cap = ncap;
    }
    start[len] = 0;
    c->field[c->nfield] = start;
    c->flen[c->nfield++] = len;
    return 0;
}

static int is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* Splits the NUL-terminated line s (length n) into fields. */
static int split(tg_csv_t *c, char *s, size_t n)
{
    c->nfield = 0;
    int rc;
    if (c->flags & TG_CSV_WS) {
        size_t i = 0;
        for (;;) {
            while (i < n && is_blank(s[i]))
                i++;
            if (i >= n) break;
            size_t b = i;
            while (i < n && !is_blank(s[i]))
                i++;
            if ((rc = add_field(c, s + b, i - b))) return rc;
            i++; /* past the blank that ended the field (now a NUL) */
        }
        return 0;
    }
    char *p = s, *end = s + n;
    for (;;) {
        char *comma = memchr(p, ',', (size_t)(end - p));
        char *fe = comma ? comma : end;
        if ((rc = add_field(c, p, (size_t)(fe - p)))) return rc;
        if (!comma) return 0;
        p = comma + 1;
    }
}

int tg_csv_next(tg_csv_t *c)
{
    size_t scanned = 0; /* bytes after pos already known to hold no newline */
    for (;;) {
        char *start = c->buf + c->pos;
        size_t avail = c->len - c->pos;
        char *nl = memchr(start + scanned, '\n', avail - scanned);
        if (!nl) {
            if (!c->eof) {
                scanned = avail;
                int rc = fill(c);
                if (rc) return rc;
                continue;
            }
            if (avail == 0) {
                if (c->rows == 0 && !(c->flags & TG_CSV_ALLOW_EMPTY)) {
                    if (c->bytes_in == 0) return tg_err(-EINVAL, "%s: empty file", c->path);
                    return tg_err(-EINVAL, "%s: no data rows in %llu lines", c->path,
                                  (unsigned long long)c->line);
                }
                return 0;
            }
            nl = start + avail; /* last line without a newline; buf[cap] is spare */
        }
        scanned = 0;
        c->line++;
        size_t n = (size_t)(nl - start);
        c->pos += n + (c->pos + n < c->len ? 1 : 0);
        if (n > 0 && start[n - 1] == '\r') n--;
        start[n] = 0;
        if (c->flags & (TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK)) {
            size_t i = 0;
            while (i < n && (is_blank(start[i]) || start[i] == '\r'))
                i++;
            if (i == n && (c->flags & TG_CSV_SKIP_BLANK)) continue;
            if (i < n && (c->flags & TG_CSV_COMMENTS) && (start[i] == '#' || start[i] == '%'))
                continue;
        }
        int rc = split(c, start, n);
        if (rc) return rc;
        c->rows++;
        return 1;
    }
}

/* Parses up to 17 digits at *p; 0 if there are none or too many for the fast path. */
static inline int fast_uint(const char **p, const char *e, uint64_t *out)
{
    const char *q = *p;
    uint64_t x = 0;
    while (q < e && (unsigned)(*q - '0') <= 9 && q - *p < 18)
        x = x * 10 + (uint64_t)(*q++ - '0');
    size_t nd = (size_t)(q - *p);
    if (nd == 0 || nd >= 18) return 0;
    *p = q;
    *out = x;
    return 1;
}

int tg_csv_next_pair(tg_csv_t *c, int64_t *a, int64_t *b)
{
    /* Fast path: "A<sep>B\n" (or \r\n) complete in the buffer, non-negative ids of at most 17
     * digits. Anything else (comments, blank lines, signs, extra columns, a line cut by the end
     * of the buffer) goes through tg_csv_next, so errors read exactly the same. */
    const char *p = c->buf + c->pos, *e = c->buf + c->len;
    int ws = (c->flags & TG_CSV_WS) != 0;
    uint64_t x, y;
    if (ws)
        while (p < e && is_blank(*p))
            p++;
    if (!fast_uint(&p, e, &x) || p >= e) goto slow;
    if (ws) {
        if (!is_blank(*p)) goto slow;
        while (p < e && is_blank(*p))
            p++;
    } else if (*p++ != ',') {
        goto slow;
    }
    if (!fast_uint(&p, e, &y)) goto slow;
    if (ws)
        while (p < e && is_blank(*p))
            p++;
    if (p < e && *p == '\r') p++;
    if (p >= e || *p != '\n') goto slow;
    c->pos = (size_t)(p + 1 - c->buf);
    c->line++;
    c->rows++;
    c->nfield = 0;
    *a = (int64_t)x;
    *b = (int64_t)y;
    return 2;
slow:
    return tg_csv_next(c);
}

/* Copies a field for a message: at most 32 characters, control bytes shown as '?', so that a
 * binary file still gives a one-line error. */
static const char *preview(const char *s, size_t n, char *buf, size_t len)
{
    size_t k = 0, lim = TG_MIN(n, (size_t)32);
    for (size_t i = 0; i < lim && k + 1 < len; i++)
        buf[k++] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    if (n > lim && k + 4 < len) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = 0;
    return buf;
}

int tg_csv_expect_fields(const tg_csv_t *c, size_t n)
{
    if (c->nfield == n) return 0;
    return tg_err(-EINVAL, "%s: line %llu: expected %zu field%s, got %zu", c->path,
                  (unsigned long long)c->line, n, n == 1 ? "" : "s", c->nfield);
}

static int bad_field(const tg_csv_t *c, size_t i, const char *what)
{
    char pv[48];
    if (i >= c->nfield)
        return tg_err(-EINVAL, "%s: line %llu: expected %s in field %zu, but the row has %zu",
                      c->path, (unsigned long long)c->line, what, i + 1, c->nfield);
    return tg_err(-EINVAL, "%s: line %llu, field %zu: expected %s, got '%s'", c->path,
                  (unsigned long long)c->line, i + 1, what,
                  preview(c->field[i], c->flen[i], pv, sizeof pv));
}

int tg_csv_get_i64(const tg_csv_t *c, size_t i, int64_t *out)
{
    if (i >= c->nfield || tg_csv_parse_i64(c->field[i], c->flen[i], out))
        return bad_field(c, i, "an integer");
    return 0;
}

int tg_csv_get_f64(const tg_csv_t *c, size_t i, double *out)
{
    if (i >= c->nfield || tg_csv_parse_f64(c->field[i], c->flen[i], out))
        return bad_field(c, i, "a number");
    return 0;
}

int tg_csv_row_f32(const tg_csv_t *c, float *out, size_t n)
{
    int rc = tg_csv_expect_fields(c, n);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        double v;
        if (tg_csv_parse_f64(c->field[i], c->flen[i], &v)) return bad_field(c, i, "a number");
        if (!isfinite(v) || fabs(v) > 3.4028234663852886e38)
            return bad_field(c, i, "a finite number within the float range");
        out[i] = (float)v;
    }
    return 0;
}

static int word_eq(const char *s, size_t n, const char *w)
{
    size_t k = strlen(w);
    if (n != k) return 0;
    for (size_t i = 0; i < n; i++)
        if (tolower((unsigned char)s[i]) != w[i]) return 0;
    return 1;
}

static void trim(const char **s, size_t *n)
{
    const char *p = *s, *e = *s + *n;
    while (p < e && is_blank(*p))
        p++;
    while (e > p && is_blank(e[-1]))
        e--;
    *s = p;
    *n = (size_t)(e - p);
}

int tg_csv_is_missing(const tg_csv_t *c, size_t i)
{
    if (i >= c->nfield) return 0;
    const char *s = c->field[i];
    size_t n = c->flen[i];
    trim(&s, &n);
    if (n && (*s == '-' || *s == '+')) {
        s++;
        n--;
    }
    return n == 0 || word_eq(s, n, "nan");
}

int tg_csv_parse_i64(const char *s, size_t n, int64_t *out)
{
    trim(&s, &n);
    const char *p = s, *e = s + n;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    if (p == e) return -1;
    uint64_t acc = 0;
    if (e - p <= 18) {
        /* 18 digits cannot overflow: no per-digit range check on the common path */
        for (; p < e; p++) {
            unsigned d = (unsigned)(*p - '0');
            if (d > 9) return -1;
            acc = acc * 10 + d;
        }
        *out = neg ? -(int64_t)acc : (int64_t)acc;
        return 0;
    }
    for (; p < e; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (d > 9) return -1;
        if (acc > (UINT64_MAX - d) / 10) return -1;
        acc = acc * 10 + d;
    }
    if (neg ? acc > (uint64_t)INT64_MAX + 1 : acc > (uint64_t)INT64_MAX) return -1;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}

static const double pow10_tab[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

int tg_csv_parse_f64(const char *s, size_t n, double *out)
{
    trim(&s, &n);
    const char *p = s, *e = s + n;
    int neg = 0;
    if (p < e && (*p == '+' || *p == '-')) neg = *p++ == '-';
    uint64_t m = 0;
    int nd = 0, exact = 1, digits = 0;
    long dexp = 0;
    for (; p < e && (unsigned)(*p - '0') <= 9; p++) {
        unsigned d = (unsigned)(*p - '0');
        digits = 1;
        if (m == 0 && d == 0) continue; /* leading zeros carry no information */
        if (nd < 19) {
            m = m * 10 + d;
            nd++;
        } else {
            dexp++;
            if (d) exact = 0;
        }
    }
    if (p < e && *p == '.') {
        for (p++; p < e && (unsigned)(*p - '0') <= 9; p++) {
            unsigned d = (unsigned)(*p - '0');
            digits = 1;
            if (m == 0 && d == 0) {
                dexp--;
                continue;
            }
            if (nd < 19) {
                m = m * 10 + d;
                nd++;
                dexp--;
            } else if (d) {
                exact = 0;
            }
        }
    }
    if (!digits) {
        const char *w = s + (s < e && (*s == '+' || *s == '-'));
        size_t wn = (size_t)(e - w);
        if (word_eq(w, wn, "nan")) {
            *out = neg ? -NAN : NAN;
            return 0;
        }
        if (word_eq(w, wn, "inf") || word_eq(w, wn, "infinity")) {
            *out = neg ? -INFINITY : INFINITY;
            return 0;
        }
        return -1;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
        if (p == e || (unsigned)(*p - '0') > 9) return -1;
        long x = 0;
        for (; p < e && (unsigned)(*p - '0') <= 9; p++)
            if (x < 100000) x = x * 10 + (*p - '0'); /* saturate: the result is 0 or inf anyway */
        dexp += eneg ? -x : x;
    }
    if (p != e) return -1;
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
        return 0;
    }
    if (exact && m < (1ull << 53) && dexp >= -22 && dexp <= 22) {
        /* Both operands are exact doubles, so one IEEE operation rounds correctly. */
        double v = (double)m;
        v = dexp < 0 ? v / pow10_tab[-dexp] : v * pow10_tab[dexp];
        *out = neg ? -v : v;
        return 0;
    }
    /* Rare: long mantissas or large exponents. The syntax is already checked. */
    char small[64], *tmp = small;
    if (n >= sizeof small && !(tmp = malloc(n + 1))) return -1;
    memcpy(tmp, s, n);
    tmp[n] = 0;
    char *end;
    double v = strtod(tmp, &end);
    int ok = end == tmp + n;
    if (tmp != small) free(tmp);
    if (!ok) return -1;
    *out = v;
    return 0;
}
