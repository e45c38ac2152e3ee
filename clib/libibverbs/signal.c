/*
 * signal.c - every signal handler the program installs runs on an
 * alternate signal stack (SA_ONSTACK).
 *
 * A thread that calls into the engine runs Go code on a goroutine stack,
 * a few kilobytes that Go grows by copying; a handler the program set up
 * without SA_ONSTACK that interrupts it runs on that stack, past its
 * guard, and can break the Go runtime ("fatal: systemstack called from
 * unexpected goroutine": Go's os/signal documentation requires SA_ONSTACK
 * of non-Go handlers). perftest installs its SIGALRM handler with plain
 * signal(). Go gives each thread that enters it an alternate stack (the
 * thread that opens a device has a larger one: engine.c) and adds
 * SA_ONSTACK to the handlers installed before it starts; these wrappers
 * add it to those installed later: libibverbs.so.1 comes before libc.so.6
 * in a program's search order, so a program's signal() and sigaction()
 * find these first (the version script gives them libc's symbol
 * version), and they call libc's with SA_ONSTACK added.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stddef.h>

#include "softnic.h"

/* The symbol version of libc's signal functions, from the build. */
#ifndef SN_GLIBC_SIGNAL_VERSION
#error "SN_GLIBC_SIGNAL_VERSION must name the symbol version of libc's sigaction"
#endif

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn libc_sigaction(void)
{
	static sigaction_fn fn;

	if (!fn)
		fn = (sigaction_fn)dlvsym(RTLD_NEXT, "sigaction", SN_GLIBC_SIGNAL_VERSION);
	return fn;
}

static int onstack_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction a;

	if (act && act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN &&
	    !(act->sa_flags & SA_ONSTACK)) {
		a = *act;
		a.sa_flags |= SA_ONSTACK;
		act = &a;
	}
	return libc_sigaction()(sig, act, old);
}

SN_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return onstack_sigaction(sig, act, old);
}

/* install is signal(2) with the semantics of glibc's, BSD's: the handler
 * stays installed, the signal is blocked while it runs and system calls
 * it interrupts restart. */
static sighandler_t install(int sig, sighandler_t handler, int flags)
{
	struct sigaction act = { .sa_handler = handler, .sa_flags = flags }, old;

	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	if (onstack_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

SN_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESTART);
}

SN_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
	return install(sig, handler, SA_RESTART);
}

/* System V's signal: the handler is reset when it runs, and the signal
 * is not blocked while it does (glibc's __sysv_signal). */
SN_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t handler)
{
	struct sigaction act = { .sa_handler = handler, .sa_flags = SA_RESETHAND | SA_NODEFER }, old;

	sigemptyset(&act.sa_mask);
	if (onstack_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

SN_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
	return __sysv_signal(sig, handler);
}
