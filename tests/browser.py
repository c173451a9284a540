"""Helpers for the browser tests: Playwright driving Debian's Chromium
(never a downloaded browser), pages that log in, and screenshots kept in
test-artifacts/ for a human to look at."""
import os
import re
import socket

import pytest

from tests.helpers import create_user

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARTIFACTS = os.environ.get("TEST_ARTIFACTS", os.path.join(ROOT, "test-artifacts"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1366, "height": 768}  # a school Chromebook
# Servers for the browser tests: programs in the local sandbox, limits a test cannot hit by accident.
LIMITS = dict(SANDBOX="local", RUN_CPU_SECONDS=5, RUN_MEMORY_MB=400, RUN_IDLE_SECONDS=60, RUN_WALL_SECONDS=60)

# Hang guards, not timings: the suite keeps both CPUs busy (three test
# processes, their browsers and servers), and Playwright's own 5 s for an
# `expect` was met by a sign-in or a page load on a busy machine.
WAIT_MS = 30_000

try:
    from playwright.sync_api import expect, sync_playwright
    expect.set_options(timeout=WAIT_MS)
except ImportError:  # pragma: no cover - requirements-test.txt pins it
    sync_playwright = expect = None


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module's tests (each test gets fresh contexts)."""
    if sync_playwright is None:
        pytest.skip("playwright is not installed (pip install -r requirements-test.txt)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM} (scripts/install-system-deps installs it)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser):
    """new_page(server) -> a Page in a fresh context (own cookies and
    storage), with the page's JavaScript errors collected in page.errors.
    Its user asked for reduced motion, as a system setting may: the pulse
    of a program waiting for input and the editor's blinking cursor stop
    (software-drawn, they cost Chromium a tenth of a core per waiting
    page). The accessibility tests pass motion="no-preference"."""
    contexts = []

    def make(server, viewport=VIEWPORT, motion="reduce"):
        context = browser.new_context(base_url=server.url, viewport=viewport, reduced_motion=motion)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda e: page.errors.append(str(e)))
        return page

    yield make
    for context in contexts:
        context.close()


def student(server, name="ada"):
    """A student account on `server`: (username, password)."""
    create_user(server.env["DATABASE_URL"], name, f"{name}-password", display_name=name.title() + " Student")
    return name, f"{name}-password"


def student_ide(new_page, server, name="ada"):
    """A new student, signed in to the IDE in a fresh browser: (page, username, password)."""
    user, password = student(server, name)
    page = new_page(server)
    login(page, user, password, lands_on="/ide")
    return page, user, password


def shot(page, name):
    """Save a screenshot as test-artifacts/<name>.png."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    page.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"))


def login(page, username, password, lands_on=None):
    """Sign in through the sign-in page; waits for the page it leads to."""
    page.goto("/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    if lands_on:
        # At the address, then ready (the page's script done, which is after "load"): two hang guards
        # in turn, where waiting for "load" first spent the whole of one on a busy machine.
        page.wait_for_url(re.compile(re.escape(lands_on) + "$"), wait_until="commit")
        wait_ready(page)


def wait_ready(page):
    """The page's script has finished starting (body[data-ready])."""
    page.wait_for_selector("body[data-ready=true]")


def editor(page):
    return page.locator("#editor .cm-content")


def editor_text(page):
    """The text in the editor, line by line (CodeMirror renders a div per line)."""
    return page.evaluate("""() => [...document.querySelectorAll('#editor .cm-line')]
        .map((l) => l.textContent).join('\\n')""")


def replace_text(page, text):
    """Select all in the editor and insert `text` as one input (no auto-indent)."""
    editor(page).click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(text)


def save_status(page):
    return page.locator("#save-status")


def expect_saved(page, timeout=15_000):
    expect(save_status(page)).to_have_attribute("data-status", "saved", timeout=timeout)
    expect(save_status(page)).to_have_text("Saved")


def terminal_text(page):
    return page.evaluate("() => document.querySelector('#terminal .xterm-rows')?.innerText || ''")


def wait_terminal(page, pattern, timeout=30):
    """Wait until the console shows text matching `pattern` (a regex)."""
    page.wait_for_function(
        "([p]) => new RegExp(p).test(document.querySelector('#terminal .xterm-rows')?.innerText || '')",
        arg=[pattern], timeout=timeout * 1000)
    return terminal_text(page)


def open_file(page, name, area="home"):
    page.locator(f'.tree-section[data-area="{area}"] .tree-row[data-path="{name}"]').click()
    expect(page.locator(".tab.selected")).to_contain_text(name)


def new_file(page, name):
    """Create `name` in My files with the tree's New file button; it opens."""
    page.get_by_role("button", name="New file in My files").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_label("File name").fill(name)
    dialog.get_by_role("button", name="Create").click()
    expect(page.locator(".tab.selected")).to_contain_text(name)


def write_program(page, name, code):
    """A new file in My files with `code` in it, saved."""
    new_file(page, name)
    replace_text(page, code)
    expect_saved(page)


# axe-core (package.json pins it; `make test` installs it): WCAG 2.0 and 2.1,
# levels A and AA, and 2.2's AA target size (the only rule tagged wcag22aa).
AXE = os.path.join(ROOT, "node_modules", "axe-core", "axe.min.js")
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


def axe_violations(page):
    """axe-core's violations on the page as it is now: a list of dicts."""
    if not os.path.exists(AXE):
        pytest.fail(f"{AXE} is missing: `make test` installs it (npm ci --ignore-scripts)")
    if not page.evaluate("() => typeof window.axe === 'object'"):
        with open(AXE, encoding="utf-8") as f:
            source = f.read()
        # Evaluated through the DevTools protocol: the page's Content-Security-Policy
        # (script-src 'self') refuses an inline <script> tag, and rightly so.
        page.evaluate("(source) => { (0, eval)(source); }", source)
    return page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                         resultTypes: ['violations']})
        .then((r) => r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                                               targets: v.nodes.map((n) => n.target.join(' '))})))""", AXE_TAGS)


def assert_accessible(page, state):
    """Zero axe-core violations (WCAG 2.1 A/AA and 2.2's target size) in
    `state`, else a failure listing each: rule, impact, elements, what to do."""
    violations = axe_violations(page)
    if violations:
        raise AssertionError(f"{len(violations)} accessibility violations in {state}:\n" + "\n".join(
            f"- {v['id']} ({v['impact']}): {v['help']}\n    " + "\n    ".join(v["targets"][:8])
            + (f"\n    ... and {len(v['targets']) - 8} more" if len(v["targets"]) > 8 else "")
            for v in violations))


def assert_no_sideways_scroll(page, state):
    """The page is no wider than its window, and its top bar no wider than
    itself (a bar that clips would hide its last buttons): nothing to scroll sideways to."""
    wide = page.evaluate("""() => [document.documentElement, ...document.querySelectorAll('.topbar')]
        .filter((el) => el.scrollWidth > el.clientWidth)
        .map((el) => `${el.tagName.toLowerCase()}.${el.className}: ${el.scrollWidth} CSS px in ${el.clientWidth}`)""")
    assert not wide, f"{state} scrolls sideways: " + "; ".join(wide)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
