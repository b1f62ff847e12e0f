package config

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Run("a full YAML file sets every field and per-table values override defaults", func(t *testing.T) {
		c, err := Parse([]byte(`
include: ["shop.*", "HR.*"]
exclude: ["shop.audit_*"]
batch_max_files: 20
defaults:
  tombstone_retention: 14d
  target_file_bytes: 67108864
tables:
  shop.customers:
    primary_key: [id]
    ignore_columns: [password_hash]
    schema_mode: merge
    tombstone_retention: 36h
`))
		if err != nil {
			t.Fatal(err)
		}
		cu := c.Table("shop.customers")
		if cu.SchemaMode != SchemaMerge || time.Duration(cu.TombstoneRetention) != 36*time.Hour || cu.TargetFileBytes != 64<<20 || cu.PrimaryKey[0] != "id" {
			t.Fatalf("customers: %+v", cu)
		}
		other := c.Table("shop.orders")
		if other.SchemaMode != SchemaMerge || time.Duration(other.TombstoneRetention) != 14*24*time.Hour {
			t.Fatalf("orders: %+v", other)
		}
		if !c.Selected("shop.orders") || c.Selected("shop.audit_log") || c.Selected("crm.x") {
			t.Fatal("include/exclude")
		}
		if c.MaxFiles() != 20 || c.MaxBytes() != DefaultBatchMaxBytes {
			t.Fatal("batch limits")
		}
	})
	t.Run("JSON is accepted too", func(t *testing.T) {
		c, err := Parse([]byte(`{"tables":{"a.b":{"primary_key":["k1","k2"]}}}`))
		if err != nil || len(c.Table("a.b").PrimaryKey) != 2 {
			t.Fatal(c, err)
		}
	})
	t.Run("an empty file is the default configuration", func(t *testing.T) {
		c, err := Parse(nil)
		if err != nil || !c.Selected("any.table") || c.Table("a.b").TargetFileBytes != DefaultTargetFileBytes {
			t.Fatal(c, err)
		}
	})
	for _, bad := range []struct{ doc, want string }{
		{"tables:\n  a.b:\n    schema_mode: replace\n", "schema_mode"},
		{"defaults:\n  tombstone_retention: soon\n", "invalid duration"},
		{"tabels: {}\n", "tabels"},
		{"tables:\n  nodot:\n    primary_key: [id]\n", "not a table id"},
		{"include: ['[']\n", "pattern"},
		{"defaults:\n  target_file_bytes: 100\n", "at least 1 MiB"},
		{"batch_max_files: -1\n", "batch_max_files"},
		{"batch_max_bytes: -1\n", "batch_max_bytes"},
		{"batch_max_events: -1\n", "batch_max_events"},
		{"batch_max_source_bytes: -1\n", "batch_max_source_bytes"},
		{"max_record_bytes: -1\n", "max_record_bytes"},
		{"defaults:\n  deletion_vectors: yes please\n", `defaults.deletion_vectors: "yes please" is not on or off`},
		{"tables:\n  a.b:\n    deletion_vectors: true\n", `tables.a.b.deletion_vectors: "true" is not on or off`},
		{"defaults:\n  deletion_vector_min_file_bytes: -1\n", "defaults.deletion_vector_min_file_bytes must not be negative"},
		{"defaults:\n  deletion_vector_max_deleted_share: 1.5\n", "defaults.deletion_vector_max_deleted_share must be between 0 and 1"},
		{"tables:\n  a.b:\n    deletion_vector_max_deleted_share: -0.1\n", "tables.a.b.deletion_vector_max_deleted_share must be between 0 and 1"},
		{"tables:\n  a.b:\n    compaction_max_bytes: -2\n", "tables.a.b.compaction_max_bytes must be positive, or -1 for no cap"},
		{"defaults:\n  mode: history\n", `defaults.mode: "history" is not one of current, soft_delete, scd2`},
		{"tables:\n  a.b:\n    mode: softdelete\n", `tables.a.b.mode: "softdelete" is not one of current, soft_delete, scd2`},
	} {
		t.Run("rejects "+bad.want, func(t *testing.T) {
			_, err := Parse([]byte(bad.doc))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v, want mention of %q", err, bad.want)
			}
		})
	}
}

func TestDeletionVectorsSetting(t *testing.T) {
	t.Run("it is off unless set, and a table's own value overrides the default", func(t *testing.T) {
		c, err := Parse([]byte("defaults:\n  deletion_vectors: on\ntables:\n  shop.small:\n    deletion_vectors: off\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Table("shop.big").DeletionVectors; got != On {
			t.Errorf("shop.big: %q, want on from the defaults", got)
		}
		if got := c.Table("shop.small").DeletionVectors; got != Off {
			t.Errorf("shop.small: %q, want its own off", got)
		}
		none, err := Parse(nil)
		if err != nil || none.Table("shop.big").DeletionVectors != Off {
			t.Fatalf("unset: %q %v, want off", none.Table("shop.big").DeletionVectors, err)
		}
	})
	t.Run("the smallest file given a vector is set in defaults and per table", func(t *testing.T) {
		c, err := Parse([]byte("defaults:\n  deletion_vector_min_file_bytes: 4096\ntables:\n  a.b:\n    deletion_vector_min_file_bytes: 1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, other := c.Table("a.b").DVMinFileBytes, c.Table("a.c").DVMinFileBytes; got != 1 || other != 4096 {
			t.Errorf("a.b %d, a.c %d; want 1 and 4096", got, other)
		}
	})
	t.Run("the deleted share compaction folds past is set in defaults and per table", func(t *testing.T) {
		c, err := Parse([]byte("defaults:\n  deletion_vector_max_deleted_share: 0.4\ntables:\n  a.b:\n    deletion_vector_max_deleted_share: 1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, other := c.Table("a.b").DVMaxDeletedShare, c.Table("a.c").DVMaxDeletedShare; got != 1 || other != 0.4 {
			t.Errorf("a.b %g, a.c %g; want 1 and 0.4", got, other)
		}
		if none, err := Parse(nil); err != nil || none.Table("a.b").DVMaxDeletedShare != 0 {
			t.Errorf("unset: %v %v, want 0 (compaction's default)", none.Table("a.b").DVMaxDeletedShare, err)
		}
	})
	t.Run("the bytes one maintenance run compacts are set in defaults and per table, -1 for no cap", func(t *testing.T) {
		c, err := Parse([]byte("defaults:\n  compaction_max_bytes: 4194304\ntables:\n  a.b:\n    compaction_max_bytes: -1\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got, other := c.Table("a.b").CompactionMaxBytes, c.Table("a.c").CompactionMaxBytes; got != -1 || other != 4<<20 {
			t.Errorf("a.b %d, a.c %d; want -1 and 4 MiB", got, other)
		}
		if none, err := Parse(nil); err != nil || none.Table("a.b").CompactionMaxBytes != DefaultCompactionMaxBytes {
			t.Errorf("unset: %v %v, want the default %d", none.Table("a.b").CompactionMaxBytes, err, DefaultCompactionMaxBytes)
		}
	})
	t.Run("a table may turn it on over the default", func(t *testing.T) {
		c, err := Parse([]byte(`{"tables":{"a.b":{"deletion_vectors":"on"}}}`))
		if err != nil || c.Table("a.b").DeletionVectors != On || c.Table("a.c").DeletionVectors != Off {
			t.Fatal(c, err)
		}
	})
}

func TestLimits(t *testing.T) {
	t.Run("unset limits take their defaults", func(t *testing.T) {
		c, err := Parse(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			key       string
			got, want int64
		}{
			{"batch_max_files", int64(c.MaxFiles()), DefaultBatchMaxFiles},
			{"batch_max_bytes", c.MaxBytes(), 256 << 20},
			{"batch_max_events", c.MaxEvents(), 100_000},
			{"batch_max_source_bytes", c.MaxSourceBytes(), 1 << 30},
			{"max_record_bytes", c.MaxRecordBytes(), 128 << 20},
		} {
			if tc.got != tc.want {
				t.Errorf("%s = %d, want the default %d", tc.key, tc.got, tc.want)
			}
		}
	})
	t.Run("set limits are read from YAML and JSON under their own keys", func(t *testing.T) {
		for _, doc := range []string{
			"batch_max_bytes: 1000\nbatch_max_events: 2000\nbatch_max_source_bytes: 3000\nmax_record_bytes: 4000\n",
			`{"batch_max_bytes": 1000, "batch_max_events": 2000, "batch_max_source_bytes": 3000, "max_record_bytes": 4000}`,
		} {
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatalf("Parse(%q): %v", doc, err)
			}
			if c.MaxBytes() != 1000 || c.MaxEvents() != 2000 || c.MaxSourceBytes() != 3000 || c.MaxRecordBytes() != 4000 {
				t.Fatalf("Parse(%q): bytes %d, events %d, source bytes %d, record bytes %d; want 1000, 2000, 3000, 4000",
					doc, c.MaxBytes(), c.MaxEvents(), c.MaxSourceBytes(), c.MaxRecordBytes())
			}
		}
	})
}

func TestIsDataFile(t *testing.T) {
	var c Config
	for name, want := range map[string]bool{"a/b.avro": true, "a/b.jsonl.gz": true, "a/b.jsonl": true, "a/b.avsc": false, "a/": false, "x.parquet": false} {
		if c.IsDataFile(name) != want {
			t.Errorf("IsDataFile(%q) = %v", name, !want)
		}
	}
}

func TestMode(t *testing.T) {
	c, err := Parse([]byte("defaults:\n  mode: soft_delete\ntables:\n  a.b:\n    mode: current\n  c.d:\n    mode: scd2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Table("a.b").Mode; m != ModeCurrent {
		t.Errorf("a table's own mode overrides the default: got %s", m)
	}
	if m := c.Table("c.d").Mode; m != ModeSCD2 {
		t.Errorf("mode scd2: got %s", m)
	}
	if m := c.Table("x.y").Mode; m != ModeSoftDelete {
		t.Errorf("a table without its own mode takes the default's: got %s", m)
	}
	if m := (Config{}).Table("x.y").Mode; m != ModeCurrent {
		t.Errorf("no mode anywhere is mode current: got %s", m)
	}
}

// TestTheREADMEConfigurationParses: the example in README.md's
// Configuration section is a valid configuration and means what its
// comments say.
func TestTheREADMEConfigurationParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "### Configuration")
	if i < 0 {
		t.Fatal("README.md has no Configuration section")
	}
	start := strings.Index(s[i:], "```yaml\n")
	if start < 0 {
		t.Fatal("the Configuration section has no YAML example")
	}
	body := s[i+start+len("```yaml\n"):]
	body = body[:strings.Index(body, "```")]
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("the README example does not parse: %v", err)
	}
	tc := c.Table("shop.customers")
	if tc.DeletionVectors != Off || tc.Mode != ModeCurrent || tc.DVMinFileBytes != 1<<20 || len(tc.PrimaryKey) != 1 {
		t.Errorf("shop.customers: %+v", tc)
	}
	if ns := c.SourceOf("", "sales-db/dbo_orders/2026/01/05/10/00/f.avro").Namespace; ns != "sales" {
		t.Errorf("a file under sales-db/ has the namespace %q, want sales", ns)
	}
}

// TestTerraformAndDocsStateTheDefaultLimits: the limits users size the
// functions by are stated with this package's defaults in terraform's
// variable description, in docs/deploy.md and in the README's example.
func TestTerraformAndDocsStateTheDefaultLimits(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tf, deploy, readme := read("../../terraform/variables.tf"), read("../../docs/deploy.md"), read("../../README.md")
	for _, l := range []struct {
		key string
		def int64
	}{
		{"batch_max_events", DefaultBatchMaxEvents},
		{"batch_max_source_bytes", DefaultBatchMaxSourceBytes},
		{"batch_max_files", DefaultBatchMaxFiles},
		{"batch_max_bytes", DefaultBatchMaxBytes},
		{"max_record_bytes", DefaultMaxRecordBytes},
	} {
		if want := fmt.Sprintf("%s (default %d", l.key, l.def); !strings.Contains(tf, want) {
			t.Errorf("terraform/variables.tf does not say %q", want)
		}
		if want := fmt.Sprintf("| `%s` | `%d`", l.key, l.def); !strings.Contains(deploy, want) {
			t.Errorf("docs/deploy.md does not say %q", want)
		}
		if !regexp.MustCompile(`(?m)^` + l.key + `: +` + strconv.FormatInt(l.def, 10) + ` `).MatchString(readme) {
			t.Errorf("the README's configuration example does not set %s: %d", l.key, l.def)
		}
	}
}
