"""Training: loss functions (losses.py) and the supervised loop + adapters (sft.py)."""

from __future__ import annotations

from ..model import REF_FILE, resolve_base
from .losses import (
    clipped_is_weight,
    completion_nll,
    forward_kl,
    ipo_loss,
    k3_kl,
    rloo_advantages,
    rloo_policy_loss,
)
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
    "ADAPTERS", "REF_FILE", "SFT_DEFAULTS", "apply_adapter", "check_config", "clipped_is_weight",
    "completion_nll", "forward_kl", "ipo_loss", "is_main_process", "k3_kl", "resolve_base",
    "rloo_advantages", "rloo_policy_loss", "sft_config", "train_sft",
]
