#include "generate.h"

#include <string.h>

#include "../util/sha256.h"
#include "arith.h"
#include "countdown.h"
#include "../util/idset.h"
#include "item.h"
#include "prompt.h"

void prep_generated_id(strbuf *out, const char *task, const char *canonical, size_t len) {
    unsigned char d[32];
    char hex[17];
    sha256(canonical, len, d);
    sha256_hex(d, 8, hex);
    sb_clear(out);
    sb_printf(out, "%s/%s", task, hex);
}

/* Candidate `index` as an item; false when the generator rejected it. The
 * id hashes the math alone (the expression; the sorted numbers and target),
 * so the same problem in other words shares an id and a split: nothing
 * leaks from train to test. */
static bool arith_item(const prep_opts *o, uint64_t index, arith_problem *p, prep_item *it) {
    if (!arith_draw(&o->arith, (uint64_t)o->seed, index, p)) return false;
    prep_item_clear(it);
    prep_generated_id(&it->id, "arith", p->expr.data, p->expr.len);
    sb_puts(&it->task, "arith");
    prompt_messages(&it->messages, prompt_system(o), p->question.data, p->question.len);
    sb_printf(&it->answer, "%lld", p->answer);
    it->has_answer = true;
    sb_json_string(prep_item_extra(it, "expression"), p->expr.data, p->expr.len);
    return true;
}

static bool countdown_item(const prep_opts *o, uint64_t index, countdown_problem *p, prep_item *it) {
    if (!countdown_draw((uint64_t)o->seed, index, p)) return false;
    prep_item_clear(it);
    long long sorted[COUNTDOWN_MAX_NUMBERS];
    memcpy(sorted, p->numbers, sizeof sorted);
    for (int i = 1; i < p->n; i++) /* insertion sort: four numbers at most */
        for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
            long long t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    strbuf canon = {0};
    for (int i = 0; i < p->n; i++) sb_printf(&canon, "%s%lld", i ? "," : "", sorted[i]);
    sb_printf(&canon, ";%lld", p->target);
    prep_generated_id(&it->id, "countdown", canon.data, canon.len);
    sb_free(&canon);
    sb_puts(&it->task, "countdown");
    prompt_messages(&it->messages, prompt_system(o), p->question.data, p->question.len);
    strbuf *nums = prep_item_extra(it, "numbers");
    sb_putc(nums, '[');
    for (int i = 0; i < p->n; i++) sb_printf(nums, "%s%lld", i ? "," : "", p->numbers[i]);
    sb_putc(nums, ']');
    sb_printf(prep_item_extra(it, "target"), "%lld", p->target);
    return true;
}

int prep_generate_run(const prep_opts *o, prep_sink *s, gerr *e) {
    arith_problem ap = {0};
    countdown_problem cp = {0};
    prep_item it;
    record out;
    idset seen;
    prep_item_init(&it);
    record_init(&out);
    idset_init(&seen);
    const char *task = o->task == TASK_ARITH ? "arith" : "countdown";
    int rc = 0;
    uint64_t misses = 0;
    for (uint64_t index = 0; !prep_sink_full(s); index++) {
        if (misses == GENERATE_MAX_MISSES) {
            rc = gerr_set(e, EX_USAGE,
                          "%s: made %lld of --n %lld records, then %d candidates in a row were duplicates, outside "
                          "the split or shard, or invalid: these flags allow too few distinct problems",
                          task, s->taken, o->n, GENERATE_MAX_MISSES);
            break;
        }
        misses++;
        bool ok = o->task == TASK_ARITH ? arith_item(o, index, &ap, &it) : countdown_item(o, index, &cp, &it);
        if (!ok || !prep_sink_selects(s, it.id.data, it.id.len)) continue;
        /* Same id, same problem: keep the first one drawn. */
        if (idset_add(&seen, it.id.data, it.id.len, (long)index + 1)) continue;
        if ((rc = prep_item_to_record(&it, NULL, &out, e))) break;
        if ((rc = prep_sink_put(s, &out, it.id.data, it.id.len, e))) break;
        misses = 0;
    }
    arith_problem_free(&ap);
    countdown_problem_free(&cp);
    prep_item_free(&it);
    record_free(&out);
    idset_free(&seen);
    return rc;
}
