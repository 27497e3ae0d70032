/* The table of strategies: the one place that names them all. Options, their parsing and the
 * automatic choice are engine/options.c's, over this table. */
#include "../engine-impl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const tg_strategy_i *const strategies[] = {
    &tg_strategy_memory, &tg_strategy_mmap,    &tg_strategy_gnndrive, &tg_strategy_pagraph,
    &tg_strategy_ginex,  &tg_strategy_diskgnn, &tg_strategy_hier,     &tg_strategy_gids};

#define NSTRAT (sizeof strategies / sizeof strategies[0])

int tg_strategy_count(void)
{
    return (int)NSTRAT;
}

const tg_strategy_info_t *tg_strategy_info(int i)
{
    return i >= 0 && (size_t)i < NSTRAT ? &strategies[i]->info : NULL;
}

const tg_strategy_info_t *tg_strategy_info_find(const char *name)
{
    for (size_t i = 0; i < NSTRAT; i++)
        if (!strcmp(name, strategies[i]->info.name)) return &strategies[i]->info;
    return NULL;
}

static char names_buf[256];

static void names_build(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NSTRAT && n < sizeof names_buf; i++)
        n += (size_t)snprintf(names_buf + n, sizeof names_buf - n, "%s%s", i ? ", " : "",
                              strategies[i]->info.name);
}

const char *tg_strategy_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, names_build);
    return names_buf;
}

int tg_strategy_find(const char *name, const tg_strategy_i **out)
{
    for (size_t i = 0; i < NSTRAT; i++)
        if (!strcmp(name, strategies[i]->info.name)) {
            *out = strategies[i];
            return 0;
        }
    return tg_err(-EINVAL, "unknown strategy '%s', expected auto, %s", name, tg_strategy_names());
}

const tg_strategy_i *tg_strategy_at(int i)
{
    return i >= 0 && (size_t)i < NSTRAT ? strategies[i] : NULL;
}
