"""Service times of a pool's replicas, priced through the CostModel the way the pool's strategy prices them (on
its ``tp × pp`` devices, ``pp`` pipeline stages).

- prefill pools (pd_disagg, spec_decode, af_disagg): ``m`` queued prompts prefilled together as one pass
  (``CostModel.prefill`` at ``prompts=m``, the new and cached tokens of ``prompt_tokens``), then each prompt's KV
  (``kv_bytes(isl)``) handed to the decode side over the replica's NICs (``transfer_s``), one after another;
- aggregated pools: each step runs the ``b`` sequences in decode and up to ``chunk_tokens`` prefill tokens of
  admitted prompts, each attending over its own prompt (``CostModel.decode(…, prefill_tokens=p,
  prefill_context_tokens=cached + new/2)``), as aggregated.py prices a chunk-carrying step; in ``ep`` expert
  groups, up to ``chunk_tokens`` of each prompt and ``ep · chunk_tokens`` in all (one budget per attention rank),
  spread over the ranks as the plan's mean step spreads them; a shared one's carried tokens at its classes' longest
  prompt context (as aggregated.shared_steps), its decode sequences at their own;
- pd_disagg decode pools: the decode step at the running batch (``CostModel.decode``);
- spec_decode pools: a round ``k·t_draft(b) + t_verify(b) + t_rtt(b)`` (``spec_round_s``, the draft local or on
  its partner silicon, ``round_trip_s`` as spec_decode.py prices it), each sequence gaining ``1 + min(k, G)``
  tokens a round with ``G`` geometric (``P(G = j) = αʲ(1−α)``), whose mean is ``(1 − α^(k+1)) / (1 − α)``;
- af_disagg pools: the attention/FFN ping-pong step (``CostModel.af_decode``) with its expert partner.

Steps are priced at the class's mean context ``isl + osl/2`` (what the planner prices), not the running
sequences' actual contexts: with fixed prompt and answer lengths the batch's mean context stays near it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from planner.perf.model import CostModel, ModelProfile, transfer_s
from planner.schema import Pool, RequestClass, Workload
from planner.strategies.af_disagg import activation_link
from planner.strategies.base import mean_context, partner_share, prompt_tokens
from planner.strategies.spec_decode import round_trip_s


class SimulationError(ValueError):
    """A plan the simulator cannot replay (the message names the pool or field)."""


@dataclass(frozen=True)
class PrefillService:
    """A prefill replica: ``seconds[m − 1]`` to prefill ``m`` prompts together (m = 1 … batch) and the KV
    hand-off of one prompt on the replica's NICs (s, 0 when nothing is handed off)."""

    seconds: np.ndarray
    transfer_s: float

    @property
    def batch(self) -> int:
        return len(self.seconds)


@dataclass
class StepService:
    """A continuously batched replica: ``step_s(b, p)``, the seconds of a step over ``b`` decode sequences carrying
    ``p`` prefill tokens (priced once per distinct ``p`` over every ``b``), and the rounds a sequence needs for
    its tokens (one token a step, or speculative rounds of random yield)."""

    batch: int
    price: Callable[[float], np.ndarray]  # p -> step seconds over b = 0 … batch
    chunk_tokens: int = 0  # prefill tokens a step may carry of one prompt (0: a decode-only pool)
    groups: int = 1  # attention ranks, each with its own chunk budget (a step carries up to groups · chunk_tokens)
    draft_tokens: int = 0  # k of a speculative pool (0: one token a step)
    acceptance_rate: float = 0.0
    #: a shared pool: each class's own step (its sequences' context); a step over a mix of classes is the
    #: slot-weighted mean of theirs, as the plan prices it (planner/strategies/pd_disagg.price_shared)
    by_class: dict[str, StepService] = field(default_factory=dict)
    _tables: dict[int, list[float]] = field(default_factory=dict, repr=False)

    def step_s(self, running: int, prefill_tokens: int = 0, counts: Mapping[str, int] | None = None) -> float:
        """Seconds of a step over ``running`` sequences carrying ``prefill_tokens``; for a shared pool, over
        ``counts`` sequences per class (a class it has no step of, such as a warm start's, at its own)."""
        if self.by_class and counts and running:
            return sum(n * self.by_class.get(k, self).step_s(running, prefill_tokens) for k, n in counts.items() if n) / running
        table = self._tables.get(prefill_tokens)
        if table is None:
            table = self._tables[prefill_tokens] = [float(x) for x in self.price(float(prefill_tokens))]
        return table[running]

    def rounds_for(self, rng: np.random.Generator, tokens: int) -> int:
        """Steps (rounds) a sequence needs to produce ``tokens``: ``tokens`` at one a step; for speculation the
        first round whose running total of ``1 + min(k, G)`` reaches ``tokens``."""
        if self.draft_tokens == 0 or tokens <= 0:
            return max(tokens, 0)
        mean = (1.0 - self.acceptance_rate ** (self.draft_tokens + 1)) / (1.0 - self.acceptance_rate)
        rounds, need = 0, tokens
        while True:
            size = math.ceil(need / mean) + 16
            gains = 1 + np.minimum(self.draft_tokens, rng.geometric(1.0 - self.acceptance_rate, size) - 1)
            total = np.cumsum(gains)
            i = int(np.searchsorted(total, need))
            if i < size:
                return rounds + i + 1
            rounds, need = rounds + size, need - int(total[-1])


@dataclass(frozen=True)
class ServiceContext:
    """What service times are priced with: the plan's workload, its model (and draft) profiles, the cost model
    and the aggregated pools' chunk budget."""

    workload: Workload
    model: ModelProfile
    draft: ModelProfile | None
    costs: CostModel
    chunk_tokens: int


def service_for(pool: Pool, rc: RequestClass, ctx: ServiceContext,
                members: list[RequestClass] | None = None) -> PrefillService | StepService:
    """The service model of ``pool`` serving ``rc`` (see the module docstring); ``members``: the classes a shared
    aggregated pool may serve (default ``rc`` alone)."""
    costs, model = ctx.costs, ctx.model
    s = costs.silicon(pool.device, ctx.workload.dtype)
    n, b, pp = pool.tp * pool.pp, pool.batch, pool.pp
    if pool.role == "prefill":
        new, cached = prompt_tokens(rc)
        seconds = costs.prefill(model, s, n, new, cached, prompts=np.arange(1, b + 1, dtype=float), ep=pool.ep,
                                pp=pp).total_s.reshape(-1)
        move = float(transfer_s(float(model.kv_bytes(rc.input_tokens)), n * s.nic_bytes_s, s.nic_latency_s))
        return PrefillService(seconds, move)
    batches = np.arange(0, b + 1, dtype=float)
    running = np.maximum(batches, 1.0)  # b = 0 is never stepped in a decode-only pool, nor without prefill
    c = mean_context(rc)
    if pool.role == "aggregated":
        prompt = max(cached + new / 2.0 for new, cached in map(prompt_tokens, members or [rc]))
        return StepService(b, lambda p: costs.decode(model, s, n, batches if p > 0 else running, c, prefill_tokens=p,
                                                     ep=pool.ep, prefill_context_tokens=prompt, pp=pp).total_s.reshape(-1),
                           chunk_tokens=ctx.chunk_tokens, groups=pool.ep)
    if pool.strategy == "pd_disagg":
        return StepService(b, lambda p: costs.decode(model, s, n, running, c, ep=pool.ep, pp=pp).total_s.reshape(-1))
    if pool.strategy == "spec_decode":
        return _spec_service(pool, rc, ctx, running)
    if pool.strategy == "af_disagg":
        # an expert replica shared by r attention replicas runs theirs too (each taken as busy as this one)
        f, r = costs.silicon(pool.partner_device, ctx.workload.dtype), partner_share(pool)
        link = activation_link(s, n, f, pool.partner_tp, r)
        return StepService(b, lambda p: costs.af_decode(model, s, n, f, pool.partner_tp, running, c, *link, sharing=r)
                           .total_s.reshape(-1))
    raise SimulationError(f"pools: {pool.class_name}/{pool.strategy}/{pool.role}: no simulator for this pool")


def _spec_service(pool: Pool, rc: RequestClass, ctx: ServiceContext, running: np.ndarray) -> StepService:
    """A verify+draft pool's round over the running batch, priced as spec_decode.py prices it."""
    spec, costs, model, draft = ctx.workload.spec_decode, ctx.costs, ctx.model, ctx.draft
    k = pool.draft_tokens or (spec.draft_tokens if spec else None)
    if spec is None or draft is None or k is None:
        raise SimulationError(f"pools: {pool.class_name}/spec_decode/decode on {pool.device}: "
                              "needs the workload's spec_decode settings and the pool's draft_tokens")
    v = costs.silicon(pool.device, ctx.workload.dtype)
    n, c = pool.tp, mean_context(rc)
    verify = costs.decode(model, v, n, running, c, prefill_tokens=running * k).total_s.reshape(-1)
    if pool.partner_device is None:
        draft_step, rtt = costs.decode(draft, v, n, running, c).total_s.reshape(-1), 0.0
    else:
        d, nd, r = costs.silicon(pool.partner_device, ctx.workload.dtype), pool.partner_tp, partner_share(pool)
        draft_step = costs.decode(draft, d, nd, r * running, c).total_s.reshape(-1)  # drafting for its r targets
        rtt = round_trip_s(running, k, v, n, d, nd, r)
    rounds = np.asarray(costs.spec_round_s(draft_step, k, verify, rtt), dtype=float).reshape(-1)
    return StepService(pool.batch, lambda p: rounds, draft_tokens=k, acceptance_rate=spec.acceptance_rate)
