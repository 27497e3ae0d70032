/* tiergnn/engine.h - training runs, evaluation and inference on a dataset directory.
 *
 * How to use (training):
 *     tg_train_opts_t o;
 *     tg_train_opts_default(&o);                 // GraphSAGE 2x256, fanouts 10,10, batch 1024
 *     o.dataset = "data/cora"; o.out_dir = "runs/a"; o.epochs = 200;
 *     o.model.type = TG_MODEL_GCN; o.model.hidden = 16;
 *     o.fanouts[0] = o.fanouts[1] = TG_FANOUT_ALL; o.batch_size = 0;   // full batch
 *     o.json = stdout;                            // one JSON object per epoch + one at the end
 *     tg_train_result_t r;
 *     if (tg_train(&o, &r) < 0) die(tg_errmsg());
 *     printf("test %.4f at epoch %llu\n", r.test_acc, r.best_epoch);
 *
 * Then tg_eval(dataset, "runs/a", TG_FILE_TEST, ...) recomputes the accuracy of the best model,
 * and tg_infer(...) writes predictions (and embeddings) for every node, layer by layer.
 *
 * The pipeline of one epoch:
 *     shuffle the training nodes with the RNG of (seed, epoch)
 *     -> SAMPLE batch b with the RNG of (seed, epoch, b)
 *     -> GATHER its feature rows
 *     -> TRAIN: tg_model_train_step on the calling thread
 *     -> RELEASE the batch.
 * A strategy (o.strategy, docs/STRATEGIES.md) decides where the graph and the feature rows come
 * from and what runs concurrently. The strategies form a table (tg_strategy_info: memory, mmap,
 * gnndrive, pagraph, ...), each with its own options (o.strategy_args); "auto" takes an in-RAM
 * strategy when graph, features and an estimate of the model and its batches fit in mem_bytes
 * (no limit: a quarter of RAM), else the table's out-of-core default (gnndrive).
 * Batches train in id order (gnndrive with out_of_order may run them as they become ready), so
 * the batches, their order and the model never depend on the strategy, thread counts or timing:
 * with the same --threads every in-order strategy gives bit-identical results, run to run and
 * across --resume, also mid-epoch.
 *
 * Memory: mem_bytes is the whole process's budget (tg_budget_t): graph and feature data,
 * caches, staging and buffers are reserved as they are allocated; before the first pass the run
 * measures the first batches and reserves the process itself, the model (with gradients and
 * optimiser state), one batch's activations and the strategy's batches in flight; the
 * strategy's caches take what is left. A budget too small for the strategy's minimum working set,
 * or for the model and one batch, is refused naming the amount needed. With mem_bytes 0 and a
 * cgroup memory limit, that limit less a margin is the budget. JSON: mem_bytes, data_bytes_peak
 * (the budget's peak), model_bytes, activation_bytes, batch_bytes_peak. mmap's mapped pages live
 * in the page cache, which only a cgroup limit bounds (../shared/tools/membudget).
 *
 * Stopping: when *o.stop becomes non-zero (the CLI's SIGINT handler sets it) the run stops at
 * the next batch boundary, writes its checkpoints (recording how many batches of the current
 * epoch are done, and their loss sums) and returns -EINTR. --resume then skips those batches and
 * continues bit-identically (in-order strategies); with out_of_order the batches already handed
 * to the pipeline are trained first, so the checkpoint always covers a prefix of the epoch.
 *
 * Full batch: batch_size 0 (or >= the training split) puts every training node in one step. If
 * moreover every fanout is -1, the step runs on the whole graph (every node is a destination of
 * every block, the loss is taken on the training nodes only), which is Kipf & Welling's
 * full-batch GCN: each node's normalisation uses its true degree.
 *
 * Evaluation (every eval_every epochs and after the last): by default layer-wise over all nodes
 * with full neighbourhoods (exact, no sampling noise; see tg_infer for how), giving valid and test
 * accuracy; with eval_sampled, mini-batches of the split with the training fanouts and a fixed
 * RNG stream, through the strategy's own pipeline (so out of core it reads no more than training
 * does). Out-of-core strategies keep layer-wise intermediate layers in temporary files in RUNDIR.
 * eval_max_nodes limits each split to a fixed random sample of that many nodes. The reported
 * test accuracy is the one at the best-validation epoch (ties: lower validation loss, then the
 * earlier epoch).
 *
 * Files in out_dir (RUNDIR):
 *     checkpoint.bin   the state after the last checkpointed epoch (and before the first): resume
 *     best.bin         the model at the best-validation epoch: what eval and infer use. The run
 *                      keeps it in RAM as bytes and writes it just before checkpoint.bin, so
 *                      the two files always describe the same point of the run
 *     result.json      the final JSON object of the run
 * Both .bin files hold an engine record (format version, dataset identity: node/edge counts,
 * feature width, classes and the CRC-32 of every array file from meta.txt; seed, batch size,
 * fanouts (and the sampler when not node-wise), feature normalisation, epochs done, batches
 * done of the next epoch with their loss sums, best-validation bookkeeping; CRC-32) followed by
 * tg_model_save's record (model + optimiser state + model RNG). The engine's own randomness is a
 * pure function of (seed, epoch, batch), so seed and epoch are its whole RNG state. Written
 * atomically: .tmp, fsync, rename, fsync of the directory.
 *
 * Module: engine/ uses graph/, store/, nn/ and data/; it knows nothing of the kernels' insides.
 */
#ifndef TIERGNN_ENGINE_H
#define TIERGNN_ENGINE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tiergnn/data.h"
#include "tiergnn/graph.h"
#include "tiergnn/nn.h"
#include "tiergnn/util.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_CKPT_NAME "checkpoint.bin"
#define TG_CKPT_BEST_NAME "best.bin"
#define TG_RESULT_NAME "result.json"
/* strategy auto: the planner's table, choice and the profile's cost (`tiergnn plan --json`) */
#define TG_PLAN_NAME "plan.json"

/* ---------------------------------------------------------------- the strategy table
 *
 * Each strategy (docs/STRATEGIES.md) declares its name, a summary, capability flags and its own
 * options in one table in its own file; the CLI shows and parses the options from it, and nothing
 * outside the strategy's file names it or its knobs. */

/* Capabilities. */
enum {
    TG_STRAT_EXACT = 1,   /* same batches, order and checkpoints as memory, byte for byte */
    TG_STRAT_IN_RAM = 2,  /* graph and features in RAM: layer-wise passes need no temp files */
    TG_STRAT_DERIVED = 4, /* builds derived/ files from the dataset (its prepare step) */
    TG_STRAT_CHANGES_GRAPH = 8, /* samples from a different graph on purpose (accuracy may move) */
    TG_STRAT_AUTO_OOC = 16,     /* auto's choice when the data does not fit in RAM */
    TG_STRAT_NEXT_PASS = 32     /* prepares the next training pass during this one (DiskGNN) */
};

/* INT, SIZE, FLAG: an int64_t field. CHOICE: an int64_t field that receives the index of the
 * word in `choices` ("auto|metis|stream"; def is an index). REAL: a double field (rdef, rmin,
 * rmax; auto_ok gives -1.0 for "auto"). */
typedef enum {
    TG_SOPT_INT = 0,
    TG_SOPT_SIZE = 1,
    TG_SOPT_FLAG = 2,
    TG_SOPT_CHOICE = 3,
    TG_SOPT_REAL = 4
} tg_sopt_kind_t;

/* One option of a strategy: `--name VALUE` (or `--name` for a flag). */
typedef struct tg_strategy_opt {
    const char *name; /* without "--" */
    tg_sopt_kind_t kind;
    int64_t def;         /* default; `auto` (below) means the strategy decides */
    int64_t min, max;    /* accepted range (INT, SIZE) */
    int auto_ok;         /* -1 is accepted (and is the "auto" default when def == -1) */
    size_t offset;       /* of the int64_t (REAL: double) that receives the value in the config */
    const char *meta;    /* the value's name in --help, e.g. "E" */
    const char *help;    /* one line; says the default */
    const char *choices; /* CHOICE: the accepted words, '|'-separated */
    double rdef, rmin, rmax; /* REAL: default and accepted range */
} tg_strategy_opt_t;

/* One entry of a strategy's option table for an INT, SIZE or FLAG option whose value lands in the
 * int64_t field f of the strategy's config struct T (each strategy file defines its short form:
 * #define GD_OPT(...) TG_STRATEGY_OPT(gd_cfg_t, __VA_ARGS__)). */
#define TG_STRATEGY_OPT(T, n, k, d, lo, hi, a, f, m, h)                                            \
    {                                                                                              \
        .name = (n), .kind = (k), .def = (d), .min = (lo), .max = (hi), .auto_ok = (a),            \
        .offset = offsetof(T, f), .meta = (m), .help = (h)                                         \
    }

typedef struct tg_strategy_arg {
    const char *name, *value; /* value NULL for a flag */
} tg_strategy_arg_t;

typedef struct tg_strategy_info {
    const char *name;
    const char *summary; /* one line */
    unsigned caps;       /* TG_STRAT_* */
    const tg_strategy_opt_t *opts;
    int num_opts;
    size_t config_size; /* bytes of its config struct (int64_t / double at the options' offsets) */
    /* Options that make it exercise its out-of-core path on a tiny dataset (tests, docs). */
    const char *example_args;
} tg_strategy_info_t;

/* The strategies in table order (i < tg_strategy_count()); NULL past the end. */
int tg_strategy_count(void);
const tg_strategy_info_t *tg_strategy_info(int i);
/* By name; NULL if none. */
const tg_strategy_info_t *tg_strategy_info_find(const char *name);
/* "memory, mmap, gnndrive, ..." in table order. */
const char *tg_strategy_names(void);
/* Fills cfg (info->config_size bytes) with the defaults, then args[0..n) that name options of
 * this strategy. Options of other strategies are skipped (noted at info level when `note`); a
 * name no strategy knows, a value out of range or of the wrong kind is -EINVAL naming the option
 * and what it accepts. */
int tg_strategy_parse(const tg_strategy_info_t *info, const tg_strategy_arg_t *args, int n,
                      void *cfg, int note);
/* Whether some strategy has an option called name: 1 with a value, 0 a flag, -1 none. */
int tg_strategy_opt_kind(const char *name);

typedef struct tg_train_opts {
    const char *dataset;     /* dataset directory */
    const char *out_dir;     /* RUNDIR, created if missing */
    const char *strategy;    /* "auto" (default) or a name of the strategy table */
    tg_model_config_t model; /* in_dim, out_dim and multi_label are set from the dataset */
    tg_optim_config_t optim;
    int64_t fanouts[TG_MAX_LAYERS]; /* model.num_layers values; fanouts[l] feeds layer l, in
                                       the sampler's sense: neighbours per node (node), nodes
                                       per layer (ladies, --layer-sizes) */
    /* The sampler (tiergnn/graph.h; NULL = node-wise). ladies needs a GCN, layer sizes >= 1 and
     * a strategy that samples its batches from the whole graph (not hier); its runs evaluate
     * layer-wise with P = D^-1 (A + I), the operator its weights estimate. */
    const tg_sampler_i *sampler;
    uint64_t batch_size; /* seeds per step; 0 or >= |train| = full batch */
    uint64_t epochs;     /* total epochs (a resumed run continues up to this) */
    uint64_t eval_every; /* evaluate every N epochs and after the last; 0 = last only */
    int eval_sampled;    /* 1: evaluate with the training fanouts, not full neighbours */
    int threads;         /* kernel threads (>= 1) */
    int sampler_threads; /* sampler/gather threads; -1 = same as threads, 0 = inline */
    uint64_t seed;
    int resume;                /* continue from RUNDIR/checkpoint.bin */
    int normalize_features;    /* L1 row normalisation (tiergnn/store.h) */
    uint64_t mem_bytes;        /* the whole process's budget; 0 = the cgroup's limit or none */
    uint64_t eval_chunk;       /* nodes per chunk of layer-wise evaluation (0 = automatic:
                                  ~64 MiB of input rows, at most 65536) */
    uint64_t checkpoint_every; /* write the checkpoints every N epochs and after the last;
                                  0 = after the last only */
    FILE *json;                /* JSON lines (NULL: none) */
    int progress;              /* live progress bar on stderr when it is a terminal */
    int verify;                /* compare every dataset file's CRC-32 with meta.txt first */
    /* check every feature row read from a disk against its CRC-32 (tiergnn/rowcrc.h): a file
     * changed after verification ends the run with an error naming it */
    int verify_reads;
    /* The strategy's own options (its table: tg_strategy_info), e.g. {"extractors", "3"}; an
     * option of another strategy is ignored with a note (scripts pass one set to all). */
    const tg_strategy_arg_t *strategy_args;
    int num_strategy_args;
    uint64_t batches_per_epoch; /* train only the first N batches of each epoch (0 = all) */
    uint64_t eval_max_nodes;    /* evaluate a fixed random sample of N nodes per split (0 = all) */
    /* Stop request (e.g. set by a SIGINT handler): checked after every batch. NULL = none. */
    volatile sig_atomic_t *stop;
    /* strategy "auto": the planner (engine/plan_profile.h) may take a strategy that changes the
     * sampled graph (hier) when it predicts it fastest; 0: exact strategies only */
    int allow_inexact;
} tg_train_opts_t;

typedef struct tg_train_result {
    uint64_t epochs_done;    /* epochs completed in total (including before a resume) */
    uint64_t best_epoch;     /* 1-based; 0 if never evaluated */
    double best_valid_acc;   /* at best_epoch */
    double best_valid_loss;  /* at best_epoch */
    double test_acc;         /* at best_epoch */
    double last_train_loss;  /* mean over the labelled seeds of the last epoch */
    double train_time_s;     /* wall time of all epochs of this invocation */
    uint64_t peak_rss_bytes; /* VmHWM at the end */
    const char *strategy;    /* the strategy that ran (static string) */
    int interrupted;         /* stopped by *stop (tg_train returned -EINTR) */
    uint64_t stopped_epoch;  /* then: epochs complete ... */
    uint64_t stopped_batch;  /* ... and batches done of the next one */
} tg_train_result_t;

/* GraphSAGE, 2 layers, hidden 256, fanouts 10,10, batch 1024, 10 epochs, Adam lr 0.01,
 * dropout 0.5, eval and checkpoint every epoch, 1 thread, sampler threads = threads, seed 0,
 * strategy auto, io_gap auto. */
void tg_train_opts_default(tg_train_opts_t *o);

/* Runs (or resumes) training; see the header comment. A NaN/Inf loss stops the run with -ERANGE
 * and a message naming the epoch and batch; RUNDIR keeps the last good checkpoint. An I/O error
 * or short read ends it with the io layer's message (file and offset). A stop request ends it
 * with -EINTR after writing a resumable checkpoint (res->interrupted = 1). */
int tg_train(const tg_train_opts_t *o, tg_train_result_t *res);

/* Evaluation of a checkpoint (RUNDIR/best.bin, or checkpoint.bin when which_last) on a split
 * (TG_FILE_TRAIN/VALID/TEST), the way training evaluated it (same normalisation, same mode).
 * Refuses a checkpoint of another dataset. */
typedef struct tg_eval_opts {
    int which_last;       /* 0: best.bin, 1: checkpoint.bin */
    int threads;          /* >= 1 */
    uint64_t eval_chunk;  /* 0 = automatic (see tg_train_opts_t) */
    uint64_t mem_bytes;   /* the budget as in training (0 = the cgroup's limit or none) */
    const char *strategy; /* NULL / "auto": memory if it fits mem_bytes, else gnndrive */
    uint64_t max_nodes;   /* evaluate a fixed random sample of N nodes of the split (0 = all) */
    const tg_strategy_arg_t *strategy_args; /* as in tg_train_opts_t */
    int num_strategy_args;
    int verify;       /* as in tg_train_opts_t: every file's CRC-32 first */
    int verify_reads; /* as in tg_train_opts_t: every feature row read from a disk */
} tg_eval_opts_t;

typedef struct tg_eval_result {
    double acc, loss;
    uint64_t count; /* labelled nodes (entries when multi-label) counted */
    uint64_t epoch; /* the checkpoint's epoch (1-based) */
} tg_eval_result_t;

int tg_eval(const char *dataset, const char *rundir, tg_file_id_t split, const tg_eval_opts_t *o,
            tg_eval_result_t *res);

/* Inference for every node, layer by layer with full neighbourhoods, over chunks of destination
 * nodes: layer l reads layer l-1's output rows of each chunk's sources and writes the chunk's
 * output rows, so only one chunk's block and rows are in RAM; intermediate layers live in
 * temporary files in RUNDIR (removed at the end). Outputs (little-endian, no header; shapes in
 * out_path + ".json"):
 *     out_path         predictions: int32[N] argmax class (multi-label: int32[N][C] of 0/1)
 *     out_path.emb     with embeddings: float32[N][E], the input of the last layer (after the
 *                      activation), E = tg_model_embed_dim
 * Each file is written through a .tmp, fsynced and renamed. The graph and features are read into
 * RAM when they fit in mem_bytes (0 = a quarter of physical RAM); otherwise indices come from
 * disk through io/ (indptr in RAM) and feature rows from the feature file (strategy auto). */
typedef struct tg_infer_opts {
    int embeddings;
    int which_last;
    int threads;
    uint64_t chunk_nodes; /* 0 = automatic (see tg_train_opts_t.eval_chunk) */
    uint64_t mem_bytes;   /* budget (0 = none; a quarter of RAM decides what goes in RAM) */
    int progress;
    const char *strategy;                   /* NULL / "auto", or a name of the strategy table */
    const tg_strategy_arg_t *strategy_args; /* as in tg_train_opts_t */
    int num_strategy_args;
    int verify;       /* as in tg_train_opts_t: every file's CRC-32 first */
    int verify_reads; /* as in tg_train_opts_t: every feature row read from a disk */
} tg_infer_opts_t;

int tg_infer(const char *dataset, const char *rundir, const char *out_path,
             const tg_infer_opts_t *o);

/* Checkpoint inspection (tests, tools): reads the engine record of path. */
typedef struct tg_ckpt_info {
    uint32_t version;
    uint64_t num_nodes, num_edges;
    uint32_t feat_dim, num_classes;
    uint32_t crc[TG_FILE_COUNT];
    uint64_t seed, batch_size;
    int num_layers;
    int64_t fanouts[TG_MAX_LAYERS];
    int normalize_features, eval_sampled;
    uint64_t epochs_done;
    uint64_t best_epoch;
    double best_valid_acc, best_valid_loss, test_at_best;
    double last_train_loss;
    /* A checkpoint written when a run stopped mid-epoch (format version 2): the first
     * epoch_batches batches of epoch epochs_done + 1 are trained, with these sums over their
     * labelled seeds (0 at an epoch boundary). */
    uint64_t epoch_batches;
    double epoch_loss_sum;
    uint64_t epoch_correct, epoch_count;
    /* The sampler's name ("" = node-wise; format version 3, written only for other samplers,
     * so that node-wise runs keep the version 2 bytes). */
    char sampler[16];
} tg_ckpt_info_t;

int tg_ckpt_read_info(const char *path, tg_ckpt_info_t *info);
/* Reads the engine record and creates the model stored after it. */
int tg_ckpt_load_model(const char *path, tg_ckpt_info_t *info, tg_model_t **model);

#ifdef __cplusplus
}
#endif
#endif
