/* graph/megabatch (tiergnn/megabatch.h) on a small partitioned dataset: a mega-batch of chosen
 * parts holds the subgraph induced on T and the static nodes T reaches, computed here naively
 * from the original CSC (locals, every list in its order, features, original ids, seeds, the
 * degree figures), and the static cache's lists hold every static-to-static edge; every error
 * path: parts out of range or repeated, a mega-batch larger than the buffers, a damaged partadj
 * and partstat, a read error through the io fault hook, budgets too small for the static cache
 * and for the buffers. After each failed load the next load is right. */
#include "test_engine_common.h"

#include "tiergnn/io.h"
#include "tiergnn/megabatch.h"
#include "tiergnn/partition.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#define N 1500u
#define DIM 8u
#define PARTS 12u

static char root[4000], dsdir[4200], params[256];
static tg_dataset_t *ds;
static uint64_t *ip, *ix;       /* the original CSC */
static float *feat;             /* the original rows (f32) */
static uint64_t *o2n;           /* original id -> new id */
static uint32_t *part_of;       /* original id -> part */
static uint8_t *is_static;      /* original id -> in the static cache */
static uint8_t *is_train;       /* original id -> a training node */
static uint64_t *sold, S;       /* the static nodes (every 25th node from 3) */
static uint64_t *train, ntrain; /* the training nodes (every third) */
static tg_part_t *part;

static void setup(void)
{
    synth_opts_t so = {
        .nodes = N, .classes = 4, .dim = DIM, .deg = 8, .homophily = 0.8, .noise = 0.5, .seed = 7};
    synth_write(dsdir, &so);
    if (tg_dataset_open(&ds, dsdir, TG_OPEN_CHECK_SIZES) < 0) exit(1);
    tg_part_build_opts_t o = {0};
    tg_part_assign_opts_default(&o.assign);
    o.assign.parts = PARTS;
    o.assign.method = TG_PART_STREAM;
    tg_part_build_stats_t st;
    if (tg_part_build(ds, &o, &st) < 0 ||
        tg_part_params(&o.assign, TG_PART_STREAM, params, sizeof params) < 0 ||
        tg_part_open(&part, ds, params) < 0) {
        fprintf(stderr, "partition: %s\n", tg_errmsg());
        exit(1);
    }
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    feat = malloc((size_t)N * DIM * sizeof *feat);
    TG_CHECK_OK(tg_dataset_read_features(ds, 0, N, feat));
    o2n = malloc(N * sizeof *o2n);
    TG_CHECK_OK(tg_part_new_ids(part, 0, N, o2n));
    part_of = malloc(N * sizeof *part_of);
    is_static = calloc(N, 1);
    is_train = calloc(N, 1);
    sold = malloc(N * sizeof *sold);
    train = malloc(N * sizeof *train);
    for (uint64_t v = 0; v < N; v++) {
        part_of[v] = tg_part_of(part, o2n[v]);
        if (v % 25 == 3) is_static[v] = 1, sold[S++] = v;
        if (v % 3 == 0) is_train[v] = 1, train[ntrain++] = v;
    }
}

static int open_loader(tg_mb_t **L, tg_budget_t *b)
{
    uint64_t se = 0;
    for (uint64_t i = 0; i < S; i++) /* (bad_requests gives a node past the graph) */
        se += sold[i] < N ? ip[sold[i] + 1] - ip[sold[i]] : 0;
    tg_mb_opts_t o = {.ds = ds,
                      .part = part,
                      .params = params,
                      .budget = b,
                      .row_bytes = DIM * sizeof(float),
                      .static_old = sold,
                      .num_static = S,
                      .static_edges = se,
                      .train_old = train,
                      .num_train = ntrain,
                      .who = "test"};
    return tg_mb_open(L, &o);
}

/* Buffers for mega-batches of at most k parts (the largest k's sizes). */
static int alloc_for(tg_mb_t *L, tg_megabatch_t *bufs, int nbuf, uint32_t k)
{
    uint64_t t = 0, e = 0, np = 0;
    for (uint32_t i = 0; i < k; i++)
        t += L->psize[i], e += L->pedge[i], np += L->pspairs[i];
    return tg_mb_alloc(L, bufs, nbuf, t, e, np);
}

/* The old ids of the locals, computed naively: T's nodes by new id (parts are runs of new ids,
 * taken in part order), then the static nodes outside T that a node of T has as an in-neighbour,
 * by new id (their static index). */
static uint64_t naive_locals(const uint8_t *in_t, uint64_t *old, uint64_t *nt)
{
    uint64_t *n2o = malloc(N * sizeof *n2o), n = 0;
    for (uint64_t v = 0; v < N; v++)
        n2o[o2n[v]] = v;
    uint8_t *joins = calloc(N, 1);
    for (uint64_t w = 0; w < N; w++)
        if (in_t[n2o[w]]) old[n++] = n2o[w];
    *nt = n;
    for (uint64_t v = 0; v < N; v++)
        if (in_t[v])
            for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
                if (is_static[ix[e]] && !in_t[ix[e]]) joins[ix[e]] = 1;
    for (uint64_t w = 0; w < N; w++)
        if (joins[n2o[w]]) old[n++] = n2o[w];
    free(n2o);
    free(joins);
    return n;
}

/* Compares m with the mega-batch of parts ks[0..nk) computed naively. */
static void check_mega(const tg_mb_t *L, const tg_megabatch_t *m, const uint32_t *ks, uint32_t nk)
{
    uint8_t *in_t = calloc(N, 1);
    for (uint64_t v = 0; v < N; v++)
        for (uint32_t i = 0; i < nk; i++)
            if (part_of[v] == ks[i]) in_t[v] = 1;
    uint64_t *old = malloc(N * sizeof *old), nt;
    uint64_t nm = naive_locals(in_t, old, &nt);
    TG_CHECK_EQ_U64(m->nt, nt);
    TG_CHECK_EQ_U64(m->nm, nm);
    if (m->nt != nt || m->nm != nm) goto out;
    TG_CHECK(memcmp(m->old_ids, old, nm * sizeof *old) == 0);
    int64_t *local = malloc(N * sizeof *local);
    for (uint64_t v = 0; v < N; v++)
        local[v] = -1;
    for (uint64_t l = 0; l < nm; l++)
        local[old[l]] = (int64_t)l;
    /* the lists: a node of T keeps, in its list's order, its in-neighbours in T or static; a
     * joined static node its in-neighbours in T, part by part in its list's order, then the
     * joined static ones in its list's order */
    uint64_t bad = 0, full = 0, ind = 0, st = 0, *want = malloc((ip[N] + 1) * sizeof *want);
    for (uint64_t l = 0; l < nm; l++) {
        uint64_t v = old[l], n = 0;
        if (l < nt) {
            for (uint64_t e = ip[v]; e < ip[v + 1]; e++) {
                uint64_t u = ix[e];
                full++;
                if (local[u] < 0) continue;
                want[n++] = (uint64_t)local[u];
                if (in_t[u])
                    ind++;
                else
                    st++;
            }
        } else {
            for (uint32_t k = 0; k < PARTS; k++)
                for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
                    if (in_t[ix[e]] && part_of[ix[e]] == k) want[n++] = (uint64_t)local[ix[e]];
            for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
                if (!in_t[ix[e]] && local[ix[e]] >= 0) want[n++] = (uint64_t)local[ix[e]];
        }
        uint64_t a = m->indptr[l], b = m->indptr[l + 1];
        int same = b - a == n;
        for (uint64_t x = 0; same && x < n; x++)
            same = m->indices[a + x] == want[x];
        bad += !same;
    }
    TG_CHECK_EQ_U64(bad, 0);
    TG_CHECK_EQ_U64(m->indptr[0], 0);
    TG_CHECK_EQ_U64(m->indptr[nm], m->ne);
    TG_CHECK_EQ_U64(m->deg_full, full);
    TG_CHECK_EQ_U64(m->deg_induced, ind);
    TG_CHECK_EQ_U64(m->deg_static, st);
    TG_CHECK(m->adj != NULL);
    /* the rows: T's from the buffer, the joined static ones from the static cache */
    uint64_t bad_rows = 0;
    for (uint64_t l = 0; l < nm; l++)
        bad_rows += memcmp(tg_mb_row(L, m, l), feat + old[l] * DIM, DIM * sizeof(float)) != 0;
    TG_CHECK_EQ_U64(bad_rows, 0);
    /* the seeds: T's training nodes, by local */
    uint64_t ns = 0, bad_seeds = 0;
    for (uint64_t l = 0; l < nt; l++)
        if (is_train[old[l]]) bad_seeds += ns >= m->nseeds || m->seeds[ns++] != l;
    TG_CHECK_EQ_U64(m->nseeds, ns);
    TG_CHECK_EQ_U64(bad_seeds, 0);
    free(local);
    free(want);
out:
    free(old);
    free(in_t);
}

/* The static cache: its nodes by new id with their rows, and its static-to-static edges. */
TG_TEST(static_cache)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_mb_t *L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    TG_CHECK_EQ_U64(L->S, S);
    uint64_t ss = 0, bad = 0;
    for (uint64_t i = 0; i < S; i++) {
        uint64_t v = sold[i];
        for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
            ss += is_static[ix[e]];
    }
    for (uint64_t i = 0; i < L->S; i++) {
        bad += !is_static[L->s_old[i]] || o2n[L->s_old[i]] != L->s_new[i];
        bad += i && L->s_new[i] <= L->s_new[i - 1];
        bad += memcmp(L->s_feat + i * L->row, feat + L->s_old[i] * DIM, L->row) != 0;
    }
    TG_CHECK_EQ_U64(bad, 0);
    TG_CHECK_EQ_U64(L->ss_edges, ss);
    uint64_t tp = 0;
    for (uint32_t k = 0; k < PARTS; k++)
        tp += L->tp[k + 1] - L->tp[k];
    TG_CHECK_EQ_U64(tp, ntrain);
    tg_mb_close(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* Mega-batches of one part, of three parts given out of order, and of every part. */
TG_TEST(subgraphs)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_mb_t *L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    tg_megabatch_t mb[2];
    TG_CHECK_OK(alloc_for(L, mb, 2, PARTS));
    for (uint32_t k = 0; k < PARTS; k++) {
        TG_CHECK_OK(tg_mb_load(L, &mb[k & 1], &k, 1));
        check_mega(L, &mb[k & 1], &k, 1);
    }
    uint32_t three[3] = {9, 2, 5};
    TG_CHECK_OK(tg_mb_load(L, &mb[0], three, 3));
    check_mega(L, &mb[0], three, 3);
    fprintf(stderr, "  parts 9, 2, 5: %llu nodes, %llu static ones joined, %llu edges\n",
            (unsigned long long)mb[0].nt, (unsigned long long)(mb[0].nm - mb[0].nt),
            (unsigned long long)mb[0].ne);
    TG_CHECK(mb[0].nm > mb[0].nt && mb[0].deg_static > 0);
    /* the other buffer is left as it was */
    uint32_t last = PARTS - 1;
    check_mega(L, &mb[1], &last, 1);
    uint32_t all[PARTS];
    for (uint32_t k = 0; k < PARTS; k++)
        all[k] = PARTS - 1 - k;
    TG_CHECK_OK(tg_mb_load(L, &mb[1], all, PARTS));
    check_mega(L, &mb[1], all, PARTS);
    TG_CHECK_EQ_U64(mb[1].deg_induced, ip[N]); /* every edge kept */
    TG_CHECK(L->read_bytes > 0 && L->reads > 0);
    tg_mb_close(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* Bad requests: refused with their reason, and the next load is right. */
TG_TEST(bad_requests)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_mb_t *L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    tg_megabatch_t mb[1];
    uint32_t k = 0;
    memset(mb, 0, sizeof mb);
    TG_CHECK_ERR(tg_mb_load(L, &mb[0], &k, 1), "before tg_mb_alloc");
    TG_CHECK_OK(alloc_for(L, mb, 1, 2));
    uint32_t out[2] = {1, PARTS};
    TG_CHECK_ERR(tg_mb_load(L, &mb[0], out, 2), "no such part");
    TG_CHECK(mb[0].adj == NULL);
    uint32_t twice[3] = {4, 1, 4};
    TG_CHECK_ERR(tg_mb_load(L, &mb[0], twice, 3), "given twice");
    uint32_t three[3] = {0, 1, 2};
    TG_CHECK_ERR(tg_mb_load(L, &mb[0], three, 3), "more than planned");
    for (k = 0; k < PARTS; k++) {
        TG_CHECK_OK(tg_mb_load(L, &mb[0], &k, 1));
        check_mega(L, &mb[0], &k, 1);
    }
    tg_mb_close(L);
    /* the static and training nodes: nodes, the static ones each once */
    uint64_t keep = sold[1];
    sold[1] = N;
    TG_CHECK_ERR(open_loader(&L, &b), "static node 1500 of a graph of 1500");
    sold[1] = sold[2];
    TG_CHECK_ERR(open_loader(&L, &b), "given twice");
    sold[1] = keep;
    keep = train[7];
    train[7] = N + 5;
    TG_CHECK_ERR(open_loader(&L, &b), "training node 1505");
    train[7] = keep;
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* Writes len bytes at payload offset off of a derived file and rewrites its payload and header
 * CRCs (forged: only the checks of the content are left to refuse it). */
static void poke_forged(const char *path, uint64_t off, const void *bytes, size_t len)
{
    size_t n = 0;
    unsigned char *f = (unsigned char *)tg_test_read_all(path, &n);
    if (!f || off + len > n - 4096) {
        TG_FAIL("%s: cannot poke at %llu", path, (unsigned long long)off);
        free(f);
        return;
    }
    memcpy(f + 4096 + off, bytes, len);
    uint32_t c = tg_crc32(0, f + 4096, n - 4096);
    memcpy(f + 24, &c, 4);
    c = tg_crc32(0, f, 4092);
    memcpy(f + 4092, &c, 4);
    int fd = open(path, O_WRONLY | O_TRUNC);
    TG_CHECK(fd >= 0 && write(fd, f, n) == (ssize_t)n);
    if (fd >= 0) close(fd);
    free(f);
}

static int find_pstat(char *path, size_t len)
{
    char dir[4300];
    snprintf(dir, sizeof dir, "%s/derived", dsdir);
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

/* A damaged partadj (an indptr entry below the one before it, in a part's middle) fails the
 * load of that part naming the file and the entry, and only it; a partstat pair naming a static
 * node out of range fails the load naming the pair; repaired, the same loads are right. */
TG_TEST(damaged_files)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_mb_t *L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    tg_megabatch_t mb[1];
    TG_CHECK_OK(alloc_for(L, mb, 1, 1));
    /* a node of part 3 whose list bounds no static node shares (open read those) */
    uint32_t k = 3, other = 4;
    uint64_t v = part->pp[k] + 2;
    while (v + 1 < part->pp[k + 1] && (is_static[v - 1] || is_static[v]))
        v++;
    uint64_t ipv[2];
    TG_CHECK_OK(tg_part_indptr(part, v - 1, 2, ipv));
    TG_CHECK(ipv[0] > 0);
    uint64_t below = ipv[0] - 1;
    poke_forged(part->adj->path, v * 8, &below, 8);
    char want[64];
    snprintf(want, sizeof want, "indptr[%llu]", (unsigned long long)v);
    TG_CHECK_ERR(tg_mb_load(L, &mb[0], &k, 1), want);
    TG_CHECK(strstr(tg_errmsg(), "partadj") != NULL);
    TG_CHECK_OK(tg_mb_load(L, &mb[0], &other, 1));
    check_mega(L, &mb[0], &other, 1);
    poke_forged(part->adj->path, v * 8, &ipv[1], 8);
    TG_CHECK_OK(tg_mb_load(L, &mb[0], &k, 1));
    check_mega(L, &mb[0], &k, 1);
    /* partstat: the first pair of the first part that has one names static node 2^32 - 1 */
    char path[4600];
    TG_CHECK_EQ_U64(find_pstat(path, sizeof path), 1);
    uint64_t *off = malloc((PARTS + 1) * 8);
    TG_CHECK_OK(tg_derived_read(L->pstat, off, (PARTS + 1) * 8, 0));
    uint32_t kp = 0;
    while (kp < PARTS && off[kp + 1] == off[kp])
        kp++;
    TG_CHECK(kp < PARTS);
    uint32_t pair[2], bad = UINT32_MAX;
    uint64_t at = (PARTS + 1) * 8 + off[kp] * 8;
    TG_CHECK_OK(tg_derived_read(L->pstat, pair, 8, at));
    poke_forged(path, at, &bad, 4);
    /* the joined static nodes' lists are read only when some static node joins: all parts */
    tg_mb_close(L);
    L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    tg_megabatch_t all_mb[1]; /* lent to L until it closes */
    if (L) {
        TG_CHECK_OK(alloc_for(L, all_mb, 1, PARTS));
        uint32_t all[PARTS];
        for (uint32_t i = 0; i < PARTS; i++)
            all[i] = i;
        /* a static node joins only from outside T: every part but one */
        uint32_t rest[PARTS - 1], nr = 0;
        for (uint32_t i = 0; i < PARTS; i++)
            if (i != (kp + 1) % PARTS) rest[nr++] = i;
        TG_CHECK_ERR(tg_mb_load(L, &all_mb[0], rest, nr), "names static node");
        poke_forged(path, at, pair, 4);
        TG_CHECK_OK(tg_mb_load(L, &all_mb[0], rest, nr));
        check_mega(L, &all_mb[0], rest, nr);
        TG_CHECK_OK(tg_mb_load(L, &all_mb[0], all, PARTS));
        check_mega(L, &all_mb[0], all, PARTS);
    }
    free(off);
    tg_mb_close(L);
    tg_budget_destroy(&b);
}

/* A read that fails (the io fault hook on partfeat) fails the load with the file; the next load
 * of the same parts is right. */
TG_TEST(read_error)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_mb_t *L = NULL;
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    tg_megabatch_t mb[1];
    TG_CHECK_OK(alloc_for(L, mb, 1, 2));
    uint32_t two[2] = {6, 1};
    tg_io_fault_t f = {.op = TG_IO_FAULT_READ,
                       .file = "partfeat",
                       .lo = 0,
                       .hi = UINT64_MAX,
                       .err = EIO,
                       .count = 1};
    TG_CHECK_OK(tg_io_fault_add(&f));
    tg_err_clear();
    int rc = tg_mb_load(L, &mb[0], two, 2);
    TG_CHECK(rc < 0 && strstr(tg_errmsg(), "partfeat"));
    TG_CHECK(mb[0].adj == NULL);
    tg_io_fault_clear();
    TG_CHECK_OK(tg_mb_load(L, &mb[0], two, 2));
    check_mega(L, &mb[0], two, 2);
    tg_mb_close(L);
    tg_budget_destroy(&b);
}

/* Budgets: one too small for the static cache and the maps refuses the open naming --mem; one
 * that holds them but not the buffers refuses the buffers; nothing stays reserved. */
TG_TEST(budgets)
{
    tg_budget_t b;
    tg_budget_init(&b, 4096);
    tg_mb_t *L = NULL;
    TG_CHECK_ERR(open_loader(&L, &b), "--mem");
    TG_CHECK(L == NULL);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_budget_init(&b, 0);
    TG_CHECK_OK(open_loader(&L, &b));
    if (!L) return;
    b.limit = b.used + 1024;
    tg_megabatch_t mb[2];
    uint64_t used = b.used;
    TG_CHECK_ERR(alloc_for(L, mb, 2, 1), "two mega-batches");
    tg_mb_release(L);
    TG_CHECK_EQ_U64(b.used, used);
    b.limit = 0;
    TG_CHECK_OK(alloc_for(L, mb, 2, 1));
    TG_CHECK(b.used > used);
    tg_mb_release(L);
    TG_CHECK_EQ_U64(b.used, used);
    tg_mb_close(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* tg_part_find: method auto takes the partition already built (the streaming one here). */
TG_TEST(part_find)
{
    tg_part_assign_opts_t o;
    tg_part_assign_opts_default(&o);
    o.parts = PARTS;
    char buf[256];
    TG_CHECK_OK(tg_part_find(ds, &o, buf, sizeof buf));
    TG_CHECK(o.method == TG_PART_STREAM && !strcmp(buf, params));
    o.parts = PARTS + 1; /* none built: what auto resolves to */
    o.method = TG_PART_AUTO;
    TG_CHECK_OK(tg_part_find(ds, &o, buf, sizeof buf));
    TG_CHECK(o.method != TG_PART_AUTO && strstr(buf, "parts=13,") == buf);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("megabatch"));
    snprintf(dsdir, sizeof dsdir, "%s/ds", root);
    setup();
    TG_RUN(static_cache);
    TG_RUN(subgraphs);
    TG_RUN(bad_requests);
    TG_RUN(damaged_files);
    TG_RUN(read_error);
    TG_RUN(budgets);
    TG_RUN(part_find);
    tg_part_close(part);
    tg_dataset_close(ds);
    free(ip), free(ix), free(feat), free(o2n), free(part_of), free(is_static), free(is_train);
    free(sold), free(train);
    if (!tg_test_failures) tg_rmtree(root);
    return tg_test_done();
}
