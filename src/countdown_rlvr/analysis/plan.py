"""The analysis plan (plan.yaml at the repository root): each claim's smallest effect of
interest (delta), its family, replicates and planned power, fixed where the run reads it.

    load_plan(path)      -> Plan, checked: every delta follows the one rule the file states
    rule_delta(...)      -> delta = fraction x (to - from) / from x level
    absolute_delta(...)  -> delta_abs = fraction x (to - from): the absolute reading beside it

The report prints the plan's numbers beside the run's own (`ClaimPlan.planned_power` is the
plan's, never recomputed from the run), and says whether the plan was written before the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

PLAN_FILE = "plan.yaml"
KINDS = ("effect", "no_change", "above")
FAMILIES = ("seed", "extension", "exploratory")  # exploratory: a row planned below `power`,
# declared so before the run: its own Holm family, reported, deciding nothing


class PlanError(ValueError):
    """plan.yaml is missing a field or a delta breaks the file's rule."""


@dataclass(frozen=True)
class ClaimPlan:
    name: str
    kind: str  # effect | no_change | above
    family: str  # seed | extension
    delta: float | None  # smallest effect of interest (effect), margin (no change), None (above)
    replicates: int  # planned replicates
    planned_power: float | None  # the plan's power at the seed's scaled effect (None: none)
    seed_from: float | None = None  # the seed's quantity before -> after
    seed_to: float | None = None
    level: float | None = None  # the development level the seed's relative change applies to
    level_source: str = ""
    seed_effect: float | None = None  # a seed effect stated directly (share - threshold)
    seed_k: tuple[float, float] | None = None  # a second quantity's from -> to (S4's pass@16)
    level_k: float | None = None  # and its development level
    delta_k: float | None = None  # an effect claim's delta on the second quantity (same rule)
    delta_abs: float | None = None  # the absolute reading: delta_fraction x the seed's own
    # change (to - from), unscaled (set by parse_plan, never read from the file)
    delta_abs_k: float | None = None  # and the second quantity's

    @property
    def scaled_k(self) -> float | None:
        """The second quantity's seed effect at its level (None: not given)."""
        if self.seed_k is None or self.level_k is None:
            return None
        return (self.seed_k[1] - self.seed_k[0]) / self.seed_k[0] * self.level_k

    @property
    def relative(self) -> float | None:
        if self.seed_from is None or self.seed_to is None:
            return None
        return (self.seed_to - self.seed_from) / self.seed_from

    @property
    def scaled(self) -> float | None:
        """The seed's effect on this run's scale: its relative change at the level."""
        if self.seed_effect is not None:
            return self.seed_effect
        rel = self.relative
        return None if rel is None or self.level is None else rel * self.level


@dataclass(frozen=True)
class TwoStage:
    """plan.yaml's `two_stage:` rule: a variance component estimated on fewer than `min_df`
    degrees of freedom is planned at its upper `confidence` bound (stats.design
    .planning_variance), and the run re-plans at its interim variance (docs/statistics.md)."""
    min_df: int = 5
    confidence: float = 0.8

    def __post_init__(self):
        if not isinstance(self.min_df, int) or isinstance(self.min_df, bool) or self.min_df < 1:
            raise PlanError(f"two_stage.min_df must be an integer >= 1, got {self.min_df!r}")
        if not isinstance(self.confidence, float | int) or not 0 < self.confidence < 1:
            raise PlanError(f"two_stage.confidence must be in (0, 1), got {self.confidence!r}")


@dataclass(frozen=True)
class TeacherPremise:
    """plan.yaml's `premises.teacher`: S4's OPD gains because its teacher covers paths its
    start lost (S4 Table 1: the teacher's pass@16 0.840 over RLOO's 0.740, +0.100) and is
    sharper than SFT (pass@1 0.535 over 0.354, 1.51x). Read on the test split: a run whose
    teacher misses either bound has not set up S4's question, so the rows in `claims` read
    "not tested (premise)" instead of a decision."""
    claims: tuple[str, ...]  # the rows resting on it
    pass_at_k_over_init: float  # teacher pass@K minus OPD's start's (`init`), at least
    pass_at_1_over_sft: float  # teacher pass@1 over SFT's, at least (a ratio)
    init: str = "rloo"  # OPD's start (params.yaml `opd.init`)
    dev: str = ""  # where it was checked before the run (the pilot on the development split)

    def __post_init__(self):
        if not self.claims or not all(isinstance(c, str) for c in self.claims):
            raise PlanError("premises.teacher.claims must list the claims resting on it")
        for key in ("pass_at_k_over_init", "pass_at_1_over_sft"):
            v = getattr(self, key)
            if not isinstance(v, float | int) or isinstance(v, bool):
                raise PlanError(f"premises.teacher.{key} must be a number, got {v!r}")


@dataclass(frozen=True)
class Plan:
    written_before_run: bool
    note: str
    alpha: float
    power: float
    delta_fraction: float
    no_change_margin: float
    share_threshold: float
    claims: Mapping[str, ClaimPlan] = field(default_factory=dict)
    path: str = PLAN_FILE
    two_stage: TwoStage = TwoStage()  # optional in plan.yaml: these defaults without it
    teacher: TeacherPremise | None = None  # optional `premises.teacher`: S4's OPD premise

    def of(self, name: str) -> ClaimPlan:
        if name not in self.claims:
            raise PlanError(f"{self.path}: no plan for claim {name!r}; add it under `claims:` "
                            f"(kind, family, delta, replicates, planned_power)")
        return self.claims[name]


def rule_delta(fraction: float, seed_from: float, seed_to: float, level: float) -> float:
    """The plan's one rule: `fraction` of the seed's relative change applied to `level`."""
    return abs(fraction * (seed_to - seed_from) / seed_from * level)


def absolute_delta(fraction: float, seed_from: float, seed_to: float) -> float:
    """The absolute reading's bound: `fraction` of the seed's own change, not relative to this
    model's level (beside the rule's delta: "smaller than the seed's" needs both)."""
    return abs(fraction * (seed_to - seed_from))


def _check_delta_k(cp: ClaimPlan, fraction: float, where: str) -> None:
    """An effect claim of two quantities (S4: OPD over RLOO on pass@1 and pass@16) has a
    delta for each, both by the one rule: `delta_k` from `seed_k` at `level_k`."""
    if cp.seed_k is None and cp.level_k is None:
        if cp.delta_k is not None:
            raise PlanError(f"{where}: delta_k {cp.delta_k} without a `seed_k` and a "
                            "`level_k` to derive it from; add them or remove delta_k")
        return
    if cp.seed_k is None or cp.level_k is None:
        raise PlanError(f"{where}: a second quantity needs both `seed_k` (from, to) and "
                        "`level_k`")
    want = rule_delta(fraction, *cp.seed_k, cp.level_k)
    if cp.delta_k is None or abs(cp.delta_k - want) > 5e-4 + 1e-12:
        raise PlanError(f"{where}: delta_k {cp.delta_k} breaks the rule ({fraction} x "
                        f"relative change x level_k = {want:.4f}); set `delta_k: {want:.3f}`")


def _need(d: Mapping, key: str, where: str):
    if key not in d:
        raise PlanError(f"{where}: `{key}` missing; add it (see the comments at the top of "
                        f"{PLAN_FILE})")
    return d[key]


def parse_plan(raw: Mapping, path: str = PLAN_FILE) -> Plan:
    top = {k: _need(raw, k, path) for k in ("written_before_run", "note", "alpha", "power",
                                           "delta_fraction", "no_change_margin",
                                           "share_threshold", "claims")}
    claims = {}
    for name, c in (top.pop("claims") or {}).items():
        where = f"{path}: claims.{name}"
        kind, fam = _need(c, "kind", where), _need(c, "family", where)
        if kind not in KINDS or fam not in FAMILIES:
            raise PlanError(f"{where}: kind {kind!r} / family {fam!r}; use one of {KINDS} / "
                            f"{FAMILIES}")
        seed = c.get("seed") or {}
        cp = ClaimPlan(name, kind, fam, _need(c, "delta", where), int(_need(c, "replicates", where)),
                       _need(c, "planned_power", where), seed.get("from"), seed.get("to"),
                       c.get("level"), str(c.get("level_source", "")), c.get("seed_effect"),
                       (c["seed_k"]["from"], c["seed_k"]["to"]) if c.get("seed_k") else None,
                       c.get("level_k"), c.get("delta_k"))
        if kind == "no_change" and cp.delta != top["no_change_margin"]:
            raise PlanError(f"{where}: a no-change claim's delta is the plan's "
                            f"no_change_margin ({top['no_change_margin']}), not {cp.delta}")
        if kind == "above" and cp.delta is not None:
            raise PlanError(f"{where}: an above-threshold claim has no delta; set `delta: null`")
        if kind == "effect":
            if cp.relative is not None and cp.level is not None:
                want = rule_delta(top["delta_fraction"], cp.seed_from, cp.seed_to, cp.level)
                if cp.delta is None or abs(cp.delta - want) > 5e-4 + 1e-12:
                    raise PlanError(f"{where}: delta {cp.delta} breaks the rule "
                                    f"({top['delta_fraction']} x relative change x level = "
                                    f"{want:.4f}); set `delta: {want:.3f}`")
            elif cp.delta is not None:
                raise PlanError(f"{where}: delta {cp.delta} without a seed `from`/`to` and a "
                                "`level` to derive it from; add them or set `delta: null`")
            _check_delta_k(cp, top["delta_fraction"], where)
        elif cp.delta_k is not None:
            raise PlanError(f"{where}: `delta_k` is for an effect claim of two quantities; "
                            "remove it")
        if kind == "effect" and cp.relative is not None:
            cp = replace(cp, delta_abs=absolute_delta(top["delta_fraction"], cp.seed_from,
                                                      cp.seed_to),
                         delta_abs_k=None if cp.seed_k is None else
                         absolute_delta(top["delta_fraction"], *cp.seed_k))
        claims[name] = cp
    extra = raw.get("two_stage") or {}
    if not isinstance(extra, Mapping) or set(extra) - {"min_df", "confidence"}:
        raise PlanError(f"{path}: two_stage takes min_df and confidence, got {extra!r}")
    premises = raw.get("premises") or {}
    if not isinstance(premises, Mapping) or set(premises) - {"teacher"}:
        raise PlanError(f"{path}: premises takes `teacher` only, got {premises!r}")
    teacher = None
    if premises.get("teacher") is not None:
        t = dict(premises["teacher"])
        unknown = set(t) - set(TeacherPremise.__dataclass_fields__)
        if unknown:
            raise PlanError(f"{path}: premises.teacher: unknown {sorted(unknown)}; it takes "
                            f"{', '.join(TeacherPremise.__dataclass_fields__)}")
        t["claims"] = tuple(t.get("claims") or ())
        missing = [c for c in t["claims"] if c not in claims]
        if missing:
            raise PlanError(f"{path}: premises.teacher.claims names {missing}, which have no "
                            "entry under `claims:`")
        teacher = TeacherPremise(**t)
    return Plan(**top, claims=claims, path=str(path), two_stage=TwoStage(**extra),
                teacher=teacher)


def load_plan(path: str | Path | None = None) -> Plan:
    """plan.yaml (default: the working directory's, else the repository's)."""
    if path is None:
        here = Path(PLAN_FILE)
        path = here if here.is_file() else Path(__file__).resolve().parents[3] / PLAN_FILE
    path = Path(path)
    if not path.is_file():
        raise PlanError(f"{path}: no analysis plan; the report needs {PLAN_FILE} at the "
                        "repository root (restore it with `git checkout -- plan.yaml`)")
    return parse_plan(yaml.safe_load(path.read_text()) or {}, str(path))
