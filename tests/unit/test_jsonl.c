/* JSONL streams: plain and zstd, long lines, line numbers in errors,
 * truncated or corrupt compression, atomic writes. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "io/jsonl.h"

static char dir[] = "/tmp/grpo-test-jsonl-XXXXXX";

static char *path_in(const char *name) {
    static char buf[4][256];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static void write_raw(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    CHECK(fwrite(data, 1, len, f) == len);
    fclose(f);
}

static size_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* Writes n records {"i":k,"pad":"..."} through the writer. */
static void write_records(const char *path, int n, size_t pad) {
    jsonl_writer w;
    gerr e = {0};
    CHECK_EQ_INT(jsonl_writer_open(&w, path, &e), 0);
    record r;
    record_init(&r);
    char *text = malloc(pad + 1);
    for (size_t i = 0; i < pad; i++) text[i] = (char)('a' + i % 26);
    for (int k = 0; k < n; k++) {
        record_reset(&r, NULL, 0);
        record_set_int(&r, "i", k);
        record_set_string(&r, "pad", text, pad);
        CHECK_EQ_INT(jsonl_write(&w, &r, &e), 0);
    }
    CHECK_EQ_INT(jsonl_writer_commit(&w, &e), 0);
    free(text);
    record_free(&r);
}

/* Reads every record; returns how many, -1 on error (message in e). */
static long read_all(const char *path, gerr *e, long *last_i) {
    jsonl_reader rd;
    memset(e, 0, sizeof *e);
    if (jsonl_open(&rd, path, e)) return -1;
    record r;
    record_init(&r);
    long n = 0;
    int got;
    while ((got = jsonl_next(&rd, &r, e)) == 1) {
        long long i;
        if (last_i && record_get_int(&r, "i", true, 0, 1LL << 40, &i, NULL, e) == 0) *last_i = (long)i;
        n++;
    }
    record_free(&r);
    jsonl_close(&rd);
    return got < 0 ? -1 : n;
}

int main(void) {
    if (!mkdtemp(dir)) return 2;
    gerr e;
    long last = -1;

    TEST("plain and zstd files read back alike");
    write_records(path_in("a.jsonl"), 5000, 40);
    write_records(path_in("a.jsonl.zst"), 5000, 40);
    CHECK_EQ_INT(read_all(path_in("a.jsonl"), &e, &last), 5000);
    CHECK_EQ_INT(last, 4999);
    CHECK_EQ_INT(read_all(path_in("a.jsonl.zst"), &e, &last), 5000);
    CHECK(file_size(path_in("a.jsonl.zst")) < file_size(path_in("a.jsonl")) / 4);
    {
        FILE *f = fopen(path_in("a.jsonl.zst"), "rb");
        unsigned char magic[4] = {0};
        CHECK(f && fread(magic, 1, 4, f) == 4);
        if (f) fclose(f);
        CHECK(magic[0] == 0x28 && magic[1] == 0xB5 && magic[2] == 0x2F && magic[3] == 0xFD);
    }

    TEST("a line longer than every buffer (20 MB) is one record");
    write_records(path_in("long.jsonl.zst"), 3, 20u << 20);
    CHECK_EQ_INT(read_all(path_in("long.jsonl.zst"), &e, &last), 3);
    CHECK_EQ_INT(last, 2);

    TEST("blank lines are skipped but counted, CRLF and a missing last newline are fine");
    {
        const char *text = "{\"i\":0}\r\n\n   \n{\"i\":1}\n{\"i\":2}";
        write_raw(path_in("b.jsonl"), text, strlen(text));
        CHECK_EQ_INT(read_all(path_in("b.jsonl"), &e, &last), 3);
        CHECK_EQ_INT(last, 2);
        const char *bad = "{\"i\":0}\n\n{\"i\":1}\n{\"i\":}\n";
        write_raw(path_in("c.jsonl"), bad, strlen(bad));
        CHECK_EQ_INT(read_all(path_in("c.jsonl"), &e, NULL), -1);
        CHECK_EQ_INT(e.code, EX_DATAERR);
        char want[300];
        snprintf(want, sizeof want, "%s:4: invalid JSON at column 6", path_in("c.jsonl"));
        CHECK(strncmp(e.msg, want, strlen(want)) == 0);
        if (strncmp(e.msg, want, strlen(want))) printf("#   got: %s\n", e.msg);
    }

    TEST("truncated zstd is an error naming the line where it ends");
    {
        size_t n = file_size(path_in("a.jsonl.zst"));
        FILE *f = fopen(path_in("a.jsonl.zst"), "rb");
        char *buf = malloc(n);
        CHECK(f && fread(buf, 1, n, f) == n);
        if (f) fclose(f);
        write_raw(path_in("t.jsonl.zst"), buf, n - 7);
        CHECK_EQ_INT(read_all(path_in("t.jsonl.zst"), &e, NULL), -1);
        CHECK_EQ_INT(e.code, EX_DATAERR);
        CHECK(strstr(e.msg, "truncated zstd") != NULL || strstr(e.msg, "corrupt zstd") != NULL);
        CHECK(strstr(e.msg, "t.jsonl.zst:") == strstr(e.msg, dir) + strlen(dir) + 1);

        TEST("corrupt zstd is an error, not garbage");
        buf[n / 2] ^= 0x5A;
        write_raw(path_in("x.jsonl.zst"), buf, n);
        CHECK_EQ_INT(read_all(path_in("x.jsonl.zst"), &e, NULL), -1);
        CHECK_EQ_INT(e.code, EX_DATAERR);

        TEST("concatenated zstd frames read as one stream");
        buf[n / 2] ^= 0x5A;
        char *two = malloc(2 * n);
        memcpy(two, buf, n);
        memcpy(two + n, buf, n);
        write_raw(path_in("two.jsonl.zst"), two, 2 * n);
        CHECK_EQ_INT(read_all(path_in("two.jsonl.zst"), &e, NULL), 10000);
        free(two);
        free(buf);
    }

    TEST("a missing input is EX_NOINPUT; an empty one has no records");
    CHECK_EQ_INT(read_all(path_in("nope.jsonl"), &e, NULL), -1);
    CHECK_EQ_INT(e.code, EX_NOINPUT);
    write_raw(path_in("empty.jsonl"), "", 0);
    CHECK_EQ_INT(read_all(path_in("empty.jsonl"), &e, NULL), 0);

    TEST("an aborted write leaves neither the output nor a temporary");
    {
        jsonl_writer w;
        CHECK_EQ_INT(jsonl_writer_open(&w, path_in("gone.jsonl"), &e), 0);
        CHECK_EQ_INT(jsonl_write_line(&w, "{}", 2, &e), 0);
        char *tmp = temp_path_for(path_in("gone.jsonl"));
        CHECK(access(tmp, F_OK) == 0);
        jsonl_writer_abort(&w);
        CHECK(access(tmp, F_OK) != 0);
        CHECK(access(path_in("gone.jsonl"), F_OK) != 0);
        free(tmp);
    }

    TEST("a write replaces an existing file whole");
    write_records(path_in("a.jsonl"), 3, 5);
    CHECK_EQ_INT(read_all(path_in("a.jsonl"), &e, NULL), 3);

    TEST("an output in a missing directory is an error");
    {
        jsonl_writer w;
        CHECK(jsonl_writer_open(&w, "/nonexistent-dir/x.jsonl", &e) != 0);
        CHECK(strstr(e.msg, "cannot create") != NULL);
    }

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
    return check_done();
}
