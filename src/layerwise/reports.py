"""Results files: atomic JSON/markdown/bytes writes, the run's provenance, and plots."""

from __future__ import annotations

import ast
import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from layerwise._version import __version__
from layerwise.files import write_atomic
from layerwise.outputs import claim

__all__ = ["INT8_DOT_FLAGS", "INT8_ISA_FLAGS", "changed_files", "changed_since", "code_form", "code_revision", "command_line", "cpu_facts", "environment", "fmt", "fmt_git", "git_state", "plot_lines", "plot_per_layer",
           "run_section", "sample_std", "save_figure", "source_revision", "source_root", "write_bytes", "write_json",
           "write_text"]

SOURCE_COMMIT_ENV = "LAYERWISE_SOURCE_COMMIT"  # the commit of a copy of the sources without git (declared, unchecked)


def environment(command: list[str] | None = None) -> dict:
    """Date, machine, library versions, the source revision and the command line: recorded in every results file.

    ``versions`` names every library whose code can change a number: scikit-learn (transfer classifiers) and
    faiss (retrieval) as ``None`` when not installed. ``source`` is the git commit of the checkout the package
    runs from (``None`` for an installed copy), with ``dirty`` when tracked files differ from it.
    """
    import scipy
    import sklearn
    import torch
    import transformers

    cmd = command if command is not None else sys.argv
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": shlex.join(["layerwise", *cmd[1:]] if cmd and cmd[0].endswith("layerwise") else cmd),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            **cpu_facts(),
        },
        "versions": {
            "layerwise": __version__,
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__,
            "faiss": _optional_version("faiss"),
            # the int8 backends' numbers depend on these (and on the CPU's int8 instructions, under "machine")
            **{name: _optional_version(name) for name in ("onnx", "onnxruntime", "openvino", "nncf")},
        },
        "source": source_revision(),
    }


#: The x86 instruction sets that decide how int8 matrix products run. Without one of :data:`INT8_DOT_FLAGS` (VNNI
#: or AMX), onnxruntime's u8 x s8 kernels add pairs of products in 16 bits and can saturate (all-mpnet-base-v2's ONNX
#: int8 graph: STS-B dev Spearman 12.4 on an AVX2-only CPU, 88.8 on the CPU of the earlier runs).
INT8_ISA_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """``cpu_model``, ``cpu_family_model`` ("family/model", e.g. "26/2": a virtual machine's model name may be
    only "AMD EPYC", which two CPU generations share, and their speed-ups differ) and ``int8_isa`` (which of
    :data:`INT8_ISA_FLAGS` the CPU has), read from ``/proc/cpuinfo`` (or the text ``cpuinfo``); ``None`` where
    it cannot be read (not Linux) or does not say."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return {"cpu_model": None, "cpu_family_model": None, "int8_isa": None}
    fields = dict(line.split(":", 1) for line in cpuinfo.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    family, model = fields.get("cpu family"), fields.get("model")
    return {"cpu_model": fields.get("model name"), "cpu_family_model": f"{family}/{model}" if family and model else None,
            "int8_isa": [f for f in INT8_ISA_FLAGS if f in flags]}


def _optional_version(module: str) -> str | None:
    from importlib import metadata

    for dist in (f"{module}-cpu", f"{module}-gpu", module):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def source_revision() -> dict | None:
    """``{"commit", "dirty"}`` of the git checkout holding this package's sources; ``None`` when not a checkout.

    Only a checkout whose ``src/layerwise`` is this package counts, so an installed copy inside some other
    repository reports ``None`` rather than that repository's commit. ``dirty``: :func:`git_state` (its defaults)
    finds a file under ``src/`` that differs from the commit or is new there (untracked and not ignored: a module a
    run may import). Nothing else in the checkout is code a run executes: an edited test, README or Makefile, or the
    pages and parts that results runs write, do not make a run dirty, so a results run beside other work still
    records a clean commit.
    """
    root = source_root()
    if root is None:
        declared = os.environ.get(SOURCE_COMMIT_ENV)
        return {"commit": declared, "dirty": False, "declared": SOURCE_COMMIT_ENV} if declared else None
    state = git_state(root)
    return None if state is None else {"commit": state["commit"], "dirty": bool(state["src_changes"])}


def code_revision() -> dict:
    """The code that computes something now, for the record of what it computed: ``{"layerwise": version}`` and,
    run from a checkout (or a declared copy), the :func:`source_revision` ``commit`` and ``dirty``. A result read
    back later, from a work folder, says which code computed it, not which code read it."""
    return {"layerwise": __version__, **(source_revision() or {})}


def source_root() -> Path | None:
    """The git checkout whose ``src/layerwise`` is this package; ``None`` for an installed copy."""
    package = Path(__file__).resolve().parent
    root = package.parent.parent
    return root if package == root / "src" / "layerwise" and (root / ".git").exists() else None


def changed_since(commit: str, paths: Sequence[str], root: str | os.PathLike) -> bool | None:
    """Whether any of ``paths`` (relative to the checkout ``root``) differs now from ``commit``: committed or not
    (a path added or removed since counts). ``None`` when it cannot be told: no git, not a checkout, or a commit this
    checkout does not hold."""
    files = changed_files(commit, paths, root)
    return None if files is None else bool(files)


def changed_files(commit: str, paths: Sequence[str], root: str | os.PathLike) -> list[str] | None:
    """The files under ``paths`` whose code differs now from ``commit`` (``git diff --name-only COMMIT -- PATHS``,
    relative to the checkout ``root``), or ``None`` when it cannot be told (as :func:`changed_since`). A Python file
    whose change is only comments, docstrings or layout is left out (:func:`code_form` the same on both sides): no
    number depends on them. Any other change counts, an error message's wording or a file added or removed too."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)

    try:
        if git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            return None
        done = git("diff", "--name-only", commit, "--", *paths)
        if done.returncode != 0:
            return None
        return [path for path in done.stdout.splitlines() if not _same_code(git(
            "show", f"{commit}:{path}"), Path(root, path))]
    except (OSError, subprocess.SubprocessError):
        return None


def code_form(source: str) -> str:
    """The code of a Python module without its comments, docstrings and layout: the ``ast.dump`` of its syntax tree
    with every statement that is a bare string (a docstring, or a string standing alone) removed. Two sources with the
    same form run the same (only ``__doc__`` can differ). Raises ``SyntaxError`` where the source does not parse."""

    class _Strip(ast.NodeTransformer):
        def visit_Expr(self, node: ast.Expr) -> ast.Expr | None:
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return None
            return node

    return ast.dump(_Strip().visit(ast.parse(source)))


def _same_code(old: subprocess.CompletedProcess, new: Path) -> bool:
    """Whether a Python file ``git show`` read at a commit (``old``) holds the same :func:`code_form` as ``new`` now;
    False for any other file, one added or removed since, or a source that does not parse."""
    if new.suffix != ".py" or old.returncode != 0 or not new.is_file():
        return False
    try:
        return code_form(old.stdout) == code_form(new.read_text(encoding="utf-8"))
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return False


def git_state(folder: str | os.PathLike = ".", *, under: str | None = "src", untracked: bool = True) -> dict | None:
    """``{"commit", "src_changes"}``: the commit of the git checkout holding ``folder`` and the ``git status
    --porcelain`` lines of the files under ``under`` (relative to ``folder``; None: the whole checkout) that differ
    from it, untracked files included when ``untracked``. None outside a git checkout or without git."""

    def run(*args: str) -> str:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=10,
                              check=True).stdout

    status = ["status", "--porcelain"] + ([] if untracked else ["--untracked-files=no"])
    try:
        head = run("rev-parse", "HEAD").strip()
        changed = run(*status, *([] if under is None else ["--", under])).splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "src_changes": [line.strip() for line in changed]}


def fmt_git(state: dict | None) -> str:
    if state is None:
        return "not a git checkout"
    changes = "; uncommitted changes under src/: " + ", ".join(state["src_changes"]) if state["src_changes"] else ""
    return f"git commit `{state['commit'][:12]}`" + (changes or ", src/ unmodified")


def command_line() -> list[str]:
    """The command as typed, interpreter included (relative to the working folder when inside it)."""
    exe = Path(sys.executable)
    try:
        exe = exe.relative_to(Path.cwd())
    except ValueError:
        pass
    return [str(exe), *sys.argv]


def run_section(env: dict, params: dict, total_seconds: float, extra: Sequence[str] = ()) -> list[str]:
    """The "## Run" block of a results file: command, date, machine, load, versions, source, parameters.

    ``env`` is :func:`environment` with ``machine.load_average_start``/``load_average_end`` and ``git`` added."""
    m = env["machine"]
    load = lambda avg: ", ".join(f"{x:.2f}" for x in avg)  # noqa: E731
    return [
        "## Run", "", "```", env["command"], "```", "",
        f"- Date: {env['date']}",
        f"- Machine: {m['platform']} ({m['processor']}), {m['cpu_count']} CPUs, torch threads {m['torch_threads']}",
        f"- Load average (1, 5, 15 min; other processes share the machine): {load(m['load_average_start'])} at the "
        f"start, {load(m['load_average_end'])} at the end",
        "- Versions: " + ", ".join(f"{k} {val}" for k, val in env["versions"].items()),
        f"- Source: {fmt_git(env.get('git'))}",
        "- Parameters: " + ", ".join(f"`{k}={val}`" for k, val in params.items()),
        *extra,
        f"- Total wall time of the script: {total_seconds:.0f} s.",
        "",
    ]


def _atomic_write(path: Path, data: bytes) -> None:
    """Every results write: atomic (``files.write_atomic``), and claimed in the output folder's manifest when the
    command guards that folder (``outputs.guarded``: a file the tool did not write there is never replaced)."""
    with claim(path, data):
        write_atomic(path, data)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, float) and not np.isfinite(obj):
        return None  # strict JSON has no NaN/Infinity (e.g. CLS of hidden state 0: constant, undefined)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | os.PathLike, obj) -> Path:
    """Write ``obj`` as indented JSON, atomically (a temp file renamed into place)."""
    path = Path(path)
    _atomic_write(path, (json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n").encode())
    return path


def write_text(path: str | os.PathLike, text: str) -> Path:
    return write_bytes(path, text.encode())


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` atomically: a hidden ``.NAME.*.tmp`` sibling, fsynced, then renamed onto ``path``."""
    path = Path(path)
    _atomic_write(path, data)
    return path


def sample_std(values) -> float | None:
    """The spread every results page prints: the sample standard deviation (ddof 1) of the finite ``values``;
    ``None`` (no spread) for fewer than two."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(v.std(ddof=1)) if len(v) > 1 else None


def fmt(mean: float, std: float | None = None) -> str:
    """``71.23 ± 0.45`` (scores are already x100)."""
    if std is None:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {std:.2f}"


def plot_per_layer(
    per_layer: dict[str, list[float]],
    path: str | os.PathLike,
    *,
    title: str,
    chosen: dict[int, int] | None = None,
    baselines: dict[str, float] | None = None,
) -> Path:
    """Line plot of per-hidden-state Spearman (x100) for each pooling kind.

    ``chosen`` maps hidden state -> how many splits chose it (drawn as markers and counts);
    ``baselines`` adds horizontal reference lines (e.g. the LC test mean).
    """
    path = Path(path)
    fig, ax = _figure()
    for kind, vals in per_layer.items():
        ax.plot(range(len(vals)), vals, marker="o", label=f"{kind} of hidden state l")
    if chosen:
        first = next(iter(per_layer.values()))
        for l, count in sorted(chosen.items()):
            ax.scatter([l], [first[l]], s=160, facecolors="none", edgecolors="red", linewidths=2, zorder=5)
            ax.annotate(f"{count}x", (l, first[l]), textcoords="offset points", xytext=(0, 10),
                        ha="center", color="red", fontsize=8)
        ax.scatter([], [], s=160, facecolors="none", edgecolors="red", linewidths=2,
                   label="chosen by LC (splits)")
    for name, val in (baselines or {}).items():
        ax.axhline(val, linestyle="--", linewidth=1, label=f"{name} = {val:.2f}", color="grey" if name != "lc" else "red")
    n = len(next(iter(per_layer.values())))
    ax.set_xticks(range(n))
    ax.set_xlabel("hidden state (0 = embedding output)")
    ax.set_ylabel("Spearman x 100")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return save_figure(fig, path)


def plot_lines(
    series: dict[str, tuple[Sequence[float], Sequence[float], Sequence[float] | None]],
    path: str | os.PathLike,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    xticks: Sequence[float] | dict[float, str] | None = None,
    log2_x: bool = False,
    zero_line: bool = False,
) -> Path:
    """One line per series ``label -> (x, y, yerr or None)`` with error bands; written atomically as PNG.

    ``xticks``: tick positions, or position -> label."""
    path = Path(path)
    fig, ax = _figure()
    for label, (x, y, err) in series.items():
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        style = "--" if "last" in label and "LC" not in label else "-"
        line = ax.plot(x, y, style, marker="o", markersize=4, label=label)[0]
        if err is not None:
            e = np.asarray(err, dtype=float)
            ax.fill_between(x, y - e, y + e, alpha=0.15, color=line.get_color())
    if log2_x:
        ax.set_xscale("log", base=2)
    if xticks is not None:
        ax.set_xticks(list(xticks))
        if isinstance(xticks, dict):
            ax.set_xticklabels(list(xticks.values()))
    if zero_line:
        ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best", ncol=2 if len(series) > 6 else 1)
    return save_figure(fig, path)


def _figure():
    """A matplotlib Figure and its axes, made without pyplot (no global backend or figure registry touched)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4), dpi=120)
    return fig, fig.subplots()


def save_figure(fig, path: str | os.PathLike, *, tight: bool = True) -> Path:
    """Write a matplotlib ``Figure`` as PNG atomically: rendered in memory, then written by :func:`write_bytes`'s
    temporary file and rename (a cut-off run never leaves half a file)."""
    import io

    if tight:
        fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    path = Path(path)
    _atomic_write(path, buf.getvalue())
    return path
