/* lib/rollout/server_api: the requests grpo-rollout --server sends and the
 * replies it reads, for each kind of server. vLLM and SGLang cannot run
 * here: their replies below are shaped field for field as their
 * documentation gives them (vLLM's CompletionResponse with a choice's
 * token_ids and logprobs.token_logprobs; SGLang's /generate with meta_info's
 * output_token_logprobs and finish_reason), and the requests are checked for
 * the fields those documents name, as are the LoRA adapter loads (vLLM's
 * LoadLoRAAdapterRequest, SGLang's LoadLoRAAdapterReqInput and its reply).
 * llama.cpp's reply is the shape of its server's /completion (tools/server:
 * tokens, completion_probabilities, stop_type);
 * tests/bats/rollout_server.bats runs the real one. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rollout/server_api.h"

static const int32_t IDS[] = {785, 6722, 315};

static const char *stops_items[] = {"</answer>"};
static const string_list STOPS = {.items = stops_items, .n = 1};

static server_sampling sampling(server_kind kind) {
    return (server_sampling){.kind = kind,
                             .model = "Qwen/Qwen2.5-0.5B-Instruct",
                             .temperature = 0.7,
                             .top_p = 0.95,
                             .min_p = 0,
                             .top_k = 0,
                             .stops = &STOPS,
                             .processed = true};
}

/* The request as JSON, its key checked against what the server reads. */
static cJSON *request(server_kind kind, long long top_k) {
    server_sampling s = sampling(kind);
    s.top_k = top_k;
    strbuf b = {0};
    server_request_body(&s, IDS, 3, 16, 1234, &b);
    cJSON *j = cJSON_Parse(b.data);
    sb_free(&b);
    return j;
}

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static bool is_true(const cJSON *o, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); }

static bool ids_are(const cJSON *a) {
    if (cJSON_GetArraySize(a) != 3) return false;
    for (int i = 0; i < 3; i++)
        if (cJSON_GetArrayItem(a, i)->valuedouble != IDS[i]) return false;
    return true;
}

static void test_requests(void) {
    TEST("server requests: vLLM /v1/completions, SGLang /generate, llama.cpp /completion with token ids and seeds");
    CHECK_EQ_STR(server_endpoint(SERVER_VLLM), "/v1/completions");
    CHECK_EQ_STR(server_endpoint(SERVER_SGLANG), "/generate");
    CHECK_EQ_STR(server_endpoint(SERVER_LLAMACPP), "/completion");

    cJSON *v = request(SERVER_VLLM, 0);
    CHECK(v != NULL);
    CHECK_EQ_STR(cJSON_GetObjectItem(v, "model")->valuestring, "Qwen/Qwen2.5-0.5B-Instruct");
    CHECK(ids_are(cJSON_GetObjectItem(v, "prompt")));
    CHECK(num(v, "max_tokens") == 16 && num(v, "seed") == 1234 && num(v, "logprobs") == 0 && num(v, "n") == 1);
    CHECK(is_true(v, "return_token_ids"));
    CHECK(num(v, "temperature") == 0.7 && num(v, "top_p") == 0.95 && num(v, "top_k") == -1 && num(v, "min_p") == 0);
    CHECK(num(v, "repetition_penalty") == 1 && num(v, "frequency_penalty") == 0 && num(v, "presence_penalty") == 0);
    CHECK_EQ_STR(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "stop"), 0)->valuestring, "</answer>");
    cJSON_Delete(v);

    cJSON *g = request(SERVER_SGLANG, 20);
    CHECK(g != NULL);
    CHECK(ids_are(cJSON_GetObjectItem(g, "input_ids")));
    CHECK(is_true(g, "return_logprob") && num(g, "logprob_start_len") == -1);
    const cJSON *sp = cJSON_GetObjectItem(g, "sampling_params");
    CHECK(num(sp, "max_new_tokens") == 16 && num(sp, "sampling_seed") == 1234 && num(sp, "top_k") == 20);
    CHECK(num(sp, "temperature") == 0.7 && num(sp, "top_p") == 0.95 && num(sp, "min_p") == 0);
    CHECK_EQ_STR(cJSON_GetArrayItem(cJSON_GetObjectItem(sp, "stop"), 0)->valuestring, "</answer>");
    CHECK(cJSON_GetObjectItem(g, "text") == NULL);
    cJSON_Delete(g);

    cJSON *l = request(SERVER_LLAMACPP, 0);
    CHECK(l != NULL);
    CHECK(ids_are(cJSON_GetObjectItem(l, "prompt")));
    CHECK(num(l, "n_predict") == 16 && num(l, "seed") == 1234 && num(l, "n_probs") == 1 && num(l, "top_k") == 0);
    CHECK(is_true(l, "return_tokens") && is_true(l, "post_sampling_probs"));
    const cJSON *order = cJSON_GetObjectItem(l, "samplers");
    CHECK(cJSON_GetArraySize(order) == 4 && !strcmp(cJSON_GetArrayItem(order, 0)->valuestring, "temperature"));
    CHECK(cJSON_GetObjectItem(l, "stop") == NULL); /* cut by grpo-rollout: llama.cpp drops a stop string's probabilities */
    cJSON_Delete(l);
}

static const char VLLM_REPLY[] =
    "{\"id\":\"cmpl-8d0b6c1f\",\"object\":\"text_completion\",\"created\":1730000000,"
    "\"model\":\"Qwen/Qwen2.5-0.5B-Instruct\",\"choices\":[{\"index\":0,\"text\":\" Paris.\","
    "\"logprobs\":{\"text_offset\":[0,6],\"token_logprobs\":[-0.25,-0.5],\"tokens\":[\" Paris\",\".\"],"
    "\"top_logprobs\":[{\" Paris\":-0.25},{\".\":-0.5}]},\"finish_reason\":\"stop\",\"stop_reason\":null,"
    "\"token_ids\":[12095,13],\"prompt_logprobs\":null,\"prompt_token_ids\":[785,6722,315]}],"
    "\"usage\":{\"prompt_tokens\":3,\"total_tokens\":5,\"completion_tokens\":2}}";

static const char SGLANG_REPLY[] =
    "{\"text\":\" Paris.\",\"output_ids\":[12095,13],\"meta_info\":{\"id\":\"4f2a9c\","
    "\"finish_reason\":{\"type\":\"length\",\"length\":2},\"prompt_tokens\":3,\"weight_version\":\"default\","
    "\"completion_tokens\":2,\"cached_tokens\":0,\"e2e_latency\":0.05,\"input_token_logprobs\":[],"
    "\"output_token_logprobs\":[[-0.25,12095,null],[-0.5,13,null]],\"input_top_logprobs\":[],"
    "\"output_top_logprobs\":[]}}";

static const char LLAMACPP_REPLY[] =
    "{\"index\":0,\"content\":\" Paris.\",\"tokens\":[12095,13],\"id_slot\":0,\"stop\":true,\"model\":\"smol\","
    "\"tokens_predicted\":2,\"tokens_evaluated\":3,\"has_new_line\":false,\"truncated\":false,"
    "\"stop_type\":\"eos\",\"stopping_word\":\"\",\"tokens_cached\":4,"
    "\"completion_probabilities\":[{\"id\":12095,\"token\":\" Paris\",\"bytes\":[32,80,97,114,105,115],"
    "\"prob\":0.7788007830714049,\"top_probs\":[{\"id\":12095,\"token\":\" Paris\",\"bytes\":[32],\"prob\":0.7788}]},"
    "{\"id\":13,\"token\":\".\",\"bytes\":[46],\"prob\":0.6065306597126334,\"top_probs\":[]}]}";

static int parse(server_kind kind, const char *body, server_reply *r, char *why) {
    return server_parse_reply(kind, body, strlen(body), r, why, 256);
}

static void test_replies(void) {
    TEST("server replies: token ids, log-probabilities and finish reasons of each kind");
    server_reply r = {0};
    char why[256];
    CHECK_EQ_INT(parse(SERVER_VLLM, VLLM_REPLY, &r, why), SERVER_REPLY_OK);
    CHECK(r.n == 2 && r.tokens[0] == 12095 && r.tokens[1] == 13 && r.logprobs[0] == -0.25 && r.logprobs[1] == -0.5);
    CHECK_EQ_INT(r.finish, SERVER_FINISH_STOP);
    CHECK_EQ_INT(parse(SERVER_SGLANG, SGLANG_REPLY, &r, why), SERVER_REPLY_OK);
    CHECK(r.n == 2 && r.tokens[0] == 12095 && r.tokens[1] == 13 && r.logprobs[1] == -0.5);
    CHECK_EQ_INT(r.finish, SERVER_FINISH_LENGTH);
    CHECK_EQ_INT(parse(SERVER_LLAMACPP, LLAMACPP_REPLY, &r, why), SERVER_REPLY_OK);
    CHECK(r.n == 2 && r.tokens[1] == 13);
    CHECK_NEAR(r.logprobs[0], -0.25, 1e-12);
    CHECK_NEAR(r.logprobs[1], -0.5, 1e-12);
    CHECK_EQ_INT(r.finish, SERVER_FINISH_STOP);
    server_reply_free(&r);
}

/* The reply with `from` replaced by `to` (once). */
static char *edit(const char *body, const char *from, const char *to) {
    const char *at = strstr(body, from);
    if (!at) return NULL;
    size_t n = strlen(body) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    size_t head = (size_t)(at - body);
    memcpy(out, body, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

static int parse_edited(server_kind kind, const char *body, const char *from, const char *to, char *why) {
    char *b = edit(body, from, to);
    if (!b) return -1;
    server_reply r = {0};
    int rc = parse(kind, b, &r, why);
    server_reply_free(&r);
    free(b);
    return rc;
}

static void test_bad_replies(void) {
    TEST("server replies: absent or miscounted log-probabilities, split UTF-8, foreign ids, not JSON, aborts told apart");
    char why[256];
    CHECK_EQ_INT(parse_edited(SERVER_VLLM, VLLM_REPLY, "\"token_logprobs\":[-0.25,-0.5]", "\"token_logprobs\":[-0.25]",
                              why),
                 SERVER_REPLY_BAD);
    CHECK(strstr(why, "1 log-probabilities for 2 tokens") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_VLLM, VLLM_REPLY, "\"logprobs\":{", "\"lp\":{", why), SERVER_REPLY_BAD);
    CHECK(strstr(why, "no log-probabilities") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_VLLM, VLLM_REPLY, "\"token_ids\"", "\"ids\"", why), SERVER_REPLY_BAD);
    CHECK(strstr(why, "token_ids") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_VLLM, VLLM_REPLY, "\"stop\",\"stop_reason\"", "\"abort\",\"stop_reason\"", why),
                 SERVER_REPLY_ABORTED);
    CHECK_EQ_INT(parse_edited(SERVER_SGLANG, SGLANG_REPLY, "[12095,13]", "[12095,14]", why), SERVER_REPLY_BAD);
    CHECK(strstr(why, "output_ids[1]") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_SGLANG, SGLANG_REPLY, "\"output_token_logprobs\"", "\"x\"", why),
                 SERVER_REPLY_BAD);
    CHECK(strstr(why, "no log-probabilities") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_SGLANG, SGLANG_REPLY, "[-0.5,13,null]", "[null,13,null]", why), SERVER_REPLY_BAD);
    CHECK_EQ_INT(parse_edited(SERVER_LLAMACPP, LLAMACPP_REPLY, "{\"id\":13,", "{\"id\":14,", why), SERVER_REPLY_BAD);
    CHECK(strstr(why, "completion_probabilities[1].id") != NULL);
    /* a token without its probability, the others in order: llama.cpp's split UTF-8 character */
    CHECK_EQ_INT(parse_edited(SERVER_LLAMACPP, LLAMACPP_REPLY, "\"tokens\":[12095,13]", "\"tokens\":[12095,226,13]",
                              why),
                 SERVER_REPLY_SPLIT);
    CHECK(strstr(why, "2 log-probabilities for 3 tokens") != NULL && strstr(why, "UTF-8") != NULL);
    CHECK_EQ_INT(parse_edited(SERVER_LLAMACPP, LLAMACPP_REPLY, "\"tokens\":[12095,13]", "\"tokens\":[13,12095,7]", why),
                 SERVER_REPLY_BAD);
    CHECK_EQ_INT(parse_edited(SERVER_LLAMACPP, LLAMACPP_REPLY, "\"completion_probabilities\"", "\"x\"", why),
                 SERVER_REPLY_BAD);
    CHECK_EQ_INT(parse_edited(SERVER_LLAMACPP, LLAMACPP_REPLY, "\"stop_type\":\"eos\"", "\"stop_type\":\"limit\"", why),
                 SERVER_REPLY_OK);
    server_reply r = {0};
    CHECK_EQ_INT(parse(SERVER_VLLM, "<html>502 Bad Gateway</html>", &r, why), SERVER_REPLY_NOT_JSON);
    CHECK_EQ_INT(parse(SERVER_SGLANG, "[1,2]", &r, why), SERVER_REPLY_BAD);
    server_reply_free(&r);
}

static void test_models(void) {
    TEST("GET /v1/models: owned_by names the kind; the model asked for, its context");
    server_info in = {0};
    char why[256];
    static const char vllm[] = "{\"object\":\"list\",\"data\":[{\"id\":\"Qwen/Qwen2.5-0.5B-Instruct\",\"object\":\"model\","
                               "\"created\":1730000000,\"owned_by\":\"vllm\",\"root\":\"Qwen/Qwen2.5-0.5B-Instruct\","
                               "\"parent\":null,\"max_model_len\":32768},{\"id\":\"grpo-policy\",\"object\":\"model\","
                               "\"owned_by\":\"vllm\",\"root\":\"/ckpt/adapter\",\"parent\":\"Qwen/Qwen2.5-0.5B-Instruct\"}]}";
    CHECK(server_parse_models(vllm, strlen(vllm), NULL, &in, why, sizeof why));
    CHECK_EQ_INT(in.kind, SERVER_VLLM);
    CHECK_EQ_STR(in.model.data, "Qwen/Qwen2.5-0.5B-Instruct");
    CHECK_EQ_INT(in.context, 32768);
    CHECK(server_parse_models(vllm, strlen(vllm), "grpo-policy", &in, why, sizeof why));
    CHECK_EQ_STR(in.model.data, "grpo-policy");
    CHECK_EQ_INT(in.context, 0);
    CHECK(!server_parse_models(vllm, strlen(vllm), "other", &in, why, sizeof why));
    CHECK(strstr(why, "no model \"other\"") != NULL);
    static const char sglang[] = "{\"object\":\"list\",\"data\":[{\"id\":\"qwen/qwen2.5-0.5b-instruct\","
                                 "\"object\":\"model\",\"created\":1730000000,\"owned_by\":\"sglang\",\"root\":"
                                 "\"qwen/qwen2.5-0.5b-instruct\",\"max_model_len\":32768}]}";
    CHECK(server_parse_models(sglang, strlen(sglang), NULL, &in, why, sizeof why));
    CHECK_EQ_INT(in.kind, SERVER_SGLANG);
    static const char llama[] = "{\"object\":\"list\",\"data\":[{\"id\":\"smol.gguf\",\"object\":\"model\",\"created\":1,"
                                "\"owned_by\":\"llamacpp\",\"meta\":{\"n_vocab\":49152,\"n_ctx\":2048}}]}";
    CHECK(server_parse_models(llama, strlen(llama), NULL, &in, why, sizeof why));
    CHECK_EQ_INT(in.kind, SERVER_LLAMACPP);
    CHECK_EQ_INT(in.context, 2048);
    static const char other[] = "{\"data\":[{\"id\":\"gpt-x\",\"owned_by\":\"openai\"}]}";
    CHECK(server_parse_models(other, strlen(other), NULL, &in, why, sizeof why));
    CHECK_EQ_INT(in.kind, SERVER_AUTO);
    CHECK_EQ_STR(in.owner.data, "openai");
    CHECK(!server_parse_models("{}", 2, NULL, &in, why, sizeof why));
    server_info_free(&in);
}

/* The object's keys, sorted and joined by commas: a request has exactly these. */
static void keys_of(const cJSON *o, char *out, size_t cap) {
    const char *names[16];
    int n = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, o) {
        if (n < 16) names[n++] = v->string;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        strncat(out, names[i], cap - strlen(out) - 1);
        if (i + 1 < n) strncat(out, ",", cap - strlen(out) - 1);
    }
}

/* The load request of name and path has exactly the keys want (and vLLM's load_inplace true). */
static void check_load(server_kind kind, const char *name, const char *path, const char *want) {
    strbuf b = {0};
    char keys[256];
    server_lora_load_body(kind, name, path, &b);
    cJSON *j = cJSON_Parse(b.data);
    CHECK(j != NULL);
    keys_of(j, keys, sizeof keys);
    CHECK_EQ_STR(keys, want);
    CHECK_EQ_STR(cJSON_GetObjectItem(j, "lora_name")->valuestring, name);
    CHECK_EQ_STR(cJSON_GetObjectItem(j, "lora_path")->valuestring, path);
    CHECK(kind != SERVER_VLLM || is_true(j, "load_inplace"));
    cJSON_Delete(j);
    sb_free(&b);
}

/* A LoRA adapter: loaded as vLLM's /v1/load_lora_adapter and SGLang's
 * /load_lora_adapter (LoadLoRAAdapterRequest, LoadLoRAAdapterReqInput) take
 * it, then asked for by name (vLLM: "model"; SGLang: "lora_path"). */
static void test_lora(void) {
    TEST("LoRA adapters: the load and unload requests of vLLM and SGLang, none for llama.cpp; requests name it");
    CHECK_EQ_STR(server_lora_load_endpoint(SERVER_VLLM), "/v1/load_lora_adapter");
    CHECK(server_lora_unload_endpoint(SERVER_VLLM) == NULL); /* load_inplace replaces it */
    CHECK_EQ_STR(server_lora_load_endpoint(SERVER_SGLANG), "/load_lora_adapter");
    CHECK_EQ_STR(server_lora_unload_endpoint(SERVER_SGLANG), "/unload_lora_adapter");
    CHECK(server_lora_load_endpoint(SERVER_LLAMACPP) == NULL && server_lora_unload_endpoint(SERVER_LLAMACPP) == NULL);

    check_load(SERVER_VLLM, "grpo-policy", "/runs/x/server/lora/0003", "load_inplace,lora_name,lora_path");
    check_load(SERVER_SGLANG, "a \"quoted\" name", "/p/\\q", "lora_name,lora_path"); /* escaped as JSON */
    strbuf b = {0};
    server_lora_unload_body("grpo-policy", &b);
    CHECK_EQ_STR(b.data, "{\"lora_name\":\"grpo-policy\"}");

    /* the generation requests ask for it */
    server_sampling s = sampling(SERVER_VLLM);
    s.adapter = "grpo-policy";
    server_request_body(&s, IDS, 3, 16, 1234, &b);
    cJSON *v = cJSON_Parse(b.data);
    CHECK_EQ_STR(cJSON_GetObjectItem(v, "model")->valuestring, "grpo-policy");
    CHECK(cJSON_GetObjectItem(v, "lora_path") == NULL);
    cJSON_Delete(v);
    s = sampling(SERVER_SGLANG);
    server_request_body(&s, IDS, 3, 16, 1234, &b);
    cJSON *g = cJSON_Parse(b.data);
    CHECK(cJSON_GetObjectItem(g, "lora_path") == NULL); /* the model itself */
    cJSON_Delete(g);
    s.adapter = "grpo-policy";
    server_request_body(&s, IDS, 3, 16, 1234, &b);
    g = cJSON_Parse(b.data);
    CHECK(g != NULL);
    CHECK_EQ_STR(cJSON_GetObjectItem(g, "lora_path")->valuestring, "grpo-policy");
    CHECK(ids_are(cJSON_GetObjectItem(g, "input_ids")));
    cJSON_Delete(g);
    s = sampling(SERVER_LLAMACPP);
    s.adapter = NULL;
    server_request_body(&s, IDS, 3, 16, 1234, &b);
    CHECK(strstr(b.data, "lora") == NULL);
    sb_free(&b);

    /* the replies to a load: vLLM's text; SGLang's LoadLoRAAdapterReqOutput */
    char why[256];
    static const char vllm_ok[] = "Success: LoRA adapter 'grpo-policy' added successfully.";
    CHECK_EQ_INT(server_parse_lora_reply(SERVER_VLLM, vllm_ok, strlen(vllm_ok), why, sizeof why), SERVER_LORA_OK);
    static const char sglang_ok[] = "{\"rid\":null,\"http_worker_ipc\":null,\"success\":true,\"error_message\":\"\","
                                    "\"loaded_adapters\":{\"grpo-policy\":\"/runs/x/server/lora/0003\"}}";
    CHECK_EQ_INT(server_parse_lora_reply(SERVER_SGLANG, sglang_ok, strlen(sglang_ok), why, sizeof why),
                 SERVER_LORA_OK);
    static const char sglang_no[] = "{\"success\":false,\"error_message\":\"LoRA is not enabled. Please set "
                                    "`--enable-lora` to enable LoRA.\",\"loaded_adapters\":null}";
    CHECK_EQ_INT(server_parse_lora_reply(SERVER_SGLANG, sglang_no, strlen(sglang_no), why, sizeof why),
                 SERVER_LORA_REFUSED);
    CHECK(strstr(why, "LoRA is not enabled") != NULL);
    CHECK_EQ_INT(server_parse_lora_reply(SERVER_SGLANG, "<html>", 6, why, sizeof why), SERVER_LORA_NOT_JSON);
    CHECK_EQ_INT(server_parse_lora_reply(SERVER_SGLANG, "{\"ok\":1}", 8, why, sizeof why), SERVER_LORA_BAD);
}

int main(void) {
    test_requests();
    test_replies();
    test_bad_replies();
    test_models();
    test_lora();
    return check_done();
}
