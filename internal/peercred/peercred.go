// Package peercred finds who is at the other end of a TCP connection on this
// host: the owner of the peer's socket, as the kernel recorded it when the
// socket was made (sock_diag), which the peer cannot choose. Over TCP,
// SO_PEERCRED says nothing, and a uid the peer sends in its messages (as a
// PMIx 4 tool or client does in its connection request) is only a claim.
package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Peer is the other end of a connection.
type Peer struct {
	Addr netip.AddrPort
	UID  int // -1: unknown (see Lookup's error)
}

func (p Peer) String() string {
	if p.UID < 0 {
		return p.Addr.String() + " (uid unknown)"
	}
	return p.Addr.String() + " (uid " + strconv.Itoa(p.UID) + ")"
}

// ErrNotLocal: the peer is not on this host's loopback, so its socket is
// not this kernel's to name.
var ErrNotLocal = errors.New("not a loopback peer")

// ErrGone: the peer closed its socket before it could be named (a client
// that gave up, a port scan). Nobody is left to serve or to tell, so
// callers drop such a connection without reporting it.
var ErrGone = errors.New("the peer closed its socket")

// OfFD finds the peer of the connected TCP socket fd. The error says why the
// uid is unknown; Peer.Addr is filled whenever the address could be read.
func OfFD(fd int) (Peer, error) {
	p := Peer{UID: -1}
	ls, err := unix.Getsockname(fd)
	if err != nil {
		return p, fmt.Errorf("getsockname: %w", err)
	}
	rs, err := unix.Getpeername(fd)
	if err != nil {
		return p, fmt.Errorf("getpeername: %w", err)
	}
	local, ok1 := addrPort(ls)
	remote, ok2 := addrPort(rs)
	if !ok1 || !ok2 {
		return p, errors.New("not a TCP/IP socket")
	}
	p.Addr = remote
	p.UID, err = Lookup(local, remote)
	return p, err
}

// OfConn is OfFD for a Go connection (a *net.TCPConn).
func OfConn(c net.Conn) (Peer, error) {
	p := Peer{UID: -1}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		p.Addr = a.AddrPort()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return p, errors.New("not a socket")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return p, err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { p, ferr = OfFD(int(fd)) }); err != nil {
		return p, err
	}
	return p, ferr
}

func addrPort(sa unix.Sockaddr) (netip.AddrPort, bool) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port)), true
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port)), true
	}
	return netip.AddrPort{}, false
}

// Sizes and offsets of linux/inet_diag.h's structures.
const (
	sizeofSockID  = 48 // inet_diag_sockid
	sizeofReqV2   = 8 + sizeofSockID
	offMsgUID     = 4 + sizeofSockID + 12 // inet_diag_msg.idiag_uid
	offMsgInode   = offMsgUID + 4
	sizeofDiagMsg = offMsgInode + 4
	noCookie      = 0xffffffff
)

// Lookup returns the uid owning the TCP socket whose local end is remote
// and whose peer is local: the other end, on this host, of our connection
// local<->remote. Only a socket its process still holds counts: an
// orphaned one (closed, or in TIME_WAIT, which the kernel reports as uid 0)
// is refused with an error, as its owner can no longer be told.
func Lookup(local, remote netip.AddrPort) (int, error) {
	la, ra := local.Addr().Unmap(), remote.Addr().Unmap()
	if !ra.IsLoopback() {
		return -1, ErrNotLocal
	}
	family := uint8(unix.AF_INET6)
	if ra.Is4() {
		family = unix.AF_INET
	}
	req := make([]byte, unix.SizeofNlMsghdr+sizeofReqV2)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence
	r := req[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], 0xffffffff) // every state
	id := r[8:]
	// The sought socket's own end (src) is the peer's address; its peer
	// (dst) is ours.
	binary.BigEndian.PutUint16(id[0:], remote.Port())
	binary.BigEndian.PutUint16(id[2:], local.Port())
	putAddr(id[4:20], ra)
	putAddr(id[20:36], la)
	ne.PutUint32(id[40:], noCookie)
	ne.PutUint32(id[44:], noCookie)

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return -1, fmt.Errorf("sock_diag: %w", err)
	}
	for _, m := range msgs {
		switch m.Header.Type {
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 {
				if e := int32(ne.Uint32(m.Data)); e != 0 {
					if unix.Errno(-e) == unix.ENOENT {
						return -1, ErrGone
					}
					return -1, fmt.Errorf("sock_diag: %w", unix.Errno(-e))
				}
			}
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(m.Data) < sizeofDiagMsg {
				return -1, errors.New("sock_diag: short answer")
			}
			if ne.Uint32(m.Data[offMsgInode:]) == 0 {
				return -1, ErrGone
			}
			return int(ne.Uint32(m.Data[offMsgUID:])), nil
		}
	}
	return -1, errors.New("sock_diag: no answer")
}

// putAddr writes an address as inet_diag_sockid holds it: an IPv4 one in
// the first word.
func putAddr(b []byte, a netip.Addr) {
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// Admit is the policy of prun's local services (the PMIx server's
// connections, the PMI port): the peer must run as the uid that owns the
// jobs (this process's effective uid), or as root, who may signal or trace
// them anyway.
func Admit(p Peer) bool { return p.UID >= 0 && (p.UID == os.Geteuid() || p.UID == 0) }
