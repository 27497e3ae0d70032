/* PLACEHOLDER: replaced by the owner of 'tiergnn generate'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'generate' is not built yet");
    return tg_cli_fail();
}
