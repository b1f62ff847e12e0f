package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsdelta/dsdelta/shared/objstore"
)

// No Spark-written fixture has a V2 checkpoint, so these tests write them
// by the protocol text ("Checkpoints", "V2 Spec", "Sidecar Files",
// "Checkpoint Metadata", "UUID-named checkpoint") from the reconciled
// state of a table, with this package's Parquet writer, and check that a
// reader starting from them sees what a plain replay of the JSON commits
// sees.

// v2cpRow is a V2 spec checkpoint row: the V1 columns plus
// checkpointMetadata and sidecar (PROTOCOL.md "Checkpoint Schema").
type v2cpRow struct {
	cpRow
	CheckpointMetadata *v2cpMetadata `parquet:"checkpointMetadata,optional"`
	Sidecar            *v2cpSidecar  `parquet:"sidecar,optional"`
}

type v2cpMetadata struct {
	Version *int64             `parquet:"version,optional"`
	Tags    map[string]*string `parquet:"tags,optional" parquet-value:",optional"`
}

type v2cpSidecar struct {
	Path             *string            `parquet:"path,optional"`
	SizeInBytes      *int64             `parquet:"sizeInBytes,optional"`
	ModificationTime *int64             `parquet:"modificationTime,optional"`
	Tags             map[string]*string `parquet:"tags,optional" parquet-value:",optional"`
}

// v2Layout says how writeV2Checkpoint lays a checkpoint out.
type v2Layout struct {
	format        string // "json" or "parquet"
	classicName   bool   // n.checkpoint.parquet instead of n.checkpoint.<uuid>.<format>
	sidecars      int    // 0: file actions inline
	absoluteNames bool   // sidecar actions carry a full URI instead of the file name
	noMetadata    bool   // omit checkpointMetadata (invalid)
	wrongVersion  bool   // checkpointMetadata names another version (invalid)
}

// v2Written is what writeV2Checkpoint wrote.
type v2Written struct {
	name      string    // top-level checkpoint object
	sidecars  []Sidecar // as referenced
	nonFile   []Action  // the non-file actions of the top-level checkpoint
	totalRows int
}

const testCheckpointUUID = "80a083e8-7026-4e79-81be-64bd76c43a11"

// writeV2Checkpoint writes a V2 spec checkpoint of snap.
func writeV2Checkpoint(t *testing.T, store objstore.Store, snap *Snapshot, l v2Layout) v2Written {
	t.Helper()
	ctx := context.Background()
	rows, _ := snap.checkpointRows(0)
	var nonFile, files []cpRow
	for _, r := range rows {
		if r.Add != nil || r.Remove != nil {
			files = append(files, r)
		} else {
			nonFile = append(nonFile, r)
		}
	}
	var w v2Written
	for i := range l.sidecars {
		var part []cpRow
		for j := i; j < len(files); j += l.sidecars {
			part = append(part, files[j])
		}
		b, err := encodeCheckpoint(part)
		if err != nil {
			t.Fatal(err)
		}
		file := fmt.Sprintf("016ae953-37a9-438e-%04d-9a9a4a79a39%d.parquet", snap.Version(), i)
		info, err := store.Write(ctx, logDir+"_sidecars/"+file, bytes.NewReader(b), objstore.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ref := file
		if l.absoluteNames {
			ref = "file:///elsewhere/table/_delta_log/_sidecars/" + file
		}
		w.sidecars = append(w.sidecars, Sidecar{Path: ref, SizeInBytes: int64(len(b)), ModificationTime: info.Updated.UnixMilli(), Tags: map[string]string{}})
	}
	version := snap.Version()
	if l.wrongVersion {
		version++
	}
	meta := &CheckpointMetadata{Version: version, Tags: map[string]string{}}
	if !l.noMetadata {
		w.nonFile = append(w.nonFile, Action{CheckpointMetadata: meta})
	}
	w.nonFile = append(w.nonFile, snapshotNonFileActions(snap)...)

	var body []byte
	switch l.format {
	case "json":
		var lines []Action
		lines = append(lines, w.nonFile...)
		if l.sidecars == 0 {
			lines = append(lines, snapshotFileActions(snap)...)
		}
		for i := range w.sidecars {
			lines = append(lines, Action{Sidecar: &w.sidecars[i]})
		}
		for _, a := range lines {
			b, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			body = append(append(body, b...), '\n')
		}
		w.totalRows = len(lines)
	case "parquet":
		var out []v2cpRow
		if !l.noMetadata {
			out = append(out, v2cpRow{CheckpointMetadata: &v2cpMetadata{Version: ptr(meta.Version), Tags: map[string]*string{}}})
		}
		for _, r := range nonFile {
			out = append(out, v2cpRow{cpRow: r})
		}
		if l.sidecars == 0 {
			for _, r := range files {
				out = append(out, v2cpRow{cpRow: r})
			}
		}
		for _, s := range w.sidecars {
			out = append(out, v2cpRow{Sidecar: &v2cpSidecar{Path: ptr(s.Path), SizeInBytes: ptr(s.SizeInBytes), ModificationTime: ptr(s.ModificationTime), Tags: map[string]*string{}}})
		}
		b, err := encodeCheckpoint(out)
		if err != nil {
			t.Fatal(err)
		}
		body = b
		w.totalRows = len(out)
	default:
		t.Fatalf("unknown format %q", l.format)
	}
	w.name = fmt.Sprintf("%s%020d.checkpoint.%s.%s", logDir, snap.Version(), testCheckpointUUID, l.format)
	if l.classicName {
		w.name = checkpointName(snap.Version())
	}
	if _, err := store.Write(ctx, w.name, bytes.NewReader(body), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return w
}

// snapshotNonFileActions renders protocol, metaData, txns and domain
// metadata of snap as actions.
func snapshotNonFileActions(snap *Snapshot) []Action {
	p, md := snap.Protocol(), snap.Metadata()
	out := []Action{{Protocol: &p}, {MetaData: &md}}
	for _, x := range sortedValues(snap.Txns()) {
		out = append(out, Action{Txn: &x})
	}
	for _, d := range sortedValues(snap.DomainMetadata()) {
		out = append(out, Action{DomainMetadata: &d})
	}
	return out
}

// snapshotFileActions renders the live files (dataChange false, as in
// checkpoints) and the tombstones of snap.
func snapshotFileActions(snap *Snapshot) []Action {
	var out []Action
	for _, a := range snap.Files() {
		a.DataChange = false
		out = append(out, Action{Add: &a})
	}
	for _, r := range snap.Tombstones() {
		out = append(out, Action{Remove: &r})
	}
	return out
}

// rawCommit writes version v of store from actions, with a commitInfo
// carrying timestamp ts: commits our writer refuses to make (protocol
// upgrades to features it cannot write, writes to such tables).
func rawCommit(t *testing.T, store objstore.Store, v int64, ts time.Time, actions ...Action) {
	t.Helper()
	lines := []string{fmt.Sprintf(`{"commitInfo":{"timestamp":%d,"operation":"WRITE"}}`, ts.UnixMilli())}
	for _, a := range actions {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	putCommit(t, store, v, strings.Join(lines, "\n")+"\n")
}

// v2Protocol is the protocol of a table that supports V2 checkpoints.
var v2Protocol = Protocol{MinReaderVersion: 3, MinWriterVersion: 7,
	ReaderFeatures: []string{FeatureV2Checkpoint}, WriterFeatures: []string{FeatureV2Checkpoint, FeatureDomainMetadata}}

// v2Table builds a partitioned table of 6 versions with removes, txns and
// domain metadata, upgraded to v2Checkpoint at version 3, on JSON commits
// only. It returns the store and the plain-replay snapshot of every version.
func v2Table(t *testing.T) (objstore.Store, []*Snapshot) {
	t.Helper()
	ctx := context.Background()
	clock := newClock()
	store := objstore.NewMemory()
	tbl := OpenWith(store, Options{Now: clock.Now})
	snap := createTable(t, tbl, []string{"dt"}, map[string]string{"delta.checkpointInterval": "1000"})
	day1, day2 := strp("2026-01-01"), strp("2026-01-02")
	clock.Advance(time.Minute)
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("dt=2026-01-01/a.parquet", 3, map[string]*string{"dt": day1}),
		dataFile("dt=2026-01-02/b%20c.parquet", 4, map[string]*string{"dt": day2}),
		dataFile("dt=__HIVE_DEFAULT_PARTITION__/c.parquet", 5, map[string]*string{"dt": nil}))
	tx.SetTxn("app-1", 1)
	snap, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	a := snap.Files()[0]
	tx = snap.NewTransaction(Operation{Name: "DELETE"})
	tx.ReadFiles(a.Path)
	tx.Remove(a.Remove(clock.Now().UnixMilli(), true))
	tx.Add(dataFile("dt=2026-01-01/a2.parquet", 2, map[string]*string{"dt": day1}))
	tx.SetTxn("app-1", 2)
	tx.SetTxn("app-2", 1)
	if snap, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	p := v2Protocol
	rawCommit(t, store, 3, clock.Now(), Action{Protocol: &p},
		Action{DomainMetadata: &DomainMetadata{Domain: "delta.clustering", Configuration: `{"clusteringColumns":[]}`}})
	clock.Advance(time.Minute)
	d := dataFile("dt=2026-01-02/d.parquet", 6, map[string]*string{"dt": day2})
	b := snap.Files()[1]
	rm := b.Remove(clock.Now().UnixMilli(), true)
	rawCommit(t, store, 4, clock.Now(), Action{Add: &d}, Action{Remove: &rm}, Action{Txn: &Txn{AppID: "app-1", Version: 3}})
	clock.Advance(time.Minute)
	e := dataFile("e.parquet", 7, map[string]*string{"dt": nil})
	rawCommit(t, store, 5, clock.Now(), Action{Add: &e})

	var want []*Snapshot
	for v := range int64(6) {
		s, err := Open(store).SnapshotAt(ctx, v)
		if err != nil {
			t.Fatalf("plain replay of version %d: %v", v, err)
		}
		if s.CheckpointVersion() != -1 {
			t.Fatalf("plain replay of version %d used checkpoint %d", v, s.CheckpointVersion())
		}
		want = append(want, s)
	}
	if !slices.Equal(want[5].Protocol().ReaderFeatures, []string{FeatureV2Checkpoint}) {
		t.Fatalf("latest protocol = %+v", want[5].Protocol())
	}
	return store, want
}

// sameV2Snapshot compares everything a checkpoint must carry.
func sameV2Snapshot(t *testing.T, got, want *Snapshot) {
	t.Helper()
	sameSnapshot(t, got, want)
	if g, w := fmt.Sprint(got.DomainMetadata()), fmt.Sprint(want.DomainMetadata()); g != w {
		t.Errorf("domain metadata = %s, want %s", g, w)
	}
	tomb := func(s *Snapshot) string {
		var parts []string
		for _, r := range s.Tombstones() {
			parts = append(parts, fmt.Sprintf("%s@%d", r.Path, *r.DeletionTimestamp))
		}
		return strings.Join(parts, ",")
	}
	if g, w := tomb(got), tomb(want); g != w {
		t.Errorf("tombstones = %s, want %s", g, w)
	}
}

func TestV2CheckpointsReadLikeAPlainReplay(t *testing.T) {
	ctx := context.Background()
	layouts := []struct {
		name string
		l    v2Layout
	}{
		{"a UUID-named JSON checkpoint with its file actions inline", v2Layout{format: "json"}},
		{"a UUID-named JSON checkpoint with two sidecars", v2Layout{format: "json", sidecars: 2}},
		{"a UUID-named Parquet checkpoint with its file actions inline", v2Layout{format: "parquet"}},
		{"a UUID-named Parquet checkpoint with three sidecars named by full URI", v2Layout{format: "parquet", sidecars: 3, absoluteNames: true}},
		{"a classic-named checkpoint following the V2 spec with a sidecar", v2Layout{format: "parquet", classicName: true, sidecars: 1}},
	}
	for _, tt := range layouts {
		t.Run(tt.name, func(t *testing.T) {
			store, want := v2Table(t)
			writeV2Checkpoint(t, store, want[3], tt.l)

			// Every version reads the same with the checkpoint in place:
			// those before it from JSON, the others from it.
			for v := range int64(6) {
				got, err := Open(store).SnapshotAt(ctx, v)
				if err != nil {
					t.Fatalf("version %d: %v", v, err)
				}
				wantCp := int64(-1)
				if v >= 3 {
					wantCp = 3
				}
				if got.CheckpointVersion() != wantCp {
					t.Errorf("version %d loaded from checkpoint %d, want %d", v, got.CheckpointVersion(), wantCp)
				}
				sameV2Snapshot(t, got, want[v])
			}
			latest := mustSnapshot(t, Open(store))
			sameV2Snapshot(t, latest, want[5])
			asOf, err := Open(store).SnapshotAsOf(ctx, want[4].Timestamp())
			if err != nil || asOf.Version() != 4 || asOf.CheckpointVersion() != 3 {
				t.Fatalf("as of version 4's time: %v, %v", asOf, err)
			}

			// Without the commits it covers, the checkpoint alone carries
			// the state.
			for v := range int64(4) {
				if err := store.Delete(ctx, commitName(v)); err != nil {
					t.Fatal(err)
				}
			}
			sameV2Snapshot(t, mustSnapshot(t, Open(store)), want[5])
			got, err := Open(store).SnapshotAt(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			sameV2Snapshot(t, got, want[3])
			if _, err := Open(store).SnapshotAt(ctx, 2); !errors.Is(err, ErrVersionNotFound) {
				t.Errorf("version 2 after its commits are gone: err = %v, want ErrVersionNotFound", err)
			}
			if n, _ := got.NumRecords(); n != 2+4+5 {
				t.Errorf("records at version 3 = %d, want 11", n)
			}
		})
	}
}

func TestLastCheckpointPointingAtAV2Checkpoint(t *testing.T) {
	ctx := context.Background()
	// v2Info renders _last_checkpoint's v2Checkpoint; nil leaves it out.
	v2Info := func(path string, nonFile []Action, sidecars []Sidecar) map[string]any {
		info := map[string]any{"path": path, "sizeInBytes": 10, "modificationTime": 1}
		if nonFile != nil {
			info["nonFileActions"] = nonFile
		}
		if sidecars != nil {
			info["sidecarFiles"] = sidecars
		}
		return info
	}
	named := func(w v2Written) string { return strings.TrimPrefix(w.name, logDir) }
	tests := []struct {
		name   string
		l      v2Layout
		v2     func(w v2Written) map[string]any
		garble bool // overwrite the top-level file: only the hint can serve
	}{
		{"a hint without v2Checkpoint info lists from the checkpoint and reads it",
			v2Layout{format: "json", sidecars: 1}, nil, false},
		{"a hint embedding the checkpoint's actions and sidecars spares reading the checkpoint",
			v2Layout{format: "parquet", sidecars: 2}, func(w v2Written) map[string]any { return v2Info(named(w), w.nonFile, w.sidecars) }, true},
		{"a hint embedding a checkpoint without sidecars still reads its inline file actions",
			v2Layout{format: "json"}, func(w v2Written) map[string]any { return v2Info(named(w), w.nonFile, []Sidecar{}) }, false},
		{"a hint whose embedded actions lack the checkpointMetadata reads the checkpoint",
			v2Layout{format: "parquet", sidecars: 2}, func(w v2Written) map[string]any { return v2Info(named(w), w.nonFile[1:], w.sidecars) }, false},
		{"a hint naming the checkpoint without its actions reads the checkpoint",
			v2Layout{format: "parquet", sidecars: 2}, func(w v2Written) map[string]any { return v2Info(named(w), nil, nil) }, false},
		{"a hint naming a V2 checkpoint that is gone falls back to the one listed",
			v2Layout{format: "json"}, func(w v2Written) map[string]any {
				return v2Info("00000000000000000003.checkpoint.00000000-0000-0000-0000-000000000000.json", []Action{}, []Sidecar{{Path: "gone.parquet"}})
			}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, want := v2Table(t)
			w := writeV2Checkpoint(t, store, want[3], tt.l)
			hint := map[string]any{"version": 3, "size": w.totalRows, "sizeInBytes": 1, "numOfAddFiles": 3}
			if tt.v2 != nil {
				hint["v2Checkpoint"] = tt.v2(w)
			}
			b, err := json.Marshal(hint)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Write(ctx, lastCheckpointName, bytes.NewReader(b), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if tt.garble {
				if _, err := store.Write(ctx, w.name, strings.NewReader("not parquet"), objstore.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			rec := &listRecorder{Store: store}
			got := mustSnapshot(t, Open(rec))
			if got.CheckpointVersion() != 3 || !slices.Equal(rec.starts, []string{"_delta_log/00000000000000000003"}) {
				t.Fatalf("checkpoint %d, List startAt %q; want 3 from the hint", got.CheckpointVersion(), rec.starts)
			}
			sameV2Snapshot(t, got, want[5])
		})
	}
}

func TestV2CheckpointBesideAClassicOneAtTheSameVersion(t *testing.T) {
	store, want := v2Table(t)
	writeV2Checkpoint(t, store, want[3], v2Layout{format: "json", sidecars: 1})
	// A V1 classic checkpoint is always allowed (PROTOCOL.md
	// "Checkpoints"); ours drops tombstones older than the retention.
	if err := want[3].WriteCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := mustSnapshot(t, Open(store))
	if got.CheckpointVersion() != 3 {
		t.Fatalf("checkpoint version = %d, want 3", got.CheckpointVersion())
	}
	sameSnapshot(t, got, want[5])
}

func TestInvalidV2CheckpointsAreACorruptLog(t *testing.T) {
	ctx := context.Background()
	// damage breaks the checkpoint and returns what the error must name.
	tests := []struct {
		name   string
		l      v2Layout
		damage func(t *testing.T, store objstore.Store, w v2Written) string
	}{
		{"a missing sidecar", v2Layout{format: "json", sidecars: 2}, func(t *testing.T, store objstore.Store, w v2Written) string {
			name := sidecarDir + w.sidecars[1].Path
			if err := store.Delete(ctx, name); err != nil {
				t.Fatal(err)
			}
			return name
		}},
		{"a sidecar whose size differs from the reference", v2Layout{format: "parquet", sidecars: 1}, func(t *testing.T, store objstore.Store, w v2Written) string {
			name := sidecarDir + w.sidecars[0].Path
			b := readAll(t, store, name)
			if _, err := store.Write(ctx, name, bytes.NewReader(append(b, 0)), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			return "bytes, the checkpoint says"
		}},
		{"a UUID-named checkpoint without checkpointMetadata", v2Layout{format: "json", noMetadata: true}, nil},
		{"a checkpointMetadata naming another version", v2Layout{format: "parquet", wrongVersion: true}, nil},
		{"a JSON checkpoint line that is not JSON", v2Layout{format: "json"}, func(t *testing.T, store objstore.Store, w v2Written) string {
			b := append(readAll(t, store, w.name), []byte("{\"add\":\n")...)
			if _, err := store.Write(ctx, w.name, bytes.NewReader(b), objstore.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			return w.name
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, want := v2Table(t)
			w := writeV2Checkpoint(t, store, want[3], tt.l)
			wantErr := "checkpointMetadata"
			if tt.damage != nil {
				wantErr = tt.damage(t, store, w)
			}
			_, err := Open(store).Snapshot(ctx)
			if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("err = %v, want ErrCorruptLog naming %q", err, wantErr)
			}
		})
	}
}

func TestCleanupLogDeletesV2CheckpointsBeforeTheOneItKeeps(t *testing.T) {
	ctx := context.Background()
	store, want := v2Table(t)
	old := writeV2Checkpoint(t, store, want[3], v2Layout{format: "json", sidecars: 1})
	kept := writeV2Checkpoint(t, store, want[5], v2Layout{format: "parquet", sidecars: 1})
	res, err := Open(store).CleanupLog(ctx, CleanupOptions{Retention: 24 * time.Hour, Now: func() time.Time { return want[5].Timestamp().Add(72 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.OldestVersion != 5 || !slices.Contains(res.Deleted, old.name) || slices.Contains(res.Deleted, kept.name) {
		t.Fatalf("oldest %d, deleted %v; want version 5 kept with %s, and %s deleted", res.OldestVersion, res.Deleted, kept.name, old.name)
	}
	got := mustSnapshot(t, Open(store))
	if got.CheckpointVersion() != 5 {
		t.Fatalf("checkpoint version = %d, want 5", got.CheckpointVersion())
	}
	sameV2Snapshot(t, got, want[5])
	if _, err := Open(store).SnapshotAt(ctx, 4); !errors.Is(err, ErrVersionNotFound) {
		t.Errorf("version 4 after cleanup: err = %v, want ErrVersionNotFound", err)
	}
}

func TestV2CheckpointTablesAreReadButNotWritten(t *testing.T) {
	store, want := v2Table(t)
	writeV2Checkpoint(t, store, want[3], v2Layout{format: "parquet", sidecars: 1})
	snap := mustSnapshot(t, Open(store))
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	tx.Add(dataFile("new.parquet", 1, map[string]*string{"dt": nil}))
	_, err := tx.Commit(context.Background())
	if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), FeatureV2Checkpoint) {
		t.Fatalf("commit err = %v, want ErrUnsupportedFeature naming %s", err, FeatureV2Checkpoint)
	}
	if err := snap.Protocol().CheckVacuum(); err != nil {
		t.Errorf("vacuum refused: %v (v2Checkpoint changes only the log, which vacuum never touches)", err)
	}
}

func TestCheckV2Actions(t *testing.T) {
	one := []objstore.Info{{Name: checkpointName(7)}}
	two := []objstore.Info{{Name: "_delta_log/00000000000000000007.checkpoint.0000000001.0000000002.parquet"}, {Name: "_delta_log/00000000000000000007.checkpoint.0000000002.0000000002.parquet"}}
	own := []CheckpointMetadata{{Version: 7}}
	tests := []struct {
		name     string
		cp       checkpointRef
		meta     []CheckpointMetadata
		sidecars int
		wantErr  string // "" = valid
	}{
		{"a classic V1 checkpoint has neither", checkpointRef{version: 7, files: one}, nil, 0, ""},
		{"a classic V2 checkpoint with sidecars", checkpointRef{version: 7, files: one}, own, 2, ""},
		{"a UUID-named checkpoint without sidecars", checkpointRef{version: 7, files: one, uuidNamed: true}, own, 0, ""},
		{"sidecars without checkpointMetadata", checkpointRef{version: 7, files: one}, nil, 1, "0 checkpointMetadata"},
		{"two checkpointMetadata actions", checkpointRef{version: 7, files: one, uuidNamed: true}, append(own, own...), 0, "2 checkpointMetadata"},
		{"a multi-part checkpoint with checkpointMetadata", checkpointRef{version: 7, files: two}, own, 0, "multi-part"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkV2Actions(&tt.cp, tt.meta, tt.sidecars)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrCorruptLog naming %q", err, tt.wantErr)
			}
		})
	}
}

func TestSidecarNameKeepsSidecarsInTheTablesOwnDirectory(t *testing.T) {
	tests := []struct{ path, want string }{
		{"016ae953-37a9-438e-8683-9a9a4a79a395.parquet", sidecarDir + "016ae953-37a9-438e-8683-9a9a4a79a395.parquet"},
		{"s3://bucket/t/_delta_log/_sidecars/a%20b.parquet", sidecarDir + "a b.parquet"},
		{"../../data.parquet", sidecarDir + "data.parquet"},
		{"", ""},
		{"dir/..", ""},
		{"a%2Fb.parquet", ""},
		{"bad%zz", ""},
	}
	for _, tt := range tests {
		got, err := sidecarName(tt.path)
		if tt.want == "" {
			if !errors.Is(err, ErrCorruptLog) {
				t.Errorf("sidecarName(%q) = %q, %v; want ErrCorruptLog", tt.path, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("sidecarName(%q) = %q, %v; want %q", tt.path, got, err, tt.want)
		}
	}
}
