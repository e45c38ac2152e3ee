/*
 * mr.c - protection domains, memory regions and memory windows.
 *
 * A registered region is the program's own memory: the engine reads and
 * writes it in place, so registering pins nothing and fork needs no
 * madvise (ibv_fork_init: IBV_FORK_UNNEEDED).
 */
#include <errno.h>
#include <stdlib.h>

#include "softnic.h"

struct ibv_pd *sn_alloc_pd(struct ibv_context *ctx)
{
	struct sn_pd *pd = calloc(1, sizeof(*pd));
	int err;

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->alloc_pd(to_sctx(ctx)->h, &pd->pd.handle);
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	return &pd->pd;
}

int sn_dealloc_pd(struct ibv_pd *pd)
{
	int err = sn_e->dealloc_pd(pd->handle);

	if (err)
		return err;
	free(pd);
	return 0;
}

struct ibv_td *sn_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr)
{
	struct sn_td *td;
	int err;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->alloc_td(to_sctx(ctx)->h, &td->h);
	if (err) {
		free(td);
		errno = err;
		return NULL;
	}
	td->td.context = ctx;
	return &td->td;
}

int sn_dealloc_td(struct ibv_td *td)
{
	int err = sn_e->dealloc_td(((struct sn_td *)td)->h);

	if (err)
		return err;
	free(td);
	return 0;
}

/*
 * A parent domain is a PD to the engine and to every call that takes one.
 * Its allocators are taken and never called, as the buffers a provider
 * would allocate with them (queues, doorbells) are the engine's own; a
 * provider may always fall back to its default allocation.
 */
struct ibv_pd *sn_alloc_parent_domain(struct ibv_context *ctx, struct ibv_parent_domain_init_attr *attr)
{
	const uint32_t sup = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
	struct sn_pd *pd;
	int err;

	if ((attr->comp_mask & ~sup) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->alloc_parent_domain(to_sctx(ctx)->h, attr->pd->handle,
					attr->td ? ((struct sn_td *)attr->td)->h : 0, &pd->pd.handle);
	if (err) {
		free(pd);
		errno = err;
		return NULL;
	}
	pd->pd.context = ctx;
	return &pd->pd;
}

struct ibv_mr *sn_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	struct sn_mr *mr = calloc(1, sizeof(*mr));
	int err;

	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->reg_mr(pd->handle, addr, length, iova, access, &mr->mr.handle, &mr->mr.lkey);
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	mr->mr.rkey = mr->mr.lkey;
	return &mr->mr;
}

int sn_dereg_mr(struct ibv_mr *mr)
{
	int err = sn_e->dereg_mr(mr->handle);

	if (err)
		return err;
	free(mr);
	return 0;
}

/* The keys stay (rxe_rereg_user_mr); ibv_rereg_mr updates the struct's
 * PD, address and length once this succeeds. */
int sn_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	int err = sn_e->rereg_mr(mr->handle, flags, (flags & IBV_REREG_MR_CHANGE_PD) && pd ? pd->handle : 0,
				 addr, length, access);

	return sn_errno(err);
}

int sn_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags, struct ibv_sge *sg,
		 uint32_t n)
{
	return sn_e->advise_mr(pd->handle, advice, flags, (struct sn_sge *)sg, n);
}

struct ibv_mw *sn_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sn_mw *mw = calloc(1, sizeof(*mw));
	int err;

	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	err = sn_e->alloc_mw(pd->handle, type, &mw->mw.handle, &mw->mw.rkey);
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	mw->mw.context = pd->context;
	mw->mw.pd = pd;
	mw->mw.type = type;
	return &mw->mw;
}

int sn_dealloc_mw(struct ibv_mw *mw)
{
	int err = sn_e->dealloc_mw(mw->handle);

	if (err)
		return err;
	free(mw);
	return 0;
}

/* A type-1 bind posts a BIND_MW work request; the window's rkey is the
 * new one at once (rdma-core's providers set mw->rkey when they post). */
int sn_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *b)
{
	struct sn_mw_bind bind = {
		.wr_id = b->wr_id,
		.send_flags = b->send_flags,
		.mr = b->bind_info.mr ? b->bind_info.mr->handle : 0,
		.addr = b->bind_info.addr,
		.length = b->bind_info.length,
		.access = b->bind_info.mw_access_flags,
	};
	struct sn_qp *q = (struct sn_qp *)qp;
	uint32_t rkey;
	int err;

	if (!q->ex) {
		err = sn_e->bind_mw(qp->handle, mw->handle, &bind, &rkey);
	} else if (sn_post_held(q)) {
		err = EBUSY; /* a bind is a post: not inside the thread's own batch */
	} else {
		pthread_mutex_lock(&q->post_mu);
		err = sn_e->bind_mw(qp->handle, mw->handle, &bind, &rkey);
		pthread_mutex_unlock(&q->post_mu);
	}
	if (err)
		return err;
	mw->rkey = rkey;
	return 0;
}
