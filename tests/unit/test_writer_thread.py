"""The background writer: tasks run in order, off the caller's thread; errors reach the caller."""

import threading

import pytest

from meeple.writer_thread import WriterThread


def test_tasks_run_in_order_on_another_thread():
    writer, seen, release = WriterThread("test-writer"), [], threading.Event()
    writer.submit(lambda: release.wait(5))  # holds the queue: submit must not wait for it
    for i in range(5):
        writer.submit(lambda i=i: seen.append((i, threading.current_thread().name, writer.in_writer())))
    assert seen == [] and not writer.in_writer()
    release.set()
    writer.wait()
    assert [i for i, _, _ in seen] == [0, 1, 2, 3, 4]
    assert all(name.startswith("test-writer") and inside for _, name, inside in seen)
    writer.close()


def test_a_failed_task_raises_at_the_next_submit_or_wait():
    writer = WriterThread("test-writer")
    writer.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        writer.wait()
    writer.wait()  # reported once
    done = threading.Event()
    writer.submit(lambda: (done.set(), [][0]))
    done.wait(5)
    writer._pending[0].exception(timeout=5)  # the task has finished (and failed)
    with pytest.raises(IndexError):
        writer.submit(lambda: None)
    writer.close()
    writer.submit(lambda: None)  # a closed writer starts a new thread
    writer.close()
