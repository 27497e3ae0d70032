/* Imports onto a full disk and into a read-only directory must fail with a message naming the
 * file, and leave neither OUT nor OUT.tmp-* behind. Needs mount(2) for a small tmpfs (root);
 * skips with 77 where that is not permitted. */
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"

static char tmp[4096];

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

/* A 64 KiB edge list: the dataset it makes (features 64-dim f32 for 2000 nodes = 500 KiB)
 * cannot fit on a 256 KiB tmpfs. */
static const char *make_input(void)
{
    static char path[4300];
    snprintf(path, sizeof path, "%s/in.txt", tmp);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < 6000; i++)
        fprintf(f, "%d %d\n", i % 2000, (i * 7 + 1) % 2000);
    fclose(f);
    return path;
}

static int import_to(const char *out, const char *src)
{
    tg_import_opts_t o;
    tg_import_opts_default(&o);
    o.kind = TG_IMPORT_EDGELIST;
    o.src = src;
    o.feat_dim = 64;
    o.mem_bytes = 16u << 20;
    return tg_import(out, &o);
}

TG_TEST(disk_full)
{
    char mnt[4300], out[4400];
    snprintf(mnt, sizeof mnt, "%s/full", tmp);
    tg_mkdir_p(mnt);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=256k")) {
        fprintf(stderr, "SKIP disk_full: cannot mount a tmpfs (%s)\n", strerror(errno));
        exit(TG_SKIP);
    }
    const char *src = make_input();
    snprintf(out, sizeof out, "%s/ds", mnt);
    tg_err_clear();
    int rc = import_to(out, src);
    TG_CHECK(rc == -ENOSPC);
    if (!strstr(tg_errmsg(), mnt) || !strstr(tg_errmsg(), ".bin"))
        TG_FAIL("message '%s' should name the file being written", tg_errmsg());
    if (strchr(tg_errmsg(), '\n')) TG_FAIL("message is not one line: '%s'", tg_errmsg());
    TG_CHECK(count_entries(mnt) == 0); /* neither ds nor ds.tmp-* */

    /* the same through the CLI: non-zero exit */
    char *text = NULL;
    rc = tg_test_cli(&text, "import %s --from edgelist %s --feat-dim 64", out, src);
    TG_CHECK(rc != 0);
    if (text && !strstr(text, "No space left on device")) TG_FAIL("CLI: %s", text);
    free(text);
    TG_CHECK(count_entries(mnt) == 0);
    umount(mnt);
}

TG_TEST(read_only)
{
    /* root ignores permission bits, so a read-only mount stands in for an unwritable dir */
    char mnt[4300], out[4400];
    snprintf(mnt, sizeof mnt, "%s/ro", tmp);
    tg_mkdir_p(mnt);
    if (mount("tmpfs", mnt, "tmpfs", MS_RDONLY, "size=64k")) {
        fprintf(stderr, "SKIP read_only: cannot mount a tmpfs (%s)\n", strerror(errno));
        exit(TG_SKIP);
    }
    snprintf(out, sizeof out, "%s/ds", mnt);
    const char *src = make_input();
    TG_CHECK_ERR(import_to(out, src), mnt);
    TG_CHECK(count_entries(mnt) == 0);
    umount(mnt);
}

int main(void)
{
    tg_log_set_level(TG_LOG_QUIET);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("import-diskfull"));
    TG_RUN(disk_full);
    TG_RUN(read_only);
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
