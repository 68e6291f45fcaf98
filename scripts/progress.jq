# One progress line of a grpo.mk run, for stderr (jq -L scripts/lib).
#   a step:  jq -n -r -L scripts/lib -f scripts/progress.jq --argjson step N+1 --argjson total STEPS
#                 --slurpfile m steps/N/metrics.jsonl --slurpfile s steps/N/stats.json --argjson seconds S
#            step  3/10  reward 0.412  acc 0.375  kl 0.0123  len 24.1  tok/s 512  12.3 s
#   an eval: jq -r -L scripts/lib -f scripts/progress.jq --argjson total STEPS eval/N.json
#            eval  3/10  accuracy 0.410  pass@1 0.410  reward 0.520  len 31.2
# m: the step's metrics lines (the last counts: --iterations writes several); s:
# grpo-advantage's --stats (reward_mean; rewards/answer/mean is the accuracy);
# seconds: the step's stages added up; step: the step shown (default: the
# metrics line's). A value that is missing or null is left out, with its name.
include "fmt";
def field($name; $d): if type == "number" then "\($name) \(fixed($d))" else empty end;
$ARGS.named as $a
| ($a.total | tostring | length) as $w
| if (.kind? // null) == "eval" then
    [ "eval \(.step | lpad($w))/\($a.total)",
      (.["eval/accuracy"] | field("accuracy"; 3)),
      (.["eval/pass@1"] | field("pass@1"; 3)),
      ((.["eval/k"] // 1) as $k | if $k > 1 then .["eval/pass@\($k)"] | field("pass@\($k)"; 3) else empty end),
      (.["eval/reward"] | field("reward"; 3)),
      (.["eval/completion_length"] | field("len"; 1)) ]
    | join("  ")
  else
    ($a.m | last) as $l | ($a.s | first) as $st
    | [ "step \(($a.step // $l.step) | lpad($w))/\($a.total)",
        (($st.reward_mean // $l.reward) | field("reward"; 3)),
        ($st["rewards/answer/mean"] | field("acc"; 3)),
        ($l.kl | field("kl"; 4)),
        ($l["completions/mean_length"] | field("len"; 1)),
        ($l.tokens_per_second | field("tok/s"; 0)),
        (if $a.seconds | type == "number" then "\($a.seconds | fixed(1)) s" else empty end) ]
    | join("  ")
  end
