/* Pre-tokenization: HF's Split / Digits / ByteLevel pre-tokenizers as a
 * chain of PCRE2 regexes. Each step cuts every piece of the previous step
 * into matches and the gaps between them (HF's Pattern::find_matches),
 * combines them by the split behaviour, drops empty pieces and hands the
 * rest to the next step; the last step hands them to the BPE model.
 *
 * HF runs these regexes with Oniguruma, whose \s is Unicode White_Space;
 * PCRE2's \s under UCP is a slightly different set, so \s and \S are
 * rewritten into explicit classes before compiling. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define WS_RANGES "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

static const char RE_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* The families' Split regexes, as their tokenizer.json files write them
 * (JSON-decoded). o200k (GPT-4o, gpt-oss; tiktoken's o200k_base) splits a
 * word by case: an upper-case run ([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]) then a
 * lower-case one ([\p{Ll}\p{Lm}\p{Lo}\p{M}]), a contraction as its suffix. */
static const char RE_LLAMA3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
                                "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
                               "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Every kind: the name llama.cpp's converter writes, the Split regex (NULL:
 * none) and the GGUF names llama.cpp reads as the same pre-tokenizer. */
static const struct {
    tok_pre_kind kind;
    const char *name, *split, *aliases[3];
} KINDS[] = {
    {TOK_PRE_GPT2, "gpt-2", NULL, {"gpt2"}},
    {TOK_PRE_SMOLLM, "smollm", NULL, {0}},
    {TOK_PRE_LLAMA3, "llama-bpe", RE_LLAMA3, {"llama3", "llama-v3"}},
    {TOK_PRE_QWEN2, "qwen2", RE_QWEN2, {0}},
    {TOK_PRE_GPT4O, "gpt-4o", RE_O200K, {0}},
};
enum { N_KINDS = sizeof KINDS / sizeof *KINDS };

/* Rewrites \s and \S (outside \Q..\E) to Unicode White_Space classes. */
static int rewrite_space(const char *pat, strbuf *out, gerr *e) {
    bool in_class = false;
    for (size_t i = 0; pat[i]; i++) {
        char c = pat[i];
        if (c == '\\' && pat[i + 1]) {
            char d = pat[++i];
            if (d == 'Q') return gerr_set(e, EX_DATAERR, "regex \\Q...\\E quoting is not supported: %s", pat);
            if (d == 's') sb_puts(out, in_class ? WS_RANGES : "[" WS_RANGES "]");
            else if (d == 'S' && !in_class) sb_puts(out, "[^" WS_RANGES "]");
            else if (d == 'S') return gerr_set(e, EX_DATAERR, "regex \\S inside a character class is not supported: %s", pat);
            else {
                sb_putc(out, '\\');
                sb_putc(out, d);
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            sb_putc(out, c);
            if (pat[i + 1] == '^') sb_putc(out, pat[++i]);
            if (pat[i + 1] == ']') sb_putc(out, pat[++i]); /* a leading ']' is literal */
            continue;
        }
        if (in_class && c == '[' && pat[i + 1] == ':') { /* [:alpha:] */
            const char *end = strstr(pat + i + 2, ":]");
            if (end) {
                sb_append(out, pat + i, (size_t)(end + 2 - (pat + i)));
                i = (size_t)(end + 1 - pat);
                continue;
            }
        }
        if (in_class && c == ']') in_class = false;
        sb_putc(out, c);
    }
    return 0;
}

static int add_step(pretok *p, pretok_step st, gerr *e) {
    if (p->n == PRETOK_MAX_STEPS) {
        if (st.re) pcre2_code_free(st.re);
        return gerr_set(e, EX_DATAERR, "pre_tokenizer has more than %d steps", PRETOK_MAX_STEPS);
    }
    if (p->n > 0 && p->steps[p->n - 1].byte_level) {
        if (st.re) pcre2_code_free(st.re);
        return gerr_set(e, EX_DATAERR, "pre_tokenizer steps after ByteLevel are not supported");
    }
    p->steps[p->n++] = st;
    return 0;
}

static int compile(const char *pattern, bool literal, pcre2_code **re, bool *jit, gerr *e) {
    strbuf pat = {0};
    if (literal) sb_puts(&pat, pattern);
    else if (rewrite_space(pattern, &pat, e)) {
        sb_free(&pat);
        return e->code;
    }
    int err;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
    *re = pcre2_compile((PCRE2_SPTR)pat.data, pat.len, opts, &err, &off, NULL);
    sb_free(&pat);
    if (!*re) {
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(err, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
        return gerr_set(e, EX_DATAERR, "regex %s: %s at offset %zu", pattern, (char *)msg, (size_t)off);
    }
    /* JIT is only speed: without it (or where it fails) the interpreter runs */
    *jit = pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

int pretok_add_split(pretok *p, const char *pattern, bool literal, int behavior, bool invert, gerr *e) {
    pretok_step st = {.behavior = behavior, .invert = invert};
    if (compile(pattern, literal, &st.re, &st.jit, e)) return e->code;
    return add_step(p, st, e);
}

int pretok_add_digits(pretok *p, bool individual, gerr *e) {
    /* HF splits on Rust's char::is_numeric, which is \p{N}; contiguous runs
     * of matches merged are the same as one \p{N}+ match */
    return pretok_add_split(p, individual ? "\\p{N}" : "\\p{N}+", false, SPLIT_ISOLATED, false, e);
}

int pretok_add_byte_level(pretok *p, bool use_regex, bool add_prefix_space, gerr *e) {
    pretok_step st = {.behavior = SPLIT_ISOLATED, .byte_level = true, .add_prefix_space = add_prefix_space};
    if (use_regex && compile(RE_GPT2, false, &st.re, &st.jit, e)) return e->code;
    return add_step(p, st, e);
}

int pretok_add_kind(pretok *p, tok_pre_kind kind, gerr *e) {
    switch (kind) {
    case TOK_PRE_GPT2: return pretok_add_byte_level(p, true, false, e);
    case TOK_PRE_SMOLLM:
        if (pretok_add_digits(p, true, e)) return e->code;
        return pretok_add_byte_level(p, true, false, e);
    case TOK_PRE_LLAMA3:
    case TOK_PRE_QWEN2:
    case TOK_PRE_GPT4O:
        if (pretok_add_split(p, tok_pre_kind_split(kind), false, SPLIT_ISOLATED, false, e)) return e->code;
        return pretok_add_byte_level(p, false, false, e);
    }
    return gerr_set(e, EX_SOFTWARE, "unknown pre-tokenizer kind %d", (int)kind);
}

int tok_pre_kind_from_name(const char *name, tok_pre_kind *kind, gerr *e) {
    for (int i = 0; i < N_KINDS; i++) {
        bool hit = !strcmp(name, KINDS[i].name);
        for (int j = 0; !hit && j < 3 && KINDS[i].aliases[j]; j++) hit = !strcmp(name, KINDS[i].aliases[j]);
        if (hit) {
            *kind = KINDS[i].kind;
            return 0;
        }
    }
    return gerr_set(e, EX_DATAERR, "pre-tokenizer \"%s\" is not supported (" TOK_PRE_NAMES " are)", name);
}

const char *tok_pre_kind_name(tok_pre_kind kind) {
    for (int i = 0; i < N_KINDS; i++)
        if (KINDS[i].kind == kind) return KINDS[i].name;
    return "?";
}

const char *tok_pre_kind_split(tok_pre_kind kind) {
    for (int i = 0; i < N_KINDS; i++)
        if (KINDS[i].kind == kind) return KINDS[i].split;
    return NULL;
}

bool tok_pre_kind_of_split(const char *pattern, tok_pre_kind *kind) {
    for (int i = 0; i < N_KINDS; i++)
        if (KINDS[i].split && !strcmp(pattern, KINDS[i].split)) {
            *kind = KINDS[i].kind;
            return true;
        }
    return false;
}

void pretok_free(pretok *p) {
    for (int i = 0; i < p->n; i++)
        if (p->steps[i].re) pcre2_code_free(p->steps[i].re);
    p->n = 0;
}

/* ---- running the chain ---- */

typedef struct {
    size_t s, e;
    bool m;
} span;

struct pretok_work {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    span *sp[PRETOK_MAX_STEPS];
    size_t cap[PRETOK_MAX_STEPS];
    strbuf pfx[PRETOK_MAX_STEPS];
};

pretok_work *pretok_work_new(const pretok *p, gerr *e) {
    (void)p;
    pretok_work *w = xcalloc(1, sizeof *w);
    w->md = pcre2_match_data_create(1, NULL);
    w->mc = pcre2_match_context_create(NULL);
    if (!w->md || !w->mc) {
        pretok_work_free(w);
        gerr_set(e, EX_SOFTWARE, "out of memory");
        return NULL;
    }
    return w;
}

void pretok_work_free(pretok_work *w) {
    if (!w) return;
    pcre2_match_data_free(w->md);
    pcre2_match_context_free(w->mc);
    if (w->js) pcre2_jit_stack_free(w->js);
    for (int i = 0; i < PRETOK_MAX_STEPS; i++) {
        free(w->sp[i]);
        sb_free(&w->pfx[i]);
    }
    free(w);
}

static void add_span(pretok_work *w, int k, size_t *n, size_t s, size_t e, bool m) {
    if (*n == w->cap[k]) {
        w->cap[k] = w->cap[k] ? 2 * w->cap[k] : 64;
        w->sp[k] = xrealloc(w->sp[k], w->cap[k] * sizeof(span));
    }
    w->sp[k][(*n)++] = (span){s, e, m};
}

/* Matches and gaps of step k over s, in order (HF find_matches). */
static int find_matches(const pretok_step *st, pretok_work *w, int k, const char *s, size_t len, size_t *n,
                        gerr *e) {
    size_t prev = 0, off = 0;
    *n = 0;
    while (off < len) {
        int rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, off, PCRE2_NO_UTF_CHECK, w->md, w->mc);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !w->js) {
            /* the default 32 KiB JIT stack ran out (very long runs): a bigger
             * one, made only when needed since most calls never need it */
            w->js = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
            if (w->js) {
                pcre2_jit_stack_assign(w->mc, NULL, w->js);
                rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, off, PCRE2_NO_UTF_CHECK, w->md, w->mc);
            }
        }
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* still too deep: the interpreter keeps its frames on the heap */
            rc = pcre2_match(st->re, (PCRE2_SPTR)s, len, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, w->md, w->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            if (pcre2_get_error_message(rc, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
            return gerr_set(e, EX_SOFTWARE, "pre-tokenizer regex failed on a %zu-byte piece: %s", len, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match cuts nothing; step over one character */
            off = ms + 1;
            while (off < len && ((unsigned char)s[off] & 0xC0) == 0x80) off++;
            continue;
        }
        if (ms > prev) add_span(w, k, n, prev, ms, st->invert);
        add_span(w, k, n, ms, me, !st->invert);
        prev = off = me;
    }
    if (prev < len) add_span(w, k, n, prev, len, st->invert);
    return 0;
}

/* Combines spans by the behaviour in place (HF NormalizedString::split);
 * returns the new count. MergedWithNext is apply_merged_next. */
static size_t apply_behavior(span *sp, size_t n, int behavior) {
    size_t out = 0;
    bool prev_m = false;
    for (size_t i = 0; i < n; i++) {
        span c = sp[i];
        switch (behavior) {
        default: sp[out++] = c; break; /* SPLIT_ISOLATED */
        case SPLIT_REMOVED:
            if (!c.m) sp[out++] = c;
            break;
        case SPLIT_MERGED_PREV:
            if (c.m && !prev_m && out > 0) sp[out - 1].e = c.e;
            else sp[out++] = c;
            break;
        case SPLIT_CONTIGUOUS:
            if (c.m == prev_m && out > 0) sp[out - 1].e = c.e;
            else sp[out++] = c;
            break;
        }
        prev_m = c.m;
    }
    return out;
}

/* MergedWithNext mirrored: walk backwards, a match glues onto the piece after it. */
static size_t apply_merged_next(span *sp, size_t n) {
    size_t out = n;
    bool prev_m = false;
    for (size_t i = n; i-- > 0;) {
        span c = sp[i];
        if (c.m && !prev_m && out < n) sp[out].s = c.s;
        else sp[--out] = c;
        prev_m = c.m;
    }
    memmove(sp, sp + out, (n - out) * sizeof *sp);
    return n - out;
}

static int run(const pretok *p, pretok_work *w, int k, const char *s, size_t len, pretok_fn fn, void *ctx,
               gerr *e) {
    if (k == p->n) return fn(ctx, s, len, e);
    const pretok_step *st = &p->steps[k];
    if (st->byte_level && st->add_prefix_space && s[0] != ' ') {
        sb_clear(&w->pfx[k]);
        sb_putc(&w->pfx[k], ' ');
        sb_append(&w->pfx[k], s, len);
        s = w->pfx[k].data;
        len = w->pfx[k].len;
    }
    if (!st->re) return run(p, w, k + 1, s, len, fn, ctx, e);
    size_t n;
    if (find_matches(st, w, k, s, len, &n, e)) return e->code;
    n = st->behavior == SPLIT_MERGED_NEXT ? apply_merged_next(w->sp[k], n) : apply_behavior(w->sp[k], n, st->behavior);
    for (size_t i = 0; i < n; i++) {
        span c = w->sp[k][i]; /* copied: deeper steps do not touch level k, but be plain about it */
        if (c.e > c.s && run(p, w, k + 1, s + c.s, c.e - c.s, fn, ctx, e)) return e->code;
    }
    return 0;
}

int pretok_run(const pretok *p, pretok_work *w, const char *s, size_t len, pretok_fn fn, void *ctx, gerr *e) {
    if (len == 0) return 0;
    return run(p, w, 0, s, len, fn, ctx, e);
}
