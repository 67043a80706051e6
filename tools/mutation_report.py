"""The mutation score per module, from a `mutmut run` (called by `make mutation`).

Reads mutmut's results (mutants/**/*.py.meta) and the reviewed list of equivalent mutants
(tools/mutation_equivalents.toml: mutant name → why no test can tell it from the original), applies
the few RULES below that recognise a harmless mutation from the changed line alone, and writes
mutants/report.md and mutants/report.json, printing the table. A mutant a test turned red counts
as killed, and so does one that made a test hang past its timeout (the hang is what a test caught).
The score is killed / (mutants checked − equivalent): survivors and mutants no test reaches
both count against it; mutants a partial run has not checked yet are counted apart ("unchecked").

    .venv/bin/python tools/mutation_report.py [--survivors]   # --survivors: list each one
    make mutation MUTMUT_ARGS="$(.venv/bin/python tools/mutation_report.py --names)"  # check them again
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import re
import signal
import sys
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from mutmut.mutation import diff_apply
from mutmut.stats import status_by_exit_code

ROOT = Path(__file__).resolve().parent.parent
# mutmut's statuses, in the report's terms: a type checker's catch is a kill like a test's.
CAUGHT = {"killed": "killed", "caught by type check": "killed", "timeout": "timeout"}
UNCHECKED = {"not checked", "skipped", "suspicious", "segfault", "check was interrupted by user"}


_LOG_CALL = re.compile(r"^\s*(self\._)?log\.(debug|info|warning|error|exception)\(")

_OUT = re.compile(r"out=(\w+)")
_ASSIGNED = re.compile(r"^\s*(\w+) = ")


def _result_kept(line: str) -> bool:
    """Whether a line's numpy result is returned, or assigned to the array every out= names."""
    if line.lstrip().startswith("return "):
        return True
    target = _ASSIGNED.match(line)
    outs = {m.group(1) for m in _OUT.finditer(line)}
    return target is not None and outs == {target.group(1)}


_SQL = re.compile(r"\b(SELECT|INSERT|DELETE|UPDATE|WHERE|FROM|INTO|ORDER BY)\b", re.IGNORECASE)
_SQL_LITERAL = re.compile(r"'[^']*'")


def _sql_case_only(old: str, new: str) -> bool:
    """Whether ``new`` is ``old`` with SQL in another case: SQLite reads keywords and names in any
    case, but not the text of a quoted literal, so those must be unchanged. SQL is a line that
    executes one, or that holds two of its keywords (a statement split over lines)."""
    is_sql = ".execute(" in old or len({k.upper() for k in _SQL.findall(old)}) >= 2
    return (old != new and old.lower() == new.lower() and is_sql
            and _SQL_LITERAL.findall(old) == _SQL_LITERAL.findall(new))


_CLIENT_RESOURCE = re.compile(r'self\.client\.\w+\("([a-z]+)"')


def _client_resource_case(old: str, new: str) -> bool:
    """Whether ``new`` only upper-cases the resource name a client call starts with: the client looks
    resources up as kubectl does (``corral.api.resources.lookup``: ``pods``, ``PODS`` and ``Pod`` alike)."""
    m = _CLIENT_RESOURCE.search(old)
    return m is not None and new == old[: m.start(1)] + m.group(1).upper() + old[m.end(1):]


def _raw_of_discarded_answer(old: str, new: str) -> bool:
    """Whether ``new`` only drops ``raw=True`` (or makes it None or False) from a client call whose
    answer the line throws away: raw only spares decoding that answer."""
    stripped = old.strip()
    return (stripped.startswith("await self.client.") and "raw=True" in old
            and new in (old.replace("raw=True", "raw=None"), old.replace("raw=True", "raw=False"),
                        old.replace(", raw=True", ", ")))


# A surviving mutant that changes one line in one of these ways is not counted: (reason, test on the
# original line and the mutant's line).
RULES: list[tuple[str, Callable[[str, str], bool]]] = [
    ("a log line's text or arguments: for operators, not a contract (PIT skips logging calls too)",
     lambda old, new: bool(_LOG_CALL.match(old)) and bool(_LOG_CALL.match(new))),
    ("numpy's default dtype is float64",
     lambda old, new: ("dtype=np.float64" in old
                       and new in (old.replace("dtype=np.float64", "dtype=None"), old.replace(", dtype=np.float64", ", ")))
     or (".astype(np.float64)" in old and new == old.replace(".astype(np.float64)", ".astype(None)"))),
    ("out= only chooses which array numpy writes into; the line returns the result, or assigns it to that array",
     lambda old, new: _result_kept(old) and any(new == old[: m.start()] + replacement + old[m.end():]
                                                for m in _OUT.finditer(old) for replacement in ("out=None", ""))),
    ("np.errstate only silences numpy's floating-point warnings",
     lambda old, new: old.lstrip().startswith("with np.errstate(") and new.lstrip().startswith("with np.errstate(")),
    ('float() reads "nan" in any case',
     lambda old, new: 'float("nan")' in old and new == old.replace('float("nan")', 'float("NAN")')),
    ("SQLite reads SQL keywords and names in any case", _sql_case_only),
    ("the client looks resource names up in any case, as kubectl does", _client_resource_case),
    ("raw=True only spares decoding an answer the line throws away", _raw_of_discarded_answer),
]


def source_of(module: str, root: Path = Path(".")) -> Path:
    """The source file of ``module`` (relative to ``root``): ``a/b.py``, or ``a/b/__init__.py`` for
    a package, as mutmut names a package's mutants after the package."""
    path = Path("src") / (module.replace(".", "/") + ".py")
    package = Path("src") / module.replace(".", "/") / "__init__.py"
    return package if not (root / path).exists() and (root / package).exists() else path


def changed_line(name: str) -> tuple[str, str] | None:
    """(original line, mutated line) of a mutant that changes one line; None otherwise. Reads
    mutmut's mutated sources under ./mutants."""
    path = source_of(name.split(".x", 1)[0])
    try:
        diff = diff_apply.get_diff_for_mutant(name, path=path)
    except (FileNotFoundError, ValueError):
        return None
    return one_line_change(diff.splitlines())


def one_line_change(diff_lines: list[str]) -> tuple[str, str] | None:
    """(original, mutated) of a unified diff that ends in one mutated line: a line changed, or a
    statement over several lines that mutmut rewrote as one (an argument removed from a call spread
    over lines; the original lines are joined with a space). None for anything else."""
    old = [line[1:] for line in diff_lines if line.startswith("-") and not line.startswith("---")]
    new = [line[1:] for line in diff_lines if line.startswith("+") and not line.startswith("+++")]
    if len(new) != 1 or not old:
        return None
    return old[0] if len(old) == 1 else " ".join(line.strip() for line in old), new[0]


def continues_log_call(name: str) -> bool:
    """Whether the one line mutant ``name`` changes holds arguments of a logging call begun on a
    line before it (the diff's context: up to three lines)."""
    try:
        lines = diff_apply.get_diff_for_mutant(name, path=source_of(name.split(".x", 1)[0])).splitlines()
    except (FileNotFoundError, ValueError):
        return False
    return log_call_before(lines)


def log_call_before(diff_lines: list[str]) -> bool:
    """Whether the first removed line of a unified diff lies inside a logging call's parentheses
    opened on a context line before it."""
    first = next((i for i, line in enumerate(diff_lines) if line.startswith("-") and not line.startswith("---")), 0)
    depth = 0
    for line in reversed(diff_lines[:first]):
        if not line.startswith(" "):
            return False
        depth += line.count("(") - line.count(")")
        if _LOG_CALL.match(line[1:]):
            return depth > 0
    return False


def rule_for(old: str, new: str) -> str | None:
    """The reason a rule gives for a mutant that turns line ``old`` into ``new``, or None."""
    return next((reason for reason, applies in RULES if applies(old, new)), None)


def function_of(name: str) -> str:
    """The mutated function's part of a mutant name: mutmut numbers mutants within it."""
    return name.rsplit("__mutmut_", 1)[0]


def reviewed(entries: dict[str, dict[str, str]], name: str, changed: tuple[str, str] | None) -> str | None:
    """The reason a hand-reviewed entry gives for mutant ``name`` (whose ``changed`` line is as
    :func:`changed_line` reads it), or None. An entry names a mutant and the line it mutates to;
    mutmut numbers mutants within a function, so once an earlier line of the function changes the
    same mutation has another number: an entry of the same function with the same mutated line
    still applies (its reason is about that line). An entry whose line the function no longer
    mutates to applies to nothing."""
    if changed is None:
        return None
    line = changed[1].strip()
    entry = entries.get(name)
    if entry is not None and entry["mutant"] == line:
        return entry["reason"]
    function = function_of(name)
    return next((e["reason"] for n, e in entries.items() if e["mutant"] == line and function_of(n) == function),
                None)


def equivalent_entries(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """The hand-reviewed entries of ``root``'s tools/mutation_equivalents.toml (none without the file)."""
    path = root / "tools" / "mutation_equivalents.toml"
    return tomllib.loads(path.read_text()).get("equivalent", {}) if path.exists() else {}


def judge(results: dict[str, dict[str, str]], entries: dict[str, dict[str, str]]
          ) -> tuple[dict[str, str], dict[str, str], set[tuple[str, str]]]:
    """The survivors and mutants no test reaches (of ``results``, as :func:`load` reads them) that are
    equivalent: (reason by name, reason by name of those a rule recognised, (function, mutated line) of
    each hand-reviewed entry that applied). Reads mutmut's mutated sources under ./mutants: without
    them, none is recognised."""
    read = diff_apply.read_mutants_module
    diff_apply.read_mutants_module = functools.lru_cache(maxsize=None)(read)  # each module read once
    equivalents: dict[str, str] = {}
    by_rule: dict[str, str] = {}
    applied: set[tuple[str, str]] = set()
    try:
        for statuses in results.values():
            for name, s in statuses.items():
                if s not in ("survived", "no tests"):
                    continue
                changed = changed_line(name)
                if (reason := reviewed(entries, name, changed)) is not None:
                    equivalents[name] = reason
                    applied.add((function_of(name), changed[1].strip()))
                    continue
                if changed is not None and (reason := rule_for(*changed)) is not None:
                    equivalents[name] = by_rule[name] = reason
                elif changed is not None and continues_log_call(name):
                    equivalents[name] = by_rule[name] = RULES[0][0]
    finally:
        diff_apply.read_mutants_module = read
    return equivalents, by_rule, applied


def status(exit_code: int | None) -> str:
    """killed, timeout, survived, no tests, or not checked."""
    if exit_code == -signal.SIGABRT:
        # The test process aborted (gRPC's C core does, given a client key without its certificate):
        # a red test, as a run error is a kill for PIT. mutmut calls it suspicious; the clean run passed.
        return "killed"
    mutmut_status = status_by_exit_code[exit_code]
    if mutmut_status in CAUGHT:
        return CAUGHT[mutmut_status]
    return "not checked" if mutmut_status in UNCHECKED else mutmut_status


def _metas(mutants: Path):
    """(path, contents) of each of mutmut's result files, in path order."""
    for meta in sorted(mutants.glob("src/**/*.py.meta")):
        yield meta, json.loads(meta.read_text())


def module_of(meta: Path, mutants: Path) -> str:
    """The module whose results ``meta`` holds, as mutmut's report names it (``a.b.__init__`` for
    a package)."""
    return meta.relative_to(mutants / "src").as_posix()[: -len(".py.meta")].replace("/", ".")


def load(mutants: Path) -> dict[str, dict[str, str]]:
    """module → mutant name → status."""
    out: dict[str, dict[str, str]] = {}
    for meta, data in _metas(mutants):
        module = module_of(meta, mutants)
        codes = data["exit_code_by_key"]
        if codes:
            out[module] = {name: status(code) for name, code in codes.items()}
    return out


def test_time(mutants: Path) -> tuple[float, int]:
    """(seconds, mutants): the time mutmut spent in the tests of each mutant it checked, summed (the
    run's cost whatever its interruptions; on N cores the wall clock is roughly this over N, plus
    mutmut's own start of each mutant)."""
    seconds, count = 0.0, 0
    for _, data in _metas(mutants):
        for duration in (data.get("durations_by_key") or {}).values():
            if duration:
                seconds, count = seconds + duration, count + 1
    return seconds, count


def forget(mutants: Path, exit_codes: tuple[int, ...] = (0, 5, 33), functions: set[str] | None = None,
           names: set[str] | None = None, keep: set[str] = frozenset()) -> int:
    """Forget the results of surviving mutants (0) and of those no test reached (5, 33) — of the
    ``functions`` named (mutmut's names), or of all; of the mutants in ``names`` only, when given;
    never of those in ``keep`` — so
    that the next `mutmut run` checks them again with the current tests (mutmut keeps a result until the
    function it mutates changes, whatever the tests do). Returns how many were forgotten. Run it while
    mutmut is stopped: mutmut rewrites these files from what it holds."""
    count = 0
    for meta, data in _metas(mutants):
        codes = data.get("exit_code_by_key") or {}
        again = [name for name, code in codes.items()
                 if code in exit_codes and (functions is None or function_of(name) in functions)
                 and (names is None or name in names) and name not in keep]
        if again:
            for name in again:
                codes[name] = None
            meta.write_text(json.dumps(data))
            count += len(again)
    return count


def area_of(module: str, source_paths: list[str]) -> str:
    """The configured source path (``[tool.mutmut] source_paths``: a package or a file) holding ``module``."""
    path = "src/" + module.replace(".", "/")
    for area in source_paths:
        if area.endswith("/") and path.startswith(area) or path + ".py" == area:
            return area
    return path + ".py"


def score_row(label: str, counts: Counter) -> tuple:
    """(label, mutants, killed, survived, no tests, equivalent, unchecked, score or None) of a status count."""
    unchecked = counts["not checked"]
    counted = counts["all"] - counts["equivalent"] - unchecked
    caught = counts["killed"] + counts["timeout"]
    return (label, counts["all"], caught, counts["survived"], counts["no tests"], counts["equivalent"], unchecked,
            100.0 * caught / counted if counted else None)


def row_line(row: tuple, bold: bool = False) -> str:
    m, n, k, s, nt, e, u, p = row
    score = "—" if p is None else f"**{p:.1f}%**" if bold else f"{p:.1f}%"
    return f"| {m} | {n} | {k} | {s} | {nt} | {e} | {u} | {score} |"


def table(first: str, rows: list[tuple]) -> list[str]:
    return [f"| {first} | mutants | killed | survived | no test reaches | equivalent | unchecked | score |",
            "|---|---:|---:|---:|---:|---:|---:|---:|", *(row_line(row) for row in rows)]


def rows_json(key: str, rows: list[tuple]) -> list[dict]:
    return [{key: m, "mutants": n, "killed": k, "survived": s, "noTests": nt, "equivalent": e, "unchecked": u,
             "score": None if p is None else round(p, 1)} for m, n, k, s, nt, e, u, p in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--survivors", action="store_true", help="list every surviving mutant")
    parser.add_argument("--names", action="store_true",
                        help="print only the survivors' names (to check them again: make mutation MUTMUT_ARGS=...)")
    parser.add_argument("--forget", action="store_true",
                        help="forget the survivors' results (and those no test reached), so that the next "
                             "`make mutation` checks them again with the current tests; mutmut must be stopped")
    args = parser.parse_args()
    mutants = ROOT / "mutants"
    if args.forget:
        print(f"{forget(mutants)} results forgotten: the next `make mutation` checks them again")
        return 0
    results = load(mutants)
    if not results:
        print("no mutmut results in mutants/: run `make mutation` first", file=sys.stderr)
        return 1
    entries = equivalent_entries()
    os.chdir(ROOT)  # mutmut reads its mutated sources from ./mutants
    equivalents, by_rule, applied = judge(results, entries)
    # Entries of checked modules that applied to no surviving mutant: a test kills it now, or its
    # function no longer mutates to that line.
    checked = {name for statuses in results.values() for name, s in statuses.items() if s != "not checked"}
    stale = [n for n, e in entries.items() if n in checked and (function_of(n), e["mutant"]) not in applied]
    source_paths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]["source_paths"]
    rows, survivors, total, by_area = [], [], Counter(), {}
    for module, statuses in results.items():
        counts = Counter("equivalent" if name in equivalents else s for name, s in statuses.items())
        counts["all"] = len(statuses)
        rows.append(score_row(module, counts))
        total.update(counts)
        by_area.setdefault(area_of(module, source_paths), Counter()).update(counts)
        survivors += [n for n, s in statuses.items() if s in ("survived", "no tests") and n not in equivalents]
    total_row = score_row("**all**", total)
    *_, unchecked, score = total_row
    score = score or 0.0
    day = datetime.date.today().isoformat()
    head = f"# Mutation score {score:.1f}% ({day})" + (f", {unchecked} mutants not checked yet" if unchecked else "")
    areas = [score_row(area, by_area[area]) for area in source_paths if area in by_area]
    seconds, timed = test_time(mutants)
    spent = f"Time in the tests: {seconds / 3600:.1f} h over {timed} mutants (the sum of each mutant's test run)."
    lines = [head, "", spent, "", *table("source path", areas), "", *table("module", rows),
             row_line(total_row, bold=True)]
    report = "\n".join(lines) + "\n"
    (mutants / "report.md").write_text(report + "\n## Survivors\n\n" + "".join(f"- {n}\n" for n in survivors))
    (mutants / "report.json").write_text(json.dumps({
        "date": day, "score": round(score, 1), "testHours": round(seconds / 3600, 2),
        "sourcePaths": rows_json("sourcePath", areas),
        "modules": rows_json("module", rows), "survivors": survivors}, indent=1))
    if args.names:
        print("\n".join(survivors))
        return 0
    print(report)
    for reason, count in Counter(by_rule.values()).most_common():
        print(f"equivalent by rule ({count}): {reason}")
    for name in stale:
        print(f"entry in tools/mutation_equivalents.toml that applies to no survivor (killed now, or its "
              f"function changed): {name}")
    if args.survivors:
        print("\n".join(survivors))
    print(f"{len(survivors)} survivors; `.venv/bin/mutmut show NAME` shows one; report in mutants/report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
