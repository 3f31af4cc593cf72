#!/usr/bin/env python3
"""AI replies end to end on an evaluation set (NAME.json beside this file, python-faq by default): imports the
set's documents (its `documents` glob, less the file names in `exclude`) into an agent, routes a web chat
channel to it, and asks every question as a new visitor through the visitor API, reading the agent's reply
from the thread. A question the FAQ answers must get one of its expected FAQs' answers, or the part of one
that the agent answers with; one it does not must get the handoff sentence. Prints the median length of the
answers. Runs with the embedding model and with words alone, and first calibrates the local model's score rule
(the best FAQ's least score and its least lead over a runner-up with another answer) on the search results of
the same set.

    bench/eval/replies.py [--set python-faq] [--frontdesk target/release/frontdesk]

Prerequisites: scripts/bench-prereqs (python3-doc, debian-faq, the model). Standard library only.
"""
import argparse, json, os, shutil, tempfile, time, uuid

from score import ROOT, Server, account, load_set, normalise, upload

HANDOFF = "Thanks for your message. A member of our team will get back to you shortly."


def visitor_call(server, method, path, body=None, token=None):
    import urllib.request
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{server.http}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def expected_answers(faqs, expect):
    """The answers of the FAQs whose question holds one of `expect`."""
    return {f["answer"].strip() for f in faqs if any(e in normalise(f["question"]) for e in expect)}


def squeezed(text):
    return " ".join(text.split())


def is_part_of(reply, answers):
    """Whether the reply is one of `answers` or a part of one (the agent answers with the sentences of a long
    answer that answer the question; a cut sentence ends with an ellipsis)."""
    part = squeezed(reply.rstrip("…"))
    return bool(part) and any(part in squeezed(answer) for answer in answers)


def reply_to(server, widget_key, question):
    session = visitor_call(server, "POST", "/webchat/v1/sessions", {"widget_key": widget_key})
    token = session["token"]
    visitor_call(server, "POST", "/webchat/v1/messages", {"text": question, "client_message_id": uuid.uuid4().hex}, token)
    for _ in range(100):
        thread = visitor_call(server, "GET", "/webchat/v1/messages?after=", token=token)["messages"]
        replies = [m for m in thread if m["direction"] == "outbound"]
        if replies:
            return replies[0]["text"].strip()
        time.sleep(0.2)
    return None


def calibrate(server, key, agent, data, faqs):
    """The (threshold, margin) that make the most right decisions on the search results, and its count."""
    rows = []
    for case in data["answerable"]:
        results = server.call(key, "POST", f"/v1/agents/{agent}/search", {"query": case["q"], "limit": 5})["results"]
        right = expected_answers(faqs, case["expect"])
        rows.append((results, right))
    for q in data["unanswerable"]:
        results = server.call(key, "POST", f"/v1/agents/{agent}/search", {"query": q, "limit": 5})["results"]
        rows.append((results, None))

    def lead(results):
        best = results[0]
        for other in results[1:]:
            if other["faq"]["answer"].strip() != best["faq"]["answer"].strip():
                return best["score"] - other["score"]
        return 1.0

    best = None
    for t in [x / 200 for x in range(10, 160)]:
        for m in [x / 200 for x in range(0, 21)]:
            good = 0
            for results, right in rows:
                answers = bool(results) and results[0]["score"] >= t and lead(results) >= m
                if right is None:
                    good += not answers
                else:
                    good += answers and results[0]["faq"]["answer"].strip() in right
            if best is None or good > best[0] or (good == best[0] and m < best[2]):
                best = (good, t, m)
    return best, len(rows)


def run(binary, db_url, env, key, agent, widget_key, data, faqs, name):
    server = Server(binary, db_url, {**env, "FRONTDESK_REPLY_DEBOUNCE_MS": "0", "FRONTDESK_WEBCHAT_SESSIONS_PER_MINUTE": "100000"})
    try:
        (good, t, m), total = calibrate(server, key, agent, data, faqs)
        # Without a model the search scores words times their weight (0.3 by default); the local model reads
        # them whole.
        scale = "" if env.get("FRONTDESK_EMBEDDING_MODEL") != "none" else f" (words alone: {t / 0.3:.3f})"
        print(f"{name}: best rule on the search results: score >= {t:.3f}{scale}, lead >= {m:.3f} "
              f"({good}/{total} right decisions)")
        right = wrong = handed = 0
        misses = []
        lengths = []
        for case in data["answerable"]:
            reply = reply_to(server, widget_key, case["q"])
            if reply == HANDOFF:
                handed += 1
                misses.append(("handed off", case["q"]))
            elif is_part_of(reply or "", expected_answers(faqs, case["expect"])):
                right += 1
                lengths.append(len(reply))
            else:
                lengths.append(len(reply or ""))
                wrong += 1
                misses.append(("wrong answer", case["q"]))
        handed_off = 0
        for q in data["unanswerable"]:
            if reply_to(server, widget_key, q) == HANDOFF:
                handed_off += 1
            else:
                misses.append(("answered", q))
        n, u = len(data["answerable"]), len(data["unanswerable"])
        median = sorted(lengths)[len(lengths) // 2] if lengths else 0
        print(f"{name}: answerable: {right}/{n} right ({right / n:.1%}), {wrong} wrong answers, {handed} handed off; "
              f"unanswerable: {handed_off}/{u} handed off ({handed_off / u:.1%}); median answer {median} characters")
        for kind, q in misses:
            print(f"    {kind}: {q}")
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frontdesk", default=os.path.join(ROOT, "target", "release", "frontdesk"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    parser.add_argument("--set", default="python-faq", help="the evaluation set: bench/eval/SET.json")
    args = parser.parse_args()
    data, _, pages = load_set(args.set)
    work = tempfile.mkdtemp(prefix="frontdesk-replies-")
    db_url = f"sqlite://{work}/eval.db?mode=rwc"
    try:
        server = Server(args.frontdesk, db_url, {"FRONTDESK_EMBEDDING_MODEL": args.model})
        key = account(args.frontdesk, server)
        agent = server.call(key, "POST", "/v1/agents", {"name": args.set, "ai_tier": "mini"})["agent"]["id"]
        sources = [upload(server, key, agent, p) for p in pages]
        faqs = []
        for source in sources:
            while server.call(key, "GET", f"/v1/kb-sources/{source}")["kb_source"]["status"] not in ("ready", "failed"):
                time.sleep(0.2)
            faqs += server.call(key, "GET", f"/v1/kb-sources/{source}/faqs?limit=200")["faqs"]
        channel = server.call(key, "POST", "/v1/channels", {"name": "site", "type": "webchat", "config": {}})["channel"]
        server.call(key, "PUT", "/v1/entry-points/channel-defaults", {"channel": "site", "agent_id": agent})
        print(f"imported {len(pages)} pages: {len(faqs)} FAQs; {len(data['answerable'])} answerable questions, "
              f"{len(data['unanswerable'])} unanswerable\n")
        server.stop()
        for name, env in [("with the model", {"FRONTDESK_EMBEDDING_MODEL": args.model}),
                          ("words alone", {"FRONTDESK_EMBEDDING_MODEL": "none"})]:
            run(args.frontdesk, db_url, env, key, agent, channel["widget_key"], data, faqs, name)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
