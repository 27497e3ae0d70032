/* bench_torch - tiergnn's half of the PyTorch comparison (bench/bench_torch.sh runs both halves
 * in interleaved rounds; bench/README.md, "PyTorch comparison", has the figures).
 *
 *     bench_torch dump DATASET DIR [--batches 4] [--batch 1024] [--fanouts 10,10,10]
 *                      [--hidden 256] [--dropout 0.5] [--seed 1] [--epoch 0] [--model-seed 1]
 *     bench_torch time DIR [--threads 1] [--passes 3] [--dropout P]
 *
 * dump samples the first --batches batches of an epoch exactly as `tiergnn train` does (training
 * split shuffled with the RNG of (seed, epoch), batch b = the next --batch seeds, blocks from
 * tg_sampler_sample with the RNG of (seed, epoch, b), in-memory adjacency), gathers their input
 * features and seed labels, and writes into DIR, as raw little-endian arrays:
 *
 *     meta.txt                      shapes: "key value ..." lines (read by bench_torch.py)
 *     bK_nodes.u64                  batch K's global node ids (num_nodes)
 *     bK_x.f32, bK_y.i32            its features (num_nodes x in_dim) and seed labels (num_seeds)
 *     bK_lL_indptr.u64              block L's CSR over destinations (num_dst + 1)
 *     bK_lL_indices.u32             block L's local source positions (num_edges)
 *     params.f32                    the model's initial flat parameter block (tg_model_params):
 *                                   per layer W_self (in x out, row-major), W_neigh (in x out),
 *                                   b (out)
 *     ref_logits.f32                batch 0, eval mode: logits of the seeds (num_seeds x classes)
 *     ref_grads.f32                 batch 0, the same weights with dropout 0: d loss / d params
 *     ref_params_step.f32           the parameters after one Adam step (lr 1e-3) on those grads
 *     (meta.txt also holds ref_loss, the mean cross-entropy of that step.)
 *
 * The model is 3-layer GraphSAGE-mean as in tiergnn/nn.h; the reference model differs from the
 * timed one only in its dropout (0), and the program checks that both start from the same weights.
 *
 * time loads DIR, creates the same model (dropout as dumped, or --dropout) on a pool of --threads
 * threads, runs one warm-up pass over the batches (arena growth) and then --passes passes of
 * tg_model_train_step (forward, loss, backward, Adam) over them, and prints one line per pass
 *
 *     RESULT tiergnn THREADS DROPOUT PASS MS_PER_BATCH MEAN_LOSS
 *
 * followed by the min and median over passes. The time is wall time of the steps only (the
 * batches and features are in RAM before timing).
 */
#include "nn/nn-impl.h"
#include "tiergnn/data.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#define MAX_BATCHES 64

_Noreturn static void die(const char *what)
{
    fprintf(stderr, "bench_torch: %s\n", what);
    exit(1);
}

static void *xalloc(size_t bytes)
{
    void *p = tg_aligned_alloc(64, bytes ? bytes : 64);
    if (!p) die("out of memory");
    return p;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) die("out of memory");
    return p;
}

/* ---------------------------------------------------------------- files */

static void path_of(char *buf, size_t len, const char *dir, const char *fmt, int k, int l)
{
    char name[64];
    snprintf(name, sizeof name, fmt, k, l);
    snprintf(buf, len, "%s/%s", dir, name);
}

static void write_array(const char *dir, const char *fmt, int k, int l, const void *p, size_t bytes)
{
    char path[4096];
    path_of(path, sizeof path, dir, fmt, k, l);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "bench_torch: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* Reads exactly `bytes` bytes (the file must have that size) into a new aligned block. */
static void *read_array(const char *dir, const char *fmt, int k, int l, size_t bytes)
{
    char path[4096];
    path_of(path, sizeof path, dir, fmt, k, l);
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) < 0) {
        fprintf(stderr, "bench_torch: cannot open %s: %s\n", path, strerror(errno));
        exit(1);
    }
    if ((uint64_t)st.st_size != bytes) {
        fprintf(stderr, "bench_torch: %s has %lld bytes, meta.txt says %zu\n", path,
                (long long)st.st_size, bytes);
        exit(1);
    }
    void *p = xalloc(bytes);
    if (fread(p, 1, bytes, f) != bytes) {
        fprintf(stderr, "bench_torch: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    return p;
}

/* ---------------------------------------------------------------- the dump's shapes */

typedef struct {
    uint32_t in_dim, hidden, classes;
    int layers, batches;
    float dropout;
    uint64_t model_seed;
    tg_batch_t b[MAX_BATCHES];
    float *X[MAX_BATCHES];
    int32_t *y[MAX_BATCHES];
} dump_t;

static void model_config(tg_model_config_t *cfg, const dump_t *d, float dropout)
{
    tg_model_config_default(cfg);
    cfg->type = TG_MODEL_SAGE;
    cfg->in_dim = d->in_dim;
    cfg->hidden = d->hidden;
    cfg->out_dim = d->classes;
    cfg->num_layers = d->layers;
    cfg->dropout = dropout;
}

static void write_meta(const char *dir, const dump_t *d, const int64_t *fan, uint64_t bsz,
                       uint64_t seed, uint64_t epoch, const char *dataset, double ref_loss)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.txt", dir);
    FILE *f = fopen(path, "w");
    if (!f) die("cannot write meta.txt");
    fprintf(f, "# bench_torch dump of %s (bench/bench_torch.c describes the files)\n", dataset);
    fprintf(f, "model sage\nin_dim %u\nhidden %u\nclasses %u\nlayers %d\ndropout %.9g\n", d->in_dim,
            d->hidden, d->classes, d->layers, (double)d->dropout);
    fprintf(f, "model_seed %llu\nseed %llu\nepoch %llu\nbatch_size %llu\nfanouts",
            (unsigned long long)d->model_seed, (unsigned long long)seed, (unsigned long long)epoch,
            (unsigned long long)bsz);
    for (int l = 0; l < d->layers; l++)
        fprintf(f, " %lld", (long long)fan[l]);
    fprintf(f, "\nbatches %d\n", d->batches);
    for (int k = 0; k < d->batches; k++) {
        fprintf(f, "batch %d %u %u\n", k, d->b[k].num_nodes, d->b[k].num_seeds);
        for (int l = 0; l < d->layers; l++)
            fprintf(f, "block %d %d %u %u %llu\n", k, l, d->b[k].blocks[l].num_dst,
                    d->b[k].blocks[l].num_src, (unsigned long long)d->b[k].blocks[l].num_edges);
    }
    fprintf(f, "ref_loss %.17g\n", ref_loss);
    if (fclose(f) != 0) die("cannot write meta.txt");
}

/* Reads meta.txt and the arrays of every batch. */
static void load_dump(dump_t *d, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "bench_torch: cannot open %s: %s (run `bench_torch dump` first)\n", path,
                strerror(errno));
        exit(1);
    }
    memset(d, 0, sizeof *d);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned a = 0, b = 0, c = 0, e = 0;
        unsigned long long u = 0;
        double x = 0;
        if (sscanf(line, "in_dim %u", &a) == 1)
            d->in_dim = a;
        else if (sscanf(line, "hidden %u", &a) == 1)
            d->hidden = a;
        else if (sscanf(line, "classes %u", &a) == 1)
            d->classes = a;
        else if (sscanf(line, "layers %u", &a) == 1)
            d->layers = (int)a;
        else if (sscanf(line, "dropout %lf", &x) == 1)
            d->dropout = (float)x;
        else if (sscanf(line, "model_seed %llu", &u) == 1)
            d->model_seed = u;
        else if (sscanf(line, "batches %u", &a) == 1)
            d->batches = (int)a;
        else if (sscanf(line, "batch %u %u %u", &a, &b, &c) == 3) {
            if (a >= MAX_BATCHES || d->layers < 1 || d->layers > TG_MAX_LAYERS)
                die("meta.txt: bad batch line");
            d->b[a].num_layers = d->layers;
            d->b[a].num_nodes = b;
            d->b[a].num_seeds = c;
            d->b[a].id = a;
            d->b[a].blocks = calloc((size_t)d->layers, sizeof(tg_block_t));
            if (!d->b[a].blocks) die("out of memory");
        } else if (sscanf(line, "block %u %u %u %u %llu", &a, &b, &c, &e, &u) == 5) {
            if (a >= MAX_BATCHES || !d->b[a].blocks || b >= (unsigned)d->layers)
                die("meta.txt: bad block line");
            d->b[a].blocks[b].num_dst = c;
            d->b[a].blocks[b].num_src = e;
            d->b[a].blocks[b].num_edges = u;
        }
    }
    fclose(f);
    if (d->batches < 1 || d->batches > MAX_BATCHES || !d->in_dim || !d->classes)
        die("meta.txt: incomplete");
    for (int k = 0; k < d->batches; k++) {
        tg_batch_t *bt = &d->b[k];
        if (!bt->blocks) die("meta.txt: a batch is missing");
        bt->nodes = read_array(dir, "b%d_nodes.u64", k, 0, bt->num_nodes * sizeof(uint64_t));
        d->X[k] = read_array(dir, "b%d_x.f32", k, 0, (size_t)bt->num_nodes * d->in_dim * 4);
        d->y[k] = read_array(dir, "b%d_y.i32", k, 0, bt->num_seeds * sizeof(int32_t));
        for (int l = 0; l < d->layers; l++) {
            tg_block_t *blk = &bt->blocks[l];
            blk->indptr = read_array(dir, "b%d_l%d_indptr.u64", k, l,
                                     ((size_t)blk->num_dst + 1) * sizeof(uint64_t));
            blk->indices =
                read_array(dir, "b%d_l%d_indices.u32", k, l, blk->num_edges * sizeof(uint32_t));
        }
    }
}

static void free_dump(dump_t *d)
{
    for (int k = 0; k < d->batches; k++) {
        tg_batch_free(&d->b[k]);
        free(d->X[k]);
        free(d->y[k]);
    }
}

/* ---------------------------------------------------------------- dump */

static int cmd_dump(int argc, char **argv)
{
    if (argc < 2) die("usage: bench_torch dump DATASET DIR [options]");
    const char *dataset = argv[0], *dir = argv[1];
    dump_t d;
    memset(&d, 0, sizeof d);
    d.batches = 4;
    d.hidden = 256;
    d.dropout = 0.5f;
    d.model_seed = 1;
    uint64_t bsz = 1024, seed = 1, epoch = 0;
    int64_t fan[TG_MAX_LAYERS] = {10, 10, 10};
    int nfan = 3;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) die("every option takes a value");
        const char *k = argv[i], *v = argv[i + 1];
        uint64_t u = 0;
        double x = 0;
        int rc = 0;
        if (!strcmp(k, "--fanouts"))
            rc = tg_fanouts_parse(v, fan, &nfan);
        else if (!strcmp(k, "--dropout"))
            rc = tg_parse_double(v, &x, k);
        else
            rc = tg_parse_u64(v, &u, k);
        if (rc < 0) die(tg_errmsg());
        if (!strcmp(k, "--batches"))
            d.batches = (int)TG_MIN(u, (uint64_t)MAX_BATCHES + 1);
        else if (!strcmp(k, "--batch"))
            bsz = u;
        else if (!strcmp(k, "--hidden"))
            d.hidden = (uint32_t)u;
        else if (!strcmp(k, "--dropout"))
            d.dropout = (float)x;
        else if (!strcmp(k, "--seed"))
            seed = u;
        else if (!strcmp(k, "--epoch"))
            epoch = u;
        else if (!strcmp(k, "--model-seed"))
            d.model_seed = u;
        else if (strcmp(k, "--fanouts"))
            die("unknown option (see the comment at the top of bench/bench_torch.c)");
    }
    if (d.batches < 1 || d.batches > MAX_BATCHES || bsz < 1 || d.hidden < 1)
        die("option out of range");
    d.layers = nfan;

    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, dataset, TG_OPEN_CHECK_SIZES) < 0) die(tg_errmsg());
    const tg_meta_t *mt = &ds->meta;
    if (mt->multi_label) die("multi-label datasets are not supported here");
    d.in_dim = mt->feat_dim;
    d.classes = mt->num_classes;
    uint64_t N = mt->num_nodes, ntrain = 0, *order = NULL;
    int32_t *labels = NULL;
    tg_adj_t *adj = NULL;
    if (tg_dataset_load_split(ds, TG_FILE_TRAIN, &order, &ntrain) < 0 ||
        tg_dataset_load_labels(ds, &labels) < 0 || tg_adj_memory_open(&adj, ds) < 0)
        die(tg_errmsg());
    if ((uint64_t)d.batches * bsz > ntrain) die("the training split has fewer seeds than asked");
    float *feat = xalloc((size_t)N * d.in_dim * sizeof(float));
    if (tg_dataset_read_features(ds, 0, N, feat) < 0) die(tg_errmsg());
    tg_sampler_shuffle_epoch(order, ntrain, seed, epoch);

    if (tg_mkdir_p(dir) < 0) die(tg_errmsg());
    tg_sampler_t *s;
    if (tg_sampler_create(&s, adj, d.layers, fan) < 0) die(tg_errmsg());
    for (int k = 0; k < d.batches; k++) {
        tg_rng_t r;
        tg_sampler_batch_rng(&r, seed, epoch, (uint64_t)k);
        tg_batch_t *b = &d.b[k];
        if (tg_sampler_sample(s, order + (uint64_t)k * bsz, bsz, &r, b) < 0) die(tg_errmsg());
        b->id = (uint64_t)k;
        d.X[k] = xalloc((size_t)b->num_nodes * d.in_dim * sizeof(float));
        tg_nn_gather_f32(d.X[k], feat, b->nodes, b->num_nodes, d.in_dim, NULL);
        d.y[k] = xalloc(b->num_seeds * sizeof(int32_t));
        for (uint32_t i = 0; i < b->num_seeds; i++)
            d.y[k][i] = labels[b->nodes[i]];
        write_array(dir, "b%d_nodes.u64", k, 0, b->nodes, b->num_nodes * sizeof(uint64_t));
        write_array(dir, "b%d_x.f32", k, 0, d.X[k], (size_t)b->num_nodes * d.in_dim * 4);
        write_array(dir, "b%d_y.i32", k, 0, d.y[k], b->num_seeds * sizeof(int32_t));
        uint64_t edges = 0;
        for (int l = 0; l < d.layers; l++) {
            const tg_block_t *blk = &b->blocks[l];
            write_array(dir, "b%d_l%d_indptr.u64", k, l, blk->indptr,
                        ((size_t)blk->num_dst + 1) * sizeof(uint64_t));
            write_array(dir, "b%d_l%d_indices.u32", k, l, blk->indices,
                        blk->num_edges * sizeof(uint32_t));
            edges += blk->num_edges;
        }
        printf("batch %d: %u nodes, %llu edges (", k, b->num_nodes, (unsigned long long)edges);
        for (int l = 0; l < d.layers; l++)
            printf("%sblock %d: %u <- %u, %llu", l ? "; " : "", l, b->blocks[l].num_dst,
                   b->blocks[l].num_src, (unsigned long long)b->blocks[l].num_edges);
        printf(")\n");
    }
    tg_sampler_destroy(s);

    /* Reference values on batch 0 for bench_torch.py's check: the timed model's initial weights,
     * evaluated with dropout 0 so that both implementations see the same function. */
    tg_model_config_t cfg, cfg0;
    model_config(&cfg, &d, d.dropout);
    model_config(&cfg0, &d, 0.0f);
    tg_model_t *m = NULL, *m0 = NULL;
    if (tg_model_create(&m, &cfg, d.model_seed) < 0 ||
        tg_model_create(&m0, &cfg0, d.model_seed) < 0)
        die(tg_errmsg());
    size_t np = tg_model_param_count(m);
    if (np != tg_model_param_count(m0) ||
        memcmp(tg_model_params(m), tg_model_params(m0), np * sizeof(float)))
        die("check failed: the dropout-0 reference model starts from other weights");
    write_array(dir, "params.f32", 0, 0, tg_model_params(m), np * sizeof(float));
    float *logits = xalloc((size_t)d.b[0].num_seeds * d.classes * sizeof(float));
    if (tg_model_predict(m0, &d.b[0], d.X[0], logits, NULL) < 0) die(tg_errmsg());
    write_array(dir, "ref_logits.f32", 0, 0, logits,
                (size_t)d.b[0].num_seeds * d.classes * sizeof(float));
    tg_step_stats_t st;
    if (tg_model_forward_backward(m0, &d.b[0], d.X[0], d.y[0], 1, 0, NULL, &st) < 0)
        die(tg_errmsg());
    write_array(dir, "ref_grads.f32", 0, 0, tg_model_grads(m0), np * sizeof(float));
    double ref_loss = st.loss;
    if (tg_model_train_step(m0, &d.b[0], d.X[0], d.y[0], &st) < 0) die(tg_errmsg());
    if (st.loss != ref_loss) die("check failed: the train step's loss differs from forward's");
    write_array(dir, "ref_params_step.f32", 0, 0, tg_model_params(m0), np * sizeof(float));
    write_meta(dir, &d, fan, bsz, seed, epoch, dataset, ref_loss);
    printf("wrote %s: %d batches, %zu parameters, reference loss of batch 0 (dropout 0) %.6f\n",
           dir, d.batches, np, ref_loss);

    free(logits);
    tg_model_destroy(m);
    tg_model_destroy(m0);
    free_dump(&d);
    free(feat);
    free(order);
    free(labels);
    tg_adj_destroy(adj);
    tg_dataset_close(ds);
    return 0;
}

/* ---------------------------------------------------------------- time */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmd_time(int argc, char **argv)
{
    if (argc < 1) die("usage: bench_torch time DIR [--threads N] [--passes P]");
    const char *dir = argv[0];
    int threads = 1, passes = 3;
    double dropout = -1;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) die("every option takes a value");
        uint64_t u = 0;
        if (!strcmp(argv[i], "--dropout")) {
            if (tg_parse_double(argv[i + 1], &dropout, argv[i]) < 0) die(tg_errmsg());
            if (!(dropout >= 0 && dropout < 1)) die("--dropout must be in [0, 1)");
            continue;
        }
        if (tg_parse_u64(argv[i + 1], &u, argv[i]) < 0) die(tg_errmsg());
        if (!strcmp(argv[i], "--threads"))
            threads = (int)TG_MIN(u, 1024);
        else if (!strcmp(argv[i], "--passes"))
            passes = (int)TG_MIN(u, 100000);
        else
            die("unknown option (see the comment at the top of bench/bench_torch.c)");
    }
    if (threads < 1 || passes < 1) die("option out of range");
    dump_t d;
    load_dump(&d, dir);
    if (dropout >= 0) d.dropout = (float)dropout;
    tg_model_config_t cfg;
    model_config(&cfg, &d, d.dropout);
    tg_model_t *m;
    if (tg_model_create(&m, &cfg, d.model_seed) < 0) die(tg_errmsg());
    size_t np = tg_model_param_count(m);
    float *p0 = read_array(dir, "params.f32", 0, 0, np * sizeof(float));
    memcpy(tg_model_params(m), p0, np * sizeof(float));
    free(p0);
    tg_pool_t *pool = NULL;
    if (threads > 1 && tg_pool_create(&pool, threads) < 0) die(tg_errmsg());
    tg_model_set_pool(m, pool);

    tg_step_stats_t st;
    for (int k = 0; k < d.batches; k++) /* warm-up: the arena grows to the largest batch */
        if (tg_model_train_step(m, &d.b[k], d.X[k], d.y[k], &st) < 0) die(tg_errmsg());
    double *per = xmalloc((size_t)passes * sizeof(double));
    for (int p = 0; p < passes; p++) {
        double t = 0, loss = 0;
        for (int k = 0; k < d.batches; k++) {
            double t0 = tg_now();
            if (tg_model_train_step(m, &d.b[k], d.X[k], d.y[k], &st) < 0) die(tg_errmsg());
            t += tg_now() - t0;
            loss += st.loss;
        }
        per[p] = t / d.batches;
        printf("RESULT tiergnn %d %g %d %.3f %.6f\n", threads, (double)d.dropout, p, per[p] * 1e3,
               loss / d.batches);
        fflush(stdout);
    }
    qsort(per, (size_t)passes, sizeof *per, cmp_double);
    double med = passes % 2 ? per[passes / 2] : 0.5 * (per[passes / 2 - 1] + per[passes / 2]);
    printf("tiergnn, %d thread(s), dropout %g, %d batches x %d passes: train step per batch min "
           "%.1f ms, median %.1f ms\n",
           threads, (double)d.dropout, d.batches, passes, per[0] * 1e3, med * 1e3);
    free(per);
    tg_model_destroy(m);
    tg_pool_destroy(pool);
    free_dump(&d);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "dump")) return cmd_dump(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "time")) return cmd_time(argc - 2, argv + 2);
    die("usage: bench_torch dump DATASET DIR [options] | bench_torch time DIR [options]");
}
