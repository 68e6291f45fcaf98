/* libFuzzer target: any bytes as one answer line of a `cmd` reward program
 * (the program is untrusted: it may be anything a user wrote). An answer is
 * taken or refused with what was expected; every value taken is finite or
 * null and every name is the JSON key decoded, NUL-terminated. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "reward/reward.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *line = fuzz_copy(data, size);
    reward_entries out = {0};
    const char *why = reward_cmd_answer_parse(line, size, &out);
    if (why && !*why) abort();
    for (size_t i = 0; i < out.n; i++) {
        if (!out.v[i].name) abort();
        if (isinf(out.v[i].value)) abort(); /* finite, or NaN for null */
        (void)strlen(out.v[i].name);
    }
    reward_entries_free(&out);
    free(line);
    return 0;
}
