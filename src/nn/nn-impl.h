/* nn-impl.h - private seams of the neural engine: arena, kernels, layers, the model struct.
 *
 * Conventions (llm.c style): every op is a *_forward / *_backward pair over raw row-major float
 * buffers whose shapes are written beside them; backward functions ACCUMULATE (+=) into
 * parameter gradients and into dinp unless the comment says "overwrites". Kernels split rows
 * over a tg_pool_t so that each output row (or, for reductions over rows, each output column)
 * is computed by exactly one thread in a fixed order: results are bit-identical for any thread
 * count. Tests include this header to check every op on its own.
 */
#ifndef TIERGNN_NN_IMPL_H
#define TIERGNN_NN_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tiergnn/graph.h"
#include "tiergnn/nn.h"
#include "tiergnn/util.h"

/* ---------------------------------------------------------------- arena */

/* A bump allocator over one block. Planning runs twice: first with base == NULL, which only
 * measures (every pointer handed out is NULL), then over a block of the measured size. So the
 * activations of a step are laid out once, and the block grows only when a larger batch comes. */
typedef struct tg_arena {
    char *base;
    size_t cap, off;
} tg_arena_t;

static inline void *tg_arena_alloc(tg_arena_t *a, size_t bytes)
{
    size_t o = (a->off + 63) & ~(size_t)63; /* 64-byte aligned rows for SIMD and no false sharing */
    a->off = o + bytes;
    return a->base ? a->base + o : NULL;
}

/* ---------------------------------------------------------------- small helpers */

/* f16 -> f32 without depending on data/ (IEEE half: 1 sign, 5 exponent, 10 mantissa bits). */
static inline float tg_nn_f16(uint16_t h)
{
    uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (e == 0) {
        float f = ldexpf((float)mant, -24); /* zero or subnormal */
        return s ? -f : f;
    }
    if (e == 31)
        bits = s | 0x7f800000u | (mant << 13); /* inf / nan */
    else
        bits = s | ((e + 112u) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Runs fn over [0, n) on the pool, or inline when the job is too small to pay for waking threads
 * (work = n * cost_per_item, in rough flops, below tg_nn_par_min_work). Splits never change
 * results: rows are owned. Tests set tg_nn_par_min_work to 0 to exercise the split on small
 * inputs. */
extern size_t tg_nn_par_min_work;
void tg_nn_par_for(tg_pool_t *pool, size_t n, size_t cost_per_item, tg_pool_fn fn, void *ctx);

/* ---------------------------------------------------------------- dense ops */

/* C (M, N) = op(A) (M, K) x op(B) (K, N) + beta C, row-major, through single-threaded
 * cblas_sgemm calls on pieces of a fixed shape-determined split (see kernels.c), so the result
 * does not depend on the pool's size. scratch: NULL, or tg_gemm_scratch_floats(...) floats, which
 * lets A^T B with a long K run in parallel (weight gradients); without it that case runs as one
 * call. Handles empty shapes (K == 0 scales C by beta). */
size_t tg_gemm_scratch_floats(int trans_a, int trans_b, size_t M, size_t N, size_t K);
void tg_gemm(int trans_a, int trans_b, size_t M, size_t N, size_t K, const float *A, size_t lda,
             const float *B, size_t ldb, float beta, float *C, size_t ldc, float *scratch,
             tg_pool_t *pool);

/* Y (n, out) = X (n, in) @ W (in, out) + b (out) (b may be NULL); accumulate: Y += X @ W (no b). */
void tg_linear_forward(float *Y, const float *X, const float *W, const float *b, size_t n,
                       size_t in, size_t out, int accumulate, tg_pool_t *pool);
/* dX (n, in) += dY @ W^T (dX may be NULL); dW (in, out) += X^T @ dY (dW may be NULL);
 * db (out) += column sums of dY (db may be NULL). scratch: as tg_gemm's for X^T dY. */
void tg_linear_backward(float *dX, float *dW, float *db, const float *dY, const float *X,
                        const float *W, size_t n, size_t in, size_t out, float *scratch,
                        tg_pool_t *pool);
/* acc (cols) += column sums of A (rows, cols); each thread owns a range of columns. */
void tg_colsum_acc(float *acc, const float *A, size_t rows, size_t cols, tg_pool_t *pool);
/* Y (n, dim) += b (dim) on every row. */
void tg_bias_add(float *Y, const float *b, size_t n, size_t dim, tg_pool_t *pool);
/* y (n, dim) += alpha x (n, dim). */
void tg_axpy(float *y, float alpha, const float *x, size_t n, size_t dim, tg_pool_t *pool);

/* Activations, in place on y (n): forward turns pre-activations into activations; backward
 * turns dy (n) into d(pre-activation) using the activations y (ReLU: y > 0; ELU(alpha = 1):
 * y > 0 ? 1 : y + 1). */
void tg_act_forward(float *y, size_t n, tg_act_t act, tg_pool_t *pool);
void tg_act_backward(float *dy, const float *y, size_t n, tg_act_t act, tg_pool_t *pool);

/* Inverted dropout: out (rows, dim) = x * mask / keep. An element is dropped when 16 random bits
 * fall below round(p * 65536), and keep is that realised probability (exactly 1 - p when p is a
 * multiple of 2^-16, e.g. 0.5), so E[out] = x. The mask of row r comes from
 * tg_rng_seed2(seed, r), so it does not depend on the thread split. mask (rows, dim) may be NULL
 * when no backward is needed. */
/* The 16-bit threshold (drop when bits < thresh) and 1 / keep for probability p. */
void tg_dropout_params(float p, uint32_t *thresh, float *scale);
void tg_dropout_forward(float *out, uint8_t *mask, const float *x, size_t rows, size_t dim, float p,
                        uint64_t seed, tg_pool_t *pool);
/* In place: d (rows, dim) = d * mask / keep (backward when d(out) and d(x) share a buffer). */
void tg_dropout_scale(float *d, const uint8_t *mask, size_t rows, size_t dim, float p,
                      tg_pool_t *pool);
/* dx (rows, dim) += dout * mask / keep. */
void tg_dropout_backward(float *dx, const float *dout, const uint8_t *mask, size_t rows, size_t dim,
                         float p, tg_pool_t *pool);

/* ---------------------------------------------------------------- graph ops */

/* The transpose of a block's CSR: for source j, its edges in increasing edge id are
 * eid[indptr[j] .. indptr[j+1]) with destinations dst[...]. Lets backward passes gather into
 * each source row (one owner per row) instead of scattering from destinations. */
typedef struct tg_tcsr {
    uint32_t num_src;
    uint64_t *indptr; /* (num_src + 1) */
    uint32_t *dst;    /* (num_edges) */
    uint64_t *eid;    /* (num_edges) */
} tg_tcsr_t;

/* Bytes tg_tcsr_build needs from an arena, and the build (sequential counting sort, O(E)). */
void tg_tcsr_plan(tg_tcsr_t *t, uint32_t num_src, uint64_t num_edges, tg_arena_t *a);
void tg_tcsr_build(tg_tcsr_t *t, const tg_block_t *blk);

/* A copy of blk without edges i <- i and with exactly one self loop per destination, placed last
 * in each row (PyG's add_self_loops). indptr/indices come from the arena, planned for the upper
 * bound num_edges + num_dst. */
void tg_selfloop_plan(tg_block_t *aug, const tg_block_t *blk, tg_arena_t *a);
void tg_selfloop_build(tg_block_t *aug, const tg_block_t *blk);

/* Row gathers: dst (n, dim) = src[idx[i]]. */
void tg_gather_f32(float *dst, const float *src, const uint64_t *idx, size_t n, size_t dim,
                   tg_pool_t *pool);
void tg_gather_f16(float *dst, const uint16_t *src, const uint64_t *idx, size_t n, size_t dim,
                   tg_pool_t *pool);

/* Neighbour aggregation over a block (dst i, src j = indices[e]); x (num_src, dim), out
 * (num_dst, dim), overwritten. An empty neighbourhood gives 0 (all modes).
 *   sum:      out_i = sum_e x_j
 *   mean:     out_i = sum_e x_j / deg_i
 *   weighted: out_i = sum_e w[e] x_j
 *   max:      out_i = max_e x_j per feature; arg (num_dst, dim) records the winning edge as its
 *             offset within row i (first one on ties), UINT32_MAX for an empty row. */
void tg_aggr_sum_forward(float *out, const float *x, const tg_block_t *blk, size_t dim,
                         tg_pool_t *pool);
void tg_aggr_mean_forward(float *out, const float *x, const tg_block_t *blk, size_t dim,
                          tg_pool_t *pool);
void tg_aggr_weighted_forward(float *out, const float *x, const float *w, const tg_block_t *blk,
                              size_t dim, tg_pool_t *pool);
void tg_aggr_max_forward(float *out, uint32_t *arg, const float *x, const tg_block_t *blk,
                         size_t dim, tg_pool_t *pool);
/* dx (num_src, dim) += the transpose applied to dout (num_dst, dim); t = tg_tcsr_build(blk). */
void tg_aggr_sum_backward(float *dx, const float *dout, const tg_block_t *blk, const tg_tcsr_t *t,
                          size_t dim, tg_pool_t *pool);
void tg_aggr_mean_backward(float *dx, const float *dout, const tg_block_t *blk, const tg_tcsr_t *t,
                           size_t dim, tg_pool_t *pool);
void tg_aggr_weighted_backward(float *dx, const float *dout, const float *w, const tg_block_t *blk,
                               const tg_tcsr_t *t, size_t dim, tg_pool_t *pool);
void tg_aggr_max_backward(float *dx, const float *dout, const uint32_t *arg, const tg_block_t *blk,
                          const tg_tcsr_t *t, size_t dim, tg_pool_t *pool);

/* GCN edge weights on a self-looped block aug (see nn.h for the degree convention):
 * w (aug->num_edges) = 1 / sqrt(d_i d_j). deg_src (aug->num_src) is scratch. full_deg
 * (num_src) or NULL: whole-graph in-degrees (self excluded), then d = 1 + full_deg for all. */
void tg_gcn_norm(float *w, uint32_t *deg_src, const tg_block_t *aug, const uint64_t *full_deg);

/* GAT attention over a self-looped block aug, H heads of width F. Per head k:
 *   s_dst (nd, H)   = Wh_i^k . a_dst_k,   s_src (ns, H) = Wh_j^k . a_src_k
 *   z (E, H)        = LeakyReLU_0.2(s_dst_i + s_src_j)      (stored after the LeakyReLU)
 *   alpha (E, H)    = softmax of z over the edges of dst i
 *   alpha_d (E, H)  = alpha with attention dropout (mask per dst row from tg_rng_seed2(seed, i));
 *                     may equal alpha (same pointer) when p == 0
 *   out (nd, H*F)   = sum_e alpha_d[e,k] Wh_j^k       (heads concatenated)
 * Wh (ns, H*F), a_dst / a_src (H, F). */
void tg_gat_forward(float *out, float *s_dst, float *s_src, float *z, float *alpha, float *alpha_d,
                    const float *Wh, const float *a_dst, const float *a_src, const tg_block_t *aug,
                    int H, size_t F, float p, uint64_t seed, tg_pool_t *pool);
/* Backward of tg_gat_forward given dout (nd, H*F). Overwrites dWh (ns, H*F); accumulates into
 * da_dst, da_src (H, F). Scratch: dz (E, H), ds_dst (nd, H), ds_src (ns, H). t = tcsr of aug. */
void tg_gat_backward(float *dWh, float *da_dst, float *da_src, float *dz, float *ds_dst,
                     float *ds_src, const float *dout, const float *Wh, const float *a_dst,
                     const float *a_src, const float *z, const float *alpha, const float *alpha_d,
                     const tg_block_t *aug, const tg_tcsr_t *t, int H, size_t F, float p,
                     tg_pool_t *pool);
/* out (n, F) = mean over H heads of x (n, H*F); backward: dx (n, H*F) overwritten = dout / H. */
void tg_head_mean_forward(float *out, const float *x, size_t n, int H, size_t F, tg_pool_t *pool);
void tg_head_mean_backward(float *dx, const float *dout, size_t n, int H, size_t F,
                           tg_pool_t *pool);

/* ---------------------------------------------------------------- loss */

/* Loss of logits (n, C) against labels (see nn.h), stats filled. dlogits (n, C), if not NULL,
 * receives d(mean loss)/d(logits) (overwritten). -EINVAL for an out-of-range label, -ERANGE when
 * the loss is not finite. Sequential: n x C is small and the sum order stays fixed. */
int tg_loss_forward_backward(float *dlogits, const float *logits, const int32_t *labels, uint32_t n,
                             uint32_t C, int multi_label, tg_step_stats_t *stats);

/* ---------------------------------------------------------------- layers */

/* One layer: shapes, and pointers into the model's flat parameter and gradient blocks. */
typedef struct tg_layer {
    tg_model_type_t type;
    uint32_t in, out; /* input / output widths */
    uint32_t inner;   /* GIN: width of the MLP's hidden layer */
    int heads;        /* GAT */
    uint32_t F;       /* GAT per-head width */
    int concat;       /* GAT: heads concatenated (else averaged) */
    float attn_p;     /* GAT attention dropout */
    int train_eps;    /* GIN */
    float eps_fixed;  /* GIN eps when not learnable */
    /* parameters / gradients (NULL when the layer type has no such tensor) */
    float *W, *dW;         /* (in, out); SAGE: W_self; GAT: (in, H*F); GIN: (in, inner) */
    float *W2, *dW2;       /* SAGE: W_neigh (in, out); GIN: (inner, out) */
    float *b, *db;         /* (out) */
    float *b1, *db1;       /* GIN: (inner) */
    float *a_dst, *da_dst; /* GAT (H, F) */
    float *a_src, *da_src; /* GAT (H, F) */
    float *eps, *deps;     /* GIN (1) when learnable */
    int order; /* SAGE / GCN: 0 = pick by cost, 1 = aggregate first, 2 = transform first (tests) */
} tg_layer_t;

/* What a layer keeps from forward for backward, and its backward scratch; all from the arena. */
typedef struct tg_layer_acts {
    const uint64_t *full_deg; /* GCN input: whole-graph in-degrees of the sources, or NULL */
    tg_block_t aug;           /* GCN / GAT: self-looped block (GCN on a weighted block: it) */
    tg_tcsr_t t;   /* transpose of the block the layer aggregates over (aug for GCN / GAT) */
    uint32_t *deg; /* GCN scratch (num_src) */
    float *ew;     /* GCN edge weights (E'): computed, or a weighted block's own (borrowed) */
    float *agg;    /* SAGE / GCN / GIN: aggregated input (nd, in) */
    float *h1;     /* GIN: ReLU(agg W + b1) (nd, inner) */
    float *wh;     /* GAT: x W (ns, H*F) */
    float *s_dst, *s_src, *z, *alpha, *alpha_d; /* GAT */
    float *hcat;                                /* GAT with mean: heads before the mean (nd, H*F) */
    /* backward scratch */
    float *dagg, *dh1, *dwh, *dz, *ds_dst, *ds_src, *dhcat;
    double *eps_part;    /* GIN: per-row partial sums of d eps (nd) */
    float *gemm_scratch; /* partial products of the weight-gradient GEMMs */
    float *xw, *dxw;     /* SAGE / GCN transform-first: x W (ns, out) and its gradient */
    int has_backward, need_dx;
    int tfirst; /* SAGE / GCN: transform first (tg_layer_transform_first) */
} tg_layer_acts_t;

/* Layer l's shapes and options from the model's config (no parameters bound). */
void tg_layer_setup(tg_layer_t *ly, const tg_model_config_t *cfg, int l);
/* Number of floats of the layer's parameters, and pointing its tensors into params / grads
 * (either may be NULL for a count-only pass). Returns the count. */
size_t tg_layer_bind(tg_layer_t *ly, float *params, float *grads);
/* Parameters of a model of configuration cfg (valid: tg_model_config_check), counted without
 * allocating them. */
uint64_t tg_model_config_nparams(const tg_model_config_t *cfg);
/* Glorot-uniform weights, zero biases, eps = initial value; draws from r in a fixed order. */
void tg_layer_init(tg_layer_t *ly, float gin_eps, tg_rng_t *r);
/* 1 when the layer multiplies by its weight before aggregating on this block (cheaper when the
 * block has few more sources than destinations and the layer narrows), 0 otherwise. */
int tg_layer_transform_first(const tg_layer_t *ly, const tg_block_t *blk);
/* Lays out the layer's buffers for a block. backward: keep what backward needs and its scratch;
 * need_dx: backward will also produce d(input). */
void tg_layer_plan(const tg_layer_t *ly, tg_layer_acts_t *a, const tg_block_t *blk, int backward,
                   int need_dx, tg_arena_t *ar);
/* x (ns, in) -> out (nd, out), overwritten. training turns attention dropout on (seed). */
void tg_layer_forward(const tg_layer_t *ly, tg_layer_acts_t *a, const tg_block_t *blk,
                      const float *x, float *out, int training, uint64_t seed, tg_pool_t *pool);
/* dout (nd, out) -> parameter gradients (+=) and, when dx != NULL, dx (ns, in) (+=). */
void tg_layer_backward(const tg_layer_t *ly, tg_layer_acts_t *a, const tg_block_t *blk,
                       const float *x, const float *dout, float *dx, tg_pool_t *pool);

/* ---------------------------------------------------------------- model internals */

struct tg_model {
    tg_model_config_t cfg;
    int L;
    tg_layer_t *layers; /* (L) */
    size_t nparams;
    float *params, *grads; /* (nparams) each */
    tg_optim_t opt;
    tg_rng_t rng;          /* per-step dropout seeds */
    tg_pool_t *pool;       /* lent */
    tg_arena_t arena;      /* activations; arena.cap bytes at arena.base */
    tg_layer_acts_t *acts; /* (L) */
    /* per-step buffers (arena) */
    const float **xin; /* (L) layer inputs (ns_l, in_l): xdrop[l], or X / h[l-1] without dropout */
    float **xdrop;     /* (L) dropout outputs or NULL */
    uint8_t **mask;    /* (L) dropout masks or NULL (none needed for the input features) */
    float **h;         /* (L) layer outputs, after the activation for l < L-1: (nd_l, out_l) */
    float **dh;        /* (L) d(h[l]) */
    float **dxin;      /* (L) d(xin[l]) or NULL */
    float *dlogits;    /* alias of dh[L-1] */
};

/* Checks that b fits m (layer count, chaining, CSR bounds); -EINVAL naming what is wrong. */
int tg_model_check_batch(const tg_model_t *m, const tg_batch_t *b);
/* Forward (+ loss and backward when labels != NULL) with an explicit dropout seed, gradients
 * zeroed first and left in m->grads; no optimiser step. dX (num_nodes, in_dim), if not NULL,
 * receives d loss / d X. The testable core of tg_model_train_step. */
int tg_model_forward_backward(tg_model_t *m, const tg_batch_t *b, const float *X,
                              const int32_t *labels, int training, uint64_t seed, float *dX,
                              tg_step_stats_t *stats);
/* Model gradients (nparams), valid until the next step. */
float *tg_model_grads(tg_model_t *m);

#endif
