/* fuzz_common.h - what the libFuzzer targets share: a scratch directory on tmpfs, whole-file I/O
 * that aborts on the environment's errors (never the library's), the error-message oracle, a
 * reader of the input's bytes, and the edit program that turns an input into changes of a valid
 * file (so that the fuzzer starts from files the library accepts and corrupts them the ways
 * files get corrupted: bytes changed, cut short, grown, removed).
 *
 * Every helper is static inline: each target is one translation unit and uses some of them. */
#ifndef TG_FUZZ_COMMON_H
#define TG_FUZZ_COMMON_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/data.h"
#include "tiergnn/derived.h"
#include "tiergnn/util.h"

/* The largest file an edit program may grow a file to. */
#define FZ_MAX_FILE (64u << 10)

/* Oracle: a failure carries a one-line, non-empty message. With TG_FUZZ_VERBOSE set in the
 * environment it is printed (to see what an input from a crash or a corpus does). */
static inline void fz_check_msg(void)
{
    const char *m = tg_errmsg();
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("TG_FUZZ_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "refused: %s\n", m);
    if (!m[0] || strchr(m, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", m);
        abort();
    }
}

/* An oracle failed: say which and what the library said, then crash for libFuzzer. */
static inline void fz_fail(const char *what)
{
    fprintf(stderr, "oracle failed: %s (last message: '%s')\n", what, tg_errmsg());
    abort();
}

static char fz_root_dir[64];

static inline void fz_cleanup(void)
{
    if (fz_root_dir[0]) tg_rmtree(fz_root_dir);
}

/* The target's scratch directory, /dev/shm/tg-fuzz-PID (created on first use, removed at exit;
 * /tmp where there is no /dev/shm). */
static inline const char *fz_root(void)
{
    if (!fz_root_dir[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(fz_root_dir, sizeof fz_root_dir, "%s/tg-fuzz-%d", base, (int)getpid());
        tg_rmtree(fz_root_dir);
        if (tg_mkdir_p(fz_root_dir) < 0) {
            fprintf(stderr, "cannot create %s\n", fz_root_dir);
            abort();
        }
        atexit(fz_cleanup);
    }
    return fz_root_dir;
}

/* fz_root() + "/" + name into a static buffer of its own per call site's slot (0..7). */
static inline const char *fz_path(int slot, const char *name)
{
    static char buf[8][512];
    snprintf(buf[slot & 7], sizeof buf[0], "%s/%s", fz_root(), name);
    return buf[slot & 7];
}

static inline void fz_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        abort();
    }
}

/* A whole file, malloc'd; aborts when it cannot be read. */
static inline uint8_t *fz_read(const char *path, size_t *len)
{
    char *data;
    if (tg_read_file(path, &data, len) < 0) {
        fprintf(stderr, "cannot read %s: %s\n", path, tg_errmsg());
        abort();
    }
    return (uint8_t *)data;
}

/* A small generated dataset at dir (tg_generate, deterministic for the options): nodes nodes,
 * feat_dim features of dtype, classes classes. */
static inline void fz_generate(const char *dir, uint64_t nodes, uint32_t feat_dim, uint32_t classes,
                               tg_feat_dtype_t dtype)
{
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = nodes;
    o.avg_degree = 3;
    o.feat_dim = feat_dim;
    o.classes = classes;
    o.feat_dtype = dtype;
    o.seed = 1;
    o.threads = 1;
    o.mem_bytes = tg_gen_min_mem(&o);
    tg_rmtree(dir);
    if (tg_generate(dir, &o) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", dir, tg_errmsg());
        abort();
    }
}

/* Whether the dataset directories a and b hold the same meta.txt and arrays, byte for byte. */
static inline int fz_same_dataset(const char *a, const char *b)
{
    int same = 1;
    for (int i = 0; i <= TG_FILE_COUNT && same; i++) {
        const char *name = i < TG_FILE_COUNT ? tg_file_name((tg_file_id_t)i) : TG_META_NAME;
        char pa[600], pb[600];
        snprintf(pa, sizeof pa, "%s/%s", a, name);
        snprintf(pb, sizeof pb, "%s/%s", b, name);
        size_t la, lb;
        uint8_t *da = fz_read(pa, &la), *db = fz_read(pb, &lb);
        same = la == lb && !memcmp(da, db, la);
        free(da);
        free(db);
    }
    return same;
}

/* Oracle after a failed write of dataset `out` (a child of fz_root()): neither out nor a
 * temporary directory of it (out.tmp-PID) is left behind. */
static inline void fz_check_no_output(const char *out)
{
    struct stat st;
    if (stat(out, &st) == 0) fz_fail("a failed import left its output directory");
    const char *base = strrchr(out, '/') + 1;
    size_t n = strlen(base);
    DIR *d = opendir(fz_root());
    if (!d) abort();
    struct dirent *de;
    while ((de = readdir(d)))
        if (!strncmp(de->d_name, base, n) && !strncmp(de->d_name + n, ".tmp-", 5))
            fz_fail("a failed import left a temporary directory");
    closedir(d);
}

/* ---------------------------------------------------------------- the input */

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in_t;

/* The next bytes of the input, little-endian; 0 once it is used up. */
static inline uint64_t fz_take(fz_in_t *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)in->p[0] << (8 * i);
    return v;
}

/* ---------------------------------------------------------------- edited files */

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int gone; /* the edit removed the file */
} fz_buf_t;

static inline void fz_buf_set(fz_buf_t *b, const void *data, size_t len)
{
    b->cap = len > FZ_MAX_FILE ? len : FZ_MAX_FILE;
    b->p = malloc(b->cap);
    if (!b->p) abort();
    memcpy(b->p, data, len);
    b->len = len;
    b->gone = 0;
}

static inline void fz_buf_free(fz_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Kinds of edit (fz_edit). */
enum {
    FZ_FLIP,    /* u16 offset, u8 bit: one bit flipped */
    FZ_SET8,    /* u16 offset, u8 value */
    FZ_SET32,   /* u16 offset (4-aligned), u32 value */
    FZ_SET64,   /* u16 offset (8-aligned), u64 value */
    FZ_SMALL32, /* u16 offset (4-aligned), i8 value: small ids and counts, -1 */
    FZ_TRUNC,   /* u16 new length (at most the old) */
    FZ_EXTEND,  /* u8 count, u8 value: count + 1 bytes appended */
    FZ_COPY,    /* u16 offset, u8 count: that many input bytes written there */
    FZ_REMOVE,  /* the file is removed */
    FZ_KINDS
};

/* Applies one edit of kind (mod FZ_KINDS) to b, its arguments taken from in. */
static inline void fz_edit(fz_buf_t *b, unsigned kind, fz_in_t *in)
{
    size_t len = b->len;
    uint64_t off = fz_take(in, 2);
    switch (kind % FZ_KINDS) {
    case FZ_FLIP:
        if (len) b->p[off % len] ^= (uint8_t)(1u << (fz_take(in, 1) & 7));
        break;
    case FZ_SET8:
        if (len) b->p[off % len] = (uint8_t)fz_take(in, 1);
        break;
    case FZ_SET32:
    case FZ_SMALL32: {
        uint32_t v = kind % FZ_KINDS == FZ_SET32 ? (uint32_t)fz_take(in, 4)
                                                 : (uint32_t)(int32_t)(int8_t)fz_take(in, 1);
        if (len >= 4) memcpy(b->p + (off * 4) % (len - 3) / 4 * 4, &v, 4);
        break;
    }
    case FZ_SET64: {
        uint64_t v = fz_take(in, 8);
        if (len >= 8) memcpy(b->p + (off * 8) % (len - 7) / 8 * 8, &v, 8);
        break;
    }
    case FZ_TRUNC:
        b->len = (size_t)(off % (len + 1));
        break;
    case FZ_EXTEND: {
        size_t n = (size_t)(off & 0xff) + 1;
        if (len + n <= b->cap) {
            memset(b->p + len, (int)(off >> 8), n);
            b->len += n;
        }
        break;
    }
    case FZ_COPY: {
        size_t n = (size_t)fz_take(in, 1);
        if (n > in->n) n = in->n;
        if (!len || n > len) break;
        size_t at = (size_t)(off % (len - n + 1));
        memcpy(b->p + at, in->p, n);
        in->p += n;
        in->n -= n;
        break;
    }
    case FZ_REMOVE:
        b->gone = 1;
        break;
    }
}

/* The fix-ups of an edited derived/ file (the targets of derived files: byte 0 of the input):
 * bit 0 of flags rewrites the payload's CRC-32 in the header, bit 0 or 1 the header's own CRC-32,
 * so that edits reach the checks behind them. Returns 1 when the payload's CRC was forged. */
static inline int fz_derived_fixups(fz_buf_t *f, unsigned flags)
{
    int forged = 0;
    if (f->len >= TG_DERIVED_PAYLOAD_OFFSET && (flags & 1)) {
        uint32_t c =
            tg_crc32(0, f->p + TG_DERIVED_PAYLOAD_OFFSET, f->len - TG_DERIVED_PAYLOAD_OFFSET);
        memcpy(f->p + 24, &c, 4);
        forged = 1;
    }
    if (f->len >= TG_DERIVED_PAYLOAD_OFFSET && (flags & 3)) {
        uint32_t c = tg_crc32(0, f->p, TG_DERIVED_PAYLOAD_OFFSET - 4);
        memcpy(f->p + TG_DERIVED_PAYLOAD_OFFSET - 4, &c, 4);
    }
    return forged;
}

/* The edited file written to path (removed when the edit removed it). */
static inline void fz_buf_put(const fz_buf_t *f, const char *path)
{
    if (f->gone)
        unlink(path);
    else
        fz_write(path, f->p, f->len);
}

#endif
