"""The trained arms, declared once. Adding one is an entry in ARMS plus its params.yaml section
(which lists only the keys that differ from its script's section); a new kind of arm also needs
its stage script and its `stage_params.READS` entry.

Everything else is derived from ARMS: the params each arm's stage reads (stage_params), its
dvc.yaml stages, model-registry artifact and curves (countdown_rlvr.cli.experiment), its check
(checks.CHECKS) and its place in the report (results.RL_RUNS / SECONDARY_RUNS).

No training code imports this module: the stage scripts know an arm by its rule (an arm of
`stages/<script>.py` other than <script> itself overrides the <script> section), so adding an
arm re-runs only its own stages, the params check and the report, not the arms already run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import CHAINS


@dataclass(frozen=True)
class Arm:
    """A trained RL arm: its params section (of the same name), its outputs
    (data/models/<name>/r<seed>, dvclive/<name>/r<seed>, reports/details/<name>/r<seed>.json)
    and what the pipeline does with it."""
    name: str
    script: str  # stages/<script>.py trains it (`rloo`, `opd`): its kind of training, and
    # its chain: it trains on the seeds of `replicates.<script>`
    replicates: str = "all"  # "all": every replicate seed, in the `<script>` stage's matrix;
    # "first": the first replicate seed only, in a dvc.yaml stage of its own name
    check: str | None = None  # the checks.py function its claims rest on (checks.CHECKS)
    curves: bool = False  # a report RL run: its curves are required, drawn and tabled; else
    # its details are read when present (a secondary arm)
    about: str = ""  # what it is: its model-registry description (an "all" arm) or its
    # dvc.yaml stage's comment (a "first" arm)

    def __post_init__(self):
        if self.replicates not in ("all", "first"):
            raise ValueError(f"arm {self.name}: replicates is 'all' or 'first', "
                             f"not {self.replicates!r}")
        if self.script not in CHAINS:  # its stages run over `replicates.<script>`
            raise ValueError(f"arm {self.name}: its script {self.script!r} is not a chain of "
                             f"config.CHAINS ({', '.join(CHAINS)}); a new kind of arm needs "
                             "its own seed list there and in `replicates`")

    @property
    def inherits(self) -> str | None:
        """The section whose keys its own overrides: its script's, unless it is that one."""
        return inherited_section(self.name, self.script)

    @property
    def stage(self) -> str:
        """Its dvc.yaml stage: its script's matrix, or a stage of its own."""
        return self.script if self.replicates == "all" else self.name


def inherited_section(arm: str, script: str) -> str | None:
    """The rule the stage scripts apply without reading ARMS: `rloo_shaped` over `rloo`."""
    return None if arm == script else script


# The one list of arms, in report order.
ARMS: tuple[Arm, ...] = (
    Arm("rloo", "rloo", check="rollouts_rise", curves=True,
        about="RLOO from SFT, reward rloo.reward (binary by default)"),
    Arm("rloo_shaped", "rloo", check="rollouts_rise", curves=True,
        about="RLOO from SFT with the shaped reward"),
    Arm("rloo_nocurr", "rloo", replicates="first",
        about="RLOO without the curriculum"),
    Arm("opd", "opd", check="forward_kl_falls", curves=True,
        about="on-policy distillation from the teacher"),
    Arm("opd_ac", "opd", check="forward_kl_falls", curves=True,
        about="anti-collapse on-policy distillation"),
)


def arm(name: str) -> Arm:
    """The arm called `name` (KeyError: no such arm)."""
    for a in ARMS:
        if a.name == name:
            return a
    raise KeyError(name)


def arms(script: str | None = None) -> tuple[Arm, ...]:
    """The arms `stages/<script>.py` trains (every arm when None), in ARMS order."""
    return tuple(a for a in ARMS if script is None or a.script == script)
