"""The mutation report's judgement of equivalent mutants: the rules recognise only the harmless
changes they name, and a reviewed entry stops counting once its name stands for another mutation."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import mutation_report  # noqa: E402


@pytest.mark.parametrize("old, new, reason", [
    ('        log.info("bound %s", key)', '        log.info("XXbound %sXX", key)', "a log line"),
    ("    x = np.zeros(n, dtype=np.float64)", "    x = np.zeros(n, dtype=None)", "numpy's default dtype"),
    ("    x = np.zeros(n, dtype=np.float64)", "    x = np.zeros(n, )", "numpy's default dtype"),
    ("    return a[rows].astype(np.float64)", "    return a[rows].astype(None)", "numpy's default dtype"),
    ('    v = float("nan")', '    v = float("NAN")', 'float() reads "nan"'),
    ("        return np.floor(s, out=s)", "        return np.floor(s, out=None)", "out= only chooses"),
    ("        return np.floor(s, out=s)", "        return np.floor(s, )", "out= only chooses"),
    ("    t = np.floor(t + 0.5, out=t) if r else np.floor(t, out=t)",
     "    t = np.floor(t + 0.5, out=t) if r else np.floor(t, )", "out= only chooses"),
    ('    with np.errstate(divide="ignore", invalid="ignore"):', '    with np.errstate(invalid="ignore"):',
     "np.errstate only silences"),
    ('        conn.execute("BEGIN")', '        conn.execute("begin")', "SQLite reads SQL"),
    ('        "(SELECT prev_rev FROM log WHERE rev <= ?1 AND prev_rev > 0))",',
     '        "(SELECT PREV_REV FROM LOG WHERE REV <= ?1 AND PREV_REV > 0))",', "SQLite reads SQL"),
    ("""    conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('compact_rev', ?)", (revision,))""",
     """    conn.execute("insert or replace into meta (name, value) values ('compact_rev', ?)", (revision,))""",
     "SQLite reads SQL"),
    ('    await self.client.patch("events", name, patch, namespace, raw=True)',
     '    await self.client.patch("EVENTS", name, patch, namespace, raw=True)', "the client looks resource names"),
    ('        await self.client.delete("pods", pod.name, pod.namespace, raw=True)',
     '        await self.client.delete("pods", pod.name, pod.namespace, raw=None)', "raw=True only spares"),
    ('        await self.client.delete("pods", pod.name, pod.namespace, raw=True)',
     '        await self.client.delete("pods", pod.name, pod.namespace, raw=False)', "raw=True only spares"),
    ('        await self.client.delete("pods", pod.name, pod.namespace, raw=True)',
     '        await self.client.delete("pods", pod.name, pod.namespace, )', "raw=True only spares"),
])
def test_the_rules_recognise_the_harmless_mutations_they_name(old, new, reason):
    assert mutation_report.rule_for(old, new).startswith(reason)


@pytest.mark.parametrize("old, new", [
    pytest.param("    x = np.zeros(n, dtype=np.int64)", "    x = np.zeros(n, dtype=None)", id="int64 is not the default"),
    pytest.param("    y = np.floor(s, out=s)", "    y = np.floor(s, out=None)",
                 id="out= naming an array the line does not assign: s is no longer floored"),
    pytest.param("    np.floor(s, out=s)", "    np.floor(s, )", id="a result thrown away: only out= kept it"),
    pytest.param('    log.info("bound %s", key)', '    print("bound %s", key)', id="no longer a log call"),
    pytest.param('    v = float("nan")', '    v = float("XXnanXX")', id="not a spelling of nan"),
    pytest.param("    x = np.zeros(n, dtype=np.float64)", "    x = np.ones(n, dtype=np.float64)", id="another value"),
    pytest.param("""    row = conn.execute("SELECT value FROM meta WHERE name = 'compact_rev'").fetchone()""",
                 """    row = conn.execute("SELECT VALUE FROM META WHERE NAME = 'COMPACT_REV'").fetchone()""",
                 id="a quoted SQL literal is text: its case matters"),
    pytest.param('    label = "Select a node"', '    label = "SELECT A NODE"', id="prose, not a statement"),
    pytest.param('    conn.execute("BEGIN")', '    conn.execute("XXBEGINXX")', id="not the same statement"),
    pytest.param('    await self.client.patch("events", name, patch, namespace, raw=True)',
                 '    await self.client.patch("XXeventsXX", name, patch, namespace, raw=True)', id="another resource"),
    pytest.param('    await self.client.patch("events", name, patch, namespace, raw=True)',
                 '    await self.client.patch("events", NAME, patch, namespace, raw=True)', id="not the resource"),
    pytest.param('    obj = await self.client.patch("pods", name, patch, raw=True)',
                 '    obj = await self.client.patch("pods", name, patch, raw=None)', id="the answer is used: raw shapes it"),
    pytest.param('    await self.client.patch("pods", name, patch, raw=True)',
                 '    await self.client.patch("pods", None, patch, raw=True)', id="raw kept, another change"),
])
def test_the_rules_leave_every_other_mutation_counted(old, new):
    assert mutation_report.rule_for(old, new) is None


def test_a_reviewed_entry_counts_for_the_mutation_reviewed_whatever_its_number_in_its_function():
    entries = {"m.x_f__mutmut_3": {"reason": "a memo", "mutant": "hit = None"}}
    reviewed_line = ("    hit = self.memo.get(key)", "    hit = None")
    assert mutation_report.reviewed(entries, "m.x_f__mutmut_3", reviewed_line) == "a memo"
    # an earlier line of f changed: the same mutation is number 4 now
    assert mutation_report.reviewed(entries, "m.x_f__mutmut_4", reviewed_line) == "a memo"
    assert mutation_report.reviewed(entries, "m.x_g__mutmut_3", reviewed_line) is None  # another function
    another = ("    n = self.size", "    n = None")  # the name is another mutant now: not reviewed
    assert mutation_report.reviewed(entries, "m.x_f__mutmut_3", another) is None
    assert mutation_report.reviewed(entries, "m.x_f__mutmut_3", None) is None  # no longer one line


def test_each_module_is_counted_under_the_configured_source_path_that_holds_it():
    paths = ["src/corral/scheduler/", "src/corral/server/rest/verbs.py", "src/corral/agent/machine.py"]
    assert mutation_report.area_of("corral.scheduler.plugins.node_affinity", paths) == "src/corral/scheduler/"
    assert mutation_report.area_of("corral.server.rest.verbs", paths) == "src/corral/server/rest/verbs.py"
    assert mutation_report.area_of("corral.agent.machine", paths) == "src/corral/agent/machine.py"
    assert mutation_report.area_of("corral.agent.machinery", paths) == "src/corral/agent/machinery.py"


def test_a_score_counts_timeouts_as_caught_and_leaves_equivalent_and_unchecked_mutants_out():
    counts = mutation_report.Counter({"all": 20, "killed": 12, "timeout": 2, "survived": 3, "no tests": 1,
                                      "equivalent": 1, "not checked": 1})
    assert mutation_report.score_row("x", counts) == ("x", 20, 14, 3, 1, 1, 1, 100.0 * 14 / 18)
    assert mutation_report.score_row("none", mutation_report.Counter({"all": 2, "not checked": 2}))[-1] is None


def test_a_test_run_that_aborts_is_a_kill_and_one_that_crashed_otherwise_is_not_checked():
    assert mutation_report.status(-6) == "killed"  # SIGABRT: the mutant made the process abort
    assert mutation_report.status(1) == "killed" and mutation_report.status(-24) == "timeout"
    assert mutation_report.status(-11) == "not checked"  # a segfault may be the machine's
    assert mutation_report.status(0) == "survived" and mutation_report.status(None) == "not checked"


def test_a_packages_mutants_are_read_from_its_init_and_a_modules_from_its_file():
    root = Path(__file__).resolve().parents[2]
    assert mutation_report.source_of("corral.scheduler.plugins.default_preemption", root) == Path(
        "src/corral/scheduler/plugins/default_preemption/__init__.py")
    assert mutation_report.source_of("corral.scheduler.preemptor", root) == Path("src/corral/scheduler/preemptor.py")


def test_the_reviewed_list_reads_and_every_entry_gives_its_reason_and_mutated_line():
    import tomllib

    root = Path(__file__).resolve().parents[2]
    entries = tomllib.loads((root / "tools" / "mutation_equivalents.toml").read_text())["equivalent"]
    assert entries and all(set(e) == {"reason", "mutant"} and e["reason"] and e["mutant"] for e in entries.values())
    assert all(name.startswith("corral.") and "__mutmut_" in name for name in entries)


def test_a_mutated_argument_of_a_logging_call_spread_over_lines_is_recognised():
    diff = ["--- a.py", "+++ a.py", "@@ -1,4 +1,4 @@",
            '             log.warning("deleted %s of %s from %s", meta["name"],',
            '-                        owner.get("kind"), node)',
            '+                        None, node)',
            "             continue"]
    assert mutation_report.log_call_before(diff)
    closed = ["--- a.py", "+++ a.py", "@@ -1,4 +1,4 @@", '         log.info("done %s", name)',
              "-        total = count + 1", "+        total = count - 1"]
    assert not mutation_report.log_call_before(closed)  # the call ended before the changed line
    assert mutation_report.rule_for('        self._log.debug("pod %s skipped", name)',
                                    '        self._log.debug(None, name)') is not None
    assert mutation_report.rule_for('        log.info("x %s", n)', '        total = None') is None


def test_the_time_in_the_tests_sums_each_checked_mutants_run(tmp_path):
    import json

    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "a.py.meta").write_text(json.dumps({"durations_by_key": {"m1": 1.5, "m2": None}}))
    (tmp_path / "src" / "b.py.meta").write_text(json.dumps({"durations_by_key": {"m3": 2.25}, "exit_code_by_key": {}}))
    (tmp_path / "src" / "c.py.meta").write_text(json.dumps({"exit_code_by_key": {}}))  # none recorded
    assert mutation_report.test_time(tmp_path) == (3.75, 2)  # m2 not run yet


def test_forgetting_leaves_only_killed_and_timed_out_results(tmp_path):
    import json

    (tmp_path / "src").mkdir()
    meta = tmp_path / "src" / "m.py.meta"
    meta.write_text(json.dumps({"exit_code_by_key": {"killed": 1, "survived": 0, "no_tests": 33, "none_run": 5,
                                                     "timeout": 24, "unchecked": None},
                                "durations_by_key": {"killed": 1.0}}))
    assert mutation_report.forget(tmp_path) == 3
    data = json.loads(meta.read_text())
    assert data["exit_code_by_key"] == {"killed": 1, "survived": None, "no_tests": None, "none_run": None,
                                        "timeout": 24, "unchecked": None}
    assert data["durations_by_key"] == {"killed": 1.0}  # everything else as it was
    assert mutation_report.forget(tmp_path) == 0


def test_a_change_is_one_line_or_a_statement_mutmut_rewrote_as_one():
    assert mutation_report.one_line_change(["--- a", "+++ b", "@@ -1 +1 @@", "-    x = 1", "+    x = 2"]) == (
        "    x = 1", "    x = 2")
    joined = ["-    f(a, raw=True,", "-      kind=k)", "+    f(a, kind=k)"]
    assert mutation_report.one_line_change(joined) == ("f(a, raw=True, kind=k)", "    f(a, kind=k)")
    assert mutation_report.one_line_change(["-    x = 1", "+    x = 2", "+    y = 3"]) is None  # two new lines
    assert mutation_report.one_line_change(["+    x = 2"]) is None  # nothing removed
