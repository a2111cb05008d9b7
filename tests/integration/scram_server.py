#!/usr/bin/python3
"""scram_server.py — a mockupdb backend that requires SCRAM-SHA-256 and
ANSWERS speculativeAuthenticate (FerretDB 1.24 ignores it), for
test_backend_auth.c: the proxy's one-round-trip login path, and a server
that cannot prove it knows the password.

    /usr/bin/python3 scram_server.py USER PASSWORD [--forge-signature]

Prints "port N" once listening; serves until stdin reaches EOF.

  hello/isMaster      standalone, wire 17; with speculativeAuthenticate
                      {saslStart, SCRAM-SHA-256}: replies the server-first
                      message in hello.speculativeAuthenticate
  saslStart           the same, as a command
  saslContinue        verifies the client proof; replies v=<signature>
                      (a wrong one with --forge-signature), done: true
  connectionStatus    authInfo.authenticatedUsers = [USER] once logged in
  anything else       {ok: 1} once logged in, else code 13 Unauthorized
Authentication state is per backend connection (mockupdb client port).
The server-side SCRAM here is test scaffolding (Python's hashlib/hmac).
"""

import base64
import hashlib
import hmac
import os
import signal
import sys

from bson.binary import Binary
from mockupdb import MockupDB

ITER = 4096


def h(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: scram_server.py USER PASSWORD [--forge-signature]")
    user, password = sys.argv[1], sys.argv[2]
    forge = "--forge-signature" in sys.argv[3:]
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, ITER)
    convs = {}      # conversationId -> (client_first_bare, server_first, nonce, port)
    authed = set()  # client ports logged in
    next_id = [1]

    def start(doc, port):
        if doc.get("mechanism") != "SCRAM-SHA-256":
            return None
        cf = bytes(doc["payload"]).decode()
        bare = cf[3:]
        attrs = dict(a.split("=", 1) for a in bare.split(","))
        if attrs.get("n") != user:
            return {"ok": 0, "code": 18, "codeName": "AuthenticationFailed",
                    "errmsg": "Authentication failed."}
        nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        sf = "r=%s,s=%s,i=%d" % (nonce, base64.b64encode(salt).decode(), ITER)
        cid = next_id[0]
        next_id[0] += 1
        convs[cid] = (bare, sf, nonce, port)
        return {"conversationId": cid, "done": False, "payload": Binary(sf.encode())}

    def cont(doc, port):
        conv = convs.get(doc.get("conversationId"))
        if conv is None:
            return {"ok": 0, "code": 17, "errmsg": "No SASL session state found"}
        bare, sf, nonce, _ = conv
        final = bytes(doc["payload"]).decode()
        without_proof, proof = final.rsplit(",p=", 1)
        auth_msg = "%s,%s,%s" % (bare, sf, without_proof)
        client_key = h(salted, "Client Key")
        stored = hashlib.sha256(client_key).digest()
        sig = h(stored, auth_msg)
        want = bytes(a ^ b for a, b in zip(client_key, sig))
        if without_proof != "c=biws,r=" + nonce or base64.b64decode(proof) != want:
            return {"ok": 0, "code": 18, "codeName": "AuthenticationFailed",
                    "errmsg": "Authentication failed."}
        server_sig = h(h(salted, "Server Key"), auth_msg)
        if forge:
            server_sig = bytes(32)
        else:
            authed.add(port)
        return {"conversationId": doc["conversationId"], "done": True,
                "payload": Binary(b"v=" + base64.b64encode(server_sig))}

    def handle(req):
        name = (req.command_name or "").lower()
        port = req.client_port
        if name in ("ismaster", "hello"):
            reply = dict(ismaster=True, isWritablePrimary=True, minWireVersion=0,
                         maxWireVersion=17, maxBsonObjectSize=16 * 1024 * 1024,
                         maxMessageSizeBytes=48000000, maxWriteBatchSize=100000,
                         logicalSessionTimeoutMinutes=30)
            spec = req.doc.get("speculativeAuthenticate")
            if spec is not None:
                r = start(spec, port)
                if r is not None and "conversationId" in r:
                    reply["speculativeAuthenticate"] = r
            if "saslSupportedMechs" in req.doc:
                reply["saslSupportedMechs"] = ["SCRAM-SHA-256"]
            return req.ok(reply)
        if name == "saslstart":
            r = start(req.doc, port) or {"ok": 0, "code": 2, "errmsg": "mechanism"}
            return req.reply(dict({"ok": 1}, **r)) if "ok" not in r else req.reply(r)
        if name == "saslcontinue":
            r = cont(req.doc, port)
            return req.reply(dict({"ok": 1}, **r)) if "ok" not in r else req.reply(r)
        if port not in authed:
            return req.reply({"ok": 0, "code": 13, "codeName": "Unauthorized",
                              "errmsg": "command %s requires authentication" % name})
        if name == "connectionstatus":
            return req.ok(authInfo={"authenticatedUsers": [{"user": user, "db": "admin"}],
                                    "authenticatedUserRoles": []})
        return req.ok()

    server = MockupDB(request_timeout=60)
    server.autoresponds(handle)
    port = server.run()
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    signal.signal(signal.SIGINT, lambda *a: os._exit(0))
    sys.stdout.write("port %d\n" % port)
    sys.stdout.flush()
    try:
        sys.stdin.read()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
