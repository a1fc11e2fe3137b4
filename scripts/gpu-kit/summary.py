#!/usr/bin/env python3
"""One screen about a GPU kit run: how each part ended, the CUDA tests'
verdicts, each lever's best GPU speedup over its naive rung, the peer ratios.

    python3 summary.py RESULTS_FOLDER      (the folder gpu-kit/run.sh packs)
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ET


def parts(res):
    path = os.path.join(res, "parts.tsv")
    if not os.path.exists(path):
        return []
    return [line.rstrip("\n").split("\t") for line in open(path) if line.strip()]


def tests(res):
    """passed, failed, skipped and the failed tests' names, over every XML."""
    passed = failed = skipped = 0
    failures = []
    for path in sorted(glob.glob(os.path.join(res, "tests", "*.xml"))):
        for case in ET.parse(path).getroot().iter("testcase"):
            if case.find("failure") is not None:
                failed += 1
                failures.append(f"{os.path.basename(path)[:-4]}: {case.get('classname')}.{case.get('name')}")
            elif case.find("skipped") is not None or case.get("result") == "skipped":
                skipped += 1
            else:
                passed += 1
    return passed, failed, skipped, failures


def best_speedups(res):
    """lever -> (speedup, variant, op, shape) of its fastest correct GPU rung."""
    best = {}
    for path in sorted(glob.glob(os.path.join(res, "*-cuda*.json"))):
        doc = json.load(open(path))
        if doc.get("schema") != "memwall.results/1":
            continue
        for r in doc.get("runs", []):
            s = r.get("speedup_vs_naive")
            if not r.get("ran", True) or not r.get("correct", False) or s is None or r.get("role") == "reference":
                continue
            lever = r.get("lever", "?")
            if lever not in best or s > best[lever][0]:
                best[lever] = (s, r.get("variant"), r.get("op"), r.get("shape_str", ""))
    return best


def incorrect(res):
    bad = []
    for path in sorted(glob.glob(os.path.join(res, "*-cuda*.json"))):
        doc = json.load(open(path))
        for r in doc.get("runs", []) if doc.get("schema") == "memwall.results/1" else []:
            if r.get("ran", True) and r.get("correct") is False:
                bad.append(f"{r.get('op')}/{r.get('variant')} at {r.get('shape_str')}")
    return bad


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: summary.py RESULTS_FOLDER")
    res = sys.argv[1]
    print("== summary")
    for name, how, secs in parts(res):
        print(f"  {name:64s} {how:>22s} {secs:>5s} s")
    p, f, s, failures = tests(res)
    print(f"CUDA tests: {p} passed, {f} failed, {s} skipped")
    for name in failures[:8]:
        print(f"  FAILED {name}")
    if len(failures) > 8:
        print(f"  ... and {len(failures) - 8} more (tests/*.xml)")
    best = best_speedups(res)
    if best:
        print("Best GPU speedup over the naive rung, per lever (correct rungs only):")
        for lever, (sp, var, op, shape) in sorted(best.items()):
            print(f"  {lever:16s} {sp:8.2f}x  {op}/{var} at {shape}")
    else:
        print("No GPU speedups (no lever was timed on a GPU: under cuda-emu the rungs are checked, not timed)")
    bad = incorrect(res)
    if bad:
        print(f"INCORRECT rungs ({len(bad)}): " + "; ".join(bad[:6]))
    peers = os.path.join(res, "peers.json")
    if os.path.exists(peers):
        print("Ours against PyTorch (time ratio, > 1: ours is faster):")
        for row in json.load(open(peers)).get("rows", []):
            if row.get("ratio") is not None:
                print(f"  {row['op']:12s} {row['ours']:24s} vs {row['peer']:28s} {row['ratio']:6.2f}  at {row['shape']}")
    else:
        print("No peer column (no PyTorch with CUDA on this machine)")


if __name__ == "__main__":
    main()
