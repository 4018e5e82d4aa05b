"""Multi-year cost of owning the fleet: ramp, spares, support, discounting; NPV and $ per million tokens by year.

Conventions (the TCO by year sheet writes the same formulas):
- the fleet to buy is (device capex + network capex) x (1 + spares share); in year y a share ramp[y] of it is
  in service, and the increase max(0, ramp[y] - ramp[y-1]) is bought at the start of year y (ramp[0] = 0);
- opex (energy + hosting, per year at the full fleet) and the service tokens scale with ramp[y]; spares on
  the shelf draw no power;
- support per year = support share x capex bought so far;
- purchases at the start of year y are discounted by (1 + r)^(y-1), the year's opex and support by (1 + r)^y;
- cost per million tokens in year y = (capital charge + opex + support) / million tokens, where the capital
  charge is the capital recovery factor CRF = r / (1 - (1 + r)^-n) (1 / n when r = 0) times the purchases
  still being repaid (bought in year k with y - k < n, the depreciation period): the level payment that
  repays each purchase at rate r in n years;
- levelised $ per million tokens = NPV of costs / present value of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

#: rows the sheet lays out; the horizon input picks how many count
MAX_YEARS = 10


@dataclass(frozen=True)
class LifetimeInputs:
    """The assumptions of the multi-year view (defaults are assumptions to change, not sources)."""

    tco_years: int = 5
    discount_rate: float = 0.08
    spares_share: float = 0.03
    support_share: float = 0.10
    ramp: tuple[float, ...] = (0.5,) + (1.0,) * (MAX_YEARS - 1)


@dataclass(frozen=True)
class Year:
    """One year of the multi-year view."""

    year: int
    in_service: float
    capex_usd: float
    opex_usd: float
    support_usd: float
    pv_usd: float
    million_tokens: float
    pv_million_tokens: float
    capital_charge_usd: float
    usd_per_million_tokens: float | None

    @property
    def cash_usd(self) -> float:
        """capex bought + opex + support."""
        return self.capex_usd + self.opex_usd + self.support_usd


@dataclass(frozen=True)
class Lifetime:
    years: tuple[Year, ...]
    fleet_capex_usd: float
    crf: float
    npv_usd: float
    levelised_usd_per_million_tokens: float | None


def capital_recovery_factor(rate: float, years: float) -> float:
    """CRF = r / (1 − (1 + r)^−n); 1 / n at r = 0 (yearly payment per $ of capex)."""
    return 1.0 / years if rate == 0 else rate / (1.0 - (1.0 + rate) ** -years)


def lifetime_of(inputs: LifetimeInputs, capex_usd: float, opex_usd_per_year: float,
                million_tokens_per_year: float, depreciation_years: float) -> Lifetime:
    """The yearly table for ``capex_usd`` (devices + network), at full-fleet opex and tokens per year."""
    fleet = capex_usd * (1.0 + inputs.spares_share)
    r = inputs.discount_rate
    crf = capital_recovery_factor(r, depreciation_years)
    rows, purchases, previous = [], [], 0.0
    for y in range(1, MAX_YEARS + 1):
        within = y <= inputs.tco_years
        share = inputs.ramp[y - 1] if within else 0.0
        capex = max(0.0, share - previous) * fleet if within else 0.0
        purchases.append(capex)
        opex = share * opex_usd_per_year
        support = inputs.support_share * sum(purchases) if within else 0.0
        tokens = share * million_tokens_per_year
        repaying = sum(c for k, c in enumerate(purchases, start=1) if y - k < depreciation_years)
        charge = crf * repaying if within else 0.0
        rows.append(Year(
            year=y, in_service=share, capex_usd=capex, opex_usd=opex, support_usd=support,
            pv_usd=capex / (1 + r) ** (y - 1) + (opex + support) / (1 + r) ** y, million_tokens=tokens,
            pv_million_tokens=tokens / (1 + r) ** y, capital_charge_usd=charge,
            usd_per_million_tokens=(charge + opex + support) / tokens if tokens > 0 else None,
        ))
        previous = share if within else previous
    npv = sum(row.pv_usd for row in rows)
    pv_tokens = sum(row.pv_million_tokens for row in rows)
    return Lifetime(tuple(rows), fleet, crf, npv, npv / pv_tokens if pv_tokens > 0 else None)
