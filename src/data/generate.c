/* tiergnn generate: a power-law graph with planted communities, noisy class-signal features and
 * random splits, written in bounded memory (docs/FORMAT.md, "Synthetic datasets").
 *
 * The model, in "virtual" ids where community c is the contiguous range
 * [start(c), start(c) + size(c)) and sizes are equal (N / C, the first N % C one larger):
 *   - an undirected pair picks its first end's community uniformly, then an offset inside it
 *     from a skewed law: with probability 51/256 uniform, else R-MAT-like, each of the k
 *     offset bits being 1 with probability 1/4 (an AND of two random words), so offset 0 is a
 *     hub and the expected degree falls geometrically with the popcount of the offset;
 *   - the second end stays in that community with probability `homophily`, else goes to one
 *     of the other communities uniformly, and takes its offset from the same skewed law;
 *   - both directions are added, self loops and repeated pairs dropped (by the edge sort);
 *   - virtual ids map to stored ids through a seeded bijection of [0, N) (an invertible hash
 *     of [0, 2^k) with cycle walking), so communities and hubs are spread over the file.
 * Features: x_v = mu_label(v) + noise * n_v, with unit-norm class centroids (orthonormal when
 * D >= C) and n_v standard normal per entry. Labels are the communities. Splits are uniform
 * random subsets of exact sizes (selection sampling), stored ascending.
 *
 * Every random quantity comes from a stream of its own (tg_rng_seed2(seed, stream)): one per
 * edge chunk, one per feature block, one for splits, one for centroids, one for the
 * bijection; chunk and block sizes depend on nothing but the counts and D. Any thread count and
 * any memory budget therefore give the same bytes. */
#include "tiergnn/data.h"

#include "crc-impl.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNIFORM_MIX_256 51    /* endpoints drawn uniformly: 51/256 ~ 0.2, few nodes isolated */
#define EDGE_CHUNK (1u << 18) /* undirected pairs per RNG stream */
#define FEAT_BLOCK_VALUES (1u << 20) /* feature values per block (rows = this / D) */
#define NORMAL_TABLE_BITS 16
#define MIN_SORT_MEM (8u << 20)
#define IO_BUF (1u << 20)     /* labels and splits */
#define IO_BUF_CSC (8u << 20) /* indptr and indices: 1 MiB writes left the final merge waiting */

enum { /* RNG stream ids; edge chunks and feature blocks count up from their base */
       STREAM_PERM = 1,
       STREAM_CENTROIDS = 2,
       STREAM_SPLITS = 3,
       STREAM_EDGES = 1ull << 40,
       STREAM_FEATS = 2ull << 40
};

void tg_gen_opts_default(tg_gen_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->avg_degree = 20;
    o->feat_dim = 128;
    o->classes = 32;
    o->train_frac = 0.6;
    o->valid_frac = 0.2;
    o->test_frac = 0.2;
    o->homophily = 0.8;
    o->feat_noise = -1;
    o->seed = 1;
    o->feat_dtype = TG_F32;
}

/* ---------------------------------------------------------------- inlined RNG */

/* tg_rng_u64 and tg_rng_below (util/rng.c: xoshiro256**, Lemire's bounded draw), the same
 * sequence, inlined: the generator draws about 2 x 10^9 numbers and the call costs as much as
 * the draw. Streams are still seeded by tg_rng_seed2. */
static inline uint64_t rng_u64(tg_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t out = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return out;
}

static inline uint64_t rng_below(tg_rng_t *r, uint64_t n)
{
    __uint128_t m = (__uint128_t)rng_u64(r) * n;
    uint64_t l = (uint64_t)m;
    if (l < n) {
        uint64_t t = -n % n;
        while (l < t) {
            m = (__uint128_t)rng_u64(r) * n;
            l = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* ---------------------------------------------------------------- noise calibration */

static double phi_cdf(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

double tg_gen_centroid_accuracy(uint32_t classes, double noise)
{
    if (classes <= 1) return 1.0;
    if (noise <= 0) return 1.0;
    /* x = mu_c + noise * n; nearest centroid is right iff n_j - n_c < 1 / noise for all j != c
     * (orthonormal centroids): P = integral of phi(z) Phi(z + 1/noise)^(C-1) dz. */
    double s = 0, h = 1.0 / 128;
    for (double z = -12; z <= 12; z += h)
        s += exp(-0.5 * z * z) * pow(phi_cdf(z + 1.0 / noise), (double)classes - 1);
    return s * h / sqrt(2 * M_PI);
}

double tg_gen_auto_noise(uint32_t classes)
{
    if (classes <= 1) return 1.0;
    double target = 0.5 * (1.0 + 1.0 / classes);
    double lo = 1e-3, hi = 1e3; /* accuracy falls as noise grows */
    for (int i = 0; i < 60; i++) {
        double mid = sqrt(lo * hi);
        if (tg_gen_centroid_accuracy(classes, mid) > target)
            lo = mid;
        else
            hi = mid;
    }
    return sqrt(lo * hi);
}

/* ---------------------------------------------------------------- standard normal table */

/* Inverse of the standard normal CDF: Acklam's rational approximation (1e-9) polished by one
 * Halley step on erfc (about 1e-15). */
static double norm_quantile(double p)
{
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    double x;
    if (p < 0.02425 || p > 1 - 0.02425) {
        double q = sqrt(-2 * log(p < 0.5 ? p : 1 - p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
        if (p > 0.5) x = -x;
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
    }
    double e = phi_cdf(x) - p, u = e * sqrt(2 * M_PI) * exp(0.5 * x * x);
    return x - u / (1 + 0.5 * x * u);
}

/* Feature noise comes from a table of the 2^16 quantiles Phi^-1((i + 1/2) / 2^16): one random
 * word gives four draws at a fraction of a nanosecond each, which is what lets 10^9 values
 * stream at disk speed on two cores. The draws are exact to 2^-16 in probability and stop at
 * +-4.3 (mass 1.5e-5 beyond), far finer than the f16 output or any classifier can see. */
static float *normal_table(void)
{
    size_t n = (size_t)1 << NORMAL_TABLE_BITS;
    float *t = malloc(n * sizeof *t);
    if (!t) return NULL;
    for (size_t i = 0; i < n / 2; i++) {
        float v = (float)norm_quantile(((double)i + 0.5) / (double)n);
        t[i] = v;
        t[n - 1 - i] = -v; /* exact symmetry: mean exactly 0 */
    }
    return t;
}

/* ---------------------------------------------------------------- id bijection */

/* An invertible hash of [0, 2^k) (three rounds of: multiply by an odd key, xor-shift by k/3,
 * add a key), made a bijection of [0, N) by cycle walking: apply it until the value lands below
 * N (under 2 steps on average, since 2^k < 2N). Fewer rounds leave arithmetic progressions for
 * some seeds (consecutive stored ids cycling through the communities, up to 1.3x the random
 * rate of equal neighbouring labels); three stay within a few percent of random. */
typedef struct perm {
    unsigned k, shift;
    uint64_t mask, n;
    uint64_t mul[3], inv[3], add[3];
} perm_t;

static uint64_t mul_inverse(uint64_t a) /* a odd: a * x == 1 mod 2^64 (Newton) */
{
    uint64_t x = a;
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

static void perm_init(perm_t *p, uint64_t n, uint64_t seed)
{
    tg_rng_t r;
    tg_rng_seed2(&r, seed, STREAM_PERM);
    p->n = n;
    p->k = 1;
    while (p->k < 64 && (n - 1) >> p->k)
        p->k++;
    p->mask = p->k >= 64 ? ~0ull : (1ull << p->k) - 1;
    p->shift = TG_MAX(1, p->k / 3);
    for (int i = 0; i < 3; i++) {
        p->mul[i] = tg_rng_u64(&r) | 1;
        p->inv[i] = mul_inverse(p->mul[i]);
        p->add[i] = tg_rng_u64(&r);
    }
}

static inline uint64_t perm_round(const perm_t *p, uint64_t x)
{
    for (int i = 0; i < 3; i++) {
        x = (x * p->mul[i]) & p->mask;
        x ^= x >> p->shift;
        x = (x + p->add[i]) & p->mask;
    }
    return x;
}

static inline uint64_t perm_round_inv(const perm_t *p, uint64_t x)
{
    for (int i = 2; i >= 0; i--) {
        x = (x - p->add[i]) & p->mask;
        /* x ^= x >> s, undone: each step fixes `shift` more high bits */
        uint64_t y = x;
        for (unsigned b = p->shift; b < p->k; b += p->shift)
            y = x ^ (y >> p->shift);
        x = (y * p->inv[i]) & p->mask;
    }
    return x;
}

static inline uint64_t perm_fwd(const perm_t *p, uint64_t v)
{
    do
        v = perm_round(p, v);
    while (v >= p->n);
    return v;
}

static inline uint64_t perm_back(const perm_t *p, uint64_t v)
{
    do
        v = perm_round_inv(p, v);
    while (v >= p->n);
    return v;
}

/* perm_fwd of a whole array. While ids fit in 32 bits the rounds only need the low 32 bits of
 * each key, so blocks of ids go through 32-bit lanes, four cycle-walking steps for every id
 * without a branch (vectorised; an AVX2 clone where the CPU has it) and the few ids still
 * outside [0, N) after them (a fraction (1 - N/2^k)^4 < 1/16) finish one by one. The same values
 * as perm_fwd, at a fraction of the cost: the bijection used to be half of drawing an edge. */
typedef struct perm32 {
    uint32_t mul[3], add[3], mask, n;
    unsigned shift;
} perm32_t;

static inline uint32_t perm32_round(const perm32_t *p, uint32_t x)
{
    for (int i = 0; i < 3; i++) {
        x = (x * p->mul[i]) & p->mask;
        x ^= x >> p->shift;
        x = (x + p->add[i]) & p->mask;
    }
    return x;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
static void
perm32_block(const perm32_t *p, uint32_t *restrict x, size_t m)
{
    const perm32_t q = *p; /* a local copy: the keys cannot alias x, so the loops vectorise */
    for (size_t i = 0; i < m; i++)
        x[i] = perm32_round(&q, x[i]);
    for (int step = 1; step < 4; step++) /* each step leaves under half of those still out */
        for (size_t i = 0; i < m; i++) {
            uint32_t y = perm32_round(&q, x[i]);
            x[i] = x[i] >= q.n ? y : x[i];
        }
}

static void perm_fwd_many(const perm_t *p, uint64_t *x, size_t m)
{
    if (p->n > UINT32_MAX) {
        for (size_t i = 0; i < m; i++)
            x[i] = perm_fwd(p, x[i]);
        return;
    }
    perm32_t q = {.mask = (uint32_t)p->mask, .n = (uint32_t)p->n, .shift = p->shift};
    for (int i = 0; i < 3; i++) {
        q.mul[i] = (uint32_t)p->mul[i];
        q.add[i] = (uint32_t)p->add[i];
    }
    enum { BLOCK = 1024 };
    uint32_t t[BLOCK];
    for (size_t b = 0; b < m; b += BLOCK) {
        size_t len = TG_MIN((size_t)BLOCK, m - b);
        for (size_t i = 0; i < len; i++)
            t[i] = (uint32_t)x[b + i];
        perm32_block(&q, t, len);
        for (size_t i = 0; i < len; i++) {
            uint64_t v = t[i];
            while (v >= p->n)
                v = perm32_round(&q, (uint32_t)v);
            x[b + i] = v;
        }
    }
}

/* ---------------------------------------------------------------- the model */

typedef struct gen {
    const tg_gen_opts_t *o;
    uint64_t n, c;         /* nodes, classes */
    uint64_t base, rem;    /* community sizes: base + 1 for the first rem, else base */
    uint64_t pairs;        /* undirected pairs drawn */
    uint64_t intra_thresh; /* homophily as a 64-bit threshold */
    perm_t perm;
    double noise;
    float *centroids; /* [C][D] */
    float *ntab;      /* normal quantiles */
    int threads;
} gen_t;

static inline uint64_t comm_start(const gen_t *g, uint64_t c)
{
    return c * g->base + TG_MIN(c, g->rem);
}

static inline uint64_t comm_size(const gen_t *g, uint64_t c)
{
    return g->base + (c < g->rem);
}

static inline uint64_t comm_of(const gen_t *g, uint64_t v)
{
    uint64_t big = g->rem * (g->base + 1);
    return v < big ? v / (g->base + 1) : g->rem + (v - big) / g->base;
}

static uint64_t thresh(double p)
{
    if (p <= 0) return 0;
    if (p >= 1) return UINT64_MAX;
    return (uint64_t)(p * 18446744073709551616.0);
}

/* An offset in [0, size) from the skewed law (see the top of the file). One draw serves both
 * the mixture choice (its top 8 bits) and, while size < 2^28, the offset (two disjoint 28-bit
 * fields ANDed: each bit is 1 with probability 1/4). */
static inline uint64_t skew_offset(tg_rng_t *r, uint64_t size)
{
    uint64_t u = rng_u64(r);
    if ((u >> 56) < UNIFORM_MIX_256) return rng_below(r, size);
    unsigned k = size > 1 ? 64 - (unsigned)__builtin_clzll(size - 1) : 0; /* bits of size-1 */
    uint64_t mask = k >= 64 ? ~0ull : (1ull << k) - 1;
    for (;;) {
        uint64_t x = k <= 28 ? (u & (u >> 28)) & mask : rng_u64(r) & rng_u64(r) & mask;
        if (x < size) return x; /* accepted with probability >= 3/4 */
        u = rng_u64(r);
    }
}

typedef struct edge_job {
    const gen_t *g;
    uint64_t first_chunk, nchunks;
    uint64_t **src, **dst; /* per chunk, 2 * EDGE_CHUNK entries */
    size_t *len;           /* directed edges of each chunk */
    uint64_t *keys;        /* when set: packed keys go here, chunk i at i * 2 * EDGE_CHUNK */
    unsigned key_bits;     /* key = dst << key_bits | src */
} edge_job_t;

/* Draws the pairs of chunks [b, e) of the job; each chunk has its own RNG stream. */
static void edge_chunks(void *arg, size_t b, size_t e, int tid)
{
    edge_job_t *j = arg;
    const gen_t *g = j->g;
    for (size_t i = b; i < e; i++) {
        uint64_t chunk = j->first_chunk + i;
        uint64_t first = chunk * EDGE_CHUNK, count = TG_MIN(EDGE_CHUNK, g->pairs - first);
        tg_rng_t r;
        tg_rng_seed2(&r, g->o->seed, STREAM_EDGES + chunk);
        uint64_t *src = j->src[i], *dst = j->dst[i];
        size_t n = 0; /* pairs kept: virtual ids first, both directions stored at the end */
        for (uint64_t k = 0; k < count; k++) {
            uint64_t cu = rng_below(&r, g->c), cv = cu;
            uint64_t u = comm_start(g, cu) + skew_offset(&r, comm_size(g, cu));
            if (g->c > 1 && rng_u64(&r) >= g->intra_thresh) {
                cv = rng_below(&r, g->c - 1);
                cv += cv >= cu;
            }
            uint64_t v = comm_start(g, cv) + skew_offset(&r, comm_size(g, cv));
            if (u == v) continue; /* no self loops */
            src[n] = u;
            dst[n++] = v;
        }
        perm_fwd_many(&g->perm, src, n);
        perm_fwd_many(&g->perm, dst, n);
        /* both directions; the sort makes the order inside a chunk irrelevant */
        if (j->keys) {
            uint64_t *out = j->keys + i * 2 * EDGE_CHUNK;
            const unsigned kb = j->key_bits;
            for (size_t k = 0; k < n; k++) {
                out[2 * k] = dst[k] << kb | src[k];
                out[2 * k + 1] = src[k] << kb | dst[k];
            }
        } else {
            memcpy(src + n, dst, n * sizeof *src);
            memcpy(dst + n, src, n * sizeof *dst);
        }
        j->len[i] = 2 * n;
    }
}

/* ---------------------------------------------------------------- centroids */

static int make_centroids(gen_t *g)
{
    uint64_t C = g->c, D = g->o->feat_dim;
    double *m = malloc(C * D * sizeof *m);
    g->centroids = malloc(C * D * sizeof *g->centroids);
    if (!m || !g->centroids) {
        free(m);
        return tg_err(-ENOMEM, "generate: out of memory for %" PRIu64 " x %" PRIu64 " centroids", C,
                      D);
    }
    tg_rng_t r;
    tg_rng_seed2(&r, g->o->seed, STREAM_CENTROIDS);
    for (uint64_t i = 0; i < C * D; i++)
        m[i] = tg_rng_normal(&r);
    /* Orthonormal when D >= C (Gram-Schmidt), so tg_gen_centroid_accuracy is exact; otherwise
     * (or when that would cost over ~10^10 flops) independent random unit vectors, nearly
     * orthogonal in high dimension. */
    int ortho = D >= C && (double)C * (double)C * (double)D <= 1e10;
    for (uint64_t c = 0; c < C; c++) {
        double *v = m + c * D;
        for (uint64_t p = 0; ortho && p < c; p++) {
            const double *u = m + p * D;
            double dot = 0;
            for (uint64_t j = 0; j < D; j++)
                dot += u[j] * v[j];
            for (uint64_t j = 0; j < D; j++)
                v[j] -= dot * u[j];
        }
        double nn = 0;
        for (uint64_t j = 0; j < D; j++)
            nn += v[j] * v[j];
        nn = sqrt(nn);
        if (nn == 0) nn = 1;
        for (uint64_t j = 0; j < D; j++) {
            v[j] /= nn;
            g->centroids[c * D + j] = (float)v[j];
        }
    }
    free(m);
    return 0;
}

/* ---------------------------------------------------------------- feature pipeline */

/* Workers take blocks in order of an atomic counter, fill the slot (block % nslots) and compute
 * its CRC; the writer thread writes slots in block order. A worker waits while its slot still
 * holds a block the writer has not written; the writer waits for the block it needs next. */
typedef struct feat_pipe {
    const gen_t *g;
    tg_filew_t *w;
    uint64_t rows_per_block, nblocks;
    size_t row_bytes, nslots;
    char **slot;
    uint32_t *slot_crc;
    uint64_t *slot_block; /* block held by each slot, UINT64_MAX when free */
    int *slot_ready;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next_block; /* next block a worker takes */
    uint64_t written;    /* blocks written */
    atomic_uint_fast64_t rows_done;
    int stop; /* an error somewhere: everyone leaves */
    int err;
    char msg[512];
    pthread_t *workers, writer;
    int nworkers, started_workers, started_writer;
    int inited; /* mutex and condition variable exist */
} feat_pipe_t;

static void pipe_fail(feat_pipe_t *p, int rc)
{
    pthread_mutex_lock(&p->mu);
    if (!p->err) {
        p->err = rc;
        snprintf(p->msg, sizeof p->msg, "%s", tg_errmsg());
    }
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Rows [first, first + rows) of the features into out; row is D floats of scratch (f16). */
static void fill_block(const gen_t *g, uint64_t block, uint64_t first, uint64_t rows, char *out,
                       float *row)
{
    const uint64_t D = g->o->feat_dim;
    const float noise = (float)g->noise;
    const float *tab = g->ntab;
    tg_rng_t r;
    tg_rng_seed2(&r, g->o->seed, STREAM_FEATS + block);
    float *f32 = (float *)out;
    uint16_t *f16 = (uint16_t *)out;
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t v = first + i;
        const float *mu = g->centroids + comm_of(g, perm_back(&g->perm, v)) * D;
        float *x = g->o->feat_dtype == TG_F32 ? f32 + i * D : row;
        uint64_t j = 0;
        for (; j + 4 <= D; j += 4) {
            uint64_t u = rng_u64(&r);
            x[j] = mu[j] + noise * tab[u & 0xffff];
            x[j + 1] = mu[j + 1] + noise * tab[(u >> 16) & 0xffff];
            x[j + 2] = mu[j + 2] + noise * tab[(u >> 32) & 0xffff];
            x[j + 3] = mu[j + 3] + noise * tab[u >> 48];
        }
        if (j < D) {
            uint64_t u = rng_u64(&r);
            for (; j < D; j++, u >>= 16)
                x[j] = mu[j] + noise * tab[u & 0xffff];
        }
        if (g->o->feat_dtype == TG_F16)
            for (j = 0; j < D; j++)
                f16[i * D + j] = tg_f32_to_f16(row[j]);
    }
}

static void *feat_worker(void *arg)
{
    feat_pipe_t *p = arg;
    float *row = malloc((size_t)p->g->o->feat_dim * sizeof *row);
    if (!row) {
        pipe_fail(p, tg_err(-ENOMEM, "generate: out of memory in a feature thread"));
        return NULL;
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        if (p->stop || p->next_block >= p->nblocks) break;
        uint64_t b = p->next_block++;
        size_t s = (size_t)(b % p->nslots);
        /* Wait until the writer is done with block b - nslots, the slot's previous block. Not
         * "until the slot is free": a worker holding a later block of the same slot could then
         * take it first, and the writer would wait for block b forever. */
        while (!p->stop && b >= p->written + p->nslots)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        p->slot_block[s] = b;
        p->slot_ready[s] = 0;
        pthread_mutex_unlock(&p->mu);
        uint64_t first = b * p->rows_per_block;
        uint64_t rows = TG_MIN(p->rows_per_block, p->g->n - first);
        fill_block(p->g, b, first, rows, p->slot[s], row);
        uint32_t crc = tg_data_crc32(0, p->slot[s], rows * p->row_bytes);
        pthread_mutex_lock(&p->mu);
        p->slot_crc[s] = crc;
        p->slot_ready[s] = 1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    free(row);
    return NULL;
}

static void *feat_writer(void *arg)
{
    feat_pipe_t *p = arg;
    for (uint64_t b = 0; b < p->nblocks; b++) {
        size_t s = (size_t)(b % p->nslots);
        pthread_mutex_lock(&p->mu);
        while (!p->stop && !(p->slot_block[s] == b && p->slot_ready[s]))
            pthread_cond_wait(&p->cv, &p->mu);
        int stop = p->stop;
        uint32_t crc = p->slot_crc[s];
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        uint64_t rows = TG_MIN(p->rows_per_block, p->g->n - b * p->rows_per_block);
        int rc = tg_filew_write_crc(p->w, p->slot[s], rows * p->row_bytes, crc);
        if (rc) {
            pipe_fail(p, rc);
            return NULL;
        }
        pthread_mutex_lock(&p->mu);
        p->slot_block[s] = UINT64_MAX;
        p->written = b + 1;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        atomic_fetch_add(&p->rows_done, rows);
    }
    return NULL;
}

static uint64_t feat_rows_per_block(uint32_t D)
{
    return TG_MAX(1, FEAT_BLOCK_VALUES / D);
}

static size_t feat_nslots(int threads)
{
    return 2 * (size_t)threads + 2;
}

static void pipe_destroy(feat_pipe_t *p)
{
    if (!p->inited) return;
    if (p->slot)
        for (size_t s = 0; s < p->nslots; s++)
            free(p->slot[s]);
    free(p->slot);
    free(p->slot_crc);
    free(p->slot_block);
    free(p->slot_ready);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

/* Waits for the pipeline to end (all written, or stopped); returns its error, if any. */
static int pipe_join(feat_pipe_t *p)
{
    for (int i = 0; i < p->started_workers; i++)
        pthread_join(p->workers[i], NULL);
    if (p->started_writer) pthread_join(p->writer, NULL);
    p->started_workers = 0;
    p->started_writer = 0;
    return p->err ? tg_err(p->err, "%s", p->msg) : 0;
}

static void pipe_abort(feat_pipe_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pipe_join(p);
}

static int pipe_start(feat_pipe_t *p, const gen_t *g, tg_filew_t *w)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->inited = 1;
    p->g = g;
    p->w = w;
    p->rows_per_block = feat_rows_per_block(g->o->feat_dim);
    p->nblocks = (g->n + p->rows_per_block - 1) / p->rows_per_block;
    p->row_bytes = (size_t)g->o->feat_dim * tg_feat_dtype_size(g->o->feat_dtype);
    p->nslots = feat_nslots(g->threads);
    p->nworkers = g->threads;
    p->slot = calloc(p->nslots, sizeof *p->slot);
    p->slot_crc = calloc(p->nslots, sizeof *p->slot_crc);
    p->slot_block = malloc(p->nslots * sizeof *p->slot_block);
    p->slot_ready = calloc(p->nslots, sizeof *p->slot_ready);
    p->workers = calloc((size_t)p->nworkers, sizeof *p->workers);
    if (!p->slot || !p->slot_crc || !p->slot_block || !p->slot_ready || !p->workers)
        return tg_err(-ENOMEM, "generate: out of memory for the feature pipeline");
    size_t bytes = (size_t)p->rows_per_block * p->row_bytes;
    for (size_t s = 0; s < p->nslots; s++) {
        p->slot_block[s] = UINT64_MAX;
        /* page-aligned, so the writer can hand whole blocks to O_DIRECT without a copy */
        p->slot[s] = tg_aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (!p->slot[s]) return tg_err(-ENOMEM, "generate: out of memory for feature blocks");
    }
    for (int i = 0; i < p->nworkers; i++) {
        if (pthread_create(&p->workers[i], NULL, feat_worker, p)) {
            pipe_abort(p);
            return tg_err(-EAGAIN, "generate: cannot start a feature thread");
        }
        p->started_workers++;
    }
    if (pthread_create(&p->writer, NULL, feat_writer, p)) {
        pipe_abort(p);
        return tg_err(-EAGAIN, "generate: cannot start the feature writer thread");
    }
    p->started_writer = 1;
    return 0;
}

/* ---------------------------------------------------------------- validation, memory plan */

static int check_opts(const tg_gen_opts_t *o)
{
    if (o->nodes == 0) return tg_err(-EINVAL, "--nodes must be at least 1");
    if (o->nodes > (1ull << 40))
        return tg_err(-EINVAL, "--nodes %" PRIu64 " is more than 2^40", o->nodes);
    if (!(o->avg_degree >= 0) || o->avg_degree > 1e6)
        return tg_err(-EINVAL, "--avg-degree must be in 0..1000000, got %g", o->avg_degree);
    if ((double)o->nodes * o->avg_degree > 1e13)
        return tg_err(-EINVAL, "--nodes x --avg-degree = %.3g edges is more than 10^13",
                      (double)o->nodes * o->avg_degree);
    if (o->feat_dim == 0 || o->feat_dim > (1u << 24))
        return tg_err(-EINVAL, "--feat-dim must be in 1..16777216, got %u", o->feat_dim);
    if (o->classes == 0 || o->classes > (1u << 24))
        return tg_err(-EINVAL, "--classes must be in 1..16777216, got %u", o->classes);
    if (o->classes > o->nodes)
        return tg_err(-EINVAL,
                      "--classes %u is more than --nodes %" PRIu64 " (every class needs a node)",
                      o->classes, o->nodes);
    const double fr[3] = {o->train_frac, o->valid_frac, o->test_frac};
    static const char *const fn[3] = {"--train-frac", "--valid-frac", "--test-frac"};
    for (int i = 0; i < 3; i++)
        if (!(fr[i] >= 0 && fr[i] <= 1))
            return tg_err(-EINVAL, "%s must be in 0..1, got %g", fn[i], fr[i]);
    if (fr[0] + fr[1] + fr[2] > 1 + 1e-9)
        return tg_err(-EINVAL, "--train-frac + --valid-frac + --test-frac = %g is more than 1",
                      fr[0] + fr[1] + fr[2]);
    if (!(o->homophily >= 0 && o->homophily <= 1))
        return tg_err(-EINVAL, "--homophily must be in 0..1, got %g", o->homophily);
    if (isnan(o->feat_noise) || o->feat_noise > 1e6)
        return tg_err(-EINVAL, "--feat-noise must be 'auto' or in 0..1000000");
    if (o->feat_dtype != TG_F32 && o->feat_dtype != TG_F16)
        return tg_err(-EINVAL, "feature dtype must be f32 or f16");
    if (o->threads < 0 || o->threads > 256)
        return tg_err(-EINVAL, "--threads must be in 0..256, got %d", o->threads);
    return 0;
}

static int resolve_threads(const tg_gen_opts_t *o)
{
    long n = o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    return (int)TG_MAX(1, TG_MIN(n, 64));
}

/* Everything but the edge sort's run buffers: feature slots and writers, edge chunks, the
 * normal table, centroids, output writers (two buffers each). */
static uint64_t fixed_mem(const tg_gen_opts_t *o, int threads)
{
    uint64_t block =
        feat_rows_per_block(o->feat_dim) * o->feat_dim * tg_feat_dtype_size(o->feat_dtype);
    block = (block + 4095) / 4096 * 4096;
    uint64_t feats = feat_nslots(threads) * block + 2 * block;
    uint64_t edges = (uint64_t)threads * EDGE_CHUNK * 2 * 2 * 8;
    uint64_t writers = 2 * (2 * (uint64_t)IO_BUF_CSC + 3 * (uint64_t)IO_BUF);
    uint64_t tables = ((uint64_t)4 << NORMAL_TABLE_BITS) + (uint64_t)o->classes * o->feat_dim * 12;
    uint64_t rows = (uint64_t)threads * o->feat_dim * sizeof(float); /* feature workers' scratch */
    return feats + edges + writers + tables + rows + (4u << 20);
}

uint64_t tg_gen_min_mem(const tg_gen_opts_t *o)
{
    return fixed_mem(o, resolve_threads(o)) + MIN_SORT_MEM;
}

/* ---------------------------------------------------------------- labels and splits */

static int write_labels(tg_dsw_t *w, const gen_t *g)
{
    tg_filew_t fw;
    int rc = tg_dsw_open_file_buf(w, TG_FILE_LABELS, &fw, IO_BUF);
    if (rc) return rc;
    int32_t buf[4096];
    for (uint64_t v = 0; v < g->n && !rc;) {
        size_t n = (size_t)TG_MIN((uint64_t)4096, g->n - v);
        for (size_t i = 0; i < n; i++)
            buf[i] = (int32_t)comm_of(g, perm_back(&g->perm, v + i));
        rc = tg_filew_write(&fw, buf, n * sizeof *buf);
        v += n;
    }
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(w, TG_FILE_LABELS, &fw);
}

/* Writes n ids in the dataset's index width. */
static int write_ids(tg_filew_t *fw, const uint64_t *ids, size_t n, size_t isz)
{
    if (isz == 8) return tg_filew_write(fw, ids, n * 8);
    uint32_t narrow[512];
    for (size_t i = 0; i < n;) {
        size_t m = TG_MIN(n - i, (size_t)512);
        for (size_t k = 0; k < m; k++)
            narrow[k] = (uint32_t)ids[i + k];
        int rc = tg_filew_write(fw, narrow, m * 4);
        if (rc) return rc;
        i += m;
    }
    return 0;
}

/* Selection sampling: node v joins train with probability (train left) / (nodes left), and so
 * on, which gives uniform random subsets of exactly the requested sizes, in ascending order. */
static int write_splits(tg_dsw_t *w, const gen_t *g, uint64_t cnt[3])
{
    static const tg_file_id_t ids[3] = {TG_FILE_TRAIN, TG_FILE_VALID, TG_FILE_TEST};
    tg_filew_t fw[3];
    int opened = 0, rc = 0;
    for (; opened < 3 && !rc; opened++)
        if ((rc = tg_dsw_open_file_buf(w, ids[opened], &fw[opened], IO_BUF))) break;
    if (rc) {
        for (int i = 0; i < opened; i++)
            tg_filew_discard(&fw[i]);
        return rc;
    }
    size_t isz = tg_index_dtype_size(w->meta.index_dtype);
    tg_rng_t r;
    tg_rng_seed2(&r, g->o->seed, STREAM_SPLITS);
    uint64_t left[3] = {cnt[0], cnt[1], cnt[2]};
    enum { BATCH = 4096 };
    uint64_t batch[3][BATCH];
    size_t blen[3] = {0, 0, 0};
    for (uint64_t v = 0; v < g->n && !rc; v++) {
        uint64_t x = rng_below(&r, g->n - v);
        for (int s = 0; s < 3; s++) {
            if (x >= left[s]) {
                x -= left[s];
                continue;
            }
            batch[s][blen[s]++] = v;
            left[s]--;
            if (blen[s] == BATCH) {
                rc = write_ids(&fw[s], batch[s], blen[s], isz);
                blen[s] = 0;
            }
            break;
        }
    }
    for (int s = 0; s < 3 && !rc; s++)
        rc = write_ids(&fw[s], batch[s], blen[s], isz);
    for (int i = 0; i < 3; i++) {
        /* close releases the writer even when it fails; the rest are discarded */
        if (rc)
            tg_filew_discard(&fw[i]);
        else
            rc = tg_dsw_close_file(w, ids[i], &fw[i]);
    }
    return rc;
}

/* ---------------------------------------------------------------- driver */

static int gen_edges(tg_dsw_t *w, gen_t *g, tg_pool_t *pool, uint64_t sort_mem, feat_pipe_t *fp,
                     uint64_t *num_edges)
{
    tg_edgesort_t *es = NULL;
    tg_filew_t fp_w, fi_w;
    int have_p = 0, have_i = 0;
    edge_job_t j = {.g = g};
    uint64_t nchunks = (g->pairs + EDGE_CHUNK - 1) / EDGE_CHUNK;
    size_t per = (size_t)g->threads;
    j.src = calloc(per, sizeof *j.src);
    j.dst = calloc(per, sizeof *j.dst);
    j.len = calloc(per, sizeof *j.len);
    int rc = 0;
    if (!j.src || !j.dst || !j.len) rc = tg_err(-ENOMEM, "generate: out of memory");
    for (size_t i = 0; i < per && !rc; i++) {
        j.src[i] = malloc(2 * EDGE_CHUNK * sizeof **j.src);
        j.dst[i] = malloc(2 * EDGE_CHUNK * sizeof **j.dst);
        if (!j.src[i] || !j.dst[i]) rc = tg_err(-ENOMEM, "generate: out of memory");
    }
    tg_edgesort_opts_t so = {.num_nodes = g->n,
                             .mem_bytes = sort_mem,
                             .tmp_dir = w->tmp_dir,
                             .dedup = 1,
                             .remove_self_loops = 1,
                             .nthreads = g->threads,
                             .progress = "sorting edges",
                             .expected_edges = 2 * g->pairs};
    if (!rc) rc = tg_edgesort_create(&es, &so);
    /* Pool threads pack their keys straight into the sort's run buffer when it can take a
     * round of chunks: no copy through tg_edgesort_add, which ran on one thread only. */
    int direct = 0;
    if (!rc) {
        j.key_bits = tg_edgesort_key_bits(es);
        direct = j.key_bits && tg_edgesort_capacity(es) >= per * 2 * EDGE_CHUNK;
    }
    tg_progress_t pg;
    tg_progress_begin(&pg, "drawing edges", g->pairs, "pairs");
    char suffix[64];
    for (uint64_t c = 0; c < nchunks && !rc; c += per) {
        j.first_chunk = c;
        j.nchunks = TG_MIN(per, nchunks - c);
        if (direct && (rc = tg_edgesort_reserve(es, (size_t)j.nchunks * 2 * EDGE_CHUNK, &j.keys)))
            break;
        tg_pool_for(pool, (size_t)j.nchunks, edge_chunks, &j);
        if (direct) { /* close the gaps left by dropped self loops */
            size_t at = j.len[0];
            for (size_t i = 1; i < j.nchunks; i++) {
                memmove(j.keys + at, j.keys + i * 2 * EDGE_CHUNK, j.len[i] * sizeof *j.keys);
                at += j.len[i];
            }
            rc = tg_edgesort_commit(es, at);
        }
        for (size_t i = 0; i < j.nchunks && !rc && !direct; i++)
            rc = tg_edgesort_add(es, j.src[i], j.dst[i], j.len[i]);
        pthread_mutex_lock(&fp->mu);
        if (!rc && fp->err) /* the features failed (disk full?): stop drawing edges now */
            rc = tg_err(fp->err, "%s", fp->msg);
        pthread_mutex_unlock(&fp->mu);
        snprintf(suffix, sizeof suffix, "(features %.0f%%)",
                 100.0 * (double)atomic_load(&fp->rows_done) / (double)g->n);
        tg_progress_update(&pg, TG_MIN(g->pairs, (c + j.nchunks) * EDGE_CHUNK), suffix);
    }
    tg_progress_end(&pg);
    for (size_t i = 0; i < per && j.src; i++) { /* the sort's merge needs the memory now */
        free(j.src[i]);
        j.src[i] = NULL;
        if (j.dst) {
            free(j.dst[i]);
            j.dst[i] = NULL;
        }
    }
    if (!rc && !(rc = tg_dsw_open_file_buf(w, TG_FILE_INDPTR, &fp_w, IO_BUF_CSC))) have_p = 1;
    if (!rc && !(rc = tg_dsw_open_file_buf(w, TG_FILE_INDICES, &fi_w, IO_BUF_CSC))) have_i = 1;
    if (!rc) rc = tg_edgesort_finish(es, &fp_w, &fi_w, w->meta.index_dtype, num_edges);
    if (!rc) {
        have_p = 0;
        rc = tg_dsw_close_file(w, TG_FILE_INDPTR, &fp_w);
    }
    if (!rc) {
        have_i = 0;
        rc = tg_dsw_close_file(w, TG_FILE_INDICES, &fi_w);
    }
    if (have_p) tg_filew_discard(&fp_w);
    if (have_i) tg_filew_discard(&fi_w);
    tg_edgesort_destroy(es);
    free(j.src);
    free(j.dst);
    free(j.len);
    return rc;
}

int tg_generate(const char *out_dir, const tg_gen_opts_t *o)
{
    int rc = check_opts(o);
    if (rc) return rc;
    gen_t g = {.o = o, .n = o->nodes, .c = o->classes};
    g.threads = resolve_threads(o);
    uint64_t mem = o->mem_bytes;
    if (!mem) mem = TG_MIN((uint64_t)1 << 30, tg_phys_mem_bytes() / 4);
    uint64_t fixed = fixed_mem(o, g.threads);
    char b1[32], b2[32];
    if (mem < fixed + MIN_SORT_MEM)
        return tg_err(-EINVAL,
                      "--mem %s is too small for these options (at least %" PRIu64 " bytes, %s)",
                      tg_fmt_bytes(mem, b1, sizeof b1), fixed + MIN_SORT_MEM,
                      tg_fmt_bytes(fixed + MIN_SORT_MEM, b2, sizeof b2));
    g.base = g.n / g.c;
    g.rem = g.n % g.c;
    g.pairs = (uint64_t)llround((double)g.n * o->avg_degree / 2);
    if (g.n < 2) g.pairs = 0; /* one node: every pair would be a self loop */
    g.intra_thresh = thresh(o->homophily);
    g.noise = o->feat_noise < 0 ? tg_gen_auto_noise(o->classes) : o->feat_noise;
    perm_init(&g.perm, g.n, o->seed);

    tg_dsw_t w;
    tg_pool_t *pool = NULL;
    feat_pipe_t fp;
    int pipe_up = 0, have_feat = 0;
    tg_filew_t ff;
    memset(&fp, 0, sizeof fp);
    if ((rc = tg_dsw_begin(&w, out_dir, o->overwrite))) return rc;
    tg_meta_t *m = &w.meta;
    m->num_nodes = g.n;
    m->feat_dim = o->feat_dim;
    m->feat_dtype = o->feat_dtype;
    m->index_dtype = tg_index_dtype_for(g.n);
    m->num_classes = o->classes;
    m->multi_label = 0;
    uint64_t cnt[3] = {(uint64_t)llround(o->train_frac * (double)g.n),
                       (uint64_t)llround(o->valid_frac * (double)g.n),
                       (uint64_t)llround(o->test_frac * (double)g.n)};
    /* rounding three fractions that sum to 1 may overshoot by one or two */
    for (int i = 2; cnt[0] + cnt[1] + cnt[2] > g.n; i = (i + 2) % 3)
        if (cnt[i]) cnt[i]--;
    m->num_train = cnt[0];
    m->num_valid = cnt[1];
    m->num_test = cnt[2];
    char noise_txt[32];
    if (o->feat_noise < 0)
        snprintf(noise_txt, sizeof noise_txt, "auto(%.4f)", g.noise);
    else
        snprintf(noise_txt, sizeof noise_txt, "%g", g.noise);
    snprintf(m->source, sizeof m->source,
             "tiergnn generate --nodes %" PRIu64 " --avg-degree %g --feat-dim %u --classes %u "
             "--train-frac %g --valid-frac %g --test-frac %g --homophily %g --feat-noise %s "
             "--feat-dtype %s --seed %" PRIu64,
             g.n, o->avg_degree, o->feat_dim, o->classes, o->train_frac, o->valid_frac,
             o->test_frac, o->homophily, noise_txt, tg_feat_dtype_name(o->feat_dtype), o->seed);
    tg_log_info("generate: %" PRIu64 " nodes, ~%" PRIu64 " edges, %u classes, D = %u %s, "
                "homophily %g, feature noise %s, %d threads, memory %s",
                g.n, 2 * g.pairs, o->classes, o->feat_dim, tg_feat_dtype_name(o->feat_dtype),
                o->homophily, noise_txt, g.threads, tg_fmt_bytes(mem, b1, sizeof b1));

    g.ntab = normal_table();
    if (!g.ntab) {
        rc = tg_err(-ENOMEM, "generate: out of memory");
        goto fail;
    }
    if ((rc = make_centroids(&g))) goto fail;
    if ((rc = tg_pool_create(&pool, g.threads))) goto fail;
    /* Features are written by their own threads while the edges are drawn and sorted: the two
     * halves compete for CPU only, and the disk is busy from the start. */
    uint64_t fblock =
        feat_rows_per_block(o->feat_dim) * o->feat_dim * tg_feat_dtype_size(o->feat_dtype);
    if ((rc = tg_dsw_open_file_buf(&w, TG_FILE_FEATURES, &ff, (size_t)fblock))) goto fail;
    have_feat = 1;
    if ((rc = pipe_start(&fp, &g, &ff))) goto fail;
    pipe_up = 1;
    /* Labels and splits first: one thread beside the feature workers, rather than alone at the
     * end after the edge sort's merge. */
    if ((rc = write_labels(&w, &g))) goto fail;
    if ((rc = write_splits(&w, &g, cnt))) goto fail;
    uint64_t ne = 0;
    if ((rc = gen_edges(&w, &g, pool, mem - fixed, &fp, &ne))) goto fail;
    m->num_edges = ne;
    if (atomic_load(&fp.rows_done) < g.n) {
        tg_progress_t pg;
        tg_progress_begin(&pg, "features", g.n, "rows");
        for (;;) {
            pthread_mutex_lock(&fp.mu);
            int done = fp.written >= fp.nblocks || fp.stop;
            pthread_mutex_unlock(&fp.mu);
            tg_progress_update(&pg, atomic_load(&fp.rows_done), NULL);
            if (done) break;
            usleep(50000);
        }
        tg_progress_end(&pg);
    }
    pipe_up = 0;
    rc = pipe_join(&fp);
    if (rc) goto fail;
    have_feat = 0;
    if ((rc = tg_dsw_close_file(&w, TG_FILE_FEATURES, &ff))) goto fail;
    rc = tg_dsw_commit(&w); /* on failure it removes the temporary directory itself */
    tg_dsw_abort(&w);       /* frees what commit leaves */
    if (rc) goto out;
    tg_log_info("generate: wrote %s: %" PRIu64 " nodes, %" PRIu64 " edges; peak RSS %s", out_dir,
                g.n, ne, tg_fmt_bytes(tg_peak_rss_bytes(), b2, sizeof b2));
    goto out;
fail:
    if (pipe_up) pipe_abort(&fp);
    if (have_feat) tg_filew_discard(&ff);
    tg_dsw_abort(&w);
out:
    pipe_destroy(&fp);
    tg_pool_destroy(pool);
    free(g.ntab);
    free(g.centroids);
    return rc;
}
