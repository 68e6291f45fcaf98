# A readable log of scored records (formats/scored.md) for people following a
# run: a header for the file, then the first $n prompts (records sharing id),
# each with its user message, reference answer, the group's rewards and its
# first completion (every completion with $group). A multi-turn record
# (with `turns`) shows its conversation turn by turn, each message under its
# role, and its length as all tokens and the model's (completion_mask 1s).
#   jq -n -r -L scripts/lib --arg file F --argjson n 3 --argjson group false -f scripts/samples.jq F
include "fmt";

# Control characters (the model may write any) shown as "?", new lines and tabs kept.
def printable: tostring | gsub("[\\x00-\\x08\\x0b-\\x1f\\x7f]"; "?");
def indent: split("\n") | map("    " + .) | join("\n");
def num: if type == "number" then (. * 10000 | round / 10000 | tostring) else "null" end;
def mean_of(f): [.[] | f | numbers] | if length > 0 then add / length else null end;
# One message of a multi-turn conversation: its role, then its text (and
# its tool calls, when it made any) on the lines below.
def turn:
  "\(.role // "?"):",
  ((.content // "" | if type == "string" then . else tojson end | printable | select(length > 0) | indent),
   (.tool_calls | select(type == "array" and length > 0) | "tool calls: " + (tojson | printable) | indent));

[inputs | {id, messages, answer, numbers, target, sample, completion, finish_reason, policy, rewards, reward, turns,
           length: (.completion_tokens | length),
           model_length: (.completion_mask | if type == "array" then map(select(. == 1)) | length else null end)}] as $r
| ($ARGS.named.n // 3) as $n | ($ARGS.named.group // false) as $group
| ($r | reduce .[] as $x ({order: [], by: {}};
      if .by[$x.id] == null then .order += [$x.id] else . end | .by[$x.id] += [$x])) as $g
| ([$r[] | .policy | strings] | unique) as $policies
| "== \($ARGS.named.file // "-"): \($r | length) completions of \($g.order | length) prompts"
  + (if ($policies | length) > 0 then ", policy \($policies | join(", "))" else "" end)
  + ", mean reward \($r | mean_of(.reward) | fixed(4))"
  + (if ($r | map(.rewards.answer | numbers) | length) > 0
     then ", accuracy \($r | mean_of(.rewards.answer) | fixed(4))" else "" end),
  ($g.order[:$n][] as $id | $g.by[$id] as $k | $k[0] as $p
   | "",
     "-- \($id) (\($k | length) samples)"
       + (if $p.answer != null then ", answer \($p.answer | printable)"
          elif $p.target != null then ", target \($p.target) from \($p.numbers | tojson)" else "" end),
     "user: " + ([$p.messages[]? | select(.role == "user") | .content] | last // "" | printable),
     "rewards: \([$k[] | .reward | num] | join(" ")) (mean \($k | mean_of(.reward) | fixed(4)))",
     (if $group then $k[] else $k[0] end
      | "sample \(.sample // "-"): \(.length) tokens"
          + (if .model_length != null then " (\(.model_length) the model's)" else "" end)
          + ", \(.finish_reason // "-"), reward \(.reward | num)"
          + (if (.rewards | type) == "object"
             then " (" + (.rewards | to_entries | map("\(.key) \(.value | num)") | join(", ")) + ")" else "" end)
          + (if (.turns | type) == "array" then ", \(.turns | length) turns:" else ":" end),
        (if (.turns | type) == "array" then (.turns[] | [turn] | join("\n") | indent)
         else (.completion // "" | printable | indent) end)))
