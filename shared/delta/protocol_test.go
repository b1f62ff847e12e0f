package delta

import (
	"context"
	"errors"
	"strings"
	"testing"

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
		{"deletion vectors are readable, not writable, and vacuumable",
			Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}, plain, "", "deletionVectors", ""},
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
		{"table-with-dv-small", "deletionVectors"},
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
