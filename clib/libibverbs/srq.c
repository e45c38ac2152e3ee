/*
 * srq.c - shared receive queues (basic, XRC and tag-matching), XRC
 * domains, work queues and receive work queue indirection tables.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "softnic.h"

static struct ibv_srq *create_srq(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr)
{
	struct sn_srq_init in = { 0 };
	struct sn_srq_attr got;
	struct sn_srq *srq;
	int err;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_RESERVED - 1))) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	in.cookie = (uintptr_t)srq;
	in.pd = attr->pd->handle;
	in.max_wr = attr->attr.max_wr;
	in.max_sge = attr->attr.max_sge;
	in.srq_limit = attr->attr.srq_limit;
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		in.srq_type = attr->srq_type;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) && attr->cq)
		in.cq = attr->cq->handle;
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) && attr->xrcd)
		in.xrcd = ((struct sn_xrcd *)attr->xrcd)->h;
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) {
		in.max_num_tags = attr->tm_cap.max_num_tags;
		in.max_ops = attr->tm_cap.max_ops;
	}
	err = sn_e->create_srq(to_sctx(ctx)->h, &in, &srq->srq.handle, &got, &srq->srq_num);
	if (err) {
		free(srq);
		errno = err;
		return NULL;
	}
	attr->attr.max_wr = got.max_wr;
	attr->attr.max_sge = got.max_sge;
	return &srq->srq;
}

struct ibv_srq *sn_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex x = {
		.srq_context = attr->srq_context,
		.attr = attr->attr,
		.comp_mask = IBV_SRQ_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_srq *srq = create_srq(pd->context, &x);

	if (srq)
		attr->attr = x.attr;
	return srq;
}

/* The inline ibv_create_srq_ex calls the operation directly: it fills
 * what ibv_create_srq's caller would. */
struct ibv_srq *sn_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq = create_srq(ctx, attr);

	if (srq) {
		srq->context = ctx;
		srq->srq_context = attr->srq_context;
		srq->pd = attr->pd;
		srq->events_completed = 0;
		pthread_mutex_init(&srq->mutex, NULL);
		pthread_cond_init(&srq->cond, NULL);
	}
	return srq;
}

int sn_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct sn_srq_attr a = { attr->max_wr, attr->max_sge, attr->srq_limit };

	return sn_e->modify_srq(srq->handle, &a, mask);
}

int sn_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct sn_srq_attr a;
	int err = sn_e->query_srq(srq->handle, &a);

	if (err)
		return err;
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

int sn_destroy_srq(struct ibv_srq *s)
{
	struct sn_srq *srq = (struct sn_srq *)s;
	int err;

	sn_wait_events(&s->mutex, &s->cond, &s->events_completed, &srq->events_reported);
	err = sn_e->destroy_srq(s->handle);
	if (err)
		return err;
	free(srq);
	return 0;
}

int sn_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return sn_e->post_srq_recv(srq->handle, (struct sn_recv_wr *)wr, (struct sn_recv_wr **)bad);
}

int sn_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad)
{
	return sn_e->post_srq_ops(srq->handle, (struct sn_ops_wr *)op, (struct sn_ops_wr **)bad);
}

int sn_get_srq_num(struct ibv_srq *srq, uint32_t *num)
{
	struct sn_srq *s = (struct sn_srq *)srq;

	if (!s->srq_num)
		return EINVAL;
	*num = s->srq_num;
	return 0;
}

/*
 * ibv_open_xrcd shares a domain through a file: every XRCD opened on the
 * same file (its device and inode) is one domain, within the process
 * (softnic's SRQs live in its own NIC). Without a file (fd -1) the domain
 * is the XRCD's own.
 */
struct ibv_xrcd *sn_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr)
{
	char key[64] = "";
	struct sn_xrcd *x;
	struct stat st;
	int err;

	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (attr->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_RESERVED - 1))) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->fd >= 0) {
		if (fstat(attr->fd, &st)) {
			errno = EBADF;
			return NULL;
		}
		snprintf(key, sizeof(key), "inode:%llu:%llu", (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->open_xrcd(to_sctx(ctx)->h, key, &x->h);
	if (err) {
		free(x);
		errno = err;
		return NULL;
	}
	x->xrcd.context = ctx;
	return &x->xrcd;
}

int sn_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct sn_xrcd *x = (struct sn_xrcd *)xrcd;
	int err = sn_e->close_xrcd(x->h);

	if (err)
		return err;
	free(x);
	return 0;
}

static int post_wq_recv(struct ibv_wq *wq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return sn_e->post_wq_recv(wq->handle, (struct sn_recv_wr *)wr, (struct sn_recv_wr **)bad);
}

struct ibv_wq *sn_create_wq(struct ibv_context *ctx, struct ibv_wq_init_attr *attr)
{
	struct sn_wq_init in = {
		.pd = attr->pd ? attr->pd->handle : 0,
		.cq = attr->cq ? attr->cq->handle : 0,
		.wq_type = attr->wq_type,
		.max_wr = attr->max_wr,
		.max_sge = attr->max_sge,
		.create_flags = (attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) ? attr->create_flags : 0,
	};
	struct sn_wq *wq = calloc(1, sizeof(*wq));
	int err;

	if (!wq) {
		errno = ENOMEM;
		return NULL;
	}
	in.cookie = (uintptr_t)wq;
	err = sn_e->create_wq(to_sctx(ctx)->h, &in, &wq->wq.handle, &wq->wq.wq_num, &attr->max_wr,
			      &attr->max_sge);
	if (err) {
		free(wq);
		errno = err;
		return NULL;
	}
	wq->wq.context = ctx;
	wq->wq.wq_context = attr->wq_context;
	wq->wq.pd = attr->pd;
	wq->wq.cq = attr->cq;
	wq->wq.state = IBV_WQS_RESET;
	wq->wq.wq_type = attr->wq_type;
	wq->wq.post_recv = post_wq_recv;
	pthread_mutex_init(&wq->wq.mutex, NULL);
	pthread_cond_init(&wq->wq.cond, NULL);
	return &wq->wq;
}

int sn_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *attr)
{
	struct sn_wq_attr a = {
		.attr_mask = attr->attr_mask,
		.wq_state = attr->wq_state,
		.curr_wq_state = attr->curr_wq_state,
		.flags = attr->flags,
		.flags_mask = attr->flags_mask,
	};
	uint32_t state;
	int err = sn_e->modify_wq(wq->handle, &a, &state);

	if (err)
		return err;
	wq->state = state;
	return 0;
}

int sn_destroy_wq(struct ibv_wq *w)
{
	struct sn_wq *wq = (struct sn_wq *)w;
	int err;

	sn_wait_events(&w->mutex, &w->cond, &w->events_completed, &wq->events_reported);
	err = sn_e->destroy_wq(w->handle);
	if (err)
		return err;
	free(wq);
	return 0;
}

/*
 * An indirection table spreads receives over its WQs by a hash of each
 * packet (RSS), a raw-packet feature; softnic takes the tables whose
 * entries are all one WQ, which a QP then takes its receives from
 * (verbs.QPInitAttr.WQ), and refuses others with EOPNOTSUPP.
 */
struct ibv_rwq_ind_table *sn_create_rwq_ind_table(struct ibv_context *ctx,
						  struct ibv_rwq_ind_table_init_attr *attr)
{
	size_t n = (size_t)1 << attr->log_ind_tbl_size;
	struct sn_ind_table *t;

	if (attr->comp_mask || attr->log_ind_tbl_size > 16 || !attr->ind_tbl || !attr->ind_tbl[0]) {
		errno = EINVAL;
		return NULL;
	}
	for (size_t i = 1; i < n; i++) {
		if (attr->ind_tbl[i] != attr->ind_tbl[0]) {
			sn_debug("an indirection table over several WQs (RSS) is not supported");
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->t.context = ctx;
	t->wq = attr->ind_tbl[0];
	return &t->t;
}

int sn_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	free(t);
	return 0;
}
