/*
 * engine.c - loading the Go engine (libsoftnic.so) on first use.
 *
 * The engine is a Go runtime. It is loaded lazily, by the first
 * ibv_open_device, so that a process that lists devices but never opens
 * one (ibv_devices), or that forks before it opens one (Python's
 * multiprocessing), never starts a Go runtime. A child forked after the
 * runtime started cannot run Go code (its threads are gone): there every
 * call that needs the engine fails with ENODEV instead of hanging
 * (dead_engine).
 *
 * The runtime's threads never take the program's asynchronous signals:
 * they are blocked while the engine loads, and Go gives every thread it
 * starts the signal mask of the thread that started the runtime
 * (runtime.initSigmask), so a signal sent to the process goes to one of
 * the program's own threads.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "softnic.h"

#define ENGINE_NAME "libsoftnic.so"

const struct sn_engine *sn_e;

static struct sn_engine engine;
static void *engine_lib; /* its dlopen handle, for softnic_engine_sym */
static pthread_mutex_t engine_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile bool forked;

/*
 * The engine of a child forked after the engine started: every function
 * fails with ENODEV (sne_poll_cq with -ENODEV, a negative count), so that
 * a child that uses its parent's objects gets an error rather than a hang
 * in a Go runtime without threads. One function serves every entry:
 * each returns int, and the x86-64 and AArch64 calling conventions let a
 * function ignore arguments it does not declare.
 */
static int dead(void)
{
	return ENODEV;
}

static int dead_poll(void)
{
	return -ENODEV;
}

static struct sn_engine dead_engine = {
#define SN_DEAD(name) .name = (__typeof__(sne_##name) *)(void (*)(void))dead,
	SN_ENGINE_FUNCS(SN_DEAD)
	SN_ENGINE_FUNCS_EX(SN_DEAD)
#undef SN_DEAD
};

static void atfork_child(void)
{
	/* The mutex may have been held by a thread that is gone. */
	pthread_mutex_init(&engine_mu, NULL);
	if (sn_e) {
		forked = true;
		dead_engine.poll_cq = (__typeof__(sne_poll_cq) *)(void (*)(void))dead_poll;
		sn_e = &dead_engine;
	}
}

bool sn_forked(void)
{
	return forked;
}

void sn_debug(const char *fmt, ...)
{
	static int debug = -1;
	va_list ap;

	if (debug < 0) {
		const char *s = getenv("SOFTNIC_DEBUG");
		debug = s && strcmp(s, "1") == 0;
	}
	if (!debug)
		return;
	va_start(ap, fmt);
	fputs("softnic: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* engine_path finds libsoftnic.so: $SOFTNIC_ENGINE, else beside this
 * library. */
static int engine_path(char *buf, size_t len)
{
	const char *env = getenv("SOFTNIC_ENGINE");
	Dl_info info;
	char self[PATH_MAX];

	if (env && *env) {
		snprintf(buf, len, "%s", env);
		return 0;
	}
	if (!dladdr((void *)engine_path, &info) || !info.dli_fname)
		return -1;
	snprintf(self, sizeof(self), "%s", info.dli_fname);
	snprintf(buf, len, "%s/%s", dirname(self), ENGINE_NAME);
	return 0;
}

/* The signals the runtime's threads keep: the synchronous ones, which the
 * kernel sends to the faulting thread, and Go's own preemption signal. */
static void block_async_signals(sigset_t *old)
{
	static const int keep[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGURG };
	sigset_t all;

	sigfillset(&all);
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		sigdelset(&all, keep[i]);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

static int load_locked(void)
{
	char path[PATH_MAX];
	sigset_t old;
	void *lib;

	if (engine_path(path, sizeof(path))) {
		fprintf(stderr, "softnic: cannot locate %s\n", ENGINE_NAME);
		return ENOENT;
	}
	block_async_signals(&old);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!lib) {
		fprintf(stderr, "softnic: %s\n", dlerror());
		return ENOENT;
	}
#define SN_ENGINE_LOOKUP(name)                                                 \
	engine.name = (__typeof__(sne_##name) *)dlsym(lib, "sne_" #name);        \
	if (!engine.name) {                                                    \
		fprintf(stderr, "softnic: %s lacks sne_" #name "\n", path);     \
		return ENOENT;                                                 \
	}
	SN_ENGINE_FUNCS(SN_ENGINE_LOOKUP)
	SN_ENGINE_FUNCS_EX(SN_ENGINE_LOOKUP)
#undef SN_ENGINE_LOOKUP
	if (engine.abi_version() != SN_ABI_VERSION) {
		fprintf(stderr, "softnic: %s has ABI version %d, want %d\n", path,
			engine.abi_version(), SN_ABI_VERSION);
		return ENOENT;
	}
	engine_lib = lib;
	return 0;
}

/*
 * A thread that calls into the engine runs the program's signal handlers
 * on an alternate stack (they have SA_ONSTACK: signal.c); without one of
 * its own, Go gives it its 32 KiB signal stack, which a handler that
 * needs more overflows. The thread that opens a device, often the only
 * one that calls in (perftest's), gets a larger one of its own here,
 * with a guard page below it.
 */
#define ALTSTACK_SIZE (256 << 10)

void sn_thread_altstack(void)
{
	long page = sysconf(_SC_PAGESIZE);
	stack_t ss;
	void *p;

	if (sigaltstack(NULL, &ss) || !(ss.ss_flags & SS_DISABLE))
		return; /* the thread has one */
	p = mmap(NULL, ALTSTACK_SIZE + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
		 -1, 0);
	if (p == MAP_FAILED)
		return;
	mprotect(p, page, PROT_NONE);
	ss.ss_sp = (char *)p + page;
	ss.ss_size = ALTSTACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL))
		munmap(p, ALTSTACK_SIZE + page);
}

const struct sn_engine *sn_engine_load(void)
{
	static bool registered;
	int err = 0;

	if (forked) {
		fprintf(stderr, "softnic: this process was forked after its parent started "
				"softnic's engine (a Go runtime, which does not survive fork); "
				"open the device in the child only\n");
		errno = ENODEV;
		return NULL;
	}
	pthread_mutex_lock(&engine_mu);
	if (!registered) {
		pthread_atfork(NULL, NULL, atfork_child);
		registered = true;
	}
	if (!sn_e) {
		err = load_locked();
		if (!err)
			__atomic_store_n(&sn_e, &engine, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&engine_mu);
	if (err) {
		errno = err;
		return NULL;
	}
	return sn_e;
}

/*
 * softnic_engine_sym gives softnic's librdmacm.so.1 the engine's function
 * name (its sne_cm_* functions), the engine loaded first: the two
 * libraries share the process's one engine and NIC. NULL with errno set
 * as sn_engine_load sets it, or ENOENT when the engine lacks name.
 */
SN_EXPORT void *softnic_engine_sym(const char *name)
{
	void *fn;

	if (!sn_engine_load())
		return NULL;
	fn = dlsym(engine_lib, name);
	if (!fn) {
		fprintf(stderr, "softnic: the engine lacks %s\n", name);
		errno = ENOENT;
	}
	return fn;
}
