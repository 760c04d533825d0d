"""``simtc simulate`` and ``simtc timing mma`` (parsed with their own register functions)."""

import json

import pytest

from simtc.cli import _common, simulate, timing
from simtc.errors import SimtcError
from simtc.kernels.hazards import EXPECTED


def _main(argv, capsys):
    p = _common.ArgumentParser(prog="simtc")
    sub = p.add_subparsers(dest="command")
    simulate.register(sub)
    timing.register(sub)
    args = p.parse_args(argv)
    code = args.handler(args)
    return code, capsys.readouterr()


def test_timing_mma_json(capsys):
    code, out = _main(["timing", "mma", "--arch", "sm100", "--m", "128", "--n", "64", "--json"], capsys)
    d = json.loads(out.out)
    assert code == 0 and d["latency_cycles"] == 168 and d["ii_cycles"] == 48.0
    assert {"name", "value", "label", "source"} <= set(d["parameters"][0])


def test_timing_mma_refuses_ws_pair(capsys):
    with pytest.raises(SimtcError) as e:
        _main(["timing", "mma", "--m", "64", "--n", "64", "--ws", "--cta-group", "2"], capsys)
    assert e.value.rule == ".ws is cta_group::1 only"


def test_simulate_clean_flashmla_qk(capsys):
    for extra in ([], ["--timing-only"]):
        code, out = _main(["simulate", "flashmla-qk", "--json", *extra], capsys)
        d = json.loads(out.out)
        assert code == 0 and d["hazards"] == [] and d["deadlock"] is None
        assert set(d) >= {"cycles", "events", "wall_seconds", "per_role", "units"}
        assert d["units"]["tensor_pipe"]["busy_cycles"] > 0 and d["per_role"]["softmax"]["waiting_cycles"] > 0


@pytest.mark.parametrize("name", ["hazard/ld-before-commit", "hazard/deadlock-missing-arrive",
                                  "hazard/missing-proxy-fence"])
def test_simulate_flags_hazards_exit_1(name, capsys):
    code, out = _main(["simulate", name, "--json", "--timing-only"], capsys)
    d = json.loads(out.out)
    assert code == 1 and EXPECTED[name] in {h["rule"] for h in d["hazards"]}
    assert all(h["ref"].startswith("PTX ISA") for h in d["hazards"])
    code, out = _main(["simulate", f"{name}-fixed", "--json", "--timing-only"], capsys)
    assert code == 0


def test_simulate_json_file_and_picture(tmp_path, capsys):
    from simtc.kernels.hazards import build

    f = tmp_path / "p.json"
    f.write_text(json.dumps(build("hazard/tma-wrong-parity").to_json()))
    svg = tmp_path / "t.svg"
    code, out = _main(["simulate", str(f), "--timing-only", "--svg", str(svg), "--term-width", "100"], capsys)
    assert code == 1 and "smem-read-before-complete" in out.out and "tensor pipe" in out.out
    assert svg.read_text().startswith("<svg")


def test_simulate_until_and_step(capsys):
    code, out = _main(["simulate", "flashmla-qk", "--timing-only", "--until", "50", "--json"], capsys)
    d = json.loads(out.out)
    assert d["cycles"] <= 50
    code, out = _main(["simulate", "hazard/over-arrival-fixed", "--timing-only", "--step"], capsys)
    lines = [ln for ln in out.out.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    assert code == 0 and any("issue" in ln for ln in lines) and any("phase" in ln for ln in lines)
