/* Optimisers over one flat parameter block: Adam and SGD with momentum, following
 * torch.optim.Adam / torch.optim.SGD (weight decay added to the gradient, dampening 0). */
#include "nn/nn-impl.h"

#include <stdlib.h>

void tg_optim_config_default(tg_optim_config_t *oc, tg_optim_type_t type)
{
    memset(oc, 0, sizeof *oc);
    oc->type = type;
    oc->beta1 = 0.9f;
    oc->beta2 = 0.999f;
    oc->eps = 1e-8f;
    if (type == TG_OPTIM_SGD) {
        oc->lr = 1e-2f;
        oc->momentum = 0.9f;
    } else {
        oc->lr = 1e-3f;
    }
}

const char *tg_optim_type_name(tg_optim_type_t t)
{
    return t == TG_OPTIM_ADAM ? "adam" : t == TG_OPTIM_SGD ? "sgd" : "?";
}

int tg_optim_type_parse(const char *s, tg_optim_type_t *out)
{
    if (!strcmp(s, "adam"))
        *out = TG_OPTIM_ADAM;
    else if (!strcmp(s, "sgd"))
        *out = TG_OPTIM_SGD;
    else
        return tg_err(-EINVAL, "unknown optimiser '%s' (expected adam or sgd)", s);
    return 0;
}

int tg_optim_config_check(const tg_optim_config_t *cfg)
{
    if (cfg->type != TG_OPTIM_ADAM && cfg->type != TG_OPTIM_SGD)
        return tg_err(-EINVAL, "optimiser: unknown type %d", (int)cfg->type);
    if (!(cfg->lr >= 0.0f) || !isfinite(cfg->lr))
        return tg_err(-EINVAL, "optimiser: learning rate %g must be a finite number >= 0",
                      (double)cfg->lr);
    if (!(cfg->weight_decay >= 0.0f) || !isfinite(cfg->weight_decay))
        return tg_err(-EINVAL, "optimiser: weight decay %g must be a finite number >= 0",
                      (double)cfg->weight_decay);
    if (cfg->type == TG_OPTIM_ADAM) {
        if (!(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f) ||
            !(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f))
            return tg_err(-EINVAL, "optimiser: Adam betas %g, %g must be in [0, 1)",
                          (double)cfg->beta1, (double)cfg->beta2);
        if (!(cfg->eps > 0.0f))
            return tg_err(-EINVAL, "optimiser: Adam eps %g must be > 0", (double)cfg->eps);
    } else if (!(cfg->momentum >= 0.0f && cfg->momentum < 1.0f)) {
        return tg_err(-EINVAL, "optimiser: SGD momentum %g must be in [0, 1)",
                      (double)cfg->momentum);
    }
    return 0;
}

int tg_optim_init(tg_optim_t *o, const tg_optim_config_t *cfg, size_t n)
{
    memset(o, 0, sizeof *o);
    int rc = tg_optim_config_check(cfg);
    if (rc < 0) return rc;
    o->cfg = *cfg;
    o->n = n;
    size_t bytes = (n ? n : 1) * sizeof(float);
    int need_m = cfg->type == TG_OPTIM_ADAM || cfg->momentum > 0.0f;
    if (need_m && !(o->m = tg_aligned_alloc(64, bytes))) goto nomem;
    if (cfg->type == TG_OPTIM_ADAM && !(o->v = tg_aligned_alloc(64, bytes))) goto nomem;
    if (o->m) memset(o->m, 0, bytes);
    if (o->v) memset(o->v, 0, bytes);
    return 0;
nomem:
    tg_optim_destroy(o);
    return tg_err(-ENOMEM, "optimiser: cannot allocate state for %zu parameters", n);
}

void tg_optim_destroy(tg_optim_t *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

typedef struct {
    tg_optim_t *o;
    float *p;
    const float *g;
    float step_size, inv_bc2_sqrt;
} optim_ctx_t;

static void adam_range(void *vc, size_t i0, size_t i1, int tid)
{
    optim_ctx_t *c = vc;
    const tg_optim_config_t *k = &c->o->cfg;
    float b1 = k->beta1, b2 = k->beta2, wd = k->weight_decay, eps = k->eps;
    float *m = c->o->m, *v = c->o->v, *p = c->p;
    for (size_t i = i0; i < i1; i++) {
        float g = c->g[i] + wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        /* torch: denom = sqrt(v) / sqrt(1 - b2^t) + eps; p -= lr / (1 - b1^t) * m / denom */
        float denom = sqrtf(v[i]) * c->inv_bc2_sqrt + eps;
        p[i] -= c->step_size * m[i] / denom;
    }
}

static void sgd_range(void *vc, size_t i0, size_t i1, int tid)
{
    optim_ctx_t *c = vc;
    const tg_optim_config_t *k = &c->o->cfg;
    float wd = k->weight_decay, mu = k->momentum, lr = k->lr;
    float *m = c->o->m, *p = c->p;
    for (size_t i = i0; i < i1; i++) {
        float g = c->g[i] + wd * p[i];
        if (m) {
            /* torch keeps buf = g on the first step; with a zeroed buffer mu * 0 + g is the same */
            m[i] = mu * m[i] + g;
            g = m[i];
        }
        p[i] -= lr * g;
    }
}

void tg_optim_step(tg_optim_t *o, float *p, const float *g, tg_pool_t *pool)
{
    optim_ctx_t c = {.o = o, .p = p, .g = g};
    o->t++;
    if (o->cfg.type == TG_OPTIM_ADAM) {
        double bc1 = 1.0 - pow((double)o->cfg.beta1, (double)o->t);
        double bc2 = 1.0 - pow((double)o->cfg.beta2, (double)o->t);
        c.step_size = (float)((double)o->cfg.lr / bc1);
        c.inv_bc2_sqrt = (float)(1.0 / sqrt(bc2));
        tg_nn_par_for(pool, o->n, 8, adam_range, &c);
    } else {
        tg_nn_par_for(pool, o->n, 4, sgd_range, &c);
    }
}
