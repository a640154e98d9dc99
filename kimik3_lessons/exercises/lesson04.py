"""Lesson 04's exercises: the delta-rule memory by hand, its Householder form, and writing the pairs again."""

import torch

from kimik3_lessons import associative_memory as am
from kimik3_lessons.exercises import (
    Watch,
    Wrong,
    attempt,
    exercise,
    expect_close,
    expect_tensor,
    hint,
    known_mistake,
    part,
)

F64 = torch.float64
# The delta-rule forms of later lessons' modules: with q = k (and no decay) each writes this memory too.
DELTA_FORMS = tuple(f"{module}.{form}" for module, step in (("deltanet", "deltanet_step"),
                                                           ("gated_deltanet", "gated_deltanet_step"),
                                                           ("kda", "kda_step"))
                    for form in ("recurrent", "chunked", "triton_chunked", step))


def keys_of_random_norms(*shape, low=0.5, high=1.3):
    """Random keys [..., D] whose norms lie in [low, high]: a missing ||k||^2 or a missing beta shows."""
    keys = torch.randn(*shape, dtype=F64)
    norms = torch.empty(*shape[:-1], 1, dtype=F64).uniform_(low, high)
    return keys / keys.norm(dim=-1, keepdim=True) * norms


def compare(what, ref, out, known, hint, rtol=1e-9):
    """expect_close, but a wrong `out` that equals one of the `known` mistakes [(explanation, its result)]
    gets that explanation. Returns the relative error."""
    known_mistake(what, ref, out, known, rtol)
    return expect_close(what, ref, out, rtol, hint=hint)


def as_float(x, what):
    """The student's number as a float, else Wrong."""
    try:
        return float(x)
    except (TypeError, ValueError, RuntimeError) as err:
        raise Wrong(f"{what} should be one number (a float), got {type(x).__name__}") from err


@exercise("04.1", "delta_recall", "the delta-rule memory, by hand", difficulty=2,
          forbid=("associative_memory.store", "associative_memory.delta_write",
                  "associative_memory.additive_write", "associative_memory.recall_sequence", *DELTA_FORMS))
def check_delta_recall(delta_recall):
    N, D, D_v = 23, 12, 7                        # more pairs than dimensions; D != D_v catches a transposed S
    beta = torch.empty(()).uniform_(0.3, 0.9).item()
    keys, values = keys_of_random_norms(N, D), torch.randn(N, D_v, dtype=F64)
    ref = keys @ am.store(keys, values, "delta", beta=beta)
    out = attempt(delta_recall, keys.clone(), values.clone(), beta)
    expect_tensor("the read-backs", out, (N, D_v), dtype=F64)
    known = [(hint("you wrote v itself: that is the additive write of linear attention. The delta rule "
                   "writes beta (v - k S), the difference between the value and what k reads now"),
              keys @ am.store(keys, values, "additive")),
             (hint("you wrote beta v: that is an additive write, scaled. The delta rule writes beta (v - k "
                   "S), the difference between the value and what k reads now"),
              keys @ am.store(keys, beta * values, "additive")),
             (hint("beta is missing: each write must add beta k^T (v - k S)"),
              keys @ am.store(keys, values, "delta", beta=1.0)),
             (hint("this is what each key read right after its own write; the task asks what every key reads "
                   "from the final memory, after all N writes (later writes disturb earlier pairs)"),
              torch.stack([am.read(am.store(keys[:i + 1], values[:i + 1], "delta", beta=beta), keys[i])
                           for i in range(N)]))]
    err = compare("the read-back", ref, out, known,
                  hint=hint("start from S = 0 [D, D_v]; for each pair read k_i S with the memory as it is "
                            "*before* the write, add beta k_i^T (v_i - k_i S), and read all keys at the end "
                            "(row i is pair i)."))
    return f"{N} pairs in a {D}x{D_v} memory, beta = {beta:.2f}: relative error {err:.0e}"


@exercise("04.2", "householder_write", "the delta write in its Householder form", difficulty=1,
          forbid=("associative_memory.delta_write", "associative_memory.store",
                  "deltanet.householder_product", *DELTA_FORMS))
def check_householder_write(householder_write):
    D, D_v = 9, 5
    worst = 0.0
    for r, beta in ((1.0, 1.0), (0.6, 0.4), (1.3, 1.5), (torch.empty(()).uniform_(0.5, 1.5).item(), 0.8)):
        S = torch.randn(D, D_v, dtype=F64)
        k = torch.randn(D, dtype=F64)
        k = r * k / k.norm()
        v = torch.randn(D_v, dtype=F64)
        ref = am.delta_write(S, k, v, beta)
        with Watch() as watch:
            out = attempt(householder_write, S.clone(), k.clone(), v.clone(), beta)
        expect_tensor("the new memory", out, (D, D_v), dtype=F64)
        I = torch.eye(D, dtype=F64)
        known = [(hint("the write term is missing beta: (I - beta k^T k) S + beta k^T v"),
                  (I - beta * torch.outer(k, k)) @ S + torch.outer(k, v)),
                 (hint("you erased after writing, (I - beta k^T k)(S + beta k^T v): erase first, then add "
                       "beta k^T v"), (I - beta * torch.outer(k, k)) @ (S + beta * torch.outer(k, v)))]
        worst = max(worst, compare(f"the new memory (||k|| = {r:.2f}, beta = {beta})", ref, out, known,
                                   hint=hint("I - beta k^T k is torch.eye(D) - beta * torch.outer(k, k); it "
                                             "multiplies S from the left.")))
        if (D, D) not in watch.shapes:
            raise Wrong(f"the result is right, but no {D} x {D} matrix was built (D = {D}, the value width "
                        f"{D_v}): the exercise asks for the Householder form, I - beta k^T k times S",
                        hint=hint("build the matrix itself, torch.eye(D) - beta * torch.outer(k, k), then "
                                  "multiply S by it from the left."))
    return (f"equals am.delta_write for 4 keys and betas (largest relative error {worst:.0e}), through the "
            f"{D} x {D} matrix I - beta k^T k")


def reference_error_after_passes(keys, values, rule, passes):
    S = None
    for _ in range(passes):
        S = am.store(keys, values, rule, S=S)
    return am.recall_error(S, keys, values).mean().item()


@exercise("04.3", "error_after_passes", "write the pairs again: what repetition does to each rule",
          difficulty=1, parts=tuple(f"the {rule} rule" for rule in am.RULES))
def check_error_after_passes(error_after_passes):
    D = 16
    keys = am.random_unit_vectors(6, D // 2, D)
    values = am.random_unit_vectors(6, D // 2, D)
    rounds = (1, 3, 30)
    measured = {}
    for rule in am.RULES:
        with part(f"the {rule} rule"):
            for passes in rounds:
                ref = reference_error_after_passes(keys, values, rule, passes)
                out = as_float(attempt(error_after_passes, keys, values, rule, passes),
                               f"error_after_passes(..., {rule!r}, {passes})")
                if abs(out - ref) > 1e-9 * max(ref, 1e-3):
                    one_round = reference_error_after_passes(keys, values, rule, 1)
                    restarted = passes > 1 and abs(out - one_round) < 1e-9
                    raise Wrong(f"with rule {rule!r} and {passes} rounds: got {out:.4g}, expected {ref:.4g}",
                                hint=hint("carry S from one round to the next (am.store(keys, values, rule, "
                                          "S=S)); a fresh memory each round gives the one-round error.")
                                if restarted else hint("`passes` rounds of all N writes, then the mean of "
                                                       "am.recall_error(S, keys, values)."))
                measured[rule, passes] = out
    delta = " -> ".join(f"{measured['delta', p]:.1e}" for p in rounds)
    additive = " -> ".join(f"{measured['additive', p]:.2f}" for p in rounds)
    return (f"delta: mean error {delta} after {'/'.join(map(str, rounds))} rounds (each round of Widrow-Hoff "
            f"steps moves S toward a solution of K S = V); additive: {additive} (n rounds read n v_j plus n "
            "times the crosstalk: further and further from v_j)")
