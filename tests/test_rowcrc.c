/* Row checksums (tiergnn/rowcrc.h, `--verify-reads`): built once from features.bin and reused,
 * each sum the CRC-32 of its row; a changed row is refused naming the file, offset and node; a
 * features.bin already changed is refused at build (its CRC is not meta.txt's) and nothing is
 * written; a stale derived file is rebuilt; an unwritable derived directory keeps the sums in
 * RAM; the budget is charged and refunded; permuted tables name the original node. Then end to
 * end: every strategy stops on a changed row with --verify-reads, and a run with it writes the
 * same checkpoint as one without; eval and infer take --verify and --verify-reads too. */
#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"
#include "tiergnn/io.h"
#include "tiergnn/rowcrc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char good[4200];

static void copy_dataset(const char *dst, int with_derived)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'%s%s%s", dst, good, dst,
             with_derived ? "" : " && rm -rf '", with_derived ? "" : dst,
             with_derived ? "" : "/derived'");
    if (system(cmd) != 0) TG_FAIL("%s failed", cmd);
}

/* xors one byte of DIR/features.bin at off */
static void flip(const char *dir, uint64_t off)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/features.bin", dir);
    int fd = open(path, O_RDWR);
    uint8_t b = 0;
    if (fd < 0 || tg_pread_full(fd, &b, 1, off, path) < 0) TG_FAIL("cannot read %s", path);
    b ^= 0x21;
    if (fd >= 0 && tg_pwrite_full(fd, &b, 1, off, path) < 0) TG_FAIL("cannot patch %s", path);
    if (fd >= 0) close(fd);
}

static void read_row(const tg_dataset_t *ds, uint64_t v, void *row, size_t rb)
{
    char path[4400];
    tg_dataset_path(ds, TG_FILE_FEATURES, path, sizeof path);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || tg_pread_full(fd, row, rb, v * rb, path) < 0) TG_FAIL("cannot read %s", path);
    if (fd >= 0) close(fd);
}

/* A copy of the good dataset without derived/ at base/d (its path into d), one byte changed at
 * flip_at (>= 0), opened; NULL after a failed check. */
static tg_dataset_t *open_copy(const char *base, char *d, size_t len, int64_t flip_at)
{
    snprintf(d, len, "%s/d", base);
    copy_dataset(d, 0);
    if (flip_at >= 0) flip(d, (uint64_t)flip_at);
    tg_dataset_t *ds = NULL;
    TG_CHECK_OK(tg_dataset_open(&ds, d, TG_OPEN_CHECK_SIZES));
    return ds;
}

static int rowcrc_files(const char *dir)
{
    char d[4400];
    snprintf(d, sizeof d, "%s/derived", dir);
    return tg_test_count_entries(d, 0);
}

TG_TEST(build_check_reuse)
{
    const char *base = tg_test_tmpdir("rowcrc-build");
    char d[4200];
    tg_dataset_t *ds = open_copy(base, d, sizeof d, -1);
    if (!ds) return;
    uint64_t N = ds->meta.num_nodes;
    size_t rb = ds->meta.feat_dim * tg_feat_dtype_size(ds->meta.feat_dtype);
    tg_budget_t bg;
    tg_budget_init(&bg, 1 << 20);
    tg_rowcrc_t *rc = NULL;
    TG_CHECK_OK(tg_rowcrc_open(&rc, ds, NULL, &bg));
    TG_CHECK_EQ_U64(bg.used, N * 4);
    TG_CHECK_EQ_U64(rowcrc_files(d), 1);
    char *row = malloc(rb);
    for (uint64_t v = 0; rc && v < N; v += 97) {
        read_row(ds, v, row, rb);
        TG_CHECK_EQ_U64(rc->crc[v], tg_crc32(0, row, rb));
        TG_CHECK_OK(tg_rowcrc_check(rc, v, row, "features.bin", v * rb));
    }
    /* valid now: prepare finds it, a second open reads the same sums */
    TG_CHECK_EQ_U64(tg_rowcrc_prepare(ds, NULL), 0);
    tg_rowcrc_t *again = NULL;
    TG_CHECK_OK(tg_rowcrc_open(&again, ds, NULL, NULL));
    if (rc && again) TG_CHECK(memcmp(rc->crc, again->crc, N * 4) == 0);
    tg_rowcrc_close(again);

    /* a changed row: refused naming the file, offset and node; the others still pass */
    uint64_t v = N / 3;
    flip(d, v * rb + 1);
    read_row(ds, v, row, rb);
    TG_CHECK_ERR(tg_rowcrc_check(rc, v, row, "F/features.bin", v * rb), "checksum");
    char want[200];
    snprintf(want, sizeof want, "F/features.bin: offset %llu: the row of node %llu",
             (unsigned long long)(v * rb), (unsigned long long)v);
    TG_CHECK(strstr(tg_errmsg(), want) != NULL);
    read_row(ds, v + 1, row, rb);
    TG_CHECK_OK(tg_rowcrc_check(rc, v + 1, row, "features.bin", (v + 1) * rb));
    TG_CHECK_OK(tg_rowcrc_check(NULL, v, row, "features.bin", 0)); /* no table: no check */
    TG_CHECK_ERR(tg_rowcrc_check(rc, N, row, "features.bin", 0), "has no checksum");
    /* several rows: the first bad one is named */
    char *rows = malloc(rb * 4);
    for (int k = 0; k < 4; k++)
        read_row(ds, v - 2 + (uint64_t)k, rows + k * rb, rb);
    TG_CHECK_ERR(tg_rowcrc_check_rows(rc, v - 2, 4, rows, "features.bin", (v - 2) * rb), want + 2);
    TG_CHECK_OK(tg_rowcrc_check_rows(rc, v - 2, 2, rows, "features.bin", (v - 2) * rb));
    free(rows);

    /* the budget: refunded at close; too small refused naming what */
    tg_rowcrc_close(rc);
    TG_CHECK_EQ_U64(bg.used, 0);
    tg_budget_t tiny;
    tg_budget_init(&tiny, N * 4 - 1);
    TG_CHECK_ERR(tg_rowcrc_open(&rc, ds, NULL, &tiny), "row checksums");
    tg_budget_destroy(&tiny);
    tg_budget_destroy(&bg);
    free(row);
    tg_dataset_close(ds);
    tg_rmtree(base);
}

TG_TEST(refuses_changed_file)
{
    const char *base = tg_test_tmpdir("rowcrc-changed");
    char d[4200];
    tg_dataset_t *ds = open_copy(base, d, sizeof d, 12345);
    if (!ds) return;
    tg_rowcrc_t *rc = NULL;
    TG_CHECK_ERR(tg_rowcrc_open(&rc, ds, NULL, NULL), "meta.txt records");
    TG_CHECK(strstr(tg_errmsg(), "features.bin") && strstr(tg_errmsg(), "--verify-reads"));
    TG_CHECK(rc == NULL);
    TG_CHECK_ERR(tg_rowcrc_prepare(ds, NULL), "checksum mismatch");
    /* nothing written, not even a temporary file */
    TG_CHECK_EQ_U64(rowcrc_files(d), 0);
    tg_dataset_close(ds);
    /* a read error while summing: named, and nothing written */
    ds = open_copy(base, d, sizeof d, -1);
    if (!ds) return;
    TG_CHECK_OK(tg_io_fault_parse("EIO@4096-8192,file=features.bin"));
    TG_CHECK_ERR(tg_rowcrc_open(&rc, ds, NULL, NULL), "Input/output error");
    TG_CHECK(strstr(tg_errmsg(), "features.bin") && strstr(tg_errmsg(), "row checksums"));
    tg_io_fault_clear();
    TG_CHECK_EQ_U64(rowcrc_files(d), 0);
    flip(d, 12345);
    /* the CLI: verify names the file first; train --verify-reads refuses */
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "--quiet verify %s --row-checksums", d) != 0);
    TG_CHECK(out && strstr(out, "features.bin"));
    free(out);
    tg_dataset_close(ds);
    tg_rmtree(base);
}

TG_TEST(stale_and_unwritable)
{
    const char *base = tg_test_tmpdir("rowcrc-stale");
    char d[4200], path[4600];
    tg_dataset_t *ds = open_copy(base, d, sizeof d, -1);
    if (!ds) return;
    uint64_t N = ds->meta.num_nodes;
    TG_CHECK_EQ_U64(tg_rowcrc_prepare(ds, NULL), 1);
    tg_rowcrc_t *ref = NULL;
    TG_CHECK_OK(tg_rowcrc_open(&ref, ds, NULL, NULL));
    /* a derived file cut short: stale, rebuilt, the same sums */
    char name[256];
    TG_CHECK_OK(tg_derived_name(TG_ROWCRC_KIND, TG_ROWCRC_PARAMS, name, sizeof name));
    snprintf(path, sizeof path, "%s/derived/%s", d, name);
    TG_CHECK(truncate(path, 4096 + 8) == 0);
    tg_rowcrc_t *rc = NULL;
    TG_CHECK_OK(tg_rowcrc_open(&rc, ds, NULL, NULL));
    if (rc && ref) TG_CHECK(memcmp(rc->crc, ref->crc, N * 4) == 0);
    tg_rowcrc_close(rc);
    struct stat st;
    TG_CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == 4096 + N * 4);
    /* a derived "directory" that is a file: the sums are computed in RAM */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s/derived' && touch '%s/derived'", d, d);
    TG_CHECK(system(cmd) == 0);
    rc = NULL;
    TG_CHECK_OK(tg_rowcrc_open(&rc, ds, NULL, NULL));
    if (rc && ref) TG_CHECK(memcmp(rc->crc, ref->crc, N * 4) == 0);
    tg_rowcrc_close(rc);
    TG_CHECK_EQ_U64(tg_rowcrc_prepare(ds, NULL), 2);

    /* a permuted table: row i is node map[i]; a mismatch names the node and the row */
    uint64_t map[5] = {7, 3, 0, N - 1, 3};
    TG_CHECK_OK(tg_rowcrc_permuted(&rc, ref, map, 5, NULL));
    size_t rb = ref ? ref->row_bytes : 0;
    char *row = malloc(rb + 1);
    read_row(ds, N - 1, row, rb);
    TG_CHECK_OK(tg_rowcrc_check(rc, 3, row, "partfeat", 3 * rb));
    TG_CHECK_ERR(tg_rowcrc_check(rc, 2, row, "partfeat", 2 * rb), "the row of node 0 (row 2 of");
    tg_rowcrc_close(rc);
    map[1] = N;
    TG_CHECK_ERR(tg_rowcrc_permuted(&rc, ref, map, 5, NULL), "maps to node");
    free(row);
    tg_rowcrc_close(ref);
    tg_dataset_close(ds);
    tg_rmtree(base);
}

/* The strategies, each with options that make it read from the disk on this small dataset. */
static const char *const strategies[][2] = {
    {"memory", "--mem 48M"},
    {"mmap", "--mem 48M"},
    {"gnndrive", "--mem 48M --extractors 2 --chunk-rows 64 --features-in-ram 0"},
    {"pagraph", "--mem 48M --hot-nodes 100 --extractors 2 --chunk-rows 64"},
    {"ginex", "--mem 56M --superbatch 2 --chunk-rows 64"},
    {"diskgnn", "--mem 96M --hot-cache 4K --chunk-rows 64"},
    {"hier", "--mem 64M --parts 8 --dynamic-parts 2 --static-ratio 0.05"},
    {"gids", "--mem 56M --constant-buffer 4K --extractors 2 --chunk-rows 64"},
};
#define TRAIN                                                                                      \
    "--quiet train %s --strategy %s %s --model sage --layers 2 --hidden 16 --fanouts 4,4 "         \
    "--batch-size 128 --epochs 1 --batches-per-epoch 6 --eval-every 0 --seed 3 --threads 2 "       \
    "--out %s %s"

TG_TEST(strategies_stop_on_a_changed_row)
{
    const char *base = tg_test_tmpdir("rowcrc-train");
    char d[4200], ref[4300], run[4300];
    snprintf(d, sizeof d, "%s/d", base);
    copy_dataset(d, 0);
    char *out = NULL;
    TG_CHECK_EQ_U64(tg_test_cli(&out, "verify %s --row-checksums", d), 0);
    TG_CHECK(out && strstr(out, "row checksums: written"));
    free(out);
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, d));
    uint64_t size = m.files[TG_FILE_FEATURES].size;
    /* a --mem refusal counts the sums and says so */
    snprintf(run, sizeof run, "%s/small", base);
    TG_CHECK(tg_test_cli(&out, TRAIN, d, "gnndrive", "--mem 1M", run, "--verify-reads") != 0);
    TG_CHECK(out && strstr(out, "row checksums of --verify-reads 11.72 KiB"));
    free(out);
    /* unchanged: the same checkpoint with and without --verify-reads */
    for (int i = 0; i < 2; i++) {
        const char *const *s = strategies[i == 0 ? 0 : 2];
        snprintf(ref, sizeof ref, "%s/ref-%s", base, s[0]);
        snprintf(run, sizeof run, "%s/vr-%s", base, s[0]);
        TG_CHECK_EQ_U64(tg_test_cli(&out, TRAIN, d, s[0], s[1], ref, ""), 0);
        free(out);
        TG_CHECK_EQ_U64(tg_test_cli(&out, TRAIN, d, s[0], s[1], run, "--verify-reads"), 0);
        free(out);
        char a[4400], b[4400];
        snprintf(a, sizeof a, "%s/checkpoint.bin", ref);
        snprintf(b, sizeof b, "%s/checkpoint.bin", run);
        TG_CHECK(tg_test_same_file(a, b));
    }
    /* one byte in every 24th row changed: every strategy reads one of them in its first batch,
     * or while it fills its caches, and stops naming the file and the checksum */
    size_t rb = m.feat_dim * tg_feat_dtype_size(m.feat_dtype);
    for (uint64_t off = 5; off < size; off += 24 * rb)
        flip(d, off);
    for (size_t i = 0; i < sizeof strategies / sizeof *strategies; i++) {
        snprintf(run, sizeof run, "%s/bad-%s", base, strategies[i][0]);
        int rc =
            tg_test_cli(&out, TRAIN, d, strategies[i][0], strategies[i][1], run, "--verify-reads");
        if (rc == 0 || !out || !strstr(out, "does not match its checksum in derived/rowcrc") ||
            !strstr(out, "offset"))
            TG_FAIL("%s: exit %d, output '%s'", strategies[i][0], rc, out ? out : "");
        free(out);
    }
    /* eval and infer of a saved run check the same way: --verify-reads stops at a changed row,
     * --verify before anything is read; neither asked for, the changed rows go unnoticed */
    snprintf(ref, sizeof ref, "%s/ref-gnndrive", base);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            static const char *const flags[] = {"--verify-reads", "--verify", ""};
            int rc = k == 0
                         ? tg_test_cli(&out, "eval %s --checkpoint %s --last --strategy %s %s %s",
                                       d, ref, strategies[2][0], strategies[2][1], flags[i])
                         : tg_test_cli(&out,
                                       "infer %s --checkpoint %s --last --out %s/p.bin "
                                       "--strategy %s %s %s",
                                       d, ref, base, strategies[2][0], strategies[2][1], flags[i]);
            const char *want = i == 0   ? "does not match its checksum in derived/rowcrc"
                               : i == 1 ? "features.bin: checksum"
                                        : NULL;
            if (want ? rc == 0 || !out || !strstr(out, want) : rc != 0)
                TG_FAIL("%s %s: exit %d, output '%s'", k ? "infer" : "eval", flags[i], rc,
                        out ? out : "");
            free(out);
        }
    tg_rmtree(base);
}

int main(void)
{
    char base[4096];
    snprintf(base, sizeof base, "%s", tg_test_tmpdir("rowcrc-good"));
    snprintf(good, sizeof good, "%s/g", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 3000;
    o.feat_dim = 16;
    o.classes = 5;
    tg_log_set_level(TG_LOG_WARN);
    if (tg_generate(good, &o) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", good, tg_errmsg());
        return 1;
    }
    TG_RUN(build_check_reuse);
    TG_RUN(refuses_changed_file);
    TG_RUN(stale_and_unwritable);
    TG_RUN(strategies_stop_on_a_changed_row);
    tg_rmtree(base);
    return tg_test_done();
}
