/*
 * orphan.c - the process's watcher: what the kernel's rdma_cm does for a
 * process that dies, softnic's, which dies with it, leaves to a small
 * process of its own (reaper/reaper.c). When a process with rdma_cm
 * connections exits, however it exits, the kernel closes its rdma_cm
 * file and destroys its IDs: each connected one's DREQ goes to the peer,
 * which sees RDMA_CM_EVENT_DISCONNECTED. A process over softnic that
 * exits normally closes its CM (cma.c ucma_cleanup) and sends those
 * DREQs itself; one killed by SIGKILL cannot, and its peer, over rxe or
 * softnic, would wait for a message for ever. So the engine keeps, for
 * each established connection, its DREQ as a ready RoCEv2 datagram in
 * memory shared with the watcher (struct sn_orphans), and the watcher,
 * which waits on a pidfd of the process, sends them once it is gone.
 *
 * The watcher is exec'd (posix_spawn: no fork of the program's memory, no
 * atfork handler), in a session of its own (a terminal's ^C does not
 * reach it), and leaves its parent at once, so the program never sees it
 * among its children.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cma.h"

#define REAPER_NAME "softnic-cm-reaper"

static struct sn_orphans *table;

static void debug(const char *what)
{
	const char *s = getenv("SOFTNIC_DEBUG");

	if (s && strcmp(s, "1") == 0)
		fprintf(stderr, "softnic: no CM watcher: %s\n", what);
}

/* reaper_path finds the watcher beside this library. */
static int reaper_path(char *buf, size_t len)
{
	char self[PATH_MAX];
	Dl_info info;

	if (!dladdr((void *)reaper_path, &info) || !info.dli_fname)
		return -1;
	snprintf(self, sizeof(self), "%s", info.dli_fname);
	snprintf(buf, len, "%s/%s", dirname(self), REAPER_NAME);
	return access(buf, X_OK);
}

void ucma_watch(void)
{
	char path[PATH_MAX], pid[16];
	char *argv[] = { REAPER_NAME, pid, NULL };
	char *envp[] = { NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	int memfd = -1, pidfd = -1, err;
	pid_t child;
	void *t;

	if (reaper_path(path, sizeof(path))) {
		debug(REAPER_NAME " is not beside librdmacm.so.1");
		return;
	}
	memfd = memfd_create("softnic-cm-orphans", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, sizeof(struct sn_orphans))) {
		debug("memfd_create");
		goto out;
	}
	t = mmap(NULL, sizeof(struct sn_orphans), PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (t == MAP_FAILED) {
		debug("mmap");
		goto out;
	}
	pidfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0) {
		debug("pidfd_open (Linux 5.3)");
		munmap(t, sizeof(struct sn_orphans));
		goto out;
	}
	((struct sn_orphans *)t)->magic = SN_ORPHAN_MAGIC;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, memfd, 3);
	posix_spawn_file_actions_adddup2(&fa, pidfd, 4);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	err = posix_spawn(&child, path, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	if (err) {
		debug("posix_spawn");
		munmap(t, sizeof(struct sn_orphans));
		goto out;
	}
	/* It forks the watcher and exits at once. */
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	if (sn_cm->orphans(t)) {
		debug("the engine refused the table");
		((struct sn_orphans *)t)->closed = 1;
		munmap(t, sizeof(struct sn_orphans));
		goto out;
	}
	table = t;
out:
	if (memfd >= 0)
		close(memfd);
	if (pidfd >= 0)
		close(pidfd);
}

void ucma_unwatch(void)
{
	if (!table)
		return;
	__atomic_store_n(&table->closed, 1, __ATOMIC_RELEASE);
	sn_cm->orphans(NULL);
}
