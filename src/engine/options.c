/* Strategy options (tg_strategy_opt_t tables: parsed, range-checked, defaulted into a
 * strategy's config) and the automatic choice of a strategy, over the table of
 * strategies/strategy.c. */
#include "engine-impl.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tg_strategy_opts_default(tg_strategy_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->sampler_threads = 1;
}

/* ---------------------------------------------------------------- options */

static const tg_strategy_opt_t *find_opt(const tg_strategy_info_t *info, const char *name)
{
    for (int k = 0; k < info->num_opts; k++)
        if (!strcmp(info->opts[k].name, name)) return &info->opts[k];
    return NULL;
}

int tg_strategy_opt_kind(const char *name)
{
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_opt_t *op = find_opt(tg_strategy_info(i), name);
        if (op) return op->kind == TG_SOPT_FLAG ? 0 : 1;
    }
    return -1;
}

/* The strategies that have an option called name, for messages: "gnndrive, pagraph". */
static void owners(const char *name, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < tg_strategy_count() && n < len; i++)
        if (find_opt(tg_strategy_info(i), name))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "",
                                  tg_strategy_info(i)->name);
}

/* The index of word w in op->choices ("a|b|c"), or -1. */
static int64_t choice_index(const tg_strategy_opt_t *op, const char *w)
{
    size_t n = strlen(w);
    int64_t i = 0;
    for (const char *c = op->choices; c && *c; i++) {
        const char *bar = strchr(c, '|');
        size_t len = bar ? (size_t)(bar - c) : strlen(c);
        if (len == n && !strncmp(c, w, n)) return i;
        if (!bar) break;
        c = bar + 1;
    }
    return -1;
}

static int parse_real(const tg_strategy_opt_t *op, const char *v, double *out)
{
    if (!v) return tg_err(-EINVAL, "--%s needs a value", op->name);
    if (op->auto_ok && !strcmp(v, "auto")) {
        *out = -1.0;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d >= op->rmin && d <= op->rmax))
        return tg_err(-EINVAL, "--%s %s: expected a number in %g..%g%s", op->name, v, op->rmin,
                      op->rmax, op->auto_ok ? " or auto" : "");
    *out = d;
    return 0;
}

/* Decimal digits with an optional '-': no spaces, signs or bases strtoll would take. */
static int is_integer(const char *v)
{
    const char *p = v + (*v == '-');
    if (!*p) return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

static int parse_value(const tg_strategy_opt_t *op, const char *v, int64_t *out)
{
    if (op->kind == TG_SOPT_CHOICE) {
        if (!v) return tg_err(-EINVAL, "--%s needs a value", op->name);
        if ((*out = choice_index(op, v)) < 0)
            return tg_err(-EINVAL, "--%s %s: expected one of %s", op->name, v, op->choices);
        return 0;
    }
    if (op->kind == TG_SOPT_FLAG) {
        if (v) return tg_err(-EINVAL, "--%s takes no value", op->name);
        *out = 1;
        return 0;
    }
    if (!v) return tg_err(-EINVAL, "--%s needs a value", op->name);
    if (op->auto_ok && !strcmp(v, "auto")) {
        *out = -1;
        return 0;
    }
    if (op->kind == TG_SOPT_SIZE) {
        uint64_t u;
        int rc = tg_parse_size(v, &u);
        if (rc < 0) return tg_err_prefix(rc, "--%s", op->name);
        if (u > INT64_MAX || (int64_t)u < op->min || (int64_t)u > op->max)
            return tg_err(-EINVAL, "--%s must be between %lld and %lld bytes%s, got '%s'", op->name,
                          (long long)op->min, (long long)op->max, op->auto_ok ? " or auto" : "", v);
        *out = (int64_t)u;
        return 0;
    }
    /* One rule, one message, whatever is wrong with the value (as the CLI's tg_args_uint). */
    errno = 0;
    long long x = is_integer(v) ? strtoll(v, NULL, 10) : 0;
    if (!is_integer(v) || errno || x < op->min || x > op->max)
        return tg_err(-EINVAL, "--%s must be between %lld and %lld (an integer%s), got '%s'",
                      op->name, (long long)op->min, (long long)op->max,
                      op->auto_ok ? " or auto" : "", v);
    *out = x;
    return 0;
}

int tg_strategy_parse(const tg_strategy_info_t *info, const tg_strategy_arg_t *args, int n,
                      void *cfg, int note)
{
    if (info->config_size) memset(cfg, 0, info->config_size);
    for (int k = 0; k < info->num_opts; k++) {
        if (info->opts[k].kind == TG_SOPT_REAL)
            memcpy((char *)cfg + info->opts[k].offset, &info->opts[k].rdef, sizeof(double));
        else
            *(int64_t *)((char *)cfg + info->opts[k].offset) = info->opts[k].def;
    }
    for (int i = 0; i < n; i++) {
        const tg_strategy_opt_t *op = find_opt(info, args[i].name);
        if (!op) {
            char who[128];
            owners(args[i].name, who, sizeof who);
            if (!who[0])
                return tg_err(-EINVAL, "--%s is not an option of any strategy", args[i].name);
            if (note)
                tg_log_info("--%s is an option of %s; strategy %s ignores it", args[i].name, who,
                            info->name);
            continue;
        }
        int rc;
        if (op->kind == TG_SOPT_REAL) {
            double d = 0;
            if ((rc = parse_real(op, args[i].value, &d)) < 0)
                return tg_err_prefix(rc, "strategy %s", info->name);
            memcpy((char *)cfg + op->offset, &d, sizeof d);
            continue;
        }
        int64_t v;
        rc = parse_value(op, args[i].value, &v);
        if (rc < 0) return tg_err_prefix(rc, "strategy %s", info->name);
        *(int64_t *)((char *)cfg + op->offset) = v;
    }
    return 0;
}

/* ---------------------------------------------------------------- the automatic choice */

int tg_strategy_choose(const tg_dataset_t *ds, uint64_t mem_bytes, uint64_t extra_bytes,
                       uint64_t auto_extra, const tg_strategy_opts_t *base,
                       const tg_strategy_arg_t *args, int nargs, const tg_strategy_i **out,
                       char *why, size_t why_len)
{
    char items[512], a[32], b[32], c[32];
    uint64_t room = mem_bytes ? mem_bytes : tg_phys_mem_bytes() / 4;
    const tg_strategy_i *ooc = NULL;
    uint64_t need = 0;
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_i *si = tg_strategy_at(i);
        if ((si->info.caps & TG_STRAT_AUTO_OOC) && !ooc) ooc = si;
        if (!(si->info.caps & TG_STRAT_IN_RAM)) continue;
        void *cfg = calloc(1, si->info.config_size + 1);
        if (!cfg) return tg_err(-ENOMEM, "out of memory");
        tg_strategy_opts_t o = *base;
        o.cfg = cfg;
        int rc = tg_strategy_parse(&si->info, args, nargs, cfg, 0);
        if (rc == 0) need = si->min_bytes(ds, &o, items, sizeof items) + extra_bytes;
        uint64_t all = need + auto_extra; /* with the model and its batches */
        free(cfg);
        if (rc < 0) return rc;
        if (all <= room) {
            *out = si;
            snprintf(why, why_len,
                     "graph and features (%s) and the model with its batches (%s) fit in %s %s",
                     tg_fmt_bytes(need, a, sizeof a), tg_fmt_bytes(auto_extra, c, sizeof c),
                     mem_bytes ? "--mem" : "a quarter of RAM,", tg_fmt_bytes(room, b, sizeof b));
            return 0;
        }
    }
    if (!ooc) return tg_err(-EINVAL, "no out-of-core strategy in the table");
    *out = ooc;
    snprintf(why, why_len,
             "graph and features (%s) and the model with its batches (%s) do not fit in %s %s",
             tg_fmt_bytes(need, a, sizeof a), tg_fmt_bytes(auto_extra, c, sizeof c),
             mem_bytes ? "--mem" : "a quarter of RAM,", tg_fmt_bytes(room, b, sizeof b));
    return 0;
}
