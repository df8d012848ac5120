#!/usr/bin/env bash
# The engine fuzzer against the extension built with AddressSanitizer + UBSan, for a bounded time.
#   bash fuzz/run_sanitized.sh SECONDS
# Builds tripwire._native with -DTRIPWIRE_SANITIZE=ON into a temporary copy of the package,
# preloads the sanitizer runtimes into the (uninstrumented) interpreter and runs
# fuzz/fuzz_engines.py; a memory error or undefined behaviour aborts with a report (exit != 0).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
# the build tools a non-isolated CMake build needs (pip's isolated build had its own)
python -m pip install --quiet cython cmake ninja
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cmake -S . -B "$work/build" -G Ninja -DTRIPWIRE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPython_EXECUTABLE="$(command -v python)" > "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
mkdir -p "$work/pkg"
cp -r src/tripwire "$work/pkg/tripwire"
rm -f "$work/pkg/tripwire"/_native*.so
cp "$work"/build/_native*.so "$work/pkg/tripwire/"
runtime="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
# -S: no .pth files, so an editable install's import hook cannot hand back the normal build;
# the dependencies come from site-packages on PYTHONPATH instead
site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Python itself leaks by design at exit: leak checking would report the interpreter, not us
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LD_PRELOAD="$runtime" PYTHONPATH="$work/pkg:$site" TRIPWIRE_IMPLEMENTATION=native \
  python -S fuzz/fuzz_engines.py --seconds "$seconds" --seed "${FUZZ_SEED:-$RANDOM}" \
    --failure "$work/failure.txt" | tee "$work/summary.json" \
    || { cat "$work/failure.txt" 2>/dev/null | head -c 4000; exit 1; }
# the run must have exercised the sanitized build, not an installed one
grep -q "\"native\": \"$work/pkg/tripwire/" "$work/summary.json" \
  || { echo "fuzz: the sanitized extension was not the one loaded"; exit 1; }
