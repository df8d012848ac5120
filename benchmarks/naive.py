"""The naive baseline: what a first Python watchdog would do per call.

Parse the args, re-serialize them with sorted keys, hash with BLAKE2b and keep the last 12 keys
in a deque, checking the newest for a repeat. It does less than tripwire (no path cleaning, no
exact numbers, one detector), so the ratio is conservative.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque


class NaiveWatchdog:
    def __init__(self) -> None:
        self.keys: deque[bytes] = deque(maxlen=12)

    def observe_call(self, name: str, args: str) -> bool:
        canonical = json.dumps(json.loads(args), sort_keys=True)
        key = hashlib.blake2b((name + "\0" + canonical).encode(), digest_size=16).digest()
        self.keys.append(key)
        return self.keys.count(key) >= 5

    def observe_result(self, name: str, payload: str) -> bool:
        digest = hashlib.blake2b(payload.encode(), digest_size=16).digest()
        return digest in self.keys
