/* GAT attention kernels (Velickovic et al. 2018, as PyG GATConv computes them) and the head mean.
 *
 * Forward owns destination rows: scores, edge softmax, attention dropout and the weighted sum of
 * a destination are all computed by one thread. Backward first owns destination rows (softmax
 * backward, giving d z per edge), then source rows through the transposed CSR (gathering into
 * dWh), then columns for the reductions into the attention vectors.
 */
#include "nn/nn-impl.h"

#include <stdlib.h>

#define LEAKY_SLOPE 0.2f

typedef struct {
    float *out, *s_dst, *s_src, *z, *alpha, *alpha_d;
    float *dWh, *da, *dz, *ds_dst, *ds_src;
    const float *dout, *Wh, *a_dst, *a_src, *cz, *calpha, *calpha_d, *cds;
    const tg_block_t *aug;
    const tg_tcsr_t *t;
    int H;
    size_t F;
    float p, scale;
    uint32_t thresh;
    uint64_t seed;
    size_t rows;
} gat_ctx_t;

/* s (rows, H) = per head k: Wh_r^k . a_k */
static void scores_rows(void *vc, size_t r0, size_t r1, int tid)
{
    gat_ctx_t *c = vc;
    size_t F = c->F, HF = (size_t)c->H * F;
    float *s = c->out; /* the ctx field carries the destination array */
    const float *a = c->a_src;
    for (size_t r = r0; r < r1; r++)
        for (int h = 0; h < c->H; h++) {
            const float *w = c->Wh + r * HF + (size_t)h * F;
            const float *ak = a + (size_t)h * F;
            float acc = 0.0f;
            for (size_t f = 0; f < F; f++)
                acc += w[f] * ak[f];
            s[r * (size_t)c->H + (size_t)h] = acc;
        }
}

static void attn_fwd_rows(void *vc, size_t i0, size_t i1, int tid)
{
    gat_ctx_t *c = vc;
    const tg_block_t *aug = c->aug;
    int H = c->H;
    size_t F = c->F, HF = (size_t)H * F;
    for (size_t i = i0; i < i1; i++) {
        uint64_t e0 = aug->indptr[i], e1 = aug->indptr[i + 1];
        for (uint64_t e = e0; e < e1; e++) {
            size_t j = aug->indices[e];
            for (int h = 0; h < H; h++) {
                float v = c->s_dst[i * (size_t)H + (size_t)h] + c->s_src[j * (size_t)H + (size_t)h];
                c->z[e * (size_t)H + (size_t)h] = v > 0.0f ? v : LEAKY_SLOPE * v;
            }
        }
        for (int h = 0; h < H; h++) {
            float mx = -INFINITY;
            for (uint64_t e = e0; e < e1; e++)
                mx = TG_MAX(mx, c->z[e * (size_t)H + (size_t)h]);
            float sum = 0.0f;
            for (uint64_t e = e0; e < e1; e++) {
                float ex = expf(c->z[e * (size_t)H + (size_t)h] - mx);
                c->alpha[e * (size_t)H + (size_t)h] = ex;
                sum += ex;
            }
            float inv = 1.0f / sum; /* sum >= 1: the max term is exp(0) */
            for (uint64_t e = e0; e < e1; e++)
                c->alpha[e * (size_t)H + (size_t)h] *= inv;
        }
        if (c->alpha_d != c->alpha) {
            tg_rng_t rng;
            tg_rng_seed2(&rng, c->seed, i);
            uint64_t bits = 0;
            int left = 0;
            for (uint64_t k = e0 * (size_t)H; k < e1 * (size_t)H; k++) {
                if (left == 0) {
                    bits = tg_rng_u64(&rng);
                    left = 4;
                }
                uint32_t u = (uint32_t)(bits & 0xffffu);
                bits >>= 16;
                left--;
                c->alpha_d[k] = u >= c->thresh ? c->alpha[k] * c->scale : 0.0f;
            }
        }
        float *o = c->out + i * HF;
        memset(o, 0, HF * sizeof(float));
        for (uint64_t e = e0; e < e1; e++) {
            const float *w = c->Wh + (size_t)aug->indices[e] * HF;
            for (int h = 0; h < H; h++) {
                float a = c->alpha_d[e * (size_t)H + (size_t)h];
                float *oh = o + (size_t)h * F;
                const float *wh = w + (size_t)h * F;
                for (size_t f = 0; f < F; f++)
                    oh[f] += a * wh[f];
            }
        }
    }
}

void tg_gat_forward(float *out, float *s_dst, float *s_src, float *z, float *alpha, float *alpha_d,
                    const float *Wh, const float *a_dst, const float *a_src, const tg_block_t *aug,
                    int H, size_t F, float p, uint64_t seed, tg_pool_t *pool)
{
    size_t HF = (size_t)H * F;
    gat_ctx_t c = {.Wh = Wh, .H = H, .F = F};
    c.out = s_src;
    c.a_src = a_src;
    tg_nn_par_for(pool, aug->num_src, HF, scores_rows, &c);
    c.out = s_dst;
    c.a_src = a_dst;
    tg_nn_par_for(pool, aug->num_dst, HF, scores_rows, &c);

    gat_ctx_t d = {.out = out,
                   .s_dst = s_dst,
                   .s_src = s_src,
                   .z = z,
                   .alpha = alpha,
                   .alpha_d = alpha_d,
                   .Wh = Wh,
                   .aug = aug,
                   .H = H,
                   .F = F,
                   .p = p,
                   .seed = seed};
    tg_dropout_params(p, &d.thresh, &d.scale);
    size_t avg = aug->num_dst ? (size_t)(aug->indptr[aug->num_dst] / aug->num_dst) + 1 : 1;
    tg_nn_par_for(pool, aug->num_dst, avg * (HF + 8), attn_fwd_rows, &d);
}

/* Pass 1, per destination i: dz[e,h] = d loss / d z[e,h] (through dropout, softmax and the
 * LeakyReLU) and ds_dst[i,h] = sum_e dz[e,h]. */
static void attn_bwd_dst_rows(void *vc, size_t i0, size_t i1, int tid)
{
    gat_ctx_t *c = vc;
    const tg_block_t *aug = c->aug;
    int H = c->H;
    size_t F = c->F, HF = (size_t)H * F;
    int dropped = c->calpha_d != c->calpha;
    for (size_t i = i0; i < i1; i++) {
        uint64_t e0 = aug->indptr[i], e1 = aug->indptr[i + 1];
        const float *g = c->dout + i * HF;
        for (uint64_t e = e0; e < e1; e++) {
            const float *w = c->Wh + (size_t)aug->indices[e] * HF;
            for (int h = 0; h < H; h++) {
                const float *gh = g + (size_t)h * F, *wh = w + (size_t)h * F;
                float dad = 0.0f;
                for (size_t f = 0; f < F; f++)
                    dad += gh[f] * wh[f];
                size_t k = e * (size_t)H + (size_t)h;
                if (dropped) dad = c->calpha_d[k] != 0.0f ? dad * c->scale : 0.0f;
                c->dz[k] = dad; /* d alpha for now */
            }
        }
        for (int h = 0; h < H; h++) {
            float S = 0.0f;
            for (uint64_t e = e0; e < e1; e++) {
                size_t k = e * (size_t)H + (size_t)h;
                S += c->calpha[k] * c->dz[k];
            }
            float ds = 0.0f;
            for (uint64_t e = e0; e < e1; e++) {
                size_t k = e * (size_t)H + (size_t)h;
                float de = c->calpha[k] * (c->dz[k] - S);
                float dzv = c->cz[k] > 0.0f ? de : LEAKY_SLOPE * de;
                c->dz[k] = dzv;
                ds += dzv;
            }
            c->ds_dst[i * (size_t)H + (size_t)h] = ds;
        }
    }
}

/* Pass 2, per source j: dWh_j = sum_e alpha_d[e] dout_i + ds_src_j a_src (+ ds_dst_j a_dst when
 * j is a destination too), ds_src[j,h] = sum_e dz[e,h]. */
static void attn_bwd_src_rows(void *vc, size_t j0, size_t j1, int tid)
{
    gat_ctx_t *c = vc;
    const tg_tcsr_t *t = c->t;
    int H = c->H;
    size_t F = c->F, HF = (size_t)H * F;
    uint32_t nd = c->aug->num_dst;
    for (size_t j = j0; j < j1; j++) {
        float *d = c->dWh + j * HF;
        memset(d, 0, HF * sizeof(float));
        float *dss = c->ds_src + j * (size_t)H;
        for (int h = 0; h < H; h++)
            dss[h] = 0.0f;
        for (uint64_t q = t->indptr[j]; q < t->indptr[j + 1]; q++) {
            uint64_t e = t->eid[q];
            const float *g = c->dout + (size_t)t->dst[q] * HF;
            for (int h = 0; h < H; h++) {
                float a = c->calpha_d[e * (size_t)H + (size_t)h];
                float *dh = d + (size_t)h * F;
                const float *gh = g + (size_t)h * F;
                for (size_t f = 0; f < F; f++)
                    dh[f] += a * gh[f];
                dss[h] += c->dz[e * (size_t)H + (size_t)h];
            }
        }
        for (int h = 0; h < H; h++) {
            float *dh = d + (size_t)h * F;
            const float *as = c->a_src + (size_t)h * F, *ad = c->a_dst + (size_t)h * F;
            float sd = j < nd ? c->ds_dst[j * (size_t)H + (size_t)h] : 0.0f;
            for (size_t f = 0; f < F; f++)
                dh[f] += dss[h] * as[f] + sd * ad[f];
        }
    }
}

/* Pass 3, per column (h, f): da[h,f] += sum_r ds[r,h] Wh[r, h*F + f] over rows r < c->rows. */
static void attn_bwd_vec_cols(void *vc, size_t c0, size_t c1, int tid)
{
    gat_ctx_t *c = vc;
    int H = c->H;
    size_t F = c->F, HF = (size_t)H * F;
    float part[256];
    for (size_t cb = c0; cb < c1; cb += 256) {
        size_t ce = TG_MIN(c1, cb + 256);
        for (size_t k = cb; k < ce; k++)
            part[k - cb] = 0.0f;
        for (size_t r = 0; r < c->rows; r++) {
            const float *w = c->Wh + r * HF;
            const float *ds = c->cds + r * (size_t)H;
            for (size_t k = cb; k < ce; k++)
                part[k - cb] += ds[k / F] * w[k];
        }
        for (size_t k = cb; k < ce; k++)
            c->da[k] += part[k - cb];
    }
}

void tg_gat_backward(float *dWh, float *da_dst, float *da_src, float *dz, float *ds_dst,
                     float *ds_src, const float *dout, const float *Wh, const float *a_dst,
                     const float *a_src, const float *z, const float *alpha, const float *alpha_d,
                     const tg_block_t *aug, const tg_tcsr_t *t, int H, size_t F, float p,
                     tg_pool_t *pool)
{
    size_t HF = (size_t)H * F;
    gat_ctx_t c = {.dWh = dWh,
                   .dz = dz,
                   .ds_dst = ds_dst,
                   .ds_src = ds_src,
                   .dout = dout,
                   .Wh = Wh,
                   .a_dst = a_dst,
                   .a_src = a_src,
                   .cz = z,
                   .calpha = alpha,
                   .calpha_d = alpha_d,
                   .aug = aug,
                   .t = t,
                   .H = H,
                   .F = F,
                   .p = p};
    tg_dropout_params(p, &c.thresh, &c.scale);
    size_t avg = aug->num_dst ? (size_t)(aug->indptr[aug->num_dst] / aug->num_dst) + 1 : 1;
    tg_nn_par_for(pool, aug->num_dst, avg * (HF + 8), attn_bwd_dst_rows, &c);
    size_t avg_s = aug->num_src ? (size_t)(aug->indptr[aug->num_dst] / aug->num_src) + 1 : 1;
    tg_nn_par_for(pool, aug->num_src, avg_s * HF, attn_bwd_src_rows, &c);

    c.da = da_dst;
    c.cds = ds_dst;
    c.rows = aug->num_dst;
    tg_nn_par_for(pool, HF, c.rows, attn_bwd_vec_cols, &c);
    c.da = da_src;
    c.cds = ds_src;
    c.rows = aug->num_src;
    tg_nn_par_for(pool, HF, c.rows, attn_bwd_vec_cols, &c);
}

/* ---------------------------------------------------------------- head mean */

typedef struct {
    float *y;
    const float *x;
    size_t F;
    int H;
} hm_ctx_t;

static void hm_fwd_rows(void *vc, size_t r0, size_t r1, int tid)
{
    hm_ctx_t *c = vc;
    size_t F = c->F, HF = F * (size_t)c->H;
    float inv = 1.0f / (float)c->H;
    for (size_t r = r0; r < r1; r++) {
        float *y = c->y + r * F;
        const float *x = c->x + r * HF;
        memcpy(y, x, F * sizeof(float));
        for (int h = 1; h < c->H; h++)
            for (size_t f = 0; f < F; f++)
                y[f] += x[(size_t)h * F + f];
        for (size_t f = 0; f < F; f++)
            y[f] *= inv;
    }
}

static void hm_bwd_rows(void *vc, size_t r0, size_t r1, int tid)
{
    hm_ctx_t *c = vc;
    size_t F = c->F, HF = F * (size_t)c->H;
    float inv = 1.0f / (float)c->H;
    for (size_t r = r0; r < r1; r++)
        for (int h = 0; h < c->H; h++)
            for (size_t f = 0; f < F; f++)
                c->y[r * HF + (size_t)h * F + f] = c->x[r * F + f] * inv;
}

void tg_head_mean_forward(float *out, const float *x, size_t n, int H, size_t F, tg_pool_t *pool)
{
    hm_ctx_t c = {out, x, F, H};
    tg_nn_par_for(pool, n, F * (size_t)H, hm_fwd_rows, &c);
}

void tg_head_mean_backward(float *dx, const float *dout, size_t n, int H, size_t F, tg_pool_t *pool)
{
    hm_ctx_t c = {dx, dout, F, H};
    tg_nn_par_for(pool, n, F * (size_t)H, hm_bwd_rows, &c);
}
