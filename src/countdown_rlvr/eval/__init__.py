"""The pass@k estimators under their public names, the ones user code and checks import:
`countdown_rlvr.eval.pass_at_k(n, c, k)` and `countdown_rlvr.eval.expected_samples(n, c, k)`.

They live, with every other pure evaluation metric, in `countdown_rlvr.eval.metrics`; pipeline code
imports from there. (`countdown_rlvr.eval.scoring` is the other thing: it samples a policy.)
"""

from .metrics import expected_samples, pass_at_k

__all__ = ["expected_samples", "pass_at_k"]
