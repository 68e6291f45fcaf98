/* The `math-verify` reward: the cmd reward (cmd.c) running the shipped
 * scripts/grpo-math-verify, which asks the math-verify PyPI package for its
 * verdict on each record (1, 0, or null without `answer`). The script is
 * looked for beside the running grpo-reward (an install links it into
 * PREFIX/bin) and in ../scripts (a checkout's bin/). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reward.h"

#define SCRIPT "grpo-math-verify"

typedef struct {
    strbuf command; /* the cmd reward keeps a pointer to it */
    reward_fn inner;
} math_verify_fn;

/* Appends s in single quotes for /bin/sh. */
static void sh_quote(strbuf *b, const char *s) {
    sb_putc(b, '\'');
    for (; *s; s++)
        if (*s == '\'') sb_puts(b, "'\\''");
        else sb_putc(b, *s);
    sb_putc(b, '\'');
}

/* The script's path into out; false when neither place has it. */
static bool find_script(strbuf *out) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return false;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return false;
    *slash = 0;
    static const char *const PLACES[] = {"%s/" SCRIPT, "%s/../scripts/" SCRIPT};
    for (size_t i = 0; i < sizeof PLACES / sizeof PLACES[0]; i++) {
        sb_clear(out);
        sb_printf(out, PLACES[i], exe);
        if (!access(out->data, R_OK)) return true;
    }
    return false;
}

static int mv_score_named(void *self, const reward_item *items, size_t n, reward_entries *out, gerr *e) {
    math_verify_fn *m = self;
    return m->inner.score_named(m->inner.self, items, n, out, e);
}

static int mv_finish(void *self, gerr *e) {
    math_verify_fn *m = self;
    return m->inner.finish ? m->inner.finish(m->inner.self, e) : 0;
}

static void mv_stats(void *self, cJSON *obj) {
    math_verify_fn *m = self;
    cJSON *o = cJSON_AddObjectToObject(obj, "math-verify");
    if (o && m->inner.stats) m->inner.stats(m->inner.self, o);
}

static void mv_close(void *self) {
    math_verify_fn *m = self;
    if (!m) return;
    if (m->inner.close) m->inner.close(m->inner.self);
    sb_free(&m->command);
    free(m);
}

int reward_open_math_verify(reward_fn *fn, const reward_opts *p, gerr *e) {
    strbuf script = {0};
    if (!find_script(&script)) {
        sb_free(&script);
        return gerr_set(e, EX_UNAVAILABLE, "--fn math-verify: the script " SCRIPT
                                           " is neither beside grpo-reward nor in ../scripts");
    }
    math_verify_fn *m = xcalloc(1, sizeof *m);
    sh_quote(&m->command, p->math_verify_python);
    sb_putc(&m->command, ' ');
    sh_quote(&m->command, script.data);
    sb_free(&script);
    reward_opts inner = *p;
    inner.cmd = m->command.data;
    int rc = reward_open_cmd(&m->inner, &inner, e);
    if (rc) {
        sb_free(&m->command);
        free(m);
        return rc;
    }
    fn->self = m;
    fn->score_named = mv_score_named;
    fn->finish = mv_finish;
    fn->stats = mv_stats;
    fn->close = mv_close;
    return 0;
}
