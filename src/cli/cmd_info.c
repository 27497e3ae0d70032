/* PLACEHOLDER: replaced by the owner of 'tiergnn info'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'info' is not built yet");
    return tg_cli_fail();
}
