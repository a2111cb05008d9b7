"""check_per_user.py URI USER — after drivers_modern_auth's run: through the
proxy (URI carries USER's credentials), connectionStatus is the backend's and
names USER, and the proxy's backend connections logged in as the user
(mongoplexStats counters user_backend_logins, user_pools_created). Exit 1
with the reason otherwise."""
import sys

import pymongo

uri, user = sys.argv[1], sys.argv[2]
c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000)
users = c.admin.command("connectionStatus")["authInfo"]["authenticatedUsers"]
counters = c.admin.command("mongoplexStats")["counters"]
logins = counters.get("user_backend_logins", 0)
pools = counters.get("user_pools_created", 0)
print("per_user check: connectionStatus %s, user_backend_logins %d, user_pools_created %d"
      % (users, logins, pools))
if not users or users[0].get("user") != user:
    sys.exit("FAIL per_user: connectionStatus does not name %s: %s" % (user, users))
if logins < 1 or pools < 1:
    sys.exit("FAIL per_user: the proxy's backend connections did not log in as %s" % user)
