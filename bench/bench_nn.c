/* bench_nn - per-batch forward + backward time of GraphSAGE on synthetic sampled blocks, and the
 * GFLOP/s it achieves against cblas_sgemm on the same GEMM shapes in the same run.
 *
 *     bench_nn [--threads 2] [--iters 5] [--batch 1024] [--fanout 10] [--layers 3]
 *              [--in 128] [--hidden 256] [--classes 32] [--nodes 2000000] [--dropout 0.5]
 *
 * The blocks are shaped like node-wise sampling with one fanout per layer over a graph of --nodes
 * nodes with uniformly random neighbours (duplicates among the sampled nodes merged, as a sampler
 * does). Before timing, tg_gemm is checked against cblas_sgemm and the 1-thread and n-thread
 * forward passes are checked to be bit-identical.
 *
 * Printed: the block sizes; per batch, min and median over --iters rounds: forward+backward (no
 * optimiser) and a full training step (with Adam); the GEMM FLOPs of forward+backward and the
 * rate they imply; the same GEMM shapes run alone through tg_gemm (our split on the pool,
 * single-threaded OpenBLAS), through cblas_sgemm on 1 thread and with OpenBLAS's own --threads
 * threads. The rounds interleave all five, so a busy machine disturbs them alike.
 */
#include "nn/nn-impl.h"

#include <cblas.h>
#include <stdlib.h>

typedef struct {
    int threads, iters, layers;
    uint32_t batch, fanout, in, hidden, classes;
    uint64_t nodes;
    float dropout;
} opts_t;

static void die(const char *what)
{
    fprintf(stderr, "bench_nn: %s\n", what);
    exit(1);
}

static void *xalloc(size_t bytes)
{
    void *p = tg_aligned_alloc(64, bytes ? bytes : 64);
    if (!p) die("out of memory");
    return p;
}

/* Sampled blocks, seeds outward: block L-1 has the batch's seeds as destinations. */
static void make_batch(tg_batch_t *b, const opts_t *o, tg_rng_t *r)
{
    int L = o->layers;
    int32_t *local = malloc(o->nodes * sizeof(int32_t));
    uint64_t cap = o->batch;
    for (int l = 0; l < L; l++)
        cap *= (uint64_t)o->fanout + 1;
    cap = TG_MIN(cap, o->nodes);
    uint64_t *ids = malloc(cap * sizeof(uint64_t));
    if (!local || !ids) die("out of memory");
    memset(local, 0xff, o->nodes * sizeof(int32_t));
    uint32_t n = 0;
    while (n < o->batch) {
        uint64_t v = tg_rng_below(r, o->nodes);
        if (local[v] < 0) {
            local[v] = (int32_t)n;
            ids[n++] = v;
        }
    }
    b->num_layers = L;
    b->blocks = calloc((size_t)L, sizeof(tg_block_t));
    if (!b->blocks) die("out of memory");
    for (int l = L - 1; l >= 0; l--) {
        tg_block_t *blk = &b->blocks[l];
        uint32_t nd = n;
        blk->num_dst = nd;
        blk->indptr = malloc(((size_t)nd + 1) * sizeof(uint64_t));
        blk->indices = malloc((size_t)nd * o->fanout * sizeof(uint32_t));
        if (!blk->indptr || !blk->indices) die("out of memory");
        blk->indptr[0] = 0;
        uint64_t k = 0;
        for (uint32_t i = 0; i < nd; i++) {
            for (uint32_t f = 0; f < o->fanout; f++) {
                uint64_t v = tg_rng_below(r, o->nodes);
                if (local[v] < 0) {
                    local[v] = (int32_t)n;
                    ids[n++] = v;
                }
                blk->indices[k++] = (uint32_t)local[v];
            }
            blk->indptr[i + 1] = k;
        }
        blk->num_edges = k;
        blk->num_src = n;
    }
    b->num_nodes = n;
    b->num_seeds = o->batch;
    b->nodes = ids;
    free(local);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The GEMMs of one SAGE forward + backward, in order. */
typedef struct {
    int ta, tb;
    size_t M, N, K;
} shape_t;

static int sage_shapes(shape_t *s, const tg_batch_t *b, const opts_t *o)
{
    int n = 0;
    for (int l = 0; l < o->layers; l++) {
        size_t in = l == 0 ? o->in : o->hidden, out = l == o->layers - 1 ? o->classes : o->hidden;
        size_t nd = b->blocks[l].num_dst;
        s[n++] = (shape_t){0, 0, nd, out, in}; /* x_dst W_self */
        s[n++] = (shape_t){0, 0, nd, out, in}; /* mean W_neigh */
        s[n++] = (shape_t){1, 0, in, out, nd}; /* dW_self */
        s[n++] = (shape_t){1, 0, in, out, nd}; /* dW_neigh */
        if (l > 0) {
            s[n++] = (shape_t){0, 1, nd, in, out}; /* d x_dst */
            s[n++] = (shape_t){0, 1, nd, in, out}; /* d mean */
        }
    }
    return n;
}

static double shapes_flops(const shape_t *s, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++)
        f += 2.0 * (double)s[i].M * (double)s[i].N * (double)s[i].K;
    return f;
}

/* Runs the shapes once; ours = tg_gemm on the pool, else cblas_sgemm as it is configured. */
static double run_shapes(const shape_t *s, int n, float *A, float *B, float *C, float *scratch,
                         int ours, tg_pool_t *pool)
{
    double t0 = tg_now();
    for (int i = 0; i < n; i++) {
        size_t lda = s[i].ta ? s[i].M : s[i].K, ldb = s[i].tb ? s[i].K : s[i].N;
        if (ours)
            tg_gemm(s[i].ta, s[i].tb, s[i].M, s[i].N, s[i].K, A, lda, B, ldb, 0.0f, C, s[i].N,
                    scratch, pool);
        else
            cblas_sgemm(CblasRowMajor, s[i].ta ? CblasTrans : CblasNoTrans,
                        s[i].tb ? CblasTrans : CblasNoTrans, (int)s[i].M, (int)s[i].N, (int)s[i].K,
                        1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)s[i].N);
    }
    return tg_now() - t0;
}

static void parse(opts_t *o, int argc, char **argv)
{
    *o = (opts_t){2, 5, 3, 1024, 10, 128, 256, 32, 2000000, 0.5f};
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) die("every option takes a value");
        const char *k = argv[i], *v = argv[++i];
        uint64_t u = 0;
        double d = 0;
        int rc = !strcmp(k, "--dropout") ? tg_parse_double(v, &d, k) : tg_parse_u64(v, &u, k);
        if (rc < 0) die(tg_errmsg());
        if (!strcmp(k, "--threads"))
            o->threads = (int)u;
        else if (!strcmp(k, "--iters"))
            o->iters = (int)u;
        else if (!strcmp(k, "--layers"))
            o->layers = (int)u;
        else if (!strcmp(k, "--batch"))
            o->batch = (uint32_t)u;
        else if (!strcmp(k, "--fanout"))
            o->fanout = (uint32_t)u;
        else if (!strcmp(k, "--in"))
            o->in = (uint32_t)u;
        else if (!strcmp(k, "--hidden"))
            o->hidden = (uint32_t)u;
        else if (!strcmp(k, "--classes"))
            o->classes = (uint32_t)u;
        else if (!strcmp(k, "--nodes"))
            o->nodes = u;
        else if (!strcmp(k, "--dropout"))
            o->dropout = (float)d;
        else
            die("unknown option (see the comment at the top of bench/bench_nn.c)");
    }
    if (o->threads < 1 || o->iters < 1 || o->layers < 1 || o->layers > 8 || o->batch < 1 ||
        o->nodes < (uint64_t)o->batch || o->nodes > INT32_MAX)
        die("option out of range");
}

int main(int argc, char **argv)
{
    opts_t o;
    parse(&o, argc, argv);
    tg_rng_t r;
    tg_rng_seed(&r, 42);
    tg_batch_t b;
    make_batch(&b, &o, &r);
    printf("GraphSAGE %d layers, in %u, hidden %u, classes %u, batch %u, fanout %u, dropout %.2f, "
           "%d thread(s)\n",
           o.layers, o.in, o.hidden, o.classes, o.batch, o.fanout, (double)o.dropout, o.threads);
    for (int l = 0; l < o.layers; l++)
        printf("  block %d: %u dst <- %u src, %llu edges\n", l, b.blocks[l].num_dst,
               b.blocks[l].num_src, (unsigned long long)b.blocks[l].num_edges);

    size_t nx = (size_t)b.num_nodes * o.in;
    float *X = xalloc(nx * sizeof(float));
    for (size_t k = 0; k < nx; k++)
        X[k] = 2.0f * tg_rng_uniformf(&r) - 1.0f;
    int32_t *y = xalloc(o.batch * sizeof(int32_t));
    for (uint32_t i = 0; i < o.batch; i++)
        y[i] = (int32_t)tg_rng_below(&r, o.classes);

    tg_pool_t *pool = NULL;
    if (o.threads > 1 && tg_pool_create(&pool, o.threads) < 0) die(tg_errmsg());
    tg_model_config_t cfg;
    tg_model_config_default(&cfg);
    cfg.type = TG_MODEL_SAGE;
    cfg.in_dim = o.in;
    cfg.hidden = o.hidden;
    cfg.out_dim = o.classes;
    cfg.num_layers = o.layers;
    cfg.dropout = o.dropout;
    tg_model_t *m;
    if (tg_model_create(&m, &cfg, 1) < 0) die(tg_errmsg());

    /* Check before timing: eval forward on 1 thread and on the pool must agree bit for bit. */
    float *l1 = xalloc((size_t)o.batch * o.classes * 4),
          *l2 = xalloc((size_t)o.batch * o.classes * 4);
    tg_model_set_pool(m, NULL);
    if (tg_model_predict(m, &b, X, l1, NULL) < 0) die(tg_errmsg());
    tg_model_set_pool(m, pool);
    if (tg_model_predict(m, &b, X, l2, NULL) < 0) die(tg_errmsg());
    if (memcmp(l1, l2, (size_t)o.batch * o.classes * 4))
        die("check failed: forward differs between 1 thread and the pool");

    tg_step_stats_t st;
    if (tg_model_forward_backward(m, &b, X, y, 1, 7, NULL, &st) < 0) /* warm-up, arena growth */
        die(tg_errmsg());

    shape_t shapes[64];
    int ns = sage_shapes(shapes, &b, &o);
    double flops = shapes_flops(shapes, ns);
    size_t amax = 0, bmax = 0, cmax = 0, smax = 0;
    for (int i = 0; i < ns; i++) {
        amax = TG_MAX(amax, shapes[i].M * shapes[i].K);
        bmax = TG_MAX(bmax, shapes[i].K * shapes[i].N);
        cmax = TG_MAX(cmax, shapes[i].M * shapes[i].N);
        smax = TG_MAX(smax, tg_gemm_scratch_floats(shapes[i].ta, shapes[i].tb, shapes[i].M,
                                                   shapes[i].N, shapes[i].K));
    }
    float *A = xalloc(amax * 4), *B = xalloc(bmax * 4), *C = xalloc(cmax * 4);
    float *C2 = xalloc(cmax * 4), *S = xalloc((smax ? smax : 1) * 4);
    for (size_t k = 0; k < amax; k++)
        A[k] = 2.0f * tg_rng_uniformf(&r) - 1.0f;
    for (size_t k = 0; k < bmax; k++)
        B[k] = 2.0f * tg_rng_uniformf(&r) - 1.0f;
    /* Check before timing: tg_gemm agrees with cblas_sgemm on every shape. */
    for (int i = 0; i < ns; i++) {
        run_shapes(&shapes[i], 1, A, B, C, S, 1, pool);
        run_shapes(&shapes[i], 1, A, B, C2, S, 0, NULL);
        size_t mn = shapes[i].M * shapes[i].N;
        for (size_t k = 0; k < mn; k += 97)
            if (fabsf(C[k] - C2[k]) > 1e-3f * sqrtf((float)shapes[i].K))
                die("check failed: tg_gemm differs from cblas_sgemm");
    }

    /* Rounds interleave the five measurements, so load from other processes on the machine
     * hits them alike; min and median over rounds are printed. */
    enum { T_FB, T_STEP, T_OURS, T_BLAS1, T_BLASN, T_COUNT };
    double *t[T_COUNT];
    for (int k = 0; k < T_COUNT; k++)
        t[k] = xalloc((size_t)o.iters * sizeof(double));
    for (int i = 0; i < o.iters; i++) {
        double t0 = tg_now();
        if (tg_model_forward_backward(m, &b, X, y, 1, 7 + (uint64_t)i, NULL, &st) < 0)
            die(tg_errmsg());
        t[T_FB][i] = tg_now() - t0;
        t0 = tg_now();
        if (tg_model_train_step(m, &b, X, y, &st) < 0) die(tg_errmsg());
        t[T_STEP][i] = tg_now() - t0;
        t[T_OURS][i] = run_shapes(shapes, ns, A, B, C, S, 1, pool);
        openblas_set_num_threads(1);
        t[T_BLAS1][i] = run_shapes(shapes, ns, A, B, C, S, 0, NULL);
        openblas_set_num_threads(o.threads);
        run_shapes(shapes, 1, A, B, C, S, 0, NULL); /* wake OpenBLAS's threads */
        t[T_BLASN][i] = run_shapes(shapes, ns, A, B, C, S, 0, NULL);
        openblas_set_num_threads(1);
    }
    double mn[T_COUNT], md[T_COUNT];
    for (int k = 0; k < T_COUNT; k++) {
        md[k] = median(t[k], o.iters); /* sorts */
        mn[k] = t[k][0];
    }

    char b1[32], b2[32];
    printf("model: %zu parameters (%s with grads + Adam), activation arena %s\n",
           tg_model_param_count(m), tg_fmt_bytes(tg_model_param_bytes(m), b1, sizeof b1),
           tg_fmt_bytes(tg_model_act_bytes(m), b2, sizeof b2));
    printf("GEMM work per forward+backward: %.2f GFLOP in %d GEMMs\n", flops * 1e-9, ns);
    printf("%-44s %9s %9s %12s\n", "per batch, over rounds", "min ms", "median ms",
           "GFLOP/s (min)");
    const char *names[T_COUNT] = {"forward+backward (GEMM FLOP / time)",
                                  "training step (with Adam)", "same GEMMs: tg_gemm on the pool",
                                  "same GEMMs: cblas_sgemm, 1 thread",
                                  "same GEMMs: cblas_sgemm, OpenBLAS threads"};
    for (int k = 0; k < T_COUNT; k++)
        printf("%-44s %9.1f %9.1f %12.1f\n", names[k], mn[k] * 1e3, md[k] * 1e3,
               flops / mn[k] * 1e-9);
    printf("forward+backward outside GEMMs (aggregation, dropout, loss, ...): %.1f ms (%.0f%%, "
           "min - min)\n",
           (mn[T_FB] - mn[T_OURS]) * 1e3, 100.0 * (mn[T_FB] - mn[T_OURS]) / mn[T_FB]);
    double la[3];
    if (getloadavg(la, 3) == 3)
        printf("load average during the run: %.2f (other processes share the cores)\n", la[0]);

    free(A);
    free(B);
    free(C);
    free(C2);
    free(S);
    for (int k = 0; k < T_COUNT; k++)
        free(t[k]);
    free(l1);
    free(l2);
    free(X);
    free(y);
    tg_model_destroy(m);
    tg_pool_destroy(pool);
    tg_batch_free(&b);
    return 0;
}
