"""``trio-mcp call`` answers a server's questions: elicitation as a form on the terminal,
sampling typed by the person there, both declined at once when stdin is not a terminal."""

from __future__ import annotations

import os
import pty
import subprocess
from pathlib import Path

import trio

from tests.test_cli import CLI, GUARD, ROOT, child_env, run_cli

QUESTIONS = str(ROOT / "tests" / "servers" / "questions_server.py")


def test_without_a_terminal_elicitation_is_declined_and_sampling_refused_at_once() -> None:
    # run_cli's stdin is not a terminal (no input at all): nothing waits for an answer.
    asked = subprocess.run(
        [*CLI, "call", QUESTIONS, "cancel_order", "order_id=7"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=GUARD,
        env=child_env(),
        check=False,
    )
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout == "order 7 kept (decline)\n"
    assert asked.stderr == (
        "trio-mcp: the server asked: 'Cancel order 7?'; declined (stdin is not a terminal to "
        "answer on)\n"
    )
    sampled = run_cli("call", QUESTIONS, "summarize", "text=hi")
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout == "no summary: -1 trio-mcp has no model to sample with; refused\n"
    assert "refused: trio-mcp has no model" in sampled.stderr


class Terminal:
    """A child whose stdin and stderr are a pty, read and typed into by the test."""

    def __init__(self, controller: int) -> None:
        self.controller = controller
        self.seen = b""

    async def expect(self, marker: bytes) -> bytes:
        while marker not in self.seen:
            await trio.lowlevel.wait_readable(self.controller)
            try:
                chunk = os.read(self.controller, 4096)
            except OSError:
                chunk = b""
            assert chunk, self.seen
            self.seen += chunk
        before, _, self.seen = self.seen.partition(marker)
        return before + marker

    def type(self, line: str) -> None:
        os.write(self.controller, line.encode() + b"\n")


async def _on_a_terminal(
    arguments: list[str], dialogue: list[tuple[bytes, str]]
) -> tuple[int, str, list[bytes]]:
    controller, terminal = pty.openpty()
    shown: list[bytes] = []
    try:
        with trio.fail_after(GUARD):
            process = await trio.lowlevel.open_process(
                [*CLI, "call", QUESTIONS, *arguments],
                stdin=terminal,
                stdout=subprocess.PIPE,
                stderr=terminal,
                cwd=ROOT,
                env=child_env(),
            )
            os.close(terminal)
            terminal = -1
            talk = Terminal(controller)
            for prompt, answer in dialogue:
                shown.append(await talk.expect(prompt))
                talk.type(answer)
            assert process.stdout is not None
            out = b""
            while chunk := await process.stdout.receive_some(4096):
                out += chunk
            code = await process.wait()
    finally:
        os.close(controller)
        if terminal != -1:
            os.close(terminal)
    return code, out.decode(), shown


async def test_on_a_terminal_each_field_is_asked_with_its_type_choices_and_default() -> None:
    code, out, shown = await _on_a_terminal(
        ["cancel_order", "order_id=7"],
        [
            (b"[Y]es, [n]o (decline), [c]ancel: ", ""),
            (b"confirm (y/n, required): ", "maybe"),
            (b"confirm (y/n, required): ", "y"),
            (b"reason (a number or a value above, required): ", "2"),
            (b"refund (integer, min 0, max 100, optional) [100]: ", "150"),
            (b"refund (integer, min 0, max 100, optional) [100]: ", ""),
            (b"note (string, optional): ", ""),
        ],
    )
    assert code == 0
    assert out == "order 7: [('confirm', True), ('reason', 'wrong'), ('refund', 100)]\n"
    assert b"trio-mcp: the server asks: Cancel order 7?" in shown[0]
    assert b"answer y or n" in shown[2]
    assert b"1) late" in shown[3] and b"2) wrong" in shown[3] and b"3) other" in shown[3]
    assert b"at most 100" in shown[5]


async def test_on_a_terminal_the_user_declines_or_cancels() -> None:
    code, out, _ = await _on_a_terminal(["cancel_order", "order_id=8"], [(b"[c]ancel: ", "n")])
    assert (code, out) == (0, "order 8 kept (decline)\n")
    code, out, _ = await _on_a_terminal(["cancel_order", "order_id=9"], [(b"[c]ancel: ", "c")])
    assert (code, out) == (0, "order 9 kept (cancel)\n")


async def test_on_a_terminal_the_user_types_the_models_reply_or_refuses() -> None:
    code, out, shown = await _on_a_terminal(
        ["summarize", "text=the report"],
        [(b"Reply (an empty line refuses): ", "It is short.")],
    )
    assert code == 0
    assert out == "summary by trio-mcp-terminal: It is short.\n"
    assert b"user: Summarize: the report" in shown[0]
    code, out, _ = await _on_a_terminal(
        ["summarize", "text=x"], [(b"Reply (an empty line refuses): ", "")]
    )
    assert (code, out) == (0, "no summary: -1 the user refused the sampling request\n")


def test_the_client_commands_declare_elicitation_and_sampling(tmp_path: Path) -> None:
    inspected = run_cli("call", QUESTIONS, "cancel_order", "order_id=1")
    assert "did not declare" not in inspected.stderr + inspected.stdout
