package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// Sources opens the bucket a source file lives in. The embedded mode maps
// the empty bucket to the local source folder.
type Sources interface {
	Bucket(ctx context.Context, bucket string) (objstore.Store, error)
}

// Waker is told that a table has staged work (Pub/Sub in the cloud, a
// channel or nothing locally).
type Waker interface {
	Wake(ctx context.Context, tableID string) error
}

// Pipeline is the set of services the use cases run over.
type Pipeline struct {
	Lake    objstore.Store
	Sources Sources
	// Coordination is the lease, registry, batches, status and expiry the
	// use cases run over; Coordinate(c) fills it from one backend.
	Coordination
	Waker  Waker // nil: nobody to wake (the caller merges itself)
	Config config.Config
	// Holder names this process in leases ("onfile-…", "cli-<host>-<pid>").
	Holder string
	// LeaseTTL is how long a lease lasts without renewal (DefaultLeaseTTL
	// when 0).
	LeaseTTL time.Duration
	// MergeBudget bounds one MergeTable call (0: no bound); it stops before
	// starting a batch that would not fit and re-wakes the table.
	MergeBudget time.Duration
	// RegistryRetention is how long MaintainAll keeps the records of merged
	// files and done batches (coord.DefaultRetention when 0).
	RegistryRetention time.Duration
	Logger            *slog.Logger
	Now               func() time.Time

	// valueArrays are the arrays the staged parts' rows are converted
	// into, taken again from part to part and file to file (see
	// delta.ValueArrays). A Pipeline is used by pointer, never copied.
	valueArrays delta.ValueArrays

	// partMemory and stepMemory override partMemoryBytes and
	// stepMemoryBytes in tests (0: the constants).
	partMemory, stepMemory int64
	// memoryLimit stands for the runtime's memory limit in stagesAhead
	// in tests (0: the runtime's; -1: none).
	memoryLimit int64
	// dvMinFileBytes overrides cdc.Options.DVMinFileBytes in tests, whose
	// small files would otherwise never take a deletion vector.
	dvMinFileBytes int64
	// noHistoryCopies makes every merge write the history's rows, as
	// before staged parts became history files, for tests to compare;
	// historyCopyEvents overrides historyCopyMinEvents (0: the constant).
	noHistoryCopies   bool
	historyCopyEvents int64
	// stagedGroupRows overrides stagedRowGroupRows (0: the constant), for
	// tests whose parts are small to have several row groups.
	stagedGroupRows int

	// claims are the source claims this process has read or written (see
	// claimSource): a claim does not change while its stream writes.
	claims tableCache[sourceClaim]
	// schemas are the tables' schemas as staging last read them (see
	// sourceSchema).
	schemas tableCache[knownSchema]
}

func (p *Pipeline) log() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

func (p *Pipeline) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// holder names one lease acquisition: the process's Holder plus a random
// suffix, because a function instance serves concurrent requests and a
// coordinator treats a second Acquire by the same holder as a takeover,
// which would make concurrent wake-ups of one table steal each other's
// lease mid-batch.
func (p *Pipeline) holder() string {
	base := p.Holder
	if base == "" {
		h, _ := os.Hostname()
		base = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	return base + "/" + uuid.NewString()[:8]
}

// DefaultLeaseTTL is how long a table lease lasts without renewal unless
// Pipeline.LeaseTTL says otherwise. A merge renews at a third of it.
const DefaultLeaseTTL = 2 * time.Minute

func (p *Pipeline) leaseTTL() time.Duration {
	if p.LeaseTTL > 0 {
		return p.LeaseTTL
	}
	return DefaultLeaseTTL
}

func (p *Pipeline) registryRetention() time.Duration {
	if p.RegistryRetention > 0 {
		return p.RegistryRetention
	}
	return coord.DefaultRetention
}

// Directory suffixes of a table's history and tombstone tables, beside its
// current-state table.
const (
	HistorySuffix   = "_log"
	TombstoneSuffix = "_tombstones"
)

// TableSet maps a table id to its three Delta tables in the lake.
func (p *Pipeline) TableSet(tableID string) (cdc.TableSet, error) { return TableSetIn(p.Lake, tableID) }

// TableSetIn maps a table id to its three Delta tables in a lake:
// <db>/<table>, or <namespace>/<db>/<table> for a stream with a namespace.
// It is the only function that turns an id into paths; the id is
// validated so no part can escape the lake.
func TableSetIn(lake objstore.Store, tableID string) (cdc.TableSet, error) {
	tid, err := datastream.ParseTableID(tableID)
	if err != nil {
		return cdc.TableSet{}, err
	}
	name := tid.Database + "/" + tid.Table
	if tid.Namespace != "" {
		name = tid.Namespace + "/" + name
	}
	return TableSetBeside(lake, name, tid.String()), nil
}

// TableSetBeside returns the three Delta tables of the current-state table
// at name in dir, whose history and tombstones are its siblings (name_log
// and name_tombstones); tableID is the table id they hold. TableSetIn
// places a table id's table set in a lake with it, and a command given the
// folder of a current-state table finds the other two with it.
func TableSetBeside(dir objstore.Store, name, tableID string) cdc.TableSet {
	return cdc.TableSet{
		ID:         tableID,
		State:      objstore.Sub(dir, name),
		History:    objstore.Sub(dir, name+HistorySuffix),
		Tombstones: objstore.Sub(dir, name+TombstoneSuffix),
	}
}

// stagingDir is where a table's staged files live in the lake.
func stagingDir(tableID string) string { return "_staging/" + tableID }

// ErrPermanent marks a failure that retrying cannot fix (the file was
// quarantined); functions acknowledge such events instead of retrying.
var ErrPermanent = errors.New("permanent failure")
