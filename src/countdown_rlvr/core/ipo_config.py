"""`ipo`: IPO from the SFT policy (the rules: core.config).
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import HeldOut, MaybeNames, Names, Pos, Rate, Share, Weight
from .train_config import Adapter, Supervised


@dataclass(frozen=True)
class IPO(Supervised, Adapter):
    """`ipo`: IPO from the SFT policy, one run per pairs source."""
    sources: Names  # pairs sources: one `ipo@<source>-<seed>` stage per replicate seed each
    first_replicate_sources: MaybeNames  # one `ipo_first@<source>-<seed>`, first seed only

    def all_sources(self) -> list[str]:
        return [*self.sources, *self.first_replicate_sources]
    beta: Rate  # target margin 1 / (2 beta) on length-normalised log-probs
    val_frac: HeldOut  # seeded share of the pairs held out: the margin check's data
    rpo_alpha: Weight  # weight of the NLL anchor on the chosen response (0 = plain IPO)
    skill_problems: Pos  # train problems after pairs.n_problems' (not trained on) for the skill check
    skill_samples: Pos  # samples per skill problem, SFT and IPO policy each (evaluation sampler)
    skill_margin: Share  # relative pass@1 drop from SFT allowed by the skill check (0.25 = 25%)
