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

static char root[4000], ds[4200];

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

TG_TEST(strategies_agree)
{
    static const struct {
        const char *name, *flags;
    } runs[] = {
        {"memory", "--strategy memory"},
        {"mmap", "--strategy mmap --gather-threads 3"},
        {"gnndrive", "--strategy gnndrive --mem 16M"},
        {"gnndrive-small", "--strategy gnndrive --extractors 3 --queue-depth 1 --chunk-rows 64 "
                           "--sampler-threads 0"},
        {"gnndrive-gap", "--strategy gnndrive --io-gap 2K --extractors 1"},
    };
    char *outs[5];
    int rc;
    for (int i = 0; i < 5; i++) {
        outs[i] = train(runs[i].name, runs[i].flags, &rc);
        TG_CHECK(rc == 0);
    }
    char a[4400], b[4400];
    for (int i = 1; i < 5; i++) {
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
    static const char *keys[] = {"io_requests", "io_read_bytes",   "io_needed_bytes",
                                 "io_wait_s",   "cache_hit_ratio", "peak_rss_bytes",
                                 "time_s",      "sample_s",        "gather_s",
                                 "compute_s",   "train_loss",      "valid_acc"};
    for (int i = 0; i < 5; i++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char key[64];
            snprintf(key, sizeof key, "\"%s\":", keys[k]);
            if (json_lines_with(outs[i], key) < 3)
                TG_FAIL("%s: fewer than 3 lines with %s", runs[i].name, key);
        }
    TG_CHECK(json_value(outs[0], "io_needed_bytes", 0) > 0);
    TG_CHECK(isnan(json_value(outs[0], "cache_hit_ratio", 0))); /* memory: no cache */
    TG_CHECK(isnan(json_value(outs[1], "cache_hit_ratio", 0))); /* mmap: the kernel's */
    for (int i = 2; i < 5; i++) {
        double h = json_value(outs[i], "cache_hit_ratio", 1);
        TG_CHECK(h >= 0 && h <= 1);
        TG_CHECK(json_value(outs[i], "io_requests", 0) > 0);
        TG_CHECK(json_value(outs[i], "io_read_bytes", 0) > 0);
        TG_CHECK(json_value(outs[i], "io_wait_s", 0) >= 0);
    }
    /* the final object reports the budget and what lies outside it */
    TG_CHECK(json_value(outs[2], "data_bytes_peak", 0) <= 16 << 20);
    TG_CHECK(json_value(outs[2], "batch_bytes_peak", 3) > 0);
    TG_CHECK(json_value(outs[2], "model_bytes", 0) > 0);
    TG_CHECK(json_value(outs[2], "activation_bytes", 0) > 0);
    /* the plain log line names the I/O figures */
    TG_CHECK(strstr(outs[2], "read /") && strstr(outs[2], "hit ratio"));
    for (int i = 0; i < 5; i++)
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
        tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --json --mem 64M", wide, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "strategy memory:"));
    TG_CHECK(out && strstr(out, "\"strategy\":\"memory\""));
    free(out);
    snprintf(dir, sizeof dir, "%s/auto-small", root);
    rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --json --mem 12M --io-gap 0",
                     wide, dir);
    TG_CHECK(rc == 0 && out && strstr(out, "strategy gnndrive:"));
    TG_CHECK(out && strstr(out, "\"strategy\":\"gnndrive\""));
    TG_CHECK(json_value(out, "data_bytes_peak", 0) <= 12 << 20);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    /* Wide rows make the layer-wise evaluation run in chunks smaller than the graph: memory and
     * gnndrive must still evaluate with the same chunks (the same GEMM shapes), so their
     * checkpoints, which record the validation loss, are the same bytes. */
    char a[4500], b[4500];
    snprintf(a, sizeof a, "%s/auto-big/%s", root, TG_CKPT_NAME);
    snprintf(b, sizeof b, "%s/auto-small/%s", root, TG_CKPT_NAME);
    if (!tg_test_same_file(a, b))
        TG_FAIL("wide rows: gnndrive's checkpoint.bin differs from memory's (other eval chunks?)");
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

/* In process: a stop request before every call stops after one batch; resuming again and again
 * must end exactly where one uninterrupted run ends. */
static void resume_case(const char *strategy, int out_of_order)
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
    o.io_depth = 8;
    o.io_gap = 0;
    o.extractors = 3;
    o.out_of_order = out_of_order;
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
    /* out of order, a stop first trains the batches already handed out */
    TG_CHECK(calls >= (out_of_order ? 3 : 10));
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
    resume_case("memory", 0);
    resume_case("gnndrive", 0);
    resume_case("mmap", 0);
    resume_case("gnndrive", 1);
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
    static const char *strategies[] = {"memory", "mmap", "gnndrive"};
    for (int i = 0; i < 3; i++) {
        rc = tg_test_cli(&out, "train %s --out %s " COMMON " --epochs 1 --io-gap 0 --strategy %s",
                         dir, out_dir, strategies[i]);
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
    int rc;
    char *out = train("limits",
                      "--strategy gnndrive --batches-per-epoch 2 --eval-max-nodes 50 "
                      "--eval-fanouts train",
                      &rc);
    TG_CHECK(rc == 0);
    TG_CHECK(json_value(out, "batches", 0) == 2);
    TG_CHECK(strstr(out, "limited by --batches-per-epoch") != NULL);
    free(out);
    char run[4300];
    snprintf(run, sizeof run, "%s/limits", root);
    char *a = NULL;
    rc = tg_test_cli(&a, "eval %s --checkpoint %s --json --max-nodes 50", ds, run);
    TG_CHECK(rc == 0 && json_value(a, "count", 0) == 50);
    free(a);
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
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
