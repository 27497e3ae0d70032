/* `import --from edgelist`: SNAP-style text with comments, tabs, extra columns and sparse ids
 * (renumbered by rank), --undirected / --dedup / --self-loops, the synthesised node data
 * (deterministic, labels follow the communities), and bad input. */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/import-impl.h"
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

/* The options every test here imports with. */
static tg_import_opts_t el_opts(const char *src, int und, int dedup, int loops, uint64_t seed,
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
    return o;
}

static int import_ranges(const char *out, const char *src, int und, int dedup, int loops,
                         uint64_t seed, uint64_t mem, int nranges)
{
    tg_import_opts_t o = el_opts(src, und, dedup, loops, seed, mem);
    return tg_import_edgelist_ranges(out, &o, nranges);
}

static int import_el(const char *out, const char *src, int und, int dedup, int loops, uint64_t seed,
                     uint64_t mem)
{
    tg_import_opts_t o = el_opts(src, und, dedup, loops, seed, mem);
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

/* No file of the import's own (the binary edges of pass 1) may be left in the dataset. */
static void check_only_dataset_files(const char *out)
{
    DIR *d = opendir(out);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        n++;
        if (!strcmp(e->d_name, "meta.txt") || !strcmp(e->d_name, TG_NODE_IDS_FILE)) continue;
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".bin") || !strncmp(e->d_name, "edges-", 6))
            TG_FAIL("%s: unexpected file %s", out, e->d_name);
    }
    if (d) closedir(d);
    TG_CHECK(n == 9); /* meta.txt, the 7 array files and node_ids.npy */
}

/* A plain file parsed in 1..8 ranges on as many threads gives the same dataset, whatever the
 * cuts fall on (comments, blank lines, CRLF, extra columns, a last line without newline). */
TG_TEST(ranges_same_result)
{
    char *text = malloc(1 << 16);
    size_t k = 0;
    for (int i = 0; i < 400; i++) {
        if (i % 37 == 0) k += (size_t)sprintf(text + k, "# comment %d\n", i);
        if (i % 53 == 0) k += (size_t)sprintf(text + k, "\n");
        k += (size_t)sprintf(text + k, i % 7 ? "%d\t%d\n" : "%d %d 0.5\r\n", 3 * (i % 101),
                             3 * ((i * 13 + 5) % 101));
    }
    sprintf(text + k, "7 9"); /* sparse ids, no final newline */
    const char *src = file("ranges.txt", text, 0);
    free(text);
    char ref[4300], out[4300], adj0[8192], adj[8192];
    snprintf(ref, sizeof ref, "%s/ranges-ref", tmp);
    snprintf(out, sizeof out, "%s/ranges-out", tmp);
    tg_rmtree(ref);
    TG_CHECK_OK(import_ranges(ref, src, 0, 0, 0, 3, 16 << 20, 1));
    adjacency(ref, adj0, sizeof adj0);
    check_only_dataset_files(ref);
    tg_meta_t a, b;
    TG_CHECK_OK(tg_meta_read(&a, ref));
    TG_CHECK_EQ_U64(a.num_edges, 401);
    for (int n = 2; n <= 9; n++) {
        tg_rmtree(out);
        TG_CHECK_OK(import_ranges(out, src, 0, 0, 0, 3, 16 << 20, n));
        adjacency(out, adj, sizeof adj);
        if (strcmp(adj, adj0)) TG_FAIL("%d ranges: adjacency differs", n);
        TG_CHECK_OK(tg_meta_read(&b, out));
        for (int i = 0; i < TG_FILE_COUNT; i++)
            if (a.files[i].crc32 != b.files[i].crc32) TG_FAIL("%d ranges: file %d differs", n, i);
        check_only_dataset_files(out);
    }
    tg_rmtree(ref);
    tg_rmtree(out);
}

static void expect_fail_ranges(const char *text, int nranges, const char *needle)
{
    const char *src = file("bad.txt", text, 0);
    char out[4300];
    snprintf(out, sizeof out, "%s/bad-out", tmp);
    tg_err_clear();
    int rc = import_ranges(out, src, 0, 0, 0, 1, 16 << 20, nranges);
    if (rc >= 0)
        TG_FAIL("%d ranges: succeeded, expected '%s'", nranges, needle);
    else if (!strstr(tg_errmsg(), needle))
        TG_FAIL("%d ranges: message '%s' lacks '%s'", nranges, tg_errmsg(), needle);
    tg_test_check_no_output(out);
}

/* Errors in any range name the line of the whole file, and the first error in file order wins
 * even when a later range fails too (or first). */
TG_TEST(ranges_errors)
{
    enum { LINES = 300 };
    char *text = malloc(LINES * 16 + 64);
    char want[256];
    int bad_at[] = {1, 2, 99, 100, 101, 150, 151, 200, 299, 300};
    for (size_t b = 0; b < sizeof bad_at / sizeof bad_at[0]; b++) {
        for (int variant = 0; variant < 4; variant++) {
            size_t k = 0;
            for (int i = 1; i <= LINES; i++) {
                const char *nl = i == LINES ? "" : "\n";
                if (i == bad_at[b] && variant == 0)
                    k += (size_t)sprintf(text + k, "x %d%s", i, nl); /* garbled */
                else if (i == bad_at[b] && variant == 1)
                    k += (size_t)sprintf(text + k, "%d%s", i, nl); /* truncated */
                else if (i == bad_at[b] && variant == 2)
                    k += (size_t)sprintf(text + k, "1 1000000000000%s", nl); /* id map */
                else if (i == bad_at[b] && variant == 3)
                    k += (size_t)sprintf(text + k, "%d -%d%s", i, i, nl);
                else if (variant == 0 && i == LINES - 1 && bad_at[b] < LINES - 1)
                    k += (size_t)sprintf(text + k, "%d y%s", i, nl); /* a later error too */
                else
                    k += (size_t)sprintf(text + k, "%d %d%s", i, i + 1, nl);
            }
            text[k] = 0;
            if (variant == 0)
                snprintf(want, sizeof want, "bad.txt: line %d, field 1: expected an integer",
                         bad_at[b]);
            else if (variant == 1)
                snprintf(want, sizeof want, "bad.txt: line %d: expected two node ids, got 1 field",
                         bad_at[b]);
            else if (variant == 2)
                snprintf(want, sizeof want, "bad.txt: line %d: node id 1000000000000 needs a",
                         bad_at[b]);
            else
                snprintf(want, sizeof want, "bad.txt: line %d: negative node id -%d", bad_at[b],
                         bad_at[b]);
            for (int n = 1; n <= 4; n++)
                expect_fail_ranges(text, n, want);
        }
    }
    free(text);
    for (int n = 1; n <= 3; n++) {
        expect_fail_ranges("", n, "bad.txt: empty file");
        expect_fail_ranges("# nothing\n\n% nothing\n\n", n, "bad.txt: no data rows in 4 lines");
    }
}

/* Damage to the binary files between the passes (a full or failing disk, another process) is
 * an error naming the file, and leaves no output. */
static int damage_kind;
static void damage(const char *dir)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/edges-1.bin", dir);
    if (damage_kind == 0) {
        TG_CHECK(truncate(path, 13) == 0); /* inside the first block */
    } else if (damage_kind == 1) {
        uint32_t hdr[2] = {7, 5}; /* width 5 */
        int fd = open(path, O_WRONLY);
        TG_CHECK(fd >= 0 && pwrite(fd, hdr, 8, 0) == 8);
        close(fd);
    } else if (damage_kind == 2) {
        uint32_t id = 4000000000u; /* larger than any id of the file */
        int fd = open(path, O_WRONLY);
        TG_CHECK(fd >= 0 && pwrite(fd, &id, 4, 8) == 4);
        close(fd);
    } else if (damage_kind == 3) {
        TG_CHECK(unlink(path) == 0);
    } else {
        TG_CHECK(truncate(path, 0) == 0); /* whole blocks gone */
    }
}

TG_TEST(ranges_damaged_temp_files)
{
    char *text = malloc(4096);
    size_t k = 0;
    for (int i = 0; i < 200; i++)
        k += (size_t)sprintf(text + k, "%d %d\n", i, (i * 7 + 3) % 200);
    const char *src = file("dmg.txt", text, 0);
    free(text);
    char out[4300];
    snprintf(out, sizeof out, "%s/dmg-out", tmp);
    static const char *const want[] = {
        "edges-1.bin: truncated temporary file: it ends at offset 13",
        "edges-1.bin: offset 0: corrupt temporary file (block of 7 x 5)",
        "edges-1.bin: offset 0: corrupt temporary file (id 4000000000 > 199)",
        "edges-1.bin: cannot open: No such file or directory",
        "dmg.txt: the temporary files hold 108 edges, not 200", /* range 0 has 108 */
    };
    tg_edgelist_test_between_passes = damage;
    for (damage_kind = 0; damage_kind < 5; damage_kind++) {
        TG_CHECK_ERR(import_ranges(out, src, 0, 0, 0, 1, 16 << 20, 2), want[damage_kind]);
        tg_test_check_no_output(out);
    }
    tg_edgelist_test_between_passes = NULL;
}

/* Text is parsed once, so a pipe works (it was read twice before). */
static void *fifo_writer(void *arg)
{
    int fd = open(arg, O_WRONLY);
    if (fd < 0) return NULL;
    for (int i = 0; i < 5000; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "%d %d\n", 10 * (i % 50), 10 * ((i + 1) % 50));
        if (write(fd, line, (size_t)n) != n) break;
    }
    close(fd);
    return NULL;
}

TG_TEST(from_pipe)
{
    char fifo[4300], out[4300];
    snprintf(fifo, sizeof fifo, "%s/edges.fifo", tmp);
    snprintf(out, sizeof out, "%s/fifo-out", tmp);
    unlink(fifo);
    if (mkfifo(fifo, 0600)) {
        printf("SKIP from_pipe: mkfifo: %s\n", strerror(errno));
        return;
    }
    pthread_t th;
    TG_CHECK(pthread_create(&th, NULL, fifo_writer, fifo) == 0);
    tg_rmtree(out);
    TG_CHECK_OK(import_el(out, fifo, 0, 1, 0, 1, 16 << 20));
    pthread_join(th, NULL);
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, out));
    TG_CHECK_EQ_U64(m.num_nodes, 50);
    TG_CHECK_EQ_U64(m.num_edges, 50);
    tg_rmtree(out);
    unlink(fifo);
}

/* node_ids.npy joins the renumbered dataset back to the file's ids: every input edge a -> b is
 * the edge ids^-1(a) -> ids^-1(b) of the CSC, and NumPy's reader (tg_npy, as np.load) reads it
 * as int64 (N,), ascending. Also written for dense ids, where it is the identity. */
TG_TEST(id_map_joins_back)
{
    static const int64_t edges[][2] = {
        {916427, 12}, {12, 50000000ll}, {77, 916427}, {5, 77}, {50000000ll, 5}};
    char text[512];
    size_t k = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        k += (size_t)snprintf(text + k, sizeof text - k, "%lld\t%lld\n", (long long)edges[i][0],
                              (long long)edges[i][1]);
    const char *src = file("sparse.txt", text, 0);
    char out[4300], ids_path[4400];
    snprintf(out, sizeof out, "%s/idmap", tmp);
    TG_CHECK_OK(import_el(out, src, 0, 0, 0, 1, 64u << 20));
    snprintf(ids_path, sizeof ids_path, "%s/" TG_NODE_IDS_FILE, out);
    tg_npy_t f;
    TG_CHECK_OK(tg_npy_open(&f, ids_path));
    if (f.path == NULL) return;
    TG_CHECK(f.dtype == TG_NPY_I8 && f.ndim == 1 && f.shape[0] == 5);
    int64_t ids[5] = {0};
    TG_CHECK_OK(tg_npy_read_i64(&f, 0, 5, ids));
    tg_npy_close(&f);
    const int64_t want[5] = {5, 12, 77, 916427, 50000000ll};
    TG_CHECK(!memcmp(ids, want, sizeof ids));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (!ds) return;
    uint64_t *ip, *ix;
    TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    TG_CHECK_OK(tg_dataset_load_indices(ds, &ix));
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        uint64_t a = 5, b = 5; /* new ids: positions in ids */
        for (uint64_t j = 0; j < 5; j++) {
            if (ids[j] == edges[i][0]) a = j;
            if (ids[j] == edges[i][1]) b = j;
        }
        int found = 0;
        for (uint64_t e = a < 5 && b < 5 ? ip[b] : 0; a < 5 && b < 5 && e < ip[b + 1]; e++)
            found |= ix[e] == a;
        if (!found)
            TG_FAIL("input edge %lld -> %lld is not the dataset's edge %llu -> %llu",
                    (long long)edges[i][0], (long long)edges[i][1], (unsigned long long)a,
                    (unsigned long long)b);
    }
    free(ip);
    free(ix);
    tg_dataset_close(ds);
    TG_CHECK_OK(tg_dataset_verify(out));

    /* dense ids: the identity */
    tg_rmtree(out);
    src = file("dense.txt", "0 1\n1 2\n2 0\n", 0);
    TG_CHECK_OK(import_el(out, src, 0, 0, 0, 1, 64u << 20));
    TG_CHECK_OK(tg_npy_open(&f, ids_path));
    TG_CHECK_OK(tg_npy_read_i64(&f, 0, 3, ids));
    TG_CHECK(f.shape[0] == 3 && ids[0] == 0 && ids[1] == 1 && ids[2] == 2);
    tg_npy_close(&f);
    tg_rmtree(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-edgelist"));
    TG_RUN(parse_and_options);
    TG_RUN(synthesis);
    TG_RUN(bad_input);
    TG_RUN(ranges_same_result);
    TG_RUN(ranges_errors);
    TG_RUN(ranges_damaged_temp_files);
    TG_RUN(from_pipe);
    TG_RUN(id_map_joins_back);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
