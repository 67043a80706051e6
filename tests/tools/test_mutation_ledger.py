"""The mutation ledger: mutmut's results survive a fresh clone, and a module that has its own
results keeps them."""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import mutation_ledger  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _meta(codes, hashes, durations):
    return {"exit_code_by_key": codes, "hash_by_function_name": hashes, "type_check_error_by_key": {},
            "durations_by_key": durations, "estimated_durations_by_key": {}}


def _write(mutants: Path, source: str, data: dict) -> Path:
    meta = mutants / (source + ".meta")
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps(data))
    return meta


def test_saved_results_come_back_into_an_empty_mutants_directory_as_mutmut_reads_them(tmp_path):
    run, fresh, ledger = tmp_path / "run", tmp_path / "fresh", tmp_path / "ledger.json"
    informer = "corral.client.informer.xǁInformerǁrun"
    package = "corral.scheduler.x_helper"  # a package's mutants are named after the package
    _write(run, "src/corral/client/informer.py", _meta(
        {f"{informer}__mutmut_1": 1, f"{informer}__mutmut_2": 0, f"{informer}__mutmut_3": None,
         "corral.client.informer.x_never__mutmut_1": None},  # a function with nothing checked
        {"xǁInformerǁrun": "aaa", "x_never": "bbb"},
        {f"{informer}__mutmut_1": 0.5, f"{informer}__mutmut_2": 2.25}))
    _write(run, "src/corral/scheduler/__init__.py", _meta(
        {f"{package}__mutmut_1": 24, f"{package}__mutmut_2": 33}, {"x_helper": "ccc"}, {f"{package}__mutmut_1": 45.0}))
    functions = mutation_ledger.collect(run)
    assert functions == {informer: ["aaa", [1, 0, None], [0.5, 2.25, None]],
                         package: ["ccc", [24, 33], [45.0, None]]}
    mutation_ledger.write(functions, ledger)
    assert json.loads(ledger.read_text())["functions"] == functions

    assert mutation_ledger.restore(fresh, ledger, ROOT) == (2, 4)
    informer_meta = json.loads((fresh / "src/corral/client/informer.py.meta").read_text())
    assert informer_meta == _meta({f"{informer}__mutmut_1": 1, f"{informer}__mutmut_2": 0,
                                   f"{informer}__mutmut_3": None}, {"xǁInformerǁrun": "aaa"},
                                  {f"{informer}__mutmut_1": 0.5, f"{informer}__mutmut_2": 2.25})
    package_meta = json.loads((fresh / "src/corral/scheduler/__init__.py.meta").read_text())
    assert package_meta["exit_code_by_key"] == {f"{package}__mutmut_1": 24, f"{package}__mutmut_2": 33}
    assert package_meta["hash_by_function_name"] == {"x_helper": "ccc"}


def test_a_module_with_its_own_results_keeps_them(tmp_path):
    ledger, mutants = tmp_path / "ledger.json", tmp_path / "mutants"
    name = "corral.client.informer.x_f"
    mutation_ledger.write({name: ["old", [0], [1.0]]}, ledger)
    own = _write(mutants, "src/corral/client/informer.py", _meta({f"{name}__mutmut_1": 1}, {"x_f": "new"}, {}))
    before = own.read_text()
    assert mutation_ledger.restore(mutants, ledger, ROOT) == (0, 0)
    assert own.read_text() == before


def test_the_ledger_holds_one_line_per_function(tmp_path):
    ledger = tmp_path / "ledger.json"
    mutation_ledger.write({"m.x_a": ["h1", [1], [0.1]], "m.x_b": ["h2", [0, 1], [0.2, 0.3]]}, ledger)
    lines = ledger.read_text().splitlines()
    assert '"m.x_a": ["h1", [1], [0.1]],' in lines and '"m.x_b": ["h2", [0, 1], [0.2, 0.3]]' in lines


def test_mutmuts_test_statistics_come_back_into_a_mutants_directory_without_them(tmp_path):
    run, fresh, kept = tmp_path / "run", tmp_path / "fresh", tmp_path / "stats.json.xz"
    assert not mutation_ledger.save_stats(run, kept)  # nothing to save: nothing written
    assert not kept.exists()
    stats = {"tests_by_mangled_function_name": {"corral.client.informer.xǁInformerǁrun": ["tests/a.py::t"] * 50},
             "duration_by_test": {"tests/a.py::t": 0.25}, "git_commit": "abc"}
    (run / "mutmut-stats.json").parent.mkdir(parents=True)
    (run / "mutmut-stats.json").write_text(json.dumps(stats))
    assert mutation_ledger.save_stats(run, kept)
    assert kept.stat().st_size < (run / "mutmut-stats.json").stat().st_size  # compressed

    assert mutation_ledger.restore_stats(fresh, kept)
    assert json.loads((fresh / "mutmut-stats.json").read_text()) == stats
    (fresh / "mutmut-stats.json").write_text("{}")  # its own, newer: left alone
    assert not mutation_ledger.restore_stats(fresh, kept)
    assert (fresh / "mutmut-stats.json").read_text() == "{}"


def _stats(tests_by_function: dict[str, list[str]], commit: str | None = None) -> dict:
    tests = sorted({t for ts in tests_by_function.values() for t in ts})
    return {"tests_by_mangled_function_name": tests_by_function, "duration_by_test": dict.fromkeys(tests, 0.5),
            "stats_time": 1.0, "git_commit": commit}


def test_the_tests_of_a_changed_file_are_taken_again_and_the_survivors_they_reached_checked_again(tmp_path):
    root, mutants = tmp_path / "repo", tmp_path / "repo" / "mutants"
    (root / "tests" / "a").mkdir(parents=True)
    (root / "tests" / "a" / "test_one.py").write_text("def test_x(): pass\n")
    (root / "tests" / "test_two.py").write_text("def test_y(): pass\n")
    mutants.mkdir()
    queue, fit = "corral.scheduler.queue.xǁQueueǁpop", "corral.scheduler.fit.x_fits"
    stats = _stats({queue: ["tests/a/test_one.py::test_x", "tests/test_two.py::test_y"],
                    fit: ["tests/test_two.py::test_y"]})
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    (mutants / mutation_ledger.TEST_FILES).write_text(json.dumps(mutation_ledger.hashes_of_tests(root)))
    _write(mutants, "src/corral/scheduler/queue.py", _meta(
        {f"{queue}__mutmut_1": 0, f"{queue}__mutmut_2": 1, f"{queue}__mutmut_3": 33}, {}, {}))
    _write(mutants, "src/corral/scheduler/fit.py", _meta({f"{fit}__mutmut_1": 0, f"{fit}__mutmut_2": 5}, {}, {}))

    assert mutation_ledger.refresh_stats(mutants, root) == ([], 0, 0)  # nothing changed: nothing dropped
    assert json.loads((mutants / "mutmut-stats.json").read_text()) == stats

    (root / "tests" / "a" / "test_one.py").write_text("def test_x(): assert 1\n")
    assert mutation_ledger.refresh_stats(mutants, root) == (["tests/a/test_one.py"], 1, 3)
    refreshed = json.loads((mutants / "mutmut-stats.json").read_text())
    assert refreshed["duration_by_test"] == {"tests/test_two.py::test_y": 0.5}  # test_x is new to mutmut
    assert refreshed["tests_by_mangled_function_name"] == {queue: ["tests/test_two.py::test_y"],
                                                          fit: ["tests/test_two.py::test_y"]}
    codes = json.loads((mutants / "src/corral/scheduler/queue.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{queue}__mutmut_1": None, f"{queue}__mutmut_2": 1, f"{queue}__mutmut_3": None}
    codes = json.loads((mutants / "src/corral/scheduler/fit.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{fit}__mutmut_1": 0, f"{fit}__mutmut_2": None}  # test_x never reached fit: its survivor stands
    assert mutation_ledger.refresh_stats(mutants, root) == ([], 0, 0)  # today's files are the statistics' own now


def test_after_the_run_the_survivors_a_changed_or_new_test_reaches_now_are_checked_again_once(tmp_path):
    """A new test's reach is known only once mutmut took its statistics, during the run: recheck
    then forgets the survivors left standing at the restore that it reaches, for a second run."""
    root, mutants = tmp_path / "repo", tmp_path / "repo" / "mutants"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_old.py").write_text("def test_old(): pass\n")
    mutants.mkdir()
    etcd, sqlite = "corral.store.etcd.xǁEtcdStoreǁ_move_on", "corral.store.sqlite.x_open"
    stats = _stats({etcd: ["tests/test_old.py::test_old"], sqlite: ["tests/test_old.py::test_old"]})
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    (mutants / mutation_ledger.TEST_FILES).write_text(json.dumps(mutation_ledger.hashes_of_tests(root)))
    _write(mutants, "src/corral/store/etcd.py", _meta(
        {f"{etcd}__mutmut_1": 0, f"{etcd}__mutmut_2": 1, f"{etcd}__mutmut_4": 0}, {}, {}))
    _write(mutants, "src/corral/store/sqlite.py", _meta({f"{sqlite}__mutmut_1": 0}, {}, {}))
    assert mutation_ledger.recheck(mutants) == 0  # no restore noted anything

    (root / "tests" / "test_new.py").write_text("def test_new(): pass\n")  # its reach: unknown yet
    assert mutation_ledger.refresh_stats(mutants, root) == (["tests/test_new.py"], 0, 0)
    # The run takes test_new's statistics (it reaches _move_on) and finds a new survivor of open.
    stats["tests_by_mangled_function_name"][etcd].append("tests/test_new.py::test_new")
    stats["duration_by_test"]["tests/test_new.py::test_new"] = 0.1
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    _write(mutants, "src/corral/store/sqlite.py", _meta({f"{sqlite}__mutmut_1": 0, f"{sqlite}__mutmut_2": 0}, {}, {}))
    _write(mutants, "src/corral/store/etcd.py", _meta(  # _3 checked in this run, with test_new; _4 killed in it
        {f"{etcd}__mutmut_1": 0, f"{etcd}__mutmut_2": 1, f"{etcd}__mutmut_3": 0, f"{etcd}__mutmut_4": 1}, {}, {}))

    assert mutation_ledger.recheck(mutants) == 1
    codes = json.loads((mutants / "src/corral/store/etcd.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{etcd}__mutmut_1": None, f"{etcd}__mutmut_2": 1, f"{etcd}__mutmut_3": 0,
                     f"{etcd}__mutmut_4": 1}
    codes = json.loads((mutants / "src/corral/store/sqlite.py.meta").read_text())["exit_code_by_key"]
    assert codes == {f"{sqlite}__mutmut_1": 0, f"{sqlite}__mutmut_2": 0}  # test_new reaches no open
    assert mutation_ledger.recheck(mutants) == 0  # once: the second run's results stand


def test_a_restore_whose_run_never_got_to_its_recheck_is_not_forgotten_by_the_next(tmp_path):
    root, mutants = tmp_path / "repo", tmp_path / "repo" / "mutants"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a(): pass\n")
    mutants.mkdir()
    f = "m.x_f"
    (mutants / "mutmut-stats.json").write_text(json.dumps(_stats({f: ["tests/test_a.py::test_a"]})))
    (mutants / mutation_ledger.TEST_FILES).write_text(json.dumps(mutation_ledger.hashes_of_tests(root)))
    _write(mutants, "src/m.py", _meta({f"{f}__mutmut_1": 0}, {}, {}))
    (root / "tests" / "test_b.py").write_text("def test_b(): pass\n")
    mutation_ledger.refresh_stats(mutants, root)  # a run starts, and is stopped before recheck
    (root / "tests" / "test_c.py").write_text("def test_c(): pass\n")
    mutation_ledger.refresh_stats(mutants, root)
    stats = _stats({f: ["tests/test_a.py::test_a", "tests/test_b.py::test_b"]})
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    assert mutation_ledger.recheck(mutants) == 1  # test_b, noted by the first restore, reaches f


def test_the_ledger_recheck_command_exits_0_only_when_a_second_run_has_work(tmp_path, monkeypatch):
    """`make mutation` runs mutmut again when, and only when, recheck exits 0."""
    monkeypatch.setattr(mutation_ledger, "ROOT", tmp_path)
    (tmp_path / "mutants").mkdir()
    monkeypatch.setattr(sys, "argv", ["mutation_ledger.py", "recheck"])
    assert mutation_ledger.main() == 3
    (tmp_path / "mutants" / "mutmut-stats.json").write_text(json.dumps(_stats({"m.x_f": ["tests/test_a.py::t"]})))
    (tmp_path / "mutants" / mutation_ledger.RETAKEN).write_text(json.dumps({"files": ["tests/test_a.py"],
                                                                           "standing": ["m.x_f__mutmut_1"]}))
    _write(tmp_path / "mutants", "src/m.py", _meta({"m.x_f__mutmut_1": 0}, {}, {}))
    assert mutation_ledger.main() == 0
    make = (ROOT / "Makefile").read_text()
    assert "tools/mutation_ledger.py recheck; then" in make


def test_without_recorded_test_files_the_statistics_commit_is_compared_and_they_travel_with_the_statistics(tmp_path):
    root, mutants, kept = tmp_path / "repo", tmp_path / "repo" / "mutants", tmp_path / "stats.json.xz"
    (root / "tests").mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    (root / "tests" / "test_a.py").write_text("def test_a(): pass\n")
    (root / "tests" / "test_b.py").write_text("def test_b(): pass\n")
    subprocess.run(git[:-2] + ["init", "-q", str(root)], check=True)
    subprocess.run(git + ["add", "tests"], check=True)
    subprocess.run(git + ["commit", "-qm", "tests"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert mutation_ledger.hashes_of_tests_at(commit, root) == mutation_ledger.hashes_of_tests(root)  # git's hashes

    (root / "tests" / "test_b.py").write_text("def test_b(): assert 1\n")
    (root / "tests" / "test_c.py").write_text("def test_c(): pass\n")  # new since: its statistics may be older than it
    stats = _stats({"m.x_f": ["tests/test_a.py::test_a", "tests/test_b.py::test_b", "tests/test_c.py::test_c"]}, commit)
    mutants.mkdir()
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    assert mutation_ledger.refresh_stats(mutants, root)[:2] == (["tests/test_b.py", "tests/test_c.py"], 2)
    assert mutation_ledger.save_stats(mutants, kept)

    fresh = tmp_path / "fresh"
    assert mutation_ledger.restore_stats(fresh, kept)
    assert json.loads((fresh / mutation_ledger.TEST_FILES).read_text()) == mutation_ledger.hashes_of_tests(root)
    assert json.loads((fresh / "mutmut-stats.json").read_text())["duration_by_test"] == {"tests/test_a.py::test_a": 0.5}

    kept.write_bytes(lzma.compress(json.dumps(stats).encode()))  # kept by an earlier ledger: mutmut's file alone
    older = tmp_path / "older"
    assert mutation_ledger.restore_stats(older, kept)
    assert json.loads((older / "mutmut-stats.json").read_text()) == stats
    assert not (older / mutation_ledger.TEST_FILES).exists()

    stats["git_commit"] = "0" * 40  # a commit git does not know: every test is taken again
    (mutants / "mutmut-stats.json").write_text(json.dumps(stats))
    (mutants / mutation_ledger.TEST_FILES).unlink()
    assert mutation_ledger.refresh_stats(mutants, root)[:2] == (["tests/test_a.py", "tests/test_b.py", "tests/test_c.py"], 3)


def _mutated_repo(root: Path) -> None:
    """A repository whose module pkg.m mutmut mutated, as a run leaves mutants/: the mutated source
    beside the results."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "tests" / "test_m.py").write_text("def test_f(): pass\n")
    code = 'import logging\n\nlog = logging.getLogger(__name__)\n\n\ndef f(a):\n    log.info("a is %s", a)\n' \
           "    b = a * 2\n    return a + b\n"
    (root / "src" / "pkg" / "m.py").write_text(code)
    (root / "mutants" / "src" / "pkg").mkdir(parents=True)
    (root / "mutants" / "src" / "pkg" / "m.py").write_text(mutate_file_contents("src/pkg/m.py", code).code)


def test_a_survivor_reviewed_as_equivalent_is_not_checked_again_when_a_test_changes(tmp_path):
    """No test can kill an equivalent mutant; in the store, checking one again runs most of the suite.
    A changed test checks the other survivors again, and a fresh clone knows the reviewed ones from the
    ledger before mutmut writes the mutated sources they are read from."""
    root, ledger, f = tmp_path / "repo", tmp_path / "ledger.json", "pkg.m.x_f"
    _mutated_repo(root)
    mutants = root / "mutants"
    # _1: a log line's text (a rule); _9: `b = a * 3`, reviewed by hand; _10: `return a - b`, not reviewed.
    entries = {f"{f}__mutmut_9": {"reason": "a test case for the ledger", "mutant": "b = a * 3"}}
    codes = {f"{f}__mutmut_{n}": 1 for n in range(1, 11)} | {f"{f}__mutmut_{n}": 0 for n in (1, 9, 10)}
    _write(mutants, "src/pkg/m.py", _meta(codes, {"x_f": "abc"}, {}))
    assert mutation_ledger.reviewed_survivors(mutants, entries) == {f"{f}__mutmut_1", f"{f}__mutmut_9"}
    assert mutation_ledger.reviewed_survivors(mutants, {}) == {f"{f}__mutmut_1"}  # the rule alone
    mutation_ledger.write(mutation_ledger.collect(mutants), ledger,
                          reviewed=mutation_ledger.reviewed_survivors(mutants, entries))
    assert json.loads(ledger.read_text())["reviewed"] == [f"{f}__mutmut_1", f"{f}__mutmut_9"]

    # A fresh clone: the results and the statistics, no mutated source; then test_m.py changes.
    fresh = tmp_path / "clone" / "mutants"
    mutation_ledger.restore(fresh, ledger, root)
    (fresh / "mutmut-stats.json").write_text(json.dumps(_stats({"pkg.m.x_f": ["tests/test_m.py::test_f"]})))
    (fresh / mutation_ledger.TEST_FILES).write_text(json.dumps(mutation_ledger.hashes_of_tests(root)))
    assert mutation_ledger.reviewed_survivors(fresh, entries) == set()  # nothing to read the review from
    (root / "tests" / "test_m.py").write_text("def test_f(): assert True\n")
    kept = set(json.loads(ledger.read_text())["reviewed"])
    assert mutation_ledger.refresh_stats(fresh, root, keep=kept) == (["tests/test_m.py"], 1, 1)
    after = json.loads((fresh / "src/pkg/m.py.meta").read_text())["exit_code_by_key"]
    assert (after[f"{f}__mutmut_1"], after[f"{f}__mutmut_9"], after[f"{f}__mutmut_10"]) == (0, 0, None)

    # After a run, recheck reads the review from the mutated sources: only _10 is checked again.
    (mutants / "mutmut-stats.json").write_text(json.dumps(_stats({"pkg.m.x_f": ["tests/test_m.py::test_f"]})))
    (mutants / mutation_ledger.RETAKEN).write_text(json.dumps(
        {"files": ["tests/test_m.py"], "standing": [f"{f}__mutmut_{n}" for n in (1, 9, 10)]}))
    # By default the review is the repository's own list, which has no entry for pkg.m: _9 is checked again.
    assert mutation_ledger.recheck(mutants) == 2
    after = json.loads((mutants / "src/pkg/m.py.meta").read_text())["exit_code_by_key"]
    assert (after[f"{f}__mutmut_1"], after[f"{f}__mutmut_9"], after[f"{f}__mutmut_10"]) == (0, None, None)
