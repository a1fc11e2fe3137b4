#!/usr/bin/env python3
"""Execute a C++ notebook of this folder without a Jupyter kernel (the fallback).

CI executes the notebooks in the clang_repl Jupyter kernel (nbcheck.py
execute); where that kernel is not installed, this script turns a notebook's
code cells into one C++17 program, compiles it with g++ against the build tree,
runs it, and fails if any cell fails (compile error, non-zero exit, or an
exception escaping a cell). With --write-outputs it stores each cell's real
output (text and images) back into the notebook: images survive here, while
the clang_repl kernel shows text only.

Conventions the notebooks follow (docs/lessons.md, "In a notebook"; memwall_nb.hpp):
  * `#pragma cling add_include_path("P")`  -> -I P
    `#pragma cling add_library_path("P")`  -> -L P -Wl,-rpath,P
    `#pragma cling load("libX")`           -> -lX      (relative P: from the notebook's folder)
  * `#include` lines go to file scope, in order.
  * A cell whose first line is `// decl` (functions, structs) goes to file
    scope whole (its output, from initializers such as mwnb::note, is printed
    before main's); every other cell's statements go into main(), in order, so
    variables declared in one cell are visible in the next, as in cling.
  * Every statement ends with ';' (cling's "print the last expression" is not
    used), and no %magics.
  * The program is linked with BUILD/notebooks-cpp/libmemwall_nb.so and run
    with MEMWALL_BUILD_DIR=BUILD, which mwnb::load() and mwnb::configure() read
    (the notebooks' default is "../build"). MEMWALL_NB_QUICK and
    MEMWALL_NB_WORK pass through from the environment.
  * <xcpp/xdisplay.hpp> comes from ci/include, compiled with
    -DMWNB_DISPLAY_MARKERS: display(x) prints the mime bundle on a marked
    line, which becomes the cell's display_data.

Usage:
  run_notebook.py NOTEBOOK.ipynb --build-dir BUILD [--write-outputs] [--workdir DIR]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CELL_MARK = "\x1eMWNB-CELL "
DISPLAY_MARK = "\x1eMWNB-DISPLAY "
ERROR_MARK = "\x1eMWNB-ERROR "
HERE = os.path.dirname(os.path.abspath(__file__))
PRAGMA = re.compile(r'^\s*#\s*pragma\s+cling\s+(\w+)\s*\(\s*"([^"]*)"\s*\)\s*$')


class NotebookError(Exception):
    pass


def cell_source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def resolve(path, nb_dir):
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(nb_dir, path))


def assemble(nb, nb_path, build_dir):
    """Returns (program text, compiler flags, linker flags, code-cell indices)."""
    meta = nb.get("metadata", {})
    kernel = meta.get("kernelspec", {}).get("name", "")
    if kernel not in ("clang_repl", "xcpp17"):
        raise NotebookError(f"{nb_path}: kernelspec is '{kernel}', expected 'clang_repl' or 'xcpp17'")
    nb_dir = os.path.dirname(os.path.abspath(nb_path))
    cflags, lflags, includes, decls, body, code_cells = [], [], [], [], [], []
    for idx, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        n = len(code_cells)
        code_cells.append(idx)
        src = cell_source(cell)
        lines = src.split("\n")
        is_decl = bool(lines) and lines[0].strip() == "// decl"
        kept = []
        for ln, line in enumerate(lines, start=1):
            m = PRAGMA.match(line)
            if m:
                what, arg = m.groups()
                if what == "add_include_path":
                    cflags.append("-I" + resolve(arg, nb_dir))
                elif what == "add_library_path":
                    p = resolve(arg, nb_dir)
                    lflags += ["-L" + p, "-Wl,-rpath," + p]
                elif what == "load":
                    if "/" in arg or arg.endswith(".so"):
                        lflags.append(resolve(arg, nb_dir))
                    else:
                        lflags.append("-l" + (arg[3:] if arg.startswith("lib") else arg))
                else:
                    raise NotebookError(f"code cell {n}: unsupported #pragma cling {what}")
                kept.append("")
            elif line.lstrip().startswith("#pragma cling"):
                raise NotebookError(f"code cell {n}, line {ln}: cannot read '{line.strip()}'")
            elif line.lstrip().startswith("#include"):
                includes.append(f'#line {ln} "cell-{n}"\n{line}')
                kept.append("")
            elif line.lstrip().startswith("%"):
                raise NotebookError(f"code cell {n}: magics ('{line.strip()}') cannot run outside xeus-cling")
            else:
                kept.append(line)
        text = f'#line 1 "cell-{n}"\n' + "\n".join(kept)
        if is_decl:
            decls.append(f"static const int mwnb_ci_mark_{n} = (mwnb_ci_cell({n}), 0);\n{text}")
        else:
            body.append(f"    mwnb_ci_cell({n}); mwnb_ci_current = {n};\n{text}\n")
    program = "\n".join([
        "// Generated by notebooks-cpp/run_notebook.py from " + os.path.basename(nb_path) + "; do not edit.",
        "#include <cstdio>", "#include <exception>", "#include <iostream>",
        *includes,
        "static void mwnb_ci_cell(int i) {",
        "    std::cout.flush(); std::cerr.flush(); std::fflush(stdout);",
        '    std::printf("\\x1eMWNB-CELL %d\\n", i); std::fflush(stdout);',
        "}",
        *decls,
        "int main() {",
        "  int mwnb_ci_current = -1;",
        "  try {",
        *body,
        "  } catch (const std::exception& e) {",
        '    std::cout.flush(); std::fflush(stdout);',
        '    std::printf("\\x1eMWNB-ERROR %d %s\\n", mwnb_ci_current, e.what()); return 1;',
        "  } catch (...) {",
        '    std::cout.flush(); std::fflush(stdout);',
        '    std::printf("\\x1eMWNB-ERROR %d unknown exception\\n", mwnb_ci_current); return 1;',
        "  }",
        "  std::cout.flush(); std::fflush(stdout);",
        "  return 0;",
        "}",
        "",
    ])
    return program, cflags, lflags, code_cells


def lines_of(text):
    """Lines split on '\\n' only (str.splitlines also splits on the \\x1e the markers start with)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def split_outputs(text):
    """Maps code-cell number -> list of (kind, payload) in order."""
    outputs, cur, error = {}, None, None
    for line in lines_of(text):
        if line.startswith(CELL_MARK):
            cur = int(line[len(CELL_MARK):].strip())
            outputs.setdefault(cur, [])
        elif line.startswith(DISPLAY_MARK):
            outputs.setdefault(cur, []).append(("display", json.loads(line[len(DISPLAY_MARK):])))
        elif line.startswith(ERROR_MARK):
            num, _, msg = line[len(ERROR_MARK):].partition(" ")
            error = (int(num), msg.strip())
        else:
            items = outputs.setdefault(cur, [])
            if items and items[-1][0] == "text":
                items[-1] = ("text", items[-1][1] + line)
            else:
                items.append(("text", line))
    return outputs, error


def to_nb_outputs(items):
    out = []
    for kind, payload in items:
        if kind == "text":
            out.append({"name": "stdout", "output_type": "stream", "text": lines_of(payload)})
        else:
            data = {k: (lines_of(v) if k.startswith("text/") else v) for k, v in payload.items()}
            out.append({"data": data, "metadata": {}, "output_type": "display_data"})
    return out


def relative_paths(outputs, build_dir, nb_dir):
    """The build tree named relative to the notebook's folder in stored outputs
    (../build-cpu, as MEMWALL_BUILD_DIR=../build-cpu would print it), so that no
    absolute path of the machine that ran it is committed."""
    rel = os.path.relpath(build_dir, nb_dir)
    for items in outputs.values():
        for i, (kind, payload) in enumerate(items):
            if kind == "text":
                items[i] = (kind, payload.replace(build_dir, rel))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook")
    ap.add_argument("--build-dir", required=True, help="CMake build tree with memwall and notebooks-cpp/libmemwall_nb.so")
    ap.add_argument("--write-outputs", action="store_true", help="store the run's outputs in the notebook")
    ap.add_argument("--workdir", help="run here (default: a fresh temporary folder)")
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    nb_path = os.path.abspath(args.notebook)
    build_dir = os.path.abspath(args.build_dir)
    with open(nb_path, encoding="utf-8") as f:
        nb = json.load(f)
    try:
        program, cflags, lflags, code_cells = assemble(nb, nb_path, build_dir)
    except NotebookError as e:
        print(f"run_notebook: {e}", file=sys.stderr)
        return 1

    tmp = tempfile.mkdtemp(prefix="mwnb-")
    try:
        src = os.path.join(tmp, "notebook.cpp")
        exe = os.path.join(tmp, "notebook")
        with open(src, "w", encoding="utf-8") as f:
            f.write(program)
        lib_dir = os.path.join(build_dir, "notebooks-cpp")
        cmd = [args.cxx, "-std=c++17", "-O1", "-DMWNB_DISPLAY_MARKERS", "-I" + os.path.join(HERE, "ci", "include"),
               *cflags, src, "-o", exe, *lflags, "-L" + lib_dir, "-Wl,-rpath," + lib_dir, "-lmemwall_nb"]
        print("run_notebook: compiling", len(code_cells), "code cells:", " ".join(cmd), flush=True)
        cc = subprocess.run(cmd, capture_output=True, text=True)
        if cc.returncode != 0:
            print(cc.stdout + cc.stderr, file=sys.stderr)
            print(f"run_notebook: {os.path.basename(nb_path)}: the cells do not compile as C++17 (errors name cell-N)",
                  file=sys.stderr)
            return 1
        workdir = os.path.abspath(args.workdir) if args.workdir else os.path.join(tmp, "work")
        os.makedirs(workdir, exist_ok=True)
        try:
            env = dict(os.environ, MEMWALL_BUILD_DIR=build_dir)
            run = subprocess.run([exe], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, timeout=args.timeout, env=env)
        except subprocess.TimeoutExpired:
            print(f"run_notebook: the notebook ran past {args.timeout} s", file=sys.stderr)
            return 1
        text = run.stdout.decode("utf-8", errors="replace")
        outputs, error = split_outputs(text)
        for n in sorted(k for k in outputs if k is not None):
            shown = "".join(p if k == "text" else "[display: " + ", ".join(p) + "]\n" for k, p in outputs[n])
            print(f"--- code cell {n}\n{shown}", end="" if shown.endswith("\n") or not shown else "\n")
        if error or run.returncode != 0:
            where = f"code cell {error[0]}: {error[1]}" if error else f"exit status {run.returncode}"
            print(f"run_notebook: {os.path.basename(nb_path)} FAILED at {where}", file=sys.stderr)
            return 1
        if args.write_outputs:
            relative_paths(outputs, build_dir, os.path.dirname(nb_path))
            cells = nb["cells"]
            for n, idx in enumerate(code_cells):
                cells[idx]["outputs"] = to_nb_outputs(outputs.get(n, []))
                cells[idx]["execution_count"] = n + 1
            with open(nb_path, "w", encoding="utf-8") as f:
                json.dump(nb, f, indent=1, ensure_ascii=False)
                f.write("\n")
            print(f"run_notebook: wrote the outputs of {len(code_cells)} code cells into {nb_path}")
        print(f"run_notebook: {os.path.basename(nb_path)}: all {len(code_cells)} code cells ran")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
