/*
 * qp.c - queue pairs, their posts, address handles and multicast.
 *
 * ibv_post_send is one call into the engine: it reads the program's work
 * request chain where it lies (struct ibv_send_wr has the layout of struct
 * sn_send_wr) and points *bad_wr at the first one it refuses. So is
 * ibv_post_recv, but for the receives a QP's stage takes without a call
 * (below: stage_recvs).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softnic.h"

/* The create_qp_ex comp_mask bits softnic takes. RSS (RX_HASH) and the
 * create flags are raw-packet features. */
#define SN_QP_INIT_ATTR_SUP                                                    \
	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER | \
	 IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |           \
	 IBV_QP_INIT_ATTR_CREATE_FLAGS)

static void cap_to_engine(const struct ibv_qp_cap *in, struct sn_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

/*
 * The receive stage (struct sn_rstage in softnic_engine.h): a program that
 * reposts a receive for each message it takes (perftest's servers, most
 * RPC loops) would otherwise make a call into Go for each; staged, the
 * engine takes them in bulk when its queue runs dry. A QP whose stage
 * cannot be had (no memory) posts through the engine; so does a receive
 * of more than SN_STAGE_SGE SGEs or than the queue takes (which the
 * engine refuses with EINVAL), and every receive while the engine
 * keeps the stage closed (RESET, ERR), which the engine then refuses or
 * flushes as it does any.
 */
static struct sn_rstage *new_stage(sn_handle h, uint32_t cap, uint32_t max_sge)
{
	struct sn_rstage *st = calloc(1, sizeof(*st) + (size_t)cap * sizeof(st->ent[0]));

	if (!st)
		return NULL;
	st->cap = cap;
	st->max_sge = max_sge;
	if (sn_e->qp_stage(h, st)) {
		free(st);
		return NULL;
	}
	return st;
}

static inline void sn_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void stage_lock(struct sn_rstage *st)
{
	while (__atomic_exchange_n(&st->lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&st->lock, __ATOMIC_RELAXED))
			sn_cpu_relax();
}

static void stage_unlock(struct sn_rstage *st)
{
	__atomic_store_n(&st->lock, 0, __ATOMIC_RELEASE);
}

/* stage_recvs stages what it can of the chain wr and returns the first WR
 * it left for the engine (NULL: all staged), or sets *err to ENOMEM and
 * *bad to the WR a full queue refuses. */
static struct ibv_recv_wr *stage_recvs(struct sn_rstage *st, struct ibv_recv_wr *wr,
				       struct ibv_recv_wr **bad, int *err)
{
	stage_lock(st);
	for (; wr; wr = wr->next) {
		struct sn_stage_ent *e;
		uint64_t posted = __atomic_load_n(&st->posted, __ATOMIC_RELAXED);

		if (!st->open || wr->num_sge < 0 || wr->num_sge > SN_STAGE_SGE ||
		    (uint32_t)wr->num_sge > st->max_sge)
			break;
		if (posted - __atomic_load_n(&st->removed, __ATOMIC_ACQUIRE) >= st->cap) {
			*bad = wr;
			*err = ENOMEM;
			break;
		}
		e = &st->ent[st->tail % st->cap];
		e->wr_id = wr->wr_id;
		e->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(e->sge, wr->sg_list, sizeof(e->sge[0]) * (size_t)wr->num_sge);
		st->tail++;
		__atomic_store_n(&st->posted, posted + 1, __ATOMIC_RELAXED);
	}
	stage_unlock(st);
	return wr;
}

struct ibv_qp *sn_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	struct sn_qp_init in = { 0 };
	struct sn_qp_cap cap;
	struct sn_qp *qp;
	struct ibv_qp *q;
	int err;

	if (attr->comp_mask & ~(uint32_t)SN_QP_INIT_ATTR_SUP) {
		sn_debug("create_qp_ex: comp_mask %#x (RSS is not supported)", attr->comp_mask);
		errno = EOPNOTSUPP;
		return NULL;
	}
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		break;
	default:
		/* Raw packet and driver QPs: EOPNOTSUPP, as rxe answers for
		 * the QP types it has not (rxe_qp.c rxe_qp_chk_init). */
		sn_debug("create_qp: QP type %d is not supported", attr->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) {
		sn_debug("create_qp_ex: create_flags %#x", attr->create_flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	in.cookie = (uintptr_t)qp;
	in.qp_type = attr->qp_type;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_PD)
		in.pd = attr->pd->handle;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_XRCD)
		in.xrcd = ((struct sn_xrcd *)attr->xrcd)->h;
	if (attr->send_cq)
		in.send_cq = attr->send_cq->handle;
	if (attr->recv_cq)
		in.recv_cq = attr->recv_cq->handle;
	if (attr->srq)
		in.srq = attr->srq->handle;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) {
		struct sn_ind_table *t = (struct sn_ind_table *)attr->rwq_ind_tbl;

		in.wq = t->wq->handle;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER)
		in.max_tso_header = attr->max_tso_header;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		in.send_ops_flags = attr->send_ops_flags;
	in.sq_sig_all = attr->sq_sig_all;
	cap_to_engine(&attr->cap, &in.cap);
	err = sn_e->create_qp(to_sctx(ctx)->h, &in, &qp->qpx.qp_base.handle, &qp->qpx.qp_base.qp_num, &cap);
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	sn_cap_to_ibv(&cap, &attr->cap);
	q = &qp->qpx.qp_base;
	q->context = ctx;
	q->qp_context = attr->qp_context;
	q->pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL;
	q->send_cq = attr->send_cq;
	q->recv_cq = attr->recv_cq;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE)
		q->recv_cq = ((struct sn_ind_table *)attr->rwq_ind_tbl)->wq->cq;
	q->srq = attr->srq;
	q->qp_type = attr->qp_type;
	q->state = IBV_QPS_RESET;
	q->events_completed = 0;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	if (!attr->srq && !(attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE) && cap.max_recv_wr > 0 &&
	    (attr->qp_type == IBV_QPT_RC || attr->qp_type == IBV_QPT_UC || attr->qp_type == IBV_QPT_UD))
		qp->stage = new_stage(q->handle, cap.max_recv_wr, cap.max_recv_sge);
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && attr->send_ops_flags) {
		qp->ex = true;
		sn_qp_ex_init(qp);
	}
	return q;
}

struct ibv_qp *sn_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex x;
	struct ibv_qp *qp;

	memset(&x, 0, sizeof(x));
	memcpy(&x, attr, sizeof(*attr));
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = pd;
	qp = sn_create_qp_ex(pd->context, &x);
	if (qp)
		attr->cap = x.cap;
	return qp;
}

struct ibv_qp *sn_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *attr)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	struct sn_qp *qp;
	struct ibv_qp *q;
	int err;

	if ((attr->comp_mask & need) != need || attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->open_qp(((struct sn_xrcd *)attr->xrcd)->h, attr->qp_num, (uintptr_t)qp,
			    &qp->qpx.qp_base.handle);
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	q = &qp->qpx.qp_base;
	q->context = ctx;
	q->qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	q->qp_type = attr->qp_type;
	q->qp_num = attr->qp_num;
	q->state = IBV_QPS_UNKNOWN;
	pthread_mutex_init(&q->mutex, NULL);
	pthread_cond_init(&q->cond, NULL);
	return q;
}

int sn_modify_qp(struct ibv_qp *q, struct ibv_qp_attr *attr, int mask)
{
	struct sn_qp *qp = (struct sn_qp *)q;
	struct sn_qp_attr a = {
		.qp_state = attr->qp_state,
		.cur_qp_state = attr->cur_qp_state,
		.path_mtu = attr->path_mtu,
		.path_mig_state = attr->path_mig_state,
		.qkey = attr->qkey,
		.rq_psn = attr->rq_psn,
		.sq_psn = attr->sq_psn,
		.dest_qp_num = attr->dest_qp_num,
		.qp_access_flags = attr->qp_access_flags,
		.rate_limit = attr->rate_limit,
		.pkey_index = attr->pkey_index,
		.alt_pkey_index = attr->alt_pkey_index,
		.en_sqd_async_notify = attr->en_sqd_async_notify,
		.max_rd_atomic = attr->max_rd_atomic,
		.max_dest_rd_atomic = attr->max_dest_rd_atomic,
		.min_rnr_timer = attr->min_rnr_timer,
		.port_num = attr->port_num,
		.timeout = attr->timeout,
		.retry_cnt = attr->retry_cnt,
		.rnr_retry = attr->rnr_retry,
		.alt_port_num = attr->alt_port_num,
		.alt_timeout = attr->alt_timeout,
	};
	int err;

	cap_to_engine(&attr->cap, &a.cap);
	if ((mask & IBV_QP_AV) && (err = sn_ah_to_engine(q->context, &attr->ah_attr, &a.ah_attr)))
		return err;
	if ((mask & IBV_QP_ALT_PATH) &&
	    (err = sn_ah_to_engine(q->context, &attr->alt_ah_attr, &a.alt_ah_attr)))
		return err;
	err = sn_e->modify_qp(q->handle, &a, mask);
	if (err)
		return err;
	if (mask & IBV_QP_AV) {
		qp->av = attr->ah_attr;
		qp->have_av = true;
	}
	if (mask & IBV_QP_ALT_PATH) {
		qp->alt_av = attr->alt_ah_attr;
		qp->have_alt_av = true;
	}
	return 0;
}

int sn_query_qp(struct ibv_qp *q, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init)
{
	struct sn_qp *qp = (struct sn_qp *)q;
	struct sn_qp_attr a;
	struct sn_qp_init in;
	int err = sn_e->query_qp(q->handle, &a, &in);

	(void)mask;
	if (err)
		return err;
	sn_qp_attr_to_ibv(&a, attr);
	/* The address vectors as the program gave them, when it did. */
	if (qp->have_av)
		attr->ah_attr = qp->av;
	if (qp->have_alt_av)
		attr->alt_ah_attr = qp->alt_av;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = q->qp_context;
		init->send_cq = q->send_cq;
		init->recv_cq = q->recv_cq;
		init->srq = q->srq;
		init->qp_type = q->qp_type;
		init->sq_sig_all = in.sq_sig_all;
		sn_cap_to_ibv(&in.cap, &init->cap);
	}
	return 0;
}

int sn_destroy_qp(struct ibv_qp *q)
{
	struct sn_qp *qp = (struct sn_qp *)q;
	int err;

	sn_wait_events(&q->mutex, &q->cond, &q->events_completed, &qp->events_reported);
	err = sn_e->destroy_qp(q->handle);
	if (err)
		return err;
	sn_qp_ex_free(qp);
	free(qp->stage);
	free(qp);
	return 0;
}

int sn_post_send(struct ibv_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sn_qp *qp = (struct sn_qp *)q;
	int err;

	if (!qp->ex)
		return sn_e->post_send(q->handle, (struct sn_send_wr *)wr, (struct sn_send_wr **)bad);
	/* An extended QP's batch holds its send queue (qpex.c). */
	if (sn_post_held(qp)) {
		*bad = wr;
		return EBUSY;
	}
	pthread_mutex_lock(&qp->post_mu);
	err = sn_e->post_send(q->handle, (struct sn_send_wr *)wr, (struct sn_send_wr **)bad);
	pthread_mutex_unlock(&qp->post_mu);
	return err;
}

int sn_post_recv(struct ibv_qp *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sn_rstage *st = ((struct sn_qp *)q)->stage;
	int err = 0;

	if (st) {
		wr = stage_recvs(st, wr, bad, &err);
		if (!wr || err)
			return err;
	}
	return sn_e->post_recv(q->handle, (struct sn_recv_wr *)wr, (struct sn_recv_wr **)bad);
}

int sn_attach_mcast(struct ibv_qp *q, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return sn_e->attach_mcast(q->handle, (uint8_t *)gid->raw);
}

int sn_detach_mcast(struct ibv_qp *q, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return sn_e->detach_mcast(q->handle, (uint8_t *)gid->raw);
}

struct ibv_ah *sn_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sn_ah_attr a;
	struct sn_ah *ah;
	int err = sn_ah_to_engine(pd->context, attr, &a);

	if (err) {
		errno = err;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->create_ah(pd->handle, &a, &ah->ah.handle);
	if (err) {
		free(ah);
		errno = err;
		return NULL;
	}
	return &ah->ah;
}

int sn_destroy_ah(struct ibv_ah *ah)
{
	int err = sn_e->destroy_ah(ah->handle);

	if (err)
		return err;
	free(ah);
	return 0;
}
