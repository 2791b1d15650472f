"""The trained arms, declared once. Adding one is an entry in ARMS plus its params.yaml section
(which lists only the keys that differ from its script's section); a new kind of arm also needs
its stage script and its `stage_params.READS` entry.

Everything else is derived from ARMS: the params each arm's stage reads (stage_params), its
dvc.yaml stages (one matrix per script and init), model-registry artifact and curves
(countdown_rlvr.cli.experiment), its check
(checks.CHECKS) and its place in the report (results.RL_RUNS / SECONDARY_RUNS). A run trains
the arms its evaluate lists name (analysis.chains.trained_arms): leaving one out of them drops
its stages from dvc.yaml, and its report rows read "not run".

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
    init: str = "sft"  # the policy it starts from (data/models/<init>/r<seed>): its dvc.yaml
    # stage's input; its params section must resolve `init` to the same (the params check)

    def __post_init__(self):
        if self.replicates not in ("all", "first"):
            raise ValueError(f"arm {self.name}: replicates is 'all' or 'first', "
                             f"not {self.replicates!r}")
        if self.init == self.name:  # the allowed values: rl_config.INITS, the params rule
            raise ValueError(f"arm {self.name}: init is the policy it starts from, another "
                             "arm's or an SFT policy, not its own")
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
        """Its dvc.yaml stage: a stage of its own (a "first" arm), else the matrix of its
        script's arms of every replicate that start from its init (a DVC matrix stage has one
        list of inputs): named as its script when the script's own arm is among them, else
        as the first of them (`rloo_early`: the RLOO arms from the early SFT checkpoint)."""
        if self.replicates == "first":
            return self.name
        names = [a.name for a in ARMS if a.script == self.script and a.replicates == "all"
                 and a.init == self.init] or [self.name]
        return self.script if self.script in names else names[0]


def inherited_section(arm: str, script: str) -> str | None:
    """The rule the stage scripts apply without reading ARMS: `rloo_shaped` over `rloo`."""
    return None if arm == script else script


# The one list of arms, in report order.
# The early arms' check is `trained_on_signal`, not `rollouts_rise`: binary RLOO at S0's
# operating point is expected to flat-line (the premise they measure), so a check that asked
# for rising rollouts would call the expected outcome "not tested"; theirs fails only a run
# that could not have learned (no reward variance in any group, or weights that never moved).
ARMS: tuple[Arm, ...] = (
    Arm("rloo", "rloo", check="rollouts_rise", curves=True,
        about="RLOO from SFT, reward rloo.reward (binary by default)"),
    Arm("rloo_shaped", "rloo", replicates="first", check="rollouts_rise", curves=True,
        about="RLOO from SFT with the shaped reward"),
    Arm("rloo_nocurr", "rloo", replicates="first",
        about="RLOO without the curriculum"),
    Arm("rloo_early", "rloo", check="trained_on_signal", curves=True, init="sft_early",
        about="RLOO with the binary reward from the early SFT checkpoint, at S0's budget"),
    Arm("rloo_early_shaped", "rloo", replicates="first", check="trained_on_signal", curves=True,
        init="sft_early",
        about="RLOO with the shaped reward from the early SFT checkpoint, at S0's budget"),
    Arm("opd", "opd", check="forward_kl_falls", curves=True, init="rloo",
        about="on-policy distillation from the teacher, from the RLOO policy"),
    Arm("opd_ac", "opd", check="forward_kl_falls", curves=True, init="rloo",
        about="anti-collapse on-policy distillation, from the RLOO policy"),
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
