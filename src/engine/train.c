/* The training run: epoch loop over the strategy's passes, evaluation, checkpoints (also when a
 * stop request arrives mid-epoch), JSON lines with the per-epoch I/O figures (see
 * tiergnn/engine.h). tg_train runs named stages: setup (check, open, resume, plans, budget),
 * then per epoch: the epoch's pass, evaluation, checkpoint, report. */
#include "engine-impl.h"
#include "plan_profile.h"
#include "tiergnn/config.h"
#include "tiergnn/dist.h"

#include <math.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tg_train_opts_default(tg_train_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = "auto";
    tg_model_config_default(&o->model);
    o->model.num_layers = 2;
    o->model.hidden = 256;
    o->model.dropout = 0.5f;
    tg_optim_config_default(&o->optim, TG_OPTIM_ADAM);
    o->optim.lr = 0.01f;
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        o->fanouts[l] = 10;
    o->batch_size = 1024;
    o->epochs = 10;
    o->eval_every = 1;
    o->checkpoint_every = 1;
    o->threads = 1;
    o->sampler_threads = -1;
    o->seed = 0;
}

/* ---------------------------------------------------------------- helpers */

static int check_opts(const tg_train_opts_t *o, const tg_meta_t *meta)
{
    if (!o->out_dir || !*o->out_dir)
        return tg_err(-EINVAL, "an output directory (--out RUNDIR) is required");
    if (o->epochs == 0) return tg_err(-EINVAL, "--epochs must be at least 1");
    if (o->threads < 1 || o->threads > 1024)
        return tg_err(-EINVAL, "--threads %d out of range, expected 1..1024", o->threads);
    if (o->sampler_threads < -1 || o->sampler_threads > 256)
        return tg_err(-EINVAL, "--sampler-threads %d out of range, expected 0..256",
                      o->sampler_threads);
    if (o->model.num_layers < 1 || o->model.num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "--layers %d out of range, expected 1..%d", o->model.num_layers,
                      TG_MAX_LAYERS);
    for (int l = 0; l < o->model.num_layers; l++)
        if (o->fanouts[l] < TG_FANOUT_ALL)
            return tg_err(-EINVAL, "fanout %lld for layer %d, expected -1 (all) or >= 0",
                          (long long)o->fanouts[l], l);
    if (o->sampler && o->sampler != &tg_sampler_node) {
        /* A layer-wise sampler's blocks carry weights that only GCN aggregates with (nn.h). */
        if (o->model.type != TG_MODEL_GCN)
            return tg_err(-EINVAL,
                          "--sampler %s needs --model gcn (its blocks carry importance weights "
                          "that only GCN uses), got --model %s",
                          o->sampler->name, tg_model_type_name(o->model.type));
        for (int l = 0; l < o->model.num_layers; l++)
            if (o->fanouts[l] < 1)
                return tg_err(-EINVAL,
                              "--sampler %s: %s %lld for layer %d, expected >= 1 nodes per layer",
                              o->sampler->name, o->sampler->amount ? o->sampler->amount : "fanout",
                              (long long)o->fanouts[l], l);
    }
    if (!(o->optim.lr > 0) || !isfinite(o->optim.lr))
        return tg_err(-EINVAL, "--lr must be a positive number, got %g", (double)o->optim.lr);
    if (!(o->optim.weight_decay >= 0) || !isfinite(o->optim.weight_decay))
        return tg_err(-EINVAL, "--weight-decay must be >= 0, got %g",
                      (double)o->optim.weight_decay);
    if (meta->num_train == 0) return tg_err(-EINVAL, "the dataset has an empty training split");
    return 0;
}

static void path_in(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

/* Compares the settings that determine the batches and the bookkeeping with the checkpoint's. */
static int check_resume(const tg_ckpt_info_t *ck, const tg_ckpt_info_t *now, const char *path)
{
    char diff[1024] = "";
    size_t n = 0;
#define DIFF(...) tg_err_list_add(diff, sizeof diff, &n, __VA_ARGS__)
    if (ck->seed != now->seed)
        DIFF("--seed %llu there vs %llu here", (unsigned long long)ck->seed,
             (unsigned long long)now->seed);
    if (ck->batch_size != now->batch_size)
        DIFF("--batch-size %llu there vs %llu here", (unsigned long long)ck->batch_size,
             (unsigned long long)now->batch_size);
    /* "" is node-wise (a version 1 or 2 record, or a node-wise run's) */
    const char *ck_s = ck->sampler[0] ? ck->sampler : "node";
    const char *now_s = now->sampler[0] ? now->sampler : "node";
    if (strcmp(ck_s, now_s) != 0) DIFF("--sampler %s there vs %s here", ck_s, now_s);
    if (ck->num_layers != now->num_layers)
        DIFF("%d layers there vs %d here", ck->num_layers, now->num_layers);
    else
        for (int l = 0; l < ck->num_layers; l++)
            if (ck->fanouts[l] != now->fanouts[l])
                DIFF("%s of layer %d %lld there vs %lld here",
                     strcmp(now_s, "node") ? "layer size" : "fanout", l, (long long)ck->fanouts[l],
                     (long long)now->fanouts[l]);
    if (ck->normalize_features != now->normalize_features)
        DIFF("--normalize-features %s there vs %s here", ck->normalize_features ? "on" : "off",
             now->normalize_features ? "on" : "off");
    if (ck->eval_sampled != now->eval_sampled)
        DIFF("evaluation %s there vs %s here", ck->eval_sampled ? "sampled" : "full",
             now->eval_sampled ? "sampled" : "full");
#undef DIFF
    if (n) return tg_err(-EINVAL, "cannot resume from %s: settings differ: %s", path, diff);
    return 0;
}

/* Loads checkpoint.bin into m (which must have the same config) and its record into ck. */
static int resume_from(const char *path, const tg_dataset_t *ds, const tg_ckpt_info_t *now,
                       tg_model_t *m, tg_ckpt_info_t *ck)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tg_err(-errno, "--resume: cannot open %s: %s", path, strerror(errno));
    int rc = tg_ckpt_read_record(f, path, ck);
    if (rc >= 0) rc = tg_ckpt_check_dataset(ck, ds, path);
    if (rc >= 0) rc = check_resume(ck, now, path);
    if (rc >= 0) rc = tg_model_load(m, f, path);
    fclose(f);
    return rc;
}

/* {"limit":..., ..., "rest":...}: the memory budget's split (tg_budget_plan_t), for the bench. */
static const char *budget_json(const tg_budget_plan_t *p, char *buf, size_t len)
{
    snprintf(buf, len,
             "{\"limit\":%llu,\"overhead\":%llu,\"model\":%llu,\"activations\":%llu,"
             "\"batch_x\":%llu,\"in_flight\":%llu,\"reserved\":%llu,\"data\":%llu,"
             "\"rest\":%llu}",
             (unsigned long long)p->limit, (unsigned long long)p->overhead,
             (unsigned long long)p->model, (unsigned long long)p->activations,
             (unsigned long long)p->batch_x, (unsigned long long)p->in_flight,
             (unsigned long long)p->reserved, (unsigned long long)p->data,
             (unsigned long long)p->rest);
    return buf;
}

/* bp: the budget's split when this run planned one (bp->reserved > 0), else all zero. */
static void emit_final(const tg_train_opts_t *o, const tg_train_result_t *res, const tg_model_t *m,
                       const tg_run_t *r, const char *rundir, uint64_t batch_bytes_peak,
                       const tg_budget_plan_t *bp, const char *plan_json)
{
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_uint(&j, "best_epoch", res->best_epoch);
    tg_json_num(&j, "valid_acc", res->best_epoch ? res->best_valid_acc : NAN);
    tg_json_num(&j, "test_acc", res->best_epoch ? res->test_acc : NAN);
    tg_json_uint(&j, "peak_rss_bytes", res->peak_rss_bytes);
    tg_json_num(&j, "valid_loss", res->best_epoch ? res->best_valid_loss : NAN);
    tg_json_uint(&j, "epochs", res->epochs_done);
    tg_json_num(&j, "train_time_s", res->train_time_s);
    tg_json_num(&j, "final_train_loss", res->last_train_loss);
    tg_json_str(&j, "model", tg_model_type_name(tg_model_config(m)->type));
    tg_json_str(&j, "strategy", r->strat_i->info.name);
    tg_json_str(&j, "sampler", tg_sampler_name(r->sampler));
    tg_json_uint(&j, "seed", o->seed);
    tg_json_uint(&j, "param_count", tg_model_param_count(m));
    tg_json_uint(&j, "model_bytes", tg_model_param_bytes(m));
    tg_json_uint(&j, "activation_bytes", tg_model_act_bytes(m));
    tg_json_uint(&j, "batch_bytes_peak", batch_bytes_peak);
    tg_json_uint(&j, "mem_bytes", r->budget.limit);
    tg_json_uint(&j, "data_bytes_peak", r->budget.peak);
    char bj[512];
    if (bp->reserved) tg_json_raw(&j, "budget", budget_json(bp, bj, sizeof bj));
    if (plan_json) tg_json_raw(&j, "plan", plan_json);
    char *text = NULL;
    tg_json_end(&j, o->json, &text);
    if (text) {
        char path[4096];
        path_in(path, sizeof path, rundir, TG_RESULT_NAME);
        /* result.json is a convenience copy; a failure to write it is only worth a warning. */
        size_t tlen = strlen(text);
        char *nl = realloc(text, tlen + 2); /* end the file with a newline */
        if (nl) {
            text = nl;
            text[tlen++] = '\n';
            text[tlen] = 0;
        }
        if (tg_write_file_atomic(path, text, tlen) < 0) tg_log_warn("%s", tg_errmsg());
        free(text);
    }
}

/* ---------------------------------------------------------------- the training step */

typedef struct {
    tg_run_t *r;
    tg_model_t *m;
    const uint8_t *train_mask; /* whole-graph mode: which seeds carry a label */
    volatile sig_atomic_t *stop;
    int32_t *y;
    size_t y_cap;
    /* the epoch so far */
    double compute_s, loss_sum;
    uint64_t correct, count, batches, feature_bytes;
    uint64_t last_batch; /* id of the last batch trained */
    uint64_t trained;    /* steps this invocation trained, all epochs */
    int show_bar;
    tg_progress_t *prog;
    /* data-parallel (tiergnn/dist.h): this rank's share [start, end) of the epoch's batches, the
     * gradient sync's state, the rank mixed into the dropout seeds */
    int dist;
    uint64_t start, end, salt;
    tg_dist_step_t *ds;
} step_ctx_t;

static int train_step(void *ctx, const tg_batch_t *b, const float *X)
{
    step_ctx_t *c = ctx;
    /* a strategy with its own batch count runs past the share: not this rank's batch */
    if (c->dist && (b->id < c->start || b->id >= c->end)) return 0;
    size_t need = (size_t)b->num_seeds * c->r->label_width;
    if (need > c->y_cap) {
        free(c->y);
        c->y = malloc(need * sizeof *c->y);
        c->y_cap = c->y ? need : 0;
        if (!c->y) return tg_err(-ENOMEM, "out of memory for the labels of %u seeds", b->num_seeds);
    }
    tg_run_labels(c->r, b->nodes, b->num_seeds, c->train_mask, c->y);
    tg_step_stats_t st;
    double t0 = tg_now();
    /* every rank's step meets the others' in the gradient sum, also when it fails */
    int rc =
        c->dist ? tg_model_train_step_sync(c->m, b, X, c->y, c->salt, tg_dist_grad_sync, c->ds, &st)
                : tg_model_train_step(c->m, b, X, c->y, &st);
    c->compute_s += tg_now() - t0;
    c->last_batch = b->id;
    if (rc < 0) return rc;
    c->loss_sum += st.loss * (double)st.count;
    c->correct += st.correct;
    c->count += st.count;
    c->batches++;
    c->trained++;
    c->feature_bytes += (uint64_t)b->num_nodes * c->r->row_bytes;
    if (c->show_bar) {
        char sfx[64];
        snprintf(sfx, sizeof sfx, "loss %.4f", c->count ? c->loss_sum / (double)c->count : 0.0);
        tg_progress_update(c->prog, c->batches, sfx);
    }
    /* ranks stop together: the sync told every rank whether any asked to */
    if (c->dist) return c->ds->stopped ? TG_PASS_STOP : 0;
    return c->stop && *c->stop ? TG_PASS_STOP : 0;
}

/* ---------------------------------------------------------------- the run's state */

/* What the stages of tg_train share. */
typedef struct {
    tg_train_opts_t o; /* the options; an MLP's fanouts zeroed, the model's dims from the data */
    tg_train_result_t *res;
    tg_run_t r;
    tg_model_t *m;
    tg_ckpt_info_t ck;   /* the state checkpoint.bin records */
    tg_plan_t plan;      /* the epochs' seed orders and batches */
    tg_plan_t next_plan; /* the next epoch's, for strategies that prepare it (TG_STRAT_NEXT_PASS) */
    uint8_t *train_mask; /* whole-graph mode: which seeds carry a label */
    int whole;           /* every step trains on the whole graph */
    uint64_t order_bytes, mask_bytes;
    uint64_t epoch_batches, all_batches; /* an epoch's batches; without --batches-per-epoch */
    tg_budget_plan_t bp;                 /* the budget's split when this run planned one */
    char *best_blob; /* the best model's checkpoint bytes, not yet on disk if best_dirty */
    size_t best_len;
    int best_dirty;
    uint64_t ckpt_epoch; /* epochs done in the checkpoint on disk */
    uint64_t batch_bytes_peak;
    const char *lw_tmp; /* where layer-wise evaluation keeps its intermediate layers (NULL: RAM) */
    int show_bar;
    tg_progress_t prog;
    step_ctx_t sc;
    int wrote;            /* this invocation wrote the run's files (a new run's) */
    tg_train_opts_t file; /* --resume: the settings of config.json, when the run has one */
    tg_train_config_t cf; /* what file points into */
    char ckpt_path[4096], best_path[4096], cfg_path[4096];
    const char *planned; /* strategy auto: the planner's choice (NULL: the fixed rule's) */
    char *plan_json;     /* its table (tg_cost_plan_json), for result.json and --json */
    /* the run's strategy options with what the planner planned added (diskgnn's --disk-budget,
     * the prediction's knobs, in plan_add); NULL: the options given */
    tg_strategy_arg_t *plan_args;
    int plan_nargs;
    tg_cost_plan_args_t plan_add;
    /* data-parallel (docs/DISTRIBUTED.md): under mpirun, rank of K; rank 0 writes the files */
    int dist, rank, K;
    uint64_t share_start, share_m; /* this epoch's share: batches [start, start + m) */
    tg_dist_step_t ds;
} trainer_t;

/* What one epoch did, from its pass to its report. */
typedef struct {
    uint64_t epoch;      /* 0-based */
    uint64_t done;       /* the epoch's batches trained (all ranks'), when it stopped */
    double sync_s;       /* data-parallel: this rank's time in the gradient sums, */
    double wait_s;       /* of it, the wait for the slowest rank (the step's flags), */
    uint64_t sync_bytes; /* and the gradient bytes it contributed */
    int last, stop_now;  /* the run's last epoch; a stop request arrived at its end */
    double time_s, eval_s, ckpt_s;
    double train_loss, train_acc;
    uint64_t index_bytes; /* adjacency entries the samplers read */
    tg_pass_stats_t ps;
    int do_eval, improved;
    tg_split_eval_t ev[3];
} epoch_t;

/* ---------------------------------------------------------------- opening */

/* Cheap checks before the expensive loads: the options against the dataset's meta.txt, the
 * output directory, and no run there unless resuming. The dataset's sizes go to ntrain, N, D. */
static int train_check(trainer_t *t, uint64_t *ntrain, uint64_t *N, uint32_t *D)
{
    const tg_train_opts_t *o = &t->o;
    if (!o->dataset || !*o->dataset) return tg_err(-EINVAL, "a dataset directory is required");
    tg_dataset_t *probe = NULL;
    int rc = tg_dataset_open(&probe, o->dataset, 0);
    /* every rank's dataset must be rank 0's: the ranks compare meta.txt's checksums */
    if (t->dist) rc = tg_dist_agree(rc, "to open its dataset");
    if (rc >= 0 && t->dist) rc = tg_dist_check_meta(&probe->meta, o->dataset);
    if (rc < 0) {
        if (probe) tg_dataset_close(probe);
        return rc;
    }
    rc = check_opts(o, &probe->meta);
    *ntrain = probe->meta.num_train;
    *N = probe->meta.num_nodes;
    *D = probe->meta.feat_dim;
    tg_dataset_close(probe);
    if (rc < 0) return rc;
    if ((rc = tg_mkdir_p(o->out_dir)) < 0) return rc;
    path_in(t->ckpt_path, sizeof t->ckpt_path, o->out_dir, TG_CKPT_NAME);
    path_in(t->best_path, sizeof t->best_path, o->out_dir, TG_CKPT_BEST_NAME);
    path_in(t->cfg_path, sizeof t->cfg_path, o->out_dir, TG_CONFIG_NAME);
    if (!o->resume && access(t->ckpt_path, F_OK) == 0)
        return tg_err(-EEXIST,
                      "%s already holds a run (%s); use --resume to continue it or "
                      "choose another --out",
                      o->out_dir, TG_CKPT_NAME);
    return 0;
}

/* The strategy of table row i runs with the options the planner planned for it that the options
 * given leave unset (diskgnn's --disk-budget, ginex's --ginex-split: tg_cost_plan_args), added
 * after them; config.json keeps the options given (a resume plans again or keeps the defaults). */
static void plan_options(trainer_t *t, const tg_cost_plan_t *pl, int i)
{
    const tg_train_opts_t *o = &t->o;
    int n = o->num_strategy_args;
    tg_cost_plan_args(pl, i, o->strategy_args, n, &t->plan_add);
    const tg_cost_plan_args_t *add = &t->plan_add;
    if (!add->added) return;
    t->plan_args = calloc((size_t)(n + add->added), sizeof *t->plan_args);
    if (!t->plan_args) return; /* the strategy's defaults stand */
    if (n) memcpy(t->plan_args, o->strategy_args, (size_t)n * sizeof *t->plan_args);
    memcpy(t->plan_args + n, add->add, (size_t)add->added * sizeof *t->plan_args);
    t->plan_nargs = n + add->added;
    for (int k = 0; k < add->added; k++) {
        char b[32];
        uint64_t v = strtoull(add->add[k].value, NULL, 10);
        int bytes = !strcmp(add->add[k].name, "disk-budget");
        tg_log_info("%s: --%s %s planned (%s)", pl->names[i], add->add[k].name,
                    bytes ? tg_fmt_bytes(v, b, sizeof b) : add->add[k].value,
                    bytes ? "the epoch's bytes within the free disk"
                          : "the cost model's shortest epoch");
    }
}

/* A strategy named with --strategy whose options leave one it plans unset
 * (tg_strategy_i.planned): its run takes the planned value, so that its defaults are the
 * prediction's (one rule, the cost model's, for a named run and an auto one). */
static const tg_strategy_i *named_to_plan(const tg_train_opts_t *o)
{
    const tg_strategy_i *s;
    if (!o->strategy || !*o->strategy || !strcmp(o->strategy, "auto") ||
        tg_strategy_find(o->strategy, &s) < 0 || !s->planned) {
        tg_err_clear();
        return NULL;
    }
    for (const char *const *name = s->planned; *name; name++) {
        int given = 0;
        for (int k = 0; k < o->num_strategy_args; k++)
            given |= !strcmp(o->strategy_args[k].name, *name) &&
                     !(o->strategy_args[k].value && !strcmp(o->strategy_args[k].value, "auto"));
        if (!given) return s;
    }
    return NULL;
}

/* Data-parallel: every rank trains with the same strategy, but each plans from its own
 * measurements (a probe and a profile under its own load), so the choices are compared: when
 * any rank could not plan or they differ, every rank keeps the fixed rule (the same answer on
 * every rank). Returns rc, or a negative code when the ranks disagree, with why. */
static int plan_agree(trainer_t *t, int rc, int best)
{
    double v[2] = {best, (double)best * best};
    int src = tg_dist_sum_f64(v, 2, "the planner's choices");
    if (src < 0) return src;
    /* all K equal exactly when K x the sum of squares is the square of the sum */
    if (rc == 0 && v[0] * v[0] != v[1] * t->K)
        rc = tg_err(-EAGAIN, "the %d ranks' profiles chose different strategies", t->K);
    return rc; /* a rank that could not plan (best -1) makes them differ */
}

/* The named strategy's planned options (named_to_plan): the planner's profile and predictions
 * as for auto, the choice left aside. Where the profile cannot run, or predicts the strategy
 * cannot, the strategy's own defaults stand and the log says why. */
static void train_plan_named(trainer_t *t, const tg_strategy_i *s)
{
    const tg_train_opts_t *o = &t->o;
    tg_cost_plan_opts_t po;
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    int rc = pl ? tg_cost_plan_opts_train(o, &po) : tg_err(-ENOMEM, "out of memory");
    po.own = TG_COST_OWN_NONE; /* the other strategies' batches are not this run's */
    if (rc == 0) rc = tg_cost_plan(&po, pl);
#ifdef __GLIBC__
    malloc_trim(0); /* as train_plan */
#endif
#ifndef TG_SANITIZE
    if (rc == 0 && (rc = tg_cost_plan_recheck(pl, tg_rss_anon_bytes())) > 0) rc = 0;
#endif
    int i = -1;
    for (int k = 0; rc == 0 && k < pl->n; k++)
        if (!strcmp(pl->names[k], s->info.name)) i = k;
    if (rc == 0 && i < 0) rc = tg_err(-EINVAL, "no prediction (internal error)");
    if (rc == 0 && !(pl->pred[i].predicted && pl->pred[i].feasible))
        rc = tg_err(-EINVAL, "%s", pl->pred[i].why);
    if (rc < 0) {
        tg_log_info("%s: its options are not planned (%s); its defaults stand", s->info.name,
                    tg_errmsg());
        tg_err_clear();
    } else {
        tg_log_info("%s: planned from a profile of %.2f s: %.2f s per epoch predicted, %s",
                    s->info.name, pl->cost.total_s, pl->pred[i].epoch_s, pl->pred[i].why);
        plan_options(t, pl, i);
    }
    free(pl);
}

/* Strategy auto for a new run: the planner's profile and choice (engine/plan_profile.h), its table
 * in the log and in RUNDIR/plan.json. Where the profile cannot run, or predicts no strategy can,
 * the fixed rule of tg_strategy_choose decides, and the log says why. A resumed run continues
 * with the strategy its config.json records (the one planned); one whose settings say auto (a
 * run of a build before config.json, or --strategy auto given) keeps the fixed rule: the
 * planner's choice changes with the machine's load, and a run may change strategy only among
 * exact ones. */
static void train_plan(trainer_t *t)
{
    const tg_train_opts_t *o = &t->o;
    const tg_strategy_i *named = named_to_plan(o);
    if (named) {
        train_plan_named(t, named);
        return;
    }
    if (o->strategy && *o->strategy && strcmp(o->strategy, "auto")) return;
    if (o->resume) {
        tg_log_info("strategy auto: a resumed run is not planned again; the fixed rule decides");
        return;
    }
    tg_cost_plan_opts_t po;
    tg_cost_plan_t *pl = malloc(sizeof *pl);
    int rc = pl ? tg_cost_plan_opts_train(o, &po) : tg_err(-ENOMEM, "out of memory");
    po.own = TG_COST_OWN_TAKEN; /* a strategy the choice cannot take is not measured */
    if (rc == 0) rc = tg_cost_plan(&po, pl);
#ifdef __GLIBC__
    /* the profile's batches and scratch model were freed; their heap goes back to the system
     * before the budget plan measures the process, as in a run without the planner */
    malloc_trim(0);
#endif
#ifndef TG_SANITIZE
    /* what the planner leaves allocated is the run's process too: choose for what is left */
    if (rc == 0) {
        int rr = tg_cost_plan_recheck(pl, tg_rss_anon_bytes());
        if (rr < 0) rc = rr;
        if (rr > 0)
            tg_log_info("strategy auto: the process holds %.1f MiB after the profile; the "
                        "choice made again for what --mem leaves",
                        (double)pl->process_bytes / 1048576.0);
    }
#endif
    if (rc == 0 && pl->best < 0) rc = tg_err(-EINVAL, "%s", pl->why);
    if (t->dist && t->K > 1) rc = plan_agree(t, rc, rc == 0 ? pl->best : -1);
    if (rc < 0) {
        tg_log_info("strategy auto: the planner cannot choose (%s); the fixed rule decides",
                    tg_errmsg());
        tg_err_clear();
        free(pl);
        return;
    }
    if (tg_log_level() >= TG_LOG_INFO) tg_cost_plan_print(pl, stderr);
    t->planned = pl->names[pl->best];
    tg_log_info("strategy %s: planned, %s", t->planned, pl->why);
    plan_options(t, pl, pl->best);
    t->plan_json = tg_cost_plan_json(pl);
    free(pl);
    if (!t->plan_json) {
        tg_log_warn("%s", tg_errmsg());
        return;
    }
    if (t->rank != 0) return; /* rank 0 writes the run's files */
    char path[4096];
    path_in(path, sizeof path, o->out_dir, TG_PLAN_NAME);
    size_t len = strlen(t->plan_json);
    char *text = malloc(len + 2);
    if (text) {
        memcpy(text, t->plan_json, len);
        memcpy(text + len, "\n", 2);
    }
    /* plan.json is a record; the run goes on without it */
    if (!text || tg_write_file_atomic(path, text, len + 1) < 0) tg_log_warn("%s", tg_errmsg());
    free(text);
}

/* Opens the run (dataset, strategy, budget) and creates the model. */
static int train_open(trainer_t *t, uint64_t ntrain, uint64_t N, uint32_t D)
{
    tg_train_opts_t *o = &t->o;
    /* An MLP's fanouts are 0 by now, so it is never whole-graph. */
    t->whole = tg_plan_whole_graph(o->batch_size, ntrain, o->model.num_layers, o->fanouts);
    t->order_bytes = (t->whole ? N : ntrain) * sizeof(uint64_t);
    t->mask_bytes = t->whole ? N : 0;
    tg_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.dataset = o->dataset;
    train_plan(t);
    ro.strategy = t->planned ? t->planned : o->strategy;
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.normalize = o->normalize_features;
    ro.sopts.threads = o->threads;
    ro.sopts.sampler_threads = o->sampler_threads; /* < 0: the default, resolved by the run */
    ro.args = t->plan_args ? t->plan_args : o->strategy_args;
    ro.nargs = t->plan_args ? t->plan_nargs : o->num_strategy_args;
    ro.mem_bytes = o->mem_bytes;
    ro.extra_bytes = t->order_bytes + t->mask_bytes;
    tg_model_config_t mc = o->model;
    mc.in_dim = D;
    /* the strategies' most matrices in flight, or the epoch's batches when it has fewer */
    uint64_t nb = t->whole || !o->batch_size ? 1 : (ntrain + o->batch_size - 1) / o->batch_size;
    if (o->batches_per_epoch) nb = TG_MIN(nb, o->batches_per_epoch);
    ro.auto_extra =
        tg_budget_estimate(&mc, N, o->batch_size, o->sampler, o->fanouts, (int)TG_MIN(nb, 4));
    ro.threads = o->threads;
    ro.verify = o->verify;
    ro.verify_reads = o->verify_reads;
    int rc = tg_run_open_opts(&t->r, &ro);
    if (rc < 0) return rc;
    t->res->strategy = t->r.strat_i->info.name;
    t->r.sampler = o->sampler == &tg_sampler_node ? NULL : o->sampler;
    const tg_meta_t *meta = &t->r.ds->meta;
    o->model.in_dim = meta->feat_dim;
    o->model.out_dim = meta->num_classes;
    o->model.multi_label = meta->multi_label;
    if ((rc = tg_model_config_check(&o->model)) < 0) return rc;
    if ((rc = tg_budget_check_model(&t->r, tg_model_config_param_bytes(&o->model, &o->optim))) < 0)
        return rc;
    if ((rc = tg_model_create(&t->m, &o->model, o->seed)) < 0) return rc;
    if ((rc = tg_model_set_optim(t->m, &o->optim)) < 0) return rc;
    tg_model_set_pool(t->m, t->r.pool);
    return 0;
}

/* The record of a new run: the dataset's identity and the settings a resume must match. */
static void ckpt_init(trainer_t *t)
{
    const tg_train_opts_t *o = &t->o;
    tg_ckpt_info_t *ck = &t->ck;
    memset(ck, 0, sizeof *ck);
    tg_ckpt_identity(ck, t->r.ds);
    ck->seed = o->seed;
    ck->batch_size = o->batch_size;
    ck->num_layers = o->model.num_layers;
    memcpy(ck->fanouts, o->fanouts, sizeof ck->fanouts);
    for (int l = o->model.num_layers; l < TG_MAX_LAYERS; l++)
        ck->fanouts[l] = 0;
    if (t->r.sampler) snprintf(ck->sampler, sizeof ck->sampler, "%s", t->r.sampler->name);
    ck->normalize_features = o->normalize_features;
    ck->eval_sampled = o->eval_sampled;
    ck->best_valid_acc = -1;
}

/* ---------------------------------------------------------------- resume */

/* --resume: the model and the record from checkpoint.bin, checked against this run's. */
static int train_resume(trainer_t *t)
{
    if (!t->o.resume) return 0;
    tg_ckpt_info_t got;
    int rc;
    /* A run directory of a build before config.json resumes from the checkpoint's record and
     * the flags, as it did. */
    if (access(t->cfg_path, F_OK) == 0) {
        tg_train_opts_default(&t->file);
        if ((rc = tg_train_config_read(&t->cf, t->cfg_path, &t->file)) < 0 ||
            (rc = tg_train_config_check_resume(&t->file, t->file.strategy, &t->o,
                                               t->r.strat_i->info.name, t->cfg_path)) < 0)
            return rc;
    }
    if ((rc = resume_from(t->ckpt_path, t->r.ds, &t->ck, t->m, &got)) < 0) return rc;
    t->ck = got;
    t->ckpt_epoch = got.epochs_done;
    if (got.epoch_batches)
        tg_log_info("resuming %s in epoch %llu after its first %llu batch(es)", t->o.out_dir,
                    (unsigned long long)got.epochs_done + 1, (unsigned long long)got.epoch_batches);
    else
        tg_log_info("resuming %s after epoch %llu", t->o.out_dir,
                    (unsigned long long)got.epochs_done);
    return 0;
}

/* ---------------------------------------------------------------- the plan and the budget */

/* The epochs' plans and the training mask, reserved against --mem; a resume point past this
 * run's epoch is refused. */
static int train_plans(trainer_t *t)
{
    const tg_train_opts_t *o = &t->o;
    tg_run_t *r = &t->r;
    uint64_t ntrain = r->split_n[0], N = r->ds->meta.num_nodes;
    /* The seed order and the mask are data the run holds: they count against --mem. */
    int rc = tg_budget_reserve(&r->budget, t->order_bytes + t->mask_bytes, "seed order");
    if (rc < 0) return rc;
    tg_plan_opts_t po = {.num_nodes = N,
                         .train = r->split[0],
                         .num_train = ntrain,
                         .batch_size = o->batch_size,
                         .num_layers = o->model.num_layers,
                         .fanouts = o->fanouts,
                         .seed = o->seed,
                         .max_batches = o->batches_per_epoch};
    if ((rc = tg_plan_init(&t->plan, &po)) < 0) return rc;
    if ((r->strat_i->info.caps & TG_STRAT_NEXT_PASS) && !t->whole && o->epochs > 1) {
        if ((rc = tg_budget_reserve(&r->budget, t->order_bytes, "the next epoch's seed order")) < 0)
            return rc;
        if ((rc = tg_plan_init(&t->next_plan, &po)) < 0) return rc;
    }
    if (t->whole) {
        if (!(t->train_mask = calloc(N, 1)))
            return tg_err(-ENOMEM, "out of memory for the training mask");
        for (uint64_t i = 0; i < ntrain; i++)
            t->train_mask[r->split[0][i]] = 1;
    }
    t->all_batches = t->plan.all_batches;
    t->epoch_batches = t->plan.num_batches;
    if (t->ck.epoch_batches > t->epoch_batches && !r->strat_i->epoch_batches)
        return tg_err(-EINVAL,
                      "cannot resume from %s: it stopped after %llu batches of epoch %llu, but "
                      "this run trains only %llu batches per epoch",
                      t->ckpt_path, (unsigned long long)t->ck.epoch_batches,
                      (unsigned long long)t->ck.epochs_done + 1,
                      (unsigned long long)t->epoch_batches);
    return 0;
}

/* --mem is the whole process's: measure a batch, reserve the model, activations and batches in
 * flight (the strategy's caches get the rest); then the state before the first epoch goes to
 * disk, so that a run that fails in it still has a checkpoint. Written after the budget plan,
 * so a --mem refused leaves no run behind to block the retry. */
static int train_budget(trainer_t *t)
{
    const tg_train_opts_t *o = &t->o;
    int rc;
    if (t->ck.epochs_done < o->epochs) {
        tg_plan_epoch(&t->plan, t->ck.epochs_done);
        tg_budget_plan_opts_t bo = {.plan = &t->plan,
                                    .num_layers = o->model.num_layers,
                                    .fanouts = o->fanouts,
                                    .sampler = t->r.sampler,
                                    .optim = &o->optim};
        if ((rc = tg_budget_plan(&t->r, t->m, &bo, &t->bp)) < 0) return rc;
    }
    if (t->rank != 0) return 0; /* rank 0 writes the run's files */
    /* config.json first: a checkpoint.bin is never without the settings it was made with */
    if ((rc = tg_train_config_write(t->cfg_path, o, t->r.strat_i->info.name)) < 0) return rc;
    t->wrote = !o->resume;
    if (!o->resume && (rc = tg_ckpt_write(t->ckpt_path, &t->ck, t->m)) < 0) return rc;
    return 0;
}

/* A new run that failed before it trained a batch (a budget a strategy refused in its first
 * pass, a loss not finite at once) leaves no run behind: the retry with other settings would
 * otherwise be refused as "already holds a run". Interrupted runs keep theirs: they resume. */
static void train_unwind(trainer_t *t, int rc)
{
    if (rc >= 0 || rc == -EINTR || !t->wrote || t->sc.trained) return;
    const char *paths[] = {t->ckpt_path, t->best_path, t->cfg_path};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (unlink(paths[i]) < 0 && errno != ENOENT)
            tg_log_warn("%s: cannot remove it: %s", paths[i], strerror(errno));
}

/* The step callback's context and the line that opens the run's log. */
static void train_start(trainer_t *t)
{
    const tg_train_opts_t *o = &t->o;
    tg_run_t *r = &t->r;
    t->sc.r = r;
    t->sc.m = t->m;
    t->sc.train_mask = t->train_mask;
    t->sc.stop = o->stop;
    t->sc.prog = &t->prog;
    t->sc.dist = t->dist;
    t->sc.salt = (uint64_t)t->rank;
    t->ds.stop = o->stop;
    t->sc.ds = &t->ds;
    char mb[32], blocks_how[64];
    snprintf(blocks_how, sizeof blocks_how, "sampled blocks%s%s%s", r->sampler ? " (sampler " : "",
             r->sampler ? r->sampler->name : "", r->sampler ? ")" : "");
    tg_log_info("training %s on %s with strategy %s: %llu training nodes, %s, %llu batch(es) per "
                "epoch%s, %d thread(s) + %d sampler thread(s), --mem %s",
                tg_model_type_name(o->model.type), o->dataset, r->strat_i->info.name,
                (unsigned long long)r->split_n[0], t->whole ? "whole graph per step" : blocks_how,
                (unsigned long long)t->epoch_batches,
                t->epoch_batches < t->all_batches ? " (limited by --batches-per-epoch)" : "",
                o->threads, r->sopts.sampler_threads,
                r->budget.limit ? tg_fmt_bytes(r->budget.limit, mb, sizeof mb) : "none");
    if (t->dist && t->rank == 0)
        tg_log_info("data-parallel: %d rank(s), each with the --mem and --threads above; a step "
                    "trains %d batch(es) of --batch-size %llu (one per rank) on the mean of their "
                    "gradients; an epoch has %llu step(s)",
                    t->K, t->K, (unsigned long long)o->batch_size,
                    (unsigned long long)(t->epoch_batches / (uint64_t)t->K));
    /* Layer-wise evaluation out of core keeps its intermediate layers in files. */
    t->lw_tmp = (r->strat_i->info.caps & TG_STRAT_IN_RAM) ? NULL : o->out_dir;
    t->show_bar = o->progress && isatty(STDERR_FILENO) && tg_log_level() >= TG_LOG_INFO;
}

/* ---------------------------------------------------------------- checkpoint */

/* best.bin when the best model changed since it was written. It goes first: checkpoint.bin
 * must never name a best epoch not yet on disk. */
static int write_best(trainer_t *t)
{
    if (!t->best_dirty) return 0;
    int rc = tg_write_file_atomic(t->best_path, t->best_blob, t->best_len);
    if (rc < 0) return rc;
    t->best_dirty = 0;
    return 0;
}

/* Stopped at a batch boundary inside the epoch: records where, resumably, and ends the run. */
static int stop_in_epoch(trainer_t *t, const epoch_t *e)
{
    tg_ckpt_info_t *ck = &t->ck;
    ck->epoch_batches = e->done;
    ck->epoch_loss_sum = t->sc.loss_sum;
    ck->epoch_correct = t->sc.correct;
    ck->epoch_count = t->sc.count;
    int rc = t->rank == 0 ? write_best(t) : 0; /* rank 0 writes the run's files */
    if (rc < 0 || (t->rank == 0 && (rc = tg_ckpt_write(t->ckpt_path, ck, t->m)) < 0)) return rc;
    t->res->interrupted = 1;
    t->res->stopped_epoch = e->epoch;
    t->res->stopped_batch = e->done;
    return tg_err(-EINTR,
                  "interrupted in epoch %llu after %llu of its %llu batches; %s records the "
                  "state: continue with --resume",
                  (unsigned long long)e->epoch + 1, (unsigned long long)e->done,
                  (unsigned long long)t->epoch_batches, t->ckpt_path);
}

/* The epoch is done: the record takes it, the best model is kept in memory when it improved,
 * and the files are written at --checkpoint-every, at the last epoch and at a stop request. */
static int train_checkpoint(trainer_t *t, epoch_t *e)
{
    const tg_train_opts_t *o = &t->o;
    tg_ckpt_info_t *ck = &t->ck;
    ck->epochs_done = e->epoch + 1;
    ck->last_train_loss = e->train_loss;
    double tk = tg_now();
    int rc;
    e->stop_now = o->stop && *o->stop && !e->last;
    if (t->dist) e->stop_now = t->ds.stopped && !e->last; /* every rank's answer */
    if (t->rank != 0) return 0;                           /* rank 0 writes the run's files */
    if (e->improved) {
        free(t->best_blob);
        t->best_blob = NULL;
        if ((rc = tg_ckpt_serialize(ck, t->m, &t->best_blob, &t->best_len)) < 0) return rc;
        t->best_dirty = 1;
    }
    /* A stop request at the epoch's last batch: checkpoint here and end. */
    if (e->last || e->stop_now ||
        (o->checkpoint_every && (e->epoch + 1) % o->checkpoint_every == 0)) {
        if ((rc = write_best(t)) < 0) return rc;
        if ((rc = tg_ckpt_write(t->ckpt_path, ck, t->m)) < 0) return rc;
        t->ckpt_epoch = ck->epochs_done;
    }
    e->ckpt_s = tg_now() - tk;
    return 0;
}

/* ---------------------------------------------------------------- epoch */

/* The pass p ends at this rank's share's end: its seeds stop there (batch b's seeds and RNG do not
 * depend on how many follow it), as the loader's share_of does; the pass starts at first. */
static void dist_limit(const trainer_t *t, tg_pass_t *p, uint64_t first)
{
    uint64_t end = t->share_start + t->share_m;
    p->first_batch = first;
    if (end < TG_MAX(t->epoch_batches, t->plan.num_batches))
        p->num_seeds = TG_MIN(p->num_seeds, end * p->batch_size);
}

/* This rank's share of the epoch by the loader's rank rule (tiergnn/loader.h): of the epoch's n
 * batches, m = floor(n / K) each, rank r trains [r * m, r * m + m); the n - K * m at the end are
 * trained by no rank. A run stopped mid-epoch recorded K * s batches (s global steps): every rank
 * continues at r * m + s. */
static int dist_share(trainer_t *t, tg_pass_t *p)
{
    uint64_t n = t->epoch_batches, K = (uint64_t)t->K, m = n / K, done = t->ck.epoch_batches;
    if (m == 0)
        return tg_err(-EINVAL,
                      "%llu ranks for the %llu batch(es) of an epoch: every rank needs one batch "
                      "at least (fewer ranks, or a smaller --batch-size)",
                      (unsigned long long)K, (unsigned long long)n);
    if (done % K || done / K > m)
        return tg_err(-EINVAL,
                      "cannot resume from %s: it stopped after %llu batches of epoch %llu, which "
                      "is not a whole number of steps of %llu ranks of %llu batches each (resume "
                      "a run stopped mid-epoch with the number of ranks it ran with)",
                      t->ckpt_path, (unsigned long long)done,
                      (unsigned long long)t->ck.epochs_done + 1, (unsigned long long)K,
                      (unsigned long long)m);
    t->share_start = (uint64_t)t->rank * m;
    t->share_m = m;
    t->sc.start = t->share_start;
    t->sc.end = t->share_start + m;
    dist_limit(t, p, t->share_start + done / K);
    return 0;
}

/* The training pass of epoch e->epoch from the checkpoint's resume point (its first batch), and
 * the next epoch's pass in *np for strategies that prepare it. */
static int epoch_pass(trainer_t *t, const epoch_t *e, tg_pass_t *p, tg_pass_t *np)
{
    const tg_train_opts_t *o = &t->o;
    uint64_t first = t->ck.epoch_batches;
    *p = (tg_pass_t){.seeds = t->plan.seeds,
                     .num_seeds = t->plan.num_seeds,
                     .batch_size = t->plan.batch_size,
                     .seed = o->seed,
                     .epoch = e->epoch,
                     .first_batch = first,
                     .num_layers = o->model.num_layers,
                     .fanouts = o->fanouts,
                     .sampler = t->r.sampler,
                     .allow_out_of_order = 1,
                     .training = 1,
                     .step = train_step,
                     .ctx = &t->sc};
    /* a strategy that makes its own batches says how many this epoch has */
    if (t->r.strat_i->epoch_batches && !t->whole) {
        int rc = t->r.strat_i->epoch_batches(t->r.strat, p, &t->epoch_batches);
        if (rc < 0) return rc;
        if (first > t->epoch_batches)
            return tg_err(-EINVAL,
                          "cannot resume from %s: it stopped after %llu batches of epoch %llu, "
                          "but strategy %s makes %llu batches of it here (were --mem or its "
                          "options changed?)",
                          t->ckpt_path, (unsigned long long)first, (unsigned long long)e->epoch + 1,
                          t->r.strat_i->info.name, (unsigned long long)t->epoch_batches);
    }
    if (t->dist) {
        int rc = tg_dist_agree(dist_share(t, p), "to divide the epoch's batches");
        if (rc < 0) return rc;
    }
    *np = *p;
    if (t->next_plan.order && e->epoch + 1 < o->epochs) {
        tg_plan_epoch(&t->next_plan, e->epoch + 1);
        np->seeds = t->next_plan.seeds;
        np->num_seeds = t->next_plan.num_seeds;
        np->epoch = e->epoch + 1;
        np->first_batch = 0;
        np->step = NULL;
        np->ctx = NULL;
        /* the next epoch's share starts at the same batch (the plan's count does not change) */
        if (t->dist) dist_limit(t, np, t->share_start);
        p->next = np;
    }
    return 0;
}

/* After a rank's pass: the epoch's loss and accuracy sums become all ranks' (exact: sums of
 * doubles over K values in MPI's order), e->done the batches all ranks trained (K global steps
 * of s), *mid whether the ranks stopped together inside the epoch. */
static int dist_epoch_sums(trainer_t *t, epoch_t *e, int *mid)
{
    step_ctx_t *sc = &t->sc;
    double v[3] = {sc->loss_sum, (double)sc->correct, (double)sc->count};
    int rc = tg_dist_sum_f64(v, 3, "the epoch's loss and accuracy");
    if (rc < 0) return rc;
    sc->loss_sum = v[0];
    sc->correct = (uint64_t)v[1];
    sc->count = (uint64_t)v[2];
    uint64_t s = e->ps.next_batch > t->share_start ? e->ps.next_batch - t->share_start : 0;
    s = TG_MIN(s, t->share_m); /* a strategy with its own batches ran past the share */
    e->done = s * (uint64_t)t->K;
    *mid = e->ps.stopped && s < t->share_m;
    return 0;
}

/* One training epoch: the strategy's pass over the plan's batches (a run stopped mid-epoch
 * continues with the batches it had not trained), its loss and accuracy; a stop inside it
 * checkpoints and ends the run (-EINTR). */
static int train_epoch(trainer_t *t, epoch_t *e)
{
    const tg_train_opts_t *o = &t->o;
    double t0 = tg_now();
    tg_plan_epoch(&t->plan, e->epoch);
    step_ctx_t *sc = &t->sc;
    sc->compute_s = 0;
    /* the record's sums of a stopped epoch are all ranks': rank 0 carries them on */
    int carry = t->rank == 0;
    sc->loss_sum = carry ? t->ck.epoch_loss_sum : 0;
    sc->correct = carry ? t->ck.epoch_correct : 0;
    sc->count = carry ? t->ck.epoch_count : 0;
    sc->batches = t->ck.epoch_batches;
    sc->feature_bytes = 0;
    sc->show_bar = t->show_bar;
    tg_pass_t p, np;
    int rc = epoch_pass(t, e, &p, &np);
    if (rc < 0) return rc;
    if (t->show_bar) {
        char label[48];
        snprintf(label, sizeof label, "epoch %llu/%llu", (unsigned long long)e->epoch + 1,
                 (unsigned long long)o->epochs);
        tg_progress_begin(&t->prog, label, t->epoch_batches, "batches");
        tg_progress_update(&t->prog, p.first_batch, NULL);
    }
    uint64_t idx0 = atomic_load(&t->r.index_bytes);
    double sync0 = t->ds.sync_s, wait0 = t->ds.wait_s;
    uint64_t bytes0 = t->ds.bytes;
    rc = tg_run_pass(&t->r, &p, &e->ps);
    e->sync_s = t->ds.sync_s - sync0;
    e->wait_s = t->ds.wait_s - wait0;
    e->sync_bytes = t->ds.bytes - bytes0;
    e->index_bytes = atomic_load(&t->r.index_bytes) - idx0;
    if (t->show_bar) tg_progress_end(&t->prog);
    t->batch_bytes_peak = TG_MAX(t->batch_bytes_peak, e->ps.batch_bytes_peak);
    if (rc == -ERANGE && !o->resume && !sc->trained)
        return tg_err(-ERANGE,
                      "epoch %llu, batch %llu: the training loss is not finite (NaN or Inf), so "
                      "training stopped before any batch was trained and %s holds no run; start "
                      "it again with a lower --lr (now %g)",
                      (unsigned long long)e->epoch + 1, (unsigned long long)sc->last_batch,
                      o->out_dir, (double)o->optim.lr);
    if (rc == -ERANGE)
        return tg_err(-ERANGE,
                      "epoch %llu, batch %llu: the training loss is not finite (NaN or Inf), so "
                      "training stopped; %s keeps the last good state (after epoch %llu). Try a "
                      "lower learning rate (now %g): set \"lr\" in %s and --resume",
                      (unsigned long long)e->epoch + 1, (unsigned long long)sc->last_batch,
                      t->ckpt_path, (unsigned long long)t->ckpt_epoch, (double)o->optim.lr,
                      t->cfg_path);
    if (rc < 0) return tg_err_prefix(rc, "epoch %llu", (unsigned long long)e->epoch + 1);
    e->time_s = tg_now() - t0;
    e->done = e->ps.next_batch;
    if (t->dist) {
        int mid = 0;
        if ((rc = dist_epoch_sums(t, e, &mid)) < 0) return rc;
        if (mid) return stop_in_epoch(t, e);
    } else if (e->ps.stopped && e->ps.next_batch < t->epoch_batches) {
        return stop_in_epoch(t, e);
    }
    t->ck.epoch_batches = 0;
    t->ck.epoch_loss_sum = 0;
    t->ck.epoch_correct = t->ck.epoch_count = 0;
    e->train_loss = sc->count ? sc->loss_sum / (double)sc->count : NAN;
    e->train_acc = sc->count ? (double)sc->correct / (double)sc->count : NAN;
    return 0;
}

/* ---------------------------------------------------------------- evaluation */

/* Validation and test after the epoch, every --eval-every epochs and after the last; the best
 * model by validation accuracy (ties: the lower validation loss, then the earlier epoch). The
 * test split never takes part in the choice. */
static int train_evaluate(trainer_t *t, epoch_t *e)
{
    const tg_train_opts_t *o = &t->o;
    e->last = e->epoch + 1 == o->epochs;
    e->do_eval = e->last || (o->eval_every && (e->epoch + 1) % o->eval_every == 0);
    memset(e->ev, 0, sizeof e->ev);
    if (!e->do_eval) return 0;
    double te = tg_now();
    int want[3] = {0, 1, 1};
    tg_pass_stats_t es;
    memset(&es, 0, sizeof es);
    tg_eval_how_t h = {.sampled = o->eval_sampled,
                       .fanouts = o->fanouts,
                       .batch_size = o->batch_size,
                       .seed = o->seed,
                       .chunk = o->eval_chunk,
                       .tmp_dir = t->lw_tmp,
                       .max_nodes = o->eval_max_nodes,
                       .stats = &es};
    int rc = tg_run_evaluate_how(&t->r, t->m, want, &h, e->ev);
    if (rc < 0)
        return tg_err_prefix(rc, "evaluation after epoch %llu", (unsigned long long)e->epoch + 1);
    t->batch_bytes_peak = TG_MAX(t->batch_bytes_peak, es.batch_bytes_peak);
    e->eval_s = tg_now() - te;
    tg_ckpt_info_t *ck = &t->ck;
    const tg_split_eval_t *v = &e->ev[1];
    if (v->acc > ck->best_valid_acc ||
        (v->acc == ck->best_valid_acc && v->loss < ck->best_valid_loss)) {
        e->improved = 1;
        ck->best_epoch = e->epoch + 1;
        ck->best_valid_acc = v->acc;
        ck->best_valid_loss = v->loss;
        ck->test_at_best = e->ev[2].acc;
    }
    return 0;
}

/* ---------------------------------------------------------------- the epoch's report */

/* The epoch's JSON line (--json): the epoch's figures, the pass's shared ones, the strategy's
 * own (its report hook), the neighbour cache. */
static void epoch_json(const trainer_t *t, const epoch_t *e, double compute_s, uint64_t needed)
{
    const tg_pass_stats_t *ps = &e->ps;
    const tg_run_t *r = &t->r;
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_uint(&j, "epoch", e->epoch + 1);
    tg_json_num(&j, "time_s", e->time_s);
    tg_json_num(&j, "sample_s", ps->sample_s);
    tg_json_num(&j, "gather_s", ps->gather_s);
    tg_json_num(&j, "compute_s", compute_s);
    tg_json_num(&j, "train_loss", e->train_loss);
    tg_json_num(&j, "train_acc", e->train_acc);
    tg_json_num(&j, "valid_acc", e->do_eval ? e->ev[1].acc : NAN);
    tg_json_num(&j, "valid_loss", e->do_eval ? e->ev[1].loss : NAN);
    tg_json_num(&j, "test_acc", e->do_eval ? e->ev[2].acc : NAN);
    tg_json_num(&j, "wait_s", ps->wait_s);
    tg_json_num(&j, "eval_s", e->eval_s);
    tg_json_num(&j, "checkpoint_s", e->ckpt_s);
    tg_json_uint(&j, "batches", ps->steps);
    tg_json_uint(&j, "rss_bytes", tg_rss_bytes());
    tg_json_str(&j, "strategy", r->strat_i->info.name);
    if (ps->have_io) {
        tg_json_uint(&j, "io_requests", ps->io_requests);
        tg_json_uint(&j, "io_read_bytes", ps->io_read_bytes);
    } else {
        tg_json_num(&j, "io_requests", NAN);
        tg_json_num(&j, "io_read_bytes", NAN);
    }
    tg_json_uint(&j, "io_needed_bytes", needed);
    tg_json_num(&j, "io_wait_s", ps->have_io_wait ? ps->io_wait_s : NAN);
    tg_json_num(&j, "cache_hit_ratio",
                ps->have_cache && ps->cache_lookups
                    ? (double)ps->cache_hits / (double)ps->cache_lookups
                    : NAN);
    tg_json_uint(&j, "peak_rss_bytes", tg_peak_rss_bytes());
    tg_json_uint(&j, "data_bytes", r->budget.used);
    tg_json_uint(&j, "batch_bytes_peak", ps->batch_bytes_peak);
    if (t->dist) { /* rank 0's share of the gradient all-reduce (docs/DISTRIBUTED.md) */
        tg_json_uint(&j, "ranks", (uint64_t)t->K);
        tg_json_num(&j, "allreduce_s", e->sync_s);
        tg_json_num(&j, "allreduce_wait_s", e->wait_s);
        tg_json_uint(&j, "allreduce_bytes", e->sync_bytes);
    }
    char buf[TG_PASS_MAX_TIERS * 128 + 4];
    tg_json_raw(&j, "cache_tiers", tg_pass_tiers_json(ps, buf, sizeof buf));
    tg_pass_report(r, ps, &j, NULL, 0);
    if (ps->have_ncache)
        tg_json_raw(&j, "neighbor_cache", tg_pass_ncache_json(ps, buf, sizeof buf));
    tg_json_end(&j, t->o.json, NULL);
}

/* The epoch's lines: JSON (--json) and the human one. */
static void train_report(const trainer_t *t, const epoch_t *e)
{
    const tg_train_opts_t *o = &t->o;
    const tg_pass_stats_t *ps = &e->ps;
    double compute_s = t->sc.compute_s;
    uint64_t needed = e->index_bytes + t->sc.feature_bytes;
    if (o->json) epoch_json(t, e, compute_s, needed);
    char line[1024] = "";
    tg_pass_line(&t->r, ps, needed, line, sizeof line);
    if (e->do_eval)
        tg_log_info("epoch %llu/%llu: loss %.4f train %.4f valid %.4f test %.4f%s (%.2f s: "
                    "sample %.2f gather %.2f compute %.2f wait %.2f%s; eval %.2f s)",
                    (unsigned long long)e->epoch + 1, (unsigned long long)o->epochs, e->train_loss,
                    e->train_acc, e->ev[1].acc, e->ev[2].acc, e->improved ? " *" : "", e->time_s,
                    ps->sample_s, ps->gather_s, compute_s, ps->wait_s, line, e->eval_s);
    else
        tg_log_info("epoch %llu/%llu: loss %.4f train %.4f (%.2f s: sample %.2f gather %.2f "
                    "compute %.2f wait %.2f%s)",
                    (unsigned long long)e->epoch + 1, (unsigned long long)o->epochs, e->train_loss,
                    e->train_acc, e->time_s, ps->sample_s, ps->gather_s, compute_s, ps->wait_s,
                    line);
}

/* ---------------------------------------------------------------- the run */

/* The run's result after its last epoch, its log line and result.json. */
static void train_finish(trainer_t *t, double t_run)
{
    tg_train_result_t *res = t->res;
    const tg_ckpt_info_t *ck = &t->ck;
    res->train_time_s = tg_now() - t_run;
    res->epochs_done = ck->epochs_done;
    res->best_epoch = ck->best_epoch;
    res->best_valid_acc = ck->best_valid_acc;
    res->best_valid_loss = ck->best_valid_loss;
    res->test_acc = ck->test_at_best;
    res->last_train_loss = ck->last_train_loss;
    res->peak_rss_bytes = tg_peak_rss_bytes();
    if (t->rank != 0) return; /* rank 0 reports and writes result.json */
    if (ck->best_epoch)
        tg_log_info("best validation accuracy %.4f at epoch %llu; test accuracy there %.4f",
                    ck->best_valid_acc, (unsigned long long)ck->best_epoch, ck->test_at_best);
    emit_final(&t->o, res, t->m, &t->r, t->o.out_dir, t->batch_bytes_peak, &t->bp, t->plan_json);
}

/* Data-parallel: every rank's setup succeeded (a rank that failed, e.g. its --mem refused, stops
 * them all), and every rank starts from the same parameters (a --resume read the same file). */
static int dist_setup_end(trainer_t *t, int rc)
{
    if (!t->dist || tg_dist_shared_error()) return rc;
    rc = tg_dist_agree(rc, "to set up (open, resume, plan, the --mem budget)");
    if (rc < 0) return rc;
    return tg_dist_check_params(tg_model_params(t->m), tg_model_param_count(t->m),
                                "at the start of training");
}

/* Data-parallel, after an epoch: every rank evaluated and rank 0 checkpointed (a failure on one
 * stops all), and the parameters are still the same on every rank (a CRC-32 of each's). */
static int dist_epoch_end(trainer_t *t, const epoch_t *e, int rc)
{
    char what[96];
    snprintf(what, sizeof what, "to evaluate or checkpoint epoch %llu",
             (unsigned long long)e->epoch + 1);
    if ((rc = tg_dist_agree(rc, what)) < 0) return rc;
    snprintf(what, sizeof what, "after epoch %llu", (unsigned long long)e->epoch + 1);
    return tg_dist_check_params(tg_model_params(t->m), tg_model_param_count(t->m), what);
}

/* Opening, resuming and planning, before the first epoch. */
static int train_setup(trainer_t *t)
{
    uint64_t ntrain = 0, N = 0;
    uint32_t D = 0;
    int rc = train_check(t, &ntrain, &N, &D);
    /* every rank checked --out before rank 0 may write a run there */
    if (t->dist) rc = tg_dist_agree(rc, "its checks of the options and --out");
    if (rc < 0 || (rc = train_open(t, ntrain, N, D)) < 0) return dist_setup_end(t, rc);
    ckpt_init(t);
    if ((rc = train_resume(t)) < 0 || (rc = train_plans(t)) < 0 || (rc = train_budget(t)) < 0)
        return dist_setup_end(t, rc);
    train_start(t);
    return dist_setup_end(t, 0);
}

int tg_train(const tg_train_opts_t *opts, tg_train_result_t *res)
{
    memset(res, 0, sizeof *res);
    trainer_t *t = calloc(1, sizeof *t);
    if (!t) return tg_err(-ENOMEM, "out of memory");
    t->o = *opts;
    t->res = res;
    t->dist = tg_dist_active();
    t->rank = tg_dist_rank();
    t->K = tg_dist_size();
    if (t->o.model.type == TG_MODEL_MLP) /* edges are ignored: do not sample them */
        for (int l = 0; l < t->o.model.num_layers; l++)
            t->o.fanouts[l] = 0;
    int rc = train_setup(t);
    double t_run = tg_now();
    for (uint64_t epoch = t->ck.epochs_done; rc >= 0 && epoch < t->o.epochs; epoch++) {
        epoch_t e;
        memset(&e, 0, sizeof e);
        e.epoch = epoch;
        /* a rank whose pass failed joins no more collectives: tg_dist_finish ends the others */
        if ((rc = train_epoch(t, &e)) < 0) break;
        if ((rc = train_evaluate(t, &e)) >= 0) rc = train_checkpoint(t, &e);
        if (t->dist) rc = dist_epoch_end(t, &e, rc);
        if (rc < 0) break;
        if (t->rank == 0) train_report(t, &e); /* rank 0 reports for all */
        if (e.stop_now) {
            res->interrupted = 1;
            res->stopped_epoch = epoch + 1;
            res->stopped_batch = 0;
            rc = tg_err(-EINTR,
                        "interrupted after epoch %llu; %s records the state: continue with "
                        "--resume",
                        (unsigned long long)epoch + 1, t->ckpt_path);
        }
    }
    if (rc >= 0) train_finish(t, t_run);
    train_unwind(t, rc);
    tg_train_config_destroy(&t->cf);
    free(t->sc.y);
    free(t->best_blob);
    free(t->plan_json);
    free(t->plan_args);
    tg_plan_destroy(&t->plan);
    tg_plan_destroy(&t->next_plan);
    free(t->train_mask);
    tg_model_destroy(t->m);
    tg_run_close(&t->r);
    free(t);
    return rc < 0 ? rc : 0;
}
