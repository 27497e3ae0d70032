/* Strict parsers for command-line values. */
#include "tiergnn/util.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int tg_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s) return tg_err(-EINVAL, "empty size (expected e.g. 512M, 2G or a byte count)");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || v < 0 || !isfinite(v))
        return tg_err(-EINVAL, "bad size '%s' (expected e.g. 512M, 2G or a byte count)", s);
    double m = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        m = 1024.0;
        end++;
        break;
    case 'M':
        m = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        m = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        m = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (m > 1 && (*end == 'i' || *end == 'I')) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return tg_err(-EINVAL, "bad size '%s' (expected e.g. 512M, 2G or a byte count)", s);
    v *= m;
    if (v > 1.8e19) return tg_err(-EINVAL, "size '%s' too large", s);
    *out = (uint64_t)v;
    return 0;
}

int tg_parse_u64(const char *s, uint64_t *out, const char *name)
{
    char *end;
    if (!s || !*s || *s == '-' || isspace((unsigned char)*s))
        return tg_err(-EINVAL, "%s: expected a non-negative integer, got '%s'", name, s ? s : "");
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno)
        return tg_err(-EINVAL, "%s: expected a non-negative integer, got '%s'", name, s);
    *out = v;
    return 0;
}

int tg_parse_i64(const char *s, int64_t *out, const char *name)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s))
        return tg_err(-EINVAL, "%s: expected an integer, got '%s'", name, s ? s : "");
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return tg_err(-EINVAL, "%s: expected an integer, got '%s'", name, s);
    *out = v;
    return 0;
}

int tg_parse_double(const char *s, double *out, const char *name)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s))
        return tg_err(-EINVAL, "%s: expected a number, got '%s'", name, s ? s : "");
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !isfinite(v))
        return tg_err(-EINVAL, "%s: expected a finite number, got '%s'", name, s);
    *out = v;
    return 0;
}

const char *tg_fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, u[i]);
    return buf;
}

int tg_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}
