/* tiergnn/nn.h - GNN models on mini-batch blocks: layers, loss, optimisers, checkpoints.
 *
 * How to use (training):
 *     tg_model_config_t cfg;
 *     tg_model_config_default(&cfg);            // 2-layer GraphSAGE, hidden 256, ReLU, dropout 0.5
 *     cfg.type = TG_MODEL_SAGE; cfg.in_dim = 128; cfg.out_dim = 32; cfg.num_layers = 3;
 *     tg_model_t *m;
 *     if (tg_model_create(&m, &cfg, seed) < 0) die(tg_errmsg());
 *     tg_optim_config_t oc;
 *     tg_optim_config_default(&oc, TG_OPTIM_ADAM);   // lr 1e-3, betas 0.9/0.999, eps 1e-8
 *     tg_model_set_optim(m, &oc);
 *     tg_model_set_pool(m, pool);               // the --threads pool (lent, may be NULL)
 *     for each batch b with features X (b->num_nodes x in_dim) and seed labels y:
 *         tg_step_stats_t st;
 *         int rc = tg_model_train_step(m, b, X, y, &st);   // -ERANGE: NaN/Inf loss, no update
 *     tg_model_destroy(m);
 *
 * How to use (evaluation / inference):
 *     tg_model_predict(m, b, X, logits, emb)    // eval mode (no dropout), logits of the seeds
 *     tg_loss_eval(logits, y, n, C, multi_label, &st)   // loss / accuracy of given logits
 *   Layer-wise full-neighbour inference over all N nodes: for l = 0 .. L-1, split the nodes into
 *   chunks; for each chunk build a block (dst = the chunk, src = dst + all in-neighbours) and call
 *   tg_model_layer_forward(m, l, blk, Hin_rows_of_src, Hout_rows_of_dst) - for GCN
 *   tg_model_layer_forward_deg with the sources' in-degrees, see there. The output of layer L-2
 *   is the embedding ("last hidden representation"), the output of layer L-1 the logits.
 *
 * Batches: a model of L layers consumes a tg_batch_t with num_layers == L (see tiergnn/graph.h);
 * block l feeds layer l. X row r holds the input features of batch->nodes[r]. Labels are those of
 * the seeds, nodes[0 .. num_seeds): int32[num_seeds] class ids for single-label tasks,
 * int32[num_seeds][out_dim] of 0/1 for multi-label tasks; -1 means "no label" and is ignored in
 * the loss and in the counts.
 *
 * Layers (conventions every layer shares, the self node is dst i = src i of the block):
 *   SAGE  h_i = x_i W_self + mean_{j in N(i)} x_j W_neigh + b     (mean = 0 when N(i) is empty)
 *   GCN   h_i = sum_{j in N(i) + {i}} x_j W / sqrt(d_i d_j) + b, explicit self edges dropped and
 *         one self loop added (as PyG's gcn_norm); d_i = 1 + in-degree of dst i in the block. A
 *         source j that is also a dst (j < num_dst) uses its own d_j = 1 + in-degree(j); a source
 *         that is not a dst has no in-edges in the block, so it uses 1 + its out-degree in the
 *         block (the number of sampled dsts that read it, plus the self loop of A + I). On a
 *         full-neighbour block of a symmetric graph every node is a dst and this is exactly
 *         Kipf & Welling's D^-1/2 (A + I) D^-1/2 X W.
 *         A block with edge weights (tiergnn/graph.h; the LADIES sampler's) is used as it is:
 *         h_i = sum_{e in row i} w_e x_j W + b, its self loops being among its edges; forward
 *         and backward both use w (gradients flow to x and W, not to w). SAGE, GAT, GIN and MLP
 *         refuse weighted blocks (-EINVAL naming the block): their aggregations have no place
 *         for an importance weight that would keep their meaning.
 *   GAT   per head k: e_ij = LeakyReLU_0.2(a_dst_k . Wh_i + a_src_k . Wh_j) over j in N(i) + {i}
 *         (explicit self edges dropped, one self loop added, as PyG GATConv), alpha = softmax_j,
 *         attention dropout on alpha, h_i^k = sum_j alpha_ij Wh_j^k. Hidden layers concatenate
 *         the heads (hidden = heads x per-head width, so hidden % heads == 0); the output layer
 *         averages heads of width out_dim (or concatenates heads of width out_dim / heads when
 *         gat_concat_last is set). Bias after concat/mean.
 *   GIN   h_i = MLP((1 + eps) x_i + sum_{j in N(i)} x_j), MLP = Linear-ReLU-Linear (inner width
 *         hidden), eps a learnable scalar per layer when gin_train_eps, else fixed at gin_eps.
 *   MLP   h_i = x_i W + b (edges ignored): the no-graph reference.
 *   A model applies dropout(p = input_dropout) to the input features (layer 0's input) and
 *   dropout(p = dropout) to the input of every later layer (training mode only), and the
 *   activation between layers, not after the last one. input_dropout defaults to dropout;
 *   input_dropout 0 with dropout > 0 drops between layers only, as PyG's GraphSAGE examples.
 * Weights and GAT attention vectors: Glorot (Xavier) uniform; biases zero. SAGE's neighbour term
 * and GCN multiply before or after aggregating, whichever costs fewer flops on the block's shape
 * (same result up to rounding).
 *
 * Loss: single-label: log-softmax + cross-entropy, mean over labelled seeds. Multi-label:
 * sigmoid + binary cross-entropy, mean over labelled (seed, class) entries (torch's
 * BCEWithLogitsLoss with reduction 'mean').
 *
 * Determinism: with the same seed, config and batches, training is bit-identical run to run, and
 * the kernels split work by output row (each row owned by one thread, reductions over rows split
 * by column or into fixed-size chunks summed in a fixed order), so results are also bit-identical
 * for any thread count. Dropout masks come from a
 * per-step seed drawn from the model's RNG; that RNG and the optimiser state are in checkpoints,
 * so a resumed run continues bit-identically.
 *
 * Memory: parameters, gradients and optimiser moments each live in one flat float block;
 * activations of a step come from an arena grown to the largest batch seen and reused. Neither
 * goes through the data budget; tg_model_param_bytes / tg_model_act_bytes report them apart.
 *
 * Threads: a tg_model_t is used by one thread at a time. Its kernels split rows over the pool
 * given with tg_model_set_pool (the --threads pool). GEMMs go through OpenBLAS's cblas_sgemm, but
 * OpenBLAS itself is kept single-threaded (nn sets openblas_set_num_threads(1) before its GEMMs)
 * and nn splits each GEMM into pieces of a shape-determined size on the same pool: OpenBLAS's own
 * threading would change rounding with the thread count (it splits the long reduction of weight
 * gradients) and its spinning workers would compete with ours for the cores, so at most
 * --threads threads compute at any time. Other code may call BLAS from other threads meanwhile:
 * single-threaded OpenBLAS is reentrant.
 *
 * Module: nn/ knows nothing of disks, caches or strategies.
 */
#ifndef TIERGNN_NN_H
#define TIERGNN_NN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tiergnn/graph.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- configuration */

typedef enum {
    TG_MODEL_SAGE = 0,
    TG_MODEL_GCN = 1,
    TG_MODEL_GAT = 2,
    TG_MODEL_GIN = 3,
    TG_MODEL_MLP = 4
} tg_model_type_t;

typedef enum { TG_ACT_RELU = 0, TG_ACT_ELU = 1 } tg_act_t;

typedef struct tg_model_config {
    tg_model_type_t type;
    uint32_t in_dim;     /* input feature width */
    uint32_t hidden;     /* width of every hidden layer's output (GAT: heads x per-head width) */
    uint32_t out_dim;    /* classes (multi-label: number of labels) */
    int num_layers;      /* >= 1; a batch for this model has this many blocks */
    int heads;           /* GAT heads per layer (>= 1); ignored by other models */
    int gat_concat_last; /* GAT output layer: 0 = mean of heads (GAT paper), 1 = concat */
    float dropout;       /* on the input of layers 1.., training mode only; [0, 1) */
    float input_dropout; /* on the input features (layer 0's input); [0, 1), or negative
                          * (TG_INPUT_DROPOUT_SAME) = the dropout value, resolved when the model
                          * is created: tg_model_config() of a model is never negative */
    float attn_dropout;  /* GAT: on attention coefficients, training mode only; [0, 1) */
    tg_act_t activation; /* between layers */
    int multi_label;     /* 1: sigmoid + BCE per label; 0: softmax + cross-entropy */
    int gin_train_eps;   /* GIN: 1 = eps is a learnable parameter */
    float gin_eps;       /* GIN: initial (or fixed) eps */
} tg_model_config_t;

#define TG_INPUT_DROPOUT_SAME (-1.0f)
/* The widest layer input or output a model takes (as a dataset's feat_dim and num_classes). */
#define TG_MODEL_MAX_WIDTH (1u << 24)

/* GraphSAGE, in_dim 0 (must be set), hidden 256, out_dim 0 (must be set), 2 layers, 1 head,
 * dropout 0.5, input_dropout TG_INPUT_DROPOUT_SAME, attn_dropout 0, ReLU, single-label, GIN eps
 * 0 learnable. */
void tg_model_config_default(tg_model_config_t *cfg);
/* Checks ranges and combinations; -EINVAL with a message naming the bad field. */
int tg_model_config_check(const tg_model_config_t *cfg);

/* "sage" "gcn" "gat" "gin" "mlp" <-> enum; parse returns -EINVAL naming the accepted values. */
const char *tg_model_type_name(tg_model_type_t t);
int tg_model_type_parse(const char *s, tg_model_type_t *out);
/* "relu" "elu" */
const char *tg_act_name(tg_act_t a);
int tg_act_parse(const char *s, tg_act_t *out);

/* ---------------------------------------------------------------- optimisers */

typedef enum { TG_OPTIM_ADAM = 0, TG_OPTIM_SGD = 1 } tg_optim_type_t;

typedef struct tg_optim_config {
    tg_optim_type_t type;
    float lr;
    float weight_decay; /* L2 added to the gradient (g += wd * p), as torch.optim.Adam / SGD */
    float beta1, beta2; /* Adam */
    float eps;          /* Adam */
    float momentum;     /* SGD: v = momentum * v + g; p -= lr * v (torch, dampening 0) */
} tg_optim_config_t;

/* Adam: lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 0. SGD: lr 1e-2, momentum 0.9. */
void tg_optim_config_default(tg_optim_config_t *oc, tg_optim_type_t type);
const char *tg_optim_type_name(tg_optim_type_t t);
int tg_optim_type_parse(const char *s, tg_optim_type_t *out); /* "adam" "sgd" */

/* The optimiser over one flat parameter block of n floats. Owns its moment block(s). */
typedef struct tg_optim {
    tg_optim_config_t cfg;
    size_t n;
    uint64_t t; /* steps taken (Adam bias correction) */
    float *m;   /* (n) Adam first moment / SGD momentum buffer; NULL for SGD without momentum */
    float *v;   /* (n) Adam second moment; NULL for SGD */
} tg_optim_t;

/* 0 when cfg's values are an optimiser's (a known type, lr and weight decay finite and >= 0,
 * Adam's betas in [0, 1) and eps > 0, SGD's momentum in [0, 1)), else -EINVAL naming the field. */
int tg_optim_config_check(const tg_optim_config_t *cfg);
/* Allocates zeroed state for n parameters (cfg checked as above). tg_optim_destroy frees it (safe
 * on a zeroed struct). */
int tg_optim_init(tg_optim_t *o, const tg_optim_config_t *cfg, size_t n);
void tg_optim_destroy(tg_optim_t *o);
/* One update p -= ... from gradient g (both (n)); g is not modified. Elementwise, so the pool
 * split cannot change the result. pool may be NULL. */
void tg_optim_step(tg_optim_t *o, float *p, const float *g, tg_pool_t *pool);

/* ---------------------------------------------------------------- the model */

typedef struct tg_model tg_model_t;

/* Creates a model with Glorot-initialised weights drawn from seed (the same seed gives the same
 * weights), an Adam optimiser with default settings, no pool. The config is copied. */
int tg_model_create(tg_model_t **out, const tg_model_config_t *cfg, uint64_t seed);
void tg_model_destroy(tg_model_t *m); /* NULL is fine */

/* The model's config (valid for the model's lifetime). */
const tg_model_config_t *tg_model_config(const tg_model_t *m);
/* Replaces the optimiser (state reset to zero). */
int tg_model_set_optim(tg_model_t *m, const tg_optim_config_t *oc);
const tg_optim_config_t *tg_model_optim_config(const tg_model_t *m);
/* Changes the learning rate only, keeping the optimiser state (for schedules). */
void tg_model_set_lr(tg_model_t *m, float lr);
/* Lends the thread pool the kernels and GEMM pieces run on (NULL: everything on the calling
 * thread). The pool must outlive its use by the model. */
void tg_model_set_pool(tg_model_t *m, tg_pool_t *pool);

/* Number of learnable scalars. */
size_t tg_model_param_count(const tg_model_t *m);
/* Bytes of parameters + gradients + optimiser state. */
uint64_t tg_model_param_bytes(const tg_model_t *m);
/* What tg_model_param_bytes reports for a model of configuration cfg with optimiser oc (NULL:
 * Adam's defaults, what tg_model_create starts with), computed without creating it: a budget
 * can refuse a model before it is allocated. 0 when cfg is not valid (tg_model_config_check). */
uint64_t tg_model_config_param_bytes(const tg_model_config_t *cfg, const tg_optim_config_t *oc);
/* Bytes of the activation arena now (it grows to the largest batch seen, never shrinks). */
uint64_t tg_model_act_bytes(const tg_model_t *m);

/* The flat parameter block (tg_model_param_count floats): read/write access for tests, weight
 * export and averaging. Valid until tg_model_destroy. */
float *tg_model_params(tg_model_t *m);

/* Per-step results. Single-label: loss = mean cross-entropy over labelled seeds, correct =
 * labelled seeds whose argmax is the label, count = labelled seeds, tp/fp/fn = 0. Multi-label:
 * loss = mean BCE over labelled entries, correct = entries where (logit > 0) == label, count =
 * labelled entries, tp/fp/fn over labelled entries (micro-F1 = 2tp / (2tp + fp + fn)). */
typedef struct tg_step_stats {
    double loss;
    uint64_t correct, count;
    uint64_t tp, fp, fn;
} tg_step_stats_t;

/* One training step on batch b: forward in training mode (dropout on), loss over the seeds,
 * backward, optimiser step. X: (b->num_nodes, in_dim) float; labels as described above.
 * Errors: -EINVAL (batch does not fit the model: layer count, block chaining, a label out of
 * range; message says which), -ENOMEM (arena growth), -ERANGE (loss or a gradient is NaN/Inf:
 * parameters and optimiser state are left unchanged). A batch with no labelled seed is not an
 * error: stats->count = 0, loss 0, and nothing is updated (no optimiser step). */
int tg_model_train_step(tg_model_t *m, const tg_batch_t *b, const float *X, const int32_t *labels,
                        tg_step_stats_t *stats);

/* Data-parallel training (tiergnn/dist.h): called between backward and the optimiser step with
 * the step's gradients g (n floats; zero when this rank's batch had no labelled seed or failed),
 * this rank's status (local_rc < 0: its step failed, its message is set) and its labelled count.
 * It makes g the gradient to apply (e.g. the mean over ranks) and returns 0 to step,
 * TG_GRAD_SKIP to leave parameters and optimiser as they are, or a negative error. */
#define TG_GRAD_SKIP 1
typedef int (*tg_grad_sync_fn)(void *ctx, float *g, size_t n, int local_rc, uint64_t count);

/* tg_model_train_step with sync between backward and the optimiser step; sync is called once
 * per call, also when this rank's step failed or had no labelled seed, so that every rank's sync
 * meets the others'. salt is mixed into the step's dropout seed (a rank's id: ranks train
 * different batches and should not share masks) while the model's RNG advances as in
 * tg_model_train_step, so every rank's RNG state stays the same. With salt 0 and a sync that
 * leaves g unchanged and returns 0, the parameters, optimiser state and RNG after the call are
 * bit for bit those of tg_model_train_step. Errors: tg_model_train_step's, or sync's. */
int tg_model_train_step_sync(tg_model_t *m, const tg_batch_t *b, const float *X,
                             const int32_t *labels, uint64_t salt, tg_grad_sync_fn sync, void *ctx,
                             tg_step_stats_t *stats);

/* Forward in eval mode (no dropout) on batch b. logits: (b->num_seeds, out_dim), caller-owned.
 * emb: NULL, or (b->num_seeds, tg_model_embed_dim(m)) caller-owned, receiving the seeds' input to
 * the last layer (after the activation) - the last hidden representation; for a 1-layer model
 * that is the input features. */
int tg_model_predict(tg_model_t *m, const tg_batch_t *b, const float *X, float *logits, float *emb);
uint32_t tg_model_embed_dim(const tg_model_t *m);

/* Input and output widths of layer l (0 <= l < num_layers). */
void tg_model_layer_dims(const tg_model_t *m, int layer, uint32_t *in_dim, uint32_t *out_dim);
/* Layer l alone in eval mode on one block: Hin (blk->num_src, in_dim(l)) -> Hout (blk->num_dst,
 * out_dim(l)), both caller-owned; the activation is applied when l < num_layers - 1, so Hout is
 * directly the next layer's input. Uses and may grow the model's arena. */
int tg_model_layer_forward(tg_model_t *m, int layer, const tg_block_t *blk, const float *Hin,
                           float *Hout);
/* The same with the sources' whole-graph in-degrees src_deg (blk->num_src; neighbours other than
 * the node itself), which GCN then uses for every d (d = 1 + src_deg) instead of degrees counted
 * in the block: with full-neighbour chunks this is exactly Kipf & Welling's GCN even though a
 * chunk's pure sources do not have their in-edges in the block. Other layer types ignore it. */
int tg_model_layer_forward_deg(tg_model_t *m, int layer, const tg_block_t *blk,
                               const uint64_t *src_deg, const float *Hin, float *Hout);

/* Loss and counts of given logits (n, C) against labels as in tg_model_train_step (no model
 * needed): for evaluation. -ERANGE if the loss is not finite, -EINVAL for a label >= C. */
int tg_loss_eval(const float *logits, const int32_t *labels, uint32_t n, uint32_t C,
                 int multi_label, tg_step_stats_t *stats);

/* ---------------------------------------------------------------- cost of a step */

/* Floating-point operations of one training step, counted from the batch's blocks and the
 * config along the path the layers take (SAGE / GCN: aggregate or transform first, as
 * tg_model_train_step would choose on these blocks):
 *   GEMMs: 2 M K N each. Forward: every linear map. Backward: the weight gradient X^T dY of
 *     each, and the input gradient dY W^T where the layer hands a gradient on (every layer but
 *     the first: training wants no d loss / d X). So backward GEMMs are about twice forward's.
 *   graph: one add per edge and column for sum / mean aggregation (E x width), a multiply-add
 *     for weighted ones (GCN and GAT over the block with self-loops: 2 (E + nd) x width); GAT's
 *     attention scores 2 (ns + nd) x H F; backward runs each aggregation's transpose (the same
 *     count), GAT's twice (the gradient of the messages and of the coefficients).
 * Not counted: biases, activations, dropout, GCN's normalisation, softmax, the loss, the
 * optimiser step: element-wise and memory-bound, a few operations per element where a GEMM
 * spends 2 K. A lower bound built on this count stays a lower bound. */
typedef struct tg_flops {
    uint64_t fwd_gemm, fwd_graph;
    uint64_t bwd_gemm, bwd_graph;
} tg_flops_t;

/* *out = the count for one training step of a model of config cfg (in_dim, hidden, out_dim,
 * heads... as the model would have them) on b. -EINVAL with a message when cfg is invalid or b
 * does not fit it (layer count, block chaining). Time: O(layers). */
int tg_model_batch_flops(const tg_model_config_t *cfg, const tg_batch_t *b, tg_flops_t *out);
static inline uint64_t tg_flops_total(const tg_flops_t *f)
{
    return f->fwd_gemm + f->fwd_graph + f->bwd_gemm + f->bwd_graph;
}

/* The rate of the engine's GEMM (cblas_sgemm in pieces over a pool of `threads`, as the layers
 * call it) on C (M, N) = A (M, K) B (K, N): one untimed call, then calls for about time_s
 * seconds. *flops_per_s = 2 M K N x calls / seconds. Allocates the three matrices (4 (MK + KN +
 * MN) bytes, not accounted). -EINVAL for an empty shape, -ENOMEM. */
int tg_nn_gemm_rate(uint32_t M, uint32_t K, uint32_t N, int threads, double time_s,
                    double *flops_per_s);

/* ---------------------------------------------------------------- checkpoints */

/* Writes a header (magic "TGNNMDL1", format version, the model config, the optimiser config),
 * the step count and RNG state, the parameters and the optimiser state, then a CRC-32 of all of
 * it. Format version 2 adds input_dropout to the config; a model whose input_dropout equals its
 * dropout is written as version 1 (byte for byte what builds before version 2 wrote, and what
 * they read); a version 1 file reads as input_dropout = dropout. Writes at the current position of
 * f (the engine may put its own records around it); returns -EIO with a message naming `name` on a
 * write error. */
int tg_model_save(const tg_model_t *m, FILE *f, const char *name);
/* Reads what tg_model_save wrote into an existing model. The checkpoint's model must have m's
 * shape - type, in_dim, hidden, out_dim, num_layers, activation, multi_label, and for GAT heads
 * and gat_concat_last, for GIN the eps mode (and a fixed eps' value) - otherwise -EINVAL with a
 * message naming every field that differs ("x.ckpt: checkpoint is of another model: type gat in
 * checkpoint vs sage here; hidden 16 in checkpoint vs 32 here"). Dropout rates (dropout,
 * input_dropout, attn_dropout) may differ (a training choice; m's stay). The optimiser type must
 * match; its hyperparameters (lr, ...) stay as set on m, its state (moments, step count) and the
 * model's dropout RNG are restored. On any error m is left unchanged. Bad magic / version / CRC:
 * -EINVAL; a short file or read error: -EIO; messages name `name`. */
int tg_model_load(tg_model_t *m, FILE *f, const char *name);
/* Creates a model from a checkpoint (config, optimiser config and all state from the file). */
int tg_model_load_create(tg_model_t **out, FILE *f, const char *name);
/* Path conveniences: save goes through path.tmp + fsync + rename. */
int tg_model_save_path(const tg_model_t *m, const char *path);
int tg_model_load_path(tg_model_t *m, const char *path);
int tg_model_load_create_path(tg_model_t **out, const char *path);

/* ---------------------------------------------------------------- kernels other modules use */

/* dst[i] = src[idx[i]] for i < n, rows of dim floats; f16 rows are converted to f32. */
void tg_nn_gather_f32(float *dst, const float *src, const uint64_t *idx, size_t n, size_t dim,
                      tg_pool_t *pool);
void tg_nn_gather_f16(float *dst, const uint16_t *src, const uint64_t *idx, size_t n, size_t dim,
                      tg_pool_t *pool);

#ifdef __cplusplus
}
#endif
#endif
