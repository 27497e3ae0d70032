/* The command line as a new user meets it: global options on either side of the command, the
 * nearest name for a mistyped option or command, --checkpoint as a run directory or a file in
 * one, a truncated checkpoint's message, one message per integer rule, and help that fits a
 * screen with the strategies' options described by `tiergnn strategies`. */
#include "test_engine_common.h"

#include "tiergnn/engine.h"

static char ds[4200], root[4000];

static void setup(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("cli"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 200;
    synth_write(ds, &so);
}

/* A tiny run: one epoch of a narrow SAGE, every log line but warnings still printed. */
#define TINY "--hidden 8 --fanouts 3,3 --batch-size 64 --epochs 1 --threads 1"

/* Runs the CLI, expecting exit status rc_want and `needle` in its output (NULL: anything). */
static char *expect_cli(int rc_want, const char *needle, const char *args)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "%s", args);
    if (rc != rc_want || (needle && (!out || !strstr(out, needle))))
        TG_FAIL("tiergnn %s: exit %d (expected %d), output lacks '%s':\n%s", args, rc, rc_want,
                needle ? needle : "", out ? out : "");
    return out;
}

static void cli_ok(const char *needle, const char *fmt, const char *a, const char *b)
{
    char args[9000];
    snprintf(args, sizeof args, fmt, a, b);
    free(expect_cli(0, needle, args));
}

static void cli_fails(const char *needle, const char *fmt, const char *a, const char *b)
{
    char args[9000];
    snprintf(args, sizeof args, fmt, a, b);
    free(expect_cli(1, needle, args));
}

static int lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

/* How many lines of out are exactly `line`. */
static int count_line(const char *out, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *p = out; p && *p;) {
        const char *e = strchr(p, '\n');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        n += l == len && !strncmp(p, line, len);
        p = e ? e + 1 : NULL;
    }
    return n;
}

TG_TEST(global_options_after_the_command)
{
    char *out = NULL;
    /* --quiet after the command: the run's info lines are gone, as with --quiet before it */
    int rc = tg_test_cli(&out, "train %s --out %s/q " TINY " --quiet", ds, root);
    TG_CHECK(rc == 0 && out && !strstr(out, "epoch 1/1"));
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    rc = tg_test_cli(&out, "--quiet train %s --out %s/q2 " TINY, ds, root);
    TG_CHECK(rc == 0 && out && !strstr(out, "epoch 1/1"));
    free(out);
    rc = tg_test_cli(&out, "train %s --out %s/v " TINY " -v", ds, root);
    TG_CHECK(rc == 0 && out && strstr(out, "epoch 1/1"));
    free(out);
    /* and for the other commands that parse options */
    cli_ok(NULL, "info %s --quiet%s", ds, "");
    cli_ok(NULL, "verify %s -q%s", ds, "");
    cli_ok("strategies", "strategies --quiet%s%s", "", "");
}

TG_TEST(unknown_names_get_the_nearest)
{
    cli_fails("unknown option '--windw' (did you mean --window?)", "train %s --out %s/x --windw 3",
              ds, root);
    cli_fails("unknown option '--epoch' (did you mean --epochs?)", "train %s --out %s/x --epoch 2",
              ds, root);
    cli_fails("(did you mean --checkpoint?)", "eval %s --chekpoint %s/x", ds, root);
    cli_fails("(did you mean --split?)", "eval %s --checkpoint %s/x --splt test", ds, root);
    cli_fails("(did you mean --features-in-ram?)", "train %s --out %s/x --featurs-in-ram 0", ds,
              root);
    cli_fails("(did you mean --nodes?)", "generate %s/g --node 100%s", root, "");
    /* nothing near: no guess */
    char *out = expect_cli(1, "unknown option '--frobnicate'", "info . --frobnicate");
    TG_CHECK(out && !strstr(out, "did you mean"));
    free(out);
    /* commands and the options before them */
    free(expect_cli(2, "unknown command 'trian' (did you mean train?)", "trian"));
    free(expect_cli(2, "unknown option '--quite' (did you mean --quiet?)", "--quite train"));
    free(expect_cli(1, "no strategy 'gidz' (did you mean gids?)", "strategies gidz"));
}

TG_TEST(checkpoint_is_a_run_or_a_file)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s/run " TINY, ds, root);
    TG_CHECK(rc == 0);
    if (rc) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
    /* the run directory, its best.bin and its checkpoint.bin */
    char args[20000];
    snprintf(args, sizeof args, "eval %s --checkpoint %s/run --json", ds, root);
    char *by_dir = expect_cli(0, "\"acc\"", args);
    snprintf(args, sizeof args, "eval %s --checkpoint %s/run/best.bin --json", ds, root);
    char *by_best = expect_cli(0, "\"acc\"", args);
    snprintf(args, sizeof args, "eval %s --checkpoint %s/run --last --json", ds, root);
    char *by_last = expect_cli(0, "\"acc\"", args);
    snprintf(args, sizeof args, "eval %s --checkpoint %s/run/checkpoint.bin --json", ds, root);
    char *by_ckpt = expect_cli(0, "\"acc\"", args);
    TG_CHECK(by_dir && by_best && json_value(by_dir, "acc", 0) == json_value(by_best, "acc", 0));
    TG_CHECK(by_last && by_ckpt && json_value(by_last, "acc", 0) == json_value(by_ckpt, "acc", 0));
    TG_CHECK(by_best && !strstr(by_best, "best.bin/best.bin"));
    free(by_dir);
    free(by_best);
    free(by_last);
    free(by_ckpt);
    /* what is refused, naming what it expected */
    cli_fails("names the best model", "eval %s --checkpoint %s/run/best.bin --last", ds, root);
    cli_fails("expected a run directory, or the best.bin",
              "eval %s --checkpoint %s/run/result.json", ds, root);
    cli_fails("no such run directory or file", "eval %s --checkpoint %s/nowhere/best.bin", ds,
              root);
    /* infer takes the same forms: the run's best.bin predicts as the run directory does */
    char pa[4300], pb[4300];
    snprintf(pa, sizeof pa, "%s/pred-dir", root);
    snprintf(pb, sizeof pb, "%s/pred-file", root);
    snprintf(args, sizeof args, "infer %s --checkpoint %s/run --out %s", ds, root, pa);
    free(expect_cli(0, "", args));
    snprintf(args, sizeof args, "infer %s --checkpoint %s/run/best.bin --out %s", ds, root, pb);
    free(expect_cli(0, "", args));
    TG_CHECK(tg_test_same_file(pa, pb));
    snprintf(args, sizeof args, "infer %s --checkpoint %s/run/result.json --out %s/x", ds, root,
             root);
    free(expect_cli(1, "expected a run directory, or the best.bin", args));
    snprintf(args, sizeof args, "infer %s --checkpoint %s/run --out %s/x --chunk-nodes 0", ds, root,
             root);
    free(expect_cli(1, "--chunk-nodes must be at least 1", args));
}

TG_TEST(truncated_checkpoint_says_what_it_lacks)
{
    char src[4200], dst_dir[4200], dst[4300];
    snprintf(src, sizeof src, "%s/tr", root);
    char *out = NULL;
    int rc = tg_test_cli(&out, "train %s --out %s " TINY, ds, src);
    TG_CHECK(rc == 0);
    free(out);
    snprintf(src, sizeof src, "%s/tr/best.bin", root);
    snprintf(dst_dir, sizeof dst_dir, "%s/cut", root);
    snprintf(dst, sizeof dst, "%s/best.bin", dst_dir);
    TG_CHECK_OK(tg_mkdir_p(dst_dir));
    char *data = NULL;
    size_t len = 0;
    TG_CHECK_OK(tg_read_file(src, &data, &len));
    TG_CHECK(len > 1000);
    if (len <= 1000) {
        free(data);
        return;
    }
    TG_CHECK_OK(tg_write_file_atomic(dst, data, 1000));
    char want[4600];
    snprintf(want, sizeof want,
             "%s: checkpoint truncated in parameters: the file has 1000 bytes but "
             "should have %zu",
             dst, len);
    cli_fails(want, "eval %s --checkpoint %s", ds, dst);
    cli_fails("2-layer sage model with", "eval %s --checkpoint %s", ds, dst);
    cli_fails("the file was cut short", "eval %s --checkpoint %s", ds, dst);
    free(data);
}

TG_TEST(one_rule_one_message)
{
    /* a value that is no integer and one below the minimum: the same message, naming the value */
    const char *const cases[][3] = {
        {"train %s --out %s/x --epochs 1.5", "--epochs must be at least 1 (an integer), got '1.5'"},
        {"train %s --out %s/x --epochs 0", "--epochs must be at least 1 (an integer), got '0'"},
        {"train %s --out %s/x --epochs=-2", "--epochs must be at least 1 (an integer), got '-2'"},
        {"train %s --out %s/x --threads 0",
         "--threads must be between 1 and 1024 (an integer), got '0'"},
        {"train %s --out %s/x --threads two",
         "--threads must be between 1 and 1024 (an integer), got 'two'"},
        {"train %s --out %s/x --eval-chunk 0",
         "--eval-chunk must be at least 1 (an integer), got '0'"},
        {"train %s --out %s/x --eval-chunk 2.5",
         "--eval-chunk must be at least 1 (an integer), got '2.5'"},
        {"train %s --out %s/x --seed 1e3", "--seed must be a non-negative integer, got '1e3'"},
        {"eval %s --checkpoint %s/x --eval-chunk 0",
         "--eval-chunk must be at least 1 (an integer), got '0'"},
        {"eval %s --checkpoint %s/x --threads 2000",
         "--threads must be between 1 and 1024 (an integer), got '2000'"},
        {"bench %s --mem 64M --out %s/b --epochs 0",
         "--epochs must be at least 1 (an integer), got '0'"},
        {"generate %s/g%s --nodes 0", "--nodes must be at least 1 (an integer), got '0'"},
        {"generate %s/g%s --nodes 1.5", "--nodes must be at least 1 (an integer), got '1.5'"},
        {"partition %s --parts 4 --passes 0%s",
         "--passes must be between 1 and 100 (an integer), got '0'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int gen = !strncmp(cases[i][0], "generate", 8);
        cli_fails(cases[i][1], cases[i][0], gen ? root : ds,
                  gen || !strncmp(cases[i][0], "partition", 9) ? "" : root);
    }
}

TG_TEST(help_fits_a_screen)
{
    static const char *const commands[] = {"train", "eval", "bench"};
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", commands[c]);
        char *out = expect_cli(0, "strategies (--strategy NAME", args);
        /* the common options and one line per strategy; each option name still findable */
        if (lines(out) > 100) TG_FAIL("%s: %d lines", args, lines(out));
        for (int i = 0; out && i < tg_strategy_count(); i++) {
            const tg_strategy_info_t *si = tg_strategy_info(i);
            char head[64];
            snprintf(head, sizeof head, "\n  %-10s", si->name);
            const char *at = strstr(out, head);
            TG_CHECK(at != NULL);
            /* the strategy's one line is followed by another strategy or the legend */
            if (at) TG_CHECK(!strncmp(strchr(at + 1, '\n'), "\n  ", 3));
            for (int k = 0; k < si->num_opts; k++) {
                char flag[96];
                snprintf(flag, sizeof flag, "--%s", si->opts[k].name);
                TG_CHECK(strstr(out, flag) != NULL);
                /* but not described here: the help text is `tiergnn strategies NAME`'s */
                TG_CHECK(!strstr(out, si->opts[k].help));
            }
        }
        free(out);
    }
    /* the list: each strategy with its summary */
    char *list = expect_cli(0, "'tiergnn strategies NAME'", "strategies");
    for (int i = 0; list && i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        TG_CHECK(strstr(list, si->name) != NULL);
        char first[40];
        snprintf(first, sizeof first, "%.30s", si->summary);
        TG_CHECK(strstr(list, first) != NULL);
    }
    TG_CHECK(lines(list) < 60);
    free(list);
    /* one strategy: every option it takes with its own text; the same from train */
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        char args[128];
        snprintf(args, sizeof args, "strategies %s", si->name);
        char *one = expect_cli(0, si->name, args);
        for (int k = 0; one && k < si->num_opts; k++) {
            char flag[96];
            snprintf(flag, sizeof flag, "  --%s", si->opts[k].name);
            TG_CHECK(strstr(one, flag) != NULL);
            char start[48];
            snprintf(start, sizeof start, "%.40s", si->opts[k].help);
            TG_CHECK(strstr(one, start) != NULL);
        }
        snprintf(args, sizeof args, "train --help-strategy %s", si->name);
        char *again = expect_cli(0, si->name, args);
        TG_CHECK(one && again && !strcmp(one, again));
        free(one);
        free(again);
    }
    /* every strategy's options: an option several strategies take is described once */
    char *all = expect_cli(0, "options of several strategies", "strategies --all");
    int shared = 0;
    for (int i = 0; all && i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        for (int k = 0; k < si->num_opts; k++) {
            const tg_strategy_opt_t *op = &si->opts[k];
            char head[128];
            snprintf(head, sizeof head, "  --%s%s%s", op->name, op->meta ? " " : "",
                     op->meta ? op->meta : "");
            if (count_line(all, head) != 1)
                TG_FAIL("strategies --all: '%s' %d times", head, count_line(all, head));
            shared += !strcmp(op->name, "extractors");
        }
    }
    TG_CHECK(shared >= 2); /* the tables do share options: the test tests something */
    TG_CHECK(all && strstr(all, "taken by gnndrive, pagraph"));
    free(all);
    free(expect_cli(1, "no strategy 'bogus'", "train --help-strategy bogus"));
}

int main(void)
{
    setup();
    TG_RUN(global_options_after_the_command);
    TG_RUN(unknown_names_get_the_nearest);
    TG_RUN(checkpoint_is_a_run_or_a_file);
    TG_RUN(truncated_checkpoint_says_what_it_lacks);
    TG_RUN(one_rule_one_message);
    TG_RUN_PLAIN(help_fits_a_screen); /* the help texts */
    return tg_test_done();
}
