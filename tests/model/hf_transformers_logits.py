#!/usr/bin/env python3
"""Logits of a Hugging Face Llama folder through transformers itself
(LlamaForCausalLM in float64), for tests/model/test_export_hf.cpp. Exits 77
when torch or transformers is not installed (the test is then skipped).

usage: hf_transformers_logits.py DIR TOKEN [TOKEN ...]   -> JSON [[logit ...] per position]
"""
import json
import sys

try:
    import torch
    from transformers import LlamaForCausalLM
except ImportError as e:
    print(f"not installed: {e}", file=sys.stderr)
    sys.exit(77)

model = LlamaForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float64)
model.eval()
tokens = torch.tensor([[int(t) for t in sys.argv[2:]]])
with torch.no_grad():
    out = model(tokens).logits[0]
print(json.dumps(out.tolist()))
