/*
 * device.c - the device list, contexts, the device's and port's attributes,
 * the GID table and asynchronous events.
 *
 * softnic has one device per process, a NIC bound to one IP address
 * ($SOFTNIC_ADDR, else the first free loopback address), named
 * $SOFTNIC_DEV or softnic0. It is listed without starting the engine;
 * the first ibv_open_device starts it and brings the NIC up, and every
 * context of the process shares that NIC. Its GID table is shaped as
 * rxe's on an IPv4 netdev: GID[0] a link-local GID, GID[1] the address,
 * both RoCE v2, 1024 entries in all, so GID indexes are passed as to rxe
 * (-g 1 / -x 1 for the IPv4 address).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "softnic.h"

static struct sn_device device;
static pthread_mutex_t device_mu = PTHREAD_MUTEX_INITIALIZER;
static int open_contexts; /* guarded by device_mu */

/*
 * guid_of returns the node GUID of a device at the RoCE GID gid, as the
 * engine makes it (nic.nodeGUID): 02:00 and the GID's last six bytes, so
 * an IPv4 address a.b.c.d gives 0200:ffff:aabb:ccdd.
 */
static __be64 guid_of(const uint8_t gid[16])
{
	uint8_t g[8] = { 0x02, 0x00 };

	memcpy(g + 2, gid + 10, 6);
	return *(__be64 *)g;
}

/* link_local_gid is GID[0]: fe80::/64 with the node GUID as interface ID,
 * as rxe's default GID is fe80:: and the interface ID its node GUID is made
 * from (the MAC's EUI-64). */
static void link_local_gid(union ibv_gid *ll, const union ibv_gid *addr)
{
	memset(ll, 0, sizeof(*ll));
	ll->raw[0] = 0xfe;
	ll->raw[1] = 0x80;
	*(__be64 *)(ll->raw + 8) = guid_of(addr->raw);
}

static void fill_device(void)
{
	const char *name = getenv("SOFTNIC_DEV");
	const char *addr = getenv("SOFTNIC_ADDR");
	uint8_t gid[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
	struct in_addr a4;
	struct in6_addr a6;

	if (!name || !*name)
		name = "softnic0";
	memset(&device.dev, 0, sizeof(device.dev));
	device.dev.node_type = IBV_NODE_CA;
	device.dev.transport_type = IBV_TRANSPORT_IB;
	snprintf(device.dev.name, sizeof(device.dev.name), "%s", name);
	snprintf(device.dev.dev_name, sizeof(device.dev.dev_name), "uverbs0");
	snprintf(device.dev.dev_path, sizeof(device.dev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs0");
	snprintf(device.dev.ibdev_path, sizeof(device.dev.ibdev_path),
		 "/sys/class/infiniband/%s", name);
	/* The GUID of the address the NIC will take; updated when it opens. */
	if (addr && inet_pton(AF_INET, addr, &a4) == 1)
		memcpy(gid + 12, &a4, 4);
	else if (addr && inet_pton(AF_INET6, addr, &a6) == 1)
		memcpy(gid, &a6, 16);
	device.guid = guid_of(gid);
}

SN_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));

	if (num)
		*num = 0;
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&device_mu);
	if (!open_contexts)
		fill_device();
	pthread_mutex_unlock(&device_mu);
	l[0] = &device.dev;
	if (num)
		*num = 1;
	return l;
}

SN_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SN_EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev->name;
}

SN_EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	return ((struct sn_device *)dev)->guid;
}

SN_EXPORT int ibv_get_device_index(struct ibv_device *dev)
{
	(void)dev;
	return 0;
}

SN_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	const struct sn_engine *e;
	struct sn_context *c;
	struct sn_dev_info info;
	struct ibv_context *ctx;
	int err;

	/* Before the engine loads: Go keeps a stack a thread has. */
	sn_thread_altstack();
	e = sn_engine_load();
	if (!e)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	ctx = &c->vctx.context;
	ctx->device = dev;
	/* There is no uverbs device; cmd_fd is a descriptor of its own all
	 * the same, for programs that dup or pass it (ibv_import_device
	 * answers EOPNOTSUPP). */
	ctx->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ctx->async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ctx->cmd_fd < 0 || ctx->async_fd < 0) {
		err = errno;
		goto fail;
	}
	err = e->ctx_open(dev->name, ctx->async_fd, &c->h, &info);
	if (err)
		goto fail;
	ctx->num_comp_vectors = 1;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vctx.sz = sizeof(c->vctx);
	sn_set_ops(&c->vctx);
	memcpy(c->gid[SN_GID_ADDR].raw, info.gid, 16);
	c->ifindex = info.ifindex;
	c->link_fd = info.link_fd;
	link_local_gid(&c->gid[SN_GID_LINK_LOCAL], &c->gid[SN_GID_ADDR]);
	pthread_mutex_lock(&device_mu);
	open_contexts++;
	((struct sn_device *)dev)->guid = guid_of(info.gid);
	pthread_mutex_unlock(&device_mu);
	return ctx;

fail:
	if (ctx->cmd_fd >= 0)
		close(ctx->cmd_fd);
	if (ctx->async_fd >= 0)
		close(ctx->async_fd);
	free(c);
	errno = err;
	return NULL;
}

SN_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sn_context *c = to_sctx(ctx);

	sn_e->ctx_close(c->h);
	close(ctx->async_fd);
	close(ctx->cmd_fd);
	pthread_mutex_lock(&device_mu);
	open_contexts--;
	pthread_mutex_unlock(&device_mu);
	free(c);
	return 0;
}

/* ---- Attributes ---- */

int sn_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
		       struct ibv_device_attr_ex *out, size_t size)
{
	struct sn_device_attr a;
	struct ibv_device_attr_ex x;
	struct ibv_device_attr *o = &x.orig_attr;
	int err;

	if (input && input->comp_mask)
		return EINVAL;
	if (size < sizeof(*o))
		return EINVAL;
	err = sn_e->query_device(to_sctx(ctx)->h, &a);
	if (err)
		return err;
	memset(&x, 0, sizeof(x));
	memcpy(o->fw_ver, a.fw_ver, sizeof(o->fw_ver));
	o->fw_ver[sizeof(o->fw_ver) - 1] = 0;
	o->node_guid = htobe64(a.node_guid);
	o->sys_image_guid = htobe64(a.sys_image_guid);
	o->max_mr_size = a.max_mr_size;
	o->page_size_cap = a.page_size_cap;
	o->vendor_id = a.vendor_id;
	o->vendor_part_id = a.vendor_part_id;
	o->hw_ver = a.hw_ver;
	o->max_qp = a.max_qp;
	o->max_qp_wr = a.max_qp_wr;
	o->device_cap_flags = (unsigned int)a.device_cap_flags;
	o->max_sge = a.max_sge;
	o->max_sge_rd = a.max_sge_rd;
	o->max_cq = a.max_cq;
	o->max_cqe = a.max_cqe;
	o->max_mr = a.max_mr;
	o->max_pd = a.max_pd;
	o->max_qp_rd_atom = a.max_qp_rd_atom;
	o->max_ee_rd_atom = a.max_ee_rd_atom;
	o->max_res_rd_atom = a.max_res_rd_atom;
	o->max_qp_init_rd_atom = a.max_qp_init_rd_atom;
	o->max_ee_init_rd_atom = a.max_ee_init_rd_atom;
	o->atomic_cap = a.atomic_cap;
	o->max_mw = a.max_mw;
	o->max_ah = a.max_ah;
	o->max_fmr = a.max_fmr;
	o->max_srq = a.max_srq;
	o->max_srq_wr = a.max_srq_wr;
	o->max_srq_sge = a.max_srq_sge;
	o->max_pkeys = a.max_pkeys;
	o->max_mcast_grp = a.max_mcast_grp;
	o->max_mcast_qp_attach = a.max_mcast_qp_attach;
	o->max_total_mcast_qp_attach = a.max_total_mcast_qp_attach;
	o->local_ca_ack_delay = a.local_ca_ack_delay;
	o->phys_port_cnt = a.phys_port_cnt;
	x.device_cap_flags_ex = a.device_cap_flags;
	x.tso_caps.max_tso = a.max_tso;
	x.tso_caps.supported_qpts = a.tso_supported_qpts;
	x.tm_caps.max_rndv_hdr_size = a.tm_max_rndv_hdr_size;
	x.tm_caps.max_num_tags = a.tm_max_num_tags;
	x.tm_caps.flags = a.tm_flags;
	x.tm_caps.max_ops = a.tm_max_ops;
	x.tm_caps.max_sge = a.tm_max_sge;
	x.phys_port_cnt_ex = a.phys_port_cnt;
	x.odp_caps.general_caps = a.odp_general_caps;
	x.odp_caps.per_transport_caps.rc_odp_caps = a.odp_rc_caps;
	x.odp_caps.per_transport_caps.uc_odp_caps = a.odp_uc_caps;
	x.odp_caps.per_transport_caps.ud_odp_caps = a.odp_ud_caps;
	x.xrc_odp_caps = a.odp_xrc_caps;
	x.max_wq_type_rq = a.max_wq_type_rq;
	x.completion_timestamp_mask = a.completion_timestamp_mask;
	x.hca_core_clock = a.hca_core_clock;
	x.cq_mod_caps.max_cq_count = a.max_cq_count;
	x.cq_mod_caps.max_cq_period = a.max_cq_period;
	memcpy(out, &x, size < sizeof(x) ? size : sizeof(x));
	if (size > sizeof(x))
		memset((uint8_t *)out + sizeof(x), 0, size - sizeof(x));
	return 0;
}

int sn_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *out, size_t size)
{
	struct sn_port_attr a;
	struct ibv_port_attr p;
	int err = sn_e->query_port(to_sctx(ctx)->h, port, &a);

	if (err)
		return err;
	memset(&p, 0, sizeof(p));
	p.state = a.state;
	p.max_mtu = a.max_mtu;
	p.active_mtu = a.active_mtu;
	p.gid_tbl_len = SN_GID_TBL_LEN;
	p.port_cap_flags = a.port_cap_flags;
	p.max_msg_sz = a.max_msg_sz;
	p.pkey_tbl_len = a.pkey_tbl_len;
	p.lid = a.lid;
	p.sm_lid = a.sm_lid;
	p.lmc = a.lmc;
	p.max_vl_num = a.max_vl_num;
	p.active_width = a.active_width;
	p.active_speed = a.active_speed;
	p.phys_state = a.phys_state;
	p.link_layer = a.link_layer;
	memcpy(out, &p, size < sizeof(p) ? size : sizeof(p));
	return 0;
}

SN_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return sn_ops.query_device_ex(ctx, NULL, (struct ibv_device_attr_ex *)attr, sizeof(*attr));
}

/* The exported ibv_query_port takes the old struct, which ends before
 * port_cap_flags2; programs reach the full one through the inline
 * ibv_query_port's verbs_context.query_port. */
#undef ibv_query_port
SN_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			     struct _compat_ibv_port_attr *attr)
{
	return sn_ops.query_port(ctx, port, (struct ibv_port_attr *)attr,
				 offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* ---- GIDs ---- */

/* gid_entry returns GID table entry index, or ENODATA for an empty one
 * and EINVAL for a port or index out of the table. */
static int gid_entry(struct ibv_context *ctx, uint32_t port, uint32_t index, struct ibv_gid_entry *e)
{
	struct sn_context *c = to_sctx(ctx);

	if (port != 1 || index >= SN_GID_TBL_LEN)
		return EINVAL;
	if (index >= SN_GIDS)
		return ENODATA;
	memset(e, 0, sizeof(*e));
	e->gid = c->gid[index];
	e->gid_index = index;
	e->port_num = port;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	/* Both GIDs belong to the interface holding the address, as rxe's
	 * belong to its netdev. */
	e->ndev_ifindex = c->ifindex;
	return 0;
}

SN_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int err;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	err = gid_entry(ctx, port, index, &e);
	if (err == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (err) {
		errno = err;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

SN_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t size)
{
	struct ibv_gid_entry e;
	int err;

	if (flags || size < sizeof(e))
		return EINVAL;
	err = gid_entry(ctx, port, index, &e);
	if (err)
		return err;
	memcpy(entry, &e, sizeof(e));
	return 0;
}

SN_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				       size_t max, uint32_t flags, size_t size)
{
	size_t n = 0;

	if (flags || size < sizeof(*entries))
		return -EINVAL;
	for (uint32_t i = 0; i < SN_GIDS; i++) {
		if (n == max)
			return -EINVAL;
		gid_entry(ctx, 1, i, (struct ibv_gid_entry *)((uint8_t *)entries + n * size));
		n++;
	}
	return n;
}

/* The type enum of the private ibv_query_gid_type (driver.h). */
enum { GID_TYPE_SYSFS_IB_ROCE_V1, GID_TYPE_SYSFS_ROCE_V2 };

SN_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				 int *type)
{
	struct ibv_gid_entry e;
	int err = gid_entry(ctx, port, index, &e);

	if (err == ENODATA) {
		*type = GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (err) {
		errno = err;
		return -1;
	}
	*type = GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

/*
 * sn_ah_to_engine maps an address vector to the engine's terms. The
 * engine has one GID, the address: GID indexes 0 and 1 both name it. A
 * destination GID that is a softnic link-local GID (fe80::200:ffff:a.b.c.d,
 * a peer's GID[0]) becomes the IPv4 address it carries, and this device's
 * own GID[0] its address: softnic sends RoCE v2 over the address it is
 * bound to.
 */
int sn_ah_to_engine(struct ibv_context *ctx, const struct ibv_ah_attr *in, struct sn_ah_attr *out)
{
	struct sn_context *c = to_sctx(ctx);
	static const uint8_t ll_v4[12] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x00, 0xff, 0xff };
	const uint8_t *d = in->grh.dgid.raw;

	memset(out, 0, sizeof(*out));
	memcpy(out->dgid, d, 16);
	if (in->is_global) {
		if (in->grh.sgid_index >= SN_GIDS) {
			sn_debug("sgid_index %u is not in the GID table (GID[0] and GID[1]: the device's)",
				 in->grh.sgid_index);
			return EINVAL;
		}
		if (memcmp(d, c->gid[SN_GID_LINK_LOCAL].raw, 16) == 0) {
			memcpy(out->dgid, c->gid[SN_GID_ADDR].raw, 16);
		} else if (memcmp(d, ll_v4, sizeof(ll_v4)) == 0) {
			memset(out->dgid, 0, 10);
			out->dgid[10] = out->dgid[11] = 0xff;
			memcpy(out->dgid + 12, d + 12, 4);
		}
	}
	out->flow_label = in->grh.flow_label;
	out->sgid_index = 0;
	out->hop_limit = in->grh.hop_limit;
	out->traffic_class = in->grh.traffic_class;
	out->dlid = in->dlid;
	out->sl = in->sl;
	out->src_path_bits = in->src_path_bits;
	out->static_rate = in->static_rate;
	out->is_global = in->is_global;
	out->port_num = in->port_num;
	return 0;
}

/* ---- P_Keys: the table holds the default P_Key only (rxe's pkey_tbl_len 1) ---- */

/* libibverbs reads ports/N/pkeys/I from sysfs: an entry out of the table
 * is -1 with errno ENOENT, the file's absence. */
SN_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	uint16_t k;
	int err = sn_e->query_pkey(to_sctx(ctx)->h, port, index, &k);

	if (err) {
		errno = err == EINVAL ? ENOENT : err;
		return -1;
	}
	*pkey = htobe16(k);
	return 0;
}

/* As libibverbs: the first index whose P_Key is pkey, or the failed
 * query's -1 at the end of the table. */
SN_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	__be16 p;

	for (int i = 0;; i++) {
		if (ibv_query_pkey(ctx, port, i, &p))
			return -1;
		if (p == pkey)
			return i;
	}
}

/* ---- The device's clock ---- */

int sn_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *v)
{
	uint64_t ns;
	int err;

	if (v->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (!(v->comp_mask & IBV_VALUES_MASK_RAW_CLOCK))
		return 0;
	err = sn_e->query_rt_values(to_sctx(ctx)->h, &ns);
	if (err)
		return err;
	/* In hca_core_clock cycles in tv_nsec, as mlx5 reports its cycle
	 * counter: the clock is 1 GHz, so they are nanoseconds. */
	v->raw_clock.tv_sec = 0;
	v->raw_clock.tv_nsec = ns;
	return 0;
}

/* ---- Asynchronous events ---- */

SN_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct sn_async_event ev;
	uint64_t one;
	int err;

	for (;;) {
		if (read(ctx->async_fd, &one, sizeof(one)) != sizeof(one))
			return -1;
		err = sn_e->get_async_event(to_sctx(ctx)->h, &ev);
		if (!err)
			break;
		if (err != EAGAIN) { /* EAGAIN: an event of an object destroyed since */
			errno = err;
			return -1;
		}
	}
	event->event_type = ev.event_type;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct sn_cq *cq = (struct sn_cq *)(uintptr_t)ev.cookie;

		pthread_mutex_lock(&cq->cq.mutex);
		cq->async_events_reported++;
		pthread_mutex_unlock(&cq->cq.mutex);
		event->element.cq = (struct ibv_cq *)cq;
		break;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct sn_qp *qp = (struct sn_qp *)(uintptr_t)ev.cookie;

		pthread_mutex_lock(&qp->qpx.qp_base.mutex);
		qp->events_reported++;
		pthread_mutex_unlock(&qp->qpx.qp_base.mutex);
		event->element.qp = &qp->qpx.qp_base;
		break;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct sn_srq *srq = (struct sn_srq *)(uintptr_t)ev.cookie;

		pthread_mutex_lock(&srq->srq.mutex);
		srq->events_reported++;
		pthread_mutex_unlock(&srq->srq.mutex);
		event->element.srq = &srq->srq;
		break;
	}
	case IBV_EVENT_WQ_FATAL: {
		struct sn_wq *wq = (struct sn_wq *)(uintptr_t)ev.cookie;

		pthread_mutex_lock(&wq->wq.mutex);
		wq->events_reported++;
		pthread_mutex_unlock(&wq->wq.mutex);
		event->element.wq = &wq->wq;
		break;
	}
	default:
		event->element.port_num = ev.port_num;
		break;
	}
	return 0;
}

static void ack(pthread_mutex_t *mu, pthread_cond_t *cond, uint32_t *completed)
{
	pthread_mutex_lock(mu);
	++*completed;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(mu);
}

SN_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		ack(&cq->mutex, &cq->cond, &cq->async_events_completed);
		return;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		ack(&qp->mutex, &qp->cond, &qp->events_completed);
		return;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		ack(&srq->mutex, &srq->cond, &srq->events_completed);
		return;
	}
	case IBV_EVENT_WQ_FATAL: {
		struct ibv_wq *wq = event->element.wq;

		ack(&wq->mutex, &wq->cond, &wq->events_completed);
		return;
	}
	default:
		return;
	}
}

void sn_wait_events(pthread_mutex_t *mu, pthread_cond_t *cond, const uint32_t *completed,
		    const uint32_t *reported)
{
	pthread_mutex_lock(mu);
	while (*completed != *reported)
		pthread_cond_wait(cond, mu);
	pthread_mutex_unlock(mu);
}
