"""The half-queue bookkeeping on its own: which halves an outcome closes, when a half needs no check, how the
op-queue progress follows the half-queue progress."""

from __future__ import annotations

from pocketmq.broker.transaction.book import TransactionBook


def test_an_outcome_closes_the_half_and_the_latest_copy_once() -> None:
    book = TransactionBook()
    book.track("k", 0, "T", "G")
    assert book.targets("k", 0) == [0]
    book.track("k", 3, "T", "G")  # a check-back copied it
    book.passed("k", 0)
    assert book.settled("k", 0) and not book.settled("k", 3)
    assert book.targets("k", 0) == [3]  # a late END_TRANSACTION for the original closes the copy
    book.mark("k", [3])
    assert book.targets("k", 3) is None and book.targets("k", 0) is None  # never twice
    assert book.unresolved() == {}


def test_a_failed_outcome_is_taken_back() -> None:
    book = TransactionBook()
    book.track("k", 5, "T", "G")
    book.mark("k", [5])
    book.mark("k", [5], resolved=False)
    assert book.targets("k", 5) == [5] and book.unresolved() == {("T", "G"): 1}


def test_a_half_passed_by_the_scan_without_copy_cannot_be_ended() -> None:
    book = TransactionBook()
    book.track("k", 0, "T", "G")
    book.passed("k", 0)  # discarded
    assert book.targets("k", 0) is None


def test_op_progress_waits_for_ops_of_halves_not_yet_passed() -> None:
    book = TransactionBook()
    book.op_read_at(0, 2)
    book.op_read_at(1, 0)
    assert book.op_progress == 0  # the op of half 2 is still needed
    book.passed("a", 0)
    book.passed("b", 1)
    assert book.op_progress == 0
    book.passed("c", 2)
    assert book.op_progress == 2 and book.op_read == 2


def test_a_copy_loaded_after_its_resolved_original_is_settled() -> None:
    book = TransactionBook()
    book.op_read_at(0, 0)  # the original has an op record; its copy at 1 does not (a crash between)
    book.track("k", 0, "T", "G")
    book.note_loaded("k", 0)
    book.track("k", 1, "T", "G")
    book.note_loaded("k", 1)
    assert book.settled("k", 1) and book.targets("k", 1) is None


def test_tracking_is_bounded() -> None:
    book = TransactionBook(max_tracked=2)
    for i in range(5):
        book.track(f"k{i}", i, "T", "G")
    assert len(book.pending) == 2 and book.targets("k4", 4) == [4]
