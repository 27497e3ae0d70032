/* A packed file read back on its own (tiergnn/pack.h, "a packed file"; store/packfile.c): a map
 * record written from a layout's locate holds the batch's rows by tier, turns into its row list
 * and names each cache and chunk row's node; every damaged record (counts, bytes, a hot slot, a
 * cache row out of order or range, a chunk past the file, an X row out of range or named twice)
 * is refused naming the map file and the batch; the map file gives its records back, refuses one
 * longer than planned and more records than planned, and leaves no file behind; the reader puts
 * every row of a batch into X bit for bit - the hot rows from RAM through their tier (the file's
 * hot range holds zeros), the rest from the file, with and without merging and normalisation -
 * counts the two tiers, names the packed file and the offset on a read error, and under
 * --verify-reads names the node of a changed row; a packed file written from a real layout
 * reads back every batch's rows, and so does a packed set written in one call (tg_pack_set_*);
 * the hot rows read again from the feature file land at their places; the budget gets every
 * byte back. */
#include "test_feat_common.h"

#include <math.h>

#include "tiergnn/io.h"
#include "tiergnn/layout.h"
#include "tiergnn/pack.h"
#include "tiergnn/rowcrc.h"
#include "tiergnn/store.h"

static const char *dir;

#define D 16u
#define H 8u  /* hot rows: [0, 8) */
#define C 20u /* cache rows: [8, 28) */
#define T 60u /* rows of the file; chunks from 28 */
#define NB 12u

/* A batch of 12 rows: hot slots 1, 4, 7; cache rows 8, 11, 17, 27; the chunk rows 38 .. 42; its
 * X rows a permutation. */
static uint32_t hot_pos[3] = {5, 0, 11}, hot_slot[3] = {1, 4, 7};
static uint32_t cache_pos[4] = {2, 9, 1, 7}, chunk_pos[5] = {3, 4, 6, 8, 10};
static uint64_t cache_off[4] = {0, 3 * D * 4, 9 * D * 4, 19 * D * 4};
static const uint64_t want_rows[NB] = {4, 17, 8, 38, 39, 1, 40, 27, 41, 11, 42, 7};

static tg_layout_loc_t make_loc(void)
{
    return (tg_layout_loc_t){.n_hot = 3,
                             .n_cache = 4,
                             .n_chunk = 5,
                             .hot_pos = hot_pos,
                             .hot_slot = hot_slot,
                             .cache_pos = cache_pos,
                             .cache_off = cache_off,
                             .chunk_pos = chunk_pos,
                             .chunk_off = 10 * D * 4};
}

/* The record of the batch, in rec (8-byte aligned). */
static uint64_t make_rec(uint64_t *rec)
{
    tg_layout_loc_t loc = make_loc();
    return tg_pack_rec_fill(rec, &loc, H, H + C, D * 4);
}

TG_TEST(records)
{
    uint64_t rec[64], rows[NB + 1];
    uint64_t nb = make_rec(rec);
    TG_CHECK_EQ_U64(nb, tg_pack_rec_bytes((const tg_pack_rec_t *)rec));
    TG_CHECK(nb <= tg_pack_rec_bytes_max(NB) && nb % 8 == 0);
    tg_pack_rec_view_t v = tg_pack_rec_view(rec);
    TG_CHECK(v.cache_row[0] == 8 && v.cache_row[3] == 27 && v.chunk_pos[4] == 10);
    TG_CHECK_OK(tg_pack_rec_rows(rec, nb, NB, H, T, rows, "map", 3));
    for (uint32_t p = 0; p < NB; p++)
        TG_CHECK_EQ_U64(rows[p], want_rows[p]);
    /* the node of each cache and chunk row; the hot rows' are the caller's */
    uint32_t nodes[NB];
    uint64_t row_node[T];
    for (uint32_t p = 0; p < NB; p++)
        nodes[p] = 1000 + p;
    memset(row_node, 0, sizeof row_node);
    tg_pack_rec_nodes(rec, nodes, row_node);
    for (uint32_t p = 0; p < NB; p++)
        if (want_rows[p] >= H) TG_CHECK_EQ_U64(row_node[want_rows[p]], 1000 + p);
    TG_CHECK_EQ_U64(row_node[4], 0);

    /* damaged records: each refused, naming the map file and the batch */
    TG_CHECK_ERR(tg_pack_rec_rows(rec, nb, NB - 1, H, T, rows, "map", 3), "does not match");
    TG_CHECK_ERR(tg_pack_rec_rows(rec, nb - 8, NB, H, T, rows, "map", 3), "map: the record");
    TG_CHECK_ERR(tg_pack_rec_rows(rec, nb, NB, 7, T, rows, "map", 3), "hot row 7 of 7");
    TG_CHECK_ERR(tg_pack_rec_rows(rec, nb, NB, H, 40, rows, "map", 3), "chunk");
    TG_CHECK_ERR(tg_pack_rec_rows(rec, nb, NB, H, 27, rows, "map", 3), "cache row 3");
    uint64_t bad[64];
    static const struct {
        uint32_t *a;
        uint32_t i, v;
        const char *msg;
    } cases[] = {{hot_pos, 1, 12, "hot row"},
                 {hot_pos, 1, 5, "hot row"},
                 {cache_pos, 0, 5, "cache row 0"},
                 {chunk_pos, 2, 99, "chunk"},
                 {chunk_pos, 2, 9, "chunk"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        uint32_t keep = cases[k].a[cases[k].i];
        cases[k].a[cases[k].i] = cases[k].v;
        uint64_t n = make_rec(bad);
        TG_CHECK_ERR(tg_pack_rec_rows(bad, n, NB, H, T, rows, "map", 3), cases[k].msg);
        cases[k].a[cases[k].i] = keep;
    }
    uint64_t keep = cache_off[1];
    cache_off[1] = cache_off[2]; /* two equal cache rows: out of order */
    uint64_t n = make_rec(bad);
    TG_CHECK_ERR(tg_pack_rec_rows(bad, n, NB, H, T, rows, "map", 3), "out of order");
    cache_off[1] = keep;
}

TG_TEST(map_file)
{
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_pack_map_t m;
    TG_CHECK_OK(tg_pack_map_open(&m, dir, "test-map", 3, &b));
    uint64_t rec[64], got[64], nb, n;
    nb = make_rec(rec);
    for (int j = 0; j < 3; j++)
        TG_CHECK_OK(tg_pack_map_append(&m, rec));
    TG_CHECK_ERR(tg_pack_map_append(&m, rec), "room for 3 records");
    TG_CHECK_EQ_U64(m.rec_max, nb);
    for (int j = 0; j < 3; j++) {
        memset(got, 0xff, sizeof got);
        TG_CHECK_OK(tg_pack_map_read(&m, (uint64_t)j, got, sizeof got, &n));
        TG_CHECK(n == nb && memcmp(got, rec, nb) == 0);
    }
    TG_CHECK_ERR(tg_pack_map_read(&m, 1, got, nb - 8, &n), "more than planned");
    TG_CHECK_ERR(tg_pack_map_read(&m, 3, got, sizeof got, &n), "no record 3");
    TG_CHECK_EQ_U64(tg_test_count_entries(dir, 0), 0); /* an unnamed file */
    tg_pack_map_close(&m);
    tg_pack_map_close(&m);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* The file of T rows (row v = tfeat_val(v, .)) with its hot range zeroed, open for reading. */
static int packed_file(void)
{
    char *path = tfeat_write(dir, "packed.bin", T, D, TG_F32);
    int fd = open(path, O_RDWR);
    static const float zero[H * D];
    if (fd < 0 || tg_pwrite_full(fd, zero, sizeof zero, 0, path) < 0) exit(1);
    unlink(path);
    free(path);
    return fd;
}

static void reader_open(tg_pack_reader_t **rd, int fd, tg_tier_t *hot, unsigned gap, int norm,
                        const tg_rowcrc_t *crc, tg_budget_t *b, tg_io_stats_t *io)
{
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = T;
    po.feat_dim = D;
    po.dtype = TG_F32;
    po.extractors = 1;
    po.io_depth = 4;
    po.io_gap = gap;
    po.chunk_rows = 4; /* several chunks per batch */
    po.featbuf = 0;
    tg_extract_plan_t pl;
    TG_CHECK_OK(tg_extract_plan(&pl, &po));
    tg_pack_reader_opts_t ro = {.plan = &pl,
                                .fd = fd,
                                .name = "packed.bin",
                                .map_name = "map",
                                .rows = T,
                                .hot = hot,
                                .hot_rows = H,
                                .normalize = norm,
                                .budget = b,
                                .stats = io,
                                .rowcrc = crc,
                                .who = "test"};
    TG_CHECK_OK(tg_pack_reader_open(rd, &ro));
}

TG_TEST(reader)
{
    int fd = packed_file();
    float hot_rows[H * D], X[NB * D], want[D];
    for (uint32_t v = 0; v < H; v++)
        for (uint32_t j = 0; j < D; j++)
            hot_rows[v * D + j] = tfeat_val(v, j);
    tg_tier_t *hot;
    TG_CHECK_OK(tg_pack_hot_tier_create(&hot, "test-hot", hot_rows, D * 4, H));
    uint64_t rec[64];
    uint64_t nb = make_rec(rec);
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_io_stats_t io;
    tg_io_stats_init(&io);
    for (int k = 0; k < 4; k++) {
        int norm = k & 1;
        tg_pack_reader_t *rd;
        reader_open(&rd, fd, hot, k & 2 ? 4096 : 0, norm, NULL, &b, &io);
        memset(X, 0, sizeof X);
        TG_CHECK_OK(tg_pack_reader_read(rd, 5, rec, nb, NB, X, NULL));
        for (uint32_t p = 0; p < NB; p++) {
            float raw[D];
            for (uint32_t j = 0; j < D; j++)
                raw[j] = tfeat_val(want_rows[p], j);
            tg_feat_rows_f32(want, raw, 0, 1, D, TG_F32, norm);
            if (memcmp(X + p * D, want, sizeof want))
                TG_FAIL("norm %d gap %d: X row %u is not packed row %llu", norm, k >> 1, p,
                        (unsigned long long)want_rows[p]);
        }
        tg_tier_stats_t ts[2];
        TG_CHECK(tg_pack_reader_tier_stats(rd, ts, 2, 1) == 2);
        TG_CHECK(!strcmp(ts[0].name, "test-hot") && !strcmp(ts[1].name, "file"));
        TG_CHECK(ts[0].lookups == NB && ts[0].hits == 3);
        TG_CHECK(ts[1].lookups == NB - 3 && ts[1].hits == NB - 3 && ts[1].bytes == 9 * D * 4);
        /* a damaged record: the record's message */
        TG_CHECK_ERR(tg_pack_reader_read(rd, 5, rec, nb, NB + 1, X, NULL), "map: the record");
        tg_pack_reader_close(rd);
    }
    tg_io_counts_t c;
    tg_io_stats_take(&io, &c);
    TG_CHECK(c.io_read_bytes >= 9 * D * 4);

    /* a plan with a feature buffer is not one for a packed file */
    tg_extract_plan_opts_t po;
    tg_extract_plan_opts_default(&po);
    po.num_nodes = T, po.feat_dim = D, po.dtype = TG_F32, po.extractors = 1, po.featbuf = 1;
    tg_extract_plan_t pl;
    TG_CHECK_OK(tg_extract_plan(&pl, &po));
    tg_pack_reader_t *rd;
    TG_CHECK_ERR(tg_pack_reader_open(&rd, &(tg_pack_reader_opts_t){.plan = &pl, .fd = fd}),
                 "without a feature buffer");

    /* a read error: the packed file and the offset */
    reader_open(&rd, fd, hot, 0, 0, NULL, &b, &io);
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "/proc/self/fd/", .lo = 0, .hi = 1ull << 40, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    TG_CHECK_ERR(tg_pack_reader_read(rd, 5, rec, nb, NB, X, NULL),
                 "test: batch 5: reading the packed file packed.bin");
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    tg_io_fault_clear();
    tg_pack_reader_close(rd);

    /* --verify-reads: a changed cache row names its node */
    uint64_t row_node[T];
    uint32_t crc[T], nodes[NB];
    for (uint32_t p = 0; p < NB; p++)
        nodes[p] = 1000 + p;
    memset(row_node, 0, sizeof row_node);
    tg_pack_rec_nodes(rec, nodes, row_node);
    unsigned char row[D * 4];
    for (uint32_t v = 0; v < T; v++) {
        TG_CHECK_OK(tg_pread_full(fd, row, sizeof row, (uint64_t)v * sizeof row, "packed"));
        crc[v] = tg_data_crc32(0, row, sizeof row);
    }
    tg_rowcrc_t sums = {.num_nodes = T, .row_bytes = D * 4, .crc = crc, .map = row_node};
    reader_open(&rd, fd, hot, 0, 0, &sums, &b, &io);
    TG_CHECK_OK(tg_pack_reader_read(rd, 5, rec, nb, NB, X, NULL));
    unsigned char x = 0x5a;
    TG_CHECK(pwrite(fd, &x, 1, 17 * sizeof row + 3) == 1); /* cache row 17: X row 1 */
    TG_CHECK_ERR(tg_pack_reader_read(rd, 5, rec, nb, NB, X, NULL), "the row of node 1001");
    tg_pack_reader_close(rd);

    tg_tier_destroy(hot);
    close(fd);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
}

/* A packed file written from a real layout (tg_pack_geom, tg_pack_map_write, tg_pack_file) over
 * a trace of random batches, then read back batch by batch: every X row is its node's row of the
 * feature file, whatever tier it came from; the hot rows land in RAM; the nodes of the packed
 * rows are the batches' ids. Two segment sizes, with and without hot rows. */
TG_TEST(from_a_layout)
{
    enum { N = 500, B = 9, MAXN = 80 };
    char *fpath = tfeat_write(dir, "features.bin", N, D, TG_F32);
    tg_io_file_t *feat;
    TG_CHECK_OK(tg_io_file_open(&feat, fpath, 0));
    uint32_t ids[B * MAXN];
    uint64_t off[B + 1] = {0};
    tg_rng_t rng;
    tg_rng_seed2(&rng, 11, 0);
    for (int j = 0; j < B; j++) { /* distinct ids within a batch, shared between batches */
        uint32_t n = 20 + (uint32_t)tg_rng_below(&rng, MAXN - 20), k = 0;
        uint32_t start = (uint32_t)tg_rng_below(&rng, N - 2 * MAXN);
        for (uint32_t v = start; k < n; v += 1 + (uint32_t)tg_rng_below(&rng, 2))
            ids[off[j] + k++] = v;
        off[j + 1] = off[j] + n;
    }
    tg_cs_trace_t tr = {.iters = B, .off = off, .ids = ids};
    for (int c = 0; c < 4; c++) {
        tg_budget_t b;
        tg_budget_init(&b, 0);
        tg_layout_cfg_t lc = {.num_nodes = N,
                              .row_bytes = D * 4,
                              .hot_rows = c & 1 ? 30 : 0,
                              .segment = c & 2 ? 3 : 1,
                              .seed = 5,
                              .pack_bytes = 40 * D * 4,
                              .chunk_align = 1};
        tg_layout_t *L;
        TG_CHECK_OK(tg_layout_plan(&L, &tr, &lc, &b));
        tg_pack_geom_t g;
        tg_pack_geom(&g, L, D * 4);
        TG_CHECK(g.hot == lc.hot_rows && g.total_rows == g.hot + g.cache_rows + g.chunk_rows);
        tg_pack_map_t m;
        TG_CHECK_OK(tg_pack_map_open(&m, dir, "test-map", B, &b));
        uint64_t *row_node = calloc(g.total_rows + 1, sizeof *row_node);
        TG_CHECK_OK(tg_pack_map_write(&m, L, &g, ids, off, B, row_node, &b));
        char name[4300];
        int fd = tg_tmpfile_open(dir, "test-pack", 0, name, sizeof name);
        TG_CHECK(fd >= 0);
        float *hot = malloc((g.hot + 1) * D * 4);
        tg_pack_file_opts_t po = {.L = L,
                                  .geom = &g,
                                  .feat = feat,
                                  .num_nodes = N,
                                  .fd = fd,
                                  .name = name,
                                  .hot = hot,
                                  .threads = 2,
                                  .budget = &b};
        tg_pack_stats_t ps;
        TG_CHECK_OK(tg_pack_file(&po, &ps));
        uint64_t nh = 0;
        const uint32_t *hn = tg_layout_hot(L, &nh);
        for (uint64_t k = 0; k < nh; k++)
            TG_CHECK(hot[k * D + 3] == tfeat_val(hn[k], 3));
        tg_tier_t *tier;
        TG_CHECK_OK(tg_pack_hot_tier_create(&tier, "hot", hot, D * 4, g.hot));
        tg_pack_reader_t *rd;
        tg_extract_plan_opts_t xo;
        tg_extract_plan_opts_default(&xo);
        xo.num_nodes = N, xo.feat_dim = D, xo.dtype = TG_F32, xo.extractors = 1;
        xo.io_depth = 4, xo.io_gap = 1024, xo.chunk_rows = 16, xo.featbuf = 0;
        tg_extract_plan_t pl;
        TG_CHECK_OK(tg_extract_plan(&pl, &xo));
        tg_pack_reader_opts_t ro = {.plan = &pl,
                                    .fd = fd,
                                    .name = name,
                                    .map_name = m.name,
                                    .rows = g.total_rows,
                                    .hot = tier,
                                    .hot_rows = g.hot,
                                    .budget = &b};
        TG_CHECK_OK(tg_pack_reader_open(&rd, &ro));
        uint64_t rec[(16 + 12 * MAXN + 8) / 8 + 1], nb, bad = 0;
        float X[MAXN * D];
        for (uint32_t j = 0; j < B; j++) {
            uint32_t n = (uint32_t)(off[j + 1] - off[j]);
            TG_CHECK_OK(tg_pack_map_read(&m, j, rec, sizeof rec, &nb));
            TG_CHECK_OK(tg_pack_reader_read(rd, j, rec, nb, n, X, NULL));
            for (uint32_t p = 0; p < n; p++)
                for (uint32_t k = 0; k < D; k++)
                    bad += X[p * D + k] != tfeat_val(ids[off[j] + p], k);
        }
        TG_CHECK_EQ_U64(bad, 0);
        for (uint64_t r = g.hot; r < g.total_rows; r++) { /* each packed row holds its node */
            float x;
            TG_CHECK_OK(tg_pread_full(fd, &x, 4, r * D * 4, name));
            bad += x != tfeat_val(row_node[r], 0);
        }
        TG_CHECK_EQ_U64(bad, 0);
        tg_pack_reader_close(rd);
        tg_tier_destroy(tier);
        free(hot);
        close(fd);
        free(row_node);
        tg_pack_map_close(&m);
        tg_layout_destroy(L);
        TG_CHECK_EQ_U64(b.used, 0);
        tg_budget_destroy(&b);
    }
    tg_io_file_close(feat);
    unlink(fpath);
    free(fpath);
}

/* A packed set (tg_pack_set_*): written from a layout in one call and read back through its
 * reader, every batch's rows are their nodes' rows; the hot rows land in RAM; under
 * --verify-reads the set holds the node of every packed row and a changed row is caught naming
 * its node; the budget gets every byte back at close; a directory that cannot hold the files
 * fails naming it, and the half-made set closes clean. */
TG_TEST(a_set)
{
    enum { N = 400, B = 6, MAXN = 60 };
    char *fpath = tfeat_write(dir, "set-features.bin", N, D, TG_F32);
    tg_io_file_t *feat;
    TG_CHECK_OK(tg_io_file_open(&feat, fpath, 0));
    uint32_t ids[B * MAXN], crc[N];
    uint64_t off[B + 1] = {0};
    tg_rng_t rng;
    tg_rng_seed2(&rng, 17, 0);
    for (int j = 0; j < B; j++) {
        uint32_t n = 20 + (uint32_t)tg_rng_below(&rng, MAXN - 20), k = 0;
        uint32_t start = (uint32_t)tg_rng_below(&rng, N - 2 * MAXN);
        for (uint32_t v = start; k < n; v += 1 + (uint32_t)tg_rng_below(&rng, 2))
            ids[off[j] + k++] = v;
        off[j + 1] = off[j] + n;
    }
    for (uint32_t v = 0; v < N; v++) {
        float row[D];
        for (uint32_t k = 0; k < D; k++)
            row[k] = tfeat_val(v, k);
        crc[v] = tg_data_crc32(0, row, sizeof row);
    }
    tg_rowcrc_t sums = {.num_nodes = N, .row_bytes = D * 4, .crc = crc};
    tg_cs_trace_t tr = {.iters = B, .off = off, .ids = ids};
    tg_extract_plan_opts_t xo;
    tg_extract_plan_opts_default(&xo);
    xo.num_nodes = N, xo.feat_dim = D, xo.dtype = TG_F32, xo.extractors = 1;
    xo.io_depth = 4, xo.io_gap = 1024, xo.chunk_rows = 16, xo.featbuf = 0;
    tg_extract_plan_t pl;
    TG_CHECK_OK(tg_extract_plan(&pl, &xo));
    for (int verify = 0; verify < 2; verify++) {
        tg_budget_t b;
        tg_budget_init(&b, 0);
        tg_layout_cfg_t lc = {.num_nodes = N,
                              .row_bytes = D * 4,
                              .hot_rows = 25,
                              .segment = 2,
                              .seed = 3,
                              .pack_bytes = 40 * D * 4,
                              .chunk_align = 1};
        tg_layout_t *L;
        TG_CHECK_OK(tg_layout_plan(&L, &tr, &lc, &b));
        uint64_t nh = 0;
        const uint32_t *hn = tg_layout_hot(L, &nh);
        float *hot = malloc((nh + 1) * D * 4);
        tg_pack_set_t ps;
        tg_pack_set_init(&ps);
        tg_pack_set_opts_t o = {.dir = dir,
                                .who = "test",
                                .L = L,
                                .ids = ids,
                                .off = off,
                                .count = B,
                                .hot_nodes = hn,
                                .feat = feat,
                                .num_nodes = N,
                                .row_bytes = D * 4,
                                .hot = hot,
                                .threads = 2,
                                .budget = &b,
                                .rowcrc = verify ? &sums : NULL};
        TG_CHECK_OK(tg_pack_set_write(&ps, &o));
        TG_CHECK(ps.geom.hot == nh && ps.fd >= 0 && ps.map.count == B);
        TG_CHECK((ps.row_node != NULL) == verify && (ps.crc != NULL) == verify);
        TG_CHECK(ps.pst.rows > 0 && strstr(ps.name, "test-pack") != NULL);
        for (uint64_t k = 0; k < nh; k++)
            TG_CHECK(hot[k * D + 5] == tfeat_val(hn[k], 5));
        for (uint64_t r = 0; verify && r < ps.geom.total_rows; r++)
            if (r < nh ? ps.row_node[r] != hn[r] : ps.row_node[r] >= N) {
                TG_FAIL("row %llu: node %llu", (unsigned long long)r,
                        (unsigned long long)ps.row_node[r]);
                break;
            }
        tg_tier_t *tier;
        TG_CHECK_OK(tg_pack_hot_tier_create(&tier, "hot", hot, D * 4, nh));
        tg_pack_reader_t *rd;
        tg_pack_reader_opts_t ro = {.plan = &pl, .hot = tier, .budget = &b, .who = "test"};
        TG_CHECK_OK(tg_pack_set_reader_open(&ps, &rd, &ro));
        uint64_t rec[(16 + 12 * MAXN + 8) / 8 + 1], nb, bad = 0;
        float X[MAXN * D];
        for (uint32_t j = 0; j < B; j++) {
            uint32_t n = (uint32_t)(off[j + 1] - off[j]);
            TG_CHECK_OK(tg_pack_map_read(&ps.map, j, rec, sizeof rec, &nb));
            TG_CHECK_OK(tg_pack_reader_read(rd, j, rec, nb, n, X, NULL));
            for (uint32_t p = 0; p < n; p++)
                for (uint32_t k = 0; k < D; k++)
                    bad += X[p * D + k] != tfeat_val(ids[off[j] + p], k);
        }
        TG_CHECK_EQ_U64(bad, 0);
        if (verify) { /* a changed packed row (the first cache or chunk row) names its node */
            unsigned char x = 0x77;
            uint64_t r = ps.geom.hot;
            TG_CHECK(pwrite(ps.fd, &x, 1, r * D * 4 + 2) == 1);
            char want[64];
            snprintf(want, sizeof want, "node %llu", (unsigned long long)ps.row_node[r]);
            int failed = 0;
            for (uint32_t j = 0; j < B && !failed; j++) {
                uint32_t n = (uint32_t)(off[j + 1] - off[j]);
                TG_CHECK_OK(tg_pack_map_read(&ps.map, j, rec, sizeof rec, &nb));
                tg_err_clear();
                if (tg_pack_reader_read(rd, j, rec, nb, n, X, NULL) < 0) {
                    failed = 1;
                    TG_CHECK(strstr(tg_errmsg(), want) != NULL);
                }
            }
            TG_CHECK(failed);
        }
        tg_pack_reader_close(rd);
        tg_tier_destroy(tier);
        tg_pack_set_close(&ps);
        tg_pack_set_close(&ps); /* twice is fine */
        free(hot);
        tg_layout_destroy(L);
        TG_CHECK_EQ_U64(b.used, 0);
        tg_budget_destroy(&b);
    }
    /* a budget without room for the row nodes: refused naming them; the set closes clean */
    {
        tg_budget_t tb;
        tg_budget_init(&tb, 0);
        tg_layout_cfg_t lc = {.num_nodes = N,
                              .row_bytes = D * 4,
                              .segment = 1,
                              .pack_bytes = 40 * D * 4,
                              .chunk_align = 1};
        tg_layout_t *L;
        TG_CHECK_OK(tg_layout_plan(&L, &tr, &lc, &tb));
        tg_budget_t small;
        tg_budget_init(&small, 64);
        tg_pack_set_t ps;
        tg_pack_set_init(&ps);
        tg_pack_set_opts_t o = {.dir = dir,
                                .who = "test",
                                .L = L,
                                .ids = ids,
                                .off = off,
                                .count = B,
                                .feat = feat,
                                .num_nodes = N,
                                .row_bytes = D * 4,
                                .threads = 1,
                                .budget = &small,
                                .rowcrc = &sums};
        TG_CHECK_ERR(tg_pack_set_write(&ps, &o), "test: the packed rows' nodes");
        tg_pack_set_close(&ps);
        TG_CHECK_EQ_U64(small.used, 0);
        tg_budget_destroy(&small);
        tg_layout_destroy(L);
        tg_budget_destroy(&tb);
    }
    /* a directory that does not exist: the maps fail naming it; the set closes clean */
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_layout_cfg_t lc = {.num_nodes = N,
                          .row_bytes = D * 4,
                          .segment = 1,
                          .pack_bytes = 40 * D * 4,
                          .chunk_align = 1};
    tg_layout_t *L;
    TG_CHECK_OK(tg_layout_plan(&L, &tr, &lc, &b));
    tg_pack_set_t ps;
    tg_pack_set_init(&ps);
    char nodir[4200];
    snprintf(nodir, sizeof nodir, "%s/no-such-dir", dir);
    tg_pack_set_opts_t o = {.dir = nodir,
                            .who = "test",
                            .L = L,
                            .ids = ids,
                            .off = off,
                            .count = B,
                            .feat = feat,
                            .num_nodes = N,
                            .row_bytes = D * 4,
                            .threads = 1,
                            .budget = &b,
                            .rowcrc = &sums};
    TG_CHECK_ERR(tg_pack_set_write(&ps, &o), "no-such-dir");
    tg_pack_set_close(&ps);
    tg_layout_destroy(L);
    TG_CHECK_EQ_U64(b.used, 0);
    tg_budget_destroy(&b);
    tg_io_file_close(feat);
    unlink(fpath);
    free(fpath);
}

/* The hot rows read again from the feature file (tg_pack_hot_read): every row lands at its
 * place whatever the order of the list, across several submissions; the budget gets its bytes
 * back and the reads are counted; under --verify-reads a changed row names its node; a read
 * error names the file and the offset; a list too long for 32-bit places is refused. */
TG_TEST(hot_read)
{
    enum { N = 9000, HD = 4, HN = 4500 };
    char *fpath = tfeat_write(dir, "hot-features.bin", N, HD, TG_F32);
    tg_io_file_t *feat;
    TG_CHECK_OK(tg_io_file_open(&feat, fpath, 0));
    uint32_t *nodes = malloc(HN * sizeof *nodes);
    float *rows = malloc((size_t)HN * HD * 4);
    uint32_t *crc = malloc(N * sizeof *crc);
    tg_rng_t rng;
    tg_rng_seed2(&rng, 3, 0);
    uint64_t *perm = malloc(N * sizeof *perm);
    for (uint64_t v = 0; v < N; v++)
        perm[v] = v;
    tg_rng_shuffle_u64(&rng, perm, N);
    for (uint32_t k = 0; k < HN; k++)
        nodes[k] = (uint32_t)perm[k];
    tg_budget_t b;
    tg_budget_init(&b, 0);
    tg_io_stats_t io;
    tg_io_stats_init(&io);
    memset(rows, 0, (size_t)HN * HD * 4);
    TG_CHECK_OK(tg_pack_hot_read(feat, nodes, HN, HD * 4, rows, &b, &io, NULL));
    for (uint32_t k = 0; k < HN; k++)
        for (uint32_t j = 0; j < HD; j++)
            if (rows[(size_t)k * HD + j] != tfeat_val(nodes[k], j)) {
                TG_FAIL("row %u is not node %u's", k, nodes[k]);
                k = HN;
                break;
            }
    TG_CHECK_EQ_U64(b.used, 0);
    tg_io_counts_t c;
    tg_io_stats_take(&io, &c);
    TG_CHECK(c.io_read_bytes >= (uint64_t)HN * HD * 4 && c.io_requests > 0);
    /* --verify-reads: the file's checksums pass, a changed row names its node */
    for (uint64_t v = 0; v < N; v++) {
        float raw[HD];
        for (uint32_t j = 0; j < HD; j++)
            raw[j] = tfeat_val(v, j);
        crc[v] = tg_data_crc32(0, raw, sizeof raw);
    }
    tg_rowcrc_t sums = {.num_nodes = N, .row_bytes = HD * 4, .crc = crc};
    TG_CHECK_OK(tg_pack_hot_read(feat, nodes, HN, HD * 4, rows, &b, NULL, &sums));
    int fd = open(fpath, O_WRONLY);
    unsigned char x = 0x5a;
    TG_CHECK(pwrite(fd, &x, 1, (uint64_t)nodes[77] * HD * 4 + 1) == 1);
    close(fd);
    char want[64];
    snprintf(want, sizeof want, "node %u", nodes[77]);
    TG_CHECK_ERR(tg_pack_hot_read(feat, nodes, HN, HD * 4, rows, &b, NULL, &sums), want);
    TG_CHECK_EQ_U64(b.used, 0);
    /* a read error: the file and the offset */
    tg_io_fault_t f = {
        .op = TG_IO_FAULT_READ, .file = "hot-features.bin", .lo = 0, .hi = 1ull << 40, .err = EIO};
    TG_CHECK_OK(tg_io_fault_add(&f));
    TG_CHECK_ERR(tg_pack_hot_read(feat, nodes, HN, HD * 4, rows, &b, NULL, NULL),
                 "hot-features.bin");
    TG_CHECK(strstr(tg_errmsg(), "offset") != NULL);
    tg_io_fault_clear();
    TG_CHECK_EQ_U64(b.used, 0);
    /* places are 32-bit */
    TG_CHECK_ERR(
        tg_pack_hot_read(feat, nodes, (uint64_t)UINT32_MAX + 1, HD * 4, rows, &b, NULL, NULL),
        "hot rows");
    tg_budget_destroy(&b);
    tg_io_file_close(feat);
    free(perm), free(crc), free(rows), free(nodes), free(fpath);
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    dir = tg_test_tmpdir("packfile");
    TG_RUN(records);
    TG_RUN(map_file);
    TG_RUN(reader);
    TG_RUN(from_a_layout);
    TG_RUN(a_set);
    TG_RUN(hot_read);
    return tg_test_done();
}
