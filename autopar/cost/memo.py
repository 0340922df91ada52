"""Caching that cannot go stale: one memo per (model, hardware, job), keyed by what is read.

The search prices ~10^5 plans that share sub-configurations (a layer's time
depends on tp, cp, mbs... but not on dp or the ZeRO stage). A ``Memo`` belongs
to one (model, hardware, job) triple, fixed when it is made. Each cached
function has the signature ``fn(memo, key)``: it reads the model, hardware and
job from the memo and the plan only through ``key``, a small immutable value
(NamedTuple or frozen dataclass) holding exactly the plan values it needs,
built by a projection such as ``LayerPlan.of(plan)``. The cache key is then
(fn, key): the arguments themselves, so it cannot leave out a value the
function reads, as hand-written key tuples did (a layer time cached without
pp reused a pipelined plan's all-to-all overlap for plans without a pipeline).

A memo lives as long as its caller keeps it (a search, an estimate); the cost
functions stay pure. Memos of jobs that differ only in their GPU count and global
batch may hold one store (``share=``: ``suggest --gpus auto`` searches one job at
several counts), so a cost function reads ``job.gpus`` and ``job.global_batch``
only through its key (tests/properties/test_properties.py checks that a search
with a shared memo ranks as a fresh one).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import replace
from typing import Any, TypeVar

from autopar.spec.hardware import HardwareProfile
from autopar.spec.job import Job
from autopar.spec.model import ModelSpec
from autopar.spec.stack import NEUTRAL, StackProfile

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class Memo:
    """Cached cost functions of one (model, hardware, job) as one stack runs it."""

    __slots__ = ("_values", "hw", "job", "model", "stack")

    def __init__(
        self, model: ModelSpec, hw: HardwareProfile | None, job: Job, stack: StackProfile = NEUTRAL, *, share: Memo | None = None
    ) -> None:
        """A memo for `model` trained as `job` on `hw` (None for memory only, which reads no hardware) by `stack`;
        `share`: a memo of the same inputs but the job's GPU count and global batch, whose values this one
        reuses and adds to."""
        self.model = model
        self.hw = hw
        self.job = job
        self.stack = stack
        self._values: dict[tuple[Callable[..., Any], Hashable], Any] = {}
        if share is not None:
            other = replace(job, gpus=share.job.gpus, global_batch=share.job.global_batch)
            if not share.serves(model, hw, other, stack):  # type: ignore[arg-type]
                raise ValueError("a memo is shared only between jobs that differ in GPU count and global batch")
            self._values = share._values

    def get(self, fn: Callable[[Memo, K], T], key: K) -> T:
        """fn(self, key), computed once per key."""
        k = (fn, key)
        try:
            value: T = self._values[k]
        except KeyError:
            value = self._values[k] = fn(self, key)
        return value

    def get_by(self, fn: Callable[[Memo, K], T], values: Hashable, build: Callable[[Any], K]) -> T:
        """fn(self, build(values)), computed once per key, looked up by `values`: the key's fields as plain
        tuples (a NamedTuple equals and hashes as the tuple of its fields), so that a hot loop builds the
        key, whose constructor costs ten times a tuple's, only when the value is first computed."""
        k = (fn, values)
        try:
            value: T = self._values[k]
        except KeyError:
            key = build(values)
            if key != values:
                raise ValueError(f"{key!r} is not the key of {values!r}") from None
            value = self._values[k] = fn(self, key)
        return value

    @property
    def profile(self) -> HardwareProfile:
        """The hardware profile; refused for a memory-only memo."""
        if self.hw is None:
            raise ValueError("this memo was made without a hardware profile (memory only)")
        return self.hw

    def serves(self, model: ModelSpec, hw: HardwareProfile, job: Job, stack: StackProfile = NEUTRAL) -> bool:
        """This memo was made for these inputs (the same objects, or equal ones)."""
        return (
            (self.model is model or self.model == model)
            and (self.hw is hw or self.hw == hw)
            and (self.job is job or self.job == job)
            and (self.stack is stack or self.stack == stack)
        )


def memo_for(memo: Memo | None, model: ModelSpec, hw: HardwareProfile, job: Job, stack: StackProfile = NEUTRAL) -> Memo:
    """`memo` when it was made for these inputs, a fresh one when None; a memo for other inputs is refused."""
    if memo is None:
        return Memo(model, hw, job, stack)
    if memo.hw is None:
        memo.hw = hw
    if not memo.serves(model, hw, job, stack):
        raise ValueError("this memo was made for another model, hardware profile, job or stack")
    return memo
