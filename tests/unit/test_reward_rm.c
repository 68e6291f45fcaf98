/* The `rm` reward function (lib/reward/rm.c): its usage errors here; its
 * values against PyTorch in tests/bats/reward_rm.bats, which also runs this
 * program's driver mode under ASan.
 *
 * Driver mode: with GRPO_RM_DIR (a reward model directory) and
 * GRPO_RM_RECORDS (JSONL), opens the function with --rm-batch
 * GRPO_RM_BATCH (default 3), scores every record in one call, as the stage
 * would a chunk, and prints one value per line (%.17g). An error prints its
 * one-line message and exits with its code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "io/jsonl.h"
#include "reward/reward.h"

static int driver(const char *dir, const char *records, const char *batch) {
    reward_opts p;
    reward_opts_default(&p);
    p.rm_model = dir;
    p.rm_batch = batch ? atoll(batch) : 3;
    reward_fn fn = {.name = "rm", .weight = 1};
    gerr e = {0};
    jsonl_reader rd;
    if (jsonl_open(&rd, records, &e)) {
        fprintf(stderr, "test_reward_rm: %s\n", e.msg);
        return e.code;
    }
    size_t n = 0, cap = 16;
    record *recs = calloc(cap, sizeof *recs);
    strbuf *texts = calloc(cap, sizeof *texts);
    int rc = 0;
    for (;;) {
        if (n == cap) {
            cap *= 2;
            recs = realloc(recs, cap * sizeof *recs);
            texts = realloc(texts, cap * sizeof *texts);
            if (!recs || !texts) abort();
            memset(texts + n, 0, (cap - n) * sizeof *texts);
        }
        record_init(&recs[n]);
        int got = jsonl_next(&rd, &recs[n], &e);
        if (got <= 0) {
            record_free(&recs[n]);
            if (got < 0) rc = e.code;
            break;
        }
        int present;
        if ((rc = record_get_string(&recs[n], "completion", false, &texts[n], &present, &e))) break;
        sb_reserve(&texts[n], 0);
        texts[n].data[texts[n].len] = 0;
        n++;
    }
    reward_item *items = calloc(n ? n : 1, sizeof *items);
    double *out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        items[i] = (reward_item){.rec = &recs[i], .completion = texts[i].data, .completion_len = texts[i].len,
                                 .n_tokens = -1, .last_of_input = i + 1 == n};
    if (!rc) rc = reward_open_rm(&fn, &p, &e);
    if (!rc) {
        rc = fn.score(fn.self, items, n, out, &e);
        for (size_t i = 0; !rc && i < n; i++) printf("%.17g\n", out[i]);
        fn.close(fn.self);
    }
    if (rc) fprintf(stderr, "test_reward_rm: %s\n", e.msg);
    for (size_t i = 0; i < n; i++) record_free(&recs[i]), sb_free(&texts[i]);
    free(recs), free(texts), free(items), free(out);
    jsonl_close(&rd);
    return rc;
}

static void test_usage(void) {
    reward_opts p;
    reward_opts_default(&p);
    reward_fn fn = {.name = "rm", .weight = 1};
    gerr e = {0};
    TEST("rm: no --rm-model is a usage error naming the flag");
    CHECK_EQ_INT(reward_open_rm(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--rm-model") != NULL);
    p.rm_model = "";
    CHECK_EQ_INT(reward_open_rm(&fn, &p, &e), EX_USAGE);

    TEST("rm: a batch outside 1..4096 is a usage error naming --rm-batch");
    p.rm_model = "/nonexistent/rm";
    p.rm_batch = 0;
    CHECK_EQ_INT(reward_open_rm(&fn, &p, &e), EX_USAGE);
    CHECK(strstr(e.msg, "--rm-batch") != NULL);

    TEST("rm: a reward model that is not there is EX_NOINPUT naming it");
    p.rm_batch = 4;
    CHECK_EQ_INT(reward_open_rm(&fn, &p, &e), EX_NOINPUT);
    CHECK(strstr(e.msg, "/nonexistent/rm") != NULL);
    CHECK(fn.self == NULL);
}

int main(void) {
    const char *dir = getenv("GRPO_RM_DIR");
    if (dir && *dir) {
        const char *records = getenv("GRPO_RM_RECORDS");
        return driver(dir, records ? records : "records.jsonl", getenv("GRPO_RM_BATCH"));
    }
    test_usage();
    return check_done();
}
