#!/usr/bin/env python3
"""Independent reference for grpo-advantage (formats/advantaged.md), in plain
Python floats and numpy float64.

  advantage_ref.py gen --seed S --groups N          random scored records on stdout
  advantage_ref.py expect --in F [FLAGS] [--stats S] expected advantages, one
        {"line": N, "id": ID, "advantage": A} per output record, on stdout;
        with --stats, the expected statistics object written to S
  advantage_ref.py check --in F --got G [--got-stats S] [FLAGS]
        compares grpo-advantage's output G (and stats S) with the expectation:
        same records in the same order, every input field byte for byte, and
        advantages and statistics within TOL; exit 1 on any difference.

FLAGS: --scale group|batch|none --baseline mean|loo --drop-flat
       --multi-objective sum-then-normalize|normalize-then-sum --weights NAME[:W],...

normalize-then-sum (GDPO) is computed as its paper writes it: each reward
normalised within its group, then the weighted sum, then (--scale group) that
sum normalised by the mean and std of every sum of the input.

The reference computes the leave-one-out baseline literally (the mean of the
other members) and every std with numpy (ddof=1), where the C code uses
m/(m-1)*(r-mean) and its own sums, so agreement is not by construction.
"""
import argparse
import json
import math
import random
import re
import sys

import numpy as np

# Relative tolerance, absolute below 1: the two sides differ only by
# summation order and algebraic form, a few ulps of float64.
TOL = 1e-12
EPS = 1e-4  # added to the std before dividing, as TRL


def close(got, want):
    return abs(got - want) <= TOL * max(1.0, abs(want))


# ---- generating scored records -----------------------------------------------

ODD_RAW = [
    '1e400', '123456789012345678901234567890', '-0.0', '1E-7', '0.10000000000000000001',
    '{ "a" :[ 1 ,2.50,{"b" : null}] ,"c":"x\\u00e9\\n" }', '[ ]', '{}', '"tab\\there \\"quoted\\""',
    'true', 'null',
]


def gen(seed, n_groups, multi=False):
    """multi: also groups whose every `rewards` entry is flat, or flat in one
    function and not in another (what GDPO tells apart from a flat sum)."""
    rng = random.Random(seed)
    out = sys.stdout
    for g in range(n_groups):
        k = rng.randint(2, 8)
        gid = f"p{g:05d}"
        if g % 11 == 3:
            gid += "-\u00e9\"\\x"  # escapes and non-ASCII in ids
        kind = rng.random()
        flat_value = rng.choice([0.0, 1.0, 0.1, 1 / 3, rng.uniform(-1, 1)])
        for s in range(k):
            fields = []
            fields.append(('id', json.dumps(gid, ensure_ascii=(g % 2 == 0))))
            fields.append(('sample', str(s)))
            if rng.random() < 0.3:
                fields.append(('completion', json.dumps(f"answer {rng.random()} \u4e2d\n\t", ensure_ascii=False)))
            if kind < 0.15:  # flat: every non-null reward equal
                reward = flat_value
            elif kind < 0.35:  # binary correctness rewards, often flat by chance
                reward = float(rng.random() < 0.5)
            else:  # continuous, many digits
                reward = rng.uniform(-2, 3)
            roll = rng.random()
            if kind > 0.95 or roll < 0.08:
                fields.append(('reward', 'null'))
                reward = None
            elif roll < 0.11:
                reward = None  # missing
            else:
                fields.append(('reward', repr(reward)))
            if multi and kind < 0.25:  # every entry flat within the group
                fields.append(('rewards', json.dumps({'acc': 1.0, 'format': flat_value, 'len\u00e9': None},
                                                     separators=(',', ':'))))
            elif multi and kind < 0.4:  # acc flat, format binary: a flat sum hides nothing here
                fields.append(('rewards', json.dumps({'acc': 0.0, 'format': float(rng.random() < 0.5)},
                                                     separators=(',', ':'))))
            elif rng.random() < 0.9:
                acc = rng.choice([None, 0.0, 1.0, 1.0])
                fmt = rng.uniform(0, 1)
                rew = {'acc': acc, 'format': fmt}
                if rng.random() < 0.5:
                    rew['len\u00e9'] = rng.choice([None, rng.uniform(-1, 0)])
                fields.append(('rewards', json.dumps(rew, separators=(',', ':'))))
            if rng.random() < 0.25:
                fields.append(('extra', rng.choice(ODD_RAW)))
            tail = fields[2:]
            rng.shuffle(tail)  # field order is the user's; it must survive
            fields = fields[:2] + tail
            out.write('{' + ','.join(f'{json.dumps(key)}:{val}' for key, val in fields) + '}\n')


# ---- the reference computation -------------------------------------------------

def read_scored(path):
    recs = []
    with open(path, encoding='utf-8') as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip('\n')
            if not line.strip():
                continue
            obj = json.loads(line)
            r = obj.get('reward')
            recs.append({'line': line_no, 'text': line, 'id': obj['id'], 'reward': r,
                         'rewards': obj.get('rewards')})
    return recs


def groups_of(recs):
    groups, cur = [], []
    for r in recs:
        if cur and r['id'] != cur[0]['id']:
            groups.append(cur)
            cur = []
        cur.append(r)
    if cur:
        groups.append(cur)
    return groups


def std1(values):
    return float(np.std(np.array(values, dtype=np.float64), ddof=1))


def multi_sums(grp, scale, baseline, weights):
    """GDPO's per-group part: ({index: weighted sum of normalised rewards}, flat)."""
    names = []
    for r in grp:
        for name in (r['rewards'] or {}):
            if name not in names:
                names.append(name)
    sums, flat = {}, True
    for i, r in enumerate(grp):
        if any(v is not None for v in (r['rewards'] or {}).values()):
            sums[i] = 0.0
    for name in names:
        vals = {i: float(r['rewards'][name]) for i, r in enumerate(grp)
                if r['rewards'] and r['rewards'].get(name) is not None}
        v = list(vals.values())
        if len(v) < 2 or all(x == v[0] for x in v):
            continue  # a flat reward adds 0
        flat = False
        mean, std = float(np.mean(v)), std1(v)
        for i, x in vals.items():
            if baseline == 'mean':
                d = x - mean
            else:
                others = [y for j, y in vals.items() if j != i]
                d = x - sum(others) / len(others)
            a = d / (std + EPS) if scale == 'group' else d
            sums[i] += weights.get(name, 1.0) * a
    return sums, flat


def expect(recs, scale, baseline, drop_flat, multi='sum-then-normalize', weights=None):
    """Returns (expected output records, expected stats)."""
    groups = groups_of(recs)
    if multi == 'normalize-then-sum':
        return expect_multi(recs, groups, scale, baseline, drop_flat, weights or {})
    all_valid = [r['reward'] for r in recs if r['reward'] is not None]
    batch_std = std1(all_valid) if len(all_valid) >= 2 else 0.0
    out = []
    n_flat = n_dropped = 0
    group_stds = []
    for grp in groups:
        assert len(grp) >= 2, f"reference needs groups of 2+ (line {grp[0]['line']})"
        valid = [r['reward'] for r in grp if r['reward'] is not None]
        flat = len(valid) < 2 or all(v == valid[0] for v in valid)
        std = 0.0 if flat else std1(valid)
        group_stds.append(std)
        n_flat += flat
        if flat and drop_flat:
            n_dropped += 1
            continue
        mean = float(np.mean(valid)) if valid else 0.0
        for i, r in enumerate(grp):
            if r['reward'] is None:
                a = None
            elif flat:
                a = 0.0
            else:
                if baseline == 'mean':
                    d = r['reward'] - mean
                else:
                    others = [q['reward'] for j, q in enumerate(grp) if j != i and q['reward'] is not None]
                    d = r['reward'] - sum(others) / len(others)
                if scale == 'group':
                    a = d / (std + EPS)
                elif scale == 'batch':
                    a = d / (batch_std + EPS)
                else:
                    a = d
            out.append({'line': r['line'], 'id': r['id'], 'advantage': a, 'flat': flat, 'text': r['text']})
    return out, batch_stats(recs, groups, out, n_flat, n_dropped, group_stds)


def expect_multi(recs, groups, scale, baseline, drop_flat, weights):
    per_group = [multi_sums(grp, scale, baseline, weights) for grp in groups]
    every_sum = [x for sums, _ in per_group for x in sums.values()]
    s_mean = float(np.mean(every_sum)) if every_sum else 0.0
    s_std = std1(every_sum) if len(every_sum) >= 2 else 0.0
    out, group_stds = [], []
    n_flat = n_dropped = 0
    for grp, (sums, flat) in zip(groups, per_group):
        valid = [r['reward'] for r in grp if r['reward'] is not None]
        reward_flat = len(valid) < 2 or all(v == valid[0] for v in valid)
        group_stds.append(0.0 if reward_flat else std1(valid))  # reward_std stays that of `reward`
        n_flat += flat
        if flat and drop_flat:
            n_dropped += 1
            continue
        for i, r in enumerate(grp):
            if i not in sums:
                a = None
            elif flat:
                a = 0.0
            elif scale == 'group':
                a = (sums[i] - s_mean) / (s_std + EPS)
            else:
                a = sums[i]
            out.append({'line': r['line'], 'id': r['id'], 'advantage': a, 'flat': flat, 'text': r['text']})
    return out, batch_stats(recs, groups, out, n_flat, n_dropped, group_stds)


def batch_stats(recs, groups, out, n_flat, n_dropped, group_stds):
    all_valid = [r['reward'] for r in recs if r['reward'] is not None]
    per_fn = {}
    for r in recs:
        for name, v in (r['rewards'] or {}).items():
            if v is not None:
                per_fn.setdefault(name, []).append(float(v))
    stats = {
        'records': len(recs), 'groups': len(groups), 'groups_flat': n_flat, 'groups_dropped': n_dropped,
        'null_rewards': len(recs) - len(all_valid), 'records_written': len(out),
        'reward_mean': float(np.mean(all_valid)) if all_valid else None,
        'reward_std': float(np.mean(group_stds)) if groups else None,
        'reward_std_batch': std1(all_valid) if len(all_valid) >= 2 else None,
        'frac_reward_zero_std': n_flat / len(groups) if groups else None,
    }
    for name in sorted(per_fn, key=lambda s: s.encode('utf-8')):
        vals = per_fn[name]
        stats[f'rewards/{name}/mean'] = float(np.mean(vals))
        stats[f'rewards/{name}/std'] = std1(vals) if len(vals) >= 2 else None
    return stats


# ---- comparing -------------------------------------------------------------------

ADV_TAIL = re.compile(r'^(.*),"advantage":(null|-?[0-9][0-9.eE+-]*)\}$')


def compare_stats(want, got, problems):
    if list(want) != list(got):
        problems.append(f"stats keys: want {list(want)}, got {list(got)}")
    for key, w in want.items():
        g = got.get(key, 'missing')
        if w is None or isinstance(w, int) and not isinstance(w, bool):
            ok = g == w and (w is None or type(g) is int)
        else:
            ok = isinstance(g, (int, float)) and close(g, w)
        if not ok:
            problems.append(f"stats {key}: want {w!r}, got {g!r}")


def check(recs, want, want_stats, got_path, got_stats_path):
    problems = []
    with open(got_path, encoding='utf-8') as f:
        got = f.read().split('\n')
    if got and got[-1] == '':
        got.pop()
    if len(got) != len(want):
        problems.append(f"want {len(want)} records, got {len(got)}")
    for w, line in zip(want, got):
        m = ADV_TAIL.match(line)
        if not m:
            problems.append(f"input line {w['line']}: no trailing advantage in {line[:120]!r}")
            continue
        # every input field, byte for byte, in order (inputs are compact)
        if m.group(1) + '}' != w['text']:
            problems.append(f"input line {w['line']}: fields changed: {line[:120]!r}")
        text = m.group(2)
        if w['advantage'] is None:
            ok = text == 'null'
        elif w['flat']:
            ok = text == '0'  # exactly 0, not merely small
        else:
            ok = text != 'null' and close(float(text), w['advantage'])
        if not ok:
            problems.append(f"input line {w['line']} (id {w['id']!r}): want {w['advantage']!r}, got {text}")
    if got_stats_path:
        with open(got_stats_path, encoding='utf-8') as f:
            compare_stats(want_stats, json.load(f), problems)
    for p in problems[:20]:
        print(p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} differences", file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='cmd', required=True)
    g = sub.add_parser('gen')
    g.add_argument('--seed', type=int, default=1)
    g.add_argument('--groups', type=int, default=100)
    g.add_argument('--multi', action='store_true', help='add groups flat in every reward or in one')
    for name in ('expect', 'check'):
        p = sub.add_parser(name)
        p.add_argument('--in', dest='inp', required=True)
        p.add_argument('--scale', choices=['group', 'batch', 'none'], default='group')
        p.add_argument('--baseline', choices=['mean', 'loo'], default='mean')
        p.add_argument('--drop-flat', action='store_true')
        p.add_argument('--multi-objective', choices=['sum-then-normalize', 'normalize-then-sum'],
                       default='sum-then-normalize')
        p.add_argument('--weights', default='')
        if name == 'expect':
            p.add_argument('--stats')
        else:
            p.add_argument('--got', required=True)
            p.add_argument('--got-stats')
    a = ap.parse_args()
    if a.cmd == 'gen':
        gen(a.seed, a.groups, a.multi)
        return 0
    recs = read_scored(a.inp)
    weights = {}
    for item in filter(None, a.weights.split(',')):
        name, _, w = item.rpartition(':') if ':' in item else (item, '', '1')
        weights[name] = float(w)
    want, want_stats = expect(recs, a.scale, a.baseline, a.drop_flat, a.multi_objective, weights)
    if a.cmd == 'expect':
        for w in want:
            print(json.dumps({'line': w['line'], 'id': w['id'], 'advantage': w['advantage']}, ensure_ascii=False))
        if a.stats:
            with open(a.stats, 'w', encoding='utf-8') as f:
                json.dump(want_stats, f, ensure_ascii=False)
                f.write('\n')
        return 0
    return check(recs, want, want_stats, a.got, a.got_stats)


if __name__ == '__main__':
    sys.exit(main())
