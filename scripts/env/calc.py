#!/usr/bin/env python3
"""A calculator tool environment for grpo-rollout --env (formats/env.md).

The model may call the tool `calc` (schema: calc.tools.json, given to
grpo-rollout with --tools) any number of times; each call's expression is
evaluated (+ - * / // % ** and parentheses on numbers, nothing else) and
returned as a tool message. A turn without a tool call is the final answer:
the episode ends with reward 1 when its last number equals the record's
"answer", else 0. On the last turn grpo-rollout allows, the episode ends
with reward 0 unless that turn is a correct final answer.

Usage: grpo-rollout --env 'python3 -u scripts/env/calc.py' --tools scripts/env/calc.tools.json ...
"""
import ast
import json
import operator
import re
import sys

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
       ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
       ast.USub: operator.neg, ast.UAdd: operator.pos}


def evaluate(expr):
    """The value of an arithmetic expression, or an error message."""
    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError("exponent too large")
            return OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPS:
            return OPS[type(node.op)](walk(node.operand))
        raise ValueError("only numbers and + - * / // % ** are allowed")
    try:
        value = walk(ast.parse(str(expr), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as e:
        return f"error: {e}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def last_number(text):
    found = re.findall(r"-?\d+(?:\.\d+)?", text.replace(",", ""))
    return found[-1] if found else None


def same_number(a, b):
    try:
        return a is not None and float(a) == float(b)
    except (TypeError, ValueError):
        return False


def answer(q):
    a = {"id": q["id"], "sample": q["sample"], "turn": q["turn"]}
    calls = [c for c in q.get("tool_calls", []) if c.get("name") == "calc"]
    if calls and not q.get("last"):
        a["messages"] = [{"role": "tool", "content": evaluate(c.get("arguments", {}).get("expr", ""))}
                         for c in calls]
        return a
    final = q["messages"][-1]["content"]
    a["done"] = True
    a["reward"] = 1.0 if not calls and same_number(last_number(final), q.get("answer")) else 0.0
    return a


def main():
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
