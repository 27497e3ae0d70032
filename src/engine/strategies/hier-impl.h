/* strategies/hier-impl.h - what hier.c (the strategy) and hier_measure.c (its measure for the
 * planner) share: the options, the partition a run uses, N_d's sizing and the RNG streams of the
 * schedule. Internal to the strategy. */
#ifndef TG_STRATEGIES_HIER_IMPL_H
#define TG_STRATEGIES_HIER_IMPL_H

#include "../engine-impl.h"
#include "../plan_profile.h"
#include "../xpass.h"
#include "tiergnn/megabatch.h"
#include "tiergnn/partition.h"

typedef struct {
    tg_xpass_cfg_t x; /* evaluation passes' extraction */
    int64_t parts, method, passes, dynamic_parts;
    double static_ratio;
} hier_cfg_t;

/* The epoch' of mega-batch i, pass j: the RNG streams of its shuffles and batches. */
uint64_t tg_hier_sub_epoch(uint64_t epoch, uint64_t i, uint64_t j);
/* The parts of epoch's schedule in their shuffled order into order[0..P) (-ENOMEM). */
int tg_hier_parts_order(uint32_t P, uint64_t seed, uint64_t epoch, uint32_t *order);
/* The params of the partition a run with so uses on ds (tg_part_find), its options into a. */
int tg_hier_find_params(const tg_dataset_t *ds, const tg_strategy_opts_t *so, char *buf, size_t len,
                        tg_part_assign_opts_t *a);
/* The most parts, at most want, whose two mega-batches fit left (limited 0: no limit), the
 * largest parts' nodes, edges and pairs summed (the buffers' bounds) into *t, *ed, *np; L's
 * geometry (P, N, S, row, ntrain, psize, pedge, pspairs, ss_edges) is read. */
uint64_t tg_hier_fit_parts(const tg_mb_t *L, uint64_t want, int limited, uint64_t left, uint64_t *t,
                           uint64_t *ed, uint64_t *np);
/* The input matrices a run holds at once (tg_strategy_i.batches_in_flight). */
int tg_hier_in_flight(const tg_strategy_opts_t *so);
/* tg_strategy_i.plan_measure (hier_measure.c). */
int tg_hier_plan_measure(const tg_dataset_t *ds, const tg_strategy_opts_t *so,
                         const tg_cost_measure_t *mx, tg_cost_profile_t *prof);

#endif
