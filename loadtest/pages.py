"""Pages in headless Chromium for the benchmarks that time what a person
sees: Debian's Chromium through Playwright (async), at a school laptop's
size, each page signed in as its person through the API (the sign-in
page's own steps are not what these tools measure)."""
import contextlib

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1366, "height": 768}  # a school Chromebook


async def launch(stack):
    """Chromium, closed on `stack`'s exit (Playwright stopped after it)."""
    from playwright.async_api import async_playwright
    p = await stack.enter_async_context(async_playwright())
    browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=60_000)
    stack.push_async_callback(browser.close)
    return browser


async def signed_in_page(browser, url, login, path, timeout, init_script=None, viewport=VIEWPORT):
    """(context, page): a new browser context signed in as `login`
    (username, password), `init_script` added before any page script,
    showing `path` once its script is ready (body[data-ready])."""
    context = await browser.new_context(base_url=url, viewport=viewport)
    try:
        if init_script:
            await context.add_init_script(init_script)
        page = await context.new_page()
        await page.request.get("/api/me")  # hands out the _xsrf cookie
        xsrf = next((c["value"] for c in await context.cookies() if c["name"] == "_xsrf"), "")
        answer = await page.request.post("/api/login", data={"username": login[0], "password": login[1]},
                                         headers={"X-XSRFToken": xsrf})
        if not answer.ok:
            raise RuntimeError(f"{login[0]}'s sign-in was refused: {answer.status}")
        await page.goto(path)
        await page.wait_for_selector("body[data-ready=true]", timeout=timeout * 1000)
    except BaseException:
        with contextlib.suppress(Exception):
            await context.close()
        raise
    return context, page
