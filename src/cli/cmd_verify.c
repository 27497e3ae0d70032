/* tiergnn verify DATASET: prints OK, or the first problem (file and offset) and exits 1. */
#include <stdio.h>

#include "cli.h"
#include "tiergnn/data.h"
#include "tiergnn/rowcrc.h"

int tg_cmd_verify(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "row-checksums,help") < 0) return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn verify DATASET [--row-checksums]\n"
              "Reads every file once and checks sizes and CRC-32 checksums against meta.txt,\n"
              "that indptr starts at 0, never decreases and ends at num_edges, that indices\n"
              "are node ids ascending within each node, that features are finite, labels in\n"
              "range, and split ids are node ids in at most one split. Prints OK and exits 0,\n"
              "or prints the first problem (file and byte offset) and exits 1.\n"
              "  --row-checksums   then also write derived/rowcrc (a CRC-32 per feature row,\n"
              "                    what `train --verify-reads` checks every read against), or\n"
              "                    find it valid\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "verify: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    if (tg_dataset_verify(a.pos[0]) < 0) return tg_cli_fail();
    if (tg_args_has(&a, "row-checksums")) {
        tg_dataset_t *ds;
        int rc = tg_dataset_open(&ds, a.pos[0], TG_OPEN_CHECK_SIZES);
        if (rc == 0) {
            rc = tg_rowcrc_prepare(ds, NULL);
            tg_dataset_close(ds);
        }
        if (rc < 0) return tg_cli_fail();
        printf("row checksums: %s\n", rc == 0   ? "valid (derived/rowcrc)"
                                      : rc == 1 ? "written (derived/rowcrc)"
                                                : "not written (the derived directory cannot be "
                                                  "written)");
        if (rc == 2) return 1;
    }
    printf("OK\n");
    return 0;
}
