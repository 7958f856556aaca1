"""Write docs/results/ablations.md (+ docs/results/ablations/*.png, *.json): the BERT-LC ablations.

(a) number of layers N, (b) excluding each hidden state — on the STS sets here and on four transfer tasks —
and (c) limited training data on MR, SUBJ and TREC (1/2 ... 1/256 of train-dev, 10 seeds), for each model in
``--models``. Parts are resumable (``runs/ablations/ablations-<model>.parts.json``).

    python scripts/ablation_results.py                 # all-MiniLM-L6-v2
    python scripts/ablation_results.py --models all-MiniLM-L6-v2 all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

from _provenance import command_line, git_state  # noqa: E402
from layerwise.methods.lc.ablation_run import render_ablation_markdown, run_ablations, write_ablation_outputs  # noqa: E402
from layerwise.data import available_sts  # noqa: E402
from layerwise.reports import write_text  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["all-MiniLM-L6-v2"])
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--tasks", nargs="+", default=["mr", "cr", "subj", "trec"])
    p.add_argument("--limited-tasks", nargs="+", default=["mr", "subj", "trec"])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--runs", default=str(REPO / "docs" / "results" / "state" / "ablations"),
                   help="finished parts (kept in the repo so that a run resumes on any machine)")
    p.add_argument("--output", default=str(REPO / "docs" / "results" / "ablations.md"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sts = [d for d in ("stsb", "sickr", "sts12", "sts13", "sts14", "sts15", "sts16") if d in available_sts(args.data_dir)]
    out = Path(args.output)
    figures = out.with_suffix("")  # docs/results/ablations/
    git = git_state()
    pages = []
    for model in args.models:
        result = run_ablations(model, sts=sts, tasks=args.tasks, limited_tasks=args.limited_tasks, n_jobs=args.jobs,
                               output=args.runs, data_dir=args.data_dir, command=command_line())
        result["git"] = git
        paths = write_ablation_outputs(result, figures)
        rel = {k: f"{figures.name}/{Path(v).name}" for k, v in paths.items() if str(v).endswith(".png")}
        pages.append(render_ablation_markdown(result, rel).replace("\n## ", "\n### ").replace("# BERT-LC", "## BERT-LC", 1))
    head = ["# BERT-LC ablations", "",
            "How many layers to combine, which layers matter, and how layer combination behaves with little "
            "training data (Hosseini et al. 2023, appendices D-E). Produced by `scripts/ablation_results.py` "
            f"(git commit `{(git or {}).get('commit', 'unknown')[:12]}`); raw numbers in `{figures.name}/*.json`.", ""]
    text = "\n".join(head) + "\n" + "\n".join(pages)
    write_text(out, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
