/* tiergnn clean DATASET [--stale-only] [--derived-dir DIR]: removes the files strategies derived
 * from a dataset. */
#include <stdio.h>

#include "cli.h"
#include "tiergnn/derived.h"

int tg_cmd_clean(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "stale-only,derived-dir=,help") < 0 ||
        tg_cli_derived_dir(&a, 0) < 0)
        return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn clean DATASET [--stale-only] [--derived-dir DIR]\n"
              "Removes the files training strategies computed from DATASET and keep in\n"
              "DATASET/derived/ (neighbour caches, partitions, packed chunks ...), and the temp\n"
              "files of runs that died while writing one. With --stale-only, only files that no\n"
              "longer match the dataset or their parameters, or are damaged, go. Never removes\n"
              "the dataset's own files, a temp file of a run still writing, or a file in\n"
              "derived/ that is not a derived file. Prints each file removed or kept and the\n"
              "bytes freed. A strategy rebuilds what it needs on its next run. Where derived/\n"
              "is read-only, the per-user directory that takes its files is cleaned instead\n"
              "(docs/FORMAT.md); --derived-dir DIR cleans DIR.\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "clean: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    tg_dataset_t *ds;
    if (tg_dataset_open(&ds, a.pos[0], 0) < 0) return tg_cli_fail();
    uint64_t freed = 0;
    size_t removed = 0;
    int rc = tg_derived_clean(ds, NULL, tg_args_has(&a, "stale-only"), stdout, &freed, &removed);
    char b[32];
    printf("freed %s (%llu bytes) in %zu file%s\n", tg_fmt_bytes(freed, b, sizeof b),
           (unsigned long long)freed, removed, removed == 1 ? "" : "s");
    tg_dataset_close(ds);
    return rc < 0 ? tg_cli_fail() : 0;
}
