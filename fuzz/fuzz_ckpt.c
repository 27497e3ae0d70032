/* libFuzzer target for checkpoints (checkpoint.bin, best.bin): the engine record and the model
 * record behind it, through the loader (tg_ckpt_load_model), `eval` (tg_eval) and `--resume`
 * (tg_train), on a generated 24-node dataset.
 *
 * Input: byte 0 picks the run configuration (bits 0-2: one of the models below, the one a resume
 * continues), the fix-ups (bit 3: the engine record's CRC-32 rewritten, bit 4: the model
 * record's, so that fields behind the checksums are reached) and what runs (bit 5: the bytes are
 * best.bin rather than checkpoint.bin; bit 6: resume from them; bit 7: eval them); the rest is
 * the file. TG_FUZZ_SEEDS=DIR in the environment writes the seed corpus to DIR and exits: the
 * checkpoints of one short run of each configuration, one of them stopped mid-epoch.
 *
 * Oracles: no crash/UB/leak; every failure returns < 0 with a one-line message; a checkpoint
 * that loads serialises and loads again to the same record and model (every field, parameter and
 * optimiser moment, bit for bit); a run resumed from it leaves a checkpoint that loads.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine-impl.h"
#include "fuzz_common.h"
#include "nn/nn-impl.h"

typedef struct {
    const char *name;
    tg_model_type_t type;
    tg_optim_type_t optim;
    float momentum, input_dropout;
    const char *sampler;
} run_cfg_t;

/* sage: version 1 records; input dropout: a version 2 model record; ladies: a version 3 engine
 * record (its sampler's name). */
static const run_cfg_t cfgs[] = {
    {"sage-adam", TG_MODEL_SAGE, TG_OPTIM_ADAM, 0, TG_INPUT_DROPOUT_SAME, NULL},
    {"gcn-sgd-momentum", TG_MODEL_GCN, TG_OPTIM_SGD, 0.9f, TG_INPUT_DROPOUT_SAME, NULL},
    {"gat-2-heads", TG_MODEL_GAT, TG_OPTIM_ADAM, 0, TG_INPUT_DROPOUT_SAME, NULL},
    {"gin-sgd", TG_MODEL_GIN, TG_OPTIM_SGD, 0, TG_INPUT_DROPOUT_SAME, NULL},
    {"sage-input-dropout", TG_MODEL_SAGE, TG_OPTIM_ADAM, 0, 0.25f, NULL},
    {"gcn-ladies", TG_MODEL_GCN, TG_OPTIM_ADAM, 0, TG_INPUT_DROPOUT_SAME, "ladies"},
};
#define NCFG (int)(sizeof cfgs / sizeof *cfgs)

static const char *dataset;

/* The options of a short run of configuration c into out (2 epochs of 2 batches). */
static void run_opts(tg_train_opts_t *o, const run_cfg_t *c, const char *out)
{
    tg_train_opts_default(o);
    o->dataset = dataset;
    o->out_dir = out;
    o->strategy = "memory";
    o->model.type = c->type;
    o->model.hidden = 4;
    o->model.num_layers = 2;
    o->model.heads = 2;
    o->model.input_dropout = c->input_dropout;
    tg_optim_config_default(&o->optim, c->optim);
    o->optim.momentum = c->momentum;
    o->sampler = c->sampler ? tg_sampler_find(c->sampler) : NULL;
    o->fanouts[0] = o->fanouts[1] = c->sampler ? 8 : 3;
    o->batch_size = 8;
    o->epochs = 2;
    o->batches_per_epoch = 2;
    o->threads = 1;
    o->sampler_threads = 0;
    o->seed = 1;
    o->mem_bytes = 64u << 20;
}

/* Writes DIR/<name>-<file>: flags byte + the file's bytes. */
static void write_seed(const char *dir, const char *name, const char *file, unsigned flags,
                       const char *from)
{
    size_t len;
    uint8_t *data = fz_read(from, &len);
    uint8_t *seed = malloc(len + 1);
    if (!seed) abort();
    seed[0] = (uint8_t)flags;
    memcpy(seed + 1, data, len);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%s", dir, name, file);
    fz_write(path, seed, len + 1);
    free(seed);
    free(data);
}

/* The seed corpus: checkpoint.bin and best.bin of each configuration after one epoch (resumed
 * and evaluated), and the checkpoint of a run stopped after its first batch. */
static void make_seeds(const char *dir)
{
    tg_mkdir_p(dir);
    const char *out = fz_path(1, "seed-run");
    for (int i = 0; i < NCFG; i++) {
        tg_rmtree(out);
        tg_train_opts_t o;
        run_opts(&o, &cfgs[i], out);
        o.epochs = 1;
        tg_train_result_t res;
        if (tg_train(&o, &res) < 0) fz_fail("a seed run failed");
        char ck[600], best[600];
        snprintf(ck, sizeof ck, "%s/%s", out, TG_CKPT_NAME);
        snprintf(best, sizeof best, "%s/%s", out, TG_CKPT_BEST_NAME);
        write_seed(dir, cfgs[i].name, "checkpoint", (unsigned)i | 0xc0, ck);
        write_seed(dir, cfgs[i].name, "best", (unsigned)i | 0xa0, best);
    }
    tg_rmtree(out);
    tg_train_opts_t o;
    run_opts(&o, &cfgs[0], out);
    volatile sig_atomic_t stop = 1;
    o.stop = &stop;
    tg_train_result_t res;
    if (tg_train(&o, &res) != -EINTR) fz_fail("the stopped seed run did not stop");
    char ck[600];
    snprintf(ck, sizeof ck, "%s/%s", out, TG_CKPT_NAME);
    write_seed(dir, "sage-adam-mid-epoch", "checkpoint", 0xc0, ck);
    tg_rmtree(out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    tg_log_set_level(TG_LOG_QUIET);
    dataset = fz_path(0, "ds");
    fz_generate(dataset, 24, 3, 3, TG_F32);
    const char *seeds = getenv("TG_FUZZ_SEEDS");
    if (seeds) {
        make_seeds(seeds);
        exit(0);
    }
    return 0;
}

/* ---------------------------------------------------------------- fix-ups */

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Rewrites the CRC-32 that closes the engine record (bytes [0, len - 4) where len is the
 * record's own length field) and/or the model record's behind it. */
static void fix_crcs(uint8_t *p, size_t size, int engine, int model)
{
    if (size < 16) return;
    uint32_t len = rd32(p + 12);
    if (len < 16 || len > size) return;
    if (engine) {
        uint32_t c = tg_crc32(0, p, len - 4);
        memcpy(p + len - 4, &c, 4);
    }
    if (!model) return;
    /* the model record: magic, version, config (header_bytes(version) in all), parameters and
     * the moments it says it has, then the CRC-32 of all of it */
    const uint8_t *m = p + len;
    size_t rest = size - len;
    if (rest < 12) return;
    size_t hb = rd32(m + 8) == 1 ? 148 : 152;
    if (rest < hb) return;
    uint64_t n;
    memcpy(&n, m + hb - 56, 8);
    uint64_t blocks = 1 + (rd32(m + hb - 8) != 0) + (rd32(m + hb - 4) != 0);
    if (n > rest / 4 / blocks) return;
    size_t end = hb + (size_t)(n * 4 * blocks);
    if (end + 4 > rest) return;
    uint32_t c = tg_crc32(0, m, end);
    memcpy(p + len + end, &c, 4);
}

/* ---------------------------------------------------------------- round trip */

#define SAME(a, b) (memcmp(&(a), &(b), sizeof(a)) == 0)

static void check_same_info(const tg_ckpt_info_t *a, const tg_ckpt_info_t *b)
{
    int same = a->num_nodes == b->num_nodes && a->num_edges == b->num_edges &&
               a->feat_dim == b->feat_dim && a->num_classes == b->num_classes &&
               SAME(a->crc, b->crc) && a->seed == b->seed && a->batch_size == b->batch_size &&
               a->num_layers == b->num_layers && a->normalize_features == b->normalize_features &&
               a->eval_sampled == b->eval_sampled && a->epochs_done == b->epochs_done &&
               a->best_epoch == b->best_epoch && SAME(a->best_valid_acc, b->best_valid_acc) &&
               SAME(a->best_valid_loss, b->best_valid_loss) &&
               SAME(a->test_at_best, b->test_at_best) &&
               SAME(a->last_train_loss, b->last_train_loss) &&
               a->epoch_batches == b->epoch_batches && SAME(a->epoch_loss_sum, b->epoch_loss_sum) &&
               a->epoch_correct == b->epoch_correct && a->epoch_count == b->epoch_count;
    for (int l = 0; same && l < a->num_layers; l++)
        same = a->fanouts[l] == b->fanouts[l];
    /* "" and "node" are both the node-wise sampler (written as a version 2 record) */
    const char *sa = a->sampler[0] ? a->sampler : "node", *sb = b->sampler[0] ? b->sampler : "node";
    if (!same || strcmp(sa, sb)) fz_fail("the engine record changed in a save/load round trip");
}

static void check_same_model(const tg_model_t *a, const tg_model_t *b)
{
    size_t bytes = a->nparams * sizeof(float);
    if (!SAME(a->cfg, b->cfg) || !SAME(a->opt.cfg, b->opt.cfg) || a->nparams != b->nparams ||
        memcmp(a->params, b->params, bytes) || a->opt.t != b->opt.t || !SAME(a->rng, b->rng) ||
        !a->opt.m != !b->opt.m || !a->opt.v != !b->opt.v ||
        (a->opt.m && memcmp(a->opt.m, b->opt.m, bytes)) ||
        (a->opt.v && memcmp(a->opt.v, b->opt.v, bytes)))
        fz_fail("the model changed in a save/load round trip");
}

/* A loaded checkpoint serialises, and its bytes load back to the same record and model. */
static void round_trip(const tg_ckpt_info_t *info, const tg_model_t *m)
{
    char *buf;
    size_t len;
    if (tg_ckpt_serialize(info, m, &buf, &len) < 0) fz_fail("a loaded checkpoint does not save");
    FILE *f = fmemopen(buf, len, "rb");
    if (!f) abort();
    tg_ckpt_info_t info2;
    tg_model_t *m2 = NULL;
    if (tg_ckpt_read_record(f, "saved", &info2) < 0 || tg_model_load_create(&m2, f, "saved") < 0)
        fz_fail("a saved checkpoint does not load");
    fclose(f);
    free(buf);
    check_same_info(info, &info2);
    check_same_model(m, m2);
    tg_model_destroy(m2);
}

/* ---------------------------------------------------------------- the target */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned flags = data[0];
    const run_cfg_t *c = &cfgs[(flags & 7) % NCFG];
    int best = (flags & 0x20) != 0;
    size_t len = size - 1;
    uint8_t *file = malloc(len + 1);
    if (!file) abort();
    memcpy(file, data + 1, len);
    fix_crcs(file, len, (flags & 8) != 0, (flags & 0x10) != 0);

    const char *run = fz_path(1, "run");
    tg_rmtree(run);
    tg_mkdir_p(run);
    char path[600];
    snprintf(path, sizeof path, "%s/%s", run, best ? TG_CKPT_BEST_NAME : TG_CKPT_NAME);
    fz_write(path, file, len);
    free(file);

    tg_ckpt_info_t info;
    tg_model_t *m;
    if (tg_ckpt_load_model(path, &info, &m) < 0) {
        fz_check_msg();
    } else {
        round_trip(&info, m);
        tg_model_destroy(m);
    }
    if (flags & 0x80) {
        tg_eval_opts_t eo = {.which_last = !best, .threads = 1, .mem_bytes = 64u << 20};
        eo.strategy = "memory";
        tg_eval_result_t er;
        if (tg_eval(dataset, run, TG_FILE_TEST, &eo, &er) < 0) fz_check_msg();
    }
    if ((flags & 0x40) && !best) {
        tg_train_opts_t o;
        run_opts(&o, c, run);
        o.resume = 1;
        tg_train_result_t res;
        if (tg_train(&o, &res) < 0) {
            fz_check_msg();
        } else {
            if (tg_ckpt_load_model(path, &info, &m) < 0)
                fz_fail("a resumed run left a checkpoint that does not load");
            tg_model_destroy(m);
        }
    }
    tg_rmtree(run);
    tg_err_clear();
    return 0;
}
