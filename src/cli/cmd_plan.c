/* tiergnn plan: the planner's table for a run, without training (engine/plan_profile.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/plan_profile.h"
#include "cli.h"
#include "tiergnn/util.h"

static const char plan_usage[] =
    "usage: tiergnn plan DATASET [train options] [--allow-inexact] [--json]\n"
    "\n"
    "Predicts one epoch of every strategy for the run `tiergnn train DATASET` with the same\n"
    "options would make, from measured figures: the device (its probe), the GEMM, sampler and\n"
    "gather rates of this machine, the dataset, --mem, and the run's first batches sampled with\n"
    "its RNG (at most 5% of an epoch's batches and 30 s). Prints each strategy's predicted epoch\n"
    "with its terms (bytes read, I/O, sampling, gathering, compute, preparation) and the one\n"
    "`--strategy auto` takes: the fastest exact strategy, or with --allow-inexact the fastest\n"
    "(hier changes the sampled graph). A strategy without a cost model is listed, skipped.\n"
    "\n"
    "  --json                         one JSON object (the same as the run's plan.json)\n"
    "  --allow-inexact                strategies that change the sampled graph may be taken\n"
    "  train's options                model, sampling, --epochs, --threads, --mem, --seed,\n"
    "                                 --batches-per-epoch, --config, strategy options\n"
    "                                 (diskgnn's --disk-budget): see 'tiergnn train --help'\n"
    "  --out                          not needed (nothing is written)\n"
    "\n"
    "docs/STRATEGIES.md (\"The planner\") describes the model and the profile.\n";

static int run_plan(const tg_cli_train_t *t)
{
    tg_cost_plan_opts_t po;
    int rc = tg_cost_plan_opts_train(&t->o, &po);
    if (rc < 0) return tg_cli_fail();
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    if (!pl) {
        tg_err(-ENOMEM, "out of memory");
        return tg_cli_fail();
    }
    if ((rc = tg_cost_plan(&po, pl)) < 0) {
        free(pl);
        return tg_cli_fail();
    }
    if (t->o.json) {
        char *text = tg_cost_plan_json(pl);
        if (text) printf("%s\n", text);
        free(text);
        if (!text) rc = -ENOMEM;
    } else {
        tg_cost_plan_print(pl, stdout);
        if (strcmp(t->o.strategy, "auto"))
            printf("note: --strategy %s is given: train takes it; the choice above is auto's\n",
                   t->o.strategy);
    }
    free(pl);
    fflush(stdout);
    return rc < 0 ? tg_cli_fail() : 0;
}

int tg_cmd_plan(int argc, char **argv)
{
    tg_cli_train_t *t = malloc(sizeof *t);
    if (!t) {
        tg_err(-ENOMEM, "out of memory");
        return tg_cli_fail();
    }
    int rc;
    if (tg_cli_plan_parse(argc, argv, t) < 0)
        rc = tg_cli_fail();
    else if (t->help)
        rc = tg_cli_help(&t->a, plan_usage);
    else
        rc = run_plan(t);
    tg_cli_train_destroy(t);
    free(t);
    return rc;
}
