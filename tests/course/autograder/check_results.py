#!/usr/bin/env python3
"""Checks a Gradescope results.json (tests/course/autograder_test.sh): the
fields and types Gradescope's autograder specification reads, valid UTF-8
with no control byte but newline and tab, and the score the test expects.

  check_results.py FILE --score-min X --score-max Y [--output-has TEXT]
                        [--absent TEXT] [--status PREFIX=passed|failed]
(--status: every test whose name starts with PREFIX has that status, and
there is at least one.)
"""
import argparse
import json
import sys

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def fail(msg):
    print(f"check_results.py: {args.file}: {msg}", file=sys.stderr)
    sys.exit(1)


p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("--score-min", type=float, required=True)
p.add_argument("--score-max", type=float, required=True)
p.add_argument("--output-has", action="append", default=[])
p.add_argument("--absent", action="append", default=[])
p.add_argument("--status", action="append", default=[])
args = p.parse_args()

raw = open(args.file, "rb").read()
try:
    text = raw.decode("utf-8")
except UnicodeDecodeError as e:
    fail(f"not valid UTF-8: {e}")
bad = [c for c in text if ord(c) < 32 and c not in "\n\t"]
if bad:
    fail(f"control bytes {sorted(set(map(ord, bad)))}")
doc = json.loads(text)
if not isinstance(doc, dict):
    fail("not a JSON object")
tests = doc.get("tests", [])
if not isinstance(tests, list):
    fail("tests is not a list")
if "score" not in doc and not tests:
    fail("neither a score nor tests")
for key, kind in (("score", (int, float)), ("execution_time", (int, float)), ("output", str),
                  ("visibility", str), ("stdout_visibility", str)):
    if key in doc and not isinstance(doc[key], kind):
        fail(f"{key} has the wrong type")
for key in ("visibility", "stdout_visibility"):
    if key in doc and doc[key] not in VISIBILITY:
        fail(f"{key} '{doc[key]}' is not one of {sorted(VISIBILITY)}")
for t in tests:
    if not isinstance(t, dict):
        fail("a test is not an object")
    for key, kind in (("score", (int, float)), ("max_score", (int, float)), ("name", str), ("output", str),
                      ("status", str), ("visibility", str), ("number", str)):
        if key in t and not isinstance(t[key], kind):
            fail(f"test {t.get('name')}: {key} has the wrong type")
    if "status" in t and t["status"] not in ("passed", "failed"):
        fail(f"test {t.get('name')}: status '{t['status']}'")
    if "visibility" in t and t["visibility"] not in VISIBILITY:
        fail(f"test {t.get('name')}: visibility '{t['visibility']}'")
    if "score" in t and "max_score" in t and not 0 <= t["score"] <= t["max_score"]:
        fail(f"test {t.get('name')}: score {t['score']} outside 0..{t['max_score']}")
score = doc["score"] if "score" in doc else sum(t.get("score", 0) for t in tests)
if not args.score_min <= score <= args.score_max:
    fail(f"score {score}, expected {args.score_min}..{args.score_max}")
for s in args.output_has:
    if s not in text:
        fail(f"no '{s}' in it")
for s in args.absent:
    if s in text:
        fail(f"'{s}' is in it")
for spec in args.status:
    prefix, _, want = spec.partition("=")
    named = [t for t in tests if t.get("name", "").startswith(prefix)]
    if not named:
        fail(f"no test named {prefix}...")
    for t in named:
        if t.get("status") != want:
            fail(f"test '{t['name']}' is {t.get('status')}, expected {want}: {t.get('output', '')[:300]}")
print(f"{args.file}: schema-valid, score {score}")
