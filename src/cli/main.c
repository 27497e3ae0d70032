/* tiergnn command-line entry point: dispatches to the sub-commands in cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
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
    {"train", tg_cmd_train, "train a GNN on a dataset"},
    {"eval", tg_cmd_eval, "evaluate a checkpoint on a split"},
    {"infer", tg_cmd_infer, "write predictions (and embeddings) for every node"},
    {"bench", tg_cmd_bench, "compare strategies, each in its own process, cold, under one limit"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: tiergnn [--quiet|--verbose] COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'tiergnn COMMAND --help' describes a command. docs/ has the details.\n");
}

int main(int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q"))
            tg_log_set_level(TG_LOG_WARN);
        else if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
            tg_log_set_level(TG_LOG_DEBUG);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("tiergnn 0.1.0\n");
            return 0;
        } else {
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
    for (size_t k = 0; k < sizeof commands / sizeof commands[0]; k++)
        if (!strcmp(argv[i], commands[k].name)) return commands[k].fn(argc - i - 1, argv + i + 1);
    fprintf(stderr, "tiergnn: unknown command '%s'\n", argv[i]);
    usage(stderr);
    return 2;
}
