/* OpenBLAS in the tests: which kernels run, whether this CPU can run the ones OPENBLAS_CORETYPE
 * asks for, and the comparisons of floats that went through GEMMs of different shapes.
 *
 * Why the gate: this OpenBLAS (Debian 12, 0.3.21, DYNAMIC_ARCH) treats OPENBLAS_CORETYPE three
 * ways, measured (qemu-x86_64 -cpu Haswell stands in for a CPU without AVX-512):
 *   - a name it does not know ("Nonsense"): ignored, the CPU's own core runs;
 *   - Cooperlake on a CPU without AVX512-BF16: it falls back to Haswell by itself;
 *   - SkylakeX on a CPU without AVX-512: taken as asked, and the first sgemm dies of SIGILL.
 * So a variant test runs only when OpenBLAS reports the core asked for and the CPU has the
 * instructions that core's kernels are compiled for; otherwise it exits 77 saying which. */
#include <cblas.h>
#include <strings.h>
#include <unistd.h>

#include "tg_test.h"

const char *tg_test_blas_core(void)
{
    return openblas_get_corename();
}

const char *tg_test_blas_config(void)
{
    return openblas_get_config();
}

/* __builtin_cpu_supports needs a literal; libgcc and compiler-rt also check that the OS saves
 * the AVX / AVX-512 registers, as OpenBLAS's own detection does. */
static int cpu_has(const char *f)
{
    if (!strcmp(f, "sse3")) return __builtin_cpu_supports("sse3") != 0;
    if (!strcmp(f, "avx")) return __builtin_cpu_supports("avx") != 0;
    if (!strcmp(f, "avx2")) return __builtin_cpu_supports("avx2") != 0;
    if (!strcmp(f, "fma")) return __builtin_cpu_supports("fma") != 0;
    if (!strcmp(f, "avx512f")) return __builtin_cpu_supports("avx512f") != 0;
    if (!strcmp(f, "avx512vl")) return __builtin_cpu_supports("avx512vl") != 0;
    if (!strcmp(f, "avx512bw")) return __builtin_cpu_supports("avx512bw") != 0;
    if (!strcmp(f, "avx512dq")) return __builtin_cpu_supports("avx512dq") != 0;
    if (!strcmp(f, "avx512cd")) return __builtin_cpu_supports("avx512cd") != 0;
    if (!strcmp(f, "avx512bf16")) return __builtin_cpu_supports("avx512bf16") != 0;
    return 0;
}

/* The instructions each x86 core's kernels are built for (OpenBLAS's Makefile.x86_64: -mavx2
 * for Haswell and Zen, -march=skylake-avx512 for SkylakeX, -march=cooperlake for Cooperlake). */
static const struct {
    const char *core;
    const char *needs[7];
} core_isa[] = {
    {"Sandybridge", {"avx"}},
    {"Haswell", {"avx2", "fma"}},
    {"Zen", {"avx2", "fma"}},
    {"SkylakeX", {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd"}},
    {"Cooperlake", {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx512bf16"}},
    {"SapphireRapids", {"avx512f", "avx512vl", "avx512bw", "avx512dq", "avx512cd", "avx512bf16"}},
};

const char *tg_test_blas_cpu_lacks(const char *core)
{
    __builtin_cpu_init(); /* may run from a constructor, before libgcc's own */
    for (size_t i = 0; i < sizeof core_isa / sizeof core_isa[0]; i++) {
        if (strcasecmp(core, core_isa[i].core)) continue;
        for (int k = 0; k < 7 && core_isa[i].needs[k]; k++)
            if (!cpu_has(core_isa[i].needs[k])) return core_isa[i].needs[k];
        return NULL;
    }
    return NULL; /* older cores need at most SSE3, which every x86-64 CPU in use has */
}

void tg_test_blas_gate(void)
{
    const char *want = getenv("OPENBLAS_CORETYPE");
    if (!want || !*want) return;
    const char *got = tg_test_blas_core();
    if (strcasecmp(want, got)) {
        fprintf(stderr,
                "SKIP: OPENBLAS_CORETYPE=%s, but OpenBLAS runs its %s kernels (it does not know "
                "that core, was built without it, or this CPU cannot run it; %s)\n",
                want, got, tg_test_blas_config());
        exit(TG_SKIP);
    }
    const char *lacks = tg_test_blas_cpu_lacks(got);
    if (lacks) {
        fprintf(stderr,
                "SKIP: OPENBLAS_CORETYPE=%s: this CPU lacks %s, which OpenBLAS's %s kernels use "
                "(OpenBLAS takes the core anyway and its first sgemm would die of SIGILL)\n",
                want, lacks, got);
        exit(TG_SKIP);
    }
    fprintf(stderr, "OpenBLAS runs its %s kernels (OPENBLAS_CORETYPE=%s)\n", got, want);
}

/* ---------------------------------------------------------------- floats of different shapes */

double tg_test_check_close(const float *a, const float *b, size_t n, double rtol, const char *what)
{
    double worst = 0;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]), lim = rtol * (1.0 + fabs((double)a[i]));
        /* a NaN on either side fails: !(d <= lim) */
        if (!(d <= lim) && bad++ == 0) first = i;
        if (d / (1.0 + fabs((double)a[i])) > worst) worst = d / (1.0 + fabs((double)a[i]));
    }
    if (bad)
        TG_FAIL("%s: %zu of %zu values differ by more than %g (1 + |a|); first at %zu: %.9g vs "
                "%.9g",
                what, bad, n, rtol, first, a[first], b[first]);
    return worst;
}

double tg_test_check_close_files(const char *a, const char *b, double rtol)
{
    size_t la = 0, lb = 0;
    char *x = tg_test_read_all(a, &la), *y = tg_test_read_all(b, &lb);
    double worst = 0;
    if (x && y && la != lb)
        TG_FAIL("%s (%zu bytes) and %s (%zu bytes) differ in size", a, la, b, lb);
    if (x && y && la == lb && la % sizeof(float))
        TG_FAIL("%s: %zu bytes is not a float32 array", a, la);
    else if (x && y && la == lb)
        worst = tg_test_check_close((const float *)(const void *)x, (const float *)(const void *)y,
                                    la / sizeof(float), rtol, b);
    free(x);
    free(y);
    return worst;
}

/* Argmax of a row, ties to the lower class (as infer and eval break them). */
static uint32_t argmax(const float *row, uint32_t C)
{
    uint32_t best = 0;
    for (uint32_t k = 1; k < C; k++)
        if (row[k] > row[best]) best = k;
    return best;
}

size_t tg_test_check_argmax(const float *ref, const float *got, size_t n, uint32_t C, double rtol,
                            const char *what)
{
    size_t flips = 0;
    for (size_t i = 0; i < n; i++) {
        const float *r = ref + i * C;
        uint32_t p = argmax(r, C), q = argmax(got + i * C, C);
        if (p == q) continue;
        /* Each logit may move by rtol (1 + |logit|); the order of two can change only when
         * they lie within twice that. */
        double gap = (double)r[p] - (double)r[q];
        double lim = rtol * (2.0 + fabs((double)r[p]) + fabs((double)r[q]));
        if (gap <= lim) {
            flips++;
            continue;
        }
        TG_FAIL("%s: row %zu predicts class %u, the reference %u, whose logit is larger by %g "
                "(more than the tolerance %g)",
                what, i, q, p, gap, lim);
        return flips;
    }
    return flips;
}
