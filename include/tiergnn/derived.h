/* tiergnn/derived.h - files a strategy computes from a dataset (neighbour caches, partitions,
 * packed chunks, PageRank), named by their parameters and reused while they still match.
 *
 * How to use:
 *     tg_derived_file_t *f;
 *     int rc = tg_derived_open(&f, ds, NULL, "ncache", "bytes=67108864", 0);
 *     if (rc == -ENOENT || rc == -ESTALE) {          // none yet, or made for something else
 *         tg_log_info("%s", tg_errmsg());             // says why: dataset changed, params ...
 *         tg_derived_writer_t *w;
 *         if ((rc = tg_derived_create(&w, ds, NULL, "ncache", "bytes=67108864", 0)) < 0) ...;
 *         while (...) if ((rc = tg_derived_append(w, piece, len)) < 0) break;
 *         rc = rc < 0 ? (tg_derived_abort(w), rc) : tg_derived_commit(w);
 *         if (rc == 0) rc = tg_derived_open(&f, ds, NULL, "ncache", "bytes=67108864", 0);
 *     }
 *     if (rc < 0) die(tg_errmsg());
 *     ... read the payload: tg_derived_read(f, buf, len, off), or open f->path with io/
 *         (tg_io_file_open, O_DIRECT) and add f->payload_off to every offset ...
 *     tg_derived_close(f);
 *
 * Where: DIR/<kind>-<params>.bin. DIR is the caller's `root` when it gives one (used as it is);
 * with root NULL, which is what strategies pass, this module decides, in this order:
 * the process's directory set with tg_derived_set_dir (`--derived-dir DIR`, used as it is);
 * DATASET/derived when it can be written (or made); else a per-user directory keyed by the
 * dataset's identity, $XDG_CACHE_HOME/tiergnn/derived-<16 hex> ($HOME/.cache when XDG_CACHE_HOME
 * is unset), said once per dataset in a log line. The key hashes meta.txt's counts and file
 * CRCs, so two copies of a dataset share it and a changed dataset gets another. Wherever DIR is,
 * tg_derived_open also takes a valid file from DATASET/derived itself (a read-only snapshot's).
 * Runtime files of a run (spill, packed files) go to tg_derived_dir(ds, NULL) too.
 * Names: kind is a short word ([a-z0-9_], up to 31 bytes, not "tmp"); params is
 * the caller's canonical string of everything the payload depends on besides the dataset
 * ("bytes=67108864,seed=1"), printable ASCII, up to TG_DERIVED_PARAMS_MAX bytes. In the file
 * name, characters outside [A-Za-z0-9._,=+-] become '_' and a params string that needed that,
 * or is longer than 64 bytes, is shortened and followed by '~' and a 64-bit hash; the header
 * keeps params whole, so two strings that share a name never pass for each other.
 *
 * Validity: a file is trusted only while its header (magic, version, header CRC), kind and
 * params, the dataset identity (num_nodes, num_edges, feat_dim and the CRC-32 of every array
 * file as meta.txt records them) and its size all match. With TG_DERIVED_VERIFY, or for a
 * dataset opened with TG_OPEN_CHECK_CHECKSUMS (train --verify), the payload's CRC-32 is checked
 * too (it reads the whole payload: slow for GBs). A file that fails is reported as -ESTALE with
 * a message that says why; rebuilding replaces it atomically.
 *
 * Writing: tg_derived_create makes DIR/tmp-<pid>-<seq>-<name> (exclusive create), reserves the
 * 4096-byte header, and streams the payload through a tg_filew_t (two buffers of buf_bytes,
 * O_DIRECT where the file system allows). tg_derived_commit writes the header, fsyncs, renames
 * the temp file over the final name and fsyncs DIR. Abort, any error, or a crash leave at most
 * a temp file, which no open trusts; temp files of processes that are gone are removed by the
 * next tg_derived_create or tg_derived_open on DIR, and by tg_derived_clean.
 *
 * Ownership: a tg_derived_writer_t is owned by its creator until tg_derived_commit or
 * tg_derived_abort, which both free it (commit also on failure). A tg_derived_file_t is owned by
 * the opener until tg_derived_close; its path, kind and params stay valid until then. Its fd
 * was validated: reads through it see the checked file even if a rebuild replaces the name.
 * Neither object is thread-safe; tg_derived_read may be called from several threads at once.
 *
 * Errors: 0 or -errno with tg_err() set, as everywhere. tg_derived_open: -ENOENT when there is
 * no such file, -ESTALE when there is one that must be rebuilt, -EINVAL for bad kind/params,
 * other codes for I/O problems (EACCES, EIO ...), which a rebuild does not fix.
 *
 * Module: data/. Format of the header: docs/FORMAT.md, "derived/ files".
 */
#ifndef TIERGNN_DERIVED_H
#define TIERGNN_DERIVED_H

#include <stdint.h>
#include <stdio.h>

#include "tiergnn/data.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TG_DERIVED_DIRNAME "derived"
#define TG_DERIVED_VERSION 1
/* Header size, and where the payload starts: a multiple of 4096, so that payload offsets that
 * are aligned for O_DIRECT stay aligned in the file. */
#define TG_DERIVED_PAYLOAD_OFFSET 4096u
#define TG_DERIVED_KIND_MAX 31
#define TG_DERIVED_PARAMS_MAX 3960

/* ---------------------------------------------------------------- names */

/* The directory derived files of ds go to: root if given, else as "Where" says above (it makes
 * the per-user directory when it picks it). */
void tg_derived_dir(const tg_dataset_t *ds, const char *root, char *buf, size_t len);
/* DATASET/derived, whether or not it is used. */
void tg_derived_own_dir(const tg_dataset_t *ds, char *buf, size_t len);
/* The per-user directory of ds (no I/O); -ENOENT when neither $XDG_CACHE_HOME (absolute) nor
 * $HOME is set. */
int tg_derived_fallback_dir(const tg_dataset_t *ds, char *buf, size_t len);
/* Sets the process's derived directory (--derived-dir; NULL or "": none). With create, makes it
 * (mkdir -p) and checks that it can be written: an error names dir and what was expected. Call
 * before a run opens (not thread-safe against derived calls in flight). */
int tg_derived_set_dir(const char *dir, int create);
/* That directory, or NULL. */
const char *tg_derived_get_dir(void);
/* The file name (no directory) for kind and params; -EINVAL naming the problem when kind or
 * params is not acceptable, -ENAMETOOLONG when buf is too small. */
int tg_derived_name(const char *kind, const char *params, char *buf, size_t len);
/* tg_derived_dir + "/" + tg_derived_name. */
int tg_derived_path(const tg_dataset_t *ds, const char *root, const char *kind, const char *params,
                    char *buf, size_t len);

/* ---------------------------------------------------------------- writing */

typedef struct tg_derived_writer tg_derived_writer_t;

/* Creates DIR (mkdir -p) and the temp file. buf_bytes: the size of each of the writer's two
 * buffers (0: 8 MiB), which the caller accounts in its budget. */
int tg_derived_create(tg_derived_writer_t **out, const tg_dataset_t *ds, const char *root,
                      const char *kind, const char *params, size_t buf_bytes);
/* Appends a piece of the payload (large pieces are cheapest; a piece of at least buf_bytes at
 * a 4096-aligned address goes to disk without a copy). After a failure every later call
 * returns the same error. */
int tg_derived_append(tg_derived_writer_t *w, const void *data, size_t len);
/* Bytes of payload appended so far (positional writes: the payload's size so far). */
uint64_t tg_derived_written(const tg_derived_writer_t *w);
/* Positional writing, for payloads produced out of order (a permutation's runs land where they
 * belong): writes len bytes at payload offset off (buffered, page cache). A writer takes either
 * appends or positional writes, not both (-EINVAL). The payload is [0, the end of the furthest
 * write, or the size given to tg_derived_set_size); bytes never written read as zeros. Its CRC is
 * computed at commit by reading the payload back once. Not thread-safe, like the rest. */
int tg_derived_pwrite(tg_derived_writer_t *w, const void *data, size_t len, uint64_t off);
/* Fixes a positional payload's size (a hole at its end reads as zeros). */
int tg_derived_set_size(tg_derived_writer_t *w, uint64_t len);
/* Positional writes: flushes what was written to disk and drops it from the page cache, which a
 * memory cgroup counts (call it every few hundred MiB of a long rewrite). */
int tg_derived_flush(tg_derived_writer_t *w);
/* Writes the header, fsyncs, renames over the final name (replacing a stale file) and fsyncs
 * the directory. Frees w, and on failure removes the temp file. */
int tg_derived_commit(tg_derived_writer_t *w);
/* Removes the temp file and frees w. NULL is a no-op. */
void tg_derived_abort(tg_derived_writer_t *w);

/* ---------------------------------------------------------------- reading */

enum {
    TG_DERIVED_VERIFY = 1, /* also read the payload and check its CRC-32 */
};

typedef struct tg_derived_file {
    char *path;           /* DIR/name */
    int fd;               /* O_RDONLY, buffered; the validated file */
    uint64_t payload_off; /* TG_DERIVED_PAYLOAD_OFFSET: add to payload offsets */
    uint64_t payload_len;
    uint32_t payload_crc;
    char kind[TG_DERIVED_KIND_MAX + 1];
    char *params;
} tg_derived_file_t;

int tg_derived_open(tg_derived_file_t **out, const tg_dataset_t *ds, const char *root,
                    const char *kind, const char *params, unsigned flags);
/* Reads payload bytes [off, off + len); a range past the payload is -EINVAL. */
int tg_derived_read(const tg_derived_file_t *f, void *buf, size_t len, uint64_t off);
void tg_derived_close(tg_derived_file_t *f);

/* ---------------------------------------------------------------- listing and cleaning */

typedef enum {
    TG_DERIVED_VALID = 0,
    TG_DERIVED_STALE,     /* a derived file that no longer matches (why says how) */
    TG_DERIVED_TEMP_DEAD, /* temp file of a process that is gone: removable */
    TG_DERIVED_TEMP_LIVE, /* temp file of a running process: a writer at work */
    TG_DERIVED_OTHER,     /* not a derived file: left alone */
} tg_derived_state_t;

typedef struct tg_derived_entry {
    char name[256];
    tg_derived_state_t state;
    uint64_t bytes;                     /* size on disk */
    char kind[TG_DERIVED_KIND_MAX + 1]; /* from the header, "" when unreadable */
    char params[TG_DERIVED_PARAMS_MAX + 1];
    char why[512]; /* stale: the reason; temp: the process */
} tg_derived_entry_t;

/* The entries of DIR sorted by name (checking headers, identity and sizes, not payload CRCs).
 * No DIR: 0 entries. *out is malloc'd (NULL when empty); free it with free(). */
int tg_derived_list(const tg_dataset_t *ds, const char *root, tg_derived_entry_t **out, size_t *n);
/* Removes derived files (only stale ones with stale_only) and temp files of processes that are
 * gone; never a running writer's temp file nor a file that is not a derived file. Prints one
 * line per file removed or kept to log (when not NULL). With root NULL the directory is
 * tg_derived_dir's; when that is DATASET/derived, it is removed once emptied. */
int tg_derived_clean(const tg_dataset_t *ds, const char *root, int stale_only, FILE *log,
                     uint64_t *bytes_freed, size_t *files_removed);

#ifdef __cplusplus
}
#endif
#endif
