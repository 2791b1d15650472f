"""The model card (README.md) every saved policy directory carries.

It says which policy and replicate the directory holds, the prompt the policy reads (one
example rendered by the pipeline's own prompt code), how to load it (a whole model or a peft
adapter, as it was saved), the config its stage trained with and the stage's training
summary. `train.runtime.fit_and_save` writes it inside the policy's atomic temporary
directory, so the card appears with the model and never half-written. Wall-clock numbers
stay out of it (they live in reports/timings/), so the directory is the same file for file
whenever the same params are run on the same machine.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import yaml

from ..task.prompts import solve_prompt

EXAMPLE = ([3, 5, 7], 22)  # numbers, target: 3 * 5 + 7 = 22
# Summary keys that vary run to run (the stages send them to reports/timings/, not here)
WALL_CLOCK = {"seconds", "tokens_per_s", "tokens_processed", "processes", "generate_seconds",
              "update_seconds", "generated_tokens", "generated_tokens_per_s"}
REPLICATE = re.compile(r"^r(\d+)$")


def write_model_card(out_dir: str | Path, *, name: str, replicate: int | None,
                     prompt_style: str | None, config: Any, summary: dict[str, Any],
                     tok=None, location: str | Path | None = None) -> Path:
    """Write `out_dir`/README.md for a saved policy. `config`: the params dataclass the stage
    trained with (None: not known); `summary`: its training summary; `tok`: the tokenizer
    (default: the one saved in `out_dir`); `location`: the path the loading snippet names
    (default `out_dir`; the final path when `out_dir` is a temporary one). `prompt_style`:
    None shows both formats (a training stage does not read `model.prompt_style`, so its card
    must not depend on it)."""
    from .policy import render_prompts  # torch: only when a card is written

    out_dir = Path(out_dir)
    if tok is None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(out_dir))
    where = str(location or out_dir)
    adapter = (out_dir / "adapter_config.json").is_file()
    run = "shared (trained once)" if replicate is None else f"replicate r{replicate}"
    styles = [prompt_style] if prompt_style else ["tiny", "chat"]
    prompts = {s: render_prompts(tok, [solve_prompt(*EXAMPLE, style=s)])[0] for s in styles}
    evaluation = f"reports/details/eval/{name}/{'shared' if replicate is None else f'r{replicate}'}.json"
    lines = [
        "---", f"library_name: {'peft' if adapter else 'transformers'}",
        "tags: [countdown-rlvr, countdown]", "---", "",
        f"# {name}, {run}", "",
        (f"A countdown-rlvr policy ({'a peft adapter' if adapter else 'a whole model'}), saved "
        f"by the pipeline's `{name}` training at `{where}`."), "",
        "## Prompt format", "",
        (f"The numbers {EXAMPLE[0]} and target {EXAMPLE[1]} read, exactly as the policy sees "
         "them, under the run's `model.prompt_style`" + ("" if prompt_style else
                                                        " (tiny: the default; chat)") + ":"), "",
        *(line for s, p in prompts.items() for line in (
            f"`model.prompt_style: {s}`", "", "```", p.rstrip("\n"), "```", "",
            *(["(The prompt ends with a newline; the completion follows it.)", ""]
              if p.endswith("\n") else []))),
        ("The policy answers `<think>...</think>` reasoning, then `<answer>EXPR</answer>`; the "
        "verifier (`countdown_rlvr.task.verify`) judges the last `<answer>`."), "",
        "## Load it", "",
        "```python", *_load_snippet(where, adapter), "```", "",
        ("`generation_config.json` holds the evaluation sampler (temperature, top-p, top-k, "
        "max_new_tokens)."), "",
        "## Training config", "",
        *(["```yaml", yaml.safe_dump(_plain(config), sort_keys=False).rstrip("\n"), "```"]
          if config is not None else ["Not recorded."]), "",
        "## Training summary", "",
        *_table(training_summary(summary)), "",
        f"Evaluation comes later, from the evaluate stages: `{evaluation}`.", "",
    ]
    card = out_dir / "README.md"
    card.write_text("\n".join(lines))
    return card


def _load_snippet(where: str, adapter: bool) -> list[str]:
    if adapter:
        return ["from peft import AutoPeftModelForCausalLM",
                "from transformers import AutoTokenizer", "",
                f'model = AutoPeftModelForCausalLM.from_pretrained("{where}")  # base + adapter',
                f'tok = AutoTokenizer.from_pretrained("{where}")']
    return ["from transformers import AutoModelForCausalLM, AutoTokenizer", "",
            f'model = AutoModelForCausalLM.from_pretrained("{where}")',
            f'tok = AutoTokenizer.from_pretrained("{where}")']


def _plain(config: Any) -> Any:
    """A params dataclass as plain YAML-able values (tuples as lists)."""
    data = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else config
    return json.loads(json.dumps(data, default=str))


def _table(summary: dict[str, Any]) -> list[str]:
    if not summary:
        return ["No summary."]
    rows = [f"| {k} | {json.dumps(v) if isinstance(v, list | dict) else v} |"
            for k, v in summary.items()]
    return ["| key | value |", "| --- | --- |", *rows]


def training_summary(stats: dict[str, Any]) -> dict[str, Any]:
    """The training summary without its wall-clock keys, floats to 6 significant digits."""
    return {k: (float(f"{v:.6g}") if isinstance(v, float) else v)
            for k, v in stats.items() if k not in WALL_CLOCK}


def policy_of(out_dir: str | Path) -> tuple[str, int | None]:
    """(policy name, replicate) of a policy dir: data/models/<policy>/r<seed> or
    data/models/<name> (shared, replicate None)."""
    path = Path(out_dir)
    if m := REPLICATE.match(path.name):
        return path.parent.name, int(m.group(1))
    return path.name, None


def write_policy_card(tmp: str | Path, out_dir: str | Path, tok, config: Any,
                      stats: dict[str, Any]) -> Path:
    """`fit_and_save`'s card: the policy saved in `tmp` (its atomic temporary dir) for
    `out_dir`, trained with the params dataclass `config` and the summary `stats`."""
    name, replicate = policy_of(out_dir)
    return write_model_card(tmp, name=name, replicate=replicate, prompt_style=None,
                            config=config, summary=stats, tok=tok, location=out_dir)
