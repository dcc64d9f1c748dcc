// The placement policies are jobspec's types (the CLI parses them once);
// the mapper keeps its own names for them.
package mapper

import "prun/jobspec"

type (
	BindPolicy = jobspec.BindPolicy
	BindTarget = jobspec.BindTarget
	MapBy      = jobspec.MapBy
	MapPolicy  = jobspec.MapPolicy
	MemMode    = jobspec.MemMode
	MemPolicy  = jobspec.MemPolicy
	RankBy     = jobspec.RankBy
	RankPolicy = jobspec.RankPolicy
)

const (
	MapDefault    = jobspec.MapDefault
	MapSlot       = jobspec.MapSlot
	MapHWThread   = jobspec.MapHWThread
	MapCore       = jobspec.MapCore
	MapL1Cache    = jobspec.MapL1Cache
	MapL2Cache    = jobspec.MapL2Cache
	MapL3Cache    = jobspec.MapL3Cache
	MapNUMA       = jobspec.MapNUMA
	MapPackage    = jobspec.MapPackage
	MapNode       = jobspec.MapNode
	MapSeq        = jobspec.MapSeq
	MapPPR        = jobspec.MapPPR
	MapRankfile   = jobspec.MapRankfile
	MapPEList     = jobspec.MapPEList
	RankDefault   = jobspec.RankDefault
	RankSlot      = jobspec.RankSlot
	RankNode      = jobspec.RankNode
	RankFill      = jobspec.RankFill
	RankSpan      = jobspec.RankSpan
	RankObject    = jobspec.RankObject
	BindDefault   = jobspec.BindDefault
	BindNone      = jobspec.BindNone
	BindHWThread  = jobspec.BindHWThread
	BindCore      = jobspec.BindCore
	BindL1Cache   = jobspec.BindL1Cache
	BindL2Cache   = jobspec.BindL2Cache
	BindL3Cache   = jobspec.BindL3Cache
	BindNUMA      = jobspec.BindNUMA
	BindPackage   = jobspec.BindPackage
	BindUser      = jobspec.BindUser
	BindRR        = jobspec.BindRR
	MemDefault    = jobspec.MemDefault
	MemFirstTouch = jobspec.MemFirstTouch
	MemBind       = jobspec.MemBind
	MemInterleave = jobspec.MemInterleave
)
