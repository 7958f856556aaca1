"""Helpers shared by the benchmark scripts (run each as ``python -m layerwise.benchmarks.speed.bench_...``)."""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.reports import command_line, environment, git_state, write_json, write_text

REPO = Path(__file__).resolve().parents[4]  # src/layerwise/benchmarks/speed/_bench.py -> the checkout


def pass_fail(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def write_outputs(result: dict, output: Path, render) -> None:
    """Record the load average at the end, write ``output`` (markdown by ``render``) and the JSON beside it."""
    result["environment"]["machine"]["load_average_end"] = list(os.getloadavg())
    md = write_text(output, render(result))
    js = write_json(Path(output).with_suffix(".json"), result)
    print(f"wrote {md} and {js}")


def start_environment() -> dict:
    """The run's environment at its start: command, machine (torch threads, load average), versions, git state."""
    import torch

    env = environment(command_line())
    env["machine"]["torch_threads"] = torch.get_num_threads()
    env["machine"]["load_average_start"] = list(os.getloadavg())
    env["git"] = git_state(REPO)
    return env


def finish(args, env: dict, t_start: float, render, **result) -> int:
    """Write ``result`` with the environment, the parameters (``args`` less ``output``) and the total time."""
    import time

    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "output"}
    write_outputs({"environment": env, "parameters": params, **result,
                   "total_seconds": time.perf_counter() - t_start}, args.output, render)
    return 0
