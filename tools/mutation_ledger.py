"""Keep mutmut's results in the repository, so that a mutation run carries on from a fresh clone.

A complete run checks ~26,000 mutants: hours of tests, more than one sitting. mutmut keeps each
mutant's result in mutants/*.py.meta beside the hash of the function it mutates, and on its next run
checks again only the mutants of functions whose hash changed; but mutants/ is a build directory, not
in git. This tool copies those results to tools/mutation_results.json (``save``) and back into a
mutants/ that does not have them (``restore``: a fresh clone, or after ``rm -rf mutants``), where
mutmut's own rule applies: a result stands until its function changes. `make mutation` restores
before it runs and saves after; ``FRESH=1`` there starts from nothing.

mutmut's test statistics (which tests reach which function, each test's time: mutants/mutmut-stats.json)
travel the same way, compressed, in tools/mutation_stats.json.xz: restored, they spare a fresh clone
mutmut's first pass over the whole suite with tracing (about an hour on the 2-core machine); mutmut
then collects statistics only for tests it has not seen.

mutmut never looks at a test again once it has its statistics, so a test whose body changed would keep
the functions its old body reached, and a mutant the new body kills would be run without it and
survive. ``restore`` therefore also compares each test file with the one the statistics were taken
from (mutants/corral-test-files.json: git blob hashes, kept with the statistics; without it, the files
of the statistics' commit): the tests of a file that changed are dropped from the statistics, so that
mutmut collects them again as new, and the survivors of the functions they reached, and the mutants no
test reached, are checked again; a survivor reviewed as equivalent stands (no test can kill it, and in
the store and the watch cache checking one again runs most of the suite), so the ledger lists those by
name (``reviewed``) for a fresh clone, where mutmut has not yet written the mutated sources the review
is read from. Which functions a changed or new test reaches now is known only once
mutmut has taken its statistics, at the start of the run: ``recheck``, after the run, forgets the
results of the survivors left standing at the restore whose functions those tests reach now, and exits 0
when it forgot any, for `make mutation` to run mutmut a second time on them.

    .venv/bin/python tools/mutation_ledger.py save|restore|recheck
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import lzma
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_report import (  # noqa: E402
    ROOT, _metas, equivalent_entries, forget, function_of, judge, load, module_of, source_of)

LEDGER = ROOT / "tools" / "mutation_results.json"
STATS = ROOT / "tools" / "mutation_stats.json.xz"
TEST_FILES = "corral-test-files.json"  # in mutants/, beside mutmut-stats.json
RETAKEN = "corral-retaken-tests.json"  # in mutants/: the files whose tests mutmut takes again, for recheck


def _number(name: str) -> int:
    return int(name.rsplit("__mutmut_", 1)[1])


def collect(mutants: Path) -> dict[str, list]:
    """function (mutmut's name of it, module included) → [hash, exit codes by mutant number (None:
    not checked), seconds in the tests by number], for each function with a checked mutant."""
    out: dict[str, list] = {}
    for meta, data in _metas(mutants):
        module = module_of(meta, mutants).removesuffix(".__init__")  # as mutmut names a package's mutants
        hashes, durations = data.get("hash_by_function_name") or {}, data.get("durations_by_key") or {}
        by_function: dict[str, dict[int, str]] = {}
        for name in data["exit_code_by_key"]:
            by_function.setdefault(function_of(name), {})[_number(name)] = name
        for function, names in sorted(by_function.items()):
            codes = [data["exit_code_by_key"].get(names.get(n, "")) for n in range(1, max(names) + 1)]
            short = function[len(module) + 1:]
            if short not in hashes or all(code is None for code in codes):
                continue
            seconds = [round(durations[names[n]], 2) if names.get(n) in durations else None
                       for n in range(1, max(names) + 1)]
            out[function] = [hashes[short], codes, seconds]
    return out


def write(functions: dict[str, list], path: Path = LEDGER, reviewed: set[str] = frozenset()) -> None:
    """One line per function (and per reviewed survivor), so that a commit of new results shows as the
    functions they changed."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    head = {"saved": datetime.date.today().isoformat(), "commit": commit,
            "about": "mutmut's results, kept by tools/mutation_ledger.py; a result stands until its function changes"}
    lines = [json.dumps(k) + ": " + json.dumps(v, ensure_ascii=False) for k, v in head.items()]
    body = [json.dumps(name, ensure_ascii=False) + ": " + json.dumps(value) for name, value in sorted(functions.items())]
    names = ",\n".join(json.dumps(name, ensure_ascii=False) for name in sorted(reviewed))
    text = ("{\n" + ",\n".join(lines) + ',\n"reviewed": [\n' + names + '\n],\n"functions": {\n'
            + ",\n".join(body) + "\n}}\n")
    path.write_text(text, encoding="utf-8")


def reviewed_survivors(mutants: Path, entries: dict[str, dict[str, str]] | None = None) -> set[str]:
    """The survivors in ``mutants`` that the report counts as equivalent (a rule, a hand-reviewed entry
    of ``entries``: by default tools/mutation_equivalents.toml). Reads the mutated sources a run wrote
    to ``mutants``: before the first run of a fresh clone there are none, and this is empty; the
    ledger keeps the names (``reviewed``) for that restore."""
    if entries is None:
        entries = equivalent_entries(ROOT)
    results = load(mutants)
    here = os.getcwd()
    os.chdir(mutants.parent)  # mutmut reads its mutated sources from ./mutants
    try:
        equivalents, _, _ = judge(results, entries)
    finally:
        os.chdir(here)
    return {name for statuses in results.values() for name, s in statuses.items()
            if s == "survived" and name in equivalents}


def restore(mutants: Path, path: Path = LEDGER, root: Path = ROOT) -> tuple[int, int]:
    """Write mutmut's result file of each module the ledger has results for and mutants/ has none;
    returns (files written, results restored). A module with its own result file is left alone: those
    results are at least as new as the ledger's."""
    ledger = json.loads(path.read_text(encoding="utf-8"))["functions"]
    by_file: dict[Path, dict[str, list]] = {}
    for function, value in ledger.items():
        module = function.split(".x", 1)[0]
        by_file.setdefault(source_of(module, root), {})[function] = value
    files = results = 0
    for source, functions in sorted(by_file.items()):
        meta = mutants / (source.as_posix() + ".meta")
        if meta.exists():
            continue
        codes, seconds, hashes = {}, {}, {}
        for function, (digest, exits, durations) in functions.items():
            hashes[function.rpartition(".")[2]] = digest
            for n, (code, duration) in enumerate(zip(exits, durations, strict=True), start=1):
                name = f"{function}__mutmut_{n}"
                codes[name] = code
                if duration is not None:
                    seconds[name] = duration
                results += code is not None
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"exit_code_by_key": codes, "hash_by_function_name": hashes,
                                    "type_check_error_by_key": {}, "durations_by_key": seconds,
                                    "estimated_durations_by_key": {}}))
        files += 1
    return files, results


def save_stats(mutants: Path, path: Path = STATS) -> bool:
    """mutmut's test statistics, compressed (14 MB of JSON become ~0.2 MB) with the hashes of the test
    files they were taken from; False if there are none."""
    stats = mutants / "mutmut-stats.json"
    if not stats.exists():
        return False
    files = mutants / TEST_FILES
    kept = {"stats": json.loads(stats.read_text()),
            "testFiles": json.loads(files.read_text()) if files.exists() else None}
    path.write_bytes(lzma.compress(json.dumps(kept).encode(), preset=9))
    return True


def restore_stats(mutants: Path, path: Path = STATS) -> bool:
    """The kept statistics into a mutants/ that has none of its own; True if written."""
    stats = mutants / "mutmut-stats.json"
    if stats.exists() or not path.exists():
        return False
    kept = json.loads(lzma.decompress(path.read_bytes()))
    if "stats" not in kept:  # kept before the test files' hashes were: mutmut's file as it was
        kept = {"stats": kept, "testFiles": None}
    stats.parent.mkdir(parents=True, exist_ok=True)
    stats.write_text(json.dumps(kept["stats"]))
    if kept["testFiles"] is not None:
        (mutants / TEST_FILES).write_text(json.dumps(kept["testFiles"], sort_keys=True))
    return True


def _blob(data: bytes) -> str:
    """git's hash of a file's contents, so that the files of a commit compare with those on disk unread."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def hashes_of_tests(root: Path = ROOT) -> dict[str, str]:
    """path under ``root`` → git blob hash of every Python file of tests/."""
    return {p.relative_to(root).as_posix(): _blob(p.read_bytes()) for p in sorted((root / "tests").rglob("*.py"))}


def hashes_of_tests_at(commit: str | None, root: Path = ROOT) -> dict[str, str] | None:
    """The same for a commit, from git; None if git does not know it."""
    if not commit:
        return None
    listed = subprocess.run(["git", "ls-tree", "-r", commit, "--", "tests/"], cwd=root, capture_output=True, text=True)
    if listed.returncode:
        return None
    out = {}
    for line in listed.stdout.splitlines():
        info, _, name = line.partition("\t")
        if name.endswith(".py"):
            out[name] = info.split()[2]
    return out


def refresh_stats(mutants: Path, root: Path = ROOT, keep: set[str] = frozenset()) -> tuple[list[str], int, int]:
    """Drop from mutmut's statistics the tests of every test file that is not the one they were taken
    from, forget the results of the survivors of the functions those tests reached (but those in
    ``keep``: reviewed as equivalent, which no test can kill) and of the mutants no test reached, and
    record today's files as the statistics' own. Returns (the changed files, tests dropped, results
    forgotten). A mutants/ without statistics is left alone: mutmut takes them all."""
    stats_path, files_path = mutants / "mutmut-stats.json", mutants / TEST_FILES
    if not stats_path.exists():
        return [], 0, 0
    stats = json.loads(stats_path.read_text())
    now = hashes_of_tests(root)
    then = json.loads(files_path.read_text()) if files_path.exists() else hashes_of_tests_at(stats.get("git_commit"), root)
    durations = stats["duration_by_test"]
    if then is None:  # nothing to compare with: every test is taken again
        changed = sorted({test.partition("::")[0] for test in durations})
    else:
        changed = sorted(f for f in then.keys() | now.keys() if then.get(f) != now.get(f))
    changed_files = set(changed)
    stale = {test for test in durations if test.partition("::")[0] in changed_files}
    reached = set()
    for function, tests in stats["tests_by_mangled_function_name"].items():
        if stale.intersection(tests):
            reached.add(function)
            tests[:] = [test for test in tests if test not in stale]
    for test in stale:
        del durations[test]
    forgotten = 0
    if stale:
        stats_path.write_text(json.dumps(stats))
        forgotten = forget(mutants, (0,), reached, keep=keep) + forget(mutants, (5, 33))
    if changed:
        remember_retaken(mutants, changed_files)
    files_path.write_text(json.dumps(now, sort_keys=True))
    return changed, len(stale), forgotten


def remember_retaken(mutants: Path, files: set[str]) -> None:
    """Note ``files`` (with those noted by a restore whose run never got to its recheck) and the
    survivors standing now, for :func:`recheck`."""
    path = mutants / RETAKEN
    before = json.loads(path.read_text())["files"] if path.exists() else []
    standing = sorted(name for _, data in _metas(mutants)
                      for name, code in (data.get("exit_code_by_key") or {}).items() if code == 0)
    path.write_text(json.dumps({"files": sorted(files.union(before)), "standing": standing}))


def recheck(mutants: Path, keep: set[str] | None = None) -> int:
    """After a run that took the statistics of the test files :func:`refresh_stats` noted: forget the
    results of the survivors then standing (checked without those tests' new reach) whose functions
    the tests of those files reach now, and the note. Returns how many were forgotten: a second run
    checks them with the new tests. Survivors reviewed as equivalent (``keep``; by default those
    :func:`reviewed_survivors` finds) stand."""
    path = mutants / RETAKEN
    if not path.exists():
        return 0
    note = json.loads(path.read_text())
    files, standing = set(note["files"]), set(note["standing"])
    stats = json.loads((mutants / "mutmut-stats.json").read_text())
    reached = {function for function, tests in stats["tests_by_mangled_function_name"].items()
               if any(test.partition("::")[0] in files for test in tests)}
    if keep is None:
        keep = reviewed_survivors(mutants)
    forgotten = forget(mutants, (0,), reached, standing, keep=keep)
    path.unlink()
    return forgotten


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("save", "restore", "recheck"))
    args = parser.parse_args()
    mutants = ROOT / "mutants"
    if args.action == "save":
        functions = collect(mutants)
        if not functions:
            print("no checked mutants in mutants/: nothing saved", file=sys.stderr)
            return 1
        write(functions, reviewed=reviewed_survivors(mutants))
        checked = sum(code is not None for _, codes, _ in functions.values() for code in codes)
        print(f"{checked} results of {len(functions)} functions saved to {LEDGER.relative_to(ROOT)}")
        if save_stats(mutants):
            print(f"mutmut's test statistics saved to {STATS.relative_to(ROOT)}")
        return 0
    if args.action == "recheck":
        forgotten = recheck(mutants)
        if not forgotten:
            print("no survivor for the changed tests to check again")
            return 3
        print(f"{forgotten} survivors that changed or new tests reach now are checked again")
        return 0
    if not LEDGER.exists():
        print(f"no {LEDGER.relative_to(ROOT)}: the run starts from nothing")
        return 0
    files, results = restore(mutants)
    print(f"{results} results restored to {files} modules from {LEDGER.relative_to(ROOT)}; "
          "mutmut checks again those whose function changed")
    if restore_stats(mutants):
        print(f"mutmut's test statistics restored from {STATS.relative_to(ROOT)}: it collects them only for new tests")
    # A survivor reviewed as equivalent is not checked again for a changed test: no test can kill it.
    kept = set(json.loads(LEDGER.read_text(encoding="utf-8")).get("reviewed", [])) | reviewed_survivors(mutants)
    changed, dropped, forgotten = refresh_stats(mutants, keep=kept)
    if dropped:
        print(f"{len(changed)} test files changed since their statistics were taken: mutmut takes those of their "
              f"{dropped} tests again, and checks again {forgotten} results they or a new test could change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
