/*
 * abi.c - the layouts programs compiled against rdma-core 44's
 * <rdma/rdma_cma.h> read, checked by the compiler against the headers
 * this library is built with: a program reaches an ID's verbs objects
 * (verbs, qp, pd, send_cq, recv_cq, their channels, srq: the inline calls
 * of <rdma/rdma_verbs.h> go through them), an event's parameters and an
 * address info through these offsets. The figures are those of the LP64
 * ABI (x86-64, AArch64).
 */
#include <stddef.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_cma_abi.h>

#include "cma.h"

#define OFF(t, f, n) _Static_assert(offsetof(struct t, f) == (n), "offsetof(struct " #t ", " #f ") is " #n)
#define SIZE(t, n) _Static_assert(sizeof(struct t) == (n), "sizeof(struct " #t ") is " #n)

#if defined(__LP64__)
SIZE(rdma_cm_id, 416);
OFF(rdma_cm_id, verbs, 0);
OFF(rdma_cm_id, channel, 8);
OFF(rdma_cm_id, context, 16);
OFF(rdma_cm_id, qp, 24);
OFF(rdma_cm_id, route, 32);
OFF(rdma_cm_id, ps, 344);
OFF(rdma_cm_id, port_num, 348);
OFF(rdma_cm_id, event, 352);
OFF(rdma_cm_id, send_cq_channel, 360);
OFF(rdma_cm_id, send_cq, 368);
OFF(rdma_cm_id, recv_cq_channel, 376);
OFF(rdma_cm_id, recv_cq, 384);
OFF(rdma_cm_id, srq, 392);
OFF(rdma_cm_id, pd, 400);
OFF(rdma_cm_id, qp_type, 408);

SIZE(rdma_route, 312);
OFF(rdma_route, addr, 0);
OFF(rdma_route, path_rec, 296);
OFF(rdma_route, num_paths, 304);

SIZE(rdma_addr, 296);
OFF(rdma_addr, src_addr, 0);
OFF(rdma_addr, dst_addr, 128);
OFF(rdma_addr, addr.ibaddr.sgid, 256);
OFF(rdma_addr, addr.ibaddr.dgid, 272);
OFF(rdma_addr, addr.ibaddr.pkey, 288);

SIZE(rdma_event_channel, 4);
OFF(rdma_event_channel, fd, 0);

SIZE(rdma_conn_param, 24);
OFF(rdma_conn_param, private_data, 0);
OFF(rdma_conn_param, private_data_len, 8);
OFF(rdma_conn_param, responder_resources, 9);
OFF(rdma_conn_param, initiator_depth, 10);
OFF(rdma_conn_param, flow_control, 11);
OFF(rdma_conn_param, retry_count, 12);
OFF(rdma_conn_param, rnr_retry_count, 13);
OFF(rdma_conn_param, srq, 14);
OFF(rdma_conn_param, qp_num, 16);

SIZE(rdma_ud_param, 56);
OFF(rdma_ud_param, private_data, 0);
OFF(rdma_ud_param, private_data_len, 8);
OFF(rdma_ud_param, ah_attr, 16);
OFF(rdma_ud_param, qp_num, 48);
OFF(rdma_ud_param, qkey, 52);

SIZE(rdma_cm_event, 80);
OFF(rdma_cm_event, id, 0);
OFF(rdma_cm_event, listen_id, 8);
OFF(rdma_cm_event, event, 16);
OFF(rdma_cm_event, status, 20);
OFF(rdma_cm_event, param, 24);
OFF(rdma_cm_event, param.conn, 24);
OFF(rdma_cm_event, param.ud, 24);

SIZE(rdma_addrinfo, 96);
OFF(rdma_addrinfo, ai_flags, 0);
OFF(rdma_addrinfo, ai_family, 4);
OFF(rdma_addrinfo, ai_qp_type, 8);
OFF(rdma_addrinfo, ai_port_space, 12);
OFF(rdma_addrinfo, ai_src_len, 16);
OFF(rdma_addrinfo, ai_dst_len, 20);
OFF(rdma_addrinfo, ai_src_addr, 24);
OFF(rdma_addrinfo, ai_dst_addr, 32);
OFF(rdma_addrinfo, ai_src_canonname, 40);
OFF(rdma_addrinfo, ai_dst_canonname, 48);
OFF(rdma_addrinfo, ai_route_len, 56);
OFF(rdma_addrinfo, ai_route, 64);
OFF(rdma_addrinfo, ai_connect_len, 72);
OFF(rdma_addrinfo, ai_connect, 80);
OFF(rdma_addrinfo, ai_next, 88);

SIZE(rdma_cm_join_mc_attr_ex, 16);
OFF(rdma_cm_join_mc_attr_ex, comp_mask, 0);
OFF(rdma_cm_join_mc_attr_ex, join_flags, 4);
OFF(rdma_cm_join_mc_attr_ex, addr, 8);

SIZE(ibv_sa_path_rec, 64);
OFF(ibv_sa_path_rec, dgid, 0);
OFF(ibv_sa_path_rec, sgid, 16);
OFF(ibv_sa_path_rec, flow_label, 40);
OFF(ibv_sa_path_rec, hop_limit, 44);
OFF(ibv_sa_path_rec, traffic_class, 45);
OFF(ibv_sa_path_rec, pkey, 54);
OFF(ibv_sa_path_rec, sl, 56);
OFF(ibv_sa_path_rec, mtu, 58);
OFF(ibv_sa_path_rec, packet_life_time, 62);
#endif

/* An event carries as much private data as the kernel's (ucma's). */
_Static_assert(SN_CM_MAX_PRIVATE_DATA == RDMA_MAX_PRIVATE_DATA, "an event's private data is the kernel's");
