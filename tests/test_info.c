/* tiergnn info: the numbers on a hand-made graph whose statistics are known, through the
 * library and the CLI, and a generated graph's skew line. */
#include "tg_test.h"
#include "tiergnn/data.h"

static int put(tg_dsw_t *w, tg_file_id_t id, const void *p, size_t len)
{
    tg_filew_t fw;
    int rc = tg_dsw_open_file_buf(w, id, &fw, 4096);
    if (rc) return rc;
    if ((rc = tg_filew_write(&fw, p, len))) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_dsw_close_file(w, id, &fw);
}

/* 6 nodes, in-degrees 2 0 3 1 1 0 (7 edges), 2 features, 3 classes, labels 0 2 -1 1 2 2. */
static int make(const char *dir)
{
    uint64_t ip[] = {0, 2, 2, 5, 6, 7, 7};
    uint32_t ix[] = {1, 3, 0, 1, 4, 2, 0};
    float x[12] = {0};
    int32_t lab[] = {0, 2, -1, 1, 2, 2};
    uint32_t tr[] = {0, 3, 4}, va[] = {1}, te[] = {5};
    tg_dsw_t w;
    int rc = tg_dsw_begin(&w, dir, 1);
    if (rc) return rc;
    w.meta = (tg_meta_t){.num_nodes = 6,
                         .num_edges = 7,
                         .feat_dim = 2,
                         .feat_dtype = TG_F32,
                         .index_dtype = TG_U32,
                         .num_classes = 3,
                         .num_train = 3,
                         .num_valid = 1,
                         .num_test = 1};
    snprintf(w.meta.source, sizeof w.meta.source, "hand made");
    if (!rc) rc = put(&w, TG_FILE_INDPTR, ip, sizeof ip);
    if (!rc) rc = put(&w, TG_FILE_INDICES, ix, sizeof ix);
    if (!rc) rc = put(&w, TG_FILE_FEATURES, x, sizeof x);
    if (!rc) rc = put(&w, TG_FILE_LABELS, lab, sizeof lab);
    if (!rc) rc = put(&w, TG_FILE_TRAIN, tr, sizeof tr);
    if (!rc) rc = put(&w, TG_FILE_VALID, va, sizeof va);
    if (!rc) rc = put(&w, TG_FILE_TEST, te, sizeof te);
    if (!rc) rc = tg_dsw_commit(&w);
    tg_dsw_abort(&w);
    return rc;
}

static void expect(const char *text, const char *needle)
{
    if (!text || !strstr(text, needle)) TG_FAIL("info output lacks '%s':\n%s", needle, text);
}

TG_TEST(known_graph)
{
    const char *base = tg_test_tmpdir("info");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/small", base);
    TG_CHECK_OK(make(dir));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TG_CHECK_OK(tg_dataset_info(dir, f));
    fclose(f);
    /* sorted degrees 0 0 1 1 2 3: median (lower) 1, mean 7/6, p99 rank 4 -> 2 */
    expect(text, "nodes:      6\n");
    expect(text, "edges:      7 (CSC, u32 indices)");
    expect(text, "features:   6 x 2 f32");
    expect(text, "source:     hand made");
    expect(text, "in-degree:  min 0, median 1, mean 1.17, p99 2, max 3");
    expect(text, "2 nodes (33.33%) have no in-neighbours");
    expect(text, "the top 1% of nodes (1) hold 42.9% of the edges");
    expect(text, "histogram:  0: 2 | 1-3: 4");
    expect(text, "labels:     3 classes; per class min 1, max 3 nodes (0 classes empty); 1 "
                 "unlabelled");
    expect(text, "0: 1 | 1: 1 | 2: 3");
    expect(text, "splits:     train 3 (50.0%), valid 1 (16.7%), test 1 (16.7%), in none 1");
    expect(text, "indptr.bin                 56 bytes");
    expect(text, "total");
    free(text);
    /* the CLI prints the same to stdout */
    TG_CHECK_EQ_U64(tg_test_cli(&text, "info %s", dir), 0);
    expect(text, "in-degree:  min 0, median 1, mean 1.17, p99 2, max 3");
    free(text);
    /* bad input: one line, non-zero */
    TG_CHECK(tg_test_cli(&text, "info %s/nothing", base) != 0);
    expect(text, "tiergnn: ");
    expect(text, "nothing");
    free(text);
    TG_CHECK(tg_test_cli(&text, "info") != 0);
    expect(text, "expected one dataset directory");
    free(text);
    tg_rmtree(base);
}

TG_TEST(generated_graph)
{
    const char *base = tg_test_tmpdir("info-gen");
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/g", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 20000;
    o.feat_dim = 4;
    o.classes = 4;
    TG_CHECK_OK(tg_generate(dir, &o));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TG_CHECK_OK(tg_dataset_info(dir, f));
    fclose(f);
    expect(text, "labels:     4 classes; per class min 5000, max 5000 nodes");
    expect(text, "hold");
    expect(text, "splits:     train 12000 (60.0%), valid 4000 (20.0%), test 4000 (20.0%)");
    free(text);
    tg_rmtree(base);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    TG_RUN(known_graph);
    TG_RUN(generated_graph);
    return tg_test_done();
}
