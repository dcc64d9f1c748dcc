package dvm

import "syscall"

type syscallStat = syscall.Stat_t
