/* The sandbox's seccomp filter, driven with the system's python3 (what the
 * code reward runs): every denied system call answers EPERM (called with
 * arguments that, unfiltered, would succeed or fail otherwise, so the check
 * cannot pass without the filter), a system call of another ABI kills the
 * program, and a stdlib workout (threads, fork, subprocess, AF_UNIX sockets,
 * asyncio, sqlite3, mmap, signals, files) still passes. At every isolation
 * level: the filter does not depend on namespaces. Without python3 the
 * checks are skipped with that reason. */
#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "sandbox/sandbox.h"
#include "sandbox_run.h"
#include "util/strbuf.h"

static const char *const python = "/usr/bin/python3";

/* The program's input is Python source; it reports on fd 4. */
static const char *const args[] = {"-s", "-B", "-c", "import os; exec(compile(os.read(3, 1 << 20), 'run', 'exec'))",
                                   NULL};

static sandbox_result run_py(const sandbox *sb, const char *source) {
    sandbox_result r = sandbox_run_one(sb, source);
    if (!sandbox_exited_ok(&r)) printf("#   output: %.300s\n", r.output);
    return r;
}

/* Each line of `calls` is "name: expression"; the report is "name=errno "
 * per line, 0 when the call succeeded. */
static const char errno_prelude[] =
    "import ctypes, ctypes.util, os\n"
    "libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "def err(f, *a):\n"
    "    ctypes.set_errno(0)\n"
    "    return 0 if f(*a) >= 0 else ctypes.get_errno()\n"
    "out = []\n";

/* Runs the Python list `calls` of (name, call) and returns "name=errno ...". */
static sandbox_result errno_report(const sandbox *sb, const char *calls) {
    strbuf src = {0};
    sb_printf(&src, "%sS = libc.syscall\ncalls = [\n%s]\n", errno_prelude, calls);
    sb_puts(&src, "for name, call in calls:\n"
                  "    out.append('%s=%d' % (name, call()))\n"
                  "os.write(4, ' '.join(out).encode())\n");
    sandbox_result r = run_py(sb, src.data);
    sb_free(&src);
    CHECK(sandbox_exited_ok(&r));
    printf("#   %s\n", r.report);
    return r;
}

/* The program must die of SIGSYS before it reports anything. */
static void check_killed_by_sigsys(const sandbox *sb, const char *source) {
    sandbox_result r = run_py(sb, source);
    CHECK(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGSYS);
    CHECK_EQ_STR(r.report, "");
}

static void test_denied(const sandbox *sb) {
    TEST("the filter is installed: /proc/self/status says seccomp mode 2");
    sandbox_result r = run_py(sb, "import os\n"
                                  "s = open('/proc/self/status').read().split('\\n')\n"
                                  "os.write(4, ' '.join(l.replace('\\t', '') for l in s"
                                  " if l.startswith('Seccomp')).encode())\n");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "Seccomp:2 Seccomp_filters:1");

    TEST("denied system calls answer EPERM (arguments that would not, unfiltered)");
    /* x86-64 numbers: the filter is written for them, and a test in C
     * names would resolve through the same table it checks. */
    char calls[2048];
    snprintf(calls, sizeof calls,
             "  ('ptrace', lambda: err(S, 101, 0, 0, 0, 0)),\n"            /* PTRACE_TRACEME: succeeds */
             "  ('vm_readv', lambda: err(S, 310, %d, 1, 1, 1, 1, 0)),\n"    /* bad iovecs: EFAULT */
             "  ('unshare_user', lambda: err(S, 272, 0x10000000)),\n"      /* own user namespace: succeeds */
             "  ('unshare_none', lambda: err(S, 272, 0)),\n"               /* a no-op: succeeds */
             "  ('setns', lambda: err(S, 308, -1, 0)),\n"                   /* EBADF */
             "  ('mount', lambda: err(S, 165, 0, 1, 0, 0, 0)),\n"
             "  ('keyctl', lambda: err(S, 250, 0, -3, 0)),\n"               /* session keyring id: succeeds */
             "  ('bpf', lambda: err(S, 321, 0, 1, 0)),\n"                   /* bad attr: EFAULT/EINVAL */
             "  ('perf', lambda: err(S, 298, 1, 0, -1, -1, 0)),\n"          /* EFAULT */
             "  ('io_uring', lambda: err(S, 425, 1, 1)),\n"                 /* EFAULT */
             "  ('userfaultfd', lambda: err(S, 323, 0)),\n",
             (int)getpid());
    sandbox_result r2 = errno_report(sb, calls);
    CHECK_EQ_STR(r2.report, "ptrace=1 vm_readv=1 unshare_user=1 unshare_none=1 setns=1 mount=1 keyctl=1 bpf=1 perf=1 "
                            "io_uring=1 userfaultfd=1");
    snprintf(calls, sizeof calls,
             "  ('kexec', lambda: err(S, 246, 0, 0, 0, 0)),\n"
             "  ('init_module', lambda: err(S, 175, 0, 0, 0)),\n"
             "  ('by_handle', lambda: err(S, 304, -1, 1, 0)),\n"
             "  ('clone3', lambda: err(S, 435, 1, 0)),\n"                   /* ENOSYS, not EPERM */
             "  ('clone_newpid', lambda: err(S, 56, 0x20000000 | 17, 0, 0, 0, 0)),\n"
             "  ('kill_all', lambda: err(S, 62, -1, 0)),\n"
             "  ('kill_all_wide', lambda: err(S, 62, 0xffffffffffffffff, 0)),\n"
             "  ('kill_parent', lambda: err(S, 62, %d, 0)),\n"
             "  ('prlimit_parent', lambda: err(S, 302, %d, 7, 0, 0)),\n"
             "  ('prlimit_self', lambda: err(S, 302, 0, 7, 0, 0)),\n"        /* reading its own: succeeds */
             "  ('kill_self', lambda: err(S, 62, os.getpid(), 0)),\n",
             (int)getpid(), (int)getpid());
    r2 = errno_report(sb, calls);
    /* In a PID namespace our pid is out of sight and its number is free for
     * the run's own processes, so the filter leaves it alone there (ESRCH). */
    char want[256];
    snprintf(want, sizeof want,
             "kexec=1 init_module=1 by_handle=1 clone3=38 clone_newpid=1 kill_all=1 kill_all_wide=1 kill_parent=%d "
             "prlimit_parent=1 prlimit_self=0 kill_self=0",
             sb->ns & SANDBOX_NS_PID ? ESRCH : EPERM);
    CHECK_EQ_STR(r2.report, want);

    TEST("sockets: only AF_UNIX; every other family is EPERM");
    r = run_py(sb, "import os, socket\n"
                   "out = []\n"
                   "for name, fam, kind in [('inet', socket.AF_INET, socket.SOCK_STREAM),\n"
                   "                        ('udp', socket.AF_INET, socket.SOCK_DGRAM),\n"
                   "                        ('inet6', socket.AF_INET6, socket.SOCK_STREAM),\n"
                   "                        ('netlink', socket.AF_NETLINK, socket.SOCK_RAW),\n"
                   "                        ('packet', socket.AF_PACKET, socket.SOCK_RAW),\n"
                   "                        ('unix', socket.AF_UNIX, socket.SOCK_STREAM)]:\n"
                   "    try:\n"
                   "        socket.socket(fam, kind).close(); out.append(name + '=ok')\n"
                   "    except OSError as e:\n"
                   "        out.append('%s=%d' % (name, e.errno))\n"
                   "a, b = socket.socketpair(); a.send(b'x'); out.append('pair=' + b.recv(1).decode())\n"
                   "os.write(4, ' '.join(out).encode())\n");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "inet=1 udp=1 inet6=1 netlink=1 packet=1 unix=ok pair=x");

    TEST("AF_UNIX sockets: connect, sendto with an address, sendmsg and sendmmsg are EPERM; a pair still talks");
    /* Each would succeed unfiltered: the sockets are the program's own, in its directory. */
    r = run_py(sb, "import os, socket\n"
                   "out = []\n"
                   "def attempt(name, f):\n"
                   "    try:\n"
                   "        f(); out.append(name + '=ok')\n"
                   "    except OSError as e:\n"
                   "        out.append('%s=%d' % (name, e.errno))\n"
                   "srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind('s'); srv.listen(1)\n"
                   "attempt('connect', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('s'))\n"
                   "dg = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); dg.bind('d')\n"
                   "attempt('sendto', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'x', 'd'))\n"
                   "a, b = socket.socketpair()\n"
                   "attempt('sendmsg', lambda: a.sendmsg([b'x']))\n"
                   "a.send(b'y'); out.append('pair=' + b.recv(1).decode())\n"
                   "os.write(4, ' '.join(out).encode())\n");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "connect=1 sendto=1 sendmsg=1 pair=y");

    TEST("a system call of another ABI (x32) kills the program with SIGSYS");
    char source[1024];
    snprintf(source, sizeof source, "%slibc.syscall(0x40000000 | 39)\nos.write(4, b'survived')\n", errno_prelude);
    check_killed_by_sigsys(sb, source);

    TEST("a system call of the i386 ABI (int 0x80) kills the program with SIGSYS");
    /* mov eax, 20 (i386 getpid); int 0x80; ret */
    check_killed_by_sigsys(sb, "import ctypes, mmap, os\n"
                               "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
                               "m.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))\n"
                               "f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))\n"
                               "os.write(4, b'pid %d' % f())\n");

    TEST("rlimits cannot be raised back up");
    r = run_py(sb, "import os, resource\n"
                   "out = []\n"
                   "for name in ['RLIMIT_NPROC', 'RLIMIT_AS', 'RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_CPU']:\n"
                   "    lim = getattr(resource, name)\n"
                   "    soft, hard = resource.getrlimit(lim)\n"
                   "    try:\n"
                   "        resource.setrlimit(lim, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
                   "        out.append(name + '=raised')\n"
                   "    except (ValueError, OSError):\n"
                   "        out.append(name + '=held')\n"
                   "os.write(4, ' '.join(out).encode())\n");
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "RLIMIT_NPROC=held RLIMIT_AS=held RLIMIT_FSIZE=held RLIMIT_NOFILE=held RLIMIT_CPU=held");
}

/* What test code uses keeps working under the filter. */
static const char stdlib_workout[] =
    "import os, sys, threading, subprocess, socket, asyncio, sqlite3, mmap, signal, json, re, hashlib\n"
    "import random, tempfile, time, collections, itertools, functools, math, fractions, decimal, unittest\n"
    "import multiprocessing.connection, select, io, struct, datetime, heapq, bisect, string, textwrap\n"
    "done = []\n"
    "t = threading.Thread(target=lambda: done.append('thread')); t.start(); t.join()\n"
    "pid = os.fork()\n"
    "if pid == 0: os._exit(7)\n"
    "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7; done.append('fork')\n"
    "assert subprocess.run(['/bin/echo', 'hi'], capture_output=True).stdout == b'hi\\n'; done.append('subprocess')\n"
    "a, b = multiprocessing.connection.Pipe(); a.send({'k': 1}); assert b.recv() == {'k': 1}; done.append('pipe')\n"
    "async def main():\n"
    "    await asyncio.sleep(0.01)\n"
    "    p = await asyncio.create_subprocess_exec('/bin/true'); return await p.wait()\n"
    "assert asyncio.run(main()) == 0; done.append('asyncio')\n"
    "db = sqlite3.connect(':memory:'); db.execute('create table t(x)'); db.execute('insert into t values (1)')\n"
    "assert db.execute('select sum(x) from t').fetchone() == (1,); done.append('sqlite3')\n"
    "with tempfile.NamedTemporaryFile() as f:\n"
    "    f.write(b'x' * 4096); f.flush()\n"
    "    m = mmap.mmap(f.fileno(), 4096); assert m[:2] == b'xx'; m.close()\n"
    "done.append('files')\n"
    "hits = []\n"
    "signal.signal(signal.SIGALRM, lambda *_: hits.append(1)); signal.setitimer(signal.ITIMER_REAL, 0.01)\n"
    "time.sleep(0.2); assert hits; done.append('signal')\n"
    "class T(unittest.TestCase):\n"
    "    def test_sum(self): self.assertEqual(sum(range(10)), 45)\n"
    "res = unittest.TextTestRunner(stream=io.StringIO()).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))\n"
    "assert res.wasSuccessful(); done.append('unittest')\n"
    "assert hashlib.sha256(b'').hexdigest().startswith('e3b0'); assert json.loads('[1]') == [1]\n"
    "os.write(4, ' '.join(done).encode())\n";

static void test_allowed(const sandbox *sb) {
    TEST("python3's stdlib works under the filter: threads, fork, subprocess, pipes, asyncio, sqlite3, files, signals");
    sandbox_result r = run_py(sb, stdlib_workout);
    CHECK(sandbox_exited_ok(&r));
    CHECK_EQ_STR(r.report, "thread fork subprocess pipe asyncio sqlite3 files signal unittest");
}

/* A kernel that refuses the filter, played by a filter of our own that
 * answers EINVAL to installing another: sandbox_open fails with 69 and the
 * reason, rather than running code unfiltered at some weaker level. */
static void test_filter_refused(void) {
    TEST("a kernel that refuses the seccomp filter: sandbox_open is EX_UNAVAILABLE, never unfiltered");
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
            seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(seccomp), 0) || seccomp_load(ctx))
            _exit(2);
        seccomp_release(ctx);
        sandbox sb;
        sandbox_limits lim = sandbox_default_limits();
        const char *sh_args[] = {"-c", "exit 0", NULL};
        gerr e = {0};
        int rc = sandbox_open(&sb, "/bin/sh", sh_args, NULL, &lim, "", &e);
        _exit(rc == EX_UNAVAILABLE && strstr(e.msg, "the kernel refused the seccomp filter: Invalid argument") ? 0 : 1);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
    char tmp_root[256];
    snprintf(tmp_root, sizeof tmp_root, "/tmp/grpo-test-sandbox-filter-%d", (int)getpid());
    if (mkdir(tmp_root, 0755)) {
        perror(tmp_root);
        return 1;
    }
    setenv("TMPDIR", tmp_root, 1);
    bool have_python = access(python, X_OK) == 0;
    const unsigned avoid[] = {0, SANDBOX_NS_USER | SANDBOX_NS_PID | SANDBOX_NS_NET | SANDBOX_NS_MOUNT};
    for (size_t level = 0; level < sizeof avoid / sizeof avoid[0]; level++) {
        TEST(level ? "sandbox_open with python3, no namespaces" : "sandbox_open with python3");
        if (!have_python) {
            SKIP("no /usr/bin/python3 on this machine");
            continue;
        }
        sandbox_limits lim = sandbox_default_limits();
        lim.timeout = 10;
        lim.avoid_ns = avoid[level];
        sandbox sb;
        gerr e = {0};
        int rc = sandbox_open(&sb, python, args, NULL, &lim, "pass", &e);
        if (rc) printf("#   sandbox_open: %s\n", e.msg);
        CHECK_EQ_INT(rc, 0);
        if (rc) continue;
        printf("# isolation: %s%s%s%s\n", sb.ns & SANDBOX_NS_USER ? "user " : "", sb.ns & SANDBOX_NS_PID ? "pid " : "",
               sb.ns & SANDBOX_NS_NET ? "net " : "", sb.ns & SANDBOX_NS_MOUNT ? "mount" : "");
        test_denied(&sb);
        test_allowed(&sb);
        sandbox_close(&sb);
    }
    test_filter_refused();
    CHECK_EQ_INT(sandbox_remove_tree(tmp_root), 0);
    return check_done();
}
