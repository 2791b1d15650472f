"""`countdown-rlvr --help`: what the tool is for, and one example for every command."""

import argparse

import pytest

from countdown_rlvr.cli import main as cli


def commands() -> list[str]:
    """The subcommands the parser has (a new one is checked too)."""
    (sub,) = [a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def help_of(capsys, *args: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*args, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_every_command_has_an_example_under_the_top_help(capsys):
    out = help_of(capsys)
    assert cli.DESCRIPTION.split()[:4] == out.split("\n\n")[1].split()[:4]  # the description
    examples = out[out.index("examples:"):]
    assert {"diff", "dag"} <= set(commands())
    for name in commands():
        line, _ = cli.EXAMPLES[name]
        assert line.startswith(f"countdown-rlvr {name}") and f"  {line}\n" in examples


@pytest.mark.parametrize("name", commands())
def test_each_command_help_has_a_description_and_its_example(capsys, name):
    out = help_of(capsys, name)
    line, what = cli.EXAMPLES[name]
    assert out.split("\n\n")[1].strip()  # a description under the usage
    assert f"example:\n  {line}\n" in out and what.split()[0] in out
    assert max(map(len, out.splitlines())) <= 100  # raw text: our own line breaks hold
