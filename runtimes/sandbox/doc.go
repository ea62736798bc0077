// Package sandbox is the runtime that isolates each sandbox in Linux
// namespaces, limits it with cgroups and confines its commands with no
// capabilities, no_new_privs and a seccomp filter, without Docker: the
// safe default for untrusted code on any Linux machine where it is
// available (see Runtime.Health).
//
// The execbox agent (internal/agent, the same code the local runtime runs
// in-process) runs inside the boundary, and the host talks to it over the
// execbox protocol (package client, internal/server) on a unix socket.
// A sandbox costs no namespace set-up per command: a live sandbox execs
// about as fast as the local runtime.
//
// # The boundary, step by step
//
// Create, on the host (as root), once the spec is checked (every
// problem at once) and before anything is made:
//
//  1. Reserves a slot: a range of 65536 host uids and gids of its own
//     (Options.UIDBase + slot*65536), so that no two sandboxes share a
//     uid (signals, RLIMIT_NPROC, keyrings, file ownership), recorded
//     with the owner's PID in the state directory
//     (/run/execbox/sandbox/ID), from which a later execbox process
//     removes what a killed one left (Sweep).
//  2. Makes the workspace and a detached, idmapped, nosuid, nodev mount
//     of it (open_tree, mount_setattr) for the init (a given workspace
//     here, before anything starts; a temporary one in step 5, while
//     the init starts): its owner on disk is the command user inside,
//     files the sandbox creates belong to that owner on the host, and
//     no other inside uid can create any (they are not in the mount's
//     idmapping). A temporary workspace is
//     TMPDIR/execbox-ID-*/ws: the outer directory root's and 0700 (no
//     other host user reaches it), ws owned by the command user's host
//     uid (base+uid, never root: a file made setuid inside is no root
//     setuid file on the host) and, with a quota (Options.WorkspaceSize,
//     WorkspaceInodes, on by default), a tmpfs of that size: ENOSPC
//     past it, its pages charged to the writer's memory cgroup, nothing
//     on the host's disk. A given workspace that is /, a system
//     directory or a home of root is refused unless
//     Spec.AllowSystemWorkspace.
//  3. Makes the sandbox's cgroup (memory, pids, cpu; cgroup v1 or v2, in
//     the layout Probe found: the root of a cgroup2 mount, or a delegated
//     subtree execbox first moved itself into a leaf of) with two
//     children: "cmds", with the sandbox's limits, for every command, and
//     "agent", for the init and agent, with limits of its own
//     (cgroups.AgentMemory, AgentPIDs) and outside the commands' (a
//     command that exhausts the sandbox's memory is OOM-killed, never the
//     agent that reports it). It delegates the directories and the files
//     that move processes to the agent's reserved uid (base+AgentID), not
//     to the sandbox's root: the agent may create cgroups below "cmds"
//     and move processes; no command, not even uid 0, owns anything
//     there; every limit file stays the host's. Only what the init
//     needs to start in it is made here (cgroups.Begin: on v1 the
//     cgroup and "agent" with their limits, on v2 all but the limits); on
//     v1 "cmds" and the delegation follow in step 5 (Finish), and on v2
//     the limits are written (Seal) once the init has left the top for
//     "agent".
//  4. Forks the init, a re-execution of the current binary (argv[0]
//     "execbox-sandbox-init"), in new user, mount, PID, IPC, UTS,
//     network (unless Options.Network is "host") namespaces, as root of
//     its user namespace, with Pdeathsig from a thread locked for the
//     init's life: if execbox dies, the init dies, and with it every
//     process of the sandbox. On v1 it is forked from a thread in the
//     cgroup's "agent", so that it is there from its first instruction;
//     elsewhere the host moves it into the cgroup before it sends the
//     configuration. The fork runs on that thread: Create goes on at
//     once, and the init, once started, waits for its configuration.
//  5. While the init starts (the kernel makes its namespaces, and it
//     executes the binary and initialises its runtime, several
//     milliseconds), prepares the rest: finishes the cgroup (v1), makes
//     a temporary workspace (step 2), and creates the agent's listening
//     socket (0600) in the state directory, root's only (0700, parents
//     included); the agent gets it as a descriptor, so no path inside
//     the boundary leads to it. The init builds its root on an empty
//     directory of its own, TMPDIR/execbox-ID-root-*/root (the outer
//     directory root's, 0711, of a random name; root 0700, owned by the
//     sandbox's root), not in the state directory. Then the
//     configuration: the agent's, and the seccomp filter, compiled once
//     per Runtime. Create sends it to the init over a socket, with the
//     listener and the workspace's mount as descriptors (rootless with
//     subordinate ids, newuidmap and newgidmap first write the init's
//     mapping), waits until the init reports the boundary built and the
//     agent started, seals the cgroup (v2), reaches the agent over the
//     socket, and applies the spec's snapshot, assets and setup
//     commands (provision.Apply).
//
// The init, PID 1 of the sandbox:
//
//  6. Unshares a cgroup namespace rooted at the sandbox's cgroup, makes
//     every mount private, and builds a new root on a tmpfs: the host's
//     /usr, /bin, /sbin, /lib*, /etc (or the entries of Options.RootFS)
//     bound read-only, nosuid, nodev (or, for a Spec.Image, on the
//     image's root instead: an overlay the host mounted, the image's
//     unpacked root idmapped below a tmpfs of Options.RootSize, whose
//     paths the steps below mount over are first made real directories
//     and files of it; see image_linux.go); /etc/shadow, /etc/gshadow, SSH host
//     keys, /etc/ssl/private, cluster and Docker configuration masked;
//     its own /etc/passwd, /etc/group (with the command user), hostname
//     and hosts; the workspace at /workspace, read-write; a private /tmp
//     tmpfs of Options.TmpSize; a fresh /proc (hidepid=invisible, the
//     kernel's sensitive files masked, /proc/sys read-only); a minimal
//     /dev (null, zero, full, random, urandom, tty, a private devpts with
//     ptmx, a private /dev/shm tmpfs); a read-only /sys with the
//     sandbox's cgroup at /sys/fs/cgroup, read-only too (programs read
//     their limits there); the agent writes the cgroup only through
//     detached mounts of it that the init opens here and passes to it
//     as descriptors; empty /root, /home, /run. Then
//     pivot_root, and the host's root is detached. Nothing else of the
//     host is reachable: not /root, /home, /run (the Docker socket), /var,
//     other sandboxes' workspaces, execbox's state directory.
//  7. Sets the host name and brings the loopback interface up (the user
//     namespace limit, user.max_user_namespaces, was set to 0 inside
//     as soon as /proc was mounted, in step 6).
//  8. On its own thread: reduces its bounding set to the capabilities
//     the agent needs (CHOWN, DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER, KILL,
//     SETUID, SETGID, SETPCAP, SYS_PTRACE), sets a hard RLIMIT_CORE of 0
//     (inherited by every command), and switches the whole init to the
//     reserved inside uid and gid AgentID (65535, host base+65535): with
//     securebits (keep caps, no setuid fixup, noroot, locked) this thread
//     keeps those capabilities and raises them as ambient so that they
//     survive the agent's exec; it sets no_new_privs, non-dumpable, and
//     installs the seccomp filter (internal/seccomp, under this package: an allow-list that
//     also refuses setuid and setgid modes), then starts the
//     agent ("execbox-sandbox-agent") from that thread, so the agent
//     inherits all of it. The init then drops every capability and reaps
//     orphans until the agent exits. No command may run as AgentID
//     (a FieldError naming "user"), so a command, even root inside,
//     cannot signal, stop or trace the init or the agent, nor open their
//     /proc entries (both are non-dumpable).
//
// Every one of execbox's process starts (the CLI, the init, the agent,
// internal/agent/proc's shim) first marks the descriptors it inherited from 3
// up close-on-exec (internal/fds, as runc's CloseExecFrom), so that a
// descriptor the host process held without close-on-exec (a shell's
// 7</) reaches no command.
//
// The agent serves the protocol, and runs each command:
//
//  9. in a child cgroup of its own (cmds/cmd-N), entered before the program's
//     first instruction (v2: CLONE_INTO_CGROUP; v1: the forking thread
//     moves into it, forks, and moves back), with the command's memory,
//     pids and cpu limits when they differ from the sandbox's, so that a
//     timeout, Kill or Close kills everything the command started, even
//     a daemon that called setsid, double-forked and scrubbed its
//     environment, and an OOM kill in it is reported as ReasonOOMKilled.
//     A command that exits on its own leaves what it started in the
//     background running (a server, by design), in the sandbox and its
//     limits, until Close ends the PID namespace: it runs as that
//     command's user and sees later commands of the same sandbox as
//     that user may, and nothing outside the sandbox;
//  10. as the command user (uid 1000 by default, or the spec's or
//     request's user) with no capability in any set, the bounding set
//     included, whatever its uid: at its start the agent empties its
//     ambient, inheritable and bounding sets on every thread, so that
//     a command started directly inherits nothing (and noroot gives
//     root nothing at exec); in a binary with cgo, where that cannot be
//     done on every thread, each command starts through internal/agent/proc's
//     shim, which empties every set on its own thread first. Setuid
//     binaries and file capabilities do not work (nosuid mounts,
//     no_new_privs, and the host's root owning them is not mapped
//     inside).
//
// Sessions (execbox.SessionOpener) are the agent's, inside the boundary:
// the interpreter is one of the sandbox's commands (its own cgroup, the
// command user, no capabilities), its private FIFO directory is on the
// sandbox's own /dev/shm tmpfs, and a PTY comes from the sandbox's
// private devpts. The host reaches them over the protocol.
//
// Files are read and written by the agent inside the boundary, through
// os.Root, with the file system identity of the command user (setfsuid
// on a locked thread): a planted symlink cannot lead out of the
// workspace, and the agent cannot be used to touch what the command user
// could not.
//
// Close kills the init (SIGKILL): the kernel then kills every process in
// the PID namespace. With every process dead, it removes the cgroup
// (killing anything left in it first), a temporary workspace (unmounting
// its tmpfs) and the init's root directory concurrently, and then the
// state directory, whose record lets a later sweep finish the job if
// execbox dies meanwhile, and frees the slot; the mounts inside die with
// the mount namespace.
//
// # Security model
//
// Isolated: the file system (only the system directories, read-only, and
// the sandbox's own workspace, /tmp and /dev/shm); processes (a PID
// namespace: host processes and other sandboxes are invisible and cannot
// be signalled or traced); the network ("none": loopback only, nothing
// of the host, its 127.0.0.1 included, nor the cloud metadata service);
// IPC, abstract unix sockets (network namespace), host name; users (a
// uid range per sandbox, root inside is nobody outside); privileges (no
// capabilities, no_new_privs, seccomp); resources (memory including
// tmpfs, pids, cpu, and the rlimits of every command); vsock (refused by
// seccomp: it is not namespaced and reaches the hypervisor); set-id files
// (seccomp refuses a setuid or setgid mode, so no file of a given
// workspace becomes a set-id file of its owner on the host).
//
// Not isolated: the kernel itself (a kernel bug reachable by allowed
// system calls is an escape: use a VM for hostile code at scale); the
// host's system directories are readable (programs, libraries, /etc
// without its secrets); time, CPU caches and other side channels; disk
// space of a given workspace (the workspace is the host directory; /tmp
// is bounded); the kernel's global limits (e.g. inotify watches, the
// system-wide file table); with network "host", the network. The init
// and the agent run as the sandbox's uid AgentID with the capabilities
// above, which mean nothing outside its user namespace.
//
// # Requirements
//
// Root, user namespaces, cgroup v1 or v2 with memory and pids (and cpu
// for a CPU limit), seccomp, and for a given workspace, idmapped mounts
// (Linux 5.12+ on the workspace's file system). Health names what is
// missing; Create then fails with ErrUnavailable rather than run without
// a promised limit.
//
// Rootless (an ordinary user): unprivileged user namespaces, and cgroups
// only where a writable subtree is delegated (else rlimits only). The
// command user is mapped to the caller, and every other inside id to the
// caller's subordinate ids where newuidmap and /etc/subuid give them,
// else none: see rootless_linux.go for what differs from a sandbox made
// by root, and why.
package sandbox
