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
	uint32_t rkey;
	int err = sn_e->bind_mw(qp->handle, mw->handle, &bind, &rkey);

	if (err)
		return err;
	mw->rkey = rkey;
	return 0;
}
