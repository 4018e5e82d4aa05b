"""The simulator against closed forms: M/D/1 waits, a pool at light load, Little's law, determinism.

A stand-in cost model gives service times that are round numbers, so the expected figures can be written
out by hand: a prefill pass takes 0.1 s whatever the batch, a step ``0.01 + 1e-5·(b + p)`` s over ``b``
decode sequences and ``p`` prefill tokens; no KV bytes move (zero transfer time).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from planner.optimize import plan_workload
from planner.perf.model import RooflineModel
from planner.schema import Plan, Workload
from planner.simulate import SimulationError, SimulationOptions, SimulationStopped, simulate_plan
from planner.simulate.service import StepService
from planner.simulate.summary import sampling_noise_ms, weighted_quantiles
from planner.simulate.traffic import arrival_times, clock_of, interarrival_gaps, load_integral

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workloads"
PREFILL_S = 0.1


class RoundNumbers:
    """A cost model whose passes take round numbers of seconds (see the module docstring)."""

    def profile(self, model_id, weights_dtype, kv_dtype=None):
        return SimpleNamespace(kv_bytes=lambda tokens: 0.0)

    def silicon(self, device, weights_dtype):
        return SimpleNamespace(nic_bytes_s=1e11, nic_latency_s=0.0)

    def prefill(self, model, hw, devices, new_tokens, cached_tokens=0.0, prompts=1.0, ep=1, pp=1):
        return SimpleNamespace(total_s=np.full(np.shape(prompts), PREFILL_S))

    def decode(self, model, hw, devices, batch, context_tokens, prefill_tokens=0.0, ep=1, prefill_context_tokens=None,
               pp=1):
        return SimpleNamespace(total_s=0.01 + 1e-5 * (np.asarray(batch, dtype=float) + prefill_tokens))

    def af_decode(self, model, attention, attention_devices, experts, expert_devices, batch, context_tokens,
                  link_bytes_s, link_latency_s, sharing=1):
        return SimpleNamespace(total_s=0.02 + 1e-5 * sharing * np.asarray(batch, dtype=float))

    def spec_round_s(self, draft_step_s, draft_tokens, verify_step_s, round_trip_s=0.0):
        return draft_tokens * draft_step_s + verify_step_s + round_trip_s


def one_pool_plan(role: str, strategy: str, batch: int, served_rps: float, ttft_slo_ms: float = 1000.0,
                  tpot_ms: float | None = None, output_tokens: int = 10, **pool_fields) -> Plan:
    """A plan of one single-replica pool serving class ``c`` (input 1000 tokens, no prefix reuse); speculative
    pools draft with α = 0.5."""
    rc = {"name": "c", "rate_rps": served_rps, "input_tokens": 1000, "output_tokens": output_tokens,
          "slo": {"ttft_ms": ttft_slo_ms, "tpot_ms": 50.0}}
    pool = {"role": role, "class": "c", "strategy": strategy, "device": "d", "tp": 1, "batch": batch, "replicas": 1,
            "devices": 1, "devices_by_type": {"d": 1}, "power_kw": 1.0, "cost_usd_per_hour": 1.0, "capex_usd": 1.0,
            "utilization": 0.5, "utilization_cap": 0.95, "capacity_rps": 2 * served_rps, "served_rps": served_rps,
            "ttft_ms": None if role == "decode" else 100.0, "tpot_ms": tpot_ms, "limited_by": "slo.ttft_ms",
            **pool_fields}
    totals = {"devices": 1, "devices_by_type": {"d": 1}, "power_kw": 1.0, "it_power_kw": 1.0,
              "cost_usd_per_hour": 1.0, "capex_usd": 1.0}
    return Plan.model_validate({
        "status": "optimal", "objective": "max_goodput", "model": "m", "goodput_scale": 1.0,
        "solver": {"backend": "b", "engine": "e", "time_s": 0.0, "gap": 0.0}, "pools": [pool], "totals": totals,
        "classes": [{"name": "c", "rate_rps": served_rps, "rate_rps_served": served_rps,
                     "strategy_shares": {strategy: 1.0}, "ttft_ms": 100.0, "tpot_ms": tpot_ms,
                     "output_tokens_per_s_per_user": None}],
        "binding_constraints": [], "baseline": None, "gain": None, "graph": {},
        "workload": {"model": "m", "classes": [rc], "strategies": [strategy], "constraints": {"power_budget_kw": 10},
                     "spec_decode": {"draft_model": "d", "acceptance_rate": 0.5}},
    })


def test_md1_pool_waits_as_pollaczek_khinchine():
    """Batch 1, S = 0.1 s, λ = 8/s: ρ = 0.8, mean wait ρS/(2(1−ρ)) = 0.8·0.1/0.4 = 0.200 s, so mean TTFT 0.300 s;
    a share ρ = 0.8 of the arrivals waits at all (PASTA); the 90th/99th percentile waits are 0.5012 s / 1.0356 s
    (Cramér–Lundberg: θS = 0.43084 solves 0.8(e^x − 1) = x, C = 0.2/(0.8·e^0.43084 − 1) = 0.86639,
    t_p = ln(C/(1 − p))/θ), so TTFT p90 = 0.601 s and p99 = 1.136 s."""
    plan = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0)
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=6000, seed=3, max_replicas=1))
    ttft = sim.classes[0].ttft
    assert ttft.mean_ms == pytest.approx(300.0, rel=0.03)
    assert ttft.p90_ms == pytest.approx(601.2, rel=0.04)
    assert ttft.p99_ms == pytest.approx(1135.6, rel=0.06)
    waited = 1.0 - ttft.curve_ms.index(next(x for x in ttft.curve_ms if x > 100.0 + 1e-6)) / 100.0
    assert waited == pytest.approx(0.80, abs=0.02)
    pool = sim.pools[0]
    assert pool.utilization == pytest.approx(0.80, rel=0.02)
    assert pool.mean_queue == pytest.approx(8.0 * 0.2, rel=0.05)  # Lq = λW = 1.6 waiting


def test_light_load_batch_one_ttft_is_the_service_time():
    """λ = 0.1/s on S = 0.1 s: ρ = 0.01, mean wait 0.01·0.1/(2·0.99) = 0.505 ms, so TTFT ≈ 100.5 ms, median 100 ms."""
    plan = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=0.1)
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=20000, seed=1, max_replicas=1))
    ttft = sim.classes[0].ttft
    assert ttft.p50_ms == pytest.approx(100.0, abs=1e-9)
    assert ttft.mean_ms == pytest.approx(100.505, rel=0.002)


def test_aggregated_pool_at_batch_one_light_load():
    """One sequence at a time: the 1000-token prompt rides one step of p = 1008 (rounded up to 16 tokens) at b = 0,
    0.01 + 1e-5·1008 = 20.08 ms; each of the 9 further tokens a step at b = 1, 0.01 + 1e-5 = 10.01 ms. The slot is
    an M/D/1 server of S = 20.08 + 9·10.01 = 110.17 ms at ρ = 0.05·0.11017 = 0.0055085: mean wait
    ρS/(2(1−ρ)) = 0.305 ms, so mean TTFT 20.385 ms."""
    plan = one_pool_plan("aggregated", "aggregated", batch=1, served_rps=0.05, tpot_ms=10.01)
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=20000, seed=2, max_replicas=1))
    c = sim.classes[0]
    assert c.ttft.p50_ms == pytest.approx(20.08, abs=1e-9)
    assert c.tpot.p50_ms == pytest.approx(10.01, abs=1e-9)
    assert c.ttft.mean_ms == pytest.approx(20.385, rel=0.004)


def test_class_latency_mixes_pools_by_their_traffic():
    """Pool A (1 replica, 2/s, ρ = 0.2): mean TTFT 100 + 0.2·100/1.6 = 112.5 ms; pool B (10 replicas, 80/s, 1 of them
    simulated at 8/s, ρ = 0.8): 300 ms. By traffic the class mean is (2·112.5 + 80·300)/82 = 295.4 ms (by sample
    count it would be (2·112.5 + 8·300)/10 = 262.5 ms)."""
    base = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=2.0)
    a = base.pools[0]
    b = a.model_copy(update={"replicas": 10, "served_rps": 80.0, "device": "e"})
    plan = base.model_copy(update={"pools": (a, b)})
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=6000, seed=3, max_replicas=1))
    assert [p.simulated_replicas for p in sim.pools] == [1, 1]
    assert sim.pools[0].simulated_ttft_ms == pytest.approx(112.5, rel=0.02)
    assert sim.classes[0].ttft.mean_ms == pytest.approx(295.4, rel=0.03)
    assert sim.pools[1].arrival_rps == pytest.approx(80.0, rel=0.02)  # one replica's arrivals × 10


def test_verdict_names_the_class_metric_and_excess():
    """The M/D/1 pool above (mean TTFT ≈ 300 ms) against a 250 ms TTFT SLO misses by ≈ 50 ms; against 400 ms it meets."""
    tight = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0, ttft_slo_ms=250.0)
    sim = simulate_plan(tight, RoundNumbers(), SimulationOptions(duration_s=3000, seed=3, max_replicas=1))
    assert sim.verdict == "misses"
    (miss,) = sim.misses
    assert (miss.class_name, miss.metric, miss.statistic) == ("c", "ttft_ms", "mean")
    assert miss.excess == pytest.approx(50.0, abs=15.0)
    loose = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0, ttft_slo_ms=400.0)
    assert simulate_plan(loose, RoundNumbers(), SimulationOptions(duration_s=3000, seed=3, max_replicas=1)).verdict == "meets"


def test_decode_pool_little_law_and_batch_occupancy():
    """Decode of 10 tokens (9 steps after the prefill's first) at λ = 20/s, batch 64: a request stays ≈ 9 steps of
    ≈ 0.01 + 1e-5·b s; L = λW ≈ 20 · 9 · 0.0100 ≈ 1.8 sequences, and TPOT = W / 9. An arrival while the replica
    steps (a share ``u`` of the time) waits for the step under way to end, half a 10.02 ms step on average, so the
    queue holds λ · u · 5.01 ms (0.1 · u)."""
    plan = one_pool_plan("decode", "pd_disagg", batch=64, served_rps=20.0, tpot_ms=10.0)
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=2000, seed=5, max_replicas=1))
    pool = sim.pools[0]
    assert pool.littles_ratio == pytest.approx(1.0, abs=0.01)
    assert pool.mean_in_system == pytest.approx(20 * 9 * 0.01, rel=0.05)
    # running + waiting = in the pool, but for the 2 sequences already running at t = 0 (≈ 0.09 s of 2,000 s)
    assert pool.occupancy * 64 + pool.mean_queue == pytest.approx(pool.mean_in_system, rel=1e-4)
    assert pool.mean_queue == pytest.approx(20 * pool.utilization * 0.00501, rel=0.03)
    # TPOT over the requests measured after the warm-up, the sojourn over every arrival
    assert sim.classes[0].tpot.mean_ms == pytest.approx(pool.mean_sojourn_ms / 9, rel=1e-3)


@pytest.fixture(scope="module")
def chat_plan(catalog):
    workload = Workload.model_validate(yaml.safe_load((EXAMPLES / "chat-70b.yaml").read_text()))
    return plan_workload(workload, catalog)


def test_little_law_on_every_pool_of_a_real_plan(chat_plan, catalog):
    sim = simulate_plan(chat_plan, RooflineModel(catalog), SimulationOptions(duration_s=1200, seed=1))
    assert sim.pools and sim.unfinished == 0
    for pool in sim.pools:
        assert pool.littles_ratio == pytest.approx(1.0, abs=0.03), pool
    assert {c.name for c in sim.classes} == {c.name for c in chat_plan.workload.classes}


def test_same_seed_same_result_and_another_seed_differs(chat_plan, catalog):
    costs = RooflineModel(catalog)
    options = SimulationOptions(duration_s=120, seed=7, arrivals="gamma", cv=2.0)
    first, again = simulate_plan(chat_plan, costs, options), simulate_plan(chat_plan, costs, options)
    assert first.model_dump() == again.model_dump()
    other = simulate_plan(chat_plan, costs, options.model_copy(update={"seed": 8}))
    assert other.classes[0].ttft != first.classes[0].ttft


def test_a_plan_without_traffic_is_refused():
    plan = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=1.0)
    idle = plan.model_copy(update={"pools": (plan.pools[0].model_copy(update={"served_rps": 0.0}),)})
    with pytest.raises(SimulationError, match="no pool that serves traffic"):
        simulate_plan(idle, RoundNumbers())


def test_speculative_rounds_yield_their_expected_tokens():
    """α = 0.5, k = 2: a round yields 1 + min(2, G) tokens, mean (1 − 0.5³)/(1 − 0.5) = 1.75, so 7,000 tokens take
    ≈ 4,000 rounds (at most 7,000, at least ⌈7000/3⌉ = 2,334)."""
    service = StepService(batch=1, price=lambda p: np.zeros(2), draft_tokens=2, acceptance_rate=0.5)
    rounds = service.rounds_for(np.random.default_rng(0), 7000)
    assert rounds == pytest.approx(4000, rel=0.03)
    assert StepService(batch=1, price=lambda p: np.zeros(2)).rounds_for(np.random.default_rng(0), 7000) == 7000


def test_weighted_quantiles_by_hand():
    values = np.array([4.0, 1.0, 3.0, 2.0])
    assert list(weighted_quantiles(values, np.ones(4), (25, 50, 75, 100))) == [1.0, 2.0, 3.0, 4.0]
    # weights 3:1:0:0 on 1, 2: 75 % of the mass sits on 1
    assert list(weighted_quantiles(np.array([1.0, 2.0, 3.0, 4.0]), np.array([3.0, 1.0, 0.0, 0.0]), (50, 75, 90))) == [1.0, 1.0, 2.0]


def test_gamma_gaps_have_the_asked_mean_and_cv():
    """Rate 4/s, CV 2: mean gap 0.25 s, standard deviation 0.5 s."""
    gaps = interarrival_gaps(np.random.default_rng(11), 4.0, "gamma", 2.0, 400_000)
    assert gaps.mean() == pytest.approx(0.25, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.02)


def test_should_stop_abandons_the_run_part_way():
    plan = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0)
    asked = []

    def stop_on_third() -> bool:
        asked.append(1)
        return len(asked) == 3

    with pytest.raises(SimulationStopped, match="stopped at 300 s of 10000 s"):
        simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=10_000, max_replicas=1), stop_on_third)


def test_clock_of_a_stepped_load_by_hand():
    """Steps m = 1 on [0, 10), 0 on [10, 20), 2 from 20: Λ(10) = Λ(20) = 10, so u = 5 → 5 s, u = 10 → 20 s (the idle
    step skipped), u = 14 → 20 + 4/2 = 22 s; Λ(25) = 10 + 2·5 = 20. A last step at 0: past Λ = 10, never."""
    starts, m = np.array([0.0, 10.0, 20.0]), np.array([1.0, 0.0, 2.0])
    assert list(clock_of(np.array([5.0, 10.0, 14.0]), starts, m)) == [5.0, 20.0, 22.0]
    assert list(load_integral(np.array([5.0, 15.0, 25.0]), starts, m)) == [5.0, 10.0, 20.0]
    assert clock_of(np.array([12.0]), np.array([0.0, 10.0]), np.array([1.0, 0.0]))[0] == np.inf


def test_arrivals_follow_the_load_and_keep_their_cv():
    """Rate 100/s at ×0.5 for 50 s then ×2: ≈ 2,500 arrivals, then ≈ 10,000 in the next 50 s; gamma CV 2 gaps stay
    CV 2 inside a step (a time change divides every gap by the same m)."""
    load = (np.array([0.0, 50.0]), np.array([0.5, 2.0]))
    times = []
    for t in arrival_times(np.random.default_rng(4), 100.0, "gamma", 2.0, load):
        if t >= 100.0:
            break
        times.append(t)
    times = np.asarray(times)
    assert (times < 50).sum() == pytest.approx(2500, rel=0.08)
    assert (times >= 50).sum() == pytest.approx(10000, rel=0.04)
    gaps = np.diff(times[times >= 50])
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.06)


def test_an_overload_shows_when_the_fleet_falls_behind():
    """The M/D/1 pool (S = 0.1 s, 8/s: mean TTFT 300 ms) at ×1.5 from 200 s to 300 s (ρ = 1.2: the queue grows by
    2 a second, 0.2 s of wait each second): with a 600 ms SLO (twice the steady mean, which 30 s stretches of the
    steady queue stay under) the timeline turns over it in the stretch the overload begins in ([180, 210) s: arrivals
    after 200 s wait 0.2 s more each second) or the next, and the load there is 1.5."""
    plan = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0, ttft_slo_ms=600.0)
    load = ({"start_s": 0, "multiplier": 1.0}, {"start_s": 200, "multiplier": 1.5}, {"start_s": 300, "multiplier": 1.0})
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=600, seed=2, max_replicas=1, load=load))
    c = sim.classes[0]
    assert c.behind_from_s in (180.0, 210.0)
    stretch = {p.start_s: p for p in c.timeline}
    assert stretch[210.0].load == pytest.approx(1.5) and stretch[180.0].load == pytest.approx((20 + 10 * 1.5) / 30)
    assert stretch[240.0].ttft_ms > 2000.0  # 40 s into the overload: ≈ 8 s of queue
    assert all(stretch[s].ttft_ms < 600.0 for s in (60.0, 90.0, 120.0, 150.0))
    assert sim.verdict == "misses" and sim.unfinished == 0


def test_load_steps_are_checked():
    with pytest.raises(ValueError, match="first step must start at 0"):
        SimulationOptions(load=({"start_s": 5, "multiplier": 1.0},))
    with pytest.raises(ValueError, match="step starts must increase"):
        SimulationOptions(load=({"start_s": 0, "multiplier": 1.0}, {"start_s": 0, "multiplier": 2.0}))


def test_sampling_noise_by_hand():
    """Pool A (3/s of the class) ran two replicas with mean TTFT 1 s and 3 s: s = √2, standard error √2/√2 = 1 s;
    pool B (1/s) two replicas at 2 s: no spread. Noise = 1.96 · (3/4 · 1 s) = 1.47 s = 1,470 ms."""
    def tally(*values):
        return SimpleNamespace(ttft_s={"c": [(0.0, v) for v in values]})
    a = SimpleNamespace(traffic={"c": 3.0}, tallies=[tally(0.5, 1.5), tally(3.0)])
    b = SimpleNamespace(traffic={"c": 1.0}, tallies=[tally(2.0), tally(2.0)])
    assert sampling_noise_ms([a, b], "c", "ttft_s", None) == pytest.approx(1470.0)
    assert sampling_noise_ms([b], "c", "ttft_s", None) == 0.0
    assert sampling_noise_ms([SimpleNamespace(traffic={"c": 1.0}, tallies=[tally(1.0)])], "c", "ttft_s", None) is None


def test_a_miss_within_its_sampling_noise_does_not_fail_the_verdict():
    """Four replicas of the M/D/1 pool (mean TTFT ≈ 300 ms) against a 295 ms SLO: over by a few ms, less than the
    spread across four 3,000 s replicas; against 250 ms, over by ≈ 50 ms, more than that spread."""
    base = one_pool_plan("prefill", "pd_disagg", batch=1, served_rps=8.0, ttft_slo_ms=295.0)
    four = base.model_copy(update={"pools": (base.pools[0].model_copy(update={"replicas": 4, "served_rps": 32.0}),)})
    sim = simulate_plan(four, RoundNumbers(), SimulationOptions(duration_s=3000, seed=3))
    (miss,) = sim.misses
    assert miss.noise is not None and 0 < miss.excess <= miss.noise and miss.within_noise
    assert sim.verdict == "meets"
    tight = four.model_copy(update={"workload": four.workload.model_copy(update={"classes": (
        four.workload.classes[0].model_copy(update={"slo": four.workload.classes[0].slo.model_copy(update={"ttft_ms": 250.0})}),)})})
    again = simulate_plan(tight, RoundNumbers(), SimulationOptions(duration_s=3000, seed=3))
    assert again.verdict == "misses" and not again.misses[0].within_noise


def test_a_speculative_pool_at_light_load_runs_rounds_of_random_yield():
    """k = 2 drafts, α = 0.5, batch 1: a round is 2 · 10.01 ms of draft + 10.03 ms of verify (b = 1 with its 2 drafted
    tokens) = 30.05 ms and yields T = 1, 2, 3 tokens with chances ½, ¼, ¼ (mean 1.75, E[T²] = 3.75). 1,000 tokens
    after the first take (1000 + E[T(T−1)]/(2·E[T]))/1.75 = (1000 + 0.571)/1.75 = 571.75 rounds (Wald, with the
    mean overshoot): 17.18 s, TPOT 17.18 ms. The slot is an M/D/1 server at ρ = 0.001 · 17.18 = 0.0172: a mean wait
    of 0.0172 · 17.18/(2 · 0.983) = 0.150 s, 0.15 ms a token, so TPOT ≈ 17.33 ms (four replicas, ≈ 90 requests; the
    1.7 % that wait, up to 17 ms a token more, make the mean's standard error ≈ 0.15 ms: hence 3 %). The median
    request waits for nothing: 571.75 · 30.05/1000 ≈ 17.18 ms."""
    plan = one_pool_plan("decode", "spec_decode", batch=1, served_rps=0.004, tpot_ms=17.2, output_tokens=1001,
                         draft_tokens=2, replicas=4)  # 0.001/s a replica
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=25_000, seed=1, max_replicas=4))
    tpot = sim.classes[0].tpot
    assert tpot.mean_ms == pytest.approx(17.33, rel=0.03)
    assert tpot.p50_ms == pytest.approx(17.18, rel=0.005)
    assert tpot.p99_ms - tpot.p50_ms > 0.2  # the yield varies request to request


def test_an_af_pool_steps_at_its_ping_pong_step():
    """The stand-in AF step is 0.02 + 1e-5·b s: one sequence at a time, every token 20.01 ms."""
    plan = one_pool_plan("decode", "af_disagg", batch=1, served_rps=0.02, tpot_ms=20.01, partner_device="e",
                         partner_tp=2, partner_role="ffn")
    sim = simulate_plan(plan, RoundNumbers(), SimulationOptions(duration_s=20000, seed=1, max_replicas=1))
    assert sim.classes[0].tpot.p50_ms == pytest.approx(20.01, abs=1e-9)


def test_a_shared_pools_step_is_the_slot_weighted_mean_of_its_classes_steps():
    """Class a steps 10 ms at 4 sequences, b 30 ms: one a and three b step (10 + 3·30) / 4 = 25 ms; a class the
    pool has no step of (a warm start's) steps at the pool's own, 20 ms; no mix given, the pool's own."""
    table = lambda *ms: (lambda p: np.array(ms) / 1000.0)  # noqa: E731  seconds over b = 0 … 4
    a, b = StepService(4, table(0, 1, 2, 5, 10)), StepService(4, table(0, 1, 2, 5, 30))
    pool = StepService(4, table(0, 1, 2, 5, 20), by_class={"a": a, "b": b})
    assert pool.step_s(4, 0, {"a": 1, "b": 3}) == pytest.approx(0.025)
    assert pool.step_s(4, 0, {"a": 1, "": 3}) == pytest.approx((0.010 + 3 * 0.020) / 4)
    assert pool.step_s(4) == pytest.approx(0.020)


@pytest.mark.parametrize("path", ["examples/workloads/shared-pools.yaml"])
def test_a_shared_pool_plan_meets_its_replay(path, catalog):
    """The shipped shared-pools plan replayed request by request: every class within its SLOs (priced at the
    slowest class's step for every sequence, its decode pool ran past its capacity: TPOT 1.5 s for a 60 ms SLO)."""
    workload = Workload.model_validate(yaml.safe_load(Path(path).read_text()))
    plan = plan_workload(workload, catalog)
    sim = simulate_plan(plan, RooflineModel(catalog), SimulationOptions(duration_s=300.0, seed=1))
    assert sim.verdict == "meets", sim.misses
