/* A run directory remembers its settings (RUNDIR/config.json): `--resume --epochs N` alone
 * continues the run exactly (weight decay, strategy and its options included), a flag that would
 * change the trained model is refused naming both values, a safe one is taken and said,
 * `train --config FILE` reproduces a run byte for byte, a directory without config.json resumes
 * from its flags as before; and a start refused before its first batch (ginex, diskgnn, hier at
 * a --mem too small for their caches) leaves nothing that blocks the retry. */
#include "test_engine_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/config.h"
#include "tiergnn/engine.h"

static char root[4000], ds[4200], big[4200], cora[4200];

static int run_ok(char **out, const char *what, int rc)
{
    if (rc) TG_FAIL("%s failed (%d):\n%s", what, rc, *out ? *out : "");
    return rc == 0;
}

/* Whether dir_a/name and dir_b/name hold the same bytes (fails the test when not). */
static void same(const char *dir_a, const char *dir_b, const char *name)
{
    char a[4400], b[4400];
    snprintf(a, sizeof a, "%s/%s/%s", root, dir_a, name);
    snprintf(b, sizeof b, "%s/%s/%s", root, dir_b, name);
    if (!tg_test_same_file(a, b)) TG_FAIL("%s and %s differ", a, b);
}

/* Runs the CLI expecting failure with needle in its output. */
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
    free(out);
}

/* Cora, full-batch GCN with weight decay: 2 epochs then `--resume --epochs 4` alone is the
 * uninterrupted 4-epoch run, byte for byte; `--config` of either reproduces it. */
#define CORA_GCN                                                                                   \
    "--model gcn --hidden 16 --fanouts -1,-1 --batch-size 0 --weight-decay 5e-4 "                  \
    "--normalize-features --lr 0.01 --dropout 0.5 --seed 1 --threads 1"

TG_TEST(cora_resume_takes_weight_decay)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s/c4 " CORA_GCN " --epochs 4", cora, root);
    if (!run_ok(&out, "4 epochs", rc)) return free(out);
    free(out);
    rc = tg_test_cli(&out, "train %s --out %s/c2 " CORA_GCN " --epochs 2", cora, root);
    if (!run_ok(&out, "2 epochs", rc)) return free(out);
    free(out);
    out = NULL;
    rc = tg_test_cli(&out, "train %s --out %s/c2 --resume --epochs 4", cora, root);
    if (!run_ok(&out, "--resume --epochs 4", rc)) return free(out);
    /* the safe change is said, the rest comes from the file */
    TG_CHECK(strstr(out, "--epochs 4 here (2 in ") != NULL);
    TG_CHECK(strstr(out, "the other settings from ") != NULL);
    free(out);
    same("c4", "c2", "checkpoint.bin");
    same("c4", "c2", "best.bin");
    /* config.json is readable and holds the weight decay; after the resume, epochs 4 */
    char p[4400];
    snprintf(p, sizeof p, "%s/c2/config.json", root);
    char *text = tg_test_read_all(p, NULL);
    TG_CHECK(text && strstr(text, "\"weight_decay\": 0.0005,"));
    TG_CHECK(text && strstr(text, "\"epochs\": 4,"));
    TG_CHECK(text && strstr(text, "\"model\": \"gcn\","));
    TG_CHECK(text && strstr(text, "\"fanouts\": [-1,-1],"));
    free(text);
    same("c4", "c2", "config.json");
    /* --config reproduces the run, from either directory */
    out = NULL;
    rc = tg_test_cli(&out, "train %s --config %s/c4/config.json --out %s/c4copy", cora, root, root);
    if (run_ok(&out, "--config", rc)) same("c4", "c4copy", "checkpoint.bin");
    free(out);
    out = NULL;
    rc = tg_test_cli(&out, "train %s --config %s/c2/config.json --out %s/c2copy", cora, root, root);
    if (run_ok(&out, "--config of the resumed run", rc)) same("c4", "c2copy", "checkpoint.bin");
    free(out);
}

/* Common flags of the sampled runs on the generated graph. */
#define SAGE "--model sage --layers 2 --hidden 16 --fanouts 5,5 --batch-size 64 --seed 3"

TG_TEST(sampled_sage_with_strategy_option)
{
    /* hier makes batches of its own from its partition: its options change the trained model,
     * so they must come back from the file */
    const char *hier = tg_strategy_info_find("hier")->example_args;
    char *out = NULL;
    int rc = tg_test_cli(&out,
                         "train %s --out %s/h4 " SAGE " --weight-decay 1e-3 --strategy hier %s "
                         "--epochs 4 --threads 1",
                         ds, root, hier);
    if (!run_ok(&out, "hier 4 epochs", rc)) return free(out);
    free(out);
    out = NULL;
    rc = tg_test_cli(&out,
                     "train %s --out %s/h2 " SAGE " --weight-decay 1e-3 --strategy hier %s "
                     "--epochs 2 --threads 1",
                     ds, root, hier);
    if (!run_ok(&out, "hier 2 epochs", rc)) return free(out);
    free(out);
    /* a flag that would change the trained model is refused naming both values */
    expect_fail("settings differ: --weight-decay 0.001 there vs 0 here",
                "train %s --out %s/h2 --resume --epochs 4 --weight-decay 0", ds, root);
    expect_fail("/h2/config.json", "train %s --out %s/h2 --resume --epochs 4 --weight-decay 0", ds,
                root);
    expect_fail("fanout of layer 1 5 there vs 6 here",
                "train %s --out %s/h2 --resume --epochs 4 --fanouts 5,6", ds, root);
    expect_fail("--batch-size 64 there vs 32 here",
                "train %s --out %s/h2 --resume --epochs 4 --batch-size 32", ds, root);
    expect_fail("--strategy hier there vs memory here",
                "train %s --out %s/h2 --resume --epochs 4 --strategy memory", ds, root);
    expect_fail("strategy hier's options differ",
                "train %s --out %s/h2 --resume --epochs 4 --parts 8", ds, root);
    expect_fail("--config and --resume", "train %s --out %s/h2 --resume --config %s/h4/config.json",
                ds, root, root);
    /* the same value again is no change */
    out = NULL;
    rc = tg_test_cli(&out,
                     "train %s --out %s/h2 --resume --epochs 4 --threads 2 --seed 3 --strategy "
                     "hier",
                     ds, root);
    if (!run_ok(&out, "hier --resume --epochs 4", rc)) return free(out);
    TG_CHECK(strstr(out, "--threads 2 here (1 in ") != NULL);
    free(out);
    same("h4", "h2", "checkpoint.bin");
    same("h4", "h2", "best.bin");
    out = NULL;
    rc = tg_test_cli(&out, "train %s --config %s/h4/config.json --out %s/h4copy", ds, root, root);
    if (run_ok(&out, "hier --config", rc)) same("h4", "h4copy", "checkpoint.bin");
    free(out);
    /* flags beside --config override it: one epoch less is another run */
    out = NULL;
    rc = tg_test_cli(&out, "train %s --config %s/h4/config.json --out %s/h3 --epochs 3", ds, root,
                     root);
    if (run_ok(&out, "--config with --epochs 3", rc)) {
        tg_ckpt_info_t info;
        char p[4400];
        snprintf(p, sizeof p, "%s/h3/checkpoint.bin", root);
        TG_CHECK_OK(tg_ckpt_read_info(p, &info));
        TG_CHECK_EQ_U64(info.epochs_done, 3);
    }
    free(out);
}

/* An exact strategy may replace another on resume, with other options: taken and said. */
TG_TEST(exact_strategy_changes)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s/g4 " SAGE " --epochs 4 --threads 1", ds, root);
    if (!run_ok(&out, "memory 4 epochs", rc)) return free(out);
    free(out);
    out = NULL;
    rc = tg_test_cli(&out,
                     "train %s --out %s/g2 " SAGE " --epochs 2 --threads 1 --strategy gnndrive "
                     "--extractors 3 --io-depth 8 --io-gap 0",
                     ds, root);
    if (!run_ok(&out, "gnndrive 2 epochs", rc)) return free(out);
    free(out);
    out = NULL;
    rc = tg_test_cli(&out, "train %s --out %s/g2 --resume --epochs 4 --strategy memory", ds, root);
    if (!run_ok(&out, "resumed with memory", rc)) return free(out);
    TG_CHECK(strstr(out, "--strategy memory here (gnndrive in ") != NULL);
    free(out);
    same("g4", "g2", "checkpoint.bin");
}

/* A run directory written before config.json existed resumes from the flags, as it did. */
TG_TEST(old_run_directory)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s/o2 " SAGE " --epochs 2 --threads 1", ds, root);
    if (!run_ok(&out, "2 epochs", rc)) return free(out);
    free(out);
    char p[4400];
    snprintf(p, sizeof p, "%s/o2/config.json", root);
    TG_CHECK(unlink(p) == 0);
    out = NULL;
    rc = tg_test_cli(&out, "train %s --out %s/o2 " SAGE " --epochs 4 --threads 1 --resume", ds,
                     root);
    if (run_ok(&out, "old directory resumed", rc)) same("g4", "o2", "checkpoint.bin");
    free(out);
}

/* The library checks too: tg_train resuming with a setting that differs from config.json's. */
TG_TEST(library_resume_checked)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/api", root);
    tg_train_opts_t o;
    tg_train_opts_default(&o);
    o.dataset = ds;
    o.out_dir = out;
    o.model.hidden = 16;
    o.fanouts[0] = o.fanouts[1] = 5;
    o.batch_size = 64;
    o.epochs = 1;
    o.optim.weight_decay = 0.01f;
    tg_train_result_t res;
    TG_CHECK_OK(tg_train(&o, &res));
    o.resume = 1;
    o.epochs = 2;
    o.optim.weight_decay = 0;
    TG_CHECK_ERR(tg_train(&o, &res), "--weight-decay 0.01 there vs 0 here");
    o.optim.weight_decay = 0.01f;
    o.threads = 2; /* safe */
    TG_CHECK_OK(tg_train(&o, &res));
    TG_CHECK_EQ_U64(res.epochs_done, 2);
}

/* The file: read back to the same settings; a typo, a bad value or a foreign file refused
 * naming the file and the key. */
TG_TEST(file_round_trip_and_errors)
{
    tg_train_opts_t o, r;
    tg_train_opts_default(&o);
    o.model.type = TG_MODEL_GAT;
    o.model.heads = 2;
    o.model.hidden = 32;
    o.model.dropout = 0.3f;
    o.model.input_dropout = 0.1f;
    o.optim.weight_decay = 5e-4f;
    o.optim.lr = 0.005f;
    o.fanouts[0] = -1;
    o.fanouts[1] = 7;
    o.batch_size = 0;
    o.seed = 42;
    o.eval_sampled = 1;
    o.mem_bytes = 64 << 20;
    static const tg_strategy_arg_t args[] = {{"extractors", "3"}, {"features-in-ram", "0"}};
    o.strategy_args = args;
    o.num_strategy_args = 2;
    char p[4400];
    snprintf(p, sizeof p, "%s/rt.json", root);
    TG_CHECK_OK(tg_train_config_write(p, &o, "gnndrive"));
    tg_train_opts_default(&r);
    tg_train_config_t cf;
    TG_CHECK_OK(tg_train_config_read(&cf, p, &r));
    char a[512], b[512];
    for (int i = 0; i < tg_train_config_count(); i++) {
        if (!strcmp(tg_train_config_key(i), "strategy")) continue;
        tg_train_config_value(&o, i, a, sizeof a);
        tg_train_config_value(&r, i, b, sizeof b);
        if (strcmp(a, b)) TG_FAIL("%s: %s written, %s read", tg_train_config_key(i), a, b);
    }
    TG_CHECK(r.strategy && !strcmp(r.strategy, "gnndrive"));
    TG_CHECK(r.optim.weight_decay == 5e-4f && r.model.dropout == 0.3f);
    TG_CHECK(tg_train_config_same_args(args, 2, r.strategy_args, r.num_strategy_args));
    tg_train_config_destroy(&cf);
    static const struct {
        const char *text, *needle;
    } bad[] = {
        {"{\"weight_decy\": 1}", "unknown key \"weight_decy\""},
        {"{\"lr\": \"fast\"}", "\"lr\": expected a number, got '\"fast\"'"},
        {"{\"model\": \"resnet\"}", "\"model\": expected a valid value"},
        {"{\"batch_size\": -1}", "\"batch_size\": expected an integer between 0"},
        {"{\"fanouts\": [5,5,5], \"layers\": 2}", "\"fanouts\" has 3 value(s)"},
        {"{\"strategy_options\": {\"extractor\": \"3\"}}", "--extractor is not an option"},
        {"{\"format\": \"something-else\"}", "expected \"tiergnn-train-config\""},
        {"{\"lr\": 0.1", "expected ','"},
        {"[1]", "expected '{'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        tg_test_write_file(p, bad[k].text);
        tg_train_opts_default(&r);
        int rc = tg_train_config_read(&cf, p, &r);
        tg_train_config_destroy(&cf);
        if (rc != -EINVAL)
            TG_FAIL("'%s' read (%d), expected a refusal", bad[k].text, rc);
        else if (!strstr(tg_errmsg(), bad[k].needle) || !strstr(tg_errmsg(), p))
            TG_FAIL("'%s': message '%s' lacks '%s' or the file", bad[k].text, tg_errmsg(),
                    bad[k].needle);
    }
    /* a partial file keeps the other settings: the layer count follows the fanouts */
    tg_test_write_file(p, "{\"fanouts\": [4, 4, 4], \"weight_decay\": 0.01}");
    tg_train_opts_default(&r);
    TG_CHECK_OK(tg_train_config_read(&cf, p, &r));
    TG_CHECK(r.model.num_layers == 3 && r.fanouts[2] == 4 && r.optim.weight_decay == 0.01f);
    TG_CHECK(r.batch_size == 1024);
    tg_train_config_destroy(&cf);
}

/* Runs the CLI expecting success; the output is returned (the caller frees it) or NULL. */
static char *cli_ok(const char *what, const char *fmt, ...) TG_PRINTF(2, 3);
static char *cli_ok(const char *what, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    char *out = NULL;
    if (!run_ok(&out, what, tg_test_cli(&out, "%s", args))) {
        free(out);
        return NULL;
    }
    return out ? out : strdup("");
}

#define GCN_BASE "--hidden 16 --fanouts 5,5 --batch-size 64 --seed 3 --threads 1 --epochs 1"

/* --config beside --model gat or --dropout: the settings whose defaults follow those flags
 * (heads, the attention and input dropouts) follow them, so the run is the one those flags start
 * without a file, byte for byte; a value the file chose stays. */
TG_TEST(config_flags_carry_their_defaults)
{
    free(cli_ok("gcn", "train %s --out %s/d-gcn --model gcn " GCN_BASE, ds, root));
    free(cli_ok("gat", "train %s --out %s/d-gat --model gat " GCN_BASE, ds, root));
    char *out = cli_ok("--config --model gat",
                       "train %s --config %s/d-gcn/config.json --model gat --out %s/d-gat2", ds,
                       root, root);
    TG_CHECK(out && strstr(out, "--heads 4 follows --model (1 in "));
    TG_CHECK(out && strstr(out, "--attn-dropout 0.5 follows --model and --dropout (0 in "));
    free(out);
    same("d-gat", "d-gat2", "checkpoint.bin");
    same("d-gat", "d-gat2", "config.json");
    free(cli_ok("dropout", "train %s --out %s/d-do --model gcn --dropout 0.3 " GCN_BASE, ds, root));
    out = cli_ok("--config --dropout",
                 "train %s --config %s/d-gcn/config.json --dropout 0.3 --out %s/d-do2", ds, root,
                 root);
    TG_CHECK(out && strstr(out, "--input-dropout 0.3 follows --dropout (0.5 in "));
    free(out);
    same("d-do", "d-do2", "checkpoint.bin");
    /* an input dropout the first run chose is kept */
    free(cli_ok("input-dropout", "train %s --out %s/d-in --model gcn --input-dropout 0.2 " GCN_BASE,
                ds, root));
    out = cli_ok("--config --dropout, chosen input dropout",
                 "train %s --config %s/d-in/config.json --dropout 0.3 --out %s/d-in2", ds, root,
                 root);
    TG_CHECK(out && !strstr(out, "follows"));
    free(out);
    char p[4400];
    snprintf(p, sizeof p, "%s/d-in2/config.json", root);
    char *text = tg_test_read_all(p, NULL);
    TG_CHECK(text && strstr(text, "\"input_dropout\": 0.2,") && strstr(text, "\"dropout\": 0.3,"));
    free(text);
}

/* A LADIES run resumed with its --layer-sizes given again needs no --sampler (the flag names its
 * sampler); other layer sizes are refused naming both. */
TG_TEST(resume_ladies_with_layer_sizes)
{
    free(
        cli_ok("ladies",
               "train %s --out %s/lad --model gcn --sampler ladies --layer-sizes 64,64 --hidden 16 "
               "--batch-size 64 --seed 3 --threads 1 --epochs 1",
               ds, root));
    expect_fail("layer size of layer 0 64 there vs 32 here",
                "train %s --out %s/lad --resume --epochs 2 --layer-sizes 32,32", ds, root);
    free(cli_ok("--resume --layer-sizes",
                "train %s --out %s/lad --resume --epochs 2 --layer-sizes 64,64", ds, root));
}

/* The --mem a refusal before the run opened asks for ("give --mem 40M or more", "give --mem
 * above 40M"), in bytes; 0 when it names none. */
static uint64_t asked_mem(const char *out)
{
    const char *g = out ? strstr(out, "give --mem ") : NULL;
    unsigned long long m = 0;
    char unit = 0;
    if (!g) return 0;
    g += strlen("give --mem ");
    if (!strncmp(g, "above ", 6)) g += 6;
    if (sscanf(g, "%llu%c", &m, &unit) != 2 || unit != 'M') return 0;
    return (uint64_t)m << 20;
}

/* ginex, diskgnn and hier at a --mem that the strategy refuses in its first pass (after the run
 * opened and wrote its files), then a larger --mem at the same --out: the retry trains (it was
 * refused as "already holds a run"). The --mem is found by stepping up from one too small for
 * the model, by a sixteenth each time; a refusal before the run opened names the --mem it needs
 * at least, so the steps go on from a sixteenth below that (no --mem under it opens the run).
 * Once refused in its pass, the steps are a quarter: the retry only has to fit. The larger graph
 * makes the strategies' caches the part that does not fit. */
static void refused_then_retried(const char *strategy, const char *opts)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/retry-%s", root, strategy);
    int refused_in_pass = 0, trained = 0;
    /* a first run with room builds the strategy's derived files (hier's partition and static
     * pairs take more memory to build than to use), as a user's earlier run would have */
    char *out = NULL;
    int rc = tg_test_cli(&out,
                         "train %s --out %s-prep " SAGE " --epochs 1 --threads 1 --strategy %s %s "
                         "--mem 256M",
                         big, dir, strategy, opts);
    if (!run_ok(&out, strategy, rc)) return free(out);
    free(out);
    for (uint64_t mem = 16 << 20, next; mem <= (512u << 20) && !trained; mem = next) {
        next = mem + mem / 16;
        out = NULL;
        rc = tg_test_cli(&out,
                         "train %s --out %s " SAGE " --epochs 1 --threads 1 --strategy %s %s "
                         "--mem %lluK",
                         big, dir, strategy, opts, (unsigned long long)(mem >> 10));
        if (rc == 0) {
            trained = 1;
        } else if (out && strstr(out, "already holds a run")) {
            TG_FAIL("%s: the retry at --mem %lluK is refused:\n%s", strategy,
                    (unsigned long long)(mem >> 10), out);
            free(out);
            return;
        } else {
            /* refused after the run opened: its files were written */
            if (out && strstr(out, "training sage on ")) {
                if (!refused_in_pass)
                    fprintf(stderr, "%s: refused in its first pass at --mem %lluK\n", strategy,
                            (unsigned long long)(mem >> 10));
                refused_in_pass++;
                next = mem + mem / 4;
            } else if (!refused_in_pass) {
                uint64_t ask = asked_mem(out);
                if (ask - ask / 16 > next) next = ask - ask / 16;
            }
            /* nothing of the refused run is left to block the next */
            TG_CHECK(access(dir, F_OK) != 0 || tg_test_count_entries(dir, 1) == 0);
        }
        free(out);
    }
    TG_CHECK(trained);
    if (!refused_in_pass) TG_FAIL("%s was never refused inside its first pass", strategy);
}

TG_TEST(refused_start_does_not_block)
{
    refused_then_retried("ginex", "");
    refused_then_retried("diskgnn", "");
    refused_then_retried("hier", "");
}

int main(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("config"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    snprintf(big, sizeof big, "%s/big", root);
    so.nodes = 6000;
    so.dim = 256;
    synth_write(big, &so);
    TG_RUN(file_round_trip_and_errors);
    TG_RUN(library_resume_checked);
    TG_RUN(sampled_sage_with_strategy_option);
    TG_RUN(exact_strategy_changes);
    TG_RUN(old_run_directory);
    TG_RUN(config_flags_carry_their_defaults);
    TG_RUN(resume_ladies_with_layer_sizes);
    TG_RUN(refused_start_does_not_block);
    const char *src = tg_test_shared_dataset("cora");
    if (!src) {
        fprintf(stderr, "SKIP (cora part): ../shared/datasets/cora not found\n");
        return tg_test_done();
    }
    snprintf(cora, sizeof cora, "%s/cora", root);
    tg_import_opts_t io;
    tg_import_opts_default(&io);
    io.kind = TG_IMPORT_OGB;
    io.src = src;
    io.split = "planetoid";
    if (tg_import(cora, &io) < 0) {
        fprintf(stderr, "import of %s failed: %s\n", src, tg_errmsg());
        return 1;
    }
    TG_RUN(cora_resume_takes_weight_decay);
    return tg_test_done();
}
