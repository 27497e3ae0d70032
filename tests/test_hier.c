/* The hier strategy (HierBatching): with one part per mega-batch and full neighbourhoods, every
 * batch's blocks hold exactly the edges of the mega-batch subgraph - a node's in-neighbours in
 * its part, plus those in the static cache (the highest in-degree nodes that some node of the
 * part reaches), and for a static node its in-neighbours in the mega-batch - and every row of X
 * is the feature file's; the epoch has the batches epoch_batches says, over every training node
 * once per pass; the degree figures add up; the budget holds and a budget too small for two
 * mega-batches is refused naming --mem; evaluation passes take the static cache's rows too.
 * Resume after every batch: test_strategy. */
#include "test_engine_common.h"

#include "engine/engine-impl.h"
#include "engine/strategies/hier.h"
#include "tiergnn/partition.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[4000], ds[4200];
#define N 2000u
#define DIM 8u
#define PARTS 10u
#define STATIC 100u /* --static-ratio 0.05 */

static uint64_t *ip, *ix;  /* the original CSC */
static uint32_t *part_of;  /* original id -> part */
static uint8_t *is_static; /* original id -> in the static cache */

static int open_run(tg_run_t *r, uint64_t mem, const char *dynamic_parts, const char *passes)
{
    tg_strategy_arg_t args[] = {{"io-depth", "8"},
                                {"io-gap", "0"},
                                {"chunk-rows", "64"},
                                {"parts", "10"},
                                {"method", "stream"},
                                {"static-ratio", "0.05"},
                                {"dynamic-parts", dynamic_parts},
                                {"passes", passes}};
    tg_run_opts_t o = {.dataset = ds,
                       .strategy = "hier",
                       .args = args,
                       .nargs = 8,
                       .mem_bytes = mem,
                       .threads = 1};
    tg_strategy_opts_default(&o.sopts);
    o.sopts.sampler_threads = 2;
    return tg_run_open_opts(r, &o);
}

/* The expectations: the partition's parts by original id, the static nodes (highest in-degree,
 * ties to the lower id, as the strategy picks them). */
static void expectations(void)
{
    tg_dataset_t *d;
    if (tg_dataset_open(&d, ds, 0) < 0) exit(1);
    TG_CHECK_OK(tg_dataset_load_indptr(d, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(d, &ix));
    tg_part_t *p = NULL;
    TG_CHECK_OK(tg_part_open(&p, d, "parts=10,method=stream,seed=1,imbalance=0.03,passes=4"));
    uint64_t *o2n = malloc(N * 8);
    TG_CHECK_OK(tg_part_old_ids(p, 0, N, o2n));
    part_of = malloc(N * sizeof *part_of);
    for (uint64_t n = 0; n < N; n++)
        part_of[o2n[n]] = tg_part_of(p, n);
    free(o2n);
    tg_part_close(p);
    tg_dataset_close(d);
    /* (-degree, id) order */
    uint64_t *key = malloc(N * 8);
    for (uint64_t v = 0; v < N; v++)
        key[v] = ((uint64_t)(0xffffffffu - (uint32_t)(ip[v + 1] - ip[v])) << 32) | v;
    qsort(key, N, 8, cmp_u64_);
    is_static = calloc(N, 1);
    for (uint64_t i = 0; i < STATIC; i++)
        is_static[key[i] & 0xffffffffu] = 1;
    free(key);
}

typedef struct {
    tg_store_t *ref;
    float *Xref;
    uint64_t steps, bad_rows, bad_edges, seeds_seen;
    uint8_t *seen; /* training nodes seen as seeds this pass */
    uint8_t *in_m; /* scratch: the mega-batch's nodes */
} check_t;

/* The mega-batch of a batch when each holds one part: T = the seeds' part, and the static nodes
 * some node of T has as an in-neighbour. */
static void mega_of(check_t *c, uint32_t k)
{
    memset(c->in_m, 0, N);
    for (uint64_t v = 0; v < N; v++)
        if (part_of[v] == k) {
            c->in_m[v] = 1;
            for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
                if (is_static[ix[e]]) c->in_m[ix[e]] |= 2;
        }
}

static int cmp_u64_s(const void *a, const void *b)
{
    return cmp_u64_(a, b);
}

static int check_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, DIM, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    c->steps++;
    uint32_t k = part_of[b->nodes[0]];
    for (uint32_t i = 0; i < b->num_seeds; i++) {
        if (part_of[b->nodes[i]] != k) c->bad_edges++; /* a batch's seeds share its part */
        if (c->seen[b->nodes[i]]++) c->bad_edges++;
        c->seeds_seen++;
    }
    mega_of(c, k);
    uint64_t want[256], got[256];
    for (int l = 0; l < b->num_layers; l++) {
        const tg_block_t *bl = &b->blocks[l];
        for (uint32_t i = 0; i < bl->num_dst; i++) {
            uint64_t v = b->nodes[i], nw = 0, ng = 0;
            if (!c->in_m[v]) c->bad_edges++;
            for (uint64_t e = ip[v]; e < ip[v + 1] && nw < 256; e++)
                if (c->in_m[ix[e]]) want[nw++] = ix[e];
            for (uint64_t e = bl->indptr[i]; e < bl->indptr[i + 1] && ng < 256; e++)
                got[ng++] = b->nodes[bl->indices[e]];
            qsort(want, nw, 8, cmp_u64_s);
            qsort(got, ng, 8, cmp_u64_s);
            if (nw != ng || memcmp(want, got, nw * 8)) c->bad_edges++;
        }
    }
    return 0;
}

/* one_part: each mega-batch holds one part (the subgraph is checked edge by edge) */
static void train_pass(tg_run_t *r, uint64_t epoch, const char *what, uint64_t passes, int one_part)
{
    static const int64_t all[2] = {TG_FANOUT_ALL, TG_FANOUT_ALL};
    check_t c = {0};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r->ds, &(tg_store_opts_t){0}));
    c.seen = calloc(N, 1);
    c.in_m = calloc(N, 1);
    tg_pass_t p = {.seeds = r->split[0],
                   .num_seeds = r->split_n[0],
                   .batch_size = 32,
                   .seed = 5,
                   .epoch = epoch,
                   .num_layers = 2,
                   .fanouts = all,
                   .allow_out_of_order = 1,
                   .training = 1,
                   .step = check_step,
                   .ctx = &c};
    uint64_t nb = 0;
    TG_CHECK_OK(r->strat_i->epoch_batches(r->strat, &p, &nb));
    tg_pass_stats_t st;
    TG_CHECK_OK(tg_run_pass(r, &p, &st));
    tg_hier_figures_t f;
    TG_CHECK_OK(tg_hier_figures(&st, &f));
    fprintf(stderr,
            "  %s: %llu batches, %llu mega-batches, mean degree %.2f full, %.2f in, "
            "+%.2f static\n",
            what, (unsigned long long)c.steps, (unsigned long long)f.megabatches,
            (double)f.deg_full / (double)f.nodes, (double)f.deg_induced / (double)f.nodes,
            (double)f.deg_static / (double)f.nodes);
    TG_CHECK_EQ_U64(c.steps, nb);
    TG_CHECK_EQ_U64(st.steps, nb);
    TG_CHECK_EQ_U64(st.next_batch, nb);
    TG_CHECK_EQ_U64(c.bad_rows, 0);
    TG_CHECK_EQ_U64(c.seeds_seen, r->split_n[0] * passes);
    if (one_part) TG_CHECK_EQ_U64(c.bad_edges, 0);
    TG_CHECK(f.megabatches >= 1 && f.megabatches <= PARTS);
    TG_CHECK(f.deg_induced + f.deg_static <= f.deg_full);
    TG_CHECK(f.deg_induced > 0);
    if (f.dynamic_parts < PARTS) { /* the static cache adds what the mega-batch lacks */
        TG_CHECK(f.deg_static > 0);
        TG_CHECK(st.have_cache && st.cache_hits > 0 && st.cache_hits < st.cache_lookups);
    } else { /* one mega-batch holds the whole graph */
        TG_CHECK_EQ_U64(f.deg_induced, f.deg_full);
    }
    /* two tiers: the static cache's rows, then the mega-batch's */
    TG_CHECK(st.ntiers == 2 && !strcmp(st.tiers[0].name, "hier-static") &&
             !strcmp(st.tiers[1].name, "hier-megabatch"));
    /* the report: the object "megabatch" and the human line's clause */
    tg_pass_stats_t sum = {0};
    tg_pass_stats_add(r, &sum, &st);
    tg_pass_stats_add(r, &sum, &st);
    tg_hier_figures_t f2;
    TG_CHECK_OK(tg_hier_figures(&sum, &f2));
    TG_CHECK_EQ_U64(f2.megabatches, 2 * f.megabatches);
    TG_CHECK_EQ_U64(f2.dynamic_parts, f.dynamic_parts);
    char line[1024] = "";
    tg_pass_report(r, &st, NULL, line, sizeof line);
    char want[128];
    snprintf(want, sizeof want, "; %llu mega-batches of %llu parts, loaded in ",
             (unsigned long long)f.megabatches, (unsigned long long)f.dynamic_parts);
    if (strncmp(line, want, strlen(want)) || !strstr(line, " from the static cache"))
        TG_FAIL("line: %s", line);
    tg_json_t j;
    tg_json_begin(&j);
    tg_pass_report(r, &st, &j, NULL, 0);
    char *text = NULL;
    tg_json_end(&j, NULL, &text);
    static const char *keys[] = {"\"megabatch\":{\"megabatches\":",
                                 "\"dynamic_parts\":",
                                 "\"static_nodes\":",
                                 "\"nodes\":",
                                 "\"load_s\":",
                                 "\"load_wait_s\":",
                                 "\"mean_degree_full\":",
                                 "\"mean_degree_induced\":",
                                 "\"mean_degree_static\":"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!text || !strstr(text, keys[i])) TG_FAIL("no %s in %s", keys[i], text ? text : "");
    free(text);
    TG_CHECK(st.have_io && st.io_read_bytes > 0);
    tg_store_release(c.ref);
    free(c.Xref);
    free(c.seen);
    free(c.in_m);
}

static int rows_step(void *ctx, const tg_batch_t *b, const float *X)
{
    check_t *c = ctx;
    int eq = batch_rows_equal(c->ref, b, X, DIM, &c->Xref);
    if (eq < 0) return eq;
    c->bad_rows += !eq;
    c->steps++;
    return 0;
}

/* An evaluation pass (the original graph, sampled over the whole of it) after training set the
 * static cache up: its rows come from that cache where it holds them (tier "hier-static"), the
 * rest from the feature file, every row the file's. */
static void eval_pass(tg_run_t *r)
{
    static const int64_t f[2] = {5, 5};
    check_t c = {0};
    TG_CHECK_OK(tg_store_memory_open(&c.ref, r->ds, &(tg_store_opts_t){0}));
    tg_pass_t p = {.seeds = r->split[1],
                   .num_seeds = r->split_n[1],
                   .batch_size = 32,
                   .seed = 9,
                   .num_layers = 2,
                   .fanouts = f,
                   .step = rows_step,
                   .ctx = &c};
    tg_pass_stats_t st;
    TG_CHECK_OK(tg_run_pass(r, &p, &st));
    TG_CHECK(c.steps > 0 && c.bad_rows == 0);
    TG_CHECK(st.ntiers >= 2 && !strcmp(st.tiers[0].name, "hier-static"));
    if (st.ntiers >= 2) {
        fprintf(stderr, "  evaluation: %llu of %llu rows from the static cache\n",
                (unsigned long long)st.tiers[0].hits, (unsigned long long)st.tiers[0].lookups);
        TG_CHECK(st.tiers[0].hits > 0 && st.tiers[0].hits < st.tiers[0].lookups);
    }
    tg_store_release(c.ref);
    free(c.Xref);
}

TG_TEST(megabatch_subgraph_and_rows)
{
    tg_run_t r;
    if (open_run(&r, 0, "1", "1") < 0) {
        TG_FAIL("open: %s", tg_errmsg());
        return;
    }
    expectations();
    train_pass(&r, 0, "one part per mega-batch", 1, 1);
    train_pass(&r, 1, "the next epoch (another shuffle)", 1, 1);
    eval_pass(&r);
    tg_run_close(&r);
    /* two passes: every training node twice; several parts per mega-batch */
    if (open_run(&r, 0, "3", "2") < 0) {
        TG_FAIL("open: %s", tg_errmsg());
        return;
    }
    train_pass(&r, 0, "three parts per mega-batch, two passes", 2, 0);
    tg_run_close(&r);
}

/* The static nodes' pairs (derived partstat-*, built by the first run): reused while valid,
 * rebuilt when gone or cut short, and a pair naming a node out of range (a payload whose CRC only
 * --verify checks) is refused with the file and the pair, not followed. */
static int find_pstat(char *path, size_t len)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/derived", ds);
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "partstat-", 9)) {
            snprintf(path, len, "%s/%s", dir, e->d_name);
            found++;
        }
    if (d) closedir(d);
    return found;
}

static int no_step(void *ctx, const tg_batch_t *b, const float *X)
{
    (void)ctx, (void)b, (void)X;
    return 0;
}

/* A training pass over r's training nodes, batches of 32, fanouts 5,5, steps doing nothing. */
static int plain_pass(tg_run_t *r)
{
    tg_pass_stats_t st;
    static const int64_t f[2] = {5, 5};
    tg_pass_t p = {.seeds = r->split[0],
                   .num_seeds = r->split_n[0],
                   .batch_size = 32,
                   .num_layers = 2,
                   .fanouts = f,
                   .step = no_step,
                   .training = 1};
    return tg_run_pass(r, &p, &st);
}

static int one_pass(const char *what)
{
    tg_run_t r;
    if (open_run(&r, 0, "3", "1") < 0) return -1;
    int rc = plain_pass(&r);
    if (rc < 0) fprintf(stderr, "  %s: %s\n", what, tg_errmsg());
    tg_run_close(&r);
    return rc;
}

TG_TEST(static_pairs_file)
{
    char path[4600];
    TG_CHECK_OK(one_pass("built or reused"));
    TG_CHECK_EQ_U64(find_pstat(path, sizeof path), 1);
    struct stat a, b;
    TG_CHECK(stat(path, &a) == 0);
    TG_CHECK_OK(one_pass("reused"));
    TG_CHECK(stat(path, &b) == 0 && a.st_ino == b.st_ino);
    /* a pair naming static node 2^32 - 1: the first pair after the (PARTS + 1) offsets */
    int fd = open(path, O_RDWR);
    TG_CHECK(fd >= 0);
    uint32_t bad = UINT32_MAX;
    TG_CHECK(pwrite(fd, &bad, 4, 4096 + (PARTS + 1) * 8) == 4);
    close(fd);
    TG_CHECK(one_pass("corrupted") < 0);
    TG_CHECK(strstr(tg_errmsg(), "partstat") && strstr(tg_errmsg(), "names static node"));
    /* cut short: stale, rebuilt */
    TG_CHECK(truncate(path, a.st_size - 8) == 0);
    TG_CHECK_OK(one_pass("rebuilt after a truncation"));
    TG_CHECK(stat(path, &b) == 0 && b.st_size == a.st_size && b.st_ino != a.st_ino);
    /* removed: rebuilt */
    TG_CHECK(unlink(path) == 0);
    TG_CHECK_OK(one_pass("rebuilt after a removal"));
    TG_CHECK_EQ_U64(find_pstat(path, sizeof path), 1);
}

/* Writes len bytes at payload offset off of a derived file and rewrites its payload and header
 * CRCs (forged: only the checks of the content are left to refuse it). */
static void poke_forged(const char *path, uint64_t off, const void *b, size_t len)
{
    size_t n = 0;
    unsigned char *f = (unsigned char *)tg_test_read_all(path, &n);
    if (!f || off + len > n - 4096) {
        TG_FAIL("%s: cannot poke at %llu", path, (unsigned long long)off);
        free(f);
        return;
    }
    memcpy(f + 4096 + off, b, len);
    uint32_t c = tg_crc32(0, f + 4096, n - 4096);
    memcpy(f + 24, &c, 4);
    c = tg_crc32(0, f, 4092);
    memcpy(f + 4092, &c, 4);
    int fd = open(path, O_WRONLY | O_TRUNC);
    TG_CHECK(fd >= 0 && write(fd, f, n) == (ssize_t)n);
    if (fd >= 0) close(fd);
    free(f);
}

/* Damaged partition files (fuzz_part): new ids past the nodes in the map are refused and the map
 * rebuilt by the run's prepare step (hier indexed its bitmaps with them); an indptr entry of
 * partadj below the one before it is refused naming it (hier trained on other lists than the
 * graph's without a word). */
TG_TEST(damaged_partition_files)
{
    TG_CHECK_OK(one_pass("before"));
    tg_dataset_t *d = NULL;
    TG_CHECK_OK(tg_dataset_open(&d, ds, 0));
    tg_part_t *p = NULL;
    TG_CHECK_OK(tg_part_open(&p, d, "parts=10,method=stream,seed=1,imbalance=0.03,passes=4"));
    if (!p) {
        tg_dataset_close(d);
        return;
    }
    char map[4600], adj[4600];
    snprintf(map, sizeof map, "%s", p->map->path);
    snprintf(adj, sizeof adj, "%s", p->adj->path);
    uint64_t v = p->pp[1] + 7, ipv[2];
    TG_CHECK_OK(tg_part_indptr(p, v - 1, 2, ipv));
    uint64_t n2o = p->new_of_old_off;
    tg_part_close(p);
    tg_dataset_close(d);
    /* the map: rebuilt */
    struct stat a, b;
    TG_CHECK(stat(map, &a) == 0);
    uint32_t *huge = malloc(N * 4); /* every new id: the training and static nodes' too */
    for (uint32_t i = 0; huge && i < N; i++)
        huge[i] = 1u << 30;
    if (huge) poke_forged(map, n2o, huge, N * 4);
    free(huge);
    TG_CHECK_OK(one_pass("map rebuilt"));
    TG_CHECK(stat(map, &b) == 0 && b.st_ino != a.st_ino);
    /* partadj: refused, then the file as it was */
    TG_CHECK(ipv[0] > 0);
    uint64_t below = ipv[0] - 1;
    poke_forged(adj, v * 8, &below, 8);
    TG_CHECK(one_pass("partadj indptr") < 0);
    char want[64];
    snprintf(want, sizeof want, "indptr[%llu]", (unsigned long long)v);
    if (!strstr(tg_errmsg(), want) || !strstr(tg_errmsg(), "partadj"))
        TG_FAIL("message: %s", tg_errmsg());
    poke_forged(adj, v * 8, &ipv[1], 8);
    TG_CHECK_OK(one_pass("partadj repaired"));
}

/* Records each batch's part (one part per mega-batch: its seeds' part); stops after stop_at
 * batches when stop_at > 0. */
typedef struct {
    uint32_t parts[N];
    uint64_t n, stop_at;
} order_t;

static int order_step(void *ctx, const tg_batch_t *b, const float *X)
{
    order_t *o = ctx;
    (void)X;
    if (o->n < N) o->parts[o->n] = part_of[b->nodes[0]];
    o->n++;
    return o->stop_at && o->n == o->stop_at ? TG_PASS_STOP : 0;
}

static int order_pass(order_t *o, uint64_t stop_at, tg_pass_stats_t *st)
{
    tg_run_t r;
    memset(o, 0, sizeof *o);
    o->stop_at = stop_at;
    if (open_run(&r, 0, "1", "1") < 0) return -1;
    static const int64_t f[2] = {5, 5};
    tg_pass_t p = {.seeds = r.split[0],
                   .num_seeds = r.split_n[0],
                   .batch_size = 32,
                   .seed = 3,
                   .num_layers = 2,
                   .fanouts = f,
                   .step = order_step,
                   .ctx = o,
                   .training = 1};
    int rc = tg_run_pass(&r, &p, st);
    tg_run_close(&r);
    return rc;
}

/* Mega-batch k + 1 loads while k trains: a load that fails (a damaged part) reaches the pass at
 * its mega-batch, with its message, after every batch of the mega-batches before it trained; a
 * pass stopped mid-way (while the next mega-batch loads) ends there, and the next pass runs. */
TG_TEST(load_error_in_order)
{
    order_t clean, o;
    tg_pass_stats_t st;
    TG_CHECK_OK(order_pass(&clean, 0, &st));
    tg_hier_figures_t f;
    TG_CHECK_OK(tg_hier_figures(&st, &f));
    TG_CHECK(clean.n > 0 && clean.n <= N && f.megabatches == PARTS);
    /* the third part in the schedule, and the batches before its first */
    uint32_t k = UINT32_MAX, seen = 0;
    uint64_t before = 0;
    for (uint64_t i = 0; i < clean.n && k == UINT32_MAX; i++)
        if (i == 0 || clean.parts[i] != clean.parts[i - 1]) {
            if (++seen == 3) {
                k = clean.parts[i];
                before = i;
            }
        }
    TG_CHECK(k != UINT32_MAX);
    if (k == UINT32_MAX) return;
    fprintf(stderr, "  %llu batches; part %u third, after %llu batches\n",
            (unsigned long long)clean.n, k, (unsigned long long)before);
    tg_dataset_t *d = NULL;
    TG_CHECK_OK(tg_dataset_open(&d, ds, 0));
    tg_part_t *p = NULL;
    TG_CHECK_OK(tg_part_open(&p, d, "parts=10,method=stream,seed=1,imbalance=0.03,passes=4"));
    if (!p) {
        tg_dataset_close(d);
        return;
    }
    char adj[4600];
    snprintf(adj, sizeof adj, "%s", p->adj->path);
    uint64_t v = p->pp[k] + 2, ipv[2];
    TG_CHECK(p->pp[k + 1] > v);
    TG_CHECK_OK(tg_part_indptr(p, v - 1, 2, ipv));
    tg_part_close(p);
    tg_dataset_close(d);
    TG_CHECK(ipv[0] > 0);
    uint64_t below = ipv[0] - 1;
    poke_forged(adj, v * 8, &below, 8);
    int rc = order_pass(&o, 0, &st);
    TG_CHECK(rc < 0);
    if (!strstr(tg_errmsg(), "partadj")) TG_FAIL("message: %s", tg_errmsg());
    TG_CHECK_EQ_U64(o.n, before);
    TG_CHECK(memcmp(o.parts, clean.parts, before * sizeof *o.parts) == 0);
    poke_forged(adj, v * 8, &ipv[1], 8);
    /* stopped at every few batches: mid mega-batch, at its last batch, at the first */
    for (uint64_t at = 1; at < clean.n; at += 7) {
        TG_CHECK_OK(order_pass(&o, at, &st));
        TG_CHECK(st.stopped);
        TG_CHECK_EQ_U64(st.next_batch, at);
        TG_CHECK_EQ_U64(o.n, at);
    }
    TG_CHECK_OK(order_pass(&o, 0, &st));
    TG_CHECK_EQ_U64(o.n, clean.n);
    TG_CHECK(memcmp(o.parts, clean.parts, clean.n * sizeof *o.parts) == 0);
}

TG_TEST(budget)
{
    tg_run_t r;
    /* a budget: what is reserved stays within it */
    if (open_run(&r, 24u << 20, "auto", "1") < 0) {
        TG_FAIL("open: %s", tg_errmsg());
        return;
    }
    train_pass(&r, 0, "--mem 24M (every part fits one mega-batch)", 1, 0);
    TG_CHECK(r.budget.used <= r.budget.limit);
    tg_run_close(&r);
    /* the strategy's own floor, then two mega-batches that cannot fit: refused with --mem */
    if (open_run(&r, 24u << 20, "10", "1") == 0) {
        r.budget.limit = r.budget.used + 4096;
        TG_CHECK_ERR(plain_pass(&r), "--mem");
        tg_run_close(&r);
    } else {
        TG_FAIL("open: %s", tg_errmsg());
    }
}

/* The CHOICE and REAL options (--method, --static-ratio): parsed, and refused with what they
 * accept. */
TG_TEST(options)
{
    const tg_strategy_info_t *si = tg_strategy_info_find("hier");
    char cfg[512];
    TG_CHECK(si && si->config_size <= sizeof cfg);
    tg_strategy_arg_t ok[] = {{"method", "stream"}, {"static-ratio", "0.25"}};
    TG_CHECK_OK(tg_strategy_parse(si, ok, 2, cfg, 0));
    tg_strategy_arg_t bad1[] = {{"method", "spectral"}};
    TG_CHECK_ERR(tg_strategy_parse(si, bad1, 1, cfg, 0), "auto|metis|stream");
    tg_strategy_arg_t bad2[] = {{"static-ratio", "1.5"}};
    TG_CHECK_ERR(tg_strategy_parse(si, bad2, 1, cfg, 0), "0..1");
    tg_strategy_arg_t bad3[] = {{"static-ratio", "lots"}};
    TG_CHECK_ERR(tg_strategy_parse(si, bad3, 1, cfg, 0), "static-ratio lots");
    tg_strategy_arg_t bad4[] = {{"method", NULL}};
    TG_CHECK_ERR(tg_strategy_parse(si, bad4, 1, cfg, 0), "needs a value");
}

/* Through `tiergnn train` under budgets where the mega-batches are what --mem limits: the budget
 * plan's profile sizes N_d provisionally and training sizes it again (smaller), and every epoch
 * then covers every part (a schedule cut for the profile's N_d would leave parts out); the
 * layer-wise evaluation after it gets the mega-batches' memory (at 64M it did not fit beside
 * them). */
TG_TEST(budgets_through_train)
{
    char gds[4300];
    snprintf(gds, sizeof gds, "%s/g200k", root);
    tg_gen_opts_t g;
    tg_gen_opts_default(&g);
    g.nodes = 200000;
    g.feat_dim = 64;
    g.classes = 4;
    g.train_frac = 0.05, g.valid_frac = 0.01, g.test_frac = 0.01;
    g.mem_bytes = tg_gen_min_mem(&g);
    g.threads = 1;
    if (tg_generate(gds, &g) < 0) {
        TG_FAIL("generate: %s", tg_errmsg());
        return;
    }
    /* from 64M: under ASan the process alone is budgeted 24 MiB, and 48M leaves no mega-batch;
     * to 96M, where the mega-batches still do not hold every part */
    static const char *mems[] = {"64M", "80M", "96M"};
    for (int i = 0; i < 3; i++) {
        char *out = NULL, run[4400];
        snprintf(run, sizeof run, "%s/run-%s", root, mems[i]);
        int rc = tg_test_cli(&out,
                             "train '%s' --out '%s' --strategy hier --parts 20 --method stream "
                             "--mem %s --epochs 1 --eval-every 0 --eval-max-nodes 100 --fanouts "
                             "5,5 --batch-size 256 --hidden 16 --threads 1 --json",
                             gds, run, mems[i]);
        const char *mb = out ? strstr(out, "\"megabatch\":") : NULL;
        if (rc != 0 || !mb) {
            TG_FAIL("--mem %s: exit %d: %s", mems[i], rc, out ? out : "");
        } else {
            unsigned long long parts = 0, nodes = 0;
            const char *dp = strstr(mb, "\"dynamic_parts\":"), *nd = strstr(mb, "\"nodes\":");
            if (dp) parts = strtoull(dp + 16, NULL, 10);
            if (nd) nodes = strtoull(nd + 8, NULL, 10);
            fprintf(stderr, "  --mem %s: %llu parts per mega-batch\n", mems[i], parts);
            TG_CHECK(parts >= 1 && parts < 20);
            TG_CHECK_EQ_U64(nodes, 200000);
        }
        free(out);
    }
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("hier"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so = {
        .nodes = N, .classes = 4, .dim = DIM, .deg = 8, .homophily = 0.8, .noise = 0.5, .seed = 11};
    synth_write(ds, &so);
    TG_RUN(options);
    TG_RUN(megabatch_subgraph_and_rows);
    TG_RUN(static_pairs_file);
    TG_RUN(damaged_partition_files);
    TG_RUN(load_error_in_order);
    TG_RUN(budget);
    TG_RUN(budgets_through_train);
    free(ip);
    free(ix);
    free(part_of);
    free(is_static);
    if (!tg_test_failures) tg_rmtree(root);
    return tg_test_done();
}
