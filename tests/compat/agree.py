#!/usr/bin/env python3
"""Agreement of siftd with SpamAssassin's spamd on the same messages and rules.

Starts the real spamd on loopback (local tests only, no Bayes, score set 0),
asks it for the verdict and rule names of each message over the spamd
protocol, runs `siftd scan --json` over the same files with the same rules, and
reports verdict agreement, score differences and per-rule precision/recall.
Standard library only. See README.md in this folder.
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

DEFAULT_RULES = "/usr/share/spamassassin"
DEFAULT_SITE = "/etc/spamassassin"
SIFT_BATCH = 500
SA_WORKERS = 2
SA_TIMEOUT = 300.0
WITHIN = 0.5

# Added to the temporary copy of the site config that spamd reads: no Bayes,
# no learning, nothing that asks the network.  With -L this is score set 0.
SA_EXTRA_CF = """\
# written by tests/compat/agree.py
use_bayes 0
bayes_auto_learn 0
skip_rbl_checks 1
dns_available no
ifplugin Mail::SpamAssassin::Plugin::Razor2
use_razor2 0
endif
ifplugin Mail::SpamAssassin::Plugin::Pyzor
use_pyzor 0
endif
ifplugin Mail::SpamAssassin::Plugin::DCC
use_dcc 0
endif
ifplugin Mail::SpamAssassin::Plugin::AWL
use_auto_whitelist 0
endif
ifplugin Mail::SpamAssassin::Plugin::TxRep
use_txrep 0
endif
"""

RULE_KEYWORDS = {"header", "body", "rawbody", "full", "uri", "meta", "mimeheader"}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
META_DEPTH = 64


class HarnessError(Exception):
    """A failure of the harness itself (not a disagreement)."""


# ---------------------------------------------------------------- inputs

def collect_files(paths):
    """Message files under the given paths (directories recursively), sorted."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
                for name in files:
                    if name.startswith(".") or name in ("cmds", "README.md", "MANIFEST.tsv"):
                        continue
                    found.append(os.path.abspath(os.path.join(root, name)))
        elif os.path.isfile(path):
            found.append(os.path.abspath(path))
        else:
            raise HarnessError(f"no such file or directory: {path}")
    return sorted(set(found))


def pick_sample(files, count, seed):
    """A fixed pseudo-random sample of `count` files (all when count is 0 or larger)."""
    if not count or count >= len(files):
        return files
    return sorted(random.Random(seed).sample(files, count))


def cf_files(directory):
    """The *.cf files of a rules directory, in the order SpamAssassin reads them."""
    if os.path.isfile(directory):
        return [directory]
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [os.path.join(directory, n) for n in names if n.endswith(".cf")]


def parse_rule_names(dirs):
    """Rule names defined in the cf files, with their set-0 score, and meta references.

    Default scores as SpamAssassin's: 1.0, 0.01 for T_ rules, negative for `tflags nice`.

    A light parse: `if`/`ifplugin` blocks are not evaluated, later lines win.
    """
    defined = {}
    scores = {}
    metas = {}
    nice = set()
    for directory in dirs:
        for path in cf_files(directory):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    lines = handle.readlines()
            except OSError:
                continue
            for line in lines:
                words = line.split()
                if len(words) < 2 or words[0].startswith("#"):
                    continue
                keyword = words[0].lower()
                if keyword in RULE_KEYWORDS:
                    defined[words[1]] = keyword
                    if keyword == "meta":
                        metas[words[1]] = set(IDENT.findall(" ".join(words[2:])))
                elif keyword == "tflags" and "nice" in words[2:]:
                    nice.add(words[1])
                elif keyword == "score" and len(words) >= 3:
                    try:
                        scores[words[1]] = float(words[2])
                    except ValueError:
                        pass
    result = {}
    for name, kind in defined.items():
        default = 0.01 if name.startswith("T_") else 1.0
        if name in nice:
            default = -default
        result[name] = (kind, scores.get(name, default))
    return result, {name: refs & defined.keys() for name, refs in metas.items()}


def disabled_dependencies(metas, disabled):
    """{meta: sorted disabled rules it depends on, through other metas too}."""
    memo = {}

    def walk(name, depth):
        if name in memo:
            return memo[name]
        if depth > META_DEPTH:
            return set()
        memo[name] = set()  # cycle guard
        found = set()
        for ref in metas.get(name, ()):
            if ref in disabled:
                found.add(ref)
            elif ref in metas:
                found |= walk(ref, depth + 1)
        memo[name] = found
        return found

    return {name: sorted(walk(name, 0)) for name in metas}


# ---------------------------------------------------------------- siftd

def sift_lint(siftd, rules, site):
    """`siftd --lint --json`: its disabled rules {name: reason} and per-type counts."""
    cmd = [siftd, "--lint", "--json", "-C", rules, "--siteconfigpath", site]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    try:
        data = json.loads(proc.stdout)
    except ValueError as err:
        raise HarnessError(f"siftd --lint --json gave no JSON (exit {proc.returncode}): {err}; "
                           f"stderr: {proc.stderr[-500:]}") from err
    disabled = {}
    for entry in data.get("disabled", []):
        disabled[entry.get("name", "")] = f"{entry.get('type', '?')}: {entry.get('reason', '?')}"
    return disabled, data.get("types", {})


def sift_scan(siftd, rules, site, files):
    """{file: result} from `siftd scan --json`, in batches of SIFT_BATCH files."""
    results = {}
    for start in range(0, len(files), SIFT_BATCH):
        batch = files[start:start + SIFT_BATCH]
        cmd = [siftd, "scan", "--json", "-C", rules, "--siteconfigpath", site] + batch
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", check=False)
        if proc.returncode >= 64 and not proc.stdout:
            raise HarnessError(f"siftd scan failed (exit {proc.returncode}): {proc.stderr[-500:]}")
        for line in proc.stdout.splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            hits = []
            for rule in obj.get("rules", []):
                name = rule.get("name", "")
                if name.startswith("__") or float(rule.get("score", 0)) == 0.0:
                    continue
                hits.append(name)
            results[os.path.abspath(obj.get("file", ""))] = {
                "score": float(obj.get("score", 0.0)),
                "spam": bool(obj.get("spam", False)),
                "hits": sorted(set(hits)),
                "overflow": obj.get("overflow", []),
            }
        for path in batch:
            if path not in results:
                results[path] = {"error": f"no verdict (siftd exit {proc.returncode}): "
                                          f"{proc.stderr.strip()[-200:]}"}
    return results


# ---------------------------------------------------------------- spamd

def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spamd_request(port, command, body=b"", timeout=SA_TIMEOUT):
    """One spamd protocol exchange; returns (headers dict, body bytes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        head = f"{command} SPAMC/1.5\r\n"
        if command != "PING":
            head += f"Content-length: {len(body)}\r\nUser: agree\r\n"
        sock.sendall(head.encode("ascii") + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    reply = b"".join(chunks)
    head_bytes, _, rest = reply.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = lines[0] if lines else ""
    headers = {"status": status}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return headers, rest


def log_tail(path):
    """The end of a daemon's log, for an error message."""
    try:
        with open(path, "rb") as handle:
            return handle.read()[-800:].decode("utf-8", "replace")
    except OSError:
        return ""


def wait_for_pong(name, proc, port, wait, pause, log_path):
    """Waits until the daemon `proc` started answers PING on `port`, at most `wait` s."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HarnessError(f"{name} exited with {proc.returncode}: {log_tail(log_path)}")
        try:
            headers, _ = spamd_request(port, "PING", timeout=5.0)
            if "PONG" in headers["status"]:
                return
        except OSError:
            pass
        time.sleep(pause)
    raise HarnessError(f"{name} gave no PONG within {wait:.0f} s: {log_tail(log_path)}")


def terminate(proc):
    """Stops a daemon: TERM, then KILL after 15 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class Spamd:
    """The real spamd on loopback, started and always stopped by this harness."""

    def __init__(self, rules, site, workdir):
        self.rules = rules
        self.site_copy = os.path.join(workdir, "site")
        self.log_path = os.path.join(workdir, "spamd.log")
        self.port = None
        self.proc = None
        self.log = None
        self._prepare_site(site)

    def _prepare_site(self, site):
        os.makedirs(self.site_copy)
        if os.path.isdir(site):
            for name in sorted(os.listdir(site)):
                src = os.path.join(site, name)
                if os.path.isfile(src) and (name.endswith(".pre") or name.endswith(".cf")):
                    shutil.copy(src, os.path.join(self.site_copy, name))
        with open(os.path.join(self.site_copy, "zzzz_agree.cf"), "w", encoding="ascii") as handle:
            handle.write(SA_EXTRA_CF)
        # spamd drops root to nobody: the copy must stay readable.
        for path in [os.path.dirname(self.site_copy), self.site_copy]:
            os.chmod(path, 0o755)
        for name in os.listdir(self.site_copy):
            os.chmod(os.path.join(self.site_copy, name), 0o644)

    def start(self, wait=120.0):
        """Starts spamd and waits for PONG."""
        self.port = free_port()
        cmd = ["spamd", "-L", "-x", "-i", "127.0.0.1", "-A", "127.0.0.1", "-p", str(self.port),
               "--max-children", str(SA_WORKERS), "--min-children", str(SA_WORKERS),
               "-s", "stderr", "-C", self.rules, "--siteconfigpath", self.site_copy]
        if os.geteuid() == 0:
            cmd += ["-u", "nobody"]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_for_pong("spamd", self.proc, self.port, wait, 0.5, self.log_path)

    def _children(self):
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="latin-1") as handle:
                    stat = handle.read()
            except OSError:
                continue
            fields = stat.rpartition(")")[2].split()
            if len(fields) > 1 and fields[1] == str(self.proc.pid):
                pids.append(int(entry))
        return pids

    def stop(self):
        """Stops the spamd this object started (TERM, then KILL), and its children."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            children = self._children()
            terminate(self.proc)
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.log:
            self.log.close()
        self.proc = None

    def check(self, path):
        """SpamAssassin's verdict on one message file."""
        try:
            with open(path, "rb") as handle:
                body = handle.read()
        except OSError as err:
            return {"error": f"read: {err}"}
        last = None
        for _attempt in range(2):
            try:
                headers, rest = spamd_request(self.port, "SYMBOLS", body)
            except OSError as err:
                last = f"spamd: {err}"
                time.sleep(1.0)
                continue
            match = re.match(r"(True|False|Yes|No)\s*;\s*(-?[\d.]+)\s*/\s*(-?[\d.]+)",
                             headers.get("spam", ""))
            if not match:
                last = f"spamd reply without Spam header: {headers.get('status', '')}"
                continue
            names = [n.strip() for n in rest.decode("latin-1").split(",")]
            hits = sorted({n for n in names if n and not n.startswith("__")})
            return {"score": float(match.group(2)), "required": float(match.group(3)),
                    "spam": match.group(1) in ("True", "Yes"), "hits": hits}
        return {"error": last or "spamd: no reply"}


def stored_sa_answers(path, files):
    """SpamAssassin's answers for `files` from an earlier `--json` output of this harness."""
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
    except (OSError, ValueError) as err:
        raise HarnessError(f"--sa-from {path}: {err}") from err
    by_file = {os.path.abspath(m["file"]): m for m in stored.get("messages", [])}
    answers = {}
    for path_ in files:
        m = by_file.get(os.path.abspath(path_))
        if m is None:
            answers[path_] = {"error": f"not in {path}"}
        else:
            answers[path_] = {"score": m["sa_score"], "spam": m["sa_spam"], "hits": m["sa_hits"]}
    return answers


def sa_scan(spamd, files, progress):
    """{file: result} from spamd, SA_WORKERS messages at a time."""
    results = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=SA_WORKERS)
    try:
        futures = {pool.submit(spamd.check, path): path for path in files}
        done = 0
        for future in concurrent.futures.as_completed(futures):
            results[futures[future]] = future.result()
            done += 1
            if progress and (done % 50 == 0 or done == len(files)):
                print(f"  spamd: {done}/{len(files)}", file=sys.stderr, flush=True)
    finally:
        # On an error or interrupt, drop queued messages so spamd can be stopped now.
        pool.shutdown(wait=False, cancel_futures=True)
    return results


class SiftDaemon:
    """siftd as a daemon on loopback, for the commands `siftd scan` does not answer."""

    def __init__(self, siftd, rules, site, workdir):
        self.cmd = [siftd, "-C", rules, "--siteconfigpath", site, "-i", "127.0.0.1", "--max-children", "2"]
        self.log_path = os.path.join(workdir, "siftd.log")
        self.port = None
        self.proc = None

    def start(self, wait=60.0):
        """Starts siftd and waits for PONG."""
        self.port = free_port()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd + ["-p", str(self.port)], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        wait_for_pong("siftd", self.proc, self.port, wait, 0.2, self.log_path)

    def stop(self):
        """Stops the siftd this object started; its children leave with their master."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            terminate(self.proc)
        self.proc = None


PREVIEW = re.compile(rb"Content preview:(.*?)\r?\n\r?\nContent analysis details:", re.S)


def content_preview(port, body):
    """The `Content preview:` paragraph of a REPORT answer, or None."""
    _headers, report = spamd_request(port, "REPORT", body)
    match = PREVIEW.search(report)
    return match.group(1).decode("latin-1") if match else None


def compare_previews(spamd_port, siftd_port, files, progress):
    """Asks both daemons for the REPORT of each file and compares the content previews."""
    def both(path):
        try:
            with open(path, "rb") as handle:
                body = handle.read()
            return path, content_preview(spamd_port, body), content_preview(siftd_port, body)
        except OSError as err:
            return path, f"error: {err}", None

    same, differ = 0, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=SA_WORKERS) as pool:
        for path, sa, sift in pool.map(both, files):
            if sa is not None and sa == sift:
                same += 1
            else:
                differ.append({"file": path, "sa": sa, "sift": sift})
    if progress:
        print(f"  previews: {len(files)} compared", file=sys.stderr, flush=True)
    pct = 100.0 * same / len(files) if files else 100.0
    return {"compared": len(files), "same": same, "agreement_pct": pct, "differ": differ}


# ---------------------------------------------------------------- figures

def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, int(round(fraction * (len(sorted_values) - 1)))))
    return sorted_values[index]


def f1_of(tp, fp, fn):
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return precision, recall, f1


def compare(files, sa, sift, defined, disabled, depends):
    """All figures of the comparison, as one JSON-ready dict."""
    both = [f for f in files if "error" not in sa.get(f, {"error": 1})
            and "error" not in sift.get(f, {"error": 1})]
    errors = [{"file": f, "sa": sa.get(f, {}).get("error"), "sift": sift.get(f, {}).get("error")}
              for f in files if f not in both]

    compiled = {name for name, (_kind, score) in defined.items()
                if name not in disabled and not name.startswith("__") and score != 0.0}

    verdict_same = sum(1 for f in both if sa[f]["spam"] == sift[f]["spam"])
    diffs = sorted(sift[f]["score"] - sa[f]["score"] for f in both)
    abs_diffs = sorted(abs(d) for d in diffs)
    within = sum(1 for d in abs_diffs if d <= WITHIN + 1e-9)
    sa_spam = sum(1 for f in both if sa[f]["spam"])
    sift_spam = sum(1 for f in both if sift[f]["spam"])

    per_rule = {}
    pairs = []
    for f in both:
        sa_hits = set(sa[f]["hits"])
        sift_hits = set(sift[f]["hits"])
        for name in sa_hits | sift_hits:
            row = per_rule.setdefault(name, {"rule": name, "sa": 0, "sift": 0, "both": 0,
                                             "sa_only": [], "sift_only": []})
            if name in sa_hits:
                row["sa"] += 1
            if name in sift_hits:
                row["sift"] += 1
            if name in sa_hits and name in sift_hits:
                row["both"] += 1
            elif name in sa_hits:
                row["sa_only"].append(f)
                pairs.append((f, name, "SA only"))
            else:
                row["sift_only"].append(f)
                pairs.append((f, name, "sift only"))

    def status_of(name):
        if name in compiled:
            return "compiled"
        if name in disabled:
            return "disabled"
        if name in defined:
            return "zero score"
        return "unknown to sift"

    rows = []
    for name, row in per_rule.items():
        fp = row["sift"] - row["both"]
        fn = row["sa"] - row["both"]
        precision, recall, f1 = f1_of(row["both"], fp, fn)
        row.update({"fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1,
                    "status": status_of(name), "reason": disabled.get(name, ""),
                    "needs_disabled": depends.get(name, [])})
        rows.append(row)
    rows.sort(key=lambda r: (-(r["fp"] + r["fn"]), -r["sa"], r["rule"]))

    tp = sum(r["both"] for r in rows if r["status"] == "compiled")
    fp = sum(r["fp"] for r in rows if r["status"] == "compiled")
    fn = sum(r["fn"] for r in rows if r["status"] == "compiled")
    precision, recall, f1 = f1_of(tp, fp, fn)
    full = [r for r in rows if r["status"] == "compiled" and not r["needs_disabled"]]
    full_tp = sum(r["both"] for r in full)
    full_fp = sum(r["fp"] for r in full)
    full_fn = sum(r["fn"] for r in full)
    _p, _r, f1_full = f1_of(full_tp, full_fp, full_fn)
    all_tp = sum(r["both"] for r in rows)
    all_fp = sum(r["fp"] for r in rows)
    all_fn = sum(r["fn"] for r in rows)
    _p, _r, f1_all = f1_of(all_tp, all_fp, all_fn)

    # SA hits on rules sift does not run, grouped by why.
    missing = {}
    for row in rows:
        if row["status"] == "compiled" or row["fn"] == 0:
            continue
        reason = row["reason"] or row["status"]
        reason = re.sub(r"^eval: ", "", reason)
        group = missing.setdefault(reason, {"reason": reason, "sa_hits": 0, "points": 0.0, "rules": []})
        group["sa_hits"] += row["fn"]
        group["points"] += row["fn"] * abs(defined.get(row["rule"], ("", 1.0))[1])
        group["rules"].append(row["rule"])
    missing_rows = sorted(missing.values(), key=lambda g: (-g["sa_hits"], g["reason"]))

    messages = []
    for f in both:
        sa_hits = set(sa[f]["hits"])
        sift_hits = set(sift[f]["hits"])
        messages.append({
            "file": f, "sa_score": sa[f]["score"], "sift_score": sift[f]["score"],
            "diff": round(sift[f]["score"] - sa[f]["score"], 3),
            "sa_spam": sa[f]["spam"], "sift_spam": sift[f]["spam"],
            "sa_only": sorted(sa_hits - sift_hits), "sift_only": sorted(sift_hits - sa_hits),
            "sa_hits": sorted(sa_hits), "sift_hits": sorted(sift_hits),
            "overflow": sift[f].get("overflow", []),
        })
    messages.sort(key=lambda m: (m["sa_spam"] == m["sift_spam"], -abs(m["diff"]), m["file"]))

    # Does the sum of the parsed set-0 scores of SA's hits give SA's score?  Checks
    # that spamd ran with score set 0 and that the cf parse here reads the scores right.
    explained = 0
    for f in both:
        total = sum(defined.get(name, ("", 0.0))[1] for name in sa[f]["hits"])
        if abs(total - sa[f]["score"]) <= 0.101:  # SA prints one decimal, kept below required
            explained += 1

    n = len(both)
    summary = {
        "messages": len(files),
        "compared": n,
        "errors": len(errors),
        "verdict_agreement_pct": 100.0 * verdict_same / n if n else 0.0,
        "sa_spam": sa_spam,
        "sift_spam": sift_spam,
        "spam_both": sum(1 for f in both if sa[f]["spam"] and sift[f]["spam"]),
        "score_within_pct": 100.0 * within / n if n else 0.0,
        "score_within": WITHIN,
        "score_diff_percentiles": {
            p: round(percentile(diffs, int(p.lstrip("p")) / 100.0), 3)
            for p in ("p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99")},
        "abs_score_diff_percentiles": {
            p: round(percentile(abs_diffs, int(p.lstrip("p")) / 100.0), 3)
            for p in ("p50", "p75", "p90", "p95", "p99", "p100")},
        "mean_diff": round(sum(diffs) / n, 3) if n else 0.0,
        "sa_score_explained_pct": 100.0 * explained / n if n else 0.0,
        "same_hits_pct": 100.0 * sum(1 for f in both if sa[f]["hits"] == sift[f]["hits"]) / n if n else 0.0,
        "compiled_rules": len(compiled),
        "disabled_rules": len(disabled),
        "rule_f1_compiled": f1,
        "rule_precision_compiled": precision,
        "rule_recall_compiled": recall,
        "rule_tp_fp_fn_compiled": [tp, fp, fn],
        "rule_f1_compiled_self_contained": f1_full,
        "rule_tp_fp_fn_compiled_self_contained": [full_tp, full_fp, full_fn],
        "rule_f1_all_scored": f1_all,
        "rule_tp_fp_fn_all_scored": [all_tp, all_fp, all_fn],
    }
    return {"summary": summary, "rules": rows, "missing_in_sift": missing_rows,
            "messages": messages, "disagreements": [
                {"file": f, "rule": r, "who": w} for f, r, w in pairs],
            "errors": errors}


# ---------------------------------------------------------------- report

def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def short(path, base):
    if base:
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return path


def needs(row):
    names = row.get("needs_disabled", [])
    return " ".join(names[:3]) + (" ..." if len(names) > 3 else "")


def print_report(result, base, top, out=sys.stdout):
    s = result["summary"]
    w = out.write
    w("== Summary ==\n")
    w(f"messages {s['messages']}, compared {s['compared']}, errors {s['errors']}\n")
    w(f"verdict agreement: {s['verdict_agreement_pct']:.1f}%  "
      f"(spam: SA {s['sa_spam']}, sift {s['sift_spam']}, both {s['spam_both']})\n")
    w(f"score |sift - SA| <= {s['score_within']}: {s['score_within_pct']:.1f}%   "
      f"mean diff {s['mean_diff']:+.3f}\n")
    w("score diff (sift - SA) percentiles: " + "  ".join(
        f"{k} {v:+.2f}" for k, v in s["score_diff_percentiles"].items()) + "\n")
    w("|diff| percentiles: " + "  ".join(
        f"{k} {v:.2f}" for k, v in s["abs_score_diff_percentiles"].items()) + "\n")
    w(f"messages with the same scored rules hit: {s['same_hits_pct']:.1f}%\n")
    w(f"SA score = sum of set-0 scores of its hits (score set check): {s['sa_score_explained_pct']:.1f}%\n")
    tp, fp, fn = s["rule_tp_fp_fn_compiled"]
    w(f"rule-hit F1 over the {s['compiled_rules']} rules sift compiled: {fmt(s['rule_f1_compiled'])}  "
      f"(precision {fmt(s['rule_precision_compiled'])}, recall {fmt(s['rule_recall_compiled'])}; "
      f"tp {tp} fp {fp} fn {fn})\n")
    tp, fp, fn = s["rule_tp_fp_fn_compiled_self_contained"]
    w(f"  of which metas needing no disabled rule, and non-meta rules: "
      f"{fmt(s['rule_f1_compiled_self_contained'])}  (tp {tp} fp {fp} fn {fn})\n")
    tp, fp, fn = s["rule_tp_fp_fn_all_scored"]
    w(f"rule-hit F1 over all scored rules: {fmt(s['rule_f1_all_scored'])}  (tp {tp} fp {fp} fn {fn})\n")

    w("\n== SA hits on rules sift does not run, by reason (hits, points missed) ==\n")
    for group in result["missing_in_sift"][:top]:
        rules = ", ".join(group["rules"][:6]) + (" ..." if len(group["rules"]) > 6 else "")
        w(f"{group['sa_hits']:5d} {group['points']:7.1f}  {group['reason']}: {rules}\n")
    if len(result["missing_in_sift"]) > top:
        w(f"  ... {len(result['missing_in_sift']) - top} more reasons in --json\n")

    compiled = [r for r in result["rules"] if r["status"] == "compiled"]
    w(f"\n== Per rule, compiled by sift and hit by either ({len(compiled)} rules; "
      "most disagreements first) ==\n")
    w(f"{'rule':32s} {'SA':>5s} {'sift':>5s} {'both':>5s} {'SAonly':>6s} {'siftonly':>8s} "
      f"{'prec':>6s} {'recall':>6s} {'F1':>6s}  needs disabled\n")
    for r in compiled:
        w(f"{r['rule']:32s} {r['sa']:5d} {r['sift']:5d} {r['both']:5d} {r['fn']:6d} {r['fp']:8d} "
          f"{fmt(r['precision'], 2):>6s} {fmt(r['recall'], 2):>6s} {fmt(r['f1'], 2):>6s}  "
          f"{needs(r)}".rstrip() + "\n")

    w(f"\n== Top {top} disagreeing rules (any status), with example messages ==\n")
    for r in result["rules"][:top]:
        if r["fp"] + r["fn"] == 0:
            break
        why = f" [{r['status']}{': ' + r['reason'] if r['reason'] else ''}]"
        if r["needs_disabled"]:
            why += f" [needs disabled: {needs(r)}]"
        w(f"{r['rule']}: SA only {r['fn']}, sift only {r['fp']}{why}\n")
        for f in r["sa_only"][:2]:
            w(f"    SA only:   {short(f, base)}\n")
        for f in r["sift_only"][:2]:
            w(f"    sift only: {short(f, base)}\n")

    w(f"\n== Top {top} messages (verdict differs first, then largest |diff|) ==\n")
    for m in result["messages"][:top]:
        w(f"{short(m['file'], base)}: SA {m['sa_score']:.1f}{' spam' if m['sa_spam'] else ''}, "
          f"sift {m['sift_score']:.1f}{' spam' if m['sift_spam'] else ''} ({m['diff']:+.2f})\n")
        if m["sa_only"]:
            w(f"    SA only:   {' '.join(m['sa_only'])}\n")
        if m["sift_only"]:
            w(f"    sift only: {' '.join(m['sift_only'])}\n")
    previews = result.get("previews")
    if previews:
        w(f"\n== Content previews (REPORT), spamd against the siftd daemon ==\n")
        w(f"same preview: {previews['agreement_pct']:.1f}%  ({previews['same']} of {previews['compared']})\n")
        for d in previews["differ"][:top]:
            w(f"{short(d['file'], base)}:\n    SA:   {d['sa']!r}\n    sift: {d['sift']!r}\n")
    if result["errors"]:
        w(f"\n== Errors ({len(result['errors'])}) ==\n")
        for e in result["errors"][:top]:
            w(f"{short(e['file'], base)}: SA {e['sa']}; sift {e['sift']}\n")


# ---------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="message files or directories (recursive)")
    parser.add_argument("--sample", type=int, default=0, help="compare N files picked pseudo-randomly")
    parser.add_argument("--seed", type=int, default=1, help="seed of the sample (default 1)")
    parser.add_argument("--siftd", default=None, help="siftd binary (default target/release/siftd)")
    parser.add_argument("--rules", default=DEFAULT_RULES, help=f"rules directory (default {DEFAULT_RULES})")
    parser.add_argument("--site", default=DEFAULT_SITE, help=f"site config directory (default {DEFAULT_SITE})")
    parser.add_argument("--json", dest="json_out", default=None, help="write all figures to this file")
    parser.add_argument("--top", type=int, default=15, help="rows in the top-N sections (default 15)")
    parser.add_argument("--min-verdict-agreement", type=float, default=None, metavar="PCT",
                        help="exit 1 if verdict agreement (%%) is below")
    parser.add_argument("--min-f1", type=float, default=None, metavar="F1",
                        help="exit 1 if rule-hit F1 over compiled rules (0..1) is below")
    parser.add_argument("--min-score-within", type=float, default=None, metavar="PCT",
                        help=f"exit 1 if the share (%%) of |score diff| <= {WITHIN} is below")
    parser.add_argument("--previews", type=int, default=0, metavar="N",
                        help="also compare the content previews of REPORT for the first N files, "
                             "spamd against the siftd daemon (not with --sa-from)")
    parser.add_argument("--min-preview-agreement", type=float, default=None, metavar="PCT",
                        help="exit 1 if the share (%%) of the same content previews is below")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--sa-from", default=None, metavar="JSON",
                        help="take SpamAssassin's answers from an earlier --json output of this harness "
                             "(same files, rules and site config) instead of running spamd again")
    args = parser.parse_args(argv)
    # SIGTERM unwinds like an error, so spamd is stopped in `finally`.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))

    siftd = args.siftd
    if siftd is None:
        here = os.path.dirname(os.path.abspath(__file__))
        siftd = os.path.normpath(os.path.join(here, "..", "..", "target", "release", "siftd"))
    if not os.access(siftd, os.X_OK):
        raise HarnessError(f"siftd not found or not executable: {siftd} (cargo build --release -p siftd-linux)")
    if args.sa_from is None and shutil.which("spamd") is None:
        raise HarnessError("spamd not found (install spamassassin)")

    files = pick_sample(collect_files(args.paths), args.sample, args.seed)
    if not files:
        raise HarnessError("no message files")
    base = os.path.commonpath([os.path.abspath(p) for p in args.paths]) if args.paths else ""
    if os.path.isfile(base):
        base = os.path.dirname(base)
    progress = not args.quiet

    started = time.monotonic()
    disabled, _types = sift_lint(siftd, args.rules, args.site)
    defined, metas = parse_rule_names([args.rules, args.site])
    depends = disabled_dependencies(metas, disabled)
    if progress:
        print(f"siftd scan: {len(files)} files", file=sys.stderr, flush=True)
    sift = sift_scan(siftd, args.rules, args.site, files)
    sift_seconds = time.monotonic() - started

    sa_started = time.monotonic()
    previews = None
    if args.previews and args.sa_from is not None:
        raise HarnessError("--previews needs spamd: not with --sa-from")
    if args.sa_from is not None:
        sa = stored_sa_answers(args.sa_from, files)
    else:
        workdir = tempfile.mkdtemp(prefix="sift-agree-")
        spamd = Spamd(args.rules, args.site, workdir)
        daemon = SiftDaemon(siftd, args.rules, args.site, workdir)
        try:
            if progress:
                print("spamd: starting on 127.0.0.1", file=sys.stderr, flush=True)
            spamd.start()
            sa = sa_scan(spamd, files, progress)
            if args.previews:
                daemon.start()
                previews = compare_previews(spamd.port, daemon.port, files[:args.previews], progress)
        finally:
            daemon.stop()
            spamd.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    sa_seconds = time.monotonic() - sa_started

    result = compare(files, sa, sift, defined, disabled, depends)
    if previews is not None:
        result["previews"] = previews
    result["summary"]["sift_seconds"] = round(sift_seconds, 1)
    result["summary"]["sa_seconds"] = round(sa_seconds, 1)
    result["command"] = {"paths": args.paths, "sample": args.sample, "seed": args.seed,
                         "rules": args.rules, "site": args.site, "siftd": siftd}
    print_report(result, base, args.top)
    print(f"\n(siftd {sift_seconds:.1f} s, spamd {sa_seconds:.1f} s)")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)

    s = result["summary"]
    failed = []
    if args.min_verdict_agreement is not None and s["verdict_agreement_pct"] < args.min_verdict_agreement:
        failed.append(f"verdict agreement {s['verdict_agreement_pct']:.1f}% < {args.min_verdict_agreement}%")
    if args.min_f1 is not None and (s["rule_f1_compiled"] or 0.0) < args.min_f1:
        failed.append(f"rule F1 {fmt(s['rule_f1_compiled'])} < {args.min_f1}")
    if args.min_score_within is not None and s["score_within_pct"] < args.min_score_within:
        failed.append(f"score within {WITHIN}: {s['score_within_pct']:.1f}% < {args.min_score_within}%")
    if args.min_preview_agreement is not None:
        pct = previews["agreement_pct"] if previews else 0.0
        if pct < args.min_preview_agreement:
            failed.append(f"content previews the same: {pct:.1f}% < {args.min_preview_agreement}%")
    for line in failed:
        print(f"BELOW THRESHOLD: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as err:
        print(f"agree.py: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
