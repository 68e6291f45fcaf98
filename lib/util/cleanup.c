#include "cleanup.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MAX_PENDING = 64, MAX_PATH_LEN = 4096, MAX_GROUPS = 16 };

static struct {
    volatile sig_atomic_t used;
    bool is_dir;
    char path[MAX_PATH_LEN];
} pending[MAX_PENDING];
static volatile sig_atomic_t groups[MAX_GROUPS]; /* 0 = free slot */
static bool handlers_installed;

/* Removes a directory tree without allocating (it may run in a signal handler). */
static void remove_tree(const char *path, int depth) {
    if (depth > 8) return;
    DIR *d = opendir(path);
    if (d) {
        struct dirent *ent;
        while ((ent = readdir(d))) {
            if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
            char child[MAX_PATH_LEN];
            int n = snprintf(child, sizeof child, "%s/%s", path, ent->d_name);
            if (n < 0 || n >= (int)sizeof child) continue;
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(child, depth + 1);
            else
                unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

void cleanup_run(void) {
    for (int i = 0; i < MAX_PENDING; i++) {
        if (!pending[i].used) continue;
        if (pending[i].is_dir)
            remove_tree(pending[i].path, 0);
        else
            unlink(pending[i].path);
        pending[i].used = 0;
    }
    for (int i = 0; i < MAX_GROUPS; i++) {
        if (groups[i] > 0) kill(-(pid_t)groups[i], SIGKILL);
        groups[i] = 0;
    }
}

static void on_signal(int sig) {
    cleanup_run();
    signal(sig, SIG_DFL);
    raise(sig);
}

void cleanup_install_handlers(void) {
    if (handlers_installed) return;
    handlers_installed = true;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

bool cleanup_register(const char *path, bool is_dir) {
    cleanup_install_handlers();
    if (strlen(path) >= MAX_PATH_LEN) return false;
    for (int i = 0; i < MAX_PENDING; i++) {
        if (pending[i].used) continue;
        strcpy(pending[i].path, path);
        pending[i].is_dir = is_dir;
        pending[i].used = 1;
        return true;
    }
    return false;
}

void cleanup_unregister(const char *path) {
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i].used && !strcmp(pending[i].path, path)) pending[i].used = 0;
}

bool cleanup_register_group(pid_t pgid) {
    cleanup_install_handlers();
    for (int i = 0; i < MAX_GROUPS; i++) {
        if (groups[i]) continue;
        groups[i] = (sig_atomic_t)pgid;
        return true;
    }
    return false;
}

void cleanup_unregister_group(pid_t pgid) {
    for (int i = 0; i < MAX_GROUPS; i++)
        if (groups[i] == (sig_atomic_t)pgid) groups[i] = 0;
}
