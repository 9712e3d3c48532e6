"""Regenerate docs/demo-report.png, the README's picture of the demo report.

The report is long, so the picture stacks three parts of it: the page's top (header and
runs), its first chart (Fig. 1) and the Fig. 5 section. Chromium is driven as the report's
browser test drives it (tests/present/browser.py: Debian's chromium, offline, fresh profile).

    etl demo /tmp/d/runs && etl ingest /tmp/d/runs --warehouse /tmp/d/wh
    etl report --warehouse /tmp/d/wh -o /tmp/d/report.html
    PYTHONPATH=. python docs/demo_screenshot.py /tmp/d/report.html docs/demo-report.png
"""
from __future__ import annotations

import base64
import sys
import tempfile
from pathlib import Path

from tests.present.browser import open_page

WIDTH = 1000
SHEET = ('<!doctype html><meta charset="utf-8"><style>body{margin:0;background:#fff}'
         "img{display:block}p{margin:0;padding:4px 8px;font:16px sans-serif;color:#888}"
         "</style>")


def report_parts(html: Path) -> list[bytes]:
    """PNG screenshots of the page's top, the first chart and the Fig. 5 section."""
    with open_page(html, width=WIDTH) as (page, log):
        overview = page.locator("section#overview").bounding_box()
        assert overview is not None, "no overview section"
        top = page.screenshot(full_page=True, clip={
            "x": 0, "y": 0, "width": WIDTH, "height": overview["y"] + overview["height"]})
        fig1 = page.locator("section#batch-scaling svg.chart").first.screenshot()
        fig5 = page.locator("section#fig5").screenshot()
    assert log.console_errors == [], log.console_errors
    return [top, fig1, fig5]


def stack(parts: list[bytes], out: Path) -> None:
    """The parts one under the other, an ellipsis between them, as one PNG."""
    images = [f'<img src="data:image/png;base64,{base64.b64encode(p).decode()}">'
              for p in parts]
    with tempfile.TemporaryDirectory() as tmp:
        sheet = Path(tmp) / "sheet.html"
        sheet.write_text(SHEET + "<p>…</p>".join(images), encoding="utf-8")
        with open_page(sheet, width=WIDTH) as (page, _):
            page.screenshot(path=str(out), full_page=True)


if __name__ == "__main__":
    stack(report_parts(Path(sys.argv[1])), Path(sys.argv[2]))
    print(f"wrote {sys.argv[2]} ({Path(sys.argv[2]).stat().st_size // 1024} KiB)")
