"""The laboratory's engine: seeded, TrialConfig, the one loop fit() and the batched trials."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from posenc.book import realtext, training, vision
from posenc.book.engine import FitResult, TrialConfig, fit, fit_batched, seeded
from posenc.book.resources import resource_path


def _linear_problem(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=gen, dtype=torch.float64)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)

    def batches():
        while True:
            idx = torch.randint(0, 64, (8,), generator=gen)
            yield x[idx], y[idx]

    return x, y, batches()


def _mse(model, batch):
    return ((model(batch[0]) - batch[1]) ** 2).mean()


def test_seeded_is_one_function_and_restores_the_global_state():
    assert training.seeded is seeded and realtext.seeded is seeded
    torch.manual_seed(5)
    expected = torch.rand(1)
    torch.manual_seed(5)
    with seeded(1):
        torch.rand(3)
    assert torch.equal(torch.rand(1), expected)


def test_fit_runs_the_budget_and_records_every_loss():
    with seeded(0):
        model = torch.nn.Linear(3, 1).double()
    _, _, batches = _linear_problem()
    out = fit(model, batches, _mse, optimiser=torch.optim.SGD(model.parameters(), lr=0.05), steps=30)
    assert isinstance(out, FitResult) and out.stop == "budget" and out.steps_run == 30
    assert len(out.train_loss) == 30 and all(isinstance(v, float) for v in out.train_loss)
    assert out.train_loss[-1] < out.train_loss[0]


def test_fit_keeps_the_best_held_out_state_and_stops_on_patience():
    with seeded(0):
        model = torch.nn.Linear(3, 1).double()
    x, y, batches = _linear_problem()
    values = iter([3.0, 1.0, 2.0, 2.5, 0.5])
    states = []

    def evaluate(m):
        states.append({k: v.clone() for k, v in m.state_dict().items()})
        return next(values)

    out = fit(model, batches, _mse, optimiser=torch.optim.SGD(model.parameters(), lr=0.05), steps=50,
              evaluate=evaluate, every=2, patience=2, keep_best=True)
    assert out.stop == "patience" and out.steps_run == 8
    assert out.history == [(2, 3.0), (4, 1.0), (6, 2.0), (8, 2.5)]
    assert out.best_step == 4 and out.best_value == 1.0
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), states[1].values()))


def test_fit_stop_after_gives_the_first_losses_of_the_whole_run():
    def run(**kw):
        with seeded(0):
            model = torch.nn.Linear(3, 1).double()
        _, _, batches = _linear_problem()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        return fit(model, batches, _mse, optimiser=opt, steps=20, schedule=lambda s: 0.1 * (1 - s / 20), **kw)

    assert run(stop_after=7).train_loss == run().train_loss[:7]
    assert run(stop_after=7).stop == "stop_after"


def test_fit_names_a_non_finite_loss():
    model = torch.nn.Linear(3, 1)
    batches = iter(lambda: (torch.full((2, 3), float("nan")), torch.zeros(2, 1)), None)
    with pytest.raises(ValueError, match="step 1"):
        fit(model, batches, _mse, optimiser=torch.optim.SGD(model.parameters(), lr=0.1), steps=3)


@pytest.mark.parametrize("cls", [training.RunConfig, realtext.TextConfig, realtext.GridConfig, vision.VisionConfig])
def test_trial_configs_round_trip_and_reject_unknown_fields(cls):
    config = cls()
    assert isinstance(config, TrialConfig)
    assert cls.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="no_such_field"):
        cls.from_dict({"no_such_field": 1})
    with pytest.raises(TypeError, match="settings"):
        cls.from_dict([1])


def _saved(name: str) -> dict:
    return json.loads(resource_path(name).read_text())


def test_config_defaults_are_the_protocol_that_ran():
    assert training.RunConfig().to_dict() == _saved("alternatives.json")["config"]
    assert realtext.GridConfig().to_dict() == _saved("realtext.json")["protocol"]["config"]
    # TextConfig's defaults are the base experiments/learned_table.py overrides (steps and eval_every only)
    learned = dataclasses.replace(realtext.TextConfig(), steps=2000, eval_every=500)
    assert learned.to_dict() == _saved("learned_table.json")["protocol"]["config"]
    assert vision.CanvasConfig().to_dict() == _saved("vision_canvas.json")["config"]


def test_first_losses_of_chapter_6_are_those_of_train_model():
    config = training.RunConfig(steps=40, batch_size=8, lr=1e-2, bos=True)
    with seeded(2):
        model = config.model("randomized")
    losses = training.train_model(model, "offset_copy", config, seed=2)
    unit = dict(scheme="randomized", task="offset_copy", variant="bos", role="main")
    assert training.first_losses(config.to_dict() | {"bos": False}, 2, 12, **unit) == losses[:12]


def test_fit_batched_trains_each_trial_alone():
    def batches(seed):
        _, _, it = _linear_problem(seed)
        return it

    def models():
        out = []
        for seed in range(3):
            with seeded(seed):
                out.append(torch.nn.Linear(3, 1).double())
        return out

    pack = fit_batched(models(), [batches(s) for s in range(3)], lambda f, x, y: ((f(x) - y) ** 2).mean(),
                       lrs=[0.01, 0.03, 0.1], steps=12, evaluate=lambda i, m: 0.0, every=4)
    alone = fit_batched(models()[2:], [batches(2)], lambda f, x, y: ((f(x) - y) ** 2).mean(),
                        lrs=[0.1], steps=12, evaluate=lambda i, m: 0.0, every=4)
    assert pack[2].train_loss == alone[0].train_loss
    assert [s for s, _ in pack[0].history] == [4, 8, 12]
    with pytest.raises(ValueError, match="lrs"):
        fit_batched(models(), [batches(0)] * 3, lambda f, x, y: f(x).sum(), lrs=[0.1], steps=2)


@pytest.mark.parametrize("scheme", ["rope", "randomized", "t5"])
def test_a_trial_is_the_same_in_a_pack_of_1_or_of_6(scheme):
    config = training.RunConfig(steps=8, batch_size=4, eval_size=8, eval_every=4, warmup=3)
    one_models, one = training.train_pack(scheme, "offset_copy", [3], [3e-3], config)
    seeds, lrs = [0, 1, 2, 3, 4, 5], [1e-3, 1e-2, 1e-3, 3e-3, 1e-2, 1e-3]
    six_models, six = training.train_pack(scheme, "offset_copy", seeds, lrs, config)
    assert one[0].train_loss == six[3].train_loss
    assert one[0].history == six[3].history and one[0].best_step == six[3].best_step
    for a, b in zip(one_models[0].state_dict().values(), six_models[3].state_dict().values()):
        assert torch.equal(a, b)
    # the batched trial draws the batches of train_model: it starts from the same loss
    with seeded(3):
        model = config.model(scheme)
    first = training.train_model(model, "offset_copy", dataclasses.replace(config, steps=1), seed=3)
    assert first[0] == pytest.approx(one[0].train_loss[0], rel=1e-6)

