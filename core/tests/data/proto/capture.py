#!/usr/bin/env python3
"""Captures golden responses from a real spamd 4.0.1 on loopback.

Start three spamd instances first (see README.md), then run this script from this
directory. Each response is written byte for byte to <config>/<command>_<message>.resp.
"""
import os, socket

PORTS = {"stock": 7830, "rs0": 7831, "rs2": 7833}

def send(raw, port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(raw)
    s.shutdown(socket.SHUT_WR)
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        out += d
    s.close()
    return out

def request(cmd, body):
    return b"%s SPAMC/1.5\r\nContent-length: %d\r\n\r\n" % (cmd.encode(), len(body)) + body

messages = {n: open(n + ".eml", "rb").read() for n in ("gtube", "ham", "html")}
messages["gtube_crlf"] = messages["gtube"].replace(b"\n", b"\r\n")
messages["ham_crlf"] = messages["ham"].replace(b"\n", b"\r\n")

plan = [("stock", c, m) for c in ("CHECK", "SYMBOLS", "REPORT", "REPORT_IFSPAM", "HEADERS", "PROCESS") for m in ("gtube", "ham")]
plan += [("stock", "PROCESS", "gtube_crlf"), ("stock", "PROCESS", "html")]
plan += [("rs0", "PROCESS", m) for m in ("gtube", "ham", "html", "gtube_crlf", "ham_crlf")]
plan += [("rs0", "REPORT", "gtube")]
plan += [("rs2", "PROCESS", m) for m in ("gtube", "ham", "html")]

for name in ("badlines", "dash", "noeol", "nosubject", "tagged"):
    messages["edge/" + name] = open(f"edge/{name}.eml", "rb").read()

for config, cmd, name in plan:
    os.makedirs(config, exist_ok=True)
    with open(f"{config}/{cmd.lower()}_{name}.resp", "wb") as f:
        f.write(send(request(cmd, messages[name]), PORTS[config]))

for name in ("badlines", "dash", "noeol", "nosubject", "tagged"):
    for config in ("stock", "rs0"):
        with open(f"edge/{config}_{name}.resp", "wb") as f:
            f.write(send(request("PROCESS", messages["edge/" + name]), PORTS[config]))
