#!/usr/bin/env python3
"""Execute the C++ notebooks in a real Jupyter kernel and check what they printed.

The kernel is `clang_repl` (PyPI package clang-repl 1.0.4, over Debian's
clang-repl-19), installed by `scripts/install-deps.sh --notebooks` into a
virtual environment. The notebooks are executed with the standard tool,
`jupyter nbconvert --to notebook --execute`. That kernel has two defects we
work around here rather than patch:
  * it sends `None` as the output of a cell that prints nothing, which stops
    the execution with a validation error: every code cell of these notebooks
    prints at least one line (mwnb::note for cells that only define functions);
  * it answers "ok" for every cell, whether it compiled or threw: a failed
    cell shows only in its output (clang's diagnostics, which the kernel
    forwards as text; "terminate called ..." and "session is dead" on stderr).
    So this script reads the executed notebook: every code cell must have
    printed something and nothing that reads as an error, and the last cell's
    `memwall_nb summary:` line must count as many steps and runs as the
    notebook's source asks for, all correct.

Subcommands
  execute NB --build-dir B [--venv V] [--negative compile] [--keep FILE]
      Runs NB in the kernel (cells run in NB's folder, as in JupyterLab) with
      MEMWALL_BUILD_DIR=B and the work files in a temporary folder, then checks
      it. Without the kernel (no V, no clang-repl-19), says so and falls back to
      run_notebook.py, which compiles the cells as one g++ program.
      --negative compile: a copy of NB whose first step cell is misspelt and
      whose later step cells are dropped; the check must fail at that cell
      (exit 0 when it does, 1 when it passes).
  check EXECUTED --source NB [--doctor incorrect]
      Only the check, on a notebook already executed (the committed outputs).
      --doctor incorrect: the summary rewritten to one step fewer correct; the
      check must then fail (exit 0 when it does).
  outputs NB [--doctor time3x|machine]
      The committed outputs against the level's results file (levels/NN-*/level.json
      "results"): the machine the summary names must be the results file's, and
      every "=> op/variant at SHAPE: T ms per call" line whose op, variant and
      shape the results file has must be within NOISE_BAND of its recorded best
      time; lines at shapes the file lacks are listed, and at least one line
      must be comparable. --doctor: a copy with one time 3x off or another
      machine, which must fail (exit 0 when it does).

Environment passed to the notebook: MEMWALL_BUILD_DIR, MEMWALL_NB_WORK,
MEMWALL_NB_QUICK (from ours, default 1 here: quick shapes), MEMWALL_SOURCE_DIR.
"""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNEL = "clang_repl"
REPL = "clang-repl-19"
# Measured over recorded best time, for one op/variant/shape on the same
# machine: outside this the committed outputs are stale or came from a loaded
# machine. Best-of-N times of the quiet 2-core EPYC repeat within ~20%; a
# loaded machine or another build is off by 2x and more.
NOISE_BAND = (0.6, 1.6)

ANSI = re.compile(r"\x1B(?:[@-Z\\-_]|\[[0-?]*[ -/]*[@-~])")
ERROR_PATTERNS = [
    (re.compile(r"(^|\s)error: ", re.M), "a compiler error"),
    (re.compile(r"Parsing failed"), "clang-repl could not parse the cell"),
    (re.compile(r"JIT session error|Failed to materialize symbols"), "a symbol the JIT could not resolve"),
    (re.compile(r"terminate called|what\(\):"), "an exception escaped the cell"),
    (re.compile(r"session is dead|session was killed"), "the clang-repl session died"),
    (re.compile(r"\bINCORRECT\b"), "a step or run was incorrect"),
]
SUMMARY = re.compile(r"memwall_nb summary: (\d+) steps run, (\d+) correct; (\d+) runs, (\d+) correct"
                     r"(?: on (.+) \((\d+) cores\))?")
VERDICT = re.compile(r"^=> (\S+?)/(\S+) at (\S+): ([0-9.eE+-]+) ms per call", re.M)


def cell_text(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def output_text(cell):
    """All text a code cell printed (streams and text/plain), without colours."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            t = o.get("text", "")
            parts.append("".join(t) if isinstance(t, list) else (t or ""))
        elif o.get("output_type") in ("display_data", "execute_result"):
            t = o.get("data", {}).get("text/plain", "")
            parts.append("".join(t) if isinstance(t, list) else t)
            if "image/png" in o.get("data", {}):
                parts.append("[image]")
        elif o.get("output_type") == "error":
            parts.append("error: " + o.get("ename", "") + ": " + o.get("evalue", ""))
    return ANSI.sub("", "\n".join(parts)).replace("\r", "")


def expected_counts(source_nb):
    """Steps and run_json calls the notebook's source asks for."""
    code = "\n".join(cell_text(c) for c in source_nb["cells"] if c.get("cell_type") == "code")
    steps = len(re.findall(r"mwnb::run_step\w*\(", code))
    runs = len(re.findall(r"mwnb::run_json\w*\(", code))
    return steps, runs


def check(executed, source_nb, label):
    """Returns a list of failures (empty: the notebook ran, every cell and step fine)."""
    failures = []
    code_cells = [c for c in executed["cells"] if c.get("cell_type") == "code"]
    for n, cell in enumerate(code_cells):
        text = output_text(cell)
        first = cell_text(cell).strip().splitlines()[0] if cell_text(cell).strip() else ""
        if not text.strip():
            failures.append(f"code cell {n} ({first}): printed nothing")
            continue
        if any(o.get("output_type") == "stream" and o.get("name") == "stderr" for o in cell.get("outputs", [])):
            failures.append(f"code cell {n} ({first}): wrote to stderr: {text.strip()[:300]}")
            continue
        for pat, what in ERROR_PATTERNS:
            m = pat.search(text)
            if m:
                line = next((ln for ln in text.splitlines() if pat.search(ln)), text[:200])
                failures.append(f"code cell {n} ({first}): {what}: {line.strip()[:300]}")
                break
    want_steps, want_runs = expected_counts(source_nb)
    last = output_text(code_cells[-1]) if code_cells else ""
    m = SUMMARY.search(last)
    if not m:
        failures.append("the last code cell printed no 'memwall_nb summary:' line")
    else:
        steps, steps_ok, runs, runs_ok = (int(x) for x in m.groups()[:4])
        if steps != want_steps:
            failures.append(f"summary: {steps} steps run, the notebook asks for {want_steps}")
        if steps_ok != steps:
            failures.append(f"summary: {steps - steps_ok} of {steps} steps incorrect")
        if runs < want_runs:
            failures.append(f"summary: {runs} runs, fewer than the notebook's {want_runs} run_json calls")
        if runs_ok != runs:
            failures.append(f"summary: {runs - runs_ok} of {runs} runs incorrect")
        print(f"nbcheck: {label}: {m.group(0)}")
    return failures


def report(failures, label, expect_fail=False, where=None):
    for f in failures:
        print(f"nbcheck: {label}: {f}")
    if expect_fail:
        hit = failures and (where is None or any(where in f for f in failures))
        print(f"nbcheck: {label}: negative control " + ("failed as it must" if hit else "did NOT fail as it must"))
        return 0 if hit else 1
    print(f"nbcheck: {label}: " + ("FAILED" if failures else "every code cell ran and printed no error"))
    return 1 if failures else 0


def kernel_ready(venv):
    why = []
    if not venv or not os.path.exists(os.path.join(venv, "bin", "jupyter")):
        why.append(f"no jupyter in the virtual environment {venv or '(none given)'}")
    elif not os.path.exists(os.path.join(venv, "share", "jupyter", "kernels", KERNEL, "kernel.json")):
        why.append(f"no '{KERNEL}' kernel in {venv}")
    if not shutil.which(REPL):
        why.append(f"no {REPL} on PATH (Debian package clang-tools-19)")
    return why


def kernel_home(tmp):
    """A HOME holding the kernel's settings: notebooks-cpp/clang-repl.toml with
    its include paths made absolute, so that a copy run elsewhere finds them."""
    home = os.path.join(tmp, "home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(HERE, "clang-repl.toml"), encoding="utf-8") as f:
        text = f.read()
    text = text.replace('"-Ici/include"', json.dumps("-I" + os.path.join(HERE, "ci", "include")))
    text = text.replace('"-I."', json.dumps("-I" + HERE))
    with open(os.path.join(home, ".clang-repl"), "w", encoding="utf-8") as f:
        f.write(text)
    return home


def negative_compile(nb):
    """The first step cell misspelt, later step cells dropped: a cell that cannot compile."""
    nb = copy.deepcopy(nb)
    out, broken = [], None
    for c in nb["cells"]:
        s = cell_text(c)
        if c.get("cell_type") == "code" and "mwnb::run_step(" in s:
            if broken is not None:
                continue
            s = s.replace("mwnb::run_step(", "mwnb::run_stepp(", 1)
            c["source"] = s
            broken = s.splitlines()[0]
        if c.get("cell_type") == "code" and not s.startswith("// decl") and (
                "merge_results" in s or "print_table" in s or "plot_op(" in s):
            continue
        out.append(c)
    if broken is None:
        raise SystemExit("nbcheck: --negative compile needs a notebook with mwnb::run_step cells")
    nb["cells"] = out
    return nb, broken


def cmd_execute(a):
    nb_path = os.path.abspath(a.notebook)
    label = os.path.basename(nb_path) + (" (broken copy)" if a.negative else "")
    build = os.path.abspath(a.build_dir)
    why = kernel_ready(a.venv)
    if why:
        print(f"nbcheck: the Jupyter kernel '{KERNEL}' is not installed ({'; '.join(why)}): "
              f"run scripts/install-deps.sh --notebooks. Falling back to run_notebook.py (g++, no kernel).", flush=True)
        if a.negative:
            print("nbcheck: the negative control needs the kernel; skipped")
            return 0
        return subprocess.call([sys.executable, os.path.join(HERE, "run_notebook.py"), nb_path, "--build-dir", build])
    with open(nb_path, encoding="utf-8") as f:
        source = json.load(f)
    tmp = tempfile.mkdtemp(prefix="nbcheck-")
    try:
        run_nb, where = nb_path, None
        if a.negative:
            broken, first = negative_compile(source)
            source = broken
            run_nb = os.path.join(tmp, os.path.basename(nb_path))
            with open(run_nb, "w", encoding="utf-8") as f:
                json.dump(broken, f)
            where = first
        env = dict(os.environ)
        env.update({"HOME": kernel_home(tmp), "MEMWALL_BUILD_DIR": build,
                    "MEMWALL_NB_WORK": os.path.join(tmp, "nb-work"),
                    "MEMWALL_NB_QUICK": os.environ.get("MEMWALL_NB_QUICK", "1"),
                    "MEMWALL_SOURCE_DIR": os.environ.get("MEMWALL_SOURCE_DIR", ROOT),
                    "JUPYTER_PLATFORM_DIRS": "1"})
        out_dir = os.path.join(tmp, "out")
        cmd = [os.path.join(a.venv, "bin", "jupyter"), "nbconvert", "--to", "notebook", "--execute",
               f"--ExecutePreprocessor.kernel_name={KERNEL}", f"--ExecutePreprocessor.timeout={a.timeout}",
               "--output-dir", out_dir, run_nb]
        print("nbcheck: " + " ".join(cmd), flush=True)
        rc = subprocess.call(cmd, env=env, cwd=os.path.dirname(run_nb))
        executed_path = os.path.join(out_dir, os.path.basename(run_nb))
        if rc != 0 or not os.path.exists(executed_path):
            print(f"nbcheck: {label}: jupyter nbconvert failed (exit {rc})")
            return 1
        with open(executed_path, encoding="utf-8") as f:
            executed = json.load(f)
        for n, c in enumerate(c for c in executed["cells"] if c.get("cell_type") == "code"):
            print(f"--- code cell {n}\n{output_text(c).rstrip()}")
        if a.keep:
            shutil.copyfile(executed_path, a.keep)
        return report(check(executed, source, label), label, expect_fail=bool(a.negative), where=where)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cmd_check(a):
    with open(a.executed, encoding="utf-8") as f:
        executed = json.load(f)
    with open(a.source, encoding="utf-8") as f:
        source = json.load(f)
    label = os.path.basename(a.executed)
    if a.doctor == "incorrect":
        label += " (doctored: one step incorrect)"
        for c in executed["cells"]:
            for o in c.get("outputs", []):
                if o.get("output_type") == "stream":
                    t = "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
                    m = SUMMARY.search(t)
                    if m:
                        s = m.group(0).replace(f"run, {m.group(2)} correct", f"run, {int(m.group(2)) - 1} correct", 1)
                        o["text"] = t.replace(m.group(0), s)
    return report(check(executed, source, label), label, expect_fail=bool(a.doctor), where="steps incorrect")


def parse_shape(text):
    out = {}
    for part in text.split(","):
        k, _, v = part.partition("=")
        out[k.strip()] = v.strip()
    return out


def cmd_outputs(a):
    nb_path = os.path.abspath(a.notebook)
    level = os.path.splitext(os.path.basename(nb_path))[0]
    with open(os.path.join(ROOT, "levels", level, "level.json"), encoding="utf-8") as f:
        results_rel = json.load(f)["results"]
    with open(os.path.join(ROOT, results_rel), encoding="utf-8") as f:
        results = json.load(f)
    with open(nb_path, encoding="utf-8") as f:
        nb = json.load(f)
    text = "\n".join(output_text(c) for c in nb["cells"] if c.get("cell_type") == "code")
    label = os.path.basename(nb_path)
    if a.doctor == "time3x":
        label += " (doctored: one time 3x)"
        m = VERDICT.search(text)
        if m:
            text = text[:m.start(4)] + repr(float(m.group(4)) * 3) + text[m.end(4):]
    elif a.doctor == "machine":
        label += " (doctored: another machine)"
        text = SUMMARY.sub(lambda m: m.group(0).replace(f" on {m.group(5)} (", " on Another CPU ("), text)
    failures = []
    mach = results.get("machine", {})
    want = (mach.get("cpu_model", "?"), int(mach.get("cores", 0) or 0))
    m = SUMMARY.search(text)
    if not m or not m.group(5):
        failures.append("the committed outputs name no machine (no 'memwall_nb summary: ... on CPU (N cores)' line)")
    elif (m.group(5), int(m.group(6))) != want:
        failures.append(f"the outputs were recorded on {m.group(5)} ({m.group(6)} cores), "
                        f"the results file {results_rel} on {want[0]} ({want[1]} cores)")
    compared, skipped = 0, []
    for v in VERDICT.finditer(text):
        op, variant, shape, ms = v.group(1), v.group(2), parse_shape(v.group(3)), float(v.group(4))
        rec = [r for r in results.get("runs", []) if r.get("op") == op and r.get("variant") == variant
               and {k: str(x) for k, x in r.get("shape", {}).items()} == shape]
        if not rec:
            skipped.append(f"{op}/{variant} at {v.group(3)}")
            continue
        rec_ms = 1e3 * rec[0]["time_s"]["best"]
        ratio = ms / rec_ms
        compared += 1
        ok = NOISE_BAND[0] <= ratio <= NOISE_BAND[1]
        print(f"nbcheck: {op}/{variant} at {v.group(3)}: {ms:.4g} ms in the outputs, {rec_ms:.4g} ms recorded: "
              f"{ratio:.2f}x {'ok' if ok else 'OUTSIDE'} [{NOISE_BAND[0]}, {NOISE_BAND[1]}]")
        if not ok:
            failures.append(f"{op}/{variant} at {v.group(3)}: {ms:.4g} ms in the outputs is {ratio:.2f}x the "
                            f"{rec_ms:.4g} ms of {results_rel} (band {NOISE_BAND[0]}-{NOISE_BAND[1]}x)")
    for s in skipped:
        print(f"nbcheck: {s}: no run at that shape in {results_rel} (not compared)")
    if compared == 0:
        failures.append(f"no '=> op/variant at SHAPE: T ms per call' line matches a run of {results_rel}: "
                        "the outputs were not recorded at the results file's shapes (regenerate with MEMWALL_NB_QUICK unset)")
    print(f"nbcheck: {label}: {compared} times compared with {results_rel}")
    if not a.doctor:
        failures += check(nb, nb, label)  # and every committed cell ran, no error, summary all correct
    # A doctored copy must fail for the reason it was doctored, not another.
    where = {"time3x": "(band", "machine": "the outputs were recorded on Another CPU"}.get(a.doctor)
    return report(failures, label, expect_fail=bool(a.doctor), where=where)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("execute")
    e.add_argument("notebook")
    e.add_argument("--build-dir", required=True)
    e.add_argument("--venv", default=os.environ.get("MEMWALL_NB_VENV", os.path.join(ROOT, ".venv-notebooks")))
    e.add_argument("--negative", choices=["compile"])
    e.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    e.add_argument("--keep", help="copy the executed notebook here")
    c = sub.add_parser("check")
    c.add_argument("executed")
    c.add_argument("--source", required=True)
    c.add_argument("--doctor", choices=["incorrect"])
    o = sub.add_parser("outputs")
    o.add_argument("notebook")
    o.add_argument("--doctor", choices=["time3x", "machine"])
    a = ap.parse_args()
    return {"execute": cmd_execute, "check": cmd_check, "outputs": cmd_outputs}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
