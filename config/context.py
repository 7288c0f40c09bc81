"""The assessment context: problem size, GPUs, nodes, GPU model (decision.md, "Context").

Each value carries its source — given by the user, a default, or inferred from
the code — so every report can say which numbers it rests on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..runtime.evidence import RuntimeEvidence

DEFAULT_ELEMENTS = (30_000_000, 50_000_000)
DEFAULT_GPUS = (1, 4)
DEFAULT_NODES = 1
MAX_ELEMENTS = 10**15  # keeps every product in the rules within 64-bit integers
MAX_DEVICES = 1_000_000

# GPU model -> compute capability (major*10 + minor).
GPU_CAPABILITY: dict[str, int] = {
    "K80": 37,
    "M40": 52,
    "M60": 52,
    "P4": 61,
    "P40": 61,
    "P100": 60,
    "V100": 70,
    "T4": 75,
    "RTX6000": 75,
    "A100": 80,
    "A30": 80,
    "A10": 86,
    "A40": 86,
    "RTX3090": 86,
    "L4": 89,
    "L40": 89,
    "L40S": 89,
    "RTX4090": 89,
    "H100": 90,
    "H200": 90,
    "GH200": 90,
    "B100": 100,
    "B200": 100,
    "GB200": 100,
    "B300": 103,
    "GB300": 103,
}


# The compute patterns rules/pattern.dl knows (its pattern_rank facts, and "mixed"), which
# `--pattern` may name; any other word would reach Gate 4 as a pattern no rule judges.
KNOWN_PATTERNS = (
    "stencil",
    "dense-linalg",
    "fft",
    "monte-carlo",
    "reduction",
    "elementwise",
    "sparse",
    "graph",
    "ml",
    "string",
    "sequential",
    "python-loops",
    "no-array-work",
    "mixed",
)


class ContextError(ValueError):
    """A context option value that cannot be understood."""


_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9, "T": 10**12}


def parse_elements(text: str) -> int:
    """`8192`, `16M`, `2.5e8`, `16384x16384`, `1_000_000` -> a number of elements."""
    t = text.strip().replace("_", "").replace(",", "")
    if not t:
        raise ContextError("--elements needs a value such as 16M, 2.5e8 or 16384x16384")
    if re.search(r"[x×*]", t, re.I):
        total = 1
        for part in re.split(r"[x×*]", t, flags=re.I):
            total *= parse_elements(part)
        if total > MAX_ELEMENTS:
            raise ContextError(f"--elements: {text!r} is beyond any machine (at most {MAX_ELEMENTS:.0e})")
        return total
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([KMGBT]?)", t, re.I)
    if not m:
        raise ContextError(f"--elements: cannot read {text!r} (try 8192, 16M, 2.5e8, 16384x16384)")
    value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
    if value < 1:
        raise ContextError(f"--elements must be at least 1, got {text!r}")
    if value > MAX_ELEMENTS:
        raise ContextError(f"--elements: {text!r} is beyond any machine (at most {MAX_ELEMENTS:.0e})")
    return int(value)


def parse_gpu(text: str) -> tuple[str, int]:
    """A model (`H100`, `a100`), `sm_70`, or `7.0` -> (label, compute capability x10)."""
    t = text.strip().upper().replace(" ", "").replace("-", "")
    for prefix in ("NVIDIA", "TESLA", "GEFORCE"):
        if t.startswith(prefix):
            t = t[len(prefix) :]
    m = re.fullmatch(r"SM_?(\d)(\d+)", t)
    if m:
        return text.strip(), int(m.group(1)) * 10 + int(m.group(2)[0])
    m = re.fullmatch(r"(\d+)\.(\d)", t)
    if m:
        return text.strip(), int(m.group(1)) * 10 + int(m.group(2))
    for model, cc in GPU_CAPABILITY.items():
        if t == model or (t.startswith(model) and not t[len(model) :].isalnum()):
            return model, cc
    # Longest model name that prefixes the text: "A100SXM480GB" -> A100.
    for model in sorted(GPU_CAPABILITY, key=len, reverse=True):
        if t.startswith(model):
            return model, GPU_CAPABILITY[model]
    known = ", ".join(sorted(GPU_CAPABILITY))
    raise ContextError(f"--gpu: unknown model {text!r}; use one of {known}, or sm_XX / X.Y")


def parse_pattern(text: str) -> str:
    """`Stencil`, `dense_linalg`, `Monte Carlo` -> the pattern as rules/pattern.dl spells it; a
    near miss is answered with the pattern meant (`sequental` -> `sequential`)."""
    import difflib  # only when a pattern is given: it costs a few milliseconds to import

    word = re.sub(r"[\s_]+", "-", text.strip().lower())
    if word in KNOWN_PATTERNS:
        return word
    known = ", ".join(KNOWN_PATTERNS)
    close = difflib.get_close_matches(word, KNOWN_PATTERNS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ContextError(f"--pattern: unknown pattern {text!r}; {hint}known: {known}")


@dataclass
class ContextValue:
    low: int | None
    high: int | None
    source: str  # "given" | "default" | "inferred"
    where: str = ""  # file:line for inferred values
    label: str = ""  # e.g. the GPU model as given

    def text(self) -> str:
        if self.low is None:
            return "unknown"
        if self.high is not None and self.high != self.low:
            return f"{self.low:,}–{self.high:,}"
        return f"{self.low:,}"


@dataclass
class Context:
    elements: ContextValue = field(default_factory=lambda: ContextValue(*DEFAULT_ELEMENTS, "default"))
    gpus: ContextValue = field(default_factory=lambda: ContextValue(*DEFAULT_GPUS, "default"))
    nodes: ContextValue = field(default_factory=lambda: ContextValue(DEFAULT_NODES, DEFAULT_NODES, "default"))
    gpu: ContextValue = field(default_factory=lambda: ContextValue(None, None, "default"))
    cpu_only: bool = False
    pattern: str | None = None
    # What a profile and a Doctor report measured (--profile, --doctor); nothing by default.
    runtime: RuntimeEvidence = field(default_factory=RuntimeEvidence)

    @classmethod
    def from_options(
        cls,
        elements: str | None = None,
        gpus: int | None = None,
        nodes: int | None = None,
        gpu: str | None = None,
        cpu_only: bool = False,
        pattern: str | None = None,
    ) -> Context:
        ctx = cls(cpu_only=cpu_only, pattern=parse_pattern(pattern) if pattern is not None else None)
        if elements is not None:
            n = parse_elements(elements)
            ctx.elements = ContextValue(n, n, "given")
        if gpus is not None:
            if not 1 <= gpus <= MAX_DEVICES:
                raise ContextError(f"--gpus must be between 1 and {MAX_DEVICES:,}")
            ctx.gpus = ContextValue(gpus, gpus, "given")
        if nodes is not None:
            if not 1 <= nodes <= MAX_DEVICES:
                raise ContextError(f"--nodes must be between 1 and {MAX_DEVICES:,}")
            ctx.nodes = ContextValue(nodes, nodes, "given")
        if gpu is not None:
            label, cc = parse_gpu(gpu)
            ctx.gpu = ContextValue(cc, cc, "given", label=label)
        return ctx

    def facts(self) -> list[tuple[str, int]]:
        """The context as `context_number(key, value)` facts for rules.dl."""
        out: list[tuple[str, int]] = []
        if self.elements.low is not None:
            out.append(("elements_given", 1 if self.elements.source == "given" else 0))
            out.append(("elements_min", self.elements.low))
            out.append(("elements_max", self.elements.high or self.elements.low))
        out.append(("gpus_min", self.gpus.low or 1))
        out.append(("gpus_max", self.gpus.high or self.gpus.low or 1))
        out.append(("nodes", self.nodes.low or 1))
        if self.gpu.low is not None:
            out.append(("compute_capability", self.gpu.low))
        out.append(("cpu_only", 1 if self.cpu_only else 0))
        return out
