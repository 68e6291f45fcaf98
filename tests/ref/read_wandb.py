#!/usr/bin/env python3
"""Reads back what scripts/grpo-wandb logged, from the W&B run's own
transaction logs (WANDB_DIR/wandb/*run-*-ID[-N]/run-ID.wandb), for
tests/bats/wandb.bats. Records are decoded with wandb's protobuf classes
(scripts/lib/wandb_txlog.py reads the framing, checksums included).

  read_wandb.py rows DIR ID           every history row, one JSON object a line
                                      (wandb's _runtime and _timestamp left out)
  read_wandb.py check DIR ID FILE...  exit 1 unless the run holds every numeric
                                      field of every line of FILE (nested objects
                                      joined with '/'), at the line's step, each
                                      (step, update|eval) line exactly once, and
                                      wandb's row index _step never repeats
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), '..', '..', 'scripts', 'lib'))
import wandb_txlog  # noqa: E402


def rows(d, rid):
    out = []
    for log in wandb_txlog.run_logs(d, rid):
        for row in wandb_txlog.history(log):
            out.append({k: v for k, v in row.items() if k not in ('_runtime', '_timestamp')})
    return out


def flat(obj, prefix=''):
    out = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + '/'))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = v
    return out


def check(d, rid, files):
    want = {}
    for path in files:
        with open(path, encoding='utf-8') as f:
            for line in f:
                if line.strip():
                    obj = flat(json.loads(line))
                    kind = 'eval' if any(k.startswith('eval/') for k in obj) else 'update'
                    want[(obj['step'], kind)] = obj  # the last line of a step wins
    got, problems = {}, []
    indexes = []
    for row in rows(d, rid):
        indexes.append(row.get('_step'))
        if 'samples/_type' in row:
            continue
        kind = 'eval' if any(k.startswith('eval/') for k in row) else 'update'
        key = (row.get('step'), kind)
        if key in got:
            problems.append(f'step {key[0]} {kind}: logged twice')
        got[key] = row
    if len(set(indexes)) != len(indexes):
        problems.append(f'_step repeats: {indexes}')
    for key, obj in sorted(want.items()):
        row = got.get(key)
        if row is None:
            problems.append(f'step {key[0]} {key[1]}: missing')
            continue
        for name, v in obj.items():
            if row.get(name) != v:
                problems.append(f'step {key[0]} {name}: want {v!r}, got {row.get(name)!r}')
    for key in got:
        if key not in want:
            problems.append(f'step {key[0]} {key[1]}: logged but in no file')
    for p in problems[:20]:
        print(p, file=sys.stderr)
    return 1 if problems else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == 'rows':
        for row in rows(sys.argv[2], sys.argv[3]):
            print(json.dumps(row, sort_keys=True))
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == 'check':
        return check(sys.argv[2], sys.argv[3], sys.argv[4:])
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == '__main__':
    sys.exit(main())
