package delta

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dsdelta/dsdelta/shared/objstore"
	"github.com/dsdelta/dsdelta/shared/value"
)

func TestProtocolGating(t *testing.T) {
	plain := Metadata{SchemaString: testSchema().SchemaString(), Configuration: map[string]string{}}
	ntz := value.StructType{Fields: []value.Field{{Name: "ts", Type: value.TimestampNTZ, Nullable: true}}}
	tests := []struct {
		name      string
		p         Protocol
		md        Metadata
		readErr   string // "" = readable
		writeErr  string // "" = writable
		vacuumErr string // "" = vacuum allowed
	}{
		{"(1,2) is readable and writable", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, plain, "", "", ""},
		{"(1,1) is readable and writable", Protocol{MinReaderVersion: 1, MinWriterVersion: 1}, plain, "", "", ""},
		{"writer 3 needs check constraints", Protocol{MinReaderVersion: 1, MinWriterVersion: 3}, plain, "", "checkConstraints", ""},
		{"writer 4 needs change data feed and generated columns", Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, plain, "", "changeDataFeed, checkConstraints, generatedColumns", ""},
		{"column mapping (2,5) is readable but not writable", Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, plain, "", "columnMapping", ""},
		{"writer 7 listing only appendOnly and invariants is writable",
			Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants"}}, plain, "", "", ""},
		{"reader 3 with no reader features and writer 7 appendOnly is writable",
			Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{}, WriterFeatures: []string{"appendOnly"}}, plain, "", "", ""},
		{"writer 7 with rowTracking and domainMetadata names both",
			Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "rowTracking", "domainMetadata"}}, plain, "", "domainMetadata, rowTracking", ""},
		{"deletion vectors are readable, writable and vacuumable",
			Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, plain, "", "", ""},
		{"deletion vectors beside an unwritable reader feature are not writable",
			Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors", "columnMapping"}, WriterFeatures: []string{"deletionVectors", "columnMapping"}}, plain, "", "columnMapping", ""},
		{"an unknown reader feature is named", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors", "futureThing"}}, plain, "futureThing", "futureThing", "futureThing"},
		{"v2Checkpoint is readable, not writable, and vacuumable", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"v2Checkpoint"}, WriterFeatures: []string{"v2Checkpoint"}}, plain, "", "v2Checkpoint", ""},
		{"reader version 4 is refused", Protocol{MinReaderVersion: 4, MinWriterVersion: 7}, plain, "minReaderVersion 4", "minReaderVersion 4", "minReaderVersion 4"},
		{"an unknown writer feature blocks vacuum", Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"brandNew"}}, plain, "", "brandNew", "brandNew"},
		{"a CHECK constraint property blocks writes even at writer 2",
			Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, Metadata{SchemaString: plain.SchemaString, Configuration: map[string]string{"delta.constraints.positive": "id > 0"}}, "", "checkConstraints", ""},
		{"an enabled change data feed blocks writes",
			Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly"}}, Metadata{SchemaString: plain.SchemaString, Configuration: map[string]string{"delta.enableChangeDataFeed": "true"}}, "", "changeDataFeed", ""},
		{"a timestamp_ntz column blocks writes", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, Metadata{SchemaString: ntz.SchemaString()}, "", "timestampNtz", ""},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if want == "" {
			if err != nil {
				t.Errorf("%s: unexpected error %v", what, err)
			}
			return
		}
		if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want ErrUnsupportedFeature naming %q", what, err, want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, "read", tt.p.CheckRead(), tt.readErr)
			check(t, "write", tt.p.CheckWrite(tt.md), tt.writeErr)
			check(t, "vacuum", tt.p.CheckVacuum(), tt.vacuumErr)
		})
	}
}

func TestWritingToSparkTablesIsGated(t *testing.T) {
	tests := []struct {
		table   string
		feature string // "" = writable
	}{
		{"snapshot-data0", ""},
		{"delta-0.1.0", ""},
		{"basic-dv-no-checkpoint", ""},
		{"table-with-dv-small", "columnMapping"},
		{"table-with-columnmapping-mode-name", "columnMapping"},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			_, store := fixtureCopy(t, tt.table)
			snap := mustSnapshot(t, Open(store))
			tx := snap.NewTransaction(Operation{Name: "WRITE"})
			pv := map[string]*string{}
			for _, c := range snap.PartitionColumns() {
				pv[c] = strp("1")
			}
			tx.Add(dataFile("new.parquet", 1, pv))
			_, err := tx.Commit(context.Background())
			if tt.feature == "" {
				if err != nil {
					t.Fatalf("commit to a writable Spark table failed: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), tt.feature) {
				t.Fatalf("err = %v, want ErrUnsupportedFeature naming %s", err, tt.feature)
			}
		})
	}
}

func TestReadingAnUnsupportedTableNamesTheFeature(t *testing.T) {
	_, store := fixtureCopy(t, "snapshot-data0")
	snap := mustSnapshot(t, Open(store))
	// Simulate a newer writer upgrading the table behind our back.
	body := `{"commitInfo":{"timestamp":1}}` + "\n" +
		`{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["catalogManaged"],"writerFeatures":["catalogManaged"]}}` + "\n"
	putCommit(t, store, snap.Version()+1, body)
	_, err := Open(store).Snapshot(context.Background())
	if !errors.Is(err, ErrUnsupportedFeature) || !strings.Contains(err.Error(), "catalogManaged") {
		t.Fatalf("err = %v, want ErrUnsupportedFeature naming catalogManaged", err)
	}
}

func TestDeletionVectorFeatureUpgrade(t *testing.T) {
	tests := []struct {
		name        string
		from        Protocol
		readerFeats []string
		writerFeats []string
	}{
		{"from (1,2) lists what writer version 2 implied", Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, []string{"deletionVectors"}, []string{"appendOnly", "invariants", "deletionVectors"}},
		{"from (1,1)", Protocol{MinReaderVersion: 1, MinWriterVersion: 1}, []string{"deletionVectors"}, []string{"deletionVectors"}},
		{"from (1,4) keeps the legacy writer features", Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, []string{"deletionVectors"}, []string{"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "deletionVectors"}},
		{"from (3,7) adds to the lists once", Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"appendOnly", "deletionVectors"}}, []string{"deletionVectors"}, []string{"appendOnly", "deletionVectors"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.from.WithReaderWriterFeature(FeatureDeletionVectors)
			if got.MinReaderVersion != 3 || got.MinWriterVersion != 7 || !slices.Equal(got.ReaderFeatures, tt.readerFeats) || !slices.Equal(got.WriterFeatures, tt.writerFeats) {
				t.Errorf("got %+v, want (3,7) reader %v writer %v", got, tt.readerFeats, tt.writerFeats)
			}
			if !got.Supports(FeatureDeletionVectors) {
				t.Error("upgraded protocol does not support deletionVectors")
			}
		})
	}
	if (Protocol{MinReaderVersion: 1, MinWriterVersion: 2}).Supports(FeatureDeletionVectors) {
		t.Error("(1,2) supports deletionVectors")
	}
}

func TestCreateWithDeletionVectorsEnabled(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	snap := createTable(t, Open(store), nil, map[string]string{PropEnableDeletionVectors: "true"})
	if p := snap.Protocol(); !p.Supports(FeatureDeletionVectors) || !slices.Contains(p.ReaderFeatures, FeatureDeletionVectors) {
		t.Fatalf("protocol %+v does not support deletion vectors", p)
	}
	if !snap.DeletionVectorsWritable() {
		t.Fatal("DeletionVectorsWritable = false")
	}
	tx := snap.NewTransaction(Operation{Name: "WRITE"})
	a := dataFile("a.parquet", 10, nil)
	tx.Add(a)
	snap, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dv := &DeletionVector{StorageType: "i", PathOrInlineDv: "abc", SizeInBytes: 1, Cardinality: 1}
	withDV := snap.Files()[0].WithDeletionVector(dv)
	st, err := ParseStats(withDV.Stats)
	if err != nil || st.TightBounds == nil || *st.TightBounds {
		t.Errorf("stats %q: want tightBounds false (err %v)", withDV.Stats, err)
	}
	tx = snap.NewTransaction(Operation{Name: "DELETE"})
	tx.Remove(snap.Files()[0].Remove(1, true))
	tx.Add(withDV)
	snap, err = tx.Commit(ctx)
	if err != nil {
		t.Fatalf("commit of a file's new deletion vector: %v", err)
	}
	if fs := snap.Files(); len(fs) != 1 || fs[0].DeletionVector == nil || fs[0].DeletionVector.Cardinality != 1 {
		t.Errorf("files after the commit: %+v", fs)
	}
	plain := createTable(t, Open(objstore.NewMemory()), nil, nil)
	if plain.DeletionVectorsWritable() || plain.Protocol().MinReaderVersion != 1 {
		t.Errorf("a table created without the property: protocol %+v", plain.Protocol())
	}
}
