/*
 * engine.c - the engine's CM functions, found through softnic's
 * libibverbs.so.1, which loads the engine (one Go runtime in the process)
 * for both libraries.
 *
 * A child forked after the engine started cannot run Go code: there every
 * function answers ENODEV (dead), as libibverbs' do, instead of hanging in
 * a runtime without threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "cma.h"

const struct sn_cm *sn_cm;

static struct sn_cm cm;
static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;

/* Each function returns int, and the x86-64 and AArch64 calling
 * conventions let one function ignore the arguments it does not declare. */
static int dead(void)
{
	return ENODEV;
}

static struct sn_cm dead_cm = {
#define SN_CM_DEAD(name) .name = (__typeof__(sne_cm_##name) *)(void (*)(void))dead,
	SN_CM_FUNCS(SN_CM_DEAD)
#undef SN_CM_DEAD
};

static void atfork_child(void)
{
	pthread_mutex_init(&load_mu, NULL);
	if (sn_cm)
		sn_cm = &dead_cm;
}

int sn_cm_load(void)
{
	static bool registered;
	int err = 0;

	pthread_mutex_lock(&load_mu);
	if (!registered) {
		pthread_atfork(NULL, NULL, atfork_child);
		registered = true;
	}
	if (!sn_cm) {
#define SN_CM_LOOKUP(name)                                                     \
	if (!err) {                                                            \
		cm.name = (__typeof__(sne_cm_##name) *)softnic_engine_sym("sne_cm_" #name); \
		if (!cm.name)                                                  \
			err = errno ? errno : ENOENT;                          \
	}
		SN_CM_FUNCS(SN_CM_LOOKUP)
#undef SN_CM_LOOKUP
		if (!err)
			__atomic_store_n(&sn_cm, &cm, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&load_mu);
	return err ? ERR(err) : 0;
}
