/* PLACEHOLDER: replaced by the owner of 'tiergnn train'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_train(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'train' is not built yet");
    return tg_cli_fail();
}
