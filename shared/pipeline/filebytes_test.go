package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dsdelta/dsdelta/internal/fixture"
	"github.com/dsdelta/dsdelta/shared/config"
	"github.com/dsdelta/dsdelta/shared/coord"
	"github.com/dsdelta/dsdelta/shared/datastream"
	"github.com/dsdelta/dsdelta/shared/dssim"
	"github.com/dsdelta/dsdelta/shared/objstore"
)

// TestTheFilesWrittenForAFixedInputKeepTheirBytes stages, merges and
// compacts a fixed input (simulated streams of three sources in batches of
// two files, one table with deletion vectors, one partitioned, one scd2,
// and the real all-types fixtures) with a fixed clock, and compares a
// digest of every staged, state, history and tombstone file with
// testdata/file_bytes.golden. It guards refactors that must not change
// what is written: a change of the golden file is a change of behaviour,
// to be explained in the commit that makes it (-update rewrites it).
//
// Names and log fields that are random or taken from the clock by design
// (UUIDs, modification and commit times, checkpoints that hold them) are
// masked; everything else, data files byte for byte, counts.
func TestTheFilesWrittenForAFixedInputKeepTheirBytes(t *testing.T) {
	first := fileBytesDigest(t)
	if again := fileBytesDigest(t); again != first {
		t.Fatalf("two runs of the same input wrote different files:\n%s\nthen:\n%s", first, again)
	}
	golden := filepath.Join("testdata", "file_bytes.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(first), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != first {
		t.Fatalf("files differ from %s:\n got:\n%s\nwant:\n%s", golden, first, want)
	}
}

// fileBytesDigest runs the fixed input and lists the staged files, then
// the lake's files after the merges and maintenance (see lakeDigest).
func fileBytesDigest(t *testing.T) string {
	ctx := context.Background()
	// Random names (files, deletion vectors, transactions) rise with each
	// one made, so that a table's files sort by path as they were written
	// and the order in which a merge visits them, and the bytes that order
	// decides, is the same from run to run. No test of this package runs
	// in parallel with this one.
	uuid.SetRand(&risingIDs{})
	defer uuid.SetRand(nil)
	sim, err := dssim.Run(dssim.Options{Seed: 30, EventsPerFile: 25, DuplicateEvents: 0.05, Tables: []dssim.TableSpec{
		{Source: dssim.MySQL, Database: "shop", Table: "customers", InitialRows: 60, Changes: 120},
		{Source: dssim.Oracle, Database: "HR", Table: "EMPLOYEES", InitialRows: 40, Changes: 80},
		{Source: dssim.PostgreSQL, Database: "public", Table: "orders", InitialRows: 40, Changes: 80, Format: dssim.JSONLGz},
	}})
	if err != nil {
		t.Fatal(err)
	}
	source := objstore.NewMemory()
	files := write(t, ctx, source, sim.Files)
	for _, dir := range []string{"DataStreamToSpannerDDLIT", "SeparateShadowTableDatabaseIT"} {
		files = append(files, copyFixtureDir(t, ctx, source, fixture.Path(t, "datastream", "GoogleCloudPlatform__DataflowTemplates", "v2", "datastream-to-spanner", "src", "test", "resources", dir))...)
	}
	lake := objstore.NewMemory()
	c, err := coord.NewLocal(lake, coord.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
	p := &Pipeline{Lake: lake, Sources: oneSource{source}, Coordination: Coordinate(c), Holder: "bytes",
		Now: func() time.Time { clock = clock.Add(time.Second); return clock }, memoryLimit: -1,
		dvMinFileBytes: -1, historyCopyEvents: 1, stagedGroupRows: 16,
		Config: config.Config{BatchMaxFiles: 2, Tables: map[string]config.TableConfig{
			"shop.customers": {DeletionVectors: config.On},
			"HR.EMPLOYEES":   {Mode: config.ModeSCD2},
			"public.orders":  {PartitionColumns: []string{"shipped"}},
		}}}
	for _, f := range files {
		if _, err := p.Stage(ctx, f); err != nil {
			t.Fatalf("stage %s: %v", f.Name, err)
		}
	}
	staged := lakeDigest(t, ctx, lake, "_staging/")
	tables, err := c.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].Table < tables[j].Table })
	for _, st := range tables {
		for {
			res, err := p.MergeTable(ctx, st.Table)
			if err != nil {
				t.Fatalf("merge %s: %v", st.Table, err)
			}
			if res.Batches == 0 {
				break
			}
		}
		if _, err := p.Maintain(ctx, st.Table); err != nil {
			t.Fatalf("maintain %s: %v", st.Table, err)
		}
	}
	return staged + lakeDigest(t, ctx, lake, "")
}

// lakeDigest lists the files below prefix: one line per file, its masked
// name and the SHA-256 of its masked content, sorted. With FILEBYTES_DUMP
// set to a folder, the masked files are written there too, for diff -r to
// show what changed.
func lakeDigest(t *testing.T, ctx context.Context, lake objstore.Store, prefix string) string {
	var lines []string
	err := lake.List(ctx, prefix, "", func(info objstore.Info) error {
		name, skip := maskName(info.Name)
		if skip {
			return nil
		}
		r, err := lake.NewReader(ctx, info.Name, 0, -1)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			return err
		}
		if strings.HasSuffix(info.Name, ".json") {
			b = maskJSON(t, b)
		}
		sum := sha256.Sum256(b)
		lines = append(lines, name+" "+hex.EncodeToString(sum[:]))
		if dir := os.Getenv("FILEBYTES_DUMP"); dir != "" {
			dump := filepath.Join(dir, prefix, name)
			if err := os.MkdirAll(filepath.Dir(dump), 0o755); err != nil {
				return err
			}
			return os.WriteFile(dump+"."+hex.EncodeToString(sum[:4]), b, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// copyFixtureDir puts every data file of a fixture folder in source.
func copyFixtureDir(t *testing.T, ctx context.Context, source objstore.Store, dir string) []datastream.SourceFile {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []datastream.SourceFile
	for _, e := range entries {
		if e.IsDir() || !(config.Config{}).IsDataFile(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(dir) + "/" + e.Name()
		info, err := source.Write(ctx, name, bytes.NewReader(b), objstore.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, datastream.SourceFile{Name: name, Generation: info.Generation, Size: info.Size})
	}
	return out
}

// risingIDs is a source of UUIDs whose first four bytes count up.
type risingIDs struct {
	mu sync.Mutex
	n  uint32
}

func (r *risingIDs) Read(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	clear(b)
	binary.BigEndian.PutUint32(b, r.n)
	return len(b), nil
}

var (
	uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	// stagedPartName is a staged part's name: the file id, 8 random hex digits
	// and the part number.
	stagedPartName = regexp.MustCompile(`-[0-9a-f]{8}-([0-9]+)\.parquet`)
)

// maskName masks the random parts of an object name and says whether the
// object is left out: checkpoints and the coordination records, which
// hold random names and times.
func maskName(name string) (string, bool) {
	data := strings.HasSuffix(name, ".parquet") || strings.HasSuffix(name, ".bin")
	staged := strings.HasPrefix(name, "_staging/") && strings.HasSuffix(name, ".json")
	if strings.Contains(name, ".checkpoint.") || strings.HasSuffix(name, "_last_checkpoint") || !data && !staged && !strings.Contains(name, "_delta_log/") {
		return "", true
	}
	name = uuidText.ReplaceAllString(name, "UUID")
	return stagedPartName.ReplaceAllString(name, "-RAND-$1.parquet"), false
}

// maskJSON masks, line by line, the fields of a Delta log file (or any
// JSON lines) that are random or taken from the wall clock by design.
func maskJSON(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		v = maskValue("", v)
		m, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(m)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func maskValue(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = maskValue(k, e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskValue(key, e)
		}
		return x
	case string:
		switch key {
		case "txnId", "pathOrInlineDv", "id":
			return "MASKED"
		}
		return stagedPartName.ReplaceAllString(uuidText.ReplaceAllString(x, "UUID"), "-RAND-$1.parquet")
	case float64:
		switch key {
		case "modificationTime", "timestamp", "createdTime", "deletionTimestamp", "lastUpdated":
			return "MASKED"
		}
	}
	return v
}
