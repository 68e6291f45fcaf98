/* Reading an advantaged batch for grpo-update: every record's prompt and
 * completion tokens, sampling log-probs and advantage, checked field by
 * field, plus the batch-level metrics TRL reports (reward, reward_std, ...).
 * The whole decompressed input is hashed (state.json's batch_sha256).
 * Records are read one by one; each sequence that takes part is pushed as
 * one `seq`, and the batch's arrays are laid out from them at the end.
 * A multi-turn record's completion_mask picks the tokens trained on (the
 * policy's); its environment tokens stay in the sequence as context only,
 * and every count below (targets, lengths) is of the policy's tokens. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "../io/jsonl.h"
#include "../util/idset.h"
#include "../util/stats.h"
#include "../util/vec.h"
#include "../io/completion_mask.h"
#include "../io/sampler_field.h"
#include "update.h"

/* A sequence that takes part; its tokens and logprobs are in the reader's
 * arrays, one after another in the order of the sequences. */
typedef struct {
    int n_prompt, n_completion; /* n_completion: every token after the prompt */
    int n_model;                /* those the policy sampled (completion_mask 1) */
    double advantage;
    uint64_t key; /* record number in the file */
    bool new_group; /* its id is not the previous sequence's (or it has none) */
} seq;

typedef struct {
    seq *seqs;
    size_t n_seqs, cap_seqs;
    int32_t *tokens; /* prompt + completion of each sequence */
    size_t n_tokens, cap_tokens;
    uint8_t *target; /* per token: 1 where it is trained on */
    size_t cap_target;
    float *logp;     /* logprobs of each sequence's policy tokens */
    size_t n_logp, cap_logp;
    uint16_t *routing; /* with a routing read: rt's width per token, as update_batch.routing */
    size_t cap_routing;
    /* Rewards grouped by id, for reward_std and frac_reward_zero_std (TRL:
     * the std of each prompt's K rewards, averaged over completions). */
    idset group_ids; /* id -> group number */
    welford *groups;
    size_t n_groups, cap_groups;
    double reward_sum;
    long n_reward, sum_len, n_length;
    strbuf last_id; /* the id of the last sequence pushed */
    const char *trainer_base, *trainer_compute; /* the trainer's frozen base format and products, for the sampler field */
} reader;

static void reader_free(reader *rd) {
    free(rd->seqs), free(rd->tokens), free(rd->target), free(rd->logp), free(rd->groups), free(rd->routing);
    idset_free(&rd->group_ids);
    sb_free(&rd->last_id);
    memset(rd, 0, sizeof *rd);
}

static void add_reward(reader *rd, const strbuf *id, double reward) {
    size_t g = idset_index(&rd->group_ids, id->data ? id->data : "", id->len);
    if (g == rd->n_groups) {
        rd->groups = vec_reserve(rd->groups, &rd->cap_groups, g + 1, sizeof *rd->groups);
        rd->groups[rd->n_groups++] = (welford){0};
    }
    welford_push(&rd->groups[g], reward);
    rd->reward_sum += reward, rd->n_reward++;
}

/* One record: checked whether or not it takes part, pushed when it does. */
static int read_record(reader *rd, update_batch *b, const record *r, uint64_t key, int vocab, bool mask_truncated,
                       const batch_routing *rt, gerr *e) {
    int32_t *prompt = NULL, *completion = NULL;
    uint8_t *mask = NULL;
    uint16_t *routing = NULL;
    bool routed = false;
    size_t np = 0, nc = 0;
    int rc, present = 0;
    double adv = 0, temp = 0, reward = 0;
    strbuf fin = {0}, id = {0};
    if ((rc = record_get_token_ids(r, "prompt_tokens", vocab, &prompt, &np, e)) ||
        (rc = record_get_token_ids(r, "completion_tokens", vocab, &completion, &nc, e)))
        goto out;
    if (np < 1) {
        rc = gerr_at(e, EX_DATAERR, r->file, r->line, "field \"prompt_tokens\": expected at least one token, got none");
        goto out;
    }
    if (rd->n_tokens + np + nc > INT_MAX) { /* the batch's offsets are ints */
        rc = gerr_at(e, EX_DATAERR, r->file, r->line, "the batch holds more than %d tokens", INT_MAX);
        goto out;
    }
    if ((rc = completion_mask_read(r, nc, &mask, e))) goto out;
    /* the positions the sampler ran: every one but the last */
    if (rt->shape.layers && (rc = routing_field_read(r, rt->shape, np + nc - 1, &routed, &routing, e))) goto out;
    /* read in place after the last sequence's; kept only if this one takes part */
    rd->logp = vec_reserve(rd->logp, &rd->cap_logp, rd->n_logp + nc, sizeof *rd->logp);
    if ((rc = completion_mask_logprobs(r, mask, (int)nc, rd->logp + rd->n_logp, e))) goto out;
    int n_model = completion_mask_select(rd->logp + rd->n_logp, mask, (int)nc);
    sampler_kind sk;
    if ((rc = sampler_field_read(r, rd->trainer_base, rd->trainer_compute, &sk, e))) goto out;
    b->n_inexact += sk == SAMPLER_OTHER || sk == SAMPLER_RAW;
    b->n_raw += sk == SAMPLER_RAW;
    long long ps;
    if ((rc = record_get_int(r, "policy_step", false, 0, (long long)1e15, &ps, &present, e))) goto out;
    if (present == 2) {
        if (!b->n_policy_step || ps < b->min_policy_step) b->min_policy_step = ps;
        if (!b->n_policy_step || ps > b->max_policy_step) b->max_policy_step = ps;
        b->n_policy_step++, b->sum_policy_step += (double)ps;
    }
    if ((rc = record_get_number(r, "temperature", false, &temp, &present, e))) goto out;
    if (present == 2) {
        if (temp == 0) temp = 1; /* greedy samples carry logprobs under T = 1 */
        if (b->temperature_seen && temp != b->temperature) {
            rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                         "field \"temperature\": expected %g like the records before, got %g (one batch, one temperature)",
                         b->temperature, temp);
            goto out;
        }
        b->temperature = temp, b->temperature_seen = true;
    }
    if ((rc = record_get_string(r, "finish_reason", false, &fin, &present, e))) goto out;
    bool truncated = present == 2 && !strcmp(fin.data, "length");
    rd->sum_len += n_model, rd->n_length += truncated;
    if ((rc = record_get_string(r, "id", true, &id, NULL, e))) goto out;
    if ((rc = record_get_number(r, "reward", false, &reward, &present, e))) goto out;
    if (present == 2) {
        add_reward(rd, &id, reward);
        b->has_reward = true;
    }
    if ((rc = record_get_number(r, "advantage", false, &adv, &present, e))) goto out;
    if (present != 2) {
        b->n_no_advantage++;
        goto out;
    }
    if (!isfinite(adv)) {
        rc = gerr_at(e, EX_DATAERR, r->file, r->line, "field \"advantage\": expected a finite number");
        goto out;
    }
    if (mask_truncated && truncated) {
        b->n_masked++;
        goto out;
    }
    if (rt->required && !routed) {
        rc = gerr_at(e, EX_DATAERR, r->file, r->line,
                     "field \"routing\": missing (--routing replay trains with the sampler's routing; --routing "
                     "recompute routes by the trainer's own router)");
        goto out;
    }
    /* a sequence that takes part */
    rd->seqs = vec_reserve(rd->seqs, &rd->cap_seqs, rd->n_seqs + 1, sizeof *rd->seqs);
    /* a prompt group is a run of records with one id (formats/rollout.md: the K
     * samples of a prompt are written next to each other) */
    bool new_group = rd->n_seqs == 0 || rd->last_id.len != id.len || (id.len && memcmp(rd->last_id.data, id.data, id.len));
    rd->last_id.len = 0;
    sb_append(&rd->last_id, id.data, id.len);
    rd->seqs[rd->n_seqs++] = (seq){(int)np, (int)nc, n_model, adv, key, new_group};
    rd->tokens = vec_reserve(rd->tokens, &rd->cap_tokens, rd->n_tokens + np + nc, sizeof *rd->tokens);
    memcpy(rd->tokens + rd->n_tokens, prompt, sizeof(int32_t) * np);
    memcpy(rd->tokens + rd->n_tokens + np, completion, sizeof(int32_t) * nc);
    rd->target = vec_reserve(rd->target, &rd->cap_target, rd->n_tokens + np + nc, sizeof *rd->target);
    memset(rd->target + rd->n_tokens, 0, np);
    if (mask)
        memcpy(rd->target + rd->n_tokens + np, mask, nc);
    else
        memset(rd->target + rd->n_tokens + np, 1, nc);
    if (rt->shape.layers) { /* the last position has none: zeros, never read */
        size_t w = routing_position_ids(rt->shape);
        rd->routing = vec_reserve(rd->routing, &rd->cap_routing, (rd->n_tokens + np + nc) * w, sizeof *rd->routing);
        uint16_t *to = rd->routing + rd->n_tokens * w;
        memset(to, 0, (np + nc) * w * sizeof *to);
        if (routed) memcpy(to, routing, (np + nc - 1) * w * sizeof *to);
        b->n_routed += routed;
    }
    rd->n_tokens += np + nc;
    rd->n_logp += (size_t)n_model;
out:
    free(prompt), free(completion), free(mask), free(routing);
    sb_free(&fin), sb_free(&id);
    return rc;
}

/* The batch's arrays from the sequences, and its metrics; the routing
 * only when every sequence has one. */
static void lay_out(update_batch *b, reader *rd, const batch_routing *rt) {
    size_t n = rd->n_seqs;
    b->n = (int)n;
    b->start = xmalloc(sizeof(int) * (n + 1));
    b->tgt_start = xmalloc(sizeof(int) * (n + 1));
    b->n_prompt = xmalloc(sizeof(int) * (n ? n : 1));
    b->advantage = xmalloc(sizeof(double) * (n ? n : 1));
    b->key = xmalloc(sizeof(uint64_t) * (n ? n : 1));
    b->group_start = xmalloc(sizeof(int) * (n + 1));
    b->start[0] = b->tgt_start[0] = 0;
    for (size_t s = 0; s < n; s++) {
        const seq *q = &rd->seqs[s];
        int len = q->n_prompt + q->n_completion;
        b->start[s + 1] = b->start[s] + len;
        b->tgt_start[s + 1] = b->tgt_start[s] + q->n_model;
        b->n_prompt[s] = q->n_prompt;
        b->advantage[s] = q->advantage;
        b->key[s] = q->key;
        if (q->new_group || s == 0) b->group_start[b->n_groups++] = (int)s;
        b->max_len = len > b->max_len ? len : b->max_len;
        b->max_completion = q->n_model > b->max_completion ? q->n_model : b->max_completion;
    }
    b->group_start[b->n_groups] = (int)n;
    /* the arrays move to the batch (never NULL, as the trainer expects) */
    b->tokens = vec_reserve(rd->tokens, &rd->cap_tokens, 1, sizeof *rd->tokens);
    b->target = vec_reserve(rd->target, &rd->cap_target, 1, sizeof *rd->target);
    b->old_logp = vec_reserve(rd->logp, &rd->cap_logp, 1, sizeof *rd->logp);
    rd->tokens = NULL, rd->target = NULL, rd->logp = NULL;
    if (rt->shape.layers && n && b->n_routed == (long)n) {
        b->routing = rd->routing, rd->routing = NULL;
        b->routing_width = (int)routing_position_ids(rt->shape);
    }
    b->total_tokens = (long)rd->n_tokens;
    if (b->n_records) {
        b->mean_length = (double)rd->sum_len / b->n_records;
        b->clipped_ratio = (double)rd->n_length / b->n_records;
    }
    if (rd->n_reward) {
        b->reward = rd->reward_sum / rd->n_reward;
        double std_sum = 0;
        long zero = 0;
        for (size_t g = 0; g < rd->n_groups; g++) { /* each of a group's records counts its std once */
            const welford *w = &rd->groups[g];
            double sd = w->n > 1 ? welford_std(w) : 0;
            std_sum += (double)w->n * sd;
            zero += sd < 1e-8 ? (long)w->n : 0;
        }
        b->reward_std = std_sum / rd->n_reward;
        b->frac_reward_zero_std = (double)zero / rd->n_reward;
    }
}

int update_batch_read(update_batch *b, const char *path, int vocab, bool mask_truncated, const batch_routing *rt,
                      const char *trainer_base, const char *trainer_compute, gerr *e) {
    memset(b, 0, sizeof *b);
    jsonl_reader in;
    if (jsonl_open(&in, path, e)) return e->code;
    sha256_ctx hash;
    sha256_init(&hash);
    in.hash = &hash;
    reader rd;
    memset(&rd, 0, sizeof rd);
    rd.trainer_base = trainer_base, rd.trainer_compute = trainer_compute;
    record r;
    record_init(&r);
    int got = 0, rc = 0;
    while (!rc && (got = jsonl_next(&in, &r, e)) == 1)
        rc = read_record(&rd, b, &r, (uint64_t)b->n_records++, vocab, mask_truncated, rt, e);
    if (!rc && got < 0) rc = e->code;
    if (!rc) {
        unsigned char digest[32];
        sha256_final(&hash, digest);
        sha256_hex(digest, 32, b->sha256);
        lay_out(b, &rd, rt);
    }
    reader_free(&rd);
    record_free(&r);
    jsonl_close(&in);
    if (rc) update_batch_free(b);
    return rc;
}

void update_batch_free(update_batch *b) {
    free(b->start), free(b->n_prompt), free(b->tokens), free(b->target), free(b->tgt_start), free(b->old_logp);
    free(b->advantage), free(b->key), free(b->group_start), free(b->routing);
    memset(b, 0, sizeof *b);
}

void update_batch_share(const update_batch *all, int s0, int s1, update_batch *mine) {
    *mine = *all; /* scalars: temperature, hash, the batch's metrics */
    int n = s1 - s0, t0 = all->start[s0], g0 = all->tgt_start[s0];
    size_t nt = (size_t)(all->start[s1] - t0), ng = (size_t)(all->tgt_start[s1] - g0);
    mine->n = n;
    mine->start = xmalloc(sizeof(int) * (size_t)(n + 1));
    mine->tgt_start = xmalloc(sizeof(int) * (size_t)(n + 1));
    mine->n_prompt = xmalloc(sizeof(int) * (size_t)(n ? n : 1));
    mine->advantage = xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    mine->key = xmalloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    mine->tokens = xmalloc(sizeof(int32_t) * (nt ? nt : 1));
    mine->target = xmalloc(nt ? nt : 1);
    mine->old_logp = xmalloc(sizeof(float) * (ng ? ng : 1));
    mine->max_len = mine->max_completion = 0;
    for (int s = 0; s <= n; s++) {
        mine->start[s] = all->start[s0 + s] - t0;
        mine->tgt_start[s] = all->tgt_start[s0 + s] - g0;
    }
    for (int s = 0; s < n; s++) {
        mine->n_prompt[s] = all->n_prompt[s0 + s];
        mine->advantage[s] = all->advantage[s0 + s];
        mine->key[s] = all->key[s0 + s];
        int len = mine->start[s + 1] - mine->start[s], nc = mine->tgt_start[s + 1] - mine->tgt_start[s];
        mine->max_len = len > mine->max_len ? len : mine->max_len;
        mine->max_completion = nc > mine->max_completion ? nc : mine->max_completion;
    }
    if (nt) memcpy(mine->tokens, all->tokens + t0, sizeof(int32_t) * nt);
    if (nt) memcpy(mine->target, all->target + t0, nt);
    if (ng) memcpy(mine->old_logp, all->old_logp + g0, sizeof(float) * ng);
    if (all->routing) {
        size_t w = (size_t)all->routing_width;
        mine->routing = xmalloc(sizeof *mine->routing * (nt ? nt * w : 1));
        if (nt) memcpy(mine->routing, all->routing + (size_t)t0 * w, sizeof *mine->routing * nt * w);
    }
    /* a share is whole groups (the split): those of all within s0 .. s1 */
    int first = 0, last;
    while (first < all->n_groups && all->group_start[first] < s0) first++;
    for (last = first; last < all->n_groups && all->group_start[last] < s1; last++) {}
    mine->n_groups = last - first;
    mine->group_start = xmalloc(sizeof(int) * (size_t)(mine->n_groups + 1));
    for (int g = 0; g < mine->n_groups; g++) mine->group_start[g] = all->group_start[first + g] - s0;
    mine->group_start[mine->n_groups] = n;
}
