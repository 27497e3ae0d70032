/* The bench's process side: running a command with its output in files, finding and checking
 * membudget, the out-of-memory counter of our cgroup, and dropping the dataset from the page
 * cache so that every run starts cold. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-impl.h"

extern char **environ;

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ================================================================ processes */

/* Starts argv (argv[0] a path) with stdin from /dev/null and stdout / stderr into the files,
 * with envp; in a process group of its own when own_group (so a timeout can end it and whatever
 * it started). */
static int spawn_to_files(char *const argv[], char *const envp[], const char *out_path,
                          const char *err_path, int own_group, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc) return tg_err(-rc, "posix_spawn_file_actions_init: %s", strerror(rc));
    if ((rc = posix_spawnattr_init(&at)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return tg_err(-rc, "posix_spawnattr_init: %s", strerror(rc));
    }
    if (own_group && !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP)))
        rc = posix_spawnattr_setpgroup(&at, 0);
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (rc) {
        rc = tg_err(-rc, "preparing to run %s: %s", argv[0], strerror(rc));
    } else if ((rc = posix_spawn(pid, argv[0], &fa, &at, argv, envp)) != 0) {
        rc = tg_err(-rc, "cannot run %s: %s", argv[0], strerror(rc));
    }
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return rc;
}

int tg_bench_spawn_wait(char *const argv[], const char *out_path, const char *err_path, int *status,
                        struct rusage *ru, double *wall_s)
{
    pid_t pid;
    double t0 = tg_now();
    int rc = spawn_to_files(argv, environ, out_path, err_path, 0, &pid);
    if (rc < 0) return rc;
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

/* ================================================================ is it tiergnn?
 *
 * The bench runs `EXE train ...` once per strategy. A program that embeds the library and hands
 * its own path as EXE (a test program did) would run itself again, and that copy would bench
 * again: a fork bomb wherever no cgroup limit stops the first copy. So EXE must answer
 * `--version` with "tiergnn VERSION" within a few seconds before anything runs, and the program
 * asked carries TG_BENCH_PROBE_ENV in its environment: a bench started inside it (the way a
 * program that is not tiergnn would answer) refuses at once, so the question never nests. */
#define TG_BENCH_PROBE_ENV "TIERGNN_BENCH_VERSION_PROBE"
#define TG_BENCH_PROBE_TIMEOUT_S 5.0

/* environ plus NAME=1, in a NULL-terminated array the caller frees (the strings are not
 * copied). */
static char **env_with(const char *name_eq_1)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env) return NULL;
    size_t k = 0, nl = strcspn(name_eq_1, "=");
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], name_eq_1, nl + 1)) env[k++] = environ[i];
    env[k++] = (char *)name_eq_1;
    return env;
}

/* Waits for pid at most timeout_s; past it kills its process group. 0 with *st, or -ETIMEDOUT. */
static int wait_timeout(pid_t pid, double timeout_s, int *st)
{
    double end = tg_now() + timeout_s;
    for (;;) {
        pid_t w = waitpid(pid, st, WNOHANG);
        if (w == pid) return 0;
        if (w < 0 && errno != EINTR) return tg_err(-errno, "waitpid: %s", strerror(errno));
        if (tg_now() >= end) {
            kill(-pid, SIGKILL);
            while (waitpid(pid, st, 0) < 0 && errno == EINTR) {
            }
            return -ETIMEDOUT;
        }
        usleep(5000);
    }
}

int tg_bench_check_exe(const char *exe, const char *scratch_dir)
{
    if (getenv(TG_BENCH_PROBE_ENV))
        return tg_err(-EPERM,
                      "bench: refused: a bench started this process to ask its '--version' (%s "
                      "is set), so the binary that bench was given is not tiergnn",
                      TG_BENCH_PROBE_ENV);
    if (!exe || !*exe)
        return tg_err(-EINVAL, "bench: no tiergnn binary given to run the strategies (exe)");
    if (!is_file(exe) || access(exe, X_OK))
        return tg_err(-ENOENT, "bench: %s is not an executable file (the tiergnn binary)", exe);
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s/.version-check.out", scratch_dir);
    snprintf(err, sizeof err, "%s/.version-check.err", scratch_dir);
    char **env = env_with(TG_BENCH_PROBE_ENV "=1");
    if (!env) return tg_err(-ENOMEM, "bench: out of memory");
    char *argv[] = {(char *)exe, "--version", NULL};
    pid_t pid;
    int st = 0, rc = spawn_to_files(argv, env, out, err, 1, &pid);
    free(env);
    if (rc < 0) return rc;
    rc = wait_timeout(pid, TG_BENCH_PROBE_TIMEOUT_S, &st);
    char line[256];
    tg_bench_last_line(out, NULL, line, sizeof line);
    unlink(out);
    unlink(err);
    if (rc == -ETIMEDOUT)
        return tg_err(rc,
                      "bench: %s is not a tiergnn binary: '--version' did not answer within "
                      "%.0f s (killed)",
                      exe, TG_BENCH_PROBE_TIMEOUT_S);
    if (rc < 0) return rc;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strncmp(line, "tiergnn ", 8))
        return tg_err(-EINVAL,
                      "bench: %s is not a tiergnn binary: '--version' printed '%s' and %s %d, "
                      "expected 'tiergnn VERSION' and exit status 0",
                      exe, line, WIFEXITED(st) ? "exited with status" : "was killed by signal",
                      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}

void tg_bench_last_line(const char *path, const char *skip, char *buf, size_t len)
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

/* ================================================================ membudget and the cgroup */

int tg_bench_find_membudget(const char *exe, char *buf, size_t len)
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

int tg_bench_membudget_works(const char *mb, const char *rundir, char *why, size_t len)
{
    char out[4200], err[4200];
    snprintf(out, sizeof out, "%s/.membudget-check.out", rundir);
    snprintf(err, sizeof err, "%s/.membudget-check.err", rundir);
    char *argv[] = {(char *)mb, "64M", "--", "true", NULL};
    int st = 0;
    struct rusage ru;
    double wall;
    int ok = 0;
    if (tg_bench_spawn_wait(argv, out, err, &st, &ru, &wall) < 0) {
        snprintf(why, len, "%s", tg_errmsg());
    } else {
        char line[512];
        tg_bench_last_line(err, NULL, line, sizeof line);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !strncmp(line, "membudget: limit=", 17))
            ok = 1;
        else
            snprintf(why, len, "%s", line[0] ? line : "membudget failed without a message");
    }
    unlink(out);
    unlink(err);
    return ok;
}

/* Where this process's cgroup v2 directory is: the "0::PATH" line of /proc/self/cgroup under
 * the cgroup2 mount of /proc/self/mountinfo. Returns 0 with the directory in buf, -1 without. */
static int cgroup2_dir(char *buf, size_t len)
{
    char path[2048] = "", *line = NULL;
    size_t cap = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return -1;
    while (getline(&line, &cap, f) > 0)
        if (!strncmp(line, "0::", 3)) {
            snprintf(path, sizeof path, "%s", line + 3);
            path[strcspn(path, "\n")] = 0;
        }
    fclose(f);
    int found = -1;
    if (path[0] && (f = fopen("/proc/self/mountinfo", "r"))) {
        /* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER" */
        while (found < 0 && getline(&line, &cap, f) > 0) {
            char root[1024], mnt[1024];
            const char *dash = strstr(line, " - ");
            if (!dash || strncmp(dash + 3, "cgroup2 ", 8)) continue;
            if (sscanf(line, "%*s %*s %*s %1023s %1023s", root, mnt) != 2) continue;
            size_t rl = strcmp(root, "/") ? strlen(root) : 0;
            if (rl && strncmp(path, root, rl)) continue; /* our cgroup is not under this mount */
            snprintf(buf, len, "%s%s", mnt, path + rl);
            found = 0;
        }
        fclose(f);
    }
    free(line);
    return found;
}

int64_t tg_bench_oom_kills(void)
{
    char dir[2100], path[2200];
    if (cgroup2_dir(dir, sizeof dir) < 0) return -1;
    snprintf(path, sizeof path, "%s/memory.events", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char key[64];
    long long v;
    int64_t kills = -1;
    while (fscanf(f, "%63s %lld", key, &v) == 2)
        if (!strcmp(key, "oom_kill")) kills = v;
    fclose(f);
    return kills;
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

int tg_bench_dataset_cache(const tg_dataset_t *ds, int only_measure, uint64_t *resident,
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
