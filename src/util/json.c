/* One-object-per-line JSON writer for --json output. */
#include "tiergnn/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void put(tg_json_t *j, const char *s, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1)
            cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (!nb) return; /* drop output rather than crash; JSON lines are diagnostics */
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = 0;
}

static void puts_(tg_json_t *j, const char *s)
{
    put(j, s, strlen(s));
}

static void put_escaped(tg_json_t *j, const char *s)
{
    put(j, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            put(j, tmp, 2);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            puts_(j, tmp);
        } else {
            put(j, (const char *)&c, 1);
        }
    }
    put(j, "\"", 1);
}

static void key(tg_json_t *j, const char *k)
{
    if (j->n++) put(j, ",", 1);
    put_escaped(j, k);
    put(j, ":", 1);
}

void tg_json_begin(tg_json_t *j)
{
    memset(j, 0, sizeof *j);
    put(j, "{", 1);
}

void tg_json_int(tg_json_t *j, const char *k, int64_t v)
{
    char b[32];
    key(j, k);
    snprintf(b, sizeof b, "%lld", (long long)v);
    puts_(j, b);
}

void tg_json_uint(tg_json_t *j, const char *k, uint64_t v)
{
    char b[32];
    key(j, k);
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    puts_(j, b);
}

void tg_json_num(tg_json_t *j, const char *k, double v)
{
    char b[40];
    key(j, k);
    if (!isfinite(v)) {
        puts_(j, "null");
        return;
    }
    snprintf(b, sizeof b, "%.6g", v);
    puts_(j, b);
}

void tg_json_str(tg_json_t *j, const char *k, const char *v)
{
    key(j, k);
    put_escaped(j, v ? v : "");
}

void tg_json_bool(tg_json_t *j, const char *k, int v)
{
    key(j, k);
    puts_(j, v ? "true" : "false");
}

void tg_json_raw(tg_json_t *j, const char *k, const char *raw)
{
    key(j, k);
    puts_(j, raw);
}

void tg_json_end(tg_json_t *j, FILE *f, char **text)
{
    put(j, "}", 1);
    if (f && j->buf) {
        fprintf(f, "%s\n", j->buf);
        fflush(f);
    }
    if (text)
        *text = j->buf;
    else
        free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}
