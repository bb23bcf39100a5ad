/*
 * The pause (sandbox) container of dracheck's real nodes: PID 1 of every pod, holding its
 * namespaces while the pod's containers come and go. Built by dracheck with
 * `gcc -static -Os -s -o pause pause.c` into the image dracheck.io/pause:3.10, because the nodes
 * have no registry to pull registry.k8s.io/pause from.
 *
 * As PID 1 of a shared PID namespace it inherits orphaned processes, so it reaps them; a
 * SIGTERM or SIGINT (the runtime stopping the sandbox) ends it with status 0, since PID 1 gets
 * no default signal actions.
 */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    /* The interrupted code may look at errno after the handler returns. */
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

int main(void) {
    struct sigaction sa = {0};
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) {
        return 1;
    }
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    if (sigaction(SIGCHLD, &sa, NULL) < 0) {
        return 2;
    }
    for (;;) {
        pause();
    }
}
