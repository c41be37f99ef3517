"""The CPU device keeps each chip's worker thread from run to run (a new thread each run
would start a new OpenMP team for its parallel loops each run)."""

from __future__ import annotations

import threading

from tprules.runtime.devices.cpu import CpuDevice


def _thread_of(queue) -> int:
    done = []
    queue._submit(lambda: done.append(threading.get_ident()))
    queue.synchronize()
    return done[0]


def test_a_chip_runs_on_the_same_thread_in_every_run():
    device = CpuDevice(threads=1)
    first = device.queues(range(2))
    threads = [_thread_of(q) for q in first]
    for q in first:
        q.close()
    second = device.queues(range(2))
    assert [_thread_of(q) for q in second] == threads and len(set(threads)) == 2
    for q in second:
        q.close()


def test_a_queue_made_alone_has_its_own_thread_and_shuts_it_down():
    from tprules.runtime.devices.cpu import CpuQueue

    q = CpuQueue(0)
    _thread_of(q)
    q.close()
    assert q.pool._shutdown
