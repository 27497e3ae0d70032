/* tiergnn verify DATASET: prints OK, or the first problem (file and offset) and exits 1. */
#include <stdio.h>

#include "cli.h"
#include "tiergnn/data.h"

int tg_cmd_verify(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "help") < 0) return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn verify DATASET\n"
              "Reads every file once and checks sizes and CRC-32 checksums against meta.txt,\n"
              "that indptr starts at 0, never decreases and ends at num_edges, that indices\n"
              "are node ids ascending within each node, that features are finite, labels in\n"
              "range, and split ids are node ids in at most one split. Prints OK and exits 0,\n"
              "or prints the first problem (file and byte offset) and exits 1.\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "verify: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    if (tg_dataset_verify(a.pos[0]) < 0) return tg_cli_fail();
    printf("OK\n");
    return 0;
}
