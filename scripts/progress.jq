# One progress line of a grpo.mk run, for stderr.
#   a step:  jq -n -r -f progress.jq --argjson step N+1 --argjson total STEPS --slurpfile m steps/N/metrics.jsonl
#                 --slurpfile s steps/N/stats.json --argjson seconds SECONDS
#            step 3/10  reward 0.412  acc 0.375  kl 0.0123  len 24.1  tok/s 512  12.3 s
#   an eval: jq -r -f progress.jq --argjson total STEPS eval/N.json
#            eval 3/10  accuracy 0.41  pass@1 0.41  reward 0.52  len 31.2
# m: the step's metrics lines (the last counts: --iterations writes several), s:
# grpo-advantage's --stats (reward mean, rewards/answer/mean = accuracy), seconds:
# the step's stages added up. A field that is missing or null is left out.
def num(d): if type == "number" then (. * pow(10; d) | round) / pow(10; d) | tostring else null end;
def field(name; v): if v == null then empty else "\(name) \(v)" end;
$ARGS.named as $a
| if (.kind? // null) == "eval" then
  [ "eval \(.step)/\($a.total)",
    field("accuracy"; .["eval/accuracy"] | num(3)),
    field("pass@1"; .["eval/pass@1"] | num(3)),
    (if (.["eval/k"] // 1) > 1 then field("pass@\(.["eval/k"])"; .["eval/pass@k"] | num(3)) else empty end),
    field("reward"; .["eval/reward"] | num(3)),
    field("len"; .["eval/completion_length"] | num(1)) ]
  | join("  ")
else
  ($a.m | last) as $l | ($a.s | first) as $st
  | [ "step \($a.step // $l.step)/\($a.total)",
      field("reward"; ($st.reward_mean // $l.reward) | num(3)),
      field("acc"; $st["rewards/answer/mean"] | num(3)),
      field("kl"; $l.kl | num(4)),
      field("len"; $l["completions/mean_length"] | num(1)),
      field("tok/s"; $l.tokens_per_second | num(0)),
      (if $a.seconds == null then empty else "\($a.seconds | num(1)) s" end) ]
  | join("  ")
end
