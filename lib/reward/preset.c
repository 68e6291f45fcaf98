/* Reward presets (preset.h): the table and opening one. */
#include <string.h>

#include "preset.h"
#include "stage.h"

const reward_preset reward_presets[] = {
    {"math", "answer:1,format:0.2", "final answers (numbers, LaTeX expressions) and the <think>/<answer> layout"},
    {"code", "code:1,format:0.2", "the record's tests run in the sandbox, and the layout"},
    {"general", "answer:1,format:0.2,repetition:0.5",
     "the reference answer where there is one, the layout, and a repetition penalty"},
    {"reasoning", "answer:1,format:0.5,length:1",
     "long reasoning: the answer, the layout weighted more, DAPO's overlong penalty (set --max-len)"},
    {"auto", "answer:1,format:0.2,code:1,repetition:0.5",
     "per record by its `task`: arith, countdown, gsm8k, math -> math; mbpp -> code; else general"},
};
const size_t reward_n_presets = sizeof reward_presets / sizeof reward_presets[0];

static const reward_preset *find(const char *name) {
    for (size_t i = 0; i < reward_n_presets; i++)
        if (!strcmp(reward_presets[i].name, name)) return &reward_presets[i];
    return NULL;
}

const reward_preset *reward_preset_for_task(const char *task, size_t len) {
    static const char *const MATH[] = {"arith", "countdown", "gsm8k", "math"};
    for (size_t i = 0; task && i < sizeof MATH / sizeof MATH[0]; i++)
        if (strlen(MATH[i]) == len && !memcmp(MATH[i], task, len)) return find("math");
    if (task && len == 4 && !memcmp(task, "mbpp", 4)) return find("code");
    return find("general");
}

int reward_open_preset(const char *name, const char *const *specs, int n_specs, const reward_opts *p,
                       reward_fn **out, size_t *n_out, gerr *e) {
    const reward_preset *pr = find(name);
    if (!pr) return gerr_set(e, EX_USAGE, "--preset: unknown preset '%s' (grpo-reward --list shows them)", name);
    enum { MAX_SPECS = 64 };
    if (n_specs >= MAX_SPECS) return gerr_set(e, EX_USAGE, "--fn: at most %d given with --preset", MAX_SPECS - 1);
    const char *all[MAX_SPECS];
    all[0] = pr->fns;
    for (int i = 0; i < n_specs; i++) all[i + 1] = specs[i];
    int rc = reward_open_fns(all, n_specs + 1, p, out, n_out, e);
    if (rc || strcmp(name, "auto")) return rc;
    /* the preset's own functions (the first ones opened) follow each record's task */
    size_t own = 1;
    for (const char *c = pr->fns; *c; c++) own += *c == ',';
    for (size_t i = 0; i < own && i < *n_out; i++)
        if ((rc = reward_filter_by_task(&(*out)[i], e))) {
            reward_close_fns(*out, *n_out);
            *out = NULL;
            return rc;
        }
    return 0;
}
