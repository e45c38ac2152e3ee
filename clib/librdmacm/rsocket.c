/*
 * rsocket.c - the rsocket calls of librdmacm (<rdma/rsocket.h>), which
 * rstream, riostream, rcopy and librspreload.so use: stream sockets over
 * RC QPs that speak rdma-core's rsockets protocol (librdmacm/rsocket.c),
 * so that an rsocket over softnic talks to one over rxe.
 *
 * The protocol, as rdma-core's:
 *  - Connecting: the REQ and the REP carry struct rs_conn_data: version 1,
 *    flags (RS_CONN_FLAG_NET when the sender is big-endian,
 *    RS_CONN_FLAG_IOMAP), the receive credits (the receive queue's size),
 *    the size of the target iomap, and two buffer descriptors (address,
 *    rkey, length; big-endian): the sender's target SGL (RS_SGL_SIZE
 *    entries the peer RDMA-writes buffer descriptors into) and the first
 *    half of its receive ring.
 *  - Data: RDMA WRITE WITH IMMEDIATE into the peer's receive ring, at the
 *    descriptor the peer last wrote into our target SGL; the immediate
 *    value says what it is (bits 31-29 an RS_OP_*, bits 28-0 its data:
 *    the length of the data).
 *  - Credits: each write consumes one of the peer's receives; the
 *    receiver returns receive credits and ring space with RS_OP_SGL, an
 *    RDMA WRITE WITH IMMEDIATE of a descriptor of the freed half of its
 *    ring into the sender's target SGL whose immediate value is the
 *    sequence number up to which the sender may write (zero-length when
 *    only credits are returned).
 *  - Control: RS_OP_CTRL, zero-length, for shutdown, disconnect and
 *    keepalive; at most RS_QP_CTRL_SIZE control messages are in flight.
 *
 * An rsocket's number is its CM ID's event channel fd (as rdma-core's:
 * the ID is synchronous, its channel private), so it is distinct from
 * every other descriptor of the process while the rsocket lives, and
 * rpoll waits on real fds: the completion channel of the rsocket's CQ and
 * its CM channel, after a short spin. softnic runs no service threads:
 * an rsocket drives its CM (connection requests, the ESTABLISHED of a
 * non-blocking accept, DISCONNECTED) when the program calls it or waits
 * in rpoll, so a listener takes a connection when the program calls
 * raccept.
 *
 *  - Direct writes (riomap, riowrite): a receiver registers a buffer and
 *    writes its descriptor into the sender's target iomap (after the
 *    target SGL; its size in the connection data) with RS_OP_IOMAP_SGL;
 *    the sender RDMA-WRITEs into it without immediate data.
 *
 * Not done (each fails with the errno named): SOCK_DGRAM rsockets and
 * AF_IB (ENOTSUP, as rdma-core answers a type it does not take: preload
 * then falls back to a kernel socket), RDMA_ROUTE (ENOTSUP), the iWARP
 * message-send mode, wake_up_interval of rdma-core's
 * configuration files (softnic has no rpoll wake-up thread).
 */
#define _GNU_SOURCE
#include <byteswap.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h> /* madvise, PROT_WRITE */
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cma.h"

/* ---- The protocol's constants (rsocket.c) ---- */

#define RS_OLAP_START_SIZE 2048
#define RS_MAX_TRANSFER 65536
#define RS_SNDLOWAT 2048
#define RS_QP_MIN_SIZE 16
#define RS_QP_MAX_SIZE 0xFFFE
#define RS_QP_CTRL_SIZE 4 /* a power of 2 */
#define RS_CONN_RETRIES 6
#define RS_SGL_SIZE 2

/* The defaults of rsocket.c, which files of RS_CONF_DIR change
 * (rs_configure). */
#define RS_CONF_DIR "/etc/rdma/rsocket"
static uint16_t def_iomap_size = 0;
static uint16_t def_inline = 64;
static uint16_t def_sqsize = 384;
static uint16_t def_rqsize = 384;
static uint32_t def_mem = 1 << 17;
static uint32_t def_wmem = 1 << 17;
static uint32_t polling_time_us = 10;

/* The operation in an immediate value's bits 31-29. */
enum {
	RS_OP_DATA,
	RS_OP_RSVD_DATA_MORE,
	RS_OP_WRITE, /* not on the wire: a direct write's wr_id */
	RS_OP_RSVD_DRA_MORE,
	RS_OP_SGL,
	RS_OP_RSVD,
	RS_OP_IOMAP_SGL,
	RS_OP_CTRL
};

static inline uint32_t rs_msg_set(uint32_t op, uint32_t data)
{
	return (op << 29) | data;
}

static inline uint32_t rs_msg_op(uint32_t imm)
{
	return imm >> 29;
}

static inline uint32_t rs_msg_data(uint32_t imm)
{
	return imm & 0x1FFFFFFF;
}

/* An RS_OP_CTRL's data. */
enum {
	RS_CTRL_DISCONNECT,
	RS_CTRL_KEEPALIVE,
	RS_CTRL_SHUTDOWN
};

/* A receive's wr_id has bit 63 set; a send's is its immediate value. */
#define RS_WR_ID_FLAG_RECV (((uint64_t)1) << 63)

/* A buffer descriptor, in a target SGL and in the connection data. */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

/* An entry of the target iomap (riomap), which follows the target SGL. */
struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

#define RS_MAX_CTRL_MSG (sizeof(struct rs_sge))
#define RS_CONN_FLAG_NET (1 << 0)
#define RS_CONN_FLAG_IOMAP (1 << 1)

/* The private data of the REQ and the REP (rsocket.c: struct rs_conn_data). */
struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	__be16 credits;
	uint8_t reserved[3];
	uint8_t target_iomap_size;
	struct rs_sge target_sgl;
	struct rs_sge data_buf;
};

_Static_assert(sizeof(struct rs_conn_data) == 40, "rs_conn_data is rsocket.c's");

/* An rsocket's states, ordered passive, connecting, connected,
 * disconnected (rsocket.c: enum rs_state). */
enum rs_state {
	rs_init,
	rs_bound = 0x0001,
	rs_listening = 0x0002,
	rs_opening = 0x0004,
	rs_resolving_addr = rs_opening | 0x0010,
	rs_resolving_route = rs_opening | 0x0020,
	rs_connecting = rs_opening | 0x0040,
	rs_accepting = rs_opening | 0x0080,
	rs_connected = 0x0100,
	rs_writable = 0x0200,
	rs_readable = 0x0400,
	rs_connect_rdwr = rs_connected | rs_readable | rs_writable,
	rs_connect_error = 0x0800,
	rs_disconnected = 0x1000,
	rs_error = 0x2000,
};

#define RS_OPT_SWAP_SGL (1 << 0)

/* A received message: an RS_OP_DATA's length, queued for rrecv. */
struct rs_msg {
	uint32_t op;
	uint32_t data;
};

/* ---- An rsocket ---- */

/*
 * An rsocket. The static functions that take one run with its mu held
 * (the calls take it), except rs_free and those that say otherwise;
 * rs_cq_wait drops it while it waits, so that a thread in rsend and one
 * in rrecv each make progress (as rsocket.c's cq_lock and cq_wait_lock).
 */
struct rsocket {
	int index; /* the rsocket's number: its ID's channel fd */
	pthread_mutex_t mu;
	struct rdma_cm_id *cm_id;

	/* The rest guarded by mu. */
	int state;
	int err; /* SO_ERROR */
	int opts;
	int fd_flags, fs_flags;
	uint64_t so_opts, tcp_opts, ipv6_opts;
	int ipv4_tos;
	unsigned int keepalive_time;

	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	int target_iomap_size;
	int retries;

	unsigned int ctrl_seqno, ctrl_max_seqno;
	uint16_t sseq_no, sseq_comp, rseq_no, rseq_comp;

	int remote_sge;
	struct rs_sge remote_sgl, remote_iomap;

	struct ibv_mr *target_mr;
	int target_sge;
	void *target_buffer_list;
	volatile struct rs_sge *target_sgl; /* written by the peer */

	int rbuf_bytes_avail, rbuf_free_offset, rbuf_offset;
	struct ibv_mr *rmr;
	uint8_t *rbuf;

	int sbuf_bytes_avail;
	struct ibv_mr *smr;
	uint8_t *sbuf;
	struct ibv_sge ssgl[2];

	int sqe_avail;
	int rmsg_head, rmsg_tail;
	struct rs_msg *rmsg;

	bool cq_armed;

	/* riomap's registrations: those the peer may write, announced in
	 * its target iomap at their index (remote_iomap.length of them),
	 * and the read-only ones. */
	struct rs_iomap_mr *remote_iomappings;
	struct rs_iomap_mr *local_iomappings; /* a list */
	bool iomap_pending;		      /* some to announce */
	struct rs_iomap *target_iomap;	      /* written by the peer */

	/* Keepalive (SO_KEEPALIVE), guarded by ka_mut. */
	bool ka_on;
	uint64_t ka_due_us;
	struct rsocket *ka_next;
};

/* A registration of riomap (as rsocket.c: struct rs_iomap_mr). */
struct rs_iomap_mr {
	uint64_t offset;
	struct ibv_mr *mr;
	int index; /* -1: not announced, in the local list */
	bool pending;
	struct rs_iomap_mr *next;
};

/* The rsockets by number. */
static pthread_mutex_t rs_mut = PTHREAD_MUTEX_INITIALIZER;
static struct rsocket **rs_table; /* guarded by rs_mut */
static int rs_table_len;	  /* guarded by rs_mut */

static int rs_insert(struct rsocket *rs, int index)
{
	int ret = 0;

	pthread_mutex_lock(&rs_mut);
	if (index >= rs_table_len) {
		int n = index + 64;
		struct rsocket **t = realloc(rs_table, n * sizeof(*t));

		if (!t) {
			ret = ERR(ENOMEM);
			goto out;
		}
		memset(t + rs_table_len, 0, (n - rs_table_len) * sizeof(*t));
		rs_table = t;
		rs_table_len = n;
	}
	rs_table[index] = rs;
	rs->index = index;
out:
	pthread_mutex_unlock(&rs_mut);
	return ret;
}

static void rs_remove(struct rsocket *rs)
{
	pthread_mutex_lock(&rs_mut);
	if (rs->index >= 0 && rs->index < rs_table_len && rs_table[rs->index] == rs)
		rs_table[rs->index] = NULL;
	pthread_mutex_unlock(&rs_mut);
	rs->index = -1;
}

/* rs_lookup is the rsocket numbered socket, NULL when there is none. */
static struct rsocket *rs_lookup(int socket)
{
	struct rsocket *rs = NULL;

	pthread_mutex_lock(&rs_mut);
	if (socket >= 0 && socket < rs_table_len)
		rs = rs_table[socket];
	pthread_mutex_unlock(&rs_mut);
	return rs;
}

/* rs_conf reads an unsigned number from the file name of RS_CONF_DIR
 * into *v, which stays as it is when there is none. */
static void rs_conf(const char *name, uint32_t *v)
{
	char path[64];
	unsigned int u;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", RS_CONF_DIR, name);
	if (!(f = fopen(path, "re")))
		return;
	if (fscanf(f, "%u", &u) == 1)
		*v = u;
	fclose(f);
}

static void rs_conf16(const char *name, uint16_t *v)
{
	uint32_t u = *v;

	rs_conf(name, &u);
	*v = (uint16_t)u;
}

static int rs_value_to_scale(int value, int bits);
static int rs_scale_to_value(int value, int bits);

/* as rsocket.c: rs_configure: the defaults from the files an
 * administrator left in RS_CONF_DIR, once. */
static void rs_configure(void)
{
	rs_conf("polling_time", &polling_time_us);
	rs_conf16("inline_default", &def_inline);
	rs_conf16("sqsize_default", &def_sqsize);
	rs_conf16("rqsize_default", &def_rqsize);
	rs_conf("mem_default", &def_mem);
	if (def_mem < 1)
		def_mem = 1;
	rs_conf("wmem_default", &def_wmem);
	if (def_wmem < RS_SNDLOWAT)
		def_wmem = RS_SNDLOWAT << 1;
	rs_conf16("iomap_size", &def_iomap_size);
	def_iomap_size = (uint8_t)rs_value_to_scale((uint16_t)rs_scale_to_value(def_iomap_size, 8), 8);
}

static pthread_once_t rs_configured = PTHREAD_ONCE_INIT;

/* as rsocket.c: rs_alloc; sizes inherited from a listener. */
static struct rsocket *rs_alloc(struct rsocket *inherited)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->index = -1;
	pthread_mutex_init(&rs->mu, NULL);
	if (inherited) {
		rs->sbuf_size = inherited->sbuf_size;
		rs->rbuf_size = inherited->rbuf_size;
		rs->sq_inline = inherited->sq_inline;
		rs->sq_size = inherited->sq_size;
		rs->rq_size = inherited->rq_size;
		rs->ctrl_max_seqno = inherited->ctrl_max_seqno;
		rs->target_iomap_size = inherited->target_iomap_size;
		rs->fd_flags = inherited->fd_flags;
		rs->fs_flags = inherited->fs_flags;
	} else {
		rs->sbuf_size = def_wmem;
		rs->rbuf_size = def_mem;
		rs->sq_inline = def_inline;
		rs->sq_size = def_sqsize;
		rs->rq_size = def_rqsize;
		rs->ctrl_max_seqno = RS_QP_CTRL_SIZE;
		rs->target_iomap_size = def_iomap_size;
	}
	return rs;
}

/* forksafe_alloc is page-aligned zeroed memory a forked child does not
 * share (as rsocket.c: forksafe_alloc). */
static void *forksafe_alloc(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	len = (len + page - 1) & ~(page - 1);
	if (posix_memalign(&p, page, len))
		return NULL;
	memset(p, 0, len);
	madvise(p, len, MADV_DONTFORK);
	return p;
}

static void rs_free_buf(struct ibv_mr *mr, void *buf)
{
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
}

/* rs_free_iomappings deregisters what riomap registered. */
static void rs_free_iomappings(struct rsocket *rs)
{
	struct rs_iomap_mr *iomr;
	uint32_t i;

	for (i = 0; rs->remote_iomappings && i < rs->remote_iomap.length; i++)
		if (rs->remote_iomappings[i].mr)
			ibv_dereg_mr(rs->remote_iomappings[i].mr);
	free(rs->remote_iomappings);
	while ((iomr = rs->local_iomappings)) {
		rs->local_iomappings = iomr->next;
		ibv_dereg_mr(iomr->mr);
		free(iomr);
	}
}

/* as rsocket.c: rs_free. */
static void rs_free(struct rsocket *rs)
{
	rs_remove(rs);
	free(rs->rmsg);
	rs_free_buf(rs->smr, rs->sbuf);
	rs_free_buf(rs->rmr, rs->rbuf);
	rs_free_buf(rs->target_mr, rs->target_buffer_list);
	rs_free_iomappings(rs);
	if (rs->cm_id) {
		if (rs->cm_id->qp)
			rdma_destroy_qp(rs->cm_id);
		rdma_destroy_id(rs->cm_id);
	}
	pthread_mutex_destroy(&rs->mu);
	free(rs);
}

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0 ? -1 : 0;
}

/* rs_nonblocking says whether a call with flags may not wait. */
static bool rs_nonblocking(struct rsocket *rs, int flags)
{
	return (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* ---- Connection setup ---- */

/* as rsocket.c: rs_set_qp_size. */
static void rs_set_qp_size(struct rsocket *rs)
{
	int max = ucma_max_qpsize(rs->cm_id);

	if (max > RS_QP_MAX_SIZE)
		max = RS_QP_MAX_SIZE;
	if (rs->sq_size > max)
		rs->sq_size = max;
	else if (rs->sq_size < RS_QP_MIN_SIZE)
		rs->sq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size > max)
		rs->rq_size = max;
	else if (rs->rq_size < RS_QP_MIN_SIZE)
		rs->rq_size = RS_QP_MIN_SIZE;
}

/* as rsocket.c: rs_init_bufs: the send buffer (and the control messages'
 * buffers after it when they cannot go inline), the target SGL and
 * iomap the peer writes, and the receive ring the peer writes data to. */
static int rs_init_bufs(struct rsocket *rs)
{
	size_t sbuf_len = rs->sbuf_size, tlen;

	rs->rmsg = calloc(rs->rq_size + 1, sizeof(*rs->rmsg));
	if (!rs->rmsg)
		return ERR(ENOMEM);
	if (rs->sq_inline < RS_MAX_CTRL_MSG)
		sbuf_len += RS_MAX_CTRL_MSG * RS_QP_CTRL_SIZE;
	if (!(rs->sbuf = forksafe_alloc(sbuf_len)))
		return ERR(ENOMEM);
	if (!(rs->smr = rdma_reg_msgs(rs->cm_id, rs->sbuf, sbuf_len)))
		return -1;

	tlen = sizeof(struct rs_sge) * RS_SGL_SIZE + sizeof(struct rs_iomap) * rs->target_iomap_size;
	if (!(rs->target_buffer_list = forksafe_alloc(tlen)))
		return ERR(ENOMEM);
	if (!(rs->target_mr = rdma_reg_write(rs->cm_id, rs->target_buffer_list, tlen)))
		return -1;
	rs->target_sgl = rs->target_buffer_list;
	if (rs->target_iomap_size)
		rs->target_iomap = (struct rs_iomap *)((struct rs_sge *)rs->target_buffer_list + RS_SGL_SIZE);

	if (!(rs->rbuf = forksafe_alloc(rs->rbuf_size)))
		return ERR(ENOMEM);
	if (!(rs->rmr = rdma_reg_write(rs->cm_id, rs->rbuf, rs->rbuf_size)))
		return -1;

	rs->ssgl[0].addr = rs->ssgl[1].addr = (uintptr_t)rs->sbuf;
	rs->ssgl[0].lkey = rs->ssgl[1].lkey = rs->smr->lkey;
	rs->sbuf_bytes_avail = rs->sbuf_size;
	rs->rbuf_free_offset = rs->rbuf_size >> 1;
	rs->rbuf_bytes_avail = rs->rbuf_size >> 1;
	rs->sqe_avail = rs->sq_size - rs->ctrl_max_seqno;
	rs->rseq_comp = rs->rq_size >> 1;
	return 0;
}

/* as rsocket.c: rs_create_cq: one CQ for sends and receives, its channel
 * non-blocking (the rsocket polls its fd), armed once. */
static int rs_create_cq(struct rsocket *rs)
{
	struct rdma_cm_id *id = rs->cm_id;

	id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
	if (!id->recv_cq_channel)
		return -1;
	id->recv_cq = ibv_create_cq(id->verbs, rs->sq_size + rs->rq_size, id, id->recv_cq_channel, 0);
	if (!id->recv_cq) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq_channel = NULL;
		return -1;
	}
	id->send_cq_channel = id->recv_cq_channel;
	id->send_cq = id->recv_cq;
	if (set_nonblock(id->recv_cq_channel->fd, true))
		return -1;
	ibv_req_notify_cq(id->recv_cq, 0);
	rs->cq_armed = true;
	return 0;
}

/* as rsocket.c: rs_post_recv: a receive without buffers (the data comes
 * by RDMA WRITE; the receive takes only the immediate value). */
static int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = { .wr_id = RS_WR_ID_FLAG_RECV }, *bad;

	return rdma_seterrno(ibv_post_recv(rs->cm_id->qp, &wr, &bad));
}

/* as rsocket.c: rs_create_ep: the CQ, the RC QP (every send signalled),
 * the buffers, and a full receive queue. */
static int rs_create_ep(struct rsocket *rs)
{
	struct ibv_qp_init_attr attr;
	int i;

	rs_set_qp_size(rs);
	if (rs_create_cq(rs))
		return -1;
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = rs;
	attr.send_cq = rs->cm_id->send_cq;
	attr.recv_cq = rs->cm_id->recv_cq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(rs->cm_id, NULL, &attr))
		return -1;
	rs->sq_inline = attr.cap.max_inline_data;
	if (rs_init_bufs(rs))
		return -1;
	for (i = 0; i < rs->rq_size; i++)
		if (rs_post_recv(rs))
			return -1;
	return 0;
}

/* as rsocket.c: rs_value_to_scale and rs_scale_to_value: the iomap's
 * size in 8 bits. */
static int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (1 << (bits - 1)) | (value >> bits);
}

static int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ? value : (value & ~(1 << (bits - 1))) << bits;
}

static bool rs_host_is_net(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN;
}

/* as rsocket.c: rs_format_conn_data. */
static void rs_format_conn_data(struct rsocket *rs, struct rs_conn_data *conn)
{
	memset(conn, 0, sizeof(*conn));
	conn->version = 1;
	conn->flags = RS_CONN_FLAG_IOMAP | (rs_host_is_net() ? RS_CONN_FLAG_NET : 0);
	conn->credits = htobe16(rs->rq_size);
	conn->target_iomap_size = (uint8_t)rs_value_to_scale(rs->target_iomap_size, 8);
	conn->target_sgl.addr = htobe64((uintptr_t)rs->target_sgl);
	conn->target_sgl.length = htobe32(RS_SGL_SIZE);
	conn->target_sgl.key = htobe32(rs->target_mr->rkey);
	conn->data_buf.addr = htobe64((uintptr_t)rs->rbuf);
	conn->data_buf.length = htobe32(rs->rbuf_size >> 1);
	conn->data_buf.key = htobe32(rs->rmr->rkey);
}

/* as rsocket.c: rs_save_conn_data: the peer's target SGL, its first
 * receive buffer (our first write target) and its credits. */
static void rs_save_conn_data(struct rsocket *rs, const struct rs_conn_data *conn)
{
	rs->remote_sgl.addr = be64toh(conn->target_sgl.addr);
	rs->remote_sgl.length = be32toh(conn->target_sgl.length);
	rs->remote_sgl.key = be32toh(conn->target_sgl.key);
	rs->remote_sge = 1;
	if (rs_host_is_net() != !!(conn->flags & RS_CONN_FLAG_NET))
		rs->opts = RS_OPT_SWAP_SGL;
	if (conn->flags & RS_CONN_FLAG_IOMAP) {
		rs->remote_iomap.addr = rs->remote_sgl.addr + sizeof(struct rs_sge) * rs->remote_sgl.length;
		rs->remote_iomap.length = rs_scale_to_value(conn->target_iomap_size, 8);
		rs->remote_iomap.key = rs->remote_sgl.key;
	}
	rs->target_sgl[0].addr = be64toh(conn->data_buf.addr);
	rs->target_sgl[0].length = be32toh(conn->data_buf.length);
	rs->target_sgl[0].key = be32toh(conn->data_buf.key);
	rs->sseq_comp = be16toh(conn->credits);
}

/* rs_connected_cm makes the ID's channel non-blocking once connected:
 * from then on the rsocket reads its CM events only when its fd says
 * one is there (DISCONNECTED). */
static void rs_connected_cm(struct rsocket *rs)
{
	rs->state = rs_connect_rdwr;
	set_nonblock(rs->cm_id->channel->fd, true);
}

/* rs_connect_param is rs_do_connect's conn param: flow control, retries
 * and RNR retries 7 (as rsocket.c). */
static void rs_connect_param(struct rdma_conn_param *param, struct rs_conn_data *creq)
{
	memset(param, 0, sizeof(*param));
	param->private_data = creq;
	param->private_data_len = sizeof(*creq);
	param->flow_control = 1;
	param->retry_count = 7;
	param->rnr_retry_count = 7;
}

static bool would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* rs_resolve_addr and rs_resolve_route start a step of rs_do_connect,
 * its timeout doubling with each retry. */
static int rs_resolve_addr(struct rsocket *rs)
{
	return rdma_resolve_addr(rs->cm_id, NULL, &rs->cm_id->route.addr.dst_addr, 1000 << rs->retries++);
}

static int rs_resolve_route(struct rsocket *rs)
{
	return rdma_resolve_route(rs->cm_id, 1000 << rs->retries++);
}

/* rs_send_req makes the QP and sends the REQ. */
static int rs_send_req(struct rsocket *rs)
{
	struct rdma_conn_param param;
	struct rs_conn_data creq;

	if (rs_create_ep(rs))
		return -1;
	rs_format_conn_data(rs, &creq);
	rs_connect_param(&param, &creq);
	rs->retries = 0;
	return rdma_connect(rs->cm_id, &param);
}

/* rs_got_rep takes the REP's connection data. */
static int rs_got_rep(struct rsocket *rs)
{
	const struct rdma_cm_event *ev = rs->cm_id->event;

	if (!ev || ev->param.conn.private_data_len < sizeof(struct rs_conn_data) ||
	    ((const struct rs_conn_data *)ev->param.conn.private_data)->version != 1)
		return ERR(ENOTSUP);
	rs_save_conn_data(rs, ev->param.conn.private_data);
	rs_connected_cm(rs);
	return 0;
}

/* rs_from_route sends the REQ once the route is resolved and takes the
 * REP (as rsocket.c: rs_do_connect's do_connect and connected). */
static int rs_from_route(struct rsocket *rs)
{
	rs->state = rs_connecting;
	if (rs_send_req(rs))
		return -1;
	return rs_got_rep(rs);
}

/* rs_from_addr resolves the route once the address is resolved. */
static int rs_from_addr(struct rsocket *rs)
{
	rs->retries = 0;
	rs->state = rs_resolving_route;
	if (rs_resolve_route(rs))
		return -1;
	return rs_from_route(rs);
}

/* rs_retry says whether a step that timed out is tried again. */
static bool rs_retry(struct rsocket *rs)
{
	return errno == ETIMEDOUT && rs->retries <= RS_CONN_RETRIES;
}

/*
 * rs_step runs the connection's steps from its state until one would
 * block (EAGAIN, the state then says which) or fails; as rsocket.c:
 * rs_do_connect, each step synchronous on the ID's channel, which is
 * non-blocking when the rsocket is.
 */
static int rs_step(struct rsocket *rs)
{
	switch (rs->state) {
	case rs_init:
	case rs_bound:
		rs->state = rs_resolving_addr;
		if (rs_resolve_addr(rs))
			return -1;
		return rs_from_addr(rs);
	case rs_resolving_addr:
		if (!ucma_complete(rs->cm_id))
			return rs_from_addr(rs);
		while (rs_retry(rs))
			if (!rs_resolve_addr(rs))
				return rs_from_addr(rs);
		return -1;
	case rs_resolving_route:
		if (!ucma_complete(rs->cm_id))
			return rs_from_route(rs);
		while (rs_retry(rs))
			if (!rs_resolve_route(rs))
				return rs_from_route(rs);
		return -1;
	case rs_connecting:
		if (ucma_complete(rs->cm_id))
			return -1;
		return rs_got_rep(rs);
	case rs_accepting:
		if (ucma_complete(rs->cm_id))
			return -1;
		rs_connected_cm(rs);
		return 0;
	default:
		return ERR(EINVAL);
	}
}

/* as rsocket.c: rs_do_connect: 0 once connected, -1 with EINPROGRESS
 * while a non-blocking connection goes on, or the error (kept for
 * SO_ERROR; the rsocket is then in rs_connect_error). Called locked. */
static int rs_do_connect(struct rsocket *rs)
{
	int ret;

	if (rs->state & (rs_connect_error | rs_disconnected | rs_error))
		return ERR(ENOTCONN);
	if (!(rs->state & rs_opening) && rs->state != rs_init && rs->state != rs_bound)
		return (rs->state & rs_connected) ? 0 : ERR(EINVAL);
	ret = rs_step(rs);
	if (ret) {
		if (would_block()) {
			errno = EINPROGRESS;
		} else {
			rs->err = errno;
			rs->state = rs_connect_error;
		}
	}
	return ret;
}

/* ---- Sending ---- */

static void *rs_get_ctrl_buf(struct rsocket *rs)
{
	return rs->sbuf + rs->sbuf_size + RS_MAX_CTRL_MSG * (rs->ctrl_seqno & (RS_QP_CTRL_SIZE - 1));
}

/* as rsocket.c: rs_post_msg: a zero-length RDMA WRITE WITH IMMEDIATE. */
static int rs_post_msg(struct rsocket *rs, uint32_t msg)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htobe32(msg);
	return rdma_seterrno(ibv_post_send(rs->cm_id->qp, &wr, &bad));
}

/* as rsocket.c: rs_post_write_msg: an RDMA WRITE WITH IMMEDIATE of sgl
 * to addr, the immediate value msg (also the wr_id). */
static int rs_post_write_msg(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t msg, int flags,
			     uint64_t addr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = flags;
	wr.imm_data = htobe32(msg);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return rdma_seterrno(ibv_post_send(rs->cm_id->qp, &wr, &bad));
}

/* as rsocket.c: rs_write_data: the target SGE moves on before the data
 * goes, or the peer could update the entry first. */
static int rs_write_data(struct rsocket *rs, struct ibv_sge *sgl, int nsge, uint32_t length, int flags)
{
	volatile struct rs_sge *t = &rs->target_sgl[rs->target_sge];
	uint64_t addr = t->addr;
	uint32_t rkey = t->key;

	rs->sseq_no++;
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= length;
	t->addr += length;
	t->length -= length;
	if (!t->length && ++rs->target_sge == RS_SGL_SIZE)
		rs->target_sge = 0;
	return rs_post_write_msg(rs, sgl, nsge, rs_msg_set(RS_OP_DATA, length), flags, addr, rkey);
}

static uint32_t rs_sbuf_left(struct rsocket *rs)
{
	return (uint32_t)((uintptr_t)&rs->sbuf[rs->sbuf_size] - rs->ssgl[0].addr);
}

/* as rsocket.c: rs_send_credits: when half the ring is free, its
 * descriptor goes into the peer's target SGL with RS_OP_SGL; otherwise
 * RS_OP_SGL returns receive credits alone. */
static void rs_send_credits(struct rsocket *rs)
{
	struct ibv_sge ibsge;
	struct rs_sge sge, *sge_buf;
	uint32_t msg;
	int flags;

	rs->ctrl_seqno++;
	rs->rseq_comp = rs->rseq_no + (rs->rq_size >> 1);
	/* Not cut to 16 bits: the receiver cuts it (rsocket.c sends the sum). */
	msg = rs_msg_set(RS_OP_SGL, (uint32_t)rs->rseq_no + rs->rq_size);
	if (rs->rbuf_bytes_avail < (int)(rs->rbuf_size >> 1)) {
		rs_post_msg(rs, msg);
		return;
	}
	sge.addr = (uintptr_t)&rs->rbuf[rs->rbuf_free_offset];
	sge.key = rs->rmr->rkey;
	sge.length = rs->rbuf_size >> 1;
	if (rs->opts & RS_OPT_SWAP_SGL) {
		sge.addr = bswap_64(sge.addr);
		sge.key = bswap_32(sge.key);
		sge.length = bswap_32(sge.length);
	}
	if (rs->sq_inline < sizeof(sge)) {
		sge_buf = rs_get_ctrl_buf(rs);
		memcpy(sge_buf, &sge, sizeof(sge));
		ibsge.addr = (uintptr_t)sge_buf;
		ibsge.lkey = rs->smr->lkey;
		flags = 0;
	} else {
		ibsge.addr = (uintptr_t)&sge;
		ibsge.lkey = 0;
		flags = IBV_SEND_INLINE;
	}
	ibsge.length = sizeof(sge);
	rs_post_write_msg(rs, &ibsge, 1, msg, flags, rs->remote_sgl.addr + rs->remote_sge * sizeof(struct rs_sge),
			  rs->remote_sgl.key);
	rs->rbuf_bytes_avail -= rs->rbuf_size >> 1;
	rs->rbuf_free_offset += rs->rbuf_size >> 1;
	if (rs->rbuf_free_offset >= (int)rs->rbuf_size)
		rs->rbuf_free_offset = 0;
	if (++rs->remote_sge == (int)rs->remote_sgl.length)
		rs->remote_sge = 0;
}

static bool rs_ctrl_avail(struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

/* as rsocket.c: rs_give_credits. */
static bool rs_give_credits(struct rsocket *rs)
{
	return (rs->rbuf_bytes_avail >= (int)(rs->rbuf_size >> 1) ||
		(int16_t)((int16_t)rs->rseq_no - (int16_t)rs->rseq_comp) >= 0) &&
	       rs_ctrl_avail(rs) && (rs->state & rs_connected);
}

static void rs_update_credits(struct rsocket *rs)
{
	if (rs_give_credits(rs))
		rs_send_credits(rs);
}

/* ---- Completions ---- */

/* rs_recv_msg is a receive's message (as rsocket.c: rs_poll_cq). */
static void rs_recv_msg(struct rsocket *rs, uint32_t msg)
{
	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->sseq_comp = (uint16_t)rs_msg_data(msg);
		break;
	case RS_OP_IOMAP_SGL:
	case RS_OP_WRITE:
		break;
	case RS_OP_CTRL:
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
			rs->state = rs_disconnected;
		else if (rs_msg_data(msg) == RS_CTRL_SHUTDOWN)
			rs->state = (rs->state & rs_writable) ? rs->state & ~rs_readable : rs_disconnected;
		break;
	default:
		rs->rmsg[rs->rmsg_tail].op = rs_msg_op(msg);
		rs->rmsg[rs->rmsg_tail].data = rs_msg_data(msg);
		if (++rs->rmsg_tail == rs->rq_size + 1)
			rs->rmsg_tail = 0;
		break;
	}
}

/* rs_send_done is a send's completion (as rsocket.c: rs_poll_cq). */
static void rs_send_done(struct rsocket *rs, struct ibv_wc *wc)
{
	uint32_t msg = (uint32_t)wc->wr_id;

	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		rs->ctrl_max_seqno++;
		break;
	case RS_OP_CTRL:
		rs->ctrl_max_seqno++;
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
			rs->state = rs_disconnected;
		break;
	case RS_OP_IOMAP_SGL:
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += sizeof(struct rs_iomap);
		break;
	default:
		rs->sqe_avail++;
		rs->sbuf_bytes_avail += rs_msg_data(msg);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS && (rs->state & rs_connected)) {
		rs->state = rs_error;
		rs->err = EIO;
	}
}

/* as rsocket.c: rs_poll_cq: the CQ's completions, then as many receives
 * posted again as completed (while connected). */
static int rs_poll_cq(struct rsocket *rs)
{
	struct ibv_wc wc;
	int ret, rcnt = 0;

	while ((ret = ibv_poll_cq(rs->cm_id->recv_cq, 1, &wc)) > 0) {
		if (!(wc.wr_id & RS_WR_ID_FLAG_RECV)) {
			rs_send_done(rs, &wc);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS)
			continue;
		rcnt++;
		if (wc.wc_flags & IBV_WC_WITH_IMM)
			rs_recv_msg(rs, be32toh(wc.imm_data));
	}
	if (ret < 0)
		return ERR(EIO);
	if (rs->state & rs_connected) {
		while (!ret && rcnt--)
			ret = rs_post_recv(rs);
		if (ret) {
			rs->state = rs_error;
			rs->err = errno;
		}
	}
	return ret;
}

/* rs_take_cq_events takes the CQ's events from its (non-blocking)
 * channel: the CQ is then to be armed again. */
static void rs_take_cq_events(struct rsocket *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cq_armed)
		return;
	while (!ibv_get_cq_event(rs->cm_id->recv_cq_channel, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->cq_armed = false;
	}
}

/* rs_take_cm_events takes the events on a connected rsocket's channel:
 * DISCONNECTED ends the connection (as rsocket.c: rs_handle_cm_event). */
static void rs_take_cm_events(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	if (rs->state & rs_opening)
		return;
	while (!rdma_get_cm_event(rs->cm_id->channel, &ev)) {
		if ((ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL ||
		     ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT) &&
		    (rs->state & rs_connected))
			rs->state = rs_disconnected;
		rdma_ack_cm_event(ev);
	}
}

/* rs_cq_wait waits (unlocked) until the rsocket's CQ channel or CM
 * channel has something, then takes it. A bounded wait, so that a thread
 * whose wake-up another thread took looks again. */
static void rs_cq_wait(struct rsocket *rs)
{
	struct pollfd fds[2] = {
		{ .fd = rs->cm_id->recv_cq_channel->fd, .events = POLLIN },
		{ .fd = rs->cm_id->channel->fd, .events = POLLIN },
	};

	pthread_mutex_unlock(&rs->mu);
	poll(fds, 2, 100);
	pthread_mutex_lock(&rs->mu);
	if (fds[0].revents)
		rs_take_cq_events(rs);
	if (fds[1].revents)
		rs_take_cm_events(rs);
}

static uint64_t rs_time_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000ULL + ts.tv_nsec / 1000;
}

/*
 * rs_get_comp processes completions until test holds: 0; or EWOULDBLOCK
 * when nonblock and it does not; or an error. It spins polling_time_us,
 * then arms the CQ and waits on its channel (as rsocket.c: rs_get_comp,
 * rs_process_cq). Called locked, on an rsocket with a QP.
 */
static int rs_get_comp(struct rsocket *rs, bool nonblock, bool (*test)(struct rsocket *rs))
{
	uint64_t start = 0;
	int ret;

	for (;;) {
		rs_update_credits(rs);
		ret = rs_poll_cq(rs);
		rs_update_credits(rs);
		if (test(rs))
			return 0;
		if (ret)
			return ret;
		if (nonblock)
			return ERR(EWOULDBLOCK);
		if (!start)
			start = rs_time_us();
		if (rs_time_us() - start <= polling_time_us)
			continue;
		if (!rs->cq_armed) {
			ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
			rs->cq_armed = true;
			continue;
		}
		rs_cq_wait(rs);
	}
}

/* as rsocket.c: rs_can_send: a send WR, room in the send buffer, a
 * receive credit of the peer's and room in its current target buffer. */
static bool rs_can_send(struct rsocket *rs)
{
	return rs->sqe_avail && rs->sbuf_bytes_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       rs->target_sgl[rs->target_sge].length != 0;
}

static bool rs_conn_can_send(struct rsocket *rs)
{
	return rs_can_send(rs) || !(rs->state & rs_writable);
}

static bool rs_conn_can_send_ctrl(struct rsocket *rs)
{
	return rs_ctrl_avail(rs) || !(rs->state & rs_connected);
}

static bool rs_have_rdata(struct rsocket *rs)
{
	return rs->rmsg_head != rs->rmsg_tail;
}

static bool rs_conn_have_rdata(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !(rs->state & rs_readable);
}

static bool rs_conn_all_sends_done(struct rsocket *rs)
{
	return ((int)rs->ctrl_max_seqno - (int)rs->ctrl_seqno) + rs->sqe_avail == rs->sq_size ||
	       !(rs->state & rs_connected);
}

static bool rs_poll_all(struct rsocket *rs)
{
	return true;
}

/* ---- The calls ---- */

SN_EXPORT int rsocket(int domain, int type, int protocol)
{
	int socket_type = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct rsocket *rs;

	if ((domain != AF_INET && domain != AF_INET6) || socket_type != SOCK_STREAM ||
	    (protocol && protocol != IPPROTO_TCP))
		return ERR(ENOTSUP);
	pthread_once(&rs_configured, rs_configure);
	if (!(rs = rs_alloc(NULL)))
		return ERR(ENOMEM);
	rs->fd_flags = (type & SOCK_CLOEXEC) ? FD_CLOEXEC : 0;
	rs->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
	if (rdma_create_id(NULL, &rs->cm_id, rs, RDMA_PS_TCP))
		goto err;
	rs->cm_id->route.addr.src_addr.sa_family = domain;
	if (rs_insert(rs, rs->cm_id->channel->fd))
		goto err;
	return rs->index;
err:
	{
		int e = errno;

		rs_free(rs);
		return ERR(e);
	}
}

SN_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return ERR(EBADF);
	if (!addr || addrlen < sizeof(sa_family_t))
		return ERR(EINVAL);
	pthread_mutex_lock(&rs->mu);
	if (rs->state != rs_init)
		ret = ERR(EINVAL);
	else if (!(ret = rdma_bind_addr(rs->cm_id, (struct sockaddr *)addr)))
		rs->state = rs_bound;
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

SN_EXPORT int rlisten(int socket, int backlog)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret = 0;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	if (rs->state == rs_listening)
		goto out;
	if (rs->state != rs_init && rs->state != rs_bound) {
		ret = ERR(EINVAL);
		goto out;
	}
	if ((ret = rdma_listen(rs->cm_id, backlog)))
		goto out;
	if (rs->fs_flags & O_NONBLOCK)
		set_nonblock(rs->cm_id->channel->fd, true);
	rs->state = rs_listening;
out:
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* rs_accept_new answers a connection request on new_rs's ID: its QP,
 * the REQ's connection data, the REP with ours (as rsocket.c: rs_accept).
 * The new rsocket is connected, or accepting when non-blocking. */
static int rs_accept_new(struct rsocket *new_rs)
{
	struct rdma_cm_id *id = new_rs->cm_id;
	const struct rs_conn_data *creq = id->event->param.conn.private_data;
	struct rdma_conn_param param;
	struct rs_conn_data cresp;

	if (id->event->param.conn.private_data_len < sizeof(*creq) || creq->version != 1)
		return ERR(ENOTSUP);
	if (rs_create_ep(new_rs))
		return -1;
	rs_save_conn_data(new_rs, creq);
	param = id->event->param.conn;
	rs_format_conn_data(new_rs, &cresp);
	param.private_data = &cresp;
	param.private_data_len = sizeof(cresp);
	if (new_rs->fs_flags & O_NONBLOCK)
		set_nonblock(id->channel->fd, true);
	if (!rdma_accept(id, &param)) {
		rs_connected_cm(new_rs);
		return 0;
	}
	if (!would_block())
		return -1;
	new_rs->state = rs_accepting;
	return 0;
}

/* rs_get_request takes the listener's next connection request: other
 * events on its channel are passed over. */
static int rs_get_request(struct rsocket *rs, struct rdma_cm_id **id)
{
	for (;;) {
		if (!rdma_get_request(rs->cm_id, id))
			return 0;
		if (errno != EINVAL)
			return -1;
	}
}

SN_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket), *new_rs;
	struct rdma_cm_id *id;
	int e;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	if (rs->state != rs_listening) {
		pthread_mutex_unlock(&rs->mu);
		return ERR(EINVAL);
	}
	if (rs_get_request(rs, &id)) {
		pthread_mutex_unlock(&rs->mu);
		return -1;
	}
	new_rs = rs_alloc(rs);
	pthread_mutex_unlock(&rs->mu);
	if (!new_rs) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return ERR(ENOMEM);
	}
	new_rs->cm_id = id;
	id->context = new_rs;
	if (rs_insert(new_rs, id->channel->fd) || rs_accept_new(new_rs)) {
		e = errno;
		rdma_reject(id, NULL, 0);
		rs_free(new_rs);
		return ERR(e == EAGAIN ? ECONNABORTED : e);
	}
	if (addr && addrlen)
		rgetpeername(new_rs->index, addr, addrlen);
	return new_rs->index;
}

SN_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return ERR(EBADF);
	if (!addr || !ucma_addrlen(addr) || addrlen < (socklen_t)ucma_addrlen(addr))
		return ERR(EINVAL);
	pthread_mutex_lock(&rs->mu);
	if (rs->state == rs_listening) {
		ret = ERR(EINVAL);
	} else if (rs->state & rs_opening) {
		ret = ERR(EALREADY);
	} else if (rs->state & rs_connected) {
		ret = ERR(EISCONN);
	} else {
		if (rs->state == rs_init || rs->state == rs_bound) {
			memcpy(&rs->cm_id->route.addr.dst_addr, addr, ucma_addrlen(addr));
			if (rs->fs_flags & O_NONBLOCK)
				set_nonblock(rs->cm_id->channel->fd, true);
		}
		ret = rs_do_connect(rs);
	}
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* rs_ready_locked drives a connection still opening and says whether
 * the rsocket may carry data: -1 with errno (EAGAIN while a
 * non-blocking connection goes on, ENOTCONN on one never connected). */
static int rs_ready_locked(struct rsocket *rs)
{
	if (rs->state & rs_opening) {
		if (rs_do_connect(rs)) {
			if (errno == EINPROGRESS)
				errno = EAGAIN;
			return -1;
		}
	}
	if (!rs->cm_id->qp || rs->state == rs_connect_error)
		return ERR(ENOTCONN);
	return 0;
}

/* rs_copy_ring copies len bytes of the receive ring from *offset into
 * buf, wrapping at its end, and moves *offset on (as rsocket.c: rrecv's
 * loop). */
static void rs_copy_ring(struct rsocket *rs, int *offset, uint8_t *buf, uint32_t len)
{
	uint32_t end = rs->rbuf_size - *offset;

	if (len > end) {
		memcpy(buf, &rs->rbuf[*offset], end);
		*offset = 0;
		buf += end;
		len -= end;
	}
	memcpy(buf, &rs->rbuf[*offset], len);
	*offset += len;
}

/* as rsocket.c: rs_peek. */
static size_t rs_peek(struct rsocket *rs, uint8_t *buf, size_t len)
{
	int head = rs->rmsg_head, offset = rs->rbuf_offset;
	size_t left = len;
	uint32_t n;

	while (left && head != rs->rmsg_tail) {
		n = left < rs->rmsg[head].data ? left : rs->rmsg[head].data;
		if (n == rs->rmsg[head].data && ++head == rs->rq_size + 1)
			head = 0;
		rs_copy_ring(rs, &offset, buf, n);
		buf += n;
		left -= n;
	}
	return len - left;
}

/* rs_consume takes up to len bytes of received data into buf. */
static size_t rs_consume(struct rsocket *rs, uint8_t *buf, size_t len)
{
	size_t left = len;
	uint32_t n;

	while (left && rs_have_rdata(rs)) {
		struct rs_msg *m = &rs->rmsg[rs->rmsg_head];

		if (left < m->data) {
			n = left;
			m->data -= n;
		} else {
			n = m->data;
			rs->rseq_no++;
			if (++rs->rmsg_head == rs->rq_size + 1)
				rs->rmsg_head = 0;
		}
		rs_copy_ring(rs, &rs->rbuf_offset, buf, n);
		rs->rbuf_bytes_avail += n;
		buf += n;
		left -= n;
	}
	return len - left;
}

/* rs_recv_locked is rrecv: queued data is still read once the peer
 * disconnected; 0 is the end of the stream. */
static ssize_t rs_recv_locked(struct rsocket *rs, uint8_t *buf, size_t len, int flags)
{
	size_t left = len;
	int ret = 0;

	if (rs_ready_locked(rs))
		return -1;
	do {
		if (!rs_have_rdata(rs)) {
			ret = rs_get_comp(rs, rs_nonblocking(rs, flags), rs_conn_have_rdata);
			if (ret)
				break;
		}
		if (flags & MSG_PEEK) {
			left -= rs_peek(rs, buf, left);
			break;
		}
		left -= rs_consume(rs, buf + (len - left), left);
	} while (left && (flags & MSG_WAITALL) && (rs->state & rs_readable));
	/* Credits for what was read. */
	if (rs->state & rs_connected)
		rs_update_credits(rs);
	if (ret && left == len)
		return ret;
	/* The end of the stream with errno 0, not the EAGAIN of a poll on
	 * the way: rstream reads on while errno is EAGAIN. */
	if (len && left == len)
		errno = 0;
	return len - left;
}

SN_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct rsocket *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	ret = rs_recv_locked(rs, buf, len, flags);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

SN_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen)
{
	ssize_t ret = rrecv(socket, buf, len, flags);

	if (ret > 0 && src_addr && addrlen)
		rgetpeername(socket, src_addr, addrlen);
	return ret;
}

/* rrecvv reads into the vectors in turn while data is there. */
static ssize_t rrecvv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t ret, total = 0;
	int i;

	if (iovcnt < 0 || (iovcnt && !iov))
		return ERR(EINVAL);
	for (i = 0; i < iovcnt; i++) {
		if (!iov[i].iov_len)
			continue;
		ret = rrecv(socket, iov[i].iov_base, iov[i].iov_len, total ? flags | MSG_DONTWAIT : flags);
		if (ret < 0)
			return total ? total : ret;
		total += ret;
		if ((size_t)ret < iov[i].iov_len)
			break;
	}
	return total;
}

SN_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return ERR(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return ERR(ENOTSUP);
	return rrecvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SN_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

SN_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return rrecvv(socket, iov, iovcnt, 0);
}

/* rs_copy_iov copies len bytes from the vectors at (*iov, *offset). */
static void rs_copy_iov(uint8_t *dst, const struct iovec **iov, size_t *offset, size_t len)
{
	while (len) {
		size_t size = (*iov)->iov_len - *offset;

		if (size > len) {
			memcpy(dst, (uint8_t *)(*iov)->iov_base + *offset, len);
			*offset += len;
			return;
		}
		memcpy(dst, (uint8_t *)(*iov)->iov_base + *offset, size);
		len -= size;
		dst += size;
		(*iov)++;
		*offset = 0;
	}
}

/* rs_send_chunk sends xfer bytes from the vectors through the send
 * buffer (as rsocket.c: rsendv), in two SGEs when the ring wraps; inline
 * when small enough. */
static int rs_send_chunk(struct rsocket *rs, const struct iovec **iov, size_t *offset, uint32_t xfer)
{
	int flags = xfer <= rs->sq_inline ? IBV_SEND_INLINE : 0;
	int ret;

	if (xfer <= rs_sbuf_left(rs)) {
		rs_copy_iov((uint8_t *)(uintptr_t)rs->ssgl[0].addr, iov, offset, xfer);
		rs->ssgl[0].length = xfer;
		ret = rs_write_data(rs, rs->ssgl, 1, xfer, flags);
		if (xfer < rs_sbuf_left(rs))
			rs->ssgl[0].addr += xfer;
		else
			rs->ssgl[0].addr = (uintptr_t)rs->sbuf;
		return ret;
	}
	rs->ssgl[0].length = rs_sbuf_left(rs);
	rs_copy_iov((uint8_t *)(uintptr_t)rs->ssgl[0].addr, iov, offset, rs->ssgl[0].length);
	rs->ssgl[1].length = xfer - rs->ssgl[0].length;
	rs_copy_iov(rs->sbuf, iov, offset, rs->ssgl[1].length);
	ret = rs_write_data(rs, rs->ssgl, 2, xfer, flags);
	rs->ssgl[0].addr = (uintptr_t)rs->sbuf + rs->ssgl[1].length;
	return ret;
}

static int rs_send_iomaps(struct rsocket *rs, int flags);

/* rs_send_closed is the error of a send on an rsocket that no longer
 * sends: EPIPE after its own shutdown, ECONNRESET after the peer's (as
 * rsocket.c's rsend answers), the error that ended the connection. */
static int rs_send_closed(struct rsocket *rs)
{
	if (rs->state & rs_error)
		return ERR(rs->err ? rs->err : EIO);
	return ERR(rs->state & rs_connected ? EPIPE : ECONNRESET);
}

/* rs_wait_send waits (unless flags or the rsocket say not to) until the
 * rsocket can send: 0, or the error to return; ECONNRESET when the peer
 * shut the stream down meanwhile (as rsocket.c: rsend's wait). */
static int rs_wait_send(struct rsocket *rs, int flags)
{
	int ret;

	if (rs_can_send(rs))
		return 0;
	if ((ret = rs_get_comp(rs, rs_nonblocking(rs, flags), rs_conn_can_send)))
		return ret;
	if (!(rs->state & rs_writable))
		return ERR(ECONNRESET);
	return 0;
}

/* rs_next_xfer is the size of a transfer's next chunk with left bytes to
 * go: *olen, doubled after each chunk up to RS_MAX_TRANSFER, or what is
 * left (as rsocket.c: rsend). */
static uint32_t rs_next_xfer(uint32_t *olen, size_t left)
{
	uint32_t xfer = *olen;

	if (xfer >= left)
		return (uint32_t)left;
	if (*olen < RS_MAX_TRANSFER)
		*olen <<= 1;
	return xfer;
}

/* rs_sendv_locked is rsendv: transfers growing from RS_OLAP_START_SIZE
 * to RS_MAX_TRANSFER, each bounded by the send buffer's room and the
 * peer's target buffer (as rsocket.c: rsend, rsendv). */
static ssize_t rs_sendv_locked(struct rsocket *rs, const struct iovec *iov, int iovcnt, int flags)
{
	uint32_t xfer, olen = RS_OLAP_START_SIZE;
	size_t len = 0, left, offset = 0;
	int i, ret = 0;

	if (rs_ready_locked(rs))
		return -1;
	if (rs->iomap_pending && (ret = rs_send_iomaps(rs, flags)))
		return ret;
	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	for (left = len; left; left -= xfer) {
		if (!(rs->state & rs_writable)) {
			ret = rs_send_closed(rs);
			break;
		}
		if ((ret = rs_wait_send(rs, flags)))
			break;
		xfer = rs_next_xfer(&olen, left);
		if (xfer > (uint32_t)rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > rs->target_sgl[rs->target_sge].length)
			xfer = rs->target_sgl[rs->target_sge].length;
		if ((ret = rs_send_chunk(rs, &iov, &offset, xfer)))
			break;
	}
	return (ret && left == len) ? ret : (ssize_t)(len - left);
}

static ssize_t rsendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	struct rsocket *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return ERR(EBADF);
	if (iovcnt < 0 || (iovcnt && !iov))
		return ERR(EINVAL);
	pthread_mutex_lock(&rs->mu);
	ret = rs_sendv_locked(rs, iov, iovcnt, flags);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

SN_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };

	return rsendv(socket, &iov, 1, flags);
}

SN_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags, const struct sockaddr *dest_addr,
			  socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return ERR(EBADF);
	if (dest_addr)
		return ERR(EISCONN); /* a stream rsocket takes no address */
	return rsend(socket, buf, len, flags);
}

SN_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return ERR(EINVAL);
	if (msg->msg_control && msg->msg_controllen)
		return ERR(ENOTSUP);
	return rsendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

SN_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

SN_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return rsendv(socket, iov, iovcnt, 0);
}

/* ---- Keepalive ---- */

/*
 * The rsockets with SO_KEEPALIVE, and the thread that sends each its
 * keepalive every keepalive_time seconds (as rsocket.c: tcp_svc_run,
 * tcp_svc_send_keepalive): a zero-length RDMA WRITE, RS_OP_CTRL
 * RS_CTRL_KEEPALIVE in its wr_id only, which the peer's NIC acknowledges
 * and its program never sees; a peer gone makes it fail, and the rsocket
 * with it. Started with the first rsocket that asks.
 */
static pthread_mutex_t ka_mut = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ka_cond;
static struct rsocket *ka_list; /* guarded by ka_mut */
static bool ka_started;		/* guarded by ka_mut */

/* rs_send_keepalive posts a keepalive when a control message may go.
 * Called with rs->mu held. */
static void rs_send_keepalive(struct rsocket *rs)
{
	struct ibv_send_wr wr, *bad;

	if (!rs_ctrl_avail(rs) || !(rs->state & rs_connected))
		return;
	rs->ctrl_seqno++;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = rs_msg_set(RS_OP_CTRL, RS_CTRL_KEEPALIVE);
	wr.opcode = IBV_WR_RDMA_WRITE;
	if (ibv_post_send(rs->cm_id->qp, &wr, &bad))
		rs->ctrl_seqno--;
}

/* ka_next_due is the earliest deadline of the list, 0 when it is empty.
 * Called with ka_mut held. */
static uint64_t ka_next_due(void)
{
	uint64_t due = 0;
	struct rsocket *rs;

	for (rs = ka_list; rs; rs = rs->ka_next)
		if (!due || rs->ka_due_us < due)
			due = rs->ka_due_us;
	return due;
}

/* ka_run sends the keepalives that are due, then sleeps until the next.
 * An rsocket busy in a call is passed over until its next period (it
 * takes ka_mut with its mu held, so this thread only tries its mu). */
static void *ka_run(void *arg)
{
	struct rsocket *rs;
	struct timespec ts;
	uint64_t now, due;

	pthread_mutex_lock(&ka_mut);
	for (;;) {
		now = rs_time_us();
		for (rs = ka_list; rs; rs = rs->ka_next) {
			if (rs->ka_due_us > now)
				continue;
			if (!pthread_mutex_trylock(&rs->mu)) {
				rs_send_keepalive(rs);
				pthread_mutex_unlock(&rs->mu);
			}
			rs->ka_due_us = now + rs->keepalive_time * 1000000ULL;
		}
		if (!(due = ka_next_due())) {
			pthread_cond_wait(&ka_cond, &ka_mut);
			continue;
		}
		ts.tv_sec = due / 1000000;
		ts.tv_nsec = (due % 1000000) * 1000;
		pthread_cond_timedwait(&ka_cond, &ka_mut, &ts);
	}
	return NULL;
}

/* ka_start starts the keepalive thread. Called with ka_mut held. */
static int ka_start(void)
{
	pthread_condattr_t attr;
	pthread_attr_t tattr;
	pthread_t t;
	int err;

	if (ka_started)
		return 0;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&ka_cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_attr_init(&tattr);
	pthread_attr_setdetachstate(&tattr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&t, &tattr, ka_run, NULL);
	pthread_attr_destroy(&tattr);
	if (err)
		return ERR(err);
	ka_started = true;
	return 0;
}

/* rs_default_keepalive is the kernel's tcp_keepalive_time, 7200 s
 * without it (as rsocket.c: rs_set_keepalive). */
static unsigned int rs_default_keepalive(void)
{
	unsigned int t = 7200;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "re");

	if (f) {
		if (fscanf(f, "%u", &t) != 1 || !t)
			t = 7200;
		fclose(f);
	}
	return t;
}

/* rs_set_keepalive puts rs on the keepalive thread's list or takes it
 * off. */
static int rs_set_keepalive(struct rsocket *rs, bool on)
{
	struct rsocket **p;
	int ret = 0;

	if (on && !rs->keepalive_time)
		rs->keepalive_time = rs_default_keepalive();
	pthread_mutex_lock(&ka_mut);
	if (on && !rs->ka_on) {
		if (!(ret = ka_start())) {
			rs->ka_on = true;
			rs->ka_due_us = rs_time_us() + rs->keepalive_time * 1000000ULL;
			rs->ka_next = ka_list;
			ka_list = rs;
			pthread_cond_signal(&ka_cond);
		}
	} else if (!on && rs->ka_on) {
		for (p = &ka_list; *p != rs; p = &(*p)->ka_next)
			;
		*p = rs->ka_next;
		rs->ka_on = false;
	}
	pthread_mutex_unlock(&ka_mut);
	return ret;
}

/* rs_keepalive_moved makes a new keepalive_time count from now. */
static void rs_keepalive_moved(struct rsocket *rs)
{
	pthread_mutex_lock(&ka_mut);
	if (rs->ka_on) {
		rs->ka_due_us = rs_time_us() + rs->keepalive_time * 1000000ULL;
		pthread_cond_signal(&ka_cond);
	}
	pthread_mutex_unlock(&ka_mut);
}

/* ---- Shutdown and close ---- */

/* rs_qp_err moves the QP to the error state, flushing its receives
 * (librdmacm's ucma_shutdown on an IB transport). */
static void rs_qp_err(struct rsocket *rs)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (rs->cm_id->qp)
		ibv_modify_qp(rs->cm_id->qp, &attr, IBV_QP_STATE);
}

/* as rsocket.c: rshutdown: RS_CTRL_SHUTDOWN when the other direction
 * stays, RS_CTRL_DISCONNECT when both end, then every send completed.
 * Called locked; it waits even on a non-blocking rsocket. */
static int rs_shutdown_locked(struct rsocket *rs, int how)
{
	int ctrl, ret = 0;

	if (rs->state & rs_connected) {
		if (how == SHUT_RDWR) {
			ctrl = RS_CTRL_DISCONNECT;
			rs->state &= ~(rs_readable | rs_writable);
		} else if (how == SHUT_WR) {
			rs->state &= ~rs_writable;
			ctrl = (rs->state & rs_readable) ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
		} else {
			rs->state &= ~rs_readable;
			if (rs->state & rs_writable)
				return 0;
			ctrl = RS_CTRL_DISCONNECT;
		}
		if (!rs_ctrl_avail(rs) && (ret = rs_get_comp(rs, false, rs_conn_can_send_ctrl)))
			return ret;
		if ((rs->state & rs_connected) && rs_ctrl_avail(rs)) {
			rs->ctrl_seqno++;
			ret = rs_post_msg(rs, rs_msg_set(RS_OP_CTRL, ctrl));
		}
	}
	if (rs->state & rs_connected)
		rs_get_comp(rs, false, rs_conn_all_sends_done);
	if (rs->state & rs_disconnected) {
		/* The flushed receives wake a thread in rpoll. */
		ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
		rs->cq_armed = true;
		rs_qp_err(rs);
	}
	return ret;
}

SN_EXPORT int rshutdown(int socket, int how)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return ERR(EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return ERR(EINVAL);
	rs_set_keepalive(rs, false);
	pthread_mutex_lock(&rs->mu);
	if (!rs->cm_id->qp || (rs->state & rs_opening))
		ret = ERR(ENOTCONN);
	else
		ret = rs_shutdown_locked(rs, how);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

SN_EXPORT int rclose(int socket)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return ERR(EBADF);
	rs_remove(rs);
	rs_set_keepalive(rs, false);
	pthread_mutex_lock(&rs->mu);
	if ((rs->state & rs_connected) && rs->cm_id->qp)
		rs_shutdown_locked(rs, SHUT_RDWR);
	pthread_mutex_unlock(&rs->mu);
	rs_free(rs);
	return 0;
}

/* ---- Addresses and options ---- */

/* as rsocket.c: rs_copy_addr. */
static void rs_copy_addr(struct sockaddr *dst, const struct sockaddr *src, socklen_t *len)
{
	socklen_t want = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	socklen_t size = *len < want ? *len : want;

	memcpy(dst, src, size);
	*len = want;
}

SN_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return ERR(EBADF);
	if (!addr || !addrlen)
		return ERR(EFAULT);
	if (!(rs->state & (rs_connected | rs_disconnected)) && rs->state != rs_accepting)
		return ERR(ENOTCONN);
	rs_copy_addr(addr, rdma_get_peer_addr(rs->cm_id), addrlen);
	return 0;
}

SN_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return ERR(EBADF);
	if (!addr || !addrlen)
		return ERR(EFAULT);
	rs_copy_addr(addr, rdma_get_local_addr(rs->cm_id), addrlen);
	return 0;
}

/* rs_opt_int is an option's int value, EINVAL when it is too short. */
static int rs_opt_int(const void *optval, socklen_t optlen, int *v)
{
	if (!optval || optlen < sizeof(int))
		return ERR(EINVAL);
	*v = *(const int *)optval;
	return 0;
}

static void rs_set_bit(uint64_t *opts, int name, bool on)
{
	if (on)
		*opts |= 1ULL << name;
	else
		*opts &= ~(1ULL << name);
}

/* as rsocket.c: rsetsockopt's SOL_SOCKET part. */
static int rs_setsockopt_socket(struct rsocket *rs, int optname, const void *optval, socklen_t optlen)
{
	int v;

	if (optname == SO_LINGER) {
		if (!optval || optlen < sizeof(struct linger))
			return ERR(EINVAL);
		/* Inverted: the default, 0, is on. */
		rs_set_bit(&rs->so_opts, optname, !((const struct linger *)optval)->l_onoff);
		return 0;
	}
	if (rs_opt_int(optval, optlen, &v))
		return -1;
	switch (optname) {
	case SO_REUSEADDR:
		if (rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v, sizeof(v)) &&
		    errno != ENOSYS && rs->state == rs_init)
			return -1;
		break;
	case SO_RCVBUF:
		if (!rs->rbuf)
			rs->rbuf_size = (uint32_t)v << 1;
		return 0;
	case SO_SNDBUF:
		if (!rs->sbuf)
			rs->sbuf_size = (uint32_t)v << 1;
		if (rs->sbuf_size < RS_SNDLOWAT)
			rs->sbuf_size = RS_SNDLOWAT << 1;
		return 0;
	case SO_KEEPALIVE:
		if (rs_set_keepalive(rs, v))
			return -1;
		break;
	case SO_OOBINLINE:
		break;
	default:
		return ERR(ENOTSUP);
	}
	rs_set_bit(&rs->so_opts, optname, v);
	return 0;
}

/* as rsocket.c: rsetsockopt's IPPROTO_TCP part. */
static int rs_setsockopt_tcp(struct rsocket *rs, int optname, const void *optval, socklen_t optlen)
{
	int v;

	if (rs_opt_int(optval, optlen, &v))
		return -1;
	switch (optname) {
	case TCP_KEEPCNT:
	case TCP_KEEPINTVL:
	case TCP_MAXSEG:
		return 0; /* a reliable connection has no use for them */
	case TCP_KEEPIDLE:
		if (v <= 0)
			return ERR(EINVAL);
		rs->keepalive_time = v;
		rs_keepalive_moved(rs);
		return 0;
	case TCP_NODELAY:
		rs_set_bit(&rs->tcp_opts, optname, v);
		return 0;
	default:
		return ERR(ENOTSUP);
	}
}

/* as rsocket.c: rsetsockopt's SOL_RDMA part: sizes, until the rsocket
 * starts connecting. */
static int rs_setsockopt_rdma(struct rsocket *rs, int optname, const void *optval, socklen_t optlen)
{
	int v;

	if (rs->state >= rs_opening)
		return ERR(EINVAL);
	if (optname == RDMA_ROUTE)
		return ERR(ENOTSUP);
	if (rs_opt_int(optval, optlen, &v))
		return -1;
	switch (optname) {
	case RDMA_SQSIZE:
		rs->sq_size = (uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE;
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = (uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE;
		return 0;
	case RDMA_INLINE:
		rs->sq_inline = (uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE;
		return 0;
	case RDMA_IOMAPSIZE:
		/* What the connection data's 8 bits can say. */
		rs->target_iomap_size = (uint16_t)rs_scale_to_value((uint8_t)rs_value_to_scale(v, 8), 8);
		return 0;
	default:
		return ERR(ENOTSUP);
	}
}

SN_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret, v;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	switch (level) {
	case SOL_SOCKET:
		ret = rs_setsockopt_socket(rs, optname, optval, optlen);
		break;
	case IPPROTO_TCP:
		ret = rs_setsockopt_tcp(rs, optname, optval, optlen);
		break;
	case IPPROTO_IP:
		ret = ERR(ENOTSUP);
		if (optname == IP_TOS && !(ret = rs_opt_int(optval, optlen, &v)) &&
		    !(ret = rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &v, sizeof(v))))
			rs->ipv4_tos = v;
		break;
	case IPPROTO_IPV6:
		ret = ERR(ENOTSUP);
		if (optname == IPV6_V6ONLY && !(ret = rs_opt_int(optval, optlen, &v)) &&
		    !(ret = rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v, sizeof(v))))
			rs_set_bit(&rs->ipv6_opts, optname, v);
		break;
	case SOL_RDMA:
		ret = rs_setsockopt_rdma(rs, optname, optval, optlen);
		break;
	default:
		ret = ERR(ENOTSUP);
		break;
	}
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* rs_int_opt answers an int option. */
static int rs_int_opt(void *optval, socklen_t *optlen, int v)
{
	if (*optlen < sizeof(int))
		return ERR(EINVAL);
	*(int *)optval = v;
	*optlen = sizeof(int);
	return 0;
}

static int rs_getsockopt_socket(struct rsocket *rs, int optname, void *optval, socklen_t *optlen)
{
	int err;

	switch (optname) {
	case SO_REUSEADDR:
	case SO_KEEPALIVE:
	case SO_OOBINLINE:
		return rs_int_opt(optval, optlen, !!(rs->so_opts & (1ULL << optname)));
	case SO_RCVBUF:
		return rs_int_opt(optval, optlen, rs->rbuf_size);
	case SO_SNDBUF:
		return rs_int_opt(optval, optlen, rs->sbuf_size);
	case SO_LINGER:
		if (*optlen < sizeof(struct linger))
			return ERR(EINVAL);
		((struct linger *)optval)->l_onoff = !(rs->so_opts & (1ULL << optname));
		((struct linger *)optval)->l_linger = 0;
		*optlen = sizeof(struct linger);
		return 0;
	case SO_ERROR:
		err = rs->err;
		rs->err = 0;
		return rs_int_opt(optval, optlen, err);
	case SO_TYPE:
		return rs_int_opt(optval, optlen, SOCK_STREAM);
	default:
		return ERR(ENOTSUP);
	}
}

static int rs_getsockopt_tcp(struct rsocket *rs, int optname, void *optval, socklen_t *optlen)
{
	switch (optname) {
	case TCP_KEEPCNT:
	case TCP_KEEPINTVL:
		return rs_int_opt(optval, optlen, 1);
	case TCP_KEEPIDLE:
		return rs_int_opt(optval, optlen, rs->keepalive_time);
	case TCP_NODELAY:
		return rs_int_opt(optval, optlen, !!(rs->tcp_opts & (1ULL << optname)));
	case TCP_MAXSEG:
		return rs_int_opt(optval, optlen,
				  rs->cm_id->route.num_paths ? 1 << (7 + rs->cm_id->route.path_rec->mtu) : 2048);
	default:
		return ERR(ENOTSUP);
	}
}

static int rs_getsockopt_rdma(struct rsocket *rs, int optname, void *optval, socklen_t *optlen)
{
	switch (optname) {
	case RDMA_SQSIZE:
		return rs_int_opt(optval, optlen, rs->sq_size);
	case RDMA_RQSIZE:
		return rs_int_opt(optval, optlen, rs->rq_size);
	case RDMA_INLINE:
		return rs_int_opt(optval, optlen, rs->sq_inline);
	case RDMA_IOMAPSIZE:
		return rs_int_opt(optval, optlen, rs->target_iomap_size);
	default:
		return ERR(ENOTSUP);
	}
}

SN_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return ERR(EBADF);
	if (!optval || !optlen)
		return ERR(EFAULT);
	pthread_mutex_lock(&rs->mu);
	switch (level) {
	case SOL_SOCKET:
		ret = rs_getsockopt_socket(rs, optname, optval, optlen);
		break;
	case IPPROTO_TCP:
		ret = rs_getsockopt_tcp(rs, optname, optval, optlen);
		break;
	case IPPROTO_IP:
		ret = optname == IP_TOS ? rs_int_opt(optval, optlen, rs->ipv4_tos) : ERR(ENOTSUP);
		break;
	case IPPROTO_IPV6:
		ret = optname == IPV6_V6ONLY ? rs_int_opt(optval, optlen, !!(rs->ipv6_opts & (1ULL << optname)))
					     : ERR(ENOTSUP);
		break;
	case SOL_RDMA:
		ret = rs_getsockopt_rdma(rs, optname, optval, optlen);
		break;
	default:
		ret = ERR(ENOTSUP);
		break;
	}
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* rs_set_nonblocking makes the rsocket's CM channel follow O_NONBLOCK
 * while it is not connected (connected, the channel is always
 * non-blocking, as is the CQ's). */
static int rs_set_nonblocking(struct rsocket *rs, bool on)
{
	if (rs->state & rs_connected)
		return 0;
	return set_nonblock(rs->cm_id->channel->fd, on);
}

SN_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rsocket *rs = rs_lookup(socket);
	va_list args;
	int ret = 0, param;

	if (!rs)
		return ERR(EBADF);
	va_start(args, cmd);
	pthread_mutex_lock(&rs->mu);
	switch (cmd) {
	case F_GETFL:
		ret = rs->fs_flags;
		break;
	case F_SETFL:
		param = va_arg(args, int);
		if ((rs->fs_flags & O_NONBLOCK) != (param & O_NONBLOCK))
			ret = rs_set_nonblocking(rs, param & O_NONBLOCK);
		if (!ret)
			rs->fs_flags = param;
		break;
	case F_GETFD:
		ret = rs->fd_flags;
		break;
	case F_SETFD:
		rs->fd_flags = va_arg(args, int);
		break;
	default:
		ret = ERR(ENOTSUP);
		break;
	}
	pthread_mutex_unlock(&rs->mu);
	va_end(args);
	return ret;
}

/* ---- Direct writes (riomap, riowrite) ---- */

/* rs_get_iomap_mr is a free entry of the peer's target iomap (as
 * rsocket.c: rs_get_iomap_mr), NULL when all are taken. */
static struct rs_iomap_mr *rs_get_iomap_mr(struct rsocket *rs)
{
	uint32_t i;

	if (!rs->remote_iomappings) {
		rs->remote_iomappings = calloc(rs->remote_iomap.length, sizeof(*rs->remote_iomappings));
		if (!rs->remote_iomappings)
			return NULL;
		for (i = 0; i < rs->remote_iomap.length; i++)
			rs->remote_iomappings[i].index = i;
	}
	for (i = 0; i < rs->remote_iomap.length; i++)
		if (!rs->remote_iomappings[i].mr)
			return &rs->remote_iomappings[i];
	return NULL;
}

/* as rsocket.c: rs_write_iomap: an entry written into the peer's target
 * iomap with RS_OP_IOMAP_SGL, which takes one of its receives. */
static int rs_write_iomap(struct rsocket *rs, struct rs_iomap_mr *iomr, struct ibv_sge *sgl, int nsge, int flags)
{
	rs->sseq_no++;
	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= sizeof(struct rs_iomap);
	return rs_post_write_msg(rs, sgl, nsge, rs_msg_set(RS_OP_IOMAP_SGL, iomr->index), flags,
				 rs->remote_iomap.addr + iomr->index * sizeof(struct rs_iomap), rs->remote_iomap.key);
}

/* rs_send_iomap announces one registration (inline, or from the send
 * buffer, in two SGEs when it wraps). */
static int rs_send_iomap(struct rsocket *rs, struct rs_iomap_mr *iomr)
{
	struct rs_iomap iom = {
		.offset = iomr->offset,
		.sge = { .addr = (uintptr_t)iomr->mr->addr, .key = iomr->mr->rkey, .length = iomr->mr->length },
	};
	struct ibv_sge sge = { .addr = (uintptr_t)&iom, .length = sizeof(iom) };
	const struct iovec iov = { .iov_base = &iom, .iov_len = sizeof(iom) }, *piov = &iov;
	size_t off = 0;
	int ret;

	if (rs->opts & RS_OPT_SWAP_SGL) {
		iom.offset = bswap_64(iom.offset);
		iom.sge.addr = bswap_64(iom.sge.addr);
		iom.sge.key = bswap_32(iom.sge.key);
		iom.sge.length = bswap_32(iom.sge.length);
	}
	if (rs->sq_inline >= sizeof(iom))
		return rs_write_iomap(rs, iomr, &sge, 1, IBV_SEND_INLINE);
	if (rs_sbuf_left(rs) >= sizeof(iom)) {
		rs_copy_iov((uint8_t *)(uintptr_t)rs->ssgl[0].addr, &piov, &off, sizeof(iom));
		rs->ssgl[0].length = sizeof(iom);
		ret = rs_write_iomap(rs, iomr, rs->ssgl, 1, 0);
		if (rs_sbuf_left(rs) > sizeof(iom))
			rs->ssgl[0].addr += sizeof(iom);
		else
			rs->ssgl[0].addr = (uintptr_t)rs->sbuf;
		return ret;
	}
	rs->ssgl[0].length = rs_sbuf_left(rs);
	rs_copy_iov((uint8_t *)(uintptr_t)rs->ssgl[0].addr, &piov, &off, rs->ssgl[0].length);
	rs->ssgl[1].length = sizeof(iom) - rs->ssgl[0].length;
	rs_copy_iov(rs->sbuf, &piov, &off, rs->ssgl[1].length);
	ret = rs_write_iomap(rs, iomr, rs->ssgl, 2, 0);
	rs->ssgl[0].addr = (uintptr_t)rs->sbuf + rs->ssgl[1].length;
	return ret;
}

/* as rsocket.c: rs_send_iomaps: the registrations riomap queued, each
 * when the rsocket can send; before any data that follows them. */
static int rs_send_iomaps(struct rsocket *rs, int flags)
{
	uint32_t i;
	int ret;

	for (i = 0; i < rs->remote_iomap.length; i++) {
		struct rs_iomap_mr *iomr = &rs->remote_iomappings[i];

		if (!iomr->pending)
			continue;
		if ((ret = rs_wait_send(rs, flags)))
			return ret;
		iomr->pending = false;
		if ((ret = rs_send_iomap(rs, iomr)))
			return ret;
	}
	rs->iomap_pending = false;
	return 0;
}

/*
 * riomap registers buf for the peer to write (PROT_WRITE: announced in
 * the peer's target iomap with the next send, at offset, or at buf's
 * address when offset is -1) or for nothing but the record (as
 * rsocket.c: riomap). ENOMEM when the peer's iomap is full (or it offered
 * none: RDMA_IOMAPSIZE on its side).
 */
SN_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsocket *rs = rs_lookup(socket);
	struct rs_iomap_mr *iomr;
	int access = IBV_ACCESS_LOCAL_WRITE;

	if (!rs)
		return ERR(EBADF);
	if (!rs->cm_id->pd || (prot & ~PROT_WRITE) || !buf || !len)
		return ERR(EINVAL);
	pthread_mutex_lock(&rs->mu);
	if (prot & PROT_WRITE) {
		iomr = rs_get_iomap_mr(rs);
		access |= IBV_ACCESS_REMOTE_WRITE;
	} else if ((iomr = calloc(1, sizeof(*iomr)))) {
		iomr->index = -1;
	}
	if (!iomr) {
		offset = ERR(ENOMEM);
		goto out;
	}
	if (!(iomr->mr = ibv_reg_mr(rs->cm_id->pd, buf, len, access))) {
		if (iomr->index < 0)
			free(iomr);
		offset = -1;
		goto out;
	}
	if (offset == -1)
		offset = (uintptr_t)buf;
	iomr->offset = offset;
	if (iomr->index >= 0) {
		iomr->pending = true;
		rs->iomap_pending = true;
	} else {
		iomr->next = rs->local_iomappings;
		rs->local_iomappings = iomr;
	}
out:
	pthread_mutex_unlock(&rs->mu);
	return offset;
}

/* rs_unmap_local drops the read-only registration of buf. */
static bool rs_unmap_local(struct rsocket *rs, void *buf, size_t len)
{
	struct rs_iomap_mr **p, *iomr;

	for (p = &rs->local_iomappings; (iomr = *p); p = &iomr->next) {
		if (iomr->mr->addr == buf && iomr->mr->length == len) {
			*p = iomr->next;
			ibv_dereg_mr(iomr->mr);
			free(iomr);
			return true;
		}
	}
	return false;
}

/* as rsocket.c: riounmap. The peer's entry stays as it is (rdma-core
 * sends nothing either): a write to it then fails the connection. */
SN_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(socket);
	uint32_t i;
	int ret = -1;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	for (i = 0; rs->remote_iomappings && i < rs->remote_iomap.length; i++) {
		struct rs_iomap_mr *iomr = &rs->remote_iomappings[i];

		if (iomr->mr && iomr->mr->addr == buf && iomr->mr->length == len) {
			ibv_dereg_mr(iomr->mr);
			iomr->mr = NULL;
			iomr->pending = false;
			ret = 0;
			break;
		}
	}
	if (ret && rs_unmap_local(rs, buf, len))
		ret = 0;
	pthread_mutex_unlock(&rs->mu);
	return ret ? ERR(EINVAL) : 0;
}

/* as rsocket.c: rs_find_iomap: the entry of the target iomap (written by
 * the peer) holding offset. */
static struct rs_iomap *rs_find_iomap(struct rsocket *rs, uint64_t offset)
{
	int i;

	for (i = 0; rs->target_iomap && i < rs->target_iomap_size; i++) {
		volatile struct rs_iomap *m = &rs->target_iomap[i];

		if (offset >= m->offset && offset < m->offset + m->sge.length)
			return (struct rs_iomap *)m;
	}
	return NULL;
}

/* as rsocket.c: rs_write_direct: a plain RDMA WRITE into the peer's
 * mapping, which takes none of its receives. */
static int rs_write_direct(struct rsocket *rs, struct rs_iomap *iom, uint64_t offset, struct ibv_sge *sgl,
			   int nsge, uint32_t length, int flags)
{
	struct ibv_send_wr wr, *bad;

	rs->sqe_avail--;
	rs->sbuf_bytes_avail -= length;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = rs_msg_set(RS_OP_WRITE, length);
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = iom->sge.addr + offset - iom->offset;
	wr.wr.rdma.rkey = iom->sge.key;
	return rdma_seterrno(ibv_post_send(rs->cm_id->qp, &wr, &bad));
}

/* rs_direct_chunk writes xfer bytes of buf at offset, through the send
 * buffer as rs_send_chunk, inline when small enough. */
static int rs_direct_chunk(struct rsocket *rs, struct rs_iomap *iom, uint64_t offset, const uint8_t *buf,
			   uint32_t xfer)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = xfer };
	int ret;

	if (xfer <= rs->sq_inline)
		return rs_write_direct(rs, iom, offset, &sge, 1, xfer, IBV_SEND_INLINE);
	if (xfer <= rs_sbuf_left(rs)) {
		memcpy((void *)(uintptr_t)rs->ssgl[0].addr, buf, xfer);
		rs->ssgl[0].length = xfer;
		ret = rs_write_direct(rs, iom, offset, rs->ssgl, 1, xfer, 0);
		if (xfer < rs_sbuf_left(rs))
			rs->ssgl[0].addr += xfer;
		else
			rs->ssgl[0].addr = (uintptr_t)rs->sbuf;
		return ret;
	}
	rs->ssgl[0].length = rs_sbuf_left(rs);
	memcpy((void *)(uintptr_t)rs->ssgl[0].addr, buf, rs->ssgl[0].length);
	rs->ssgl[1].length = xfer - rs->ssgl[0].length;
	memcpy(rs->sbuf, buf + rs->ssgl[0].length, rs->ssgl[1].length);
	ret = rs_write_direct(rs, iom, offset, rs->ssgl, 2, xfer, 0);
	rs->ssgl[0].addr = (uintptr_t)rs->sbuf + rs->ssgl[1].length;
	return ret;
}

/* rs_iowrite_locked is riowrite: the bytes written, up to the end of the
 * peer's mappings; -1 with errno when none was. */
static ssize_t rs_iowrite_locked(struct rsocket *rs, const uint8_t *buf, size_t count, uint64_t offset, int flags)
{
	uint32_t xfer, olen = RS_OLAP_START_SIZE;
	struct rs_iomap *iom = NULL;
	size_t left = count;
	int ret = 0;

	if (rs_ready_locked(rs))
		return -1;
	if (rs->iomap_pending && (ret = rs_send_iomaps(rs, flags)))
		return ret;
	for (; left; left -= xfer, buf += xfer, offset += xfer) {
		if (!iom || offset >= iom->offset + iom->sge.length) {
			if (!(iom = rs_find_iomap(rs, offset))) {
				if (left == count)
					ret = ERR(EINVAL);
				break;
			}
		}
		if (!(rs->state & rs_writable)) {
			ret = rs_send_closed(rs);
			break;
		}
		if ((ret = rs_wait_send(rs, flags)))
			break;
		xfer = rs_next_xfer(&olen, left);
		if (xfer > (uint32_t)rs->sbuf_bytes_avail)
			xfer = rs->sbuf_bytes_avail;
		if (xfer > iom->offset + iom->sge.length - offset)
			xfer = iom->offset + iom->sge.length - offset;
		if ((ret = rs_direct_chunk(rs, iom, offset, buf, xfer)))
			break;
	}
	return (ret && left == count) ? ret : (ssize_t)(count - left);
}

/* riowrite writes into the peer's mapping at offset (as rsocket.c:
 * riowrite); its size_t result is (size_t)-1 with errno on failure, as
 * rdma-core's. An offset no mapping of the peer holds is EINVAL. */
SN_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	struct rsocket *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return ERR(EBADF);
	pthread_mutex_lock(&rs->mu);
	ret = rs_iowrite_locked(rs, buf, count, offset, flags);
	pthread_mutex_unlock(&rs->mu);
	return ret;
}

/* ---- rpoll and rselect ---- */

/*
 * rs_poll_rs is an rsocket's readiness for events (as rsocket.c:
 * rs_poll_rs), driving a connection that is opening and taking the
 * completions there are. Called locked.
 */
static short rs_poll_rs(struct rsocket *rs, short events)
{
	struct pollfd fd;
	short revents = 0;

	if (rs->state == rs_listening) {
		fd = (struct pollfd){ .fd = rs->cm_id->channel->fd, .events = POLLIN };
		poll(&fd, 1, 0);
		return fd.revents & POLLIN ? (events & POLLIN) : 0;
	}
	if (rs->state & rs_opening) {
		if (rs_do_connect(rs) && errno == EINPROGRESS)
			return 0;
	}
	if (rs->state == rs_connect_error)
		return (events & (POLLIN | POLLOUT)) | POLLERR;
	if (!rs->cm_id->qp)
		return 0;
	rs_take_cq_events(rs);
	rs_get_comp(rs, true, rs_poll_all);
	if ((events & POLLIN) && rs_conn_have_rdata(rs))
		revents |= POLLIN;
	if ((events & POLLOUT) && rs_can_send(rs))
		revents |= POLLOUT;
	/* Unlike rsocket.c, a disconnected rsocket with data still queued
	 * is readable without POLLHUP (as a TCP socket whose peer closed):
	 * a program that stops at POLLHUP reads what the peer sent last. */
	if (rs->state == rs_disconnected && !rs_have_rdata(rs))
		revents |= POLLHUP;
	else if (!(rs->state & (rs_connected | rs_disconnected)))
		revents |= POLLERR;
	return revents;
}

/* rs_poll_check fills each fd's revents without waiting: the count of
 * those with some. */
static int rs_poll_check(struct pollfd *fds, nfds_t nfds)
{
	struct rsocket *rs;
	int cnt = 0;
	nfds_t i;

	for (i = 0; i < nfds; i++) {
		fds[i].revents = 0;
		if ((rs = rs_lookup(fds[i].fd))) {
			pthread_mutex_lock(&rs->mu);
			fds[i].revents = rs_poll_rs(rs, fds[i].events);
			pthread_mutex_unlock(&rs->mu);
		} else if (fds[i].fd >= 0) {
			poll(&fds[i], 1, 0);
		}
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

/*
 * rs_poll_arm sets the real fds rpoll waits on for fds[i] in rfds[2i]
 * and rfds[2i+1]: an rsocket's CQ channel (its CQ armed) and CM channel,
 * a listener's CM channel, or the fd itself. Events that came while it
 * armed make it report them instead: their count.
 */
static int rs_poll_arm(struct pollfd *rfds, struct pollfd *fds, nfds_t nfds)
{
	struct rsocket *rs;
	nfds_t i;

	for (i = 0; i < nfds; i++) {
		struct pollfd *r = &rfds[2 * i];

		r[0] = (struct pollfd){ .fd = -1 };
		r[1] = (struct pollfd){ .fd = -1 };
		if (!(rs = rs_lookup(fds[i].fd))) {
			r[0] = (struct pollfd){ .fd = fds[i].fd, .events = fds[i].events };
			continue;
		}
		pthread_mutex_lock(&rs->mu);
		if (rs->cm_id->qp && !(rs->state & rs_opening)) {
			/* Armed with no event taken since: an event taken
			 * while it checks leaves it to be armed again. */
			while (!(fds[i].revents = rs_poll_rs(rs, fds[i].events)) && !rs->cq_armed) {
				ibv_req_notify_cq(rs->cm_id->recv_cq, 0);
				rs->cq_armed = true;
			}
			r[0] = (struct pollfd){ .fd = rs->cm_id->recv_cq_channel->fd, .events = POLLIN };
		}
		r[1] = (struct pollfd){ .fd = rs->cm_id->channel->fd, .events = POLLIN };
		pthread_mutex_unlock(&rs->mu);
		if (fds[i].revents)
			return 1;
	}
	return 0;
}

/* rs_poll_take takes the CM events of connected rsockets whose CM
 * channel the wait found readable (DISCONNECTED). */
static void rs_poll_take(struct pollfd *rfds, struct pollfd *fds, nfds_t nfds)
{
	struct rsocket *rs;
	nfds_t i;

	for (i = 0; i < nfds; i++) {
		if (!rfds[2 * i + 1].revents || !(rs = rs_lookup(fds[i].fd)))
			continue;
		pthread_mutex_lock(&rs->mu);
		if (rs->cm_id->qp && (rs->state & (rs_connected | rs_disconnected | rs_error)))
			rs_take_cm_events(rs);
		pthread_mutex_unlock(&rs->mu);
	}
}

static bool rs_any(struct pollfd *fds, nfds_t nfds)
{
	nfds_t i;

	for (i = 0; i < nfds; i++)
		if (rs_lookup(fds[i].fd))
			return true;
	return false;
}

/*
 * rpoll is poll(2) over rsockets and other fds (as rsocket.c: rpoll):
 * a check, a spin of polling_time_us, then a poll(2) on the real fds
 * behind the rsockets, each wake-up followed by a check again.
 */
SN_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	uint64_t start = rs_time_us(), now;
	struct pollfd *rfds;
	int ret, wait;

	if (!rs_any(fds, nfds))
		return poll(fds, nfds, timeout);
	do {
		ret = rs_poll_check(fds, nfds);
		if (ret || !timeout)
			return ret;
	} while (rs_time_us() - start <= polling_time_us);

	if (!(rfds = calloc(2 * nfds, sizeof(*rfds))))
		return ERR(ENOMEM);
	for (;;) {
		if (rs_poll_arm(rfds, fds, nfds)) {
			ret = rs_poll_check(fds, nfds);
			if (ret)
				break;
			continue;
		}
		wait = timeout;
		if (timeout > 0) {
			now = rs_time_us();
			wait = timeout - (int)((now - start) / 1000);
			if (wait < 0)
				wait = 0;
		}
		ret = poll(rfds, 2 * nfds, wait);
		if (ret < 0)
			break;
		rs_poll_take(rfds, fds, nfds);
		ret = rs_poll_check(fds, nfds);
		if (ret || !wait)
			break;
	}
	free(rfds);
	return ret;
}

/* as rsocket.c: rs_select_to_poll and rs_poll_to_select. */
static struct pollfd *rs_select_to_poll(int *nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds)
{
	struct pollfd *fds = calloc(*nfds ? *nfds : 1, sizeof(*fds));
	int fd, i = 0;

	if (!fds)
		return NULL;
	for (fd = 0; fd < *nfds; fd++) {
		short events = 0;

		if (readfds && FD_ISSET(fd, readfds))
			events |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			events |= POLLOUT;
		if (exceptfds && FD_ISSET(fd, exceptfds))
			events |= POLLPRI;
		if (events)
			fds[i++] = (struct pollfd){ .fd = fd, .events = events };
	}
	*nfds = i;
	return fds;
}

static int rs_poll_to_select(int nfds, struct pollfd *fds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds)
{
	int i, cnt = 0;

	for (i = 0; i < nfds; i++) {
		if (readfds && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(fds[i].fd, readfds);
			cnt++;
		}
		if (writefds && (fds[i].revents & (POLLOUT | POLLERR))) {
			FD_SET(fds[i].fd, writefds);
			cnt++;
		}
		if (exceptfds && (fds[i].revents & ~(POLLIN | POLLOUT))) {
			FD_SET(fds[i].fd, exceptfds);
			cnt++;
		}
	}
	return cnt;
}

SN_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	struct pollfd *fds;
	int ret, n = nfds;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return ERR(EINVAL);
	if (!(fds = rs_select_to_poll(&n, readfds, writefds, exceptfds)))
		return ERR(ENOMEM);
	ret = rpoll(fds, n, timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1);
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	if (ret > 0)
		ret = rs_poll_to_select(n, fds, readfds, writefds, exceptfds);
	free(fds);
	return ret;
}
