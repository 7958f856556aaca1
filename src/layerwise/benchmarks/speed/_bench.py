"""Helpers shared by the benchmark scripts (run each as ``python -m layerwise.benchmarks.speed.bench_...``)."""

from __future__ import annotations

import os
from pathlib import Path

from layerwise.outputs import check_outputs, guarded
from layerwise.reports import command_line, environment, git_state, write_json, write_text

REPO = Path(__file__).resolve().parents[4]  # src/layerwise/benchmarks/speed/_bench.py -> the checkout


def pass_fail(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def output_names(output: Path) -> tuple[str, str]:
    """The two files a benchmark writes: the markdown ``output`` and the JSON beside it."""
    return Path(output).name, Path(output).with_suffix(".json").name


def check_output(output: Path) -> None:
    """Refuse, before measuring, an ``output`` (or its JSON) that layerwise did not write (see layerwise.outputs)."""
    check_outputs(Path(output).parent, output_names(output))


def write_outputs(result: dict, output: Path, render) -> None:
    """Record the load average at the end, write ``output`` (markdown by ``render``) and the JSON beside it, both
    listed in the folder's manifest (a file of those names that layerwise did not write is never replaced)."""
    result["environment"]["machine"]["load_average_end"] = list(os.getloadavg())
    with guarded(Path(output).parent):
        md = write_text(output, render(result))
        js = write_json(Path(output).with_suffix(".json"), result)
    print(f"wrote {md} and {js}")


def start_environment(output: Path | None = None) -> dict:
    """The run's environment at its start: command, machine (torch threads, load average), versions, git state.
    ``output`` (the markdown file the run will write) is checked first (:func:`check_output`)."""
    import torch

    if output is not None:
        check_output(output)

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
