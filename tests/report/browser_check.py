#!/usr/bin/env python3
"""The HTML report in a real browser (Debian's chromium, headless).

Makes a small results folder with real runs of the binary — a quick
calibration, every lever of `memwall list` at its quick shapes, the claims —
writes the page with `memwall report DIR --html`, and loads it in chromium:

  1. the page as written: any console message fails (the page has no script,
     so a message can only be an error: a resource that did not load, bad markup
     the browser complains about);
  2. a copy with a checker script added at the top of <head>: after load it
     records every image and plot that did not render (an <img> without pixels,
     an <svg> with an empty box), every resource error, and which lever sections
     and plots the page has, into the DOM that --dump-dom prints.

Every lever that has CPU variants in `memwall list --json` must have its
section with a roofline and a speedup plot that rendered.

Exit status 0 passed, 1 failed, 77 skipped (no chromium). --keep DIR keeps the
folder (and a screenshot, page.png) for a person to look at.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CHECKER = r"""<script>
window.__mw_errors = [];
window.addEventListener('error', function (e) {
  var t = e.target || {};
  window.__mw_errors.push('resource error: ' + (t.tagName || '') + ' ' + (t.src || t.href || e.message || ''));
}, true);
window.addEventListener('load', function () {
  var out = {errors: window.__mw_errors, broken: [], sections: {}, plots: 0};
  Array.prototype.forEach.call(document.images, function (im) {
    if (!im.complete || im.naturalWidth === 0) out.broken.push('img ' + im.src.slice(0, 80));
  });
  Array.prototype.forEach.call(document.querySelectorAll('svg.plot'), function (s) {
    var b = s.getBoundingClientRect();
    var drawn = s.querySelectorAll('path, text, use, rect').length;
    if (b.width < 100 || b.height < 50 || drawn < 10)
      out.broken.push('svg ' + s.getAttribute('aria-label') + ' ' + b.width + 'x' + b.height + ' elements ' + drawn);
    out.plots++;
  });
  Array.prototype.forEach.call(document.querySelectorAll('section.lever[data-lever]'), function (sec) {
    var kinds = {};
    Array.prototype.forEach.call(sec.querySelectorAll('figure'), function (f) { kinds[f.className] = (kinds[f.className] || 0) + 1; });
    out.sections[sec.getAttribute('data-lever')] = {figures: kinds, tables: sec.querySelectorAll('table').length};
  });
  var pre = document.createElement('pre');
  pre.id = 'mw-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
  if (out.errors.length || out.broken.length) console.error('mw-check failed: ' + JSON.stringify(out));
});
</script>"""


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        print(r.stdout)
        raise SystemExit(f"FAILED: {' '.join(cmd)} exited {r.returncode}")
    return r.stdout


def chromium(binary, url, extra, timeout=180):
    cmd = [binary, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--disable-extensions",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=20000", *extra, url]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    console = [l for l in r.stderr.splitlines() if ":CONSOLE" in l]
    return r.returncode, r.stdout, console, r.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memwall", required=True)
    ap.add_argument("--chromium", default="")
    ap.add_argument("--keep", default="", help="make the folder here and keep it (with page.png)")
    a = ap.parse_args()
    browser = a.chromium or shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser or not os.path.exists(browser):
        print("SKIPPED: chromium not found (apt-get install chromium, or scripts/install-deps.sh --browser)")
        return 77

    work = a.keep or tempfile.mkdtemp(prefix="memwall-browser-")
    os.makedirs(work, exist_ok=True)
    try:
        mw = a.memwall
        levers = sorted({v["lever"] for v in json.loads(run([mw, "list", "--json"])) if v["backend"] == "cpu"})
        run([mw, "calibrate", "--quick", "--out", os.path.join(work, "ceilings.json")])
        run([mw, "run", "all", "--quick", "--budget", "0.02", "--threads", "2", "--ceilings",
             os.path.join(work, "ceilings.json"), "--out-dir", work])
        # Claims: the formula checks (the CPU experiments are the main job's; too slow here).
        subprocess.run([mw, "reproduce", "--out", os.path.join(work, "claims.json")], stdout=subprocess.DEVNULL)
        run([mw, "report", work, "--html"])
        page = os.path.join(work, "index.html")
        html = open(page, encoding="utf-8").read()
        failures = []
        if "<script" in html:
            failures.append("the page holds a <script>; it must read without JavaScript")

        # 1. The page as written: no console message at all.
        rc, _, console, err = chromium(browser, "file://" + os.path.abspath(page), ["--dump-dom"])
        if rc != 0:
            failures.append(f"chromium exited {rc} on the page: {err[-2000:]}")
        failures += ["console: " + l for l in console]

        # 2. The checker copy.
        checked = os.path.join(work, "check.html")
        with open(checked, "w", encoding="utf-8") as f:
            f.write(html.replace("<head>", "<head>" + CHECKER, 1))
        rc, dom, console, err = chromium(browser, "file://" + os.path.abspath(checked), ["--dump-dom"])
        m = re.search(r'<pre id="mw-check">(.*?)</pre>', dom, re.S)
        if rc != 0 or not m:
            failures.append(f"the checker did not report (chromium exit {rc}): {err[-2000:]}")
        else:
            out = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
            failures += out["errors"] + ["did not render: " + b for b in out["broken"]]
            print(f"checker: {out['plots']} plots, sections {sorted(out['sections'])}")
            for lever in levers:
                sec = out["sections"].get(lever)
                if sec is None:
                    failures.append(f"no section for lever '{lever}'")
                    continue
                for kind in ("roofline", "speedup"):
                    if sec["figures"].get(kind, 0) < 1:
                        failures.append(f"lever '{lever}' has no {kind} plot")
                if sec["tables"] < 1:
                    failures.append(f"lever '{lever}' has no table")
        failures += ["console (checker copy): " + l for l in console]

        if a.keep:
            chromium(browser, "file://" + os.path.abspath(page),
                     ["--screenshot=" + os.path.join(work, "page.png"), "--window-size=1400,2400", "--hide-scrollbars"])
        if failures:
            print("FAILED:\n  " + "\n  ".join(failures))
            return 1
        print(f"passed: {len(levers)} levers ({', '.join(levers)}), each with its section and plots")
        return 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
