/* PLACEHOLDER: replaced by the owner of 'tiergnn infer'. */
#include "cli.h"
#include "tiergnn/util.h"

int tg_cmd_infer(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    tg_err(-ENOSYS, "'infer' is not built yet");
    return tg_cli_fail();
}
