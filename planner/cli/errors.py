"""How the CLI reports bad input: one line on stderr naming the problem, exit status 2."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console

EXIT_INPUT = 2


def fail(message: str) -> NoReturn:
    # soft_wrap: the message stays on one line, whatever the terminal width (CI logs grep it).
    Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(EXIT_INPUT)
