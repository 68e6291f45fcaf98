/* libFuzzer target: any bytes as a checkpoint's grpo/state.json. A file that
 * reads must write back (what a resumed run does) and read again to the same
 * state; one that does not is a one-line EX_DATAERR naming the file. */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h"
#include "train/state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_string(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[256], again_path[256];
    fuzz_write("state.json", data, size, path, sizeof path);
    snprintf(again_path, sizeof again_path, "%s/again.json", fuzz_dir());
    train_state s, again;
    gerr e = {0};
    if (state_read(&s, path, &e) == 0) {
        if (state_write(&s, again_path, &e) != 0) {
            fprintf(stderr, "fuzz: a state that reads does not write: %s\n", e.msg);
            abort();
        }
        if (state_read(&again, again_path, &e) != 0) {
            fprintf(stderr, "fuzz: a state written does not read: %s\n", e.msg);
            abort();
        }
        if (s.step != again.step || s.schedule != again.schedule || s.schedule_step != again.schedule_step ||
            s.warmup_steps != again.warmup_steps || s.total_steps != again.total_steps || s.seed != again.seed ||
            s.next_index != again.next_index || strcmp(s.batch_sha256, again.batch_sha256) ||
            !same_string(s.flags_json, again.flags_json) || !same_string(s.parent, again.parent) ||
            !same_string(s.paths_json, again.paths_json) || !same_string(s.version, again.version))
            abort();
        state_free(&again);
        state_free(&s);
    } else {
        fuzz_check_error(&e, path, EX_DATAERR, EX_DATAERR);
    }
    return 0;
}
