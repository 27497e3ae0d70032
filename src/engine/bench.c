/* tiergnn bench: every strategy in its own `tiergnn train` process, cold and under a cgroup
 * limit, the reports bench.csv / bench.md / bench.svg, and the I/O lower bound of an epoch (see
 * "bench" in tiergnn/engine.h and docs/BENCH.md). */
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiergnn/data.h"
#include "tiergnn/engine.h"
#include "tiergnn/graph.h"
#include "tiergnn/io.h"

extern char **environ;

#define MAX_STRATEGIES 32
#define NAME_MAX_LEN 48
#define MiB (1024.0 * 1024.0)

void tg_bench_opts_default(tg_bench_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 3;
    tg_model_config_default(&o->model);
    o->model.num_layers = 2;
    o->model.hidden = 256;
    for (int l = 0; l < TG_MAX_LAYERS; l++)
        o->fanouts[l] = 10;
    o->batch_size = 1024;
    o->threads = 1;
    o->sampler_threads = -1;
    o->cgroup_extra = -1;
}

/* ================================================================ epoch footprint */

typedef struct {
    int rc;
    char *msg;
    uint64_t batch_nodes;
    uint64_t best_nodes, best_edges, best_id; /* the largest batch (ties: lower id) */
    tg_batch_t best;
    int has_best;
} fp_thread_t;

typedef struct {
    tg_adj_t *adj;
    const uint64_t *order;
    uint64_t nseeds, bsz;
    int L;
    const int64_t *fan;
    uint64_t seed, epoch;
    _Atomic uint64_t *bits; /* one bit per node */
    fp_thread_t *t;
    int keep_best;
} fp_ctx_t;

static uint64_t batch_edges(const tg_batch_t *b)
{
    uint64_t e = 0;
    for (int l = 0; l < b->num_layers; l++)
        e += b->blocks[l].num_edges;
    return e;
}

static void fp_fn(void *arg, size_t begin, size_t end, int tid)
{
    fp_ctx_t *c = arg;
    fp_thread_t *t = &c->t[tid];
    if (begin >= end) return;
    tg_sampler_t *s = NULL;
    int rc = tg_sampler_create(&s, c->adj, c->L, c->fan);
    for (size_t b = begin; rc == 0 && b < end; b++) {
        uint64_t first = b * c->bsz, cnt = TG_MIN(c->bsz, c->nseeds - first);
        tg_rng_t r;
        tg_sampler_batch_rng(&r, c->seed, c->epoch, b);
        tg_batch_t bt;
        if ((rc = tg_sampler_sample(s, c->order + first, (size_t)cnt, &r, &bt)) < 0) {
            tg_err_prefix(rc, "epoch footprint: batch %zu", b);
            break;
        }
        for (uint32_t i = 0; i < bt.num_nodes; i++) {
            uint64_t v = bt.nodes[i];
            atomic_fetch_or_explicit(&c->bits[v >> 6], 1ull << (v & 63), memory_order_relaxed);
        }
        t->batch_nodes += bt.num_nodes;
        /* within a thread ids ascend, so a strictly larger batch is the only replacement */
        if (!t->has_best || bt.num_nodes > t->best_nodes) {
            t->best_nodes = bt.num_nodes;
            t->best_edges = batch_edges(&bt);
            t->best_id = b;
            if (c->keep_best) {
                if (t->has_best) tg_batch_free(&t->best);
                t->best = bt;
            }
            t->has_best = 1;
            if (c->keep_best) continue;
        }
        tg_batch_free(&bt);
    }
    tg_sampler_destroy(s);
    t->rc = rc;
    if (rc < 0) t->msg = strdup(tg_errmsg()); /* the message is thread-local */
}

/* tg_epoch_footprint; with best != NULL also hands over the epoch's largest batch. */
static int footprint(const char *dataset, const tg_footprint_opts_t *o, tg_epoch_footprint_t *out,
                     tg_batch_t *best)
{
    memset(out, 0, sizeof *out);
    if (best) memset(best, 0, sizeof *best);
    if (o->num_layers < 1 || o->num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "epoch footprint: %d layers, expected 1..%d", o->num_layers,
                      TG_MAX_LAYERS);
    tg_dataset_t *ds = NULL;
    tg_adj_t *adj = NULL;
    uint64_t *order = NULL;
    _Atomic uint64_t *bits = NULL;
    fp_thread_t *th = NULL;
    tg_pool_t *pool = NULL;
    int nthreads = o->threads > 0 ? o->threads : 1;
    int rc = tg_dataset_open(&ds, dataset, TG_OPEN_CHECK_SIZES);
    if (rc < 0) return rc;
    const tg_meta_t *m = &ds->meta;
    uint64_t N = m->num_nodes, ntrain = 0;
    int64_t fan[TG_MAX_LAYERS];
    for (int l = 0; l < o->num_layers; l++)
        fan[l] = o->model == TG_MODEL_MLP ? 0 : o->fanouts[l];
    /* The engine's whole-graph rule (tiergnn/engine.h, "Full batch"). */
    int all_full = o->model != TG_MODEL_MLP;
    for (int l = 0; l < o->num_layers; l++)
        if (fan[l] != TG_FANOUT_ALL) all_full = 0;
    if ((rc = tg_dataset_load_split(ds, TG_FILE_TRAIN, &order, &ntrain)) < 0) goto out;
    if (ntrain == 0) {
        rc = tg_err(-EINVAL, "%s: the training split is empty", dataset);
        goto out;
    }
    int whole = all_full && (o->batch_size == 0 || o->batch_size >= ntrain);
    uint64_t nseeds = ntrain;
    if (whole) {
        free(order);
        if (!(order = malloc(N * sizeof *order))) {
            rc = tg_err(-ENOMEM, "epoch footprint: out of memory for %llu node ids",
                        (unsigned long long)N);
            goto out;
        }
        for (uint64_t v = 0; v < N; v++)
            order[v] = v;
        nseeds = N;
    } else {
        tg_sampler_shuffle_epoch(order, ntrain, o->seed, o->epoch);
    }
    uint64_t bsz = o->batch_size && o->batch_size < ntrain ? o->batch_size : nseeds;
    uint64_t nb = (nseeds + bsz - 1) / bsz;
    if ((rc = tg_adj_mmap_open(&adj, ds, NULL)) < 0) goto out;
    bits = calloc((N + 63) / 64, sizeof *bits);
    th = calloc((size_t)nthreads, sizeof *th);
    if (!bits || !th) {
        rc =
            tg_err(-ENOMEM, "epoch footprint: out of memory for %llu nodes", (unsigned long long)N);
        goto out;
    }
    if (nthreads > 1 && (rc = tg_pool_create(&pool, nthreads)) < 0) goto out;
    fp_ctx_t c = {adj,     order,    nseeds, bsz, o->num_layers, fan,
                  o->seed, o->epoch, bits,   th,  best != NULL};
    tg_pool_for(pool, (size_t)nb, fp_fn, &c);
    int bi = -1;
    for (int i = 0; i < nthreads; i++) {
        if (th[i].rc < 0 && rc == 0)
            rc = tg_err(th[i].rc, "%s", th[i].msg ? th[i].msg : "epoch footprint: failed");
        out->batch_nodes += th[i].batch_nodes;
        if (th[i].has_best &&
            (bi < 0 || th[i].best_nodes > th[bi].best_nodes ||
             (th[i].best_nodes == th[bi].best_nodes && th[i].best_id < th[bi].best_id)))
            bi = i;
    }
    if (rc < 0) goto out;
    uint64_t distinct = 0;
    for (uint64_t w = 0; w < (N + 63) / 64; w++)
        distinct +=
            (uint64_t)__builtin_popcountll(atomic_load_explicit(&bits[w], memory_order_relaxed));
    out->batches = nb;
    out->distinct_nodes = distinct;
    out->whole_graph = whole;
    out->row_bytes = (uint64_t)m->feat_dim * tg_feat_dtype_size(m->feat_dtype);
    if (bi >= 0) {
        out->max_batch_nodes = th[bi].best_nodes;
        out->max_batch_edges = th[bi].best_edges;
        if (best) {
            *best = th[bi].best;
            th[bi].has_best = 0; /* handed over */
        }
    }
out:
    if (th)
        for (int i = 0; i < nthreads; i++) {
            if (th[i].has_best && best) tg_batch_free(&th[i].best);
            free(th[i].msg);
        }
    tg_pool_destroy(pool);
    free(th);
    free(bits);
    free(order);
    tg_adj_destroy(adj);
    tg_dataset_close(ds);
    return rc;
}

int tg_epoch_footprint(const char *dataset, const tg_footprint_opts_t *o, tg_epoch_footprint_t *out)
{
    return footprint(dataset, o, out, NULL);
}

/* ================================================================ small helpers */

/* Appends printf output to a growing string; on out of memory the string stays as it was and
 * *oom is set (checked once at the end). */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) TG_PRINTF(2, 3);
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + (size_t)n + 1)
            cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
}

static int sb_write(sbuf_t *b, const char *path)
{
    if (b->oom) return tg_err(-ENOMEM, "%s: out of memory composing the report", path);
    return tg_write_file_atomic(path, b->s ? b->s : "", b->len);
}

static void path_join(char *buf, size_t len, const char *dir, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ================================================================ page cache */

/* Writes back and drops every page of path from the page cache (dirty pages cannot be dropped,
 * hence the fdatasync first: a dataset just written through the page cache is still dirty). */
static int evict_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open to evict: %s", path, strerror(errno));
    int rc = 0;
    if (fdatasync(fd) < 0)
        rc = tg_err(-errno, "%s: fdatasync: %s", path, strerror(errno));
    else if ((rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)) != 0)
        rc = tg_err(-rc, "%s: posix_fadvise(DONTNEED): %s", path, strerror(rc));
    close(fd);
    return rc;
}

/* Bytes of path in the page cache now (mincore over a mapping, 1 GiB at a time). */
static int resident_bytes(const char *path, uint64_t *resident, uint64_t *size)
{
    *resident = *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return tg_err(-e, "%s: cannot stat: %s", path, strerror(e));
    }
    *size = (uint64_t)st.st_size;
    long pg = sysconf(_SC_PAGESIZE);
    const uint64_t step = (uint64_t)1 << 30;
    unsigned char *vec = malloc(step / (uint64_t)pg);
    int rc = vec ? 0 : tg_err(-ENOMEM, "%s: out of memory for mincore", path);
    for (uint64_t off = 0; rc == 0 && off < *size; off += step) {
        size_t len = (size_t)TG_MIN(step, *size - off);
        void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
        if (p == MAP_FAILED) {
            rc = tg_err(-errno, "%s: mmap for mincore: %s", path, strerror(errno));
            break;
        }
        if (mincore(p, len, vec) < 0) {
            rc = tg_err(-errno, "%s: mincore: %s", path, strerror(errno));
        } else {
            size_t pages = (len + (size_t)pg - 1) / (size_t)pg;
            for (size_t i = 0; i < pages; i++)
                if (vec[i] & 1) *resident += TG_MIN((uint64_t)pg, *size - off - i * (uint64_t)pg);
        }
        munmap(p, len);
    }
    free(vec);
    close(fd);
    return rc;
}

/* Drops (unless only_measure) and then measures the dataset's files in the page cache. */
static int dataset_cache(const tg_dataset_t *ds, int only_measure, uint64_t *resident,
                         uint64_t *total)
{
    *resident = *total = 0;
    for (int id = 0; id < TG_FILE_COUNT; id++) {
        char path[4096];
        tg_dataset_path(ds, (tg_file_id_t)id, path, sizeof path);
        int rc;
        if (!only_measure && (rc = evict_file(path)) < 0) return rc;
        uint64_t r, s;
        if ((rc = resident_bytes(path, &r, &s)) < 0) return rc;
        *resident += r;
        *total += s;
    }
    return 0;
}

/* ================================================================ processes */

/* Runs argv with stdin from /dev/null and stdout / stderr into files; waits. *status is the
 * wait status; ru the child's resource usage (with its waited-for descendants). */
static int spawn_wait(char *const argv[], const char *out_path, const char *err_path, int *status,
                      struct rusage *ru, double *wall_s)
{
    posix_spawn_file_actions_t fa;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc) return tg_err(-rc, "posix_spawn_file_actions_init: %s", strerror(rc));
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (rc) {
        posix_spawn_file_actions_destroy(&fa);
        return tg_err(-rc, "preparing to run %s: %s", argv[0], strerror(rc));
    }
    pid_t pid;
    double t0 = tg_now();
    rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) return tg_err(-rc, "cannot run %s: %s", argv[0], strerror(rc));
    for (;;) {
        pid_t w = wait4(pid, status, 0, ru);
        if (w == pid) break;
        if (w < 0 && errno != EINTR)
            return tg_err(-errno, "waiting for %s (pid %d): %s", argv[0], (int)pid,
                          strerror(errno));
    }
    *wall_s = tg_now() - t0;
    return 0;
}

/* The running binary's path: for the child processes, so that bench runs the same build. */
static int self_exe(char *buf, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n < 0) return tg_err(-errno, "cannot read /proc/self/exe: %s", strerror(errno));
    if ((size_t)n >= len - 1) return tg_err(-ENAMETOOLONG, "/proc/self/exe: path too long");
    buf[n] = 0;
    return 0;
}

/* Looks for membudget: ../shared/tools/membudget relative to the current directory, then
 * relative to the executable's directory and up to three of its parents. */
static int find_membudget(const char *exe, char *buf, size_t len)
{
    const char *rel = "../shared/tools/membudget";
    if (is_file(rel) && access(rel, X_OK) == 0) {
        if (!realpath(rel, buf)) snprintf(buf, len, "%s", rel);
        return 1;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", exe);
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) break;
        *slash = 0;
        char cand[4200];
        snprintf(cand, sizeof cand, "%s/%s", dir, rel);
        if (is_file(cand) && access(cand, X_OK) == 0) {
            if (!realpath(cand, buf)) snprintf(buf, len, "%.*s", (int)len - 1, cand);
            return 1;
        }
    }
    return 0;
}

/* Reads the last non-empty line of a file that does not start with `skip` (NULL: none). */
static void last_line(const char *path, const char *skip, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = 0;
        /* a progress bar's carriage returns: keep the text after the last one */
        char *cr = strrchr(line, '\r');
        const char *s = cr ? cr + 1 : line;
        if (!*s || (skip && !strncmp(s, skip, strlen(skip)))) continue;
        snprintf(buf, len, "%s", s);
    }
    free(line);
    fclose(f);
}

/* Checks that membudget can create a cgroup here: runs `membudget 64M -- true`. Returns 1 when
 * limits work, 0 when not (why says so). */
static int membudget_works(const char *mb, const char *rundir, char *why, size_t len)
{
    char out[4200], err[4200];
    path_join(out, sizeof out, rundir, ".membudget-check.out");
    path_join(err, sizeof err, rundir, ".membudget-check.err");
    char *argv[] = {(char *)mb, "64M", "--", "true", NULL};
    int st = 0;
    struct rusage ru;
    double wall;
    int ok = 0;
    if (spawn_wait(argv, out, err, &st, &ru, &wall) < 0) {
        snprintf(why, len, "%s", tg_errmsg());
    } else {
        char line[512];
        last_line(err, NULL, line, sizeof line);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strncmp(line, "membudget: limit=", 17))
            ok = 1;
        else
            snprintf(why, len, "%s", line[0] ? line : "membudget failed without a message");
    }
    unlink(out);
    unlink(err);
    return ok;
}

/* ================================================================ JSON lines */

/* A flat JSON object's members, as the train command writes them: numbers, null, strings,
 * booleans (nested values are skipped). */
typedef struct {
    char key[48];
    int is_num;
    double num;
    char str[96];
} jmember_t;

static const char *json_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    return p;
}

/* Parses a JSON string at p (at the opening quote) into buf; returns the position after it or
 * NULL. Escapes are decoded for the simple cases; \uXXXX becomes '?'. */
static const char *json_string(const char *p, char *buf, size_t len)
{
    if (*p != '"') return NULL;
    p++;
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\') {
            c = *p++;
            switch (c) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case 'b':
                c = '\b';
                break;
            case 'f':
                c = '\f';
                break;
            case 'u':
                for (int k = 0; k < 4; k++)
                    if (!*p++) return NULL;
                c = '?';
                break;
            case 0:
                return NULL;
            default:
                break; /* \" \\ \/ */
            }
        }
        if (n + 1 < len) buf[n++] = c;
    }
    if (*p != '"') return NULL;
    if (len) buf[n] = 0;
    return p + 1;
}

/* Skips a nested array or object (strings inside respected). */
static const char *json_skip_nested(const char *p)
{
    int depth = 0;
    char tmp[2];
    do {
        if (*p == '"') {
            if (!(p = json_string(p, tmp, sizeof tmp))) return NULL;
            continue;
        }
        if (*p == '[' || *p == '{') depth++;
        if (*p == ']' || *p == '}') depth--;
        if (!*p) return NULL;
        p++;
    } while (depth > 0);
    return p;
}

/* Parses one line; returns the member count, or -1 if it is not a JSON object. */
static int json_parse_line(const char *line, jmember_t *mem, int max)
{
    const char *p = json_ws(line);
    if (*p != '{') return -1;
    p = json_ws(p + 1);
    int n = 0;
    if (*p == '}') return 0;
    for (;;) {
        jmember_t m;
        memset(&m, 0, sizeof m);
        if (!(p = json_string(p, m.key, sizeof m.key))) return -1;
        p = json_ws(p);
        if (*p != ':') return -1;
        p = json_ws(p + 1);
        if (*p == '"') {
            if (!(p = json_string(p, m.str, sizeof m.str))) return -1;
        } else if (*p == '[' || *p == '{') {
            if (!(p = json_skip_nested(p))) return -1;
        } else if (!strncmp(p, "null", 4)) {
            p += 4;
        } else if (!strncmp(p, "true", 4)) {
            m.is_num = 1;
            m.num = 1;
            p += 4;
        } else if (!strncmp(p, "false", 5)) {
            m.is_num = 1;
            m.num = 0;
            p += 5;
        } else {
            char *e;
            m.num = strtod(p, &e);
            if (e == p) return -1;
            m.is_num = 1;
            p = e;
        }
        if (n < max) mem[n++] = m;
        p = json_ws(p);
        if (*p == ',') {
            p = json_ws(p + 1);
            continue;
        }
        if (*p == '}') return n;
        return -1;
    }
}

static double jnum(const jmember_t *m, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].key, key)) return m[i].is_num ? m[i].num : NAN;
    return NAN;
}

static int jhas(const jmember_t *m, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].key, key)) return 1;
    return 0;
}

/* ================================================================ one strategy's run */

/* Per-epoch keys the bench reads ("n/a" where the engine does not write them yet). */
enum {
    E_TIME,
    E_SAMPLE,
    E_GATHER,
    E_COMPUTE,
    E_WAIT,
    E_IO_WAIT,
    E_IO_REQ,
    E_IO_READ,
    E_IO_NEED,
    E_HIT,
    E_PEAK_RSS,
    E_COUNT
};
static const char *const epoch_keys[E_COUNT] = {
    "time_s",          "sample_s",        "gather_s",      "compute_s",
    "wait_s",          "io_wait_s",       "io_requests",   "io_read_bytes",
    "io_needed_bytes", "cache_hit_ratio", "peak_rss_bytes"};

typedef struct {
    double v[E_COUNT];
} epoch_rec_t;

typedef struct {
    char name[NAME_MAX_LEN];
    char dir[4096];
    /* process */
    int ran;       /* the process was started */
    int exit_code; /* exit status, 128 + signal for a signal */
    int signalled; /* killed by a signal (or membudget reported a SIGKILLed child) */
    double wall_s;
    struct rusage ru;
    double resident_start; /* fraction of the dataset in the page cache when it started */
    char last_err[512];
    /* JSON */
    epoch_rec_t *ep;
    size_t nep, cap_ep;
    int have_final;
    double best_epoch, valid_acc, test_acc, final_peak_rss;
    /* membudget */
    int have_cg;
    double cg_limit, cg_peak;
    /* summary (NAN = n/a) */
    double s_epoch, s_first, s_sample, s_gather, s_train, s_wait, s_io_wait, s_io_req, s_read,
        s_need, s_amp, s_hit, s_peak_rss, s_kernel_read;
    uint64_t timed_from; /* 1-based first epoch of the means */
} run_t;

static int parse_stdout(run_t *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    jmember_t mem[96];
    while (getline(&line, &cap, f) > 0) {
        int n = json_parse_line(line, mem, 96);
        if (n < 0) continue;
        if (jhas(mem, n, "best_epoch")) {
            r->have_final = 1;
            r->best_epoch = jnum(mem, n, "best_epoch");
            r->valid_acc = jnum(mem, n, "valid_acc");
            r->test_acc = jnum(mem, n, "test_acc");
            r->final_peak_rss = jnum(mem, n, "peak_rss_bytes");
        } else if (jhas(mem, n, "epoch")) {
            if (r->nep == r->cap_ep) {
                size_t c = r->cap_ep ? 2 * r->cap_ep : 16;
                epoch_rec_t *p = realloc(r->ep, c * sizeof *p);
                if (!p) {
                    rc = tg_err(-ENOMEM, "%s: out of memory for epoch records", path);
                    break;
                }
                r->ep = p;
                r->cap_ep = c;
            }
            epoch_rec_t *e = &r->ep[r->nep++];
            for (int k = 0; k < E_COUNT; k++)
                e->v[k] = jnum(mem, n, epoch_keys[k]);
        }
    }
    free(line);
    fclose(f);
    return rc;
}

static void parse_stderr(run_t *r, const char *path)
{
    last_line(path, "membudget:", r->last_err, sizeof r->last_err);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long lim;
        char peak[64];
        int ex;
        if (sscanf(line, "membudget: limit=%llu peak=%63s exit=%d", &lim, peak, &ex) == 3) {
            r->have_cg = 1;
            r->cg_limit = (double)lim;
            char *e;
            double pk = strtod(peak, &e);
            r->cg_peak = e != peak ? pk : NAN;
        }
    }
    free(line);
    fclose(f);
}

/* Mean of key k over the timed epochs where it is present; NAN if nowhere. */
static double mean_key(const run_t *r, int k, size_t from)
{
    double s = 0;
    size_t n = 0;
    for (size_t i = from; i < r->nep; i++)
        if (!isnan(r->ep[i].v[k])) {
            s += r->ep[i].v[k];
            n++;
        }
    return n ? s / (double)n : NAN;
}

static void summarise(run_t *r)
{
    /* The first epoch starts cold (empty page cache, caches filling): with more than one epoch
     * the means leave it out and it is reported apart. */
    size_t from = r->nep > 1 ? 1 : 0;
    r->timed_from = from + 1;
    r->s_first = r->nep ? r->ep[0].v[E_TIME] : NAN;
    r->s_epoch = mean_key(r, E_TIME, from);
    r->s_sample = mean_key(r, E_SAMPLE, from);
    r->s_gather = mean_key(r, E_GATHER, from);
    r->s_train = mean_key(r, E_COMPUTE, from);
    r->s_wait = mean_key(r, E_WAIT, from);
    r->s_io_wait = mean_key(r, E_IO_WAIT, from);
    r->s_io_req = mean_key(r, E_IO_REQ, from);
    r->s_read = mean_key(r, E_IO_READ, from);
    r->s_need = mean_key(r, E_IO_NEED, from);
    r->s_amp = r->s_need > 0 ? r->s_read / r->s_need : NAN;
    r->s_hit = mean_key(r, E_HIT, from);
    /* Peak RSS: the final line's, else the largest epoch value, else the kernel's maxrss of
     * the child (which is the train process: membudget's shell is smaller). */
    double pk = r->have_final ? r->final_peak_rss : NAN;
    for (size_t i = 0; isnan(pk) && i < r->nep; i++)
        if (!isnan(r->ep[i].v[E_PEAK_RSS])) pk = TG_MAX(isnan(pk) ? 0 : pk, r->ep[i].v[E_PEAK_RSS]);
    if (isnan(pk) && r->ran && r->ru.ru_maxrss > 0) pk = (double)r->ru.ru_maxrss * 1024.0;
    r->s_peak_rss = pk;
    /* ru_inblock counts 512-byte units read from storage by the process tree (page faults,
     * buffered and direct reads): whole run, loading and evaluation included. */
    r->s_kernel_read = r->ran ? (double)r->ru.ru_inblock * 512.0 : NAN;
}

static const char *run_status(const run_t *r)
{
    if (!r->ran) return "not run";
    if (r->signalled) return "killed";
    if (r->exit_code != 0) return "failed";
    if (!r->have_final) return "incomplete";
    return "ok";
}

static int run_ok(const run_t *r)
{
    return !strcmp(run_status(r), "ok");
}

/* ================================================================ the allowance */

typedef struct {
    uint64_t base, model, act, inflight, labels, eval, headroom, total;
    int measured; /* act from a real step on the epoch's largest batch */
} allowance_t;

static int compute_allowance(const tg_bench_opts_t *o, const tg_dataset_t *ds,
                             const tg_epoch_footprint_t *fp, const tg_batch_t *big, allowance_t *a)
{
    memset(a, 0, sizeof *a);
    const tg_meta_t *m = &ds->meta;
    int st = o->sampler_threads < 0 ? o->threads : o->sampler_threads;
    /* The process itself: binary, libc, OpenBLAS, allocator slack, thread stacks in use. */
    a->base = (32u << 20) + (uint64_t)(o->threads + st) * (8u << 20);
    tg_model_config_t cfg = o->model;
    cfg.in_dim = m->feat_dim;
    cfg.out_dim = m->num_classes;
    cfg.multi_label = m->multi_label;
    int rc = tg_model_config_check(&cfg);
    if (rc < 0) return tg_err_prefix(rc, "bench: the model of the runs");
    tg_model_t *model = NULL;
    if ((rc = tg_model_create(&model, &cfg, o->seed)) < 0) return rc;
    a->model = tg_model_param_bytes(model);
    uint64_t lw = m->multi_label ? m->num_classes : 1;
    if (big && big->num_nodes) {
        /* One real step on the epoch's largest batch sizes the activation arena exactly. */
        float *X = calloc((size_t)big->num_nodes * m->feat_dim, sizeof *X);
        int32_t *y = calloc((size_t)big->num_seeds * lw, sizeof *y);
        if (!X || !y) {
            rc = tg_err(-ENOMEM, "bench: out of memory for a step on a batch of %u nodes",
                        big->num_nodes);
        } else {
            tg_step_stats_t ss;
            rc = tg_model_train_step(model, big, X, y, &ss);
            if (rc < 0) tg_err_prefix(rc, "bench: sizing the activations with one step");
        }
        free(X);
        free(y);
        a->act = tg_model_act_bytes(model);
        a->measured = rc >= 0;
    }
    tg_model_destroy(model);
    if (rc < 0) return rc;
    /* Batches in flight: two per sampler thread, the one training and the one being handed
     * over; each holds its features, node ids, labels and blocks. */
    uint64_t per_batch =
        fp->max_batch_nodes * ((uint64_t)m->feat_dim * 4 + 8 + lw * 4) + fp->max_batch_edges * 12;
    a->inflight = (uint64_t)(2 * st + 2) * per_batch;
    /* Labels and split ids are loaded whole (not part of --mem). */
    a->labels = m->num_nodes * 4 * lw + (m->num_train + m->num_valid + m->num_test) * 8 +
                (fp->whole_graph ? m->num_nodes : 0);
    /* Full-neighbour evaluation keeps two layers' outputs of every node in RAM. */
    if (!o->eval_sampled && cfg.num_layers > 1)
        a->eval = 2 * m->num_nodes * (uint64_t)TG_MAX(cfg.hidden, cfg.out_dim) * 4;
    uint64_t sum = a->base + a->model + a->act + a->inflight + a->labels + a->eval;
    a->headroom = sum / 4;
    a->total = (sum + a->headroom + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
    return 0;
}

/* ================================================================ reports */

static void fmt_num(char *buf, size_t len, double v, const char *fmt)
{
    if (isnan(v) || isinf(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, fmt, v);
}

static void fmt_mib(char *buf, size_t len, double v)
{
    if (isnan(v))
        snprintf(buf, len, "n/a");
    else
        snprintf(buf, len, "%.1f MiB", v / MiB);
}

/* CSV field: quoted when it holds a comma, quote or newline. */
static void csv_field(sbuf_t *b, const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        sb_printf(b, "%s", s);
        return;
    }
    sb_printf(b, "\"");
    for (const char *p = s; *p; p++)
        sb_printf(b, *p == '"' ? "\"\"" : "%c", *p == '\n' || *p == '\r' ? ' ' : *p);
    sb_printf(b, "\"");
}

static void csv_num(sbuf_t *b, double v, const char *fmt)
{
    char t[64];
    fmt_num(t, sizeof t, v, fmt);
    sb_printf(b, ",%s", t);
}

static const char csv_header[] =
    "strategy,status,exit_status,epochs_run,epochs_timed,epoch_time_s,first_epoch_s,sample_s,"
    "gather_s,train_s,wait_s,io_wait_s,io_requests_per_epoch,disk_read_bytes_per_epoch,"
    "needed_bytes_per_epoch,read_amplification,cache_hit_ratio,peak_rss_bytes,cgroup_limit_bytes,"
    "cgroup_peak_bytes,kernel_read_bytes,test_acc,valid_acc,best_epoch,wall_s,resident_at_start,"
    "last_error\n";

static void timed_range(const run_t *r, char *buf, size_t len)
{
    if (r->nep == 0)
        snprintf(buf, len, "n/a");
    else if (r->timed_from >= r->nep)
        snprintf(buf, len, "%zu", r->nep);
    else
        snprintf(buf, len, "%llu-%zu", (unsigned long long)r->timed_from, r->nep);
}

static int write_csv(const char *path, run_t *runs, int nruns)
{
    sbuf_t b = {0};
    sb_printf(&b, "%s", csv_header);
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        char t[64];
        csv_field(&b, r->name);
        sb_printf(&b, ",%s", run_status(r));
        if (r->ran)
            sb_printf(&b, ",%d", r->exit_code);
        else
            sb_printf(&b, ",n/a");
        sb_printf(&b, ",%zu", r->nep);
        timed_range(r, t, sizeof t);
        sb_printf(&b, ",%s", t);
        csv_num(&b, r->s_epoch, "%.6g");
        csv_num(&b, r->s_first, "%.6g");
        csv_num(&b, r->s_sample, "%.6g");
        csv_num(&b, r->s_gather, "%.6g");
        csv_num(&b, r->s_train, "%.6g");
        csv_num(&b, r->s_wait, "%.6g");
        csv_num(&b, r->s_io_wait, "%.6g");
        csv_num(&b, r->s_io_req, "%.0f");
        csv_num(&b, r->s_read, "%.0f");
        csv_num(&b, r->s_need, "%.0f");
        csv_num(&b, r->s_amp, "%.4f");
        csv_num(&b, r->s_hit, "%.4f");
        csv_num(&b, r->s_peak_rss, "%.0f");
        csv_num(&b, r->have_cg ? r->cg_limit : NAN, "%.0f");
        csv_num(&b, r->have_cg ? r->cg_peak : NAN, "%.0f");
        csv_num(&b, r->s_kernel_read, "%.0f");
        csv_num(&b, r->have_final ? r->test_acc : NAN, "%.4f");
        csv_num(&b, r->have_final ? r->valid_acc : NAN, "%.4f");
        csv_num(&b, r->have_final ? r->best_epoch : NAN, "%.0f");
        csv_num(&b, r->ran ? r->wall_s : NAN, "%.3f");
        csv_num(&b, r->ran ? r->resident_start : NAN, "%.4f");
        sb_printf(&b, ",");
        csv_field(&b, run_ok(r) ? "" : r->last_err);
        sb_printf(&b, "\n");
    }
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}

/* Markdown table cell text: '|' would end the cell. */
static void md_text(sbuf_t *b, const char *s)
{
    for (const char *p = s; *p; p++)
        sb_printf(b, *p == '|' ? "\\|" : "%c", *p);
}

typedef struct {
    const tg_bench_opts_t *o;
    const tg_dataset_t *ds;
    const tg_epoch_footprint_t *fp;
    uint64_t fp_epoch;
    const tg_io_probe_t *probe;
    int probe_ok;
    char probe_err[512];
    double lb_s, lb_cached_s;
    const allowance_t *al;
    int allowance_given;
    int cg_on;
    char cg_note[600];
    char membudget[4096];
    char exe[4096];
    char train_cmd[2048];
} ctx_t;

static void write_lower_bound(sbuf_t *b, const ctx_t *c, const char *bullet)
{
    char t1[32], t2[32];
    const tg_epoch_footprint_t *fp = c->fp;
    double distinct = (double)fp->distinct_nodes * (double)fp->row_bytes;
    double mem = (double)c->o->mem_bytes;
    sb_printf(b,
              "%sepoch %llu sampled as the runs sample it: %llu batches, %llu distinct input "
              "nodes x %llu bytes per row = %s of distinct feature rows (%s if nothing were "
              "reused across batches)\n",
              bullet, (unsigned long long)c->fp_epoch + 1, (unsigned long long)fp->batches,
              (unsigned long long)fp->distinct_nodes, (unsigned long long)fp->row_bytes,
              tg_fmt_bytes((uint64_t)distinct, t1, sizeof t1),
              tg_fmt_bytes(fp->batch_nodes * fp->row_bytes, t2, sizeof t2));
    if (c->probe_ok) {
        sb_printf(b,
                  "%ssequential read bandwidth %.0f MB/s (tg_io_probe, 1 MiB O_DIRECT reads at "
                  "depth 8, measured now on device %u:%u)\n",
                  bullet, c->probe->seq_bytes_per_s / 1e6, c->probe->dev_major,
                  c->probe->dev_minor);
        sb_printf(b,
                  "%s**I/O lower bound: %.3g s per epoch** (distinct feature bytes / bandwidth)\n",
                  bullet, c->lb_s);
        sb_printf(b,
                  "%sif all of --mem (%s) held feature rows from one epoch to the next: "
                  "max(0, distinct - mem) / bandwidth = %.3g s\n",
                  bullet, tg_fmt_bytes((uint64_t)mem, t1, sizeof t1), c->lb_cached_s);
    } else {
        sb_printf(b, "%sI/O lower bound: n/a (the device probe failed: %s)\n", bullet,
                  c->probe_err);
    }
}

static int write_md(const char *path, const ctx_t *c, run_t *runs, int nruns)
{
    sbuf_t b = {0};
    const tg_bench_opts_t *o = c->o;
    const tg_meta_t *m = &c->ds->meta;
    char t1[32], t2[32], t3[32];
    sb_printf(&b, "# tiergnn bench: %s\n\n", o->dataset);
    sb_printf(&b,
              "| strategy | status | epoch s | first epoch s | sample s | gather s | train s | "
              "wait s | I/O wait s | disk read / epoch | needed / epoch | read ampl. | hit ratio "
              "| peak RSS | cgroup peak | test acc | exit |\n");
    sb_printf(&b, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        char v[16][40];
        fmt_num(v[0], 40, r->s_epoch, "%.3f");
        fmt_num(v[1], 40, r->s_first, "%.3f");
        fmt_num(v[2], 40, r->s_sample, "%.3f");
        fmt_num(v[3], 40, r->s_gather, "%.3f");
        fmt_num(v[4], 40, r->s_train, "%.3f");
        fmt_num(v[5], 40, r->s_wait, "%.3f");
        fmt_num(v[6], 40, r->s_io_wait, "%.3f");
        fmt_mib(v[7], 40, r->s_read);
        fmt_mib(v[8], 40, r->s_need);
        fmt_num(v[9], 40, r->s_amp, "%.3f");
        fmt_num(v[10], 40, r->s_hit, "%.3f");
        fmt_mib(v[11], 40, r->s_peak_rss);
        fmt_mib(v[12], 40, r->have_cg ? r->cg_peak : NAN);
        fmt_num(v[13], 40, r->have_final ? r->test_acc : NAN, "%.4f");
        if (r->ran)
            snprintf(v[14], 40, "%d", r->exit_code);
        else
            snprintf(v[14], 40, "n/a");
        sb_printf(&b, "| ");
        md_text(&b, r->name);
        sb_printf(
            &b,
            " | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
            run_status(r), v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
            v[12], v[13], v[14]);
    }
    int nfail = 0;
    for (int i = 0; i < nruns; i++)
        nfail += !run_ok(&runs[i]);
    if (nfail) {
        sb_printf(&b,
                  "\nRuns that did not finish (last line of stderr, "
                  "`%s/<strategy>/bench-stderr.log`):\n\n",
                  o->out_dir);
        for (int i = 0; i < nruns; i++) {
            const run_t *r = &runs[i];
            if (run_ok(r)) continue;
            sb_printf(&b, "- **");
            md_text(&b, r->name);
            sb_printf(&b, "**: %s, exit status %d: ", run_status(r), r->exit_code);
            md_text(&b, r->last_err[0] ? r->last_err : "(no message)");
            sb_printf(&b, "\n");
        }
    }
    sb_printf(&b, "\n## I/O lower bound\n\n");
    write_lower_bound(&b, c, "- ");
    sb_printf(&b,
              "\nThe bound counts feature rows only; a disk-resident graph also reads index "
              "bytes, and an epoch that reuses nothing across batches reads the larger figure.\n");

    sb_printf(&b, "\n## Settings\n\n");
    sb_printf(&b, "- dataset: %s (%llu nodes, %llu edges, %u features %s = %s, indices %s)\n",
              o->dataset, (unsigned long long)m->num_nodes, (unsigned long long)m->num_edges,
              m->feat_dim, tg_feat_dtype_name(m->feat_dtype),
              tg_fmt_bytes(m->files[TG_FILE_FEATURES].size, t1, sizeof t1),
              tg_index_dtype_name(m->index_dtype));
    sb_printf(&b,
              "- --mem %s (%llu bytes), %llu epoch(s); epoch times are means over epochs %s, "
              "the first (cold) epoch is reported apart as \"first epoch\"\n",
              tg_fmt_bytes(o->mem_bytes, t1, sizeof t1), (unsigned long long)o->mem_bytes,
              (unsigned long long)o->epochs, o->epochs > 1 ? "2..N" : "1 (only one)");
    sb_printf(&b, "- each run: `%s`\n", c->train_cmd);
    if (c->cg_on) {
        const allowance_t *a = c->al;
        sb_printf(&b, "- cgroup limit: %s = --mem + %s allowance (%s), via `%s`\n",
                  tg_fmt_bytes(o->mem_bytes + a->total, t1, sizeof t1),
                  tg_fmt_bytes(a->total, t2, sizeof t2),
                  c->allowance_given ? "--cgroup-extra" : "computed, see below", c->membudget);
        if (!c->allowance_given)
            sb_printf(&b,
                      "  - allowance: process %s + model %s + activations %s%s + batches in "
                      "flight %s + labels/splits %s + evaluation %s + 25%% headroom %s\n",
                      tg_fmt_bytes(a->base, t1, sizeof t1), tg_fmt_bytes(a->model, t2, sizeof t2),
                      tg_fmt_bytes(a->act, t3, sizeof t3),
                      a->measured ? " (one step on the largest batch)" : "",
                      tg_fmt_bytes(a->inflight, (char[32]){0}, 32),
                      tg_fmt_bytes(a->labels, (char[32]){0}, 32),
                      tg_fmt_bytes(a->eval, (char[32]){0}, 32),
                      tg_fmt_bytes(a->headroom, (char[32]){0}, 32));
    } else {
        sb_printf(&b, "- cgroup limit: **none** (%s); page cache and RSS were not limited\n",
                  c->cg_note);
    }
    sb_printf(&b, "- cold start: %s\n",
              o->no_evict ? "no (--no-evict)"
                          : "dataset files dropped from the page cache before each run "
                            "(fdatasync + posix_fadvise DONTNEED; residency at start in "
                            "bench.csv)");
    sb_printf(&b, "- binary: %s\n", c->exe);
    sb_printf(&b, "\nColumns: docs/BENCH.md. n/a: the run did not report the value.\n");
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}

/* ---------------------------------------------------------------- the SVG chart */

static void xml_text(sbuf_t *b, const char *s, size_t max)
{
    size_t n = 0;
    for (const char *p = s; *p && n < max; p++, n++) {
        switch (*p) {
        case '&':
            sb_printf(b, "&amp;");
            break;
        case '<':
            sb_printf(b, "&lt;");
            break;
        case '>':
            sb_printf(b, "&gt;");
            break;
        case '"':
            sb_printf(b, "&quot;");
            break;
        default:
            if ((unsigned char)*p >= 0x20) sb_printf(b, "%c", *p);
        }
    }
    if (strlen(s) > max) sb_printf(b, "...");
}

/* A "nice" axis step (1, 2 or 5 times a power of ten) giving about 5 ticks up to max. */
static double nice_step(double max)
{
    double raw = max / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

static double nz(double v)
{
    return isnan(v) || v < 0 ? 0 : v;
}

#define SVG_W 980
#define SVG_LEFT 160
#define SVG_RIGHT 70
#define SVG_TOP 70
#define SVG_ROW 50

static void svg_rect(sbuf_t *b, double x, double y, double w, double h, const char *fill,
                     const char *title)
{
    if (w <= 0) return;
    sb_printf(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">", x, y, w,
              h, fill);
    if (title) {
        sb_printf(b, "<title>");
        xml_text(b, title, 200);
        sb_printf(b, "</title>");
    }
    sb_printf(b, "</rect>\n");
}

static int write_svg(const char *path, const ctx_t *c, run_t *runs, int nruns)
{
    sbuf_t b = {0};
    double xmax = 0;
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        xmax = TG_MAX(xmax, nz(r->s_epoch));
        xmax = TG_MAX(xmax, nz(r->s_sample) + nz(r->s_gather));
    }
    if (c->probe_ok && !isnan(c->lb_s)) xmax = TG_MAX(xmax, c->lb_s);
    if (!(xmax > 0)) xmax = 1;
    double step = nice_step(xmax);
    xmax = ceil(xmax / step) * step;
    double pw = SVG_W - SVG_LEFT - SVG_RIGHT;
    int legend_y = SVG_TOP + nruns * SVG_ROW + 40;
    int height = legend_y + 70;
#define X(v) (SVG_LEFT + (v) / xmax * pw)
    sb_printf(&b,
              "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 "
              "%d %d\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n",
              SVG_W, height, SVG_W, height);
    sb_printf(
        &b, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
            "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f0d0d0\"/>"
            "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b22222\" stroke-width=\"3\"/>"
            "</pattern></defs>\n");
    sb_printf(&b, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    sb_printf(&b,
              "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Epoch time per "
              "strategy: ",
              SVG_LEFT);
    xml_text(&b, c->o->dataset, 80);
    char t1[32];
    sb_printf(&b, ", --mem %s</text>\n", tg_fmt_bytes(c->o->mem_bytes, t1, sizeof t1));
    sb_printf(&b,
              "<text x=\"%d\" y=\"40\" fill=\"#444\">thick bar: mean epoch wall time (epochs %s), "
              "split into training, waiting for batches, other; thin bar: sampler threads' "
              "time</text>\n",
              SVG_LEFT, c->o->epochs > 1 ? "2..N" : "1");
    /* axis and grid */
    int axis_y = SVG_TOP + nruns * SVG_ROW;
    for (double v = 0; v <= xmax + step / 2; v += step) {
        sb_printf(&b,
                  "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#ddd\"/>\n"
                  "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\" fill=\"#444\">%g</text>\n",
                  X(v), SVG_TOP - 8, X(v), axis_y, X(v), axis_y + 16, v);
    }
    sb_printf(&b, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">seconds per epoch</text>\n",
              SVG_LEFT + pw / 2, axis_y + 32);
    for (int i = 0; i < nruns; i++) {
        const run_t *r = &runs[i];
        double y = SVG_TOP + i * SVG_ROW;
        sb_printf(&b, "<text x=\"%d\" y=\"%.2f\" text-anchor=\"end\" font-weight=\"bold\">",
                  SVG_LEFT - 10, y + 16);
        xml_text(&b, r->name, 24);
        sb_printf(&b, "</text>\n");
        if (isnan(r->s_epoch)) {
            sb_printf(&b, "<text x=\"%d\" y=\"%.2f\" fill=\"#b22222\">%s, exit status %d: ",
                      SVG_LEFT + 4, y + 16, run_status(r), r->exit_code);
            xml_text(&b, r->last_err[0] ? r->last_err : "no epoch reported", 90);
            sb_printf(&b, "</text>\n");
            continue;
        }
        double T = r->s_epoch, tr = TG_MIN(nz(r->s_train), T);
        double wt = TG_MIN(nz(r->s_wait), T - tr), other = T - tr - wt;
        char tip[160];
        double x = X(0);
        snprintf(tip, sizeof tip, "training %.3f s", tr);
        svg_rect(&b, x, y + 4, X(tr) - X(0), 20, "#59a14f", tip);
        x += X(tr) - X(0);
        snprintf(tip, sizeof tip, "waiting for batches %.3f s", wt);
        svg_rect(&b, x, y + 4, X(wt) - X(0), 20, "#e15759", tip);
        x += X(wt) - X(0);
        snprintf(tip, sizeof tip, "other %.3f s", other);
        svg_rect(&b, x, y + 4, X(other) - X(0), 20, "#bab0ac", tip);
        sb_printf(&b, "<text x=\"%.2f\" y=\"%.2f\">%.3f s%s</text>\n", X(T) + 6, y + 18, T,
                  run_ok(r) ? "" : " (run failed)");
        /* sampler threads: sample | gather, I/O wait hatched from the left of gather */
        double sa = nz(r->s_sample), ga = nz(r->s_gather), iw = nz(r->s_io_wait);
        snprintf(tip, sizeof tip, "sampling %.3f thread-s", sa);
        svg_rect(&b, X(0), y + 27, X(sa) - X(0), 9, "#4e79a7", tip);
        snprintf(tip, sizeof tip, "gathering %.3f thread-s", ga);
        svg_rect(&b, X(sa), y + 27, X(ga) - X(0), 9, "#f28e2b", tip);
        if (iw > 0) {
            snprintf(tip, sizeof tip, "blocked on I/O %.3f thread-s", iw);
            svg_rect(&b, X(0), y + 37, X(TG_MIN(iw, xmax)) - X(0), 5, "url(#hatch)", tip);
        }
    }
    if (c->probe_ok && !isnan(c->lb_s)) {
        sb_printf(&b,
                  "<line x1=\"%.2f\" y1=\"%d\" x2=\"%.2f\" y2=\"%d\" stroke=\"#000\" "
                  "stroke-dasharray=\"5,4\" stroke-width=\"1.5\"/>\n"
                  "<text x=\"%.2f\" y=\"%d\" font-size=\"11\">I/O lower bound %.3g s</text>\n",
                  X(c->lb_s), SVG_TOP - 14, X(c->lb_s), axis_y, X(c->lb_s) + 4, SVG_TOP - 16,
                  c->lb_s);
    }
    /* legend: the thick bar's parts on the first row, the thin bar's on the second */
    static const char *const names[] = {
        "training (compute_s)", "waiting for batches (wait_s)", "other",
        "sampling (sample_s)",  "gathering (gather_s)",         "blocked on I/O (io_wait_s)"};
    static const char *const fills[] = {"#59a14f", "#e15759", "#bab0ac",
                                        "#4e79a7", "#f28e2b", "url(#hatch)"};
    for (int k = 0; k < 6; k++) {
        int row = k / 3, col = k % 3;
        double lx = SVG_LEFT + col * 250, ly = legend_y + row * 22;
        sb_printf(&b,
                  "<rect x=\"%.2f\" y=\"%.2f\" width=\"14\" height=\"12\" fill=\"%s\" "
                  "stroke=\"#666\" stroke-width=\"0.5\"/>\n<text x=\"%.2f\" y=\"%.2f\">%s</text>\n",
                  lx, ly, fills[k], lx + 20, ly + 11, names[k]);
    }
#undef X
    sb_printf(&b, "</svg>\n");
    int rc = sb_write(&b, path);
    free(b.s);
    return rc;
}

/* ================================================================ the bench */

static int parse_strategies(const char *s, char names[][NAME_MAX_LEN], int *n)
{
    *n = 0;
    if (!s || !*s) return tg_err(-EINVAL, "--strategies: empty list, expected e.g. mmap,gnndrive");
    const char *p = s;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || len >= NAME_MAX_LEN)
            return tg_err(-EINVAL, "--strategies: item %d of '%s' is %s", *n + 1, s,
                          len ? "too long" : "empty");
        for (size_t i = 0; i < len; i++)
            if (!(p[i] == '-' || p[i] == '_' || (p[i] >= 'a' && p[i] <= 'z') ||
                  (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
                return tg_err(-EINVAL,
                              "--strategies: '%.*s' is not a strategy name (letters, digits, "
                              "'-', '_'; it names a folder of RUNDIR)",
                              (int)len, p);
        if (*n >= MAX_STRATEGIES)
            return tg_err(-EINVAL, "--strategies: more than %d strategies", MAX_STRATEGIES);
        for (int k = 0; k < *n; k++)
            if (strlen(names[k]) == len && !strncmp(names[k], p, len))
                return tg_err(-EINVAL, "--strategies: '%.*s' given twice", (int)len, p);
        memcpy(names[*n], p, len);
        names[*n][len] = 0;
        (*n)++;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int has_arg(const tg_bench_opts_t *o, const char *flag)
{
    size_t n = strlen(flag);
    for (int i = 0; i < o->num_train_args; i++)
        if (!strncmp(o->train_args[i], flag, n) &&
            (o->train_args[i][n] == 0 || o->train_args[i][n] == '='))
            return 1;
    return 0;
}

/* One run's command line: at most 20 fixed words (membudget, train, dataset, flags) plus the
 * train arguments (check_opts allows 200); the numbers live in buf. */
typedef struct {
    char *argv[256];
    int n;
    char buf[3][32];
} argv_t;

static void argv_push(argv_t *a, const char *s)
{
    if (a->n < (int)(sizeof a->argv / sizeof a->argv[0]) - 1) a->argv[a->n++] = (char *)s;
    a->argv[a->n] = NULL;
}

static int check_opts(const tg_bench_opts_t *o)
{
    if (!o->dataset || !*o->dataset) return tg_err(-EINVAL, "bench: a DATASET is required");
    if (!o->out_dir || !*o->out_dir) return tg_err(-EINVAL, "bench: --out RUNDIR is required");
    if (o->mem_bytes == 0)
        return tg_err(-EINVAL, "bench: --mem BYTES is required (the budget every strategy gets)");
    if (o->epochs == 0) return tg_err(-EINVAL, "bench: --epochs must be at least 1");
    if (o->threads < 1) return tg_err(-EINVAL, "bench: --threads must be at least 1");
    if (o->model.num_layers < 1 || o->model.num_layers > TG_MAX_LAYERS)
        return tg_err(-EINVAL, "bench: %d layers, expected 1..%d", o->model.num_layers,
                      TG_MAX_LAYERS);
    if (o->num_train_args > 200) return tg_err(-EINVAL, "bench: too many train arguments");
    return 0;
}

int tg_bench(const tg_bench_opts_t *o, tg_bench_result_t *res)
{
    memset(res, 0, sizeof *res);
    res->lower_bound_s = NAN;
    int rc = check_opts(o);
    if (rc < 0) return rc;
    char names[MAX_STRATEGIES][NAME_MAX_LEN];
    int nruns = 0;
    if ((rc = parse_strategies(o->strategies, names, &nruns)) < 0) return rc;

    tg_dataset_t *ds = NULL;
    run_t *runs = NULL;
    tg_batch_t big;
    memset(&big, 0, sizeof big);
    ctx_t c;
    memset(&c, 0, sizeof c);
    c.o = o;
    if ((rc = tg_dataset_open(&ds, o->dataset, TG_OPEN_CHECK_SIZES)) < 0) return rc;
    c.ds = ds;
    if ((rc = tg_mkdir_p(o->out_dir)) < 0) goto out;
    runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs) {
        rc = tg_err(-ENOMEM, "bench: out of memory");
        goto out;
    }
    for (int i = 0; i < nruns; i++) {
        run_t *r = &runs[i];
        snprintf(r->name, sizeof r->name, "%.*s", NAME_MAX_LEN - 1, names[i]);
        snprintf(r->dir, sizeof r->dir, "%s/%s", o->out_dir, names[i]);
        r->exit_code = -1;
        struct stat st;
        if (stat(r->dir, &st) == 0) {
            if (!o->overwrite) {
                rc = tg_err(-EEXIST,
                            "bench: %s already exists (an earlier bench?); choose another --out "
                            "or pass --overwrite",
                            r->dir);
                goto out;
            }
            if ((rc = tg_rmtree(r->dir)) < 0) goto out;
        }
    }

    /* The binary the runs use: the one running now, unless told otherwise. */
    if (o->exe)
        snprintf(c.exe, sizeof c.exe, "%s", o->exe);
    else if ((rc = self_exe(c.exe, sizeof c.exe)) < 0)
        goto out;

    /* membudget and the cgroup */
    if (o->membudget && !strcmp(o->membudget, "none")) {
        snprintf(c.cg_note, sizeof c.cg_note, "--membudget none");
    } else {
        int found = 0;
        if (o->membudget) {
            if (!is_file(o->membudget) || access(o->membudget, X_OK) != 0) {
                rc = tg_err(-ENOENT, "bench: --membudget %s is not an executable file",
                            o->membudget);
                goto out;
            }
            snprintf(c.membudget, sizeof c.membudget, "%s", o->membudget);
            found = 1;
        } else {
            found = find_membudget(c.exe, c.membudget, sizeof c.membudget);
        }
        if (!found) {
            snprintf(c.cg_note, sizeof c.cg_note,
                     "membudget not found: neither ../shared/tools/membudget from the current "
                     "directory nor from the binary's directory or its parents; give "
                     "--membudget PATH");
        } else {
            char why[512] = "";
            c.cg_on = membudget_works(c.membudget, o->out_dir, why, sizeof why);
            if (!c.cg_on)
                snprintf(c.cg_note, sizeof c.cg_note, "%.200s cannot set a limit here: %.300s",
                         c.membudget, why);
        }
    }
    if (!c.cg_on) tg_log_warn("bench: running WITHOUT a memory limit: %s", c.cg_note);

    /* The epoch the means start at is the one the lower bound describes. */
    tg_footprint_opts_t fo;
    memset(&fo, 0, sizeof fo);
    fo.model = o->model.type;
    fo.num_layers = o->model.num_layers;
    memcpy(fo.fanouts, o->fanouts, sizeof fo.fanouts);
    fo.batch_size = o->batch_size;
    fo.seed = o->seed;
    fo.epoch = o->epochs > 1 ? 1 : 0;
    fo.threads = o->threads;
    c.fp_epoch = fo.epoch;
    int need_big = c.cg_on && o->cgroup_extra < 0;
    tg_log_info("bench: sampling epoch %llu to count the rows it reads",
                (unsigned long long)fo.epoch + 1);
    if ((rc = footprint(o->dataset, &fo, &res->footprint, need_big ? &big : NULL)) < 0) goto out;
    c.fp = &res->footprint;

    /* Sequential bandwidth, measured now (not from the probe's cache). */
    tg_io_probe_t probe;
    memset(&probe, 0, sizeof probe);
    tg_io_probe_opts_t po = {.time_s = o->probe_time_s, .refresh = 1};
    char fpath[4096];
    tg_dataset_path(ds, TG_FILE_FEATURES, fpath, sizeof fpath);
    tg_log_info("bench: probing the device under %s", fpath);
    tg_err_clear();
    if (tg_io_probe_run(fpath, &po, &probe) < 0 || !(probe.seq_bytes_per_s > 0)) {
        snprintf(c.probe_err, sizeof c.probe_err, "%s",
                 tg_errmsg()[0] ? tg_errmsg() : "no bandwidth measured");
        tg_log_warn("bench: device probe failed, no I/O lower bound: %s", c.probe_err);
        c.lb_s = c.lb_cached_s = NAN;
    } else {
        c.probe_ok = 1;
        double distinct = (double)res->footprint.distinct_nodes * (double)res->footprint.row_bytes;
        c.lb_s = distinct / probe.seq_bytes_per_s;
        c.lb_cached_s = TG_MAX(0.0, distinct - (double)o->mem_bytes) / probe.seq_bytes_per_s;
        res->seq_bytes_per_s = probe.seq_bytes_per_s;
        res->lower_bound_s = c.lb_s;
    }
    c.probe = &probe;

    allowance_t al;
    memset(&al, 0, sizeof al);
    c.al = &al;
    if (c.cg_on) {
        if (o->cgroup_extra >= 0) {
            al.total = (uint64_t)o->cgroup_extra;
            c.allowance_given = 1;
        } else if ((rc = compute_allowance(o, ds, &res->footprint, &big, &al)) < 0) {
            goto out;
        }
        res->cgroup_limited = 1;
        res->cgroup_limit = o->mem_bytes + al.total;
        char t1[32], t2[32];
        tg_log_info("bench: cgroup limit %s = --mem + %s allowance%s",
                    tg_fmt_bytes(res->cgroup_limit, t1, sizeof t1),
                    tg_fmt_bytes(al.total, t2, sizeof t2),
                    c.allowance_given ? " (--cgroup-extra)" : "");
    }
    tg_batch_free(&big);

    /* the run's command line, for the report */
    {
        sbuf_t cmd = {0};
        sb_printf(&cmd, "tiergnn train %s --strategy S --mem %llu --epochs %llu --json --out %s/S",
                  o->dataset, (unsigned long long)o->mem_bytes, (unsigned long long)o->epochs,
                  o->out_dir);
        int add_eval = !has_arg(o, "--eval-every"), add_ckpt = !has_arg(o, "--checkpoint-every");
        if (add_eval) sb_printf(&cmd, " --eval-every 0");
        if (add_ckpt) sb_printf(&cmd, " --checkpoint-every 0");
        for (int i = 0; i < o->num_train_args; i++)
            sb_printf(&cmd, " %s", o->train_args[i]);
        snprintf(c.train_cmd, sizeof c.train_cmd, "%s", cmd.s ? cmd.s : "");
        free(cmd.s);
    }

    for (int i = 0; i < nruns; i++) {
        run_t *r = &runs[i];
        if ((rc = tg_mkdir_p(r->dir)) < 0) goto out;
        uint64_t resident = 0, total = 0;
        if ((rc = dataset_cache(ds, o->no_evict, &resident, &total)) < 0) goto out;
        r->resident_start = total ? (double)resident / (double)total : 0;
        argv_t a;
        memset(&a, 0, sizeof a);
        if (c.cg_on) {
            argv_push(&a, c.membudget);
            snprintf(a.buf[0], sizeof a.buf[0], "%llu", (unsigned long long)res->cgroup_limit);
            argv_push(&a, a.buf[0]);
            argv_push(&a, "--");
        }
        argv_push(&a, c.exe);
        argv_push(&a, "train");
        argv_push(&a, o->dataset);
        argv_push(&a, "--strategy");
        argv_push(&a, r->name);
        argv_push(&a, "--mem");
        snprintf(a.buf[1], sizeof a.buf[1], "%llu", (unsigned long long)o->mem_bytes);
        argv_push(&a, a.buf[1]);
        argv_push(&a, "--epochs");
        snprintf(a.buf[2], sizeof a.buf[2], "%llu", (unsigned long long)o->epochs);
        argv_push(&a, a.buf[2]);
        argv_push(&a, "--json");
        argv_push(&a, "--out");
        argv_push(&a, r->dir);
        if (!has_arg(o, "--eval-every")) {
            argv_push(&a, "--eval-every");
            argv_push(&a, "0");
        }
        if (!has_arg(o, "--checkpoint-every")) {
            argv_push(&a, "--checkpoint-every");
            argv_push(&a, "0");
        }
        for (int k = 0; k < o->num_train_args; k++)
            argv_push(&a, o->train_args[k]);
        char out_path[4200], err_path[4200];
        path_join(out_path, sizeof out_path, r->dir, "bench-stdout.jsonl");
        path_join(err_path, sizeof err_path, r->dir, "bench-stderr.log");
        tg_log_info("bench: [%d/%d] %s (%.0f%% of the dataset in the page cache at start)", i + 1,
                    nruns, r->name, 100 * r->resident_start);
        int st = 0;
        if ((rc = spawn_wait(a.argv, out_path, err_path, &st, &r->ru, &r->wall_s)) < 0) goto out;
        r->ran = 1;
        if (WIFEXITED(st)) {
            r->exit_code = WEXITSTATUS(st);
            /* membudget passes on a signalled child's status as 128 + signal */
            r->signalled = c.cg_on && r->exit_code > 128 && r->exit_code < 128 + 65;
        } else if (WIFSIGNALED(st)) {
            r->exit_code = 128 + WTERMSIG(st);
            r->signalled = 1;
        }
        if ((rc = parse_stdout(r, out_path)) < 0) goto out;
        parse_stderr(r, err_path);
        if (r->signalled) {
            /* Say what killed it first; the log's last line (often the shell's "Killed") after. */
            int sig = r->exit_code - 128;
            int oom = sig == 9 && r->have_cg && r->cg_peak >= 0.95 * r->cg_limit;
            char tail[sizeof r->last_err];
            snprintf(tail, sizeof tail, "%s", r->last_err);
            snprintf(r->last_err, sizeof r->last_err, "killed by signal %d%s%s%.400s", sig,
                     oom ? " (out of memory: the cgroup peak reached the limit)" : "",
                     tail[0] ? "; last line of stderr: " : "", tail);
        }
        summarise(r);
        res->runs++;
        if (!run_ok(r)) res->failed++;
        tg_log_info("bench: [%d/%d] %s: %s in %.1f s%s%s", i + 1, nruns, r->name, run_status(r),
                    r->wall_s, run_ok(r) ? "" : ": ", run_ok(r) ? "" : r->last_err);
    }

    char path[4200];
    path_join(path, sizeof path, o->out_dir, "bench.csv");
    if ((rc = write_csv(path, runs, nruns)) < 0) goto out;
    path_join(path, sizeof path, o->out_dir, "bench.md");
    if ((rc = write_md(path, &c, runs, nruns)) < 0) goto out;
    path_join(path, sizeof path, o->out_dir, "bench.svg");
    if ((rc = write_svg(path, &c, runs, nruns)) < 0) goto out;
    rc = 0;
out:
    tg_batch_free(&big);
    if (runs)
        for (int i = 0; i < nruns; i++)
            free(runs[i].ep);
    free(runs);
    tg_dataset_close(ds);
    return rc;
}
