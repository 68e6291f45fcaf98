/* libFuzzer target for the JSONL reader: arbitrary bytes (plain or zstd) go
 * through the stream reader and the record parser. Properties checked: no
 * crash or sanitizer report, and every record that parses serializes to
 * text that parses again to the same serialization. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/jsonl.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char path[] = "/tmp/grpo-fuzz-jsonl-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    if (write(fd, data, size) != (ssize_t)size) abort();
    close(fd);

    jsonl_reader rd;
    gerr e = {0};
    if (jsonl_open(&rd, path, &e) == 0) {
        record r, again;
        record_init(&r);
        record_init(&again);
        strbuf a = {0}, b = {0};
        while (jsonl_next(&rd, &r, &e) == 1) {
            sb_clear(&a);
            record_serialize(&r, &a);
            if (record_parse(&again, a.data, a.len, "re", 1, &e) != 0) abort();
            sb_clear(&b);
            record_serialize(&again, &b);
            if (a.len != b.len || memcmp(a.data, b.data, a.len)) abort();
            /* exercise the getters on whatever keys exist */
            for (size_t i = 0; i < r.n && i < 4; i++) {
                char *key = strndup(r.fields[i].key, r.fields[i].key_len);
                double d;
                int present;
                record_get_number(&r, key, false, &d, &present, &e);
                record_get_string(&r, key, false, &b, &present, &e);
                free(key);
            }
        }
        sb_free(&a);
        sb_free(&b);
        record_free(&r);
        record_free(&again);
        jsonl_close(&rd);
    }
    unlink(path);
    return 0;
}
