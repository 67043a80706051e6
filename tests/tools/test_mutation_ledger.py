"""The mutation ledger: mutmut's results survive a fresh clone, and a module that has its own
results keeps them."""

from __future__ import annotations

import json
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
