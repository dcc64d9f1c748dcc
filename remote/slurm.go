package remote

// SlurmStepEnded is closed once the daemons' Slurm step has ended (srun
// exited: scancel, the job's time limit or end, a failed node); nil when
// the daemons are no Slurm step. A persistent runtime ends with it: Slurm
// ends a step's daemons only with their job, and no other step could
// start them again in an allocation that is over.
func (t *Tree) SlurmStepEnded() <-chan struct{} {
	t.kids.Mu.Lock()
	defer t.kids.Mu.Unlock()
	if t.kids.Step == nil {
		return nil
	}
	return t.kids.Step.Ended
}
