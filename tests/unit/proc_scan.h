/* For tests that check a sandbox left nothing behind: counting processes by
 * command line or real uid, and directory entries by name prefix. */
#ifndef GRPO_TEST_PROC_SCAN_H
#define GRPO_TEST_PROC_SCAN_H

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"

/* Processes whose command line (arguments joined by spaces) holds `what`,
 * or, when what is NULL, whose real uid is `uid`. Zombies have no command
 * line, so only the uid count sees them. */
static inline int proc_count(const char *what, unsigned uid) {
    DIR *d = opendir("/proc");
    if (!d) return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (ent->d_name[0] < '0' || ent->d_name[0] > '9') continue;
        char path[300], buf[8192];
        snprintf(path, sizeof path, "/proc/%s/%s", ent->d_name, what ? "cmdline" : "status");
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0) continue;
        buf[got] = 0;
        if (what) {
            for (ssize_t i = 0; i < got; i++)
                if (!buf[i]) buf[i] = ' ';
            n += strstr(buf, what) != NULL;
        } else {
            const char *u = strstr(buf, "\nUid:");
            unsigned real;
            n += u && sscanf(u + 5, "%u", &real) == 1 && real == uid;
        }
    }
    closedir(d);
    return n;
}

/* Entries of dir whose name starts with prefix. */
static inline int dir_count(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)))
        if (!strncmp(ent->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

static inline bool path_exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

#endif
