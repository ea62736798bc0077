#!/bin/busybox sh
# Stage 1 of the VM (PID 1 in the initramfs): load the 9p modules, mount the
# host's root read-only with tmpfs over the writable places, and
# switch_root into the host's root to run the script named on the kernel
# command line (execbox.run=/run/vm/run-GUEST.sh) from the host's work
# directory (a second, writable 9p share). That script makes each
# configuration's cgroups and /tmp (guest.sh). switch_root, not chroot: a
# chrooted process cannot create user namespaces.
/bin/busybox --install -s /bin
export PATH=/bin
fail() { echo "execbox-vm: init: $*"; echo "EXECBOX-VM-EXIT 125"; poweroff -f; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
echo "vm: init at $(cut -d' ' -f1 /proc/uptime)s of uptime"
for m in $(cat /modules/order); do
	insmod "/modules/$m.ko" || fail "insmod $m"
done
run=
for w in $(cat /proc/cmdline); do
	case "$w" in
	execbox.run=*) run=${w#execbox.run=} ;;
	esac
done
[ -n "$run" ] || fail "no execbox.run= on the kernel command line"
p9=trans=virtio,version=9p2000.L,msize=262144
mkdir -p /newroot
# cache=loose: the shared root does not change under a test run, and
# without a cache every path lookup (each exec) is a round trip to qemu.
mount -t 9p -o "$p9,ro,cache=loose" host /newroot || fail "mount host root"
for d in tmp run var/tmp home mnt; do
	mount -t tmpfs -o mode=1777 tmpfs "/newroot/$d" || fail "tmpfs on /$d"
done
chmod 755 /newroot/run /newroot/home /newroot/mnt
mkdir -p /newroot/run/vm
mount -t 9p -o "$p9,cache=loose" work /newroot/run/vm || fail "mount work dir"
# /root holds a host's toolchains (pyenv) and is where tests put things of
# root's: writable through an overlay, as on a host.
# /etc too, so that a configuration may give its user subordinate ids.
for d in root etc; do
	mkdir -p /newroot/run/.vm/$d-up /newroot/run/.vm/$d-work
	mount -t overlay overlay -o lowerdir=/newroot/$d,upperdir=/newroot/run/.vm/$d-up,workdir=/newroot/run/.vm/$d-work /newroot/$d || fail "overlay on /$d"
done
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /newroot/dev/shm
# Debian kernels before 6.5 gate unprivileged user namespaces with this.
f=/proc/sys/kernel/unprivileged_userns_clone
[ -e $f ] && echo 1 >$f
cp /bin/busybox /newroot/run/busybox
exec switch_root /newroot /run/busybox sh "$run"
