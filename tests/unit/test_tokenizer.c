/* The byte-level BPE tokenizer on a tiny hand-written tokenizer.json whose
 * expected ids are worked out by hand. Parity with Hugging Face on the real
 * SmolLM2 vocabulary is tests/ref/check_tokenizer.py, which runs this
 * program in driver mode:
 *   GRPO_TOK_JSON=tokenizer.json GRPO_TOK_IN=lines GRPO_TOK_OUT=file
 *     each input line is {"text": S} (encode, special tokens matched),
 *     {"nospecial": S} (encode, special tokens as text) or {"ids": [..]}
 *     (decode); output: one line per input, space-separated ids, or the
 *     decoded text as two JSON strings (plain, skip_special) with a tab
 *     between. The streaming decoder must give the same text (else exit 1).
 *   GRPO_TOK_JSON=tokenizer.json GRPO_TOK_BENCH=file: encodes the file and
 *     prints "# encode: N MB/s" (one core). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "tok/tokenizer.h"
#include "util/clock.h"

/* ---- driver mode ---- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    strbuf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) sb_append(&b, chunk, k);
    fclose(f);
    *len = b.len;
    return b.data ? b.data : xstrdup("");
}

static int bench(const tokenizer *t, const char *path) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        printf("# cannot read %s\n", path);
        return 1;
    }
    /* documents of about 4 KiB, cut at line ends, as a prompt stream would be */
    size_t tokens = 0;
    double t0 = now_seconds();
    for (size_t i = 0; i < len;) {
        size_t j = i + 4096 < len ? i + 4096 : len;
        while (j < len && text[j - 1] != '\n') j++;
        int32_t *ids;
        size_t n;
        gerr e = {0};
        if (tok_encode(t, text + i, j - i, true, &ids, &n, &e)) {
            printf("# encode failed: %s\n", e.msg);
            free(text);
            return 1;
        }
        tokens += n;
        free(ids);
        i = j;
    }
    double dt = now_seconds() - t0;
    printf("# encode: %.1f MB/s (%zu bytes, %zu tokens, %.3f s, one core)\n", len / dt / 1e6, len, tokens, dt);
    free(text);
    return 0;
}

static int driver(const char *json, const char *in, const char *out) {
    tokenizer *t;
    gerr e = {0};
    if (tok_load_json(json, &t, &e)) {
        fprintf(stderr, "test_tokenizer: %s\n", e.msg);
        return 1;
    }
    if (getenv("GRPO_TOK_BENCH")) {
        int rc = bench(t, getenv("GRPO_TOK_BENCH"));
        tok_free(t);
        return rc;
    }
    FILE *fi = fopen(in, "r"), *fo = fopen(out, "w");
    if (!fi || !fo) {
        fprintf(stderr, "test_tokenizer: cannot open %s or %s: %s\n", in, out, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int status = 0;
    long lineno = 0;
    strbuf o = {0}, text = {0}, skip = {0}, stream = {0};
    while ((got = getline(&line, &cap, fi)) > 0) {
        lineno++;
        cJSON *j = cJSON_ParseWithLength(line, (size_t)got);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "text");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(j, "nospecial");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(j, "ids");
        sb_clear(&o);
        if (cJSON_IsString(s) || cJSON_IsString(ns)) {
            const char *str = cJSON_IsString(s) ? s->valuestring : ns->valuestring;
            int32_t *v;
            size_t n;
            if (tok_encode(t, str, strlen(str), cJSON_IsString(s), &v, &n, &e)) {
                fprintf(stderr, "test_tokenizer: line %ld: %s\n", lineno, e.msg);
                status = 1;
            } else {
                for (size_t i = 0; i < n; i++) sb_printf(&o, i ? " %d" : "%d", (int)v[i]);
                free(v);
            }
        } else if (cJSON_IsArray(ids)) {
            size_t n = (size_t)cJSON_GetArraySize(ids), i = 0;
            int32_t *v = xmalloc((n + 1) * sizeof *v);
            const cJSON *it;
            cJSON_ArrayForEach(it, ids) v[i++] = (int32_t)it->valuedouble;
            sb_clear(&text);
            sb_clear(&skip);
            tok_decode(t, v, n, false, &text);
            tok_decode(t, v, n, true, &skip);
            for (int sk = 0; sk < 2; sk++) {
                tok_stream st;
                tok_stream_init(&st, t, sk);
                sb_clear(&stream);
                for (i = 0; i < n; i++) tok_stream_put(&st, v[i], &stream);
                tok_stream_finish(&st, &stream);
                const strbuf *want = sk ? &skip : &text;
                if (stream.len != want->len || memcmp(stream.data, want->data, want->len)) {
                    fprintf(stderr, "test_tokenizer: line %ld: streaming decode differs\n", lineno);
                    status = 1;
                }
            }
            sb_json_string(&o, text.data ? text.data : "", text.len);
            sb_putc(&o, '\t');
            sb_json_string(&o, skip.data ? skip.data : "", skip.len);
            free(v);
        } else {
            fprintf(stderr, "test_tokenizer: line %ld: not {text|nospecial|ids}\n", lineno);
            status = 1;
        }
        sb_putc(&o, '\n');
        fwrite(o.data, 1, o.len, fo);
        cJSON_Delete(j);
    }
    free(line);
    sb_free(&o);
    sb_free(&text);
    sb_free(&skip);
    sb_free(&stream);
    fclose(fi);
    if (fclose(fo)) status = 1;
    tok_free(t);
    return status;
}

/* ---- unit tests ---- */

/* Vocab of bytes a b c Ġ(space) Ċ(\n) 1 2 < > s Ã © plus merged tokens;
 * merges by rank: a+b, ab+c, Ġ+a, 1+2. */
static const char TINY_VOCAB[] =
    "{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"ab\":4,\"abc\":5,\"\\u0120a\":6,\"\\u010a\":7,\"1\":8,\"2\":9,"
    "\"12\":10,\"<s>\":11,\"<x>\":12,\"<\":13,\">\":14,\"s\":15,\"\\u00c3\":16,\"\\u00a9\":17}";

static char *tiny_json(const char *pre, const char *merges) {
    strbuf b = {0};
    sb_printf(&b,
              "{\"version\":\"1.0\",\"added_tokens\":["
              "{\"id\":11,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
              "\"normalized\":false,\"special\":true},"
              "{\"id\":12,\"content\":\"<x>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":true,"
              "\"normalized\":true,\"special\":false}],"
              "\"normalizer\":null,\"pre_tokenizer\":%s,\"post_processor\":null,"
              "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
              "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"fuse_unk\":false,"
              "\"byte_fallback\":false,\"vocab\":%s,\"merges\":%s}}",
              pre, TINY_VOCAB, merges);
    return b.data;
}

static const char PRE_GPT2[] = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
static const char PRE_SMOL[] =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}]}";
static const char MERGES_STR[] = "[\"a b\",\"ab c\",\"\\u0120 a\",\"1 2\"]";
static const char MERGES_PAIRS[] = "[[\"a\",\"b\"],[\"ab\",\"c\"],[\"\\u0120\",\"a\"],[\"1\",\"2\"]]";

static tokenizer *load(const char *pre, const char *merges) {
    char *j = tiny_json(pre, merges);
    tokenizer *t = NULL;
    gerr e = {0};
    if (tok_load_json_text(j, strlen(j), "tiny.json", &t, &e)) printf("# load: %s\n", e.msg);
    free(j);
    return t;
}

/* Encodes and compares with the expected ids (terminated by -1). */
static void enc_is(const tokenizer *t, const char *text, bool special, const int32_t *want) {
    int32_t *ids;
    size_t n, nw = 0;
    gerr e = {0};
    while (want[nw] >= 0) nw++;
    CHECK_EQ_INT(tok_encode(t, text, strlen(text), special, &ids, &n, &e), 0);
    bool same = n == nw && (n == 0 || !memcmp(ids, want, n * sizeof *ids));
    if (!same) {
        printf("#   \"%s\": got", text);
        for (size_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
        printf("\n");
    }
    CHECK(same);
    free(ids);
}

static void dec_is(const tokenizer *t, const int32_t *ids, size_t n, bool skip, const char *want) {
    strbuf b = {0};
    tok_decode(t, ids, n, skip, &b);
    CHECK_EQ_STR(b.data ? b.data : "", want);
    sb_free(&b);
}

static int load_error(const char *json, const char *needle) {
    tokenizer *t = NULL;
    gerr e = {0};
    int rc = tok_load_json_text(json, strlen(json), "t.json", &t, &e);
    if (rc && needle && !strstr(e.msg, needle)) printf("#   message \"%s\" lacks \"%s\"\n", e.msg, needle);
    if (rc && strchr(e.msg, '\n')) printf("#   message has a newline\n");
    CHECK(!needle || strstr(e.msg, needle));
    CHECK(t == NULL);
    tok_free(t);
    return rc;
}

int main(void) {
    if (getenv("GRPO_TOK_JSON")) return driver(getenv("GRPO_TOK_JSON"), getenv("GRPO_TOK_IN"), getenv("GRPO_TOK_OUT"));

    TEST("byte<->unicode map: all 256 bytes round trip to distinct code points");
    {
        int seen = 0;
        for (int b = 0; b < 256; b++) {
            uint32_t cp = tok_byte_to_unicode((unsigned char)b);
            CHECK_EQ_INT(tok_unicode_to_byte(cp), b);
            CHECK(cp > 0x20 && cp < 0x144);
            for (int c = 0; c < b; c++) seen += tok_byte_to_unicode((unsigned char)c) == cp;
        }
        CHECK_EQ_INT(seen, 0);
        CHECK_EQ_INT(tok_unicode_to_byte(0x144), -1);
        CHECK_EQ_INT(tok_unicode_to_byte(0x20), -1);
        CHECK_EQ_INT(tok_unicode_to_byte(0xAD), -1);
    }

    TEST("byte<->unicode map: known GPT-2 mappings");
    CHECK_EQ_INT(tok_byte_to_unicode(' '), 0x120);  /* Ġ */
    CHECK_EQ_INT(tok_byte_to_unicode('\n'), 0x10A); /* Ċ */
    CHECK_EQ_INT(tok_byte_to_unicode('\t'), 0x109); /* ĉ */
    CHECK_EQ_INT(tok_byte_to_unicode(0), 0x100);
    CHECK_EQ_INT(tok_byte_to_unicode('A'), 'A');
    CHECK_EQ_INT(tok_byte_to_unicode(0x7F), 0x121);
    CHECK_EQ_INT(tok_byte_to_unicode(0xA0), 0x142);
    CHECK_EQ_INT(tok_byte_to_unicode(0xAD), 0x143);
    CHECK_EQ_INT(tok_byte_to_unicode(0xC3), 0xC3);

    tokenizer *g = load(PRE_GPT2, MERGES_STR);
    tokenizer *sm = load(PRE_SMOL, MERGES_PAIRS);
    CHECK(g && sm);
    if (!g || !sm) return check_done();

    TEST("encode: merges by rank on a hand-worked example");
    /* "abc" -> a b c -> ab c -> abc; " ab" -> Ġ a b: a+b (rank 0) beats Ġ+a (rank 2) */
    enc_is(g, "abc ab", true, (const int32_t[]){5, 3, 4, -1});
    enc_is(g, " a", true, (const int32_t[]){6, -1});
    enc_is(g, "ba", true, (const int32_t[]){1, 0, -1});
    enc_is(g, "a\n", true, (const int32_t[]){0, 7, -1});
    enc_is(g, "", true, (const int32_t[]){-1});
    enc_is(g, "zz", true, (const int32_t[]){-1}); /* no token for z, no unk: dropped, as HF */

    TEST("encode: digits merged by GPT-2's regex, split one by one by SmolLM's");
    enc_is(g, "12", true, (const int32_t[]){10, -1});
    enc_is(sm, "12", true, (const int32_t[]){8, 9, -1});
    enc_is(sm, "abc12", true, (const int32_t[]){5, 8, 9, -1});

    TEST("encode: added tokens (special only when allowed; rstrip)");
    enc_is(g, "a<s>b", true, (const int32_t[]){0, 11, 1, -1});
    enc_is(g, "a<s>b", false, (const int32_t[]){0, 13, 15, 14, 1, -1});
    enc_is(g, "<x>  a", false, (const int32_t[]){12, 0, -1}); /* non-special, swallows the spaces */
    enc_is(g, "<s><x><s>", true, (const int32_t[]){11, 12, 11, -1});

    TEST("encode: non-ASCII bytes map through the byte table");
    enc_is(g, "\xC3\xA9", true, (const int32_t[]){16, 17, -1}); /* é = C3 A9 -> Ã © */

    TEST("encode: invalid UTF-8 is EX_DATAERR");
    {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        gerr e = {0};
        CHECK_EQ_INT(tok_encode(g, "a\xC3", 2, true, &ids, &n, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "UTF-8") != NULL);
        CHECK(ids == NULL && n == 0);
    }

    TEST("lookups");
    CHECK_EQ_INT(tok_vocab_size(g), 18);
    CHECK_EQ_INT(tok_token_to_id(g, "abc", 3), 5);
    CHECK_EQ_INT(tok_token_to_id(g, "<s>", 3), 11);
    CHECK_EQ_INT(tok_token_to_id(g, "zz", 2), -1);
    CHECK_EQ_STR(tok_id_to_token(g, 6), "\xC4\xA0" "a");
    CHECK(tok_id_to_token(g, 18) == NULL && tok_id_to_token(g, -1) == NULL);
    CHECK(tok_is_special(g, 11) && !tok_is_special(g, 12) && !tok_is_special(g, 0));
    CHECK(tok_is_added(g, 12) && !tok_is_added(g, 5));
    {
        size_t len = 0;
        const char *b = tok_token_bytes(g, 6, &len);
        CHECK(b && len == 2 && !memcmp(b, " a", 2));
    }

    TEST("decode: bytes back, special tokens skipped on request, unknown ids dropped");
    dec_is(g, (const int32_t[]){5, 3, 4}, 3, false, "abc ab");
    dec_is(g, (const int32_t[]){11, 6, 12, 7}, 4, false, "<s> a<x>\n");
    dec_is(g, (const int32_t[]){11, 6, 12, 7}, 4, true, " a<x>\n");
    dec_is(g, (const int32_t[]){0, 99, -5, 1}, 4, false, "ab");

    TEST("decode: partial UTF-8 across tokens, U+FFFD for what stays invalid");
    dec_is(g, (const int32_t[]){16, 17}, 2, false, "\xC3\xA9");
    dec_is(g, (const int32_t[]){16}, 1, false, "\xEF\xBF\xBD");
    dec_is(g, (const int32_t[]){16, 0}, 2, false, "\xEF\xBF\xBD" "a");
    dec_is(g, (const int32_t[]){17, 17}, 2, false, "\xEF\xBF\xBD\xEF\xBF\xBD");
    dec_is(g, (const int32_t[]){16, 16, 17}, 3, false, "\xEF\xBF\xBD\xC3\xA9");

    TEST("decode: the stream holds a partial character until it completes");
    {
        tok_stream st;
        strbuf b = {0};
        tok_stream_init(&st, g, false);
        tok_stream_put(&st, 0, &b);
        tok_stream_put(&st, 16, &b);
        CHECK_EQ_STR(b.data, "a"); /* Ã (C3) waits */
        tok_stream_put(&st, 17, &b);
        CHECK_EQ_STR(b.data, "a\xC3\xA9");
        tok_stream_put(&st, 16, &b);
        tok_stream_put(&st, 11, &b); /* "<s>" breaks the pending C3 */
        CHECK_EQ_STR(b.data, "a\xC3\xA9\xEF\xBF\xBD<s>");
        tok_stream_put(&st, 16, &b);
        tok_stream_finish(&st, &b);
        CHECK_EQ_STR(b.data, "a\xC3\xA9\xEF\xBF\xBD<s>\xEF\xBF\xBD");
        sb_free(&b);
    }

    TEST("long inputs: a megabyte of one letter, of spaces, of digits");
    {
        size_t n = 1 << 20;
        char *s = xmalloc(n + 1);
        const char fill[] = {'a', ' ', '1', '\n'};
        for (int k = 0; k < 4; k++) {
            memset(s, fill[k], n);
            int32_t *ids;
            size_t nids;
            gerr e = {0};
            int rc = tok_encode(sm, s, n, true, &ids, &nids, &e);
            if (rc) printf("#   %s\n", e.msg);
            CHECK_EQ_INT(rc, 0);
            CHECK(nids > 0);
            free(ids);
        }
        free(s);
    }

    TEST("tok_from_arrays builds the same tokenizer (SmolLM kind)");
    {
        const char *toks[] = {"a", "b", "c", "\xC4\xA0", "ab", "abc", "\xC4\xA0" "a", "\xC4\x8A", "1", "2", "12",
                              "<s>", "<x>", "<", ">", "s", "\xC3\x83", "\xC2\xA9"};
        const char *merges[] = {"a b", "ab c", "\xC4\xA0 a", "1 2"};
        tok_added_token added[] = {{.content = "<s>", .id = 11, .special = true}};
        tok_pre_kind kind;
        gerr e = {0};
        CHECK_EQ_INT(tok_pre_kind_from_name("smollm", &kind, &e), 0);
        tok_arrays a = {toks, 18, merges, 4, added, 1, kind, false};
        tokenizer *t = NULL;
        CHECK_EQ_INT(tok_from_arrays(&a, &t, &e), 0);
        if (t) {
            enc_is(t, "abc ab12<s>", true, (const int32_t[]){5, 3, 4, 8, 9, 11, -1});
            tok_free(t);
        }
        CHECK_EQ_INT(tok_pre_kind_from_name("falcon", &kind, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "falcon") != NULL);
        const char *bad_merges[] = {"a z"};
        tok_arrays b = {toks, 18, bad_merges, 1, NULL, 0, TOK_PRE_GPT2, false};
        CHECK_EQ_INT(tok_from_arrays(&b, &t, &e), EX_DATAERR);
        CHECK(t == NULL);
    }

    TEST("Llama-3 and Qwen2 kinds compile and split as their regexes say");
    {
        const char *toks[] = {"1", "2", "3", "4", "12", "123", "34"};
        const char *merges[] = {"1 2", "12 3", "3 4"};
        tok_arrays a = {toks, 7, merges, 3, NULL, 0, TOK_PRE_LLAMA3, false};
        tokenizer *t = NULL;
        gerr e = {0};
        CHECK_EQ_INT(tok_from_arrays(&a, &t, &e), 0);
        if (t) enc_is(t, "1234", true, (const int32_t[]){5, 3, -1}); /* \p{N}{1,3}: 123 | 4 */
        tok_free(t);
        a.pre = TOK_PRE_QWEN2;
        CHECK_EQ_INT(tok_from_arrays(&a, &t, &e), 0);
        if (t) enc_is(t, "1234", true, (const int32_t[]){0, 1, 2, 3, -1});
        tok_free(t);
    }

    TEST("GPT-4o kind (o200k): case runs, contraction suffixes, \"/\" after punctuation; names and regexes agree");
    {
        const char *toks[] = {"a", "b", "A", "B", "aB", "Ab", "'", "s", "a'", "a's", ".", "/", "\xC4\x8A", ".\xC4\x8A",
                              ".\xC4\x8A/"};
        const char *merges[] = {"a B", "A b", "a '", "a' s", ". \xC4\x8A", ".\xC4\x8A /"};
        tok_pre_kind kind;
        gerr e = {0};
        CHECK_EQ_INT(tok_pre_kind_from_name("gpt-4o", &kind, &e), 0);
        CHECK(kind == TOK_PRE_GPT4O);
        tok_arrays a = {toks, 15, merges, 6, NULL, 0, kind, false};
        tokenizer *t = NULL;
        CHECK_EQ_INT(tok_from_arrays(&a, &t, &e), 0);
        if (t) {
            enc_is(t, "aBAb", true, (const int32_t[]){0, 3, 5, -1}); /* a | BAb: a lower run ends at B */
            enc_is(t, "a's", true, (const int32_t[]){9, -1});         /* the contraction stays on its word */
            enc_is(t, ".\n/", true, (const int32_t[]){14, -1});      /* [\r\n/]* after punctuation */
        }
        tok_free(t);
        a.pre = TOK_PRE_LLAMA3; /* the same text under Llama 3's regex */
        CHECK_EQ_INT(tok_from_arrays(&a, &t, &e), 0);
        if (t) {
            enc_is(t, "aBAb", true, (const int32_t[]){4, 5, -1});
            enc_is(t, "a's", true, (const int32_t[]){0, 6, 7, -1});
            enc_is(t, ".\n/", true, (const int32_t[]){13, 11, -1});
        }
        tok_free(t);
        const tok_pre_kind kinds[] = {TOK_PRE_GPT2, TOK_PRE_LLAMA3, TOK_PRE_QWEN2, TOK_PRE_SMOLLM, TOK_PRE_GPT4O};
        for (int i = 0; i < 5; i++) {
            tok_pre_kind back = TOK_PRE_GPT2;
            CHECK_EQ_INT(tok_pre_kind_from_name(tok_pre_kind_name(kinds[i]), &back, &e), 0);
            CHECK(back == kinds[i]);
            const char *re = tok_pre_kind_split(kinds[i]);
            CHECK((re != NULL) == (kinds[i] != TOK_PRE_GPT2 && kinds[i] != TOK_PRE_SMOLLM));
            CHECK(!re || (tok_pre_kind_of_split(re, &back) && back == kinds[i]));
        }
        CHECK(!tok_pre_kind_of_split("\\p{L}+", &kind));
    }

    TEST("unsupported components are EX_DATAERR naming them");
    {
        char *j = tiny_json("{\"type\":\"Metaspace\",\"replacement\":\"x\"}", MERGES_STR);
        CHECK_EQ_INT(load_error(j, "pre_tokenizer type \"Metaspace\" is not supported"), EX_DATAERR);
        free(j);
        j = tiny_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Isolated\",\"invert\":false}",
                      MERGES_STR);
        CHECK_EQ_INT(load_error(j, "must end in ByteLevel"), EX_DATAERR);
        free(j);
        j = tiny_json("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false}",
                      MERGES_STR);
        CHECK_EQ_INT(load_error(j, "regex"), EX_DATAERR);
        free(j);
        j = tiny_json(PRE_GPT2, "[\"a z\"]");
        CHECK_EQ_INT(load_error(j, "missing from the vocab"), EX_DATAERR);
        free(j);
        j = tiny_json(PRE_GPT2, "[\"a b c\"]");
        CHECK_EQ_INT(load_error(j, "merge 0"), EX_DATAERR);
        free(j);
        CHECK_EQ_INT(load_error("{\"normalizer\":{\"type\":\"NFKC\"},\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}",
                                "normalizer type \"NFKC\" is not supported (NFC is)"),
                     EX_DATAERR);
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "model type \"WordPiece\""),
                     EX_DATAERR);
    }

    TEST("malformed JSON is an error, not a crash");
    {
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[", "malformed JSON"),
                     EX_DATAERR);
        CHECK_EQ_INT(load_error("", "malformed JSON"), EX_DATAERR);
        CHECK_EQ_INT(load_error("[1,2]", "not a JSON object"), EX_DATAERR);
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]},\"decoder\":{\"type\":\"ByteLevel\"}}", "valid id"),
                     EX_DATAERR);
        /* an id far past any vocabulary would size every table by it */
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4194304},\"merges\":[]},"
                                "\"decoder\":{\"type\":\"ByteLevel\"}}",
                                "vocab entry \"a\" has no valid id (an integer from 0 to 4194303)"),
                     EX_DATAERR);
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":"
                                "[{\"id\":1.5,\"content\":\"x\"}],\"decoder\":{\"type\":\"ByteLevel\"}}",
                                "an added token has no valid \"id\""),
                     EX_DATAERR);
        CHECK_EQ_INT(load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]},"
                                "\"decoder\":{\"type\":\"ByteLevel\"}}",
                                "twice"),
                     EX_DATAERR);
        /* every prefix of a valid file fails cleanly */
        char *j = tiny_json(PRE_SMOL, MERGES_PAIRS);
        size_t len = strlen(j);
        int ok = 1;
        for (size_t k = 0; k < len; k += 5) {
            char *pre = xstrndup(j, k);
            tokenizer *t = NULL;
            gerr e = {0};
            if (tok_load_json_text(pre, k, "cut.json", &t, &e) == 0) ok = -1000;
            tok_free(t);
            free(pre);
        }
        CHECK(ok > 0);
        free(j);
        gerr e = {0};
        tokenizer *t = NULL;
        CHECK_EQ_INT(tok_load_json("/nonexistent/tokenizer.json", &t, &e), EX_NOINPUT);
    }

    tok_free(g);
    tok_free(sm);
    return check_done();
}
