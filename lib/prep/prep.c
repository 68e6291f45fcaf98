#include "prep.h"

#include <string.h>

#include "../io/jsonl.h"
#include "datasets.h"
#include "generate.h"
#include "../util/idset.h"
#include "item.h"
#include "sink.h"

void prep_opts_default(prep_opts *o) {
    memset(o, 0, sizeof *o);
    o->task = TASK_NONE;
    o->test_fraction = 0.1;
    o->format_name = "think-answer";
    o->prompt_field = "prompt";
    o->answer_field = "answer";
    o->shard.index = 0;
    o->shard.count = 1;
    o->digits = 2;
    o->ops = "+-*";
    o->terms = "2..3";
    o->word_problems = 0.25;
    o->chat_template = "auto";
}

bool prep_task_is_generated(prep_task t) { return t == TASK_ARITH || t == TASK_COUNTDOWN; }

static const char *const TASKS[] = {"arith", "countdown", "gsm8k", "math", "mbpp", "jsonl"};

int prep_check_opts(prep_opts *o, gerr *e) {
    const prep_given *g = &o->given;
    o->task = TASK_NONE;
    for (int i = 0; i < (int)(sizeof TASKS / sizeof *TASKS); i++)
        if (o->task_name && !strcmp(o->task_name, TASKS[i])) o->task = (prep_task)i;
    if (o->task == TASK_NONE) return gerr_set(e, EX_USAGE, "--task is required: arith|countdown|gsm8k|math|mbpp|jsonl");
    o->format = !strcmp(o->format_name, "answer") ? FORMAT_ANSWER
                : !strcmp(o->format_name, "plain") ? FORMAT_PLAIN
                                                   : FORMAT_THINK_ANSWER;
    bool generated = prep_task_is_generated(o->task);
    const char *task = o->task_name;
    if (generated && g->in) return gerr_set(e, EX_USAGE, "--in: --task %s generates its records and reads no input", task);
    if (generated && o->n <= 0) return gerr_set(e, EX_USAGE, "--task %s needs --n N: how many records to generate", task);
    if (g->test_fraction && !o->split) return gerr_set(e, EX_USAGE, "--test-fraction has no effect without --split");
    if (o->task != TASK_JSONL && (g->prompt_field || g->answer_field))
        return gerr_set(e, EX_USAGE, "--%s-field applies to --task jsonl only", g->prompt_field ? "prompt" : "answer");
    if (o->task != TASK_ARITH && (g->digits || g->ops || g->terms || g->word_problems)) {
        const char *flag = g->digits ? "--digits" : g->ops ? "--ops" : g->terms ? "--terms" : "--word-problems";
        return gerr_set(e, EX_USAGE, "%s applies to --task arith only", flag);
    }
    if (g->chat_template && !o->model) return gerr_set(e, EX_USAGE, "--chat-template needs --model");
    if ((o->reasoning_effort || o->chat_date) && !o->model)
        return gerr_set(e, EX_USAGE, "%s needs --model", o->reasoning_effort ? "--reasoning-effort" : "--chat-date");
    if (o->model && o->chat_template && !strcmp(o->chat_template, "raw") && !g->format && !g->system) {
        /* raw means no chat formatting at all: the prompt's own text, nothing added */
        o->format = FORMAT_PLAIN;
        o->format_name = "plain";
    }
    if (o->task == TASK_ARITH) {
        o->arith.digits = (int)o->digits;
        o->arith.word_fraction = o->word_problems;
        int rc = arith_parse_ops(&o->arith, o->ops, e);
        if (!rc) rc = arith_parse_terms(&o->arith, o->terms, e);
        if (rc) return rc;
    }
    return 0;
}

/* Reads the dataset, maps each record, rejects duplicate ids, and hands the
 * selected ones to the sink. Every record read is checked, whether the split
 * and shard keep it or not, so all shards of a bad file fail alike. */
static int run_dataset(const prep_opts *o, jsonl_reader *rd, prep_sink *s, gerr *e) {
    int rc = 0;
    record in, out;
    prep_item it;
    idset seen;
    record_init(&in);
    record_init(&out);
    prep_item_init(&it);
    idset_init(&seen);
    long skipped = 0;
    gerr first_bad = {0};
    while (!prep_sink_full(s)) {
        const char *line;
        size_t len;
        int got = jsonl_next_line(rd, &line, &len, e);
        if (got < 0) rc = e->code ? e->code : EX_IOERR;
        if (got <= 0) break;
        gerr bad = {0};
        int brc = record_parse(&in, line, len, rd->name, rd->line_no, &bad);
        if (!brc) brc = prep_dataset_item(o, &in, &it, &bad);
        if (!brc) brc = prep_item_to_record(&it, &in, &out, &bad);
        if (brc) {
            if (!o->skip_bad || brc != EX_DATAERR) {
                *e = bad;
                rc = brc;
                break;
            }
            if (!skipped++) first_bad = bad;
            continue;
        }
        long prev = idset_add(&seen, it.id.data, it.id.len, rd->line_no);
        if (prev) {
            rc = gerr_at(e, EX_DATAERR, rd->name, rd->line_no, "duplicate id \"%s\": line %ld has it too", it.id.data,
                         prev);
            break;
        }
        if (!prep_sink_selects(s, it.id.data, it.id.len)) continue;
        if ((rc = prep_sink_put(s, &out, it.id.data, it.id.len, e))) break;
    }
    if (!rc && skipped)
        warn("skipped %ld bad record%s (--skip-bad); the first: %s", skipped, skipped == 1 ? "" : "s", first_bad.msg);
    record_free(&in);
    record_free(&out);
    prep_item_free(&it);
    idset_free(&seen);
    return rc;
}

int prep_run(const prep_opts *o, gerr *e) {
    bool generated = prep_task_is_generated(o->task);
    jsonl_reader rd;
    prep_sink s;
    /* the input first: a missing one must not leave an output behind */
    int rc = generated ? 0 : jsonl_open(&rd, o->in, e);
    if (rc) return rc;
    rc = prep_sink_open(&s, o, e);
    if (!rc) rc = generated ? prep_generate_run(o, &s, e) : run_dataset(o, &rd, &s, e);
    if (!generated) jsonl_close(&rd);
    if (rc) {
        prep_sink_abort(&s);
        return rc;
    }
    return prep_sink_commit(&s, e);
}
