/*
 * verbs.c - the exported calls of libibverbs that go to the device: each
 * fills in what libibverbs itself fills in (the object's context, PD,
 * user context, mutex and condition) and calls the device's operation in
 * sn_ops, as rdma-core's libibverbs/verbs.c calls its provider's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "softnic.h"

SN_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = sn_ops.alloc_pd(ctx);

	if (pd)
		pd->context = ctx;
	return pd;
}

SN_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return sn_ops.dealloc_pd(pd);
}

SN_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	struct ibv_mr *mr;

	/* The optional access bits are hints a device may ignore. */
	access &= ~IBV_ACCESS_OPTIONAL_RANGE;
	mr = sn_ops.reg_mr(pd, addr, length, iova, access);
	if (mr) {
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = addr;
		mr->length = length;
	}
	return mr;
}

#undef ibv_reg_mr
SN_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access);
}

#undef ibv_reg_mr_iova
SN_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, access);
}

SN_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	struct ibv_mr *mr = sn_ops.reg_dmabuf_mr(pd, offset, length, iova, fd, access);

	if (mr) {
		mr->context = pd->context;
		mr->pd = pd;
		mr->addr = (void *)(uintptr_t)offset;
		mr->length = length;
	}
	return mr;
}

SN_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!length || !addr)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (sn_ops.rereg_mr(mr, flags, pd, addr, length, access))
		return IBV_REREG_MR_ERR_CMD;
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
	}
	return 0;
}

SN_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	return sn_ops.dereg_mr(mr);
}

/* ---- Completion channels and CQs ---- */

/*
 * A completion channel's fd is an eventfd in semaphore mode: the engine
 * adds one per event it queues, ibv_get_cq_event reads one (blocking, or
 * EAGAIN when the program made the fd non-blocking) and takes the event,
 * so poll(2) on the fd works as on the kernel's.
 */
SN_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct sn_channel *ch = calloc(1, sizeof(*ch));
	int err;

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	err = sn_e->create_channel(to_sctx(ctx)->h, ch->ch.fd, &ch->h);
	if (err) {
		close(ch->ch.fd);
		free(ch);
		errno = err;
		return NULL;
	}
	return &ch->ch;
}

SN_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sn_channel *ch = (struct sn_channel *)channel;
	struct ibv_context *ctx = channel->context;
	int err;

	pthread_mutex_lock(&ctx->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&ctx->mutex);
		return EBUSY;
	}
	err = sn_e->destroy_channel(ch->h);
	pthread_mutex_unlock(&ctx->mutex);
	if (err)
		return err;
	close(channel->fd);
	free(ch);
	return 0;
}

/* init_cq is libibverbs' verbs_init_cq. */
static void init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
		    void *cq_context)
{
	cq->context = ctx;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		++channel->refcnt;
		pthread_mutex_unlock(&ctx->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

SN_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq *cq = sn_ops.create_cq(ctx, cqe, channel, comp_vector);

	if (cq)
		init_cq(cq, ctx, channel, cq_context);
	return cq;
}

/* sn_create_cq_ex initialises its CQ itself: the inline ibv_create_cq_ex
 * calls the operation directly. */
void sn_init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
		void *cq_context)
{
	init_cq(cq, ctx, channel, cq_context);
}

SN_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return sn_ops.resize_cq(cq, cqe);
}

SN_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct ibv_comp_channel *channel = cq->channel;
	int ret = sn_ops.destroy_cq(cq);

	if (channel && !ret) {
		pthread_mutex_lock(&channel->context->mutex);
		--channel->refcnt;
		pthread_mutex_unlock(&channel->context->mutex);
	}
	return ret;
}

SN_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct sn_channel *ch = (struct sn_channel *)channel;
	struct sn_cq *scq;
	uint64_t cookie, one;
	int err;

	for (;;) {
		if (read(channel->fd, &one, sizeof(one)) != sizeof(one))
			return -1;
		err = sn_e->get_cq_event(ch->h, &cookie);
		if (!err)
			break;
		if (err != EAGAIN) { /* EAGAIN: the event of a CQ destroyed since */
			errno = err;
			return -1;
		}
	}
	scq = (struct sn_cq *)(uintptr_t)cookie;
	pthread_mutex_lock(&scq->cq.mutex);
	scq->comp_events_reported++;
	pthread_mutex_unlock(&scq->cq.mutex);
	*cq = (struct ibv_cq *)scq;
	*cq_context = scq->cq.cq_context;
	return 0;
}

SN_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

/* ---- SRQs ---- */

static void init_srq(struct ibv_srq *srq, struct ibv_pd *pd, void *srq_context)
{
	srq->context = pd->context;
	srq->srq_context = srq_context;
	srq->pd = pd;
	srq->events_completed = 0;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
}

SN_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq = sn_ops.create_srq(pd, attr);

	if (srq)
		init_srq(srq, pd, attr->srq_context);
	return srq;
}

SN_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	return sn_ops.modify_srq(srq, attr, mask);
}

SN_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	return sn_ops.query_srq(srq, attr);
}

SN_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	return sn_ops.destroy_srq(srq);
}

/* ---- QPs ---- */

SN_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return sn_ops.create_qp(pd, attr);
}

SN_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct sn_qp *q = (struct sn_qp *)qp;

	return q->ex ? &q->qpx : NULL;
}

SN_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init)
{
	int ret = sn_ops.query_qp(qp, attr, mask, init);

	if (ret)
		return ret;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

SN_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	return sn_ops.query_qp_data_in_order(qp, op, flags);
}

SN_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret = sn_ops.modify_qp(qp, attr, mask);

	if (ret)
		return ret;
	if (mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	return 0;
}

SN_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	return sn_ops.destroy_qp(qp);
}

SN_EXPORT int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	if (!ece->vendor_id) {
		errno = EOPNOTSUPP;
		return errno;
	}
	return sn_ops.set_ece(qp, ece);
}

SN_EXPORT int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return sn_ops.query_ece(qp, ece);
}

/* ---- AHs ---- */

SN_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah = sn_ops.create_ah(pd, attr);

	if (ah) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

SN_EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	return sn_ops.destroy_ah(ah);
}

/* find_gid returns the index of gid in the GID table (every entry is
 * RoCE v2), or -1 with errno ENOENT. */
static int find_gid(struct ibv_context *ctx, uint8_t port, const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; i < SN_GIDS; i++)
		if (!ibv_query_gid(ctx, port, i, &g) && !memcmp(&g, gid, sizeof(g)))
			return i;
	errno = ENOENT;
	return -1;
}

/*
 * ibv_init_ah_from_wc builds the address vector that answers a UD
 * datagram: softnic's receive buffers start with an IPv6 header, or 20
 * bytes and an IPv4 header (rxe's union rdma_network_hdr), as RoCE v2's.
 */
SN_EXPORT int ibv_init_ah_from_wc(struct ibv_context *ctx, uint8_t port, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	const struct iphdr *ip4 = (const struct iphdr *)((const uint8_t *)grh + 20);
	uint32_t flow = be32toh(grh->version_tclass_flow);
	union ibv_gid sgid;
	int idx;

	memset(ah, 0, sizeof(*ah));
	ah->grh.flow_label = flow & 0xfffff;
	ah->dlid = wc->slid;
	ah->sl = wc->sl;
	ah->src_path_bits = wc->dlid_path_bits;
	ah->port_num = port;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	ah->is_global = 1;
	if (flow >> 28 == 6) {
		if (grh->dgid.raw[0] == 0xff) { /* multicast: no GID of ours */
			errno = EINVAL;
			return -1;
		}
		if (grh->next_hdr != IPPROTO_UDP) {
			errno = EPROTONOSUPPORT;
			return -1;
		}
		if ((idx = find_gid(ctx, port, &grh->dgid)) < 0)
			return -1;
		ah->grh.dgid = grh->sgid;
		ah->grh.sgid_index = idx;
		ah->grh.hop_limit = grh->hop_limit;
		ah->grh.traffic_class = (flow >> 20) & 0xff;
		return 0;
	}
	if (ip4->version != 4) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if ((be32toh(ip4->daddr) >> 28) == 0xe) { /* class D: multicast */
		errno = EINVAL;
		return -1;
	}
	memset(&sgid, 0, sizeof(sgid));
	sgid.raw[10] = sgid.raw[11] = 0xff;
	memcpy(sgid.raw + 12, &ip4->daddr, 4);
	if ((idx = find_gid(ctx, port, &sgid)) < 0)
		return -1;
	memset(&ah->grh.dgid, 0, sizeof(ah->grh.dgid));
	ah->grh.dgid.raw[10] = ah->grh.dgid.raw[11] = 0xff;
	memcpy(ah->grh.dgid.raw + 12, &ip4->saddr, 4);
	ah->grh.sgid_index = idx;
	ah->grh.hop_limit = ip4->ttl;
	ah->grh.traffic_class = ip4->tos;
	return 0;
}

SN_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port)
{
	struct ibv_ah_attr attr;

	if (ibv_init_ah_from_wc(pd->context, port, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

SN_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return sn_ops.attach_mcast(qp, gid, lid);
}

SN_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return sn_ops.detach_mcast(qp, gid, lid);
}

/* ---- Imported objects: softnic's objects live in one process ---- */

SN_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

SN_EXPORT struct ibv_pd *ibv_import_pd(struct ibv_context *ctx, uint32_t handle)
{
	return sn_ops.import_pd(ctx, handle);
}

SN_EXPORT void ibv_unimport_pd(struct ibv_pd *pd)
{
	sn_ops.unimport_pd(pd);
}

SN_EXPORT struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t handle)
{
	return sn_ops.import_mr(pd, handle);
}

SN_EXPORT void ibv_unimport_mr(struct ibv_mr *mr)
{
	sn_ops.unimport_mr(mr);
}

SN_EXPORT struct ibv_dm *ibv_import_dm(struct ibv_context *ctx, uint32_t handle)
{
	return sn_ops.import_dm(ctx, handle);
}

SN_EXPORT void ibv_unimport_dm(struct ibv_dm *dm)
{
	sn_ops.unimport_dm(dm);
}
