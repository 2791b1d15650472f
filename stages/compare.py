"""Stage `compare`: pass@k bootstrap intervals for every evaluated policy, and McNemar tests
on paired per-problem outcomes for each pair in `compare.pairs`."""

from pathlib import Path

from countdown_rlvr import headline, io
from countdown_rlvr.compare import compare_markdown, compare_policies
from countdown_rlvr.config import Compare, Evaluate, from_section
from countdown_rlvr.metrics import read_records


def main() -> None:
    params = io.load_params()
    cfg = from_section(Compare, "compare", params, "compare")  # fails before any work
    policies = from_section(Evaluate, "compare", params, "evaluate").policies
    pairs = cfg.pairs or []
    for pair in pairs:  # each an [a, b] pair of names (config.RULES)
        unknown = [x for x in pair if x not in policies]
        if unknown:
            raise io.StageError("compare", f"`compare.pairs` names {unknown}, not in "
                                f"`evaluate.policies` {sorted(policies)}; add them there or fix "
                                "the pair")
    paths = {name: Path(f"data/eval/{name}/records.parquet") for name in policies}
    missing = [name for name, path in paths.items() if not path.exists()]
    if missing:
        raise io.StageError("compare", f"no records for {missing}; run "
                            + ", ".join(f"`dvc repro evaluate@{m}`" for m in missing))
    records = {name: read_records(path) for name, path in paths.items()}
    try:
        report = compare_policies(records, pairs, cfg.ks, seed=cfg.seed, splits=cfg.splits,
                                  exact=cfg.exact, n_boot=cfg.n_boot, alpha=float(cfg.alpha),
                                  boot_seed=cfg.boot_seed)
    except ValueError as exc:
        raise io.StageError("compare", f"{exc} (check `compare:` in params.yaml)") from exc
    io.write_metrics("compare", report, headline.comparison)
    io.write_text("reports/compare.md", compare_markdown(report))
    print(f"[compare] {len(records)} policies, {len(pairs)} pairs: "
          "wrote reports/details/compare.json, reports/metrics/compare.json (headline) and "
          "reports/compare.md")


if __name__ == "__main__":
    main()
