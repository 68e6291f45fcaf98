/* For tests of the code reward: records from JSON lines scored by an open
 * code reward with the system's python3. */
#ifndef GRPO_TEST_CODE_FIXTURE_H
#define GRPO_TEST_CODE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/record.h"
#include "reward/reward.h"

#define PYTHON "/usr/bin/python3"

static inline reward_opts params(double timeout, long long jobs) {
    reward_opts p;
    memset(&p, 0, sizeof p);
    p.code_python = PYTHON;
    p.code_tests_field = "tests";
    p.code_timeout = timeout;
    p.code_memory_mb = 1024;
    p.jobs = jobs;
    return p;
}

static inline int open_fn(reward_fn *fn, const reward_opts *p) {
    gerr e = {0};
    int rc = reward_open_code(fn, p, &e);
    if (rc) printf("#   open: %s\n", e.msg);
    CHECK_EQ_INT(rc, 0); /* make test installs python3, and the sandbox falls back without namespaces */
    return rc;
}

/* A chunk of records parsed from JSON lines. */
typedef struct {
    size_t n;
    record rec[32];
    strbuf completion[32];
    reward_item items[32];
} chunk;

static inline void chunk_load(chunk *c, const char *const *lines, size_t n) {
    memset(c, 0, sizeof *c);
    c->n = n;
    for (size_t i = 0; i < n; i++) {
        gerr e = {0};
        record_init(&c->rec[i]);
        int rc = record_parse(&c->rec[i], lines[i], strlen(lines[i]), "in.jsonl", (long)i + 1, &e);
        CHECK_EQ_INT(rc, 0);
        if (rc) printf("#   parse: %s\n", e.msg);
        int present = 0;
        record_get_string(&c->rec[i], "completion", false, &c->completion[i], &present, &e);
        if (!c->completion[i].data) sb_puts(&c->completion[i], "");
        c->items[i] = (reward_item){.rec = &c->rec[i],
                                    .completion = c->completion[i].data,
                                    .completion_len = c->completion[i].len,
                                    .has_completion = present == 2,
                                    .n_tokens = -1};
    }
}

static inline void chunk_free(chunk *c) {
    for (size_t i = 0; i < c->n; i++) {
        record_free(&c->rec[i]);
        sb_free(&c->completion[i]);
    }
}

static inline int score(reward_fn *fn, const char *const *lines, size_t n, double *out, gerr *e) {
    chunk *c = malloc(sizeof *c);
    chunk_load(c, lines, n);
    memset(e, 0, sizeof *e);
    int rc = fn->score(fn->self, c->items, n, out, e);
    chunk_free(c);
    free(c);
    return rc;
}

/* One record: a completion and its tests (JSON texts). */
static inline char *line(const char *completion_json, const char *tests_json) {
    size_t len = strlen(completion_json) + strlen(tests_json) + 64;
    char *s = malloc(len);
    snprintf(s, len, "{\"id\":\"x\",\"completion\":%s,\"tests\":%s}", completion_json, tests_json);
    return s;
}

static inline double score1(reward_fn *fn, const char *completion_json, const char *tests_json) {
    char *l = line(completion_json, tests_json);
    const char *lines[1] = {l};
    double out = -1;
    gerr e;
    int rc = score(fn, lines, 1, &out, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) printf("#   score: %s\n", e.msg);
    free(l);
    return out;
}

#endif
