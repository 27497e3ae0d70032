/* The strategy options of the sub-commands (train, eval, infer), taken from the engine's strategy
 * table: the CLI names no strategy and no strategy knob itself. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tiergnn/engine.h"
#include "tiergnn/util.h"

int tg_cli_parse_with_strategies(tg_args_t *a, int argc, char **argv, const char *base, int *help)
{
    char spec[4096];
    int rc = tg_cli_strategy_spec(spec, sizeof spec, base);
    if (!rc) rc = tg_args_parse(a, argc, argv, spec);
    if (!rc) *help = tg_args_has(a, "help") || tg_args_has(a, "help-strategy");
    return rc;
}

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

#define WIDTH 96

/* Prints text wrapped at WIDTH columns, every line indented by `indent` spaces. */
static void wrapped(FILE *f, int indent, const char *text)
{
    const int width = WIDTH - indent;
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

/* text cut at a word to fit `room` columns, "..." marking the cut. */
static void one_line(FILE *f, const char *text, int room)
{
    int n = (int)strlen(text);
    if (n <= room) {
        fprintf(f, "%s\n", text);
        return;
    }
    n = room - 3;
    while (n > 0 && text[n] != ' ')
        n--;
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == ',' || text[n - 1] == ';'))
        n--;
    fprintf(f, "%.*s...\n", n > 0 ? n : room - 3, text);
}

static const char *tags(const tg_strategy_info_t *si)
{
    if ((si->caps & TG_STRAT_EXACT) && (si->caps & TG_STRAT_AUTO_OOC))
        return "[exact] [auto out of core] ";
    if (si->caps & TG_STRAT_EXACT) return "[exact] ";
    return (si->caps & TG_STRAT_AUTO_OOC) ? "[auto out of core] " : "";
}

/* The strategy auto picks when the data does not fit (marked in its table). */
static const char *auto_ooc(void)
{
    for (int i = 0; i < tg_strategy_count(); i++)
        if (tg_strategy_info(i)->caps & TG_STRAT_AUTO_OOC) return tg_strategy_info(i)->name;
    return "an out-of-core strategy";
}

/* What auto does; short: in one line of the usage. */
static void auto_text(char *buf, size_t len, int short_form)
{
    if (short_form)
        snprintf(buf, len, "train: the fastest predicted (tiergnn plan); eval/infer: RAM, else %s",
                 auto_ooc());
    else
        snprintf(buf, len,
                 "train: the fastest exact strategy its cost model predicts from a short profile "
                 "of the run ('tiergnn plan'; where the profile cannot run, and in eval and "
                 "infer: the first in-RAM strategy if graph + features fit in --mem (no --mem: "
                 "a quarter of the RAM), else %s)",
                 auto_ooc());
}

/* The strategies that have an option called name, into who[] (table indices); their count. */
static int takers(const char *name, int *who)
{
    int n = 0;
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        for (int k = 0; k < si->num_opts; k++)
            if (!strcmp(si->opts[k].name, name)) {
                who[n++] = i;
                break;
            }
    }
    return n;
}

static const tg_strategy_opt_t *opt_of(const tg_strategy_info_t *si, const char *name)
{
    for (int k = 0; k < si->num_opts; k++)
        if (!strcmp(si->opts[k].name, name)) return &si->opts[k];
    return NULL;
}

/* Whether opts[k] of strategy i is the first mention of its name in table order. */
static int first_mention(int i, int k)
{
    const char *name = tg_strategy_info(i)->opts[k].name;
    for (int j = 0; j < i; j++)
        if (opt_of(tg_strategy_info(j), name)) return 0;
    return 1;
}

static void opt_head(FILE *f, int indent, const tg_strategy_opt_t *op)
{
    fprintf(f, "%*s--%s%s%s\n", indent, "", op->name, op->meta ? " " : "",
            op->meta ? op->meta : "");
}

void tg_cli_strategy_usage(FILE *f)
{
    char line[512];
    fprintf(f, "\nstrategies (--strategy NAME; docs/STRATEGIES.md):\n");
    auto_text(line, sizeof line, 1);
    fprintf(f, "  %-10s", "auto");
    one_line(f, line, WIDTH - 13);
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        snprintf(line, sizeof line, "%s%s", (si->caps & TG_STRAT_EXACT) ? "[exact] " : "",
                 si->summary);
        fprintf(f, "  %-10s", si->name);
        one_line(f, line, WIDTH - 13);
    }
    fprintf(f, "  [exact]: the same batches, order and checkpoints as memory, byte for byte\n");
    /* every option name once, so that a script's flag can be found here */
    char names[2048];
    size_t n = 0;
    names[0] = 0;
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        for (int k = 0; k < si->num_opts && n < sizeof names; k++)
            if (first_mention(i, k))
                n += (size_t)snprintf(names + n, sizeof names - n, "%s--%s", n ? " " : "",
                                      si->opts[k].name);
    }
    fprintf(f, "strategy options ('tiergnn strategies NAME' describes a strategy's; an option of "
               "another\nstrategy than the one that runs is ignored with a note):\n");
    wrapped(f, 2, names);
}

/* help ends in "(default ...)": the length of what comes before " (default", and *def the
 * parenthesis' text without its brackets (length *def_len); 0 when it does not end so. */
static size_t split_default(const char *help, const char **def, size_t *def_len)
{
    size_t n = strlen(help);
    const char *at = NULL;
    for (const char *p = strstr(help, " (default"); p; p = strstr(p + 1, " (default"))
        at = p;
    if (!at || n < 2 || help[n - 1] != ')') return 0;
    *def = at + 2;
    *def_len = (size_t)(help + n - 1 - *def);
    return (size_t)(at - help);
}

#define MAX_STRATEGIES 64

/* "a, b, c": the names of the strategies who[i] with group[i] == g (all when g < 0). */
static void names_of(char *buf, size_t len, const int *who, const int *group, int n, int g)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && o < len; i++)
        if (g < 0 || group[i] == g)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "",
                                  tg_strategy_info(who[i])->name);
}

/* An option several strategies take, described once: one text when their helps agree, one text
 * with each default when only the "(default ...)" at its end differs, else each help. */
static void shared_option(FILE *f, const char *name, const int *who, int n)
{
    const char *help[MAX_STRATEGIES];
    int group[MAX_STRATEGIES], size[MAX_STRATEGIES] = {0}, ng = 0;
    for (int i = 0; i < n; i++) {
        help[i] = opt_of(tg_strategy_info(who[i]), name)->help;
        group[i] = ng;
        for (int j = 0; j < i; j++)
            if (!strcmp(help[j], help[i])) {
                group[i] = group[j];
                break;
            }
        if (group[i] == ng) ng++;
        size[group[i]]++;
    }
    opt_head(f, 2, opt_of(tg_strategy_info(who[0]), name));
    char text[2048], list[512];
    const char *def;
    size_t def_len, stem = split_default(help[0], &def, &def_len);
    int same_stem = ng > 1 && stem > 0;
    for (int i = 1; i < n && same_stem; i++) {
        const char *d;
        size_t dl;
        same_stem = split_default(help[i], &d, &dl) == stem && !strncmp(help[i], help[0], stem);
    }
    if (ng == 1) {
        wrapped(f, 6, help[0]);
    } else if (same_stem) {
        /* the most common default first, then each other one with its strategies */
        int major = 0;
        for (int g = 1; g < ng; g++)
            if (size[g] > size[major]) major = g;
        int at = 0;
        while (group[at] != major)
            at++;
        split_default(help[at], &def, &def_len);
        size_t o = (size_t)snprintf(text, sizeof text, "%.*s (%.*s", (int)stem, help[0],
                                    (int)def_len, def);
        for (int g = 0; g < ng && o < sizeof text; g++) {
            if (g == major) continue;
            int k = 0;
            while (group[k] != g)
                k++;
            split_default(help[k], &def, &def_len);
            if (def_len > 8 &&
                !strncmp(def, "default ", 8)) { /* "gids: 1", not "gids: default 1" */
                def += 8;
                def_len -= 8;
            }
            names_of(list, sizeof list, who, group, n, g);
            o += (size_t)snprintf(text + o, sizeof text - o, "; %s: %.*s", list, (int)def_len, def);
        }
        if (o < sizeof text) snprintf(text + o, sizeof text - o, ")");
        wrapped(f, 6, text);
    } else {
        for (int g = 0; g < ng; g++) {
            int k = 0;
            while (group[k] != g)
                k++;
            names_of(list, sizeof list, who, group, n, g);
            snprintf(text, sizeof text, "%s: %s", list, help[k]);
            wrapped(f, 6, text);
        }
    }
    names_of(list, sizeof list, who, group, n, -1);
    snprintf(text, sizeof text, "taken by %s", list);
    wrapped(f, 6, text);
}

static void strategy_head(FILE *f, const tg_strategy_info_t *si)
{
    char t[64];
    snprintf(t, sizeof t, "%s", tags(si));
    if (*t) t[strlen(t) - 1] = 0;
    fprintf(f, "%s%s%s\n", si->name, *t ? " " : "", t);
    wrapped(f, 4, si->summary);
}

int tg_cli_strategy_help(FILE *f, const char *name)
{
    const tg_strategy_info_t *si = tg_strategy_info_find(name);
    if (!si) {
        if (!strcmp(name, "auto")) {
            char text[512];
            auto_text(text, sizeof text, 0);
            fprintf(f, "auto\n");
            wrapped(f, 4, text);
            fprintf(f, "  no options of its own: the chosen strategy takes its options\n");
            return 0;
        }
        char near[64];
        const char *names[MAX_STRATEGIES + 1];
        int n = 0;
        names[n++] = "auto";
        for (int i = 0; i < tg_strategy_count() && n < MAX_STRATEGIES + 1; i++)
            names[n++] = tg_strategy_info(i)->name;
        if (tg_cli_closest(name, names, (size_t)n, NULL, near, sizeof near))
            return tg_err(-EINVAL, "no strategy '%s' (did you mean %s?); expected auto, %s", name,
                          near, tg_strategy_names());
        return tg_err(-EINVAL, "no strategy '%s': expected auto, %s", name, tg_strategy_names());
    }
    strategy_head(f, si);
    int who[MAX_STRATEGIES], own = 0, shared = 0;
    for (int k = 0; k < si->num_opts; k++) {
        if (takers(si->opts[k].name, who) > 1)
            shared++;
        else
            own++;
    }
    if (!si->num_opts) fprintf(f, "  no options of its own\n");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 && own)
            fprintf(f, "options of %s only:\n", si->name);
        else if (pass == 1 && shared)
            fprintf(f, "options it shares with other strategies (its defaults):\n");
        for (int k = 0; k < si->num_opts; k++) {
            const tg_strategy_opt_t *op = &si->opts[k];
            if ((takers(op->name, who) > 1) != pass) continue;
            opt_head(f, 2, op);
            wrapped(f, 6, op->help);
        }
    }
    return 0;
}

/* Every strategy with its own options, then the options several take, each described once. */
static void strategies_all(FILE *f)
{
    int who[MAX_STRATEGIES];
    char text[512];
    auto_text(text, sizeof text, 0);
    fprintf(f, "auto\n");
    wrapped(f, 4, text);
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        strategy_head(f, si);
        int shared = 0;
        for (int k = 0; k < si->num_opts; k++) {
            const tg_strategy_opt_t *op = &si->opts[k];
            if (takers(op->name, who) > 1) {
                shared++;
                continue;
            }
            opt_head(f, 2, op);
            wrapped(f, 6, op->help);
        }
        if (shared) fprintf(f, "  and %d of the options below\n", shared);
    }
    fprintf(f, "\noptions of several strategies:\n");
    for (int i = 0; i < tg_strategy_count(); i++) {
        const tg_strategy_info_t *si = tg_strategy_info(i);
        for (int k = 0; k < si->num_opts; k++) {
            int n = takers(si->opts[k].name, who);
            if (n > 1 && first_mention(i, k)) shared_option(f, si->opts[k].name, who, n);
        }
    }
    fprintf(f, "\n[exact]: the same batches, order and checkpoints as memory, byte for byte\n");
}

static const char strategies_usage[] =
    "usage: tiergnn strategies [NAME | --all]\n"
    "\n"
    "Lists the strategies of --strategy (train, eval, infer, bench) with their summaries; NAME\n"
    "prints one strategy's options, --all every strategy's (an option several take, once).\n"
    "docs/STRATEGIES.md describes each.\n";

int tg_cli_help(const tg_args_t *a, const char *usage)
{
    if (tg_args_has(a, "help-strategy"))
        return tg_cli_strategy_help(stdout, tg_args_str(a, "help-strategy", "")) < 0 ? tg_cli_fail()
                                                                                     : 0;
    fputs(usage, stdout);
    tg_cli_strategy_usage(stdout);
    return 0;
}

int tg_cmd_strategies(int argc, char **argv)
{
    tg_args_t a;
    if (tg_args_parse(&a, argc, argv, "all,help") < 0) return tg_cli_fail();
    if (tg_args_has(&a, "help")) {
        fputs(strategies_usage, stdout);
        return 0;
    }
    if (a.npos > 1) {
        tg_err(-EINVAL, "strategies: expected at most one strategy NAME, got %d arguments", a.npos);
        return tg_cli_fail();
    }
    if (a.npos == 1 && strcmp(a.pos[0], "all") != 0)
        return tg_cli_strategy_help(stdout, a.pos[0]) < 0 ? tg_cli_fail() : 0;
    if (a.npos == 1 || tg_args_has(&a, "all")) {
        strategies_all(stdout);
        return 0;
    }
    char text[512];
    auto_text(text, sizeof text, 0);
    printf("strategies (--strategy NAME; docs/STRATEGIES.md):\n");
    printf("auto\n");
    wrapped(stdout, 4, text);
    for (int i = 0; i < tg_strategy_count(); i++)
        strategy_head(stdout, tg_strategy_info(i));
    printf("\n[exact]: the same batches, order and checkpoints as memory, byte for byte\n"
           "'tiergnn strategies NAME' prints a strategy's options, 'tiergnn strategies --all' "
           "every\nstrategy's.\n");
    return 0;
}
