"""The mixing-op contract (`kimik3_lessons/contract.py`), tested once for the four recurrent
mixers: linear attention, DeltaNet, gated DeltaNet and KDA, each in its forms `recurrent`, `chunked` and
`triton_chunked` (and linear attention's `parallel`).

Every form of every mixer: has the contract's signature; equals the recurrence in float64 (the Triton
kernel in float32, in the interpreter on a CPU) at any T and chunk size; carries its state from one call
to the next; takes half precision in and gives it back, computed in float32; stays finite and exact
under strong decay; trains with the recurrence's gradients; agrees with flash-linear-attention's
pure-PyTorch references; and refuses bad input with a ValueError whose message names the argument.
Each test draws its own random inputs (a seed from its id, so that a failure reproduces).
"""

import inspect
import re
import zlib

import pytest
import torch
import torch.nn.functional as F

from kimik3_lessons import chunk_kernels, contract, fla_stand_in, lab, linear_attention, mixers

MIXERS = list(mixers.MIXERS.values())          # the family, as declared (`contract.Mixer`)
LINEAR_ATTENTION = mixers.get("linear_attention")
EXTRA_FORMS = {"linear_attention": {"parallel": linear_attention.parallel}}   # beyond the contract's three
GATED = [m for m in MIXERS if m.decay]


def forms(mixer):
    """{form name: function}: the contract's three and the mixer's own extra ones."""
    return {**mixer.forms, **EXTRA_FORMS.get(mixer.name, {})}


FORMS = [pytest.param(m, form, id=f"{m.name}-{form}") for m in MIXERS for form in forms(m)]
PYTORCH_FORMS = [p for p in FORMS if p.values[1] != "triton_chunked"]
TRITON = [pytest.param(m, "triton_chunked", id=m.name) for m in MIXERS]
CHUNK = {"chunked": 16, "triton_chunked": 16}   # the chunk size a test uses unless it says otherwise


@pytest.fixture
def gen(request):
    """A generator seeded from the test's id: every test draws its own inputs, reproducibly."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def inputs(mixer, gen, B=1, H=2, T=100, K=16, V=12, dtype=torch.float64, state=True):
    """Random inputs of `mixer` in the contract's layout: q; unit-norm k (as layers make them); v;
    g in [-0.3, 0] (one per head or per key channel); beta in (0, 1); a random initial state (or None).
    Drawn in float64 and cast, so every dtype sees the same numbers up to rounding."""
    x = {"q": torch.randn(B, H, T, K, generator=gen, dtype=torch.float64),
         "k": F.normalize(torch.randn(B, H, T, K, generator=gen, dtype=torch.float64), dim=-1),
         "v": torch.randn(B, H, T, V, generator=gen, dtype=torch.float64)}
    if mixer.decay:
        g_shape = (B, H, T) if mixer.decay == "head" else (B, H, T, K)
        x["g"] = -0.3 * torch.rand(g_shape, generator=gen, dtype=torch.float64)
    if mixer.delta:
        x["beta"] = torch.rand(B, H, T, generator=gen, dtype=torch.float64)
    x["initial_state"] = torch.randn(B, H, K, V, generator=gen, dtype=torch.float64) if state else None
    return {name: t if t is None else t.to(dtype) for name, t in x.items()}


def tokens(x, start, stop):
    """The inputs of tokens start ... stop - 1 (the initial state is left to the caller)."""
    return {name: t[:, :, start:stop] for name, t in x.items() if name != "initial_state"}


def call(mixer, form, x, **kwargs):
    """`form` of `mixer` on the inputs x (by name), where its kernels run: the Triton form gets CUDA
    tensors when Triton is compiled, CPU tensors in the interpreter."""
    if form == "triton_chunked" and not contract.interpreted():
        x = {name: t if t is None else t.cuda() for name, t in x.items()}
    names = ("q", "k", "v", *mixer.args, "initial_state")
    return forms(mixer)[form](**{name: x.get(name) for name in names}, **kwargs)


def as_float64(x):
    """The same inputs in float64 (for the reference recurrence)."""
    return {name: t if t is None else t.double() for name, t in x.items()}


# ---------------------------------------------------------------------------------------------------
# One signature


def contract_signature(mixer, form):
    """The contract: q, k, v, the mixer's own inputs, then chunk_size (chunked forms), initial_state and
    input_precision (the Triton form), with their defaults."""
    P = inspect.Parameter
    params = [P(name, P.POSITIONAL_OR_KEYWORD) for name in ("q", "k", "v", *mixer.args)]
    if form in ("chunked", "triton_chunked"):
        params.append(P("chunk_size", P.POSITIONAL_OR_KEYWORD, default=64))
    params.append(P("initial_state", P.POSITIONAL_OR_KEYWORD, default=None))
    if form == "triton_chunked":
        params.append(P("input_precision", P.POSITIONAL_OR_KEYWORD, default="ieee"))
    return inspect.Signature(params)


@pytest.mark.parametrize("mixer, form", FORMS)
def test_every_form_has_the_contract_signature(mixer, form):
    assert inspect.signature(forms(mixer)[form]) == contract_signature(mixer, form)


# ---------------------------------------------------------------------------------------------------
# The same numbers from every form


@pytest.mark.parametrize("mixer, form, chunk_size", [
    pytest.param(m, form, C, id=f"{m.name}-{form}" + (f"-C{C}" if C else ""))
    for m, form in (p.values for p in PYTORCH_FORMS) if form != "recurrent"
    for C in ((1, 16, 24, 32, 64, 128) if form == "chunked" else (None,))])
def test_forms_equal_the_recurrence_in_float64(mixer, form, chunk_size, gen):
    """T = 100 is a multiple of no chunk size but 1; 24 is not a power of two; 128 > T is one chunk."""
    x = inputs(mixer, gen)
    o_ref, S_ref = call(mixer, "recurrent", x)
    o, S = call(mixer, form, x, **({"chunk_size": chunk_size} if chunk_size else {}))
    assert o.dtype == S.dtype == torch.float64
    lab.check_close(f"{mixer} {form} o", o_ref, o)
    lab.check_close(f"{mixer} {form} S", S_ref, S)


@pytest.mark.parametrize("B, H, T, K, V, chunk_size", [
    (1, 2, 40, 8, 8, 16),        # many chunks; head dims below the smallest tile, padded inside
    (1, 1, 70, 24, 40, 32),      # K != V, neither a power of two; V > 32 splits over two programs
    (2, 1, 100, 32, 32, 64),     # a masked tail chunk
    (1, 1, 50, 16, 16, 128),     # one chunk longer than T
], ids=lambda p: str(p))
@pytest.mark.parametrize("mixer, form", TRITON)
def test_triton_equals_the_recurrence(mixer, form, B, H, T, K, V, chunk_size, gen):
    """The kernel, in float32, against the float64 recurrence on the same (float32) numbers."""
    x = inputs(mixer, gen, B, H, T, K, V, dtype=torch.float32)
    o_ref, S_ref = call(mixer, "recurrent", as_float64(x))
    o, S = call(mixer, form, x, chunk_size=chunk_size)
    assert o.dtype == S.dtype == torch.float32
    lab.check_close(f"{mixer} triton o", o_ref, o)
    lab.check_close(f"{mixer} triton S", S_ref, S)


@pytest.mark.parametrize("mixer, form", FORMS)
def test_state_carries_across_two_calls(mixer, form, gen):
    """Tokens 0-36 from no state, then 37-99 from the first call's state, equal one call of the
    recurrence (float64; the Triton form computes in float32). 37 is a multiple of no chunk size."""
    dtype = torch.float32 if form == "triton_chunked" else torch.float64
    x = inputs(mixer, gen, T=100, dtype=dtype, state=False)
    o_ref, S_ref = call(mixer, "recurrent", as_float64(x))
    kwargs = {"chunk_size": CHUNK[form]} if form in CHUNK else {}
    o1, S1 = call(mixer, form, tokens(x, 0, 37), **kwargs)
    o2, S2 = call(mixer, form, {**tokens(x, 37, 100), "initial_state": S1}, **kwargs)
    lab.check_close(f"{mixer} {form} two calls o", o_ref, torch.cat([o1, o2], dim=2))
    lab.check_close(f"{mixer} {form} two calls S", S_ref, S2)


@pytest.mark.parametrize("mixer", MIXERS, ids=lambda m: m.name)
def test_recurrent_on_one_token_is_the_decode_step(mixer, gen):
    """Decoding token by token, carrying the state, equals the chunked form over the whole sequence."""
    x = inputs(mixer, gen, T=20)
    o_ref, S_ref = call(mixer, "chunked", x, chunk_size=16)
    S, o = x["initial_state"], []
    for t in range(20):
        o_t, S = call(mixer, "recurrent", {**tokens(x, t, t + 1), "initial_state": S})
        o.append(o_t)
    lab.check_close(f"{mixer} decode o", o_ref, torch.cat(o, dim=2))
    lab.check_close(f"{mixer} decode S", S_ref, S)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mixer, form", FORMS)
def test_half_precision_in_half_precision_out_computed_in_float32(mixer, form, dtype, gen):
    """Outputs come back in the input dtype (within its rounding of the float64 recurrence on the same
    rounded inputs); the state, in float32, is exact to float32: the work was done in float32."""
    x = inputs(mixer, gen, H=1, T=50, dtype=dtype, state=False)
    o_ref, S_ref = call(mixer, "recurrent", as_float64(x))
    o, S = call(mixer, form, x, **({"chunk_size": CHUNK[form]} if form in CHUNK else {}))
    assert o.dtype == dtype and S.dtype == torch.float32, (o.dtype, S.dtype)
    lab.check_close(f"{mixer} {form} {dtype} o", o_ref, o)                # the tolerance of `dtype`
    lab.check_close(f"{mixer} {form} {dtype} S", S_ref, S, rtol=1e-5)


@pytest.mark.parametrize("mixer, form", [pytest.param(m, form, id=f"{m.name}-{form}") for m in GATED
                                         for form in ("chunked", "triton_chunked")])
def test_strong_decay_stays_finite_and_exact(mixer, form, gen):
    """g in [-5, -4.5] per token: over a whole chunk of 64 the cumulative decay G reaches about -300,
    where exp(-G) overflows float32. The chunked forms never exponentiate a positive number."""
    x = inputs(mixer, gen, T=100, dtype=torch.float32)
    x["g"] = -5 + 0.5 * torch.rand(x["g"].shape, generator=gen)
    assert torch.isinf(torch.exp(-x["g"][:, :, :64].cumsum(2))).any(), "the decay must be strong enough"
    o_ref, S_ref = call(mixer, "recurrent", as_float64(x))
    o, S = call(mixer, form, x, chunk_size=64)
    lab.check_close(f"{mixer} {form} strong decay o", o_ref, o)          # also: no NaN, no inf
    lab.check_close(f"{mixer} {form} strong decay S", S_ref, S)


@pytest.mark.parametrize("mixer", MIXERS, ids=lambda m: m.name)
def test_chunked_gradients_equal_the_recurrence(mixer, gen):
    """Layers train through `chunked`: its gradients for every input (g, beta and the initial state
    included) equal those of the recurrence, a different computation of the same function (float64)."""
    x = inputs(mixer, gen, T=40, K=8, V=6)
    o_ref, S_ref = call(mixer, "recurrent", x)
    weights = torch.randn(o_ref.shape, generator=gen, dtype=torch.float64), \
        torch.randn(S_ref.shape, generator=gen, dtype=torch.float64)
    grads = {}
    for form, kwargs in (("recurrent", {}), ("chunked", {"chunk_size": 16})):
        leaves = {name: t.clone().requires_grad_() for name, t in x.items()}
        o, S = call(mixer, form, leaves, **kwargs)
        ((o * weights[0]).sum() + (S * weights[1]).sum()).backward()
        grads[form] = {name: t.grad for name, t in leaves.items()}
    for name in x:
        assert grads["chunked"][name] is not None, f"no gradient for {name}"
        lab.check_close(f"{mixer} d/d{name}", grads["recurrent"][name], grads["chunked"][name])


# ---------------------------------------------------------------------------------------------------
# flash-linear-attention's pure-PyTorch references, as the family's table declares them (`mixers.FLA`: the
# function, its argument order, its layout and scale, its chunk and its tolerance against float64), called
# by `fla_stand_in.naive` on the contract's inputs.


REFERENCES = [pytest.param(m, form, i, id=f"{m.name}-{form}-{ref.function.rpartition('.')[2]}")
              for m, form in (p.values for p in FORMS) if m.name in mixers.FLA
              for i, ref in enumerate(mixers.FLA[m.name].naive)]


@pytest.mark.parametrize("mixer, form, index", REFERENCES)
def test_agrees_with_flash_linear_attention(mixer, form, index, gen):
    """T = 64: FLA's chunk references need whole chunks (two of 32; `naive_chunk_linear_attn`'s own: 64).
    Our chunked forms run at the reference's chunk (or 32 for a recurrent one)."""
    reference = mixers.FLA[mixer.name].naive[index]
    x = inputs(mixer, gen, T=64, K=16, V=24, state=reference.state)
    o_ref, S_ref = fla_stand_in.naive(reference, x)
    rtol = reference.rtol
    if form == "triton_chunked":             # in float32: the kernel's tolerance
        x, rtol = {name: t if t is None else t.float() for name, t in x.items()}, max(rtol, 1e-4)
    chunk = {"chunk_size": reference.chunk or 32} if form in CHUNK else {}
    o, S = call(mixer, form, x, **chunk)
    name = reference.function.rpartition(".")[2]
    lab.check_close(f"{mixer} {form} vs FLA's {name} o", o_ref, o, rtol=rtol)
    if S_ref is not None:
        lab.check_close(f"{mixer} {form} vs FLA's {name} S", S_ref, S, rtol=rtol)


# ---------------------------------------------------------------------------------------------------
# Bad input: a ValueError whose message names the argument (matched from its start)


def bad_inputs(mixer):
    """Good float32 inputs with B, H, T, K, V = 1, 2, 20, 16, 12, and for everything the contract refuses:
    (id, the inputs changed, the message's leading phrase)."""
    x = inputs(mixer, torch.Generator().manual_seed(0), B=1, H=2, T=20, K=16, V=12, dtype=torch.float32)
    q, k, v, S0 = x["q"], x["k"], x["v"], x["initial_state"]
    qkv, v_like_q = "[B, H, T, K] = [1, 2, 20, 16]", "v must be [B, H, T, V] = [1, 2, 20, V] like q"
    cases = [
        ("q-rank", {"q": q[0]}, "q must be a 4-dimensional tensor [B, H, T, D], got [2, 20, 16]"),
        ("k-rank", {"k": k[0]}, "k must be a 4-dimensional tensor [B, H, T, D], got [2, 20, 16]"),
        ("v-rank", {"v": v[..., 0]}, "v must be a 4-dimensional tensor [B, H, T, D], got [1, 2, 20]"),
        ("q-integer", {"q": q.long()}, "q must be a floating-point tensor, got torch.int64"),
        ("k-heads", {"k": k[:, :1]}, f"k must have the shape of q {qkv}, got [1, 1, 20, 16]"),
        ("k-head-dim", {"k": k[..., :8]}, f"k must have the shape of q {qkv}, got [1, 2, 20, 8]"),
        ("v-batch", {"v": torch.cat([v, v])}, f"{v_like_q}, got [2, 2, 20, 12]"),
        ("v-time", {"v": v[:, :, :13]}, f"{v_like_q}, got [1, 2, 13, 12]"),
        ("k-device", {"k": k.to("meta")}, "k must be on cpu like q, got meta"),
        ("v-device", {"v": v.to("meta")}, "v must be on cpu like q, got meta"),
        ("state-shape", {"initial_state": S0[..., :5]},
         "initial_state must be [B, H, K, V] = [1, 2, 16, 12], got [1, 2, 16, 5]"),
        ("state-transposed", {"initial_state": S0.mT},
         "initial_state must be [B, H, K, V] = [1, 2, 16, 12], got [1, 2, 12, 16]"),
        ("state-integer", {"initial_state": S0.long()},
         "initial_state must be a floating-point tensor, got torch.int64"),
        ("state-device", {"initial_state": S0.to("meta")}, "initial_state must be on cpu like q, got meta"),
    ]
    if mixer.delta:
        beta = x["beta"]
        expected = "beta must be [B, H, T] = [1, 2, 20]"
        cases += [
            ("beta-missing", {"beta": None}, f"{expected}, got NoneType"),
            ("beta-rank", {"beta": beta[..., None]}, f"{expected}, got [1, 2, 20, 1]"),
            ("beta-time", {"beta": beta[..., :5]}, f"{expected}, got [1, 2, 5]"),
            ("beta-integer", {"beta": beta.long()}, "beta must be a floating-point tensor, got torch.int64"),
            ("beta-device", {"beta": beta.to("meta")}, "beta must be on cpu like q, got meta"),
        ]
    if mixer.decay:
        g = x["g"]
        if mixer.decay == "head":
            expected = "g must be [B, H, T] (log decay, one per head) = [1, 2, 20]"
            other = g[..., None].expand(-1, -1, -1, 16)                    # one per channel
        else:
            expected = "g must be [B, H, T, K] (log decay, one per key channel) = [1, 2, 20, 16]"
            other = g[..., 0]                                               # one per head
        cases += [
            ("g-missing", {"g": None}, f"{expected}, got NoneType"),
            ("g-shape", {"g": other}, f"{expected}, got {contract.shape_str(other)}"),
            ("g-positive", {"g": g.abs()}, "g is a log decay and must be <= 0, got a maximum of "),
            ("g-integer", {"g": g.long()}, "g must be a floating-point tensor, got torch.int64"),
            ("g-device", {"g": g.to("meta")}, "g must be on cpu like q, got meta"),
        ]
    return x, cases


BAD = [pytest.param(m, form, case_id, id=f"{m.name}-{form}-{case_id}")
       for m in MIXERS for form in forms(m) for case_id, _, _ in bad_inputs(m)[1]]


@pytest.mark.parametrize("mixer, form, case_id", BAD)
def test_bad_input_raises_a_value_error_naming_the_argument(mixer, form, case_id):
    x, cases = bad_inputs(mixer)
    change, message = next((change, message) for i, change, message in cases if i == case_id)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        forms(mixer)[form](**{**x, **change})


@pytest.mark.parametrize("mixer, form, options, message", [
    pytest.param(m, form, options, message, id=f"{m.name}-{form}-{'-'.join(map(str, options.values()))}")
    for m in MIXERS for form, options, message in [
        ("chunked", {"chunk_size": 0}, "chunk_size must be a positive integer, got 0"),
        ("chunked", {"chunk_size": 2.0}, "chunk_size must be a positive integer, got 2.0"),
        ("chunked", {"chunk_size": True}, "chunk_size must be a positive integer, got True"),
        ("triton_chunked", {"chunk_size": 0}, "chunk_size must be a positive integer, got 0"),
        ("triton_chunked", {"chunk_size": 24},
         "chunk_size must be a power of two for the Triton kernel, got 24"),
        ("triton_chunked", {"chunk_size": 8},
         "chunk_size must be >= 16 for the Triton kernel (tl.dot tiles), got 8"),
        ("triton_chunked", {"input_precision": "fp8"},
         "input_precision must be 'ieee' (exact float32), 'tf32' (tensor cores), 'bf16' or 'fp16' "
         "(half-precision products, tensor cores), got 'fp8'"),
    ]])
def test_bad_options_raise_a_value_error_naming_the_option(mixer, form, options, message):
    x, _ = bad_inputs(mixer)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        forms(mixer)[form](**x, **options)


def test_linear_attention_takes_no_gate_and_no_write_strength():
    """Linear attention's forms have no g or beta (the signature test); given one anyway, positionally
    or to the contract's check, it is refused, named."""
    x, _ = bad_inputs(LINEAR_ATTENTION)
    q, k, v, g = x["q"], x["k"], x["v"], -torch.rand(1, 2, 20)
    with pytest.raises(ValueError, match="^" + re.escape("g must be None: this mixer has no decay, "
                                                         "got [1, 2, 20]")):
        contract.check_inputs(q, k, v, g=g)
    with pytest.raises(ValueError, match="^" + re.escape("beta must be None: linear attention has no write "
                                                         "strength, got [1, 2, 20]")):
        contract.check_inputs(q, k, v, beta=torch.rand(1, 2, 20))
    with pytest.raises(ValueError, match="^" + re.escape("initial_state must be [B, H, K, V] = "
                                                         "[1, 2, 16, 12], got [1, 2, 20]")):
        linear_attention.recurrent(q, k, v, g)            # g lands on initial_state
    with pytest.raises(ValueError, match="^" + re.escape("chunk_size must be a positive integer, got ")):
        linear_attention.chunked(q, k, v, g)              # g lands on chunk_size


class CudaLike(torch.Tensor):
    """A CPU tensor that says it is a CUDA tensor: stands in for one on a machine without a GPU."""

    @property
    def is_cuda(self):
        return True


@pytest.mark.parametrize("mixer, arg", [pytest.param(m, arg, id=f"{m.name}-{arg}") for m in MIXERS
                                        for arg in ("q", "k", "v", *m.args, "initial_state")])
def test_triton_inputs_must_live_where_triton_runs(mixer, arg):
    """Without a GPU the package runs Triton's interpreter and a CUDA tensor is refused (never copied in
    silence); with one, the kernel is compiled and a CPU tensor is refused."""
    x, _ = bad_inputs(mixer)
    if torch.cuda.is_available():            # every input on the CPU: the first one is named
        message = "q is on cpu, but the compiled Triton kernel needs CUDA tensors"
    else:
        assert contract.interpreted(), "without a GPU, importing kimik3_lessons sets TRITON_INTERPRET=1"
        x[arg] = x[arg].as_subclass(CudaLike)
        message = f"{arg} is a CUDA tensor, but Triton runs in interpreter mode here (TRITON_INTERPRET=1): " \
                  "pass CPU tensors"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        mixer.triton_chunked(**x)


# ---------------------------------------------------------------------------------------------------
# The contract's helpers


def test_check_inputs_returns_the_sizes_and_knows_the_decays():
    q, v = torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 3)
    assert contract.check_inputs(q, q, v) == (1, 2, 5, 4, 3)
    message = "decay must be None, 'head' or 'channel', got 'vector'"
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        contract.check_inputs(q, q, v, g=torch.zeros(1, 2, 5), decay="vector")


def test_split_and_merge_chunks_pad_with_zeros():
    x = torch.randn(2, 3, 10, 4)
    chunks = contract.split_chunks(x, 4)
    assert chunks.shape == (2, 3, 3, 4, 4)
    lab.check_close("the real positions", x[:, :, 8:], chunks[:, :, 2, :2], rtol=0)
    lab.check_close("the 2 padded positions", torch.zeros(2, 3, 2, 4), chunks[:, :, 2, 2:], rtol=0)
    lab.check_close("merge undoes split", x, contract.merge_chunks(chunks, 10), rtol=0)
    assert contract.split_chunks(torch.randn(1, 1, 8), 8).shape == (1, 1, 1, 8)


def test_chunk_sizes_the_forms_accept():
    """Any positive integer for the PyTorch forms; a power of two >= 16 for the kernels, in TF32 too."""
    contract.check_chunk_size(48)
    contract.check_triton_options(16, "tf32")
    contract.check_triton_options(128, "ieee")


# ---------------------------------------------------------------------------------------------------
# The family's declarations, and the launcher that reads them


def test_each_declaration_matches_its_forms():
    """A mixer's switches are those its forms take: `args` is the signature's, after q, k, v."""
    for m in MIXERS:
        params = list(inspect.signature(m.recurrent).parameters)
        assert tuple(params[3:-1]) == m.args, (m.name, params)
        assert m.intra_chunk_kernel.__name__ == f"{m.name}_intra_chunk_kernel"
        assert m.step.__name__ == f"{m.name}_step"
    with pytest.raises(ValueError, match="^no mixer 'mamba'"):
        mixers.get("mamba")


@pytest.mark.parametrize("mixer", MIXERS, ids=lambda m: m.name)
def test_head_size_128_splits_the_state_and_equals_float64(mixer, gen):
    """K = 128 > 64: the scan and output kernels hold the state as two tiles (SPLIT_K), the path of
    KimiK3's head size. In float32 against the float64 recurrence, with a decay strong enough that a
    half of the state that stopped decaying would be far off."""
    assert chunk_kernels.block_sizes(128, 16)["SPLIT_K"]
    x = inputs(mixer, gen, B=1, H=1, T=24, K=128, V=16, dtype=torch.float32)
    if mixer.decay:
        x["g"] = -0.5 - 0.5 * torch.rand(x["g"].shape, generator=gen)
    o_ref, S_ref = call(mixer, "recurrent", as_float64(x))
    o, S = call(mixer, "triton_chunked", x, chunk_size=16)
    lab.check_close(f"{mixer.name} K=128 o", o_ref, o)
    lab.check_close(f"{mixer.name} K=128 S", S_ref, S)


def test_the_output_grid_fits_cuda_at_any_length():
    """CUDA grids hold 2^31 - 1 programs in x and 65,535 in y and z: the output kernel has one program
    per 16 rows, 2^17 of them at two million tokens, so the rows must be in x."""
    for mixer in MIXERS:
        for _, kernel, grid, _, _ in chunk_kernels.launches(mixer.intra_chunk_kernel, 2**21, 128, 128, 64,
                                                             32, delta=mixer.delta, decay=mixer.decay,
                                                             has_s0=True):
            assert grid[0] < 2**31 and all(n <= 65_535 for n in grid[1:]), (kernel.__name__, grid)


def test_a_kernel_never_reads_a_tensor_the_mixer_lacks():
    """A missing tensor may stand in for itself only under a switch that is off; otherwise: refused."""
    x, _ = bad_inputs(LINEAR_ATTENTION)
    tensors = dict(q=x["q"], w=None)
    with pytest.raises(ValueError, match="reads w, which was not given"):
        chunk_kernels.launch(chunk_kernels.chunk_scan_kernel, (1, 1), tensors, {}, DELTA=True)


# ---------------------------------------------------------------------------------------------------
# The family declared once: what still lists mixers by name has every declared mixer


def missing_from_the_tables(mixer):
    """The tables outside `mixers.py` that `mixer` is missing from (each named, for the failure)."""
    from pathlib import Path

    from kimik3_lessons import mqar
    root = Path(__file__).parent.parent
    missing = []
    if not list(root.glob(f"notebooks/{mixer.lesson}_*.ipynb")):
        missing.append(f"notebooks/{mixer.lesson}_*.ipynb (its declaration's lesson={mixer.lesson!r})")
    if f"`{mixer.name}`" not in (root / "docs" / "design.md").read_text():
        missing.append("docs/design.md, the map of lessons and modules")
    if mixer.name not in mqar.MIXERS:
        missing.append("mqar.MIXERS, lesson 12's recall models")
    return missing


@pytest.mark.parametrize("mixer", MIXERS, ids=lambda m: m.name)
def test_every_declared_mixer_is_in_every_table_of_the_family(mixer):
    """A new mixer is its module (with its MIXER), one name in `mixers.MIXERS` and a row in `mixers.FLA` if
    flash-linear-attention has the op; everything else reads the declaration. The tables that still list
    mixers by name are checked here, and a failure names each one the mixer is missing from."""
    missing = missing_from_the_tables(mixer)
    assert not missing, f"mixer {mixer.name!r} is missing from: " + "; ".join(missing)


@pytest.mark.parametrize("name", list(mixers.FLA))
def test_each_fla_row_names_a_declared_mixer_and_fla_s_own_functions(name):
    """A row of `mixers.FLA` belongs to a declared mixer, and names functions fla-core has, taking that
    mixer's tensors: a renamed FLA function or a wrong row fails here, not in a GPU cell."""
    assert name in mixers.MIXERS, f"mixers.FLA has a row for {name!r}, which mixers.MIXERS does not declare"
    op, mixer = mixers.FLA[name], mixers.get(name)
    entry = fla_stand_in._resolve(op.entry)
    assert list(inspect.signature(entry).parameters)[:3 + len(mixer.args)] == ["q", "k", "v", *mixer.args]
    assert op.naive and op.naive[0].state, "the stand-in computes with the first reference: it takes a state"
    for reference in op.naive:
        params = inspect.signature(fla_stand_in._resolve(reference.function)).parameters
        assert set(reference.args) == set(mixer.args) and list(params)[3:3 + len(mixer.args)] == \
            list(reference.args), (reference.function, list(params))
        assert ("scale" in params) == reference.scale and ("initial_state" in params) == reference.state
        assert ("chunk_size" in params) == bool(reference.chunk and reference.chunk_keyword)
