// Package sshproto is the control protocol between rsh and prun-ssh, the
// process that runs prun's built-in SSH client (rsh/sshclient) for a
// launcher or a daemon: one JSON message per datagram on a SOCK_SEQPACKET
// socket, the remote command's standard input, output and error travelling
// as pipe ends passed with its start request, not through the socket.
//
// The client is a process of its own because the SSH and crypto packages
// cost every Go program that links them package initialisation and page
// faults at start, which a job on one node, never using SSH, should not pay.
package sshproto

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"prun/internal/jsonbytes"
)

// Fd is the helper's descriptor of its end of the control socket.
const Fd = 3

// Request ops, rsh to prun-ssh.
const (
	// OpStart carries three descriptors: the read end of the command's
	// standard input and the write ends of its standard output and error.
	// The end of that input is how rsh closes the session.
	OpStart  = "start"
	OpCancel = "cancel" // give up a start or a lookup not yet answered
	OpLookup = "lookup" // Host (and Home): does the host a session to it dials resolve?
)

// Reply ops, prun-ssh to rsh.
const (
	OpStarted  = "started"  // LocalIP
	OpFailed   = "failed"   // Err
	OpExit     = "exit"     // Status, Err; sent once the standard error is closed
	OpLookedUp = "lookedup" // Err: why the name surely does not resolve, "" otherwise
)

// Request asks prun-ssh for something.
type Request struct {
	Op             string
	ID             uint64
	Host           string            `json:",omitempty"`
	User           string            `json:",omitempty"` // overrides ssh_config's User
	Port           int               `json:",omitempty"` // overrides ssh_config's Port
	Argv           jsonbytes.Strings `json:",omitempty"` // byte for byte: a path need not be UTF-8
	Home           jsonbytes.String  `json:",omitempty"`
	ConnectTimeout time.Duration     `json:",omitempty"`
	// Grace is how long the remote command may take to end once its
	// standard input has closed, before its connection is closed.
	Grace time.Duration `json:",omitempty"`
}

// Reply answers a request, or says how a command ended. Err does not name
// the host.
type Reply struct {
	Op      string
	ID      uint64
	LocalIP string `json:",omitempty"`
	Status  int    `json:",omitempty"`
	Err     string `json:",omitempty"`
}

// maxMsg bounds a message: a command line, an error.
const maxMsg = 64 << 10

// maxFds is the most descriptors one message carries.
const maxFds = 3

// Send writes v as one datagram, with fds.
func Send(c *net.UnixConn, v any, fds ...int) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(b) > maxMsg {
		return fmt.Errorf("message of %d bytes (at most %d)", len(b), maxMsg)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(b, oob, nil)
	return err
}

// CloseFds closes descriptors a message brought that nobody takes.
func CloseFds(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// Receiver reads one side's messages; one goroutine uses it, and its
// buffers serve every message.
type Receiver struct {
	C        *net.UnixConn
	buf, oob []byte
}

// Recv reads one datagram into v and returns the descriptors it carried
// (the caller owns them, even with an error). io.EOF: the peer is gone.
func (r *Receiver) Recv(v any) ([]int, error) {
	if r.buf == nil {
		r.buf, r.oob = make([]byte, maxMsg+1), make([]byte, syscall.CmsgSpace(maxFds*4))
	}
	buf, oob, c := r.buf, r.oob, r.C
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	var fds []int
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if f, e := syscall.ParseUnixRights(&m); e == nil {
				fds = append(fds, f...)
			}
		}
		if perr != nil && err == nil {
			err = perr
		}
	}
	switch {
	case err != nil:
		return fds, err
	case n == 0:
		return fds, io.EOF
	case flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 || n > maxMsg:
		return fds, errors.New("message truncated")
	}
	return fds, json.Unmarshal(buf[:n], v)
}
