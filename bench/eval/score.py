#!/usr/bin/env python3
"""Scores `POST /v1/agents/{id}/search` on an evaluation set (NAME.json beside this file, python-faq by
default): imports the set's documents (its `documents` glob, less the file names in `exclude`: Python's FAQ
from Debian's python3-doc for python-faq and python-faq-hard, the Debian FAQ from debian-faq for debian-faq)
through `POST /v1/kb-sources/file` into a fresh SQLite database, then asks every question lexically only and
with the embedding model at several fusion weights (the same database, the server restarted with
FRONTDESK_EMBEDDING_MODEL / FRONTDESK_RETRIEVAL_DENSE_WEIGHT), and prints top-1 / top-3 accuracy and, per
handoff threshold, how the best result's score separates the questions the FAQ answers from those it does not.

    bench/eval/score.py [--set python-faq] [--frontdesk target/release/frontdesk] [--weights 0.4,0.5,0.6,0.7]

Prerequisites: scripts/bench-prereqs (python3-doc, debian-faq, the model). Standard library only.
"""
import argparse, glob, json, os, re, shutil, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request, uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ADMIN = "eval-admin-token"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, db_url, env):
        self.http, self.grpc = free_port(), free_port()
        full = {
            "PATH": os.environ.get("PATH", ""),
            "DATABASE_URL": db_url,
            "FRONTDESK_HTTP_ADDR": f"127.0.0.1:{self.http}",
            "FRONTDESK_GRPC_ADDR": f"127.0.0.1:{self.grpc}",
            "FRONTDESK_ADMIN_TOKEN": ADMIN,
            "FRONTDESK_LOG_FORMAT": "json",
            "RUST_LOG": "warn",
            **env,
        }
        self.proc = subprocess.Popen([binary, "serve"], env=full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.http}/healthz", timeout=1)
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                if self.proc.poll() is not None:
                    sys.exit("frontdesk exited at start")
                time.sleep(0.1)
        sys.exit("frontdesk did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)

    def call(self, key, method, path, body=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(f"http://127.0.0.1:{self.http}{path}", data=data, method=method)
        request.add_header("Authorization", f"Bearer {key}")
        request.add_header("Content-Type", ctype)
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())


def account(binary, server):
    out = subprocess.run(
        [binary, "admin", "--core", f"http://127.0.0.1:{server.grpc}", "--log-format", "json", "create-account",
         "--name", "eval", "--plan", "growth", "--credits", "1000"],
        env={"PATH": os.environ.get("PATH", ""), "FRONTDESK_ADMIN_TOKEN": ADMIN}, capture_output=True, text=True, check=True)
    return re.search(r"fdk_[A-Za-z0-9]+", out.stdout).group(0)


def upload(server, key, agent, path):
    boundary = uuid.uuid4().hex
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"agent_id\"\r\n\r\n{agent}\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{os.path.basename(path)}\"\r\n"
            "Content-Type: text/html\r\n\r\n").encode()
    with open(path, "rb") as f:
        body = head + f.read() + f"\r\n--{boundary}--\r\n".encode()
    return server.call(key, "POST", "/v1/kb-sources/file", raw=body, ctype=f"multipart/form-data; boundary={boundary}")["source_id"]


def load_set(name, documents=None):
    """The evaluation set bench/eval/NAME.json and the files to import: those its `documents` glob (or
    `documents` given here) matches, less the file names in its `exclude`, each file name once (the first in
    sorted order: several folders of the glob may be links to one)."""
    path = os.path.join(HERE, f"{name}.json")
    if not os.path.isfile(path):
        sys.exit(f"no evaluation set {path}")
    with open(path) as f:
        data = json.load(f)
    pattern = documents or data["documents"]
    exclude = set(data.get("exclude", []))
    pages, names = [], set()
    for page in sorted(glob.glob(pattern)):
        base = os.path.basename(page)
        if base in exclude or base in names or not os.path.isfile(page):
            continue
        names.add(base)
        pages.append(page)
    pages.sort(key=os.path.basename)
    if not pages:
        sys.exit(f"the documents of {name} are missing ({pattern}): run scripts/bench-prereqs")
    return data, pattern, pages


def normalise(question):
    return re.sub(r"\s*\(part \d+\)$", "", question.replace("\u00b6", "").strip())


def ask(server, key, agent, cases, questions):
    answered = []
    for case in cases:
        results = server.call(key, "POST", f"/v1/agents/{agent}/search", {"query": case["q"], "limit": 3})["results"]
        found = [normalise(r["faq"]["question"]) for r in results]
        hit = lambda rank: any(e in q for q in found[:rank] for e in case["expect"])
        answered.append((hit(1), hit(3), results[0]["score"] if results else 0.0))
    unanswered = []
    for q in questions:
        results = server.call(key, "POST", f"/v1/agents/{agent}/search", {"query": q, "limit": 1})["results"]
        unanswered.append(results[0]["score"] if results else 0.0)
    return answered, unanswered


def report(name, answered, unanswered, fixed):
    n = len(answered)
    top1 = sum(a[0] for a in answered) / n
    top3 = sum(a[1] for a in answered) / n
    print(f"{name:<22} top-1 {top1:6.1%}  top-3 {top3:6.1%}")
    best = None
    for t in [x / 100 for x in range(5, 96)]:
        handed = [s < t for s in unanswered]
        wrongly_handed = sum(1 for a in answered if a[2] < t)
        right_answers = sum(1 for a in answered if a[0] and a[2] >= t)
        handed_total = sum(handed) + wrongly_handed
        precision = sum(handed) / handed_total if handed_total else 1.0
        good = right_answers + sum(handed)
        if best is None or good > best[0]:
            best = (good, t, precision, sum(handed), wrongly_handed, right_answers)
        if abs(t - fixed) < 1e-9:
            print(f"{'':<22} threshold {t:.2f} (default): handoff precision {precision:6.1%}, "
                  f"{sum(handed)}/{len(unanswered)} unanswerable handed off, {wrongly_handed}/{n} answerable handed off, "
                  f"{right_answers}/{n} answered right")
    right_scores = [a[2] for a in answered if a[0]]
    print(f"{'':<22} best score of an unanswerable question {max(unanswered):.3f}; "
          f"lowest score of a right answer {min(right_scores) if right_scores else float('nan'):.3f}")
    good, t, precision, handed, wrongly, right = best
    print(f"{'':<22} best threshold {t:.2f}: handoff precision {precision:6.1%}, {handed}/{len(unanswered)} unanswerable "
          f"handed off, {wrongly}/{n} answerable handed off, {right}/{n} answered right "
          f"({good}/{n + len(unanswered)} right decisions)")
    return top1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frontdesk", default=os.path.join(ROOT, "target", "release", "frontdesk"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    parser.add_argument("--set", default="python-faq", help="the evaluation set: bench/eval/SET.json")
    parser.add_argument("--docs", default=None, help="glob of the documents to import instead of the set's")
    parser.add_argument("--weights", default="0.5,0.6,0.7,0.8,1.0")
    parser.add_argument("--threshold", type=float, default=0.28, help="the handoff threshold to report (retrieval::CONFIDENT)")
    args = parser.parse_args()
    data, docs, pages = load_set(args.set, args.docs)
    if not os.path.isfile(os.path.join(args.model, "model.safetensors")):
        sys.exit(f"no model at {args.model}: run scripts/fetch-model")
    work = tempfile.mkdtemp(prefix="frontdesk-eval-")
    db_url = f"sqlite://{work}/eval.db?mode=rwc"
    try:
        server = Server(args.frontdesk, db_url, {"FRONTDESK_EMBEDDING_MODEL": args.model})
        key = account(args.frontdesk, server)
        agent = server.call(key, "POST", "/v1/agents", {"name": args.set})["agent"]["id"]
        started = time.time()
        sources = [upload(server, key, agent, p) for p in pages]
        faqs = 0
        for source in sources:
            while True:
                s = server.call(key, "GET", f"/v1/kb-sources/{source}")["kb_source"]
                if s["status"] in ("ready", "failed"):
                    faqs += s["faqs_created"]
                    break
                time.sleep(0.2)
        print(f"imported {len(pages)} pages of {docs}: {faqs} FAQs in {time.time() - started:.1f} s (vectors included)")
        print(f"{len(data['answerable'])} answerable questions, {len(data['unanswerable'])} unanswerable\n")
        server.stop()
        configs = [("lexical only", {"FRONTDESK_EMBEDDING_MODEL": "none"})]
        configs += [(f"fused, w = {w}", {"FRONTDESK_EMBEDDING_MODEL": args.model, "FRONTDESK_RETRIEVAL_DENSE_WEIGHT": w})
                    for w in args.weights.split(",")]
        for name, env in configs:
            server = Server(args.frontdesk, db_url, env)
            try:
                answered, unanswered = ask(server, key, agent, data["answerable"], data["unanswerable"])
            finally:
                server.stop()
            report(name, answered, unanswered, args.threshold)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
