/* What one `tiergnn train` run of the bench reported: its JSON lines (the flat members the
 * train command writes), membudget's summary line, how the process ended, and the summary
 * columns every report shares. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bench-impl.h"

/* ================================================================ JSON lines */

/* A JSON object's members, as the train command writes them: numbers, null, strings, booleans;
 * a nested object's members as "outer.inner" (one level; arrays and deeper objects skipped). */
typedef struct {
    char key[48];
    int is_num;
    double num;
    char str[96];
} jmember_t;

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* Parses a JSON string at p (at the opening quote) into buf; returns the position after it or
 * NULL. Escapes are decoded for the simple cases; \uXXXX becomes '?'. */
static const char *json_string(const char *p, char *buf, size_t len)
{
    if (*p != '"') return NULL;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            c = *p++;
            switch (c) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'u':
                for (int k = 0; k < 4; k++)
                    if (!*p++) return NULL;
                c = '?';
                break;
            case 0:
                return NULL;
            default:
                break; /* \" \\ \/ */
            }
        }
        if (n + 1 < len) buf[n++] = c;
    }
    if (*p != '"') return NULL;
    if (len) buf[n] = 0;
    return p + 1;
}

/* Skips a nested array or object (strings inside respected). */
static const char *json_skip_nested(const char *p)
{
    int depth = 0;
    char tmp[2];
    do {
        if (*p == '"') {
            if (!(p = json_string(p, tmp, sizeof tmp))) return NULL;
            continue;
        }
        if (*p == '[' || *p == '{') depth++;
        if (*p == ']' || *p == '}') depth--;
        if (!*p) return NULL;
        p++;
    } while (depth > 0);
    return p;
}

/* Parses the object at p (at its '{') into mem[*n..max), keys after prefix; returns the position
 * after it, or NULL if it is not a JSON object. */
static const char *json_object(const char *p, const char *prefix, jmember_t *mem, int *n, int max)
{
    if (*p != '{') return NULL;
    p = json_ws(p + 1);
    if (*p == '}') return p + 1;
    for (;;) {
        jmember_t m;
        memset(&m, 0, sizeof m);
        size_t pl = strlen(prefix);
        memcpy(m.key, prefix, pl);
        if (!(p = json_string(p, m.key + pl, sizeof m.key - pl))) return NULL;
        p = json_ws(p);
        if (*p != ':') return NULL;
        p = json_ws(p + 1);
        int keep = 1;
        if (*p == '"') {
            if (!(p = json_string(p, m.str, sizeof m.str))) return NULL;
        } else if (*p == '{' && !*prefix && strlen(m.key) + 2 < sizeof m.key) {
            char inner[sizeof m.key]; /* "key." (room checked above; gcc -O0 cannot see it) */
            size_t kl = strlen(m.key);
            memcpy(inner, m.key, kl);
            memcpy(inner + kl, ".", 2);
            if (!(p = json_object(p, inner, mem, n, max))) return NULL;
            keep = 0;
        } else if (*p == '[' || *p == '{') {
            if (!(p = json_skip_nested(p))) return NULL;
        } else if (!strncmp(p, "null", 4)) {
            p += 4;
        } else if (!strncmp(p, "true", 4)) {
            m.is_num = 1;
            m.num = 1;
            p += 4;
        } else if (!strncmp(p, "false", 5)) {
            m.is_num = 1;
            m.num = 0;
            p += 5;
        } else {
            char *e;
            m.num = strtod(p, &e);
            if (e == p) return NULL;
            m.is_num = 1;
            p = e;
        }
        if (keep && *n < max) mem[(*n)++] = m;
        p = json_ws(p);
        if (*p == ',') {
            p = json_ws(p + 1);
            continue;
        }
        if (*p == '}') return p + 1;
        return NULL;
    }
}

/* Parses one line; returns the member count, or -1 if it is not a JSON object. */
static int json_parse_line(const char *line, jmember_t *mem, int max)
{
    int n = 0;
    return json_object(json_ws(line), "", mem, &n, max) ? n : -1;
}

static double jnum(const jmember_t *m, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].key, key)) return m[i].is_num ? m[i].num : NAN;
    return NAN;
}

static int jhas(const jmember_t *m, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].key, key)) return 1;
    return 0;
}

/* ================================================================ one run */

static const char *const epoch_keys[TG_BENCH_E_COUNT] = {
    "time_s",          "sample_s",        "gather_s",      "compute_s",
    "wait_s",          "io_wait_s",       "io_requests",   "io_read_bytes",
    "io_needed_bytes", "cache_hit_ratio", "peak_rss_bytes"};

int tg_bench_run_parse_stdout(tg_bench_run_t *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    jmember_t mem[96];
    while (getline(&line, &cap, f) > 0) {
        int n = json_parse_line(line, mem, 96);
        if (n < 0) continue;
        if (jhas(mem, n, "best_epoch")) {
            r->have_final = 1;
            r->best_epoch = jnum(mem, n, "best_epoch");
            r->valid_acc = jnum(mem, n, "valid_acc");
            r->test_acc = jnum(mem, n, "test_acc");
            r->final_peak_rss = jnum(mem, n, "peak_rss_bytes");
            r->budget_rest = jnum(mem, n, "budget.rest");
        } else if (jhas(mem, n, "epoch")) {
            if (r->nep == r->cap_ep) {
                size_t c = r->cap_ep ? 2 * r->cap_ep : 16;
                tg_bench_epoch_t *p = realloc(r->ep, c * sizeof *p);
                if (!p) {
                    rc = tg_err(-ENOMEM, "%s: out of memory for epoch records", path);
                    break;
                }
                r->ep = p;
                r->cap_ep = c;
            }
            tg_bench_epoch_t *e = &r->ep[r->nep++];
            for (int k = 0; k < TG_BENCH_E_COUNT; k++)
                e->v[k] = jnum(mem, n, epoch_keys[k]);
        }
    }
    free(line);
    fclose(f);
    return rc;
}

void tg_bench_run_parse_stderr(tg_bench_run_t *r, const char *path)
{
    tg_bench_last_line(path, "membudget:", r->last_err, sizeof r->last_err);
    r->cg_oom_kills = -1;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long lim;
        char peak[64];
        int ex;
        if (sscanf(line, "membudget: limit=%llu peak=%63s exit=%d", &lim, peak, &ex) != 3) continue;
        r->have_cg = 1;
        r->cg_limit = (double)lim;
        char *e;
        double pk = strtod(peak, &e);
        r->cg_peak = e != peak ? pk : NAN; /* "unknown": the kernel keeps no peak */
        const char *k = strstr(line, " oom_kill=");
        long long kills;
        r->cg_oom_kills = k && sscanf(k, " oom_kill=%lld", &kills) == 1 ? kills : -1;
    }
    free(line);
    fclose(f);
}

/* Whether the cgroup's out-of-memory killer ended a run killed by SIGKILL. The kernel's counter
 * decides where it can be read: membudget's oom_kill, or our cgroup v2 subtree's going up during
 * the run. Where neither exists (cgroup v1: membudget removes its cgroup, and v1 counts kills
 * per cgroup only), a SIGKILL with the cgroup's peak at 90% of its limit or more is the
 * out-of-memory killer: the peak of a cgroup whose charge failed sits at the limit. */
static int oom_evidence(const tg_bench_run_t *r, int64_t oom_delta)
{
    if (!r->have_cg) return 0;
    if (r->cg_oom_kills >= 0) return r->cg_oom_kills > 0;
    if (oom_delta >= 0) return oom_delta > 0;
    return !isnan(r->cg_peak) && r->cg_peak >= 0.9 * r->cg_limit;
}

void tg_bench_run_ended(tg_bench_run_t *r, int st, int cgroup_on, int64_t oom_delta)
{
    r->ran = 1;
    if (WIFEXITED(st)) {
        r->exit_code = WEXITSTATUS(st);
        /* membudget passes on a signalled child's status as 128 + signal */
        r->signalled = cgroup_on && r->exit_code > 128 && r->exit_code < 128 + 65;
    } else if (WIFSIGNALED(st)) {
        r->exit_code = 128 + WTERMSIG(st);
        r->signalled = 1;
    }
    if (!r->signalled) return;
    int sig = r->exit_code - 128;
    r->oom_killed = sig == SIGKILL && oom_evidence(r, oom_delta);
    /* Say what killed it first; the log's last line (often the shell's "Killed") after. */
    char tail[sizeof r->last_err], what[160];
    snprintf(tail, sizeof tail, "%s", r->last_err);
    if (r->oom_killed) {
        char t1[32], t2[32];
        snprintf(what, sizeof what,
                 "out of memory: killed (signal 9) at the cgroup limit of %s (cgroup peak %s)",
                 tg_fmt_bytes((uint64_t)r->cg_limit, t1, sizeof t1),
                 isnan(r->cg_peak) ? "unknown" : tg_fmt_bytes((uint64_t)r->cg_peak, t2, sizeof t2));
    } else {
        snprintf(what, sizeof what, "killed by signal %d", sig);
    }
    snprintf(r->last_err, sizeof r->last_err, "%s%s%.300s", what,
             tail[0] ? "; last line of stderr: " : "", tail);
}

/* Mean of key k over the timed epochs where it is present; NAN if nowhere. */
static double mean_key(const tg_bench_run_t *r, int k, size_t from)
{
    double s = 0;
    size_t n = 0;
    for (size_t i = from; i < r->nep; i++)
        if (!isnan(r->ep[i].v[k])) {
            s += r->ep[i].v[k];
            n++;
        }
    return n ? s / (double)n : NAN;
}

void tg_bench_run_summarise(tg_bench_run_t *r)
{
    /* The first epoch starts cold (empty page cache, caches filling): with more than one epoch
     * the means leave it out and it is reported apart. */
    size_t from = r->nep > 1 ? 1 : 0;
    r->timed_from = from + 1;
    r->s_first = r->nep ? r->ep[0].v[TG_BENCH_E_TIME] : NAN;
    r->s_epoch = mean_key(r, TG_BENCH_E_TIME, from);
    r->s_sample = mean_key(r, TG_BENCH_E_SAMPLE, from);
    r->s_gather = mean_key(r, TG_BENCH_E_GATHER, from);
    r->s_train = mean_key(r, TG_BENCH_E_COMPUTE, from);
    r->s_wait = mean_key(r, TG_BENCH_E_WAIT, from);
    r->s_io_wait = mean_key(r, TG_BENCH_E_IO_WAIT, from);
    r->s_io_req = mean_key(r, TG_BENCH_E_IO_REQ, from);
    r->s_read = mean_key(r, TG_BENCH_E_IO_READ, from);
    r->s_need = mean_key(r, TG_BENCH_E_IO_NEED, from);
    r->s_amp = r->s_need > 0 ? r->s_read / r->s_need : NAN;
    r->s_gather_bw = r->s_need > 0 && r->s_gather > 0 ? r->s_need / r->s_gather : NAN;
    r->s_hit = mean_key(r, TG_BENCH_E_HIT, from);
    /* Peak RSS: the final line's, else the largest epoch value, else the kernel's maxrss of
     * the child (which is the train process: membudget's shell is smaller). */
    double pk = r->have_final ? r->final_peak_rss : NAN;
    for (size_t i = 0; isnan(pk) && i < r->nep; i++)
        if (!isnan(r->ep[i].v[TG_BENCH_E_PEAK_RSS]))
            pk = TG_MAX(isnan(pk) ? 0 : pk, r->ep[i].v[TG_BENCH_E_PEAK_RSS]);
    if (isnan(pk) && r->ran && r->ru.ru_maxrss > 0) pk = (double)r->ru.ru_maxrss * 1024.0;
    r->s_peak_rss = pk;
    /* ru_inblock counts 512-byte units read from storage by the process tree (page faults,
     * buffered and direct reads): whole run, loading and evaluation included. */
    r->s_kernel_read = r->ran ? (double)r->ru.ru_inblock * 512.0 : NAN;
}

const char *tg_bench_run_status(const tg_bench_run_t *r)
{
    if (!r->ran) return "not run";
    if (r->oom_killed) return "oom-killed";
    if (r->signalled) return "killed";
    if (r->exit_code != 0) return "failed";
    if (!r->have_final) return "incomplete";
    return "ok";
}

int tg_bench_run_ok(const tg_bench_run_t *r)
{
    return !strcmp(tg_bench_run_status(r), "ok");
}
