/* The training state a checkpoint carries in grpo/ (formats/checkpoint.md):
 *   state.json             step, schedule position, RNG, flags, batch hash
 *   optimizer.safetensors  AdamW's moments per trained parameter
 * Both are written atomically (temporary, fsync, rename), so they also work
 * inside a ckptdir's temporary tree. Malformed files are EX_DATAERR naming
 * the file and the field or tensor; a missing file is EX_NOINPUT. */
#ifndef GRPO_STATE_H
#define GRPO_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../formats/safetensors.h"
#include "../util/err.h"
#include "optim.h"

/* ---- grpo/state.json ------------------------------------------------------- */

typedef struct {
    long long step; /* optimizer steps taken (1 after the first update) */
    sched_kind schedule;
    long long schedule_step; /* the next step's position on the lr curve */
    long long warmup_steps, total_steps;
    long long seed, next_index; /* the RNG: Philox keyed by (seed, id, index) */
    /* Every grpo-update flag as used, defaults filled in, names without
     * "--": a JSON object's text. Build it with record_set_* and
     * record_serialize (lib/io/record.h); it is written as given. */
    char *flags_json;
    char batch_sha256[65]; /* lower-case hex SHA-256 of the batch, NUL-terminated */
    char *parent;          /* the --model this update started from */
    /* Where the files the checkpoint names are: a JSON object's text,
     * {"NAME": {"relative": R, "absolute": A}, ...} (lib/ckpt/ckpt_paths.h);
     * NULL: none (written before it existed). */
    char *paths_json;
    char *version;         /* grpo version that wrote the file */
} train_state;

/* Writes s as one line of compact JSON. EX_SOFTWARE when s does not hold
 * what the format needs (flags_json not one JSON object, batch_sha256 not 64
 * lower-case hex digits, a negative count, parent or version NULL or not
 * UTF-8, paths_json given and not one JSON object); EX_CANTCREAT / EX_IOERR
 * from the write. */
int state_write(const train_state *s, const char *path, gerr *e);

/* Reads path into s (owned strings; release with state_free). Every field is
 * required but "paths" (optional, an object); unknown fields are ignored. Errors name the field:
 * "PATH: field \"schedule.name\": expected constant, linear or cosine, got \"x\"".
 * On error s is left empty. */
int state_read(train_state *s, const char *path, gerr *e);
void state_free(train_state *s);

/* ---- grpo/optimizer.safetensors -------------------------------------------- */

/* One trained parameter: its name (as in model.safetensors or
 * adapter_model.safetensors), its shape, and its AdamW moments m (exp_avg)
 * and v (exp_avg_sq), numel floats each. With SGD m and v are not used. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    float *m, *v;
    /* partial: m and v hold only elements first .. first+count-1 of the
     * tensor (a ZeRO-1 rank's slice; count may be 0). Read only: the file
     * is always written whole. */
    bool partial;
    int64_t first, count;
} optim_tensor;

/* Writes the file: metadata {"format":"grpo","optimizer":"adamw"|"sgd"};
 * with AdamW, F32 tensors "exp_avg.NAME" and "exp_avg_sq.NAME" for each
 * parameter in the order given (exp_avg first); with SGD no tensor.
 * EX_SOFTWARE for a partial tensor. */
int optim_state_write(const char *path, optim_kind kind, const optim_tensor *t, size_t n, gerr *e);

/* Reads the file back into t[i].m and t[i].v (only the slice of a partial
 * tensor: the rest is not copied, so a rank's memory stays its share). A
 * missing file is EX_NOINPUT. EX_DATAERR, naming the file:
 * format metadata not "grpo"; optimizer metadata missing or not `kind`
 * (naming both: moments of one optimizer do not resume another); a tensor
 * missing, not F32, or of another shape; a tensor the list does not expect
 * (the trained parameters changed); a moment not finite, or a second moment
 * below 0. */
int optim_state_read(const char *path, optim_kind kind, optim_tensor *t, size_t n, gerr *e);
/* optim_state_read's last check, which grpo-update also makes before it
 * writes: every moment finite and every second moment >= 0. EX_DATAERR
 * "WHERE: tensor \"exp_avg.NAME\": value I is NaN (non-finite optimizer
 * state: WHY)". t[i].m or .v NULL (SGD) is skipped. */
int optim_state_check(const optim_tensor *t, size_t n, const char *where, const char *why, gerr *e);

#endif
