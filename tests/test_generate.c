/* tiergnn generate: determinism (seed, thread count, memory budget), the statistics the model
 * promises (degree skew, edge homophily, symmetry, class sizes, exact disjoint splits, a class
 * signal in the features that neighbours strengthen), and bad input through the CLI: one-line
 * errors, non-zero exit, nothing half-written left behind. */
#include "tg_test.h"
#include "tiergnn/data.h"

#include <dirent.h>
#include <sys/stat.h>

static int files_equal(const char *a, const char *b)
{
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    if (tg_read_file(a, &x, &nx) < 0 || tg_read_file(b, &y, &ny) < 0) {
        free(x);
        free(y);
        return 0;
    }
    int eq = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return eq;
}

static void check_same_dataset(const char *a, const char *b)
{
    const char *names[] = {"meta.txt",   "indptr.bin",    "indices.bin",   "features.bin",
                           "labels.bin", "train_idx.bin", "valid_idx.bin", "test_idx.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char pa[4400], pb[4400];
        snprintf(pa, sizeof pa, "%s/%s", a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, names[i]);
        if (!files_equal(pa, pb)) TG_FAIL("%s differs between %s and %s", names[i], a, b);
    }
}

/* Entries of dir other than those named in keep (NULL-terminated); 0 if none. */
static int stray_entries(const char *dir, const char *const *keep)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        int kept = 0;
        for (const char *const *k = keep; *k; k++)
            kept |= !strcmp(de->d_name, *k);
        if (!kept) {
            fprintf(stderr, "stray entry %s/%s\n", dir, de->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

TG_TEST(determinism)
{
    const char *base = tg_test_tmpdir("gen-det");
    char a[4200], b[4200], c[4200], d[4200];
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(b, sizeof b, "%s/b", base);
    snprintf(c, sizeof c, "%s/c", base);
    snprintf(d, sizeof d, "%s/d", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 30000;
    o.avg_degree = 40; /* 1.2M directed edges: 9.6 MB of keys, more than the smallest budget */
    o.feat_dim = 20;
    o.classes = 7;
    o.seed = 7;
    o.threads = 1;
    TG_CHECK_OK(tg_generate(a, &o));
    o.threads = 2;
    o.mem_bytes = tg_gen_min_mem(&o); /* forces the edge sort to spill runs */
    TG_CHECK_OK(tg_generate(b, &o));
    o.threads = 3;
    o.mem_bytes = 0;
    TG_CHECK_OK(tg_generate(c, &o));
    check_same_dataset(a, b);
    check_same_dataset(a, c);
    o.seed = 8;
    TG_CHECK_OK(tg_generate(d, &o));
    char pa[4400], pd[4400];
    snprintf(pa, sizeof pa, "%s/features.bin", a);
    snprintf(pd, sizeof pd, "%s/features.bin", d);
    TG_CHECK(!files_equal(pa, pd));
    snprintf(pa, sizeof pa, "%s/indices.bin", a);
    snprintf(pd, sizeof pd, "%s/indices.bin", d);
    TG_CHECK(!files_equal(pa, pd));
    TG_CHECK_OK(tg_dataset_verify(a));
    const char *keep[] = {"a", "b", "c", "d", NULL};
    TG_CHECK_EQ_U64(stray_entries(base, keep), 0);
    tg_rmtree(base);
}

/* Loads a generated dataset fully (small). */
typedef struct loaded {
    tg_dataset_t *ds;
    uint64_t *ip, *ix, *split[3], nsplit[3];
    int32_t *lab;
    float *x;
} loaded_t;

static int load(const char *dir, loaded_t *L)
{
    memset(L, 0, sizeof *L);
    if (tg_dataset_open(&L->ds, dir, TG_OPEN_CHECK_CHECKSUMS) < 0) return -1;
    const tg_meta_t *m = &L->ds->meta;
    L->x = malloc(m->num_nodes * m->feat_dim * sizeof *L->x);
    if (tg_dataset_load_indptr(L->ds, &L->ip) < 0 || tg_dataset_load_indices(L->ds, &L->ix) < 0 ||
        tg_dataset_load_labels(L->ds, &L->lab) < 0 ||
        tg_dataset_read_features(L->ds, 0, m->num_nodes, L->x) < 0)
        return -1;
    for (int k = 0; k < 3; k++)
        if (tg_dataset_load_split(L->ds, (tg_file_id_t)(TG_FILE_TRAIN + k), &L->split[k],
                                  &L->nsplit[k]) < 0)
            return -1;
    return 0;
}

static void unload(loaded_t *L)
{
    free(L->ip);
    free(L->ix);
    free(L->lab);
    free(L->x);
    for (int k = 0; k < 3; k++)
        free(L->split[k]);
    tg_dataset_close(L->ds);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-centroid accuracy on the test split, centroids estimated on the train split, for
 * features z = mean of the node's own features and (if hops) its in-neighbours'. */
static double centroid_accuracy(const loaded_t *L, int with_neighbours)
{
    const tg_meta_t *m = &L->ds->meta;
    uint64_t N = m->num_nodes, D = m->feat_dim, C = m->num_classes;
    double *z = calloc(N * D, sizeof *z), *mu = calloc(C * D, sizeof *mu);
    uint64_t *cnt = calloc(C, sizeof *cnt);
    for (uint64_t v = 0; v < N; v++) {
        uint64_t deg = with_neighbours ? L->ip[v + 1] - L->ip[v] : 0;
        for (uint64_t j = 0; j < D; j++) {
            double s = L->x[v * D + j];
            for (uint64_t e = L->ip[v]; e < L->ip[v] + deg; e++)
                s += L->x[L->ix[e] * D + j];
            z[v * D + j] = s / (double)(1 + deg);
        }
    }
    for (uint64_t i = 0; i < L->nsplit[0]; i++) {
        uint64_t v = L->split[0][i];
        cnt[L->lab[v]]++;
        for (uint64_t j = 0; j < D; j++)
            mu[L->lab[v] * D + j] += z[v * D + j];
    }
    for (uint64_t c = 0; c < C; c++)
        for (uint64_t j = 0; j < D; j++)
            mu[c * D + j] /= (double)(cnt[c] ? cnt[c] : 1);
    uint64_t ok = 0;
    for (uint64_t i = 0; i < L->nsplit[2]; i++) {
        uint64_t v = L->split[2][i], best = 0;
        double bd = 1e300;
        for (uint64_t c = 0; c < C; c++) {
            double d = 0;
            for (uint64_t j = 0; j < D; j++) {
                double t = z[v * D + j] - mu[c * D + j];
                d += t * t;
            }
            if (d < bd) {
                bd = d;
                best = c;
            }
        }
        ok += best == (uint64_t)L->lab[v];
    }
    free(z);
    free(mu);
    free(cnt);
    return (double)ok / (double)L->nsplit[2];
}

TG_TEST(statistics)
{
    const char *base = tg_test_tmpdir("gen-stats");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/g", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 50000;
    o.feat_dim = 24;
    o.classes = 8;
    o.homophily = 0.7;
    o.train_frac = 0.5;
    o.valid_frac = 0.1;
    o.test_frac = 0.3;
    TG_CHECK_OK(tg_generate(dir, &o));
    loaded_t L;
    if (load(dir, &L) < 0) {
        TG_FAIL("cannot load %s: %s", dir, tg_errmsg());
        return;
    }
    const tg_meta_t *m = &L.ds->meta;
    uint64_t N = m->num_nodes, E = m->num_edges;
    /* about N * avg_degree edges; a few percent are repeats dropped by the sort */
    TG_CHECK(E > 0.85 * 20 * N && E <= 20 * N);
    /* symmetric, no self loops, no repeats (strictly ascending in-lists) */
    uint64_t intra = 0, asym = 0, loops = 0, repeats = 0;
    for (uint64_t v = 0; v < N; v++)
        for (uint64_t e = L.ip[v]; e < L.ip[v + 1]; e++) {
            uint64_t u = L.ix[e];
            loops += u == v;
            repeats += e > L.ip[v] && L.ix[e - 1] >= u;
            intra += L.lab[u] == L.lab[v];
            uint64_t *hit = bsearch(&v, L.ix + L.ip[u], L.ip[u + 1] - L.ip[u], 8, cmp_u64);
            asym += hit == NULL;
        }
    TG_CHECK_EQ_U64(loops, 0);
    TG_CHECK_EQ_U64(repeats, 0);
    TG_CHECK_EQ_U64(asym, 0);
    double h = (double)intra / (double)E;
    TG_CHECK_NEAR(h, 0.7, 0.03);
    /* degree skew: a heavy head and a small share of nodes without neighbours */
    uint64_t *deg = malloc(N * sizeof *deg), zero = 0;
    for (uint64_t v = 0; v < N; v++) {
        deg[v] = L.ip[v + 1] - L.ip[v];
        zero += deg[v] == 0;
    }
    qsort(deg, N, sizeof *deg, cmp_u64);
    double mean = (double)E / (double)N, top = 0;
    for (uint64_t i = N - N / 100; i < N; i++)
        top += (double)deg[i];
    fprintf(stderr,
            "E %llu, homophily %.3f, max degree %llu (mean %.1f, median %llu), top 1%% "
            "hold %.1f%%, %llu without in-neighbours\n",
            (unsigned long long)E, h, (unsigned long long)deg[N - 1], mean,
            (unsigned long long)deg[N / 2], 100 * top / (double)E, (unsigned long long)zero);
    TG_CHECK((double)deg[N - 1] > 20 * mean);
    TG_CHECK(top / (double)E > 0.12);
    TG_CHECK((double)deg[N / 2] < mean);
    TG_CHECK(zero < N / 50);
    free(deg);
    /* communities are spread over the ids: neighbouring ids share a label about 1/C of the
     * time, as for a random layout (a contiguous layout would give ~1) */
    uint64_t adjacent = 0;
    for (uint64_t v = 0; v + 1 < N; v++)
        adjacent += L.lab[v] == L.lab[v + 1];
    TG_CHECK_NEAR((double)adjacent / (double)(N - 1), 1.0 / 8, 0.0125);
    /* classes of equal size */
    uint64_t cls[8] = {0};
    for (uint64_t v = 0; v < N; v++)
        cls[L.lab[v]]++;
    for (int c = 0; c < 8; c++)
        TG_CHECK_EQ_U64(cls[c], N / 8);
    /* exact, disjoint, ascending splits */
    TG_CHECK_EQ_U64(L.nsplit[0], N / 2);
    TG_CHECK_EQ_U64(L.nsplit[1], N / 10);
    TG_CHECK_EQ_U64(L.nsplit[2], 3 * N / 10);
    char *in = calloc(N, 1);
    for (int k = 0; k < 3; k++)
        for (uint64_t i = 0; i < L.nsplit[k]; i++) {
            uint64_t v = L.split[k][i];
            TG_CHECK(!in[v]);
            in[v] = 1;
            if (i) TG_CHECK(L.split[k][i - 1] < v);
        }
    free(in);
    /* features: own-feature accuracy near the calibrated (1 + 1/C) / 2; averaging with
     * neighbours, as a GNN layer does, is clearly better */
    double self = centroid_accuracy(&L, 0), nb = centroid_accuracy(&L, 1);
    fprintf(stderr, "nearest centroid: own features %.3f (model %.3f), with neighbours %.3f\n",
            self, tg_gen_centroid_accuracy(8, tg_gen_auto_noise(8)), nb);
    TG_CHECK_NEAR(self, (1 + 1.0 / 8) / 2, 0.03);
    TG_CHECK(nb > self + 0.15);
    unload(&L);
    tg_rmtree(base);
}

TG_TEST(noise_calibration)
{
    for (uint32_t c = 2; c <= 1024; c *= 4) {
        double s = tg_gen_auto_noise(c);
        TG_CHECK_NEAR(tg_gen_centroid_accuracy(c, s), (1 + 1.0 / c) / 2, 1e-6);
    }
    TG_CHECK_NEAR(tg_gen_centroid_accuracy(10, 1e-3), 1.0, 1e-9);
    TG_CHECK_NEAR(tg_gen_centroid_accuracy(10, 1e3), 0.1, 1e-3);
}

TG_TEST(f16_and_tiny)
{
    const char *base = tg_test_tmpdir("gen-f16");
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/a", base);
    snprintf(b, sizeof b, "%s/b", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 3000;
    o.feat_dim = 13; /* odd: rows not a whole number of words */
    o.classes = 3;
    TG_CHECK_OK(tg_generate(a, &o));
    o.feat_dtype = TG_F16;
    TG_CHECK_OK(tg_generate(b, &o));
    tg_dataset_t *da = NULL, *db = NULL;
    TG_CHECK_OK(tg_dataset_open(&da, a, TG_OPEN_CHECK_CHECKSUMS));
    TG_CHECK_OK(tg_dataset_open(&db, b, TG_OPEN_CHECK_CHECKSUMS));
    if (da && db) {
        float *x = malloc(3000 * 13 * 4), *y = malloc(3000 * 13 * 4);
        TG_CHECK_OK(tg_dataset_read_features(da, 0, 3000, x));
        TG_CHECK_OK(tg_dataset_read_features(db, 0, 3000, y));
        /* the same values, rounded to half precision */
        size_t bad = 0;
        for (size_t i = 0; i < 3000 * 13; i++)
            bad += tg_f16_to_f32(tg_f32_to_f16(x[i])) != y[i];
        TG_CHECK_EQ_U64(bad, 0);
        free(x);
        free(y);
    }
    tg_dataset_close(da);
    tg_dataset_close(db);
    TG_CHECK_OK(tg_dataset_verify(b));
    /* the smallest graphs: one node (no edges), nodes == classes, no edges at all */
    o.feat_dtype = TG_F32;
    o.overwrite = 1;
    uint64_t sizes[][2] = {{1, 1}, {5, 5}, {40, 3}};
    for (size_t i = 0; i < 3; i++) {
        o.nodes = sizes[i][0];
        o.classes = (uint32_t)sizes[i][1];
        o.avg_degree = i == 2 ? 0 : 4;
        TG_CHECK_OK(tg_generate(a, &o));
        TG_CHECK_OK(tg_dataset_verify(a));
    }
    tg_rmtree(base);
}

/* Runs the CLI, expects failure with one line containing needle, and no trace of out. */
static void expect_cli_error(const char *base, const char *out, const char *args,
                             const char *needle)
{
    char *text = NULL;
    int rc = tg_test_cli(&text, "generate %s %s", out, args);
    if (rc == 0) TG_FAIL("'generate %s %s' succeeded", out, args);
    if (!text || !strstr(text, needle)) TG_FAIL("'%s': output '%s' lacks '%s'", args, text, needle);
    if (text) {
        size_t lines = 0;
        for (char *p = text; *p; p++)
            lines += *p == '\n';
        if (lines != 1 || strncmp(text, "tiergnn: ", 9))
            TG_FAIL("'%s': expected one line 'tiergnn: ...', got '%s'", args, text);
    }
    free(text);
    const char *keep[] = {"existing", "afile", NULL};
    TG_CHECK_EQ_U64(stray_entries(base, keep), 0);
}

TG_TEST(cli_bad_input)
{
    const char *base = tg_test_tmpdir("gen-cli");
    char out[4200], existing[4200], afile[4200], under_file[4200];
    snprintf(out, sizeof out, "%s/out", base);
    snprintf(existing, sizeof existing, "%s/existing", base);
    snprintf(afile, sizeof afile, "%s/afile", base);
    snprintf(under_file, sizeof under_file, "%s/afile/out", base);
    tg_test_write_file(afile, "not a directory\n");
    expect_cli_error(base, out, "--nodes 0", "--nodes must be at least 1");
    expect_cli_error(base, out, "--nodes 100 --train-frac 1.5", "--train-frac must be in 0..1");
    expect_cli_error(base, out, "--nodes 100 --train-frac 0.7 --test-frac 0.5", "is more than 1");
    expect_cli_error(base, out, "--nodes 100 --feat-dtype f8", "--feat-dtype must be f32 or f16");
    expect_cli_error(base, out, "--nodes 1e3", "--nodes");
    expect_cli_error(base, out, "--nodes 100 --classes 101", "every class needs a node");
    expect_cli_error(base, out, "--nodes 100 --homophily -0.1", "--homophily");
    expect_cli_error(base, out, "--nodes 100 --feat-noise loud", "--feat-noise");
    expect_cli_error(base, out, "--nodes 100 --bogus 3", "unknown option '--bogus'");
    expect_cli_error(base, out, "--avg-degree 3", "--nodes is required");
    expect_cli_error(base, out, "--nodes 100 --mem 1M", "--mem");
    expect_cli_error(base, "", "--nodes 100", "expected one output directory");
    /* unwritable output: its parent is a regular file (root ignores permission bits) */
    expect_cli_error(base, under_file, "--nodes 100", "afile");
    /* an existing output needs --overwrite; with it the dataset is replaced */
    char *text = NULL;
    TG_CHECK_EQ_U64(tg_test_cli(&text, "--quiet generate %s --nodes 300 --feat-dim 4", existing),
                    0);
    free(text);
    expect_cli_error(base, existing, "--nodes 300 --feat-dim 4", "already exists");
    tg_meta_t m1, m2;
    TG_CHECK_OK(tg_meta_read(&m1, existing));
    TG_CHECK_EQ_U64(tg_test_cli(&text,
                                "--quiet generate %s --nodes 300 --feat-dim 4 --seed 2 "
                                "--overwrite",
                                existing),
                    0);
    free(text);
    TG_CHECK_OK(tg_meta_read(&m2, existing));
    TG_CHECK(m1.files[TG_FILE_FEATURES].crc32 != m2.files[TG_FILE_FEATURES].crc32);
    TG_CHECK_EQ_U64(tg_test_cli(&text, "verify %s", existing), 0);
    TG_CHECK(text && strstr(text, "OK"));
    free(text);
    const char *keep[] = {"existing", "afile", NULL};
    TG_CHECK_EQ_U64(stray_entries(base, keep), 0);
    tg_rmtree(base);
}

int main(void)
{
    TG_RUN(noise_calibration);
    TG_RUN(determinism);
    TG_RUN(statistics);
    TG_RUN(f16_and_tiny);
    TG_RUN(cli_bad_input);
    return tg_test_done();
}
