/* libFuzzer target for the CSV reader and its number parsers.
 *
 * Input: byte 0 picks the reader flags and the refill chunk, the rest is the file. Inputs that
 * start (after byte 0) with the gzip magic go through a memfd and zlib, so corrupt and truncated
 * gzip streams are fuzzed too. Oracles: no crash/UB/leak; every number the hand parser accepts
 * equals strtod/strtoll on the same text (bit for bit); errors carry a one-line message.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/import-impl.h"

static void check_field(const char *s, size_t n)
{
    char buf[128];
    if (n >= sizeof buf) return;
    memcpy(buf, s, n);
    buf[n] = 0;
    double v;
    if (tg_csv_parse_f64(s, n, &v) == 0 && !isnan(v)) {
        char *end;
        double w = strtod(buf, &end);
        if (memcmp(&v, &w, sizeof v)) {
            fprintf(stderr, "float mismatch on '%s': %.17g vs strtod %.17g\n", buf, v, w);
            abort();
        }
    }
    int64_t i;
    if (tg_csv_parse_i64(s, n, &i) == 0) {
        long long w = strtoll(buf, NULL, 10);
        if (w != i) {
            fprintf(stderr, "int mismatch on '%s': %lld vs strtoll %lld\n", buf, (long long)i, w);
            abort();
        }
    }
}

static void check_msg(void)
{
    const char *m = tg_errmsg();
    if (!m[0] || strchr(m, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", m);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0] & 15;
    size_t chunk = (size_t)(data[0] >> 4) * 3 + 1;
    data++;
    size--;
    tg_csv_t c;
    int rc, fd = -1;
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
        fd = memfd_create("fuzz.csv.gz", 0);
        if (fd < 0 || write(fd, data, size) != (ssize_t)size) abort();
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        rc = tg_csv_open(&c, path, flags);
    } else {
        rc = tg_csv_open_mem(&c, data, size, "fuzz.csv", flags, chunk);
    }
    if (rc) abort();
    float row[64];
    while ((rc = tg_csv_next(&c)) > 0) {
        size_t nf = tg_csv_nfields(&c);
        for (size_t i = 0; i < nf; i++) {
            if (strlen(c.field[i]) > c.flen[i]) abort();
            check_field(c.field[i], c.flen[i]);
            tg_csv_is_missing(&c, i);
        }
        if (nf <= 64 && tg_csv_row_f32(&c, row, nf) < 0) check_msg();
        if (tg_csv_expect_fields(&c, 2) < 0) check_msg();
        int64_t v;
        if (tg_csv_get_i64(&c, 0, &v) < 0) check_msg();
    }
    if (rc < 0) check_msg();
    tg_csv_close(&c);
    if (fd >= 0) {
        close(fd);
    } else {
        /* the id-pair fast path must agree with the generic path row by row */
        tg_csv_t a, b;
        if (tg_csv_open_mem(&a, data, size, "fuzz.csv", flags, chunk) ||
            tg_csv_open_mem(&b, data, size, "fuzz.csv", flags, chunk))
            abort();
        int ra, rb;
        int64_t x, y, u, v;
        while ((ra = tg_csv_next_pair(&a, &x, &y)) > 0) {
            rb = tg_csv_next(&b);
            if (rb != 1 || a.line != b.line) abort();
            if (ra == 2 && (tg_csv_nfields(&b) != 2 || tg_csv_get_i64(&b, 0, &u) ||
                            tg_csv_get_i64(&b, 1, &v) || u != x || v != y))
                abort();
            if (ra == 1 && tg_csv_nfields(&a) != tg_csv_nfields(&b)) abort();
        }
        rb = tg_csv_next(&b);
        if ((ra < 0) != (rb < 0) || (ra == 0 && rb != 0)) abort();
        tg_csv_close(&a);
        tg_csv_close(&b);
    }
    tg_err_clear();
    return 0;
}
