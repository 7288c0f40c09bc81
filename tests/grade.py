#!/usr/bin/env python3
"""Grade `cpq assess --format json` against a label file.

usage: grade.py LABELS.json FIXTURE_DIR [--cpq CMD] [--verbose]
Prints one line per failing case and a summary as the last line:
  verdicts a/b · required x/y · forbidden hits z · gates g/h · api u/v
Exit 0 only when everything matches.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def run(cpq, path, args):
    cmd = shlex.split(cpq) + ["assess", path, "--format", "json"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout)

def has(findings, code, func):
    return any(f.get("code") == code and (func == "*" or f.get("function") == func
               or str(f.get("function", "")).endswith("." + func)) for f in findings)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("labels"); ap.add_argument("fixtures")
    ap.add_argument("--cpq", default=os.environ.get("CPQ", "cpq"))
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    cases = json.load(open(a.labels))["cases"]
    tot = dict(v=0, vok=0, r=0, rok=0, fb=0, g=0, gok=0, api=0, apiok=0, err=0)
    for c in cases:
        path = os.path.join(a.fixtures, c["file"])
        try:
            rep = run(a.cpq, path, c.get("args", []))
        except Exception as e:
            tot["err"] += 1; tot["v"] += 1
            print(f"{c.get('id', c['file'])}: ERROR {e}"); continue
        problems = []
        want = c["verdict"] if isinstance(c["verdict"], list) else [c["verdict"]]
        tot["v"] += 1
        if rep.get("verdict") in want: tot["vok"] += 1
        else: problems.append(f"verdict {rep.get('verdict')!r} != {want}")
        fs = [f for f in rep.get("findings", []) if not f.get("suppressed")]
        for code, func in c.get("required", []):
            tot["r"] += 1
            if has(fs, code, func): tot["rok"] += 1
            else: problems.append(f"missing {code}@{func}")
        for code, func in c.get("forbidden", []):
            if has(fs, code, func):
                tot["fb"] += 1; problems.append(f"forbidden {code}@{func}")
        gates = {str(g.get("gate")): g.get("status") for g in rep.get("gates", [])}
        for k, v in c.get("gates", {}).items():
            tot["g"] += 1
            if gates.get(k) == v: tot["gok"] += 1
            else: problems.append(f"gate {k} {gates.get(k)!r} != {v!r}")
        apis = {g.get("api") for g in rep.get("api_gaps", [])}
        for api in c.get("api_gaps", []):
            tot["api"] += 1
            if api in apis: tot["apiok"] += 1
            else: problems.append(f"api gap {api} not listed")
        for api in c.get("api_gaps_absent", []):
            tot["api"] += 1
            if api not in apis: tot["apiok"] += 1
            else: problems.append(f"api gap {api} listed but unlisted in manifest")
        for k, v in c.get("context_source", {}).items():
            src = (rep.get("context", {}).get(k) or {}).get("source")
            if src != v: problems.append(f"context {k} source {src!r} != {v!r}")
        if problems or a.verbose:
            print(f"{c.get('id', c['file'])}: " + ("; ".join(problems) or "ok"))
    ok = (tot["vok"] == tot["v"] and tot["rok"] == tot["r"] and tot["fb"] == 0
          and tot["gok"] == tot["g"] and tot["apiok"] == tot["api"] and tot["err"] == 0)
    print(f"verdicts {tot['vok']}/{tot['v']} · required {tot['rok']}/{tot['r']} · "
          f"forbidden hits {tot['fb']} · gates {tot['gok']}/{tot['g']} · api {tot['apiok']}/{tot['api']}"
          + (f" · errors {tot['err']}" if tot['err'] else ""))
    sys.exit(0 if ok else 1)

if __name__ == "__main__":
    main()
