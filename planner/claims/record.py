"""A checked claim: the talk's figure, the product's for the same case, what it rests on, the verdict and why."""

from __future__ import annotations

from typing import Literal

from planner.claims.talk import TALK
from planner.schema import Out, Plan, Workload

Verdict = Literal["agrees", "differs"]


class ClaimInputs(Out):
    """What the product's figure rests on: model, devices, dtype, the case (batch, context, SLOs, workload), and per
    device how far the cost model trusts it (``calibrated`` / ``extrapolated`` / ``estimated``) and which of the
    catalog numbers used are estimates."""

    model: str | None
    devices: tuple[str, ...]
    dtype: str | None
    case: str
    source: str | None = None  # the example workload the case is, if it is one
    confidence: dict[str, str] = {}
    estimated: dict[str, tuple[str, ...]] = {}


class Claim(Out):
    """One claim of the talk, checked: ``verdict`` is ``agrees`` when ``product_figure`` passes ``test`` (within the
    tolerance of the talk's figure, or, where the talk gives no number, above its direction's threshold).
    ``why``: the modelling reason the figures differ, or what an agreement rests on. ``details``: the numbers
    behind the product's figure (units in the names)."""

    id: str
    title: str
    talk_quote: str
    talk_at: str
    talk_sentence: int
    talk_figure: str
    talk_low: float | None
    talk_high: float | None
    product_figure: float
    unit: str
    test: str
    verdict: Verdict
    why: str
    inputs: ClaimInputs
    details: dict[str, float | None] = {}

    @property
    def product_text(self) -> str:
        """The product's figure with its unit, at a precision that reads (``2.60x``, ``41.9 GB``, ``3,052 tokens/GB``)."""
        v = self.product_figure
        number = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"
        return f"{number}x" if self.unit == "x" else f"{number} {self.unit}"


class ClaimFailed(RuntimeError):
    """A claim's case has no answer (an example workload plans infeasible, or lacks what the claim reads)."""


def checked(claim_id: str, product: float, inputs: ClaimInputs, why: str, details: dict | None = None) -> Claim:
    """The claim ``claim_id`` of the talk with the product's figure, judged by the talk's test."""
    talk = TALK[claim_id]
    return Claim(id=talk.id, title=talk.title, talk_quote=talk.quote, talk_at=talk.at, talk_sentence=talk.sentence,
                 talk_figure=talk.figure, talk_low=talk.low, talk_high=talk.high, product_figure=float(product),
                 unit=talk.unit, test=talk.test(), verdict="agrees" if talk.agrees(product) else "differs",
                 why=why, inputs=inputs, details=details or {})


def estimated_fields(device, prefixes: tuple[str, ...]) -> tuple[str, ...]:
    """The catalog fields of ``device`` under ``prefixes`` that are estimates (its provenance says so)."""
    return tuple(sorted(k for k, p in device.provenance.items() if p.estimate and k.startswith(prefixes)))


def plan_inputs(plan: Plan, workload: Workload, source: str) -> ClaimInputs:
    """The inputs of a plan of ``workload`` (the example ``source``): model and dtype, the devices it buys and their
    confidence, and the workload in words (objective, power budget, each class's rate, lengths and SLOs)."""
    classes = "; ".join(f"{rc.name} {rc.rate_rps:g} rps, {rc.input_tokens:,}/{rc.output_tokens:,} tokens, TTFT "
                        f"{rc.slo.ttft_ms:g} ms, TPOT {rc.slo.tpot_ms:g} ms" for rc in workload.classes)
    case = f"{workload.objective}, {workload.constraints.power_budget_kw:,.0f} kW; {classes}"
    return ClaimInputs(model=plan.model, devices=tuple(sorted(plan.totals.devices_by_type)), dtype=plan.workload.dtype,
                       case=case, source=source, confidence={c.device: c.level for c in plan.confidence},
                       estimated={c.device: c.estimated_inputs for c in plan.confidence if c.estimated_inputs})
