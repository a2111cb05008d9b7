/*
 * reload.c — prepare-all then commit-all for SIGHUP (see reload.h). Each
 * module that reload touches has a prepare step (build the new object, use
 * nothing of it) and a commit step (swap it in, cannot fail).
 */
#include "proxy/reload.h"

#include <string.h>

#include "core/globals.h"
#include "core/log.h"
#include "proxy/cauth.h"
#include "proxy/client_tls.h"

bool reload_prepare(const char *path, struct reload_parts *rp, char *err, size_t errlen)
{
	char warn[256];

	memset(rp, 0, sizeof(*rp));
	if (!cfg_load(path, &rp->cfg, err, errlen))
		return false;
	cfg_for_worker(&rp->cfg, g.nworkers, g.worker_id);
	cfg_keep_static(&g.cfg, &rp->cfg);
	if (!cauth_prepare(&rp->cfg, &rp->users, err, errlen))
		return false;
	if (!auth_load(rp->cfg.backend_uri, rp->cfg.backend_password_file, &rp->cred, warn,
		       sizeof(warn), err, errlen))
		return false;
	if (warn[0] != '\0')
		log_warning("%s", warn);
	return client_tls_prepare(&rp->cfg, &rp->tls, err, errlen);
}

void reload_commit(struct reload_parts *rp)
{
	cauth_commit(&rp->users, rp->cfg.auth_users_file);
	auth_commit(&rp->cred);
	client_tls_commit(rp->tls, &rp->cfg);
	rp->tls = NULL;
	cfg_free(&g.cfg);
	g.cfg = rp->cfg;
	memset(&rp->cfg, 0, sizeof(rp->cfg));
}

void reload_discard(struct reload_parts *rp)
{
	users_free(&rp->users);
	auth_cred_clear(&rp->cred);
	SSL_CTX_free(rp->tls);
	rp->tls = NULL;
	cfg_free(&rp->cfg);
}
