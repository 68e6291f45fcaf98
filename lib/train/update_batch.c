/* Reading an advantaged batch for grpo-update: every record's prompt and
 * completion tokens, sampling log-probs and advantage, checked field by
 * field, plus the batch-level metrics TRL reports (reward, reward_std, ...).
 * The whole decompressed input is hashed (state.json's batch_sha256). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../io/instream.h"
#include "../io/record.h"
#include "../util/sha256.h"
#include "../util/strbuf.h"
#include "update.h"

static int get_logprobs(const record *r, int n, float *out, gerr *e) {
    cJSON *a = NULL;
    if (record_get_json(r, "logprobs", true, &a, e)) return e->code;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) {
        int got = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
        cJSON_Delete(a);
        if (got < 0) return record_field_error(r, "logprobs", "an array of numbers", e);
        return gerr_at(e, EX_DATAERR, r->file, r->line,
                       "field \"logprobs\": expected one per completion token (%d), got %d", n, got);
    }
    int i = 0;
    for (const cJSON *v = a->child; v; v = v->next, i++) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble <= 0) || !isfinite(v->valuedouble)) {
            cJSON_Delete(a);
            return gerr_at(e, EX_DATAERR, r->file, r->line,
                           "field \"logprobs\": entry %d: expected a finite log-probability <= 0", i);
        }
        out[i] = (float)v->valuedouble;
    }
    cJSON_Delete(a);
    return 0;
}

/* Rewards grouped by id, for reward_std and frac_reward_zero_std (TRL: the
 * std of each prompt's K rewards, averaged over completions). */
typedef struct {
    char *id;
    double sum, sum_sq;
    long n;
} reward_group;

static int read_all(const char *path, strbuf *text, gerr *e) {
    instream in;
    if (instream_open(&in, path, e)) return e->code;
    for (;;) {
        sb_reserve(text, 1 << 16);
        long got = instream_read(&in, text->data + text->len, text->cap - text->len - 1, e);
        if (got < 0) {
            instream_close(&in);
            return e->code;
        }
        if (got == 0) break;
        text->len += (size_t)got;
    }
    instream_close(&in);
    if (text->data) text->data[text->len] = 0;
    return 0;
}

int update_batch_read(update_batch *b, const char *path, int vocab, bool mask_truncated, gerr *e) {
    memset(b, 0, sizeof *b);
    const char *name = path && strcmp(path, "-") ? path : "<stdin>";
    strbuf text = {0};
    if (read_all(path, &text, e)) {
        sb_free(&text);
        return e->code;
    }
    unsigned char digest[32];
    sha256(text.data ? text.data : "", text.len, digest);
    sha256_hex(digest, 32, b->sha256);

    size_t cap = 16, tok_cap = 1024, tgt_cap = 1024, n_groups = 0, group_cap = 16;
    b->start = xmalloc(sizeof(int) * (cap + 1));
    b->tgt_start = xmalloc(sizeof(int) * (cap + 1));
    b->n_prompt = xmalloc(sizeof(int) * cap);
    b->advantage = xmalloc(sizeof(double) * cap);
    b->key = xmalloc(sizeof(uint64_t) * cap);
    b->tokens = xmalloc(sizeof(int32_t) * tok_cap);
    b->old_logp = xmalloc(sizeof(float) * tgt_cap);
    b->start[0] = b->tgt_start[0] = 0;
    reward_group *groups = xmalloc(sizeof *groups * group_cap);
    long sum_len = 0, n_length = 0, n_reward = 0;
    double reward_sum = 0;
    double *rec_reward = NULL;
    long *rec_group = NULL;
    size_t rec_cap = 0;
    record r;
    record_init(&r);
    int rc = 0;
    long line = 0;
    for (size_t pos = 0; pos < text.len && !rc;) {
        const char *ls = text.data + pos, *nl = memchr(ls, '\n', text.len - pos);
        size_t len = nl ? (size_t)(nl - ls) : text.len - pos;
        pos += len + (nl ? 1 : 0);
        line++;
        size_t k = 0;
        while (k < len && (ls[k] == ' ' || ls[k] == '\t' || ls[k] == '\r')) k++;
        if (k == len) continue;
        if ((rc = record_parse(&r, ls, len, name, line, e))) break;
        long idx = b->n_records++;
        int32_t *prompt = NULL, *completion = NULL;
        size_t np_z = 0, nc_z = 0;
        int np = 0, nc = 0, present = 0;
        double adv = 0, temp = 0, reward = 0;
        strbuf fin = {0}, id = {0};
        if ((rc = record_get_token_ids(&r, "prompt_tokens", vocab, &prompt, &np_z, e)) ||
            (rc = record_get_token_ids(&r, "completion_tokens", vocab, &completion, &nc_z, e)))
            goto next;
        np = (int)np_z, nc = (int)nc_z;
        if (np < 1) {
            rc = gerr_at(e, EX_DATAERR, name, line, "field \"prompt_tokens\": expected at least one token, got none");
            goto next;
        }
        if (b->tgt_start[b->n] + nc > (int)tgt_cap) {
            while (b->tgt_start[b->n] + nc > (int)tgt_cap) tgt_cap *= 2;
            b->old_logp = xrealloc(b->old_logp, sizeof(float) * tgt_cap);
        }
        if ((rc = get_logprobs(&r, nc, b->old_logp + b->tgt_start[b->n], e))) goto next;
        if ((rc = record_get_number(&r, "temperature", false, &temp, &present, e))) goto next;
        if (present == 2) {
            if (temp == 0) temp = 1; /* greedy samples carry logprobs under T = 1 */
            if (b->temperature_seen && temp != b->temperature) {
                rc = gerr_at(e, EX_DATAERR, name, line,
                             "field \"temperature\": expected %g like the records before, got %g (one batch, one temperature)",
                             b->temperature, temp);
                goto next;
            }
            b->temperature = temp, b->temperature_seen = true;
        }
        if ((rc = record_get_string(&r, "finish_reason", false, &fin, &present, e))) goto next;
        bool truncated = present == 2 && !strcmp(fin.data, "length");
        sum_len += nc, n_length += truncated;
        if ((rc = record_get_string(&r, "id", false, &id, &present, e))) goto next;
        if ((rc = record_get_number(&r, "reward", false, &reward, &present, e))) goto next;
        if (present == 2) {
            n_reward++, reward_sum += reward, b->has_reward = true;
            size_t g = 0;
            while (g < n_groups && strcmp(groups[g].id, id.data ? id.data : "")) g++;
            if (g == n_groups) {
                if (n_groups == group_cap) groups = xrealloc(groups, sizeof *groups * (group_cap *= 2));
                groups[n_groups++] = (reward_group){xstrdup(id.data ? id.data : ""), 0, 0, 0};
            }
            groups[g].sum += reward, groups[g].sum_sq += reward * reward, groups[g].n++;
            if ((size_t)n_reward > rec_cap) {
                rec_cap = rec_cap ? rec_cap * 2 : 64;
                rec_reward = xrealloc(rec_reward, sizeof(double) * rec_cap);
                rec_group = xrealloc(rec_group, sizeof(long) * rec_cap);
            }
            rec_reward[n_reward - 1] = reward, rec_group[n_reward - 1] = (long)g;
        }
        if ((rc = record_get_number(&r, "advantage", false, &adv, &present, e))) goto next;
        if (present != 2) {
            b->n_no_advantage++;
            goto next;
        }
        if (!isfinite(adv)) {
            rc = gerr_at(e, EX_DATAERR, name, line, "field \"advantage\": expected a finite number");
            goto next;
        }
        if (mask_truncated && truncated) {
            b->n_masked++;
            goto next;
        }
        /* a sequence that takes part */
        if ((size_t)b->n == cap) {
            cap *= 2;
            b->start = xrealloc(b->start, sizeof(int) * (cap + 1));
            b->tgt_start = xrealloc(b->tgt_start, sizeof(int) * (cap + 1));
            b->n_prompt = xrealloc(b->n_prompt, sizeof(int) * cap);
            b->advantage = xrealloc(b->advantage, sizeof(double) * cap);
            b->key = xrealloc(b->key, sizeof(uint64_t) * cap);
        }
        int L = np + nc;
        if (b->start[b->n] + L > (int)tok_cap) {
            while (b->start[b->n] + L > (int)tok_cap) tok_cap *= 2;
            b->tokens = xrealloc(b->tokens, sizeof(int32_t) * tok_cap);
        }
        memcpy(b->tokens + b->start[b->n], prompt, sizeof(int32_t) * (size_t)np);
        memcpy(b->tokens + b->start[b->n] + np, completion, sizeof(int32_t) * (size_t)nc);
        b->n_prompt[b->n] = np;
        b->advantage[b->n] = adv;
        b->key[b->n] = (uint64_t)idx;
        b->start[b->n + 1] = b->start[b->n] + L;
        b->tgt_start[b->n + 1] = b->tgt_start[b->n] + nc;
        b->max_len = L > b->max_len ? L : b->max_len;
        b->max_completion = nc > b->max_completion ? nc : b->max_completion;
        b->n++;
    next:
        free(prompt), free(completion);
        sb_free(&fin), sb_free(&id);
    }
    record_free(&r);
    sb_free(&text);
    if (!rc && b->n_records) {
        b->mean_length = (double)sum_len / b->n_records;
        b->clipped_ratio = (double)n_length / b->n_records;
    }
    if (!rc && n_reward) {
        b->reward = reward_sum / n_reward;
        double std_sum = 0;
        long zero = 0;
        for (long i = 0; i < n_reward; i++) {
            const reward_group *g = &groups[rec_group[i]];
            double var = g->n > 1 ? (g->sum_sq - g->sum * g->sum / g->n) / (g->n - 1) : 0;
            double sd = var > 0 ? sqrt(var) : 0;
            std_sum += sd;
            zero += sd < 1e-8;
        }
        b->reward_std = std_sum / n_reward;
        b->frac_reward_zero_std = (double)zero / n_reward;
    }
    for (size_t g = 0; g < n_groups; g++) free(groups[g].id);
    free(groups), free(rec_reward), free(rec_group);
    b->total_tokens = b->n ? b->start[b->n] : 0;
    if (rc) update_batch_free(b);
    return rc;
}

void update_batch_free(update_batch *b) {
    free(b->start), free(b->n_prompt), free(b->tokens), free(b->tgt_start), free(b->old_logp);
    free(b->advantage), free(b->key);
    memset(b, 0, sizeof *b);
}
