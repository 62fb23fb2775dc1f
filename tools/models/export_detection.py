#!/usr/bin/python3
"""torchvision's detection models, exported for the per-input planning path (issue 21).

    /usr/bin/python3 tools/models/export_detection.py --out DIR [--only a,b] [--size 320]

Writes DIR/<model>/model.onnx (opset 17, one input "input" of [3, SIZE, SIZE]), input.npy (one
random image) and ref_<output>.npy (PyTorch's boxes, labels, scores, and masks or keypoints where
the model has them) for each model. Random weights (normal, 0.05) with BatchNorm statistics of
zero mean and unit variance, seeded, so that a run is repeatable; such weights make many scores
tie or nearly tie, so compare detections by label, score and box rather than by position.

NonMaxSuppression makes every one of these models keyed by all its input values: each new input
is planned and its graph computed while planning (docs/development.md, "Output sizes that
follow values"). The files are 14-237 MB, so they are not part of the zoo or of CI.
"""
import argparse
import os

MODELS = [
    "ssdlite320_mobilenet_v3_large",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "retinanet_resnet50_fpn",
    "fcos_resnet50_fpn",
    "fasterrcnn_resnet50_fpn",
    "maskrcnn_resnet50_fpn",
    "keypointrcnn_resnet50_fpn",
]


def export(name, out_dir, size):
    import numpy as np
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models.detection, name)(weights=None,
                                                        weights_backbone=None).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.05)
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.fill_(1.0)
                m.running_mean.zero_()
    x = torch.rand(3, size, size)
    with torch.no_grad():
        ref = model([x])[0]
    folder = os.path.join(out_dir, name)
    os.makedirs(folder, exist_ok=True)
    torch.onnx.export(model, ([x],), os.path.join(folder, "model.onnx"), opset_version=17,
                      input_names=["input"])
    np.save(os.path.join(folder, "input.npy"), x.numpy())
    for key, value in ref.items():
        np.save(os.path.join(folder, f"ref_{key}.npy"), value.numpy())
    print(name, "exported", {k: tuple(v.shape) for k, v in ref.items()}, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--size", type=int, default=320)
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or MODELS
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {MODELS}")
    for name in names:
        export(name, args.out, args.size)


if __name__ == "__main__":
    main()
