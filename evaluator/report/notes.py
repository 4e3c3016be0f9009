"""Notes and flags other stages write in English, in the report's language.

In: the "; "-joined notes the bench, soak, upstream, baseline and portability stages
attach to their results, and the flags attached to numbers ("unstable", "contradicts the
Amdahl estimate (...)"). Out: the same text in the report's language, piece by piece:
each piece a pattern knows is rebuilt from templates/i18n (notes.<kind>, flags.<flag>)
with the numbers it carried; a piece no pattern knows is shown as written, so a stage
that rewords a note degrades to English rather than losing it. Also which flags make a
number doubtful (`_op_flags`, `_e2e_flags`), for the cards and tables that grey it.
"""

from __future__ import annotations

import re

from ..results import OpBench, RunResult, Timing
from .strings import Strings, finite


# Notes the bench and upstream stages write in English, as (kind, pattern): the i18n
# string notes.<kind> takes the pattern's named groups. A note no pattern knows is shown
# as written, so a reworded note degrades to English instead of disappearing.
NOTE_PATTERNS = [
    (kind, re.compile(rx))
    for kind, rx in (
        ("soak_drift", r"latency drifted (?P<pct>[+-]?[\d.]+)% from the first to the last window"),
        ("soak_reserved", r"reserved CUDA memory grew by (?P<mb>[\d.]+) MB"),
        ("soak_memory", r"memory grew by (?P<mb>[\d.]+) MB"),
        ("soak_throttled", r"clock throttled: (?P<reasons>[^;]+)"),
        ("soak_clock_fell", r"SM clock fell from (?P<a>\d+) to (?P<b>\d+) MHz"),
        (
            "up_shallow",
            r"shallow clone: (?P<cut>.+?), limited metrics are listed in details\.limited "
            r"\(run `git fetch --unshallow` for full history\)",
        ),
        ("up_shallow_complete", r"shallow clone, but the measured branch's history is complete"),
        (
            "up_behind",
            r"local (?P<branch>\S+) is (?P<n>\d+) commits behind its remote-tracking branch; pull, or "
            r"pass --branch origin/<name>, to measure the newer history",
        ),
        (
            "up_stale_fetched",
            r"the newest commit is (?P<days>\d+) days old, and it was last fetched (?P<fetched>\d+) "
            r"days ago: if this clone is not fresh, run `git fetch` there \(or pass the URL\) before "
            r"trusting these numbers",
        ),
        (
            "up_stale",
            r"the newest commit is (?P<days>\d+) days old: if this clone is not fresh, run `git fetch` "
            r"there \(or pass the URL\) before trusting these numbers",
        ),
        (
            "up_refresh",
            r"could not refresh the cached clone of (?P<url>\S+) \((?P<why>.*?)\); used the copy last "
            r"updated (?P<date>\d{4}-\d{2}-\d{2})",
        ),
        (
            "up_fork_not",
            r"fork drift not measured: (?P<why>upstream is a shallow clone|the fork is a shallow clone) "
            r"\(run `git fetch --unshallow` there\)",
        ),
        (
            "up_fork_reason",
            r"(?P<why>upstream is a shallow clone|the fork is a shallow clone); run `git fetch "
            r"--unshallow` there",
        ),
        ("up_none", r"no --upstream (?:repository was )?given"),
        (
            "cross_platform",
            r"cross-platform: candidate on (?P<cand>\S+) \((?P<cand_name>.*?)\) vs reference on "
            r"(?P<ref>\S+) \((?P<ref_name>.*?)\)",
        ),
        ("rule", r"a change counts beyond max\((?P<floor>[\d.]+%), (?P<k>[\d.]+) x combined spread\)"),
        ("soak_eager", r"the model could not be captured in a CUDA graph: soaked eagerly, so host jitter is included"),
        (
            "soak_own_capture",
            r"soaked on the model's own capture path \(its eager path did not capture: (?P<why>[^)]*)\)",
        ),
        (
            "soak_filled_capture",
            r"soaked with the numbers the model copies to the device each call filled there instead "
            r"\(its eager path did not capture: (?P<why>[^)]*)\)",
        ),
        # flags and timer notes the bench stage attaches to numbers
        ("roof", r"(?P<side>TileLang|PyTorch) faster than the (?P<roof>compute|memory) roof allows"),
        (
            "amdahl",
            r"contradicts the Amdahl estimate \((?P<est>[\d.]+)x from the op speedups, measured "
            r"(?P<lo>[\d.]+)-(?P<hi>[\d.]+)x\)",
        ),
        (
            "amdahl_in_model",
            r"contradicts the Amdahl estimate \((?P<est>[\d.]+)x from the operator times inside the "
            r"model, measured (?P<lo>[\d.]+)-(?P<hi>[\d.]+)x\)",
        ),
        ("capture_failed", r"graph capture failed \((?P<why>[^;]*)\)"),
        (
            "stalled_alone",
            r"stalled: (?P<side>TileLang|PyTorch) (?P<t_run>[\d.]+ (?:ms|us)) in the rounds against "
            r"(?P<t_other>[\d.]+ (?:ms|us)) when timed again alone",
        ),
        (
            "stalled_profiled",
            r"stalled: (?P<side>TileLang|PyTorch) (?P<t_run>[\d.]+ (?:ms|us)) in the rounds against "
            r"(?P<t_other>[\d.]+ (?:ms|us)) (?:for every call of this shape )?in the profiled forward pass",
        ),
        (
            "stalled_tuner",
            r"stalled: (?P<side>TileLang|PyTorch) (?P<t_run>[\d.]+ (?:ms|us)) in the rounds against "
            r"(?P<t_other>[\d.]+ (?:ms|us)) when the tuner timed this config",
        ),
        (
            "no_signal_again",
            r"the reference carries no signal at this input \((?P<what>[^)]*)\); inputs drawn with "
            r"another seed gave none either",
        ),
        (
            "no_signal_once",
            r"the reference carries no signal at this input \((?P<what>[^)]*)\); the inputs have "
            r"nothing to draw again",
        ),
        ("no_signal", r"the reference carries no signal at this input \((?P<what>[^)]*)\)"),
        ("launch_gaps", r"the device number includes launch gaps"),
        (
            "own_capture",
            r"graph captured on the model's own capture path \(its eager path did not capture: "
            r"(?P<why>[^)]*)\): the device number is of the program the model runs while captured, the "
            r"eager view's of the one it runs eagerly",
        ),
        (
            "filled_capture",
            r"graph captured with the numbers the model copies to the device each call filled there "
            r"instead, the same values \(its eager path did not capture: (?P<why>[^)]*)\)",
        ),
        (
            "compile_path",
            r"the model runs another program under torch\.compile than eagerly \(it asks "
            r"torch\.compiler\.is_compiling\(\)\): it (?P<diff>.+?); torch\.compile's time is of "
            r"that program",
        ),
        (
            "timer_disagree",
            r"(?P<side>TileLang|PyTorch): graph replay (?P<a>[\d.]+) µs vs profiler kernel time "
            r"(?P<b>[\d.]+) µs per call",
        ),
        ("view_eager", r"host path: each forward synchronised, launches included"),
        ("view_router", r"the router itself adds (?P<ms>[\d.]+) ms per forward"),
        (
            "view_captured",
            r"graph replay runs (?P<a>[\d.]+) ms of kernels \((?P<n>\d+) kernels\) against (?P<b>[\d.]+) ms "
            r"eagerly for the unmodified model: the model takes another path while a CUDA graph is "
            r"captured \(transformers counts a capturing stream as tracing\), and graph replay times "
            r"that path on both sides; the eager view times the eager path",
        ),
        (
            "view_gap",
            r"graph replay (?P<a>[\d.]+) ms vs kernel sum (?P<b>[\d.]+) ms for the unmodified model: the "
            r"difference is device time between kernels \(many small launches\), which graph replay "
            r"includes and the kernel sum does not",
        ),
        ("view_cpu", r"interleaved rounds"),
        (
            "alone_ops_faster",
            r"routing (?P<fam>\w+) alone makes the model (?P<x>[\d.]+)x end to end \[(?P<lo>[\d.]+)-"
            r"(?P<hi>[\d.]+)\] although its operators run at (?P<ops>[\d.]+)x PyTorch's speed inside the "
            r"model \(profiled\): the time it adds between operators outweighs what its kernels save; "
            r"leaving (?P=fam) to PyTorch would be faster",
        ),
        (
            "alone_slower",
            r"routing (?P<fam>\w+) alone makes the model (?P<x>[\d.]+)x end to end \[(?P<lo>[\d.]+)-"
            r"(?P<hi>[\d.]+)\]; leaving (?P=fam) to PyTorch would be faster",
        ),
        ("view_dropped", r"disturbed rounds dropped"),
        # what the torch.compile side notes (evaluator/compiled.py, bench.compiled_record)
        (
            "compile_cache",
            r"(?P<hits>\d+) of (?P<total>\d+) (?P<graphs>graphs?) came from Inductor's on-disk cache: "
            r"(?P<s>[\d.]+) s is a warm compile, not a cold one",
        ),
        ("compile_breaks", r"(?P<n>\d+) (?P<breaks>graph breaks?) \((?P<why>.*?)\): those parts ran eagerly"),
        ("compiled_unstable", r"unstable \(spread (?P<pct>[+-]?[\d.]+)%\)"),
        ("compiled_differs", r"outputs differ from PyTorch eager: (?P<why>[^;]*)"),
        # how the measured ceilings were taken (hardware.measure_ceilings)
        ("ceilings", r"torch (?P<torch>\S+): copy of (?P<mib>\d+) MiB, (?P<n>\d+)\^3 matmul in (?P<dtype>\w+)"),
        # what the tuner records for a candidate it did not time (tuning.py, kernels' limits)
        ("cand_budget", r"tuning budget of (?P<s>[\d.]+)s spent"),
        ("cand_cached", r"reused from the tuning cache"),
        ("cand_stack", r"(?P<fam>\w+): local tiles need (?P<bytes>\d+) B of stack"),
    )
]
# Segments of baseline.compare's note the report replaces with its own words (counts
# come from the changes, causes from the filtered environment changes).
DROPPED_NOTES = re.compile(
    r"^(likely causes: .*|(?:\d+ (?:regression|improvement|unchanged|new|gone)"
    r"(?:, )?)+|nothing to compare|NOT COMPARABLE: .*)$"
)
# The reasons evaluator/portability/ gives for a cell, as (kind, pattern) for notes.<kind>: a
# target's limit, a missing backend or matrix-core dtype. Compiler errors are shown as
# TileLang wrote them.
PORT_PATTERNS = [
    (kind, re.compile(rx))
    for kind, rx in (
        ("port_uses", r"uses (?P<kb>[\d.]+ KB) of shared memory"),
        (
            "port_allows_req",
            r"(?P<target>[^\s;]+) allows (?P<kb>[\d.]+ KB) of (?P<what>LDS|shared memory) per "
            r"(?P<unit>workgroup|block) \(the lowered kernel itself requests (?P<req>[\d.]+ KB)\)",
        ),
        (
            "port_allows",
            r"(?P<target>[^\s;]+) allows (?P<kb>[\d.]+ KB) of (?P<what>LDS|shared memory) per "
            r"(?P<unit>workgroup|block)",
        ),
        ("port_requests", r"the lowered kernel requests (?P<kb>[\d.]+ KB) of shared memory"),
        ("port_threads", r"launches (?P<n>\d+) threads per block"),
        ("port_max_threads", r"(?P<target>[^\s;]+) allows (?P<n>\d+)(?=;|$)"),
        (
            "port_no_dtype",
            r"(?P<target>[^\s;']+)'s (?P<cores>.+?) take no (?P<dtype>\w+): T\.gemm lowered to scalar "
            r"FMA loops",
        ),
        (
            "port_no_mma",
            r"no matrix-core instruction for (?P<dtype>\w+) on (?P<arch>\S+): T\.gemm lowered to scalar "
            r"FMA loops",
        ),
        (
            "port_no_backend",
            r"no TileLang backend installed for (?P<kind>\w+): TileLang (?P<version>\S+) here has no "
            r"'(?P<target_kind>[^']+)' target kind \((?P<what>.+) provides it\)",
        ),
        (
            "port_instruction",
            r"T\.gemm lowered to (?P<got>\S+), not (?P<target>[^\s']+)'s (?P<want>\S+): speed "
            r"measured elsewhere does not carry over",
        ),
    )
]
# Words inside a matched note that are themselves translated (notes.<key>).
_NOTE_WORDS = {
    "upstream is a shallow clone": "why_up_shallow",
    "the fork is a shallow clone": "why_fork_shallow",
    "compute": "word_compute",
    "memory": "word_memory",
    "shared memory": "word_smem",
    "LDS": "word_lds",
    "block": "word_block",
    "workgroup": "word_workgroup",
    "MetaX's TileLang fork for MACA": "word_metax_fork",
}


def word_in_words(value: str, t: Strings) -> str:
    """A word or phrase a note carries, in the report's language where the strings know it
    (notes.word_*, a target's matrix cores), else as written."""
    if value in _NOTE_WORDS:
        return t(f"notes.{_NOTE_WORDS[value]}")
    return mapped("portability.cores", value, t)


def mapped(table: str, value: str, t: Strings) -> str:
    """`value` looked up in the string table `table` (a mapping from the English words the
    product writes to the language's), or `value` itself when the table lacks it."""
    words = t.raw(table) if t.has(table) else {}
    return str(words.get(value, value)) if isinstance(words, dict) else value


def notes_in_words(
    text: str, t: Strings, drop: re.Pattern | None = None, patterns: list[tuple[str, re.Pattern]] | None = None
) -> str:
    """A "; "-joined note in the report's language, piece by piece. A piece a pattern
    knows may be followed by "; " or ", " (flags are listed with commas); a piece no
    pattern knows runs to the next "; " and is shown without a separator left on it."""
    out: list[str] = []
    pos = 0
    text = text or ""
    while pos < len(text):
        for kind, rx in patterns if patterns is not None else NOTE_PATTERNS:
            m = rx.match(text, pos)
            if m:
                kw = {k: word_in_words(v, t) if v else "" for k, v in m.groupdict().items()}
                out.append(t(f"notes.{kind}", **kw))
                pos = m.end()
                if text.startswith(", ", pos):
                    pos += 2
                break
        else:
            nxt = text.find("; ", pos)
            end = len(text) if nxt < 0 else nxt
            piece = text[pos:end].strip().lstrip(",;").strip()
            if piece and not (drop and drop.match(piece)):
                out.append(piece)
            pos = end
        if text.startswith("; ", pos):
            pos += 2
    return t("list_semi").join(p for p in out if p)


def _top_level_split(text: str, sep: str) -> list[str]:
    """`text` cut at each `sep` outside parentheses: "a (x, y), b" -> ["a (x, y)", "b"]."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        depth += ch == "("
        depth -= ch == ")" and depth > 0
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def flagged_op_labels(text: str) -> list[tuple[str, list[str]]] | None:
    """The checklist's "flagged: OP (flag, flag); OP (flag)" as [(op, [flag, ...])], or
    None when `text` is not that list."""
    if not text.startswith("flagged: "):
        return None
    out = []
    for item in _top_level_split(text[len("flagged: ") :], "; "):
        m = re.fullmatch(r"(?P<op>[^()]+?) \((?P<flags>.*)\)", item)
        if m is None:
            return None
        out.append((m["op"], _top_level_split(m["flags"], ", ")))
    return out or None


def flags_words(flags: list[str], t: Strings) -> str:
    """Flags in words, listed in the report's language, none left empty."""
    return t("list_sep").join(w for w in (flag_in_words(x, t) for x in flags) if w)


def flag_in_words(flag: str, t: Strings) -> str:
    """A flag a stage attached to a number ("unstable", "contradicts the Amdahl estimate
    (...)"), in words: the short ones by name, the ones carrying numbers by pattern."""
    known = t.raw("flags") if t.has("flags") else {}
    if isinstance(known, dict) and flag in known:
        return str(known[flag])
    return notes_in_words(flag, t) or flag


def timing_flags(*timings: Timing | None) -> bool:
    return any(tm is not None and getattr(tm, "unstable", False) for tm in timings)


def op_flags(b: OpBench) -> list[str]:
    """Why an op's number is not clean evidence: its own flags, unstable timings, unverified."""
    flags = list(getattr(b, "flags", ()) or ())
    if timing_flags(b.tilelang, b.torch) and "unstable" not in flags:
        flags.append("unstable")
    if getattr(b, "verified", True) is False:
        flags.append("not verified")
    return flags


def e2e_flags(result: RunResult) -> list[str]:
    """The end-to-end number's flags, plus the report's own check for baselines written
    before the bench stage flagged anything: a measured speedup far above what the op
    speedups and coverage allow (Amdahl) is a measurement problem, not a result."""
    e = result.e2e
    if e is None:
        return []
    flags = list(getattr(e, "flags", ()) or ())
    if timing_flags(e.reference, e.swapped) and "unstable" not in flags:
        flags.append("unstable")
    if (
        finite(e.speedup)
        and finite(e.amdahl_speedup)
        and e.amdahl_speedup > 0
        and e.speedup > 1.25 * max(e.amdahl_speedup, 1.0)
        and not any(f.startswith("contradicts the Amdahl estimate") for f in flags)
    ):
        flags.append("contradicts the Amdahl estimate")
    return flags
