/* Models: configuration, flat parameter blocks, the activation arena, and the training step
 * (dropout -> layer -> activation per layer, loss, the same in reverse, optimiser). */
#include "nn/nn-impl.h"

#include <stdlib.h>

/* ---------------------------------------------------------------- config */

void tg_model_config_default(tg_model_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->type = TG_MODEL_SAGE;
    cfg->hidden = 256;
    cfg->num_layers = 2;
    cfg->heads = 1;
    cfg->dropout = 0.5f;
    cfg->input_dropout = TG_INPUT_DROPOUT_SAME;
    cfg->activation = TG_ACT_RELU;
    cfg->gin_train_eps = 1;
}

static const char *const type_names[] = {"sage", "gcn", "gat", "gin", "mlp"};

const char *tg_model_type_name(tg_model_type_t t)
{
    return (unsigned)t < 5 ? type_names[t] : "?";
}

int tg_model_type_parse(const char *s, tg_model_type_t *out)
{
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, type_names[i])) {
            *out = (tg_model_type_t)i;
            return 0;
        }
    return tg_err(-EINVAL, "unknown model '%s' (expected sage, gcn, gat, gin or mlp)", s);
}

const char *tg_act_name(tg_act_t a)
{
    return a == TG_ACT_RELU ? "relu" : a == TG_ACT_ELU ? "elu" : "?";
}

int tg_act_parse(const char *s, tg_act_t *out)
{
    if (!strcmp(s, "relu"))
        *out = TG_ACT_RELU;
    else if (!strcmp(s, "elu"))
        *out = TG_ACT_ELU;
    else
        return tg_err(-EINVAL, "unknown activation '%s' (expected relu or elu)", s);
    return 0;
}

int tg_model_config_check(const tg_model_config_t *c)
{
    if ((unsigned)c->type > TG_MODEL_MLP)
        return tg_err(-EINVAL, "model config: unknown model type %d", (int)c->type);
    if (c->in_dim == 0)
        return tg_err(-EINVAL, "model config: in_dim (feature width) must be at least 1");
    if (c->out_dim == 0)
        return tg_err(-EINVAL, "model config: out_dim (classes) must be at least 1");
    if (c->num_layers < 1 || c->num_layers > 64)
        return tg_err(-EINVAL, "model config: num_layers %d out of range 1..64", c->num_layers);
    if (c->num_layers > 1 && c->hidden == 0)
        return tg_err(-EINVAL, "model config: hidden must be at least 1");
    /* widths beyond a dataset's (feat_dim, num_classes <= 2^24) would only make the parameter
     * count's sum over layers wrap */
    if (c->in_dim > TG_MODEL_MAX_WIDTH || c->hidden > TG_MODEL_MAX_WIDTH ||
        c->out_dim > TG_MODEL_MAX_WIDTH)
        return tg_err(-EINVAL, "model config: in_dim %u, hidden %u, out_dim %u: widths above %u",
                      c->in_dim, c->hidden, c->out_dim, TG_MODEL_MAX_WIDTH);
    if (c->type == TG_MODEL_GIN && c->hidden == 0)
        return tg_err(-EINVAL, "model config: GIN needs hidden >= 1 (its MLP's inner width)");
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return tg_err(-EINVAL, "model config: dropout %g not in [0, 1)", (double)c->dropout);
    if (!(c->input_dropout < 1.0f)) /* negative = TG_INPUT_DROPOUT_SAME; NaN fails too */
        return tg_err(-EINVAL,
                      "model config: input dropout %g not in [0, 1) (negative: same as dropout)",
                      (double)c->input_dropout);
    if (!(c->attn_dropout >= 0.0f && c->attn_dropout < 1.0f))
        return tg_err(-EINVAL, "model config: attention dropout %g not in [0, 1)",
                      (double)c->attn_dropout);
    if (c->activation != TG_ACT_RELU && c->activation != TG_ACT_ELU)
        return tg_err(-EINVAL, "model config: unknown activation %d", (int)c->activation);
    if (!isfinite(c->gin_eps)) return tg_err(-EINVAL, "model config: GIN eps is not finite");
    if (c->type == TG_MODEL_GAT) {
        if (c->heads < 1 || c->heads > 1024)
            return tg_err(-EINVAL, "model config: GAT heads %d out of range 1..1024", c->heads);
        if (c->num_layers > 1 && c->hidden % (uint32_t)c->heads)
            return tg_err(-EINVAL,
                          "model config: GAT hidden %u is not a multiple of heads %d (hidden = "
                          "heads x per-head width)",
                          c->hidden, c->heads);
        if (c->gat_concat_last && c->out_dim % (uint32_t)c->heads)
            return tg_err(-EINVAL,
                          "model config: GAT output layer concatenates heads but out_dim %u is "
                          "not a multiple of heads %d",
                          c->out_dim, c->heads);
    }
    return 0;
}

/* ---------------------------------------------------------------- create / destroy */

void tg_model_layer_dims(const tg_model_t *m, int layer, uint32_t *in_dim, uint32_t *out_dim)
{
    if (in_dim) *in_dim = layer == 0 ? m->cfg.in_dim : m->cfg.hidden;
    if (out_dim) *out_dim = layer == m->L - 1 ? m->cfg.out_dim : m->cfg.hidden;
}

void tg_layer_setup(tg_layer_t *ly, const tg_model_config_t *c, int l)
{
    int last = l == c->num_layers - 1;
    memset(ly, 0, sizeof *ly);
    ly->type = c->type;
    ly->in = l == 0 ? c->in_dim : c->hidden;
    ly->out = last ? c->out_dim : c->hidden;
    ly->inner = c->hidden;
    ly->heads = c->type == TG_MODEL_GAT ? c->heads : 1;
    ly->concat = !last || c->gat_concat_last;
    ly->F = ly->concat ? ly->out / (uint32_t)ly->heads : ly->out;
    ly->attn_p = c->attn_dropout;
    ly->train_eps = c->gin_train_eps;
    ly->eps_fixed = c->gin_eps;
}

int tg_model_create(tg_model_t **out, const tg_model_config_t *cfg, uint64_t seed)
{
    *out = NULL;
    int rc = tg_model_config_check(cfg);
    if (rc < 0) return rc;
    tg_model_t *m = calloc(1, sizeof *m);
    if (!m) return tg_err(-ENOMEM, "model: out of memory");
    m->cfg = *cfg;
    if (m->cfg.input_dropout < 0.0f) m->cfg.input_dropout = cfg->dropout;
    m->L = cfg->num_layers;
    size_t L = (size_t)m->L;
    m->layers = calloc(L, sizeof *m->layers);
    m->acts = calloc(L, sizeof *m->acts);
    m->xin = calloc(L, sizeof *m->xin);
    m->xdrop = calloc(L, sizeof *m->xdrop);
    m->mask = calloc(L, sizeof *m->mask);
    m->h = calloc(L, sizeof *m->h);
    m->dh = calloc(L, sizeof *m->dh);
    m->dxin = calloc(L, sizeof *m->dxin);
    if (!m->layers || !m->acts || !m->xin || !m->xdrop || !m->mask || !m->h || !m->dh || !m->dxin) {
        rc = tg_err(-ENOMEM, "model: out of memory");
        goto err;
    }
    size_t n = 0;
    for (int l = 0; l < m->L; l++) {
        tg_layer_setup(&m->layers[l], cfg, l);
        n += tg_layer_bind(&m->layers[l], NULL, NULL);
    }
    m->nparams = n;
    m->params = tg_aligned_alloc(64, n * sizeof(float));
    m->grads = tg_aligned_alloc(64, n * sizeof(float));
    if (!m->params || !m->grads) {
        rc = tg_err(-ENOMEM, "model: cannot allocate %zu parameters", n);
        goto err;
    }
    memset(m->grads, 0, n * sizeof(float));
    tg_rng_t init;
    tg_rng_seed(&init, seed);
    size_t off = 0;
    for (int l = 0; l < m->L; l++) {
        off += tg_layer_bind(&m->layers[l], m->params + off, m->grads + off);
        tg_layer_init(&m->layers[l], cfg->gin_eps, &init);
    }
    /* dropout draws from a stream of its own, so changing dropout never changes the weights */
    tg_rng_seed2(&m->rng, seed, 0xd409u);
    tg_optim_config_t oc;
    tg_optim_config_default(&oc, TG_OPTIM_ADAM);
    if ((rc = tg_optim_init(&m->opt, &oc, n)) < 0) goto err;
    *out = m;
    return 0;
err:
    tg_model_destroy(m);
    return rc;
}

void tg_model_destroy(tg_model_t *m)
{
    if (!m) return;
    tg_optim_destroy(&m->opt);
    free(m->arena.base);
    free(m->params);
    free(m->grads);
    free(m->layers);
    free(m->acts);
    free(m->xin);
    free(m->xdrop);
    free(m->mask);
    free(m->h);
    free(m->dh);
    free(m->dxin);
    free(m);
}

const tg_model_config_t *tg_model_config(const tg_model_t *m)
{
    return &m->cfg;
}

int tg_model_set_optim(tg_model_t *m, const tg_optim_config_t *oc)
{
    tg_optim_t fresh = {0};
    int rc = tg_optim_init(&fresh, oc, m->nparams);
    if (rc < 0) return rc;
    tg_optim_destroy(&m->opt);
    m->opt = fresh;
    return 0;
}

const tg_optim_config_t *tg_model_optim_config(const tg_model_t *m)
{
    return &m->opt.cfg;
}

void tg_model_set_lr(tg_model_t *m, float lr)
{
    m->opt.cfg.lr = lr;
}

void tg_model_set_pool(tg_model_t *m, tg_pool_t *pool)
{
    m->pool = pool;
}

size_t tg_model_param_count(const tg_model_t *m)
{
    return m->nparams;
}

uint64_t tg_model_param_bytes(const tg_model_t *m)
{
    uint64_t per = sizeof(float) * (uint64_t)m->nparams;
    return per * 2 + (m->opt.m ? per : 0) + (m->opt.v ? per : 0);
}

uint64_t tg_model_config_nparams(const tg_model_config_t *cfg)
{
    uint64_t n = 0;
    for (int l = 0; l < cfg->num_layers; l++) {
        tg_layer_t ly;
        tg_layer_setup(&ly, cfg, l);
        n += tg_layer_bind(&ly, NULL, NULL);
    }
    return n;
}

uint64_t tg_model_config_param_bytes(const tg_model_config_t *cfg, const tg_optim_config_t *oc)
{
    if (tg_model_config_check(cfg) < 0) return 0;
    uint64_t n = tg_model_config_nparams(cfg);
    tg_optim_config_t adam;
    if (!oc) {
        tg_optim_config_default(&adam, TG_OPTIM_ADAM);
        oc = &adam;
    }
    uint64_t per = sizeof(float) * n;
    int has_m = oc->type == TG_OPTIM_ADAM || oc->momentum > 0.0f;
    return per * 2 + (has_m ? per : 0) + (oc->type == TG_OPTIM_ADAM ? per : 0);
}

uint64_t tg_model_act_bytes(const tg_model_t *m)
{
    return m->arena.cap;
}

float *tg_model_params(tg_model_t *m)
{
    return m->params;
}

float *tg_model_grads(tg_model_t *m)
{
    return m->grads;
}

uint32_t tg_model_embed_dim(const tg_model_t *m)
{
    return m->L > 1 ? m->cfg.hidden : m->cfg.in_dim;
}

/* ---------------------------------------------------------------- batch checks */

static int check_block(const tg_block_t *blk, const char *what, int l)
{
    if (blk->num_src < blk->num_dst)
        return tg_err(-EINVAL,
                      "%s: block %d has %u sources < %u destinations (dsts must come "
                      "first among the sources)",
                      what, l, blk->num_src, blk->num_dst);
    if (!blk->indptr) return tg_err(-EINVAL, "%s: block %d has no indptr", what, l);
    if (blk->indptr[0] != 0)
        return tg_err(-EINVAL, "%s: block %d: indptr[0] = %llu, expected 0", what, l,
                      (unsigned long long)blk->indptr[0]);
    for (uint32_t i = 0; i < blk->num_dst; i++)
        if (blk->indptr[i + 1] < blk->indptr[i])
            return tg_err(-EINVAL, "%s: block %d: indptr decreases at destination %u", what, l, i);
    if (blk->indptr[blk->num_dst] != blk->num_edges)
        return tg_err(-EINVAL, "%s: block %d: indptr ends at %llu but num_edges is %llu", what, l,
                      (unsigned long long)blk->indptr[blk->num_dst],
                      (unsigned long long)blk->num_edges);
    if (blk->num_edges && !blk->indices)
        return tg_err(-EINVAL, "%s: block %d has edges but no indices", what, l);
    for (uint64_t e = 0; e < blk->num_edges; e++)
        if (blk->indices[e] >= blk->num_src)
            return tg_err(-EINVAL, "%s: block %d: edge %llu names source %u, block has %u", what, l,
                          (unsigned long long)e, blk->indices[e], blk->num_src);
    return 0;
}

int tg_model_check_batch(const tg_model_t *m, const tg_batch_t *b)
{
    if (b->num_layers != m->L)
        return tg_err(-EINVAL, "batch has %d blocks but the model has %d layers", b->num_layers,
                      m->L);
    if (!b->blocks) return tg_err(-EINVAL, "batch has no blocks");
    for (int l = 0; l < m->L; l++) {
        int rc = check_block(&b->blocks[l], "batch", l);
        if (rc < 0) return rc;
        if (b->blocks[l].weights && m->cfg.type != TG_MODEL_GCN)
            return tg_err(-EINVAL,
                          "batch: block %d carries edge weights (a layer-wise sampler's, e.g. "
                          "LADIES), which only GCN uses; this model is %s",
                          l, tg_model_type_name(m->cfg.type));
        if (l + 1 < m->L && b->blocks[l + 1].num_src != b->blocks[l].num_dst)
            return tg_err(-EINVAL,
                          "batch: block %d has %u sources but block %d has %u destinations", l + 1,
                          b->blocks[l + 1].num_src, l, b->blocks[l].num_dst);
    }
    if (b->num_nodes != b->blocks[0].num_src)
        return tg_err(-EINVAL, "batch: num_nodes %u != block 0 sources %u", b->num_nodes,
                      b->blocks[0].num_src);
    if (b->num_seeds != b->blocks[m->L - 1].num_dst)
        return tg_err(-EINVAL, "batch: num_seeds %u != last block's destinations %u", b->num_seeds,
                      b->blocks[m->L - 1].num_dst);
    return 0;
}

/* ---------------------------------------------------------------- arena planning */

/* Dropout rate on layer l's input: the input features' own rate for layer 0. */
static float drop_p(const tg_model_t *m, int l)
{
    return l == 0 ? m->cfg.input_dropout : m->cfg.dropout;
}

static void plan_step(tg_model_t *m, const tg_batch_t *b, int training, int want_dx0,
                      tg_arena_t *ar)
{
    for (int l = 0; l < m->L; l++) {
        const tg_block_t *blk = &b->blocks[l];
        const tg_layer_t *ly = &m->layers[l];
        size_t ns = blk->num_src, nd = blk->num_dst;
        int drop = training && drop_p(m, l) > 0.0f;
        int need_dx = training && (l > 0 || want_dx0);
        m->xdrop[l] = drop ? tg_arena_alloc(ar, ns * ly->in * sizeof(float)) : NULL;
        /* no mask for the input features unless someone wants d loss / d X */
        m->mask[l] = drop && need_dx ? tg_arena_alloc(ar, ns * ly->in) : NULL;
        tg_layer_plan(ly, &m->acts[l], blk, training, need_dx, ar);
        m->h[l] = tg_arena_alloc(ar, nd * ly->out * sizeof(float));
        m->dh[l] = training ? tg_arena_alloc(ar, nd * ly->out * sizeof(float)) : NULL;
        m->dxin[l] = NULL;
        if (need_dx) {
            /* d(xin[l]) shares d(h[l-1])'s buffer: without dropout they are equal, with it the
             * mask is applied in place afterwards (saves an (ns, in) buffer and a pass) */
            m->dxin[l] = l == 0 ? tg_arena_alloc(ar, ns * ly->in * sizeof(float)) : m->dh[l - 1];
        }
    }
    m->dlogits = m->dh[m->L - 1];
}

static int arena_reserve(tg_arena_t *a, size_t need)
{
    if (need <= a->cap) return 0;
    void *p = tg_aligned_alloc(64, need);
    if (!p) {
        char buf[32];
        return tg_err(-ENOMEM, "model: cannot grow the activation arena to %s",
                      tg_fmt_bytes(need, buf, sizeof buf));
    }
    free(a->base);
    a->base = p;
    a->cap = need;
    return 0;
}

static int prepare(tg_model_t *m, const tg_batch_t *b, int training, int want_dx0)
{
    tg_arena_t count = {0};
    plan_step(m, b, training, want_dx0, &count);
    int rc = arena_reserve(&m->arena, count.off);
    if (rc < 0) return rc;
    m->arena.off = 0;
    plan_step(m, b, training, want_dx0, &m->arena);
    return 0;
}

/* ---------------------------------------------------------------- forward / backward */

static void forward(tg_model_t *m, const tg_batch_t *b, const float *X, int training, uint64_t seed)
{
    for (int l = 0; l < m->L; l++) {
        const tg_block_t *blk = &b->blocks[l];
        const tg_layer_t *ly = &m->layers[l];
        const float *src = l == 0 ? X : m->h[l - 1];
        if (m->xdrop[l]) {
            /* layer l's masks come from seed + 2l whether or not other layers drop, so one
             * layer's rate never changes another's masks */
            tg_dropout_forward(m->xdrop[l], m->mask[l], src, blk->num_src, ly->in, drop_p(m, l),
                               seed + 2 * (uint64_t)l, m->pool);
            m->xin[l] = m->xdrop[l];
        } else {
            m->xin[l] = src;
        }
        tg_layer_forward(ly, &m->acts[l], blk, m->xin[l], m->h[l], training,
                         seed + 2 * (uint64_t)l + 1, m->pool);
        if (l < m->L - 1)
            tg_act_forward(m->h[l], (size_t)blk->num_dst * ly->out, m->cfg.activation, m->pool);
    }
}

static void backward(tg_model_t *m, const tg_batch_t *b, float *dX)
{
    memset(m->grads, 0, m->nparams * sizeof(float));
    for (int l = m->L - 1; l >= 0; l--) {
        const tg_block_t *blk = &b->blocks[l];
        const tg_layer_t *ly = &m->layers[l];
        size_t ns = blk->num_src;
        if (m->dxin[l]) memset(m->dxin[l], 0, ns * ly->in * sizeof(float));
        tg_layer_backward(ly, &m->acts[l], blk, m->xin[l], m->dh[l], m->dxin[l], m->pool);
        if (l > 0) {
            float *dprev = m->dh[l - 1]; /* = dxin[l] */
            if (m->xdrop[l]) tg_dropout_scale(dprev, m->mask[l], ns, ly->in, drop_p(m, l), m->pool);
            tg_act_backward(dprev, m->h[l - 1], ns * ly->in, m->cfg.activation, m->pool);
        } else if (dX) {
            if (m->xdrop[0]) {
                memset(dX, 0, ns * ly->in * sizeof(float));
                tg_dropout_backward(dX, m->dxin[0], m->mask[0], ns, ly->in, drop_p(m, 0), m->pool);
            } else {
                memcpy(dX, m->dxin[0], ns * ly->in * sizeof(float));
            }
        }
    }
}

int tg_model_forward_backward(tg_model_t *m, const tg_batch_t *b, const float *X,
                              const int32_t *labels, int training, uint64_t seed, float *dX,
                              tg_step_stats_t *stats)
{
    int rc = tg_model_check_batch(m, b);
    if (rc < 0) return rc;
    int grad = labels != NULL && training;
    if ((rc = prepare(m, b, grad, grad && dX != NULL)) < 0) return rc;
    forward(m, b, X, training, seed);
    if (!labels) return 0;
    tg_step_stats_t st;
    rc = tg_loss_forward_backward(grad ? m->dlogits : NULL, m->h[m->L - 1], labels, b->num_seeds,
                                  m->cfg.out_dim, m->cfg.multi_label, &st);
    if (stats) *stats = st;
    if (rc < 0) return rc;
    if (!grad) return 0;
    if (st.count == 0) {
        memset(m->grads, 0, m->nparams * sizeof(float));
        if (dX) memset(dX, 0, (size_t)b->num_nodes * m->cfg.in_dim * sizeof(float));
        return 0;
    }
    backward(m, b, dX);
    for (size_t k = 0; k < m->nparams; k++)
        if (!isfinite(m->grads[k]))
            return tg_err(-ERANGE, "gradient of parameter %zu is %s (loss %g): diverged, no update",
                          k, isnan(m->grads[k]) ? "NaN" : "infinite", st.loss);
    return 0;
}

int tg_model_train_step(tg_model_t *m, const tg_batch_t *b, const float *X, const int32_t *labels,
                        tg_step_stats_t *stats)
{
    if (!labels) return tg_err(-EINVAL, "train step: no labels");
    uint64_t seed = tg_rng_u64(&m->rng);
    tg_step_stats_t st = {0};
    int rc = tg_model_forward_backward(m, b, X, labels, 1, seed, NULL, &st);
    if (stats) *stats = st;
    if (rc < 0) return rc;
    if (st.count == 0) return 0;
    tg_optim_step(&m->opt, m->params, m->grads, m->pool);
    return 0;
}

int tg_model_train_step_sync(tg_model_t *m, const tg_batch_t *b, const float *X,
                             const int32_t *labels, uint64_t salt, tg_grad_sync_fn sync, void *ctx,
                             tg_step_stats_t *stats)
{
    if (!labels) return tg_err(-EINVAL, "train step: no labels");
    if (!sync) return tg_err(-EINVAL, "train step: no gradient sync function");
    /* the RNG advances once as in tg_model_train_step; the salt only changes this step's masks */
    uint64_t seed = tg_rng_u64(&m->rng) + salt * 0x9E3779B97F4A7C15ull;
    tg_step_stats_t st = {0};
    int rc = tg_model_forward_backward(m, b, X, labels, 1, seed, NULL, &st);
    if (stats) *stats = st;
    /* a failed step's gradients are not this rank's to give: it contributes zeros */
    if (rc < 0) memset(m->grads, 0, m->nparams * sizeof(float));
    int s = sync(ctx, m->grads, m->nparams, rc, rc < 0 ? 0 : st.count);
    if (rc < 0) return rc;
    if (s < 0) return s;
    if (s == TG_GRAD_SKIP) return 0;
    tg_optim_step(&m->opt, m->params, m->grads, m->pool);
    return 0;
}

int tg_model_predict(tg_model_t *m, const tg_batch_t *b, const float *X, float *logits, float *emb)
{
    int rc = tg_model_forward_backward(m, b, X, NULL, 0, 0, NULL, NULL);
    if (rc < 0) return rc;
    size_t n = b->num_seeds;
    memcpy(logits, m->h[m->L - 1], n * m->cfg.out_dim * sizeof(float));
    if (emb) {
        const float *src = m->L > 1 ? m->h[m->L - 2] : X;
        memcpy(emb, src, n * tg_model_embed_dim(m) * sizeof(float));
    }
    return 0;
}

int tg_model_layer_forward(tg_model_t *m, int layer, const tg_block_t *blk, const float *Hin,
                           float *Hout)
{
    return tg_model_layer_forward_deg(m, layer, blk, NULL, Hin, Hout);
}

int tg_model_layer_forward_deg(tg_model_t *m, int layer, const tg_block_t *blk,
                               const uint64_t *src_deg, const float *Hin, float *Hout)
{
    if (layer < 0 || layer >= m->L)
        return tg_err(-EINVAL, "layer %d out of range: the model has %d layers", layer, m->L);
    int rc = check_block(blk, "layer-wise inference", layer);
    if (rc < 0) return rc;
    const tg_layer_t *ly = &m->layers[layer];
    if (blk->weights && ly->type != TG_MODEL_GCN)
        return tg_err(-EINVAL,
                      "layer-wise inference: block of layer %d carries edge weights, which only "
                      "GCN uses; this model is %s",
                      layer, tg_model_type_name(ly->type));
    tg_layer_acts_t acts;
    tg_arena_t count = {0};
    tg_layer_plan(ly, &acts, blk, 0, 0, &count);
    if ((rc = arena_reserve(&m->arena, count.off)) < 0) return rc;
    m->arena.off = 0;
    tg_layer_plan(ly, &acts, blk, 0, 0, &m->arena);
    acts.full_deg = src_deg;
    tg_layer_forward(ly, &acts, blk, Hin, Hout, 0, 0, m->pool);
    if (layer < m->L - 1)
        tg_act_forward(Hout, (size_t)blk->num_dst * ly->out, m->cfg.activation, m->pool);
    return 0;
}
