/*
 * cma.c - the RDMA connection manager's calls (rdma_cma.h): event
 * channels, IDs, address and route resolution, connections, multicast,
 * options, and what librdmacm does itself around the kernel's commands
 * (rdma-core librdmacm/cma.c): moving an ID's QP through its states with
 * the attributes the CM gives, the RTU once a REP came, synchronous IDs,
 * rdma_create_ep.
 *
 * Each call that rdma-core's librdmacm makes by writing a command to the
 * rdma_cm device calls the engine's sne_cm_* function instead. An ID and
 * a channel reach the engine lazily, with the first call that needs a
 * device (rdma_bind_addr, rdma_resolve_addr, rdma_listen): the NIC then
 * opens at the address the program binds or resolves from, unless
 * SOFTNIC_ADDR names one, and a process that forks before it uses the CM
 * never starts the engine.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rdma_verbs.h>

#include "cma.h"

/* ---- Channels, IDs, events ---- */

/* An event channel: the fd a program polls, an eventfd the engine keeps
 * readable while an event waits; the engine's channel once the CM has it. */
/*
 * A channel. waiters counts the threads in rdma_get_cm_event on it and
 * destroyed says rdma_destroy_event_channel ran: as over the kernel, where
 * a read(2) in progress holds the rdma_cm file that close(2) leaves open,
 * a thread waiting on a destroyed channel waits until the process ends
 * (rping's event thread does, while main destroys the channel and
 * returns), and the channel's memory stays until it is gone. Both guarded
 * by chan_mut.
 */
struct cma_channel {
	struct rdma_event_channel ch;
	sn_handle h;
	int waiters;
	bool destroyed;
};

static pthread_mutex_t chan_mut = PTHREAD_MUTEX_INITIALIZER;

struct cma_multicast {
	struct cma_multicast *next;
	struct cma_id_private *id_priv;
	void *context;
	int events_completed;
	pthread_cond_t cond;
	union ibv_gid mgid;
	uint16_t mlid;
	uint16_t join_flags;
	struct sockaddr_storage addr;
};

/* An option set before the engine had the ID, given to it then. */
struct cma_option {
	int level, name;
	size_t len;
	uint8_t val[8];
};

struct cma_id_private {
	struct rdma_cm_id id;
	sn_handle h; /* the engine's ID; 0 until the CM has it */
	bool has_dev;
	int events_completed;
	int connect_error;
	int sync;
	pthread_cond_t cond;
	pthread_mutex_t mut;
	struct cma_multicast *mc_list;
	struct ibv_qp_init_attr *qp_init_attr;
	uint8_t initiator_depth;
	uint8_t responder_resources;
	struct ibv_ece local_ece;
	struct ibv_ece remote_ece;
	void *connect;
	size_t connect_len;
	struct cma_option opts[4];
	int nopts;
};

struct cma_event {
	struct rdma_cm_event event;
	uint8_t private_data[SN_CM_MAX_PRIVATE_DATA];
	struct cma_id_private *id_priv;
	struct cma_multicast *mc;
};

static inline struct cma_id_private *to_priv(struct rdma_cm_id *id)
{
	return (struct cma_id_private *)id;
}

static inline struct cma_channel *to_chan(struct rdma_event_channel *ch)
{
	return (struct cma_channel *)ch;
}

/* ---- The device and the engine's CM ---- */

struct cma_device cma_dev;

static pthread_mutex_t mut = PTHREAD_MUTEX_INITIALIZER;
static bool started;
static pid_t started_pid;

int ucma_addrlen(const struct sockaddr *addr)
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;
	}
}

int ucma_to_engine(const struct sockaddr *in, struct sn_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (!in)
		return 0;
	switch (in->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *s = (const struct sockaddr_in *)in;
		out->family = AF_INET;
		out->port = be16toh(s->sin_port);
		memcpy(out->addr, &s->sin_addr, 4);
		return 0;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)in;
		out->family = AF_INET6;
		out->port = be16toh(s->sin6_port);
		out->scope_id = s->sin6_scope_id;
		memcpy(out->addr, &s->sin6_addr, 16);
		return 0;
	}
	default:
		return EAFNOSUPPORT;
	}
}

void ucma_from_engine(const struct sn_addr *in, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	switch (in->family) {
	case AF_INET: {
		struct sockaddr_in *s = (struct sockaddr_in *)out;
		s->sin_family = AF_INET;
		s->sin_port = htobe16(in->port);
		memcpy(&s->sin_addr, in->addr, 4);
		break;
	}
	case AF_INET6: {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)out;
		s->sin6_family = AF_INET6;
		s->sin6_port = htobe16(in->port);
		s->sin6_scope_id = in->scope_id;
		memcpy(&s->sin6_addr, in->addr, 16);
		break;
	}
	}
}

__be16 ucma_get_port(const struct sockaddr *addr)
{
	switch (addr->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)addr)->sin_port;
	case AF_INET6:
		return ((const struct sockaddr_in6 *)addr)->sin6_port;
	default:
		return 0;
	}
}

/* specific reports whether addr names one address (not the wildcard). */
static bool specific(const struct sockaddr *addr)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;

	if (!addr)
		return false;
	switch (addr->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)addr)->sin_addr.s_addr != htobe32(INADDR_ANY);
	case AF_INET6:
		return memcmp(&((const struct sockaddr_in6 *)addr)->sin6_addr, &any6, sizeof(any6)) != 0;
	default:
		return false;
	}
}

/*
 * ucma_start opens the device and the CM (ucma_init and ucma_init_device
 * in one: softnic has one device). The device context is the library's
 * own, as rdma-core's librdmacm opens its own: an ID's verbs.
 */
int ucma_start(const struct sockaddr *pref)
{
	struct ibv_device **devs = NULL;
	struct ibv_device_attr attr;
	struct sn_addr a, none = { 0 };
	int n, err = 0;

	pthread_mutex_lock(&mut);
	if (started)
		goto out;
	if (sn_cm_load()) {
		err = errno;
		goto out;
	}
	devs = ibv_get_device_list(&n);
	if (!devs || n == 0) {
		err = ENODEV;
		goto out;
	}
	if (specific(pref) && !ucma_to_engine(pref, &a))
		sn_cm->prefer_addr(&a);
	cma_dev.verbs = ibv_open_device(devs[0]);
	if (!cma_dev.verbs && specific(pref)) {
		/* Not an address of this host, or another NIC has it: the
		 * NIC opens where it would, and the bind fails as it should. */
		sn_cm->prefer_addr(&none);
		cma_dev.verbs = ibv_open_device(devs[0]);
	}
	sn_cm->prefer_addr(&none);
	if (!cma_dev.verbs) {
		err = errno ? errno : ENODEV;
		goto out;
	}
	if ((err = ibv_query_device(cma_dev.verbs, &attr)))
		goto close;
	cma_dev.max_qpsize = attr.max_qp_wr;
	cma_dev.max_initiator_depth = (uint8_t)attr.max_qp_init_rd_atom;
	cma_dev.max_responder_resources = (uint8_t)attr.max_qp_rd_atom;
	cma_dev.pd = ibv_alloc_pd(cma_dev.verbs);
	if (!cma_dev.pd) {
		err = errno ? errno : ENOMEM;
		goto close;
	}
	if ((err = sn_cm->open())) {
		ibv_dealloc_pd(cma_dev.pd);
		goto close;
	}
	started = true;
	started_pid = getpid();
	ucma_watch();
	goto out;
close:
	ibv_close_device(cma_dev.verbs);
	cma_dev.verbs = NULL;
out:
	pthread_mutex_unlock(&mut);
	if (devs)
		ibv_free_device_list(devs);
	return err ? ERR(err) : 0;
}

/*
 * The CM closes when the process exits (or the library is unloaded), as
 * the kernel's rdma_cm cleans up a closed file: what the process's IDs
 * still hold is answered (a connection's DREQ, a request's REJ) and the
 * NIC closes with the library's device context, writing its pcap and
 * metrics. Not in a child forked after the engine started.
 */
__attribute__((destructor)) static void ucma_cleanup(void)
{
	if (!started || getpid() != started_pid)
		return;
	started = false;
	ucma_unwatch();
	sn_cm->close();
	if (cma_dev.xrcd)
		ibv_close_xrcd(cma_dev.xrcd);
	ibv_dealloc_pd(cma_dev.pd);
	ibv_close_device(cma_dev.verbs);
}

int ucma_max_qpsize(struct rdma_cm_id *id)
{
	if (ucma_start(NULL))
		return 0;
	return cma_dev.max_qpsize;
}

static struct ibv_xrcd *ucma_get_xrcd(void)
{
	struct ibv_xrcd_init_attr attr;

	pthread_mutex_lock(&mut);
	if (!cma_dev.xrcd) {
		memset(&attr, 0, sizeof(attr));
		attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		attr.fd = -1;
		attr.oflags = O_CREAT;
		cma_dev.xrcd = ibv_open_xrcd(cma_dev.verbs, &attr);
	}
	pthread_mutex_unlock(&mut);
	return cma_dev.xrcd;
}

SN_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **devs = NULL;

	if (ucma_start(NULL))
		goto out;
	devs = calloc(2, sizeof(*devs));
	if (devs)
		devs[0] = cma_dev.verbs;
out:
	if (num_devices)
		*num_devices = devs ? 1 : 0;
	return devs;
}

SN_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- Event channels ---- */

SN_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cma_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	return &ch->ch;
}

SN_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cma_channel *ch = to_chan(channel);
	bool busy;

	pthread_mutex_lock(&chan_mut);
	ch->destroyed = true;
	busy = ch->waiters > 0;
	pthread_mutex_unlock(&chan_mut);
	if (ch->h)
		sn_cm->destroy_channel(ch->h);
	close(ch->ch.fd);
	if (!busy)
		free(ch);
}

/* ucma_channel gives the engine the channel. mut held. */
static int ucma_channel_locked(struct cma_channel *ch)
{
	int err;

	if (ch->h)
		return 0;
	if ((err = sn_cm->create_channel(ch->ch.fd, &ch->h)))
		return ERR(err);
	return 0;
}

/* ---- IDs ---- */

static void ucma_free_id(struct cma_id_private *id_priv)
{
	pthread_cond_destroy(&id_priv->cond);
	pthread_mutex_destroy(&id_priv->mut);
	free(id_priv->id.route.path_rec);
	if (id_priv->sync)
		rdma_destroy_event_channel(id_priv->id.channel);
	free(id_priv->connect);
	free(id_priv);
}

/* ucma_init_id sets up a zeroed ID for channel (NULL: its own). */
static int ucma_init_id(struct cma_id_private *id_priv, struct rdma_event_channel *channel, void *context,
			enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	id_priv->id.context = context;
	id_priv->id.ps = ps;
	id_priv->id.qp_type = qp_type;
	pthread_mutex_init(&id_priv->mut, NULL);
	pthread_cond_init(&id_priv->cond, NULL);
	if (!channel) {
		id_priv->id.channel = rdma_create_event_channel();
		if (!id_priv->id.channel)
			return -1;
		id_priv->sync = 1;
	} else {
		id_priv->id.channel = channel;
	}
	return 0;
}

static struct cma_id_private *ucma_alloc_id(struct rdma_event_channel *channel, void *context,
					    enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cma_id_private *id_priv = calloc(1, sizeof(*id_priv));

	if (!id_priv)
		return NULL;
	if (ucma_init_id(id_priv, channel, context, ps, qp_type)) {
		ucma_free_id(id_priv);
		return NULL;
	}
	return id_priv;
}

/*
 * ucma_engine_id gives the engine the ID (rdma_create_id's command), the
 * CM opened first (pref: the address the NIC should take), with the
 * options set meanwhile.
 */
static int ucma_engine_id(struct cma_id_private *id_priv, const struct sockaddr *pref)
{
	int err = 0;

	if (id_priv->h)
		return 0;
	if (ucma_start(pref))
		return -1;
	pthread_mutex_lock(&mut);
	if (!id_priv->h) {
		if (ucma_channel_locked(to_chan(id_priv->id.channel)))
			err = errno;
		else
			err = sn_cm->create_id(to_chan(id_priv->id.channel)->h, (uintptr_t)id_priv, id_priv->id.ps,
					       id_priv->id.qp_type, &id_priv->h);
	}
	pthread_mutex_unlock(&mut);
	if (err)
		return ERR(err);
	for (int i = 0; i < id_priv->nopts; i++) {
		struct cma_option *o = &id_priv->opts[i];
		if ((err = sn_cm->set_option(id_priv->h, o->level, o->name, o->val, o->len)))
			return ERR(err);
	}
	id_priv->nopts = 0;
	return 0;
}

/* An ID the engine does not have yet is idle: most calls refuse it. */
#define NEED_ENGINE(id_priv)                                                   \
	do {                                                                   \
		if (!(id_priv)->h)                                             \
			return ERR(EINVAL);                                    \
	} while (0)

static int rdma_create_id2(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
			   enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cma_id_private *id_priv;

	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IB:
	case RDMA_PS_IPOIB:
		break;
	default:
		return ERR(EINVAL);
	}
	id_priv = ucma_alloc_id(channel, context, ps, qp_type);
	if (!id_priv)
		return ERR(ENOMEM);
	*id = &id_priv->id;
	return 0;
}

SN_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
			     enum rdma_port_space ps)
{
	enum ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ? IBV_QPT_UD : IBV_QPT_RC;

	return rdma_create_id2(channel, id, context, ps, qp_type);
}

SN_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);
	int32_t reported = 0;
	int err;

	if (id_priv->h && (err = sn_cm->destroy_id(id_priv->h, &reported)))
		return ERR(err);
	if (id->event)
		rdma_ack_cm_event(id->event);
	pthread_mutex_lock(&id_priv->mut);
	while (id_priv->events_completed < reported)
		pthread_cond_wait(&id_priv->cond, &id_priv->mut);
	pthread_mutex_unlock(&id_priv->mut);
	ucma_free_id(id_priv);
	return 0;
}

/*
 * ucma_query_route is librdmacm's: the ID's addresses, GIDs and path from
 * the CM, and its device once it is bound to one (ucma_get_device: the
 * ID's verbs, and its PD for a QP made without one).
 */
static int ucma_query_route(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct sn_cm_route r;
	int err;

	if ((err = sn_cm->query_route(id_priv->h, &r)))
		return ERR(err);
	if (r.src.family)
		ucma_from_engine(&r.src, &id->route.addr.src_storage);
	if (r.dst.family)
		ucma_from_engine(&r.dst, &id->route.addr.dst_storage);
	memcpy(id->route.addr.addr.ibaddr.sgid.raw, r.sgid, 16);
	memcpy(id->route.addr.addr.ibaddr.dgid.raw, r.dgid, 16);
	id->route.addr.addr.ibaddr.pkey = htobe16(r.pkey);
	if (r.resolved) {
		struct ibv_sa_path_rec *p = id->route.path_rec;
		if (!p) {
			p = calloc(1, sizeof(*p));
			if (!p)
				return ERR(ENOMEM);
			id->route.path_rec = p;
		}
		memset(p, 0, sizeof(*p));
		memcpy(p->sgid.raw, r.sgid, 16);
		memcpy(p->dgid.raw, r.dgid, 16);
		p->dlid = p->slid = htobe16(0xffff);
		p->flow_label = htobe32(r.flow_label);
		p->hop_limit = r.hop_limit;
		p->traffic_class = r.traffic_class;
		p->reversible = htobe32(0x80000000);
		p->numb_path = 1;
		p->pkey = htobe16(r.pkey);
		p->sl = r.sl;
		p->mtu_selector = 2; /* exactly */
		p->mtu = r.mtu;
		p->rate_selector = 2;
		p->rate = 3; /* 10 Gb/s, rxe's speed */
		p->packet_life_time_selector = 2;
		p->packet_life_time = r.packet_life_time;
		id->route.num_paths = 1;
	} else {
		id->route.num_paths = 0;
	}
	if (r.bound && !id_priv->has_dev) {
		id_priv->has_dev = true;
		id->verbs = cma_dev.verbs;
		id->pd = cma_dev.pd;
		id->port_num = 1;
	}
	return 0;
}

SN_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct sn_addr a;
	int err;

	if (!ucma_addrlen(addr))
		return ERR(EINVAL);
	if (ucma_engine_id(id_priv, addr))
		return -1;
	if ((err = ucma_to_engine(addr, &a)) || (err = sn_cm->bind(id_priv->h, &a)))
		return ERR(err);
	return ucma_query_route(id);
}

static bool ucma_chan_destroyed(struct cma_channel *ch)
{
	bool d;

	pthread_mutex_lock(&chan_mut);
	d = ch->destroyed;
	pthread_mutex_unlock(&chan_mut);
	return d;
}

/* ucma_wait takes the channel's next event from the engine, waiting on
 * its fd unless the program made it non-blocking. */
static int ucma_wait(struct cma_channel *ch, uint64_t new_cookie, struct sn_cm_event *ev)
{
	struct pollfd pfd = { .fd = ch->ch.fd, .events = POLLIN };
	int err, fl;

	for (;;) {
		err = EAGAIN;
		if (ch->h)
			err = sn_cm->get_event(ch->h, new_cookie, ev);
		if (err == 0 || (err != EAGAIN && !ucma_chan_destroyed(ch)))
			return err;
		fl = fcntl(ch->ch.fd, F_GETFL);
		if (ucma_chan_destroyed(ch)) {
			/* Destroyed while this thread waited: as a read of
			 * the kernel's closed rdma_cm file, it never returns. */
			for (;;)
				pause();
		}
		if (fl >= 0 && (fl & O_NONBLOCK))
			return EAGAIN;
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return errno;
	}
}

int ucma_complete(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);
	int ret;

	if (!id_priv->sync)
		return 0;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	ret = rdma_get_cm_event(id->channel, &id->event);
	if (ret)
		return ret;
	if (id->event->status) {
		if (id->event->event == RDMA_CM_EVENT_REJECTED)
			ret = ERR(ECONNREFUSED);
		else if (id->event->status < 0)
			ret = ERR(-id->event->status);
		else
			ret = ERR(id->event->status);
	}
	return ret;
}

SN_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
				int timeout_ms)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct sn_addr s, d;
	int dst_len, err;

	dst_len = ucma_addrlen(dst_addr);
	if (!dst_len)
		return ERR(EINVAL);
	if (src_addr && !ucma_addrlen(src_addr))
		return ERR(EINVAL);
	if (ucma_engine_id(id_priv, src_addr))
		return -1;
	if ((err = ucma_to_engine(src_addr, &s)) || (err = ucma_to_engine(dst_addr, &d)) ||
	    (err = sn_cm->resolve_addr(id_priv->h, &s, &d, timeout_ms)))
		return ERR(err);
	memcpy(&id->route.addr.dst_storage, dst_addr, dst_len);
	return ucma_complete(id);
}

SN_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cma_id_private *id_priv = to_priv(id);
	int err;

	NEED_ENGINE(id_priv);
	if ((err = sn_cm->resolve_route(id_priv->h, timeout_ms)))
		return ERR(err);
	return ucma_complete(id);
}

static int ucma_is_ud_qp(enum ibv_qp_type qp_type)
{
	return qp_type == IBV_QPT_UD;
}

SN_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct sn_qp_attr a;
	uint32_t mask;
	int err;

	NEED_ENGINE(id_priv);
	if ((err = sn_cm->init_qp_attr(id_priv->h, qp_attr->qp_state, &a, &mask)))
		return ERR(err);
	sn_qp_attr_to_ibv(&a, qp_attr);
	*qp_attr_mask = (int)mask;
	return 0;
}

static int ucma_modify_qp_rtr(struct rdma_cm_id *id, uint8_t resp_res)
{
	struct ibv_qp_attr qp_attr;
	int qp_attr_mask, ret;

	if (!id->qp)
		return 0;
	/* INIT again: the CM's access flags, now that it knows the peer. */
	qp_attr.qp_state = IBV_QPS_INIT;
	ret = rdma_init_qp_attr(id, &qp_attr, &qp_attr_mask);
	if (ret)
		return ret;
	ret = ibv_modify_qp(id->qp, &qp_attr, qp_attr_mask);
	if (ret)
		return ERR(ret);
	qp_attr.qp_state = IBV_QPS_RTR;
	ret = rdma_init_qp_attr(id, &qp_attr, &qp_attr_mask);
	if (ret)
		return ret;
	if (resp_res != RDMA_MAX_RESP_RES)
		qp_attr.max_dest_rd_atomic = resp_res;
	return rdma_seterrno(ibv_modify_qp(id->qp, &qp_attr, qp_attr_mask));
}

static int ucma_modify_qp_rts(struct rdma_cm_id *id, uint8_t init_depth)
{
	struct ibv_qp_attr qp_attr;
	int qp_attr_mask, ret;

	if (!id->qp)
		return 0;
	qp_attr.qp_state = IBV_QPS_RTS;
	ret = rdma_init_qp_attr(id, &qp_attr, &qp_attr_mask);
	if (ret)
		return ret;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		qp_attr.max_rd_atomic = init_depth;
	return rdma_seterrno(ibv_modify_qp(id->qp, &qp_attr, qp_attr_mask));
}

static int ucma_modify_qp_err(struct rdma_cm_id *id)
{
	struct ibv_qp_attr qp_attr;

	if (!id->qp)
		return 0;
	qp_attr.qp_state = IBV_QPS_ERR;
	return rdma_seterrno(ibv_modify_qp(id->qp, &qp_attr, IBV_QP_STATE));
}

static int ucma_init_conn_qp(struct cma_id_private *id_priv, struct ibv_qp *qp)
{
	struct ibv_qp_attr qp_attr;
	int qp_attr_mask, ret;

	qp_attr.qp_state = IBV_QPS_INIT;
	ret = rdma_init_qp_attr(&id_priv->id, &qp_attr, &qp_attr_mask);
	if (ret)
		return ret;
	return rdma_seterrno(ibv_modify_qp(qp, &qp_attr, qp_attr_mask));
}

static int ucma_init_ud_qp(struct cma_id_private *id_priv, struct ibv_qp *qp)
{
	struct ibv_qp_attr qp_attr;
	int qp_attr_mask, ret;

	qp_attr.qp_state = IBV_QPS_INIT;
	ret = rdma_init_qp_attr(&id_priv->id, &qp_attr, &qp_attr_mask);
	if (ret)
		return ret;
	ret = ibv_modify_qp(qp, &qp_attr, qp_attr_mask);
	if (ret)
		return ERR(ret);
	qp_attr.qp_state = IBV_QPS_RTR;
	ret = ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE);
	if (ret)
		return ERR(ret);
	qp_attr.qp_state = IBV_QPS_RTS;
	qp_attr.sq_psn = 0;
	return rdma_seterrno(ibv_modify_qp(qp, &qp_attr, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

static void ucma_destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq) {
			ibv_destroy_cq(id->send_cq);
			id->send_cq = NULL;
		}
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel) {
			ibv_destroy_comp_channel(id->send_cq_channel);
			id->send_cq_channel = NULL;
		}
		id->recv_cq_channel = NULL;
	}
}

/* ucma_create_cqs makes the ID's CQs, each with a completion channel of
 * its own, as rdma_get_send_comp and rdma_get_recv_comp wait on them. */
static int ucma_create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	ucma_destroy_cqs(id);
	return -1;
}

SN_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;
	int ret;

	if (!id->verbs)
		return ERR(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return ERR(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = ucma_get_xrcd();
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			ret = ucma_create_cqs(id, 0, attr->attr.max_wr);
			if (ret)
				return ret;
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		ret = -1;
		goto err;
	}
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
err:
	ucma_destroy_cqs(id);
	return ret;
}

SN_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex attr_ex;
	int ret;

	memcpy(&attr_ex, attr, sizeof(*attr));
	attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	attr_ex.pd = pd;
	ret = rdma_create_srq_ex(id, &attr_ex);
	memcpy(attr, &attr_ex, sizeof(*attr));
	return ret;
}

SN_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	ibv_destroy_srq(id->srq);
	id->srq = NULL;
	ucma_destroy_cqs(id);
}

/* init_ece and set_local_ece are librdmacm's; softnic's QPs have no ECE
 * (ibv_query_ece answers EOPNOTSUPP, as rxe's), so neither side sends
 * any. */
static int init_ece(struct rdma_cm_id *id, struct ibv_qp *qp)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct ibv_ece ece = {};
	int ret;

	ret = ibv_query_ece(qp, &ece);
	if (ret && ret != EOPNOTSUPP)
		return ERR(ret);
	id_priv->local_ece.vendor_id = ece.vendor_id;
	id_priv->local_ece.options = ece.options;
	if (!id_priv->remote_ece.vendor_id)
		return 0;
	if (id_priv->remote_ece.vendor_id != id_priv->local_ece.vendor_id) {
		ece.vendor_id = id_priv->local_ece.vendor_id;
		ece.options = 0;
	} else {
		ece.vendor_id = id_priv->remote_ece.vendor_id;
		ece.options = id_priv->remote_ece.options;
	}
	ret = ibv_set_ece(qp, &ece);
	return (ret && ret != EOPNOTSUPP) ? ERR(ret) : 0;
}

SN_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct ibv_qp *qp;
	int ret;

	if (id->qp)
		return ERR(EINVAL);
	if (!id->verbs)
		return ERR(EINVAL); /* bound to no device yet */
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (id->verbs != attr->pd->context) {
		return ERR(EINVAL);
	}
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return ERR(EINVAL);
	if (id->qp_type == IBV_QPT_XRC_RECV) {
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = ucma_get_xrcd();
			if (!attr->xrcd)
				return -1;
			attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		}
	}
	ret = ucma_create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
			      attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr);
	if (ret)
		return ret;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = -1;
		goto err1;
	}
	ret = init_ece(id, qp);
	if (ret)
		goto err2;
	if (ucma_is_ud_qp(id->qp_type))
		ret = ucma_init_ud_qp(id_priv, qp);
	else
		ret = ucma_init_conn_qp(id_priv, qp);
	if (ret)
		goto err2;
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
err2:
	ibv_destroy_qp(qp);
err1:
	ucma_destroy_cqs(id);
	return ret;
}

SN_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex attr_ex;
	int ret;

	memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &attr_ex);
	memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
	return ret;
}

SN_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	ibv_destroy_qp(id->qp);
	id->qp = NULL;
	ucma_destroy_cqs(id);
}

static int ucma_valid_param(struct cma_id_private *id_priv, struct rdma_conn_param *param)
{
	if (id_priv->id.ps != RDMA_PS_TCP)
		return 0;
	if (!id_priv->id.qp && !param)
		return ERR(EINVAL);
	if (!param)
		return 0;
	if (param->responder_resources != RDMA_MAX_RESP_RES &&
	    param->responder_resources > cma_dev.max_responder_resources)
		return ERR(EINVAL);
	if (param->initiator_depth != RDMA_MAX_INIT_DEPTH && param->initiator_depth > cma_dev.max_initiator_depth)
		return ERR(EINVAL);
	return 0;
}

/* ucma_conn_param is ucma_copy_conn_param_to_kern: the private data of
 * rdma_create_ep's address info first, then the call's. */
static void ucma_conn_param(struct cma_id_private *id_priv, struct sn_conn_param *dst, uint8_t *buf,
			    struct rdma_conn_param *src, uint32_t qp_num, uint8_t srq)
{
	memset(dst, 0, sizeof(*dst));
	dst->qp_num = qp_num;
	dst->srq = srq;
	dst->responder_resources = id_priv->responder_resources;
	dst->initiator_depth = id_priv->initiator_depth;
	dst->private_data = buf;
	if (id_priv->connect_len) {
		size_t n = id_priv->connect_len > SN_CM_MAX_PRIVATE_DATA ? SN_CM_MAX_PRIVATE_DATA : id_priv->connect_len;
		memcpy(buf, id_priv->connect, n);
		dst->private_data_len = n;
	}
	if (src) {
		dst->flow_control = src->flow_control;
		dst->retry_count = src->retry_count;
		dst->rnr_retry_count = src->rnr_retry_count;
		if (src->private_data && src->private_data_len) {
			size_t n = src->private_data_len;
			if (dst->private_data_len + n > 255)
				n = 255 - dst->private_data_len;
			memcpy(buf + dst->private_data_len, src->private_data, n);
			dst->private_data_len += n;
		}
	} else {
		dst->retry_count = 7;
		dst->rnr_retry_count = 7;
	}
}

SN_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cma_id_private *id_priv = to_priv(id);
	uint32_t qp_num = conn_param ? conn_param->qp_num : 0;
	uint8_t srq = conn_param ? conn_param->srq : 0;
	uint8_t buf[SN_CM_MAX_PRIVATE_DATA];
	struct sn_conn_param p;
	int ret;

	NEED_ENGINE(id_priv);
	ret = ucma_valid_param(id_priv, conn_param);
	if (ret)
		return ret;
	if (conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
		id_priv->initiator_depth = conn_param->initiator_depth;
	else
		id_priv->initiator_depth = cma_dev.max_initiator_depth;
	if (conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES)
		id_priv->responder_resources = conn_param->responder_resources;
	else
		id_priv->responder_resources = cma_dev.max_responder_resources;
	if (id->qp) {
		qp_num = id->qp->qp_num;
		srq = !!id->qp->srq;
	}
	ucma_conn_param(id_priv, &p, buf, conn_param, qp_num, srq);
	if ((ret = sn_cm->connect(id_priv->h, &p)))
		return ERR(ret);
	if (id_priv->connect_len) {
		free(id_priv->connect);
		id_priv->connect = NULL;
		id_priv->connect_len = 0;
	}
	return ucma_complete(id);
}

SN_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cma_id_private *id_priv = to_priv(id);
	int err;

	if (ucma_engine_id(id_priv, NULL))
		return -1;
	if ((err = sn_cm->listen(id_priv->h, backlog)))
		return ERR(err);
	return ucma_query_route(id);
}

SN_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cma_id_private *id_priv = to_priv(listen);
	struct rdma_cm_event *event;
	int ret;

	if (!id_priv->sync)
		return ERR(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->event == RDMA_CM_EVENT_REJECTED) {
		ret = ERR(ECONNREFUSED);
		goto err;
	}
	if (event->status) {
		ret = ERR(-event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = ERR(EINVAL);
		goto err;
	}
	if (id_priv->qp_init_attr) {
		struct ibv_qp_init_attr attr = *id_priv->qp_init_attr;

		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err:
	listen->event = event;
	return ret;
}

SN_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cma_id_private *id_priv = to_priv(id);
	uint8_t buf[SN_CM_MAX_PRIVATE_DATA];
	struct sn_conn_param p;
	uint32_t qp_num;
	uint8_t srq;
	int ret;

	NEED_ENGINE(id_priv);
	if (!id->qp && !conn_param)
		return ERR(EINVAL);
	qp_num = id->qp ? id->qp->qp_num : conn_param->qp_num;
	srq = id->qp ? !!id->qp->srq : conn_param->srq;
	ret = ucma_valid_param(id_priv, conn_param);
	if (ret)
		return ret;
	if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
		if (id_priv->initiator_depth > cma_dev.max_initiator_depth)
			id_priv->initiator_depth = cma_dev.max_initiator_depth;
	} else {
		id_priv->initiator_depth = conn_param->initiator_depth;
	}
	if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES) {
		if (id_priv->responder_resources > cma_dev.max_responder_resources)
			id_priv->responder_resources = cma_dev.max_responder_resources;
	} else {
		id_priv->responder_resources = conn_param->responder_resources;
	}
	if (!ucma_is_ud_qp(id->qp_type)) {
		ret = ucma_modify_qp_rtr(id, id_priv->responder_resources);
		if (ret)
			return ret;
		ret = ucma_modify_qp_rts(id, id_priv->initiator_depth);
		if (ret)
			return ret;
	}
	ucma_conn_param(id_priv, &p, buf, conn_param, qp_num, srq);
	if ((ret = sn_cm->accept(id_priv->h, &p))) {
		ucma_modify_qp_err(id);
		return ERR(ret);
	}
	if (ucma_is_ud_qp(id->qp_type))
		return 0;
	return ucma_complete(id);
}

static int reject_with_reason(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len,
			      uint8_t reason)
{
	struct cma_id_private *id_priv = to_priv(id);
	int err;

	NEED_ENGINE(id_priv);
	if ((err = sn_cm->reject(id_priv->h, (void *)private_data, private_data ? private_data_len : 0, reason)))
		return ERR(err);
	return 0;
}

SN_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return reject_with_reason(id, private_data, private_data_len, 0);
}

SN_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	/* IBTA's CM_REJ_VENDOR_OPTION_NOT_SUPPORTED */
	return reject_with_reason(id, private_data, private_data_len, 35);
}

SN_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct cma_id_private *id_priv = to_priv(id);
	int err;

	NEED_ENGINE(id_priv);
	if ((err = sn_cm->notify(id_priv->h, event)))
		return ERR(err);
	return 0;
}

SN_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);
	int ret;

	/* ucma_shutdown: an IB transport's QP goes to ERR first. */
	if (!id->verbs)
		return ERR(EINVAL);
	ret = ucma_modify_qp_err(id);
	if (ret)
		return ret;
	NEED_ENGINE(id_priv);
	if ((ret = sn_cm->disconnect(id_priv->h)))
		return ERR(ret);
	return ucma_complete(id);
}

static int rdma_join_multicast2(struct rdma_cm_id *id, struct sockaddr *addr, socklen_t addrlen,
				uint16_t join_flags, void *context)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct cma_multicast *mc, **pos;
	struct sn_addr a;
	int ret;

	NEED_ENGINE(id_priv);
	if ((ret = ucma_to_engine(addr, &a)))
		return ERR(ret);
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return ERR(ENOMEM);
	mc->context = context;
	mc->id_priv = id_priv;
	mc->join_flags = join_flags;
	memcpy(&mc->addr, addr, addrlen);
	pthread_cond_init(&mc->cond, NULL);
	pthread_mutex_lock(&id_priv->mut);
	mc->next = id_priv->mc_list;
	id_priv->mc_list = mc;
	pthread_mutex_unlock(&id_priv->mut);
	if ((ret = sn_cm->join(id_priv->h, &a, (uintptr_t)mc, join_flags))) {
		pthread_mutex_lock(&id_priv->mut);
		for (pos = &id_priv->mc_list; *pos != mc; pos = &(*pos)->next)
			;
		*pos = mc->next;
		pthread_mutex_unlock(&id_priv->mut);
		pthread_cond_destroy(&mc->cond);
		free(mc);
		return ERR(ret);
	}
	return ucma_complete(id);
}

SN_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{
	int addrlen;

	if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return ERR(ENOTSUP);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return ERR(EINVAL);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return ERR(EINVAL);
	addrlen = ucma_addrlen(mc_join_attr->addr);
	if (!addrlen)
		return ERR(EINVAL);
	return rdma_join_multicast2(id, mc_join_attr->addr, addrlen, mc_join_attr->join_flags, context);
}

SN_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	int addrlen = ucma_addrlen(addr);

	if (!addrlen)
		return ERR(EINVAL);
	return rdma_join_multicast2(id, addr, addrlen, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

SN_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cma_id_private *id_priv = to_priv(id);
	struct cma_multicast *mc, **pos;
	struct sn_addr a;
	int32_t reported = 0;
	int ret, addrlen;

	addrlen = ucma_addrlen(addr);
	if (!addrlen)
		return ERR(EINVAL);
	pthread_mutex_lock(&id_priv->mut);
	for (pos = &id_priv->mc_list; *pos; pos = &(*pos)->next)
		if (!memcmp(&(*pos)->addr, addr, addrlen))
			break;
	mc = *pos;
	if (*pos)
		*pos = mc->next;
	pthread_mutex_unlock(&id_priv->mut);
	if (!mc)
		return ERR(EADDRNOTAVAIL);
	if (id->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(id->qp, &mc->mgid, mc->mlid);
	ret = ucma_to_engine(addr, &a);
	if (!ret)
		ret = sn_cm->leave(id_priv->h, &a, &reported);
	if (ret) {
		ret = ERR(ret);
		goto free;
	}
	pthread_mutex_lock(&id_priv->mut);
	while (mc->events_completed < reported)
		pthread_cond_wait(&mc->cond, &id_priv->mut);
	pthread_mutex_unlock(&id_priv->mut);
free:
	pthread_cond_destroy(&mc->cond);
	free(mc);
	return ret;
}

static void ucma_complete_event(struct cma_id_private *id_priv)
{
	pthread_mutex_lock(&id_priv->mut);
	id_priv->events_completed++;
	pthread_cond_signal(&id_priv->cond);
	pthread_mutex_unlock(&id_priv->mut);
}

static void ucma_complete_mc_event(struct cma_multicast *mc)
{
	pthread_mutex_lock(&mc->id_priv->mut);
	mc->events_completed++;
	pthread_cond_signal(&mc->cond);
	mc->id_priv->events_completed++;
	pthread_cond_signal(&mc->id_priv->cond);
	pthread_mutex_unlock(&mc->id_priv->mut);
}

SN_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cma_event *evt;

	if (!event)
		return ERR(EINVAL);
	evt = (struct cma_event *)event;
	if (evt->mc)
		ucma_complete_mc_event(evt->mc);
	else
		ucma_complete_event(evt->id_priv);
	free(evt);
	return 0;
}

static void ucma_process_addr_resolved(struct cma_event *evt)
{
	evt->event.status = ucma_query_route(&evt->id_priv->id);
	if (evt->event.status)
		evt->event.event = RDMA_CM_EVENT_ADDR_ERROR;
}

static void ucma_process_route_resolved(struct cma_event *evt)
{
	evt->event.status = ucma_query_route(&evt->id_priv->id);
	if (evt->event.status)
		evt->event.event = RDMA_CM_EVENT_ROUTE_ERROR;
}

/* ucma_process_conn_req makes the C ID of a connection request: child,
 * which the engine's ID h took as its cookie. */
static int ucma_process_conn_req(struct cma_event *evt, struct cma_id_private *child, sn_handle h)
{
	struct cma_id_private *listen = evt->id_priv;
	int ret;

	/* On the listener's channel, which ucma_init_id cannot fail with. */
	ucma_init_id(child, listen->id.channel, listen->id.context, listen->id.ps, listen->id.qp_type);
	child->h = h;
	evt->event.listen_id = &listen->id;
	evt->event.id = &child->id;
	child->initiator_depth = evt->event.param.conn.initiator_depth;
	child->responder_resources = evt->event.param.conn.responder_resources;
	if (listen->sync) {
		ret = rdma_migrate_id(&child->id, NULL);
		if (ret)
			goto err2;
	}
	ret = ucma_query_route(&child->id);
	if (ret)
		goto err2;
	return 0;
err2:
	rdma_destroy_id(&child->id);
	ucma_complete_event(listen);
	return ret;
}

static int ucma_process_conn_resp(struct cma_id_private *id_priv)
{
	int ret;

	ret = ucma_modify_qp_rtr(&id_priv->id, RDMA_MAX_RESP_RES);
	if (ret)
		goto err;
	ret = ucma_modify_qp_rts(&id_priv->id, RDMA_MAX_INIT_DEPTH);
	if (ret)
		goto err;
	/* librdmacm's ACCEPT on an active ID: the CM sends the RTU. */
	if ((ret = sn_cm->accept(id_priv->h, NULL))) {
		ret = ERR(ret);
		goto err;
	}
	return 0;
err:
	ucma_modify_qp_err(&id_priv->id);
	return ret;
}

static int ucma_process_join(struct cma_event *evt)
{
	evt->mc->mgid = evt->event.param.ud.ah_attr.grh.dgid;
	evt->mc->mlid = evt->event.param.ud.ah_attr.dlid;
	if (!evt->id_priv->id.qp)
		return 0;
	if (evt->mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return 0;
	return rdma_seterrno(ibv_attach_mcast(evt->id_priv->id.qp, &evt->mc->mgid, evt->mc->mlid));
}

static void ucma_copy_conn_event(struct cma_event *event, const struct sn_cm_event *src)
{
	struct rdma_conn_param *dst = &event->event.param.conn;

	dst->private_data_len = src->private_data_len;
	if (src->private_data_len) {
		dst->private_data = &event->private_data;
		memcpy(&event->private_data, src->private_data, src->private_data_len);
	}
	dst->responder_resources = src->responder_resources;
	dst->initiator_depth = src->initiator_depth;
	dst->flow_control = src->flow_control;
	dst->retry_count = src->retry_count;
	dst->rnr_retry_count = src->rnr_retry_count;
	dst->srq = src->srq;
	dst->qp_num = src->qp_num;
}

static void ucma_copy_ud_event(struct cma_event *event, const struct sn_cm_event *src)
{
	struct rdma_ud_param *dst = &event->event.param.ud;

	dst->private_data_len = src->private_data_len;
	if (src->private_data_len) {
		dst->private_data = &event->private_data;
		memcpy(&event->private_data, src->private_data, src->private_data_len);
	}
	sn_ah_to_ibv(&src->ah_attr, &dst->ah_attr);
	dst->qp_num = src->qp_num;
	dst->qkey = src->qkey;
}

SN_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);

	if (id->qp)
		return ERR(EINVAL);
	NEED_ENGINE(id_priv);
	/* With no QP, ucma_process_conn_resp only sends the RTU. */
	return ucma_process_conn_resp(id_priv);
}

SN_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cma_id_private *child = NULL;
	struct sn_cm_event resp;
	struct cma_event *evt;
	int ret;

	if (!event)
		return ERR(EINVAL);
	evt = malloc(sizeof(*evt));
	if (!evt)
		return ERR(ENOMEM);
retry:
	memset(evt, 0, sizeof(*evt));
	/* The C ID of a connection request, should the event be one. */
	if (!child && !(child = calloc(1, sizeof(*child)))) {
		free(evt);
		return ERR(ENOMEM);
	}
	pthread_mutex_lock(&chan_mut);
	to_chan(channel)->waiters++;
	pthread_mutex_unlock(&chan_mut);
	ret = ucma_wait(to_chan(channel), (uintptr_t)child, &resp);
	pthread_mutex_lock(&chan_mut);
	to_chan(channel)->waiters--;
	pthread_mutex_unlock(&chan_mut);
	if (ret) {
		free(child);
		free(evt);
		return ERR(ret);
	}
	evt->id_priv = (struct cma_id_private *)(uintptr_t)resp.cookie;
	evt->event.id = &evt->id_priv->id;
	evt->event.event = resp.event;
	evt->event.status = resp.status;

	switch (resp.event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ucma_process_addr_resolved(evt);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ucma_process_route_resolved(evt);
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (ucma_is_ud_qp(evt->id_priv->id.qp_type))
			ucma_copy_ud_event(evt, &resp);
		else
			ucma_copy_conn_event(evt, &resp);
		ret = ucma_process_conn_req(evt, child, resp.id);
		if (ret) {
			child = NULL; /* freed */
			goto retry;
		}
		child = NULL;
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		ucma_copy_conn_event(evt, &resp);
		if (!evt->id_priv->id.qp) {
			evt->event.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
		} else {
			evt->event.status = ucma_process_conn_resp(evt->id_priv);
			if (!evt->event.status) {
				evt->event.event = RDMA_CM_EVENT_ESTABLISHED;
			} else {
				evt->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
				evt->id_priv->connect_error = 1;
			}
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ucma_is_ud_qp(evt->id_priv->id.qp_type)) {
			ucma_copy_ud_event(evt, &resp);
			break;
		}
		ucma_copy_conn_event(evt, &resp);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (evt->id_priv->connect_error) {
			ucma_complete_event(evt->id_priv);
			goto retry;
		}
		ucma_copy_conn_event(evt, &resp);
		ucma_modify_qp_err(evt->event.id);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (evt->id_priv->connect_error) {
			ucma_complete_event(evt->id_priv);
			goto retry;
		}
		ucma_copy_conn_event(evt, &resp);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		evt->mc = (struct cma_multicast *)(uintptr_t)resp.mc_cookie;
		ucma_copy_ud_event(evt, &resp);
		evt->event.param.ud.private_data = evt->mc->context;
		evt->event.status = ucma_process_join(evt);
		if (evt->event.status)
			evt->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
		break;
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		evt->mc = (struct cma_multicast *)(uintptr_t)resp.mc_cookie;
		evt->event.param.ud.private_data = evt->mc->context;
		break;
	default:
		if (ucma_is_ud_qp(evt->id_priv->id.qp_type))
			ucma_copy_ud_event(evt, &resp);
		else
			ucma_copy_conn_event(evt, &resp);
		break;
	}
	free(child);
	*event = &evt->event;
	return 0;
}

SN_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		[RDMA_CM_EVENT_ADDR_RESOLVED] = "RDMA_CM_EVENT_ADDR_RESOLVED",
		[RDMA_CM_EVENT_ADDR_ERROR] = "RDMA_CM_EVENT_ADDR_ERROR",
		[RDMA_CM_EVENT_ROUTE_RESOLVED] = "RDMA_CM_EVENT_ROUTE_RESOLVED",
		[RDMA_CM_EVENT_ROUTE_ERROR] = "RDMA_CM_EVENT_ROUTE_ERROR",
		[RDMA_CM_EVENT_CONNECT_REQUEST] = "RDMA_CM_EVENT_CONNECT_REQUEST",
		[RDMA_CM_EVENT_CONNECT_RESPONSE] = "RDMA_CM_EVENT_CONNECT_RESPONSE",
		[RDMA_CM_EVENT_CONNECT_ERROR] = "RDMA_CM_EVENT_CONNECT_ERROR",
		[RDMA_CM_EVENT_UNREACHABLE] = "RDMA_CM_EVENT_UNREACHABLE",
		[RDMA_CM_EVENT_REJECTED] = "RDMA_CM_EVENT_REJECTED",
		[RDMA_CM_EVENT_ESTABLISHED] = "RDMA_CM_EVENT_ESTABLISHED",
		[RDMA_CM_EVENT_DISCONNECTED] = "RDMA_CM_EVENT_DISCONNECTED",
		[RDMA_CM_EVENT_DEVICE_REMOVAL] = "RDMA_CM_EVENT_DEVICE_REMOVAL",
		[RDMA_CM_EVENT_MULTICAST_JOIN] = "RDMA_CM_EVENT_MULTICAST_JOIN",
		[RDMA_CM_EVENT_MULTICAST_ERROR] = "RDMA_CM_EVENT_MULTICAST_ERROR",
		[RDMA_CM_EVENT_ADDR_CHANGE] = "RDMA_CM_EVENT_ADDR_CHANGE",
		[RDMA_CM_EVENT_TIMEWAIT_EXIT] = "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}

SN_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	struct cma_id_private *id_priv = to_priv(id);
	int err;

	if (!id_priv->h) {
		/* Given to the engine with the ID (ucma_engine_id). */
		struct cma_option *o;

		if (optlen > sizeof(o->val) || !optval)
			return ERR(EINVAL);
		if (id_priv->nopts == (int)(sizeof(id_priv->opts) / sizeof(id_priv->opts[0])))
			return ERR(ENOMEM);
		o = &id_priv->opts[id_priv->nopts++];
		o->level = level;
		o->name = optname;
		o->len = optlen;
		memcpy(o->val, optval, optlen);
		return 0;
	}
	if ((err = sn_cm->set_option(id_priv->h, level, optname, optval, optlen)))
		return ERR(err);
	return 0;
}

SN_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cma_id_private *id_priv = to_priv(id);
	int32_t reported = 0;
	int sync, err;

	if (id_priv->sync && !channel)
		return ERR(EINVAL);
	if ((sync = (channel == NULL))) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
	}
	if (id_priv->h) {
		pthread_mutex_lock(&mut);
		err = ucma_channel_locked(to_chan(channel)) ? errno : 0;
		pthread_mutex_unlock(&mut);
		if (!err)
			err = sn_cm->migrate_id(id_priv->h, to_chan(channel)->h, &reported);
		if (err) {
			if (sync)
				rdma_destroy_event_channel(channel);
			return ERR(err);
		}
	}
	if (id_priv->sync) {
		if (id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		rdma_destroy_event_channel(id->channel);
	}
	pthread_mutex_lock(&id_priv->mut);
	id_priv->sync = sync;
	id->channel = channel;
	while (id_priv->events_completed < reported)
		pthread_cond_wait(&id_priv->cond, &id_priv->mut);
	pthread_mutex_unlock(&id_priv->mut);
	return 0;
}

static int ucma_passive_ep(struct rdma_cm_id *id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			   struct ibv_qp_init_attr *qp_init_attr)
{
	struct cma_id_private *id_priv = to_priv(id);
	int ret;

	ret = rdma_bind_addr(id, res->ai_src_addr);
	if (ret)
		return ret;
	if (pd)
		id->pd = pd;
	if (qp_init_attr) {
		id_priv->qp_init_attr = malloc(sizeof(*qp_init_attr));
		if (!id_priv->qp_init_attr)
			return ERR(ENOMEM);
		*id_priv->qp_init_attr = *qp_init_attr;
		id_priv->qp_init_attr->qp_type = res->ai_qp_type;
	}
	return 0;
}

SN_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct cma_id_private *id_priv;
	struct rdma_cm_id *cm_id;
	int ret;

	ret = rdma_create_id2(NULL, &cm_id, NULL, res->ai_port_space, res->ai_qp_type);
	if (ret)
		return ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = ucma_passive_ep(cm_id, res, pd, qp_init_attr);
		if (ret)
			goto err;
		goto out;
	}
	ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cm_id, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		ret = rdma_create_qp(cm_id, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len) {
		id_priv = to_priv(cm_id);
		id_priv->connect = malloc(res->ai_connect_len);
		if (!id_priv->connect) {
			ret = ERR(ENOMEM);
			goto err;
		}
		memcpy(id_priv->connect, res->ai_connect, res->ai_connect_len);
		id_priv->connect_len = res->ai_connect_len;
	}
out:
	*id = cm_id;
	return 0;
err:
	rdma_destroy_ep(cm_id);
	return ret;
}

SN_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct cma_id_private *id_priv = to_priv(id);

	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	free(id_priv->qp_init_attr);
	id_priv->qp_init_attr = NULL;
	rdma_destroy_id(id);
}

SN_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return ucma_get_port(&id->route.addr.src_addr);
}

SN_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return ucma_get_port(&id->route.addr.dst_addr);
}

SN_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cma_id_private *id_priv;

	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return ERR(EINVAL);
	id_priv = to_priv(id);
	id_priv->local_ece.vendor_id = ece->vendor_id;
	id_priv->local_ece.options = ece->options;
	return 0;
}

SN_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cma_id_private *id_priv;

	if (!id || id->qp || !ece)
		return ERR(EINVAL);
	id_priv = to_priv(id);
	ece->vendor_id = id_priv->remote_ece.vendor_id;
	ece->options = id_priv->remote_ece.options;
	ece->comp_mask = 0;
	return 0;
}
