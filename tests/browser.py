"""A real headless Chromium for the tests (Debian's package: ``apt-get install chromium``):
``chromium_binary`` finds it (or skips, saying how to install it), ``dump_dom`` loads a page
once and returns the DOM Chromium ended with (the corpus report's tests), and ``Browser`` keeps
a page open and drives it over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
JSON messages ended by NUL on fds 3 and 4, standard library only), for pages that change while
they are open (the operator page)."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
          "--no-default-browser-check", "--disable-extensions", "--disable-background-networking")


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no headless Chromium on this machine (apt-get install chromium)")


def dump_dom(url: str, budget_ms: int = 5000) -> str:
    """The DOM once ``url`` has loaded and ``budget_ms`` of virtual time have passed."""
    return subprocess.run(
        [chromium_binary(), *_FLAGS, f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=True).stdout


class Browser:
    """One headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        binary = chromium_binary()
        self._profile = tempfile.TemporaryDirectory(prefix="tripwire-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:  # Chromium reads commands on fd 3 and writes answers on fd 4
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.process = subprocess.Popen(
            [binary, *_FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
             "about:blank"], preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._ids = iter(range(1, 1 << 30))
        self._answers: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.send("Target.attachToTarget",
                                  {"targetId": target, "flatten": True})["sessionId"]
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                          "deviceScaleFactor": 1,
                                                          "mobile": False}, page=True)
        self.send("Page.enable", page=True)

    def _read(self) -> None:
        buffered = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                with self._cond:
                    self._answers[-1] = {"error": {"message": "Chromium exited"}}
                    self._cond.notify_all()
                return
            buffered += chunk
            while b"\0" in buffered:
                raw, buffered = buffered.split(b"\0", 1)
                message = json.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._answers[message["id"]] = message
                        self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, *, page: bool = False,
             timeout: float = 30.0) -> dict[str, Any]:
        """One DevTools command (to the page's session when ``page``); its result."""
        ident = next(self._ids)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if page:
            message["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while ident not in self._answers and -1 not in self._answers:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"Chromium did not answer {method} in {timeout} s")
                self._cond.wait(left)
            answer = self._answers.pop(ident, None) or self._answers[-1]
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, page=True)
        self.wait_for("document.readyState === 'complete'")

    def js(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise awaited)."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True}, page=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')} "
                               f"{result['exceptionDetails'].get('exception', {})}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll ``expression`` until it is truthy (its value), or fail saying which."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.js(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"the page never showed {expression!r} in {timeout} s")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> int:
        """A PNG of the page's viewport at ``path``; its size in bytes."""
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"},
                                          page=True)["data"])
        path.write_bytes(data)
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", timeout=5)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
