package pipeline

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsdelta/dsdelta/shared/cdc"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/delta"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

var errCrash = errors.New("simulated crash")

// crashingStore fails every write whose name matches once armed, the way a
// process dying at that point would leave the lake.
type crashingStore struct {
	objstore.Store
	armed atomic.Bool
	match func(name string) bool
	hits  atomic.Int64
}

func (c *crashingStore) Write(ctx context.Context, name string, r io.Reader, o objstore.WriteOptions) (objstore.Info, error) {
	if c.armed.Load() && c.match(name) {
		c.hits.Add(1)
		io.Copy(io.Discard, r) // a writer piping into us must not block
		return objstore.Info{}, errCrash
	}
	return c.Store.Write(ctx, name, r, o)
}

// crashingBatches fails CompleteBatch once armed: the merge committed to
// Delta but died before the registry learnt of it.
type crashingBatches struct {
	Batches
	armed atomic.Bool
}

func (c *crashingBatches) CompleteBatch(ctx context.Context, l coord.Lease, b coord.Batch, s coord.BatchStats) error {
	if c.armed.Load() {
		return errCrash
	}
	return c.Batches.CompleteBatch(ctx, l, b, s)
}

// TestMergeCrashAtEveryStepConverges kills the merge at each step — after
// writing data files but before any commit, after the history commit,
// after the tombstone commit, after every commit but before the registry
// update — then re-runs it: the tables equal the source and history has no
// duplicates.
func TestMergeCrashAtEveryStepConverges(t *testing.T) {
	for _, dv := range []config.Switch{config.Off, config.On} {
		t.Run("deletion vectors "+string(dv), func(t *testing.T) { mergeCrashAtEveryStepConverges(t, dv) })
	}
}

func mergeCrashAtEveryStepConverges(t *testing.T, dv config.Switch) {
	steps := []struct {
		name  string
		store func(name string) bool // writes that fail
		coord bool                   // CompleteBatch fails
		dv    bool                   // only with deletion vectors on
	}{
		{"after data files, before the first commit", func(n string) bool { return strings.Contains(n, "_delta_log/") }, false, false},
		{"writing a history data file (a staged part's copy, or rows)", func(n string) bool {
			return strings.HasPrefix(n, "shop/customers_log/"+cdc.ColSourceDate+"=")
		}, false, false},
		{"after the history commit", func(n string) bool {
			return strings.HasPrefix(n, "shop/customers_tombstones/_delta_log/") || strings.HasPrefix(n, "shop/customers/_delta_log/")
		}, false, false},
		{"after the tombstone commit (and the deletion vector file)", func(n string) bool { return strings.HasPrefix(n, "shop/customers/_delta_log/") }, false, false},
		{"after every commit, before the registry update", func(string) bool { return false }, true, false},
		{"writing the deletion vector file, after the tombstone commit", func(n string) bool {
			return strings.HasPrefix(n, "shop/customers/deletion_vector_")
		}, false, true},
	}
	for _, mode := range tableModes {
		for i, step := range steps {
			if step.dv && dv != config.On {
				continue
			}
			t.Run("mode "+string(mode)+": crash "+step.name, func(t *testing.T) {
				crashAndResume(t, i, step.store, step.coord, config.Config{BatchMaxFiles: 2, Defaults: config.TableConfig{Mode: mode, DeletionVectors: dv}})
			})
		}
	}
}

// crashAndResume merges half a simulated workload, then the rest with the
// crash armed, and resumes in a new process: the tables equal the source.
func crashAndResume(t *testing.T, i int, crashWrite func(string) bool, crashCoord bool, cfg config.Config) {
	ctx := context.Background()
	sim, err := dssim.Run(dssim.Options{Seed: uint64(100 + i), EventsPerFile: 15, DuplicateEvents: 0.1, Shuffle: true, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 10, Changes: 80},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	lake := &crashingStore{Store: objstore.NewMemory(), match: crashWrite}
	local, err := coord.NewLocal(lake.Store, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := &crashingBatches{Batches: local}
	p := &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(local), Config: cfg, Holder: "crashy", dvMinFileBytes: -1, historyCopyEvents: 1}
	p.Batches = cc
	notes := write(t, ctx, source, sim.Files)
	half := len(notes) / 2
	for _, n := range notes[:half] {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.MergeTable(ctx, "shop.customers"); err != nil {
		t.Fatal(err)
	}
	for _, n := range notes[half:] {
		if _, err := p.Stage(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	lake.armed.Store(true)
	cc.armed.Store(crashCoord)
	_, err = p.MergeTable(ctx, "shop.customers")
	if !errors.Is(err, errCrash) {
		t.Fatalf("the crash did not happen: %v (store hits %d)", err, lake.hits.Load())
	}
	// Each layer adds its own context once: the merge names the
	// table and the batch, the engine what it was writing.
	if msg := err.Error(); strings.Count(msg, "shop.customers") != 1 || strings.Count(msg, " batch ") != 1 {
		t.Errorf("error %q names the table or the batch more than once", msg)
	}
	lake.armed.Store(false)
	cc.armed.Store(false)
	if st, _ := local.Status(ctx, "shop.customers"); st.OpenBatchSeq == 0 {
		t.Fatal("the crash left no open batch to resume")
	}
	// A new process: another holder.
	p2 := &Pipeline{Lake: lake.Store, Sources: oneSource{source}, Coordination: Coordinate(local), Config: p.Config, Holder: "restarted", dvMinFileBytes: -1, historyCopyEvents: 1}
	// The failed merge gave its lease up, so the restart resumes
	// the open batch at once.
	res, err := p2.MergeTable(ctx, "shop.customers")
	if err != nil || res.Busy {
		t.Fatalf("restart: %+v %v", res, err)
	}
	checkTables(t, ctx, p2, sim.Tables)
	tabs, err := p2.TableSet("shop.customers")
	if err != nil {
		t.Fatal(err)
	}
	dv := cfg.Defaults.DeletionVectors == config.On
	if n := deletionVectorsAdded(t, ctx, tabs.State); (n > 0) != dv {
		t.Fatalf("deletion vectors %v, and the merges added %d", dv, n)
	}
}

// deletionVectorsAdded sums numTargetDeletionVectorsAdded over a table's
// commits.
func deletionVectorsAdded(t *testing.T, ctx context.Context, store objstore.Store) int {
	t.Helper()
	h, err := delta.Open(store).History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range h {
		if v, ok := e.Metrics["numTargetDeletionVectorsAdded"]; ok {
			k, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("version %d: numTargetDeletionVectorsAdded %q", e.Version, v)
			}
			n += k
		}
	}
	return n
}
