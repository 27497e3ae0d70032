/* The real OpenBLAS this build links: which kernels it runs (set nothing, report
 * openblas_get_corename), that its sgemm is right on them (exact on small integers, near a double
 * reference on random floats), whether a row of C depends on the GEMM's row count (the reason
 * results over different chunks are compared with a tolerance), and how OPENBLAS_CORETYPE is
 * honoured: an unknown core is skipped with exit 77 and a reason, the running core is taken.
 * CTest also runs it as test_blas@Haswell, @Zen and @SkylakeX. */
#include <cblas.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tg_test.h"

static float *fill(size_t n, int integers, tg_rng_t *r)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = integers ? (float)((int)tg_rng_below(r, 17) - 8)
                        : (float)(tg_rng_uniform(r) * 2.0 - 1.0);
    return x;
}

/* C = A B (row-major, M x K times K x N); with integer entries in [-8, 8] every partial sum is
 * an integer below 2^24, so any summation order is exact and C must equal the reference. */
static void sgemm_case(size_t M, size_t N, size_t K, int integers, tg_rng_t *r)
{
    float *A = fill(M * K, integers, r), *B = fill(K * N, integers, r);
    float *C = malloc(M * N * sizeof *C);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)K,
                B, (int)N, 0.0f, C, (int)N);
    double worst = 0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double s = 0;
            for (size_t k = 0; k < K; k++)
                s += (double)A[i * K + k] * (double)B[k * N + j];
            worst = TG_MAX(worst, fabs(s - C[i * N + j]));
        }
    double lim = integers ? 0.0 : 1e-6 * (double)K;
    if (!(worst <= lim))
        TG_FAIL("sgemm %zux%zux%zu (%s) on %s: off by %g", M, N, K,
                integers ? "integers" : "floats", tg_test_blas_core(), worst);
    free(A);
    free(B);
    free(C);
}

TG_TEST(sgemm_is_right)
{
    fprintf(stderr, "  %s; core %s; OPENBLAS_CORETYPE=%s\n", tg_test_blas_config(),
            tg_test_blas_core(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
    tg_rng_t r;
    tg_rng_seed(&r, 5);
    static const size_t shapes[][3] = {{1, 1, 1},     {2, 2, 2},      {7, 4, 16},     {64, 16, 16},
                                       {100, 16, 16}, {300, 33, 100}, {256, 16, 1433}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int integers = 0; integers <= 1; integers++)
            sgemm_case(shapes[s][0], shapes[s][1], shapes[s][2], integers, &r);
}

/* Not a requirement, a fact the other tests allow for: on the Haswell and Zen kernels the rows
 * of C = A B depend on M (how many rows the call has), so one node's output depends on its chunk.
 * Reported, not checked. */
TG_TEST(rows_depend_on_m)
{
    enum { K = 64, N = 16, MMAX = 256 };
    tg_rng_t r;
    tg_rng_seed(&r, 6);
    float *A = fill(MMAX * K, 0, &r), *B = fill(K * N, 0, &r);
    float *C0 = malloc(MMAX * N * sizeof *C0), *C = malloc(MMAX * N * sizeof *C);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, MMAX, N, K, 1.0f, A, K, B, N, 0.0f, C0,
                N);
    int differ = 0;
    for (int m = 1; m <= MMAX; m++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, N, K, 1.0f, A, K, B, N, 0.0f, C,
                    N);
        differ += memcmp(C, C0, (size_t)m * N * sizeof *C) != 0;
    }
    fprintf(stderr, "  %s: the first m rows of C differ between M = m and M = %d for %d of %d m\n",
            tg_test_blas_core(), MMAX, differ, MMAX);
    free(A);
    free(B);
    free(C0);
    free(C);
}

/* This program again with OPENBLAS_CORETYPE=core and --probe; returns the exit status, the
 * output in out. */
static int run_self(const char *core, char *out, size_t cap)
{
    int p[2];
    if (pipe(p)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        setenv("OPENBLAS_CORETYPE", core, 1);
        setenv("TG_TEST_REEXEC", "1", 1); /* this program again, on purpose */
        execl("/proc/self/exe", "test_blas", "--probe", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t k;
    while (len + 1 < cap && (k = read(p[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)k;
    out[len] = 0;
    close(p[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TG_TEST(coretype_gate)
{
    char out[4096];
    /* a name OpenBLAS does not know: it runs the CPU's own core, so the test is skipped */
    int rc = run_self("NoSuchCore", out, sizeof out);
    TG_CHECK(rc == TG_SKIP);
    if (!strstr(out, "SKIP: OPENBLAS_CORETYPE=NoSuchCore, but OpenBLAS runs its"))
        TG_FAIL("unknown core: output was\n%s", out);
    /* the core OpenBLAS picked itself, asked for by name: taken, and sgemm runs */
    char self[64];
    snprintf(self, sizeof self, "%s", tg_test_blas_core());
    rc = run_self(self, out, sizeof out);
    if (tg_test_blas_cpu_lacks(self)) {
        TG_FAIL("OpenBLAS chose %s, whose kernels need %s, which this CPU lacks", self,
                tg_test_blas_cpu_lacks(self));
    } else {
        TG_CHECK(rc == 0);
        if (!strstr(out, "OpenBLAS runs its") || !strstr(out, "probe ok"))
            TG_FAIL("own core %s: output was\n%s", self, out);
    }
    /* a core this CPU cannot run (SkylakeX without AVX-512): skipped before any sgemm, never
     * SIGILL; on a CPU with AVX-512 there is no such x86 core to ask for */
    if (tg_test_blas_cpu_lacks("SkylakeX")) {
        rc = run_self("SkylakeX", out, sizeof out);
        TG_CHECK(rc == TG_SKIP);
        if (!strstr(out, "this CPU lacks")) TG_FAIL("SkylakeX: output was\n%s", out);
    } else {
        fprintf(stderr, "  this CPU runs AVX-512: the SIGILL guard is not exercised here\n");
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--probe")) {
        /* reached only past the gate: run one sgemm on the core taken */
        tg_rng_t r;
        tg_rng_seed(&r, 1);
        sgemm_case(33, 17, 70, 1, &r);
        printf("probe ok: %s\n", tg_test_blas_core());
        return tg_test_done();
    }
    TG_RUN(sgemm_is_right);
    TG_RUN(rows_depend_on_m);
    TG_RUN(coretype_gate);
    return tg_test_done();
}
