"""Network sizing, the multi-year TCO and mix text, checked against hand-computed numbers."""

from __future__ import annotations

import pytest

from planner.export.lifetime import MAX_YEARS, LifetimeInputs, capital_recovery_factor, lifetime_of
from planner.export.mix import mix_text
from planner.export.network import NetworkInputs, Priced, Transfer, fabric_of, ports_per_side


def network(tiers=2.0) -> NetworkInputs:
    return NetworkInputs(port_gbps=Priced(400, "t"), nic_usd=Priced(1_000, "t"), transceiver_usd=Priced(500, "t"),
                         switch_port_usd=Priced(600, "t"), link_utilization=Priced(0.5, "t"),
                         fabric_tiers=Priced(tiers, "t"))


def test_ports_from_a_known_transfer_volume():
    """1,000 req/s x 250 MB = 250 GB/s = 2,000 Gb/s; at 400 Gb/s x 50% = 200 Gb/s a port: 10 ports per end."""
    kv = Transfer("chat", "pd_disagg", "kv_cache", served_rps=1_000, bytes_per_request=250e6)
    assert kv.gb_s == pytest.approx(250.0)
    assert ports_per_side(kv.gb_s, 400, 0.5) == 10
    assert ports_per_side(250.0001, 400, 0.5) == 11 and ports_per_side(0.0, 400, 0.5) == 0
    fabric = fabric_of([kv], network())
    # 20 NIC ports (both ends); leaf-spine: 3 switch ports and 4 transceivers per NIC port
    assert (fabric.nic_ports, fabric.switch_ports, fabric.transceivers) == (20, 60, 80)
    assert fabric.capex_usd == 20 * 1_000 + 80 * 500 + 60 * 600 == 96_000
    single = fabric_of([kv], network(tiers=1.0))
    assert (single.switch_ports, single.transceivers) == (20, 40)


def test_capital_recovery_factor_by_hand():
    assert capital_recovery_factor(0.0, 4) == 0.25
    assert capital_recovery_factor(0.1, 2) == pytest.approx(0.1 / (1 - 1.1 ** -2))  # 0.576190...
    assert capital_recovery_factor(0.1, 2) == pytest.approx(0.5761905, rel=1e-6)


def test_npv_of_a_known_cash_flow():
    """$1,000 of fleet, no spares, 10% support, 10% discount, 2 years, ramp 50% then 100%, opex $200/yr at
    full fleet, 100 M tokens/yr at full fleet, 2-year depreciation.

    year 1: buy $500 (PV 500), opex 100, support 50 -> PV 150 / 1.1 = 136.36; tokens 50 -> PV 45.45
    year 2: buy $500 (PV 500 / 1.1 = 454.55), opex 200, support 100 -> PV 300 / 1.21 = 247.93; tokens 100 -> 82.64
    NPV = 500 + 136.36 + 454.55 + 247.93 = 1,338.84; levelised = 1,338.84 / 128.10 = 10.452 $/M
    """
    inputs = LifetimeInputs(tco_years=2, discount_rate=0.1, spares_share=0.0, support_share=0.1,
                            ramp=(0.5, 1.0) + (1.0,) * (MAX_YEARS - 2))
    life = lifetime_of(inputs, capex_usd=1_000, opex_usd_per_year=200, million_tokens_per_year=100,
                       depreciation_years=2)
    y1, y2, y3 = life.years[:3]
    assert (y1.capex_usd, y1.opex_usd, y1.support_usd, y1.million_tokens) == (500, 100, 50, 50)
    assert (y2.capex_usd, y2.opex_usd, y2.support_usd, y2.million_tokens) == (500, 200, 100, 100)
    assert y1.pv_usd == pytest.approx(500 + 150 / 1.1)
    assert y2.pv_usd == pytest.approx(500 / 1.1 + 300 / 1.21)
    assert y3.cash_usd == 0 and y3.usd_per_million_tokens is None  # past the horizon
    assert life.npv_usd == pytest.approx(1_338.84, abs=0.01)
    assert life.levelised_usd_per_million_tokens == pytest.approx(1_338.84 / (50 / 1.1 + 100 / 1.21), rel=1e-4)
    crf = 0.5761905
    assert y1.usd_per_million_tokens == pytest.approx((500 * crf + 100 + 50) / 50, rel=1e-6)
    assert y2.capital_charge_usd == pytest.approx(1_000 * crf, rel=1e-6)  # both purchases are being repaid


def test_a_purchase_stops_being_charged_after_its_depreciation_period():
    """Ramp 50%, 100%, 100%; 2-year depreciation at 0%: CRF 0.5. Year 3 repays only the year-2 purchase."""
    inputs = LifetimeInputs(tco_years=3, discount_rate=0.0, spares_share=0.0, support_share=0.0,
                            ramp=(0.5,) + (1.0,) * (MAX_YEARS - 1))
    life = lifetime_of(inputs, capex_usd=1_000, opex_usd_per_year=0, million_tokens_per_year=10, depreciation_years=2)
    assert [y.capital_charge_usd for y in life.years[:4]] == [250, 500, 250, 0]
    assert life.npv_usd == 1_000  # undiscounted: the capex, once
    assert life.levelised_usd_per_million_tokens == pytest.approx(1_000 / 25)


def test_spares_are_bought_but_draw_no_power():
    life = lifetime_of(LifetimeInputs(tco_years=1, spares_share=0.05, ramp=(1.0,) * MAX_YEARS), 1_000, 10, 1, 3)
    assert life.fleet_capex_usd == pytest.approx(1_050) and life.years[0].opex_usd == 10


def test_mix_text_reads_like_a_person_writes_it():
    assert mix_text('{"cs-3": 4, "h200": 8}') == "8× h200, 4× cs-3"
    assert mix_text({"trn2": 1998, "gb200": 26, "cs-3": 12}) == "1,998× trn2, 26× gb200, 12× cs-3"
    assert mix_text("{}") == "none" and mix_text(None) == "none"
