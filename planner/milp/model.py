"""IlpModel: a solver-neutral mixed-integer linear program held as numpy arrays.

minimise ``c·x`` subject to ``row_lo ≤ A x ≤ row_hi`` and ``var_lb ≤ x ≤ var_ub``, with
``x[j]`` integer where ``var_is_integer[j]``. Rows and variables carry names (``family:key``) so a
solution, a binding row or an infeasibility reads in the problem's own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class IlpModel:
    """Arrays of one MILP. ``A`` is given as COO triplets (``row``, ``col``, ``val``)."""

    var_names: tuple[str, ...]
    var_lb: np.ndarray
    var_ub: np.ndarray
    var_is_integer: np.ndarray
    objective: np.ndarray
    row_names: tuple[str, ...]
    row_lo: np.ndarray
    row_hi: np.ndarray
    row: np.ndarray
    col: np.ndarray
    val: np.ndarray
    blocks: dict[str, slice] = field(default_factory=dict)
    objective_offset: float = 0.0

    @property
    def n_vars(self) -> int:
        return len(self.var_names)

    @property
    def n_rows(self) -> int:
        return len(self.row_names)

    def activity(self, x: np.ndarray) -> np.ndarray:
        """``A x`` for a primal vector ``x``."""
        out = np.zeros(self.n_rows)
        np.add.at(out, self.row, self.val * x[self.col])
        return out

    def carried(self, source: IlpModel, x: np.ndarray) -> np.ndarray:
        """A point of ``source`` as a point of this model: each variable by name, 0 where ``source`` has none."""
        index = {name: j for j, name in enumerate(source.var_names)}
        return np.array([x[index[name]] if name in index else 0.0 for name in self.var_names])

    def rows_of(self, j_row: int) -> tuple[np.ndarray, np.ndarray]:
        """Column indices and coefficients of one row."""
        mask = self.row == j_row
        return self.col[mask], self.val[mask]

    def max_violation(self, x: np.ndarray) -> float:
        """Largest bound, row or integrality violation of ``x`` (0 for a feasible point)."""
        ax = self.activity(x)
        worst = [
            np.max(np.maximum(self.var_lb - x, 0), initial=0.0),
            np.max(np.maximum(x - self.var_ub, 0), initial=0.0),
            np.max(np.maximum(self.row_lo - ax, 0), initial=0.0),
            np.max(np.maximum(ax - self.row_hi, 0), initial=0.0),
            np.max(np.abs(x - np.round(x))[self.var_is_integer], initial=0.0),
        ]
        return float(max(worst))


class ModelBuilder:
    """Accumulates variables and named rows, then freezes them into an IlpModel."""

    def __init__(self) -> None:
        self._names: list[str] = []
        self._lb: list[float] = []
        self._ub: list[float] = []
        self._int: list[bool] = []
        self._obj: list[float] = []
        self._rows: list[str] = []
        self._lo: list[float] = []
        self._hi: list[float] = []
        self._r: list[int] = []
        self._c: list[int] = []
        self._v: list[float] = []
        self._blocks: dict[str, slice] = {}
        self._row_index: dict[str, int] = {}

    def add_block(self, family: str, keys: list[str], lb: float = 0.0, ub: float = np.inf,
                  integer: bool = False, objective: list[float] | None = None) -> list[int]:
        """Add one variable per key, named ``family:key``; return their indices."""
        start = len(self._names)
        for i, key in enumerate(keys):
            self._names.append(f"{family}:{key}")
            self._lb.append(lb)
            self._ub.append(ub)
            self._int.append(integer)
            self._obj.append(0.0 if objective is None else objective[i])
        self._blocks[family] = slice(start, len(self._names))
        return list(range(start, len(self._names)))

    def set_bounds(self, index: int, lb: float, ub: float) -> None:
        self._lb[index], self._ub[index] = lb, ub

    def add_row(self, name: str, cols: list[int], vals: list[float], lo: float = -np.inf, hi: float = np.inf) -> int:
        """Add the row ``lo ≤ Σ vals·x[cols] ≤ hi`` named ``name``."""
        index = len(self._rows)
        self._rows.append(name)
        self._row_index.setdefault(name, index)
        self._lo.append(lo)
        self._hi.append(hi)
        self._r.extend([index] * len(cols))
        self._c.extend(cols)
        self._v.extend(vals)
        return index

    def has_row(self, name: str) -> bool:
        return name in self._row_index

    def extend_row(self, name: str, cols: list[int], vals: list[float]) -> None:
        """Add the terms ``Σ vals·x[cols]`` to the row ``name`` built before (a family that charges into another's
        row, e.g. idle devices into the power row)."""
        index = self._row_index[name]
        self._r.extend([index] * len(cols))
        self._c.extend(cols)
        self._v.extend(vals)

    def build(self) -> IlpModel:
        return IlpModel(
            var_names=tuple(self._names),
            var_lb=np.asarray(self._lb, dtype=float),
            var_ub=np.asarray(self._ub, dtype=float),
            var_is_integer=np.asarray(self._int, dtype=bool),
            objective=np.asarray(self._obj, dtype=float),
            row_names=tuple(self._rows),
            row_lo=np.asarray(self._lo, dtype=float),
            row_hi=np.asarray(self._hi, dtype=float),
            row=np.asarray(self._r, dtype=np.int64),
            col=np.asarray(self._c, dtype=np.int64),
            val=np.asarray(self._v, dtype=float),
            blocks=dict(self._blocks),
        )
