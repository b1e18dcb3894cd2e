"""Configs make the options (issue 22; the store's and evaluation's since issue 33): `vimpac-pretrain` /
`vimpac-finetune` have one option for each knob of the model's and the loop's config dataclasses, `vimpac-tokenize`
one for each of `TokenizeConfig`'s, the checkpoint tools one for each of `InferenceConfig`'s and `ProbeConfig`'s, with
the field's doc as help; a bad value is one line naming the option; the run notebooks' parameters cells are written
from the same fields (tools/sync_parameters.py)."""

import dataclasses, importlib.util
from pathlib import Path
import pytest
from vimpac.cli import pretrain_main, pretrain_parser, finetune_parser, model_spec
from vimpac.finetune import FinetuneConfig
from vimpac.model import VimpacConfig
from vimpac.pretrain import PretrainConfig
from vimpac.utils import VimpacError
from vimpac.options import (
    OptionParser,
    add_config_options,
    config_argv,
    config_fields,
    config_from_options,
    option_name,
    parameter_lines,
)

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class Toy:
    "A config as the kit writes them: typed fields, docs in metadata, checks in `__post_init__`."

    steps: int = dataclasses.field(default=3, metadata={"help": "updates"})
    lr: float | None = dataclasses.field(default=None, metadata={"help": "peak learning rate; None: 100% the model's"})
    betas: tuple = (0.9, 0.98)
    sizes: tuple[int, int, int] = (1, 2, 3)
    mode: str = "a"
    fast: bool = False
    slow: bool = True
    tokens: int = dataclasses.field(default=0, metadata={"cli": False, "help": "derived from the data"})

    def __post_init__(self):
        from vimpac.utils import check_number

        check_number("steps", self.steps, integer=True, ge=1)
        if self.lr is not None:
            check_number("lr", self.lr, gt=0)
        for b in self.betas:
            check_number("betas", b, ge=0, lt=1)
        if self.mode not in ("a", "b"):
            raise VimpacError(f"mode: expected 'a' or 'b', got {self.mode!r}")


def toy_parser():
    p = OptionParser(prog="toy", raise_errors=True)
    assert add_config_options(p, Toy) == ["steps", "lr", "betas", "sizes", "mode", "fast", "slow"]
    return p


TOY_ARGV = [
    "--steps",
    "5",
    "--lr",
    "0.1",
    "--betas",
    "0.5",
    "0.6",
    "--sizes",
    "4",
    "5",
    "6",
    "--mode",
    "b",
    "--fast",
    "--no-slow",
]


def test_toy_options_round_trip():
    p = toy_parser()
    assert config_from_options(Toy, p.parse_args([])) == Toy()
    a = p.parse_args(TOY_ARGV)
    want = Toy(steps=5, lr=0.1, betas=(0.5, 0.6), sizes=(4, 5, 6), mode="b", fast=True, slow=False)
    assert config_from_options(Toy, a) == want
    argv = config_argv(Toy, dataclasses.asdict(want))
    assert argv == TOY_ARGV
    assert config_from_options(Toy, p.parse_args(argv)) == want
    text = p.format_help()
    assert "updates (default: 3)" in text and "None: 100% the model's" in text and "--tokens" not in text
    assert "mode (default: a)" in text  # a field without a doc: its name


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--steps", "0"], "argument --steps: expected an integer >= 1, got '0'"),
        (["--steps", "x"], "argument --steps: expected an integer >= 1, got 'x'"),
        (["--lr", "nan"], "argument --lr: expected a finite number > 0, got 'nan'"),
        (["--betas", "0.9", "1"], "argument --betas: expected a finite number >= 0 and < 1, got '1'"),
        (["--betas", "0.9"], "argument --betas: expected 2 arguments"),
        (["--sizes", "1", "2", "x"], "argument --sizes: expected an integer, got 'x'"),
        (["--mode", "c"], "argument --mode: expected 'a' or 'b', got 'c'"),
    ],
)
def test_toy_bad_values_name_the_option(argv, message):
    with pytest.raises(VimpacError) as e:
        toy_parser().parse_args(argv)
    assert str(e.value) == message


def test_parameter_lines():
    lines = parameter_lines(Toy, defaults=dict(steps=6))
    assert [line.split(" # ")[0].rstrip() for line in lines] == [
        "steps: int = 6",
        "lr: Optional[float] = None",
        "betas: list = [0.9, 0.98]",
        "sizes: list = [1, 2, 3]",
        'mode: str = "a"',
        "fast: bool = False",
        "slow: bool = True",
    ]
    assert lines[0].endswith("# updates") and all(len(line) <= 120 for line in lines)


def options_of(parser) -> set:
    return {s for a in parser._actions for s in a.option_strings}


@pytest.mark.parametrize("parser,config_class", [(pretrain_parser, PretrainConfig), (finetune_parser, FinetuneConfig)])
def test_every_knob_is_an_option(parser, config_class):
    have = options_of(parser())
    knobs = config_fields(config_class) + config_fields(VimpacConfig)
    assert {option_name(f.name) for f in knobs} <= have
    for paper in (
        ("--mask-ratio", "--num-blocks", "--d-max", "--alpha", "--temperature")
        if config_class is PretrainConfig
        else ()
    ):
        assert paper in have
    for knob in ("--layout", "--norm", "--dropout", "--weight-decay", "--warmup-ratio", "--betas", "--preset"):
        assert knob in have
    assert not {"--vocab-size", "--token-map", "--pad-id", "--mask-id"} & have  # the store's, not knobs


RUN_OPTIONS = [  # the run options both commands have had
    "--preset",
    "--layout",
    "--dropout",
    "--steps",
    "--epochs",
    "--save-every",
    "--keep-last",
    "--log-every",
    "--seed",
    "--resume",
    "--precision",
    "--compile",
    "--gradient-checkpointing",
    "--num-workers",
    "--device",
    "--batch-size",
    "--micro-batch-size",
    "--lr",
    "--clip-len",
]
OLD_PRETRAIN = [
    "--store",
    "--out",
    *RUN_OPTIONS,
    "--d-max",
    "--alpha",
    "--temperature",
    "--init",
    "--peak-tflops",
    "--no-eval",
]
OLD_FINETUNE = [
    "--store",
    "--test-store",
    "--out",
    "--init",
    "--official",
    "--new-head",
    *RUN_OPTIONS,
    "--views",
]


def test_old_options_keep_working():
    assert set(OLD_PRETRAIN) <= options_of(pretrain_parser())
    assert set(OLD_FINETUNE) <= options_of(finetune_parser())


def test_pretrain_options_make_the_configs():
    a = pretrain_parser().parse_args(
        [
            "--store",
            "s",
            "--out",
            "o",
            "--mask-ratio",
            "0.3",
            "--num-blocks",
            "4",
            "--weight-decay",
            "0.1",
            "--warmup-ratio",
            "0.2",
            "--d-max",
            "2",
            "--micro-batch-size",
            "auto",
            "--epochs",
            "2",
            "--compile",
            "--norm",
            "pre",
            "--layout",
            "T,H,W",
            "--preset",
            "small",
            "--num-layers",
            "3",
        ]
    )
    assert config_from_options(PretrainConfig, a) == PretrainConfig(
        mask_ratio=0.3, num_blocks=4, weight_decay=0.1, warmup_ratio=0.2, d_max=2.0, epochs=2.0, compile=True
    )
    assert model_spec(a) == dict(preset="small", num_layers=3, layout="T,H,W", norm="pre")
    a = finetune_parser().parse_args(["--store", "s", "--out", "o", "--views", "noflip", "--lr", "1e-4"])
    assert config_from_options(FinetuneConfig, a) == FinetuneConfig(views="noflip", lr=1e-4)
    assert model_spec(a) is None


@pytest.mark.parametrize(
    "options,line",
    [
        (["--mask-ratio", "1"], "argument --mask-ratio: expected a finite number > 0 and < 1, got '1'"),
        (["--num-blocks", "0"], "argument --num-blocks: expected an integer >= 1, got '0'"),
        (["--weight-decay", "-1"], "argument --weight-decay: expected a finite number >= 0, got '-1'"),
        (["--warmup-ratio", "2"], "argument --warmup-ratio: expected a finite number >= 0 and <= 1, got '2'"),
        (["--betas", "0.9", "1.5"], "argument --betas: expected a finite number >= 0 and < 1, got '1.5'"),
        (["--norm", "mid"], "argument --norm: expected 'post' or 'pre', got 'mid'"),
        (["--layout", "T,H"], None),  # a layout is good alone; refused only with head counts that do not divide
        (["--steps", "2", "--epochs", "1"], "argument --epochs: not allowed with argument --steps"),
    ],
)
def test_bad_values_are_one_line(options, line, tmp_path, capsys):
    out = tmp_path / "run"
    if line is None:
        pretrain_parser(raise_errors=True).parse_args(["--store", "s", "--out", str(out), *options])
        return
    with pytest.raises(SystemExit) as e:
        pretrain_main(["--store", str(tmp_path / "no-store"), "--out", str(out), *options])
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert e.value.code == 2 and err == [f"vimpac-pretrain: error: {line}"]
    assert not out.exists()


def load_sync():
    spec = importlib.util.spec_from_file_location("sync_parameters", ROOT / "tools" / "sync_parameters.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_run_notebooks_parameters_follow_the_configs():
    "Fails when a config field changes and `python tools/sync_parameters.py` was not run."
    assert load_sync().stale() == []


def test_run_notebook_parameters_pass_through_the_parser():
    "The pretrain notebook's generated parameters, as `config_argv` passes them on, give the config of their values."
    sync = load_sync()
    cfg, skip, defaults = sync.RUNS["nbs/runs/pretrain.ipynb"]
    values = {**dataclasses.asdict(cfg()), **defaults}
    a = pretrain_parser(raise_errors=True).parse_args(["--out", "o", *config_argv(cfg, values, skip)])
    assert config_from_options(cfg, a) == cfg(**defaults)


def test_papermill_reads_generated_lines_with_equals_in_the_doc():
    "papermill cannot read a parameter whose comment holds `=`: `parameter_lines` writes the doc without one."
    import nbformat
    from papermill.translators import PythonTranslator

    @dataclasses.dataclass
    class Doc:
        clip_len: int = dataclasses.field(default=5, metadata={"help": "T = frames per clip, 1 <= T"})
        ratio: float = dataclasses.field(default=0.1, metadata={"help": "a fraction, != 0"})

    lines = parameter_lines(Doc)
    assert lines[0].endswith("# T is frames per clip, 1 ≤ T") and lines[1].endswith("# a fraction, ≠ 0")
    params = PythonTranslator.inspect(nbformat.v4.new_code_cell("\n".join(lines)))
    assert [(p.name, p.inferred_type_name, p.default) for p in params] == [
        ("clip_len", "int", "5"),
        ("ratio", "float", "0.1"),
    ]


# --- the store's and evaluation's options come from their configs too (issue 33) ------------------------------------


def _help(main, capsys) -> str:
    "A console script's `--help`, its whitespace collapsed (argparse wraps the lines)."
    with pytest.raises(SystemExit):
        main(["--help"])
    return " ".join(capsys.readouterr().out.split())


def _defaults(fn) -> dict:
    import inspect

    return {k: p.default for k, p in inspect.signature(fn).parameters.items()}


def test_tokenize_options_are_the_store_config():
    from vimpac.cli import tokenize_parser
    from vimpac.data import tokenize_dataset
    from vimpac.options import config_values, field_default, field_help
    from vimpac.store import TokenizeConfig, tokenize_videos

    p = tokenize_parser()
    fields = config_fields(TokenizeConfig)
    assert [f.name for f in fields] == [f.name for f in dataclasses.fields(TokenizeConfig)]
    for f in fields:
        action = next(a for a in p._actions if option_name(f.name) in a.option_strings)
        assert action.help.startswith(field_help(f).replace("%", "%%")), f.name
        assert action.default is None, f.name  # not given: the function's default, or the dataset preset's
        assert _defaults(tokenize_videos)[f.name] == field_default(f), f.name
        preset = f.name in ("fps", "frame_size", "views")  # tokenize_dataset's come from the dataset's preset
        assert _defaults(tokenize_dataset)[f.name] == (None if preset else field_default(f)), f.name
    a = p.parse_args(["v.mp4", "--out", "s", "--fps", "4", "--views", "all", "--num-shards", "2", "--shard-index", "1"])
    assert config_values(TokenizeConfig, a) == dict(fps=4.0, views="all", num_shards=2, shard_index=1)


def test_evaluation_options_are_the_configs(capsys):
    from vimpac.cli import evaluate_main, features_main, predict_main
    from vimpac.evaluate import InferenceConfig, evaluate_run, features_of, predict_videos
    from vimpac.options import field_default
    from vimpac.probes import ProbeConfig

    shared = config_fields(InferenceConfig)
    for main, fn in ((predict_main, predict_videos), (features_main, features_of), (evaluate_main, evaluate_run)):
        text = _help(main, capsys)
        for f in shared:
            assert option_name(f.name) in text, (main.__name__, f.name)
            if f.name != "views":  # each tool's own default: 3x10, 1x10, or the probe's / dataset's
                assert _defaults(fn)[f.name] == field_default(f), (fn.__name__, f.name)
    text = _help(evaluate_main, capsys)
    for f in config_fields(ProbeConfig):
        assert option_name(f.name) in text and _defaults(evaluate_run)[f.name] == field_default(f), f.name


def test_device_is_written_once(capsys):
    """Every tool that computes says the same about `--device`, from one place (`DEVICE_OPTION`)."""
    from vimpac import cli
    from vimpac.options import DEVICE_OPTION

    mains = ("tokenize", "pretrain", "finetune", "predict", "features", "evaluate", "showcase")
    for name in mains:
        text = _help(getattr(cli, f"{name}_main"), capsys)
        assert text.count(DEVICE_OPTION["help"]) == 1, name


@pytest.mark.parametrize(
    "call,says",
    [
        (lambda: __import__("vimpac.evaluate").evaluate.evaluate_run("no/run", "no/store", k=0), "k: expected"),
        (
            lambda: __import__("vimpac.evaluate").evaluate.evaluate_run("no/run", "no/store", precision="fp8"),
            "precision: expected one of",
        ),
        (
            lambda: __import__("vimpac.evaluate").evaluate.predict_videos(["x.mp4"], "no/run", batch_size=0),
            "batch_size: expected an integer >= 1, got 0",
        ),
        (
            lambda: __import__("vimpac.evaluate").evaluate.features_of(["x.mp4"], "no/run", "f.st", views="2x3"),
            "views '2x3': expected SPATIALxTEMPORAL",
        ),
        (
            lambda: __import__("vimpac.store").store.tokenize_videos(["x.mp4"], "s", "no/such/tokenizer", fps=0),
            "fps: expected a finite number > 0, got 0",
        ),
    ],
)
def test_bad_options_are_refused_before_anything_loads(call, says):
    """A bad option is refused by its config before the run, the tokenizer or the store is looked for (all missing
    here: an error about them would mean the option was checked too late)."""
    with pytest.raises(VimpacError) as e:
        call()
    assert str(e.value).startswith(says), str(e.value)
