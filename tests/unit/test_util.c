/* SHA-256, id hashes and the Philox RNG against published or independently
 * computed values (Python's hashlib for the id hashes and RNG keys); vec_expf;
 * the process groups of util/cleanup; flags_given; f32_first_nonfinite;
 * big_calloc; base64 against RFC 4648's test vectors. */
#include <float.h>
#include <stdint.h>
#include <stddef.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "util/base64.h"
#include "util/bigmem.h"
#include "util/cleanup.h"
#include "util/finite.h"
#include "util/flags.h"
#include "util/idhash.h"
#include "util/name_index.h"
#include "util/rng.h"
#include "util/sha256.h"
#include "util/strbuf.h"
#include "util/vecmath.h"

/* A child leading a process group of its own, with a grandchild in it; both sleep. */
static pid_t sleeping_group(pid_t *grandchild_out) {
    int fds[2];
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        pid_t g = fork();
        if (g == 0) {
            pause();
            _exit(0);
        }
        if (write(fds[1], &g, sizeof g) != (ssize_t)sizeof g) _exit(1);
        pause();
        _exit(0);
    }
    setpgid(pid, pid);
    close(fds[1]);
    if (read(fds[0], grandchild_out, sizeof *grandchild_out) != (ssize_t)sizeof *grandchild_out) *grandchild_out = -1;
    close(fds[0]);
    return pid;
}

/* Gone or a zombie (nobody may reap an orphan in a container without an init). */
static bool dead(pid_t pid) {
    if (kill(pid, 0) < 0) return true;
    char path[64], state = 0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return true;
    if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1) state = 0;
    fclose(f);
    return state == 'Z' || state == 'X';
}

static bool gone_within_a_second(pid_t pid) {
    for (int i = 0; i < 100; i++) {
        if (dead(pid)) return true;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    return false;
}

/* Runs flags_given(p, name) in a child; returns its exit status (-1 when it
 * did not exit) and its stderr in err (NUL-terminated, truncated to n-1). */
static int flags_given_in_child(const flag_parser *p, const char *name, char *err, size_t n) {
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(stdout); /* the child must not repeat buffered TAP */
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], 2) < 0) _exit(1);
        _exit(flags_given(p, name) ? 2 : 3);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && (r = read(fds[0], err + len, n - 1 - len)) > 0) len += (size_t)r;
    err[len] = 0;
    close(fds[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void sha_is(const char *msg, size_t len, const char *want) {
    unsigned char d[32];
    char hex[65];
    sha256(msg, len, d);
    sha256_hex(d, 32, hex);
    CHECK_EQ_STR(hex, want);
}

/* RFC 4648's vectors both ways, every byte value round trip, and what is
 * not base64 refused at the right character. */
static void test_base64(void) {
    TEST("base64: RFC 4648's test vectors, all 256 bytes round trip, what is not base64 refused where it is wrong");
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        strbuf b = {0};
        base64_encode(&b, (const uint8_t *)plain[i], strlen(plain[i]));
        CHECK_EQ_STR(b.data ? b.data : "", coded[i]);
        uint8_t *out;
        size_t n;
        CHECK_EQ_INT(base64_decode(coded[i], strlen(coded[i]), &out, &n), -1);
        CHECK(n == strlen(plain[i]) && !memcmp(out, plain[i], n));
        free(out);
        sb_free(&b);
    }
    uint8_t all[256], *back;
    size_t n;
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)(255 - i);
    strbuf b = {0};
    base64_encode(&b, all, 256);
    CHECK_EQ_INT(base64_decode(b.data, b.len, &back, &n), -1);
    CHECK(n == 256 && !memcmp(back, all, 256));
    free(back);
    sb_free(&b);
    const struct {
        const char *s;
        long at;
    } bad[] = {{"Zm9", 3}, {"Zm9v!A==", 4}, {"Z=9v", 1}, {"Zm=v", 2}, {"Zh==", 1}, {"Zm9=", 2}, {"Zm9vYg=a", 6}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t *out = (uint8_t *)1;
        long at = base64_decode(bad[i].s, strlen(bad[i].s), &out, &n);
        if (at != bad[i].at) printf("#   %s: at %ld, want %ld\n", bad[i].s, at, bad[i].at);
        CHECK(at == bad[i].at && out == NULL);
    }
}

int main(void) {
    test_base64();
    TEST("a buffer given room is an empty string at once");
    {
        strbuf b = {0};
        sb_reserve(&b, 0);
        CHECK(b.data != NULL);
        CHECK_EQ_STR(b.data, "");
        sb_free(&b);
    }
    TEST("name_index: every name found by bisection over the sorted positions; absent names, no order, no items");
    {
        typedef struct {
            int value;
            const char *name;
        } item;
        const item items[] = {{0, "wq"}, {1, "attn_norm"}, {2, "wk"}, {3, "tok_embd"}, {4, "b"}};
        name_array a = {items, 5, sizeof items[0], offsetof(item, name)};
        size_t *order = name_index_build(a);
        const char *sorted[] = {"attn_norm", "b", "tok_embd", "wk", "wq"};
        for (int i = 0; i < 5; i++) CHECK_EQ_STR(items[order[i]].name, sorted[i]);
        for (int i = 0; i < 5; i++) {
            const item *it = name_index_find(a, order, items[i].name);
            CHECK(it == &items[i]);
        }
        CHECK(name_index_find(a, order, "a") == NULL);
        CHECK(name_index_find(a, order, "wr") == NULL);
        CHECK(name_index_find(a, order, "zz") == NULL);
        CHECK(name_index_find(a, NULL, "wq") == NULL);
        free(order);
        name_array none = {items, 0, sizeof items[0], offsetof(item, name)};
        order = name_index_build(none);
        CHECK(name_index_find(none, order, "wq") == NULL);
        free(order);
    }
    TEST("vec_expf: within 2 ulp of exp over [-87, 88] (float64 reference); clamped outside");
    {
        double worst = 0;
        for (double x = -87.0; x <= 88.0; x += 1e-3) {
            float xf = (float)x;
            double want = exp((double)xf);
            worst = fmax(worst, fabs(vec_expf(xf) - want) / want);
        }
        printf("#   max relative error %.3g\n", worst);
        CHECK(worst < 2 * 0x1.0p-23); /* 2 ulp of a float in [1, 2) */
        CHECK(vec_expf(0.0f) == 1.0f);
        CHECK(vec_expf(-1000.0f) > 0 && vec_expf(-1000.0f) < 1.2e-38f);
        CHECK(vec_expf(1000.0f) > 1.6e38f && isfinite(vec_expf(1000.0f)));
        CHECK(isnan(vec_expf(NAN))); /* NaN in, NaN out (a broken row is then seen as one) */
    }
    TEST("f32_first_nonfinite: NaN, +inf and -inf found at every place around the chunk edges, the first one");
    {
        enum { N = 2 * FINITE_CHUNK + 37 };
        static float x[N];
        for (size_t i = 0; i < N; i++) x[i] = (float)i * (i % 2 ? -1e30f : 1e-40f); /* huge and subnormal */
        x[5] = FLT_MAX, x[6] = -FLT_MAX, x[7] = -0.0f;
        CHECK_EQ_INT(f32_first_nonfinite(x, N), N);
        CHECK_EQ_INT(f32_first_nonfinite(x, 0), 0);
        const float bad[] = {NAN, -NAN, INFINITY, -INFINITY};
        const size_t at[] = {0, 1, FINITE_CHUNK - 1, FINITE_CHUNK, FINITE_CHUNK + 1, 2 * FINITE_CHUNK, N - 1};
        int missed = 0;
        for (size_t b = 0; b < sizeof bad / sizeof *bad; b++)
            for (size_t a = 0; a < sizeof at / sizeof *at; a++) {
                float keep = x[at[a]];
                x[at[a]] = bad[b];
                missed += f32_first_nonfinite(x, N) != at[a];
                missed += at[a] > 0 && f32_first_nonfinite(x, at[a]) != at[a]; /* n stops before it */
                x[at[a]] = keep;
            }
        CHECK_EQ_INT(missed, 0);
        x[FINITE_CHUNK + 3] = NAN, x[FINITE_CHUNK + 9] = INFINITY;
        CHECK_EQ_INT(f32_first_nonfinite(x, N), FINITE_CHUNK + 3);
        gerr e = {0};
        CHECK_EQ_INT(nonfinite_error(&e, "m/model.safetensors", "w", 12, -INFINITY), EX_DATAERR);
        CHECK_EQ_STR(e.msg, "m/model.safetensors: tensor 'w': value 12 is -inf (non-finite weights: the checkpoint is broken)");
    }
    TEST("sha256 FIPS 180-4 examples");
    sha_is("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_is("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_is("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");

    TEST("sha256 streaming equals one shot (a million 'a')");
    {
        sha256_ctx c;
        sha256_init(&c);
        char chunk[1001];
        memset(chunk, 'a', sizeof chunk);
        for (int i = 0; i < 1000; i++) sha256_update(&c, chunk, i % 2 ? 999 : 1001);
        unsigned char d[32];
        char hex[65];
        sha256_final(&c, d);
        sha256_hex(d, 32, hex);
        CHECK_EQ_STR(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }

    TEST("id hashes match hashlib");
    CHECK(idhash_fraction("gsm8k/17", 8) == 5671980855714020.0 * 0x1.0p-53);
    CHECK(idhash_shard("gsm8k/17", 8) == 13231351033499562980ULL);

    TEST("philox4x32-10 known answers (Random123)");
    {
        const uint32_t cases[3][10] = {
            {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
            {~0u, ~0u, ~0u, ~0u, ~0u, ~0u, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
            {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
             0x5001e420, 0x24126ea1},
        };
        for (int i = 0; i < 3; i++) {
            uint32_t out[4];
            philox4x32_10(cases[i], cases[i] + 4, out);
            for (int k = 0; k < 4; k++) CHECK_EQ_INT(out[k], cases[i][6 + k]);
        }
    }

    TEST("rng key derivation matches the documented formula");
    {
        rng_stream r;
        rng_init(&r, 42, "arith/x", 7, 3);
        CHECK_EQ_INT(r.key[0], 0xfa8a6f46);
        CHECK_EQ_INT(r.key[1], 0x4f721181);
        uint32_t ctr[4] = {0, 0, 0, 0}, out[4];
        philox4x32_10(ctr, r.key, out);
        CHECK_EQ_INT(rng_u32(&r), out[0]);
        CHECK_EQ_INT(rng_u32(&r), out[1]);
    }

    TEST("rng streams depend on seed, id and index only");
    {
        rng_stream a, b, c, d;
        rng_init(&a, 1, "p/1", 3, 0);
        rng_init(&b, 1, "p/1", 3, 0);
        rng_init(&c, 1, "p/1", 3, 1);
        rng_init(&d, 2, "p/1", 3, 0);
        int same_ab = 0, same_ac = 0, same_ad = 0;
        for (int i = 0; i < 100; i++) {
            uint32_t x = rng_u32(&a);
            same_ab += x == rng_u32(&b);
            same_ac += x == rng_u32(&c);
            same_ad += x == rng_u32(&d);
        }
        CHECK_EQ_INT(same_ab, 100);
        CHECK(same_ac < 3);
        CHECK(same_ad < 3);
    }

    TEST("rng_uniform and rng_below are in range and roughly uniform");
    {
        rng_stream r;
        rng_init(&r, 7, "u", 1, 0);
        int buckets[10] = {0};
        double sum = 0;
        for (int i = 0; i < 100000; i++) {
            double u = rng_uniform(&r);
            CHECK(u >= 0 && u < 1);
            sum += u;
            uint64_t k = rng_below(&r, 10);
            CHECK(k < 10);
            buckets[k]++;
        }
        CHECK_NEAR(sum / 100000, 0.5, 0.01);
        for (int k = 0; k < 10; k++) CHECK(buckets[k] > 9500 && buckets[k] < 10500);
    }
    TEST("cleanup_run kills a registered process group, leader and the rest; an unregistered one lives");
    {
        pid_t g1, g2;
        pid_t a = sleeping_group(&g1), b = sleeping_group(&g2);
        CHECK(a > 0 && b > 0 && g1 > 0 && g2 > 0);
        CHECK(cleanup_register_group(a) && cleanup_register_group(b));
        cleanup_unregister_group(b);
        cleanup_run();
        bool killed = gone_within_a_second(a) && gone_within_a_second(g1);
        CHECK(killed);
        if (!killed) kill(-a, SIGKILL); /* never wait on a sleeper */
        int st = 0;
        CHECK_EQ_INT(waitpid(a, &st, 0), a);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        CHECK(!dead(b) && !dead(g2));
        kill(-b, SIGKILL);
        waitpid(b, NULL, 0);
        TEST("the group table has room for 16; the 17th is refused");
        int n = 0;
        while (n < 20 && cleanup_register_group(100000 + n)) n++;
        CHECK_EQ_INT(n, 16);
        for (int i = 0; i < n; i++) cleanup_unregister_group(100000 + i);
        CHECK(cleanup_register_group(100000));
        cleanup_unregister_group(100000);
    }
    TEST("flags_given: a flag of the table answers; a name the table lacks is exit 70 naming it");
    {
        bool quiet = false;
        long long n = 1;
        const flag_spec flags[] = {
            {"--quiet", NULL, FLAG_BOOL, &quiet, NULL, "less output", 0, 0, NULL},
            {"--n", NULL, FLAG_INT, &n, "N", "how many", 1, 10, NULL},
        };
        flag_parser p = {.usage = "t [flags]", .summary = "a test", .flags = flags, .n_flags = 2};
        char *argv[] = {"t", "--n", "3", NULL};
        flags_parse(&p, 3, argv);
        CHECK(flags_given(&p, "--n"));
        CHECK(!flags_given(&p, "--quiet"));
        char err[512];
        CHECK_EQ_INT(flags_given_in_child(&p, "--n", err, sizeof err), 2);
        CHECK_EQ_INT(flags_given_in_child(&p, "--quite", err, sizeof err), EX_SOFTWARE);
        CHECK(strstr(err, "--quite") != NULL);
    }
    TEST("flags_parse: with a positional list, arguments that are not flags go there in order, all after --");
    {
        bool quiet = false;
        long long n = 1;
        string_list files = {0};
        const flag_spec flags[] = {
            {"--quiet", NULL, FLAG_BOOL, &quiet, NULL, "less output", 0, 0, NULL},
            {"--n", NULL, FLAG_INT, &n, "N", "how many", 1, 10, NULL},
        };
        flag_parser p = {.usage = "t [flags] FILE...", .summary = "a test", .flags = flags, .n_flags = 2,
                         .positional = &files};
        char *argv[] = {"t", "a", "--n", "3", "-", "--", "--quiet", "c", NULL};
        flags_parse(&p, 8, argv);
        CHECK_EQ_INT(n, 3);
        CHECK(!quiet);
        CHECK_EQ_INT(files.n, 4);
        if (files.n == 4) {
            CHECK_EQ_STR(files.items[0], "a");
            CHECK_EQ_STR(files.items[1], "-");
            CHECK_EQ_STR(files.items[2], "--quiet");
            CHECK_EQ_STR(files.items[3], "c");
        }
        free(files.items);
    }
    TEST("kind tables: choices joined for a flag table, parsed back; ranges with open and closed ends");
    {
        const char *const names[] = {"adamw", "sgd", "lion"};
        char buf[32], tiny[8];
        CHECK_EQ_STR(FLAGS_CHOICES(buf, names), "adamw|sgd|lion");
        CHECK_EQ_STR(flags_choices(tiny, sizeof tiny, names, 1), "adamw");
        gerr e = {0};
        int i = -1;
        CHECK_EQ_INT(flags_choice_parse("--optimizer", names, 3, "lion", &i, &e), 0);
        CHECK_EQ_INT(i, 2);
        CHECK_EQ_INT(flags_choice_parse("--optimizer", names, 3, "adam", &i, &e), EX_USAGE);
        CHECK_EQ_STR(e.msg, "--optimizer: expected one of adamw|sgd|lion, got 'adam'");
        CHECK_EQ_INT(flags_range_check("--eps", 0, FLAG_RANGE_OPEN_LO(0, 1), &e), EX_USAGE);
        CHECK_EQ_STR(e.msg, "--eps: 0 is out of range (0, 1]");
        CHECK_EQ_INT(flags_range_check("--eps", 1, FLAG_RANGE_OPEN_LO(0, 1), &e), 0);
        CHECK_EQ_INT(flags_range_check("--e", 1, FLAG_RANGE_OPEN_HI(0, 1), &e), EX_USAGE);
        CHECK_EQ_STR(e.msg, "--e: 1 is out of range [0, 1)");
        CHECK_EQ_INT(flags_range_check("--e", 0, FLAG_RANGE_OPEN_HI(0, 1), &e), 0);
        CHECK_EQ_INT(flags_range_check("--n", 1e6 + 1, FLAG_RANGE(1, 1e6), &e), EX_USAGE);
        CHECK_EQ_STR(e.msg, "--n: 1000001 is out of range [1, 1000000]");
        CHECK_EQ_INT(flags_range_check("--x", NAN, FLAG_RANGE(-1, 1), &e), EX_USAGE);
    }
    TEST("big_calloc: zeros, 2 MiB aligned and every page resident at once above 2 MiB; calloc below; overflow is NULL");
    {
        float *small = big_calloc(100, sizeof(float));
        CHECK(small != NULL);
        bool zero = small != NULL;
        for (int i = 0; small && i < 100; i++) zero = zero && small[i] == 0.0f;
        CHECK(zero);
        free(small);
        size_t n = ((size_t)5 << 20) / sizeof(float) + 3; /* 5 MiB and a bit: the last huge page partly used */
        float *big = big_calloc(n, sizeof(float));
        CHECK(big != NULL);
        if (big) {
            CHECK_EQ_INT((uintptr_t)big % ((uintptr_t)2 << 20), 0);
            zero = true;
            for (size_t i = 0; i < n; i++) zero = zero && big[i] == 0.0f;
            CHECK(zero);
            /* resident before anything here wrote it: the zeros were written, not left
             * to the zero page (calloc's pages would not be resident yet) */
            float *fresh = big_calloc(n, sizeof(float));
            CHECK(fresh != NULL);
            if (fresh) {
                long page = sysconf(_SC_PAGESIZE);
                size_t pages = (n * sizeof(float) + (size_t)page - 1) / (size_t)page;
                unsigned char *vec = malloc(pages);
                CHECK(vec && mincore(fresh, n * sizeof(float), vec) == 0);
                size_t resident = 0;
                for (size_t i = 0; vec && i < pages; i++) resident += vec[i] & 1;
                CHECK_EQ_INT(resident, pages);
                free(vec);
                free(fresh);
            }
            big[n - 1] = 1.0f;
            free(big);
        }
        CHECK(big_calloc(SIZE_MAX / 2, 4) == NULL);
        CHECK(big_calloc(SIZE_MAX / 4 + 1, 4) == NULL);
    }
    return check_done();
}
