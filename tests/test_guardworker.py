"""One guard child per process (policyrun.evaluate.guardworker): evaluations reuse it, yet each evaluation
sees its own facts, a runaway expression still ends as one located line, and the next evaluation
in the same process is decided as usual."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from policyrun.evaluate import guardworker
from policyrun.evaluate.engine import evaluate, load_checked
from policyrun.facts import Fact, FactsSnapshot, Provenance

RUNAWAY = "'a'" + ".replace('a', 'aa')" * 29 + ".size() > 0"

RULEBOOK = """\
policyrun: 1
name: worker
probes:
  n: {uses: const, with: {value: 0}}
derive:
  twice: {value: "facts.n * 2"}
modes:
  m: {phases: [A]}
phases:
  - id: A
    evidence:
      - {id: small, check: "derived.twice < 10"}
"""


def _facts(n: int) -> FactsSnapshot:
    return FactsSnapshot(facts={"n": Fact(value=n, provenance=Provenance(probe="n", kind="const"))})


@pytest.fixture(autouse=True)
def fresh_worker() -> None:
    guardworker._stop_worker()


@pytest.fixture
def rulebook(tmp_path: Path) -> Path:
    path = tmp_path / "rb.yaml"
    path.write_text(RULEBOOK)
    return path


def test_evaluations_of_the_same_rulebook_and_facts_reuse_one_child(rulebook: Path) -> None:
    if not guardworker.guarded_available():
        pytest.skip("no fork here")
    rb, facts = load_checked(rulebook), _facts(2)
    first = evaluate(rb, mode="m", inputs={}, facts=facts, timestamp=False)
    worker = guardworker._worker
    assert worker is not None and worker.pid != os.getpid()
    second = evaluate(rb, mode="m", inputs={}, facts=facts, timestamp=False)
    assert guardworker._worker is worker  # no second fork
    assert first.to_json() == second.to_json()
    assert first.phases[0].status == "PASS"


def test_each_evaluation_sees_its_own_facts(rulebook: Path) -> None:
    """A child forked for other facts never answers for these: it holds the facts of its fork."""
    rb = load_checked(rulebook)
    low = evaluate(rb, mode="m", inputs={}, facts=_facts(2), timestamp=False)
    high = evaluate(rb, mode="m", inputs={}, facts=_facts(7), timestamp=False)
    again = evaluate(rb, mode="m", inputs={}, facts=_facts(2), timestamp=False)
    assert [low.phases[0].status, high.phases[0].status, again.phases[0].status] == ["PASS", "FAIL", "PASS"]
    assert high.derived[0].value == 14 and low.derived[0].value == again.derived[0].value == 4


def test_a_runaway_expression_is_refused_and_the_next_evaluation_is_decided(
        tmp_path: Path, rulebook: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not guardworker.guarded_available():
        pytest.skip("no fork here")
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "1")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "8192")  # so the time limit is what stops it
    slow = tmp_path / "slow.yaml"
    slow.write_text(RULEBOOK.replace('"derived.twice < 10"', f'"{RUNAWAY}"'))
    facts = _facts(2)
    stopped = evaluate(load_checked(slow), mode="m", inputs={}, facts=facts, timestamp=False)
    assert stopped.phases[0].status == "BLOCKED"
    assert "time limit of 1s" in (stopped.phases[0].blocker or "")
    decided = evaluate(load_checked(rulebook), mode="m", inputs={}, facts=facts, timestamp=False)
    assert decided.phases[0].status == "PASS"


def test_an_exception_in_the_child_is_raised_in_the_parent_and_the_child_serves_on() -> None:
    if not guardworker.guarded_available():
        pytest.skip("no fork here")
    with pytest.raises(ZeroDivisionError):
        guardworker.run_shared(divmod, 1, 0)
    worker = guardworker._worker
    assert guardworker.run_shared(divmod, 7, 2) == (3, 1)
    assert guardworker._worker is worker


def test_a_shared_object_is_passed_by_reference(tmp_path: Path) -> None:
    """What the child holds from its fork is not sent again: an object that cannot be pickled
    still reaches the child when it is shared."""
    if not guardworker.guarded_available():
        pytest.skip("no fork here")
    unpicklable = [lambda: 5]
    assert guardworker.run_shared(_call_first, unpicklable, shared=[unpicklable]) == 5
    with pytest.raises(Exception, match="pickle"):
        guardworker.run_shared(_call_first, [lambda: 5])


def _call_first(items: list) -> object:  # type: ignore[type-arg]
    return items[0]()


def test_a_forked_copy_of_the_process_gets_its_own_child() -> None:
    """A process forked from one that has a guard child (collection's guarded children are) must
    not write requests into its parent's pipes: it forks a child of its own."""
    if not guardworker.guarded_available():
        pytest.skip("no fork here")
    assert guardworker.run_shared(divmod, 7, 2) == (3, 1)
    parents = guardworker._worker
    assert parents is not None
    pid = os.fork()
    if pid == 0:  # the forked copy: exit status 0 only if it used a child of its own
        ok = False
        try:
            ok = guardworker.run_shared(divmod, 9, 4) == (2, 1) and guardworker._worker is not None \
                and guardworker._worker.pid != parents.pid
            guardworker._stop_worker()
            guardworker._reap(block=True)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert guardworker._worker is parents and guardworker.run_shared(divmod, 5, 2) == (2, 1)


def _summarise(text: str) -> str:
    from policyrun.evaluate import expreval

    return str(expreval._summary("str", len(text), text)["sha256"])


def test_values_kept_beside_a_trace_go_to_the_store_of_the_evaluation_that_summarised_them(tmp_path: Path) -> None:
    # The evaluation child is forked with the parent's value hook (evaluate --out keeps summarised
    # values); a later evaluation with another store must not reuse a child that writes into the first.
    from policyrun.evaluate.tracevalues import keeping_values

    holder = object()  # the same shared objects both times: nothing else would replace the child
    with keeping_values(tmp_path / "one"):
        first = guardworker.run_shared(_summarise, "x" * 100, shared=[holder])
    with keeping_values(tmp_path / "two"):
        second = guardworker.run_shared(_summarise, "y" * 100, shared=[holder])
    assert [p.name for p in (tmp_path / "one").iterdir()] == [f"{first}.txt"]
    assert [p.name for p in (tmp_path / "two").iterdir()] == [f"{second}.txt"]
