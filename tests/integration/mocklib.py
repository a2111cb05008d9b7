"""mocklib.py — what the mockupdb backends in this folder share
(mock_backend.py, scram_server.py, srv_mock.py import it; each runs as a
script from this folder, so the folder is on sys.path):

  standalone_hello(wire)  the hello fields of a writable standalone server
  auth_failed(errmsg)     a code 18 AuthenticationFailed reply document
  scram_user(doc)         the user name in a saslStart's client-first payload
  Scram256                the server side of SCRAM-SHA-256 conversations for
                          one user and password (test scaffolding on Python's
                          hashlib/hmac; thread-safe: mockupdb serves members
                          and connections from several threads)
  serve_until_stdin_eof   print the ready line, then serve until stdin
                          reaches EOF (the test that started us went away)
                          or SIGTERM/SIGINT
  serve_port(handle)      one mockupdb server on a free port answering with
                          handle, "port N" as the ready line
"""

import base64
import hashlib
import hmac
import os
import signal
import sys
import threading

from bson.binary import Binary
from mockupdb import MockupDB

ITER = 4096


def standalone_hello(wire):
    return dict(ismaster=True, isWritablePrimary=True, minWireVersion=0,
                maxWireVersion=wire, maxBsonObjectSize=16 * 1024 * 1024,
                maxMessageSizeBytes=48000000, maxWriteBatchSize=100000,
                logicalSessionTimeoutMinutes=30)


def auth_failed(errmsg="Authentication failed."):
    return {"ok": 0, "code": 18, "codeName": "AuthenticationFailed", "errmsg": errmsg}


def _client_first_bare(doc):
    return bytes(doc["payload"]).decode()[3:]  # after the "n,," GS2 header


def _attrs(bare):
    return dict(a.split("=", 1) for a in bare.split(","))


def scram_user(doc):
    return _attrs(_client_first_bare(doc)).get("n")


def _h(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class Scram256:
    """Conversations by conversationId: start() answers a saslStart (the
    caller has checked the user), finish() a saslContinue carrying the proof.
    Reply documents carry no "ok" field unless they are refusals."""

    def __init__(self, password):
        self.salt = os.urandom(16)
        self.salted = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, ITER)
        self.lock = threading.Lock()
        self.convs = {}  # conversationId -> (client_first_bare, server_first, nonce)
        self.next_id = 1

    def start(self, doc):
        bare = _client_first_bare(doc)
        nonce = _attrs(bare)["r"] + base64.b64encode(os.urandom(18)).decode()
        sf = "r=%s,s=%s,i=%d" % (nonce, base64.b64encode(self.salt).decode(), ITER)
        with self.lock:
            cid = self.next_id
            self.next_id += 1
            self.convs[cid] = (bare, sf, nonce)
        return {"conversationId": cid, "done": False, "payload": Binary(sf.encode())}

    def finish(self, doc, forge=False):
        """(reply, proof_ok): the server signature (zeros when forge) with
        done: true, or the refusal (17 unknown conversation, 18 bad proof)."""
        conv = self.convs.get(doc.get("conversationId"))
        if conv is None:
            return {"ok": 0, "code": 17, "errmsg": "No SASL session state found"}, False
        bare, sf, nonce = conv
        without_proof, proof = bytes(doc["payload"]).decode().rsplit(",p=", 1)
        auth_msg = "%s,%s,%s" % (bare, sf, without_proof)
        client_key = _h(self.salted, "Client Key")
        sig = _h(hashlib.sha256(client_key).digest(), auth_msg)
        want = bytes(a ^ b for a, b in zip(client_key, sig))
        if without_proof != "c=biws,r=" + nonce or base64.b64decode(proof) != want:
            return auth_failed(), False
        server_sig = bytes(32) if forge else _h(_h(self.salted, "Server Key"), auth_msg)
        return {"conversationId": doc["conversationId"], "done": True,
                "payload": Binary(b"v=" + base64.b64encode(server_sig))}, True


def serve_until_stdin_eof(ready_line):
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    signal.signal(signal.SIGINT, lambda *a: os._exit(0))
    sys.stdout.write(ready_line + "\n")
    sys.stdout.flush()
    try:
        sys.stdin.read()
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


def serve_port(handle):
    server = MockupDB(request_timeout=60)
    server.autoresponds(handle)
    serve_until_stdin_eof("port %d" % server.run())
