/* `import --from ogb`: the real Cora files from ../shared (counts, split, features and labels of
 * a few nodes against the CSV), small hand-made OGB trees for the options, and one test per
 * kind of bad input, each checking the one-line message and that no dataset is left behind. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

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
    if (text && !strstr(text, "--from must be ogb, npy or edgelist"))
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
    if (text && !strstr(text, "--from ogb|npy|edgelist")) TG_FAIL("help: %s", text);
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
    TG_RUN(cli);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
