#!/usr/bin/env python3
"""How to choose among a question's candidates, measured on a pool (`askdb eval pool`).

    scripts/selection-figures.py POOL_FOLDER [POOL_FOLDER ...] [--out FILE.json]

A pool holds, per question, the agent's greedy reply, n sampled replies of the same
prompt and the plain prompt's reply, each run through the gate and graded (`correct`),
with its result's key (equal keys: equal results) and its confidence (token
log-probabilities). Each policy below picks one candidate per question from that pool,
exactly as the agent's vote would (src/agent/candidates.rs: the largest group of equal
results among candidates that returned rows wins; a tie goes to a group with rows over an
empty one, then to the group holding the earliest candidate, the greedy one first), and
is scored on the same questions. Its cost is the share of questions that pay for the
sampled call and the mean model seconds per question the pool measured.

Nothing here calls a model: it only reads what the pool wrote.
"""

import argparse
import json
import math
import os
import random
import sys

DOUBTFUL = ("error", "empty", "no_sql", "cut_off")


def wilson(successes, total, z=1.96):
    if total == 0:
        return (0.0, 0.0)
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def read_pool(folder):
    with open(os.path.join(folder, "manifest.json")) as file:
        manifest = json.load(file)
    records = []
    with open(os.path.join(folder, "pool.jsonl")) as lines:
        for line in lines:
            line = line.strip()
            if line:
                records.append(json.loads(line))
    return manifest, records


def vote(candidates):
    """The agent's vote: the chosen candidate, or None when none returned rows."""
    groups = {}
    for order, candidate in enumerate(candidates):
        if candidate["outcome"] not in ("rows", "empty"):
            continue
        group = groups.setdefault(candidate["key"], [])
        group.append((order, candidate))
    if not groups:
        return None
    ranked = sorted(
        groups.values(),
        key=lambda members: (
            -len(members),
            0 if members[0][1]["outcome"] == "rows" else 1,
            members[0][0],
        ),
    )
    return ranked[0][0][1]


def short_variant(source, main_strategy):
    """`variant:STRATEGY` as the knobs where it differs from the pool's own strategy."""
    main = dict(part.split("=", 1) for part in main_strategy.split(",") if "=" in part)
    knobs = dict(part.split("=", 1) for part in source[len("variant:"):].split(",") if "=" in part)
    differing = [f"{k}={v}" for k, v in knobs.items() if main.get(k) != v]
    missing = [f"{k}=default" for k in main if k not in knobs]
    return "variant " + (",".join(differing + missing) or "(same)")


def by_source(record, source):
    return [c for c in record["candidates"] if c["source"] == source]


def first(record, source):
    found = by_source(record, source)
    return found[0] if found else None


def call_seconds(record, source):
    return sum(call["latency_ms"] for call in record["calls"] if call["source"] == source) / 1000


def doubtful(candidate):
    return candidate is None or candidate["outcome"] in DOUBTFUL


def low_confidence(candidate, field, threshold):
    confidence = (candidate or {}).get("confidence")
    return confidence is not None and confidence[field] < threshold


def policies(samples_available, variants, main_strategy):
    """(name, function(record) -> (chosen candidate or None, paid for samples), the calls
    it always pays for: their sources in the pool)."""
    rows = []

    def greedy(record):
        return first(record, "greedy"), 0

    def plain(record):
        return first(record, "plain"), 0

    rows.append(("plain prompt, greedy", plain, ["plain"]))
    rows.append(("agent prompt, greedy (N=1)", greedy, ["greedy"]))
    for variant in variants:
        def alone(record, variant=variant):
            return first(record, variant), 0
        rows.append((f"{short_variant(variant, main_strategy)}, greedy", alone, [variant]))
    if variants:
        def ensemble(record):
            pool = [first(record, "greedy")] + [first(record, v) for v in variants]
            return vote([c for c in pool if c]) or first(record, "greedy"), 0
        rows.append(("vote over the greedy replies of the agent prompt and the variants", ensemble, ["greedy", *variants]))
        def ensemble_plain(record):
            pool = [first(record, "greedy")] + [first(record, v) for v in variants] + [first(record, "plain")]
            return vote([c for c in pool if c]) or first(record, "greedy"), 0
        rows.append(("vote over the greedy replies of the agent prompt, the variants and plain", ensemble_plain, ["greedy", *variants, "plain"]))
        def agree_variant(record):
            chosen = first(record, "greedy")
            others = [first(record, v) for v in variants]
            if not doubtful(chosen) and all(o and o.get("key") == chosen.get("key") for o in others):
                return chosen, 0
            pool = [chosen] + others + by_source(record, "sample")
            return vote([c for c in pool if c]) or chosen, samples_available
        rows.append(("greedy if every variant agrees, else vote all", agree_variant, ["greedy", *variants]))
    # n: the sampled call's candidates; the greedy reply votes with them (N = n + 1).
    counts = [n for n in (2, 3, 4, 5) if n <= samples_available]
    for n in counts:
        def always(record, n=n):
            pool = [first(record, "greedy")] + by_source(record, "sample")[:n]
            return vote([c for c in pool if c]), n
        rows.append((f"vote always: greedy + {n} sampled (N={n + 1})", always, ["greedy"]))
    for n in counts:
        def on_doubt(record, n=n):
            chosen = first(record, "greedy")
            if not doubtful(chosen):
                return chosen, 0
            pool = [chosen] + by_source(record, "sample")[:n]
            return vote([c for c in pool if c]) or chosen, n
        rows.append((f"vote on doubt (error, empty): greedy + {n} sampled", on_doubt, ["greedy"]))
    for field in ("min_logprob", "mean_logprob"):
        thresholds = (
            [-0.5, -1.0, -1.5, -2.0, -3.0, -4.0]
            if field == "min_logprob"
            else [-0.02, -0.05, -0.1, -0.2]
        )
        for n in [c for c in (3, 5) if c in counts]:
            for threshold in thresholds:
                def on_low(record, field=field, threshold=threshold, n=n):
                    chosen = first(record, "greedy")
                    if not doubtful(chosen) and not low_confidence(chosen, field, threshold):
                        return chosen, 0
                    pool = [chosen] + by_source(record, "sample")[:n]
                    return vote([c for c in pool if c]) or chosen, n
                rows.append(
                    (f"vote on doubt or {field} < {threshold}: greedy + {n} sampled", on_low, ["greedy"])
                )

    def agree_else_vote(record):
        chosen, other = first(record, "greedy"), first(record, "plain")
        if not doubtful(chosen) and other and other.get("key") == chosen.get("key"):
            return chosen, 0
        pool = [chosen, other] + by_source(record, "sample")
        return vote([c for c in pool if c]) or chosen, samples_available

    rows.append(("greedy if the plain prompt agrees, else vote all", agree_else_vote, ["greedy", "plain"]))

    def both_greedy_vote(record):
        pool = [first(record, "greedy"), first(record, "plain")] + by_source(record, "sample")
        return vote([c for c in pool if c]), samples_available

    rows.append(("vote always over greedy, plain and samples", both_greedy_vote, ["greedy", "plain"]))

    def oracle(record):
        for candidate in record["candidates"]:
            if candidate["correct"]:
                return candidate, samples_available
        return None, samples_available

    rows.append(("oracle: any candidate right (a ceiling, not a policy)", oracle, ["greedy", *variants, "plain"]))
    return rows


def paired_bootstrap(a, b, resamples=2000, seed=20261129):
    generator = random.Random(seed)
    n = len(a)
    differences = []
    for _ in range(resamples):
        total = 0
        for _ in range(n):
            index = generator.randrange(n)
            total += a[index] - b[index]
        differences.append(100.0 * total / n)
    differences.sort()
    return differences[int(0.025 * resamples)], differences[int(0.975 * resamples) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pools", nargs="+")
    parser.add_argument("--out")
    args = parser.parse_args()
    records, manifests = [], []
    for folder in args.pools:
        manifest, pooled = read_pool(folder)
        manifests.append({"pool": os.path.basename(os.path.normpath(folder)), **manifest})
        records.extend(
            r for r in pooled
            if not r.get("ended_by_rules") and not r.get("error") and r["expected"] == "answer"
        )
    if not records:
        sys.exit("selection-figures: no answerable question with candidates in the pool")
    samples = min(len(by_source(r, "sample")) for r in records)
    variants = sorted({c["source"] for r in records for c in r["candidates"] if c["source"].startswith("variant:")})
    greedy_right = [1 if (first(r, "greedy") or {}).get("correct") else 0 for r in records]
    plain_right = [1 if (first(r, "plain") or {}).get("correct") else 0 for r in records]
    greedy_s = sum(call_seconds(r, "greedy") for r in records) / len(records)
    sample_s = sum(call_seconds(r, "sample") for r in records) / len(records)
    table = []
    main_strategy = manifests[0]["settings"]["strategy"]
    print(f"pool strategy: {main_strategy}")
    for name, policy, fixed in policies(samples, variants, main_strategy):
        fixed_s = sum(call_seconds(r, source) for r in records for source in fixed) / len(records)
        right, paid, asked = [], 0, set()
        for record in records:
            chosen, sampled = policy(record)
            right.append(1 if chosen and chosen.get("correct") else 0)
            if sampled:
                paid += 1
                asked.add(sampled)
        low, high = wilson(sum(right), len(right))
        vs_plain = paired_bootstrap(right, plain_right)
        vs_greedy = paired_bootstrap(right, greedy_right)
        share = paid / len(records)
        table.append({
            "policy": name,
            "correct": sum(right),
            "questions": len(right),
            "accuracy": round(100.0 * sum(right) / len(right), 1),
            "wilson": [round(100 * low, 1), round(100 * high, 1)],
            "minus_plain": round(100.0 * (sum(right) - sum(plain_right)) / len(right), 1),
            "minus_plain_bootstrap": [round(vs_plain[0], 1), round(vs_plain[1], 1)],
            "minus_greedy": round(100.0 * (sum(right) - sum(greedy_right)) / len(right), 1),
            "minus_greedy_bootstrap": [round(vs_greedy[0], 1), round(vs_greedy[1], 1)],
            "sampled_share": round(100.0 * share, 1),
            # Measured only for the pool's own sampled call (all its replies); a policy
            # asking for fewer would pay less, which the pool did not measure.
            "mean_model_seconds": (
                round(fixed_s + share * sample_s, 1) if asked <= {samples} else None
            ),
        })
    print(f"{len(records)} questions; greedy call {greedy_s:.1f} s, sampled call "
          f"({samples} replies) {sample_s:.1f} s on average\n")
    print("| policy | correct [Wilson 95%] | − plain [bootstrap 95%] | − greedy [bootstrap 95%] | sampled | model s / question |")
    print("|---|---|---|---|---:|---:|")
    for row in table:
        print(
            f"| {row['policy']} | {row['accuracy']}% [{row['wilson'][0]}, {row['wilson'][1]}] "
            f"({row['correct']}/{row['questions']}) | {row['minus_plain']:+.1f} "
            f"[{row['minus_plain_bootstrap'][0]:+.1f}, {row['minus_plain_bootstrap'][1]:+.1f}] | "
            f"{row['minus_greedy']:+.1f} [{row['minus_greedy_bootstrap'][0]:+.1f}, "
            f"{row['minus_greedy_bootstrap'][1]:+.1f}] | {row['sampled_share']}% | "
            f"{row['mean_model_seconds'] if row['mean_model_seconds'] is not None else '-'} |"
        )
    if args.out:
        with open(args.out, "w") as file:
            json.dump({"pools": manifests, "questions": len(records), "policies": table}, file, indent=2)
            file.write("\n")


if __name__ == "__main__":
    main()
