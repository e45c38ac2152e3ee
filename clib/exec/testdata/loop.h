/*
 * loop.h - a loopback RC connection for the hazard tests: two QPs of the
 * first device connected to each other over GID 1 (the device's
 * address), one CQ, one registered buffer. Every failure prints what failed
 * and exits 1; a test's own checks exit 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE (1 << 20)

struct loop {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	char *buf;
};

static __attribute__((unused)) void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
	exit(1);
}

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static struct ibv_context *open_first(void)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	if (!l || !l[0])
		die("no device");
	ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!ctx)
		die("ibv_open_device");
	return ctx;
}

static void to_rts(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* loop_open connects two RC QPs of the first device with send queues of
 * depth sq each and one CQ of cqe entries. */
static void loop_open(struct loop *l, int sq, int cqe)
{
	union ibv_gid gid;

	memset(l, 0, sizeof(*l));
	l->ctx = open_first();
	if (ibv_query_gid(l->ctx, 1, 1, &gid))
		die("ibv_query_gid");
	l->pd = ibv_alloc_pd(l->ctx);
	if (!l->pd)
		die("ibv_alloc_pd");
	l->buf = aligned_alloc(4096, BUF_SIZE);
	memset(l->buf, 0, BUF_SIZE);
	l->mr = ibv_reg_mr(l->pd, l->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!l->mr)
		die("ibv_reg_mr");
	l->cq = ibv_create_cq(l->ctx, cqe, NULL, NULL, 0);
	if (!l->cq)
		die("ibv_create_cq");
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {
			.send_cq = l->cq, .recv_cq = l->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = sq, .max_recv_wr = sq, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		l->qp[i] = ibv_create_qp(l->pd, &ia);
		if (!l->qp[i])
			die("ibv_create_qp");
	}
	to_rts(l->qp[0], l->qp[1]->qp_num, &gid);
	to_rts(l->qp[1], l->qp[0]->qp_num, &gid);
}

static __attribute__((unused)) void loop_close(struct loop *l)
{
	for (int i = 0; i < 2; i++)
		if (ibv_destroy_qp(l->qp[i]))
			die("ibv_destroy_qp");
	if (ibv_destroy_cq(l->cq) || ibv_dereg_mr(l->mr) || ibv_dealloc_pd(l->pd) ||
	    ibv_close_device(l->ctx))
		die("teardown");
	free(l->buf);
}

/* post_write writes len bytes at off of the buffer to off2 through QP 0,
 * signaled, with wr_id id. */
static int post_write(struct loop *l, uint64_t id, size_t off, size_t off2, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)l->buf + off, len, l->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)l->buf + off2, .rkey = l->mr->rkey },
	}, *bad;

	return ibv_post_send(l->qp[0], &wr, &bad);
}

/* poll_one polls the CQ until a completion comes or seconds pass (then
 * it exits 2), and returns it. */
static struct ibv_wc poll_one(struct loop *l, int seconds)
{
	struct ibv_wc wc;
	time_t end = time(NULL) + seconds;

	for (;;) {
		int n = ibv_poll_cq(l->cq, 1, &wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1) {
			check(wc.status == IBV_WC_SUCCESS, "completion %llu: %s",
			      (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			return wc;
		}
		check(time(NULL) < end, "no completion in %d s", seconds);
	}
}

/* transfer writes a pattern through the loop and checks it landed. */
static __attribute__((unused)) void transfer(struct loop *l, int tag)
{
	memset(l->buf, tag, 4096);
	memset(l->buf + 8192, 0, 4096);
	if (post_write(l, tag, 0, 8192, 4096))
		die("ibv_post_send");
	poll_one(l, 10);
	for (int i = 0; i < 4096; i++)
		check((unsigned char)l->buf[8192 + i] == (unsigned char)tag, "byte %d not written", i);
}
