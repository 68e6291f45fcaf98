# Reading metrics.jsonl (formats/metrics.md): update lines (no "kind") and
# eval lines ("kind": "eval"). A step written twice (a rerun that appended
# again) counts once, as its last line.
include "fmt";

def dedup_steps: group_by(.step) | map(last);
def update_lines: map(select(type == "object" and has("step") and (has("kind") | not))) | dedup_steps;
def eval_lines: map(select(type == "object" and .kind == "eval" and has("step"))) | dedup_steps;

# The metrics whose "best" is the highest value (the others have no best).
def higher_is_better($name):
  $name == "reward" or ($name | test("^rewards/.*/mean$")) or ($name | startswith("eval/pass@"))
  or $name == "eval/accuracy" or $name == "eval/reward";

# stats($name): over lines (sorted by step), the numeric values of $name.
def stats($name):
  [.[] | select(.[$name] | type == "number") | {step, v: .[$name]}] as $s
  | if ($s | length) == 0 then null
    else {first: $s[0].v, first_step: $s[0].step, last: $s[-1].v, last_step: $s[-1].step,
          mean: (($s | map(.v) | add) / ($s | length)), count: ($s | length)}
      + if higher_is_better($name) then
          ($s | reduce .[] as $x (null; if . == null or $x.v > .v then $x else . end))
          | {best: .v, best_step: .step}
        else {} end
    end;

def sum_of($name): map(.[$name] | numbers) | add // 0;

# summary: the object grpo-summary --json prints, of an array of metrics lines.
def summary:
  update_lines as $u | eval_lines as $e
  | (["reward"] + ([$u[] | keys_unsorted[] | select(test("^rewards/.*/mean$"))] | unique)
     + ["kl", "entropy", "completions/mean_length"]) as $un
  | (["eval/accuracy"] + ([$e[] | keys_unsorted[] | select(startswith("eval/pass@"))]
                          | unique | sort_by(.[10:] | tonumber))
     + ["eval/reward", "eval/completion_length"]) as $en
  | ($u | sum_of("seconds")) as $us | ($e | sum_of("eval/seconds")) as $es
  | ($u | sum_of("tokens")) as $tok
  | {updates: ($u | length), first_step: $u[0].step, last_step: $u[-1].step,
     evals: ($e | length), first_eval_step: $e[0].step, last_eval_step: $e[-1].step,
     metrics: ((reduce $un[] as $n ({}; . + {($n): ($u | stats($n))}))
               + (reduce $en[] as $n ({}; . + {($n): ($e | stats($n))}))
               | with_entries(select(.value != null))),
     tokens: $tok,
     tokens_per_second: (if $us > 0 then $tok / $us else null end),
     seconds: {updates: $us, evals: $es, total: ($us + $es)}};

# A range of steps as text: "1-6", "3", or "-".
def steps_text($a; $b): if $a == null then "-" elif $a == $b then "\($a)" else "\($a)-\($b)" end;

# The cells of one metric's row: first, last, best, best step, mean.
def metric_cells: [(.first | fixed(4)), (.last | fixed(4)), (.best | fixed(4)),
                   (if .best_step == null then "-" else "\(.best_step)" end), (.mean | fixed(4))];
