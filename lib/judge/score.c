#include "score.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <cjson/cJSON.h>
#include <math.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

struct judge_scorer {
    pcre2_code *re; /* NULL: the first number */
    pcre2_match_data *md;
    bool has_group;
    double scale;
};

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Length of the number starting at text[i] (0 when none starts there). */
static size_t number_at(const char *text, size_t len, size_t i) {
    size_t j = i;
    if (j < len && (text[j] == '+' || text[j] == '-')) j++;
    size_t int_start = j;
    while (j < len && is_digit(text[j])) j++;
    bool int_digits = j > int_start;
    if (j + 1 < len && text[j] == '.' && is_digit(text[j + 1])) {
        j++;
        while (j < len && is_digit(text[j])) j++;
    } else if (!int_digits) {
        return 0;
    }
    if (j < len && (text[j] == 'e' || text[j] == 'E')) {
        size_t k = j + 1;
        if (k < len && (text[k] == '+' || text[k] == '-')) k++;
        if (k < len && is_digit(text[k])) {
            while (k < len && is_digit(text[k])) k++;
            j = k;
        }
    }
    return j - i;
}

static bool parse_span(const char *s, size_t n, double *out) {
    char buf[128];
    if (n >= sizeof buf) {
        /* hundreds of digits: still one number, read from a heap copy */
        char *big = xstrndup(s, n);
        *out = strtod(big, NULL);
        free(big);
    } else {
        memcpy(buf, s, n);
        buf[n] = 0;
        *out = strtod(buf, NULL);
    }
    return isfinite(*out);
}

static bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool judge_first_number(const char *text, size_t len, double *out) {
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (!is_digit(c) && c != '+' && c != '-' && c != '.') continue;
        /* a '-' or '+' right after a letter or digit joins words ("GPT-4", "3-5"): not a sign */
        if ((c == '-' || c == '+') && i > 0 && is_alnum(text[i - 1])) continue;
        size_t n = number_at(text, len, i);
        if (n) return parse_span(text + i, n, out);
    }
    return false;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool judge_whole_number(const char *text, size_t len, double *out) {
    while (len && is_space(text[0])) text++, len--;
    while (len && is_space(text[len - 1])) len--;
    return len && number_at(text, len, 0) == len && parse_span(text, len, out);
}

int judge_scorer_open(judge_scorer **out, const char *regex, double scale, gerr *e) {
    if (!isfinite(scale)) return gerr_set(e, EX_USAGE, "--judge-scale: expected a finite number");
    judge_scorer *s = xcalloc(1, sizeof *s);
    s->scale = scale;
    if (regex) {
        int err;
        PCRE2_SIZE off;
        s->re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &err,
                              &off, NULL);
        if (!s->re) {
            PCRE2_UCHAR msg[256];
            if (pcre2_get_error_message(err, msg, sizeof msg) < 0) strcpy((char *)msg, "unknown error");
            free(s);
            return gerr_set(e, EX_USAGE, "--judge-regex: %s at offset %zu", (char *)msg, (size_t)off);
        }
        uint32_t groups = 0;
        pcre2_pattern_info(s->re, PCRE2_INFO_CAPTURECOUNT, &groups);
        s->has_group = groups > 0;
        s->md = pcre2_match_data_create_from_pattern(s->re, NULL);
        if (!s->md) {
            pcre2_code_free(s->re);
            free(s);
            return gerr_set(e, EX_SOFTWARE, "--judge-regex: out of memory");
        }
    }
    *out = s;
    return 0;
}

double judge_scorer_score(judge_scorer *s, const char *reply, size_t len) {
    double v;
    if (!s->re) {
        if (!judge_first_number(reply, len, &v)) return NAN;
    } else {
        int rc = pcre2_match(s->re, (PCRE2_SPTR)reply, len, 0, 0, s->md, NULL);
        if (rc <= 0) return NAN;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        int g = s->has_group ? 1 : 0;
        if (g >= rc || ov[2 * g] == PCRE2_UNSET) return NAN;
        if (!judge_whole_number(reply + ov[2 * g], ov[2 * g + 1] - ov[2 * g], &v)) return NAN;
    }
    v *= s->scale;
    return isfinite(v) ? v : NAN;
}

void judge_scorer_free(judge_scorer *s) {
    if (!s) return;
    pcre2_match_data_free(s->md);
    pcre2_code_free(s->re);
    free(s);
}

static long long usage_count(const cJSON *usage, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(usage, name);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e18 ? (long long)v->valuedouble : -1;
}

bool judge_parse_reply(const char *body, size_t len, strbuf *content, long long *prompt_tokens,
                       long long *completion_tokens) {
    cJSON *root = cJSON_ParseWithLength(body, len);
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(root, "choices");
    const cJSON *first = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(first, "message");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(msg, "content");
    bool ok = cJSON_IsObject(msg) && (!text || cJSON_IsNull(text) || cJSON_IsString(text));
    if (ok) {
        sb_clear(content);
        if (cJSON_IsString(text)) sb_puts(content, text->valuestring);
        else sb_append(content, "", 0);
        const cJSON *usage = cJSON_GetObjectItemCaseSensitive(root, "usage");
        *prompt_tokens = usage_count(usage, "prompt_tokens");
        *completion_tokens = usage_count(usage, "completion_tokens");
    }
    cJSON_Delete(root);
    return ok;
}
