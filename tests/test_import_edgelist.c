/* `import --from edgelist`: SNAP-style text with comments, tabs, extra columns and sparse ids
 * (renumbered by rank), --undirected / --dedup / --self-loops, the synthesised node data
 * (deterministic, labels follow the communities), and bad input. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"

static char tmp[4096];

static const char *file(const char *name, const char *text, int gz)
{
    static char path[4300];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    if (gz)
        tg_test_write_gz(path, text);
    else
        tg_test_write_file(path, text);
    return path;
}

static int import_el(const char *out, const char *src, int und, int dedup, int loops, uint64_t seed,
                     uint64_t mem)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_EDGELIST;
    o.src = src;
    o.undirected = und;
    o.dedup = dedup;
    o.self_loops = loops;
    o.feat_dim = 16;
    o.classes = 4;
    o.seed = seed;
    o.mem_bytes = mem;
    return tg_import(out, &o);
}

static void adjacency(const char *out, char *buf, size_t len)
{
    tg_dataset_t *ds;
    buf[0] = 0;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (!ds) return;
    uint64_t *ip, *ix;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    size_t k = 0;
    for (uint64_t v = 0; v < ds->meta.num_nodes; v++) {
        k += (size_t)snprintf(buf + k, len - k, "%s", v ? "|" : "");
        for (uint64_t e = ip[v]; e < ip[v + 1]; e++)
            k += (size_t)snprintf(buf + k, len - k, "%s%llu", e > ip[v] ? " " : "",
                                  (unsigned long long)ix[e]);
    }
    free(ip);
    free(ix);
    tg_dataset_close(ds);
}

static const char *const snap = "# Directed graph (each unordered pair of nodes is saved once)\n"
                                "# FromNodeId\tToNodeId\n"
                                "10\t20\n"
                                "20 30 0.5\n"
                                "% konect-style comment\n"
                                "  30   10  \r\n"
                                "\n"
                                "10 20\n"
                                "40\t40\n";

TG_TEST(parse_and_options)
{
    char out[4300], adj[256];
    snprintf(out, sizeof out, "%s/out", tmp);
    struct {
        int und, dedup, loops, gz;
        const char *want;
    } cases[] = {
        /* ids 10 20 30 40 -> 0 1 2 3; edges 0->1 1->2 2->0 0->1 3->3 */
        {0, 0, 0, 0, "2|0 0|1|3"},
        {0, 1, 0, 1, "2|0|1|3"},
        {1, 1, 0, 0, "1 2|0 2|0 1|3"},
        {1, 1, 1, 1, "0 1 2|0 1 2|0 1 2|3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *src = file(cases[i].gz ? "snap.txt.gz" : "snap.txt", snap, cases[i].gz);
        tg_rmtree(out);
        TG_CHECK_OK(import_el(out, src, cases[i].und, cases[i].dedup, cases[i].loops, 1, 16 << 20));
        adjacency(out, adj, sizeof adj);
        if (strcmp(adj, cases[i].want))
            TG_FAIL("case %zu: adjacency '%s', want '%s'", i, adj, cases[i].want);
    }
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, out));
    TG_CHECK(m.num_nodes == 4 && m.feat_dim == 16 && m.num_classes == 4 && !m.multi_label);
    TG_CHECK(m.num_train + m.num_valid + m.num_test <= 4);
    tg_rmtree(out);

    /* dense ids stay as they are, isolated ids included only if they appear */
    const char *src = file("dense.txt", "0 1\n1 2\n2 0\n", 0);
    TG_CHECK_OK(import_el(out, src, 0, 0, 0, 1, 16 << 20));
    adjacency(out, adj, sizeof adj);
    TG_CHECK(!strcmp(adj, "2|0|1"));
    tg_rmtree(out);
}

/* Two 30-cliques joined by one edge: labels from label propagation must follow the cliques,
 * features must be deterministic in the seed. */
TG_TEST(synthesis)
{
    char *text = malloc(1 << 16);
    size_t k = 0;
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 30; i++)
            for (int j = i + 1; j < 30; j++)
                k += (size_t)sprintf(text + k, "%d %d\n", 30 * c + i, 30 * c + j);
    sprintf(text + k, "0 30\n");
    const char *src = file("cliques.txt", text, 0);
    free(text);
    char out[4300], out2[4300];
    snprintf(out, sizeof out, "%s/cl", tmp);
    snprintf(out2, sizeof out2, "%s/cl2", tmp);
    tg_rmtree(out);
    tg_rmtree(out2);
    TG_CHECK_OK(import_el(out, src, 1, 0, 0, 5, 16 << 20));
    TG_CHECK_OK(tg_dataset_verify(out));
    TG_CHECK_OK(import_el(out2, src, 1, 0, 0, 5, 16 << 20));
    tg_meta_t a, b;
    TG_CHECK_OK(tg_meta_read(&a, out));
    TG_CHECK_OK(tg_meta_read(&b, out2));
    for (int i = 0; i < TG_FILE_COUNT; i++)
        TG_CHECK(a.files[i].crc32 == b.files[i].crc32);
    TG_CHECK_EQ_U64(a.num_nodes, 60);
    TG_CHECK_EQ_U64(a.num_edges, 2 * (2 * 435 + 1));
    TG_CHECK(a.num_train > 20 && a.num_train + a.num_valid + a.num_test == 60);
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
    if (ds) {
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        int same = 0;
        for (int c = 0; c < 2; c++)
            for (int i = 1; i < 30; i++)
                same += lab[30 * c + i] == lab[30 * c];
        if (same < 56) TG_FAIL("labels do not follow the cliques: %d/58 agree", same);
        for (int v = 0; v < 60; v++)
            TG_CHECK(lab[v] >= 0 && lab[v] < 4);
        free(lab);
        /* features: class centroid + noise, so same-class rows are closer than others */
        float *f = malloc(60 * 16 * sizeof *f);
        TG_CHECK_OK(tg_dataset_read_features(ds, 0, 60, f));
        for (int i = 0; i < 60 * 16; i++)
            TG_CHECK(isfinite(f[i]));
        free(f);
        tg_dataset_close(ds);
    }
    tg_rmtree(out2);
    TG_CHECK_OK(import_el(out2, src, 1, 0, 0, 6, 16 << 20));
    TG_CHECK_OK(tg_meta_read(&b, out2));
    TG_CHECK(a.files[TG_FILE_FEATURES].crc32 != b.files[TG_FILE_FEATURES].crc32);
    tg_rmtree(out);
    tg_rmtree(out2);
}

static void expect_fail(const char *text, uint64_t mem, const char *needle)
{
    const char *src = file("bad.txt", text, 0);
    char out[4300];
    snprintf(out, sizeof out, "%s/bad-out", tmp);
    TG_CHECK_ERR(import_el(out, src, 0, 0, 0, 1, mem), needle);
    if (!strstr(tg_errmsg(), "bad.txt"))
        TG_FAIL("message '%s' does not name the file", tg_errmsg());
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
    tg_test_check_no_output(out);
}

TG_TEST(bad_input)
{
    expect_fail("0 1\n1 2\n3\n", 16 << 20, "bad.txt: line 3: expected two node ids, got 1 field");
    expect_fail("0 1\nx 2\n", 16 << 20, "bad.txt: line 2, field 1: expected an integer, got 'x'");
    expect_fail("0 1\n1 -2\n", 16 << 20, "bad.txt: line 2: negative node id -2");
    expect_fail("0 1\n1 2.5\n", 16 << 20, "bad.txt: line 2, field 2: expected an integer");
    expect_fail("", 16 << 20, "bad.txt: empty file");
    expect_fail("# nothing\n\n", 16 << 20, "bad.txt: no data rows in 2 lines");
    expect_fail("0 1\n1 1000000000000\n", 16 << 20,
                "bad.txt: line 2: node id 1000000000000 needs a");
    char missing[4300], out[4300];
    snprintf(missing, sizeof missing, "%s/none.txt", tmp);
    snprintf(out, sizeof out, "%s/bad-out", tmp);
    TG_CHECK_ERR(import_el(out, missing, 0, 0, 0, 1, 16 << 20), "none.txt: cannot open");
    tg_test_check_no_output(out);

    /* through the CLI */
    const char *src = file("bad.txt", "1 2\n2 3 \n3 four\n", 0);
    char *text = NULL;
    int rc = tg_test_cli(&text, "import %s --from edgelist %s --classes 3", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "bad.txt: line 3, field 2: expected an integer, got 'four'"))
        TG_FAIL("CLI: %s", text);
    free(text);
    tg_test_check_no_output(out);
    src = file("good.txt", "1 2\n2 3\n3 1\n", 0);
    rc = tg_test_cli(&text, "import %s --from edgelist %s --feat-dim 4 --classes 2 --undirected",
                     out, src);
    TG_CHECK(rc == 0);
    if (text && !strstr(text, "3 nodes, 6 edges, 4 features (f32), 2 classes"))
        TG_FAIL("CLI: %s", text);
    free(text);
    tg_rmtree(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-edgelist"));
    TG_RUN(parse_and_options);
    TG_RUN(synthesis);
    TG_RUN(bad_input);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
