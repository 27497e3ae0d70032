/* tiergnn bench: reports (columns, a well-formed SVG, bench.json, the three lower bounds,
 * failures with their exit status) on a tiny generated dataset; every strategy of the engine's
 * table by default; the aggregation of every per-epoch key through a stand-in train binary;
 * signals; a real run killed by the cgroup's out-of-memory killer; refusals; the epoch footprint
 * behind the bounds (distinct rows, operations, the trace); and the Belady count over it. */
#include <sys/stat.h>

#include "test_adj_disk_common.h"
#include "tiergnn/bench.h"
#include "tiergnn/engine.h"

static const char *g_dir;
static char g_ds[4200];

static const char csv_header[] =
    "strategy,status,exit_status,epochs_run,epochs_timed,epoch_time_s,first_epoch_s,sample_s,"
    "gather_s,train_s,wait_s,io_wait_s,io_requests_per_epoch,disk_read_bytes_per_epoch,"
    "needed_bytes_per_epoch,read_amplification,cache_hit_ratio,peak_rss_bytes,cgroup_limit_bytes,"
    "cgroup_peak_bytes,kernel_read_bytes,test_acc,valid_acc,best_epoch,wall_s,resident_at_start,"
    "last_error,gather_bytes_per_s,predicted_epoch_s,probe_iops,probe_seq_bytes_per_s";

enum {
    C_STRATEGY,
    C_STATUS,
    C_EXIT,
    C_EPOCHS,
    C_TIMED,
    C_EPOCH_S,
    C_FIRST_S,
    C_SAMPLE,
    C_GATHER,
    C_TRAIN,
    C_WAIT,
    C_IO_WAIT,
    C_IO_REQ,
    C_READ,
    C_NEED,
    C_AMP,
    C_HIT,
    C_PEAK_RSS,
    C_CG_LIMIT,
    C_CG_PEAK,
    C_KREAD,
    C_TEST,
    C_VALID,
    C_BEST,
    C_WALL,
    C_RESIDENT,
    C_ERR,
    C_GATHER_BW,
    C_PREDICTED,
    C_PROBE_IOPS,
    C_PROBE_SEQ,
    C_COUNT
};

/* One CSV row split into fields (quotes handled). */
typedef struct {
    char f[C_COUNT][512];
    int n;
} row_t;

static int split_csv(const char *line, row_t *r)
{
    memset(r, 0, sizeof *r);
    const char *p = line;
    for (;;) {
        if (r->n >= C_COUNT) return -1;
        char *o = r->f[r->n++];
        size_t k = 0;
        if (*p == '"') {
            p++;
            while (*p && !(*p == '"' && p[1] != '"')) {
                if (*p == '"') p++;
                if (k < 511) o[k++] = *p;
                p++;
            }
            if (*p == '"') p++;
        } else {
            while (*p && *p != ',' && *p != '\n')
                if (k < 511) o[k++] = *p++;
        }
        o[k] = 0;
        if (*p == ',') {
            p++;
            continue;
        }
        return r->n;
    }
}

/* Reads RUNDIR/bench.csv: checks the header and returns the rows (count in *n). */
static row_t *read_csv(const char *rundir, int *n)
{
    char path[8600];
    snprintf(path, sizeof path, "%s/bench.csv", rundir);
    char *text = NULL;
    size_t len;
    *n = 0;
    if (tg_read_file(path, &text, &len) < 0) {
        TG_FAIL("cannot read %s: %s", path, tg_errmsg());
        return NULL;
    }
    row_t *rows = calloc(64, sizeof *rows);
    char *save = NULL;
    int line = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), line++) {
        if (line == 0) {
            if (strcmp(l, csv_header))
                TG_FAIL("bench.csv header:\n%s\nexpected\n%s", l, csv_header);
            continue;
        }
        if (*n < 64) {
            if (split_csv(l, &rows[*n]) != C_COUNT)
                TG_FAIL("bench.csv line %d has %d fields, expected %d: %s", line + 1, rows[*n].n,
                        C_COUNT, l);
            (*n)++;
        }
    }
    free(text);
    return rows;
}

static const row_t *find_row(const row_t *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].f[C_STRATEGY], name)) return &rows[i];
    TG_FAIL("bench.csv has no row for %s", name);
    return NULL;
}

static double num(const row_t *r, int col)
{
    char *e;
    double v = strtod(r->f[col], &e);
    if (e == r->f[col] || *e) {
        TG_FAIL("%s: column %d is '%s', expected a number", r->f[C_STRATEGY], col, r->f[col]);
        return NAN;
    }
    return v;
}

/* A small well-formedness check: tags nest and close, attributes are quoted, entities are
 * complete, one root element, nothing after it but white space. */
static int xml_well_formed(const char *s, char *why, size_t wlen)
{
    const char *stack[256];
    size_t slen[256];
    int depth = 0, roots = 0;
    const char *p = s;
    while (*p) {
        if (*p == '<') {
            if (!strncmp(p, "<?", 2) || !strncmp(p, "<!--", 4)) {
                const char *e = strstr(p, p[1] == '?' ? "?>" : "-->");
                if (!e) return snprintf(why, wlen, "unterminated %.4s", p), 0;
                p = e + (p[1] == '?' ? 2 : 3);
                continue;
            }
            int closing = p[1] == '/';
            const char *nm = p + 1 + closing;
            size_t nl = strcspn(nm, " \t\n/>");
            if (nl == 0) return snprintf(why, wlen, "empty tag name at %.20s", p), 0;
            const char *q = nm + nl;
            int self = 0;
            while (*q && *q != '>') {
                if (*q == '"' || *q == '\'') {
                    const char *e = strchr(q + 1, *q);
                    if (!e) return snprintf(why, wlen, "unterminated attribute in %.30s", p), 0;
                    q = e + 1;
                    continue;
                }
                if (*q == '<') return snprintf(why, wlen, "'<' inside tag %.30s", p), 0;
                if (*q == '/' && q[1] == '>') self = 1;
                q++;
            }
            if (!*q) return snprintf(why, wlen, "unterminated tag %.30s", p), 0;
            if (closing) {
                if (depth == 0 || slen[depth - 1] != nl || strncmp(stack[depth - 1], nm, nl))
                    return snprintf(why, wlen, "mismatched </%.*s>", (int)nl, nm), 0;
                depth--;
            } else if (!self) {
                if (depth == 0) roots++;
                if (depth == 256) return snprintf(why, wlen, "nesting too deep"), 0;
                stack[depth] = nm;
                slen[depth++] = nl;
            } else if (depth == 0) {
                roots++;
            }
            p = q + 1;
            continue;
        }
        if (*p == '&') {
            size_t k = strcspn(p, ";<> \n");
            if (p[k] != ';') return snprintf(why, wlen, "bare '&' at %.20s", p), 0;
        }
        if (depth == 0 && !(*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))
            return snprintf(why, wlen, "text outside the root element at %.20s", p), 0;
        p++;
    }
    if (depth) return snprintf(why, wlen, "%d element(s) left open", depth), 0;
    if (roots != 1) return snprintf(why, wlen, "%d root elements", roots), 0;
    return 1;
}

static void check_svg(const char *rundir, const char *const *names, int n)
{
    char path[8600];
    snprintf(path, sizeof path, "%s/bench.svg", rundir);
    char *svg = NULL;
    size_t len;
    if (tg_read_file(path, &svg, &len) < 0) {
        TG_FAIL("cannot read %s: %s", path, tg_errmsg());
        return;
    }
    TG_CHECK(!strncmp(svg, "<svg", 4));
    TG_CHECK(len >= 7 && !strcmp(svg + len - 7, "</svg>\n"));
    char why[200];
    if (!xml_well_formed(svg, why, sizeof why)) TG_FAIL("bench.svg is not well-formed: %s", why);
    for (int i = 0; i < n; i++)
        if (!strstr(svg, names[i])) TG_FAIL("bench.svg does not name %s", names[i]);
    TG_CHECK(strstr(svg, "training") && strstr(svg, "waiting") && strstr(svg, "sampling") &&
             strstr(svg, "gathering"));
    free(svg);
}

static char *read_text(const char *rundir, const char *name)
{
    char path[8600];
    snprintf(path, sizeof path, "%s/%s", rundir, name);
    char *t = NULL;
    size_t len;
    if (tg_read_file(path, &t, &len) < 0) TG_FAIL("cannot read %s: %s", path, tg_errmsg());
    return t;
}

/* The number after the first "key": at or after `from` in a JSON text; NAN for null or absent. */
static double json_num_after(const char *text, const char *from, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(from ? from : text, pat);
    if (!p) return NAN;
    p += strlen(pat);
    char *e;
    double v = strtod(p, &e);
    return e == p ? NAN : v;
}

/* bench.json's bounds: sane against the footprint, each as the report defines it. */
static void check_bounds_json(const char *rundir, int want_cache_from_run)
{
    char *js = read_text(rundir, "bench.json");
    if (!js) return;
    const char *bd = strstr(js, "\"bounds\":{");
    TG_CHECK(bd != NULL);
    if (!bd) {
        free(js);
        return;
    }
    double distinct = json_num_after(js, bd, "distinct_bytes");
    double row = json_num_after(js, NULL, "row_bytes");
    double batch_nodes = json_num_after(js, NULL, "batch_nodes");
    double seq = json_num_after(js, bd, "seq_read_bytes_per_s");
    TG_CHECK(distinct > 0 && row > 0 && batch_nodes > 0);
    /* compute bound: operations over the GEMM rate */
    double flops = json_num_after(js, bd, "epoch_flops");
    double rate = json_num_after(js, bd, "sgemm_flops_per_s");
    double cs = json_num_after(js, bd, "compute_s");
    TG_CHECK(flops > 0 && rate > 1e6 && cs > 0);
    if (cs > 0) TG_CHECK_NEAR(cs, flops / rate, 1e-3 * cs);
    double parts =
        json_num_after(js, bd, "fwd_gemm_flops") + json_num_after(js, bd, "fwd_graph_flops") +
        json_num_after(js, bd, "bwd_gemm_flops") + json_num_after(js, bd, "bwd_graph_flops");
    TG_CHECK_NEAR(parts, flops, 0.5);
    /* Belady: between the distinct rows (every first access misses) and every access */
    double acc = json_num_after(js, bd, "accesses");
    double misses = json_num_after(js, bd, "belady_misses");
    double bb = json_num_after(js, bd, "belady_bytes");
    if (isnan(bb)) {
        TG_FAIL("no Belady bound in %s/bench.json", rundir);
    } else {
        TG_CHECK_NEAR(acc, batch_nodes, 0.5);
        TG_CHECK(misses * row >= distinct - 0.5 && misses <= acc);
        TG_CHECK_NEAR(bb, misses * row, 0.5);
        if (seq > 0) TG_CHECK_NEAR(json_num_after(js, bd, "belady_s"), bb / seq, 1e-3 * bb / seq);
    }
    double cache = json_num_after(js, bd, "cache_bytes");
    TG_CHECK(cache > 0);
    if (want_cache_from_run)
        TG_CHECK(strstr(bd, "\"cache_from\":\"--mem\"") == NULL);
    else
        TG_CHECK(strstr(bd, "\"cache_from\":\"--mem\"") != NULL);
    free(js);
}

/* A strategy name the train command does not know fails; a known one (memory, and mmap /
 * gnndrive once the engine has them) gives numbers. */
TG_TEST(reports_and_failures)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/b1", g_dir);
    char *log = NULL;
    int rc = tg_test_cli(&log,
                         "bench %s --strategies memory,mmap,gnndrive,nosuch --mem 64M --epochs 2 "
                         "--hidden 16 --batch-size 128 --fanouts 5,5 --probe-time 0.2 "
                         "--gemm-time 0.1 --out %s",
                         g_ds, out);
    /* nosuch fails, so the bench reports failure, after writing everything */
    TG_CHECK(rc == 1);
    if (log && !strstr(log, "strategy run(s) failed")) TG_FAIL("bench output:\n%s", log);
    free(log);
    int n;
    row_t *rows = read_csv(out, &n);
    TG_CHECK(n == 4);
    const row_t *mem = find_row(rows, n, "memory");
    if (mem) {
        TG_CHECK(!strcmp(mem->f[C_STATUS], "ok"));
        TG_CHECK(!strcmp(mem->f[C_EXIT], "0"));
        TG_CHECK(!strcmp(mem->f[C_EPOCHS], "2"));
        TG_CHECK(!strcmp(mem->f[C_TIMED], "2"));
        TG_CHECK(num(mem, C_EPOCH_S) > 0);
        TG_CHECK(num(mem, C_FIRST_S) > 0);
        double acc = num(mem, C_TEST);
        TG_CHECK(acc > 0 && acc <= 1);
        TG_CHECK(num(mem, C_PEAK_RSS) > 1e6);
        TG_CHECK(num(mem, C_RESIDENT) >= 0);
        TG_CHECK(!strcmp(mem->f[C_ERR], ""));
        TG_CHECK(num(mem, C_PREDICTED) > 0); /* the planner's steady epoch beside the measured */
    }
    static const char *const names[4] = {"memory", "mmap", "gnndrive", "nosuch"};
    for (int i = 1; i < 4; i++) {
        const row_t *r = find_row(rows, n, names[i]);
        if (!r) continue;
        if (i < 3 && !strcmp(r->f[C_STATUS], "ok")) {
            TG_CHECK(num(r, C_EPOCH_S) > 0); /* the engine knows it now */
            continue;
        }
        TG_CHECK(!strcmp(r->f[C_STATUS], "failed"));
        TG_CHECK(num(r, C_EXIT) != 0);
        TG_CHECK(!strcmp(r->f[C_EPOCH_S], "n/a"));
        TG_CHECK(!strcmp(r->f[C_PREDICTED], "n/a")); /* no strategy of that name to predict */
        if (!strstr(r->f[C_ERR], "strategy"))
            TG_FAIL("%s: last_error '%s' does not name the strategy problem", names[i],
                    r->f[C_ERR]);
    }
    free(rows);
    char *md = read_text(out, "bench.md");
    if (md) {
        TG_CHECK(strstr(md, "| strategy | status | epoch s |") != NULL);
        TG_CHECK(strstr(md, "| exit | predicted s |") && strstr(md, "the planner's choice: "));
        TG_CHECK(strstr(md, "| memory | ok |") != NULL);
        TG_CHECK(strstr(md, "| nosuch | failed |") != NULL);
        TG_CHECK(strstr(md, "I/O lower bound") != NULL);
        TG_CHECK(strstr(md, "distinct input nodes") != NULL);
        TG_CHECK(strstr(md, "**Belady bound: ") != NULL);
        TG_CHECK(strstr(md, "**compute bound: ") != NULL);
        /* the cache size is a run's budget's rest */
        TG_CHECK(strstr(md, "the largest `rest` the runs' budgets left for caches") != NULL);
        /* every epoch of every run against the bounds */
        TG_CHECK(strstr(md, "| memory | 1 (cold) |") != NULL);
        TG_CHECK(strstr(md, "| memory | 2 |") != NULL);
        free(md);
        md = NULL;
    }
    check_bounds_json(out, 1);
    char *js = read_text(out, "bench.json");
    if (js) {
        /* the memory run reported its budget's split */
        const char *mr = strstr(js, "\"strategy\":\"memory\"");
        double rest = mr ? json_num_after(js, mr, "budget_rest_bytes") : NAN;
        TG_CHECK(rest > 0 && rest < 64 << 20);
        TG_CHECK(strstr(js, "\"strategy\":\"nosuch\",\"status\":\"failed\"") != NULL);
        free(js);
    }
    md = read_text(out, "bench.md");
    if (md) {
        TG_CHECK(strstr(md, "cgroup limit") != NULL);
        /* the report opens with what --mem means for every row */
        TG_CHECK(strstr(md, "for every strategy") != NULL);
        free(md);
    }
    check_svg(out, names, 4);
    /* the run folders: train's own files plus the captured output */
    char p[4400];
    snprintf(p, sizeof p, "%s/memory/result.json", out);
    struct stat st;
    TG_CHECK(stat(p, &st) == 0);
    snprintf(p, sizeof p, "%s/nosuch/bench-stderr.log", out);
    TG_CHECK(stat(p, &st) == 0);

    /* the same RUNDIR again is refused, and accepted with --overwrite */
    rc = tg_test_cli(&log, "bench %s --strategies memory --mem 64M --epochs 1 --hidden 8 --out %s",
                     g_ds, out);
    TG_CHECK(rc == 1);
    if (log && !strstr(log, "already exists")) TG_FAIL("rerun output:\n%s", log);
    free(log);
    rc = tg_test_cli(&log,
                     "bench %s --strategies memory --mem 64M --epochs 1 --hidden 8 --out %s "
                     "--overwrite --membudget none --probe-time 0.2 --gemm-time 0.1",
                     g_ds, out);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", log ? log : "");
    /* the table is printed too */
    if (log) TG_CHECK(strstr(log, "| memory | ok |") != NULL);
    free(log);
    rows = read_csv(out, &n);
    TG_CHECK(n == 1);
    if (n == 1) {
        TG_CHECK(!strcmp(rows[0].f[C_CG_LIMIT], "n/a"));
        TG_CHECK(!strcmp(rows[0].f[C_TIMED], "1"));
    }
    free(rows);
    md = read_text(out, "bench.md");
    if (md) {
        TG_CHECK(strstr(md, "cgroup limit: **none** (--membudget none)") != NULL);
        TG_CHECK(strstr(md, "**Memory: --mem 64.00 MiB for every strategy, without a cgroup "
                            "limit** (--membudget none)") != NULL);
    }
    free(md);
}

/* Runs "bench DATASET ARGS --membudget none" (short probes) into g_dir/sub (its path into out),
 * expecting success, and returns the CSV's rows (*n of them). */
static row_t *bench_ok(char *out, size_t cap, const char *sub, const char *args, int *n)
{
    snprintf(out, cap, "%s/%s", g_dir, sub);
    char *log = NULL;
    int rc =
        tg_test_cli(&log, "bench %s %s --membudget none --probe-time 0.2 --gemm-time 0.1 --out %s",
                    g_ds, args, out);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", log ? log : "");
    free(log);
    return read_csv(out, n);
}

/* An item with its own options runs the strategy with them after the shared arguments, in a
 * folder of its own, and the reports name it; the same strategy runs twice side by side. */
TG_TEST(item_options)
{
    char out[4300];
    int n;
    row_t *rows = bench_ok(out, sizeof out, "b-items",
                           "--strategies memory,memory:seed=7:sampler-threads=1,"
                           "diskgnn:disk-budget=64M --mem 64M --epochs 1 --hidden 8",
                           &n);
    TG_CHECK(n == 3);
    const row_t *a = find_row(rows, n, "memory"),
                *b = find_row(rows, n, "memory:seed=7:sampler-threads=1"),
                *c = find_row(rows, n, "diskgnn:disk-budget=64M");
    TG_CHECK(a && b && c);
    if (a && b && c) {
        TG_CHECK(!strcmp(a->f[C_STATUS], "ok") && !strcmp(b->f[C_STATUS], "ok"));
        /* predicted with the options of its own the model takes (a disk budget), not at the
         * defaults it does not run with (a seed, sampler threads: n/a) */
        TG_CHECK(num(a, C_PREDICTED) > 0);
        TG_CHECK(!strcmp(b->f[C_PREDICTED], "n/a"));
        TG_CHECK(num(c, C_PREDICTED) > 0);
        /* each run's own probe, taken right before it (also for a row not predicted) */
        TG_CHECK(num(a, C_PROBE_IOPS) > 0 && num(a, C_PROBE_SEQ) > 0);
        TG_CHECK(num(b, C_PROBE_IOPS) > 0 && num(c, C_PROBE_SEQ) > 0);
    }
    free(rows);
    char p[4400];
    struct stat st;
    snprintf(p, sizeof p, "%s/memory_seed-7_sampler-threads-1/result.json", out);
    TG_CHECK(stat(p, &st) == 0);
    char *js = read_text(out, "bench.json");
    if (js) {
        TG_CHECK(strstr(js, "\"strategy\":\"memory:seed=7:sampler-threads=1\","
                            "\"status\":\"ok\",\"train_strategy\":\"memory\","
                            "\"train_options\":\"--seed 7 --sampler-threads 1\"") != NULL);
        TG_CHECK(strstr(js, "\"strategy\":\"memory\",\"status\":\"ok\","
                            "\"train_strategy\":\"memory\","
                            "\"train_options\":\"\"") != NULL);
    }
    free(js);
    /* the run got the options */
    snprintf(p, sizeof p, "%s/memory_seed-7_sampler-threads-1", out);
    char *cfg = read_text(p, "result.json");
    if (cfg) TG_CHECK(strstr(cfg, "\"seed\":7,") != NULL);
    free(cfg);
}

TG_TEST(bad_arguments)
{
    char *log = NULL;
    static const struct {
        const char *args, *needle;
    } cases[] = {
        {"--strategies memory", "--mem"},
        {"--strategies memory --mem 64M --cgroup-extra 1M", "unknown option"},
        {"--strategies memory, --mem 64M", "empty"},
        {"--strategies memory,memory --mem 64M", "twice"},
        {"--strategies ../x --mem 64M", "not a strategy name"},
        {"--strategies memory: --mem 64M", "is not OPTION or OPTION=VALUE"},
        {"--strategies memory:Seed=1 --mem 64M", "is not OPTION or OPTION=VALUE"},
        {"--strategies memory:seed= --mem 64M", "is not OPTION or OPTION=VALUE"},
        {"--strategies memory:seed=a/b --mem 64M", "is not OPTION or OPTION=VALUE"},
        {"--strategies :seed=1 --mem 64M", "no strategy name"},
        {"--strategies memory:seed=1,memory:seed=1 --mem 64M", "twice"},
        {"--strategies memory --mem 64M --epochs 0", "--epochs"},
        {"--strategies memory --mem 64M --membudget /nonexistent/mb", "not an executable"},
        {"--strategies memory --mem 64M --frobnicate", "unknown option"},
        {"--strategies memory --mem 64M --gemm-time 0", "--gemm-time"},
        /* a GAT whose heads do not divide its hidden width, as train refuses it */
        {"--strategies memory --mem 64M --model gat --hidden 10 --heads 3 --membudget none",
         "not a multiple of --heads"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = tg_test_cli(&log, "bench %s %s --out %s/bad", g_ds, cases[i].args, g_dir);
        TG_CHECK(rc != 0);
        if (!log || !strstr(log, cases[i].needle))
            TG_FAIL("'bench %s': output lacks '%s':\n%s", cases[i].args, cases[i].needle,
                    log ? log : "");
        free(log);
    }
}

/* A stand-in for the train binary: writes JSON lines with every key the engine will report,
 * fails for strategy "bad", kills itself for strategy "dies". Checks what the bench makes of
 * them, exactly. */
static void write_fake_train(const char *path)
{
    tg_test_write_file(
        path,
        "#!/bin/sh\n"
        "[ \"$1\" = --version ] && { echo 'tiergnn 0.1.0 (a stand-in for the tests)'; exit 0; }\n"
        "case \"$*\" in\n"
        "  *'--strategy bad '*) echo 'loading...' >&2; echo \"tiergnn: unknown strategy 'bad', "
        "expected: memory\" >&2; exit 2 ;;\n"
        "  *'--strategy dies '*) echo '{\"epoch\":1,\"time_s\":5}'; kill -9 $$ ;;\n"
        "esac\n"
        "echo '{\"epoch\":1,\"time_s\":9.0,\"sample_s\":1,\"gather_s\":2,\"compute_s\":3,"
        "\"wait_s\":4,\"io_wait_s\":5,\"io_requests\":100,\"io_read_bytes\":4000,"
        "\"io_needed_bytes\":1000,\"cache_hit_ratio\":0.1,\"peak_rss_bytes\":7,\"train_loss\":1,"
        "\"valid_acc\":null,\"tiers\":[{\"name\":\"a\",\"hit\":[1,2]}],\"note\":\"a,b "
        "\\\\\"q\\\\\"\"}'\n"
        "echo 'not json'\n"
        "echo '{\"epoch\":2,\"time_s\":2.0,\"sample_s\":0.5,\"gather_s\":0.25,\"compute_s\":1,"
        "\"wait_s\":0.5,\"io_wait_s\":0.125,\"io_requests\":10,\"io_read_bytes\":300,"
        "\"io_needed_bytes\":200,\"cache_hit_ratio\":0.5,\"peak_rss_bytes\":8}'\n"
        "echo '{\"epoch\":3,\"time_s\":4.0,\"sample_s\":1.5,\"gather_s\":0.75,\"compute_s\":2,"
        "\"wait_s\":1.5,\"io_wait_s\":0.375,\"io_requests\":30,\"io_read_bytes\":500,"
        "\"io_needed_bytes\":200,\"cache_hit_ratio\":0.7,\"peak_rss_bytes\":9}'\n"
        "echo "
        "'{\"best_epoch\":3,\"valid_acc\":0.5,\"test_acc\":0.625,\"peak_rss_bytes\":123456}'\n");
    chmod(path, 0755);
}

TG_TEST(aggregation_and_signals)
{
    char exe[4300], out[4300];
    snprintf(exe, sizeof exe, "%s/fake-train.sh", g_dir);
    snprintf(out, sizeof out, "%s/fake", g_dir);
    write_fake_train(exe);
    for (int cg = 0; cg < 2; cg++) {
        tg_bench_opts_t o;
        tg_bench_opts_default(&o);
        o.dataset = g_ds;
        o.strategies = "good,bad,dies";
        o.mem_bytes = 64 << 20;
        o.epochs = 3;
        o.out_dir = out;
        o.overwrite = 1;
        o.exe = exe;
        /* with cg: ../shared/tools/membudget, if it exists and can set limits here */
        char mb[4300];
        snprintf(mb, sizeof mb, "%s/tools/membudget", TG_SHARED_DIR);
        if (cg && access(mb, X_OK) != 0) continue;
        o.membudget = cg ? mb : "none";
        o.model.hidden = 8;
        o.fanouts[0] = o.fanouts[1] = 4;
        o.batch_size = 100;
        o.probe_time_s = 0.2;
        o.gemm_time_s = 0.1;
        tg_bench_result_t res;
        TG_CHECK_OK(tg_bench(&o, &res));
        TG_CHECK(res.runs == 3);
        TG_CHECK(res.failed == 2);
        TG_CHECK(res.oom_killed == 0); /* "dies" kills itself: not the out-of-memory killer */
        int n;
        row_t *rows = read_csv(out, &n);
        const row_t *g = find_row(rows, n, "good");
        if (g) {
            TG_CHECK(!strcmp(g->f[C_STATUS], "ok"));
            TG_CHECK(!strcmp(g->f[C_TIMED], "2-3"));
            TG_CHECK_NEAR(num(g, C_EPOCH_S), 3.0, 1e-9); /* epochs 2 and 3 */
            TG_CHECK_NEAR(num(g, C_FIRST_S), 9.0, 1e-9);
            TG_CHECK_NEAR(num(g, C_SAMPLE), 1.0, 1e-9);
            TG_CHECK_NEAR(num(g, C_GATHER), 0.5, 1e-9);
            TG_CHECK_NEAR(num(g, C_TRAIN), 1.5, 1e-9);
            TG_CHECK_NEAR(num(g, C_WAIT), 1.0, 1e-9);
            TG_CHECK_NEAR(num(g, C_IO_WAIT), 0.25, 1e-9);
            TG_CHECK_NEAR(num(g, C_IO_REQ), 20, 1e-9);
            TG_CHECK_NEAR(num(g, C_READ), 400, 1e-9);
            TG_CHECK_NEAR(num(g, C_NEED), 200, 1e-9);
            TG_CHECK_NEAR(num(g, C_AMP), 2.0, 1e-9);
            TG_CHECK_NEAR(num(g, C_HIT), 0.6, 1e-9);
            TG_CHECK_NEAR(num(g, C_GATHER_BW), 400, 1e-6); /* 200 bytes needed in 0.5 s */
            TG_CHECK_NEAR(num(g, C_PEAK_RSS), 123456, 1e-9);
            TG_CHECK_NEAR(num(g, C_TEST), 0.625, 1e-9);
            TG_CHECK_NEAR(num(g, C_VALID), 0.5, 1e-9);
            TG_CHECK_NEAR(num(g, C_BEST), 3, 1e-9);
            if (res.cgroup_limited) {
                TG_CHECK_NEAR(num(g, C_CG_LIMIT), 64 << 20, 0.5); /* exactly --mem */
                TG_CHECK(num(g, C_CG_PEAK) > 0);
            } else {
                TG_CHECK(!strcmp(g->f[C_CG_LIMIT], "n/a"));
            }
        }
        const row_t *b = find_row(rows, n, "bad");
        if (b) {
            TG_CHECK(!strcmp(b->f[C_STATUS], "failed"));
            TG_CHECK(!strcmp(b->f[C_EXIT], "2"));
            TG_CHECK(!strcmp(b->f[C_ERR], "tiergnn: unknown strategy 'bad', expected: memory"));
        }
        const row_t *d = find_row(rows, n, "dies");
        if (d) {
            TG_CHECK(!strcmp(d->f[C_STATUS], "killed"));
            TG_CHECK(!strcmp(d->f[C_EXIT], "137"));
            TG_CHECK(strstr(d->f[C_ERR], "signal 9") != NULL);
            TG_CHECK(!strcmp(d->f[C_TIMED], "1"));
            TG_CHECK_NEAR(num(d, C_EPOCH_S), 5.0, 1e-9);
        }
        free(rows);
        char *md = read_text(out, "bench.md");
        if (md) {
            TG_CHECK(strstr(md, "- **bad**: failed, exit status 2: tiergnn: unknown strategy") !=
                     NULL);
            TG_CHECK(strstr(md, "| 2.000 |") != NULL); /* read amplification */
            /* no run reported a budget: the Belady cache is all of --mem */
            TG_CHECK(strstr(md, "all of --mem: no run reported its budget's split") != NULL);
            /* epochs against the bounds, the killed run's one epoch too */
            TG_CHECK(strstr(md, "| good | 3 | 4.000 |") != NULL);
            TG_CHECK(strstr(md, "| dies | 1 (cold) | 5.000 |") != NULL);
            free(md);
        }
        check_bounds_json(out, 0);
        static const char *const names[3] = {"good", "bad", "dies"};
        check_svg(out, names, 3);
        fprintf(stderr, "  %s cgroup limit\n", res.cgroup_limited ? "with a" : "without a");
    }
}

/* Without --strategies the bench runs every strategy of the engine's table, in its order. */
TG_TEST(default_strategies)
{
    char out[4300];
    int n;
    row_t *rows = bench_ok(out, sizeof out, "all",
                           "--mem 64M --epochs 1 --hidden 8 --batch-size 256 --fanouts 4,4", &n);
    /* tg_strategy_names: "memory, mmap, gnndrive" */
    char names[512];
    snprintf(names, sizeof names, "%s", tg_strategy_names());
    int k = 0;
    char *save = NULL;
    for (char *t = strtok_r(names, ", ", &save); t; t = strtok_r(NULL, ", ", &save), k++) {
        if (k >= n) {
            TG_FAIL("bench.csv has %d rows; the table's strategy %s is missing", n, t);
            break;
        }
        if (strcmp(rows[k].f[C_STRATEGY], t))
            TG_FAIL("row %d is %s, expected %s", k + 1, rows[k].f[C_STRATEGY], t);
        TG_CHECK(!strcmp(rows[k].f[C_STATUS], "ok"));
    }
    TG_CHECK(k == n && n > 0);
    free(rows);
}

/* A real run in a cgroup far too small for the process: the kernel's out-of-memory killer ends
 * it, and the bench says so (status, exit 137, the cgroup's limit and peak, the message). Skipped
 * where membudget cannot set a limit (no cgroup mounted or writable, MEMBUDGET_NO_CGROUP=1): the
 * run would then train unlimited and prove nothing. */
TG_TEST(oom_killed_run)
{
    char mb[4300], why[4600];
    snprintf(mb, sizeof mb, "%s/tools/membudget", TG_SHARED_DIR);
    if (!tg_test_cgroup_limit_works(why, sizeof why)) {
        fprintf(stderr, "  skipped: %s\n", why);
        return;
    }
    char out[4300];
    snprintf(out, sizeof out, "%s/oom", g_dir);
    char *args[] = {"--hidden", "8", "--batch-size", "256"};
    tg_bench_opts_t o;
    tg_bench_opts_default(&o);
    o.dataset = g_ds;
    o.strategies = "memory";
    o.mem_bytes = 1 << 20; /* below what the process needs just to start */
    o.epochs = 1;
    o.out_dir = out;
    o.membudget = mb;
    o.exe = TG_CLI_PATH;
    o.probe_time_s = 0.2;
    o.gemm_time_s = 0.1;
    o.train_args = args;
    o.num_train_args = 4;
    tg_bench_result_t res;
    TG_CHECK_OK(tg_bench(&o, &res));
    TG_CHECK(res.cgroup_limited);
    TG_CHECK(res.runs == 1 && res.failed == 1 && res.oom_killed == 1);
    TG_CHECK_EQ_U64(res.cgroup_limit, 1 << 20);
    int n;
    row_t *rows = read_csv(out, &n);
    const row_t *r = n == 1 ? find_row(rows, n, "memory") : NULL;
    TG_CHECK(n == 1);
    if (r) {
        TG_CHECK(!strcmp(r->f[C_STATUS], "oom-killed"));
        TG_CHECK(!strcmp(r->f[C_EXIT], "137"));
        TG_CHECK_NEAR(num(r, C_CG_LIMIT), 1 << 20, 0.5);
        TG_CHECK(num(r, C_CG_PEAK) > 0);
        if (!strstr(r->f[C_ERR], "out of memory"))
            TG_FAIL("last_error '%s' does not say out of memory", r->f[C_ERR]);
    }
    free(rows);
    char *md = read_text(out, "bench.md");
    if (md) {
        TG_CHECK(strstr(md, "| memory | oom-killed |") != NULL);
        TG_CHECK(strstr(md, "- **memory**: oom-killed, exit status 137: out of memory") != NULL);
        TG_CHECK(strstr(md, "did not fit in the 1.00 MiB it was given as --mem") != NULL);
        TG_CHECK(
            strstr(md, "**Memory: 1.00 MiB for every strategy.** Each run gets `--mem 1048576`") !=
            NULL);
        free(md);
    }
}

/* The bench runs only tiergnn: no binary given, a program that answers --version otherwise, one
 * that does not answer, this test program itself (which would bench itself again), and a bench
 * started inside such a question are all refused before any run, naming the binary. */
TG_TEST(refuses_other_binaries)
{
    char out[4300], exe[4300], self[4300];
    snprintf(out, sizeof out, "%s/notcli", g_dir);
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    TG_CHECK(sl > 0);
    self[sl > 0 ? sl : 0] = 0;
    tg_bench_opts_t o;
    tg_bench_opts_default(&o);
    o.dataset = g_ds;
    o.strategies = "memory";
    o.mem_bytes = 64 << 20;
    o.epochs = 1;
    o.out_dir = out;
    o.membudget = "none";
    tg_bench_result_t res;
    TG_CHECK_ERR(tg_bench(&o, &res), "no tiergnn binary given");
    snprintf(exe, sizeof exe, "%s/python3.sh", g_dir);
    tg_test_write_file(exe, "#!/bin/sh\necho 'Python 3.11.2'\n");
    chmod(exe, 0755);
    o.exe = exe;
    TG_CHECK_ERR(tg_bench(&o, &res), "printed 'Python 3.11.2' and exited with status 0");
    /* this program: the constructor of tests/support stops the copy at once (exit 3) */
    o.exe = self;
    TG_CHECK_ERR(tg_bench(&o, &res), "is not a tiergnn binary");
    o.exe = "/nonexistent/tiergnn";
    TG_CHECK_ERR(tg_bench(&o, &res), "/nonexistent/tiergnn is not an executable file");
    /* a bench inside the version question refuses, so the question never nests */
    setenv("TIERGNN_BENCH_VERSION_PROBE", "1", 1);
    o.exe = TG_CLI_PATH;
    TG_CHECK_ERR(tg_bench(&o, &res), "TIERGNN_BENCH_VERSION_PROBE is set");
    unsetenv("TIERGNN_BENCH_VERSION_PROBE");
    /* nothing ran: no run folder */
    char p[4400];
    snprintf(p, sizeof p, "%s/memory", out);
    TG_CHECK(access(p, F_OK) != 0);
    /* a binary that never answers is killed with what it started (it costs 5 s) */
    {
        char pidf[4400];
        snprintf(exe, sizeof exe, "%s/hangs.sh", g_dir);
        snprintf(pidf, sizeof pidf, "%s/hangs.pid", g_dir);
        char script[9000];
        snprintf(script, sizeof script, "#!/bin/sh\nsleep 600 &\necho $! > '%s'\nwait\n", pidf);
        tg_test_write_file(exe, script);
        chmod(exe, 0755);
        o.exe = exe;
        double t0 = tg_now();
        TG_CHECK_ERR(tg_bench(&o, &res), "did not answer within 5 s (killed)");
        TG_CHECK(tg_now() - t0 < 30);
        char *pid = tg_test_read_all(pidf, NULL);
        if (pid) {
            /* gone, or a zombie waiting for init: not running */
            char stat_path[128], *st = NULL;
            snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", atoi(pid));
            size_t n = 0;
            usleep(100000);
            if (tg_read_file(stat_path, &st, &n) == 0) {
                const char *rp = strrchr(st, ')');
                if (rp && rp[1] == ' ' && rp[2] != 'Z')
                    TG_FAIL("the hanging binary's child %d is still running", atoi(pid));
            }
            free(st);
        }
        free(pid);
    }
    /* the real one is taken */
    o.exe = TG_CLI_PATH;
    o.model.hidden = 8;
    o.probe_time_s = 0.2;
    o.gemm_time_s = 0.1;
    TG_CHECK_OK(tg_bench(&o, &res));
    TG_CHECK(res.runs == 1 && res.failed == 0);
}

/* The Belady count over a footprint's trace at a few cache sizes. */
static void check_belady(const tg_bench_footprint_t *fp)
{
    uint64_t prev = UINT64_MAX, m = 0;
    uint64_t sizes[] = {0,
                        1,
                        7,
                        fp->distinct_nodes / 4,
                        fp->distinct_nodes / 2,
                        fp->distinct_nodes,
                        10 * fp->distinct_nodes};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        TG_CHECK_OK(tg_bench_belady(fp, sizes[k], &m));
        TG_CHECK(m >= fp->distinct_nodes && m <= fp->batch_nodes);
        TG_CHECK(m <= prev); /* a larger optimal cache never misses more */
        if (sizes[k] == 0) TG_CHECK_EQ_U64(m, fp->batch_nodes); /* every access */
        if (sizes[k] >= fp->distinct_nodes) TG_CHECK_EQ_U64(m, fp->distinct_nodes); /* first only */
        prev = m;
    }
    tg_bench_footprint_t none = *fp;
    none.trace_ids = NULL;
    TG_CHECK_ERR(tg_bench_belady(&none, 10, &m), "no trace");
}

/* The footprint equals a direct count with the sampler over the in-memory adjacency, for any
 * thread count (distinct rows, the operation count, the trace in batch order); whole-graph and
 * MLP modes follow the engine's rules; the Belady count over the trace is bounded by the
 * distinct rows and every access, and never grows with the cache. */
TG_TEST(footprint)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/fp", g_dir);
    tad_opts_t to;
    tad_default(&to);
    to.seed = 12;
    tad_write(dir, &to);
    tg_dataset_t *ds = tad_open(dir);
    tg_adj_t *adj;
    TG_CHECK_OK(tg_adj_memory_open(&adj, ds));
    uint64_t *train, ntrain, N = ds->meta.num_nodes;
    TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &train, &ntrain));
    int64_t fan[2] = {5, 3};
    uint64_t bs = 64, epoch = 1, seed = 4;
    tg_sampler_shuffle_epoch(train, ntrain, seed, epoch);
    tg_sampler_t *s;
    TG_CHECK_OK(tg_sampler_create(&s, adj, 2, fan));
    uint8_t *seen = calloc(N, 1);
    uint64_t distinct = 0, sum = 0, maxn = 0, nb = 0, flops = 0;
    uint32_t *trace = malloc(ntrain * 64 * sizeof *trace); /* up to 1 + 5 + 15 nodes per seed */
    tg_model_config_t cfg;
    tg_model_config_default(&cfg);
    cfg.in_dim = to.dim;
    cfg.out_dim = ds->meta.num_classes;
    cfg.hidden = 12;
    for (uint64_t first = 0; first < ntrain; first += bs, nb++) {
        tg_rng_t r;
        tg_sampler_batch_rng(&r, seed, epoch, nb);
        tg_batch_t b;
        TG_CHECK_OK(tg_sampler_sample(s, train + first, TG_MIN(bs, ntrain - first), &r, &b));
        for (uint32_t i = 0; i < b.num_nodes; i++) {
            if (!seen[b.nodes[i]]++) distinct++;
            trace[sum + i] = (uint32_t)b.nodes[i];
        }
        tg_flops_t f;
        TG_CHECK_OK(tg_model_batch_flops(&cfg, &b, &f));
        flops += tg_flops_total(&f);
        sum += b.num_nodes;
        maxn = TG_MAX(maxn, b.num_nodes);
        tg_batch_free(&b);
    }
    tg_sampler_destroy(s);
    for (int threads = 1; threads <= 3; threads += 2) {
        tg_bench_footprint_opts_t fo = {.model = TG_MODEL_SAGE,
                                        .num_layers = 2,
                                        .fanouts = {5, 3},
                                        .batch_size = bs,
                                        .seed = seed,
                                        .epoch = epoch,
                                        .threads = threads,
                                        .hidden = 12,
                                        .want_trace = 1};
        tg_bench_footprint_t fp;
        TG_CHECK_OK(tg_bench_footprint(dir, &fo, &fp));
        TG_CHECK_EQ_U64(fp.batches, nb);
        TG_CHECK_EQ_U64(fp.distinct_nodes, distinct);
        TG_CHECK_EQ_U64(fp.batch_nodes, sum);
        TG_CHECK_EQ_U64(fp.max_batch_nodes, maxn);
        TG_CHECK_EQ_U64(fp.row_bytes, to.dim * 4);
        TG_CHECK(!fp.whole_graph);
        TG_CHECK(fp.have_flops);
        TG_CHECK_EQ_U64(tg_flops_total(&fp.flops), flops);
        TG_CHECK(fp.trace_off && fp.trace_ids);
        if (fp.trace_off && fp.trace_ids) {
            TG_CHECK_EQ_U64(fp.trace_off[0], 0);
            TG_CHECK_EQ_U64(fp.trace_off[nb], sum);
            TG_CHECK(!memcmp(fp.trace_ids, trace, sum * sizeof *trace));
        }
        if (threads == 1) check_belady(&fp);
        tg_bench_footprint_free(&fp);
    }
    /* full batch with full neighbourhoods: the whole graph, every node */
    tg_bench_footprint_opts_t fo = {.model = TG_MODEL_GCN,
                                    .num_layers = 2,
                                    .fanouts = {-1, -1},
                                    .batch_size = 0,
                                    .seed = seed,
                                    .threads = 1};
    tg_bench_footprint_t fp;
    TG_CHECK_OK(tg_bench_footprint(dir, &fo, &fp));
    TG_CHECK(fp.whole_graph);
    TG_CHECK_EQ_U64(fp.batches, 1);
    TG_CHECK_EQ_U64(fp.distinct_nodes, N);
    /* an MLP reads only its seeds */
    fo.model = TG_MODEL_MLP;
    fo.fanouts[0] = fo.fanouts[1] = 10;
    fo.batch_size = 100;
    TG_CHECK_OK(tg_bench_footprint(dir, &fo, &fp));
    TG_CHECK(!fp.whole_graph);
    TG_CHECK_EQ_U64(fp.distinct_nodes, ntrain);
    TG_CHECK_EQ_U64(fp.batch_nodes, ntrain);
    TG_CHECK_EQ_U64(fp.batches, (ntrain + 99) / 100);
    TG_CHECK(!fp.have_flops && !fp.trace_ids); /* neither asked for */
    /* a model the operation count cannot take is refused before sampling */
    fo.hidden = 10;
    fo.model = TG_MODEL_GAT;
    fo.heads = 3;
    TG_CHECK_ERR(tg_bench_footprint(dir, &fo, &fp), "not a multiple of heads");
    free(trace);
    free(seen);
    free(train);
    tg_adj_destroy(adj);
    tg_dataset_close(ds);
}

int main(void)
{
    g_dir = tg_test_tmpdir("bench");
    snprintf(g_ds, sizeof g_ds, "%s/ds", g_dir);
    char *log = NULL;
    if (tg_test_cli(&log,
                    "generate %s --nodes 1500 --avg-degree 10 --feat-dim 16 --classes 4 "
                    "--threads 1",
                    g_ds) != 0) {
        fprintf(stderr, "generate failed:\n%s\n", log ? log : "");
        return 1;
    }
    free(log);
    TG_RUN(reports_and_failures);
    TG_RUN(bad_arguments);
    TG_RUN(default_strategies);
    TG_RUN(item_options);
    TG_RUN(aggregation_and_signals);
    TG_RUN(oom_killed_run);
    TG_RUN_PLAIN(refuses_other_binaries); /* before the GEMM probe and any cgroup */
    TG_RUN_PLAIN(footprint);              /* counts operations, runs none */
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
