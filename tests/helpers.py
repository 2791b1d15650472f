"""Test helpers shared by the training-loop tests and the report's (importable: pytest puts tests/
on sys.path)."""

import re


class RecordingLive:
    """Stand-in for dvclive.Live with the two calls the training loops make; records them."""

    def __init__(self):
        self.rows, self.step = [], 0

    def log_metric(self, name, value):
        self.rows.append((self.step, name, value))

    def next_step(self):
        self.step += 1

    def curve(self, name):
        """Values logged as `train/<name>`, in step order."""
        return [v for _, n, v in self.rows if n == f"train/{name}"]


def config_of(cls, path: str, overrides: dict | None = None, inherit: str | None = None):
    """The `cls` config of params.yaml's `path` section with `overrides` (nested mappings such as
    `sampler` merged key by key), built as a stage builds it (`config.from_section`): the
    tests' configs take every value they do not set from params.yaml, like the stages."""
    from pathlib import Path

    import yaml

    from countdown_rlvr.core.config import from_section, merged

    params = yaml.safe_load((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    *parents, last = path.split(".")
    block = params
    for part in parents:
        block = block[part]
    block[last] = merged(block[last], overrides or {})
    return from_section(cls, "test", params, path, inherit)


_BLOCK = re.compile(r"([-+*>#|]|\d+[.)])(\s|$)|!\[")


def unwrap_md(text: str) -> str:
    """report.md with its wrapped prose joined back, one line per paragraph or list item (as
    the report builds them before `report.wrap_prose`): a line continues the one before when
    both are prose and it starts no block of its own."""
    out: list[str] = []
    for line in text.splitlines():
        prev = out[-1] if out else ""
        if line.strip() and prev.strip() and not prev.startswith(("|", "#", "![")) \
                and not _BLOCK.match(line.lstrip()) and not line.startswith("    "):
            out[-1] = prev + " " + line.lstrip(" ")
        else:
            out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def unrun_marks(md: str) -> list[str]:
    """The report's marks of a stage or arm that did not run: a table cell `*not run*` or a claim
    that is `not testable: not run`. (Prose may say "not run" of the arms a plan leaves out.)"""
    return re.findall(r"\*not run\*|not testable: not run", unwrap_md(md))
