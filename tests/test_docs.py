"""The docs stay true and whole: every relative link in README.md and
docs/*.md reaches a file that exists and, with a #fragment, a heading of
it (GitHub's anchors); the README stays a newcomer's page, at most 200
lines, opening with the two set-up commands, and CI runs its test command."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def readable(text):
    """The text as it renders: fenced blocks and code spans hold no links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading):
    """GitHub's anchor for a heading: its text (code marks and link targets
    left out), lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, found = {}, set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken_links(page):
    """Each relative link of `page` that does not resolve, with why."""
    broken = []
    for target in LINK.findall(readable(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto: are not the repository's
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif fragment and (dest.suffix != ".md" or fragment not in anchors(dest)):
            broken.append(f"{target}: no heading #{fragment} in {dest.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_a_heading(page):
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## One process or several: `./simple_load_test.sh`\n")
    page = tmp_path / "page.md"
    page.write_text("# Page\n\n## Set-up, two commands\n\n"
                    "[ok](other.md#one-process-or-several-simple_load_testsh) [ok](#set-up-two-commands) "
                    "[web](https://example.org/x) `[code](nowhere.md)`\n\n"
                    "[gone](missing.md) [no heading](other.md#nothing) [here](#nothing)\n\n"
                    "```\n[fenced](nowhere.md)\n```\n")
    assert [b.split(":")[0] for b in broken_links(page)] == ["missing.md", "other.md#nothing", "#nothing"]


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## Example\n\ntext\n\n## Example\n\n```\n# not a heading\n```\n")
    assert anchors(page) == {"example", "example-1"}


def test_the_readme_is_short_and_opens_with_the_two_set_up_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md is for newcomers: move the rest to docs/"
    first_block = re.search(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)
    assert first_block and first_block.start() < text.index("\n## ", text.index("## Set-up")), \
        "the set-up commands come first, under Set-up"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands == ["make start", "make test"]


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1] == "make test"


def test_the_run_protocol_lives_only_in_docs():
    assert (ROOT / "docs" / "run-protocol.md").exists()
    assert not (ROOT / "server" / "runs" / "PROTOCOL.md").exists()
