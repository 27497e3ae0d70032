/* The bench's reports: bench.csv, bench.md and bench.svg, one row per run, made the same way for
 * every strategy (docs/BENCH.md describes the columns). Each file is composed in memory and
 * written atomically. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench-impl.h"

#define MiB (1024.0 * 1024.0)

/* ================================================================ text */

/* Appends printf output to a growing string; on out of memory the string stays as it was and
 * *oom is set (checked once at the end). */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) TG_PRINTF(2, 3);
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

static int sb_write(sbuf_t *b, const char *path)
{
    if (b->oom) return tg_err(-ENOMEM, "%s: out of memory composing the report", path);
    return tg_write_file_atomic(path, b->s ? b->s : "", b->len);
}
/* ================================================================ reports */

static void fmt_num(char *buf, size_t len, double v, const char *fmt)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, fmt, v);
}

static void fmt_mib(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.1f MiB", v / MiB);
}

/* CSV field: quoted when it holds a comma, quote or newline. */
static void csv_field(sbuf_t *b, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        sb_printf(b, "%s", s);
        return;
    }
    sb_printf(b, "\"");
    for (const char *p = s; *p; p++)
        sb_printf(b, *p == '"' ? "\"\"" : "%c", *p == '\n' || *p == '\r' ? ' ' : *p);
    sb_printf(b, "\"");
}

static void csv_num(sbuf_t *b, double v, const char *fmt)
{
    char t[64];
    fmt_num(t, sizeof t, v, fmt);
    sb_printf(b, ",%s", t);
}

static const char csv_header[] =
    "strategy,status,exit_status,epochs_run,epochs_timed,epoch_time_s,first_epoch_s,sample_s,"
    "gather_s,train_s,wait_s,io_wait_s,io_requests_per_epoch,disk_read_bytes_per_epoch,"
    "needed_bytes_per_epoch,read_amplification,cache_hit_ratio,peak_rss_bytes,cgroup_limit_bytes,"
    "cgroup_peak_bytes,kernel_read_bytes,test_acc,valid_acc,best_epoch,wall_s,resident_at_start,"
    "last_error,gather_bytes_per_s,predicted_epoch_s,probe_iops,probe_seq_bytes_per_s\n";

static void timed_range(const tg_bench_run_t *r, char *buf, size_t len)
{
    if (r->nep == 0)
        snprintf(buf, len, "n/a");
    else if (r->timed_from >= r->nep)
        snprintf(buf, len, "%zu", r->nep);
    else
        snprintf(buf, len, "%llu-%zu", (unsigned long long)r->timed_from, r->nep);
}

int tg_bench_write_csv(const char *path, const tg_bench_run_t *runs, int nruns)
{
    sbuf_t b = {0};
    sb_printf(&b, "%s", csv_header);
    for (int i = 0; i < nruns; i++) {
        const tg_bench_run_t *r = &runs[i];
        char t[64];
        csv_field(&b, r->name);
        sb_printf(&b, ",%s", tg_bench_run_status(r));
        if (r->ran)
            sb_printf(&b, ",%d", r->exit_code);
        else
            sb_printf(&b, ",n/a");
        sb_printf(&b, ",%zu", r->nep);
        timed_range(r, t, sizeof t);
        sb_printf(&b, ",%s", t);
        csv_num(&b, r->s_epoch, "%.6g");
        csv_num(&b, r->s_first, "%.6g");
        csv_num(&b, r->s_sample, "%.6g");
        csv_num(&b, r->s_gather, "%.6g");
        csv_num(&b, r->s_train, "%.6g");
        csv_num(&b, r->s_wait, "%.6g");
        csv_num(&b, r->s_io_wait, "%.6g");
        csv_num(&b, r->s_io_req, "%.0f");
        csv_num(&b, r->s_read, "%.0f");
        csv_num(&b, r->s_need, "%.0f");
        csv_num(&b, r->s_amp, "%.4f");
        csv_num(&b, r->s_hit, "%.4f");
        csv_num(&b, r->s_peak_rss, "%.0f");
        csv_num(&b, r->have_cg ? r->cg_limit : NAN, "%.0f");
        csv_num(&b, r->have_cg ? r->cg_peak : NAN, "%.0f");
        csv_num(&b, r->s_kernel_read, "%.0f");
        csv_num(&b, r->have_final ? r->test_acc : NAN, "%.4f");
        csv_num(&b, r->have_final ? r->valid_acc : NAN, "%.4f");
        csv_num(&b, r->have_final ? r->best_epoch : NAN, "%.0f");
        csv_num(&b, r->ran ? r->wall_s : NAN, "%.3f");
        csv_num(&b, r->ran ? r->resident_start : NAN, "%.4f");
        sb_printf(&b, ",");
        csv_field(&b, tg_bench_run_ok(r) ? "" : r->last_err);
        csv_num(&b, r->s_gather_bw, "%.0f");
        csv_num(&b, r->predicted_s, "%.6g");
        csv_num(&b, r->probe_iops, "%.0f");
        csv_num(&b, r->probe_seq, "%.0f");
        sb_printf(&b, "\n");
    }
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}

/* ---------------------------------------------------------------- bench.json */

/* tg_json's object as text (NULL on out of memory: the caller's sbuf turns it into an error). */
static char *json_text(tg_json_t *j)
{
    char *t = NULL;
    tg_json_end(j, NULL, &t);
    return t;
}

/* A count or a byte figure held in a double: all its digits (tg_json_num keeps 6), null for NAN. */
static void json_count(tg_json_t *j, const char *key, double v)
{
    if (isnan(v) || isinf(v) || v < 0)
        tg_json_raw(j, key, "null");
    else
        tg_json_uint(j, key, (uint64_t)llround(v));
}

static char *json_footprint(const tg_bench_report_t *c)
{
    const tg_bench_footprint_t *fp = c->fp;
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_uint(&j, "epoch", c->fp_epoch + 1);
    tg_json_uint(&j, "batches", fp->batches);
    tg_json_uint(&j, "distinct_nodes", fp->distinct_nodes);
    tg_json_uint(&j, "batch_nodes", fp->batch_nodes);
    tg_json_uint(&j, "max_batch_nodes", fp->max_batch_nodes);
    tg_json_uint(&j, "row_bytes", fp->row_bytes);
    tg_json_bool(&j, "whole_graph", fp->whole_graph);
    return json_text(&j);
}

static char *json_bounds(const tg_bench_report_t *c)
{
    const tg_bench_bounds_t *bd = c->bd;
    const tg_flops_t *f = &c->fp->flops;
    int have_b = !isnan(bd->belady_bytes), have_f = !isnan(bd->epoch_flops);
    tg_json_t j;
    tg_json_begin(&j);
    json_count(&j, "seq_read_bytes_per_s", bd->seq_bytes_per_s);
    json_count(&j, "distinct_bytes", bd->distinct_bytes);
    tg_json_num(&j, "io_s", bd->io_s);
    tg_json_num(&j, "io_cached_s", c->probe_ok ? c->lb_cached_s : NAN);
    tg_json_uint(&j, "cache_bytes", bd->cache_bytes);
    tg_json_str(&j, "cache_from", c->cache_from[0] ? c->cache_from : "--mem");
    tg_json_uint(&j, "cache_entries", bd->cache_entries);
    json_count(&j, "accesses", have_b ? (double)bd->accesses : NAN);
    json_count(&j, "belady_misses", have_b ? (double)bd->belady_misses : NAN);
    json_count(&j, "belady_bytes", bd->belady_bytes);
    tg_json_num(&j, "belady_s", bd->belady_s);
    tg_json_num(&j, "belady_sim_s", bd->belady_sim_s);
    tg_json_str(&j, "belady_note", c->belady_note);
    json_count(&j, "epoch_flops", bd->epoch_flops);
    json_count(&j, "fwd_gemm_flops", have_f ? (double)f->fwd_gemm : NAN);
    json_count(&j, "fwd_graph_flops", have_f ? (double)f->fwd_graph : NAN);
    json_count(&j, "bwd_gemm_flops", have_f ? (double)f->bwd_gemm : NAN);
    json_count(&j, "bwd_graph_flops", have_f ? (double)f->bwd_graph : NAN);
    json_count(&j, "sgemm_flops_per_s", bd->gemm_flops_per_s);
    tg_json_uint(&j, "sgemm_m", bd->gemm_m);
    tg_json_uint(&j, "sgemm_k", bd->gemm_k);
    tg_json_uint(&j, "sgemm_n", bd->gemm_n);
    tg_json_int(&j, "sgemm_threads", c->o->threads);
    tg_json_num(&j, "compute_s", bd->compute_s);
    tg_json_str(&j, "compute_note", c->compute_note);
    return json_text(&j);
}

/* keys of an epoch object, in TG_BENCH_E_* order */
static const char *const json_epoch_keys[TG_BENCH_E_COUNT] = {
    "time_s",          "sample_s",        "gather_s",      "compute_s",
    "wait_s",          "io_wait_s",       "io_requests",   "io_read_bytes",
    "io_needed_bytes", "cache_hit_ratio", "peak_rss_bytes"};

static char *json_run(const tg_bench_run_t *r, sbuf_t *eps)
{
    eps->len = 0;
    sb_printf(eps, "[");
    for (size_t e = 0; e < r->nep; e++) {
        tg_json_t j;
        tg_json_begin(&j);
        tg_json_uint(&j, "epoch", e + 1);
        for (int k = 0; k < TG_BENCH_E_COUNT; k++) {
            /* counts and bytes with all their digits */
            int count = k == TG_BENCH_E_IO_REQ || k == TG_BENCH_E_IO_READ ||
                        k == TG_BENCH_E_IO_NEED || k == TG_BENCH_E_PEAK_RSS;
            (count ? json_count : tg_json_num)(&j, json_epoch_keys[k], r->ep[e].v[k]);
        }
        char *t = json_text(&j);
        sb_printf(eps, "%s%s", e ? "," : "", t ? t : "{}");
        eps->oom |= !t;
        free(t);
    }
    sb_printf(eps, "]");
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_str(&j, "strategy", r->name);
    /* the --strategies item's parts: what --strategy got and its own options after it */
    char opts[2 * TG_BENCH_NAME_MAX] = "";
    for (int k = 0, len = 0; k < r->num_opts; k++)
        len +=
            snprintf(opts + len, sizeof opts - (size_t)len, "%s%s", k ? " " : "", r->opt_argv[k]);
    tg_json_str(&j, "status", tg_bench_run_status(r));
    tg_json_str(&j, "train_strategy", r->strategy);
    tg_json_str(&j, "train_options", opts);
    tg_json_num(&j, "exit_status", r->ran ? r->exit_code : NAN);
    tg_json_num(&j, "epoch_time_s", r->s_epoch);
    tg_json_num(&j, "first_epoch_s", r->s_first);
    tg_json_num(&j, "predicted_epoch_s", r->predicted_s);
    json_count(&j, "probe_iops", r->probe_iops);
    json_count(&j, "probe_seq_bytes_per_s", r->probe_seq);
    json_count(&j, "gather_bytes_per_s", r->s_gather_bw);
    tg_json_num(&j, "test_acc", r->have_final ? r->test_acc : NAN);
    json_count(&j, "peak_rss_bytes", r->s_peak_rss);
    json_count(&j, "cgroup_peak_bytes", r->have_cg ? r->cg_peak : NAN);
    json_count(&j, "budget_rest_bytes", r->budget_rest);
    tg_json_str(&j, "last_error", tg_bench_run_ok(r) ? "" : r->last_err);
    tg_json_raw(&j, "epochs", eps->s && !eps->oom ? eps->s : "[]");
    return json_text(&j);
}

int tg_bench_write_json(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                        int nruns)
{
    sbuf_t b = {0}, list = {0}, eps = {0};
    sb_printf(&list, "[");
    for (int i = 0; i < nruns; i++) {
        char *t = json_run(&runs[i], &eps);
        sb_printf(&list, "%s%s", i ? "," : "", t ? t : "{}");
        list.oom |= !t || eps.oom;
        free(t);
    }
    sb_printf(&list, "]");
    char *fp = json_footprint(c), *bd = json_bounds(c);
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_str(&j, "dataset", c->o->dataset);
    tg_json_uint(&j, "mem_bytes", c->o->mem_bytes);
    tg_json_bool(&j, "cgroup_limited", c->cg_on);
    tg_json_uint(&j, "epochs", c->o->epochs);
    tg_json_str(&j, "train_command", c->train_cmd);
    tg_json_raw(&j, "footprint", fp ? fp : "{}");
    tg_json_raw(&j, "bounds", bd ? bd : "{}");
    tg_json_raw(&j, "runs", list.s && !list.oom ? list.s : "[]");
    char *t = json_text(&j);
    b.oom = !t || !fp || !bd || list.oom;
    if (t) sb_printf(&b, "%s\n", t);
    int rc = sb_write(&b, path);
    free(t);
    free(fp);
    free(bd);
    free(b.s);
    free(list.s);
    free(eps.s);
    return rc;
}

/* Markdown table cell text: '|' would end the cell. */
static void md_text(sbuf_t *b, const char *s)
{
    for (const char *p = s; *p; p++)
        sb_printf(b, *p == '|' ? "\\|" : "%c", *p);
}

static void write_lower_bound(sbuf_t *b, const tg_bench_report_t *c, const char *bullet)
{
    char t1[32], t2[32];
    const tg_bench_footprint_t *fp = c->fp;
    double distinct = (double)fp->distinct_nodes * (double)fp->row_bytes;
    double mem = (double)c->o->mem_bytes;
    sb_printf(b,
              "%sepoch %llu sampled as the runs sample it: %llu batches, %llu distinct input "
              "nodes x %llu bytes per row = %s of distinct feature rows (%s if nothing were "
              "reused across batches)\n",
              bullet, (unsigned long long)c->fp_epoch + 1, (unsigned long long)fp->batches,
              (unsigned long long)fp->distinct_nodes, (unsigned long long)fp->row_bytes,
              tg_fmt_bytes((uint64_t)distinct, t1, sizeof t1),
              tg_fmt_bytes(fp->batch_nodes * fp->row_bytes, t2, sizeof t2));
    if (c->probe_ok) {
        sb_printf(b,
                  "%ssequential read bandwidth %.0f MB/s (tg_io_probe, 1 MiB O_DIRECT reads at "
                  "depth 8, measured now on device %u:%u)\n",
                  bullet, c->probe->seq_bytes_per_s / 1e6, c->probe->dev_major,
                  c->probe->dev_minor);
        sb_printf(b,
                  "%s**I/O lower bound: %.3g s per epoch** (distinct feature bytes / bandwidth)\n",
                  bullet, c->lb_s);
        sb_printf(b,
                  "%sif all of --mem (%s) held feature rows from one epoch to the next: "
                  "max(0, distinct - mem) / bandwidth = %.3g s\n",
                  bullet, tg_fmt_bytes((uint64_t)mem, t1, sizeof t1), c->lb_cached_s);
    } else {
        sb_printf(b, "%sI/O lower bound: n/a (the device probe failed: %s)\n", bullet,
                  c->probe_err);
    }
}

static void write_belady(sbuf_t *b, const tg_bench_report_t *c, const char *bullet)
{
    const tg_bench_bounds_t *bd = c->bd;
    char t1[32], t2[32], from[160];
    if (c->cache_from[0])
        snprintf(from, sizeof from, "the largest `rest` the runs' budgets left for caches: %s's",
                 c->cache_from);
    else
        snprintf(from, sizeof from,
                 "all of --mem: no run reported its budget's split, and no run's caches can "
                 "exceed it");
    sb_printf(b, "%sfeature cache: %llu rows (%s, %s)\n", bullet,
              (unsigned long long)bd->cache_entries, tg_fmt_bytes(bd->cache_bytes, t1, sizeof t1),
              from);
    if (isnan(bd->belady_bytes)) {
        sb_printf(b, "%sBelady bound: n/a (%s)\n", bullet, c->belady_note);
        return;
    }
    sb_printf(b,
              "%sBelady-optimal, starting empty, it misses %llu of the epoch's %llu row accesses: "
              "%s to read (store/'s changeset simulator over the epoch's trace, %.2f s with "
              "sampling the trace again)\n",
              bullet, (unsigned long long)bd->belady_misses, (unsigned long long)bd->accesses,
              tg_fmt_bytes((uint64_t)bd->belady_bytes, t2, sizeof t2), bd->belady_sim_s);
    if (c->probe_ok)
        sb_printf(b, "%s**Belady bound: %.3g s per epoch** (those bytes / bandwidth)\n", bullet,
                  bd->belady_s);
    else
        sb_printf(b, "%sBelady bound: n/a (no bandwidth: %s)\n", bullet, c->probe_err);
}

static void write_compute(sbuf_t *b, const tg_bench_report_t *c, const char *bullet)
{
    const tg_bench_bounds_t *bd = c->bd;
    const tg_flops_t *f = &c->fp->flops;
    if (isnan(bd->epoch_flops)) {
        sb_printf(b, "%scompute bound: n/a (%s)\n", bullet, c->compute_note);
        return;
    }
    sb_printf(b,
              "%s%.4g floating-point operations in the epoch's training steps: forward %.4g "
              "(GEMMs %.4g, aggregation and attention %.4g), backward %.4g (GEMMs %.4g, the rest "
              "%.4g); element-wise work (biases, activations, dropout, loss, optimiser) not "
              "counted\n",
              bullet, bd->epoch_flops, (double)(f->fwd_gemm + f->fwd_graph), (double)f->fwd_gemm,
              (double)f->fwd_graph, (double)(f->bwd_gemm + f->bwd_graph), (double)f->bwd_gemm,
              (double)f->bwd_graph);
    if (isnan(bd->compute_s)) {
        sb_printf(b, "%scompute bound: n/a (the GEMM could not be timed: %s)\n", bullet,
                  c->compute_note);
        return;
    }
    sb_printf(b,
              "%sthe engine's GEMM (cblas_sgemm pieces over %d thread(s)) runs %.2f GFLOP/s on "
              "%u x %u x %u (the largest batch's layer-0 rows, feature width, hidden width), "
              "measured now\n",
              bullet, c->o->threads, bd->gemm_flops_per_s / 1e9, bd->gemm_m, bd->gemm_k,
              bd->gemm_n);
    sb_printf(b, "%s**compute bound: %.3g s per epoch** (operations / GEMM rate)\n", bullet,
              bd->compute_s);
}

static void ratio(char *buf, size_t len, double t, double bound)
{
    fmt_num(buf, len, bound > 0 ? t / bound : NAN, "%.2fx");
}

/* Every epoch of every run against the three bounds: how many times the bound it took. */
static void write_epochs_vs_bounds(sbuf_t *b, const tg_bench_report_t *c,
                                   const tg_bench_run_t *runs, int nruns)
{
    const tg_bench_bounds_t *bd = c->bd;
    char v[4][40];
    fmt_num(v[0], 40, bd->io_s, "%.3g s");
    fmt_num(v[1], 40, bd->belady_s, "%.3g s");
    fmt_num(v[2], 40, bd->compute_s, "%.3g s");
    sb_printf(b,
              "\n| strategy | epoch | epoch s | / I/O bound (%s) | / Belady bound (%s) | / compute "
              "bound (%s) |\n|---|--:|--:|--:|--:|--:|\n",
              v[0], v[1], v[2]);
    for (int i = 0; i < nruns; i++) {
        const tg_bench_run_t *r = &runs[i];
        for (size_t e = 0; e < r->nep; e++) {
            double t = r->ep[e].v[TG_BENCH_E_TIME];
            fmt_num(v[0], 40, t, "%.3f");
            ratio(v[1], 40, t, bd->io_s);
            ratio(v[2], 40, t, bd->belady_s);
            ratio(v[3], 40, t, bd->compute_s);
            sb_printf(b, "| ");
            md_text(b, r->name);
            sb_printf(b, " | %zu%s | %s | %s | %s | %s |\n", e + 1, e == 0 ? " (cold)" : "", v[0],
                      v[1], v[2], v[3]);
        }
    }
}

/* The report's first words: what X means, since every row depends on it. */
static void write_budget_note(sbuf_t *b, const tg_bench_report_t *c)
{
    char t1[32];
    const char *x = tg_fmt_bytes(c->o->mem_bytes, t1, sizeof t1);
    unsigned long long bytes = (unsigned long long)c->o->mem_bytes;
    if (c->cg_on)
        sb_printf(b,
                  "**Memory: %s for every strategy.** Each run gets `--mem %llu` and a cgroup "
                  "limited to the same %s: that is the whole process's budget (data, caches, "
                  "page cache, model, activations, batches in flight, the process itself), the "
                  "same total for every strategy, mmap included.\n\n",
                  x, bytes, x);
    else
        sb_printf(b,
                  "**Memory: --mem %s for every strategy, without a cgroup limit** (%s): the "
                  "runs were not held to %s; the page cache and whatever a run does not count "
                  "against --mem were unlimited.\n\n",
                  x, c->cg_note, x);
}

int tg_bench_write_md(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                      int nruns)
{
    sbuf_t b = {0};
    const tg_bench_opts_t *o = c->o;
    const tg_meta_t *m = &c->ds->meta;
    char t1[32];
    sb_printf(&b, "# tiergnn bench: %s\n\n", o->dataset);
    write_budget_note(&b, c);
    sb_printf(
        &b, "| strategy | status | epoch s | first epoch s | sample s | gather s | train s | "
            "wait s | I/O wait s | disk read / epoch | needed / epoch | read ampl. | gather MiB/s "
            "| hit ratio | peak RSS | cgroup peak | test acc | exit | predicted s |\n");
    sb_printf(&b,
              "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int i = 0; i < nruns; i++) {
        const tg_bench_run_t *r = &runs[i];
        char v[17][40], pred[40];
        fmt_num(pred, 40, r->predicted_s, "%.3f");
        fmt_num(v[0], 40, r->s_epoch, "%.3f");
        fmt_num(v[1], 40, r->s_first, "%.3f");
        fmt_num(v[2], 40, r->s_sample, "%.3f");
        fmt_num(v[3], 40, r->s_gather, "%.3f");
        fmt_num(v[4], 40, r->s_train, "%.3f");
        fmt_num(v[5], 40, r->s_wait, "%.3f");
        fmt_num(v[6], 40, r->s_io_wait, "%.3f");
        fmt_mib(v[7], 40, r->s_read);
        fmt_mib(v[8], 40, r->s_need);
        fmt_num(v[9], 40, r->s_amp, "%.3f");
        fmt_num(v[15], 40, r->s_gather_bw / MiB, "%.1f");
        fmt_num(v[10], 40, r->s_hit, "%.3f");
        fmt_mib(v[11], 40, r->s_peak_rss);
        fmt_mib(v[12], 40, r->have_cg ? r->cg_peak : NAN);
        fmt_num(v[13], 40, r->have_final ? r->test_acc : NAN, "%.4f");
        if (r->ran)
            snprintf(v[14], 40, "%d", r->exit_code);
        else
            snprintf(v[14], 40, "n/a");
        sb_printf(&b, "| ");
        md_text(&b, r->name);
        sb_printf(&b,
                  " | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                  "%s | %s | %s |\n",
                  tg_bench_run_status(r), v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8],
                  v[9], v[15], v[10], v[11], v[12], v[13], v[14], pred);
    }
    sb_printf(&b, "\n`predicted s`: the planner's steady epoch for the strategy with its default "
                  "options (diskgnn's at the disk budget the planner plans), from a profile of "
                  "this bench's settings (docs/STRATEGIES.md, \"The planner\"); ");
    md_text(&b, c->plan_note[0] ? c->plan_note : "no predictions");
    sb_printf(&b, ".\n");
    int nfail = 0;
    for (int i = 0; i < nruns; i++)
        nfail += !tg_bench_run_ok(&runs[i]);
    if (nfail) {
        sb_printf(&b,
                  "\nRuns that did not finish (last line of stderr, "
                  "`%s/<strategy>/bench-stderr.log`):\n\n",
                  o->out_dir);
        for (int i = 0; i < nruns; i++) {
            const tg_bench_run_t *r = &runs[i];
            if (tg_bench_run_ok(r)) continue;
            sb_printf(&b, "- **");
            md_text(&b, r->name);
            sb_printf(&b, "**: %s, exit status %d: ", tg_bench_run_status(r), r->exit_code);
            md_text(&b, r->last_err[0] ? r->last_err : "(no message)");
            sb_printf(&b, "\n");
        }
        int noom = 0;
        for (int i = 0; i < nruns; i++)
            noom += runs[i].oom_killed;
        if (noom)
            sb_printf(&b,
                      "\n`oom-killed`: the kernel's out-of-memory killer ended the run when its "
                      "cgroup reached the limit: the process (data, caches, page cache, model, "
                      "activations, batches, itself) did not fit in the %s it was given as "
                      "--mem.\n",
                      tg_fmt_bytes(o->mem_bytes, t1, sizeof t1));
    }
    sb_printf(&b, "\n## Lower bounds of an epoch\n\n");
    sb_printf(&b, "I/O lower bound:\n\n");
    write_lower_bound(&b, c, "- ");
    sb_printf(&b, "\nBelady bound:\n\n");
    write_belady(&b, c, "- ");
    sb_printf(&b, "\nCompute bound:\n\n");
    write_compute(&b, c, "- ");
    sb_printf(&b,
              "\nThe I/O and Belady bounds count feature rows only; a disk-resident graph also "
              "reads index bytes. The Belady bound starts from an empty cache, as a cold epoch "
              "does: a strategy that keeps its cache from one epoch to the next can read up to "
              "that cache's size less. Training overlaps reading, so an epoch takes at least the "
              "largest of the bounds that apply to it. Each epoch against the bounds (epoch "
              "time / bound):\n");
    write_epochs_vs_bounds(&b, c, runs, nruns);

    sb_printf(&b, "\n## Settings\n\n");
    sb_printf(&b, "- dataset: %s (%llu nodes, %llu edges, %u features %s = %s, indices %s)\n",
              o->dataset, (unsigned long long)m->num_nodes, (unsigned long long)m->num_edges,
              m->feat_dim, tg_feat_dtype_name(m->feat_dtype),
              tg_fmt_bytes(m->files[TG_FILE_FEATURES].size, t1, sizeof t1),
              tg_index_dtype_name(m->index_dtype));
    sb_printf(&b,
              "- --mem %s (%llu bytes), %llu epoch(s); epoch times are means over epochs %s, "
              "the first (cold) epoch is reported apart as \"first epoch\"\n",
              tg_fmt_bytes(o->mem_bytes, t1, sizeof t1), (unsigned long long)o->mem_bytes,
              (unsigned long long)o->epochs, o->epochs > 1 ? "2..N" : "1 (only one)");
    sb_printf(&b, "- each run: `%s`\n", c->train_cmd);
    if (c->cg_on)
        sb_printf(&b, "- cgroup limit: %s (%llu bytes) = --mem, via `%s`\n",
                  tg_fmt_bytes(o->mem_bytes, t1, sizeof t1), (unsigned long long)o->mem_bytes,
                  c->membudget);
    else
        sb_printf(&b, "- cgroup limit: **none** (%s); page cache and RSS were not limited\n",
                  c->cg_note);
    sb_printf(&b, "- cold start: %s\n",
              o->no_evict ? "no (--no-evict)"
                          : "dataset files dropped from the page cache before each run "
                            "(fdatasync + posix_fadvise DONTNEED; residency at start in "
                            "bench.csv)");
    sb_printf(&b, "- binary: %s\n", c->exe);
    sb_printf(&b, "\nColumns: docs/BENCH.md. n/a: the run did not report the value.\n");
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}

/* ---------------------------------------------------------------- the SVG chart */

static void xml_text(sbuf_t *b, const char *s, size_t max)
{
    size_t n = 0;
    for (const char *p = s; *p && n < max; p++, n++) {
        switch (*p) {
        case '&':
            sb_printf(b, "&amp;");
            break;
        case '<':
            sb_printf(b, "&lt;");
            break;
        case '>':
            sb_printf(b, "&gt;");
            break;
        case '"':
            sb_printf(b, "&quot;");
            break;
        default:
            if ((unsigned char)*p >= 0x20) sb_printf(b, "%c", *p);
        }
    }
    if (strlen(s) > max) sb_printf(b, "...");
}

/* A "nice" axis step (1, 2 or 5 times a power of ten) giving about 5 ticks up to max. */
static double nice_step(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static double nz(double v)
{
    return isnan(v) || v < 0 ? 0 : v;
}

#define SVG_W 980
#define SVG_LEFT 160
#define SVG_RIGHT 70
#define SVG_TOP 110
#define SVG_ROW 50

/* The three bounds as vertical lines, one label row each above the chart. */
static const struct {
    const char *name, *stroke, *dash;
} svg_bounds[3] = {{"I/O lower bound", "#000", "5,4"},
                   {"Belady bound", "#7b3294", "9,3"},
                   {"compute bound", "#1b7837", "2,3"}};

static void svg_bound_values(const tg_bench_report_t *c, double v[3])
{
    v[0] = c->probe_ok ? c->lb_s : NAN;
    v[1] = c->bd ? c->bd->belady_s : NAN;
    v[2] = c->bd ? c->bd->compute_s : NAN;
}

static void svg_rect(sbuf_t *b, double x, double y, double w, double h, const char *fill,
                     const char *title)
{
    if (w <= 0) return;
    sb_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">", x, y, w,
              h, fill);
    if (title) {
        sb_printf(b, "<title>");
        xml_text(b, title, 200);
        sb_printf(b, "</title>");
    }
    sb_printf(b, "</rect>\n");
}

/* The bounds as vertical lines from their label rows above the chart down to the axis. */
static void svg_bound_lines(sbuf_t *b, const double bv[3], double xmax, int axis_y)
{
    double pw = SVG_W - SVG_LEFT - SVG_RIGHT;
    for (int k = 0; k < 3; k++) {
        int ly = SVG_TOP - 54 + 16 * k; /* one label row per bound */
        const char *name = svg_bounds[k].name, *stroke = svg_bounds[k].stroke;
        if (isnan(bv[k])) {
            sb_printf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"%s\">%s: n/a</text>\n",
                      SVG_LEFT, ly, stroke, name);
            continue;
        }
        double x = SVG_LEFT + bv[k] / xmax * pw;
        int right = x > SVG_W - 200; /* near the right edge the label goes left of the line */
        sb_printf(b,
                  "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"%s\" "
                  "stroke-dasharray=\"%s\" stroke-width=\"1.5\"/>\n",
                  x, ly + 2, x, axis_y, stroke, svg_bounds[k].dash);
        sb_printf(b, "<text x=\"%.2f\" y=\"%d\" font-size=\"11\" fill=\"%s\"%s>%s %.3g s</text>\n",
                  right ? x - 4 : x + 4, ly, stroke, right ? " text-anchor=\"end\"" : "", name,
                  bv[k]);
    }
}

/* The thick bar's parts on the first row, the thin bar's on the second, the bounds' lines and
 * the epoch tick on the third. */
static void svg_legend(sbuf_t *b, int legend_y)
{
    static const char *const names[] = {
        "training (compute_s)", "waiting for batches (wait_s)", "other",
        "sampling (sample_s)",  "gathering (gather_s)",         "blocked on I/O (io_wait_s)"};
    static const char *const fills[] = {"#59a14f", "#e15759", "#bab0ac",
                                        "#4e79a7", "#f28e2b", "url(#hatch)"};
    for (int k = 0; k < 6; k++) {
        int row = k / 3, col = k % 3;
        double lx = SVG_LEFT + col * 250, ly = legend_y + row * 22;
        sb_printf(b,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"14\" height=\"12\" fill=\"%s\" "
                  "stroke=\"#666\" stroke-width=\"0.5\"/>\n<text x=\"%.2f\" y=\"%.2f\">%s</text>\n",
                  lx, ly, fills[k], lx + 20, ly + 11, names[k]);
    }
    double ly = legend_y + 50;
    for (int k = 0; k < 3; k++) {
        double lx = SVG_LEFT + k * 190;
        sb_printf(b,
                  "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                  "stroke-width=\"1.5\" stroke-dasharray=\"%s\"/>\n"
                  "<text x=\"%.2f\" y=\"%.2f\">%s</text>\n",
                  lx, ly, lx + 16, ly, svg_bounds[k].stroke, svg_bounds[k].dash, lx + 22, ly + 4,
                  svg_bounds[k].name);
    }
    double lx = SVG_LEFT + 3 * 190;
    sb_printf(b,
              "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#222\" "
              "stroke-width=\"2\"/>\n<text x=\"%.2f\" y=\"%.2f\">one epoch</text>\n",
              lx + 7, ly - 6, lx + 7, ly + 6, lx + 22, ly + 4);
}

int tg_bench_write_svg(const char *path, const tg_bench_report_t *c, const tg_bench_run_t *runs,
                       int nruns)
{
    sbuf_t b = {0};
    double xmax = 0, bv[3];
    for (int i = 0; i < nruns; i++) {
        const tg_bench_run_t *r = &runs[i];
        xmax = TG_MAX(xmax, nz(r->s_epoch));
        xmax = TG_MAX(xmax, nz(r->s_sample) + nz(r->s_gather));
        for (size_t e = 0; e < r->nep; e++)
            xmax = TG_MAX(xmax, nz(r->ep[e].v[TG_BENCH_E_TIME]));
    }
    svg_bound_values(c, bv);
    for (int k = 0; k < 3; k++)
        xmax = TG_MAX(xmax, nz(bv[k]));
    if (!(xmax > 0)) xmax = 1;
    double step = nice_step(xmax);
    xmax = ceil(xmax / step) * step;
    double pw = SVG_W - SVG_LEFT - SVG_RIGHT;
    int legend_y = SVG_TOP + nruns * SVG_ROW + 40;
    int height = legend_y + 92;
#define X(v) (SVG_LEFT + (v) / xmax * pw)
    sb_printf(&b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 "
              "%d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n",
              SVG_W, height, SVG_W, height);
    sb_printf(
        &b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f0d0d0\"/>"
            "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b22222\" stroke-width=\"3\"/>"
            "</pattern></defs>\n");
    sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    sb_printf(&b,
              "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Epoch time per "
              "strategy: ",
              SVG_LEFT);
    xml_text(&b, c->o->dataset, 80);
    char t1[32];
    sb_printf(&b, ", --mem %s%s</text>\n", tg_fmt_bytes(c->o->mem_bytes, t1, sizeof t1),
              c->cg_on ? " = the cgroup limit of every run" : ", no cgroup limit");
    sb_printf(&b,
              "<text x=\"%d\" y=\"40\" fill=\"#444\">thick bar: mean epoch wall time (epochs %s), "
              "split into training, waiting for batches, other; ticks: each epoch; thin bar: "
              "sampler threads' time</text>\n",
              SVG_LEFT, c->o->epochs > 1 ? "2..N" : "1");
    /* axis and grid */
    int axis_y = SVG_TOP + nruns * SVG_ROW;
    for (double v = 0; v <= xmax + step / 2; v += step) {
        sb_printf(&b,
                  "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#ddd\"/>\n"
                  "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">%g</text>\n",
                  X(v), SVG_TOP - 8, X(v), axis_y, X(v), axis_y + 16, v);
    }
    sb_printf(&b, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">seconds per epoch</text>\n",
              SVG_LEFT + pw / 2, axis_y + 32);
    for (int i = 0; i < nruns; i++) {
        const tg_bench_run_t *r = &runs[i];
        double y = SVG_TOP + i * SVG_ROW;
        sb_printf(&b, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\" font-weight=\"bold\">",
                  SVG_LEFT - 10, y + 16);
        xml_text(&b, r->name, 24);
        sb_printf(&b, "</text>\n");
        if (isnan(r->s_epoch)) {
            sb_printf(&b, "<text x=\"%d\" y=\"%.2f\" fill=\"#b22222\">%s, exit status %d: ",
                      SVG_LEFT + 4, y + 16, tg_bench_run_status(r), r->exit_code);
            xml_text(&b, r->last_err[0] ? r->last_err : "no epoch reported", 90);
            sb_printf(&b, "</text>\n");
            continue;
        }
        double T = r->s_epoch, tr = TG_MIN(nz(r->s_train), T);
        double wt = TG_MIN(nz(r->s_wait), T - tr), other = T - tr - wt;
        char tip[160];
        double x = X(0);
        snprintf(tip, sizeof tip, "training %.3f s", tr);
        svg_rect(&b, x, y + 4, X(tr) - X(0), 20, "#59a14f", tip);
        x += X(tr) - X(0);
        snprintf(tip, sizeof tip, "waiting for batches %.3f s", wt);
        svg_rect(&b, x, y + 4, X(wt) - X(0), 20, "#e15759", tip);
        x += X(wt) - X(0);
        snprintf(tip, sizeof tip, "other %.3f s", other);
        svg_rect(&b, x, y + 4, X(other) - X(0), 20, "#bab0ac", tip);
        sb_printf(&b, "<text x=\"%.2f\" y=\"%.2f\">%.3f s%s</text>\n", X(T) + 6, y + 18, T,
                  tg_bench_run_ok(r) ? "" : " (run failed)");
        for (size_t e = 0; e < r->nep; e++) {
            double te = r->ep[e].v[TG_BENCH_E_TIME];
            if (isnan(te)) continue;
            sb_printf(&b,
                      "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#222\" "
                      "stroke-width=\"2\"><title>epoch %zu%s: %.3f s</title></line>\n",
                      X(te), y + 1, X(te), y + 27, e + 1, e == 0 ? " (cold)" : "", te);
        }
        /* sampler threads: sample | gather, I/O wait hatched from the left of gather */
        double sa = nz(r->s_sample), ga = nz(r->s_gather), iw = nz(r->s_io_wait);
        snprintf(tip, sizeof tip, "sampling %.3f thread-s", sa);
        svg_rect(&b, X(0), y + 27, X(sa) - X(0), 9, "#4e79a7", tip);
        snprintf(tip, sizeof tip, "gathering %.3f thread-s", ga);
        svg_rect(&b, X(sa), y + 27, X(ga) - X(0), 9, "#f28e2b", tip);
        if (iw > 0) {
            snprintf(tip, sizeof tip, "blocked on I/O %.3f thread-s", iw);
            svg_rect(&b, X(0), y + 37, X(TG_MIN(iw, xmax)) - X(0), 5, "url(#hatch)", tip);
        }
    }
    svg_bound_lines(&b, bv, xmax, axis_y);
    svg_legend(&b, legend_y);
#undef X
    sb_printf(&b, "</svg>\n");
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}
