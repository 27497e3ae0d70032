/* Datasets on read-only storage: where DATASET/derived cannot be written, derived and runtime
 * files go to a per-user directory keyed by the dataset's identity ($XDG_CACHE_HOME/tiergnn/),
 * said once; valid files already in DATASET/derived are still read; `--derived-dir DIR` puts
 * them in DIR for train, info, clean and partition; a --derived-dir that cannot be made is an
 * error naming it. The dataset is made read-only by a read-only bind mount as root (skipped
 * where mount(2) is refused), else by chmod 0555. */
#include <dirent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tg_test.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"

static char tmp[4096], src[4200], srcds[4300], ro[4200], rods[4300], cache[4200];
static int bind_mounted;
static tg_gen_opts_t gen;

static void generate(uint64_t seed)
{
    gen.seed = seed;
    gen.overwrite = 1;
    if (tg_generate(srcds, &gen) < 0) {
        fprintf(stderr, "cannot generate %s: %s\n", srcds, tg_errmsg());
        exit(1);
    }
}

/* Without root the dataset and its derived/ are made read-only by their modes; root writes
 * through modes, so it takes a read-only bind mount instead. */
static void set_modes(mode_t m)
{
    char d[4400];
    snprintf(d, sizeof d, "%s/derived", srcds);
    chmod(srcds, m);
    chmod(d, m);
}

/* 0, or -1 when the read-only view cannot be had (skip). */
static int make_read_only(void)
{
    if (geteuid() != 0) {
        snprintf(rods, sizeof rods, "%s", srcds);
        set_modes(0555);
    } else {
        tg_mkdir_p(ro);
        if (mount(src, ro, NULL, MS_BIND, NULL)) {
            fprintf(stderr, "SKIP: cannot bind-mount %s on %s (%s)\n", src, ro, strerror(errno));
            return -1;
        }
        bind_mounted = 1;
        if (mount(NULL, ro, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) {
            fprintf(stderr, "SKIP: cannot make the bind mount %s read-only (%s)\n", ro,
                    strerror(errno));
            return -1;
        }
        snprintf(rods, sizeof rods, "%s/ds", ro);
    }
    if (access(rods, W_OK) == 0) {
        fprintf(stderr, "SKIP: %s is still writable\n", rods);
        return -1;
    }
    return 0;
}

static void writable_again(void)
{
    if (geteuid() != 0) set_modes(0755);
}

static tg_dataset_t *open_ds(const char *dir)
{
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, dir, 0) < 0) {
        fprintf(stderr, "cannot open %s: %s\n", dir, tg_errmsg());
        exit(1);
    }
    return ds;
}

static int build(tg_dataset_t *ds, const char *root, const char *kind, const char *params)
{
    tg_derived_writer_t *w;
    int rc = tg_derived_create(&w, ds, root, kind, params, 0);
    if (rc) return rc;
    char payload[100] = "payload";
    if ((rc = tg_derived_append(w, payload, sizeof payload))) {
        tg_derived_abort(w);
        return rc;
    }
    return tg_derived_commit(w);
}

static int has_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d)))
        found = !strncmp(e->d_name, prefix, strlen(prefix));
    closedir(d);
    return found;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The per-user directory: keyed by identity, so a copy of the dataset shares it; DATASET/derived
 * of a writable copy is still its own. */
TG_TEST(fallback_keyed)
{
    tg_dataset_t *rw = open_ds(srcds), *rd = open_ds(rods);
    char a[4096], b[4096], want[4400];
    TG_CHECK_OK(tg_derived_fallback_dir(rd, a, sizeof a));
    TG_CHECK_OK(tg_derived_fallback_dir(rw, b, sizeof b));
    TG_CHECK(!strcmp(a, b)); /* two copies of one dataset */
    snprintf(want, sizeof want, "%s/tiergnn/derived-", cache);
    if (strncmp(a, want, strlen(want))) TG_FAIL("fallback %s is not under %s", a, want);
    tg_derived_dir(rd, NULL, b, sizeof b);
    if (strcmp(a, b)) TG_FAIL("read-only dataset: derived files go to %s, expected %s", b, a);
    if (geteuid() == 0) { /* the writable copy keeps its own derived/ (modes: one directory) */
        tg_derived_dir(rw, NULL, b, sizeof b);
        snprintf(want, sizeof want, "%s/derived", srcds);
        if (strcmp(b, want)) TG_FAIL("writable dataset: %s, expected %s", b, want);
    }

    /* writing goes to the fallback; a file the dataset's derived/ already holds is still read */
    TG_CHECK_OK(build(rd, NULL, "mine", "n=2"));
    tg_derived_file_t *f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, rd, NULL, "mine", "n=2", TG_DERIVED_VERIFY));
    if (f && strncmp(f->path, a, strlen(a))) TG_FAIL("opened %s, expected under %s", f->path, a);
    tg_derived_close(f);
    f = NULL;
    TG_CHECK_OK(tg_derived_open(&f, rd, NULL, "snap", "n=1", TG_DERIVED_VERIFY));
    snprintf(want, sizeof want, "%s/derived/snap-n=1.bin", rods);
    if (f && strcmp(f->path, want)) TG_FAIL("opened %s, expected %s", f->path, want);
    tg_derived_close(f);
    /* a file in neither is the fallback's -ENOENT: that is where a rebuild goes */
    TG_CHECK_ERR(tg_derived_open(&f, rd, NULL, "none", "n=1", 0), a);
    tg_dataset_close(rw);
    tg_dataset_close(rd);
}

/* gids and hier (and ginex's runtime spill files) train on the read-only dataset, their files in
 * the per-user directory, which one log line names. */
TG_TEST(train_read_only)
{
    tg_dataset_t *rd = open_ds(rods);
    char fb[4096];
    TG_CHECK_OK(tg_derived_fallback_dir(rd, fb, sizeof fb));
    tg_dataset_close(rd);
    /* ginex builds its neighbour cache only for a share of the caches: one given, as the
     * planned split depends on the probe (0% on some machines) */
    const char *strategies[] = {"gids", "hier", "ginex"};
    const char *extra[] = {"", "", " --ginex-split 50"};
    for (size_t i = 0; i < sizeof strategies / sizeof *strategies; i++) {
        char *out = NULL;
        int rc = tg_test_cli(&out,
                             "train %s --out %s/run-%s --strategy %s --epochs 1 --mem 256M "
                             "--threads 1 --hidden 16%s",
                             rods, tmp, strategies[i], strategies[i], extra[i]);
        if (rc != 0) TG_FAIL("train %s on a read-only dataset: %d\n%s", strategies[i], rc, out);
        if (count(out, "cannot be written") != 1 || !strstr(out, fb))
            TG_FAIL("train %s: expected one line naming %s:\n%s", strategies[i], fb, out);
        free(out);
    }
    TG_CHECK(has_prefix(fb, "rank-"));     /* gids's ranking */
    TG_CHECK(has_prefix(fb, "partfeat-")); /* hier's partitions */
    TG_CHECK(has_prefix(fb, "ncache-"));   /* ginex's neighbour cache */
    TG_CHECK(!has_prefix(fb, "tmp-"));

    /* info lists the fallback, clean cleans it */
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out, "info %s", rods) == 0);
    if (!out || !strstr(out, fb) || !strstr(out, "rank ")) TG_FAIL("info:\n%s", out);
    free(out);
}

/* A changed dataset gets another directory: nothing of the old one is taken for it. */
TG_TEST(changed_dataset)
{
    tg_dataset_t *rd = open_ds(rods);
    char before[4096], after[4096];
    TG_CHECK_OK(tg_derived_fallback_dir(rd, before, sizeof before));
    tg_dataset_close(rd);
    writable_again();
    generate(2);
    char snap[4400];
    snprintf(snap, sizeof snap, "%s/derived", srcds);
    tg_mkdir_p(snap);
    if (geteuid() != 0) set_modes(0555);
    rd = open_ds(rods);
    TG_CHECK_OK(tg_derived_fallback_dir(rd, after, sizeof after));
    tg_dataset_close(rd);
    if (!strcmp(before, after)) TG_FAIL("a changed dataset keeps the directory %s", before);
    char *out = NULL;
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/run-changed --strategy gids --epochs 1 --mem 256M "
                         "--threads 1 --hidden 16",
                         rods, tmp) == 0);
    if (!out || !strstr(out, after)) TG_FAIL("train after the change:\n%s", out);
    free(out);
    TG_CHECK(has_prefix(after, "rank-"));
}

/* --derived-dir: train, info, clean and partition use DIR, and nothing else. */
TG_TEST(derived_dir_option)
{
    char dir[4400], pdir[4400], *out = NULL;
    snprintf(dir, sizeof dir, "%s/mine/a", tmp);
    snprintf(pdir, sizeof pdir, "%s/mine/parts", tmp);
    tg_dataset_t *rd = open_ds(rods);
    char fb[4096];
    TG_CHECK_OK(tg_derived_fallback_dir(rd, fb, sizeof fb));
    tg_dataset_close(rd);
    tg_rmtree(fb);
    TG_CHECK(tg_test_cli(&out,
                         "train %s --out %s/run-dd --strategy gids --epochs 1 --mem 256M "
                         "--threads 1 --hidden 16 --derived-dir %s",
                         rods, tmp, dir) == 0);
    if (!out || strstr(out, "cannot be written")) TG_FAIL("train --derived-dir:\n%s", out);
    free(out);
    TG_CHECK(has_prefix(dir, "rank-"));
    struct stat st;
    TG_CHECK(stat(fb, &st) != 0); /* the per-user directory was not used */

    /* eval and infer take it too (a strategy that reads its derived files from DIR) */
    TG_CHECK(tg_test_cli(&out, "eval %s --checkpoint %s/run-dd --strategy gids --derived-dir %s",
                         rods, tmp, dir) == 0);
    if (!out || strstr(out, "cannot be written")) TG_FAIL("eval --derived-dir:\n%s", out);
    free(out);
    TG_CHECK(tg_test_cli(&out, "infer %s --checkpoint %s/run-dd --out %s/pred --derived-dir %s",
                         rods, tmp, tmp, dir) == 0);
    if (!out || strstr(out, "cannot be written")) TG_FAIL("infer --derived-dir:\n%s", out);
    free(out);
    TG_CHECK(stat(fb, &st) != 0);

    TG_CHECK(tg_test_cli(&out, "info %s --derived-dir %s", rods, dir) == 0);
    if (!out || !strstr(out, dir) || !strstr(out, "rank ")) TG_FAIL("info --derived-dir:\n%s", out);
    free(out);

    TG_CHECK(tg_test_cli(&out, "partition %s --parts 2 --derived-dir %s", rods, pdir) == 0);
    TG_CHECK(has_prefix(pdir, "part-") && has_prefix(pdir, "partadj-"));
    free(out);
    TG_CHECK(tg_test_cli(&out, "partition %s --parts 2 --derived-dir %s", rods, pdir) == 0);
    if (!out || !strstr(out, "up to date") || !strstr(out, pdir)) TG_FAIL("partition:\n%s", out);
    free(out);

    TG_CHECK(tg_test_cli(&out, "clean %s --derived-dir %s", rods, dir) == 0);
    if (!out || !strstr(out, "removed  rank-")) TG_FAIL("clean --derived-dir:\n%s", out);
    free(out);
    TG_CHECK(!has_prefix(dir, "rank-"));
    TG_CHECK(has_prefix(pdir, "part-")); /* another directory: untouched */

    /* errors: a directory that cannot be made, or that is a file, named in the message */
    char bad[4400];
    snprintf(bad, sizeof bad, "%s/sub", rods);
    TG_CHECK(tg_test_cli(&out, "train %s --out %s/run-bad --derived-dir %s", rods, tmp, bad) != 0);
    if (!out || !strstr(out, bad) || !strstr(out, "cannot create")) TG_FAIL("bad dir:\n%s", out);
    free(out);
    TG_CHECK(stat(tmp, &st) == 0);
    snprintf(bad, sizeof bad, "%s/afile", tmp);
    tg_test_write_file(bad, "x");
    TG_CHECK(tg_test_cli(&out, "partition %s --parts 2 --derived-dir %s/d", rods, bad) != 0);
    if (!out || !strstr(out, bad)) TG_FAIL("a file in the way:\n%s", out);
    free(out);
    TG_CHECK_ERR(tg_derived_set_dir(bad, 1), bad);
    TG_CHECK_OK(tg_derived_set_dir(NULL, 0));
    TG_CHECK(tg_derived_get_dir() == NULL);
    TG_CHECK(tg_test_cli(&out, "train --help") == 0);
    if (!out || !strstr(out, "--derived-dir DIR")) TG_FAIL("train --help:\n%s", out);
    free(out);
}

int main(void)
{
    tg_log_set_level(TG_LOG_QUIET);
    snprintf(tmp, sizeof tmp, "%s", tg_test_tmpdir("derived_ro"));
    snprintf(src, sizeof src, "%s/src", tmp);
    snprintf(srcds, sizeof srcds, "%s/ds", src);
    snprintf(ro, sizeof ro, "%s/ro", tmp);
    snprintf(cache, sizeof cache, "%s/cache", tmp);
    setenv("XDG_CACHE_HOME", cache, 1); /* the CLI's runs inherit it */
    tg_gen_opts_default(&gen);
    gen.nodes = 1500;
    gen.feat_dim = 8;
    gen.classes = 4;
    gen.mem_bytes = tg_gen_min_mem(&gen);
    gen.threads = 1;
    generate(1);
    /* a file the dataset carries in its own derived/ (a snapshot's), read but never written */
    tg_dataset_t *rw = open_ds(srcds);
    if (build(rw, NULL, "snap", "n=1") < 0) TG_FAIL("snap: %s", tg_errmsg());
    tg_dataset_close(rw);
    if (make_read_only() < 0) {
        if (bind_mounted) umount(ro);
        writable_again();
        tg_rmtree(tmp);
        return TG_SKIP;
    }
    TG_RUN(fallback_keyed);
    TG_RUN(train_read_only);
    TG_RUN(changed_dataset);
    TG_RUN(derived_dir_option);
    if (bind_mounted) umount(ro);
    writable_again();
    if (!tg_test_failures) tg_rmtree(tmp);
    return tg_test_done();
}
