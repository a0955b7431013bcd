"""Reports as one self-contained HTML file (inline CSS and SVG, no script, no network).

Pages lead with the answer: a tree's divergences grouped by cause, then each
divergent call's verdict in words (cause, fields and first indices, the
divergent work items and reduce groups decoded), then where it changed: the
divergent CU parts enlarged with a few neighbours, expected beside actual at
one scale, every divergent work outlined and labelled. The full schedules
follow, collapsed. A diff page names what it compared and says the notes
every call shares once; within a size budget its pictures go to diverged
calls before resize-only ones, and what is left out names the command that
draws it, so a page over a whole tree stays small. ``show`` and
``check`` pages draw one schedule the same way.

One module per page: :mod:`.diff`, :mod:`.show`, :mod:`.check`, :mod:`.bisect`, on :mod:`.common`.
"""

from mla_golden.render.html.check import check_marks, render_check_page
from mla_golden.render.html.common import VERDICT_ROWS, CheckEntry, Entry, cause_group
from mla_golden.render.html.diff import render_diff_page
from mla_golden.render.html.show import render_show_page

__all__ = ["VERDICT_ROWS", "CheckEntry", "Entry", "cause_group", "check_marks", "render_check_page", "render_diff_page", "render_show_page"]
