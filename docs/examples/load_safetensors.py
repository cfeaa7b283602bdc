"""Load a Hugging Face safetensors checkpoint that lives on a cudafs mount
straight into GPU memory, with no copy through the host.

A checkpoint on the mount already sits in GPU memory: cudafs.load_safetensors
maps each file (a copy made inside the GPU, or with --writable the file's own
memory) and hands back torch tensors that view it. Put a model there once,
e.g. `huggingface-cli download ORG/MODEL --local-dir /mnt/gpu/MODEL`, then:

    python3 load_safetensors.py --mount /mnt/gpu --model MODEL

Without a checkpoint at hand, --make-data writes a small one (a few MiB)
from a toy model first and checks every tensor loaded against it:

    python3 docs/examples/load_safetensors.py --mount /mnt/gpu --make-data

Needs PyTorch 2.1 or later (load_state_dict's assign=): `pip install
torch`; Debian's python3-torch is 1.13 in Debian 12.
"""

import argparse
import glob
import json
import os
import struct
import sys
import time

try:
    import torch
except ImportError:  # said in main(), after --help
    torch = None

import cudafs


def save_safetensors(tensors, path):
    # The safetensors format, for --make-data only: an 8-byte header size,
    # a JSON header, then the tensors' bytes. (`safetensors.torch.save_file`
    # does the same where the package is installed.)
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64"}
    header, offset = {}, 0
    for name, tensor in tensors.items():
        size = tensor.numel() * tensor.element_size()
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # the tensors' bytes start 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for tensor in tensors.values():
            f.write(tensor.contiguous().cpu().view(torch.uint8).numpy().tobytes())


def toy_model():
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                               torch.nn.Linear(1024, 512))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mount", required=True, help="the cudafs mount point, e.g. /mnt/gpu")
    parser.add_argument("--model", default="cudafs-example-model",
                        help="the checkpoint's folder under the mount (*.safetensors files)")
    parser.add_argument("--make-data", action="store_true",
                        help="first write a toy model's checkpoint there, in two files")
    parser.add_argument("--writable", action="store_true",
                        help="tensors of the files' own memory (no copy; writes reach the files)")
    args = parser.parse_args()
    if torch is None or tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 1):
        sys.exit("load_safetensors.py needs PyTorch 2.1 or later (pip install torch); "
                 "this Python has %s" % ("none" if torch is None else torch.__version__))
    folder = os.path.join(args.mount, args.model)

    expected = None
    if args.make_data:
        os.makedirs(folder, exist_ok=True)
        expected = toy_model().state_dict()
        names = list(expected)
        # Two files, as large checkpoints come (model-00001-of-00002...).
        for i, part in enumerate((names[:2], names[2:])):
            save_safetensors({n: expected[n] for n in part},
                             os.path.join(folder, "model-%05d-of-00002.safetensors" % (i + 1)))

    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        sys.exit("no *.safetensors in %s (download a model there, or pass --make-data)" % folder)
    # "cuda": the GPU holding each file's start; "cpu" where a host-backed
    # mount (backend=host) hands out host memory instead.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.monotonic()
    state = {}
    for path in files:
        # A dict of tensors viewing one mapping of the file; they keep it
        # alive, and it goes when the last of them does.
        state.update(cudafs.load_safetensors(path, device=device, writable=args.writable))
    if device == "cuda":
        torch.cuda.synchronize()
    took = time.monotonic() - started

    if expected is not None:
        for name, tensor in expected.items():
            if not torch.equal(state[name].cpu(), tensor):
                sys.exit("tensor %s differs from what was written" % name)
        # The loaded tensors become the model's own: assign=True (PyTorch
        # 2.1 and later) keeps them, no copy, instead of copying into the
        # parameters the model made.
        model = toy_model()
        model.load_state_dict(state, assign=True)
        output = model(torch.ones(1, 512, device=state[names[0]].device))
        assert output.shape == (1, 512)

    size = sum(t.numel() * t.element_size() for t in state.values())
    device = next(iter(state.values())).device  # cuda:N
    print("loaded %d tensors (%.1f MiB) from %d files in %s onto %s in %.3f s" %
          (len(state), size / 2**20, len(files), folder, device, took))


if __name__ == "__main__":
    main()
