/* One answer line of a `cmd` reward program, apart from the process
 * plumbing in cmd.c so that it can be read (and fuzzed) alone. */
#include <math.h>
#include <string.h>

#include "reward.h"

const char *reward_cmd_answer_parse(const char *line, size_t len, reward_entries *out) {
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *rewards = j ? cJSON_GetObjectItemCaseSensitive(j, "rewards") : NULL;
    const cJSON *reward = j ? cJSON_GetObjectItemCaseSensitive(j, "reward") : NULL;
    const char *why = NULL;
    if (!cJSON_IsObject(j)) why = "a JSON object";
    else if (rewards) {
        const cJSON *v;
        if (!cJSON_IsObject(rewards)) why = "\"rewards\" to be an object";
        else cJSON_ArrayForEach(v, rewards) {
            if (cJSON_IsNull(v)) reward_entries_add(out, v->string, strlen(v->string), REWARD_NULL);
            else if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
                reward_entries_add(out, v->string, strlen(v->string), v->valuedouble);
            else why = "every value of \"rewards\" to be a finite number or null";
        }
    } else if (cJSON_IsNull(reward)) reward_entries_add(out, "cmd", 3, REWARD_NULL);
    else if (cJSON_IsNumber(reward) && isfinite(reward->valuedouble))
        reward_entries_add(out, "cmd", 3, reward->valuedouble);
    else why = "{\"reward\": number or null} or {\"rewards\": {name: number or null}}";
    cJSON_Delete(j);
    return why;
}
