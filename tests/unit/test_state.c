/* Checkpoint state files (lib/train/state.h): grpo/state.json and
 * grpo/optimizer.safetensors round trips, the exact bytes of state.json,
 * readers that ignore unknown fields, and one error per malformed case,
 * each naming the file and the field or tensor.
 *
 * Driver mode for tests/bats/train_ref.bats (independent readers: Python's
 * json and safetensors):
 *   test_state --write-sample DIR
 * writes DIR/state.json (sample_state) and DIR/optimizer.safetensors (AdamW,
 * the two parameters of params_init(1.0)). */
#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "helpers.h"
#include "io/mapped.h"
#include "io/outstream.h"
#include "formats/safetensors.h"
#include "train/state.h"

static char *path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = xmalloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static const char *SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

static train_state sample_state(void) {
    train_state s = {0};
    s.step = 42;
    s.schedule = SCHED_COSINE;
    s.schedule_step = 42;
    s.warmup_steps = 5;
    s.total_steps = 100;
    s.seed = 1000000000000000000LL; /* past 2^53: must survive exactly */
    s.next_index = 43;
    s.flags_json = xstrdup("{\"optimizer\":\"adamw\",\"lr\":1e-06,\"loss\":\"grpo\",\"beta\":0.04}");
    memcpy(s.batch_sha256, SHA, 65);
    s.parent = xstrdup("runs/ckpt-0041 \"q\" \xc3\xa9");
    s.version = xstrdup("0.1.0");
    return s;
}

/* Writes text to dir/name and reads it as a state; returns the code, e
 * holds the message. */
static int read_text(const char *dir, const char *text, gerr *e) {
    char *p = path_in(dir, "bad.json");
    gerr we = {0};
    int rc = write_file_atomic(p, text, strlen(text), &we);
    if (rc) {
        printf("# write: %s\n", we.msg);
        free(p);
        return -1;
    }
    train_state s;
    rc = state_read(&s, p, e);
    state_free(&s);
    free(p);
    return rc;
}

/* A good file with one substitution: `from` replaced by `to`. */
static char *good_with(const char *from, const char *to) {
    const char *good =
        "{\"step\":3,\"schedule\":{\"name\":\"linear\",\"step\":3,\"warmup_steps\":0,\"total_steps\":10},"
        "\"rng\":{\"seed\":7,\"next_index\":3},\"flags\":{\"lr\":1e-05},"
        "\"batch_sha256\":\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\","
        "\"parent\":\"a\",\"version\":\"0.1.0\"}\n";
    const char *at = strstr(good, from);
    if (!at) return xstrdup("(substitution not found)");
    size_t n = strlen(good) - strlen(from) + strlen(to) + 1;
    char *out = xmalloc(n);
    snprintf(out, n, "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
    return out;
}

static void test_state_json(const char *dir) {
    TEST("state.json: round trip and the exact bytes");
    {
        char *p = path_in(dir, "state.json");
        train_state s = sample_state();
        gerr e = {0};
        CHECK_EQ_INT(state_write(&s, p, &e), 0);
        char *text = read_whole_file(p, NULL, &e);
        CHECK_EQ_STR(text,
                     "{\"step\":42,\"schedule\":{\"name\":\"cosine\",\"step\":42,\"warmup_steps\":5,\"total_steps\":100},"
                     "\"rng\":{\"seed\":1000000000000000000,\"next_index\":43},"
                     "\"flags\":{\"optimizer\":\"adamw\",\"lr\":1e-06,\"loss\":\"grpo\",\"beta\":0.04},"
                     "\"batch_sha256\":\"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\","
                     "\"parent\":\"runs/ckpt-0041 \\\"q\\\" \xc3\xa9\",\"version\":\"0.1.0\"}\n");
        free(text);
        train_state r;
        CHECK_EQ_INT(state_read(&r, p, &e), 0);
        CHECK_EQ_INT(r.step, 42);
        CHECK(r.schedule == SCHED_COSINE);
        CHECK_EQ_INT(r.schedule_step, 42);
        CHECK_EQ_INT(r.warmup_steps, 5);
        CHECK_EQ_INT(r.total_steps, 100);
        CHECK_EQ_INT(r.seed, 1000000000000000000LL);
        CHECK_EQ_INT(r.next_index, 43);
        CHECK_EQ_STR(r.flags_json, s.flags_json);
        CHECK_EQ_STR(r.batch_sha256, SHA);
        CHECK_EQ_STR(r.parent, s.parent);
        CHECK_EQ_STR(r.version, "0.1.0");
        state_free(&r);
        CHECK(r.flags_json == NULL && r.parent == NULL);
        state_free(&s);
        free(p);
    }

    TEST("state.json: paths written after parent and read back; optional");
    {
        char *p = path_in(dir, "paths.json");
        train_state s = sample_state();
        s.paths_json = xstrdup("{\"ref\":{\"relative\":\"../m\",\"absolute\":\"/r/m\"}}");
        gerr e = {0};
        CHECK_EQ_INT(state_write(&s, p, &e), 0);
        char *text = read_whole_file(p, NULL, &e);
        CHECK(text && strstr(text, "\"parent\":\"runs/ckpt-0041 \\\"q\\\" \xc3\xa9\",\"paths\":{\"ref\":{\"relative\":"
                                   "\"../m\",\"absolute\":\"/r/m\"}},\"version\":\"0.1.0\"}\n"));
        free(text);
        train_state r;
        CHECK_EQ_INT(state_read(&r, p, &e), 0);
        CHECK_EQ_STR(r.paths_json, s.paths_json);
        state_free(&r);
        free(s.paths_json);
        s.paths_json = xstrdup("[]");
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        state_free(&s);
        free(p);
        char *text2 = good_with("\"parent\":\"a\",", "\"parent\":\"a\",\"paths\":null,");
        CHECK_EQ_INT(read_text(dir, text2, &e), 0);
        free(text2);
    }

    TEST("state.json: pretty-printed, reordered, with unknown fields, reads the same");
    {
        const char *text = "\n  {\n  \"version\": \"9.9\",\n  \"future\": {\"x\": [1, 2]},\n  \"step\": 0,\n"
                           "  \"rng\": {\"next_index\": 0, \"seed\": 0, \"other\": true},\n"
                           "  \"schedule\": {\"name\": \"constant\", \"step\": 0, \"warmup_steps\": 0,\n"
                           "                \"total_steps\": 0},\n"
                           "  \"flags\": {\n    \"seed\": 0\n  },\n"
                           "  \"batch_sha256\": \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\",\n"
                           "  \"parent\": \"\"\n}\n\n";
        char *p = path_in(dir, "pretty.json");
        gerr e = {0};
        CHECK_EQ_INT(write_file_atomic(p, text, strlen(text), &e), 0);
        train_state r;
        int rc = state_read(&r, p, &e);
        CHECK_EQ_INT(rc, 0);
        if (rc) printf("# %s\n", e.msg);
        CHECK(r.schedule == SCHED_CONSTANT);
        CHECK_EQ_STR(r.flags_json, "{\n    \"seed\": 0\n  }");
        CHECK_EQ_STR(r.parent, "");
        CHECK_EQ_STR(r.version, "9.9");
        state_free(&r);
        free(p);
    }

    TEST("state.json: each malformed field is one error naming it");
    {
        static const struct {
            const char *from, *to, *expect;
        } cases[] = {
            {"\"step\":3,", "", "field \"step\": expected an integer >= 0, got nothing (field missing)"},
            {"\"step\":3,", "\"step\":\"3\",", "field \"step\": expected an integer >= 0, got string"},
            {"\"step\":3,", "\"step\":-1,", "field \"step\": expected an integer >= 0, got -1"},
            {"\"step\":3,", "\"step\":1.5,", "field \"step\": expected an integer >= 0, got 1.5"},
            {"\"step\":3,", "\"step\":1e3,", "field \"step\": expected an integer >= 0, got 1e3"},
            {"\"step\":3,", "\"step\":99999999999999999999,", "field \"step\": expected an integer below 2^63"},
            {"\"schedule\":{", "\"schedule\":[],\"x\":{", "field \"schedule\": expected an object, got array"},
            {"\"linear\"", "\"exp\"", "field \"schedule.name\": expected constant, linear or cosine, got \"exp\""},
            {"\"name\":\"linear\"", "\"name\":1", "field \"schedule.name\": expected a string, got number"},
            {",\"total_steps\":10", "", "field \"schedule.total_steps\": expected an integer >= 0, got nothing"},
            {"\"warmup_steps\":0", "\"warmup_steps\":null", "field \"schedule.warmup_steps\": expected an integer >= 0, got null"},
            {"\"seed\":7,", "", "field \"rng.seed\": expected an integer >= 0, got nothing"},
            {"\"next_index\":3", "\"next_index\":true", "field \"rng.next_index\": expected an integer >= 0, got true"},
            {"\"rng\":{", "\"rngs\":{", "field \"rng\": expected an object, got nothing"},
            {"\"flags\":{\"lr\":1e-05}", "\"flags\":\"--lr 1e-5\"", "field \"flags\": expected an object, got string"},
            {"\"batch_sha256\":\"9f86", "\"batch_sha256\":\"9F86", "field \"batch_sha256\": expected 64 lower-case hex digits, got \"9F86"},
            {"b0f00a08\"", "b0f00a0\"", "field \"batch_sha256\": expected 64 lower-case hex digits"},
            {"\"parent\":\"a\",", "", "field \"parent\": expected a string, got nothing"},
            {"\"parent\":\"a\",", "\"parent\":\"a\",\"paths\":[],", "field \"paths\": expected an object, got array"},
            {"\"version\":\"0.1.0\"", "\"version\":010", "invalid JSON"},
            {"\"version\":\"0.1.0\"", "\"version\":0.1", "field \"version\": expected a string, got number"},
            {"\"step\":3,", "\"step\":3,\"step\":4,", "duplicate key \"step\""},
            {"\"seed\":7,", "\"seed\":7,\"seed\":8,", "duplicate key \"seed\""},
            {"\"0.1.0\"}", "\"0.1.0\"", "invalid JSON"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
            char *text = good_with(cases[i].from, cases[i].to);
            gerr e = {0};
            int rc = read_text(dir, text, &e);
            CHECK_EQ_INT(rc, EX_DATAERR);
            if (!strstr(e.msg, cases[i].expect) || !strstr(e.msg, "bad.json: ")) {
                printf("#   case %zu: got \"%s\", want \"%s\"\n", i, e.msg, cases[i].expect);
                check_current_failed = 1;
            }
            free(text);
        }
        gerr e = {0};
        CHECK_EQ_INT(read_text(dir, "[1, 2]\n", &e), EX_DATAERR);
        CHECK(strstr(e.msg, "expected a JSON object, got array") != NULL);
        CHECK_EQ_INT(read_text(dir, "", &e), EX_DATAERR);
        char *ok = good_with("\"step\":3", "\"step\":3");
        CHECK_EQ_INT(read_text(dir, ok, &e), 0); /* the template itself is good */
        /* a NUL byte is not white space around the object (strchr(" \t\r\n", c) took it for one) */
        size_t n_ok = strlen(ok);
        char *nul = xmalloc(n_ok + 1);
        nul[0] = 0;
        memcpy(nul + 1, ok, n_ok);
        char *nul_path = path_in(dir, "nul.json");
        gerr we = {0};
        CHECK_EQ_INT(write_file_atomic(nul_path, nul, n_ok + 1, &we), 0);
        train_state nul_state;
        CHECK_EQ_INT(state_read(&nul_state, nul_path, &e), EX_DATAERR);
        state_free(&nul_state);
        free(nul_path);
        free(nul);
        free(ok);
        char *missing = path_in(dir, "nothing.json");
        train_state s;
        CHECK_EQ_INT(state_read(&s, missing, &e), EX_NOINPUT);
        free(missing);
    }

    TEST("state.json: the writer refuses a state the format cannot hold");
    {
        char *p = path_in(dir, "refused.json");
        gerr e = {0};
        train_state s = sample_state();
        free(s.flags_json);
        s.flags_json = xstrdup("[1]");
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        free(s.flags_json);
        s.flags_json = xstrdup("{\"a\":1} x");
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        free(s.flags_json);
        s.flags_json = xstrdup("{}");
        s.batch_sha256[3] = 'G';
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        memcpy(s.batch_sha256, SHA, 65);
        s.step = -1;
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        s.step = 1;
        free(s.parent);
        s.parent = NULL;
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        s.parent = xstrdup("bad \xff utf-8");
        CHECK_EQ_INT(state_write(&s, p, &e), EX_SOFTWARE);
        struct stat st;
        CHECK(stat(p, &st) != 0); /* nothing written */
        state_free(&s);
        free(p);
    }
}

/* ---- optimizer.safetensors ------------------------------------------------------ */

enum { W_ROWS = 3, W_COLS = 5, B_LEN = 4 };

typedef struct {
    float wm[W_ROWS * W_COLS], wv[W_ROWS * W_COLS], bm[B_LEN], bv[B_LEN];
    optim_tensor t[2];
} params;

static void params_init(params *p, float base) {
    for (int i = 0; i < W_ROWS * W_COLS; i++) {
        p->wm[i] = base + 0.25f * (float)i - 1.5f;
        p->wv[i] = base * 1e-3f + 1e-4f * (float)(i + 1);
    }
    for (int i = 0; i < B_LEN; i++) {
        p->bm[i] = base - 0.5f * (float)i;
        p->bv[i] = base * 1e-2f + 3e-5f * (float)(i + 1);
    }
    optim_tensor w = {.name = "model.layers.0.mlp.up_proj.weight", .ndim = 2, .shape = {W_ROWS, W_COLS}, .m = p->wm, .v = p->wv};
    optim_tensor b = {.name = "model.layers.0.self_attn.q_proj.bias", .ndim = 1, .shape = {B_LEN}, .m = p->bm, .v = p->bv};
    p->t[0] = w;
    p->t[1] = b;
}

/* Writes a safetensors file with the given optimizer metadata and tensors
 * (names, dtype) to exercise the reader's checks. */
static void write_custom(const char *path, const char *format, const char *optimizer, const char *const *names,
                         const st_dtype *dtypes, const int *ndims, const int64_t (*shapes)[2], int n) {
    static const float data[64] = {1};
    st_writer w;
    st_writer_init(&w);
    gerr e = {0};
    if (format) CHECK_EQ_INT(st_writer_set_meta(&w, "format", format, &e), 0);
    if (optimizer) CHECK_EQ_INT(st_writer_set_meta(&w, "optimizer", optimizer, &e), 0);
    for (int i = 0; i < n; i++) CHECK_EQ_INT(st_writer_add(&w, names[i], dtypes[i], ndims[i], shapes[i], data, &e), 0);
    CHECK_EQ_INT(st_write(&w, path, &e), 0);
    st_writer_free(&w);
}

static void expect_error(const char *path, optim_kind kind, optim_tensor *t, size_t n, int code, const char *a,
                         const char *b) {
    gerr e = {0};
    int rc = optim_state_read(path, kind, t, n, &e);
    CHECK_EQ_INT(rc, code);
    if (!strstr(e.msg, a) || (b && !strstr(e.msg, b)) || !strstr(e.msg, path)) {
        printf("#   got \"%s\", want \"%s\"%s%s\n", e.msg, a, b ? " and " : "", b ? b : "");
        check_current_failed = 1;
    }
}

static void test_optimizer_file(const char *dir) {
    TEST("optimizer.safetensors: AdamW round trip, names, order, metadata");
    {
        char *p = path_in(dir, "optimizer.safetensors");
        params a, b;
        params_init(&a, 1.0f);
        params_init(&b, 0.0f);
        for (int i = 0; i < W_ROWS * W_COLS; i++) b.wm[i] = b.wv[i] = -7; /* overwritten by the read */
        gerr e = {0};
        CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
        CHECK_EQ_INT(optim_state_read(p, OPTIM_ADAMW, b.t, 2, &e), 0);
        CHECK(!memcmp(a.wm, b.wm, sizeof a.wm) && !memcmp(a.wv, b.wv, sizeof a.wv));
        CHECK(!memcmp(a.bm, b.bm, sizeof a.bm) && !memcmp(a.bv, b.bv, sizeof a.bv));
        st_file f;
        CHECK_EQ_INT(st_open(&f, p, &e), 0);
        CHECK_EQ_INT(f.n_tensors, 4);
        if (f.n_tensors == 4) {
            CHECK_EQ_STR(f.tensors[0].name, "exp_avg.model.layers.0.mlp.up_proj.weight");
            CHECK_EQ_STR(f.tensors[1].name, "exp_avg_sq.model.layers.0.mlp.up_proj.weight");
            CHECK_EQ_STR(f.tensors[2].name, "exp_avg.model.layers.0.self_attn.q_proj.bias");
            CHECK_EQ_STR(f.tensors[3].name, "exp_avg_sq.model.layers.0.self_attn.q_proj.bias");
            CHECK(f.tensors[0].dtype == ST_F32 && f.tensors[0].ndim == 2 && f.tensors[0].shape[1] == W_COLS);
        }
        CHECK_EQ_STR(st_meta_get(&f, "format"), "grpo");
        CHECK_EQ_STR(st_meta_get(&f, "optimizer"), "adamw");
        st_close(&f);
        free(p);
    }

    TEST("optimizer.safetensors: SGD keeps only metadata; optimizers do not cross");
    {
        char *sgd = path_in(dir, "sgd.safetensors"), *adam = path_in(dir, "adam.safetensors");
        params a;
        params_init(&a, 2.0f);
        gerr e = {0};
        CHECK_EQ_INT(optim_state_write(sgd, OPTIM_SGD, a.t, 2, &e), 0);
        CHECK_EQ_INT(optim_state_read(sgd, OPTIM_SGD, a.t, 2, &e), 0);
        st_file f;
        CHECK_EQ_INT(st_open(&f, sgd, &e), 0);
        CHECK_EQ_INT(f.n_tensors, 0);
        CHECK_EQ_STR(st_meta_get(&f, "optimizer"), "sgd");
        st_close(&f);
        expect_error(sgd, OPTIM_ADAMW, a.t, 2, EX_DATAERR, "--optimizer sgd", "--optimizer adamw");
        CHECK_EQ_INT(optim_state_write(adam, OPTIM_ADAMW, a.t, 2, &e), 0);
        expect_error(adam, OPTIM_SGD, a.t, 2, EX_DATAERR, "--optimizer adamw", "--optimizer sgd");
        free(sgd);
        free(adam);
    }

    TEST("optimizer.safetensors: each mismatch is one error naming the tensor");
    {
        char *p = path_in(dir, "opt.safetensors"), *q = path_in(dir, "custom.safetensors");
        params a;
        params_init(&a, 3.0f);
        gerr e = {0};
        CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 1, &e), 0); /* only the weight */
        /* a parameter the file lacks */
        expect_error(p, OPTIM_ADAMW, a.t, 2, EX_DATAERR, "\"exp_avg.model.layers.0.self_attn.q_proj.bias\" missing",
                     NULL);
        /* a file tensor no parameter takes */
        CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
        expect_error(p, OPTIM_ADAMW, a.t, 1, EX_DATAERR, "\"exp_avg.model.layers.0.self_attn.q_proj.bias\"",
                     "no trained parameter");
        /* another shape */
        optim_tensor other = a.t[0];
        other.shape[0] = W_COLS;
        other.shape[1] = W_ROWS;
        expect_error(p, OPTIM_ADAMW, &other, 1, EX_DATAERR, "expected shape [5,3], got [3,5]", NULL);
        other = a.t[1];
        other.ndim = 2;
        other.shape[1] = 1;
        expect_error(p, OPTIM_ADAMW, &other, 1, EX_DATAERR, "expected shape [4,1], got [4]", NULL);

        optim_tensor one = {.name = "x", .ndim = 1, .shape = {4}, .m = a.bm, .v = a.bv};
        const int ndims[2] = {1, 1};
        const int64_t shapes[2][2] = {{4, 0}, {4, 0}};
        const st_dtype f32s[2] = {ST_F32, ST_F32}, mixed[2] = {ST_F32, ST_F16};
        const char *names[2] = {"exp_avg.x", "exp_avg_sq.x"};
        write_custom(q, "grpo", "adamw", names, mixed, ndims, shapes, 2);
        expect_error(q, OPTIM_ADAMW, &one, 1, EX_DATAERR, "\"exp_avg_sq.x\": expected dtype F32, got F16", NULL);
        write_custom(q, "pt", "adamw", names, f32s, ndims, shapes, 2);
        expect_error(q, OPTIM_ADAMW, &one, 1, EX_DATAERR, "metadata \"format\": expected \"grpo\", got \"pt\"", NULL);
        write_custom(q, NULL, "adamw", names, f32s, ndims, shapes, 2);
        expect_error(q, OPTIM_ADAMW, &one, 1, EX_DATAERR, "metadata \"format\": expected \"grpo\", got nothing", NULL);
        write_custom(q, "grpo", NULL, names, f32s, ndims, shapes, 2);
        expect_error(q, OPTIM_ADAMW, &one, 1, EX_DATAERR, "metadata \"optimizer\": expected adamw or sgd, got nothing",
                     NULL);
        write_custom(q, "grpo", "lion", names, f32s, ndims, shapes, 2);
        expect_error(q, OPTIM_ADAMW, &one, 1, EX_DATAERR, "got \"lion\"", NULL);
        write_custom(q, "grpo", "adamw", names, f32s, ndims, shapes, 2);
        CHECK_EQ_INT(optim_state_read(q, OPTIM_ADAMW, &one, 1, &e), 0); /* the template itself is good */
        CHECK(a.bm[0] == 1.0f && a.bv[0] == 1.0f);

        char *none = path_in(dir, "none.safetensors");
        expect_error(none, OPTIM_ADAMW, &one, 1, EX_NOINPUT, "none.safetensors", NULL);
        const char junk[] = "not a safetensors file";
        CHECK_EQ_INT(write_file_atomic(q, junk, sizeof junk, &e), 0);
        CHECK_EQ_INT(optim_state_read(q, OPTIM_ADAMW, &one, 1, &e), EX_DATAERR);
        free(none);
        free(p);
        free(q);
    }

    TEST("optimizer.safetensors: the writer refuses duplicates and missing moments");
    {
        char *p = path_in(dir, "dup.safetensors");
        params a;
        params_init(&a, 1.0f);
        optim_tensor two[2] = {a.t[0], a.t[0]};
        gerr e = {0};
        CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, two, 2, &e), EX_DATAERR);
        CHECK(strstr(e.msg, "dup.safetensors") && strstr(e.msg, "duplicate"));
        two[1] = a.t[1];
        two[1].v = NULL;
        CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, two, 2, &e), EX_SOFTWARE);
        CHECK_EQ_INT(optim_state_write(p, OPTIM_SGD, two, 2, &e), 0); /* SGD needs no moments */
        struct stat st;
        CHECK(stat(p, &st) == 0);
        free(p);
    }
}

static int write_sample(const char *dir) {
    char *sp = path_in(dir, "state.json"), *op = path_in(dir, "optimizer.safetensors");
    train_state s = sample_state();
    params a;
    params_init(&a, 1.0f);
    gerr e = {0};
    int rc = state_write(&s, sp, &e);
    if (!rc) rc = optim_state_write(op, OPTIM_ADAMW, a.t, 2, &e);
    if (rc) fprintf(stderr, "test_state: %s\n", e.msg);
    state_free(&s);
    free(sp);
    free(op);
    return rc ? 1 : 0;
}

/* A ZeRO-1 rank reads only its slice of each moment: the elements asked
 * for, nothing outside them; a write of a slice is refused. */
static void test_optimizer_slice(const char *dir) {
    TEST("optimizer.safetensors: a partial tensor reads only its slice; writing one is refused");
    char *p = path_in(dir, "slice.safetensors");
    params a, b;
    params_init(&a, 1.0f);
    params_init(&b, 0.0f);
    gerr e = {0};
    CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
    float m[8], v[8], guard = -7;
    for (int i = 0; i < 8; i++) m[i] = v[i] = guard;
    /* elements 9 .. 14 of the weight (6 of 15), none of the bias */
    b.t[0].partial = b.t[1].partial = true;
    b.t[0].first = 9, b.t[0].count = 6, b.t[0].m = m, b.t[0].v = v;
    b.t[1].first = 0, b.t[1].count = 0, b.t[1].m = m + 7, b.t[1].v = v + 7;
    CHECK_EQ_INT(optim_state_read(p, OPTIM_ADAMW, b.t, 2, &e), 0);
    CHECK(!memcmp(m, a.wm + 9, 6 * sizeof *m) && !memcmp(v, a.wv + 9, 6 * sizeof *v));
    CHECK(m[6] == guard && v[6] == guard && m[7] == guard && v[7] == guard);
    b.t[0].first = 10; /* 10 + 6 > 15 */
    CHECK_EQ_INT(optim_state_read(p, OPTIM_ADAMW, b.t, 2, &e), EX_SOFTWARE);
    CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, b.t, 2, &e), EX_SOFTWARE);
    CHECK(strstr(e.msg, "slice") != NULL);
    free(p);
}

/* Moments that would poison the step are refused on load as weights are:
 * NaN, infinity, a negative second moment; a slice is checked at its place. */
static void test_optimizer_values(const char *dir) {
    TEST("optimizer.safetensors: a NaN, an infinity or a negative exp_avg_sq is 65 naming file, tensor, index");
    char *p = path_in(dir, "values.safetensors");
    params a, b;
    gerr e = {0};
    params_init(&a, 1.0f);
    a.wm[7] = NAN;
    CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
    params_init(&b, 0.0f);
    expect_error(p, OPTIM_ADAMW, b.t, 2, EX_DATAERR, "tensor \"exp_avg.model.layers.0.mlp.up_proj.weight\": value 7 is NaN",
                 "non-finite optimizer state: the checkpoint is broken");
    params_init(&a, 1.0f);
    a.bv[2] = INFINITY;
    CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
    expect_error(p, OPTIM_ADAMW, b.t, 2, EX_DATAERR, "exp_avg_sq.model.layers.0.self_attn.q_proj.bias\": value 2 is +inf",
                 NULL);
    params_init(&a, 1.0f);
    a.wv[12] = -1e-3f;
    CHECK_EQ_INT(optim_state_write(p, OPTIM_ADAMW, a.t, 2, &e), 0);
    expect_error(p, OPTIM_ADAMW, b.t, 2, EX_DATAERR, "exp_avg_sq.model.layers.0.mlp.up_proj.weight\": value 12 is -0.001",
                 "never negative");
    /* a slice names the element's place in the whole tensor; one without it reads */
    float m[6], v[6];
    b.t[0].partial = b.t[1].partial = true;
    b.t[0].first = 9, b.t[0].count = 6, b.t[0].m = m, b.t[0].v = v;
    b.t[1].first = 0, b.t[1].count = 0, b.t[1].m = m, b.t[1].v = v;
    expect_error(p, OPTIM_ADAMW, b.t, 2, EX_DATAERR, "value 12 is -0.001", NULL);
    b.t[0].count = 3;
    CHECK_EQ_INT(optim_state_read(p, OPTIM_ADAMW, b.t, 2, &e), 0);
    /* SGD has no moments to check */
    CHECK_EQ_INT(optim_state_write(p, OPTIM_SGD, a.t, 2, &e), 0);
    CHECK_EQ_INT(optim_state_read(p, OPTIM_SGD, a.t, 2, &e), 0);
    /* the same check, as grpo-update makes it before writing */
    params_init(&a, 1.0f);
    a.wm[0] = -INFINITY;
    CHECK_EQ_INT(optim_state_check(a.t, 2, "step 3", "nothing written", &e), EX_DATAERR);
    CHECK(strstr(e.msg, "step 3: tensor \"exp_avg.model.layers.0.mlp.up_proj.weight\": value 0 is -inf") == e.msg);
    CHECK(strstr(e.msg, "nothing written"));
    free(p);
}

static void test_missing_and_odd_files(const char *dir) {
    TEST("a missing optimizer file is 66 saying why it is needed; state.json a FIFO, a loop, a directory: errors, no wait");
    char *p = path_in(dir, "nope.safetensors");
    params b;
    params_init(&b, 0.0f);
    expect_error(p, OPTIM_ADAMW, b.t, 2, EX_NOINPUT, "cannot open", "grpo/state.json resumes its optimizer state");
    free(p);
    char *fifo = path_in(dir, "fifo.json"), *loop = path_in(dir, "loop.json"), *dangling = path_in(dir, "dangling.json");
    char *sub = path_in(dir, "sub.json"), *absent = path_in(dir, "absent.json"), *reg = path_in(dir, "reg.json");
    CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
    CHECK_EQ_INT(symlink("loop.json", loop), 0);
    CHECK_EQ_INT(symlink("nothing-here", dangling), 0);
    CHECK_EQ_INT(mkdir(sub, 0700), 0);
    gerr e = {0};
    train_state s = sample_state();
    CHECK_EQ_INT(state_write(&s, reg, &e), 0);
    state_free(&s);
    bool present = true;
    CHECK_EQ_INT(regular_file_probe(absent, &present, &e), 0);
    CHECK(!present);
    CHECK_EQ_INT(regular_file_probe(reg, &present, &e), 0);
    CHECK(present);
    char *under_file = path_in(dir, "reg.json/grpo/state.json"); /* a GGUF model's "checkpoint directory" */
    CHECK_EQ_INT(regular_file_probe(under_file, &present, &e), 0);
    CHECK(!present);
    free(under_file);
    const char *bad[] = {fifo, loop, dangling, sub};
    const char *why[] = {"not a regular file (a FIFO)", "cannot follow the symlink: Too many levels", "cannot follow the symlink: No such file",
                         "not a regular file (a directory)"};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(regular_file_probe(bad[i], &present, &e), EX_NOINPUT);
        CHECK(strstr(e.msg, bad[i]) == e.msg && strstr(e.msg, why[i]));
    }
    /* the reader itself refuses a FIFO without waiting for a writer */
    CHECK_EQ_INT(state_read(&s, fifo, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "not a regular file (a FIFO)"));
    free(fifo), free(loop), free(dangling), free(sub), free(absent), free(reg);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-sample")) return write_sample(argv[2]);
    char dir[] = "/tmp/grpo-test-state-XXXXXX";
    if (!mkdtemp(dir)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_state_json(dir);
    test_optimizer_file(dir);
    test_optimizer_slice(dir);
    test_optimizer_values(dir);
    test_missing_and_odd_files(dir);
    remove_tree(dir);
    return check_done();
}
