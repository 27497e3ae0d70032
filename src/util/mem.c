/* Memory budget accounting and RSS measurement. */
#include "tiergnn/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tg_budget_init(tg_budget_t *b, uint64_t limit)
{
    pthread_mutex_init(&b->mu, NULL);
    b->limit = limit;
    b->used = b->peak = 0;
}

void tg_budget_destroy(tg_budget_t *b)
{
    pthread_mutex_destroy(&b->mu);
}

int tg_budget_reserve(tg_budget_t *b, uint64_t bytes, const char *what)
{
    pthread_mutex_lock(&b->mu);
    if (b->limit && b->used + bytes > b->limit) {
        uint64_t used = b->used, limit = b->limit;
        pthread_mutex_unlock(&b->mu);
        char x[32], y[32], z[32], w[32];
        return tg_err(-ENOMEM,
                      "memory budget: %s needs %s but only %s of --mem %s is left (need at "
                      "least --mem %s)",
                      what, tg_fmt_bytes(bytes, x, sizeof x),
                      tg_fmt_bytes(limit - used, y, sizeof y), tg_fmt_bytes(limit, z, sizeof z),
                      tg_fmt_bytes(used + bytes, w, sizeof w));
    }
    b->used += bytes;
    if (b->used > b->peak) b->peak = b->used;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

void tg_budget_release(tg_budget_t *b, uint64_t bytes)
{
    pthread_mutex_lock(&b->mu);
    b->used = bytes > b->used ? 0 : b->used - bytes;
    pthread_mutex_unlock(&b->mu);
}

static uint64_t status_field(const char *name)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t n = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10) * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

uint64_t tg_peak_rss_bytes(void)
{
    return status_field("VmHWM");
}

uint64_t tg_rss_bytes(void)
{
    return status_field("VmRSS");
}

uint64_t tg_rss_anon_bytes(void)
{
    uint64_t v = status_field("RssAnon");
    return v ? v : status_field("VmRSS"); /* kernels before 4.5 have no RssAnon */
}

uint64_t tg_phys_mem_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}

void *tg_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    if (posix_memalign(&p, align, size ? size : align)) return NULL;
    return p;
}

/* ---------------------------------------------------------------- cgroup limit */

/* The number in a one-line file ("max" or garbage: 0). */
static uint64_t read_limit_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[64] = "";
    uint64_t v = 0;
    if (fgets(line, sizeof line, f) && line[0] >= '0' && line[0] <= '9')
        v = strtoull(line, NULL, 10);
    fclose(f);
    /* v1 reports "no limit" as a huge page-rounded number */
    return v >= ((uint64_t)1 << 62) ? 0 : v;
}

uint64_t tg_cgroup_mem_limit(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return 0;
    char line[4096];
    uint64_t best = 0;
    while (fgets(line, sizeof line, f)) {
        /* v2: "0::/path"; v1: "N:memory:/path" (or with other controllers joined by commas) */
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (!b) continue;
        *b = 0;
        const char *ctl = a + 1;
        char *path = b + 1;
        path[strcspn(path, "\n")] = 0;
        int v2 = !*ctl;
        if (!v2 && !strstr(ctl, "memory")) continue;
        const char *root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
        const char *file = v2 ? "memory.max" : "memory.limit_in_bytes";
        /* the smallest limit from the process's cgroup up to the root */
        for (;;) {
            char p[4400];
            snprintf(p, sizeof p, "%s%s/%s", root, path, file);
            uint64_t v = read_limit_file(p);
            if (v && (!best || v < best)) best = v;
            char *slash = strrchr(path, '/');
            if (!slash || slash == path) {
                if (path[0] && strcmp(path, "/") != 0) {
                    path[0] = '/';
                    path[1] = 0;
                    continue;
                }
                break;
            }
            *slash = 0;
        }
    }
    fclose(f);
    return best;
}
