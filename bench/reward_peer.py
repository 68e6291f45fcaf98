"""The peer of grpo-reward's rule rewards: the same three rewards written the
way TRL / open-r1 reward functions are (Python, `re`, json per line): the
final answer from <answer>, \\boxed, #### or the last number compared as a
float; the soft <think>/<answer> layout; DAPO's overlong penalty over
completion_tokens. Reads JSONL on stdin, writes scored JSONL on stdout."""
import json
import re
import sys

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
SOFT = re.compile(r"<think>.*?</think>.*?<answer>.*?</answer>", re.S)


def final_answer(text):
    for pattern in (ANSWER, BOXED):
        found = pattern.findall(text)
        if found:
            return found[-1]
    if "####" in text:
        return text.rsplit("####", 1)[1]
    found = NUMBER.findall(text)
    return found[-1] if found else ""


def as_number(text):
    text = text.strip().replace(",", "").replace("$", "").rstrip(".")
    try:
        return float(text)
    except ValueError:
        return None


def answer_reward(rec):
    if "answer" not in rec:
        return None
    got, want = as_number(final_answer(rec.get("completion") or "")), as_number(str(rec["answer"]))
    if got is None or want is None:
        return 0.0
    return 1.0 if abs(got - want) <= 1e-6 * max(1.0, abs(want)) else 0.0


def format_reward(rec):
    return 1.0 if SOFT.search(rec.get("completion") or "") else 0.0


def length_reward(rec, max_len=160, buffer=32):
    n = len(rec["completion_tokens"])
    if n <= max_len - buffer:
        return 0.0
    if n <= max_len:
        return ((max_len - buffer) - n) / buffer
    return -1.0


def main():
    out = sys.stdout
    for line in sys.stdin:
        rec = json.loads(line)
        rewards = {"answer": answer_reward(rec), "format": format_reward(rec), "length": length_reward(rec)}
        rec["rewards"] = rewards
        rec["reward"] = sum(v for v in rewards.values() if v is not None)
        out.write(json.dumps(rec, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
