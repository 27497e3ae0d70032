/* A pass's figures as the engine reports them (engine-impl.h, "a pass's figures"): the tiers,
 * summing passes, the epoch line's pass part, and the strategy's own part through its report
 * hook. The engine's files call these and never name a strategy or its figures. */
#include "engine-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int tg_pass_tier_add(tg_pass_stats_t *st, const char *name, uint64_t lookups, uint64_t hits,
                     uint64_t bytes)
{
    if (st->ntiers >= TG_PASS_MAX_TIERS) return -ENOSPC;
    int t = st->ntiers++;
    snprintf(st->tiers[t].name, sizeof st->tiers[t].name, "%s", name);
    st->tiers[t].lookups = lookups;
    st->tiers[t].hits = hits;
    st->tiers[t].bytes = bytes;
    return 0;
}

/* The tiers of add into sum, by name: the same tier of several passes is one. */
static void tiers_add(tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    for (int t = 0; t < add->ntiers; t++) {
        int u = 0;
        while (u < sum->ntiers && strcmp(sum->tiers[u].name, add->tiers[t].name))
            u++;
        if (u == sum->ntiers) {
            (void)tg_pass_tier_add(sum, add->tiers[t].name, add->tiers[t].lookups,
                                   add->tiers[t].hits, add->tiers[t].bytes);
            continue;
        }
        sum->tiers[u].lookups += add->tiers[t].lookups;
        sum->tiers[u].hits += add->tiers[t].hits;
        sum->tiers[u].bytes += add->tiers[t].bytes;
    }
}

void tg_pass_stats_add(const tg_run_t *r, tg_pass_stats_t *sum, const tg_pass_stats_t *add)
{
    sum->steps += add->steps;
    sum->sample_s += add->sample_s;
    sum->gather_s += add->gather_s;
    sum->wait_s += add->wait_s;
    sum->release_s += add->release_s;
    sum->batch_bytes_peak = TG_MAX(sum->batch_bytes_peak, add->batch_bytes_peak);
    sum->have_io |= add->have_io;
    sum->io_requests += add->io_requests;
    sum->io_read_bytes += add->io_read_bytes;
    sum->have_io_wait |= add->have_io_wait;
    sum->io_wait_s += add->io_wait_s;
    sum->have_cache |= add->have_cache;
    sum->cache_lookups += add->cache_lookups;
    sum->cache_hits += add->cache_hits;
    tiers_add(sum, add);
    sum->have_ncache |= add->have_ncache;
    sum->ncache_lookups += add->ncache_lookups;
    sum->ncache_hits += add->ncache_hits;
    sum->ncache_bytes = TG_MAX(sum->ncache_bytes, add->ncache_bytes);
    if (r->strat_i->own_add) r->strat_i->own_add(sum, add);
}

const char *tg_pass_tiers_json(const tg_pass_stats_t *st, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int t = 0; t < st->ntiers && n < len; t++)
        n += (size_t)snprintf(
            buf + n, len - n, "%s{\"name\":\"%s\",\"lookups\":%llu,\"hits\":%llu,\"bytes\":%llu}",
            t ? "," : "", st->tiers[t].name, (unsigned long long)st->tiers[t].lookups,
            (unsigned long long)st->tiers[t].hits, (unsigned long long)st->tiers[t].bytes);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

const char *tg_pass_ncache_json(const tg_pass_stats_t *st, char *buf, size_t len)
{
    double hit = st->ncache_lookups ? (double)st->ncache_hits / (double)st->ncache_lookups : 0;
    snprintf(buf, len, "{\"bytes\":%llu,\"lookups\":%llu,\"hits\":%llu,\"hit_ratio\":%.6f}",
             (unsigned long long)st->ncache_bytes, (unsigned long long)st->ncache_lookups,
             (unsigned long long)st->ncache_hits, hit);
    return buf;
}

void tg_pass_report(const tg_run_t *r, const tg_pass_stats_t *st, tg_json_t *j, char *line,
                    size_t len)
{
    if (r->strat_i->report) r->strat_i->report(st, j, line, len);
}

/* Appends printf-style text to the NUL-terminated line (len bytes in all). */
static void line_add(char *line, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line_add(char *line, size_t len, const char *fmt, ...)
{
    if (!line) return;
    size_t l = strlen(line);
    if (l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + l, len - l, fmt, ap);
    va_end(ap);
}

void tg_pass_line(const tg_run_t *r, const tg_pass_stats_t *st, uint64_t needed, char *line,
                  size_t len)
{
    if (st->have_io) {
        char a[32], b[32], w[32] = "?";
        if (st->have_io_wait) snprintf(w, sizeof w, "%.2f s", st->io_wait_s);
        line_add(line, len, "; io %llu req, %s read / %s needed, wait %s",
                 (unsigned long long)st->io_requests, tg_fmt_bytes(st->io_read_bytes, a, sizeof a),
                 tg_fmt_bytes(needed, b, sizeof b), w);
        if (st->have_cache)
            line_add(line, len, ", hit ratio %.3f",
                     st->cache_lookups ? (double)st->cache_hits / (double)st->cache_lookups : NAN);
    }
    tg_pass_report(r, st, NULL, line, len);
    if (st->have_ncache)
        line_add(line, len, "; neighbour cache hit ratio %.3f",
                 st->ncache_lookups ? (double)st->ncache_hits / (double)st->ncache_lookups : 0.0);
}
