/* `import --from npy`: round trips of small hand-written .npy trees (CSC and edge_index graphs,
 * f16/f32/f64 features, int/float/multi-label labels) and one test per kind of bad input. */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"

static char tmp[4096];

/* Writes root/name as a v1 .npy file: dict header padded to 64 bytes, then the data. */
static void npy_write(const char *root, const char *name, const char *descr, const char *shape,
                      const void *data, size_t bytes)
{
    char dict[256], path[4300];
    int dn = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t hlen = (size_t)dn + 1;
    hlen += (64 - (10 + hlen) % 64) % 64;
    size_t len = 10 + hlen + bytes;
    uint8_t *b = malloc(len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    memset(b + 10, ' ', hlen);
    memcpy(b + 10, dict, (size_t)dn);
    b[10 + hlen - 1] = '\n';
    memcpy(b + 10 + hlen, data, bytes);
    snprintf(path, sizeof path, "%s/%s", root, name);
    if (tg_write_file_atomic(path, b, len)) TG_FAIL("%s", tg_errmsg());
    free(b);
}

/* 5 nodes, D = 2; graph 0->1, 2->1, 4->3, 1->0 as CSC or edge_index. */
static const char *make_npy(const char *name, int csc)
{
    static char root[4200];
    snprintf(root, sizeof root, "%s/%s", tmp, name);
    tg_rmtree(root);
    tg_mkdir_p(root);
    double feat[10] = {0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5};
    npy_write(root, "feat.npy", "<f8", "(5, 2)", feat, sizeof feat);
    int64_t labels[5] = {0, 1, 2, 1, -1};
    npy_write(root, "labels.npy", "<i8", "(5,)", labels, sizeof labels);
    if (csc) {
        int64_t indptr[6] = {0, 1, 3, 3, 4, 4};
        int32_t indices[4] = {1, 2, 0, 4};
        npy_write(root, "indptr.npy", "<i8", "(6,)", indptr, sizeof indptr);
        npy_write(root, "indices.npy", "<i4", "(4,)", indices, sizeof indices);
    } else {
        int64_t ei[8] = {0, 2, 4, 1, /* dst */ 1, 1, 3, 0};
        npy_write(root, "edge_index.npy", "<i8", "(2, 4)", ei, sizeof ei);
    }
    int64_t tr[2] = {0, 1}, va[1] = {2}, te[1] = {3};
    npy_write(root, "train_idx.npy", "<i8", "(2,)", tr, sizeof tr);
    npy_write(root, "valid_idx.npy", "<i8", "(1,)", va, sizeof va);
    npy_write(root, "test_idx.npy", "<i8", "(1,)", te, sizeof te);
    return root;
}

static int import_npy(const char *out, const char *src, tg_feat_dtype_t fd)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_NPY;
    o.src = src;
    o.feat_dtype = fd;
    o.mem_bytes = 16u << 20;
    return tg_import(out, &o);
}

static void check_graph(const char *out, tg_feat_dtype_t fd)
{
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (!ds) return;
    const tg_meta_t *m = &ds->meta;
    TG_CHECK_EQ_U64(m->num_nodes, 5);
    TG_CHECK_EQ_U64(m->num_edges, 4);
    TG_CHECK_EQ_U64(m->feat_dim, 2);
    TG_CHECK_EQ_U64(m->num_classes, 3);
    TG_CHECK(m->feat_dtype == fd);
    TG_CHECK(m->num_train == 2 && m->num_valid == 1 && m->num_test == 1);
    uint64_t *ip, *ix;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    const uint64_t wp[6] = {0, 1, 3, 3, 4, 4}, wi[4] = {1, 0, 2, 4};
    TG_CHECK(!memcmp(ip, wp, sizeof wp));
    TG_CHECK(!memcmp(ix, wi, sizeof wi));
    free(ip);
    free(ix);
    float f[10];
    TG_CHECK_OK(tg_dataset_read_features(ds, 0, 5, f));
    for (int i = 0; i < 10; i++)
        TG_CHECK(f[i] == 0.5f * (float)i);
    int32_t *lab;
    TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
    TG_CHECK(lab[0] == 0 && lab[1] == 1 && lab[2] == 2 && lab[3] == 1 && lab[4] == -1);
    free(lab);
    tg_dataset_close(ds);
}

TG_TEST(round_trip)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/out", tmp);
    for (int csc = 0; csc < 2; csc++)
        for (int f16 = 0; f16 < 2; f16++) {
            const char *src = make_npy("rt", csc);
            tg_rmtree(out);
            TG_CHECK_OK(import_npy(out, src, f16 ? TG_F16 : TG_F32));
            TG_CHECK_OK(tg_dataset_verify(out));
            check_graph(out, f16 ? TG_F16 : TG_F32);
        }
    tg_rmtree(out);
}

/* --undirected and --dedup give the same graph from edge_index.npy (packed keys written into
 * the sort's buffer) as from the CSC input (edges one by one). */
TG_TEST(undirected_and_dedup)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/out-und", tmp);
    static const uint64_t wp[2][6] = {{0, 2, 5, 6, 7, 8}, {0, 1, 3, 4, 5, 6}};
    static const uint64_t wi[2][8] = {{1, 1, 0, 0, 2, 1, 4, 3}, {1, 0, 2, 1, 4, 3}};
    for (int csc = 0; csc < 2; csc++)
        for (int dedup = 0; dedup < 2; dedup++) {
            const char *src = make_npy("und", csc);
            tg_import_opts_t o;
            tg_import_opts_default(&o);
            o.kind = TG_IMPORT_NPY;
            o.src = src;
            o.mem_bytes = 16u << 20;
            o.undirected = 1;
            o.dedup = dedup;
            tg_rmtree(out);
            TG_CHECK_OK(tg_import(out, &o));
            tg_dataset_t *ds;
            TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
            if (!ds) continue;
            TG_CHECK_EQ_U64(ds->meta.num_edges, dedup ? 6 : 8);
            uint64_t *ip, *ix;
            TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
            TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
            TG_CHECK(!memcmp(ip, wp[dedup], sizeof wp[dedup]));
            TG_CHECK(!memcmp(ix, wi[dedup], ds->meta.num_edges * 8));
            free(ip);
            free(ix);
            tg_dataset_close(ds);
        }
    tg_rmtree(out);
}

TG_TEST(dtypes_and_multi_label)
{
    char out[4300];
    snprintf(out, sizeof out, "%s/out2", tmp);
    const char *src = make_npy("dt", 1);
    /* f16 and f32 features, float labels with NaN, u4 / i4 ids */
    uint16_t h[10];
    for (int i = 0; i < 10; i++)
        h[i] = tg_f32_to_f16(0.5f * (float)i);
    npy_write(src, "feat.npy", "<f2", "(5, 2)", h, sizeof h);
    float lf[5] = {0, 1, 2, 1, NAN};
    npy_write(src, "labels.npy", "<f4", "(5,)", lf, sizeof lf);
    uint32_t tr[2] = {0, 1};
    npy_write(src, "train_idx.npy", "<u4", "(2,)", tr, sizeof tr);
    tg_rmtree(out);
    TG_CHECK_OK(import_npy(out, src, TG_F32));
    check_graph(out, TG_F32);

    float f32[10];
    for (int i = 0; i < 10; i++)
        f32[i] = 0.5f * (float)i;
    npy_write(src, "feat.npy", "<f4", "(5, 2)", f32, sizeof f32);
    uint8_t ml[15] = {1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 1};
    npy_write(src, "labels.npy", "|b1", "(5, 3)", ml, sizeof ml);
    tg_rmtree(out);
    TG_CHECK_OK(import_npy(out, src, TG_F32));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_SIZES));
    if (ds) {
        TG_CHECK(ds->meta.multi_label && ds->meta.num_classes == 3);
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        for (int i = 0; i < 15; i++)
            TG_CHECK(lab[i] == ml[i]);
        free(lab);
        tg_dataset_close(ds);
    }
    tg_rmtree(out);
}

/* Replaces one array of a good tree (or removes it when data is NULL) and expects an error. */
static void expect_fail(int csc, const char *name, const char *descr, const char *shape,
                        const void *data, size_t bytes, const char *needle)
{
    const char *src = make_npy("bad", csc);
    char path[4300], out[4300];
    if (data) {
        npy_write(src, name, descr, shape, data, bytes);
    } else {
        snprintf(path, sizeof path, "%s/%s", src, name);
        unlink(path);
    }
    snprintf(out, sizeof out, "%s/bad-out", tmp);
    tg_rmtree(out);
    TG_CHECK_ERR(import_npy(out, src, TG_F32), needle);
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
    if (name && !strstr(tg_errmsg(), name) && strcmp(name, "indptr.npy"))
        TG_FAIL("message '%s' does not name %s", tg_errmsg(), name);
    tg_test_check_no_output(out);
}

TG_TEST(bad_input)
{
    int64_t i8[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    float f4[12] = {0};
    expect_fail(1, "feat.npy", NULL, NULL, NULL, 0, "feat.npy: missing");
    expect_fail(1, "test_idx.npy", NULL, NULL, NULL, 0, "test_idx.npy: missing");
    expect_fail(1, "indices.npy", NULL, NULL, NULL, 0, "indices.npy: missing");
    expect_fail(1, "indptr.npy", NULL, NULL, NULL, 0,
                "missing the graph: indptr.npy + indices.npy or edge_index.npy");
    expect_fail(1, "feat.npy", "<i8", "(5, 2)", i8, 80,
                "feat.npy: dtype '<i8' cannot hold features (expected one of: <f2 <f4 <f8)");
    expect_fail(1, "feat.npy", "<f4", "(10,)", f4, 40,
                "feat.npy: expected shape (N, D), got (10,)");
    expect_fail(1, "labels.npy", "<f4", "(4,)", f4, 16, "labels.npy has 4 rows but");
    expect_fail(1, "labels.npy", "<i8", "(5,)", (int64_t[]){0, 1, 2, 1, -2}, 40,
                "labels.npy: offset 160: label -2, expected a class id");
    expect_fail(1, "labels.npy", "<i4", "(5, 2)", (int32_t[]){0, 1, 0, 2, 0, 0, 0, 0, 1, 1}, 40,
                "label 2, expected 0 or 1");
    expect_fail(1, "indices.npy", "<f4", "(4,)", f4, 16,
                "indices.npy: dtype '<f4' cannot hold node ids");
    expect_fail(1, "indices.npy", "<i4", "(4,)", (int32_t[]){1, 2, 0, 5}, 16,
                "indices.npy: offset 140 (element 3): node id 5 out of range [0, 5)");
    expect_fail(1, "indptr.npy", "<i8", "(5,)", i8, 40, "indptr.npy has 5 entries but");
    expect_fail(1, "indptr.npy", "<i8", "(6,)", (int64_t[]){0, 2, 1, 3, 4, 4}, 48,
                "indptr.npy: offset 144: indptr[2] = 1, expected a value in [2, 4]");
    expect_fail(1, "indptr.npy", "<i8", "(6,)", (int64_t[]){0, 1, 2, 3, 3, 3}, 48,
                "indptr.npy: indptr[N] = 3 but");
    expect_fail(0, "edge_index.npy", "<i8", "(4, 2)", i8, 64,
                "edge_index.npy: expected shape (2, E), got (4, 2) (transpose it");
    expect_fail(0, "edge_index.npy", "<i8", "(2, 3)", (int64_t[]){0, 1, 7, 1, 2, 3}, 48,
                "edge_index.npy: offset 144 (element 2): node id 7 out of range [0, 5)");
    expect_fail(1, "valid_idx.npy", "<i8", "(1,)", (int64_t[]){0}, 8,
                "valid_idx.npy: offset 128: node 0 is already listed in");
    expect_fail(1, "valid_idx.npy", "<i8", "(1, 1)", (int64_t[]){2}, 8,
                "valid_idx.npy: expected shape (k,), got (1, 1)");

    /* truncated file: data shorter than the header says */
    const char *src = make_npy("bad", 1);
    char path[4300], out[4300];
    snprintf(path, sizeof path, "%s/feat.npy", src);
    TG_CHECK(truncate(path, 128 + 50) == 0);
    snprintf(out, sizeof out, "%s/bad-out", tmp);
    TG_CHECK_ERR(import_npy(out, src, TG_F32),
                 "feat.npy: truncated: shape and dtype <f8 need 80 data bytes from offset 128, "
                 "but the file ends at offset 178");
    tg_test_check_no_output(out);

    /* f16 storage: a finite value beyond the f16 range is an error, not a silent inf */
    src = make_npy("bad", 1);
    float big[10] = {0, 1, 1e5f, 2, 3, 4, 5, 6, 7, 8};
    npy_write(src, "feat.npy", "<f4", "(5, 2)", big, sizeof big);
    TG_CHECK_ERR(import_npy(out, src, TG_F16),
                 "feat.npy: row 1: feature 0: 100000 does not fit in f16");
    tg_test_check_no_output(out);
    TG_CHECK_OK(import_npy(out, src, TG_F32));
    tg_rmtree(out);

    /* The features are copied on a thread of their own beside the edges: an error there is
     * reported as it would be alone, and when both fail, the edges' error is the one. */
    src = make_npy("bad", 1);
    float nan_row[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    nan_row[7] = NAN;
    npy_write(src, "feat.npy", "<f4", "(5, 2)", nan_row, sizeof nan_row);
    TG_CHECK_ERR(import_npy(out, src, TG_F32),
                 "feat.npy: offset 156: feature [3, 1] is not finite");
    tg_test_check_no_output(out);
    npy_write(src, "indices.npy", "<i4", "(4,)", (int32_t[]){1, 2, 0, 5}, 16);
    TG_CHECK_ERR(import_npy(out, src, TG_F32),
                 "indices.npy: offset 140 (element 3): node id 5 out of range [0, 5)");
    tg_test_check_no_output(out);

    /* both graph forms present is ambiguous */
    src = make_npy("bad", 1);
    npy_write(src, "edge_index.npy", "<i8", "(2, 1)", i8, 16);
    TG_CHECK_ERR(import_npy(out, src, TG_F32), "both edge_index.npy and indptr.npy exist");
    tg_test_check_no_output(out);

    /* and through the CLI: non-zero exit, message names the file */
    src = make_npy("bad", 0);
    npy_write(src, "labels.npy", ">i8", "(5,)", i8, 40);
    char *text = NULL;
    int rc = tg_test_cli(&text, "import %s --from npy %s", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "labels.npy: dtype '>i8' is big-endian")) TG_FAIL("CLI: %s", text);
    free(text);
    tg_test_check_no_output(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-npy"));
    TG_RUN(round_trip);
    TG_RUN(undirected_and_dedup);
    TG_RUN(dtypes_and_multi_label);
    TG_RUN(bad_input);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
