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
