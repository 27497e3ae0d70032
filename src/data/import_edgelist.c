/* `tiergnn import OUT --from edgelist FILE`: SNAP-style text edge lists (plain or .gz).
 *
 * Input: one edge "SRC DST" per line, separated by blanks or tabs; lines starting with '#' or '%'
 * and blank lines are skipped; columns after the second (weights, timestamps) are ignored. An
 * edge SRC DST makes SRC an in-neighbour of DST.
 *
 * Node ids: SNAP files often leave ids unused (web-Google: ids up to 916427 for 875713 nodes).
 * Ids are renumbered by rank: new id = number of distinct ids smaller than the old one. This is
 * the identity when the ids are already 0..N-1, keeps the original order (so the mapping is
 * `sort -un` of the id column), and needs only a bitmap over [0, max id], not a hash table of
 * every id. N must be known before the sort starts, so there are two passes, but the text is
 * parsed only once: pass 1 marks ids and writes the parsed ids as binary into the temporary
 * dataset directory, pass 2 reads that back and feeds renumbered edges to the external sort.
 * Parsing is the expensive part (text is ~3x the size of the binary ids, and parsing runs at a
 * few hundred MB/s), so pass 1 splits a plain file into byte ranges cut at line ends and parses
 * them on several threads, each into its own binary file.
 *
 * Features and labels do not exist in an edge list; they are synthesised (gen_node_data below),
 * so that the result trains end to end. See docs/IMPORT.md for what the labels mean.
 */
#include "import-impl.h"

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- id bitmap with rank */

typedef struct {
    uint64_t *bits;     /* max_words words, zeroed; written concurrently in pass 1 */
    uint64_t nwords;    /* words up to the largest id, after pass 1 */
    uint64_t max_words; /* what a quarter of --mem allows */
    uint64_t max_id;
    /* rank(id) = super_rank[w >> 16] + word_rank[w] + ones of bits[w] below id: one popcount a
     * lookup, 3/16 byte per id in all (bitmap 1/8, word ranks 1/16). */
    uint64_t *super_rank; /* ones before each superblock of 2^16 words */
    uint32_t *word_rank;  /* ones before each word within its superblock */
    uint64_t count;
} idmap_t;

#define IDMAP_BYTES_PER_WORD 12 /* 8 bitmap + 4 word rank (+ negligible superblocks) */

/* Portable popcount: without -mpopcnt, __builtin_popcountll is a libgcc call. */
static inline unsigned popcount64(uint64_t x)
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (unsigned)((x * 0x0101010101010101ull) >> 56);
}

/* The whole bitmap the limit allows is allocated up front, so that the parsing threads can
 * share it without a lock around growing it. calloc of a large block maps zero pages that take
 * memory only once touched, so the resident size still follows the largest id. */
static int idmap_init(idmap_t *m, uint64_t max_words)
{
    memset(m, 0, sizeof *m);
    m->max_words = max_words;
    m->bits = calloc(max_words, 8);
    if (!m->bits) return tg_err(-ENOMEM, "out of memory for the node id bitmap");
    return 0;
}

static int idmap_too_big(const tg_csv_t *c, uint64_t id, uint64_t mem)
{
    char b1[32], b2[32];
    return tg_err(-ENOMEM,
                  "%s: line %llu: node id %llu needs a %s id map, more than a quarter "
                  "of --mem %s; raise --mem",
                  c->path, (unsigned long long)c->line, (unsigned long long)id,
                  tg_fmt_bytes(((id >> 6) + 1) * IDMAP_BYTES_PER_WORD, b1, sizeof b1),
                  tg_fmt_bytes(mem, b2, sizeof b2));
}

/* Marks id; 0, or -1 if it is beyond the map. Several threads mark at once: the word is read
 * first and written (atomically) only when the bit is new, which after the first edges of a
 * graph is rare, so the common case is one plain load and no locked instruction. */
static inline int idmap_mark(idmap_t *m, uint64_t id)
{
    uint64_t w = id >> 6, bit = 1ull << (id & 63);
    if (w >= m->max_words) return -1;
    if (!(__atomic_load_n(&m->bits[w], __ATOMIC_RELAXED) & bit))
        __atomic_fetch_or(&m->bits[w], bit, __ATOMIC_RELAXED);
    return 0;
}

static int idmap_build_rank(idmap_t *m)
{
    m->nwords = (m->max_id >> 6) + 1;
    m->super_rank = malloc(((m->nwords >> 16) + 1) * sizeof *m->super_rank);
    m->word_rank = malloc(TG_MAX(m->nwords, (uint64_t)1) * sizeof *m->word_rank);
    if (!m->super_rank || !m->word_rank)
        return tg_err(-ENOMEM, "out of memory for the id rank table");
    uint64_t acc = 0;
    for (uint64_t w = 0; w < m->nwords; w++) {
        if ((w & 0xffff) == 0) m->super_rank[w >> 16] = acc;
        m->word_rank[w] = (uint32_t)(acc - m->super_rank[w >> 16]);
        acc += popcount64(m->bits[w]);
    }
    m->count = acc;
    return 0;
}

/* Rank of a marked id: new id in 0..count-1. */
static inline uint64_t idmap_rank(const idmap_t *m, uint64_t id)
{
    uint64_t w = id >> 6;
    return m->super_rank[w >> 16] + m->word_rank[w] +
           popcount64(m->bits[w] & ((1ull << (id & 63)) - 1));
}

static void idmap_free(idmap_t *m)
{
    free(m->bits);
    free(m->super_rank);
    free(m->word_rank);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- pass 1: parse once
 *
 * The temporary binary file of a range is a sequence of blocks: a header {u32 n, u32 width}
 * and then n source ids and n destination ids, width (4 or 8) bytes each. A block is 4-byte
 * when all its ids are below 2^32 (nearly always), so the file is half the size of 8-byte ids
 * and usually a third of the text. */

#define BLK_EDGES (1u << 16)        /* edges per block */
#define BIN_BUF (2u << 20)          /* each of a range writer's two buffers */
#define RANGE_MIN_BYTES (16u << 20) /* a file is split only into ranges at least this large */
#define RANGE_MEM (4 + 2 * 2 + 2)   /* MiB a range takes: CSV buffer, writer, block */
#define MAX_RANGES 8
#define RANGE_CANCELLED (-ECANCELED) /* a range stopped because an earlier one failed */

typedef struct pass1 pass1_t;

/* One byte range of the input, parsed by one thread into its own binary file. */
typedef struct {
    pass1_t *p;
    int idx;
    uint64_t begin, end; /* bytes of the file; [0, UINT64_MAX) when it is read by path */
    char bin[4200];      /* its binary file */
    tg_filew_t fw;
    int fw_open;
    uint64_t *bs, *bd; /* the block being filled */
    uint32_t *b32;     /* its 4-byte form */
    size_t bn;
    pthread_t th;
    int started;
    atomic_uint_fast64_t done; /* bytes parsed, for the progress bar */
    /* results */
    uint64_t edges, lines, bytes, max_id;
    uint64_t bin_bytes; /* size of the binary file */
    int rc;
    char msg[1024];
} range_t;

struct pass1 {
    const char *path;
    int fd; /* plain regular file: read in ranges by pread; -1: one range through zlib */
    idmap_t *m;
    uint64_t mem;
    int n;
    range_t *r;
    atomic_int first_bad; /* lowest index of a range that failed (n: none) */
    tg_imp_prog_t pr;
    uint64_t total_bytes;
};

static int row_ids(const tg_csv_t *c, int64_t *s, int64_t *d)
{
    int rc;
    if (tg_csv_nfields(c) < 2)
        return tg_err(-EINVAL, "%s: line %llu: expected two node ids, got %zu field%s", c->path,
                      (unsigned long long)c->line, tg_csv_nfields(c),
                      tg_csv_nfields(c) == 1 ? "" : "s");
    if ((rc = tg_csv_get_i64(c, 0, s)) || (rc = tg_csv_get_i64(c, 1, d))) return rc;
    if (*s < 0 || *d < 0)
        return tg_err(-EINVAL, "%s: line %llu: negative node id %lld", c->path,
                      (unsigned long long)c->line, (long long)(*s < 0 ? *s : *d));
    return 0;
}

static int range_flush(range_t *r)
{
    if (!r->bn) return 0;
    uint64_t any = 0;
    for (size_t i = 0; i < r->bn; i++)
        any |= r->bs[i] | r->bd[i];
    uint32_t hdr[2] = {(uint32_t)r->bn, any >> 32 ? 8 : 4};
    int rc = tg_filew_write(&r->fw, hdr, sizeof hdr);
    if (!rc && hdr[1] == 8) {
        if (!(rc = tg_filew_write(&r->fw, r->bs, r->bn * 8)))
            rc = tg_filew_write(&r->fw, r->bd, r->bn * 8);
    } else if (!rc) {
        for (size_t i = 0; i < r->bn; i++) {
            r->b32[i] = (uint32_t)r->bs[i];
            r->b32[r->bn + i] = (uint32_t)r->bd[i];
        }
        rc = tg_filew_write(&r->fw, r->b32, r->bn * 8);
    }
    r->bn = 0;
    return rc;
}

static void prog_update(pass1_t *p)
{
    uint64_t done = 0;
    for (int k = 0; k < p->n; k++)
        done += atomic_load_explicit(&p->r[k].done, memory_order_relaxed);
    tg_imp_prog_update(&p->pr, done);
}

/* Parses range r, numbering its lines from first_line + 1. With write, the edges go to r's
 * binary file; without, the range is only checked (to reproduce an error message with the
 * right line number). */
static int range_parse(range_t *r, uint64_t first_line, int write)
{
    pass1_t *p = r->p;
    unsigned fl = TG_CSV_WS | TG_CSV_COMMENTS | TG_CSV_SKIP_BLANK | TG_CSV_ALLOW_EMPTY;
    tg_csv_t c;
    int rc = p->fd >= 0 ? tg_csv_open_range(&c, p->fd, p->path, fl, r->begin, r->end, first_line)
                        : tg_csv_open(&c, p->path, fl);
    if (rc) return rc;
    uint64_t e = 0, mx = 0;
    idmap_t *m = p->m;
    int64_t s, d;
    while ((rc = tg_csv_next_pair(&c, &s, &d)) > 0) {
        if (rc == 1 && (rc = row_ids(&c, &s, &d))) break;
        uint64_t us = (uint64_t)s, ud = (uint64_t)d;
        if (idmap_mark(m, us) || idmap_mark(m, ud)) {
            rc = idmap_too_big(&c, us >> 6 >= m->max_words ? us : ud, p->mem);
            break;
        }
        mx = TG_MAX(mx, TG_MAX(us, ud));
        if (write) {
            r->bs[r->bn] = us;
            r->bd[r->bn++] = ud;
            if (r->bn == BLK_EDGES && (rc = range_flush(r))) break;
        }
        if ((++e & 0xffff) == 0) {
            atomic_store_explicit(&r->done, tg_csv_offset(&c) - (p->fd >= 0 ? r->begin : 0),
                                  memory_order_relaxed);
            if (r->idx == 0 && write) prog_update(p);
            if (atomic_load_explicit(&p->first_bad, memory_order_relaxed) < r->idx) {
                rc = RANGE_CANCELLED;
                break;
            }
        }
    }
    if (!rc && write) rc = range_flush(r);
    r->edges = e;
    r->lines = c.line - first_line;
    r->bytes = c.bytes_in;
    r->max_id = mx;
    tg_csv_close(&c);
    return rc;
}

/* Runs range r (on its thread, or inline) and records the outcome. */
static void *range_main(void *arg)
{
    range_t *r = arg;
    int rc = range_parse(r, 0, 1);
    r->bin_bytes = tg_filew_size(&r->fw);
    /* The binary file is complete only when closed (close writes the unaligned tail). */
    if (!rc)
        rc = tg_filew_close(&r->fw, NULL);
    else
        tg_filew_discard(&r->fw);
    r->fw_open = 0;
    r->rc = rc;
    if (rc && rc != RANGE_CANCELLED) {
        snprintf(r->msg, sizeof r->msg, "%s", tg_errmsg());
        /* Ranges after this one may stop: only the first error in file order is reported. */
        int cur = atomic_load(&r->p->first_bad);
        while (cur > r->idx && !atomic_compare_exchange_weak(&r->p->first_bad, &cur, r->idx))
            ;
    }
    return NULL;
}

/* Offset just after the first newline at or after off (size if there is none). */
static int next_line_start(pass1_t *p, uint64_t off, uint64_t size, uint64_t *out)
{
    char buf[1 << 16];
    while (off < size) {
        ssize_t n = pread(p->fd, buf, (size_t)TG_MIN((uint64_t)sizeof buf, size - off), (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return tg_err(-errno, "%s: read error at offset %llu: %s", p->path,
                          (unsigned long long)off, strerror(errno));
        if (n == 0) break;
        char *nl = memchr(buf, '\n', (size_t)n);
        if (nl) {
            *out = off + (uint64_t)(nl - buf) + 1;
            return 0;
        }
        off += (uint64_t)n;
    }
    *out = size;
    return 0;
}

static void pass1_free(pass1_t *p)
{
    for (int k = 0; k < p->n && p->r; k++) {
        range_t *r = &p->r[k];
        if (r->fw_open) tg_filew_discard(&r->fw);
        free(r->bs);
        free(r->bd);
        free(r->b32);
    }
    free(p->r);
    p->r = NULL;
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

/* Opens the input (before the output directory is created, so that a missing file is the first
 * error) and decides how it is read: a plain regular file in ranges on several threads, a gzip
 * file or a pipe in one range through zlib (a .gz stream cannot be entered in the middle; its
 * handle already inflates on a thread of its own). */
static int pass1_open(pass1_t *p, const char *path, idmap_t *m, uint64_t mem)
{
    memset(p, 0, sizeof *p);
    p->path = path;
    p->fd = -1;
    p->m = m;
    p->mem = mem;
    struct stat st;
    if (stat(path, &st)) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    p->total_bytes = (uint64_t)st.st_size;
    if (!S_ISREG(st.st_mode)) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    unsigned char magic[2] = {0, 0};
    ssize_t n = pread(fd, magic, 2, 0);
    if (n == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
        close(fd); /* gzip: zlib reads it */
        return 0;
    }
    p->fd = fd;
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

/* Splits the input into nranges (0: as many as the cores, the size and the memory allow) and
 * parses them. The binary files go into dir. */
static int pass1_run(pass1_t *p, const char *dir, int nranges)
{
    uint64_t size = p->total_bytes;
    int n = 1;
    if (p->fd >= 0 && nranges > 0) {
        n = TG_MIN(nranges, MAX_RANGES);
    } else if (p->fd >= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        uint64_t by_mem = p->mem / 2 / ((uint64_t)RANGE_MEM << 20);
        uint64_t k = TG_MIN(TG_MIN((uint64_t)(cpus > 0 ? cpus : 1), (uint64_t)MAX_RANGES),
                            TG_MIN(size / RANGE_MIN_BYTES, by_mem));
        n = (int)TG_MAX(k, (uint64_t)1);
    }
    p->r = calloc((size_t)n, sizeof *p->r);
    if (!p->r) return tg_err(-ENOMEM, "out of memory");
    p->n = n;
    atomic_init(&p->first_bad, n);
    int rc = 0;
    uint64_t prev = 0;
    for (int k = 0; k < n && !rc; k++) {
        range_t *r = &p->r[k];
        r->p = p;
        r->idx = k;
        atomic_init(&r->done, 0);
        if (p->fd < 0) {
            r->begin = 0;
            r->end = UINT64_MAX;
        } else {
            r->begin = prev;
            if (k == n - 1)
                r->end = size;
            else if ((rc = next_line_start(p, TG_MAX(size / (uint64_t)n * (uint64_t)(k + 1), prev),
                                           size, &r->end)))
                break;
            prev = r->end;
        }
        snprintf(r->bin, sizeof r->bin, "%s/edges-%d.bin", dir, k);
        r->bs = malloc(BLK_EDGES * sizeof *r->bs);
        r->bd = malloc(BLK_EDGES * sizeof *r->bd);
        r->b32 = malloc(2 * BLK_EDGES * sizeof *r->b32);
        if (!r->bs || !r->bd || !r->b32) rc = tg_err(-ENOMEM, "out of memory for edge blocks");
        if (!rc && !(rc = tg_filew_open(&r->fw, r->bin, BIN_BUF))) r->fw_open = 1;
    }
    if (rc) return rc;

    tg_imp_prog_begin(&p->pr, "edges (pass 1/2: parse)", size);
    for (int k = 1; k < n; k++)
        p->r[k].started = !pthread_create(&p->r[k].th, NULL, range_main, &p->r[k]);
    range_main(&p->r[0]);
    for (int k = 1; k < n; k++) {
        if (p->r[k].started)
            pthread_join(p->r[k].th, NULL);
        else
            range_main(&p->r[k]); /* no thread: parse it here, in order */
    }
    /* The first failure in file order. The ranges before it finished, so their line counts
     * give its first line; its message named lines from its own start, so it is parsed again
     * (without output) to produce the message with the right line. */
    uint64_t lines = 0;
    for (int k = 0; k < n; k++) {
        range_t *r = &p->r[k];
        if (r->rc && r->rc != RANGE_CANCELLED) {
            tg_imp_prog_end(&p->pr, 0);
            if (k > 0 && p->fd >= 0) {
                int rc2 = range_parse(r, lines, 0);
                if (rc2 && rc2 != RANGE_CANCELLED) return rc2;
            }
            return tg_err(r->rc, "%s", r->msg); /* an error that did not happen again */
        }
        lines += r->lines;
    }
    tg_imp_prog_end(&p->pr, 1);
    return 0;
}

/* ---------------------------------------------------------------- pass 2: binary to sort */

#define BINR_BUF (4u << 20) /* holds more than the largest block (1 MiB + 8 bytes) */

typedef struct {
    int fd;
    const char *path;
    uint8_t *buf;
    size_t len, pos;
    uint64_t off; /* file offset of buf[len] */
} binr_t;

/* Makes n bytes available at buf + pos; *eof = 1 if the file ends exactly at pos. */
static int binr_need(binr_t *r, size_t n, int *eof)
{
    *eof = 0;
    if (r->len - r->pos >= n) return 0;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
    while (r->len < n) {
        ssize_t got = read(r->fd, r->buf + r->len, BINR_BUF - r->len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return tg_err(-errno, "%s: read error at offset %llu: %s", r->path,
                          (unsigned long long)r->off, strerror(errno));
        if (got == 0) {
            if (r->len == 0) {
                *eof = 1;
                return 0;
            }
            return tg_err(-EIO, "%s: truncated temporary file: it ends at offset %llu", r->path,
                          (unsigned long long)r->off);
        }
        r->len += (size_t)got;
        r->off += (uint64_t)got;
    }
    return 0;
}

static int pass2(tg_imp_t *im, pass1_t *p, const idmap_t *m, int dense, uint64_t edges)
{
    binr_t r = {.fd = -1};
    r.buf = malloc(BINR_BUF);
    if (!r.buf) return tg_err(-ENOMEM, "out of memory for the edge read buffer");
    uint64_t total = 0, before = 0;
    for (int k = 0; k < p->n; k++)
        total += p->r[k].bin_bytes;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "edges (pass 2/2)", total);
    uint64_t e = 0, max_id = m->max_id;
    int rc = 0;
    const int both = im->o->undirected;
    tg_edgesort_expect(im->es, (both ? 2 : 1) * edges);
    /* Whole blocks go into the sort as packed keys written into its run buffer when it holds
     * a block: no per-edge call, no copy through tg_edgesort_add. */
    const unsigned kb = tg_edgesort_key_bits(im->es);
    const int packed = kb && tg_edgesort_capacity(im->es) >= (both ? 2u : 1u) * BLK_EDGES;
    for (int k = 0; k < p->n && !rc; k++) {
        r.path = p->r[k].bin;
        r.len = r.pos = 0;
        r.off = 0;
        r.fd = open(r.path, O_RDONLY | O_CLOEXEC);
        if (r.fd < 0) {
            rc = tg_err(-errno, "%s: cannot open: %s", r.path, strerror(errno));
            break;
        }
        posix_fadvise(r.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        for (;;) {
            int eof;
            if ((rc = binr_need(&r, 8, &eof)) || eof) break;
            uint32_t hdr[2];
            memcpy(hdr, r.buf + r.pos, 8);
            uint64_t at = r.off - (r.len - r.pos);
            if (hdr[0] == 0 || hdr[0] > BLK_EDGES || (hdr[1] != 4 && hdr[1] != 8)) {
                rc = tg_err(-EIO, "%s: offset %llu: corrupt temporary file (block of %u x %u)",
                            r.path, (unsigned long long)at, hdr[0], hdr[1]);
                break;
            }
            size_t n = hdr[0], w = hdr[1];
            if ((rc = binr_need(&r, 8 + 2 * n * w, &eof))) break;
            const uint8_t *bs = r.buf + r.pos + 8, *bd = bs + n * w;
            r.pos += 8 + 2 * n * w;
            uint64_t *keys = NULL;
            size_t nk = 0;
            if (packed && ((rc = tg_imp_flush_edges(im)) ||
                           (rc = tg_edgesort_reserve(im->es, (both ? 2 : 1) * n, &keys))))
                break;
            for (size_t i = 0; i < n; i++) {
                uint64_t us, ud;
                if (w == 4) {
                    uint32_t a, b;
                    memcpy(&a, bs + 4 * i, 4);
                    memcpy(&b, bd + 4 * i, 4);
                    us = a;
                    ud = b;
                } else {
                    memcpy(&us, bs + 8 * i, 8);
                    memcpy(&ud, bd + 8 * i, 8);
                }
                if (us > max_id || ud > max_id) {
                    rc = tg_err(-EIO, "%s: offset %llu: corrupt temporary file (id %llu > %llu)",
                                r.path, (unsigned long long)at, (unsigned long long)TG_MAX(us, ud),
                                (unsigned long long)max_id);
                    break;
                }
                if (!dense) {
                    us = idmap_rank(m, us);
                    ud = idmap_rank(m, ud);
                }
                if (keys) { /* the keys tg_imp_edge would add */
                    keys[nk++] = ud << kb | us;
                    if (both && us != ud) keys[nk++] = us << kb | ud;
                } else if ((rc = tg_imp_edge(im, us, ud))) {
                    break;
                }
            }
            if (keys) {
                int crc = tg_edgesort_commit(im->es, rc ? 0 : nk);
                if (!rc) {
                    rc = crc;
                    im->edges_in += n;
                }
            }
            if (rc) break;
            e += n;
            tg_imp_prog_update(&pr, before + r.off);
        }
        close(r.fd);
        r.fd = -1;
        before += r.off;
        /* Read: its space is free again before the sort's merge needs disk. */
        if (!rc) unlink(r.path);
    }
    tg_imp_prog_end(&pr, rc == 0);
    free(r.buf);
    if (!rc && e != edges)
        rc = tg_err(-EIO, "%s: the temporary files hold %llu edges, not %llu", p->path,
                    (unsigned long long)e, (unsigned long long)edges);
    return rc;
}

/* ---------------------------------------------------------------- synthetic node data
 *
 * The same recipe as `tiergnn generate` (features = class centroid + Gaussian noise, random
 * split), written here so the importer does not depend on the generator's internals. Labels
 * come from the graph: a few rounds of label propagation from random seeds, so that neighbours
 * tend to share a class and a GNN has something to learn from the edges. */

#define LP_ROUNDS 3

/* Sequential reader of an array file of the temp dataset in blocks, widened to u64. */
typedef struct {
    int fd;
    const char *path;
    size_t isz; /* bytes per element on disk: 4 or 8 */
    uint8_t *raw;
    uint64_t *v;
    size_t cap, n, pos; /* elements */
    uint64_t off;       /* next file offset */
} seqr_t;

#define SEQR_ELEMS (1u << 16)

static int seqr_open(seqr_t *r, const char *path, size_t isz, uint8_t *raw, uint64_t *v)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->isz = isz;
    r->raw = raw;
    r->v = v;
    r->cap = SEQR_ELEMS;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
}

/* Reads the next block; an error if the file ends first (it was written moments ago). */
static int seqr_fill(seqr_t *r)
{
    ssize_t got = pread(r->fd, r->raw, r->cap * r->isz, (off_t)r->off);
    if (got < 0) return tg_err(-errno, "%s: read error: %s", r->path, strerror(errno));
    size_t n = (size_t)got / r->isz;
    if (!n)
        return tg_err(-EIO, "%s: offset %llu: unexpected end of file", r->path,
                      (unsigned long long)r->off);
    r->off += n * r->isz;
    if (r->isz == 8) {
        memcpy(r->v, r->raw, n * 8);
    } else {
        for (size_t i = 0; i < n; i++) {
            uint32_t x;
            memcpy(&x, r->raw + 4 * i, 4);
            r->v[i] = x;
        }
    }
    r->n = n;
    r->pos = 0;
    return 0;
}

static inline int seqr_get(seqr_t *r, uint64_t *out)
{
    if (r->pos == r->n) {
        int rc = seqr_fill(r);
        if (rc) return rc;
    }
    *out = r->v[r->pos++];
    return 0;
}

/* One synchronous round over nodes [v0, v1): next[v] = most frequent label among v and its
 * in-neighbours. The label lookups cur[u] are random accesses; prefetching a few edges ahead
 * keeps several cache misses in flight (it halved the time of a round on a random graph). The
 * round reads only cur and writes only next[v0, v1), so node ranges run on separate threads
 * and give the same labels. */
typedef struct {
    tg_imp_t *im;
    const uint16_t *cur;
    uint16_t *next;
    uint64_t v0, v1;
    uint32_t *cnt;     /* classes counters, zero between nodes */
    uint16_t *touched; /* classes + 1 */
    void *bufs;        /* 4 * SEQR_ELEMS * 8 bytes: raw + widened, indptr and indices */
    pthread_t th;
    int started;
    int rc;
    char msg[1024];
} lp_part_t;

static int lp_round(lp_part_t *pt)
{
    tg_imp_t *im = pt->im;
    const uint16_t *cur = pt->cur;
    uint16_t *next = pt->next;
    uint32_t *cnt = pt->cnt;
    uint16_t *touched = pt->touched;
    const tg_meta_t *m = &im->dsw.meta;
    char pp[4096], pi[4096];
    tg_dsw_path(&im->dsw, TG_FILE_INDPTR, pp, sizeof pp);
    tg_dsw_path(&im->dsw, TG_FILE_INDICES, pi, sizeof pi);
    uint8_t *raw = pt->bufs;
    uint64_t *vals = (uint64_t *)(raw + 2 * (size_t)SEQR_ELEMS * 8);
    size_t isz = tg_index_dtype_size(m->index_dtype);
    seqr_t rp, ri;
    int rc = seqr_open(&rp, pp, 8, raw, vals);
    if (rc) return rc;
    if ((rc = seqr_open(&ri, pi, isz, raw + SEQR_ELEMS * 8, vals + SEQR_ELEMS))) {
        close(rp.fd);
        return rc;
    }
    enum { AHEAD = 16 };
    uint64_t beg = 0, end = 0;
    rp.off = pt->v0 * 8;
    if ((rc = seqr_get(&rp, &beg))) goto out;
    ri.off = beg * isz;
    for (uint64_t v = pt->v0; v < pt->v1; v++, beg = end) {
        if ((rc = seqr_get(&rp, &end))) goto out;
        size_t nt = 0;
        uint16_t best = cur[v];
        cnt[best] = 1;
        touched[nt++] = best;
        uint32_t bestc = 1;
        for (uint64_t k = beg; k < end; k++) {
            if (ri.pos == ri.n && (rc = seqr_fill(&ri))) goto out;
            if (ri.pos + AHEAD < ri.n) __builtin_prefetch(cur + ri.v[ri.pos + AHEAD]);
            uint16_t l = cur[ri.v[ri.pos++]];
            if (!cnt[l]) touched[nt++] = l;
            if (++cnt[l] > bestc) {
                bestc = cnt[l];
                best = l;
            }
        }
        next[v] = best;
        for (size_t k = 0; k < nt; k++)
            cnt[touched[k]] = 0;
    }
out:
    close(rp.fd);
    close(ri.fd);
    return rc;
}

static void *lp_main(void *arg)
{
    lp_part_t *pt = arg;
    pt->rc = lp_round(pt);
    if (pt->rc) snprintf(pt->msg, sizeof pt->msg, "%s", tg_errmsg());
    return NULL;
}

/* Runs one round on all parts (part 0 on this thread) and returns the first part's error. */
static int lp_round_all(lp_part_t *pts, int n, const uint16_t *cur, uint16_t *next)
{
    for (int k = 0; k < n; k++) {
        pts[k].cur = cur;
        pts[k].next = next;
    }
    for (int k = 1; k < n; k++)
        pts[k].started = !pthread_create(&pts[k].th, NULL, lp_main, &pts[k]);
    lp_main(&pts[0]);
    for (int k = 1; k < n; k++) {
        if (pts[k].started)
            pthread_join(pts[k].th, NULL);
        else
            lp_main(&pts[k]); /* no thread: here */
    }
    for (int k = 0; k < n; k++)
        if (pts[k].rc) return tg_err(pts[k].rc, "%s", pts[k].msg);
    return 0;
}

/* Fills out[0..n) with approximately N(0,1) noise: the Irwin-Hall sum of four 16-bit uniforms
 * from one 64-bit draw, centred and scaled to unit variance (bounded at +-3.46). It is noise on
 * a synthetic signal, so the missing tails do not matter, and it costs one RNG call and no
 * log/sqrt/cos per value: exact normals made the synthesis the slowest part of the import. */
static void noise(tg_rng_t *r, float *out, uint32_t n)
{
    const float scale = 1.7320508f / 65536.0f; /* sqrt(12/4) / 2^16 */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = tg_rng_u64(r);
        uint32_t s = (uint32_t)(x & 0xffff) + (uint32_t)(x >> 16 & 0xffff) +
                     (uint32_t)(x >> 32 & 0xffff) + (uint32_t)(x >> 48);
        out[i] = ((float)s - 2.0f * 65535.0f) * scale;
    }
}

/* The random class a node starts from (and keeps when there is no propagation). */
static uint16_t seed_label(const tg_import_opts_t *o, uint64_t v)
{
    tg_rng_t r;
    tg_rng_seed2(&r, o->seed ^ 0x6c61626c, v);
    return (uint16_t)tg_rng_below(&r, o->classes);
}

/* nthreads > 0 fixes the threads of label propagation (tests: small graphs use one). */
static int gen_node_data(tg_imp_t *im, int nthreads)
{
    const tg_import_opts_t *o = im->o;
    tg_meta_t *m = &im->dsw.meta;
    uint64_t n = m->num_nodes;
    uint32_t c = o->classes, d = o->feat_dim;
    int rc = 0;
    uint16_t *lab = NULL, *nxt = NULL, *tmp = NULL;
    lp_part_t *parts = NULL;
    int nparts = 0;
    float *mu = NULL, *row = NULL;

    /* Labels: random seeds, then LP_ROUNDS of majority vote over in-neighbours. That needs two
     * label arrays (4 bytes a node); the sort is finished, so its share of --mem is free again.
     * Without the memory (or with one class) labels stay the random seeds, computed per node
     * on the fly below, so memory stays bounded either way. */
    tg_rng_t rng;
    /* Threads for the rounds: each takes 2 MiB of read buffers, small graphs need none, and
     * whether labels propagate at all must not depend on how many there are (the same
     * dataset for any machine), so threads only get what --mem has left. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    nparts = (int)TG_MAX(1, TG_MIN(TG_MIN(cpus, 8L), (long)(m->num_edges >> 20)));
    if (nthreads > 0) nparts = (int)TG_MIN((uint64_t)TG_MIN(nthreads, 8), TG_MAX(n, (uint64_t)1));
    size_t part_bytes = 4 * (size_t)SEQR_ELEMS * 8 + (size_t)c * 4 + ((size_t)c + 1) * 2;
    while (nparts > 1 && n * 2 * sizeof *lab + (uint64_t)nparts * part_bytes > o->mem_bytes)
        nparts--;
    if (c > 1 && n * 2 * sizeof *lab <= o->mem_bytes) {
        lab = malloc(n * sizeof *lab);
        nxt = malloc(n * sizeof *nxt);
        parts = calloc((size_t)nparts, sizeof *parts);
        if (!lab || !nxt || !parts) {
            rc = tg_err(-ENOMEM, "out of memory for label propagation over %llu nodes",
                        (unsigned long long)n);
            goto out;
        }
        for (int k = 0; k < nparts; k++) {
            lp_part_t *pt = &parts[k];
            pt->im = im;
            pt->v0 = n * (uint64_t)k / (uint64_t)nparts;
            pt->v1 = n * (uint64_t)(k + 1) / (uint64_t)nparts;
            pt->cnt = calloc(c, sizeof *pt->cnt);
            pt->touched = malloc(((size_t)c + 1) * sizeof *pt->touched);
            pt->bufs = malloc(4 * (size_t)SEQR_ELEMS * 8); /* raw + widened, indptr and indices */
            if (!pt->cnt || !pt->touched || !pt->bufs) {
                rc = tg_err(-ENOMEM, "out of memory for label propagation over %llu nodes",
                            (unsigned long long)n);
                goto out;
            }
        }
        for (uint64_t v = 0; v < n; v++)
            lab[v] = seed_label(o, v);
        double t0 = tg_now();
        for (int r = 0; r < LP_ROUNDS; r++) {
            if ((rc = lp_round_all(parts, nparts, lab, nxt))) goto out;
            uint16_t *t = lab;
            lab = nxt;
            nxt = t;
        }
        tg_log_info("labels: %d rounds of label propagation in %.1f s", LP_ROUNDS, tg_now() - t0);
    } else if (c > 1) {
        tg_log_warn("edgelist: labels are random, not from the graph (label propagation needs "
                    "%llu bytes, more than --mem)",
                    (unsigned long long)(n * 4));
    }
    free(nxt);
    nxt = NULL;

    /* Features: centroid of the class (N(0,1) per dimension) + feat_noise * noise(0,1). */
    mu = malloc((size_t)c * d * sizeof *mu);
    row = malloc((size_t)d * sizeof *row);
    tmp = malloc((size_t)d * sizeof *tmp);
    if (!mu || !row || !tmp) {
        rc = tg_err(-ENOMEM, "out of memory for %u class centroids of dimension %u", c, d);
        goto out;
    }
    tg_rng_seed2(&rng, o->seed, 0xce47);
    for (size_t i = 0; i < (size_t)c * d; i++)
        mu[i] = (float)tg_rng_normal(&rng);
    tg_filew_t fw[5];
    int open_n = 0;
    static const tg_file_id_t ids[5] = {TG_FILE_FEATURES, TG_FILE_LABELS, TG_FILE_TRAIN,
                                        TG_FILE_VALID, TG_FILE_TEST};
    for (; open_n < 5; open_n++)
        if ((rc = tg_imp_open(im, ids[open_n], &fw[open_n], open_n ? (1u << 20) : 0))) break;
    tg_imp_prog_t pr;
    tg_imp_prog_begin(&pr, "features", n * d * tg_feat_dtype_size(o->feat_dtype));
    double t1 = o->train_frac, t2 = t1 + o->valid_frac, t3 = t2 + o->test_frac;
    tg_rng_seed2(&rng, o->seed, 0x5b1d);
    double split_start = tg_rng_uniform(&rng) * t1;
    for (uint64_t v = 0; v < n && !rc; v++) {
        tg_rng_seed2(&rng, o->seed, v + 1);
        uint16_t lv = lab ? lab[v] : seed_label(o, v);
        const float *mc = mu + (size_t)lv * d;
        noise(&rng, row, d);
        for (uint32_t j = 0; j < d; j++)
            row[j] = mc[j] + (float)o->feat_noise * row[j];
        if ((rc = tg_imp_put_feat_row(im, &fw[0], row, d, tmp))) break;
        int32_t l = lv;
        if ((rc = tg_filew_write(&fw[1], &l, 4))) break;
        /* Golden-ratio (Weyl) sequence from a seeded start: the fractions come out exact to
         * about one node for any N and spread evenly over the id range, and the start lies in
         * [0, train_frac) so node 0 is in train and even a 2-node graph has a training node
         * (independent coin flips left tiny graphs without one). */
        double u = split_start + (double)v * 0.6180339887498949;
        u -= floor(u);
        tg_file_id_t which = u < t1   ? TG_FILE_TRAIN
                             : u < t2 ? TG_FILE_VALID
                             : u < t3 ? TG_FILE_TEST
                                      : TG_FILE_COUNT;
        if (which != TG_FILE_COUNT &&
            (rc = tg_imp_split_add(im, &fw[2 + (which - TG_FILE_TRAIN)], which, (int64_t)v,
                                   "edgelist", "node", v)))
            break;
        if ((v & 0xffff) == 0) tg_imp_prog_update(&pr, v * d * tg_feat_dtype_size(o->feat_dtype));
    }
    tg_imp_prog_end(&pr, rc == 0);
    if (!rc && m->num_train == 0)
        rc = tg_err(-EINVAL, "edgelist: no training nodes (%llu nodes, --train-frac %g)",
                    (unsigned long long)n, o->train_frac);
    m->feat_dim = d;
    m->num_classes = c;
    m->multi_label = 0;
    for (int i = 0; i < open_n; i++) {
        if (rc)
            tg_filew_discard(&fw[i]);
        else
            rc = tg_dsw_close_file(&im->dsw, ids[i], &fw[i]);
    }
out:
    free(lab);
    free(nxt);
    for (int k = 0; parts && k < nparts; k++) {
        free(parts[k].cnt);
        free(parts[k].touched);
        free(parts[k].bufs);
    }
    free(parts);
    free(mu);
    free(row);
    free(tmp);
    return rc;
}

void (*tg_edgelist_test_between_passes)(const char *tmp_dir);

/* node_ids.npy in the dataset: int64[N], the file's id of each node (new id i was old id
 * ids[i]), so that results can be joined back to the input's ids. The old ids of new ids
 * 0, 1, ... are the bitmap's set bits in order, so it streams from the bitmap. */
static int write_node_ids(tg_imp_t *im, const idmap_t *m)
{
    char path[4200], hdr[256];
    snprintf(path, sizeof path, "%s/" TG_NODE_IDS_FILE, im->dsw.tmp_dir);
    uint64_t shape[1] = {m->count};
    size_t hl = tg_npy_header(hdr, sizeof hdr, "<i8", 1, shape);
    tg_filew_t fw;
    int rc = tg_filew_open(&fw, path, 1u << 20);
    if (rc) return rc;
    enum { B = 4096 };
    int64_t buf[B];
    size_t k = 0;
    rc = tg_filew_write(&fw, hdr, hl);
    for (uint64_t w = 0; w < m->nwords && !rc; w++)
        for (uint64_t bits = m->bits[w]; bits && !rc; bits &= bits - 1) {
            buf[k++] = (int64_t)(w << 6 | (uint64_t)__builtin_ctzll(bits));
            if (k == B) {
                rc = tg_filew_write(&fw, buf, sizeof buf);
                k = 0;
            }
        }
    if (!rc && k) rc = tg_filew_write(&fw, buf, k * sizeof *buf);
    if (rc) {
        tg_filew_discard(&fw);
        return rc;
    }
    return tg_filew_close(&fw, NULL);
}

int tg_import_edgelist_ranges(const char *out_dir, const tg_import_opts_t *opts, int nranges)
{
    tg_import_opts_t o = *opts;
    const char *path = o.src;
    idmap_t map;
    pass1_t p1;
    /* The id map (3/16 byte per id) may take a quarter of --mem. */
    int rc = idmap_init(&map, TG_MAX((uint64_t)1024, o.mem_bytes / 4 / IDMAP_BYTES_PER_WORD));
    if (rc) return rc;
    if ((rc = pass1_open(&p1, path, &map, o.mem_bytes))) {
        idmap_free(&map);
        return rc;
    }
    char source[512];
    snprintf(source, sizeof source,
             "import --from edgelist %s --feat-dim %u --classes %u --seed %llu --feat-noise %g "
             "--train-frac %g --valid-frac %g --test-frac %g%s%s%s",
             path, o.feat_dim, o.classes, (unsigned long long)o.seed, o.feat_noise, o.train_frac,
             o.valid_frac, o.test_frac, o.undirected ? " --undirected" : "",
             o.dedup ? " --dedup" : "", o.self_loops ? " --self-loops" : "");
    /* The output's temporary directory first: pass 1 writes its binary files there, so that
     * they are on the output's disk and are removed with it on any failure. */
    tg_imp_t im;
    if ((rc = tg_imp_begin(&im, out_dir, &o, source))) {
        pass1_free(&p1);
        idmap_free(&map);
        return rc;
    }
    uint64_t edges = 0, lines = 0, bytes = 0;
    if (!(rc = pass1_run(&p1, im.dsw.tmp_dir, nranges))) {
        for (int k = 0; k < p1.n; k++) {
            edges += p1.r[k].edges;
            lines += p1.r[k].lines;
            bytes += p1.r[k].bytes;
            map.max_id = TG_MAX(map.max_id, p1.r[k].max_id);
        }
        if (!edges && !bytes)
            rc = tg_err(-EINVAL, "%s: empty file", path);
        else if (!edges)
            rc = tg_err(-EINVAL, "%s: no data rows in %llu lines", path, (unsigned long long)lines);
    }
    if (!rc && tg_edgelist_test_between_passes) tg_edgelist_test_between_passes(im.dsw.tmp_dir);
    if (!rc) rc = idmap_build_rank(&map);
    if (!rc) rc = write_node_ids(&im, &map);
    uint64_t n = map.count;
    int dense = n == map.max_id + 1;
    if (!rc) {
        tg_log_info("import edgelist %s: %llu edges, %llu nodes (ids 0..%llu%s)", path,
                    (unsigned long long)edges, (unsigned long long)n,
                    (unsigned long long)map.max_id,
                    dense ? ", already dense" : ", renumbered by rank");
        uint64_t map_bytes = map.nwords * IDMAP_BYTES_PER_WORD;
        o.mem_bytes = o.mem_bytes > 2 * map_bytes ? o.mem_bytes - map_bytes : o.mem_bytes / 2;
    }
    if (!rc && !(rc = tg_imp_edges_begin(&im, n)) && !(rc = pass2(&im, &p1, &map, dense, edges))) {
        idmap_free(&map); /* before the sort's merge and the synthesis need memory */
        tg_log_info("edges: %llu read, sorting into CSC", (unsigned long long)im.edges_in);
        rc = tg_imp_edges_finish(&im);
    }
    pass1_free(&p1);
    idmap_free(&map);
    o.mem_bytes = opts->mem_bytes; /* the sort is done: the synthesis may use all of --mem */
    if (!rc) rc = gen_node_data(&im, nranges);
    if (!rc) rc = tg_imp_commit(&im);
    tg_imp_abort(&im);
    return rc;
}

int tg_import_edgelist(const char *out_dir, const tg_import_opts_t *opts)
{
    return tg_import_edgelist_ranges(out_dir, opts, 0);
}
