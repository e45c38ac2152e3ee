/*
 * calls.c - the calls of libibverbs softnic's library passes to verbs
 * beyond the data path, each checked for what it does and for the errno
 * libibverbs gives when it refuses: CQ moderation, extended CQs with
 * completion timestamps and the device clock, thread and parent domains,
 * re-registration and advice of MRs, the P_Key table, the GID table's
 * network interface, and an extended QP's batch, which holds the send
 * queue against other threads' posts.
 */
#include <pthread.h>
#include <sys/time.h>
#include <unistd.h>

#include "loop.h"

static struct loop l;

/* connect resets two QPs and connects them to each other. */
static void connect(struct ibv_qp *a, struct ibv_qp *b)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	union ibv_gid gid;

	if (ibv_query_gid(l.ctx, 1, 1, &gid))
		die("ibv_query_gid");
	if (ibv_modify_qp(a, &r, IBV_QP_STATE) || ibv_modify_qp(b, &r, IBV_QP_STATE))
		die("modify to RESET");
	to_rts(a, b->qp_num, &gid);
	to_rts(b, a->qp_num, &gid);
}

static void caps(void)
{
	struct ibv_device_attr_ex a;

	if (ibv_query_device_ex(l.ctx, NULL, &a))
		die("ibv_query_device_ex");
	check(a.odp_caps.general_caps & IBV_ODP_SUPPORT, "odp_caps.general_caps %#llx",
	      (unsigned long long)a.odp_caps.general_caps);
	check(a.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE, "rc_odp_caps %#x",
	      a.odp_caps.per_transport_caps.rc_odp_caps);
	check(a.xrc_odp_caps & IBV_ODP_SUPPORT_SRQ_RECV, "xrc_odp_caps %#x", a.xrc_odp_caps);
	check(a.hca_core_clock == 1000000, "hca_core_clock %llu kHz", (unsigned long long)a.hca_core_clock);
	check(a.cq_mod_caps.max_cq_count > 0 && a.cq_mod_caps.max_cq_period > 0, "cq_mod_caps %u %u",
	      a.cq_mod_caps.max_cq_count, a.cq_mod_caps.max_cq_period);
	printf("caps: odp %#llx rc %#x, clock %llu kHz, cq_mod %u/%u us\n",
	       (unsigned long long)a.odp_caps.general_caps, a.odp_caps.per_transport_caps.rc_odp_caps,
	       (unsigned long long)a.hca_core_clock, a.cq_mod_caps.max_cq_count, a.cq_mod_caps.max_cq_period);
}

static void modify_cq(void)
{
	struct ibv_modify_cq_attr m = { .attr_mask = IBV_CQ_ATTR_MODERATE, .moderate = { 4, 100 } };
	int err;

	if ((err = ibv_modify_cq(l.cq, &m)))
		errno = err, die("ibv_modify_cq");
	m.moderate.cq_period = 0xffff;
	check(ibv_modify_cq(l.cq, &m) == EINVAL, "ibv_modify_cq beyond cq_mod_caps: not EINVAL");
	m.attr_mask = 1 << 7;
	check(ibv_modify_cq(l.cq, &m) == EINVAL, "ibv_modify_cq with an unknown attr_mask bit: not EINVAL");
	m.attr_mask = IBV_CQ_ATTR_MODERATE;
	m.moderate.cq_count = 0;
	m.moderate.cq_period = 0;
	if ((err = ibv_modify_cq(l.cq, &m)))
		errno = err, die("ibv_modify_cq back");
	printf("modify_cq: ok\n");
}

/* timestamps writes through a QP whose send CQ is extended with both
 * completion clocks: each completion's stamps are the device's clock,
 * which is the wall clock in ns (ibv_query_rt_values_ex reads it). */
static void timestamps(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK,
	};
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	struct ibv_poll_cq_attr pa = { 0 };
	struct timeval tv;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	uint64_t before, ts, wall, now;
	int err;

	cq = ibv_create_cq_ex(l.ctx, &ca);
	if (!cq)
		die("ibv_create_cq_ex with timestamps");
	ca.wc_flags = IBV_WC_EX_WITH_CVLAN;
	check(!ibv_create_cq_ex(l.ctx, &ca) && errno == EOPNOTSUPP, "cvlan CQ: not EOPNOTSUPP");
	ca.wc_flags = 0;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	check(!ibv_create_cq_ex(l.ctx, &ca) && errno == EOPNOTSUPP, "IGNORE_OVERRUN: not EOPNOTSUPP");
	ca.comp_mask = 1 << 5;
	check(!ibv_create_cq_ex(l.ctx, &ca) && errno == EINVAL, "unknown comp_mask: not EINVAL");

	if ((err = ibv_query_rt_values_ex(l.ctx, &v)))
		errno = err, die("ibv_query_rt_values_ex");
	check(v.comp_mask == IBV_VALUES_MASK_RAW_CLOCK && v.raw_clock.tv_sec == 0, "raw_clock");
	before = v.raw_clock.tv_nsec;
	gettimeofday(&tv, NULL);
	now = (uint64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000;
	check(before > now - 10000000000ull && before < now + 10000000000ull,
	      "the device clock (%llu ns) is not the wall clock (%llu ns)", (unsigned long long)before,
	      (unsigned long long)now);

	qp = l.qp[0];
	l.qp[0] = NULL;
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = ibv_cq_ex_to_cq(cq), .recv_cq = l.cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		};

		l.qp[0] = ibv_create_qp(l.pd, &ia);
		if (!l.qp[0])
			die("ibv_create_qp");
		connect(l.qp[0], l.qp[1]);
	}
	if (post_write(&l, 42, 0, 4096, 64))
		die("ibv_post_send");
	for (time_t end = time(NULL) + 10; (err = ibv_start_poll(cq, &pa)) == ENOENT;)
		check(time(NULL) < end, "no completion");
	check(!err, "ibv_start_poll: %d", err);
	check(cq->status == IBV_WC_SUCCESS && cq->wr_id == 42, "completion %llu: %s",
	      (unsigned long long)cq->wr_id, ibv_wc_status_str(cq->status));
	ts = ibv_wc_read_completion_ts(cq);
	wall = ibv_wc_read_completion_wallclock_ns(cq);
	ibv_end_poll(cq);
	if ((err = ibv_query_rt_values_ex(l.ctx, &v)))
		errno = err, die("ibv_query_rt_values_ex");
	check(ts == wall && ts >= before && ts <= (uint64_t)v.raw_clock.tv_nsec,
	      "completion stamped %llu (wall %llu), not between %llu and %llu", (unsigned long long)ts,
	      (unsigned long long)wall, (unsigned long long)before, (unsigned long long)v.raw_clock.tv_nsec);
	if (ibv_destroy_qp(l.qp[0]) || ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		die("destroy");
	l.qp[0] = qp;
	connect(l.qp[0], l.qp[1]);
	printf("timestamps: ok (a WRITE completed %llu ns after the first clock read)\n",
	       (unsigned long long)(ts - before));
}

/* domains creates a QP through a parent domain holding a thread domain
 * and an extended CQ in it: the domain's MRs and the PD's work together,
 * and the domains are held while used. */
static void domains(void)
{
	struct ibv_td_init_attr ta = { 0 };
	struct ibv_parent_domain_init_attr pa = { .pd = l.pd, .comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
						  .pd_context = &l };
	struct ibv_cq_init_attr_ex ca = { .cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_PD };
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RC, .comp_mask = IBV_QP_INIT_ATTR_PD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_td *td;
	struct ibv_pd *par;
	struct ibv_cq_ex *cq;
	struct ibv_qp *qp;
	int err;

	td = ibv_alloc_td(l.ctx, &ta);
	if (!td)
		die("ibv_alloc_td");
	pa.td = td;
	par = ibv_alloc_parent_domain(l.ctx, &pa);
	if (!par)
		die("ibv_alloc_parent_domain");
	check(par->context == l.ctx, "the parent domain's context");
	check(ibv_dealloc_td(td) == EBUSY, "ibv_dealloc_td of a TD a parent domain holds: not EBUSY");
	ca.parent_domain = par;
	cq = ibv_create_cq_ex(l.ctx, &ca);
	if (!cq)
		die("ibv_create_cq_ex in a parent domain");
	qa.pd = par;
	qa.send_cq = qa.recv_cq = ibv_cq_ex_to_cq(cq);
	qp = ibv_create_qp_ex(l.ctx, &qa);
	if (!qp)
		die("ibv_create_qp_ex in a parent domain");
	check(ibv_dealloc_pd(par) == EBUSY, "ibv_dealloc_pd of a parent domain in use: not EBUSY");
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(ibv_cq_ex_to_cq(cq)))
		die("destroy");
	if ((err = ibv_dealloc_pd(par)))
		errno = err, die("ibv_dealloc_pd of the parent domain");
	if ((err = ibv_dealloc_td(td)))
		errno = err, die("ibv_dealloc_td");
	printf("domains: ok\n");
}

/* mrs re-registers an MR (access, then memory) and advises on ranges. */
static void mrs(void)
{
	char *buf = aligned_alloc(4096, 8192), *buf2 = aligned_alloc(4096, 8192);
	struct ibv_mr *mr = ibv_reg_mr(l.pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	struct ibv_sge sge = { (uintptr_t)buf, 4096, 0 };
	uint32_t lkey;
	int err;

	if (!mr)
		die("ibv_reg_mr ON_DEMAND");
	lkey = sge.lkey = mr->lkey;
	if ((err = ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1)))
		errno = err, die("ibv_advise_mr");
	sge.length = 16384;
	check(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EFAULT,
	      "ibv_advise_mr beyond the MR: not EFAULT");
	sge.lkey = l.mr->lkey; /* not on-demand */
	sge.addr = (uintptr_t)l.buf;
	sge.length = 64;
	check(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1) == EFAULT,
	      "ibv_advise_mr of an MR without ON_DEMAND: not EFAULT");

	check(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) == 0,
	      "ibv_rereg_mr CHANGE_ACCESS: errno %d", errno);
	check(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
			      IBV_REREG_MR_ERR_CMD && errno == EINVAL,
	      "ibv_rereg_mr REMOTE_WRITE without LOCAL_WRITE: not IBV_REREG_MR_ERR_CMD with EINVAL");
	check(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf2, 8192, 0) == 0,
	      "ibv_rereg_mr CHANGE_TRANSLATION: errno %d", errno);
	check(mr->addr == buf2 && mr->length == 8192 && mr->lkey == lkey, "the MR after rereg");
	check(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_CMD &&
		      errno == EINVAL,
	      "ibv_rereg_mr to no PD: not IBV_REREG_MR_ERR_CMD with EINVAL");
	if (ibv_dereg_mr(mr))
		die("ibv_dereg_mr");
	free(buf);
	free(buf2);
	printf("mrs: ok\n");
}

static void tables(void)
{
	struct ibv_gid_entry e;
	__be16 pkey;
	int err;

	check(ibv_query_pkey(l.ctx, 1, 0, &pkey) == 0 && pkey == htobe16(0xffff), "P_Key 0");
	check(ibv_query_pkey(l.ctx, 1, 1, &pkey) == -1 && errno == ENOENT, "P_Key 1: not -1 with ENOENT");
	check(ibv_get_pkey_index(l.ctx, 1, htobe16(0xffff)) == 0, "the default P_Key's index");
	check(ibv_get_pkey_index(l.ctx, 1, htobe16(0x8001)) == -1, "an absent P_Key's index");
	if ((err = ibv_query_gid_ex(l.ctx, 1, 1, &e, 0)))
		errno = err, die("ibv_query_gid_ex");
	check(e.gid_type == IBV_GID_TYPE_ROCE_V2, "GID 1's type");
	printf("tables: ok (GID 1 on interface %u)\n", e.ndev_ifindex);
}

/* ---- An extended QP's batch against another thread's post ---- */

static struct ibv_qp_ex *qpx;
static volatile int posted; /* set by the other thread once its post returned */

static void *other(void *arg)
{
	struct ibv_sge sge = { (uintptr_t)l.buf, 8, l.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)l.buf + 64, .rkey = l.mr->rkey },
	}, *bad;

	if (ibv_post_send(&qpx->qp_base, &wr, &bad))
		die("ibv_post_send beside a batch");
	__atomic_store_n(&posted, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void batch(void)
{
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_RC, .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = l.pd, .send_cq = l.cq, .recv_cq = l.cq, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_sge sge = { (uintptr_t)l.buf, 8, l.mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 3, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.wr.rdma = { .remote_addr = (uintptr_t)l.buf + 128, .rkey = l.mr->rkey },
	}, *bad = NULL;
	struct ibv_qp *q;
	pthread_t t;
	struct ibv_wc wc[2];
	int n = 0;

	q = ibv_create_qp_ex(l.ctx, &qa);
	if (!q)
		die("ibv_create_qp_ex");
	qpx = ibv_qp_to_qp_ex(q);
	connect(q, l.qp[1]);

	ibv_wr_start(qpx);
	check(ibv_post_send(q, &wr, &bad) == EBUSY && bad == &wr,
	      "ibv_post_send inside the thread's own batch: not EBUSY");
	if (pthread_create(&t, NULL, other, NULL))
		die("pthread_create");
	usleep(50000);
	check(!__atomic_load_n(&posted, __ATOMIC_ACQUIRE), "another thread posted inside the batch");
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, l.mr->rkey, (uintptr_t)l.buf + 192);
	ibv_wr_set_sge(qpx, l.mr->lkey, (uintptr_t)l.buf, 8);
	if (ibv_wr_complete(qpx))
		die("ibv_wr_complete");
	pthread_join(t, NULL);
	for (time_t end = time(NULL) + 10; n < 2;) {
		int k = ibv_poll_cq(l.cq, 2 - n, wc + n);

		check(k >= 0, "ibv_poll_cq");
		n += k;
		check(time(NULL) < end, "no completion");
	}
	/* The batch's WR first: the other thread's post waited for it. */
	check(wc[0].wr_id == 1 && wc[1].wr_id == 2 && wc[0].status == IBV_WC_SUCCESS &&
		      wc[1].status == IBV_WC_SUCCESS,
	      "completions %llu, %llu, want 1, 2", (unsigned long long)wc[0].wr_id, (unsigned long long)wc[1].wr_id);
	ibv_wr_start(qpx);
	ibv_wr_abort(qpx);
	check(ibv_wr_complete(qpx) == EINVAL, "ibv_wr_complete without ibv_wr_start: not EINVAL");
	if (ibv_destroy_qp(q))
		die("ibv_destroy_qp");
	connect(l.qp[0], l.qp[1]);
	printf("batch: ok (another thread's post waited for it)\n");
}

int main(void)
{
	loop_open(&l, 64, 64);
	caps();
	modify_cq();
	timestamps();
	domains();
	mrs();
	tables();
	batch();
	transfer(&l, 7);
	loop_close(&l);
	return 0;
}
