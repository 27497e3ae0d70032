#include "tg_test.h"

#include <dirent.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

int tg_test_failures = 0;
const char *tg_test_current = "";

/* Every test program links this file, so every one honours OPENBLAS_CORETYPE the same way
 * (the CTest variants test_X@Zen set it) before its main runs any GEMM. The device probe's
 * cache goes under the build's test directory (and the CLIs the tests start inherit it): a
 * short probe of a test's small file must not replace the user's cached figures, which
 * size the reads of their real runs. */
__attribute__((constructor)) static void tg_test_init(void)
{
    const char *v = getenv("TG_TEST_VARIANT");
    if (v && *v && strcmp(v, "gemm") && strcmp(v, "io") && strcmp(v, "cgroup")) {
        fprintf(stderr,
                "TG_TEST_VARIANT=%s: expected gemm, io or cgroup (tests/support/tg_test.h)\n", v);
        _exit(2);
    }
    tg_test_not_own_descendant();
    tg_test_io_absent_init();
    tg_test_blas_gate();
    setenv("XDG_CACHE_HOME", TG_TEST_TMP "/xdg-cache", 1);
}

/* Our parent's pid from /proc/PID/stat ("pid (comm) state ppid ..."; comm may hold spaces and
 * parentheses, so the fields are read after the last ')'). 0 when it cannot be read. */
static pid_t parent_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')');
    int ppid = 0;
    if (!rp || sscanf(rp + 1, " %*c %d", &ppid) != 1) return 0;
    return (pid_t)ppid;
}

void tg_test_not_own_descendant(void)
{
    struct stat self, st;
    if (getenv("TG_TEST_REEXEC") || stat("/proc/self/exe", &self) != 0) return;
    pid_t p = getppid();
    for (int depth = 0; p > 1 && depth < 64; depth++, p = parent_of(p)) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/exe", (int)p);
        if (stat(path, &st) == 0 && st.st_dev == self.st_dev && st.st_ino == self.st_ino) {
            fprintf(stderr,
                    "test program refused to start: process %d above it is this same program "
                    "(a test ran a test program as a child, e.g. as bench's tiergnn binary; "
                    "only TG_CLI_PATH or a script may be run)\n",
                    (int)p);
            _exit(3);
        }
    }
}

/* Whether the comma-separated list holds `what`. */
static int in_list(const char *list, const char *what)
{
    size_t n = strlen(what);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncmp(p, what, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

int tg_test_io_absent(const char *what)
{
    return in_list(getenv("TG_TEST_IO_ABSENT"), what);
}

/* The sub-tests TG_TEST_CASES named that the program reached, as ",a,b" (for tg_test_done). */
static char cases_seen[8192];

int tg_test_selected(const char *name, const char *variants)
{
    const char *cases = getenv("TG_TEST_CASES"), *v = getenv("TG_TEST_VARIANT");
    if (cases && *cases) {
        if (!in_list(cases, name)) {
            fprintf(stderr, "SKIP %s (TG_TEST_CASES)\n", name);
            return 0;
        }
        size_t len = strlen(cases_seen);
        snprintf(cases_seen + len, sizeof cases_seen - len, ",%s", name);
    }
    if (v && *v && variants && !in_list(variants, v)) {
        fprintf(stderr, "SKIP %s (variant %s)\n", name, v);
        return 0;
    }
    return 1;
}

void tg_test_io_absent_init(void)
{
    char rules[1024] = "";
    const char *old = getenv("TIERGNN_IO_FAULT");
    if (old) snprintf(rules, sizeof rules, "%s", old);
    static const struct {
        const char *what, *rule;
    } absent[] = {{"odirect", "EINVAL@0,op=open"}, {"uring", "ENOSYS@0,op=ring"}};
    int any = 0;
    for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
        if (!tg_test_io_absent(absent[i].what)) continue;
        size_t len = strlen(rules);
        snprintf(rules + len, sizeof rules - len, "%s%s", len ? ";" : "", absent[i].rule);
        any = 1;
    }
    if (any) setenv("TIERGNN_IO_FAULT", rules, 1);
}

int tg_test_cgroup_limit_works(char *why, size_t len)
{
    char mb[4200], cmd[4400], line[512] = "";
    const char *shared = getenv("TG_SHARED_DIR");
    snprintf(mb, sizeof mb, "%s/tools/membudget", shared ? shared : TG_SHARED_DIR);
    if (access(mb, X_OK) != 0) {
        snprintf(why, len, "no %s", mb);
        return 0;
    }
    snprintf(cmd, sizeof cmd, "'%s' 64M -- true 2>&1", mb);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(why, len, "cannot run %s", mb);
        return 0;
    }
    int ok = 0;
    while (fgets(line, sizeof line, p))
        if (!strncmp(line, "membudget: limit=", 17)) ok = 1;
    int st = pclose(p);
    line[strcspn(line, "\n")] = 0;
    if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, len, "%s cannot set a cgroup memory limit here: %s", mb,
                 line[0] ? line : "no message");
        return 0;
    }
    return 1;
}

int tg_test_done(void)
{
    /* a name in TG_TEST_CASES that no TG_RUN reached: a typo, or a sub-test renamed */
    const char *cases = getenv("TG_TEST_CASES");
    for (const char *p = cases; p && *p;) {
        size_t len = strcspn(p, ",");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        if (len && !in_list(cases_seen, name)) {
            fprintf(stderr, "TG_TEST_CASES names %s, which this program does not run\n", name);
            tg_test_failures++;
        }
        p += len + (p[len] == ',');
    }
    if (tg_test_failures) {
        fprintf(stderr, "%d check(s) failed\n", tg_test_failures);
        return 1;
    }
    return 0;
}

const char *tg_test_tmpdir(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d", TG_TEST_TMP, name, (int)getpid());
    tg_rmtree(path);
    if (tg_mkdir_p(path) < 0) {
        fprintf(stderr, "cannot create %s: %s\n", path, tg_errmsg());
        exit(1);
    }
    return path;
}

const char *tg_test_shared_dataset(const char *name)
{
    static char path[4096];
    const char *env = getenv("TG_SHARED_DIR");
    snprintf(path, sizeof path, "%s/datasets/%s", env ? env : TG_SHARED_DIR, name);
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) return NULL;
    return path;
}

int tg_test_cli(char **output, const char *fmt, ...)
{
    char args[8192], cmd[9000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", TG_CLI_PATH, args);
    FILE *p = popen(cmd, "r");
    if (!p) {
        perror("popen");
        exit(1);
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    if (buf) buf[len] = 0;
    int st = pclose(p);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (output)
        *output = buf;
    else
        free(buf);
    return rc;
}

void tg_test_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

void tg_test_write_gz(const char *path, const char *text)
{
    gzFile g = gzopen(path, "wb");
    if (!g) {
        perror(path);
        exit(1);
    }
    gzputs(g, text);
    gzclose(g);
}

char *tg_test_read_all(const char *path, size_t *len)
{
    char *buf = NULL;
    size_t l = 0;
    if (tg_read_file(path, &buf, &l) < 0) {
        TG_FAIL("cannot read %s: %s", path, tg_errmsg());
        return NULL;
    }
    if (len) *len = l;
    return buf;
}

int tg_test_same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *x = tg_test_read_all(a, &la), *y = tg_test_read_all(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

int tg_test_count_entries(const char *dir, int verbose)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            if (verbose) fprintf(stderr, "left behind: %s/%s\n", dir, de->d_name);
            n++;
        }
    closedir(d);
    return n;
}

void tg_test_check_no_output(const char *out)
{
    struct stat st;
    if (!stat(out, &st)) TG_FAIL("%s exists after a failed import", out);
    char *d = strdup(out), *b = strdup(out);
    char prefix[1024];
    snprintf(prefix, sizeof prefix, "%s.tmp-", basename(b));
    DIR *dir = opendir(dirname(d));
    struct dirent *e;
    while (dir && (e = readdir(dir)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            TG_FAIL("leftover temporary directory %s", e->d_name);
    if (dir) closedir(dir);
    free(d);
    free(b);
}
