/*
 * softnic_verbs.h - the engine's QP and address attributes (softnic_engine.h)
 * as libibverbs' structs, for both C libraries: libibverbs' ibv_query_qp and
 * librdmacm's rdma_init_qp_attr and UD events hand them to programs alike.
 * Unlike softnic_engine.h it needs the system's <infiniband/verbs.h>, so the
 * Go engine does not include it.
 */
#ifndef SOFTNIC_VERBS_H
#define SOFTNIC_VERBS_H

#include <string.h>
#include <infiniband/verbs.h>

#include "softnic_engine.h"

/* SN_GID_ADDR_INDEX is the GID of the NIC's address in softnic's table
 * (index 0 is the link-local GID that names it): the source GID index of
 * an address vector the engine gives. */
#define SN_GID_ADDR_INDEX 1

/* sn_ah_to_ibv is the engine's address vector as libibverbs takes it: its
 * GIDs are the addresses. */
static inline void sn_ah_to_ibv(const struct sn_ah_attr *in, struct ibv_ah_attr *out)
{
	memset(out, 0, sizeof(*out));
	memcpy(out->grh.dgid.raw, in->dgid, 16);
	out->grh.flow_label = in->flow_label;
	out->grh.sgid_index = in->is_global ? SN_GID_ADDR_INDEX : 0;
	out->grh.hop_limit = in->hop_limit;
	out->grh.traffic_class = in->traffic_class;
	out->dlid = in->dlid;
	out->sl = in->sl;
	out->src_path_bits = in->src_path_bits;
	out->static_rate = in->static_rate;
	out->is_global = in->is_global;
	out->port_num = in->port_num;
}

/* sn_cap_to_ibv is the engine's QP capacities as libibverbs' struct. */
static inline void sn_cap_to_ibv(const struct sn_qp_cap *in, struct ibv_qp_cap *out)
{
	out->max_send_wr = in->max_send_wr;
	out->max_recv_wr = in->max_recv_wr;
	out->max_send_sge = in->max_send_sge;
	out->max_recv_sge = in->max_recv_sge;
	out->max_inline_data = in->max_inline_data;
}

/* sn_qp_attr_to_ibv is the engine's QP attributes as struct ibv_qp_attr,
 * its address vectors included (out is cleared first). */
static inline void sn_qp_attr_to_ibv(const struct sn_qp_attr *a, struct ibv_qp_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->qp_state = a->qp_state;
	out->cur_qp_state = a->cur_qp_state;
	out->path_mtu = a->path_mtu;
	out->path_mig_state = a->path_mig_state;
	out->qkey = a->qkey;
	out->rq_psn = a->rq_psn;
	out->sq_psn = a->sq_psn;
	out->dest_qp_num = a->dest_qp_num;
	out->qp_access_flags = a->qp_access_flags;
	out->rate_limit = a->rate_limit;
	sn_cap_to_ibv(&a->cap, &out->cap);
	sn_ah_to_ibv(&a->ah_attr, &out->ah_attr);
	sn_ah_to_ibv(&a->alt_ah_attr, &out->alt_ah_attr);
	out->pkey_index = a->pkey_index;
	out->alt_pkey_index = a->alt_pkey_index;
	out->en_sqd_async_notify = a->en_sqd_async_notify;
	out->sq_draining = a->sq_draining;
	out->max_rd_atomic = a->max_rd_atomic;
	out->max_dest_rd_atomic = a->max_dest_rd_atomic;
	out->min_rnr_timer = a->min_rnr_timer;
	out->port_num = a->port_num;
	out->timeout = a->timeout;
	out->retry_cnt = a->retry_cnt;
	out->rnr_retry = a->rnr_retry;
	out->alt_port_num = a->alt_port_num;
	out->alt_timeout = a->alt_timeout;
}

#endif
