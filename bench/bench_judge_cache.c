/* Judge cache speed, one process: fills a cache with N answers, then times
 * single puts (one commit each), lookups that hit (random order, readwrite
 * mode, get_many, readonly mode), and lookups that miss.
 *
 *   bench_judge_cache [ENTRIES [LOOKUPS [DIR]]]   (100000 200000 $TMPDIR)
 *
 * The hits are timed three ways: judge_cache_get in readwrite mode, then
 * judge_cache_get_many 256 keys at a time, then get in readonly mode.
 * Entries look like judge traffic: a ~1.5 KB canonical request, a ~400 byte
 * reply. Prints one line per measurement and a JSON summary line last. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "judge/cache.h"
#include "util/clock.h"
#include "util/rng.h"
#include "util/sha256.h"

typedef struct {
    double wall, cpu; /* per second of each */
} rate;

static rate rate_of(double n, double wall0, double cpu0) {
    rate r = {n / (now_seconds() - wall0), n / (cpu_seconds() - cpu0)};
    return r;
}

static _Noreturn void fail(const gerr *e) {
    fprintf(stderr, "bench_judge_cache: %s\n", e->msg);
    exit(e->code ? e->code : 1);
}

/* The i-th entry's request and reply, in caller buffers; key from request. */
static void make(long i, char *request, size_t request_cap, char *reply, size_t reply_cap, judge_cache_entry *en) {
    int n = snprintf(request, request_cap,
                     "{\"model\":\"judge-8b\",\"temperature\":0,\"max_tokens\":256,\"template\":\"3f2a\","
                     "\"messages\":[{\"role\":\"user\",\"content\":\"Rate completion %ld: ",
                     i);
    for (; (size_t)n + 40 < request_cap - 32; n++) request[n] = (char)('a' + (i + n) % 26);
    snprintf(request + n, request_cap - (size_t)n, "\"}]}");
    int m = snprintf(reply, reply_cap, "The completion %ld is mostly right. ", i);
    for (; (size_t)m + 20 < reply_cap; m++) reply[m] = (char)('a' + (i * 7 + m) % 26);
    snprintf(reply + m, reply_cap - (size_t)m, " Score: %ld", i % 11);
    sha256(request, strlen(request), en->key);
    en->model = "judge-8b";
    en->request = request;
    en->reply = reply;
    en->score = (double)(i % 11);
    en->prompt_tokens = 400;
    en->completion_tokens = 90;
}


/* Looks up `count` keys drawn from [first, first + span), one call each or
 * `chunk` at a time with get_many. */
static rate time_lookups(const char *path, judge_cache_mode mode, long first, long span, long count, int want, size_t chunk, uint64_t seed) {
    static char request[1600], reply[420];
    judge_cache_entry en;
    judge_cache_lookup *ls = calloc((size_t)count, sizeof *ls);
    if (!ls) exit(70);
    rng_stream r;
    rng_init(&r, seed, "lookups", 7, 0);
    for (long k = 0; k < count; k++) {
        make(first + (long)rng_below(&r, (uint64_t)span), request, sizeof request, reply, sizeof reply, &en);
        memcpy(ls[k].key, en.key, 32);
    }
    gerr e = {0};
    judge_cache *c = NULL;
    if (judge_cache_open(&c, path, mode, &e)) fail(&e);
    long matched = 0;
    double t0 = now_seconds(), c0 = cpu_seconds();
    if (chunk <= 1) {
        for (long k = 0; k < count; k++) {
            int got = judge_cache_get(c, ls[k].key, &ls[k].reply, &ls[k].score, &e);
            if (got < 0) fail(&e);
            ls[k].hit = got == 1;
        }
    } else {
        for (long k = 0; k < count; k += (long)chunk) {
            size_t n = (size_t)(count - k) < chunk ? (size_t)(count - k) : chunk;
            if (judge_cache_get_many(c, ls + k, n, &e)) fail(&e);
        }
    }
    rate r_out = rate_of((double)count, t0, c0);
    judge_cache_close(c);
    for (long k = 0; k < count; k++) {
        matched += ls[k].hit == want;
        sb_free(&ls[k].reply);
    }
    free(ls);
    if (matched != count) {
        fprintf(stderr, "bench_judge_cache: %ld of %ld lookups answered as expected\n", matched, count);
        exit(1);
    }
    return r_out;
}

int main(int argc, char **argv) {
    long entries = argc > 1 ? atol(argv[1]) : 100000;
    long lookups = argc > 2 ? atol(argv[2]) : 200000;
    const char *tmp = argc > 3 ? argv[3] : getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bench-judge-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (entries < 1 || lookups < 1 || !mkdtemp(dir)) {
        fprintf(stderr, "usage: bench_judge_cache [ENTRIES [LOOKUPS [DIR]]]: %s\n", strerror(errno));
        return 64;
    }
    char path[600];
    snprintf(path, sizeof path, "%s/judge.sqlite", dir);
    gerr e = {0};
    judge_cache *c = NULL;
    if (judge_cache_open(&c, path, JUDGE_CACHE_READWRITE, &e)) fail(&e);

    /* fill in batches of 1000 (one transaction each) */
    enum { BATCH = 1000 };
    static char requests[BATCH][1600], replies[BATCH][420];
    static judge_cache_entry batch[BATCH];
    double t0 = now_seconds(), c0 = cpu_seconds();
    for (long i = 0; i < entries; i += BATCH) {
        long n = entries - i < BATCH ? entries - i : BATCH;
        for (long k = 0; k < n; k++)
            make(i + k, requests[k], sizeof requests[k], replies[k], sizeof replies[k], &batch[k]);
        if (judge_cache_put_many(c, batch, (size_t)n, &e)) fail(&e);
    }
    rate fill = rate_of((double)entries, t0, c0);

    /* single puts: one commit each, as the judge stores answers */
    long singles = entries < 5000 ? entries : 5000;
    t0 = now_seconds(), c0 = cpu_seconds();
    for (long i = 0; i < singles; i++) {
        make(entries + i, requests[0], sizeof requests[0], replies[0], sizeof replies[0], &batch[0]);
        if (judge_cache_put(c, &batch[0], &e)) fail(&e);
    }
    rate put = rate_of((double)singles, t0, c0);

    judge_cache_close(c);

    /* each measurement opens the cache afresh, as a new run would: the
     * file is in the OS page cache, the connection's own caches are cold */
    rate hit_rw = time_lookups(path, JUDGE_CACHE_READWRITE, 0, entries, lookups, 1, 1, 1);
    rate hit_many = time_lookups(path, JUDGE_CACHE_READWRITE, 0, entries, lookups, 1, 256, 2);
    rate hit_ro = time_lookups(path, JUDGE_CACHE_READONLY, 0, entries, lookups, 1, 1, 3);
    rate miss_rw = time_lookups(path, JUDGE_CACHE_READWRITE, 10 * entries, entries, lookups, 0, 1, 4);

    struct stat st;
    long long bytes = stat(path, &st) == 0 ? (long long)st.st_size : -1;
    const char *names[] = {"fill (batches of 1000)", "single puts", "hits, get", "hits, get_many 256",
                           "hits, get, readonly", "misses, get"};
    const char *keys[] = {"fill", "put", "hit", "hit_many", "hit_readonly", "miss"};
    rate rates[] = {fill, put, hit_rw, hit_many, hit_ro, miss_rw};
    printf("%ld entries, %lld bytes; per wall second / per CPU second\n", entries, bytes);
    for (int i = 0; i < 6; i++) printf("%-24s %9.0f /s %9.0f /s\n", names[i], rates[i].wall, rates[i].cpu);
    printf("{\"entries\":%ld,\"bytes\":%lld", entries, bytes);
    for (int i = 0; i < 6; i++) printf(",\"%s_per_s\":%.0f,\"%s_per_cpu_s\":%.0f", keys[i], rates[i].wall, keys[i], rates[i].cpu);
    printf("}\n");

    char wal[700], shm[700];
    snprintf(wal, sizeof wal, "%s-wal", path);
    snprintf(shm, sizeof shm, "%s-shm", path);
    unlink(wal);
    unlink(shm);
    if (unlink(path) != 0 || rmdir(dir) != 0) fprintf(stderr, "bench_judge_cache: cannot remove %s\n", dir);
    return 0;
}
