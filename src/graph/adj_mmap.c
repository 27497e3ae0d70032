/* Memory-mapped data files with a SIGBUS guard, and the memory-mapped adjacency of the "mmap"
 * baseline (see "out-of-core adjacency" and "mapped files with a fault guard" in
 * tiergnn/graph.h). */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tiergnn/data.h"
#include "tiergnn/graph.h"

/* ---------------------------------------------------------------- mapped files */

struct tg_mmap_file {
    int fd;
    char *path;
    const unsigned char *data; /* NULL for an empty file */
    uint64_t size;             /* at open = the mapping's length */
};

/* One guarded call on this thread's stack. Only `env`, `f` and `prev` are read after a jump,
 * and none of them changes after sigsetjmp. */
typedef struct guard_frame {
    sigjmp_buf env;
    const tg_mmap_file_t *f;
    struct guard_frame *prev;
} guard_frame_t;

/* Thread-local: the handler runs on the faulting thread, so it sees that thread's guards. The
 * fault address travels in its own variable, not in the frame, so no automatic object changes
 * between sigsetjmp and the jump (C11 7.13.2.1). */
static _Thread_local guard_frame_t *tls_guard;
static _Thread_local const void *tls_fault_addr;

static struct sigaction old_bus;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static int bus_install_err;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
    const unsigned char *a = si->si_addr;
    for (guard_frame_t *g = tls_guard; g; g = g->prev) {
        const tg_mmap_file_t *f = g->f;
        if (f->data && a >= f->data && a < f->data + f->size) {
            tls_fault_addr = a;
            siglongjmp(g->env, 1);
        }
    }
    /* Not a read of a guarded mapping: behave as if this handler were not there. */
    if ((old_bus.sa_flags & SA_SIGINFO) && old_bus.sa_sigaction) {
        old_bus.sa_sigaction(sig, si, uc);
        return;
    }
    if (!(old_bus.sa_flags & SA_SIGINFO) && old_bus.sa_handler != SIG_DFL &&
        old_bus.sa_handler != SIG_IGN) {
        old_bus.sa_handler(sig);
        return;
    }
    /* Default action (an ignored SIGBUS from a fault cannot be ignored either): reinstate it and
     * raise again, so the process ends with SIGBUS as it would have without us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGBUS, &dfl, NULL);
    raise(SIGBUS);
}

static void bus_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = bus_handler;
    /* SA_NODEFER: SIGBUS stays unblocked while the handler runs, so the jump out of it leaves
     * the thread's signal mask as it was (sigsetjmp need not save the mask, which would cost a
     * system call on every guarded call). */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &old_bus) < 0) bus_install_err = errno;
}

int tg_mmap_file_open(tg_mmap_file_t **out, const char *path, uint64_t expect_size)
{
    *out = NULL;
    pthread_once(&bus_once, bus_install);
    if (bus_install_err)
        return tg_err(-bus_install_err,
                      "%s: cannot install the SIGBUS handler for mapped files: %s", path,
                      strerror(bus_install_err));
    int rc;
    tg_mmap_file_t *f = calloc(1, sizeof *f);
    if (!f) return tg_err(-ENOMEM, "%s: out of memory", path);
    f->fd = -1;
    f->path = strdup(path);
    if (!f->path) {
        rc = tg_err(-ENOMEM, "%s: out of memory", path);
        goto err;
    }
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        rc = tg_err(-errno, "%s: cannot open: %s", path, strerror(errno));
        goto err;
    }
    struct stat st;
    if (fstat(f->fd, &st) < 0) {
        rc = tg_err(-errno, "%s: cannot stat: %s", path, strerror(errno));
        goto err;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = tg_err(-EINVAL, "%s: not a regular file", path);
        goto err;
    }
    /* A mapping cannot report a short file the way a read can: check the size before mapping. */
    if ((uint64_t)st.st_size != expect_size) {
        rc = tg_err(-EINVAL, "%s: %llu bytes, expected %llu from meta.txt (truncated or replaced?)",
                    path, (unsigned long long)st.st_size, (unsigned long long)expect_size);
        goto err;
    }
    f->size = expect_size;
    if (f->size > SIZE_MAX) {
        rc = tg_err(-EFBIG, "%s: %llu bytes do not fit in the address space", path,
                    (unsigned long long)f->size);
        goto err;
    }
    if (f->size) {
        void *p = mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, f->fd, 0);
        if (p == MAP_FAILED) {
            rc = tg_err(-errno, "%s: cannot map %llu bytes: %s", path, (unsigned long long)f->size,
                        strerror(errno));
            goto err;
        }
        f->data = p;
        /* Readahead off: a fault reads the one page it needs (the PyG+ baseline's setting). A
         * refusal only costs the tuning, not correctness. */
        if (madvise(p, (size_t)f->size, MADV_RANDOM) < 0)
            tg_log_warn("%s: madvise(MADV_RANDOM) failed: %s; readahead stays on", path,
                        strerror(errno));
    }
    *out = f;
    return 0;
err:
    tg_mmap_file_close(f);
    return rc;
}

void tg_mmap_file_close(tg_mmap_file_t *f)
{
    if (!f) return;
    if (f->data) munmap((void *)f->data, (size_t)f->size);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

const void *tg_mmap_file_data(const tg_mmap_file_t *f)
{
    return f->data;
}

uint64_t tg_mmap_file_size(const tg_mmap_file_t *f)
{
    return f->size;
}

const char *tg_mmap_file_path(const tg_mmap_file_t *f)
{
    return f->path;
}

/* The file's size now, for messages and the after-check; UINT64_MAX when fstat fails. */
static uint64_t size_now(const tg_mmap_file_t *f)
{
    struct stat st;
    return fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
}

static int truncated_err(const tg_mmap_file_t *f, uint64_t now)
{
    return tg_err(-EIO,
                  "%s: the mapped file is now %llu bytes, %llu when opened (truncated under "
                  "the run?); bytes read from its last page may be zeros, so the read fails",
                  f->path, (unsigned long long)now, (unsigned long long)f->size);
}

int tg_mmap_file_guard(tg_mmap_file_t *f, int (*fn)(void *ctx), void *ctx)
{
    guard_frame_t fr;
    fr.f = f;
    fr.prev = tls_guard;
    if (sigsetjmp(fr.env, 0)) {
        tls_guard = fr.prev;
        /* SA_NODEFER keeps SIGBUS unblocked in the handler, but a sanitizer's wrapper around it
         * may block it anyway, and a jump out of a handler does not restore the mask: unblock
         * it, or the next fault on this thread would kill the process. */
        sigset_t bus;
        sigemptyset(&bus);
        sigaddset(&bus, SIGBUS);
        pthread_sigmask(SIG_UNBLOCK, &bus, NULL);
        uint64_t off = (uint64_t)((const unsigned char *)tls_fault_addr - f->data);
        uint64_t now = size_now(f);
        char nowbuf[32];
        if (now == UINT64_MAX)
            snprintf(nowbuf, sizeof nowbuf, "?");
        else
            snprintf(nowbuf, sizeof nowbuf, "%llu", (unsigned long long)now);
        return tg_err(-EIO,
                      "%s: SIGBUS reading offset %llu of the mapped file, which is now %s bytes "
                      "(%llu when opened): truncated under the run?",
                      f->path, (unsigned long long)off, nowbuf, (unsigned long long)f->size);
    }
    tls_guard = &fr;
    int rc = fn(ctx);
    tls_guard = fr.prev;
    if (rc < 0) return rc;
    uint64_t now = size_now(f);
    if (now != UINT64_MAX && now < f->size) return truncated_err(f, now);
    return rc;
}

/* ---------------------------------------------------------------- the mmap adjacency */

typedef struct {
    uint64_t *indptr;
    uint64_t indptr_bytes;
    tg_budget_t *budget;
    tg_mmap_file_t *file;
    size_t esz;
} adj_mmap_t;

typedef struct {
    const tg_adj_t *adj;
    const uint64_t *pos;
    size_t n;
    uint64_t *out;
} mmap_read_ctx_t;

/* Under the guard: checks positions (before touching the mapping) and copies entries. */
static int mmap_read_fn(void *arg)
{
    const mmap_read_ctx_t *c = arg;
    const adj_mmap_t *m = c->adj->impl;
    uint64_t ne = c->adj->num_edges;
    for (size_t i = 0; i < c->n; i++)
        if (c->pos[i] >= ne)
            return tg_err(-EINVAL, "mmap adjacency: edge position %llu out of range (%llu edges)",
                          (unsigned long long)c->pos[i], (unsigned long long)ne);
    const unsigned char *base = tg_mmap_file_data(m->file);
    if (m->esz == 4) {
        for (size_t i = 0; i < c->n; i++) {
            uint32_t v;
            memcpy(&v, base + c->pos[i] * 4, 4);
            c->out[i] = v;
        }
    } else {
        for (size_t i = 0; i < c->n; i++)
            memcpy(&c->out[i], base + c->pos[i] * 8, 8);
    }
    return 0;
}

static int mmap_read(tg_adj_t *adj, const uint64_t *pos, size_t n, uint64_t *out)
{
    adj_mmap_t *m = adj->impl;
    if (n == 0) return 0;
    mmap_read_ctx_t c = {adj, pos, n, out};
    int rc = tg_mmap_file_guard(m->file, mmap_read_fn, &c);
    return rc < 0 ? tg_err_prefix(rc, "mmap adjacency") : rc;
}

static void mmap_destroy(tg_adj_t *adj)
{
    adj_mmap_t *m = adj->impl;
    if (m) {
        tg_mmap_file_close(m->file);
        free(m->indptr);
        if (m->budget && m->indptr_bytes) tg_budget_release(m->budget, m->indptr_bytes);
        free(m);
    }
    free(adj);
}

static const tg_adj_i mmap_iface = {"mmap", mmap_read, mmap_destroy};

int tg_adj_mmap_open(tg_adj_t **out, const struct tg_dataset *ds, tg_budget_t *budget)
{
    *out = NULL;
    const tg_meta_t *meta = &ds->meta;
    tg_adj_t *adj = calloc(1, sizeof *adj);
    adj_mmap_t *m = calloc(1, sizeof *m);
    if (!adj || !m) {
        free(adj);
        free(m);
        return tg_err(-ENOMEM, "mmap adjacency: out of memory");
    }
    adj->iface = &mmap_iface;
    adj->impl = m;
    adj->num_nodes = meta->num_nodes;
    adj->num_edges = meta->num_edges;
    m->esz = tg_index_dtype_size(meta->index_dtype);
    int rc;
    uint64_t ib = (meta->num_nodes + 1) * sizeof(uint64_t);
    if (budget && (rc = tg_budget_reserve(budget, ib, "adjacency indptr")) < 0) goto err;
    m->budget = budget;
    m->indptr_bytes = ib;
    if ((rc = tg_dataset_load_indptr(ds, &m->indptr)) < 0) goto err;
    adj->indptr = m->indptr;
    char path[4096];
    tg_dataset_path(ds, TG_FILE_INDICES, path, sizeof path);
    if ((rc = tg_mmap_file_open(&m->file, path, meta->num_edges * m->esz)) < 0) goto err;
    *out = adj;
    return 0;
err:
    mmap_destroy(adj);
    return rc;
}
