"""The inspector in a real browser: Debian's headless chromium, driven by Playwright (its
own browser download is never used). A journey through every view by keyboard, the time
control, and what other keys see; every request the pages make is intercepted, and only
the server on loopback may be asked."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from membrane_es.schema.records import TrustContext
from membrane_es.schema.timestamps import rfc3339
from tests.integration.inspector.conftest import (
    FORGOTTEN_TEXT,
    OTHER,
    OWNER,
    READER,
    SENSITIVE_TEXT,
    Store,
    hits,
)

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium")
if CHROMIUM is None:  # CI installs it (.ci/run); elsewhere the browser tests are skipped
    if os.environ.get("CI") == "true":
        raise RuntimeError("Debian's chromium is required under CI (apt-get install chromium)")
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

FULL = TrustContext(max_sensitivity="hyper", authenticated=True)
LOOPBACK = {"127.0.0.1"}
ANSWERED = "Failed to load resource: the server responded with a status of"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


class Tab:
    """A browser context on the store: every request checked, console errors kept."""

    def __init__(self, browser: object, store: Store) -> None:
        self.context = browser.new_context()  # type: ignore[attr-defined]
        self.requested: list[str] = []
        self.elsewhere: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.store = store

    def _route(self, route: object, request: object) -> None:
        url = request.url  # type: ignore[attr-defined]
        self.requested.append(url)
        if urlsplit(url).hostname in LOOPBACK:
            route.continue_()  # type: ignore[attr-defined]
        else:
            self.elsewhere.append(url)
            route.abort()  # type: ignore[attr-defined]

    def _console(self, message: object) -> None:
        text = message.text  # type: ignore[attr-defined]
        # a page answered 401 (the key form) or 404 is the server's word, not a fault
        if message.type == "error" and not text.startswith(ANSWERED):  # type: ignore[attr-defined]
            self.errors.append(text)

    def enter_key(self, key: str) -> None:
        self.page.goto(f"{self.store.base}/ui/")
        assert self.page.title().startswith("Key")
        # the key field takes the focus by itself (autofocus, applied once the page renders)
        sync_api.expect(self.page.locator("#key")).to_be_focused()
        self.page.keyboard.type(key)
        self.submit()
        assert self.page.title().startswith("Search")

    def search(self, task: str) -> list[str]:
        self.page.focus("#q")
        self.page.fill("#q", task)
        self.submit()
        return hits(self.page.content())

    def submit(self) -> None:
        """Enter in the focused field: its form is sent, the next page loads."""
        with self.page.expect_navigation():
            self.page.keyboard.press("Enter")

    def close(self) -> None:
        assert not self.elsewhere, f"requests left loopback: {self.elsewhere}"
        assert all(urlsplit(u).hostname in LOOPBACK for u in self.requested)
        assert not self.errors, self.errors  # a load the page's CSP refused would show here
        self.context.close()


def test_every_view_by_keyboard_at_any_moment(browser: object, store: Store) -> None:
    tab = Tab(browser, store)
    page = tab.page
    seen: list[str] = []
    tab.enter_key(OWNER)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"

    now = tab.search("Orchid deploy target")
    expected = store.memory.retrieve("Orchid deploy target", trust=FULL, limit=21)
    assert now == [r.id for r in expected.records]
    assert page.locator("li.hit svg.shares").count() == len(now)
    seen.append(page.content())

    # the time control: type a moment, Enter; the answer is what as_of gives
    page.focus("#as_of")
    page.keyboard.type(rfc3339(store.before_move))
    tab.submit()
    then = store.memory.retrieve(
        "Orchid deploy target", trust=FULL, limit=21, as_of=store.before_move
    )
    assert hits(page.content()) == [r.id for r in then.records] != now
    assert "as of" in page.inner_text("#moment")
    page.click("text=Back to now")
    assert hits(page.content()) == now

    # a record: follow its link with the keyboard
    page.focus(f"li[data-record='{store.moved}'] a")
    tab.submit()
    assert page.locator("table.timeline tbody tr").count() == 3
    assert "contested" in page.inner_text("#state")
    seen.append(page.content())

    page.click("text=Relations and provenance")
    page.wait_for_selector("figure.graph svg")
    assert page.locator("figure.graph svg a").count() >= 4  # itself, first, variant, forgotten
    seen.append(page.content())
    page.click(f"figure.graph a[href*='{store.forgotten}']")
    page.wait_for_selector("figure.graph svg")
    seen.append(page.content())

    page.goto(f"{store.base}/ui/records/{store.forgotten}")
    assert "Erased on" in page.inner_text("#erased")
    seen.append(page.content())

    page.click("nav >> text=Metrics")
    page.wait_for_selector("section.metric svg")
    assert page.locator("section.metric svg").count() == 4
    seen.append(page.content())

    page.click("nav >> text=Integrity")
    page.click("#verify")
    page.wait_for_selector("#report")
    assert page.inner_text("#head") == store.memory.verify().head
    seen.append(page.content())

    for html in seen:
        for word in FORGOTTEN_TEXT.split():
            assert word not in html
    tab.close()


def test_the_time_control_takes_a_log_position(browser: object, store: Store) -> None:
    tab = Tab(browser, store)
    page = tab.page
    tab.enter_key(OWNER)
    now = tab.search("Orchid deploy target")
    # type a position beside the moment, Enter: the store right after that event
    page.focus("#as_of_position")
    page.keyboard.type("1")
    tab.submit()
    then = store.memory.retrieve("Orchid deploy target", trust=FULL, limit=21, as_of_position=1)
    assert hits(page.content()) == [r.id for r in then.records] == [store.first] != now
    assert "right after log position 1" in page.inner_text("#moment")
    assert page.input_value("#as_of") == ""
    # the position holds across links: to the record, then to the metrics
    page.focus(f"li[data-record='{store.first}'] a")
    tab.submit()
    assert "as_of_position=1" in page.url
    assert "Superseded" not in page.inner_text("main")
    assert page.input_value("#as_of_position") == "1"
    page.click("nav >> text=Metrics")
    page.wait_for_selector("section.metric svg")
    assert "as_of_position=1" in page.url
    assert "right after log position 1" in page.inner_text("#moment")
    # a moment typed while a position is set is refused, naming the field
    page.focus("#as_of")
    page.keyboard.type(rfc3339(store.before_move))
    tab.submit()
    assert "as_of_position" in page.inner_text("main")
    page.click("text=Back to now")
    assert page.input_value("#as_of_position") == ""
    tab.close()


def test_other_keys_see_what_their_keys_allow(browser: object, store: Store) -> None:
    reader = Tab(browser, store)
    reader.enter_key(READER)
    found = reader.search("")  # every record it may see
    assert store.sensitive in found and store.secret not in found
    card = reader.page.locator(f"li[data-record='{store.sensitive}']")
    assert "[redacted" in card.inner_text()
    assert SENSITIVE_TEXT not in reader.page.content()
    reader.close()

    other = Tab(browser, store)
    other.enter_key(OTHER)
    ours = {store.first, store.moved, store.variant, store.sensitive, store.secret}
    assert not ours & set(other.search("Orchid deploy target"))
    other.page.goto(f"{store.base}/ui/records/{store.moved}")
    assert other.page.inner_text("h1") == "404"
    other.close()


def test_the_browsing_views_by_keyboard(browser: object, store: Store) -> None:
    """The records table (filters, go to id), a record's supersede diff and raw JSON, a
    conversation, the entries: reached from the navigation, each at the moment chosen."""
    tab = Tab(browser, store)
    page = tab.page
    seen: list[str] = []
    tab.enter_key(OWNER)

    page.click("nav >> text=Records")
    page.wait_for_selector("table.records")
    assert page.locator("table.records tbody tr[data-record]").count() == min(
        50, len(store.memory.record_ids(trust=FULL, include_retracted=True))
    )
    page.select_option("#state-filter", "superseded")
    page.focus("#scope-filter")
    tab.submit()
    assert page.locator("table.records tbody tr[data-record]").count() == 1
    assert page.locator(f"tr[data-record='{store.first}']").count() == 1
    seen.append(page.content())

    # go to a record by the first characters of its id
    page.focus("#goto")
    page.keyboard.type(store.moved[:8])
    tab.submit()
    assert page.url.startswith(f"{store.base}/ui/records/{store.moved}")
    assert "staging" in page.inner_text("#revision-1") and "production" in page.inner_text(
        "#revision-1"
    )
    page.click("#raw summary")
    assert '"object": "production"' in page.inner_text("#raw pre")
    seen.append(page.content())

    # a conversation turn: its sitting, speakers in order, said-after links within the page
    page.goto(f"{store.base}/ui/records/{store.turns[2]}")
    page.click("#conversation")
    page.wait_for_selector("ol.turns")
    speakers = page.locator("li.turn strong.speaker").all_inner_texts()
    assert speakers == ["user", "assistant", "user"]
    page.click(f"li[data-record='{store.turns[2]}'] a.said-after >> nth=0")
    assert page.url.endswith("#turn-" + store.turns[0]) or page.url.endswith(
        "#turn-" + store.turns[1]
    )
    seen.append(page.content())

    page.click("nav >> text=Entries")
    page.wait_for_selector("table.entries")
    assert page.inner_text("#tenant") == "a"
    assert page.locator(f"tr[data-entry='{store.entry}']").count() == 1
    seen.append(page.content())

    for html in seen:
        for word in FORGOTTEN_TEXT.split():
            assert word not in html
    tab.close()


def test_a_redacted_hit_shows_no_score_in_the_browser(browser: object, store: Store) -> None:
    reader = Tab(browser, store)
    reader.enter_key(READER)
    reader.search("")
    card = reader.page.locator(f"li[data-record='{store.sensitive}']")
    text = card.inner_text()
    assert "withheld" in text and "meaning" not in text and "relevance" not in text
    assert card.locator("svg").count() == 0
    reader.close()


def test_a_long_query_does_not_widen_the_page(browser: object, store: Store) -> None:
    tab = Tab(browser, store)
    tab.enter_key(OWNER)
    tab.page.goto(f"{store.base}/ui/?q={'x' * 10_000}")
    width = tab.page.evaluate("document.documentElement.scrollWidth")
    assert width <= tab.page.viewport_size["width"]  # type: ignore[index]
    # an error page too: the views and the time control stay
    tab.page.goto(f"{store.base}/ui/records/{'y' * 5_000}")
    assert tab.page.locator("nav >> text=Records").count() == 1
    assert tab.page.locator("#as_of").count() == 1
    assert tab.page.evaluate("document.documentElement.scrollWidth") <= 1280
    tab.close()
