/* tiergnn/config.h - a training run's configuration as a file: RUNDIR/config.json.
 *
 * How to use:
 *     tg_train_opts_t o;
 *     tg_train_opts_default(&o);
 *     tg_train_config_t cf;                        // owns the strings o points into
 *     if (tg_train_config_read(&cf, "runs/a/config.json", &o) < 0) die(tg_errmsg());
 *     o.dataset = "data/cora"; o.out_dir = "runs/b";
 *     tg_train(&o, &res);                          // reproduces runs/a
 *     tg_train_config_destroy(&cf);
 *
 * The file is one JSON object, one key a line, written by tg_train at the start of a run (and
 * rewritten by a resume that changed a safe setting). Every setting that decides the trained
 * model is in it (model, optimiser, dropout, sampler and fanouts, batch size, normalisation,
 * strategy and its options, seed, evaluation) beside those that do not (epochs, threads, --mem,
 * evaluation cadence). A file may leave keys out: they keep the caller's values. Keys are listed
 * in docs/TRAINING.md, "config.json". */
#ifndef TIERGNN_CONFIG_H
#define TIERGNN_CONFIG_H

#include "tiergnn/engine.h"

#define TG_CONFIG_NAME "config.json"
#define TG_CONFIG_MAX_ARGS 64

/* What the options read from a file point into; valid until tg_train_config_destroy. */
typedef struct tg_train_config {
    char *text; /* the file, its strings unescaped in place */
    char strategy[64];
    tg_strategy_arg_t args[TG_CONFIG_MAX_ARGS];
    int nargs;
} tg_train_config_t;

/* Writes o as path (through path.tmp, fsync, rename). strategy: the strategy that runs (the
 * resolved name when o asked for auto). */
int tg_train_config_write(const char *path, const tg_train_opts_t *o, const char *strategy);

/* Reads path over o: the keys present replace o's values (the strategy options replace o's
 * list). An unknown key, a value of the wrong type or out of range is -EINVAL naming the file,
 * the key and what was expected. */
int tg_train_config_read(tg_train_config_t *cf, const char *path, tg_train_opts_t *o);
void tg_train_config_destroy(tg_train_config_t *cf);

/* The settings, in the file's order: key i's name, the command-line flag that sets it, and
 * whether a different value would change the trained model (then --resume refuses it). */
int tg_train_config_count(void);
const char *tg_train_config_key(int i);
const char *tg_train_config_flag(int i);
int tg_train_config_changes_model(int i);
/* Setting i of o as JSON text ("0.0005", "\"gcn\"", "[-1,-1]"). */
void tg_train_config_value(const tg_train_opts_t *o, int i, char *buf, size_t len);
/* The same for a message: a string without its quotes ("gcn"). */
void tg_train_config_show(const tg_train_opts_t *o, int i, char *buf, size_t len);
/* What differs in setting i, "--lr 0.01 there vs 0.1 here" (fanouts: per layer), into buf;
 * its length, 0 when the two agree. */
size_t tg_train_config_diff(const tg_train_opts_t *there, const tg_train_opts_t *here, int i,
                            char *buf, size_t len);
/* Copies setting i from src to dst (pointers are copied, not what they point to). */
void tg_train_config_copy(tg_train_opts_t *dst, const tg_train_opts_t *src, int i);

/* Whether a run of strategy `from` may continue with strategy `to` ("auto" allowed): both give
 * the same batches, order and checkpoints (TG_STRAT_EXACT). */
int tg_train_config_strategy_exact(const char *from, const char *to);

/* The strategy options of a and b as sets of name=value: 1 when equal. */
int tg_train_config_same_args(const tg_strategy_arg_t *a, int na, const tg_strategy_arg_t *b,
                              int nb);

/* --resume against the run's config.json (file): every setting that changes the trained model
 * and differs is refused (-EINVAL, "settings differ: --weight-decay 0.0005 in config.json vs 0
 * here; ..."); the strategy may change between exact ones, and then its options too. */
int tg_train_config_check_resume(const tg_train_opts_t *file, const char *file_strategy,
                                 const tg_train_opts_t *now, const char *now_strategy,
                                 const char *path);

#endif
