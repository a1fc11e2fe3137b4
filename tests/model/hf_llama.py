#!/usr/bin/env python3
"""Logits of a Hugging Face Llama folder (config.json + model.safetensors),
in plain Python and double precision, following transformers' Llama
conventions rather than memwall's: torch Linear weights [d_out, d_in]
(y = x W^T), rotate_half RoPE (pairs x[j], x[j + hd/2]), grouped key/value
heads by repeat, RMSNorm x * rsqrt(mean(x^2) + eps) * w, the head tied to
the embedding. No numpy or torch: the standard library reads the
safetensors file. For tests/model/test_export_hf.cpp, on tiny models.

usage: hf_llama.py DIR TOKEN [TOKEN ...]   -> JSON [[logit ...] per position]
"""
import json
import math
import struct
import sys


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise SystemExit(f"{name}: dtype {t['dtype']}, expected F32")
        a, b = t["data_offsets"]
        values = struct.unpack(f"<{(b - a) // 4}f", body[a:b])
        shape = t["shape"]
        rows = shape[0] if len(shape) == 2 else 1
        cols = shape[-1]
        tensors[name] = [list(values[r * cols : (r + 1) * cols]) for r in range(rows)] if len(shape) == 2 else list(values)
    return tensors


def linear(x, w):  # x [d_in], w [d_out][d_in] -> [d_out]
    return [sum(wi * xi for wi, xi in zip(row, x)) for row in w]


def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]


def rope(x, pos, hd, theta):  # one head, rotate_half convention
    half = hd // 2
    out = list(x)
    for j in range(half):
        angle = pos * theta ** (-2.0 * j / hd)
        c, s = math.cos(angle), math.sin(angle)
        a, b = x[j], x[j + half]
        out[j] = a * c - b * s
        out[j + half] = b * c + a * s
    return out


def logits(folder, tokens):
    cfg = json.load(open(f"{folder}/config.json"))
    W = load_safetensors(f"{folder}/model.safetensors")
    d, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // H)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    xs = [list(W["model.embed_tokens.weight"][t]) for t in tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        keys, values, outs = [], [], []
        for pos, x in enumerate(xs):
            xn = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
            q = linear(xn, W[p + "self_attn.q_proj.weight"])
            k = linear(xn, W[p + "self_attn.k_proj.weight"])
            v = linear(xn, W[p + "self_attn.v_proj.weight"])
            q = sum((rope(q[h * hd : (h + 1) * hd], pos, hd, theta) for h in range(H)), [])
            k = sum((rope(k[h * hd : (h + 1) * hd], pos, hd, theta) for h in range(KV)), [])
            keys.append(k)
            values.append(v)
            o = []
            for h in range(H):
                g = h // (H // KV)
                qh = q[h * hd : (h + 1) * hd]
                s = [sum(a * b for a, b in zip(qh, kk[g * hd : (g + 1) * hd])) / math.sqrt(hd) for kk in keys]
                m = max(s)
                e = [math.exp(v_ - m) for v_ in s]
                z = sum(e)
                o += [sum(e[j] / z * values[j][g * hd + i] for j in range(len(keys))) for i in range(hd)]
            outs.append(o)
        for pos in range(len(xs)):
            x = [a + b for a, b in zip(xs[pos], linear(outs[pos], W[p + "self_attn.o_proj.weight"]))]
            xn = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
            gate = linear(xn, W[p + "mlp.gate_proj.weight"])
            up = linear(xn, W[p + "mlp.up_proj.weight"])
            h = [a / (1.0 + math.exp(-a)) * b for a, b in zip(gate, up)]
            xs[pos] = [a + b for a, b in zip(x, linear(h, W[p + "mlp.down_proj.weight"]))]
    head = W.get("lm_head.weight", W["model.embed_tokens.weight"]) if not cfg.get("tie_word_embeddings") else W[
        "model.embed_tokens.weight"]
    return [linear(rmsnorm(x, W["model.norm.weight"], eps), head) for x in xs]


if __name__ == "__main__":
    print(json.dumps(logits(sys.argv[1], [int(t) for t in sys.argv[2:]])))
