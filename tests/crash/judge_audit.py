#!/usr/bin/env python3
"""The crash matrix's judge bookkeeping: which answers a cache holds, and
whether any answer was bought twice.

  judge_audit.py stored CACHE
      One line per entry of the judge cache CACHE: the SHA-256 of the HTTP
      body that bought it. The body is the canonical request without its
      last field, "template_sha256" (lib/judge/request.h), so this is the
      digest tests/ref/judge_server.py writes to its --log and --sold files.
      A copy is read (the file with its -wal and -shm), so nothing of the
      cache changes: the -wal file a killed writer left stays as it was.

  judge_audit.py check SOLD KILLED_AT STORED
      SOLD: the server's --sold lines (one digest per answer sold), of which
      the first KILLED_AT were sold before the kill; STORED: the output of
      `stored` taken just after the kill. Prints one JSON object:
        sold            answers sold, in all
        distinct        distinct answers sold
        again_stored    answers sold after the kill although the cache held
                        them (the promise broken)
        again_lost      answers sold before the kill and again after it,
                        which the cache did not hold after the kill (sold to
                        a process killed before it stored them: the answer
                        never reached the cache)
        twice_in_a_run  answers sold twice before the kill, or twice after
                        it (one process, or two shards, buying twice)
"""
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile

SUFFIX_LEN = len(',"template_sha256":""}') + 64


def stored(cache):
    if not os.path.exists(cache):
        return []
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "c.sqlite")
        for ext in ("", "-wal", "-shm"):
            if os.path.exists(cache + ext):
                shutil.copyfile(cache + ext, copy + ext)
        con = sqlite3.connect(copy)
        try:
            rows = con.execute("SELECT request FROM answers").fetchall()
        except sqlite3.Error:
            rows = []  # no table yet: a process killed while creating the file
        con.close()
    out = []
    for (req,) in rows:
        if not req.endswith('"}') or ',"template_sha256":"' not in req[-SUFFIX_LEN:]:
            raise SystemExit(f"judge_audit.py: {cache}: a request without template_sha256 last: {req[-80:]}")
        body = req[:-SUFFIX_LEN] + "}"
        out.append(hashlib.sha256(body.encode()).hexdigest())
    return out


def check(sold_path, killed_at, stored_path):
    with open(sold_path) as f:
        sold = [line.strip() for line in f if line.strip()]
    with open(stored_path) as f:
        held = {line.strip() for line in f if line.strip()}
    before, after = sold[:killed_at], sold[killed_at:]
    again_stored = sum(1 for d in after if d in held)
    before_set = set(before)
    again_lost = len({d for d in after if d in before_set and d not in held})
    twice = (len(before) - len(before_set)) + (len(after) - len(set(after)))
    return {"sold": len(sold), "distinct": len(set(sold)), "again_stored": again_stored,
            "again_lost": again_lost, "twice_in_a_run": twice}


def main(argv):
    if len(argv) == 3 and argv[1] == "stored":
        for d in stored(argv[2]):
            print(d)
        return 0
    if len(argv) == 5 and argv[1] == "check":
        print(json.dumps(check(argv[2], int(argv[3]), argv[4])))
        return 0
    sys.stderr.write(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))
