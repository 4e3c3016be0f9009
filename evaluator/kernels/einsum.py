"""Which two-operand einsums are matrix products, and as which.

In: an einsum equation and its two operands' ranks. Out: `as_matmul` — a `Matmul` saying
how to read the call as `a @ b` (the contracted letter, the operands' letters, whether
the second operand is a weight (2-D, or its columns grouped over several letters) or both
are batched, and the permutation that makes the product's output the equation's), or
None where the equation is not one contraction of two operands (a trace, an outer
product, a batched contraction over two letters, three operands). The gemm family takes
the weight form, whose contracted letters may be several; a batched-GEMM family the
other, over one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Matmul:
    a: str  # the first operand's letters, ellipsis written as "*"
    b: str
    out: str
    k: str  # the contracted letter (letters, for a weight: a group ending x and at one end of W)
    # b is a weight: k and its free letters, which end the output in b's order (x @ W, as
    # a linear layer computes it; several free letters are W's columns grouped, as
    # XLNet's "ibh,hnd->ibnd" projects onto heads)
    weight: bool
    b_kn: bool  # weight form: b's letters are (k, n...); else (n..., k), nn.Linear's layout


def _letters(term: str) -> str:
    return term.replace("...", "*")


def as_matmul(equation: str, a_dim: int, b_dim: int) -> Matmul | None:
    """The equation as one matrix product, or None."""
    eq = equation.replace(" ", "")
    if "->" not in eq:
        return None  # implicit output: the letters' order is alphabetical, rarely a GEMM as written
    ins, out = eq.split("->")
    terms = ins.split(",")
    if len(terms) != 2:
        return None
    a, b, out = _letters(terms[0]), _letters(terms[1]), _letters(out)
    if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out):
        return None  # a repeated letter is a diagonal or a trace
    if ("*" in a and len(a) - 1 > a_dim) or ("*" not in a and len(a) != a_dim) or ("*" in b) or len(b) != b_dim:
        return None
    shared = [c for c in a if c in b and c != "*"]
    k = "".join(c for c in shared if c not in out)  # the contracted letters, in a's order
    if not k or set(out) != (set(a) | set(b)) - set(k):
        return None
    if len(shared) == len(k):
        # x[..., k] @ W: the output is a's letters with k replaced by W's free letters, last;
        # k may span several letters too, ending x and at one end of W in the same order
        # (XLNet's output projection "ibnd,hnd->ibh")
        n = "".join(c for c in b if c not in k)
        if n and a.endswith(k) and b in (k + n, n + k) and out == a[: -len(k)] + n:
            return Matmul(a, b, out, k, weight=True, b_kn=b == k + n)
        if b_dim == 2:
            return None
    if len(k) != 1:
        return None
    return Matmul(a, b, out, k, weight=False, b_kn=False)
