/* bench_io: the storage layer against the raw device.
 *
 *   bench_io [FILE [SIZE]]     (default FILE = bench_io.dat in the current directory, SIZE = 2G)
 *
 * Creates FILE (SIZE bytes of a position-dependent pattern) unless it already has that size,
 * checks that reads through the layer equal pread, then measures:
 *   1. the device probe (raw random 4 KiB O_DIRECT IOPS per depth, sequential bandwidth);
 *   2. random 4 KiB feature rows (aligned, and 4000-byte unaligned rows) through tg_io at depths
 *      1, 16, 64, 128, two mini-batches of 1024 rows in flight as an extractor would;
 *   3. merged vs unmerged: 512-byte rows drawn from a 4 MiB or 64 MiB window (the locality a
 *      reordered graph gives) and from the whole file (no locality), depth 64;
 *   4. the software ceiling: rows already in the page cache, so only the layer's cost remains.
 * The disk may be shared: each figure is the median of 3 rounds, each round a probe followed by
 * every run (0.5-0.75 s each), and "% of raw" compares a run with its own round's probe. The
 * whole bench takes about 45 s plus creating the file. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/io.h"

static uint8_t pattern(uint64_t i)
{
    uint64_t x = i * 0x9e3779b97f4a7c15ull;
    return (uint8_t)((x >> 29) ^ (i >> 12) ^ i);
}

static int make_file(const char *path, uint64_t size)
{
    struct stat st;
    if (stat(path, &st) == 0 && (uint64_t)st.st_size == size) return 0;
    fprintf(stderr, "creating %s (%llu MiB)...\n", path, (unsigned long long)(size >> 20));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return tg_err(-errno, "%s: cannot create: %s", path, strerror(errno));
    size_t chunk = 8 << 20;
    uint8_t *buf = malloc(chunk);
    int rc = buf ? 0 : tg_err(-ENOMEM, "out of memory");
    for (uint64_t off = 0; rc == 0 && off < size; off += chunk) {
        size_t n = (size_t)TG_MIN((uint64_t)chunk, size - off);
        for (size_t i = 0; i < n; i++)
            buf[i] = pattern(off + i);
        rc = tg_pwrite_full(fd, buf, n, off, path);
    }
    if (rc == 0 && fsync(fd)) rc = tg_err(-errno, "%s: fsync: %s", path, strerror(errno));
    /* The rows must come from the disk, not from the page cache we just filled. */
    if (rc == 0) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    free(buf);
    return rc;
}

#define ROUNDS 3

/* Median of ROUNDS values (v is reordered). */
static double median(double *v)
{
    for (int i = 1; i < ROUNDS; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[ROUNDS / 2];
}

typedef struct result {
    double rows_per_s, mb_per_s, wait_frac;
    double reads_per_row, amplification;
} result_t;

/* Reads random rows of `rowbytes` (drawn from rows [0, window_rows)) for `secs` seconds through
 * a queue of `depth`, two batches of `batch` rows in flight. Checks every row's bytes. */
static int run(tg_io_file_t *f, unsigned depth, unsigned flags, size_t rowbytes,
               uint64_t window_rows, size_t batch, double secs, result_t *out)
{
    tg_io_t *io;
    tg_io_opts_t o = {.depth = depth, .flags = flags};
    int rc = tg_io_create(&io, &o);
    if (rc < 0) return rc;
    tg_io_req_t *q = calloc(2 * batch, sizeof *q);
    uint8_t *dst = malloc(2 * batch * rowbytes);
    if (!q || !dst) {
        rc = tg_err(-ENOMEM, "out of memory");
        goto out;
    }
    tg_rng_t rng;
    tg_rng_seed(&rng, depth * 7919 + rowbytes + flags);
    tg_io_stats_reset(tg_io_stats(io));
    size_t remaining[2] = {0, 0};
    uint64_t rows = 0;
    double t0 = tg_now(), t_end = t0 + secs;
    int half = 0, checked = 0;
    for (;;) {
        int stop = tg_now() >= t_end;
        if (!stop) {
            for (size_t i = 0; i < batch; i++) {
                uint64_t r = tg_rng_below(&rng, window_rows);
                size_t k = (size_t)half * batch + i;
                q[k] = (tg_io_req_t){
                    .file = f, .off = r * rowbytes, .len = rowbytes, .dst = dst + k * rowbytes};
            }
            if ((rc = tg_io_submit(io, q + (size_t)half * batch, batch)) < 0) goto out;
            remaining[half] = batch;
        }
        int other = half ^ 1;
        while (remaining[other] > 0 || (stop && remaining[half] > 0)) {
            tg_io_req_t *done[64];
            int n = tg_io_reap(io, done, 64, 1);
            if (n < 0) {
                rc = n;
                goto out;
            }
            for (int i = 0; i < n; i++) {
                if (done[i]->res < 0) {
                    rc = done[i]->res;
                    goto out;
                }
                /* Spot-check the bytes of a few rows of every batch. */
                if (checked++ % 97 == 0) {
                    const uint8_t *p = done[i]->dst;
                    for (size_t j = 0; j < rowbytes; j++)
                        if (p[j] != pattern(done[i]->off + j)) {
                            rc = tg_err(-EIO, "row at offset %llu has wrong bytes",
                                        (unsigned long long)done[i]->off);
                            goto out;
                        }
                }
                remaining[(done[i] - q) / batch]--;
            }
            rows += (uint64_t)n;
        }
        if (stop) break;
        half = other;
    }
    double el = tg_now() - t0;
    tg_io_counts_t c;
    tg_io_stats_snapshot(tg_io_stats(io), &c);
    out->rows_per_s = (double)rows / el;
    out->mb_per_s = (double)c.io_read_bytes / el / 1e6;
    out->wait_frac = c.io_wait_s / el;
    out->reads_per_row = (double)c.io_requests / (double)rows;
    out->amplification = (double)c.io_read_bytes / (double)c.io_needed_bytes;
out:
    free(q);
    free(dst);
    tg_io_destroy(io);
    return rc;
}

/* Before timing: random unaligned ranges through the layer equal pread. */
static int verify(tg_io_file_t *f, const char *path, uint64_t size)
{
    tg_io_t *io;
    int rc = tg_io_create(&io, NULL);
    if (rc < 0) return rc;
    int fd = open(path, O_RDONLY);
    enum { N = 256, MAXLEN = 200000 };
    tg_io_req_t q[N];
    uint8_t *a = malloc((size_t)N * MAXLEN), *b = malloc(MAXLEN);
    tg_rng_t rng;
    tg_rng_seed(&rng, 42);
    for (int i = 0; i < N; i++) {
        size_t len = 1 + (size_t)tg_rng_below(&rng, i % 8 ? 5000 : MAXLEN);
        q[i] = (tg_io_req_t){.file = f,
                             .off = tg_rng_below(&rng, size - len),
                             .len = len,
                             .dst = a + (size_t)i * MAXLEN};
    }
    rc = fd < 0 || !a || !b ? tg_err(-EIO, "verify: set-up failed") : tg_io_read_batch(io, q, N);
    for (int i = 0; rc == 0 && i < N; i++) {
        rc = tg_pread_full(fd, b, q[i].len, q[i].off, path);
        if (rc == 0 && memcmp(b, q[i].dst, q[i].len))
            rc = tg_err(-EIO, "verify: range %d at offset %llu differs from pread", i,
                        (unsigned long long)q[i].off);
    }
    if (fd >= 0) close(fd);
    free(a);
    free(b);
    tg_io_destroy(io);
    return rc;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "bench_io.dat";
    uint64_t size = 2ull << 30;
    if (argc > 2 && tg_parse_size(argv[2], &size) < 0) {
        fprintf(stderr, "bench_io: %s\n", tg_errmsg());
        return 2;
    }
    tg_io_file_t *f = NULL;
    int rc = make_file(path, size);
    if (rc == 0) rc = tg_io_file_open(&f, path, 0);
    if (rc == 0) rc = verify(f, path, size);
    if (rc < 0) {
        fprintf(stderr, "bench_io: %s\n", tg_errmsg());
        tg_io_file_close(f);
        return 1;
    }
    printf("file %s, %llu MiB, O_DIRECT %s, alignment %u\n", path, (unsigned long long)(size >> 20),
           tg_io_file_direct(f) ? "yes" : "no", tg_io_file_align(f));

    /* The disk is shared with whatever else runs on the machine, so every figure is the median
     * of ROUNDS rounds, and each round pairs the layer's runs with a probe taken just before:
     * "% of raw" compares the two within a round. */
    static const struct {
        size_t rowbytes;
        unsigned depth, flags;
    } rows_cfg[] = {
        {4096, 1, 0}, {4096, 16, 0}, {4096, 64, 0}, {4096, 128, 0}, {4096, 1, TG_IO_FORCE_PREAD},
        {4000, 1, 0}, {4000, 16, 0}, {4000, 64, 0}, {4000, 128, 0}, {4000, 1, TG_IO_FORCE_PREAD}};
    enum { NROWCFG = sizeof rows_cfg / sizeof rows_cfg[0], NWIN = 3 };
    static const uint64_t windows[NWIN] = {4u << 20, 64u << 20, 0};
    tg_io_probe_t pr[ROUNDS];
    result_t rr[NROWCFG][ROUNDS], mr[NWIN][2][ROUNDS];
    double ratio[NROWCFG][ROUNDS];
    for (int round = 0; round < ROUNDS; round++) {
        fprintf(stderr, "round %d/%d\n", round + 1, ROUNDS);
        tg_io_probe_opts_t po = {.time_s = 1.0, .refresh = 1};
        if ((rc = tg_io_probe_run(path, &po, &pr[round])) < 0) goto fail;
        for (size_t c = 0; c < NROWCFG; c++) {
            size_t rb = rows_cfg[c].rowbytes;
            rc = run(f, rows_cfg[c].depth, rows_cfg[c].flags, rb, size / rb, 1024, 0.5,
                     &rr[c][round]);
            if (rc < 0) goto fail;
            ratio[c][round] = 0;
            for (unsigned k = 0; k < pr[round].ndepths; k++)
                if (pr[round].depth[k] == rows_cfg[c].depth)
                    ratio[c][round] = rr[c][round].rows_per_s / pr[round].iops[k];
        }
        for (size_t w = 0; w < NWIN; w++)
            for (int merge = 0; merge < 2; merge++) {
                uint64_t window = windows[w] ? windows[w] : size;
                rc = run(f, 64, merge ? 0 : TG_IO_NO_MERGE, 512, window / 512, 4096, 0.75,
                         &mr[w][merge][round]);
                if (rc < 0) goto fail;
            }
    }

    printf("\nprobe (raw device, random 4 KiB O_DIRECT reads), median of %d rounds\n", ROUNDS);
    printf("  depth      IOPS   mean latency\n");
    double v[ROUNDS], u[ROUNDS];
    for (unsigned d = 0; d < pr[0].ndepths; d++) {
        for (int r = 0; r < ROUNDS; r++) {
            v[r] = pr[r].iops[d];
            u[r] = pr[r].lat_us[d];
        }
        printf("  %5u  %8.0f  %9.1f us\n", pr[0].depth[d], median(v), median(u));
    }
    for (int r = 0; r < ROUNDS; r++)
        v[r] = pr[r].seq_bytes_per_s;
    printf("  sequential read (1 MiB, depth 8) %.0f MB/s; default depths chosen:", median(v) / 1e6);
    for (int r = 0; r < ROUNDS; r++)
        printf(" %u", pr[r].best_depth);
    printf("\n");

    printf("\nrandom rows through tg_io (two batches of 1024 rows in flight, merging on), median "
           "of %d rounds\n",
           ROUNDS);
    printf("  row bytes  backend   depth    rows/s  %% of raw   MB/s read  reads/row  "
           "read ampl.  wait\n");
    for (size_t c = 0; c < NROWCFG; c++) {
        double rows[ROUNDS], mb[ROUNDS], wait[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            rows[r] = rr[c][r].rows_per_s;
            mb[r] = rr[c][r].mb_per_s;
            wait[r] = rr[c][r].wait_frac;
        }
        printf("  %9zu  %-8s  %5u  %8.0f  %8.0f%%  %9.1f  %9.3f  %10.3f  %4.0f%%\n",
               rows_cfg[c].rowbytes, (rows_cfg[c].flags & TG_IO_FORCE_PREAD) ? "pread" : "io_uring",
               rows_cfg[c].depth, median(rows), 100 * median(ratio[c]), median(mb),
               rr[c][0].reads_per_row, rr[c][0].amplification, 100 * median(wait));
    }

    printf("\nmerging: 512-byte rows, depth 64, batches of 4096 rows, median of %d rounds\n",
           ROUNDS);
    printf("  rows drawn from          merge    rows/s   MB/s read  reads/row  read ampl.\n");
    for (size_t w = 0; w < NWIN; w++)
        for (int merge = 1; merge >= 0; merge--) {
            double rows[ROUNDS], mb[ROUNDS];
            for (int r = 0; r < ROUNDS; r++) {
                rows[r] = mr[w][merge][r].rows_per_s;
                mb[r] = mr[w][merge][r].mb_per_s;
            }
            char label[64];
            if (windows[w])
                snprintf(label, sizeof label, "a %llu MiB window",
                         (unsigned long long)(windows[w] >> 20));
            else
                snprintf(label, sizeof label, "the whole file");
            printf("  %-22s  %-5s  %8.0f  %9.1f  %9.3f  %10.3f\n", label, merge ? "on" : "off",
                   median(rows), median(mb), mr[w][merge][0].reads_per_row,
                   mr[w][merge][0].amplification);
        }
    /* The layer's own cost per row: rows already in the page cache (a buffered handle on a
     * 64 MiB window read once beforehand), so the device drops out. */
    printf("\nsoftware ceiling: 4096-byte rows from a page-cached 64 MiB window, depth 64\n");
    printf("  backend      rows/s   us per row\n");
    tg_io_file_t *fb = NULL;
    if ((rc = tg_io_file_open(&fb, path, TG_IO_FILE_BUFFERED)) < 0) goto fail;
    for (int pread_backend = 0; pread_backend < 2; pread_backend++) {
        result_t r = {0};
        unsigned fl = pread_backend ? TG_IO_FORCE_PREAD : 0;
        uint64_t window = (64u << 20) / 4096;
        rc = run(fb, 64, fl, 4096, window, 1024, 1.0, &r); /* warm the page cache */
        if (rc == 0) rc = run(fb, 64, fl, 4096, window, 1024, 1.5, &r);
        if (rc < 0) {
            tg_io_file_close(fb);
            goto fail;
        }
        printf("  %-8s  %9.0f  %10.2f\n", pread_backend ? "pread" : "io_uring", r.rows_per_s,
               1e6 / r.rows_per_s);
    }
    tg_io_file_close(fb);
    tg_io_file_close(f);
    return 0;
fail:
    fprintf(stderr, "bench_io: %s\n", tg_errmsg());
    tg_io_file_close(f);
    return 1;
}
