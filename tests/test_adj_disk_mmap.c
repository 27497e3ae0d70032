/* Memory-mapped adjacency (the mmap baseline): the same batches as the in-memory adjacency for
 * u32 and u64 index files, from several threads; a file truncated under the run gives an error
 * naming indices.bin and the offset (SIGBUS guard), and a short file is refused at open. */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "test_adj_disk_common.h"

/* Under a sanitizer its own SIGBUS handler is the previous one: it reports and exits non-zero. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UNDER_SANITIZER 1
#endif
#endif
#if defined(TG_SANITIZE) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#endif

static const char *g_dir;

TG_TEST(same_batches_as_memory)
{
    for (int wide = 0; wide < 2; wide++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            tad_opts_t o;
            tad_default(&o);
            o.index_dtype = wide ? TG_U64 : TG_U32;
            o.seed = 100 + seed;
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/ds-%d-%llu", g_dir, wide, (unsigned long long)seed);
            tad_write(dir, &o);
            tg_dataset_t *ds = tad_open(dir);
            tg_adj_t *mem, *mm;
            TG_CHECK_OK(tg_adj_memory_open(&mem, ds));
            tg_budget_t budget;
            tg_budget_init(&budget, 0);
            TG_CHECK_OK(tg_adj_mmap_open(&mm, ds, &budget));
            /* only indptr is accounted */
            TG_CHECK_EQ_U64(budget.used, (o.nodes + 1) * 8);
            uint64_t *train, ntrain;
            TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &train, &ntrain));
            static const int64_t fans[3][3] = {{10, 5, 0}, {-1, 4, 0}, {20, 10, 5}};
            static const int layers[3] = {2, 2, 3};
            for (int f = 0; f < 3; f++) {
                tg_sampler_t *sm, *sd;
                TG_CHECK_OK(tg_sampler_create(&sm, mem, layers[f], fans[f]));
                TG_CHECK_OK(tg_sampler_create(&sd, mm, layers[f], fans[f]));
                for (uint64_t b = 0; b < 5; b++) {
                    tg_rng_t r1, r2;
                    tg_sampler_batch_rng(&r1, seed, (uint64_t)f, b);
                    r2 = r1;
                    tg_batch_t x, y;
                    TG_CHECK_OK(tg_sampler_sample(sm, train + b * 100, 100, &r1, &x));
                    TG_CHECK_OK(tg_sampler_sample(sd, train + b * 100, 100, &r2, &y));
                    char w[96];
                    snprintf(w, sizeof w, "%s seed %llu fanouts %d batch %llu",
                             wide ? "u64" : "u32", (unsigned long long)seed, f,
                             (unsigned long long)b);
                    tad_batches_equal(&x, &y, w);
                    tg_batch_free(&x);
                    tg_batch_free(&y);
                }
                tg_sampler_destroy(sm);
                tg_sampler_destroy(sd);
            }
            uint64_t bad = mm->num_edges;
            uint64_t v;
            TG_CHECK_ERR(tg_adj_read(mm, &bad, 1, &v), "out of range");
            free(train);
            tg_adj_destroy(mm);
            TG_CHECK_EQ_U64(budget.used, 0);
            tg_budget_destroy(&budget);
            tg_adj_destroy(mem);
            tg_dataset_close(ds);
        }
}

/* Several threads read through one mapping at once; all get the array's values. */
typedef struct {
    tg_adj_t *adj;
    const uint64_t *ref;
    int bad;
    unsigned seed;
} thr_t;

static void *thr_main(void *arg)
{
    thr_t *t = arg;
    tg_rng_t r;
    tg_rng_seed(&r, t->seed);
    uint64_t pos[256], out[256];
    for (int it = 0; it < 200; it++) {
        for (int i = 0; i < 256; i++)
            pos[i] = tg_rng_below(&r, t->adj->num_edges);
        if (tg_adj_read(t->adj, pos, 256, out) < 0) {
            t->bad++;
            continue;
        }
        for (int i = 0; i < 256; i++)
            if (out[i] != t->ref[pos[i]]) t->bad++;
    }
    return NULL;
}

TG_TEST(threads)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 7;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/thr", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    uint64_t *ref;
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ref));
    tg_adj_t *mm;
    TG_CHECK_OK(tg_adj_mmap_open(&mm, ds, NULL));
    thr_t t[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        t[i] = (thr_t){mm, ref, 0, (unsigned)i + 1};
        pthread_create(&th[i], NULL, thr_main, &t[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        TG_CHECK(t[i].bad == 0);
    }
    free(ref);
    tg_adj_destroy(mm);
    tg_dataset_close(ds);
}

/* Truncated under the run: a read of a page beyond the new end is a SIGBUS, turned into an error
 * naming indices.bin and the faulting offset. A read within the last, partly cut page returns
 * zeros without a SIGBUS; the size check after the copy reports that one. */
TG_TEST(truncated_under_the_run)
{
    tad_opts_t o;
    tad_default(&o);
    o.seed = 9;
    o.index_dtype = TG_U64;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/trunc", g_dir);
    tad_write(dir, &o);
    tg_dataset_t *ds = tad_open(dir);
    tg_adj_t *mm;
    TG_CHECK_OK(tg_adj_mmap_open(&mm, ds, NULL));
    uint64_t E = mm->num_edges;
    TG_CHECK(E * 8 > 3 * 4096);
    uint64_t cut = 4096 + 100; /* mid-page: page 1 partly kept, pages 2.. gone */
    tad_truncate(ds, TG_FILE_INDICES, cut);

    uint64_t p = E - 1, v = 12345;
    tg_err_clear();
    int rc = tg_adj_read(mm, &p, 1, &v);
    TG_CHECK(rc == -EIO);
    const char *msg = tg_errmsg();
    fprintf(stderr, "  beyond the end: %s\n", msg);
    TG_CHECK(strstr(msg, "indices.bin") != NULL);
    TG_CHECK(strstr(msg, "SIGBUS") != NULL);
    char want[64];
    snprintf(want, sizeof want, "offset %llu", (unsigned long long)((E - 1) * 8));
    TG_CHECK(strstr(msg, want) != NULL);
    TG_CHECK(strstr(msg, "truncated") != NULL);

    /* in the kept part of the cut page: no SIGBUS (zeros), but the size check reports it */
    p = (cut + 200) / 8;
    tg_err_clear();
    rc = tg_adj_read(mm, &p, 1, &v);
    TG_CHECK(rc == -EIO);
    fprintf(stderr, "  in the cut page: %s\n", tg_errmsg());
    TG_CHECK(strstr(tg_errmsg(), "indices.bin") != NULL);
    TG_CHECK(strstr(tg_errmsg(), "truncated") != NULL);

    /* the guard can be used again on the same thread after a jump */
    p = E - 2;
    TG_CHECK_ERR(tg_adj_read(mm, &p, 1, &v), "SIGBUS");
    tg_adj_destroy(mm);

    /* a new open refuses the short file before mapping it */
    TG_CHECK_ERR(tg_adj_mmap_open(&mm, ds, NULL), "expected");
    tg_dataset_close(ds);
}

/* A SIGBUS that is not a guarded read still ends the process with SIGBUS (the handler passes it
 * on), both from a fault on an unguarded mapping and from kill(). */
TG_TEST(unguarded_sigbus_still_kills)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/plain.bin", g_dir);
    tg_test_write_file(path, "0123456789");
    tg_mmap_file_t *f, *g;
    TG_CHECK_OK(tg_mmap_file_open(&f, path, 10)); /* installs the handler */
    TG_CHECK_ERR(tg_mmap_file_open(&g, path, 11), "expected 11");
    TG_CHECK(g == NULL);
    fprintf(stderr, "  (two children die of SIGBUS on purpose now; a sanitizer report from them is "
                    "expected)\n");
    for (int how = 0; how < 2; how++) {
        pid_t pid = fork();
        if (pid == 0) {
            if (how == 0) {
                int fd = open(path, O_RDONLY);
                volatile const char *p = mmap(NULL, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0);
                char c = p[2 * 4096]; /* beyond the file: SIGBUS */
                _exit(c == 0 ? 3 : 4);
            }
            raise(SIGBUS);
            _exit(5);
        }
        int st = 0;
        waitpid(pid, &st, 0);
#ifdef UNDER_SANITIZER
        /* ASan reports the fault, then exits non-zero or, with abort_on_error=1 (make check),
         * aborts: either way the process died of the unguarded SIGBUS. */
        TG_CHECK((WIFSIGNALED(st) && (WTERMSIG(st) == SIGBUS || WTERMSIG(st) == SIGABRT)) ||
                 (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3 &&
                  WEXITSTATUS(st) != 4 && WEXITSTATUS(st) != 5));
#else
        TG_CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS);
#endif
        if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS))
            fprintf(stderr, "  child %d: %s %d\n", how, WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
    tg_mmap_file_close(f);
}

int main(void)
{
    g_dir = tg_test_tmpdir("adj_mmap");
    TG_RUN(same_batches_as_memory);
    TG_RUN(threads);
    TG_RUN(truncated_under_the_run);
    TG_RUN(unguarded_sigbus_still_kills);
    int rc = tg_test_done();
    if (!rc) tg_rmtree(g_dir);
    return rc;
}
