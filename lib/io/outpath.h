/* Where an output path really goes, checked before any work.
 *
 * A regular file or a missing path is written atomically (temporary beside
 * it, then rename). A symlink is followed to its final target: the temporary
 * goes in the target's directory and the rename replaces the target, not the
 * link. A character or block device, a FIFO, a socket, or a descriptor link
 * (/dev/fd/N, /dev/stdout, /proc/PID/fd/N) is written in place, as `sort -o`
 * does: no rename is possible there and none is promised.
 *
 * Every "cannot create this output" is EX_CANTCREAT (73), for files and
 * directories alike, and names the path the user gave. */
#ifndef GRPO_OUTPATH_H
#define GRPO_OUTPATH_H

#include <stdbool.h>

#include "../util/err.h"

typedef enum {
    OUTPATH_FILE,   /* replaced whole (or written in place, see above) */
    OUTPATH_DIR,    /* a checkpoint directory, swapped in whole */
    OUTPATH_APPEND, /* lines appended (--metrics) */
} outpath_kind;

typedef struct {
    char *target;  /* symlinks followed; for in_place, the last name before the object */
    bool in_place; /* not a regular file, a directory or missing: open and write directly */
    bool is_dir;   /* target exists and is a directory */
    bool exists;
    int own_fd;    /* >= 0: the path names this process's descriptor N: dup it */
    bool is_socket;
} outpath_target;

/* Follows path's symlinks (at most 40). EX_CANTCREAT on a loop or a
 * component that cannot be looked up. */
int outpath_resolve(const char *path, outpath_target *t, gerr *e);
void outpath_target_free(outpath_target *t);

/* Checks that path can be written as kind, creating nothing: its parent
 * directory exists and is writable, it is not a directory where a file goes
 * (nor a non-directory where a directory goes), a device or FIFO is writable.
 * NULL and "-" (stdout) pass. EX_CANTCREAT naming path otherwise (EX_USAGE
 * for a directory named "/", "." or ".."). */
int outpath_check(const char *path, outpath_kind kind, gerr *e);

/* One path a tool is given, for outpath_distinct: the flag (messages), the
 * path (NULL and "-" are stdin/stdout and never compared), and its role. */
typedef enum {
    OUTPATH_READ,    /* an input */
    OUTPATH_REPLACE, /* an output replaced whole when done (temporary, rename) */
    OUTPATH_INPLACE, /* an output written in place or appended (--metrics, a cache) */
} outpath_role;

typedef struct {
    const char *flag;
    const char *path;
    outpath_role role;
} outpath_use;

/* Refuses, before any work, two outputs that are one file, and an input
 * that is an output written in place or appended (one replaced whole reads
 * the old file to its end before the new one takes its name, so `--in F
 * --out F` works). One file: the same path however spelled (symlinks, "..",
 * "./"), or the same inode (hard links). Devices, FIFOs and sockets are not
 * compared (--out /dev/null --stats /dev/null is fine). EX_USAGE:
 * "--stats F and --out ./F are the same file: ...". */
int outpath_distinct(const outpath_use *u, int n, gerr *e);

/* Opens path's in-place target for writing (t from outpath_resolve with
 * in_place set). Returns the descriptor or -1 with errno set. */
int outpath_open_in_place(const outpath_target *t);

/* Removes what a killed writer of target left beside it: ".NAME.tmp-PID"
 * files and directories whose process is gone (kill(PID, 0) fails with
 * ESRCH) or which are older than the current boot (the PID was reused).
 * ".NAME.old-PID" (a checkpoint moved aside) goes too under the same rule,
 * but only while NAME exists: when NAME is missing it is the last complete
 * checkpoint and stays. This process's own names are left alone. Best
 * effort: what cannot be removed stays. Names carry no host, so a directory
 * shared between hosts (NFS) or PID namespaces must not hold outputs being
 * written elsewhere. */
void outpath_remove_stale(const char *target);

/* fsync(fd), where an error that says there is nothing to make durable (a
 * pipe, a device, a directory on some filesystems: EINVAL, ESPIPE, EROFS,
 * ENOTSUP) counts as success. False with errno set otherwise. */
bool outpath_fsync(int fd);

/* Removes a file or a whole tree without following symlinks; true when gone. */
bool outpath_remove_tree(const char *path);

#endif
