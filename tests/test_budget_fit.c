/* The budget plan lowers what a strategy holds in flight before it refuses (docs/STRATEGIES.md,
 * "The memory budget"): for every strategy of the table, on a small graph drawn with the shared
 * bench's generator options, budgets that cannot hold the largest settings in flight but hold
 * the model and one batch. Where the strategy's smallest settings train there, the plan takes its
 * defaults too, saying what it lowered (at the first budget they train); where they do not, the
 * defaults' refusal counts the smallest settings' matrices in flight. Settings given on the
 * command line are kept. Exact strategies whose count was lowered write the checkpoint of the
 * memory strategy without --mem, byte for byte. */
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/engine.h"
#include "engine/engine-impl.h"

static char root[4000], ds[4200];

#define MODEL                                                                                      \
    "--model sage --layers 2 --hidden 64 --fanouts 10,10 --batch-size 512 --seed 3 --threads 2 "   \
    "--epochs 1 --io-depth 8"
/* Every setting that holds batches in flight, given: none may be lowered. */
#define LARGEST "--queue-depth 2 --sweep-batches 2 --extractors 2 --sampler-threads 2"
#define SMALLEST "--queue-depth 1 --sweep-batches 1 --extractors 1 --sampler-threads 1"
/* Budgets that hold the model and one batch (about 25 MiB beside the data) but not every
 * strategy's largest settings in flight: the first none of them, the second some; under the
 * sanitizers the plan counts a fixed 24 MiB for the process. */
#ifdef TG_SANITIZE
static const char *const mems[] = {"60M", "74M"};
#else
static const char *const mems[] = {"45M", "59M"};
#endif

/* Trains `strategy` with flags into root/name; returns the exit status, *out the output. */
static int train(char **out, const char *name, const char *strategy, const char *flags,
                 const char *mem)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    tg_rmtree(dir);
    return tg_test_cli(out, "train %s --out %s " MODEL " --strategy %s %s%s %s", ds, dir, strategy,
                       mem ? "--mem " : "", mem ? mem : "", flags);
}

static int refused(const char *out)
{
    return out && strstr(out, "is too small for this model and batch size");
}

/* The --mem a plan refusal asks for (0: none). */
static unsigned long long asks(const char *out)
{
    const char *g = out ? strstr(out, "give --mem ") : NULL;
    unsigned long long m = 0;
    if (!g || sscanf(g, "give --mem %lluM", &m) != 1) return 0;
    return m;
}

/* The matrices in flight a plan refusal counts (-1: none). */
static int matrices(const char *out)
{
    const char *g = out ? strstr(out, "one batch's activations") : NULL;
    int k = -1;
    if (!g || !(g = strstr(g, ") and ")) || sscanf(g, ") and %d input matrices", &k) != 1)
        return -1;
    return k;
}

TG_TEST(every_strategy_lowers_before_refusing)
{
    char *ref = NULL;
    TG_CHECK(train(&ref, "memory-ref", "memory", "", NULL) == 0);
    free(ref);
    char refck[4400];
    snprintf(refck, sizeof refck, "%s/memory-ref/%s", root, TG_CKPT_NAME);
    int trained_lowered = 0, level_trained[2] = {0, 0};
    for (int lv = 0; lv < 2; lv++)
        for (int i = 0; i < tg_strategy_count(); i++) {
            const char *mem = mems[lv];
            const tg_strategy_info_t *si = tg_strategy_info(i);
            char *big = NULL, *small = NULL, *def = NULL;
            char name[64];
            /* the largest settings at the first budget only, where their refusal is checked */
            const char *largest = "not run";
            if (lv == 0) {
                snprintf(name, sizeof name, "%s-largest-%d", si->name, lv);
                largest = train(&big, name, si->name, LARGEST, mem) ? "refused" : "trains";
            }
            snprintf(name, sizeof name, "%s-smallest-%d", si->name, lv);
            int rc_small = train(&small, name, si->name, SMALLEST, mem);
            snprintf(name, sizeof name, "%s-default-%d", si->name, lv);
            int rc_def = train(&def, name, si->name, "", mem);
            fprintf(stderr, "%s at --mem %s: largest %s (asks %lluM), smallest %s, defaults %s\n",
                    si->name, mem, largest, asks(big), rc_small ? "refused" : "trains",
                    rc_def ? "refused" : "trains");
            /* the largest settings, given, are kept: the first budget refuses them */
            if (lv == 0 && !refused(big))
                TG_FAIL("%s: --mem %s holds the largest settings:\n%s", si->name, mem,
                        big ? big : "");
            level_trained[lv] += rc_small == 0;
            if (rc_small == 0) {
                /* the plan fits the defaults; a strategy's own caches at the first pass may
                 * still want more than the budget's edge leaves (its own message, not the
                 * plan's) */
                if (refused(def))
                    TG_FAIL("%s: its smallest settings train, its defaults are refused:\n%s",
                            si->name, def ? def : "");
                if (lv == 0 && rc_def != 0)
                    TG_FAIL("%s: its smallest settings train, its defaults do not:\n%s", si->name,
                            def ? def : "");
                /* defaults that needed lowering say what they lowered */
                int lowered = def && strstr(def, "leaves room for") != NULL;
                if (def && lowered && !strstr(def, " (default "))
                    TG_FAIL("%s: what was lowered is not said:\n%s", si->name, def);
                if (rc_def == 0 && lowered && (si->caps & TG_STRAT_EXACT)) {
                    char ck[4400];
                    snprintf(ck, sizeof ck, "%s/%s-default-%d/%s", root, si->name, lv,
                             TG_CKPT_NAME);
                    if (!tg_test_same_file(ck, refck))
                        TG_FAIL("%s: fewer batches in flight changed the checkpoint", si->name);
                    trained_lowered++;
                }
            } else if (refused(small)) {
                /* the defaults lowered as far as they go before the same refusal */
                if (!refused(def) || matrices(def) != matrices(small))
                    TG_FAIL("%s: the smallest settings hold %d matrices in flight, the defaults' "
                            "refusal %d:\n%s",
                            si->name, matrices(small), matrices(def), def ? def : "");
            }
            free(big);
            free(small);
            free(def);
        }
    /* the graph and --mem are chosen so that the out-of-core defaults of the table bite */
    TG_CHECK(trained_lowered >= 2);
    TG_CHECK(level_trained[1] > level_trained[0]);
}

/* An epoch of one batch (the whole split in one step) holds one input matrix, whatever the
 * strategy would keep in flight over many: the plan counts one. */
TG_TEST(one_batch_one_matrix)
{
    char *out = NULL;
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/whole", root);
    int rc = tg_test_cli(&out,
                         "-v train %s --out %s --strategy memory --model gcn --layers 2 "
                         "--hidden 16 --fanouts -1,-1 --batch-size 0 --epochs 1 --eval-every 0 "
                         "--sampler-threads 2 --threads 2 --mem 512M",
                         ds, dir);
    if (rc) TG_FAIL("full-batch training failed:\n%s", out ? out : "");
    TG_CHECK(out && strstr(out, ", 1 batch matrices of "));
    free(out);
}

int main(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("budget_fit"));
    snprintf(ds, sizeof ds, "%s/g", root);
    /* the shared bench's generator options (bench/README.md), a small graph, another seed */
    char *out = NULL;
    int rc = tg_test_cli(&out,
                         "-q generate %s --nodes 40000 --avg-degree 15 --feat-dim 128 "
                         "--classes 16 --train-frac 0.05 --seed 2 --overwrite",
                         ds);
    if (rc) fprintf(stderr, "generate failed:\n%s\n", out ? out : "");
    free(out);
    if (rc) return 1;
    TG_RUN(every_strategy_lowers_before_refusing);
    TG_RUN(one_batch_one_matrix);
    rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
