/* The partitioned dataset (tiergnn/partition.h): the permutation is a bijection that keeps every
 * part contiguous and, inside a part, the old order; the rewritten features and adjacency are the
 * original re-labelled (every row and every edge accounted for, lists in their order); a second
 * build keeps what is valid; a changed dataset rebuilds; a failing rewrite leaves nothing that a
 * later open trusts; the CLI prints the cut and refuses bad flags. */
#include <fcntl.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"
#include "tiergnn/partition.h"

static char tmp[4096], dsdir[4200];

/* call fails with code, and its message contains needle */
#define CHECK_FAIL(call, code, needle)                                                             \
    do {                                                                                           \
        tg_err_clear();                                                                            \
        int rc_ = (call);                                                                          \
        if (rc_ != (code))                                                                         \
            TG_FAIL("%s returned %d, expected %d (%s)", #call, rc_, (code), tg_errmsg());          \
        else if (!strstr(tg_errmsg(), needle))                                                     \
            TG_FAIL("%s: message '%s' lacks '%s'", #call, tg_errmsg(), needle);                    \
    } while (0)

static tg_dataset_t *open_ds(void)
{
    tg_dataset_t *ds = NULL;
    if (tg_dataset_open(&ds, dsdir, TG_OPEN_CHECK_SIZES) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", dsdir, tg_errmsg());
        exit(1);
    }
    return ds;
}

static void opts(tg_part_build_opts_t *o, uint32_t parts, tg_part_method_t m, uint64_t window)
{
    memset(o, 0, sizeof *o);
    tg_part_assign_opts_default(&o->assign);
    o->assign.parts = parts;
    o->assign.method = m;
    o->window_bytes = window;
}

static void *read_file(const char *path, size_t *len)
{
    char *b = tg_test_read_all(path, len);
    if (!b) TG_FAIL("cannot read %s", path);
    return b;
}

/* Everything the build promises, checked against the original files. */
static void check_rewrite(tg_dataset_t *ds, const char *params)
{
    tg_part_t *p = NULL;
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    if (!p) {
        TG_FAIL("open: %s", tg_errmsg());
        return;
    }
    uint64_t N = ds->meta.num_nodes, E = ds->meta.num_edges;
    size_t row = ds->meta.feat_dim * tg_feat_dtype_size(ds->meta.feat_dtype);
    size_t esz = tg_index_dtype_size(ds->meta.index_dtype);
    uint64_t *o2n = malloc(N * 8), *seen = calloc(N, 8);
    TG_CHECK(tg_part_old_ids(p, 0, N, o2n) == 0);
    /* a bijection, contiguous parts, old order inside each part */
    for (uint64_t n = 0; n < N; n++) {
        if (o2n[n] >= N || seen[o2n[n]]++)
            TG_FAIL("old_of_new[%llu] = %llu", (unsigned long long)n, (unsigned long long)o2n[n]);
        uint32_t k = tg_part_of(p, n);
        if (n < p->pp[k] || n >= p->pp[k + 1])
            TG_FAIL("part_of(%llu) = %u", (unsigned long long)n, k);
        if (n > p->pp[k] && o2n[n] <= o2n[n - 1])
            TG_FAIL("part %u not in old order at %llu", k, (unsigned long long)n);
    }
    /* new_of_old is old_of_new's inverse */
    uint64_t *n2o = malloc(N * p->id_bytes);
    TG_CHECK(tg_derived_read(p->map, n2o, N * p->id_bytes, p->new_of_old_off) == 0);
    for (uint64_t n = 0; n < N; n++) {
        uint64_t v = o2n[n];
        uint64_t back = p->id_bytes == 4 ? ((uint32_t *)n2o)[v] : n2o[v];
        if (back != n)
            TG_FAIL("new_of_old[%llu] = %llu, expected %llu", (unsigned long long)v,
                    (unsigned long long)back, (unsigned long long)n);
    }
    /* features: row n is the old row o2n[n] */
    char path[4300];
    size_t flen, plen, ilen;
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    char *feat = read_file(path, &flen);
    char *nf = malloc(N * row);
    TG_CHECK(tg_derived_read(p->feat, nf, N * row, 0) == 0);
    for (uint64_t n = 0; n < N; n++)
        if (memcmp(nf + n * row, feat + o2n[n] * row, row))
            TG_FAIL("partfeat row %llu differs from features row %llu", (unsigned long long)n,
                    (unsigned long long)o2n[n]);
    /* adjacency: list n is old list o2n[n] with every neighbour u as new_of_old[u] */
    tg_dataset_path(ds, TG_FILE_INDPTR, path, sizeof path);
    uint64_t *ip = read_file(path, &plen);
    tg_dataset_path(ds, TG_FILE_INDICES, path, sizeof path);
    char *ix = read_file(path, &ilen);
    uint64_t *nip = malloc((N + 1) * 8);
    char *nix = malloc(E * esz + 1);
    TG_CHECK(tg_derived_read(p->adj, nip, (N + 1) * 8, 0) == 0);
    TG_CHECK(tg_derived_read(p->adj, nix, E * esz, p->indices_off) == 0);
    TG_CHECK_EQ_U64(nip[0], 0);
    TG_CHECK_EQ_U64(nip[N], E);
    uint64_t checked = 0;
    for (uint64_t n = 0; n < N && !tg_test_failures; n++) {
        uint64_t v = o2n[n], deg = ip[v + 1] - ip[v];
        if (nip[n + 1] - nip[n] != deg) TG_FAIL("degree of new %llu", (unsigned long long)n);
        for (uint64_t j = 0; j < deg; j++) {
            uint64_t e = ip[v] + j, u = esz == 4 ? ((uint32_t *)ix)[e] : ((uint64_t *)ix)[e];
            uint64_t ne = nip[n] + j;
            uint64_t nu = esz == 4 ? ((uint32_t *)nix)[ne] : ((uint64_t *)nix)[ne];
            uint64_t want = p->id_bytes == 4 ? ((uint32_t *)n2o)[u] : n2o[u];
            if (nu != want)
                TG_FAIL("edge %llu of new %llu", (unsigned long long)j, (unsigned long long)n);
            checked++;
        }
    }
    TG_CHECK_EQ_U64(checked, E);
    free(o2n), free(seen), free(n2o), free(feat), free(nf), free(ip), free(ix), free(nip);
    free(nix);
    tg_part_close(p);
}

TG_TEST(rewrite_is_relabelled_original)
{
    tg_dataset_t *ds = open_ds();
    tg_part_build_opts_t o;
    char params[256];
    /* windows of 256 bytes: the rewrite takes many windows, and lists longer than 64 entries
     * (the generator's hubs) are split across them */
    const tg_part_method_t methods[] = {TG_PART_STREAM,
#ifdef TG_HAVE_METIS
                                        TG_PART_METIS
#endif
    };
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        opts(&o, 7, methods[i], 256);
        tg_part_build_stats_t st;
        TG_CHECK(tg_part_build(ds, &o, &st) == 0);
        TG_CHECK(st.built_map && st.built_feat && st.built_adj);
        TG_CHECK(st.sum.method == methods[i]);
        TG_CHECK_EQ_U64(st.sum.num_nodes, ds->meta.num_nodes);
        TG_CHECK(st.sum.cut_edges < st.sum.edges);
        TG_CHECK(tg_part_params(&o.assign, methods[i], params, sizeof params) == 0);
        check_rewrite(ds, params);
        /* again: every file kept */
        TG_CHECK(tg_part_build(ds, &o, &st) == 0);
        TG_CHECK(!st.built_map && !st.built_feat && !st.built_adj);
        TG_CHECK_EQ_U64(st.sum.parts, 7);
    }
    /* one part: the identity */
    opts(&o, 1, TG_PART_STREAM, 0);
    TG_CHECK(tg_part_build(ds, &o, NULL) == 0);
    TG_CHECK(tg_part_params(&o.assign, TG_PART_STREAM, params, sizeof params) == 0);
    check_rewrite(ds, params);
    tg_dataset_close(ds);
}

TG_TEST(errors_leave_nothing_trusted)
{
    tg_dataset_t *ds = open_ds();
    tg_part_build_opts_t o;
    opts(&o, 0, TG_PART_STREAM, 0);
    CHECK_FAIL(tg_part_build(ds, &o, NULL), -EINVAL, "--parts");
    opts(&o, (uint32_t)ds->meta.num_nodes + 1, TG_PART_STREAM, 0);
    CHECK_FAIL(tg_part_build(ds, &o, NULL), -EINVAL, "--parts");
    opts(&o, 4, TG_PART_STREAM, 0);
    o.mem_bytes = 4096;
    CHECK_FAIL(tg_part_build(ds, &o, NULL), -ENOMEM, "--mem");
    tg_part_t *p = NULL;
    CHECK_FAIL(tg_part_open(&p, ds, "parts=4,method=stream,seed=9,imbalance=0.03,passes=4"),
               -ENOENT, "part-");
    tg_dataset_close(ds);
}

/* A corrupt neighbour id makes the adjacency rewrite fail after the map and the features were
 * kept (meta.txt, which the derived files check, is left as it was): no partadj exists (its temp
 * file is gone), so the set does not open; repaired, the next build keeps the map and the
 * features and writes the adjacency only. */
TG_TEST(failed_rewrite_then_repair)
{
    char copy[4300], path[4400], cmd[20000];
    snprintf(copy, sizeof copy, "%s/bad", tmp);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s' && rm -rf '%s/derived'", copy, dsdir,
             copy, copy);
    TG_CHECK(system(cmd) == 0);
    tg_dataset_t *ds = NULL;
    TG_CHECK(tg_dataset_open(&ds, copy, 0) == 0);
    tg_part_build_opts_t o;
    opts(&o, 3, TG_PART_STREAM, 4096);
    char params[256];
    TG_CHECK(tg_part_params(&o.assign, TG_PART_STREAM, params, sizeof params) == 0);
    TG_CHECK(tg_part_build(ds, &o, NULL) == 0);
    char adj[4500];
    TG_CHECK(tg_derived_path(ds, NULL, "partadj", params, adj, sizeof adj) == 0);
    TG_CHECK(unlink(adj) == 0);
    snprintf(path, sizeof path, "%s/indices.bin", copy);
    int fd = open(path, O_RDWR);
    TG_CHECK(fd >= 0);
    uint32_t good = 0, bad = 0xfffffff0u;
    TG_CHECK(pread(fd, &good, 4, 40) == 4);
    TG_CHECK(pwrite(fd, &bad, 4, 40) == 4);
    CHECK_FAIL(tg_part_build(ds, &o, NULL), -EINVAL, "indices.bin: offset 40");
    tg_part_t *p = NULL;
    CHECK_FAIL(tg_part_open(&p, ds, params), -ENOENT, "partadj");
    snprintf(path, sizeof path, "%s/derived", copy);
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '^tmp-'", path);
    TG_CHECK(system(cmd) != 0);
    /* repaired */
    TG_CHECK(pwrite(fd, &good, 4, 40) == 4);
    close(fd);
    tg_part_build_stats_t st;
    TG_CHECK(tg_part_build(ds, &o, &st) == 0);
    TG_CHECK(!st.built_map && !st.built_feat && st.built_adj);
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    tg_part_close(p);
    tg_dataset_close(ds);
}

/* Writes len bytes at payload offset off of a derived file; with forge, rewrites the payload's
 * CRC-32 and the header's, so that only the checks of the content are left to refuse it. */
static void poke(const char *path, uint64_t off, const void *b, size_t len, int forge)
{
    size_t n = 0;
    unsigned char *f = read_file(path, &n);
    if (!f || off + len > n - TG_DERIVED_PAYLOAD_OFFSET) {
        TG_FAIL("%s: cannot poke at %llu", path, (unsigned long long)off);
        free(f);
        return;
    }
    memcpy(f + TG_DERIVED_PAYLOAD_OFFSET + off, b, len);
    if (forge) {
        uint32_t c = tg_crc32(0, f + TG_DERIVED_PAYLOAD_OFFSET, n - TG_DERIVED_PAYLOAD_OFFSET);
        memcpy(f + 24, &c, 4);
        c = tg_crc32(0, f, TG_DERIVED_PAYLOAD_OFFSET - 4);
        memcpy(f + TG_DERIVED_PAYLOAD_OFFSET - 4, &c, 4);
    }
    int fd = open(path, O_WRONLY | O_TRUNC);
    TG_CHECK(fd >= 0 && write(fd, f, n) == (ssize_t)n);
    if (fd >= 0) close(fd);
    free(f);
}

/* A damaged map (part-*) is refused by tg_part_open, naming the entry, and rebuilt by
 * tg_part_build, forged CRC or not: an old or new id past the nodes (tg_part_old_ids handed it to
 * hier, which indexed the labels with it; tg_part_build's read_map wrote past its new indptr with
 * it: fuzz_part), two ids swapped (a bijection, not the partition's), other record bytes (the
 * payload CRC). */
TG_TEST(damaged_map_refused_and_rebuilt)
{
    tg_dataset_t *ds = open_ds();
    tg_part_build_opts_t o;
    opts(&o, 3, TG_PART_STREAM, 4096);
    char params[256], map[4500];
    TG_CHECK(tg_part_params(&o.assign, TG_PART_STREAM, params, sizeof params) == 0);
    TG_CHECK(tg_part_build(ds, &o, NULL) == 0);
    TG_CHECK(tg_derived_path(ds, NULL, "part", params, map, sizeof map) == 0);
    uint64_t N = ds->meta.num_nodes, o2n = 64 + 4 * 8, n2o = o2n + N * 4;
    uint32_t big = (uint32_t)N, huge = 1u << 30, x[2];
    struct {
        uint64_t off;
        const void *b;
        size_t len;
        int forge, drop_adj; /* drop_adj: partadj removed, the build rewrites it from the map */
        const char *needle;
    } cases[] = {
        {o2n + 5 * 4, &big, 4, 0, 0, "old_of_new[5]"},
        {o2n + 5 * 4, &big, 4, 1, 0, "old_of_new[5]"},
        {n2o + 7 * 4, &huge, 4, 1, 1, "new_of_old[7]"},
        {o2n, x, 8, 1, 0, "old_of_new[1]"},     /* the first two ids of part 0 swapped */
        {16 + 2 * 8, &big, 4, 0, 0, "bad CRC"}, /* the record's edge cut */
    };
    char adj[4500];
    TG_CHECK(tg_derived_path(ds, NULL, "partadj", params, adj, sizeof adj) == 0);
    tg_part_t *p = NULL;
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    uint64_t first[2];
    TG_CHECK(p && tg_part_old_ids(p, 0, 2, first) == 0);
    x[0] = (uint32_t)first[1], x[1] = (uint32_t)first[0];
    tg_part_close(p);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        poke(map, cases[i].off, cases[i].b, cases[i].len, cases[i].forge);
        p = NULL;
        CHECK_FAIL(tg_part_open(&p, ds, params), -ESTALE, cases[i].needle);
        tg_part_close(p);
        if (cases[i].drop_adj) TG_CHECK(unlink(adj) == 0);
        tg_part_build_stats_t st;
        TG_CHECK(tg_part_build(ds, &o, &st) == 0);
        TG_CHECK(st.built_map && !st.built_feat && st.built_adj == cases[i].drop_adj);
        check_rewrite(ds, params);
    }
    tg_dataset_close(ds);
}

/* partadj's entries are checked as they are read: an indptr entry past the edges or below the
 * one before it, a list entry past the nodes (fuzz_part). */
TG_TEST(partadj_reads_checked)
{
    tg_dataset_t *ds = open_ds();
    tg_part_build_opts_t o;
    opts(&o, 3, TG_PART_STREAM, 4096);
    char params[256], adj[4500];
    TG_CHECK(tg_part_params(&o.assign, TG_PART_STREAM, params, sizeof params) == 0);
    TG_CHECK(tg_part_build(ds, &o, NULL) == 0);
    TG_CHECK(tg_derived_path(ds, NULL, "partadj", params, adj, sizeof adj) == 0);
    uint64_t N = ds->meta.num_nodes, E = ds->meta.num_edges, past = E + 1, zero = 0;
    uint64_t *ip = malloc((N + 1) * 8), base = (N + 1) * 8 / 4096 * 4096 + 4096;
    uint32_t big = (uint32_t)N, raw[4];
    tg_part_t *p = NULL;
    TG_CHECK(tg_part_open(&p, ds, params) == 0 && tg_part_indptr(p, 0, N + 1, ip) == 0);
    tg_part_close(p);
    poke(adj, 10 * 8, &past, 8, 0);
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    CHECK_FAIL(tg_part_indptr(p, 0, N + 1, ip), -EINVAL, "indptr[10]");
    CHECK_FAIL(tg_part_indptr(p, 10, 1, ip), -EINVAL, "at most the edges");
    tg_part_close(p);
    poke(adj, 10 * 8, &zero, 8, 1);
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    CHECK_FAIL(tg_part_indptr(p, 5, 10, ip), -EINVAL, "at least the entry before it");
    tg_part_close(p);
    poke(adj, N * 8, &zero, 8, 1);
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    CHECK_FAIL(tg_part_indptr(p, N, 1, ip), -EINVAL, "the edges");
    tg_part_close(p);
    poke(adj, base + 3 * 4, &big, 4, 1);
    TG_CHECK(tg_part_open(&p, ds, params) == 0);
    CHECK_FAIL(tg_part_indices(p, 1, 4, raw), -EINVAL, "list entry 3");
    CHECK_FAIL(tg_part_indices(p, E - 1, 2, raw), -EINVAL, "past the");
    TG_CHECK(tg_part_indices(p, 4, 4, raw) == 0);
    tg_part_close(p);
    TG_CHECK(unlink(adj) == 0); /* the next build writes it again */
    free(ip);
    tg_dataset_close(ds);
}

TG_TEST(cli)
{
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "partition '%s' --parts 5 --method stream", dsdir) == 0);
    if (!out || !strstr(out, "edge cut") || !strstr(out, "balance")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition '%s' --parts 5 --method stream", dsdir) == 0);
    if (!out || !strstr(out, "up to date")) TG_FAIL("%s", out);
    free(out);
    /* --assignment: each original node's part, matching the map */
    char apath[4300];
    snprintf(apath, sizeof apath, "%s/assign.bin", tmp);
    TG_CHECK(tg_test_cli(&out, "partition '%s' --parts 5 --method stream --assignment '%s'", dsdir,
                         apath) == 0);
    free(out);
    size_t alen = 0;
    uint32_t *asg = (uint32_t *)tg_test_read_all(apath, &alen);
    tg_dataset_t *ds = open_ds();
    TG_CHECK_EQ_U64(alen, ds->meta.num_nodes * 4);
    tg_part_t *p = NULL;
    TG_CHECK(tg_part_open(&p, ds, "parts=5,method=stream,seed=1,imbalance=0.03,passes=4") == 0);
    uint64_t *o2n = malloc(ds->meta.num_nodes * 8);
    if (p && asg && alen == ds->meta.num_nodes * 4 &&
        tg_part_old_ids(p, 0, ds->meta.num_nodes, o2n) == 0)
        for (uint64_t n = 0; n < ds->meta.num_nodes; n++)
            if (asg[o2n[n]] != tg_part_of(p, n)) {
                TG_FAIL("assignment of node %llu", (unsigned long long)o2n[n]);
                break;
            }
    free(o2n);
    free(asg);
    tg_part_close(p);
    tg_dataset_close(ds);
    TG_CHECK(tg_test_cli(&out,
                         "partition '%s' --parts 5 --method stream --assignment /no/such/dir/a.bin",
                         dsdir) != 0);
    if (!out || !strstr(out, "/no/such/dir")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition '%s'", dsdir) != 0);
    if (!out || !strstr(out, "--parts")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition '%s' --parts 5 --method magic", dsdir) != 0);
    if (!out || !strstr(out, "magic")) TG_FAIL("%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition '%s' --parts 5 --passes 0", dsdir) != 0);
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition --help") == 0);
    if (!out || !strstr(out, "--method")) TG_FAIL("%s", out);
    free(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_QUIET);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("part_build"));
    snprintf(dsdir, sizeof dsdir, "%s/ds", tmp);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 3000;
    o.feat_dim = 6;
    o.classes = 5;
    o.mem_bytes = tg_gen_min_mem(&o);
    o.threads = 1;
    if (tg_generate(dsdir, &o) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", dsdir, tg_errmsg());
        return 1;
    }
    TG_RUN(rewrite_is_relabelled_original);
    TG_RUN(errors_leave_nothing_trusted);
    TG_RUN(failed_rewrite_then_repair);
    TG_RUN(damaged_map_refused_and_rebuilt);
    TG_RUN(partadj_reads_checked);
    TG_RUN(cli);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
