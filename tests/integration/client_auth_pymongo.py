#!/usr/bin/env python3
"""client_auth_pymongo.py HOST:PORT USER PASSWORD AUTHSOURCE — log in through
mongoplex with pymongo (whatever version this interpreter has): SCRAM-SHA-256,
SCRAM-SHA-1 and negotiated; insert + find; connectionStatus names USER; a wrong
password gets code 18; no credentials get code 13 on find. Prints one line per
check and exits non-zero on the first failure (used by test_client_auth.c)."""
import sys

import pymongo
from pymongo.errors import OperationFailure

hostport, user, password, source = sys.argv[1:5]


def client(u=user, p=password, **kw):
    return pymongo.MongoClient(
        "mongodb://%s:%s@%s/" % (u, p, hostport), authSource=source,
        serverSelectionTimeoutMS=5000, **kw)


print("pymongo", pymongo.version)
for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
    kw = {"authMechanism": mech} if mech else {}
    c = client(**kw)
    info = c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
    assert info == [{"user": user, "db": source}], info
    coll = c.pyauth["c_" + (mech or "negotiated").replace("-", "_")]
    coll.insert_one({"_id": 1, "m": mech})
    assert coll.find_one({"_id": 1})["m"] == mech
    coll.drop()
    c.close()
    print("login", mech or "negotiated", "ok")

for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1"):
    c = client(p=password + "x", authMechanism=mech)
    try:
        c.admin.command("ping")
        sys.exit("a wrong password logged in (%s)" % mech)
    except OperationFailure as e:
        assert e.code == 18, e.details
    c.close()
    print("wrong password", mech, "code 18")

c = pymongo.MongoClient("mongodb://%s/" % hostport, serverSelectionTimeoutMS=5000)
try:
    c.pyauth.c.find_one()
    sys.exit("find without login ran")
except OperationFailure as e:
    assert e.code == 13, e.details
print("no login: code 13")
print("OK")
