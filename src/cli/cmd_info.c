/* tiergnn info DATASET: counts, degree statistics, labels, splits and file sizes. */
#include <stdio.h>

#include "cli.h"
#include "tiergnn/data.h"

int tg_cmd_info(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "help") < 0) return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs("usage: tiergnn info DATASET\n"
              "Prints counts, in-degree statistics (min, median, mean, p99, max, nodes without\n"
              "in-neighbours, share of the top 1%, a histogram), the label distribution, split\n"
              "sizes and the size and CRC-32 of every file. Reads indptr and labels only.\n",
              stdout);
        return 0;
    }
    if (a.npos != 1) {
        tg_err(-EINVAL, "info: expected one dataset directory, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    if (tg_dataset_info(a.pos[0], stdout) < 0) return tg_cli_fail();
    return 0;
}
