/* Multi-turn episodes (grpo-rollout --env): what happens when a sample's
 * assistant turn ends, and when the environment answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../util/clock.h"
#include "rollout_internal.h"

int episode_open(rollout *r, gerr *e) {
    int rc = env_open(&r->env, r->o->env, r->o->env_timeout, e);
    r->env_open = rc == 0;
    return rc;
}

/* The conversation so far: the prompt's messages, then the episode's. */
static cJSON *conversation(const prompt_slot *p, const rollout_seq *s) {
    cJSON *all = cJSON_Duplicate(p->messages, true);
    const cJSON *m;
    cJSON_ArrayForEach(m, s->turns) cJSON_AddItemToArray(all, cJSON_Duplicate(m, true));
    return all;
}

/* One request line: the prompt record's fields, then sample, turn,
 * messages, tool_calls (when the message made any) and last. */
static int send_request(rollout *r, int slot, const cJSON *calls, gerr *e) {
    const rollout_seq *s = r->slot_seq[slot];
    const prompt_slot *p = r->slot_prompt[slot];
    record req;
    record_init(&req);
    record_reset(&req, p->rec.file, p->rec.line);
    for (size_t i = 0; i < p->rec.n; i++) record_append_field(&req, &p->rec.fields[i]);
    record_set_int(&req, "sample", s->sample);
    record_set_int(&req, "turn", s->turn);
    cJSON *messages = conversation(p, s);
    int rc = record_set_json(&req, "messages", messages, e);
    if (!rc && cJSON_GetArraySize(calls) > 0) rc = record_set_json(&req, "tool_calls", calls, e);
    if (!rc && s->turn + 1 >= r->o->max_turns) record_set_raw(&req, "last", "true", 4);
    cJSON_Delete(messages);
    strbuf line = {0};
    if (!rc) {
        record_serialize(&req, &line);
        rc = env_ask(&r->env, line.data, line.len, p->id.data, s->sample, s->turn, slot, p->rec.file, p->rec.line, e);
    }
    sb_free(&line);
    record_free(&req);
    return rc;
}

/* The assistant message a turn adds to the conversation and the tool calls
 * it made: its text, or harmony's final channel with the reasoning as
 * "thinking" (as gpt-oss's template takes them) and the calls its messages
 * to functions.NAME made. */
static cJSON *assistant_message(const rollout *r, const rollout_seq *s, cJSON **calls) {
    cJSON *msg = cJSON_CreateObject();
    if (!msg || !cJSON_AddStringToObject(msg, "role", "assistant")) die(EX_SOFTWARE, "out of memory");
    if (r->harmony) {
        harmony_turn ht;
        rollout_harmony_turn(r, s, &ht);
        cJSON_AddStringToObject(msg, "content", ht.final.data);
        if (ht.thinking.len) cJSON_AddStringToObject(msg, "thinking", ht.thinking.data);
        *calls = ht.calls;
        ht.calls = NULL;
        harmony_turn_free(&ht);
        return msg;
    }
    char *content = strndup(s->text.data ? s->text.data : "", s->text_end);
    if (!content) die(EX_SOFTWARE, "out of memory");
    cJSON_AddStringToObject(msg, "content", content);
    *calls = chat_parse_tool_calls(r->tmpl.family, content, s->text_end);
    free(content);
    return msg;
}

int episode_turn_ended(rollout *r, int slot, gerr *e) {
    rollout_seq *s = r->slot_seq[slot];
    cJSON *calls;
    cJSON_AddItemToArray(s->turns, assistant_message(r, s, &calls));
    int rc = 0;
    if (s->bound_hit) { /* no room for another turn: the episode ends here, "length" */
        rollout_release(r, slot);
    } else {
        rc = send_request(r, slot, calls, e);
        s->waiting = true;
        s->asked_at = now_seconds();
        r->env_requests++;
    }
    cJSON_Delete(calls);
    return rc;
}

/* The answer's messages appended as tokens: the turn's last sampled token
 * (not yet in the cache) and the continuation are prefilled into the slot's
 * cache by the next decode step, whose last row of them draws the next
 * turn's first token. */
static int resume(rollout *r, int slot, const cJSON *messages, gerr *e) {
    rollout_seq *s = r->slot_seq[slot];
    const prompt_slot *p = r->slot_prompt[slot];
    const model_text *mt = &r->run.mt;
    bool closed = model_text_is_eos(mt, s->tokens[s->n - 1]);
    strbuf text = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    cJSON *calls = NULL; /* harmony names a tool's result after the turn's call */
    if (r->harmony) {
        harmony_turn ht;
        rollout_harmony_turn(r, s, &ht);
        calls = ht.calls;
        ht.calls = NULL;
        harmony_turn_free(&ht);
    }
    int rc = chat_render_continuation(&r->tmpl, messages, closed, calls, &text, e);
    cJSON_Delete(calls);
    if (!rc) rc = tok_encode(mt->tok, text.data ? text.data : "", text.len, true, &ids, &n, e);
    sb_free(&text);
    if (rc) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        free(ids);
        return gerr_at(e, rc, p->rec.file, p->rec.line, "env answer for record \"%s\", sample %d, turn %d: %s",
                       p->id.data, s->sample, s->turn, why);
    }
    long long total = (long long)s->n + (long long)n + 1;
    if ((r->o->max_total_tokens > 0 && total > r->o->max_total_tokens) ||
        s->pos + (long long)n + 1 > r->ctx_len) {
        free(ids); /* no room for the answer and one more token: the episode ends, "length" */
        s->finish = FINISH_LENGTH;
        rollout_release(r, slot);
        return 0;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) cJSON_AddItemToArray(s->turns, cJSON_Duplicate(m, true));
    seq_append_env(s, mt->tok, ids, n);
    free(ids);
    int positions = s->pos + (int)r->o->max_new_tokens;
    return rollout_reserve(r, positions < r->ctx_len ? positions : r->ctx_len, 0, e);
}

static int apply(rollout *r, const env_answer *a, gerr *e) {
    rollout_seq *s = r->slot_seq[a->tag];
    s->waiting = false;
    r->env_latency[r->n_env_latency++ % 8] = now_seconds() - s->asked_at;
    if (a->has_reward) {
        s->has_env_reward = true;
        s->env_reward = a->reward;
    }
    if (a->done || s->turn + 1 >= r->o->max_turns) {
        s->finish = a->done ? FINISH_ENV : FINISH_TURNS;
        rollout_release(r, a->tag);
        return 0;
    }
    return resume(r, a->tag, a->messages, e);
}

/* Requests the last decode step sent that are still unanswered. */
static bool answers_due(const rollout *r) {
    for (int i = 0; i < r->n_slots; i++) {
        const rollout_seq *s = r->slot_seq[i];
        if (s && s->waiting && s->asked_at >= r->step_ended) return true;
    }
    return false;
}

/* How long a decode step may be held for answers due: what the last step
 * cost per sequence it advanced (about what a sequence sitting it out
 * loses), and nothing while the environment's latest answers all took
 * longer than that. */
static double hold_seconds(const rollout *r) {
    if (r->step_seqs <= 0) return 0;
    double hold = r->step_seconds / r->step_seqs;
    int n = r->n_env_latency < 8 ? r->n_env_latency : 8;
    for (int i = 0; i < n; i++)
        if (r->env_latency[i] <= hold) return hold;
    return n ? 0 : hold;
}

int episode_take_answers(rollout *r, bool block, gerr *e) {
    if (!env_in_flight(&r->env)) return 0;
    double since = now_seconds(), until = block ? since + 1.0 : r->step_ended + hold_seconds(r);
    bool held = false;
    for (;;) {
        int wait_ms = 0;
        if (block || answers_due(r)) {
            double left = until - now_seconds();
            wait_ms = left > 0 ? (int)ceil(left * 1000) : 0;
        }
        held = held || (!block && wait_ms > 0);
        env_answer a;
        int got = env_next_answer(&r->env, wait_ms, &a, e);
        if (got < 0) return e->code;
        if (!got) break;
        int rc = apply(r, &a, e);
        env_answer_free(&a);
        if (rc) return rc;
        if (block) { /* the first answer came: now the others due, as after a decode step */
            double now = now_seconds();
            r->env_wait_seconds += now - since;
            since = now;
            block = false;
            until = r->step_ended + hold_seconds(r);
        }
    }
    if (block) r->env_wait_seconds += now_seconds() - since;
    else if (held) r->env_hold_seconds += now_seconds() - since;
    return 0;
}

void episode_write_fields(const rollout *r, const rollout_seq *s, record *out) {
    (void)r;
    gerr e = {0};
    if (record_set_json(out, "turns", s->turns, &e)) die_err(&e);
    if (s->has_env_reward) record_set_number(out, "env_reward", s->env_reward);
}

int episode_finish(rollout *r, gerr *e) {
    int rc = env_finish(&r->env, e);
    return rc;
}

void episode_close(rollout *r) {
    if (r->env_open) env_close(&r->env);
    r->env_open = false;
}
