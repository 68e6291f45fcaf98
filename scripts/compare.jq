# Compares two runs' metrics.jsonl side by side: per step (reward, KL, eval
# accuracy), then their summaries (scripts/lib/metrics.jq) with B - A.
#   jq -n -r -L scripts/lib --slurpfile a A.jsonl --slurpfile b B.jsonl -f scripts/compare.jq
# --arg name_a / name_b label the runs; --argjson every N keeps the per-step rows
# of steps divisible by N (and each run's last step).
include "fmt";
include "metrics";

def cell: fixed(4) | lpad(11);
def at($lines; $step; $name): [$lines[] | select(.step == $step) | .[$name]] | first // null;
def diff($x; $y): if ($x | type) == "number" and ($y | type) == "number" then $y - $x else null end;

($ARGS.named.every // 1) as $every
| ($a | update_lines) as $ua | ($a | eval_lines) as $ea
| ($b | update_lines) as $ub | ($b | eval_lines) as $eb
| ($a | summary) as $sa | ($b | summary) as $sb
| ([$ua, $ea, $ub, $eb | .[].step] | unique) as $steps
| ([$sa.last_step, $sa.last_eval_step, $sb.last_step, $sb.last_eval_step]) as $lasts
| def row($text; $x; $y; $d):
    ($text | rpad(26)) + ([$x, $y, diff($x; $y)] | map(fixed($d) | lpad(11)) | join(""));
  def mrow($text; $name; $field; $d):
    row($text; $sa.metrics[$name][$field]; $sb.metrics[$name][$field]; $d);
  ["A  " + ($ARGS.named.name_a // "A"), "B  " + ($ARGS.named.name_b // "B"), "",
   ("step" | lpad(6)) + (["reward A", "reward B", "kl A", "kl B", "eval acc A", "eval acc B"] | map(lpad(11)) | join(""))]
  + [$steps[] | select(. % $every == 0 or (. as $s | $lasts | index($s)))
     | ("\(.)" | lpad(6))
       + ([at($ua; .; "reward"), at($ub; .; "reward"), at($ua; .; "kl"), at($ub; .; "kl"),
           at($ea; .; "eval/accuracy"), at($eb; .; "eval/accuracy")] | map(cell) | join(""))]
  + ["",
     ("" | rpad(26)) + (["A", "B", "B-A"] | map(lpad(11)) | join("")),
     row("updates"; $sa.updates; $sb.updates; 0),
     row("last step"; $sa.last_step; $sb.last_step; 0),
     mrow("reward first"; "reward"; "first"; 4),
     mrow("reward last"; "reward"; "last"; 4),
     mrow("reward best"; "reward"; "best"; 4),
     mrow("eval/accuracy first"; "eval/accuracy"; "first"; 4),
     mrow("eval/accuracy last"; "eval/accuracy"; "last"; 4),
     mrow("eval/accuracy best"; "eval/accuracy"; "best"; 4),
     mrow("kl mean"; "kl"; "mean"; 4),
     mrow("completion length last"; "completions/mean_length"; "last"; 2),
     row("tokens/s"; $sa.tokens_per_second; $sb.tokens_per_second; 1),
     row("seconds"; $sa.seconds.total; $sb.seconds.total; 3)]
  | .[]
