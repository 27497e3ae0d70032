/* The strategy options of the sub-commands (train, eval, infer), taken from the engine's strategy
 * table: the CLI names no strategy and no strategy knob itself. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

int tg_cli_strategy_spec(char *buf, size_t len, const char *base)
{
    size_t n = (size_t)snprintf(buf, len, "%s", base);
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        for (int k = 0; k < si->num_opts; k++) {
            const tg_strategy_opt_t *op = &si->opts[k];
            /* two strategies may share an option name: list it once */
            char probe[96];
            snprintf(probe, sizeof probe, ",%s%s,", op->name, op->kind == TG_SOPT_FLAG ? "" : "=");
            char padded[4096 + 2];
            snprintf(padded, sizeof padded, ",%s,", buf);
            if (strstr(padded, probe)) continue;
            if (n < len)
                n += (size_t)snprintf(buf + n, len - n, ",%s%s", op->name,
                                      op->kind == TG_SOPT_FLAG ? "" : "=");
        }
    }
    if (n >= len) return tg_err(-E2BIG, "too many strategy options for the flag parser");
    return 0;
}

int tg_cli_strategy_args(const tg_args_t *a, tg_strategy_arg_t *args, int max, int *n)
{
    *n = 0;
    for (int k = 0; k < a->nflags; k++) {
        if (tg_strategy_opt_kind(a->flag[k]) < 0) continue;
        if (*n >= max) return tg_err(-E2BIG, "too many strategy options");
        args[*n].name = a->flag[k];
        args[*n].value = a->value[k];
        (*n)++;
    }
    return 0;
}

int tg_cli_strategy_name(const tg_args_t *a, const char **out)
{
    const char *s = tg_args_str(a, "strategy", "auto");
    if (strcmp(s, "auto") != 0 && !tg_strategy_info_find(s)) {
        char names[512];
        size_t n = 0;
        names[0] = 0;
        for (int i = 0; i < tg_strategy_count() && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, ", %s", tg_strategy_info(i)->name);
        return tg_err(-EINVAL, "--strategy '%s': expected auto%s", s, names);
    }
    *out = s;
    return 0;
}

/* Prints text wrapped at 96 columns, every line indented by `indent` spaces. */
static void wrapped(FILE *f, int indent, const char *text)
{
    const int width = 96 - indent;
    while (*text) {
        int n = (int)strlen(text);
        if (n > width) {
            n = width;
            while (n > 0 && text[n] != ' ')
                n--;
            if (n == 0) n = width;
        }
        fprintf(f, "%*s%.*s\n", indent, "", n, text);
        text += n;
        while (*text == ' ')
            text++;
    }
}

void tg_cli_strategy_usage(FILE *f)
{
    fprintf(f, "\nstrategies (docs/STRATEGIES.md) and their options:\n");
    fprintf(f, "  auto\n");
    wrapped(f, 6,
            "the first in-RAM strategy if graph + features fit in --mem (no --mem: a quarter of "
            "the RAM), else the strategy marked [auto out of core]");
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        fprintf(f, "  %s%s%s\n", si->name, (si->caps & TG_STRAT_EXACT) ? " [exact]" : "",
                (si->caps & TG_STRAT_AUTO_OOC) ? " [auto out of core]" : "");
        wrapped(f, 6, si->summary);
        for (int k = 0; k < si->num_opts; k++) {
            const tg_strategy_opt_t *op = &si->opts[k];
            fprintf(f, "    --%s%s%s\n", op->name, op->meta ? " " : "", op->meta ? op->meta : "");
            wrapped(f, 8, op->help);
        }
    }
    fprintf(f, "  [exact]: the same batches, order and checkpoints as memory, byte for byte\n");
}
