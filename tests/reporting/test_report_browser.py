"""The report in a real browser: headless Chromium (Debian's ``/usr/bin/chromium``) driven by
Playwright, offline (``make test-browser`` installs Chromium when it is missing).

On the ``evaluated`` store (tests/reporting/conftest.py): the plots render with a size, the
case table filters, a case opens with its SQL, the question whose text is a script and an
``<img onerror>`` shows as text, no dialog opens, and the page's Content-Security-Policy is
never violated (nothing blocked: nothing was there to block). Screenshots go to the test's
temporary folder, or to ``$SQLEVAL_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.reporting.conftest import BREAKOUT, IMG, SCRIPT

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (make test-browser installs it)"),
]


@pytest.fixture(scope="module")
def browser_page(evaluated, tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    from sqleval_pipeline.reporting.html import write_report

    folder = tmp_path_factory.mktemp("browser")
    html = write_report(evaluated.env, None, folder / "report.html")
    shots = Path(os.environ.get("SQLEVAL_SCREENSHOTS") or folder)
    shots.mkdir(parents=True, exist_ok=True)
    events = {"dialogs": [], "console": [], "requests": []}
    with sync_api.sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1280, "height": 900})
        page = ctx.new_page()
        page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
        page.on("console", lambda m: events["console"].append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: events["console"].append(f"pageerror: {e}"))
        page.on("request", lambda r: events["requests"].append(r.url))
        page.goto(html.as_uri())
        page.wait_for_load_state("load")
        yield page, events, shots
        ctx.close()


def test_the_plots_render_with_a_size(browser_page):
    page, events, shots = browser_page
    plots = page.locator("svg.plot")
    assert plots.count() >= 6
    for i in range(plots.count()):
        box = plots.nth(i).bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50, (i, box)
        # drawn, not just laid out: its marks have painted geometry
        assert plots.nth(i).evaluate("s => s.getBBox().width * s.getBBox().height") > 0
    page.screenshot(path=str(shots / "report-top.png"))
    page.screenshot(path=str(shots / "report-full.png"), full_page=True)


def test_filtering_the_case_table(browser_page, evaluated):
    page, _, _ = browser_page
    key = evaluated.keys["recorded"]
    batch = json.loads((evaluated.folder(key) / "batch.json").read_text())
    rows = page.locator("#case-table tbody tr")
    total = rows.count()
    page.select_option("#filters select[name=config]", key)
    visible = page.locator("#case-table tbody tr:not([hidden])")
    assert visible.count() == len(batch["case_ids"]) < total
    assert page.locator("#shown").inner_text() == f"{len(batch['case_ids'])} of {total} shown"
    page.fill("#filters input[name=text]", evaluated.guard_case)
    assert visible.count() == 1
    page.fill("#filters input[name=text]", "")
    page.select_option("#filters select[name=verdict]", "flips")
    assert visible.count() >= 1
    assert all(r.get_attribute("data-verdict") == "flips" for r in visible.all())
    page.select_option("#filters select[name=verdict]", "")
    page.select_option("#filters select[name=config]", "")
    assert visible.count() == total


def test_a_case_opens_with_its_sql_and_hostile_text_stays_text(browser_page, evaluated):
    import pandas as pd

    page, events, shots = browser_page
    key = evaluated.keys["recorded"]
    attempts = pd.read_parquet(evaluated.folder(key) / "attempts.parquet")
    sql = attempts[attempts.case_id == evaluated.hostile_case].sort_values("run_index").sql.iloc[0]
    page.select_option("#filters select[name=config]", key)
    row = page.locator(f"#case-table tbody tr[data-config='{key}']", has_text=evaluated.hostile_case)
    row.locator("button.open").click()
    panel = page.locator("#case-detail")
    panel.wait_for(state="visible")
    text = panel.inner_text()
    assert sql in [p.inner_text() for p in panel.locator("pre.sql").all()]
    assert SCRIPT in text and IMG in text and BREAKOUT in text  # the question and cells, as text
    assert page.locator("img").count() == 0 and page.locator("#case-detail script").count() == 0
    assert page.locator("script").count() == 2  # the data block and the report's own script
    # the guard refusal of the other recorded case shows its layer
    page.locator(f"#case-table tbody tr[data-config='{key}']", has_text=evaluated.guard_case) \
        .locator("button.open").click()
    assert "guard refused:" in panel.inner_text()
    page.locator(f"#case-table tbody tr[data-config='{key}']", has_text=evaluated.hostile_case) \
        .locator("button.open").click()
    panel.screenshot(path=str(shots / "report-case.png"))
    assert events["dialogs"] == []
    assert not [m for m in events["console"] if "Content Security Policy" in m or "pageerror" in m]
    assert all(u.startswith("file://") for u in events["requests"]), events["requests"]
