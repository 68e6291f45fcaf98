#include "seqs.h"

#include <stdlib.h>
#include <string.h>

#include "../util/err.h"

void seq_start(rollout_seq *s, const tokenizer *tok, int sample, int pos, uint64_t seed,
               const char *id, size_t id_len) {
    s->sample = sample;
    s->pos = pos;
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

void seq_push(rollout_seq *s, const model_text *mt, int32_t token, float logprob, const string_list *stops,
              int max_new, int limit_pos) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->tokens = xrealloc(s->tokens, (size_t)s->cap * sizeof *s->tokens);
        s->logprobs = xrealloc(s->logprobs, (size_t)s->cap * sizeof *s->logprobs);
    }
    s->tokens[s->n] = token;
    s->logprobs[s->n] = logprob;
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
    } else if (s->n >= max_new || s->pos >= limit_pos) {
        s->finish = FINISH_LENGTH;
    }
    if (s->finish == FINISH_NONE) return;
    /* a partial UTF-8 character left at the end becomes U+FFFD, as HF decodes it */
    tok_stream_finish(&s->dec, &s->text);
    s->text_end = cut ? at : s->text.len;
}
