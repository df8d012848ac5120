"""CI: a built wheel holds what a user needs and nothing else, with the expected tags.

    python .ci/check_wheel.py native dist/tripwire-*.whl
"""

from __future__ import annotations

import sys
import sysconfig
import zipfile

kind, path = sys.argv[1], sys.argv[2]
names = zipfile.ZipFile(path).namelist()
wheel = next(n for n in names if n.endswith(".dist-info/WHEEL"))
tags = [line.split(": ", 1)[1] for line in
        zipfile.ZipFile(path).read(wheel).decode().splitlines() if line.startswith("Tag: ")]
problems = []
if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
    problems.append("no LICENSE")
sources = [n for n in names if n.endswith((".pyx", ".pxd", ".pxi", ".cpp", ".hpp", ".h", ".c"))]
if sources:
    problems.append(f"sources in the wheel: {sources}")
outside = [n for n in names if not n.startswith(("tripwire/", "tripwire-"))]
if outside:
    problems.append(f"files outside the package: {outside}")
if "tripwire/web/console.html" not in names:  # the operator page, package data
    problems.append("no operator page (tripwire/web/console.html)")
native = [n for n in names if n.startswith("tripwire/_native") and n.endswith((".so", ".pyd"))]
if kind == "native":
    abi = sys.implementation.cache_tag.replace("cpython-", "cp")  # cp311
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    if len(native) != 1:
        problems.append(f"expected one native module, found {native}")
    if not any(n.endswith(".data/scripts/tripwire-hook") for n in names):
        problems.append("no native hook client (tripwire-hook): --install writes it")
    if tags != [f"{abi}-{abi}-{platform}"]:
        problems.append(f"tags {tags}, expected {abi}-{abi}-{platform}")
elif native or tags != ["py3-none-any"]:
    problems.append(f"a pure wheel must be py3-none-any without _native, not {tags} {native}")
if problems:
    sys.exit(f"check_wheel: {path}: " + "; ".join(problems))
print(f"check_wheel: {path}: {kind}, {tags[0]}, {len(names)} files, ok")
