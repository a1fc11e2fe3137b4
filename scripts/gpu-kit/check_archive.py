#!/usr/bin/env python3
"""Checks what a GPU kit run packed: every part it must hold, each readable.

    python3 check_archive.py ARCHIVE [--tests KIT_TESTS_FOLDER]

Exit 0 with a line per part; exit 1 naming what is missing or broken.
"""
import argparse
import json
import os
import sys
import tarfile
import xml.etree.ElementTree as ET

LIMIT = 16 * 1024 * 1024
REQUIRED = ["machine.txt", "kit.log", "parts.tsv", "summary.txt", "ceilings.json", "claims.json", "index.html"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--tests", help="the kit's test executables, space-separated: one XML each must be in the archive")
    a = ap.parse_args()
    problems = []
    size = os.path.getsize(a.archive)
    if size > LIMIT:
        problems.append(f"the archive is {size} bytes, over 16 MiB")
    with tarfile.open(a.archive) as tar:
        names = {os.path.normpath(m.name) for m in tar.getmembers() if m.isfile()}

        def read(name):
            return tar.extractfile("./" + name if "./" + name in tar.getnames() else name).read()

        for need in REQUIRED:
            if need not in names:
                problems.append(f"{need} is missing")
        results = sorted(n for n in names if "/" not in n and n.endswith(".json") and "-cuda" in n)
        if not results:
            problems.append("no <lever>-cuda*.json results")
        for n in results + ["ceilings.json", "claims.json"]:
            if n in names:
                try:
                    json.loads(read(n))
                except ValueError as e:
                    problems.append(f"{n} is not JSON: {e}")
        levers = set()
        for n in results:
            levers.update(r.get("lever") for r in json.loads(read(n)).get("runs", []))
        xmls = sorted(n for n in names if n.startswith("tests/") and n.endswith(".xml"))
        if a.tests:
            for exe in a.tests.split():
                if f"tests/{exe}.xml" not in names:
                    problems.append(f"tests/{exe}.xml is missing (the kit's test executable {exe} left no verdicts)")
        cases = 0
        for n in xmls:
            try:
                cases += sum(1 for _ in ET.fromstring(read(n)).iter("testcase"))
            except ET.ParseError as e:
                problems.append(f"{n} is not XML: {e}")
        if "parts.tsv" in names:
            for line in read("parts.tsv").decode().splitlines():
                name, how, _ = line.split("\t")
                if how.startswith("stopped") or how == "skipped":
                    problems.append(f"part '{name}' {how}")
    for p in problems:
        print(f"archive: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"archive: {size // 1024} KiB; {len(REQUIRED)} required files; {len(results)} results files "
          f"({', '.join(sorted(l for l in levers if l))}); {len(xmls)} test reports with {cases} test cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
