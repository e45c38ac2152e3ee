/*
 * addrinfo.c - rdma_getaddrinfo and rdma_freeaddrinfo, as rdma-core's
 * librdmacm/addrinfo.c: the system's getaddrinfo with the hints turned
 * into a socket type and protocol, and its first answer turned back into
 * an rdma_addrinfo (QP type and port space from the socket type and
 * protocol unless the hints give them). There is no ibacm to ask for a
 * route (ucma_ib_resolve), and AF_IB addresses are refused, as RoCE has
 * no use for them.
 */
#define _GNU_SOURCE
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cma.h"

static struct rdma_addrinfo nohints;

static void ucma_convert_to_ai(struct addrinfo *ai, const struct rdma_addrinfo *rai)
{
	memset(ai, 0, sizeof(*ai));
	if (rai->ai_flags & RAI_PASSIVE)
		ai->ai_flags = AI_PASSIVE;
	if (rai->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	ai->ai_family = rai->ai_family;
	switch (rai->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	}
	switch (rai->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_IPOIB:
	case RDMA_PS_UDP:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (ai->ai_socktype == SOCK_STREAM)
			ai->ai_protocol = IPPROTO_TCP;
		else if (ai->ai_socktype == SOCK_DGRAM)
			ai->ai_protocol = IPPROTO_UDP;
		break;
	}
	if (rai->ai_flags & RAI_PASSIVE) {
		ai->ai_addrlen = rai->ai_src_len;
		ai->ai_addr = rai->ai_src_addr;
	} else {
		ai->ai_addrlen = rai->ai_dst_len;
		ai->ai_addr = rai->ai_dst_addr;
	}
	ai->ai_canonname = rai->ai_dst_canonname;
	ai->ai_next = NULL;
}

static int ucma_copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src, socklen_t src_len)
{
	*dst = malloc(src_len);
	if (!*dst)
		return ERR(ENOMEM);
	memcpy(*dst, src, src_len);
	*dst_len = src_len;
	return 0;
}

static int ucma_convert_to_rai(struct rdma_addrinfo *rai, const struct rdma_addrinfo *hints, const struct addrinfo *ai)
{
	if (hints->ai_qp_type) {
		rai->ai_qp_type = hints->ai_qp_type;
	} else {
		switch (ai->ai_socktype) {
		case SOCK_STREAM:
			rai->ai_qp_type = IBV_QPT_RC;
			break;
		case SOCK_DGRAM:
			rai->ai_qp_type = IBV_QPT_UD;
			break;
		}
	}
	if (hints->ai_port_space) {
		rai->ai_port_space = hints->ai_port_space;
	} else {
		switch (ai->ai_protocol) {
		case IPPROTO_TCP:
			rai->ai_port_space = RDMA_PS_TCP;
			break;
		case IPPROTO_UDP:
			rai->ai_port_space = RDMA_PS_UDP;
			break;
		}
	}
	rai->ai_family = ai->ai_family;
	if (ai->ai_flags & AI_PASSIVE) {
		rai->ai_flags = RAI_PASSIVE;
		if (ai->ai_canonname)
			rai->ai_src_canonname = strdup(ai->ai_canonname);
		return ucma_copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr, ai->ai_addrlen);
	}
	if (ai->ai_canonname)
		rai->ai_dst_canonname = strdup(ai->ai_canonname);
	return ucma_copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr, ai->ai_addrlen);
}

static int ucma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			    struct rdma_addrinfo *rai)
{
	struct addrinfo ai_hints;
	struct addrinfo *ai;
	int ret;

	if (hints != &nohints) {
		ucma_convert_to_ai(&ai_hints, hints);
		ret = getaddrinfo(node, service, &ai_hints, &ai);
	} else {
		ret = getaddrinfo(node, service, NULL, &ai);
	}
	if (ret)
		return ret;
	ret = ucma_convert_to_rai(rai, hints, ai);
	freeaddrinfo(ai);
	return ret;
}

SN_EXPORT int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			       struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *rai;
	int ret = 0;

	if (!service && !node && !hints)
		return ERR(EINVAL);
	if (hints && hints->ai_family == AF_IB)
		return ERR(EAFNOSUPPORT);
	rai = calloc(1, sizeof(*rai));
	if (!rai)
		return ERR(ENOMEM);
	if (!hints)
		hints = &nohints;
	if (node || service) {
		ret = ucma_getaddrinfo(node, service, hints, rai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = ucma_copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr, hints->ai_dst_len);
	}
	if (ret)
		goto err;
	if (!rai->ai_src_len && hints->ai_src_len) {
		ret = ucma_copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr, hints->ai_src_len);
		if (ret)
			goto err;
	}
	*res = rai;
	return 0;
err:
	rdma_freeaddrinfo(rai);
	return ret;
}

SN_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	struct rdma_addrinfo *rai;

	while (res) {
		rai = res;
		res = res->ai_next;
		free(rai->ai_connect);
		free(rai->ai_route);
		free(rai->ai_src_canonname);
		free(rai->ai_dst_canonname);
		free(rai->ai_src_addr);
		free(rai->ai_dst_addr);
		free(rai);
	}
}
