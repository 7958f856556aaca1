"""Which task and which examples each optimisation step trains on: a pure function of (seed, epoch, step).

In epoch e, task t's n_t examples are shuffled with ``default_rng([seed, i_t, e])`` (i_t the task's position) and
cut into b_t = ceil(n_t / B) batches of B (a last batch of one example is dropped, so every batch has two examples
for in-batch negatives). The epoch has sum_t b_t steps, ordered by the schedule:

    task_by_task   every batch of the first task, then every batch of the second, ... (the report)
    round_robin    one batch of each task in turn; a task that has run out is skipped
    proportional   the multiset {t repeated b_t times} shuffled with ``default_rng([seed, e, 1])``: batches of
                   each task spread over the epoch in proportion to its size

A resumed run asks for step s and gets the batch a straight run used at step s: nothing is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["BatchPlan", "SCHEDULES"]

SCHEDULES = ("task_by_task", "round_robin", "proportional")


@dataclass(frozen=True)
class BatchPlan:
    tasks: tuple[str, ...]  # task names, in order
    sizes: tuple[int, ...]  # training examples of each task
    batch_size: int
    schedule: str = "task_by_task"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; valid: {', '.join(SCHEDULES)}")
        if len(self.tasks) != len(self.sizes) or not self.tasks:
            raise ValueError(f"BatchPlan needs one size per task, got tasks {self.tasks} and sizes {self.sizes}")
        if self.batch_size < 2:
            raise ValueError(f"batch_size={self.batch_size} is invalid: use >= 2")
        small = [t for t, n in zip(self.tasks, self.sizes, strict=True) if n < 2]
        if small:
            raise ValueError(f"tasks {small} have fewer than 2 training examples; give each task at least 2")

    @property
    def batches_per_task(self) -> tuple[int, ...]:
        """b_t for every task (a last batch of one example is dropped)."""
        return tuple(n // self.batch_size + (1 if n % self.batch_size >= 2 else 0) for n in self.sizes)

    @property
    def steps_per_epoch(self) -> int:
        return sum(self.batches_per_task)

    def epoch_order(self, epoch: int) -> list[tuple[str, int]]:
        """(task, batch number within that task's epoch) for every step of ``epoch``, in order."""
        return list(_epoch_order(self, int(epoch)))

    def examples(self, task: str, epoch: int, number: int) -> np.ndarray:
        """Indices (b,) of batch ``number`` of ``task`` in ``epoch`` into that task's training examples."""
        i = self.tasks.index(task)
        perm = np.random.default_rng([self.seed, i, int(epoch)]).permutation(self.sizes[i])
        return perm[number * self.batch_size:(number + 1) * self.batch_size]

    def batch(self, step: int) -> tuple[str, np.ndarray]:
        """(task, example indices (b,)) of 0-based optimisation step ``step`` (epochs repeat without end)."""
        epoch, pos = divmod(int(step), self.steps_per_epoch)
        task, number = _epoch_order(self, epoch)[pos]
        return task, self.examples(task, epoch, number)


@lru_cache(maxsize=8)
def _epoch_order(plan: BatchPlan, epoch: int) -> tuple[tuple[str, int], ...]:
    counts = dict(zip(plan.tasks, plan.batches_per_task, strict=True))
    if plan.schedule == "task_by_task":
        labels = [t for t in plan.tasks for _ in range(counts[t])]
    elif plan.schedule == "round_robin":
        labels = [t for r in range(max(counts.values())) for t in plan.tasks if r < counts[t]]
    else:
        flat = np.array([i for i, t in enumerate(plan.tasks) for _ in range(counts[t])])
        labels = [plan.tasks[i] for i in flat[np.random.default_rng([plan.seed, epoch, 1]).permutation(len(flat))]]
    seen = dict.fromkeys(plan.tasks, 0)
    out = []
    for t in labels:
        out.append((t, seen[t]))
        seen[t] += 1
    return tuple(out)
