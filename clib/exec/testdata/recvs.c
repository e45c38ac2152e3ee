/*
 * recvs.c - ibv_post_recv on a QP's own receive queue, which softnic's
 * library stages in memory of its own for receives of up to two SGEs and
 * passes to the engine for the others (clib/libibverbs/qp.c): whichever
 * way each went, the receives complete in posting order, a full queue
 * refuses the next one with ENOMEM and bad_wr (at exactly max_recv_wr, and
 * again after a completion freed one slot), one of more SGEs than the QP
 * takes is refused with EINVAL, a QP in ERR flushes what it
 * held and what is posted to it, one in RESET refuses posts with EINVAL
 * and holds nothing once it is connected again, and two threads posting
 * at once fill the queue exactly.
 */
#include <pthread.h>

#include "loop.h"

static struct loop l;
static struct ibv_qp *rq; /* the receiving QP, max_recv_sge 4 */
static struct ibv_qp *sq; /* the sending one */
static uint32_t depth;    /* rq's max_recv_wr */
static union ibv_gid gid;

/* post_to posts one receive of n SGEs (n > 2: through the engine) with
 * wr_id id to qp, into 16 bytes of the buffer at slot id each, and returns
 * ibv_post_recv's result, checking bad_wr when it fails; post posts to rq. */
static int post_to(struct ibv_qp *qp, uint64_t id, int n)
{
	struct ibv_sge sge[5];
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = sge, .num_sge = n }, *bad = NULL;
	int err;

	for (int i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)l.buf + 65536 + (id % 1024) * 64 + (uint64_t)i * 16;
		sge[i].length = 16;
		sge[i].lkey = l.mr->lkey;
	}
	err = ibv_post_recv(qp, &wr, &bad);
	if (err)
		check(bad == &wr, "post %llu: error %d without bad_wr on it", (unsigned long long)id, err);
	return err;
}

static int post(uint64_t id, int n)
{
	return post_to(rq, id, n);
}

/* send sends 8 bytes holding v from sq, unsignaled but for every 16th. */
static void send(uint64_t v, int signaled)
{
	struct ibv_sge sge = { (uintptr_t)l.buf + (v % 512) * 8, 8, l.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1u << 30, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = signaled ? IBV_SEND_SIGNALED : 0,
	}, *bad;

	memcpy(l.buf + (v % 512) * 8, &v, 8);
	if (ibv_post_send(sq, &wr, &bad))
		die("ibv_post_send");
}

/* recv_wc polls until a receive completion comes (skipping send ones) and
 * returns it, whatever its status. */
static struct ibv_wc recv_wc(void)
{
	struct ibv_wc wc;
	time_t end = time(NULL) + 10;

	for (;;) {
		int n = ibv_poll_cq(l.cq, 1, &wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1 && wc.wr_id != 1u << 30)
			return wc;
		if (n == 1)
			check(wc.status == IBV_WC_SUCCESS, "send: %s", ibv_wc_status_str(wc.status));
		check(time(NULL) < end, "no receive completion in 10 s");
	}
}

static void state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		die("modify to %d", s);
}

/* order posts a full queue, one receive in three through the engine,
 * checks that the next is refused both ways, then takes them all by
 * SENDs and checks their order and data. */
static void order(void)
{
	for (uint32_t i = 0; i < depth; i++)
		check(post(i, i % 3 == 2 ? 3 : 1) == 0, "post %u of %u refused", i, depth);
	check(post(depth, 5) == EINVAL, "a receive of 5 SGEs into max_recv_sge 4: not EINVAL");
	check(post_to(sq, 0, 2) == EINVAL, "a receive of 2 SGEs into max_recv_sge 1: not EINVAL");
	check(post(depth, 1) == ENOMEM, "a staged post to a full queue: not ENOMEM");
	check(post(depth, 3) == ENOMEM, "an engine post to a full queue: not ENOMEM");
	for (uint32_t i = 0; i < depth; i++) {
		struct ibv_wc wc;
		uint64_t v;

		send(1000 + i, i % 16 == 15 || i == depth - 1);
		wc = recv_wc();
		check(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "receive %u: %s", i,
		      ibv_wc_status_str(wc.status));
		check(wc.wr_id == i, "receive %u completed as wr_id %llu", i, (unsigned long long)wc.wr_id);
		check(wc.byte_len == 8, "receive %u: byte_len %u", i, wc.byte_len);
		memcpy(&v, l.buf + 65536 + (i % 1024) * 64, 8);
		check(v == 1000 + i, "receive %u holds %llu", i, (unsigned long long)v);
		if (i == 0) {
			/* One slot freed: one more post, then full again. */
			check(post(depth, 1) == 0, "a post after a completion freed a slot: refused");
			check(post(depth + 1, 1) == ENOMEM, "the post after it: not ENOMEM");
		}
	}
	/* The one posted after the first completion is still there. */
	send(7, 1);
	check(recv_wc().wr_id == depth, "the receive posted last did not take the last SEND");
	printf("order: %u receives in order, ENOMEM at %u both ways\n", depth, depth);
}

/* flush posts receives both ways, moves the QP to ERR and checks they are
 * flushed in order, then that a post in ERR is flushed at once. */
static void flush(void)
{
	struct ibv_wc wc;

	for (uint32_t i = 0; i < 6; i++)
		check(post(100 + i, i % 2 ? 3 : 1) == 0, "post %u refused", i);
	state(rq, IBV_QPS_ERR);
	for (uint32_t i = 0; i < 6; i++) {
		wc = recv_wc();
		check(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 100 + i, "flush %u: wr_id %llu, %s", i,
		      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	}
	check(post(200, 1) == 0 && post(201, 3) == 0, "posts in ERR refused");
	for (uint32_t i = 0; i < 2; i++) {
		wc = recv_wc();
		check(wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 200 + i, "post in ERR %u: wr_id %llu, %s",
		      i, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	}
	printf("flush: 6 flushed in order, 2 posted in ERR flushed\n");
}

/* reset checks that a QP in RESET refuses posts, and that once connected
 * again its queue is empty (a full one's worth goes in, one more does not)
 * and its receives work. */
static void reset(void)
{
	state(rq, IBV_QPS_RESET);
	state(sq, IBV_QPS_RESET);
	check(post(300, 1) == EINVAL && post(301, 3) == EINVAL, "posts in RESET: not EINVAL");
	to_rts(rq, sq->qp_num, &gid);
	to_rts(sq, rq->qp_num, &gid);
	for (uint32_t i = 0; i < depth; i++)
		check(post(400 + i, 1) == 0, "post %u after the reset refused", i);
	check(post(400 + depth, 1) == ENOMEM, "post beyond a full queue after the reset: not ENOMEM");
	for (uint32_t i = 0; i < depth; i++) {
		send(i, i == depth - 1);
		check(recv_wc().wr_id == 400 + i, "receive %u after the reset out of order", i);
	}
	printf("reset: posts refused in RESET, %u receives after it\n", depth);
}

static void *poster(void *arg)
{
	uint64_t base = (uintptr_t)arg, *n = calloc(1, sizeof(*n));

	for (uint64_t i = 0; i < depth; i++)
		if (post(base + i, 1) == 0)
			++*n;
	return n;
}

/* threads has two threads post a queue's worth each: exactly depth go in. */
static void threads(void)
{
	pthread_t t[2];
	uint64_t total = 0;

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, poster, (void *)(uintptr_t)(10000 + i * 1000));
	for (int i = 0; i < 2; i++) {
		void *n;

		pthread_join(t[i], &n);
		total += *(uint64_t *)n;
		free(n);
	}
	check(total == depth, "two threads posted %llu receives into a queue of %u", (unsigned long long)total,
	      depth);
	for (uint32_t i = 0; i < depth; i++) {
		send(i, i == depth - 1);
		check(recv_wc().status == IBV_WC_SUCCESS, "receive %u of the threads' failed", i);
	}
	printf("threads: %llu of %u posts taken\n", (unsigned long long)total, 2 * depth);
}

int main(void)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 20, .max_send_sge = 1, .max_recv_sge = 4 },
	};

	loop_open(&l, 16, 256);
	if (ibv_query_gid(l.ctx, 1, 1, &gid))
		die("ibv_query_gid");
	ia.send_cq = ia.recv_cq = l.cq;
	rq = ibv_create_qp(l.pd, &ia);
	if (!rq)
		die("ibv_create_qp");
	depth = ia.cap.max_recv_wr;
	check(depth >= 20, "max_recv_wr %u", depth);
	ia.cap.max_recv_wr = 1;
	ia.cap.max_recv_sge = 1;
	sq = ibv_create_qp(l.pd, &ia);
	if (!sq)
		die("ibv_create_qp");
	to_rts(rq, sq->qp_num, &gid);
	to_rts(sq, rq->qp_num, &gid);
	order();
	flush();
	reset();
	threads();
	/* Receives left staged go with their QP. */
	check(post(1, 1) == 0 && post(2, 3) == 0 && post(3, 1) == 0, "posts before destroy refused");
	if (ibv_destroy_qp(rq) || ibv_destroy_qp(sq))
		die("ibv_destroy_qp");
	loop_close(&l);
	return 0;
}
