#!/usr/bin/env python3
"""The peer column of a GPU kit run: PyTorch's own kernels (torch.matmul on
the cuBLAS it ships, scaled_dot_product_attention) at the shapes our CUDA rungs
just ran, timed in the same way (CUDA events, best of several calls after a
warm-up), beside our fastest correct rung of the same op.

    python3 peers.py --results RESULTS_FOLDER --out peers.json

ratio = PyTorch's best time / ours: above 1, ours is faster.
"""
import argparse
import glob
import json
import os
import sys


def our_best(res, op):
    """(time_s best, variant, shape dict) of the fastest correct CUDA rung of op."""
    best = None
    for path in glob.glob(os.path.join(res, "*-cuda.json")):
        doc = json.load(open(path))
        for r in doc.get("runs", []):
            if r.get("op") != op or not r.get("ran", True) or not r.get("correct", False):
                continue
            t = (r.get("time_s") or {}).get("best")
            if t and (best is None or t < best[0]):
                best = (t, r["variant"], r["shape"])
    return best


def time_cuda(torch, fn, calls=20):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    rows = []
    gemm = our_best(a.results, "gemm")
    if gemm:
        t, var, s = gemm
        x = torch.randn(s["m"], s["k"], device="cuda")
        w = torch.randn(s["k"], s["n"], device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False  # our rungs are FP32 on CUDA cores
        peer = time_cuda(torch, lambda: torch.matmul(x, w))
        rows.append({"op": "gemm", "ours": var, "peer": "torch.matmul (fp32, no TF32)", "shape": s,
                     "ours_s": t, "peer_s": peer, "ratio": peer / t})
    att = our_best(a.results, "attention")
    if att:
        t, var, s = att
        q = torch.randn(s["b"], s["h"], s["s"], s["d"], device="cuda")
        k = torch.randn(s["b"], s.get("hk", s["h"]), s["s"], s["d"], device="cuda")
        v = torch.randn_like(k)
        causal = bool(s.get("causal", 0))
        gqa = k.shape[1] != q.shape[1]
        sdpa = torch.nn.functional.scaled_dot_product_attention
        kw = {"is_causal": causal}
        if gqa:
            kw["enable_gqa"] = True
        peer = time_cuda(torch, lambda: sdpa(q, k, v, **kw))
        rows.append({"op": "attention", "ours": var, "peer": "scaled_dot_product_attention (fp32)", "shape": s,
                     "ours_s": t, "peer_s": peer, "ratio": peer / t})
    doc = {"schema": "memwall.peers/1", "torch": torch.__version__, "cuda": torch.version.cuda,
           "device": torch.cuda.get_device_name(0), "timing": "CUDA events, best of 20 calls after one warm-up",
           "rows": rows}
    tmp = a.out + ".tmp"
    json.dump(doc, open(tmp, "w"), indent=2)
    os.replace(tmp, a.out)
    for r in rows:
        print(f"  {r['op']}: ours {r['ours']} {r['ours_s'] * 1e3:.3f} ms, {r['peer']} {r['peer_s'] * 1e3:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
