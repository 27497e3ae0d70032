/* Data-parallel ranks (tiergnn/dist.h, docs/DISTRIBUTED.md): the MPI world when a launcher
 * started the process, else the world of one rank. Without TG_HAVE_MPI only that world exists,
 * and each function is exact for it: nothing to compare or to sum. */
#include "tiergnn/dist.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/nn.h"
#include "tiergnn/util.h"

#ifdef TG_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    int active, rank, size, shared_err;
} W = {0, 0, 1, 0};

/* The launchers' variables: OpenMPI's, PMIx's (OpenMPI 4/5, Slurm), MPICH's Hydra's. */
int tg_dist_launched(int *size)
{
    const char *s = getenv("OMPI_COMM_WORLD_SIZE");
    if (!s) s = getenv("PMI_SIZE");
    *size = s ? atoi(s) : 0;
    return s || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int tg_dist_active(void)
{
    return W.active;
}

int tg_dist_rank(void)
{
    return W.rank;
}

int tg_dist_size(void)
{
    return W.size;
}

int tg_dist_shared_error(void)
{
    return W.shared_err;
}

void tg_dist_share(uint64_t n, int q, uint64_t *lo, uint64_t *hi)
{
    /* q n / K without overflow for any n below 2^64 and K below 2^31 */
    uint64_t K = (uint64_t)W.size, a = (uint64_t)q, b = a + 1;
    *lo = n / K * a + n % K * a / K;
    *hi = n / K * b + n % K * b / K;
}

#ifndef TG_HAVE_MPI

int tg_dist_with_mpi(void)
{
    return 0;
}

int tg_dist_init(void)
{
    int k = 0;
    if (tg_dist_launched(&k) && k > 1)
        return tg_err(-ENOTSUP,
                      "started by mpirun as one of %d ranks, but this tiergnn was built without "
                      "MPI (no tiergnn-mpi beside it: install libopenmpi-dev and rebuild): each "
                      "rank would do the whole job alone",
                      k);
    return 0;
}

void tg_dist_finish(int rc)
{
    (void)rc;
}

int tg_dist_agree(int rc, const char *stage)
{
    (void)stage;
    return rc;
}

int tg_dist_check_meta(const tg_meta_t *meta, const char *dir)
{
    (void)meta;
    (void)dir;
    return 0;
}

int tg_dist_check_params(const float *p, size_t n, const char *when)
{
    (void)p;
    (void)n;
    (void)when;
    return 0;
}

int tg_dist_sum_f64(double *v, int n, const char *what)
{
    (void)v;
    (void)n;
    (void)what;
    return 0;
}

int tg_dist_bcast(void *buf, size_t bytes, int root, const char *what)
{
    (void)buf;
    (void)bytes;
    (void)root;
    (void)what;
    return 0;
}

int tg_dist_grad_sync(void *ctx, float *g, size_t n, int local_rc, uint64_t count)
{
    tg_dist_step_t *d = ctx;
    (void)g;
    (void)n;
    d->stopped = d->stop && *d->stop;
    d->steps++;
    if (local_rc < 0) return local_rc;
    return count ? 0 : TG_GRAD_SKIP;
}

#else /* TG_HAVE_MPI */

int tg_dist_with_mpi(void)
{
    return 1;
}

/* An MPI call's error as this module's: the call, what it carried, MPI's own words. */
static int mpi_fail(int code, const char *call, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    return tg_err(-EIO, "rank %d of %d: %s of %s failed: %s", W.rank, W.size, call, what, msg);
}

int tg_dist_init(void)
{
    int k = 0;
    if (!tg_dist_launched(&k)) return 0;
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Init_thread", "the world");
    W.active = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &W.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &W.size);
    if (provided < MPI_THREAD_SERIALIZED) {
        W.shared_err = 1; /* every rank gets the same answer from the same library */
        return tg_err(-ENOTSUP,
                      "MPI gives thread level %d, below MPI_THREAD_SERIALIZED (%d) that the "
                      "engine needs (its step may run on a pipeline thread)",
                      provided, MPI_THREAD_SERIALIZED);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (W.size > 1) {
        static char prefix[48];
        snprintf(prefix, sizeof prefix, "rank %d/%d: ", W.rank, W.size);
        tg_log_set_prefix(prefix);
    }
    return 0;
}

void tg_dist_finish(int rc)
{
    if (!W.active) return;
    if (rc < 0 && rc != -EINTR && !W.shared_err && W.size > 1) {
        fprintf(stderr, "tiergnn: rank %d of %d failed alone: ending every rank (MPI_Abort)\n",
                W.rank, W.size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    W.active = 0;
}

int tg_dist_agree(int rc, const char *stage)
{
    if (!W.active) return rc;
    int mine = rc < 0 ? W.rank : W.size, first = W.size;
    int e = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) return mpi_fail(e, "MPI_Allreduce", stage);
    if (first == W.size) return rc;
    W.shared_err = 1;
    if (rc < 0) return rc;
    return tg_err(-ECANCELED, "rank %d of %d failed %s (its message says why); every rank stops",
                  first, W.size, stage);
}

/* The ranks whose vals[] differ from rank 0's, as "1, 3" (at most what fits). */
static int list_ranks(const int *bad, char *buf, size_t len)
{
    size_t n = 0;
    int count = 0;
    buf[0] = 0;
    for (int q = 0; q < W.size; q++)
        if (bad[q] >= 0) {
            tg_err_list_add(buf, len, &n, "%d", q);
            count++;
        }
    return count;
}

int tg_dist_check_meta(const tg_meta_t *meta, const char *dir)
{
    if (!W.active) return 0;
    uint64_t mine[2 * TG_FILE_COUNT], root[2 * TG_FILE_COUNT];
    for (int i = 0; i < TG_FILE_COUNT; i++) {
        mine[2 * i] = meta->files[i].size;
        mine[2 * i + 1] = meta->files[i].crc32;
    }
    memcpy(root, mine, sizeof root);
    int e = MPI_Bcast(root, 2 * TG_FILE_COUNT, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) return mpi_fail(e, "MPI_Bcast", "the dataset's checksums");
    int differs = -1; /* the first file whose size or CRC-32 is not rank 0's */
    for (int i = 0; i < TG_FILE_COUNT && differs < 0; i++)
        if (mine[2 * i] != root[2 * i] || mine[2 * i + 1] != root[2 * i + 1]) differs = i;
    int *bad = malloc((size_t)W.size * sizeof *bad);
    if (!bad) return tg_err(-ENOMEM, "out of memory for %d ranks' checksum results", W.size);
    e = MPI_Allgather(&differs, 1, MPI_INT, bad, 1, MPI_INT, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) {
        free(bad);
        return mpi_fail(e, "MPI_Allgather", "the checksum results");
    }
    char ranks[256];
    int count = list_ranks(bad, ranks, sizeof ranks);
    int q = 0; /* the first rank that differs: its file goes in every rank's message */
    while (q < W.size && bad[q] < 0)
        q++;
    int file = q < W.size ? bad[q] : -1;
    free(bad);
    if (!count) return 0;
    W.shared_err = 1;
    if (differs >= 0)
        return tg_err(-EINVAL,
                      "the ranks' datasets differ: %s/%s on rank %d has %llu bytes, CRC-32 %08x "
                      "(meta.txt), rank 0's has %llu bytes, CRC-32 %08x (rank(s) %s differ from "
                      "rank 0); every rank needs the same dataset",
                      dir, tg_file_name((tg_file_id_t)differs), W.rank,
                      (unsigned long long)mine[2 * differs], (unsigned)mine[2 * differs + 1],
                      (unsigned long long)root[2 * differs], (unsigned)root[2 * differs + 1],
                      ranks);
    return tg_err(-EINVAL,
                  "the ranks' datasets differ: rank %d's %s is not rank 0's (meta.txt's size or "
                  "CRC-32; rank(s) %s differ from rank 0); every rank needs the same dataset",
                  q, tg_file_name((tg_file_id_t)file), ranks);
}

int tg_dist_check_params(const float *p, size_t n, const char *when)
{
    if (!W.active) return 0;
    uint32_t mine = tg_data_crc32(0, p, n * sizeof *p);
    uint32_t *all = malloc((size_t)W.size * sizeof *all);
    int *bad = malloc((size_t)W.size * sizeof *bad);
    if (!all || !bad) {
        free(all);
        free(bad);
        return tg_err(-ENOMEM, "out of memory for %d ranks' parameter checksums", W.size);
    }
    int e = MPI_Allgather(&mine, 1, MPI_UINT32_T, all, 1, MPI_UINT32_T, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) {
        free(all);
        free(bad);
        return mpi_fail(e, "MPI_Allgather", "the parameters' checksums");
    }
    for (int q = 0; q < W.size; q++)
        bad[q] = all[q] != all[0] ? q : -1;
    char ranks[256];
    int count = list_ranks(bad, ranks, sizeof ranks);
    uint32_t root = all[0];
    free(all);
    free(bad);
    if (!count) return 0;
    W.shared_err = 1;
    return tg_err(-EIO,
                  "%s the parameters differ between ranks: rank(s) %s differ from rank 0 (CRC-32 "
                  "%08x on rank 0, %08x here on rank %d); the ranks no longer train one model",
                  when, ranks, root, mine, W.rank);
}

int tg_dist_sum_f64(double *v, int n, const char *what)
{
    if (!W.active) return 0;
    int e = MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return e == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Allreduce", what);
}

int tg_dist_bcast(void *buf, size_t bytes, int root, const char *what)
{
    if (!W.active) return 0;
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += piece) {
        int cnt = (int)(bytes - off < piece ? bytes - off : piece);
        int e = MPI_Bcast((char *)buf + off, cnt, MPI_BYTE, root, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) return mpi_fail(e, "MPI_Bcast", what);
    }
    return 0;
}

/* g[0..n) = the sum over ranks, in pieces an int count can name. */
static int sum_floats(float *g, size_t n)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < n; off += piece) {
        int cnt = (int)(n - off < piece ? n - off : piece);
        int e = MPI_Allreduce(MPI_IN_PLACE, g + off, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (e != MPI_SUCCESS) return mpi_fail(e, "MPI_Allreduce", "the gradients");
    }
    return 0;
}

int tg_dist_grad_sync(void *ctx, float *g, size_t n, int local_rc, uint64_t count)
{
    tg_dist_step_t *d = ctx;
    double t0 = tg_now();
    d->steps++;
    if (!W.active) { /* the world of one rank: as tg_model_train_step */
        d->stopped = d->stop && *d->stop;
        if (local_rc < 0) return local_rc;
        return count ? 0 : TG_GRAD_SKIP;
    }
    /* one small collective first: who failed, who asks to stop, whether any seed was labelled
     * (all as minima: the flags negated) */
    int flags[3] = {local_rc < 0 ? W.rank : W.size, -(d->stop && *d->stop), -(count > 0)};
    int all[3];
    int e = MPI_Allreduce(flags, all, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (e != MPI_SUCCESS) return mpi_fail(e, "MPI_Allreduce", "the step's flags");
    /* three ints: their time is the wait for the rank that came last, what remains of sync_s is
     * the gradient sum's own */
    d->wait_s += tg_now() - t0;
    d->stopped = all[1] < 0;
    if (all[0] < W.size) {
        W.shared_err = 1;
        if (local_rc < 0) return local_rc;
        return tg_err(-ECANCELED,
                      "rank %d of %d failed its training step (its message says "
                      "why); every rank stops",
                      all[0], W.size);
    }
    if (all[2] == 0) {
        d->sync_s += tg_now() - t0;
        return TG_GRAD_SKIP;
    }
    int rc = sum_floats(g, n);
    if (rc < 0) return rc;
    if (W.size > 1) {
        float k = (float)W.size;
        for (size_t i = 0; i < n; i++)
            g[i] /= k;
    }
    d->sync_s += tg_now() - t0;
    d->bytes += n * sizeof *g;
    return 0;
}

#endif /* TG_HAVE_MPI */
