/* bench_changeset - cost of Ginex's changeset precomputation (tg_cs_compute) against the
 * superbatch size S (bench/README.md, "Changeset precomputation cost against S").
 *
 *     bench_changeset [--nodes 4000000] [--distinct 300000] [--entries 800000] [--alpha 0.8]
 *                     [--sizes 5,10,20,40,80] [--rounds 3] [--seed 1]
 *
 * A synthetic trace shaped like the sampled inputs of the Ginex acceptance setup: every batch
 * holds --distinct distinct node ids, drawn with a power law over node ranks (P(rank <= r) ~
 * r^(1 - alpha), as sampling favours high-degree nodes), the ranks scattered over the ids by a
 * fixed permutation. One trace of max(sizes) batches is drawn; superbatch S is its first S
 * batches. For each S, rounds of: tg_cs_init_state (entries rows) then tg_cs_compute from it,
 * timed apart; printed are the min and median over rounds of the compute's time, per superbatch,
 * per batch and per access, the misses (and as a share of the accesses), the rows inserted, and
 * the misses of LRU of the same size from the same state for comparison. Before timing, each
 * result is replayed (every access a hit exactly when not counted a miss, in_pos naming the row,
 * out_ids cached, the size within entries, the final state reached) and must not miss more than
 * LRU.
 */
#include "tiergnn/changeset.h"
#include "tiergnn/util.h"

#define BENCH_NAME "bench_changeset"
#include "bench_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 32

/* LRU: a doubly linked list over node ids, most recent at the head. */
typedef struct {
    uint32_t *prv, *nxt, head, tail;
} lru_t;

#define NIL UINT32_MAX

static void lru_unlink(lru_t *l, uint32_t v)
{
    if (l->prv[v] != NIL)
        l->nxt[l->prv[v]] = l->nxt[v];
    else
        l->head = l->nxt[v];
    if (l->nxt[v] != NIL)
        l->prv[l->nxt[v]] = l->prv[v];
    else
        l->tail = l->prv[v];
}

static void lru_push(lru_t *l, uint32_t v)
{
    l->prv[v] = NIL, l->nxt[v] = l->head;
    if (l->head != NIL)
        l->prv[l->head] = v;
    else
        l->tail = v;
    l->head = v;
}

/* LRU of `entries` rows from init over the trace (inserting every miss); its misses. */
static uint64_t lru_misses(uint32_t N, const tg_cs_trace_t *t, uint64_t entries,
                           const uint32_t *init, uint64_t n0)
{
    lru_t l = {xmalloc((size_t)N * 4), xmalloc((size_t)N * 4), NIL, NIL};
    unsigned char *in = calloc(N, 1);
    if (!in) die("out of memory");
    uint64_t n = 0, misses = 0;
    for (uint64_t k = n0; k-- > 0; n++) {
        in[init[k]] = 1;
        lru_push(&l, init[k]);
    }
    for (uint64_t j = 0; j < t->off[t->iters]; j++) {
        uint32_t v = t->ids[j];
        if (in[v]) {
            lru_unlink(&l, v);
            lru_push(&l, v);
            continue;
        }
        misses++;
        if (!entries) continue;
        if (n == entries) {
            in[l.tail] = 0, n--;
            lru_unlink(&l, l.tail);
        }
        in[v] = 1, n++;
        lru_push(&l, v);
    }
    free(l.prv);
    free(l.nxt);
    free(in);
    return misses;
}

/* Replays cs from init (see the top); dies on the first inconsistency. */
static void replay(uint32_t N, const tg_cs_trace_t *t, const tg_cs_t *cs, uint64_t entries,
                   const uint32_t *init, uint64_t n0)
{
    unsigned char *in = calloc(N, 1);
    if (!in) die("out of memory");
    uint64_t n = n0;
    for (uint64_t k = 0; k < n0; k++)
        in[init[k]] = 1;
    for (uint32_t i = 0; i < t->iters; i++) {
        uint64_t a = t->off[i], miss = 0;
        for (uint64_t j = a; j < t->off[i + 1]; j++)
            miss += !in[t->ids[j]];
        if (miss != cs->misses[i]) die("replay: a miss count differs");
        for (uint64_t k = cs->out_off[i]; k < cs->out_off[i + 1]; k++) {
            if (!in[cs->out_ids[k]]) die("replay: an evicted row was not cached");
            in[cs->out_ids[k]] = 0, n--;
        }
        for (uint64_t k = cs->in_off[i]; k < cs->in_off[i + 1]; k++) {
            uint32_t v = cs->in_ids[k];
            if (in[v] || t->ids[a + cs->in_pos[k]] != v) die("replay: a bad inserted row");
            in[v] = 1, n++;
        }
        if (n > entries) die("replay: the cache outgrew its entries");
    }
    if (n != cs->num_final) die("replay: the final state's size differs");
    for (uint64_t k = 0; k < cs->num_final; k++)
        if (!in[cs->final[k]]) die("replay: the final state differs");
    free(in);
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    uint64_t N = 4000000, distinct = 300000, entries = 800000, seed = 1, rounds = 3;
    double alpha = 0.8;
    uint32_t sizes[MAX_SIZES] = {5, 10, 20, 40, 80}, nsizes = 5;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("an option lacks its value");
        if (!strcmp(k, "--nodes"))
            N = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--distinct"))
            distinct = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--entries"))
            entries = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--alpha"))
            alpha = strtod(v, NULL);
        else if (!strcmp(k, "--rounds"))
            rounds = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--sizes")) {
            nsizes = 0;
            for (char *p = (char *)v; *p && nsizes < MAX_SIZES; p += *p == ',')
                sizes[nsizes++] = (uint32_t)strtoul(p, &p, 10);
        } else
            die("unknown option (see the comment at the top of bench/bench_changeset.c)");
    }
    if (!N || N > UINT32_MAX || !distinct || distinct > N || !rounds || !nsizes || alpha <= 0 ||
        alpha >= 1)
        die("bad --nodes, --distinct, --rounds, --sizes or --alpha (0 < alpha < 1)");
    uint32_t smax = 0;
    for (uint32_t k = 0; k < nsizes; k++)
        smax = TG_MAX(smax, sizes[k]);
    if ((uint64_t)smax * distinct > UINT32_MAX - 1) die("trace too long for u32 positions");

    uint64_t *off = xmalloc((smax + 1) * sizeof *off);
    uint32_t *ids = xmalloc((size_t)smax * distinct * sizeof *ids);
    double t0 = tg_now();
    power_law_trace((uint32_t)N, (uint32_t)distinct, alpha, smax, seed, off, ids);
    printf(
        "trace: %u batches of %llu distinct ids out of %llu nodes (alpha %.2f), drawn in %.1f s; "
        "cache of %llu rows\n",
        smax, (unsigned long long)distinct, (unsigned long long)N, alpha, tg_now() - t0,
        (unsigned long long)entries);
    tg_cs_ws_t *ws;
    if (tg_cs_ws_create(&ws, N, NULL) < 0) die(tg_errmsg());
    printf("| S | accesses | init state | compute min / median | per batch | per access | misses "
           "| inserted | LRU misses |\n|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (uint32_t z = 0; z < nsizes; z++) {
        tg_cs_trace_t t = {.iters = sizes[z], .off = off, .ids = ids};
        uint64_t T = off[sizes[z]], n0;
        double *sec = xmalloc(rounds * sizeof *sec), init_sec = 1e30;
        tg_cs_t cs;
        uint32_t *c0 = NULL;
        for (uint64_t r = 0; r < rounds; r++) {
            free(c0);
            double a = tg_now();
            if (tg_cs_init_state(ws, &t, entries, NULL, 0, &c0, &n0) < 0) die(tg_errmsg());
            double b = tg_now();
            if (r) tg_cs_free(&cs);
            if (tg_cs_compute(ws, &t, entries, c0, n0, &cs, NULL) < 0) die(tg_errmsg());
            sec[r] = tg_now() - b;
            init_sec = TG_MIN(init_sec, b - a);
        }
        replay((uint32_t)N, &t, &cs, entries, c0, n0);
        uint64_t lru = lru_misses((uint32_t)N, &t, entries, c0, n0);
        if (cs.total_misses > lru) die("more misses than LRU");
        qsort(sec, rounds, sizeof *sec, cmp_dbl);
        double best = sec[0], med = sec[rounds / 2];
        printf("| %u | %.2f M | %.1f ms | %.0f / %.0f ms | %.1f ms | %.1f ns | %.2f M (%.1f%%) | "
               "%.2f M | %.2f M |\n",
               sizes[z], T / 1e6, init_sec * 1e3, best * 1e3, med * 1e3, best * 1e3 / sizes[z],
               best * 1e9 / (double)TG_MAX(T, 1), cs.total_misses / 1e6,
               100.0 * cs.total_misses / (double)TG_MAX(T, 1), cs.in_off[sizes[z]] / 1e6,
               lru / 1e6);
        fflush(stdout);
        tg_cs_free(&cs);
        free(c0);
        free(sec);
    }
    tg_cs_ws_destroy(ws);
    free(off);
    free(ids);
    return 0;
}
