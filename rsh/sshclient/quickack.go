package sshclient

import (
	"net"
	"syscall"
)

// quickACK acknowledges every read of a TCP connection at once.
//
// sshd leaves Nagle's algorithm on until a session starts, and the SSH
// handshake is ping-pong traffic, for which Linux delays its ACKs by up to
// 40 ms. After authentication sshd sends a packet the client does not answer
// (its host keys), so its reply to our channel open then waits in Nagle's
// buffer for that delayed ACK, and every connection starts its command that
// much later. Forcing the ACK after each read removes the wait.
type quickACK struct {
	*net.TCPConn
	raw syscall.RawConn
}

// withQuickACK wraps c when it is a TCP connection.
func withQuickACK(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return quickACK{tc, raw}
}

func (c quickACK) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	if n > 0 {
		c.raw.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
		})
	}
	return n, err
}
