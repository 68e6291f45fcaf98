"""TAP for the Python checks: tap() prints "ok N - name" or "not ok N - name"
and its detail as comment lines; done() prints the plan "1..N" and returns the
exit status (1 when anything failed). tests/run-suites.sh counts the lines."""
import sys

_counts = {"tests": 0, "failed": 0}


def tap(ok, name, detail=None):
    _counts["tests"] += 1
    if not ok:
        _counts["failed"] += 1
    print(("ok" if ok else "not ok") + f" {_counts['tests']} - {name}")
    if detail:
        for line in str(detail).splitlines():
            print(line if line.startswith("#") else "#   " + line)
    sys.stdout.flush()


def done():
    print(f"1..{_counts['tests']}")
    return 1 if _counts["failed"] else 0
