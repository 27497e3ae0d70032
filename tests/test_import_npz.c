/* `import --from npz` and OGB's npz raw layout (`--from ogb` with raw/data.npz): archives are
 * written here by a small zip writer of the test's own (stored and deflated members, zip64 extra
 * fields and end records on demand), independent of src/data/zip.c.
 *
 * - Cora from ../shared/datasets/cora, rewritten as OGB's binary raw layout and as one PyG-style
 *   .npz, imports to the same dataset files (the CRCs in meta.txt) as its CSV import.
 * - Every damaged archive (bad local header, truncated member, CRC mismatch, wrong dtype, wrong
 *   shape, missing member, not a zip) is refused with a message naming the member, and leaves no
 *   dataset behind.
 * - An archive larger than --mem imports in a child process whose peak RSS stays under --mem.
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "data/import-impl.h"
#include "tg_test.h"
#include "tiergnn/data.h"

static char tmp[4096];

/* ---------------------------------------------------------------- .npy and zip writers */

typedef struct {
    char name[64];
    uint8_t *data; /* the member's bytes (an .npy file) */
    size_t len;
    int deflate, zip64;
} member_t;

/* An .npy file (format 1.0) of `count` elements of itemsize bytes from src. */
static uint8_t *npy_bytes(const char *descr, const char *shape, const void *src, size_t bytes,
                          size_t *len)
{
    char h[256];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                     shape);
    size_t hl = (size_t)n + 1;
    while ((10 + hl) % 64)
        hl++;
    uint8_t *b = malloc(10 + hl + bytes);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)(hl & 0xff);
    b[9] = (uint8_t)(hl >> 8);
    memset(b + 10, ' ', hl);
    memcpy(b + 10, h, (size_t)n);
    b[10 + hl - 1] = '\n';
    if (bytes) memcpy(b + 10 + hl, src, bytes);
    *len = 10 + hl + bytes;
    return b;
}

static void put16(FILE *f, unsigned v)
{
    fputc((int)(v & 0xff), f);
    fputc((int)(v >> 8 & 0xff), f);
}
static void put32(FILE *f, uint32_t v)
{
    put16(f, v & 0xffff);
    put16(f, v >> 16);
}
static void put64(FILE *f, uint64_t v)
{
    put32(f, (uint32_t)v);
    put32(f, (uint32_t)(v >> 32));
}

/* Raw deflate (no zlib header), as zip's method 8. */
static uint8_t *deflate_raw(const uint8_t *src, size_t n, size_t *out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    size_t cap = deflateBound(&zs, (uLong)n) + 16;
    uint8_t *out = malloc(cap);
    zs.next_in = (Bytef *)src;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    deflate(&zs, Z_FINISH);
    *out_len = zs.total_out;
    deflateEnd(&zs);
    return out;
}

/* Damage to apply while writing, for the error tests. */
typedef struct {
    const char *member; /* which member (NULL: none) */
    int bad_sig;        /* its local header's signature */
    int cut;            /* write only half its data (and record that size) */
    int flip;           /* change one data byte after the CRC was taken */
    int bad_crc;        /* record a wrong CRC */
    int trunc_file;     /* cut the whole file to this many bytes (0: no) */
} damage_t;

static void write_zip(const char *path, member_t *m, int n, const damage_t *dmg, int zip64_end)
{
    FILE *f = fopen(path, "wb");
    uint64_t *off = calloc((size_t)n, 8), *csz = calloc((size_t)n, 8);
    uint32_t *crc = calloc((size_t)n, 4);
    for (int i = 0; i < n; i++) {
        int hit = dmg && dmg->member && !strcmp(dmg->member, m[i].name);
        crc[i] = (uint32_t)crc32(0, m[i].data, (uInt)m[i].len);
        if (hit && dmg->bad_crc) crc[i] ^= 0x1234;
        size_t clen = m[i].len;
        uint8_t *cdata = m[i].data;
        if (m[i].deflate) cdata = deflate_raw(m[i].data, m[i].len, &clen);
        if (hit && dmg->flip) cdata[clen / 2] ^= 0x40;
        if (hit && dmg->cut) clen /= 2;
        /* a stored member cut short is a consistent member whose .npy is short */
        if (hit && dmg->cut && !m[i].deflate) crc[i] = (uint32_t)crc32(0, cdata, (uInt)clen);
        csz[i] = clen;
        uint64_t usz = hit && dmg->cut && !m[i].deflate ? clen : m[i].len;
        off[i] = (uint64_t)ftello(f);
        size_t nl = strlen(m[i].name);
        fwrite(hit && dmg->bad_sig ? "PK\3\5" : "PK\3\4", 1, 4, f);
        put16(f, m[i].zip64 ? 45 : 20);
        put16(f, 0);
        put16(f, m[i].deflate ? 8 : 0);
        put16(f, 0);
        put16(f, 0x21);
        put32(f, crc[i]);
        put32(f, m[i].zip64 ? 0xffffffffu : (uint32_t)clen);
        put32(f, m[i].zip64 ? 0xffffffffu : (uint32_t)usz);
        put16(f, (unsigned)nl);
        put16(f, m[i].zip64 ? 20 : 0);
        fwrite(m[i].name, 1, nl, f);
        if (m[i].zip64) {
            put16(f, 1);
            put16(f, 16);
            put64(f, usz);
            put64(f, clen);
        }
        fwrite(cdata, 1, clen, f);
        if (cdata != m[i].data) free(cdata);
        m[i].len = (size_t)usz; /* what the central directory records */
    }
    uint64_t cd = (uint64_t)ftello(f);
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(m[i].name);
        fwrite("PK\1\2", 1, 4, f);
        put16(f, m[i].zip64 ? 45 : 20);
        put16(f, m[i].zip64 ? 45 : 20);
        put16(f, 0);
        put16(f, m[i].deflate ? 8 : 0);
        put16(f, 0);
        put16(f, 0x21);
        put32(f, crc[i]);
        put32(f, m[i].zip64 ? 0xffffffffu : (uint32_t)csz[i]);
        put32(f, m[i].zip64 ? 0xffffffffu : (uint32_t)m[i].len);
        put16(f, (unsigned)nl);
        put16(f, m[i].zip64 ? 28 : 0);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0);
        put32(f, 0);
        put32(f, m[i].zip64 ? 0xffffffffu : (uint32_t)off[i]);
        fwrite(m[i].name, 1, nl, f);
        if (m[i].zip64) {
            put16(f, 1);
            put16(f, 24);
            put64(f, m[i].len);
            put64(f, csz[i]);
            put64(f, off[i]);
        }
    }
    uint64_t cd_end = (uint64_t)ftello(f);
    if (zip64_end) {
        fwrite("PK\6\6", 1, 4, f);
        put64(f, 44);
        put16(f, 45);
        put16(f, 45);
        put32(f, 0);
        put32(f, 0);
        put64(f, (uint64_t)n);
        put64(f, (uint64_t)n);
        put64(f, cd_end - cd);
        put64(f, cd);
        fwrite("PK\6\7", 1, 4, f);
        put32(f, 0);
        put64(f, cd_end);
        put32(f, 1);
    }
    fwrite("PK\5\6", 1, 4, f);
    put16(f, 0);
    put16(f, 0);
    put16(f, zip64_end ? 0xffff : (unsigned)n);
    put16(f, zip64_end ? 0xffff : (unsigned)n);
    put32(f, zip64_end ? 0xffffffffu : (uint32_t)(cd_end - cd));
    put32(f, zip64_end ? 0xffffffffu : (uint32_t)cd);
    put16(f, 0);
    fclose(f);
    if (dmg && dmg->trunc_file) TG_CHECK(truncate(path, dmg->trunc_file) == 0);
    free(off);
    free(csz);
    free(crc);
}

static void add(member_t *m, int *n, const char *name, const char *descr, const char *shape,
                const void *src, size_t bytes, int deflate)
{
    member_t *x = &m[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", name);
    x->data = npy_bytes(descr, shape, src, bytes, &x->len);
    x->deflate = deflate;
}

static void free_members(member_t *m, int n)
{
    for (int i = 0; i < n; i++)
        free(m[i].data);
}

static const char *path_in(const char *name)
{
    static char p[16][4200]; /* a ring: the last 16 paths stay valid */
    static int k;
    k = (k + 1) % 16;
    snprintf(p[k], sizeof p[k], "%s/%s", tmp, name);
    return p[k];
}

static int import_kind(const char *out, const char *src, tg_import_kind_t kind, uint64_t mem)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = kind;
    o.src = src;
    o.mem_bytes = mem ? mem : 16u << 20;
    return tg_import(out, &o);
}

/* The "file = NAME SIZE CRC" lines of a dataset's meta.txt, concatenated. */
static char *file_lines(const char *ds)
{
    char p[4300];
    snprintf(p, sizeof p, "%s/meta.txt", ds);
    char *t = tg_test_read_all(p, NULL);
    if (!t) return strdup("");
    char *out = calloc(1, strlen(t) + 1);
    for (char *l = strtok(t, "\n"); l; l = strtok(NULL, "\n"))
        if (!strncmp(l, "file", 4)) strcat(strcat(out, l), "\n");
    free(t);
    return out;
}

/* ---------------------------------------------------------------- Cora */

/* Reads a gzip CSV of numbers into a malloc'd double array (rows x cols). */
static double *read_gz(const char *path, size_t *rows, size_t *cols)
{
    gzFile g = gzopen(path, "rb");
    if (!g) return NULL;
    static char line[1 << 16];
    size_t cap = 1 << 16, n = 0;
    double *v = malloc(cap * sizeof *v);
    *rows = *cols = 0;
    while (gzgets(g, line, sizeof line)) {
        size_t c = 0;
        for (char *p = line; *p && *p != '\n' && *p != '\r';) {
            char *end;
            double x = strtod(p, &end);
            if (end == p) break;
            if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
            v[n++] = x;
            c++;
            p = *end == ',' ? end + 1 : end;
        }
        *cols = c;
        (*rows)++;
    }
    gzclose(g);
    return v;
}

static int64_t *to_i64(const double *v, size_t n)
{
    int64_t *o = malloc(TG_MAX(n, (size_t)1) * 8);
    for (size_t i = 0; i < n; i++)
        o[i] = (int64_t)v[i];
    return o;
}

TG_TEST(cora)
{
    const char *cora = tg_test_shared_dataset("cora");
    if (!cora) {
        fprintf(stderr, "SKIP cora: ../shared/datasets/cora is absent\n");
        return;
    }
    char p[4300];
    size_t er, ec, fr, fc, lr, lc;
    snprintf(p, sizeof p, "%s/raw/edge.csv.gz", cora);
    double *edges = read_gz(p, &er, &ec);
    snprintf(p, sizeof p, "%s/raw/node-feat.csv.gz", cora);
    double *feat = read_gz(p, &fr, &fc);
    snprintf(p, sizeof p, "%s/raw/node-label.csv.gz", cora);
    double *lab = read_gz(p, &lr, &lc);
    TG_CHECK(edges && feat && lab && ec == 2 && fr == 2708 && fc == 1433 && lr == 2708);
    if (!edges || !feat || !lab) return;
    /* OGB's edge_index is (2, E): row 0 the sources. */
    int64_t *ei = malloc(2 * er * 8);
    for (size_t i = 0; i < er; i++) {
        ei[i] = (int64_t)edges[2 * i];
        ei[er + i] = (int64_t)edges[2 * i + 1];
    }
    float *x = malloc(fr * fc * 4);
    for (size_t i = 0; i < fr * fc; i++)
        x[i] = (float)feat[i];
    int64_t *y = to_i64(lab, lr), nn = (int64_t)fr, ne = (int64_t)er;
    int64_t *year = calloc(fr, 8);
    char s_ei[64], s_x[64], s_y[64], s_y1[64];
    snprintf(s_ei, sizeof s_ei, "(2, %zu)", er);
    snprintf(s_x, sizeof s_x, "(%zu, %zu)", fr, fc);
    snprintf(s_y, sizeof s_y, "(%zu,)", lr);
    snprintf(s_y1, sizeof s_y1, "(%zu, 1)", lr);

    /* The CSV import, the reference. */
    const char *ref = path_in("cora-csv");
    TG_CHECK_OK(import_kind(ref, cora, TG_IMPORT_OGB, 0));
    char *want = file_lines(ref);

    /* OGB's binary raw layout: data.npz stored (zip64 records on two members), node-label.npz
     * deflated, float labels as papers100M's; the split is Cora's CSV folder. */
    const char *root = path_in("cora-ogb-npz");
    snprintf(p, sizeof p, "%s/raw", root);
    tg_mkdir_p(p);
    member_t m[8];
    int n = 0;
    add(m, &n, "edge_index.npy", "<i8", s_ei, ei, 2 * er * 8, 0);
    m[n - 1].zip64 = 1;
    add(m, &n, "node_feat.npy", "<f4", s_x, x, fr * fc * 4, 0);
    add(m, &n, "node_year.npy", "<i8", s_y1, year, fr * 8, 0);
    add(m, &n, "num_nodes_list.npy", "<i8", "(1,)", &nn, 8, 0);
    add(m, &n, "num_edges_list.npy", "<i8", "(1,)", &ne, 8, 0);
    m[n - 1].zip64 = 1;
    snprintf(p, sizeof p, "%s/raw/data.npz", root);
    write_zip(p, m, n, NULL, 0);
    free_members(m, n);
    n = 0;
    add(m, &n, "node_label.npy", "<f8", s_y1, lab, lr * 8, 1);
    snprintf(p, sizeof p, "%s/raw/node-label.npz", root);
    write_zip(p, m, n, NULL, 1);
    free_members(m, n);
    char sp[4300];
    snprintf(p, sizeof p, "%s/split", cora);
    snprintf(sp, sizeof sp, "%s/split", root);
    TG_CHECK(symlink(p, sp) == 0);
    const char *out = path_in("cora-from-ogb-npz");
    TG_CHECK_OK(import_kind(out, root, TG_IMPORT_OGB, 0));
    char *got = file_lines(out);
    if (strcmp(want, got)) TG_FAIL("ogb npz layout:\n%s\nCSV:\n%s", got, want);
    free(got);
    TG_CHECK_OK(tg_dataset_verify(out));

    /* One PyG-style archive, every member deflated, zip64 end records. */
    size_t sn[3];
    int64_t *sid[3];
    static const char *const sname[3] = {"train", "valid", "test"};
    for (int k = 0; k < 3; k++) {
        size_t c;
        snprintf(p, sizeof p, "%s/split/planetoid/%s.csv.gz", cora, sname[k]);
        double *v = read_gz(p, &sn[k], &c);
        sid[k] = to_i64(v, sn[k]);
        free(v);
    }
    n = 0;
    add(m, &n, "x.npy", "<f4", s_x, x, fr * fc * 4, 1);
    add(m, &n, "y.npy", "<i8", s_y, y, lr * 8, 1);
    add(m, &n, "edge_index.npy", "<i8", s_ei, ei, 2 * er * 8, 1);
    static const char *const idxn[3] = {"train_idx.npy", "val_idx.npy", "test_idx.npy"};
    for (int k = 0; k < 3; k++) {
        char sh[32];
        snprintf(sh, sizeof sh, "(%zu,)", sn[k]);
        add(m, &n, idxn[k], "<i8", sh, sid[k], sn[k] * 8, 1);
        m[n - 1].zip64 = k == 1;
    }
    const char *npz = path_in("cora.npz");
    write_zip(npz, m, n, NULL, 1);
    free_members(m, n);
    out = path_in("cora-from-npz");
    TG_CHECK_OK(import_kind(out, npz, TG_IMPORT_NPZ, 0));
    got = file_lines(out);
    if (strcmp(want, got)) TG_FAIL("npz:\n%s\nCSV:\n%s", got, want);
    free(got);
    /* The CLI says the same. */
    char *text = NULL;
    out = path_in("cora-cli");
    int rc = tg_test_cli(&text, "import %s --from npz %s", out, npz);
    TG_CHECK(rc == 0);
    if (text && !strstr(text, "2708 nodes, 10556 edges, 1433 features (f32), 7 classes"))
        TG_FAIL("CLI output: %s", text);
    free(text);
    for (int k = 0; k < 3; k++)
        free(sid[k]);
    free(want);
    free(edges);
    free(feat);
    free(lab);
    free(ei);
    free(x);
    free(y);
    free(year);
}

/* ---------------------------------------------------------------- small archives */

/* 4 nodes, 5 edges, D = 3: the graph of test_import_ogb.c's small tree. */
static const int64_t s_ei[10] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 2};
static const float s_x[12] = {1, 2, 3, 4, 5, 6, -7.5f, 0.8f, 9, 0, 0, 1.25f};
static const int64_t s_y[4] = {0, 1, -1, 2};
static const int64_t s_tr[2] = {0, 1}, s_va[1] = {3}, s_te[1] = {2};
static const uint8_t s_mask[4] = {1, 1, 0, 0};

/* Builds the small archive; `over` replaces one member's dtype/shape/data, `drop` leaves one
 * out, `deflate` deflates every member. */
static void small_npz(const char *path, int deflate, const char *drop, const char *over,
                      const char *descr, const char *shape, const void *data, size_t bytes,
                      const damage_t *dmg)
{
    member_t m[8];
    int n = 0;
    struct {
        const char *name, *descr, *shape;
        const void *d;
        size_t b;
    } a[] = {{"edge_index.npy", "<i8", "(2, 5)", s_ei, sizeof s_ei},
             {"node_feat.npy", "<f4", "(4, 3)", s_x, sizeof s_x},
             {"node_label.npy", "<i8", "(4,)", s_y, sizeof s_y},
             {"train_idx.npy", "<i8", "(2,)", s_tr, sizeof s_tr},
             {"valid_idx.npy", "<i8", "(1,)", s_va, sizeof s_va},
             {"test_idx.npy", "<i8", "(1,)", s_te, sizeof s_te}};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        if (drop && !strcmp(drop, a[i].name)) continue;
        if (over && !strcmp(over, a[i].name))
            add(m, &n, a[i].name, descr, shape, data, bytes, deflate);
        else
            add(m, &n, a[i].name, a[i].descr, a[i].shape, a[i].d, a[i].b, deflate);
    }
    write_zip(path, m, n, dmg, 0);
    free_members(m, n);
}

TG_TEST(small)
{
    for (int deflate = 0; deflate < 2; deflate++) {
        const char *src = path_in("small.npz");
        small_npz(src, deflate, NULL, NULL, NULL, NULL, NULL, 0, NULL);
        const char *out = path_in("small-out");
        tg_rmtree(out);
        TG_CHECK_OK(import_kind(out, src, TG_IMPORT_NPZ, 0));
        tg_dataset_t *ds;
        TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
        if (!ds) continue;
        TG_CHECK_EQ_U64(ds->meta.num_nodes, 4);
        TG_CHECK_EQ_U64(ds->meta.num_edges, 5);
        TG_CHECK_EQ_U64(ds->meta.feat_dim, 3);
        TG_CHECK_EQ_U64(ds->meta.num_classes, 3);
        TG_CHECK_EQ_U64(ds->meta.num_train, 2);
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        TG_CHECK(lab[0] == 0 && lab[1] == 1 && lab[2] == -1 && lab[3] == 2);
        free(lab);
        float f[12];
        TG_CHECK_OK(tg_dataset_read_features(ds, 0, 4, f));
        TG_CHECK(!memcmp(f, s_x, sizeof f));
        tg_dataset_close(ds);
    }
    /* Masks instead of index arrays; no valid/test member: empty splits. */
    const char *src = path_in("mask.npz");
    member_t m[8];
    int n = 0;
    add(m, &n, "edge_index.npy", "<i8", "(2, 5)", s_ei, sizeof s_ei, 1);
    add(m, &n, "x.npy", "<f4", "(4, 3)", s_x, sizeof s_x, 0);
    add(m, &n, "y.npy", "<i8", "(4,)", s_y, sizeof s_y, 0);
    add(m, &n, "train_mask.npy", "|b1", "(4,)", s_mask, sizeof s_mask, 1);
    write_zip(src, m, n, NULL, 0);
    free_members(m, n);
    const char *out = path_in("mask-out");
    TG_CHECK_OK(import_kind(out, src, TG_IMPORT_NPZ, 0));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (ds) {
        TG_CHECK_EQ_U64(ds->meta.num_train, 2);
        TG_CHECK_EQ_U64(ds->meta.num_valid, 0);
        tg_dataset_close(ds);
    }
}

/* Each damaged archive: the import fails naming the member (or the archive) and what was
 * expected, and leaves nothing behind. */
static void expect_fail(const char *what, const char *src, tg_import_kind_t kind,
                        const char *needle1, const char *needle2)
{
    const char *out = path_in("bad-out");
    tg_rmtree(out);
    tg_err_clear();
    int rc = import_kind(out, src, kind, 0);
    if (rc >= 0)
        TG_FAIL("%s: the import succeeded", what);
    else if (!strstr(tg_errmsg(), needle1) || (needle2 && !strstr(tg_errmsg(), needle2)))
        TG_FAIL("%s: message '%s' lacks '%s' / '%s'", what, tg_errmsg(), needle1,
                needle2 ? needle2 : "");
    else if (strchr(tg_errmsg(), '\n'))
        TG_FAIL("%s: a message of more than one line", what);
    tg_test_check_no_output(out);
}

TG_TEST(errors)
{
    char src[4300];
    snprintf(src, sizeof src, "%s", path_in("bad.npz"));
    const float xf[10] = {0};
    for (int deflate = 0; deflate < 2; deflate++) {
        damage_t d = {.member = "node_feat.npy", .bad_sig = 1};
        small_npz(src, deflate, NULL, NULL, NULL, NULL, NULL, 0, &d);
        expect_fail("bad local header", src, TG_IMPORT_NPZ, "member 'node_feat.npy'",
                    "bad local header");
        d = (damage_t){.member = "edge_index.npy", .cut = 1};
        small_npz(src, deflate, NULL, NULL, NULL, NULL, NULL, 0, &d);
        expect_fail("truncated member", src, TG_IMPORT_NPZ, "edge_index.npy", "truncated");
        d = (damage_t){.member = "node_label.npy", .flip = !deflate, .bad_crc = deflate};
        small_npz(src, deflate, NULL, NULL, NULL, NULL, NULL, 0, &d);
        expect_fail("CRC mismatch", src, TG_IMPORT_NPZ, "member 'node_label.npy'",
                    "CRC-32 mismatch");
        small_npz(src, deflate, NULL, "edge_index.npy", "<f4", "(2, 5)", xf, 40, NULL);
        expect_fail("wrong dtype", src, TG_IMPORT_NPZ, "edge_index.npy: dtype '<f4'",
                    "expected one of");
        small_npz(src, deflate, NULL, "edge_index.npy", "<i8", "(5, 2)", s_ei, sizeof s_ei, NULL);
        expect_fail("wrong shape", src, TG_IMPORT_NPZ, "edge_index.npy: expected shape (2, E)",
                    "transpose");
        small_npz(src, deflate, NULL, "node_label.npy", "<i8", "(3,)", s_y, 24, NULL);
        expect_fail("wrong label rows", src, TG_IMPORT_NPZ, "node_label.npy: expected shape (4,)",
                    "got (3,)");
        /* the header promises more than the member holds */
        small_npz(src, deflate, NULL, "node_feat.npy", "<f4", "(4, 4)", s_x, sizeof s_x, NULL);
        expect_fail("short data", src, TG_IMPORT_NPZ, "node_feat.npy: truncated", NULL);
        small_npz(src, deflate, "node_feat.npy", NULL, NULL, NULL, NULL, 0, NULL);
        expect_fail("missing member", src, TG_IMPORT_NPZ, "no member 'node_feat.npy' or 'x.npy'",
                    "edge_index.npy");
        small_npz(src, deflate, "edge_index.npy", NULL, NULL, NULL, NULL, 0, NULL);
        expect_fail("missing member", src, TG_IMPORT_NPZ, "no member 'edge_index.npy'", NULL);
        small_npz(src, deflate, NULL, "edge_index.npy", "<i8", "(2, 5)",
                  (const int64_t[10]){0, 1, 2, 3, 9, 1, 2, 3, 0, 2}, 80, NULL);
        expect_fail("id out of range", src, TG_IMPORT_NPZ, "edge_index.npy: member offset",
                    "node id 9 out of range [0, 4)");
    }
    /* an empty stored member is read to its end at once: its CRC is checked at open */
    {
        member_t m[1];
        memset(m, 0, sizeof m);
        snprintf(m[0].name, sizeof m[0].name, "empty.npy");
        m[0].data = malloc(1);
        write_zip(src, m, 1, &(damage_t){.member = "empty.npy", .bad_crc = 1}, 0);
        free(m[0].data);
        tg_zip_t z;
        TG_CHECK_OK(tg_zip_open(&z, src));
        tg_zip_rd_t r;
        if (z.n == 1)
            TG_CHECK_ERR(tg_zip_rd_open(&r, &z, &z.e[0], 0), "'empty.npy': CRC-32 mismatch");
        tg_zip_close(&z);
    }
    /* the archive itself */
    small_npz(src, 0, NULL, NULL, NULL, NULL, NULL, 0, &(damage_t){.trunc_file = 100});
    expect_fail("cut archive", src, TG_IMPORT_NPZ, src, "not a zip archive");
    tg_test_write_file(src, "this is not a zip file, but long enough to hold an end record\n");
    expect_fail("not a zip", src, TG_IMPORT_NPZ, src, "no end of central directory");
    expect_fail("absent", path_in("none.npz"), TG_IMPORT_NPZ, "none.npz", "cannot open");

    /* OGB layout: node-label.npz without node_label */
    char root[4300], p[8700];
    snprintf(root, sizeof root, "%s", path_in("ogb-bad"));
    snprintf(p, sizeof p, "%s/raw", root);
    tg_mkdir_p(p);
    snprintf(p, sizeof p, "%s/split/s1", root);
    tg_mkdir_p(p);
    for (int k = 0; k < 3; k++) {
        static const char *const f[3] = {"train", "valid", "test"}, *const t[3] = {"0\n1\n", "3\n",
                                                                                   "2\n"};
        snprintf(p, sizeof p, "%s/split/s1/%s.csv", root, f[k]);
        tg_test_write_file(p, t[k]);
    }
    member_t m[8];
    int n = 0;
    int64_t four = 4, five = 5;
    add(m, &n, "edge_index.npy", "<i8", "(2, 5)", s_ei, sizeof s_ei, 0);
    add(m, &n, "node_feat.npy", "<f4", "(4, 3)", s_x, sizeof s_x, 1);
    add(m, &n, "num_nodes_list.npy", "<i8", "(1,)", &four, 8, 0);
    add(m, &n, "num_edges_list.npy", "<i8", "(1,)", &five, 8, 0);
    snprintf(p, sizeof p, "%s/raw/data.npz", root);
    write_zip(p, m, n, NULL, 0);
    free_members(m, n);
    n = 0;
    add(m, &n, "labels.npy", "<i8", "(4,)", s_y, sizeof s_y, 0);
    snprintf(p, sizeof p, "%s/raw/node-label.npz", root);
    write_zip(p, m, n, NULL, 0);
    free_members(m, n);
    expect_fail("ogb missing label", root, TG_IMPORT_OGB,
                "node-label.npz: no member 'node_label.npy'", "labels.npy");
    n = 0;
    add(m, &n, "node_label.npy", "<f8", "(4, 1)", (const double[4]){0, 1, NAN, 2}, 32, 1);
    write_zip(p, m, n, NULL, 0);
    free_members(m, n);
    const char *out = path_in("ogb-ok");
    TG_CHECK_OK(import_kind(out, root, TG_IMPORT_OGB, 0));
    tg_dataset_t *ds;
    TG_CHECK_OK(tg_dataset_open(&ds, out, TG_OPEN_CHECK_CHECKSUMS));
    if (ds) {
        int32_t *lab;
        TG_CHECK_OK(tg_dataset_load_labels(ds, &lab));
        TG_CHECK(lab[0] == 0 && lab[1] == 1 && lab[2] == -1 && lab[3] == 2);
        free(lab);
        TG_CHECK(strstr(ds->meta.source, "--split s1") != NULL);
        tg_dataset_close(ds);
    }
}

/* ---------------------------------------------------------------- bounded memory */

/* A random graph of N nodes, E edges and D features as a stored .npz written in pieces (the
 * test must not hold it either), then imported by the CLI in a child: its peak RSS (wait4's
 * ru_maxrss) must stay under --mem. */
static void write_big(const char *path, uint64_t nodes, uint64_t edges, uint32_t dim)
{
    FILE *f = fopen(path, "wb");
    struct {
        const char *name, *descr;
        char shape[64];
        uint64_t bytes, off;
        uint32_t crc;
        size_t hl;
    } a[4] = {{"edge_index.npy", "<i8", "", 2 * edges * 8, 0, 0, 0},
              {"node_feat.npy", "<f4", "", nodes * dim * 4, 0, 0, 0},
              {"node_label.npy", "<i8", "", nodes * 8, 0, 0, 0},
              {"train_idx.npy", "<i8", "", nodes / 2 * 8, 0, 0, 0}};
    snprintf(a[0].shape, 64, "(2, %llu)", (unsigned long long)edges);
    snprintf(a[1].shape, 64, "(%llu, %u)", (unsigned long long)nodes, dim);
    snprintf(a[2].shape, 64, "(%llu,)", (unsigned long long)nodes);
    snprintf(a[3].shape, 64, "(%llu,)", (unsigned long long)(nodes / 2));
    enum { B = 1 << 16 };
    int64_t *buf = malloc(B * 8);
    uint64_t rng = 88172645463325252ull;
    for (int i = 0; i < 4; i++) {
        size_t hl;
        uint8_t *h = npy_bytes(a[i].descr, a[i].shape, NULL, 0, &hl);
        a[i].hl = hl;
        a[i].off = (uint64_t)ftello(f);
        uint64_t total = hl + a[i].bytes;
        fwrite("PK\3\4", 1, 4, f);
        put16(f, 45);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0x21);
        put32(f, 0); /* CRC, patched below */
        put32(f, 0xffffffffu);
        put32(f, 0xffffffffu);
        put16(f, (unsigned)strlen(a[i].name));
        put16(f, 20);
        fwrite(a[i].name, 1, strlen(a[i].name), f);
        put16(f, 1);
        put16(f, 16);
        put64(f, total);
        put64(f, total);
        fwrite(h, 1, hl, f);
        uint32_t crc = (uint32_t)crc32(0, h, (uInt)hl);
        free(h);
        uint64_t count = a[i].bytes / 8 * (i == 1 ? 2 : 1);
        for (uint64_t k = 0; k < count; k += B / (i == 1 ? 2 : 1)) {
            size_t m = (size_t)TG_MIN((uint64_t)B / (i == 1 ? 2 : 1), count - k);
            for (size_t j = 0; j < m; j++) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                if (i == 0)
                    buf[j] = (int64_t)(rng % nodes);
                else if (i == 1)
                    ((float *)buf)[j] = (float)(rng >> 40) / (float)(1 << 24);
                else if (i == 2)
                    buf[j] = (int64_t)(rng % 16);
                else
                    buf[j] = (int64_t)((k + j) * 2);
            }
            size_t bytes = m * (i == 1 ? 4 : 8);
            fwrite(buf, 1, bytes, f);
            crc = (uint32_t)crc32(crc, (const Bytef *)buf, (uInt)bytes);
        }
        a[i].crc = crc;
        off_t end = ftello(f);
        fseeko(f, (off_t)a[i].off + 14, SEEK_SET);
        put32(f, crc);
        fseeko(f, end, SEEK_SET);
    }
    uint64_t cd = (uint64_t)ftello(f);
    for (int i = 0; i < 4; i++) {
        uint64_t total = a[i].hl + a[i].bytes;
        fwrite("PK\1\2", 1, 4, f);
        put16(f, 45);
        put16(f, 45);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0x21);
        put32(f, a[i].crc);
        put32(f, 0xffffffffu);
        put32(f, 0xffffffffu);
        put16(f, (unsigned)strlen(a[i].name));
        put16(f, 28);
        put16(f, 0);
        put16(f, 0);
        put16(f, 0);
        put32(f, 0);
        put32(f, 0xffffffffu);
        fwrite(a[i].name, 1, strlen(a[i].name), f);
        put16(f, 1);
        put16(f, 24);
        put64(f, total);
        put64(f, total);
        put64(f, a[i].off);
    }
    uint64_t cd_end = (uint64_t)ftello(f);
    fwrite("PK\5\6", 1, 4, f);
    put16(f, 0);
    put16(f, 0);
    put16(f, 4);
    put16(f, 4);
    put32(f, (uint32_t)(cd_end - cd));
    put32(f, (uint32_t)cd);
    put16(f, 0);
    fclose(f);
    free(buf);
}

#if defined(__SANITIZE_ADDRESS__)
#define TG_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TG_TEST_ASAN 1
#endif
#endif

TG_TEST(bounded_memory)
{
#ifdef TG_TEST_ASAN
    (void)write_big;
    fprintf(stderr, "SKIP bounded_memory: RSS means nothing under AddressSanitizer\n");
    return;
#else
    /* 64 MiB of --mem for a 120 MB archive: 3M edges (48 MB), 200k x 80 features (64 MB). */
    const char *src = path_in("big.npz");
    write_big(src, 200000, 3000000, 80);
    const char *out = path_in("big-out");
    char mem[] = "64M";
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execl(TG_CLI_PATH, TG_CLI_PATH, "--quiet", "import", out, "--from", "npz", src, "--mem",
              mem, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    TG_CHECK(pid > 0 && wait4(pid, &st, 0, &ru) == pid);
    TG_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    double peak = (double)ru.ru_maxrss / 1024.0;
    fprintf(stderr, "npz import of %.0f MB with --mem %s: peak RSS %.1f MiB\n",
            (double)tg_imp_file_size(src) / 1e6, mem, peak);
    TG_CHECK(peak < 64.0);
    TG_CHECK_OK(tg_dataset_verify(out));
    tg_rmtree(out);
    unlink(src);
#endif
}

int main(void)
{
    tg_log_set_level(TG_LOG_WARN);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-npz"));
    TG_RUN(cora);
    TG_RUN(small);
    TG_RUN(errors);
    TG_RUN(bounded_memory);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
