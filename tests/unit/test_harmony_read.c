/* lib/chat/harmony_read.c: a harmony (gpt-oss) turn read from its token
 * ids. The tokenizer here has a token per byte and harmony's special tokens
 * added, so a text names its ids exactly: special tokens where it is
 * encoded with them matched, plain bytes where the model wrote the same
 * characters as ordinary tokens. The answer is the final channel's, which
 * no ordinary text can open. */
#include <stdlib.h>

#include "chat/harmony_read.h"
#include "check.h"

static tokenizer *harmony_tokenizer(void) {
    static char strs[256][5];
    const char *toks[256 + 8];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tok_byte_to_unicode((unsigned char)b);
        char *s = strs[b]; /* the code point as UTF-8 */
        if (cp < 0x80) s[0] = (char)cp;
        else s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F));
        toks[b] = s;
    }
    static const char *const specials[] = {"<|start|>", "<|end|>",    "<|message|>", "<|channel|>",
                                           "<|constrain|>", "<|return|>", "<|call|>", "<|endoftext|>"};
    tok_added_token added[8];
    for (int i = 0; i < 8; i++) {
        toks[256 + i] = specials[i];
        added[i] = (tok_added_token){.content = specials[i], .id = 256 + i, .special = true};
    }
    tok_arrays a = {toks, 256 + 8, NULL, 0, added, 8, TOK_PRE_GPT2, false};
    tokenizer *t = NULL;
    gerr e = {0};
    if (tok_from_arrays(&a, &t, &e)) printf("#   %s\n", e.msg);
    return t;
}

typedef struct {
    int32_t ids[4096];
    size_t n;
} ids_t;

/* Appends text's ids: special tokens matched when special, else as bytes. */
static void put(const tokenizer *t, ids_t *v, const char *text, bool special) {
    int32_t *ids;
    size_t n;
    gerr e = {0};
    if (tok_encode(t, text, strlen(text), special, &ids, &n, &e)) return;
    for (size_t i = 0; i < n && v->n < 4096; i++) v->ids[v->n++] = ids[i];
    free(ids);
}

static harmony_turn read_ids(const tokenizer *t, const harmony_tokens *h, const ids_t *v) {
    harmony_turn turn;
    harmony_read(t, h, v->ids, v->n, SIZE_MAX, &turn);
    return turn;
}

static harmony_turn read_text(const tokenizer *t, const harmony_tokens *h, const char *text) {
    ids_t v = {.n = 0};
    put(t, &v, text, true);
    return read_ids(t, h, &v);
}

int main(void) {
    tokenizer *t = harmony_tokenizer();
    if (!t) return 1;
    harmony_tokens h;
    gerr e = {0};
    harmony_turn turn;

    TEST("the special tokens are found; a tokenizer without them is named");
    CHECK_EQ_INT(harmony_tokens_find(t, "tok", &h, &e), 0);
    CHECK_EQ_INT(h.start, 256);
    CHECK_EQ_INT(h.call, 262);
    {
        const char *toks[] = {"a"};
        tok_arrays a = {toks, 1, NULL, 0, NULL, 0, TOK_PRE_GPT2, false};
        tokenizer *plain = NULL;
        harmony_tokens none;
        CHECK_EQ_INT(tok_from_arrays(&a, &plain, &e), 0);
        CHECK_EQ_INT(harmony_tokens_find(plain, "m/tokenizer.json", &none, &e), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "m/tokenizer.json: the tokenizer has no <|start|> token, which the harmony chat template "
                            "(gpt-oss) needs");
        tok_free(plain);
    }

    TEST("the answer is the final channel's; the reasoning is the analysis channel's");
    turn = read_text(t, &h, "<|channel|>analysis<|message|>User asks 2+2. Simple.<|end|><|start|>assistant"
                            "<|channel|>final<|message|>2 + 2 = 4.<|return|>");
    CHECK(turn.has_final);
    CHECK_EQ_STR(turn.final.data, "2 + 2 = 4.");
    CHECK_EQ_STR(turn.thinking.data, "User asks 2+2. Simple.");
    CHECK_EQ_INT(cJSON_GetArraySize(turn.calls), 0);
    harmony_turn_free(&turn);

    TEST("no final channel, no answer: an answer in the reasoning is not one");
    turn = read_text(t, &h, "<|channel|>analysis<|message|>The answer is 42.<|end|>");
    CHECK(!turn.has_final);
    CHECK_EQ_STR(turn.final.data, "");
    CHECK_EQ_STR(turn.thinking.data, "The answer is 42.");
    harmony_turn_free(&turn);
    turn = read_text(t, &h, "<|channel|>analysis<|message|>42 for sure"); /* cut off while reasoning */
    CHECK(!turn.has_final);
    CHECK_EQ_STR(turn.thinking.data, "42 for sure");
    harmony_turn_free(&turn);

    TEST("a final channel written as ordinary tokens inside the reasoning opens nothing");
    {
        ids_t v = {.n = 0};
        put(t, &v, "<|channel|>analysis<|message|>think", true);
        put(t, &v, "<|end|><|start|>assistant<|channel|>final<|message|>42", false); /* plain text */
        put(t, &v, "<|end|><|start|>assistant<|channel|>final<|message|>41<|return|>", true);
        turn = read_ids(t, &h, &v);
        CHECK(turn.has_final);
        CHECK_EQ_STR(turn.final.data, "41");
        /* the plain copy is reasoning text, special-token lookalikes and all */
        CHECK_EQ_STR(turn.thinking.data, "think<|end|><|start|>assistant<|channel|>final<|message|>42");
        harmony_turn_free(&turn);
        v.n = 0; /* the same in a header: "final" after a plain "<|channel|>" is no channel */
        put(t, &v, "<|channel|>analysis<|message|>x<|end|><|start|>assistant", true);
        put(t, &v, "<|channel|>final", false);
        put(t, &v, "<|message|>42<|return|>", true);
        turn = read_ids(t, &h, &v);
        CHECK(!turn.has_final);
        harmony_turn_free(&turn);
    }

    TEST("only the assistant's messages count; the last final message is the answer");
    turn = read_text(t, &h, "<|channel|>final<|message|>1<|end|><|start|>user<|message|>say 7<|end|>"
                            "<|start|>assistant<|channel|>final<|message|>2<|end|><|start|>user<|channel|>final"
                            "<|message|>7<|end|>");
    CHECK_EQ_STR(turn.final.data, "2");
    harmony_turn_free(&turn);
    turn = read_text(t, &h, "<|start|>assistant<|channel|>final<|message|>5<|return|>"); /* an extra opening */
    CHECK_EQ_STR(turn.final.data, "5");
    harmony_turn_free(&turn);

    TEST("a stop string's cut applies to the channel's text");
    {
        const char *text = "<|channel|>analysis<|message|>ab<|end|><|start|>assistant<|channel|>final<|message|>"
                           "12 STOP 34";
        ids_t v = {.n = 0};
        put(t, &v, text, true);
        /* the turn's text with special tokens left out: "analysisab" "assistantfinal" "12 STOP 34" */
        size_t at = strlen("analysisabassistantfinal12 ");
        harmony_read(t, &h, v.ids, v.n, at, &turn);
        CHECK_EQ_STR(turn.final.data, "12 ");
        CHECK_EQ_STR(turn.thinking.data, "ab");
        harmony_turn_free(&turn);
        harmony_read(t, &h, v.ids, v.n, strlen("analysisa"), &turn); /* cut inside the reasoning */
        CHECK(turn.has_final);
        CHECK_EQ_STR(turn.final.data, "");
        CHECK_EQ_STR(turn.thinking.data, "a");
        harmony_turn_free(&turn);
    }

    TEST("tool calls: the recipient in the channel or the author part, arguments a JSON object");
    turn = read_text(t, &h, "<|channel|>analysis<|message|>Need calc.<|end|><|start|>assistant<|channel|>commentary "
                            "to=functions.calc <|constrain|>json<|message|>{\"expr\": \"6*7\"}<|call|>");
    {
        char *s = cJSON_PrintUnformatted(turn.calls);
        CHECK_EQ_STR(s, "[{\"name\":\"calc\",\"arguments\":{\"expr\":\"6*7\"}}]");
        free(s);
        CHECK(!turn.has_final);
        CHECK_EQ_STR(turn.thinking.data, "Need calc.");
    }
    harmony_turn_free(&turn);
    turn = read_text(t, &h, " to=functions.lookup<|channel|>commentary json<|message|>{}<|call|>");
    {
        char *s = cJSON_PrintUnformatted(turn.calls);
        CHECK_EQ_STR(s, "[{\"name\":\"lookup\",\"arguments\":{}}]");
        free(s);
    }
    harmony_turn_free(&turn);
    turn = read_text(t, &h, "<|channel|>commentary to=functions.calc<|message|>not json<|call|>");
    CHECK_EQ_INT(cJSON_GetArraySize(turn.calls), 0); /* malformed: left out */
    harmony_turn_free(&turn);

    TEST("several analysis messages are joined by a newline; an empty turn says nothing");
    turn = read_text(t, &h, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b"
                            "<|end|><|start|>assistant<|channel|>final<|message|><|return|>");
    CHECK_EQ_STR(turn.thinking.data, "a\nb");
    CHECK(turn.has_final);
    CHECK_EQ_STR(turn.final.data, "");
    harmony_turn_free(&turn);
    harmony_read(t, &h, NULL, 0, SIZE_MAX, &turn);
    CHECK(!turn.has_final);
    CHECK_EQ_STR(turn.final.data, "");
    CHECK_EQ_STR(turn.thinking.data, "");
    harmony_turn_free(&turn);

    tok_free(t);
    return check_done();
}
