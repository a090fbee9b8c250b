import pytest

from bench.options import ALL_MODELS, DEFAULT_BACKENDS, DEFAULT_MODELS, parse_args


def test_defaults_run_the_representative_subset_in_the_standard_regime():
    options = parse_args([])
    assert options.mode == "performance"
    assert options.models == DEFAULT_MODELS
    assert options.backends == DEFAULT_BACKENDS
    assert options.regimes == ("standard",)
    assert options.baseline == "eager_cpu"
    assert options.peers == ()


def test_torchbench_style_flags():
    options = parse_args([
        "--accuracy", "--use-xla-baseline", "--randomize-input", "--only", "resnet18", "--only", "vgg16",
        "--backend", "eager", "--backend", "torchxla_trace_once", "--peers", "openxla_eval",
        "--batch-size", "2", "--iterations", "7", "--warmup", "0", "--output", "out", "--small",
        "--breakdown",
    ])
    assert options.mode == "accuracy"
    assert options.baseline == "xla_lazy"
    assert options.randomize_input
    assert options.models == ("resnet18", "vgg16")
    assert options.contenders == ("eager", "torchxla_trace_once", "openxla_eval")
    assert (options.batch_size, options.iterations, options.warmup) == (2, 7, 0)
    assert options.output == "out"
    assert options.regimes == ("small",)
    assert options.breakdown


def test_all_runs_the_seed_table_and_both_regimes_can_be_asked_for():
    options = parse_args(["--all", "--both-regimes"])
    assert options.models == ALL_MODELS
    assert options.regimes == ("standard", "small")


def test_repeated_names_count_once():
    assert parse_args(["--only", "alexnet", "--only", "alexnet"]).models == ("alexnet",)


@pytest.mark.parametrize("argv", [
    ["--only", "not_a_model"],
    ["--backend", "inductor"],
    ["--iterations", "0"],
    ["--warmup", "-1"],
    ["--all", "--only", "resnet18"],
    ["--performance", "--accuracy"],
    ["--small", "--both-regimes"],
])
def test_bad_command_lines_exit_with_usage(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_help_does_not_import_heavy_libraries():
    import subprocess
    import sys

    code = ("import sys, runpy; sys.argv = ['bench', '--help']\n"
            "try:\n    runpy.run_module('bench', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'torch_xla', 'torchvision', 'timm') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    assert "--use-xla-baseline" in out
