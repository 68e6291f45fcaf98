/* Checkpoint directories: built under a temporary name, swapped in whole,
 * nothing left behind on commit, abort or a replaced checkpoint. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "helpers.h"
#include "io/ckptdir.h"
#include "io/outstream.h"
#include "util/cleanup.h"

/* Fixed-seed bytes, different per seed, never all zero. */
static void fill(unsigned char *buf, size_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        buf[i] = (unsigned char)s;
    }
}

/* Writes n seeded bytes at relpath inside the checkpoint being built. */
static int put(ckptdir *c, const char *relpath, size_t n, uint64_t seed) {
    gerr e = {0};
    char *path = ckptdir_path(c, relpath, &e);
    if (!path) {
        printf("#   %s\n", e.msg);
        return 0;
    }
    unsigned char *buf = malloc(n);
    fill(buf, n, seed);
    int rc = write_file_atomic(path, buf, n, &e);
    if (rc) printf("#   %s\n", e.msg);
    free(buf);
    free(path);
    return rc == 0;
}

/* True when dir/relpath holds exactly the n bytes of seed. */
static int holds(const char *dir, const char *relpath, size_t n, uint64_t seed) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, relpath);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char *want = malloc(n), *got = malloc(n + 1);
    fill(want, n, seed);
    size_t len = fread(got, 1, n + 1, f);
    fclose(f);
    int ok = len == n && !memcmp(want, got, n);
    free(want);
    free(got);
    return ok;
}

static int exists(const char *dir, const char *relpath) {
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, relpath);
    return lstat(path, &st) == 0;
}

/* Number of entries in dir besides . and ..; *only gets the name when 1. */
static int count_entries(const char *dir, char *only, size_t size) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        if (only) snprintf(only, size, "%s", ent->d_name);
        n++;
    }
    closedir(d);
    return n;
}

int main(void) {
    char root[] = "/tmp/grpo-test-ckpt-XXXXXX";
    if (!mkdtemp(root)) {
        printf("# mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    char final[512], tmp_name[128], only[256];
    snprintf(final, sizeof final, "%s/ckpt-1", root);
    snprintf(tmp_name, sizeof tmp_name, ".ckpt-1.tmp-%ld", (long)getpid());
    gerr e = {0};
    ckptdir c;

    TEST("begin makes .NAME.tmp-PID next to the final directory");
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    CHECK(c.tmp_dir && strstr(c.tmp_dir, tmp_name));
    CHECK(exists(root, tmp_name));
    CHECK(!exists(root, "ckpt-1"));

    TEST("ckptdir_path creates subdirectories and stays inside");
    CHECK(put(&c, "config.json", 300, 1));
    CHECK(put(&c, "model.safetensors", 5000, 2));
    CHECK(put(&c, "grpo/state.json", 120, 3));
    CHECK(put(&c, "grpo/optimizer.safetensors", 4096, 4));
    CHECK(put(&c, "deep/er/still/file.bin", 17, 5));
    static const char *const bad_paths[] = {"", "/etc/passwd", "../x", "a/../../x", "a/./b",
                                            "a//b", "grpo/", ".", ".."};
    for (size_t i = 0; i < sizeof bad_paths / sizeof bad_paths[0]; i++) {
        char *p = ckptdir_path(&c, bad_paths[i], &e);
        CHECK(p == NULL);
        free(p);
    }
    CHECK(strstr(e.msg, "not a relative path"));
    char *p = ckptdir_path(&c, "model.safetensors/inside", &e); /* a file in the way */
    CHECK(p == NULL && e.code == EX_CANTCREAT);
    free(p);

    TEST("commit puts the whole tree in place and leaves no temporary");
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    CHECK(c.tmp_dir == NULL);
    CHECK(holds(final, "config.json", 300, 1));
    CHECK(holds(final, "model.safetensors", 5000, 2));
    CHECK(holds(final, "grpo/state.json", 120, 3));
    CHECK(holds(final, "grpo/optimizer.safetensors", 4096, 4));
    CHECK(holds(final, "deep/er/still/file.bin", 17, 5));
    CHECK_EQ_INT(count_entries(root, only, sizeof only), 1);
    CHECK_EQ_STR(only, "ckpt-1");
    CHECK_EQ_INT(count_entries(final, NULL, 0), 4); /* no per-file temporaries either */

    TEST("commit over an existing checkpoint swaps it: old files gone, new present");
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    CHECK(put(&c, "config.json", 301, 11));
    CHECK(put(&c, "adapter_model.safetensors", 777, 12));
    CHECK(put(&c, "grpo/state.json", 99, 13));
    CHECK(holds(final, "model.safetensors", 5000, 2)); /* untouched until commit */
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    CHECK(holds(final, "config.json", 301, 11));
    CHECK(holds(final, "adapter_model.safetensors", 777, 12));
    CHECK(holds(final, "grpo/state.json", 99, 13));
    CHECK(!exists(final, "model.safetensors"));
    CHECK(!exists(final, "grpo/optimizer.safetensors"));
    CHECK(!exists(final, "deep"));
    CHECK_EQ_INT(count_entries(root, only, sizeof only), 1);
    CHECK_EQ_STR(only, "ckpt-1");

    TEST("abort leaves nothing and the old checkpoint untouched");
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    CHECK(put(&c, "config.json", 50, 21));
    CHECK(put(&c, "grpo/state.json", 50, 22));
    ckptdir_abort(&c);
    ckptdir_abort(&c); /* twice is harmless */
    CHECK(c.tmp_dir == NULL);
    CHECK_EQ_INT(count_entries(root, NULL, 0), 1);
    CHECK(holds(final, "config.json", 301, 11));

    TEST("a trailing slash names the same directory");
    char slashed[600];
    snprintf(slashed, sizeof slashed, "%s/ckpt-2//", root);
    CHECK_EQ_INT(ckptdir_begin(&c, slashed, &e), 0);
    CHECK(put(&c, "generation_config.json", 64, 31));
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    char final2[600];
    snprintf(final2, sizeof final2, "%s/ckpt-2", root);
    CHECK(holds(final2, "generation_config.json", 64, 31));
    CHECK_EQ_INT(count_entries(root, NULL, 0), 2);

    TEST("an empty checkpoint commits too");
    char final3[600];
    snprintf(final3, sizeof final3, "%s/empty", root);
    CHECK_EQ_INT(ckptdir_begin(&c, final3, &e), 0);
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    CHECK_EQ_INT(count_entries(final3, NULL, 0), 0);
    remove_tree(final3);

    TEST("a symlink at the final name is replaced, its target left alone");
    char target[600], link_path[600];
    snprintf(target, sizeof target, "%s/ckpt-2", root);
    snprintf(link_path, sizeof link_path, "%s/latest", root);
    CHECK(symlink("ckpt-2", link_path) == 0);
    CHECK_EQ_INT(ckptdir_begin(&c, link_path, &e), 0);
    CHECK(put(&c, "config.json", 10, 41));
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    struct stat st;
    CHECK(lstat(link_path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(holds(link_path, "config.json", 10, 41));
    CHECK(holds(target, "generation_config.json", 64, 31));
    remove_tree(link_path);
    remove_tree(target);

    TEST("a regular file at the final name is refused by begin, before any work");
    char file_path[600];
    snprintf(file_path, sizeof file_path, "%s/plainfile", root);
    FILE *f = fopen(file_path, "w");
    CHECK(f && fputs("keep me", f) >= 0 && fclose(f) == 0);
    CHECK_EQ_INT(ckptdir_begin(&c, file_path, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "not a directory") && strstr(e.msg, "plainfile"));
    CHECK(c.tmp_dir == NULL);

    TEST("a regular file put there after begin is refused by commit, nothing left");
    unlink(file_path);
    CHECK_EQ_INT(ckptdir_begin(&c, file_path, &e), 0);
    f = fopen(file_path, "w");
    CHECK(f && fputs("keep me", f) >= 0 && fclose(f) == 0);
    CHECK(put(&c, "config.json", 10, 51));
    CHECK_EQ_INT(ckptdir_commit(&c, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "not a directory") && strstr(e.msg, "plainfile"));
    CHECK(lstat(file_path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 7);
    CHECK_EQ_INT(count_entries(root, NULL, 0), 2); /* ckpt-1, plainfile */
    unlink(file_path);

    TEST("begin fails cleanly when the parent is missing or the name unusable");
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/ckpt", root);
    CHECK_EQ_INT(ckptdir_begin(&c, missing, &e), EX_CANTCREAT);
    CHECK(strstr(e.msg, "no/such") && !strstr(e.msg, ".tmp-")); /* the user's path, not ours */
    CHECK(c.tmp_dir == NULL);
    CHECK_EQ_INT(ckptdir_begin(&c, "/", &e), EX_USAGE);
    char dots[600];
    snprintf(dots, sizeof dots, "%s/..", root);
    CHECK_EQ_INT(ckptdir_begin(&c, dots, &e), EX_USAGE);
    CHECK_EQ_INT(count_entries(root, NULL, 0), 1);

    TEST("a stale temporary of this PID is cleared by begin");
    char stale[700];
    snprintf(stale, sizeof stale, "%s/%s/sub", root, tmp_name);
    CHECK(mkdir(stale, 0755) != 0); /* parent absent: make it in two steps */
    snprintf(stale, sizeof stale, "%s/%s", root, tmp_name);
    CHECK(mkdir(stale, 0755) == 0);
    snprintf(stale, sizeof stale, "%s/%s/leftover", root, tmp_name);
    f = fopen(stale, "w");
    CHECK(f && fclose(f) == 0);
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    CHECK(!exists(c.tmp_dir, "leftover"));
    CHECK(put(&c, "config.json", 8, 61));
    CHECK_EQ_INT(ckptdir_commit(&c, &e), 0);
    CHECK(holds(final, "config.json", 8, 61));
    CHECK(!exists(final, "leftover"));
    CHECK_EQ_INT(count_entries(root, NULL, 0), 1);

    TEST("a failed write inside the tree: the message names DIR, not the temporary");
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    gerr_set(&e, EX_IOERR, "%s/grpo/state.json: write failed: No space left on device", c.tmp_dir);
    ckptdir_fail(&c, &e);
    CHECK(!strstr(e.msg, ".tmp-") && strstr(e.msg, "ckpt-1/grpo/state.json: write failed"));
    CHECK(strncmp(e.msg, final, strlen(final)) == 0);
    CHECK(!exists(root, tmp_name));

    TEST("the temporary is registered: die()'s cleanup removes it");
    CHECK_EQ_INT(ckptdir_begin(&c, final, &e), 0);
    CHECK(put(&c, "grpo/state.json", 8, 71));
    cleanup_run();
    CHECK(!exists(root, tmp_name));
    CHECK(holds(final, "config.json", 8, 61));
    ckptdir_abort(&c); /* after cleanup: still safe */
    CHECK_EQ_INT(count_entries(root, NULL, 0), 1);

    remove_tree(root);
    return check_done();
}
