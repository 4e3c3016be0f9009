"""Who works on the measured branch: active and new authors, the bus factor, the top authors.

In: the commits up to as_of and the history `Window`. Out: `UpstreamAuthors`, plus the
count of people active in the last 90 days (a headline field, which the caller bounds).
People are keyed by their e-mail after `.mailmap` (so one person's several addresses
join where `.mailmap` says so), shown by the name on their newest commit, and bots (a
"[bot]" name or address) are left out. Bus factor: the fewest authors whose commits add
up to at least half of the last 365 days' human commits, most active first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from evaluator.results import AuthorCommits, UpstreamAuthors

from .clock import within
from .history import Commit, Window


def measure_authors(commits: Sequence[Commit], win: Window) -> tuple[UpstreamAuthors, int]:
    """The authors' record, and how many people committed in the last 90 days."""
    ts = win.ts
    people = [c for c in commits if not c.bot]
    first_seen: dict[str, int] = {}
    display: dict[str, tuple[int, str]] = {}
    for c in people:
        first_seen[c.author] = min(first_seen.get(c.author, c.time), c.time)
        if c.author not in display or c.time > display[c.author][0]:
            display[c.author] = (c.time, c.name or c.email)
    names = {a: shown for a, (_, shown) in display.items()}
    active_90 = {c.author for c in people if within(c.time, ts, 90)}
    year = Counter(c.author for c in people if within(c.time, ts, 365))
    new_90 = sorted((a for a in active_90 if within(first_seen[a], ts, 90)), key=names.__getitem__)
    ranked = sorted(year.items(), key=lambda kv: (-kv[1], names[kv[0]]))
    bus = _bus_factor(ranked)
    active_365d = win.exact("authors_365d", len(year), 365)
    shallow = win.horizon is not None
    if shallow:
        # Anyone whose earlier commits were cut off looks new: not even a bound.
        win.limit("authors_new_90d", "unknown")
        win.limit("authors_total", "lower bound")
    year_cut = not win.complete(365)
    if year_cut:
        win.limit("bus_factor", "unknown")
        win.limit("top_authors_365d", "lower bounds")
    return UpstreamAuthors(
        total=len(first_seen),
        active_365d=active_365d,
        new_90d=None if shallow else len(new_90),
        new_90d_names=() if shallow else tuple(names[a] for a in new_90),
        bus_factor=None if year_cut else len(bus),
        bus_factor_names=() if year_cut else tuple(names[a] for a in bus),
        top_365d=tuple(AuthorCommits(names[a], n) for a, n in ranked[:10]),
    ), len(active_90)


def _bus_factor(ranked: list[tuple[str, int]]) -> list[str]:
    """The first authors of `ranked` (most commits first) who together made half the commits."""
    bus, total, acc = [], sum(n for _, n in ranked), 0
    for a, n in ranked:
        if 2 * acc >= total:
            break
        bus.append(a)
        acc += n
    return bus
