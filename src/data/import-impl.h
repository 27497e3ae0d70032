/* data/import-impl.h - private seams of the importers: the streaming CSV reader, the NumPy .npy
 * reader and the pieces every importer shares (dataset writer + edge sort + index files).
 *
 * How to use the CSV reader:
 *     tg_csv_t c;
 *     if ((rc = tg_csv_open(&c, "raw/edge.csv.gz", 0)) < 0) return rc;
 *     while ((rc = tg_csv_next(&c)) > 0) {
 *         int64_t src, dst;
 *         if ((rc = tg_csv_expect_fields(&c, 2)) < 0 || (rc = tg_csv_get_i64(&c, 0, &src)) < 0 ||
 *             (rc = tg_csv_get_i64(&c, 1, &dst)) < 0)
 *             break;
 *     }
 *     tg_csv_close(&c);   // rc < 0: tg_errmsg() names the file, line and field
 *
 * How to use the .npy reader:
 *     tg_npy_t f;
 *     tg_npy_open(&f, "feat.npy");                       // header parsed, size checked
 *     tg_npy_expect_dtype(&f, TG_NPY_KIND_FLOAT, "features");
 *     tg_npy_read_f32(&f, first_elem, n, out);            // any range, converted, bounded memory
 *     tg_npy_close(&f);
 *
 * Neither reader is thread-safe; each handle belongs to one thread (a CSV handle on a .gz file
 * runs its own inflate thread internally, joined by tg_csv_close).
 */
#ifndef TG_DATA_IMPORT_IMPL_H
#define TG_DATA_IMPORT_IMPL_H

#include <pthread.h>
#include <stdint.h>
#include <zlib.h>

#include "tiergnn/data.h"

/* ---------------------------------------------------------------- CSV */

enum {
    TG_CSV_WS = 1,          /* fields separated by runs of blanks (edge lists), not commas */
    TG_CSV_COMMENTS = 2,    /* lines whose first non-blank character is '#' or '%' are skipped */
    TG_CSV_SKIP_BLANK = 4,  /* blank lines are skipped (else a blank line is one empty field) */
    TG_CSV_ALLOW_EMPTY = 8, /* an empty file is not an error */
};

typedef struct tg_csv {
    gzFile gz;            /* file source (plain or gzip: zlib reads both) */
    struct tg_queue *gzq; /* compressed input: blocks inflated by gzthread, else NULL */
    pthread_t gzthread;
    struct gz_block *gzblk; /* the block being consumed */
    uint64_t gz_comp_off;   /* compressed offset of that block's end */
    const char *mem;        /* or memory source (tests, fuzzing) */
    size_t mem_len, mem_pos;
    int range_fd; /* or bytes [range_off, range_end) of a plain file, when range */
    int range;    /* (tg_csv_open_range; the descriptor is the caller's) */
    uint64_t range_off, range_end;
    char *path; /* name used in messages */
    char *buf;  /* raw bytes; [pos, len) not consumed yet; buf[cap] is spare for a NUL */
    size_t cap, len, pos, max_cap;
    unsigned flags;
    int eof;
    uint64_t line; /* 1-based line number of the current row */
    uint64_t rows; /* rows returned so far */
    uint64_t bytes_in;
    /* the current row: NUL-terminated fields inside buf, valid until the next tg_csv_next */
    char **field;
    size_t *flen;
    size_t nfield, field_cap;
} tg_csv_t;

/* Opens a plain or gzip-compressed file. */
int tg_csv_open(tg_csv_t *c, const char *path, unsigned flags);
/* Reads bytes [begin, end) of the plain (uncompressed) file open as fd with pread, numbering
 * lines from first_line + 1: the edge-list importer parses parts of one file on several threads,
 * each with its own handle on the same descriptor (which stays the caller's and must outlive c).
 * end = UINT64_MAX reads to the end of the file. Read errors name the byte offset. */
int tg_csv_open_range(tg_csv_t *c, int fd, const char *name, unsigned flags, uint64_t begin,
                      uint64_t end, uint64_t first_line);
/* Reads from memory (not copied; must outlive c). chunk > 0 sets the refill size, so that tests
 * and fuzzers exercise rows that straddle buffer refills. */
int tg_csv_open_mem(tg_csv_t *c, const void *data, size_t len, const char *name, unsigned flags,
                    size_t chunk);
/* Advances to the next row: 1 = a row is ready, 0 = end of input, < 0 = error. */
int tg_csv_next(tg_csv_t *c);
/* As tg_csv_next, for files of id pairs: returns 2 when the row was the plain pair "A B" (or
 * "A,B"), parsed into *a and *b (no fields are set); 1 when it is any other row, to be read
 * through the fields as usual (the caller's checks then produce the errors); 0 at the end. */
int tg_csv_next_pair(tg_csv_t *c, int64_t *a, int64_t *b);
static inline size_t tg_csv_nfields(const tg_csv_t *c)
{
    return c->nfield;
}
/* -EINVAL "FILE: line L: expected N fields, got M" unless the row has exactly n fields. */
int tg_csv_expect_fields(const tg_csv_t *c, size_t n);
/* Field i (0-based) as a number; errors name file, line and field (1-based). */
int tg_csv_get_i64(const tg_csv_t *c, size_t i, int64_t *out);
/* Accepts nan/inf; the caller decides whether they are allowed. */
int tg_csv_get_f64(const tg_csv_t *c, size_t i, double *out);
/* Parses the whole row as n finite floats (ragged rows and non-numbers are errors). */
int tg_csv_row_f32(const tg_csv_t *c, float *out, size_t n);
/* 1 if field i is empty or a NaN spelling (missing value in pandas-written files). */
int tg_csv_is_missing(const tg_csv_t *c, size_t i);
/* Input bytes consumed so far (compressed bytes for gzip; the file offset for a range), for
 * progress bars. */
uint64_t tg_csv_offset(const tg_csv_t *c);
void tg_csv_close(tg_csv_t *c);

/* Number parsers used by the reader; s[0..n) (need not be NUL-terminated when n < 64).
 * Leading/trailing blanks are ignored. Return 0, or -1 if the text is not a number. */
int tg_csv_parse_i64(const char *s, size_t n, int64_t *out);
int tg_csv_parse_f64(const char *s, size_t n, double *out);

/* ---------------------------------------------------------------- NPY */

typedef enum {
    TG_NPY_B1,
    TG_NPY_U1,
    TG_NPY_I1,
    TG_NPY_U2,
    TG_NPY_I2,
    TG_NPY_U4,
    TG_NPY_I4,
    TG_NPY_U8,
    TG_NPY_I8,
    TG_NPY_F2,
    TG_NPY_F4,
    TG_NPY_F8,
    TG_NPY_DTYPE_COUNT
} tg_npy_dtype_t;

/* Dtype families for tg_npy_expect_dtype. */
enum { TG_NPY_KIND_BOOL = 1, TG_NPY_KIND_INT = 2, TG_NPY_KIND_FLOAT = 4 };

#define TG_NPY_MAX_DIM 8

typedef struct tg_npy {
    int fd;             /* file source, or -1 */
    const uint8_t *mem; /* memory source */
    uint64_t mem_len;
    /* or a callback source (an .npz member): reads bytes [off, off + n) exactly, or fails with
     * a message; ctx is the caller's and must outlive the handle */
    int (*read_at)(void *ctx, uint64_t off, void *buf, size_t n);
    void *ctx;
    char *path;
    int version; /* 1, 2 or 3 */
    tg_npy_dtype_t dtype;
    size_t itemsize;
    char descr[16]; /* as written in the header, for messages */
    int ndim;
    uint64_t shape[TG_NPY_MAX_DIM];
    uint64_t count;    /* elements (product of shape) */
    uint64_t data_off; /* byte offset of element 0 */
    uint8_t *bounce;   /* conversion buffer (bounded: TG_NPY_BOUNCE bytes) */
} tg_npy_t;

int tg_npy_open(tg_npy_t *f, const char *path);
int tg_npy_open_mem(tg_npy_t *f, const void *data, size_t len, const char *name);
/* A source of `size` bytes read through read_at (see tg_npy_t); name is used in messages. */
int tg_npy_open_cb(tg_npy_t *f, const char *name, uint64_t size,
                   int (*read_at)(void *ctx, uint64_t off, void *buf, size_t n), void *ctx);
void tg_npy_close(tg_npy_t *f);
const char *tg_npy_dtype_name(tg_npy_dtype_t t); /* "<f4" ... */
int tg_npy_dtype_kind(tg_npy_dtype_t t);         /* TG_NPY_KIND_* */
/* -EINVAL naming the file, its dtype and the accepted ones unless f's dtype is of `kinds`. */
int tg_npy_expect_dtype(const tg_npy_t *f, int kinds, const char *what);
/* Reads elements [first, first + n) (flat C order), converted. Errors name file and offset. */
int tg_npy_read_f32(tg_npy_t *f, uint64_t first, size_t n, float *out);
int tg_npy_read_f64(tg_npy_t *f, uint64_t first, size_t n, double *out);
/* Integers (and bools) as i64; floats only if integral; u64 above INT64_MAX is an error. */
int tg_npy_read_i64(tg_npy_t *f, uint64_t first, size_t n, int64_t *out);

/* ---------------------------------------------------------------- ZIP (.npz)
 *
 * An .npz is a zip archive of .npy members, stored or deflated, with zip64 records when a member
 * or the archive passes 4 GiB. tg_zip_open reads the central directory (the authority on names,
 * sizes, CRCs and offsets; local headers are checked against it); a tg_zip_rd_t streams one
 * member's uncompressed bytes in order through a small input buffer and zlib's inflate,
 * computing the CRC-32 as it goes and checking it when the member's last byte is read.
 *
 *     tg_zip_t z;
 *     tg_zip_open(&z, "data.npz");
 *     const tg_zip_entry_t *e = tg_zip_find(&z, "edge_index.npy");   // NULL: absent
 *     tg_zip_rd_t r;
 *     tg_zip_rd_open(&r, &z, e, 0);
 *     tg_zip_rd_read(&r, buf, n);   // exactly n bytes, or an error naming the member
 *     tg_zip_rd_close(&r);
 *     tg_zip_close(&z);             // after every reader of it
 */

typedef struct tg_zip_entry {
    char *name;
    uint64_t csize, usize; /* compressed and uncompressed bytes */
    uint64_t lho;          /* offset of its local header */
    uint32_t crc;
    uint16_t method, flags;
} tg_zip_entry_t;

typedef struct tg_zip {
    int fd;
    char *path;
    uint64_t size;
    tg_zip_entry_t *e;
    size_t n;
} tg_zip_t;

int tg_zip_open(tg_zip_t *z, const char *path);
void tg_zip_close(tg_zip_t *z);
const tg_zip_entry_t *tg_zip_find(const tg_zip_t *z, const char *name);
/* "a.npy, b.npy, ..." (at most len bytes) for messages about a missing member. */
void tg_zip_list(const tg_zip_t *z, char *buf, size_t len);

typedef struct tg_zip_rd {
    const tg_zip_t *z;
    const tg_zip_entry_t *e;
    uint64_t data_off; /* file offset of the member's data */
    uint64_t pos;      /* uncompressed bytes of the member before the next one read */
    uint64_t cpos;     /* compressed bytes taken from the file */
    uint64_t crc_from; /* crc covers uncompressed bytes [crc_from, pos) */
    uint32_t crc;
    z_stream zs;
    int zinit;
    uint8_t *in; /* compressed input */
    size_t in_cap;
} tg_zip_rd_t;

/* Opens a reader at uncompressed offset start: a stored member starts there (its CRC then
 * covers [start, ...), for the caller to combine); a deflated one inflates and drops the bytes
 * before it. A local header that does not match the central directory, member data beyond the
 * file's end, encryption or a method other than stored (0) and deflate (8) are errors. */
int tg_zip_rd_open(tg_zip_rd_t *r, const tg_zip_t *z, const tg_zip_entry_t *e, uint64_t start);
/* Reads exactly n bytes. Past the member's end, data that inflate cannot decode or that ends
 * early, and a CRC-32 that differs from the directory's once the member is read from byte 0 to
 * its end, are errors naming the archive, the member and the offset. */
int tg_zip_rd_read(tg_zip_rd_t *r, void *buf, size_t n);
void tg_zip_rd_close(tg_zip_rd_t *r);

/* One .npy member of an .npz as a tg_npy_t: the first bytes are kept (so the header may be
 * read twice), the rest streams through up to two readers, so that two ranges can be read in
 * lockstep (edge_index's rows) with inflate run once for each. The CRC of the whole member is
 * checked when its last byte is read, combining the two readers' CRCs where they split it. */
typedef struct tg_npz_arr {
    tg_npy_t f;
    const tg_zip_t *z;
    const tg_zip_entry_t *e;
    uint8_t *head;
    size_t head_len;
    tg_zip_rd_t rd[2];
    int nrd;
} tg_npz_arr_t;

/* Opens member `name` ("edge_index.npy") of z; f.path is "ARCHIVE: MEMBER" for messages. A
 * missing member is -ENOENT naming the archive and listing its members. */
int tg_npz_arr_open(tg_npz_arr_t *a, const tg_zip_t *z, const char *name);
void tg_npz_arr_close(tg_npz_arr_t *a);

/* ---------------------------------------------------------------- shared importer pieces */

/* One import in progress: the dataset writer, the edge sort that builds the CSC, and the
 * counts that are cross-checked. tg_imp_abort undoes everything (no half-written dataset). */
typedef struct tg_imp {
    const tg_import_opts_t *o;
    tg_dsw_t dsw;
    int begun;
    tg_edgesort_t *es;
    char sort_dir[4096];
    uint64_t *src, *dst; /* pending edges for tg_edgesort_add */
    size_t n, cap;
    uint64_t num_nodes;
    uint64_t edges_in;        /* input edges before --undirected doubling */
    uint8_t *split_owner;     /* 2 bits per node: 0 = in no split yet, else 1 + TG_FILE_* - TRAIN */
    const char *split_src[3]; /* where each split came from, for overlap messages */
    int split_unchecked;      /* N too large for the overlap bitmap within --mem */
} tg_imp_t;

int tg_imp_begin(tg_imp_t *im, const char *out_dir, const tg_import_opts_t *o, const char *source);
/* Starts the edge sort for num_nodes nodes (fixes meta.num_nodes and the index dtype). */
int tg_imp_edges_begin(tg_imp_t *im, uint64_t num_nodes);
int tg_imp_flush_edges(tg_imp_t *im);
/* Adds src -> dst (dst's in-neighbours gain src) and, with --undirected, dst -> src. Ids must
 * have been range-checked by the caller, which knows the file and line. */
static inline int tg_imp_edge(tg_imp_t *im, uint64_t src, uint64_t dst)
{
    im->edges_in++;
    if (im->n + 2 > im->cap) {
        int rc = tg_imp_flush_edges(im);
        if (rc) return rc;
    }
    im->src[im->n] = src;
    im->dst[im->n++] = dst;
    if (im->o->undirected && src != dst) {
        im->src[im->n] = dst;
        im->dst[im->n++] = src;
    }
    return 0;
}
/* Sorts/merges and writes indptr.bin and indices.bin; sets meta.num_edges. */
int tg_imp_edges_finish(tg_imp_t *im);
/* Opens one array file of the dataset with a write buffer of buf_bytes. */
int tg_imp_open(tg_imp_t *im, tg_file_id_t id, tg_filew_t *fw, size_t buf_bytes);
/* Appends one node id in the dataset's index dtype. */
int tg_imp_put_index(tg_imp_t *im, tg_filew_t *fw, uint64_t id);
/* Appends one feature row (d floats) converted to the dataset's feature dtype; tmp holds d
 * u16 values for the f16 conversion. */
int tg_imp_put_feat_row(tg_imp_t *im, tg_filew_t *fw, const float *row, uint32_t d, uint16_t *tmp);
/* Rows [r, r + k) of f, an (n, d) array of floats: read through buf (k * d floats), each value
 * checked finite (a NaN or inf feature poisons training; the message gives f's path, the byte
 * offset, `where` naming what the offset is counted in: "offset", "member offset"), and written
 * with tg_imp_put_feat_row (tmp: d u16). */
int tg_imp_put_feat_rows(tg_imp_t *im, tg_filew_t *fw, tg_npy_t *f, uint64_t r, size_t k,
                         uint32_t d, float *buf, uint16_t *tmp, const char *where);
/* Adds node id to split `which` (TG_FILE_TRAIN/VALID/TEST): checks the range and that no node
 * is in two splits (or twice in one), writes it, counts it in meta. `src` names the input file
 * and `unit` + `where` the position ("line", 12 or "offset", 4096) for messages. */
int tg_imp_split_add(tg_imp_t *im, tg_filew_t *fw, tg_file_id_t which, int64_t id, const char *src,
                     const char *unit, uint64_t where);
int tg_imp_commit(tg_imp_t *im);
void tg_imp_abort(tg_imp_t *im);

/* Input file lookup: dir/base.csv.gz, then dir/base.csv. Writes the found path into buf (or,
 * when neither exists, "dir/base.csv[.gz]" for the message) and returns 0 or -ENOENT. */
int tg_imp_find_csv(const char *dir, const char *base, char *buf, size_t len);
/* Memory the importer keeps besides the sort's share of --mem (see tg_imp_edges_begin). */
#define TG_IMP_FIXED_BYTES (40ull << 20)
/* Progress is shown for inputs at least this large. */
#define TG_IMP_PROGRESS_BYTES (64ull << 20)
uint64_t tg_imp_file_size(const char *path);

/* A progress bar in MiB of input, shown only for big inputs. */
typedef struct tg_imp_prog {
    tg_progress_t p;
    int on;
} tg_imp_prog_t;
static inline void tg_imp_prog_begin(tg_imp_prog_t *p, const char *label, uint64_t total_bytes)
{
    p->on = total_bytes >= TG_IMP_PROGRESS_BYTES;
    if (p->on) tg_progress_begin(&p->p, label, total_bytes >> 20, "MiB");
}
static inline void tg_imp_prog_update(tg_imp_prog_t *p, uint64_t done_bytes)
{
    if (p->on) tg_progress_update(&p->p, done_bytes >> 20, NULL);
}
/* ok: the input was read to the end, so the bar shows 100% (gzoffset lags behind by zlib's
 * buffer); on an error the bar stops where it was and the error follows on its own line. */
static inline void tg_imp_prog_end(tg_imp_prog_t *p, int ok)
{
    if (p->on) {
        if (ok) tg_progress_update(&p->p, p->p.total, NULL);
        tg_progress_end(&p->p);
    }
    p->on = 0;
}

int tg_import_ogb(const char *out_dir, const tg_import_opts_t *o);
/* The same, parsing a plain node-feat.csv on exactly nthreads threads (0: as many as the cores,
 * the size and --mem allow; gzip files are always read on one) in chunks of chunk_bytes (0: the
 * default of a few MiB), so that tests can split small inputs anywhere. */
int tg_import_ogb_threads(const char *out_dir, const tg_import_opts_t *o, int nthreads,
                          uint64_t chunk_bytes);
/* Tests only: called by a parsing thread before it starts on chunk k of node-feat.csv, so that
 * a test can change the file under it. NULL (the default): nothing. */
extern void (*tg_ogb_test_before_chunk)(uint64_t chunk);
int tg_import_npy(const char *out_dir, const tg_import_opts_t *o);
/* --from npz FILE (import_npz.c), and --from ogb on a SRC with raw/data.npz. */
int tg_import_npz(const char *out_dir, const tg_import_opts_t *o);
int tg_import_ogb_npz(const char *out_dir, const tg_import_opts_t *o);
/* import_ogb.c's split lookup and CSV split reader, which the npz layout shares: the three
 * paths of SRC/split/NAME/{train,valid,test}.csv[.gz] (NAME as --split, else the only one). */
int tg_ogb_split_paths(const char *src, const char *want, char (*paths)[4096], char *name,
                       size_t name_len);
int tg_ogb_read_split_csv(tg_imp_t *im, const char *path, tg_file_id_t which);
int tg_import_edgelist(const char *out_dir, const tg_import_opts_t *o);
/* The same, parsing a plain file in exactly nranges byte ranges on as many threads (0: as many
 * as the cores, the size and --mem allow; gzip files and pipes are always one) and running
 * label propagation on nranges threads, so that tests can split small inputs. */
int tg_import_edgelist_ranges(const char *out_dir, const tg_import_opts_t *o, int nranges);
/* Tests only: called between the passes with the temporary directory that holds the binary
 * files edges-<k>.bin, so that a test can damage them. NULL (the default): nothing. */
extern void (*tg_edgelist_test_between_passes)(const char *tmp_dir);

#endif
