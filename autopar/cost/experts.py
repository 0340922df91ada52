"""The MoE sub-layer's time: router, routed and shared experts, the EP all-to-all (dispatch and combine).

Built from cost/sublayer.py's pieces like the other sub-layers of cost/compute.py;
moe_floor is the search's lower bound of it at any ep and etp.
"""

from __future__ import annotations

from autopar.cost import calibration as cal
from autopar.cost.comm import collective_time
from autopar.cost.flops import Gemm, expert_gemms, part_gemms
from autopar.cost.kernels import elementwise_time, fp8_cast_time, gemm_time_floor, gemms_time, memory_time, op_sac
from autopar.cost.shape import Dims, Shape
from autopar.cost.sublayer import BlockTime, act_elems, assemble, norm_residual_bytes, norm_time, tp_collectives
from autopar.spec.families import MoESpec
from autopar.spec.hardware import HardwareProfile, fit_for
from autopar.spec.model import ModelSpec
from autopar.spec.topology import RankGrid


def moe_time(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, ep: int, etp: int) -> BlockTime:
    """Router, routed experts (grouped GEMMs at the per-expert size), shared experts, EP all-to-all.

    Tokens reach the experts SP-split when etp = 1 (no TP collective around the
    experts) or gathered across TP when etp = tp (experts split like an MLP).
    Each routed copy of a token goes to its expert's rank and back (dispatch and
    combine), forward and backward (_ep_exchange); exposed here, hidden by the
    paired micro-batch in pipelined plans (layer_time).
    """
    moe = _moe_spec(model)
    tokens = shape.tokens(plan)
    expert_tokens = tokens * etp / plan.tp  # tokens one rank sees in expert space
    gemms, gemm, shared_gemm = _gemms(model, hw, shape.dtype, tokens, plan.tp, ep, etp)
    copies = expert_tokens * moe.top_k * moe.capacity_factor
    act, mem = _moe_memory(model, hw, shape, plan, tokens, expert_tokens, etp)
    cast = fp8_cast_time(hw, shape, gemms)
    fwd = gemm + mem + cast / 3
    a2a = 0.0
    if ep > 1:
        dispatch = 1 if shape.dtype == "fp8" else cal.ACT_BYTES  # DeepEP/TE dispatch FP8 tokens under an FP8 recipe
        over_tp = shape.stack.ep_over_tp and etp == 1
        bf16 = _ep_exchange(model, hw, plan, ep, expert_tokens, 2, over_tp=over_tp)
        fwd_pair = _ep_exchange(model, hw, plan, ep, expert_tokens, dispatch, over_tp=over_tp) + bf16
        redo = plan.recompute == "full" or (plan.recompute == "selective" and "moe" in plan.modules)
        a2a = (2 if redo else 1) * fwd_pair + 2 * bf16
    tp = tp_collectives(model, hw, shape, plan, tokens) if etp > 1 else (0.0, 0.0)
    bwd = 2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + 2 * cast / 3
    modules = {
        "moe": fwd,
        "layernorm": norm_time(model, hw, shape, plan, tokens),
        "moe_act": elementwise_time(hw, shape, cal.ACT_BYTES * act_elems(model, 1) * copies * moe.expert_ffn_hidden_size / etp),
        "shared_experts": shared_gemm
        + elementwise_time(hw, shape, cal.ACT_BYTES * act_elems(model, 1) * tokens * moe.shared_width / plan.tp),
    }
    return assemble(hw, plan, fwd=fwd, bwd=bwd, selective=act, tp=tp, ep=a2a, op_sac=op_sac(shape, gemm, mem), modules=modules)


# The GEMMs of a MoE sub-layer, kept per (model, profile) object, dtype, tokens and (tp, ep, etp): the layer
# configurations of a search that differ in recompute, SP or CP variant alone share them (deepseek-v3 on
# 1,024 GPUs, --plot: 3,932 sub-layers priced, 813 distinct GEMM sets). An entry holds its objects, so their
# ids name it while cached.
_GEMMS: dict[tuple[int, int, str, int, int, int, int], tuple[ModelSpec, HardwareProfile, tuple[tuple[Gemm, ...], float, float]]] = {}
_EXCHANGES: dict[tuple[int, int, int, int, int, float, int, bool], tuple[ModelSpec, HardwareProfile, float]] = {}
CACHE = 1 << 14  # entries of each before it starts over


def _gemms(
    model: ModelSpec, hw: HardwareProfile, dtype: str, tokens: int, tp: int, ep: int, etp: int
) -> tuple[tuple[Gemm, ...], float, float]:
    """(the routed experts', router's and shared experts' GEMMs, their seconds, the shared experts' seconds)."""
    key = (id(model), id(hw), dtype, tokens, tp, ep, etp)
    hit = _GEMMS.get(key)
    if hit is not None and hit[0] is model and hit[1] is hw:
        return hit[2]
    gemms = expert_gemms(model, tokens=tokens * etp / tp, ep=ep, etp=etp)
    gemms += part_gemms(model, "moe", tokens=tokens, tp=tp)  # router, shared experts
    shared = part_gemms(model, "moe", tokens=tokens, tp=tp)[1:]
    value = (gemms, gemms_time(hw, dtype, gemms), gemms_time(hw, dtype, shared))
    if len(_GEMMS) >= CACHE:
        _GEMMS.clear()
    _GEMMS[key] = (model, hw, value)
    return value


def _moe_memory(
    model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims, tokens: float, expert_tokens: float, etp: int
) -> tuple[float, float]:
    """(activation, all memory-bound) forward seconds of the MoE sub-layer: norm and residual, the
    experts' activation, and the permute and unpermute of every routed copy (read + write)."""
    moe = _moe_spec(model)
    copies = expert_tokens * moe.top_k * moe.capacity_factor
    act_width = copies * moe.expert_ffn_hidden_size / etp + tokens * moe.shared_width / plan.tp
    act = elementwise_time(hw, shape, cal.ACT_BYTES * act_elems(model, 1) * act_width)
    permute = memory_time(hw, cal.ACT_BYTES * 4 * copies * model.hidden_size)
    return act, elementwise_time(hw, shape, norm_residual_bytes(model, plan, tokens)) + act + permute


def moe_floor(model: ModelSpec, hw: HardwareProfile, shape: Shape, plan: Dims) -> float:
    """A lower bound of moe_time(...).total less its ep_exposed, at any ep and etp the rules allow.

    The routed experts' FLOPs per rank do not depend on ep or etp (E/ep experts of
    ep/E of the routed copies, each split etp ways over etp times the tokens); they
    are bounded at the GEMM curve's best efficiency (kernels.gemm_time_floor). The
    memory-bound work is least at etp = 1 (each copy permuted once); FP8 casts, TP
    collectives and overlap slowdowns are at least 0, and full recompute redoes the
    forward. The search prices this once per layer class instead of once per (ep, etp).
    """
    tokens = shape.tokens(plan)
    expert_tokens = tokens / plan.tp
    routed = sum(g.flops * g.count for g in expert_gemms(model, tokens=expert_tokens, ep=1, etp=1))
    gemm = gemm_time_floor(hw, shape.dtype, routed) + gemms_time(hw, shape.dtype, part_gemms(model, "moe", tokens=tokens, tp=plan.tp))
    mem = _moe_memory(model, hw, shape, plan, tokens, expert_tokens, 1)[1]
    fwd = gemm + mem
    return fwd + 2 * gemm + cal.BACKWARD_OVER_FORWARD_MEMORY * mem + (fwd if plan.recompute == "full" else 0.0)


def _moe_spec(model: ModelSpec) -> MoESpec:
    if model.moe is None:
        raise ValueError("MoE sub-layer on a model without moe")
    return model.moe


def _ep_exchange(model: ModelSpec, hw: HardwareProfile, plan: Dims, ep: int, tokens: float, nbytes: int, *, over_tp: bool = False) -> float:
    """Seconds of one EP dispatch (or combine) of `tokens` tokens per rank, `nbytes` per element.

    Inside a node it is an all-to-all of every routed copy. Across nodes we model
    the node-aware dispatcher (DeepEP, Megatron's flex dispatcher): a token
    crosses the network once per destination node, then NVLink fans it out to
    its experts there. With uniform routing over g nodes a token's top_k experts
    sit on g(1 - (1 - 1/g)^k) distinct nodes, at most max_nodes_per_token; the
    remote ones are (g - 1)/g of them, sent on the rank's own NIC rail.
    """
    if model.moe is None:
        return 0.0
    key = (id(model), id(hw), plan.tp, plan.cp, ep, tokens, nbytes, over_tp)
    hit = _EXCHANGES.get(key)
    if hit is not None and hit[0] is model and hit[1] is hw:
        return hit[2]
    value = _exchange(model, model.moe, hw, plan, ep, tokens, nbytes, over_tp=over_tp)
    if len(_EXCHANGES) >= CACHE:
        _EXCHANGES.clear()
    _EXCHANGES[key] = (model, hw, value)
    return value


def _exchange(
    model: ModelSpec, moe: MoESpec, hw: HardwareProfile, plan: Dims, ep: int, tokens: float, nbytes: int, *, over_tp: bool
) -> float:
    """_ep_exchange, computed (it reads tp and cp of the plan)."""
    grid = RankGrid(gpus_per_node=hw.gpus_per_node, tp=plan.tp, cp=plan.cp, ep=ep, ep_over_tp=over_tp)
    group = grid.group("ep")
    copies = tokens * moe.top_k * moe.capacity_factor
    if group.intra:
        return collective_time(hw, "all_to_all", nbytes * copies * model.hidden_size, group)
    nodes = group.size / group.per_node
    reached = nodes * (1 - (1 - 1 / nodes) ** moe.top_k)
    if moe.max_nodes_per_token:
        reached = min(reached, moe.max_nodes_per_token)
    remote = reached * (nodes - 1) / nodes
    inter = fit_for(hw.inter["all_to_all"], int(nodes))
    intra = fit_for(hw.intra["all_to_all"], min(group.per_node, hw.gpus_per_node))
    network = nbytes * tokens * moe.capacity_factor * remote * model.hidden_size / inter.bw_bytes_per_s
    fan_out = nbytes * copies * model.hidden_size * (group.per_node - 1) / group.per_node / intra.bw_bytes_per_s
    return inter.latency_s + max(network, fan_out)
