/* SIGINT to a running `tiergnn train` child: it stops at a batch boundary with exit status 130,
 * leaves a checkpoint that records where (mid-epoch: the batches done of the next epoch), and
 * `--resume` then completes the run with exactly the files an uninterrupted run writes - for the
 * in-order strategies memory and gnndrive. Also: a second SIGINT kills at once. The signals go
 * when the child's log shows it training (not after a fixed delay), so the run is interrupted
 * on a fast machine and a slow one (ASan) alike. */
#include "test_engine_common.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiergnn/engine.h"

static char root[4000], ds[4200];

#define FLAGS                                                                                      \
    "--model sage --layers 2 --hidden 64 --fanouts 10,10 --batch-size 128 --seed 5 "               \
    "--epochs 4 --io-depth 8 --io-gap 0 --eval-every 2"

/* Starts `tiergnn train DS --out dir FLAGS extra...` with stdout/stderr into log (a new file:
 * what an earlier run wrote there is gone before the child starts). */
static pid_t spawn_train(const char *dir, const char *strategy, const char *log, int resume)
{
    unlink(log);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(127);
        char cmd[9000];
        snprintf(cmd, sizeof cmd, "exec %s train %s --out %s " FLAGS " --strategy %s%s",
                 TG_CLI_PATH, ds, dir, strategy, resume ? " --resume" : "");
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits until the child's log holds needle (1), or until the child ended (0; it is left to
 * wait_status to reap). */
static int wait_log(pid_t pid, const char *log, const char *needle)
{
    for (double t0 = tg_now(); tg_now() - t0 < 300;) {
        char *text = NULL;
        size_t len;
        int found = tg_read_file(log, &text, &len) == 0 && strstr(text, needle);
        free(text);
        if (found) return 1;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            return 0;
        usleep(2000);
    }
    return 0;
}

static int wait_status(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void sigint_case(const char *strategy)
{
    char ref[4300], run[4300], log[4400], a[4400], b[4400];
    snprintf(ref, sizeof ref, "%s/ref-%s", root, strategy);
    snprintf(run, sizeof run, "%s/int-%s", root, strategy);
    snprintf(log, sizeof log, "%s/log-%s.txt", root, strategy);
    /* the uninterrupted reference */
    int rc = wait_status(spawn_train(ref, strategy, log, 0));
    TG_CHECK(rc == 0);
    /* interrupted once, in its second epoch (after the first one's line), then resumed */
    pid_t pid = spawn_train(run, strategy, log, 0);
    if (wait_log(pid, log, "epoch 1/4: ")) kill(pid, SIGINT);
    rc = wait_status(pid);
    char *text = NULL;
    size_t len;
    tg_read_file(log, &text, &len);
    if (rc == 0) {
        fprintf(stderr, "  %s: the run ended before the signal; not interrupted\n", strategy);
    } else {
        TG_CHECK(rc == 130);
        TG_CHECK(text && strstr(text, "interrupted") && strstr(text, "--resume"));
        tg_ckpt_info_t info;
        snprintf(a, sizeof a, "%s/%s", run, TG_CKPT_NAME);
        TG_CHECK_OK(tg_ckpt_read_info(a, &info));
        fprintf(stderr, "  %s: stopped after %llu epoch(s) and %llu batch(es) of the next\n",
                strategy, (unsigned long long)info.epochs_done,
                (unsigned long long)info.epoch_batches);
        rc = wait_status(spawn_train(run, strategy, log, 1));
        TG_CHECK(rc == 0);
    }
    free(text);
    static const char *files[] = {TG_CKPT_NAME, TG_CKPT_BEST_NAME};
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "%s/%s", ref, files[i]);
        snprintf(b, sizeof b, "%s/%s", run, files[i]);
        if (!tg_test_same_file(a, b))
            TG_FAIL("%s: %s after the interruption differs from the uninterrupted run's", strategy,
                    files[i]);
    }
}

TG_TEST(sigint_then_resume)
{
    sigint_case("memory");
    sigint_case("gnndrive");
}

TG_TEST(second_sigint_kills)
{
    char run[4300], log[4400];
    snprintf(run, sizeof run, "%s/twice", root);
    snprintf(log, sizeof log, "%s/log-twice.txt", root);
    pid_t pid = spawn_train(run, "memory", log, 0);
    TG_CHECK(wait_log(pid, log, "training sage on "));
    kill(pid, SIGINT);
    kill(pid, SIGINT);
    int rc = wait_status(pid);
    /* either the first signal's clean stop (130) won, or the second killed it (128 + 2) */
    TG_CHECK(rc == 130 || rc == 128 + SIGINT);
}

int main(void)
{
    alarm(600);
    snprintf(root, sizeof root, "%s", tg_test_tmpdir("train_sigint"));
    snprintf(ds, sizeof ds, "%s/ds", root);
    synth_opts_t so;
    synth_default(&so);
    so.nodes = 6000; /* 24 batches an epoch */
    so.dim = 64;
    so.classes = 8;
    synth_write(ds, &so);
    TG_RUN(sigint_then_resume);
    TG_RUN(second_sigint_kills);
    int rc = tg_test_done();
    if (rc == 0) tg_rmtree(root);
    return rc;
}
