"""Tests for MQAR: the task (kimik3_lessons.recall_task: the generator's pairs and queries), the recipe
(recall_training: no weight decay on gates, norms and biases; the gates initialised as flash-linear-
attention's layers), the models (mqar: every mixer trains with finite gradients, the ablations change what
they claim to change, the state sizes match the real caches, attention learns the smallest setting), and
the sweep (benchmarks/mqar_sweep.py: resumable, the rate chosen on held-out accuracy)."""

import copy
import dataclasses
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kimik3_lessons import gated_deltanet, gpt2, kda, kimi_linear, lab, mixers, mla, mqar, recall_training
from kimik3_lessons import recall_task as task_module

TASK = task_module.MQARTask(seq_len=64, num_pairs=8, vocab_size=64, min_distance=16)


@pytest.mark.parametrize("pairs", [1, 4, 16])
def test_the_generator_is_what_it_claims(pairs):
    task = task_module.MQARTask(seq_len=64, num_pairs=pairs, vocab_size=64, min_distance=16)
    inputs, targets = task_module.mqar_batch(task, 300, torch.Generator().manual_seed(pairs))
    distances = task_module.check_batch(task, inputs, targets)
    assert distances.min() >= task.min_distance
    assert distances.max() > 2 * task.min_distance              # spread, not one fixed offset
    # every query position of the allowed range is used by some sequence, none before it
    used = (targets != task_module.IGNORE).any(0).nonzero()[:, 0]
    assert used.min() == task.first_query and used.max() == task.seq_len - 1


def test_check_batch_catches_leaks_and_near_queries():
    inputs, targets = task_module.mqar_batch(TASK, 4, torch.Generator().manual_seed(0))
    leaked = inputs.clone()
    q = (targets[0] != task_module.IGNORE).nonzero()[0, 0]
    leaked[0, q + 1] = targets[0, q]                              # the answer right after its query
    with pytest.raises(AssertionError, match="leaks"):
        task_module.check_batch(TASK, leaked, targets)
    near = task_module.MQARTask(seq_len=64, num_pairs=8, vocab_size=64, min_distance=17)
    with pytest.raises(AssertionError, match="min_distance"):     # a query can sit at distance 16
        task_module.check_batch(near, *task_module.mqar_batch(TASK, 200, torch.Generator().manual_seed(1)))
    wrong = targets.clone()
    wrong[0, q] = inputs[0, 1] if targets[0, q] != inputs[0, 1] else inputs[0, 3]
    with pytest.raises(AssertionError, match="target"):
        task_module.check_batch(TASK, inputs, wrong)


def test_layout_and_distances_by_hand():
    keys, values, queries = torch.tensor([[5, 9]]), torch.tensor([[40, 33]]), torch.tensor([[12, 7]])
    inputs, targets = task_module.mqar_layout(keys, values, queries, 14)
    assert inputs.tolist() == [[5, 40, 9, 33, 0, 0, 0, 9, 0, 0, 0, 0, 5, 0]]
    assert targets.tolist() == [[-100] * 7 + [33] + [-100] * 4 + [40, -100]]
    assert task_module.query_distances(inputs, targets, 2).tolist() == [[12 - 1, 7 - 3]]


def test_bad_tasks():
    with pytest.raises(ValueError, match="seq_len"):
        task_module.MQARTask(seq_len=32, num_pairs=8, vocab_size=64, min_distance=16)
    with pytest.raises(ValueError, match="num_pairs"):
        task_module.MQARTask(seq_len=256, num_pairs=40, vocab_size=64)
    with pytest.raises(ValueError, match="mixer"):
        mqar.RecallConfig("mamba")


@pytest.mark.parametrize("mixer", list(mqar.MIXERS))
def test_every_mixer_trains_with_finite_gradients(mixer):
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig(mixer, vocab_size=64, hidden_size=32))
    assert mqar.conv_reach(model.config) < TASK.min_distance
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(3):
        x, y = task_module.mqar_batch(TASK, 8, gen)
        loss = recall_training.answer_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for name, p in model.named_parameters():
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
        opt.step()
        losses.append(loss.item())
    assert all(map(torch.isfinite, map(torch.tensor, losses)))


def test_the_recurrent_models_are_the_family_in_one_layer():
    """The four recurrent rows of MIXERS are the family's members, each in lesson 07b's layer: beta where
    the member is a delta rule, a gate per head or per key channel as its declaration decays, and nothing
    else differs (every other parameter has the same name and shape in all four)."""
    assert [n for n in mqar.MIXERS if n in mixers.MIXERS] == list(mixers.MIXERS)
    config = mqar.RecallConfig("hybrid", hidden_size=32)
    shapes = {}
    for name, member in mixers.MIXERS.items():
        layer = mqar.build_mixer(config, name)
        assert type(layer) is kimi_linear.KimiDeltaAttention and layer.rule is member
        names = {n: tuple(p.shape) for n, p in layer.named_parameters()}
        assert ("b_proj.weight" in names) == member.delta
        assert ("a_proj.weight" in names) == (member.decay == "head")
        assert ("f_a_proj.weight" in names) == ("f_b_proj.weight" in names) == (member.decay == "channel")
        assert ("A_log" in names) == ("dt_bias" in names) == (member.decay is not None)
        own = ("b_proj", "a_proj", "f_a_proj", "f_b_proj", "A_log", "dt_bias")          # beta and the gates
        shapes[name] = {n: s for n, s in names.items() if n.split(".")[0] not in own}
    assert all(s == shapes["kda"] for s in shapes.values())


def test_the_layer_runs_the_declared_form_or_a_callable_in_its_place():
    """The layer calls the form its config names, and a caller's callable with the same signature in its
    place; the recurrence and the chunked form give the same model output."""
    torch.manual_seed(0)
    x = torch.randint(0, 64, (2, 37))
    for name in mixers.MIXERS:
        calls = []

        def counted(*args, initial_state=None, name=name, calls=calls):
            calls.append(len(args))
            return mixers.get(name).recurrent(*args, initial_state=initial_state)

        config = mqar.RecallConfig(name, vocab_size=64, hidden_size=32, chunk_size=16)
        torch.manual_seed(1)
        chunked = mqar.RecallModel(config).double()
        torch.manual_seed(1)
        substituted = mqar.RecallModel(config, form=counted).double()
        torch.manual_seed(1)
        recurrent = mqar.RecallModel(dataclasses.replace(config, form="recurrent")).double()
        with torch.no_grad():
            ref = chunked(x)
            lab.check_close(f"{name}: a callable in place of the form", ref, substituted(x))
            lab.check_close(f"{name}: the recurrent form", ref, recurrent(x))
        assert calls == [3 + len(mixers.get(name).args)] * 2, (name, calls)        # q, k, v, [g,] [beta]


def test_the_models_are_causal():
    """Changing a later token changes no earlier logit (the mixers read only the past)."""
    torch.manual_seed(0)
    x = torch.randint(0, 64, (2, 40))
    for mixer in mqar.MIXERS:
        model = mqar.RecallModel(mqar.RecallConfig(mixer, vocab_size=64, hidden_size=32)).double()
        y = x.clone()
        y[:, 25] = (y[:, 25] + 1) % 64
        with torch.no_grad():
            a, b = model(x), model(y)
        assert torch.equal(a[:, :25], b[:, :25]), mixer
        assert not torch.allclose(a[:, 25:], b[:, 25:]), mixer


def test_no_conv_makes_every_convolution_the_identity():
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("hybrid", vocab_size=64, hidden_size=32, conv=False))
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv1d)]
    assert len(convs) == 3 * 3 + 1                                # q, k, v in 3 KDA layers, 1 before MLA
    x = torch.randn(2, 9, 32)
    for conv in convs:
        assert not conv.weight.requires_grad
        channels = x.repeat(1, 1, conv.weight.shape[0] // 32)
        lab.check_close("a frozen convolution", channels, kimi_linear.short_conv(channels, conv.weight)[0],
                        rtol=1e-6)
    assert mqar.conv_reach(model.config) == 0


def test_a_gate_held_at_zero_is_deltanet():
    """KDA and gated DeltaNet with their gates held at g = 0 are DeltaNet: the same weights give the same
    output (the comparison KDA against DeltaNet is the decay ablation)."""
    torch.manual_seed(0)
    x = torch.randn(2, 10, 32)
    config = mqar.RecallConfig("hybrid", hidden_size=32, chunk_size=4)
    delta = mqar.build_mixer(config, "deltanet")
    for name in ("gated_deltanet", "kda"):
        gated = mqar.build_mixer(config, name)
        gated.load_state_dict(delta.state_dict(), strict=False)
        shape = (2, 10, 2) if name == "gated_deltanet" else (2, 10, 2, 16)
        gated.log_decay = lambda x, shape=shape: x.new_zeros(shape)
        lab.check_close(f"{name} with g = 0 vs DeltaNet", delta(x)[0], gated(x)[0], rtol=1e-5)
        assert not torch.allclose(delta(x)[0], mqar.build_mixer(config, name)(x)[0])


def test_state_numbers_match_the_real_caches():
    """The per-layer numbers `state_numbers` counts are what the lesson modules' caches hold."""
    T, D, H = 21, 32, 2
    config = mqar.RecallConfig("hybrid", hidden_size=D, num_heads=H)
    x = torch.randn(1, T, D)
    numbers = mqar.state_numbers(config, T)
    _, kda_cache = kimi_linear.KimiDeltaAttention(config.layer_config("kda"))(x)
    assert numbers[0] == kda_cache.nbytes // 4
    _, latent = mla.MultiHeadLatentAttention(config.mla_config())(x)
    conv_tail = D * (config.conv_size - 1)
    assert numbers[3] == latent.nbytes // 4 + conv_tail
    attention = mqar.RecallConfig("attention", hidden_size=D, num_heads=H)
    _, kv = gpt2.CausalSelfAttention(gpt2.GPTConfig(num_heads=H, hidden_size=D))(x)
    assert mqar.state_numbers(attention, T) == [kv.nbytes // 4 + conv_tail] * 2


def test_attention_learns_the_smallest_setting():
    task = task_module.MQARTask(seq_len=64, num_pairs=4, vocab_size=64, min_distance=16)
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("attention", vocab_size=64, hidden_size=64))
    result = recall_training.train(model, task, recall_training.TrainConfig(steps=400), log=None)
    assert result["accuracy"][0] >= 0.95, result["curve"]


# --- The recipe: weight decay and gate initialisation as the reference layers ---------------------------

def test_no_weight_decay_on_gates_norms_and_biases():
    """Every trainable parameter is in exactly one group; A_log, dt_bias, every norm's scale and every
    bias sit in the group without decay, every projection, embedding and convolution filter in the other."""
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("hybrid", vocab_size=64, hidden_size=32))
    model.blocks.append(mqar.Block(mqar.RecallConfig("gated_deltanet", hidden_size=32), "gated_deltanet"))
    model.blocks.append(mqar.Block(mqar.RecallConfig("attention", hidden_size=32), "attention"))
    decayed, exempt = (g["params"] for g in recall_training.parameter_groups(model, 0.1))
    groups = recall_training.parameter_groups(model, 0.1)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    ids = lambda ps: {id(p) for p in ps}
    assert ids(decayed) | ids(exempt) == ids(model.parameters()) and not ids(decayed) & ids(exempt)
    expect_exempt = set()
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            norm = isinstance(module, torch.nn.RMSNorm | torch.nn.LayerNorm)
            if name in ("A_log", "dt_bias", "bias") or norm:
                expect_exempt.add(id(p))
    assert sum(1 for n, _ in model.named_parameters() if n.endswith(("A_log", "dt_bias"))) == 3 * 2 + 2
    assert ids(exempt) == expect_exempt
    assert any(isinstance(m, torch.nn.Embedding) and id(m.weight) in ids(decayed) for m in model.modules())


def test_tables_of_vectors_are_not_decayed_and_no_model_of_the_sweep_has_one():
    """AttnRes's [2L + 1, D] tables (a pseudo-query and a key-norm weight per mix point) are trained as the
    vectors they are, without weight decay, in a copy too. The committed sweep ran before that rule existed,
    and mqar_sweep.SAME_COMPUTATION calls its groups unchanged: no model of its grid has such a table."""
    from kimik3_lessons import kimik3
    model = kimik3.KimiK3(kimik3.KimiK3Config.tiny())
    decayed, exempt = ({id(p) for p in g["params"]} for g in recall_training.parameter_groups(model, 0.1))
    tables = [model.attn_res.queries, model.attn_res.norm_weights]
    assert all(t.ndim == 2 and id(t) in exempt and id(t) not in decayed for t in tables)
    copied = copy.deepcopy(model)                                    # a copy keeps them exempt
    exempt = {id(p) for p in recall_training.parameter_groups(copied, 0.1)[1]["params"]}
    assert id(copied.attn_res.queries) in exempt and id(copied.attn_res.norm_weights) in exempt
    sweep = load_sweep()
    grid = sweep.GRIDS["full"]
    points = sweep.lesson11_points("full") + [p for stage in grid["stages"]
                                              for p in sweep.search_points("full", stage)]
    tasks = [mqar.MQARTask(seq_len=64, num_pairs=4, **sweep.TASK)]
    for point in points:
        torch.manual_seed(0)
        model = mqar.RecallModel(sweep.model_config({**point, "width": 32}, tasks))
        assert not any(getattr(m, "no_weight_decay_tables", ()) for m in model.modules()), point


def test_a_gate_without_weight_decay_keeps_its_value():
    """With no gradient, AdamW's decoupled decay alone moves a decayed parameter and leaves the gates."""
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("kda", vocab_size=64, hidden_size=32))
    layer = model.blocks[0].mixer
    with torch.no_grad():
        layer.dt_bias.fill_(-3.0)
    before = layer.dt_bias.clone(), layer.q_proj.weight.clone()
    opt = torch.optim.AdamW(recall_training.parameter_groups(model, 0.1), lr=1.0)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    assert torch.equal(layer.dt_bias, before[0])
    lab.check_close("decayed weight", before[1] * (1 - 0.1), layer.q_proj.weight, rtol=1e-6)


def test_the_gates_start_as_flash_linear_attentions_layers_or_spread():
    """gate_start="fla": KDA as fla/layers/kda.py (dt_bias = 0, rates in [1, 16]), gated DeltaNet as
    fla/layers/gated_deltanet.py (rates in [0, 16], step sizes in [0.001, 0.1]). gate_start="spread": at zero
    input every gate decays -A·dt with Mamba-2's A in [1, 16] and dt log-uniform in [0.001, 0.1], KimiK3's
    bounded gate as the Mamba-2 gate: two draws of many channels have the same quantiles."""
    torch.manual_seed(0)
    model = mqar.RecallModel(mqar.RecallConfig("kda", vocab_size=64, hidden_size=64, gate_start="fla"))
    for block in model.blocks:
        layer = block.mixer
        assert torch.equal(layer.dt_bias, torch.zeros(64))
        rates = layer.A_log.exp()
        assert rates.min() >= 1 and rates.max() <= 16 and rates.std() > 2        # drawn, not constant
    config = kimi_linear.KDAConfig(8, 4000, 2, mixer="gated_deltanet", gate_start="fla")
    A_log, dt_bias = kimi_linear.gate_start(config)
    rates, steps = A_log.exp(), torch.nn.functional.softplus(dt_bias)
    assert 0 <= rates.min() < 0.1 and 15.9 < rates.max() <= 16
    assert 1e-3 * (1 - 1e-5) <= steps.min() < 1.1e-3 and 0.09 < steps.max() <= 0.1 * (1 + 1e-5)
    assert abs(steps.log().mean() - math.log(1e-2)) < 0.1                          # log-uniform: centred
    zero = {}
    for gate in ("mamba2", "bounded"):
        config = kimi_linear.KDAConfig(8, 64, 64, forget_gate=gate)              # 4096 channels
        torch.manual_seed(1 if gate == "bounded" else 2)
        layer = kimi_linear.KimiDeltaAttention(config).double()
        zero[gate] = -layer.log_decay(torch.zeros(1, 1, 8, dtype=torch.double)).flatten()
    q = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.double)
    lab.check_close("-g at zero input, quantiles: bounded vs Mamba-2 gate", zero["mamba2"].quantile(q),
                    zero["bounded"].quantile(q), rtol=0.08)
    assert 1e-3 < zero["bounded"].min() and zero["bounded"].max() < 1.6 + 1e-9          # A·dt in [0.001, 1.6]


def test_zero_input_half_lives_are_how_long_a_state_keeps_half():
    """A state decayed by the layer's own gate at zero input for `half-life` tokens keeps half of itself:
    checked by running lesson 07's and lesson 06's recurrences on zero keys (no writes, only decay)."""
    torch.manual_seed(0)
    for mixer in ("kda", "gated_deltanet"):
        model = mqar.RecallModel(mqar.RecallConfig(mixer, vocab_size=64, hidden_size=32)).double()
        (i, lives), _ = mqar.zero_input_half_lives(model)
        layer = model.blocks[i].mixer
        with torch.no_grad():
            if mixer == "kda":                      # perturb the init so every channel differs
                layer.dt_bias.copy_(torch.linspace(-6, 1, 32))
            else:
                layer.dt_bias.copy_(torch.tensor([-5.0, -1.0]))
        lives = dict(mqar.zero_input_half_lives(model))[i]
        T, H, K = 40, 2, 16
        q, k = torch.zeros(1, H, T, K, dtype=torch.double), torch.zeros(1, H, T, K, dtype=torch.double)
        v, beta, S0 = torch.zeros(1, H, T, K, dtype=torch.double), torch.zeros(1, H, T, dtype=torch.double), \
            torch.ones(1, H, K, K, dtype=torch.double)
        x = torch.zeros(1, T, 32, dtype=torch.double)
        with torch.no_grad():
            g = layer.log_decay(x).transpose(1, 2)
            if mixer == "kda":
                _, S = kda.recurrent(q, k, v, g, beta, initial_state=S0)
                kept = S[0, :, :, 0].flatten()                       # channel (h, d) keeps exp(T g)
            else:
                _, S = gated_deltanet.recurrent(q, k, v, g, beta, initial_state=S0)
                kept = S[0, :, 0, 0]
        lab.check_close("state kept after T tokens", kept, 0.5 ** (T / lives), rtol=1e-9)


def test_lesson_11s_modules_import_no_later_lesson():
    """The task and the training loop, which lesson 11 uses, import nothing of lesson 12 (mqar)."""
    script = ("import sys\nfrom kimik3_lessons import recall_task, recall_training\n"
              "print(sorted(m for m in sys.modules if m.startswith('kimik3_lessons.')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    loaded = done.stdout
    assert "recall_training" in loaded and "kimik3_lessons.mqar" not in loaded, done.stderr[-2000:]
    assert "kimik3_lessons.kimik3" not in loaded and "kimik3_lessons.mla" not in loaded


# --- The sweep: one file per run, resumable, the rate chosen on held-out accuracy ---------------------

def load_sweep():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "mqar_sweep.py"
    spec = importlib.util.spec_from_file_location("mqar_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_run(sweep, point, held_out, code=None):
    """A run file as one_run writes it, with made-up results: held-out accuracy `held_out` at every
    evaluation."""
    return {"run": sweep.run_name(point), **point, "accuracy": [held_out - 0.01] * 3,
            "held_out": [held_out] * 3, "steps": 800, "seconds": 2.0, "cpu_seconds": 1.0,
            "curve": [(s, 1.0, [held_out] * 3) for s in (650, 700, 750, 800)], "answers": [], "gates": [],
            "state_numbers": [1, 2, 3], "parameters": 7, "torch": "x", "code": code or {"f": "1"},
            "pairs": [4, 8, 16]}


def write(tmp_path, sweep, run):
    (tmp_path / f"{run['run']}.json").write_text(json.dumps(run))


def test_the_sweep_runs_stage_by_stage_and_chooses_each_points_rate_on_its_search_seeds(tmp_path):
    sweep = load_sweep()
    grid = sweep.GRIDS["full"]
    first = grid["stages"][0]
    search = sweep.search_points("full", first)
    names = [sweep.run_name(p) for p in search]
    assert len(set(names)) == len(names) == len(sweep.LRS) * len(sweep.SEARCH_SEEDS) * len(first["models"])
    assert not set(sweep.SEARCH_SEEDS) & set(sweep.SEEDS) and len(sweep.SEEDS) >= 5
    lesson11 = sweep.lesson11_points("full")
    assert sweep.next_runs("full", tmp_path) == lesson11                      # the cheap stage first
    for p in lesson11:
        write(tmp_path, sweep, fake_run(sweep, p, 0.9))
    assert sweep.next_runs("full", tmp_path) == search                        # then the first search only
    runs, total = sweep.points("full", tmp_path)
    stages = grid["stages"]
    assert total == len(lesson11) + sum(len(st["models"]) * (len(sweep.LRS) * len(sweep.SEARCH_SEEDS)
                                                            + len(sweep.SEEDS)) for st in stages)
    # made-up search results: kda best at 3e-2; attention tied at 1e-2 and 3e-2 (the smaller wins);
    # every other model best at 3e-3
    def score(p):
        table = {"kda": {3e-2: 0.9}, "attention": {1e-2: 1.0, 3e-2: 1.0}}.get(p["mixer"], {3e-3: 0.8})
        return table.get(p["lr"], 0.1) if not p["options"] else (0.7 if p["lr"] == 1e-2 else 0.1)
    for p in search[:-1]:
        write(tmp_path, sweep, fake_run(sweep, p, score(p)))
    assert sweep.chosen_lrs("full", first, tmp_path) is None                 # one search run missing
    assert sweep.next_runs("full", tmp_path) == search[-1:]
    summary = sweep.assemble("full", tmp_path)
    assert not summary["complete"] and names[-1] in summary["missing"]
    write(tmp_path, sweep, fake_run(sweep, search[-1], score(search[-1])))
    lrs = sweep.chosen_lrs("full", first, tmp_path)
    for m, o in first["models"]:
        expected = 1e-2 if o else {"kda": 3e-2, "attention": 1e-2}.get(m, 3e-3)
        assert lrs[sweep.model_key(m, o)] == expected, (m, o)
    final = sweep.next_runs("full", tmp_path)
    assert {p["seed"] for p in final} == set(sweep.SEEDS)
    assert len(final) == len(first["models"]) * len(sweep.SEEDS)
    assert all(p["lr"] == lrs[sweep.model_key(p["mixer"], p["options"])] for p in final)
    for p in final:
        write(tmp_path, sweep, fake_run(sweep, p, score({**p, "lr": p["lr"]})))
    nxt = sweep.next_runs("full", tmp_path)
    assert nxt == sweep.search_points("full", stages[1])                     # the next stage's search
    summary = sweep.assemble("full", tmp_path)
    kda_point = next(q for q in summary["points"] if q["mixer"] == "kda" and not q["options"]
                     and q["task"] == "mqar")
    assert kda_point["lr"] == 3e-2 and kda_point["seeds"] == list(sweep.SEEDS)
    assert kda_point["lr_scores"] == pytest.approx({"0.003": 0.1, "0.01": 0.1, "0.03": 0.9})
    assert len({sweep.run_name(r) for r in summary["runs"]}) == len(summary["runs"])


def test_the_summary_refuses_runs_of_different_code(tmp_path):
    sweep = load_sweep()
    p, q = sweep.lesson11_points("full")[:2]
    write(tmp_path, sweep, fake_run(sweep, p, 0.9, code={"kimik3_lessons/kda.py:chunked": "a", "g": "1"}))
    write(tmp_path, sweep, fake_run(sweep, q, 0.9, code={"kimik3_lessons/kda.py:chunked": "a", "h": "2"}))
    code = sweep.assemble("full", tmp_path)["code"]
    assert code == {"kimik3_lessons/kda.py:chunked": "a", "g": "1", "h": "2"}
    write(tmp_path, sweep, fake_run(sweep, q, 0.9, code={"kimik3_lessons/kda.py:chunked": "b"}))
    with pytest.raises(ValueError, match="different sources of kimik3_lessons/kda.py:chunked"):
        sweep.assemble("full", tmp_path)


def test_the_code_digest_follows_what_a_function_computes_not_its_layout():
    sweep = load_sweep()

    def digest(source):
        space = {"torch": torch}
        exec(compile(source, "<test>", "exec"), space)
        return sweep.code_digest(space["f"].__code__)

    base = "def f(x, y):\n    \"\"\"Add.\"\"\"\n    return x + y\n"
    same = ["def f(x, y):\n    \"\"\"Add two numbers.\"\"\"\n    return x + y  # sum\n",
            "\n\ndef f(x,\n      y):\n    return (x\n            + y)\n",
            "def f(x, y):\n    return x + y\n"]
    other = ["def f(x, y):\n    return x - y\n", "def f(x, z):\n    return x + z\n",
             "def f(x, y):\n    return x + y + 0\n", "def f(x, y):\n    return (lambda a: a + y)(x)\n",
             "def f(x, y):\n    \"\"\"Add.\"\"\"\n    return x + y + 1\n"]
    assert all(digest(s) == digest(base) for s in same)
    assert len({digest(s) for s in other} | {digest(base)}) == len(other) + 1


def test_the_trace_records_the_functions_a_run_executes():
    sweep = load_sweep()
    point = dict(task="mqar", mixer="gated_deltanet", options={}, width=16, seq_len=64, lr=1e-2, seed=0)
    tc = recall_training.TrainConfig(steps=1, eval_every=1, eval_size=2, test_size=2)
    _, code = sweep.executed_code(sweep.build_and_train, point, "full", tc, 0)
    for ran in ("kimik3_lessons/gated_deltanet.py:chunked", "kimik3_lessons/gated_deltanet.py:mamba2_gate",
                "kimik3_lessons/kimi_linear.py:KimiDeltaAttention.forward",
                "kimik3_lessons/recall_training.py:train",
                "benchmarks/mqar_sweep.py:build_and_train"):
        assert ran in code, ran
    assert not any(k.startswith(("kimik3_lessons/kda.py", "kimik3_lessons/mla.py")) for k in code)
    assert sweep.stale_code(code) == []
    assert sweep.stale_code({**code, "kimik3_lessons/gated_deltanet.py:chunked": "0" * 16}) == \
        ["kimik3_lessons/gated_deltanet.py:chunked"]


def test_the_committed_sweep_ran_this_code():
    """Every function the committed sweep's runs executed still has the source they ran (up to layout,
    comments and docstrings). If this fails, the sweep is stale: rerun it (make sweep) or undo the change."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "mqar_sweep_summary.json"
    if not path.exists():
        pytest.skip("no committed sweep")
    summary = json.loads(path.read_text())
    assert load_sweep().stale_code(summary["code"]) == []


# --- Comparing points over seeds ---------------------------------------------------------------------

def test_the_permutation_test_by_hand_and_by_sampling():
    assert mqar.permutation_p([3.0], [1.0, 2.0]) == pytest.approx(1 / 3)      # splits {3}, {1}, {2}
    assert mqar.permutation_p([1.0] * 5, [0.0] * 5) == pytest.approx(1 / 252)  # complete separation
    assert mqar.permutation_p([0.0] * 5, [1.0] * 5) == 1.0
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(5, generator=gen) + 0.3, torch.rand(5, generator=gen)
    pooled, observed = torch.cat([a, b]), a.mean() - b.mean()
    perms = torch.stack([torch.randperm(10, generator=gen) for _ in range(20000)])
    diffs = pooled[perms[:, :5]].mean(1) - pooled[perms[:, 5:]].mean(1)
    sampled = (diffs >= observed - 1e-12).double().mean().item()
    assert abs(mqar.permutation_p(a, b) - sampled) < 0.01             # random splits approach the exact p


def test_the_permutation_test_refuses_what_is_not_a_few_seeds():
    """Per-seed values only: a tensor of activations (not 1-D) or hundreds of values (C(2n, n) splits, each
    enumerated) are refused at once instead of filling the memory (tests/test_exercises.py's walk hands
    lesson tensors to every package function)."""
    with pytest.raises(ValueError, match="1-D"):
        mqar.permutation_p(torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match=f"1 to {mqar.MAX_SEEDS}"):
        mqar.equivalence_p(torch.zeros(400), torch.zeros(400), 0.1)


def test_equivalence_needs_both_sides_inside_the_margin():
    tight_a, tight_b = [0.99, 0.995, 1.0, 0.99, 0.998], [0.992, 1.0, 0.997, 0.991, 0.99]
    assert mqar.equivalence_p(tight_a, tight_b, 0.02) == pytest.approx(1 / 252)
    assert mqar.equivalence_p(tight_a, tight_b, 0.001) > 0.05                  # a margin too small to show
    assert mqar.equivalence_p(tight_a, [0.5] + tight_b[1:], 0.02) > 0.05       # one seed far off


def test_holm_rejects_step_down():
    assert mqar.holm([0.004, 0.004, 0.03, 0.5]) == [True, True, False, False]   # 0.03 > 0.05 / 2
    assert mqar.holm([0.5, 0.01, 0.001]) == [False, True, True]
    assert mqar.holm([1 / 252] * 13) == [False] * 13                            # 1/252 > 0.05 / 13
