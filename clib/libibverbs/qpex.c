/*
 * qpex.c - the extended send interface of struct ibv_qp_ex (ibv_wr_post(3)).
 *
 * ibv_wr_start opens a batch; each builder (wr_send, wr_rdma_write, ...)
 * records a work request with the QP's wr_id and wr_flags as they are,
 * each setter completes the last one, inline data is copied when it is
 * set (the program may reuse its buffer at once); ibv_wr_complete hands
 * the batch to the engine, which posts all of it or none (verbs' QPEx:
 * its builders check each WR as the rxe provider's do, and an error any
 * of them met fails the batch). Builders and setters are plain C: only
 * ibv_wr_complete calls into the engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "softnic.h"

static struct sn_qp *to_sqp(struct ibv_qp_ex *x)
{
	return (struct sn_qp *)x;
}

static void *grow(void *p, int *cap, int need, size_t size, int *err)
{
	int c = *cap ? *cap : 8;
	void *q;

	if (need <= *cap)
		return p;
	while (c < need)
		c *= 2;
	q = realloc(p, (size_t)c * size);
	if (!q) {
		*err = ENOMEM;
		return p;
	}
	*cap = c;
	return q;
}

/* add records a new work request of opcode op, or NULL when none can be. */
static struct sn_send_wr *add(struct ibv_qp_ex *x, enum ibv_wr_opcode op)
{
	struct sn_wr_batch *b = &to_sqp(x)->batch;
	struct sn_send_wr *w;

	b->wr = grow(b->wr, &b->cap, b->n + 1, sizeof(*b->wr), &b->err);
	b->meta = grow(b->meta, &b->capmeta, b->n + 1, sizeof(*b->meta), &b->err);
	if (b->err)
		return NULL;
	w = &b->wr[b->n];
	memset(w, 0, sizeof(*w));
	memset(&b->meta[b->n], 0, sizeof(b->meta[b->n]));
	b->n++;
	w->wr_id = x->wr_id;
	w->opcode = op;
	w->send_flags = x->wr_flags & ~IBV_SEND_INLINE;
	return w;
}

static struct sn_send_wr *last(struct ibv_qp_ex *x)
{
	struct sn_wr_batch *b = &to_sqp(x)->batch;

	return b->n ? &b->wr[b->n - 1] : NULL;
}

/* add_sges stores the last WR's scatter list (or inline data as one
 * element over the batch's copy); pointers are set at complete, when the
 * arrays no longer move. */
static struct sn_sge *add_sges(struct ibv_qp_ex *x, int n, bool inline_)
{
	struct sn_wr_batch *b = &to_sqp(x)->batch;

	if (!b->n)
		return NULL;
	b->sge = grow(b->sge, &b->capsge, b->nsge + n, sizeof(*b->sge), &b->err);
	if (b->err || b->capsge < b->nsge + n)
		return NULL;
	b->meta[b->n - 1].sge = b->nsge;
	b->meta[b->n - 1].nsge = n;
	b->meta[b->n - 1].inline_ = inline_;
	b->nsge += n;
	return &b->sge[b->nsge - n];
}

static void reset(struct sn_wr_batch *b)
{
	b->n = b->nsge = 0;
	b->ndata = 0;
	b->err = 0;
}

/* end releases the send queue a batch held. */
static void end(struct sn_qp *qp)
{
	reset(&qp->batch);
	__atomic_store_n(&qp->owned, false, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&qp->post_mu);
}

/* ibv_wr_start waits while another thread holds a batch of the QP or
 * posts to it; in the batch its own thread holds, it fails that batch
 * (its ibv_wr_complete is EBUSY), as verbs' QPEx.WrStart. */
static void wr_start(struct ibv_qp_ex *x)
{
	struct sn_qp *qp = to_sqp(x);

	if (sn_post_held(qp)) {
		qp->batch.err = EBUSY;
		return;
	}
	pthread_mutex_lock(&qp->post_mu);
	qp->owner = pthread_self();
	__atomic_store_n(&qp->owned, true, __ATOMIC_RELEASE);
	reset(&qp->batch);
}

static int wr_complete(struct ibv_qp_ex *x)
{
	struct sn_qp *qp = to_sqp(x);
	struct sn_wr_batch *b = &qp->batch;
	int err = b->err;

	if (!sn_post_held(qp))
		return EINVAL; /* no ibv_wr_start */
	if (!err) {
		for (int i = 0; i < b->n; i++) {
			struct sn_send_wr *w = &b->wr[i];

			w->num_sge = b->meta[i].nsge;
			w->sg_list = w->num_sge ? &b->sge[b->meta[i].sge] : NULL;
			if (b->meta[i].inline_) {
				w->send_flags |= IBV_SEND_INLINE;
				for (int j = 0; j < w->num_sge; j++)
					w->sg_list[j].addr += (uintptr_t)b->data;
			}
			if (w->opcode == IBV_WR_TSO)
				w->b0 += (uintptr_t)b->data;
		}
		err = sn_e->post_send_all(x->qp_base.handle, b->wr, b->n);
	}
	end(qp);
	return err;
}

static void wr_abort(struct ibv_qp_ex *x)
{
	struct sn_qp *qp = to_sqp(x);

	if (sn_post_held(qp))
		end(qp);
}

static void wr_send(struct ibv_qp_ex *x)
{
	add(x, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct sn_send_wr *w = add(x, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm = imm;
}

static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct sn_send_wr *w = add(x, IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm = rkey;
}

static void wr_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	struct sn_wr_batch *b = &to_sqp(x)->batch;
	struct sn_send_wr *w = add(x, IBV_WR_TSO);
	int cap = (int)b->capdata;

	if (!w)
		return;
	/* The header is copied now, into the data array; its offset becomes
	 * an address at complete. */
	b->data = grow(b->data, &cap, (int)(b->ndata + hdr_sz), 1, &b->err);
	if (b->err)
		return;
	b->capdata = cap;
	memcpy(b->data + b->ndata, hdr, hdr_sz);
	w->b0 = b->ndata;
	w->b1 = hdr_sz | (uint64_t)mss << 16;
	b->ndata += hdr_sz;
}

static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	struct sn_send_wr *w = add(x, IBV_WR_RDMA_WRITE);

	if (w) {
		w->w0 = addr;
		w->w1 = rkey;
	}
}

static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct sn_send_wr *w = add(x, IBV_WR_RDMA_WRITE_WITH_IMM);

	if (w) {
		w->w0 = addr;
		w->w1 = rkey;
		w->imm = imm;
	}
}

static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	struct sn_send_wr *w = add(x, IBV_WR_RDMA_READ);

	if (w) {
		w->w0 = addr;
		w->w1 = rkey;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t compare,
			      uint64_t swap)
{
	struct sn_send_wr *w = add(x, IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w) {
		w->w0 = addr;
		w->w1 = compare;
		w->w2 = swap;
		w->w3 = rkey;
	}
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add_)
{
	struct sn_send_wr *w = add(x, IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w) {
		w->w0 = addr;
		w->w1 = add_;
		w->w3 = rkey;
	}
}

static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, const void *val)
{
	struct sn_send_wr *w = add(x, IBV_WR_ATOMIC_WRITE);

	if (w) {
		w->w0 = addr;
		w->w1 = rkey;
		memcpy(&w->b0, val, 8);
	}
}

static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct sn_send_wr *w = add(x, IBV_WR_LOCAL_INV);

	if (w)
		w->imm = rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct sn_send_wr *w = add(x, IBV_WR_BIND_MW);

	if (w) {
		w->b0 = (uintptr_t)mw;
		w->b1 = rkey;
		w->b2 = (uintptr_t)info->mr;
		w->b3 = info->addr;
		w->b4 = info->length;
		w->b5 = info->mw_access_flags;
	}
}

static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct sn_send_wr *w = last(x);

	if (w) {
		w->w0 = (uintptr_t)ah;
		w->w1 = qpn | (uint64_t)qkey << 32;
	}
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	struct sn_send_wr *w = last(x);

	if (w)
		w->remote_srqn = srqn;
}

static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct sn_sge *s = add_sges(x, 1, false);

	if (s) {
		s->addr = addr;
		s->length = length;
		s->lkey = lkey;
	}
}

static void wr_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *list)
{
	struct sn_sge *s = add_sges(x, (int)n, false);

	if (s)
		memcpy(s, list, n * sizeof(*s));
}

static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
	struct sn_wr_batch *b = &to_sqp(x)->batch;
	size_t len = 0;
	int cap = (int)b->capdata;
	struct sn_sge *s;

	for (size_t i = 0; i < n; i++)
		len += bufs[i].length;
	b->data = grow(b->data, &cap, (int)(b->ndata + len), 1, &b->err);
	if (b->err)
		return;
	b->capdata = cap;
	s = add_sges(x, 1, true);
	if (!s)
		return;
	/* An offset into the data array, made an address at complete. */
	s->addr = b->ndata;
	s->length = len;
	s->lkey = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(b->data + b->ndata, bufs[i].addr, bufs[i].length);
		b->ndata += bufs[i].length;
	}
}

static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(x, 1, &buf);
}

void sn_qp_ex_init(struct sn_qp *qp)
{
	struct ibv_qp_ex *x = &qp->qpx;

	pthread_mutex_init(&qp->post_mu, NULL);
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_atomic_write = wr_atomic_write;
	x->wr_local_inv = wr_local_inv;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
}

void sn_qp_ex_free(struct sn_qp *qp)
{
	if (qp->ex)
		pthread_mutex_destroy(&qp->post_mu);
	free(qp->batch.wr);
	free(qp->batch.meta);
	free(qp->batch.sge);
	free(qp->batch.data);
}
