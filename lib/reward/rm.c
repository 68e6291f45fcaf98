/* The `rm` reward: a reward model, a Hugging Face sequence classifier
 * (LlamaForSequenceClassification, Qwen2ForSequenceClassification,
 * Qwen3ForSequenceClassification) run by lib/model, on the CPU or (--rm-device)
 * a GPU: there the decoder runs on the device and the final-normed states of
 * the rows read come back for the one-label head on the host.
 *
 * What it scores, as TRL and transformers do for a reward model: the
 * record's `messages` with the completion appended as the assistant's turn
 * (a multi-turn record's `turns` appended instead: the whole episode),
 * rendered with the REWARD MODEL's chat template (no generation prompt) and
 * encoded with the reward model's tokenizer (special tokens in the text
 * matched, none added: apply_chat_template(tokenize=True)). The value is the
 * score head applied to the final-normed hidden state of the last token that
 * is not the config's pad_token_id (the last token when there is none), as
 * transformers' *ForSequenceClassification reads it. Only num_labels 1 is
 * taken: a head of several labels has no single reward.
 *
 * The model runs through lib/runner (as rollout's does): rm_batch sequences
 * go through the model in one forward call, packed
 * without padding (each its own KV-cache slot), so memory grows with
 * rm_batch times their length. A conversation longer than the model's
 * context is an error naming the record, never silently cut. */
#include <stdlib.h>
#include <string.h>

#include "../chat/chat.h"
#include "../ops/blas.h"
#include "../runner/device.h"
#include "../runner/weights.h"
#include "../runner/runner.h"
#include "../util/clock.h"
#include "reward.h"

typedef struct {
    int32_t *ids;
    size_t n;
} rm_seq;

typedef struct {
    const char *path;
    const backend *be; /* the device; NULL: the CPU */
    model_runner run;
    chat_template tmpl;
    int batch;
    float *hidden;  /* [batch, dim] */
    float *dhidden; /* [max rows, dim] in the device's memory (be only) */
    size_t dhidden_rows;
    rm_seq *seqs;  /* [batch] */
    long long sequences, tokens;
    double seconds;
} rm_fn;

/* What follows the prompt: a multi-turn record's `turns` (every message
 * the episode appended, in order), else the completion as the assistant's
 * turn. */
static int append_turns(const reward_item *it, cJSON *messages, gerr *e) {
    const record *rec = it->rec;
    cJSON *turns = NULL;
    if (record_get_json(rec, "turns", false, &turns, e)) return e->code;
    if (turns && !cJSON_IsNull(turns)) {
        if (!cJSON_IsArray(turns)) {
            cJSON_Delete(turns);
            return record_field_error(rec, "turns", "an array of messages", e);
        }
        cJSON *m;
        while ((m = cJSON_DetachItemFromArray(turns, 0))) {
            if (!cJSON_AddItemToArray(messages, m)) {
                cJSON_Delete(m), cJSON_Delete(turns);
                return gerr_set(e, EX_SOFTWARE, "out of memory");
            }
        }
        cJSON_Delete(turns);
        return 0;
    }
    cJSON_Delete(turns);
    if (memchr(it->completion, 0, it->completion_len))
        return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                       "field \"completion\": contains a NUL character, which a chat template cannot carry");
    char *content = xstrndup(it->completion, it->completion_len);
    cJSON *turn = cJSON_CreateObject();
    if (!turn || !cJSON_AddStringToObject(turn, "role", "assistant") ||
        !cJSON_AddStringToObject(turn, "content", content) || !cJSON_AddItemToArray(messages, turn)) {
        cJSON_Delete(turn), free(content); /* turn is not in messages */
        return gerr_set(e, EX_SOFTWARE, "out of memory");
    }
    free(content);
    return 0;
}

/* The token ids the reward model reads for one record. */
static int tokens_of(const rm_fn *r, const reward_item *it, rm_seq *out, gerr *e) {
    const record *rec = it->rec;
    out->n = 0;
    cJSON *messages = NULL;
    int rc = record_get_messages(rec, &messages, e);
    if (rc) return rc;
    if ((rc = append_turns(it, messages, e))) {
        cJSON_Delete(messages);
        return rc;
    }
    strbuf text = {0};
    rc = chat_render(&r->tmpl, messages, false, &text, e);
    cJSON_Delete(messages);
    if (rc) {
        sb_free(&text);
        return gerr_at(e, rc, rec->file, rec->line, "%s", e->msg);
    }
    free(out->ids);
    out->ids = NULL;
    rc = tok_encode(r->run.mt.tok, text.data ? text.data : "", text.len, true, &out->ids, &out->n, e);
    sb_free(&text);
    if (rc) return gerr_at(e, rc, rec->file, rec->line, "field \"messages\": %s", e->msg);
    /* the hidden state at position i depends on tokens 0..i only, so reading
     * the last non-pad token is reading the sequence without its trailing pads
     * (all pads: transformers reads position 0) */
    while (out->n > 1 && out->ids[out->n - 1] == r->run.m.cfg.pad_id) out->n--;
    if (out->n == 0)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                       "field \"completion\": the conversation and completion render to no tokens");
    if (out->n > (size_t)r->run.m.cfg.max_seq_len)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                       "field \"completion\": the conversation with this completion is %zu tokens, longer than the "
                       "reward model's context of %d",
                       out->n, r->run.m.cfg.max_seq_len);
    return 0;
}

/* The n sequences in r->seqs, packed into one forward call; out[i] = the
 * score of sequence i, the head's dot product summed in double. */
static int score_group(rm_fn *r, int n, double *out, gerr *e) {
    size_t rows = 0;
    int longest = 0;
    for (int i = 0; i < n; i++) {
        rows += r->seqs[i].n;
        if ((int)r->seqs[i].n > longest) longest = (int)r->seqs[i].n;
    }
    if (rows > (1u << 30)) return gerr_set(e, EX_USAGE, "--rm-batch: %zu tokens in one forward call", rows);
    int rc = runner_reserve(&r->run, r->batch, longest, rows, e);
    if (rc) return rc;
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (size_t t = 0; t < r->seqs[i].n; t++, k++) {
            r->run.rows.seq[k] = i;
            r->run.rows.pos[k] = (int)t;
            r->run.rows.tok[k] = r->seqs[i].ids[t];
            r->run.rows.want[k] = t + 1 == r->seqs[i].n;
        }
    const int d = r->run.m.cfg.dim;
    if (r->be && r->dhidden_rows < (size_t)n) { /* the hidden states on the device, grown as batches come */
        void *p = NULL;
        if ((rc = r->be->mem_alloc(&p, (size_t)r->batch * d * sizeof(float), e))) return rc;
        r->be->mem_free(r->dhidden);
        r->dhidden = p;
        r->dhidden_rows = (size_t)r->batch;
    }
    int got = model_forward_hidden(&r->run.m, &r->run.cache, (int)rows, r->run.rows.seq, r->run.rows.pos, r->run.rows.tok, r->run.rows.want,
                                   r->be ? r->dhidden : r->hidden, &r->run.scratch);
    if (got != n) return gerr_set(e, EX_SOFTWARE, "rm: %d hidden states for %d sequences", got, n);
    if (r->be && (rc = r->be->mem_download(r->hidden, r->dhidden, (size_t)n * d * sizeof(float), e))) return rc;
    for (int i = 0; i < n; i++) {
        const float *h = r->hidden + (size_t)i * d;
        double v = 0;
        for (int j = 0; j < d; j++) v += (double)h[j] * r->run.m.w.score[j];
        out[i] = v;
    }
    r->sequences += n;
    r->tokens += (long long)rows;
    return 0;
}

static int rm_score(void *self, const reward_item *items, size_t n, double *out, gerr *e) {
    rm_fn *r = self;
    double t0 = now_seconds();
    int rc = 0;
    for (size_t i0 = 0; i0 < n && !rc; i0 += (size_t)r->batch) {
        int m = n - i0 < (size_t)r->batch ? (int)(n - i0) : r->batch;
        for (int j = 0; j < m && !rc; j++) rc = tokens_of(r, &items[i0 + j], &r->seqs[j], e);
        if (!rc) rc = score_group(r, m, out + i0, e);
    }
    r->seconds += now_seconds() - t0;
    return rc;
}

static void rm_stats(void *self, cJSON *obj) {
    rm_fn *r = self;
    cJSON *o = cJSON_AddObjectToObject(obj, "rm");
    if (!o) return;
    cJSON_AddNumberToObject(o, "sequences", (double)r->sequences);
    cJSON_AddNumberToObject(o, "tokens", (double)r->tokens);
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
}

static void rm_close(void *self) {
    rm_fn *r = self;
    if (!r) return;
    if (r->seqs)
        for (int i = 0; i < r->batch; i++) free(r->seqs[i].ids);
    free(r->seqs);
    free(r->hidden);
    if (r->dhidden) r->be->mem_free(r->dhidden);
    chat_template_free(&r->tmpl);
    runner_close(&r->run);
    device_release(r->be);
    free(r);
}

/* The reward model's chat template; its absence or an unknown one names
 * grpo-reward's flag rather than the other tools'. */
static int open_template(rm_fn *r, const char *choice, gerr *e) {
    if (!choice) choice = "auto";
    int rc = model_text_template(&r->run.mt, &(chat_choice){.family = choice}, &r->tmpl, e);
    if (!rc || strcmp(choice, "auto")) return rc;
    return gerr_set(e, rc, "%s: the reward model's chat template is %s; choose one with --rm-chat-template "
                           "chatml|llama3|harmony|raw",
                    r->run.mt.template_source,
                    r->run.mt.chat_template ? "not recognised (neither ChatML, Llama 3 nor harmony)" : "missing");
}

static int open_model(rm_fn *r, const reward_opts *p, gerr *e) {
    weight_choice fmt = {.fmt = WEIGHTS_F32};
    int rc = weights_select("--rm-weights", p->rm_weights ? p->rm_weights : "f32", &fmt, e);
    if (!rc) rc = device_select("--rm-device", p->rm_device ? p->rm_device : "cpu", &r->be, e);
    if (!rc) rc = runner_open_on(&r->run, r->path, true, r->be, fmt, e);
    if (rc) return rc;
    if (r->run.m.cfg.num_labels != 1)
        return gerr_set(e, EX_DATAERR, "%s: num_labels is %d; --fn rm reads a reward model with one label (one score)",
                        r->path, r->run.m.cfg.num_labels);
    return open_template(r, p->rm_chat_template, e);
}

int reward_open_rm(reward_fn *fn, const reward_opts *p, gerr *e) {
    if (!p->rm_model || !*p->rm_model)
        return gerr_set(e, EX_USAGE, "--fn rm needs --rm-model M (a reward model's Hugging Face directory)");
    if (p->rm_batch < 1 || p->rm_batch > 4096)
        return gerr_set(e, EX_USAGE, "--rm-batch: expected 1 to 4096, got %lld", p->rm_batch);
    if (p->threads > 0) blas_set_threads((int)p->threads);
    rm_fn *r = xcalloc(1, sizeof *r);
    r->path = p->rm_model;
    r->batch = (int)p->rm_batch;
    int rc = open_model(r, p, e);
    if (rc) {
        rm_close(r);
        return rc;
    }
    r->seqs = xcalloc((size_t)r->batch, sizeof *r->seqs);
    r->hidden = xmalloc((size_t)r->batch * (size_t)r->run.m.cfg.dim * sizeof *r->hidden);
    fn->self = r;
    fn->score = rm_score;
    fn->stats = rm_stats;
    fn->close = rm_close;
    return 0;
}
