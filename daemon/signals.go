package daemon

import "syscall"

// Each rank leads its own process group (with --pty, its own session), so
// that a signal reaches what it started too. A rank stays a zombie until
// the job's end (proc.exited waits with WNOWAIT), so its pid, which is its
// group's id, names no other process meanwhile.

// signal sends sig to the process group of each live rank (all when ranks
// is nil). A terminating signal to all of them ends the job: their
// failures from then on are not restarted.
func (sh *shell) signal(ranks []int, sig syscall.Signal) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch sig {
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT:
		if ranks == nil {
			sh.ending = true
		}
	}
	send := func(st *rankState) {
		if st.exited || st.pid == 0 {
			return
		}
		syscall.Kill(-st.pid, sig)
		// A rank that left its process group gets it by its pid. Not
		// always: a rank that handled the group's signal before a second
		// kill arrived (a busy machine) ran its handler twice.
		if pgid, err := syscall.Getpgid(st.pid); err == nil && pgid != st.pid {
			syscall.Kill(st.pid, sig)
		}
	}
	if ranks == nil {
		for _, st := range sh.ranks {
			send(st)
		}
		return
	}
	for _, r := range ranks {
		if st, ok := sh.ranks[r]; ok {
			send(st)
		}
	}
}

// killGroups kills whatever the job's ranks left running in their process
// groups (which then stops holding the output pipes open) and reaps every
// incarnation of every rank. Every rank has exited.
func (sh *shell) killGroups() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, st := range sh.ranks {
		if st.pid > 0 {
			syscall.Kill(-st.pid, syscall.SIGKILL)
		}
		if st.child != nil {
			st.child.reap()
			st.child = nil
		}
		for _, c := range st.again.old {
			syscall.Kill(-c.pid, syscall.SIGKILL)
			c.reap()
		}
		st.again.old = nil
	}
}
