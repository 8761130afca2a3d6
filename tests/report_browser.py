"""Checks a report as a person sees it: opened in headless Chromium (see the ``browser`` fixture)."""

from __future__ import annotations

from pathlib import Path


def check_report_in_browser(driver, index: Path, screenshot: Path) -> list[dict]:
    """Open a report, assert every image rendered, save a screenshot; returns the claims table rows."""
    driver.get(index.resolve().as_uri())
    images = driver.execute_script(
        "return Array.from(document.images).map(i => ({alt: i.alt, w: i.naturalWidth, done: i.complete}))")
    assert images, "the report has no figure"
    assert all(image["done"] and image["w"] > 0 for image in images), images
    rows = driver.execute_script(
        "return Array.from(document.querySelectorAll('#claims tbody tr')).map(r => ({"
        "claim: r.dataset.claim, verdict: r.cells[0].innerText.trim().split('\\n')[0], "
        "full: r.cells[1].innerText, claim_text: r.cells[3].innerText, estimate: r.cells[4].innerText, "
        "control: r.cells[5].innerText, note: r.cells[7].innerText}))")
    driver.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size > 0
    return rows
