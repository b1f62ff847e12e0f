package cdc

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TestPlanStateDecidesEachKeyFromWhatTheLookupFound checks the pure step of
// a merge: verdicts, counts, and which files and keys a step rewrites.
func TestPlanStateDecidesEachKeyFromWhatTheLookupFound(t *testing.T) {
	ord := func(n uint64) []byte { return binary.BigEndian.AppendUint64([]byte{1}, n) }
	change := func(id int64, n uint64, del bool) Change {
		return toChange(t, genEvent(n, id, "eu", del, id))
	}
	keys := latestSorted([]Change{
		change(1, 10, false), // no row: insert
		change(2, 20, false), // newer than its row: replace
		change(3, 5, false),  // older than its row: stale
		change(4, 30, true),  // deletes its row
		change(5, 40, true),  // delete of a key without a row: bury
		change(6, 7, false),  // older than its tombstone: stale, never resurrects
		change(7, 50, false), // newer than its tombstone: insert again
		change(2, 15, false), // an older change of key 2 in the same step: collapsed
	})
	if len(keys) != 7 {
		t.Fatalf("%d keys after collapsing, want 7", len(keys))
	}
	found := map[string]*stored{}
	for _, c := range keys {
		found[c.KeyText] = &stored{}
	}
	keyOf := func(id int64) string { return change(id, 1, false).KeyText }
	at := func(id int64) *stored { return found[keyOf(id)] }
	at(2).rowOrder, at(2).rows = ord(18), []rowAt{{"a.parquet", 4}}
	at(3).rowOrder, at(3).rows = ord(9), []rowAt{{"b.parquet", 0}}
	at(4).rowOrder, at(4).rows = ord(29), []rowAt{{"c.parquet", 7}, {"a.parquet", 9}}
	at(6).tombOrder = ord(8)
	at(7).tombOrder = ord(49)

	p := planState(keys, found)
	var got []string
	for i, c := range p.keys {
		got = append(got, fmt.Sprintf("%v:%v", c.Key[0], p.verdicts[i]))
	}
	want := []string{"1:insert", "2:replace", "3:stale", "4:delete", "5:bury", "6:stale", "7:insert"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	if p.inserted != 2 || p.updated != 1 || p.deleted != 1 || p.buried != 1 || p.stale != 2 || p.upserts() != 3 {
		t.Fatalf("counts %+v", p)
	}
	var touched []string
	for f, rows := range p.touched {
		touched = append(touched, fmt.Sprintf("%s%v", f, rows.ToArray()))
	}
	sort.Strings(touched)
	// Key 4's row is in two files (a duplicate): both copies go.
	if !reflect.DeepEqual(touched, []string{"a.parquet[4 9]", "c.parquet[7]"}) {
		t.Fatalf("touched %v, want the positions of the replaced and the deleted key's rows", touched)
	}
	if len(p.dropKeys) != 2 || !p.dropKeys[keyOf(2)] || !p.dropKeys[keyOf(4)] || !reflect.DeepEqual(p.dropFirsts, []any{int64(2), int64(4)}) {
		t.Fatalf("drop keys %v, firsts %v", p.dropKeys, p.dropFirsts)
	}
}

// TestNewTableCreatesStateAndTombstonesAtOnce: a new table's first batch
// creates its state and tombstone tables at once, not one after the
// other: the store holds back each version 0 of the two until the other
// is being written too, which a serial open would never do.
func TestNewTableCreatesStateAndTombstonesAtOnce(t *testing.T) {
	ctx := context.Background()
	gate := &createGate{Store: objstore.NewMemory(), waiting: map[string]bool{}, both: make(chan struct{}),
		names: []string{"db/t/" + firstCommit, "db/t_tombstones/" + firstCommit}}
	tabs := TableSet{ID: "db.t", State: objstore.Sub(gate, "db/t"), History: objstore.Sub(gate, "db/t_log"), Tombstones: objstore.Sub(gate, "db/t_tombstones")}
	b := Batch{Source: testSource, Key: []string{"id", "region"}, Changes: []Change{toChange(t, genEvent(1, 1, "eu", false, 100))}}
	r, err := Apply(ctx, tabs, 1, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Inserted != 1 {
		t.Fatalf("inserted %d, want 1", r.Inserted)
	}
	if gate.serial.Load() {
		t.Fatal("the state and tombstone tables were created one after the other")
	}
}

// firstCommit is a Delta table's version 0, which creates it.
const firstCommit = "_delta_log/00000000000000000000.json"

// createGate holds back the write of each of names until all of them are
// being written, or a second has passed (then serial is set).
type createGate struct {
	objstore.Store
	names   []string
	mu      sync.Mutex
	waiting map[string]bool
	both    chan struct{}
	serial  atomic.Bool
}

func (g *createGate) Write(ctx context.Context, name string, r io.Reader, o objstore.WriteOptions) (objstore.Info, error) {
	if slices.Contains(g.names, name) {
		g.mu.Lock()
		g.waiting[name] = true
		if len(g.waiting) == len(g.names) {
			close(g.both)
		}
		g.mu.Unlock()
		select {
		case <-g.both:
		case <-time.After(time.Second):
			g.serial.Store(true)
		}
	}
	return g.Store.Write(ctx, name, r, o)
}
