"""Options shared by several commands: the encoder, the data folder, the output folder."""

from __future__ import annotations

import argparse

from layerwise.cli._option_types import max_length, positive_int
from layerwise.data.sts import STS_DATASETS
from layerwise.encoders.onnx_backend import BACKENDS
from layerwise.encoders.registry import BUILTIN_MODELS, DEFAULT_MODEL
from layerwise.evaluation.metrics import AGGREGATIONS

__all__ = ["STS_CHOICES", "add_backend_option", "add_common", "add_encoder_options", "add_training_tail",
           "encoder_options"]

STS_CHOICES = list(STS_DATASETS)


def add_common(p: argparse.ArgumentParser) -> None:
    add_encoder_options(p)
    add_backend_option(p)
    p.add_argument("--dataset", default=None, choices=STS_CHOICES,
                   help="built-in STS data set (default: stsb, unless your own pairs are given with --pairs or "
                        "--dev/--test)")
    p.add_argument("--split", default=None,
                   help="which pairs: stsb train/dev/test/all (default test); sickr test/train/trial/all "
                        "(default test, the SemEval-2014 4927 pairs); STS12-16 are test only")


def add_encoder_options(p: argparse.ArgumentParser, *, aggregation: bool = True) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"built-in name ({', '.join(BUILTIN_MODELS)}) or a local Hugging Face folder "
                        f"(default: {DEFAULT_MODEL})")
    p.add_argument("--data-dir", default=None,
                   help="data folder holding sts/, senteval/, nli/, unlabeled/ (default: $LAYERWISE_DATA; "
                        "STS-B is built in)")
    if aggregation:
        p.add_argument("--aggregation", default="all", choices=AGGREGATIONS,
                       help="how STS12-16 subsets are combined: all pairs at once (all), size-weighted (wmean) "
                            "or plain mean (mean) of per-subset Spearman (default: all)")
    p.add_argument("--output", default="runs", help="folder for results JSON, markdown and plot (default: runs)")
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--max-length", type=max_length, default=256)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--cache-dir", default=None, help="layer-stack cache (default: $LAYERWISE_HOME/cache)")
    p.add_argument("--no-cache", action="store_true", help="encode everything, read and write no cache")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")


def add_backend_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="torch", choices=list(BACKENDS),
                   help="what encodes every hidden state: the torch model (default), or its ONNX graph through "
                        "onnxruntime in float32 (onnx) or with int8 weights (onnx-int8), or through OpenVINO in "
                        "float32 (openvino); exported once per model, CPU only (pip install 'layerwise[onnx]', "
                        "'layerwise[openvino]')")


def add_training_tail(p: argparse.ArgumentParser) -> None:
    """``--device`` (where a training command trains, DDP-aware) and ``-q``: the last options of tmft and multitask."""
    p.add_argument("--device", default="cpu",
                   help="where the model trains: cpu (default), cuda, cuda:N; under torchrun, cuda gives each process "
                        "its LOCAL_RANK GPU (NCCL)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars, only the results")


def encoder_options(args) -> dict:
    return {
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "device": args.device,
        "dtype": args.dtype,
        "cache_dir": False if args.no_cache else args.cache_dir,
        **({"backend": args.backend} if hasattr(args, "backend") else {}),
    }

