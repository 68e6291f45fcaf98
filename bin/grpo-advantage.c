/* grpo-advantage: scored records in, advantaged records out (formats/advantaged.md). */
#include "adv/adv_multi.h"
#include "adv/advantage.h"
#include "io/outpath.h"
#include "util/err.h"
#include "util/flags.h"

int main(int argc, char **argv) {
    adv_opts o;
    adv_opts_default(&o);
    const char *in = "-", *out = "-", *stats = NULL, *scale = "group", *baseline = "mean",
               *multi = "sum-then-normalize";
    const flag_spec flags[] = {
        {"--in", NULL, FLAG_STRING, &in, "F", "scored records (JSONL, plain or zstd; - = stdin)", 0, 0, NULL},
        {"--out", NULL, FLAG_STRING, &out, "F", "advantaged records (- = stdout; F.zst is zstd-compressed)", 0, 0,
         NULL},
        {"--scale", NULL, FLAG_CHOICE, &scale, "group|batch|none",
         "divide by the group std, the whole input std (two passes), or nothing (Dr. GRPO)", 0, 0,
         "group|batch|none"},
        {"--baseline", NULL, FLAG_CHOICE, &baseline, "mean|loo",
         "subtract the group mean, or the mean of the other members (RLOO)", 0, 0, "mean|loo"},
        {"--multi-objective", NULL, FLAG_CHOICE, &multi, "sum-then-normalize|normalize-then-sum",
         "normalise `reward` (the weighted sum), or each entry of `rewards` in its group, then sum (GDPO)", 0, 0,
         "sum-then-normalize|normalize-then-sum"},
        {"--weights", NULL, FLAG_STRING, &o.weights, "NAME[:W],...",
         "normalize-then-sum's weight of each entry of `rewards` (grpo-reward's --fn list; W 1 if left out; "
         "none: every weight 1)",
         0, 0, NULL},
        {"--drop-flat", NULL, FLAG_BOOL, &o.drop_flat, NULL,
         "leave out groups whose rewards are all equal (DAPO dynamic sampling)", 0, 0, NULL},
        {"--allow-partial", NULL, FLAG_BOOL, &o.allow_partial, NULL,
         "accept 1-record groups (advantage 0) and split groups (each run a group)", 0, 0, NULL},
        {"--stats", NULL, FLAG_STRING, &stats, "F", "write batch statistics (one JSON object) to F", 0, 0, NULL},
        {"--shard", NULL, FLAG_SHARD, &o.shard, "i/n", "write only the groups whose id hashes into shard i of n",
         0, 0, NULL},
        {"--progress", NULL, FLAG_BOOL, &o.progress, NULL, "show progress on stderr even when not a terminal", 0,
         0, NULL},
    };
    flag_parser p = {
        .usage = "grpo-advantage [--in F] [--out F] [--scale group|batch|none] [--baseline mean|loo] "
                 "[--multi-objective sum-then-normalize|normalize-then-sum [--weights NAME[:W],...]] [--drop-flat] "
                 "[--stats F] [--shard i/n]",
        .summary =
            "Appends `advantage` to every scored record: A = (reward - baseline) / (std + 1e-4), over the\n"
            "group of consecutive records sharing `id`, std unbiased (n-1) as in TRL. Every other field is\n"
            "copied unchanged and in order. A record whose reward is null or missing gets advantage null and\n"
            "takes no part in its group's statistics. A group whose rewards are all equal gets exactly 0.",
        .flags = flags,
        .n_flags = (int)(sizeof flags / sizeof flags[0]),
        .epilog = "Groups must be contiguous and hold at least 2 records; otherwise exit 65 naming the file,\n"
                  "line and id (--allow-partial accepts both). --scale batch spills the shard's records to an\n"
                  "unlinked file in $TMPDIR and divides by the std of every non-null reward of the whole\n"
                  "input, so shards agree with an unsharded run. --stats fields: see formats/advantaged.md.\n"
                  "\n"
                  "--multi-objective normalize-then-sum (GDPO): each entry k of `rewards` is normalised within\n"
                  "the group on its own, (r_k - baseline_k) / (std_k + 1e-4) (--scale none: not divided); a\n"
                  "record's sum S = sum of weight_k times those over its non-null entries; with --scale group\n"
                  "the advantage is (S - mean S) / (std S + 1e-4) over the whole input (two passes, as --scale\n"
                  "batch). A group whose every reward is flat is flat: exactly 0. --scale batch is refused.\n"
                  "\n"
                  "example: grpo-advantage --in scored.jsonl.zst --out batch.jsonl --drop-flat --stats stats.json",
    };
    flags_parse(&p, argc, argv);

    gerr e = {0};
    if (adv_parse_scale(scale, &o.scale, &e) || adv_parse_baseline(baseline, &o.baseline, &e) ||
        adv_parse_multi(multi, &o.multi, &e))
        die_err(&e);
    const outpath_use uses[] = {{"--in", in, OUTPATH_READ}, {"--out", out, OUTPATH_REPLACE}, {"--stats", stats, OUTPATH_REPLACE}};
    if (outpath_distinct(uses, 3, &e) || outpath_check(out, OUTPATH_FILE, &e) || outpath_check(stats, OUTPATH_FILE, &e))
        die_err(&e);
    o.in = in;
    o.out = out;
    o.stats = stats;
    if (adv_run(&o, &e)) die_err(&e);
    return 0;
}
