/*
 * abi.c - the layouts the library depends on, checked by the compiler
 * against the system's <infiniband/verbs.h>.
 *
 * The engine reads and writes libibverbs' data-path structs in place
 * through the mirrors of softnic_engine.h (a work request chain, a
 * scatter list, an array of completions), and reads the handle it gave
 * an AH, MW or MR from the object's own struct. Programs reach the
 * inline calls through struct ibv_context and struct verbs_context, and
 * the extended QP and CQ through their function pointers; those layouts
 * are the headers' own, but the assumptions made about them are checked
 * here too.
 */
#include <stddef.h>

#include "softnic.h"

#define SAME(a, fa, b, fb) _Static_assert(offsetof(a, fa) == offsetof(b, fb), #a "." #fa " is " #b "." #fb)
#define SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), "sizeof " #a " is sizeof " #b)

/* struct ibv_sge */
SAME_SIZE(struct ibv_sge, struct sn_sge);
SAME(struct ibv_sge, addr, struct sn_sge, addr);
SAME(struct ibv_sge, length, struct sn_sge, length);
SAME(struct ibv_sge, lkey, struct sn_sge, lkey);

/* struct ibv_send_wr and its unions */
SAME_SIZE(struct ibv_send_wr, struct sn_send_wr);
SAME(struct ibv_send_wr, wr_id, struct sn_send_wr, wr_id);
SAME(struct ibv_send_wr, next, struct sn_send_wr, next);
SAME(struct ibv_send_wr, sg_list, struct sn_send_wr, sg_list);
SAME(struct ibv_send_wr, num_sge, struct sn_send_wr, num_sge);
SAME(struct ibv_send_wr, opcode, struct sn_send_wr, opcode);
SAME(struct ibv_send_wr, send_flags, struct sn_send_wr, send_flags);
SAME(struct ibv_send_wr, imm_data, struct sn_send_wr, imm);
SAME(struct ibv_send_wr, invalidate_rkey, struct sn_send_wr, imm);
SAME(struct ibv_send_wr, wr.rdma.remote_addr, struct sn_send_wr, w0);
SAME(struct ibv_send_wr, wr.rdma.rkey, struct sn_send_wr, w1);
SAME(struct ibv_send_wr, wr.atomic.remote_addr, struct sn_send_wr, w0);
SAME(struct ibv_send_wr, wr.atomic.compare_add, struct sn_send_wr, w1);
SAME(struct ibv_send_wr, wr.atomic.swap, struct sn_send_wr, w2);
SAME(struct ibv_send_wr, wr.atomic.rkey, struct sn_send_wr, w3);
SAME(struct ibv_send_wr, wr.ud.ah, struct sn_send_wr, w0);
SAME(struct ibv_send_wr, wr.ud.remote_qpn, struct sn_send_wr, w1);
_Static_assert(offsetof(struct ibv_send_wr, wr.ud.remote_qkey) == offsetof(struct sn_send_wr, w1) + 4,
	       "wr.ud.remote_qkey is the high half of w1");
SAME(struct ibv_send_wr, qp_type.xrc.remote_srqn, struct sn_send_wr, remote_srqn);
SAME(struct ibv_send_wr, bind_mw.mw, struct sn_send_wr, b0);
SAME(struct ibv_send_wr, bind_mw.rkey, struct sn_send_wr, b1);
SAME(struct ibv_send_wr, bind_mw.bind_info.mr, struct sn_send_wr, b2);
SAME(struct ibv_send_wr, bind_mw.bind_info.addr, struct sn_send_wr, b3);
SAME(struct ibv_send_wr, bind_mw.bind_info.length, struct sn_send_wr, b4);
SAME(struct ibv_send_wr, bind_mw.bind_info.mw_access_flags, struct sn_send_wr, b5);
SAME(struct ibv_send_wr, tso.hdr, struct sn_send_wr, b0);
SAME(struct ibv_send_wr, tso.hdr_sz, struct sn_send_wr, b1);
_Static_assert(offsetof(struct ibv_send_wr, tso.mss) == offsetof(struct sn_send_wr, b1) + 2,
	       "tso.mss is bits 16-31 of b1");

/* struct ibv_recv_wr */
SAME_SIZE(struct ibv_recv_wr, struct sn_recv_wr);
SAME(struct ibv_recv_wr, wr_id, struct sn_recv_wr, wr_id);
SAME(struct ibv_recv_wr, next, struct sn_recv_wr, next);
SAME(struct ibv_recv_wr, sg_list, struct sn_recv_wr, sg_list);
SAME(struct ibv_recv_wr, num_sge, struct sn_recv_wr, num_sge);

/* The receive stage: the library copies a struct ibv_sge into each of an
 * entry's (checked above as struct sn_sge), and the engine finds the ring
 * of entries right after the header (clib/engine/stage.go). */
_Static_assert(offsetof(struct sn_rstage, ent) == sizeof(struct sn_rstage),
	       "the stage's entries start at sizeof(struct sn_rstage)");

/* struct ibv_ops_wr */
SAME_SIZE(struct ibv_ops_wr, struct sn_ops_wr);
SAME(struct ibv_ops_wr, wr_id, struct sn_ops_wr, wr_id);
SAME(struct ibv_ops_wr, next, struct sn_ops_wr, next);
SAME(struct ibv_ops_wr, opcode, struct sn_ops_wr, opcode);
SAME(struct ibv_ops_wr, flags, struct sn_ops_wr, flags);
SAME(struct ibv_ops_wr, tm.unexpected_cnt, struct sn_ops_wr, unexpected_cnt);
SAME(struct ibv_ops_wr, tm.handle, struct sn_ops_wr, handle);
SAME(struct ibv_ops_wr, tm.add.recv_wr_id, struct sn_ops_wr, recv_wr_id);
SAME(struct ibv_ops_wr, tm.add.sg_list, struct sn_ops_wr, sg_list);
SAME(struct ibv_ops_wr, tm.add.num_sge, struct sn_ops_wr, num_sge);
SAME(struct ibv_ops_wr, tm.add.tag, struct sn_ops_wr, tag);
SAME(struct ibv_ops_wr, tm.add.mask, struct sn_ops_wr, mask);

/* struct ibv_wc */
SAME_SIZE(struct ibv_wc, struct sn_wc);
SAME(struct ibv_wc, wr_id, struct sn_wc, wr_id);
SAME(struct ibv_wc, status, struct sn_wc, status);
SAME(struct ibv_wc, opcode, struct sn_wc, opcode);
SAME(struct ibv_wc, vendor_err, struct sn_wc, vendor_err);
SAME(struct ibv_wc, byte_len, struct sn_wc, byte_len);
SAME(struct ibv_wc, imm_data, struct sn_wc, imm);
SAME(struct ibv_wc, invalidated_rkey, struct sn_wc, imm);
SAME(struct ibv_wc, qp_num, struct sn_wc, qp_num);
SAME(struct ibv_wc, src_qp, struct sn_wc, src_qp);
SAME(struct ibv_wc, wc_flags, struct sn_wc, wc_flags);
SAME(struct ibv_wc, pkey_index, struct sn_wc, pkey_index);
SAME(struct ibv_wc, slid, struct sn_wc, slid);
SAME(struct ibv_wc, sl, struct sn_wc, sl);
SAME(struct ibv_wc, dlid_path_bits, struct sn_wc, dlid_path_bits);

/* The handles the engine reads from objects a work request points to. */
SAME(struct ibv_ah, context, struct sn_ah_head, context);
SAME(struct ibv_ah, pd, struct sn_ah_head, pd);
SAME(struct ibv_ah, handle, struct sn_ah_head, handle);
SAME(struct ibv_mw, rkey, struct sn_mw_head, rkey);
SAME(struct ibv_mw, handle, struct sn_mw_head, handle);
SAME(struct ibv_mr, addr, struct sn_mr_head, addr);
SAME(struct ibv_mr, length, struct sn_mr_head, length);
SAME(struct ibv_mr, handle, struct sn_mr_head, handle);
SAME(struct ibv_mr, lkey, struct sn_mr_head, lkey);
SAME(struct ibv_mr, rkey, struct sn_mr_head, rkey);
_Static_assert(offsetof(struct sn_ah, ah) == 0 && offsetof(struct sn_mw, mw) == 0 &&
		       offsetof(struct sn_mr, mr) == 0,
	       "the libibverbs struct starts softnic's");

/* The contexts: verbs_context ends with the ibv_context (verbs_get_ctx),
 * sz and the abi_compat marker before it, and rdma-core's struct
 * verbs_device has its ops pointer right after the ibv_device. */
_Static_assert(offsetof(struct verbs_context, context) + sizeof(struct ibv_context) ==
		       sizeof(struct verbs_context),
	       "struct ibv_context is the last member of struct verbs_context");
_Static_assert(offsetof(struct verbs_context, sz) + sizeof(size_t) ==
		       offsetof(struct verbs_context, context),
	       "sz is right before the ibv_context");
_Static_assert(offsetof(struct sn_context, vctx) == 0, "a context starts with its verbs_context");
_Static_assert(offsetof(struct sn_device, ops) == sizeof(struct ibv_device),
	       "the ops pointer follows the ibv_device, as in struct verbs_device");

/* The extended objects: the plain struct is the start of the extended
 * one, which starts softnic's (ibv_cq_ex_to_cq, ibv_qp_to_qp_ex). */
_Static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0, "qp_base starts struct ibv_qp_ex");
_Static_assert(offsetof(struct sn_qp, qpx) == 0, "a QP starts with its ibv_qp_ex");
_Static_assert(offsetof(struct sn_cq, cq) == 0, "a CQ starts with its ibv_cq_ex");
SAME(struct ibv_cq_ex, context, struct ibv_cq, context);
SAME(struct ibv_cq_ex, channel, struct ibv_cq, channel);
SAME(struct ibv_cq_ex, cq_context, struct ibv_cq, cq_context);
SAME(struct ibv_cq_ex, handle, struct ibv_cq, handle);
SAME(struct ibv_cq_ex, cqe, struct ibv_cq, cqe);
SAME(struct ibv_cq_ex, mutex, struct ibv_cq, mutex);
SAME(struct ibv_cq_ex, cond, struct ibv_cq, cond);
SAME(struct ibv_cq_ex, comp_events_completed, struct ibv_cq, comp_events_completed);
SAME(struct ibv_cq_ex, async_events_completed, struct ibv_cq, async_events_completed);
_Static_assert(offsetof(struct sn_srq, srq) == 0 && offsetof(struct sn_wq, wq) == 0 &&
		       offsetof(struct sn_pd, pd) == 0 && offsetof(struct sn_channel, ch) == 0 &&
		       offsetof(struct sn_xrcd, xrcd) == 0 && offsetof(struct sn_ind_table, t) == 0,
	       "the libibverbs struct starts softnic's");

/* The GID table's entries are 16-byte GIDs, as the engine's. */
_Static_assert(sizeof(union ibv_gid) == sizeof(((struct sn_dev_info *)0)->gid), "a GID is 16 bytes");
