#!/usr/bin/env python3
"""A Hugging Face model on the mount (issue 44): a Llama-shaped checkpoint
of random weights (about 8 GiB in bf16 with the default 20 layers) saved
with save_pretrained into a cudafs mount and into tmpfs, then loaded onto
the GPU for generate, the runs alternating:
  tmpfs      AutoModelForCausalLM.from_pretrained(TMPFS/model, device_map="cuda")
  fuse       the same call on the mount's folder (bytes read through FUSE)
  cudafs     cudafs.transformers.from_pretrained(MOUNT/model): the weights
             mapped from the files' GPU memory
Per run: seconds to the model (from_pretrained returned, synchronised),
seconds to the first generate of 8 tokens, GiB PyTorch's allocator holds
after the load (weights copied by transformers show here; mapped ones do
not), and whether the logits of a fixed prompt equal those of the first
load from tmpfs bit for bit. Needs root (drop_caches), a GPU, PyTorch and
transformers; MOUNT a mounted cudafs (backend=cuda), TMPFS a mounted
tmpfs. Prints markdown.

usage: bench/hf_load.py MOUNT TMPFS [--layers 20] [--runs 3]
"""

import argparse
import gc
import os
import shutil
import subprocess
import sys
import time
import traceback

import torch
import transformers

import cudafs.transformers


def build(layers):
    config = transformers.LlamaConfig(hidden_size=4096, intermediate_size=11008,
                                      num_hidden_layers=layers, num_attention_heads=32,
                                      num_key_value_heads=8, vocab_size=32000,
                                      max_position_embeddings=4096, tie_word_embeddings=False,
                                      pad_token_id=0)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    return model.eval()


PROMPT = [[1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203]]


@torch.no_grad()
def logits(model):
    return model(torch.tensor(PROMPT, device=model.device)).logits.float().cpu()


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def one_run(kind, folder):
    drop_caches()
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    start = time.monotonic()
    if kind == "cudafs":
        model = cudafs.transformers.from_pretrained(folder, dtype=torch.bfloat16)
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, device_map="cuda",
                                                                  dtype=torch.bfloat16)
    torch.cuda.synchronize()
    loaded = time.monotonic() - start
    allocated = (torch.cuda.memory_allocated() - before) / 2**30
    with torch.no_grad():
        model.generate(torch.tensor(PROMPT, device=model.device), max_new_tokens=8,
                       do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    ready = time.monotonic() - start
    got = logits(model)
    del model
    return loaded, ready, allocated, got


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mount")
    parser.add_argument("tmpfs")
    parser.add_argument("--layers", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    model = build(args.layers)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    folders = {"tmpfs": os.path.join(args.tmpfs, "hf-load"),
               "fuse": os.path.join(args.mount, "hf-load")}
    folders["cudafs"] = folders["fuse"]
    for folder in set(folders.values()):
        start = time.monotonic()
        model.save_pretrained(folder, max_shard_size="2GB")
        print("saved %.2f GiB to %s in %.1f s" % (size / 2**30, folder, time.monotonic() - start),
              file=sys.stderr, flush=True)
    shards = len([n for n in os.listdir(folders["fuse"]) if n.endswith(".safetensors")])
    del model
    print("transformers %s, torch %s, %s; Llama-shaped, %d layers, %.2f GiB of bf16 in %d "
          "shards (random weights, save_pretrained)\n" %
          (transformers.__version__, torch.__version__, torch.cuda.get_device_name(), args.layers,
           size / 2**30, shards))
    print("| load | run | s to model | s to first generate | GiB PyTorch allocated | "
          "logits identical |")
    print("|---|---:|---:|---:|---:|---|")
    expected = None  # the logits of the first load from tmpfs
    for run in range(args.runs):
        for kind in ("tmpfs", "fuse", "cudafs"):
            try:
                loaded, ready, allocated, got = one_run(kind, folders[kind])
                if expected is None:
                    expected = got
                same = torch.equal(got, expected)
                print("| %s | %d | %.3f | %.3f | %.2f | %s |" %
                      (kind, run + 1, loaded, ready, allocated, "yes" if same else "NO"),
                      flush=True)
            except Exception:  # pylint: disable=broad-except
                traceback.print_exc()
                print("| %s | %d | failed | | | |" % (kind, run + 1), flush=True)
    for folder in set(folders.values()):
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
