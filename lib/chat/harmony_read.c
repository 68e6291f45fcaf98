#include "harmony_read.h"

#include <stdint.h>
#include <string.h>

int harmony_tokens_find(const tokenizer *t, const char *where, harmony_tokens *out, gerr *e) {
    static const char *const names[] = {"<|start|>",     "<|end|>",    "<|message|>", "<|channel|>",
                                        "<|constrain|>", "<|return|>", "<|call|>"};
    int32_t *ids[] = {&out->start, &out->end, &out->message, &out->channel, &out->constrain, &out->ret, &out->call};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        *ids[i] = tok_token_to_id(t, names[i], strlen(names[i]));
        if (*ids[i] < 0 || !tok_is_added(t, *ids[i]))
            return gerr_set(e, EX_DATAERR,
                            "%s: the tokenizer has no %s token, which the harmony chat template (gpt-oss) needs", where,
                            names[i]);
    }
    return 0;
}

enum { SEG_AUTHOR, SEG_CHANNEL, SEG_TYPE, N_SEG };

typedef struct {
    const tokenizer *t;
    const harmony_tokens *h;
    size_t text_end;
    strbuf all;        /* the turn's text, special tokens left out */
    strbuf seg[N_SEG]; /* the header being read: its author, channel and content type parts */
    int cur;           /* the part the next ordinary header token goes to */
    bool first;        /* the turn's first header, whose author is the prompt's "assistant" */
    bool assistant, final, analysis;
    strbuf recipient;
    size_t from;   /* where the message's content starts in all */
    int n_analysis;
    harmony_turn *out;
} reader;

/* The first white-space separated word of s[0..len) that is not "to=...",
 * as [*w, *w + *wn). */
static void first_word(const strbuf *s, const char **w, size_t *wn) {
    const char *p = s->data ? s->data : "", *end = p + s->len;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\t')) p++;
        const char *q = p;
        while (q < end && *q != ' ' && *q != '\n' && *q != '\t') q++;
        if (q - p >= 3 && !memcmp(p, "to=", 3)) {
            p = q;
            continue;
        }
        *w = p;
        *wn = (size_t)(q - p);
        return;
    }
}

static bool word_is(const strbuf *s, const char *word) {
    const char *w;
    size_t n;
    first_word(s, &w, &n);
    return n == strlen(word) && !memcmp(w, word, n);
}

/* The recipient "to=NAME" in a header part, appended to out. */
static void find_recipient(const strbuf *s, strbuf *out) {
    if (!s->len || out->len) return;
    const char *p = memmem(s->data, s->len, "to=", 3), *end = s->data + s->len;
    if (!p) return;
    const char *q = p += 3;
    while (q < end && *q != ' ' && *q != '\n' && *q != '\t') q++;
    sb_append(out, p, (size_t)(q - p));
}

static void start_header(reader *r, bool first) {
    for (int i = 0; i < N_SEG; i++) sb_clear(&r->seg[i]);
    r->cur = SEG_AUTHOR;
    r->first = first;
}

static void open_content(reader *r) {
    const char *w;
    size_t n;
    first_word(&r->seg[SEG_AUTHOR], &w, &n);
    r->assistant = r->first ? n == 0 : word_is(&r->seg[SEG_AUTHOR], "assistant");
    r->final = word_is(&r->seg[SEG_CHANNEL], "final");
    r->analysis = word_is(&r->seg[SEG_CHANNEL], "analysis");
    sb_clear(&r->recipient);
    find_recipient(&r->seg[SEG_AUTHOR], &r->recipient);
    find_recipient(&r->seg[SEG_CHANNEL], &r->recipient);
    r->from = r->all.len;
}

/* The message whose content is all[from, to) ends. */
static void close_content(reader *r, size_t to) {
    size_t a = r->from < r->text_end ? r->from : r->text_end, b = to < r->text_end ? to : r->text_end;
    const char *text = r->all.data ? r->all.data + a : "";
    size_t len = b > a ? b - a : 0;
    if (!r->assistant) return;
    if (r->final) {
        sb_clear(&r->out->final);
        sb_append(&r->out->final, text, len);
        r->out->has_final = true;
    } else if (r->analysis && !r->recipient.len) {
        if (r->n_analysis++) sb_putc(&r->out->thinking, '\n');
        sb_append(&r->out->thinking, text, len);
    }
    static const char ns[] = "functions.";
    if (r->recipient.len > sizeof ns - 1 && !memcmp(r->recipient.data, ns, sizeof ns - 1)) {
        cJSON *args = cJSON_ParseWithLength(text, len);
        if (!cJSON_IsObject(args)) { /* malformed: what the model wrote is not an error */
            cJSON_Delete(args);
            return;
        }
        cJSON *call = cJSON_CreateObject();
        if (!call || !cJSON_AddStringToObject(call, "name", r->recipient.data + sizeof ns - 1) ||
            !cJSON_AddItemToObject(call, "arguments", args) || !cJSON_AddItemToArray(r->out->calls, call))
            die(EX_SOFTWARE, "out of memory");
    }
}

void harmony_read(const tokenizer *t, const harmony_tokens *h, const int32_t *ids, size_t n, size_t text_end,
                  harmony_turn *out) {
    memset(out, 0, sizeof *out);
    out->calls = cJSON_CreateArray();
    if (!out->calls) die(EX_SOFTWARE, "out of memory");
    reader r = {.t = t, .h = h, .text_end = text_end, .out = out};
    enum { HEADER, CONTENT, BETWEEN } state = HEADER;
    start_header(&r, true);
    tok_stream ds;
    tok_stream_init(&ds, t, true);
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        size_t before = r.all.len;
        tok_stream_put(&ds, id, &r.all);
        bool closes = id == h->end || id == h->ret || id == h->call;
        if (state == CONTENT) {
            if (!closes && id != h->start) continue; /* other tokens are content (special ones add no text) */
            close_content(&r, before);
            state = BETWEEN;
        }
        if (id == h->start) {
            start_header(&r, false);
            state = HEADER;
        } else if (state == BETWEEN) {
            continue; /* nothing belongs to a message between <|end|> and <|start|> */
        } else if (id == h->message) {
            open_content(&r);
            state = CONTENT;
        } else if (closes) {
            state = BETWEEN; /* a header without content */
        } else if (id == h->channel) {
            r.cur = SEG_CHANNEL;
        } else if (id == h->constrain) {
            r.cur = SEG_TYPE;
        } else {
            tok_decode(t, &id, 1, true, &r.seg[r.cur]);
        }
    }
    tok_stream_finish(&ds, &r.all);
    if (state == CONTENT) close_content(&r, r.all.len); /* cut short: what was written of it */
    for (int i = 0; i < N_SEG; i++) sb_free(&r.seg[i]);
    sb_free(&r.recipient);
    sb_free(&r.all);
    sb_append(&out->final, "", 0); /* data never NULL */
    sb_append(&out->thinking, "", 0);
}

void harmony_turn_free(harmony_turn *turn) {
    sb_free(&turn->final);
    sb_free(&turn->thinking);
    cJSON_Delete(turn->calls);
    memset(turn, 0, sizeof *turn);
}
