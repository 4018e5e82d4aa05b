"""Domain types (pydantic v2, frozen): hardware, model architectures, workloads, estimates.

Units live in field names (``capacity_gb``, ``bandwidth_tb_s``, ``tdp_w``, ``ttft_ms``), all
decimal SI. Validation is strict: an unknown field, a non-positive size, an infinite or NaN number, a value
over its limit (``MAX_*`` below) or an unknown dtype is rejected with a message that names the field.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

Id = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", min_length=1, max_length=64)]
WeightsDtype = Literal["bf16", "fp16", "fp8", "int8", "fp4", "int4"]
ComputeDtype = Literal["bf16", "fp8", "fp4", "int8"]
TierName = Literal["hbm", "dram", "sram"]
DeviceKind = Literal["gpu", "tpu", "asic", "wafer", "lpu", "dataflow"]
#: limits of a workload (README "Limits"): requests/s per class, SLOs, budgets, lists, solver time
MIN_RATE_RPS, MAX_RATE_RPS = 1e-3, 1e6  # below ~1e-6 the MILP's demand rows sink into solver tolerances
MAX_SLO_MS = 3_600_000.0  # one hour
MAX_POWER_BUDGET_KW = 1e7  # 10 GW
MAX_COST_BUDGET_USD_PER_HOUR = 1e9
MAX_INVENTORY = 1_000_000  # devices of one type
MAX_CLASSES = 200
MAX_DEVICES = 100  # ids in constraints.devices and in constraints.inventory
MAX_TIME_LIMIT_S = 3600.0  # per MILP solve
MAX_ALTERNATIVES = 10  # runner-up plans one request may ask for (each a full first-stage solve)
MAX_MIN_REPLICAS = 1000  # constraints.min_replicas_per_pool
MAX_PP = 8  # constraints.max_pp: the largest pipeline a GPU replica may span (planner/perf/silicon.py PIPELINE_STAGES)
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Strategy = Literal["aggregated", "pd_disagg", "spec_decode", "af_disagg"]
STRATEGIES: tuple[str, ...] = ("aggregated", "pd_disagg", "spec_decode", "af_disagg")


class Frozen(BaseModel):
    """Immutable, strict base: unknown fields are errors, not silently dropped; numbers are finite."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# --------------------------------------------------------------------------------------- hardware
class Provenance(Frozen):
    """Where a catalog number comes from; ``estimate`` when nothing is published."""

    source: str = Field(min_length=3)
    estimate: bool = False


class MemoryTier(Frozen):
    """One memory level of a device: capacity per device and bandwidth to compute."""

    tier: TierName
    capacity_gb: Positive
    bandwidth_tb_s: Positive


class Link(Frozen):
    """A link as seen by one device: per-direction bandwidth and per-step latency."""

    bandwidth_gb_s: Positive
    latency_us: NonNegative


class ScaleUpLink(Link):
    """The fast domain used for tensor parallelism (NVLink, Infinity Fabric, ICI, C2C, ...)."""

    domain_size: Annotated[int, Field(ge=1)]


class Device(Frozen):
    """One accelerator (or one system, for wafer-scale machines) as the optimizer counts it."""

    id: Id
    vendor: Id
    name: str
    kind: DeviceKind
    peak_dense_tflops: dict[ComputeDtype, Positive] = Field(min_length=1)
    memory_tiers: tuple[MemoryTier, ...] = Field(min_length=1)
    weights_tier: TierName
    kv_tier: TierName
    scale_up: ScaleUpLink
    scale_out: Link
    tdp_w: Positive
    devices_per_node: Annotated[int, Field(ge=1)]
    node_overhead_w: NonNegative
    rack_units: Positive | None = None
    price_usd: Positive
    price_usd_per_hour: Positive
    mfu: Fraction
    mbu: Fraction
    layer_latency_us: NonNegative
    #: structural efficiency terms (catalogs/calibration/families.yaml, then the fit): fixed cost of
    #: a MoE layer beyond a dense one, of a whole pass (framework/scheduler), and of one all-reduce call.
    moe_layer_latency_us: NonNegative = 0.0
    step_overhead_us: NonNegative = 0.0
    sequence_overhead_us: NonNegative = 0.0  # per sequence in a pass: the framework's per-request work each step
    gemm_half_width: NonNegative = 0.0  # per-device GEMM width d/p at which dense GEMMs reach half their efficiency
    collective_latency_us: NonNegative = 0.0
    collective_efficiency: Fraction = 1.0  # achieved all-reduce bus bandwidth / scale-up link bandwidth
    grouped_gemm_efficiency: Fraction = 1.0  # routed experts' grouped GEMM MFU / a dense GEMM's
    collective_step_latency_us: NonNegative = 1.0  # one ring step of a tensor-parallel all-reduce
    attention_read_efficiency: Fraction = 0.7  # decode attention's KV-read MBU / a weight read's
    fp8_compute_scale: Fraction = 0.89  # large-GEMM MFU of fp8/int8 matmuls / bf16's
    fp4_compute_scale: Fraction = 0.5  # large-GEMM MFU of fp4 matmuls / bf16's
    family: str | None = None
    provenance: dict[str, Provenance] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _tiers_exist(self) -> Device:
        names = [t.tier for t in self.memory_tiers]
        if len(set(names)) != len(names):
            raise ValueError(f"memory_tiers: duplicate tier in {names}")
        for field in ("weights_tier", "kv_tier"):
            if getattr(self, field) not in names:
                raise ValueError(f"{field}: {getattr(self, field)!r} is not one of memory_tiers {names}")
        return self

    def tier(self, name: str) -> MemoryTier:
        """The memory tier called ``name``."""
        return next(t for t in self.memory_tiers if t.tier == name)

    @property
    def weights_memory(self) -> MemoryTier:
        return self.tier(self.weights_tier)

    @property
    def kv_memory(self) -> MemoryTier:
        return self.tier(self.kv_tier)

    @property
    def is_sram_machine(self) -> bool:
        """True when weights must sit in on-chip SRAM (wafer-scale, LPU, ...)."""
        return self.weights_tier == "sram"


class Band(Frozen):
    """Measured/predicted ratios that bracket ~80 % of a family's leave-one-out residuals."""

    low: Positive
    high: Positive

    def widened(self, factor: float) -> Band:
        """The band stretched by ``factor`` in log space (``low^f``, ``high^f``)."""
        import math

        return Band(low=math.exp(math.log(self.low) * factor), high=math.exp(math.log(self.high) * factor))


class FamilyCalibration(Frozen):
    """What the calibration knows of one device family (catalogs/calibration/families.yaml and fit.yaml)."""

    name: str
    devices: tuple[str, ...]
    records: int = 0
    fitted: bool = False
    checks_only: bool = False  # fitted on check-only records (vendor claims), the family's only data
    date: str | None = None
    bands: dict[str, Band] = Field(default_factory=dict)  # per metric group: tpot, ttft, throughput
    dtypes: tuple[str, ...] = ()
    max_tp: int = 0
    max_isl: int = 0
    max_batch: int = 0


# ------------------------------------------------------------------------------------------ models
class MlaSpec(Frozen):
    """Multi-head latent attention (DeepSeek): low-rank compressed KV."""

    q_lora_rank: Annotated[int, Field(ge=0)]
    kv_lora_rank: Annotated[int, Field(ge=1)]
    qk_nope_head_dim: Annotated[int, Field(ge=1)]
    qk_rope_head_dim: Annotated[int, Field(ge=0)]
    v_head_dim: Annotated[int, Field(ge=1)]


class MoeSpec(Frozen):
    """Mixture of experts: routed experts per MoE layer, how many are active per token."""

    experts: Annotated[int, Field(ge=1)]
    experts_active: Annotated[int, Field(ge=1)]
    shared_experts: Annotated[int, Field(ge=0)] = 0
    expert_ffn_size: Annotated[int, Field(ge=1)]
    dense_layers: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _active_le_total(self) -> MoeSpec:
        if self.experts_active > self.experts:
            raise ValueError(f"experts_active: {self.experts_active} > experts {self.experts}")
        return self


class PublishedParams(Frozen):
    """Parameter counts the model card states, in billions (a sanity check for the cost model)."""

    total: Positive
    active: Positive


class ModelArch(Frozen):
    """A transformer's published configuration (the fields of its config.json)."""

    id: Id
    name: str
    family: str
    source: str = Field(min_length=3)
    layers: Annotated[int, Field(ge=1)]
    hidden_size: Annotated[int, Field(ge=1)]
    attention_heads: Annotated[int, Field(ge=1)]
    kv_heads: Annotated[int, Field(ge=1)]
    head_dim: Annotated[int, Field(ge=1)]
    ffn_size: Annotated[int, Field(ge=0)]
    vocab_size: Annotated[int, Field(ge=1)]
    tie_embeddings: bool = False
    max_context_tokens: Annotated[int, Field(ge=1)]
    attention: Literal["gqa", "mla"] = "gqa"
    sliding_window_layers: Annotated[int, Field(ge=0)] = 0
    sliding_window_tokens: Annotated[int, Field(ge=0)] = 0
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    published_params_b: PublishedParams
    native_dtype: WeightsDtype = "bf16"

    @model_validator(mode="after")
    def _consistent(self) -> ModelArch:
        if self.attention == "mla" and self.mla is None:
            raise ValueError("mla: required when attention is 'mla'")
        if self.attention_heads % self.kv_heads:
            raise ValueError(f"kv_heads: {self.kv_heads} does not divide attention_heads {self.attention_heads}")
        if self.sliding_window_layers > self.layers:
            raise ValueError("sliding_window_layers: more than layers")
        if self.sliding_window_layers and not self.sliding_window_tokens:
            raise ValueError("sliding_window_tokens: required when sliding_window_layers > 0")
        if self.moe is None and self.ffn_size == 0:
            raise ValueError("ffn_size: must be positive for a dense model")
        if self.moe is not None and self.moe.dense_layers and self.ffn_size == 0:
            raise ValueError("ffn_size: dense_layers > 0 needs the dense FFN size")
        return self

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def splits_over(self, tp: int) -> bool:
        """Whether tensor parallelism over ``tp`` devices splits the attention heads evenly: ``tp`` divides
        the attention heads, and the KV heads too when ``tp`` ≤ KV heads (else each KV head is copied to
        ``tp / kv_heads`` devices, so the KV heads divide ``tp``). MLA's latent KV is copied to every device;
        its ``kv_heads`` equal its attention heads, so the same rule holds."""
        if tp < 1 or self.attention_heads % tp:
            return False
        return self.kv_heads % tp == 0 if tp <= self.kv_heads else tp % self.kv_heads == 0

    def tensor_parallel_sizes(self) -> tuple[int, ...]:
        """Every ``tp`` the heads split over (``splits_over``), ascending."""
        return tuple(tp for tp in range(1, self.attention_heads + 1) if self.splits_over(tp))


# ---------------------------------------------------------------------------------------- workload
class Slo(Frozen):
    """Latency objectives of a request class: time to first token and time per output token, as means or, with
    ``percentile``, as that percentile (TTFT from the prefill queue's waiting-time distribution; TPOT in
    aggregated pools from the steps that carry a prefill chunk)."""

    ttft_ms: Annotated[float, Field(gt=0, le=MAX_SLO_MS)]
    tpot_ms: Annotated[float, Field(gt=0, le=MAX_SLO_MS)]
    percentile: Annotated[float, Field(ge=50, lt=100)] | None = None


class RequestClass(Frozen):
    """One kind of traffic: arrival rate, prompt and answer lengths, prefix reuse, SLO."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]+$", min_length=1, max_length=64)]
    rate_rps: Annotated[float, Field(ge=MIN_RATE_RPS, le=MAX_RATE_RPS)]
    input_tokens: Annotated[int, Field(ge=1, le=10_000_000)]
    output_tokens: Annotated[int, Field(ge=1, le=1_000_000)]
    prefix_cache_hit: Annotated[float, Field(ge=0, lt=1)] = 0.0
    slo: Slo


#: draft lengths the planner chooses from when a workload leaves ``spec_decode.draft_tokens`` unset
DRAFT_LENGTHS: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8)
#: the draft length the task graph assumes for token-id traffic when the planner chooses k per pool (4 bytes a
#: token: the choice moves no figure a plan reports)
GRAPH_DRAFT_TOKENS = 4


class SpecDecodeSettings(Frozen):
    """Speculative decoding: draft model, per-token acceptance rate alpha, draft length k (unset: each pool's k is
    chosen by the planner, from ``DRAFT_LENGTHS``)."""

    draft_model: Id
    acceptance_rate: Annotated[float, Field(gt=0, lt=1)]
    draft_tokens: Annotated[int, Field(ge=1, le=16)] | None = None

    @property
    def draft_lengths(self) -> tuple[int, ...]:
        """The draft lengths a speculative pool may use: the one given, else every one of ``DRAFT_LENGTHS``."""
        return (self.draft_tokens,) if self.draft_tokens is not None else DRAFT_LENGTHS


class InventoryEntry(Frozen):
    """An inventory line that can also say the devices are already owned."""

    count: Annotated[int, Field(ge=0, le=MAX_INVENTORY)]
    owned: bool = False


def _entry(value):
    """An inventory count ``N`` is the entry ``{count: N}``."""
    return {"count": value} if isinstance(value, (int, float, str)) and not isinstance(value, bool) else value


def _count(value) -> int:
    """An inventory line as it is stored and read back: its count."""
    return value.count if isinstance(value, InventoryEntry) else value


class Constraints(Frozen):
    """Limits the fleet must respect."""

    power_budget_kw: Annotated[float, Field(gt=0, le=MAX_POWER_BUDGET_KW)]
    pue: Annotated[float, Field(ge=1, le=3)] = 1.2
    devices: tuple[Id, ...] | None = Field(default=None, min_length=1, max_length=MAX_DEVICES)
    #: devices of a type at most: a count, or ``{count, owned}`` that also says they are owned (read back as the count)
    inventory: dict[Id, Annotated[InventoryEntry, BeforeValidator(_entry, json_schema_input_type=int | InventoryEntry),
                                  PlainSerializer(_count, return_type=int)]] = Field(default_factory=dict,
                                                                                     max_length=MAX_DEVICES)
    cost_budget_usd_per_hour: Annotated[float, Field(gt=0, le=MAX_COST_BUDGET_USD_PER_HOUR)] | None = None
    #: at most this many device types in the fleet (what procurement can buy and operate); None: no limit
    max_device_types: Annotated[int, Field(ge=1, le=MAX_DEVICES)] | None = None
    #: devices already owned, by type: free to use (no $/h, no capex; they still draw power). More of an owned
    #: type may be bought unless ``inventory`` caps it; ``inventory: {cs-3: {count: 16, owned: true}}`` says
    #: both at once (16 owned, none to add)
    owned: dict[Id, Annotated[int, Field(ge=1, le=MAX_INVENTORY)]] = Field(default_factory=dict, max_length=MAX_DEVICES)
    #: devices are bought, counted and powered in whole nodes (each type's ``devices_per_node``): a partly used node's
    #: idle devices still draw their TDP and node-overhead share and are paid for (planner/nodes.py)
    whole_nodes: bool = False
    #: every pool the plan uses has at least this many replicas (redundancy: 2 for N+1 on a one-replica pool); a pool
    #: with a shared partner counts its partner replicas too
    min_replicas_per_pool: Annotated[int, Field(ge=1, le=MAX_MIN_REPLICAS)] = 1
    #: pipeline stages a GPU replica may span across scale-up domains (nodes), each a TP group holding its share of
    #: the layers; offered only where no one domain holds the weights (1: never)
    max_pp: Annotated[int, Field(ge=1, le=MAX_PP)] = 4

    @model_validator(mode="after")
    def _owned_inventory(self) -> Constraints:
        """Entries ``{count: N, owned: true}`` become a count of N and N owned devices (frozen: set in place once)."""
        entries = {d: e for d, e in self.inventory.items() if isinstance(e, InventoryEntry)}
        if entries:
            object.__setattr__(self, "inventory", {d: e.count for d, e in entries.items()})
            owned = {**self.owned, **{d: e.count for d, e in entries.items() if e.owned and e.count > 0}}
            object.__setattr__(self, "owned", owned)
        return self

    @model_validator(mode="after")
    def _distinct_devices(self) -> Constraints:
        if self.devices is not None and len(set(self.devices)) != len(self.devices):
            twice = sorted({d for d in self.devices if self.devices.count(d) > 1})
            raise ValueError(f"devices: listed more than once: {', '.join(twice)}")
        for device, count in self.owned.items():
            if self.devices is not None and device not in self.devices:
                raise ValueError(f"owned.{device}: not in devices ({', '.join(self.devices)}); list it to use it")
            if device in self.inventory and self.inventory[device] < count:
                raise ValueError(f"owned.{device}: {count} owned but inventory.{device} allows {self.inventory[device]}")
        return self


Objective = Literal["max_goodput", "min_cost", "min_power", "fixed_footprint", "max_interactivity"]
#: objectives whose first stage maximises the goodput scale λ (fixed_footprint: with the owned fleet free)
GOODPUT_OBJECTIVES = ("max_goodput", "fixed_footprint")


class Workload(Frozen):
    """What to serve: a model, its traffic classes with SLOs, how it may be served, and the limits."""

    model: Id
    dtype: WeightsDtype = "bf16"  # with ``dtypes``: the first of them unless given
    kv_dtype: WeightsDtype | None = None  # default: fp8 for 4-bit weights, else the weights dtype
    #: weights dtypes the plan may choose per pool (a request's prefill and decode at one of them); empty: ``dtype``
    dtypes: tuple[WeightsDtype, ...] = Field(default=(), max_length=6)
    classes: tuple[RequestClass, ...] = Field(min_length=1, max_length=MAX_CLASSES)
    strategies: tuple[Strategy, ...] = ("aggregated", "pd_disagg")
    spec_decode: SpecDecodeSettings | None = None
    constraints: Constraints
    #: a single-device fleet to compare the plan with (e.g. what the buyer runs today), solved under the same
    #: constraints; it may be a device the plan itself may not use
    baseline_device: Id | None = None
    objective: Objective = "max_goodput"
    #: replicas may serve several classes (aggregated; pd_disagg prefill and decode; spec_decode prefill and
    #: verify+draft; af_disagg prefill and attention/expert groups): each class's traffic a share of a pool bounded by
    #: the tightest SLO it serves. It couples the classes, so the class-by-class proof no longer applies: worth it
    #: for small fleets, where whole replicas per class are the waste
    shared_pools: bool = False

    @property
    def allowed_dtypes(self) -> tuple[str, ...]:
        """The weights dtypes pools may use: ``dtypes``, or ``dtype`` alone."""
        return self.dtypes or (self.dtype,)

    def at_dtype(self, dtype: str) -> Workload:
        """This workload served at weights ``dtype`` alone (a pool's view of it)."""
        return self if self.dtypes == () and dtype == self.dtype else self.model_copy(update={"dtype": dtype, "dtypes": ()})

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.dtypes and "dtype" not in self.model_fields_set:
            object.__setattr__(self, "dtype", self.dtypes[0])  # still being built: the first allowed is the default
        if self.dtypes and (len(set(self.dtypes)) != len(self.dtypes) or self.dtype not in self.dtypes):
            raise ValueError(f"dtypes: {list(self.dtypes)} must be distinct and include dtype ({self.dtype}); "
                             f"allowed: {', '.join(get_args(WeightsDtype))}")
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"classes: duplicate class names in {names}")
        if "spec_decode" in self.strategies and self.spec_decode is None:
            raise ValueError("spec_decode: settings required when strategies include 'spec_decode'")
        if len(set(self.strategies)) != len(self.strategies):
            raise ValueError("strategies: duplicates")
        return self


# ------------------------------------------------------------------------------------- provenance
class Stamped(BaseModel):
    """How an output was made, so two outputs can be told apart and one reproduced: siliconmix's version,
    the fingerprint of the catalog files that priced it, and when (UTC). Absent from outputs stored before."""

    siliconmix_version: str | None = None
    catalog_fingerprint: str | None = None  # planner.catalog.catalog_fingerprint
    created_at: dt.datetime | None = None


# ---------------------------------------------------------------------------------------- estimate
class EstimateRequest(Frozen):
    """One model on one device configuration (what ``siliconmix estimate`` asks)."""

    model: Id
    device: Id
    dtype: WeightsDtype = "bf16"
    kv_dtype: WeightsDtype | None = None
    tp: Annotated[int, Field(ge=1, le=4096)] = 1
    ep: Annotated[int, Field(ge=1, le=4096)] = 1  # expert-parallel groups (data-parallel attention), divides tp
    #: pipeline stages across nodes on a GPU-like device, each a ``tp``-way TP group: ``tp × pp`` devices
    pp: Annotated[int, Field(ge=1, le=MAX_PP)] = 1
    batch: Annotated[int, Field(ge=1, le=65536)] = 1
    isl: Annotated[int, Field(ge=1, le=10_000_000)] = 2048
    osl: Annotated[int, Field(ge=1, le=1_000_000)] = 256
    paged_kv: bool = True

    @model_validator(mode="after")
    def _ep_divides_tp(self) -> EstimateRequest:
        if self.tp % self.ep:
            raise ValueError(f"ep: {self.ep} must divide tp {self.tp} (ep attention replicas of tp/ep devices each)")
        return self


Bound = Literal["compute", "memory", "communication", "overhead"]
ConfidenceLevel = Literal["calibrated", "extrapolated", "estimated"]


class Estimate(Frozen, Stamped):
    """The cost model's answer for one configuration, with the request it answers (``options``)."""

    model: str
    device: str
    dtype: str
    kv_dtype: str
    tp: int
    batch: int
    isl: int
    osl: int
    pp: int = 1  # pipeline stages: the replica is tp × pp devices
    ttft_ms: float
    tpot_ms: float
    output_tokens_per_s: float
    output_tokens_per_s_per_user: float
    output_tokens_per_s_per_device: float
    prefill_tokens_per_s: float
    weights_bytes_per_device: float
    kv_bytes_per_token: float
    kv_bytes_per_request: float
    max_batch_in_memory: int
    fits: bool
    bound: Bound
    prefill_bound: Bound
    decode_compute_ms: float
    decode_memory_ms: float
    decode_communication_ms: float
    decode_overhead_ms: float
    power_w: float
    ttft_ms_low: float
    ttft_ms_high: float
    tpot_ms_low: float
    tpot_ms_high: float
    output_tokens_per_s_low: float
    output_tokens_per_s_high: float
    confidence: ConfidenceLevel
    confidence_reasons: tuple[str, ...]
    source: str
    options: EstimateRequest | None = None


# -------------------------------------------------------------------------------------------- plan
PlanStatus = Literal["optimal", "feasible", "infeasible", "time_limit"]
Role = Literal["aggregated", "prefill", "decode"]


class Out(BaseModel):
    """Output types: immutable, serialised by alias (``class`` is a Python keyword)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)


class SolveSettings(Out):
    """The solve options a plan was made with (planner.optimize.PlanOptions as given; over REST, `time_limit_s` is
    the request's cap on the whole plan, of which each MILP solve got a share)."""

    solver: str
    engine: str | None
    time_limit_s: float
    relative_gap: float
    baseline: bool
    node_limit: int | None = None


class SolverInfo(Out):
    backend: str
    engine: str
    time_s: float
    gap: float | None
    engine_version: str = ""


def route_of(strategy: str, dtype: str | None) -> str:
    """A class's traffic split key: ``pd_disagg``, or ``pd_disagg@fp8`` when pools choose their dtype (a request's
    prefill and decode then run at one dtype, so each dtype is its own way through the strategy)."""
    return f"{strategy}@{dtype}" if dtype else strategy


def strategy_of(route: str) -> str:
    """The strategy of a route (``route_of``)."""
    return route.split("@", 1)[0]


class Pool(Out):
    """Replicas of one configuration serving one task of one class (or, shared, of several) under one strategy."""

    role: Role
    class_name: str = Field(alias="class")
    strategy: Strategy
    device: str
    tp: int
    batch: int
    replicas: int
    devices: int
    devices_by_type: dict[str, int]
    power_kw: float
    cost_usd_per_hour: float
    capex_usd: float
    utilization: float
    utilization_cap: float
    capacity_rps: float
    served_rps: float
    ttft_ms: float | None
    #: the step (decode) or round per token (speculative): TPOT before any wait for a slot
    tpot_ms: float | None
    #: a decode-side pool's wait for a free slot per output token at its planned utilisation (ms, at its SLO's
    #: statistic; planner/queueing.slot_wait_factor): a request sees TPOT ``tpot_ms + slot_wait_ms``; a shared pool's
    #: largest over its classes (each class's in ``slot_waits_ms``). 0 where there is no slot queue in TPOT (prefill
    #: pools; aggregated ones, whose requests take a slot before their first token)
    slot_wait_ms: float = 0.0
    #: a shared decode-side pool's slot wait per output token of each class it may serve (ms; shorter answers wait
    #: longer per token behind the longest); None for a pool of one class
    slot_waits_ms: dict[str, float] | None = None
    partner_device: str | None = None
    partner_tp: int | None = None
    partner_role: str | None = None
    partner_replicas: int | None = None  # partner replicas (draft servers, expert pools) serving the replicas
    draft_tokens: int | None = None  # a speculative pool's draft length k
    limited_by: str
    #: where measured TTFT / TPOT would fall (ms, low–high): the figure times its device family's calibration band
    #: (~80 % of leave-one-out residuals; wider when extrapolated, 0.5–2x uncalibrated). The band is the pool's own
    #: device's, and it scales a TTFT's queueing wait as it scales its service (a slower service also raises the
    #: utilisation the wait sees, so the high end of a loaded prefill pool is if anything understated)
    ttft_ms_range: tuple[float, float] | None = None
    tpot_ms_range: tuple[float, float] | None = None
    #: the pool's weights dtype when the workload lets pools choose (``dtypes``); None: the workload's ``dtype``
    dtype: str | None = None
    #: expert-parallel groups of a MoE pool: ``ep`` attention replicas of ``tp / ep`` devices each (data-parallel
    #: attention), the routed experts over all ``tp`` devices; 1: tensor parallelism alone
    ep: int = Field(default=1, ge=1)
    #: pipeline stages of a GPU replica across nodes, each a ``tp``-way TP group with its share of the layers: a
    #: replica is ``tp × pp`` devices; 1: no pipeline
    pp: int = Field(default=1, ge=1)
    #: a pool shared by several classes (``class`` is the one whose SLO bounds it): requests/s of each class it may
    #: serve (0 for one it carries none of)
    serves: dict[str, float] | None = None

    @property
    def route(self) -> str:
        """The way its class's traffic reaches it: its strategy, at its dtype when pools choose (``route_of``)."""
        return route_of(self.strategy, self.dtype)

    def slot_wait_of(self, class_name: str) -> float:
        """The slot wait per output token (ms) a request of ``class_name`` sees in this pool."""
        return self.slot_wait_ms if self.slot_waits_ms is None else self.slot_waits_ms.get(class_name, self.slot_wait_ms)

    def served_by_class(self) -> dict[str, float]:
        """Requests/s of each class the pool carries (the whole pool): its class's, or each class it shares."""
        if self.serves is not None:
            return {k: v for k, v in self.serves.items() if v > 0}
        return {self.class_name: self.served_rps} if self.served_rps > 0 else {}


class Totals(Out):
    devices: int
    devices_by_type: dict[str, int]
    power_kw: float
    it_power_kw: float
    cost_usd_per_hour: float
    capex_usd: float
    #: nodes each device type occupies (``⌈devices / devices_per_node⌉``); with ``whole_nodes`` the devices are
    #: those whole nodes, and ``idle_devices_by_type`` the ones no pool uses (charged power, $/h and capex)
    nodes_by_type: dict[str, int] = Field(default_factory=dict)
    idle_devices_by_type: dict[str, int] = Field(default_factory=dict)


class ClassResult(Out):
    name: str
    rate_rps: float
    rate_rps_served: float
    strategy_shares: dict[str, float]
    ttft_ms: float | None
    tpot_ms: float | None
    output_tokens_per_s_per_user: float | None
    #: the served-weighted ranges of its pools' (``Pool.ttft_ms_range``, ``tpot_ms_range``)
    ttft_ms_range: tuple[float, float] | None = None
    tpot_ms_range: tuple[float, float] | None = None


class Baseline(Out):
    """A single-device-type fleet under the same constraints (the best one, or the reference a buyer names)."""

    device: str | None
    goodput_scale: float
    power_kw: float
    cost_usd_per_hour: float
    status: PlanStatus
    capex_usd: float = 0.0
    devices: int = 0


class Alternative(Out):
    """A runner-up plan with a different device mix (``--alternatives``): its fleet, its figures, and how far it
    falls short of the best plan on the objective (relative, 0 = as good)."""

    devices_by_type: dict[str, int]
    goodput_scale: float
    power_kw: float
    cost_usd_per_hour: float
    status: PlanStatus
    shortfall: float


class Gain(Out):
    """The plan against one single-device-type fleet: the objective's ratio (above 1: the plan is better) and
    what changes in money. ``usd_per_million_tokens``: $/h over the output tokens served."""

    versus: Literal["best_homogeneous", "reference"]
    device: str
    objective_ratio: float | None
    cost_change_usd_per_hour: float
    capex_change_usd: float
    usd_per_million_tokens: float | None
    fleet_usd_per_million_tokens: float | None


class Gains(Out):
    """What heterogeneity buys, split: the best single device over the reference (``best_device``), and mixing
    devices over the best single device (``mixing``); their product is the plan over the reference."""

    against: tuple[Gain, ...]
    best_device: float | None = None
    mixing: float | None = None


class Footprint(Out):
    """A plan over a fleet the buyer already owns (``constraints.owned``): what it adds and what that buys.

    ``added``: devices beyond the owned ones, priced at the catalog (``added_*``); ``owned_only``: the best the
    owned devices do alone under the same constraints; ``gain``: the plan over it, in the objective (above 1:
    the additions help; None when the owned fleet alone serves nothing).
    """

    owned: dict[str, int]
    owned_used: dict[str, int]
    added: dict[str, int]
    added_cost_usd_per_hour: float
    added_capex_usd: float
    added_power_kw: float
    owned_only: Baseline
    gain: float | None


class Interactivity(Out):
    """A ``max_interactivity`` plan: every class's TPOT SLO scaled by ``tpot_factor`` (the smallest factor at
    which a fleet within the budgets serves the whole rate), and the best single-device-type fleet's factor.

    ``gain``: the homogeneous factor over the plan's (above 1: mixing devices serves the same throughput at
    that many times the output tokens/s per user); ``probes``: every factor tried and whether a fleet met it.
    """

    tpot_factor: float | None  # None: no fleet within the budgets serves the rates even at the stated SLOs
    tpot_ms: dict[str, float]
    output_tokens_per_s_per_user: dict[str, float]
    best_homogeneous: str | None
    best_homogeneous_factor: float | None
    gain: float | None
    reference: str | None = None  # the workload's baseline_device, searched the same way
    reference_factor: float | None = None
    probes: tuple[tuple[float, bool], ...]


class SimulatedMiss(Out):
    """A class metric the replay finds over its SLO (at the SLO's statistic), beyond its sampling noise."""

    class_name: str = Field(alias="class")
    metric: str
    statistic: str
    simulated: float
    target: float
    relative: float | None


class SimulationCheck(Out):
    """A plan replayed after solving (``simulate`` in the options; ``siliconmix simulate`` gives every figure):
    the verdict, what misses, and per class the simulated TTFT and TPOT at the SLO's statistic (ms)."""

    verdict: Literal["meets", "misses"]
    misses: tuple[SimulatedMiss, ...]
    simulated_ttft_ms: dict[str, float | None]
    simulated_tpot_ms: dict[str, float | None]
    requests: int
    duration_s: float
    seed: int


class SloShortfall(Out):
    """A class no allowed device serves within its SLO, with the best any device reaches."""

    class_name: str = Field(alias="class")
    slo: str
    required_ms: float
    best_ms: float | None
    best_device: str | None


class Diagnosis(Out):
    reason: Literal["slo_unreachable", "budget", "no_candidates"]
    message: str
    slo_shortfalls: tuple[SloShortfall, ...] = ()
    least_power_budget_kw: float | None = None
    relaxations: dict[str, float] = Field(default_factory=dict)


class Verification(Out):
    ok: bool
    max_violation: float
    checks: dict[str, bool]
    messages: tuple[str, ...] = ()


class DeviceConfidence(Out):
    """How far to trust the numbers behind one device type of a plan (the cost model's ``confidence``, at the
    plan's largest parallelism, prompt and batch on that device), and which of its catalog inputs are estimates."""

    device: str
    level: Literal["calibrated", "extrapolated", "estimated"]
    reasons: tuple[str, ...]
    estimated_inputs: tuple[str, ...] = ()


class SensitivitySide(Out):
    """The plan re-solved with one input moved by ``factor`` (``1 − δ`` or ``1 + δ``, clamped where the catalog
    field's range ends, e.g. an efficiency at 1): its objective, how far it moved, and its device mix."""

    factor: float
    value: float  # the input's value in the re-solve (of the input's first device)
    status: PlanStatus
    objective_value: float | None
    #: (re-solved − plan) / plan · 100; None when the re-solve finds no plan
    objective_change_pct: float | None
    devices_by_type: dict[str, int]
    #: total-variation distance between the device-count shares of the two fleets (0 same shares, 1 disjoint)
    share_shift: float | None
    #: the re-solved fleet uses other device types (one more or one less type counts, at any share)
    types_change: bool
    #: the shares moved by at least the analysis' ``share_threshold`` (a type coming or going with a smaller
    #: share, e.g. one device filling leftover power, is not a flip), or the re-solve found no plan
    mix_changes: bool
    cost_usd_per_hour: float
    power_kw: float


class SensitivityInput(Out):
    """One estimated input moved by −δ and +δ, and the verdict: ``sensitive`` when either side changes the
    device mix or moves the objective by more than the analysis' ``threshold``."""

    key: str  # "<target>.<field>"
    target: str  # the device id, or the family name for a family's efficiency term
    field: str  # the catalog field, as Device.provenance names it (tdp_w, peak_dense_tflops.bf16, efficiency.mbu)
    devices: tuple[str, ...]  # every device the move applies to (a family term: all its members in the catalog)
    base_value: float
    estimate: bool  # the catalog marks the number as an estimate
    source: str
    low: SensitivitySide
    high: SensitivitySide
    flips_mix: bool
    moves_objective: bool
    sensitive: bool


class NotTried(Out):
    """An input the analysis did not re-solve, and why."""

    key: str
    reason: str


class Sensitivity(Out):
    """Which estimated inputs could change the plan: each re-solved at ``1 ± delta`` (planner.sensitivity)."""

    delta: float
    threshold: float  # |objective change| above which an input is flagged (relative, 0.05 = 5 %)
    share_threshold: float
    max_inputs: int
    objective_quantity: Literal["goodput_scale", "cost_usd_per_hour", "power_kw", "tpot_factor"]
    objective_value: float
    #: the device types whose inputs were considered: the plan's (most devices first), then the best alternative's
    devices: tuple[str, ...]
    alternative_devices: tuple[str, ...] = ()  # those of ``devices`` only the best alternative uses
    inputs: tuple[SensitivityInput, ...]
    not_tried: tuple[NotTried, ...] = ()
    resolves: int
    time_s: float


#: goodput scales this close below 1 count as serving the demand (solver tolerance)
DEMAND_TOLERANCE = 1e-6


def meets_demand(status: str | None, goodput_scale: float) -> bool:
    """A plan serves its whole demand: it is not infeasible and its goodput scale is at least 1."""
    return status != "infeasible" and goodput_scale >= 1.0 - DEMAND_TOLERANCE


class Plan(Out, Stamped):
    """The answer: status, the fleet (pools and totals), what it predicts, what binds, the baseline;
    how it was made (``Stamped``, ``options``)."""

    status: PlanStatus
    objective: Objective
    model: str
    goodput_scale: float
    #: the fleet serves every class's whole rate (goodput scale ≥ 1); false for a plan that serves only part
    meets_demand: bool
    solver: SolverInfo
    pools: tuple[Pool, ...]
    totals: Totals
    classes: tuple[ClassResult, ...]
    binding_constraints: tuple[str, ...]
    baseline: Baseline | None
    gain: float | None
    graph: dict
    diagnosis: Diagnosis | None = None
    verification: Verification | None = None
    #: per device type the plan buys: how far its predictions can be trusted
    confidence: tuple[DeviceConfidence, ...] = ()
    #: the single-device fleet the workload names as its reference (``baseline_device``), and the gains
    reference: Baseline | None = None
    gains: Gains | None = None
    #: the best plans with other device mixes, best first (``alternatives`` in the options)
    alternatives: tuple[Alternative, ...] = ()
    #: what the plan adds to the owned fleet, and what the addition buys (when the workload owns devices)
    footprint: Footprint | None = None
    #: the tightest TPOT the fleet serves the rates at, and the best homogeneous fleet's (max_interactivity)
    interactivity: Interactivity | None = None
    #: which estimated inputs could flip the device mix or move the objective (``sensitivity`` in the options)
    sensitivity: Sensitivity | None = None
    #: the plan replayed request by request (``simulate`` in the options)
    simulation: SimulationCheck | None = None
    workload: Workload
    options: SolveSettings | None = None

    @model_validator(mode="before")
    @classmethod
    def _meets_demand(cls, data):
        """Plans stored before ``meets_demand`` existed get it from their status and goodput scale."""
        if isinstance(data, dict) and "meets_demand" not in data:
            data = {**data, "meets_demand": meets_demand(data.get("status"), data.get("goodput_scale", 0.0))}
        return data
