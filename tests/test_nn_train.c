/* nn training: Adam and SGD against steps computed by hand, the NaN/Inf error path, batches
 * without labels, determinism for a seed, and every model fitting a small batch. */
#include "test_nn_common.h"

/* torch.optim.Adam, written out in double */
TG_TEST(adam_by_hand)
{
    tg_optim_config_t oc;
    tg_optim_config_default(&oc, TG_OPTIM_ADAM);
    oc.lr = 0.1f;
    oc.weight_decay = 0.01f;
    tg_optim_t o;
    TG_CHECK_OK(tg_optim_init(&o, &oc, 3));
    float p[3] = {1.0f, -2.0f, 0.5f};
    double pd[3] = {1.0, -2.0, 0.5}, m[3] = {0}, v[3] = {0};
    const float g[3][3] = {{0.5f, -1.0f, 0.0f}, {0.2f, 3.0f, -0.1f}, {-0.4f, 0.0f, 0.25f}};
    for (int t = 1; t <= 3; t++) {
        tg_optim_step(&o, p, g[t - 1], NULL);
        for (int i = 0; i < 3; i++) {
            double gi = g[t - 1][i] + 0.01 * pd[i];
            m[i] = 0.9 * m[i] + 0.1 * gi;
            v[i] = 0.999 * v[i] + 0.001 * gi * gi;
            double mhat = m[i] / (1 - pow(0.9, t)), vhat = v[i] / (1 - pow(0.999, t));
            pd[i] -= 0.1 * mhat / (sqrt(vhat) + 1e-8);
            TG_CHECK_NEAR(p[i], pd[i], 1e-6);
        }
    }
    TG_CHECK_EQ_U64(o.t, 3);
    tg_optim_destroy(&o);
    /* the first Adam step moves a parameter by lr whatever the gradient's scale */
    TG_CHECK_OK(tg_optim_init(&o, &oc, 1));
    float q = 0.0f, gq = 123.0f;
    tg_optim_step(&o, &q, &gq, NULL);
    TG_CHECK_NEAR(q, -0.1, 1e-6);
    tg_optim_destroy(&o);
}

TG_TEST(sgd_by_hand)
{
    tg_optim_config_t oc;
    tg_optim_config_default(&oc, TG_OPTIM_SGD);
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    oc.weight_decay = 0.01f;
    tg_optim_t o;
    TG_CHECK_OK(tg_optim_init(&o, &oc, 1));
    float p = 1.0f, g = 0.5f;
    /* step 1: g' = 0.5 + 0.01 = 0.51, v = 0.51, p = 1 - 0.051 = 0.949 */
    tg_optim_step(&o, &p, &g, NULL);
    TG_CHECK_NEAR(p, 0.949, 1e-6);
    /* step 2: g' = 0.5 + 0.00949 = 0.50949, v = 0.459 + 0.50949 = 0.96849, p = 0.852151 */
    tg_optim_step(&o, &p, &g, NULL);
    TG_CHECK_NEAR(p, 0.852151, 1e-6);
    tg_optim_destroy(&o);
    /* plain SGD keeps no buffer */
    oc.momentum = 0.0f;
    oc.weight_decay = 0.0f;
    TG_CHECK_OK(tg_optim_init(&o, &oc, 1));
    TG_CHECK(o.m == NULL && o.v == NULL);
    p = 1.0f;
    tg_optim_step(&o, &p, &g, NULL);
    tg_optim_step(&o, &p, &g, NULL);
    TG_CHECK_NEAR(p, 0.9, 1e-6);
    tg_optim_destroy(&o);
    /* bad settings are refused with the field named */
    oc.lr = -1.0f;
    TG_CHECK_ERR(tg_optim_init(&o, &oc, 1), "learning rate");
    tg_optim_config_default(&oc, TG_OPTIM_ADAM);
    oc.beta2 = 1.0f;
    TG_CHECK_ERR(tg_optim_init(&o, &oc, 1), "betas");
    tg_optim_type_t t;
    TG_CHECK_ERR(tg_optim_type_parse("adamw", &t), "expected adam or sgd");
}

typedef struct {
    tg_batch_t b;
    float *X;
    int32_t *y;
} task_t;

/* Random batch whose seed labels follow the argmax of a fixed random linear map of the seed's
 * own features plus its neighbours' mean: learnable by every model (the MLP from the first
 * term). */
static void task_make(task_t *t, uint32_t in_dim, uint32_t classes, int L, tg_rng_t *r)
{
    uint32_t counts[4] = {400, 160, 64, 64}; /* L = 2 uses the first three */
    nt_batch_make(&t->b, L, counts, 6, r);
    t->X = nt_alloc((size_t)t->b.num_nodes * in_dim * 4);
    t->y = nt_alloc(t->b.num_seeds * 4);
    nt_fill(t->X, (size_t)t->b.num_nodes * in_dim, -1, 1, r);
    float *Wt = nt_alloc((size_t)in_dim * classes * 4);
    nt_fill(Wt, (size_t)in_dim * classes, -1, 1, r);
    for (uint32_t i = 0; i < t->b.num_seeds; i++) {
        double best = -INFINITY;
        for (uint32_t c = 0; c < classes; c++) {
            double s = 0;
            for (uint32_t k = 0; k < in_dim; k++)
                s += t->X[(size_t)i * in_dim + k] * Wt[(size_t)k * classes + c];
            if (s > best) {
                best = s;
                t->y[i] = (int32_t)c;
            }
        }
    }
    free(Wt);
}

static void task_free(task_t *t)
{
    tg_batch_free(&t->b);
    free(t->X);
    free(t->y);
}

TG_TEST(models_fit_a_batch)
{
    const tg_model_type_t types[5] = {TG_MODEL_SAGE, TG_MODEL_GCN, TG_MODEL_GAT, TG_MODEL_GIN,
                                      TG_MODEL_MLP};
    for (int k = 0; k < 5; k++) {
        tg_rng_t r;
        tg_rng_seed(&r, 30);
        task_t t;
        task_make(&t, 16, 4, 2, &r);
        tg_model_config_t c;
        tg_model_config_default(&c);
        c.type = types[k];
        c.in_dim = 16;
        c.hidden = 32;
        c.out_dim = 4;
        c.num_layers = 2;
        c.heads = c.type == TG_MODEL_GAT ? 4 : 1;
        c.dropout = 0.1f;
        tg_model_t *m;
        TG_CHECK_OK(tg_model_create(&m, &c, 1));
        tg_optim_config_t oc;
        tg_optim_config_default(&oc, TG_OPTIM_ADAM);
        oc.lr = 0.01f;
        TG_CHECK_OK(tg_model_set_optim(m, &oc));
        tg_step_stats_t st, first = {0};
        for (int s = 0; s < 80; s++) {
            TG_CHECK_OK(tg_model_train_step(m, &t.b, t.X, t.y, &st));
            if (s == 0) first = st;
        }
        float logits[64 * 4];
        TG_CHECK_OK(tg_model_predict(m, &t.b, t.X, logits, NULL));
        tg_step_stats_t ev;
        TG_CHECK_OK(tg_loss_eval(logits, t.y, 64, 4, 0, &ev));
        if (!(ev.loss < 0.5 * first.loss && ev.correct >= 56))
            TG_FAIL("%s: loss %.3f -> %.3f, %llu/64 correct after 80 steps",
                    tg_model_type_name(types[k]), first.loss, ev.loss,
                    (unsigned long long)ev.correct);
        tg_model_destroy(m);
        task_free(&t);
    }
}

TG_TEST(nan_loss_is_an_error)
{
    tg_rng_t r;
    tg_rng_seed(&r, 31);
    task_t t;
    task_make(&t, 8, 3, 2, &r);
    tg_model_config_t c;
    tg_model_config_default(&c);
    c.in_dim = 8;
    c.hidden = 16;
    c.out_dim = 3;
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &c, 2));
    tg_step_stats_t st;
    TG_CHECK_OK(tg_model_train_step(m, &t.b, t.X, t.y, &st));
    size_t n = tg_model_param_count(m);
    float *params = tg_model_params(m);
    float *before = nt_alloc(n * 4), *mom = nt_alloc(n * 4);
    /* a diverged parameter: NaN reaches every logit */
    params[n - 1] = NAN; /* the output bias of class 2 */
    memcpy(before, params, n * 4);
    memcpy(mom, m->opt.m, n * 4);
    uint64_t steps = m->opt.t;
    int rc = tg_model_train_step(m, &t.b, t.X, t.y, &st);
    TG_CHECK(rc == -ERANGE);
    TG_CHECK(strstr(tg_errmsg(), "NaN") != NULL);
    TG_CHECK(!memcmp(before, params, n * 4)); /* bitwise: no update at all */
    TG_CHECK(!memcmp(mom, m->opt.m, n * 4));
    TG_CHECK_EQ_U64(m->opt.t, steps);
    /* infinite input features (a whole row, so dropout cannot hide them): also refused */
    params[n - 1] = 0.0f;
    for (int k = 0; k < 8; k++)
        t.X[k] = INFINITY;
    memcpy(before, params, n * 4);
    rc = tg_model_train_step(m, &t.b, t.X, t.y, &st);
    TG_CHECK(rc == -ERANGE);
    TG_CHECK(!memcmp(before, params, n * 4));
    /* and training goes on once the input is sane */
    for (int k = 0; k < 8; k++)
        t.X[k] = 0.5f;
    TG_CHECK_OK(tg_model_train_step(m, &t.b, t.X, t.y, &st));
    TG_CHECK(isfinite(st.loss));
    free(before);
    free(mom);
    tg_model_destroy(m);
    task_free(&t);
}

TG_TEST(unlabelled_batch)
{
    tg_rng_t r;
    tg_rng_seed(&r, 32);
    task_t t;
    task_make(&t, 8, 3, 2, &r);
    tg_model_config_t c;
    tg_model_config_default(&c);
    c.in_dim = 8;
    c.hidden = 16;
    c.out_dim = 3;
    tg_model_t *m;
    TG_CHECK_OK(tg_model_create(&m, &c, 2));
    for (uint32_t i = 0; i < t.b.num_seeds; i++)
        t.y[i] = -1;
    size_t n = tg_model_param_count(m);
    float *before = nt_alloc(n * 4);
    memcpy(before, tg_model_params(m), n * 4);
    tg_step_stats_t st;
    TG_CHECK_OK(tg_model_train_step(m, &t.b, t.X, t.y, &st));
    TG_CHECK_EQ_U64(st.count, 0);
    TG_CHECK(st.loss == 0.0);
    TG_CHECK(!memcmp(before, tg_model_params(m), n * 4));
    TG_CHECK_EQ_U64(m->opt.t, 0);
    free(before);
    tg_model_destroy(m);
    task_free(&t);
}

TG_TEST(determinism_and_sizes)
{
    tg_rng_t r;
    tg_rng_seed(&r, 33);
    task_t t;
    task_make(&t, 8, 3, 3, &r);
    tg_model_config_t c;
    tg_model_config_default(&c);
    c.type = TG_MODEL_GAT;
    c.heads = 2;
    c.in_dim = 8;
    c.hidden = 16;
    c.out_dim = 3;
    c.num_layers = 3;
    c.attn_dropout = 0.3f;
    tg_model_t *m[3];
    uint64_t seeds[3] = {5, 5, 6};
    for (int k = 0; k < 3; k++) {
        TG_CHECK_OK(tg_model_create(&m[k], &c, seeds[k]));
        for (int s = 0; s < 3; s++)
            TG_CHECK_OK(tg_model_train_step(m[k], &t.b, t.X, t.y, NULL));
    }
    size_t n = tg_model_param_count(m[0]);
    TG_CHECK(!memcmp(tg_model_params(m[0]), tg_model_params(m[1]), n * 4));
    TG_CHECK(memcmp(tg_model_params(m[0]), tg_model_params(m[2]), n * 4) != 0);
    /* parameter count of a 3-layer GAT: W, a_src, a_dst, b per layer */
    size_t want = (8 * 16 + 16 + 16 + 16) + (16 * 16 + 16 + 16 + 16) + (16 * 6 + 6 + 6 + 3);
    TG_CHECK_EQ_U64(n, want);
    TG_CHECK_EQ_U64(tg_model_param_bytes(m[0]), 4 * n * 4); /* params, grads, Adam m and v */
    tg_optim_config_t oc;
    tg_optim_config_default(&oc, TG_OPTIM_SGD);
    TG_CHECK_OK(tg_model_set_optim(m[0], &oc));
    TG_CHECK_EQ_U64(tg_model_param_bytes(m[0]), 3 * n * 4);
    tg_model_set_lr(m[0], 0.5f);
    TG_CHECK(tg_model_optim_config(m[0])->lr == 0.5f);
    TG_CHECK(tg_model_act_bytes(m[0]) > 0);
    for (int k = 0; k < 3; k++)
        tg_model_destroy(m[k]);
    task_free(&t);
}

int main(void)
{
    TG_RUN(adam_by_hand);
    TG_RUN(sgd_by_hand);
    TG_RUN(models_fit_a_batch);
    TG_RUN(nan_loss_is_an_error);
    TG_RUN(unlabelled_batch);
    TG_RUN(determinism_and_sizes);
    return tg_test_done();
}
