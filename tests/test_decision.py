"""The decision framework: each verdict rule, each gate boundary, size inference, context."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cpq.config.context import Context, ContextError, parse_elements, parse_gpu
from cpq.pipeline.assessment import assess

VECTORIZED = """
    import numpy as np

    def step(a: np.ndarray, b: np.ndarray):
        return a * 2.0 + b
"""

BLOCKS_TEMPLATE = """
    import numpy as np

    def f1(a: np.ndarray):
        return a[::2]

    def f2(a: np.ndarray):
        return a[::-1]

    def f3(a: np.ndarray):
        return a.ravel(order="F")
"""


def _assess(tmp_path: Path, code: str, **options) -> object:
    path = tmp_path / "mod.py"
    path.write_text(textwrap.dedent(code))
    return assess(path, Context.from_options(**options))


def _gate(result, number: int) -> str:
    return {g.number: g.status for g in result.decision.gates}[number]


# --- Gate 2: 65,535 vs 65,536 elements per GPU ------------------------------------------


@pytest.mark.parametrize(
    ("elements", "gpus", "status"),
    [
        ("65535", 1, "fail"),
        ("65536", 1, "uncertain"),
        ("131070", 2, "fail"),
        ("131072", 2, "uncertain"),
        ("1M", 1, "pass"),
        ("20M", 4, "pass"),
    ],
)
def test_gate2_partition_floor_per_gpu(tmp_path, elements, gpus, status) -> None:
    result = _assess(tmp_path, VECTORIZED, elements=elements, gpus=gpus, gpu="H100")
    assert _gate(result, 2) == status
    if status == "fail":
        assert result.verdict == "NOT RECOMMENDED" and result.decision.verdict_rule == 3
    else:
        assert result.verdict == "READY"


def test_gate2_counts_nodes(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="1M", gpus=8, nodes=2)
    assert result.decision.per_gpu == (62500, 62500)
    assert _gate(result, 2) == "fail"


# --- Gate 1: sm_60 vs sm_70 -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "status"),
    [
        ("sm_60", "fail"),
        ("P100", "fail"),
        ("6.0", "fail"),
        ("sm_70", "pass"),
        ("V100", "pass"),
        ("H100", "pass"),
        ("7.0", "pass"),
    ],
)
def test_gate1_compute_capability(tmp_path, gpu, status) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="50M", gpu=gpu)
    assert _gate(result, 1) == status
    if status == "fail":
        assert result.verdict == "NOT RECOMMENDED" and result.decision.verdict_rule == 1
        assert all(g.status == "n/a" for g in result.decision.gates if g.number > 1)
    else:
        assert result.verdict == "READY"


def test_gate1_unknown_gpu_is_uncertain_not_failure(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="50M")
    assert _gate(result, 1) == "uncertain"
    assert result.verdict == "READY"


# --- Verdict rules 4–8 ------------------------------------------------------------------------


def test_three_blocks_sites_are_significant_two_are_light(tmp_path) -> None:
    three = _assess(tmp_path, BLOCKS_TEMPLATE, elements="50M")
    assert three.decision.blocks_sites == 3
    assert (three.verdict, three.decision.verdict_rule) == ("SIGNIFICANT REFACTOR", 5)
    two = _assess(tmp_path, BLOCKS_TEMPLATE.replace('a.ravel(order="F")', "a.ravel()"), elements="50M")
    assert two.decision.blocks_sites == 2
    assert (two.verdict, two.decision.verdict_rule) == ("LIGHT REFACTOR", 6)


def test_r108_alone_is_significant(tmp_path) -> None:
    code = VECTORIZED + "\nfrom mpi4py import MPI\n"
    result = _assess(tmp_path, code, elements="50M")
    assert result.decision.blocks_sites == 1
    assert (result.verdict, result.decision.verdict_rule) == ("SIGNIFICANT REFACTOR", 4)


def test_refactor_only_is_light(tmp_path) -> None:
    code = """
        import numpy as np

        def relax(u: np.ndarray, steps: int):
            for _ in range(steps):
                tmp = np.zeros_like(u)
                u += tmp
            return u
    """
    result = _assess(tmp_path, code, elements="50M")
    assert (result.verdict, result.decision.verdict_rule) == ("LIGHT REFACTOR", 7)


def test_nothing_found_is_ready(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="50M")
    assert (result.verdict, result.decision.verdict_rule) == ("READY", 8)


def test_setup_code_run_once_does_not_count(tmp_path) -> None:
    code = """
        import numpy as np

        def main():
            a = np.arange(100)
            print(sum(a), list(a), a[::2])

        if __name__ == "__main__":
            main()
    """
    result = _assess(tmp_path, code, elements="50M")
    assert {f.code for f in result.findings} >= {"R110", "R106"}
    assert result.decision.blocks_sites == 0
    assert result.verdict == "READY"


# --- Rule 9: the one-tier demotion ---------------------------------------------------------


def test_not_implemented_api_demotes_ready_to_light(tmp_path) -> None:
    code = VECTORIZED + "\n\ndef smooth(x, xp, fp):\n    return np.interp(x, xp, fp)\n"
    result = _assess(tmp_path, code, elements="50M")
    assert (result.verdict, result.decision.verdict_rule) == ("LIGHT REFACTOR", 9)
    assert [g.api for g in result.decision.api_gaps] == ["numpy.interp"]


def test_not_implemented_api_demotes_light_to_significant(tmp_path) -> None:
    code = BLOCKS_TEMPLATE.replace('a.ravel(order="F")', "np.interp(a, a, a)")
    code = code.replace("return a[::-1]", "return a")
    result = _assess(tmp_path, code, elements="50M")
    assert result.decision.blocks_sites == 1
    assert (result.verdict, result.decision.verdict_rule) == ("SIGNIFICANT REFACTOR", 9)


def test_demotion_never_reaches_not_recommended(tmp_path) -> None:
    code = BLOCKS_TEMPLATE + "\n\ndef g(x):\n    return np.interp(x, x, x)\n"
    result = _assess(tmp_path, code, elements="50M")
    assert result.verdict == "SIGNIFICANT REFACTOR"


def test_boundary_io_does_not_demote(tmp_path) -> None:
    code = VECTORIZED + "\n\ndef load(path):\n    return np.load(path)\n"
    result = _assess(tmp_path, code, elements="50M")
    assert result.verdict == "READY"
    assert [(g.api, g.hot) for g in result.decision.api_gaps] == [("numpy.load", False)]


def test_single_gpu_api_matters_only_with_several_nodes(tmp_path) -> None:
    code = VECTORIZED + "\n\ndef basis(m):\n    return np.linalg.svd(m)\n"
    one_node = _assess(tmp_path, code, elements="50M", nodes=1)
    assert one_node.verdict == "READY" and one_node.decision.api_gaps == []
    two_nodes = _assess(tmp_path, code, elements="500M", gpus=4, nodes=2)
    assert two_nodes.verdict == "LIGHT REFACTOR"
    assert [g.api for g in two_nodes.decision.api_gaps] == ["numpy.linalg.svd"]


# --- Size inference ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "size"),
    [
        ("N = 4096\n\ndef f():\n    return np.zeros((N, N))\n", 4096 * 4096),
        ("N = 1 << 26\n\ndef f(n=N):\n    return np.linspace(0, 1, n)\n", 1 << 26),
        ("FRAME = 8192\n\ndef f():\n    return np.empty(FRAME)\n", 8192),
        (
            "def f(n_paths=1_000_000):\n    rng = np.random.default_rng(0)\n"
            "    return rng.standard_normal(n_paths)\n",
            1_000_000,
        ),
        ("NX, NY = 300, 200\n\ndef f():\n    return np.ones((NX, NY, 2))\n", 120000),
    ],
)
def test_size_is_inferred_from_constants(tmp_path, code, size) -> None:
    result = _assess(tmp_path, "import numpy as np\n" + code)
    assert (result.decision.size_low, result.decision.size_source) == (size, "inferred")
    assert result.decision.size_where.startswith("mod.py:")


def test_given_size_wins_over_inferred(tmp_path) -> None:
    result = _assess(
        tmp_path, "import numpy as np\nN = 100\n\ndef f():\n    return np.zeros(N)\n", elements="16M"
    )
    assert (result.decision.size_low, result.decision.size_source) == (16_000_000, "given")


def test_default_size_when_nothing_is_known(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED)
    d = result.decision
    assert (d.size_low, d.size_high, d.size_source) == (30_000_000, 50_000_000, "default")


# --- Context parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8192", 8192),
        ("16M", 16_000_000),
        ("2.5e8", 250_000_000),
        ("16384x16384", 16384**2),
        ("1_000_000", 1_000_000),
        ("2k", 2000),
        ("1G", 10**9),
    ],
)
def test_parse_elements(text, value) -> None:
    assert parse_elements(text) == value


@pytest.mark.parametrize("text", ["", "lots", "-5", "0"])
def test_parse_elements_rejects(text) -> None:
    with pytest.raises(ContextError):
        parse_elements(text)


@pytest.mark.parametrize(
    ("text", "cc"),
    [
        ("P100", 60),
        ("V100", 70),
        ("T4", 75),
        ("A100", 80),
        ("A10", 86),
        ("L4", 89),
        ("L40S", 89),
        ("H100", 90),
        ("H200", 90),
        ("B200", 100),
        ("GB200", 100),
        ("sm_60", 60),
        ("sm_90", 90),
        ("8.6", 86),
        ("nvidia a100-sxm4-80gb", 80),
    ],
)
def test_parse_gpu(text, cc) -> None:
    assert parse_gpu(text)[1] == cc


def test_unknown_gpu_model_is_an_error() -> None:
    with pytest.raises(ContextError):
        parse_gpu("Voodoo2")


def test_pattern_override(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="50M", pattern="graph")
    assert result.decision.pattern == "graph"
    assert _gate(result, 4) == "fail"
    assert result.verdict == "NOT RECOMMENDED"


def test_cpu_only_run(tmp_path) -> None:
    result = _assess(tmp_path, VECTORIZED, elements="10000", cpu_only=True)
    assert _gate(result, 1) == "pass"
    assert result.verdict == "READY"


# --- the report words the numbers the rules compare with ------------------------------------


def _rules_with(tmp_path: Path, old: str, new: str) -> Path:
    from cpq.rules.program import rules_text

    text = rules_text()
    assert text.count(old) == 1, old
    path = tmp_path / "rules.dl"
    path.write_text(text.replace(old, new))
    return path


def test_the_wording_takes_its_numbers_from_the_threshold_relation(tmp_path) -> None:
    from cpq.report.wording import gate_reason, verdict_reason

    default = _assess(tmp_path, BLOCKS_TEMPLATE, elements="50M", gpu="V100")
    assert verdict_reason(default) == "Rule 5: 3 BLOCKS sites on hot paths (three or more)."
    rules = _rules_with(tmp_path, 'threshold("several_blocks", 3).', 'threshold("several_blocks", 4).')
    rules.write_text(
        rules.read_text().replace(
            'threshold("min_compute_capability", 70).', 'threshold("min_compute_capability", 75).'
        )
    )
    code = tmp_path / "mod.py"
    changed = assess(code, Context.from_options(elements="50M", gpu="V100"), rules_path=rules)
    assert changed.decision.thresholds["several_blocks"] == 4
    assert verdict_reason(changed) == (
        "Rule 1: Gate 1 fails: the hardware cannot run cuPyNumeric (compute capability below 7.5)."
    )
    gate1 = next(g for g in changed.decision.gates if g.number == 1)
    assert gate_reason(gate1, changed) == "V100 is sm_70: Pascal and older are not supported (needs ≥ 7.5)"
    small = assess(code, Context.from_options(elements="50M", gpu="H100"), rules_path=rules)
    assert verdict_reason(small) == "Rule 6: 3 recipe-fixable BLOCKS site(s) on hot paths (one to three)."


def test_a_verdict_relation_without_exactly_one_verdict_is_an_error_not_ready(tmp_path) -> None:
    from cpq.engine import DatalogError

    (tmp_path / "mod.py").write_text(textwrap.dedent(VECTORIZED))
    rules = _rules_with(tmp_path, "verdict(V, R) :- base_verdict(V, R), !demotion().", "")
    with pytest.raises(DatalogError, match="must derive exactly one verdict, they derived none"):
        assess(tmp_path / "mod.py", Context.from_options(elements="50M"), rules_path=rules)
