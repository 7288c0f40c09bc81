"""Run the `run:` steps of action.yml here, as GitHub's runner runs the composite action.

The inputs are the action's defaults, overridden by `--input NAME=VALUE`; `${{ ... }}` in a
step's `run:` and `env:` is replaced (inputs, `github.action_path`, `github.workspace`,
`runner.temp`, `steps.ID.outputs.NAME`); each step runs as `shell: bash` runs there
(`bash --noprofile --norc -eo pipefail`), in the workspace, with `CI=true` and the GITHUB_*
files, and what it writes to `$GITHUB_OUTPUT` becomes its outputs. The `uses:` steps are
GitHub's own actions (setup-python, upload-sarif): skipped, and said so. `--skip ID` skips a
step of the action too (the tests skip `install`: they run this checkout's cpq, on PATH).

    python tests/action_local.py --workspace /tmp/ws --input path=src --skip install

Exit status: that of the first step that fails (later steps do not run), else 0. The action's
outputs are printed last, one `output NAME=VALUE` line each.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]  # GitHub's `shell: bash`


class ActionError(Exception):
    """action.yml uses something this runner cannot reproduce."""


class Context:
    """What `${{ }}` expressions read: the inputs, the paths, the steps' outputs so far."""

    def __init__(self, inputs: Mapping[str, str], action_path: Path, workspace: Path, temp: Path) -> None:
        self.inputs = dict(inputs)
        self.github = {"action_path": str(action_path), "workspace": str(workspace)}
        self.runner = {"temp": str(temp)}
        self.steps: dict[str, dict[str, str]] = {}

    def value(self, expression: str) -> str:
        parts = expression.split(".")
        if parts[0] == "inputs" and len(parts) == 2 and parts[1] in self.inputs:
            return self.inputs[parts[1]]
        if parts[0] in ("github", "runner") and len(parts) == 2:
            found = getattr(self, parts[0]).get(parts[1])
            if found is not None:
                return found
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return self.steps.get(parts[1], {}).get(parts[3], "")  # GitHub: empty when unset
        raise ActionError(f"expression not understood here: ${{{{ {expression} }}}}")

    def substitute(self, text: str) -> str:
        return EXPRESSION.sub(lambda match: self.value(match.group(1)), text)


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file: `NAME=VALUE` lines and `NAME<<DELIMITER` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            outputs[name] = "\n".join(block)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def run_step(step: Mapping[str, Any], context: Context, workspace: Path, temp: Path) -> int:
    if "if" in step:
        # Conditions are left to the scripts (see action.yml): a condition here would not be
        # what runs on GitHub.
        raise ActionError(f"step {step.get('id') or step.get('name')}: `if:` on a run step")
    if step.get("shell") != "bash":
        raise ActionError(f"step {step.get('id') or step.get('name')}: only `shell: bash` runs here")
    step_id = str(step.get("id", ""))
    files = {name: temp / f"{step_id or 'step'}-{name}" for name in ("output", "env", "path", "summary")}
    for file in files.values():
        file.write_text("", encoding="utf-8")
    script = temp / f"{step_id or 'step'}.sh"
    script.write_text(context.substitute(str(step["run"])), encoding="utf-8")
    env = {
        **os.environ,
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_ACTION_PATH": context.github["action_path"],
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(temp),
        "GITHUB_OUTPUT": str(files["output"]),
        "GITHUB_ENV": str(files["env"]),
        "GITHUB_PATH": str(files["path"]),
        "GITHUB_STEP_SUMMARY": str(files["summary"]),
    }
    for name, value in (step.get("env") or {}).items():
        env[str(name)] = context.substitute(str(value))
    status = subprocess.run([*BASH, str(script)], cwd=workspace, env=env, check=False).returncode
    if step_id:
        context.steps[step_id] = read_outputs(files["output"])
    return status


def run_action(
    action: Path, inputs: Mapping[str, str], workspace: Path, skip: set[str]
) -> tuple[int, dict[str, str]]:
    """Run the action's steps; (exit status, the action's outputs)."""
    spec = yaml.safe_load(action.read_text(encoding="utf-8"))
    if spec["runs"]["using"] != "composite":
        raise ActionError("only composite actions run here")
    declared = spec.get("inputs") or {}
    unknown = set(inputs) - set(declared)
    if unknown:
        raise ActionError(f"no such input: {', '.join(sorted(unknown))}")
    values = {name: str(entry.get("default", "")) for name, entry in declared.items()}
    values.update(inputs)
    status = 0
    with tempfile.TemporaryDirectory(prefix="cpq-action-") as temp_name:
        context = Context(values, action.resolve().parent, workspace, Path(temp_name))
        for step in spec["runs"]["steps"]:
            label = step.get("name") or step.get("id") or "step"
            if "uses" in step:
                print(f"action_local: skip {label} (uses {step['uses']}: GitHub's)", flush=True)
                continue
            if step.get("id") in skip:
                print(f"action_local: skip {label} (--skip)", flush=True)
                continue
            print(f"action_local: run {label}", flush=True)
            status = run_step(step, context, workspace, Path(temp_name))
            if status != 0:
                print(f"action_local: {label} failed with exit status {status}", flush=True)
                break
        outputs = {
            name: context.substitute(str(entry.get("value", "")))
            for name, entry in (spec.get("outputs") or {}).items()
        }
    return status, outputs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--action", type=Path, default=REPO / "action.yml")
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="where the steps run")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--skip", action="append", default=[], metavar="STEP_ID")
    options = parser.parse_args(argv)
    inputs = {}
    for item in options.input:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--input {item!r}: expected NAME=VALUE")
        inputs[name] = value
    try:
        status, outputs = run_action(options.action, inputs, options.workspace.resolve(), set(options.skip))
    except ActionError as exc:
        print(f"action_local: {exc}", file=sys.stderr)
        return 2
    for name, value in outputs.items():
        print(f"output {name}={value}")
    return status


if __name__ == "__main__":
    sys.exit(main())
