/* PLACEHOLDER: replaced by the owner of 'tiergnn eval'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_eval(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'eval' is not built yet");
    return tg_cli_fail();
}
