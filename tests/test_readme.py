"""The README: its seed example cites rules where they really are, and every command prints what it shows."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

import capmatrix
from capmatrix.authoring.cli import run

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_rule_citations_are_current() -> None:
    matrix = capmatrix.load()
    cited = re.findall(r"([a-z_0-9]+\.[a-z_0-9-]+) \((capabilities/[\w/]+\.yaml):(\d+)\)",
                       README.read_text(encoding="utf-8"))
    assert cited
    for rule_id, path, line in cited:
        rule = matrix.rule(rule_id)
        assert (rule.location.path, rule.location.line) == (path, int(line)), rule_id


def test_readme_seed_verdicts() -> None:
    llama = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=120, model="llama",
                                                    spec_dec="one_model"))
    deepseek = capmatrix.resolve(capmatrix.KernelQuery("xqa", sm=121, model="deepseek_v3",
                                                       spec_dec="one_model"))
    assert "xqa.hmma_multi_token" in llama.rules
    assert deepseek.reasons[0].rule_id == "xqa.mla_fp8_only"
    gate = capmatrix.resolve(capmatrix.KernelQuery("trtllm_spec_dec_mode", sm=121, model="deepseek_v3",
                                                   spec_dec="one_model"))
    assert gate.reasons[0].rule_id == "trtllm_spec_dec_mode.mla_sm12x_one_model"


def _console_examples() -> list[tuple[str, list[str]]]:
    """Each ``$ .venv/bin/capmatrix ...`` command of the README's console blocks, with the lines shown."""
    text = README.read_text(encoding="utf-8")
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, flags=re.DOTALL):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ .venv/bin/capmatrix "):
                command = lines[i][len("$ .venv/bin/"):]
                while command.endswith("\\"):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                shown: list[str] = []
                i += 1
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
                examples.append((command, shown))
            else:
                i += 1
    return examples


EXAMPLES = _console_examples()


def test_readme_has_console_examples() -> None:
    commands = [c for c, _ in EXAMPLES]
    assert "capmatrix query xqa --sm 121 --model deepseek_v3 --spec-dec one_model" in commands
    assert any(c.startswith("capmatrix compare-legacy ") for c in commands)


@pytest.mark.parametrize(("command", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_readme_command_prints_what_the_readme_shows(command: str, shown: list[str]) -> None:
    """Every piece of text the README shows appears in the real output, in order (``...`` elides)."""
    out, err = io.StringIO(), io.StringIO()
    run(shlex.split(command)[1:], out, err)
    actual = " ".join(out.getvalue().split())
    at = 0
    for line in shown:
        for piece in line.split("..."):
            fragment = " ".join(piece.split())
            if not fragment:
                continue
            found = actual.find(fragment, at)
            assert found >= 0, f"{command}: {fragment!r} not in the output (after {at}):\n{out.getvalue()}"
            at = found + len(fragment)


def _python_example() -> tuple[str, list[str]]:
    """The code of "From Python" and the lines the README says it prints."""
    section = README.read_text(encoding="utf-8").split("## From Python", 1)[1]
    found = re.search(r"```python\n(.*?)```\s*prints\s*```text\n(.*?)```", section, flags=re.DOTALL)
    assert found, "the Python example and what it prints"
    return found.group(1), found.group(2).splitlines()


def test_readme_python_example_prints_what_the_readme_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """The loop over ``r.reasons`` printed ``model None None None ...`` for every origin note."""
    code, shown = _python_example()
    exec(compile(code, str(README), "exec"), {"__name__": "readme"})  # noqa: S102 - the README's own code
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    assert [line for line in lines if "None" in line.split()] == []
    assert any(line.startswith("model attention=") for line in lines)  # the origin notes are there
    actual = " ".join(printed.split())
    at = 0
    for line in shown:
        for piece in line.split("..."):
            fragment = " ".join(piece.split())
            if fragment:
                found = actual.find(fragment, at)
                assert found >= 0, f"{fragment!r} not in the output (after {at}):\n{printed}"
                at = found + len(fragment)
