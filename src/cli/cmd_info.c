/* tiergnn info DATASET: counts, degree statistics, labels, splits, file sizes, derived files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/data.h"
#include "tiergnn/derived.h"

/* One line per entry of the directory `where`: kind and params (from the header) or the name,
 * size, state. */
static int print_dir(const tg_dataset_t *ds, const char *where)
{
    tg_derived_entry_t *v;
    size_t n;
    char b[32], label[160];
    int rc = tg_derived_list(ds, where, &v, &n);
    if (rc) return rc;
    uint64_t total = 0;
    size_t stale = 0;
    for (size_t i = 0; i < n; i++) {
        total += v[i].bytes;
        stale += v[i].state == TG_DERIVED_STALE;
    }
    if (!n)
        printf("derived:    none (%s)\n", where);
    else
        printf("derived:    %s (%zu entr%s, %s, %zu stale)\n", where, n, n == 1 ? "y" : "ies",
               tg_fmt_bytes(total, b, sizeof b), stale);
    for (size_t i = 0; i < n; i++) {
        const tg_derived_entry_t *e = &v[i];
        if (e->kind[0])
            snprintf(label, sizeof label, "%-10s %.100s", e->kind, e->params);
        else
            snprintf(label, sizeof label, "%.100s", e->name);
        if (strlen(label) > 60) strcpy(label + 57, "...");
        const char *state = e->state == TG_DERIVED_VALID   ? "valid"
                            : e->state == TG_DERIVED_STALE ? "stale: "
                                                           : "";
        printf("  %-60s %10s  %s%s\n", label, tg_fmt_bytes(e->bytes, b, sizeof b), state,
               e->state == TG_DERIVED_VALID ? "" : e->why);
    }
    free(v);
    return 0;
}

/* The directory derived files of the dataset go to (--derived-dir, DATASET/derived, or the
 * per-user cache), and DATASET/derived too when that is another, since runs still read it. */
static int print_derived(const char *dir)
{
    tg_dataset_t *ds;
    int rc = tg_dataset_open(&ds, dir, 0);
    if (rc) return rc;
    char where[4096], own[4096];
    tg_derived_dir(ds, NULL, where, sizeof where);
    tg_derived_own_dir(ds, own, sizeof own);
    rc = print_dir(ds, where);
    if (!rc && strcmp(where, own)) rc = print_dir(ds, own);
    tg_dataset_close(ds);
    return rc;
}

int tg_cmd_info(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "derived-dir=,help") < 0 || tg_cli_derived_dir(&a, 0) < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn info DATASET [--derived-dir DIR]\n"
              "Prints counts, in-degree statistics (min, median, mean, p99, max, nodes without\n"
              "in-neighbours, share of the top 1%, a histogram), the label distribution, split\n"
              "sizes and the size and CRC-32 of every file. Reads indptr and labels only.\n"
              "Then lists DATASET/derived/ (files strategies computed from the dataset): kind,\n"
              "params, size, and whether each is valid or stale and why (`tiergnn clean`\n"
              "removes them). Where derived/ is read-only, the per-user directory that takes\n"
              "its files (docs/FORMAT.md) is listed first; --derived-dir DIR lists DIR instead.\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "info: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    if (tg_dataset_info(a.pos[0], stdout) < 0) return tg_cli_fail();
    if (print_derived(a.pos[0]) < 0) return tg_cli_fail();
    return 0;
}
