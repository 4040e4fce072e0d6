"""Open a report.html in headless Chromium over the DevTools protocol and check it.

    python scripts/browser_check.py REPORT.html SCREENSHOT.png [--chromium /usr/bin/chromium]
        [--width 1600]

Prints one JSON object: every image (src, naturalWidth, naturalHeight), whether the comparison
table is present (and its rows), how far the page and each comparison table's last column
reach past the window (``overflow_px``, ``verdict_overflow_px``: 0 when nothing is clipped),
every URL the page requested (all must be file: URLs: the
page fetches nothing from the network) and the screenshot's path. Exit 0 when every image
loaded and the table is there, 1 otherwise. Needs ``websockets`` (the dev extra).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from base64 import b64decode
from pathlib import Path

# Headless, no sandbox (CI runs as root), no GPU, and nothing that phones home.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
)
WIDTH = 1600
MAX_HEIGHT = 12000

PROBE = """JSON.stringify({
  images: Array.from(document.images).map(i => ({
    src: i.getAttribute("src"), complete: i.complete,
    naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight})),
  comparison_rows: Array.from(document.querySelectorAll("table.comparison tbody tr")).length,
  comparison_tables: document.querySelectorAll("table.comparison").length,
  title: document.title,
  overflow_px: Math.max(0, document.documentElement.scrollWidth - window.innerWidth),
  verdict_overflow_px: Math.max(0, ...Array.from(
    document.querySelectorAll("table.comparison tr > :last-child")).map(
      c => c.getBoundingClientRect().right - window.innerWidth)),
  height: document.documentElement.scrollHeight
})"""


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _Cdp:
    """A minimal DevTools client: send a command, wait for its answer, remember events."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def call(self, method: str, timeout: float = 60, **params) -> dict:
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> dict:
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            self.events.append(msg)
            if msg.get("method") == method:
                return msg


def _devtools_port(profile: Path, proc: subprocess.Popen, timeout: float = 60) -> int:
    path = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file():
            lines = path.read_text().split()
            if lines:
                return int(lines[0])
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with status {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError("chromium did not open its DevTools port")


def _stop(proc: subprocess.Popen, linger: float = 3.0) -> None:
    """End chromium and every process it started (its process group): SIGTERM, SIGKILL after
    20 s; then wait up to ``linger`` s for the helpers that outlive the browser, which write to
    the profile while it is removed (seen in CI: ``Directory not empty: 'Default'``)."""

    def signal_group(sig: int) -> bool:
        try:
            os.killpg(proc.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False  # none left

    signal_group(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        signal_group(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + linger
    while signal_group(0) and time.monotonic() < deadline:
        time.sleep(0.05)
    signal_group(signal.SIGKILL)


def check(report: Path, screenshot: Path, chromium: str, width: int = WIDTH) -> dict:
    """Load ``report`` in headless ``chromium`` ``width`` px wide, probe it, save a full-page
    ``screenshot``."""
    report = report.resolve()
    # (ignore_cleanup_errors: a helper process chromium left may still write to the profile
    # as it is removed; the profile is ours alone and never read again)
    profiles = tempfile.TemporaryDirectory(prefix="specscope-chromium-", ignore_cleanup_errors=True)
    with profiles as tmp:
        profile = Path(tmp)
        proc = subprocess.Popen(
            [
                chromium,
                *FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its renderer and helpers in one process group with it
        )
        try:
            port = _devtools_port(profile, proc)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
                pages = [t for t in json.load(r) if t.get("type") == "page"]
            from websockets.sync.client import connect

            with connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30) as ws:
                cdp = _Cdp(ws)
                cdp.call("Page.enable")
                cdp.call("Network.enable")
                cdp.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=1000,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                cdp.call("Page.navigate", url=report.as_uri())
                cdp.wait_event("Page.loadEventFired")
                probe = cdp.call("Runtime.evaluate", expression=PROBE, returnByValue=True)
                data = json.loads(probe["result"]["value"])
                height = min(int(data["height"]), MAX_HEIGHT)
                cdp.call(
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                shot = cdp.call("Page.captureScreenshot", format="png", timeout=120)
                screenshot.write_bytes(b64decode(shot["data"]))
                data["requests"] = [
                    e["params"]["request"]["url"]
                    for e in cdp.events
                    if e.get("method") == "Network.requestWillBeSent"
                ]
        finally:
            _stop(proc)
    data["screenshot"] = str(screenshot)
    data["ok"] = (
        bool(data["images"])
        and all(i["naturalWidth"] > 0 for i in data["images"])
        and data["comparison_tables"] > 0
        and data["comparison_rows"] > 0
        and data["overflow_px"] == 0
        and data["verdict_overflow_px"] <= 0
    )
    return data


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path)
    p.add_argument("screenshot", type=Path)
    p.add_argument("--chromium", default=None)
    p.add_argument("--width", type=int, default=WIDTH, help="window width in px")
    args = p.parse_args()
    chromium = args.chromium or find_chromium()
    if chromium is None:
        print("no chromium on PATH; install Debian's chromium", file=sys.stderr)
        return 2
    data = check(args.report, args.screenshot, chromium, args.width)
    print(json.dumps(data, indent=1))
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
