/* tiergnn train / eval / infer end to end through the CLI: learning, JSON lines, resume,
 * determinism, and every error path of the flags and checkpoints. */
#include "test_engine_common.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/engine.h"

static char ds[4200], ds_other[4200], root[4000];

static void setup(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("train"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    snprintf(ds_other, sizeof ds_other, "%s/ds_other", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    so.nodes = 500; /* another dataset: different size and content */
    so.seed = 2;
    synth_write(ds_other, &so);
}

/* Common flags of the small runs: 2-layer SAGE, sampled, 5 batches per epoch. */
#define SMALL "--model sage --layers 2 --hidden 16 --fanouts 5,5 --batch-size 64"

static uint64_t file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) ? 0 : (uint64_t)st.st_size;
}

TG_TEST(learns_and_reports)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s/run1 " SMALL " --epochs 8 --json", ds, root);
    TG_CHECK(rc == 0);
    if (rc) {
        fprintf(stderr, "%s\n", out ? out : "");
        free(out);
        return;
    }
    static const char *epoch_keys[] = {
        "\"epoch\":",     "\"time_s\":",     "\"sample_s\":",  "\"gather_s\":",
        "\"compute_s\":", "\"train_loss\":", "\"train_acc\":", "\"valid_acc\":"};
    for (size_t k = 0; k < sizeof epoch_keys / sizeof epoch_keys[0]; k++)
        if (json_lines_with(out, epoch_keys[k]) < 8)
            TG_FAIL("fewer than 8 JSON lines with %s:\n%s", epoch_keys[k], out);
    /* the final object: once, with its keys */
    TG_CHECK(json_lines_with(out, "\"best_epoch\":") == 1);
    TG_CHECK(json_lines_with(out, "\"peak_rss_bytes\":") == 9); /* every epoch and the end */
    TG_CHECK(json_lines_with(out, "\"best_epoch\":") == 1);
    TG_CHECK(!isnan(json_value(out, "test_acc", 8)) && !isnan(json_value(out, "valid_acc", 8)));
    double first = json_value(out, "train_loss", 0), last = json_value(out, "train_loss", 7);
    if (!(last < first * 0.8)) TG_FAIL("training loss did not decrease: %g -> %g", first, last);
    double test_acc = json_value(out, "best_epoch", 0) > 0 ? json_value(out, "test_acc", 8) : 0;
    double valid = json_value(out, "valid_acc", 8);
    /* 4 classes: chance is 0.25; the planted communities make 0.6+ easy */
    TG_CHECK(valid > 0.6);
    TG_CHECK(test_acc > 0.6);
    TG_CHECK(json_value(out, "peak_rss_bytes", 0) > 1e6);
    free(out);

    /* eval recomputes the reported test accuracy of the best model */
    rc = tg_test_cli(&out, "eval %s --checkpoint %s/run1 --split test --json", ds, root);
    TG_CHECK(rc == 0);
    TG_CHECK_NEAR(json_value(out, "acc", 0), test_acc, 1e-5);
    free(out);

    /* infer: sizes, JSON side file, and agreement with eval's accuracy */
    char pred[4200], emb[4300];
    snprintf(pred, sizeof pred, "%s/run1/pred.i32", root);
    snprintf(emb, sizeof emb, "%s.emb", pred);
    /* the default chunk is the one training evaluated with (here all 600 nodes at once): the
     * same GEMM shapes, so the accuracy below is exactly the run's */
    rc = tg_test_cli(&out, "infer %s --checkpoint %s/run1 --out %s --embeddings", ds, root, pred);
    TG_CHECK(rc == 0);
    free(out);
    TG_CHECK_EQ_U64(file_size(pred), 600 * 4);
    TG_CHECK_EQ_U64(file_size(emb), 600 * 16 * 4);
    char jpath[4300];
    snprintf(jpath, sizeof jpath, "%s.json", pred);
    char *j = tg_test_read_all(jpath, NULL);
    TG_CHECK(j && strstr(j, "\"embed_dim\":16") && strstr(j, "\"num_nodes\":600"));
    free(j);
    size_t plen;
    int32_t *p = (int32_t *)tg_test_read_all(pred, &plen);
    tg_dataset_t *d;
    TG_CHECK_OK(tg_dataset_open(&d, ds, 0));
    uint64_t *test, ntest;
    int32_t *labels;
    TG_CHECK_OK(tg_dataset_load_split(d, TG_FILE_TEST, &test, &ntest));
    TG_CHECK_OK(tg_dataset_load_labels(d, &labels));
    uint64_t ok = 0;
    for (uint64_t i = 0; p && i < ntest; i++)
        ok += p[test[i]] == labels[test[i]];
    TG_CHECK_NEAR((double)ok / (double)ntest, test_acc, 1e-5); /* JSON has 6 digits */
    free(p);
    free(test);
    free(labels);
    tg_dataset_close(d);
    /* features read row by row from the file (they do not fit in --mem) give the same output
     * as RAM in chunks of the same size (the same GEMM shapes; other sizes: test_strategy) */
    char pred1[4200], pred2[4200];
    snprintf(pred1, sizeof pred1, "%s/run1/pred-c50.i32", root);
    snprintf(pred2, sizeof pred2, "%s/run1/pred-file.i32", root);
    rc = tg_test_cli(&out, "infer %s --checkpoint %s/run1 --out %s --chunk-nodes 50", ds, root,
                     pred1);
    TG_CHECK(rc == 0);
    free(out);
    rc = tg_test_cli(&out,
                     "infer %s --checkpoint %s/run1 --out %s --strategy gnndrive --mem 24M "
                     "--chunk-nodes 50",
                     ds, root, pred2);
    TG_CHECK(rc == 0);
    free(out);
    TG_CHECK(tg_test_same_file(pred1, pred2));
    /* no temporary files are left behind */
    char rd[4200];
    snprintf(rd, sizeof rd, "%s/run1", root);
    DIR *dir = opendir(rd);
    struct dirent *de;
    while (dir && (de = readdir(dir)))
        if (strstr(de->d_name, "tmp")) TG_FAIL("left behind in %s: %s", rd, de->d_name);
    if (dir) closedir(dir);
}

TG_TEST(resume_is_bit_identical)
{
    char *out = NULL;
    /* straight: 4 epochs */
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/straight " SMALL " --epochs 4 --threads 1 --json",
                         ds, root) == 0);
    double l3 = json_value(out, "train_loss", 2), l4 = json_value(out, "train_loss", 3);
    free(out);
    /* 2 epochs, then 2 more with --resume (and other sampler threads: batches do not depend on
     * them) */
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/split " SMALL " --epochs 2 --threads 1", ds,
                         root) == 0);
    free(out);
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/split " SMALL
                         " --epochs 4 --threads 1 --sampler-threads 3 --resume --json",
                         ds, root) == 0);
    TG_CHECK(json_lines_with(out, "\"epoch\":") == 2);
    TG_CHECK(json_value(out, "epoch", 0) == 3);
    TG_CHECK(json_value(out, "train_loss", 0) == l3);
    TG_CHECK(json_value(out, "train_loss", 1) == l4);
    free(out);
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/straight/checkpoint.bin", root);
    snprintf(b, sizeof b, "%s/split/checkpoint.bin", root);
    if (!tg_test_same_file(a, b)) TG_FAIL("%s and %s differ: resume is not bit-identical", a, b);
    snprintf(a, sizeof a, "%s/straight/best.bin", root);
    snprintf(b, sizeof b, "%s/split/best.bin", root);
    TG_CHECK(tg_test_same_file(a, b));
    /* sampling inline or on 2 threads gives the same run */
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/inline " SMALL
                         " --epochs 4 --threads 1 --sampler-threads 0",
                         ds, root) == 0);
    free(out);
    snprintf(a, sizeof a, "%s/straight/checkpoint.bin", root);
    snprintf(b, sizeof b, "%s/inline/checkpoint.bin", root);
    TG_CHECK(tg_test_same_file(a, b));
    /* nothing left to do: a finished run resumes to the same result */
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/split " SMALL " --epochs 4 --resume --json", ds,
                         root) == 0);
    TG_CHECK(json_lines_with(out, "\"best_epoch\":") == 1);
    free(out);
}

/* Runs the CLI expecting failure with one line containing needle. */
static void expect_fail(const char *needle, const char *fmt, ...) TG_PRINTF(2, 3);
static void expect_fail(const char *needle, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *out = NULL;
    int rc = tg_test_cli(&out, "%s", args);
    if (rc == 0)
        TG_FAIL("'%s' succeeded, expected a failure containing '%s'", args, needle);
    else if (!out || !strstr(out, needle))
        TG_FAIL("'%s': output lacks '%s':\n%s", args, needle, out ? out : "");
    else {
        /* the error is one line starting with "tiergnn: " */
        const char *l = strstr(out, "tiergnn: ");
        TG_CHECK(l != NULL);
    }
    free(out);
}

TG_TEST(bad_flags)
{
    expect_fail("unknown model 'resnet'", "train %s --out %s/b --model resnet", ds, root);
    expect_fail("--lr", "train %s --out %s/b --lr abc", ds, root);
    expect_fail("--lr must be a positive number", "train %s --out %s/b --lr -1", ds, root);
    expect_fail("--epochs", "train %s --out %s/b --epochs 1x", ds, root);
    expect_fail("--epochs", "train %s --out %s/b --epochs -3", ds, root);
    expect_fail("--batch-size", "train %s --out %s/b --batch-size 12.5", ds, root);
    expect_fail("--hidden", "train %s --out %s/b --hidden 0", ds, root);
    expect_fail("--dropout must be in [0, 1)", "train %s --out %s/b --dropout 1.5", ds, root);
    expect_fail("--weight-decay", "train %s --out %s/b --weight-decay -1", ds, root);
    expect_fail("--fanouts has 3 value(s) but --layers is 2",
                "train %s --out %s/b --layers 2 --fanouts 10,10,10", ds, root);
    expect_fail("--fanouts item 2", "train %s --out %s/b --fanouts 10,abc", ds, root);
    expect_fail("expected -1 (all) or >= 0", "train %s --out %s/b --fanouts 10,-5", ds, root);
    expect_fail("--threads must be between 1 and 1024", "train %s --out %s/b --threads 0", ds,
                root);
    expect_fail("not a multiple of --heads",
                "train %s --out %s/b --model gat --hidden 10 --heads 4", ds, root);
    expect_fail("--optimizer", "train %s --out %s/b --optimizer rmsprop", ds, root);
    expect_fail("--activation", "train %s --out %s/b --activation tanh", ds, root);
    expect_fail("--eval-fanouts 'some'", "train %s --out %s/b --eval-fanouts some", ds, root);
    expect_fail("--strategy 'nosuch'", "train %s --out %s/b --strategy nosuch", ds, root);
    expect_fail("is too small for strategy memory",
                "train %s --out %s/b --mem 20K --strategy memory", ds, root);
    expect_fail("give --mem", "train %s --out %s/b --mem 60K --strategy memory", ds, root);
    expect_fail("is too small for strategy gnndrive", "train %s --out %s/b --mem 60K", ds, root);
    expect_fail("--mem", "train %s --out %s/b --mem lots", ds, root);
    expect_fail("unknown option '--bogus'", "train %s --out %s/b --bogus", ds, root);
    expect_fail("--out RUNDIR is required", "train %s", ds);
    expect_fail("expected one DATASET", "train --out %s/b", root);
    expect_fail("not a dataset directory", "train %s/nonexistent --out %s/b", root, root);
    expect_fail("--split 'dev'", "eval %s --checkpoint %s/run1 --split dev", ds, root);
    expect_fail("no best model", "eval %s --checkpoint %s/nonexistent", ds, root);
    expect_fail("--checkpoint RUNDIR|FILE and --out FILE are required", "infer %s --out x", ds);
    /* a run directory is not overwritten by accident */
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/taken " SMALL " --epochs 1", ds, root) == 0);
    free(out);
    expect_fail("already holds a run", "train %s --out %s/taken " SMALL " --epochs 1", ds, root);
    expect_fail("--resume: cannot open", "train %s --out %s/fresh " SMALL " --resume", ds, root);
}

TG_TEST(foreign_checkpoints)
{
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/gcn --model gcn --hidden 16 --fanouts 5,5 "
                         "--batch-size 64 --epochs 1",
                         ds, root) == 0);
    free(out);
    /* another model: refused with the settings of config.json */
    expect_fail("settings differ: --model gcn there vs sage here",
                "train %s --out %s/gcn --model sage --hidden 16 --fanouts 5,5 "
                "--batch-size 64 --epochs 2 --resume",
                ds, root);
    expect_fail("hidden",
                "train %s --out %s/gcn --model gcn --hidden 32 --fanouts 5,5 "
                "--batch-size 64 --epochs 2 --resume",
                ds, root);
    /* other run settings that decide the batches */
    expect_fail("--batch-size 64 there vs 32 here",
                "train %s --out %s/gcn --model gcn --hidden 16 --fanouts 5,5 --batch-size 32 "
                "--epochs 2 --resume",
                ds, root);
    /* a run directory without config.json (an older build's) is checked against the
     * checkpoint's record and nn's model record, as before */
    char cfg[4200];
    snprintf(cfg, sizeof cfg, "%s/gcn/config.json", root);
    TG_CHECK(unlink(cfg) == 0);
    expect_fail("another model: type gcn in checkpoint vs sage here",
                "train %s --out %s/gcn --model sage --hidden 16 --fanouts 5,5 "
                "--batch-size 64 --epochs 2 --resume",
                ds, root);
    expect_fail("--batch-size 64 there vs 32 here",
                "train %s --out %s/gcn --model gcn --hidden 16 --fanouts 5,5 --batch-size 32 "
                "--epochs 2 --resume",
                ds, root);
    /* another dataset: for resume, eval and infer */
    expect_fail("another dataset",
                "train %s --out %s/gcn --model gcn --hidden 16 --fanouts 5,5 "
                "--batch-size 64 --epochs 2 --resume",
                ds_other, root);
    expect_fail("another dataset", "eval %s --checkpoint %s/gcn", ds_other, root);
    expect_fail("another dataset", "infer %s --checkpoint %s/gcn --out %s/x.i32", ds_other, root,
                root);
    /* a damaged checkpoint */
    char p[4200];
    snprintf(p, sizeof p, "%s/gcn/best.bin", root);
    tg_test_write_file(p, "garbage");
    expect_fail("not a tiergnn checkpoint", "eval %s --checkpoint %s/gcn", ds, root);
}

/* A dataset with millions of classes makes a model of gigabytes: under --mem it is refused before
 * it is created (it was created, and a second copy measured a batch, before the refusal: 3 GB
 * of RSS under --mem 64M). */
TG_TEST(model_beyond_mem_refused_first)
{
    char wide[4300], meta[4400];
    snprintf(wide, sizeof wide, "%s/ds_classes", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(wide, &so);
    snprintf(meta, sizeof meta, "%s/meta.txt", wide);
    char *text = tg_test_read_all(meta, NULL);
    char *at = text ? strstr(text, "num_classes = 4\n") : NULL;
    TG_CHECK(at != NULL);
    if (!at) return;
    /* single-label: labels.bin keeps its size, verify accepts the dataset */
    char *edited = malloc(strlen(text) + 16);
    snprintf(edited, strlen(text) + 16, "%.*snum_classes = 8000000\n%s", (int)(at - text), text,
             at + strlen("num_classes = 4\n"));
    tg_test_write_file(meta, edited);
    free(edited);
    free(text);
    expect_fail("too small for this model: its parameters, gradients and optimiser state take",
                "train %s --out %s/classes " SMALL " --epochs 1 --mem 64M --strategy memory", wide,
                root);
    tg_rmtree(wide);
}

/* config.json's text with `from` replaced by `to` (the test fails when it lacks `from`). */
static void edit_config(const char *run, const char *from, const char *to)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s/config.json", root, run);
    char *text = tg_test_read_all(p, NULL);
    char *at = text ? strstr(text, from) : NULL;
    TG_CHECK(at != NULL);
    if (!at) return free(text);
    size_t len = strlen(text) + strlen(to) + 1;
    char *edited = malloc(len);
    snprintf(edited, len, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    tg_test_write_file(p, edited);
    free(edited);
    free(text);
}

TG_TEST(nan_loss_stops)
{
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/nan " SMALL " --epochs 2", ds, root) == 0);
    free(out);
    char ck[4200];
    snprintf(ck, sizeof ck, "%s/nan/checkpoint.bin", root);
    size_t len0;
    char *before = tg_test_read_all(ck, &len0);
    /* another learning rate on resume would change the trained model: refused */
    expect_fail("--lr 0.01 there vs 1e+30 here",
                "train %s --out %s/nan --epochs 4 --lr 1e30 --resume", ds, root);
    /* the run's own settings, edited: a huge learning rate blows the weights up in epoch 3 */
    edit_config("nan", "\"lr\": 0.01,", "\"lr\": 1e30,");
    int rc = tg_test_cli(&out, "train %s --out %s/nan --epochs 4 --resume", ds, root);
    TG_CHECK(rc != 0);
    TG_CHECK(out && strstr(out, "epoch 3, batch "));
    TG_CHECK(out && strstr(out, "not finite"));
    TG_CHECK(out && strstr(out, "after epoch 2"));
    TG_CHECK(out && strstr(out, "set \"lr\" in ") && strstr(out, "/nan/config.json"));
    free(out);
    size_t len1;
    char *after = tg_test_read_all(ck, &len1);
    TG_CHECK(before && after && len0 == len1 && memcmp(before, after, len0) == 0);
    free(before);
    free(after);
    /* the kept checkpoint is usable with a learning rate that works */
    edit_config("nan", "\"lr\": 1e+30,", "\"lr\": 0.01,");
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/nan --epochs 3 --resume", ds, root) == 0);
    free(out);
    /* from scratch: the state before epoch 1 is kept (a batch was trained before the loss
     * blew up), and the run continues once config.json has a learning rate that works */
    rc = tg_test_cli(&out, "train %s --out %s/nan0 " SMALL " --epochs 2 --lr 1e30", ds, root);
    TG_CHECK(rc != 0 && out && strstr(out, "epoch 1, batch ") && strstr(out, "after epoch 0"));
    free(out);
    tg_ckpt_info_t info;
    snprintf(ck, sizeof ck, "%s/nan0/checkpoint.bin", root);
    TG_CHECK_OK(tg_ckpt_read_info(ck, &info));
    TG_CHECK_EQ_U64(info.epochs_done, 0);
    edit_config("nan0", "\"lr\": 1e+30,", "\"lr\": 0.01,");
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/nan0 --resume", ds, root) == 0);
    free(out);
}

TG_TEST(full_batch_and_models)
{
    /* --batch-size 0 with full neighbours: one whole-graph step per epoch, for every model */
    static const char *models[] = {"gcn", "sage", "gat --heads 2", "gin", "mlp"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char *out = NULL;
        int rc = tg_test_cli(&out,
                             "train %s --out %s/full%zu --model %s --hidden 16 --fanouts -1,-1 "
                             "--batch-size 0 --epochs 3 --eval-every 2 --normalize-features "
                             "--checkpoint-every 0 --json",
                             ds, root, i, models[i]);
        TG_CHECK(rc == 0);
        TG_CHECK(json_value(out, "batches", 0) == 1);
        TG_CHECK(isnan(json_value(out, "valid_acc", 0))); /* epoch 1 not evaluated */
        TG_CHECK(!isnan(json_value(out, "valid_acc", 1)));
        TG_CHECK(!isnan(json_value(out, "valid_acc", 2))); /* the last epoch always is */
        if (rc) fprintf(stderr, "%s\n", out ? out : "");
        free(out);
    }
    /* sampled evaluation runs and eval reproduces it */
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/evs " SMALL " --epochs 2 --eval-fanouts train "
                         "--json",
                         ds, root) == 0);
    double t = json_value(out, "test_acc", 2);
    free(out);
    TG_CHECK(tg_test_cli(&out, "eval %s --checkpoint %s/evs --json", ds, root) == 0);
    TG_CHECK_NEAR(json_value(out, "acc", 0), t, 1e-5);
    free(out);
}

int main(void)
{
    setup();
    TG_RUN(learns_and_reports);
    TG_RUN(resume_is_bit_identical);
    TG_RUN(bad_flags);
    TG_RUN(foreign_checkpoints);
    TG_RUN(model_beyond_mem_refused_first);
    TG_RUN(nan_loss_stops);
    TG_RUN(full_batch_and_models);
    return tg_test_done();
}
