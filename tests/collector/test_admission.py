"""The admission bound's bookkeeping as a request's body turns into queued rows.

`tests/faults/test_overload.py` drives the bound through a real `ragtrace serve`; here the
`Admission` class itself, with a plain counter standing in for the writer's queue (the real
writer needs a store and a spool, and only its byte count matters to admission)."""

from __future__ import annotations

import threading

import pytest

from ragtrace_collector.admission import Admission


class Queue:
    def __init__(self) -> None:
        self.nbytes = 0


def test_rows_are_counted_once_while_their_charge_moves_to_the_queue() -> None:
    queue = Queue()
    admission = Admission(1000, lambda: queue.nbytes)
    assert admission.fits(300) and admission.take(300, 0)  # the body, as it arrives
    assert admission.take(400, 300)  # its decoded rows, charged before they are spooled
    inside, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def enqueue() -> None:
        queue.nbytes += 400
        inside.set()
        leave.wait(5)

    mover = threading.Thread(target=admission.to_queue, args=(400, enqueue))
    mover.start()
    assert inside.wait(5)
    reader = threading.Thread(target=lambda: seen.append(admission.held()))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive(), "held() read the counts while the rows were changing hands"
    leave.set()
    mover.join(5)
    reader.join(5)
    assert seen == [700]  # body + rows, not body + rows + rows
    assert admission.bodies == 300 and queue.nbytes == 400
    admission.give_back(300)
    assert admission.held() == 400


def test_rows_that_do_not_fit_are_refused_unless_the_request_holds_everything() -> None:
    queue = Queue()
    queue.nbytes = 500  # another request's rows are waiting for the store
    admission = Admission(1000, lambda: queue.nbytes)
    assert admission.take(300, 0)
    assert not admission.take(400, 300)  # 500 + 300 + 400 > 1000: refused, nothing charged
    assert admission.held() == 800
    queue.nbytes = 0
    assert admission.take(900, 300)  # alone, a request may always finish
    assert admission.held() == 1200


def test_a_failed_enqueue_leaves_the_charge_with_the_request() -> None:
    queue = Queue()
    admission = Admission(1000, lambda: queue.nbytes)
    admission.take(100, 0)

    def broken() -> None:
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        admission.to_queue(100, broken)
    assert admission.bodies == 100  # the caller gives it back, as the OTLP route does


def _reserving(ticket: object, nbytes: int, wait_s: float, out: list[object]) -> threading.Thread:
    from ragtrace_collector.admission import Ticket

    assert isinstance(ticket, Ticket)
    thread = threading.Thread(target=lambda: out.append(ticket.reserve(nbytes, wait_s)))
    thread.start()
    return thread


def test_of_two_requests_that_fit_alone_the_older_waits_and_the_younger_yields() -> None:
    from ragtrace_collector.admission import Verdict

    queue = Queue()
    admission = Admission(1000, lambda: queue.nbytes)
    older, younger = admission.open(), admission.open()
    assert older.take(200) and younger.take(200)  # both bodies are in
    got: list[object] = []
    waiting = _reserving(older, 700, 10.0, got)  # 200 + 700 would fit alone, not beside the younger: it waits
    waiting.join(0.3)
    assert waiting.is_alive() and not got
    # the younger neither waits nor takes the room kept for the older: refused at once
    assert younger.reserve(100, 10.0) is Verdict.BUSY
    assert not younger.take(400)
    assert not admission.fits(1)  # a new request is refused the kept room too
    younger.close()  # refused, it gives back its body: the older goes on
    waiting.join(5)
    assert got == [Verdict.OK] and admission.bodies == 900
    older.close()
    assert admission.bodies == 0 and admission.held() == 0


def test_the_oldest_waits_for_the_queue_to_drain_at_most_its_wait() -> None:
    from ragtrace_collector.admission import Verdict

    queue = Queue()
    queue.nbytes = 900  # rows waiting for the store
    admission = Admission(1000, lambda: queue.nbytes)
    ticket = admission.open()
    got: list[object] = []
    waiting = _reserving(ticket, 500, 10.0, got)
    waiting.join(0.2)
    assert waiting.is_alive()
    queue.nbytes = 100  # the writer wrote: nobody tells admission, it looks again
    waiting.join(5)
    assert got == [Verdict.OK]
    ticket.close()
    queue.nbytes = 900
    stuck = admission.open()
    assert stuck.reserve(500, 0.2) is Verdict.BUSY  # the store is not taking rows: 429 after the wait
    assert stuck.reserve(1500, 10.0) is Verdict.TOO_LARGE  # could never fit: 413, without waiting
    stuck.close()


def test_the_inserts_reserve_is_kept_from_requests_and_their_working_memory_counted() -> None:
    """The writer's insert needs working memory beside the rows (at most the reserve): requests may
    take only what leaves it free, so what the collector holds stays within the limit during inserts."""
    queue = Queue()
    working = {"now": 0}
    admission = Admission(1000, lambda: queue.nbytes, working=lambda: working["now"], insert_reserve=250)
    queue.nbytes = 300  # rows waiting for the store
    assert admission.fits(450) and not admission.fits(451)  # 300 + 450 + the reserve 250 = 1000
    assert admission.take(450, 0)
    assert not admission.take(1, 450)
    working["now"] = 250  # the insert of the rows runs
    assert admission.held() == 1000  # body + rows + the insert: within the limit
    working["now"] = 0
    queue.nbytes = 0
    assert admission.take(500, 450)  # alone (nothing queued or being written): the whole limit
    admission.give_back(950)
    ticket = admission.open()
    assert admission.fits(1000) and ticket.take(1000)  # the largest request fits alone
    ticket.close()
    assert admission.held() == 0
