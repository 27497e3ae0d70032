/* Fault injection: process-wide rules that make chosen opens, ring set-ups or disk reads fail (or
 * reads come back short), so tests reach the error paths of both backends without a failing
 * disk. */
#include "io-impl.h"

#include <stdlib.h>
#include <string.h>

#define MAX_RULES 16

typedef struct rule {
    tg_io_fault_t f;
    char file[256];
    uint64_t seen;   /* matching operations so far */
    uint64_t failed; /* of which failed */
} rule_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static rule_t rules[MAX_RULES];
/* Read without the lock on every disk read: the common case (no rules) costs one load. */
static atomic_int nrules;
static atomic_uint_fast64_t hits;
static atomic_uint_fast64_t matched; /* operations a rule looked at (firing or not) */

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_rc;
static char env_msg[512];

static const struct {
    const char *name;
    int err;
} errnames[] = {
    {"EIO", EIO},       {"EINVAL", EINVAL}, {"ENOSPC", ENOSPC}, {"ENOSYS", ENOSYS},
    {"EPERM", EPERM},   {"ENOMEM", ENOMEM}, {"EAGAIN", EAGAIN}, {"ENODATA", ENODATA},
    {"EACCES", EACCES}, {"EBADF", EBADF},   {"EFAULT", EFAULT}, {"EINTR", EINTR},
};

int tg_io_fault_add(const tg_io_fault_t *f)
{
    if (f->op != TG_IO_FAULT_READ && f->op != TG_IO_FAULT_OPEN && f->op != TG_IO_FAULT_RING)
        return tg_err(-EINVAL, "io fault: unknown op %d", (int)f->op);
    if (f->short_read && f->op != TG_IO_FAULT_READ)
        return tg_err(-EINVAL, "io fault: a short read applies to reads only (op=read)");
    if (!f->short_read && f->err <= 0)
        return tg_err(-EINVAL, "io fault: err must be a positive errno, got %d", f->err);
    if (f->op == TG_IO_FAULT_READ && f->hi <= f->lo)
        return tg_err(-EINVAL, "io fault: empty byte range [%llu, %llu)", (unsigned long long)f->lo,
                      (unsigned long long)f->hi);
    if (f->file && strlen(f->file) >= sizeof rules[0].file)
        return tg_err(-EINVAL, "io fault: file substring longer than %zu bytes",
                      sizeof rules[0].file - 1);
    pthread_mutex_lock(&mu);
    int n = atomic_load(&nrules);
    if (n == MAX_RULES) {
        pthread_mutex_unlock(&mu);
        return tg_err(-ENOSPC, "io fault: at most %d rules", MAX_RULES);
    }
    rule_t *r = &rules[n];
    memset(r, 0, sizeof *r);
    r->f = *f;
    if (r->f.short_read) r->f.err = 0;
    snprintf(r->file, sizeof r->file, "%s", f->file ? f->file : "");
    r->f.file = r->file;
    atomic_store(&nrules, n + 1);
    pthread_mutex_unlock(&mu);
    /* read rules reach util's plain reads too (the memory store, derived and spill files) */
    if (f->op == TG_IO_FAULT_READ) tg_pread_set_fault_hook(tg_io_fault_check_read);
    return 0;
}

void tg_io_fault_clear(void)
{
    /* Load the environment first so that it cannot add rules after the clear. */
    (void)tg_io_fault_env_load();
    pthread_mutex_lock(&mu);
    atomic_store(&nrules, 0);
    pthread_mutex_unlock(&mu);
}

uint64_t tg_io_fault_hits(void)
{
    return atomic_load(&hits);
}

static int parse_errno(const char *s, int *out)
{
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (!strcmp(s, errnames[i].name)) {
            *out = errnames[i].err;
            return 0;
        }
    uint64_t v;
    if (tg_parse_u64(s, &v, "errno") < 0 || v == 0 || v > 4095)
        return tg_err(-EINVAL,
                      "io fault: unknown error '%s' (an errno name such as EIO, or a "
                      "number)",
                      s);
    *out = (int)v;
    return 0;
}

/* One rule: ERR@LO[-HI][,key=value]... (s is a writable copy). */
static int parse_rule(char *s)
{
    tg_io_fault_t f = {.op = TG_IO_FAULT_READ};
    char *at = strchr(s, '@');
    if (!at) return tg_err(-EINVAL, "io fault: '%s': expected ERR@OFFSET", s);
    *at = 0;
    int rc = 0;
    if (!strcmp(s, "SHORT"))
        f.short_read = 1;
    else if ((rc = parse_errno(s, &f.err)) < 0)
        return rc;
    char *opts = strchr(at + 1, ',');
    if (opts) *opts++ = 0;
    char *range = at + 1, *dash = strchr(range, '-');
    if (dash) *dash = 0;
    if ((rc = tg_parse_size(range, &f.lo)) < 0)
        return tg_err(rc, "io fault: bad offset '%s'", range);
    f.hi = f.lo + 1;
    if (dash && (rc = tg_parse_size(dash + 1, &f.hi)) < 0)
        return tg_err(rc, "io fault: bad end offset '%s'", dash + 1);
    while (opts && *opts) {
        char *next = strchr(opts, ',');
        if (next) *next++ = 0;
        char *eq = strchr(opts, '=');
        if (!eq) return tg_err(-EINVAL, "io fault: '%s': expected key=value", opts);
        *eq = 0;
        const char *k = opts, *v = eq + 1;
        if (!strcmp(k, "file")) {
            f.file = v;
        } else if (!strcmp(k, "after")) {
            if ((rc = tg_parse_u64(v, &f.after, "after")) < 0) return rc;
        } else if (!strcmp(k, "count")) {
            if ((rc = tg_parse_u64(v, &f.count, "count")) < 0) return rc;
        } else if (!strcmp(k, "op")) {
            if (!strcmp(v, "read"))
                f.op = TG_IO_FAULT_READ;
            else if (!strcmp(v, "open"))
                f.op = TG_IO_FAULT_OPEN;
            else if (!strcmp(v, "ring"))
                f.op = TG_IO_FAULT_RING;
            else
                return tg_err(-EINVAL, "io fault: op must be read, open or ring, not '%s'", v);
        } else {
            return tg_err(-EINVAL, "io fault: unknown key '%s' (file, after, count, op)", k);
        }
        opts = next;
    }
    return tg_io_fault_add(&f);
}

int tg_io_fault_parse(const char *spec)
{
    char *copy = strdup(spec);
    if (!copy) return tg_err(-ENOMEM, "out of memory");
    int rc = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        while (*tok == ' ')
            tok++;
        if (!*tok) continue;
        if ((rc = parse_rule(tok)) < 0) break;
    }
    free(copy);
    return rc;
}

/* At exit of a process whose environment set rules: whether they fired tells a fault matrix a
 * run that handled a fault from one the fault never reached, and a rule that never fires
 * (after=huge) counts the operations a later rule can pick from. */
static void env_report(void)
{
    tg_log_warn("TIERGNN_IO_FAULT: %llu operations faulted, %llu matched a rule",
                (unsigned long long)tg_io_fault_hits(), (unsigned long long)atomic_load(&matched));
}

static void env_load(void)
{
    const char *spec = getenv("TIERGNN_IO_FAULT");
    if (!spec || !*spec) return;
    env_rc = tg_io_fault_parse(spec);
    if (env_rc < 0) {
        snprintf(env_msg, sizeof env_msg, "TIERGNN_IO_FAULT: %s", tg_errmsg());
        return;
    }
    tg_log_warn("TIERGNN_IO_FAULT=%s: injecting I/O faults", spec);
    atexit(env_report);
}

int tg_io_fault_env_load(void)
{
    pthread_once(&env_once, env_load);
    if (env_rc < 0) return tg_err(env_rc, "%s", env_msg);
    return 0;
}

int tg_io_fault_env(void)
{
    return tg_io_fault_env_load();
}

/* Counts a matching operation against rule r and says whether it fires. Caller holds mu. */
static int fire(rule_t *r)
{
    r->seen++;
    atomic_fetch_add(&matched, 1);
    if (r->seen <= r->f.after) return 0;
    if (r->f.count && r->failed >= r->f.count) return 0;
    r->failed++;
    atomic_fetch_add(&hits, 1);
    return 1;
}

/* The first rule that fires decides: an errno, or (reads) a shorter length. */
static int check(tg_io_fault_op_t op, const char *path, uint64_t off, uint64_t *len)
{
    if (atomic_load_explicit(&nrules, memory_order_acquire) == 0) return 0;
    int err = 0, done = 0;
    pthread_mutex_lock(&mu);
    int n = atomic_load(&nrules);
    for (int i = 0; i < n && !done; i++) {
        rule_t *r = &rules[i];
        if (r->f.op != op) continue;
        if (op != TG_IO_FAULT_RING && r->file[0] && (!path || !strstr(path, r->file))) continue;
        if (op == TG_IO_FAULT_READ && (off + *len <= r->f.lo || off >= r->f.hi)) continue;
        if (!(done = fire(r))) continue;
        if (r->f.short_read)
            *len = r->f.lo > off ? r->f.lo - off : 0;
        else
            err = r->f.err;
    }
    pthread_mutex_unlock(&mu);
    return err;
}

int tg_io_fault_check_read(const char *path, uint64_t off, uint64_t *len)
{
    return check(TG_IO_FAULT_READ, path, off, len);
}

int tg_io_fault_check_op(tg_io_fault_op_t op, const char *path)
{
    uint64_t len = 0;
    return check(op, path, 0, &len);
}
