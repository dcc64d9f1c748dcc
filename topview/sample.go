// Package topview is `prun top`: a live table of a job's ranks (state, CPU,
// memory, output), sorted and filtered with top's and htop's keys, the
// ranks that stand apart from the others marked. Samples come from a
// Source (package sample); the terminal side is a Bubble Tea program.
package topview

import ts "prun/topview/sample"

// The samples the view shows are package sample's (apart, so that what
// samples links no terminal library); these names keep the view's.
type (
	Rank        = ts.Rank
	Source      = ts.Source
	Thresholds  = ts.Thresholds
	Snapshot    = ts.Snapshot
	OutputMeter = ts.OutputMeter
	Proc        = ts.Proc
	ProcSource  = ts.ProcSource
)

const Exited = ts.Exited

var (
	DefaultThresholds = ts.DefaultThresholds
	Mark              = ts.Mark
	Once              = ts.Once
	NewOutputMeter    = ts.NewOutputMeter
)
