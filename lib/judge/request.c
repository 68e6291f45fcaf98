#include "request.h"

#include <string.h>

#include "../prep/prompt.h"
#include "../util/sha256.h"

void judge_request_build(const judge_request_opts *p, const char *user, size_t user_len, strbuf *body,
                         strbuf *canonical, uint8_t key[32]) {
    sb_clear(body);
    sb_puts(body, "{\"model\":");
    sb_json_string(body, p->model, strlen(p->model));
    sb_puts(body, ",\"messages\":");
    prompt_messages(body, p->system, user, user_len); /* the same messages grpo-prep writes */
    sb_puts(body, ",\"temperature\":");
    sb_json_number(body, p->temperature);
    sb_printf(body, ",\"max_tokens\":%lld", p->max_tokens);
    /* The canonical request is the body with the template's hash in place of the closing brace. */
    sb_clear(canonical);
    sb_append(canonical, body->data, body->len);
    char hex[65];
    sha256_hex(p->template_sha256, 32, hex);
    sb_printf(canonical, ",\"template_sha256\":\"%s\"}", hex);
    sb_putc(body, '}');
    sha256(canonical->data, canonical->len, key);
}

double judge_request_token_estimate(size_t body_len, long long max_tokens) {
    return (double)body_len / 4.0 + (double)max_tokens;
}

void judge_chat_url(const char *base, strbuf *out) {
    size_t n = strlen(base);
    while (n && base[n - 1] == '/') n--;
    sb_append(out, base, n);
    sb_puts(out, "/chat/completions");
}
