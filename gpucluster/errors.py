"""Errors the domain core raises for bad input.

Every user-facing failure is a :class:`GpuclusterError` carrying *where* (file,
cluster, component, key path), *what* is wrong, *what is allowed* and *how to fix
it*. The CLI and ``main.py`` print :meth:`GpuclusterError.render` and exit with
:data:`EXIT_INVALID_INPUT` (2) before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

EXIT_INVALID_INPUT = 2
"""Process exit code for invalid input (cluster file, RecipeResult, overrides, policy errors)."""

DEFAULT_FIX = "correct the input the message names (see docs/cluster-file.md)"
"""The ``fix:`` of a problem raised without one, so every rendered error has a fix."""

FIELD_LIMIT = 160
"""Longest ``file=``/``cluster=``/``component=``/``key=`` value printed (characters)."""
TEXT_LIMIT = 480
"""Longest message, ``allowed`` or ``fix`` printed (characters); longer ones are cut in the middle."""
FINDING_TEXT_LIMIT = 1600
"""Longest message of a plan finding's line (:meth:`gpucluster.model.Finding.render`): a finding
about a RecipeResult names the file's value, the value installed and why with its public source,
which the middle cut at :data:`TEXT_LIMIT` would take out; ``plan --format json`` carries every
finding whole."""

_UNSAFE = re.compile(
    r"[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ud800-\udfff\ufeff\ufff9-\ufffb]"
)
"""Characters that would break or forge a one-line message, or act on the terminal: C0/C1 control
characters (newline, carriage return, ESC of terminal escape sequences), line/paragraph separators,
zero-width and bidirectional formatting characters (Trojan Source, CVE-2021-42574), and lone
surrogates (a JSON ``"\\udc80"``), which no UTF-8 stream can write."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

MASK = "***"
"""What :func:`mask_secrets` writes in place of a credential."""

_SECRET_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    # a PEM private key block (cut at its END line, or at the end of the text)
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.DOTALL,
        ),
        rf"-----BEGIN \1PRIVATE KEY-----{MASK}",
    ),
    # the password (or the token standing alone) in a URL's user information (RFC 3986, 3.2.1)
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#@\s:'\"]*):[^/?#@\s'\"]*@"), rf"\1\2:{MASK}@"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s:'\"]+@"), rf"\1{MASK}@"),
    # an Authorization header value
    (re.compile(r"\bBearer(?:\s+|%20)[^\s'\"]+"), f"Bearer {MASK}"),
    (re.compile(r"\bBasic(?:\s+|%20)[A-Za-z0-9+/]{8,}=*"), f"Basic {MASK}"),
    # key=value credentials of connection strings and query strings (Azure Storage connection
    # strings, Service Bus/Event Hubs, SAS tokens: sig=)
    (
        re.compile(
            r"(?i)\b(AccountKey|SharedAccessKey|SharedAccessSignature|sig|password|passwd|pwd|"
            r"client_?secret|access_?key|secret_?key|api_?key|token|access_token|refresh_token)"
            r"(\s*[=:]\s*)[^;&\s'\",]+"
        ),
        rf"\1\2{MASK}",
    ),
    # a JSON Web Token (three base64url parts, the first two JSON objects: "eyJ")
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), MASK),
)
"""Credential shapes :func:`mask_secrets` masks, with their replacement."""


def mask_secrets(text: object) -> str:
    """``text`` with every credential-shaped part replaced by :data:`MASK` (``***``): PEM private
    keys; the password of ``scheme://user:password@host`` (and a lone ``scheme://token@host``);
    ``Bearer``/``Basic`` header values; ``AccountKey=``, ``SharedAccessKey=``, ``sig=``,
    ``password=``, ``token=``, ``api_key:`` and similar ``key=value`` / ``key: value`` pairs of
    connection strings and query strings; JSON Web Tokens (``eyJ….eyJ….…``). What surrounds them
    (the host, the user, the key name) is kept, so the line still says which value is wrong.

    The one masking of the project: :func:`format_line` applies it to every part of every
    ``error``/``warning``/``info`` line, so no error path can quote a user's secret.
    """
    text = str(text)
    for pattern, replacement in _SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def _escape_char(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: object, limit: int = TEXT_LIMIT) -> str:
    """``text`` made safe for one terminal line: unsafe characters (:data:`_UNSAFE`) written as
    ``\\n``, ``\\x1b``, ``\\u202e``; longer than ``limit`` characters: cut in the middle with
    ``…(N characters cut)…``. Used by :meth:`Problem.render` on every part of a message."""
    text = _UNSAFE.sub(_escape_char, str(text))
    if len(text) > limit:
        cut = len(text) - limit
        head = limit * 2 // 3
        text = f"{text[:head]}…({cut} characters cut)…{text[len(text) - (limit - head) :]}"
    return text


def escaped(text: object) -> str:
    """``text`` with the characters of :data:`_UNSAFE` escaped as :func:`one_line` does, not cut:
    for a value from an input file or a cluster (a node name, a RecipeResult's overlay name, a
    values key) printed outside an error line, so it stays on its line and cannot drive the terminal."""
    return _UNSAFE.sub(_escape_char, str(text))


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

    def render(self, severity: str = "error") -> str:
        """One line: ``error[id] file=… cluster=… component=… key=…: message (allowed: …) fix: …``.

        Always one line with a ``fix:`` (:data:`DEFAULT_FIX` when none was given), made by
        :func:`format_line` (control characters escaped, long values cut), so a user string
        can neither forge a second ``error[...]`` line nor drive the terminal.
        """
        return format_line(
            severity,
            self.id,
            self.message,
            where=(
                ("file", self.file),
                ("cluster", self.cluster),
                ("component", self.component),
                ("key", self.key),
            ),
            allowed=self.allowed or None,
            fix=self.fix or DEFAULT_FIX,
        )


def format_line(
    severity: str,
    id: str,
    message: object,
    *,
    where: Iterable[tuple[str, object]] = (),
    allowed: object | None = None,
    fix: object | None = None,
    message_limit: int = TEXT_LIMIT,
) -> str:
    """The one formatter of ``error``/``warning``/``info`` lines (every printer of one calls it:
    :meth:`Problem.render`, :meth:`gpucluster.model.Finding.render`, lint/render findings, the
    CLI's finding summaries; ``tests/test_error_line_format.py`` scans the source for others).

    Args:
        severity: ``error``, ``warning`` or ``info``.
        id: the stable identifier in the brackets (``input.backend``, ``GPU-ADVERTISER``).
        message: what is wrong; cut to ``message_limit`` characters (default :data:`TEXT_LIMIT`).
        where: ``(name, value)`` pairs printed as ``name=value`` in order (``file``, ``cluster``,
            ``component``, ``release``, ``key``); empty or ``None`` values are left out, each
            value is cut to :data:`FIELD_LIMIT` characters.
        allowed: printed as `` (allowed: …)`` when not ``None``/empty.
        fix: printed as `` fix: …`` when not ``None``.

    Returns:
        ``severity[id] name=value …: message (allowed: …) fix: …`` -- one line: every part passes
        :func:`mask_secrets` (credential-shaped values masked) and then :func:`one_line` (control,
        line-separator and bidirectional characters escaped).
    """
    text = f"{severity}[{one_line(mask_secrets(id), FIELD_LIMIT)}]"
    for name, value in where:
        if value:
            text += f" {name}={one_line(mask_secrets(value), FIELD_LIMIT)}"
    text += f": {one_line(mask_secrets(message), message_limit)}"
    if allowed:
        text += f" (allowed: {one_line(mask_secrets(allowed))})"
    if fix is not None:
        text += f" fix: {one_line(mask_secrets(fix))}"
    return text


class GpuclusterError(Exception):
    """Invalid user input; carries one or more :class:`Problem` s.

    Raise it with keyword arguments for a single problem (the message, then the fields of
    :class:`Problem` by name), or with ``problems=[...]``. ``str(err)`` renders every problem, one
    per line. ``TypeError`` when neither a message nor problems is given.
    """

    def __init__(self, message: str | None = None, /, **where: Any) -> None:
        # ``problems`` travels in ``where``: a ``**w`` of location strings then type-checks.
        problems: Sequence[Problem] | None = where.pop("problems", None)
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


def did_you_mean(name: object, known: Iterable[object]) -> str:
    """The start of a ``fix:`` for a mistyped key or name: ``"did you mean 'X'? "`` with ``X`` the
    closest of ``known`` to ``name`` (:func:`difflib.get_close_matches`, ratio at least 0.75), else
    ``""`` (no near miss). Used where the ``allowed:`` list is long enough to be cut."""
    import difflib  # only on the error path (a plan that succeeds does not import it)

    close = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.75)
    return f"did you mean '{close[0]}'? " if close else ""


def check_working_folder(command: str) -> None:
    """Refuse a working folder that no longer exists (removed after the shell entered it) or is
    no longer searchable: a command that finds its files from it (the cluster file, ``--out``,
    caches, relative paths) would fail deep inside with an ``OSError``.

    Args:
        command: the command as typed (``plan``, ``charts pull``), named in the fix.

    Raises:
        GpuclusterError: ``error[input] key=cwd``, naming the folder as the shell knows it (``PWD``).
    """
    import os

    try:
        os.getcwd()
    except OSError as err:  # FileNotFoundError: deleted; PermissionError: no longer searchable
        shell = os.environ.get("PWD")
        raise GpuclusterError(
            f"the working folder{f' {shell!r}' if shell else ''} cannot be used: "
            f"{err.strerror or type(err).__name__} (it was removed or made unreadable after the "
            "shell entered it)",
            key="cwd",
            fix=f"cd into an existing folder, then run gpucluster {command} again",
        ) from None
