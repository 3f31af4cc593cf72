#!/usr/bin/env python3
"""Would a fitted rerank decide better than the local provider's rule? Fits a logistic model of the chance
that a passage answers the question, from the features the quality harness writes of each passage found
(ai/src/ai/quality_tests.rs: score, cosine, share of the subject unsaid, lead over the best other answer,
rank, ...), on the train split of the evaluation sets, and prints, on each split, what the rule decided and
what the fitted model decides at each threshold (the likeliest passage answers when its chance reaches it):

    FRONTDESK_RERANK_ROWS=$PWD/target/rerank-rows.jsonl \\
      cargo test -p frontdesk-ai quality_of_the_faq_sets -- --ignored --nocapture
    bench/eval/fit_rerank.py target/rerank-rows.jsonl

and whether the fitted order puts a right passage first more often than the search's. Standard library only.
"""
import json, math, sys

# L2 penalty on the weights (not the intercept).
PENALTY = 0.01


def chance(w, x):
    z = w[0] + sum(a * b for a, b in zip(w[1:], x))
    return 1 / (1 + math.exp(-max(min(z, 30), -30)))


def fit(samples, steps=2000, rate=0.5):
    """Logistic regression by gradient descent, the classes balanced (a right passage is one of about five)."""
    n = len(samples[0][0])
    w = [0.0] * (n + 1)
    positives = sum(y for _, y in samples)
    weight = {1: len(samples) / (2 * max(positives, 1)), 0: len(samples) / (2 * max(len(samples) - positives, 1))}
    for _ in range(steps):
        grad = [0.0] * (n + 1)
        for x, y in samples:
            e = (chance(w, x) - y) * weight[y]
            grad[0] += e
            for i, v in enumerate(x):
                grad[i + 1] += e * v
        for i in range(n + 1):
            w[i] -= rate * (grad[i] / len(samples) + (PENALTY * w[i] if i else 0))
    return w


def fitted_pick(w, threshold, row):
    scored = [(chance(w, c["features"]), i) for i, c in enumerate(row["candidates"]) if not c["price_unstated"]]
    if not scored:
        return None
    p, i = max(scored)
    return i if p >= threshold else None


def tally(rows, pick):
    t = dict(known=0, right=0, wrong=0, unknown=0, answered=0)
    for row in rows:
        at = pick(row)
        if row["known"]:
            t["known"] += 1
            if at is not None:
                t["right" if row["candidates"][at]["right"] else "wrong"] += 1
        else:
            t["unknown"] += 1
            t["answered"] += at is not None
    return t


def line(t):
    return (f"right {t['right']}/{t['known']}, wrong {t['wrong']}, "
            f"unknown handed off {t['unknown'] - t['answered']}/{t['unknown']}")


def main():
    rows = [json.loads(line) for line in open(sys.argv[1])]
    for semantic in (True, False):
        mode = [r for r in rows if r["semantic"] == semantic]
        splits = {s: [r for r in mode if r["split"] == s] for s in ("train", "held_out")}
        print("== with the model" if semantic else "== words alone")
        w = fit([(c["features"], int(c["right"])) for r in splits["train"] for c in r["candidates"]])
        print("   weights (intercept first):", ", ".join(f"{v:.3f}" for v in w))
        for name, rs in splits.items():
            known = [r for r in rs if r["known"] and r["candidates"]]
            first = sum(r["candidates"][0]["right"] for r in known)
            refit = sum(max(r["candidates"], key=lambda c: chance(w, c["features"]))["right"] for r in known)
            print(f"   {name}: first passage right {first}, first after the fitted rerank {refit} (of {len(known)})")
            print(f"   {name}: the rule: {line(tally(rs, lambda r: r['rule']))}")
            for threshold in [x / 100 for x in range(50, 95, 5)]:
                t = tally(rs, lambda r: fitted_pick(w, threshold, r))
                print(f"   {name}: fitted, chance >= {threshold:.2f}: {line(t)}")


if __name__ == "__main__":
    main()
