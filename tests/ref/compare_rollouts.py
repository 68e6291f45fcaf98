"""compare_rollouts.py A B TOL MIN_SHARED [greedy]: rollout records A (say
--device cuda) against B (--device cpu) of the same inputs, flags and seed.

Every record must have the same fields in the same order, and the same
values for every field but completion_tokens, completion, logprobs,
finish_reason and sampler (which names the device). Along the tokens both completions share from the start, the
log-probabilities must agree within TOL (absolute; bf16 weights against
fp32). A completion may leave the other where two tokens are within
rounding of each other, but at least MIN_SHARED of all tokens must be on
the shared prefixes, so a device that samples something else fails. With
greedy, where two completions part, the two tokens' log-probabilities (each
the largest of its distribution) must also agree within TOL: they parted
where the top two logits were within rounding of each other, the margin
did not allow more.
Prints one line of numbers; exit 1 on a failed check."""
import json
import sys

FREE = {"completion_tokens", "completion", "logprobs", "finish_reason", "sampler"}


def main():
    a_path, b_path, tol, min_shared = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    greedy = len(sys.argv) > 5 and sys.argv[5] == "greedy"
    parted = 0
    with open(a_path) as f:
        a = [json.loads(line) for line in f]
    with open(b_path) as f:
        b = [json.loads(line) for line in f]
    bad = []
    if len(a) != len(b):
        bad.append(f"{len(a)} records against {len(b)}")
    shared = total = 0
    worst = 0.0
    for i, (ra, rb) in enumerate(zip(a, b)):
        if list(ra) != list(rb):
            bad.append(f"record {i}: fields {list(ra)} against {list(rb)}")
            continue
        for k in ra:
            if k not in FREE and ra[k] != rb[k]:
                bad.append(f"record {i}: field {k} differs")
        ta, tb = ra["completion_tokens"], rb["completion_tokens"]
        if len(ra["logprobs"]) != len(ta):
            bad.append(f"record {i}: {len(ra['logprobs'])} log-probs for {len(ta)} tokens")
        n = 0
        while n < min(len(ta), len(tb)) and ta[n] == tb[n]:
            worst = max(worst, abs(ra["logprobs"][n] - rb["logprobs"][n]))
            n += 1
        if greedy and n < min(len(ta), len(tb)):
            parted += 1
            gap = abs(ra["logprobs"][n] - rb["logprobs"][n])
            if gap > tol:
                bad.append(f"record {i}: parted at token {n} with log-probs {ra['logprobs'][n]} and "
                           f"{rb['logprobs'][n]}: not a near-tie")
        shared += n
        total += max(len(ta), len(tb))
    frac = shared / total if total else 1.0
    print(f"records {len(a)}; tokens on shared prefixes {shared}/{total} ({frac:.3f}); "
          f"largest log-prob difference there {worst:.3g} (tol {tol})" +
          (f"; {parted} parted, each at a near-tie" if greedy else ""))
    if worst > tol:
        bad.append(f"log-prob difference {worst} over {tol}")
    if frac < min_shared:
        bad.append(f"only {frac:.3f} of the tokens shared (need {min_shared})")
    for line in bad[:10]:
        print(line)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
