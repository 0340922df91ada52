"""A serving framework's data file at one version (autopar/io/frameworks.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from autopar.io.schema.fields import (
    _I,
    Tokens,
    Tokens0,
    Version,
    _choices,
    _int,
    _num,
    _rate,
    _Strict,
)
from autopar.spec import limits as lim
from autopar.spec.framework import ADMISSIONS, DISAGG_PREFILLS, FRAMEWORKS, MEMORY_RULES, MOE_DECODE_READS, MOE_EXCHANGES, POLICIES

OneLine = Annotated[str, StringConstraints(min_length=1, max_length=400, pattern=r"^[^\n]*\S[^\n]*$")]


class _Value(_Strict):
    """One engine value: what it does, and where it comes from (a source, or the rows and command of a fit)."""

    mechanism: OneLine
    source: OneLine | None = None
    fitted_on: OneLine | None = None  # the measured rows the value was set on
    fitted_by: OneLine | None = None  # the command that sets it

    @model_validator(mode="after")
    def _cited(self) -> _Value:
        if (self.fitted_on is None) != (self.fitted_by is None):
            raise ValueError("a fitted value names both fitted_on (the rows) and fitted_by (the command)")
        if self.source is None and self.fitted_on is None:
            raise ValueError("needs a source, or fitted_on and fitted_by")
        return self


class FractionValue(_Value):
    value: Annotated[float, _rate(0.05, 1.0)]


class SecondsValue(_Value):
    value: Annotated[float, _num(lim.MAX_FRAMEWORK_SECONDS, inclusive=True)]


class FactorValue(_Value):
    value: Annotated[float, _num(lim.MAX_SLOWDOWN)]


class BytesValue(_Value):
    value: Annotated[float, _num(lim.MAX_MEMORY_GIB * 2**30, inclusive=True)]


class TokensValue(_Value):
    value: Tokens


class Tokens0Value(_Value):
    value: Tokens0


class RequestsValue(_Value):
    value: Annotated[int, _int(1, lim.MAX_SERVE_CONCURRENCY), _I]


class SizesValue(_Value):
    value: Annotated[list[Annotated[int, _int(1, lim.MAX_SERVE_CONCURRENCY), _I]], Field(max_length=4096)]


class FlagValue(_Value):
    value: bool


class MemoryRuleValue(_Value):
    value: Literal["total", "free"]


class PolicyValue(_Value):
    value: Literal["decode_first", "prefill_first"]


class ExpertReadsValue(_Value):
    value: Literal["touched", "local"]


class ExchangeValue(_Value):
    value: Literal["gather_dp", "gather_tp", "all_to_all", "all_to_all_mnnvl"]


class AdmissionValue(_Value):
    value: Literal["reserve_full", "blocks_now_preempt", "reserve_ratio"]


class DisaggPrefillValue(_Value):
    value: Literal["slowdown", "engine"]


class StepsValue(_Value):
    value: Annotated[int, _int(1, lim.MAX_SMALL), _I]


class FrameworkFile(_Strict):
    """A serving framework's data file at one version; every key past `source` is a Framework field."""

    schema_version: Version
    name: Literal["vllm", "sglang", "trtllm"]
    version: Annotated[str, StringConstraints(min_length=1, max_length=40)]
    label: OneLine
    description: OneLine
    source: OneLine
    memory_fraction: FractionValue
    memory_rule: MemoryRuleValue
    chunk_tokens: TokensValue
    graph_reserve_bytes: BytesValue
    step_overhead_s: SecondsValue
    ttft_overhead_s: SecondsValue
    prefill_slowdown: FactorValue
    policy: PolicyValue
    chunked: FlagValue
    max_seqs: RequestsValue
    admission: AdmissionValue
    retract_steps: StepsValue
    graph_sizes: SizesValue
    eager_layer_s: SecondsValue
    overlap: FlagValue
    dp_padding: FlagValue
    moe_decode_reads: ExpertReadsValue
    host_request_s: SecondsValue
    mixed_chunk: FlagValue
    max_prefill_tokens: Tokens0Value
    host_token_s: SecondsValue
    host_prompt_token_s: SecondsValue
    moe_decode_slowdown: FactorValue
    kv_decode_slowdown: FactorValue
    moe_exchange: ExchangeValue
    disagg_prefill: DisaggPrefillValue
    hybrid_overlap: FlagValue
    recv_interval: StepsValue


assert _choices(FrameworkFile, "name") == FRAMEWORKS
assert _choices(PolicyValue, "value") == POLICIES
assert _choices(MemoryRuleValue, "value") == MEMORY_RULES
assert _choices(ExpertReadsValue, "value") == MOE_DECODE_READS
assert _choices(AdmissionValue, "value") == ADMISSIONS
assert _choices(ExchangeValue, "value") == MOE_EXCHANGES
assert _choices(DisaggPrefillValue, "value") == DISAGG_PREFILLS
