/*
 * softnic.h - softnic's libibverbs.so.1: the library's own structs and the
 * functions its files share.
 *
 * The library is built against the system's <infiniband/verbs.h>, so every
 * struct a program reads (ibv_context, ibv_qp, ibv_wc, ...) has the layout
 * the program was compiled with; abi.c checks the mirrors in
 * softnic_engine.h against them. Each object a program holds is a struct
 * of libibverbs with softnic's fields after it; the engine's handle for it
 * is in the struct's own `handle' field where libibverbs has one (the
 * engine reads it there from the work requests that point to it).
 */
#ifndef SOFTNIC_H
#define SOFTNIC_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "softnic_engine.h"
#include "softnic_verbs.h"

#define SN_EXPORT __attribute__((visibility("default")))

/* ---- The engine (engine.c) ---- */

/* The engine's functions, looked up once the engine is loaded. */
struct sn_engine {
#define SN_ENGINE_FIELD(name) __typeof__(sne_##name) *name;
	SN_ENGINE_FUNCS(SN_ENGINE_FIELD)
	SN_ENGINE_FUNCS_EX(SN_ENGINE_FIELD)
#undef SN_ENGINE_FIELD
};

/*
 * sn_engine_load loads the engine on first use and returns its functions,
 * or NULL with errno set: ENODEV in a child forked after the engine
 * started (a Go runtime does not survive fork), ENOENT when the library
 * cannot be found or loaded.
 */
const struct sn_engine *sn_engine_load(void);

/* sn_thread_altstack gives the calling thread an alternate signal stack
 * of softnic's when it has none: Go would give it a smaller one. */
void sn_thread_altstack(void);

/* The engine of an object made through an open context: loaded. */
extern const struct sn_engine *sn_e;

/* sn_forked reports whether this process is a child forked after the
 * engine started: every call that needs the engine then fails. */
bool sn_forked(void);

/* ---- The device and its contexts (device.c) ---- */

/*
 * The device, laid out as rdma-core's struct verbs_device starts: the
 * ibv_device, then the provider ops pointer, which is NULL here, so a
 * provider library (libmlx5, libefa) asking whether a device is its own
 * finds that it is not.
 */
struct sn_device {
	struct ibv_device dev;
	const void *ops;
	__be64 guid;
};

/* The GID table: GID[0] the link-local GID, GID[1] the address. */
enum { SN_GID_LINK_LOCAL, SN_GID_ADDR, SN_GIDS };
_Static_assert(SN_GID_ADDR == SN_GID_ADDR_INDEX, "the address GID's index, as softnic_verbs.h names it");

/* rxe's GID table length (RXE_PORT_GID_TBL_LEN). */
#define SN_GID_TBL_LEN 1024

struct sn_context {
	struct verbs_context vctx; /* ends with the struct ibv_context */
	sn_handle h;
	union ibv_gid gid[SN_GIDS];
	uint32_t ifindex; /* the network interface holding the address, or 0 */
	int link_fd;      /* the link's UDP socket (cq.c: idle), or -1 */
};

static inline struct sn_context *to_sctx(struct ibv_context *c)
{
	return (struct sn_context *)((uint8_t *)c - offsetof(struct sn_context, vctx.context));
}

/* sn_gid_to_engine maps an address vector's GIDs to the engine's: the
 * source GID index must name a GID of the table, and a destination that is
 * a softnic link-local GID becomes the address it stands for. */
int sn_ah_to_engine(struct ibv_context *c, const struct ibv_ah_attr *in,
		    struct sn_ah_attr *out);

/* ---- Objects ---- */

/* A PD or a parent domain (the engine's handle is a PD's either way). */
struct sn_pd {
	struct ibv_pd pd; /* pd.handle: the engine's */
};

struct sn_td {
	struct ibv_td td;
	sn_handle h;
};

struct sn_mr {
	struct ibv_mr mr; /* mr.handle */
};

struct sn_channel {
	struct ibv_comp_channel ch;
	sn_handle h;
};

struct sn_cq {
	struct ibv_cq_ex cq; /* struct ibv_cq is its prefix; cq.handle */
	uint32_t comp_events_reported;  /* events ibv_get_cq_event returned */
	uint32_t async_events_reported; /* CQ_ERR events returned */
	uint64_t wc_flags;              /* an extended CQ's, or 0 */
	struct sn_wc_ex cur;            /* an extended CQ's current completion */
	int link_fd;                    /* the device's (cq.c: idle), or -1 */
	uint64_t idle_since;            /* ns (CLOCK_MONOTONIC) since the CQ polled empty, or 0 */
};

/* An ibv_wr_start batch: the work requests recorded, their scatter lists
 * and their inline data, in arrays that grow. */
struct sn_wr_batch {
	struct sn_send_wr *wr;
	int n, cap;
	struct {
		int sge, nsge; /* in sge */
		bool inline_;
	} *meta;
	int capmeta;
	struct sn_sge *sge;
	int nsge, capsge;
	uint8_t *data;
	size_t ndata, capdata;
	int err; /* the first error a builder or setter met */
};

struct sn_qp {
	struct ibv_qp_ex qpx; /* qp_base first; qpx.qp_base.handle */
	bool ex;              /* created with send_ops_flags: ibv_qp_to_qp_ex */
	uint32_t events_reported;
	/* An extended QP's send queue is held from ibv_wr_start to
	 * ibv_wr_complete or ibv_wr_abort, as a provider holds its send
	 * queue's lock (mlx5): posts from other threads wait for the batch;
	 * the thread holding it gets EBUSY (sn_post_held). */
	pthread_mutex_t post_mu;
	pthread_t owner;
	bool owned; /* atomic: owner holds post_mu for a batch */
	/* The address vectors last set, which ibv_query_qp returns as the
	 * program gave them (the engine knows them by its own GIDs). */
	struct ibv_ah_attr av, alt_av;
	bool have_av, have_alt_av;
	struct sn_wr_batch batch;
	struct sn_rstage *stage; /* NULL: every ibv_post_recv calls the engine */
};

struct sn_ah {
	struct ibv_ah ah; /* ah.handle */
};

struct sn_mw {
	struct ibv_mw mw; /* mw.handle */
};

struct sn_srq {
	struct ibv_srq srq; /* srq.handle */
	uint32_t srq_num;
	uint32_t events_reported;
};

struct sn_wq {
	struct ibv_wq wq; /* wq.handle */
	uint32_t events_reported;
};

struct sn_xrcd {
	struct ibv_xrcd xrcd;
	sn_handle h;
};

struct sn_ind_table {
	struct ibv_rwq_ind_table t;
	struct ibv_wq *wq; /* the one WQ it holds (every entry the same) */
};

/* ---- The device's operations (ops.c) ---- */

/*
 * One table of the device's operations, as rdma-core's providers fill
 * struct verbs_context_ops (driver.h, not installed): every entry point
 * of the device, the unsupported ones answering EOPNOTSUPP from one dummy.
 */
struct sn_ops {
	int (*advise_mr)(struct ibv_pd *, enum ibv_advise_mr_advice, uint32_t, struct ibv_sge *, uint32_t);
	struct ibv_dm *(*alloc_dm)(struct ibv_context *, struct ibv_alloc_dm_attr *);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *, enum ibv_mw_type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *);
	struct ibv_pd *(*alloc_parent_domain)(struct ibv_context *, struct ibv_parent_domain_init_attr *);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *);
	struct ibv_td *(*alloc_td)(struct ibv_context *, struct ibv_td_init_attr *);
	int (*attach_counters_point_flow)(struct ibv_counters *, struct ibv_counter_attach_attr *, struct ibv_flow *);
	int (*attach_mcast)(struct ibv_qp *, const union ibv_gid *, uint16_t);
	int (*bind_mw)(struct ibv_qp *, struct ibv_mw *, struct ibv_mw_bind *);
	int (*close_xrcd)(struct ibv_xrcd *);
	struct ibv_ah *(*create_ah)(struct ibv_pd *, struct ibv_ah_attr *);
	struct ibv_counters *(*create_counters)(struct ibv_context *, struct ibv_counters_init_attr *);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, struct ibv_comp_channel *, int);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *);
	struct ibv_flow *(*create_flow)(struct ibv_qp *, struct ibv_flow_attr *);
	struct ibv_flow_action *(*create_flow_action_esp)(struct ibv_context *, struct ibv_flow_action_esp_attr *);
	struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(struct ibv_context *, struct ibv_rwq_ind_table_init_attr *);
	struct ibv_srq *(*create_srq)(struct ibv_pd *, struct ibv_srq_init_attr *);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *, struct ibv_srq_init_attr_ex *);
	struct ibv_wq *(*create_wq)(struct ibv_context *, struct ibv_wq_init_attr *);
	int (*dealloc_mw)(struct ibv_mw *);
	int (*dealloc_pd)(struct ibv_pd *);
	int (*dealloc_td)(struct ibv_td *);
	int (*dereg_mr)(struct ibv_mr *);
	int (*destroy_ah)(struct ibv_ah *);
	int (*destroy_counters)(struct ibv_counters *);
	int (*destroy_cq)(struct ibv_cq *);
	int (*destroy_flow)(struct ibv_flow *);
	int (*destroy_flow_action)(struct ibv_flow_action *);
	int (*destroy_qp)(struct ibv_qp *);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *);
	int (*destroy_srq)(struct ibv_srq *);
	int (*destroy_wq)(struct ibv_wq *);
	int (*detach_mcast)(struct ibv_qp *, const union ibv_gid *, uint16_t);
	int (*free_dm)(struct ibv_dm *);
	int (*get_srq_num)(struct ibv_srq *, uint32_t *);
	struct ibv_dm *(*import_dm)(struct ibv_context *, uint32_t);
	struct ibv_mr *(*import_mr)(struct ibv_pd *, uint32_t);
	struct ibv_pd *(*import_pd)(struct ibv_context *, uint32_t);
	int (*modify_cq)(struct ibv_cq *, struct ibv_modify_cq_attr *);
	int (*modify_flow_action_esp)(struct ibv_flow_action *, struct ibv_flow_action_esp_attr *);
	int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
	int (*modify_qp_rate_limit)(struct ibv_qp *, struct ibv_qp_rate_limit_attr *);
	int (*modify_srq)(struct ibv_srq *, struct ibv_srq_attr *, int);
	int (*modify_wq)(struct ibv_wq *, struct ibv_wq_attr *);
	struct ibv_qp *(*open_qp)(struct ibv_context *, struct ibv_qp_open_attr *);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *, struct ibv_xrcd_init_attr *);
	int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
	int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
	int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
	int (*post_srq_ops)(struct ibv_srq *, struct ibv_ops_wr *, struct ibv_ops_wr **);
	int (*post_srq_recv)(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **);
	int (*query_device_ex)(struct ibv_context *, const struct ibv_query_device_ex_input *, struct ibv_device_attr_ex *, size_t);
	int (*query_ece)(struct ibv_qp *, struct ibv_ece *);
	int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t);
	int (*query_qp)(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
	int (*query_qp_data_in_order)(struct ibv_qp *, enum ibv_wr_opcode, uint32_t);
	int (*query_rt_values)(struct ibv_context *, struct ibv_values_ex *);
	int (*query_srq)(struct ibv_srq *, struct ibv_srq_attr *);
	int (*read_counters)(struct ibv_counters *, uint64_t *, uint32_t, uint32_t);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *, struct ibv_dm *, uint64_t, size_t, unsigned int);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, uint64_t, int);
	int (*req_notify_cq)(struct ibv_cq *, int);
	int (*rereg_mr)(struct ibv_mr *, int, struct ibv_pd *, void *, size_t, int);
	int (*resize_cq)(struct ibv_cq *, int);
	int (*set_ece)(struct ibv_qp *, struct ibv_ece *);
	void (*unimport_dm)(struct ibv_dm *);
	void (*unimport_mr)(struct ibv_mr *);
	void (*unimport_pd)(struct ibv_pd *);
};

extern const struct sn_ops sn_ops;

/* sn_set_ops fills a new context's ops from the table (verbs_set_ops). */
void sn_set_ops(struct verbs_context *vctx);

/* The table's entries, defined by device.c, mr.c, cq.c, qp.c, srq.c. */
int sn_query_device_ex(struct ibv_context *, const struct ibv_query_device_ex_input *,
		       struct ibv_device_attr_ex *, size_t);
int sn_query_port(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t);
struct ibv_pd *sn_alloc_pd(struct ibv_context *);
int sn_dealloc_pd(struct ibv_pd *);
struct ibv_td *sn_alloc_td(struct ibv_context *, struct ibv_td_init_attr *);
int sn_dealloc_td(struct ibv_td *);
struct ibv_pd *sn_alloc_parent_domain(struct ibv_context *, struct ibv_parent_domain_init_attr *);
int sn_query_rt_values(struct ibv_context *, struct ibv_values_ex *);
struct ibv_mr *sn_reg_mr(struct ibv_pd *, void *, size_t, uint64_t, int);
int sn_dereg_mr(struct ibv_mr *);
int sn_rereg_mr(struct ibv_mr *, int, struct ibv_pd *, void *, size_t, int);
int sn_advise_mr(struct ibv_pd *, enum ibv_advise_mr_advice, uint32_t, struct ibv_sge *, uint32_t);
struct ibv_mw *sn_alloc_mw(struct ibv_pd *, enum ibv_mw_type);
int sn_dealloc_mw(struct ibv_mw *);
int sn_bind_mw(struct ibv_qp *, struct ibv_mw *, struct ibv_mw_bind *);
struct ibv_cq *sn_create_cq(struct ibv_context *, int, struct ibv_comp_channel *, int);
struct ibv_cq_ex *sn_create_cq_ex(struct ibv_context *, struct ibv_cq_init_attr_ex *);
int sn_destroy_cq(struct ibv_cq *);
int sn_resize_cq(struct ibv_cq *, int);
int sn_poll_cq(struct ibv_cq *, int, struct ibv_wc *);
int sn_req_notify_cq(struct ibv_cq *, int);
int sn_modify_cq(struct ibv_cq *, struct ibv_modify_cq_attr *);
struct ibv_qp *sn_create_qp(struct ibv_pd *, struct ibv_qp_init_attr *);
struct ibv_qp *sn_create_qp_ex(struct ibv_context *, struct ibv_qp_init_attr_ex *);
struct ibv_qp *sn_open_qp(struct ibv_context *, struct ibv_qp_open_attr *);
int sn_modify_qp(struct ibv_qp *, struct ibv_qp_attr *, int);
int sn_query_qp(struct ibv_qp *, struct ibv_qp_attr *, int, struct ibv_qp_init_attr *);
int sn_destroy_qp(struct ibv_qp *);
int sn_post_send(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
int sn_post_recv(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
int sn_attach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t);
int sn_detach_mcast(struct ibv_qp *, const union ibv_gid *, uint16_t);
struct ibv_ah *sn_create_ah(struct ibv_pd *, struct ibv_ah_attr *);
int sn_destroy_ah(struct ibv_ah *);
struct ibv_srq *sn_create_srq(struct ibv_pd *, struct ibv_srq_init_attr *);
struct ibv_srq *sn_create_srq_ex(struct ibv_context *, struct ibv_srq_init_attr_ex *);
int sn_modify_srq(struct ibv_srq *, struct ibv_srq_attr *, int);
int sn_query_srq(struct ibv_srq *, struct ibv_srq_attr *);
int sn_destroy_srq(struct ibv_srq *);
int sn_post_srq_recv(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **);
int sn_post_srq_ops(struct ibv_srq *, struct ibv_ops_wr *, struct ibv_ops_wr **);
int sn_get_srq_num(struct ibv_srq *, uint32_t *);
struct ibv_xrcd *sn_open_xrcd(struct ibv_context *, struct ibv_xrcd_init_attr *);
int sn_close_xrcd(struct ibv_xrcd *);
struct ibv_wq *sn_create_wq(struct ibv_context *, struct ibv_wq_init_attr *);
int sn_modify_wq(struct ibv_wq *, struct ibv_wq_attr *);
int sn_destroy_wq(struct ibv_wq *);
struct ibv_rwq_ind_table *sn_create_rwq_ind_table(struct ibv_context *, struct ibv_rwq_ind_table_init_attr *);
int sn_destroy_rwq_ind_table(struct ibv_rwq_ind_table *);

/* sn_init_cq fills in what libibverbs fills in a new CQ (verbs_init_cq). */
void sn_init_cq(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
		void *cq_context);

/* sn_qp_ex_init points a QP's wr_* at softnic's batch builders (qpex.c). */
void sn_qp_ex_init(struct sn_qp *qp);
void sn_qp_ex_free(struct sn_qp *qp);

/* sn_post_held reports whether the calling thread holds qp's batch:
 * it may not post beside it (EBUSY). */
static inline bool sn_post_held(struct sn_qp *qp)
{
	return __atomic_load_n(&qp->owned, __ATOMIC_ACQUIRE) && pthread_equal(qp->owner, pthread_self());
}

/* sn_wait_events waits until the program has acknowledged every event it
 * was given about an object (ibv_destroy_* wait so, as libibverbs does). */
void sn_wait_events(pthread_mutex_t *mu, pthread_cond_t *cond,
		    const uint32_t *completed, const uint32_t *reported);

/* sn_debug prints to stderr when SOFTNIC_DEBUG=1. */
void sn_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* sn_errno sets errno to err and returns err (an engine call's result). */
static inline int sn_errno(int err)
{
	if (err)
		errno = err;
	return err;
}

#endif /* SOFTNIC_H */
