/* The training run: epoch loop over the strategy's passes, evaluation, checkpoints (also when a
 * stop request arrives mid-epoch), JSON lines with the per-epoch I/O figures (see
 * tiergnn/engine.h). */
#include "engine-impl.h"

#include <math.h>
#include <stdlib.h>
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
#define DIFF(...)                                                                                  \
    do {                                                                                           \
        if (n < sizeof diff)                                                                       \
            n += (size_t)snprintf(diff + n, sizeof diff - n, "%s", n ? "; " : "");                 \
        if (n < sizeof diff) n += (size_t)snprintf(diff + n, sizeof diff - n, __VA_ARGS__);        \
    } while (0)
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
                       const tg_budget_plan_t *bp)
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

/* [{"name":..., "lookups":..., "hits":..., "bytes":...}, ...] of a pass's tiers. */
static const char *pass_tiers_json(const tg_pass_stats_t *ps, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int t = 0; t < ps->ntiers && n < len; t++)
        n += (size_t)snprintf(
            buf + n, len - n, "%s{\"name\":\"%s\",\"lookups\":%llu,\"hits\":%llu,\"bytes\":%llu}",
            t ? "," : "", ps->tiers[t].name, (unsigned long long)ps->tiers[t].lookups,
            (unsigned long long)ps->tiers[t].hits, (unsigned long long)ps->tiers[t].bytes);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

/* The neighbour cache tier of a pass as a JSON object. */
static const char *pass_ncache_json(const tg_pass_stats_t *ps, char *buf, size_t len)
{
    double hit = ps->ncache_lookups ? (double)ps->ncache_hits / (double)ps->ncache_lookups : 0;
    snprintf(buf, len, "{\"bytes\":%llu,\"lookups\":%llu,\"hits\":%llu,\"hit_ratio\":%.6f}",
             (unsigned long long)ps->ncache_bytes, (unsigned long long)ps->ncache_lookups,
             (unsigned long long)ps->ncache_hits, hit);
    return buf;
}

/* The JSON object "preprocess" of a strategy that samples and packs a pass ahead (diskgnn). */
static const char *pass_pack_json(const tg_pass_stats_t *ps, char *buf, size_t len)
{
    snprintf(buf, len,
             "{\"at_start\":%s,\"reused\":%s,\"wait_s\":%.6f,\"sample_s\":%.6f,\"layout_s\":%.6f,"
             "\"pack_s\":%.6f,\"total_s\":%.6f,\"read_bytes\":%llu,\"write_bytes\":%llu,"
             "\"disk_bytes\":%llu,\"segment\":%llu,\"read_amp_estimate\":%.6f}",
             ps->pack_prepared_now ? "true" : "false", ps->pack_reused ? "true" : "false",
             ps->pack_wait_s, ps->pack_sample_s, ps->pack_layout_s, ps->pack_s, ps->pack_prep_s,
             (unsigned long long)ps->pack_read_bytes, (unsigned long long)ps->pack_write_bytes,
             (unsigned long long)ps->pack_disk_bytes, (unsigned long long)ps->pack_segment,
             ps->pack_read_amp_est);
    return buf;
}

/* The JSON object "megabatch" of a strategy that trains on mega-batches (hier). */
static const char *pass_hier_json(const tg_pass_stats_t *ps, char *buf, size_t len)
{
    double n = ps->hier_nodes ? (double)ps->hier_nodes : 1.0;
    snprintf(buf, len,
             "{\"megabatches\":%llu,\"dynamic_parts\":%llu,\"static_nodes\":%llu,\"nodes\":%llu,"
             "\"load_s\":%.6f,\"load_wait_s\":%.6f,\"mean_degree_full\":%.6f,"
             "\"mean_degree_induced\":%.6f,\"mean_degree_static\":%.6f}",
             (unsigned long long)ps->hier_megabatches, (unsigned long long)ps->hier_dynamic_parts,
             (unsigned long long)ps->hier_static_nodes, (unsigned long long)ps->hier_nodes,
             ps->hier_load_s, ps->hier_load_wait_s, (double)ps->hier_deg_full / n,
             (double)ps->hier_deg_induced / n, (double)ps->hier_deg_static / n);
    return buf;
}

static const char *pass_gids_json(const tg_pass_stats_t *ps, char *buf, size_t len)
{
    uint64_t rows = ps->ntiers ? ps->tiers[0].lookups : 0;
    uint64_t cb_hits = ps->gids_constant_rows && ps->ntiers ? ps->tiers[0].hits : 0;
    snprintf(buf, len,
             "{\"window\":%u,\"merged_batches\":%.3f,\"constant_buffer_rows\":%llu,"
             "\"target_depth\":%.3f,\"plan_depth_per_extractor\":%.3f,\"mean_depth\":%.3f,"
             "\"depth_of_target\":%.4f,\"queue_depth\":%.3f,\"gather_depth\":%.3f,"
             "\"mean_in_flight\":%.3f,\"constant_hit_ratio\":%.6f,\"buffer_hit_ratio\":%.6f,"
             "\"announced\":%llu,\"unannounced\":%llu,\"window_short\":%llu}",
             ps->gids_window, ps->gids_merged, (unsigned long long)ps->gids_constant_rows,
             ps->gids_target_depth, ps->gids_plan_depth, ps->gids_mean_depth,
             ps->gids_target_depth > 0 ? ps->gids_mean_depth / ps->gids_target_depth : 0.0,
             ps->gids_queue_depth, ps->gids_gather_depth, ps->gids_inflight,
             rows ? (double)cb_hits / (double)rows : 0.0,
             ps->gids_buffer_lookups
                 ? (double)ps->gids_buffer_hits / (double)ps->gids_buffer_lookups
                 : 0.0,
             (unsigned long long)ps->gids_announced, (unsigned long long)ps->gids_unannounced,
             (unsigned long long)ps->gids_window_short);
    return buf;
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
    int show_bar;
    tg_progress_t *prog;
} step_ctx_t;

static int train_step(void *ctx, const tg_batch_t *b, const float *X)
{
    step_ctx_t *c = ctx;
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
    int rc = tg_model_train_step(c->m, b, X, c->y, &st);
    c->compute_s += tg_now() - t0;
    c->last_batch = b->id;
    if (rc < 0) return rc;
    c->loss_sum += st.loss * (double)st.count;
    c->correct += st.correct;
    c->count += st.count;
    c->batches++;
    c->feature_bytes += (uint64_t)b->num_nodes * c->r->row_bytes;
    if (c->show_bar) {
        char sfx[64];
        snprintf(sfx, sizeof sfx, "loss %.4f", c->count ? c->loss_sum / (double)c->count : 0.0);
        tg_progress_update(c->prog, c->batches, sfx);
    }
    return c->stop && *c->stop ? TG_PASS_STOP : 0;
}

/* ---------------------------------------------------------------- the run */

int tg_train(const tg_train_opts_t *opts, tg_train_result_t *res)
{
    tg_train_opts_t o = *opts;
    memset(res, 0, sizeof *res);
    int rc;
    if (o.model.type == TG_MODEL_MLP) /* edges are ignored: do not sample them */
        for (int l = 0; l < o.model.num_layers; l++)
            o.fanouts[l] = 0;

    tg_run_t r;
    tg_model_t *m = NULL;
    uint8_t *train_mask = NULL;
    tg_plan_t plan;      /* the epochs' seed orders and batches */
    tg_plan_t next_plan; /* the next epoch's, for strategies that prepare it (TG_STRAT_NEXT_PASS) */
    uint64_t order_bytes = 0, mask_bytes = 0;
    tg_dataset_t *probe = NULL;
    char *best_blob = NULL; /* the best model's checkpoint bytes, not yet on disk if best_dirty */
    size_t best_len = 0;
    int best_dirty = 0;
    uint64_t ckpt_epoch = 0; /* epochs done in the checkpoint on disk */
    uint64_t batch_bytes_peak = 0;
    char ckpt_path[4096], best_path[4096];
    step_ctx_t sc;
    memset(&r, 0, sizeof r);
    memset(&sc, 0, sizeof sc);
    memset(&plan, 0, sizeof plan);
    memset(&next_plan, 0, sizeof next_plan);

    /* Cheap checks before the expensive loads. */
    if (!o.dataset || !*o.dataset) return tg_err(-EINVAL, "a dataset directory is required");
    if ((rc = tg_dataset_open(&probe, o.dataset, 0)) < 0) return rc;
    rc = check_opts(&o, &probe->meta);
    uint64_t ntrain0 = probe->meta.num_train, N0 = probe->meta.num_nodes;
    uint32_t feat_dim0 = probe->meta.feat_dim;
    tg_dataset_close(probe);
    if (rc < 0) return rc;
    if ((rc = tg_mkdir_p(o.out_dir)) < 0) return rc;
    path_in(ckpt_path, sizeof ckpt_path, o.out_dir, TG_CKPT_NAME);
    path_in(best_path, sizeof best_path, o.out_dir, TG_CKPT_BEST_NAME);
    if (!o.resume && access(ckpt_path, F_OK) == 0)
        return tg_err(-EEXIST,
                      "%s already holds a run (%s); use --resume to continue it or "
                      "choose another --out",
                      o.out_dir, TG_CKPT_NAME);

    /* An MLP's fanouts are 0 by now, so it is never whole-graph. */
    int whole = tg_plan_whole_graph(o.batch_size, ntrain0, o.model.num_layers, o.fanouts);
    order_bytes = (whole ? N0 : ntrain0) * sizeof(uint64_t);
    mask_bytes = whole ? N0 : 0;
    tg_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.dataset = o.dataset;
    ro.strategy = o.strategy;
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.normalize = o.normalize_features;
    ro.sopts.threads = o.threads;
    ro.sopts.sampler_threads = o.sampler_threads; /* < 0: the default, resolved by the run */
    ro.args = o.strategy_args;
    ro.nargs = o.num_strategy_args;
    ro.mem_bytes = o.mem_bytes;
    ro.extra_bytes = order_bytes + mask_bytes;
    {
        tg_model_config_t mc = o.model;
        mc.in_dim = feat_dim0;
        ro.auto_extra = tg_budget_estimate(&mc, N0, o.batch_size, o.sampler, o.fanouts, 4);
    }
    ro.threads = o.threads;
    ro.verify = o.verify;
    ro.verify_reads = o.verify_reads;
    if ((rc = tg_run_open_opts(&r, &ro)) < 0) goto out;
    res->strategy = r.strat_i->info.name;
    r.sampler = o.sampler == &tg_sampler_node ? NULL : o.sampler;
    const tg_meta_t *meta = &r.ds->meta;
    o.model.in_dim = meta->feat_dim;
    o.model.out_dim = meta->num_classes;
    o.model.multi_label = meta->multi_label;
    if ((rc = tg_model_config_check(&o.model)) < 0) goto out;
    if ((rc = tg_budget_check_model(&r, tg_model_config_param_bytes(&o.model, &o.optim))) < 0)
        goto out;
    if ((rc = tg_model_create(&m, &o.model, o.seed)) < 0) goto out;
    if ((rc = tg_model_set_optim(m, &o.optim)) < 0) goto out;
    tg_model_set_pool(m, r.pool);

    tg_ckpt_info_t ck;
    memset(&ck, 0, sizeof ck);
    tg_ckpt_identity(&ck, r.ds);
    ck.seed = o.seed;
    ck.batch_size = o.batch_size;
    ck.num_layers = o.model.num_layers;
    memcpy(ck.fanouts, o.fanouts, sizeof ck.fanouts);
    for (int l = o.model.num_layers; l < TG_MAX_LAYERS; l++)
        ck.fanouts[l] = 0;
    if (r.sampler) snprintf(ck.sampler, sizeof ck.sampler, "%s", r.sampler->name);
    ck.normalize_features = o.normalize_features;
    ck.eval_sampled = o.eval_sampled;
    ck.best_valid_acc = -1;

    if (o.resume) {
        tg_ckpt_info_t got;
        if ((rc = resume_from(ckpt_path, r.ds, &ck, m, &got)) < 0) goto out;
        ck = got;
        ckpt_epoch = ck.epochs_done;
        if (ck.epoch_batches)
            tg_log_info("resuming %s in epoch %llu after its first %llu batch(es)", o.out_dir,
                        (unsigned long long)ck.epochs_done + 1,
                        (unsigned long long)ck.epoch_batches);
        else
            tg_log_info("resuming %s after epoch %llu", o.out_dir,
                        (unsigned long long)ck.epochs_done);
    }

    uint64_t ntrain = r.split_n[0], N = meta->num_nodes;
    /* The seed order and the mask are data the run holds: they count against --mem. */
    if ((rc = tg_budget_reserve(&r.budget, order_bytes + mask_bytes, "seed order")) < 0) goto out;
    tg_plan_opts_t po = {.num_nodes = N,
                         .train = r.split[0],
                         .num_train = ntrain,
                         .batch_size = o.batch_size,
                         .num_layers = o.model.num_layers,
                         .fanouts = o.fanouts,
                         .seed = o.seed,
                         .max_batches = o.batches_per_epoch};
    if ((rc = tg_plan_init(&plan, &po)) < 0) goto out;
    if ((r.strat_i->info.caps & TG_STRAT_NEXT_PASS) && !whole && o.epochs > 1) {
        if ((rc = tg_budget_reserve(&r.budget, order_bytes, "the next epoch's seed order")) < 0)
            goto out;
        if ((rc = tg_plan_init(&next_plan, &po)) < 0) goto out;
    }
    if (whole) {
        train_mask = calloc(N, 1);
        if (!train_mask) {
            rc = tg_err(-ENOMEM, "out of memory for the training mask");
            goto out;
        }
        for (uint64_t i = 0; i < ntrain; i++)
            train_mask[r.split[0][i]] = 1;
    }
    uint64_t all_batches = plan.all_batches, epoch_batches = plan.num_batches;
    if (ck.epoch_batches > epoch_batches && !r.strat_i->epoch_batches) {
        rc = tg_err(-EINVAL,
                    "cannot resume from %s: it stopped after %llu batches of epoch %llu, but "
                    "this run trains only %llu batches per epoch",
                    ckpt_path, (unsigned long long)ck.epoch_batches,
                    (unsigned long long)ck.epochs_done + 1, (unsigned long long)epoch_batches);
        goto out;
    }
    /* --mem is the whole process's: measure a batch, reserve the model, activations and
     * batches in flight; the strategy's caches get the rest. */
    tg_budget_plan_t bp = {0};
    if (ck.epochs_done < o.epochs) {
        tg_plan_epoch(&plan, ck.epochs_done);
        tg_budget_plan_opts_t bo = {.plan = &plan,
                                    .num_layers = o.model.num_layers,
                                    .fanouts = o.fanouts,
                                    .sampler = r.sampler,
                                    .optim = &o.optim};
        if ((rc = tg_budget_plan(&r, m, &bo, &bp)) < 0) goto out;
    }
    /* The state before the first epoch: a run that fails in it still has a checkpoint. Written
     * after the budget plan, so a --mem refused leaves no run behind to block the retry. */
    if (!o.resume && (rc = tg_ckpt_write(ckpt_path, &ck, m)) < 0) goto out;
    sc.r = &r;
    sc.m = m;
    sc.train_mask = train_mask;
    sc.stop = o.stop;
    char mb[32], blocks_how[64];
    snprintf(blocks_how, sizeof blocks_how, "sampled blocks%s%s%s", r.sampler ? " (sampler " : "",
             r.sampler ? r.sampler->name : "", r.sampler ? ")" : "");
    tg_log_info("training %s on %s with strategy %s: %llu training nodes, %s, %llu batch(es) per "
                "epoch%s, %d thread(s) + %d sampler thread(s), --mem %s",
                tg_model_type_name(o.model.type), o.dataset, r.strat_i->info.name,
                (unsigned long long)ntrain, whole ? "whole graph per step" : blocks_how,
                (unsigned long long)epoch_batches,
                epoch_batches < all_batches ? " (limited by --batches-per-epoch)" : "", o.threads,
                r.sopts.sampler_threads,
                r.budget.limit ? tg_fmt_bytes(r.budget.limit, mb, sizeof mb) : "none");
    /* Layer-wise evaluation out of core keeps its intermediate layers in files. */
    const char *lw_tmp = (r.strat_i->info.caps & TG_STRAT_IN_RAM) ? NULL : o.out_dir;

    double t_run = tg_now();
    int show_bar = o.progress && isatty(STDERR_FILENO) && tg_log_level() >= TG_LOG_INFO;
    for (uint64_t epoch = ck.epochs_done; epoch < o.epochs; epoch++) {
        double t0 = tg_now();
        tg_plan_epoch(&plan, epoch);
        /* A run stopped mid-epoch continues with the batches it had not trained. */
        uint64_t first = ck.epoch_batches;
        sc.compute_s = 0;
        sc.loss_sum = ck.epoch_loss_sum;
        sc.correct = ck.epoch_correct;
        sc.count = ck.epoch_count;
        sc.batches = first;
        sc.feature_bytes = 0;
        tg_progress_t prog;
        char label[48];
        snprintf(label, sizeof label, "epoch %llu/%llu", (unsigned long long)epoch + 1,
                 (unsigned long long)o.epochs);
        sc.show_bar = show_bar;
        sc.prog = &prog;
        tg_pass_t p = {.seeds = plan.seeds,
                       .num_seeds = plan.num_seeds,
                       .batch_size = plan.batch_size,
                       .seed = o.seed,
                       .epoch = epoch,
                       .first_batch = first,
                       .num_layers = o.model.num_layers,
                       .fanouts = o.fanouts,
                       .sampler = r.sampler,
                       .allow_out_of_order = 1,
                       .training = 1,
                       .step = train_step,
                       .ctx = &sc};
        /* a strategy that makes its own batches (hier) says how many this epoch has */
        if (r.strat_i->epoch_batches && !whole) {
            if ((rc = r.strat_i->epoch_batches(r.strat, &p, &epoch_batches)) < 0) goto out;
            if (first > epoch_batches) {
                rc = tg_err(-EINVAL,
                            "cannot resume from %s: it stopped after %llu batches of epoch "
                            "%llu, but strategy %s makes %llu batches of it here (were "
                            "--mem or its options changed?)",
                            ckpt_path, (unsigned long long)first, (unsigned long long)epoch + 1,
                            r.strat_i->info.name, (unsigned long long)epoch_batches);
                goto out;
            }
        }
        if (show_bar) {
            tg_progress_begin(&prog, label, epoch_batches, "batches");
            tg_progress_update(&prog, first, NULL);
        }
        tg_pass_t np = p;
        if (next_plan.order && epoch + 1 < o.epochs) {
            tg_plan_epoch(&next_plan, epoch + 1);
            np.seeds = next_plan.seeds;
            np.num_seeds = next_plan.num_seeds;
            np.epoch = epoch + 1;
            np.first_batch = 0;
            np.step = NULL;
            np.ctx = NULL;
            p.next = &np;
        }
        uint64_t idx0 = atomic_load(&r.index_bytes);
        tg_pass_stats_t ps;
        rc = tg_run_pass(&r, &p, &ps);
        uint64_t index_bytes = atomic_load(&r.index_bytes) - idx0;
        if (show_bar) tg_progress_end(&prog);
        batch_bytes_peak = TG_MAX(batch_bytes_peak, ps.batch_bytes_peak);
        if (rc == -ERANGE) {
            rc = tg_err(-ERANGE,
                        "epoch %llu, batch %llu: the training loss is not finite (NaN or "
                        "Inf), so training stopped; %s keeps the last good state (after "
                        "epoch %llu). Try a lower --lr (now %g)",
                        (unsigned long long)epoch + 1, (unsigned long long)sc.last_batch, ckpt_path,
                        (unsigned long long)ckpt_epoch, (double)o.optim.lr);
            goto out;
        }
        if (rc < 0) {
            tg_err_prefix(rc, "epoch %llu", (unsigned long long)epoch + 1);
            goto out;
        }
        double time_s = tg_now() - t0;
        if (ps.stopped && ps.next_batch < epoch_batches) {
            /* Stopped at a batch boundary inside the epoch: record where, resumably. */
            ck.epoch_batches = ps.next_batch;
            ck.epoch_loss_sum = sc.loss_sum;
            ck.epoch_correct = sc.correct;
            ck.epoch_count = sc.count;
            if (best_dirty && (rc = tg_write_file_atomic(best_path, best_blob, best_len)) < 0)
                goto out;
            best_dirty = 0;
            if ((rc = tg_ckpt_write(ckpt_path, &ck, m)) < 0) goto out;
            res->interrupted = 1;
            res->stopped_epoch = epoch;
            res->stopped_batch = ps.next_batch;
            rc = tg_err(-EINTR,
                        "interrupted in epoch %llu after %llu of its %llu batches; %s records "
                        "the state: continue with --resume",
                        (unsigned long long)epoch + 1, (unsigned long long)ps.next_batch,
                        (unsigned long long)epoch_batches, ckpt_path);
            goto out;
        }
        ck.epoch_batches = 0;
        ck.epoch_loss_sum = 0;
        ck.epoch_correct = ck.epoch_count = 0;
        double train_loss = sc.count ? sc.loss_sum / (double)sc.count : NAN;
        double train_acc = sc.count ? (double)sc.correct / (double)sc.count : NAN;

        /* Evaluation */
        int last = epoch + 1 == o.epochs;
        int do_eval = last || (o.eval_every && (epoch + 1) % o.eval_every == 0);
        tg_split_eval_t ev[3];
        memset(ev, 0, sizeof ev);
        double eval_s = 0;
        int improved = 0;
        if (do_eval) {
            double te = tg_now();
            int want[3] = {0, 1, 1};
            tg_pass_stats_t es;
            memset(&es, 0, sizeof es);
            tg_eval_how_t h = {.sampled = o.eval_sampled,
                               .fanouts = o.fanouts,
                               .batch_size = o.batch_size,
                               .seed = o.seed,
                               .chunk = o.eval_chunk,
                               .tmp_dir = lw_tmp,
                               .max_nodes = o.eval_max_nodes,
                               .stats = &es};
            if ((rc = tg_run_evaluate_how(&r, m, want, &h, ev)) < 0) {
                tg_err_prefix(rc, "evaluation after epoch %llu", (unsigned long long)epoch + 1);
                goto out;
            }
            batch_bytes_peak = TG_MAX(batch_bytes_peak, es.batch_bytes_peak);
            eval_s = tg_now() - te;
            /* Best validation accuracy; ties go to the lower validation loss, then the earlier
             * epoch. The test split never takes part in the choice. */
            if (ev[1].acc > ck.best_valid_acc ||
                (ev[1].acc == ck.best_valid_acc && ev[1].loss < ck.best_valid_loss)) {
                improved = 1;
                ck.best_epoch = epoch + 1;
                ck.best_valid_acc = ev[1].acc;
                ck.best_valid_loss = ev[1].loss;
                ck.test_at_best = ev[2].acc;
            }
        }
        ck.epochs_done = epoch + 1;
        ck.last_train_loss = train_loss;
        double tk = tg_now();
        if (improved) {
            free(best_blob);
            if ((rc = tg_ckpt_serialize(&ck, m, &best_blob, &best_len)) < 0) goto out;
            best_dirty = 1;
        }
        /* A stop request at the epoch's last batch: checkpoint here and end. */
        int stop_now = o.stop && *o.stop && !last;
        int do_ckpt =
            last || stop_now || (o.checkpoint_every && (epoch + 1) % o.checkpoint_every == 0);
        if (do_ckpt) {
            /* best.bin first: checkpoint.bin must never name a best epoch not yet on disk */
            if (best_dirty && (rc = tg_write_file_atomic(best_path, best_blob, best_len)) < 0)
                goto out;
            best_dirty = 0;
            if ((rc = tg_ckpt_write(ckpt_path, &ck, m)) < 0) goto out;
            ckpt_epoch = ck.epochs_done;
        }
        double ckpt_s = tg_now() - tk;

        uint64_t needed = index_bytes + sc.feature_bytes;
        double hit = ps.have_cache && ps.cache_lookups
                         ? (double)ps.cache_hits / (double)ps.cache_lookups
                         : NAN;
        uint64_t peak_rss = tg_peak_rss_bytes();
        if (o.json) {
            tg_json_t j;
            tg_json_begin(&j);
            tg_json_uint(&j, "epoch", epoch + 1);
            tg_json_num(&j, "time_s", time_s);
            tg_json_num(&j, "sample_s", ps.sample_s);
            tg_json_num(&j, "gather_s", ps.gather_s);
            tg_json_num(&j, "compute_s", sc.compute_s);
            tg_json_num(&j, "train_loss", train_loss);
            tg_json_num(&j, "train_acc", train_acc);
            tg_json_num(&j, "valid_acc", do_eval ? ev[1].acc : NAN);
            tg_json_num(&j, "valid_loss", do_eval ? ev[1].loss : NAN);
            tg_json_num(&j, "test_acc", do_eval ? ev[2].acc : NAN);
            tg_json_num(&j, "wait_s", ps.wait_s);
            tg_json_num(&j, "eval_s", eval_s);
            tg_json_num(&j, "checkpoint_s", ckpt_s);
            tg_json_uint(&j, "batches", ps.steps);
            tg_json_uint(&j, "rss_bytes", tg_rss_bytes());
            tg_json_str(&j, "strategy", r.strat_i->info.name);
            if (ps.have_io) {
                tg_json_uint(&j, "io_requests", ps.io_requests);
                tg_json_uint(&j, "io_read_bytes", ps.io_read_bytes);
            } else {
                tg_json_num(&j, "io_requests", NAN);
                tg_json_num(&j, "io_read_bytes", NAN);
            }
            tg_json_uint(&j, "io_needed_bytes", needed);
            tg_json_num(&j, "io_wait_s", ps.have_io_wait ? ps.io_wait_s : NAN);
            tg_json_num(&j, "cache_hit_ratio", hit);
            tg_json_uint(&j, "peak_rss_bytes", peak_rss);
            tg_json_uint(&j, "data_bytes", r.budget.used);
            tg_json_uint(&j, "batch_bytes_peak", ps.batch_bytes_peak);
            char tiers[TG_PASS_MAX_TIERS * 128 + 4];
            tg_json_raw(&j, "cache_tiers", pass_tiers_json(&ps, tiers, sizeof tiers));
            if (ps.have_plan) {
                /* ginex: Fig. 14's breakdown and the simulator's count beside the cache's */
                tg_json_num(&j, "changeset_s", ps.plan_s);
                tg_json_num(&j, "cache_init_s", ps.cache_init_s);
                tg_json_num(&j, "cache_update_s", ps.cache_update_s);
                tg_json_uint(&j, "cache_misses", ps.cache_lookups - ps.cache_hits);
                tg_json_uint(&j, "predicted_misses", ps.predicted_misses);
                tg_json_uint(&j, "prefetch_rows", ps.prefetch_rows);
                tg_json_uint(&j, "superbatches", ps.superbatches);
            }
            char ncj[160], pkj[512];
            if (ps.have_ncache)
                tg_json_raw(&j, "neighbor_cache", pass_ncache_json(&ps, ncj, sizeof ncj));
            if (ps.have_pack) tg_json_raw(&j, "preprocess", pass_pack_json(&ps, pkj, sizeof pkj));
            if (ps.have_hier) tg_json_raw(&j, "megabatch", pass_hier_json(&ps, pkj, sizeof pkj));
            if (ps.have_gids) tg_json_raw(&j, "gids", pass_gids_json(&ps, pkj, sizeof pkj));
            tg_json_end(&j, o.json, NULL);
        }
        char io_line[1024] = "";
        if (ps.have_io) {
            char a[32], b[32], w[32] = "?", hs[160] = "";
            if (ps.have_io_wait) snprintf(w, sizeof w, "%.2f s", ps.io_wait_s);
            if (ps.have_cache) snprintf(hs, sizeof hs, ", hit ratio %.3f", hit);
            if (ps.have_plan)
                snprintf(hs + strlen(hs), sizeof hs - strlen(hs),
                         ", misses %llu (planned %llu), changesets %.2f s, cache init %.2f s",
                         (unsigned long long)(ps.cache_lookups - ps.cache_hits),
                         (unsigned long long)ps.predicted_misses, ps.plan_s, ps.cache_init_s);
            snprintf(io_line, sizeof io_line, "; io %llu req, %s read / %s needed, wait %s%s",
                     (unsigned long long)ps.io_requests,
                     tg_fmt_bytes(ps.io_read_bytes, a, sizeof a), tg_fmt_bytes(needed, b, sizeof b),
                     w, hs);
        }
        if (ps.have_pack) {
            size_t l = strlen(io_line);
            if (ps.pack_reused)
                snprintf(io_line + l, sizeof io_line - l,
                         "; the samples and packing of an earlier epoch (%.2f s then)",
                         ps.pack_prep_s);
            else if (ps.pack_prepared_now)
                snprintf(io_line + l, sizeof io_line - l,
                         "; sampled and packed at its start in %.2f s", ps.pack_prep_s);
            else
                snprintf(io_line + l, sizeof io_line - l,
                         "; sampled and packed during the epoch before (%.2f s; waited %.2f s)",
                         ps.pack_prep_s, ps.pack_wait_s);
        }
        if (ps.have_hier) {
            size_t l = strlen(io_line);
            double n = ps.hier_nodes ? (double)ps.hier_nodes : 1.0;
            snprintf(io_line + l, sizeof io_line - l,
                     "; %llu mega-batches of %llu parts, loaded in %.2f s (waited %.2f s); mean "
                     "in-degree %.2f in the graph, %.2f in the mega-batches + %.2f from the "
                     "static cache",
                     (unsigned long long)ps.hier_megabatches,
                     (unsigned long long)ps.hier_dynamic_parts, ps.hier_load_s, ps.hier_load_wait_s,
                     (double)ps.hier_deg_full / n, (double)ps.hier_deg_induced / n,
                     (double)ps.hier_deg_static / n);
        }
        if (ps.have_ncache) {
            size_t l = strlen(io_line);
            snprintf(io_line + l, sizeof io_line - l, "; neighbour cache hit ratio %.3f",
                     ps.ncache_lookups ? (double)ps.ncache_hits / (double)ps.ncache_lookups : 0.0);
        }
        if (do_eval)
            tg_log_info("epoch %llu/%llu: loss %.4f train %.4f valid %.4f test %.4f%s (%.2f s: "
                        "sample %.2f gather %.2f compute %.2f wait %.2f%s; eval %.2f s)",
                        (unsigned long long)epoch + 1, (unsigned long long)o.epochs, train_loss,
                        train_acc, ev[1].acc, ev[2].acc, improved ? " *" : "", time_s, ps.sample_s,
                        ps.gather_s, sc.compute_s, ps.wait_s, io_line, eval_s);
        else
            tg_log_info("epoch %llu/%llu: loss %.4f train %.4f (%.2f s: sample %.2f gather %.2f "
                        "compute %.2f wait %.2f%s)",
                        (unsigned long long)epoch + 1, (unsigned long long)o.epochs, train_loss,
                        train_acc, time_s, ps.sample_s, ps.gather_s, sc.compute_s, ps.wait_s,
                        io_line);
        if (stop_now) {
            res->interrupted = 1;
            res->stopped_epoch = epoch + 1;
            res->stopped_batch = 0;
            rc = tg_err(-EINTR,
                        "interrupted after epoch %llu; %s records the state: continue with "
                        "--resume",
                        (unsigned long long)epoch + 1, ckpt_path);
            goto out;
        }
    }
    res->train_time_s = tg_now() - t_run;
    res->epochs_done = ck.epochs_done;
    res->best_epoch = ck.best_epoch;
    res->best_valid_acc = ck.best_valid_acc;
    res->best_valid_loss = ck.best_valid_loss;
    res->test_acc = ck.test_at_best;
    res->last_train_loss = ck.last_train_loss;
    res->peak_rss_bytes = tg_peak_rss_bytes();
    if (ck.best_epoch)
        tg_log_info("best validation accuracy %.4f at epoch %llu; test accuracy there %.4f",
                    ck.best_valid_acc, (unsigned long long)ck.best_epoch, ck.test_at_best);
    emit_final(&o, res, m, &r, o.out_dir, batch_bytes_peak, &bp);
    rc = 0;
out:
    free(sc.y);
    free(best_blob);
    tg_plan_destroy(&plan);
    tg_plan_destroy(&next_plan);
    free(train_mask);
    tg_model_destroy(m);
    tg_run_close(&r);
    return rc;
}
