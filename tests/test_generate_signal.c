/* Interrupting `tiergnn generate` (SIGINT, SIGTERM) while it writes removes its temporary
 * directory, and the exit status says which signal (128 + signal). */
#include "tg_test.h"
#include "tiergnn/data.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void interrupt(const char *base, int sig)
{
    char out[4200], tmp[4300];
    snprintf(out, sizeof out, "%s/ds", base);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDERR_FILENO);
        execl(TG_CLI_PATH, "tiergnn", "generate", out, "--nodes", "4000000", "--feat-dim", "64",
              (char *)NULL);
        _exit(127);
    }
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", out, (int)pid);
    /* wait until it is writing: its temporary directory has files */
    struct stat st;
    int seen = 0;
    for (int i = 0; i < 1000 && !seen; i++) {
        usleep(10000);
        seen = stat(tmp, &st) == 0 && tg_test_count_entries(tmp, 0) > 0;
    }
    TG_CHECK(seen);
    usleep(100000);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    TG_CHECK(WIFEXITED(status));
    if (WIFEXITED(status)) TG_CHECK_EQ_U64(WEXITSTATUS(status), 128 + sig);
    TG_CHECK(stat(tmp, &st) != 0);
    TG_CHECK(stat(out, &st) != 0);
    TG_CHECK_EQ_U64(tg_test_count_entries(base, 1), 0);
}

TG_TEST(sigint)
{
    const char *base = tg_test_tmpdir("gen-sigint");
    interrupt(base, SIGINT);
    tg_rmtree(base);
}

TG_TEST(sigterm)
{
    const char *base = tg_test_tmpdir("gen-sigterm");
    interrupt(base, SIGTERM);
    tg_rmtree(base);
}

int main(void)
{
    TG_RUN(sigint);
    TG_RUN(sigterm);
    return tg_test_done();
}
