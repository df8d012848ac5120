"""Re-download the runaway set listed in sources.json (recordings that burned their budget).

    python benchmarks/runaways/fetch.py OUT_DIR [--mirror-root DIR] [--census]

For every source (a public repository pinned at a commit, a path pattern), the script gets the
repository with git (a blobless clone of ``https://github.com/<owner>/<name>.git``, or an existing
git directory ``<mirror-root>/<owner>+<name>/repo`` when ``--mirror-root`` is given), reads each
matching file at that commit, and keeps the file only if its own recorded end says the budget ran
out (``runaway_statuses`` in sources.json: SWE-agent's ``exit_cost``/``exit_context``,
mini-swe-agent's ``LimitsExceeded``, OpenHands' ``max_iterations``). The kept files must be
exactly the source's ``runaways`` list (path and blob id); any difference is an error (exit 1),
so the set on disk is the set the figures were measured on. ``--census`` also prints, per
source, how many matching files ended with each exit status.

The recordings are third-party data: they go to OUT_DIR, never into this repository.
"""
from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def exit_status(data: bytes) -> str | None:
    """A SWE-agent or mini-swe-agent trajectory's own recorded end: ``info.exit_status``."""
    try:
        doc: Any = json.loads(data)
    except ValueError:
        return "unreadable"
    info = doc.get("info") if isinstance(doc, dict) else None
    status = info.get("exit_status") if isinstance(info, dict) else None
    return status if isinstance(status, str) else None


def openhands_end(reason: Any) -> str:
    """An OpenHands stop reason: its controller raises "Agent reached maximum iteration" when
    the run used up ``max_iterations``."""
    text = str(reason or "")
    return "max_iterations" if "maximum iteration" in text else (text[:60] or "finished")


def candidates(reader: str, git_dir: Path, commit: str,
               pattern: str) -> Iterator[tuple[str, str, str, dict[str, bytes]]]:
    """(key, blob or tree id, recorded end, {output path: bytes}) of every recording the
    source's pattern selects. A file that is not in the snapshot has the end
    ``(blob not available)`` and nothing to write."""
    listed = files(git_dir, commit, "*")
    if reader == "openhands-v0-folder":
        # A V0 session store, <session>/events/<n>.json: written as it is, its events/ and
        # event_cache/ files (the folder the openhands reader reads as one session, from
        # events/; the pages are copies it does not read). agent_state.pkl and TASKS.md are
        # no part of the recording.
        folders: dict[str, dict[str, str]] = collections.defaultdict(dict)
        for path, blob in listed:
            head, _, name = path.rpartition("/events/")
            if head and fnmatch.fnmatch(head, pattern) and name.removesuffix(".json").isdigit():
                folders[head][path] = blob
        for path, blob in listed:
            head, _, _ = path.rpartition("/event_cache/")
            if head in folders:
                folders[head][path] = blob
        for folder, blobs in sorted(folders.items()):
            tree = git(git_dir, "rev-parse", f"{commit}:{folder}").decode().strip()
            try:
                written = {path: git(git_dir, "cat-file", "blob", blob)
                           for path, blob in sorted(blobs.items())}
            except subprocess.CalledProcessError:
                yield folder, tree, "(blob not available)", {}
                continue
            last = max((p for p in written if "/events/" in p),
                       key=lambda p: int(p.rpartition("/")[2].removesuffix(".json")))
            doc = json.loads(written[last])
            extras = doc.get("extras") if isinstance(doc, dict) else None
            end = openhands_end(extras.get("reason") if isinstance(extras, dict) else None)
            yield folder, tree, end, written
        return
    for path, blob in listed:
        if not fnmatch.fnmatch(path, pattern):
            continue
        try:
            data = git(git_dir, "cat-file", "blob", blob)
        except subprocess.CalledProcessError:
            yield path, blob, "(blob not available)", {}
            continue
        if reader != "openhands-records":
            yield path, blob, str(exit_status(data)), {path: data}
            continue
        # Evaluation output.jsonl: one record per run; each runaway record is written alone.
        for line in data.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "history" in record:
                instance = str(record.get("instance_id"))
                yield (f"{path}#{instance}", blob, openhands_end(record.get("error")),
                       {f"{path.removesuffix('.jsonl')}.{instance}.jsonl": line + b"\n"})


def git(git_dir: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], input=data,
                          capture_output=True, check=True).stdout


def repository(repo: str, commit: str, mirror_root: Path | None, scratch: Path) -> Path:
    if mirror_root is not None:
        return mirror_root / repo.replace("/", "+") / "repo"
    git_dir = scratch / repo.replace("/", "+")
    if not git_dir.exists():
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", "--quiet",
                        f"https://github.com/{repo}.git", str(git_dir)], check=True)
    # A pull request's head is not on a branch: fetch the pinned commit itself.
    subprocess.run(["git", "--git-dir", str(git_dir), "fetch", "--quiet", "origin", commit],
                   check=False)
    return git_dir


def files(git_dir: Path, commit: str, pattern: str) -> list[tuple[str, str]]:
    """(path, blob id) of every file at ``commit`` matching ``pattern``."""
    listing = git(git_dir, "ls-tree", "-r", commit).decode(errors="replace").splitlines()
    out = []
    for line in listing:
        meta, path = line.split("\t", 1)
        _mode, kind, blob = meta.split()
        if kind == "blob" and fnmatch.fnmatch(path, pattern):
            out.append((path, blob))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--mirror-root", type=Path)
    parser.add_argument("--census", action="store_true")
    parser.add_argument("--manifest", type=Path, default=HERE / "sources.json")
    parser.add_argument("--only", metavar="OWNER/NAME", action="append",
                        help="fetch only these repositories (repeatable)")
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest.read_text())
    wanted = manifest["runaway_statuses"]
    args.out_dir.mkdir(parents=True, exist_ok=True)
    mismatch = False
    with tempfile.TemporaryDirectory() as scratch:
        for source in manifest["sources"]:
            if args.only and source["repo"] not in args.only:
                continue
            repo, commit, reader = source["repo"], source["commit"], source["reader"]
            try:
                git_dir = repository(repo, commit, args.mirror_root, Path(scratch))
                found = list(candidates(reader, git_dir, commit, source["pattern"]))
            except subprocess.CalledProcessError as error:
                print(f"{repo}@{commit[:12]}: git failed ({error.cmd[:4]}): not fetched",
                      file=sys.stderr)
                mismatch = True
                continue
            census: collections.Counter[str] = collections.Counter()
            kept = []
            for key, blob, end, written in found:
                census[end] += 1
                if end in wanted[reader]:
                    kept.append({"path": key, "blob": blob, "exit_status": end})
                    for out_path, data in written.items():
                        target = args.out_dir / repo.replace("/", "+") / commit[:12] / out_path
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(data)
            # A runaway listed without its blob id (located, never downloaded) matches by path.
            blobs = {r["path"]: r["blob"] for r in source["runaways"]}
            got = sorted((k["path"], k["blob"] if blobs.get(k["path"]) else None) for k in kept)
            if got != sorted(blobs.items()):
                mismatch = True
                print(f"{repo}@{commit[:12]}: found {len(kept)} runaways, the manifest lists "
                      f"{len(blobs)}: {json.dumps(kept)}", file=sys.stderr)
            print(f"{repo}@{commit[:12]} {source['pattern']}: {sum(census.values())} recordings, "
                  f"{len(kept)} runaways")
            if args.census:
                for status, count in census.most_common():
                    print(f"    {count:5d}  {status}")
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
