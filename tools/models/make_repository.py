#!/usr/bin/python3
"""Writes the example model repository that reprise-server serves out of the box.

    /usr/bin/python3 tools/models/make_repository.py [--out tools/models/repository]

Models (each <out>/<model>/config.yaml and <out>/<model>/1/model.onnx):
  mlp      the zoo MLP (tools/models/zoo/mlp: 64 -> 128 -> 64 -> 10, ReLU, random weights),
           max_batch_size 8, two streams (instance_group count 2); input "input" [N,64] FP32,
           output "output" [N,10] FP32. Reference pairs: tools/models/zoo/mlp/*_b{1,4}.npy.
  add_sub  two inputs "a", "b" [N,4] FP32 and two outputs "sum" = a + b, "diff" = a - b,
           max_batch_size 8, one stream.
Deterministic: running it again writes the same bytes. Needs python3-onnx (Debian).
"""
import argparse
import os
import shutil

import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))

MLP_CONFIG = """\
# The zoo MLP (tools/models/zoo/mlp), served with a batch dimension and two streams.
name: mlp
platform: onnx
max_batch_size: 8
input:
  - {name: input, data_type: TYPE_FP32, dims: [64]}
output:
  - {name: output, data_type: TYPE_FP32, dims: [10]}
instance_group:
  - {count: 2, kind: KIND_CPU}
"""

ADD_SUB_CONFIG = """\
# Two inputs, two outputs: sum = a + b, diff = a - b (element-wise).
name: add_sub
platform: onnx
max_batch_size: 8
input:
  - {name: a, data_type: TYPE_FP32, dims: [4]}
  - {name: b, data_type: TYPE_FP32, dims: [4]}
output:
  - {name: sum, data_type: TYPE_FP32, dims: [4]}
  - {name: diff, data_type: TYPE_FP32, dims: [4]}
instance_group:
  - {count: 1, kind: KIND_CPU}
"""


def add_sub_model():
    def tensor(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 4])
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"], name="add"),
         helper.make_node("Sub", ["a", "b"], ["diff"], name="sub")],
        "add_sub", [tensor("a"), tensor("b")], [tensor("sum"), tensor("diff")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="reprise make_repository.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(HERE, "repository"))
    args = parser.parse_args()

    mlp = os.path.join(args.out, "mlp")
    os.makedirs(os.path.join(mlp, "1"), exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "zoo", "mlp", "model.onnx"),
                    os.path.join(mlp, "1", "model.onnx"))
    write(os.path.join(mlp, "config.yaml"), MLP_CONFIG)

    add_sub = os.path.join(args.out, "add_sub")
    os.makedirs(os.path.join(add_sub, "1"), exist_ok=True)
    onnx.save(add_sub_model(), os.path.join(add_sub, "1", "model.onnx"))
    write(os.path.join(add_sub, "config.yaml"), ADD_SUB_CONFIG)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
