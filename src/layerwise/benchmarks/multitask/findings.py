"""Which of the report's findings hold here: each one a comparison of two stored experiments, judged from the numbers.

A :class:`Claim` names the experiment that carries an idea of the report (Lee, "BERTology", CS224N), the experiment
it changes, and the scores the idea is meant to raise. :func:`judge` reads the stored runs and says, per claim,
whether the change raised those scores on test (the checkpoint was chosen on dev), by how much, and whether the
difference is larger than the seed-to-seed spread of that score measured here (the largest sample std over seeds
among the experiments that have several seeds). With a single seed per experiment and no spread measured, a difference is
reported as measured and marked "one seed".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CLAIMS", "Claim", "Verdict", "best_by_dev", "judge", "layer_centres", "mean_dev", "noise_level"]


@dataclass(frozen=True)
class Claim:
    idea: str  # the report's idea, in words
    experiment: str  # the run that carries it
    reference: str  # the run it changes
    scores: tuple[str, ...]  # what it should raise (TaskScores keys); "overall" always judged too


CLAIMS = (
    Claim("sharing two hidden layers between the related PARA and STS heads", "SHARED", "BASELINE",
          ("para_acc", "sts_pearson")),
    Claim("a cosine STS head and [u, v, |u - v|] PARA features", "STS_PARA_HEAD_MOD", "BASELINE",
          ("sts_pearson", "para_acc")),
    Claim("cos(u, v) instead of |u - v| in the PARA features", "STS_PARA_HEAD_MOD_1", "STS_PARA_HEAD_MOD",
          ("para_acc",)),
    Claim("training SST last, on the frozen encoder, with a larger head", "FREEZE_SST", "BASELINE", ("sst_acc",)),
    Claim("an SST head on the similarities to 500 labelled prototype sentences", "SST_TO_STS", "BASELINE",
          ("sst_acc",)),
    Claim("NLI pre-finetuning, regression objective", "NLI_REGRESSION", "STS_PARA_HEAD_MOD", ("sts_pearson",)),
    Claim("NLI pre-finetuning, contrastive objective (in-batch + hard negatives)", "NLI_CONTRASTIVE",
          "STS_PARA_HEAD_MOD", ("sts_pearson",)),
    Claim("NLI pre-finetuning, triplet objective (the report's best)", "NLI_TRIPLET", "STS_PARA_HEAD_MOD",
          ("sts_pearson",)),
    Claim("each head reading its own learned mix of all layers (beyond the report)", "BASELINE+MIX", "BASELINE",
          ("sst_acc", "para_acc", "sts_pearson")),
    Claim("each head reading its own learned mix of all layers (beyond the report)", "STS_PARA_HEAD_MOD+MIX",
          "STS_PARA_HEAD_MOD", ("sst_acc", "para_acc", "sts_pearson")),
    Claim("each head reading its own learned mix of all layers (beyond the report)", "NLI_TRIPLET+MIX",
          "NLI_TRIPLET", ("sst_acc", "para_acc", "sts_pearson")),
    Claim("each head reading a layer subset chosen on the frozen encoder (beyond the report)", "BASELINE+SUBSET",
          "BASELINE", ("sst_acc", "para_acc", "sts_pearson")),
    Claim("each head reading a layer subset chosen on the frozen encoder (beyond the report)",
          "STS_PARA_HEAD_MOD+SUBSET", "STS_PARA_HEAD_MOD", ("sst_acc", "para_acc", "sts_pearson")),
    # the report's own protocol where this library's default differs (PageConfig.paper_protocols)
    Claim("the report's protocol: the SST prototype head trained on an encoder frozen after PARA and STS (this "
          "library: the encoder trains throughout)", "SST_TO_STS+FROZEN", "SST_TO_STS", ("sst_acc",)),
    Claim("the report's protocol: the NLI contrastive loss at temperature 1.0, Eq. 3 as written (this library: "
          "0.05)", "NLI_CONTRASTIVE+TAU1", "NLI_CONTRASTIVE", ("sts_pearson",)),
    Claim("the report's protocol: FREEZE_SST on the cosine STS head and [u, v, |u - v|] PARA features (this library's "
          "FREEZE_SST keeps BASELINE's linear STS head)", "FREEZE_SST+HEADMOD", "FREEZE_SST", ("sts_pearson",)),
    Claim("training SST last, on the frozen encoder, with a larger head, on the cosine STS head and [u, v, |u - v|] "
          "PARA features", "FREEZE_SST+HEADMOD", "STS_PARA_HEAD_MOD", ("sst_acc",)),
)


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    differences: dict[str, float]  # score -> test mean(experiment) - test mean(reference), overall included
    seeds: tuple[int, int]  # seeds of (experiment, reference)
    noise: dict[str, float] | None  # score -> the seed spread its difference is read against (None: not measured)

    @property
    def word(self) -> str:
        """"holds", "does not hold", "mixed" or "within the seed spread"."""
        d = [self.differences[s] for s in self.claim.scores]
        if self.noise is not None and all(abs(self.differences[s]) <= self.noise[s] for s in self.claim.scores):
            return "within the seed spread"
        if all(x > 0 for x in d):
            return "holds"
        if all(x <= 0 for x in d):
            return "does not hold"
        return "mixed"


def noise_level(runs_by_name: dict[str, list]) -> dict[str, float] | None:
    """score -> the largest sample std of its test value over seeds, among experiments with 2+ seeds (None: none)."""
    several = [runs for runs in runs_by_name.values() if len(runs) > 1]
    if not several:
        return None
    keys = several[0][0].test.to_dict()
    return {k: max(float(np.std([r.test.to_dict()[k] for r in runs], ddof=1)) for runs in several) for k in keys}


def judge(runs_by_name: dict[str, list], claims=CLAIMS) -> list[Verdict]:
    """A :class:`Verdict` for every claim whose two experiments are both stored (test scores, mean over seeds)."""
    noise = noise_level(runs_by_name)
    out = []
    for c in claims:
        a, b = runs_by_name.get(c.experiment), runs_by_name.get(c.reference)
        if not a or not b:
            continue
        mean = lambda runs, s: float(np.mean([r.test.to_dict()[s] for r in runs]))  # noqa: E731
        diffs = {s: mean(a, s) - mean(b, s) for s in dict.fromkeys((*c.scores, "overall"))}
        out.append(Verdict(c, diffs, (len(a), len(b)), noise))
    return out


def mean_dev(runs: list, seeds=None) -> float:
    """Mean dev overall score of ``runs`` (only those at ``seeds`` when given)."""
    return float(np.mean([r.dev.overall for r in runs if seeds is None or r.seed in seeds]))


def best_by_dev(runs_by_name: dict[str, list], seeds=None) -> str:
    """The experiment with the best :func:`mean_dev` (over ``seeds`` when given; first listed on a tie)."""
    return max(runs_by_name, key=lambda n: mean_dev(runs_by_name[n], seeds))


def layer_centres(weights: dict[str, list[float]]) -> dict[str, float]:
    """task -> the weighted mean hidden-state index of its softmax layer weights (where the task reads from)."""
    return {task: float(np.dot(np.arange(len(w)), np.asarray(w, dtype=float) / np.sum(w))) for task, w in weights.items()}
