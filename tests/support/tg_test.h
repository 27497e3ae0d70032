/* Minimal test harness: checks fail loudly with file:line and the values, tests skip with 77.
 *
 *     TG_TEST(round_trip) { ... TG_CHECK(x == 3); TG_CHECK_OK(tg_foo()); }
 *     int main(void) { TG_RUN(round_trip); return tg_test_done(); }
 *
 * Variants. CTest runs some test programs again as variants of the plain test (CMakeLists.txt),
 * each with TG_TEST_VARIANT set to what it changes:
 *   gemm    test_X@Haswell, @Zen, @SkylakeX: OpenBLAS's kernels (OPENBLAS_CORETYPE);
 *   io      test_X@no-odirect, @no-uring: the io layer's fallbacks (TG_TEST_IO_ABSENT);
 *   cgroup  test_bench_nocgroup: no writable cgroup (MEMBUDGET_NO_CGROUP=1).
 * A variant needs only the sub-tests that exercise what it changes, so each sub-test says where
 * it runs besides the plain test:
 *   TG_RUN(x)                 every variant (the default: a new sub-test is covered everywhere);
 *   TG_RUN_IN(x, "gemm,io")   the variants named;
 *   TG_RUN_PLAIN(x)           none: the plain test (and its ASan run) only.
 * A sub-test runs GEMMs when it trains, evaluates or infers (in process, or through the CLI's
 * train / eval / infer / bench, whose GEMM probe counts too); it reads from disk when a dataset's
 * files go through the io layer (a store, an extractor, a strategy, the CLI's train / eval /
 * infer). One that does neither what a variant changes (argument and flag errors, the
 * arithmetic of a pure function, a refusal before anything is read) is left out of it, printing
 * "SKIP x (variant V)". A sub-test left out must leave nothing that a later one needs.
 * By hand, TG_TEST_CASES="x,y" runs only those sub-tests (the others print "SKIP x
 * (TG_TEST_CASES)"); a name the program does not run fails it.
 */
#ifndef TG_TEST_H
#define TG_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiergnn/util.h"

#define TG_SKIP 77

extern int tg_test_failures;
extern const char *tg_test_current;

#define TG_TEST(name) static void test_##name(void)
/* variants: NULL every variant, "" none, else a comma-separated list of TG_TEST_VARIANT values */
#define TG_RUN_IN(name, variants)                                                                  \
    do {                                                                                           \
        if (!tg_test_selected(#name, variants)) break;                                             \
        int before_ = tg_test_failures;                                                            \
        tg_test_current = #name;                                                                   \
        double t0_ = tg_now();                                                                     \
        test_##name();                                                                             \
        fprintf(stderr, "%s %s (%.2fs)\n", tg_test_failures == before_ ? "PASS" : "FAIL", #name,   \
                tg_now() - t0_);                                                                   \
    } while (0)
#define TG_RUN(name) TG_RUN_IN(name, NULL)
#define TG_RUN_PLAIN(name) TG_RUN_IN(name, "")

#define TG_FAIL(...)                                                                               \
    do {                                                                                           \
        fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, tg_test_current);                      \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        tg_test_failures++;                                                                        \
    } while (0)

#define TG_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) TG_FAIL("check failed: %s", #cond);                                           \
    } while (0)

/* Expects a tiergnn call to return >= 0; prints the error message otherwise. */
#define TG_CHECK_OK(call)                                                                          \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ < 0) TG_FAIL("%s returned %d: %s", #call, rc_, tg_errmsg());                       \
    } while (0)

/* Expects a tiergnn call to fail with a negative code and a message containing `needle`. */
#define TG_CHECK_ERR(call, needle)                                                                 \
    do {                                                                                           \
        tg_err_clear();                                                                            \
        int rc_ = (call);                                                                          \
        if (rc_ >= 0)                                                                              \
            TG_FAIL("%s succeeded, expected an error containing '%s'", #call, needle);             \
        else if (!strstr(tg_errmsg(), needle))                                                     \
            TG_FAIL("%s: message '%s' lacks '%s'", #call, tg_errmsg(), needle);                    \
    } while (0)

#define TG_CHECK_EQ_U64(a, b)                                                                      \
    do {                                                                                           \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);             \
        if (a_ != b_) TG_FAIL("%s == %s: %llu != %llu", #a, #b, a_, b_);                           \
    } while (0)

#define TG_CHECK_NEAR(a, b, tol)                                                                   \
    do {                                                                                           \
        double a_ = (double)(a), b_ = (double)(b);                                                 \
        if (!(fabs(a_ - b_) <= (tol)))                                                             \
            TG_FAIL("%s ~= %s: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol));             \
    } while (0)

/* Whether sub-test `name`, which runs in the variants listed (NULL: all), runs here (see the
 * top of this file); prints its SKIP line when not. */
int tg_test_selected(const char *name, const char *variants);
/* Also fails the program when TG_TEST_CASES named a sub-test it does not run. */
int tg_test_done(void);

/* A fresh empty directory for this test under the build tree; returns a static path. */
const char *tg_test_tmpdir(const char *name);
/* Path of ../shared/datasets/<name>, or NULL if absent (then the caller skips). */
const char *tg_test_shared_dataset(const char *name);
/* Runs the tiergnn CLI with a shell command line suffix ("generate out --nodes 10");
 * captures stdout+stderr into *output (malloc'd, may be NULL). Returns the exit status. */
int tg_test_cli(char **output, const char *fmt, ...) TG_PRINTF(2, 3);
/* After a failed dataset write: OUT must not exist, nor any OUT.tmp-* beside it (fails the test
 * otherwise). */
void tg_test_check_no_output(const char *out);
/* A whole file, malloc'd (*len its size when len is not NULL); NULL after failing the test
 * with a message naming the file. */
char *tg_test_read_all(const char *path, size_t *len);
/* Whether two files exist and hold the same bytes. */
int tg_test_same_file(const char *a, const char *b);
/* Entries of dir other than "." and "..", -1 if it cannot be opened; with verbose, each is
 * printed as "left behind: dir/name". */
int tg_test_count_entries(const char *dir, int verbose);
/* Runs before every test's main (the constructor in tg_test.c): exits 3 with a message when a
 * process above this one is this same test program, so a test that runs a test program as a
 * child (the fork bomb a bench of /proc/self/exe made) fails at once instead of multiplying. A
 * deliberate re-exec sets TG_TEST_REEXEC=1 in the child's environment. */
void tg_test_not_own_descendant(void);
/* TG_TEST_IO_ABSENT="odirect", "uring" or "odirect,uring" makes a test run as on a machine
 * without O_DIRECT (every O_DIRECT open refused with EINVAL, as tmpfs did before Linux 6.6) or
 * without io_uring (ENOSYS: an old kernel, io_uring_disabled, seccomp): the constructor turns it
 * into TIERGNN_IO_FAULT rules, which the io layer and the CLIs the test starts obey, and the
 * capability checks (tests/test_io_common.h) report the same absence, so what needs the missing
 * part skips saying so. CTest runs the I/O tests so as test_X@no-odirect and test_X@no-uring. */
void tg_test_io_absent_init(void);
/* 1 when `what` ("odirect", "uring") is listed in TG_TEST_IO_ABSENT. */
int tg_test_io_absent(const char *what);
/* Whether ../shared/tools/membudget (TG_SHARED_DIR) can set a cgroup memory limit here: 1, or 0
 * with why (no membudget, no writable cgroup, MEMBUDGET_NO_CGROUP=1) for the test's skip line. */
int tg_test_cgroup_limit_works(char *why, size_t len);
/* Writes a small text file (creating it). */
void tg_test_write_file(const char *path, const char *text);
/* Writes a gzip-compressed text file. */
void tg_test_write_gz(const char *path, const char *text);

/* ---- OpenBLAS and floats from different GEMM shapes (tg_test_blas.c)
 *
 * What a test may compare byte for byte: results of the same GEMM shapes in the same order
 * (training runs of the in-order strategies, resume, thread counts, eval and infer with the same
 * chunking). Results over different row blocks (layer-wise chunks of another size, a batch vs the
 * layer-wise path) differ in the last bits on some OpenBLAS kernels (Haswell, Zen): compare them
 * with tg_test_check_close / tg_test_check_argmax and TG_TEST_RTOL. docs/TRAINING.md has the list.
 */

/* Relative tolerance of one float computed through GEMMs of other row blocks:
 * |a - b| <= TG_TEST_RTOL (1 + |a|). Measured worst in these tests: 2.9e-6 (3-layer GIN logits,
 * whole-graph batch vs chunks of 7 nodes, Haswell and Zen kernels); SAGE embeddings 4.4e-7. A
 * wrong neighbour, scale or row is off by far more. */
#define TG_TEST_RTOL 3e-5

/* openblas_get_corename(): the kernels OpenBLAS runs ("Haswell", "Zen", "SkylakeX", ...). */
const char *tg_test_blas_core(void);
/* openblas_get_config(): version and build options. */
const char *tg_test_blas_config(void);
/* The first instruction-set feature ("avx512f") this CPU lacks for OpenBLAS core `core`'s
 * kernels, or NULL when it has them all (or the core is not one of the x86 AVX cores). */
const char *tg_test_blas_cpu_lacks(const char *core);
/* Runs before every test's main (a constructor in tg_test.c): with OPENBLAS_CORETYPE=X set,
 * exits 77 with a line saying why unless OpenBLAS took core X and this CPU can run it; when it
 * runs, says so on stderr. Sets nothing itself. */
void tg_test_blas_gate(void);
/* Fails the test (naming `what`, the count and the first bad index) unless every
 * |a[i] - b[i]| <= rtol (1 + |a[i]|); returns the worst |a - b| / (1 + |a|). */
double tg_test_check_close(const float *a, const float *b, size_t n, double rtol, const char *what);
/* The same over two float32 files of equal size. */
double tg_test_check_close_files(const char *a, const char *b, double rtol);
/* Predictions from logits got (n, C) must be those of ref (n, C) except where ref's two logits
 * involved lie within rtol (2 + |l1| + |l2|) of each other (a flip the tolerance allows); fails
 * the test otherwise. Returns the number of allowed flips. Ties go to the lower class. */
size_t tg_test_check_argmax(const float *ref, const float *got, size_t n, uint32_t C, double rtol,
                            const char *what);

#endif
