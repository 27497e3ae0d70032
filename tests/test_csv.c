/* The streaming CSV reader: number parsing (checked against strtod), plain and gzip input, CRLF,
 * missing final newline, rows that straddle buffer refills, and every error with its line. */
#include <fcntl.h>
#include <float.h>
#include <unistd.h>

#include "data/import-impl.h"
#include "tg_test.h"

static char dir[4096];

static int parse_f(const char *s, double *v)
{
    return tg_csv_parse_f64(s, strlen(s), v);
}

static int parse_i(const char *s, int64_t *v)
{
    return tg_csv_parse_i64(s, strlen(s), v);
}

TG_TEST(integers)
{
    int64_t v = 0;
    TG_CHECK(parse_i("0", &v) == 0 && v == 0);
    TG_CHECK(parse_i("-12", &v) == 0 && v == -12);
    TG_CHECK(parse_i("+7", &v) == 0 && v == 7);
    TG_CHECK(parse_i(" 42\t", &v) == 0 && v == 42);
    TG_CHECK(parse_i("9223372036854775807", &v) == 0 && v == INT64_MAX);
    TG_CHECK(parse_i("-9223372036854775808", &v) == 0 && v == INT64_MIN);
    TG_CHECK(parse_i("9223372036854775808", &v) < 0);
    TG_CHECK(parse_i("99999999999999999999999", &v) < 0);
    TG_CHECK(parse_i("", &v) < 0);
    TG_CHECK(parse_i("-", &v) < 0);
    TG_CHECK(parse_i("1.5", &v) < 0);
    TG_CHECK(parse_i("1e5", &v) < 0);
    TG_CHECK(parse_i("12a", &v) < 0);
    TG_CHECK(parse_i("1 2", &v) < 0);
    /* not NUL-terminated: only n bytes count */
    TG_CHECK(tg_csv_parse_i64("123456", 3, &v) == 0 && v == 123);
}

TG_TEST(floats)
{
    double v = 0;
    TG_CHECK(parse_f("1.5", &v) == 0 && v == 1.5);
    TG_CHECK(parse_f("-0.25", &v) == 0 && v == -0.25);
    TG_CHECK(parse_f("1e3", &v) == 0 && v == 1000);
    TG_CHECK(parse_f("1.5E-3", &v) == 0 && v == 1.5e-3);
    TG_CHECK(parse_f("2.5e+2", &v) == 0 && v == 250);
    TG_CHECK(parse_f(".5", &v) == 0 && v == 0.5);
    TG_CHECK(parse_f("5.", &v) == 0 && v == 5);
    TG_CHECK(parse_f("-0", &v) == 0 && v == 0 && signbit(v));
    TG_CHECK(parse_f("0.000000000000000000000000000001", &v) == 0 && v == 1e-30);
    TG_CHECK(parse_f("nan", &v) == 0 && isnan(v));
    TG_CHECK(parse_f("NaN", &v) == 0 && isnan(v));
    TG_CHECK(parse_f("-inf", &v) == 0 && isinf(v) && v < 0);
    TG_CHECK(parse_f("Infinity", &v) == 0 && isinf(v));
    TG_CHECK(parse_f("1e400", &v) == 0 && isinf(v));
    TG_CHECK(parse_f("1e-400", &v) == 0 && v == 0);
    TG_CHECK(parse_f("4.9406564584124654e-324", &v) == 0 && v == 4.9406564584124654e-324);
    TG_CHECK(parse_f("1.7976931348623157e308", &v) == 0 && v == DBL_MAX);
    TG_CHECK(parse_f("123456789012345678901234567890", &v) == 0 &&
             v == 123456789012345678901234567890.0);
    const char *bad[] = {"",    "-",   ".",   "e5",   "1e",  "1e+", "1.2.3", "0x10",
                         "1,5", "abc", "1 2", "nana", "+-1", "--1", "1e5x",  "inf5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (parse_f(bad[i], &v) == 0) TG_FAIL("'%s' parsed as %g", bad[i], v);
}

/* The fast path must agree bit for bit with strtod (correct rounding). */
TG_TEST(floats_match_strtod)
{
    tg_rng_t r;
    tg_rng_seed(&r, 7);
    char s[64];
    int bad = 0;
    for (int i = 0; i < 200000 && bad < 5; i++) {
        double x;
        switch (i % 4) {
        case 0: /* typical features: 6 decimals */
            snprintf(s, sizeof s, "%.6f", tg_rng_normal(&r));
            break;
        case 1: /* full precision, wide exponent range */
            x = tg_rng_normal(&r) * pow(10, (double)tg_rng_below(&r, 80) - 40);
            snprintf(s, sizeof s, "%.17g", x);
            break;
        case 2:
            snprintf(s, sizeof s, "%.9e", tg_rng_uniform(&r) * 1e6);
            break;
        default: /* short decimals with exponents around the fast-path edge */
            snprintf(s, sizeof s, "%llue%d", (unsigned long long)tg_rng_below(&r, 1000000),
                     (int)tg_rng_below(&r, 60) - 30);
            break;
        }
        double a, b = strtod(s, NULL);
        if (parse_f(s, &a) || memcmp(&a, &b, sizeof a)) {
            TG_FAIL("'%s': got %.17g, strtod %.17g", s, a, b);
            bad++;
        }
    }
}

/* Reads everything from c into a string "f1|f2;f1;..." for compact comparisons. */
static char *rows_to_string(tg_csv_t *c, int *rc_out)
{
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    out[0] = 0;
    int rc;
    while ((rc = tg_csv_next(c)) > 0) {
        for (size_t i = 0; i < tg_csv_nfields(c); i++)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "|" : "", c->field[i]);
        len += (size_t)snprintf(out + len, cap - len, ";");
    }
    *rc_out = rc;
    return out;
}

static void check_mem_rows(const char *text, unsigned flags, const char *want)
{
    /* Tiny refill chunks make every row straddle a buffer boundary at some point. */
    static const size_t chunks[] = {1, 2, 3, 7, 64, 0};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        tg_csv_t c;
        TG_CHECK_OK(tg_csv_open_mem(&c, text, strlen(text), "mem.csv", flags, chunks[k]));
        int rc;
        char *got = rows_to_string(&c, &rc);
        if (rc != 0) TG_FAIL("chunk %zu: rc %d: %s", chunks[k], rc, tg_errmsg());
        if (strcmp(got, want)) TG_FAIL("chunk %zu: got '%s', want '%s'", chunks[k], got, want);
        free(got);
        tg_csv_close(&c);
    }
}

TG_TEST(rows_and_line_endings)
{
    check_mem_rows("1,2\n3,4\n", 0, "1|2;3|4;");
    check_mem_rows("1,2\n3,4", 0, "1|2;3|4;");       /* no final newline */
    check_mem_rows("1,2\r\n3,4\r\n", 0, "1|2;3|4;"); /* CRLF */
    check_mem_rows("1,2\r\n3,4", 0, "1|2;3|4;");
    check_mem_rows("1,,3\n\n5\n", 0, "1||3;;5;"); /* empty fields and a blank line */
    check_mem_rows("1\n\n2\n", TG_CSV_SKIP_BLANK, "1;2;");
    check_mem_rows("# c\n 1\t 2  3 \n%x\n\n4 5\n", TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK,
                   "1|2|3;4|5;");
    check_mem_rows("a,b\n", 0, "a|b;");
    /* A line far longer than the initial buffer grows it. */
    char *big = malloc(300001);
    for (int i = 0; i < 100000; i++)
        memcpy(big + 3 * i, i == 99999 ? "78\n" : "78,", 3);
    big[300000] = 0;
    tg_csv_t c;
    TG_CHECK_OK(tg_csv_open_mem(&c, big, 300000, "big.csv", 0, 4096));
    TG_CHECK(tg_csv_next(&c) == 1);
    TG_CHECK_EQ_U64(tg_csv_nfields(&c), 100000);
    TG_CHECK(tg_csv_next(&c) == 0);
    tg_csv_close(&c);
    free(big);
}

/* tg_csv_next_pair must give the same rows, values and line numbers as the generic path. */
static void check_pairs(const char *text, unsigned flags)
{
    static const size_t chunks[] = {1, 5, 13, 0};
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
        tg_csv_t a, b;
        TG_CHECK_OK(tg_csv_open_mem(&a, text, strlen(text), "p.txt", flags, chunks[k]));
        TG_CHECK_OK(tg_csv_open_mem(&b, text, strlen(text), "p.txt", flags, chunks[k]));
        int ra, rb, fast = 0;
        int64_t x, y, u, v;
        while ((ra = tg_csv_next_pair(&a, &x, &y)) > 0) {
            rb = tg_csv_next(&b);
            TG_CHECK(rb == 1);
            TG_CHECK_EQ_U64(a.line, b.line);
            if (ra == 2) {
                fast++;
                TG_CHECK(tg_csv_nfields(&b) == 2 && tg_csv_get_i64(&b, 0, &u) == 0 &&
                         tg_csv_get_i64(&b, 1, &v) == 0 && u == x && v == y);
            } else {
                TG_CHECK(tg_csv_nfields(&a) == tg_csv_nfields(&b));
            }
        }
        TG_CHECK(ra == 0 && tg_csv_next(&b) == 0);
        if (chunks[k] == 0) TG_CHECK(fast > 0); /* small buffers rarely hold a whole line */
        tg_csv_close(&a);
        tg_csv_close(&b);
    }
}

TG_TEST(pairs_fast_path)
{
    unsigned ws = TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK;
    check_pairs("# c\n1 2\n3\t4\r\n  5   6  \n7 8 9\n\n%x\n-1 2\n123456789012345678 1\n10 11", ws);
    check_pairs("0,1\n2,3\r\n4, 5\n6,7,8\n9,\n,1\n12,13", 0);
}

/* 300k rows, ~10 MB: more than the 4 MiB read buffer and several 2 MiB inflate blocks, so
 * refills and block boundaries are crossed many times. */
#define SAMPLE_ROWS 300000

static void write_sample(const char *path, int gz)
{
    char *text = malloc(48u * SAMPLE_ROWS);
    size_t len = 0;
    for (int i = 0; i < SAMPLE_ROWS; i++)
        len += (size_t)sprintf(text + len, "%d,%.6f,%de-2\r\n", i, i * 0.5, -i);
    if (gz)
        tg_test_write_gz(path, text);
    else
        tg_test_write_file(path, text);
    free(text);
}

TG_TEST(files_plain_and_gzip)
{
    for (int gz = 0; gz < 2; gz++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/sample.csv%s", dir, gz ? ".gz" : "");
        write_sample(path, gz);
        tg_csv_t c;
        TG_CHECK_OK(tg_csv_open(&c, path, 0));
        int rc, n = 0;
        while ((rc = tg_csv_next(&c)) > 0) {
            int64_t a;
            double b, x;
            float row[3];
            TG_CHECK_OK(tg_csv_expect_fields(&c, 3));
            TG_CHECK_OK(tg_csv_get_i64(&c, 0, &a));
            TG_CHECK_OK(tg_csv_get_f64(&c, 1, &b));
            TG_CHECK_OK(tg_csv_get_f64(&c, 2, &x));
            TG_CHECK_OK(tg_csv_row_f32(&c, row, 3));
            if (a != n || b != n * 0.5 || fabs(x + n * 0.01) > 1e-9 || row[1] != (float)(n * 0.5)) {
                TG_FAIL("%s: row %d: %lld %g %g", path, n, (long long)a, b, x);
                break;
            }
            TG_CHECK_EQ_U64(c.line, (uint64_t)n + 1);
            n++;
        }
        TG_CHECK(rc == 0);
        TG_CHECK(n == SAMPLE_ROWS);
        TG_CHECK(tg_csv_offset(&c) > 0);
        tg_csv_close(&c);
    }
}

/* Closing after a few rows, with the inflate thread blocked on a full queue, must not hang or
 * leak. */
TG_TEST(close_early)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/early.csv.gz", dir);
    write_sample(path, 1);
    for (int rows = 0; rows < 3; rows++) {
        tg_csv_t c;
        TG_CHECK_OK(tg_csv_open(&c, path, 0));
        for (int i = 0; i < rows * 1000; i++)
            TG_CHECK(tg_csv_next(&c) == 1);
        if (rows == 2) usleep(100000); /* let the thread fill the queue */
        tg_csv_close(&c);
    }
}

static void expect_error(const char *text, unsigned flags, const char *needle)
{
    tg_csv_t c;
    TG_CHECK_OK(tg_csv_open_mem(&c, text, strlen(text), "x.csv", flags, 5));
    int rc;
    tg_err_clear();
    while ((rc = tg_csv_next(&c)) > 0) {
        if ((rc = tg_csv_expect_fields(&c, 2)) < 0) break;
        int64_t a;
        double b;
        if ((rc = tg_csv_get_i64(&c, 0, &a)) < 0 || (rc = tg_csv_get_f64(&c, 1, &b)) < 0) break;
    }
    if (rc >= 0)
        TG_FAIL("'%s': no error, expected '%s'", text, needle);
    else if (!strstr(tg_errmsg(), needle))
        TG_FAIL("'%s': message '%s' lacks '%s'", text, tg_errmsg(), needle);
    else if (strchr(tg_errmsg(), '\n'))
        TG_FAIL("message is not one line: '%s'", tg_errmsg());
    tg_csv_close(&c);
}

TG_TEST(errors)
{
    expect_error("1,2\n3,x\n", 0, "x.csv: line 2, field 2: expected a number, got 'x'");
    expect_error("1,2\nfoo,3\n", 0, "x.csv: line 2, field 1: expected an integer, got 'foo'");
    expect_error("1,2\n3,4,5\n", 0, "x.csv: line 2: expected 2 fields, got 3");
    expect_error("1,2\n3\n", 0, "x.csv: line 2: expected 2 fields, got 1");
    expect_error("", 0, "x.csv: empty file");
    expect_error("# only\n\n", TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK,
                 "x.csv: no data rows in 2 lines");
    expect_error("1,2\n\x01\x02\xff,3\n", 0,
                 "x.csv: line 2, field 1: expected an integer, got '?\?\?'");
    /* row_f32 rejects non-finite and out-of-float-range values */
    tg_csv_t c;
    const char *t = "1,nan\n";
    TG_CHECK_OK(tg_csv_open_mem(&c, t, strlen(t), "f.csv", 0, 0));
    float row[2];
    TG_CHECK(tg_csv_next(&c) == 1);
    TG_CHECK_ERR(tg_csv_row_f32(&c, row, 2), "f.csv: line 1, field 2: expected a finite number");
    TG_CHECK_ERR(tg_csv_row_f32(&c, row, 1), "f.csv: line 1: expected 1 field, got 2");
    tg_csv_close(&c);
    /* an empty file is fine when allowed */
    TG_CHECK_OK(tg_csv_open_mem(&c, "", 0, "e.csv", TG_CSV_ALLOW_EMPTY, 0));
    TG_CHECK(tg_csv_next(&c) == 0);
    tg_csv_close(&c);
}

TG_TEST(file_errors)
{
    char path[4200];
    tg_csv_t c;
    snprintf(path, sizeof path, "%s/missing.csv", dir);
    TG_CHECK_ERR(tg_csv_open(&c, path, 0), "missing.csv: cannot open");

    /* A gzip file cut in half: zlib reports it and the message names the file. */
    char full[4200];
    snprintf(full, sizeof full, "%s/full.csv.gz", dir);
    write_sample(full, 1);
    char *data;
    size_t len;
    TG_CHECK_OK(tg_read_file(full, &data, &len));
    snprintf(path, sizeof path, "%s/trunc.csv.gz", dir);
    TG_CHECK_OK(tg_write_file_atomic(path, data, len / 2));
    /* and one with a flipped byte in the middle of the deflate stream */
    char corrupt[4200];
    snprintf(corrupt, sizeof corrupt, "%s/corrupt.csv.gz", dir);
    data[len / 2] ^= 0x55;
    data[len / 2 + 1] ^= 0x55;
    TG_CHECK_OK(tg_write_file_atomic(corrupt, data, len));
    free(data);
    const char *bad[2] = {path, corrupt};
    for (int k = 0; k < 2; k++) {
        TG_CHECK_OK(tg_csv_open(&c, bad[k], 0));
        int rc;
        tg_err_clear();
        while ((rc = tg_csv_next(&c)) > 0)
            ;
        TG_CHECK(rc < 0);
        if (!strstr(tg_errmsg(), bad[k]) || !strstr(tg_errmsg(), "gzip") ||
            !strstr(tg_errmsg(), "after line"))
            TG_FAIL("message '%s' should name %s, gzip and the line", tg_errmsg(), bad[k]);
        tg_csv_close(&c);
    }

    snprintf(path, sizeof path, "%s/empty.csv.gz", dir);
    tg_test_write_gz(path, "");
    TG_CHECK_OK(tg_csv_open(&c, path, 0));
    TG_CHECK_ERR(tg_csv_next(&c), "empty.csv.gz: empty file");
    tg_csv_close(&c);
}

/* tg_csv_open_range: parts of a plain file cut at line ends give the rows of the whole file,
 * with line numbers continued from first_line; a read error and a file shorter than the range
 * name the offset. */
TG_TEST(ranges)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/range.txt", dir);
    const char *text = "# c\n1 2\n\n3 4\n5 6\n7 8"; /* lines 1..6, the last without newline */
    tg_test_write_file(path, text);
    int fd = open(path, O_RDONLY);
    TG_CHECK(fd >= 0);
    /* cut after line 3 ("\n" at offset 8) and after line 4 */
    uint64_t cuts[] = {0, 9, 13, strlen(text)};
    uint64_t line = 0;
    int64_t want = 1;
    unsigned fl = TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK | TG_CSV_ALLOW_EMPTY;
    static const uint64_t want_line[] = {2, 4, 5, 6};
    for (int k = 0; k < 3; k++) {
        tg_csv_t c;
        TG_CHECK_OK(tg_csv_open_range(&c, fd, "range.txt", fl, cuts[k], cuts[k + 1], line));
        int64_t a, b;
        int rc;
        while ((rc = tg_csv_next_pair(&c, &a, &b)) > 0) {
            if (rc == 1) { /* not the fused fast path: a comment before it, or no newline */
                TG_CHECK_OK(tg_csv_get_i64(&c, 0, &a));
                TG_CHECK_OK(tg_csv_get_i64(&c, 1, &b));
            }
            TG_CHECK(a == want && b == want + 1);
            TG_CHECK_EQ_U64(c.line, want_line[(want - 1) / 2]);
            want += 2;
        }
        TG_CHECK(rc == 0);
        TG_CHECK_EQ_U64(tg_csv_offset(&c), cuts[k + 1]);
        line = c.line;
        tg_csv_close(&c);
    }
    TG_CHECK(want == 9 && line == 6);

    /* the range ends past the end of the file (it was truncated after it was split) */
    tg_csv_t c;
    TG_CHECK_OK(tg_csv_open_range(&c, fd, "range.txt", fl, 13, 100, 4));
    int64_t a, b;
    TG_CHECK_ERR(tg_csv_next_pair(&c, &a, &b),
                 "range.txt: the file ends at offset 20, before 100 (did it change");
    tg_csv_close(&c);
    close(fd);

    /* a descriptor that cannot be read */
    fd = open(path, O_WRONLY);
    TG_CHECK(fd >= 0);
    TG_CHECK_OK(tg_csv_open_range(&c, fd, "range.txt", fl, 5, UINT64_MAX, 0));
    TG_CHECK_ERR(tg_csv_next(&c), "range.txt: read error at offset 5: Bad file descriptor");
    tg_csv_close(&c);
    close(fd);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", tg_test_tmpdir("csv"));
    TG_RUN(integers);
    TG_RUN(floats);
    TG_RUN(floats_match_strtod);
    TG_RUN(rows_and_line_endings);
    TG_RUN(pairs_fast_path);
    TG_RUN(files_plain_and_gzip);
    TG_RUN(close_early);
    TG_RUN(ranges);
    TG_RUN(errors);
    TG_RUN(file_errors);
    if (!tg_test_failures) tg_rmtree(dir);
    return tg_test_done();
}
