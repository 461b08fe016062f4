"""Equal-issue mode and token latencies in the conf files the harness writes: the round's
rows carry mlperf.conf's ``sample_concatenate_permutation`` and ``use_token_latencies``,
the run's ``mlperf.conf`` states them, LoadGen reads them, and the sample count the
progress display expects is padded as LoadGen pads an equal-issue run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from suite.config.loader import ConfigRequest, load_config
from suite.harness.settings import LoadGenSettings, equal_issue_padded, write_settings
from suite.paths import find_paths
from suite.scenarios import Mode

_QUICK = ["loadgen.min_duration_ms=1000", "loadgen.expected_qps=50"]


def _write(benchmark: str, tmp_path: Path, scenario: str = "offline",
           backend: str = "onnxruntime") -> tuple[LoadGenSettings, str]:
    config, _ = load_config(ConfigRequest(benchmark=benchmark, scenario=scenario,
                                          backend=backend, sets=_QUICK), find_paths())
    settings = write_settings(config, Mode.PERFORMANCE, tmp_path / benchmark)
    return settings, Path(settings.mlperf_conf).read_text(encoding="utf-8")


def test_3d_unet_writes_equal_issue_and_resnet50_does_not(tmp_path: Path) -> None:
    unet, unet_conf = _write("3d-unet-99", tmp_path)
    resnet, resnet_conf = _write("resnet50", tmp_path)
    assert "3d-unet.Offline.sample_concatenate_permutation = 1" in unet_conf.splitlines()
    assert "use_token_latencies" not in unet_conf
    assert "sample_concatenate_permutation" not in resnet_conf
    assert "use_token_latencies" not in resnet_conf
    # 1.1 x 1 s x 50/s = 55 samples, padded to whole permutations of the 43 loaded cases
    assert (unet.expected_samples, unet.equal_issue_set) == (86, 43)
    assert (resnet.expected_samples, resnet.equal_issue_set) == (24576, 0)


def test_whisper_writes_token_latencies_once_and_an_llm_keeps_its_own(tmp_path: Path) -> None:
    _, whisper = _write("whisper", tmp_path)
    assert [line for line in whisper.splitlines() if "whisper.Offline." in line][-2:] == [
        "whisper.Offline.sample_concatenate_permutation = 1",
        "whisper.Offline.use_token_latencies = 1"]
    _, llama = _write("llama3.1-8b", tmp_path, "server", "torch-llm")
    assert llama.count("use_token_latencies = 1") == 1  # the LLM's, with its TTFT/TPOT
    assert "llama3_1-8b.Server.sample_concatenate_permutation = 1" in llama


def test_loadgen_reads_the_written_lines(tmp_path: Path) -> None:
    """Our files alone (``conf_type=2`` loads no embedded conf) switch LoadGen's modes on."""
    unet, _ = _write("3d-unet-99", tmp_path)
    whisper, _ = _write("whisper", tmp_path)
    resnet, _ = _write("resnet50", tmp_path)
    code = ("import sys, mlperf_loadgen as lg\n"
            "for path, model in zip(sys.argv[1::2], sys.argv[2::2]):\n"
            "    ts = lg.TestSettings()\n"
            "    assert ts.FromConfig(path, model, 'Offline', 2) == 0\n"
            "    print(int(ts.sample_concatenate_permutation), int(ts.use_token_latencies))\n")
    control = tmp_path / "control.conf"  # 3d-unet without our line: the switch stays off
    control.write_text("3d-unet.Offline.min_query_count = 43\n", encoding="utf-8")
    args = [arg for s in (unet, whisper, resnet) for arg in (s.mlperf_conf, s.loadgen_model)]
    out = subprocess.run([sys.executable, "-c", code, *args, str(control), "3d-unet"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:4] == ["1 0", "1 1", "0 0", "0 0"]


def test_padding_is_loadgens() -> None:
    # loadgen.cc GenerateQueries: pad to a multiple of the loaded set, unless already one
    assert [equal_issue_padded(n, 43) for n in (1, 43, 44, 86)] == [43, 43, 86, 86]
    assert equal_issue_padded(55, 0) == 55  # not an equal-issue benchmark
