package dvm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The wire: a client connects to the runtime's socket and first sends one
// byte: RunByte for a submission, with its stdin, stdout and stderr attached
// (SCM_RIGHTS), or CommandByte for a command. A submission's first frame is
// a Run; a command's, a Request. Frames are a 4-byte big-endian length, then
// the payload: a Run's NUL-terminated strings (EncodeRun), JSON otherwise.
// Then a submitter sends the signals it forwards (Request{Signal}), and the
// runtime answers with Replies, the last one Done. The submitter's
// descriptors are where the job's output is written, in every --output
// form, with no copy through the runtime's socket.
//
// A submitter sends its command line unparsed: the runtime parses it in the
// submitter's environment and working directory, and writes what prun
// prints before a launch (help, warnings, a usage error) to the submitter's
// descriptors itself. So a submitter need not be Go: prun's own starts
// before Go's runtime does (cmd/prun/submit.c). Its Replies carry no
// strings (Error and Text are for commands), so such a client reads them
// with no JSON parser: they are flat objects of numbers and booleans.

// Run is a submission: the command line (without "prun"), the submitter's
// working directory and environment, and whether its stdout and stderr
// take colour (terminals, and no NO_COLOR).
type Run struct {
	Args, Env              []string
	Cwd                    string
	ColorTags, ColorErrors bool
}

// EncodeRun is r's frame payload: NUL-terminated strings: the options (a
// word of letters: t ColorTags, e ColorErrors), the working directory, the
// number of arguments in decimal, the arguments, then the environment to
// the end.
func EncodeRun(r Run) []byte {
	var b []byte
	opt := ""
	if r.ColorTags {
		opt += "t"
	}
	if r.ColorErrors {
		opt += "e"
	}
	for _, s := range append([]string{opt, r.Cwd, strconv.Itoa(len(r.Args))}, append(r.Args, r.Env...)...) {
		b = append(append(b, s...), 0)
	}
	return b
}

// DecodeRun reads what EncodeRun wrote.
func DecodeRun(b []byte) (Run, error) {
	var r Run
	if len(b) == 0 || b[len(b)-1] != 0 {
		return r, errors.New("a submission that does not end in NUL")
	}
	f := strings.Split(string(b[:len(b)-1]), "\x00")
	if len(f) < 3 {
		return r, fmt.Errorf("a submission of %d fields", len(f))
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 0 || n > len(f)-3 {
		return r, fmt.Errorf("a submission of %d fields saying %q arguments", len(f), f[2])
	}
	r.ColorTags, r.ColorErrors = strings.Contains(f[0], "t"), strings.Contains(f[0], "e")
	r.Cwd, r.Args, r.Env = f[1], f[3:3+n], f[3+n:]
	if !filepath.IsAbs(r.Cwd) {
		return r, fmt.Errorf("a submission from the working directory %q", r.Cwd)
	}
	return r, nil
}

// Request is a command's message, and a submitter's forwarded signal.
type Request struct {
	Op string `json:",omitempty"` // ps, status, stop, kill, add

	Signal int  `json:",omitempty"` // during a submission: forward this signal
	JSON   bool `json:",omitempty"` // ps --json
	All    bool `json:",omitempty"` // stop --all-jobs
	Job    int  `json:",omitempty"` // kill JOB

	Hosts []string `json:",omitempty"` // add HOST...
}

// Reply is the runtime's.
type Reply struct {
	Done  bool   `json:",omitempty"` // the last reply
	Exit  int    `json:",omitempty"` // the submission's (or command's) exit status
	Error string `json:",omitempty"` // why the command failed
	Text  string `json:",omitempty"` // what a command prints
	Job   int    `json:",omitempty"` // the submission's number (first reply, Done false)
	// Local (with Done, first): the command line is not a job (a
	// completion subcommand, --debug, --version): the submitter runs it
	// itself.
	Local bool `json:",omitempty"`
}

const (
	RunByte     = 'R'
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
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}

// PeerPID is the pid of the process at the other end, as of its connect.
func PeerPID(c *net.UnixConn) (int, error) {
	cred, err := peerCred(c)
	if err != nil {
		return -1, err
	}
	return int(cred.Pid), nil
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	return cred, nil
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
	return c.SendFrame(b)
}

// SendFrame writes one frame of payload b.
func (c *Conn) SendFrame(b []byte) error {
	frame := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(frame, uint32(len(b)))
	copy(frame[4:], b)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.Write(frame)
	return err
}

// Recv reads one message.
func (c *Conn) Recv(v any) error {
	b, err := c.RecvFrame()
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// RecvFrame reads one frame's payload.
func (c *Conn) RecvFrame() ([]byte, error) { return readFrame(c) }

func readFrame(c io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("a message of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	return b, nil
}
