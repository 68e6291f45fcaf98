/* lib/env: the environment program of grpo-rollout --env. Each case starts a
 * small sh program that answers (or misbehaves) on purpose. */
#include <stdlib.h>

#include "env/env.h"
#include "util/clock.h"
#include "check.h"

static const char REQ_X[] = "{\"id\":\"x\",\"sample\":0,\"turn\":0}";
static const char REQ_Y[] = "{\"id\":\"y\",\"sample\":1,\"turn\":2}";

/* Opens env on program and asks REQ_X (tag 10) and REQ_Y (tag 11). */
static int open_and_ask(env_conn *v, const char *program, double timeout, gerr *e) {
    int rc = env_open(v, program, timeout, e);
    if (!rc) rc = env_ask(v, REQ_X, strlen(REQ_X), "x", 0, 0, 10, "p.jsonl", 1, e);
    if (!rc) rc = env_ask(v, REQ_Y, strlen(REQ_Y), "y", 1, 2, 11, "p.jsonl", 2, e);
    return rc;
}

/* The first answer's result code (1 got, 0 none, -1 error), waiting up to 5 s. */
static int first_answer(env_conn *v, env_answer *a, gerr *e) { return env_next_answer(v, 5000, a, e); }

int main(void) {
    env_conn v;
    env_answer a;
    gerr e = {0};

    TEST("answers in any order reach their requests; blank lines let through; done, reward and messages");
    CHECK_EQ_INT(open_and_ask(&v,
                              "read a; read b; echo; "
                              "echo '{\"id\":\"y\",\"sample\":1,\"turn\":2,\"done\":true,\"reward\":2.5}'; "
                              "echo '{\"id\":\"x\",\"sample\":0,\"turn\":0,\"messages\":[{\"role\":\"tool\",\"content\":\"7\"}]}'; "
                              "cat > /dev/null",
                              5, &e),
                 0);
    CHECK_EQ_INT(env_in_flight(&v), 2);
    CHECK_EQ_INT(first_answer(&v, &a, &e), 1);
    CHECK_EQ_INT(a.tag, 11);
    CHECK(a.done && a.has_reward && a.reward == 2.5 && !a.messages);
    env_answer_free(&a);
    CHECK_EQ_INT(first_answer(&v, &a, &e), 1);
    CHECK_EQ_INT(a.tag, 10);
    CHECK(!a.done && !a.has_reward && cJSON_GetArraySize(a.messages) == 1);
    env_answer_free(&a);
    CHECK_EQ_INT(env_in_flight(&v), 0);
    CHECK_EQ_INT(env_next_answer(&v, 0, &a, &e), 0);
    CHECK_EQ_INT(env_finish(&v, &e), 0);
    env_close(&v);

    TEST("the requests reach the program as lines, in the order asked");
    CHECK_EQ_INT(open_and_ask(&v, "read a; read b; printf '%s\\n' \"$b\" | grep -q '\"turn\":2' && "
                                  "echo '{\"id\":\"x\",\"sample\":0,\"turn\":0,\"done\":true}'; cat > /dev/null",
                              5, &e),
                 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), 1);
    CHECK_EQ_INT(a.tag, 10);
    env_answer_free(&a);
    env_close(&v);

    TEST("not JSON: EX_DATAERR naming the request waiting longest");
    CHECK_EQ_INT(open_and_ask(&v, "read a; echo 'oops'; cat > /dev/null", 5, &e), 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
    CHECK_EQ_INT(e.code, EX_DATAERR);
    CHECK(strstr(e.msg, "p.jsonl:1: env 'read a;") && strstr(e.msg, "answer 1 is not a JSON object") &&
          strstr(e.msg, "record \"x\", sample 0, turn 0") && strstr(e.msg, "got: oops"));
    env_close(&v);

    TEST("an answer to a request never asked, or asked twice: EX_DATAERR");
    CHECK_EQ_INT(open_and_ask(&v, "read a; echo '{\"id\":\"x\",\"sample\":0,\"turn\":1,\"done\":true}'; cat >/dev/null",
                              5, &e),
                 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
    CHECK(e.code == EX_DATAERR && strstr(e.msg, "answers a request never asked or answered already"));
    env_close(&v);
    CHECK_EQ_INT(open_and_ask(&v,
                              "read a; for i in 1 2; do echo '{\"id\":\"x\",\"sample\":0,\"turn\":0,\"done\":true}'; "
                              "done; cat > /dev/null",
                              5, &e),
                 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), 1);
    CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
    CHECK(e.code == EX_DATAERR && strstr(e.msg, "answer 2 answers a request never asked or answered already") &&
          strstr(e.msg, "record \"y\""));
    env_close(&v);

    TEST("bad answers: role, content, empty messages, reward, done; each names its record and turn");
    const char *bad[] = {
        "{\"id\":\"y\",\"sample\":1,\"turn\":2,\"messages\":[{\"role\":\"assistant\",\"content\":\"a\"}]}",
        "{\"id\":\"y\",\"sample\":1,\"turn\":2,\"messages\":[{\"role\":\"user\",\"content\":3}]}",
        "{\"id\":\"y\",\"sample\":1,\"turn\":2,\"messages\":[]}",
        "{\"id\":\"y\",\"sample\":1,\"turn\":2,\"done\":true,\"reward\":\"high\"}",
        "{\"id\":\"y\",\"sample\":1,\"turn\":2,\"done\":1}",
        "{\"id\":\"y\",\"sample\":1,\"turn\":2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char program[512];
        snprintf(program, sizeof program, "echo '%s'; cat > /dev/null", bad[i]);
        CHECK_EQ_INT(open_and_ask(&v, program, 5, &e), 0);
        CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
        CHECK(e.code == EX_DATAERR && strstr(e.msg, "p.jsonl:2: ") && strstr(e.msg, "record \"y\", sample 1, turn 2"));
        env_close(&v);
    }

    TEST("no answer within the timeout: EX_TEMPFAIL, on time");
    double t0 = now_seconds();
    CHECK_EQ_INT(open_and_ask(&v, "cat > /dev/null", 0.2, &e), 0);
    CHECK_EQ_INT(env_next_answer(&v, 50, &a, &e), 0); /* nothing yet, not late yet */
    int got = 0;
    while ((got = env_next_answer(&v, 1000, &a, &e)) == 0) {
    }
    CHECK_EQ_INT(got, -1);
    CHECK(e.code == EX_TEMPFAIL && strstr(e.msg, "gave no answer for record \"x\", sample 0, turn 0 within 0.2 s"));
    CHECK(now_seconds() - t0 < 2);
    env_close(&v);

    TEST("the program dies with requests unanswered: EX_DATAERR with its exit status");
    CHECK_EQ_INT(open_and_ask(&v, "read a; exit 3", 5, &e), 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
    CHECK(e.code == EX_DATAERR && strstr(e.msg, "exited with status 3 before answering record \"x\""));
    env_close(&v);
    CHECK_EQ_INT(open_and_ask(&v, "kill -9 $$", 5, &e), 0);
    CHECK_EQ_INT(first_answer(&v, &a, &e), -1);
    CHECK(e.code == EX_DATAERR && strstr(e.msg, "was killed by signal 9"));
    env_close(&v);

    TEST("at the end the program must exit 0 without writing more");
    CHECK_EQ_INT(env_open(&v, "cat > /dev/null; echo late", 5, &e), 0);
    CHECK_EQ_INT(env_finish(&v, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "env 'cat > /dev/null; echo late' wrote more after its last answer: late"));
    env_close(&v);
    CHECK_EQ_INT(env_open(&v, "cat > /dev/null; exit 4", 5, &e), 0);
    CHECK_EQ_INT(env_finish(&v, &e), EX_DATAERR);
    CHECK(strstr(e.msg, "exited with status 4"));
    env_close(&v);
    CHECK_EQ_INT(env_open(&v, "cat > /dev/null; sleep 5", 0.2, &e), 0);
    CHECK_EQ_INT(env_finish(&v, &e), EX_TEMPFAIL);
    CHECK(strstr(e.msg, "did not exit within 0.2 s"));
    env_close(&v);
    CHECK_EQ_INT(env_open(&v, "", 5, &e), EX_USAGE);

    return check_done();
}
