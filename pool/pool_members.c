/*
 * pool_members.c — replica-set member sync: the pools follow the topology
 * monitor's snapshots (pool/topology.c). A discovered member gets a pool, a
 * member that left is drained, the primary becomes the target. Moved out of
 * pool.c; it reaches the pool table only through pool.h and pool_int.h.
 */
#include <string.h>

#include "core/errors.h"
#include "core/log.h"
#include "core/stats.h"
#include "pool/auth.h"
#include "pool/pool.h"
#include "pool/pool_int.h"
#include "pool/server.h"
#include "pool/topology.h"

static struct pool *pool_find(const char *name)
{
	for (int i = 0; i < pool_count(); i++)
		if (strcmp(pool_at(i)->name, name) == 0)
			return pool_at(i);
	return NULL;
}

/* A member left the replica set: close its idle connections, send its
 * waiting requests elsewhere (running ones finish). */
static void drain_member(struct pool *p)
{
	struct server *s;

	log_warning("replica set member %s left the topology: draining its pool", p->name);
	p->rs_present = false;
	while ((s = TAILQ_FIRST(&p->idle)) != NULL)
		server_close(s, MP_ERR(HOST_UNREACHABLE), "member left the replica set");
	pool_rs_requeue(p, MP_ERR(HOST_UNREACHABLE), "member left the replica set");
}

static void sync_member_list(const struct topo_snapshot *snap);

static void sync_member(const struct topo_member *m)
{
	struct pool *p = pool_find(m->addr);

	if (p == NULL) {
		if (pool_full() || m->salen == 0)
			return;
		p = pool_new(m->addr, m->host, m->port);
		memcpy(&p->addr, &m->sa, m->salen);
		p->addrlen = m->salen;
		log_notice("replica set member %s discovered", p->name);
	}
	if (p->member.type != m->type)
		log_notice("replica set member %s is now %s", p->name, topology_type_name(m->type));
	p->member = *m;
	p->rs_present = true;
	if (m->type == TOPO_PRIMARY)
		pool_set_target(p);
}

/* mongodb+srv://: the resolved authSource applies; while the target is
 * still the placeholder (pool.c), its hellos fail when the lookup failed and
 * move to the first member once there is one. */
static void sync_srv(void)
{
	const struct topo_srv *srv = topology_srv();
	struct pool *t = pool_target();

	if (srv->resolved)
		auth_set_dns_source(srv->auth_source);
	if (t->addrlen != 0)
		return;
	for (int i = 0; i < pool_count(); i++)
		if (pool_at(i)->addrlen != 0) {
			pool_set_target(pool_at(i));
			break;
		}
	if (pool_target() != t || srv->error[0] != '\0')
		pool_rs_requeue(t, MP_ERR(HOST_UNREACHABLE), srv->error);
}

void pool_sync_members(const struct topo_snapshot *snap)
{
	sync_member_list(snap);
	sync_srv();
}

static void sync_member_list(const struct topo_snapshot *snap)
{
	if (snap->n == 0)
		return;
	STAT_INC(rs_topology_changes);
	for (int i = 0; i < snap->n; i++)
		sync_member(&snap->m[i]);
	for (int i = 0; i < pool_count(); i++) {
		struct pool *p = pool_at(i);
		bool listed = false;

		for (int j = 0; j < snap->n && !listed; j++)
			listed = strcmp(snap->m[j].addr, p->name) == 0;
		if (!listed && p->rs_present)
			drain_member(p);
	}
}
