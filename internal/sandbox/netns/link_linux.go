package netns

import (
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Link is the jail's side of its egress link: a TUN device named Name
// with MTU, holding Addr4 (and Addr6, when the namespace has IPv6) with a
// default route through it.
type Link struct {
	Name         string
	MTU          int
	Addr4, Addr6 netip.Addr
}

// OpenLink creates l's TUN device in the network namespace of process pid,
// addresses and routes it, and returns its non-blocking file: raw IP
// packets, no header. alive is asked, once the namespace is open and
// before it is entered, whether pid is still the caller's process. The
// device is created from this process (a payload has no capability to
// make or change interfaces) and dies with the namespace. It fails if the
// namespace has a device named l.Name already.
func OpenLink(pid int, alive func() error, l Link) (*os.File, error) {
	var tun *os.File
	err := do(pid, alive, func() error {
		var err error
		if tun, err = openTUN(l.Name); err != nil {
			return err
		}
		if err := l.configure(); err != nil {
			tun.Close()
			tun = nil
			return err
		}
		return nil
	})
	if err != nil {
		if tun != nil {
			tun.Close()
		}
		return nil, err
	}
	return tun, nil
}

// openTUN creates the TUN device name in the calling thread's network
// namespace (a device belongs to the namespace /dev/net/tun was opened
// in) and returns its non-blocking file: raw IP packets, no header. It
// fails if the namespace has a device of that name: it never adds a
// queue to one another file serves.
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
	// One queue, detachable on close; a new device only (IFF_TUN_EXCL).
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_MULTI_QUEUE | unix.IFF_TUN_EXCL)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("ioctl(TUNSETIFF)", err)
	}
	return os.NewFile(uintptr(fd), "tun "+name), nil
}

// configure addresses and raises the TUN device in the calling thread's
// network namespace and routes everything through it. IPv6 is routed too,
// so that an IPv6 attempt reaches the egress and is refused there with an
// event rather than failing silently; a namespace without IPv6 simply has
// no IPv6 route.
func (l Link) configure() error {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", l.Name, err)
	}
	if err := h.LinkSetMTU(link, l.MTU); err != nil {
		return fmt.Errorf("setting the MTU of %s: %w", l.Name, err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: hostNet(l.Addr4)}); err != nil {
		return fmt.Errorf("addressing %s: %w", l.Name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("raising %s: %w", l.Name, err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Scope: netlink.SCOPE_LINK,
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}); err != nil {
		return fmt.Errorf("routing through %s: %w", l.Name, err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: hostNet(l.Addr6), Flags: unix.IFA_F_NODAD}); err == nil {
		_ = h.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index,
			Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}})
	}
	return nil
}

// hostNet is a as a single-address network.
func hostNet(a netip.Addr) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(a.BitLen(), a.BitLen())}
}

// Serving reports an error unless tun, a file OpenLink returned, still
// serves its device: once the device is removed, or the file's queue
// detached, it reads and writes nothing any more.
func Serving(tun *os.File) error {
	rc, err := tun.SyscallConn()
	if err != nil {
		return err
	}
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return err
	}
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { ioctlErr = unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr) }); err != nil {
		return err
	}
	if ioctlErr != nil {
		return os.NewSyscallError("ioctl(TUNGETIFF)", ioctlErr)
	}
	return nil
}
