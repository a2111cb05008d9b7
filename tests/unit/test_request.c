/*
 * test_request.c — request states (core/request.c): every move goes through
 * request_set_state, and the counts the stats read (per state, per owner,
 * owners per phase) follow the lists; abandoning an owner drops what waits
 * and keeps what runs; replies reach the owner through its callbacks.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/request.h"
#include "core/spare.h"

static int sent, finished;

static bool stub_may_dispatch(const struct request_owner *o)
{
	(void)o;
	return true;
}

static void stub_send(struct request_owner *o, struct request *req, struct evbuffer *msg)
{
	(void)o;
	(void)req;
	(void)msg;
	sent++;
}

static void stub_finished(struct request_owner *o)
{
	(void)o;
	finished++;
}

static const struct request_owner_ops stub_owner_ops = {
    .may_dispatch = stub_may_dispatch,
    .send = stub_send,
    .finished = stub_finished,
};

static int released;

static void stub_release(struct request *req)
{
	(void)req;
	released++;
}

static const struct request_ops stub_ops = {
    .name = "stub",
    .error = request_fail,
    .network_error = request_fail_network,
    .abandon = request_abandon_default,
    .release = stub_release,
};

/* Counts as a stats read sees them. */
static void expect_phases(int waiting, int running)
{
	int w, r;

	request_owner_phases(&w, &r);
	cr_expect_eq(w, waiting, "owners waiting: %d, expected %d", w, waiting);
	cr_expect_eq(r, running, "owners running: %d, expected %d", r, running);
}

Test(request, states_move_lists_and_counts)
{
	struct request_owner a, b;
	struct request_queue q;
	struct request *r1, *r2, *r3;
	int base_queued = request_count(REQ_QUEUED), base_running = request_count(REQ_RUNNING);

	REQUEST_QUEUE_INIT(&q);
	request_owner_init(&a, 1, &stub_owner_ops);
	request_owner_init(&b, 2, &stub_owner_ops);
	r1 = request_new(&a, &stub_ops);
	r2 = request_new(&a, &stub_ops);
	r3 = request_new(&b, &stub_ops);
	cr_expect_eq(a.inflight, 2);
	cr_expect_eq(a.n_state[REQ_NEW], 2);
	expect_phases(0, 0);

	request_set_state(r1, REQ_QUEUED, &q);
	request_set_state(r3, REQ_QUEUED, &q);
	request_set_state_after(r2, REQ_QUEUED, &q, NULL); /* at the head */
	cr_expect_eq(q.n, 3);
	cr_expect_eq(TAILQ_FIRST(&q.list), r2, "inserted after NULL: the head");
	cr_expect_eq(TAILQ_LAST(&q.list, request_list), r3);
	cr_expect_eq(request_count(REQ_QUEUED), base_queued + 3);
	cr_expect(request_waiting(r1));
	expect_phases(2, 0);

	request_set_state(r1, REQ_RUNNING, NULL); /* the module's own list */
	cr_expect_eq(q.n, 2);
	cr_expect_eq(request_count(REQ_RUNNING), base_running + 1);
	cr_expect_eq(a.n_state[REQ_RUNNING], 1);
	cr_expect_eq(a.n_state[REQ_QUEUED], 1);
	expect_phases(1, 1); /* a runs (and waits): counted as running */

	request_set_state(r3, REQ_NEW, NULL);
	cr_expect_eq(r3->queue, NULL);
	expect_phases(0, 1);
	request_free(r3);
	cr_expect_eq(b.inflight, 0);

	/* a closes: its queued request is dropped, the running one stays */
	released = 0;
	request_owner_abandon_all(&a);
	cr_expect_eq(released, 1, "the waiting request was freed");
	cr_expect_eq(q.n, 0);
	cr_expect_eq(a.inflight, 0);
	cr_expect(TAILQ_EMPTY(&a.requests));
	cr_expect_eq(r1->owner, NULL);
	cr_expect_eq(r1->state, REQ_RUNNING);
	expect_phases(0, 0);
	cr_expect_eq(request_count(REQ_QUEUED), base_queued);

	/* its reply arrives: dropped, nobody is told */
	sent = finished = 0;
	request_reply_raw(r1, NULL);
	cr_expect_eq(sent, 0);
	cr_expect_eq(finished, 0);
	cr_expect_eq(request_count(REQ_RUNNING), base_running);
}

Test(request, reply_reaches_owner_through_callbacks)
{
	struct request_owner a;
	struct request *r;
	bson_t doc = BSON_INITIALIZER;

	request_owner_init(&a, 7, &stub_owner_ops);
	r = request_new(&a, &stub_ops);
	request_set_state(r, REQ_LOCAL, NULL);
	sent = finished = 0;
	BSON_APPEND_INT32(&doc, "ok", 1);
	request_reply_doc(r, &doc);
	bson_destroy(&doc);
	cr_expect_eq(sent, 1, "owner's send callback");
	cr_expect_eq(finished, 1, "owner's finished callback");
	cr_expect_eq(a.inflight, 0);
	cr_expect_eq(request_count(REQ_LOCAL), 0);
}

/* ---- the layers' parts (request_part_set) ---- */

struct fake_route {
	long words[5];
	char *owned; /* what the layer attached: its fini frees it */
};
struct fake_client {
	char c[3];
};

static int route_finis, client_finis, order;
static int route_fini_at, release_at;

static void fake_route_fini(struct request *req)
{
	struct fake_route *r = (struct fake_route *)req->route;

	free(r->owned);
	r->owned = NULL;
	route_finis++;
	route_fini_at = ++order;
}

static void fake_client_fini(struct request *req)
{
	(void)req;
	client_finis++;
}

static void order_release(struct request *req)
{
	(void)req;
	release_at = ++order;
}

static const struct request_ops order_ops = {
    .name = "order",
    .abandon = request_abandon_default,
    .release = order_release,
};

Test(request, parts_zeroed_separate_and_freed_by_their_layer)
{
	static const struct request_part route = {sizeof(struct fake_route), fake_route_fini};
	static const struct request_part client = {sizeof(struct fake_client), fake_client_fini};
	struct request *r, *bare;
	struct fake_route *fr;
	char *base, *end;

	bare = request_new(NULL, &stub_ops);
	cr_assert_null(bare->route, "no part registered: no pointer");
	cr_assert_null(bare->client);
	request_part_set(REQUEST_PART_ROUTE, &route);
	request_part_set(REQUEST_PART_CLIENT, &client);
	r = request_new(NULL, &order_ops);
	cr_assert_not_null(r->route);
	cr_assert_not_null(r->client);
	base = (char *)r;
	fr = (struct fake_route *)r->route;
	cr_assert_geq((char *)r->route, base + sizeof(*r), "after the request");
	cr_assert_geq((char *)r->client, (char *)r->route + sizeof(struct fake_route),
		      "parts do not overlap");
	cr_assert_eq(((uintptr_t)r->route) % 16, 0, "aligned");
	cr_assert_eq(((uintptr_t)r->client) % 16, 0, "aligned");
	end = (char *)r->client + sizeof(struct fake_client);
	for (char *p = (char *)r->route; p < end; p++)
		cr_assert_eq(*p, 0, "zeroed at offset %td", p - base);
	fr->owned = malloc(32); /* ASan's leak check fails if no fini frees it */
	request_free(r);
	cr_assert_eq(route_finis, 1);
	cr_assert_eq(client_finis, 1);
	cr_assert_lt(release_at, route_fini_at, "the creator's release runs first");
	request_free(bare); /* made before the parts: none of their finis runs */
	cr_assert_eq(route_finis, 1);
	cr_assert_eq(client_finis, 1);
}

/* A freed request's memory may serve the next request_new (core/spare.h):
 * it comes back zeroed, request and parts, and is really reused outside
 * ASan builds (where nothing is kept, so a use after free is still seen). */
Test(request, freed_memory_comes_back_zeroed)
{
	static const struct request_part client = {sizeof(struct fake_client), NULL};
	struct request *r, *again;
	char *end;

	request_part_set(REQUEST_PART_CLIENT, &client);
	r = request_new(NULL, &stub_ops);
	memset(r->client, 0x5a, sizeof(struct fake_client));
	r->enqueued_usec = 12345;
	r->reply_compressor = 3;
	request_free(r);
	again = request_new(NULL, &stub_ops);
	cr_assert_eq(again == r, !SPARE_UNDER_ASAN, "kept and reused: %d (ASan build: %d)",
		     again == r, SPARE_UNDER_ASAN);
	cr_assert_eq(again->reply_compressor, -1, "request_new's own defaults");
	cr_assert_neq(again->enqueued_usec, 12345);
	end = (char *)again->client + sizeof(struct fake_client);
	for (char *p = (char *)again->client; p < end; p++)
		cr_assert_eq(*p, 0, "part zeroed at offset %td", p - (char *)again);
	request_free(again);
	request_spare_clear();
	again = request_new(NULL, &stub_ops);
	request_free(again);
	request_spare_clear(); /* nothing left for the leak check */
}
