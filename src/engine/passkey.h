/* engine/passkey - what identifies the batches of a pass, kept beyond the pass.
 *
 * A strategy that prepares a pass ahead (DiskGNN samples and packs epoch e + 1 while epoch e
 * trains, from tg_pass_t.next) keeps a copy of that pass's description and, when a pass comes,
 * asks whether it is the one prepared: the same seeds in the same order, seed, epoch, batch
 * size, first batch, layers, fanouts and sampler give the same batches (the epoch plan and the
 * sampler's RNG streams depend on nothing else).
 *
 *     tg_pass_key_t k = {0};
 *     tg_pass_key_set(&k, p->next);                 // copies the seeds: p->next may go
 *     ... later, pass q comes ...
 *     if (tg_pass_key_match(&k, q, 0)) use what was prepared for k;
 *     tg_pass_t kp = tg_pass_key_pass(&k);          // the pass k describes, to sample it
 *     tg_pass_key_free(&k);
 *
 * Ownership: the key owns its copy of the seeds and of the fanouts; the pass that
 * tg_pass_key_pass returns points into the key and is valid until the key is set again or freed.
 * It has no step and no next pass. A zeroed or freed key matches no pass.
 *
 * Module: engine/ (the strategy kit); owns nothing but the copy. */
#ifndef TG_ENGINE_PASSKEY_H
#define TG_ENGINE_PASSKEY_H

#include "engine-impl.h"

typedef struct tg_pass_key {
    uint64_t *seeds; /* (num_seeds) the copy; NULL: no pass */
    uint64_t num_seeds, batch_size, seed, epoch, first_batch;
    int num_layers;
    int64_t fanouts[TG_MAX_LAYERS];
    const tg_sampler_i *sampler;
} tg_pass_key_t;

/* k becomes pass p's key (what k held is freed first). -ENOMEM naming the seeds; -EINVAL when
 * p has more than TG_MAX_LAYERS layers. k is left freed on an error. */
int tg_pass_key_set(tg_pass_key_t *k, const tg_pass_t *p);

/* 1 when p's batches are k's, else 0. any_epoch: the epoch and the seeds' order may differ (a
 * strategy that serves several epochs with one sampling, e.g. DiskGNN's --reuse-samples, asks
 * only that the batches have the same shape: seed count, batch size, seed, first batch, layers,
 * fanouts, sampler). Time: O(num_seeds) without any_epoch, O(layers) with it. */
int tg_pass_key_match(const tg_pass_key_t *k, const tg_pass_t *p, int any_epoch);

/* The pass k describes (no step, no next pass; valid while k is). */
tg_pass_t tg_pass_key_pass(const tg_pass_key_t *k);

/* Frees the copy and zeroes k (a zeroed key may be freed again). */
void tg_pass_key_free(tg_pass_key_t *k);

#endif
