/*
 * tm_send - the client side of "softnic tm_pingpong" for a host without tag
 * matching (Linux rxe): tag-matching messages are ordinary RC SENDs whose
 * payload starts with a TMH (rdma-core Documentation/tag_matching.md,
 * <infiniband/tm_types.h>), so any verbs device can send them to softnic's
 * tag-matching SRQ. tm_send does everything in software that a
 * tag-matching NIC would do on its side:
 *
 *   - it sends window after window of Tags messages: message i carries
 *     size>>(i%4) bytes (at least 1), tag TAG_BASE|i, app_ctx i; below the
 *     rendezvous threshold as TMH(EAGER)+payload, from it up as
 *     TMH(RNDV)+RVH(va, rkey, len) naming a registered buffer the peer READs,
 *     reusing that buffer only after the peer's FIN (a TMH with opcode FIN);
 *   - it receives the server's answer window in ordinary receive buffers:
 *     an EAGER message is checked (and copied) by software, a RNDV request
 *     makes it RDMA READ the data and SEND the FIN back;
 *   - it ends with a NO_TAG message each way, as tm_pingpong does.
 *
 * The out-of-band exchange is rdma-core's pingpongs' (libibverbs/examples
 * pingpong.c, rc_pingpong.c pp_client_exch_dest): "%04x:%06x:%06x:%s"
 * LID:QPN:PSN:GID over TCP, then "done". The QP attributes are
 * rc_pingpong's (timeout 14, retry 7, rnr_retry 7, min_rnr_timer 12) with
 * 16 outstanding READs, as tm_pingpong's. The data pattern under -c is
 * tools/tmpingpong's patternByte.
 *
 * Usage: tm_send [-p port] [-d dev] [-i ib-port] [-g gid-idx] [-m mtu]
 *                [-n iters] [-s size] [-t tags] [-r rndv-bytes] [-c] server
 * Exit status 0 when every message went both ways (and, with -c, every
 * byte checked out), 1 otherwise.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define TAG_BASE 0x5450000000000000ULL /* tools/tmpingpong TagBase */
#define TMH_LEN 16
#define RVH_LEN 16
/* enum ibv_tmh_op (tm_types.h) */
enum { TMH_NO_TAG = 0, TMH_RNDV = 1, TMH_FIN = 2, TMH_EAGER = 3 };
enum { WR_SEND = 1, WR_RECV, WR_READ, WR_FIN, WR_DONE };
#define MAX_RD_ATOMIC 16
#define MAX_TAGS 256

static int size = 4096, iters = 1000, tags = 16, rndv_thr = 2048, check;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static uint8_t *buf;
static int send_slot, app_off, rq_off, ubuf, nrecv;
static int sends_left, fins_left, rleft, rwin, done_left = 1, peer_left = 1;
static int fin_wait[MAX_TAGS];
static uint8_t fin_hdr[MAX_TAGS][TMH_LEN];
static int sent_eager, sent_rndv, got_eager, got_rndv;

static void die(const char *what) { fprintf(stderr, "tm_send: %s\n", what); exit(1); }

static int length(int k) { int l = size >> (k % 4); return l < 1 ? 1 : l; }
static int is_rndv(int k) { return length(k) >= rndv_thr; }
static uint64_t wrid(int kind, int n) { return (uint64_t)kind | (uint64_t)n << 8; }

static uint8_t pattern(int k, int j)
{
	uint32_t v = (uint32_t)k * 2654435761u + (uint32_t)j * 7 + 1;
	return (uint8_t)(v >> 24 ^ v);
}

/* struct ibv_tmh: u8 opcode, u8 reserved[3], be32 app_ctx, be64 tag */
static void put_tmh(uint8_t *b, int op, uint32_t app_ctx, uint64_t tag)
{
	uint32_t c = htobe32(app_ctx);
	uint64_t t = htobe64(tag);
	memset(b, 0, 4);
	b[0] = op;
	memcpy(b + 4, &c, 4);
	memcpy(b + 8, &t, 8);
}

static uint64_t get_be64(const uint8_t *b) { uint64_t v; memcpy(&v, b, 8); return be64toh(v); }
static uint32_t get_be32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return be32toh(v); }

static void post_recv(int i)
{
	struct ibv_sge sge = { (uintptr_t)(buf + rq_off + i * ubuf), ubuf, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wrid(WR_RECV, i), .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("Couldn't post receive");
}

static void post_send(uint64_t id, void *data, int len, int inl, uint32_t lkey)
{
	struct ibv_sge sge = { (uintptr_t)data, len, lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0) }, *bad;
	if (ibv_post_send(qp, &wr, &bad))
		die("Couldn't post send");
}

/* received completes message k, which is in its application slot. */
static void received(int k)
{
	uint8_t *b = buf + app_off + (k % tags) * size;
	if (check)
		for (int j = 0; j < length(k); j++)
			if (b[j] != pattern(k, j)) {
				fprintf(stderr, "tm_send: message %d: byte %d is %#x, want %#x\n", k, j, b[j], pattern(k, j));
				exit(1);
			}
	if (is_rndv(k))
		got_rndv++;
	else
		got_eager++;
	rleft--;
}

/* handle_recv takes a message of the server's in receive buffer i. */
static void handle_recv(int i, int len)
{
	uint8_t *m = buf + rq_off + i * ubuf;
	if (len < TMH_LEN)
		die("a message without a TMH");
	uint64_t tag = get_be64(m + 8);
	/* a tag not TAG_BASE|k with 0 <= k < iters indexes nothing */
	int ours = (tag & TAG_BASE) == TAG_BASE && (tag & ~TAG_BASE) < (uint64_t)iters;
	int k = ours ? (int)(tag & ~TAG_BASE) : -1;
	if (m[0] == TMH_NO_TAG) {
		peer_left = 0;
	} else if (m[0] == TMH_FIN) {
		if (!ours || !fin_wait[k % tags])
			die("a FIN nobody waits for");
		fin_wait[k % tags] = 0;
		fins_left--;
	} else {
		if (!ours || k < rwin * tags || k >= rwin * tags + tags)
			die("a message outside the window");
		uint8_t *dst = buf + app_off + (k % tags) * size;
		if (m[0] == TMH_EAGER) {
			if (len - TMH_LEN != length(k))
				die("an eager message of the wrong length");
			memcpy(dst, m + TMH_LEN, len - TMH_LEN);
			received(k);
		} else if (m[0] == TMH_RNDV) {
			/* struct ibv_rvh: be64 va, be32 rkey, be32 len */
			if (len < TMH_LEN + RVH_LEN || (int)get_be32(m + TMH_LEN + 12) != length(k))
				die("a rendezvous request of the wrong length");
			struct ibv_sge sge = { (uintptr_t)dst, length(k), mr->lkey };
			struct ibv_send_wr wr = { .wr_id = wrid(WR_READ, k), .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_RDMA_READ, .send_flags = IBV_SEND_SIGNALED }, *bad;
			wr.wr.rdma.remote_addr = get_be64(m + TMH_LEN);
			wr.wr.rdma.rkey = get_be32(m + TMH_LEN + 8);
			put_tmh(fin_hdr[k % tags], TMH_FIN, get_be32(m + 4), tag);
			if (ibv_post_send(qp, &wr, &bad))
				die("Couldn't post RDMA READ");
		} else {
			die("a TMH with an unknown opcode");
		}
	}
	post_recv(i);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* poll_until handles completions until *a == 0 && *b == 0 (30 s bound). */
static void poll_until(int *a, int *b)
{
	struct ibv_wc wc[16];
	double start = now();
	while (*a || *b) {
		int n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			die("poll CQ failed");
		if (n == 0 && now() - start > 30)
			die("timeout: no completion for 30 s");
		for (int i = 0; i < n; i++) {
			int kind = wc[i].wr_id & 0xff, x = wc[i].wr_id >> 8;
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "tm_send: Failed status %s (%d) for wr_id %#llx\n",
					ibv_wc_status_str(wc[i].status), wc[i].status, (unsigned long long)wc[i].wr_id);
				exit(1);
			}
			start = now();
			switch (kind) {
			case WR_SEND: sends_left--; break;
			case WR_DONE: done_left = 0; break;
			case WR_FIN: break;
			case WR_RECV: handle_recv(x, wc[i].byte_len); break;
			case WR_READ:
				post_send(wrid(WR_FIN, x), fin_hdr[x % tags], TMH_LEN, 1, 0);
				received(x);
				break;
			}
		}
	}
}

static void send_window(int w)
{
	poll_until(&sends_left, &fins_left);
	for (int k = w * tags; k < iters && k < (w + 1) * tags; k++) {
		int slot = k % tags;
		uint8_t *s = buf + slot * send_slot;
		if (check)
			for (int j = 0; j < length(k); j++)
				s[TMH_LEN + j] = pattern(k, j);
		if (is_rndv(k)) {
			uint8_t hdr[TMH_LEN + RVH_LEN];
			uint64_t va = htobe64((uintptr_t)(s + TMH_LEN));
			uint32_t rkey = htobe32(mr->rkey), len = htobe32(length(k));
			put_tmh(hdr, TMH_RNDV, k, TAG_BASE | k);
			memcpy(hdr + TMH_LEN, &va, 8);
			memcpy(hdr + TMH_LEN + 8, &rkey, 4);
			memcpy(hdr + TMH_LEN + 12, &len, 4);
			post_send(wrid(WR_SEND, k), hdr, sizeof hdr, 1, 0);
			fin_wait[slot] = 1;
			fins_left++;
			sent_rndv++;
		} else {
			put_tmh(s, TMH_EAGER, k, TAG_BASE | k);
			post_send(wrid(WR_SEND, k), s, TMH_LEN + length(k), 0, mr->lkey);
			sent_eager++;
		}
		sends_left++;
	}
}

/* exchange is pp_client_exch_dest: our address, the server's, "done". */
static void exchange(const char *host, int port, uint16_t lid, uint32_t qpn, uint32_t psn, const union ibv_gid *gid,
		     uint32_t *rqpn, uint32_t *rpsn, union ibv_gid *rgid, uint16_t *rlid)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *t;
	char service[8], msg[52], wgid[33];
	int fd = -1;
	snprintf(service, sizeof service, "%d", port);
	if (getaddrinfo(host, service, &hints, &res))
		die("getaddrinfo failed");
	for (t = res; t; t = t->ai_next) {
		fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
		if (fd >= 0 && connect(fd, t->ai_addr, t->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("Couldn't connect to the server");
	for (int i = 0; i < 16; i++)
		sprintf(wgid + 2 * i, "%02x", gid->raw[i]);
	snprintf(msg, sizeof msg, "%04x:%06x:%06x:%s", lid, qpn, psn, wgid);
	if (write(fd, msg, sizeof msg) != sizeof msg)
		die("Couldn't send local address");
	size_t got = 0;
	while (got < sizeof msg) {
		ssize_t n = read(fd, msg + got, sizeof msg - got);
		if (n <= 0)
			die("Couldn't read remote address");
		got += n;
	}
	unsigned l, q, p;
	if (sscanf(msg, "%x:%x:%x:%32s", &l, &q, &p, wgid) != 4 || strlen(wgid) != 32)
		die("the server's address is not LID:QPN:PSN:GID");
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(wgid + 2 * i, "%2x", &v);
		rgid->raw[i] = v;
	}
	*rlid = l, *rqpn = q, *rpsn = p;
	if (write(fd, "done", sizeof "done") != sizeof "done")
		die("Couldn't send \"done\"");
	close(fd);
}

int main(int argc, char **argv)
{
	const char *devname = NULL;
	int port = 18515, ib_port = 1, gidx = 0, c;
	enum ibv_mtu mtu = IBV_MTU_1024;
	while ((c = getopt(argc, argv, "p:d:i:g:m:n:s:t:r:c")) != -1) {
		switch (c) {
		case 'p': port = atoi(optarg); break;
		case 'd': devname = optarg; break;
		case 'i': ib_port = atoi(optarg); break;
		case 'g': gidx = atoi(optarg); break;
		case 'm':
			switch (atoi(optarg)) {
			case 256: mtu = IBV_MTU_256; break;
			case 512: mtu = IBV_MTU_512; break;
			case 1024: mtu = IBV_MTU_1024; break;
			case 2048: mtu = IBV_MTU_2048; break;
			case 4096: mtu = IBV_MTU_4096; break;
			default: die("invalid -m");
			}
			break;
		case 'n': iters = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 't': tags = atoi(optarg); break;
		case 'r': rndv_thr = atoi(optarg); break;
		case 'c': check = 1; break;
		default: die("usage: tm_send [-p port] [-d dev] [-i ib-port] [-g gid-idx] [-m mtu] [-n iters] [-s size] [-t tags] [-r rndv-bytes] [-c] server");
		}
	}
	if (optind != argc - 1)
		die("usage: tm_send [options] server");
	if (iters < 1 || size < 1 || tags < 1 || tags > MAX_TAGS || rndv_thr < 0)
		die("invalid -n, -s, -t or -r");

	struct ibv_device **list = ibv_get_device_list(NULL), *dev = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname)) {
			dev = list[i];
			break;
		}
	if (!dev || !(ctx = ibv_open_device(dev)))
		die("no such IB device");
	int max_eager = 0;
	for (int k = 0; k < 4; k++)
		if (!is_rndv(k) && length(k) > max_eager)
			max_eager = length(k);
	ubuf = TMH_LEN + (max_eager > RVH_LEN ? max_eager : RVH_LEN);
	nrecv = 2 * tags + 4; /* a window of messages, a window of FINs */
	send_slot = TMH_LEN + size;
	app_off = tags * send_slot;
	rq_off = app_off + tags * size;
	size_t len = rq_off + (size_t)nrecv * ubuf;
	if (!(buf = calloc(1, len)) || !(pd = ibv_alloc_pd(ctx)) ||
	    !(mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ)) ||
	    !(cq = ibv_create_cq(ctx, 8 * tags + nrecv + 16, NULL, NULL, 0)))
		die("Couldn't allocate PD, MR or CQ");
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4 * tags + 4, .max_recv_wr = nrecv, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = TMH_LEN + RVH_LEN } };
	if (!(qp = ibv_create_qp(pd, &ia)))
		die("Couldn't create QP");
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = ib_port, .qp_access_flags = IBV_ACCESS_REMOTE_READ };
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("Failed to modify QP to INIT");
	for (int i = 0; i < nrecv; i++)
		post_recv(i);

	struct ibv_port_attr pa;
	union ibv_gid gid, rgid;
	if (ibv_query_port(ctx, ib_port, &pa) || ibv_query_gid(ctx, ib_port, gidx, &gid))
		die("Couldn't get port info or GID");
	srand48(getpid() * time(NULL));
	uint32_t psn = lrand48() & 0xffffff, rqpn, rpsn;
	uint16_t rlid;
	exchange(argv[optind], port, pa.lid, qp->qp_num, psn, &gid, &rqpn, &rpsn, &rgid, &rlid);

	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR, a.path_mtu = mtu, a.dest_qp_num = rqpn, a.rq_psn = rpsn;
	a.max_dest_rd_atomic = MAX_RD_ATOMIC, a.min_rnr_timer = 12;
	a.ah_attr.dlid = rlid, a.ah_attr.port_num = ib_port;
	a.ah_attr.is_global = 1, a.ah_attr.grh.dgid = rgid, a.ah_attr.grh.hop_limit = 1, a.ah_attr.grh.sgid_index = gidx;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("Failed to modify QP to RTR");
	a.qp_state = IBV_QPS_RTS, a.timeout = 14, a.retry_cnt = 7, a.rnr_retry = 7, a.sq_psn = psn;
	a.max_rd_atomic = MAX_RD_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("Failed to modify QP to RTS");

	double start = now();
	for (int w = 0; w * tags < iters; w++) {
		send_window(w);
		rwin = w;
		rleft = (w + 1) * tags < iters ? tags : iters - w * tags;
		int zero = 0;
		poll_until(&rleft, &zero);
	}
	poll_until(&sends_left, &fins_left);
	/* a NO_TAG each way: every FIN either side queued went before it */
	uint8_t hdr[TMH_LEN];
	put_tmh(hdr, TMH_NO_TAG, 0, 0);
	post_send(wrid(WR_DONE, 0), hdr, TMH_LEN, 1, 0);
	poll_until(&done_left, &peer_left);
	double secs = now() - start;
	printf("sent: %d eager, %d rendezvous\n", sent_eager, sent_rndv);
	printf("received: %d eager, %d rendezvous (matched in software)%s\n", got_eager, got_rndv,
	       check ? ", every byte checked" : "");
	printf("%d messages each way in %.2f seconds = %.2f messages/sec\n", iters, secs, 2 * iters / secs);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return got_eager + got_rndv == iters ? 0 : 1;
}
