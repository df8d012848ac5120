"""Every snippet in docs/ runs as written, or says why it cannot (issue 23).

A fenced block is a snippet when its fence names a language. Each runs by its language:

- ``python``: as a script of its own, in a new process, in an empty directory;
- ``toml``: read as a tripwire config file and resolved (``GuardrailsConfig.from_file``), so
  every section and key in it is one tripwire takes;
- ``json``: parsed (one document, or JSON Lines);
- ``sh`` / ``bash``: each command line run in a shell, in an empty directory with ``HOME`` there
  (but ``pip install`` lines: the test environment holds tripwire and its extras already).

A snippet that cannot run as written — an outline of a host's loop with the host's own calls
left out, a command that installs a package or needs a server — is marked on the line before
its fence with ``<!-- fragment: the reason -->`` (an HTML comment: invisible on the page). A
block without a language is displayed output, not a snippet.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

DOCS = ROOT / "docs"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```",
                    re.S | re.M)
_FRAGMENT = re.compile(r"<!--\s*fragment:\s*(?P<why>[^>]*?)\s*-->\s*$")
RUN = {"python", "toml", "json", "sh", "bash"}


def snippets() -> list[tuple[str, str, str, str | None]]:
    """(where, language, code, fragment reason) of every fenced block with a language."""
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            lang = match.group("lang")
            if not lang:
                continue
            line = text.count("\n", 0, match.start()) + 1
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marked = _FRAGMENT.search(before)
            indent = match.group("indent")
            body = "".join(ln[len(indent):] if ln.startswith(indent) else ln
                           for ln in match.group("body").splitlines(keepends=True))
            found.append((f"{path.relative_to(ROOT)}:{line}", lang, body,
                          marked.group("why") if marked else None))
    return found


SNIPPETS = snippets()


def test_every_snippet_is_of_a_language_the_test_runs() -> None:
    assert {lang for _, lang, _, _ in SNIPPETS} <= RUN


def test_a_fragment_says_why() -> None:
    for where, _, _, why in SNIPPETS:
        assert why is None or len(why) > 10, where


@pytest.mark.parametrize("where, lang, code", [
    pytest.param(w, lang, code, id=w) for w, lang, code, why in SNIPPETS if why is None])
def test_the_snippet_runs_as_written(where: str, lang: str, code: str, tmp_path: Path,
                                     implementation: str) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "TRIPWIRE_IMPLEMENTATION": implementation}
    if lang == "python":
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 0, f"{where}\n{done.stderr}"
    elif lang == "toml":
        from tripwire import GuardrailsConfig

        config = tmp_path / "tripwire.toml"
        config.write_text(code, encoding="utf-8")
        GuardrailsConfig.from_file(config).resolve()
    elif lang == "json":
        try:
            json.loads(code)
        except ValueError:
            for line in code.splitlines():
                if line.strip():
                    json.loads(line)
    else:
        for command in _commands(code):
            done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True,
                                  text=True, timeout=120, env=env)
            assert done.returncode == 0, f"{where}: {command}\n{done.stderr}"


def _commands(code: str) -> list[str]:
    """The block's command lines (a ``$ `` prompt stripped; lines after a prompted command
    that have no prompt are its output)."""
    lines = code.splitlines()
    if any(ln.startswith("$ ") for ln in lines):
        lines = [ln[2:] for ln in lines if ln.startswith("$ ")]
    return [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")
            and not ln.startswith("pip install")]


def test_the_corpus_page_shows_what_stats_prints() -> None:
    """docs/corpus.md's table of the shared corpus is the command's output, every signal."""
    from conftest import need_shared

    need_shared("corpus")
    page = (DOCS / "corpus.md").read_text(encoding="utf-8")
    command = page.split("With the default thresholds:", 1)[1].split("```\n", 2)[1]
    argv = " ".join(command.replace("\\\n", " ").split()).replace("../shared", str(ROOT.parent /
                                                                                  "shared"))
    done = subprocess.run([sys.executable, "-m", "tripwire", *argv.split()[1:]],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = page.split(command, 1)[1].split("```\n", 1)[1]  # past the command's fence
    shown = after.split("```\n", 2)[1]                         # the next block: the output
    assert shown == done.stdout
