"""Train a PyTorch model on dataset shards that live on a cudafs mount,
each read with cudafs.map: the shard is already in GPU memory, so a batch
never crosses PCIe and no loader process copies it.

Each shard is a file of fixed-size records (here float32: FEATURES inputs
and one target); a real dataset would keep tokens or images the same way.
--make-data first writes small synthetic shards (a noisy linear function):

    python3 docs/examples/train_from_shards.py --mount /mnt/gpu --make-data

Needs PyTorch (`pip install torch`).
"""

import argparse
import glob
import os
import sys
import time

try:
    import torch
except ImportError:  # said in main(), after --help
    torch = None

import cudafs

FEATURES = 64
RECORD = FEATURES + 1  # float32 values per record: the inputs, then the target


def make_shards(folder, shards, records):
    os.makedirs(folder, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    weights = torch.randn(FEATURES, 1, generator=generator)
    for i in range(shards):
        inputs = torch.randn(records, FEATURES, generator=generator)
        targets = inputs @ weights + 0.01 * torch.randn(records, 1, generator=generator)
        with open(os.path.join(folder, "shard-%05d.bin" % i), "wb") as f:
            f.write(torch.cat([inputs, targets], dim=1).numpy().tobytes())


def batches(path, batch_size, device):
    """The shard's records in shuffled batches of (inputs, targets), on
    `device`, without reading the file through the host."""
    mapping = cudafs.map(path)  # a private copy, made inside the GPU
    try:
        if mapping.is_cuda:
            raw = torch.as_tensor(mapping, device="cuda:%d" % mapping.device)
        else:  # a host-backed mount: host memory, copied to the device here
            raw = torch.frombuffer(mapping, dtype=torch.uint8)
        records = raw.view(torch.float32).view(-1, RECORD).to(device)
        for rows in torch.randperm(len(records), device=device).split(batch_size):
            batch = records[rows]  # indexing copies: the batch is the model's own
            yield batch[:, :FEATURES], batch[:, FEATURES:]
    finally:
        # Nothing may touch the mapping's memory once it is unmapped: wait
        # for the kernels that read it, and drop the views of it first.
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        raw = records = None
        mapping.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mount", required=True, help="the cudafs mount point, e.g. /mnt/gpu")
    parser.add_argument("--data", default="cudafs-example-shards",
                        help="the shards' folder under the mount (shard-*.bin)")
    parser.add_argument("--make-data", action="store_true",
                        help="first write synthetic shards there")
    parser.add_argument("--shards", type=int, default=8, help="shards --make-data writes")
    parser.add_argument("--records", type=int, default=65536, help="records per shard")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    if torch is None:
        sys.exit("train_from_shards.py needs PyTorch (pip install torch)")
    folder = os.path.join(args.mount, args.data)
    if args.make_data:
        make_shards(folder, args.shards, args.records)
    shards = sorted(glob.glob(os.path.join(folder, "shard-*.bin")))
    if not shards:
        sys.exit("no shard-*.bin in %s (pass --make-data)" % folder)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(FEATURES, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    started = time.monotonic()
    losses = []
    for epoch in range(args.epochs):
        total, count = torch.zeros((), device=device), 0
        for shard in shards:
            for inputs, targets in batches(shard, args.batch_size, device):
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.detach()
                count += 1
        losses.append(total.item() / count)
        print("epoch %d: mean loss %.4f" % (epoch, losses[-1]))

    size = sum(os.path.getsize(shard) for shard in shards)
    print("trained %d epochs over %d shards (%.1f MiB) from %s on %s: loss %.4f -> %.4f in %.1f s"
          % (args.epochs, len(shards), size / 2**20, folder, device, losses[0], losses[-1],
             time.monotonic() - started))
    if args.make_data and not losses[-1] < losses[0] / 10:
        sys.exit("the loss did not fall on the synthetic data")


if __name__ == "__main__":
    main()
