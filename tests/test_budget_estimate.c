/* The automatic choice's estimate (tg_budget_estimate) against what the budget plan measures
 * (tg_budget_plan's split: process, model, activations, matrices in flight): within 2x for a
 * full-batch GCN on Cora, a sampled GraphSAGE on a generated graph and LADIES on it. Then
 * `--strategy auto` on Cora picks the in-RAM strategy at a --mem where it trains. Cora is
 * skipped (its part only) when ../shared/datasets/cora is absent. */
#include "tg_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/data.h"
#include "tiergnn/engine.h"
#include "tiergnn/graph.h"
#include "engine/engine-impl.h"

static char root[4000];

/* "9.53 MiB" -> bytes; *s moves past it. */
static double parse_size(const char **s)
{
    char *end;
    double v = strtod(*s, &end);
    while (*end == ' ')
        end++;
    double mul = !strncmp(end, "GiB", 3)   ? 1073741824.0
                 : !strncmp(end, "MiB", 3) ? 1048576.0
                 : !strncmp(end, "KiB", 3) ? 1024.0
                                           : 1.0;
    *s = end;
    return v * mul;
}

/* The plan's reservation from its log line, and its matrices in flight. */
static double measured(const char *out, int *in_flight)
{
    const char *p = out ? strstr(out, "memory budget ") : NULL;
    if (!p || !(p = strstr(p, ": process "))) return 0;
    p += strlen(": process ");
    double proc = parse_size(&p);
    if (!(p = strstr(p, "model "))) return 0;
    p += 6;
    double model = parse_size(&p);
    if (!(p = strstr(p, "activations "))) return 0;
    p += 12;
    double act = parse_size(&p);
    if (!(p = strstr(p, ", ")) || sscanf(p + 2, "%d", in_flight) != 1) return 0;
    if (!(p = strstr(p, "batch matrices of "))) return 0;
    p += 18;
    double x = parse_size(&p);
    return proc + model + act + x * *in_flight;
}

/* Trains one epoch with flags, and compares the estimate for cfg with the plan's figure. */
static void compare(const char *what, const char *dataset, const char *flags,
                    const tg_model_config_t *cfg, uint64_t num_nodes, uint64_t batch_size,
                    const tg_sampler_i *sampler, const int64_t *fanouts)
{
    char *out = NULL, dir[4300];
    snprintf(dir, sizeof dir, "%s/run", root);
    tg_rmtree(dir);
    int rc = tg_test_cli(&out, "train %s --out %s --epochs 1 --threads 2 --seed 1 %s", dataset, dir,
                         flags);
    int k = 0;
    double meas = rc == 0 ? measured(out, &k) : 0;
    if (rc != 0 || meas <= 0) {
        TG_FAIL("%s: no plan measured:\n%s", what, out ? out : "");
        free(out);
        return;
    }
    double est = (double)tg_budget_estimate(cfg, num_nodes, batch_size, sampler, fanouts, k);
    fprintf(stderr, "%s: estimate %.2f MiB, the plan measured %.2f MiB (%d matrices): %.2fx\n",
            what, est / 1048576.0, meas / 1048576.0, k, est / meas);
    if (!(est <= 2 * meas && est >= meas / 2))
        TG_FAIL("%s: the estimate %.2f MiB is not within 2x of the measured %.2f MiB", what,
                est / 1048576.0, meas / 1048576.0);
    free(out);
}

static void model_cfg(tg_model_config_t *c, tg_model_type_t type, uint32_t in, uint32_t hidden,
                      uint32_t out)
{
    tg_model_config_default(c);
    c->type = type;
    c->in_dim = in;
    c->hidden = hidden;
    c->out_dim = out;
    c->num_layers = 2;
}

TG_TEST(generated_sage_and_ladies)
{
    char ds[4200], *out = NULL;
    snprintf(ds, sizeof ds, "%s/g", root);
    int rc = tg_test_cli(&out,
                         "-q generate %s --nodes 40000 --avg-degree 15 --feat-dim 128 "
                         "--classes 16 --train-frac 0.05 --seed 2 --overwrite",
                         ds);
    free(out);
    TG_CHECK(rc == 0);
    tg_model_config_t c;
    model_cfg(&c, TG_MODEL_SAGE, 128, 64, 16);
    int64_t fo[2] = {10, 10};
    compare("sage 10,10 x 512", ds,
            "--strategy gnndrive --mem 200M --model sage --layers 2 --hidden 64 --fanouts 10,10 "
            "--batch-size 512",
            &c, 40000, 512, NULL, fo);
    int64_t ls[2] = {2000, 1000};
    compare("ladies 2000,1000 x 512", ds,
            "--strategy gnndrive --mem 200M --model gcn --layers 2 --hidden 64 --sampler ladies "
            "--layer-sizes 2000,1000 --batch-size 512",
            (model_cfg(&c, TG_MODEL_GCN, 128, 64, 16), &c), 40000, 512, &tg_sampler_ladies, ls);
}

TG_TEST(cora_gcn_full_batch)
{
    const char *src = tg_test_shared_dataset("cora");
    if (!src) {
        fprintf(stderr, "SKIP: ../shared/datasets/cora not found\n");
        return;
    }
    char ds[4200];
    snprintf(ds, sizeof ds, "%s/cora", root);
    tg_import_opts_t io;
    tg_import_opts_default(&io);
    io.kind = TG_IMPORT_OGB;
    io.src = src;
    io.split = "planetoid";
    TG_CHECK_OK(tg_import(ds, &io));
    const char *gcn = "--model gcn --layers 2 --hidden 16 --batch-size 0 --fanouts -1,-1";
    tg_model_config_t c;
    model_cfg(&c, TG_MODEL_GCN, 1433, 16, 7);
    int64_t fo[2] = {-1, -1};
    char flags[512];
    snprintf(flags, sizeof flags, "--strategy gnndrive --mem 200M %s", gcn);
    compare("cora gcn full-batch", ds, flags, &c, 2708, 0, NULL, fo);
    /* auto: the in-RAM strategy where it trains (data 15 MiB, the plan about 115 MiB) */
    char *out = NULL, dir[4300];
    snprintf(dir, sizeof dir, "%s/auto", root);
    tg_rmtree(dir);
    int rc =
        tg_test_cli(&out, "train %s --out %s --epochs 1 --threads 2 --mem 130M %s", ds, dir, gcn);
    TG_CHECK(rc == 0 && out && strstr(out, "strategy memory: planned"));
    if (rc || !strstr(out, "strategy memory")) fprintf(stderr, "%s\n", out ? out : "");
    free(out);
}

int main(void)
{
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("budget_estimate"));
    TG_RUN(generated_sage_and_ladies);
    TG_RUN(cora_gcn_full_batch);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
