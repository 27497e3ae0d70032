/* PLACEHOLDER: replaced by the owner of 'tiergnn verify'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_verify(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'verify' is not built yet");
    return tg_cli_fail();
}
