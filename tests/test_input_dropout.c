/* Input dropout (tg_model_config_t.input_dropout, train --input-dropout): the config's default and
 * range, the input features left alone while layers 1.. still drop, the masks and checkpoints of
 * the default unchanged, the checkpoint format versions 1 and 2, and the train flag. */
#include "test_engine_common.h"
#include "test_nn_common.h"

static const tg_model_type_t all_types[5] = {TG_MODEL_SAGE, TG_MODEL_GCN, TG_MODEL_GAT,
                                             TG_MODEL_GIN, TG_MODEL_MLP};

static tg_model_config_t cfg_of(tg_model_type_t type, int layers, float dropout, float input)
{
    tg_model_config_t c;
    tg_model_config_default(&c);
    c.type = type;
    c.in_dim = 12;
    c.hidden = 16;
    c.out_dim = 4;
    c.num_layers = layers;
    c.heads = type == TG_MODEL_GAT ? 2 : 1;
    c.dropout = dropout;
    c.input_dropout = input;
    return c;
}

typedef struct {
    tg_batch_t b;
    float *X;
    int32_t *y;
} task_t;

static void task_make(task_t *t, int layers, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed(&r, seed);
    uint32_t counts[4] = {90, 40, 15, 6};
    nt_batch_make(&t->b, layers, counts, 5, &r);
    t->X = nt_alloc(90 * 12 * 4);
    t->y = nt_alloc(40 * 4); /* the seeds of 1 layer (40) or 2 (15) */
    nt_fill(t->X, 90 * 12, -1, 1, &r);
    for (uint32_t i = 0; i < t->b.num_seeds; i++)
        t->y[i] = (int32_t)tg_rng_below(&r, 4);
}

static void task_free(task_t *t)
{
    tg_batch_free(&t->b);
    free(t->X);
    free(t->y);
}

TG_TEST(config_default_and_range)
{
    tg_model_config_t c;
    tg_model_config_default(&c);
    TG_CHECK(c.input_dropout == TG_INPUT_DROPOUT_SAME);
    c = cfg_of(TG_MODEL_SAGE, 2, 0.3f, TG_INPUT_DROPOUT_SAME);
    TG_CHECK_OK(tg_model_config_check(&c));
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &c, 1));
    TG_CHECK(tg_model_config(m)->input_dropout == 0.3f); /* resolved at create */
    tg_model_destroy(m);
    c.input_dropout = 0.0f;
    TG_CHECK_OK(tg_model_create(&m, &c, 1));
    TG_CHECK(tg_model_config(m)->input_dropout == 0.0f && tg_model_config(m)->dropout == 0.3f);
    tg_model_destroy(m);
    c.input_dropout = 1.0f;
    TG_CHECK_ERR(tg_model_config_check(&c), "input dropout 1 not in [0, 1)");
    c.input_dropout = NAN;
    TG_CHECK_ERR(tg_model_create(&m, &c, 1), "input dropout");
    TG_CHECK(m == NULL);
}

/* One training-mode forward + backward with a fixed dropout seed. */
static void run(tg_model_t *m, task_t *t)
{
    tg_step_stats_t st;
    TG_CHECK_OK(tg_model_forward_backward(m, &t->b, t->X, t->y, 1, 77, NULL, &st));
}

/* A 1-layer model with input dropout 0 and dropout 0.5 computes exactly the no-dropout model in
 * training mode (layer 0 reads X itself); every model type. */
TG_TEST(first_layer_sees_x)
{
    task_t t;
    task_make(&t, 1, 3);
    for (int k = 0; k < 5; k++) {
        tg_model_config_t c = cfg_of(all_types[k], 1, 0.5f, 0.0f), z = c;
        z.dropout = 0.0f;
        tg_model_t *a, *n;
        TG_CHECK_OK(tg_model_create(&a, &c, 5));
        TG_CHECK_OK(tg_model_create(&n, &z, 5)); /* dropout does not change the weights */
        run(a, &t);
        run(n, &t);
        TG_CHECK(a->xin[0] == t.X && a->xdrop[0] == NULL);
        size_t lbytes = (size_t)t.b.num_seeds * c.out_dim * 4;
        if (memcmp(a->h[0], n->h[0], lbytes) || memcmp(a->grads, n->grads, a->nparams * 4))
            TG_FAIL("%s: input dropout 0 differs from no dropout", tg_model_type_name(c.type));
        /* and input dropout 0.5 does drop the features */
        tg_model_t *d;
        c.input_dropout = 0.5f;
        TG_CHECK_OK(tg_model_create(&d, &c, 5));
        run(d, &t);
        TG_CHECK(d->xdrop[0] != NULL);
        if (!memcmp(d->h[0], n->h[0], lbytes))
            TG_FAIL("%s: input dropout 0.5 left the logits unchanged", tg_model_type_name(c.type));
        tg_model_destroy(a);
        tg_model_destroy(n);
        tg_model_destroy(d);
    }
    task_free(&t);
}

/* Two layers, dropout 0.5: input dropout 0 leaves X alone but still drops layer 1's input, with
 * the very mask the default (input dropout 0.5) draws there. */
TG_TEST(between_layers_still_drop)
{
    task_t t;
    task_make(&t, 2, 4);
    for (int k = 0; k < 5; k++) {
        tg_model_config_t c = cfg_of(all_types[k], 2, 0.5f, 0.0f), s = c, z = c;
        s.input_dropout = TG_INPUT_DROPOUT_SAME;
        z.dropout = 0.0f;
        tg_model_t *a, *def, *n;
        TG_CHECK_OK(tg_model_create(&a, &c, 6));
        TG_CHECK_OK(tg_model_create(&def, &s, 6));
        TG_CHECK_OK(tg_model_create(&n, &z, 6));
        run(a, &t);
        run(def, &t);
        run(n, &t);
        const char *name = tg_model_type_name(c.type);
        TG_CHECK(a->xin[0] == t.X && a->xdrop[1] != NULL && def->xdrop[0] != NULL);
        /* layer 0 of a = layer 0 without dropout (hidden activations, 40 dsts x 16) */
        if (memcmp(a->h[0], n->h[0], 40 * 16 * 4))
            TG_FAIL("%s: layer 0 differs from the no-dropout model", name);
        if (!memcmp(a->h[1], n->h[1], 15 * 4 * 4))
            TG_FAIL("%s: layer 1's input was not dropped", name);
        if (memcmp(a->mask[1], def->mask[1], 40 * 16))
            TG_FAIL("%s: layer 1's mask depends on the input dropout rate", name);
        tg_model_destroy(a);
        tg_model_destroy(def);
        tg_model_destroy(n);
    }
    task_free(&t);
}

static void train_and_save(const tg_model_config_t *c, task_t *t, const char *path)
{
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, c, 9));
    for (int s = 0; s < 3; s++)
        TG_CHECK_OK(tg_model_train_step(m, &t->b, t->X, t->y, NULL));
    TG_CHECK_OK(tg_model_save_path(m, path));
    tg_model_destroy(m);
}

static uint32_t version_of(const char *data)
{
    uint32_t v;
    memcpy(&v, data + 8, 4);
    return v;
}

/* The default (input dropout = dropout, left to the sentinel or given) trains and saves byte for
 * byte alike, as format version 1 - the file builds before input dropout wrote. A different
 * input dropout is version 2 and round-trips; version 1 reads as input dropout = dropout. */
TG_TEST(checkpoint_versions)
{
    const char *dir = tg_test_tmpdir("input_dropout");
    char p_same[4200], p_given[4200], p_v2[4200], bad[4200];
    snprintf(p_same, sizeof p_same, "%s/same.ckpt", dir);
    snprintf(p_given, sizeof p_given, "%s/given.ckpt", dir);
    snprintf(p_v2, sizeof p_v2, "%s/v2.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
    task_t t;
    task_make(&t, 2, 5);
    tg_model_config_t c = cfg_of(TG_MODEL_SAGE, 2, 0.5f, TG_INPUT_DROPOUT_SAME);
    train_and_save(&c, &t, p_same);
    c.input_dropout = 0.5f;
    train_and_save(&c, &t, p_given);
    c.input_dropout = 0.0f;
    train_and_save(&c, &t, p_v2);
    char *d1, *d2, *d3;
    size_t n1, n2, n3;
    TG_CHECK_OK(tg_read_file(p_same, &d1, &n1));
    TG_CHECK_OK(tg_read_file(p_given, &d2, &n2));
    TG_CHECK_OK(tg_read_file(p_v2, &d3, &n3));
    TG_CHECK(n1 == n2 && !memcmp(d1, d2, n1));
    TG_CHECK(version_of(d1) == 1 && version_of(d3) == 2 && n3 == n1 + 4);

    /* version 1: input dropout = dropout */
    tg_model_t *m;
    TG_CHECK_OK(tg_model_load_create_path(&m, p_same));
    if (m) TG_CHECK(tg_model_config(m)->input_dropout == 0.5f);
    tg_model_destroy(m);
    /* version 2 round trip, and its parameters are those the training left */
    TG_CHECK_OK(tg_model_load_create_path(&m, p_v2));
    if (m) {
        TG_CHECK(tg_model_config(m)->input_dropout == 0.0f && tg_model_config(m)->dropout == 0.5f);
        tg_model_t *ref;
        TG_CHECK_OK(tg_model_create(&ref, &c, 9));
        for (int s = 0; s < 3; s++)
            TG_CHECK_OK(tg_model_train_step(ref, &t.b, t.X, t.y, NULL));
        TG_CHECK(!memcmp(tg_model_params(ref), tg_model_params(m), m->nparams * 4));
        tg_model_destroy(ref);
        tg_model_destroy(m);
    }
    /* input dropout is a training choice: loading into a model with another rate keeps its own */
    tg_model_config_t other = c;
    other.input_dropout = 0.25f;
    TG_CHECK_OK(tg_model_create(&m, &other, 1));
    TG_CHECK_OK(tg_model_load_path(m, p_v2));
    TG_CHECK_OK(tg_model_load_path(m, p_same));
    TG_CHECK(tg_model_config(m)->input_dropout == 0.25f);

    /* a damaged version 2 field: the CRC catches a flipped bit; a negative or out-of-range rate
     * with a matching CRC is refused by name */
    const size_t at = 8 + 4 + 10 * 4 + 3 * 4; /* after gin_eps */
    float f;
    memcpy(&f, d3 + at, 4);
    TG_CHECK(f == 0.0f);
    const float wrong[2] = {-0.5f, 1.5f};
    for (int k = 0; k < 2; k++) {
        char *cp = nt_alloc(n3);
        memcpy(cp, d3, n3);
        memcpy(cp + at, &wrong[k], 4);
        uint32_t crc = tg_crc32(0, cp, n3 - 4);
        memcpy(cp + n3 - 4, &crc, 4);
        TG_CHECK_OK(tg_write_file_atomic(bad, cp, n3));
        TG_CHECK_ERR(tg_model_load_path(m, bad), "corrupt checkpoint header");
        free(cp);
    }
    d3[at + 3] ^= 1; /* 0.0f becomes a tiny positive number: only the CRC tells */
    TG_CHECK_OK(tg_write_file_atomic(bad, d3, n3));
    TG_CHECK_ERR(tg_model_load_path(m, bad), "checksum mismatch");
    /* a version this build does not know, and a version 2 file cut in its header */
    uint32_t v3 = 3;
    memcpy(d3 + 8, &v3, 4);
    TG_CHECK_OK(tg_write_file_atomic(bad, d3, n3));
    TG_CHECK_ERR(tg_model_load_path(m, bad), "format version 3, this build reads versions 1..2");
    v3 = 2;
    memcpy(d3 + 8, &v3, 4);
    TG_CHECK_OK(tg_write_file_atomic(bad, d3, at + 2));
    TG_CHECK_ERR(tg_model_load_path(m, bad), "truncated in header");
    TG_CHECK(tg_model_config(m)->input_dropout == 0.25f);
    tg_model_destroy(m);
    free(d1);
    free(d2);
    free(d3);
    task_free(&t);
    tg_rmtree(dir);
}

/* train --input-dropout: validated; given as the --dropout value it is the default (same
 * checkpoint bytes); 0 trains another model, whose run eval reads back. */
TG_TEST(train_flag)
{
    char root[4000], ds[4200], run[3][4300], ck[2][4400];
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("input_dropout_cli"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    synth_write(ds, &so);
    const char *extra[3] = {"", "--input-dropout 0.5", "--input-dropout 0"};
    for (int k = 0; k < 3; k++) {
        snprintf(run[k], sizeof run[k], "%s/run%d", root, k);
        TG_CHECK(tg_test_cli(NULL,
                             "train %s --out %s --hidden 16 --fanouts 5,5 --batch-size 64 "
                             "--epochs 1 --dropout 0.5 --threads 1 %s",
                             ds, run[k], extra[k]) == 0);
    }
    snprintf(ck[0], sizeof ck[0], "%s/checkpoint.bin", run[0]);
    snprintf(ck[1], sizeof ck[1], "%s/checkpoint.bin", run[1]);
    TG_CHECK(tg_test_same_file(ck[0], ck[1]));
    snprintf(ck[1], sizeof ck[1], "%s/checkpoint.bin", run[2]);
    TG_CHECK(!tg_test_same_file(ck[0], ck[1]));
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "eval %s --checkpoint %s --threads 1", ds, run[2]) == 0);
    TG_CHECK(out && strstr(out, "accuracy"));
    free(out);
    out = NULL;
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/bad --input-dropout 1", ds, root) != 0);
    TG_CHECK(out && strstr(out, "--input-dropout must be in [0, 1), got 1"));
    free(out);
    tg_rmtree(root);
}

int main(void)
{
    TG_RUN(config_default_and_range);
    TG_RUN(first_layer_sees_x);
    TG_RUN(between_layers_still_drop);
    TG_RUN(checkpoint_versions);
    TG_RUN(train_flag);
    return tg_test_done();
}
