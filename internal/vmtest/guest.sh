# Functions of a guest's run script (run-GUEST.sh sources this file; busybox
# sh runs it as PID 1 after switch_root): each configuration's host made
# before its tests and taken down after them, so that one boot runs several
# configurations, each on a host as fresh as a boot leaves it: cgroups
# mounted anew (v1 or v2), nothing below them, a new /tmp, empty /run
# state, /home and /etc/sub[ug]id. What a configuration leaves behind
# (processes, cgroups, mounts) is reported and fails it.
B=/run/busybox
CG=/sys/fs/cgroup
V1_CONTROLLERS="cpu cpuacct cpuset memory devices freezer blkio pids"

# problem MESSAGE: what went wrong with the configuration's host, not in
# a test (the host reports it with the configuration's result).
problem() { echo "vm: $config: host: $*"; }

# retry N CMD...: CMD until it succeeds, N tries a second apart. A cgroup
# controller moves between v1 and v2 only once no cgroup holds it, dying
# ones included (a memory cgroup dies once its cached pages go): the
# caches are dropped between tries.
retry() {
	n=$1
	shift
	while ! "$@" 2>/dev/null; do
		n=$((n - 1))
		[ $n -gt 0 ] || { "$@"; return 1; }
		echo 3 >/proc/sys/vm/drop_caches
		$B sleep 1
	done
}

# has_controllers: the cgroup2 root offers memory, pids and cpu.
has_controllers() {
	for c in memory pids cpu; do
		grep -qw $c $CG/cgroup.controllers || return 1
	done
}

# cgroup_mount v1|v2: the configuration's cgroups on /sys/fs/cgroup: the
# v1 hierarchies this CI host has, or cgroup2 with nsdelegate (systemd's
# way).
cgroup_mount() {
	case $1 in
	v1)
		$B mount -t tmpfs -o mode=755 tmpfs $CG || { problem "cannot mount a tmpfs on $CG"; return 1; }
		for c in $V1_CONTROLLERS; do
			$B mkdir -p $CG/$c
			retry 60 $B mount -t cgroup -o $c cgroup $CG/$c || { problem "mount the $c cgroup hierarchy: still busy"; return 1; }
		done
		;;
	v2)
		$B mount -t cgroup2 -o nsdelegate cgroup2 $CG || { problem "cannot mount cgroup2"; return 1; }
		retry 60 has_controllers || { problem "cgroup2 offers only: $(cat $CG/cgroup.controllers)"; return 1; }
		;;
	esac
}

# cgroup_dirs v1|v2: the cgroup directories below the roots, deepest first.
cgroup_dirs() {
	if [ "$1" = v1 ]; then
		for c in $V1_CONTROLLERS; do find $CG/$c -mindepth 1 -depth -type d; done
	else
		find $CG -mindepth 1 -depth -type d
	fi
}

# rmdir_all: removes every cgroup directory below the roots.
rmdir_all() {
	ok=0
	for d in $(cgroup_dirs $1); do
		rmdir "$d" 2>/dev/null || ok=1
	done
	return $ok
}

# cgroup_umount v1|v2 OWN: the shell back in the root cgroup, every cgroup
# below it removed (its tests' leftovers, reported), controllers
# disabled, the hierarchies unmounted: the controllers are free for the
# next configuration's hierarchy.
cgroup_umount() {
	left=0
	if [ "$1" = v1 ]; then
		for c in $V1_CONTROLLERS; do echo $$ >$CG/$c/cgroup.procs; done
	else
		echo $$ >$CG/cgroup.procs
	fi
	# The configuration's own cgroup (a delegated one, $2) and the
	# directories above it are the harness's; the runtime's parent of
	# sandboxes (.../execbox, or .../execbox-test for the cgroups
	# package's tests) and, in a delegated subtree, the leaf it moves
	# itself into (.../execbox-self) stay by design, as on a host.
	# Anything else is what the tests left.
	for d in $(cgroup_dirs $1); do
		case "$CG/$2/" in
		"$d/"*) continue ;;
		esac
		case "$d" in
		*/execbox | */execbox-test | */execbox-self) ;;
		*) problem "left a cgroup behind: $d"; left=1 ;;
		esac
	done
	retry 30 rmdir_all $1 || { problem "cannot remove the cgroups: $(cgroup_dirs $1)"; return 1; }
	if [ "$1" = v1 ]; then
		for c in $V1_CONTROLLERS; do $B umount $CG/$c || { problem "cannot unmount $CG/$c"; return 1; }; done
	else
		for c in $(cat $CG/cgroup.subtree_control); do echo "-$c" >$CG/cgroup.subtree_control; done
	fi
	$B umount $CG || { problem "cannot unmount $CG"; return 1; }
	return $left
}

# others: the PIDs of the user processes other than this shell (kernel
# threads have no exe).
others() {
	others=
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" = 1 ] || [ "$p" = "$$" ] && continue
		[ -e "$d/exe" ] && others="$others $p"
	done
}

# kill_others: reports the processes a configuration left running, kills
# them, and fails if there were any.
kill_others() {
	others
	[ -n "$others" ] || return 0
	for p in $others; do
		problem "left a process behind: $p $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
		kill -9 $p 2>/dev/null
	done
	retry 10 no_others
	return 1
}

no_others() {
	others
	[ -z "$others" ]
}

# mounts_now: the mount points, one a line.
mounts_now() { cut -d' ' -f2 /proc/self/mounts; }

# umount_new BEFORE: unmounts (lazily) and reports every mount point not
# in the file BEFORE, deepest first; fails if there was one.
umount_new() {
	left=0
	for m in $(mounts_now | grep -vxF -f "$1" | sort -r); do
		problem "left a mount behind: $m"
		$B umount -l "$m"
		left=1
	done
	return $left
}

# tmp_mount KIND DEV: a new /tmp: a fresh ext4 disk (a Debian 12 host's
# /tmp, part of its root file system), or a tmpfs.
tmp_mount() {
	if [ "$1" = ext4 ]; then
		$B mount -t ext4 "$2" /tmp || return 1
	else
		$B mount -t tmpfs tmpfs /tmp || return 1
	fi
	chmod 1777 /tmp
}

# state_reset: the writable places a configuration's tests use, as a boot
# leaves them.
state_reset() {
	rm -rf /run/execbox /run/user /home/vm /var/tmp/* /var/tmp/.[!.]* /dev/shm/* /dev/shm/.[!.]* 2>/dev/null
	: >/etc/subuid
	: >/etc/subgid
	mkdir -p /home/vm
}

# config_begin NAME CGROUPS TMP DEV: marks NAME's start for the host,
# and makes its host.
config_begin() {
	config=$1
	echo "vm: config $config begin"
	state_reset
	tmp_mount "$3" "$4" || { problem "cannot mount /tmp ($3 $4)"; return 1; }
	mounts_now >/run/.vm/mounts-$config
	cgroup_mount "$2" || return 1
}

# config_end NAME CGROUPS RC [OWN]: takes NAME's host down, reports what its
# tests left, writes its status for the host and marks its end.
config_end() {
	rc=$3
	cd /
	kill_others || rc=1
	cgroup_umount "$2" "$4" || rc=1
	umount_new /run/.vm/mounts-$1 || rc=1
	$B umount /tmp || { problem "/tmp busy"; $B umount -l /tmp; rc=1; }
	echo $rc >/run/vm/status-$1
	sync
	echo "vm: config $1 end $rc"
}
