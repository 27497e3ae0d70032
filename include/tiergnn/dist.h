/* tiergnn/dist.h - data-parallel ranks: the MPI world under mpirun, else one rank.
 *
 *     if (tg_dist_init() < 0) fail();      // MPI_Init_thread only when mpirun started us
 *     ... every rank: the same dataset, its share of each epoch's batches, the gradients
 *     ... summed with tg_dist_grad_sync between backward and the optimiser step ...
 *     tg_dist_finish(rc);                  // MPI_Finalize, or MPI_Abort for a lone failure
 *
 * A build without MPI (no TG_HAVE_MPI) has only the world of one rank: every function below is
 * then exact for K = 1 (nothing to compare, nothing to sum), and a process that mpirun started
 * with more than one rank is refused rather than left to train alone beside K - 1 copies.
 *
 * Collectives: the functions marked (collective) must be called by every rank in the same order.
 * An error they return is every rank's (tg_dist_shared_error() says so), so the ranks stop
 * together and finalize; an error a rank meets alone (an I/O error in its pass) ends the job with
 * MPI_Abort in tg_dist_finish, because its peers may wait in a collective it will never join.
 * docs/DISTRIBUTED.md has the rules for users. */
#ifndef TIERGNN_DIST_H
#define TIERGNN_DIST_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "tiergnn/data.h"

/* 1 when the environment says a launcher started this process as one rank of several or one
 * (OpenMPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, MPICH's PMI_SIZE); *size = the world's size
 * when the launcher says it, else 0. A plain `tiergnn train` sees 0 and never touches MPI. */
int tg_dist_launched(int *size);

/* 1 when this program was built with MPI (TG_HAVE_MPI): the CLI's tiergnn-mpi; 0 for tiergnn,
 * which execs tiergnn-mpi when launched (src/cli/main.c) and is otherwise the world of one rank. */
int tg_dist_with_mpi(void);

/* Under a launcher: MPI_Init_thread asking for MPI_THREAD_SERIALIZED (the step callback that
 * sums gradients may run on a pipeline thread, never two at once), refused when the library gives
 * less; errors of MPI calls are returned, not fatal; the log lines of K > 1 ranks are prefixed
 * "rank R/K: ". Without a launcher: nothing (the world of one rank). -ENOTSUP when a launcher
 * started K > 1 ranks of a build without MPI. Call once, before any thread starts. */
int tg_dist_init(void);

/* Ends the world: MPI_Finalize when rc >= 0, rc == -EINTR (every rank stopped at one batch
 * boundary) or the error was shared; MPI_Abort otherwise (this rank failed alone; the message
 * names it). Nothing without MPI. */
void tg_dist_finish(int rc);

int tg_dist_active(void); /* MPI was initialised (even K = 1: the code paths of K ranks) */
int tg_dist_rank(void);   /* 0 .. size - 1; 0 when not active */
int tg_dist_size(void);   /* K; 1 when not active */
/* The last error returned by a collective below was every rank's (so no MPI_Abort is needed). */
int tg_dist_shared_error(void);

/* (collective) Every rank's rc of a stage: rc itself when this rank failed (its message), else
 * -ECANCELED naming the first rank that failed and the stage, or rc (>= 0) when none failed. */
int tg_dist_agree(int rc, const char *stage);

/* (collective) Compares the datasets' meta.txt records (every file's size and CRC-32) with rank
 * 0's; -EINVAL naming the ranks and the first file that differs (dir: this rank's dataset). */
int tg_dist_check_meta(const tg_meta_t *meta, const char *dir);

/* (collective) Compares a CRC-32 of the n parameters p with every rank's: -EIO naming the ranks
 * whose parameters differ from rank 0's (when: the point of the run, for the message). */
int tg_dist_check_params(const float *p, size_t n, const char *when);

/* (collective) v[0..n) = the sum of every rank's v (what: named in an error). */
int tg_dist_sum_f64(double *v, int n, const char *what);

/* (collective) The bytes at buf on rank root become every rank's (what: named in an error). Sent
 * in pieces an int count can name. */
int tg_dist_bcast(void *buf, size_t bytes, int root, const char *what);

/* Rank q's share [*lo, *hi) of n items divided among the ranks: contiguous, in rank order, sizes
 * floor or ceil of n / K (rank q starts at q n / K). Every item belongs to one rank; with K = 1
 * rank 0 has [0, n). Evaluation and inference divide their chunks and batches by it. */
void tg_dist_share(uint64_t n, int q, uint64_t *lo, uint64_t *hi);

/* The state of tg_dist_grad_sync between steps. */
typedef struct tg_dist_step {
    volatile sig_atomic_t *stop; /* this rank's stop request (SIGINT), or NULL */
    int stopped;                 /* after a sync: some rank asked to stop after this step */
    uint64_t steps;              /* syncs done */
    double sync_s;               /* seconds inside the collectives */
    double wait_s;               /* of them, in the step's flags: the wait for the slowest rank */
    uint64_t bytes;              /* gradient bytes each rank contributed */
} tg_dist_step_t;

/* (collective, the tg_grad_sync_fn of tiergnn/nn.h) Between one step's backward and its optimiser
 * step: agrees on failures (a rank whose step failed, local_rc < 0, fails every rank's step) and on
 * stop requests, then replaces g (n floats) by the mean over ranks of their gradients: summed with
 * MPI_Allreduce over the flat block, divided by K. Returns 0 (step), TG_GRAD_SKIP (no rank had a
 * labelled seed: no step anywhere), or an error. */
int tg_dist_grad_sync(void *ctx, float *g, size_t n, int local_rc, uint64_t count);

#endif
