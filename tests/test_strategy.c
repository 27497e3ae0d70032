/* Strategies end to end: memory, mmap and gnndrive (in order, any shape) train bit-identical
 * models for the same seed; the per-epoch JSON carries the I/O keys; --strategy auto picks by
 * --mem; a run stopped after every single batch and resumed each time ends exactly where an
 * uninterrupted one does (in process, with the stop flag); out-of-order gnndrive learns as well;
 * --verify refuses a changed file, a changed size is refused always; eval and infer out of core
 * equal their in-memory results: byte for byte with the same chunks (the same GEMM shapes), within
 * TG_TEST_RTOL with other chunks. */
#include "test_engine_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/engine.h"
#include "engine/engine-impl.h"

static char root[4000], ds[4200];

/* COMMON with the default --threads 2 */
#define TWO_THREADS                                                                                \
    "--model sage --layers 2 --hidden 16 --fanouts 5,5 --batch-size 64 --seed 3 --threads 2 "      \
    "--io-depth 8"
#define COMMON                                                                                     \
    "--model sage --layers 2 --hidden 16 --fanouts 5,5 --batch-size 64 --seed 3 --threads 1 "      \
    "--io-depth 8"

/* Runs `train` with the given extra flags into RUNDIR root/name (3 epochs and no read merging
 * unless the flags say otherwise); returns the output. */
static char *train(const char *name, const char *flags, int *rc)
{
    char *out = NULL;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    tg_rmtree(dir);
    *rc = tg_test_cli(&out, "train %s --out %s " COMMON " --json %s%s %s", ds, dir,
                      strstr(flags, "--epochs") ? "" : "--epochs 3 ",
                      strstr(flags, "--io-gap") ? "" : "--io-gap 0", flags);
    if (*rc) fprintf(stderr, "train %s failed:\n%s\n", name, out ? out : "");
    return out;
}

static void run_file(char *buf, size_t len, const char *name, const char *file)
{
    snprintf(buf, len, "%s/%s/%s", root, name, file);
}

/* The runs compared with memory: every exact strategy of the table with its example options
 * (a new exact strategy is covered without editing this file), and gnndrive's corner shapes. */
#define MAX_RUNS 24
static struct {
    char name[64], flags[512];
} runs[MAX_RUNS];
static int nruns;

static void add_run(const char *name, const char *flags)
{
    if (nruns >= MAX_RUNS) return;
    snprintf(runs[nruns].name, sizeof runs[nruns].name, "%s", name);
    snprintf(runs[nruns].flags, sizeof runs[nruns].flags, "%s", flags);
    nruns++;
}

static void plan_runs(void)
{
    nruns = 0;
    add_run("memory", "--strategy memory");
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        if (!(si->caps & TG_STRAT_EXACT) || !strcmp(si->name, "memory")) continue;
        char flags[512];
        snprintf(flags, sizeof flags, "--strategy %s %s", si->name,
                 si->example_args ? si->example_args : "");
        add_run(si->name, flags);
    }
    add_run("gnndrive-small", "--strategy gnndrive --extractors 3 --queue-depth 1 --chunk-rows 64 "
                              "--sampler-threads 0 --features-in-ram 0");
    add_run("gnndrive-gap", "--strategy gnndrive --io-gap 2K --extractors 1 --features-in-ram 0");
    /* the budget holds the whole feature file and the indices: RAM tiers, no buffer */
    add_run("gnndrive-ram", "--strategy gnndrive --mem 64M");
}

TG_TEST(strategies_agree)
{
    plan_runs();
    char *outs[MAX_RUNS] = {0};
    int rc;
    for (int i = 0; i < nruns; i++) {
        outs[i] = train(runs[i].name, runs[i].flags, &rc);
        TG_CHECK(rc == 0);
    }
    char a[4400], b[4400];
    for (int i = 1; i < nruns; i++) {
        run_file(a, sizeof a, runs[0].name, TG_CKPT_BEST_NAME);
        run_file(b, sizeof b, runs[i].name, TG_CKPT_BEST_NAME);
        if (!tg_test_same_file(a, b)) TG_FAIL("best.bin of %s differs from memory's", runs[i].name);
        run_file(a, sizeof a, runs[0].name, TG_CKPT_NAME);
        run_file(b, sizeof b, runs[i].name, TG_CKPT_NAME);
        if (!tg_test_same_file(a, b))
            TG_FAIL("checkpoint.bin of %s differs from memory's", runs[i].name);
        for (int e = 0; e < 3; e++) {
            TG_CHECK(json_value(outs[i], "train_loss", e) == json_value(outs[0], "train_loss", e));
            /* the same batches use the same feature and index bytes, wherever they come from */
            TG_CHECK(json_value(outs[i], "io_needed_bytes", e) ==
                     json_value(outs[0], "io_needed_bytes", e));
        }
        TG_CHECK(json_value(outs[i], "test_acc", 3) == json_value(outs[0], "test_acc", 3));
    }
    /* the keys of every epoch line */
    static const char *keys[] = {
        "io_requests",    "io_read_bytes", "io_needed_bytes", "io_wait_s", "cache_hit_ratio",
        "peak_rss_bytes", "time_s",        "sample_s",        "gather_s",  "compute_s",
        "train_loss",     "valid_acc",     "cache_tiers"};
    for (int i = 0; i < nruns; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char key[64];
            snprintf(key, sizeof key, "\"%s\":", keys[k]);
            if (json_lines_with(outs[i], key) < 3)
                TG_FAIL("%s: fewer than 3 lines with %s", runs[i].name, key);
        }
    TG_CHECK(json_value(outs[0], "io_needed_bytes", 0) > 0);
    TG_CHECK(isnan(json_value(outs[0], "cache_hit_ratio", 0))); /* memory: no cache */
    for (int i = 0; i < nruns; i++) {
        if (!strcmp(runs[i].name, "mmap")) /* the kernel's cache: not observable per access */
            TG_CHECK(isnan(json_value(outs[i], "cache_hit_ratio", 0)));
        if (strncmp(runs[i].name, "gnndrive", 8) != 0) continue;
        if (!strcmp(runs[i].name, "gnndrive-ram")) {
            TG_CHECK(strstr(outs[i], "\"cache_tiers\":[{\"name\":\"gnndrive-ram\"") != NULL);
            TG_CHECK(json_value(outs[i], "cache_hit_ratio", 1) == 1.0);
            TG_CHECK(strstr(outs[i], "the whole feature file is in RAM") != NULL);
            TG_CHECK(strstr(outs[i], "indices.bin in RAM") != NULL);
            continue;
        }
        double h = json_value(outs[i], "cache_hit_ratio", 1);
        TG_CHECK(h >= 0 && h <= 1);
        TG_CHECK(json_value(outs[i], "io_requests", 0) > 0);
        TG_CHECK(json_value(outs[i], "io_read_bytes", 0) > 0);
        TG_CHECK(json_value(outs[i], "io_wait_s", 0) >= 0);
        /* the tiers in lookup order: the feature buffer, then the file for its misses */
        TG_CHECK(strstr(outs[i], "\"cache_tiers\":[{\"name\":\"featbuf\",\"lookups\":") != NULL);
        TG_CHECK(strstr(outs[i], "{\"name\":\"file\",\"lookups\":") != NULL);
    }
    /* gnndrive's example (--mem 32M): the final object reports the budget and what lies outside
     * it, and the plain log line names the I/O figures */
    for (int i = 0; i < nruns; i++) {
        if (strcmp(runs[i].name, "gnndrive") != 0) continue;
        TG_CHECK(json_value(outs[i], "data_bytes_peak", 0) <= 32 << 20);
        TG_CHECK(json_value(outs[i], "batch_bytes_peak", 3) > 0);
        TG_CHECK(json_value(outs[i], "model_bytes", 0) > 0);
        TG_CHECK(json_value(outs[i], "activation_bytes", 0) > 0);
        TG_CHECK(strstr(outs[i], "read /") && strstr(outs[i], "hit ratio"));
    }
    for (int i = 0; i < nruns; i++)
        free(outs[i]);
}

TG_TEST(auto_choice)
{
    /* wide rows: 4000 x 1024 f32 = 16 MiB of features, more than gnndrive's minimum */
    char wide[4300], dir[4400];
    snprintf(wide, sizeof wide, "%s/wide", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 4000;
    so.dim = 1024;
    synth_write(wide, &so);
    char *out = NULL;
    snprintf(dir, sizeof dir, "%s/auto-big", root);
    int rc =
        tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --json --mem 256M", wide, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "strategy memory: planned"));
    TG_CHECK(out && strstr(out, "\"strategy\":\"memory\""));
    if (rc || !out || !strstr(out, "\"strategy\":\"memory\""))
        fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    /* below memory's data and the estimate of the model with its batches (about 67 MiB) */
    snprintf(dir, sizeof dir, "%s/auto-small", root);
    rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --json --mem 60M --io-gap 0",
                     wide, dir);
    /* the planner's choice (engine/plan_profile.h): an exact strategy out of core */
    TG_CHECK(rc == 0 && out && strstr(out, ": planned, the fastest exact strategy"));
    TG_CHECK(out && strstr(out, "\"strategy\":\"") && !strstr(out, "\"strategy\":\"memory\"") &&
             !strstr(out, "\"strategy\":\"hier\""));
    TG_CHECK(json_value(out, "data_bytes_peak", 0) <= 60 << 20);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    /* Wide rows make the layer-wise evaluation run in chunks smaller than the graph: memory and
     * the strategy out of core must still evaluate with the same chunks (the same GEMM shapes), so
     * their checkpoints, which record the validation loss, are the same bytes. */
    char a[4500], b[4500];
    snprintf(a, sizeof a, "%s/auto-big/%s", root, TG_CKPT_NAME);
    snprintf(b, sizeof b, "%s/auto-small/%s", root, TG_CKPT_NAME);
    if (!tg_test_same_file(a, b))
        TG_FAIL("wide rows: the out-of-core checkpoint.bin differs from memory's (other eval "
                "chunks?)");
}

TG_TEST(out_of_order_learns)
{
    int rc;
    char *mem = train("ooo-ref", "--strategy memory --epochs 4", &rc);
    char *ooo = train("ooo", "--strategy gnndrive --out-of-order --extractors 3 --epochs 4", &rc);
    TG_CHECK(rc == 0);
    double a = json_value(mem, "test_acc", 4), b = json_value(ooo, "test_acc", 4);
    fprintf(stderr, "  test accuracy: in order %.4f, out of order %.4f\n", a, b);
    TG_CHECK(fabs(a - b) < 0.05);
    free(mem);
    free(ooo);
}

/* The CLI flags of a strategy's example (e.g. "--mem 32M --extractors 3") as tg_train options:
 * --mem into o->mem_bytes, the strategy options into args (pointing into buf). */
static void example_to_opts(const char *flags, tg_train_opts_t *o, char *buf, size_t len,
                            tg_strategy_arg_t *args, int max)
{
    snprintf(buf, len, "%s", flags ? flags : "");
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (strncmp(t, "--", 2) != 0) continue;
        const char *name = t + 2;
        if (!strcmp(name, "mem")) {
            char *v = strtok_r(NULL, " ", &save);
            TG_CHECK(v && tg_parse_size(v, &o->mem_bytes) == 0);
            continue;
        }
        int kind = tg_strategy_opt_kind(name);
        TG_CHECK(kind >= 0 && n < max);
        if (kind < 0 || n >= max) continue;
        args[n].name = name;
        args[n].value = kind ? strtok_r(NULL, " ", &save) : NULL;
        n++;
    }
    o->strategy_args = args;
    o->num_strategy_args = n;
}

/* In process: a stop request before every call stops after one batch; resuming again and again
 * must end exactly where one uninterrupted run ends. flags: the strategy's options. */
static void resume_case(const char *strategy, const char *flags, int out_of_order)
{
    char dir_ref[4300], dir[4300];
    snprintf(dir_ref, sizeof dir_ref, "%s/resume-ref-%s%d", root, strategy, out_of_order);
    snprintf(dir, sizeof dir, "%s/resume-%s%d", root, strategy, out_of_order);
    tg_rmtree(dir_ref);
    tg_rmtree(dir);
    tg_train_opts_t o;
    tg_train_opts_default(&o);
    o.dataset = ds;
    o.strategy = strategy;
    o.model.hidden = 16;
    o.fanouts[0] = o.fanouts[1] = 5;
    o.batch_size = 64;
    o.epochs = 3;
    o.seed = 3;
    char buf[640], all[600];
    tg_strategy_arg_t args[16];
    snprintf(all, sizeof all, "--io-depth 8 --io-gap 0 %s%s", flags ? flags : "",
             out_of_order ? " --out-of-order" : "");
    example_to_opts(all, &o, buf, sizeof buf, args, 16);
    o.eval_every = 2;
    o.checkpoint_every = 0;
    tg_train_result_t ref, res;
    o.out_dir = dir_ref;
    TG_CHECK_OK(tg_train(&o, &ref));
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    o.out_dir = dir;
    int calls = 0, rc;
    uint64_t last_epoch = 0, last_batch = 0;
    while ((rc = tg_train(&o, &res)) == -EINTR && calls < 200) {
        TG_CHECK(res.interrupted);
        /* progress every time (out of order may drain more than one batch) */
        TG_CHECK(res.stopped_epoch > last_epoch ||
                 (res.stopped_epoch == last_epoch && res.stopped_batch > last_batch));
        last_epoch = res.stopped_epoch;
        last_batch = res.stopped_batch;
        o.resume = 1;
        calls++;
    }
    if (rc < 0) TG_FAIL("%s: %s", strategy, tg_errmsg());
    fprintf(stderr, "  %s%s: %d interruptions\n", strategy, out_of_order ? " out of order" : "",
            calls);
    /* out of order, a stop first trains the batches already handed out: how many depends on
     * timing (2 stops under ASan on a busy machine, 4 on an idle one), so only one is sure */
    TG_CHECK(calls >= (out_of_order ? 1 : 10));
    TG_CHECK_EQ_U64(res.epochs_done, 3);
    TG_CHECK(res.last_train_loss == ref.last_train_loss || out_of_order);
    if (!out_of_order) {
        char a[4400], b[4400];
        snprintf(a, sizeof a, "%s/%s", dir_ref, TG_CKPT_NAME);
        snprintf(b, sizeof b, "%s/%s", dir, TG_CKPT_NAME);
        if (!tg_test_same_file(a, b)) TG_FAIL("%s: resumed checkpoint.bin differs", strategy);
        snprintf(a, sizeof a, "%s/%s", dir_ref, TG_CKPT_BEST_NAME);
        snprintf(b, sizeof b, "%s/%s", dir, TG_CKPT_BEST_NAME);
        if (!tg_test_same_file(a, b)) TG_FAIL("%s: resumed best.bin differs", strategy);
        TG_CHECK(res.test_acc == ref.test_acc);
    }
}

TG_TEST(resume_after_every_batch)
{
    tg_log_set_level(TG_LOG_WARN);
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        if (si->caps & TG_STRAT_EXACT) resume_case(si->name, si->example_args, 0);
    }
    /* hier makes batches of its own (mega-batches of parts): its schedule resumes exactly too */
    resume_case("hier", tg_strategy_info_find("hier")->example_args, 0);
    /* through the buffer, as the example: with the whole file in RAM the extractors would pull
     * every batch before the first stop, and the drain would leave nothing to resume */
    resume_case("gnndrive", "--extractors 3 --features-in-ram 0", 1);
    tg_log_set_level(TG_LOG_INFO);
}

/* A copy of the dataset whose files can be damaged. */
static void copy_dataset(const char *dst)
{
    synth_opts_t so;
    synth_default(&so);
    synth_write(dst, &so);
}

TG_TEST(changed_files_refused)
{
    char dir[4300], feat[4400], out_dir[4400];
    snprintf(dir, sizeof dir, "%s/damaged", root);
    copy_dataset(dir);
    snprintf(feat, sizeof feat, "%s/features.bin", dir);
    snprintf(out_dir, sizeof out_dir, "%s/damaged-run", root);
    /* one byte changed, size unchanged: only --verify notices */
    FILE *f = fopen(feat, "r+b");
    TG_CHECK(f != NULL);
    if (!f) return;
    fseek(f, 1000, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 1000, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --io-gap 0 --verify", dir,
                         out_dir);
    TG_CHECK(rc != 0 && out && strstr(out, "features.bin: checksum"));
    free(out);
    tg_rmtree(out_dir);
    rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --io-gap 0", dir, out_dir);
    TG_CHECK(rc == 0);
    free(out);
    tg_rmtree(out_dir);
    /* a size that differs from meta.txt is refused always, by every strategy */
    TG_CHECK(truncate(feat, 4096) == 0);
    for (int i = 0; i < tg_strategy_count(); i++) {
        rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --io-gap 0 --strategy %s",
                         dir, out_dir, tg_strategy_info(i)->name);
        TG_CHECK(rc != 0 && out && strstr(out, "features.bin: size is 4096 bytes"));
        free(out);
        tg_rmtree(out_dir);
    }
}

TG_TEST(eval_and_infer_out_of_core)
{
    int rc;
    char *out = train("ev", "--strategy memory --epochs 2", &rc);
    free(out);
    char run[4300];
    snprintf(run, sizeof run, "%s/ev", root);
    char *a = NULL, *b = NULL, *c = NULL;
    rc = tg_test_cli(&a, "eval %s --checkpoint %s --json", ds, run);
    TG_CHECK(rc == 0);
    rc = tg_test_cli(&b, "eval %s --checkpoint %s --json --strategy gnndrive --mem 32M", ds, run);
    TG_CHECK(rc == 0);
    rc = tg_test_cli(&c, "eval %s --checkpoint %s --json --strategy mmap --mem 1M", ds, run);
    TG_CHECK(rc == 0);
    /* Exact: the default chunk does not depend on the strategy (here one chunk of all 600
     * nodes), so every strategy runs the same GEMM shapes. */
    TG_CHECK(json_value(a, "acc", 0) == json_value(b, "acc", 0));
    TG_CHECK(json_value(a, "acc", 0) == json_value(c, "acc", 0));
    TG_CHECK(json_value(a, "loss", 0) == json_value(b, "loss", 0));
    free(a);
    free(b);
    free(c);
    /* sampled evaluation goes through the strategy's pipeline */
    out = train("ev-s", "--strategy memory --epochs 2 --eval-fanouts train", &rc);
    double acc_train = json_value(out, "test_acc", 2);
    free(out);
    snprintf(run, sizeof run, "%s/ev-s", root);
    rc = tg_test_cli(&a, "eval %s --checkpoint %s --json --strategy gnndrive --mem 32M", ds, run);
    TG_CHECK(rc == 0 && json_value(a, "acc", 0) == acc_train);
    free(a);
    /* a budget below the minimum is refused by eval too */
    rc = tg_test_cli(&a, "eval %s --checkpoint %s --strategy gnndrive --mem 1M", ds, run);
    TG_CHECK(rc != 0 && a && strstr(a, "give --mem"));
    free(a);
    /* infer from disk in chunks of 100 nodes runs the GEMM shapes of RAM in chunks of 100: the
     * same bytes */
    char p1[4400], p2[4400], p3[4400];
    snprintf(p1, sizeof p1, "%s/ev/p1.i32", root);
    snprintf(p2, sizeof p2, "%s/ev/p2.i32", root);
    snprintf(p3, sizeof p3, "%s/ev/p3.i32", root);
    snprintf(run, sizeof run, "%s/ev", root);
    rc = tg_test_cli(NULL, "infer %s --checkpoint %s --out %s --embeddings", ds, run, p1);
    TG_CHECK(rc == 0);
    rc = tg_test_cli(NULL,
                     "infer %s --checkpoint %s --out %s --embeddings --strategy gnndrive --mem 32M "
                     "--chunk-nodes 100",
                     ds, run, p2);
    TG_CHECK(rc == 0);
    rc = tg_test_cli(NULL,
                     "infer %s --checkpoint %s --out %s --embeddings --strategy memory "
                     "--chunk-nodes 100",
                     ds, run, p3);
    TG_CHECK(rc == 0);
    char e1[4500], e2[4500], e3[4500];
    snprintf(e1, sizeof e1, "%s.emb", p1);
    snprintf(e2, sizeof e2, "%s.emb", p2);
    snprintf(e3, sizeof e3, "%s.emb", p3);
    TG_CHECK(tg_test_same_file(p3, p2));
    TG_CHECK(tg_test_same_file(e3, e2));
    /* RAM in one chunk against disk in chunks of 100: other GEMM row blocks, so the embeddings
     * agree within the tolerance (on the Haswell and Zen kernels they differ in the last bits);
     * predictions across chunk sizes are checked against their logits in test_engine */
    double worst = tg_test_check_close_files(e1, e2, TG_TEST_RTOL);
    fprintf(stderr, "  embeddings, one chunk vs chunks of 100 (%s): worst |a-b|/(1+|a|) %.3g\n",
            tg_test_blas_core(), worst);
}

TG_TEST(limits)
{
    /* --batches-per-epoch and --eval-max-nodes hold for every strategy of the table */
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        const char *ex = si->example_args ? si->example_args : "";
        char name[96], flags[600];
        snprintf(name, sizeof name, "limits-%s", si->name);
        snprintf(flags, sizeof flags,
                 "--strategy %s %s --batches-per-epoch 2 --eval-max-nodes 50 --eval-fanouts train",
                 si->name, ex);
        int rc;
        char *out = train(name, flags, &rc);
        TG_CHECK(rc == 0);
        TG_CHECK(json_value(out, "batches", 0) == 2);
        TG_CHECK(strstr(out, "limited by --batches-per-epoch") != NULL);
        free(out);
        char run[4300];
        snprintf(run, sizeof run, "%s/%s", root, name);
        char *a = NULL;
        rc = tg_test_cli(&a, "eval %s --checkpoint %s --json --max-nodes 50 --strategy %s %s", ds,
                         run, si->name, ex);
        TG_CHECK(rc == 0 && json_value(a, "count", 0) == 50);
        free(a);
    }
}

TG_TEST(options_from_table)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/opts", root);
    char *out = NULL;
    /* a value out of the table's range names the option, the strategy and the range */
    tg_rmtree(dir);
    int rc = tg_test_cli(&out,
                         "train %s --out %s " COMMON " --epochs 1 --strategy gnndrive "
                         "--extractors 0",
                         ds, dir);
    TG_CHECK(
        rc != 0 && out &&
        strstr(out,
               "strategy gnndrive: --extractors must be between 1 and 64 (an integer), got '0'"));
    free(out);
    /* one rule, one message, whatever is wrong with the value */
    tg_rmtree(dir);
    rc = tg_test_cli(&out,
                     "train %s --out %s " COMMON " --epochs 1 --strategy gnndrive --extractors 1.5",
                     ds, dir);
    TG_CHECK(rc != 0 && out &&
             strstr(out, "strategy gnndrive: --extractors must be between 1 and 64 (an integer), "
                         "got '1.5'"));
    free(out);
    rc = tg_test_cli(&out,
                     "train %s --out %s " COMMON " --epochs 1 --strategy gnndrive "
                     "--features-in-ram 2",
                     ds, dir);
    TG_CHECK(
        rc != 0 && out &&
        strstr(out, "--features-in-ram must be between 0 and 0 (an integer or auto), got '2'"));
    free(out);
    /* a name no strategy knows is refused by the parser */
    rc = tg_test_cli(&out, "train %s --out %s --extractor 2", ds, dir);
    TG_CHECK(rc != 0 && out && strstr(out, "unknown option '--extractor'"));
    free(out);
    rc = tg_test_cli(&out, "train %s --out %s --strategy bogus", ds, dir);
    TG_CHECK(rc != 0 && out && strstr(out, "expected auto, memory, mmap, gnndrive"));
    free(out);
    /* an option of another strategy is ignored with a note */
    tg_rmtree(dir);
    rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --strategy mmap --extractors 3",
                     ds, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "--extractors is an option of gnndrive"));
    free(out);
    /* --help lists every strategy and its options from the table */
    rc = tg_test_cli(&out, "train --help");
    TG_CHECK(rc == 0 && out);
    for (int i = 0; out && i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        TG_CHECK(strstr(out, si->name) != NULL);
        for (int k = 0; k < si->num_opts; k++) {
            char flag[96];
            snprintf(flag, sizeof flag, "--%s", si->opts[k].name);
            TG_CHECK(strstr(out, flag) != NULL);
        }
    }
    free(out);
    /* the parser itself: defaults, "auto", sizes */
    const tg_strategy_info_t *gd = tg_strategy_info_find("gnndrive");
    TG_CHECK(gd && gd->config_size >= sizeof(int64_t));
    if (!gd) return;
    int64_t cfg[32];
    tg_strategy_arg_t args[] = {{"io-gap", "auto"}, {"feature-buffer", "2M"}};
    TG_CHECK_OK(tg_strategy_parse(gd, args, 2, cfg, 0));
    for (int k = 0; k < gd->num_opts; k++) {
        int64_t v = *(int64_t *)((char *)cfg + gd->opts[k].offset);
        if (!strcmp(gd->opts[k].name, "io-gap"))
            TG_CHECK(v == -1);
        else if (!strcmp(gd->opts[k].name, "feature-buffer"))
            TG_CHECK(v == 2 << 20);
        else
            TG_CHECK(v == gd->opts[k].def);
    }
    tg_strategy_arg_t bad[] = {{"out-of-order", "1"}};
    TG_CHECK(tg_strategy_parse(gd, bad, 1, cfg, 0) == -EINVAL);
    TG_CHECK(strstr(tg_errmsg(), "--out-of-order takes no value") != NULL);
    tg_strategy_arg_t none[] = {{"no-such-option", "1"}};
    TG_CHECK(tg_strategy_parse(gd, none, 1, cfg, 0) == -EINVAL);
}

TG_TEST(whole_process_budget)
{
    char wide[4300], dir[4400];
    snprintf(wide, sizeof wide, "%s/wide", root); /* written by auto_choice */
    snprintf(dir, sizeof dir, "%s/budget", root);
    char *out = NULL;
    /* the split is printed, and the feature buffer takes what is left */
    tg_rmtree(dir);
    int rc = tg_test_cli(&out,
                         "train %s --out %s " COMMON " --epochs 1 --json --mem 80M "
                         "--strategy gnndrive --io-gap 0 --eval-fanouts train",
                         wide, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "memory budget 80.00 MiB: process"));
    TG_CHECK(out && strstr(out, "left for gnndrive's caches and buffers"));
    TG_CHECK(json_value(out, "data_bytes_peak", 0) <= 80 << 20);
    TG_CHECK(json_value(out, "mem_bytes", 0) == 80 << 20);
    free(out);
    /* tiergnn eval's sampled pass plans the same budget */
    rc = tg_test_cli(&out, "eval %s --checkpoint %s --mem 80M --strategy gnndrive", wide, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "memory budget 80.00 MiB: process"));
    free(out);
    rc = tg_test_cli(&out, "eval %s --checkpoint %s --mem 30M --strategy gnndrive", wide, dir);
    TG_CHECK(rc != 0 && out && strstr(out, "is too small for this model and batch size"));
    free(out);
    /* too small for the model and one batch: refused with the amount needed */
    tg_rmtree(dir);
    rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --mem 30M --strategy mmap",
                     wide, dir);
    TG_CHECK(rc != 0 && out && strstr(out, "is too small for this model and batch size"));
    TG_CHECK(out && strstr(out, "input matrices in flight") && strstr(out, "give --mem"));
    free(out);
    /* Sampler threads left at their default give way to --mem before it refuses: find what 2
     * and 1 sampler threads need (5 and 3 matrices of 64 x 26 rows of 4 KiB), then give the
     * middle without --sampler-threads. An explicit count is kept, and refused. */
    unsigned long long need[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        rc = tg_test_cli(&out,
                         "train %s --out %s " TWO_THREADS " --epochs 1 --mem 8M --strategy mmap "
                         "--sampler-threads %d",
                         wide, dir, 2 - t);
        const char *g = out ? strstr(out, "give --mem ") : NULL;
        TG_CHECK(rc != 0 && g && sscanf(g, "give --mem %lluM", &need[t]) == 1);
        free(out);
    }
    TG_CHECK(need[0] >= need[1] + 4);
    /* a refused --mem leaves no checkpoint behind: the retry needs no --resume */
    char ck[4500];
    snprintf(ck, sizeof ck, "%s/%s", dir, TG_CKPT_NAME);
    TG_CHECK(access(ck, F_OK) != 0);
    unsigned long long mid = (need[0] + need[1]) / 2;
    rc = tg_test_cli(&out,
                     "train %s --out %s " TWO_THREADS
                     " --epochs 1 --mem %lluM --strategy mmap --eval-fanouts train",
                     wide, dir, mid);
    TG_CHECK(rc == 0 && out && strstr(out, "--sampler-threads 1 (default 2)"));
    TG_CHECK(out && strstr(out, "2 thread(s) + 1 sampler thread(s)"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    tg_rmtree(dir);
    rc = tg_test_cli(&out,
                     "train %s --out %s " TWO_THREADS " --epochs 1 --mem %lluM --strategy mmap "
                     "--sampler-threads 2",
                     wide, dir, mid);
    TG_CHECK(rc != 0 && out && strstr(out, "5 input matrices in flight"));
    free(out);
    /* the cgroup's limit: taken when no --mem, lowers a larger --mem, leaves a smaller one */
    char why[256];
    TG_CHECK(tg_budget_effective(0, 0, why, sizeof why) == 0 && !why[0]);
    TG_CHECK(tg_budget_effective(100 << 20, 0, why, sizeof why) == 100 << 20);
    uint64_t cg = (uint64_t)1 << 30, got = tg_budget_effective(0, cg, why, sizeof why);
    TG_CHECK(got < cg && got > cg - (64 << 20) && strstr(why, "cgroup limit"));
    TG_CHECK(tg_budget_effective(2 * cg, cg, why, sizeof why) == got && strstr(why, "--mem"));
    TG_CHECK(tg_budget_effective(100 << 20, cg, why, sizeof why) == 100 << 20 && !why[0]);
}

/* One training pass of the evaluating test: every batch's rows checked against the file's. */
typedef struct {
    tg_store_t *ref;
    float *Xref;
    uint64_t steps, bad_rows;
} ev_check_t;

static int ev_step(void *ctx, const tg_batch_t *b, const float *X)
{
    ev_check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, c->ref->dim, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    c->steps++;
    return 0;
}

static void ev_pass(tg_run_t *r, uint64_t epoch, const tg_pass_t *next, ev_check_t *c)
{
    static const int64_t fan[2] = {5, 5};
    tg_pass_t p = {.seeds = r->split[0],
                   .num_seeds = r->split_n[0],
                   .batch_size = 64,
                   .seed = 3,
                   .epoch = epoch,
                   .num_layers = 2,
                   .fanouts = fan,
                   .allow_out_of_order = 1,
                   .training = 1,
                   .next = next,
                   .step = ev_step,
                   .ctx = c};
    tg_pass_stats_t st;
    TG_CHECK_OK(tg_run_pass(r, &p, &st));
}

/* Every strategy with an evaluating hook (tg_strategy_i.evaluating), with its example options:
 * after a training pass the hook gives budget back (what only training passes use), a second
 * call changes nothing, and the next training passes set it up again and gather the file's rows
 * (a strategy preparing the next pass ahead has it waited for, not lost). That training results
 * stay memory's with an evaluation after every epoch is strategies_agree's check. */
TG_TEST(evaluating_releases)
{
    static const int64_t fan[2] = {5, 5};
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_i *si = tg_strategy_at(i);
        if (!si->evaluating || !(si->info.caps & TG_STRAT_EXACT)) continue;
        tg_train_opts_t to;
        memset(&to, 0, sizeof to);
        char buf[512];
        tg_strategy_arg_t args[16];
        example_to_opts(si->info.example_args, &to, buf, sizeof buf, args, 16);
        tg_run_opts_t ro = {.dataset = ds,
                            .strategy = si->info.name,
                            .args = to.strategy_args,
                            .nargs = to.num_strategy_args,
                            .mem_bytes = to.mem_bytes,
                            .threads = 1};
        tg_strategy_opts_default(&ro.sopts);
        ro.sopts.sampler_threads = 2;
        tg_run_t r;
        if (tg_run_open_opts(&r, &ro) < 0) {
            TG_FAIL("%s: %s", si->info.name, tg_errmsg());
            continue;
        }
        ev_check_t c = {0};
        TG_CHECK_OK(tg_store_memory_open(&c.ref, r.ds, &(tg_store_opts_t){0}));
        tg_pass_t next = {.seeds = r.split[0],
                          .num_seeds = r.split_n[0],
                          .batch_size = 64,
                          .seed = 3,
                          .epoch = 1,
                          .num_layers = 2,
                          .fanouts = fan,
                          .allow_out_of_order = 1,
                          .training = 1};
        int ahead = (si->info.caps & TG_STRAT_NEXT_PASS) != 0;
        ev_pass(&r, 0, ahead ? &next : NULL, &c);
        uint64_t trained = r.budget.used;
        /* a sampled evaluation keeps the caches its pass reads through */
        si->evaluating(r.strat, 0);
        if (!ahead) TG_CHECK(r.budget.used == trained); /* else the next pass is being prepared */
        si->evaluating(r.strat, 1);
        uint64_t released = r.budget.used;
        si->evaluating(r.strat, 1);
        TG_CHECK(r.budget.used == released);
        fprintf(stderr, "  %s: budget used %llu after a training pass, %llu before evaluating\n",
                si->info.name, (unsigned long long)trained, (unsigned long long)released);
        if (released >= trained) TG_FAIL("%s: evaluating released nothing", si->info.name);
        ev_pass(&r, 1, NULL, &c);
        si->evaluating(r.strat, 1);
        ev_pass(&r, 2, NULL, &c);
        TG_CHECK(c.steps > 0 && c.bad_rows == 0);
        tg_store_release(c.ref);
        free(c.Xref);
        tg_run_close(&r);
    }
}

int main(void)
{
    alarm(600);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("strategy"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    TG_RUN(strategies_agree);
    TG_RUN(auto_choice);
    TG_RUN(out_of_order_learns);
    TG_RUN(resume_after_every_batch);
    TG_RUN(changed_files_refused);
    TG_RUN(eval_and_infer_out_of_core);
    TG_RUN(limits);
    TG_RUN(options_from_table);
    TG_RUN(whole_process_budget);
    TG_RUN(evaluating_releases);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
