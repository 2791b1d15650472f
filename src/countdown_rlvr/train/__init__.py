"""Training: loss functions (losses.py), the supervised loop + adapters (sft.py), IPO
(ipo.py) and the on-policy RLOO / OPD loop (rloo.py)."""

from __future__ import annotations

from ..model import REF_FILE, resolve_base
from .ipo import IPO_DEFAULTS, ipo_config, train_ipo
from .losses import (
    clipped_is_weight,
    completion_nll,
    forward_kl,
    ipo_loss,
    k3_kl,
    rloo_advantages,
    rloo_policy_loss,
)
from .rloo import RLOO_DEFAULTS, check_rloo_config, rloo_config, train_rloo
from .sft import (
    ADAPTERS,
    SFT_DEFAULTS,
    apply_adapter,
    check_config,
    is_main_process,
    sft_config,
    train_sft,
)

__all__ = [
    "ADAPTERS", "IPO_DEFAULTS", "REF_FILE", "RLOO_DEFAULTS", "SFT_DEFAULTS", "apply_adapter",
    "check_config", "check_rloo_config", "clipped_is_weight", "completion_nll", "forward_kl",
    "ipo_config", "ipo_loss", "is_main_process", "k3_kl", "resolve_base", "rloo_advantages",
    "rloo_config", "rloo_policy_loss", "sft_config", "train_ipo", "train_rloo", "train_sft",
]
