/* The table of strategies, the automatic choice, and what several strategies share: the counting
 * adjacency, the gather pass on the pipeline (memory, mmap) and the kernel's I/O counters. */
#include "../engine-impl.h"
#include "../pipeline.h"

#include <pthread.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const tg_strategy_i *const strategies[] = {
    &tg_strategy_memory, &tg_strategy_mmap,    &tg_strategy_gnndrive, &tg_strategy_pagraph,
    &tg_strategy_ginex,  &tg_strategy_diskgnn, &tg_strategy_hier,     &tg_strategy_gids};

#define NSTRAT (sizeof strategies / sizeof strategies[0])

void tg_strategy_opts_default(tg_strategy_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->sampler_threads = 1;
}

int tg_strategy_count(void)
{
    return (int)NSTRAT;
}

const tg_strategy_info_t *tg_strategy_info(int i)
{
    return i >= 0 && (size_t)i < NSTRAT ? &strategies[i]->info : NULL;
}

const tg_strategy_info_t *tg_strategy_info_find(const char *name)
{
    for (size_t i = 0; i < NSTRAT; i++)
        if (!strcmp(name, strategies[i]->info.name)) return &strategies[i]->info;
    return NULL;
}

static char names_buf[256];

static void names_build(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NSTRAT && n < sizeof names_buf; i++)
        n += (size_t)snprintf(names_buf + n, sizeof names_buf - n, "%s%s", i ? ", " : "",
                              strategies[i]->info.name);
}

const char *tg_strategy_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, names_build);
    return names_buf;
}

int tg_strategy_find(const char *name, const tg_strategy_i **out)
{
    for (size_t i = 0; i < NSTRAT; i++)
        if (!strcmp(name, strategies[i]->info.name)) {
            *out = strategies[i];
            return 0;
        }
    return tg_err(-EINVAL, "unknown strategy '%s', expected auto, %s", name, tg_strategy_names());
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
    for (size_t i = 0; i < NSTRAT; i++) {
        const tg_strategy_opt_t *op = find_opt(&strategies[i]->info, name);
        if (op) return op->kind == TG_SOPT_FLAG ? 0 : 1;
    }
    return -1;
}

/* The strategies that have an option called name, for messages: "gnndrive, pagraph". */
static void owners(const char *name, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NSTRAT && n < len; i++)
        if (find_opt(&strategies[i]->info, name))
            n +=
                (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", strategies[i]->info.name);
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
    int rc;
    if (op->kind == TG_SOPT_SIZE) {
        uint64_t u;
        if ((rc = tg_parse_size(v, &u)) < 0) return tg_err_prefix(rc, "--%s", op->name);
        if (u > INT64_MAX) return tg_err(-EINVAL, "--%s %s: too large", op->name, v);
        *out = (int64_t)u;
    } else if ((rc = tg_parse_i64(v, out, op->name)) < 0) {
        return rc;
    }
    if (*out < op->min || *out > op->max)
        return tg_err(-EINVAL, "--%s %s out of range, expected %lld..%lld%s", op->name, v,
                      (long long)op->min, (long long)op->max, op->auto_ok ? " or auto" : "");
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
    for (size_t i = 0; i < NSTRAT; i++) {
        const tg_strategy_i *si = strategies[i];
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

/* ---------------------------------------------------------------- counting adjacency */

typedef struct {
    tg_adj_t *inner;
    size_t index_bytes;
    _Atomic uint64_t *counter;
    int owns; /* destroys inner with the wrapper */
} counting_t;

static int counting_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    counting_t *c = adj->impl;
    atomic_fetch_add_explicit(c->counter, (uint64_t)n * c->index_bytes, memory_order_relaxed);
    return tg_adj_read(c->inner, pos, n, out);
}

static void counting_destroy(tg_adj_t *adj)
{
    counting_t *c = adj->impl;
    if (c->owns) tg_adj_destroy(c->inner);
    free(c);
    free(adj);
}

static const tg_adj_i counting_iface = {"counting", counting_read, counting_destroy};

static int counting_new(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                        _Atomic uint64_t *counter, int owns)
{
    *out = NULL;
    tg_adj_t *w = calloc(1, sizeof *w);
    counting_t *c = calloc(1, sizeof *c);
    if (!w || !c) {
        free(w);
        free(c);
        if (owns) tg_adj_destroy(adj);
        return tg_err(-ENOMEM, "adjacency: out of memory");
    }
    c->owns = owns;
    c->inner = adj;
    c->index_bytes = index_bytes;
    c->counter = counter;
    w->iface = &counting_iface;
    w->num_nodes = adj->num_nodes;
    w->num_edges = adj->num_edges;
    w->indptr = adj->indptr;
    w->impl = c;
    *out = w;
    return 0;
}

int tg_adj_counting_wrap(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter)
{
    return counting_new(out, adj, index_bytes, counter, 1);
}

int tg_adj_counting_view(tg_adj_t **out, tg_adj_t *adj, size_t index_bytes,
                         _Atomic uint64_t *counter)
{
    return counting_new(out, adj, index_bytes, counter, 0);
}

/* ---------------------------------------------------------------- kernel I/O counters */

void tg_proc_io_sample(tg_proc_io_t *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen("/proc/self/io", "r");
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "read_bytes:", 11)) {
                s->read_bytes = strtoull(line + 11, NULL, 10);
                s->have_read_bytes = 1;
            }
        fclose(f);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) s->major_faults = (uint64_t)ru.ru_majflt;
    /* Field 42 of /proc/self/stat: aggregated block I/O delays in clock ticks. It stays 0 unless
     * the kernel's delay accounting is on (kernel.task_delayacct), so it only counts then. */
    int on = 0;
    f = fopen("/proc/sys/kernel/task_delayacct", "r");
    if (f) {
        on = fgetc(f) == '1';
        fclose(f);
    }
    if (!on) return;
    f = fopen("/proc/self/stat", "r");
    if (!f) return;
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces: count after it */
    if (!p) return;
    int field = 2;
    for (char *q = p + 1; *q; q++)
        if (*q == ' ' && ++field == 42) {
            s->blkio_s = (double)strtoull(q + 1, NULL, 10) / (double)sysconf(_SC_CLK_TCK);
            s->have_blkio = 1;
            break;
        }
}

void tg_proc_io_delta(const tg_proc_io_t *a, const tg_proc_io_t *b, tg_pass_stats_t *st)
{
    if (!a->have_read_bytes || !b->have_read_bytes) return;
    st->have_io = 1;
    st->io_read_bytes = b->read_bytes - a->read_bytes;
    /* Without readahead (MADV_RANDOM) each major fault reads one page: one request. */
    st->io_requests = b->major_faults - a->major_faults;
    if (a->have_blkio && b->have_blkio) {
        st->have_io_wait = 1;
        st->io_wait_s = b->blkio_s - a->blkio_s;
    }
}

/* ---------------------------------------------------------------- the gather pass */

tg_sloader_opts_t tg_pass_sloader_opts(const tg_pass_t *p, tg_adj_t *adj, int sampler_threads,
                                       size_t prefetch)
{
    return (tg_sloader_opts_t){.adj = adj,
                               .num_layers = p->num_layers,
                               .fanouts = p->fanouts,
                               .seeds = p->seeds,
                               .num_seeds = p->num_seeds,
                               .batch_size = p->batch_size,
                               .seed = p->seed,
                               .epoch = p->epoch,
                               .num_threads = sampler_threads,
                               .prefetch = prefetch,
                               .first_batch = p->first_batch,
                               .sampler = p->sampler};
}

int tg_gather_pass_in_flight(int sampler_threads, size_t prefetch)
{
    /* each sampler thread: prefetch queued + one gathered and waiting to be queued; the
     * trainer's (it frees it itself) */
    return TG_MAX(sampler_threads, 1) * (int)(prefetch + 1) + 1;
}

int tg_gather_pass(tg_run_t *r, const tg_pass_t *p, int sampler_threads, size_t prefetch,
                   tg_gather_fn gather, void *gctx, tg_pass_stats_t *st)
{
    tg_pipe_opts_t po = {.pass = p,
                         .adj = r->adj,
                         .dim = r->store->dim,
                         .sampler_threads = sampler_threads,
                         .prefetch = prefetch,
                         .gather = gather,
                         .gather_ctx = gctx,
                         .queue_depth = 1,
                         .in_order = 1};
    tg_proc_io_t a, b;
    tg_proc_io_sample(&a);
    int rc = tg_pipe_run(&po, st);
    tg_proc_io_sample(&b);
    tg_proc_io_delta(&a, &b, st);
    return rc;
}

/* ---------------------------------------------------------------- running a pass */

int tg_run_pass(tg_run_t *r, const tg_pass_t *p, tg_pass_stats_t *st)
{
    return r->strat_i->pass(r->strat, p, st);
}
