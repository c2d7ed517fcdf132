"""The user guide (docs/, mkdocs.yml) and README: what a reader of them relies on.

Every command of the CLI is in the generated reference, a command added later included;
no page carries the labels of forge's development history; every relative link leads to
a file that exists; and, where mkdocs is installed, ``mkdocs build --strict`` succeeds
(a page left out of the nav, a broken link or anchor fails it).
"""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import typer
import typer.main

import forge.cli
from forge.commands import register_all

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
HOOK = DOCS / "hooks" / "cli_reference.py"

#: The pages a user reads: the README and every Markdown page of the guide.
USER_DOCS = sorted([REPO / "README.md", *DOCS.rglob("*.md")])

#: Labels of forge's own development history, which mean nothing to a user.
INTERNAL_LABELS = [
    re.compile(r"\bstops? \d+", re.IGNORECASE),          # "stop 39", "stops 35-36"
    re.compile(r"\bissues? #?\d+", re.IGNORECASE),       # "issue 14", "issue #41"
    re.compile(r"\bnot kept\b", re.IGNORECASE),          # "tried and not kept"
    re.compile(r"\bthis stop\b", re.IGNORECASE),         # "in this stop"
]


def _load_hook() -> ModuleType:
    """docs/hooks/cli_reference.py as mkdocs loads it: by path, registered by name."""
    spec = importlib.util.spec_from_file_location("forge_docs_cli_reference", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _name(info: Any) -> str:
    """A typer command's or group's name as the command line spells it."""
    if isinstance(info.name, str):
        return info.name
    return str(info.callback.__name__).lower().replace("_", "-")


def _typer_paths(app: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and sub-command path of a typer app, read from typer's own
    registrations (not through the click interface the hook walks)."""
    paths: list[tuple[str, ...]] = []
    for info in app.registered_commands:
        if info.hidden is not True:
            paths.append((*prefix, _name(info)))
    for group in app.registered_groups:
        sub = group.typer_instance
        assert sub is not None
        name = group.name if isinstance(group.name, str) else sub.info.name
        assert isinstance(name, str)
        paths.append((*prefix, name))
        paths += _typer_paths(sub, (*prefix, name))
    return paths


def _headings(markdown: str) -> set[str]:
    return {line.lstrip("#").strip() for line in markdown.splitlines()
            if re.match(r"#{2,6} ", line)}


# -- the CLI reference ------------------------------------------------------------------


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    hook = _load_hook()
    rendered = hook.render(hook.forge_command())
    everything = typer.Typer()
    register_all(everything)  # forge.cli.app registers its commands as they are asked for
    paths = _typer_paths(everything)
    assert ("journal", "show") in paths and ("eval",) in paths  # the walk reads the app
    headings = _headings(rendered)
    missing = [" ".join(("forge", *p)) for p in paths
               if " ".join(("forge", *p)) not in headings]
    assert not missing, f"commands missing from the CLI reference: {missing}"
    # Every option and argument of every command, by the names --help gives it.
    root = typer.main.get_command(forge.cli.app)
    for entry in hook.commands(root):
        for param in entry.command.get_params(entry.ctx):
            if param.name == "help":
                continue
            names, _ = param.get_help_record(entry.ctx)
            assert f"`{names}`" in rendered, f"{entry.title}: {names} missing"


def test_a_command_added_later_appears_without_editing_the_page() -> None:
    """A new command or sub-command (``forge init``, ``forge journal prune``) shows up
    because the page is rendered from the app at each build, at any depth."""
    app = typer.Typer()

    @app.command("init")
    def init(folder: Path = typer.Argument(..., help="where the new bench goes"),
             force: bool = typer.Option(False, "--force", help="overwrite a | b")) -> None:
        """Start a bench: a registry, a harness and task splits."""

    journal = typer.Typer(help="Review search runs.")
    app.add_typer(journal, name="journal")

    @journal.command("prune")
    def prune(keep: int = typer.Option(3, "--keep", help="runs to keep <newest>")) -> None:
        """Remove the attempts of old runs, keeping their journals."""

    deeper = typer.Typer(help="A group inside a group.")
    journal.add_typer(deeper, name="store")

    @deeper.command("check")
    def check() -> None:
        """Check an attempt store."""

    hook = _load_hook()
    rendered = hook.render(typer.main.get_command(app))
    assert {"forge init", "forge journal", "forge journal prune",
            "forge journal store", "forge journal store check"} <= _headings(rendered)
    assert "`--force`" in rendered and "`--keep " in rendered
    # Help text shows literally: a pipe does not split the table row, <newest> is text.
    assert r"overwrite a \| b" in rendered
    assert "runs to keep &lt;newest&gt;" in rendered
    # The group's table links each sub-command to its section.
    assert "[`prune`](#forge-journal-prune)" in rendered


def test_the_hook_fills_only_the_cli_page_and_refuses_a_lost_marker() -> None:
    from mkdocs.exceptions import PluginError

    hook = _load_hook()

    def page(uri: str) -> Any:
        return SimpleNamespace(file=SimpleNamespace(src_uri=uri))

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert hook.MARKER in text
    filled = hook.on_page_markdown(text, page("cli.md"), None, None)
    assert hook.MARKER not in filled and "## forge search" in filled
    other = "a page that mentions " + hook.MARKER
    assert hook.on_page_markdown(other, page("index.md"), None, None) == other
    with pytest.raises(PluginError, match="marker"):
        hook.on_page_markdown("# CLI reference\n", page("cli.md"), None, None)


# -- what every user page keeps to --------------------------------------------------------


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_user_docs_carry_no_internal_history_labels(path: Path) -> None:
    found = [(n, m.group(0)) for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             for pattern in INTERNAL_LABELS for m in pattern.finditer(line)]
    assert not found, f"{path.relative_to(REPO)}: internal labels (line, text): {found}"


_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)[^`]*?\1")
_INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HREF = re.compile(r"""(?:href|src)=["']([^"']+)["']""")


def relative_links(markdown: str) -> list[str]:
    """The link targets of a Markdown text that point at files: inline links and images,
    reference definitions and raw HTML ``href``/``src``, outside code; external links
    (a scheme) and same-page anchors left out."""
    text = _CODE_SPAN.sub("", _FENCE.sub("", markdown))
    targets = [*_INLINE_LINK.findall(text), *_REF_LINK.findall(text), *_HREF.findall(text)]
    return [html.unescape(t) for t in targets
            if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t) and not t.startswith("#")]


def test_the_link_reader_finds_what_it_should() -> None:
    text = ("[a](guide/bench.md#the-bench-file) ![img](img/x.png \"t\") "
            "[web](https://example.org/x.md) [here](#anchor) `[not](code.md)`\n"
            "```\n[fenced](nope.md)\n```\n[ref]: ../README.md\n<a href=\"cli.md\">cli</a>\n")
    assert relative_links(text) == ["guide/bench.md#the-bench-file", "img/x.png",
                                    "../README.md", "cli.md"]


@pytest.mark.parametrize("path", USER_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for target in relative_links(path.read_text("utf-8")):
        file_part = target.split("#", 1)[0].split("?", 1)[0]
        if not file_part:
            continue
        resolved = (path.parent / file_part).resolve()
        if not resolved.exists():
            broken.append(f"{target} (no {resolved})")
        elif DOCS in path.parents and DOCS not in resolved.parents:
            # mkdocs publishes docs/ alone: a link out of it is broken on the site.
            broken.append(f"{target} (outside docs/, not on the site)")
    assert not broken, f"{path.relative_to(REPO)}: broken links: {broken}"


# -- the build ------------------------------------------------------------------------------


def _mkdocs_installed() -> bool:
    return (importlib.util.find_spec("mkdocs") is not None
            and importlib.util.find_spec("material") is not None)


def test_mkdocs_builds_the_guide_strictly(tmp_path: Path) -> None:
    if not _mkdocs_installed():
        if os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}:
            pytest.fail("CI is set but mkdocs is not installed; run.py test installs the "
                        "docs extra")
        pytest.skip("mkdocs is not installed (pip install '.[docs]'); CI runs this test")
    site = tmp_path / "site"
    # This checkout's forge, whatever the environment has installed: the CLI reference
    # is rendered from it.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--site-dir", str(site)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    page = (site / "cli" / "index.html").read_text("utf-8")
    ids = set(re.findall(r'<h[2-6] id="([^"]+)"', page))
    wanted = {"-".join(("forge", *p)) for p in _typer_paths(forge.cli.app)}
    assert wanted <= ids, f"missing from the built CLI reference: {sorted(wanted - ids)}"
    for name in ("--budget-rollouts", "--from-runtime", "--accept-beyond-tolerance",
                 "--min-pass-rate", "--keep-duplicates"):
        assert name in page
    for built in ("index.html", "concepts/index.html", "statistics/index.html",
                  "guide/bench/index.html", "guide/journal/index.html",
                  "guide/promote/index.html", "guide/runtime/index.html"):
        assert (site / built).is_file(), built
    assert not (site / "hooks").exists()  # the hook is build code, not a page


#: ``from forge import A, B`` or ``from forge import (`` ... ``)`` in a page's code.
_FORGE_IMPORT = re.compile(r"^\s*from forge import (\([^)]*\)|[^\n]*)", re.MULTILINE)


def _documented_forge_names() -> dict[str, list[str]]:
    """Each name a page imports ``from forge``, with the pages that do."""
    found: dict[str, list[str]] = {}
    for path in USER_DOCS:
        for match in _FORGE_IMPORT.finditer(path.read_text(encoding="utf-8")):
            for name in re.split(r"[\s,()]+", match.group(1).split("#")[0]):
                if name:
                    found.setdefault(name, []).append(path.relative_to(REPO).as_posix())
    return found


def test_every_name_the_docs_import_from_forge_imports() -> None:
    documented = _documented_forge_names()
    assert {"Search", "load_bench", "RunOutput"} <= set(documented)  # the pages were read
    missing = {}
    for name, pages in sorted(documented.items()):
        try:
            exec(f"from forge import {name}", {})
        except ImportError:
            missing[name] = pages
    assert missing == {}
