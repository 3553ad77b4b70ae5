// Package kernellab boots Debian's linux-image-amd64 (6.1) under
// qemu-system-x86_64 with TCG and a small initramfs holding busybox, the
// kernel modules scrubd's offload code needs (veth, sch_ingress,
// cls_flower, act_gact, psample and an out-of-tree netdevsim), iproute2's
// tc, and the statically linked test binary of ./guest. The guest's /init
// runs that binary and prints a verdict line on the serial console,
// "KERNELLAB PASS" or "KERNELLAB FAIL rc=N", which the host-side test reads.
//
// The machine's own kernel has no cls_flower and no loadable modules, so
// this is where the tc flower codec meets a real kernel. Everything is
// fetched with apt (apt-get download + dpkg-deb -x, never installing the
// kernel on the host) and cached in Config.CacheDir, keyed by kernel
// release.
package kernellab
