# Summarises a run's metrics.jsonl (update lines and eval lines, formats/metrics.md):
#   jq -n -r -L scripts/lib -f scripts/summarize.jq metrics.jsonl
# --arg file NAME names the run in the first line; --argjson json true prints
# the summary as one JSON object instead of the table (scripts/README.md).
include "fmt";
include "metrics";

[inputs] | summary as $s
| if $ARGS.named.json == true then $s | tojson
  else
    ($s.metrics | to_entries) as $rows
    | ([$rows[].key | length, 6] | max + 2) as $w
    | (if $ARGS.named.file then [("run" | rpad(10)) + $ARGS.named.file] else [] end)
    + [("steps" | rpad(10)) + "\($s.updates) updates (steps \(steps_text($s.first_step; $s.last_step))), "
        + "\($s.evals) evals (steps \(steps_text($s.first_eval_step; $s.last_eval_step)))",
       ("seconds" | rpad(10)) + "\($s.seconds.total | fixed(3)) (updates \($s.seconds.updates | fixed(3)), "
        + "evals \($s.seconds.evals | fixed(3)))",
       ("tokens/s" | rpad(10)) + "\($s.tokens_per_second | fixed(1)) (\($s.tokens) tokens)",
       "",
       ("metric" | rpad($w)) + (["first", "last", "best", "step", "mean"] | map(lpad(10)) | join(""))]
    + [$rows[] | (.key | rpad($w)) + (.value | metric_cells | map(lpad(10)) | join(""))]
    | .[]
  end
