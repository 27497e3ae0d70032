/* ZIP reader for .npz archives: the central directory (zip64 included), and members streamed in
 * order, stored or deflated, with their CRC-32 checked.
 *
 * Why by hand: NumPy writes an .npz with Python's zipfile (np.savez: stored members,
 * np.savez_compressed: deflated, zip64 records for members of 4 GiB or more), and no zip library
 * in Debian streams a member through a caller's small buffer; the format needs only a few
 * records (APPNOTE.TXT 4.3), and zlib inflates raw deflate data and computes the CRC.
 *
 * The central directory is the authority: names, sizes, CRCs and offsets come from it (a local
 * header written before its sizes were known, bit 3 and a data descriptor, has zeros there). The
 * local header is read only to find where the data start, and its name must match.
 */
#include "import-impl.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc-impl.h"

#define ZIP_IN_BUF (256u << 10)  /* compressed bytes a reader takes from the file at a time */
#define ZIP_MAX_CD (64u << 20)   /* a central directory larger than this is not an .npz */
#define ZIP_MAX_ENTRIES 1000000u /* (each entry is at least 46 bytes) */
#define NPZ_HEAD (64u << 10)     /* a member's first bytes kept by tg_npz_arr_t: the header */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static int zread(const tg_zip_t *z, void *buf, size_t n, uint64_t off)
{
    if (off > z->size || n > z->size - off)
        return tg_err(-EINVAL,
                      "%s: truncated: a record at offset %llu needs %zu bytes, the file "
                      "has %llu",
                      z->path, (unsigned long long)off, n, (unsigned long long)z->size);
    return tg_pread_full(z->fd, buf, n, off, z->path);
}

void tg_zip_close(tg_zip_t *z)
{
    if (z->fd >= 0) close(z->fd);
    for (size_t i = 0; i < z->n; i++)
        free(z->e[i].name);
    free(z->e);
    free(z->path);
    memset(z, 0, sizeof *z);
    z->fd = -1;
}

/* Finds the end of central directory record (22 bytes and a comment of up to 64 KiB at the end)
 * and, where its fields are saturated, the zip64 one; returns the directory's place. */
static int find_cd(tg_zip_t *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count)
{
    size_t tail = (size_t)TG_MIN(z->size, (uint64_t)(22 + 65535));
    if (tail < 22)
        return tg_err(-EINVAL, "%s: not a zip archive (%llu bytes, shorter than its end record)",
                      z->path, (unsigned long long)z->size);
    uint8_t *b = malloc(tail);
    if (!b) return tg_err(-ENOMEM, "out of memory");
    uint64_t base = z->size - tail;
    int rc = zread(z, b, tail, base);
    size_t at = tail - 22 + 1;
    while (!rc && at-- > 0)
        if (!memcmp(b + at, "PK\5\6", 4) && at + 22 + le16(b + at + 20) <= tail) break;
    if (!rc && at == (size_t)-1)
        rc = tg_err(-EINVAL,
                    "%s: not a zip archive (no end of central directory record in its last %zu "
                    "bytes; an .npz is written by np.savez)",
                    z->path, tail);
    if (rc) {
        free(b);
        return rc;
    }
    const uint8_t *r = b + at;
    uint64_t eocd = base + at;
    *count = le16(r + 10);
    *cd_size = le32(r + 12);
    *cd_off = le32(r + 16);
    int z64 = *count == 0xffff || *cd_size == 0xffffffffu || *cd_off == 0xffffffffu;
    if (le16(r + 4) != 0 || le16(r + 6) != 0 || le16(r + 8) != le16(r + 10))
        rc = tg_err(-EINVAL, "%s: a multi-disk (split) zip archive; join it first", z->path);
    free(b);
    if (rc || !z64) return rc;
    uint8_t loc[20], e64[56];
    if (eocd >= 20 && (rc = zread(z, loc, 20, eocd - 20))) return rc;
    if (eocd < 20 || memcmp(loc, "PK\6\7", 4))
        return tg_err(-EINVAL,
                      "%s: offset %llu: the end record's fields are saturated but no zip64 "
                      "locator precedes it",
                      z->path, (unsigned long long)(eocd - 20));
    uint64_t off64 = le64(loc + 8);
    if ((rc = zread(z, e64, 56, off64))) return rc;
    if (memcmp(e64, "PK\6\6", 4))
        return tg_err(-EINVAL,
                      "%s: offset %llu: bad zip64 end record signature (expected PK\\6\\6)",
                      z->path, (unsigned long long)off64);
    *count = le64(e64 + 32);
    *cd_size = le64(e64 + 40);
    *cd_off = le64(e64 + 48);
    return 0;
}

/* The zip64 extra field (id 1) holds, in this order, those of usize, csize and lho that are
 * saturated in the fixed fields. */
static int entry_zip64(tg_zip_t *z, tg_zip_entry_t *e, const uint8_t *x, size_t xn, uint64_t at)
{
    int need_u = e->usize == 0xffffffffu, need_c = e->csize == 0xffffffffu,
        need_o = e->lho == 0xffffffffu;
    if (!need_u && !need_c && !need_o) return 0;
    for (size_t i = 0; i + 4 <= xn;) {
        uint16_t id = le16(x + i), len = le16(x + i + 2);
        if (i + 4 + len > xn) break;
        if (id == 1) {
            const uint8_t *p = x + i + 4;
            size_t k = 0, want = 8u * (size_t)(need_u + need_c + need_o);
            if (len < want) break;
            if (need_u) e->usize = le64(p + 8 * k++);
            if (need_c) e->csize = le64(p + 8 * k++);
            if (need_o) e->lho = le64(p + 8 * k++);
            return 0;
        }
        i += 4u + len;
    }
    return tg_err(-EINVAL,
                  "%s: central directory offset %llu: member '%s' has saturated sizes but no "
                  "zip64 extra field that holds them",
                  z->path, (unsigned long long)at, e->name);
}

static int read_entries(tg_zip_t *z, const uint8_t *cd, uint64_t cd_off, uint64_t cd_size,
                        uint64_t count)
{
    if (!(z->e = calloc((size_t)TG_MAX(count, (uint64_t)1), sizeof *z->e)))
        return tg_err(-ENOMEM, "out of memory for %llu zip entries", (unsigned long long)count);
    size_t at = 0;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t where = cd_off + at;
        if (at + 46 > cd_size || memcmp(cd + at, "PK\1\2", 4))
            return tg_err(-EINVAL,
                          "%s: offset %llu: bad central directory entry %llu (expected the "
                          "signature PK\\1\\2 within the directory's %llu bytes)",
                          z->path, (unsigned long long)where, (unsigned long long)k,
                          (unsigned long long)cd_size);
        const uint8_t *r = cd + at;
        size_t nn = le16(r + 28), xn = le16(r + 30), cn = le16(r + 32);
        if (at + 46 + nn + xn + cn > cd_size)
            return tg_err(-EINVAL,
                          "%s: offset %llu: central directory entry %llu runs past the "
                          "directory's end",
                          z->path, (unsigned long long)where, (unsigned long long)k);
        tg_zip_entry_t *e = &z->e[z->n];
        if (!(e->name = malloc(nn + 1))) return tg_err(-ENOMEM, "out of memory");
        z->n++;
        memcpy(e->name, r + 46, nn);
        e->name[nn] = 0;
        for (size_t i = 0; i < nn; i++)
            if (!e->name[i] || (unsigned char)e->name[i] < 32) e->name[i] = '?';
        e->flags = le16(r + 8);
        e->method = le16(r + 10);
        e->crc = le32(r + 16);
        e->csize = le32(r + 20);
        e->usize = le32(r + 24);
        e->lho = le32(r + 42);
        int rc = entry_zip64(z, e, r + 46 + nn, xn, where);
        if (rc) return rc;
        at += 46 + nn + xn + cn;
    }
    return 0;
}

int tg_zip_open(tg_zip_t *z, const char *path)
{
    memset(z, 0, sizeof *z);
    z->fd = -1;
    if (!(z->path = strdup(path))) return tg_err(-ENOMEM, "out of memory");
    struct stat st;
    int rc;
    if ((z->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(z->fd, &st)) {
        rc = tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
        goto err;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = tg_err(-EINVAL, "%s: not a regular file", path);
        goto err;
    }
    z->size = (uint64_t)st.st_size;
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    if ((rc = find_cd(z, &cd_off, &cd_size, &count))) goto err;
    if (cd_size > ZIP_MAX_CD || count > ZIP_MAX_ENTRIES || count * 46 > cd_size ||
        cd_off > z->size || cd_size > z->size - cd_off) {
        rc = tg_err(-EINVAL,
                    "%s: bad end record: a central directory of %llu entries, %llu bytes at "
                    "offset %llu does not fit the file's %llu bytes",
                    path, (unsigned long long)count, (unsigned long long)cd_size,
                    (unsigned long long)cd_off, (unsigned long long)z->size);
        goto err;
    }
    uint8_t *cd = malloc((size_t)TG_MAX(cd_size, (uint64_t)1));
    if (!cd) {
        rc = tg_err(-ENOMEM, "out of memory for the central directory");
        goto err;
    }
    if (!(rc = zread(z, cd, (size_t)cd_size, cd_off)))
        rc = read_entries(z, cd, cd_off, cd_size, count);
    free(cd);
    if (rc) goto err;
    posix_fadvise(z->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return 0;
err:
    tg_zip_close(z);
    return rc;
}

const tg_zip_entry_t *tg_zip_find(const tg_zip_t *z, const char *name)
{
    for (size_t i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name)) return &z->e[i];
    return NULL;
}

void tg_zip_list(const tg_zip_t *z, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < z->n && k + 1 < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", z->e[i].name);
    if (!z->n) snprintf(buf, len, "none");
}

/* ---------------------------------------------------------------- member readers */

static int rd_err(const tg_zip_rd_t *r, int code, const char *what)
{
    return tg_err(code, "%s: member '%s': %s", r->z->path, r->e->name, what);
}

void tg_zip_rd_close(tg_zip_rd_t *r)
{
    if (r->zinit) inflateEnd(&r->zs);
    free(r->in);
    memset(r, 0, sizeof *r);
}

/* The CRC-32 check once the last byte is read, when this reader saw the member from byte 0. */
static int rd_check_end(tg_zip_rd_t *r)
{
    if (r->pos != r->e->usize || r->crc_from != 0 || r->crc == r->e->crc) return 0;
    return tg_err(-EINVAL,
                  "%s: member '%s': CRC-32 mismatch: the central directory records %08x, the "
                  "%llu bytes read give %08x (the archive is corrupt)",
                  r->z->path, r->e->name, r->e->crc, (unsigned long long)r->e->usize, r->crc);
}

/* Inflates n bytes into buf (NULL: dropped, through a scratch buffer). */
static int rd_inflate(tg_zip_rd_t *r, uint8_t *buf, size_t n)
{
    uint8_t scratch[16384];
    while (n > 0) {
        size_t want = buf ? n : TG_MIN(n, sizeof scratch);
        uint8_t *out = buf ? buf : scratch;
        if (r->zs.avail_in == 0 && r->cpos < r->e->csize) {
            size_t k = (size_t)TG_MIN((uint64_t)r->in_cap, r->e->csize - r->cpos);
            int rc = tg_pread_full(r->z->fd, r->in, k, r->data_off + r->cpos, r->z->path);
            if (rc) return rc;
            r->cpos += k;
            r->zs.next_in = r->in;
            r->zs.avail_in = (uInt)k;
        }
        r->zs.next_out = out;
        r->zs.avail_out = (uInt)TG_MIN(want, (size_t)1 << 30);
        uInt before = r->zs.avail_out;
        int zr = inflate(&r->zs, Z_NO_FLUSH);
        size_t got = before - r->zs.avail_out;
        r->crc = tg_data_crc32(r->crc, out, got);
        r->pos += got;
        n -= got;
        if (buf) buf += got;
        if (zr == Z_STREAM_END && n > 0) {
            char m[256];
            snprintf(m, sizeof m,
                     "truncated: its deflate stream ends after %llu bytes, the central directory "
                     "says %llu",
                     (unsigned long long)r->pos, (unsigned long long)r->e->usize);
            return rd_err(r, -EINVAL, m);
        }
        if (zr == Z_BUF_ERROR && r->zs.avail_in == 0 && r->cpos == r->e->csize && got == 0) {
            char m[256];
            snprintf(m, sizeof m,
                     "truncated: its %llu compressed bytes end inside the deflate stream, after "
                     "%llu of %llu bytes",
                     (unsigned long long)r->e->csize, (unsigned long long)r->pos,
                     (unsigned long long)r->e->usize);
            return rd_err(r, -EINVAL, m);
        }
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            char m[256];
            snprintf(m, sizeof m, "corrupt deflate data near compressed offset %llu (zlib: %s)",
                     (unsigned long long)(r->cpos - r->zs.avail_in),
                     r->zs.msg ? r->zs.msg : "error");
            return rd_err(r, -EINVAL, m);
        }
    }
    return 0;
}

int tg_zip_rd_open(tg_zip_rd_t *r, const tg_zip_t *z, const tg_zip_entry_t *e, uint64_t start)
{
    memset(r, 0, sizeof *r);
    r->z = z;
    r->e = e;
    char m[512];
    if (e->flags & 1) return rd_err(r, -ENOTSUP, "encrypted; save it without a password");
    if (e->method != 0 && e->method != 8) {
        snprintf(m, sizeof m,
                 "compression method %u; only stored (0) and deflate (8), as np.savez and "
                 "np.savez_compressed write, are read",
                 e->method);
        return rd_err(r, -ENOTSUP, m);
    }
    if (e->method == 0 && e->csize != e->usize) {
        snprintf(m, sizeof m,
                 "stored, but the central directory gives %llu bytes compressed and "
                 "%llu uncompressed",
                 (unsigned long long)e->csize, (unsigned long long)e->usize);
        return rd_err(r, -EINVAL, m);
    }
    uint8_t lh[30];
    int rc;
    if (e->lho > z->size || z->size - e->lho < 30) {
        snprintf(m, sizeof m,
                 "truncated: its local header at offset %llu is past the file's end "
                 "(%llu bytes)",
                 (unsigned long long)e->lho, (unsigned long long)z->size);
        return rd_err(r, -EINVAL, m);
    }
    if ((rc = tg_pread_full(z->fd, lh, 30, e->lho, z->path))) return rc;
    if (memcmp(lh, "PK\3\4", 4)) {
        snprintf(m, sizeof m, "bad local header at offset %llu (expected the signature PK\\3\\4)",
                 (unsigned long long)e->lho);
        return rd_err(r, -EINVAL, m);
    }
    size_t nn = le16(lh + 26), xn = le16(lh + 28);
    char name[65536 + 1];
    if (e->lho + 30 + nn > z->size || (rc = tg_pread_full(z->fd, name, nn, e->lho + 30, z->path))) {
        if (rc) return rc;
        return rd_err(r, -EINVAL, "truncated: its local header's name runs past the file's end");
    }
    name[nn] = 0;
    for (size_t i = 0; i < nn; i++)
        if (!name[i] || (unsigned char)name[i] < 32) name[i] = '?';
    if (strcmp(name, e->name) || le16(lh + 8) != e->method) {
        snprintf(m, sizeof m,
                 "bad local header at offset %llu: it names '%.200s' (method %u), the central "
                 "directory '%.200s' (method %u)",
                 (unsigned long long)e->lho, name, le16(lh + 8), e->name, e->method);
        return rd_err(r, -EINVAL, m);
    }
    r->data_off = e->lho + 30 + nn + xn;
    if (r->data_off > z->size || e->csize > z->size - r->data_off) {
        snprintf(m, sizeof m,
                 "truncated: its %llu bytes of data from offset %llu end past the file's end "
                 "(%llu bytes)",
                 (unsigned long long)e->csize, (unsigned long long)r->data_off,
                 (unsigned long long)z->size);
        return rd_err(r, -EINVAL, m);
    }
    if (start > e->usize) return rd_err(r, -EINVAL, "read past the member's end");
    if (e->method == 0) {
        r->pos = r->crc_from = start;
        return rd_check_end(r); /* an empty member is read to its end already */
    }
    r->in_cap = (size_t)TG_MIN((uint64_t)ZIP_IN_BUF, TG_MAX(e->csize, (uint64_t)1));
    if (!(r->in = malloc(r->in_cap))) return tg_err(-ENOMEM, "out of memory");
    if (inflateInit2(&r->zs, -15) != Z_OK) {
        tg_zip_rd_close(r);
        return tg_err(-ENOMEM, "%s: cannot start zlib's inflate", z->path);
    }
    r->zinit = 1;
    if ((rc = rd_inflate(r, NULL, (size_t)start)) || (rc = rd_check_end(r))) tg_zip_rd_close(r);
    return rc;
}

int tg_zip_rd_read(tg_zip_rd_t *r, void *buf, size_t n)
{
    if (n > r->e->usize - r->pos) {
        char m[256];
        snprintf(m, sizeof m, "read of bytes [%llu, %llu) past its %llu bytes",
                 (unsigned long long)r->pos, (unsigned long long)(r->pos + n),
                 (unsigned long long)r->e->usize);
        return rd_err(r, -EINVAL, m);
    }
    int rc;
    if (r->e->method == 0) {
        if ((rc = tg_pread_full(r->z->fd, buf, n, r->data_off + r->pos, r->z->path))) return rc;
        r->crc = tg_data_crc32(r->crc, buf, n);
        r->pos += n;
    } else if ((rc = rd_inflate(r, buf, n))) {
        return rc;
    }
    return rd_check_end(r);
}

/* ---------------------------------------------------------------- .npy members */

/* A reader at offset off: one that is there, else a new one (at most two; the second is
 * replaced when a third place is asked for). */
static int arr_reader(tg_npz_arr_t *a, uint64_t off, tg_zip_rd_t **out)
{
    for (int i = 0; i < a->nrd; i++)
        if (a->rd[i].pos == off) {
            *out = &a->rd[i];
            return 0;
        }
    int k = a->nrd < 2 ? a->nrd : 1;
    if (k < a->nrd) tg_zip_rd_close(&a->rd[k]);
    int rc = tg_zip_rd_open(&a->rd[k], a->z, a->e, off);
    if (rc) return rc;
    a->nrd = TG_MAX(a->nrd, k + 1);
    *out = &a->rd[k];
    return 0;
}

/* A stored member read by two readers, one from byte 0 up to where the other started and the
 * other from there to the end: their CRCs combine into the member's. */
static int arr_check_split(tg_npz_arr_t *a, const tg_zip_rd_t *r)
{
    if (r->pos != a->e->usize || r->crc_from == 0) return 0;
    for (int i = 0; i < a->nrd; i++) {
        const tg_zip_rd_t *o = &a->rd[i];
        if (o == r || o->crc_from != 0 || o->pos != r->crc_from) continue;
        uint32_t crc = (uint32_t)crc32_combine(o->crc, r->crc, (z_off_t)(r->pos - r->crc_from));
        if (crc == a->e->crc) return 0;
        return tg_err(-EINVAL,
                      "%s: member '%s': CRC-32 mismatch: the central directory records %08x, the "
                      "%llu bytes read give %08x (the archive is corrupt)",
                      a->z->path, a->e->name, a->e->crc, (unsigned long long)a->e->usize, crc);
    }
    return 0;
}

static int arr_read_at(void *ctx, uint64_t off, void *buf, size_t n)
{
    tg_npz_arr_t *a = ctx;
    uint8_t *p = buf;
    if (off < a->head_len) {
        size_t k = (size_t)TG_MIN((uint64_t)n, a->head_len - off);
        memcpy(p, a->head + off, k);
        p += k;
        off += k;
        n -= k;
    }
    if (!n) return 0;
    tg_zip_rd_t *r;
    int rc = arr_reader(a, off, &r);
    if (!rc) rc = tg_zip_rd_read(r, p, n);
    if (!rc) rc = arr_check_split(a, r);
    return rc;
}

int tg_npz_arr_open(tg_npz_arr_t *a, const tg_zip_t *z, const char *name)
{
    memset(a, 0, sizeof *a);
    a->f.fd = -1;
    a->z = z;
    if (!(a->e = tg_zip_find(z, name))) {
        char list[1024];
        tg_zip_list(z, list, sizeof list);
        return tg_err(-ENOENT, "%s: no member '%s' (members: %s)", z->path, name, list);
    }
    a->head_len = (size_t)TG_MIN((uint64_t)NPZ_HEAD, a->e->usize);
    int rc;
    if (!(a->head = malloc(TG_MAX(a->head_len, (size_t)1))))
        rc = tg_err(-ENOMEM, "out of memory");
    else if (!(rc = tg_zip_rd_open(&a->rd[0], z, a->e, 0)))
        a->nrd = 1, rc = tg_zip_rd_read(&a->rd[0], a->head, a->head_len);
    char label[4400];
    snprintf(label, sizeof label, "%s: %s", z->path, name);
    if (!rc) rc = tg_npy_open_cb(&a->f, label, a->e->usize, arr_read_at, a);
    if (rc) tg_npz_arr_close(a);
    return rc;
}

void tg_npz_arr_close(tg_npz_arr_t *a)
{
    tg_npy_close(&a->f);
    for (int i = 0; i < a->nrd; i++)
        tg_zip_rd_close(&a->rd[i]);
    free(a->head);
    memset(a, 0, sizeof *a);
    a->f.fd = -1;
}
