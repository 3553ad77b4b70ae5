// Package guest holds the tests that run inside the kernel lab's guest
// (Debian 6.1 under qemu, see package kernellab): tc flower filters
// installed, read back, updated, reconciled and removed through
// offload/tcflower on veth devices; their software counters compared packet
// by packet with swpath/rule semantics on generated traffic; netdevsim
// refusing skip_sw flower with a real extack; devlink and ethtool checks;
// and the insertion-rate benchmark against tc -batch.
//
// Outside the guest (SCRUBD_KERNELLAB_GUEST unset) every test skips: the
// host kernel has no cls_flower; TestKernelLab in the parent package boots
// the guest and runs them there.
package guest
