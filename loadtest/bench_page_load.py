"""How long a cold load of the IDE takes in Chromium, until a student can
type: a fresh browser profile each time (nothing cached), signed in, then
/ide until the page says it is ready (its files listed, the editor shown).

    python -m loadtest.bench_page_load --url http://localhost:8888 --user student1 --password ...

It measures a running IDE (`make start`, or a deployment), as a student's
browser sees it: Navigation Timing's domInteractive, DOMContentLoaded and
load, the page's own "pyc-ready" mark, and the bytes of the bundle. Each
profile is loaded --runs times: once as the machine is, once as a school's
Wi-Fi and a Chromebook (20 Mbit/s, 40 ms round trips, CPU 4x slower). A
load that fails (sign-in refused, page never ready) is counted and shown,
never left out. Needs Playwright (requirements-test.txt) and Debian's chromium.
"""
import argparse
import json
import statistics
import sys

from .pages import CHROMIUM_ARGS, VIEWPORT
PROFILES = {
    "local": None,
    "school (20 Mbit/s, 40 ms RTT, CPU /4)": {"latency": 40, "download": 20e6 / 8, "upload": 5e6 / 8, "cpu": 4},
}
READY_TIMEOUT_MS = 60_000  # a load slower than this is a failure, not a figure

TIMING_JS = """() => {
    const nav = performance.getEntriesByType("navigation")[0];
    const ready = performance.getEntriesByName("pyc-ready")[0];
    const assets = performance.getEntriesByType("resource").filter((r) => r.name.includes("/static/dist/"));
    const sum = (key) => assets.reduce((n, r) => n + r[key], 0);
    return {
        dom_interactive_ms: nav.domInteractive,
        dom_content_loaded_ms: nav.domContentLoadedEventEnd,
        load_event_end_ms: nav.loadEventEnd,
        ready_ms: ready ? ready.startTime : null,
        asset_files: assets.length,
        asset_transfer_bytes: sum("transferSize"),
        asset_decoded_bytes: sum("decodedBodySize"),
    };
}"""


def sign_in(page, username, password):
    """Sign in through the API, as the sign-in page does (the XSRF cookie first)."""
    page.request.get("/api/me")
    xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
    answer = page.request.post("/api/login", data={"username": username, "password": password},
                               headers={"X-XSRFToken": xsrf})
    if not answer.ok:
        raise RuntimeError(f"sign-in refused: {answer.status} {answer.text()[:200]}")


def throttle(context, page, profile):
    cdp = context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.emulateNetworkConditions", {
        "offline": False, "latency": profile["latency"],
        "downloadThroughput": profile["download"], "uploadThroughput": profile["upload"]})
    cdp.send("Emulation.setCPUThrottlingRate", {"rate": profile["cpu"]})


def cold_load(browser, url, username, password, profile):
    """One cold load of /ide in a new, empty browser context: its timings."""
    context = browser.new_context(base_url=url, viewport=VIEWPORT)
    try:
        page = context.new_page()
        sign_in(page, username, password)
        if profile:
            throttle(context, page, profile)
        page.goto("/ide")
        page.wait_for_selector("body[data-ready=true]", timeout=READY_TIMEOUT_MS)
        page.wait_for_load_state("load")
        return page.evaluate(TIMING_JS)
    finally:
        context.close()


def measure(url, username, password, runs=5, chromium="/usr/bin/chromium"):
    """{profile: {"loads": [timings, ...], "failures": [reason, ...]}}."""
    from playwright.sync_api import Error as PlaywrightError, sync_playwright
    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, timeout=60_000)
        try:
            for name, profile in PROFILES.items():
                loads, failures = [], []
                for _ in range(runs):
                    try:
                        loads.append(cold_load(browser, url, username, password, profile))
                    except (PlaywrightError, RuntimeError) as e:
                        failures.append(str(e).splitlines()[0])
                results[name] = {"loads": loads, "failures": failures}
        finally:
            browser.close()
    return results


def report(results, runs):
    lines = []
    for name, result in results.items():
        loads = result["loads"]
        lines.append(f"\ncold load of /ide, {name}: {len(loads)} of {runs} loads, {len(result['failures'])} failed")
        for reason in sorted(set(result["failures"])):
            lines.append(f"  failed: {reason}")
        if not loads:
            continue
        lines.append(f"  {'':24} {'median':>10} {'min':>10} {'max':>10}")
        for key in loads[0]:
            values = [load[key] for load in loads if load[key] is not None]
            if values:
                row = (statistics.median(values), min(values), max(values))
                lines.append(f"  {key:24} " + " ".join(f"{v:10.0f}" for v in row))
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_page_load",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the IDE, e.g. http://localhost:8888")
    parser.add_argument("--user", required=True, help="a student account to sign in with")
    parser.add_argument("--password", required=True)
    parser.add_argument("--runs", type=int, default=5, help="cold loads per profile (default 5)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the browser to drive")
    parser.add_argument("--json", help="also write every load's figures here")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    results = measure(args.url, args.user, args.password, args.runs, args.chromium)
    print(report(results, args.runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"url": args.url, "runs": args.runs, "results": results}, f, indent=2)
    return 1 if any(r["failures"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
