#!/usr/bin/python3
"""A few seconds' check of export_broad_zoo.py (run by hand; not registered in CMake):

    /usr/bin/python3 tools/models/export_broad_zoo_test.py

--list names every model once; one tiny model (residual_mlp64) exports with the zoo's
conventions (input `input`, output `output`, batch axis `batch`, opset 17, reference files
that PyTorch's output matches); a second run keeps the current export; an unknown name is a
usage error. Skips when PyTorch or onnx is missing.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORTER = os.path.join(HERE, "export_broad_zoo.py")


def run(*args):
    return subprocess.run(["/usr/bin/python3", EXPORTER] + list(args), capture_output=True,
                          text=True, timeout=300)


class ExportBroadZooTest(unittest.TestCase):
    def test_list_names_every_model_once(self):
        r = run("--list")
        self.assertEqual(r.returncode, 0, r.stderr)
        names = [line.split()[0] for line in r.stdout.splitlines()]
        self.assertEqual(len(names), len(set(names)))
        for expected in ("resnet18", "fcn_resnet50", "transformer_causal_d256", "lstm_tagger",
                         "residual_mlp64"):
            self.assertIn(expected, names)

    def test_unknown_model_is_a_usage_error(self):
        with tempfile.TemporaryDirectory() as out:
            r = run("--out", out, "--only", "no_such_model")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no_such_model", r.stderr)

    def test_exports_one_tiny_model_and_keeps_it(self):
        if importlib.util.find_spec("torch") is None or importlib.util.find_spec("onnx") is None:
            self.skipTest("needs PyTorch and onnx")
        import numpy as np
        import onnx
        with tempfile.TemporaryDirectory() as out:
            r = run("--out", out, "--only", "residual_mlp64")
            self.assertEqual(r.returncode, 0, r.stderr)
            folder = os.path.join(out, "residual_mlp64")
            model = onnx.load(os.path.join(folder, "model.onnx"))
            onnx.checker.check_model(model)
            self.assertEqual(model.opset_import[0].version, 17)
            self.assertEqual([i.name for i in model.graph.input], ["input"])
            self.assertEqual([o.name for o in model.graph.output], ["output"])
            for value in (model.graph.input[0], model.graph.output[0]):
                dims = value.type.tensor_type.shape.dim
                self.assertEqual(dims[0].dim_param, "batch")
                self.assertEqual(dims[1].dim_value, 64)
            self.assertEqual(sum(n.op_type == "Gemm" for n in model.graph.node), 64)
            x = np.load(os.path.join(folder, "input_b1.npy"))
            y = np.load(os.path.join(folder, "output_b1.npy"))
            self.assertEqual(x.shape, (1, 64))
            self.assertEqual(y.shape, (1, 64))
            self.assertGreater(float(np.abs(y - x).max()), 1e-3)  # the blocks did something
            mtime = os.path.getmtime(os.path.join(folder, "model.onnx"))
            r = run("--out", out, "--only", "residual_mlp64")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("residual_mlp64 is current", r.stdout)
            self.assertEqual(os.path.getmtime(os.path.join(folder, "model.onnx")), mtime)


if __name__ == "__main__":
    sys.exit(unittest.main())
