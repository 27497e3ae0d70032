/* The CLI's option parsers, compiled into tiergnn._run: the argument table and strategy
 * options (args.c, cmd_strategy.c), train's flags and its --config / --resume merge
 * (cmd_train.c), eval's sampler check (cmd_eval.c) and infer's .npy copies (cmd_infer.c). The
 * CLI is not part of libtiergnn and these are static functions of its files, so the files are
 * compiled here as they are, once, and reached through the three functions below; the options,
 * defaults, rules and messages of Python's calls are then the CLI's by construction. */
#include "_run.h"

#include "../../src/cli/args.c"
#include "../../src/cli/cmd_strategy.c"
#include "../../src/cli/cmd_train.c"
#include "../../src/cli/cmd_eval.c"
#include "../../src/cli/cmd_infer.c"

int run_cli_train(run_argv_t *av, tg_train_opts_t *o, tg_train_config_t *cf)
{
    tg_args_t a;
    char spec[4096];
    tg_train_opts_default(o);
    int rc = tg_cli_strategy_spec(spec, sizeof spec, TRAIN_SPEC);
    if (!rc) rc = run_parse(&a, av, spec);
    if (!rc) rc = tg_cli_derived_dir(&a, 1);
    if (!rc) rc = parse_train(&a, o);
    if (!rc) rc = apply_config(&a, o, cf);
    return rc;
}

int run_cli_eval_sampler(const tg_args_t *a, const char *rundir, int last)
{
    return check_sampler(a, rundir, last);
}

int run_cli_infer_npy(const char *dataset, const char *out, int embeddings)
{
    return write_npy_outputs(dataset, out, embeddings);
}
