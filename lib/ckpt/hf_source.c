/* A file of a model's source directory, or of its adapter's base (hf_source.h). */
#include "hf_source.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "../util/strbuf.h"
#include "adapter_dir.h"

int hf_source_file(const char *source, const char *file, char **path, gerr *e) {
    *path = NULL;
    strbuf b = {0};
    sb_printf(&b, "%s/%s", source, file);
    struct stat st;
    if (stat(b.data, &st) == 0) {
        *path = b.data;
        return 0;
    }
    sb_free(&b);
    if (!lora_is_adapter_dir(source)) return 0;
    char *base;
    int rc = lora_adapter_base_path(source, &base, e);
    if (rc) return rc;
    if (stat(base, &st) == 0 && S_ISDIR(st.st_mode)) {
        sb_printf(&b, "%s/%s", base, file);
        if (stat(b.data, &st) == 0) *path = b.data;
        else sb_free(&b);
    }
    free(base);
    return 0;
}
