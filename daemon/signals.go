package daemon

import "syscall"

// Each rank leads its own process group (with --pty, its own session), so
// that a signal reaches what it started too. A rank stays a zombie until
// the job's end (proc.exited waits with WNOWAIT), so its pid, which is its
// group's id, names no other process meanwhile: the rank table hands out a
// live rank's pid only under its lock (forLive), and the job's end takes
// the incarnations out of it before reaping them (killGroups).

// signal sends sig to the process group of each live rank (all when ranks
// is nil). A terminating signal to all of them ends the job: their
// failures from then on are not restarted.
func (sh *shell) signal(ranks []int, sig syscall.Signal) {
	if endsJob(ranks, sig) {
		sh.ranks.end()
	}
	sh.ranks.forLive(ranks, func(pid int) { deliver(pid, sig) })
}

// endsJob says whether sig sent to ranks (nil: every rank) ends the job.
func endsJob(ranks []int, sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGTERM, syscall.SIGKILL, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT:
		return ranks == nil
	}
	return false
}

// deliver sends sig to the process group that the rank pid leads, and to
// the rank itself when it left that group.
func deliver(pid int, sig syscall.Signal) {
	syscall.Kill(-pid, sig)
	// Not always to the rank itself: a rank that handled the group's
	// signal before a second kill arrived (a busy machine) ran its handler
	// twice.
	if pgid, err := syscall.Getpgid(pid); err == nil && pgid != pid {
		syscall.Kill(pid, sig)
	}
}

// killGroups kills whatever the job's ranks left running in their process
// groups (which then stops holding the output pipes open) and reaps every
// incarnation of every rank. Every rank has exited.
func (sh *shell) killGroups() {
	for _, c := range sh.ranks.incarnations() {
		syscall.Kill(-c.pid, syscall.SIGKILL)
		c.reap()
	}
}
