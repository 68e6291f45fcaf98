#include "seqs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../util/err.h"

void seq_start(rollout_seq *s, const tokenizer *tok, int sample, int pos, uint64_t seed,
               const char *id, size_t id_len, bool multi_turn) {
    s->sample = sample;
    s->multi_turn = multi_turn;
    s->turn = s->turn_start = 0;
    s->bound_hit = s->waiting = s->has_env_reward = false;
    s->env_reward = 0;
    cJSON_Delete(s->turns);
    s->turns = multi_turn ? cJSON_CreateArray() : NULL;
    s->pos = s->cached = pos;
    rng_init(&s->rng, seed, id, id_len, (uint64_t)sample);
    s->n = 0;
    tok_stream_init(&s->dec, tok, true);
    sb_clear(&s->text);
    s->text_end = 0;
    s->finish = FINISH_NONE;
}

void seq_free(rollout_seq *s) {
    free(s->tokens);
    free(s->logprobs);
    free(s->mask);
    free(s->routing);
    cJSON_Delete(s->turns);
    sb_free(&s->text);
    memset(s, 0, sizeof *s);
}

/* Where the first stop string starts in text, searching only where a match
 * could involve the newest bytes (from `from` minus the longest stop). */
static bool find_stop(const strbuf *text, size_t from, const string_list *stops, size_t *at) {
    bool found = false;
    for (int i = 0; i < stops->n; i++) {
        size_t n = strlen(stops->items[i]);
        if (!n || text->len < n) continue;
        size_t start = from > n ? from - n : 0;
        const char *hit = memmem(text->data + start, text->len - start, stops->items[i], n);
        if (hit && (!found || (size_t)(hit - text->data) < *at)) {
            *at = (size_t)(hit - text->data);
            found = true;
        }
    }
    return found;
}

static void grow(rollout_seq *s, size_t extra) {
    if ((size_t)s->n + extra <= (size_t)s->cap) return;
    while ((size_t)s->n + extra > (size_t)s->cap) s->cap = s->cap ? 2 * s->cap : 64;
    s->tokens = xrealloc(s->tokens, (size_t)s->cap * sizeof *s->tokens);
    s->logprobs = xrealloc(s->logprobs, (size_t)s->cap * sizeof *s->logprobs);
    if (s->multi_turn) s->mask = xrealloc(s->mask, (size_t)s->cap * sizeof *s->mask);
    if (s->route_bytes) s->routing = xrealloc(s->routing, (size_t)s->cap * s->route_bytes);
}

void seq_append_env(rollout_seq *s, const tokenizer *tok, const int32_t *ids, size_t n) {
    grow(s, n);
    for (size_t i = 0; i < n; i++) {
        s->tokens[s->n] = ids[i];
        s->logprobs[s->n] = NAN;
        s->mask[s->n] = 0;
        s->n++;
    }
    s->pos += (int)n;
    s->turn++;
    s->turn_start = s->n;
    tok_stream_init(&s->dec, tok, true);
    sb_clear(&s->text);
    s->text_end = 0;
    s->finish = FINISH_NONE;
}

void seq_push(rollout_seq *s, const model_text *mt, int32_t token, float logprob, const string_list *stops,
              int max_new, int max_total, int limit_pos) {
    grow(s, 1);
    s->tokens[s->n] = token;
    s->logprobs[s->n] = logprob;
    if (s->multi_turn) s->mask[s->n] = 1;
    s->n++;
    s->pos++;
    size_t before = s->text.len;
    tok_stream_put(&s->dec, token, &s->text);
    size_t at = 0;
    bool cut = false;
    if (model_text_is_eos(mt, token)) {
        s->finish = FINISH_STOP;
    } else if (stops->n && find_stop(&s->text, before, stops, &at)) {
        s->finish = FINISH_STOP;
        cut = true;
    } else if ((max_total > 0 && s->n >= max_total) || s->pos >= limit_pos) {
        s->finish = FINISH_LENGTH;
        s->bound_hit = true;
    } else if (s->n - s->turn_start >= max_new) {
        s->finish = FINISH_LENGTH;
    }
    if (s->finish == FINISH_NONE) return;
    /* a partial UTF-8 character left at the end becomes U+FFFD, as HF decodes it */
    tok_stream_finish(&s->dec, &s->text);
    s->text_end = cut ? at : s->text.len;
}

void seq_end(rollout_seq *s, finish_reason why) {
    s->finish = why;
    tok_stream_finish(&s->dec, &s->text);
    s->text_end = s->text.len;
}
