/* engine/passkey: a pass's description kept beyond the pass (passkey.h). */
#include "passkey.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tg_pass_key_free(tg_pass_key_t *k)
{
    free(k->seeds);
    memset(k, 0, sizeof *k);
}

int tg_pass_key_set(tg_pass_key_t *k, const tg_pass_t *p)
{
    tg_pass_key_free(k);
    if (p->num_layers < 0 || p->num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "pass key: %d layers (at most %d)", p->num_layers, TG_MAX_LAYERS);
    k->seeds = malloc(p->num_seeds ? p->num_seeds * sizeof *k->seeds : 1);
    if (!k->seeds)
        return tg_err(-ENOMEM, "pass key: out of memory for a seed order of %llu seeds",
                      (unsigned long long)p->num_seeds);
    if (p->num_seeds) memcpy(k->seeds, p->seeds, p->num_seeds * sizeof *k->seeds);
    k->num_seeds = p->num_seeds;
    k->batch_size = p->batch_size;
    k->seed = p->seed;
    k->epoch = p->epoch;
    k->first_batch = p->first_batch;
    k->num_layers = p->num_layers;
    k->sampler = p->sampler;
    for (int l = 0; l < p->num_layers; l++)
        k->fanouts[l] = p->fanouts[l];
    return 0;
}

int tg_pass_key_match(const tg_pass_key_t *k, const tg_pass_t *p, int any_epoch)
{
    if (!k->seeds || k->num_seeds != p->num_seeds || k->batch_size != p->batch_size ||
        k->seed != p->seed || k->num_layers != p->num_layers || k->first_batch != p->first_batch ||
        k->sampler != p->sampler)
        return 0;
    if (!any_epoch && k->epoch != p->epoch) return 0;
    for (int l = 0; l < p->num_layers; l++)
        if (k->fanouts[l] != p->fanouts[l]) return 0;
    if (any_epoch) return 1;
    return p->num_seeds == 0 || memcmp(k->seeds, p->seeds, p->num_seeds * sizeof *p->seeds) == 0;
}

tg_pass_t tg_pass_key_pass(const tg_pass_key_t *k)
{
    return (tg_pass_t){.seeds = k->seeds,
                       .num_seeds = k->num_seeds,
                       .batch_size = k->batch_size,
                       .seed = k->seed,
                       .epoch = k->epoch,
                       .first_batch = k->first_batch,
                       .num_layers = k->num_layers,
                       .fanouts = k->fanouts,
                       .sampler = k->sampler};
}
