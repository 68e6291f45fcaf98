#include "rollout.h"

#include <cblas.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../chat/chat.h"
#include "../io/jsonl.h"
#include "../model/model.h"
#include "../tok/model_text.h"
#include "../util/progress.h"
#include "seqs.h"

void rollout_opts_default(rollout_opts *o) {
    memset(o, 0, sizeof *o);
    o->k = 8;
    o->max_new_tokens = 256;
    o->sampling = (sample_params){.temperature = -1, .top_k = 0, .top_p = 1, .min_p = 0};
    o->batch = 32;
    o->device = "cpu";
    o->chat_template = "auto";
    o->shard.count = 1;
}

typedef struct {
    record rec;
    strbuf id;
    int32_t *tokens;
    size_t n_tokens;
    bool had_tokens; /* prompt_tokens came with the record */
} prompt_slot;

typedef struct {
    const rollout_opts *o;
    model m;
    model_text mt;
    bool have_template;
    chat_template tmpl;
    sample_params sp;
    char *policy;
    kv_cache cache;
    model_scratch scratch;
    bool cache_ready, scratch_ready;
    sampler smp;
    float *logits;       /* [max(n_seqs, prompts) , vocab] */
    prompt_slot *prompts;
    rollout_seq *seqs;
    int max_prompts, n_seqs;
    /* one forward call's rows */
    int *row_seq, *row_pos;
    int32_t *row_tok;
    bool *row_want;
    int rows_cap;
} rollout;

static void ensure_rows(rollout *r, int n) {
    if (n <= r->rows_cap) return;
    r->rows_cap = n;
    r->row_seq = xrealloc(r->row_seq, (size_t)n * sizeof *r->row_seq);
    r->row_pos = xrealloc(r->row_pos, (size_t)n * sizeof *r->row_pos);
    r->row_tok = xrealloc(r->row_tok, (size_t)n * sizeof *r->row_tok);
    r->row_want = xrealloc(r->row_want, (size_t)n * sizeof *r->row_want);
}

/* The prompt's token ids: its prompt_tokens, or its messages rendered with
 * the chat template and encoded. */
static int prompt_tokens_of(rollout *r, prompt_slot *p, gerr *e) {
    const record *rec = &p->rec;
    int vocab = r->m.cfg.vocab_size;
    free(p->tokens);
    p->tokens = NULL;
    p->n_tokens = 0;
    p->had_tokens = record_has(rec, "prompt_tokens");
    if (p->had_tokens) {
        cJSON *arr = NULL;
        int rc = record_get_json(rec, "prompt_tokens", true, &arr, e);
        if (rc) return rc;
        if (!cJSON_IsArray(arr)) {
            cJSON_Delete(arr);
            return record_field_error(rec, "prompt_tokens", "an array of token ids", e);
        }
        int n = cJSON_GetArraySize(arr);
        p->tokens = xmalloc((size_t)(n ? n : 1) * sizeof *p->tokens);
        const cJSON *item;
        cJSON_ArrayForEach(item, arr) {
            double v = cJSON_IsNumber(item) ? item->valuedouble : -1;
            if (v < 0 || v >= vocab || v != (int32_t)v) {
                cJSON_Delete(arr);
                return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                               "field \"prompt_tokens\": element %zu: expected a token id in [0, %d)", p->n_tokens,
                               vocab);
            }
            p->tokens[p->n_tokens++] = (int32_t)v;
        }
        cJSON_Delete(arr);
    } else {
        if (!r->have_template) {
            int rc = strcmp(r->o->chat_template, "auto")
                         ? 0
                         : chat_template_detect(r->mt.chat_template, r->mt.template_source, &r->tmpl, e);
            if (rc) return rc;
            if (strcmp(r->o->chat_template, "auto")) {
                chat_family f;
                if ((rc = chat_family_parse(r->o->chat_template, &f, e))) return rc;
                chat_template_force(f, r->mt.chat_template, &r->tmpl);
            }
            r->have_template = true;
        }
        cJSON *messages = NULL;
        int rc = record_get_json(rec, "messages", true, &messages, e);
        if (rc) return rc;
        strbuf text = {0};
        rc = chat_render(&r->tmpl, messages, r->tmpl.family != CHAT_RAW, &text, e);
        cJSON_Delete(messages);
        if (!rc) rc = tok_encode(r->mt.tok, text.data ? text.data : "", text.len, true, &p->tokens, &p->n_tokens, e);
        sb_free(&text);
        if (rc) return gerr_at(e, rc, rec->file, rec->line, "field \"messages\": %s", e->msg);
    }
    if (p->n_tokens == 0)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line, "field \"prompt_tokens\": the prompt has no tokens");
    if ((int)p->n_tokens >= r->m.cfg.max_seq_len)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                       "field \"prompt_tokens\": %zu tokens leave no room in the model's context of %d", p->n_tokens,
                       r->m.cfg.max_seq_len);
    return 0;
}

/* Makes the KV cache and scratch big enough for this batch. */
static int ensure_buffers(rollout *r, int n_prompts, int longest_prompt, gerr *e) {
    int max_len = longest_prompt + (int)r->o->max_new_tokens;
    if (max_len > r->m.cfg.max_seq_len) max_len = r->m.cfg.max_seq_len;
    int n_seqs = n_prompts * (int)r->o->k;
    if (!r->cache_ready || r->cache.max_len < max_len || r->cache.n_seqs < n_seqs) {
        if (r->cache_ready) kv_cache_free(&r->cache);
        r->cache_ready = false;
        int rc = kv_cache_init(&r->cache, &r->m.cfg, n_seqs, max_len, e);
        if (rc) return rc;
        r->cache_ready = true;
    }
    int rows = n_seqs > longest_prompt ? n_seqs : longest_prompt;
    if (!r->scratch_ready || r->scratch.max_rows < rows || r->scratch.max_len < max_len) {
        if (r->scratch_ready) model_scratch_free(&r->scratch);
        r->scratch_ready = false;
        int rc = model_scratch_init(&r->scratch, &r->m.cfg, rows, max_len, e);
        if (rc) return rc;
        r->scratch_ready = true;
    }
    ensure_rows(r, rows);
    return 0;
}

static void write_int_array(strbuf *b, const int32_t *v, size_t n) {
    sb_putc(b, '[');
    for (size_t i = 0; i < n; i++) sb_printf(b, i ? ",%d" : "%d", v[i]);
    sb_putc(b, ']');
}

static int write_sample(rollout *r, jsonl_writer *w, const prompt_slot *p, const rollout_seq *s, gerr *e) {
    record out;
    record_init(&out);
    record_reset(&out, p->rec.file, p->rec.line);
    for (size_t i = 0; i < p->rec.n; i++) record_append_field(&out, &p->rec.fields[i]);
    strbuf b = {0};
    record_set_int(&out, "sample", s->sample);
    if (!p->had_tokens) {
        write_int_array(&b, p->tokens, p->n_tokens);
        record_set_raw(&out, "prompt_tokens", b.data, b.len);
    }
    sb_clear(&b);
    write_int_array(&b, s->tokens, (size_t)s->n);
    record_set_raw(&out, "completion_tokens", b.data, b.len);
    record_set_string(&out, "completion", s->text.data ? s->text.data : "", s->text_end);
    sb_clear(&b);
    sb_putc(&b, '[');
    for (int i = 0; i < s->n; i++) {
        if (i) sb_putc(&b, ',');
        sb_json_float(&b, s->logprobs[i]);
    }
    sb_putc(&b, ']');
    record_set_raw(&out, "logprobs", b.data, b.len);
    record_set_number(&out, "temperature", r->sp.temperature);
    record_set_string(&out, "finish_reason", s->finish == FINISH_STOP ? "stop" : "length",
                      s->finish == FINISH_STOP ? 4 : 6);
    record_set_string(&out, "policy", r->policy, strlen(r->policy));
    int rc = jsonl_write(w, &out, e);
    sb_free(&b);
    record_free(&out);
    return rc;
}

/* Generates K completions for each of the n prompts and writes them. */
static int run_batch(rollout *r, int n, jsonl_writer *w, gerr *e) {
    const int K = (int)r->o->k, vocab = r->m.cfg.vocab_size;
    int longest = 0;
    for (int p = 0; p < n; p++)
        if ((int)r->prompts[p].n_tokens > longest) longest = (int)r->prompts[p].n_tokens;
    int rc = ensure_buffers(r, n, longest, e);
    if (rc) return rc;
    int limit = r->cache.max_len < r->m.cfg.max_seq_len ? r->cache.max_len : r->m.cfg.max_seq_len;

    /* prefill once per prompt, then share it with the K sample slots */
    for (int p = 0; p < n; p++) {
        prompt_slot *ps = &r->prompts[p];
        int len = (int)ps->n_tokens;
        for (int i = 0; i < len; i++) {
            r->row_seq[i] = p * K;
            r->row_pos[i] = i;
            r->row_tok[i] = ps->tokens[i];
            r->row_want[i] = i == len - 1;
        }
        model_forward(&r->m, &r->cache, len, r->row_seq, r->row_pos, r->row_tok, r->row_want,
                      r->logits + (size_t)p * vocab, &r->scratch);
        for (int k = 1; k < K; k++) kv_cache_copy_prefix(&r->cache, p * K + k, p * K, len);
        for (int k = 0; k < K; k++) {
            rollout_seq *s = &r->seqs[p * K + k];
            seq_start(s, r->mt.tok, p, k, len, (uint64_t)r->o->seed, ps->id.data, ps->id.len);
            float lp;
            int32_t t = sample_token(&r->smp, r->logits + (size_t)p * vocab, &r->sp, &s->rng, &lp);
            seq_push(s, &r->mt, t, lp, &r->o->stops, (int)r->o->max_new_tokens, limit);
        }
    }
    /* decode: one row per unfinished sequence */
    for (;;) {
        int rows = 0;
        for (int i = 0; i < n * K; i++) {
            rollout_seq *s = &r->seqs[i];
            if (s->finish != FINISH_NONE) continue;
            r->row_seq[rows] = i;
            r->row_pos[rows] = s->pos - 1;
            r->row_tok[rows] = s->tokens[s->n - 1];
            rows++;
        }
        if (!rows) break;
        model_forward(&r->m, &r->cache, rows, r->row_seq, r->row_pos, r->row_tok, NULL, r->logits, &r->scratch);
        for (int j = 0; j < rows; j++) {
            rollout_seq *s = &r->seqs[r->row_seq[j]];
            float lp;
            int32_t t = sample_token(&r->smp, r->logits + (size_t)j * vocab, &r->sp, &s->rng, &lp);
            seq_push(s, &r->mt, t, lp, &r->o->stops, (int)r->o->max_new_tokens, limit);
        }
    }
    for (int p = 0; p < n; p++)
        for (int k = 0; k < K; k++)
            if ((rc = write_sample(r, w, &r->prompts[p], &r->seqs[p * K + k], e))) return rc;
    return 0;
}

/* The policy id: the checkpoint directory's or the file's name. */
static char *policy_name(const rollout_opts *o) {
    if (o->policy) return xstrdup(o->policy);
    char *copy = xstrdup(o->model);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
    char *name = xstrdup(basename(copy));
    free(copy);
    return name;
}

static int setup(rollout *r, const rollout_opts *o, gerr *e) {
    memset(r, 0, sizeof *r);
    r->o = o;
    if (strcmp(o->device, "cpu"))
        return gerr_set(e, EX_USAGE, "--device %s: this build has the CPU path only", o->device);
    if (o->threads > 0) {
#ifdef _OPENMP
        omp_set_num_threads((int)o->threads);
#endif
        openblas_set_num_threads((int)o->threads);
    }
    int rc = model_text_load(o->model, &r->mt, e);
    if (rc) return rc;
    if ((rc = model_load(&r->m, o->model, e))) {
        model_text_free(&r->mt);
        return rc;
    }
    if ((int)tok_vocab_size(r->mt.tok) > r->m.cfg.vocab_size) {
        rc = gerr_set(e, EX_DATAERR, "%s: the tokenizer has %zu tokens but the model only %d embeddings", o->model,
                      tok_vocab_size(r->mt.tok), r->m.cfg.vocab_size);
        model_free(&r->m);
        model_text_free(&r->mt);
        return rc;
    }
    r->sp = o->sampling;
    if (r->sp.temperature < 0) r->sp.temperature = r->mt.temperature >= 0 ? r->mt.temperature : 1.0;
    if (!o->top_p_given && r->mt.top_p > 0 && r->mt.top_p <= 1) r->sp.top_p = r->mt.top_p;
    if (!o->top_k_given && r->mt.top_k > 0) r->sp.top_k = r->mt.top_k;
    r->policy = policy_name(o);
    r->max_prompts = o->batch / o->k > 1 ? (int)(o->batch / o->k) : 1;
    r->n_seqs = r->max_prompts * (int)o->k;
    r->prompts = xcalloc((size_t)r->max_prompts, sizeof *r->prompts);
    for (int i = 0; i < r->max_prompts; i++) record_init(&r->prompts[i].rec);
    r->seqs = xcalloc((size_t)r->n_seqs, sizeof *r->seqs);
    int logit_rows = r->n_seqs > r->max_prompts ? r->n_seqs : r->max_prompts;
    r->logits = xmalloc((size_t)logit_rows * (size_t)r->m.cfg.vocab_size * sizeof *r->logits);
    sampler_init(&r->smp, r->m.cfg.vocab_size);
    return 0;
}

static void teardown(rollout *r) {
    for (int i = 0; i < r->max_prompts; i++) {
        record_free(&r->prompts[i].rec);
        sb_free(&r->prompts[i].id);
        free(r->prompts[i].tokens);
    }
    for (int i = 0; i < r->n_seqs; i++) seq_free(&r->seqs[i]);
    free(r->prompts);
    free(r->seqs);
    free(r->logits);
    free(r->row_seq);
    free(r->row_pos);
    free(r->row_tok);
    free(r->row_want);
    free(r->policy);
    if (r->smp.prob) sampler_free(&r->smp);
    if (r->cache_ready) kv_cache_free(&r->cache);
    if (r->scratch_ready) model_scratch_free(&r->scratch);
    if (r->have_template) chat_template_free(&r->tmpl);
    model_free(&r->m);
    model_text_free(&r->mt);
}

int rollout_run(const rollout_opts *o, gerr *e) {
    rollout r;
    int rc = setup(&r, o, e);
    if (rc) return rc;
    jsonl_reader rd;
    jsonl_writer w;
    bool reader_open = false, writer_open = false;
    if ((rc = jsonl_open(&rd, o->in, e))) goto done;
    reader_open = true;
    if ((rc = jsonl_writer_open(&w, o->out, e))) goto done;
    writer_open = true;
    progress pg;
    progress_start(&pg, "grpo-rollout", "prompts", 0, o->progress);
    long long done_prompts = 0;
    for (;;) {
        int n = 0, got = 1;
        while (n < r.max_prompts) {
            prompt_slot *p = &r.prompts[n];
            got = jsonl_next(&rd, &p->rec, e);
            if (got < 0) {
                rc = e->code;
                goto done;
            }
            if (got == 0) break;
            if ((rc = record_get_string(&p->rec, "id", true, &p->id, NULL, e))) goto done;
            if (!shard_contains(&o->shard, p->id.data, p->id.len)) continue;
            if ((rc = prompt_tokens_of(&r, p, e))) goto done;
            n++;
        }
        if (n && (rc = run_batch(&r, n, &w, e))) goto done;
        done_prompts += n;
        progress_update(&pg, done_prompts);
        if (got == 0) break;
    }
    progress_finish(&pg);
    rc = jsonl_writer_commit(&w, e);
    writer_open = false;
done:
    if (writer_open) jsonl_writer_abort(&w);
    if (reader_open) jsonl_close(&rd);
    teardown(&r);
    return rc;
}
