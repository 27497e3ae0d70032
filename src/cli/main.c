/* tiergnn command-line entry point: dispatches to the sub-commands in cmd_*.c. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tiergnn/dist.h"
#include "tiergnn/io.h"
#include "tiergnn/util.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command_t;

static const command_t commands[] = {
    {"generate", tg_cmd_generate, "generate a power-law graph with planted communities"},
    {"import", tg_cmd_import, "import a dataset (--from ogb|npy|edgelist)"},
    {"info", tg_cmd_info, "print counts, degree statistics and sizes of a dataset"},
    {"verify", tg_cmd_verify, "check sizes, checksums, id ranges and indptr of a dataset"},
    {"partition", tg_cmd_partition,
     "min-edge-cut partitions, the dataset rewritten in their order"},
    {"clean", tg_cmd_clean, "remove the files strategies derived from a dataset (derived/)"},
    {"plan", tg_cmd_plan, "predict each strategy's epoch for a run and say which auto takes"},
    {"train", tg_cmd_train, "train a GNN on a dataset"},
    {"eval", tg_cmd_eval, "evaluate a checkpoint on a split"},
    {"infer", tg_cmd_infer, "write predictions (and embeddings) for every node"},
    {"bench", tg_cmd_bench, "compare strategies, each in its own process, cold, under one limit"},
    {"strategies", tg_cmd_strategies, "the out-of-core strategies (NAME: one strategy's options)"},
};

#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: tiergnn [--quiet|--verbose] COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n--quiet (-q) and --verbose (-v) go before or after COMMAND. 'tiergnn COMMAND "
               "--help'\ndescribes a command. docs/ has the details.\n");
}

/* Under a launcher (mpirun), tiergnn-mpi beside this program runs instead: the same CLI linked
 * with MPI, so that a plain tiergnn loads no MPI library (CMakeLists.txt says why). When it is
 * not there (a build without MPI) this program goes on, and tg_dist_init refuses K > 1 ranks. */
static void exec_mpi_cli(char **argv)
{
    int k = 0;
    if (!tg_dist_launched(&k) || tg_dist_with_mpi()) return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 16);
    if (n <= 0) return;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash) return;
    snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "tiergnn-mpi");
    if (access(self, X_OK) == 0) execv(self, argv);
}

int main(int argc, char **argv)
{
    exec_mpi_cli(argv);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (tg_cli_global_option(argv[i]))
            continue;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("tiergnn 0.1.0\n");
            return 0;
        } else {
            char near[64];
            if (!strncmp(argv[i], "--", 2) &&
                tg_cli_closest(argv[i] + 2, NULL, 0, "quiet,verbose,help,version", near,
                               sizeof near))
                fprintf(stderr, "tiergnn: unknown option '%s' (did you mean --%s?)\n", argv[i],
                        near);
            else
                fprintf(stderr, "tiergnn: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    /* TIERGNN_IO_FAULT's rules, before any read: the plain reads a command makes before its
     * first io/ file meet them too */
    if (tg_io_fault_env()) {
        fprintf(stderr, "tiergnn: %s\n", tg_errmsg());
        return 2;
    }
    const char *names[NUM_COMMANDS];
    for (size_t k = 0; k < NUM_COMMANDS; k++) {
        if (!strcmp(argv[i], commands[k].name)) return commands[k].fn(argc - i - 1, argv + i + 1);
        names[k] = commands[k].name;
    }
    char near[64];
    if (tg_cli_closest(argv[i], names, NUM_COMMANDS, NULL, near, sizeof near))
        fprintf(stderr, "tiergnn: unknown command '%s' (did you mean %s?)\n", argv[i], near);
    else
        fprintf(stderr, "tiergnn: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return 2;
}
