"""The shell's backend helpers on asyncio: the cut of a write with no cancel scope (``backend.TaskCut``,
what a stream's final body is written in) behaves as the scope it replaces. The stuck final write itself
is tested end to end in test_send_timeout (``test_a_stuck_final_write_is_given_up_and_the_app_runs_on``)."""

from __future__ import annotations

import asyncio
import sys

import anyio
import pytest

from sse_middleware._asgi.backend import TaskCut, cancel_scope, cuttable

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.uncancel: Python >= 3.11")


def test_a_cut_write_is_swallowed_and_the_task_is_not_left_cancelling() -> None:
    async def main() -> tuple[bool, int, str]:
        cut = cuttable()
        assert isinstance(cut, TaskCut)
        asyncio.get_running_loop().call_later(0.01, cut.cancel)
        with cut:
            await asyncio.sleep(5)  # a send the client does not read
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # the task goes on: nothing left to cancel it
        return cut.cancelled_caught, task.cancelling(), "after"

    assert asyncio.run(main()) == (True, 0, "after")


def test_a_cancellation_of_someone_elses_goes_through_a_cut() -> None:
    """The server cancels the task (as uvicorn does past ``--timeout-graceful-shutdown``) while its final
    write is being cut: the task is cancelled all the same, not run on. Control: the cut alone."""

    async def main(server_cancels: bool) -> str:
        task = asyncio.current_task()
        assert task is not None
        cut = cuttable()
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, cut.cancel)
        if server_cancels:
            loop.call_later(0.01, task.cancel)
        try:
            with cut:
                await asyncio.sleep(5)
            await asyncio.sleep(0.01)
        except asyncio.CancelledError:
            return "cancelled"
        return "ran on"

    assert asyncio.run(main(True)) == "cancelled"
    assert asyncio.run(main(False)) == "ran on"


def test_a_write_with_a_deadline_keeps_its_scope() -> None:
    async def main() -> bool:
        return not isinstance(cuttable(anyio.current_time() + 1), TaskCut) and isinstance(
            cancel_scope(), anyio.CancelScope
        )

    assert asyncio.run(main())
