package dvm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"prun/internal/jsonbytes"
)

// The wire: a client connects to the runtime's socket and first sends one
// byte, 'S' with its stdin, stdout and stderr attached (SCM_RIGHTS) for a
// submission, 'C' for a command; then length-framed JSON messages (a 4-byte
// big-endian length, then the JSON) both ways: a Request, then for a
// submission the signals it forwards (Request{Signal}), while the runtime
// answers with Replies, the last one Done. The submitter's descriptors are
// where the job's output is written, in every --output form, with no copy
// through the runtime's socket.

// Request is a client's message.
type Request struct {
	Op string `json:",omitempty"` // submit, ps, status, stop, kill

	// submit: the job (daemon.MarshalJob: its user strings byte for byte;
	// Plan, a daemon.Plan carrying it, from submitters before it), the
	// submitter's environment, whether its stdout and stderr are terminals
	// (colour), and whether to wait for free slots.
	Spec                   json.RawMessage   `json:",omitempty"`
	Plan                   json.RawMessage   `json:",omitempty"`
	Env                    jsonbytes.Strings `json:",omitempty"`
	ColorTags, ColorErrors bool              `json:",omitempty"`
	Wait                   bool              `json:",omitempty"`

	Signal int  `json:",omitempty"` // during a submission: forward this signal
	JSON   bool `json:",omitempty"` // ps --json
	All    bool `json:",omitempty"` // stop --all-jobs
	Job    int  `json:",omitempty"` // kill JOB
}

// Reply is the runtime's.
type Reply struct {
	Done  bool   `json:",omitempty"` // the last reply
	Exit  int    `json:",omitempty"` // the submission's (or command's) exit status
	Error string `json:",omitempty"` // why the command failed
	Text  string `json:",omitempty"` // what a command prints
	Job   int    `json:",omitempty"` // the submission's number (first reply, Done false)
}

const (
	SubmitByte  = 'S'
	CommandByte = 'C'
	maxFrame    = 64 << 20
)

// Conn is one connection; Send may be called from several goroutines.
type Conn struct {
	*net.UnixConn
	wmu sync.Mutex
}

// NewConn wraps a connected socket.
func NewConn(c *net.UnixConn) *Conn { return &Conn{UnixConn: c} }

// ErrNoDVM says nobody listens at the socket (no file, or a stale one).
var ErrNoDVM = errors.New("no DVM is running there")

// Dial connects to the runtime in dir and checks that it runs as this user
// (or root): the descriptors a submission passes go to nobody else.
func Dial(dir string) (*Conn, error) {
	if err := CheckPrivate(dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, ErrNoDVM
		}
		return nil, err
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: Socket(dir), Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, ErrNoDVM
		}
		return nil, err
	}
	uid, err := PeerUID(c)
	if err != nil {
		c.Close()
		return nil, err
	}
	if uid != os.Getuid() && uid != 0 {
		c.Close()
		return nil, fmt.Errorf("%s: the DVM there runs as uid %d, not as this user", Socket(dir), uid)
	}
	return NewConn(c), nil
}

// PeerUID is the uid of the process at the other end (SO_PEERCRED: the
// kernel's record from the connect, which the peer cannot choose).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// Hello sends the first byte, with fds attached when there are any.
func (c *Conn) Hello(b byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := c.WriteMsgUnix([]byte{b}, oob, nil)
	return err
}

// ReadHello reads the first byte and the descriptors attached to it.
func (c *Conn) ReadHello() (byte, []*os.File, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return 0, nil, err
	}
	if n != 1 {
		return 0, nil, io.ErrUnexpectedEOF
	}
	var files []*os.File
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return 0, nil, err
		}
		for _, m := range msgs {
			fds, err := unix.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				unix.CloseOnExec(fd)
				files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("submitter fd %d", len(files))))
			}
		}
	}
	return buf[0], files, nil
}

// Send writes one message.
func (c *Conn) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	copy(frame[4:], b)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.Write(frame)
	return err
}

// Recv reads one message.
func (c *Conn) Recv(v any) error { return recvFrom(c, v) }

func recvFrom(c io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return fmt.Errorf("a message of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
