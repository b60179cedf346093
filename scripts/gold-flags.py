#!/usr/bin/env python3
"""Runs the answer checks on every gold answer of each set (right by construction) and
writes evals/results/answer_checks_gold.json: how many right answers the checks would
wrongly flag. Model-free; needs a release build (cargo build --release) and the external
sets fetched (scripts/fetch-data.sh).

Usage: python3 scripts/gold-flags.py [--askdb target/release/askdb]
"""
import argparse
import datetime
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SETS = ["demo", "chinook", "defog", "spider"]


def checks_in_source():
    """The rule ids as plausibility.rs spells them (Check::as_str), in rule order."""
    source = (ROOT / "src/agent/plausibility.rs").read_text()
    body = source.split("pub fn as_str(self)", 1)[1].split("\n    }\n", 1)[0]
    return [name for name in re.findall(r'=> "([a-z_]+)"', body)
            if not name.startswith("explanation_")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--askdb", default=str(ROOT / "target/release/askdb"))
    args = parser.parse_args()
    sets = {}
    for name in SETS:
        run = subprocess.run([args.askdb, "--json", "eval", "flags", "--gold", name],
                             capture_output=True, text=True, cwd=ROOT)
        if run.returncode != 0:
            sys.exit(f"gold-flags: {name}: {run.stderr.strip()}")
        report = json.loads(run.stdout)
        sets[name] = {key: report[key] for key in
                      ("checked", "flagged", "not_run", "flagged_answers")}
        print(f"{name}: {report['flagged']} of {report['checked']} flagged")
    out = {
        "what": "The answer checks (src/agent/plausibility.rs) run on every gold answer of "
                "each set, right by construction: how many right answers they would wrongly "
                "flag. Model-free: askdb eval flags --gold SET (scripts/gold-flags.py).",
        "sets": sets,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "checks": checks_in_source(),
    }
    path = ROOT / "evals/results/answer_checks_gold.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
