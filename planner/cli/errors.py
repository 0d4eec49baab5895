"""How the CLI reports bad input: one line on stderr naming the problem, exit status 2."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

EXIT_INPUT = 2


def fail(message: str) -> NoReturn:
    # soft_wrap: the message stays on one line, whatever the terminal width (CI logs grep it);
    # escape: brackets in a message ("[pp(4), grad_accum_steps(16)]") are text, not markup.
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {escape(message)}",
                                               highlight=False)
    raise typer.Exit(EXIT_INPUT)
