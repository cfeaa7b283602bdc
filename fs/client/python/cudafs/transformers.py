"""Hugging Face transformers models whose safetensors files live on a
cudafs mount (a model saved there, or HF_HOME=/mnt/gpu/hf), with the
weights mapped from the files' GPU memory instead of read through FUSE.

    import cudafs.transformers
    model = cudafs.transformers.from_pretrained("/mnt/gpu/hf/my-llama")
    model = cudafs.transformers.from_pretrained("meta-llama/Llama-3.1-8B")

It is transformers' own from_pretrained, given the folder's tensors as its
state_dict: transformers still reads the config, builds the model, renames
keys, ties weights and checks what is missing, exactly as it would from the
files, so a model loads here as it loads there; only the bytes come from
cudafs.load_safetensors. Needs PyTorch and transformers.
"""

from __future__ import annotations

import glob
import json
import os
from typing import TYPE_CHECKING, Any, Dict, List

import cudafs

if TYPE_CHECKING:
    import torch

__all__ = ["from_pretrained", "load_state_dict"]


def _folder(name_or_path: cudafs.PathLike) -> str:
    """The local folder of a model: the path given, or the snapshot of a
    Hugging Face repository id in the cache (HF_HOME), downloaded there
    first if it is not yet."""
    path = os.fsdecode(name_or_path)
    if os.path.isdir(path):
        return path
    import huggingface_hub  # transformers depends on it

    return huggingface_hub.snapshot_download(path, allow_patterns=["*.json", "*.safetensors",
                                                                    "*.model", "*.txt"])


def _shards(folder: str) -> List[str]:
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        return [os.path.join(folder, name) for name in names]
    return sorted(glob.glob(os.path.join(folder, "*.safetensors")))


def load_state_dict(name_or_path: cudafs.PathLike,
                    writable: bool = False) -> Dict[str, torch.Tensor]:
    """Every tensor of a model folder's safetensors files (the shards its
    index names, or every *.safetensors), each viewing a mapping of its
    file where the file is (see cudafs.load_safetensors: a private copy
    made in GPU memory, or with writable=True the file's own memory; host
    memory on a host-backed mount). Raises FileNotFoundError for a folder
    with none."""
    folder = _folder(name_or_path)
    shards = _shards(folder)
    if not shards:
        raise FileNotFoundError("no *.safetensors in %s" % folder)
    state: Dict[str, torch.Tensor] = {}
    for shard in shards:
        state.update(cudafs.load_safetensors(shard, device=None, writable=writable))
    return state


def from_pretrained(name_or_path: cudafs.PathLike, *, model_class: Any = None,
                    writable: bool = False, **kwargs: Any) -> Any:
    """model_class.from_pretrained(None, config=, state_dict=, **kwargs)
    with the state_dict of load_state_dict(name_or_path, writable);
    model_class defaults to the class the config names (architectures),
    config to the folder's. device_map defaults to the GPU holding the
    first tensor, where the weights already are, so that transformers
    keeps them there instead of copying them."""
    import transformers

    folder = _folder(name_or_path)
    # transformers 5 takes a state_dict only without a model name, and then
    # not through its Auto classes: the folder's config and the class it
    # names (save_pretrained writes it), and its generation settings after.
    config = kwargs.pop("config", None) or transformers.AutoConfig.from_pretrained(folder)
    if model_class is None:
        architectures = getattr(config, "architectures", None) or [""]
        model_class = getattr(transformers, architectures[0], None)
        if model_class is None:
            raise ValueError("%s/config.json names no transformers model class "
                             "(architectures): pass model_class=" % folder)
    state = load_state_dict(folder, writable=writable)
    kwargs.setdefault("device_map", str(next(iter(state.values())).device))
    model = model_class.from_pretrained(None, config=config, state_dict=state, **kwargs)
    if os.path.exists(os.path.join(folder, "generation_config.json")):
        model.generation_config = transformers.GenerationConfig.from_pretrained(folder)
    return model
