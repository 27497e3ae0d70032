/* cli.h - argument parsing shared by the sub-commands (src/cli/cmd_*.c).
 *
 * Each sub-command declares its flags as a spec string, e.g.
 *     "nodes=,avg-degree=,feat-dim=,classes=,seed=,overwrite"
 * where a trailing '=' means the flag takes a value (given as "--flag VALUE" or "--flag=VALUE").
 * Unknown flags (with the nearest known name: "did you mean --window?"), missing values and
 * repeated flags are errors that name the flag. The global options --quiet (-q) and --verbose
 * (-v) are taken on either side of the command: the parser applies them where a command's spec
 * has no flag of that name.
 *
 * Everything in src/cli but main.c is the library tiergnn_cli_parse, which the CLI and the Python
 * package (python/src/_run*.c) both link: the commands Python runs are parse steps and run steps
 * below, so both take the same options by the same rules.
 */
#ifndef TG_CLI_H
#define TG_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tiergnn/config.h"
#include "tiergnn/data.h"
#include "tiergnn/engine.h"

#define TG_ARGS_MAX 64

typedef struct tg_args {
    int npos;
    const char *pos[TG_ARGS_MAX];
    int nflags;
    const char *flag[TG_ARGS_MAX];  /* name without "--" */
    const char *value[TG_ARGS_MAX]; /* NULL for boolean flags */
} tg_args_t;

/* Parses argv[0..argc) (argv[0] is the first argument after the sub-command name). */
int tg_args_parse(tg_args_t *a, int argc, char **argv, const char *spec);
int tg_args_has(const tg_args_t *a, const char *name);
const char *tg_args_str(const tg_args_t *a, const char *name, const char *def);
/* Integer flags: a value that is not an integer or is outside [lo, hi] is one message naming
 * the flag, the rule and the value ("--epochs must be at least 1 (an integer), got '1.5'").
 * The default def is not checked (0 may stand for "automatic"). tg_args_u64: lo 0, no max. */
int tg_args_uint(const tg_args_t *a, const char *name, uint64_t def, uint64_t lo, uint64_t hi,
                 uint64_t *out);
int tg_args_u64(const tg_args_t *a, const char *name, uint64_t def, uint64_t *out);
int tg_args_i64(const tg_args_t *a, const char *name, int64_t def, int64_t *out);
int tg_args_double(const tg_args_t *a, const char *name, double def, double *out);
/* Integer flag into an int, by tg_args_uint's rule. */
int tg_args_int_range(const tg_args_t *a, const char *name, int64_t def, int64_t lo, int64_t hi,
                      int *out);
int tg_args_size(const tg_args_t *a, const char *name, uint64_t def, uint64_t *out);

/* Default of --threads: the online CPUs, so a user who does not know the flag does not train on
 * one core; at least 1, at most 256 (the bound of --sampler-threads, whose default is T). */
int tg_cli_default_threads(void);

/* --hidden (default 256) and --heads (default 4 for GAT, else 1) as train and bench take them;
 * for GAT, hidden must be a multiple of heads (hidden = heads x per-head width). */
/* --feat-dtype f32 (default) or f16, as generate and import take it */
int tg_cli_feat_dtype(const tg_args_t *a, tg_feat_dtype_t *t);

/* GAT's attention heads when --heads is left out */
#define TG_CLI_GAT_HEADS 4
int tg_cli_model_widths(const tg_args_t *a, int is_gat, uint32_t *hidden, int *heads);

/* --sampler node|ladies (default node) and what it samples per layer, layer 0 first:
 * --fanouts for node (neighbours per node; default 10, an MLP 0), --layer-sizes for ladies
 * (nodes per layer, >= 1; default 512). --layers defaults to the list's count (else 2) and must
 * equal it. The other sampler's flag is refused, naming the one to use. */
struct tg_sampler_i;
int tg_cli_sampling(const tg_args_t *a, int is_mlp, int *layers, int64_t *fanouts,
                    const struct tg_sampler_i **sampler);

/* A global option (--quiet, -q, --verbose, -v): applies it and returns 1; 0 for any other arg. */
int tg_cli_global_option(const char *arg);

/* The name nearest to `name` (edit distance) among names[0..count) and the flags of spec (a
 * tg_args_parse spec; may be NULL), into out; 0 when none is near enough to be a typo of it. */
int tg_cli_closest(const char *name, const char *const *names, size_t count, const char *spec,
                   char *out, size_t len);

/* --checkpoint ARG of eval and infer: a run directory, or the best.bin / checkpoint.bin training
 * wrote in one. Gives the run directory (into rundir, len bytes) and which checkpoint to open
 * (*which_last: 1 = checkpoint.bin; a directory takes `last`, i.e. --last). A missing path, a
 * file of another name, or --last with best.bin is an error naming ARG and what was expected. */
int tg_cli_checkpoint(const char *arg, int last, char *rundir, size_t len, int *which_last);

/* The commands Python runs too (python/src/_run*.c), each as a parse step and a run step, so
 * that tiergnn.train(ds, out, **opts) and `tiergnn train` take the same options by the same
 * rules with the same messages.
 *
 *     tg_cli_eval_t e;
 *     if (tg_cli_eval_parse(argc, argv, &e) < 0) return tg_cli_fail();
 *     if (e.help) ...print the usage...
 *     tg_eval_result_t r;
 *     if (tg_cli_eval_run(&e, &r) < 0) return tg_cli_fail();
 *
 * tg_cli_X_parse reads the argv of `tiergnn X` (argv[0] is the first argument after X) into
 * its struct: the library's options, filled by the CLI's defaults and checks. With --help or
 * --help-strategy it stops with ->help set and the other fields unset (the CLI prints the text,
 * Python refuses it). Parsing may change the process's log level (--quiet, --verbose) and, for
 * train, eval and infer, its derived directory (--derived-dir). The options point into argv and
 * into the struct: both stay valid, and the struct in place, for as long as the run. */

/* tiergnn train: the flags, then --config FILE or --resume's RUNDIR/config.json merged in. */
typedef struct tg_cli_train {
    tg_args_t a;
    int help;
    tg_train_opts_t o;
    tg_train_config_t cf;                         /* owns the strings of a config file's settings */
    tg_strategy_arg_t sargs[TG_ARGS_MAX];         /* the strategy options of the flags */
    tg_strategy_arg_t merged[TG_CONFIG_MAX_ARGS]; /* the file's with the flags' over them */
} tg_cli_train_t;

/* On error, and after the run, tg_cli_train_destroy frees what parsing kept (t->cf). */
int tg_cli_train_parse(int argc, char **argv, tg_cli_train_t *t);
/* tiergnn plan: train's flags (and --config), --out not needed, --resume refused. */
int tg_cli_plan_parse(int argc, char **argv, tg_cli_train_t *t);
void tg_cli_train_destroy(tg_cli_train_t *t);

/* tiergnn eval: a checkpoint's accuracy on a split. */
typedef struct tg_cli_eval {
    tg_args_t a;
    int help;
    const char *dataset;
    const char *split; /* "valid", "test" or "train" */
    tg_file_id_t split_id;
    int json; /* --json: one JSON object instead of a sentence */
    char rundir[4096];
    tg_eval_opts_t o;
    tg_strategy_arg_t sargs[TG_ARGS_MAX];
} tg_cli_eval_t;

int tg_cli_eval_parse(int argc, char **argv, tg_cli_eval_t *e);
int tg_cli_eval_run(const tg_cli_eval_t *e, tg_eval_result_t *r); /* tg_eval */

/* tiergnn infer: predictions (and embeddings) of every node into out. */
typedef struct tg_cli_infer {
    tg_args_t a;
    int help;
    const char *dataset;
    const char *out;
    int npy; /* --format npy */
    char rundir[4096];
    tg_infer_opts_t o; /* o.progress 1, as the CLI draws it */
    tg_strategy_arg_t sargs[TG_ARGS_MAX];
} tg_cli_infer_t;

int tg_cli_infer_parse(int argc, char **argv, tg_cli_infer_t *p);
/* tg_infer, then with --format npy the .npy copies of its outputs (OUT.npy, OUT.emb.npy). */
int tg_cli_infer_run(const tg_cli_infer_t *p);

/* tiergnn generate OUT: run by tg_generate(g.out, &g.o). */
typedef struct tg_cli_generate {
    tg_args_t a;
    int help;
    const char *out;
    tg_gen_opts_t o;
} tg_cli_generate_t;

int tg_cli_generate_parse(int argc, char **argv, tg_cli_generate_t *g);

/* tiergnn import OUT --from KIND SRC: run by tg_import(p.out, &p.o). After an error, usage says
 * how the CLI follows it with its usage text (exit status 2): TG_CLI_USAGE_OPTION after the
 * message (a flag it does not know), TG_CLI_USAGE_OPERANDS after "tiergnn MESSAGE" (OUT, --from
 * or SRC missing); 0 for the other errors. */
enum { TG_CLI_USAGE_OPTION = 1, TG_CLI_USAGE_OPERANDS = 2 };

typedef struct tg_cli_import {
    tg_args_t a;
    int help;
    int usage;
    const char *out;
    tg_import_opts_t o;
} tg_cli_import_t;

int tg_cli_import_parse(int argc, char **argv, tg_cli_import_t *p);

/* Sub-commands: return the process exit status. argv[0] is the first argument after the name. */
int tg_cmd_generate(int argc, char **argv);
int tg_cmd_import(int argc, char **argv);
int tg_cmd_info(int argc, char **argv);
int tg_cmd_verify(int argc, char **argv);
int tg_cmd_clean(int argc, char **argv);
int tg_cmd_partition(int argc, char **argv);
int tg_cmd_train(int argc, char **argv);
int tg_cmd_eval(int argc, char **argv);
int tg_cmd_infer(int argc, char **argv);
int tg_cmd_bench(int argc, char **argv);
int tg_cmd_plan(int argc, char **argv);

/* Strategy options from the engine's table (cmd_strategy.c). */
struct tg_strategy_arg;
/* buf = base followed by every strategy option of the table (",name=" or ",name"). */
int tg_cli_strategy_spec(char *buf, size_t len, const char *base);
/* Parses argv with the flags of base and every strategy option into a; *help = 1 when --help or
 * --help-strategy was given (train, eval, infer). */
int tg_cli_parse_with_strategies(tg_args_t *a, int argc, char **argv, const char *base, int *help);
/* The flags of a that are strategy options, in args[0..*n) (pointing into a). */
int tg_cli_strategy_args(const tg_args_t *a, struct tg_strategy_arg *args, int max, int *n);
/* --strategy (default auto), checked against the table. */
int tg_cli_strategy_name(const tg_args_t *a, const char **out);
/* The usage section of train, eval, infer and bench: one line per strategy and the names of
 * their options (tiergnn strategies NAME describes them). */
void tg_cli_strategy_usage(FILE *f);
/* One strategy: its summary and every option it takes, to f; -EINVAL naming the strategies when
 * name is none of them. */
int tg_cli_strategy_help(FILE *f, const char *name);
/* --help-strategy NAME (that strategy's help), else --help (usage, then the strategies' usage
 * section) of train, eval and infer, to stdout; the exit status. */
int tg_cli_help(const tg_args_t *a, const char *usage);
/* tiergnn strategies [NAME | --all]. */
int tg_cmd_strategies(int argc, char **argv);

/* --derived-dir DIR of train, eval, infer, bench, info, clean and partition: sets the process's
 * derived directory (tg_derived_set_dir). create: make it and check that it can be written (the
 * commands that write there); an error names DIR. Without the flag: 0, nothing set. */
int tg_cli_derived_dir(const tg_args_t *a, int create);

/* Prints "tiergnn: <message>" to stderr and returns 1 (for `return tg_cli_fail();`). */
int tg_cli_fail(void);

#endif
