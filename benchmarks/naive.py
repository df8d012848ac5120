"""The naive baseline: what a first Python watchdog would do per call.

Parse the args, re-serialize them with sorted keys, hash with BLAKE2b and keep the last 12 keys
in a deque, checking the newest for a repeat. A result's payload is compared by its answer
(SPEC §12.1), as tripwire's is: the volatile spans replaced with a regular expression per class,
then hashed. It does less than tripwire (no path cleaning, no exact numbers, one detector, no
JSON keys, looser word boundaries), so the ratio is conservative.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import deque

#: SPEC §12.1's classes as a first implementation would write them: a regular expression each,
#: applied in turn (a prefix kept as group 1).
VOLATILE = [(re.compile(pattern), replacement) for pattern, replacement in (
    (rb"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:[Zz]|[+-]\d{2}:?\d{2})?",
     b"\x1a"),
    (rb"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", b"\x1a"),
    (rb"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b", b"\x1a"),
    (rb"\b0[xX][0-9a-fA-F]{4,}\b", b"\x1a"),
    (rb"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
     b"\x1a"),
    (rb"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{12,}\b", b"\x1a"),
    (rb"[-+]?\b\d+(?:\.\d+)? ?(?:ns|us|\xc2\xb5s|ms|s|sec|secs|seconds?|min|h)\b", b"\x1a"),
    (rb"((?:pid|PID|process)[=: ] *)\d+", b"\\1\x1a"),
    (rb"((?:bash: line |sh: |zsh:))\d+(?=:)", b"\\1\x1a"),
    (rb"((?:/tmp/|/var/tmp/))[^/\\\s\"']+", b"\\1\x1a"),
)]


def answer(payload: bytes) -> bytes:
    for pattern, replacement in VOLATILE:
        payload = pattern.sub(replacement, payload)
    return payload


class NaiveWatchdog:
    def __init__(self) -> None:
        self.keys: deque[bytes] = deque(maxlen=12)

    def observe_call(self, name: str, args: str) -> bool:
        canonical = json.dumps(json.loads(args), sort_keys=True)
        key = hashlib.blake2b((name + "\0" + canonical).encode(), digest_size=16).digest()
        self.keys.append(key)
        return self.keys.count(key) >= 5

    def observe_result(self, name: str, payload: str) -> bool:
        digest = hashlib.blake2b(answer(payload.encode()), digest_size=16).digest()
        return digest in self.keys
