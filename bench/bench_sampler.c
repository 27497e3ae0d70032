/* bench_sampler - sampling throughput of tg_sampler_sample over an epoch's batches, in sampled
 * edges per second per core and batches per second (bench/README.md, "Sampler throughput").
 *
 *     bench_sampler DATASET [--threads 1,2] [--rounds 3] [--batch 1024] [--fanouts 10,10,10]
 *                   [--seed 1] [--epoch 0] [--batches 0]
 *
 * The adjacency is loaded into RAM (tg_adj_memory_open: indices widened to u64), the training
 * split is shuffled with the RNG of (seed, epoch) and cut into batches of --batch seeds, exactly
 * as `tiergnn train` does; --batches N limits the epoch to its first N batches (0 = all). With T
 * threads, each thread has its own sampler and samples batches t, t+T, t+2T, ... (the loader's
 * assignment) with the RNG of (seed, epoch, b), counts the batch and frees it. No features are
 * gathered: this is the sampler alone.
 *
 * Rounds interleave the thread counts (round r runs every --threads value once, the list
 * reversed on odd rounds), so load from other processes on the machine hits them alike. Printed
 * per thread count: min and median over rounds of the epoch's wall time, and the rates they give:
 * sampled edges (the sum of the blocks' num_edges: one per sampled neighbour) per second per
 * core (= per thread: T threads are meant for T cores), and batches per second. Every round must
 * produce the same edge and node totals (a check that the batches do not depend on the thread
 * count).
 */
#include "tiergnn/data.h"
#include "tiergnn/graph.h"
#include "tiergnn/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_T 64

_Noreturn static void die(const char *what)
{
    fprintf(stderr, "bench_sampler: %s\n", what);
    exit(1);
}

typedef struct {
    tg_adj_t *adj;
    const uint64_t *order;
    uint64_t nseeds, bsz, nb, seed, epoch;
    int L, T;
    const int64_t *fan;
} job_t;

typedef struct {
    const job_t *j;
    int t;
    uint64_t edges, nodes, batches;
    int rc;
    char msg[256];
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    const job_t *j = w->j;
    tg_sampler_t *s;
    if ((w->rc = tg_sampler_create(&s, j->adj, j->L, j->fan)) < 0) {
        snprintf(w->msg, sizeof w->msg, "%s", tg_errmsg());
        return NULL;
    }
    for (uint64_t b = (uint64_t)w->t; b < j->nb; b += (uint64_t)j->T) {
        uint64_t first = b * j->bsz, n = TG_MIN(j->bsz, j->nseeds - first);
        tg_rng_t r;
        tg_sampler_batch_rng(&r, j->seed, j->epoch, b);
        tg_batch_t bt;
        if ((w->rc = tg_sampler_sample(s, j->order + first, (size_t)n, &r, &bt)) < 0) {
            snprintf(w->msg, sizeof w->msg, "batch %llu: %s", (unsigned long long)b, tg_errmsg());
            break;
        }
        for (int l = 0; l < bt.num_layers; l++)
            w->edges += bt.blocks[l].num_edges;
        w->nodes += bt.num_nodes;
        w->batches++;
        tg_batch_free(&bt);
    }
    tg_sampler_destroy(s);
    return NULL;
}

/* One epoch on T threads: wall seconds, totals into *edges / *nodes. */
static double run_epoch(job_t *j, int T, uint64_t *edges, uint64_t *nodes)
{
    worker_t w[MAX_T];
    pthread_t th[MAX_T];
    j->T = T;
    double t0 = tg_now();
    for (int t = 0; t < T; t++) {
        w[t] = (worker_t){.j = j, .t = t};
        if (pthread_create(&th[t], NULL, worker, &w[t]) != 0) die("cannot start a thread");
    }
    *edges = *nodes = 0;
    uint64_t batches = 0;
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    double dt = tg_now() - t0;
    for (int t = 0; t < T; t++) {
        if (w[t].rc < 0) die(w[t].msg);
        *edges += w[t].edges;
        *nodes += w[t].nodes;
        batches += w[t].batches;
    }
    if (batches != j->nb) die("check failed: not every batch was sampled");
    return dt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        die("usage: bench_sampler DATASET [options] (see the comment at the top of "
            "bench/bench_sampler.c)");
    const char *dataset = argv[1];
    int nt = 2, rounds = 3, L = 3;
    int threads[MAX_T] = {1, 2};
    int64_t fan[TG_MAX_LAYERS] = {10, 10, 10};
    uint64_t bsz = 1024, seed = 1, epoch = 0, max_batches = 0;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) die("every option takes a value");
        const char *k = argv[i], *v = argv[i + 1];
        uint64_t u = 0;
        if (!strcmp(k, "--fanouts")) {
            if (tg_fanouts_parse(v, fan, &L) < 0) die(tg_errmsg());
            continue;
        }
        if (!strcmp(k, "--threads")) {
            nt = 0;
            for (const char *p = v; *p;) {
                char *end;
                long x = strtol(p, &end, 10);
                if (end == p || x < 1 || x > MAX_T || nt == MAX_T || (*end && *end != ','))
                    die("--threads takes a list like 1,2 (each 1..64)");
                threads[nt++] = (int)x;
                p = *end ? end + 1 : end;
            }
            if (nt == 0) die("--threads takes a list like 1,2");
            continue;
        }
        if (tg_parse_u64(v, &u, k) < 0) die(tg_errmsg());
        if (!strcmp(k, "--rounds"))
            rounds = (int)TG_MIN(u, 1000);
        else if (!strcmp(k, "--batch"))
            bsz = u;
        else if (!strcmp(k, "--seed"))
            seed = u;
        else if (!strcmp(k, "--epoch"))
            epoch = u;
        else if (!strcmp(k, "--batches"))
            max_batches = u;
        else
            die("unknown option (see the comment at the top of bench/bench_sampler.c)");
    }
    if (rounds < 1 || bsz < 1) die("option out of range");

    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, dataset, TG_OPEN_CHECK_SIZES) < 0) die(tg_errmsg());
    uint64_t *order, ntrain;
    tg_adj_t *adj = NULL;
    double t0 = tg_now();
    if (tg_dataset_load_split(ds, TG_FILE_TRAIN, &order, &ntrain) < 0 ||
        tg_adj_memory_open(&adj, ds) < 0)
        die(tg_errmsg());
    double t_open = tg_now() - t0;
    if (ntrain == 0) die("the training split is empty");
    tg_sampler_shuffle_epoch(order, ntrain, seed, epoch);
    job_t j = {.adj = adj,
               .order = order,
               .nseeds = ntrain,
               .bsz = bsz,
               .seed = seed,
               .epoch = epoch,
               .L = L,
               .fan = fan};
    j.nb = (ntrain + bsz - 1) / bsz;
    if (max_batches && max_batches < j.nb) {
        j.nb = max_batches;
        j.nseeds = TG_MIN(ntrain, j.nb * bsz);
    }
    char fb[64] = "";
    for (int l = 0; l < L; l++)
        snprintf(fb + strlen(fb), sizeof fb - strlen(fb), "%s%lld", l ? "," : "",
                 (long long)fan[l]);
    printf("%s: %llu nodes, %llu edges; adjacency in RAM (loaded in %.2f s)\n", dataset,
           (unsigned long long)adj->num_nodes, (unsigned long long)adj->num_edges, t_open);
    printf("epoch %llu: %llu batches of %llu seeds (of %llu training nodes), fanouts %s, %d "
           "round(s)\n",
           (unsigned long long)epoch, (unsigned long long)j.nb, (unsigned long long)bsz,
           (unsigned long long)ntrain, fb, rounds);

    double *secs = malloc((size_t)nt * (size_t)rounds * sizeof(double));
    if (!secs) die("out of memory");
    uint64_t edges0 = 0, nodes0 = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < nt; i++) {
            int k = r % 2 ? nt - 1 - i : i;
            uint64_t e, n;
            double dt = run_epoch(&j, threads[k], &e, &n);
            if (r == 0 && i == 0) {
                edges0 = e;
                nodes0 = n;
            } else if (e != edges0 || n != nodes0) {
                die("check failed: the epoch's batches differ between runs");
            }
            secs[k * rounds + r] = dt;
            printf("round %d, %d thread(s): %.2f s, %.2f M edges/s/core\n", r + 1, threads[k], dt,
                   (double)e / dt / threads[k] * 1e-6);
            fflush(stdout);
        }
    }
    printf("per batch: %.0f sampled edges, %.0f nodes\n", (double)edges0 / (double)j.nb,
           (double)nodes0 / (double)j.nb);
    printf("%-8s %10s %10s %18s %18s %12s %12s\n", "threads", "min s", "median s",
           "Medges/s/core (max)", "Medges/s/core (med)", "batches/s", "batches/s");
    printf("%-8s %10s %10s %18s %18s %12s %12s\n", "", "", "", "", "", "(max)", "(med)");
    for (int k = 0; k < nt; k++) {
        double *v = secs + k * rounds;
        qsort(v, (size_t)rounds, sizeof *v, cmp_double);
        double mn = v[0],
               md = rounds % 2 ? v[rounds / 2] : 0.5 * (v[rounds / 2 - 1] + v[rounds / 2]);
        double e = (double)edges0 * 1e-6 / threads[k];
        printf("%-8d %10.2f %10.2f %18.2f %18.2f %12.1f %12.1f\n", threads[k], mn, md, e / mn,
               e / md, (double)j.nb / mn, (double)j.nb / md);
    }
    double la[3];
    if (getloadavg(la, 3) == 3)
        printf("load average at the end: %.2f %.2f %.2f (other processes share the cores)\n", la[0],
               la[1], la[2]);
    free(secs);
    free(order);
    tg_adj_destroy(adj);
    tg_dataset_close(ds);
    return 0;
}
