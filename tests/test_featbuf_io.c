/* store/featbuf over io/: the GNNDrive extraction loop as the engine will run it - extractor
 * threads acquire batches, read their loads from a real feature file with tg_io (rows land in
 * the slots directly, any alignment), complete each row as its request is reaped, wait for rows
 * other extractors load, and check every gathered row against the file. Also with injected read
 * errors: failed rows reach every batch that needs them and no wrong bytes are ever gathered.
 * Runs on whichever backend the machine offers (io_uring or pread; O_DIRECT or buffered). The
 * replacement policies run the same loop with faults: STATIC preloads its pinned rows through the
 * queue first, NEXT_USE and WINDOW have each extractor announce its batch before acquiring it and
 * mark it done after. */
#include "test_feat_common.h"

#include "tiergnn/featbuf.h"
#include "tiergnn/io.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

enum { N = 3000, E = 3, MB = 64, ROUNDS = 150 };

static const char *dir;
static _Atomic(const char *) backend = "?";

static float fval(uint64_t node, size_t j)
{
    return tfeat_val(node, j);
}

static char *write_features(const char *name, uint32_t dim, tg_feat_dtype_t dtype)
{
    return tfeat_write(dir, name, N, dim, dtype);
}

typedef struct {
    tg_featbuf_t *fb;
    tg_io_file_t *file;
    uint32_t dim;
    int id;
    atomic_int *bad_rows, *errors, *failed, *ok;
    pthread_mutex_t *trace_mu; /* announcements go in id order */
    uint64_t *next_id;
} ex_t;

/* Reads every load of the acquired (or preloaded) h through the queue, completing rows as they
 * are reaped. If the queue fails, it is destroyed first - tg_io_destroy waits for reads the
 * kernel still owns - and only then are the outstanding loads failed: a slot is never given up
 * while a read may still land in it. *io is NULL afterwards. */
static int read_loads(ex_t *x, tg_io_t **io, tg_featbuf_batch_t *h, tg_io_req_t *reqs)
{
    int rc;
    size_t nl, row = tg_featbuf_row_bytes(x->fb);
    const tg_featbuf_load_t *ld = tg_featbuf_batch_loads(h, &nl);
    for (size_t k = 0; k < nl; k++)
        reqs[k] = (tg_io_req_t){.file = x->file,
                                .off = ld[k].node * row,
                                .len = row,
                                .dst = tg_featbuf_row(x->fb, ld[k].slot),
                                .user = (void *)(uintptr_t)k};
    if (nl && (rc = tg_io_submit(*io, reqs, nl)) < 0) goto broken;
    while (tg_io_inflight(*io) > 0) {
        tg_io_req_t *done[32];
        int got = tg_io_reap(*io, done, 32, 1);
        if (got < 0) {
            rc = got;
            goto broken;
        }
        for (int i = 0; i < got; i++)
            if (tg_featbuf_complete(h, (size_t)(uintptr_t)done[i]->user, done[i]->res) < 0)
                return -EFAULT; /* a bug in this loop: stop the test */
    }
    return 0;
broken:
    tg_io_destroy(*io);
    *io = NULL;
    tg_featbuf_complete_all(h, rc);
    return rc;
}

/* One batch: announce it (trace policies), acquire, mark it done, read its loads. */
static int extract(ex_t *x, tg_io_t **io, tg_featbuf_batch_t *h, tg_io_req_t *reqs,
                   const uint64_t *nodes, size_t n)
{
    pthread_mutex_lock(x->trace_mu);
    uint64_t id = (*x->next_id)++;
    int rc = tg_featbuf_future_add(x->fb, id, nodes, n); /* 0 for the other policies */
    pthread_mutex_unlock(x->trace_mu);
    if (rc < 0 && rc != -ENOSPC) return rc;
    int announced = rc == 0;
    rc = tg_featbuf_acquire(h, nodes, n, 0);
    if (announced && tg_featbuf_future_done(x->fb, id) < 0) rc = -EFAULT;
    if (rc < 0) return rc;
    return read_loads(x, io, h, reqs);
}

/* STATIC: pins the hot nodes 0..pin_capacity and reads them through tg_featbuf_preload. */
static void preload(ex_t *x)
{
    uint64_t cap = tg_featbuf_pin_capacity(x->fb), *v = malloc(cap * sizeof *v);
    for (uint64_t i = 0; i < cap; i++)
        v[i] = i;
    TG_CHECK_OK(tg_featbuf_pin(x->fb, v, cap));
    free(v);
    tg_io_opts_t io_o = {.depth = 16};
    tg_io_t *io = NULL;
    tg_featbuf_batch_t *h;
    tg_io_req_t reqs[MB];
    TG_CHECK_OK(tg_io_create(&io, &io_o));
    TG_CHECK_OK(tg_featbuf_batch_create(x->fb, &h));
    int k;
    while ((k = tg_featbuf_preload(h)) > 0) {
        TG_CHECK_OK(read_loads(x, &io, h, reqs));
        TG_CHECK_OK(tg_featbuf_wait(h));
        TG_CHECK_OK(tg_featbuf_release(h));
    }
    TG_CHECK(k == 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(x->fb, &st, 0);
    TG_CHECK_EQ_U64(st.slots_pinned, cap);
    tg_featbuf_batch_destroy(h);
    tg_io_destroy(io);
}

static void *extractor_main(void *arg)
{
    ex_t *x = arg;
    tg_io_opts_t io_o = {.depth = 16};
    tg_io_t *io = NULL;
    tg_featbuf_batch_t *h = NULL;
    tg_io_req_t *reqs = malloc(MB * sizeof *reqs);
    float *X = malloc((size_t)MB * x->dim * sizeof *X);
    if (tg_io_create(&io, &io_o) < 0 || tg_featbuf_batch_create(x->fb, &h) < 0 || !reqs || !X) {
        fprintf(stderr, "extractor %d: %s\n", x->id, tg_errmsg());
        atomic_fetch_add(x->errors, 1);
        goto out;
    }
    atomic_store(&backend, tg_io_backend(io));
    tg_rng_t r;
    tg_rng_seed2(&r, 3, (uint64_t)x->id);
    uint64_t nodes[MB];
    for (int it = 0; it < ROUNDS; it++) {
        size_t n = 1 + (size_t)tg_rng_below(&r, MB);
        for (size_t i = 0; i < n;) { /* distinct, half of them from a hot 5% */
            uint64_t v = tg_rng_below(&r, 2) ? tg_rng_below(&r, N / 20) : tg_rng_below(&r, N);
            size_t k = 0;
            while (k < i && nodes[k] != v)
                k++;
            if (k == i) nodes[i++] = v;
        }
        /* failed rows come back as res < 0 and show in wait; an error here is the queue's */
        int rc = extract(x, &io, h, reqs, nodes, n);
        if (rc < 0) {
            fprintf(stderr, "extractor %d: %s\n", x->id, tg_errmsg());
            atomic_fetch_add(x->errors, 1);
            tg_featbuf_release(h); /* nothing outstanding: extract completed every load */
            break;
        }
        rc = tg_featbuf_wait(h);
        if (rc == 0) {
            atomic_fetch_add(x->ok, 1);
            if (tg_featbuf_gather_f32(h, X, NULL) < 0) atomic_fetch_add(x->errors, 1);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < x->dim; j++)
                    if (X[i * x->dim + j] != fval(nodes[i], j)) {
                        atomic_fetch_add(x->bad_rows, 1);
                        break;
                    }
        } else if (rc == -EIO) {
            atomic_fetch_add(x->failed, 1);
        } else {
            fprintf(stderr, "extractor %d: wait: %s\n", x->id, tg_errmsg());
            atomic_fetch_add(x->errors, 1);
        }
        if (tg_featbuf_release(h) < 0) atomic_fetch_add(x->errors, 1);
    }
out:
    tg_featbuf_batch_destroy(h);
    tg_io_destroy(io);
    free(reqs);
    free(X);
    return NULL;
}

static void run(uint32_t dim, tg_feat_dtype_t dtype, int inject, tg_featbuf_policy_t policy)
{
    char name[64];
    snprintf(name, sizeof name, "features_%u_%s.bin", dim, dtype == TG_F16 ? "f16" : "f32");
    char *path = write_features(name, dim, dtype);
    tg_io_file_t *file;
    TG_CHECK_OK(tg_io_file_open(&file, path, 0));
    tg_budget_t budget;
    tg_budget_init(&budget, 0);
    tg_featbuf_opts_t o = {.num_nodes = N,
                           .feat_dim = dim,
                           .dtype = dtype,
                           .max_batch_nodes = MB,
                           .max_batches = E,
                           .num_slots = 4 * MB, /* < N: constant eviction */
                           .policy = policy,
                           .window = 4,
                           .future_positions = 4 * E * MB};
    tg_featbuf_t *fb;
    TG_CHECK_OK(tg_featbuf_create(&fb, &o, &budget));
    if (inject) {
        /* every read touching the rows of nodes 100..102 fails (hot nodes: shared by waits) */
        size_t row = tg_featbuf_row_bytes(fb);
        tg_io_fault_t f = {
            .op = TG_IO_FAULT_READ, .file = name, .lo = 100 * row, .hi = 103 * row, .err = EIO};
        TG_CHECK_OK(tg_io_fault_add(&f));
    }
    atomic_int bad = 0, errors = 0, failed = 0, ok = 0;
    pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
    uint64_t next_id = 0, preload_batches = 0;
    ex_t x[E];
    pthread_t th[E];
    for (int e = 0; e < E; e++)
        x[e] = (ex_t){.fb = fb,
                      .file = file,
                      .dim = dim,
                      .id = e,
                      .bad_rows = &bad,
                      .errors = &errors,
                      .failed = &failed,
                      .ok = &ok,
                      .trace_mu = &trace_mu,
                      .next_id = &next_id};
    if (policy == TG_FEATBUF_STATIC) {
        preload(&x[0]);
        tg_featbuf_stats_t st;
        tg_featbuf_stats(fb, &st, 0);
        preload_batches = st.acquires;
    }
    for (int e = 0; e < E; e++)
        pthread_create(&th[e], NULL, extractor_main, &x[e]);
    for (int e = 0; e < E; e++)
        pthread_join(th[e], NULL);
    if (inject) tg_io_fault_clear();
    TG_CHECK(atomic_load(&bad) == 0);
    TG_CHECK(atomic_load(&errors) == 0);
    TG_CHECK(atomic_load(&ok) + atomic_load(&failed) == E * ROUNDS);
    TG_CHECK(atomic_load(&ok) > 0);
    TG_CHECK(inject ? atomic_load(&failed) > 0 : atomic_load(&failed) == 0);
    tg_featbuf_stats_t st;
    tg_featbuf_stats(fb, &st, 0);
    TG_CHECK_EQ_U64(st.acquires, E * ROUNDS + preload_batches);
    TG_CHECK_EQ_U64(st.slots_referenced, 0);
    TG_CHECK(inject ? st.load_errors > 0 : st.load_errors == 0);
    fprintf(stderr,
            "  %s, %s, %s: dim %u %s%s: %d batches ok, %d failed; hit ratio %.3f, %llu waits, "
            "%llu evictions, %llu load errors\n",
            tg_featbuf_policy_name(policy), atomic_load(&backend),
            tg_io_file_direct(file) ? "O_DIRECT" : "buffered", dim, dtype == TG_F16 ? "f16" : "f32",
            inject ? " with faults" : "", atomic_load(&ok), atomic_load(&failed),
            tg_featbuf_hit_ratio(&st), (unsigned long long)st.waits,
            (unsigned long long)st.evictions, (unsigned long long)st.load_errors);
    TG_CHECK_OK(tg_featbuf_check(fb));
    tg_featbuf_destroy(fb);
    TG_CHECK_EQ_U64(budget.used, 0);
    tg_budget_destroy(&budget);
    tg_io_file_close(file);
    free(path);
}

TG_TEST(extract_f32_unaligned_rows)
{
    run(37, TG_F32, 0, TG_FEATBUF_LRU); /* 148-byte rows: every read straddles blocks */
}

TG_TEST(extract_f16)
{
    run(50, TG_F16, 0, TG_FEATBUF_LRU);
}

TG_TEST(extract_with_read_errors)
{
    run(37, TG_F32, 1, TG_FEATBUF_LRU);
}

TG_TEST(extract_policies_with_read_errors)
{
    run(37, TG_F32, 1, TG_FEATBUF_STATIC);
    run(37, TG_F32, 1, TG_FEATBUF_NEXT_USE);
    run(50, TG_F16, 1, TG_FEATBUF_WINDOW);
}

int main(void)
{
    alarm(120); /* a deadlock fails the test instead of hanging it */
    dir = tg_test_tmpdir("featbuf_io");
    TG_RUN(extract_f32_unaligned_rows);
    TG_RUN(extract_f16);
    TG_RUN(extract_with_read_errors);
    TG_RUN(extract_policies_with_read_errors);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(dir);
    return rc;
}
