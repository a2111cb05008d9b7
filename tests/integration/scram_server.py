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
The server-side SCRAM is mocklib.Scram256 (test scaffolding).
"""

import sys

import mocklib


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: scram_server.py USER PASSWORD [--forge-signature]")
    user, password = sys.argv[1], sys.argv[2]
    forge = "--forge-signature" in sys.argv[3:]
    scram = mocklib.Scram256(password)
    authed = set()  # client ports logged in

    def start(doc, port):
        if doc.get("mechanism") != "SCRAM-SHA-256":
            return None
        if mocklib.scram_user(doc) != user:
            return mocklib.auth_failed()
        return scram.start(doc)

    def cont(doc, port):
        r, proof_ok = scram.finish(doc, forge)
        if proof_ok and not forge:
            authed.add(port)
        return r

    def handle(req):
        name = (req.command_name or "").lower()
        port = req.client_port
        if name in ("ismaster", "hello"):
            reply = mocklib.standalone_hello(17)
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

    mocklib.serve_port(handle)


if __name__ == "__main__":
    main()
