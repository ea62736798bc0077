//go:build linux

package seccomp

import "sync"

// action is what the filter does with one system call.
type action uint8

const (
	actInvalid action = iota
	actAllow
	actEPERM  // refused: dangerous, or useless without capabilities
	actENOSYS // "not implemented": obsolete, or so that libc falls back
	// The rest look at arguments (see Build for each check).
	actNamespace   // clone, unshare: EPERM with a CLONE_NEW* flag
	actPersonality // allowed for moby's harmless values only
	actSocket      // AF_VSOCK refused with EAFNOSUPPORT
	actIoctl       // TIOCSTI and TIOCLINUX refused
	actMode1       // mode in args[1]: EPERM with S_ISUID or S_ISGID
	actMode2       // mode in args[2]: likewise
	actOpen        // open: flags in args[1], mode in args[2]
	actOpenat      // openat: flags in args[2], mode in args[3]
)

// allowed are the system calls allowed whatever their arguments: moby's
// default profile (profiles/seccomp/default.json) for a container without
// capabilities, less io_uring and name_to_handle_at, plus calls newer than
// that profile that act only on the caller (futex2, cachestat, mseal,
// map_shadow_stack for glibc's shadow stacks, the *xattrat family and
// file_getattr/file_setattr like their older forms, the caller's own NUMA
// policy, reading its own LSM attributes, and uprobe/uretprobe, which the
// kernel accepts only from its own trampolines).
var allowed = []string{
	"accept", "accept4", "access", "adjtimex", "alarm", "arch_prctl", "bind",
	"brk", "cachestat", "capget", "capset", "chdir", "chown", "clock_adjtime",
	"clock_getres", "clock_gettime", "clock_nanosleep", "close", "close_range",
	"connect", "copy_file_range", "dup", "dup2", "dup3", "epoll_create",
	"epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait",
	"epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
	"execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2",
	"fadvise64", "fallocate", "fanotify_mark", "fchdir", "fchown", "fchownat",
	"fcntl", "fdatasync", "fgetxattr", "file_getattr", "file_setattr",
	"flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
	"fstatfs", "fsync", "ftruncate", "futex", "futex_requeue", "futex_wait",
	"futex_waitv", "futex_wake", "futimesat", "get_mempolicy",
	"get_robust_list", "get_thread_area", "getcpu", "getcwd", "getdents",
	"getdents64", "getegid", "geteuid", "getgid", "getgroups", "getitimer",
	"getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid",
	"getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
	"getxattrat", "inotify_add_watch", "inotify_init", "inotify_init1",
	"inotify_rm_watch", "io_cancel", "io_destroy", "io_getevents",
	"io_pgetevents", "io_setup", "io_submit", "ioprio_get", "ioprio_set",
	"kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen",
	"listxattr", "listxattrat", "llistxattr", "lremovexattr", "lseek",
	"lsetxattr", "lsm_get_self_attr", "lsm_list_modules", "lstat", "madvise",
	"map_shadow_stack", "mbind", "membarrier", "memfd_create", "memfd_secret",
	"mincore", "mkdir", "mkdirat", "mlock", "mlock2", "mlockall", "mmap",
	"mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
	"mq_timedsend", "mq_unlink", "mremap", "mseal", "msgctl", "msgget",
	"msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap", "nanosleep",
	"newfstatat", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2",
	"pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl",
	"pread64", "preadv", "preadv2", "prlimit64", "process_mrelease", "pselect6",
	"pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
	"readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg",
	"remap_file_pages", "removexattr", "removexattrat", "rename", "renameat",
	"renameat2", "restart_syscall", "rmdir", "rseq", "rseq_slice_yield",
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo",
	"sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_getscheduler",
	"sched_rr_get_interval", "sched_setaffinity", "sched_setattr",
	"sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select",
	"semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg",
	"sendmsg", "sendto", "set_mempolicy", "set_mempolicy_home_node",
	"set_robust_list", "set_thread_area", "set_tid_address", "setfsgid",
	"setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority",
	"setregid", "setresgid", "setresuid", "setreuid", "setrlimit", "setsid",
	"setsockopt", "setuid", "setxattr", "setxattrat", "shmat", "shmctl",
	"shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4",
	"socketpair", "splice", "stat", "statfs", "statx", "symlink", "symlinkat",
	"sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time",
	"timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime",
	"times", "tkill", "truncate", "umask", "uname", "unlink", "unlinkat",
	"uprobe", "uretprobe", "utime", "utimensat", "utimes", "vfork", "vmsplice",
	"wait4", "waitid", "write", "writev",
}

// deniedEPERM are refused with EPERM, as a container without
// capabilities would see them: mounts and the new mount API, namespaces,
// other processes (ptrace, process_vm_*, kcmp, pidfd_getfd,
// process_madvise, migrate_pages, move_pages), kernel facilities with a
// history of escapes (bpf, perf_event_open, keyrings, userfaultfd,
// io_uring, modify_ldt), file handles (the "shocker" escape), the kernel
// log, and everything that changes the machine: modules, kexec, reboot,
// swap, accounting, quotas, the clock, host and domain names.
var deniedEPERM = []string{
	"acct", "add_key", "bpf", "chroot", "clock_settime", "delete_module",
	"fanotify_init", "finit_module", "fsconfig", "fsmount", "fsopen", "fspick",
	"init_module", "io_uring_enter", "io_uring_register", "io_uring_setup",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl",
	"listmount", "listns", "lsm_set_self_attr", "migrate_pages", "modify_ldt",
	"mount", "mount_setattr", "move_mount", "move_pages", "name_to_handle_at",
	"open_by_handle_at", "open_tree", "open_tree_attr", "perf_event_open",
	"pidfd_getfd", "pivot_root", "process_madvise", "process_vm_readv",
	"process_vm_writev", "ptrace", "quotactl", "quotactl_fd", "reboot",
	"request_key", "setdomainname", "sethostname", "setns", "settimeofday",
	"statmount", "swapoff", "swapon", "syslog", "umount2", "userfaultfd",
	"vhangup",
}

// deniedENOSYS fail as if the kernel lacked them: obsolete or never
// implemented calls; openat2, whose mode is in a struct a filter cannot
// read, so that libc falls back to openat, which it checks (Go's os and
// glibc's open use openat, and callers of openat2 must handle ENOSYS,
// which kernels before 5.6 return); and clone3, whose flags are in a
// struct too, so that libc falls back to clone, whose flags it checks.
//
// clone3 is allowed with Options.Clone3: on cgroup v2 the agent starts
// each command with it (CLONE_INTO_CGROUP, which clone lacks, so that the
// command's first instruction runs in its own cgroup), and the agent is
// under this filter, which its commands inherit. What its flags could add
// over clone is a new namespace, which needs CAP_SYS_ADMIN that no
// command has, or a user namespace, which the init forbids inside
// (user.max_user_namespaces is 0).
var deniedENOSYS = []string{
	"_sysctl", "afs_syscall", "arch_specific_syscall",
	"create_module", "get_kernel_syms", "getpmsg", "lookup_dcookie",
	"clone3", "nfsservctl", "openat2", "putpmsg", "query_module", "security", "sysfs",
	"tuxcall", "uselib", "ustat", "vserver",
}

// checked are the system calls whose arguments decide.
var checked = map[string]action{
	"clone": actNamespace, "unshare": actNamespace,
	"personality": actPersonality,
	"socket":      actSocket,
	"ioctl":       actIoctl,
	"chmod":       actMode1, "fchmod": actMode1, "creat": actMode1, "mknod": actMode1,
	"fchmodat": actMode2, "fchmodat2": actMode2, "mknodat": actMode2,
	"open": actOpen, "openat": actOpenat,
}

// policy returns every system call the filter knows, by name. A call it
// does not know (one newer than golang.org/x/sys) fails with ENOSYS. The
// map is made on first use (Build), not at every start of the binary.
var policy = sync.OnceValue(func() map[string]action {
	m := map[string]action{}
	add := func(names []string, a action) {
		for _, n := range names {
			if m[n] != actInvalid {
				panic("seccomp: " + n + " is in two lists")
			}
			m[n] = a
		}
	}
	add(allowed, actAllow)
	add(deniedEPERM, actEPERM)
	add(deniedENOSYS, actENOSYS)
	for n, a := range checked {
		add([]string{n}, a)
	}
	return m
})
