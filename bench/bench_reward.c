/* Rule-reward throughput on one core: answer + format + length over
 * GSM8K-like rollout records (~600-byte completions, 8 samples per prompt,
 * a mix of right, wrong, untagged and boxed answers).
 *
 *   bench_reward [RECORDS] [SECONDS]
 *   bench_reward --emit RECORDS       writes the records as JSONL on stdout
 *
 * Prints two lines: the three functions alone on decoded items, and the
 * same with each record's parsing and completion decoding included (what
 * grpo-reward does per record besides I/O). Times are this thread's CPU
 * time, so other processes on the machine do not count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/record.h"
#include "reward/reward.h"
#include "util/clock.h"

static unsigned next_rand(unsigned *x) {
    *x = *x * 1103515245u + 12345u;
    return *x >> 8;
}

/* One JSONL line: prompt fields, a completion of about 600 bytes, its tokens. */
static void make_record(strbuf *line, unsigned *seed, int prompt, int sample) {
    unsigned r = next_rand(seed);
    int a = 12 + prompt % 80, b = 3 + prompt % 17, c = 100 + prompt % 900;
    long long gold = (long long)a * b + c;
    strbuf comp = {0};
    sb_printf(&comp,
              "<think>\nFirst, each box holds %d apples and there are %d boxes, so that is %d * %d = %d apples. "
              "Then the farmer buys %d more apples at the market, which gives %d + %d = %lld apples in total. "
              "Let me double-check the multiplication: %d times %d is %d, because %d * 10 = %d and the rest "
              "adds up. The extra %d apples are added once, not per box. So the final count is %lld, and "
              "nothing else changes the total between the morning and the evening. I should also make sure "
              "that no apples were sold or eaten along the way; the question does not say so.\n</think>\n",
              a, b, a, b, a * b, c, a * b, c, gold, a, b, a * b, a, a * 10, c, gold);
    long long said = (r % 4 == 0) ? gold + 1 + (long long)(r % 7) : gold;
    switch ((r >> 4) % 4) {
    case 0: sb_printf(&comp, "<answer>%lld</answer>", said); break;
    case 1: sb_printf(&comp, "<answer>$%lld,%03lld</answer>", said / 1000, said % 1000); break;
    case 2: sb_printf(&comp, "The answer is \\boxed{%lld}.", said); break;
    default: sb_printf(&comp, "So there are %lld apples.", said); break;
    }
    sb_clear(line);
    sb_printf(line, "{\"id\":\"gsm8k/%d\",\"task\":\"gsm8k\",\"messages\":[{\"role\":\"user\",\"content\":\"A farmer has "
                    "%d boxes of %d apples and buys %d more. How many apples?\"}],\"answer\":\"%lld\",\"sample\":%d,"
                    "\"completion\":",
              prompt, b, a, c, gold, sample);
    sb_json_string(line, comp.data, comp.len);
    sb_puts(line, ",\"completion_tokens\":[");
    int n_tokens = (int)(comp.len / 4);
    for (int t = 0; t < n_tokens; t++) sb_printf(line, "%s%d", t ? "," : "", 100 + (int)(next_rand(seed) % 40000));
    sb_puts(line, "],\"finish_reason\":\"stop\"}");
    sb_free(&comp);
}

typedef struct {
    record rec;
    strbuf completion;
} slot;

static void decode(slot *s, reward_item *it) {
    gerr e = {0};
    int present = 0;
    sb_clear(&s->completion);
    if (record_get_string(&s->rec, "completion", false, &s->completion, &present, &e)) die_err(&e);
    sb_append(&s->completion, "", 0);
    it->rec = &s->rec;
    it->completion = s->completion.data;
    it->completion_len = s->completion.len;
    it->has_completion = present == 2;
    const rec_field *f = record_find(&s->rec, "completion_tokens");
    long long n = 1;
    for (size_t i = 0; i < f->val_len; i++) n += f->val[i] == ',';
    it->n_tokens = n;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--emit")) { /* the same records for the end-to-end run and the peer */
        long count = atol(argv[2]);
        strbuf line = {0};
        unsigned seed = 20240521u;
        for (long i = 0; i < count; i++) {
            make_record(&line, &seed, (int)(i / 8), (int)(i % 8));
            sb_putc(&line, '\n');
            if (fwrite(line.data, 1, line.len, stdout) != line.len) die(EX_IOERR, "<stdout>: write failed");
        }
        sb_free(&line);
        if (fflush(stdout)) die(EX_IOERR, "<stdout>: write failed");
        return 0;
    }
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 16384;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    reward_opts p;
    reward_opts_default(&p);
    p.length_max = 160; /* the ~145-token completions fall on the ramp */
    p.length_buffer = 32;

    reward_fn fns[3];
    memset(fns, 0, sizeof fns);
    gerr e = {0};
    if (reward_open_answer(&fns[0], &p, &e) || reward_open_format(&fns[1], &p, &e) ||
        reward_open_length(&fns[2], &p, &e))
        die_err(&e);

    strbuf *lines = xcalloc(n, sizeof *lines);
    slot *slots = xcalloc(n, sizeof *slots);
    reward_item *items = xcalloc(n, sizeof *items);
    double *out = xmalloc(3 * n * sizeof *out);
    unsigned seed = 20240521u;
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        make_record(&lines[i], &seed, (int)(i / 8), (int)(i % 8));
        record_init(&slots[i].rec);
        if (record_parse(&slots[i].rec, lines[i].data, lines[i].len, "bench", (long)i + 1, &e)) die_err(&e);
        decode(&slots[i], &items[i]);
        bytes += items[i].completion_len;
    }

    /* 1: the functions alone */
    double t0 = thread_cpu_seconds(), t;
    size_t scored = 0;
    do {
        for (int k = 0; k < 3; k++)
            if (fns[k].score(fns[k].self, items, n, out + (size_t)k * n, &e)) die_err(&e);
        scored += n;
        t = thread_cpu_seconds() - t0;
    } while (t < seconds);
    double mean[3] = {0};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < n; i++) mean[k] += out[(size_t)k * n + i];
        mean[k] /= (double)n;
    }
    printf("answer+format+length, decoded items: %.0f records/s (%zu records, %.0f-byte completions; "
           "mean answer %.3f, format %.3f, length %.3f)\n",
           (double)scored / t, n, (double)bytes / (double)n, mean[0], mean[1], mean[2]);

    /* 2: with parsing and decoding each record */
    t0 = thread_cpu_seconds();
    scored = 0;
    do {
        for (size_t i = 0; i < n; i++) {
            if (record_parse(&slots[i].rec, lines[i].data, lines[i].len, "bench", (long)i + 1, &e)) die_err(&e);
            decode(&slots[i], &items[i]);
        }
        for (int k = 0; k < 3; k++)
            if (fns[k].score(fns[k].self, items, n, out + (size_t)k * n, &e)) die_err(&e);
        scored += n;
        t = thread_cpu_seconds() - t0;
    } while (t < seconds);
    double with_parse = (double)scored / t;

    /* 3: parsing and decoding alone: the ceiling of any per-record function */
    t0 = thread_cpu_seconds();
    scored = 0;
    do {
        for (size_t i = 0; i < n; i++) {
            if (record_parse(&slots[i].rec, lines[i].data, lines[i].len, "bench", (long)i + 1, &e)) die_err(&e);
            decode(&slots[i], &items[i]);
        }
        scored += n;
        t = thread_cpu_seconds() - t0;
    } while (t < seconds);
    double parse_only = (double)scored / t;
    printf("answer+format+length, with record_parse: %.0f records/s (%.0f%% of record_parse alone, %.0f records/s)\n",
           with_parse, 100.0 * with_parse / parse_only, parse_only);

    for (int k = 0; k < 3; k++) fns[k].close(fns[k].self);
    for (size_t i = 0; i < n; i++) {
        record_free(&slots[i].rec);
        sb_free(&slots[i].completion);
        sb_free(&lines[i]);
    }
    free(lines);
    free(slots);
    free(items);
    free(out);
    return 0;
}
