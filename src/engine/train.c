/* The training run: epoch loop, evaluation, checkpoints, JSON lines (see tiergnn/engine.h). */
#include "engine-impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void tg_train_opts_default(tg_train_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->strategy = "memory";
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

/* The strategies this engine knows. Each one decides where batches' rows come from and what
 * runs concurrently; "memory" keeps graph and features in RAM and samples + gathers on
 * sampler threads ahead of the trainer. The out-of-core strategies join this table. */
typedef struct {
    const char *name;
    tg_run_store_t store;
} strategy_t;

static const strategy_t strategies[] = {{"memory", TG_RUN_STORE_MEMORY}};

static int find_strategy(const char *name, const strategy_t **out)
{
    for (size_t i = 0; i < sizeof strategies / sizeof strategies[0]; i++)
        if (!strcmp(name, strategies[i].name)) {
            *out = &strategies[i];
            return 0;
        }
    return tg_err(-EINVAL, "unknown strategy '%s', expected: memory", name);
}

/* ---------------------------------------------------------------- the gather hook */

typedef struct {
    tg_run_t *r;
    const uint8_t *train_mask; /* whole-graph mode: which seeds carry a label */
} hook_ctx_t;

typedef struct {
    float *X;   /* (num_nodes, D) */
    int32_t *y; /* (num_seeds * label_width) */
} payload_t;

static void payload_free(void *ctx, void *p)
{
    (void)ctx;
    payload_t *pl = p;
    if (pl) {
        free(pl->X);
        free(pl->y);
        free(pl);
    }
}

/* Runs on the sampler thread right after sampling: GATHER happens ahead of the trainer. */
static int gather_hook(void *ctx, tg_loader_item_t *it)
{
    hook_ctx_t *h = ctx;
    const tg_batch_t *b = &it->batch;
    payload_t *pl = calloc(1, sizeof *pl);
    if (pl) {
        pl->X = malloc((size_t)b->num_nodes * h->r->store->dim * sizeof *pl->X);
        pl->y = malloc((size_t)b->num_seeds * h->r->label_width * sizeof *pl->y);
    }
    if (!pl || !pl->X || !pl->y) {
        payload_free(NULL, pl);
        return tg_err(-ENOMEM, "out of memory for the features of %u nodes", b->num_nodes);
    }
    int rc = tg_store_gather(h->r->store, b->nodes, b->num_nodes, pl->X);
    if (rc < 0) {
        payload_free(NULL, pl);
        return rc;
    }
    tg_run_labels(h->r, b->nodes, b->num_seeds, h->train_mask, pl->y);
    it->payload = pl;
    return 0;
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
    if (!(o->optim.lr > 0) || !isfinite(o->optim.lr))
        return tg_err(-EINVAL, "--lr must be a positive number, got %g", (double)o->optim.lr);
    if (!(o->optim.weight_decay >= 0) || !isfinite(o->optim.weight_decay))
        return tg_err(-EINVAL, "--weight-decay must be >= 0, got %g",
                      (double)o->optim.weight_decay);
    if (meta->num_train == 0) return tg_err(-EINVAL, "the dataset has an empty training split");
    return 0;
}

static int whole_graph_mode(const tg_train_opts_t *o, uint64_t num_train)
{
    if (o->batch_size && o->batch_size < num_train) return 0;
    if (o->model.type == TG_MODEL_MLP)
        return 0; /* an MLP reads no neighbours: the training nodes alone are the batch */
    for (int l = 0; l < o->model.num_layers; l++)
        if (o->fanouts[l] != TG_FANOUT_ALL) return 0;
    return 1;
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
    if (ck->num_layers != now->num_layers)
        DIFF("%d layers there vs %d here", ck->num_layers, now->num_layers);
    else
        for (int l = 0; l < ck->num_layers; l++)
            if (ck->fanouts[l] != now->fanouts[l])
                DIFF("fanout of layer %d %lld there vs %lld here", l, (long long)ck->fanouts[l],
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

static void emit_final(const tg_train_opts_t *o, const tg_train_result_t *res, const tg_model_t *m,
                       const tg_run_t *r, const char *rundir)
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
    tg_json_str(&j, "strategy", o->strategy);
    tg_json_uint(&j, "seed", o->seed);
    tg_json_uint(&j, "param_count", tg_model_param_count(m));
    tg_json_uint(&j, "model_bytes", tg_model_param_bytes(m));
    tg_json_uint(&j, "activation_bytes", tg_model_act_bytes(m));
    tg_json_uint(&j, "data_bytes_peak", r->budget.peak);
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

/* ---------------------------------------------------------------- the run */

typedef struct {
    double time_s, sample_s, gather_s, compute_s, wait_s;
    double loss_sum;
    uint64_t correct, count, batches;
} epoch_stats_t;

int tg_train(const tg_train_opts_t *opts, tg_train_result_t *res)
{
    tg_train_opts_t o = *opts;
    memset(res, 0, sizeof *res);
    int rc;
    const strategy_t *strat;
    if ((rc = find_strategy(o.strategy ? o.strategy : "memory", &strat)) < 0) return rc;
    o.strategy = strat->name;
    if (o.model.type == TG_MODEL_MLP) /* edges are ignored: do not sample them */
        for (int l = 0; l < o.model.num_layers; l++)
            o.fanouts[l] = 0;

    tg_run_t r;
    tg_model_t *m = NULL;
    uint8_t *train_mask = NULL;
    uint64_t *order = NULL;
    tg_loader_t *ld = NULL;
    tg_dataset_t *probe = NULL;
    char *best_blob = NULL; /* the best model's checkpoint bytes, not yet on disk if best_dirty */
    size_t best_len = 0;
    int best_dirty = 0;
    uint64_t ckpt_epoch = 0; /* epochs done in the checkpoint on disk */
    char ckpt_path[4096], best_path[4096];
    memset(&r, 0, sizeof r);

    /* Cheap checks before the expensive loads. */
    if (!o.dataset || !*o.dataset) return tg_err(-EINVAL, "a dataset directory is required");
    if ((rc = tg_dataset_open(&probe, o.dataset, 0)) < 0) return rc;
    rc = check_opts(&o, &probe->meta);
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

    if ((rc = tg_run_open(&r, o.dataset, strat->store, o.normalize_features, o.mem_bytes,
                          o.threads)) < 0)
        goto out;
    const tg_meta_t *meta = &r.ds->meta;
    o.model.in_dim = meta->feat_dim;
    o.model.out_dim = meta->num_classes;
    o.model.multi_label = meta->multi_label;
    if ((rc = tg_model_config_check(&o.model)) < 0) goto out;
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
    ck.normalize_features = o.normalize_features;
    ck.eval_sampled = o.eval_sampled;
    ck.best_valid_acc = -1;

    if (o.resume) {
        tg_ckpt_info_t got;
        if ((rc = resume_from(ckpt_path, r.ds, &ck, m, &got)) < 0) goto out;
        ck = got;
        ckpt_epoch = ck.epochs_done;
        tg_log_info("resuming %s after epoch %llu", o.out_dir, (unsigned long long)ck.epochs_done);
    } else if ((rc = tg_ckpt_write(ckpt_path, &ck, m)) < 0) {
        /* the state before the first epoch: a run that fails at once still has a checkpoint */
        goto out;
    }

    uint64_t ntrain = r.split_n[0], N = meta->num_nodes;
    int whole = whole_graph_mode(&o, ntrain);
    uint64_t nseeds = whole ? N : ntrain;
    uint64_t bsz = o.batch_size && o.batch_size < ntrain ? o.batch_size : nseeds;
    order = malloc(nseeds * sizeof *order);
    if (!order) {
        rc = tg_err(-ENOMEM, "out of memory for the seed order");
        goto out;
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
    int sampler_threads = o.sampler_threads < 0 ? o.threads : o.sampler_threads;
    hook_ctx_t hctx = {&r, train_mask};
    tg_log_info("training %s on %s: %llu training nodes, %s, %llu batch(es) per epoch, "
                "%d thread(s) + %d sampler thread(s)",
                tg_model_type_name(o.model.type), o.dataset, (unsigned long long)ntrain,
                whole ? "whole graph per step" : "sampled blocks",
                (unsigned long long)((nseeds + bsz - 1) / bsz), o.threads, sampler_threads);

    double t_run = tg_now();
    int show_bar = o.progress && isatty(STDERR_FILENO) && tg_log_level() >= TG_LOG_INFO;
    for (uint64_t epoch = ck.epochs_done; epoch < o.epochs; epoch++) {
        epoch_stats_t es;
        memset(&es, 0, sizeof es);
        double t0 = tg_now();
        if (whole) {
            for (uint64_t i = 0; i < N; i++)
                order[i] = i;
        } else {
            memcpy(order, r.split[0], ntrain * sizeof *order);
            tg_sampler_shuffle_epoch(order, ntrain, o.seed, epoch);
        }
        tg_loader_opts_t lo = {.adj = r.adj,
                               .num_layers = o.model.num_layers,
                               .fanouts = o.fanouts,
                               .seeds = order,
                               .num_seeds = nseeds,
                               .batch_size = bsz,
                               .seed = o.seed,
                               .epoch = epoch,
                               .num_threads = sampler_threads,
                               .prefetch = 2,
                               .hook = gather_hook,
                               .hook_free = payload_free,
                               .ctx = &hctx};
        if ((rc = tg_loader_start(&ld, &lo)) < 0) goto out;
        tg_progress_t prog;
        char label[48];
        snprintf(label, sizeof label, "epoch %llu/%llu", (unsigned long long)epoch + 1,
                 (unsigned long long)o.epochs);
        if (show_bar) tg_progress_begin(&prog, label, tg_loader_num_batches(ld), "batches");
        for (;;) {
            tg_loader_item_t *it;
            double tw = tg_now();
            rc = tg_loader_next(ld, &it);
            es.wait_s += tg_now() - tw;
            if (rc < 0) {
                tg_err_prefix(rc, "epoch %llu", (unsigned long long)epoch + 1);
                goto out;
            }
            if (rc == 0) break;
            payload_t *pl = it->payload;
            tg_step_stats_t st;
            double tc = tg_now();
            rc = tg_model_train_step(m, &it->batch, pl->X, pl->y, &st);
            es.compute_s += tg_now() - tc;
            es.sample_s += it->sample_s;
            es.gather_s += it->hook_s;
            uint64_t bid = it->batch.id;
            tg_loader_item_free(ld, it);
            if (rc == -ERANGE) {
                if (show_bar) tg_progress_end(&prog);
                rc = tg_err(-ERANGE,
                            "epoch %llu, batch %llu: the training loss is not finite (NaN or "
                            "Inf), so training stopped; %s keeps the last good state (after "
                            "epoch %llu). Try a lower --lr (now %g)",
                            (unsigned long long)epoch + 1, (unsigned long long)bid, ckpt_path,
                            (unsigned long long)ckpt_epoch, (double)o.optim.lr);
                goto out;
            }
            if (rc < 0) {
                tg_err_prefix(rc, "epoch %llu, batch %llu", (unsigned long long)epoch + 1,
                              (unsigned long long)bid);
                goto out;
            }
            es.loss_sum += st.loss * (double)st.count;
            es.correct += st.correct;
            es.count += st.count;
            es.batches++;
            if (show_bar) {
                char sfx[64];
                snprintf(sfx, sizeof sfx, "loss %.4f",
                         es.count ? es.loss_sum / (double)es.count : 0.0);
                tg_progress_update(&prog, es.batches, sfx);
            }
        }
        tg_loader_stop(ld);
        ld = NULL;
        if (show_bar) tg_progress_end(&prog);
        es.time_s = tg_now() - t0;
        double train_loss = es.count ? es.loss_sum / (double)es.count : NAN;
        double train_acc = es.count ? (double)es.correct / (double)es.count : NAN;

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
            if ((rc = tg_run_evaluate(&r, m, want, o.eval_sampled, o.fanouts, o.batch_size, o.seed,
                                      o.eval_chunk, ev)) < 0) {
                tg_err_prefix(rc, "evaluation after epoch %llu", (unsigned long long)epoch + 1);
                goto out;
            }
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
        int do_ckpt = last || (o.checkpoint_every && (epoch + 1) % o.checkpoint_every == 0);
        if (do_ckpt) {
            /* best.bin first: checkpoint.bin must never name a best epoch not yet on disk */
            if (best_dirty && (rc = tg_write_file_atomic(best_path, best_blob, best_len)) < 0)
                goto out;
            best_dirty = 0;
            if ((rc = tg_ckpt_write(ckpt_path, &ck, m)) < 0) goto out;
            ckpt_epoch = ck.epochs_done;
        }
        double ckpt_s = tg_now() - tk;

        if (o.json) {
            tg_json_t j;
            tg_json_begin(&j);
            tg_json_uint(&j, "epoch", epoch + 1);
            tg_json_num(&j, "time_s", es.time_s);
            tg_json_num(&j, "sample_s", es.sample_s);
            tg_json_num(&j, "gather_s", es.gather_s);
            tg_json_num(&j, "compute_s", es.compute_s);
            tg_json_num(&j, "train_loss", train_loss);
            tg_json_num(&j, "train_acc", train_acc);
            tg_json_num(&j, "valid_acc", do_eval ? ev[1].acc : NAN);
            tg_json_num(&j, "valid_loss", do_eval ? ev[1].loss : NAN);
            tg_json_num(&j, "test_acc", do_eval ? ev[2].acc : NAN);
            tg_json_num(&j, "wait_s", es.wait_s);
            tg_json_num(&j, "eval_s", eval_s);
            tg_json_num(&j, "checkpoint_s", ckpt_s);
            tg_json_uint(&j, "batches", es.batches);
            tg_json_uint(&j, "rss_bytes", tg_rss_bytes());
            tg_json_end(&j, o.json, NULL);
        }
        if (do_eval)
            tg_log_info("epoch %llu/%llu: loss %.4f train %.4f valid %.4f test %.4f%s (%.2f s: "
                        "sample %.2f gather %.2f compute %.2f wait %.2f; eval %.2f s)",
                        (unsigned long long)epoch + 1, (unsigned long long)o.epochs, train_loss,
                        train_acc, ev[1].acc, ev[2].acc, improved ? " *" : "", es.time_s,
                        es.sample_s, es.gather_s, es.compute_s, es.wait_s, eval_s);
        else
            tg_log_info("epoch %llu/%llu: loss %.4f train %.4f (%.2f s: sample %.2f gather %.2f "
                        "compute %.2f wait %.2f)",
                        (unsigned long long)epoch + 1, (unsigned long long)o.epochs, train_loss,
                        train_acc, es.time_s, es.sample_s, es.gather_s, es.compute_s, es.wait_s);
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
    emit_final(&o, res, m, &r, o.out_dir);
    rc = 0;
out:
    tg_loader_stop(ld);
    free(best_blob);
    free(order);
    free(train_mask);
    tg_model_destroy(m);
    tg_run_close(&r);
    return rc;
}
