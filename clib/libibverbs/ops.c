/*
 * ops.c - the device's operations: one table (sn_ops), as a provider of
 * rdma-core fills one struct verbs_context_ops (providers/rxe/rxe.c
 * rxe_ctx_ops), and the dummies that answer for what softnic does not do,
 * as libibverbs/dummy_ops.c answers for what a device lacks: EOPNOTSUPP,
 * as an int or in errno beside a NULL.
 *
 * A dummy stands for what softnic deliberately lacks (verbs.Unsupported
 * lists each with its reason): device memory, counter objects, flows and
 * flow actions, null MRs, dma-buf MRs, imported objects, ECE and rate
 * limits.
 */
#include <errno.h>

#include "softnic.h"

static struct ibv_dm *dummy_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_mr *dummy_alloc_null_mr(struct ibv_pd *pd)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int dummy_attach_counters_point_flow(struct ibv_counters *c, struct ibv_counter_attach_attr *a,
					    struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static struct ibv_counters *dummy_create_counters(struct ibv_context *c,
						  struct ibv_counters_init_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_flow *dummy_create_flow(struct ibv_qp *qp, struct ibv_flow_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_flow_action *dummy_create_flow_action_esp(struct ibv_context *c,
							    struct ibv_flow_action_esp_attr *a)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int dummy_destroy_counters(struct ibv_counters *c)
{
	return EOPNOTSUPP;
}

static int dummy_destroy_flow(struct ibv_flow *f)
{
	return EOPNOTSUPP;
}

static int dummy_destroy_flow_action(struct ibv_flow_action *a)
{
	return EOPNOTSUPP;
}

static int dummy_free_dm(struct ibv_dm *dm)
{
	return EOPNOTSUPP;
}

static struct ibv_dm *dummy_import_dm(struct ibv_context *c, uint32_t h)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_mr *dummy_import_mr(struct ibv_pd *pd, uint32_t h)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_pd *dummy_import_pd(struct ibv_context *c, uint32_t h)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int dummy_modify_flow_action_esp(struct ibv_flow_action *f, struct ibv_flow_action_esp_attr *a)
{
	return EOPNOTSUPP;
}

static int dummy_modify_qp_rate_limit(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *a)
{
	return EOPNOTSUPP;
}

static int dummy_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

/* rdma-core's default: the data of a QP is not known to land in order. */
static int dummy_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	return 0;
}

static int dummy_read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n, uint32_t flags)
{
	return EOPNOTSUPP;
}

static struct ibv_mr *dummy_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off, size_t len,
				      unsigned int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static struct ibv_mr *dummy_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
					  int fd, int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int dummy_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	return EOPNOTSUPP;
}

static void dummy_unimport_dm(struct ibv_dm *dm)
{
}

static void dummy_unimport_mr(struct ibv_mr *mr)
{
}

static void dummy_unimport_pd(struct ibv_pd *pd)
{
}

const struct sn_ops sn_ops = {
	.advise_mr = sn_advise_mr,
	.alloc_dm = dummy_alloc_dm,
	.alloc_mw = sn_alloc_mw,
	.alloc_null_mr = dummy_alloc_null_mr,
	.alloc_parent_domain = sn_alloc_parent_domain,
	.alloc_pd = sn_alloc_pd,
	.alloc_td = sn_alloc_td,
	.attach_counters_point_flow = dummy_attach_counters_point_flow,
	.attach_mcast = sn_attach_mcast,
	.bind_mw = sn_bind_mw,
	.close_xrcd = sn_close_xrcd,
	.create_ah = sn_create_ah,
	.create_counters = dummy_create_counters,
	.create_cq = sn_create_cq,
	.create_cq_ex = sn_create_cq_ex,
	.create_flow = dummy_create_flow,
	.create_flow_action_esp = dummy_create_flow_action_esp,
	.create_qp = sn_create_qp,
	.create_qp_ex = sn_create_qp_ex,
	.create_rwq_ind_table = sn_create_rwq_ind_table,
	.create_srq = sn_create_srq,
	.create_srq_ex = sn_create_srq_ex,
	.create_wq = sn_create_wq,
	.dealloc_mw = sn_dealloc_mw,
	.dealloc_pd = sn_dealloc_pd,
	.dealloc_td = sn_dealloc_td,
	.dereg_mr = sn_dereg_mr,
	.destroy_ah = sn_destroy_ah,
	.destroy_counters = dummy_destroy_counters,
	.destroy_cq = sn_destroy_cq,
	.destroy_flow = dummy_destroy_flow,
	.destroy_flow_action = dummy_destroy_flow_action,
	.destroy_qp = sn_destroy_qp,
	.destroy_rwq_ind_table = sn_destroy_rwq_ind_table,
	.destroy_srq = sn_destroy_srq,
	.destroy_wq = sn_destroy_wq,
	.detach_mcast = sn_detach_mcast,
	.free_dm = dummy_free_dm,
	.get_srq_num = sn_get_srq_num,
	.import_dm = dummy_import_dm,
	.import_mr = dummy_import_mr,
	.import_pd = dummy_import_pd,
	.modify_cq = sn_modify_cq,
	.modify_flow_action_esp = dummy_modify_flow_action_esp,
	.modify_qp = sn_modify_qp,
	.modify_qp_rate_limit = dummy_modify_qp_rate_limit,
	.modify_srq = sn_modify_srq,
	.modify_wq = sn_modify_wq,
	.open_qp = sn_open_qp,
	.open_xrcd = sn_open_xrcd,
	.poll_cq = sn_poll_cq,
	.post_recv = sn_post_recv,
	.post_send = sn_post_send,
	.post_srq_ops = sn_post_srq_ops,
	.post_srq_recv = sn_post_srq_recv,
	.query_device_ex = sn_query_device_ex,
	.query_ece = dummy_query_ece,
	.query_port = sn_query_port,
	.query_qp = sn_query_qp,
	.query_qp_data_in_order = dummy_query_qp_data_in_order,
	.query_rt_values = sn_query_rt_values,
	.query_srq = sn_query_srq,
	.read_counters = dummy_read_counters,
	.reg_dm_mr = dummy_reg_dm_mr,
	.reg_dmabuf_mr = dummy_reg_dmabuf_mr,
	.reg_mr = sn_reg_mr,
	.req_notify_cq = sn_req_notify_cq,
	.rereg_mr = sn_rereg_mr,
	.resize_cq = sn_resize_cq,
	.set_ece = dummy_set_ece,
	.unimport_dm = dummy_unimport_dm,
	.unimport_mr = dummy_unimport_mr,
	.unimport_pd = dummy_unimport_pd,
};

/* The old query calls of struct ibv_context_ops, for programs built
 * before struct verbs_context (libibverbs sets them the same way). */
static int compat_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	return ibv_query_device(c, a);
}

#undef ibv_query_port
static int compat_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a)
{
	return ibv_query_port(c, port, a);
}

void sn_set_ops(struct verbs_context *v)
{
	const struct sn_ops *o = &sn_ops;
	struct ibv_context_ops *c = &v->context.ops;

	/* The calls verbs.h makes inline through struct ibv_context. */
	c->_compat_query_device = compat_query_device;
	c->_compat_query_port = compat_query_port;
	c->alloc_mw = o->alloc_mw;
	c->bind_mw = o->bind_mw;
	c->dealloc_mw = o->dealloc_mw;
	c->poll_cq = o->poll_cq;
	c->req_notify_cq = o->req_notify_cq;
	c->post_srq_recv = o->post_srq_recv;
	c->post_send = o->post_send;
	c->post_recv = o->post_recv;

	/* And those it makes through struct verbs_context. */
	v->query_port = o->query_port;
	v->advise_mr = o->advise_mr;
	v->alloc_null_mr = o->alloc_null_mr;
	v->read_counters = o->read_counters;
	v->attach_counters_point_flow = o->attach_counters_point_flow;
	v->create_counters = o->create_counters;
	v->destroy_counters = o->destroy_counters;
	v->reg_dm_mr = o->reg_dm_mr;
	v->alloc_dm = o->alloc_dm;
	v->free_dm = o->free_dm;
	v->modify_flow_action_esp = o->modify_flow_action_esp;
	v->destroy_flow_action = o->destroy_flow_action;
	v->create_flow_action_esp = o->create_flow_action_esp;
	v->modify_qp_rate_limit = o->modify_qp_rate_limit;
	v->alloc_parent_domain = o->alloc_parent_domain;
	v->dealloc_td = o->dealloc_td;
	v->alloc_td = o->alloc_td;
	v->modify_cq = o->modify_cq;
	v->post_srq_ops = o->post_srq_ops;
	v->destroy_rwq_ind_table = o->destroy_rwq_ind_table;
	v->create_rwq_ind_table = o->create_rwq_ind_table;
	v->destroy_wq = o->destroy_wq;
	v->modify_wq = o->modify_wq;
	v->create_wq = o->create_wq;
	v->query_rt_values = o->query_rt_values;
	v->create_cq_ex = o->create_cq_ex;
	v->query_device_ex = o->query_device_ex;
	v->ibv_destroy_flow = o->destroy_flow;
	v->ibv_create_flow = o->create_flow;
	v->open_qp = o->open_qp;
	v->create_qp_ex = o->create_qp_ex;
	v->get_srq_num = o->get_srq_num;
	v->create_srq_ex = o->create_srq_ex;
	v->open_xrcd = o->open_xrcd;
	v->close_xrcd = o->close_xrcd;
}
