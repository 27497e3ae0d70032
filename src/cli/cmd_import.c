/* PLACEHOLDER: replaced by the owner of 'tiergnn import'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_import(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'import' is not built yet");
    return tg_cli_fail();
}
