"""Errors the domain core raises for bad input.

Every user-facing failure is a :class:`GpuclusterError` carrying *where* (file,
cluster, component, key path), *what* is wrong, *what is allowed* and *how to fix
it*. The CLI and ``main.py`` print :meth:`GpuclusterError.render` and exit with
:data:`EXIT_INVALID_INPUT` (2) before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

EXIT_INVALID_INPUT = 2
"""Process exit code for invalid input (cluster file, RecipeResult, overrides, policy errors)."""


@dataclass
class Problem:
    """One located problem in user input.

    Attributes:
        message: what is wrong, one sentence.
        file: the input file it was found in (as the user named it), or ``None``.
        cluster: cluster name, or ``None``.
        component: catalog component name, or ``None``.
        key: dotted key path inside the file or the component's values, or ``None``.
        allowed: what would be accepted (free text or a list rendered as text).
        fix: how to fix it.
        id: a stable identifier (policy checks use ``GPU001``-style ids; input errors
            use ``input.<kind>``).
    """

    message: str
    file: str | None = None
    cluster: str | None = None
    component: str | None = None
    key: str | None = None
    allowed: str | None = None
    fix: str | None = None
    id: str = "input"

    def render(self) -> str:
        """One line: ``error[id] file=… cluster=… component=… key=…: message (allowed: …) fix: …``."""
        where = " ".join(
            f"{name}={value}"
            for name, value in (
                ("file", self.file),
                ("cluster", self.cluster),
                ("component", self.component),
                ("key", self.key),
            )
            if value
        )
        text = f"error[{self.id}]"
        if where:
            text += f" {where}"
        text += f": {self.message}"
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        if self.fix:
            text += f" fix: {self.fix}"
        return text


class GpuclusterError(Exception):
    """Invalid user input; carries one or more :class:`Problem` s.

    Raise it with keyword arguments for a single problem, or with ``problems=[...]``.
    ``str(err)`` renders every problem, one per line.
    """

    def __init__(self, message: str | None = None, *, problems: Sequence[Problem] | None = None, **where):
        if problems is None:
            if message is None:
                raise TypeError("GpuclusterError needs a message or problems")
            problems = [Problem(message=message, **where)]
        self.problems: list[Problem] = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        return "\n".join(p.render() for p in self.problems)


class PluginError(GpuclusterError):
    """A plugin raised or returned something invalid; the message names the plugin."""


def allowed_list(values: Iterable[object]) -> str:
    """Render allowed values as a sorted, comma-separated list."""
    return ", ".join(sorted(str(v) for v in values))
