/* libFuzzer target: any bytes as the answer lines of a multi-turn
 * environment program (grpo-rollout --env; the program is untrusted), taken
 * one line at a time against three requests in flight, as env_next_answer
 * takes them from the pipe. An answer is taken or refused in one line,
 * EX_DATAERR, naming the record's file; one taken answers a request that was
 * in flight (which is then forgotten) and either ends the episode or
 * carries a non-empty list of user/tool messages with string contents. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "env/env.h"
#include "fuzz_util.h"
#include "util/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void ask(env_conn *v, const char *id, int sample, int turn, int tag) {
    v->asked[v->n_asked++] = (env_request){.id = xstrdup(id), .sample = sample, .turn = turn, .tag = tag,
                                           .file = "prompts.jsonl", .line = tag + 1, .sent_at = tag};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    env_conn v = {0};
    v.proc.cmd = "python3 env.py";
    v.cap_asked = 3;
    v.asked = xmalloc(sizeof *v.asked * 3);
    ask(&v, "arith/1", 0, 0, 0);
    ask(&v, "arith/1", 1, 2, 1);
    ask(&v, "calc/7", 0, 1, 2);
    char *text = fuzz_copy(data, size);
    size_t at = 0;
    while (at < size && v.n_asked) {
        char *nl = memchr(text + at, '\n', size - at);
        size_t len = nl ? (size_t)(nl - (text + at)) : size - at;
        int before = v.n_asked;
        env_answer got = {0};
        gerr e = {0};
        if (env_take_answer(&v, text + at, len, &got, &e) == 0) {
            if (v.n_asked != before - 1 || got.tag < 0 || got.tag > 2) abort();
            if (got.has_reward && !isfinite(got.reward)) abort();
            if (!got.done) {
                if (!cJSON_IsArray(got.messages) || !got.messages->child) abort();
                const cJSON *m;
                cJSON_ArrayForEach(m, got.messages) {
                    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
                    if (!cJSON_IsString(role) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(m, "content")))
                        abort();
                }
            } else if (got.messages) {
                abort();
            }
            env_answer_free(&got);
        } else {
            fuzz_check_error(&e, "prompts.jsonl:", EX_DATAERR, EX_DATAERR);
            if (v.n_asked != before) abort();
            break; /* the run stops at the first bad answer */
        }
        at += len + 1;
    }
    for (int i = 0; i < v.n_asked; i++) free(v.asked[i].id);
    free(v.asked);
    free(text);
    return 0;
}
