# The eval line of scored records (formats/metrics.md, Eval lines), read as a
# stream: eval_line(records; step; k; passat; temperature; seconds; correct),
# passat the list of j for which eval/pass@j is written (each 1..k). A sample
# is correct when rewards[correct] == 1 (correct: a reward function's name,
# "answer" when left out); samples where it is null (no reference, no
# environment reward) count in the length and reward means but not in
# accuracy or pass@k. Per prompt (records sharing id): n scored samples, c correct;
# pass@j is the unbiased estimator, averaged over the prompts with n >= j.
# A multi-turn record's length is the model's tokens (completion_mask 1s),
# as grpo-update's completions/mean_length counts them.
include "passk";

def mean_or_null($sum; $n): if $n > 0 then $sum / $n else null end;

def eval_line(records; $step; $k; $passat; $temperature; $seconds; $correct):
  reduce records as $r (
    {samples: 0, length: 0, clipped: 0, acc: 0, acc_n: 0, reward: 0, reward_n: 0, prompts: {}};
    ($r.rewards[$correct] // null) as $a
    | .samples += 1
    | .length += ($r.completion_mask | if type == "array" then map(select(. == 1)) | length
                                       else $r.completion_tokens | length end)
    | .clipped += (if $r.finish_reason == "length" then 1 else 0 end)
    | if ($r.reward | type) == "number" then .reward += $r.reward | .reward_n += 1 else . end
    | .prompts[$r.id] |= (. // {n: 0, c: 0})
    | if ($a | type) == "number" then
        .acc += $a | .acc_n += 1
        | .prompts[$r.id].n += 1
        | .prompts[$r.id].c += (if $a == 1 then 1 else 0 end)
      else . end
  )
  | [.prompts[] | select(.n > 0)] as $scored
  | def pass($j): ([$scored[] | select(.n >= $j) | pass_at_k(.n; .c; $j)]) as $p
                  | mean_or_null($p | add; $p | length);
    {kind: "eval", step: $step, "eval/accuracy": mean_or_null(.acc; .acc_n)}
  + reduce $passat[] as $j ({}; . + {"eval/pass@\($j)": pass($j)})
  + {"eval/reward": mean_or_null(.reward; .reward_n),
     "eval/completion_length": mean_or_null(.length; .samples),
     "eval/clipped_ratio": mean_or_null(.clipped; .samples),
     "eval/prompts": (.prompts | length),
     "eval/k": $k, "eval/temperature": $temperature, "eval/seconds": $seconds};

def eval_line(records; $step; $k; $passat; $temperature; $seconds):
  eval_line(records; $step; $k; $passat; $temperature; $seconds; "answer");
