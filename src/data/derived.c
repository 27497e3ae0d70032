/* derived/ files: what a strategy computes from a dataset, named by its parameters, written
 * atomically and trusted only while the dataset and the parameters still match (header layout
 * in docs/FORMAT.md, "derived/ files"; usage in include/tiergnn/derived.h).
 *
 * The header is written last, at commit: until then the file's first bytes are zeros, so a
 * temp file that escaped its name by some accident would still fail the magic check. */
#include "tiergnn/derived.h"

#include "crc-impl.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HDR_BYTES TG_DERIVED_PAYLOAD_OFFSET
#define MAGIC "TGDERIV1"
#define OFF_KIND 96u
#define OFF_PLEN 128u
#define OFF_PARAMS 132u
#define OFF_HCRC (HDR_BYTES - 4u)
#define NAME_PARAMS_MAX 64 /* longer params are shortened and hashed in the file name */
#define NAME_KEEP 40       /* bytes of params a hashed name keeps */
#define TMP_PREFIX "tmp-"
#define DPATH 4416 /* a directory (4096) + "/" + a temp file name */

_Static_assert(OFF_PARAMS + TG_DERIVED_PARAMS_MAX == OFF_HCRC, "params fill the header");

/* What a derived file was computed from, besides its params. */
typedef struct ident {
    uint64_t num_nodes, num_edges;
    uint32_t feat_dim;
    uint32_t crc[TG_FILE_COUNT];
} ident_t;

typedef struct hdr {
    uint64_t payload_len;
    uint32_t payload_crc;
    ident_t id;
    char kind[TG_DERIVED_KIND_MAX + 1];
    char params[TG_DERIVED_PARAMS_MAX + 1];
} hdr_t;

static void ident_of(ident_t *id, const tg_dataset_t *ds)
{
    memset(id, 0, sizeof *id);
    id->num_nodes = ds->meta.num_nodes;
    id->num_edges = ds->meta.num_edges;
    id->feat_dim = ds->meta.feat_dim;
    for (int i = 0; i < TG_FILE_COUNT; i++)
        id->crc[i] = ds->meta.files[i].crc32;
}

/* ---------------------------------------------------------------- little-endian fields */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Layout (docs/FORMAT.md): magic, version, header bytes, payload length and CRC, the identity,
 * kind, params, and the header's own CRC in its last 4 bytes. */
static void hdr_encode(unsigned char *b, const hdr_t *h)
{
    memset(b, 0, HDR_BYTES);
    memcpy(b, MAGIC, 8);
    put32(b + 8, TG_DERIVED_VERSION);
    put32(b + 12, HDR_BYTES);
    put64(b + 16, h->payload_len);
    put32(b + 24, h->payload_crc);
    put32(b + 28, TG_FILE_COUNT);
    put64(b + 32, h->id.num_nodes);
    put64(b + 40, h->id.num_edges);
    put32(b + 48, h->id.feat_dim);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        put32(b + 52 + 4 * i, h->id.crc[i]);
    memcpy(b + OFF_KIND, h->kind, strlen(h->kind));
    size_t pl = strlen(h->params);
    put32(b + OFF_PLEN, (uint32_t)pl);
    memcpy(b + OFF_PARAMS, h->params, pl);
    put32(b + OFF_HCRC, tg_data_crc32(0, b, OFF_HCRC));
}

/* 0, or -ESTALE with the reason in why. */
static int hdr_decode(const unsigned char *b, hdr_t *h, char *why, size_t wl)
{
    memset(h, 0, sizeof *h);
    if (memcmp(b, MAGIC, 8)) {
        snprintf(why, wl, "not a tiergnn derived file (bad magic)");
        return -ESTALE;
    }
    uint32_t want = get32(b + OFF_HCRC), got = tg_data_crc32(0, b, OFF_HCRC);
    if (want != got) {
        snprintf(why, wl, "bad CRC: header CRC %08x does not match %08x stored (damaged)", got,
                 want);
        return -ESTALE;
    }
    uint32_t version = get32(b + 8), hb = get32(b + 12), nf = get32(b + 28);
    uint32_t pl = get32(b + OFF_PLEN);
    if (version != TG_DERIVED_VERSION || hb != HDR_BYTES || nf != TG_FILE_COUNT) {
        snprintf(why, wl,
                 "format version %u with a %u-byte header and %u dataset files (this tiergnn "
                 "writes version %d)",
                 version, hb, nf, TG_DERIVED_VERSION);
        return -ESTALE;
    }
    if (pl > TG_DERIVED_PARAMS_MAX || !memchr(b + OFF_KIND, 0, TG_DERIVED_KIND_MAX + 1)) {
        snprintf(why, wl, "header fields out of range (params length %u)", pl);
        return -ESTALE;
    }
    h->payload_len = get64(b + 16);
    h->payload_crc = get32(b + 24);
    h->id.num_nodes = get64(b + 32);
    h->id.num_edges = get64(b + 40);
    h->id.feat_dim = get32(b + 48);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        h->id.crc[i] = get32(b + 52 + 4 * i);
    memcpy(h->kind, b + OFF_KIND, TG_DERIVED_KIND_MAX + 1);
    memcpy(h->params, b + OFF_PARAMS, pl);
    h->params[pl] = 0;
    /* the writer takes printable kinds and params only (tg_derived_create): other bytes (a
     * header rewritten with its CRC) make the file another's, and stay out of messages */
    size_t kl = strlen(h->kind);
    for (size_t i = 0; i < kl + pl; i++) {
        unsigned char c = i < kl ? (unsigned char)h->kind[i] : b[OFF_PARAMS + i - kl];
        if (c < 0x20 || c > 0x7e) {
            snprintf(why, wl, "header fields out of range (byte 0x%02x in its %s)", c,
                     i < kl ? "kind" : "params");
            return -ESTALE;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- names */

/* [a-z0-9_]{1,31} and not "tmp" (whose names would look like temp files). */
static int kind_ok(const char *kind, size_t n)
{
    int ok = n > 0 && n <= TG_DERIVED_KIND_MAX && !(n == 3 && !memcmp(kind, "tmp", 3));
    for (size_t i = 0; ok && i < n; i++)
        ok = islower((unsigned char)kind[i]) || isdigit((unsigned char)kind[i]) || kind[i] == '_';
    return ok;
}

static int check_kind(const char *kind)
{
    if (!kind || !kind_ok(kind, strlen(kind)))
        return tg_err(-EINVAL,
                      "derived file kind '%.40s' must be 1..%d characters of [a-z0-9_] and not "
                      "'tmp'",
                      kind ? kind : "(null)", TG_DERIVED_KIND_MAX);
    return 0;
}

static int check_params(const char *params)
{
    size_t n = params ? strlen(params) : 0;
    if (n == 0 || n > TG_DERIVED_PARAMS_MAX)
        return tg_err(-EINVAL, "derived file params must be 1..%d bytes, got %zu",
                      TG_DERIVED_PARAMS_MAX, n);
    for (size_t i = 0; i < n; i++)
        if (params[i] < 0x20 || params[i] > 0x7e)
            return tg_err(-EINVAL,
                          "derived file params '%.40s': byte %zu (0x%02x) is not printable ASCII",
                          params, i, (unsigned char)params[i]);
    return 0;
}

static int name_char_ok(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("._,=+-", c));
}

/* FNV-1a, 64 bits: only to tell long params apart in a file name (the header decides). */
static uint64_t fnv64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

int tg_derived_name(const char *kind, const char *params, char *buf, size_t len)
{
    int rc = check_kind(kind);
    if (!rc) rc = check_params(params);
    if (rc) return rc;
    size_t n = strlen(params);
    int changed = 0;
    for (size_t i = 0; i < n; i++)
        changed |= !name_char_ok(params[i]);
    char part[NAME_PARAMS_MAX + 1];
    size_t keep = changed || n > NAME_PARAMS_MAX ? TG_MIN(n, (size_t)NAME_KEEP) : n;
    for (size_t i = 0; i < keep; i++)
        part[i] = name_char_ok(params[i]) ? params[i] : '_';
    part[keep] = 0;
    int w;
    if (keep < n ||
        changed) /* '~' is not a name character: a hashed name never equals a plain one */
        w = snprintf(buf, len, "%s-%s~%016" PRIx64 ".bin", kind, part, fnv64(params));
    else
        w = snprintf(buf, len, "%s-%s.bin", kind, part);
    if (w < 0 || (size_t)w >= len)
        return tg_err(-ENAMETOOLONG, "derived file name for %s does not fit in %zu bytes", kind,
                      len);
    return 0;
}

/* ---------------------------------------------------------------- where they go */

/* --derived-dir: the process's directory for every call with root NULL ("" when none). Set by
 * the CLI before a run opens; read by the run's threads afterwards. */
static char dir_override[4096];
static pthread_mutex_t said_lock = PTHREAD_MUTEX_INITIALIZER;
static char said_for[4096]; /* the last dataset whose fallback the log named */

int tg_derived_set_dir(const char *dir, int create)
{
    if (!dir || !*dir) {
        dir_override[0] = 0;
        return 0;
    }
    if (strlen(dir) >= sizeof dir_override - 300) /* room for "/" + a temp file name */
        return tg_err(-ENAMETOOLONG, "--derived-dir %.80s...: path longer than %zu bytes", dir,
                      sizeof dir_override - 300);
    if (create) {
        int rc = tg_mkdir_p(dir);
        if (rc < 0)
            return tg_err(rc, "--derived-dir %s: cannot create the directory: %s", dir,
                          strerror(-rc));
        if (access(dir, W_OK | X_OK))
            return tg_err(-errno,
                          "--derived-dir %s: expected a directory this user can write to: %s", dir,
                          strerror(errno));
    }
    snprintf(dir_override, sizeof dir_override, "%s", dir);
    return 0;
}

const char *tg_derived_get_dir(void)
{
    return dir_override[0] ? dir_override : NULL;
}

void tg_derived_own_dir(const tg_dataset_t *ds, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", ds->dir, TG_DERIVED_DIRNAME);
}

/* The dataset's identity as 16 hex digits: FNV-1a over num_nodes, num_edges, feat_dim and the
 * CRC-32 of every file, as meta.txt records them. Two copies of a dataset have one key; a
 * dataset rewritten in place has another, so its fallback files are never taken for it. */
static uint64_t ident_key(const tg_dataset_t *ds)
{
    ident_t id;
    ident_of(&id, ds);
    unsigned char b[20 + 4 * TG_FILE_COUNT];
    put64(b, id.num_nodes);
    put64(b + 8, id.num_edges);
    put32(b + 16, id.feat_dim);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        put32(b + 20 + 4 * i, id.crc[i]);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof b; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int tg_derived_fallback_dir(const tg_dataset_t *ds, char *buf, size_t len)
{
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    /* XDG: a relative $XDG_CACHE_HOME is invalid and ignored */
    if (x && x[0] == '/')
        w = snprintf(buf, len, "%s/tiergnn/derived-%016" PRIx64, x, ident_key(ds));
    else if (home && *home)
        w = snprintf(buf, len, "%s/.cache/tiergnn/derived-%016" PRIx64, home, ident_key(ds));
    else
        return tg_err(-ENOENT,
                      "%s/%s cannot be written and neither $XDG_CACHE_HOME nor $HOME is set "
                      "for a per-user derived directory; give --derived-dir",
                      ds->dir, TG_DERIVED_DIRNAME);
    if (w < 0 || (size_t)w >= len)
        return tg_err(-ENAMETOOLONG, "per-user derived directory longer than %zu bytes", len);
    return 0;
}

/* DATASET/derived is refused to this user: a directory it cannot write to, or missing in a
 * DATASET it cannot write to (a read-only mount says EROFS to access(2) even for root). Other
 * troubles (derived/ is a file, I/O errors) are not a read-only dataset: they stay errors that
 * name derived/. */
static int own_refused(const tg_dataset_t *ds, const char *own)
{
    struct stat st;
    const char *probe = own;
    if (stat(own, &st)) {
        if (errno != ENOENT) return 0;
        probe = ds->dir;
    } else if (!S_ISDIR(st.st_mode)) {
        return 0;
    }
    return access(probe, W_OK | X_OK) && (errno == EACCES || errno == EROFS || errno == EPERM);
}

/* Says once per dataset (per process) where its derived files go instead. */
static void say_fallback(const tg_dataset_t *ds, const char *own, const char *dir, int err)
{
    pthread_mutex_lock(&said_lock);
    int said = !strcmp(said_for, ds->dir);
    if (!said) snprintf(said_for, sizeof said_for, "%s", ds->dir);
    pthread_mutex_unlock(&said_lock);
    if (!said)
        tg_log_info("%s cannot be written (%s); derived and runtime files go to %s, and valid "
                    "files already in %s are still read",
                    own, strerror(err), dir, own);
}

void tg_derived_dir(const tg_dataset_t *ds, const char *root, char *buf, size_t len)
{
    char own[4096];
    if (root) {
        snprintf(buf, len, "%s", root);
        return;
    }
    if (dir_override[0]) {
        snprintf(buf, len, "%s", dir_override);
        return;
    }
    tg_derived_own_dir(ds, own, sizeof own);
    char fb[4096];
    int refused = own_refused(ds, own), e = errno;
    /* no fallback to be had (no $HOME, or it cannot be made): errors name derived/. It is made
     * here, so that callers that only ask for the name (runtime files) find it. */
    if (!refused || tg_derived_fallback_dir(ds, fb, sizeof fb) < 0 || tg_mkdir_p(fb) < 0) {
        snprintf(buf, len, "%s", own);
        return;
    }
    say_fallback(ds, own, fb, e);
    snprintf(buf, len, "%s", fb);
}

int tg_derived_path(const tg_dataset_t *ds, const char *root, const char *kind, const char *params,
                    char *buf, size_t len)
{
    char name[256];
    int rc = tg_derived_name(kind, params, name, sizeof name);
    if (rc) return rc;
    char dir[4096];
    tg_derived_dir(ds, root, dir, sizeof dir);
    int w = snprintf(buf, len, "%s/%s", dir, name);
    if (w < 0 || (size_t)w >= len)
        return tg_err(-ENAMETOOLONG, "%s/%s: path longer than %zu bytes", dir, name, len);
    return 0;
}

/* ---------------------------------------------------------------- temp files */

/* The pid of a temp file's name "tmp-PID-SEQ-...", or -1 for other names. */
static long temp_pid(const char *name)
{
    if (strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX))) return -1;
    const char *p = name + strlen(TMP_PREFIX);
    char *end;
    long pid = strtol(p, &end, 10);
    if (end == p || *end != '-' || pid <= 0) return -1;
    return pid;
}

static int pid_alive(long pid)
{
    return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* Removes temp files of processes that are gone; best effort (a read-only directory keeps
 * them, and listing shows them). */
static void sweep_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = temp_pid(e->d_name);
        if (pid < 0 || pid_alive(pid)) continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            tg_log_debug("%s/%s: removed the temp file of process %ld, which is gone", dir,
                         e->d_name, pid);
    }
    closedir(d);
}

/* ---------------------------------------------------------------- writer */

struct tg_derived_writer {
    char dir[4096], tmp[DPATH], final[DPATH];
    hdr_t h;
    tg_filew_t fw;
    int fw_open;
    int pfd; /* positional writes: their descriptor (-1: none yet) */
    int positional;
    uint64_t pend; /* positional writes: the payload's size */
    int err;       /* first error, returned by every later call */
    char msg[512]; /* its message */
};

static atomic_uint temp_seq;

static int writer_fail(tg_derived_writer_t *w, int rc)
{
    if (!w->err) {
        w->err = rc;
        snprintf(w->msg, sizeof w->msg, "%s", tg_errmsg());
    }
    return rc;
}

int tg_derived_create(tg_derived_writer_t **out, const tg_dataset_t *ds, const char *root,
                      const char *kind, const char *params, size_t buf_bytes)
{
    *out = NULL;
    char name[256];
    int rc = tg_derived_name(kind, params, name, sizeof name);
    if (rc) return rc;
    tg_derived_writer_t *w = calloc(1, sizeof *w);
    if (!w) return tg_err(-ENOMEM, "out of memory for a derived file writer");
    w->pfd = -1;
    tg_derived_dir(ds, root, w->dir, sizeof w->dir);
    snprintf(w->final, sizeof w->final, "%s/%s", w->dir, name);
    snprintf(w->h.kind, sizeof w->h.kind, "%s", kind);
    snprintf(w->h.params, sizeof w->h.params, "%s", params);
    ident_of(&w->h.id, ds);
    if ((rc = tg_mkdir_p(w->dir))) goto fail;
    sweep_temps(w->dir);
    /* Exclusive create, so that two writers in one process (or a pid reused after a crash whose
     * temp file survived) never share a temp file. */
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 1000; tries++) {
        snprintf(w->tmp, sizeof w->tmp, "%s/" TMP_PREFIX "%ld-%u-%s", w->dir, (long)getpid(),
                 atomic_fetch_add(&temp_seq, 1), name);
        fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        rc = tg_err(-errno, "%s: cannot create: %s", w->tmp, strerror(errno));
        goto fail;
    }
    close(fd);
    if ((rc = tg_filew_open(&w->fw, w->tmp, buf_bytes))) {
        unlink(w->tmp);
        goto fail;
    }
    w->fw_open = 1;
    /* The header's room; its contents come at commit. */
    static const unsigned char zeros[HDR_BYTES];
    if ((rc = tg_filew_write(&w->fw, zeros, sizeof zeros))) {
        tg_derived_abort(w);
        return rc;
    }
    *out = w;
    return 0;
fail:
    free(w);
    return rc;
}

int tg_derived_append(tg_derived_writer_t *w, const void *data, size_t len)
{
    if (w->err) return tg_err(w->err, "%s", w->msg);
    if (w->positional)
        return writer_fail(w, tg_err(-EINVAL, "%s: an append after positional writes", w->tmp));
    uint32_t piece = tg_data_crc32(0, data, len);
    int rc = tg_filew_write_crc(&w->fw, data, len, piece);
    if (rc) return writer_fail(w, rc);
    w->h.payload_crc = (uint32_t)crc32_combine64(w->h.payload_crc, piece, (z_off64_t)len);
    w->h.payload_len += len;
    return 0;
}

uint64_t tg_derived_written(const tg_derived_writer_t *w)
{
    return w->positional ? w->pend : w->h.payload_len;
}

/* Positional mode: a second descriptor of the temp file beside the appending writer (which
 * holds only the header's zeros, at bytes [0, 4096) that no payload write reaches). */
static int positional_begin(tg_derived_writer_t *w)
{
    if (w->err) return tg_err(w->err, "%s", w->msg);
    if (w->h.payload_len)
        return writer_fail(w, tg_err(-EINVAL, "%s: a positional write after appends", w->tmp));
    if (w->pfd < 0 && (w->pfd = open(w->tmp, O_WRONLY | O_CLOEXEC)) < 0)
        return writer_fail(w, tg_err(-errno, "%s: cannot reopen: %s", w->tmp, strerror(errno)));
    w->positional = 1;
    return 0;
}

int tg_derived_pwrite(tg_derived_writer_t *w, const void *data, size_t len, uint64_t off)
{
    int rc = positional_begin(w);
    if (!rc) rc = tg_pwrite_full(w->pfd, data, len, HDR_BYTES + off, w->tmp);
    if (rc) return writer_fail(w, rc);
    w->pend = TG_MAX(w->pend, off + len);
    return 0;
}

int tg_derived_set_size(tg_derived_writer_t *w, uint64_t len)
{
    int rc = positional_begin(w);
    if (rc) return rc;
    if (ftruncate(w->pfd, (off_t)(HDR_BYTES + len)))
        return writer_fail(w, tg_err(-errno, "%s: cannot size it to %llu bytes: %s", w->tmp,
                                     (unsigned long long)(HDR_BYTES + len), strerror(errno)));
    w->pend = len;
    return 0;
}

int tg_derived_flush(tg_derived_writer_t *w)
{
    if (w->err) return tg_err(w->err, "%s", w->msg);
    if (w->pfd < 0) return 0;
    if (fdatasync(w->pfd))
        return writer_fail(w, tg_err(-errno, "%s: fdatasync failed: %s", w->tmp, strerror(errno)));
    (void)posix_fadvise(w->pfd, 0, 0, POSIX_FADV_DONTNEED);
    return 0;
}

/* Positional mode at commit: the payload's size, then its CRC from one read back (dropping the
 * pages behind it, so a cgroup-limited rewrite does not fill its page cache). */
static int positional_finish(tg_derived_writer_t *w)
{
    int rc = tg_derived_flush(w);
    if (!rc && ftruncate(w->pfd, (off_t)(HDR_BYTES + w->pend)))
        rc = tg_err(-errno, "%s: cannot size it to %llu bytes: %s", w->tmp,
                    (unsigned long long)(HDR_BYTES + w->pend), strerror(errno));
    if (!rc && fsync(w->pfd)) rc = tg_err(-errno, "%s: fsync failed: %s", w->tmp, strerror(errno));
    if (close(w->pfd) && !rc) rc = tg_err(-errno, "%s: close failed: %s", w->tmp, strerror(errno));
    w->pfd = -1;
    if (rc) return rc;
    int fd = open(w->tmp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot reopen: %s", w->tmp, strerror(errno));
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    uint32_t c = 0;
    if (!buf) rc = tg_err(-ENOMEM, "out of memory");
    for (uint64_t off = 0; !rc && off < w->pend; off += cap) {
        size_t n = (size_t)TG_MIN((uint64_t)cap, w->pend - off);
        rc = tg_pread_full(fd, buf, n, HDR_BYTES + off, w->tmp);
        if (!rc) c = tg_data_crc32(c, buf, n);
        (void)posix_fadvise(fd, (off_t)(HDR_BYTES + off), (off_t)n, POSIX_FADV_DONTNEED);
    }
    free(buf);
    close(fd);
    w->h.payload_len = w->pend;
    w->h.payload_crc = c;
    return rc;
}

/* Writes the header at offset 0 of the (closed, fsynced) temp file and fsyncs it again. */
static int write_header(const tg_derived_writer_t *w)
{
    unsigned char *b = malloc(HDR_BYTES);
    if (!b) return tg_err(-ENOMEM, "out of memory");
    hdr_encode(b, &w->h);
    int fd = open(w->tmp, O_WRONLY | O_CLOEXEC);
    int rc = fd < 0 ? tg_err(-errno, "%s: cannot reopen: %s", w->tmp, strerror(errno)) : 0;
    if (!rc) rc = tg_pwrite_full(fd, b, HDR_BYTES, 0, w->tmp);
    if (!rc && fsync(fd)) rc = tg_err(-errno, "%s: fsync failed: %s", w->tmp, strerror(errno));
    if (fd >= 0 && close(fd) && !rc)
        rc = tg_err(-errno, "%s: close failed: %s", w->tmp, strerror(errno));
    free(b);
    return rc;
}

int tg_derived_commit(tg_derived_writer_t *w)
{
    int rc = w->err ? tg_err(w->err, "%s", w->msg) : 0;
    if (!rc && w->positional) rc = positional_finish(w);
    if (!rc) {
        w->fw_open = 0;
        rc = tg_filew_close(&w->fw, NULL);
    }
    if (!rc) rc = write_header(w);
    if (!rc && rename(w->tmp, w->final))
        rc = tg_err(-errno, "%s: cannot rename %s into place: %s", w->final, w->tmp,
                    strerror(errno));
    if (rc) {
        tg_derived_abort(w);
        return rc;
    }
    rc = tg_fsync_dir(w->dir);
    free(w);
    return rc;
}

void tg_derived_abort(tg_derived_writer_t *w)
{
    if (!w) return;
    if (w->fw_open) tg_filew_discard(&w->fw);
    if (w->pfd >= 0) close(w->pfd);
    unlink(w->tmp);
    free(w);
}

/* ---------------------------------------------------------------- validation */

/* Reads and decodes the header of an open file of size `size`. 0, -ESTALE (why), or -errno. */
static int read_header(int fd, const char *path, uint64_t size, hdr_t *h, char *why, size_t wl)
{
    if (size < HDR_BYTES) {
        snprintf(why, wl, "truncated: %" PRIu64 " bytes, less than the %u-byte header", size,
                 HDR_BYTES);
        return -ESTALE;
    }
    unsigned char *b = malloc(HDR_BYTES);
    if (!b) return tg_err(-ENOMEM, "out of memory");
    int rc = tg_pread_full(fd, b, HDR_BYTES, 0, path);
    if (!rc) rc = hdr_decode(b, h, why, wl);
    free(b);
    return rc;
}

/* Appends "; " + a difference to why. */
static void why_add(char *why, size_t wl, const char *fmt, ...) TG_PRINTF(3, 4);
static void why_add(char *why, size_t wl, const char *fmt, ...)
{
    size_t n = strlen(why);
    if (n + 2 >= wl) return;
    if (n) n += (size_t)snprintf(why + n, wl - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why + n, wl - n, fmt, ap);
    va_end(ap);
}

/* What the header says against what is wanted: kind and params (when given), the dataset,
 * the file size. 0 or -ESTALE (why). */
static int match(const hdr_t *h, const ident_t *id, const char *kind, const char *params,
                 uint64_t size, char *why, size_t wl)
{
    if (kind && strcmp(h->kind, kind)) {
        snprintf(why, wl, "params differ: made as kind '%s', wanted '%s'", h->kind, kind);
        return -ESTALE;
    }
    if (params && strcmp(h->params, params)) {
        snprintf(why, wl, "params differ: made for '%.120s', wanted '%.120s'", h->params, params);
        return -ESTALE;
    }
    char diff[400] = "";
    if (h->id.num_nodes != id->num_nodes)
        why_add(diff, sizeof diff, "%" PRIu64 " nodes then, %" PRIu64 " now", h->id.num_nodes,
                id->num_nodes);
    if (h->id.num_edges != id->num_edges)
        why_add(diff, sizeof diff, "%" PRIu64 " edges then, %" PRIu64 " now", h->id.num_edges,
                id->num_edges);
    if (h->id.feat_dim != id->feat_dim)
        why_add(diff, sizeof diff, "feature width %u then, %u now", h->id.feat_dim, id->feat_dim);
    for (int i = 0; i < TG_FILE_COUNT; i++)
        if (h->id.crc[i] != id->crc[i])
            why_add(diff, sizeof diff, "%s CRC %08x then, %08x now", tg_file_name((tg_file_id_t)i),
                    h->id.crc[i], id->crc[i]);
    if (diff[0]) {
        snprintf(why, wl, "dataset changed since it was built: %s", diff);
        return -ESTALE;
    }
    uint64_t want = HDR_BYTES + h->payload_len;
    if (size != want) {
        snprintf(why, wl, "%s: %" PRIu64 " bytes, the header says %" PRIu64,
                 size < want ? "truncated" : "too long", size, want);
        return -ESTALE;
    }
    return 0;
}

static int check_payload_crc(int fd, const char *path, const hdr_t *h, char *why, size_t wl)
{
    size_t cap = 8u << 20;
    char *buf = malloc(cap);
    if (!buf) return tg_err(-ENOMEM, "out of memory");
    uint32_t c = 0;
    int rc = 0;
    for (uint64_t off = 0; off < h->payload_len && !rc; off += cap) {
        size_t n = (size_t)TG_MIN((uint64_t)cap, h->payload_len - off);
        rc = tg_pread_full(fd, buf, n, HDR_BYTES + off, path);
        c = tg_data_crc32(c, buf, n);
    }
    free(buf);
    if (!rc && c != h->payload_crc) {
        snprintf(why, wl, "bad CRC: payload CRC %08x does not match %08x in the header (damaged)",
                 c, h->payload_crc);
        rc = -ESTALE;
    }
    return rc;
}

/* Opens path and checks it; kind/params NULL: only what the header says of itself. */
static int check_file(const char *path, const ident_t *id, const char *kind, const char *params,
                      unsigned flags, int *fd_out, hdr_t *h, uint64_t *size, char *why, size_t wl)
{
    why[0] = 0;
    memset(h, 0, sizeof *h);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return tg_err(-ENOENT, "%s: not built yet", path);
        return tg_err(-e, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st))
        rc = tg_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = tg_err(-EINVAL, "%s: not a regular file (remove it so that it can be rebuilt)", path);
    *size = rc ? 0 : (uint64_t)st.st_size;
    if (!rc) rc = read_header(fd, path, *size, h, why, wl);
    if (!rc) rc = match(h, id, kind, params, *size, why, wl);
    if (!rc && (flags & TG_DERIVED_VERIFY)) rc = check_payload_crc(fd, path, h, why, wl);
    if (rc == -ESTALE) tg_err(-ESTALE, "%s: stale, %s; rebuild it", path, why);
    if (rc) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

/* ---------------------------------------------------------------- reader */

/* dir is the dataset's own derived/ directory. */
static int same_dir(const tg_dataset_t *ds, const char *dir)
{
    char own[4096];
    tg_derived_own_dir(ds, own, sizeof own);
    return !strcmp(own, dir);
}

int tg_derived_open(tg_derived_file_t **out, const tg_dataset_t *ds, const char *root,
                    const char *kind, const char *params, unsigned flags)
{
    *out = NULL;
    char path[DPATH], dir[4096], why[512];
    int rc = tg_derived_path(ds, root, kind, params, path, sizeof path);
    if (rc) return rc;
    tg_derived_dir(ds, root, dir, sizeof dir);
    sweep_temps(dir);
    ident_t id;
    ident_of(&id, ds);
    hdr_t h;
    uint64_t size;
    int fd;
    if (ds->flags & TG_OPEN_CHECK_CHECKSUMS) flags |= TG_DERIVED_VERIFY; /* --verify's dataset */
    rc = check_file(path, &id, kind, params, flags, &fd, &h, &size, why, sizeof why);
    if ((rc == -ENOENT || rc == -ESTALE) && !root && !same_dir(ds, dir)) {
        /* the files go elsewhere (--derived-dir, or DATASET/derived is read-only), but a valid
         * file the dataset already carries (a snapshot's) is still read */
        char own[DPATH], name[256], msg[1024];
        snprintf(msg, sizeof msg, "%s", tg_errmsg());
        tg_derived_name(kind, params, name, sizeof name);
        tg_derived_own_dir(ds, own, sizeof own);
        size_t ol = strlen(own);
        snprintf(own + ol, sizeof own - ol, "/%s", name);
        if (check_file(own, &id, kind, params, flags, &fd, &h, &size, why, sizeof why) == 0) {
            snprintf(path, sizeof path, "%s", own);
            rc = 0;
        } else {
            tg_err(rc, "%s", msg); /* the error of the directory a rebuild writes to */
        }
    }
    if (rc) return rc;
    tg_derived_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path)) || !(f->params = strdup(params))) {
        if (f) free(f->path);
        free(f);
        close(fd);
        return tg_err(-ENOMEM, "out of memory");
    }
    f->fd = fd;
    f->payload_off = HDR_BYTES;
    f->payload_len = h.payload_len;
    f->payload_crc = h.payload_crc;
    snprintf(f->kind, sizeof f->kind, "%s", kind);
    *out = f;
    return 0;
}

int tg_derived_read(const tg_derived_file_t *f, void *buf, size_t len, uint64_t off)
{
    if (off > f->payload_len || len > f->payload_len - off)
        return tg_err(-EINVAL,
                      "%s: payload bytes %" PRIu64 "..%" PRIu64 " are past its end (%" PRIu64
                      " bytes)",
                      f->path, off, off + len, f->payload_len);
    return tg_pread_full(f->fd, buf, len, f->payload_off + off, f->path);
}

void tg_derived_close(tg_derived_file_t *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f->params);
    free(f);
}

/* ---------------------------------------------------------------- listing */

/* "KIND-....bin" with a valid kind: a name this module could have written. */
static int derived_name_like(const char *name)
{
    const char *dash = strchr(name, '-');
    size_t n = strlen(name);
    if (!dash || n < 5 || strcmp(name + n - 4, ".bin")) return 0;
    return kind_ok(name, (size_t)(dash - name));
}

static void classify(tg_derived_entry_t *e, const char *dir, const ident_t *id)
{
    long pid = temp_pid(e->name);
    if (pid > 0) {
        int live = pid_alive(pid);
        e->state = live ? TG_DERIVED_TEMP_LIVE : TG_DERIVED_TEMP_DEAD;
        snprintf(e->why, sizeof e->why,
                 live ? "temp file of running process %ld"
                      : "temp file of process %ld, which is gone",
                 pid);
        return;
    }
    if (!derived_name_like(e->name)) {
        e->state = TG_DERIVED_OTHER;
        snprintf(e->why, sizeof e->why, "not a derived file");
        return;
    }
    char path[DPATH];
    snprintf(path, sizeof path, "%s/%s", dir, e->name);
    hdr_t h;
    int fd = -1;
    uint64_t size = 0;
    int rc = check_file(path, id, NULL, NULL, 0, &fd, &h, &size, e->why, sizeof e->why);
    if (!rc || rc == -ESTALE) { /* a stale file's header may still have decoded */
        snprintf(e->kind, sizeof e->kind, "%s", h.kind);
        snprintf(e->params, sizeof e->params, "%s", h.params);
    }
    if (!rc) {
        char want[256];
        close(fd);
        if (tg_derived_name(h.kind, h.params, want, sizeof want) || strcmp(want, e->name)) {
            rc = -ESTALE;
            snprintf(e->why, sizeof e->why, "its name does not match its header (renamed?)");
        }
    } else if (rc != -ESTALE) {
        snprintf(e->why, sizeof e->why, "unreadable: %s", tg_errmsg());
    }
    e->state = rc ? TG_DERIVED_STALE : TG_DERIVED_VALID;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tg_derived_entry_t *)a)->name, ((const tg_derived_entry_t *)b)->name);
}

int tg_derived_list(const tg_dataset_t *ds, const char *root, tg_derived_entry_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char dir[4096];
    tg_derived_dir(ds, root, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT) return 0;
        return tg_err(-errno, "%s: cannot list: %s", dir, strerror(errno));
    }
    ident_t id;
    ident_of(&id, ds);
    tg_derived_entry_t *v = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (cnt == cap) {
            cap = cap ? 2 * cap : 8;
            tg_derived_entry_t *p = realloc(v, cap * sizeof *v);
            if (!p) {
                rc = tg_err(-ENOMEM, "%s: out of memory listing", dir);
                break;
            }
            v = p;
        }
        tg_derived_entry_t *e = &v[cnt++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "%s", de->d_name);
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) {
            e->state = TG_DERIVED_OTHER; /* directories, links: not ours */
            snprintf(e->why, sizeof e->why, "not a derived file");
            continue;
        }
        e->bytes = (uint64_t)st.st_size;
        classify(e, dir, &id);
    }
    closedir(d);
    if (rc) {
        free(v);
        return rc;
    }
    if (cnt) qsort(v, cnt, sizeof *v, cmp_entry);
    *out = v;
    *n = cnt;
    return 0;
}

/* ---------------------------------------------------------------- cleaning */

int tg_derived_clean(const tg_dataset_t *ds, const char *root, int stale_only, FILE *log,
                     uint64_t *bytes_freed, size_t *files_removed)
{
    *bytes_freed = 0;
    *files_removed = 0;
    tg_derived_entry_t *v;
    size_t n;
    int rc = tg_derived_list(ds, root, &v, &n);
    if (rc) return rc;
    char dir[4096], path[DPATH], b[32];
    tg_derived_dir(ds, root, dir, sizeof dir);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        tg_derived_entry_t *e = &v[i];
        int drop = e->state == TG_DERIVED_STALE || e->state == TG_DERIVED_TEMP_DEAD ||
                   (e->state == TG_DERIVED_VALID && !stale_only);
        const char *why = e->state == TG_DERIVED_VALID ? "valid" : e->why;
        if (!drop) {
            kept++;
            if (log) fprintf(log, "kept     %s (%s)\n", e->name, why);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->name);
        if (unlink(path) && errno != ENOENT) {
            int r = tg_err(-errno, "%s: cannot remove: %s", path, strerror(errno));
            if (!rc) rc = r;
            kept++;
            continue;
        }
        *bytes_freed += e->bytes;
        (*files_removed)++;
        if (log)
            fprintf(log, "removed  %s (%s, %s)\n", e->name, tg_fmt_bytes(e->bytes, b, sizeof b),
                    why);
    }
    free(v);
    if (!root && same_dir(ds, dir) && n && !kept && !rc && rmdir(dir) == 0 && log)
        fprintf(log, "removed  %s/ (empty)\n", dir);
    return rc;
}
