"""Strings from a golden or a plug-in, made harmless for the sink they are written to.

A golden's key, planner name, notes and error message, and a plug-in's name
and messages, are anyone's text: a hostile one may hold newlines, terminal
escapes (ANSI CSI, OSC 52 clipboard writes), characters XML forbids, rich
markup, or a GitHub workflow command (``::add-mask::``, ``::stop-commands::``,
or the older ``##[add-mask]`` form that the runner finds anywhere in a line).
Each sink has one neutraliser here, and every writer of that sink uses it:

- :func:`inline`: one line of plain text (terminal, log, text reports, JUnit names);
- :func:`visible`: text a console writes, several lines of it;
- :func:`log_lines`: text a CI runner reads as workflow commands, line by line;
- :func:`github_data`, :func:`github_property`: a workflow command's message and properties;
- :func:`xml_text`: multi-line text inside an XML document;
- :func:`markdown`, :func:`markdown_code`: a markdown table cell, as text or as code (the step summary);
- :func:`html_text`: text in an HTML page or SVG picture;
- :func:`json_text`: a JSON document that a CI log shows.

rich markup is not neutralised here: the consoles print with markup off.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

#: Characters :func:`inline` escapes: every one str.isprintable() refuses but the space (controls, escapes,
#: line and paragraph separators, surrogates, unassigned code points and other spaces).
_UNPRINTABLE = re.compile(r"[^ -~]")
#: What XML 1.0 allows in a document (https://www.w3.org/TR/xml/#charsets).
_XML_ILLEGAL = re.compile("[^\t\n\r -\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: A line a runner takes for a workflow command: ``::`` after optional blanks (GitHub's TryParseV2 trims them);
#: the runner's lines end at CR as well as LF.
_COMMAND_LINE = re.compile(r"(\A|[\r\n])([^\S\r\n]*):(?=:)")
#: The older form, ``##[command]``, which the runner looks for anywhere in a line.
_LEGACY_COMMAND = "##["
#: ASCII punctuation, each of which CommonMark lets a backslash escape.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


#: The escapes that read better than their code.
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _escaped(text: object, keep: str = "") -> str:
    """``text`` with every unprintable character but those in ``keep`` written as its escape."""
    text = str(text)
    if text.isascii() and text.isprintable():  # the usual case: nothing to escape
        return text
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group().isprintable() or m.group() in keep else _escape(m.group()), text)


def inline(text: object) -> str:
    """``text`` as one line that does nothing but show: every unprintable character (newline, CR, ESC, BEL,
    other controls, separators, surrogates) written as an escape (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return _escaped(text)


def visible(text: str) -> str:
    """Multi-line text for a terminal: :func:`inline`'s escapes for every unprintable character but newline and
    tab. What a console writes passes through this (a string no caller made one line still cannot steer it)."""
    return _escaped(text, "\n\t")


def log_lines(text: str) -> str:
    """``text`` as lines no CI runner takes for a workflow command: a line's leading ``::`` becomes ``\\x3a:``
    and ``##[`` becomes ``##\\x5b`` (the tool's own annotations are written apart, not through this)."""
    if "::" not in text and _LEGACY_COMMAND not in text:
        return text
    return _COMMAND_LINE.sub(r"\1\2\\x3a", text).replace(_LEGACY_COMMAND, "##\\x5b")


def github_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped as GitHub's toolkit does (``%25``, ``%0D``, ``%0A``),
    every other unprintable character as :func:`inline` writes it."""
    return _escaped(text, "\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``): :func:`github_data` plus ``:`` and ``,``."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def xml_text(text: str) -> str:
    """Multi-line text for an XML document: the characters XML 1.0 forbids written as escapes (ElementTree
    escapes ``&``, ``<`` and ``>`` but writes a forbidden character as it is, and the document no longer parses)."""
    return _XML_ILLEGAL.sub(lambda m: _escape(m.group()), text)


def markdown(text: str) -> str:
    """One markdown table cell that renders as the text it holds: :func:`inline`, and every ASCII punctuation
    mark backslash-escaped, so no ``|`` ends the cell and no link, image, code span or HTML tag forms."""
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", inline(text))


def markdown_code(text: str) -> str:
    """One markdown table cell holding ``text`` as a code span: :func:`inline`, ``|`` escaped (GitHub's tables
    split on it even inside code), fenced by more backticks than the text holds in a row."""
    shown = inline(text).replace("|", "\\|")
    fence = "`" * (1 + max(map(len, re.findall("`+", shown)), default=0))
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def html_text(text: object) -> str:
    """Text for an HTML page (a body, an attribute, a ``<pre>``): :func:`visible`, then ``&``, ``<``, ``>`` and
    quotes escaped."""
    return html.escape(visible(str(text)))


def json_text(document: Any, *, indent: int | None = 2) -> str:
    """``document`` as JSON for a log: ``json.dumps`` (its strings escape every control character), with ``##[``
    written ``##\\u005b``, which decodes to the same string (outside strings, JSON holds no ``#``)."""
    return json.dumps(document, indent=indent, default=str).replace(_LEGACY_COMMAND, "##\\u005b")
