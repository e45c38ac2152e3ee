/*
 * softnic_engine.h - the boundary between softnic's libibverbs.so.1 (C) and
 * its engine, libsoftnic.so (Go, -buildmode=c-shared).
 *
 * The C library owns every struct a program sees (ibv_context, ibv_qp, ...);
 * the engine owns the Go objects behind them (package verbs) and hands the C
 * library integer handles. C never keeps a Go pointer; Go keeps C pointers
 * only as opaque cookies it returns with events (the ibv_cq of a completion
 * event, the object of an asynchronous event) and reads C memory only while
 * a call lasts (work requests, scatter lists, registered memory).
 *
 * The header is self-contained (stdint only) so that the Go package builds
 * with a C compiler alone; the C library includes it beside the system's
 * <infiniband/verbs.h> and checks with _Static_assert (abi.c) that the
 * mirrors below have the layouts of libibverbs' structs. Every function
 * returns 0 or a positive errno value, as libibverbs' calls do.
 *
 * The cgo export of each function must match its prototype here: the Go
 * package includes this header, so a mismatch fails its build.
 */
#ifndef SOFTNIC_ENGINE_H
#define SOFTNIC_ENGINE_H

#include <stdint.h>

/* The engine's ABI version; sne_abi_version must return it. */
#define SN_ABI_VERSION 3

/* Handles are 32-bit; 0 is no object. */
typedef uint32_t sn_handle;

/* ---- Mirrors of libibverbs' data-path structs (same layout) ---- */

/* struct ibv_sge */
struct sn_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/*
 * struct ibv_send_wr, with its unions spelled as the fields that overlay
 * them (little-endian: a 32-bit member in a 64-bit slot is its low half).
 */
struct sn_send_wr {
	uint64_t wr_id;
	struct sn_send_wr *next;
	struct sn_sge *sg_list;
	int32_t num_sge;
	uint32_t opcode;
	uint32_t send_flags;
	uint32_t imm;         /* imm_data (network order) | invalidate_rkey */
	uint64_t w0;          /* wr.rdma.remote_addr | wr.atomic.remote_addr | wr.ud.ah */
	uint64_t w1;          /* wr.rdma.rkey (low) | wr.atomic.compare_add |
	                         wr.ud.remote_qpn (low), wr.ud.remote_qkey (high) */
	uint64_t w2;          /* wr.atomic.swap */
	uint64_t w3;          /* wr.atomic.rkey (low) */
	uint32_t remote_srqn; /* qp_type.xrc.remote_srqn */
	uint32_t pad0;
	uint64_t b0;          /* bind_mw.mw | tso.hdr */
	uint64_t b1;          /* bind_mw.rkey (low) | tso.hdr_sz (bits 0-15), tso.mss (16-31) */
	uint64_t b2;          /* bind_mw.bind_info.mr */
	uint64_t b3;          /* bind_mw.bind_info.addr */
	uint64_t b4;          /* bind_mw.bind_info.length */
	uint32_t b5;          /* bind_mw.bind_info.mw_access_flags */
	uint32_t pad1;
};

/* struct ibv_recv_wr */
struct sn_recv_wr {
	uint64_t wr_id;
	struct sn_recv_wr *next;
	struct sn_sge *sg_list;
	int32_t num_sge;
	uint32_t pad;
};

/* struct ibv_ops_wr (tag matching) */
struct sn_ops_wr {
	uint64_t wr_id;
	struct sn_ops_wr *next;
	uint32_t opcode;
	int32_t flags;
	uint32_t unexpected_cnt;
	uint32_t handle;
	uint64_t recv_wr_id;
	struct sn_sge *sg_list;
	int32_t num_sge;
	uint32_t pad;
	uint64_t tag;
	uint64_t mask;
};

/* struct ibv_wc */
struct sn_wc {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm;         /* imm_data (network order) | invalidated_rkey */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t pad[2];
};

/* A completion with what ibv_cq_ex reads beyond struct ibv_wc: the
 * tag-matching info and the completion's time (ns of the device's clock,
 * which ibv_wc_read_completion_ts and _wallclock_ns both read). */
struct sn_wc_ex {
	struct sn_wc wc;
	uint64_t tm_tag;
	uint32_t tm_priv;
	uint32_t pad;
	uint64_t ts;
};

/*
 * The start of the C objects a work request points to, where the engine
 * reads the handle it gave them: struct ibv_ah (wr.ud.ah), ibv_mw
 * (bind_mw.mw) and ibv_mr (bind_info.mr).
 */
struct sn_ah_head {
	void *context;
	void *pd;
	uint32_t handle;
};
struct sn_mw_head {
	void *context;
	void *pd;
	uint32_t rkey;
	uint32_t handle;
};
struct sn_mr_head {
	void *context;
	void *pd;
	void *addr;
	uint64_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

/* ---- Slow-path values, converted from libibverbs' structs in C ---- */

/* What a context learns of its device when it opens. */
struct sn_dev_info {
	uint8_t gid[16];      /* the device's address as a RoCEv2 GID */
	uint32_t ifindex;     /* the network interface holding it, or 0 */
	int32_t link_fd;      /* the link's UDP socket with SOFTNIC_POLL_WAIT, for poll(2) only; or -1 */
};

/* struct ibv_device_attr with the ex fields softnic reports. */
struct sn_device_attr {
	char fw_ver[64];
	uint64_t node_guid;
	uint64_t sys_image_guid;
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint64_t device_cap_flags; /* all 64 bits (device_cap_flags_ex) */
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int32_t max_qp;
	int32_t max_qp_wr;
	int32_t max_sge;
	int32_t max_sge_rd;
	int32_t max_cq;
	int32_t max_cqe;
	int32_t max_mr;
	int32_t max_pd;
	int32_t max_qp_rd_atom;
	int32_t max_ee_rd_atom;
	int32_t max_res_rd_atom;
	int32_t max_qp_init_rd_atom;
	int32_t max_ee_init_rd_atom;
	int32_t atomic_cap;
	int32_t max_mw;
	int32_t max_ah;
	int32_t max_fmr;
	int32_t max_srq;
	int32_t max_srq_wr;
	int32_t max_srq_sge;
	int32_t max_pkeys;
	int32_t max_mcast_grp;
	int32_t max_mcast_qp_attach;
	int32_t max_total_mcast_qp_attach;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
	uint16_t pad;
	/* tm_caps */
	uint32_t tm_max_rndv_hdr_size;
	uint32_t tm_max_num_tags;
	uint32_t tm_flags;
	uint32_t tm_max_ops;
	uint32_t tm_max_sge;
	/* tso_caps */
	uint32_t max_tso;
	uint32_t tso_supported_qpts;
	/* odp_caps and xrc_odp_caps */
	uint32_t odp_rc_caps;
	uint64_t odp_general_caps;
	uint32_t odp_uc_caps;
	uint32_t odp_ud_caps;
	uint32_t odp_xrc_caps;
	uint32_t max_wq_type_rq;
	/* the completion clock */
	uint64_t completion_timestamp_mask;
	uint64_t hca_core_clock;
	/* cq_mod_caps */
	uint16_t max_cq_count;
	uint16_t max_cq_period;
	uint32_t pad2;
};

/* struct ibv_port_attr, as far as softnic fills it. */
struct sn_port_attr {
	uint32_t state;
	uint32_t max_mtu;
	uint32_t active_mtu;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
};

/* struct ibv_ah_attr with its ibv_global_route; dgid as the engine's GID
 * (the C library maps GID table indexes and link-local GIDs first). */
struct sn_ah_attr {
	uint8_t dgid[16];
	uint32_t flow_label;
	uint16_t dlid;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
	uint8_t pad[2];
};

/* struct ibv_qp_cap */
struct sn_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

/* struct ibv_qp_attr */
struct sn_qp_attr {
	uint32_t qp_state;
	uint32_t cur_qp_state;
	uint32_t path_mtu;
	uint32_t path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	uint32_t rate_limit;
	struct sn_qp_cap cap;
	struct sn_ah_attr ah_attr;
	struct sn_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint8_t pad;
};

/* struct ibv_qp_init_attr_ex, with objects as handles. */
struct sn_qp_init {
	uint64_t cookie;         /* the struct ibv_qp *, returned with its events */
	uint64_t send_ops_flags;
	uint32_t qp_type;
	sn_handle pd;
	sn_handle send_cq;
	sn_handle recv_cq;
	sn_handle srq;
	sn_handle wq;            /* the one WQ of rwq_ind_tbl */
	sn_handle xrcd;
	uint32_t sq_sig_all;
	uint32_t max_tso_header;
	uint32_t pad;
	struct sn_qp_cap cap;
};

/* struct ibv_cq_init_attr_ex, with objects as handles. */
struct sn_cq_init {
	uint64_t cookie;         /* the struct ibv_cq * */
	uint64_t wc_flags;       /* 0 for a CQ of ibv_create_cq */
	int32_t cqe;
	sn_handle channel;
	uint32_t comp_vector;
	uint32_t flags;
	sn_handle parent_domain;
	uint32_t pad;
};

/* struct ibv_srq_init_attr_ex, with objects as handles. */
struct sn_srq_init {
	uint64_t cookie;         /* the struct ibv_srq * */
	sn_handle pd;
	sn_handle cq;
	sn_handle xrcd;
	uint32_t srq_type;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
	uint32_t max_num_tags;
	uint32_t max_ops;
	uint32_t pad;
};

/* struct ibv_srq_attr */
struct sn_srq_attr {
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t srq_limit;
};

/* struct ibv_wq_init_attr, with objects as handles. */
struct sn_wq_init {
	uint64_t cookie;         /* the struct ibv_wq * */
	sn_handle pd;
	sn_handle cq;
	uint32_t wq_type;
	uint32_t max_wr;
	uint32_t max_sge;
	uint32_t create_flags;
};

/* struct ibv_wq_attr */
struct sn_wq_attr {
	uint32_t attr_mask;
	uint32_t wq_state;
	uint32_t curr_wq_state;
	uint32_t flags;
	uint32_t flags_mask;
};

/* A type-1 bind (struct ibv_mw_bind), the MR as a handle. */
struct sn_mw_bind {
	uint64_t wr_id;
	uint64_t addr;
	uint64_t length;
	uint32_t send_flags;
	sn_handle mr;
	uint32_t access;
	uint32_t pad;
};

/* struct ibv_async_event: the object as the cookie its creator gave. */
struct sn_async_event {
	uint64_t cookie;
	uint32_t event_type;
	uint32_t port_num;
};

/* ---- The engine's functions ---- */

int sne_abi_version(void);

/* Contexts: each ibv_open_device opens one on the process's NIC named name,
 * which the first opens (from the SOFTNIC_* environment) and the last close
 * closes. async_fd is the context's async event fd: an eventfd the engine
 * adds one to for each event it queues for the context. */
int sne_ctx_open(char *name, int async_fd, sn_handle *ctx, struct sn_dev_info *info);
int sne_ctx_close(sn_handle ctx);
int sne_query_device(sn_handle ctx, struct sn_device_attr *attr);
int sne_query_port(sn_handle ctx, uint8_t port, struct sn_port_attr *attr);
int sne_get_async_event(sn_handle ctx, struct sn_async_event *ev);

int sne_alloc_pd(sn_handle ctx, sn_handle *pd);
/* sne_dealloc_pd deallocates a PD or a parent domain. */
int sne_dealloc_pd(sn_handle pd);
int sne_alloc_td(sn_handle ctx, sn_handle *td);
int sne_dealloc_td(sn_handle td);
/* A parent domain is a PD (its handle is one), td 0 for none. */
int sne_alloc_parent_domain(sn_handle ctx, sn_handle pd, sn_handle td, sn_handle *h);

/* The device's P_Key table (host order) and its clock now (ns). */
int sne_query_pkey(sn_handle ctx, uint8_t port, int32_t index, uint16_t *pkey);
int sne_query_rt_values(sn_handle ctx, uint64_t *ns);

int sne_reg_mr(sn_handle pd, void *addr, uint64_t length, uint64_t iova,
	      uint32_t access, sn_handle *mr, uint32_t *lkey);
int sne_dereg_mr(sn_handle mr);
/* ibv_rereg_mr: flags say which of pd, the memory (addr, length) and
 * access change; the keys stay. */
int sne_rereg_mr(sn_handle mr, uint32_t flags, sn_handle pd, void *addr, uint64_t length,
		 uint32_t access);
int sne_advise_mr(sn_handle pd, uint32_t advice, uint32_t flags, struct sn_sge *sg,
		  uint32_t n);

int sne_alloc_mw(sn_handle pd, uint32_t type, sn_handle *mw, uint32_t *rkey);
int sne_dealloc_mw(sn_handle mw);
int sne_bind_mw(sn_handle qp, sn_handle mw, struct sn_mw_bind *bind,
	       uint32_t *rkey);

/* Completion channels: efd is the channel's fd, an eventfd in semaphore
 * mode the engine adds one to for each event it queues; sn_get_cq_event
 * takes the oldest with sne_get_cq_event (EAGAIN when a destroyed CQ's event was dropped). */
int sne_create_channel(sn_handle ctx, int efd, sn_handle *ch);
int sne_destroy_channel(sn_handle ch);
int sne_get_cq_event(sn_handle ch, uint64_t *cookie);

/* An extended CQ (wc_flags set) is read with its timestamps. */
int sne_create_cq(sn_handle ctx, struct sn_cq_init *init, sn_handle *cq, int32_t *cap);
int sne_destroy_cq(sn_handle cq);
int sne_resize_cq(sn_handle cq, int32_t cqe, int32_t *cap);
/* sne_poll_cq writes up to n completions, stride bytes apart, and returns
 * how many (never an error): struct sn_wc, or struct sn_wc_ex when stride
 * is its size. */
int sne_poll_cq(sn_handle cq, int32_t n, void *wc, int32_t stride);
int sne_req_notify_cq(sn_handle cq, int32_t solicited_only);
/* ibv_modify_cq: mask is attr_mask (IBV_CQ_ATTR_MODERATE). */
int sne_modify_cq(sn_handle cq, uint32_t mask, uint16_t count, uint16_t period);

int sne_create_qp(sn_handle ctx, struct sn_qp_init *init, sn_handle *qp,
		 uint32_t *qpn, struct sn_qp_cap *cap);
int sne_open_qp(sn_handle xrcd, uint32_t qpn, uint64_t cookie, sn_handle *qp);
int sne_modify_qp(sn_handle qp, struct sn_qp_attr *attr, uint32_t mask);
int sne_query_qp(sn_handle qp, struct sn_qp_attr *attr, struct sn_qp_init *init);
int sne_destroy_qp(sn_handle qp);
/* The posts stop at the first work request they refuse and point *bad at
 * it. sne_post_send_all posts every one of n work requests (an array, next
 * ignored) or none: ibv_wr_complete. Its ATOMIC_WRITEs carry their 8
 * bytes in b0; inline data and TSO headers are the C library's copies. */
int sne_post_send(sn_handle qp, struct sn_send_wr *wr, struct sn_send_wr **bad);
int sne_post_send_all(sn_handle qp, struct sn_send_wr *wr, int32_t n);
int sne_post_recv(sn_handle qp, struct sn_recv_wr *wr, struct sn_recv_wr **bad);

/* A QP's receive stage (verbs.RecvStage): ibv_post_recv writes a receive
 * of up to SN_STAGE_SGE SGEs here instead of calling the engine, which
 * pulls the staged receives when its queue needs one. lock is 0 or 1,
 * taken by either side with an atomic exchange and held only to copy.
 * Under it: open (the library may stage; the engine closes the stage when
 * it flushes or resets the queue, and reopens it), head and tail (ent is
 * a ring of cap entries, cap the queue's max_recv_wr; a receive of more
 * SGEs than max_sge, the queue's max_recv_sge, goes to the engine, which
 * refuses it) and posted, the
 * receives ever posted to the queue, staged or through the engine. removed
 * counts those that left it (taken, flushed, discarded), atomically,
 * without the lock: posted - removed is what the queue holds, so the
 * library refuses the post that would exceed cap with ENOMEM as the
 * engine does. */
#define SN_STAGE_SGE 2
struct sn_stage_ent {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct sn_sge sge[SN_STAGE_SGE];
};
struct sn_rstage {
	uint32_t lock;
	uint32_t open;
	uint32_t cap;
	uint32_t max_sge;
	uint64_t posted;
	uint64_t removed;
	uint64_t head;
	uint64_t tail;
	struct sn_stage_ent ent[];
};
/* sne_qp_stage attaches st (cap and max_sge set) to the QP's own receive
 * queue: EINVAL for a QP without one, or a cap or max_sge that is not the
 * queue's. The stage must
 * live until sne_destroy_qp succeeds. */
int sne_qp_stage(sn_handle qp, struct sn_rstage *st);
int sne_attach_mcast(sn_handle qp, uint8_t *gid);
int sne_detach_mcast(sn_handle qp, uint8_t *gid);

int sne_create_ah(sn_handle pd, struct sn_ah_attr *attr, sn_handle *ah);
int sne_destroy_ah(sn_handle ah);

int sne_create_srq(sn_handle ctx, struct sn_srq_init *init, sn_handle *srq,
		  struct sn_srq_attr *attr, uint32_t *srq_num);
int sne_modify_srq(sn_handle srq, struct sn_srq_attr *attr, uint32_t mask);
int sne_query_srq(sn_handle srq, struct sn_srq_attr *attr);
int sne_destroy_srq(sn_handle srq);
int sne_post_srq_recv(sn_handle srq, struct sn_recv_wr *wr,
		     struct sn_recv_wr **bad);
int sne_post_srq_ops(sn_handle srq, struct sn_ops_wr *op, struct sn_ops_wr **bad);

/* key names the domain: every XRCD of one key in the process is one domain;
 * the empty key (an ibv_open_xrcd without a file) opens a domain of its own. */
int sne_open_xrcd(sn_handle ctx, char *key, sn_handle *xrcd);
int sne_close_xrcd(sn_handle xrcd);

int sne_create_wq(sn_handle ctx, struct sn_wq_init *init, sn_handle *wq,
		 uint32_t *wq_num, uint32_t *max_wr, uint32_t *max_sge);
int sne_modify_wq(sn_handle wq, struct sn_wq_attr *attr, uint32_t *state);
int sne_destroy_wq(sn_handle wq);
int sne_post_wq_recv(sn_handle wq, struct sn_recv_wr *wr,
		    struct sn_recv_wr **bad);

/* Every function above, for the C library's table of them (dlsym). */
#define SN_ENGINE_FUNCS(X)                                                     \
	X(abi_version) X(ctx_open) X(ctx_close) X(query_device) X(query_port)  \
	X(get_async_event) X(alloc_pd) X(dealloc_pd) X(reg_mr) X(dereg_mr)     \
	X(alloc_mw) X(dealloc_mw) X(bind_mw) X(create_channel)                 \
	X(destroy_channel) X(get_cq_event) X(create_cq) X(destroy_cq)          \
	X(resize_cq) X(poll_cq) X(req_notify_cq) X(create_qp) X(open_qp)       \
	X(modify_qp) X(query_qp) X(destroy_qp) X(post_send) X(post_send_all)   \
	X(post_recv) X(qp_stage) X(attach_mcast) X(detach_mcast) X(create_ah)              \
	X(destroy_ah) X(create_srq) X(modify_srq) X(query_srq) X(destroy_srq)  \
	X(post_srq_recv) X(post_srq_ops) X(open_xrcd) X(close_xrcd)            \
	X(create_wq) X(modify_wq) X(destroy_wq) X(post_wq_recv)

/* And those of the calls beyond the data path: CQ moderation, thread and
 * parent domains, the P_Key table, the device clock, MR re-registration
 * and advice. */
#define SN_ENGINE_FUNCS_EX(X)                                                  \
	X(alloc_td) X(dealloc_td) X(alloc_parent_domain) X(query_pkey)         \
	X(query_rt_values) X(rereg_mr) X(advise_mr) X(modify_cq)

/* ---- The RDMA connection manager (softnic's librdmacm.so.1) ---- */

/*
 * librdmacm (clib/librdmacm) is to these functions what rdma-core's
 * librdmacm is to the kernel's rdma_cm (ucma.c): the engine keeps the
 * connection manager (package verbs/cm, over the process's NIC) and its
 * IDs and channels, the C library the structs a program sees and every
 * verbs object (a cm_id's QP, PD and CQs are libibverbs objects the C
 * library makes and moves through its states with the attributes
 * sne_cm_init_qp_attr gives, as librdmacm does). The C library finds
 * these functions through libibverbs' softnic_engine_sym.
 */

/* A socket address: AF_INET (the address in addr[0..3]) or AF_INET6;
 * family 0 is none. The port is in host order. */
struct sn_addr {
	uint16_t family;
	uint16_t port;
	uint32_t scope_id;
	uint8_t addr[16];
};

/* What librdmacm's ucma_query_route learns of an ID. */
struct sn_cm_route {
	struct sn_addr src;
	struct sn_addr dst;
	uint8_t sgid[16];         /* the addresses as RoCEv2 GIDs */
	uint8_t dgid[16];
	uint8_t bound;            /* bound to the device (cm_id.verbs) */
	uint8_t resolved;         /* the path below is the route's */
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
	uint8_t mtu;              /* enum ibv_mtu */
	uint8_t packet_life_time;
	uint8_t pad;
	uint16_t pkey;
	uint16_t pad2;
	uint32_t flow_label;
};

/* struct rdma_conn_param as the C library hands it over, its private data
 * (private_data_len bytes) read while the call lasts. */
struct sn_conn_param {
	const void *private_data;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t pad;
	uint32_t qp_num;
	uint32_t pad2;
};

/* The longest private data an event carries (RDMA_MAX_PRIVATE_DATA). */
#define SN_CM_MAX_PRIVATE_DATA 256

/* An event (struct ucma_abi_event_resp): for the C id whose cookie it
 * names, both the connected and the datagram parameters (the C library
 * keeps those of the ID's QP type). */
struct sn_cm_event {
	uint64_t cookie;          /* the C id (for CONNECT_REQUEST: the listener's) */
	uint64_t mc_cookie;       /* MULTICAST_JOIN and _ERROR: the join's */
	sn_handle id;             /* CONNECT_REQUEST: the new ID, its cookie new_cookie */
	uint32_t event;           /* enum rdma_cm_event_type */
	int32_t status;
	uint32_t qp_num;
	uint32_t qkey;
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t pad;
	struct sn_ah_attr ah_attr;
	uint8_t private_data[SN_CM_MAX_PRIVATE_DATA];
};

/* sne_cm_prefer_addr names the address the NIC opens at when the next
 * ibv_open_device opens it and SOFTNIC_ADDR is unset (a program that binds
 * 127.0.0.20 gets its NIC there); family 0 forgets it. */
int sne_cm_prefer_addr(struct sn_addr *addr);
/* sne_cm_open starts the process's CM over its NIC, which a context must
 * hold open; it holds the NIC open itself until sne_cm_close. */
int sne_cm_open(void);
int sne_cm_close(void);

/* Event channels: efd is the channel's fd, an eventfd the engine keeps
 * readable exactly while an event waits (ucma_poll). */
int sne_cm_create_channel(int efd, sn_handle *ch);
int sne_cm_destroy_channel(sn_handle ch);
/* sne_cm_get_event takes the channel's next event, EAGAIN when none waits;
 * a CONNECT_REQUEST's new ID takes new_cookie. */
int sne_cm_get_event(sn_handle ch, uint64_t new_cookie, struct sn_cm_event *ev);

int sne_cm_create_id(sn_handle ch, uint64_t cookie, uint32_t ps, uint32_t qp_type, sn_handle *id);
/* The destroy, leave and migrate functions return in *reported how many
 * events of the ID (of the join) the channel has handed out, which
 * librdmacm waits to see acknowledged. */
int sne_cm_destroy_id(sn_handle id, int32_t *reported);
int sne_cm_migrate_id(sn_handle id, sn_handle ch, int32_t *reported);
int sne_cm_bind(sn_handle id, struct sn_addr *addr);
int sne_cm_resolve_addr(sn_handle id, struct sn_addr *src, struct sn_addr *dst, int32_t timeout_ms);
int sne_cm_resolve_route(sn_handle id, int32_t timeout_ms);
int sne_cm_query_route(sn_handle id, struct sn_cm_route *route);
int sne_cm_init_qp_attr(sn_handle id, uint32_t state, struct sn_qp_attr *attr, uint32_t *mask);
int sne_cm_connect(sn_handle id, struct sn_conn_param *param);
int sne_cm_listen(sn_handle id, int32_t backlog);
/* sne_cm_accept answers a request; on an active ID (param NULL) it sends
 * the RTU of a connection whose REP came (librdmacm's ACCEPT command). */
int sne_cm_accept(sn_handle id, struct sn_conn_param *param);
int sne_cm_reject(sn_handle id, void *private_data, uint8_t len, uint8_t reason);
int sne_cm_notify(sn_handle id, uint32_t event);
int sne_cm_disconnect(sn_handle id);
int sne_cm_join(sn_handle id, struct sn_addr *addr, uint64_t mc_cookie, uint32_t join_flags);
int sne_cm_leave(sn_handle id, struct sn_addr *addr, int32_t *reported);
int sne_cm_set_option(sn_handle id, int32_t level, int32_t name, void *val, uint64_t len);

/*
 * The messages to send for the process once it is dead: the kernel's
 * rdma_cm answers for a process that dies (closing its file destroys its
 * IDs: a connection's DREQ goes to the peer), softnic's, which dies with
 * the process, leaves them in this table, shared memory that a watcher
 * process (clib/librdmacm/reaper.c) reads and sends when the process is
 * gone. The engine writes each slot (a complete RoCEv2 UDP payload: BTH,
 * DETH, the MAD, ICRC, for the NIC's port and address) while the
 * connection it would end is established; state goes SN_ORPHAN_READY
 * last, and back to SN_ORPHAN_FREE first.
 */
#define SN_ORPHAN_MAGIC 0x736e6f31 /* "sno1" */
#define SN_ORPHAN_SLOTS 1024
#define SN_ORPHAN_PKT 288
enum { SN_ORPHAN_FREE, SN_ORPHAN_READY };

struct sn_orphan {
	uint32_t state;
	uint16_t len;
	uint16_t pad;
	struct sn_addr dst;       /* the peer's address and UDP port */
	uint8_t pkt[SN_ORPHAN_PKT];
};

struct sn_orphans {
	uint32_t magic;
	uint32_t closed;          /* the process closed its CM: nothing to send */
	struct sn_addr src;       /* the NIC's address and UDP port */
	struct sn_orphan slot[SN_ORPHAN_SLOTS];
};

/* sne_cm_orphans has the CM keep its connections' orphan messages in t
 * (NULL: no more). */
int sne_cm_orphans(struct sn_orphans *t);

/* Every CM function, for librdmacm's table of them. */
#define SN_CM_FUNCS(X)                                                         \
	X(prefer_addr) X(open) X(close) X(create_channel) X(destroy_channel)   \
	X(get_event) X(create_id) X(destroy_id) X(migrate_id) X(bind)          \
	X(resolve_addr) X(resolve_route) X(query_route) X(init_qp_attr)        \
	X(connect) X(listen) X(accept) X(reject) X(notify) X(disconnect)       \
	X(join) X(leave) X(set_option) X(orphans)

#endif /* SOFTNIC_ENGINE_H */
