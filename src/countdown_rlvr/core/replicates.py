"""The training seed as a replication axis.

A run's verdicts should survive another training draw: the same code on another CPU, or with
one seed changed, trains a different policy, and that difference is larger than most effects
a single run can show. So every policy the report compares is trained and evaluated once per
seed of its chain (DVC `matrix` stages named `<stage>@<seed>`): `replicates.seeds` for SFT,
and one list per chain trained from it (`replicates.rloo`, ...: config.CHAINS, each a subset
of `replicates.seeds`, so a cheap chain can have more replicates than a costly one). The
statistics treat the replicate as their unit (`countdown_rlvr.stats`,
`countdown_rlvr.analysis.claims`).

What a replicate changes: every seed of the stage's params section (`seed`, `eval_seed`, the
seeds of nested blocks such as `int.sft`) becomes `seed + STRIDE * replicate` -- data order,
new adapter weights, dropout, and every training-time sampling seed (RL rollouts, diagnose,
repair, interventions). Replicate 0 therefore runs the params exactly as written. What it does
not change: the problems, the base model, the teacher, traces, dedup and pairs (the
experiment's fixed inputs, trained once), and the evaluation sampler's seeds (the same
measurement for every replicate).

One SFT for every replicate: with `replicates.shared_sft` set, every later chain's replicate r
starts from that one SFT policy instead of SFT r (`sft_dir`), so the replicates are draws of
the training after SFT, given one SFT, as S3 and S4 compared their methods.

Paths: a replicated policy's model is `data/models/<policy>/r<seed>`; a replicated stage's
files are `reports/{details,timings}/<stage>/r<seed>.json` and `dvclive/<stage>/r<seed>`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Far above any seed arithmetic inside a stage (per-step sampling seeds add the step number),
# so two replicates never share a derived seed.
STRIDE = 1_000_000


def seed_for(seed: int, replicate: int) -> int:
    """The seed a stage uses in `replicate` where params.yaml says `seed`."""
    return seed + STRIDE * replicate


def _is_seed(field: str) -> bool:
    return field == "seed" or field.endswith("_seed")


def for_replicate(cfg: Any, replicate: int) -> Any:
    """`cfg` (a params dataclass, or a mapping of overrides) with every seed field, at any
    depth, moved to `replicate`'s stream. Everything else is returned unchanged."""
    if dataclasses.is_dataclass(cfg):
        return dataclasses.replace(cfg, **{
            f.name: _moved(f.name, getattr(cfg, f.name), replicate)
            for f in dataclasses.fields(cfg)})
    if isinstance(cfg, dict):
        return {k: _moved(k, v, replicate) for k, v in cfg.items()}
    return cfg


def _moved(name: str, value: Any, replicate: int) -> Any:
    if _is_seed(name) and isinstance(value, int) and not isinstance(value, bool):
        return seed_for(value, replicate)
    return for_replicate(value, replicate)


def tag(replicate: int) -> str:
    """The path part of one replicate: r<seed>."""
    return f"r{replicate}"


def model_dir(policy: str, replicate: int) -> str:
    """Where replicate `replicate` of a replicated policy is saved."""
    return f"data/models/{policy}/{tag(replicate)}"


def sft_dir(stage: str, params: dict[str, Any], replicate: int, policy: str = "sft") -> str:
    """The SFT policy (or its early checkpoint, `sft_early`) replicate `replicate` of a later
    chain starts from: its own seed's, or the one shared SFT's (`replicates.shared_sft`)."""
    from .config import Replicates, from_section

    rep = from_section(Replicates, stage, params, "replicates")
    return model_dir(policy, rep.sft_seed(replicate))


def run_name(name: str, replicate: int) -> str:
    """A replicated stage's name in reports/*/ and dvclive/ (rloo/r1, ipo/scripted/r0)."""
    return f"{name}/{tag(replicate)}"


def parse_replicate(stage: str, arg: str | None, params: dict[str, Any],
                    chain: str = "sft") -> int:
    """The replicate seed a stage was started with (its last argument), checked against its
    chain's seeds (`replicates.<chain>`; sft's: `replicates.seeds`); a clear error naming
    the usage and the fix otherwise."""
    from .config import Replicates, chain_path, from_section, seeds_key
    from .errors import StageError

    rep = from_section(Replicates, stage, params, "replicates")
    seeds = rep.of(chain)
    if arg is None or not arg.lstrip("-").isdigit() or int(arg) not in seeds:
        key = f"replicates.{seeds_key(chain)}"
        got = "no replicate seed given" if arg is None else f"replicate {arg!r} is not in `{key}`"
        # the lists a new seed must join: the chain's and those upstream lacking it
        lack = [] if arg is None or not arg.isdigit() else [
            f"`replicates.{seeds_key(c)}`"
            for c in chain_path(chain, rep.shared_sft is not None)[1:] if int(arg) not in rep.of(c)]
        add = f"`{key}`" + (f" (and {', '.join(lack)})" if lack else "")
        raise StageError(stage, f"{got}; pass one of {seeds} as the stage's last argument "
                                f"(`dvc repro {stage}@<seed>` does) or add it to {add}")
    return int(arg)
