#include "rollout.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../ckpt/ckpt_paths.h"
#include "../cuda/cuda.h"
#include "../io/mapped.h"
#include "../ops/blas.h"
#include "../runner/device.h"
#include "../io/sampler_field.h"
#include "../runner/weights.h"
#include "../util/clock.h"
#include "../util/progress.h"
#include "rollout_internal.h"

void rollout_opts_default(rollout_opts *o) {
    memset(o, 0, sizeof *o);
    o->k = 8;
    o->max_new_tokens = 256;
    o->sampling = (sample_opts){.temperature = -1, .top_k = 0, .top_p = 1, .min_p = 0};
    o->batch = 32;
    o->device = device_default();
    o->weights = weights_default();
    o->policy_step = -1;
    o->kv_cache = "auto";
    o->routing_record = "on";
    o->chat_template = "auto";
    o->shard.count = 1;
    o->max_turns = 4;
    o->env_timeout = 60;
    o->server_kind = "auto";
    o->server_logprobs = "auto";
    o->server_concurrency = 64;
    o->server_timeout = 600;
    o->server_retries = 6;
    o->server_lora_name = "grpo-policy";
}

/* The chat template, made on first use. */
static int need_template(rollout *r, gerr *e) {
    if (r->have_template) return 0;
    const rollout_opts *o = r->o;
    chat_choice c = {.family = o->chat_template, .reasoning = o->reasoning_effort, .date = o->chat_date};
    int rc = model_text_template(&r->run.mt, &c, &r->tmpl, e);
    if (rc) return rc;
    r->have_template = true;
    if (r->tools && (rc = chat_set_tools(&r->tmpl, r->tools, e))) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        return gerr_set(e, rc, "--tools %s: %s", r->o->tools, why);
    }
    return 0;
}

/* The prompt's token ids: its prompt_tokens, or its messages rendered with
 * the chat template and encoded. */
static int prompt_tokens_of(rollout *r, prompt_slot *p, gerr *e) {
    const record *rec = &p->rec;
    int vocab = r->vocab;
    free(p->tokens);
    p->tokens = NULL;
    p->n_tokens = 0;
    p->had_tokens = record_has(rec, "prompt_tokens");
    if (p->had_tokens) {
        int rc = record_get_token_ids(rec, "prompt_tokens", vocab, &p->tokens, &p->n_tokens, e);
        if (rc) return rc;
    } else {
        int rc = need_template(r, e);
        if (rc) return rc;
        rc = model_text_prompt_tokens(&r->run.mt, &r->tmpl, rec, &p->tokens, &p->n_tokens, e);
        if (rc) return rc;
    }
    if (p->n_tokens == 0)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line, "field \"prompt_tokens\": the prompt has no tokens");
    if ((int)p->n_tokens >= r->ctx_len)
        return gerr_at(e, EX_DATAERR, rec->file, rec->line,
                       "field \"prompt_tokens\": %zu tokens leave no room in the %s context of %d", p->n_tokens,
                       r->srv ? "server's" : "model's", r->ctx_len);
    return 0;
}

static int write_sample(rollout *r, jsonl_writer *w, const prompt_slot *p, const rollout_seq *s, gerr *e) {
    record out;
    record_init(&out);
    record_reset(&out, p->rec.file, p->rec.line);
    for (size_t i = 0; i < p->rec.n; i++) record_append_field(&out, &p->rec.fields[i]);
    strbuf b = {0};
    record_set_int(&out, "sample", s->sample);
    if (!p->had_tokens) {
        sb_json_int_array(&b, p->tokens, p->n_tokens);
        record_set_raw(&out, "prompt_tokens", b.data, b.len);
    }
    sb_clear(&b);
    sb_json_int_array(&b, s->tokens, (size_t)s->n);
    record_set_raw(&out, "completion_tokens", b.data, b.len);
    if (s->multi_turn) {
        sb_clear(&b);
        sb_putc(&b, '[');
        for (int i = 0; i < s->n; i++) sb_puts(&b, i ? (s->mask[i] ? ",1" : ",0") : (s->mask[i] ? "1" : "0"));
        sb_putc(&b, ']');
        record_set_raw(&out, "completion_mask", b.data, b.len);
    }
    if (r->harmony) { /* the answer is the final channel's; the reasoning is kept beside it */
        harmony_turn ht;
        rollout_harmony_turn(r, s, &ht);
        record_set_string(&out, "completion", ht.final.data, ht.final.len);
        record_set_string(&out, "thinking", ht.thinking.data, ht.thinking.len);
        harmony_turn_free(&ht);
    } else {
        record_set_string(&out, "completion", s->text.data ? s->text.data : "", s->text_end);
    }
    sb_clear(&b);
    sb_putc(&b, '[');
    for (int i = 0; i < s->n; i++) {
        if (i) sb_putc(&b, ',');
        if (s->multi_turn && !s->mask[i]) sb_puts(&b, "null"); /* the environment's tokens were not sampled */
        else sb_json_float(&b, s->logprobs[i]);
    }
    sb_putc(&b, ']');
    record_set_raw(&out, "logprobs", b.data, b.len);
    record_set_number(&out, "temperature", r->sp.temperature);
    static const char *const reasons[] = {"length", "stop", "length", "env", "turns"};
    record_set_string(&out, "finish_reason", reasons[s->finish], strlen(reasons[s->finish]));
    if (s->multi_turn) episode_write_fields(r, s, &out);
    record_set_string(&out, "policy", r->policy, strlen(r->policy));
    record_set_int(&out, "policy_step", r->policy_step);
    record_set_raw(&out, "sampler", r->sampler.data, r->sampler.len);
    if (r->route_bytes) { /* every position fed: the prompt's, the completion's but its last */
        size_t rb = r->route_bytes, np = p->n_tokens, nc = (size_t)s->n - 1;
        uint8_t *ids = xmalloc((np + nc) * rb);
        memcpy(ids, p->routing, np * rb);
        memcpy(ids + np * rb, s->routing, nc * rb);
        sb_clear(&b);
        routing_field_write(&b, r->route, ids, np + nc);
        record_set_raw(&out, "routing", b.data, b.len);
        free(ids);
    }
    int rc = jsonl_write(w, &out, e);
    sb_free(&b);
    record_free(&out);
    return rc;
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

int rollout_reserve(rollout *r, int positions, int rows, gerr *e) {
    if (r->srv) return 0; /* the server holds the caches */
    if (rows < r->n_slots) rows = r->n_slots;
    return runner_reserve(&r->run, r->n_slots, positions, (size_t)rows, e);
}

static int free_slots(const rollout *r) {
    int n = 0;
    for (int i = 0; i < r->n_slots; i++) n += r->slot_seq[i] == NULL;
    return n;
}

static prompt_slot *take_prompt_slot(rollout *r) {
    if (r->n_spare) return r->spare[--r->n_spare];
    prompt_slot *p = xcalloc(1, sizeof *p);
    record_init(&p->rec);
    p->samples = xcalloc((size_t)r->o->k, sizeof *p->samples);
    return p;
}

static void free_prompt_slot(rollout *r, prompt_slot *p) {
    record_free(&p->rec);
    sb_free(&p->id);
    free(p->tokens);
    free(p->routing);
    cJSON_Delete(p->messages);
    for (int k = 0; k < (int)r->o->k; k++) seq_free(&p->samples[k]);
    free(p->samples);
    free(p);
}

/* Keeps a finished prompt slot for the next prompt. Prompts that finished
 * behind a slow one can pile up in the fifo beyond the slots' count: the
 * spares are capped there and the rest freed. */
static void recycle(rollout *r, prompt_slot *p) {
    if (r->n_spare < r->n_slots + 1)
        r->spare[r->n_spare++] = p;
    else
        free_prompt_slot(r, p);
}

static void fifo_push(rollout *r, prompt_slot *p) {
    if (r->n_fifo == r->fifo_cap) {
        int cap = r->fifo_cap ? 2 * r->fifo_cap : 16;
        prompt_slot **q = xmalloc((size_t)cap * sizeof *q);
        for (int i = 0; i < r->n_fifo; i++) q[i] = r->fifo[(r->fifo_head + i) % r->fifo_cap];
        free(r->fifo);
        r->fifo = q;
        r->fifo_cap = cap;
        r->fifo_head = 0;
    }
    r->fifo[(r->fifo_head + r->n_fifo++) % r->fifo_cap] = p;
}

/* model_forward over the rows set in r->run.rows; the logits go to
 * r->dlogits on a device, r->logits on the CPU. */
static void forward_rows(rollout *r, int n_rows, const bool *want) {
    model_runner *run = &r->run;
    model_forward(&run->m, &run->cache, n_rows, run->rows.seq, run->rows.pos, run->rows.tok, want,
                  r->be ? r->dlogits : r->logits, &run->scratch);
}

/* forward_rows, then its n_out rows of logits in r->logits: on a device they
 * are copied back (which waits for it and reports its failures). */
static int rollout_forward(rollout *r, int n_rows, const bool *want, int n_out, gerr *e) {
    model_runner *run = &r->run;
    forward_rows(r, n_rows, want);
    if (!r->be) return 0;
    return r->be->mem_download(r->logits, r->dlogits, (size_t)n_out * (size_t)run->m.cfg.vocab_size * sizeof(float),
                               e);
}

/* The routing of the last forward call's n_rows rows, position by
 * position: into the prompt's (prefill: the prompt being admitted) or into
 * each row's sequence. */
static void keep_routing(rollout *r, int n_rows, prompt_slot *prefill) {
    if (!r->route_bytes) return;
    const model_rows *mr = &r->run.rows;
    size_t w = (size_t)r->route.layers * (size_t)r->route.k;
    for (int i = 0; i < n_rows; i++) {
        uint8_t *to;
        if (prefill) {
            to = prefill->routing + (size_t)mr->pos[i] * r->route_bytes;
        } else {
            rollout_seq *s = r->slot_seq[mr->seq[i]];
            to = s->routing + (size_t)(mr->pos[i] - (int)r->slot_prompt[mr->seq[i]]->n_tokens) * r->route_bytes;
        }
        routing_pack(r->route, r->run.scratch.routes + (size_t)i * w, w, to);
    }
}

void rollout_release(rollout *r, int slot) {
    r->slot_seq[slot] = NULL;
    r->slot_prompt[slot]->n_done++;
}

void rollout_push(rollout *r, int slot, int32_t t, float lp) {
    rollout_seq *s = r->slot_seq[slot];
    /* a multi-turn episode may grow its cache up to the model's context */
    int limit = r->srv || r->multi_turn || r->run.cache.max_len > r->ctx_len ? r->ctx_len : r->run.cache.max_len;
    seq_push(s, &r->run.mt, t, lp, &r->o->stops, (int)r->o->max_new_tokens, (int)r->o->max_total_tokens, limit);
    r->tokens_made++;
}

void rollout_harmony_turn(const rollout *r, const rollout_seq *s, harmony_turn *out) {
    harmony_read(r->run.mt.tok, &r->htok, s->tokens + s->turn_start, (size_t)(s->n - s->turn_start), s->text_end, out);
}

int rollout_turn_ended(rollout *r, int slot, gerr *e) {
    if (r->multi_turn) return episode_turn_ended(r, slot, e);
    rollout_release(r, slot);
    return 0;
}

/* Takes the sample's token; when its turn ends, the environment is asked
 * what follows (--env), or its slot is freed. */
static int take_token(rollout *r, int slot, int32_t t, float lp, gerr *e) {
    rollout_push(r, slot, t, lp);
    return r->slot_seq[slot]->finish == FINISH_NONE ? 0 : rollout_turn_ended(r, slot, e);
}

/* Takes token t (sampled on the host or the device) for the slot; t < 0
 * means its logits were not numbers: the model's fault, not the prompt's. */
static int take_sampled(rollout *r, int slot, int32_t t, float lp, gerr *e) {
    if (t < 0) {
        const rollout_seq *s = r->slot_seq[slot];
        const prompt_slot *p = r->slot_prompt[slot];
        return gerr_set(e, EX_DATAERR,
                        "%s: the model's logits are not finite (NaN or infinity) at record \"%s\", sample %d, "
                        "completion token %d: its weights are broken or overflow",
                        r->o->model, p->id.data, s->sample, s->n);
    }
    return take_token(r, slot, t, lp, e);
}

/* Samples the slot's next token from a row of logits and takes it. */
static int rollout_advance(rollout *r, int slot, const float *logits, gerr *e) {
    float lp;
    int32_t t = sample_token(&r->smp[0], logits, &r->sp, &r->slot_seq[slot]->rng, &lp);
    return take_sampled(r, slot, t, lp, e);
}

/* A token for each of a decode step's sequences from its row of r->logits,
 * into r->toks and r->lps: the rows spread over the threads, since one
 * thread drawing them all (an exp per vocabulary entry and row) would leave
 * the others idle for as long as the step's matmuls on many cores. Each row
 * draws from its own sequence's stream, so the thread that samples it
 * changes nothing. */
static void sample_rows(rollout *r, int seqs) {
    const size_t V = (size_t)r->vocab;
    int threads = seqs < r->n_smp ? seqs : r->n_smp;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1) if (threads > 1)
    for (int j = 0; j < seqs; j++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        r->toks[j] = sample_token(&r->smp[tid], r->logits + (size_t)j * V, &r->sp, &r->slot_seq[r->step_slot[j]]->rng,
                                  &r->lps[j]);
    }
}

/* Admits a prompt: prefills it once into one free slot, forks that cache
 * to K-1 more, and draws every sample's first token. With --server its K
 * samples only take their slots: the next round asks for them. */
static int admit(rollout *r, prompt_slot *p, gerr *e) {
    const int K = (int)r->o->k, len = (int)p->n_tokens;
    int rc = rollout_reserve(r, len + (int)r->o->max_new_tokens, len, e);
    if (rc) return rc;
    int slots[K];
    for (int i = 0, k = 0; i < r->n_slots && k < K; i++)
        if (!r->slot_seq[i]) slots[k++] = i;
    if (r->srv) {
        fifo_push(r, p);
        p->n_done = 0;
        for (int k = 0; k < K; k++) {
            seq_start(&p->samples[k], r->run.mt.tok, k, len, (uint64_t)r->o->seed, p->id.data, p->id.len,
                      r->multi_turn);
            r->slot_seq[slots[k]] = &p->samples[k];
            r->slot_prompt[slots[k]] = p;
        }
        return 0;
    }
    for (int i = 0; i < len; i++) {
        r->run.rows.seq[i] = slots[0];
        r->run.rows.pos[i] = i;
        r->run.rows.tok[i] = p->tokens[i];
        r->run.rows.want[i] = i == len - 1;
    }
    if ((rc = rollout_forward(r, len, r->run.rows.want, 1, e))) return rc;
    if (r->route_bytes) {
        p->routing = xrealloc(p->routing, (size_t)len * r->route_bytes);
        keep_routing(r, len, p);
    }
    fifo_push(r, p);
    p->n_done = 0;
    for (int k = 0; k < K; k++) {
        if (k) kv_cache_copy_prefix(&r->run.cache, slots[k], slots[0], len);
        seq_start(&p->samples[k], r->run.mt.tok, k, len, (uint64_t)r->o->seed, p->id.data, p->id.len, r->multi_turn);
        p->samples[k].route_bytes = r->route_bytes;
        r->slot_seq[slots[k]] = &p->samples[k];
        r->slot_prompt[slots[k]] = p;
        if ((rc = rollout_advance(r, slots[k], r->logits, e))) return rc;
    }
    return 0;
}

/* One forward call for every sequence in flight that is not waiting for
 * the environment: the tokens it has past what its cache holds (its newest
 * token; after an environment's answer, the turn's last token and the
 * answer's), then one token sampled for each from its last row's logits.
 * A sequence's rows sit together at consecutive positions, so attention
 * tiles them as a call of their own would, and the packed kernels sum each
 * row alike whatever rows share the call: a continuation prefilled here
 * gives the numbers of a prefill alone. */
static int decode_step(rollout *r, gerr *e) {
    if (r->srv) return server_round(r, e);
    int rows = 0, seqs = 0;
    for (int i = 0; i < r->n_slots; i++) {
        const rollout_seq *s = r->slot_seq[i];
        if (s && !s->waiting) rows += s->pos - s->cached;
    }
    if (!rows) return 0;
    int rc = rollout_reserve(r, 0, rows, e);
    if (rc) return rc;
    model_rows *mr = &r->run.rows;
    rows = 0;
    for (int i = 0; i < r->n_slots; i++) {
        rollout_seq *s = r->slot_seq[i];
        if (!s || s->waiting) continue;
        for (int at = s->cached; at < s->pos; at++, rows++) {
            mr->seq[rows] = i;
            mr->pos[rows] = at;
            mr->tok[rows] = s->tokens[s->n - (s->pos - at)];
            mr->want[rows] = at == s->pos - 1;
        }
        s->cached = s->pos;
        r->step_slot[seqs++] = i;
    }
    const bool *want = rows > seqs ? mr->want : NULL; /* NULL: every row, one per sequence */
    double t0 = now_seconds();
    if (r->device_sampling) { /* the logits stay on the device; tokens come back */
        forward_rows(r, rows, want);
        for (int j = 0; j < seqs; j++) r->rngs[j] = &r->slot_seq[r->step_slot[j]]->rng;
        rc = cuda_sample_plain(r->dlogits, seqs, r->vocab, r->sp.temperature, r->rngs, r->toks,
                               r->lps, e);
    } else if (!(rc = rollout_forward(r, rows, want, seqs, e))) {
        sample_rows(r, seqs);
    }
    if (rc) return rc;
    keep_routing(r, rows, NULL);
    r->step_ended = now_seconds();
    r->step_seconds = r->step_ended - t0;
    r->step_seqs = seqs;
    for (int j = 0; j < seqs; j++)
        if ((rc = take_sampled(r, r->step_slot[j], r->toks[j], r->lps[j], e))) return rc;
    return 0;
}

/* Writes the prompts at the front whose samples are all done, in input order. */
static int flush_done(rollout *r, jsonl_writer *w, gerr *e) {
    while (r->n_fifo) {
        prompt_slot *p = r->fifo[r->fifo_head];
        if (p->n_done < (int)r->o->k) break;
        for (int k = 0; k < (int)r->o->k; k++) {
            int rc = write_sample(r, w, p, &p->samples[k], e);
            if (rc) return rc;
        }
        r->fifo_head = (r->fifo_head + 1) % r->fifo_cap;
        r->n_fifo--;
        recycle(r, p);
    }
    return 0;
}

/* --tools F: a JSON array of tool schemas. */
static int load_tools(rollout *r, gerr *e) {
    size_t len;
    char *text = read_whole_file(r->o->tools, &len, e);
    if (!text) {
        char why[sizeof e->msg];
        snprintf(why, sizeof why, "%s", e->msg);
        return gerr_set(e, e->code, "--tools: %s", why);
    }
    const char *end = NULL;
    r->tools = cJSON_ParseWithLengthOpts(text, len, &end, false);
    long at = r->tools ? 0 : (long)(cJSON_GetErrorPtr() - text);
    free(text);
    if (!r->tools) return gerr_set(e, EX_DATAERR, "--tools %s: not JSON (at byte %ld)", r->o->tools, at);
    if (!cJSON_IsArray(r->tools))
        return gerr_set(e, EX_DATAERR, "--tools %s: expected a JSON array of tool schemas", r->o->tools);
    int i = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, r->tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tool, "function");
        if (!cJSON_IsObject(tool) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn ? fn : tool, "name")))
            return gerr_set(e, EX_DATAERR,
                            "--tools %s: element %d: expected an OpenAI function schema {\"type\": \"function\", "
                            "\"function\": {\"name\": ..., \"parameters\": ...}}",
                            r->o->tools, i);
        i++;
    }
    return 0;
}

/* Our engine: the model on the device --device chose, its weights packed
 * as --weights says, the cache as --kv-cache says for those weights as
 * loaded (a checkpoint's frozen base computes as f32). */
static int open_engine(rollout *r, gerr *e) {
    const rollout_opts *o = r->o;
    int rc = device_select("--device", o->device, &r->be, e);
    if (rc) return rc;
    kv_format kv = KV_F32;
    if ((rc = weights_select("--weights", o->weights, &r->weights, e)) ||
        (rc = runner_open_on(&r->run, o->model, false, r->be, r->weights, e)) ||
        (rc = kv_cache_select("--kv-cache", o->kv_cache, r->be != NULL, weights_computed_as(&r->run.m, r->weights),
                              &kv, e))) {
        device_release(r->be);
        r->be = NULL;
        return rc;
    }
    r->run.kv_fmt = kv;
    r->route = routing_shape_of(&r->run.m.cfg);
    if (strcmp(o->routing_record, "off")) r->route_bytes = routing_position_bytes(r->route);
    r->vocab = r->run.m.cfg.vocab_size;
    r->ctx_len = r->run.m.cfg.max_seq_len;
    return 0;
}

/* The buffers our engine's decode steps use. */
static int engine_buffers(rollout *r, gerr *e) {
    int rc = 0;
    size_t n_logits = (size_t)r->n_slots * (size_t)r->vocab;
    r->logits = xmalloc(n_logits * sizeof *r->logits);
    r->n_smp = 1;
#ifdef _OPENMP
    r->n_smp = omp_get_max_threads(); /* --threads, set above, or every core */
#endif
    if (r->n_smp > r->n_slots) r->n_smp = r->n_slots;
    r->smp = xcalloc((size_t)r->n_smp, sizeof *r->smp);
    for (int i = 0; i < r->n_smp; i++) sampler_init(&r->smp[i], r->vocab);
    if (r->be) {
        void *d = NULL;
        rc = r->be->mem_alloc(&d, n_logits * sizeof(float), e);
        r->dlogits = d;
        r->device_sampling = (r->sp.top_k <= 0 || r->sp.top_k >= r->vocab) && r->sp.top_p >= 1 && r->sp.min_p <= 0;
        r->rngs = xcalloc((size_t)r->n_slots, sizeof *r->rngs);
    }
    r->toks = xcalloc((size_t)r->n_slots, sizeof *r->toks);
    r->lps = xcalloc((size_t)r->n_slots, sizeof *r->lps);
    r->step_slot = xcalloc((size_t)r->n_slots, sizeof *r->step_slot);
    return rc;
}

/* harmony (gpt-oss): completions are read by their channels, and
 * <|return|> and <|call|> end a turn whatever generation_config.json says.
 * The harmony flags are checked against the template before any work. */
static int harmony_setup(rollout *r, gerr *e) {
    const rollout_opts *o = r->o;
    int rc;
    if ((o->reasoning_effort || o->chat_date) && (rc = need_template(r, e))) return rc;
    if (!model_text_is_harmony(&r->run.mt, o->chat_template)) return 0;
    if ((rc = harmony_tokens_find(r->run.mt.tok, o->model, &r->htok, e))) return rc;
    model_text_add_eos(&r->run.mt, r->htok.ret);
    model_text_add_eos(&r->run.mt, r->htok.call);
    r->harmony = true;
    return 0;
}

/* --server: the model's text side (tokenizer, chat template,
 * generation_config) is loaded by setup; the server holds the weights. */
static int open_server(rollout *r, gerr *e) {
    r->vocab = (int)tok_vocab_size(r->run.mt.tok);
    int rc = server_open(r, e);
    if (rc) return rc;
    long long ctx = server_context(r);
    r->ctx_len = ctx > 0 && ctx < (1 << 30) ? (int)ctx : 1 << 30; /* unknown: the server ends what does not fit */
    return 0;
}

static int setup(rollout *r, const rollout_opts *o, gerr *e) {
    memset(r, 0, sizeof *r);
    r->o = o;
    if (o->threads > 0) blas_set_threads((int)o->threads);
    int rc = o->server ? 0 : open_engine(r, e);
    if (rc) return rc;
    r->sp = o->sampling;
    if (o->server && (rc = model_text_load(o->model, &r->run.mt, e))) return rc;
    if (r->sp.temperature < 0) r->sp.temperature = r->run.mt.temperature >= 0 ? r->run.mt.temperature : 1.0;
    if (!o->top_p_given && r->run.mt.top_p > 0 && r->run.mt.top_p <= 1) r->sp.top_p = r->run.mt.top_p;
    if (!o->top_k_given && r->run.mt.top_k > 0) r->sp.top_k = r->run.mt.top_k;
    r->n_slots = o->batch > o->k ? (int)o->batch : (int)o->k; /* a prompt's K samples start together */
    if (o->server && o->server_concurrency > r->n_slots) r->n_slots = (int)o->server_concurrency;
    r->slot_seq = xcalloc((size_t)r->n_slots, sizeof *r->slot_seq);
    r->slot_prompt = xcalloc((size_t)r->n_slots, sizeof *r->slot_prompt);
    r->spare = xcalloc((size_t)r->n_slots + 1, sizeof *r->spare);
    rc = o->server ? open_server(r, e) : engine_buffers(r, e);
    if (rc) return rc;
    r->policy = o->policy || !o->server ? policy_name(o) : xstrdup(server_policy_name(r));
    /* how the records were sampled (formats/rollout.md): the server's kind, model and
     * log-probabilities; our engine's device, weights (a checkpoint's frozen base's
     * format, and "base":"frozen") and cache (on a device the products are bf16
     * whatever --weights says) */
    const model *m = &r->run.m;
    if (o->server) server_sampler_json(r, &r->sampler);
    else
        sampler_field_ours(&r->sampler, r->be ? "cuda" : "cpu",
                           r->be             ? "bf16"
                           : m->packed_frozen ? weight_format_name(m->packed_as)
                                              : weight_format_name(r->weights.fmt),
                           m->packed_frozen, r->run.kv_fmt == KV_BF16 ? "bf16" : "f32");
    r->policy_step = o->policy_step; /* else the step of the checkpoint sampled: --server-lora's, or --model's */
    const char *sampled = o->server && server_lora_path(r) ? server_lora_path(r) : o->model;
    if (o->policy_step < 0 && (rc = ckpt_step_read(sampled, &r->policy_step, e))) return rc;
    if (o->tools) rc = load_tools(r, e);
    if (!rc) rc = harmony_setup(r, e);
    if (!rc && o->env) {
        r->multi_turn = true;
        if (!(rc = need_template(r, e))) rc = episode_open(r, e);
    }
    return rc;
}

static void teardown(rollout *r) {
    for (int i = 0; i < r->n_fifo; i++) free_prompt_slot(r, r->fifo[(r->fifo_head + i) % r->fifo_cap]);
    for (int i = 0; i < r->n_spare; i++) free_prompt_slot(r, r->spare[i]);
    free(r->fifo);
    free(r->spare);
    free(r->slot_seq);
    free(r->slot_prompt);
    free(r->logits);
    if (r->dlogits) r->be->mem_free(r->dlogits);
    free(r->rngs);
    free(r->toks);
    free(r->lps);
    free(r->step_slot);
    free(r->policy);
    sb_free(&r->sampler);
    for (int i = 0; i < r->n_smp; i++)
        if (r->smp[i].prob) sampler_free(&r->smp[i]);
    free(r->smp);
    if (r->have_template) chat_template_free(&r->tmpl);
    cJSON_Delete(r->tools);
    episode_close(r);
    server_close(r);
    runner_close(&r->run);
    device_release(r->be);
}

/* Reads the next prompt of this shard into p. 1 = got one, 0 = input done,
 * -1 = error. Bad records are skipped and counted with --skip-bad. */
static int next_prompt(rollout *r, jsonl_reader *rd, prompt_slot *p, gerr *e) {
    for (;;) {
        int got = jsonl_next(rd, &p->rec, e);
        if (got <= 0) return got;
        int rc = record_get_string(&p->rec, "id", true, &p->id, NULL, e);
        if (!rc && !shard_contains(&r->o->shard, p->id.data, p->id.len)) continue;
        if (!rc) rc = prompt_tokens_of(r, p, e);
        if (!rc && r->multi_turn) { /* the conversation the environment is shown starts here */
            cJSON_Delete(p->messages);
            p->messages = NULL;
            if (record_has(&p->rec, "messages")) rc = record_get_messages(&p->rec, &p->messages, e);
            if (!rc && !p->messages) p->messages = cJSON_CreateArray();
        }
        if (!rc) return 1;
        if (!r->o->skip_bad || rc != EX_DATAERR) return -1;
        if (!r->skipped++) r->first_skip = *e;
    }
}

/* The closing lines of --progress: throughput, the cache and the device
 * (or the server), and with --env what waiting for answers cost. */
static void report(const rollout *r, long long prompts, double secs) {
    double rate = secs > 0 ? (double)r->tokens_made / secs : 0;
    if (r->srv) {
        char server[512];
        server_describe(r, server, sizeof server);
        fprintf(stderr, "grpo-rollout: %lld prompts, %lld tokens in %.1f s (%.1f tokens/s); %s\n", prompts,
                r->tokens_made, secs, rate, server);
    } else {
        char device[256];
        device_describe(r->be, device, sizeof device);
        size_t at = strlen(device);
        if (!r->be) {
            char weights[256];
            snprintf(device + at, sizeof device - at, ", weights %s",
                     model_weights_describe(&r->run.m, weights, sizeof weights));
        } else { /* what our allocations held at most (not the runtime's own) */
            snprintf(device + at, sizeof device - at, ", peak %.1f MiB allocated",
                     (double)cuda_peak_bytes() / (1 << 20));
        }
        const kv_cache *c = &r->run.cache;
        fprintf(stderr,
                "grpo-rollout: %lld prompts, %lld tokens in %.1f s (%.1f tokens/s); KV cache %.1f MiB (%s, %d "
                "sequences x %d positions); BLAS kernels %s; OpenMP spin %s; device %s\n",
                prompts, r->tokens_made, secs, rate,
                r->run.cache_ready ? (double)kv_cache_bytes_as(&r->run.m.cfg, r->n_slots, c->max_len, c->fmt) / (1 << 20)
                                   : 0.0,
                c->fmt == KV_BF16 ? "bf16" : "f32", r->n_slots, r->run.cache_ready ? c->max_len : 0, blas_core_name(),
                blas_omp_wait(), device);
    }
    if (r->multi_turn)
        fprintf(stderr,
                "grpo-rollout: env: %lld requests; %.1f s with every sequence waiting for an answer, %.1f s "
                "holding a decode step for answers due\n",
                r->env_requests, r->env_wait_seconds, r->env_hold_seconds);
}

int rollout_run(const rollout_opts *o, gerr *e) {
    rollout r;
    int rc = setup(&r, o, e);
    if (rc) {
        teardown(&r); /* what setup got as far as */
        return rc;
    }
    jsonl_reader rd;
    jsonl_writer w;
    bool reader_open = false, writer_open = false, input_done = false;
    if ((rc = jsonl_open(&rd, o->in, e))) goto done;
    reader_open = true;
    if ((rc = jsonl_writer_open(&w, o->out, e))) goto done;
    writer_open = true;
    progress pg;
    progress_start(&pg, "grpo-rollout", "tokens", 0, o->progress);
    double started = now_seconds();
    long long prompts = 0;
    for (;;) {
        if (r.multi_turn) { /* the answers that are back (or due): wait only when nothing else can go on */
            bool idle = input_done || free_slots(&r) < (int)o->k;
            for (int i = 0; i < r.n_slots && idle; i++) idle = !r.slot_seq[i] || r.slot_seq[i]->waiting;
            if ((rc = episode_take_answers(&r, idle, e))) goto done;
        }
        /* keep every slot busy: admit prompts while K slots are free */
        while (!input_done && free_slots(&r) >= (int)o->k) {
            prompt_slot *p = take_prompt_slot(&r);
            int got = next_prompt(&r, &rd, p, e);
            if (got <= 0) {
                recycle(&r, p);
                if (got < 0) {
                    rc = e->code;
                    goto done;
                }
                input_done = true;
                break;
            }
            if ((rc = admit(&r, p, e))) goto done;
            prompts++;
        }
        if (free_slots(&r) == r.n_slots) {
            if ((rc = flush_done(&r, &w, e))) goto done;
            if (input_done) break;
            continue;
        }
        if ((rc = decode_step(&r, e))) goto done;
        if ((rc = flush_done(&r, &w, e))) goto done;
        progress_update(&pg, r.tokens_made);
    }
    progress_finish(&pg);
    progress_note_empty(&pg, prompts, "prompts");
    if (pg.enabled) report(&r, prompts, now_seconds() - started);
    if (r.multi_turn && (rc = episode_finish(&r, e))) goto done;
    if (r.skipped)
        warn("skipped %lld bad records (--skip-bad); the first: %s", r.skipped, r.first_skip.msg);
    rc = jsonl_writer_commit(&w, e);
    writer_open = false;
done:
    if (writer_open) jsonl_writer_abort(&w);
    if (reader_open) jsonl_close(&rd);
    teardown(&r);
    return rc;
}
