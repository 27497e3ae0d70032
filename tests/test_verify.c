/* tiergnn verify: a good dataset passes; each kind of damage is found and named with its file
 * and byte offset: a flipped byte (checksum), a truncated file, a decreasing indptr, an index
 * out of range, in-neighbours out of order, a non-finite feature, a label out of range, a split
 * id out of range, a node in two splits, and a broken meta.txt. Content problems are checked
 * with the checksum in meta.txt updated, so the content check itself is what finds them. */
#include "tg_test.h"
#include "tiergnn/data.h"

#include <fcntl.h>
#include <unistd.h>

static char good[4200];

static void copy_dataset(const char *dst)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, good, dst);
    if (system(cmd) != 0) TG_FAIL("%s failed", cmd);
}

static void patch(const char *dir, const char *file, uint64_t off, const void *bytes, size_t n)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || tg_pwrite_full(fd, bytes, n, off, path) < 0) TG_FAIL("cannot patch %s", path);
    if (fd >= 0) close(fd);
}

static void read_at(const char *dir, const char *file, uint64_t off, void *bytes, size_t n)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || tg_pread_full(fd, bytes, n, off, path) < 0) TG_FAIL("cannot read %s", path);
    if (fd >= 0) close(fd);
}

/* Recomputes the CRC of file `id` and rewrites meta.txt with it. */
static void refresh_crc(const char *dir, tg_file_id_t id)
{
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, dir));
    char path[4400], *data = NULL, *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, tg_file_name(id));
    TG_CHECK_OK(tg_read_file(path, &data, &len));
    m.files[id].crc32 = tg_crc32(0, data, len);
    TG_CHECK_OK(tg_meta_format(&m, &text));
    snprintf(path, sizeof path, "%s/meta.txt", dir);
    TG_CHECK_OK(tg_write_file_atomic(path, text, strlen(text)));
    free(data);
    free(text);
}

/* Expects verify to fail with a message containing each needle, through the library and the
 * CLI (one line, non-zero exit). */
static void expect_bad(const char *dir, const char *n1, const char *n2)
{
    TG_CHECK_ERR(tg_dataset_verify(dir), n1);
    if (n2 && !strstr(tg_errmsg(), n2)) TG_FAIL("message '%s' lacks '%s'", tg_errmsg(), n2);
    char *out = NULL;
    int rc = tg_test_cli(&out, "--quiet verify %s", dir);
    TG_CHECK(rc != 0);
    TG_CHECK(out && strstr(out, n1) && !strstr(out, "OK"));
    free(out);
}

TG_TEST(good_dataset)
{
    TG_CHECK_OK(tg_dataset_verify(good));
    char *out = NULL;
    TG_CHECK_EQ_U64(tg_test_cli(&out, "verify %s", good), 0);
    TG_CHECK(out && strstr(out, "OK\n"));
    free(out);
}

TG_TEST(damage)
{
    const char *base = tg_test_tmpdir("verify-damage");
    char d[4200];
    snprintf(d, sizeof d, "%s/d", base);
    tg_meta_t m;
    TG_CHECK_OK(tg_meta_read(&m, good));
    uint64_t N = m.num_nodes;
    uint8_t b;
    uint32_t u32;
    uint64_t u64;

    /* a flipped bit in the middle of the features: only the checksum can tell */
    copy_dataset(d);
    uint64_t off = m.files[TG_FILE_FEATURES].size / 2;
    read_at(d, "features.bin", off, &b, 1);
    b ^= 0x10;
    patch(d, "features.bin", off, &b, 1);
    expect_bad(d, "features.bin: checksum", "does not match");

    /* a truncated file */
    copy_dataset(d);
    char path[4400];
    snprintf(path, sizeof path, "%s/indices.bin", d);
    TG_CHECK(truncate(path, (off_t)m.files[TG_FILE_INDICES].size - 4) == 0);
    expect_bad(d, "indices.bin: size is", "records");

    /* indptr decreasing at node 10 (offset 80) */
    copy_dataset(d);
    read_at(d, "indptr.bin", 9 * 8, &u64, 8);
    u64 -= 1;
    patch(d, "indptr.bin", 10 * 8, &u64, 8);
    refresh_crc(d, TG_FILE_INDPTR);
    expect_bad(d, "indptr.bin: offset 80: indptr decreases at node 10", NULL);

    /* indptr[N] != num_edges */
    copy_dataset(d);
    u64 = m.num_edges - 1;
    patch(d, "indptr.bin", N * 8, &u64, 8);
    refresh_crc(d, TG_FILE_INDPTR);
    expect_bad(d, "indptr.bin: offset", "expected num_edges");

    /* an index out of range at edge 7 (offset 28) */
    copy_dataset(d);
    u32 = (uint32_t)N;
    patch(d, "indices.bin", 7 * 4, &u32, 4);
    refresh_crc(d, TG_FILE_INDICES);
    expect_bad(d, "indices.bin: offset 28: source id", "out of range");

    /* in-neighbours out of order: swap the first two sources of a node with two or more */
    copy_dataset(d);
    uint64_t *ip = NULL;
    tg_dataset_t *ds = NULL;
    TG_CHECK_OK(tg_dataset_open(&ds, d, TG_OPEN_CHECK_SIZES));
    if (ds) TG_CHECK_OK(tg_dataset_load_indptr(ds, &ip));
    uint64_t v = 0;
    while (ip && v < N && ip[v + 1] - ip[v] < 2)
        v++;
    if (ip && v < N) {
        uint32_t pair[2];
        read_at(d, "indices.bin", ip[v] * 4, pair, 8);
        uint32_t sw[2] = {pair[1], pair[0]};
        patch(d, "indices.bin", ip[v] * 4, sw, 8);
        refresh_crc(d, TG_FILE_INDICES);
        char needle[128];
        snprintf(needle, sizeof needle, "offset %llu: in-neighbours of node %llu are not ascending",
                 (unsigned long long)(ip[v] + 1) * 4, (unsigned long long)v);
        expect_bad(d, needle, NULL);
    } else {
        TG_FAIL("no node with two in-neighbours");
    }
    free(ip);
    tg_dataset_close(ds);

    /* a NaN feature: row 3, column 2 */
    copy_dataset(d);
    u32 = 0x7fc00000u;
    patch(d, "features.bin", (3 * m.feat_dim + 2) * 4, &u32, 4);
    refresh_crc(d, TG_FILE_FEATURES);
    expect_bad(d, "features.bin: offset", "feature [3][2] is not finite");

    /* a label out of range at node 5 */
    copy_dataset(d);
    int32_t l = (int32_t)m.num_classes;
    patch(d, "labels.bin", 5 * 4, &l, 4);
    refresh_crc(d, TG_FILE_LABELS);
    expect_bad(d, "labels.bin: offset 20: label", "out of range");

    /* a split id out of range */
    copy_dataset(d);
    u32 = (uint32_t)N + 5;
    patch(d, "valid_idx.bin", 4, &u32, 4);
    refresh_crc(d, TG_FILE_VALID);
    expect_bad(d, "valid_idx.bin: offset 4: node id", "out of range");

    /* a test node that is also a training node */
    copy_dataset(d);
    read_at(d, "train_idx.bin", 0, &u32, 4);
    patch(d, "test_idx.bin", 8, &u32, 4);
    refresh_crc(d, TG_FILE_TEST);
    expect_bad(d, "test_idx.bin: offset 8: node", "is already in train_idx.bin");

    /* meta.txt damage names meta.txt and the line */
    copy_dataset(d);
    char *text = NULL;
    snprintf(path, sizeof path, "%s/meta.txt", d);
    TG_CHECK_OK(tg_read_file(path, &text, NULL));
    if (text) {
        char *p = strstr(text, "feat_dtype = f32");
        if (p) memcpy(p, "feat_dtype = f64", 16);
        tg_test_write_file(path, text);
        free(text);
    }
    expect_bad(d, "meta.txt: line 6: feat_dtype must be f32 or f16", NULL);

    /* a missing file */
    copy_dataset(d);
    snprintf(path, sizeof path, "%s/labels.bin", d);
    unlink(path);
    expect_bad(d, "labels.bin: missing", NULL);

    /* not a dataset at all */
    expect_bad(base, "meta.txt: cannot open", NULL);
    tg_rmtree(base);
}

int main(void)
{
    char base[4096];
    snprintf(base, sizeof base, "%s", tg_test_tmpdir("verify-good"));
    snprintf(good, sizeof good, "%s/g", base);
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 3000;
    o.feat_dim = 8;
    o.classes = 5;
    tg_log_set_level(TG_LOG_WARN);
    if (tg_generate(good, &o) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", good, tg_errmsg());
        return 1;
    }
    TG_RUN(good_dataset);
    TG_RUN(damage);
    tg_rmtree(base);
    return tg_test_done();
}
