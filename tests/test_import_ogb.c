/* `import --from ogb`: the real Cora files from ../shared (counts, split, features and labels of
 * a few nodes against the CSV), small hand-made OGB trees for the options, and one test per
 * kind of bad input, each checking the one-line message and that no dataset is left behind. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/import-impl.h"
#include "tg_test.h"
#include "tiergnn/data.h"

static char tmp[4096];

/* ---------------------------------------------------------------- helpers */

static void put(const char *root, const char *rel, const char *text, int gz)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/%s%s", root, rel, gz ? ".gz" : "");
    char *d = strdup(path);
    tg_mkdir_p(dirname(d));
    free(d);
    if (gz)
        tg_test_write_gz(path, text);
    else
        tg_test_write_file(path, text);
}

/* A 4-node OGB tree; `skip` names a file to leave out, `over`/`with` replaces one file's text. */
static const char *make_ogb(const char *name, int gz, const char *over, const char *with)
{
    static char root[4200];
    snprintf(root, sizeof root, "%s/%s", tmp, name);
    tg_rmtree(root);
    static const char *const rel[] = {"raw/edge.csv",          "raw/node-feat.csv",
                                      "raw/node-label.csv",    "raw/num-node-list.csv",
                                      "raw/num-edge-list.csv", "split/s1/train.csv",
                                      "split/s1/valid.csv",    "split/s1/test.csv"};
    static const char *const text[] = {"0,1\n1,2\n2,3\n3,0\n0,2\n",
                                       "1,2,3\n4,5,6\n-7.5,8e-1,9\n0,0,1.25\n",
                                       "0\n1\n\n2\n",
                                       "4\n",
                                       "5\n",
                                       "0\n1\n",
                                       "3\n",
                                       "2\n"};
    for (int i = 0; i < 8; i++) {
        const char *t = over && !strcmp(over, rel[i]) ? with : text[i];
        if (t) put(root, rel[i], t, gz);
    }
    return root;
}

static const char *out_path(const char *name)
{
    static char out[4200];
    snprintf(out, sizeof out, "%s/%s", tmp, name);
    return out;
}

static int import_ogb(const char *out, const char *src, const char *split, int undirected,
                      int dedup, int self_loops)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_OGB;
    o.src = src;
    o.split = split;
    o.undirected = undirected;
    o.dedup = dedup;
    o.self_loops = self_loops;
    o.mem_bytes = 16u << 20;
    return tg_import(out, &o);
}

/* In-neighbours of v as "a b c". */
static void neigh(const uint64_t *ip, const uint64_t *ix, uint64_t v, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (uint64_t e = ip[v]; e < ip[v + 1] && k < len; e++)
        k += (size_t)snprintf(buf + k, len - k, "%s%llu", k ? " " : "", (unsigned long long)ix[e]);
}

/* ---------------------------------------------------------------- Cora */

/* Reads line `want` (0-based) of a gzip CSV with zlib + strtod, independent of the importer. */
static int read_csv_line(const char *path, int want, double *vals, int max)
{
    gzFile g = gzopen(path, "rb");
    static char line[1 << 16];
    int n = -1;
    for (int i = 0; g && gzgets(g, line, sizeof line); i++)
        if (i == want) {
            n = 0;
            for (char *p = line; *p && *p != '\n' && n < max;) {
                char *end;
                vals[n++] = strtod(p, &end);
                p = *end == ',' ? end + 1 : end;
            }
            break;
        }
    if (g) gzclose(g);
    return n;
}

TG_TEST(cora)
{
    const char *cora = tg_test_shared_dataset("cora");
    if (!cora) {
        fprintf(stderr, "SKIP cora: ../shared/datasets/cora is absent\n");
        return;
    }
    const char *out = out_path("cora");
    TG_CHECK_OK(import_ogb(out, cora, NULL, 0, 0, 0));
    TG_CHECK_OK(tg_dataset_verify(out));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (!ds) return;
    const tg_meta_t *m = &ds->meta;
    TG_CHECK_EQ_U64(m->num_nodes, 2708);
    TG_CHECK_EQ_U64(m->num_edges, 10556);
    TG_CHECK_EQ_U64(m->feat_dim, 1433);
    TG_CHECK_EQ_U64(m->num_classes, 7);
    TG_CHECK(!m->multi_label);
    TG_CHECK_EQ_U64(m->num_train, 140);
    TG_CHECK_EQ_U64(m->num_valid, 500);
    TG_CHECK_EQ_U64(m->num_test, 1000);
    TG_CHECK(m->index_dtype == TG_U32 && m->feat_dtype == TG_F32);
    TG_CHECK(strstr(m->source, "--split planetoid") != NULL);

    char path[4300];
    double vals[1433];
    float row[1433];
    int32_t *labels = NULL;
    TG_CHECK_OK(tg_dataset_load_labels(ds, &labels));
    const int nodes[] = {0, 1, 633, 1862, 2707};
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++) {
        int v = nodes[k];
        snprintf(path, sizeof path, "%s/raw/node-feat.csv.gz", cora);
        TG_CHECK(read_csv_line(path, v, vals, 1433) == 1433);
        TG_CHECK_OK(tg_dataset_read_features(ds, (uint64_t)v, 1, row));
        for (int j = 0; j < 1433; j++)
            if (row[j] != (float)vals[j]) {
                TG_FAIL("node %d feature %d: %g != %g", v, j, row[j], vals[j]);
                break;
            }
        snprintf(path, sizeof path, "%s/raw/node-label.csv.gz", cora);
        TG_CHECK(read_csv_line(path, v, vals, 1) == 1);
        if (labels) TG_CHECK_EQ_U64(labels[v], (uint64_t)vals[0]);
    }
    free(labels);

    /* Every edge src,dst of the first rows: src is an in-neighbour of dst. */
    uint64_t *ip = NULL, *ix = NULL;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    snprintf(path, sizeof path, "%s/raw/edge.csv.gz", cora);
    for (int i = 0; ip && ix && i < 50; i++) {
        double e[2];
        TG_CHECK(read_csv_line(path, i * 211, e, 2) == 2);
        uint64_t s = (uint64_t)e[0], d = (uint64_t)e[1];
        int found = 0;
        for (uint64_t k = ip[d]; k < ip[d + 1]; k++)
            found |= ix[k] == s;
        if (!found)
            TG_FAIL("edge %llu -> %llu missing from the CSC", (unsigned long long)s,
                    (unsigned long long)d);
        for (uint64_t k = ip[d] + 1; k < ip[d + 1]; k++)
            if (ix[k - 1] > ix[k]) TG_FAIL("in-neighbours of %llu unsorted", (unsigned long long)d);
    }
    free(ip);
    free(ix);

    /* The split is the file's list, in order. */
    uint64_t *ids = NULL, n = 0;
    TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &ids, &n));
    snprintf(path, sizeof path, "%s/split/planetoid/train.csv.gz", cora);
    for (uint64_t i = 0; ids && i < n; i += 13) {
        TG_CHECK(read_csv_line(path, (int)i, vals, 1) == 1);
        TG_CHECK_EQ_U64(ids[i], (uint64_t)vals[0]);
    }
    free(ids);
    tg_dataset_close(ds);

    /* An existing output is refused without --overwrite and replaced with it. */
    TG_CHECK_ERR(import_ogb(out, cora, NULL, 0, 0, 0), "already exists");
    char *text = NULL;
    int rc = tg_test_cli(&text, "import %s --from ogb %s --overwrite --feat-dtype f16", out, cora);
    TG_CHECK(rc == 0);
    if (text && !strstr(text, "2708 nodes, 10556 edges, 1433 features (f16), 7 classes"))
        TG_FAIL("CLI output: %s", text);
    free(text);
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
    if (ds) {
        TG_CHECK(ds->meta.feat_dtype == TG_F16);
        TG_CHECK_OK(tg_dataset_read_features(ds, 2707, 1, row));
        snprintf(path, sizeof path, "%s/raw/node-feat.csv.gz", cora);
        read_csv_line(path, 2707, vals, 1433);
        for (int j = 0; j < 1433; j++)
            if (row[j] != (float)vals[j]) {
                TG_FAIL("f16 feature %d: %g != %g", j, row[j], vals[j]);
                break;
            }
        tg_dataset_close(ds);
    }
    tg_rmtree(out);
}

/* ---------------------------------------------------------------- small trees */

TG_TEST(small_plain_and_gzip)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *src = make_ogb("small", gz, NULL, NULL);
        const char *out = out_path("small-out");
        tg_rmtree(out);
        TG_CHECK_OK(import_ogb(out, src, NULL, 0, 0, 0));
        tg_dataset_t *ds;
        TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
        if (!ds) continue;
        TG_CHECK_EQ_U64(ds->meta.num_nodes, 4);
        TG_CHECK_EQ_U64(ds->meta.num_edges, 5);
        TG_CHECK_EQ_U64(ds->meta.feat_dim, 3);
        TG_CHECK_EQ_U64(ds->meta.num_classes, 3);
        uint64_t *ip, *ix;
        TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
        TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
        char b[64];
        const char *want[4] = {"3", "0", "0 1", "2"};
        for (int v = 0; v < 4; v++) {
            neigh(ip, ix, (uint64_t)v, b, sizeof b);
            if (strcmp(b, want[v]))
                TG_FAIL("node %d: in-neighbours '%s', want '%s'", v, b, want[v]);
        }
        free(ip);
        free(ix);
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        TG_CHECK(lab[0] == 0 && lab[1] == 1 && lab[2] == -1 && lab[3] == 2);
        free(lab);
        float f[12];
        TG_CHECK_OK(tg_dataset_read_features(ds, 0, 4, f));
        TG_CHECK(f[0] == 1 && f[5] == 6 && f[6] == -7.5f && f[7] == 0.8f && f[11] == 1.25f);
        uint64_t *ids, n;
        TG_CHECK_OK(tg_dataset_load_split(ds, TG_FILE_TRAIN, &ids, &n));
        TG_CHECK(n == 2 && ids[0] == 0 && ids[1] == 1);
        free(ids);
        tg_dataset_close(ds);
        tg_rmtree(out);
    }
}

TG_TEST(options)
{
    /* duplicate edge 0->1 and a self-loop 2->2 in the input */
    const char *src = make_ogb("opts", 0, "raw/edge.csv", "0,1\n1,2\n0,1\n2,2\n3,0\n");
    const char *out = out_path("opts-out");
    struct {
        int und, dedup, loops;
        uint64_t edges;
        const char *adj[4];
    } cases[] = {
        {0, 0, 0, 5, {"3", "0 0", "1 2", ""}},           {0, 1, 0, 4, {"3", "0", "1 2", ""}},
        {1, 0, 0, 9, {"1 1 3", "0 0 2", "1 2", "0"}},    {1, 1, 0, 7, {"1 3", "0 2", "1 2", "0"}},
        {1, 1, 1, 10, {"0 1 3", "0 1 2", "1 2", "0 3"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_rmtree(out);
        TG_CHECK_OK(import_ogb(out, src, NULL, cases[i].und, cases[i].dedup, cases[i].loops));
        tg_dataset_t *ds;
        TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
        if (!ds) continue;
        TG_CHECK_EQ_U64(ds->meta.num_edges, cases[i].edges);
        uint64_t *ip, *ix;
        TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
        TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
        char b[64];
        for (int v = 0; v < 4; v++) {
            neigh(ip, ix, (uint64_t)v, b, sizeof b);
            if (strcmp(b, cases[i].adj[v]))
                TG_FAIL("case %zu node %d: '%s', want '%s'", i, v, b, cases[i].adj[v]);
        }
        free(ip);
        free(ix);
        tg_dataset_close(ds);
    }
    tg_rmtree(out);
}

TG_TEST(multi_label_and_nan)
{
    const char *src = make_ogb("ml", 1, "raw/node-label.csv", "0,1\n1,1\n0,0\n1.0,0.0\n");
    const char *out = out_path("ml-out");
    tg_rmtree(out);
    TG_CHECK_OK(import_ogb(out, src, NULL, 0, 0, 0));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
    if (ds) {
        TG_CHECK(ds->meta.multi_label && ds->meta.num_classes == 2);
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        const int32_t want[8] = {0, 1, 1, 1, 0, 0, 1, 0};
        TG_CHECK(!memcmp(lab, want, sizeof want));
        free(lab);
        tg_dataset_close(ds);
    }
    tg_rmtree(out);
    /* pandas-style float labels with NaN */
    src = make_ogb("nan", 0, "raw/node-label.csv", "3.0\nnan\n1.0\nNaN\n");
    TG_CHECK_OK(import_ogb(out, src, NULL, 0, 0, 0));
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
    if (ds) {
        TG_CHECK_EQ_U64(ds->meta.num_classes, 4);
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        TG_CHECK(lab[0] == 3 && lab[1] == -1 && lab[2] == 1 && lab[3] == -1);
        free(lab);
        tg_dataset_close(ds);
    }
    tg_rmtree(out);
}

/* Windows line ends, a missing final newline and stray blank lines in edges and features. */
TG_TEST(crlf_and_blank_lines)
{
    const char *src = make_ogb("crlf", 0, "raw/edge.csv", "0,1\r\n1,2\r\n\r\n2,3\r\n3,0\r\n0,2");
    char root[4200];
    snprintf(root, sizeof root, "%s", src);
    put(root, "raw/node-feat.csv", "1,2,3\r\n4,5,6\r\n-7.5,8e-1,9\r\n0,0,1.25\r\n\r\n", 0);
    const char *out = out_path("crlf-out");
    tg_rmtree(out);
    TG_CHECK_OK(import_ogb(out, root, NULL, 0, 0, 0));
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, out));
    TG_CHECK(m.num_nodes == 4 && m.num_edges == 5 && m.feat_dim == 3);
    tg_rmtree(out);
}

TG_TEST(split_choice)
{
    const char *src = make_ogb("two", 0, NULL, NULL);
    char root[4200];
    snprintf(root, sizeof root, "%s", src);
    put(root, "split/s2/train.csv", "3\n", 0);
    put(root, "split/s2/valid.csv", "", 0);
    put(root, "split/s2/test.csv", "0\n1\n2\n", 0);
    const char *out = out_path("two-out");
    tg_rmtree(out);
    TG_CHECK_ERR(import_ogb(out, root, NULL, 0, 0, 0),
                 "2 splits, pick one with --split NAME (available: s1, s2)");
    tg_test_check_no_output(out);
    TG_CHECK_ERR(import_ogb(out, root, "s3", 0, 0, 0),
                 "split/s3: no such split (available: s1, s2)");
    TG_CHECK_OK(import_ogb(out, root, "s2", 0, 0, 0));
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, out));
    TG_CHECK(m.num_train == 1 && m.num_valid == 0 && m.num_test == 3);
    tg_rmtree(out);
}

/* ---------------------------------------------------------------- bad input */

static void expect_fail(const char *over, const char *with, int gz, const char *needle)
{
    const char *src = make_ogb("bad", gz, over, with);
    const char *out = out_path("bad-out");
    tg_rmtree(out);
    TG_CHECK_ERR(import_ogb(out, src, NULL, 0, 0, 0), needle);
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
    tg_test_check_no_output(out);
}

TG_TEST(bad_input)
{
    expect_fail("raw/node-feat.csv", NULL, 0, "raw/node-feat.csv[.gz]: missing");
    expect_fail("split/s1/valid.csv", NULL, 1, "split/s1/valid.csv[.gz]: missing");
    expect_fail("raw/edge.csv", "0,1\n1,2\n2,x\n3,0\n0,2\n", 0,
                "raw/edge.csv: line 3, field 2: expected an integer, got 'x'");
    expect_fail("raw/edge.csv", "0,1\n1,2,3\n2,3\n3,0\n0,2\n", 1,
                "raw/edge.csv.gz: line 2: expected 2 fields, got 3");
    expect_fail("raw/edge.csv", "0,1\n9,2\n2,3\n3,0\n0,2\n", 0,
                "raw/edge.csv: line 2: node id 9 out of range [0, 4) (N from");
    expect_fail("raw/edge.csv", "0,1\n-1,2\n2,3\n3,0\n0,2\n", 0, "node id -1 out of range");
    expect_fail("raw/num-edge-list.csv", "6\n", 0, "raw/edge.csv has 5 edges but ");
    expect_fail("raw/num-node-list.csv", "4\n4\n", 0, "line 2: more than one count");
    expect_fail("raw/num-node-list.csv", "", 0, "num-node-list.csv: empty file");
    /* a count far above node-feat.csv's rows is refused before the edge sort writes indptr for
     * it (13 GB for this one) */
    expect_fail("raw/num-node-list.csv", "1666666667\n", 0,
                "raw/node-feat.csv has 33 bytes, too few for the 1666666667 nodes");
    expect_fail("raw/node-feat.csv", "1,2,3\n4,5\n-7.5,8e-1,9\n0,0,1.25\n", 0,
                "raw/node-feat.csv: line 2: expected 3 fields, got 2");
    expect_fail("raw/node-feat.csv", "1,2,3\n4,five,6\n-7.5,8e-1,9\n0,0,1.25\n", 1,
                "raw/node-feat.csv.gz: line 2, field 2: expected a number, got 'five'");
    expect_fail("raw/node-feat.csv", "1,2,3\n4,5,6\n-7.5,8e-1,9\n", 0,
                "raw/node-feat.csv has 3 rows but ");
    expect_fail("raw/node-feat.csv", "1,2,3\n4,5,6\n-7.5,8e-1,9\n0,0,1\n1,1,1\n", 0,
                "raw/node-feat.csv: line 5: more feature rows than the 4 nodes of");
    expect_fail("raw/node-feat.csv", "", 1, "raw/node-feat.csv.gz: empty file");
    expect_fail("raw/node-label.csv", "0\n1.5\n\n2\n", 0,
                "raw/node-label.csv: line 2, field 1: expected a class id");
    expect_fail("raw/node-label.csv", "0\n1\n2\n", 0, "raw/node-label.csv has 3 rows but ");
    expect_fail("raw/node-label.csv", "\n\n\n\n", 0, "no node has a label");
    expect_fail("split/s1/test.csv", "7\n", 0, "split/s1/test.csv: line 1: node id 7 out of range");
    expect_fail("split/s1/test.csv", "1\n", 0,
                "split/s1/test.csv: line 1: node 1 is already listed in");
    expect_fail("split/s1/train.csv", "", 0, "split/s1/train.csv: no training nodes");

    /* a truncated gzip file */
    const char *src = make_ogb("bad", 1, NULL, NULL);
    char path[4300];
    snprintf(path, sizeof path, "%s/raw/node-feat.csv.gz", src);
    char *data;
    size_t len;
    TG_CHECK_OK(tg_read_file(path, &data, &len));
    TG_CHECK_OK(tg_write_file_atomic(path, data, len - 12));
    free(data);
    const char *out = out_path("bad-out");
    TG_CHECK_ERR(import_ogb(out, src, NULL, 0, 0, 0),
                 "node-feat.csv.gz: truncated or corrupt gzip");
    tg_test_check_no_output(out);

    TG_CHECK_ERR(import_ogb(out, "/nonexistent/ogb", NULL, 0, 0, 0),
                 "/nonexistent/ogb: not a directory");
    tg_test_check_no_output(out);
}

/* ---------------------------------------------------------------- features on threads */

/* An OGB tree of n nodes whose node-feat.csv is `feat` (any text); the other files are minimal
 * (one edge, every node labelled 0, node 0 the only training node). */
static const char *make_feat_tree(const char *name, uint64_t n, const char *feat, int gz)
{
    static char root[4200];
    snprintf(root, sizeof root, "%s/%s", tmp, name);
    tg_rmtree(root);
    char num[32];
    snprintf(num, sizeof num, "%llu\n", (unsigned long long)n);
    char *lab = malloc(2 * n + 1);
    for (uint64_t i = 0; i < n; i++)
        memcpy(lab + 2 * i, "0\n", 2);
    lab[2 * n] = 0;
    put(root, "raw/edge.csv", "0,1\n", 0);
    put(root, "raw/num-edge-list.csv", "1\n", 0);
    put(root, "raw/num-node-list.csv", num, 0);
    put(root, "raw/node-label.csv", lab, 0);
    put(root, "raw/node-feat.csv", feat, gz);
    put(root, "split/s1/train.csv", "0\n", 0);
    put(root, "split/s1/valid.csv", "", 0);
    put(root, "split/s1/test.csv", "", 0);
    free(lab);
    return root;
}

/* nthreads 0: the ordinary import (one thread for a small file). */
static int import_threads(const char *out, const char *src, int nthreads, uint64_t chunk, int f16)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_OGB;
    o.src = src;
    o.mem_bytes = 16u << 20;
    if (f16) o.feat_dtype = TG_F16;
    return nthreads ? tg_import_ogb_threads(out, &o, nthreads, chunk) : tg_import(out, &o);
}

/* features.bin and its meta.txt line ("file = features.bin SIZE CRC") of a dataset. */
static char *features_of(const char *out, size_t *len, char *meta_line, size_t mlen)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/features.bin", out);
    char *data = NULL;
    *len = 0;
    TG_CHECK_OK(tg_read_file(path, &data, len));
    snprintf(path, sizeof path, "%s/meta.txt", out);
    char *meta = NULL;
    size_t ml;
    meta_line[0] = 0;
    TG_CHECK_OK(tg_read_file(path, &meta, &ml));
    const char *l = meta ? strstr(meta, "file = features.bin") : NULL;
    if (l) snprintf(meta_line, mlen, "%.*s", (int)strcspn(l, "\n"), l);
    free(meta);
    return data;
}

/* Rows of varied length and spelling, CRLF and LF, blank lines, a line longer than small chunks
 * and no final newline: every way of splitting it must give the bytes of the one-thread
 * import, for f32 and f16. */
TG_TEST(threads_same_dataset)
{
    enum { N = 300 };
    size_t cap = 1 << 20, k = 0;
    char *feat = malloc(cap);
    for (int i = 0; i < N; i++) {
        if (i % 17 == 3) k += (size_t)snprintf(feat + k, cap - k, "\n  \r\n");
        if (i == 150) {
            /* a long line: 5 numbers padded with blanks to ~3000 bytes */
            k += (size_t)snprintf(feat + k, cap - k, "%1000s,-2.5e-3,%1000s,4,5\n", "1.25", "  3");
            continue;
        }
        k += (size_t)snprintf(feat + k, cap - k, "%d,%.6g,-%d.%d,%de-2,0%s", i, i * 0.37, i % 7,
                              i % 13, i, i == N - 1 ? "" : (i % 5 ? "\n" : "\r\n"));
    }
    const char *src = make_feat_tree("thr", N, feat, 0);
    char root[4200];
    snprintf(root, sizeof root, "%s", src);
    const char *ref_out = out_path("thr-ref"), *out = out_path("thr-out");
    for (int f16 = 0; f16 < 2; f16++) {
        tg_rmtree(ref_out);
        TG_CHECK_OK(import_threads(ref_out, root, 0, 0, f16));
        size_t rlen;
        char rmeta[256], meta[256];
        char *ref = features_of(ref_out, &rlen, rmeta, sizeof rmeta);
        TG_CHECK_EQ_U64(rlen, (uint64_t)N * 5 * (f16 ? 2 : 4));
        const uint64_t chunks[] = {5, 64, 333, 1000, 4096, 1u << 20, 0};
        for (int t = 1; t <= 4; t++)
            for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
                if (f16 && t != 3) continue; /* f16: one thread count is enough */
                tg_rmtree(out);
                TG_CHECK_OK(import_threads(out, root, t, chunks[c], f16));
                size_t len;
                char *got = features_of(out, &len, meta, sizeof meta);
                if (!got || !ref || len != rlen || memcmp(got, ref, len) || strcmp(meta, rmeta))
                    TG_FAIL("f16 %d, %d threads, chunk %llu: features differ ('%s' vs '%s')", f16,
                            t, (unsigned long long)chunks[c], meta, rmeta);
                free(got);
            }
        /* .gz goes through one thread whatever is asked */
        make_feat_tree("thr-gz", N, feat, 1);
        char gzroot[4200];
        snprintf(gzroot, sizeof gzroot, "%s/thr-gz", tmp);
        tg_rmtree(out);
        TG_CHECK_OK(import_threads(out, gzroot, 3, 7, f16));
        size_t len;
        char *got = features_of(out, &len, meta, sizeof meta);
        if (!got || !ref || len != rlen || memcmp(got, ref, len) || strcmp(meta, rmeta))
            TG_FAIL("f16 %d: features from node-feat.csv.gz differ", f16);
        free(got);
        free(ref);
    }
    tg_rmtree(ref_out);
    tg_rmtree(out);
    free(feat);
}

/* n rows "a.5,b.5,c.5\n" of exactly W bytes, so that a chunk of m * W bytes ends exactly after
 * line m; row `bad` (1-based, 0: none) replaced by `with` (padded to W when shorter). */
#define W 12
static char *fixed_rows(int n, int bad, const char *with, int bad2, const char *with2)
{
    char *s = malloc((size_t)n * 64 + 1);
    size_t k = 0;
    for (int i = 1; i <= n; i++) {
        const char *w = i == bad ? with : i == bad2 ? with2 : NULL;
        if (w)
            k += (size_t)sprintf(s + k, "%-*s\n", W - 1, w);
        else
            k += (size_t)sprintf(s + k, "%d.5,%d.5,%d.5\n", i % 10, (i / 10) % 10, i % 7);
    }
    s[k] = 0;
    return s;
}

static void expect_feat_fail(const char *feat, uint64_t n, int nthreads, uint64_t chunk, int f16,
                             const char *needle)
{
    const char *src = make_feat_tree("fbad", n, feat, 0);
    const char *out = out_path("fbad-out");
    tg_rmtree(out);
    tg_err_clear();
    int rc = import_threads(out, src, nthreads, chunk, f16);
    if (rc >= 0 || !strstr(tg_errmsg(), needle))
        TG_FAIL("%d threads, chunk %llu: rc %d, message '%s', want '%s'", nthreads,
                (unsigned long long)chunk, rc, tg_errmsg(), needle);
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
    tg_test_check_no_output(out);
}

/* A bad row on every line of a 12-row file, with chunks that end exactly before it, exactly
 * after it and in its middle, on 1 and 3 threads: the message names its line in the whole file. */
TG_TEST(threads_errors_at_boundaries)
{
    enum { R = 12 };
    const uint64_t chunks[] = {3 * W, 3 * W + 5, 4 * W - 1, 1};
    char needle[200];
    for (int bad = 1; bad <= R; bad++)
        for (int kind = 0; kind < 3; kind++) {
            char *feat = fixed_rows(R, bad,
                                    kind == 0   ? "1,x,3"
                                    : kind == 1 ? "1,2"
                                                : "1,2,3,4",
                                    0, NULL);
            if (kind == 0)
                snprintf(needle, sizeof needle,
                         "raw/node-feat.csv: line %d, field 2: expected a number, got 'x'", bad);
            else
                snprintf(needle, sizeof needle,
                         "raw/node-feat.csv: line %d: expected 3 fields, got %d", bad,
                         kind == 1 ? 2 : 4);
            /* the first row fixes D: a short or long first row makes the second one ragged */
            if (bad == 1 && kind > 0)
                snprintf(needle, sizeof needle,
                         "raw/node-feat.csv: line 2: expected %d fields, got 3", kind == 1 ? 2 : 4);
            for (int t = 1; t <= 3; t += 2)
                for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
                    expect_feat_fail(feat, R, t, chunks[c], 0, needle);
            free(feat);
        }
}

TG_TEST(threads_first_error_wins)
{
    enum { R = 40 };
    /* two errors in different chunks, on 2 and 3 threads: the earlier line is reported
     * whichever thread finishes first */
    const int pairs[][2] = {{3, 30}, {11, 12}, {12, 13}, {20, 40}, {1, 2}};
    char needle[200];
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char *feat = fixed_rows(R, pairs[i][0], "x,1,2", pairs[i][1], "1,2");
        snprintf(needle, sizeof needle, "line %d, field 1: expected a number, got 'x'",
                 pairs[i][0]);
        for (int t = 2; t <= 3; t++) {
            expect_feat_fail(feat, R, t, 12 * W, 0, needle);
            expect_feat_fail(feat, R, t, W, 0, needle);
            expect_feat_fail(feat, R, t, 7, 0, needle);
        }
        free(feat);
        /* the same with the later error first in the file's second half: still the earlier */
        feat = fixed_rows(R, pairs[i][0], "1,2", pairs[i][1], "x,1,2");
        snprintf(needle, sizeof needle, "line %d: expected 3 fields, got 2", pairs[i][0]);
        if (pairs[i][0] == 1) snprintf(needle, sizeof needle, "line 2: expected 2 fields, got 3");
        for (int t = 2; t <= 3; t++)
            expect_feat_fail(feat, R, t, 5 * W, 0, needle);
        free(feat);
    }
}

TG_TEST(threads_row_count)
{
    enum { R = 20 };
    /* more rows than nodes: the first extra row is named, with blank lines counted, wherever
     * the chunks end; an error after it (even on the extra row itself) comes later */
    char *feat = fixed_rows(R, 0, NULL, 0, NULL);
    size_t len = strlen(feat);
    char *more = malloc(len + 64);
    snprintf(more, len + 64, "\n\n%s1.5,2,3\n1,x\n", feat);
    for (int t = 1; t <= 3; t++) {
        for (uint64_t c = 1; c <= 3 * W; c += 5) {
            expect_feat_fail(more, R - 2, t, c, 0,
                             "raw/node-feat.csv: line 21: more feature rows than the 18 nodes of");
            expect_feat_fail(more, R, t, c, 0,
                             "raw/node-feat.csv: line 23: more feature rows than the 20 nodes of");
            expect_feat_fail(more, R + 1, t, c, 0,
                             "raw/node-feat.csv: line 24: more feature rows than the 21 nodes of");
            expect_feat_fail(more, R + 3, t, c, 0,
                             "raw/node-feat.csv: line 24: expected 3 fields, got 2");
        }
        expect_feat_fail(feat, R + 1, t, W, 0, "raw/node-feat.csv has 20 rows but");
        /* a parse error before the extra rows wins */
        more[2 + 5 * W + 1] = 'x';
        expect_feat_fail(more, R - 2, t, 2 * W, 0, "line 8, field 1: expected a number, got '6x5'");
        more[2 + 5 * W + 1] = '.';
    }
    free(more);
    free(feat);
    /* f16: a value out of range in a later chunk names its line */
    feat = fixed_rows(R, 17, "1,70000,2", 0, NULL);
    for (int t = 1; t <= 3; t++)
        expect_feat_fail(feat, R, t, 2 * W, 1,
                         "raw/node-feat.csv: line 17: feature 1: 70000 does not fit in f16");
    free(feat);
    /* empty input: the first row is read before the threads start */
    expect_feat_fail("", 4, 2, 7, 0, "raw/node-feat.csv: empty file");
    expect_feat_fail("\n \n\r\n", 4, 2, 1, 0, "raw/node-feat.csv: no data rows in 3 lines");
}
/* The file shrinks while the threads read it (a hook truncates it before chunk 3): the import
 * stops with a message naming the file, whichever thread or step sees it first. */
static char shrink_path[4300];
static uint64_t shrink_to;
static void shrink_before_chunk(uint64_t k)
{
    if (k == 3 && truncate(shrink_path, (off_t)shrink_to)) TG_FAIL("truncate: %s", strerror(errno));
}

TG_TEST(threads_file_shrinks)
{
    enum { R = 400 };
    char *feat = fixed_rows(R, 0, NULL, 0, NULL);
    for (int t = 1; t <= 3; t += 2) {
        const char *src = make_feat_tree("shrink", R, feat, 0);
        snprintf(shrink_path, sizeof shrink_path, "%s/raw/node-feat.csv", src);
        shrink_to = R * 12 * 4 / 10;
        const char *out = out_path("shrink-out");
        tg_rmtree(out);
        tg_ogb_test_before_chunk = shrink_before_chunk;
        tg_err_clear();
        int rc = import_threads(out, src, t, R * 12 / 8, 0);
        tg_ogb_test_before_chunk = NULL;
        if (rc >= 0 || !strstr(tg_errmsg(), "raw/node-feat.csv: the file ends at offset") ||
            !strstr(tg_errmsg(), "(did it change while it was read?)"))
            TG_FAIL("%d threads: rc %d, message '%s'", t, rc, tg_errmsg());
        tg_test_check_no_output(out);
    }
    free(feat);
}
#undef W

TG_TEST(cli)
{
    const char *src = make_ogb("cli", 0, "raw/edge.csv", "0,1\n1,2\n2,3\n3,0\n0,bad\n");
    const char *out = out_path("cli-out");
    tg_rmtree(out);
    char *text = NULL;
    int rc = tg_test_cli(&text, "import %s --from ogb %s", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "raw/edge.csv: line 5, field 2: expected an integer, got 'bad'"))
        TG_FAIL("CLI output: %s", text);
    free(text);
    tg_test_check_no_output(out);
    rc = tg_test_cli(&text, "import %s --from csv %s", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "--from must be ogb, npy, npz or edgelist"))
        TG_FAIL("CLI output: %s", text);
    free(text);
    rc = tg_test_cli(&text, "import %s --from ogb %s --feat-dim 8", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "--feat-dim applies to --from edgelist only"))
        TG_FAIL("CLI output: %s", text);
    free(text);
    rc = tg_test_cli(&text, "import %s --from ogb %s --nope", out, src);
    TG_CHECK(rc != 0);
    free(text);
    rc = tg_test_cli(&text, "import --help");
    TG_CHECK(rc == 0);
    if (text && !strstr(text, "--from ogb|npy|npz|edgelist")) TG_FAIL("help: %s", text);
    free(text);
    tg_test_check_no_output(out);

    /* an output whose parent is a regular file cannot be created */
    src = make_ogb("cli", 0, NULL, NULL);
    char file[4300], bad_out[4400];
    snprintf(file, sizeof file, "%s/plainfile", tmp);
    tg_test_write_file(file, "x");
    snprintf(bad_out, sizeof bad_out, "%s/out", file);
    rc = tg_test_cli(&text, "import %s --from ogb %s", bad_out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, file)) TG_FAIL("CLI output does not name %s: %s", file, text);
    free(text);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-ogb"));
    TG_RUN(cora);
    TG_RUN(small_plain_and_gzip);
    TG_RUN(options);
    TG_RUN(multi_label_and_nan);
    TG_RUN(crlf_and_blank_lines);
    TG_RUN(split_choice);
    TG_RUN(bad_input);
    TG_RUN(threads_same_dataset);
    TG_RUN(threads_errors_at_boundaries);
    TG_RUN(threads_first_error_wins);
    TG_RUN(threads_row_count);
    TG_RUN(threads_file_shrinks);
    TG_RUN(cli);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
