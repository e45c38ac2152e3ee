/*
 * cq.c - completion queues, plain and extended.
 *
 * ibv_poll_cq is one call into the engine, which writes the completions
 * into the program's array (struct ibv_wc, the layout of struct sn_wc).
 * An extended CQ's start_poll and next_poll take one completion each
 * into the CQ, which the read_* functions read; end_poll has nothing
 * left to do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "softnic.h"

/* The ibv_cq_init_attr_ex comp_mask bits softnic takes. */
#define SN_CQ_INIT_ATTR_SUP (IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)

/* new_cq asks the engine for a CQ; in.cookie is filled in here. */
static struct sn_cq *new_cq(struct ibv_context *ctx, struct sn_cq_init *in)
{
	struct sn_cq *cq = calloc(1, sizeof(*cq));
	int32_t cap;
	int err;

	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	in->cookie = (uintptr_t)cq;
	err = sn_e->create_cq(to_sctx(ctx)->h, in, &cq->cq.handle, &cap);
	if (err) {
		free(cq);
		errno = err;
		return NULL;
	}
	cq->cq.cqe = cap;
	cq->link_fd = to_sctx(ctx)->link_fd;
	return cq;
}

static sn_handle channel_handle(struct ibv_comp_channel *channel)
{
	return channel ? ((struct sn_channel *)channel)->h : 0;
}

struct ibv_cq *sn_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *channel,
			    int comp_vector)
{
	struct sn_cq *cq;

	if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = new_cq(ctx, &(struct sn_cq_init){ .cqe = cqe, .channel = channel_handle(channel) });
	return cq ? (struct ibv_cq *)cq : NULL;
}

/*
 * A program that waits for a completion spins on ibv_poll_cq, and every
 * poll of an empty CQ reads the link (a recvmmsg; verbs.CQ.Poll). With
 * SOFTNIC_POLL_WAIT=1, once a CQ has polled empty for SPIN_NS, each
 * empty poll first waits, up to WAIT_NS, for the link's socket to turn
 * readable (poll(2); the thread holds no Go processor meanwhile), as
 * softnic's Go tools spin 50 µs and then block (toolnic.DefaultSpin):
 * the CPU goes to the peer and the rest of the machine. A poll still
 * returns 0 when nothing came: ibv_poll_cq never blocks beyond WAIT_NS,
 * which also bounds the one wake-up this can miss (a completion the
 * receive goroutine delivers between the poll and the wait). It is not
 * the default: on a quiet machine it cost ib_send_bw a fifth of its
 * message rate, and on a loaded one ib_write_lat its typical latency
 * (docs/performance.md, "softnic's libibverbs"). Without it (link_fd -1)
 * polls spin.
 */
#define SPIN_NS 50000
#define WAIT_NS 50000

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* polled notes a poll's count: n completions (negative: an error). */
static void polled(struct sn_cq *cq, int n)
{
	struct pollfd p = { .fd = cq->link_fd, .events = POLLIN };
	struct timespec wait = { .tv_nsec = WAIT_NS };
	uint64_t since, now;

	/* Relaxed atomics: threads may poll one CQ, and a stale idle_since
	 * only moves a wait by a poll or two. */
	since = __atomic_load_n(&cq->idle_since, __ATOMIC_RELAXED);
	if (n != 0) {
		if (since)
			__atomic_store_n(&cq->idle_since, 0, __ATOMIC_RELAXED);
		return;
	}
	if (cq->link_fd < 0)
		return;
	now = mono_ns();
	if (!since) {
		__atomic_store_n(&cq->idle_since, now, __ATOMIC_RELAXED);
		return;
	}
	if (now - since >= SPIN_NS)
		ppoll(&p, 1, &wait, NULL);
}

static inline struct sn_cq *to_scq(struct ibv_cq_ex *c)
{
	return (struct sn_cq *)c;
}

static int take(struct sn_cq *cq)
{
	int n = sn_e->poll_cq(cq->cq.handle, 1, &cq->cur, sizeof(cq->cur));

	polled(cq, n);
	if (n <= 0)
		return ENOENT;
	cq->cq.status = cq->cur.wc.status;
	cq->cq.wr_id = cq->cur.wc.wr_id;
	return 0;
}

static int cq_start_poll(struct ibv_cq_ex *c, struct ibv_poll_cq_attr *attr)
{
	if (attr->comp_mask)
		return EINVAL;
	return take(to_scq(c));
}

static int cq_next_poll(struct ibv_cq_ex *c)
{
	return take(to_scq(c));
}

static void cq_end_poll(struct ibv_cq_ex *c)
{
}

static enum ibv_wc_opcode cq_read_opcode(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.opcode;
}

static uint32_t cq_read_vendor_err(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.vendor_err;
}

static uint32_t cq_read_byte_len(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.byte_len;
}

static __be32 cq_read_imm_data(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.imm;
}

static uint32_t cq_read_qp_num(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.qp_num;
}

static uint32_t cq_read_src_qp(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.src_qp;
}

static unsigned int cq_read_wc_flags(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.wc_flags;
}

static uint32_t cq_read_slid(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.slid;
}

static uint8_t cq_read_sl(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.sl;
}

static uint8_t cq_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.wc.dlid_path_bits;
}

static void cq_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm)
{
	tm->tag = to_scq(c)->cur.tm_tag;
	tm->priv = to_scq(c)->cur.tm_priv;
}

/* Both timestamps are ns of the device's clock: hca_core_clock is 1 GHz,
 * and the clock is the wall clock (ibv_query_rt_values_ex reads it). */
static uint64_t cq_read_completion_ts(struct ibv_cq_ex *c)
{
	return to_scq(c)->cur.ts;
}

struct ibv_cq_ex *sn_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct sn_cq *cq;
	struct ibv_cq_ex *x;

	struct sn_cq_init in = {
		.cqe = attr->cqe,
		.channel = channel_handle(attr->channel),
		.comp_vector = attr->comp_vector,
		/* The engine refuses the wc_flags and flags it has not
		 * (cvlan, flow tags, IGNORE_OVERRUN: EOPNOTSUPP). */
		.wc_flags = attr->wc_flags,
	};

	if (attr->comp_mask & ~(uint32_t)SN_CQ_INIT_ATTR_SUP) {
		sn_debug("create_cq_ex: comp_mask %#x", attr->comp_mask);
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS)
		in.flags = attr->flags;
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain)
		in.parent_domain = attr->parent_domain->handle;
	/* The engine tells a CQ made here from ibv_create_cq's by its
	 * wc_flags; a CQ without any is read as a plain one. */
	cq = new_cq(ctx, &in);
	if (!cq)
		return NULL;
	sn_init_cq((struct ibv_cq *)cq, ctx, attr->channel, attr->cq_context);
	cq->wc_flags = attr->wc_flags;
	x = &cq->cq;
	x->start_poll = cq_start_poll;
	x->next_poll = cq_next_poll;
	x->end_poll = cq_end_poll;
	x->read_opcode = cq_read_opcode;
	x->read_vendor_err = cq_read_vendor_err;
	x->read_wc_flags = cq_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		x->read_byte_len = cq_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		x->read_imm_data = cq_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		x->read_qp_num = cq_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		x->read_src_qp = cq_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		x->read_slid = cq_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		x->read_sl = cq_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		x->read_dlid_path_bits = cq_read_dlid_path_bits;
	if (attr->wc_flags & IBV_WC_EX_WITH_TM_INFO)
		x->read_tm_info = cq_read_tm_info;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		x->read_completion_ts = cq_read_completion_ts;
	if (attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		x->read_completion_wallclock_ns = cq_read_completion_ts;
	return x;
}

int sn_destroy_cq(struct ibv_cq *c)
{
	struct sn_cq *cq = (struct sn_cq *)c;
	int err;

	/* Every event given to the program must be acknowledged first. */
	sn_wait_events(&c->mutex, &c->cond, &c->comp_events_completed, &cq->comp_events_reported);
	sn_wait_events(&c->mutex, &c->cond, &c->async_events_completed, &cq->async_events_reported);
	err = sn_e->destroy_cq(c->handle);
	if (err)
		return err;
	free(cq);
	return 0;
}

int sn_resize_cq(struct ibv_cq *c, int cqe)
{
	int32_t cap;
	int err = sn_e->resize_cq(c->handle, cqe, &cap);

	if (err)
		return err;
	c->cqe = cap;
	return 0;
}

int sn_poll_cq(struct ibv_cq *c, int n, struct ibv_wc *wc)
{
	int k = sn_e->poll_cq(c->handle, n, wc, sizeof(*wc));

	if (n > 0)
		polled((struct sn_cq *)c, k);
	return k;
}

int sn_req_notify_cq(struct ibv_cq *c, int solicited_only)
{
	return sn_e->req_notify_cq(c->handle, solicited_only);
}

int sn_modify_cq(struct ibv_cq *c, struct ibv_modify_cq_attr *attr)
{
	return sn_e->modify_cq(c->handle, attr->attr_mask, attr->moderate.cq_count,
			       attr->moderate.cq_period);
}
