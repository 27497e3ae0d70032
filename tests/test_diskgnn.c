/* The diskgnn strategy: every gathered row equals the in-memory store's, for passes prepared at
 * their start and passes prepared during the pass before (the next epoch packed while this one
 * trains), with a resume point, several segment sizes and without hot rows; the packed file stays
 * within --disk-budget and a budget below the epoch's rows is refused with the bytes needed; the
 * runtime files (spill, map, packed) leave nothing behind after passes, after read errors of the
 * packing and of the background sampling, and after SIGKILL while the next epoch is packed; the
 * epoch JSON carries the preprocessing figures, hidden from the second epoch on. The checkpoints'
 * equality with memory's and resume after every batch are test_strategy's, for every exact
 * strategy. */
#include "test_engine_common.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine-impl.h"
#include "engine/strategies/diskgnn.h"

static char root[4000], ds[4200];
#define N 3000u
#define DIM 16u

typedef struct {
    uint64_t mem, segment, disk_budget, hot, pack_mem;
    int sampler_threads, hot_auto, disk_indices, sampling_indices;
} cfg_t;

static int open_run(tg_run_t *r, const cfg_t *c)
{
    static char v[4][32];
    static tg_strategy_arg_t args[9];
    int n = 0;
    args[n++] = (tg_strategy_arg_t){"io-depth", "8"}; /* no device probe in tests */
    args[n++] = (tg_strategy_arg_t){"io-gap", "0"};
    args[n++] = (tg_strategy_arg_t){"chunk-rows", "64"};
    if (c->segment) {
        snprintf(v[0], 32, "%llu", (unsigned long long)c->segment);
        args[n++] = (tg_strategy_arg_t){"segment", v[0]};
    }
    if (c->disk_budget) {
        snprintf(v[1], 32, "%llu", (unsigned long long)c->disk_budget);
        args[n++] = (tg_strategy_arg_t){"disk-budget", v[1]};
    }
    if (c->pack_mem) {
        snprintf(v[3], 32, "%llu", (unsigned long long)c->pack_mem);
        args[n++] = (tg_strategy_arg_t){"pack-mem", v[3]};
    }
    if (c->disk_indices) args[n++] = (tg_strategy_arg_t){"resident-indices", "0"};
    if (c->sampling_indices) args[n++] = (tg_strategy_arg_t){"sampling-indices", "1"};
    if (!c->hot_auto) {
        snprintf(v[2], 32, "%llu", (unsigned long long)c->hot);
        args[n++] = (tg_strategy_arg_t){"hot-cache", v[2]};
    }
    tg_run_opts_t o = {.dataset = ds,
                       .strategy = "diskgnn",
                       .args = args,
                       .nargs = n,
                       .mem_bytes = c->mem,
                       .threads = 1};
    tg_strategy_opts_default(&o.sopts);
    o.sopts.sampler_threads = c->sampler_threads;
    return tg_run_open_opts(r, &o);
}

typedef struct {
    tg_store_t *ref;
    uint64_t bad_rows, steps, first_id;
    float *Xref;
    int signal_fd; /* >= 0: write a byte at the first step, then wait to be killed */
} check_t;

static int check_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, DIM, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    if (!c->steps) c->first_id = b->id;
    c->steps++;
    if (c->signal_fd >= 0) {
        if (write(c->signal_fd, "s", 1) != 1) return -EIO;
        for (;;)
            pause();
    }
    return 0;
}

static const int64_t fan[2] = {5, 5};

static tg_pass_t make_pass(tg_run_t *r, check_t *c, uint64_t epoch, uint64_t first)
{
    return (tg_pass_t){.seeds = r->split[0],
                       .num_seeds = r->split_n[0],
                       .batch_size = 64,
                       .seed = 7,
                       .epoch = epoch,
                       .first_batch = first,
                       .num_layers = 2,
                       .fanouts = fan,
                       .allow_out_of_order = 1,
                       .step = check_step,
                       .ctx = c};
}

/* A training pass of epoch `epoch` (from batch first), announcing the next epoch's when
 * with_next. */
static int run_pass(tg_run_t *r, check_t *c, uint64_t epoch, uint64_t first, int with_next,
                    tg_pass_stats_t *st)
{
    tg_pass_t p = make_pass(r, c, epoch, first);
    tg_pass_t next = make_pass(r, c, epoch + 1, 0);
    next.step = NULL;
    next.ctx = NULL;
    if (with_next) p.next = &next;
    return tg_run_pass(r, &p, st);
}

/* Files in the dataset's derived/ directory (where the runtime files go): 0 when absent. */
static int derived_files(void)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/derived", ds);
    int64_t n = (int64_t)tg_test_count_entries(dir, 1);
    return n < 0 ? 0 : (int)n;
}

/* The seam: the strategy's figures reach the epoch line only through its report hook (the
 * object "preprocess" and the human line's clause), and two passes summed report times and
 * bytes that add, settings and the read amplification that stay. */
static void report_case(const tg_run_t *r, const tg_pass_stats_t *st)
{
    tg_json_t j;
    tg_json_begin(&j);
    char line[256] = "";
    tg_pass_report(r, st, &j, line, sizeof line);
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    TG_CHECK(text && strstr(text, "{\"preprocess\":{\"at_start\":") &&
             strstr(text, "\"read_amp_estimate\":"));
    TG_CHECK(strstr(line, "; sampled and packed ") == line);
    free(text);
    tg_pass_stats_t sum;
    memset(&sum, 0, sizeof sum);
    tg_diskgnn_figures_t one, two;
    TG_CHECK(tg_diskgnn_figures(&sum, &two) == -ENOENT);
    tg_pass_stats_add(r, &sum, st);
    tg_pass_stats_add(r, &sum, st);
    TG_CHECK_OK(tg_diskgnn_figures(st, &one));
    TG_CHECK_OK(tg_diskgnn_figures(&sum, &two));
    TG_CHECK_EQ_U64(two.passes, 2);
    TG_CHECK_EQ_U64(two.read_bytes, 2 * one.read_bytes);
    TG_CHECK_EQ_U64(two.write_bytes, 2 * one.write_bytes);
    TG_CHECK(two.disk_bytes == one.disk_bytes && two.segment == one.segment);
    TG_CHECK(two.prepared_now == one.prepared_now && two.reused == one.reused);
    TG_CHECK(fabs(two.prep_s - 2 * one.prep_s) <= 1e-9 * (1 + one.prep_s));
    TG_CHECK(fabs(two.read_amp_est - one.read_amp_est) <= 1e-9 * (1 + one.read_amp_est));
    TG_CHECK(sum.ntiers == 2 && sum.tiers[1].hits == 2 * st->tiers[1].hits);
}

static void pass_case(const cfg_t *cfg, const char *what)
{
    tg_run_t r;
    if (open_run(&r, cfg) < 0) {
        TG_FAIL("%s: open: %s", what, tg_errmsg());
        return;
    }
    check_t c = {.signal_fd = -1};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
    int before = derived_files();
    /* epoch 0 prepared at its start, announcing epoch 1; epoch 1 prepared during epoch 0; then
     * epoch 2 resumed inside, prepared at its start */
    static const uint64_t first[3] = {0, 0, 4};
    static const int with_next[3] = {1, 0, 0}, at_start[3] = {1, 0, 1};
    for (int pass = 0; pass < 3; pass++) {
        tg_pass_stats_t st;
        c.steps = 0;
        if (run_pass(&r, &c, (uint64_t)pass, first[pass], with_next[pass], &st) < 0)
            TG_FAIL("%s: pass %d: %s", what, pass, tg_errmsg());
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        TG_CHECK(c.steps > 0 && c.first_id == first[pass]);
        tg_diskgnn_figures_t f;
        TG_CHECK_OK(tg_diskgnn_figures(&st, &f));
        TG_CHECK(st.have_io && st.have_cache && f.passes == 1);
        TG_CHECK(f.prepared_now == at_start[pass] && !f.reused);
        TG_CHECK(f.read_bytes > 0 || f.disk_bytes == 0);
        if (cfg->disk_budget) TG_CHECK(f.disk_bytes <= cfg->disk_budget);
        /* a segment longer than the pass is the pass */
        if (cfg->segment) TG_CHECK_EQ_U64(f.segment, TG_MIN(cfg->segment, c.steps));
        TG_CHECK(st.ntiers == 2 && !strcmp(st.tiers[0].name, "diskgnn-hot") &&
                 !strcmp(st.tiers[1].name, "file"));
        /* every row of the batches from one of the two tiers */
        TG_CHECK_EQ_U64(st.tiers[0].lookups, st.tiers[0].hits + st.tiers[1].hits);
        if (pass == 0) report_case(&r, &st);
        if (pass == 1)
            fprintf(stderr,
                    "  %-28s hot hit ratio %.3f, segment %llu, packed %llu bytes, estimated "
                    "read amplification %.2f\n",
                    what, st.cache_lookups ? (double)st.cache_hits / (double)st.cache_lookups : 0,
                    (unsigned long long)f.segment, (unsigned long long)f.disk_bytes,
                    f.read_amp_est);
    }
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before); /* no runtime file left */
    TG_CHECK(!cfg->mem || r.budget.peak <= cfg->mem);
    tg_store_release(c.ref);
    free(c.Xref);
    tg_run_close(&r);
}

TG_TEST(rows_equal_the_file)
{
    /* an epoch reads about 24 x 1000 rows of 64 bytes (1.5 MiB), 8 times the file: the default
     * disk budget (the epoch's bytes) packs every batch's rows; the file's size (192 KB) takes
     * one segment of every batch */
    pass_case(&(cfg_t){.hot = 400 * 68}, "400 hot rows, auto segment");
    pass_case(&(cfg_t){.hot = 400 * 68, .disk_budget = N * DIM * 4}, "the file's size");
    pass_case(&(cfg_t){.hot = 400 * 68, .segment = 1, .disk_budget = 4 << 20},
              "segment 1 (all packed)");
    pass_case(&(cfg_t){.hot = 0, .segment = 3, .sampler_threads = 2, .disk_budget = 4 << 20},
              "no hot rows, segment 3");
    pass_case(&(cfg_t){.hot = 0, .segment = 1000}, "one segment");
    pass_case(&(cfg_t){.hot = 100 * 68, .disk_budget = 600000}, "search under 600 KB");
    pass_case(&(cfg_t){.mem = 24 << 20, .hot_auto = 1}, "--mem 24M, auto");
    /* the indices read into RAM for each sampling only, then freed */
    pass_case(
        &(cfg_t){.hot = 100 * 68, .segment = 2, .disk_budget = 4 << 20, .sampling_indices = 1},
        "indices while sampling");
}

TG_TEST(budgets)
{
    tg_run_t r;
    TG_CHECK_ERR(open_run(&r, &(cfg_t){.mem = 100 << 10}), "--mem");
    /* a disk budget below one copy of the epoch's rows: refused with the bytes it needs */
    TG_CHECK_OK(open_run(&r, &(cfg_t){.disk_budget = 4096}));
    check_t c = {.signal_fd = -1};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
    int before = derived_files();
    tg_pass_stats_t st;
    TG_CHECK_ERR(run_pass(&r, &c, 0, 0, 0, &st), "--disk-budget");
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
    tg_store_release(c.ref);
    free(c.Xref);
    tg_run_close(&r);
}

/* A pass that starts inside the epoch (a rank's share, which every epoch's pass starts at, or a
 * resumed run's last epoch) plans only its own batches: the least working set diskgnn asks for
 * counts them, not the epoch's (a packing larger than --mem leaves makes both refuse, naming the
 * batches counted). A resumed pass whose next epoch starts at 0 counts the whole epoch. */
TG_TEST(share_plans_its_batches)
{
    tg_run_t r;
    TG_CHECK_OK(open_run(&r, &(cfg_t){.mem = 24 << 20, .hot_auto = 1, .pack_mem = 64 << 20}));
    check_t c = {.signal_fd = -1};
    uint64_t n = (r.split_n[0] + 63) / 64, first = n / 2;
    char all[64], share[64];
    snprintf(all, sizeof all, "planning an epoch of %llu batches", (unsigned long long)n);
    snprintf(share, sizeof share, "planning an epoch of %llu batches",
             (unsigned long long)(n - first));
    tg_pass_t p = make_pass(&r, &c, 0, first), next = make_pass(&r, &c, 1, first);
    next.step = NULL;
    next.ctx = NULL;
    p.next = &next;
    tg_pass_stats_t st;
    TG_CHECK_ERR(tg_run_pass(&r, &p, &st), share);
    next.first_batch = 0; /* resumed inside epoch 0: epoch 1 plans all its batches */
    TG_CHECK_ERR(tg_run_pass(&r, &p, &st), all);
    tg_run_close(&r);
}

/* A read error of the packing (features.bin) at a pass's start, of the sampling (an index read)
 * while the next epoch is prepared during this one, and of the executor reading the packed file
 * (an unnamed file, read through /proc/self/fd): the pass that needs it fails naming the file
 * and the offset, and no runtime file is left. */
TG_TEST(read_errors)
{
    static const char *files[3] = {"features.bin", "indices.bin", "/proc/self/fd/"};
    for (int which = 0; which < 3; which++) {
        tg_run_t r;
        TG_CHECK_OK(open_run(
            &r,
            &(cfg_t){.hot = 100 * 68, .segment = 2, .disk_budget = 4 << 20, .disk_indices = 1}));
        check_t c = {.signal_fd = -1};
        TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
        int before = derived_files();
        tg_pass_stats_t st;
        if (which == 1) TG_CHECK_OK(run_pass(&r, &c, 0, 0, 0, &st)); /* the hot rows first */
        tg_io_fault_t f = {
            .op = TG_IO_FAULT_READ, .file = files[which], .lo = 0, .hi = 1ull << 40, .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&f));
        tg_err_clear();
        /* which 1: epoch 1 announces epoch 2, whose sampling fails in the background */
        int rc = run_pass(&r, &c, 1, 0, which == 1, &st);
        if (which == 1 && rc == 0) rc = run_pass(&r, &c, 2, 0, 0, &st);
        const char *m = tg_errmsg();
        if (rc >= 0 || !strstr(m, f.file) || !strstr(m, "offset") ||
            (which == 2 && !strstr(m, "reading the packed file")))
            TG_FAIL("%s: rc %d, message '%s'", f.file, rc, m);
        else
            fprintf(stderr, "  %s\n", m);
        tg_io_fault_clear();
        TG_CHECK_EQ_U64(c.bad_rows, 0);
        tg_run_close(&r);
        TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
        tg_store_release(c.ref);
        free(c.Xref);
    }
}

/* SIGKILL while epoch 1 is packed in the background (epoch 0 waits in its first step): the
 * unnamed runtime files go with the process. */
TG_TEST(killed_while_packing)
{
    int before = derived_files();
    int fds[2];
    TG_CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        tg_run_t r;
        if (open_run(&r, &(cfg_t){.hot = 100 * 68, .segment = 2, .disk_budget = 4 << 20}) < 0)
            _exit(2);
        check_t c = {.signal_fd = fds[1]};
        if (tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}) < 0) _exit(3);
        tg_pass_stats_t st;
        run_pass(&r, &c, 0, 0, 1, &st);
        _exit(4);
    }
    close(fds[1]);
    char ch;
    TG_CHECK(read(fds[0], &ch, 1) == 1);
    TG_CHECK(kill(pid, SIGKILL) == 0);
    int status;
    TG_CHECK(waitpid(pid, &status, 0) == pid);
    TG_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    close(fds[0]);
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
}

static int stop_step(void *ctx, const tg_batch_t *b, const float *X)
{
    (void)ctx;
    (void)b;
    (void)X;
    return TG_PASS_STOP;
}

/* A pass stopped at its first batch while the next epoch is prepared, and the run closed at
 * once: the inspector stops before the adjacency it samples from is closed (a use after free
 * under ASan before tg_strategy_i.drain), and nothing is left behind. */
TG_TEST(close_while_preparing)
{
    int before = derived_files();
    for (int k = 0; k < 5; k++) {
        tg_run_t r;
        TG_CHECK_OK(open_run(&r, &(cfg_t){.hot = 100 * 68, .disk_indices = k % 2}));
        check_t c = {.signal_fd = -1};
        tg_pass_t p = make_pass(&r, &c, 0, 0);
        tg_pass_t next = make_pass(&r, &c, 1, 0);
        next.step = NULL;
        p.step = stop_step;
        p.next = &next;
        tg_pass_stats_t st;
        TG_CHECK_OK(tg_run_pass(&r, &p, &st));
        TG_CHECK(st.stopped && st.steps == 1);
        tg_run_close(&r);
    }
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
}

/* Whether the pass's generation was prepared at its start (1) or before (0); -1: no figures. */
static int prepared_now(const tg_pass_stats_t *st)
{
    tg_diskgnn_figures_t f;
    return tg_diskgnn_figures(st, &f) < 0 ? -1 : f.prepared_now;
}

/* The inspector's generation waits across an evaluation pass: epoch 0 announces epoch 1, an
 * evaluation pass (its own generation, prepared at its start) runs in between, and epoch 1 then
 * trains the generation prepared in the background, its rows still the file's. A generation
 * announced for another pass than the one that comes is dropped and the pass prepares its own;
 * a drain between passes drops one still in preparation. */
TG_TEST(generation_across_passes)
{
    int before = derived_files();
    tg_run_t r;
    TG_CHECK_OK(open_run(&r, &(cfg_t){.hot = 100 * 68, .segment = 2, .disk_budget = 4 << 20}));
    check_t c = {.signal_fd = -1};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
    tg_pass_stats_t st;
    TG_CHECK_OK(run_pass(&r, &c, 0, 0, 1, &st));
    TG_CHECK(prepared_now(&st) == 1);
    uint64_t all = c.steps;
    tg_pass_t ev = make_pass(&r, &c, 0, 0);
    ev.allow_out_of_order = 0;
    ev.num_seeds = r.split_n[0] / 2;
    c.steps = 0;
    TG_CHECK_OK(tg_run_pass(&r, &ev, &st));
    TG_CHECK(prepared_now(&st) == 1 && c.steps > 0 && c.steps < all);
    c.steps = 0;
    TG_CHECK_OK(run_pass(&r, &c, 1, 0, 1, &st)); /* announces epoch 2 */
    TG_CHECK(prepared_now(&st) == 0 && c.steps == all);
    /* epoch 2 was announced, epoch 5 comes: prepared now */
    c.steps = 0;
    TG_CHECK_OK(run_pass(&r, &c, 5, 0, 1, &st)); /* announces epoch 6 */
    TG_CHECK(prepared_now(&st) == 1 && c.steps == all);
    /* drained while epoch 6 may still be in preparation, then epoch 6 prepared again */
    r.strat_i->drain(r.strat);
    c.steps = 0;
    TG_CHECK_OK(run_pass(&r, &c, 6, 0, 0, &st));
    TG_CHECK(prepared_now(&st) == 1 && c.steps == all);
    TG_CHECK_EQ_U64(c.bad_rows, 0);
    tg_run_close(&r);
    TG_CHECK_EQ_U64((uint64_t)derived_files(), (uint64_t)before);
    tg_store_release(c.ref);
    free(c.Xref);
}

/* The CLI: the epoch JSON's "preprocess" object; from the second epoch on the preparation ran
 * during the epoch before. --reuse-samples 2 packs once for two epochs. */
TG_TEST(cli_json)
{
    char *out = NULL;
    char dir[4300];
    for (int reuse = 1; reuse <= 2; reuse++) {
        snprintf(dir, sizeof dir, "%s/run%d", root, reuse);
        int rc = tg_test_cli(&out,
                             "train %s --out %s --model sage --layers 2 --hidden 16 --fanouts 5,5 "
                             "--batch-size 64 --epochs 3 --threads 1 --json --strategy diskgnn "
                             "--io-depth 8 --mem 64M --hot-cache 20K --reuse-samples %d",
                             ds, dir, reuse);
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        TG_CHECK(out && strstr(out, "\"preprocess\":{\"at_start\":true"));
        TG_CHECK(out && strstr(out, "\"preprocess\":{\"at_start\":false"));
        /* reused: epoch 2 trains epoch 1's generation (and epoch 3 a new one); fresh: never */
        TG_CHECK(out && !strstr(out, "\"at_start\":true,\"reused\":true"));
        TG_CHECK(out &&
                 (strstr(out, "\"at_start\":false,\"reused\":true") != NULL) == (reuse == 2));
        TG_CHECK(out && (strstr(out, "of an earlier epoch") != NULL) == (reuse == 2));
        for (int e = 0; e < 3 && rc == 0; e++) {
            TG_CHECK(json_value(out, "disk_bytes", e) > 0);
            TG_CHECK(json_value(out, "read_amp_estimate", e) >= 1.0);
        }
        TG_CHECK(out && strstr(out, "diskgnn: hot rows"));
        free(out);
        out = NULL;
    }
}

/* Without --disk-budget a generation may take the bytes its batches ask for (the planner's
 * rule, tg_cost_disk_budget_rule, with the free disk of the test's directory): every batch then
 * reads its own rows only (the layout's estimate: amplification 1), where the feature file's
 * size, the default before, shares segments and reads more. */
TG_TEST(default_budget_holds_the_epoch)
{
    char *out = NULL;
    char dir[4300];
    for (int given = 0; given <= 1; given++) {
        snprintf(dir, sizeof dir, "%s/budget%d", root, given);
        int rc = tg_test_cli(&out,
                             "train %s --out %s --model sage --layers 2 --hidden 16 --fanouts 5,5 "
                             "--batch-size 64 --epochs 2 --threads 1 --json --strategy diskgnn "
                             "--io-depth 8 --hot-cache 0 %s",
                             ds, dir, given ? "--disk-budget 192000" : "");
        TG_CHECK(rc == 0);
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        double amp = out ? json_value(out, "read_amp_estimate", 0) : 0;
        if (given)
            TG_CHECK(amp > 1.2);
        else
            TG_CHECK(amp == 1.0);
        TG_CHECK(out && (strstr(out, "diskgnn: disk budget") != NULL) == !given);
        free(out);
        out = NULL;
    }
}

int main(void)
{
    alarm(300);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("diskgnn"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = N;
    so.dim = DIM;
    synth_write(ds, &so);
    TG_RUN(rows_equal_the_file);
    TG_RUN(budgets);
    TG_RUN(share_plans_its_batches);
    TG_RUN(read_errors);
    TG_RUN(killed_while_packing);
    TG_RUN(close_while_preparing);
    TG_RUN(generation_across_passes);
    TG_RUN(cli_json);
    TG_RUN(default_budget_holds_the_epoch);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
