#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda/cuda.h"

const char *const device_names[] = {"auto", "cpu", "cuda"};

const char *device_default(void) {
    const char *v = getenv("GRPO_DEVICE");
    return v && *v ? v : "auto";
}

int device_select(const char *flag, const char *device, const backend **be, gerr *e) {
    *be = NULL;
    if (!strcmp(device, "cpu")) return 0;
    bool want = !strcmp(device, "cuda");
    if (!want && strcmp(device, "auto")) return gerr_set(e, EX_USAGE, "%s %s: expected auto, cpu or cuda", flag, device);
    if (!cuda_built()) {
        if (!want) return 0;
        return gerr_set(e, EX_UNAVAILABLE, "%s cuda: this build has no CUDA support (make CUDA=1)", flag);
    }
    if (!want && cuda_device_count() <= 0) return 0;
    gerr why = {0};
    if (cuda_open(&why)) {
        if (!want) return 0; /* auto: a device that cannot be opened means the CPU */
        return gerr_set(e, EX_UNAVAILABLE, "%s cuda: %.900s", flag, why.msg);
    }
    *be = backend_cuda();
    return 0;
}

void device_release(const backend *be) {
    if (be) cuda_close();
}

void device_describe(const backend *be, char *buf, size_t n) {
    if (!be) {
        snprintf(buf, n, "cpu");
        return;
    }
    char name[160];
    cuda_device_name(name, sizeof name);
    snprintf(buf, n, "%s (%s)", be->name, name);
}
