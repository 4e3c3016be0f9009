"""Time for the upstream measurement: the as-of instant, and ages in days.

In: what the user typed for --as-of (a date, an ISO timestamp, or nothing) and unix
seconds read from git. Out: a timezone-aware UTC datetime, the text the record shows for
it, ISO dates and day counts. All times are UTC; "in the last N days" means
0 <= as_of - t < N days.
"""

from __future__ import annotations

from datetime import date, datetime, time, timezone

from evaluator.errors import UpstreamError

DAY = 86400

# A bare date stands for the whole day: its last instant in UTC. Kept to the microsecond
# (every other time is cut to the second) so that the record can still say "that day".
END_OF_DAY = time(23, 59, 59, 999999)


def end_of_day(day: date) -> datetime:
    return datetime.combine(day, END_OF_DAY, tzinfo=timezone.utc)


def parse_as_of(text: str | date | datetime | None) -> datetime:
    """A timezone-aware UTC datetime from "YYYY-MM-DD" (the end of that day), an ISO
    timestamp (exact; no zone means UTC), or None (now)."""
    if text is None:
        return datetime.now(timezone.utc).replace(microsecond=0)
    if isinstance(text, datetime):
        value = text
    elif isinstance(text, date):
        return end_of_day(text)
    else:
        try:
            # A date alone first: datetime.fromisoformat would read it as 00:00 and leave
            # out the commits of the day the user named.
            return end_of_day(date.fromisoformat(text.strip()))
        except ValueError:
            pass
        try:
            value = datetime.fromisoformat(text.strip())
        except ValueError:
            raise UpstreamError(
                f"--as-of {text!r} is not a date; pass YYYY-MM-DD or an ISO timestamp such as 2026-01-31T12:00:00+00:00"
            ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    value = value.astimezone(timezone.utc)
    return value if value.time() == END_OF_DAY else value.replace(microsecond=0)


def as_of_text(at: datetime) -> str:
    """How an as-of time is shown: the bare date for a whole day, else the ISO timestamp."""
    return at.date().isoformat() if at.time() == END_OF_DAY else at.isoformat()


def iso(t: int | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat()


def days(seconds: float) -> float:
    return round(seconds / DAY, 2)


def within(t: int, ts: int, n_days: int) -> bool:
    """Whether unix time t falls in the n_days before ts (t after ts does not)."""
    return 0 <= ts - t < n_days * DAY


def last_months(at: datetime, n: int) -> list[str]:
    """The n calendar months up to and including at's, "YYYY-MM", oldest first."""
    y, m = at.year, at.month
    out = []
    for _ in range(n):
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y, m - 1) if m > 1 else (y - 1, 12)
    return out[::-1]
