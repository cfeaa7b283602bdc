#!/usr/bin/env python3
"""cudafs.transformers without PyTorch or transformers (CI has neither):
stand-ins for transformers and huggingface_hub, and cudafs.load_safetensors
replaced by one that records the shards it maps, check what the module
itself decides: which files a folder's weights are in, which model class
loads them, and what transformers is given. The GPU run is
bench/hf_load.py (docs/MEASUREMENTS.md).

usage: transformers_test.py SOURCE_DIR
"""

import json
import os
import sys
import tempfile
import types
import unittest

sys.path.insert(0, os.path.join(sys.argv.pop(1), "fs", "client", "python"))

import cudafs  # noqa: E402
import cudafs.transformers  # noqa: E402


class Tensor:
    def __init__(self, shard, name):
        self.shard, self.name, self.device = shard, name, "cuda:1"


class FakeModel:
    calls = []

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        FakeModel.calls.append((cls, args, kwargs))
        model = cls()
        model.generation_config = None
        return model


class LlamaForCausalLM(FakeModel):
    pass


class Config:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            self.__dict__.update(json.load(f))


def fake_transformers():
    module = types.ModuleType("transformers")
    module.LlamaForCausalLM = LlamaForCausalLM
    module.AutoConfig = types.SimpleNamespace(from_pretrained=Config)
    module.GenerationConfig = types.SimpleNamespace(
        from_pretrained=lambda folder: ("generation", folder))
    return module


class TransformersTest(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()
        self.mapped = []

        def load_safetensors(path, device="cuda", writable=False):
            self.assertIsNone(device, "the tensors stay where the mount keeps them")
            self.mapped.append((os.path.basename(path), writable))
            return {os.path.basename(path) + ".weight": Tensor(path, "weight")}

        self.patches = {"load": cudafs.load_safetensors}
        cudafs.load_safetensors = load_safetensors
        self.snapshots = []
        hub = types.ModuleType("huggingface_hub")
        hub.snapshot_download = lambda repo, **kwargs: self.snapshots.append(repo) or self.folder
        sys.modules["transformers"] = fake_transformers()
        sys.modules["huggingface_hub"] = hub
        FakeModel.calls.clear()

    def tearDown(self):
        cudafs.load_safetensors = self.patches["load"]
        del sys.modules["transformers"], sys.modules["huggingface_hub"]

    def write(self, name, data=b""):
        with open(os.path.join(self.folder, name), "wb") as f:
            f.write(data if isinstance(data, bytes) else json.dumps(data).encode())

    def test_an_index_names_the_shards_each_once(self):
        self.write("model.safetensors.index.json", {"weight_map": {
            "a": "model-00002-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
            "c": "model-00002-of-00002.safetensors"}})
        for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                     "stray.safetensors"):
            self.write(name)
        state = cudafs.transformers.load_state_dict(self.folder)
        self.assertEqual(self.mapped, [("model-00001-of-00002.safetensors", False),
                                       ("model-00002-of-00002.safetensors", False)])
        self.assertEqual(len(state), 2)

    def test_without_an_index_every_safetensors_file(self):
        self.write("model.safetensors")
        self.write("config.json", {})
        cudafs.transformers.load_state_dict(self.folder, writable=True)
        self.assertEqual(self.mapped, [("model.safetensors", True)])

    def test_a_folder_without_weights_is_file_not_found(self):
        self.write("config.json", {})
        with self.assertRaises(FileNotFoundError):
            cudafs.transformers.load_state_dict(self.folder)

    def test_the_config_names_the_class_and_transformers_gets_the_state(self):
        self.write("config.json", {"architectures": ["LlamaForCausalLM"]})
        self.write("generation_config.json", {})
        self.write("model.safetensors")
        model = cudafs.transformers.from_pretrained(self.folder, dtype="bf16")
        [(cls, args, kwargs)] = FakeModel.calls
        self.assertIs(cls, LlamaForCausalLM)
        self.assertEqual(args, (None,), "transformers 5 takes a state_dict only without a name")
        self.assertEqual(kwargs["config"].architectures, ["LlamaForCausalLM"])
        self.assertEqual(list(kwargs["state_dict"]), ["model.safetensors.weight"])
        self.assertEqual(kwargs["device_map"], "cuda:1", "where the weights are")
        self.assertEqual(kwargs["dtype"], "bf16")
        self.assertEqual(model.generation_config, ("generation", self.folder))

    def test_what_the_caller_gives_wins(self):
        self.write("config.json", {})
        self.write("model.safetensors")
        config = types.SimpleNamespace(architectures=["Other"])
        cudafs.transformers.from_pretrained(self.folder, model_class=LlamaForCausalLM,
                                            config=config, device_map="cuda:0")
        [(cls, _, kwargs)] = FakeModel.calls
        self.assertIs(cls, LlamaForCausalLM)
        self.assertIs(kwargs["config"], config)
        self.assertEqual(kwargs["device_map"], "cuda:0")

    def test_a_config_naming_no_known_class_asks_for_one(self):
        self.write("config.json", {"architectures": ["NotInTransformers"]})
        self.write("model.safetensors")
        with self.assertRaisesRegex(ValueError, "model_class="):
            cudafs.transformers.from_pretrained(self.folder)
        self.assertEqual(self.mapped, [], "nothing mapped for a model that cannot load")

    def test_a_repository_id_is_its_snapshot_in_the_cache(self):
        self.write("config.json", {"architectures": ["LlamaForCausalLM"]})
        self.write("model.safetensors")
        cudafs.transformers.from_pretrained("org/model")
        self.assertEqual(self.snapshots, ["org/model"])
        self.assertEqual(self.mapped, [("model.safetensors", False)])


if __name__ == "__main__":
    unittest.main()
