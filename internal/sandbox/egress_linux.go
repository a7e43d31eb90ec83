package sandbox

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AttachEgress gives a prepared jail with network its route out: a TUN
// device in the jail's network namespace, addressed and routed as
// EgressJailAddr4 (and EgressJailAddr6), whose file e then serves. Call
// it between Prepare and Run; Manager.Run does for Spec.Egress. The device
// is created from this process (the payload has no capability to make or
// change interfaces) and dies with the namespace.
func (j *Jail) AttachEgress(e Egress) error {
	if !j.base.Network || j.m.cfg.Unsafe {
		return fmt.Errorf("%w: the jail has no network namespace with network on", ErrInvalidSpec)
	}
	var tun *os.File
	if err := j.inNetns(func() error {
		var err error
		tun, err = openTUN(EgressInterface)
		if err != nil {
			return err
		}
		if err := configureEgressLink(EgressInterface); err != nil {
			tun.Close()
			return err
		}
		return nil
	}); err != nil {
		return fmt.Errorf("egress link: %w", err)
	}
	if err := e.Serve(tun); err != nil {
		tun.Close()
		return fmt.Errorf("egress: %w", err)
	}
	return nil
}

// inNetns runs f on a thread moved into the jail's network namespace and
// back. A thread that cannot go back is never returned to the scheduler.
func (j *Jail) inNetns(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := j.runInNetns(f)
		if back {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// runInNetns runs on a locked thread; back reports whether the thread is
// in its original namespace again.
func (j *Jail) runInNetns(f func() error) (back bool, _ error) {
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return true, err
	}
	defer self.Close()
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", j.initPid()))
	if err != nil {
		return true, fmt.Errorf("opening the jail's network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("entering the jail's network namespace: %w", os.NewSyscallError("setns", err))
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		return false, fmt.Errorf("returning to the host network namespace: %w", os.NewSyscallError("setns", err))
	}
	return true, ferr
}

// openTUN creates the TUN device name in the calling thread's network
// namespace (a device belongs to the namespace /dev/net/tun was opened
// in) and returns its non-blocking file: raw IP packets, no header.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, os.NewSyscallError("open /dev/net/tun", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE) // one queue, detachable on close
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("ioctl(TUNSETIFF)", err)
	}
	return os.NewFile(uintptr(fd), "tun "+name), nil
}

// configureEgressLink addresses and raises the TUN device and routes
// everything through it. IPv6 is routed too, so that an IPv6 attempt
// reaches the egress and is refused there with an event rather than
// failing silently; a namespace without IPv6 simply has no IPv6 route.
func configureEgressLink(name string) error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	if err := h.LinkSetMTU(link, EgressMTU); err != nil {
		return fmt.Errorf("setting the MTU of %s: %w", name, err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: hostNet(EgressJailAddr4)}); err != nil {
		return fmt.Errorf("addressing %s: %w", name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("raising %s: %w", name, err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}); err != nil {
		return fmt.Errorf("routing through %s: %w", name, err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: hostNet(EgressJailAddr6), Flags: unix.IFA_F_NODAD}); err == nil {
		_ = h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index,
			Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}})
	}
	return nil
}

// hostNet is a as a single-address network.
func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}
