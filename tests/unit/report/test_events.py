"""The event log behind ``/events`` (firstlight.report.events): ids, resumption, its bounds, its end."""

from __future__ import annotations

import threading
import time

import pytest

from firstlight.report.events import EventLog, first_id_now, frame, last_event_id


def test_each_event_gets_the_next_id_and_a_client_resumes_after_the_one_it_saw():
    log = EventLog()
    ids = [log.append({"event": "phase", "n": n}) for n in range(3)]
    assert ids == [1, 2, 3]
    batch, missed = log.after(1, timeout=0)
    assert [i for i, _ in batch] == [2, 3] and missed == 0
    assert '"n": 2' in batch[-1][1]


def test_a_client_waits_for_the_next_event_and_wakes_when_it_comes():
    log = EventLog()
    log.append({"event": "started"})
    threading.Timer(0.2, log.append, ({"event": "phase"},)).start()
    t0 = time.monotonic()
    batch, _ = log.after(1, timeout=30)
    assert [i for i, _ in batch] == [2] and time.monotonic() - t0 < 20  # woken by the event, not the timeout


def test_a_wait_with_nothing_new_ends_at_its_timeout():
    log = EventLog()
    log.append({"event": "started"})
    t0 = time.monotonic()
    assert log.after(1, timeout=0.1) == ([], 0)
    assert time.monotonic() - t0 >= 0.1 - 0.02


def test_the_log_keeps_its_capacity_and_says_how_many_a_late_client_missed():
    log = EventLog(capacity=3)
    for n in range(10):
        log.append({"n": n})
    batch, missed = log.after(2, timeout=0)
    assert [i for i, _ in batch] == [8, 9, 10] and missed == 5  # ids 3..7 are gone


def test_at_most_max_clients_follow_at_once():
    log = EventLog(max_clients=2)
    assert log.join() and log.join() and not log.join()
    log.leave()
    assert log.clients == 1 and log.join()


def test_closing_wakes_every_waiting_client_and_refuses_new_ones():
    log = EventLog()
    done = threading.Event()

    def wait() -> None:
        log.after(0, timeout=60)
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    log.close()
    assert done.wait(10) and not log.join()


def test_a_later_logs_ids_are_above_an_earlier_ones_and_an_id_not_its_own_reads_it_from_the_start():
    earlier = EventLog(first_id=first_id_now())
    for n in range(3):
        earlier.append({"n": n})
    seen = earlier.after(0, timeout=0)[0][-1][0]
    later = EventLog(first_id=first_id_now() + 10_000)  # a process started ten seconds later
    later.append({"n": "a"})
    later.append({"n": "b"})
    (one, _), (two, _) = later.after(seen, timeout=0)[0]  # the earlier process's last id
    assert seen < one < two and later.after(seen, timeout=0)[1] == 0  # nothing missed
    assert [i for i, _ in later.after(two + 5, timeout=0)[0]] == [one, two]  # past its newest: not its own
    assert later.after(one, timeout=0)[0] == [(two, '{"n": "b"}')]


def test_a_frame_is_the_id_and_one_data_line():
    assert frame(7, '{"a": 1}') == b'id: 7\ndata: {"a": 1}\n\n'


def test_a_line_break_in_an_event_stays_inside_its_json():
    log = EventLog()
    log.append({"message": "two\nlines"})
    (_, data), = log.after(0, timeout=0)[0]
    assert "\n" not in data


@pytest.mark.parametrize("header, expected", [(None, 0), ("", 0), ("12", 12), (" 5 ", 5), ("-1", 0), ("x", 0), ("0", 0),
                                              ("9" * 30, 0)])
def test_last_event_id_is_a_whole_number_or_the_start(header: str | None, expected: int):
    assert last_event_id(header) == expected


def test_closing_waits_for_the_streams_to_have_sent_what_is_left_and_no_longer():
    log = EventLog()
    assert log.join()
    threading.Timer(0.2, log.leave).start()
    assert log.close(drain_s=30) is True  # the stream left: close returned then, not after 30 s
    stuck = EventLog()
    assert stuck.join()
    t0 = time.monotonic()
    assert stuck.close(drain_s=0.1) is False and time.monotonic() - t0 < 10


def test_an_id_of_up_to_18_digits_is_read_and_a_longer_one_is_the_start():
    assert last_event_id("9" * 18) == int("9" * 18) and last_event_id("9" * 19) == 0


def test_a_value_json_cannot_write_is_sent_as_its_text():
    from pathlib import Path

    log = EventLog()
    log.append({"event": "note", "path": Path("/models/m")})
    (_, data), = log.after(0, timeout=0)[0]
    assert '"path": "/models/m"' in data


def test_closing_by_default_does_not_wait_for_the_streams():
    log = EventLog()
    assert log.join()
    t0 = time.monotonic()
    assert log.close() is False and time.monotonic() - t0 < 0.9  # a stream still open: no wait asked, none made
