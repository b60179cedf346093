#!/usr/bin/env python3
"""The first-attempt ablation table of docs/decisions/0009, from finished run folders.

    scripts/ablation-figures.py --out evals/results/ablations.json \
        --doc docs/decisions/0009-first-attempt-for-small-models.md \
        NAME=RUN_FOLDER [NAME=RUN_FOLDER ...]

Each RUN_FOLDER is a finished `askdb eval run` folder (manifest.json, questions.jsonl,
summary.json, replies/). Every row is scored on the questions that all the named runs
asked, so runs over a longer sample compare on the same questions as the shorter ones.
The figures (with each run's date, model and strategy) go to --out as JSON; the table
between `<!-- generated:ablation:begin -->` and `<!-- generated:ablation:end -->` in
--doc is rewritten from them. Nothing here calls a model: it only reads what runs wrote.
"""

import argparse
import json
import math
import os
import sys


def wilson(successes, total, z=1.96):
    if total == 0:
        return (0.0, 0.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def is_success(record):
    """The harness's own rule (src/eval/metrics.rs `is_success`): the right answer for an
    answerable question, the right refusal or clarification for an unanswerable one."""
    expected, decision = record.get("expected", "answer"), record.get("decision")
    if expected == "answer":
        return decision == "answer" and bool(record.get("correct"))
    if expected == "refuse":
        return decision == "decline"
    if expected == "clarify":
        return decision == "clarify"
    if expected == "refuse_or_clarify":
        return decision in ("decline", "clarify")
    return False


def percentile(values, share):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))
    return ordered[index]


def read_records(folder):
    records = []
    with open(os.path.join(folder, "questions.jsonl")) as lines:
        for line in lines:
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                # A run killed mid-line leaves a partial last line; it is not a record.
                continue
    return records


def replies_at_limit(folder):
    """(calls, candidates, candidates cut off at the token limit) over the run's replies."""
    calls = candidates = cut = 0
    root = os.path.join(folder, "replies")
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".json"):
                continue
            with open(os.path.join(directory, name)) as file:
                reply = json.load(file)
            calls += 1
            for each in [reply] + list(reply.get("alternatives") or []):
                candidates += 1
                cut += 1 if each.get("truncated") else 0
    return calls, candidates, cut


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--doc")
    parser.add_argument("runs", nargs="+", metavar="NAME=RUN_FOLDER")
    arguments = parser.parse_args()

    runs = []
    for spec in arguments.runs:
        name, _, folder = spec.partition("=")
        if not folder:
            sys.exit(f"ablation-figures: {spec!r} is not NAME=RUN_FOLDER")
        with open(os.path.join(folder, "manifest.json")) as file:
            manifest = json.load(file)
        summary_path = os.path.join(folder, "summary.json")
        if not os.path.exists(summary_path):
            sys.exit(f"ablation-figures: {folder} has no summary.json (the run did not finish)")
        with open(summary_path) as file:
            summary = json.load(file)
        runs.append((name, folder, manifest, summary, read_records(folder)))

    common = None
    for _, _, _, _, records in runs:
        ids = {record["id"] for record in records}
        common = ids if common is None else common & ids

    rows = []
    for name, folder, manifest, summary, records in runs:
        calls, candidates, cut = replies_at_limit(folder)
        settings = manifest["settings"]
        for mode in settings["modes"]:
            chosen = [
                r
                for r in records
                if r["mode"] == mode
                and r["id"] in common
                and r.get("decision") != "infrastructure_failure"
            ]
            correct = sum(1 for r in chosen if is_success(r))
            latencies = [r.get("latency_ms", 0) for r in chosen]
            lower, upper = wilson(correct, len(chosen))
            rows.append(
                {
                    "name": name,
                    "mode": mode,
                    "strategy": settings.get("strategy", ""),
                    "set": settings["set"],
                    "questions": len(chosen),
                    "correct": correct,
                    "rate": correct / len(chosen) if chosen else None,
                    "wilson95": [lower, upper],
                    "latency_p50_ms": percentile(latencies, 0.5),
                    "latency_p95_ms": percentile(latencies, 0.95),
                    "run": os.path.basename(os.path.normpath(folder)),
                    "generated_at": summary.get("generated_at"),
                    "model": summary.get("model", {}).get("model"),
                    "run_model_calls": calls,
                    "run_candidates": candidates,
                    "run_candidates_at_token_limit": cut,
                }
            )

    with open(arguments.out, "w") as file:
        json.dump({"questions_compared": len(common), "rows": rows}, file, indent=2)
        file.write("\n")

    table = [
        f"Scored on the {len(common)} questions every run below asked.",
        "",
        "| run | mode | strategy | correct [Wilson 95%] | p50 / p95 | replies at the token limit (whole run) | run (UTC) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        low, high = row["wilson95"]
        p50 = (row["latency_p50_ms"] or 0) / 1000
        p95 = (row["latency_p95_ms"] or 0) / 1000
        strategy = "(reference prompt)" if row["mode"] == "plain" else f"`{row['strategy']}`"
        share = (
            f"{row['run_candidates_at_token_limit']} of {row['run_candidates']}"
            if row["run_candidates"]
            else "-"
        )
        table.append(
            f"| {row['name']} | {row['mode']} | {strategy} | "
            f"{100 * (row['rate'] or 0):.1f}% [{100 * low:.1f}, {100 * high:.1f}] "
            f"({row['correct']}/{row['questions']}) | {p50:.1f} s / {p95:.1f} s | {share} | {row['run']} |"
        )
    text = "\n".join(table)
    if arguments.doc:
        with open(arguments.doc) as file:
            doc = file.read()
        begin, end = "<!-- generated:ablation:begin -->", "<!-- generated:ablation:end -->"
        if begin not in doc or end not in doc:
            sys.exit(f"ablation-figures: {arguments.doc} has no {begin} ... {end} block")
        head, rest = doc.split(begin, 1)
        _, tail = rest.split(end, 1)
        with open(arguments.doc, "w") as file:
            file.write(f"{head}{begin}\n{text}\n{end}{tail}")
    print(text)


if __name__ == "__main__":
    main()
