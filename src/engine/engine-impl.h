/* engine-impl.h - private seams of the engine: the opened dataset resources, checkpoints and
 * the layer-wise forward pass shared by evaluation and inference. */
#ifndef TG_ENGINE_IMPL_H
#define TG_ENGINE_IMPL_H

#include "tiergnn/engine.h"
#include "tiergnn/store.h"

/* Which feature store a run opens. */
typedef enum { TG_RUN_STORE_MEMORY = 0, TG_RUN_STORE_FILE = 1 } tg_run_store_t;

/* Everything a run reads from the dataset, opened once. */
typedef struct tg_run {
    tg_dataset_t *ds;
    tg_adj_t *adj;
    tg_store_t *store;
    int32_t *labels;      /* (N * label_width) */
    uint32_t label_width; /* 1, or C when multi-label */
    uint64_t *split[3];   /* train, valid, test ids */
    uint64_t split_n[3];
    tg_budget_t budget;
    int budget_init;
    tg_pool_t *pool;
} tg_run_t;

/* TG_FILE_TRAIN/VALID/TEST -> 0/1/2 */
static inline int tg_split_index(tg_file_id_t f)
{
    return f == TG_FILE_TRAIN ? 0 : f == TG_FILE_VALID ? 1 : 2;
}

/* Opens the dataset, adjacency (in RAM), labels, splits, the feature store and a thread pool.
 * mem_bytes limits graph + feature data (0 = unlimited). */
int tg_run_open(tg_run_t *r, const char *dataset, tg_run_store_t store, int normalize,
                uint64_t mem_bytes, int threads);
void tg_run_close(tg_run_t *r);

/* Labels of nodes[0..n) into y (n * label_width); when mask is given, nodes whose mask byte is 0
 * get -1 (not counted by the loss). */
void tg_run_labels(const tg_run_t *r, const uint64_t *nodes, size_t n, const uint8_t *mask,
                   int32_t *y);

/* ---------------------------------------------------------------- checkpoints */

/* Fills the dataset identity of info from ds. */
void tg_ckpt_identity(tg_ckpt_info_t *info, const tg_dataset_t *ds);
/* -EINVAL naming every difference if info was made on another dataset than ds. */
int tg_ckpt_check_dataset(const tg_ckpt_info_t *info, const tg_dataset_t *ds, const char *path);
/* Serialises info + model into a malloc'd buffer (the bytes tg_ckpt_write puts in a file). */
int tg_ckpt_serialize(const tg_ckpt_info_t *info, const tg_model_t *m, char **buf, size_t *len);
/* Writes info + model to path atomically (path.tmp, fsync, rename, fsync dir). */
int tg_ckpt_write(const char *path, const tg_ckpt_info_t *info, const tg_model_t *m);
/* Reads the engine record from f (positioned at the start); leaves f after it. */
int tg_ckpt_read_record(FILE *f, const char *path, tg_ckpt_info_t *info);

/* ---------------------------------------------------------------- layer-wise forward */

/* Receives the final layer's output for a chunk of targets: logits (n, out_dim) and, when asked,
 * embeddings (n, embed_dim). */
typedef int (*tg_lw_sink_fn)(void *ctx, const uint64_t *ids, size_t n, const float *logits,
                             const float *emb);

typedef struct tg_lw_opts {
    uint64_t chunk;          /* destination nodes per chunk (>= 1) */
    const char *tmp_dir;     /* NULL: intermediate layers in RAM; else temporary files there */
    const uint64_t *targets; /* nodes of the final layer, NULL = all nodes in id order */
    uint64_t num_targets;
    int want_emb;
    tg_lw_sink_fn sink;
    void *ctx;
    const char *progress_label; /* NULL: no progress bar */
} tg_lw_opts_t;

/* Full-neighbour forward of every layer: layers 0..L-2 for all nodes (each layer's output is the
 * next one's input), the last layer for the targets only. */
int tg_lw_forward(tg_run_t *r, tg_model_t *m, const tg_lw_opts_t *o);

/* ---------------------------------------------------------------- evaluation */

typedef struct tg_split_eval {
    double acc, loss;
    uint64_t count;
} tg_split_eval_t;

/* Evaluates m on the splits flagged in want[3] (train, valid, test). Full neighbours
 * (layer-wise) unless sampled, then mini-batches with fanouts and the eval RNG stream. */
int tg_run_evaluate(tg_run_t *r, tg_model_t *m, const int want[3], int sampled,
                    const int64_t *fanouts, uint64_t batch_size, uint64_t seed, uint64_t chunk,
                    tg_split_eval_t out[3]);

#endif
