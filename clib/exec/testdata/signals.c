/*
 * signals.c - signal handlers installed by the program, as perftest
 * installs its SIGALRM handler, with plain signal() after the device is
 * open: they run while the thread is inside the engine (Go) without
 * breaking it, and the engine's threads never take the program's
 * asynchronous signals.
 *
 *   signals handler | signals mask
 */
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "loop.h"

static volatile sig_atomic_t alarms;

/* A handler that needs stack, as perftest's printing its report does;
 * more than Go's 32 KiB signal stack, which the thread that opens the
 * device does not use (the library gives it a larger one). */
static void on_alarm(int sig)
{
	char buf[65536];
	int n = snprintf(buf, sizeof(buf), "%d %f", sig, 1.0 / (alarms + 1));

	memset(buf + n, 'x', sizeof(buf) - n - 1);
	alarms += buf[sizeof(buf) / 2] == 'x';
}

/* sigblk returns thread tid's blocked signals from /proc. */
static unsigned long long sigblk(const char *tid)
{
	char path[64], line[256];
	unsigned long long mask = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &mask) == 1)
			break;
	fclose(f);
	return mask;
}

int main(int argc, char **argv)
{
	struct loop l;

	if (argc != 2) {
		fprintf(stderr, "usage: signals handler|mask\n");
		return 1;
	}
	loop_open(&l, 16, 64);
	if (strcmp(argv[1], "handler") == 0) {
		struct itimerval it = { { 0, 200 }, { 0, 200 } };
		struct sigaction sa;
		int i;

		signal(SIGALRM, on_alarm);
		if (sigaction(SIGALRM, NULL, &sa))
			die("sigaction");
		check(sa.sa_flags & SA_ONSTACK, "the handler installed by signal() lacks SA_ONSTACK");
		setitimer(ITIMER_REAL, &it, NULL);
		for (i = 0; i < 20000 && alarms < 2000; i++)
			transfer(&l, i);
		memset(&it, 0, sizeof(it));
		setitimer(ITIMER_REAL, &it, NULL);
		check(alarms > 0, "no SIGALRM ran");
		printf("handler: %d SIGALRMs ran during %d transfers\n", (int)alarms, i);
	} else {
		/* The engine's threads block these; Go keeps SIGCHLD, SIGPROF
		 * and its SIGURG open on them (runtime sigtable: _SigUnblock),
		 * and the synchronous signals, which go to the faulting thread. */
		const unsigned long long want = 1ULL << (SIGALRM - 1) | 1ULL << (SIGINT - 1) |
						1ULL << (SIGTERM - 1) | 1ULL << (SIGUSR1 - 1) |
						1ULL << (SIGUSR2 - 1) | 1ULL << (SIGHUP - 1) |
						1ULL << (SIGQUIT - 1) | 1ULL << (SIGPIPE - 1);
		char self[32];
		struct dirent *e;
		DIR *d = opendir("/proc/self/task");
		int others = 0;

		transfer(&l, 1);
		snprintf(self, sizeof(self), "%ld", (long)syscall(SYS_gettid));
		check(d != NULL, "/proc/self/task");
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			if (strcmp(e->d_name, self) == 0) {
				check((sigblk(e->d_name) & want) == 0, "the program's thread blocks %llx",
				      sigblk(e->d_name) & want);
				continue;
			}
			others++;
			check((sigblk(e->d_name) & want) == want, "engine thread %s takes signals: SigBlk %llx",
			      e->d_name, sigblk(e->d_name));
		}
		closedir(d);
		check(others > 0, "no engine thread");
		printf("mask: %d engine threads block the program's signals\n", others);
	}
	loop_close(&l);
	return 0;
}
