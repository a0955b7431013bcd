"""Findings for people: text and one self-contained HTML page (JSON is ``Findings.to_dict``).

Both lead with the answer (did the planners diverge) and the causes: one
group per divergence signature, with its rule, its cause (``check`` on both
sides included) and its smallest reproducer. The page then names what was
compared, gives the notes once, and has each group collapsible with its
reproducer drawn zoomed to the CU parts it uses; regions and per-value
counts come last, folded away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mla_golden.call import Call
from mla_golden.geometry import moved_parts
from mla_golden.render.report import render_text as render_diff
from mla_golden.render.sanitize import html_text
from mla_golden.render.svg import draw
from mla_golden.render.views import diff_marks, focus, parts_of, schedule
from mla_golden.sweeper.driver import INCONCLUSIVE_SHARE, TOP_REASONS, Findings
from mla_golden.sweeper.evaluate import FAILED
from mla_golden.sweeper.groups import Group, Reproducer
from mla_golden.sweeper.regions import NOT_APPLICABLE, condition, listed
from mla_golden.sweeper.space import Point, default_space

#: Reproducers shown in full (text report and page); the JSON lists every one.
MAX_SHOWN = 20


#: A sweep's verdict in a word or two, for the page's title.
ANSWER = {"diverged": "diverged", "equal": "no divergence"}


def headline(findings: Findings) -> str:
    counts = findings.counts
    tally = ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) or "none ran"
    sound = f" ({len(findings.groups)} group(s), {findings.soundness})" if findings.soundness else ""
    verdict = {"diverged": f"DIVERGED{sound}:", "equal": "no divergence:"}.get(findings.verdict)
    verdict = verdict or f"INCONCLUSIVE: {findings.not_compared.phrase()};"
    budget = {"space": "the whole space", "cases": "the case budget", "time": "the time budget"}[findings.stopped_by]
    resumed = f", {findings.resumed} resumed from the journal" if findings.resumed else ""
    this_run = " (this run)" if findings.resumed else ""
    return (
        f"{verdict} {_sides(findings)} over {_space(findings)} (seed {findings.seed}): {len(findings.results)} cases ({tally}){resumed}, "
        f"{budget} in {findings.elapsed_s:.1f} s{this_run} ({findings.planner_s:.1f} s in the planners{_startup(findings)})"
    )


def _startup(findings: Findings) -> str:
    """``, 2.3 s starting workers`` where starting them took a noticeable share (worker processes import torch)."""
    return f", {findings.startup_s:.1f} s starting workers" if findings.startup_s >= 0.1 else ""


def _sides(findings: Findings) -> str:
    """``A reference@aded0f84 vs B aiter-src:PATH (aiter-src of PATH at 1a2b3c4d)``: each planner as given, with its
    label where that says more (``reference@aded0f84`` is labelled ``reference aded0f84``: nothing more)."""

    def side(name: str, spec: str, label: str) -> str:
        return f"{name} {spec}" if label.replace(" ", "@") == spec or label == spec else f"{name} {spec} ({label})"

    return f"{side('A', findings.a, findings.labels[0])} vs {side('B', findings.b, findings.labels[1])}"


def _space(findings: Findings) -> str:
    """The space file as given; the shipped one by name (its path is the package's, of no use to a reader)."""
    return "the default space" if findings.space == str(default_space()) else findings.space


def not_compared_lines(findings: Findings) -> list[str]:
    """How many cases were not compared and the top reasons why (nothing when every case was compared).

    Past :data:`~mla_golden.sweeper.driver.INCONCLUSIVE_SHARE` the sweep is inconclusive: the headline
    says so, or, beside divergences, this line does.
    """
    missing = findings.not_compared
    defined = (
        [f"compared where defined: {missing.where_defined} case(s) undefined on both sides, equal wherever defined "
         "and undefined at the same elements"] if missing.where_defined else []
    )  # fmt: skip
    if not missing.total:
        return defined
    share = f"{INCONCLUSIVE_SHARE:.0%}"
    if not missing.inconclusive:
        lead = f"not compared: {missing.phrase()} (within the {share} a sweep may leave uncompared)"
    elif findings.diverged:
        lead = f"INCONCLUSIVE beyond the divergences: {missing.phrase()}, more than {share} of the cases"
    else:
        compared = missing.cases - missing.total
        lead = f"more than {share} of the cases were not compared: the {compared} compared cannot stand for the space"
    lines = [lead + "; top reasons:"]
    lines += [f"  {verdict} {n}: {reason}" for verdict, reason, n in missing.reasons[:TOP_REASONS]]
    return lines + defined


def _point_line(rep: Reproducer) -> str:
    p = rep.point
    env = ",".join(f"{k}={v}" for k, v in p["env"].items() if v is not None)
    shape = f"{p['arch']}:{p['cu_num']} heads {p['heads']}"
    point = Point.from_dict(p)
    if point.op == "get_mla_metadata_v1":
        shape += f" {p['q_dtype']}/{p['kv_dtype']} qlen {p['qlen']} page {p['page_size']} split {p['max_split_per_batch']}"
        shape += "" if point.topk < 0 else f" topk {point.topk}"
    else:
        shape += f" tiles {point.tiles}"
    shape += "" if point.causal else " noncausal"
    return f"{p['op']} {shape} {env} lens {p['seq_lens']}".replace("  ", " ")


#: What a shrink that ran out of budget ran out of, as reports say it.
_RAN_OUT = {"evals": "its evaluation budget", "time": "the --time budget"}


def _exhausted(rep: Reproducer) -> str:
    """``; NOT minimal: ...`` when the reproducer is not shown minimal (its shrink ran out of budget, it was tried at
    another case's lengths) or is not minimal along a kept parameter; else nothing."""
    text = f"; NOT minimal: shrinking ran out of {_RAN_OUT.get(rep.exhausted, rep.exhausted)}" if rep.exhausted else ""
    if rep.seeded and not rep.exhausted:
        text += "; NOT shown minimal: tried at the lengths another case of its group shrank to"
    if rep.loose:
        text += f"; NOT minimal along {', '.join(v.split()[0] for v in rep.loose)}: {', '.join(rep.loose)} diverges the same way"
    return text


def _notes(findings: Findings) -> list[str]:
    """Shrinks cut short, and why some cases were not judged (failed / skipped / undefined), one line per distinct reason."""
    lines = [
        f"shrinking ran out of {_RAN_OUT.get(what, what)} on {n} divergent case(s): their reproducers may not be minimal"
        for what, n in sorted(findings.shrink_exhausted.items())
    ]
    shown = set(findings.not_compared.reasons[:TOP_REASONS])
    lines += [f"{verdict} {n}: {reason}" for verdict, reason, n in findings.not_compared.reasons[:5] if (verdict, reason, n) not in shown]
    failed = Counter(r.detail for r in findings.results if r.status == FAILED)
    lines += [f"{FAILED} {n}: {reason}" for reason, n in failed.most_common(5)]
    return lines


def _group_lines(group: Group) -> list[str]:
    rep = group.reproducer
    lens = rep.point["seq_lens"]
    return [
        f"  [{group.cls}] {', '.join(group.fields) or group.kind} ({group.kind}): {group.cases} case(s), "
        f"{len(group.minimal_calls)} distinct minimal call(s)",
        f"    cause: {group.cause()}",
        *([f"    soundness: {group.judged()}"] if group.soundness is not None else []),
        f"    where its cases lie: {group.rule.describe() if group.rule else 'no judged cases'}",
        f"    reproducer: {rep.key} ({len(lens)} request(s), {sum(lens)} KV tokens{_exhausted(rep)})",
    ]


def kernel_paths(findings: Findings) -> str:
    """``decode kernel paths: A serial/native 120, parallel/native 80; B ...`` (empty when no side says)."""
    sides = [f"{side} " + ", ".join(f"{path} {n}" for path, n in paths.items())
             for side, paths in findings.kernel_paths.items() if paths]  # fmt: skip
    return "decode kernel paths (cases): " + "; ".join(sides) + " (a call that raised or is undefined has none)" if sides else ""


def _regions(findings: Findings) -> list[str]:
    regions = findings.summary.regions
    return ["regions:", *(f"  {region.describe()}" for region in regions)] if regions else []


def render_text(findings: Findings, *, quiet: bool = False) -> str:
    """The report; ``quiet``: the verdict and the regions only (and, when inconclusive, the top reasons why)."""
    lines = [headline(findings)]
    if quiet:
        lines += not_compared_lines(findings) if findings.not_compared.inconclusive else []
        return "\n".join(lines + _regions(findings))
    lines += not_compared_lines(findings)
    if kernel_paths(findings):
        lines.append(kernel_paths(findings))
    if findings.groups:
        lines.append(f"causes ({len(findings.groups)} group(s) of divergent cases, one reproducer each):")
        for group in findings.groups:
            lines += _group_lines(group)
    lines += _regions(findings)
    never = findings.summary.never()
    if never:
        lines.append("never diverged: " + "; ".join(condition(axis, listed(values)) for axis, values in never.items()))
    if findings.diverged:
        lines.append("diverged / cases per value:")
        for axis, values in findings.summary.marginals.items():
            shown = [f"{value} {d}/{n}" for value, (n, d) in values.items() if value != NOT_APPLICABLE]
            if len(shown) > 1:
                lines.append(f"  {axis}: " + ", ".join(shown))
    lines += _notes(findings)
    if findings.reproducers:
        if findings.out:
            calls = {r.written[0] for r in findings.results if r.written} | {r.written[0] for r in findings.reproducers if r.written}
            where = f"{findings.out}/a vs {findings.out}/b, with every other distinct minimal call: {len(calls)} in all"
        else:
            where = "not written (no --out)"
        lines.append(f"minimal reproducers ({len(findings.reproducers)}, one per group; goldens {where}):")
        for rep in findings.reproducers[:MAX_SHOWN]:
            lines.append(f"  {rep.key}  [{rep.kind}; stands for {rep.cases} case(s){_exhausted(rep)}]")
            lines.append(f"    {_point_line(rep)}")
            lines.append(f"    {rep.detail}" + ("" if rep.confirmed else "  (NOT confirmed by the full capture)"))
        if len(findings.reproducers) > MAX_SHOWN:
            lines.append(f"  ... {len(findings.reproducers) - MAX_SHOWN} more in --format json")
        if findings.out:
            lines.append(f"show them: mla-golden diff {findings.out}/b --against {findings.out}/a")
    return "\n".join(lines)


_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px} h2{font-size:15px;margin-top:28px}
.verdict{font-size:16px;font-weight:bold} .diverged{color:#b00020} .equal{color:#2a7a2a} .inconclusive{color:#a65e00}
table td,table th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
pre{background:#f6f6f6;padding:8px;overflow:auto;max-width:1300px;font-size:11px;white-space:pre-wrap}
details.group{border-top:1px solid #ddd;padding:4px 0} details.group summary{cursor:pointer;font-weight:bold}
p,code{overflow-wrap:anywhere} .note{color:#555}
.pair{display:flex;gap:16px;flex-wrap:wrap} table.groups td{overflow-wrap:anywhere;max-width:520px} table.groups td:first-child{white-space:nowrap} rect.work.divergent{stroke:#e00000;stroke-width:1.5}
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_text(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _groups_table(findings: Findings) -> list[str]:
    """The causes, one row per group, each linking to its reproducer below."""
    if not findings.groups:
        return []
    rows = []
    for i, group in enumerate(findings.groups):
        rep = group.reproducer
        rule = group.rule.describe() if group.rule else "-"
        key = f"<a href='#rep-{i}'>{html_text(rep.key)}</a>"
        rows.append(
            f"<tr><td>{html_text(group.cls)}</td><td>{html_text(group.cause())}</td><td>{group.cases}</td>"
            f"<td>{html_text(rule)}</td><td>{key} ({len(rep.point['seq_lens'])} request(s), "
            f"{sum(rep.point['seq_lens'])} KV tokens{html_text(_exhausted(rep))})</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("class", "cause", "cases", "where (rule)", "reproducer"))
    return [f"<h2>Causes ({len(findings.groups)})</h2>", f"<table class='groups'><tr>{head}</tr>{''.join(rows)}</table>"]


def _compared(findings: Findings) -> str:
    """What the sweep compared: the two planners and what they ran, the space, devices, heads and dtypes."""
    marginals = findings.summary.marginals

    def values(axis: str) -> str:
        found = sorted(v for v in marginals.get(axis, {}) if v != NOT_APPLICABLE)
        return ", ".join(found) or "-"

    return (
        f"{_sides(findings)}; space {_space(findings)}, seed {findings.seed}; devices {values('device')}; heads {values('heads')}; "
        f"decode dtypes {values('dtype')}"
    )


def _used_parts(a: Call, b: Call) -> list[int] | None:
    """The CU parts worth drawing (None when that is all of them: draw everything).

    Where the two sides part (divergent works, moved CU parts) with their
    neighbours, as a diff page enlarges them; for a reproducer whose works do
    not differ (a sizing-only change), the parts either side gives work to.
    """
    per_cu = [schedule(c) for c in (a, b)]
    total = max(len(p) for p in per_cu)
    marks = diff_marks(a, b)
    divergent = {cu for p in per_cu for cu in parts_of(p, marks)} | moved_parts(a, b)
    if divergent:
        rows, _ = focus(divergent, total)
        return rows if len(rows) < total else None
    used = {cu for p in per_cu for cu, works in enumerate(p) if works}
    return sorted(used) if 0 < len(used) < total else None


def _group_section(i: int, group: Group, drawn: bool) -> str:
    """One group, collapsible: its rule, cause, reproducer call, the pair drawn zoomed, the diff."""
    rep = group.reproducer
    lens = rep.point["seq_lens"]
    summary = (f"{html_text(group.cls)}: {html_text(', '.join(group.fields) or group.kind)} "
               f"({html_text(group.kind)}) · {group.cases} case(s)")  # fmt: skip
    body = [
        f"<p><b>cause</b>: {html_text(group.cause())}<br>"
        + (f"<b>soundness</b>: {html_text(group.judged())}<br>" if group.soundness is not None else "")
        + "<b>where</b>: "
        f"{html_text(group.rule.describe() if group.rule else 'no judged cases')}<br>"
        f"<b>reproducer</b> <code>{html_text(rep.key)}</code>, {len(lens)} request(s), {sum(lens)} KV tokens"
        f"{html_text(_exhausted(rep))}; {len(group.minimal_calls)} distinct minimal call(s) in the group<br>"
        f"{html_text(_point_line(rep))}<br>{html_text(rep.detail)}</p>"
    ]
    if drawn and rep.calls is not None and rep.diff is not None:
        a, b = rep.calls
        rows = _used_parts(a, b)
        note = "every CU part" if rows is None else f"{len(rows)} CU part(s): where the sides part, with neighbours (else the parts in use)"
        pictures = draw({"A": a, "B": b}, diff_marks(a, b), rows, enlarged=rows is not None)
        body.append(f"<p class='note'>drawn: {note}</p><div class='pair'>" + "".join(pictures.values()) + "</div>")
        body.append(f"<pre>{html_text(render_diff(rep.diff))}</pre>")
    elif not drawn:
        body.append(f"<p class='note'>not drawn (the page draws the first {MAX_SHOWN} groups)</p>")
    # the links aim inside the fold: following one opens the group (a browser reveals a closed <details> holding
    # the target) and scrolls to its reproducer, no script needed
    return f"<details class='group' id='group-{i}'><summary>{summary}</summary><div id='rep-{i}'>{''.join(body)}</div></details>"


def render_html(findings: Findings) -> str:
    """One page, inline CSS and SVG, no network: verdict and causes first, each group collapsible below."""
    cls = findings.verdict
    paths = kernel_paths(findings)
    missing = not_compared_lines(findings)
    tally = ", ".join(f"{n} {status}" for status, n in sorted(findings.counts.items(), key=lambda kv: -kv[1]))
    title = f"mla-golden sweep: {ANSWER.get(cls, 'inconclusive')} ({tally})"  # the verdict in the tab too
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html_text(title)}</title><style>{_CSS}</style></head><body>",
        "<h1>mla-golden sweep</h1>",
        f"<p class='verdict {cls}'>{html_text(headline(findings))}</p>",
        f"<p class='compared'>compared: {html_text(_compared(findings))}</p>",
        "<p class='not-compared'>" + "<br>".join(html_text(line) for line in missing) + "</p>" if missing else "",
        f"<p>{html_text(paths)}</p>" if paths else "",
        *_groups_table(findings),
    ]
    notes = _notes(findings)
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>")
    if findings.groups:
        drawn = min(len(findings.groups), MAX_SHOWN)
        parts.append(f"<h2>Groups ({len(findings.groups)}; reproducers drawn {drawn} of {len(findings.groups)}, "
                     "behaviour changes first)</h2>")  # fmt: skip
        if findings.out:
            parts.append(f"<p>Goldens: <code>mla-golden diff {html_text(str(findings.out))}/b --against {html_text(str(findings.out))}/a</code></p>")
        parts += [_group_section(i, group, i < MAX_SHOWN) for i, group in enumerate(findings.groups)]
    parts += [
        "<details class='regions'><summary>Regions and per-parameter counts</summary>",
        _table(["where", "diverged / cases", "extent"], [
            (r.scope(), f"{r.diverged} / {r.cases}",
             "every batch" if r.everywhere else f"batch {min(r.batches)}..{max(r.batches)}")
            for r in findings.summary.regions
        ]) if findings.summary.regions else "<p>no regions</p>",
        _table(["parameter", "value", "cases", "diverged"], [
            (axis, value, str(n), f"{d} ({d / n:.0%})") for axis, values in findings.summary.marginals.items()
            for value, (n, d) in values.items() if value != NOT_APPLICABLE
        ]),
        "</details>",
    ]  # fmt: skip
    parts.append("</body></html>")
    return "".join(parts)
