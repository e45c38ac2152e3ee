/*
 * cma.h - softnic's librdmacm.so.1: the library's own structs and the
 * functions its files share.
 *
 * The library is rdma-core's librdmacm with the kernel's rdma_cm (the
 * commands librdmacm writes to /dev/infiniband/rdma_cm, ucma.c) replaced
 * by the engine's CM functions (softnic_engine.h, sne_cm_*), which it
 * reaches through softnic's libibverbs.so.1: the one engine of the
 * process, whose NIC the library's device context opens. It is built
 * against the system's <rdma/rdma_cma.h>, so every struct a program reads
 * (rdma_cm_id, rdma_cm_event, rdma_addrinfo, ...) has the layout the
 * program was compiled with (abi.c checks it against rdma-core 44's).
 *
 * The verbs objects of an ID (its QP, PD, CQs and their channels, an SRQ)
 * are libibverbs objects the library makes through the ordinary calls on
 * the device context, as rdma-core's librdmacm makes them: the inline
 * helpers of <rdma/rdma_verbs.h> post and poll through them.
 */
#ifndef SOFTNIC_CMA_H
#define SOFTNIC_CMA_H

#include <errno.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h> /* rdma_seterrno */
#include <stdbool.h>
#include <stdint.h>

#include "softnic_engine.h"
#include "softnic_verbs.h"

#define SN_EXPORT __attribute__((visibility("default")))

/* ERR sets errno and returns -1, as librdmacm's calls fail. */
static inline int ERR(int err)
{
	errno = err;
	return -1;
}


/* ---- The engine (engine.c) ---- */

struct sn_cm {
#define SN_CM_FIELD(name) __typeof__(sne_cm_##name) *name;
	SN_CM_FUNCS(SN_CM_FIELD)
#undef SN_CM_FIELD
};

/*
 * softnic_engine_sym is softnic's libibverbs.so.1's (SOFTNIC_PRIVATE_1):
 * the engine's function name, the engine loaded first; NULL with errno set
 * when the engine cannot be loaded (ENODEV in a child forked after it
 * started) or lacks name.
 */
void *softnic_engine_sym(const char *name);

/* The engine's CM functions, once sn_cm_load has found them. */
extern const struct sn_cm *sn_cm;

/*
 * sn_cm_load finds the engine's CM functions through libibverbs (which
 * loads the engine on first use): 0, or -1 with errno set (ENODEV in a
 * child forked after the engine started: every function then answers
 * ENODEV).
 */
int sn_cm_load(void);

/* ---- The device (cma.c) ---- */

/*
 * The device the library's IDs bind to: softnic's one device, opened by
 * the library (as rdma-core's ucma_init_device opens each), with the PD
 * an ID's QP takes when given none (ucma_get_device) and the XRC domain
 * of its XRC IDs.
 */
struct cma_device {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_xrcd *xrcd;
	int max_qpsize;
	uint8_t max_initiator_depth;
	uint8_t max_responder_resources;
};

extern struct cma_device cma_dev;

/* ucma_start opens the device and the engine's CM on first use; pref, when
 * not NULL, is the address the NIC opens at if it is not open yet and
 * SOFTNIC_ADDR does not name one. 0 or -1 with errno set. */
int ucma_start(const struct sockaddr *pref);

/* ucma_watch starts the process's watcher, which sends what the CM leaves
 * for a process that dies (orphan.c); ucma_unwatch tells it that the
 * process closed its CM itself. */
void ucma_watch(void);
void ucma_unwatch(void);

/* ucma_complete takes a synchronous ID's next event into id->event (the
 * one before acknowledged): 0, or -1 with errno (EAGAIN when its channel
 * is non-blocking and no event is there; the event's status otherwise). */
int ucma_complete(struct rdma_cm_id *id);

/* ucma_max_qpsize is the device's largest queue (rsockets' sizes). */
int ucma_max_qpsize(struct rdma_cm_id *id);

/* Address conversions between struct sockaddr and the engine's. */
int ucma_addrlen(const struct sockaddr *addr);
int ucma_to_engine(const struct sockaddr *in, struct sn_addr *out);
void ucma_from_engine(const struct sn_addr *in, struct sockaddr_storage *out);
__be16 ucma_get_port(const struct sockaddr *addr);

#endif /* SOFTNIC_CMA_H */
