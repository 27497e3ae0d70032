/* Disk full: generate into a 2 MiB tmpfs must fail with ENOSPC named by file and offset, exit
 * non-zero, and leave nothing behind (no dataset, no temporary directory, no run files), both
 * when the features run out of space and when the edge sort's run files do. A dataset that
 * fits is written and verifies. Skips (77) where mounting a tmpfs is not permitted. */
#include "tg_test.h"
#include "tiergnn/data.h"

#include <dirent.h>
#include <sys/mount.h>

static char mnt[4200];

TG_TEST(features_fill_the_disk)
{
    char *out = NULL;
    /* 20000 x 64 f32 = 5 MiB of features */
    int rc = tg_test_cli(&out, "--quiet generate %s/ds --nodes 20000 --feat-dim 64", mnt);
    TG_CHECK(rc != 0);
    TG_CHECK(out && strstr(out, "No space left on device"));
    TG_CHECK(out && strstr(out, "features.bin") && strstr(out, "offset"));
    free(out);
    TG_CHECK_EQ_U64(tg_test_count_entries(mnt, 1), 0);
}

TG_TEST(edge_runs_fill_the_disk)
{
    /* 2M directed edges: 16 MB of sort keys spill past the sort budget; features are small */
    tg_gen_opts_t o;
    tg_gen_opts_default(&o);
    o.nodes = 50000;
    o.avg_degree = 40;
    o.feat_dim = 1;
    o.classes = 2;
    o.threads = 1;
    o.mem_bytes = tg_gen_min_mem(&o);
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/ds", mnt);
    TG_CHECK_ERR(tg_generate(dir, &o), "No space left on device");
    TG_CHECK_EQ_U64(tg_test_count_entries(mnt, 1), 0);
}

TG_TEST(fits)
{
    char *out = NULL;
    int rc = tg_test_cli(&out, "--quiet generate %s/ds --nodes 2000 --feat-dim 16", mnt);
    TG_CHECK_EQ_U64(rc, 0);
    free(out);
    rc = tg_test_cli(&out, "verify %s/ds", mnt);
    TG_CHECK_EQ_U64(rc, 0);
    free(out);
}

int main(void)
{
    snprintf(mnt, sizeof mnt, "%s", tg_test_tmpdir("gen-enospc"));
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m") != 0) {
        fprintf(stderr, "SKIP: cannot mount a tmpfs at %s (%s)\n", mnt, strerror(errno));
        tg_rmtree(mnt);
        return TG_SKIP;
    }
    tg_log_set_level(TG_LOG_WARN);
    TG_RUN(features_fill_the_disk);
    TG_RUN(edge_runs_fill_the_disk);
    TG_RUN(fits);
    umount(mnt);
    tg_rmtree(mnt);
    return tg_test_done();
}
