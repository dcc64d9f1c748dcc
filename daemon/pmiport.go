package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"prun/internal/peercred"
	"prun/pmi"
)

// Hydra's -pmi-port: instead of inheriting a socket (PMI_FD), each rank
// connects to its node's PMI service at PMI_PORT and names itself with
// PMI_ID. A PMI-1 client says so in a first line, "cmd=initack pmiid=N"
// (MPICH's PMII_Set_from_port); the service answers "cmd=initack" and, in
// this order, the job's size, the rank and debug=0; from then on the
// connection is a PMI-1 one like any other. A PMI-2 client starts with its
// init and names itself in its fullinit (pmi.ServeNamedV2). Unlike Hydra,
// only the job's user (or root) may connect (the kernel's owner of the
// peer's socket: internal/peercred); a rank is served once, on the first
// connection that names it.

// initackTimeout bounds how long a connection may stay silent before it
// names its rank.
const initackTimeout = 30 * time.Second

// pmiPort is a job's -pmi-port service on one node: it owns its listener;
// which rank is claimed is the rank table's (claimPort).
type pmiPort struct {
	ln       net.Listener
	job      pmi.Job // the job's PMI service
	ranks    *rankTable
	size     int    // the job's size, told in the PMI-1 handshake
	node     string // this node's name, for errors
	versions pmi.Versions
	refused  func(service string, p peercred.Peer, why string) // a connection of another user (Daemon.refused)
}

// listenPMI starts the job's PMI service on a local TCP port.
func (sh *shell) listenPMI(versions pmi.Versions) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("PMI port: %w", err)
	}
	pp := &pmiPort{ln: ln, job: sh.pmi, ranks: sh.ranks, size: len(sh.plan.Map.Procs), node: sh.nodeName(),
		versions: versions, refused: sh.d.refused}
	sh.pmi.port = pp
	go pp.accept()
	return nil
}

// accept serves each connection until the listener closes (close).
func (pp *pmiPort) accept() {
	for {
		c, err := pp.ln.Accept()
		if err != nil {
			return // closed with the job
		}
		go pp.serve(c)
	}
}

// addr is where the ranks connect (PMI_PORT).
func (pp *pmiPort) addr() string { return pp.ln.Addr().String() }

// close stops the service; connections being served go on to their end.
func (pp *pmiPort) close() { pp.ln.Close() }

// portJob is the job as one PMI port connection sees it: its protocol
// errors name the connection and the rank it claimed, not the rank itself
// (any process of the job's user could have claimed that rank).
type portJob struct {
	pmi.Job
	conn string
}

func (j portJob) ProtocolError(rank int, err error) {
	if rank >= 0 {
		err = fmt.Errorf("%s, as rank %d: %w", j.conn, rank, err)
	} else {
		err = fmt.Errorf("%s: %w", j.conn, err)
	}
	j.Job.ProtocolError(-1, err)
}

// serve takes a connection through the handshake that names its
// rank and serves it as that rank's PMI connection. Only the job's user
// (or root) may connect: another user's connection is closed unread, so
// that it cannot claim a rank before the rank does.
func (pp *pmiPort) serve(c net.Conn) {
	peer, err := peercred.OfConn(c)
	if err != nil || !peercred.Admit(peer) {
		why := fmt.Sprintf("not the job's user (uid %d) nor root", os.Geteuid())
		if err != nil {
			why = "its user cannot be told: " + err.Error()
		}
		if !errors.Is(err, peercred.ErrGone) { // closed already: nobody to name
			pp.refused("PMI port", peer, why)
		}
		c.Close()
		return
	}
	job := portJob{pp.job, "PMI port connection from " + peer.String()}
	served := make(chan struct{}) // for drainPMI, once a rank is claimed
	defer close(served)
	r := bufio.NewReaderSize(c, 4096)
	c.SetReadDeadline(time.Now().Add(initackTimeout))
	b, err := r.ReadSlice('\n') // a first line longer than the buffer is refused, not gathered
	line := string(b)
	if errors.Is(err, bufio.ErrBufferFull) {
		err = fmt.Errorf("a first line longer than %d bytes", r.Size())
	}
	if err == nil && strings.HasPrefix(line, "cmd=init ") {
		err := pmi.ServeNamedV2(c, r, strings.TrimRight(line, "\r\n"), job, pp.versions, func(rank int) error {
			c.SetReadDeadline(time.Time{})
			return pp.claim(rank, served)
		})
		if err != nil && !errors.Is(err, io.EOF) {
			job.ProtocolError(-1, err)
		}
		return
	}
	c.SetReadDeadline(time.Time{})
	rank := -1
	if err == nil {
		rank, err = parseInitack(line)
	}
	if err == nil {
		err = pp.claim(rank, served)
	}
	if err != nil {
		if !errors.Is(err, io.EOF) {
			job.ProtocolError(-1, err)
		}
		c.Close()
		return
	}
	fmt.Fprintf(c, "cmd=initack\ncmd=set size=%d\ncmd=set rank=%d\ncmd=set debug=0\n", pp.size, rank)
	pmi.Serve(struct {
		io.Reader
		io.Writer
		io.Closer
	}{r, c, c}, rank, job, pp.versions)
}

// parseInitack reads "cmd=initack pmiid=N".
func parseInitack(line string) (int, error) {
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "cmd=initack" || !strings.HasPrefix(f[1], "pmiid=") {
		return -1, fmt.Errorf("want cmd=initack pmiid=RANK first, got %q", strings.TrimSpace(line))
	}
	n, err := strconv.Atoi(strings.TrimPrefix(f[1], "pmiid="))
	if err != nil || n < 0 {
		return -1, fmt.Errorf("pmiid %q is not a rank", strings.TrimPrefix(f[1], "pmiid="))
	}
	return n, nil
}

// claim lets rank connect once, if it runs here.
func (pp *pmiPort) claim(rank int, served <-chan struct{}) error {
	switch pp.ranks.claimPort(rank, served) {
	case portNoRank:
		return fmt.Errorf("pmiid %d: no such rank of this job on %s", rank, pp.node)
	case portTaken:
		return fmt.Errorf("pmiid %d: that rank is connected already", rank)
	}
	return nil
}

// closePMI stops the job's PMI port, if it has one.
func (sh *shell) closePMI() {
	if sh.pmi.port != nil {
		sh.pmi.port.close()
	}
}
