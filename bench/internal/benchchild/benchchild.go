package benchchild

import (
	"context"
	"flag"

	"github.com/dsdelta/dsdelta/bench/internal/backfillbench"
	"github.com/dsdelta/dsdelta/bench/internal/mergebench"
	"github.com/dsdelta/dsdelta/shared/memlimit"
)

// Flags are a child's parsed flags.
type Flags struct {
	dir, mode, tableMode, source, lake, cpuProfile, heapProfile *string
	rows                                                        *int64
	backfill, dv, inOrder, maintain                             *bool
}

// Register defines the child flags on fs.
func Register(fs *flag.FlagSet) *Flags {
	return &Flags{
		dir:         fs.String("dir", "", "child: table directory (state, history, tombstones below it)"),
		rows:        fs.Int64("rows", 0, "child: rows of the base table"),
		mode:        fs.String("mode", "clustered", "child: batch key distribution, clustered or random"),
		tableMode:   fs.String("table-mode", "", "child: the table's mode (current, soft_delete, scd2; default current)"),
		backfill:    fs.Bool("backfill", false, "child: stage every file of -source into the lake -lake and merge, instead of a merge"),
		source:      fs.String("source", "", "child: with -backfill, the Datastream files"),
		lake:        fs.String("lake", "", "child: with -backfill, the lake to create"),
		dv:          fs.Bool("dv", false, "child: with -backfill, deletion_vectors: on"),
		inOrder:     fs.Bool("in-order", false, "child: with -backfill, stage the files in the order they were written, not in name order"),
		maintain:    fs.Bool("maintain", false, "child: with -backfill, maintain the table after the merge"),
		cpuProfile:  fs.String("cpuprofile", "", "child: write a CPU profile of the measured work here"),
		heapProfile: fs.String("heapprofile", "", "child: write the heap profile taken at the highest RSS here"),
	}
}

// Run does the work the flags select and prints its figures as JSON on
// stdout.
func (f *Flags) Run(ctx context.Context) error {
	// As dsdelta's main: a child the driver gives GOMEMLIMIT collects by
	// it.
	mem := memlimit.Apply()
	if *f.backfill {
		return backfillbench.RunChild(ctx, backfillbench.ChildOptions{Source: *f.source, Lake: *f.lake, CPUProfile: *f.cpuProfile, HeapProfile: *f.heapProfile, Memory: mem, DeletionVectors: *f.dv, InOrder: *f.inOrder, Maintain: *f.maintain})
	}
	return mergebench.RunChild(ctx, *f.dir, *f.rows, *f.mode, *f.tableMode, *f.cpuProfile, *f.heapProfile)
}
