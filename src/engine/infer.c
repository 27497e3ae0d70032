/* Evaluation of a saved run (tiergnn eval) and inference for every node (tiergnn infer). */
#include "engine-impl.h"
#include "tiergnn/dist.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How a saved run is opened: which checkpoint, through which strategy ("auto" picking an
 * in-RAM one when graph and features fit mem_bytes), and what is checked (--verify,
 * --verify-reads). */
typedef struct saved_opts {
    int which_last;
    const char *strategy;
    const tg_strategy_arg_t *args;
    int nargs;
    uint64_t mem_bytes;
    int threads;
    int verify, verify_reads;
} saved_opts_t;

/* Opens RUNDIR's checkpoint, the dataset it must belong to, and the model. */
static int open_saved(const char *dataset, const char *rundir, const saved_opts_t *so, tg_run_t *r,
                      tg_model_t **m, tg_ckpt_info_t *info, char *path, size_t path_len)
{
    snprintf(path, path_len, "%s/%s", rundir, so->which_last ? TG_CKPT_NAME : TG_CKPT_BEST_NAME);
    if (access(path, F_OK) != 0) {
        if (!so->which_last)
            return tg_err(-ENOENT,
                          "%s: no best model in this run directory (was the run "
                          "evaluated at least once?)",
                          path);
        return tg_err(-ENOENT, "%s: no checkpoint in this run directory", path);
    }
    int rc = tg_ckpt_read_info(path, info);
    if (rc < 0) return rc;
    tg_run_opts_t ro;
    memset(&ro, 0, sizeof ro);
    ro.dataset = dataset;
    ro.strategy = so->strategy;
    tg_strategy_opts_default(&ro.sopts);
    ro.sopts.normalize = info->normalize_features;
    ro.sopts.threads = so->threads;
    ro.sopts.sampler_threads = -1; /* the default: the threads, fewer if --mem needs it */
    ro.args = so->args;
    ro.nargs = so->nargs;
    ro.mem_bytes = so->mem_bytes;
    ro.threads = so->threads;
    ro.verify = so->verify;
    ro.verify_reads = so->verify_reads;
    if ((rc = tg_run_open_opts(r, &ro)) < 0) return rc;
    if ((rc = tg_ckpt_check_dataset(info, r->ds, path)) < 0) goto err;
    /* the run evaluates with the sampler it trained with ("": node-wise) */
    if (info->sampler[0]) {
        const tg_sampler_i *k = tg_sampler_find(info->sampler);
        if (!k) {
            rc = tg_err_prefix(-EINVAL, "%s", path);
            goto err;
        }
        r->sampler = k == &tg_sampler_node ? NULL : k;
    }
    if ((rc = tg_ckpt_load_model(path, info, m)) < 0) goto err;
    /* the engine record matched the dataset; the model record behind it must too, or its layers
     * would read feature rows and labels of another width */
    const tg_model_config_t *mc = tg_model_config(*m);
    const tg_meta_t *meta = &r->ds->meta;
    if (mc->in_dim != meta->feat_dim || mc->out_dim != meta->num_classes ||
        !mc->multi_label != !meta->multi_label) {
        rc = tg_err(-EINVAL,
                    "%s: the model takes %u features to %u %s classes, the dataset %s has %u "
                    "features and %u %s classes (damaged checkpoint?)",
                    path, mc->in_dim, mc->out_dim, mc->multi_label ? "multi-label" : "single-label",
                    r->ds->dir, meta->feat_dim, meta->num_classes,
                    meta->multi_label ? "multi-label" : "single-label");
        tg_model_destroy(*m);
        *m = NULL;
        goto err;
    }
    tg_model_set_pool(*m, r->pool);
    return 0;
err:
    tg_run_close(r);
    return rc;
}

/* open_saved on every rank (tiergnn/dist.h): under K > 1 ranks a rank that could not open the
 * run (its --mem refused, a damaged file) fails every rank, before the first collective of the
 * forward. On failure r is closed and *m NULL on every rank. */
static int open_saved_ranks(const char *dataset, const char *rundir, const saved_opts_t *so,
                            tg_run_t *r, tg_model_t **m, tg_ckpt_info_t *info, char *path,
                            size_t path_len)
{
    *m = NULL;
    int rc = open_saved(dataset, rundir, so, r, m, info, path, path_len);
    if (tg_dist_size() == 1) return rc;
    int agreed = tg_dist_agree(rc, "to open the checkpoint, its dataset and the --mem budget");
    if (agreed < 0 && rc >= 0) {
        tg_model_destroy(*m);
        *m = NULL;
        tg_run_close(r);
    }
    return agreed;
}

int tg_eval(const char *dataset, const char *rundir, tg_file_id_t split, const tg_eval_opts_t *o,
            tg_eval_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (split != TG_FILE_TRAIN && split != TG_FILE_VALID && split != TG_FILE_TEST)
        return tg_err(-EINVAL, "eval: split must be train, valid or test");
    tg_run_t r;
    tg_model_t *m = NULL;
    tg_ckpt_info_t info;
    char path[4096];
    int threads = o && o->threads > 0 ? o->threads : 1;
    saved_opts_t so = {.threads = threads};
    if (o) {
        so.which_last = o->which_last;
        so.strategy = o->strategy;
        so.args = o->strategy_args;
        so.nargs = o->num_strategy_args;
        so.mem_bytes = o->mem_bytes;
        so.verify = o->verify;
        so.verify_reads = o->verify_reads;
    }
    int rc = open_saved_ranks(dataset, rundir, &so, &r, &m, &info, path, sizeof path);
    if (rc < 0) return rc;
    int want[3] = {0, 0, 0};
    want[tg_split_index(split)] = 1;
    tg_split_eval_t ev[3];
    /* Out of core, layer-wise intermediate layers go to a private folder in RUNDIR. */
    char tmp_dir[4200];
    int use_tmp = !(r.strat_i->info.caps & TG_STRAT_IN_RAM) && !info.eval_sampled;
    snprintf(tmp_dir, sizeof tmp_dir, "%s/eval-tmp-%d-r%d", rundir, (int)getpid(), tg_dist_rank());
    if (use_tmp && (rc = tg_mkdir_p(tmp_dir)) < 0) goto done;
    tg_eval_how_t h = {.sampled = info.eval_sampled,
                       .fanouts = info.fanouts,
                       .batch_size = info.batch_size,
                       .seed = info.seed,
                       .chunk = o ? o->eval_chunk : 0,
                       .tmp_dir = use_tmp ? tmp_dir : NULL,
                       .max_nodes = o ? o->max_nodes : 0};
    rc = tg_run_evaluate_how(&r, m, want, &h, ev);
    if (use_tmp) tg_rmtree(tmp_dir);
    if (rc >= 0) {
        const tg_split_eval_t *e = &ev[tg_split_index(split)];
        res->acc = e->acc;
        res->loss = e->loss;
        res->count = e->count;
        res->epoch = info.best_epoch && !(o && o->which_last) ? info.best_epoch : info.epochs_done;
    }
done:
    tg_model_destroy(m);
    tg_run_close(&r);
    return rc;
}

/* ---------------------------------------------------------------- inference */

typedef struct {
    tg_filew_t pred, emb;
    int have_emb;
    uint32_t C, E;
    int multi;
    int32_t *buf;
    size_t buf_cap;
    uint64_t written;
} infer_ctx_t;

static int infer_sink(void *ctx, uint64_t pos, const uint64_t *ids, size_t n, const float *logits,
                      const float *emb)
{
    infer_ctx_t *c = ctx;
    (void)pos; /* every node in id order: the ids say it */
    size_t w = c->multi ? c->C : 1;
    if (n * w > c->buf_cap) {
        free(c->buf);
        c->buf = malloc(n * w * sizeof *c->buf);
        c->buf_cap = c->buf ? n * w : 0;
        if (!c->buf) return tg_err(-ENOMEM, "infer: out of memory for predictions");
    }
    for (size_t i = 0; i < n; i++) {
        /* Chunks arrive in node order, so the files are written sequentially. */
        if (ids[i] != c->written + i)
            return tg_err(-EINVAL, "infer: internal error: node %llu out of order",
                          (unsigned long long)ids[i]);
        const float *row = logits + i * c->C;
        if (c->multi) {
            for (uint32_t k = 0; k < c->C; k++)
                c->buf[i * w + k] = row[k] > 0;
        } else {
            uint32_t best = 0;
            for (uint32_t k = 1; k < c->C; k++)
                if (row[k] > row[best]) best = k;
            c->buf[i] = (int32_t)best;
        }
    }
    int rc = tg_filew_write(&c->pred, c->buf, n * w * sizeof *c->buf);
    if (rc >= 0 && c->have_emb) rc = tg_filew_write(&c->emb, emb, n * c->E * sizeof *emb);
    c->written += n;
    return rc;
}

/* Renames tmp to final; both in the same directory. */
static int publish(const char *tmp, const char *final)
{
    if (rename(tmp, final) != 0)
        return tg_err(-errno, "%s: rename to %s failed: %s", tmp, final, strerror(errno));
    return 0;
}

/* The strategy inference opens: the one asked for, or with "auto" and no --mem the automatic
 * choice against a quarter of the RAM (graph and features go to RAM only when they fit;
 * otherwise indices are read from disk and each row from the feature file when a chunk needs
 * it; without --mem nothing is then accounted). */
static int infer_strategy(const char *dataset, const tg_infer_opts_t *o, const char **strategy)
{
    *strategy = o->strategy && *o->strategy ? o->strategy : "auto";
    if (o->mem_bytes || strcmp(*strategy, "auto")) return 0;
    tg_dataset_t *probe;
    int rc = tg_dataset_open(&probe, dataset, 0);
    if (rc < 0) return rc;
    tg_strategy_opts_t so;
    tg_strategy_opts_default(&so);
    const tg_strategy_i *si;
    char why[256];
    rc = tg_strategy_choose(probe, 0, 0, 0, &so, o->strategy_args, o->num_strategy_args, &si, why,
                            sizeof why);
    tg_dataset_close(probe);
    if (rc < 0) return rc;
    *strategy = si->info.name;
    return 0;
}

/* The files' names: OUT.tmp, OUT.emb, OUT.emb.tmp, OUT.json. */
typedef struct {
    char *pred_tmp, *emb, *emb_tmp, *json;
} infer_paths_t;

/* Closes the prediction (and embedding) files and renames them to their final names; fi gets
 * their sizes and CRCs. */
static int infer_publish(infer_ctx_t *c, const infer_paths_t *pa, const char *out_path,
                         tg_file_info_t fi[2])
{
    memset(fi, 0, 2 * sizeof *fi);
    int rc = tg_filew_close(&c->pred, &fi[0]);
    c->pred.fd = -1;
    if (rc < 0) return rc;
    if (c->have_emb) {
        rc = tg_filew_close(&c->emb, &fi[1]);
        c->emb.fd = -1;
        if (rc < 0) return rc;
    }
    if ((rc = publish(pa->pred_tmp, out_path)) < 0) return rc;
    if (c->have_emb && (rc = publish(pa->emb_tmp, pa->emb)) < 0) return rc;
    return 0;
}

/* OUT.json: what the files hold (dtypes, widths, CRCs) and the checkpoint they come from,
 * written atomically, then the directory synced so that the renames are durable too. */
static int infer_manifest(const tg_run_t *r, const infer_ctx_t *c, const infer_paths_t *pa,
                          const char *out_path, const tg_file_info_t fi[2], const char *ckpath,
                          uint64_t ckpt_epoch)
{
    tg_json_t j;
    tg_json_begin(&j);
    tg_json_uint(&j, "num_nodes", r->ds->meta.num_nodes);
    tg_json_str(&j, "predictions", out_path);
    tg_json_str(&j, "predictions_dtype", "int32");
    tg_json_uint(&j, "predictions_width", c->multi ? c->C : 1);
    tg_json_bool(&j, "multi_label", c->multi);
    tg_json_uint(&j, "num_classes", c->C);
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", fi[0].crc32);
    tg_json_str(&j, "predictions_crc32", crc);
    if (c->have_emb) {
        snprintf(crc, sizeof crc, "%08x", fi[1].crc32);
        tg_json_str(&j, "embeddings", pa->emb);
        tg_json_str(&j, "embeddings_dtype", "float32");
        tg_json_uint(&j, "embed_dim", c->E);
        tg_json_str(&j, "embeddings_crc32", crc);
    }
    tg_json_str(&j, "checkpoint", ckpath);
    tg_json_uint(&j, "checkpoint_epoch", ckpt_epoch);
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    if (!text) return tg_err(-ENOMEM, "infer: out of memory");
    size_t tlen = strlen(text);
    char *nl = realloc(text, tlen + 2); /* end the file with a newline */
    if (nl) {
        text = nl;
        text[tlen++] = '\n';
        text[tlen] = 0;
    }
    int rc = tg_write_file_atomic(pa->json, text, tlen);
    free(text);
    if (rc < 0) return rc;
    /* make the renames of the data files durable too */
    char *d = strdup(out_path), *slash = d ? strrchr(d, '/') : NULL;
    if (slash) *slash = 0;
    rc = tg_fsync_dir(slash ? (d[0] ? d : "/") : ".");
    free(d);
    return rc;
}

/* The files before the forward: rank 0's (the only writer) prediction and embedding files, and
 * every rank's private folder in RUNDIR for the intermediate layers (the rank in its name too:
 * ranks on several machines may share RUNDIR and a pid), removed whatever happens. The forward
 * is collective, so under K > 1 ranks they start it together or not at all. */
static int infer_prepare(infer_ctx_t *c, const infer_paths_t *pa, const char *rundir, char *tmp_dir,
                         size_t tl, int writer)
{
    int rc = writer ? tg_filew_open(&c->pred, pa->pred_tmp, 4u << 20) : 0;
    if (rc >= 0 && writer && c->have_emb) rc = tg_filew_open(&c->emb, pa->emb_tmp, 4u << 20);
    snprintf(tmp_dir, tl, "%s/infer-tmp-%d-r%d", rundir, (int)getpid(), tg_dist_rank());
    if (rc >= 0) rc = tg_mkdir_p(tmp_dir);
    if (tg_dist_size() > 1) rc = tg_dist_agree(rc, "to create its output and temporary files");
    return rc;
}

int tg_infer(const char *dataset, const char *rundir, const char *out_path,
             const tg_infer_opts_t *o)
{
    if (!out_path || !*out_path)
        return tg_err(-EINVAL, "infer: an output file (--out FILE) is required");
    tg_ckpt_info_t info;
    char ckpath[4096];
    snprintf(ckpath, sizeof ckpath, "%s/%s", rundir,
             o->which_last ? TG_CKPT_NAME : TG_CKPT_BEST_NAME);
    const char *strategy;
    int rc = infer_strategy(dataset, o, &strategy);
    if (rc < 0) return rc;
    tg_run_t r;
    tg_model_t *m = NULL;
    saved_opts_t so = {.which_last = o->which_last,
                       .strategy = strategy,
                       .args = o->strategy_args,
                       .nargs = o->num_strategy_args,
                       .mem_bytes = o->mem_bytes,
                       .threads = o->threads > 0 ? o->threads : 1,
                       .verify = o->verify,
                       .verify_reads = o->verify_reads};
    if ((rc = open_saved_ranks(dataset, rundir, &so, &r, &m, &info, ckpath, sizeof ckpath)) < 0)
        return rc;
    /* under K > 1 ranks, rank 0 writes the files, the rows of every rank's share in node order
     * (the forward hands it every node after exchanging the last layer) */
    int writer = tg_dist_rank() == 0;
    const tg_model_config_t *cfg = tg_model_config(m);
    infer_ctx_t c;
    memset(&c, 0, sizeof c);
    c.pred.fd = c.emb.fd = -1;
    c.C = cfg->out_dim;
    c.E = tg_model_embed_dim(m);
    c.multi = cfg->multi_label;
    c.have_emb = o->embeddings;
    size_t pl = strlen(out_path) + 32, tl = strlen(rundir) + 48;
    infer_paths_t pa = {malloc(pl), malloc(pl), malloc(pl), malloc(pl)};
    char *tmp_dir = malloc(tl);
    if (!pa.pred_tmp || !pa.emb || !pa.emb_tmp || !pa.json || !tmp_dir) {
        rc = tg_err(-ENOMEM, "infer: out of memory");
        goto out;
    }
    tmp_dir[0] = 0;
    snprintf(pa.pred_tmp, pl, "%s.tmp", out_path);
    snprintf(pa.emb, pl, "%s.emb", out_path);
    snprintf(pa.emb_tmp, pl, "%s.emb.tmp", out_path);
    snprintf(pa.json, pl, "%s.json", out_path);
    if ((rc = infer_prepare(&c, &pa, rundir, tmp_dir, tl, writer)) < 0) goto out;
    tg_lw_opts_t lo = {.chunk = o->chunk_nodes,
                       .tmp_dir = tmp_dir,
                       .want_emb = c.have_emb,
                       .sink = infer_sink,
                       .ctx = &c,
                       .sink_root = 1,
                       .progress_label =
                           o->progress && writer && isatty(STDERR_FILENO) ? "infer" : NULL};
    tg_file_info_t fi[2];
    if ((rc = tg_lw_forward(&r, m, &lo)) < 0) goto out;
    if (writer && (rc = infer_publish(&c, &pa, out_path, fi)) >= 0)
        rc = infer_manifest(&r, &c, &pa, out_path, fi, ckpath,
                            o->which_last ? info.epochs_done : info.best_epoch);
    if (tg_dist_size() > 1) rc = tg_dist_agree(rc, "to write the predictions");
out:
    if (c.pred.fd >= 0) tg_filew_discard(&c.pred);
    if (c.emb.fd >= 0) tg_filew_discard(&c.emb);
    /* After a successful rename the .tmp names no longer exist; after a failure they go. */
    if (writer && pa.pred_tmp) unlink(pa.pred_tmp); /* other ranks: rank 0's names */
    if (writer && pa.emb_tmp) unlink(pa.emb_tmp);
    if (tmp_dir && tmp_dir[0]) tg_rmtree(tmp_dir);
    free(tmp_dir);
    free(c.buf);
    free(pa.pred_tmp);
    free(pa.emb);
    free(pa.emb_tmp);
    free(pa.json);
    tg_model_destroy(m);
    tg_run_close(&r);
    return rc;
}
